"""Files, directories and stages: Hive LOAD DATA, COPY INTO, Snowflake stages and external tables, Spark
``parquet.`/path``` table references.

A path (``DatasetKind.PATH``, id ``path:<uri>``, uri unquoted) or a Snowflake stage (``DatasetKind.STAGE``)
holds the data of a whole file set, so it has one column standing for all of it: ``*`` for a path, ``url``
for a stage (seed 000: ``path -> fdd -> exttable_part_stage (url) -> fdd -> exttable_part(...)``). A flow
between such an object and a table goes to every column the statement (or the schema) names, else to the
table's ``*`` (as SQLFlow's ``set location`` output does).
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.parser import Parser
from sqlglot.tokens import Token, TokenType  # type: ignore[attr-defined]

from atlas_bridge.extractors.sql import statements
from atlas_bridge.extractors.sql.builder import DatasetBuilder, GraphBuilder
from atlas_bridge.extractors.sql.core import ScriptState, StatementContext, UnsupportedSQL
from atlas_bridge.extractors.sql.registry import handler, post_hook, text_handler
from atlas_bridge.extractors.sql.split import StatementChunk
from atlas_bridge.extractors.sql.textual import (
    dotted_name,
    run_on_text,
    skip_create_prefix,
    split_name,
    word,
)
from atlas_bridge.model import DatasetKind, Effect, RelationType, dataset_id, unquote

FDD = RelationType.FDD
PATH_COLUMN = "*"
STAGE_COLUMN = "url"

_FILE_FORMATS = frozenset(
    {"parquet", "orc", "csv", "json", "avro", "text", "delta", "binaryfile", "iceberg", "hudi", "xml"}
)


# ---------------------------------------------------------------------------------------------------------
# Datasets and flows


def path_dataset(ctx: StatementContext, uri: str, span_node: exp.Expr | None = None) -> DatasetBuilder:
    """The path dataset of a uri (quotes stripped)."""
    uri = unquote(uri)
    ds = ctx.graph.dataset(
        DatasetBuilder(id=dataset_id(DatasetKind.PATH, uri), kind=DatasetKind.PATH, name=uri, uri=uri)
    )
    ds.column(PATH_COLUMN)
    return ds


def stage_dataset(
    ctx: StatementContext,
    name: str,
    db: str | None = None,
    catalog: str | None = None,
    uri: str | None = None,
) -> DatasetBuilder:
    """A Snowflake stage (named like a table: db defaults to the script's default db)."""
    name = unquote(name)
    db = unquote(db) if db else (ctx.state.default_db or None)
    catalog = unquote(catalog) if catalog else None
    ds = ctx.graph.dataset(
        DatasetBuilder(
            id=dataset_id(DatasetKind.STAGE, name, db, catalog),
            kind=DatasetKind.STAGE,
            name=name,
            db=db,
            catalog=catalog,
        )
    )
    if uri and ds.uri is None:
        ds.uri = unquote(uri)
    ds.column(STAGE_COLUMN)
    return ds


def whole_columns(ds: DatasetBuilder) -> list[str]:
    """The column that stands for all of a path's or stage's data."""
    return [ds.column(STAGE_COLUMN if ds.kind is DatasetKind.STAGE else PATH_COLUMN)]


def table_columns(ctx: StatementContext, table: exp.Table, ds: DatasetBuilder, extra: list[str]) -> list[str]:
    """Columns a whole-file flow writes: the schema's (or the statement's), else ``*``."""
    names = [c for c, _ in ctx.table_columns(table) or []]
    for e in extra:
        if e.lower() not in {n.lower() for n in names}:
            names.append(e)
    return [ds.column(n) for n in names] or [ds.column("*")]


def flow(
    ctx: StatementContext,
    src: DatasetBuilder,
    src_cols: list[str],
    dst: DatasetBuilder,
    dst_cols: list[str],
    effect_type: str,
) -> None:
    """Every source column feeds every target column (a file has no columns to pair them by)."""
    if ctx.process_id:
        dst.process_ids.add(ctx.process_id)
    for s in src_cols:
        for d in dst_cols:
            ctx.graph.add(
                FDD,
                (src.id, s),
                (dst.id, d),
                effect_type=effect_type,
                process_id=ctx.process_id,
                effect=Effect.EXACT_COPY,
            )


# ---------------------------------------------------------------------------------------------------------
# Hive LOAD DATA


@handler(exp.LoadData)
def handle_load_data(stmt: exp.Expr, ctx: StatementContext) -> None:
    """``LOAD DATA [LOCAL] INPATH 'uri' [OVERWRITE] INTO TABLE t [PARTITION (...)]``: path -> table."""
    assert isinstance(stmt, exp.LoadData)
    table = stmt.this
    inpath = stmt.args.get("inpath")
    if not isinstance(table, exp.Table) or not isinstance(inpath, exp.Expr):
        msg = "LOAD DATA without a table or a path not analysed"
        raise UnsupportedSQL(msg)
    ctx.begin_process("load_data", f"Load data into {statements._display(table)}", effect_type="load_data")
    src = path_dataset(ctx, inpath.name)
    dst = ctx.table(
        exp.Table(this=table.args.get("this"), db=table.args.get("db"), catalog=table.args.get("catalog"))
    )
    part = stmt.args.get("partition")
    part_cols = (
        [e.this.name for e in part.expressions if isinstance(e, exp.EQ) and isinstance(e.this, exp.Column)]
        if isinstance(part, exp.Partition)
        else []
    )
    flow(ctx, src, whole_columns(src), dst, table_columns(ctx, table, dst, part_cols), "load_data")


@text_handler
def load_unquoted_path(
    chunk: StatementChunk, state: ScriptState, parser: Parser, budget: float | None
) -> list[GraphBuilder] | None:
    """``LOAD DATA INPATH /tmp/x.txt`` (unquoted, as seed 000 prints it): quote the path and parse."""
    toks = chunk.tokens
    if len(toks) < 5 or word(toks[0]) != "LOAD":
        return None
    idx = next((i for i, t in enumerate(toks[:6]) if word(t) == "INPATH"), None)
    if idx is None or idx + 1 >= len(toks) or toks[idx + 1].token_type is TokenType.STRING:
        return None
    into = next((i for i in range(idx + 1, len(toks)) if word(toks[i]) in ("INTO", "OVERWRITE")), None)
    if into is None or into == idx + 1:
        return None
    text = state.text
    first, last = toks[idx + 1].start, toks[into - 1].end + 1
    if first < 1 or not text[first - 1].isspace() or last >= len(text) or not text[last].isspace():
        return None
    # Same length: the blanks around the path become its quotes, so every offset stays a file offset.
    quoted = text[: first - 1] + "'" + text[first:last] + "'" + text[last + 1 :]
    from atlas_bridge.extractors.sql import _statement

    padded = (
        "".join("\n" if c == "\n" else " " for c in quoted[: chunk.start]) + quoted[chunk.start : chunk.end]
    )
    try:
        tokens = [t for t in state.dialect.tokenize(padded) if t.token_type is not TokenType.SEMICOLON]
    except Exception:
        return None
    fixed = StatementChunk(index=chunk.index, start=chunk.start, end=chunk.end, tokens=tokens)
    return _statement(state, parser, fixed, budget)


# ---------------------------------------------------------------------------------------------------------
# COPY INTO / COPY ... FROM / TO


@handler(exp.Copy)
def handle_copy(stmt: exp.Expr, ctx: StatementContext) -> None:
    """Snowflake ``COPY INTO table FROM @stage|'uri'|(query)`` and ``COPY INTO @stage|'uri' FROM table``;
    Postgres ``COPY t FROM|TO 'file'``."""
    assert isinstance(stmt, exp.Copy)
    target = stmt.this
    files = list(stmt.args.get("files") or [])
    into = bool(stmt.args.get("kind"))
    if target is None or not files:
        msg = "COPY without a source or a target not analysed"
        raise UnsupportedSQL(msg)
    sources, targets = (files, [target]) if into else ([target], files)
    name = _endpoint_name(targets[0])
    ctx.begin_process("copy", f"Copy into {name}", effect_type="copy")
    for dst_node in targets:
        if isinstance(dst_node, (exp.Subquery, exp.Select)):
            msg = "COPY into a query not analysed"
            raise UnsupportedSQL(msg)
        dst, dst_cols, dst_table = _endpoint(ctx, dst_node)
        for src_node in sources:
            if isinstance(src_node, (exp.Subquery, exp.Select)):
                qr = ctx.query_lineage(src_node)
                if dst.kind is DatasetKind.TABLE:
                    ctx.write_into(qr, dst, None)
                    continue
                flow(ctx, qr.ds, list(qr.columns), dst, dst_cols, "copy")
                if ctx.graph.is_fed(qr.rows_key):
                    ctx.graph.add(
                        RelationType.FDR,
                        qr.rows_key,
                        (dst.id, dst_cols[0]),
                        effect_type="copy",
                        process_id=ctx.process_id,
                    )
                continue
            src, src_cols, src_table = _endpoint(ctx, src_node)
            if src_table is not None and dst.kind is not DatasetKind.TABLE:
                src_cols = table_columns(ctx, src_table, src, [])
            cols = dst_cols
            if dst_table is not None and src.kind is not DatasetKind.TABLE:
                cols = table_columns(ctx, dst_table, dst, [])
            flow(ctx, src, src_cols, dst, cols, "copy")


def _endpoint_name(node: exp.Expr) -> str:
    if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
        return statements._display(node)
    return unquote(node.name or node.sql())


def _endpoint(ctx: StatementContext, node: exp.Expr) -> tuple[DatasetBuilder, list[str], exp.Table | None]:
    """A COPY end: a table, a stage (``@name/path``) or a path literal."""
    inner = node.this if isinstance(node, exp.Table) and not isinstance(node.this, exp.Identifier) else node
    if isinstance(inner, exp.Literal) and inner.is_string:
        ds = path_dataset(ctx, inner.name)
        return ds, whole_columns(ds), None
    if isinstance(inner, (exp.Var, exp.Parameter)) or (
        isinstance(inner, exp.Literal) and inner.name.startswith("@")
    ):
        text = inner.sql() if isinstance(inner, exp.Parameter) else inner.name
        return _stage_ref(ctx, text)
    if isinstance(node, exp.Table):
        plain = exp.Table(
            this=node.args.get("this"), db=node.args.get("db"), catalog=node.args.get("catalog")
        )
        ds = ctx.table(plain)
        return ds, [ds.column("*")], node
    msg = f"COPY end {node.sql(dialect=ctx.dialect)!r} not analysed"
    raise UnsupportedSQL(msg)


def _stage_ref(ctx: StatementContext, text: str) -> tuple[DatasetBuilder, list[str], exp.Table | None]:
    """``@db.stage/sub/path`` -> the stage (its sub-path is where in the stage, not another object)."""
    ref = text.strip().lstrip("@").split("/", 1)[0]
    parts = [p for p in ref.split(".") if p]
    if not parts:
        msg = f"stage reference {text!r} not understood"
        raise UnsupportedSQL(msg)
    name, db, catalog = split_name(parts)
    ds = stage_dataset(ctx, name, db, catalog)
    return ds, whole_columns(ds), None


# ---------------------------------------------------------------------------------------------------------
# Snowflake CREATE STAGE and CREATE EXTERNAL TABLE ... LOCATION = @stage (sqlglot cannot parse either as
# users write them: credentials=(a='x' b='y'), computed columns ``value:c::type``...)


@text_handler
def snowflake_stage_or_external_table(
    chunk: StatementChunk, state: ScriptState, parser: Parser, budget: float | None
) -> list[GraphBuilder] | None:
    toks = chunk.tokens
    if not toks or word(toks[0]) != "CREATE":
        return None
    i = skip_create_prefix(toks)
    if i < len(toks) and word(toks[i]) == "STAGE":
        return run_on_text(state, chunk, budget, lambda ctx: _create_stage(ctx, toks, i + 1))
    if (
        state.dialect.__class__.__name__.lower() == "snowflake"
        and i + 1 < len(toks)
        and word(toks[i]) == "EXTERNAL"
        and word(toks[i + 1]) == "TABLE"
    ):
        return run_on_text(state, chunk, budget, lambda ctx: _create_external_table(ctx, toks, i + 2))
    return None


def _skip_if_not_exists(toks: list[Token], i: int) -> int:
    if i + 2 < len(toks) and [word(t) for t in toks[i : i + 3]] == ["IF", "NOT", "EXISTS"]:
        return i + 3
    return i


def _property_value(toks: list[Token], key: str, start: int) -> tuple[int, Token] | None:
    """The token after ``key =`` at parenthesis depth 0 (index, token)."""
    depth = 0
    for j in range(start, len(toks) - 2):
        tt = toks[j].token_type
        if tt is TokenType.L_PAREN:
            depth += 1
        elif tt is TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and word(toks[j]) == key and toks[j + 1].token_type is TokenType.EQ:
            return j + 2, toks[j + 2]
    return None


def _create_stage(ctx: StatementContext, toks: list[Token], i: int) -> None:
    i = _skip_if_not_exists(toks, i)
    parts, j, _ = dotted_name(toks, i)
    if not parts:
        msg = "CREATE STAGE without a name"
        raise UnsupportedSQL(msg)
    name, db, catalog = split_name(parts)
    url = _property_value(toks, "URL", j)
    uri = str(url[1].text) if url is not None and url[1].token_type is TokenType.STRING else None
    if uri is None:
        return  # an internal stage: files are put into it later, nothing flows yet
    ctx.begin_process(
        "create_stage", f"Create stage {'.'.join(unquote(p) for p in parts)}", effect_type="create_stage"
    )
    stage = stage_dataset(ctx, name, db, catalog, uri=uri)
    stage.spans.append(ctx.state.lines.span(toks[i].start, toks[j - 1].end + 1))
    src = path_dataset(ctx, uri)
    flow(ctx, src, whole_columns(src), stage, whole_columns(stage), "create_stage")


def _create_external_table(ctx: StatementContext, toks: list[Token], i: int) -> None:
    i = _skip_if_not_exists(toks, i)
    parts, j, _ = dotted_name(toks, i)
    if not parts:
        msg = "CREATE EXTERNAL TABLE without a name"
        raise UnsupportedSQL(msg)
    name, db, catalog = split_name(parts)
    columns: list[tuple[str, Token]] = []
    if j < len(toks) and toks[j].token_type is TokenType.L_PAREN:
        depth, expect_name = 0, True
        for k in range(j, len(toks)):
            tt = toks[k].token_type
            if tt is TokenType.L_PAREN:
                depth += 1
                if depth == 1:
                    continue
            elif tt is TokenType.R_PAREN:
                depth -= 1
                if depth == 0:
                    j = k + 1
                    break
            elif tt is TokenType.COMMA and depth == 1:
                expect_name = True
                continue
            if depth == 1 and expect_name:
                columns.append((unquote(str(toks[k].text)), toks[k]))
                expect_name = False
    loc = _property_value(toks, "LOCATION", j)
    table = exp.Table(
        this=exp.to_identifier(unquote(name)),
        db=exp.to_identifier(unquote(db)) if db else None,
        catalog=exp.to_identifier(unquote(catalog)) if catalog else None,
    )
    display = ".".join(unquote(p) for p in parts)
    ctx.begin_process("create_external_table", f"Create external table {display}", effect_type="create_table")
    dst = ctx.table(table)
    dst.spans.append(ctx.state.lines.span(toks[i].start, toks[j - 1].end + 1 if j > i else toks[i].end + 1))
    dst_cols = [dst.column(c, ctx.state.lines.span(t.start, t.end + 1)) for c, t in columns] or [
        dst.column("*")
    ]
    if columns:
        tdb = table.db or ctx.state.default_db or None
        ctx.state.schema.add(table.catalog or None, tdb, table.name, [(c, None) for c, _ in columns])
    if loc is None:
        return
    k, tok = loc
    if tok.token_type is TokenType.STRING:
        src = path_dataset(ctx, str(tok.text))
        flow(ctx, src, whole_columns(src), dst, dst_cols, "create_table")
        return
    if str(tok.text) == "@" or str(tok.text).startswith("@"):
        ref = "".join(str(t.text) for t in toks[k : _ref_end(toks, k)])
        stage, cols, _ = _stage_ref(ctx, ref)
        flow(ctx, stage, cols, dst, dst_cols, "create_table")


def _ref_end(toks: list[Token], k: int) -> int:
    """End of an ``@stage/sub/path`` reference: tokens that touch each other."""
    end = k + 1
    while end < len(toks) and toks[end].start == toks[end - 1].end + 1:
        end += 1
    return end


# ---------------------------------------------------------------------------------------------------------
# Spark ``parquet.`/data/x``` : a path read as a table


@post_hook
def path_tables(stmt: exp.Expr, ctx: StatementContext) -> None:
    """A table named ``<format>.`<uri>``` is the file set at uri: make it a path dataset."""
    graph = ctx.graph
    renames: dict[str, DatasetBuilder] = {}
    for ds in list(graph.datasets.values()):
        if (
            ds.kind is DatasetKind.TABLE
            and ds.db is not None
            and ds.db.lower() in _FILE_FORMATS
            and ds.catalog is None
            and ("/" in ds.name or ":" in ds.name)
        ):
            uri = ds.name
            new = DatasetBuilder(
                id=dataset_id(DatasetKind.PATH, uri),
                kind=DatasetKind.PATH,
                name=uri,
                uri=uri,
                columns=ds.columns,
                process_ids=ds.process_ids,
                spans=ds.spans,
            )
            renames[ds.id] = new
    if not renames:
        return
    for old_id, new in renames.items():
        del graph.datasets[old_id]
        graph.datasets[new.id] = new
    rels = list(graph.relations.values())
    graph.relations.clear()
    for rel in rels:
        if rel.source[0] in renames:
            rel = rel._replace(source=(renames[rel.source[0]].id, rel.source[1]))
        if rel.target[0] in renames:
            rel = rel._replace(target=(renames[rel.target[0]].id, rel.target[1]))
        key = (rel.type.value, rel.source, rel.target, rel.clause_type.value if rel.clause_type else "")
        graph.relations[key] = rel
