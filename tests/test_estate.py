"""One entity per name, Lineage tabs that stay readable (issue 16): checked through the stub's lineage API."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
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


def _view_state(stub: AtlasStub) -> tuple[list[str], set[str], set[str]]:
    """(processes writing the view, the view's ACTIVE columns, targets of ACTIVE column lineage)."""
    view = table_qualified_name("rpt", "v_daily", NS)
    (entity,) = [e for e in active(stub, "atlas_bridge_dataset") if qn(e) == view]
    processes = sorted(
        qn(p)
        for p in active(stub, "atlas_bridge_process")
        if entity["guid"] in {d["guid"] for d in stub.related(p["guid"], "outputs")}
    )
    columns = {qn(c) for c in stub.related(entity["guid"], "columns")}
    targets = {
        qn(o)
        for cl in active(stub, "atlas_bridge_column_lineage")
        for o in stub.related(cl["guid"], "outputs")
        if qn(o).startswith("rpt.v_daily.")
    }
    return processes, columns, targets


@pytest.mark.parametrize("max_entities", [500, 3])
def test_an_edited_statement_updates_its_own_process_and_drops_what_it_lost(
    atlas_stub: AtlasStub, client: AtlasClient, max_entities: int
) -> None:
    push(client, VIEW, max_entities=max_entities)
    first = _view_state(atlas_stub)
    push(client, VIEW_EDITED, max_entities=max_entities)
    edited = _view_state(atlas_stub)
    assert len(first[0]) == 1
    assert edited[0] == first[0]  # one process, updated in place
    cols = {f"rpt.v_daily.{c}@{NS}" for c in ("day", "revenue")}
    assert edited[1] == cols  # channel and orders left the Schema tab
    assert edited[2] == cols  # and their column lineage is gone
    assert_one_entity_per_name(atlas_stub)
    push(client, VIEW, max_entities=max_entities)  # the old text again: converges back
    assert _view_state(atlas_stub) == first
    assert_one_entity_per_name(atlas_stub)


def test_a_row_count_stays_off_the_tables_lineage_tab(atlas_stub: AtlasStub, client: AtlasClient) -> None:
    push(client, VIEW)  # COUNT(*) AS orders: the row set of sales.orders feeds a column
    assert_tables_show_table_processes_only(atlas_stub, client)
    orders = table_qualified_name("sales", "orders", NS)
    (count,) = [
        cl
        for cl in active(atlas_stub, "atlas_bridge_column_lineage")
        if qn(cl).endswith(":rpt.v_daily.orders:indirect")
    ]
    # the row-set dependency stays on the column lineage, as a property naming the table
    assert count["attributes"]["rowSources"] == [orders]
    assert orders not in {qn(i) for i in atlas_stub.related(count["guid"], "inputs")}


MERGE = """MERGE INTO marts.customer_ltv t
USING (SELECT customer_id, SUM(order_amount) AS total_amount FROM marts.fct_orders GROUP BY customer_id) s
ON t.customer_id = s.customer_id
WHEN MATCHED THEN UPDATE SET t.lifetime_value = s.total_amount
WHEN NOT MATCHED THEN INSERT (customer_id, lifetime_value) VALUES (s.customer_id, s.total_amount);"""
MERGE_SCHEMA = {
    "marts": {
        "customer_ltv": {"customer_id": "bigint", "lifetime_value": "decimal(16,2)"},
        "fct_orders": {"customer_id": "bigint", "order_amount": "decimal(16,2)"},
    }
}


def assert_no_cycles(stub: AtlasStub) -> None:
    """No column lineage (or process) has an input that is also its output."""
    for base in ("atlas_bridge_column_lineage", "atlas_bridge_process"):
        for p in active(stub, base):
            ins = {i["guid"] for i in stub.related(p["guid"], "inputs")}
            outs = {o["guid"] for o in stub.related(p["guid"], "outputs")}
            assert not ins & outs, qn(p)


def test_a_merge_key_is_no_input_of_itself(atlas_stub: AtlasStub, client: AtlasClient) -> None:
    result = extract_sql_lineage(MERGE, dialect="spark", schema=MERGE_SCHEMA)
    assert result.ok, result.problems
    for batch in to_atlas_batches(result.lineage, namespace=NS):
        client.post_entities(batch)
    assert_no_cycles(atlas_stub)
    key = f"marts.customer_ltv.customer_id@{NS}"
    lineage = tab(client, "atlas_bridge_column", key, depth=1)
    names = {h["attributes"]["qualifiedName"] for h in lineage["guidEntityMap"].values()}
    assert f"marts.fct_orders.customer_id@{NS}" in names  # its real source is still there


FLAG = """INSERT INTO marts.high_value_customers (customer_id, lifetime_value, flagged_on)
SELECT l.customer_id, l.lifetime_value, CAST(GETDATE() AS DATE)
FROM marts.customer_ltv l WHERE l.lifetime_value >= @threshold;"""


def test_a_filter_restricts_every_column_written_literals_too(
    atlas_stub: AtlasStub, client: AtlasClient
) -> None:
    result = extract_sql_lineage(FLAG, dialect="tsql", schema=MERGE_SCHEMA)
    assert result.ok, result.problems
    for batch in to_atlas_batches(result.lineage, namespace=NS):
        client.post_entities(batch)
    where = f"marts.customer_ltv.lifetime_value@{NS}"
    for column in ("customer_id", "lifetime_value", "flagged_on"):
        target = f"marts.high_value_customers.{column}@{NS}"
        lineage = client.get_lineage_by_qualified_name(
            "atlas_bridge_column", target, direction="INPUT", depth=1
        )
        heads = lineage["guidEntityMap"]
        indirect = {
            heads[r["fromEntityId"]]["attributes"]["qualifiedName"]
            for r in lineage["relations"]
            for cl in [heads[r["toEntityId"]]]
            if cl["typeName"] == "atlas_bridge_column_lineage"
            and cl["attributes"]["qualifiedName"].endswith(":indirect")
        }
        assert where in indirect, column


# -- the estate replayed in several orders (scan, the by-parts conversion, through the stub) --------------

WAREHOUSE = Path(__file__).resolve().parent.parent / "examples" / "warehouse"
EDITED_VIEW = Path(__file__).resolve().parent / "data" / "estate" / "daily_sales_edited.sql"


def _edited_warehouse(tmp_path: Path) -> Path:
    """The example warehouse with views/daily_sales.sql edited (the channel column dropped)."""
    root = tmp_path / "edited"
    shutil.copytree(WAREHOUSE, root)
    shutil.copyfile(EDITED_VIEW, root / "views" / "daily_sales.sql")
    return root


def _scan(session: object, stub: AtlasStub, paths: list[Path], exclude: tuple[str, ...] = ()) -> None:
    from atlas_bridge import bridge
    from atlas_bridge.atlas.sink import AtlasSink

    client = AtlasClient(stub.base_url, retries=0, backoff=0)
    register_typedefs(client)
    delivery = bridge.SinkDelivery(AtlasSink(client, spool_dir=None), f"atlas:{stub.base_url}")
    schema = json.loads((WAREHOUSE / "schema.json").read_text(encoding="utf-8"))
    summary = bridge.scan(
        paths,
        delivery,
        namespace=NS,
        spark=session,  # type: ignore[arg-type]
        options=bridge.ScanOptions(schema=schema),
        exclude=exclude,
        resume=False,
    )
    assert summary.delivery.errors == []


def snapshot(stub: AtlasStub) -> dict[str, Any]:
    """What a user sees: ACTIVE entities by (type, name), each process's and column lineage's ends, and
    each dataset's Schema tab."""
    ents = sorted((e["typeName"], qn(e)) for e in stub.active_entities())
    ends = sorted(
        (qn(p), end, qn(d))
        for base in ("atlas_bridge_process", "atlas_bridge_column_lineage")
        for p in active(stub, base)
        for end in ("inputs", "outputs")
        for d in stub.related(p["guid"], end)
    )
    schema = {
        qn(d): sorted(qn(c) for c in stub.related(d["guid"], "columns")) for d in active(stub, "DataSet")
    }
    return {"entities": ents, "ends": ends, "schema": schema}


def assert_no_orphans(stub: AtlasStub) -> None:
    """Every ACTIVE column belongs to an ACTIVE dataset; every process and column lineage has both ends."""
    for c in active(stub, "atlas_bridge_column"):
        assert [t["status"] for t in stub.related(c["guid"], "table")] == ["ACTIVE"], qn(c)
    for base in ("atlas_bridge_process", "atlas_bridge_column_lineage"):
        for p in active(stub, base):
            assert stub.related(p["guid"], "outputs"), qn(p)
            assert stub.related(p["guid"], "inputs"), qn(p)


def assert_column_graph_acyclic(stub: AtlasStub) -> None:
    graph: dict[str, set[str]] = {}
    for cl in active(stub, "atlas_bridge_column_lineage"):
        for i in stub.related(cl["guid"], "inputs"):
            graph.setdefault(i["guid"], set()).update(o["guid"] for o in stub.related(cl["guid"], "outputs"))
    state: dict[str, int] = {}  # 1 on the path, 2 done
    for start in sorted(graph):
        stack = [(start, iter(sorted(graph.get(start, ()))))]
        if state.get(start):
            continue
        state[start] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                continue
            assert state.get(nxt) != 1, f"cycle through {stub.entities[nxt]['attributes']['qualifiedName']}"
            if not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(sorted(graph.get(nxt, ())))))


def assert_estate_sound(stub: AtlasStub, client: AtlasClient) -> None:
    assert_one_entity_per_name(stub)
    assert_no_orphans(stub)
    assert_tables_show_table_processes_only(stub, client)
    assert_no_cycles(stub)
    assert_column_graph_acyclic(stub)


@pytest.mark.spark
def test_the_estate_in_any_order_is_the_estate(spark: object, tmp_path: Path) -> None:
    session = spark
    edited = _edited_warehouse(tmp_path)
    # without the query log and the export, which still read the view's channel column: a column some
    # statement of the estate reads stays on the Schema tab (the union of what the estate mentions)
    no_logs = ("logs/*", "exports/*")
    orders: dict[str, list[tuple[list[Path], tuple[str, ...]]]] = {
        # views read (query log, exports) before anything defines them, then the whole estate
        "partial then full": [([WAREHOUSE / "exports", WAREHOUSE / "logs"], ()), ([WAREHOUSE], ())],
        # a view edited (a column dropped), then the original text again
        "edited then original": [([edited], no_logs), ([WAREHOUSE], no_logs)],
        "original then edited": [([WAREHOUSE], no_logs), ([edited], no_logs)],
    }
    for name, steps in orders.items():
        with AtlasStub() as replayed:
            for paths, exclude in steps:
                _scan(session, replayed, paths, exclude)
            client = AtlasClient(replayed.base_url, retries=0, backoff=0)
            assert_estate_sound(replayed, client)
            got = snapshot(replayed)
        with AtlasStub() as fresh:  # the last step alone, into an empty Atlas
            _scan(session, fresh, *steps[-1])
            want = snapshot(fresh)
        assert got == want, name
    # the edit really dropped the column (and its lineage) from the Schema tab
    with AtlasStub() as stub:
        _scan(session, stub, [WAREHOUSE], no_logs)
        view = table_qualified_name("reporting", "v_daily_sales", NS)
        channel = f"reporting.v_daily_sales.channel@{NS}"
        assert channel in snapshot(stub)["schema"][view]
        _scan(session, stub, [edited], no_logs)
        assert channel not in snapshot(stub)["schema"][view]
        assert not [e for e in stub.active_entities() if channel.removesuffix(f"@{NS}") in qn(e)]
