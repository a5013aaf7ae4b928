"""Icons of our Atlas types, for Atlas's web UI (``atlas-bridge icons install``).

Atlas's UI draws a lineage node with ``img/entity-icon/<typeName>.png`` (``disabled/<typeName>.png`` for a
deleted entity), else ``<serviceType>.png``, else a generic icon after two 404s: without ours, tables, paths
and columns look alike. The PNGs ship in the package (``atlas_bridge/atlas/icons``, see its NOTICE).
"""

from __future__ import annotations

import logging
import shutil
from importlib import resources
from pathlib import Path

from atlas_bridge.errors import ConfigError

logger = logging.getLogger(__name__)

ICON_DIR = "img/entity-icon"
"""Where Atlas's web UI (dashboardv2) looks for type icons, under its webapp folder."""


def icon_names() -> list[str]:
    """The icons we ship, as paths relative to ``img/entity-icon`` (``x.png``, ``disabled/x.png``).

    >>> "atlas_bridge_table.png" in icon_names() and "disabled/atlas_bridge_column.png" in icon_names()
    True
    """
    root = resources.files("atlas_bridge.atlas") / "icons"
    names = [p.name for p in root.iterdir() if p.name.endswith(".png")]
    names += [f"disabled/{p.name}" for p in (root / "disabled").iterdir() if p.name.endswith(".png")]
    return sorted(names)


def install_icons(webapp: Path) -> list[Path]:
    """Copy our icons into an Atlas web UI's folder (the one holding ``index.html`` and ``img/``).

    Returns the files written. Raises :class:`ConfigError` when ``webapp`` does not look like Atlas's UI.
    """
    target = webapp / ICON_DIR
    if not (webapp / "index.html").is_file() or not target.is_dir():
        msg = f"{webapp} is not Atlas's web UI folder (no index.html and {ICON_DIR}/ in it)"
        raise ConfigError(msg)
    root = resources.files("atlas_bridge.atlas") / "icons"
    written: list[Path] = []
    for name in icon_names():
        dest = target / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        with resources.as_file(root / name) as src:
            shutil.copyfile(src, dest)
        written.append(dest)
    logger.info("installed %d icons into %s", len(written), target)
    return written
