"""``atlas-bridge page DIR...``: the lineage page from any folder of Atlas request bodies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

_BATCH_GLOB = "*-entities.json"
"""How every writer names a request body: ``scan --to DIR``, a scan's ``unsent/``, the hook's spool (and
its ``overflow-*`` and ``rejected`` folders); Atlas's answers beside refused ones end ``.error.json``."""


def batch_files(paths: tuple[Path, ...]) -> list[Path]:
    """The request bodies under ``paths`` (folders searched at any depth; a file given is taken as is),
    in path order."""
    found: list[Path] = []
    for p in paths:
        if p.is_file():
            found.append(p)
        else:
            found.extend(sorted(f for f in p.rglob(_BATCH_GLOB) if f.is_file()))
    return found


def read_entities(files: list[Path]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every entity of the bodies, one per type and qualifiedName (the last one read wins, as in Atlas);
    and a message per file that is not a request body."""
    by_name: dict[tuple[str, str], dict[str, Any]] = {}
    unnamed: list[dict[str, Any]] = []
    problems: list[str] = []
    for path in files:
        try:
            batch = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            problems.append(f"{path}: skipped, not a readable request body ({e.__class__.__name__})")
            continue
        entities = batch.get("entities") if isinstance(batch, dict) else None
        if not isinstance(entities, list):
            problems.append(f"{path}: skipped, no 'entities' list (not an Atlas request body)")
            continue
        for entity in entities:
            if not isinstance(entity, dict):
                continue
            qn = (entity.get("attributes") or {}).get("qualifiedName")
            if isinstance(qn, str):
                by_name[(str(entity.get("typeName")), qn)] = entity
            else:
                unnamed.append(entity)
    return [*by_name.values(), *unnamed], problems


@click.command("page")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("lineage.html"),
    show_default=True,
    help="Where to write the page.",
)
@click.option("--title", default=None, help="The page's title (default: the folders' names).")
def page_command(paths: tuple[Path, ...], output: Path, title: str | None) -> None:
    """Draw the lineage page (one self-contained HTML file) from folders of Atlas request bodies: what
    'scan --to DIR' wrote, a scan's unsent/ folder, or the Spark hook's spool. No Atlas needed.
    """
    from atlas_bridge.page import render_page

    files = batch_files(paths)
    entities, problems = read_entities(files)
    for problem in problems:
        click.echo(f"warning: {problem}", err=True)
    if not entities:
        where = ", ".join(str(p) for p in paths)
        msg = f"no request bodies ({_BATCH_GLOB}) under {where}: nothing to draw"
        raise click.ClickException(msg)
    names = ", ".join(p.resolve().name or str(p) for p in paths)
    html = render_page(entities, title=title or f"Lineage: {names}")
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(output)
    click.echo(f"page: {output} ({len(entities)} entities from {len(files)} file(s))")


def register(group: click.Group) -> None:
    """Add this module's commands to the ``atlas-bridge`` group."""
    group.add_command(page_command)
