"""Our SQL extractor against SQLFlow's output for the same SQL (cases and reasons: sql_vs_sqlflow.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from atlas_bridge.graph import end_to_end, table_level
from atlas_bridge.model import Dataset, DatasetKind, Lineage, RelationType
from atlas_bridge.sqlflow.read import extract_sqlflow_lineage

extract_sql_lineage = pytest.importorskip("atlas_bridge.extractors.sql").extract_sql_lineage

DATA = Path(__file__).parent / "data" / "sqlflow"
CASES: list[dict[str, Any]] = json.loads((DATA / "sql_vs_sqlflow.json").read_text(encoding="utf-8"))["cases"]


def _name(ds: Dataset) -> str:
    if ds.kind is DatasetKind.PATH:
        return ds.uri or ds.name
    if not ds.kind.is_permanent:
        return f"<{ds.kind.value}>"
    return ".".join(p for p in (ds.catalog, ds.db, ds.name) if p).lower()


def _statement(lineage: Lineage, process_id: str | None) -> str:
    types = {p.id: p.type for p in lineage.processes}
    return types.get(process_id or "", "select")


def column_edges(lineage: Lineage, case: dict[str, Any]) -> set[str]:
    """End-to-end fdd/fdr edges as '<table>.<column> -<type>-> <table>.<column>'."""
    e2e = end_to_end(lineage)
    by_id = {d.id: d for d in e2e.datasets}
    types = set(case.get("compare_types", ["fdd", "fdr"]))
    statements = case.get("statements")
    out: set[str] = set()
    for r in e2e.relations:
        if r.type not in (RelationType.FDD, RelationType.FDR) or r.type.value not in types:
            continue
        source, target = by_id[r.source.dataset_id], by_id[r.target.dataset_id]
        if source.kind is DatasetKind.CONSTANT_TABLE:
            continue  # SQLFlow's /showConstant literals: we do not model constants as datasets
        if statements is not None and _statement(lineage, r.process_id) not in statements:
            continue
        src = f"{_name(source)}.{r.source.column.lower()}"
        out.add(f"{src} -{r.type.value}-> {_name(target)}.{r.target.column.lower()}")
    return out


def table_edges(lineage: Lineage, case: dict[str, Any]) -> set[str]:
    """Table-level edges as '<table> -> <statement kind> -> <table>'."""
    tl = table_level(lineage)
    names = {d.id: _name(d) for d in tl.datasets}
    statements = case.get("statements")
    return {
        f"{names[s]} -> {_statement(lineage, p)} -> {names[t]}"
        for s, p, t in tl.triples()
        if statements is None or _statement(lineage, p) in statements
    }


def table_pairs(lineage: Lineage, case: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e.split(" -> ")[0], e.split(" -> ")[2]) for e in table_edges(lineage, case)}


def ours(case: dict[str, Any]) -> Lineage:
    sql = (DATA / case["sql"]).read_text(encoding="utf-8")
    return extract_sql_lineage(sql, case["dialect"], file=case["sql"]).lineage


def sqlflow(case: dict[str, Any]) -> Lineage:
    files: list[str] = case["sqlflow"]
    data: str | bytes
    if len(files) == 1:
        data = (DATA / files[0]).read_bytes()
    elif files[0].endswith(".json"):  # several v2 edge excerpts of one page: one list of edges
        data = json.dumps([json.loads((DATA / f).read_text(encoding="utf-8")) for f in files])
    else:  # several XML excerpts of one SQLFlow run: one fragment
        data = "".join((DATA / f).read_text(encoding="utf-8") for f in files)
    return extract_sqlflow_lineage(data, file=files[0]).lineage


def _params() -> list[Any]:
    params = []
    for case in CASES:
        marks = []
        if case["status"] == "not_handled":
            marks.append(pytest.mark.xfail(reason=case["reason"], strict=True, raises=AssertionError))
        params.append(pytest.param(case, id=case["id"], marks=marks))
    return params


def test_cases_are_well_formed() -> None:
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids))
    for case in CASES:
        assert (DATA / case["sql"]).is_file()
        assert all((DATA / f).is_file() for f in case["sqlflow"])
        assert case["status"] in ("compare", "not_handled")
        if case["status"] == "not_handled":
            assert case["reason"]
        else:
            assert all(reason.strip() for reason in {**case["only_ours"], **case["only_sqlflow"]}.values())
            if "compare_types" in case:
                assert case["compare_types_reason"]


@pytest.mark.parametrize("case", [p for p in _params() if p.values[0]["status"] == "compare"])
def test_our_relations_match_sqlflow(case: dict[str, Any]) -> None:
    project = table_edges if case.get("level") == "table" else column_edges
    mine, theirs = project(ours(case), case), project(sqlflow(case), case)
    assert theirs, "SQLFlow states nothing here: the comparison would prove nothing"
    only_ours, only_sqlflow = mine - theirs, theirs - mine
    assert sorted(only_ours) == sorted(case["only_ours"]), "edges only we find, without a written reason"
    assert sorted(only_sqlflow) == sorted(case["only_sqlflow"]), "edges only SQLFlow finds, without a reason"


@pytest.mark.parametrize("case", [p for p in _params() if p.values[0]["status"] == "not_handled"])
def test_statements_not_handled_yet(case: dict[str, Any]) -> None:
    theirs = table_pairs(sqlflow(case), case)
    assert theirs, "SQLFlow states no table-to-table flow here: the case could never flip"
    missing = theirs - table_pairs(ours(case), case)
    assert not missing, f"table-level flows SQLFlow finds and we do not: {sorted(missing)}"
