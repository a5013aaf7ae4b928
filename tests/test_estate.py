"""One entity per name, Lineage tabs that stay readable (issue 16): checked through the stub's lineage API."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from atlas_stub import AtlasStub

from atlas_bridge.atlas.client import AtlasClient
from atlas_bridge.atlas.convert import to_atlas_batches
from atlas_bridge.atlas.typedefs import register_typedefs
from atlas_bridge.extractors.sql import extract_sql_lineage
from atlas_bridge.naming import table_qualified_name

NS = "estate"
SCHEMA = {"sales": {"orders": {"id": "int", "amount": "int", "day": "date", "channel": "string"}}}
VIEW = """CREATE VIEW rpt.v_daily AS
SELECT o.day, o.channel, SUM(o.amount) AS revenue, COUNT(*) AS orders
FROM sales.orders o GROUP BY o.day, o.channel;"""
VIEW_EDITED = """CREATE VIEW rpt.v_daily AS
SELECT o.day, SUM(o.amount) AS revenue
FROM sales.orders o GROUP BY o.day;"""
READ_VIEW = "INSERT INTO sandbox.daily_copy SELECT day, revenue FROM rpt.v_daily;"


@pytest.fixture
def client(atlas_stub: AtlasStub) -> AtlasClient:
    client = AtlasClient(atlas_stub.base_url, backoff=0, retries=0)
    register_typedefs(client)
    return client


def push(client: AtlasClient, sql: str, *, dialect: str = "hive", max_entities: int = 500) -> None:
    result = extract_sql_lineage(sql, dialect=dialect, schema=SCHEMA)
    assert result.ok, result.problems
    for batch in to_atlas_batches(result.lineage, namespace=NS, max_entities=max_entities):
        client.post_entities(batch)


def active(stub: AtlasStub, base: str) -> list[dict[str, Any]]:
    return [e for e in stub.active_entities() if stub._is_a(e["typeName"], base)]


def qn(e: dict[str, Any]) -> str:
    return str(e["attributes"]["qualifiedName"])


def assert_one_entity_per_name(stub: AtlasStub) -> None:
    """No qualifiedName is held by two ACTIVE entities of one family (datasets, columns, processes...)."""
    families = ("atlas_bridge_dataset", "atlas_bridge_column", "atlas_bridge_process",
                "atlas_bridge_column_lineage")  # fmt: skip
    for base in families:
        twice = {k: n for k, n in Counter(qn(e) for e in active(stub, base)).items() if n > 1}
        assert twice == {}, base


def tab(client: AtlasClient, type_name: str, qualified_name: str, depth: int = 0) -> dict[str, Any]:
    return client.get_lineage_by_qualified_name(type_name, qualified_name, direction="BOTH", depth=depth)


def assert_tables_show_table_processes_only(stub: AtlasStub, client: AtlasClient) -> None:
    for e in active(stub, "atlas_bridge_dataset"):
        lineage = tab(client, "atlas_bridge_dataset", qn(e))
        kinds = {h["typeName"] for h in lineage["guidEntityMap"].values()}
        assert "atlas_bridge_column_lineage" not in kinds, qn(e)
        assert "atlas_bridge_column" not in kinds, qn(e)


def test_a_view_read_before_it_is_defined_stays_one_entity(
    atlas_stub: AtlasStub, client: AtlasClient
) -> None:
    push(client, READ_VIEW)
    push(client, VIEW)
    push(client, READ_VIEW)
    assert_one_entity_per_name(atlas_stub)
    view = table_qualified_name("rpt", "v_daily", NS)
    (entity,) = [e for e in active(atlas_stub, "atlas_bridge_dataset") if qn(e) == view]
    assert entity["attributes"]["tableType"] == "VIRTUAL_VIEW"
    # the view's Lineage tab reaches both ends through the one entity
    lineage = tab(client, "atlas_bridge_table", view)
    names = {h["attributes"]["qualifiedName"] for h in lineage["guidEntityMap"].values()}
    ends = {table_qualified_name("sales", "orders", NS), table_qualified_name("sandbox", "daily_copy", NS)}
    assert ends <= names
