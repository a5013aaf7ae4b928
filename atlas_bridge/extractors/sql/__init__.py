"""Column-level lineage from SQL scripts, on sqlglot's parser and a resolver of our own.

:func:`extract_sql_lineage` takes a whole script: it is split into statements (:mod:`.split`), each is
parsed alone and handed to the handler registered for its kind (:mod:`.registry`), and every statement's
lineage is merged. A statement that cannot be parsed or analysed, or that runs past its time budget,
becomes a :class:`~atlas_bridge.model.Problem` naming file, statement index, line and column; the other
statements still yield lineage. Nothing here raises on bad SQL.

Modules:

- :mod:`.split` - tokenizer-based statement splitting, file positions (:class:`.split.LineIndex`).
- :mod:`.schema` - table -> columns lookup (sqlglot's nested mapping), grown by the script's DDL.
- :mod:`.builder` - mutable datasets/relations, checked per statement and frozen into one validated
  :class:`~atlas_bridge.model.Lineage` per script.
- :mod:`.core` - :class:`.core.StatementContext`: the resolver and the helpers handlers use
  (``query_lineage``, ``query_ctes``, ``table``, ``table_columns``, ``write_into``, ``begin_process``,
  ``warn``, ``resultset``/``numbered_resultset``).
- :mod:`.registry` - the statement-handler registry (and script-level hooks: re-cutting statements,
  claiming a statement before it is parsed, post-handler hooks).
- :mod:`.statements` - core handlers: queries, CREATE VIEW / TABLE [AS SELECT], INSERT [OVERWRITE].
- :mod:`.sqlglot_fixes` - linear replacements for sqlglot regexes that bad input makes quadratic.
- :mod:`.resplit` - token rewrites before parsing (T-SQL ``+=``, Teradata attribute lists) and the cutting
  of a T-SQL statement that does not parse whole into the statements it holds (no semicolons between them).
- :mod:`.bigquery` - BigQuery's partition decorators, date shards and wildcard tables read as one table.
- :mod:`.partitions` - EXCHANGE PARTITION, UNLOAD, Vertica's partition-moving functions.

Adding a statement handler (e.g. MERGE, UPDATE, LOAD DATA, procedures):

1. Create a module in this package, e.g. ``merge.py``, with a function decorated
   ``@handler(exp.Merge)`` (from :mod:`.registry`) taking ``(stmt, ctx: StatementContext)``.
2. In it, call ``ctx.begin_process(type, name, effect_type=...)`` first when the statement writes, then
   build sources with ``ctx.query_lineage(query)`` (a :class:`.core.QueryResult` whose ``ds`` is the
   resultset and ``columns`` its outputs), targets with ``ctx.table(table_expr, kind)``, and edges with
   ``ctx.graph.add(...)`` or ``ctx.write_into(result, target, columns)``. Raise
   :class:`.core.UnsupportedSQL` for a construct you cannot analyse; call ``ctx.warn`` for a doubt.
3. Add the module name to ``_HANDLER_MODULES`` below so it is imported (registration is on import).
4. Add its tests as ``tests/test_sql_<topic>.py``; a seed case deferred in
   ``tests/data/sql/seed_judgements.json`` flips from xfail to pass by itself.
"""

from __future__ import annotations

import importlib
import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from sqlglot import exp
from sqlglot.dialects.athena import Athena
from sqlglot.dialects.bigquery import BigQuery
from sqlglot.dialects.dialect import Dialect
from sqlglot.dialects.presto import Presto
from sqlglot.dialects.trino import Trino
from sqlglot.dialects.tsql import TSQL
from sqlglot.errors import ErrorLevel, ParseError
from sqlglot.parser import Parser

from atlas_bridge.errors import ExtractionError
from atlas_bridge.extractors.sql import bigquery, resplit, sqlglot_fixes
from atlas_bridge.extractors.sql.builder import DatasetBuilder, GraphBuilder, ScriptGraph
from atlas_bridge.extractors.sql.core import (
    QueryResult,
    ScriptState,
    StatementContext,
    StatementTimeout,
    UnsupportedSQL,
)
from atlas_bridge.extractors.sql.registry import (
    find_handler,
    handler,
    regroup_chunks,
    run_post_hooks,
    run_text_handlers,
)
from atlas_bridge.extractors.sql.resplit import statement_pieces as resplit_pieces
from atlas_bridge.extractors.sql.schema import LearnedTable, SchemaIndex, TableKey
from atlas_bridge.extractors.sql.split import LineIndex, StatementChunk, split_statements
from atlas_bridge.extractors.sql.textual import failure, parse_failure
from atlas_bridge.model import (
    DatasetKind,
    ExtractionResult,
    Lineage,
    PausedGC,
    Problem,
    construct_complete,
)

__all__ = [
    "DEFAULT_TIME_BUDGET_S",
    "LearnedTable",
    "QueryResult",
    "SchemaIndex",
    "StatementContext",
    "UnsupportedSQL",
    "extract_and_learn",
    "extract_sql_lineage",
    "handler",
    "learn_schema",
    "resolve_dialect",
]

logger = logging.getLogger(__name__)

DEFAULT_TIME_BUDGET_S = 10.0
"""Per-statement time budget (parse + analysis) in seconds."""

_HANDLER_MODULES = (
    "atlas_bridge.extractors.sql.statements",
    "atlas_bridge.extractors.sql.dml",
    "atlas_bridge.extractors.sql.paths",
    "atlas_bridge.extractors.sql.ddl",
    "atlas_bridge.extractors.sql.noop",
    "atlas_bridge.extractors.sql.procedural",
    "atlas_bridge.extractors.sql.calls",
    "atlas_bridge.extractors.sql.partitions",
)
for _module in _HANDLER_MODULES:
    importlib.import_module(_module)
sqlglot_fixes.apply()

_ANSI = {"", "ansi", "sql", "standard"}
DIALECT_ALIASES = {
    "sqlserver": "tsql",
    "mssql": "tsql",
    "t-sql": "tsql",
    "azuresql": "tsql",
    "synapse": "tsql",
    "postgresql": "postgres",
    "pg": "postgres",
    "psql": "postgres",
    "sparksql": "spark",
    "spark-sql": "spark",
    "hiveql": "hive",
    "bq": "bigquery",
    "mariadb": "mysql",
    "plsql": "oracle",
    "db2": "",
    "netezza": "postgres",
    "greenplum": "postgres",
    "vertica": "postgres",
    "impala": "hive",
}
"""Names people use for a dialect sqlglot knows under another name."""


def dialect_names() -> list[str]:
    """Every name ``resolve_dialect`` takes: sqlglot's dialects, ``ansi`` and the aliases."""
    return sorted({*(n for n in Dialect.classes if n), "ansi", *DIALECT_ALIASES})


def resolve_dialect(dialect: str | None) -> Dialect:
    """sqlglot's dialect for a name (``None``/``ansi`` = sqlglot's base dialect; common aliases taken)."""
    name = (dialect or "").strip().lower()
    name = DIALECT_ALIASES.get(name, name)
    try:
        return Dialect.get_or_raise(None if name in _ANSI else name)
    except ValueError as e:
        msg = f"unknown SQL dialect {dialect!r}; known: {', '.join(dialect_names())}"
        raise ExtractionError(msg) from e


def extract_sql_lineage(
    sql: str,
    dialect: str | None = None,
    schema: Mapping[str, Any] | SchemaIndex | None = None,
    default_db: str | None = None,
    *,
    file: str | None = None,
    time_budget_s: float | None = DEFAULT_TIME_BUDGET_S,
) -> ExtractionResult:
    """Column-level lineage of a whole SQL script, with one Problem per statement that failed.

    ``schema`` is sqlglot's nested mapping (``{db: {table: {col: type}}}`` or ``{table: {col: type}}``);
    without it ``SELECT *`` stays ``*`` and columns that cannot be placed go to the orphan pseudo table.
    ``default_db`` qualifies tables written without a db. A :class:`SchemaIndex` (e.g. the schema a scan
    learned, built once per worker) is used as the base the script's own DDL layers on, never changed.
    Raises only for an unknown dialect name.

    >>> r = extract_sql_lineage("insert into t (a) select x from s where y > 0")
    >>> from atlas_bridge.graph import end_to_end, relation_lines
    >>> relation_lines(end_to_end(r.lineage))
    ['s.x -> fdd -> t.a', 's.y -> fdr -> t.PseudoRows']
    """
    return _extract(sql, dialect, schema, default_db, file=file, time_budget_s=time_budget_s)[0]


def extract_and_learn(
    sql: str,
    dialect: str | None = None,
    schema: Mapping[str, Any] | SchemaIndex | None = None,
    default_db: str | None = None,
    *,
    file: str | None = None,
    time_budget_s: float | None = DEFAULT_TIME_BUDGET_S,
) -> tuple[ExtractionResult, list[LearnedTable], list[TableKey]]:
    """:func:`extract_sql_lineage`, plus what the script teaches and what it needed from ``schema``.

    Returns the result, the tables the script's DDL defined (in order, with columns: what
    :func:`learn_schema` gives) and the tables it looked up that its own DDL did not define (found in
    ``schema`` or not at all). A scan extracts every unit once this way, learns the estate's schema from
    all units, and extracts again only the units whose look-ups the learned schema answers differently.

    >>> r, defined, looked = extract_and_learn("create table s.t (a int); insert into s.u select a from s.t")
    >>> defined, looked
    ([(None, 's', 't', [('a', 'INT')])], [(None, 's', 'u')])
    """
    return _extract(sql, dialect, schema, default_db, file=file, time_budget_s=time_budget_s, learn=True)


def _extract(
    sql: str,
    dialect: str | None,
    schema: Mapping[str, Any] | SchemaIndex | None,
    default_db: str | None,
    *,
    file: str | None,
    time_budget_s: float | None,
    learn: bool = False,
) -> tuple[ExtractionResult, list[LearnedTable], list[TableKey]]:
    """The result, and (``learn``) the tables the script defined and those it looked up."""
    d = resolve_dialect(dialect)
    if type(d) in (Trino, Presto) and "`" in sql:
        d = Athena()  # Athena's Hive DDL (backquoted names) written as Trino/Presto: Athena reads both
    with PausedGC() as paused:
        lineage, problems, defined, looked_up = _script(
            sql, d, schema, default_db, file, time_budget_s, paused, learn=learn
        )
    # Made once the collector runs again, so that its pass over the statement's garbage (sqlglot's trees
    # are cyclic) falls here, in the extraction. The Lineage is validated once in freeze(); constructing
    # ExtractionResult normally would run its validators a second time (pydantic re-runs after-validators
    # on model instances). Both fields given: construct_complete, without model_construct's field loop.
    result = construct_complete(ExtractionResult, {"lineage": lineage, "problems": problems})
    return result, defined, looked_up


def _script(
    sql: str,
    d: Dialect,
    schema: Mapping[str, Any] | SchemaIndex | None,
    default_db: str | None,
    file: str | None,
    time_budget_s: float | None,
    paused: PausedGC,
    *,
    learn: bool,
) -> tuple[Lineage, tuple[Problem, ...], list[LearnedTable], list[TableKey]]:
    """:func:`_extract` with the collector paused. The script's state (its schema index, spellings,
    column lists) dies when this returns, before the collector resumes: its first pass then walks the
    lineage, not the state too."""
    index = SchemaIndex(schema, default_db)
    if learn:
        index.lookups = {}
    state = ScriptState(
        schema=index,
        dialect=d,
        text=sql,
        lines=LineIndex(sql),
        file=file,
        default_db=default_db or None,
    )
    lineage = _lineage(state, d, time_budget_s, paused)
    if not learn:
        return lineage, tuple(state.problems), [], []
    return lineage, tuple(state.problems), index.defined(), list(index.lookups or ())


def _lineage(state: ScriptState, d: Dialect, time_budget_s: float | None, paused: PausedGC) -> Lineage:
    """Every statement analysed, merged and frozen. The builders, tokens and parser die when this returns,
    before the collector resumes: its first pass then walks the Lineage, not them too."""
    parser = d.parser(error_level=ErrorLevel.RAISE)
    script = ScriptGraph()
    done: list[tuple[StatementChunk, GraphBuilder]] = []
    unicode_ok = _SURROGATE.search(state.text) is None
    for chunk in _chunks(state, state.text, d):
        for g in _contained(state, parser, chunk, time_budget_s, unicode_ok=unicode_ok):
            script.absorb(g)
            done.append((chunk, g))
        paused.tidy()
    try:
        return script.freeze(lambda ds: _positions(state, ds))
    except Exception:  # a bug of ours: keep every statement that merges cleanly, report the others
        logger.debug("merging the statements failed", exc_info=True)
        return _salvage(state, done)


def learn_schema(
    sql: str,
    dialect: str | None = None,
    schema: Mapping[str, Any] | SchemaIndex | None = None,
    default_db: str | None = None,
    *,
    time_budget_s: float | None = DEFAULT_TIME_BUDGET_S,
) -> tuple[list[LearnedTable], bool]:
    """The tables, views, CTAS and external tables a script's CREATE statements define, with their columns.

    Only statements that start with CREATE are analysed (as :func:`extract_sql_lineage` would, so a view's
    or CTAS's columns come from its query, resolved against ``schema``); problems are left to the
    extraction itself. Returns the tables in order and whether some defined table's columns stayed
    unknown (``SELECT *`` of a table ``schema`` does not know yet: a later pass with more schema may tell).

    >>> learn_schema("create table s.t (a int); select 1; create view s.v as select * from s.t")
    ([(None, 's', 't', [('a', 'INT')]), (None, 's', 'v', [('a', 'INT')])], False)
    >>> learn_schema("create view s.w as select * from s.u")
    ([], True)
    """
    d = resolve_dialect(dialect)
    index = SchemaIndex(schema if isinstance(schema, SchemaIndex) else SchemaIndex(schema), default_db)
    state = ScriptState(
        schema=index, dialect=d, text=sql, lines=LineIndex(sql), file=None, default_db=default_db or None
    )
    parser = d.parser(error_level=ErrorLevel.RAISE)
    unicode_ok = _SURROGATE.search(sql) is None
    for chunk in _chunks(state, sql, d):
        if not chunk.tokens or chunk.tokens[0].text.upper() != "CREATE":
            continue
        _contained(state, parser, chunk, time_budget_s, unicode_ok=unicode_ok)
    return index.defined(), index.pending()


_SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone surrogate: possible in a Python ``str`` (``surrogateescape``, JSON ``\\ud800``), not Unicode."""


def _chunks(state: ScriptState, sql: str, d: Dialect) -> list[StatementChunk]:
    """The script's statements; a failure of the procedural re-grouping costs the grouping, not the script."""
    chunks = split_statements(sql, d)
    for chunk in chunks:
        tokens = resplit.prepare_tokens(chunk.tokens, d)
        if tokens is not chunk.tokens:
            chunk.tokens, chunk.kinds = tokens, None
    try:
        return regroup_chunks(chunks, state)
    except Exception as e:  # a bug of ours: analyse the statements one by one instead
        logger.debug("grouping statements into blocks failed", exc_info=True)
        msg, kind = failure(e)
        state.problems.append(
            Problem(message=f"statements not grouped into blocks: {msg}", kind=kind, file=state.file)
        )
        return chunks


def _contained(
    state: ScriptState, parser: Parser, chunk: StatementChunk, budget: float | None, *, unicode_ok: bool
) -> list[GraphBuilder]:
    """One statement's graphs; whatever goes wrong in it (our code or sqlglot's) becomes its Problem."""
    if not unicode_ok and (bad := _SURROGATE.search(state.text, chunk.start, chunk.end)) is not None:
        msg = f"cannot read: lone surrogate U+{ord(bad.group()):04X} (not Unicode text)"
        state.problems.append(_problem(state, chunk.index, bad.start(), msg, "parse"))
        return []
    counters, procedure, resolver = dict(state.counters), state.procedure, state.resolve_variable
    try:
        claimed = run_text_handlers(state, parser, chunk, budget)
        if claimed is not None:
            return claimed
        graphs = _statement(state, parser, chunk, budget)
    except Exception as e:  # RecursionError, sqlglot's own bugs, ours: this statement only
        logger.debug("statement %d failed", chunk.index, exc_info=True)
        state.counters, state.procedure, state.resolve_variable = counters, procedure, resolver
        state.problems.append(_problem(state, chunk.index, chunk.start, *failure(e)))
        return []
    return graphs


def _positions(state: ScriptState, ds: DatasetBuilder) -> dict[str, int] | None:
    """A table's or view's column positions (lower-cased name -> 0-based place), from the script's schema
    where it knows the table's columns in their own order (its DDL, its defining query, a given schema)."""
    if ds.kind not in (DatasetKind.TABLE, DatasetKind.VIEW):
        return None
    db = ds.db or state.default_db or None
    if not state.schema.in_order(ds.catalog, db, ds.name):
        return None
    cols = state.schema.columns(ds.catalog, db, ds.name, record=False)
    if not cols:
        return None
    positions: dict[str, int] = {}
    for i, (name, _type) in enumerate(cols):
        positions.setdefault(name.lower(), i)
    return positions


def _salvage(state: ScriptState, done: list[tuple[StatementChunk, GraphBuilder]]) -> Lineage:
    """Statement by statement, keep what freezes together; the others become internal-error problems."""
    kept: list[GraphBuilder] = []
    lineage = Lineage()
    for chunk, graph in done:
        trial = ScriptGraph()
        for g in [*kept, graph]:
            trial.absorb(g)
        try:
            lineage = trial.freeze(lambda ds: _positions(state, ds))
        except Exception as e:
            msg = f"internal error: statement lineage does not merge: {str(e).splitlines()[-1].strip()}"
            state.problems.append(_problem(state, chunk.index, chunk.start, msg, "internal"))
            continue
        kept.append(graph)
    return lineage


def _problem(state: ScriptState, index: int, offset: int, message: str, kind: str) -> Problem:
    line, col = state.lines.position(offset)
    return Problem(message=message, kind=kind, file=state.file, statement_index=index, line=line, column=col)


def _statement(
    state: ScriptState, parser: Parser, chunk: StatementChunk, budget: float | None, *, whole: bool = True
) -> list[GraphBuilder]:
    """The statement's graph (none when it failed: then a Problem says why). A T-SQL statement that does
    not parse whole may be several without semicolons between them: each is analysed alone."""
    if chunk.error is not None:
        state.problems.append(
            _problem(state, chunk.index, chunk.error_offset or chunk.start, chunk.error, "parse")
        )
        return []
    if not whole:
        graph = _one_statement(state, parser, chunk, budget)
        return [] if graph is None else [graph]
    try:
        graph = _one_statement(state, parser, chunk, budget, several_ok=isinstance(state.dialect, TSQL))
    except _SeveralStatements as several:
        return [g for piece in several.pieces for g in _statement(state, parser, piece, budget, whole=False)]
    return [] if graph is None else [graph]


class _SeveralStatements(Exception):
    """A statement that did not parse whole is several (T-SQL without semicolons): its pieces."""

    def __init__(self, pieces: list[StatementChunk]) -> None:
        super().__init__(f"{len(pieces)} statements")
        self.pieces = pieces


def _one_statement(
    state: ScriptState,
    parser: Parser,
    chunk: StatementChunk,
    budget: float | None,
    *,
    several_ok: bool = False,
) -> GraphBuilder | None:
    started = time.monotonic()
    deadline = None if budget is None else started + budget
    try:
        parsed = parser.parse(chunk.tokens, state.text)
    except ParseError as e:
        if several_ok and (pieces := resplit_pieces(chunk)):
            raise _SeveralStatements(pieces) from e
        offset = _error_offset(e, chunk)
        msg = e.errors[0]["description"] if e.errors and e.errors[0].get("description") else str(e)
        msg = _TOKEN_REPR.sub(lambda m: repr(m.group(1)), msg)
        msg = _CLASS_REPR.sub(lambda m: m.group(1), msg)
        # The token sqlglot stopped at, quoted, unless the message quotes it already.
        near = str(e.errors[0].get("highlight") or "").strip() if e.errors else ""
        if near and repr(near[:40]).lower() not in msg.lower():
            msg += f" near {near[:40]!r}"
        state.problems.append(_problem(state, chunk.index, offset, f"cannot parse: {msg}", "parse"))
        return None
    except Exception as e:  # sqlglot's own failures (AttributeError on `DATE_SUB(`...), deep nesting
        logger.debug("parsing statement %d failed", chunk.index, exc_info=True)
        state.problems.append(_problem(state, chunk.index, chunk.start, parse_failure(e), "parse"))
        return None
    stmts = [p for p in parsed if p is not None and not isinstance(p, exp.Semicolon)]
    if not stmts:
        return None
    if several_ok and isinstance(stmts[0], exp.Command) and (pieces := resplit_pieces(chunk)):
        raise _SeveralStatements(pieces)  # sqlglot's fallback swallowed the statements that follow
    if deadline is not None and time.monotonic() > deadline:
        state.problems.append(
            _problem(
                state, chunk.index, chunk.start, f"time budget of {budget}s used up by parsing", "timeout"
            )
        )
        return None
    stmt = stmts[0]
    if isinstance(state.dialect, BigQuery):
        bigquery.group_tables(stmt, state.text[chunk.start : chunk.end])
    ctx = StatementContext(state, index=chunk.index, start=chunk.start, end=chunk.end, deadline=deadline)
    ctx.tokens, ctx.kinds = chunk.tokens, chunk.kinds
    fn = find_handler(stmt)
    if fn is None:
        ctx.warn(f"{stmt.key.upper()} statement not analysed for lineage", kind="unsupported")
        state.problems.extend(ctx.problems)
        return None
    counters = dict(state.counters)
    try:
        fn(stmt, ctx)
        run_post_hooks(stmt, ctx)
        ctx.graph.finish(state.spelling)
    except StatementTimeout:
        state.counters = counters
        state.problems.append(
            _problem(
                state,
                chunk.index,
                chunk.start,
                f"time budget of {budget}s exceeded; statement skipped",
                "timeout",
            )
        )
        return None
    except UnsupportedSQL as e:
        state.counters = counters
        state.problems.append(_problem(state, chunk.index, chunk.start, str(e), "unsupported"))
        return None
    except Exception as e:  # a bug of ours must not cost the rest of the script
        logger.debug("statement %d failed", chunk.index, exc_info=True)
        state.counters = counters
        state.problems.append(_problem(state, chunk.index, chunk.start, *failure(e)))
        return None
    state.problems.extend(ctx.problems)
    return ctx.graph


_CLASS_REPR = re.compile(r"<class '(?:[\w.]+\.)?(\w+)'>")
"""``<class 'sqlglot.expressions.query.Where'>`` in sqlglot's messages, read as ``Where``."""
_TOKEN_REPR = re.compile(r"<Token token_type: [^,]*, text: (.*?), line: \d+.*?>")


def _error_offset(e: ParseError, chunk: StatementChunk) -> int:
    """File offset of the token sqlglot complained about (its errors carry the token's end column)."""
    if not e.errors:
        return chunk.start
    line, col = e.errors[0].get("line"), e.errors[0].get("col")
    for tok in chunk.tokens:
        if tok.line == line and tok.col == col:
            return tok.start
    for tok in chunk.tokens:
        if tok.line == line and tok.col >= (col or 0):
            return tok.start
    return chunk.start
