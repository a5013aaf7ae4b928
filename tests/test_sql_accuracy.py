"""Accuracy cases (issue 12, "Statements that lose their lineage"): reviewed table- and column-level lineage.

Each line of tests/data/sql/accuracy/*.jsonl is one case: ``dialect``, ``sql``, the permanent datasets it
``reads`` and ``writes``, and its end-to-end column edges (``columns``: ``src.col -> fdd|fdr -> tgt.col``,
PseudoRows edges left out; a query's own resultset is named as the extractor names it, e.g. ``RS-1``; an end
may be a field below a column, ``t.widget.asset.id``, issue 31). Optional: ``features`` (tags
``benchmarks/accuracy.py`` reports by, e.g. ``explode``), ``flows`` (lines ``src.col -> v2 flow -> tgt.col``
that must be present, PseudoRows included), ``dataset_columns`` (a written dataset's columns, in order),
``schema`` (passed to the extractor), ``note`` (a judgement in words) and ``known_miss`` (why the extractor
is still wrong: the case keeps the correct expectation and is a strict xfail, so a fix shows up). Every other
case must match exactly; the score per group is printed so a failing run shows how far each group is.
``benchmarks/accuracy.py`` scores the same cases at table and column level.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from atlas_bridge import extract_sql_lineage
from atlas_bridge.graph import end_to_end
from atlas_bridge.model import PSEUDO_ROWS, Lineage, RelationType, Severity

DATA = Path(__file__).parent / "data" / "sql" / "accuracy"
_EDGES = (RelationType.FDD, RelationType.FDR, RelationType.ER)


def _load() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for path in sorted(DATA.glob("*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                case = json.loads(line)
                case["where"] = f"{path.name}:{n}"
                cases.append(case)
    return cases


CASES = _load()


def _observed(lineage: Lineage) -> dict[str, Any]:
    """Reads, writes, column edges and v2 flows, in the vocabulary of the case files (lower case)."""
    e2e = end_to_end(lineage)
    by_id = {d.id: d for d in e2e.datasets}
    reads: set[str] = set()
    writes = {d.qualified_name.lower() for d in lineage.datasets if d.kind.is_permanent and d.process_ids}
    columns: set[str] = set()
    flows: set[str] = set()
    for rel in e2e.relations:
        if rel.type not in _EDGES:
            continue
        src, tgt = by_id[rel.source.dataset_id], by_id[rel.target.dataset_id]
        if src.kind.is_permanent:
            reads.add(src.qualified_name.lower())
        if tgt.kind.is_permanent:
            writes.add(tgt.qualified_name.lower())
        left = f"{src.qualified_name}.{rel.source.path}".lower()
        right = f"{tgt.qualified_name}.{rel.target.path}".lower()
        flows.add(f"{left} -> {rel.flow.value if rel.flow else ''} -> {right}")
        if PSEUDO_ROWS not in (rel.source.column, rel.target.column):
            columns.add(f"{left} -> {rel.type.value} -> {right}")
    return {"reads": reads, "writes": writes, "columns": columns, "flows": flows, "lineage": lineage}


def _mismatches(case: dict[str, Any]) -> list[str]:
    result = extract_sql_lineage(case["sql"], case["dialect"], case.get("schema"))
    out = [f"error: {p}" for p in result.problems if p.severity is Severity.ERROR]
    got = _observed(result.lineage)
    for key in ("reads", "writes", "columns"):
        want = {x.lower() for x in case[key]}
        if got[key] != want:
            out.append(f"{key}: missing {sorted(want - got[key])}, unexpected {sorted(got[key] - want)}")
    missing = [f for f in case.get("flows", []) if f.lower() not in got["flows"]]
    if missing:
        out.append(f"flows missing {missing}; have {sorted(got['flows'])}")
    for name, cols in case.get("dataset_columns", {}).items():
        found = [d for d in got["lineage"].datasets if d.qualified_name.lower() == name.lower()]
        have = [c.name for c in found[0].columns if c.name != PSEUDO_ROWS] if found else None
        if have != cols:
            out.append(f"columns of {name}: {have}, expected {cols}")
    return out


def test_case_files_are_well_formed() -> None:
    """Every case names a group and a known dialect and has the three expectations; several dialects."""
    assert len(CASES) >= 300  # issue 12: at least 300 reviewed cases over at least 8 dialects
    assert len({c["dialect"] for c in CASES}) >= 8
    ids = Counter(c["id"] for c in CASES)
    assert [i for i, n in ids.items() if n > 1] == []
    for case in CASES:
        assert {"id", "group", "dialect", "sql", "reads", "writes", "columns"} <= set(case), case["where"]
        assert case.get("known_miss", "x").strip(), f"{case['where']}: known_miss must say why"
        features = case.get("features", [])
        assert isinstance(features, list), case["where"]
        assert all(isinstance(f, str) and f for f in features), case["where"]
    for group, dialects in _dialects_by_group().items():
        assert len(dialects) >= 3, f"group {group} in fewer than 3 dialects: {sorted(dialects)}"


def _dialects_by_group() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for case in CASES:
        out.setdefault(str(case["group"]), set()).add(case["dialect"])
    return out


def _param(case: dict[str, Any]) -> Any:
    marks = [pytest.mark.xfail(reason=case["known_miss"], strict=True)] if "known_miss" in case else []
    return pytest.param(case, id=case["id"], marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_accuracy_case(case: dict[str, Any]) -> None:
    assert _mismatches(case) == [], case["where"]


def test_scores_by_group(capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest) -> None:
    """Exact-match rate per group (printed with -v; -q stays quiet); every group at 100 % but its known
    misses, which still miss."""
    total: Counter[str] = Counter()
    exact: Counter[str] = Counter()
    known: Counter[str] = Counter()
    for case in CASES:
        group = str(case["group"])
        total[group] += 1
        hit = not _mismatches(case)
        exact[group] += hit
        known[group] += "known_miss" in case
        assert hit != ("known_miss" in case), case["where"]
    if request.config.get_verbosity() > 0:
        with capsys.disabled():
            for group in sorted(total):
                print(
                    f"\naccuracy group {group}: {exact[group]}/{total[group]} exact"
                    f" ({known[group]} known misses; goal: all)"
                )
    assert exact + known == total
