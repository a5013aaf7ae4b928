"""DDL that carries lineage beyond CREATE VIEW / CTAS: foreign keys, external tables on paths, ALTER TABLE
SET LOCATION / ADD CONSTRAINT; and the CREATE / ALTER kinds that carry none.

These handlers wrap the core ones in :mod:`.statements` (which keep doing CREATE VIEW, CTAS, the schema a
plain CREATE TABLE teaches, RENAME and SWAP) and add what the seeds describe:

- FOREIGN KEY / REFERENCES: ``referenced.col -> fdd -> table.col``, effectType ``foreign_key`` (seed 000).
- ``CREATE EXTERNAL TABLE ... LOCATION 'uri'`` (Hive/Spark) and ``OPTIONS (uris = [...])`` (BigQuery):
  ``path -> fdd -> table`` under a ``create_external_table`` process.
- ``ALTER TABLE t SET LOCATION 'uri'``: ``path.* -> fdd -> t`` (SQLFlow's ``set location`` output).
"""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.errors import ParseError

from atlas_bridge.extractors.sql import statements
from atlas_bridge.extractors.sql.core import StatementContext
from atlas_bridge.extractors.sql.paths import flow, path_dataset, table_columns, whole_columns
from atlas_bridge.extractors.sql.registry import handler
from atlas_bridge.model import Effect, RelationType

FDD = RelationType.FDD

NO_LINEAGE_CREATE_KINDS = frozenset(
    {
        "DATABASE",
        "SCHEMA",
        "FUNCTION",
        "TABLE FUNCTION",
        "AGGREGATE",
        "MACRO",
        "INDEX",
        "SEQUENCE",
        "TYPE",
        "ROLE",
        "USER",
        "WAREHOUSE",
        "FILE FORMAT",
        "TAG",
        "CATALOG",
        "NAMESPACE",
        "TRIGGER",
        "PROCEDURE",
        "PACKAGE",
        "CONSTRAINT",
        "SYNONYM",
    }
)
"""CREATE kinds that move no data (a procedure's or function's body is analysed where it is called or by
the procedural-block handler, not by its CREATE)."""


def _plain(table: exp.Table) -> exp.Table:
    return exp.Table(this=table.args.get("this"), db=table.args.get("db"), catalog=table.args.get("catalog"))


def _ensure_process(ctx: StatementContext, ptype: str, name: str, effect_type: str) -> None:
    if ctx.process_id is None:
        ctx.begin_process(ptype, name, effect_type=effect_type)


@handler(exp.Create)
def handle_create(stmt: exp.Expr, ctx: StatementContext) -> None:
    """CREATE: the core handler, then foreign keys and external locations; no-lineage kinds are skipped."""
    assert isinstance(stmt, exp.Create)
    kind = str(stmt.args.get("kind") or "").upper()
    if kind in NO_LINEAGE_CREATE_KINDS:
        return
    statements.handle_create(stmt, ctx)
    if kind != "TABLE":
        return
    table, _ = statements._target_table(stmt.this)
    if table is None:
        return
    _external_locations(stmt, table, ctx)
    _foreign_keys(stmt.this, table, ctx)
    if stmt.expression is not None and not isinstance(stmt.expression, exp.Table):
        return  # CTAS: the core handler wrote it
    copied = _copied_table(stmt)
    if copied is not None:
        _copy_table(table, copied, ctx)
    else:
        _created_table(stmt, table, ctx)


def _created_table(stmt: exp.Create, table: exp.Table, ctx: StatementContext) -> None:
    """A plain CREATE TABLE writes its table (no source): a dataset with its declared columns and types."""
    _ensure_process(ctx, "create_table", f"Create table {statements._display(table)}", "create_table")
    dst = ctx.table(_plain(table))
    dst.process_ids.add(ctx.process_id or "")
    for name, data_type in statements._column_defs(stmt.this, stmt.args.get("properties"), ctx.dialect):
        col = dst.columns[dst.column(name).lower()]
        col.data_type = col.data_type or data_type


def _copied_table(stmt: exp.Create) -> tuple[exp.Table, str] | None:
    """``LIKE t1`` / ``(LIKE t1)`` / Teradata ``AS t1 WITH NO DATA`` (the shape) or ``CLONE t1`` / BigQuery
    ``COPY t1`` / Teradata ``AS t1 WITH DATA`` (shape and data)."""
    clone = stmt.args.get("clone")
    if isinstance(clone, exp.Clone) and isinstance(clone.this, exp.Table):
        return clone.this, "clone"
    props = stmt.args.get("properties")
    nodes = list(props.expressions) if isinstance(props, exp.Properties) else []
    if isinstance(stmt.expression, exp.Table):  # Teradata CREATE TABLE t2 AS t1 WITH [NO] DATA
        data = any(isinstance(n, exp.WithDataProperty) and not n.args.get("no") for n in nodes)
        return stmt.expression, "clone" if data else "like"
    if isinstance(stmt.this, exp.Schema):
        nodes += stmt.this.expressions
    for node in nodes:
        if isinstance(node, exp.LikeProperty) and isinstance(node.this, exp.Table):
            return node.this, "like"
    return None


def _copy_table(table: exp.Table, copied: tuple[exp.Table, str], ctx: StatementContext) -> None:
    """CREATE TABLE t2 LIKE / CLONE t1: t1 -> t2, column to column where t1's columns are known (the new
    table then has them, so later statements resolve against it), else PseudoRows -> PseudoRows."""
    source, how = copied
    verb = "Clone table" if how == "clone" else "Create table like"
    ctx.begin_process(
        f"create_table_{how}",
        f"{verb} {statements._display(source)} to {statements._display(table)}",
        effect_type="create_table",
    )
    src = ctx.table(_plain(source))
    dst = ctx.table(_plain(table))
    dst.process_ids.add(ctx.process_id or "")
    ctx.graph.add(
        FDD, (src.id, src.rows()), (dst.id, dst.rows()), effect_type="create_table", process_id=ctx.process_id
    )
    known = ctx.table_columns(source)
    if known is None:
        ctx.state.schema.unresolved(
            table.catalog or None, table.db or ctx.state.default_db or None, table.name
        )
        return
    for name, data_type in known:
        ctx.graph.add(
            FDD,
            (src.id, src.column(name)),
            (dst.id, dst.column(name)),
            effect_type="create_table",
            process_id=ctx.process_id,
            effect=Effect.EXACT_COPY,
        )
        if data_type:
            for ds in (src, dst):
                col = ds.columns[name.lower()]
                col.data_type = col.data_type or data_type
    db = table.db or ctx.state.default_db or None
    ctx.state.schema.add(table.catalog or None, db, table.name, list(known))


def _external_locations(stmt: exp.Create, table: exp.Table, ctx: StatementContext) -> None:
    props = stmt.args.get("properties")
    if not isinstance(props, exp.Properties) or stmt.expression is not None:
        return  # CTAS ... LOCATION writes the query's data there: the table is the lineage target
    uris: list[str] = []
    for prop in props.expressions:
        if isinstance(prop, exp.LocationProperty) and isinstance(prop.this, exp.Literal):
            uris.append(prop.this.name)
        elif isinstance(prop, exp.Property) and prop.name.lower() in ("uris", "location", "path"):
            value = prop.args.get("value")
            items = value.expressions if isinstance(value, (exp.Array, exp.Tuple)) else [value]
            uris.extend(i.name for i in items if isinstance(i, exp.Literal) and i.is_string)
    if not uris:
        return
    name = statements._display(table)
    _ensure_process(ctx, "create_external_table", f"Create external table {name}", "create_table")
    dst = ctx.table(_plain(table))
    defined = [c for c, _ in statements._column_defs(stmt.this, props)]
    cols = table_columns(ctx, table, dst, defined)
    for uri in uris:
        src = path_dataset(ctx, uri)
        flow(ctx, src, whole_columns(src), dst, cols, "create_table")


def _references(node: exp.Expr) -> tuple[exp.Table | None, list[str]]:
    ref = node.args.get("reference") if isinstance(node, exp.ForeignKey) else node
    if isinstance(ref, exp.Reference):
        target = ref.this
        if isinstance(target, exp.Schema) and isinstance(target.this, exp.Table):
            return target.this, [e.name for e in target.expressions]
        if isinstance(target, exp.Table):
            return target, []
    return None, []


def _foreign_keys(schema: exp.Expr | None, table: exp.Table, ctx: StatementContext) -> None:
    """FOREIGN KEY (a) REFERENCES t (b) and column-level ``a ... REFERENCES t (b)``."""
    if not isinstance(schema, exp.Schema):
        return
    pairs: list[tuple[list[str], exp.Table | None, list[str]]] = []
    for e in schema.expressions:
        if isinstance(e, exp.ColumnDef):
            for con in e.args.get("constraints") or []:
                kind = con.args.get("kind") if isinstance(con, exp.ColumnConstraint) else None
                if isinstance(kind, exp.ForeignKey):
                    local = [i.name for i in kind.expressions] or [e.name]
                    pairs.append((local, *_references(kind)))
                elif isinstance(kind, exp.Reference):
                    pairs.append(([e.name], *_references(kind)))
        elif isinstance(e, exp.ForeignKey):
            pairs.append(([i.name for i in e.expressions], *_references(e)))
        elif isinstance(e, exp.Constraint):
            for fk in e.expressions:
                if isinstance(fk, exp.ForeignKey):
                    pairs.append(([i.name for i in fk.expressions], *_references(fk)))
    _foreign_key_edges(pairs, table, ctx, "create_table", "Create table")


def _foreign_key_edges(
    pairs: list[tuple[list[str], exp.Table | None, list[str]]],
    table: exp.Table,
    ctx: StatementContext,
    ptype: str,
    verb: str,
) -> None:
    pairs = [p for p in pairs if p[1] is not None]
    if not pairs:
        return
    _ensure_process(ctx, ptype, f"{verb} {statements._display(table)}", "foreign_key")
    dst = ctx.table(_plain(table))
    dst.process_ids.add(ctx.process_id or "")
    for local, ref_table, ref_cols in pairs:
        assert ref_table is not None
        src = ctx.table(_plain(ref_table))
        ref_cols = ref_cols or local  # REFERENCES t without columns: its primary key, named alike
        for lc, rc in zip(local, ref_cols, strict=False):
            ctx.graph.add(
                FDD,
                (src.id, src.column(rc)),
                (dst.id, dst.column(lc)),
                effect_type="foreign_key",
                process_id=ctx.process_id,
                effect=Effect.EXACT_COPY,
            )


@handler(exp.Alter)
def handle_alter(stmt: exp.Expr, ctx: StatementContext) -> None:
    """ALTER TABLE: SET LOCATION (path -> table), ADD [CONSTRAINT] FOREIGN KEY; RENAME / SWAP in core;
    ALTER VIEW ... AS SELECT: the view's new definition."""
    assert isinstance(stmt, exp.Alter)
    table = stmt.this
    actions = list(stmt.args.get("actions") or [])
    if not isinstance(table, exp.Table):
        return
    query = next((a for a in actions if isinstance(a, exp.Query)), None)
    if str(stmt.args.get("kind") or "").upper() == "VIEW" and query is not None:
        # ALTER VIEW v AS SELECT ... (MySQL, Hive, Spark) redefines the view as CREATE OR REPLACE VIEW does
        statements.handle_create(exp.Create(this=table, kind="VIEW", expression=query, replace=True), ctx)
        return
    name = statements._display(table)
    handled = False
    for action in actions:
        if isinstance(action, exp.AlterSet) and isinstance(action.args.get("location"), exp.Literal):
            uri = action.args["location"].name
            _ensure_process(ctx, "alter_table_set_location", f"Set location of {name}", "set_location")
            src = path_dataset(ctx, uri)
            dst = ctx.table(_plain(table))
            flow(ctx, src, whole_columns(src), dst, table_columns(ctx, table, dst, []), "set_location")
            handled = True
        elif isinstance(action, exp.AddConstraint):
            pairs: list[tuple[list[str], exp.Table | None, list[str]]] = []
            for con in action.expressions:
                fks = con.expressions if isinstance(con, exp.Constraint) else [con]
                for fk in fks:
                    if isinstance(fk, exp.ForeignKey):
                        pairs.append(([i.name for i in fk.expressions], *_references(fk)))
            _foreign_key_edges(pairs, table, ctx, "alter_table_add_constraint", "Add foreign key to")
            handled = handled or bool(pairs)
    if not handled:
        statements.handle_alter(stmt, ctx)


_NAME = r"(?:[`\"\[]?[\w$-]+[`\"\]]?\.){0,2}[`\"\[]?[\w$-]+[`\"\]]?"
_CLONE_TEXT = re.compile(
    rf"\s*CREATE\s+(?:OR\s+REPLACE\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?({_NAME})\s+"
    rf"(?:(?:DEEP|SHALLOW)\s+)?(CLONE|COPY)\s+({_NAME})",
    re.IGNORECASE,
)


def clone_command(ctx: StatementContext) -> bool:
    """Clones sqlglot keeps as text (Databricks ``DEEP CLONE``, BigQuery ``CLONE t FOR SYSTEM_TIME AS OF``)
    still read the cloned table; True when the statement was one."""
    match = _CLONE_TEXT.match(ctx.sql)
    if match is None:
        return False
    try:
        target = exp.to_table(match.group(1), dialect=ctx.dialect)
        source = exp.to_table(match.group(3), dialect=ctx.dialect)
    except ParseError:
        return False
    _copy_table(target, (source, "clone"), ctx)
    return True
