"""DML beyond INSERT ... SELECT: UPDATE, MERGE, DELETE / TRUNCATE, SELECT INTO, multi-table INSERT.

UPDATE and MERGE write through a statement-local resultset, as SQLFlow models them: ``UPDATE-SET-n``
(``update-set``) holds one column per SET target, ``MERGE-UPDATE-n`` / ``MERGE-INSERT-n``
(``merge-update`` / ``merge-insert``) one per WHEN branch. Values flow ``fdd`` into the resultset and on
into the target; WHERE, JOIN ON, MERGE ON and WHEN conditions only decide which rows are written, so they
feed the resultset's ``PseudoRows`` (``fdr``), which feeds the target's. DELETE and TRUNCATE move no
data: they produce neither an edge nor a problem (DELETE's WHERE picks rows to drop, which is no lineage).
"""

from __future__ import annotations

import dataclasses
import re

from sqlglot import exp
from sqlglot.errors import SqlglotError

from atlas_bridge.extractors.sql import statements
from atlas_bridge.extractors.sql.builder import DatasetBuilder
from atlas_bridge.extractors.sql.core import (
    QueryResult,
    Ref,
    Scope,
    Source,
    StatementContext,
    UnsupportedSQL,
    value_effect,
)
from atlas_bridge.extractors.sql.registry import find_handler, handler
from atlas_bridge.extractors.sql.split import shift_tokens
from atlas_bridge.model import ClauseType, Effect, RelationType

FDD = RelationType.FDD
FDR = RelationType.FDR


@handler(exp.Delete, exp.TruncateTable)
def handle_delete(stmt: exp.Expr, ctx: StatementContext) -> None:
    """DELETE / TRUNCATE: rows are removed, no value moves anywhere (seed 000: no lineage)."""


# ---------------------------------------------------------------------------------------------------------
# Shared pieces


def _feed(
    ctx: StatementContext,
    refs: list[Ref],
    target: tuple[str, str],
    expr: exp.Expr,
    scope: Scope,
) -> None:
    """Edges from the column refs of a value expression into one resultset column."""
    exact = isinstance(expr, exp.Column)
    transform = None if exact else expr.sql(dialect=ctx.dialect, comments=False)
    for ref in refs:
        if ref.count_star:
            for src in scope.sources:
                src.ds.rows()
                ctx.graph.add(
                    FDR,
                    src.rows_key,
                    target,
                    clause_type=ClauseType.SELECT,
                    effect=Effect.AGGREGATION,
                    transform=transform,
                    function="COUNT",
                )
            continue
        if ref.window or ref.clause is not None:
            clause = ref.clause or ClauseType.WINDOW
            ctx.graph.add(FDR, ref.key, target, clause_type=clause, span=ref.span)
            continue
        if ref.rows:
            ctx.graph.add(FDR, ref.key, target, clause_type=ClauseType.SELECT)
            continue
        if ref.agg:
            effect = Effect.AGGREGATION
        elif ref.orphan:
            effect = Effect.AMBIGUOUS
        else:
            effect = value_effect(ref, expr)
        ctx.graph.add(
            FDD, ref.key, target, effect=effect, transform=transform, function=ref.func, span=ref.span
        )


def _restrict(
    ctx: StatementContext, node: exp.Expr | None, scope: Scope, rows: tuple[str, str], clause: ClauseType
) -> None:
    """The columns of a condition feed a resultset's PseudoRows (fdr)."""
    if node is None:
        return
    refs: list[Ref] = []
    ctx._collect(node, scope, refs, filter_context=True)
    for ref in refs:
        if not ref.count_star:
            ctx.graph.add(FDR, ref.key, rows, clause_type=clause, span=ref.span)


def _pass_rows(ctx: StatementContext, scope: Scope, rs: DatasetBuilder) -> None:
    """A derived source's row-count influence reaches the writing resultset (as in a SELECT)."""
    for src in scope.sources:
        if src.query is not None and ctx.graph.is_fed(src.rows_key):
            ctx.graph.add(FDD, src.rows_key, (rs.id, rs.rows()), clause_type=ClauseType.SELECT)


def _write(
    ctx: StatementContext,
    rs: DatasetBuilder,
    columns: list[str],
    target: DatasetBuilder,
    effect_type: str,
) -> None:
    """resultset column -> target column of the same name, and PseudoRows -> PseudoRows when fed."""
    target.process_ids.add(ctx.process_id or "")
    for col in columns:
        ctx.graph.add(
            FDD,
            (rs.id, col),
            (target.id, target.column(col)),
            effect_type=effect_type,
            process_id=ctx.process_id,
            effect=Effect.EXACT_COPY,
        )
    rows = (rs.id, rs.rows())
    if ctx.graph.is_fed(rows):
        ctx.graph.add(
            FDR, rows, (target.id, target.rows()), effect_type=effect_type, process_id=ctx.process_id
        )
    else:
        del rs.columns[rows[1].lower()]


def _set_items(
    ctx: StatementContext,
    items: list[exp.Expr],
    scope: Scope,
    rs: DatasetBuilder,
) -> list[str]:
    """``SET a = expr, (b, c) = (SELECT ...)``: each target column of the resultset and its sources."""
    written: list[str] = []
    for item in items:
        ctx.check()
        if not isinstance(item, exp.EQ):
            continue
        left, right = item.this, item.expression
        if isinstance(left, (exp.Tuple, exp.Paren)) and isinstance(right, exp.Subquery):
            names = [c.name for c in (left.expressions if isinstance(left, exp.Tuple) else [left.this])]
            qr = ctx.query_lineage(right, scope, scope.ctes)
            fed = ctx.graph.is_fed(qr.rows_key)
            for name, out in zip(names, qr.columns, strict=False):
                col = rs.column(name)
                written.append(col)
                ctx.graph.add(FDD, (qr.ds.id, out), (rs.id, col), effect=Effect.EXACT_COPY)
                if (
                    fed
                ):  # the subquery's row picks each value (as ``SET a = (SELECT ...)``), not the rows updated
                    ctx.graph.add(FDR, qr.rows_key, (rs.id, col), clause_type=ClauseType.SELECT)
            continue
        if not isinstance(left, exp.Column):
            continue  # SET @variable = ... (T-SQL) writes no table column
        col = rs.column(left.name, ctx.span_of(left))
        written.append(col)
        refs: list[Ref] = []
        ctx._collect(right, scope, refs)
        _feed(ctx, refs, (rs.id, col), right, scope)
    return written


def _base_table(node: exp.Expr | None, ctes: dict[str, exp.Expr], depth: int = 0) -> exp.Table | None:
    """The table a derived table or CTE reads first (UPDATE ``s`` where ``s`` is ``(SELECT .. FROM t) s``)."""
    if node is None or depth > 8:
        return None
    if isinstance(node, exp.Table):
        if isinstance(node.this, exp.Func):
            return None
        if not node.db and node.name.lower() in ctes:
            return _base_table(ctes[node.name.lower()], ctes, depth + 1)
        return node
    if isinstance(node, (exp.Subquery, exp.CTE, exp.Paren)):
        return _base_table(node.this, ctes, depth + 1)
    if isinstance(node, exp.SetOperation):
        return _base_table(node.this, ctes, depth + 1)
    if isinstance(node, exp.Select):
        from_ = node.args.get("from_")
        return _base_table(from_.this if isinstance(from_, exp.From) else None, ctes, depth + 1)
    return None


def _cte_asts(stmt: exp.Expr) -> dict[str, exp.Expr]:
    w = stmt.args.get("with_")
    if not isinstance(w, exp.With):
        return {}
    return {cte.alias.lower(): cte.this for cte in w.expressions}


def _plain_table(table: exp.Table) -> exp.Table:
    """The table reference without alias and joins (for naming the target dataset)."""
    return exp.Table(this=table.args.get("this"), db=table.args.get("db"), catalog=table.args.get("catalog"))


# ---------------------------------------------------------------------------------------------------------
# UPDATE


@handler(exp.Update)
def handle_update(stmt: exp.Expr, ctx: StatementContext) -> None:
    """UPDATE [FROM / JOIN]: SET values -> UPDATE-SET-n -> target; WHERE / JOIN ON -> PseudoRows."""
    assert isinstance(stmt, exp.Update)
    tbl = stmt.this
    if not isinstance(tbl, exp.Table):
        msg = f"UPDATE of {tbl.key.upper() if tbl else '?'} not analysed"
        raise UnsupportedSQL(msg)
    from_ = stmt.args.get("from_")
    from_items: list[exp.Expr] = []
    joins: list[exp.Join] = list(tbl.args.get("joins") or [])
    if isinstance(from_, exp.From):
        from_items.append(from_.this)
        joins.extend(from_.this.args.get("joins") or [])
        joins.extend(from_.args.get("joins") or [])
    joins.extend(stmt.args.get("joins") or [])
    items = from_items + [j.this for j in joins]
    cte_asts = _cte_asts(stmt)

    # The target: UPDATE alias FROM ... alias (T-SQL) names a FROM item; a CTE / derived table stands
    # for the table it reads (mssql-update-subquery-cte.md).
    target_table: exp.Table | None = None
    bound_item: exp.Expr | None = None
    if not tbl.db:
        low = tbl.name.lower()
        for item in items:
            if item.alias_or_name.lower() == low:
                bound_item = item
                break
    if bound_item is not None:
        target_table = _base_table(bound_item, cte_asts)
    elif not tbl.db and tbl.name.lower() in cte_asts:
        target_table = _base_table(cte_asts[tbl.name.lower()], cte_asts)
    else:
        target_table = tbl
    if target_table is None:
        msg = f"UPDATE target {tbl.name!r} is not a table"
        raise UnsupportedSQL(msg)
    name = statements._display(target_table)
    ctx.begin_process("update", f"Update {name}", effect_type="update")
    ctes = ctx.query_ctes(stmt)
    scope = Scope(None, ctes)
    if bound_item is None:
        ctx._add_source(scope, tbl)
    for item in items:
        ctx._add_source(scope, item)
    target = ctx.table(_plain_table(target_table))
    rs = ctx.numbered_resultset("UPDATE-SET", "update-set", tbl.alias or None)
    written = _set_items(ctx, list(stmt.expressions), scope, rs)
    rows = (rs.id, rs.rows())
    for join in joins:
        on = join.args.get("on")
        if on is not None:
            _restrict(ctx, on, scope, rows, ClauseType.JOIN)
            ctx._join_pairs(on, scope)
    where = stmt.args.get("where")
    if isinstance(where, exp.Where):
        _restrict(ctx, where.this, scope, rows, ClauseType.WHERE)
    _pass_rows(ctx, scope, rs)
    _write(ctx, rs, written, target, "update")


# ---------------------------------------------------------------------------------------------------------
# MERGE


@handler(exp.Merge)
def handle_merge(stmt: exp.Expr, ctx: StatementContext) -> None:
    """MERGE: one MERGE-UPDATE-n / MERGE-INSERT-n resultset per WHEN branch; ON and WHEN conditions fdr."""
    assert isinstance(stmt, exp.Merge)
    tbl = stmt.this
    using = stmt.args.get("using")
    if not isinstance(tbl, exp.Table) or using is None:
        msg = "MERGE without a target table or USING source not analysed"
        raise UnsupportedSQL(msg)
    name = statements._display(tbl)
    ctx.begin_process("merge", f"Merge into {name}", effect_type="merge")
    ctes = ctx.query_ctes(stmt)
    scope = Scope(None, ctes)
    ctx._add_source(scope, tbl)
    ctx._add_source(scope, using)
    # WHEN branches: an unqualified column is the source's (an inserted row has no target values yet, and
    # SET values come from the source in practice); ``t.col`` still reaches the target.
    values = Scope(None, ctes)
    values.sources = [dataclasses.replace(scope.sources[0], known={}), *scope.sources[1:]]
    target = ctx.table(_plain_table(tbl))
    on = stmt.args.get("on")
    whens = stmt.args.get("whens")
    branches = list(whens.expressions) if isinstance(whens, exp.Whens) else []
    known = ctx.table_columns(tbl)
    for when in branches:
        ctx.check()
        then = when.args.get("then")
        star = _star_action(then)
        if star is not None:  # Databricks ``UPDATE SET *`` / ``INSERT *``: every column by name
            rs = ctx.numbered_resultset(f"MERGE-{star}", f"merge-{star.lower()}", tbl.alias or None)
            written = _merge_star(ctx, scope.sources[1], rs, [c for c, _ in known] if known else None)
            effect_type = f"merge_{star.lower()}"
        elif isinstance(then, exp.Update):
            rs = ctx.numbered_resultset("MERGE-UPDATE", "merge-update", tbl.alias or None)
            written = _set_items(ctx, list(then.expressions), values, rs)
            effect_type = "merge_update"
        elif isinstance(then, exp.Insert):
            rs = ctx.numbered_resultset("MERGE-INSERT", "merge-insert", tbl.alias or None)
            written = _merge_insert(ctx, then, values, rs, [c for c, _ in known] if known else None)
            effect_type = "merge_insert"
        else:
            continue  # WHEN MATCHED THEN DELETE: rows go, nothing is written
        rows = (rs.id, rs.rows())
        _restrict(ctx, on, scope, rows, ClauseType.CONDITION)
        _restrict(ctx, when.args.get("condition"), values, rows, ClauseType.CONDITION)
        if on is not None:
            ctx._join_pairs(on, scope)
        _pass_rows(ctx, scope, rs)
        _write(ctx, rs, written, target, effect_type)


def _star_action(then: exp.Expr | None) -> str | None:
    """``UPDATE SET *`` -> "UPDATE", ``INSERT *`` -> "INSERT", any other action -> None."""
    if isinstance(then, exp.Update) and [type(e) for e in then.expressions] == [exp.Star]:
        return "UPDATE"
    if isinstance(then, exp.Insert) and isinstance(then.this, exp.Star):
        return "INSERT"
    return None


def _merge_star(
    ctx: StatementContext, source: Source, rs: DatasetBuilder, known: list[str] | None
) -> list[str]:
    """Every source column into the target column of its name (the source's columns, else the target's);
    ``*`` -> ``*`` when neither is known."""
    names = source.column_list() or known or []
    written: list[str] = []
    for name in names:
        key = source.column(name, None, force=True)
        if key is None:
            continue
        col = rs.column(name)
        written.append(col)
        ctx.graph.add(FDD, key, (rs.id, col), effect=Effect.EXACT_COPY)
    if not names:
        col = rs.column("*")
        written.append(col)
        ctx.graph.add(FDD, (source.ds.id, source.ds.column("*")), (rs.id, col), effect=Effect.EXACT_COPY)
    return written


def _merge_insert(
    ctx: StatementContext, ins: exp.Insert, scope: Scope, rs: DatasetBuilder, known: list[str] | None
) -> list[str]:
    cols_node, values = ins.this, ins.expression
    names = [c.name for c in cols_node.expressions] if isinstance(cols_node, exp.Tuple) else []
    if isinstance(cols_node, exp.Column):
        names = [cols_node.name]
    vals = list(values.expressions) if isinstance(values, exp.Tuple) else ([values] if values else [])
    if not names:
        names = known[: len(vals)] if known else []
    if not names:
        names = [v.output_name or f"column{i + 1}" for i, v in enumerate(vals)]
    written: list[str] = []
    for col_name, val in zip(names, vals, strict=False):
        col = rs.column(col_name)
        written.append(col)
        refs: list[Ref] = []
        ctx._collect(val, scope, refs)
        _feed(ctx, refs, (rs.id, col), val, scope)
    return written


# ---------------------------------------------------------------------------------------------------------
# MySQL REPLACE

_REPLACE = re.compile(r"\s*REPLACE(?=\s+(?:(?:LOW_PRIORITY|DELAYED)\s+)?INTO\b)", re.IGNORECASE)


def replace_command(ctx: StatementContext) -> bool:
    """MySQL ``REPLACE INTO t ...`` (sqlglot keeps it as text) inserts after deleting the rows with the same
    key: an INSERT's lineage. Parsed again as ``INSERT`` (same length, so positions stay); True when done."""
    match = _REPLACE.match(ctx.sql)
    if match is None:
        return False
    text = ctx.sql[: match.end() - len("REPLACE")] + "INSERT " + ctx.sql[match.end() :]
    try:
        tokens = ctx.dialect.tokenize(text)
        shift_tokens(tokens, ctx.start, *ctx.state.lines.position(ctx.start))
        parsed = ctx.dialect.parser().parse(tokens, ctx.state.text)
    except SqlglotError:
        return False
    stmt = parsed[0] if parsed else None
    fn = find_handler(stmt) if isinstance(stmt, exp.Insert) else None
    if stmt is None or fn is None:
        return False
    fn(stmt, ctx)
    return True


# ---------------------------------------------------------------------------------------------------------
# SELECT INTO


def _leftmost_select(node: exp.Expr) -> exp.Expr:
    """The first SELECT of a set operation: where T-SQL/Postgres put the ``INTO`` of the whole result."""
    for _ in range(10_000):  # bounded: one step per nested set operation
        if not isinstance(node, exp.SetOperation):
            break
        node = node.this
    return node


@handler(exp.Select, exp.SetOperation)
def handle_select(stmt: exp.Expr, ctx: StatementContext) -> None:
    """``SELECT ... INTO new_table`` (T-SQL, Postgres) creates and fills a table, also when the SELECT is the
    first branch of a UNION (the INTO then takes the whole result); other SELECTs: queries."""
    into = _leftmost_select(stmt).args.get("into")
    if not isinstance(into, exp.Into) or not isinstance(into.this, exp.Table):
        statements.handle_query(stmt, ctx)
        return
    table = into.this
    query = stmt.copy()
    _leftmost_select(query).set("into", None)
    ctx.begin_process("select_into", f"Select into {statements._display(table)}", effect_type="insert")
    qr = ctx.query_lineage(query)
    target = ctx.table(_plain_table(table))
    written = ctx.write_into(qr, target, None)
    db = table.db or ctx.state.default_db or None
    if "*" not in written:
        ctx.state.schema.add(table.catalog or None, db, table.name, [(c, None) for c in written])
    else:
        ctx.state.schema.unresolved(table.catalog or None, db, table.name)


# ---------------------------------------------------------------------------------------------------------
# Multi-table INSERT


@handler(exp.MultitableInserts)
def handle_multitable_insert(stmt: exp.Expr, ctx: StatementContext) -> None:
    """Oracle INSERT ALL / FIRST ... SELECT and Hive FROM src INSERT ... SELECT ... INSERT ... SELECT."""
    assert isinstance(stmt, exp.MultitableInserts)
    source = stmt.args.get("source")
    branches: list[tuple[exp.Insert, exp.Expr | None]] = []
    for e in stmt.expressions:
        if isinstance(e, exp.ConditionalInsert) and isinstance(e.this, exp.Insert):
            branches.append((e.this, e.expression))
        elif isinstance(e, exp.Insert):
            branches.append((e, None))
    targets = [statements._target_table(ins.this)[0] for ins, _ in branches]
    names = ", ".join(dict.fromkeys(statements._display(t) for t in targets if t is not None))
    overwrite = bool(branches) and all(ins.args.get("overwrite") for ins, _ in branches)
    ptype = "insert_overwrite" if overwrite else "insert"
    ctx.begin_process(
        ptype, f"{'Insert overwrite' if overwrite else 'Insert into'} {names}", effect_type="insert"
    )
    ctes = ctx.query_ctes(stmt)
    if isinstance(source, (exp.Query, exp.Subquery)):
        _insert_all(ctx, source, branches, ctes)
        return
    if not isinstance(source, exp.Expr):
        msg = "multi-table INSERT without a source not analysed"
        raise UnsupportedSQL(msg)
    for ins, _ in branches:  # Hive: each branch is a SELECT over the shared FROM
        query = ins.expression
        if not isinstance(query, exp.Select):
            continue
        query = query.copy()
        if query.args.get("from_") is None:
            query.set("from_", exp.From(this=source.copy()))
        qr = ctx.query_lineage(query, None, ctes)
        _into(ctx, ins, qr)


def _into(ctx: StatementContext, ins: exp.Insert, qr: QueryResult) -> None:
    table, col_list = statements._target_table(ins.this)
    if table is None:
        return
    target = ctx.table(_plain_table(table))
    columns: list[str] | None = col_list or None
    if columns is None:
        known = ctx.table_columns(table)
        if known is not None:
            static = statements._static_partition_columns(table)
            columns = [c for c, _ in known if c.lower() not in static]
    ctx.write_into(qr, target, columns)


def _insert_all(
    ctx: StatementContext,
    source: exp.Expr,
    branches: list[tuple[exp.Insert, exp.Expr | None]],
    ctes: dict[str, QueryResult],
) -> None:
    """INSERT ALL: the SELECT is one INSERT-SELECT resultset; each INTO picks its VALUES from it."""
    qr = ctx.query_lineage(source, None, ctes)
    qr.ds.sub_type = "insert-select"
    scope = Scope(None, ctes)
    scope.sources.append(_result_source(qr))
    for ins, cond in branches:
        ctx.check()
        table, col_list = statements._target_table(ins.this)
        if table is None:
            continue
        target = ctx.table(_plain_table(table))
        target.process_ids.add(ctx.process_id or "")
        values = ins.expression
        if not isinstance(values, exp.Values) or not values.expressions:
            _into(ctx, ins, qr)
        else:
            row = values.expressions[0]
            vals = list(row.expressions) if isinstance(row, exp.Tuple) else [row]
            names = col_list or [c for c, _ in (ctx.table_columns(table) or [])][: len(vals)]
            if not names:
                names = [v.output_name or f"column{i + 1}" for i, v in enumerate(vals)]
            for col_name, val in zip(names, vals, strict=False):
                refs: list[Ref] = []
                ctx._collect(val, scope, refs)
                tcol = (target.id, target.column(col_name))
                for ref in refs:
                    if ref.count_star or ref.rows:
                        continue
                    ctx.graph.add(
                        FDD,
                        ref.key,
                        tcol,
                        effect_type="insert",
                        process_id=ctx.process_id,
                        effect=Effect.EXACT_COPY if isinstance(val, exp.Column) else Effect.MODIFIED_COPY,
                    )
            if ctx.graph.is_fed(qr.rows_key):
                ctx.graph.add(
                    FDR,
                    qr.rows_key,
                    (target.id, target.rows()),
                    effect_type="insert",
                    process_id=ctx.process_id,
                )
        if cond is not None:
            refs = []
            ctx._collect(cond, scope, refs)
            for ref in refs:
                if not ref.count_star:
                    ctx.graph.add(
                        FDR,
                        ref.key,
                        (target.id, target.rows()),
                        clause_type=ClauseType.INSERT_VALUES,
                        effect_type="insert",
                        process_id=ctx.process_id,
                    )


def _result_source(qr: QueryResult) -> Source:
    return Source(alias=qr.ds.name.lower(), ds=qr.ds, names=(), query=qr)


# ---------------------------------------------------------------------------------------------------------
# INSERT ... VALUES


@handler(exp.Insert)
def handle_insert(stmt: exp.Expr, ctx: StatementContext) -> None:
    """INSERT ... VALUES writes its table even with constants only (issue 12); other INSERTs: the core one."""
    assert isinstance(stmt, exp.Insert)
    values = stmt.expression
    table, col_list = statements._target_table(stmt.this)
    if not isinstance(values, exp.Values) or table is None or isinstance(stmt.this, exp.Directory):
        statements.handle_insert(stmt, ctx)
        return
    statements.begin_insert_process(stmt, table, ctx)
    target = ctx.table(table)
    target.process_ids.add(ctx.process_id or "")
    names: list[str] = list(col_list)
    if not names:
        known = ctx.table_columns(table)
        static = statements._static_partition_columns(table)
        names = [c for c, _ in known or [] if c.lower() not in static]
    for name in names:
        target.column(name)
    _values_into(ctx, stmt, values, names, target)


def _values_into(
    ctx: StatementContext, stmt: exp.Insert, values: exp.Values, names: list[str], target: DatasetBuilder
) -> None:
    """Subqueries among the values feed the target column at their position through a VALUES resultset;
    where the target's columns are unknown they feed its PseudoRows (fdr, clause insertValues): the table
    is read into, the column is not known."""
    scope = Scope(None, ctx.query_ctes(stmt))
    rs: DatasetBuilder | None = None
    fed: dict[int, str] = {}
    for row in values.expressions:
        ctx.check()
        items = list(row.expressions) if isinstance(row, exp.Tuple) else [row]
        for i, val in enumerate(items):
            if val.find(exp.Query) is None:
                continue  # a constant (or a default): no lineage
            refs: list[Ref] = []
            ctx._collect(val, scope, refs)
            if not refs:
                continue
            if rs is None:
                rs = ctx.numbered_resultset("VALUES", "values")
            col = fed.get(i) or rs.column(names[i] if i < len(names) else f"column{i + 1}")
            fed[i] = col
            _feed(ctx, refs, (rs.id, col), val, scope)
    if rs is None:
        return
    for i, col in sorted(fed.items()):
        if i < len(names):
            ctx.graph.add(
                FDD,
                (rs.id, col),
                (target.id, target.column(names[i])),
                effect_type=ctx.effect_type,
                process_id=ctx.process_id,
                effect=Effect.EXACT_COPY,
            )
        else:
            ctx.graph.add(
                FDR,
                (rs.id, col),
                (target.id, target.rows()),
                effect_type=ctx.effect_type,
                process_id=ctx.process_id,
                clause_type=ClauseType.INSERT_VALUES,
            )
