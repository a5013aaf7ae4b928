"""Nested data in Spark (issue 31): the plan core gives the SQL extractor's field paths for the same query
(captured plans, no session), and real PySpark jobs on nested data reach Atlas with their field paths
(the run's one Spark session, the hook into the Atlas stub)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from atlas_stub import AtlasStub

from atlas_bridge import extract_sql_lineage
from atlas_bridge.atlas.client import AtlasClient
from atlas_bridge.atlas.sink import AtlasSink
from atlas_bridge.atlas.typedefs import register_typedefs
from atlas_bridge.config import Settings
from atlas_bridge.graph import end_to_end, relation_lines
from atlas_bridge.spark import SparkHookHandle, install, uninstall
from atlas_bridge.spark.plan import extract_spark_plan_lineage

DATA = Path(__file__).parent / "data" / "spark"
NS = "test"
EVENTS_SCHEMA = {
    "default": {
        "events": {
            "id": "INT",
            "widget": "STRUCT<name: STRING, asset: STRUCT<id: BIGINT, kind: STRING>>",
            "props": "MAP<STRING, STRING>",
            "items": "ARRAY<STRUCT<sku: STRING, qty: INT>>",
            "tags": "ARRAY<STRING>",
            "body": "STRING",
        }
    }
}
_CAPTURED = [
    {**event, "spark": doc["spark_version"]}
    for name in ("nested_queries.json", "nested_queries_spark35.json")  # Spark 4.3 and 3.5 plans
    for doc in [json.loads((DATA / name).read_text(encoding="utf-8"))]
    for event in doc["events"]
]


def _value_lines(lines: list[str]) -> set[str]:
    """The data-flow lines (fdd), PseudoRows left out: what a value is made of."""
    return {line for line in lines if " -> fdd -> " in line and "PseudoRows" not in line}


@pytest.mark.parametrize("event", _CAPTURED, ids=[f"{e['label']}-{e['spark']}" for e in _CAPTURED])
def test_the_plan_core_gives_the_sql_extractors_field_paths(event: dict[str, Any]) -> None:
    """Same query, same paths: Spark's analyzed plan (captured from Spark 4.3 and 3.5) and the SQL text."""
    plan = extract_spark_plan_lineage(event["analyzed"], event["py4j_identities"], resultsets=True)
    assert plan.ok, plan.problems
    sql = extract_sql_lineage(event["sql"], "spark", EVENTS_SCHEMA)
    assert sql.ok, sql.problems
    from_plan = _value_lines(relation_lines(plan.lineage))
    assert from_plan == _value_lines(relation_lines(end_to_end(sql.lineage)))
    assert from_plan, event["label"]


def test_the_plan_core_follows_fields_into_restrictions() -> None:
    """WHERE on a field restricts the rows by that field (as the SQL extractor reads it)."""
    event = next(e for e in _CAPTURED if e["label"] == "where_group_by_field")  # (Spark 4.3's)
    plan = extract_spark_plan_lineage(event["analyzed"], event["py4j_identities"], resultsets=True)
    lines = relation_lines(plan.lineage)
    assert "default.events.widget.asset.kind -> fdr -> RS-1.PseudoRows" in lines
    assert "default.events.widget.name -> fdr -> RS-1.n" in lines  # GROUP BY a field


# -- real jobs ----------------------------------------------------------------------------------------------


class _Hooked:
    def __init__(self, handle: SparkHookHandle, stub: AtlasStub, spark: Any) -> None:
        self.handle, self.stub, self.spark = handle, stub, spark

    def flush(self) -> None:
        assert self.handle.flush(timeout=60)

    def column_lineage(self, column_qn: str, dep: str = "DIRECT") -> dict[str, Any]:
        for ent in self.stub.active_entities("atlas_bridge_column_lineage"):
            attrs = ent["attributes"]
            if attrs["qualifiedName"].endswith(f":{column_qn}:{dep.lower()}"):
                return dict(attrs)
        names = sorted(
            e["attributes"]["qualifiedName"] for e in self.stub.active_entities("atlas_bridge_column_lineage")
        )
        raise AssertionError(f"no {dep} column lineage for {column_qn}; have {names}")


@pytest.fixture
def nested_hooked(spark: Any, atlas_stub: AtlasStub, tmp_path: Path) -> Iterator[_Hooked]:
    for table in ("nested_orders", "order_items", "order_skus", "people", "people_nested", "people_flat"):
        spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql("CREATE TABLE nested_orders (id INT, items ARRAY<STRUCT<sku: STRING, qty: INT>>) USING parquet")
    spark.sql("INSERT INTO nested_orders SELECT 1, array(named_struct('sku', 'a', 'qty', 2))")
    spark.sql("CREATE TABLE people (id INT, city STRING, zip STRING) USING parquet")
    spark.sql("INSERT INTO people VALUES (1, 'Berlin', '10115'), (2, 'Paris', '75001')")
    client = AtlasClient(atlas_stub.base_url, retries=0, backoff=0)
    register_typedefs(client)
    sink = AtlasSink(client, spool_dir=tmp_path / "spool")
    settings = Settings.load(namespace=NS, output_dir=tmp_path / "out")
    handle = install(spark, settings=settings, sink=sink, coalesce_s=600)
    yield _Hooked(handle, atlas_stub, spark)
    uninstall(spark)
    assert handle.stats.callback_errors == 0


@pytest.mark.spark
def test_json_read_into_structs_and_flattened_keeps_the_field_paths(
    nested_hooked: _Hooked, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    spark = nested_hooked.spark
    source = tmp_path / "events"
    source.mkdir()
    (source / "part-0.json").write_text(
        '{"id": 1, "widget": {"name": "w", "asset": {"id": 7, "kind": "image"}}}\n'
        '{"id": 2, "widget": {"name": "v", "asset": {"id": 8, "kind": "video"}}}\n',
        encoding="utf-8",
    )
    for table in ("widget_assets",):
        spark.sql(f"DROP TABLE IF EXISTS {table}")
    events = spark.read.json(str(source))
    events.select(
        F.col("id"), F.col("widget.asset.id").alias("asset_id"), F.col("widget.name").alias("widget_name")
    ).write.mode("overwrite").saveAsTable("widget_assets")
    nested_hooked.flush()
    asset = nested_hooked.column_lineage("default.widget_assets.asset_id")
    assert asset["fieldPaths"] == ["widget.asset.id -> asset_id"]
    assert "widget.asset.id" in asset["name"]
    name = nested_hooked.column_lineage("default.widget_assets.widget_name")
    assert name["fieldPaths"] == ["widget.name -> widget_name"]
    assert "fieldPaths" not in nested_hooked.column_lineage("default.widget_assets.id")


@pytest.mark.spark
def test_explode_in_sql_and_in_a_dataframe_gives_the_element_fields(nested_hooked: _Hooked) -> None:
    from pyspark.sql import functions as F

    spark = nested_hooked.spark
    spark.sql("CREATE TABLE order_items (id INT, sku STRING, qty INT) USING parquet")
    spark.sql(
        "INSERT INTO order_items SELECT id, item.sku, item.qty"
        " FROM nested_orders LATERAL VIEW explode(items) x AS item"
    )
    spark.table("nested_orders").select("id", F.explode("items").alias("item")).select(
        "id", F.col("item.sku").alias("sku")
    ).write.saveAsTable("order_skus")
    nested_hooked.flush()
    assert nested_hooked.column_lineage("default.order_items.sku")["fieldPaths"] == ["items.sku -> sku"]
    assert nested_hooked.column_lineage("default.order_items.qty")["fieldPaths"] == ["items.qty -> qty"]
    assert nested_hooked.column_lineage("default.order_skus.sku")["fieldPaths"] == ["items.sku -> sku"]


@pytest.mark.spark
def test_a_struct_built_and_written_then_flattened_into_a_table(nested_hooked: _Hooked) -> None:
    from pyspark.sql import functions as F

    spark = nested_hooked.spark
    spark.table("people").select("id", F.struct("city", "zip").alias("address")).write.saveAsTable(
        "people_nested"
    )
    spark.table("people_nested").select("id", "address.*").write.saveAsTable("people_flat")
    nested_hooked.flush()
    built = nested_hooked.column_lineage("default.people_nested.address")
    assert built["fieldPaths"] == ["city -> address.city", "zip -> address.zip"]
    assert nested_hooked.column_lineage("default.people_flat.city")["fieldPaths"] == ["address.city -> city"]
    assert nested_hooked.column_lineage("default.people_flat.zip")["fieldPaths"] == ["address.zip -> zip"]
