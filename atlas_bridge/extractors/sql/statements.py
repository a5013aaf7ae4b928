"""Core statement handlers: queries, CREATE VIEW / TABLE [AS SELECT], INSERT [OVERWRITE] ... SELECT.

A top-level query (SELECT, set operation) moves no data into anything permanent, so it gets no process:
its resultsets are terminals scoped ``query:<hash>``. Statements that write get one process each
(``process:<first 16 hex of query_hash>``, ``#n`` for a repeated text). The select list's resultset feeds
the target directly (``RS-n.col -> fdd -> target.col``, effect EXACT_COPY, the statement's effectType and
process id; ``RS-n.PseudoRows -> fdr -> target.PseudoRows`` when something restricts the rows): SQLFlow's
extra ``INSERT-SELECT-n`` hop would repeat the RS column for column.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from atlas_bridge.extractors.sql.builder import DatasetBuilder
from atlas_bridge.extractors.sql.core import QueryResult, StatementContext
from atlas_bridge.extractors.sql.registry import handler
from atlas_bridge.model import DatasetKind, RelationType, dataset_id

FDD = RelationType.FDD

_NO_LINEAGE: tuple[type[exp.Expr], ...] = tuple(
    t
    for t in (
        getattr(exp, name, None)
        for name in (
            "Drop",
            "Use",
            "Set",
            "Describe",
            "Transaction",
            "Commit",
            "Rollback",
            "Cache",
            "Uncache",
            "Refresh",
            "Analyze",
            "Grant",
            "Revoke",
            "Show",
            "Pragma",
            "Comment",
        )
    )
    if isinstance(t, type)
)


@handler(exp.Select, exp.SetOperation, exp.Subquery, exp.Values)
def handle_query(stmt: exp.Expr, ctx: StatementContext) -> None:
    """A bare query: its resultsets are the lineage (no process)."""
    ctx.query_lineage(stmt)


@handler(*_NO_LINEAGE)
def handle_no_lineage(stmt: exp.Expr, ctx: StatementContext) -> None:
    """Statements that move no data: neither an edge nor a problem."""


@handler(exp.Command)
def handle_command(stmt: exp.Expr, ctx: StatementContext) -> None:
    """sqlglot could only keep the statement as text: say so, as a warning."""
    word = str(stmt.this).upper() if stmt.this else "statement"
    ctx.warn(f"{word} statement not analysed for lineage", kind="unsupported")


def _target_table(node: exp.Expr | None) -> tuple[exp.Table | None, list[str]]:
    """The table of a CREATE/INSERT target and its explicit column list (``t (a, b)``)."""
    if isinstance(node, exp.Schema):
        cols = [
            e.name for e in node.expressions if isinstance(e, (exp.Identifier, exp.ColumnDef, exp.Column))
        ]
        table = node.this
        return (table if isinstance(table, exp.Table) else None), cols
    if isinstance(node, exp.Table):
        return node, []
    return None, []


def _column_defs(
    node: exp.Expr | None, properties: exp.Expr | None = None, dialect: Dialect | None = None
) -> list[tuple[str, str | None]]:
    """Declared columns, then Hive/Spark ``PARTITIONED BY`` columns (they come last in the table)."""
    schemas = [node] if isinstance(node, exp.Schema) else []
    if isinstance(properties, exp.Properties):
        for prop in properties.expressions:
            if isinstance(prop, exp.PartitionedByProperty) and isinstance(prop.this, exp.Schema):
                schemas.append(prop.this)
    out: list[tuple[str, str | None]] = []
    for schema in schemas:
        for e in schema.expressions:
            if isinstance(e, exp.ColumnDef):
                kind = e.args.get("kind")
                out.append((e.name, kind.sql(dialect=dialect) if isinstance(kind, exp.Expr) else None))
    return out


def _display(table: exp.Table) -> str:
    return ".".join(p for p in (table.catalog, table.db, table.name) if p)


@handler(exp.Create)
def handle_create(stmt: exp.Expr, ctx: StatementContext) -> None:
    """CREATE VIEW / CREATE TABLE AS SELECT write lineage; a plain CREATE TABLE only teaches the schema."""
    assert isinstance(stmt, exp.Create)
    kind = str(stmt.args.get("kind") or "").upper()
    table, col_list = _target_table(stmt.this)
    query = stmt.expression
    if table is None:
        ctx.warn(f"CREATE {kind} without a table name not analysed", kind="unsupported")
        return
    state = ctx.state
    db = table.db or state.default_db or None
    if query is None or not isinstance(query, (exp.Query, exp.Subquery, exp.Values)):
        defs = _column_defs(stmt.this, stmt.args.get("properties"), ctx.dialect)
        if kind == "TABLE" and defs:
            state.schema.add(table.catalog or None, db, table.name, defs)
        return
    is_view = kind == "VIEW"
    ptype = "create_view" if is_view else "create_table_as_select"
    verb = "Create view" if is_view else "Create table"
    ctx.begin_process(
        ptype, f"{verb} {_display(table)}", effect_type="create_view" if is_view else "create_table"
    )
    qr = ctx.query_lineage(query)
    target = ctx.table(table, DatasetKind.VIEW if is_view else DatasetKind.TABLE)
    written = ctx.write_into(qr, target, col_list or None)
    if "*" not in written:
        defs = _column_defs(stmt.this, None, ctx.dialect)
        types = {c.lower(): t for c, t in defs}
        for c in written:  # else the type of the column it copies (known from a schema or DDL)
            types[c.lower()] = types.get(c.lower()) or target.columns[c.lower()].data_type
        columns = [(c, types.get(c.lower())) for c in written]
        state.schema.add(table.catalog or None, db, table.name, columns, closed=True)
    else:
        state.schema.unresolved(table.catalog or None, db, table.name)


def begin_insert_process(stmt: exp.Insert, table: exp.Table, ctx: StatementContext) -> None:
    """The process of any INSERT form (SELECT or VALUES), so both are named alike."""
    overwrite = bool(stmt.args.get("overwrite"))
    ptype = "insert_overwrite" if overwrite else "insert"
    verb = "Insert overwrite" if overwrite else "Insert into"
    ctx.begin_process(ptype, f"{verb} {_display(table)}", effect_type="insert")


@handler(exp.Insert)
def handle_insert(stmt: exp.Expr, ctx: StatementContext) -> None:
    """INSERT [OVERWRITE] ... SELECT: by the column list, else by the schema's order, else by name."""
    assert isinstance(stmt, exp.Insert)
    query = stmt.expression
    table, col_list = _target_table(stmt.this)
    if not isinstance(query, (exp.Query, exp.Subquery)):
        return  # INSERT ... VALUES: constants only, no column lineage
    if isinstance(stmt.this, exp.Directory):
        _insert_directory(stmt, stmt.this, query, ctx)
        return
    if table is None:
        ctx.warn(
            f"INSERT into {stmt.this.key.upper() if stmt.this else '?'} not analysed yet", kind="unsupported"
        )
        return
    begin_insert_process(stmt, table, ctx)
    ctes = ctx.query_ctes(stmt)
    qr: QueryResult = ctx.query_lineage(query, None, ctes)
    target = ctx.table(table, DatasetKind.TABLE)
    by_name = bool(stmt.args.get("by_name"))
    columns: list[str] | None = col_list or None
    if columns is None and not by_name:
        known = ctx.table_columns(table)
        if known is not None and not ctx.table_in_order(table):
            known = None  # names known, order not (read from Atlas): write by name
        if known is not None:
            static = _static_partition_columns(table)
            columns = [c for c, _ in known if c.lower() not in static]
    ctx.write_into(qr, target, columns, by_name=by_name)


def _static_partition_columns(table: exp.Table) -> set[str]:
    """Hive ``PARTITION (dt='x')`` columns given a value: not filled from the SELECT list."""
    part = table.args.get("partition")
    out: set[str] = set()
    if isinstance(part, exp.Partition):
        for e in part.expressions:
            if isinstance(e, exp.EQ):
                out.add(e.this.name.lower())
    return out


@handler(exp.Alter)
def handle_alter(stmt: exp.Expr, ctx: StatementContext) -> None:
    """ALTER TABLE RENAME / SWAP: table-to-table flow through PseudoRows (seed 000); other ALTERs: none."""
    assert isinstance(stmt, exp.Alter)
    table = stmt.this
    if not isinstance(table, exp.Table):
        return
    for action in stmt.args.get("actions") or []:
        other = action.this if isinstance(action, (exp.AlterRename, exp.SwapTable)) else None
        if not isinstance(other, exp.Table):
            continue
        if isinstance(action, exp.AlterRename) and not other.db and table.db:
            other = other.copy()
            other.set("db", exp.to_identifier(table.db))
        swap = isinstance(action, exp.SwapTable)
        ptype, effect = ("alter_table_swap", "swap_table") if swap else ("alter_table_rename", "rename_table")
        verb = "Swap table" if swap else "Rename table"
        ctx.begin_process(
            ptype,
            f"{verb} {_display(table)} {'with' if swap else 'to'} {_display(other)}",
            effect_type=effect,
        )
        src = ctx.table(table)
        dst = ctx.table(other)
        pairs = [(src, dst), (dst, src)] if swap else [(src, dst)]
        for a, b in pairs:
            b.process_ids.add(ctx.process_id or "")
            ctx.graph.add(
                FDD, (a.id, a.rows()), (b.id, b.rows()), effect_type=effect, process_id=ctx.process_id
            )
        return


def _insert_directory(
    stmt: exp.Insert, directory: exp.Directory, query: exp.Expr, ctx: StatementContext
) -> None:
    """Hive ``INSERT OVERWRITE [LOCAL] DIRECTORY 'uri' SELECT ...``: the path is the target."""
    uri = directory.this.name if isinstance(directory.this, exp.Expr) else str(directory.this)
    ctx.begin_process("insert_overwrite", f"Insert overwrite directory {uri}", effect_type="insert")
    qr = ctx.query_lineage(query, None, ctx.query_ctes(stmt))
    target = ctx.graph.dataset(
        DatasetBuilder(id=dataset_id(DatasetKind.PATH, uri), kind=DatasetKind.PATH, name=uri, uri=uri)
    )
    ctx.write_into(qr, target, None)
