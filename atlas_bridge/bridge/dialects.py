"""Dialect declarations inside files: below inputs, extract and schema, which all need them."""

from __future__ import annotations

import re

_DIALECT_HINT = re.compile(r"^\s*(?:--|#|/\*)\s*dialect\s*[:=]\s*([A-Za-z][\w-]*)", re.IGNORECASE)


def dialect_hint(text: str) -> str | None:
    """The dialect a script declares in a comment among its first lines (``-- dialect: hive``).

    A file's own declaration wins over ``--dialect``, so one estate can hold Hive scripts next to a T-SQL
    procedure.

    >>> dialect_hint("-- nightly load\\n-- dialect: hive\\nLOAD DATA ...")
    'hive'
    >>> dialect_hint("SELECT 1 -- dialect: tsql") is None
    True
    """
    for line in text.splitlines()[:10]:
        m = _DIALECT_HINT.match(line)
        if m:
            return m.group(1).lower()
        stripped = line.strip()
        if stripped and not stripped.startswith(("--", "#", "/*", "*")):
            return None
    return None
