"""How big one Atlas bulk request may be (no imports: the CLI reads these when it starts)."""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_ENTITIES"]

DEFAULT_MAX_ENTITIES = 1000
"""Most entities in one bulk body (the batch bridge's ``--batch-size``): Atlas writes a body in one graph
transaction, and bodies of tens of thousands of entities time out (atlas.md §7), while a few hundred per
request makes a big estate thousands of requests."""
DEFAULT_MAX_BYTES = 4_000_000
"""About the most bytes of JSON in one body the batch bridge sends, whatever the entity count."""
