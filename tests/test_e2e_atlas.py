"""End to end: SQL -> lineage -> Atlas payloads -> the (strict) Atlas stub -> Atlas's lineage API."""

from __future__ import annotations

from typing import Any

import pytest
from atlas_stub import AtlasStub

from atlas_bridge.atlas.client import AtlasClient
from atlas_bridge.atlas.convert import to_atlas_batches
from atlas_bridge.atlas.sink import AtlasSink
from atlas_bridge.atlas.typedefs import register_typedefs
from atlas_bridge.extractors.sql import extract_sql_lineage
from atlas_bridge.naming import column_qualified_name, table_qualified_name

NS = "e2e"
SCHEMA = {
    "sales": {
        "orders": {"id": "int", "customer_id": "int", "amount": "decimal(10,2)", "status": "string"},
    }
}
SCRIPT = """
CREATE TABLE mart.big_orders AS
SELECT id, customer_id, amount FROM sales.orders WHERE status = 'paid';

INSERT INTO mart.customer_totals
SELECT customer_id, SUM(amount) AS total
FROM mart.big_orders
WHERE amount > 100
GROUP BY customer_id;

CREATE VIEW mart.v_top AS SELECT customer_id, total FROM mart.customer_totals;
"""
PARTIAL_READ = "INSERT INTO mart.ids SELECT id FROM sales.orders;"

TABLE_TYPES = ("atlas_bridge_table", "atlas_bridge_view")


@pytest.fixture
def client(atlas_stub: AtlasStub) -> AtlasClient:
    client = AtlasClient(atlas_stub.base_url, backoff=0)
    register_typedefs(client)
    return client


def _push(client: AtlasClient, sql: str, max_entities: int = 500) -> AtlasSink:
    result = extract_sql_lineage(sql, dialect="hive", schema=SCHEMA)
    assert result.ok, result.problems
    sink = AtlasSink(client)
    for batch in to_atlas_batches(result.lineage, namespace=NS, max_entities=max_entities):
        sink.emit(batch)
    sink.close()
    return sink


def _guid(client: AtlasClient, type_name: str, qualified_name: str) -> str:
    found = client.get_entity(type_name, qualified_name)
    assert found is not None, qualified_name
    return str(found["entity"]["guid"])


def _edges(lineage: dict[str, Any]) -> set[tuple[str, str]]:
    names = {g: h["attributes"]["qualifiedName"] for g, h in lineage["guidEntityMap"].items()}
    return {(names[r["fromEntityId"]], names[r["toEntityId"]]) for r in lineage["relations"]}


def _column_sources(client: AtlasClient, column_qn: str, depth: int = 1) -> dict[str, set[str]]:
    """dependencyType -> qualifiedNames of source columns, through the column's lineage processes."""
    lineage = client.get_lineage(
        _guid(client, "atlas_bridge_column", column_qn), direction="INPUT", depth=depth
    )
    headers = lineage["guidEntityMap"]
    out: dict[str, set[str]] = {}
    for rel in lineage["relations"]:
        process = headers[rel["toEntityId"]]
        if process["typeName"] != "atlas_bridge_column_lineage":
            continue
        source = headers[rel["fromEntityId"]]
        dep = client.get_entity_by_guid(process["guid"])["entity"]["attributes"]["dependencyType"]
        out.setdefault(dep, set()).add(source["attributes"]["qualifiedName"])
    return out


def test_sql_lineage_shows_in_atlas(atlas_stub: AtlasStub, client: AtlasClient) -> None:
    sink = _push(client, SCRIPT)
    assert sink.report.failed == 0
    assert atlas_stub.warnings == []  # every reference named its relationshipType

    orders = table_qualified_name("sales", "orders", NS)
    big = table_qualified_name("mart", "big_orders", NS)
    totals = table_qualified_name("mart", "customer_totals", NS)
    view = table_qualified_name("mart", "v_top", NS)

    # table level: source table -> process -> target (CTAS)
    lineage = client.get_lineage(_guid(client, "atlas_bridge_table", big), direction="INPUT", depth=3)
    edges = _edges(lineage)
    processes = {
        h["attributes"]["qualifiedName"]
        for h in lineage["guidEntityMap"].values()
        if h["typeName"] == "atlas_bridge_process"
    }
    assert len(processes) == 1
    (ctas,) = processes
    assert edges == {(orders, ctas), (ctas, big)}
    # no column-lineage node on a table's Lineage tab
    assert {h["typeName"] for h in lineage["guidEntityMap"].values()} == {
        "atlas_bridge_table",
        "atlas_bridge_process",
    }

    # through the INSERT ... SELECT and the view, up to the source
    up = client.get_lineage(_guid(client, "atlas_bridge_table", view), direction="INPUT", depth=0)
    upstream = {
        h["attributes"]["qualifiedName"] for h in up["guidEntityMap"].values() if h["typeName"] in TABLE_TYPES
    }
    assert upstream == {orders, big, totals, view}

    # column level: direct and indirect told apart
    total = column_qualified_name(totals, "total")
    sources = _column_sources(client, total)
    assert sources["DIRECT"] == {column_qualified_name(big, "amount")}
    assert column_qualified_name(big, "amount") in sources["INDIRECT"]  # WHERE amount > 100
    assert column_qualified_name(big, "customer_id") in sources["INDIRECT"]  # GROUP BY
    ctas_amount = _column_sources(client, column_qualified_name(big, "amount"))
    assert ctas_amount["DIRECT"] == {column_qualified_name(orders, "amount")}
    assert column_qualified_name(orders, "status") in ctas_amount["INDIRECT"]  # WHERE status = 'paid'
    # many hops: the view's column reaches the source table's column
    deep = _column_sources(client, column_qualified_name(view, "total"), depth=0)
    assert column_qualified_name(orders, "amount") in deep["DIRECT"]

    # the Schema tab lists only real columns
    for table_qn, type_name in ((big, "atlas_bridge_table"), (view, "atlas_bridge_table")):
        entity = client.get_entity(type_name, table_qn)
        assert entity is not None
        names = {c["displayText"] for c in entity["entity"]["relationshipAttributes"]["columns"]}
        assert names
        assert not any(n.lower() in ("pseudorows", "*") for n in names)


def test_pushing_again_creates_nothing_and_keeps_guids(atlas_stub: AtlasStub, client: AtlasClient) -> None:
    first = _push(client, SCRIPT)
    assert first.report.created > 0
    before = {
        (e["typeName"], e["attributes"]["qualifiedName"]): e["guid"] for e in atlas_stub.active_entities()
    }
    again = _push(client, SCRIPT)
    assert (again.report.created, again.report.updated, again.report.deleted) == (0, 0, 0)
    after = {
        (e["typeName"], e["attributes"]["qualifiedName"]): e["guid"] for e in atlas_stub.active_entities()
    }
    assert after == before
    # placeholders were mapped to the same guids as the first time
    assert set(again.report.guid_assignments.values()) <= set(before.values())


def test_small_batches_stand_alone(atlas_stub: AtlasStub, client: AtlasClient) -> None:
    """Batches of 3 entities still resolve: each refers back by unique attributes, never by foreign guid."""
    whole = _push(client, SCRIPT)
    entities = {(e["typeName"], e["attributes"]["qualifiedName"]) for e in atlas_stub.active_entities()}
    with AtlasStub("http://atlas2.test:21000", mock=atlas_stub.mock) as other:
        client2 = AtlasClient(other.base_url, backoff=0)
        register_typedefs(client2)
        sink = _push(client2, SCRIPT, max_entities=3)
        assert sink.report.batches > 3
        assert sink.report.created == whole.report.created
        assert {
            (e["typeName"], e["attributes"]["qualifiedName"]) for e in other.active_entities()
        } == entities


def test_partial_read_keeps_the_other_columns(atlas_stub: AtlasStub, client: AtlasClient) -> None:
    _push(client, SCRIPT)
    orders_guid = _guid(client, "atlas_bridge_table", table_qualified_name("sales", "orders", NS))
    before = {e["attributes"]["name"] for e in atlas_stub.related(orders_guid, "columns")}
    assert {"id", "customer_id", "amount", "status"} <= before
    sink = _push(client, PARTIAL_READ)  # reads one column of sales.orders
    assert sink.report.deleted == 0
    after = {e["attributes"]["name"] for e in atlas_stub.related(orders_guid, "columns")}
    assert after == before
    assert all(e["status"] == "ACTIVE" for e in atlas_stub.related(orders_guid, "columns"))


def test_statements_sharing_a_process_are_never_a_mix(atlas_stub: AtlasStub, client: AtlasClient) -> None:
    """Two statements with the same operation, inputs and output share one process (as in Hive). Atlas
    keeps what an upsert leaves out, so each upsert describes its statements whole: a later statement
    alone replaces the process (no expression or text left from the other), and statements converted
    together make one process holding their union, text and hash describing both."""
    import hashlib

    from atlas_bridge.model import query_hash

    upper = "INSERT INTO mart.names SELECT id, upper(status) AS status FROM sales.orders"
    copy = "INSERT INTO mart.names SELECT customer_id AS id, status FROM sales.orders"
    process = "INSERT:sales.orders@e2e->mart.names@e2e"

    def stored(qn: str, type_name: str = "atlas_bridge_column_lineage") -> dict[str, Any]:
        ent = atlas_stub.find(type_name, qn)
        assert ent is not None, qn
        return dict(ent["attributes"])

    _push(client, upper)
    _push(client, copy)
    attrs = stored(process, "atlas_bridge_process")
    assert (attrs["queryText"], attrs["queryHash"]) == (copy, query_hash(copy))
    direct = stored(f"{process}:mart.names.status:direct")
    assert (direct["effect"], direct["expression"]) == ("EXACT_COPY", "")  # not upper()'s expression

    _push(client, f"{upper};\n{copy};")
    attrs = stored(process, "atlas_bridge_process")
    assert attrs["queryText"].split(";\n") == [upper, copy]
    both = sorted((query_hash(upper), query_hash(copy)))
    assert attrs["queryHash"] == hashlib.sha256(",".join(both).encode()).hexdigest()
    direct = stored(f"{process}:mart.names.status:direct")
    assert (direct["effect"], direct["expression"]) == ("MODIFIED_COPY", "UPPER(status)")
    guid = _guid(
        client, "atlas_bridge_column", column_qualified_name(table_qualified_name("mart", "names", NS), "id")
    )
    lin = client.get_lineage(guid, direction="INPUT", depth=2)
    sources = {
        e["attributes"]["qualifiedName"]
        for e in lin["guidEntityMap"].values()
        if e["typeName"] == "atlas_bridge_column"
    }
    assert {f"sales.orders.id@{NS}", f"sales.orders.customer_id@{NS}"} <= sources  # both statements' edges


def _scan(client: AtlasClient, folder: Any, tmp: Any) -> None:
    """The scan's pipeline without Spark: units extracted and converted, folded by the driver's
    collector, delivered as its encoded bodies."""
    import json

    from atlas_bridge.bridge.deliver import AtlasDelivery, deliver
    from atlas_bridge.bridge.extract import extract_partition
    from atlas_bridge.bridge.inputs import discover_inputs, plan_units
    from atlas_bridge.bridge.merge import EntityCollector
    from atlas_bridge.bridge.schema import schema_index
    from atlas_bridge.bridge.types import ScanOptions

    options = ScanOptions(dialect="hive", schema=SCHEMA)
    files, _ = discover_inputs([folder])
    units = plan_units(files, options, ship_content=False)
    collector = EntityCollector(tmp / "spill")
    for tag, payload in extract_partition(units, options, NS, schema_index([], SCHEMA, None, [])):
        if tag == "unit":
            collector.add(json.loads(payload))
    batches = list(collector.batches(500))
    stats = deliver(batches, AtlasDelivery(client, "atlas:stub", tmp / "unsent"), None, total=len(batches))
    assert stats.errors == []


def test_a_scan_replaces_a_shared_process_whole(
    atlas_stub: AtlasStub, client: AtlasClient, tmp_path: Any
) -> None:
    """The scanner as the hook: a file whose two statements share a process sends their union; after an
    edit leaves one, the next scan's process and column lineage are that statement's whole."""
    upper = "INSERT INTO mart.names SELECT id, upper(status) AS status FROM sales.orders"
    copy = "INSERT INTO mart.names SELECT customer_id AS id, status FROM sales.orders"
    process = "INSERT:sales.orders@e2e->mart.names@e2e"
    estate = tmp_path / "estate"
    estate.mkdir()
    script = estate / "load.sql"
    script.write_text(f"{upper};\n{copy};\n", encoding="utf-8")
    _scan(client, estate, tmp_path / "scan1")
    direct = atlas_stub.find("atlas_bridge_column_lineage", f"{process}:mart.names.status:direct")
    assert direct is not None
    assert (direct["attributes"]["effect"], direct["attributes"]["expression"]) == (
        "MODIFIED_COPY",
        "UPPER(status)",
    )
    attrs = atlas_stub.find("atlas_bridge_process", process)["attributes"]  # type: ignore[index]
    assert attrs["queryText"].split(";\n") == [upper, copy]
    assert (attrs["sourceFile"], attrs["sourceLine"]) == ("load.sql", 1)  # below the scanned folder

    script.write_text(f"\n{copy};\n", encoding="utf-8")  # edited: the upper() statement is gone
    _scan(client, estate, tmp_path / "scan2")
    direct = atlas_stub.find("atlas_bridge_column_lineage", f"{process}:mart.names.status:direct")
    assert direct is not None
    assert (direct["attributes"]["effect"], direct["attributes"]["expression"]) == ("EXACT_COPY", "")
    attrs = atlas_stub.find("atlas_bridge_process", process)["attributes"]  # type: ignore[index]
    assert (attrs["queryText"], attrs["sourceLine"]) == (copy, 2)
