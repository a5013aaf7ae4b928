"""Atlas commands: ``typedefs register|diff|export`` and ``push DIR``.

Atlas options are shared by every command that talks to Atlas (:func:`atlas_options`). The password is
never an option (it would sit in shell history and ``ps``): it comes from ``ATLAS_BRIDGE_PASSWORD``, the
properties file, or a prompt when stdin is a terminal.

Exit codes: 0 success; 1 something failed (a refused batch, Atlas unreachable or refusing the
credentials); 2 usage or configuration error.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from atlas_bridge.errors import AtlasError, ConfigError, FolderBusyError, TypedefError

if TYPE_CHECKING:
    from atlas_bridge.atlas.client import AtlasClient
    from atlas_bridge.config import Settings

F = TypeVar("F", bound=Callable[..., Any])

_PUSH_WAIT_S = 60.0
"""How long ``push`` waits for another process sending the same folder (a job flushing its spool)."""


def atlas_options(func: F) -> F:
    """``--atlas``, ``--config`` and ``--user`` for a command that talks to Atlas."""

    @click.option(
        "--atlas",
        "atlas_url",
        metavar="URL",
        help="Atlas base URL(s), comma-separated for HA (default: atlas.rest.address).",
    )
    @click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False, path_type=Path),
        help="atlas-application.properties to read (default: $ATLAS_CONF/atlas-application.properties).",
    )
    @click.option(
        "--user", "user", help="Atlas user for basic auth (password from ATLAS_BRIDGE_PASSWORD or a prompt)."
    )
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def load_settings(
    config_file: Path | None, atlas_url: str | None, user: str | None, **overrides: Any
) -> Settings:
    """Settings from the command line over env and properties; configuration errors exit with 2."""
    from atlas_bridge.config import Settings

    try:
        return Settings.load(config_file, rest_address=atlas_url, username=user, **overrides)
    except ConfigError as e:
        raise click.UsageError(str(e)) from e


def _stdin_is_tty() -> bool:
    return sys.stdin.isatty()


def make_client(settings: Settings) -> AtlasClient:
    """An Atlas client for ``settings``; prompts for a missing password only on a terminal."""
    from pydantic import SecretStr

    from atlas_bridge.atlas.client import AtlasClient

    if not settings.atlas_configured:
        msg = "no Atlas address: use --atlas URL, ATLAS_BRIDGE_REST_ADDRESS or atlas.rest.address"
        raise click.UsageError(msg)
    if settings.username and settings.password is None and not settings.kerberos and _stdin_is_tty():
        password = click.prompt(f"Atlas password for {settings.username}", hide_input=True, err=True)
        settings = settings.model_copy(update={"password": SecretStr(password)})
    try:
        return AtlasClient.from_settings(settings)
    except ConfigError as e:
        raise click.UsageError(str(e)) from e


def _fail(e: Exception) -> click.ClickException:
    """Exit 1 with the error's (secret-free) message."""
    return click.ClickException(str(e))


@click.group("typedefs")
def typedefs_group() -> None:
    """Our Atlas type definitions: register them, see what would change, or export them."""


@typedefs_group.command("register")
@atlas_options
def typedefs_register(atlas_url: str | None, config_file: Path | None, user: str | None) -> None:
    """Create missing types and update changed ones (never dropping an attribute). Safe to re-run."""
    from atlas_bridge.atlas.typedefs import register_typedefs

    client = make_client(load_settings(config_file, atlas_url, user))
    try:
        plan = register_typedefs(client)
    except (AtlasError, TypedefError) as e:
        raise _fail(e) from e
    summary = plan.summary()
    click.echo(
        f"typedefs: created {len(summary['create'])}, updated {len(summary['update'])},"
        f" unchanged {len(summary['unchanged'])}, skipped {len(summary['skipped'])} (Atlas newer)"
    )
    for action in ("create", "update"):
        for name in summary[action]:
            click.echo(f"  {action}d {name}")


@typedefs_group.command("diff")
@atlas_options
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Also write the POST/PUT bodies registration would send ('-' for stdout).",
)
def typedefs_diff(
    atlas_url: str | None, config_file: Path | None, user: str | None, output: str | None
) -> None:
    """Show what 'typedefs register' would create and update, without changing Atlas."""
    from atlas_bridge.atlas.typedefs import load_typedefs, plan_typedef_changes

    client = make_client(load_settings(config_file, atlas_url, user))
    try:
        plan = plan_typedef_changes(client.get_all_typedefs(), load_typedefs())
    except (AtlasError, TypedefError) as e:
        raise _fail(e) from e
    if output is not None:
        bodies = json.dumps({"create": plan.create, "update": plan.update}, sort_keys=True, indent=2) + "\n"
        if output == "-":
            click.echo(bodies, nl=False)
            return
        Path(output).write_text(bodies, encoding="utf-8")
    for action, names in plan.summary().items():
        click.echo(f"{action}: {', '.join(names) if names else '-'}")


@typedefs_group.command("export")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True),
    default="-",
    show_default=True,
    help="Where to write the AtlasTypesDef JSON (e.g. into $ATLAS_HOME/models/).",
)
def typedefs_export(output: str) -> None:
    """Write our typedefs as one AtlasTypesDef JSON (no Atlas needed)."""
    from atlas_bridge.atlas.typedefs import export_typedefs

    try:
        text = export_typedefs()
    except TypedefError as e:
        raise _fail(e) from e
    if output == "-":
        click.echo(text, nl=False)
        return
    target = Path(output)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)  # e.g. a models/ folder not made yet
        target.write_text(text, encoding="utf-8")
    except OSError as e:
        msg = f"cannot write {output}: {e.strerror or e}"
        raise click.ClickException(msg) from e


@click.command("push")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@atlas_options
@click.option(
    "--skip-typedefs", is_flag=True, help="Do not register (create or update) our typedefs before sending."
)
@click.option("--dry-run", is_flag=True, help="List what would be sent; contact nothing.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option(
    "--to",
    "to",
    type=click.Choice(["atlas", "kafka"]),
    default="atlas",
    show_default=True,
    help="'kafka' publishes the batches as hook messages to Atlas's hook topic "
    "(atlas.kafka.bootstrap.servers) instead of calling Atlas's REST API; typedefs are then not registered.",
)
def push(
    directory: Path,
    atlas_url: str | None,
    config_file: Path | None,
    user: str | None,
    skip_typedefs: bool,
    dry_run: bool,
    no_progress: bool,
    to: str,
) -> None:
    """Send a folder of request bodies (written by 'scan --to DIR', a scan's unsent/ folder or the Spark
    hook's spool) to Atlas, in order, after registering our typedefs; with '--to kafka', publish them to
    Atlas's hook topic instead.

    What Atlas acknowledged is recorded in the folder, so re-running after a failure resumes there. The
    push stops at the first refused login (it would lock the account) and when Atlas stops answering.
    """
    from tqdm import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    from atlas_bridge.atlas.reuse import reuse_from_settings
    from atlas_bridge.atlas.sink import pending_batches, push_directory
    from atlas_bridge.atlas.typedefs import register_typedefs

    settings = load_settings(config_file, atlas_url, user)
    poster: Any = None
    if to == "kafka":
        from atlas_bridge.atlas.kafka import KafkaPublisher

        if not settings.kafka_configured:
            msg = "--to kafka needs atlas.kafka.bootstrap.servers (or ATLAS_BRIDGE_KAFKA_BOOTSTRAP_SERVERS)"
            raise click.UsageError(msg)
        try:
            poster = KafkaPublisher.from_settings(settings)
        except ConfigError as e:
            raise click.UsageError(str(e)) from e
    if dry_run:
        target = poster.base_url if poster is not None else None
        if target is None and settings.atlas_configured:
            target = settings.base_urls[0]
        try:
            pending = pending_batches(directory, target)
        except ConfigError as e:
            raise click.UsageError(str(e)) from e
        entities = sum(int(e.get("entities") or 0) for e in pending)
        click.echo(f"would send {len(pending)} batch(es), {entities} entities, from {directory}")
        for entry in pending:
            click.echo(f"  {entry['file']}")
        return
    if poster is None:
        client = make_client(settings)
        poster = client
    if to == "atlas" and not skip_typedefs:
        try:
            plan = register_typedefs(client)
        except (AtlasError, TypedefError) as e:
            raise _fail(e) from e
        summary = plan.summary()
        if plan.has_changes:
            click.echo(f"typedefs: created {len(summary['create'])}, updated {len(summary['update'])}")
    with (
        tqdm(disable=True if no_progress else None, unit="batch", desc="push") as bar,
        logging_redirect_tqdm(),
    ):

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        try:
            reuse = reuse_from_settings(settings, poster) if to == "atlas" else None
            report = push_directory(directory, poster, progress=progress, reuse=reuse, wait_s=_PUSH_WAIT_S)
        except ConfigError as e:
            raise click.UsageError(str(e)) from e
        except (AtlasError, FolderBusyError) as e:
            raise _fail(e) from e
        finally:
            if to == "kafka":
                poster.close()
    click.echo(report.summary())
    for failure in report.failures:
        click.echo(f"failed: {failure}", err=True)
    if report.failures:
        sys.exit(1)


def register(group: click.Group) -> None:
    """Add this module's commands to the ``atlas-bridge`` group."""
    group.add_command(typedefs_group)
    group.add_command(push)
