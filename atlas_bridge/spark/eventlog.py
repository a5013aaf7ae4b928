"""Spark event logs, read as a stream: which files are logs, their codecs, and their SQL executions.

Spark writes one log per application under ``spark.eventLog.dir``: a single file (``<app id>[.<codec>]``,
``.inprogress`` while the application runs) or, when rolling, a folder ``eventlog_v2_<app id>`` of events
files ``events_<n>_<app id>[.<codec>][.compact]`` read in ``n`` order, beside an ``appstatus_<app id>``
file (``.inprogress`` while it runs). Each line is one JSON event; the codec (``spark.eventLog.compression
.codec``) wraps the whole stream in the framing of Spark's ``CompressionCodec``:

* ``zstd``: zstd frames (``ZstdOutputStream``), read with ``zstandard``;
* ``lz4``: lz4-java's ``LZ4BlockOutputStream`` blocks (``LZ4Block`` magic, a token, LE lengths and a
  checksum), each block's payload decoded with ``lz4.block``;
* ``snappy``: snappy-java's ``SnappyOutputStream`` (an 8-byte magic and two versions, then blocks of a BE
  length and raw snappy), each block decoded with ``cramjam``;
* ``lzf``: compress-lzf's ``LZFOutputStream`` chunks (``ZV``, a type, BE lengths), decoded with ``lzf``.

Big logs are mostly task events: a line is only parsed as JSON when its first bytes name an event this
reader uses (SQL executions, the application's start and end), and an execution group is handed on as soon
as its root execution ends, so memory follows the executions running at once, not the log's size.
"""

from __future__ import annotations

import io
import json
import re
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from atlas_bridge.errors import AtlasBridgeError
from atlas_bridge.model import Lineage, Problem, Severity, Span
from atlas_bridge.spark.plan_text import SqlExecution

if TYPE_CHECKING:
    from atlas_bridge.atlas.convert import RunInfo

CODECS = ("zstd", "lz4", "lzf", "snappy")
"""The codecs Spark writes event logs in (besides none), by their short names (the file suffix)."""

ROLLING_PREFIX = "eventlog_v2_"
EVENTS_PREFIX = "events_"
APPSTATUS_PREFIX = "appstatus_"
INPROGRESS = ".inprogress"

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_LZ4_MAGIC = b"LZ4Block"
_SNAPPY_MAGIC = b"\x82SNAPPY\x00"
_LZF_MAGIC = b"ZV"
_FIRST_EVENT = b'{"Event":"SparkListenerLogStart"'
_SNIFF = 64 * 1024
_CHUNK = 1024 * 1024

_SQL_EVENT = b"org.apache.spark.sql.execution.ui.SparkListenerSQL"
_START = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart"
_END = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd"
_ADAPTIVE = "org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveExecutionUpdate"
_APP_EVENT = b"SparkListenerApplication"
_LOG_START = b"SparkListenerLogStart"
_HEAD = 120
"""Bytes of a line its event name is looked for in: Spark writes ``Event`` as the first key."""

_EVENTS_NAME = re.compile(r"events_(\d+)_")


class EventLogError(AtlasBridgeError):
    """An event log that cannot be read (a codec's framing broken before its end)."""


# -- which files are logs --------------------------------------------------------------------------------


def codec_of(head: bytes) -> str | None:
    """The codec of a stream from its first bytes (``none`` for plain JSON lines), or None: not a log.

    >>> codec_of(b'{"Event":"SparkListenerLogStart","Spark Version":"4.3.0"}'), codec_of(b"LZ4Block\\x25")
    ('none', 'lz4')
    """
    if head.startswith(_ZSTD_MAGIC):
        return "zstd"
    if head.startswith(_LZ4_MAGIC):
        return "lz4"
    if head.startswith(_SNAPPY_MAGIC):
        return "snappy"
    if head.startswith(_LZF_MAGIC) and len(head) > 2 and head[2] in (0, 1):
        return "lzf"
    if head.lstrip(b"\xef\xbb\xbf").startswith(b'{"Event":"'):
        return "none"
    return None


def is_event_log(path: str | Path) -> bool:
    """A Spark event log, by its content: a known codec whose first event is Spark's ``LogStart``."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
            codec = codec_of(head)
            if codec is None:  # most files are told by 16 bytes
                return False
            head += fh.read(_SNIFF)
        first = next(_chunks(codec, io.BytesIO(head), sniff=True), b"")
    except (OSError, EventLogError, ValueError):
        return False
    return first.lstrip(b"\xef\xbb\xbf").startswith(_FIRST_EVENT)


def is_rolling_dir(path: str | Path) -> bool:
    """A rolling log's folder (``eventlog_v2_<app id>``) that holds at least one events file."""
    p = Path(path)
    return p.name.startswith(ROLLING_PREFIX) and bool(events_files(p))


def events_files(folder: str | Path) -> list[Path]:
    """A rolling log's events files in the order Spark wrote them (by index, not by name: 10 after 9)."""
    found = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return []
    for p in entries:
        m = _EVENTS_NAME.match(p.name)
        if m and p.is_file():
            found.append((int(m.group(1)), p.name, p))
    return [p for _, _, p in sorted(found)]


def log_files(path: str | Path) -> list[Path]:
    """The files of one log, in order: a rolling log's events files, or the file itself."""
    p = Path(path)
    return events_files(p) if p.is_dir() else [p]


def is_in_progress(path: str | Path) -> bool:
    """Still being written when it was read: an ``.inprogress`` file, or a rolling log whose appstatus
    file is."""
    p = Path(path)
    if p.is_dir():
        return any(q.name.startswith(APPSTATUS_PREFIX) and q.name.endswith(INPROGRESS) for q in _listing(p))
    return p.name.endswith(INPROGRESS)


def _listing(p: Path) -> list[Path]:
    try:
        return list(p.iterdir())
    except OSError:
        return []


# -- codecs ----------------------------------------------------------------------------------------------


def _chunks(codec: str, fh: IO[bytes], *, sniff: bool = False) -> Iterator[bytes]:
    """The decompressed bytes of a stream, a chunk at a time. ``sniff``: the stream is only a file's head
    (its end cuts a frame): give what decodes and stop without an error."""
    if codec == "none":
        while chunk := fh.read(_CHUNK):
            yield chunk
    elif codec == "zstd":
        yield from _zstd(fh, sniff=sniff)
    elif codec == "lz4":
        yield from _lz4_blocks(fh, sniff=sniff)
    elif codec == "snappy":
        yield from _snappy_blocks(fh, sniff=sniff)
    elif codec == "lzf":
        yield from _lzf_chunks(fh, sniff=sniff)
    else:
        msg = f"unknown event log codec {codec!r}"
        raise EventLogError(msg)


def _zstd(fh: IO[bytes], *, sniff: bool) -> Iterator[bytes]:
    import zstandard

    reader = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True, closefd=False)
    try:
        while chunk := reader.read(4096 if sniff else _CHUNK):
            yield chunk
    except zstandard.ZstdError as e:
        if not sniff:
            msg = f"zstd stream broken: {e}"
            raise EventLogError(msg) from e


def _read_exact(fh: IO[bytes], n: int) -> bytes | None:
    """``n`` bytes, or None at a clean end; a partial read is a cut stream."""
    data = fh.read(n)
    if not data:
        return None
    while len(data) < n:
        more = fh.read(n - len(data))
        if not more:
            raise _Cut
        data += more
    return data


class _Cut(Exception):
    """The stream ends inside a block: a log still being written, or a copy cut short."""


_LZ4_HEADER = struct.Struct("<iii")
_LZ4_RAW, _LZ4_COMPRESSED = 0x10, 0x20


def _lz4_blocks(fh: IO[bytes], *, sniff: bool) -> Iterator[bytes]:
    import lz4.block

    try:
        while (magic := _read_exact(fh, len(_LZ4_MAGIC))) is not None:
            if magic != _LZ4_MAGIC:
                msg = "lz4: no LZ4Block magic where a block starts"
                raise EventLogError(msg)
            header = _read_exact(fh, 1 + _LZ4_HEADER.size)
            if header is None:
                raise _Cut
            method = header[0] & 0xF0
            compressed, original, _checksum = _LZ4_HEADER.unpack(header[1:])
            if compressed < 0 or original < 0:
                msg = "lz4: negative block length"
                raise EventLogError(msg)
            payload = _read_exact(fh, compressed) if compressed else b""
            if payload is None:
                raise _Cut
            if original == 0:  # the end mark (another stream may follow: Spark appends after a restart)
                continue
            if method == _LZ4_RAW:
                yield payload
            elif method == _LZ4_COMPRESSED:
                yield lz4.block.decompress(payload, uncompressed_size=original)
            else:
                msg = f"lz4: unknown block method {method:#x}"
                raise EventLogError(msg)
    except _Cut:
        return


def _snappy_blocks(fh: IO[bytes], *, sniff: bool) -> Iterator[bytes]:
    import cramjam

    try:
        head = _read_exact(fh, len(_SNAPPY_MAGIC) + 8)
        if head is None:
            return
        if not head.startswith(_SNAPPY_MAGIC):
            msg = "snappy: no snappy-java stream header"
            raise EventLogError(msg)
        while (size := _read_exact(fh, 4)) is not None:
            if size.startswith(_SNAPPY_MAGIC[:4]):  # a header again: another stream appended
                if _read_exact(fh, len(_SNAPPY_MAGIC) + 8 - 4) is None:
                    raise _Cut
                continue
            (n,) = struct.unpack(">i", size)
            if n < 0:
                msg = "snappy: negative block length"
                raise EventLogError(msg)
            block = _read_exact(fh, n)
            if block is None:
                raise _Cut
            yield bytes(cramjam.snappy.decompress_raw(block))
    except _Cut:
        return


def _lzf_chunks(fh: IO[bytes], *, sniff: bool) -> Iterator[bytes]:
    import lzf

    try:
        while (head := _read_exact(fh, 3)) is not None:
            if head[:2] != _LZF_MAGIC:
                msg = "lzf: no ZV where a chunk starts"
                raise EventLogError(msg)
            if head[2] == 0:
                raw = _read_exact(fh, 2)
                data = _read_exact(fh, struct.unpack(">H", raw)[0]) if raw else None
                if data is None:
                    raise _Cut
                yield data
            elif head[2] == 1:
                sizes = _read_exact(fh, 4)
                if sizes is None:
                    raise _Cut
                packed, original = struct.unpack(">HH", sizes)
                data = _read_exact(fh, packed)
                if data is None:
                    raise _Cut
                out = lzf.decompress(data, original)
                if out is None or len(out) != original:
                    msg = "lzf: a chunk does not decode to its length"
                    raise EventLogError(msg)
                yield out
            else:
                msg = f"lzf: unknown chunk type {head[2]}"
                raise EventLogError(msg)
    except _Cut:
        return


class _ChunkStream(io.RawIOBase):
    """A readable raw stream over an iterator of chunks, so ``io.BufferedReader`` cuts lines in C."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buf = b""
        self._pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while self._pos >= len(self._buf):
            nxt = next(self._chunks, None)
            if nxt is None:
                return 0
            self._buf, self._pos = nxt, 0
        n = min(len(b), len(self._buf) - self._pos)
        b[:n] = self._buf[self._pos : self._pos + n]
        self._pos += n
        return n


def open_log_file(path: str | Path) -> IO[bytes]:
    """One log file's decompressed bytes, as a buffered stream (the codec told by its first bytes)."""
    return open_log_stream(open(path, "rb"))  # closed with the stream it feeds


def open_log_stream(fh: io.BufferedReader | io.BytesIO) -> IO[bytes]:
    """:func:`open_log_file` over an open stream (a log's bytes shipped to a remote executor)."""
    head = fh.peek(16) if isinstance(fh, io.BufferedReader) else fh.getvalue()[:16]
    codec = codec_of(head) or "none"
    if codec == "none":
        return fh

    def chunks() -> Iterator[bytes]:
        try:
            yield from _chunks(codec, fh)
        finally:
            fh.close()

    return io.BufferedReader(_ChunkStream(chunks()), buffer_size=_CHUNK)


# -- executions ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AppInfo:
    """The application a log is of (from its ``ApplicationStart`` event)."""

    app_id: str | None = None
    app_name: str | None = None
    attempt_id: str | None = None
    user: str | None = None
    spark_version: str | None = None
    start_ms: int | None = None
    end_ms: int | None = None


@dataclass(frozen=True)
class RootRun:
    """One run of a job in a log: a root SQL execution and those nested in it (``rootExecutionId``), with
    the events file and line of the root's start."""

    executions: tuple[SqlExecution, ...]
    file: str
    line: int
    app: AppInfo
    events_file: str | None = None
    """A rolling log's events file the root started in (None: a single-file log)."""

    @property
    def root(self) -> SqlExecution:
        for e in self.executions:
            if e.root_execution_id in (None, e.execution_id):
                return e
        return self.executions[0]

    @property
    def failed(self) -> bool:
        """Its root execution ended with an error."""
        return error_of(self.root) is not None

    @property
    def run_id(self) -> str:
        app = self.app.app_id or "unknown-app"
        attempt = f"_{self.app.attempt_id}" if self.app.attempt_id else ""
        return f"{app}{attempt}:{self.root.execution_id}"


def error_of(execution: SqlExecution) -> str | None:
    """The error an execution ended with (Spark 3.4+ writes ``errorMessage``), or None."""
    end = execution.end
    if end is None:
        return None
    msg = end.get("errorMessage")
    return msg if isinstance(msg, str) and msg else None


@dataclass
class _Open:
    file: str
    line: int
    events_file: str | None
    starts: dict[int, tuple[dict[str, Any], int]] = field(default_factory=dict)
    adaptive: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    ends: dict[int, dict[str, Any]] = field(default_factory=dict)


@dataclass
class ReadStats:
    """What reading one log met."""

    lines: int = 0
    parsed: int = 0
    bytes: int = 0
    cut: bool = False
    problems: list[Problem] = field(default_factory=list)


def read_executions(
    path: str | Path,
    *,
    data: bytes | None = None,
    name: str | None = None,
    stats: ReadStats | None = None,
    max_open: int = 4096,
) -> Iterator[RootRun]:
    """The runs of one log (a file, or a rolling log's folder), each as soon as its root execution ends;
    those still open at the log's end (a log cut or still being written) last, with ``end`` None.

    Only SQL execution and application events are parsed. A line that is not JSON is a problem naming
    the file and line, unless it is the last line of the log (cut while being written: a warning).
    ``data``: the log's bytes (a rolling log's events files one after the other), read instead of
    ``path``. ``max_open``: more root executions open at once than this (a log that never ends any)
    hands on the oldest as cut, so memory stays bounded.
    """
    stats = stats if stats is not None else ReadStats()
    label = name or str(path)
    app = AppInfo()
    open_: dict[int, _Open] = {}
    root_of: dict[int, int] = {}
    files: list[Path] = [Path(path)] if data is not None else log_files(path)
    pending_bad: tuple[str, int, str] | None = None  # a bad line: a problem unless it was the log's last
    last: tuple[str, int] | None = None

    def flush_bad() -> None:
        nonlocal pending_bad
        if pending_bad is not None:
            fname, line, why = pending_bad
            stats.problems.append(
                Problem(message=f"event is not JSON: {why}", kind="input", file=fname, line=line)
            )
            pending_bad = None

    def group(root: int, g: _Open) -> RootRun:
        for eid in g.starts:
            root_of.pop(eid, None)
        execs = tuple(
            SqlExecution(
                execution_id=eid,
                root_execution_id=_int(start.get("rootExecutionId")),
                start=start,
                adaptive=tuple(g.adaptive.get(eid, ())),
                end=g.ends.get(eid),
                line=line,
            )
            for eid, (start, line) in sorted(g.starts.items())
        )
        return RootRun(execs, g.file, g.line, app, g.events_file)

    for file in files:
        rolling = data is None and Path(path).is_dir()
        fname = f"{label}/{file.name}" if rolling else label
        events_file = file.name if rolling else None
        stream = open_log_stream(io.BytesIO(data)) if data is not None else open_log_file(file)
        with stream as fh:
            for lineno, raw in enumerate(fh, start=1):
                last = (fname, lineno)
                stats.lines += 1
                stats.bytes += len(raw)
                head = raw[:_HEAD]
                sql = _SQL_EVENT in head
                if not sql and _APP_EVENT not in head and _LOG_START not in head:
                    continue
                flush_bad()
                try:
                    event = json.loads(raw)
                except ValueError as e:  # RecursionError is a ValueError's sibling: see below
                    pending_bad = (fname, lineno, str(e)[:200])
                    continue
                except RecursionError:
                    pending_bad = (fname, lineno, "nested too deep")
                    continue
                if not isinstance(event, dict):
                    continue
                stats.parsed += 1
                kind = event.get("Event")
                if not sql:
                    app = _app_event(app, kind, event)
                    continue
                eid = _int(event.get("executionId"))
                if eid is None:
                    continue
                if kind == _START:
                    root = _int(event.get("rootExecutionId"))
                    root = eid if root is None or root < 0 else root
                    root_of[eid] = root
                    g = open_.get(root)
                    if g is None:
                        g = open_[root] = _Open(fname, lineno, events_file)
                    if eid == root:
                        g.file, g.line, g.events_file = fname, lineno, events_file
                    g.starts[eid] = (event, lineno)
                    if len(open_) > max_open:
                        oldest = next(iter(open_))
                        stats.problems.append(
                            Problem(
                                message=f"more than {max_open} SQL executions open at once: execution "
                                f"{oldest} read as if its log ended there",
                                severity=Severity.WARNING,
                                kind="input",
                                file=fname,
                                line=lineno,
                            )
                        )
                        yield group(oldest, open_.pop(oldest))
                elif kind == _ADAPTIVE:
                    r = root_of.get(eid)
                    if r is not None and r in open_:
                        open_[r].adaptive.setdefault(eid, []).append(event)
                elif kind == _END:
                    r = root_of.get(eid)
                    if r is None or r not in open_:
                        continue
                    open_[r].ends[eid] = event
                    if eid == r:
                        yield group(r, open_.pop(r))
    if pending_bad is not None and pending_bad[:2] != last:
        flush_bad()
    if pending_bad is not None:  # the log's last line: cut by a writer still at work (or killed)
        fname, line, _ = pending_bad
        stats.cut = True
        stats.problems.append(
            Problem(
                message="last event cut short (a log still being written): left out",
                severity=Severity.WARNING,
                kind="input",
                file=fname,
                line=line,
            )
        )
    for root, g in list(open_.items()):
        if root in g.starts or g.starts:
            yield group(root, g)


def run_lineage(
    run: RootRun, *, source: str, default_db: str | None = None
) -> tuple[Lineage, dict[str, RunInfo], list[Problem]]:
    """The lineage of one run of a job, the run each of its processes records, and the problems met.

    A failed run (its root execution's error) gives nothing; so does one whose root never ended in the log
    (still running, or its driver died: what it wrote is not known). Nested executions that failed are left
    out. Process ids are made the run's own (the same statement run twice is two runs of one process), and
    each process says the log (``source``: as payloads name it) and line it was read from.
    """
    from atlas_bridge.atlas.convert import RunInfo
    from atlas_bridge.spark.plan_text import extract_root_execution

    root = run.root
    where = run.file
    if root.end is None:
        msg = (
            f"SQL execution {root.execution_id} has not ended in this log "
            "(still running, or its driver died): left out"
        )
        return (
            Lineage(),
            {},
            [Problem(message=msg, severity=Severity.WARNING, kind="input", file=where, line=run.line)],
        )
    if run.failed:
        return Lineage(), {}, []
    executions = [e for e in run.executions if error_of(e) is None]
    problems: list[Problem] = []
    try:
        result = extract_root_execution(executions, current_database=default_db or "default")
    except AtlasBridgeError as e:
        return Lineage(), {}, [Problem(message=str(e), kind="input", file=where, line=run.line)]
    for p in result.problems:
        update: dict[str, Any] = {"file": where}
        if p.line is None:
            update["line"] = run.line
        problems.append(p.model_copy(update=update))
    lineage = result.lineage
    if not lineage.processes:
        return lineage, {}, problems
    file = f"{source}/{run.events_file}" if run.events_file else source
    span = Span(line=run.line, column=1, end_line=run.line, end_column=1)
    ids = {p.id: f"{p.id}@{run.run_id}" for p in lineage.processes}
    lineage = Lineage(
        datasets=lineage.datasets,
        processes=tuple(
            p.model_copy(update={"id": ids[p.id], "source_file": file, "span": span})
            for p in lineage.processes
        ),
        relations=tuple(
            r.model_copy(update={"process_id": ids[r.process_id]}) if r.process_id in ids else r
            for r in lineage.relations
        ),
        procedures=lineage.procedures,
    )
    end = root.end.get("time") if root.end is not None else None
    info = RunInfo(
        run_id=run.run_id,
        user=run.app.user,
        start_ms=_int(root.start.get("time")),
        end_ms=_int(end),
        application_id=run.app.app_id,
        application_name=run.app.app_name,
        status="SUCCESS",
        source_file=file,
        source_line=run.line,
    )
    return lineage, dict.fromkeys(ids.values(), info), problems


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _app_event(app: AppInfo, kind: Any, event: dict[str, Any]) -> AppInfo:
    from dataclasses import replace

    if kind == "SparkListenerLogStart":
        return replace(app, spark_version=_str(event.get("Spark Version")))
    if kind == "SparkListenerApplicationStart":
        return replace(
            app,
            app_id=_str(event.get("App ID")),
            app_name=_str(event.get("App Name")),
            attempt_id=_str(event.get("App Attempt ID")),
            user=_str(event.get("User")),
            start_ms=_int(event.get("Timestamp")),
        )
    if kind == "SparkListenerApplicationEnd":
        return replace(app, end_ms=_int(event.get("Timestamp")))
    return app


def total_size(path: str | Path) -> int:
    """The bytes of a log on disk (a rolling log: its events files)."""
    return sum(f.stat().st_size for f in log_files(path))


__all__: Sequence[str] = (
    "CODECS",
    "AppInfo",
    "EventLogError",
    "ReadStats",
    "RootRun",
    "codec_of",
    "error_of",
    "events_files",
    "is_event_log",
    "is_in_progress",
    "is_rolling_dir",
    "log_files",
    "open_log_file",
    "read_executions",
    "total_size",
)
