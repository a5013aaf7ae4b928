"""``atlas-bridge serve``: OpenLineage's HTTP API in front of Atlas.

Producers (Airflow, dbt-ol, the Spark agent, any OpenLineage client's ``http`` transport) POST run events
to ``/api/v1/lineage``. Each request is answered only once its events are *kept*: converted into Atlas
request bodies and written into the spool folder (``<output_dir>/spool`` by default, the hook's), where a
sender thread, or ``atlas-bridge push``, delivers them to Atlas (REST or Kafka) in order. So an
acknowledged event survives Atlas being down and the server being killed; an event that was not
acknowledged is the client's to send again (OpenLineage's clients retry a 5xx).

Requests are taken in groups (group commit): the events waiting at one moment are converted together and
cut into bodies as ``scan`` cuts them, so a busy producer costs few, full Atlas requests, and one event
alone costs one small one. The HTTP server is waitress (pure Python, no dependencies): it buffers each
request whole before a worker thread sees it, de-chunks bodies, enforces the body-size and connection
limits, and bounds the worker threads. Everything else here is the OpenLineage API's behaviour.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hmac
import json
import logging
import os
import signal
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atlas_bridge.errors import (
    AtlasAuthError,
    AtlasBridgeError,
    AtlasUnavailableError,
    ConfigError,
    FolderBusyError,
)

if TYPE_CHECKING:
    from atlas_bridge.config import Settings

logger = logging.getLogger(__name__)

LINEAGE_PATH = "/api/v1/lineage"
"""Where OpenLineage's HTTP transports post by default (``endpoint: api/v1/lineage``)."""
BATCH_PATH = "/api/v1/lineage/batch"
"""The spec's batch endpoint: a JSON array of events."""
HEALTH_PATHS = ("/health", "/healthz")
READY_PATHS = ("/ready", "/readyz")


@dataclasses.dataclass
class Conversion:
    """What a group of events gives: Atlas request bodies in sending order, the events that are not
    OpenLineage (their index -> why; they are in no body), and problems worth a log line."""

    batches: list[dict[str, Any]]
    invalid: dict[int, list[str]] = dataclasses.field(default_factory=dict)
    problems: list[str] = dataclasses.field(default_factory=list)


Converter = Callable[[list[dict[str, Any]]], Conversion]
"""Events -> their :class:`Conversion` (validating them on the way: the mapping checks each event)."""
Validator = Callable[[Any], list[str]]
"""An event -> what makes it not OpenLineage (empty when it is)."""


@dataclasses.dataclass(frozen=True)
class ServeOptions:
    """How the server listens and keeps; each has a flag, an ``ATLAS_BRIDGE_SERVE_*`` variable and an
    ``atlas.hook.atlas_bridge.serve.*`` property (see :func:`atlas_bridge.cli.serve`)."""

    host: str = "127.0.0.1"
    port: int = 5000
    """Marquez's port, which OpenLineage's examples use."""
    api_keys: tuple[str, ...] = ()
    """Accepted bearer tokens (several: a key being rotated); empty = no authentication."""
    max_body_bytes: int = 10 * 1024 * 1024
    """Largest body, as sent and once decompressed; larger is a 413."""
    threads: int = 8
    """Requests handled at once (more wait, buffered, in the server)."""
    max_connections: int = 100
    """Open connections; beyond, new ones wait in the listen backlog."""
    batch_size: int = 1000
    """Most entities in one Atlas request body (``scan --batch-size``)."""
    max_group_events: int = 500
    """Most events converted and written together."""
    retry_interval_s: float = 30.0
    """How long the sender leaves Atlas alone after it did not answer."""
    drain_timeout_s: float = 20.0
    """On SIGTERM, the longest wait for requests in flight and the batch being sent."""
    keep_timeout_s: float = 30.0
    """The longest a request waits for its events to be kept before a 503 (the client sends again)."""
    fsync: bool = True
    """Flush each written group to the disk before acknowledging it (survives a power cut, not only
    a killed process)."""


class NotKeptError(AtlasBridgeError):
    """The events of a request could not be kept (disk full, shutting down): the request gets a 503."""


class InvalidEventError(AtlasBridgeError):
    """An event of the request is not OpenLineage: the request gets a 400 with ``problems``."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("not a valid OpenLineage event")
        self.problems = problems


# ---------------------------------------------------------------------------------------------------------
# Conversion: the one place the OpenLineage mapping is called.


def default_converter(settings: Settings, options: ServeOptions) -> Converter:
    """OpenLineage events -> Atlas bodies, through the project's mapping and ``to_atlas_batches``."""
    from atlas_bridge.atlas.convert import to_atlas_batches
    from atlas_bridge.atlas.limits import DEFAULT_MAX_BYTES

    def convert(events: list[dict[str, Any]]) -> Conversion:
        from atlas_bridge.openlineage.read import read_events

        # (source, index, event): the mapping's problems then carry the index as their line, so an invalid
        # event is told apart and answered 400 without a second schema check of every event here
        read = read_events([("serve", i, e) for i, e in enumerate(events)], source="serve")
        batches = to_atlas_batches(
            read.result.lineage,
            namespace=settings.namespace,
            max_entities=options.batch_size,
            max_bytes=DEFAULT_MAX_BYTES,
            runs=read.runs,
        )
        out = Conversion(batches)
        for p in read.result.problems:
            _, marker, why = p.message.partition(_NOT_OPENLINEAGE)
            if marker and p.line is not None:
                out.invalid.setdefault(p.line, []).append(why)
            else:
                out.problems.append(p.message)
        return out

    return convert


_NOT_OPENLINEAGE = "not a valid OpenLineage event: "
"""How the mapping's problem for an invalid event reads (``read_events``)."""


def default_validator() -> Validator:
    """The OpenLineage spec's JSON schema check of the mapping package."""
    from atlas_bridge.openlineage.schema import validate_event

    check: Validator = validate_event
    return check


# ---------------------------------------------------------------------------------------------------------
# Keeping: events -> bodies in the spool, in groups; a sender thread delivers the spool.


class _Request:
    __slots__ = ("done", "error", "events", "invalid", "unconverted")

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events
        self.done = threading.Event()
        self.error: str | None = None
        self.unconverted = 0
        self.invalid: list[str] = []


class EventKeeper:
    """Writes the events of many requests as Atlas bodies into one folder, a group at a time.

    ``keep(events)`` returns once they are written (and flushed to disk with ``fsync``), or raises
    :class:`NotKeptError`. An event the mapping cannot convert is kept as it came, as JSON lines in
    ``unconverted_dir`` (``atlas-bridge scan`` reads them once the mapping is mended), never dropped.
    """

    def __init__(
        self,
        convert: Converter,
        validate: Validator,
        folder: Path,
        unconverted_dir: Path,
        *,
        max_group_events: int = 500,
        fsync: bool = True,
        written: Callable[[], None] | None = None,
    ) -> None:
        from atlas_bridge.atlas.sink import FileSink

        self.convert = convert
        self.validate = validate
        self.folder = folder
        self.unconverted_dir = unconverted_dir
        self.max_group_events = max(1, max_group_events)
        self.fsync = fsync
        self.written = written
        self.sink = FileSink(folder)
        self.events_kept = 0
        self.batches_written = 0
        self.unconverted = 0
        self._queue: deque[_Request] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="atlas-bridge-keeper", daemon=True)
        self._thread.start()

    def keep(self, events: list[dict[str, Any]], timeout_s: float) -> int:
        """Block until ``events`` are kept; returns how many of them were kept unconverted.

        Raises :class:`InvalidEventError` when one is not OpenLineage (the request's valid events, of a
        batch, are kept all the same), :class:`NotKeptError` when they could not be kept."""
        request = _Request(events)
        with self._cond:
            if self._closed:
                msg = "the server is shutting down"
                raise NotKeptError(msg)
            self._queue.append(request)
            self._cond.notify()
        if not request.done.wait(timeout_s):
            # Still queued: take it back so it is never written after a 503 (the client sends it again).
            with self._cond:
                if request in self._queue:
                    self._queue.remove(request)
                    msg = f"not kept within {timeout_s:g}s"
                    raise NotKeptError(msg)
            request.done.wait()  # being written: that is quick
        if request.error is not None:
            raise NotKeptError(request.error)
        if request.invalid:
            raise InvalidEventError(request.invalid)
        return request.unconverted

    def close(self) -> None:
        """Write what is queued, then stop."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                group: list[_Request] = []
                count = 0
                while self._queue and (
                    not group or count + len(self._queue[0].events) <= self.max_group_events
                ):
                    request = self._queue.popleft()
                    group.append(request)
                    count += len(request.events)
            try:
                self._write_group(group)
            except Exception as e:
                logger.error("could not keep %d event(s): %s", count, e)
                for request in group:
                    request.error = f"could not keep the events: {e.__class__.__name__}: {e}"
            for request in group:
                request.done.set()

    def _write_group(self, group: list[_Request]) -> None:
        events = [e for r in group for e in r.events]
        try:
            conversion = self.convert(events)
        except Exception as e:
            if len(group) == 1:
                self._unconvertible(group[0], e)
                return
            logger.info(
                "a group of %d events did not convert together (%s); one request at a time", len(events), e
            )
            for request in group:
                self._write_one(request)
            return
        self._write(group, conversion)

    def _write_one(self, request: _Request) -> None:
        try:
            conversion = self.convert(request.events)
        except Exception as e:
            self._unconvertible(request, e)
            return
        self._write([request], conversion)

    def _unconvertible(self, request: _Request, error: BaseException) -> None:
        """The mapping failed on this request: a 400 if it is not OpenLineage, else kept as it came."""
        problems: list[str] = []
        for i, event in enumerate(request.events):
            where = f"event {i}: " if len(request.events) > 1 else ""
            try:
                problems.extend(f"{where}{p}" for p in self.validate(event))
            except Exception as e:  # a validator failing on odd input: that input's problem
                problems.append(f"{where}could not be validated ({e.__class__.__name__})")
        if problems:
            request.invalid = problems
            return
        self._keep_unconverted(request, error)

    def _write(self, group: list[_Request], conversion: Conversion) -> None:
        offset = 0
        invalid = 0
        for request in group:
            for i in range(len(request.events)):
                for why in conversion.invalid.get(offset + i, ()):
                    request.invalid.append(f"event {i}: {why}" if len(request.events) > 1 else why)
                invalid += (offset + i) in conversion.invalid
            offset += len(request.events)
        for problem in conversion.problems:
            logger.info("openlineage: %s", problem)
        paths = [self.sink.write(batch) for batch in conversion.batches]
        if self.fsync and paths:
            for path in paths:
                _fsync_file(path)
            _fsync_file(self.folder / "manifest.json")
            _fsync_dir(self.folder)
        self.events_kept += offset - invalid
        self.batches_written += len(paths)
        if paths and self.written is not None:
            self.written()

    def _keep_unconverted(self, request: _Request, error: BaseException) -> None:
        self.unconverted_dir.mkdir(parents=True, exist_ok=True)
        path = self.unconverted_dir / f"events-{time.strftime('%Y%m%d')}.jsonl"
        text = "".join(json.dumps(e, sort_keys=True, ensure_ascii=False) + "\n" for e in request.events)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            if self.fsync:
                os.fsync(fh.fileno())
        request.unconverted = len(request.events)
        self.unconverted += len(request.events)
        logger.error(
            "could not convert %d OpenLineage event(s) (%s: %s); kept as they came in %s",
            len(request.events),
            error.__class__.__name__,
            error,
            path,
        )


def _fsync_file(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):  # a sender may have cleared it already
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


REUSE_CACHE_S = 600.0
"""How long the sender trusts what it learnt of other hooks' entities (``reuse_types``)."""


class _Stop(Exception):
    """Raised from a push's progress callback: stop at this batch boundary (the rest stays kept)."""


class Sender:
    """Delivers the spool to Atlas (or Kafka) through the project's sink, in order, for as long as the
    server runs: when new bodies are written, and every ``retry_interval_s`` while Atlas does not answer.

    A refused login stops delivery until a restart (retrying could lock the account); everything stays
    kept. Typedefs are registered (REST) before the first delivery, as ``push`` does.
    """

    def __init__(self, sink: Any, settings: Settings, *, retry_interval_s: float, register: bool) -> None:
        self.sink = sink
        self.settings = settings
        self.retry_interval_s = retry_interval_s
        self.register = register
        self.state = "starting"
        """``up``, ``down``, ``login refused`` or ``starting``: for the readiness answer and the log."""
        self.last_error: str | None = None
        self.delivered_batches = 0
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._retry_at = 0.0
        self._reuse_until = 0.0
        self._thread = threading.Thread(target=self._run, name="atlas-bridge-sender", daemon=True)

    def start(self) -> Sender:
        self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def pending(self) -> int:
        try:
            return int(self.sink.spool_pending())
        except (OSError, ValueError, AtlasBridgeError):
            return -1

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(timeout=max(0.05, min(1.0, self._retry_at - time.monotonic())))
            self._wake.clear()
            if self._stopping.is_set():
                return
            if self.state == "login refused" or time.monotonic() < self._retry_at:
                continue
            try:
                self._deliver()
            except Exception as e:
                logger.exception("sender: unexpected error, retrying in %gs", self.retry_interval_s)
                self.last_error = f"{e.__class__.__name__}: {e}"
                self._retry_at = time.monotonic() + self.retry_interval_s

    def _deliver(self) -> None:
        if not self.sink.spool_pending():
            return
        try:
            if self.register:
                from atlas_bridge.atlas.typedefs import register_typedefs

                logger.info("typedefs: %s", register_typedefs(self.sink.client).summary())
                self.register = False
            if getattr(self.sink, "reuse", None) is not None and time.monotonic() > self._reuse_until:
                from atlas_bridge.atlas.reuse import reuse_from_settings

                # its lookups are cached: forgotten now and then, so a Hive table made since is found and
                # the cache of a server that runs for months stays small
                self.sink.reuse = reuse_from_settings(self.settings, self.sink.client)
                self._reuse_until = time.monotonic() + REUSE_CACHE_S
            self._flush()
        except FolderBusyError:
            self._retry_at = time.monotonic() + 0.5  # another process sends the spool: its batches are safe
        except AtlasAuthError as e:
            self.state, self.last_error = "login refused", str(e)
            logger.error(
                "Atlas refused the login; nothing more is sent until a restart (every event stays kept in"
                " %s for `atlas-bridge push`): %s",
                self.sink.spool_dir,
                e,
            )
        except AtlasUnavailableError as e:
            if self.state != "down":
                logger.warning(
                    "Atlas is not answering; events stay kept in %s, retried every %gs: %s",
                    self.sink.spool_dir,
                    self.retry_interval_s,
                    e,
                )
            self.state, self.last_error = "down", str(e)
            self._retry_at = time.monotonic() + self.retry_interval_s
        except _Stop:
            return
        except ConfigError as e:  # the spool emptied meanwhile (another push), or is unreadable
            logger.info("sender: %s", e)
            self._retry_at = time.monotonic() + self.retry_interval_s
        else:
            if self.state != "up":
                logger.info("delivering to %s", getattr(self.sink.client, "base_url", "Atlas"))
            self.state, self.last_error = "up", None

    def _flush(self) -> None:
        from atlas_bridge.atlas.sink import push_directory

        def progress(done: int, total: int) -> None:
            self.delivered_batches += 1
            if self._stopping.is_set():
                raise _Stop

        report = push_directory(
            self.sink.spool_dir,
            self.sink.client,
            reuse=self.sink.reuse,
            clear=True,
            wait_s=0,
            progress=progress,
        )
        self.sink.report.merge(report)
        for failure in report.failures:
            logger.error("Atlas refused a batch (kept in %s/rejected): %s", self.sink.spool_dir, failure)

    def stop(self, timeout_s: float) -> None:
        """Finish the batch in flight (at most ``timeout_s``), keep the rest."""
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        if self._thread.is_alive():
            abort = getattr(self.sink.client, "abort", None)
            if callable(abort):
                abort()
            self._thread.join(5)


# ---------------------------------------------------------------------------------------------------------
# The WSGI application.


_JSON_TYPES = ("application/json", "text/json")


class _Reply(Exception):
    """An HTTP answer other than success, raised from deep inside the handling."""

    def __init__(self, status: int, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.extra = extra


_REASONS = {
    200: "OK",
    202: "Accepted",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class LineageApp:
    """The OpenLineage endpoint, health and readiness, as a WSGI application (server-agnostic)."""

    def __init__(
        self,
        keeper: EventKeeper,
        validate: Validator,
        options: ServeOptions,
        *,
        sender: Sender | None = None,
        delivery: str = "rest",
    ) -> None:
        self.keeper = keeper
        self.validate = validate
        self.options = options
        self.sender = sender
        self.delivery = delivery
        self.draining = threading.Event()
        self.in_flight = 0
        self.accepted = 0
        self.refused = 0
        self._lock = threading.Lock()
        self._keys = [k.encode("utf-8") for k in options.api_keys]

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        with self._lock:
            self.in_flight += 1
        try:
            status, headers, body = self._handle(environ)
        finally:
            with self._lock:
                self.in_flight -= 1
        if self.draining.is_set():
            headers.append(("Connection", "close"))
        headers.append(("Content-Length", str(len(body))))
        start_response(f"{status} {_REASONS.get(status, '')}", headers)
        return [body]

    def _handle(self, environ: Mapping[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
        path = str(environ.get("PATH_INFO") or "/").rstrip("/") or "/"
        method = str(environ.get("REQUEST_METHOD") or "GET")
        try:
            if path in (LINEAGE_PATH, BATCH_PATH):
                if method != "POST":
                    raise _Reply(405, f"{path} takes POST", allow="POST")
                return self._lineage(environ, batch=path == BATCH_PATH)
            if path in HEALTH_PATHS and method in ("GET", "HEAD"):
                return _json(200, {"status": "ok"})
            if path in READY_PATHS and method in ("GET", "HEAD"):
                return self._ready()
            raise _Reply(404, f"no such endpoint: {path} (OpenLineage events go to POST {LINEAGE_PATH})")
        except _Reply as r:
            if r.status >= 400:
                with self._lock:
                    self.refused += 1
                logger.info("%s %s -> %d: %s", method, path, r.status, r.error)
            headers = []
            if "allow" in r.extra:
                headers.append(("Allow", r.extra.pop("allow")))
            if r.status == 401:
                headers.append(("WWW-Authenticate", 'Bearer realm="atlas-bridge"'))
            if r.status == 503:
                headers.append(("Retry-After", str(r.extra.pop("retry_after", 1))))
            status, base, body = _json(r.status, {"error": r.error, **r.extra})
            return status, base + headers, body
        except Exception:
            logger.exception("%s %s: internal error", method, path)
            return _json(500, {"error": "internal error (see the server's log)"})

    def _ready(self) -> tuple[int, list[tuple[str, str]], bytes]:
        info: dict[str, Any] = {"delivery": self.delivery, "events_kept": self.keeper.events_kept}
        if self.sender is not None:
            info["atlas"] = self.sender.state
            info["pending_batches"] = self.sender.pending()
            if self.sender.last_error:
                info["last_error"] = self.sender.last_error
        if self.keeper.unconverted:
            info["events_unconverted"] = self.keeper.unconverted
        if self.draining.is_set():
            status, headers, body = _json(503, {"status": "draining", **info})
            return status, [*headers, ("Retry-After", "5")], body
        return _json(200, {"status": "ready", **info})

    def _lineage(
        self, environ: Mapping[str, Any], *, batch: bool
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        if self.draining.is_set():
            raise _Reply(503, "the server is shutting down; send the event again", retry_after=5)
        self._check_key(str(environ.get("HTTP_AUTHORIZATION") or ""))
        ctype = str(environ.get("CONTENT_TYPE") or "").split(";", 1)[0].strip().lower()
        if ctype and ctype not in _JSON_TYPES and not ctype.endswith("+json"):
            raise _Reply(415, f"Content-Type {ctype} is not JSON: send Content-Type: application/json")
        body = self._body(environ)
        try:
            data = json.loads(body)
        except UnicodeDecodeError as e:
            raise _Reply(400, f"the body is not UTF-8 (byte {e.start})") from None
        except json.JSONDecodeError as e:
            raise _Reply(400, f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
        except RecursionError:
            raise _Reply(400, "invalid JSON: nested too deeply") from None
        events = self._events(data, batch=batch)
        try:
            unconverted = self.keeper.keep(events, self.options.keep_timeout_s)
        except InvalidEventError as e:
            raise _Reply(400, "not a valid OpenLineage event", problems=e.problems[:50]) from None
        except NotKeptError as e:
            raise _Reply(
                503, f"the event(s) could not be kept, send them again: {e}", retry_after=2
            ) from None
        with self._lock:
            self.accepted += len(events)
        if unconverted:
            return _json(202, {"status": "kept unconverted", "events": len(events)})
        return _json(200, {"status": "kept", "events": len(events)})

    def _check_key(self, header: str) -> None:
        if not self._keys:
            return
        scheme, _, token = header.partition(" ")
        if not header:
            raise _Reply(401, "an API key is required: send Authorization: Bearer <key>")
        if scheme.lower() != "bearer" or not token.strip():
            raise _Reply(401, "the Authorization header must be 'Bearer <key>'")
        given = token.strip().encode("utf-8")
        if not any(hmac.compare_digest(given, key) for key in self._keys):
            raise _Reply(401, "the API key is not accepted")

    def _body(self, environ: Mapping[str, Any]) -> bytes:
        limit = self.options.max_body_bytes
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            raise _Reply(400, "Content-Length is not a number") from None
        if length > limit:
            raise _Reply(413, f"the body is {length} bytes; the limit is {limit} (max_body_bytes)")
        raw = environ["wsgi.input"].read(length) if length else b""
        if len(raw) > limit:
            raise _Reply(413, f"the body is over {limit} bytes (max_body_bytes)")
        encoding = str(environ.get("HTTP_CONTENT_ENCODING") or "identity").strip().lower()
        if encoding in ("identity", ""):
            data = raw
        elif encoding in ("gzip", "x-gzip"):
            data = _gunzip(raw, limit)
        else:
            raise _Reply(415, f"Content-Encoding {encoding} is not supported (gzip or none)")
        if not data.strip():
            raise _Reply(400, "the body is empty: POST one OpenLineage event as JSON")
        return data

    def _events(self, data: Any, *, batch: bool) -> list[dict[str, Any]]:
        if batch:
            if not isinstance(data, list):
                raise _Reply(400, f"{BATCH_PATH} takes a JSON array of OpenLineage events")
            items = data
        else:
            items = [data]
        problems: list[str] = []
        for i, item in enumerate(items):
            where = f"event {i}: " if batch else ""
            if not isinstance(item, dict):
                problems.append(f"{where}an OpenLineage event is a JSON object, not {_json_kind(item)}")
                continue
            if not batch:
                continue  # one event: the mapping checks it as it converts (one schema check, not two)
            try:
                found = self.validate(item)
            except RecursionError:
                found = ["nested too deeply"]
            except Exception as e:
                found = [f"could not be validated ({e.__class__.__name__})"]
            problems.extend(f"{where}{p}" for p in found)
        if problems:
            raise _Reply(400, "not a valid OpenLineage event", problems=problems[:50])
        return items


def _json_kind(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _gunzip(raw: bytes, limit: int) -> bytes:
    """Decompress a gzip body, never past ``limit`` bytes (a small bomb cannot fill the memory)."""
    out: list[bytes] = []
    size = 0
    data = raw
    try:
        while data:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            chunk = d.decompress(data, limit + 1 - size)
            size += len(chunk)
            out.append(chunk)
            if size > limit or d.unconsumed_tail:
                raise _Reply(413, f"the body is over {limit} bytes once decompressed (max_body_bytes)")
            if not d.eof:
                raise _Reply(400, "the gzip body is cut short")
            data = d.unused_data  # another gzip member
    except zlib.error as e:
        raise _Reply(400, f"the body is not valid gzip ({e})") from None
    return b"".join(out)


def _json(status: int, payload: Mapping[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    body = (json.dumps(payload, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    return status, [("Content-Type", "application/json")], body


# ---------------------------------------------------------------------------------------------------------
# Running it.


@dataclasses.dataclass
class Server:
    """A running ``serve``: its app, keeper, sender and the waitress server (for tests and the CLI)."""

    app: LineageApp
    keeper: EventKeeper
    sender: Sender | None
    sink: Any
    http: Any
    options: ServeOptions

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}"

    @property
    def address(self) -> tuple[str, int]:
        return str(self.http.effective_host), int(self.http.effective_port)

    def drain(self) -> None:
        """Stop taking events, finish the requests in flight and the batch being sent; keep the rest."""
        deadline = time.monotonic() + self.options.drain_timeout_s
        self.app.draining.set()
        self.http.accepting = False  # new connections wait in the backlog, then are refused at close
        while self.app.in_flight and time.monotonic() < deadline:
            time.sleep(0.02)
        self.keeper.close()
        if self.sender is not None:
            self.sender.stop(max(0.0, deadline - time.monotonic()))
        _wait_flushed(self.http, min(2.0, max(0.1, deadline - time.monotonic())))


def _wait_flushed(http: Any, timeout_s: float) -> None:
    """Let the answers already written reach their clients before the sockets close (bounded)."""
    deadline = time.monotonic() + timeout_s
    channels = getattr(http, "_map", {})
    while time.monotonic() < deadline:
        busy = [c for c in list(channels.values()) if getattr(c, "total_outbufs_len", 0)]
        if not busy:
            return
        time.sleep(0.01)


def build_server(
    settings: Settings,
    options: ServeOptions,
    *,
    convert: Converter | None = None,
    validate: Validator | None = None,
) -> Server:
    """Everything ``serve`` runs, bound and ready to ``run``; nothing is served yet."""
    from waitress.server import create_server

    from atlas_bridge.atlas.sink import AtlasSink, FileSink, make_sink

    if settings.disabled:
        msg = "atlas-bridge is disabled (disabled=true): serve would drop every event"
        raise ConfigError(msg)
    sink: Any = make_sink(settings)
    if isinstance(sink, AtlasSink):
        assert sink.spool_dir is not None
        folder = sink.spool_dir
        delivery = "kafka" if settings.sink_kind == "kafka" else "rest"
        sender: Sender | None = Sender(
            sink, settings, retry_interval_s=options.retry_interval_s, register=delivery == "rest"
        )
    else:
        assert isinstance(sink, FileSink)
        folder = sink.directory
        delivery = "files"
        sender = None
    check = validate if validate is not None else default_validator()
    keeper = EventKeeper(
        convert if convert is not None else default_converter(settings, options),
        check,
        folder,
        Path(settings.output_dir) / "openlineage-unconverted",
        max_group_events=options.max_group_events,
        fsync=options.fsync,
        written=sender.wake if sender is not None else None,
    )
    app = LineageApp(
        keeper,
        check,
        options,
        sender=sender,
        delivery=delivery,
    )
    http = create_server(
        app,
        host=options.host,
        port=options.port,
        threads=options.threads,
        connection_limit=options.max_connections,
        max_request_body_size=options.max_body_bytes,
        channel_timeout=60,
        ident="atlas-bridge",
        expose_tracebacks=False,
        asyncore_use_poll=True,
    )
    return Server(app=app, keeper=keeper, sender=sender, sink=sink, http=http, options=options)


def run_server(server: Server, *, ready: Callable[[Server], None] | None = None) -> None:
    """Serve until SIGTERM or SIGINT, then drain (see :meth:`Server.drain`). Main thread only."""
    import _thread

    stopping = threading.Event()
    drained = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        if drained.is_set():
            raise KeyboardInterrupt  # waitress's own way out of its loop (as for Ctrl-C)
        if stopping.is_set():
            return
        stopping.set()
        logger.warning("%s: finishing the requests in flight, keeping the rest", signal.Signals(signum).name)

        def drain() -> None:
            try:
                server.drain()
            finally:
                drained.set()
                _thread.interrupt_main()  # runs on_signal in the main thread, which now leaves the loop

        threading.Thread(target=drain, name="atlas-bridge-drain", daemon=True).start()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    if server.sender is not None:
        server.sender.start()
        server.sender.wake()  # what an earlier run kept goes out first
    if ready is not None:
        ready(server)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            server.http.run()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if not drained.is_set():  # the loop ended by itself
        server.drain()
    with contextlib.suppress(Exception):
        server.http.close()
