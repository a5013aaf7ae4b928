"""Statements that move a table's data without a query (issue 12, group 3): partition exchanges, unloads
and data-moving function calls.

- Hive ``ALTER TABLE t1 EXCHANGE PARTITION (dt='1') WITH TABLE t2`` moves the partition from ``t2`` into
  ``t1``; Oracle's and MySQL's ``EXCHANGE PARTITION p WITH TABLE t2`` swap the two (data goes both ways).
- Vertica's ``SELECT swap_partitions_between_tables('s.a', min, max, 's.b')`` swaps;
  ``move_partitions_to_table`` / ``copy_partitions_to_table('src', min, max, 'dst')`` and
  ``copy_table('src', 'dst')`` move ``src`` -> ``dst`` (Vertica's documented argument order: the source
  table first, the target last).
- Redshift ``UNLOAD ('select ...') TO 's3://...'`` and Athena ``UNLOAD (SELECT ...) TO 's3://...'`` write
  the query's result to a path, column by column.

A table-to-table move follows SQLFlow's rename and swap convention (seed 000): ``PseudoRows -> fdd ->
PseudoRows`` for each direction data moves, plus column to column (by name) where either table's columns
are known, as ``CREATE TABLE ... CLONE`` does: both tables have the same shape.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.parser import Parser
from sqlglot.tokens import Token, TokenType  # type: ignore[attr-defined]

from atlas_bridge.extractors.sql import statements
from atlas_bridge.extractors.sql.builder import DatasetBuilder, GraphBuilder
from atlas_bridge.extractors.sql.core import ScriptState, StatementContext, UnsupportedSQL
from atlas_bridge.extractors.sql.registry import post_hook, text_handler
from atlas_bridge.extractors.sql.split import StatementChunk, shift_tokens
from atlas_bridge.extractors.sql.textual import dotted_name, run_on_text, word
from atlas_bridge.model import DatasetKind, Effect, RelationType, dataset_id

FDD = RelationType.FDD

_ONE_WAY_EXCHANGE = frozenset({"hive", "spark", "spark2", "databricks"})
"""Dialects whose EXCHANGE PARTITION moves the WITH TABLE's partition into the altered table (Hive's
reading); elsewhere (Oracle, MySQL) the partition and the table swap their data."""

PARTITION_FUNCTIONS = {
    "swap_partitions_between_tables": ("swap", 0, 3),
    "move_partitions_to_table": ("move", 0, 3),
    "copy_partitions_to_table": ("copy", 0, 3),
    "copy_table": ("copy", 0, 1),
}
"""Vertica functions that move data: name -> (how, index of the source table's argument, of the target's)."""


def move_table_data(
    ctx: StatementContext, source: exp.Table, target: exp.Table, *, both_ways: bool, effect_type: str
) -> None:
    """``source`` -> ``target`` (and back when ``both_ways``): PseudoRows, and column to column by name
    where the columns of either table are known."""
    src = ctx.table(_plain(source))
    dst = ctx.table(_plain(target))
    known = ctx.table_columns(target) or ctx.table_columns(source) or []
    for a, b in [(src, dst), (dst, src)] if both_ways else [(src, dst)]:
        b.process_ids.add(ctx.process_id or "")
        ctx.graph.add(
            FDD, (a.id, a.rows()), (b.id, b.rows()), effect_type=effect_type, process_id=ctx.process_id
        )
        for name, _ in known:
            ctx.graph.add(
                FDD,
                (a.id, a.column(name)),
                (b.id, b.column(name)),
                effect_type=effect_type,
                process_id=ctx.process_id,
                effect=Effect.EXACT_COPY,
            )


def _plain(table: exp.Table) -> exp.Table:
    return exp.Table(this=table.args.get("this"), db=table.args.get("db"), catalog=table.args.get("catalog"))


def _table_at(state: ScriptState, toks: list[Token], i: int) -> tuple[exp.Table | None, int]:
    """The (dotted) table name starting at token ``i``, and the index after it."""
    if i >= len(toks):
        return None, i
    _, j, end = dotted_name(toks, i)
    if j == i:
        return None, i
    try:
        return exp.to_table(state.text[toks[i].start : end], dialect=state.dialect), j
    except ParseError:
        return None, i


# ---------------------------------------------------------------------------------------------------------
# ALTER TABLE ... EXCHANGE PARTITION ... WITH TABLE ...


@text_handler
def exchange_partition(
    chunk: StatementChunk, state: ScriptState, parser: Parser, budget: float | None
) -> list[GraphBuilder] | None:
    toks = chunk.tokens
    if len(toks) < 8 or word(toks[0]) != "ALTER" or word(toks[1]) != "TABLE":
        return None
    target, i = _table_at(state, toks, 2)
    if target is None or i >= len(toks) or word(toks[i]) != "EXCHANGE":
        return None
    with_at = next(
        (k for k in range(i + 1, len(toks) - 1) if word(toks[k]) == "WITH" and word(toks[k + 1]) == "TABLE"),
        None,
    )
    source, _ = _table_at(state, toks, with_at + 2) if with_at is not None else (None, 0)
    if source is None:
        return None
    both = type(state.dialect).__name__.lower() not in _ONE_WAY_EXCHANGE
    what = statements._display(target)
    other = statements._display(source)

    def analyse(ctx: StatementContext) -> None:
        ctx.begin_process(
            "alter_table_exchange_partition",
            f"Exchange partition of {what} with {other}",
            effect_type="exchange_partition",
        )
        move_table_data(ctx, source, target, both_ways=both, effect_type="exchange_partition")

    return run_on_text(state, chunk, budget, analyse)


# ---------------------------------------------------------------------------------------------------------
# UNLOAD (query) TO 'path'


@text_handler
def unload(
    chunk: StatementChunk, state: ScriptState, parser: Parser, budget: float | None
) -> list[GraphBuilder] | None:
    if not chunk.tokens or word(chunk.tokens[0]) != "UNLOAD":
        return None
    # sqlglot's tokenizer keeps what follows UNLOAD as one string: tokenize it again, in place.
    start = chunk.tokens[0].end + 1
    try:
        toks = [
            t
            for t in state.dialect.tokenize(state.text[start : chunk.end])
            if t.token_type is not TokenType.SEMICOLON
        ]
    except Exception:
        return None
    shift_tokens(toks, start, *state.lines.position(start))
    toks.insert(0, chunk.tokens[0])
    if len(toks) < 5 or toks[1].token_type is not TokenType.L_PAREN:
        return None
    depth, close = 0, None
    for k in range(1, len(toks)):
        kind = toks[k].token_type
        depth += (kind is TokenType.L_PAREN) - (kind is TokenType.R_PAREN)
        if depth == 0:
            close = k
            break
    if close is None or close + 2 >= len(toks) or word(toks[close + 1]) != "TO":
        return None
    path = toks[close + 2]
    if path.token_type is not TokenType.STRING:
        return None
    inner = toks[2:close]
    if len(inner) == 1 and inner[0].token_type is TokenType.STRING:
        inner = _string_tokens(state, inner[0])
    uri = str(path.text)

    def analyse(ctx: StatementContext) -> None:
        try:
            parsed = [p for p in parser.parse(inner, state.text) if p is not None] if inner else []
        except SqlglotError as e:
            msg = f"cannot parse the query of UNLOAD: {str(e).strip().splitlines()[0]}"
            raise UnsupportedSQL(msg) from e
        query = parsed[0] if parsed else None
        if not isinstance(query, exp.Query):
            msg = "UNLOAD of something other than a query not analysed"
            raise UnsupportedSQL(msg)
        ctx.begin_process("unload", f"Unload to {uri}", effect_type="unload")
        qr = ctx.query_lineage(query, None, ctx.query_ctes(query))
        target = ctx.graph.dataset(
            DatasetBuilder(id=dataset_id(DatasetKind.PATH, uri), kind=DatasetKind.PATH, name=uri, uri=uri)
        )
        ctx.write_into(qr, target, None)

    return run_on_text(state, chunk, budget, analyse)


def _string_tokens(state: ScriptState, tok: Token) -> list[Token]:
    """Tokens of the query a string literal holds (Redshift's ``UNLOAD ('select ...')``), placed in the file
    (exactly up to the first doubled quote inside it, a character or so off after each)."""
    try:
        toks = [t for t in state.dialect.tokenize(str(tok.text)) if t.token_type is not TokenType.SEMICOLON]
    except Exception:  # not SQL after all: the handler reports it
        return []
    shift_tokens(toks, tok.start + 1, *state.lines.position(tok.start + 1))
    return toks


# ---------------------------------------------------------------------------------------------------------
# Vertica: SELECT swap_partitions_between_tables('s.a', 'p1', 'p2', 's.b') and kin


@post_hook
def partition_functions(stmt: exp.Expr, ctx: StatementContext) -> None:
    """A query calling one of :data:`PARTITION_FUNCTIONS` with literal table names moves that data."""
    if not isinstance(stmt, exp.Select) or ctx.process_id is not None:
        return
    if ctx.tokens is not None:  # a call's name is one of its tokens, and so in the statement's text
        text = ctx.sql.lower()
        if not any(name in text for name in PARTITION_FUNCTIONS):
            return  # (a search of the text costs a fraction of a scan of the tokens)
        if not any(t.text.lower() in PARTITION_FUNCTIONS for t in ctx.tokens):
            return  # a scan of the tokens costs a fraction of a tree walk
    calls = [
        (PARTITION_FUNCTIONS[f.name.lower()], f)
        for f in stmt.find_all(exp.Anonymous)
        if f.name.lower() in PARTITION_FUNCTIONS
    ]
    for (how, si, ti), call in calls:
        args = call.expressions
        if max(si, ti) >= len(args) or not all(isinstance(args[k], exp.Literal) for k in (si, ti)):
            ctx.warn(f"{call.name} without literal table names not analysed", kind="unsupported")
            continue
        try:
            source = exp.to_table(args[si].name, dialect=ctx.dialect)
            target = exp.to_table(args[ti].name, dialect=ctx.dialect)
        except ParseError:
            ctx.warn(f"{call.name}: table names not read", kind="unsupported")
            continue
        effect = f"{how}_partitions" if "partitions" in call.name.lower() else "copy_table"
        if ctx.process_id is None:
            ctx.begin_process(
                effect,
                f"{call.name} {statements._display(source)} {'with' if how == 'swap' else 'to'} "
                f"{statements._display(target)}",
                effect_type=effect,
            )
        move_table_data(ctx, source, target, both_ways=how == "swap", effect_type=effect)
