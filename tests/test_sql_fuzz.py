"""Seeded fuzzing of ``extract_sql_lineage`` (issue 11): 2,000 mutated inputs over nine dialects.

Inputs: tests/sql_fuzz.py mutates the SQL under tests/data/sql (token deletion, duplication and swaps,
truncation, random unicode with lone surrogates and NUL, deep nesting, big literals, unbalanced quotes...).
No exception may escape; every result is a valid model that survives a JSON round trip; every problem of
a statement says where it is; and half of the inputs follow a good statement whose lineage must stay whole.
The bigger run with time and memory figures is benchmarks/fuzz.py.
"""

from __future__ import annotations

import functools
import logging

import pytest
from sql_fuzz import mutants

from atlas_bridge import extract_sql_lineage
from atlas_bridge.graph import end_to_end, relation_lines
from atlas_bridge.model import ExtractionResult

COUNT = 2000
GOOD = "INSERT INTO fuzz_keep (a, b) SELECT x, y + 1 FROM fuzz_src WHERE z > 0"


@functools.cache
def _inputs() -> tuple[tuple[str, str], ...]:
    return tuple(mutants(COUNT))


@functools.cache
def _good_lines(dialect: str) -> frozenset[str]:
    result = extract_sql_lineage(GOOD, dialect)
    assert not result.problems
    return frozenset(relation_lines(end_to_end(result.lineage)))


@pytest.fixture(autouse=True)
def _quiet_sqlglot() -> None:
    """sqlglot warns on every statement it falls back on (thousands here)."""
    logging.getLogger("sqlglot").setLevel(logging.ERROR)


@pytest.mark.parametrize("part", range(4))
def test_no_exception_escapes_and_good_neighbours_keep_their_lineage(part: int) -> None:
    inputs = _inputs()[part::4]
    escaped: list[str] = []
    lost: list[str] = []
    for n, (dialect, sql) in enumerate(inputs):
        text = f"{GOOD};\n{sql}" if n % 2 else sql
        try:
            result = extract_sql_lineage(text, dialect, file="fuzz.sql")
        except Exception as e:  # what this test is about: collect them all, then fail with the list
            escaped.append(f"{dialect} {text[:80]!r}: {type(e).__name__}: {e}"[:300])
            continue
        assert ExtractionResult.model_validate_json(result.model_dump_json().encode("utf-8")) == result
        for p in result.problems:
            if p.statement_index is not None:
                assert (p.file, p.line is None, p.column is None) == ("fuzz.sql", False, False), p
        if n % 2 and not _good_lines(dialect) <= set(relation_lines(end_to_end(result.lineage))):
            lost.append(f"{dialect} {sql[:80]!r}")
    assert len(inputs) >= COUNT // 4
    assert not escaped, "\n".join(escaped[:20])
    assert not lost, "\n".join(lost[:20])
