"""Stage 1b: the schema learned from the estate itself, before any lineage is extracted.

Real estates rarely come with a ``schema.json``; their own DDL tells most of it. Before extraction, every
unit's CREATE statements (tables, external tables, views, CTAS, LIKE / CLONE), the create processes of
SQLFlow exports and the CREATE records of query logs are read for the columns they define
(:func:`learn_unit`, pure, run on the executors). Only CREATE statements are parsed, so the pass costs a
fraction of the extraction. A view or CTAS that selects ``*`` from a table defined in another file (in
any order, cycles included) cannot tell its columns on the first pass: its unit keeps its CREATE text
(only that), and :func:`fixed_point` re-reads those texts with everything learned so far until nothing
changes (at most :data:`MAX_ROUNDS` rounds).

Precedence: a ``schema.json`` given by the user wins over anything learned; among learned definitions of
the same table, SQL DDL wins over SQLFlow exports, then the first unit in file-name order wins (the same
input gives the same schema whatever the partitioning).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from atlas_bridge.bridge.dialects import dialect_hint
from atlas_bridge.bridge.inputs import _SQL_TOKEN, decode_text, read_unit
from atlas_bridge.bridge.types import InputKind, ScanOptions, WorkUnit
from atlas_bridge.extractors.sql.schema import Columns, LearnedTable, SchemaIndex, TableKey
from atlas_bridge.model import DatasetKind, Lineage, Problem

MAX_ROUNDS = 8
"""Re-reads of the unresolved views / CTAS at most (a chain of ``SELECT *`` views across files in reverse
file order resolves one link per round)."""

_CREATE = re.compile(rb"create", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z_]+")


@dataclasses.dataclass(frozen=True)
class UnitSchema:
    """What one unit teaches: the tables it defines, in order, and what to re-read when unresolved."""

    file: str
    tables: tuple[LearnedTable, ...] = ()
    pending: str | None = None
    """The unit's CREATE statements, kept only while some table they define has no columns yet."""
    dialect: str | None = None
    rank: int = 0
    """0 = SQL DDL, 1 = SQLFlow export (SQL wins for the same table)."""
    reads: tuple[TableKey, ...] = ()
    """Tables the unit reads (``FROM`` / ``JOIN`` names, lower case), when ``options.tables_read``."""


def create_statements(text: str) -> str:
    """The statements of a script that hold the word CREATE outside quotes and comments, joined by ``;``.

    A cheap cut (no parse): the learning pass then tokenizes and parses only these.

    >>> create_statements("insert into t select 1; create table t (a int) ; select 'create'")
    'create table t (a int) ;'
    """
    out: list[str] = []
    start = 0
    has_create = False
    for m in _SQL_TOKEN.finditer(text):
        tok = m.group()
        if tok == ";":
            if has_create:
                out.append(text[start : m.end()].strip())
            start, has_create = m.end(), False
        elif not has_create and tok[:1] not in ("'", '"', "`", "-", "/") and "create" in tok.lower():
            has_create = any(w.lower() == "create" for w in _WORD.findall(tok))
    if has_create:
        out.append(text[start:].strip() + ";")
    return "\n".join(out)


def learn_unit(unit: WorkUnit, options: ScanOptions, base: SchemaIndex | None = None) -> UnitSchema:
    """The tables one unit defines (executor side); never raises (what it cannot read, it leaves out)."""

    name = unit.file.name
    try:
        if unit.file.kind == InputKind.SQLFLOW:
            return UnitSchema(name, tuple(_sqlflow_tables(read_unit(unit), name)), rank=1)
        reads: tuple[TableKey, ...] = ()
        if unit.file.kind == InputKind.QUERY_LOG:
            text, reads = _log_creates(unit, options)
            dialect = options.dialect
        elif unit.file.kind == InputKind.SQL:
            data = read_unit(unit)
            reads = tables_read(data.decode("utf-8", "replace"), options) if options.tables_read else ()
            if _CREATE.search(data) is None:
                return UnitSchema(name, reads=reads)
            text = decode_text(data, name, [])
            dialect = unit.dialect or dialect_hint(text) or options.dialect
            text = create_statements(text)
        else:
            return UnitSchema(name)
        if not text:
            return UnitSchema(name, reads=reads)
        tables, pending = _learn(text, dialect, base, options)
        return UnitSchema(name, tuple(tables), text if pending else None, dialect, reads=reads)
    except Exception:  # the extraction pass reports what is wrong with the file; here it teaches nothing
        return UnitSchema(name)


def _learn(
    text: str, dialect: str | None, base: SchemaIndex | None, options: ScanOptions
) -> tuple[list[LearnedTable], bool]:
    from atlas_bridge.extractors.sql import learn_schema

    return learn_schema(text, dialect, base, options.default_db)


def _log_creates(unit: WorkUnit, options: ScanOptions) -> tuple[str, tuple[TableKey, ...]]:
    from atlas_bridge.bridge.querylog import read_query_log

    problems: list[Problem] = []
    parts: list[str] = []
    reads: dict[TableKey, None] = {}
    for rec in read_query_log(unit, options, problems):
        if options.tables_read and len(reads) < MAX_READS:
            reads.update(dict.fromkeys(tables_read(rec.query, options)))
        if "create" in rec.query.lower() and create_statements(rec.query):
            parts.append(rec.query.strip().rstrip(";") + ";")
    return "\n".join(parts), tuple(reads)[:MAX_READS]


MAX_READS = 10_000
"""Distinct table names kept per unit for the Atlas lookup."""

_PART = r"(?:`[^`\n]+`|\"[^\"\n]+\"|\[[^\]\n]+\]|[A-Za-z_][\w$]*)"
_TABLE_REF = re.compile(rf"\b(?:from|join)\s+({_PART}(?:\s*\.\s*{_PART}){{0,2}})", re.IGNORECASE)


def tables_read(text: str, options: ScanOptions) -> tuple[TableKey, ...]:
    """Names after ``FROM`` / ``JOIN`` (a cheap scan, no parse; what is not a table finds nothing later).

    >>> tables_read("select * from s.t join `u` on 1=1", ScanOptions(default_db="d"))
    ((None, 's', 't'), (None, 'd', 'u'))
    """
    out: dict[TableKey, None] = {}
    for m in _TABLE_REF.finditer(text):
        parts = [p.strip().strip('`"[]').lower() for p in m.group(1).split(".")]
        if parts[-1] in _NOT_TABLES:
            continue
        name = parts[-1]
        db = parts[-2] if len(parts) > 1 else (options.default_db or "").lower() or None
        catalog = parts[-3] if len(parts) > 2 else None
        out[(catalog, db, name)] = None
        if len(out) >= MAX_READS:
            break
    return tuple(out)


_NOT_TABLES = frozenset({"select", "lateral", "unnest", "table", "values", "dual", "the", "a"})


_CREATE_PROCESS = re.compile(r"^create_(?:table|view|external|or_replace|materialized)")


def _sqlflow_tables(data: bytes, name: str) -> list[LearnedTable]:
    """Tables and views a SQLFlow export creates (the targets of its CREATE processes), with their columns;
    read in pieces (:class:`SqlflowDefines`), as the scan reads the export."""
    from atlas_bridge.sqlflow.read import iter_sqlflow_lineage

    defines = SqlflowDefines()
    for piece in iter_sqlflow_lineage(data, file=name):
        defines.add(piece.lineage)
    return defines.tables()


class SqlflowDefines:
    """The tables and views a SQLFlow export creates, gathered from the pieces it is read in (the scan
    learns them from the pieces it converts anyway: reading the export again, whole, for them took four
    times the memory of the reading in pieces, issue 29).

    Only created objects: the columns SQLFlow lists for a table it merely reads are those the lineage
    touched, and a partial column list would wrongly tell the resolver that a table lacks a column. The
    pieces of an export merge into its whole lineage (its datasets sorted by id), so the tables come in
    the order of their dataset ids, as from the whole.
    """

    def __init__(self) -> None:
        self._creates: set[str] = set()
        # dataset id -> (catalog, db, name, process ids, columns or None when they cannot be told)
        self._written: dict[str, tuple[str | None, str | None, str, tuple[str, ...], Columns | None]] = {}

    def add(self, lineage: Lineage) -> None:
        """Take what one piece tells: its create processes, and the tables and views a process writes."""
        for p in lineage.processes:
            if _CREATE_PROCESS.match(p.type):
                self._creates.add(p.id)
        for ds in lineage.datasets:
            if ds.kind not in (DatasetKind.TABLE, DatasetKind.VIEW) or not ds.process_ids:
                continue
            if ds.id in self._written:
                continue  # every piece holds the whole dataset
            cols: Columns = [(c.name, c.data_type) for c in ds.columns if not c.system and c.name != "*"]
            ok = bool(cols) and len(cols) == len({c.lower() for c, _ in cols})
            self._written[ds.id] = (ds.catalog, ds.db, ds.name, ds.process_ids, cols if ok else None)

    def tables(self) -> list[LearnedTable]:
        """The created tables with their columns, in dataset id order."""
        creates = self._creates
        out: list[LearnedTable] = []
        for ds_id in sorted(self._written):
            catalog, db, name, process_ids, cols = self._written[ds_id]
            if cols is not None and not creates.isdisjoint(process_ids):
                out.append((catalog, db, name, cols))
        return out


def _key(t: LearnedTable) -> tuple[str | None, str | None, str]:
    return (t[0].lower() if t[0] else None, t[1].lower() if t[1] else None, t[2].lower())


def fold(results: Sequence[UnitSchema]) -> list[LearnedTable]:
    """One definition per table: SQL DDL before SQLFlow, then the first unit in order (within a unit, the
    last definition: it ran last)."""
    chosen: dict[tuple[str | None, str | None, str], tuple[int, int, LearnedTable]] = {}
    for order, r in enumerate(results):
        for t in r.tables:
            k = _key(t)
            old = chosen.get(k)
            if old is None or (r.rank, order) < old[:2]:
                chosen[k] = (r.rank, order, t)
    return [t for _, _, t in sorted(chosen.values(), key=lambda v: (v[0], v[1]))]


def schema_index(
    learned: Iterable[LearnedTable],
    given: Mapping[str, Any] | None,
    default_db: str | None = None,
    unordered: Iterable[TableKey] = (),
) -> SchemaIndex:
    """The index extraction runs against: what was learned, then the given schema over it (it wins)."""
    index = SchemaIndex(None, default_db)
    index.add_all(learned, unordered=unordered)
    if given:
        index.load(given)
    return index


def fixed_point(
    results: list[UnitSchema], options: ScanOptions, *, max_rounds: int = MAX_ROUNDS
) -> tuple[list[LearnedTable], int]:
    """Re-read the units whose views / CTAS are still unresolved, with all that is known, until the learned
    schema stops changing; returns it and the rounds run (driver side; only CREATE texts are re-read)."""
    learned = fold(results)
    rounds = 0
    while rounds < max_rounds and any(r.pending for r in results):
        rounds += 1
        base = schema_index(learned, options.schema, options.default_db)
        changed = False
        for i, r in enumerate(results):
            if r.pending is None:
                continue
            tables, pending = _learn(r.pending, r.dialect, base, options)
            if tuple(tables) != r.tables or not pending:
                changed = changed or tuple(tables) != r.tables
                results[i] = dataclasses.replace(
                    r, tables=tuple(tables), pending=r.pending if pending else None
                )
        learned = fold(results)
        if not changed:
            break
    return learned, rounds


def learn_locally(units: Sequence[WorkUnit], options: ScanOptions) -> tuple[list[LearnedTable], int]:
    """The whole learning pass in this process (``atlas-bridge lineage``, small estates)."""
    base = SchemaIndex(options.schema, options.default_db) if options.schema else None
    return fixed_point([learn_unit(u, options, base) for u in units], options)
