"""``atlas-bridge icons``: our types' icons for Atlas's web UI."""

from __future__ import annotations

from pathlib import Path

import click

from atlas_bridge.errors import ConfigError


@click.group("icons")
def icons_group() -> None:
    """Icons of our Atlas types for Atlas's web UI (its Lineage tab draws each node with its type's)."""


@icons_group.command("install")
@click.option(
    "--webapp",
    "webapp",
    required=True,
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Atlas's web UI folder, holding index.html and img/ (e.g. $ATLAS_HOME/server/webapp/atlas).",
)
def icons_install(webapp: Path) -> None:
    """Copy our icons into WEBAPP/img/entity-icon/ (<typeName>.png and disabled/<typeName>.png)."""
    from atlas_bridge.atlas.icons import install_icons

    try:
        written = install_icons(webapp)
    except (ConfigError, OSError) as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"installed {len(written)} icons into {webapp / 'img' / 'entity-icon'}")


def register(group: click.Group) -> None:
    """Add this module's commands to the ``atlas-bridge`` group."""
    group.add_command(icons_group)
