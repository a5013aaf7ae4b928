"""The bridge: batch import of a SQL estate (scripts, SQLFlow exports, query logs) into Atlas on PySpark.

What runs where:

* **driver**: :func:`discover_inputs` lists the files (paths and sizes only, never their text) and
  :func:`plan_units` cuts them into work units (one per script or export; query logs in line-aligned byte
  ranges). Settings, clients and credentials stay here.
* **executors**: :func:`extract_partition` reads its units, runs the *pure* extractors
  (``extract_sql_lineage``, ``extract_sqlflow_lineage``) and converts each unit's lineage to Atlas entity
  records on its own (``convert.to_entity_records``): processes and column lineage are final there, as
  they depend only on their statement and on the qualifiedNames of the datasets they touch. What is
  shipped is only the units, :class:`ScanOptions` and the namespace (nothing secret).
* **driver again**: partition results are computed in parallel and kept by Spark (``MEMORY_AND_DISK``),
  then streamed back in partition (file-name) order into an :class:`EntityCollector`, which merges only
  datasets and their columns in memory (the union of columns, the most specific type) and spills the
  process tier to a temporary file. Batches are then rendered one at a time as they are delivered, so
  the driver's memory follows the number of distinct tables and columns, not the number of statements.
  A unit-by-unit conversion does not depend on the partitioning: the same input gives the same batches
  on any number of cores.

Resume: every acknowledged batch's content hash is appended (and fsynced) to a state file per target, so
a run that died halfway skips what was already acknowledged; the same input gives the same batches, hence
the same hashes, so a re-run with nothing changed sends nothing. Against Atlas, upserts by qualifiedName
make a resend harmless anyway; created / updated / unchanged come from Atlas's ``mutatedEntities``.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import fnmatch
import hashlib
import io
import json
import logging
import os
import re
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from atlas_bridge.errors import AtlasBridgeError, AtlasUnavailableError, ConfigError
from atlas_bridge.model import ExtractionResult, Lineage, Problem, Relation, Severity, merge_lineage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

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

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``; phases are ``extract``, ``merge`` and ``deliver``."""


class InputKind:
    """What a discovered file holds."""

    SQL = "sql"
    SQLFLOW = "sqlflow"
    QUERY_LOG = "query_log"
    SCHEMA = "schema"
    """A sqlglot schema mapping (``{db: {table: {col: type}}}``): not lineage, skipped (use ``--schema``)."""


@dataclasses.dataclass(frozen=True)
class InputFile:
    """A file to scan. ``name`` is how reports spell it (relative to the working directory if below it)."""

    path: str
    name: str
    kind: str
    size: int


@dataclasses.dataclass(frozen=True)
class ScanOptions:
    """Everything the executors need, and nothing secret: it is pickled to every task."""

    dialect: str | None = None
    schema: Mapping[str, Any] | None = None
    default_db: str | None = None
    query_field: str | None = None
    user_field: str | None = None
    time_field: str | None = None
    chunk_bytes: int = 8 * 1024 * 1024
    """Query logs larger than this are cut into line-aligned byte ranges of about this size."""
    partition_bytes: int = 1024 * 1024
    """Input bytes per Spark partition (at least 4 partitions per core are used)."""
    end_to_end: bool = True
    """Collapse each statement's intermediate resultsets on the executor (what Atlas receives anyway)
    before converting; the relation counts of the report are of the collapsed lineage."""


@dataclasses.dataclass(frozen=True)
class WorkUnit:
    """A file, or a byte range ``[start, end)`` of a query log, for one executor task."""

    file: InputFile
    start: int = 0
    end: int = -1
    content: bytes | None = None
    """The bytes themselves when executors cannot read the driver's files (a remote master)."""


# --------------------------------------------------------------------------------------------------------
# Discovery (driver)


def discover_inputs(
    paths: Iterable[str | os.PathLike[str]],
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    query_field: str | None = None,
) -> tuple[list[InputFile], list[str]]:
    """The files to scan under ``paths``, sorted by name, and notes on files left out.

    A file named on the command line is always taken (if its kind is known); files found in directories
    must have a known suffix and pass the globs. Globs match the path relative to the directory given, or
    the file name (``--include 'marts/*'``, ``--exclude '*_test.sql'``).

    Raises:
        ConfigError: a path does not exist.
    """
    found: dict[str, InputFile] = {}
    notes: list[str] = []
    for raw in paths:
        root = Path(raw)
        if not root.exists():
            msg = f"no such file or directory: {root}"
            raise ConfigError(msg)
        if root.is_file():
            candidates = [(root, root.name)]
        else:
            candidates = [
                (p, p.relative_to(root).as_posix())
                for p in sorted(root.rglob("*"))
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
            ]
        for path, rel in candidates:
            if include and not _matches(rel, include):
                continue
            if exclude and _matches(rel, exclude):
                continue
            suffix = path.suffix.lower()
            if suffix not in SQL_SUFFIXES + SQLFLOW_SUFFIXES + LOG_SUFFIXES:
                if root.is_file():
                    notes.append(f"{_display(path)}: skipped, unknown kind of file")
                continue
            kind = classify_file(path, query_field=query_field)
            name = _display(path)
            if kind == InputKind.SCHEMA:
                notes.append(f"{name}: not scanned, a schema mapping (see --schema)")
                continue
            key = str(path.resolve())
            found.setdefault(key, InputFile(path=key, name=name, kind=kind, size=path.stat().st_size))
    files = sorted(found.values(), key=lambda f: (f.name, f.path))
    return files, notes


def _matches(rel: str, globs: Sequence[str]) -> bool:
    base = rel.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(rel, g) or fnmatch.fnmatchcase(base, g) for g in globs)


def _display(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.resolve().as_posix()


def classify_file(path: str | os.PathLike[str], *, query_field: str | None = None) -> str:
    """The kind of a file, from its suffix and, for ``.json``, its first line.

    A ``.json`` whose first line is a whole JSON object with a query-text field (and none of SQLFlow's
    top-level keys) is a JSON-lines query log; an object of objects of strings is a schema mapping.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in SQL_SUFFIXES:
        return InputKind.SQL
    if suffix in LOG_SUFFIXES:
        return InputKind.QUERY_LOG
    if suffix == ".json":
        with open(p, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
        return _sniff_json(head, query_field)
    return InputKind.SQLFLOW


def _sniff_json(head: bytes, query_field: str | None) -> str:
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    first = text.lstrip().split("\n", 1)[0].strip()
    try:
        obj = json.loads(first)
    except ValueError:
        obj = None
    if isinstance(obj, dict) and not (_SQLFLOW_KEYS & obj.keys()):
        if _pick_field(list(obj), query_field, QUERY_FIELDS) is not None:
            return InputKind.QUERY_LOG
        if obj and _is_schema_mapping(obj):
            return InputKind.SCHEMA
    if obj is None:
        try:
            whole = json.loads(text)
        except ValueError:
            whole = None
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


def _pick_field(names: Sequence[str], wanted: str | None, candidates: Sequence[str]) -> str | None:
    by_lower = {n.lower(): n for n in names}
    if wanted is not None:
        return by_lower.get(wanted.lower())
    for cand in candidates:
        if cand in by_lower:
            return by_lower[cand]
    return None


def plan_units(
    files: Sequence[InputFile], options: ScanOptions, *, ship_content: bool = False
) -> list[WorkUnit]:
    """One unit per file; JSON-lines query logs above ``options.chunk_bytes`` in line-aligned byte ranges."""
    units: list[WorkUnit] = []
    for f in files:
        splittable = f.kind == InputKind.QUERY_LOG and not f.name.lower().endswith(".csv")
        if splittable and f.size > options.chunk_bytes and not ship_content:
            for start in range(0, f.size, options.chunk_bytes):
                units.append(WorkUnit(f, start, min(start + options.chunk_bytes, f.size)))
        elif ship_content:
            units.append(WorkUnit(f, 0, f.size, Path(f.path).read_bytes()))
        else:
            units.append(WorkUnit(f, 0, f.size))
    return units


def partition_units(units: Sequence[WorkUnit], partitions: int) -> list[list[WorkUnit]]:
    """Contiguous runs of units of about equal bytes.

    Contiguous (not best-fit) on purpose: partitions come back in order, so the merge sees the inputs in
    name order whatever the parallelism, and the first-seen object of an id is always the same one.
    """
    partitions = max(1, min(partitions, len(units)))
    total = sum(max(u.end - u.start, 1) for u in units) or 1
    out: list[list[WorkUnit]] = [[] for _ in range(partitions)]
    acc = 0
    for u in units:
        size = max(u.end - u.start, 1)
        idx = min(partitions - 1, acc * partitions // total)
        out[idx].append(u)
        acc += size
    return [p for p in out if p]


# --------------------------------------------------------------------------------------------------------
# Extraction (executors; pure apart from reading the unit's file)


@dataclasses.dataclass
class UnitResult:
    """What one work unit yielded."""

    file: str
    kind: str
    lineage: Lineage
    statements: int = 0
    problems: list[Problem] = dataclasses.field(default_factory=list)
    users: set[str] = dataclasses.field(default_factory=set)
    first_time_ms: int | None = None
    last_time_ms: int | None = None


def extract_unit(unit: WorkUnit, options: ScanOptions) -> UnitResult:
    """Read one unit and extract its lineage; never raises (failures become problems naming the file)."""
    f = unit.file
    try:
        if f.kind == InputKind.SQL:
            return _extract_sql_file(unit, options)
        if f.kind == InputKind.SQLFLOW:
            return _extract_sqlflow_file(unit)
        if f.kind == InputKind.QUERY_LOG:
            return _extract_query_log(unit, options)
        msg = f"unknown input kind {f.kind!r}"
        return UnitResult(f.name, f.kind, Lineage(), problems=[_problem(msg, f.name, kind="input")])
    except AtlasBridgeError as e:
        return UnitResult(f.name, f.kind, Lineage(), problems=[_problem(str(e), f.name, kind="input")])
    except Exception as e:  # one bad file must not end the job
        logger.exception("extraction of %s failed", f.name)
        msg = f"internal error: {e.__class__.__name__}: {e}"
        return UnitResult(f.name, f.kind, Lineage(), problems=[_problem(msg, f.name, kind="internal")])


def _problem(message: str, file: str, *, kind: str, line: int | None = None) -> Problem:
    return Problem(message=message, kind=kind, file=file, line=line)


def _read(unit: WorkUnit) -> bytes:
    if unit.content is not None:
        return unit.content
    with open(unit.file.path, "rb") as fh:
        return fh.read()


def _decode(data: bytes, name: str, problems: list[Problem]) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        problems.append(
            Problem(
                message=f"not UTF-8 at byte {e.start}; undecodable bytes replaced",
                severity=Severity.WARNING,
                kind="input",
                file=name,
                line=line,
            )
        )
        return data.decode("utf-8-sig", errors="replace")


def _extract_sql_file(unit: WorkUnit, options: ScanOptions) -> UnitResult:
    from atlas_bridge.extractors.sql import extract_sql_lineage

    name = unit.file.name
    problems: list[Problem] = []
    text = _decode(_read(unit), name, problems)
    schema = dict(options.schema) if options.schema is not None else None
    dialect = dialect_hint(text) or options.dialect
    result: ExtractionResult = extract_sql_lineage(text, dialect, schema, options.default_db, file=name)
    problems.extend(p if p.file else p.model_copy(update={"file": name}) for p in result.problems)
    return UnitResult(name, unit.file.kind, result.lineage, count_statements(text), problems)


_DIALECT_HINT = re.compile(r"^\s*(?:--|#|/\*)\s*dialect\s*[:=]\s*([A-Za-z][\w-]*)", re.IGNORECASE)


def dialect_hint(text: str) -> str | None:
    """The dialect a script declares in a comment among its first lines (``-- dialect: hive``).

    A file's own declaration wins over ``--dialect``, so one estate can hold Hive scripts next to a T-SQL
    procedure.

    >>> dialect_hint("-- nightly load\\n-- dialect: hive\\nLOAD DATA ...")
    'hive'
    >>> dialect_hint("SELECT 1 -- dialect: tsql") is None
    True
    """
    for line in text.splitlines()[:10]:
        m = _DIALECT_HINT.match(line)
        if m:
            return m.group(1).lower()
        stripped = line.strip()
        if stripped and not stripped.startswith(("--", "#", "/*", "*")):
            return None
    return None


def _extract_sqlflow_file(unit: WorkUnit) -> UnitResult:
    from atlas_bridge.extractors.sqlflow import extract_sqlflow_lineage

    name = unit.file.name
    result: ExtractionResult = extract_sqlflow_lineage(_read(unit), file=name)
    problems = [p if p.file else p.model_copy(update={"file": name}) for p in result.problems]
    return UnitResult(name, unit.file.kind, result.lineage, len(result.lineage.processes), problems)


@dataclasses.dataclass(frozen=True)
class LogRecord:
    """One query of a query log, with the file line it starts on."""

    line: int
    query: str
    user: str | None = None
    time_ms: int | None = None


def read_query_log(unit: WorkUnit, options: ScanOptions, problems: list[Problem]) -> Iterator[LogRecord]:
    """The queries of a JSON-lines or CSV query log (or of one byte range of a JSON-lines log).

    Records without query text, or that cannot be read, become problems naming their line.
    """
    name = unit.file.name
    if name.lower().endswith(".csv"):
        yield from _read_csv_log(unit, options, problems)
    else:
        yield from _read_jsonl_log(unit, options, problems)


def _jsonl_lines(unit: WorkUnit) -> Iterator[tuple[int, bytes]]:
    if unit.content is not None:
        for n, raw in enumerate(unit.content.splitlines(), start=1):
            yield n, raw
        return
    end = unit.file.size if unit.end < 0 else unit.end
    with open(unit.file.path, "rb") as fh:
        line_no = 1
        if unit.start > 0:
            # Line numbers: count the newlines before our range (cheap, sequential, bounded memory).
            remaining = unit.start
            while remaining > 0:
                block = fh.read(min(remaining, 1 << 20))
                if not block:
                    break
                line_no += block.count(b"\n")
                remaining -= len(block)
            fh.seek(unit.start - 1)
            if fh.read(1) != b"\n":
                fh.readline()  # the partial line belongs to the previous range
                line_no += 1
        pos = fh.tell()
        while pos < end:
            raw = fh.readline()
            if not raw:
                break
            yield line_no, raw
            line_no += 1
            pos += len(raw)


def _read_jsonl_log(unit: WorkUnit, options: ScanOptions, problems: list[Problem]) -> Iterator[LogRecord]:
    name = unit.file.name
    fields: tuple[str | None, str | None, str | None] | None = None
    for line_no, raw in _jsonl_lines(unit):
        text = raw.decode("utf-8", errors="replace").strip().lstrip("\ufeff")
        if not text:
            continue
        try:
            obj = json.loads(text)
        except ValueError as e:
            problems.append(_problem(f"not a JSON object: {e}", name, kind="input", line=line_no))
            continue
        if not isinstance(obj, dict):
            problems.append(_problem("not a JSON object", name, kind="input", line=line_no))
            continue
        if fields is None or fields[0] not in obj:
            keys = list(obj)
            fields = (
                _pick_field(keys, options.query_field, QUERY_FIELDS),
                _pick_field(keys, options.user_field, USER_FIELDS),
                _pick_field(keys, options.time_field, TIME_FIELDS),
            )
        qf, uf, tf = fields
        query = obj.get(qf) if qf else None
        if not isinstance(query, str) or not query.strip():
            problems.append(_problem("record has no query text field", name, kind="input", line=line_no))
            continue
        user = obj.get(uf) if uf else None
        yield LogRecord(
            line_no, query, str(user) if user is not None else None, _time_ms(obj.get(tf) if tf else None)
        )


def _read_csv_log(unit: WorkUnit, options: ScanOptions, problems: list[Problem]) -> Iterator[LogRecord]:
    name = unit.file.name
    text = _decode(_read(unit), name, problems)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as e:
        problems.append(_problem(f"unreadable CSV header: {e}", name, kind="input", line=1))
        return
    qf = _pick_field(header, options.query_field, QUERY_FIELDS)
    if qf is None:
        wanted = options.query_field or " / ".join(QUERY_FIELDS)
        problems.append(
            _problem(f"no query text column ({wanted}) in the header", name, kind="input", line=1)
        )
        return
    uf = _pick_field(header, options.user_field, USER_FIELDS)
    tf = _pick_field(header, options.time_field, TIME_FIELDS)
    qi, ui, ti = header.index(qf), header.index(uf) if uf else -1, header.index(tf) if tf else -1
    prev_line = reader.line_num
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            problems.append(_problem(f"unreadable CSV record: {e}", name, kind="input", line=prev_line + 1))
            break
        start_line, prev_line = prev_line + 1, reader.line_num
        if not row or all(not c.strip() for c in row):
            continue
        query = row[qi] if qi < len(row) else ""
        if not query.strip():
            problems.append(_problem("record has no query text", name, kind="input", line=start_line))
            continue
        user = row[ui] if 0 <= ui < len(row) and row[ui] else None
        when = _time_ms(row[ti]) if 0 <= ti < len(row) else None
        yield LogRecord(start_line, query, user, when)


def _time_ms(value: Any) -> int | None:
    """Epoch seconds / milliseconds or an ISO-8601 string, as epoch milliseconds (None if unreadable)."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    else:
        text = str(value).strip()
        try:
            number = float(text)
        except ValueError:
            try:
                parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                return None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt.timezone.utc)
            return int(parsed.timestamp() * 1000)
    return int(number if number > 1e11 else number * 1000)


def _extract_query_log(unit: WorkUnit, options: ScanOptions) -> UnitResult:
    from atlas_bridge.extractors.sql import extract_sql_lineage

    name = unit.file.name
    problems: list[Problem] = []
    parts: list[Lineage] = []
    out = UnitResult(name, unit.file.kind, Lineage())
    schema = dict(options.schema) if options.schema is not None else None
    for rec in read_query_log(unit, options, problems):
        out.statements += 1
        if rec.user:
            out.users.add(rec.user)
        if rec.time_ms is not None:
            out.first_time_ms = (
                rec.time_ms if out.first_time_ms is None else min(out.first_time_ms, rec.time_ms)
            )
            out.last_time_ms = rec.time_ms if out.last_time_ms is None else max(out.last_time_ms, rec.time_ms)
        result = extract_sql_lineage(rec.query, options.dialect, schema, options.default_db, file=name)
        parts.append(result.lineage)
        for p in result.problems:
            where = (
                f"in the query at line {p.line}" + (f", column {p.column}" if p.column else "")
                if p.line
                else ""
            )
            message = f"{p.message} ({where})" if where else p.message
            problems.append(
                p.model_copy(update={"file": name, "line": rec.line, "column": None, "message": message})
            )
    out.lineage = merge_lineage(parts) if parts else Lineage()
    out.problems = problems
    return out


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


def extract_partition(
    units: Iterable[WorkUnit], options: ScanOptions, namespace: str = "default"
) -> Iterator[tuple[str, str]]:
    """Executor side: extract each unit and convert it to Atlas entity records on its own.

    Yields ``("unit", records)`` per unit (JSON of :func:`atlas_bridge.atlas.convert.to_entity_records`
    plus the unit's process ids, relation counts and dataset kinds), then one ``("header", ...)`` with
    per-file counts, problems and the worker's peak RSS and CPU time. A unit's process tier (processes,
    column lineage) is final here; only its datasets and columns are merged on the driver. Units are
    converted one by one, not per partition, so what the driver receives does not depend on how the
    units were cut into partitions.
    """
    from atlas_bridge.atlas.convert import to_entity_records
    from atlas_bridge.graph import end_to_end

    cpu0 = time.process_time()
    files: dict[str, dict[str, Any]] = {}
    problems: list[Problem] = []
    for unit in units:
        r = extract_unit(unit, options)
        problems.extend(r.problems)
        entry = files.setdefault(r.file, {"kind": r.kind, "statements": 0, "units": 0, "users": []})
        entry["statements"] += r.statements
        entry["units"] += 1
        entry["users"] = sorted(set(entry["users"]) | r.users)
        for key, pick in (("first_time_ms", min), ("last_time_ms", max)):
            value = getattr(r, key)
            if value is not None:
                entry[key] = value if key not in entry else pick(entry[key], value)
        lineage = end_to_end(r.lineage) if options.end_to_end else r.lineage
        records = to_entity_records(lineage, namespace=namespace)
        # Relations are counted per process (spans aside), so the driver counts a process seen in many
        # scripts once; those of no process travel as short digests the driver keeps a set of.
        distinct: dict[str, set[tuple[str, ...]]] = {}
        for rel in lineage.relations:
            distinct.setdefault(rel.process_id or "", set()).add(rel.sort_key()[:-1])
        loose = distinct.pop("", set())
        records["relations"] = {pid: len(keys) for pid, keys in distinct.items()}
        records["loose_relations"] = sorted(
            hashlib.blake2b("\x1f".join(k).encode("utf-8"), digest_size=8).hexdigest() for k in loose
        )
        records["process_ids"] = [p.id for p in lineage.processes]
        records["kinds"] = {d.id: d.kind.value for d in lineage.datasets}
        yield "unit", json.dumps(records, separators=(",", ":"), ensure_ascii=False)
    header = {
        "files": files,
        "problems": [p.model_dump(mode="json", exclude_defaults=True) for p in problems],
        "max_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "cpu_s": time.process_time() - cpu0,
    }
    yield "header", json.dumps(header, sort_keys=True)


class EntityCollector:
    """Driver side: folds the units' entity records, in unit order, into what is delivered.

    Datasets and columns are merged in memory (one record per qualifiedName: the union of columns, the
    most specific type, attributes first seen kept); they are as many as the distinct tables and columns,
    whatever the number of scripts. Process-tier records (processes, column lineage, executions) are
    final already and go straight to spill files, so the driver's memory does not grow with the number of
    statements. A process (by qualifiedName) seen in an earlier unit is skipped with everything it owns:
    the same statement writing the same tables, first occurrence in file order wins.
    """

    def __init__(self, spill_dir: str | os.PathLike[str]) -> None:
        self._dir = Path(spill_dir)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._datasets: dict[tuple[bool, str], list[Any]] = {}  # key -> [typeName, group, attributes]
        self._used: set[str] = set()
        self._kinds: dict[str, str] = {}
        self._process_relations: dict[str, int] = {}
        self._loose_relations: set[str] = set()
        self._groups: set[str] = set()
        self._spill = [self._dir / "processes.jsonl", self._dir / "details.jsonl"]
        self._fhs: list[io.TextIOWrapper] | None = [open(p, "w", encoding="utf-8") for p in self._spill]  # noqa: SIM115
        self._spilled = 0
        self._dataset_order: list[tuple[bool, str]] | None = None

    def add(self, records: Mapping[str, Any]) -> None:
        """Fold one unit's records (see :func:`extract_partition`)."""
        from atlas_bridge.atlas.convert import merge_entity_record, record_key

        if self._fhs is None:
            msg = "the collector is finished"
            raise RuntimeError(msg)
        unused = set(records.get("unused", ()))
        for rec in records["datasets"]:
            key = record_key(rec)
            if not key[0] and rec["qualifiedName"] not in unused:
                self._used.add(rec["qualifiedName"])
            old = self._datasets.get(key)
            if old is None:
                self._datasets[key] = [rec["typeName"], rec["group"], rec["attributes"]]
            else:
                merged = {"typeName": old[0], "attributes": old[2]}
                merge_entity_record(merged, rec)
                old[0] = merged["typeName"]
        procs = records["processes"]
        groups = {rec["group"] for rec in procs}
        seen = groups & self._groups
        self._groups |= groups
        for rec in procs:
            if rec["group"] in seen:
                continue
            fh = self._fhs[0] if rec["tier"] == 2 else self._fhs[1]
            fh.write(json.dumps(rec, separators=(",", ":"), ensure_ascii=False) + "\n")
            self._spilled += 1
        for ds_id, kind in records.get("kinds", {}).items():
            old_kind = self._kinds.get(ds_id)
            if old_kind is None or (kind == "view" and old_kind != "view"):
                self._kinds[ds_id] = kind  # as merge_lineage: a table seen once as a view is a view
        for pid in records.get("process_ids", ()):
            if pid not in self._process_relations:
                self._process_relations[pid] = int(records.get("relations", {}).get(pid, 0))
        self._loose_relations.update(records.get("loose_relations", ()))

    def close(self) -> None:
        """Close the spill files (a run that failed before :meth:`finish`)."""
        if self._fhs is not None:
            for fh in self._fhs:
                fh.close()
            self._fhs = None

    def finish(self) -> None:
        """Close the spill files and fix the dataset tier's order (types are final now)."""
        self.close()
        if self._dataset_order is None:
            keep = [k for k, v in self._datasets.items() if v[1] in self._used]
            self._dataset_order = sorted(keep, key=self._sort_key)

    def _sort_key(self, key: tuple[bool, str]) -> tuple[str, int, str, str]:
        type_name, group, _ = self._datasets[key]
        return (group, 0 if key[1] == group else 1, type_name, key[1])

    @property
    def entities(self) -> int:
        """Entities to deliver (after :meth:`finish`)."""
        self.finish()
        assert self._dataset_order is not None
        return len(self._dataset_order) + self._spilled

    def batch_count(self, max_entities: int) -> int:
        return -(-self.entities // max_entities)

    def counts(self) -> dict[str, int]:
        """Headline numbers for the report, as :func:`lineage_counts` gives them for a merged lineage."""
        kinds: dict[str, int] = {}
        for kind in self._kinds.values():
            kinds[kind] = kinds.get(kind, 0) + 1
        return {
            "datasets": len(self._kinds),
            "tables": kinds.get("table", 0),
            "views": kinds.get("view", 0),
            "paths": kinds.get("path", 0),
            "processes": len(self._process_relations),
            "column_relations": sum(self._process_relations.values()) + len(self._loose_relations),
        }

    def records(self) -> Iterator[dict[str, Any]]:
        """Every record in delivery order: datasets and columns, processes, then column lineage."""
        from atlas_bridge.atlas.convert import REL_COLUMNS, TYPE_COLUMN

        self.finish()
        assert self._dataset_order is not None
        types = self.dataset_types()
        for key in self._dataset_order:
            type_name, group, attrs = self._datasets[key]
            refs = {"table": [types[group], group, REL_COLUMNS]} if type_name == TYPE_COLUMN else {}
            yield {
                "tier": 1,
                "group": group,
                "typeName": type_name,
                "qualifiedName": key[1],
                "attributes": attrs,
                "refs": refs,
            }
        for path in self._spill:
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    yield json.loads(line)

    def dataset_types(self) -> dict[str, str]:
        """Final typeName of every dataset, by qualifiedName."""
        return {k[1]: v[0] for k, v in self._datasets.items() if not k[0]}

    def batches(self, max_entities: int) -> Iterator[dict[str, Any]]:
        """The bulk bodies, one at a time (see :func:`atlas_bridge.atlas.convert.batches_from_records`)."""
        from atlas_bridge.atlas.convert import batches_from_records

        return batches_from_records(
            self.records(), dataset_types=self.dataset_types(), max_entities=max_entities
        )


def distinct_relations(parts: Iterable[Lineage], *, strip_spans: bool = False) -> Iterator[Lineage]:
    """The parts with every relation an earlier part had already dropped, as they stream by.

    ``merge_lineage`` keeps every relation until the merged lineage is built; dropping repeats on the way
    keeps the merge as big as the distinct lineage when a statement recurs across an estate, not as big as
    the estate. ``strip_spans`` first drops relation positions, which keep copies of a statement apart.
    """
    seen: set[Relation] = set()  # frozen models hash by value; the set holds the kept objects, no copies
    for part in parts:
        fresh: list[Relation] = []
        for rel in part.relations:
            if strip_spans and rel.span is not None:
                rel = rel.model_copy(update={"span": None})
            if rel not in seen:
                seen.add(rel)
                fresh.append(rel)
        yield part.model_copy(update={"relations": tuple(fresh)})


# --------------------------------------------------------------------------------------------------------
# The Spark job (driver)


def spark_session(master: str | None = None, *, app_name: str = "atlas-bridge-scan") -> SparkSession:
    """A session for the scan: ``local[*]`` unless told otherwise; workers use this interpreter."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        msg = "the scan runs on PySpark: pip install 'atlas-bridge[spark]' (and Java 17)"
        raise ConfigError(msg) from e

    master = master or "local[*]"
    if master.startswith("local"):
        # A venv's console script may not have its python first on PATH; workers must import atlas_bridge.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    builder = builder.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def _running_session() -> SparkSession | None:
    """The session this process already runs (notebook, spark-submit, tests): use it, never stop it."""
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError:
        return None
    if SparkContext._active_spark_context is None:
        return None
    return SparkSession.builder.getOrCreate()


@dataclasses.dataclass
class ExtractStats:
    """What the extraction phase saw, summed over partitions."""

    files: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    problems: list[Problem] = dataclasses.field(default_factory=list)
    executor_max_rss_kb: int = 0
    executor_cpu_s: float = 0.0
    """CPU time the executors' Python workers spent on extraction, summed over partitions."""
    partitions: int = 0
    extract_s: float = 0.0
    merge_s: float = 0.0

    @property
    def statements(self) -> int:
        return sum(int(f["statements"]) for f in self.files.values())

    def add(self, header: Mapping[str, Any]) -> None:
        for name, entry in header["files"].items():
            old = self.files.get(name)
            if old is None:
                self.files[name] = dict(entry)
                continue
            old["statements"] += entry["statements"]
            old["units"] += entry["units"]
            old["users"] = sorted(set(old["users"]) | set(entry["users"]))
            for key, pick in (("first_time_ms", min), ("last_time_ms", max)):
                if key in entry:
                    old[key] = entry[key] if key not in old else pick(old[key], entry[key])
        self.problems.extend(Problem.model_validate(p) for p in header["problems"])
        self.executor_max_rss_kb = max(self.executor_max_rss_kb, int(header.get("max_rss_kb", 0)))
        self.executor_cpu_s += float(header.get("cpu_s", 0.0))


def extract_entities(
    spark: SparkSession,
    units: Sequence[WorkUnit],
    options: ScanOptions,
    collector: EntityCollector,
    *,
    namespace: str,
    partitions: int | None = None,
    progress: Progress | None = None,
) -> ExtractStats:
    """Extract and convert ``units`` on Spark; fold the results into ``collector`` on the driver.

    Partition results are computed in one parallel job and kept by Spark, then streamed back in partition
    order (file-name order) into the collector, which keeps only datasets and columns in memory.
    """
    from pyspark import StorageLevel

    stats = ExtractStats()
    if not units:
        return stats
    sc = spark.sparkContext
    if partitions is None:
        # Enough to balance the cores, and small enough that one partition's result stays small.
        total = sum(max(u.end - u.start, 1) for u in units)
        partitions = max(max(1, sc.defaultParallelism) * 4, -(-total // options.partition_bytes))
    groups = partition_units(units, partitions)
    stats.partitions = len(groups)
    logger.info("extracting %d unit(s) in %d partition(s) on %s", len(units), len(groups), sc.master)
    opts = options
    ns = namespace

    def run(items: Iterable[list[WorkUnit]]) -> Iterator[tuple[str, str]]:
        for group in items:
            yield from extract_partition(group, opts, ns)

    rdd = sc.parallelize(groups, len(groups)).mapPartitions(run).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        t0 = time.perf_counter()
        sc.setJobDescription(f"atlas-bridge scan: extract lineage from {len(units)} input(s)")
        with _ProgressTracker(spark, len(groups), progress):
            rdd.count()
        sc.setJobDescription(None)  # type: ignore[arg-type]  # None clears it
        stats.extract_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        done = 0
        for tag, payload in rdd.toLocalIterator():
            if tag == "unit":
                collector.add(json.loads(payload))
                continue
            stats.add(json.loads(payload))  # a partition's header comes after its units
            done += 1
            if progress is not None:
                progress("merge", done, len(groups))
        collector.finish()
        stats.merge_s = time.perf_counter() - t0
    finally:
        rdd.unpersist()
    counts = collector.counts()
    logger.info(
        "extracted %d statement(s) from %d file(s) in %.1fs; merged in %.1fs: %d dataset(s), %d process(es)",
        stats.statements,
        len(stats.files),
        stats.extract_s,
        stats.merge_s,
        counts["datasets"],
        counts["processes"],
    )
    return stats


class _ProgressTracker:
    """Polls Spark's status tracker in a thread while a job runs: completed tasks = partitions done."""

    def __init__(self, spark: SparkSession, total: int, progress: Progress | None) -> None:
        self._sc = spark.sparkContext
        self._total = total
        self._progress = progress
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _ProgressTracker:
        self._thread = threading.Thread(target=self._poll, name="atlas-bridge-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._progress is not None and exc[0] is None:
            self._progress("extract", self._total, self._total)
        logger.info("extraction: %d/%d partition(s) done", self._total, self._total)

    def _poll(self) -> None:
        tracker = self._sc.statusTracker()
        last_log = time.monotonic()
        last_done = -1
        while not self._stop.wait(0.5):
            done = 0
            try:
                for stage_id in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(stage_id)
                    if info is not None and info.numTasks == self._total:
                        done = max(done, info.numCompletedTasks)
            except Exception:  # the tracker is best effort; a gateway hiccup must not end the scan
                logger.debug("status tracker failed", exc_info=True)
                continue
            if done != last_done and self._progress is not None:
                self._progress("extract", done, self._total)
            last_done = done
            if time.monotonic() - last_log >= 10:
                logger.info("extraction: %d/%d partition(s) done", done, self._total)
                last_log = time.monotonic()


# --------------------------------------------------------------------------------------------------------
# Delivery with resume (driver)


class Delivery(Protocol):
    """Where batches go. ``send`` returns Atlas's (created, updated) counts, or None when there is no Atlas
    answer (files). It raises :class:`~atlas_bridge.errors.AtlasError` when the batch was not acknowledged."""

    target: str
    """A stable name of the destination; resume state is kept per target."""

    def send(self, batch: dict[str, Any]) -> tuple[int, int] | None: ...

    def close(self) -> None: ...


class SinkDelivery:
    """Delivery through a :class:`atlas_bridge.atlas.sink.Sink` (``emit`` / ``close``).

    A sink with a ``report`` (``AtlasSink``'s ``PushReport``) gives created / updated counts; a batch it
    spooled instead of delivering is *not* acknowledged, so it is raised as unavailable and the resume
    state does not record it.
    """

    def __init__(self, sink: Any, target: str) -> None:
        self.sink = sink
        self.target = target

    def send(self, batch: dict[str, Any]) -> tuple[int, int] | None:
        report = getattr(self.sink, "report", None)
        if report is None:
            self.sink.emit(batch)
            return None
        created, updated, spooled = report.created, report.updated, report.spooled
        self.sink.emit(batch)
        if report.spooled > spooled:
            msg = "Atlas unavailable; the batch was kept in the sink's spool"
            raise AtlasUnavailableError(msg)
        return report.created - created, report.updated - updated

    def close(self) -> None:
        self.sink.close()


class ClientDelivery:
    """Delivery straight to Atlas through an ``AtlasClient`` (``post_entities``)."""

    def __init__(self, client: Any, target: str) -> None:
        self.client = client
        self.target = target

    def send(self, batch: dict[str, Any]) -> tuple[int, int] | None:
        response = self.client.post_entities(batch)
        return _mutations(response if isinstance(response, Mapping) else {})

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if callable(close):
            close()


def batch_hash(batch: Mapping[str, Any]) -> str:
    """Content hash of a batch: same bytes, same hash (keys sorted, no whitespace)."""
    data = json.dumps(batch, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


class SentState:
    """Hashes of batches a target acknowledged, in an append-only JSON-lines file.

    One line per acknowledged batch, flushed and fsynced before the next batch goes out, so a run killed at
    any point loses at most the acknowledgement of the batch in flight (which is then sent again: harmless,
    Atlas upserts by qualifiedName). A torn last line is ignored.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._sent: set[str] = set()
        if path.exists():
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(entry, dict) and isinstance(entry.get("hash"), str):
                        self._sent.add(entry["hash"])
        self._fh: io.TextIOWrapper | None = None

    @classmethod
    def for_target(cls, state_dir: str | os.PathLike[str], target: str) -> SentState:
        key = hashlib.sha256(target.encode("utf-8")).hexdigest()[:16]
        return cls(Path(state_dir) / f"sent-{key}.jsonl")

    def __contains__(self, digest: object) -> bool:
        return digest in self._sent

    def __len__(self) -> int:
        return len(self._sent)

    def record(self, digest: str, entities: int) -> None:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open across batches
        self._fh.write(json.dumps({"hash": digest, "entities": entities, "at": int(time.time())}) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._sent.add(digest)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def compact(self, keep: Iterable[str]) -> None:
        """Rewrite the file with only ``keep`` (this run's batches, all acknowledged), so it stays small."""
        self.close()
        wanted = [h for h in dict.fromkeys(keep) if h in self._sent]
        tmp = self.path.with_suffix(".jsonl.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for digest in wanted:
                fh.write(json.dumps({"hash": digest}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        self._sent = set(wanted)


@dataclasses.dataclass
class DeliveryStats:
    """Counts of one delivery."""

    batches: int = 0
    sent: int = 0
    skipped: int = 0
    entities: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    written: int = 0
    """Entities written to files (no Atlas answer to count created / updated from)."""
    errors: list[str] = dataclasses.field(default_factory=list)
    deliver_s: float = 0.0


def _batch_entity_count(batch: Mapping[str, Any]) -> int:
    return len(batch.get("entities") or []) + len(batch.get("referredEntities") or {})


def _mutations(response: Mapping[str, Any]) -> tuple[int, int]:
    mutated = response.get("mutatedEntities") or {}
    created = {e.get("guid") or id(e) for e in mutated.get("CREATE") or []}
    updated = {e.get("guid") or id(e) for k in ("UPDATE", "PARTIAL_UPDATE") for e in mutated.get(k) or []}
    return len(created), len(updated - created)


def deliver(
    batches: Iterable[dict[str, Any]],
    delivery: Delivery,
    state: SentState | None,
    *,
    skip_acknowledged: bool = True,
    progress: Progress | None = None,
    total: int | None = None,
) -> DeliveryStats:
    """Send ``batches`` in order, skipping those ``state`` says were acknowledged, recording each new ack.

    ``batches`` may be a generator (one body in memory at a time); then ``total`` says how many it yields.

    A batch Atlas rejects is an error and the next batch is tried (batches stand alone); when Atlas cannot
    be reached at all the delivery stops there, and the next run resumes from the first unacknowledged batch.
    """
    if total is None:
        batches = batches if isinstance(batches, Sequence) else list(batches)
        total = len(batches)
    stats = DeliveryStats(batches=total)
    digests: list[str] = []
    t0 = time.perf_counter()
    last_log = time.monotonic()
    for index, batch in enumerate(batches, start=1):
        digest = batch_hash(batch)
        digests.append(digest)
        count = _batch_entity_count(batch)
        stats.entities += count
        if skip_acknowledged and state is not None and digest in state:
            stats.skipped += 1
            stats.unchanged += count
        else:
            try:
                response = delivery.send(batch)
            except AtlasUnavailableError as e:
                stats.errors.append(f"batch {index}/{total}: {e}; stopped, re-run to resume")
                logger.error("delivery stopped at batch %d/%d: %s", index, total, e)
                break
            except AtlasBridgeError as e:
                stats.errors.append(f"batch {index}/{total}: {e}")
                logger.error("batch %d/%d refused: %s", index, total, e)
                continue
            stats.sent += 1
            if response is None:
                stats.written += count
            else:
                created, updated = response
                stats.created += created
                stats.updated += updated
                stats.unchanged += max(0, count - created - updated)
            if state is not None:
                state.record(digest, count)
        if progress is not None:
            progress("deliver", index, total)
        if time.monotonic() - last_log >= 10:
            logger.info("delivery: %d/%d batch(es)", index, total)
            last_log = time.monotonic()
    if state is not None and not stats.errors and len(state) > len(digests):
        state.compact(digests)  # every batch of this run is acknowledged: older hashes are of no use
    stats.deliver_s = time.perf_counter() - t0
    logger.info(
        "delivered %d batch(es) to %s (%d skipped as already acknowledged): "
        "%d created, %d updated, %d unchanged, %d written",
        stats.sent,
        delivery.target,
        stats.skipped,
        stats.created,
        stats.updated,
        stats.unchanged,
        stats.written,
    )
    return stats


# --------------------------------------------------------------------------------------------------------
# The whole scan


@dataclasses.dataclass
class ScanSummary:
    """The closing report of a scan (``summary.json``)."""

    target: str
    files: list[InputFile]
    notes: list[str]
    extract: ExtractStats
    lineage_counts: dict[str, int]
    delivery: DeliveryStats
    timings_s: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.extract.problems if p.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.extract.problems if p.severity is not Severity.ERROR]

    def failed(self, fail_on: str = "error") -> bool:
        """Whether the run counts as failed under ``fail_on`` (``error``, ``warning`` or ``never``)."""
        if fail_on == "never":
            return False
        bad = bool(self.errors or self.delivery.errors)
        return bad or (fail_on == "warning" and bool(self.warnings))

    def to_dict(self) -> dict[str, Any]:
        """The summary as JSON-ready data; stable for the same input and Atlas state (no timings)."""
        by_kind: dict[str, int] = {}
        for f in self.files:
            by_kind[f.kind] = by_kind.get(f.kind, 0) + 1
        d = self.delivery
        return {
            "target": self.target,
            "files": {
                "total": len(self.files),
                "by_kind": dict(sorted(by_kind.items())),
                "skipped": self.notes,
                "per_file": {
                    name: _file_entry(self.extract.files[name]) for name in sorted(self.extract.files)
                },
            },
            "statements": self.extract.statements,
            "lineage": self.lineage_counts,
            "processes": self.lineage_counts.get("processes", 0),
            "batches": {"total": d.batches, "sent": d.sent, "skipped_already_acknowledged": d.skipped},
            "entities": {
                "total": d.entities,
                "created": d.created,
                "updated": d.updated,
                "unchanged": d.unchanged,
                "written_to_files": d.written,
            },
            "errors": [_problem_dict(p) for p in self.errors]
            + [{"message": m, "kind": "delivery"} for m in d.errors],
            "warnings": [_problem_dict(p) for p in self.warnings],
        }

    def render(self, max_lines: int = 20) -> str:
        """A human-readable closing report."""
        d = self.delivery
        s = self.to_dict()
        n = {k: s["lineage"].get(k, 0) for k in ("processes", "tables", "views", "paths", "column_relations")}
        kinds = ", ".join(f"{n} {k}" for k, n in s["files"]["by_kind"].items()) or "none"
        lines = [
            f"files:      {len(self.files)} ({kinds})",
            f"statements: {s['statements']}",
            f"lineage:    {n['processes']} process(es), {n['tables']} table(s), {n['views']} view(s), "
            f"{n['paths']} path(s), {n['column_relations']} column relation(s)",
            f"batches:    {d.sent} sent, {d.skipped} already acknowledged, of {d.batches} to {self.target}",
        ]
        if d.written:
            lines.append(f"entities:   {d.entities} ({d.written} written to files)")
        else:
            lines.append(f"entities:   {d.created} created, {d.updated} updated, {d.unchanged} unchanged")
        errors = s["errors"]
        lines.append(
            f"errors:     {len(errors)}" + (f", warnings: {len(s['warnings'])}" if s["warnings"] else "")
        )
        for e in errors[:max_lines]:
            lines.append(f"  {_problem_text(e)}")
        if len(errors) > max_lines:
            lines.append(f"  ... and {len(errors) - max_lines} more (see summary.json)")
        return "\n".join(lines)


def _file_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if v != [] and not (k == "units" and v == 1)}


def _problem_dict(p: Problem) -> dict[str, Any]:
    return p.model_dump(mode="json", exclude_none=True)


def _problem_text(e: Mapping[str, Any]) -> str:
    where = str(e.get("file") or "")
    if e.get("line") is not None:
        where += f":{e['line']}"
        if e.get("column") is not None:
            where += f":{e['column']}"
    stmt = f" statement {e['statement_index']}:" if e.get("statement_index") is not None else ""
    kind = e.get("kind", "error")
    return f"{where}:{stmt} [{kind}] {e['message']}" if where else f"[{kind}] {e['message']}"


def lineage_counts(lineage: Lineage) -> dict[str, int]:
    """Headline numbers of a lineage for the report."""
    kinds: dict[str, int] = {}
    for ds in lineage.datasets:
        kinds[ds.kind.value] = kinds.get(ds.kind.value, 0) + 1
    return {
        "datasets": len(lineage.datasets),
        "tables": kinds.get("table", 0),
        "views": kinds.get("view", 0),
        "paths": kinds.get("path", 0),
        "processes": len(lineage.processes),
        "column_relations": len(lineage.relations),
    }


def scan(
    paths: Sequence[str | os.PathLike[str]],
    delivery: Delivery,
    *,
    namespace: str,
    spark: SparkSession | None = None,
    master: str | None = None,
    options: ScanOptions | None = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    state_dir: str | os.PathLike[str] | None = None,
    resume: bool = True,
    max_entities: int = 500,
    partitions: int | None = None,
    progress: Progress | None = None,
) -> ScanSummary:
    """Discover, extract on Spark, merge, convert and deliver; returns the closing report.

    Args:
        paths: files and directories to scan.
        delivery: where batches go (see :class:`SinkDelivery`, :class:`ClientDelivery`).
        namespace: Atlas metadata namespace for qualifiedNames.
        spark: an existing session (tests, notebooks); else one is started on ``master`` and stopped after.
        state_dir: where acknowledged batch hashes are kept; None = no resume state.
        resume: skip batches the state says were acknowledged (False: send all, still record).
        max_entities: largest batch.
        progress: ``progress(phase, done, total)``; the library itself only logs.
    """
    options = options or ScanOptions()
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    files, notes = discover_inputs(paths, include=include, exclude=exclude, query_field=options.query_field)
    for note in notes:
        logger.info("%s", note)
    logger.info("found %d input file(s)", len(files))
    timings["discover"] = time.perf_counter() - t0

    with tempfile.TemporaryDirectory(prefix="atlas-bridge-scan-") as spill:
        collector = EntityCollector(spill)
        session = spark if spark is not None else _running_session()
        own_session = session is None
        if session is None:
            session = spark_session(master)
        elif master is not None and session.sparkContext.master != master:
            logger.warning(
                "a Spark session on %s is running already; using it, not %s",
                session.sparkContext.master,
                master,
            )
        try:
            remote = not (session.sparkContext.master or "local").startswith("local")
            units = plan_units(files, options, ship_content=remote)
            stats = extract_entities(
                session,
                units,
                options,
                collector,
                namespace=namespace,
                partitions=partitions,
                progress=progress,
            )
        finally:
            if own_session:
                session.stop()
            collector.close()
        timings["extract"] = stats.extract_s
        timings["merge"] = stats.merge_s
        for p in stats.problems:
            log = logger.error if p.severity is Severity.ERROR else logger.warning
            log("%s", p)

        t0 = time.perf_counter()
        collector.finish()  # conversion itself ran on the executors; batches are rendered as they go out
        counts = collector.counts()
        total = collector.batch_count(max_entities)
        timings["convert"] = time.perf_counter() - t0

        state = (
            SentState.for_target(state_dir, f"{delivery.target}|{namespace}")
            if state_dir is not None
            else None
        )
        try:
            dstats = deliver(
                collector.batches(max_entities),
                delivery,
                state,
                skip_acknowledged=resume,
                progress=progress,
                total=total,
            )
        finally:
            if state is not None:
                state.close()
    timings["deliver"] = dstats.deliver_s
    return ScanSummary(delivery.target, files, notes, stats, counts, dstats, timings)


def write_summary(summary: ScanSummary, output_dir: str | os.PathLike[str]) -> Path:
    """Write ``summary.json`` (sorted keys, stable) into ``output_dir``."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "summary.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(
        json.dumps(summary.to_dict(), sort_keys=True, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    os.replace(tmp, path)
    return path
