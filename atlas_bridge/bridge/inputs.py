"""Stage 1 (driver): find the inputs under the scanned roots, tell their kind, cut them into work units."""

from __future__ import annotations

import bisect
import codecs
import fnmatch
import itertools
import json
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from atlas_bridge.bridge.dialects import dialect_hint
from atlas_bridge.bridge.types import InputFile, InputKind, ScanOptions, WorkUnit
from atlas_bridge.errors import ConfigError
from atlas_bridge.model import Problem, Severity
from atlas_bridge.openlineage.files import sniff_events

SQL_SUFFIXES = (".sql", ".hql", ".ddl")


SQLFLOW_SUFFIXES = (".xml", ".json")


LOG_SUFFIXES = (".jsonl", ".ndjson", ".csv")


QUERY_FIELDS = (
    "query_text",
    "querytext",
    "query",
    "sql_text",
    "sqltext",
    "sql",
    "statement",
    "statement_text",
)
"""Field / column names taken for a query log's query text, first match wins (case-insensitive)."""


USER_FIELDS = ("user", "user_name", "username", "usr", "principal", "login")


TIME_FIELDS = ("time", "timestamp", "ts", "start_time", "starttime", "event_time", "query_time", "created_at")


_SQLFLOW_KEYS = frozenset({"dbobjs", "servers", "relations", "relationships", "code", "data", "sessionId"})


_SNIFF_BYTES = 64 * 1024


def discover_inputs(
    paths: Iterable[str | os.PathLike[str]],
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    query_field: str | None = None,
    problems: list[Problem] | None = None,
) -> tuple[list[InputFile], list[str]]:
    """The files to scan under ``paths``, sorted by name, and notes on files left out.

    A file named on the command line is always taken (if its kind is known); files found in directories
    must have a known suffix and pass the globs. Globs match the path relative to the directory given, or
    the file name (``--include 'marts/*'``, ``--exclude '*_test.sql'``).

    ``problems``: where an input that cannot be read goes (a file or folder without permission, a dangling
    link, a FIFO named ``x.sql``, a file name that is not UTF-8): a problem of that input only, the others
    are scanned.

    Raises:
        ConfigError: a path does not exist.
    """
    found: dict[str, InputFile] = {}
    notes: list[str] = []
    problems = problems if problems is not None else []
    for raw in paths:
        root = Path(raw)
        if not root.exists() and not root.is_symlink():
            msg = f"no such file or directory: {_safe(str(root))}"
            raise ConfigError(msg)
        if root.is_dir():
            candidates = _walk(root, problems)
        else:
            candidates = [(root, root.name)]
        rolling_taken: set[Path] = set()
        for path, rel in candidates:
            if include and not _matches(rel, include):
                continue
            if exclude and _matches(rel, exclude):
                continue
            rolling = _rolling_folder(path)
            if rolling is not None:  # a file of a rolling Spark event log: the log is its folder
                if rolling not in rolling_taken:
                    rolling_taken.add(rolling)
                    folder_rel = rel.rsplit("/", 1)[0] if "/" in rel else rolling.name
                    taken = _take_rolling(rolling, folder_rel, problems)
                    if taken is not None:
                        found.setdefault(taken.path, taken)
                continue
            suffix = path.suffix.lower()
            if suffix not in SQL_SUFFIXES + SQLFLOW_SUFFIXES + LOG_SUFFIXES:
                if _is_event_log_file(path):
                    taken = _take(path, rel, query_field, notes, problems, kind=InputKind.SPARK_EVENT_LOG)
                    if taken is not None:
                        found.setdefault(taken.path, taken)
                elif root.is_file():
                    notes.append(f"{_display(path)}: skipped, unknown kind of file")
                continue
            taken = _take(path, rel, query_field, notes, problems)
            if taken is not None:
                found.setdefault(taken.path, taken)
    files = sorted(found.values(), key=lambda f: (f.name, f.path))
    return files, notes


def _rolling_folder(path: Path) -> Path | None:
    """The rolling Spark event log (``eventlog_v2_*`` folder with events files) ``path`` belongs to."""
    from atlas_bridge.spark.eventlog import ROLLING_PREFIX, is_rolling_dir

    parent = path.parent
    if parent.name.startswith(ROLLING_PREFIX) and is_rolling_dir(parent):
        return parent
    return None


def _is_event_log_file(path: Path) -> bool:
    """A Spark event log by its content (read only when the name could be one: no suffix of ours)."""
    from atlas_bridge.spark.eventlog import is_event_log

    try:
        return path.is_file() and stat.S_ISREG(path.stat().st_mode) and is_event_log(path)
    except OSError:
        return False


def _take_rolling(folder: Path, rel: str, problems: list[Problem]) -> InputFile | None:
    """A rolling event log's folder as one input (its events files are read in order, as one log)."""
    from atlas_bridge.spark.eventlog import total_size

    name = _display(folder)
    try:
        size = total_size(folder)
        key = str(folder.resolve())
    except OSError as e:
        problems.append(_input_problem(f"not scanned: {_reason(e)}", _safe(name)))
        return None
    return InputFile(path=key, name=_safe(name), kind=InputKind.SPARK_EVENT_LOG, size=size, source=_safe(rel))


def _walk(root: Path, problems: list[Problem]) -> list[tuple[Path, str]]:
    """The entries below ``root`` that are not folders (hidden ones left out), with their path below it; a
    folder that cannot be listed is a problem (it was skipped without a word)."""

    def unreadable(e: OSError) -> None:
        folder = Path(e.filename) if e.filename is not None else root
        problems.append(_input_problem(f"folder not scanned: {_reason(e)}", _display(folder, resolve=False)))

    out = []
    for folder, dirs, names in os.walk(root, onerror=unreadable):
        here = Path(folder)
        rel_dir = here.relative_to(root)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in names:
            if not name.startswith("."):
                out.append((here / name, (rel_dir / name).as_posix()))
    return sorted(out)


def _take(
    path: Path,
    rel: str,
    query_field: str | None,
    notes: list[str],
    problems: list[Problem],
    *,
    kind: str | None = None,
) -> InputFile | None:
    """The input at ``path`` (``rel``: its path below the scanned folder, or its name), or None: left out
    with a note, or a problem when it cannot be read."""
    name = _display(path, resolve=False) if path.is_symlink() and not path.exists() else _display(path)
    if _safe(name) != name:
        problems.append(
            Problem(
                message=f"file name is not UTF-8: its bytes are shown as \\xNN ({_safe(path.name)})",
                severity=Severity.WARNING,
                kind="input",
                file=_safe(name),
            )
        )
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read for ever
            problems.append(_input_problem("not scanned: not a regular file", _safe(name)))
            return None
        kind = kind or classify_file(path, query_field=query_field)
        if kind == InputKind.SCHEMA:
            notes.append(f"{_safe(name)}: not scanned, a schema mapping (see --schema)")
            return None
        if kind in (InputKind.SQL, InputKind.QUERY_LOG):
            with open(path, "rb") as fh:
                if looks_binary(fh.read(_BINARY_SNIFF), utf16=kind == InputKind.SQL):
                    notes.append(f"{_safe(name)}: skipped, binary content (not text)")
                    return None
        key = str(path.resolve())
    except OSError as e:
        problems.append(_input_problem(f"not scanned: {_reason(e)}", _safe(name)))
        return None
    return InputFile(path=key, name=_safe(name), kind=kind, size=st.st_size, source=_safe(rel))


def _reason(e: OSError) -> str:
    """What went wrong, without the path (the problem names it)."""
    if e.filename is not None and not Path(e.filename).exists() and Path(e.filename).is_symlink():
        return "a link to nothing"
    return e.strerror or e.__class__.__name__


def _input_problem(message: str, name: str) -> Problem:
    return Problem(message=message, kind="input", file=_safe(name))


def _safe(text: str) -> str:
    """A path as text that is valid UTF-8 everywhere: the bytes of a name that is not UTF-8 (Python holds
    them as lone surrogates, which neither JSON nor a terminal takes) shown as ``\\xNN``.

    >>> _safe("caf\\udce9.sql"), _safe("café.sql")
    ('caf\\\\xe9.sql', 'café.sql')
    """
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _matches(rel: str, globs: Sequence[str]) -> bool:
    base = rel.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(rel, g) or fnmatch.fnmatchcase(base, g) for g in globs)


def _display(path: Path, *, resolve: bool = True) -> str:
    """How reports name a file: relative to the working directory when below it, else absolute."""
    full = path.resolve() if resolve else Path(os.path.abspath(path))
    try:
        return full.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return full.as_posix()


def classify_file(path: str | os.PathLike[str], *, query_field: str | None = None) -> str:
    """The kind of a file, from its suffix and, for ``.json``, ``.jsonl`` and ``.ndjson``, its content.

    A file whose first value is an OpenLineage event (or an array of them) holds OpenLineage events. A
    ``.json`` whose first line is a whole JSON object with a query-text field (and none of SQLFlow's
    top-level keys) is a JSON-lines query log; an object of objects of strings is a schema mapping.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in SQL_SUFFIXES:
        return InputKind.SQL
    if suffix in (".jsonl", ".ndjson", ".json"):  # OpenLineage events are told by their content
        with open(p, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
        if head.lstrip(b"\xef\xbb\xbf").startswith(b'{"Event":"SparkListenerLogStart"'):
            return InputKind.SPARK_EVENT_LOG
        if sniff_events(head):
            return InputKind.OPENLINEAGE
        if suffix == ".json":
            return _sniff_json(head, query_field)
    if suffix in LOG_SUFFIXES:
        return InputKind.QUERY_LOG
    return InputKind.SQLFLOW


def _loads(text: str) -> Any:
    """``json.loads`` that takes any garbage (3,000 ``[`` overflow the parser's stack): None then."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _sniff_json(head: bytes, query_field: str | None) -> str:
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    first = text.lstrip().split("\n", 1)[0].strip()
    obj = _loads(first)
    if isinstance(obj, dict) and not (_SQLFLOW_KEYS & obj.keys()):
        if pick_field(list(obj), query_field, QUERY_FIELDS) is not None:
            return InputKind.QUERY_LOG
        if obj and _is_schema_mapping(obj):
            return InputKind.SCHEMA
    if obj is None:
        whole = _loads(text)
        if (
            isinstance(whole, dict)
            and whole
            and not (_SQLFLOW_KEYS & whole.keys())
            and _is_schema_mapping(whole)
        ):
            return InputKind.SCHEMA
    return InputKind.SQLFLOW


def _is_schema_mapping(obj: Mapping[str, Any], depth: int = 0) -> bool:
    if depth > 3 or not obj:
        return False
    for value in obj.values():
        if isinstance(value, dict):
            if not _is_schema_mapping(value, depth + 1):
                return False
        elif not isinstance(value, str) or depth == 0:
            return False
    return True


def pick_field(names: Sequence[str], wanted: str | None, candidates: Sequence[str]) -> str | None:
    by_lower = {n.lower(): n for n in names}
    if wanted is not None:
        return by_lower.get(wanted.lower())
    for cand in candidates:
        if cand in by_lower:
            return by_lower[cand]
    return None


_SQL_TOKEN = re.compile(
    r"'(?:[^'\\]|\\.|'')*'?|\"(?:[^\"\\]|\\.)*\"?|`[^`]*`?|--[^\n]*|/\*.*?(?:\*/|\Z)|;|[^'\"`;/-]+|.",
    re.DOTALL,
)


def count_statements(sql: str) -> int:
    """Statements in a script, split on ``;`` outside quotes and comments (procedure bodies count per part).

    >>> count_statements("select 1; -- a;\\nselect ';' ; /* ; */ ;")
    2
    """
    count = 0
    has_text = False
    for m in _SQL_TOKEN.finditer(sql):
        tok = m.group()
        if tok == ";":
            count += has_text
            has_text = False
        elif not has_text and not tok.startswith(("--", "/*")) and tok.strip():
            has_text = True
    return count + has_text


_PROCEDURAL = re.compile(
    r"\b(?:BEGIN|DECLARE|DELIMITER|CREATE\s+(?:OR\s+(?:REPLACE|ALTER)\s+)?"
    r"(?:PROCEDURE|PROC|FUNCTION|TRIGGER|PACKAGE))\b|\$\$|^\s*GO\s*$",
    re.IGNORECASE | re.MULTILINE,
)
_USE = re.compile(r"^\s*USE\s+[^;]+", re.IGNORECASE)


def split_script(text: str, chunk_chars: int) -> list[tuple[int, int, int, str]]:
    """Cut a plain script into pieces of about ``chunk_chars`` at statement ends.

    Returns ``(start_char, end_char, first_line, prelude)`` per piece; the prelude is the last ``USE``
    statement before the piece (so unqualified names keep their database). A script with procedural code
    (BEGIN, DECLARE, procedures, ``$$``, ``GO``) is not cut: a ``;`` inside a body is not a statement end.

    >>> split_script("use s;\\nselect 1;\\nselect 2;\\nselect 3;\\n", 12)
    [(0, 16, 1, ''), (16, 37, 2, 'use s;')]
    """
    if len(text) <= chunk_chars or _PROCEDURAL.search(text):
        return [(0, len(text), 1, "")]
    pieces: list[tuple[int, int, int, str]] = []
    start, line, use, piece_use = 0, 1, "", ""
    stmt_start = 0
    for m in _SQL_TOKEN.finditer(text):
        if m.group() != ";":
            continue
        stmt = text[stmt_start : m.start()]
        stmt_start = m.end()
        found = _USE.match(stmt.lstrip("\n"))
        if found:
            use = found.group().strip() + ";"
        if m.end() - start >= chunk_chars:
            pieces.append((start, m.end(), line, piece_use))
            line += text.count("\n", start, m.end())
            start, piece_use = m.end(), use
    if start < len(text) and text[start:].strip():
        pieces.append((start, len(text), line, piece_use))
    elif pieces:
        s0, _, l0, p0 = pieces[-1]
        pieces[-1] = (s0, len(text), l0, p0)
    return pieces


def plan_units(
    files: Sequence[InputFile], options: ScanOptions, *, ship_content: bool = False
) -> list[WorkUnit]:
    """One unit per file; JSON-lines query logs above ``options.chunk_bytes`` in line-aligned byte ranges,
    and plain SQL scripts above ``options.sql_chunk_bytes`` in pieces cut at statement ends (see
    :func:`split_script`), so one big script spreads over every core and no task holds it all. OpenLineage
    event files are one unit, first: the events of one run may be spread over files."""
    units: list[WorkUnit] = []
    events = [f for f in files if f.kind == InputKind.OPENLINEAGE]
    if events:  # one unit: a run's events may be spread over files

        def content(f: InputFile) -> bytes | None:
            return Path(f.path).read_bytes() if ship_content else None

        first = events[0]
        more = tuple((f, content(f)) for f in events[1:])
        units.append(WorkUnit(first, 0, first.size, content(first), more=more))
    for f in files:
        if f.kind == InputKind.OPENLINEAGE:
            continue
        splittable = f.kind == InputKind.QUERY_LOG and not f.name.lower().endswith(".csv")
        if f.kind == InputKind.SPARK_EVENT_LOG:  # one unit per log: its executions span its files
            units.append(WorkUnit(f, 0, f.size, _event_log_bytes(f) if ship_content else None))
        elif f.kind == InputKind.SQL and f.size > options.sql_chunk_bytes:
            units.extend(_script_units(f, options, ship_content=ship_content))
        elif splittable and f.size > options.chunk_bytes and not ship_content:
            for start in range(0, f.size, options.chunk_bytes):
                units.append(WorkUnit(f, start, min(start + options.chunk_bytes, f.size)))
        elif ship_content:
            units.append(WorkUnit(f, 0, f.size, Path(f.path).read_bytes()))
        else:
            units.append(WorkUnit(f, 0, f.size))
    return units


def _event_log_bytes(f: InputFile) -> bytes:
    """A log's bytes for a remote executor: a rolling log's events files one after the other (Spark ends
    each with a whole line, and every codec's stream reads on across a concatenation)."""
    from atlas_bridge.spark.eventlog import log_files

    return b"".join(p.read_bytes() for p in log_files(f.path))


_LONE_CR = re.compile(rb"\r(?!\n)")


def _script_units(f: InputFile, options: ScanOptions, *, ship_content: bool) -> list[WorkUnit]:

    data = Path(f.path).read_bytes()
    # A lone CR ends a line for sqlglot but not for the piece's line count: such a script stays whole.
    # Windows line endings (CR LF) count as one line break for both, and are cut like LF ones.
    # UTF-16 (two bytes a character) stays whole too: its pieces would need the byte order mark.
    if _utf16(data) or _LONE_CR.search(data) or looks_binary(data[:_BINARY_SNIFF]):
        return [WorkUnit(f, 0, f.size, data if ship_content else None)]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:  # not clean UTF-8: keep it whole (the problem is reported there)
        return [WorkUnit(f, 0, f.size, data if ship_content else None)]
    pieces = split_script(text, options.sql_chunk_bytes)
    if len(pieces) == 1:
        return [WorkUnit(f, 0, f.size, data if ship_content else None)]
    dialect = dialect_hint(text.lstrip("\ufeff"))
    units = []
    byte_pos = 0
    for start, end, first_line, prelude in pieces:
        size = len(text[start:end].encode("utf-8"))
        content = data[byte_pos : byte_pos + size] if ship_content else None
        units.append(WorkUnit(f, byte_pos, byte_pos + size, content, first_line, prelude, dialect))
        byte_pos += size
    return units


def partition_units(units: Sequence[WorkUnit], partitions: int, *, taper: int = 0) -> list[list[WorkUnit]]:
    """Contiguous runs of units of about equal bytes.

    Contiguous (not best-fit) on purpose: partitions come back in order, so the merge sees the inputs in
    name order whatever the parallelism, and the first-seen object of an id is always the same one.

    ``taper`` (the cores): the bytes of the last ``taper`` partitions are cut smaller, half of them in
    halves, then the rest in quarters. Tasks start in partition order, so the job ends on short tasks and
    the cores finish nearly together; with equal partitions, one core idles for up to a whole task at the
    end.
    """
    partitions = max(1, min(partitions, len(units)))
    taper = max(0, min(taper, partitions - 1, (len(units) - partitions) // 2))
    total = sum(max(u.end - u.start, 1) for u in units) or 1
    # Partition k ends at bounds[k] quarter-partitions: 4 each, then 2 each, then 1 each at the end.
    bounds = list(itertools.accumulate([4] * (partitions - taper) + [2] * taper + [1] * (2 * taper)))
    out: list[list[WorkUnit]] = [[] for _ in bounds]
    acc = 0
    for u in units:
        size = max(u.end - u.start, 1)
        idx = min(len(out) - 1, bisect.bisect_right(bounds, acc * 4 * partitions // total))
        out[idx].append(u)
        acc += size
    return [p for p in out if p]


def make_problem(message: str, file: str, *, kind: str, line: int | None = None) -> Problem:
    return Problem(message=message, kind=kind, file=file, line=line)


_BINARY_SNIFF = 8192
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def looks_binary(head: bytes, *, utf16: bool = False) -> bool:
    """A NUL byte, or more than 10 % control bytes, in the first 8 KiB: not text (an image named x.sql).

    ``utf16``: a head with a UTF-16 byte order mark (SQL Server Management Studio saves scripts so) is
    judged on its characters, not its bytes (half of them NUL).

    >>> looks_binary(b"select 1;\\n"), looks_binary(b"\\x89PNG\\r\\n\\x1a\\n\\x00\\x00")
    (False, True)
    >>> looks_binary("select 1;".encode("utf-16"), utf16=True)
    False
    """
    sample = head[:_BINARY_SNIFF]
    if not sample:
        return False
    if utf16 and _utf16(sample):
        chars = sample[: len(sample) // 2 * 2].decode("utf-16", errors="replace")
        controls = sum(1 for c in chars if c < " " and c not in "\t\n\r")
        return "\x00" in chars or controls * 10 > len(chars)
    if b"\x00" in sample:
        return True
    controls = sum(1 for b in sample if b < 32 and b not in (9, 10, 13))
    return controls * 10 > len(sample)


def sql_codec(data: bytes) -> str:
    """The codec of a script: UTF-16 after its byte order mark, else UTF-8 (a byte order mark dropped)."""
    return "utf-16" if _utf16(data) else "utf-8-sig"


def _utf16(data: bytes) -> bool:
    """Starts with a UTF-16 byte order mark (little or big endian)."""
    return data[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def printable(text: str, limit: int = 200) -> str:
    """Text safe to print in a report: control characters as ``\\xNN``, cut at ``limit`` characters."""
    cut = text if len(text) <= limit else text[:limit] + "..."
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", cut)


def read_unit(unit: WorkUnit) -> bytes:
    if unit.content is not None:
        return unit.content
    with open(unit.file.path, "rb") as fh:
        if unit.start > 0 or 0 <= unit.end < unit.file.size:
            fh.seek(unit.start)
            return fh.read((unit.end if unit.end >= 0 else unit.file.size) - unit.start)
        return fh.read()


def decode_text(data: bytes, name: str, problems: list[Problem]) -> str:
    """UTF-8 (a byte order mark dropped), or UTF-16 after its byte order mark; bytes that do not decode
    are replaced and reported (one warning, at the first one's line)."""
    codec = sql_codec(data)
    label = "UTF-16" if codec == "utf-16" else "UTF-8"
    try:
        return data.decode(codec)
    except UnicodeDecodeError as e:
        line = data[: e.start].decode(codec, errors="replace").count("\n") + 1
        problems.append(
            Problem(
                message=f"not {label} at byte {e.start}; undecodable bytes replaced",
                severity=Severity.WARNING,
                kind="input",
                file=name,
                line=line,
            )
        )
        return data.decode(codec, errors="replace")
