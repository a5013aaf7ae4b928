"""Stage 2 (executors): read a unit, run the pure extractors, convert to entity records; never raises."""

from __future__ import annotations

import hashlib
import json
import logging
import resource
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from atlas_bridge.bridge.dialects import dialect_hint
from atlas_bridge.bridge.inputs import count_statements, decode_text, make_problem, printable, read_unit
from atlas_bridge.bridge.querylog import read_query_log
from atlas_bridge.bridge.schema import SqlflowDefines
from atlas_bridge.bridge.types import InputKind, ScanOptions, UnitResult, WorkUnit
from atlas_bridge.errors import AtlasBridgeError
from atlas_bridge.extractors.sql.schema import ClosedTable, LearnedTable, SchemaIndex, TableKey
from atlas_bridge.model import ExtractionResult, Lineage, PausedGC, Problem, merge_lineage

if TYPE_CHECKING:
    from atlas_bridge.bridge.bodies import GroupText

logger = logging.getLogger(__name__)

TextSink = Callable[[str, bytes], "tuple[str, int, int, int] | None"]
"""Writes a process group's text line where the driver reads it (a file of the task's, on a local master):
``sink(group, line)`` gives where (file name, offset, length, the tab's index), or None to send it with
the results."""


def extract_unit(unit: WorkUnit, options: ScanOptions, schema: SchemaIndex | None = None) -> UnitResult:
    """Read one unit and extract its lineage; never raises (failures become problems naming the file).

    ``schema``: the index built once per worker from the learned and the given schema (it replaces
    ``options.schema``). Problem messages are made printable: a message may quote input, and input may
    hold control bytes.
    """
    return _printable(_extract_unit(unit, options, schema))


def unit_results(
    unit: WorkUnit, options: ScanOptions, schema: SchemaIndex | None = None
) -> Iterator[UnitResult]:
    """:func:`extract_unit`, in pieces for a SQLFlow export and a Spark event log (a big one is never one
    model in memory); for OpenLineage event files one result per file, the lineage of all their events with
    the first."""
    if unit.file.kind == InputKind.OPENLINEAGE:
        yield from (_printable(r) for r in _extract_openlineage(unit))
        return
    if unit.file.kind == InputKind.SPARK_EVENT_LOG:
        try:
            for log_piece in _event_log_pieces(unit, options):
                yield _printable(log_piece)
        except Exception as e:  # one bad log must not end the job (its earlier pieces stand)
            yield _printable(_extract_unit_failed(unit, e))
        return
    if unit.file.kind != InputKind.SQLFLOW:
        yield extract_unit(unit, options, schema)
        return
    from atlas_bridge.sqlflow.read import iter_sqlflow_lineage

    f = unit.file
    try:
        pieces = iter_sqlflow_lineage(
            read_unit(unit), file=f.name, chunk_relations=options.sqlflow_chunk_relations
        )
        previous: ExtractionResult | None = None
        for piece in pieces:  # the last piece holds every process: the statements are counted there
            if previous is not None:
                yield _printable(UnitResult(f.name, f.kind, previous.lineage))
            previous = piece
        if previous is not None:
            problems = [p if p.file else p.model_copy(update={"file": f.name}) for p in previous.problems]
            lineage = previous.lineage
            yield _printable(UnitResult(f.name, f.kind, lineage, len(lineage.processes), problems))
    except (AtlasBridgeError, OSError) as e:
        msg = f"cannot read: {e.strerror or e.__class__.__name__}" if isinstance(e, OSError) else str(e)
        yield _printable(
            UnitResult(f.name, f.kind, Lineage(), problems=[make_problem(msg, f.name, kind="input")])
        )
    except Exception as e:  # one bad file must not end the job
        logger.exception("extraction of %s failed", f.name)
        msg = f"internal error: {e.__class__.__name__}: {e}"
        yield UnitResult(f.name, f.kind, Lineage(), problems=[make_problem(msg, f.name, kind="internal")])


def _printable(result: UnitResult) -> UnitResult:
    for i, p in enumerate(result.problems):
        clean = printable(p.message, 500)
        if clean != p.message:
            result.problems[i] = p.model_copy(update={"message": clean})
    return result


def _extract_unit(unit: WorkUnit, options: ScanOptions, schema: SchemaIndex | None) -> UnitResult:
    f = unit.file
    try:
        if f.kind == InputKind.SQL:
            return _extract_sql_file(unit, options, schema)
        if f.kind == InputKind.SQLFLOW:
            return _extract_sqlflow_file(unit)
        if f.kind == InputKind.QUERY_LOG:
            return _extract_query_log(unit, options, schema)
        if f.kind == InputKind.SPARK_EVENT_LOG:
            return _merge_results(list(_event_log_pieces(unit, options)))
        msg = f"unknown input kind {f.kind!r}"
        return UnitResult(f.name, f.kind, Lineage(), problems=[make_problem(msg, f.name, kind="input")])
    except AtlasBridgeError as e:
        return UnitResult(f.name, f.kind, Lineage(), problems=[make_problem(str(e), f.name, kind="input")])
    except OSError as e:  # gone or unreadable since it was found
        msg = f"cannot read: {e.strerror or e.__class__.__name__}"
        return UnitResult(f.name, f.kind, Lineage(), problems=[make_problem(msg, f.name, kind="input")])
    except Exception as e:  # one bad file must not end the job
        logger.exception("extraction of %s failed", f.name)
        msg = f"internal error: {e.__class__.__name__}: {e}"
        return UnitResult(f.name, f.kind, Lineage(), problems=[make_problem(msg, f.name, kind="internal")])


def _merge_results(results: list[UnitResult]) -> UnitResult:
    """Pieces of one unit as one result (:func:`extract_unit` of an event log)."""
    out = results[-1]
    if len(results) == 1:
        return out
    merged = UnitResult(out.file, out.kind, merge_lineage(r.lineage for r in results))
    for r in results:
        merged.statements += r.statements
        merged.problems.extend(r.problems)
        merged.users |= r.users
        merged.runs.update(r.runs)
        for key, pick in (("first_time_ms", min), ("last_time_ms", max)):
            value, old = getattr(r, key), getattr(merged, key)
            if value is not None:
                setattr(merged, key, value if old is None else pick(old, value))
    return merged


def _schema_of(options: ScanOptions, schema: SchemaIndex | None) -> SchemaIndex | dict[str, Any] | None:
    if schema is not None:
        return schema
    return dict(options.schema) if options.schema is not None else None


def _extract_sql_file(unit: WorkUnit, options: ScanOptions, base: SchemaIndex | None) -> UnitResult:
    from atlas_bridge.extractors.sql import extract_and_learn

    name = unit.file.name
    problems: list[Problem] = []
    text = decode_text(read_unit(unit), name, problems)
    schema = _schema_of(options, base)
    dialect = unit.dialect or dialect_hint(text) or options.dialect
    statements = count_statements(text)
    if unit.first_line > 1 or unit.prelude:
        # A piece of a big script: the script's last USE before it on line 1, then blank lines, so that
        # line numbers are the file's own and unqualified names resolve as in the whole script.
        text = unit.prelude + "\n" * (unit.first_line - 1) + text
    source = unit.file.source_name
    result, defines, lookups = extract_and_learn(text, dialect, schema, options.default_db, file=source)
    # the payloads name the file as below the scanned folder (sourceFile); reports as the user can open it
    problems.extend(p if p.file == name else p.model_copy(update={"file": name}) for p in result.problems)
    return UnitResult(
        name, unit.file.kind, result.lineage, statements, problems, defines=defines, lookups=lookups
    )


def _extract_sqlflow_file(unit: WorkUnit) -> UnitResult:
    from atlas_bridge.sqlflow.read import extract_sqlflow_lineage

    name = unit.file.name
    result: ExtractionResult = extract_sqlflow_lineage(read_unit(unit), file=name)
    problems = [p if p.file else p.model_copy(update={"file": name}) for p in result.problems]
    return UnitResult(name, unit.file.kind, result.lineage, len(result.lineage.processes), problems)


def _extract_openlineage(unit: WorkUnit) -> list[UnitResult]:
    """Every event file of the scan read together, so that a run's events in several files converge (see
    :mod:`atlas_bridge.openlineage.read`); a file that cannot be read is a problem of that file alone."""
    from atlas_bridge.openlineage.files import read_event_text
    from atlas_bridge.openlineage.read import read_events

    results: list[UnitResult] = []
    events: list[tuple[str, int, Any]] = []
    for f, content in ((unit.file, unit.content), *unit.more):
        out = UnitResult(f.name, f.kind, Lineage())
        try:
            data = content if content is not None else read_unit(WorkUnit(f, 0, f.size))
        except OSError as e:
            out.problems.append(
                make_problem(f"cannot read: {e.strerror or e.__class__.__name__}", f.name, kind="input")
            )
            results.append(out)
            continue
        found, problems = read_event_text(decode_text(data, f.name, out.problems), f.name)
        events.extend(found)
        out.problems.extend(problems)
        out.statements = len(found)
        results.append(out)
    read = read_events(events)
    by_file = {r.file: r for r in results}
    for p in read.result.problems:
        by_file.get(p.file or "", results[0]).problems.append(p)
    for r in results:
        r.problems.sort(key=lambda p: (p.line or 0, p.column or 0))
    results[0].lineage = read.result.lineage
    results[0].runs = dict(read.runs)
    return results


def _extract_query_log(unit: WorkUnit, options: ScanOptions, base: SchemaIndex | None) -> UnitResult:
    from atlas_bridge.extractors.sql import extract_and_learn

    name = unit.file.name
    problems: list[Problem] = []
    parts: list[Lineage] = []
    out = UnitResult(name, unit.file.kind, Lineage())
    given = _schema_of(options, base)
    # One index for the whole log (each record's own DDL goes into a layer of its own over it).
    schema = given if isinstance(given, SchemaIndex) or not given else SchemaIndex(given)
    seen: set[TableKey] = set()
    for rec in read_query_log(unit, options, problems):
        out.statements += 1
        if rec.user:
            out.users.add(rec.user)
        if rec.time_ms is not None:
            out.first_time_ms = (
                rec.time_ms if out.first_time_ms is None else min(out.first_time_ms, rec.time_ms)
            )
            out.last_time_ms = rec.time_ms if out.last_time_ms is None else max(out.last_time_ms, rec.time_ms)
        try:
            result, defines, lookups = extract_and_learn(
                rec.query, options.dialect, schema, options.default_db, file=unit.file.source_name
            )
            out.defines.extend(defines)
            out.lookups.extend(k for k in lookups if k not in seen)
            seen.update(lookups)
        except AtlasBridgeError as e:
            problems.append(make_problem(str(e), name, kind="input", line=rec.line))
            continue
        except Exception as e:  # one bad record costs that record
            msg = f"internal error: {e.__class__.__name__}: {e}"
            problems.append(make_problem(msg, name, kind="internal", line=rec.line))
            continue
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


def _extract_unit_failed(unit: WorkUnit, e: Exception) -> UnitResult:
    f = unit.file
    if isinstance(e, AtlasBridgeError):
        return UnitResult(f.name, f.kind, Lineage(), problems=[make_problem(str(e), f.name, kind="input")])
    if isinstance(e, OSError):
        msg = f"cannot read: {e.strerror or e.__class__.__name__}"
        return UnitResult(f.name, f.kind, Lineage(), problems=[make_problem(msg, f.name, kind="input")])
    logger.exception("extraction of %s failed", f.name)
    msg = f"internal error: {e.__class__.__name__}: {e}"
    return UnitResult(f.name, f.kind, Lineage(), problems=[make_problem(msg, f.name, kind="internal")])


def _event_log_pieces(unit: WorkUnit, options: ScanOptions) -> Iterator[UnitResult]:
    """A Spark event log, ``options.eventlog_chunk_runs`` job runs at a time: each run (a root SQL
    execution and those nested in it) through the plan reader, its processes recorded as run by that
    execution (a process execution each). The last piece carries what reading the log met."""
    from atlas_bridge.spark.eventlog import ReadStats, read_executions, run_lineage

    f = unit.file
    stats = ReadStats()
    size = max(1, options.eventlog_chunk_runs)

    def piece() -> UnitResult:
        return UnitResult(f.name, f.kind, Lineage())

    out, count = piece(), 0
    parts: list[Lineage] = []
    for run in read_executions(f.path, data=unit.content, name=f.name, stats=stats):
        if count == size:
            out.lineage = merge_lineage(parts) if parts else Lineage()
            yield out
            out, parts, count = piece(), [], 0
        count += 1
        out.statements += 1
        lineage, runs, problems = run_lineage(run, source=f.source_name, default_db=options.default_db)
        out.problems.extend(problems)
        if run.app.user:
            out.users.add(run.app.user)
        start = run.root.start.get("time")
        if isinstance(start, int):
            out.first_time_ms = start if out.first_time_ms is None else min(out.first_time_ms, start)
            out.last_time_ms = start if out.last_time_ms is None else max(out.last_time_ms, start)
        if lineage.processes:
            parts.append(lineage)
            out.runs.update({pid: (info,) for pid, info in runs.items()})
    out.problems[:0] = stats.problems
    out.lineage = merge_lineage(parts) if parts else Lineage()
    yield out


def extract_partition(
    units: Iterable[WorkUnit],
    options: ScanOptions,
    namespace: str = "default",
    schema: SchemaIndex | None = None,
    *,
    per_unit: bool = False,
    spill_groups: bool = False,
    text_sink: TextSink | None = None,
) -> Iterator[tuple[str, str]]:
    """Executor side: extract each unit and convert it to Atlas entity records on its own.

    Yields ``("unit", records)`` per unit (JSON of :func:`atlas_bridge.atlas.convert.to_entity_records`
    plus the unit's process ids, relation counts and dataset kinds), then one ``("header", ...)`` with
    per-file counts, problems and the worker's peak RSS and CPU time. A unit's process tier (processes,
    column lineage) is final here, but for a process other units' statements share too (the driver makes
    their union from the records and ``sides``); only its datasets and columns are merged on the driver.
    Units are converted one by one, not per partition, so what the driver receives does not depend on
    how the units were cut into partitions.

    ``per_unit``: each unit's records are followed by ``("schema", ...)`` (the tables it defines, their
    rank - 0 SQL, 1 SQLFlow - and its look-ups) and ``("uhead", ...)`` (its file counts and problems), and
    the partition's header holds only RSS and CPU: the scan learns the schema from the units' results and
    may replace a unit's results by a second extraction's.

    ``spill_groups``: the process tier comes as the driver's spill groups
    (:func:`atlas_bridge.bridge.bodies.process_groups`, made here in parallel), not as record lines.
    ``text_sink`` (with ``spill_groups``): a group's text line the sink takes is written there, and the
    unit's payload names where (``[file, offset, length, tab]``) instead of carrying it: on a local master
    the executors and the driver share a disk, and the texts are most of the bytes (40 KB a TPC-DS
    statement).
    """
    texts = _group_text() if spill_groups else None
    cpu0 = time.process_time()
    files: dict[str, dict[str, Any]] = {}
    problems: list[Problem] = []
    for unit in units:
        if per_unit:
            files, problems = {}, []
        defines: list[LearnedTable] = []
        lookups: dict[TableKey, None] = {}
        failed = False
        # A SQLFlow export's created tables come from the pieces read here (not from a second reading).
        sqlflow_defines = SqlflowDefines() if per_unit and unit.file.kind == InputKind.SQLFLOW else None
        for i, r in enumerate(unit_results(unit, options, schema)):
            if sqlflow_defines is not None:
                sqlflow_defines.add(r.lineage)
            _count(files, r, first=i == 0)
            problems.extend(r.problems)
            defines.extend(r.defines)
            lookups.update(dict.fromkeys(r.lookups))
            try:
                if failed:  # its other pieces are not sent either: one problem, no half of a file
                    r = UnitResult(r.file, r.kind, Lineage())
                with PausedGC():  # conversion builds many objects that all live until the unit is sent
                    records = _unit_records(r, options, namespace, texts, text_sink)
            except Exception as e:  # a bug of ours in the conversion: this file's lineage only, not the job
                logger.exception("conversion of %s failed", unit.file.name)
                msg = f"internal error: its lineage could not be converted: {e.__class__.__name__}: {e}"
                problems.append(make_problem(printable(msg, 500), unit.file.name, kind="internal"))
                failed = True
                records = _unit_records(
                    UnitResult(r.file, r.kind, Lineage()), options, namespace, texts, text_sink
                )
            yield "unit", records
        if per_unit:
            rank = 0
            if sqlflow_defines is not None:  # its CREATE processes' targets teach, SQL DDL wins
                defines, rank = sqlflow_defines.tables(), 1
            learned = {"tables": defines, "rank": rank, "lookups": list(lookups)}
            closed = [i for i, t in enumerate(defines) if isinstance(t, ClosedTable)]
            if closed:  # views and CTAS tables (JSON keeps no tuple's class)
                learned["closed"] = closed
            yield "schema", json.dumps(learned, separators=(",", ":"), ensure_ascii=False)
            yield "uhead", json.dumps(_header(files, problems), sort_keys=True)
    header: dict[str, Any] = _header({}, []) if per_unit else _header(files, problems)
    header["max_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    header["cpu_s"] = time.process_time() - cpu0
    yield "header", json.dumps(header, sort_keys=True)


def _header(files: dict[str, dict[str, Any]], problems: list[Problem]) -> dict[str, Any]:
    return {"files": files, "problems": [p.model_dump(mode="json", exclude_defaults=True) for p in problems]}


def _count(files: dict[str, dict[str, Any]], r: UnitResult, *, first: bool) -> None:
    entry = files.setdefault(r.file, {"kind": r.kind, "statements": 0, "units": 0, "users": []})
    entry["statements"] += r.statements
    entry["units"] += 1 if first else 0
    entry["users"] = sorted(set(entry["users"]) | r.users)
    for key, pick in (("first_time_ms", min), ("last_time_ms", max)):
        value = getattr(r, key)
        if value is not None:
            entry[key] = value if key not in entry else pick(entry[key], value)


_SEP = "\x00"
_SEP_BYTES = _SEP.encode("ascii")


def pack_unit(payload: str) -> bytes:
    """A ``("unit", payload)`` as it travels from an executor to the driver: deflated at zlib's fastest
    level. Its texts repeat a few hundred reference strings: a TPC-DS statement's 44 KB become 2.6, so
    Spark keeps, spills and streams a seventeenth of it, and the driver's inflating costs less than
    reading the bytes it saves."""
    return zlib.compress(payload.encode("utf-8"), 1)


def decode_unit(payload: str | bytes) -> dict[str, Any]:
    """A ``("unit", payload)`` of :func:`extract_partition` (or packed by :func:`pack_unit`) as records (the
    spill groups' texts, sent after the JSON, put back in their groups as UTF-8 bytes: they go to the spill
    and into bodies as bytes, never decoded on the way)."""
    data = zlib.decompress(payload) if isinstance(payload, bytes) else payload.encode("utf-8")
    head, sep, rest = data.partition(_SEP_BYTES)
    records: dict[str, Any] = json.loads(head)
    if sep:
        texts = rest.split(_SEP_BYTES)
        groups, k = [], 0
        for meta in records["process_groups"]:
            if len(meta) == 5:  # its text line is in a task's file (a list: where), its records here
                groups.append([*meta, texts[k]])
                k += 1
            else:
                groups.append([*meta, texts[k], texts[k + 1]])
                k += 2
        records["process_groups"] = groups
    return records


def _group_text() -> GroupText:
    """One per partition: it caches the JSON of the references it has met."""
    from atlas_bridge.atlas.convert import _DATASET_TYPES, TYPE_COLUMN
    from atlas_bridge.bridge.bodies import GroupText

    return GroupText(_DATASET_TYPES | {TYPE_COLUMN}, _DATASET_TYPES)


def _unit_records(
    r: UnitResult, options: ScanOptions, namespace: str, texts: GroupText | None, sink: TextSink | None = None
) -> str:
    from atlas_bridge.atlas.convert import to_entity_records
    from atlas_bridge.graph import end_to_end

    lineage = end_to_end(r.lineage) if options.end_to_end else r.lineage
    records = to_entity_records(lineage, namespace=namespace, runs=r.runs)
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
    # The process tier is final: serialised here, in parallel, as the driver's spill lines.
    lines = [
        [rec["group"], json.dumps(rec, separators=(",", ":"), ensure_ascii=False)]
        for rec in records.pop("processes")
    ]
    records["process_ids"] = [p.id for p in lineage.processes]
    records["kinds"] = {d.id: d.kind.value for d in lineage.datasets}
    if texts is None:
        records["process_lines"] = lines
        return json.dumps(records, separators=(",", ":"), ensure_ascii=False)
    from atlas_bridge.bridge.bodies import process_groups

    groups = process_groups(lines, texts)
    metas: list[list[Any]] = []
    big: list[str] = []
    for g in groups:
        ref = sink(g[0], g[4].encode("utf-8")) if sink is not None else None
        if ref is None:
            metas.append(g[:4])
            big.extend((g[4], g[5]))
        else:  # its text line is in a task's file: the records (rarely any) travel, and where it is
            g[4] = list(ref)
            metas.append(g[:5])
            big.append(g[5])
    if any(_SEP in text for text in big):  # never in practice: JSON escapes control characters
        records["process_groups"] = groups
        return json.dumps(records, separators=(",", ":"), ensure_ascii=False)
    # The groups' texts after the JSON, not inside it: JSON would escape every quote in them, and the
    # driver would unescape them again (they are most of the payload). See decode_unit.
    records["process_groups"] = metas
    return json.dumps(records, separators=(",", ":"), ensure_ascii=False) + "".join(_SEP + t for t in big)
