"""Work-arounds for sqlglot behaviour that bad input turns into minutes (issue 11), applied on import.

- ``INTERVAL_STRING_RE`` (``\\s*(-?[0-9]+(?:\\.[0-9]+)?)\\s*([a-zA-Z]+)\\s*``, run with ``findall`` on every
  ``INTERVAL '...'`` string the parser meets) is quadratic in a run of blanks: a failed match restarts one
  character further inside the same run. A 17 KB string of blanks took 3.5-7 s in one statement. The
  replacement never starts a match between two blanks, which finds exactly the same matches (a match
  starting inside a run would have started at the run's first blank, and a match's trailing ``\\s*`` never
  stops inside a run), in linear time.
"""

from __future__ import annotations

import re

from sqlglot import expressions
from sqlglot.expressions import builders

_ORIGINAL_INTERVAL = r"\s*(-?[0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]+)\s*"
INTERVAL_STRING_RE = re.compile(r"(?!(?<=\s)\s)" + _ORIGINAL_INTERVAL)


def apply() -> None:
    """Install the replacements where sqlglot reads them (only over the pattern they were written for)."""
    for module in (expressions, builders):
        current = getattr(module, "INTERVAL_STRING_RE", None)
        if isinstance(current, re.Pattern) and current.pattern == _ORIGINAL_INTERVAL:
            module.INTERVAL_STRING_RE = INTERVAL_STRING_RE  # type: ignore[attr-defined]
