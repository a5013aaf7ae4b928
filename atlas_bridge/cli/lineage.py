"""``atlas-bridge lineage FILE...``: lineage of SQL scripts (and SQLFlow exports) printed as text or JSON.

Problems go to stderr as ``file:line:col: statement N error: ...``; the exit code is 1 when any statement
failed (the lineage of the others is still printed).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click

from atlas_bridge.cli import check_dialect
from atlas_bridge.errors import AtlasBridgeError
from atlas_bridge.extractors.sql.schema import SchemaIndex
from atlas_bridge.model import ExtractionResult, Lineage, Problem, Severity, merge_lineage


def _read_sql(
    path: Path,
    dialect: str | None,
    schema: dict[str, Any] | SchemaIndex | None,
    default_db: str | None,
    *,
    collapse: bool = False,
) -> ExtractionResult:
    """A script's lineage; a big plain script piece by piece. ``collapse``: only the end-to-end view will be
    printed, so each piece is collapsed as it comes (its resultsets and their edges are not kept)."""
    from atlas_bridge.bridge.dialects import dialect_hint
    from atlas_bridge.bridge.inputs import count_statements, split_script, sql_codec
    from atlas_bridge.extractors.sql import extract_sql_lineage
    from atlas_bridge.graph import end_to_end

    data = path.read_bytes()
    # UTF-8 or (with its byte order mark, as SQL Server Management Studio saves) UTF-16; newlines as
    # Python's text mode reads them
    text = re.sub(r"\r\n?", "\n", data.decode(sql_codec(data), errors="replace"))
    # The script's own `-- dialect:` wins over --dialect, as in `scan` (an unknown one is an error).
    dialect = dialect_hint(text.lstrip("\ufeff")) or dialect
    pieces = split_script(text, _PIECE_CHARS) if len(text) > _PIECE_CHARS else []
    if len(pieces) <= 1:
        return extract_sql_lineage(text, dialect, schema, default_db, file=str(path))
    # A big plain script, piece by piece (as the scan cuts it): the parse trees of one piece at a time.
    parts: list[Lineage] = []
    problems: list[Problem] = []
    before = 0
    for start, end, first_line, prelude in pieces:
        piece = text[start:end]
        result = extract_sql_lineage(
            prelude + "\n" * (first_line - 1) + piece, dialect, schema, default_db, file=str(path)
        )
        parts.append(end_to_end(result.lineage) if collapse else result.lineage)
        shift = before - (1 if prelude else 0)
        problems.extend(
            p.model_copy(update={"statement_index": p.statement_index + shift})
            if p.statement_index is not None
            else p
            for p in result.problems
        )
        before += count_statements(piece)
    return ExtractionResult(lineage=merge_lineage(parts), problems=problems)


_PIECE_CHARS = 256 * 1024


def learned_schema(
    files: tuple[Path, ...], dialect: str | None, schema: dict[str, Any] | None, default_db: str | None
) -> tuple[SchemaIndex, int]:
    """The schema the files' own DDL defines (any order across files), with ``schema`` over it (it wins);
    and the number of tables learned."""
    from atlas_bridge.bridge.schema import learn_locally, schema_index
    from atlas_bridge.bridge.types import InputFile, ScanOptions, WorkUnit

    options = ScanOptions(dialect=dialect, schema=schema, default_db=default_db)
    units = []
    for path in files:
        try:
            kind = input_kind(path)
            if _skip_reason(path, kind) is not None:
                continue
        except OSError:
            continue  # said when the file itself is read
        units.append(WorkUnit(InputFile(str(path), str(path), kind, path.stat().st_size)))
    learned, _ = learn_locally(units, options)
    return schema_index(learned, schema, default_db), len(learned)


def _read_query_log(
    path: Path,
    dialect: str | None,
    schema: dict[str, Any] | SchemaIndex | None,
    default_db: str | None,
    query_field: str | None,
) -> ExtractionResult:
    """A query log read as ``scan`` reads it (JSON lines, CSV; the query column found by name)."""
    from atlas_bridge.bridge.extract import extract_unit
    from atlas_bridge.bridge.types import InputFile, InputKind, ScanOptions, WorkUnit

    plain = schema if isinstance(schema, dict) else None
    options = ScanOptions(dialect=dialect, schema=plain, default_db=default_db, query_field=query_field)
    unit = WorkUnit(InputFile(str(path), str(path), InputKind.QUERY_LOG, path.stat().st_size))
    result = extract_unit(unit, options, schema if isinstance(schema, SchemaIndex) else None)
    return ExtractionResult(lineage=result.lineage, problems=result.problems)


def input_kind(path: Path, query_field: str | None = None) -> str:
    """The kind ``scan`` gives a file; a file named on the command line with a suffix ``scan`` does not
    look for (``report.txt``, ``job.q``) is read as a SQL script, as it always was."""
    from atlas_bridge.bridge.inputs import LOG_SUFFIXES, SQL_SUFFIXES, SQLFLOW_SUFFIXES, classify_file
    from atlas_bridge.bridge.types import InputKind

    if path.suffix.lower() not in (*SQL_SUFFIXES, *LOG_SUFFIXES, *SQLFLOW_SUFFIXES):
        return InputKind.SQL
    return classify_file(path, query_field=query_field)


def _skip_reason(path: Path, kind: str) -> str | None:
    """Why ``scan`` would leave a file out (binary content, a schema mapping), or None to read it."""
    from atlas_bridge.bridge.inputs import looks_binary
    from atlas_bridge.bridge.types import InputKind

    if kind == InputKind.SCHEMA:
        return "not read, a schema mapping (give it with --schema)"
    if kind in (InputKind.SQL, InputKind.QUERY_LOG):
        with open(path, "rb") as fh:
            if looks_binary(fh.read(_BINARY_SNIFF), utf16=kind == InputKind.SQL):
                return "skipped, binary content (not text)"
    return None


_BINARY_SNIFF = 8192


def _read_sqlflow(path: Path) -> ExtractionResult:
    from atlas_bridge.sqlflow.read import extract_sqlflow_lineage

    result: ExtractionResult = extract_sqlflow_lineage(path.read_bytes(), file=str(path))
    return result


def _text(lineage: Lineage, level: str, chain: bool) -> str:
    from atlas_bridge.graph import end_to_end, table_level

    if level == "table":
        tl = table_level(lineage)
        names = {d.id: d.qualified_name for d in tl.datasets}
        procs = {p.id: p.type for p in tl.processes}
        lines = []
        for e in tl.edges:
            proc = f"process:{procs[e.process_id]}" if e.process_id in procs else "process:?"
            suffix = " (indirect)" if e.type.value == "fdr" else ""
            lines.append(
                f"{names.get(e.source, e.source)} -> {proc} -> {names.get(e.target, e.target)}{suffix}"
            )
        return "\n".join(sorted(lines))
    # several chains can collapse to the same two columns (with different spans): one line each
    return "\n".join(sorted(set(readable_lines(lineage if chain else end_to_end(lineage)))))


_KINDS = {"fdd": "direct", "fdr": "indirect"}
"""How the text output names SQLFlow's relation types: a value copied or computed from the source
(``fdd``), or a source that decides which rows are written (``fdr``: WHERE, JOIN, GROUP BY...)."""


def readable_lines(lineage: Lineage) -> list[str]:
    """``source -> direct|indirect -> target`` lines; a table's row set (SQLFlow's ``PseudoRows``
    column) reads ``table (rows)``, e.g. ``s.flag -> indirect -> t (rows)``: s.flag filters t's rows."""
    by_id = {d.id: d.qualified_name for d in lineage.datasets}

    def name(ref: Any) -> str:
        table = by_id.get(ref.dataset_id, ref.dataset_id)
        return f"{table} (rows)" if ref.column == "PseudoRows" else f"{table}.{ref.path}"

    return sorted(
        f"{name(r.source)} -> {_KINDS.get(r.type.value, r.type.value)} -> {name(r.target)}"
        for r in lineage.relations
    )


def _render(lineage: Lineage, fmt: str, level: str, chain: bool, title: str = "Lineage") -> str:
    if fmt == "html":
        from atlas_bridge.page import lineage_page

        return lineage_page(lineage, title=title)
    if fmt == "text":
        return _text(lineage, level, chain)
    if fmt == "json":
        if level == "table":
            from atlas_bridge.graph import table_level

            return table_level(lineage).model_dump_json(indent=2, exclude_defaults=True)
        if not chain:
            from atlas_bridge.graph import end_to_end

            return end_to_end(lineage).to_json().rstrip("\n")
        return lineage.to_json().rstrip("\n")
    if fmt == "sqlflow-xml":
        from atlas_bridge.sqlflow.write import to_sqlflow_xml

        return str(to_sqlflow_xml(lineage, level=level))
    from atlas_bridge.sqlflow.write import to_sqlflow_json

    return str(to_sqlflow_json(lineage))


@click.command("lineage")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--dialect",
    "-d",
    default=None,
    callback=check_dialect,
    help="SQL dialect (spark, hive, snowflake, bigquery, tsql/sqlserver, ...); default: ansi "
    "(sqlglot's generic SQL). A script's own '-- dialect: NAME' line wins.",
)
@click.option(
    "--schema",
    "schema_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="JSON {db: {table: {column: type}}} (or {table: {column: type}}) to resolve columns and expand *.",
)
@click.option("--default-db", default=None, help="Database of tables written without one.")
@click.option("--level", type=click.Choice(["column", "table"]), default="column", show_default=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "sqlflow-xml", "sqlflow-json", "html"]),
    default="text",
    show_default=True,
    help="html: one self-contained lineage page (tables and columns views) to open in a browser.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    help="Write to this file instead of standard output.",
)
@click.option(
    "--chain/--end-to-end",
    default=None,
    help="Every hop through resultsets, or only their ends (default: end to end for text, the whole "
    "canonical model for json).",
)
@click.option(
    "--learn-schema/--no-learn-schema",
    default=True,
    show_default=True,
    help="With several files: first learn the columns of the tables and views their CREATE statements "
    "define (any order across files), then extract with them; --schema wins for the tables it names.",
)
@click.option(
    "--query-field", default=None, help="Query-text field/column of query logs (default: detected)."
)
def lineage_command(
    files: tuple[Path, ...],
    dialect: str | None,
    schema_file: Path | None,
    default_db: str | None,
    level: str,
    fmt: str,
    chain: bool | None,
    output: Path | None,
    learn_schema: bool,
    query_field: str | None,
) -> None:
    """Print the lineage of SQL scripts (.sql .hql .ddl), query logs (.jsonl .csv) and SQLFlow exports
    (.xml .json), read as scan reads them.

    Text output, one edge per line: "source -> direct -> target" (the target's value is copied or
    computed from the source) or "source -> indirect -> target" (the source decides which rows are
    written: WHERE, JOIN, GROUP BY...); "table (rows)" stands for a table's rows as a whole. A script's
    own "-- dialect: NAME" line wins over --dialect; without either, ansi (sqlglot's generic SQL).
    """
    schema: dict[str, Any] | None = None
    if schema_file is not None:
        try:
            schema = json.loads(schema_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            msg = f"{schema_file}: {e}"
            raise click.BadParameter(msg, param_hint="--schema") from e
    index: dict[str, Any] | SchemaIndex | None = schema
    if learn_schema and len(files) > 1:
        index, _ = learned_schema(files, dialect, schema, default_db)
    parts: list[Lineage] = []
    problems: list[Problem] = []
    failed = False
    chained = fmt != "text" if chain is None else chain
    # Printed end to end only (text, or json without chains): a big script's pieces collapse as they come.
    collapse = fmt in ("text", "json") and level == "column" and not chained
    from atlas_bridge.bridge.types import InputKind

    for path in files:
        try:
            kind = input_kind(path, query_field)
            skip = _skip_reason(path, kind)
            if skip is not None:
                click.echo(f"{path}: warning: {skip}", err=True)
                continue
            if kind == InputKind.SQLFLOW:
                result = _read_sqlflow(path)
            elif kind == InputKind.QUERY_LOG:
                result = _read_query_log(path, dialect, index, default_db, query_field)
            else:
                result = _read_sql(path, dialect, index, default_db, collapse=collapse)
        except (AtlasBridgeError, OSError, ImportError) as e:
            click.echo(f"{path}: error: {str(e).removeprefix('<input>: ')}", err=True)
            failed = True
            continue
        parts.append(result.lineage)
        problems.extend(result.problems)
    for problem in problems:
        click.echo(str(problem), err=True)
        failed = failed or problem.severity is Severity.ERROR
    try:
        names = [p.name for p in files]
        title = "Lineage: " + ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        out = _render(merge_lineage(parts), fmt, level, chained, title)
    except ImportError as e:
        msg = f"--format {fmt} is not available: {e}"
        raise click.UsageError(msg) from e
    if output is not None:
        output.write_text(out + "\n" if out else "", encoding="utf-8")
    elif out:
        click.echo(out)
    if failed:
        raise SystemExit(1)


def register(group: click.Group) -> None:
    """Add this module's commands to the ``atlas-bridge`` group."""
    group.add_command(lineage_command)
