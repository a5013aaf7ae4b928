"""``atlas-bridge scan`` reads OpenLineage event files (JSON, JSON lines, one event per file or many)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from atlas_bridge import bridge
from atlas_bridge.atlas.convert import to_atlas_entities
from atlas_bridge.bridge import InputKind, ScanOptions
from atlas_bridge.bridge.extract import unit_results
from atlas_bridge.cli import cli
from atlas_bridge.openlineage.files import read_event_text, sniff_events
from atlas_bridge.openlineage.read import read_events

DATA = Path(__file__).parent / "data" / "openlineage"
SCAN = DATA / "scan"


def entity_map(entities: list[dict[str, Any]]) -> dict[tuple[str, str], Any]:
    """Entities by (type, qualifiedName), references by qualifiedName (guids differ between bodies)."""
    out: dict[tuple[str, str], Any] = {}
    for e in entities:
        refs = {}
        for name, value in (e.get("relationshipAttributes") or {}).items():
            items = value if isinstance(value, list) else [value]
            refs[name] = sorted(r["uniqueAttributes"]["qualifiedName"] for r in items)
        out[(e["typeName"], e["attributes"]["qualifiedName"])] = (e["attributes"], refs)
    return out


def direct(paths: list[Path]) -> dict[tuple[str, str], Any]:
    events = [item for p in paths for item in read_event_text(p.read_text(), p.name)[0]]
    read = read_events(events)
    return entity_map(to_atlas_entities(read.result.lineage, namespace="primary", runs=read.runs))


def test_event_files_are_told_by_content_whatever_their_suffix() -> None:
    files, notes = bridge.discover_inputs([SCAN])
    assert {Path(f.path).name: f.kind for f in files} == {
        "dbt-events.jsonl": InputKind.OPENLINEAGE,  # JSON lines (the file transport's append mode)
        "ol-20261127-090000.000000.json": InputKind.OPENLINEAGE,  # pretty-printed (its debug mode)
        "ol-20261127-090042.500000.json": InputKind.OPENLINEAGE,
    }
    assert notes == []
    # a query log in JSON lines stays a query log
    (log,) = bridge.discover_inputs([Path(__file__).parent / "data" / "scan" / "tree" / "logs" / "q.jsonl"])[
        0
    ]
    assert log.kind == InputKind.QUERY_LOG
    assert sniff_events(b'[{"eventTime": "2026-01-01T00:00:00Z", "producer": "p", "job": {}}]')
    head = (SCAN / "ol-20261127-090000.000000.json").read_bytes()[:300]  # cut short: no whole value
    assert sniff_events(head)
    assert not sniff_events(b'{"query": "select 1"}\n')


def test_all_event_files_are_one_unit_and_problems_name_file_and_line() -> None:
    files, _ = bridge.discover_inputs([SCAN])
    (unit,) = bridge.plan_units(files, ScanOptions())
    results = list(unit_results(unit, ScanOptions()))
    assert [r.file.rsplit("/", 1)[-1] for r in results] == [
        "dbt-events.jsonl",
        "ol-20261127-090000.000000.json",
        "ol-20261127-090042.500000.json",
    ]
    problems = [(p.file.rsplit("/", 1)[-1], p.line, p.message) for r in results for p in r.problems]  # type: ignore[union-attr]
    assert problems == [
        ("dbt-events.jsonl", 3, "event: not a valid OpenLineage event: run: 'runId' is a required property"),
        ("dbt-events.jsonl", 5, "not JSON: Expecting value"),
    ]
    assert [r.statements for r in results] == [7, 1, 1]
    # the run split over two files (START in one, COMPLETE in the other) is one process and one execution
    procs = {p.job_name for p in results[0].lineage.processes}
    assert "daily_orders.execute_insert_into_hive_table.sales_fct_orders" in procs
    (spark_runs,) = [runs for pid, runs in results[0].runs.items() if pid.endswith("sales_fct_orders")]
    assert [(r.status, r.start_ms is not None, r.end_ms is not None) for r in spark_runs] == [
        ("SUCCESS", True, True)
    ]


@pytest.mark.spark
def test_scan_of_event_files_sends_what_reading_them_gives(spark: object, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        [
            "scan",
            str(SCAN),
            str(DATA / "airflow_export_orders.json"),
            "--to",
            str(out),
            "--namespace",
            "primary",
        ],
    )
    assert result.exit_code == 1, result.output  # the two broken events are errors; the rest is sent
    summary = json.loads((out / "summary.json").read_text())
    assert summary["files"]["by_kind"] == {"openlineage": 4}
    sent = [e for f in sorted(out.glob("*-entities.json")) for e in json.loads(f.read_text())["entities"]]
    expected = direct([*sorted(SCAN.iterdir()), DATA / "airflow_export_orders.json"])
    assert entity_map(sent) == expected
    assert (
        "atlas_bridge_process_execution",
        "spark_prod:daily_orders.execute_insert_into_hive_table."
        "sales_fct_orders@primary:0195d1a8-7a3e-7c61-9a0e-1f2b3c4d5e6f",
    ) in expected
