"""Commands of this group are registered in ``register``."""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Add this module's commands to the ``atlas-bridge`` group."""
