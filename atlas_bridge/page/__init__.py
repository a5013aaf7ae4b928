"""The lineage page: see the lineage without Atlas, in one self-contained HTML file.

:func:`render_page` is pure (entities in, HTML out); :func:`write_lineage_page` reads a scan's payload folder
and writes ``lineage.html`` beside the payloads; :func:`lineage_page` converts a model in memory first.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from atlas_bridge.page.render import page_data, render_page, script_json

if TYPE_CHECKING:
    from atlas_bridge.model import Lineage

PAGE_NAME = "lineage.html"

__all__ = ["PAGE_NAME", "lineage_page", "page_data", "render_page", "script_json", "write_lineage_page"]


def lineage_page(lineage: Lineage, *, namespace: str = "primary", title: str = "Lineage") -> str:
    """The page of a lineage model, converted as a scan would convert it (plus what queries only read)."""
    from atlas_bridge.atlas.convert import to_atlas_entities

    entities = to_atlas_entities(lineage, namespace=namespace, include_resultsets=True)
    return render_page(entities, title=title)


def write_lineage_page(out_dir: Path, title: str | None = None) -> Path:
    """Write ``lineage.html`` into a folder of payloads written by the file sink; returns its path.

    Raises:
        ConfigError: the folder's manifest or a batch file cannot be read.
    """
    from atlas_bridge.atlas.sink import read_directory_entities

    out_dir = Path(out_dir)
    entities = read_directory_entities(out_dir)
    path = out_dir / PAGE_NAME
    html = render_page(entities, title=title or f"Lineage: {out_dir.name}")
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(path)
    return path
