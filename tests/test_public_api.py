"""The public API is exactly ``__all__``, and every name in it resolves."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import atlas_bridge


@pytest.mark.parametrize("name", atlas_bridge.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(atlas_bridge, name) is not None


def test_all_is_sorted_and_matches_type_checking_imports() -> None:
    assert atlas_bridge.__all__ == sorted(atlas_bridge.__all__)
    tree = ast.parse(Path(atlas_bridge.__file__).read_text(encoding="utf-8"))
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("atlas_bridge.")
        for alias in node.names
    }
    assert imported == set(atlas_bridge.__all__) - {"__version__"}


def test_unknown_name_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = atlas_bridge.nope  # type: ignore[attr-defined]


def test_import_is_cheap() -> None:
    """A Spark driver imports atlas_bridge: it must not drag in sqlglot, requests or pyspark."""
    code = (
        "import sys, atlas_bridge; "
        "print(','.join(m for m in ('sqlglot', 'requests', 'pyspark') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
