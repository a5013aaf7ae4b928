"""Golden files: reviewed expected outputs, rewritten only with ``pytest --update-golden-files``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

GOLDEN_DIR = Path(__file__).parent / "golden"


def dumps(data: Any) -> str:
    """The one canonical JSON form goldens are stored in."""
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def assert_golden(data: Any, relpath: str, update: bool) -> None:
    """Compare ``data`` with ``tests/golden/<relpath>``; write it when missing or when updating."""
    path = GOLDEN_DIR / relpath
    text = data if isinstance(data, str) else dumps(data)
    if update or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if not update:
            pytest.fail(f"golden file {path} was missing and has been written: review it and re-run")
        return
    expected = path.read_text(encoding="utf-8")
    if isinstance(data, str):
        assert text == expected
    else:
        assert json.loads(text) == json.loads(expected)
