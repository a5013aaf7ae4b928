"""Our lineage as OpenLineage run events: valid, deterministic, and read back into the same Atlas entities."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from atlas_stub import AtlasStub

from atlas_bridge import extract_sql_lineage
from atlas_bridge.atlas.client import AtlasClient
from atlas_bridge.atlas.convert import RunInfo, to_atlas_batches
from atlas_bridge.atlas.typedefs import register_typedefs
from atlas_bridge.model import Lineage, merge_lineage
from atlas_bridge.openlineage.read import read_events
from atlas_bridge.openlineage.schema import validate_event
from atlas_bridge.openlineage.write import lineage_to_events
from atlas_bridge.spark.plan import extract_spark_plan_lineage
from tests.golden import assert_golden

DATA = Path(__file__).parent / "data"
NS = "primary"
WHEN = "2026-11-27T10:00:00.000Z"
SQL_CASES = [
    "sql/hive_etl.sql",
    "sql/star_schema.sql",
    "sql/snowflake_views.sql",
    "sql/statements/postgres_update_from.sql",
    "sql/statements/bigquery_merge_insert.sql",
    "sql/statements/hive_paths.sql",
    "sql/statements/snowflake_swap_rename.sql",
]
SPARK_CASES = [
    "ctas",
    "create_view",
    "hive_insert_into",
    "read_csv_write_parquet",
    "window_case_union_insert",
    "hive_insert_overwrite_dir",
]
RELATIONS = ("inputs", "outputs", "columns", "table", "process", "columnLineages")


def sql_lineage(case: str) -> Lineage:
    return extract_sql_lineage((DATA / case).read_text(encoding="utf-8")).lineage


def spark_lineage(case: str) -> Lineage:
    """The lineage of every event of a recorded Spark job (what the hook sends, event by event)."""
    data = json.loads((DATA / "spark" / f"{case}.json").read_text(encoding="utf-8"))
    parts = [
        extract_spark_plan_lineage(
            e["analyzed"], e.get("py4j_identities"), event=e["callback"], func_name=e["funcName"]
        ).lineage
        for e in data["events"]
    ]
    return merge_lineage(parts)


def stored(bodies: list[dict[str, Any]]) -> dict[tuple[str, str], Any]:
    """What an Atlas (the stub) holds after the bodies are posted, by type and qualifiedName."""
    with AtlasStub() as stub:
        client = AtlasClient(stub.base_url, backoff=0)
        register_typedefs(client)
        for body in bodies:
            client.post_entities(body)
        out = {}
        for e in stub.active_entities():
            refs = {
                name: sorted(r["attributes"]["qualifiedName"] for r in stub.related(e["guid"], name))
                for name in RELATIONS
            }
            out[(e["typeName"], e["attributes"]["qualifiedName"])] = (e["attributes"], refs)
        assert stub.warnings == []
        return out


def over_the_wire(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for event in events:
        assert validate_event(event) == []
    return [json.loads(json.dumps(e)) for e in events]


CASES = [("sql", c) for c in SQL_CASES] + [("spark", c) for c in SPARK_CASES]


@pytest.mark.parametrize(("kind", "case"), CASES, ids=[c for _, c in CASES])
def test_sent_as_openlineage_and_read_back_is_what_atlas_gets_directly(kind: str, case: str) -> None:
    lineage = sql_lineage(case) if kind == "sql" else spark_lineage(case)
    run = RunInfo(
        run_id="app-1:5a1f:3", user="etl", start_ms=1795766400000, end_ms=1795766460000, status="SUCCESS"
    )
    direct = stored(to_atlas_batches(lineage, namespace=NS, run=run))
    events = over_the_wire(lineage_to_events(lineage, namespace=NS, event_time=WHEN, run=run))
    read = read_events(events)
    assert read.result.problems == ()
    back = stored(to_atlas_batches(read.result.lineage, namespace=NS, runs=read.runs))
    assert back == direct
    assert len(direct) > 0


def test_openlineage_read_in_goes_out_as_the_same_jobs_and_runs() -> None:
    """An OpenLineage job read in, written out again, is the same job, run and entities."""
    lines = (DATA / "openlineage" / "airflow_export_orders.json").read_text(encoding="utf-8")
    first = read_events(json.loads(lines))
    events = over_the_wire(
        lineage_to_events(first.result.lineage, namespace=NS, event_time=WHEN, runs=first.runs)
    )
    assert sorted({(e["job"]["namespace"], e["job"]["name"]) for e in events}) == [
        ("airflow-prod", "etl_orders.export_orders")
    ]
    assert sorted(e["run"]["runId"] for e in events) == sorted(
        r.run_id for rs in first.runs.values() for r in rs
    )
    again = read_events(events)
    assert stored(to_atlas_batches(again.result.lineage, namespace=NS, runs=again.runs)) == stored(
        to_atlas_batches(first.result.lineage, namespace=NS, runs=first.runs)
    )


def test_events_are_deterministic_and_golden(update_golden: bool) -> None:
    lineage = sql_lineage("sql/statements/postgres_update_from.sql")
    one = lineage_to_events(lineage, namespace=NS, event_time=WHEN)
    assert one == lineage_to_events(
        sql_lineage("sql/statements/postgres_update_from.sql"), namespace=NS, event_time=WHEN
    )
    assert_golden(one, "openlineage/out_postgres_update_from.json", update_golden)
    (event,) = one
    assert event["eventType"] == "COMPLETE"
    assert event["job"]["namespace"] == "atlas-bridge"
    assert event["job"]["name"] == "UPDATE:default.orders@primary->default.inventory@primary"
    facet = event["outputs"][0]["facets"]["columnLineage"]
    assert facet["fields"]["updated_by"] == {"inputFields": []}  # a literal: written from no dataset
    qty = {
        (f["name"], f["field"]): [t["type"] for t in f["transformations"]]
        for f in facet["fields"]["qty"]["inputFields"]
    }
    assert qty[("orders", "qty")] == qty[("inventory", "qty")] == ["DIRECT"]
    assert {f["field"] for f in facet["dataset"]} == {"item_id", "status"}  # the WHERE: all rows written
    assert event["job"]["facets"]["sql"]["query"].startswith("UPDATE inventory")
