"""``atlas-bridge scan``: the batch bridge (find SQL, SQLFlow exports and query logs; lineage into Atlas)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from atlas_bridge.atlas.limits import DEFAULT_MAX_ENTITIES
from atlas_bridge.cli import check_dialect
from atlas_bridge.errors import (
    AtlasAuthError,
    AtlasBridgeError,
    AtlasNotFoundError,
    AtlasUnavailableError,
    ConfigError,
)

logger = logging.getLogger(__name__)

_PHASES = {"extract": "extract (statements)", "merge": "merge (partitions)", "deliver": "deliver (batches)"}


def register(group: click.Group) -> None:
    """Add this module's commands to the ``atlas-bridge`` group."""
    group.add_command(scan_command)


@click.command("scan")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--dialect",
    default=None,
    callback=check_dialect,
    help="SQL dialect of scripts and query logs (hive, spark, tsql/sqlserver, ...); default: ansi "
    "(sqlglot's generic SQL). A script's own '-- dialect: NAME' line wins.",
)
@click.option(
    "--schema",
    "schema_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="sqlglot schema mapping as JSON ({db: {table: {col: type}}}); default: a schema.json in a scanned "
    "directory.",
)
@click.option("--default-db", default=None, help="Database of unqualified table names.")
@click.option(
    "--learn-schema/--no-learn-schema",
    default=True,
    show_default=True,
    help="First learn the columns of the tables and views the inputs' own CREATE statements (and SQLFlow "
    "exports) define, in any order across files; --schema wins for the tables it names.",
)
@click.option(
    "--schema-from-atlas",
    is_flag=True,
    help="Read the columns of the tables the inputs read but do not define from the configured Atlas "
    "(our columns and the Hive hook's hive_column), in bulk lookups; a failed lookup is a warning.",
)
@click.option(
    "--include", multiple=True, metavar="GLOB", help="Only files matching (path or name); repeatable."
)
@click.option("--exclude", multiple=True, metavar="GLOB", help="Leave out files matching; repeatable.")
@click.option(
    "--to",
    "to",
    default=None,
    metavar="atlas|URL|kafka|openlineage[:URL|:DIR]|DIR",
    help="'atlas' sends to the configured Atlas, an http(s):// URL to the Atlas at that address; 'kafka' "
    "publishes hook messages to Atlas's hook topic (atlas.kafka.bootstrap.servers); 'openlineage:URL' "
    "POSTs OpenLineage run events to an OpenLineage endpoint, 'openlineage:DIR' writes them as files "
    "('openlineage' alone: the openlineage setting); DIR writes the request bodies there (never contacts "
    "Atlas). Default: Atlas when one is configured, else the configured output_dir.",
)
@click.option(
    "--atlas",
    "atlas_url",
    metavar="URL",
    default=None,
    help="Atlas base URL(s), comma-separated for HA (default: atlas.rest.address); implies --to atlas.",
)
@click.option(
    "--user",
    default=None,
    help="Atlas user for basic auth (password from ATLAS_BRIDGE_PASSWORD or the properties file).",
)
@click.option(
    "--out",
    "out_dir",
    default=None,
    type=click.Path(path_type=Path),
    help="Where summary.json and resume state go (default: the --to DIR, else output_dir).",
)
@click.option("--master", default=None, help="Spark master URL (default local[*]).")
@click.option(
    "--namespace", default=None, help="Atlas metadata namespace (default from config, else primary)."
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="An atlas-application.properties (default: $ATLAS_CONF's).",
)
@click.option(
    "--fail-on",
    type=click.Choice(["error", "warning", "never"]),
    default="error",
    show_default=True,
    help="Exit 1 when the run met errors (or warnings too); 'never' always exits 0 after a finished run.",
)
@click.option(
    "--query-field", default=None, help="Query-text field/column of query logs (default: detected)."
)
@click.option(
    "--batch-size",
    default=DEFAULT_MAX_ENTITIES,
    show_default=True,
    type=click.IntRange(min=1),
    help="Most entities per Atlas request.",
)
@click.option(
    "--partitions",
    default=None,
    type=click.IntRange(min=1),
    help="Spark partitions (default: 4 per core, more for inputs over 1 MiB per partition).",
)
@click.option(
    "--no-resume", is_flag=True, help="Send every batch even if a previous run had it acknowledged."
)
@click.option("--no-progress", is_flag=True, help="No progress bar (log lines only).")
@click.option(
    "--prune",
    is_flag=True,
    help="After a complete run to Atlas, delete the processes and column lineage earlier runs of the same "
    "roots and namespace made that this run no longer makes (never datasets, never other tools' entities).",
)
@click.option("--prune-dry-run", is_flag=True, help="List what --prune would delete; delete nothing.")
@click.option(
    "--allow-empty", is_flag=True, help="Exit 0 when no input is found (default: exit 1, a mistyped path)."
)
def scan_command(
    paths: tuple[Path, ...],
    dialect: str | None,
    schema_file: Path | None,
    default_db: str | None,
    learn_schema: bool,
    schema_from_atlas: bool,
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    to: str | None,
    atlas_url: str | None,
    user: str | None,
    out_dir: Path | None,
    master: str | None,
    namespace: str | None,
    config_file: Path | None,
    fail_on: str,
    query_field: str | None,
    batch_size: int,
    partitions: int | None,
    no_resume: bool,
    no_progress: bool,
    prune: bool,
    prune_dry_run: bool,
    allow_empty: bool,
) -> None:
    """Scan PATH... for SQL scripts (.sql .hql .ddl), SQLFlow exports (.xml .json), query logs
    (.jsonl .csv, or .json lines with a query field) and OpenLineage events (.json .jsonl, told by their
    content); extract lineage on Spark; deliver it in batches.

    Writes summary.json (files, statements, processes, entities created/updated/unchanged, errors with
    file:line) and prints it. A re-run skips batches already acknowledged. Exit codes: 0 success,
    1 the run met errors (see --fail-on), 2 usage or configuration error, 130 interrupted.
    """
    from atlas_bridge import bridge

    if to is not None and (to == "openlineage" or to.startswith(("openlineage:", "openlineage="))):
        _scan_to_openlineage(paths, to, namespace, config_file, include, exclude, query_field, fail_on)
        return
    _log_progress_lines()
    _quiet_py4j_on_interrupt()
    _sigterm_interrupts()
    try:
        to, atlas_url = _atlas_target(to, atlas_url)
        settings, delivery, report_dir = _prepare(
            to, out_dir, namespace, config_file, atlas_url=atlas_url, user=user
        )
        options = bridge.ScanOptions(
            dialect=dialect,
            schema=_load_schema(schema_file, paths),
            default_db=default_db,
            query_field=query_field,
            learn_schema=learn_schema,
        )
        reader = (
            _atlas_schema_reader(config_file, settings.namespace, atlas_url=atlas_url, user=user)
            if schema_from_atlas
            else None
        )
    except ConfigError as e:
        raise click.UsageError(str(e)) from e
    except AtlasBridgeError as e:  # Atlas unreachable or refusing our typedefs
        click.echo(f"error: {e}", err=True)
        sys.exit(1)

    try:
        with _progress_bars(disabled=no_progress) as progress:
            summary = bridge.scan(
                [str(p) for p in paths],
                delivery,
                namespace=settings.namespace,
                master=master,
                options=options,
                include=include,
                exclude=exclude,
                # Files are rewritten whole each run (same input, same bytes); Atlas deliveries resume.
                state_dir=report_dir / ".state" if delivery.target.startswith(("atlas:", "kafka:")) else None,
                max_entities=batch_size,
                partitions=partitions,
                progress=progress,
                resume=not no_resume,
                prune="dry-run" if prune_dry_run else "on" if prune else "off",
                schema_reader=reader,
            )
    except KeyboardInterrupt:
        click.echo("interrupted; re-run to resume", err=True)
        sys.exit(130)
    except ConfigError as e:
        raise click.UsageError(str(e)) from e
    except AtlasBridgeError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    finally:
        with contextlib.suppress(Exception):
            delivery.close()

    if not summary.files:
        skipped = "".join(f"\n  {note}" for note in [*summary.notes, *map(str, summary.extract.problems)])
        where = ", ".join(str(p) for p in paths)
        click.echo(
            f"nothing to scan: no SQL scripts, SQLFlow exports or query logs under {where}{skipped}", err=True
        )
        sys.exit(0 if allow_empty and not summary.failed(fail_on) else 1)
    if delivery.target.startswith("files:"):  # payloads in a folder: the lineage page beside them
        from atlas_bridge.page import write_lineage_page

        click.echo(f"page:       {write_lineage_page(Path(settings.output_dir))}")
    path = bridge.write_summary(summary, report_dir)
    click.echo(summary.render())
    if prune_dry_run:
        for line in summary.delivery.prune_list:
            click.echo(f"  would delete {line}")
    click.echo(f"summary:    {path}")
    d = summary.delivery
    if d.too_large:
        click.echo(
            f"{d.too_large} batch(es) refused by Atlas as too large (HTTP 413): re-run with a smaller"
            f" --batch-size (this run: {batch_size}; try {max(1, batch_size // 2)})",
            err=True,
        )
    if d.interrupted:
        click.echo(f"interrupted ({d.interrupted}): delivery stopped at a batch boundary", err=True)
    if d.kept:
        click.echo(
            f"{d.kept} batch(es) not delivered are kept in {d.kept_dir};"
            + (" Atlas's answer is beside each refused one;" if d.refused else "")
            + " finish with: "
            + bridge.push_command(d.kept_dir, kafka=delivery.target.startswith("kafka:"))
        )
    if d.interrupted:
        sys.exit(130)
    if summary.failed(fail_on):
        sys.exit(1)


def _scan_to_openlineage(
    paths: tuple[Path, ...],
    to: str,
    namespace: str | None,
    config_file: Path | None,
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    query_field: str | None,
    fail_on: str,
) -> None:
    """``--to openlineage[:URL|:DIR]``: the inputs' lineage as OpenLineage run events, sent as they are
    read (on this process, no Spark job: events go out file by file, nothing is merged into Atlas)."""
    import datetime

    from atlas_bridge import bridge
    from atlas_bridge.bridge.extract import unit_results
    from atlas_bridge.config import Settings
    from atlas_bridge.errors import OpenLineageError
    from atlas_bridge.graph import end_to_end
    from atlas_bridge.model import Severity
    from atlas_bridge.openlineage.sink import make_event_sink
    from atlas_bridge.openlineage.write import lineage_to_events

    try:
        settings = Settings.load(config_file, namespace=namespace)
        target = to[len("openlineage") + 1 :] or settings.openlineage
        if not target:
            msg = "--to openlineage needs a URL or a folder: --to openlineage:URL, or the openlineage setting"
            raise ConfigError(msg)
        problems: list[Any] = []
        files, notes = bridge.discover_inputs(
            [str(p) for p in paths],
            include=include,
            exclude=exclude,
            query_field=query_field,
            problems=problems,
        )
        sink = make_event_sink(target, settings)
    except ConfigError as e:
        raise click.UsageError(str(e)) from e
    now = (
        datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )
    events = 0
    statements = 0
    try:
        for unit in bridge.plan_units(files, bridge.ScanOptions(query_field=query_field)):
            for r in unit_results(unit, bridge.ScanOptions(query_field=query_field)):
                statements += r.statements
                problems.extend(r.problems)
                for event in lineage_to_events(
                    end_to_end(r.lineage),
                    namespace=settings.namespace,
                    event_time=now,
                    runs=r.runs,
                    job_namespace=settings.openlineage_job_namespace,
                ):
                    sink.emit(event)
                    events += 1
    except OpenLineageError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    finally:
        sink.close()
    for note in notes:
        click.echo(f"note: {note}", err=True)
    for p in problems:
        click.echo(str(p), err=True)
    where = target  # as the user wrote it, as the other output paths are shown
    click.echo(f"files:      {len(files)}\nstatements: {statements}\nevents:     {events} sent to {where}")
    errors = sum(1 for p in problems if p.severity is Severity.ERROR)
    click.echo(f"errors:     {errors}")
    if errors and fail_on != "never":
        sys.exit(1)


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def _atlas_target(to: str | None, atlas_url: str | None) -> tuple[str | None, str | None]:
    """``--to URL`` is the Atlas at that address (never a folder named ``http:``); ``--atlas URL`` means
    ``--to atlas``. Any other ``scheme://`` is refused with a hint."""
    if to is not None and _URL.match(to):
        if not to.lower().startswith(("http://", "https://")):
            msg = (
                f"--to {to}: not an Atlas address (http:// or https://); for Kafka use --to kafka with "
                "atlas.kafka.bootstrap.servers, for files a folder path"
            )
            raise ConfigError(msg)
        if atlas_url is not None and atlas_url != to:
            msg = "--to URL and --atlas URL name two Atlas addresses: give one"
            raise ConfigError(msg)
        return "atlas", to
    if atlas_url is not None:
        if to not in (None, "atlas"):
            msg = f"--atlas sends to Atlas; --to {to} does not: give one of them"
            raise ConfigError(msg)
        return "atlas", atlas_url
    return to, None


def _prepare(
    to: str | None,
    out_dir: Path | None,
    namespace: str | None,
    config_file: Path | None,
    *,
    atlas_url: str | None = None,
    user: str | None = None,
) -> tuple[Any, Any, Path]:
    """Settings, the delivery and the report directory for ``--to``."""
    from atlas_bridge import bridge
    from atlas_bridge.config import Settings

    to_atlas = to == "atlas"
    overrides: dict[str, Any] = {"namespace": namespace}
    if atlas_url is not None:
        overrides["rest_address"] = atlas_url
    if user is not None:
        overrides["username"] = user
    folder_to = to if to is not None and to not in ("atlas", "kafka") else None
    for option, folder in (("--to", folder_to), ("--out", out_dir)):
        if folder is not None and Path(folder).exists() and not Path(folder).is_dir():
            msg = f"{option} {folder}: exists and is not a folder (give a folder, or a path not yet there)"
            raise ConfigError(msg)
    if to == "kafka":
        return _prepare_kafka(Settings.load(config_file, **overrides), out_dir)
    if to is not None and not to_atlas:
        # --to DIR is a dry run: the files are written and Atlas is never contacted, whatever is configured.
        overrides.update(output_dir=Path(to), rest_address=[])
    settings = Settings.load(config_file, **overrides)
    if to is None:
        to_atlas = settings.atlas_configured
    if to_atlas and not settings.atlas_configured:
        msg = (
            "--to atlas needs an Atlas address: set ATLAS_BRIDGE_REST_ADDRESS, or atlas.rest.address in the "
            "file given with --config (or $ATLAS_CONF/atlas-application.properties)"
        )
        raise ConfigError(msg)
    report_dir = out_dir if out_dir is not None else settings.output_dir
    if to_atlas:
        from atlas_bridge.atlas.client import AtlasClient
        from atlas_bridge.atlas.typedefs import register_typedefs

        client = AtlasClient.from_settings(settings)
        unsent = Path(report_dir) / "unsent"
        # The resume state makes an interrupted delivery restart where it stopped; what Atlas does not
        # acknowledge in this run is added to `unsent` for `atlas-bridge push`. What earlier runs (of this
        # or other folders) kept there stays until a push delivers it.
        from atlas_bridge.atlas.reuse import reuse_from_settings

        target = "atlas:" + ",".join(settings.base_urls)
        delivery: Any = bridge.AtlasDelivery(
            client, target, unsent, reuse=reuse_from_settings(settings, client)
        )
        try:
            logger.info("typedefs: %s", register_typedefs(client).summary())
        except (AtlasUnavailableError, AtlasAuthError, AtlasNotFoundError) as e:
            # Said now, before Spark starts: the lineage is still extracted and kept for `push`.
            if isinstance(e, AtlasNotFoundError) and not bridge.is_not_an_atlas(e):
                raise
            down = bridge.not_an_atlas(e) if isinstance(e, AtlasNotFoundError) else e
            click.echo(f"error: {down}; the lineage will be kept in {unsent} for atlas-bridge push", err=True)
            delivery.down = delivery.down_said = down  # nothing is sent; every batch is kept for `push`
    else:
        from atlas_bridge.atlas.sink import FileSink, make_sink

        target = f"files:{Path(settings.output_dir).resolve()}"
        # A scan's folder holds this scan's batches only: the same input then gives the same files.
        sink = make_sink(settings) if settings.disabled else FileSink(settings.output_dir, fresh=True)
        delivery = bridge.SinkDelivery(sink, target)
    return settings, delivery, Path(report_dir)


def _atlas_schema_reader(
    config_file: Path | None, namespace: str, *, atlas_url: str | None = None, user: str | None = None
) -> Any:
    """``--schema-from-atlas``: reads table columns through the configured Atlas (also with --to DIR)."""
    import functools

    from atlas_bridge.atlas.client import AtlasClient
    from atlas_bridge.atlas.schema import read_atlas_schema
    from atlas_bridge.config import Settings

    settings = Settings.load(config_file, namespace=namespace, rest_address=atlas_url, username=user)
    if not settings.atlas_configured:
        msg = "--schema-from-atlas needs an Atlas address (ATLAS_BRIDGE_REST_ADDRESS or atlas.rest.address)"
        raise ConfigError(msg)
    return functools.partial(read_atlas_schema, AtlasClient.from_settings(settings), namespace=namespace)


def _prepare_kafka(settings: Any, out_dir: Path | None) -> tuple[Any, Any, Path]:
    """``--to kafka``: hook messages to Atlas's hook topic; what brokers do not take goes to ``unsent``."""
    from atlas_bridge import bridge
    from atlas_bridge.atlas.kafka import KafkaPublisher

    if not settings.kafka_configured:
        msg = (
            "--to kafka needs Kafka brokers: set atlas.kafka.bootstrap.servers in the file given with "
            "--config (or $ATLAS_CONF/atlas-application.properties), or ATLAS_BRIDGE_KAFKA_BOOTSTRAP_SERVERS"
        )
        raise ConfigError(msg)
    report_dir = Path(out_dir if out_dir is not None else settings.output_dir)
    publisher = KafkaPublisher.from_settings(settings)
    unsent = report_dir / "unsent"  # added to: what earlier runs kept stays until a push delivers it
    # Atlas reads no typedefs from Kafka: ours must be registered once (`atlas-bridge typedefs register`).
    logger.info("publishing to %s (our typedefs must already be registered in Atlas)", publisher.base_url)
    delivery = bridge.KafkaDelivery(publisher, "kafka:" + publisher.base_url.removeprefix("kafka://"), unsent)
    return settings, delivery, report_dir


def _load_schema(schema_file: Path | None, paths: tuple[Path, ...]) -> dict[str, Any] | None:
    if schema_file is None:
        found = [p / "schema.json" for p in paths if p.is_dir() and (p / "schema.json").is_file()]
        if not found:
            return None
        schema_file = found[0]
        logger.info("using the schema mapping in %s", schema_file)
    try:
        data = json.loads(schema_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        msg = f"cannot read schema {schema_file}: {e}"
        raise ConfigError(msg) from e
    if not isinstance(data, dict):
        msg = f"schema {schema_file} must be a JSON object ({{db: {{table: {{column: type}}}}}})"
        raise ConfigError(msg)
    return data


class _Py4JInterruptFilter(logging.Filter):
    """Ctrl-C inside a py4j call makes py4j log its broken connection with full tracebacks (to the root
    logger): they say nothing a user needs once "interrupted" is printed."""

    def filter(self, record: logging.LogRecord) -> bool:
        from_py4j = "py4j" in record.pathname or "pyspark" in record.pathname
        exc = record.exc_info[1] if record.exc_info else None
        interrupted = isinstance(exc, KeyboardInterrupt) or "while sending command" in record.getMessage()
        return not (from_py4j and interrupted)


def _quiet_py4j_on_interrupt() -> None:
    root = logging.getLogger()
    for handler in root.handlers:
        if not any(isinstance(f, _Py4JInterruptFilter) for f in handler.filters):
            handler.addFilter(_Py4JInterruptFilter())


def _sigterm_interrupts() -> None:
    """SIGTERM ends a scan as Ctrl-C does (temporary files removed, exit 130), not on the spot; during
    delivery both stop at the next batch boundary instead (:class:`atlas_bridge.bridge.run.StopOnSignals`)."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread (an embedding caller): left as it is
        return
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.call_on_close(lambda: signal.signal(signal.SIGTERM, old))


def _log_progress_lines() -> None:
    """INFO progress lines when nobody set a level and stderr is no terminal (spark-submit, CI, cron)."""
    if os.environ.get("ATLAS_BRIDGE_LOG_LEVEL") is None and not sys.stderr.isatty():
        for name in ("atlas_bridge.bridge", "atlas_bridge.cli.scan"):
            lg = logging.getLogger(name)
            if lg.getEffectiveLevel() > logging.INFO:
                lg.setLevel(logging.INFO)


@contextlib.contextmanager
def _progress_bars(*, disabled: bool) -> Iterator[Any]:
    """A ``progress(phase, done, total)`` drawing one tqdm bar per phase (only on a terminal)."""
    from tqdm import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    bars: dict[str, Any] = {}

    def progress(phase: str, done: int, total: int) -> None:
        bar = bars.get(phase)
        if bar is None:
            for other in bars.values():
                other.close()
            bar = bars[phase] = tqdm(
                total=total, desc=_PHASES.get(phase, phase), disable=True if disabled else None, leave=False
            )
        bar.total = total
        bar.update(done - bar.n)

    with logging_redirect_tqdm():
        try:
            yield progress
        finally:
            for bar in bars.values():
                bar.close()
