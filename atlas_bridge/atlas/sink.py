"""Where Atlas payloads go: Atlas itself, a folder of request bodies, or nowhere.

Every sink takes the same ``AtlasEntitiesWithExtInfo`` batches (``{"entities": [...],
"referredEntities": {}}``), so a dry run writes exactly what a live run would POST, and
``atlas-bridge push DIR`` can replay it later.

A folder written by :class:`FileSink` holds ``0001-entities.json``, ``0002-entities.json``... (sorted keys,
2-space indent, one file per batch) and ``manifest.json`` listing them in order. :func:`push_directory`
records what Atlas acknowledged in ``.atlas-bridge-pushed.json`` (per Atlas address), so a re-run after a
crash resumes where it stopped instead of sending everything again.

Any number of processes may write to one folder at once (jobs sharing a spool, scans sharing ``unsent/``):
each write takes an exclusive lock on ``.atlas-bridge.lock`` (``flock``), re-reads the manifest, picks a
file name no one holds and appends its entry. One process at a time sends a folder
(``.atlas-bridge-push.lock``); a spool is then cleared of exactly the batches that were acknowledged,
never of one written meanwhile. A batch Atlas refuses keeps Atlas's answer beside it
(``NNNN-entities.error.json``).
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from atlas_bridge.atlas.encoded import EncodedBatch, as_dict, entity_count
from atlas_bridge.atlas.reuse import post_batch
from atlas_bridge.errors import (
    AtlasAuthError,
    AtlasError,
    AtlasUnavailableError,
    ConfigError,
    FolderBusyError,
)

if TYPE_CHECKING:
    from atlas_bridge.atlas.client import AtlasClient
    from atlas_bridge.atlas.kafka import KafkaPublisher
    from atlas_bridge.atlas.reuse import EntityReuse
    from atlas_bridge.config import Settings

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
PUSH_STATE = ".atlas-bridge-pushed.json"
MANIFEST_FORMAT = "atlas-bridge.batches/1"
LOCK = ".atlas-bridge.lock"
"""Held while a folder's manifest and batch files change (every write, and a spool's clearing)."""
PUSH_LOCK = ".atlas-bridge-push.lock"
"""Held while a folder is sent: one sender at a time, so nothing is sent twice at once or cleared midway."""
REJECTED = "rejected"
"""A spool's sub-folder of batches Atlas refused (a folder ``push`` sends once they are fixed)."""
ERROR_SUFFIX = ".error.json"
_BATCH_RE = re.compile(r"^(\d{4,})-entities\.json$")


def error_path(batch_path: Path) -> Path:
    """Where Atlas's answer to a refused batch is kept: ``0003-entities.error.json`` for ``0003-...``."""
    return batch_path.with_name(batch_path.name.removesuffix(".json") + ERROR_SUFFIX)


def _error_record(file: str, error: BaseException) -> str:
    """Atlas's answer to a refused batch, as kept beside it (secret-free: the client scrubs its errors)."""
    record: dict[str, Any] = {"file": file, "message": str(error)}
    for name in ("status_code", "error_code", "body"):
        value = getattr(error, name, None)
        if value is not None:
            record[name] = value
    return json.dumps(record, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


@contextlib.contextmanager
def folder_lock(folder: Path, name: str = LOCK, *, wait_s: float | None = None) -> Iterator[None]:
    """An exclusive lock on ``folder`` (``flock`` on a lock file in it), between processes and threads.

    ``wait_s``: None waits as long as the holder needs (writers hold it for a local write only); else
    :class:`FolderBusyError` after that many seconds. The kernel releases it when its holder dies.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / name, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        msg = f"cannot write in {folder} (atlas-bridge keeps its lock and records there): {e.strerror or e}"
        raise ConfigError(msg) from e
    try:
        if wait_s is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        msg = f"another process is sending {folder} right now"
                        raise FolderBusyError(msg, folder=str(folder)) from None
                    time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def dumps_batch(batch: Mapping[str, Any]) -> str:
    """The one on-disk form of a request body: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(as_dict(batch), sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def _check_batch(batch: Any) -> None:
    if isinstance(batch, EncodedBatch):  # made by the scan: a body, and checking would decode it
        return
    if not isinstance(batch, Mapping) or not isinstance(batch.get("entities"), list):
        msg = "a batch must be an AtlasEntitiesWithExtInfo dict with an 'entities' list"
        raise TypeError(msg)


def _atomic_write(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a crash never leaves half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class PushReport:
    """What Atlas did with the batches sent (from ``mutatedEntities``), and what failed."""

    batches: int = 0
    """Batches Atlas acknowledged in this run."""
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    skipped: int = 0
    """Batches not sent because an earlier run already delivered them."""
    published: int = 0
    """Entities handed to Kafka (Atlas applies them later, so there are no created / updated counts)."""
    spooled: int = 0
    """Batches kept on disk because Atlas could not be reached."""
    failures: list[str] = field(default_factory=list)
    guid_assignments: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        return len(self.failures)

    def add_response(self, batch: Mapping[str, Any], response: Mapping[str, Any]) -> None:
        """Count one acknowledged batch."""
        if "published" in response:  # a Kafka acknowledgement: the brokers have it, Atlas not yet
            self.batches += 1
            self.published += int(response["published"])
            return
        mutated = response.get("mutatedEntities") or {}
        created = len(mutated.get("CREATE") or [])
        updated = len(mutated.get("UPDATE") or []) + len(mutated.get("PARTIAL_UPDATE") or [])
        sent = entity_count(batch) + (
            0 if isinstance(batch, EncodedBatch) else len(batch.get("referredEntities") or {})
        )
        self.batches += 1
        self.created += created
        self.updated += updated
        self.deleted += len(mutated.get("DELETE") or []) + len(mutated.get("PURGE") or [])
        self.unchanged += max(0, sent - created - updated)
        self.guid_assignments.update(response.get("guidAssignments") or {})

    def merge(self, other: PushReport) -> None:
        for name in (
            "batches",
            "created",
            "updated",
            "unchanged",
            "deleted",
            "skipped",
            "spooled",
            "published",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failures.extend(other.failures)
        self.guid_assignments.update(other.guid_assignments)

    def summary(self) -> str:
        """One line for logs and the CLI.

        >>> PushReport(batches=2, created=3, updated=1, unchanged=4).summary()
        'created 3, updated 1, unchanged 4, failed 0 (2 batches)'
        """
        if self.published and not (self.created or self.updated or self.unchanged):
            text = f"published {self.published} entities to Kafka"
        else:
            text = f"created {self.created}, updated {self.updated}, unchanged {self.unchanged}"
        text += f", failed {self.failed}"
        extras = [f"{self.batches} batches"]
        if self.skipped:
            extras.append(f"{self.skipped} already sent")
        if self.spooled:
            extras.append(f"{self.spooled} kept on disk")
        if self.deleted:
            extras.append(f"{self.deleted} deleted by Atlas")
        return f"{text} ({', '.join(extras)})"


class EntityPoster(Protocol):
    """What takes a batch: an :class:`~atlas_bridge.atlas.client.AtlasClient`, or a
    :class:`~atlas_bridge.atlas.kafka.KafkaPublisher` (the same batch as a hook message on Kafka)."""

    @property
    def base_url(self) -> str: ...

    def post_entities(self, body: Any) -> dict[str, Any]: ...


@runtime_checkable
class Sink(Protocol):
    """Takes Atlas request bodies, one batch at a time."""

    def emit(self, batch: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class NoopSink:
    """Drops everything (the hook's disable switch, and benchmarks of the converter alone)."""

    def __init__(self) -> None:
        self.batches = 0

    def emit(self, batch: dict[str, Any]) -> None:
        _check_batch(batch)
        self.batches += 1

    def close(self) -> None:
        return None


_ANNOUNCED: set[str] = set()


def _announce_folder(directory: Path) -> None:
    key = str(directory.resolve())
    if key in _ANNOUNCED:
        return
    _ANNOUNCED.add(key)
    logger.warning(
        "atlas-bridge: no Atlas configured; the lineage is written to %s (send it with: atlas-bridge push %s;"
        " see it with: atlas-bridge page %s)",
        directory,
        directory,
        directory,
    )


class FileSink:
    """Writes each batch as the exact request body, numbered, plus a manifest that orders them.

    Numbering continues after the batches a folder already holds, so a long-running hook appends; with
    ``fresh=True`` the batches a previous run listed in the manifest are removed first (a scan's folder
    holds that scan's batches only). Files the manifest does not list are not ours: they are never
    listed, replaced or deleted, only reported in :attr:`foreign` (and their names are not reused).
    Any number of writers may share a folder: each write is made under the folder's lock, after
    re-reading the manifest others may have extended. A damaged manifest is rebuilt from the numbered
    files (with a warning), never a reason to lose a batch.
    Only the batch is written: nothing from the settings (no address, user or password) ever is.
    """

    def __init__(
        self, directory: str | os.PathLike[str], *, fresh: bool = False, announce: bool = False
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._announce = announce
        """Say once (per process and folder), at the first batch, where the lineage went and what next:
        the Spark hook with no Atlas configured would otherwise write it without a word."""
        self.files: list[Path] = []
        self._seen: tuple[int, int, int] | None = None
        self._entries: list[dict[str, Any]] = []
        self._problem: str | None = None
        with folder_lock(self.directory):
            entries = self._current()
            if fresh and self._problem:
                # Which numbered files were listed is unknown: delete none, list only this run's.
                entries = self._entries = []
            if fresh and entries:
                for entry in entries:
                    path = self.directory / entry["file"]
                    path.unlink(missing_ok=True)
                    error_path(path).unlink(missing_ok=True)
                logger.info("replaced %d batch file(s) of a previous run in %s", len(entries), self.directory)
                self._entries = []
                self._seen = None
                (self.directory / MANIFEST).unlink(missing_ok=True)
                (self.directory / PUSH_STATE).unlink(missing_ok=True)
            listed = {e["file"] for e in self._entries}
            self.foreign = sorted(
                (
                    p.name
                    for p in self.directory.glob("*-entities.json")
                    if _BATCH_RE.match(p.name) and p.name not in listed
                ),
                key=_number,
            )
        if self.foreign:
            logger.warning(
                "%s holds %d batch-like file(s) atlas-bridge did not write; left alone: %s",
                self.directory,
                len(self.foreign),
                ", ".join(self.foreign[:5]),
            )

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            st = (self.directory / MANIFEST).stat()
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _current(self) -> list[dict[str, Any]]:
        """The manifest's entries as they are now (re-read only when another writer changed it)."""
        stamp = self._stamp()
        if stamp is None:
            self._entries, self._seen = [], None
        elif stamp != self._seen:
            entries, self._problem = _load_entries(self.directory)
            if self._problem:
                logger.warning("%s", self._problem)
            self._entries, self._seen = entries, stamp
        return self._entries

    def emit(self, batch: dict[str, Any], *, error: BaseException | None = None) -> None:
        """Write one batch (and, for a batch Atlas refused, Atlas's answer beside it)."""
        self.write(batch, error=error)

    def write(self, batch: dict[str, Any], *, error: BaseException | None = None) -> Path:
        """:meth:`emit`, returning the batch file's path."""
        _check_batch(batch)
        return self.add_text(dumps_batch(batch), entity_count(batch), error=error)

    def add_text(self, text: str, entities: int, *, error: BaseException | str | None = None) -> Path:
        """Append a batch given as its file's text (a spooled batch moved here as it was)."""
        with folder_lock(self.directory):
            entries = self._current()
            number = max((_number(e["file"]) for e in entries), default=0) + 1
            while (self.directory / f"{number:04d}-entities.json").exists():  # another's, or a crash's
                number += 1
            name = f"{number:04d}-entities.json"
            path = self.directory / name
            _atomic_write(path, text)
            if error is not None:
                record = error if isinstance(error, str) else _error_record(name, error)
                _atomic_write(error_path(path), record)
            entries.append({"file": name, "entities": entities, "sha256": _sha256(text)})
            _write_manifest(self.directory, entries)
            self._seen = self._stamp()
        self.files.append(path)
        logger.debug("wrote %s (%d entities)", path, entities)
        if self._announce:
            _announce_folder(self.directory)
        return path

    def close(self) -> None:
        return None

    @property
    def pending(self) -> int:
        """How many batches the folder holds."""
        return len(_load_entries(self.directory)[0])


class AtlasSink:
    """POSTs each batch to ``/v2/entity/bulk``; keeps what it cannot deliver in ``spool_dir``.

    When Atlas is unreachable (:class:`AtlasUnavailableError`: connection refused, timeouts, 5xx after
    retries) the batch is written to the spool folder and ``emit`` returns; later batches queue up behind
    it so order is kept (a batch may reference what an earlier one created). :meth:`flush_spool` resends
    them through :func:`push_directory`, which records each acknowledged batch, so nothing is lost and
    nothing acknowledged is sent twice. A batch Atlas refuses for its content (400, 413...) is kept in
    ``spool_dir/rejected`` with Atlas's answer beside it and counted in ``report.failures``: resending
    it as it is would not help, losing it would lose lineage. Without a spool folder it is raised.
    """

    def __init__(
        self,
        client: EntityPoster,
        spool_dir: str | os.PathLike[str] | None = None,
        *,
        retry_interval_s: float = 60.0,
        reuse: EntityReuse | None = None,
    ) -> None:
        self.client = client
        self.reuse = reuse
        self.spool_dir = Path(spool_dir) if spool_dir is not None else None
        self.report = PushReport()
        self.refused: AtlasAuthError | None = None
        self.retry_interval_s = retry_interval_s
        """After Atlas failed to answer, batches go straight to the spool for this long (then one try)."""
        self._down_until = 0.0

    def emit(self, batch: dict[str, Any]) -> None:
        _check_batch(batch)
        if self.refused is None and not self.offline and self.spool_pending():
            try:
                self.flush_spool()
            except FolderBusyError:  # another job sends the spool now: queue behind what it holds
                self._spool(batch)
                return
            except (AtlasUnavailableError, AtlasAuthError) as e:
                if isinstance(e, AtlasAuthError):
                    self.refused = e
                else:
                    self._down_until = time.monotonic() + self.retry_interval_s
                self._spool(batch)
                return
        if self.spool_dir is not None and (self.refused is not None or self.offline):
            # The login was refused once (never again in this sink's life), or Atlas did not answer a
            # moment ago: keep the batch at once instead of waiting on Atlas batch after batch.
            self._spool(batch)
            return
        try:
            response = post_batch(self.client, batch, self.reuse)
        except (AtlasUnavailableError, AtlasAuthError) as e:
            if self.spool_dir is None:
                raise
            if isinstance(e, AtlasAuthError):
                self.refused = e
            else:
                self._down_until = time.monotonic() + self.retry_interval_s
            logger.warning("%s did not take the batch; kept in %s: %s", self._name, self.spool_dir, e)
            self._spool(batch)
            return
        except AtlasError as e:
            if self.spool_dir is None:
                raise
            self._reject(batch, e)
            return
        self.report.add_response(batch, response)

    def _reject(self, batch: dict[str, Any], error: AtlasError) -> None:
        """Keep a batch Atlas refused, with its answer, where the log line says; never raise."""
        assert self.spool_dir is not None
        folder = self.spool_dir / REJECTED
        path = FileSink(folder).write(batch, error=error)
        self.report.failures.append(f"{path.name}: {error}")
        logger.error(
            "%s refused a batch; kept in %s with its answer in %s (send it after a fix with "
            "`atlas-bridge push %s`): %s",
            self._name,
            path,
            error_path(path).name,
            folder,
            error,
        )

    @property
    def _name(self) -> str:
        """What the batches go to, for log lines ("Atlas", or "Kafka" for a publisher)."""
        return str(getattr(self.client, "name", "Atlas"))

    @property
    def offline(self) -> bool:
        """Whether Atlas is being left alone for now (it did not answer lately, or :meth:`go_offline`)."""
        return time.monotonic() < self._down_until

    def go_offline(self) -> None:
        """Keep every batch from now on and cut the call in flight: the process ends and must not wait."""
        self._down_until = float("inf")
        abort = getattr(self.client, "abort", None)
        if callable(abort):
            abort()

    def _spool(self, batch: dict[str, Any]) -> None:
        assert self.spool_dir is not None
        FileSink(self.spool_dir).emit(batch)
        self.report.spooled += 1

    def keep(self, batch: dict[str, Any]) -> None:
        """Put a batch in the spool without trying Atlas (it goes out with the spool's next flush)."""
        _check_batch(batch)
        self._spool(batch)

    def spool_pending(self) -> int:
        """Batches in the spool not yet acknowledged by Atlas."""
        if self.spool_dir is None or not self.spool_dir.is_dir():
            return 0
        entries, _ = _load_entries(self.spool_dir)
        if not entries:
            return 0
        sent = _read_state(self.spool_dir).get(self.client.base_url, {})
        return sum(1 for e in entries if sent.get(e["file"]) != e.get("sha256"))

    def flush_spool(self) -> PushReport:
        """Resend spooled batches in order, removing each acknowledged one (refused ones go to
        ``rejected/``). Raises if Atlas is still down, :class:`FolderBusyError` if another process is
        sending the spool right now (its batches are then in good hands)."""
        if self.spool_dir is None or not self.spool_pending():
            return PushReport()
        report = push_directory(self.spool_dir, self.client, reuse=self.reuse, clear=True, wait_s=0)
        self.report.merge(report)
        return report

    def close(self) -> None:
        """Try the spool once more (unless Atlas just failed us); whatever cannot be sent stays on disk."""
        pending = self.spool_pending()
        if pending and (self.refused is not None or self.offline):
            logger.warning(
                "atlas-bridge: %d batch(es) kept in %s for the next run or `atlas-bridge push`",
                pending,
                self.spool_dir,
            )
            return
        if self.refused is None and not self.offline and self.spool_pending():
            try:
                self.flush_spool()
            except FolderBusyError as e:
                logger.info("%s; the spool's batches are left to it", e)
            except (AtlasUnavailableError, AtlasAuthError) as e:
                logger.warning(
                    "%s still unavailable; %d batches stay in %s: %s",
                    self._name,
                    self.spool_pending(),
                    self.spool_dir,
                    e,
                )


class _Mark:
    """A point in a :class:`QueuedSink`'s queue: when the sender reaches it, the spool is flushed and
    ``done`` is set (a hook's ``flush()``)."""

    def __init__(self, done: threading.Event) -> None:
        self.done = done


_STOP = object()


class QueuedSink:
    """An :class:`AtlasSink` fed through a sender thread, so the caller (the hook's worker) never waits on
    Atlas: while a call waits on a slow Atlas, events keep being read and converted, and their batches
    queue in order. Up to ``max_pending`` of them wait in memory; beyond that they wait on disk, in
    ``<spool>/overflow-<pid>-<id>/`` (numbered request bodies a ``push`` can send if the process is
    killed), never dropped. What the sender cannot deliver goes to the spool as usual.
    """

    def __init__(self, sink: AtlasSink, *, max_pending: int) -> None:
        if sink.spool_dir is None:
            msg = "a QueuedSink needs a sink with a spool folder"
            raise ValueError(msg)
        self.sink = sink
        self.max_pending = max(1, max_pending)
        self.overflowed = 0
        """Batches that waited on disk because the sender was behind."""
        self.errors = 0
        self._cond = threading.Condition()
        self._items: collections.deque[Any] = collections.deque()
        self._in_memory = 0
        self._overflow: Path | None = None
        self._numbered = 0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="atlas-bridge-sender", daemon=True)
        self._thread.start()

    @property
    def report(self) -> PushReport:
        return self.sink.report

    @property
    def spool_dir(self) -> Path | None:
        return self.sink.spool_dir

    def emit(self, batch: dict[str, Any]) -> None:
        _check_batch(batch)
        with self._cond:
            if not self._closed:
                if self._in_memory < self.max_pending:
                    self._items.append(batch)
                    self._in_memory += 1
                else:
                    self._items.append(self._to_disk(batch))
                self._cond.notify()
                return
        self.sink.keep(batch)  # closed: straight to the spool

    def _to_disk(self, batch: dict[str, Any]) -> Path:
        if self._overflow is None:
            assert self.sink.spool_dir is not None
            self._overflow = self.sink.spool_dir / f"overflow-{os.getpid()}-{os.urandom(3).hex()}"
            self._overflow.mkdir(parents=True, exist_ok=True)
            logger.warning(
                "atlas-bridge: %s is slow; batches beyond %d waiting wait on disk in %s",
                self.sink._name,
                self.max_pending,
                self._overflow,
            )
        self._numbered += 1
        path = self._overflow / f"{self._numbered:06d}-entities.json"
        _atomic_write(path, dumps_batch(batch))
        self.overflowed += 1
        return path

    def flush_then(self, done: threading.Event) -> None:
        """Set ``done`` once every batch emitted so far is delivered or spooled and the spool was tried."""
        with self._cond:
            if self._closed:
                done.set()
                return
            self._items.append(_Mark(done))
            self._cond.notify()

    def go_offline(self) -> None:
        self.sink.go_offline()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._items:
                    self._cond.wait()
                item = self._items.popleft()
                if isinstance(item, dict):
                    self._in_memory -= 1
            if item is _STOP:
                return
            if isinstance(item, _Mark):
                self._flush_spool()
                item.done.set()
                continue
            self._send(item)

    def _send(self, item: dict[str, Any] | Path) -> None:
        try:
            batch = item if isinstance(item, dict) else json.loads(item.read_text(encoding="utf-8"))
            self.sink.emit(batch)
        except Exception as e:  # the caller must never see it; an unsent disk batch stays where it is
            self.errors += 1
            logger.warning("atlas-bridge: lineage could not be emitted: %s", e)
            return
        if isinstance(item, Path):
            item.unlink(missing_ok=True)

    def _flush_spool(self) -> None:
        try:
            if self.sink.spool_pending():
                self.sink.flush_spool()
        except Exception as e:
            logger.info("atlas-bridge: kept lineage not sent yet: %s", e)

    def close(self, timeout: float = 10.0) -> None:
        """Let the sender finish what is queued (call :meth:`go_offline` first not to wait on Atlas);
        whatever it has not reached within ``timeout`` goes to the spool from here."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._items.append(_STOP)
            self._cond.notify()
        self._thread.join(timeout)
        with self._cond:
            left = [i for i in self._items if isinstance(i, (dict, Path))]
            self._items.clear()
        for item in left:
            batch = item if isinstance(item, dict) else json.loads(item.read_text(encoding="utf-8"))
            self.sink.keep(batch)
            if isinstance(item, Path):
                item.unlink(missing_ok=True)
        if self._overflow is not None:
            with contextlib.suppress(OSError):
                self._overflow.rmdir()  # empty unless a batch could not be handed on
        self.sink.close()


class KafkaSink(AtlasSink):
    """Publishes each batch to Atlas's hook topic, as Atlas's own hooks do; keeps what Kafka does not take.

    The spool, its order and its resume state are :class:`AtlasSink`'s: when no broker acknowledges a
    batch within the request timeout it is written to ``spool_dir`` and later batches queue behind it;
    :meth:`flush_spool` (the next batch after ``retry_interval_s``, the hook's flush, or ``atlas-bridge push
    DIR --to kafka``) publishes them in order and records each acknowledged one.
    """

    client: Any

    def __init__(
        self,
        publisher: KafkaPublisher,
        spool_dir: str | os.PathLike[str] | None = None,
        *,
        retry_interval_s: float = 60.0,
    ) -> None:
        super().__init__(publisher, spool_dir, retry_interval_s=retry_interval_s)

    @classmethod
    def from_settings(cls, settings: Settings) -> KafkaSink:
        from atlas_bridge.atlas.kafka import KafkaPublisher

        publisher = KafkaPublisher.from_settings(settings)
        logger.info("publishing lineage to Kafka %s", publisher.base_url)
        return cls(publisher, spool_dir=settings.effective_spool_dir)

    def close(self) -> None:
        """Flush the spool if Kafka answers, then release the producer."""
        try:
            super().close()
        finally:
            self.client.close()


def make_sink(settings: Settings, client: AtlasClient | None = None) -> Sink:
    """The sink ``settings`` ask for: none if disabled; Kafka when bootstrap servers are set (as Atlas's
    hooks do, unless ``delivery`` says ``rest``); else Atlas's REST API when an address is set; else files."""
    if settings.disabled:
        return NoopSink()
    if client is None and settings.sink_kind == "kafka":
        return KafkaSink.from_settings(settings)
    if client is None and not settings.atlas_configured:
        return FileSink(settings.output_dir, announce=True)
    if client is None:
        from atlas_bridge.atlas.client import AtlasClient

        client = AtlasClient.from_settings(settings)
    from atlas_bridge.atlas.reuse import reuse_from_settings

    return AtlasSink(
        client, spool_dir=settings.effective_spool_dir, reuse=reuse_from_settings(settings, client)
    )


def push_directory(
    directory: str | os.PathLike[str],
    client: EntityPoster,
    *,
    progress: Callable[[int, int], None] | None = None,
    reuse: EntityReuse | None = None,
    clear: bool = False,
    wait_s: float | None = None,
) -> PushReport:
    """Send a :class:`FileSink` folder to Atlas, in manifest order, skipping what was already delivered.

    Each acknowledged batch is recorded (by file name and content hash, per Atlas address) before the
    next is sent. A batch Atlas rejects, a batch file that is cut or missing, and a damaged manifest (the
    numbered files are then sent in order) are each reported in ``failures`` with their file, and the push
    goes on; a refused batch gets Atlas's answer beside it. When Atlas becomes unreachable, or refuses the
    login, the push stops (:class:`AtlasUnavailableError`, :class:`AtlasAuthError`) and a re-run resumes
    there. One process at a time sends a folder: another waits up to ``wait_s`` seconds (None: as long as
    it takes), then gets :class:`FolderBusyError`. ``clear`` (a spool): acknowledged batches are removed,
    refused and damaged ones moved to ``rejected/``, and batches written meanwhile are left for next time.
    """
    folder = Path(directory)
    if not folder.is_dir():
        msg = f"not a folder of Atlas request bodies: {folder}"
        raise ConfigError(msg)
    with folder_lock(folder, PUSH_LOCK, wait_s=wait_s):
        entries, problem = _load_entries(folder)
        if not entries:
            msg = f"{folder} holds no batches (no {MANIFEST} and no NNNN-entities.json files)"
            raise ConfigError(f"{problem}; {msg}" if problem else msg)
        report = PushReport()
        if problem:
            logger.error("%s", problem)
            report.failures.append(f"{MANIFEST}: {problem}")
        state = _read_state(folder)
        sent = state.setdefault(client.base_url, {})
        done: dict[str, str] = {}
        """Acknowledged batches of this folder (name -> hash), now or by an earlier push."""
        refused: dict[str, str | None] = {}
        """Batches refused (name -> Atlas's answer) or unreadable (name -> None)."""
        missing: set[str] = set()
        total = len(entries)
        try:
            for i, entry in enumerate(entries, 1):
                name = entry["file"]
                path = folder / name
                try:
                    text = path.read_text(encoding="utf-8")
                    batch = json.loads(text)
                    if not isinstance(batch, dict) or not isinstance(batch.get("entities"), list):
                        msg = "no 'entities' list"
                        raise ValueError(msg)
                except FileNotFoundError:
                    logger.error("%s: listed in %s but missing; the rest is sent", path, MANIFEST)
                    report.failures.append(f"{name}: listed in {MANIFEST} but missing")
                    missing.add(name)
                except (OSError, ValueError) as e:
                    logger.error("%s: not a readable batch (cut or damaged): %s; the rest is sent", path, e)
                    report.failures.append(f"{name}: not a readable batch (cut or damaged): {e}")
                    refused[name] = None
                else:
                    digest = _sha256(text)
                    if sent.get(name) == digest:
                        report.skipped += 1
                        done[name] = digest
                    else:
                        try:
                            response = post_batch(client, batch, reuse)
                        except (AtlasUnavailableError, AtlasAuthError):
                            raise  # Atlas is gone, or refuses the login (never retried: can lock the account)
                        except AtlasError as e:
                            logger.error(
                                "%s: Atlas refused the batch (its answer: %s): %s",
                                path,
                                error_path(path).name,
                                e,
                            )
                            report.failures.append(f"{name}: {e}")
                            refused[name] = record = _error_record(name, e)
                            _atomic_write(error_path(path), record)
                        else:
                            report.add_response(batch, response)
                            sent[name] = done[name] = digest
                            _atomic_write(
                                folder / PUSH_STATE, json.dumps(state, sort_keys=True, indent=2) + "\n"
                            )
                            error_path(path).unlink(missing_ok=True)
                if progress is not None:
                    progress(i, total)
        finally:
            if clear:
                _clear_sent(folder, done, refused, missing)
    logger.info("pushed %s: %s", folder, report.summary())
    return report


def pending_batches(directory: str | os.PathLike[str], base_url: str | None = None) -> list[dict[str, Any]]:
    """The manifest entries a push to ``base_url`` would send (all of them when it is None)."""
    folder = Path(directory)
    sent = _read_state(folder).get(base_url, {}) if base_url else {}
    out = []
    entries, problem = _load_entries(folder)
    if problem:
        logger.warning("%s", problem)
    for entry in entries:
        path = folder / entry["file"]
        try:
            digest = _sha256(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            digest = None  # missing or damaged: push reports it
        if sent.get(entry["file"]) != digest or digest is None:
            out.append(entry)
    return out


def _number(name: str) -> int:
    m = _BATCH_RE.match(name)
    return int(m.group(1)) if m else 0


def _numbered_files(folder: Path) -> list[dict[str, Any]]:
    names = (p.name for p in folder.glob("*-entities.json") if _BATCH_RE.match(p.name))
    return [{"file": f} for f in sorted(names, key=_number)]


def _load_entries(folder: Path) -> tuple[list[dict[str, Any]], str | None]:
    """The manifest's entries, or (with why, when it is damaged) the numbered batch files in order."""
    path = folder / MANIFEST
    if not path.is_file():
        # A folder of bodies without a manifest (e.g. hand-made): take the numbered files in order.
        return _numbered_files(folder), None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        batches = data.get("batches") if isinstance(data, dict) else None
        if not isinstance(batches, list):
            msg = "no list of batches"
            raise ValueError(msg)
        for e in batches:
            if not isinstance(e, dict) or not _BATCH_RE.match(str(e.get("file"))):
                msg = f"not a batch entry: {str(e)[:80]}"
                raise ValueError(msg)
    except (OSError, ValueError) as e:
        problem = f"{path}: not a valid manifest ({e}); taking the numbered batch files in {folder} in order"
        return _numbered_files(folder), problem
    return [dict(e) for e in batches], None


def _read_manifest(folder: Path) -> list[dict[str, Any]]:
    entries, problem = _load_entries(folder)
    if problem:
        raise ConfigError(problem)
    return entries


def read_directory_entities(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every entity of a :class:`FileSink` folder, batches in manifest order (for readers such as the page).

    Raises:
        ConfigError: the manifest or a batch file is missing or not valid JSON.
    """
    folder = Path(folder)
    entities: list[dict[str, Any]] = []
    for entry in _read_manifest(folder):
        path = folder / entry["file"]
        try:
            batch = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            msg = f"{path}: not a readable batch: {e}"
            raise ConfigError(msg) from e
        entities.extend(batch.get("entities", []))
    return entities


def _write_manifest(folder: Path, entries: list[dict[str, Any]]) -> None:
    text = json.dumps({"format": MANIFEST_FORMAT, "batches": entries}, sort_keys=True, indent=2) + "\n"
    _atomic_write(folder / MANIFEST, text)


def _read_state(folder: Path) -> dict[str, dict[str, str]]:
    path = folder / PUSH_STATE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        logger.warning(
            "%s is unreadable; resending everything (Atlas upserts, so nothing is duplicated)", path
        )
        return {}
    return data if isinstance(data, dict) else {}


def _clear_sent(
    folder: Path, done: Mapping[str, str], refused: Mapping[str, str | None], missing: set[str]
) -> None:
    """Remove acknowledged batches from a spool and move refused or unreadable ones to ``rejected/``;
    batches another writer added since the push read the manifest stay listed (under the folder's lock)."""
    with folder_lock(folder):
        entries, problem = _load_entries(folder)
        kept: list[dict[str, Any]] = []
        for entry in entries:
            name = entry["file"]
            path = folder / name
            if name in missing and not path.exists():
                continue
            if name in done:
                path.unlink(missing_ok=True)
                error_path(path).unlink(missing_ok=True)
                continue
            if name in refused:
                try:
                    text = path.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    text = None
                if text is not None:
                    answer = refused[name] or json.dumps(
                        {"file": name, "message": "not a readable batch (cut or damaged)"}, indent=2
                    )
                    moved = FileSink(folder / REJECTED).add_text(
                        text, int(entry.get("entities") or 0), error=answer
                    )
                    logger.error("Atlas refused spooled batch %s; kept as %s with its answer", name, moved)
                path.unlink(missing_ok=True)
                error_path(path).unlink(missing_ok=True)
                continue
            kept.append(entry)
        if kept:
            if len(kept) != len(entries) or problem:
                _write_manifest(folder, kept)
                state = _read_state(folder)
                names = {e["file"] for e in kept}
                for sent in state.values():
                    for name in [n for n in sent if n not in names]:
                        del sent[name]
                _atomic_write(folder / PUSH_STATE, json.dumps(state, sort_keys=True, indent=2) + "\n")
        else:
            (folder / MANIFEST).unlink(missing_ok=True)
            (folder / PUSH_STATE).unlink(missing_ok=True)
