"""Lineage from Spark event logs (the plan text of each SQL execution) equals the hook's for the same jobs.

``tests/data/spark_event_plans/<version>/events.jsonl`` holds the SQL execution events of real runs of
``make_jobs.py`` (PySpark 3.5.9 and 4.3.0, one shape per root execution, told by its job description
``shape:<name>``); ``hook.jsonl`` what the hook extracted from the same runs, in the compact form below.
"""

from __future__ import annotations

import json
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from atlas_bridge.model import PSEUDO_ROWS, Lineage
from atlas_bridge.spark.plan_text import SqlExecution, extract_root_execution, parse_formatted_plan

DATA = Path(__file__).parent / "data" / "spark_event_plans"
VERSIONS = sorted(p.name for p in DATA.iterdir() if (p / "events.jsonl").exists())
_START = "SparkListenerSQLExecutionStart"


@cache
def groups(version: str) -> dict[str, list[list[SqlExecution]]]:
    """shape -> its root executions, each with the executions nested in it (of every run's log)."""
    out: dict[str, list[list[SqlExecution]]] = defaultdict(list)
    for path in sorted((DATA / version).glob("events*.jsonl")):
        for shape, execs in _groups(path):
            out[shape].append(execs)
    return out


def _groups(path: Path) -> list[tuple[str, list[SqlExecution]]]:
    starts: dict[int, dict[str, Any]] = {}
    lines: dict[int, int] = {}
    adaptive: dict[int, list[dict[str, Any]]] = defaultdict(list)
    ends: dict[int, dict[str, Any]] = {}
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            event = json.loads(line)
            kind = event["Event"].rsplit(".", 1)[-1]
            xid = int(event["executionId"])
            if kind == _START:
                starts[xid], lines[xid] = event, n
            elif kind == "SparkListenerSQLExecutionEnd":
                ends[xid] = event
            else:
                adaptive[xid].append(event)
    by_root: dict[int, list[SqlExecution]] = defaultdict(list)
    for xid, start in starts.items():
        root = start.get("rootExecutionId")
        by_root[xid if root is None else int(root)].append(
            SqlExecution(xid, root, start, tuple(adaptive[xid]), ends.get(xid), lines[xid])
        )
    out = []
    for root in sorted(by_root):
        execs = by_root[root]
        desc = str(execs[0].start.get("description") or "")
        out.append((desc.removeprefix("shape:") if desc.startswith("shape:") else "setup", execs))
    return out


@cache
def hook(version: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in sorted((DATA / version).glob("hook*.jsonl")):
        with path.open(encoding="utf-8") as f:
            for line in f:
                entry = json.loads(line)
                out[entry.pop("shape")].append(entry)
    return out


def compact(lineage: Lineage) -> dict[str, Any]:
    """Entities, edges and their kinds: what must be the same whichever source saw the job."""
    return {
        "processes": sorted(p.type for p in lineage.processes),
        "datasets": sorted(d.id for d in lineage.datasets),
        "relations": sorted(
            [
                r.type.value,
                str(r.source),
                str(r.target),
                r.clause_type.value if r.clause_type else (r.effect.value if r.effect else ""),
            ]
            for r in lineage.relations
        ),
    }


def from_log(version: str, shape: str) -> list[tuple[dict[str, Any], list[str]]]:
    out = []
    for execs in groups(version)[shape]:
        res = extract_root_execution(execs)
        if res.lineage.processes:
            out.append((compact(res.lineage), [p.message for p in res.problems]))
    return out


_CUT = ("cut_text",)  # spark.sql.maxPlanStringLength: the text ends "... 924 more characters"
CASES = [(v, s) for v in VERSIONS for s in sorted(groups(v)) if s not in ("setup", "failed_write", *_CUT)]


@pytest.mark.parametrize(("version", "shape"), CASES)
def test_event_log_lineage_equals_the_hooks(version: str, shape: str) -> None:
    got = [c for c, _problems in from_log(version, shape)]
    expected = hook(version)[shape]
    assert expected, f"the hook saw no write for {shape}"
    assert sorted(got, key=json.dumps) == sorted(expected, key=json.dumps)
    assert all(not problems for _c, problems in from_log(version, shape))


@pytest.mark.parametrize("version", VERSIONS)
def test_a_failed_write_gives_nothing(version: str) -> None:
    (execs,) = groups(version)["failed_write"]
    assert any(x.failed for x in execs)  # the end event carries the error
    assert "failed_write" not in hook(version)
    res = extract_root_execution(execs)
    assert not res.lineage.processes
    assert not res.lineage.relations


@pytest.mark.parametrize("version", VERSIONS)
def test_an_execution_without_its_end_gives_nothing(version: str) -> None:
    (execs,) = groups(version)["insert_into"]
    cut = [
        SqlExecution(x.execution_id, x.root_execution_id, x.start, x.adaptive, None, x.line) for x in execs
    ]
    assert extract_root_execution(execs).lineage.processes
    assert not extract_root_execution(cut).lineage.processes


def table_pairs(relations: list[list[str]], datasets: list[str]) -> set[tuple[str, str]]:
    def ds(ref: str) -> str:
        return next(d for d in sorted(datasets, key=len, reverse=True) if ref.startswith(d + "."))

    return {(ds(r[1]), ds(r[2])) for r in relations if r[0] == "fdd"}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_cut_plan_text_keeps_table_level_lineage_and_invents_no_column_edge(version: str) -> None:
    ((got, problems),) = from_log(version, "cut_text")
    (expected,) = hook(version)["cut_text"]
    assert problems
    assert all("execution " in p and "node (" in p and "cut" in p for p in problems), problems
    assert all(
        r[1].endswith(f".{PSEUDO_ROWS}") and r[2].endswith(f".{PSEUDO_ROWS}") for r in got["relations"]
    )
    assert table_pairs(got["relations"], got["datasets"]) == table_pairs(
        expected["relations"], expected["datasets"]
    )
    assert got["processes"] == expected["processes"]


def _edited(execs: list[SqlExecution], edit: Any) -> list[SqlExecution]:
    out = []
    for x in execs:
        start = dict(x.start)
        start["physicalPlanDescription"] = edit(str(start["physicalPlanDescription"]))
        out.append(SqlExecution(x.execution_id, x.root_execution_id, start, x.adaptive, x.end, x.line))
    return out


def _renamed(execs: list[SqlExecution], old: str, new: str) -> list[SqlExecution]:
    return _edited(execs, lambda text: text.replace(old, new))


def _cut_list(text: str) -> str:
    """The Project's output cut as spark.sql.debug.maxToStringFields cuts lists."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Output [3]: [id#") and "AS amount_x2#" in line:
            lines[i] = line.split(", (amount")[0] + ", ... 2 more fields]"
    return "\n".join(lines)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_cut_list_keeps_table_level_lineage_and_invents_no_column_edge(version: str) -> None:
    (execs,) = groups(version)["insert_into"]
    cut = _edited(execs, _cut_list)
    assert [x.start["physicalPlanDescription"] for x in cut] != [
        x.start["physicalPlanDescription"] for x in execs
    ]
    res = extract_root_execution(cut)
    assert res.problems
    assert {p.kind for p in res.problems} == {"cut_plan"}
    xid = execs[0].execution_id
    assert all(f"execution {xid}" in p.message and ") Project" in p.message for p in res.problems)
    assert all("2 more fields" in p.message for p in res.problems)
    rels = res.lineage.relations
    assert {(r.source.dataset_id, r.source.column, r.target.dataset_id, r.target.column) for r in rels} == {
        ("table:default.src", PSEUDO_ROWS, "table:default.tgt", PSEUDO_ROWS)
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_an_unknown_node_keeps_table_level_lineage_and_invents_no_column_edge(version: str) -> None:
    (execs,) = groups(version)["insert_join_aggregate"]
    known = extract_root_execution(execs)
    assert any(r.target.column == "total" for r in known.lineage.relations)
    res = extract_root_execution(_renamed(execs, "HashAggregate", "FancyAggregate"))
    assert res.problems
    assert {p.kind for p in res.problems} == {"unknown_node"}
    root = min(x.execution_id for x in execs)
    assert all(f"execution {root}" in p.message and "FancyAggregate" in p.message for p in res.problems)
    rels = res.lineage.relations
    assert rels
    assert all(r.source.column == PSEUDO_ROWS and r.target.column == PSEUDO_ROWS for r in rels)
    assert {(r.source.dataset_id, r.target.dataset_id) for r in rels} == {
        ("table:default.src", "table:default.agg_ins"),
        ("table:default.customers", "table:default.agg_ins"),
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_the_same_log_gives_the_same_lineage(version: str) -> None:
    (execs,) = groups(version)["ctas_join_aggregate"]
    a = extract_root_execution(execs).lineage.model_dump_json()
    b = extract_root_execution(list(reversed(execs))).lineage.model_dump_json()
    assert a == b


def test_formatted_plan_tree_children_and_inner_nodes() -> None:
    text = (DATA / "formatted_ctas.txt").read_text(encoding="utf-8")
    plan = parse_formatted_plan(text)
    (root,) = plan.roots
    assert root.label == "Execute CreateDataSourceTableAsSelectCommand"
    (cmd,) = root.inner  # the command, printed deeper than a child
    assert not root.children
    (query,) = cmd.inner
    assert query.name == "Aggregate"
    assert [c.name for c in query.children] == ["Filter"]
    assert query.details["Arguments"].startswith("[country#")


def test_an_execution_without_plan_text_is_a_problem_not_an_error() -> None:
    start = {"executionId": 3, "rootExecutionId": 3, "description": "x"}
    res = extract_root_execution([SqlExecution(3, 3, start, (), {"executionId": 3}, 12)])
    assert not res.lineage.processes
    assert [p.message for p in res.problems] == ["execution 3 (line 12): no plan text to read"]
