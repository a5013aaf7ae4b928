"""Atlas's own web UI (``../shared/atlas-ui/webapp``, Apache Atlas's dashboardv2, built unchanged) in Debian's
chromium, against the Atlas stub behind a real HTTP server on 127.0.0.1: what a user sees (issue 32).

The example warehouse is scanned into the stub (the run's one Spark session), and a larger estate (TPC-DS
queries as CTAS statements) is pushed into another. For each Lineage tab opened, the nodes and edges drawn
must be exactly those of the lineage answer (``GET /v2/lineage/{guid}?depth=3&direction=BOTH``, the
request the UI makes), each label the name cut as the UI cuts it, no table's tab may show a column or a
column lineage, and the browser's console must stay free of errors (a missing icon is one). The Schema tab
must list a table's columns in their order, with their types.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import sqlglot
from atlas_stub.http import FaultServer
from atlas_stub.ui import copy_webapp, label_collisions, ui_label
from click.testing import CliRunner
from sqlglot import exp

from atlas_bridge.atlas.client import AtlasClient
from atlas_bridge.atlas.convert import TYPE_COLUMN, TYPE_COLUMN_LINEAGE, to_atlas_batches
from atlas_bridge.atlas.typedefs import register_typedefs

REPO = Path(__file__).resolve().parent.parent
WAREHOUSE = REPO / "examples" / "warehouse"
NS = "primary"
TIMEOUT_S = 30.0
ESTATE_STATEMENTS = 100


# -- the served UI ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def webapp(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of Atlas's built web UI with our icons installed the documented way."""
    from atlas_bridge.cli import cli

    source = shared_dir / "atlas-ui" / "webapp"
    if not (source / "index.html").is_file():
        pytest.skip(f"Atlas's built web UI is not at {source} (shared/atlas-ui beside the checkout)")
    copy = copy_webapp(source, tmp_path_factory.mktemp("atlas-ui") / "webapp")
    result = CliRunner().invoke(cli, ["icons", "install", "--webapp", str(copy)])
    assert result.exit_code == 0, result.output
    return copy


def _client(srv: FaultServer) -> AtlasClient:
    client = AtlasClient(srv.url, retries=0, backoff=0)
    register_typedefs(client)
    return client


@pytest.fixture(scope="module")
def warehouse(spark: Any, webapp: Path) -> Iterator[FaultServer]:
    """The example warehouse scanned into an Atlas stub that also serves the UI."""
    from atlas_bridge import bridge
    from atlas_bridge.atlas.sink import AtlasSink

    with FaultServer(webapp=webapp) as srv:
        delivery = bridge.SinkDelivery(AtlasSink(_client(srv), spool_dir=None), f"atlas:{srv.url}")
        summary = bridge.scan(
            [WAREHOUSE],
            delivery,
            namespace=NS,
            spark=spark,
            options=bridge.ScanOptions(schema=json.loads((WAREHOUSE / "schema.json").read_text())),
            resume=False,
        )
        assert summary.delivery.errors == []
        yield srv


def tpcds_ctas(bench: Path, statements: int) -> list[str]:
    """TPC-DS's queries as CTAS statements with distinct targets (``bench.q14_c00002``), in scripts of 100."""
    queries = [json.loads(x) for x in (bench / "tpcds_queries.jsonl").read_text().splitlines() if x.strip()]
    parts = [
        f"CREATE TABLE bench.{queries[n % len(queries)]['id'].replace('tpcds-', '')}_c{n // len(queries):05d}"
        f" AS\n{queries[n % len(queries)]['sql'].strip().rstrip(';')};"
        for n in range(statements)
    ]
    return ["\n".join(parts[i : i + 100]) for i in range(0, len(parts), 100)]


@pytest.fixture(scope="module")
def estate(shared_dir: Path, webapp: Path) -> Iterator[FaultServer]:
    """A larger estate: TPC-DS queries as CTAS statements, extracted with the TPC-DS schema and pushed."""
    from atlas_bridge.extractors.sql import extract_sql_lineage
    from atlas_bridge.model import merge_lineage

    bench = shared_dir / "bench"
    schema = json.loads((bench / "tpc-ds.schema.json").read_text())
    parts = [
        extract_sql_lineage(text, dialect="spark", schema=schema, file=f"tpcds_{i}.sql").lineage
        for i, text in enumerate(tpcds_ctas(bench, ESTATE_STATEMENTS))
    ]
    with FaultServer(webapp=webapp) as srv:
        client = _client(srv)
        for batch in to_atlas_batches(merge_lineage(parts), namespace="bench"):
            client.post_entities(batch)
        yield srv


# -- driving the UI -----------------------------------------------------------------------------------------


def _guid(srv: FaultServer, type_name: str, qualified_name: str) -> str:
    for guid in srv.stub._qn_index.get(qualified_name, ()):
        e = srv.stub.entities[guid]
        if e["status"] == "ACTIVE" and srv.stub._is_a(e["typeName"], type_name):
            return guid
    raise AssertionError(f"no {type_name} {qualified_name}")


def _wait(driver: Any, script: str, *args: Any) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, TIMEOUT_S, poll_frequency=0.1).until(
        lambda d: d.execute_script(script, *args)
    )


def open_entity(driver: Any, srv: FaultServer, guid: str, tab: str) -> None:
    """The entity's page on ``tab``: a full load when the browser is on another server, else a route change
    (the UI is a single page; reloading it fetches every script again)."""
    route = f"#!/detailPage/{guid}?tabActive={tab}"
    # what is drawn now is marked stale, so a wait below sees only what this page draws
    driver.execute_script(
        "document.querySelectorAll('g.node, table tbody tr').forEach(e => e.setAttribute('data-stale', '1'))"
    )
    if not driver.current_url.startswith(srv.url + "/"):
        driver.get(f"{srv.url}/index.html{route}")
    else:
        driver.execute_script("window.location.hash = arguments[0]", route)


def lineage_tab(driver: Any, srv: FaultServer, guid: str) -> dict[str, Any]:
    """Open ``guid``'s Lineage tab; what it draws (node id -> label, edges) and what the server answered."""
    open_entity(driver, srv, guid, "lineage")
    _wait(driver, "return document.querySelector(`g.node[id='${arguments[0]}']:not([data-stale])`)", guid)
    drawn = driver.execute_script(
        "return {nodes: Array.from(document.querySelectorAll('g.nodes > g.node'))"
        "          .map(e => [e.id, e.querySelector('g.label').textContent]),"
        "        edges: Array.from(document.querySelectorAll('g.edgePaths > g.edgePath'))"
        "          .map(e => [e.__data__.v, e.__data__.w])}"
    )
    answer = requests.get(
        f"{srv.url}/api/atlas/v2/lineage/{guid}", params={"depth": 3, "direction": "BOTH"}, timeout=10
    ).json()
    return {"nodes": dict(drawn["nodes"]), "edges": {tuple(e) for e in drawn["edges"]}, "answer": answer}


def console_errors(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def assert_tab_is_the_answer(tab: dict[str, Any]) -> None:
    """Exactly the answer's nodes and relations, each labelled with its name cut as the UI cuts it."""
    answer = tab["answer"]
    assert "relationsOnDemand" in answer  # without it the UI draws nothing
    assert set(tab["nodes"]) == set(answer["guidEntityMap"])
    assert tab["edges"] == {(r["fromEntityId"], r["toEntityId"]) for r in answer["relations"]}
    for guid, label in tab["nodes"].items():
        assert label == ui_label(answer["guidEntityMap"][guid]["displayText"]), guid


# -- the example warehouse ---------------------------------------------------------------------------------

TABLES = ["marts.fct_orders@primary", "staging.stg_orders@primary", "marts.customer_ltv@primary"]
VIEWS = ["reporting.v_daily_sales@primary"]
PATHS = ["hdfs://nameservice1/data/landing/orders@primary", "s3a://acme-exports/partner-portal/daily_sales"]
COLUMNS = ["marts.fct_orders.order_amount@primary", "reporting.v_daily_sales.revenue@primary"]


@pytest.mark.spark
def test_warehouse_lineage_tabs_draw_exactly_the_lineage_answer(browser: Any, warehouse: FaultServer) -> None:
    srv = warehouse
    processes = [
        "INSERT_OVERWRITE:staging.stg_order_items@primary,staging.stg_orders@primary->marts.fct_orders@primary"
    ]
    tabs = [
        *(("atlas_bridge_table", qn, True) for qn in TABLES + VIEWS),
        *(("atlas_bridge_path", qn, True) for qn in PATHS),
        *((TYPE_COLUMN, qn, False) for qn in COLUMNS),
        *(("atlas_bridge_process", qn, True) for qn in processes),
    ]
    console_errors(browser)  # what came before is not this test's
    drawn: dict[str, tuple[int, set[str]]] = {}
    for type_name, qn, table_level in tabs:
        guid = _guid(srv, type_name, qn)
        tab = lineage_tab(browser, srv, guid)
        assert_tab_is_the_answer(tab)
        types = {srv.stub.entities[g]["typeName"] for g in tab["nodes"]}
        drawn[qn] = (len(tab["nodes"]), types)
        if table_level:  # a table's (view's, path's, process's) tab: table-level lineage only
            assert not types & {TYPE_COLUMN, TYPE_COLUMN_LINEAGE}, qn
        else:  # a column's tab: columns and column lineage only, direct and indirect
            assert types == {TYPE_COLUMN, TYPE_COLUMN_LINEAGE}, qn
        assert console_errors(browser) == [], qn
    # the tabs are not trivial: fct_orders's shows its whole pipeline, from the landing paths to the exports
    count, types = drawn[TABLES[0]]
    assert count >= 15
    assert {"atlas_bridge_table", "atlas_bridge_path", "atlas_bridge_process"} <= types
    # our types' icons were served, none missing
    icons = [(p, s) for p, s in srv.static_log if p.startswith("/img/entity-icon/")]
    assert ("/img/entity-icon/atlas_bridge_table.png", 200) in icons
    assert ("/img/entity-icon/atlas_bridge_column_lineage.png", 200) in icons
    assert [p for p, s in icons if s != 200] == []


@pytest.mark.spark
def test_warehouse_names_tell_neighbours_apart_within_18_characters(warehouse: FaultServer) -> None:
    """On every Lineage tab of the warehouse (each dataset, column, process and column lineage), no two
    processes (or column lineages) read the same once cut to 18 characters."""
    found = label_collisions(warehouse.stub)
    assert found["process"] == found["column_lineage"] == 0, found


@pytest.mark.spark
def test_schema_tab_lists_columns_in_their_order_with_their_types(
    browser: Any, warehouse: FaultServer
) -> None:
    srv = warehouse
    script = (WAREHOUSE / "staging" / "01_external_tables.hql").read_text()
    ddl = next(
        s
        for s in sqlglot.parse(script, read="hive")
        if isinstance(s, exp.Create) and s.this.this.name == "stg_order_items"
    )
    declared = [
        (c.name, c.args["kind"].sql("hive")) for c in ddl.this.expressions if isinstance(c, exp.ColumnDef)
    ]
    guid = _guid(srv, "atlas_bridge_table", "staging.stg_order_items@primary")
    console_errors(browser)
    open_entity(browser, srv, guid, "schema")
    rows = _wait(
        browser,
        "const rows = Array.from(document.querySelectorAll("
        "  '#r_schemaTableLayoutView table tbody tr:not([data-stale])'))"
        "  .map(r => Array.from(r.querySelectorAll('td')).map(td => td.textContent.trim()));"
        "return rows.length >= arguments[0] ? rows : null",
        len(declared),
    )
    heads = browser.execute_script(
        "return Array.from(document.querySelectorAll('#r_schemaTableLayoutView table thead th'))"
        ".map(th => th.textContent.trim())"
    )
    name_at = next(i for i, h in enumerate(heads) if h.lower() == "name")
    type_at = next(i for i, h in enumerate(heads) if h.lower() == "type")
    shown = [(r[name_at], r[type_at]) for r in rows]
    assert [n for n, _ in shown] == [n for n, _ in declared]
    assert [t.replace(" ", "").upper() for _, t in shown] == [t.replace(" ", "").upper() for _, t in declared]
    assert console_errors(browser) == []


# -- a larger estate ---------------------------------------------------------------------------------------


def test_estate_lineage_tabs_draw_exactly_the_lineage_answer(browser: Any, estate: FaultServer) -> None:
    srv = estate
    console_errors(browser)
    base = _guid(srv, "atlas_bridge_table", "default.date_dim@bench")  # read by many statements
    target = _guid(srv, "atlas_bridge_table", "bench.q3_c00000@bench")
    column = _guid(srv, TYPE_COLUMN, "bench.q3_c00000.brand_id@bench")
    process = next(
        g
        for g, e in srv.stub.entities.items()
        if e["typeName"] == "atlas_bridge_process" and e["attributes"]["qualifiedName"].endswith(":CREATE")
    )
    for guid, table_level in ((target, True), (base, True), (column, False), (process, True)):
        tab = lineage_tab(browser, srv, guid)
        assert_tab_is_the_answer(tab)
        types = {srv.stub.entities[g]["typeName"] for g in tab["nodes"]}
        assert bool(types & {TYPE_COLUMN, TYPE_COLUMN_LINEAGE}) is not table_level, guid
        assert console_errors(browser) == [], guid
    assert [p for p, s in srv.static_log if s != 200] == []


# -- nested data (issue 31) ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nested_estate(webapp: Path) -> Iterator[FaultServer]:
    """JSON events read into structs and flattened, a struct built and written (nested_events.sql)."""
    from atlas_bridge.extractors.sql import extract_sql_lineage

    text = (REPO / "tests" / "data" / "sql" / "nested_events.sql").read_text(encoding="utf-8")
    lineage = extract_sql_lineage(text, dialect="spark").lineage
    with FaultServer(webapp=webapp) as srv:
        client = _client(srv)
        for batch in to_atlas_batches(lineage, namespace=NS):
            client.post_entities(batch)
        yield srv


def test_nested_field_lineage_tabs_draw_and_show_the_field_paths(
    browser: Any, nested_estate: FaultServer
) -> None:
    """A struct column's Lineage tab (and a flattened column's, and a built struct's) draws the column
    lineage between the column entities; the column lineage's Properties tab shows which field went where."""
    srv = nested_estate
    console_errors(browser)
    for qn in (
        "raw.events.widget@primary",
        "mart.widget_assets.asset_id@primary",
        "mart.customers_nested.address@primary",
    ):
        tab = lineage_tab(browser, srv, _guid(srv, TYPE_COLUMN, qn))
        assert_tab_is_the_answer(tab)
        assert {srv.stub.entities[g]["typeName"] for g in tab["nodes"]} == {
            TYPE_COLUMN,
            TYPE_COLUMN_LINEAGE,
        }, qn
        assert len(tab["nodes"]) >= 2, qn
        assert console_errors(browser) == [], qn
    lineage_qn = next(
        e["attributes"]["qualifiedName"]
        for e in srv.stub.entities.values()
        if e["typeName"] == TYPE_COLUMN_LINEAGE and e["attributes"]["name"].startswith("asset_id=")
    )
    open_entity(browser, srv, _guid(srv, TYPE_COLUMN_LINEAGE, lineage_qn), "properties")
    shown = _wait(
        browser,
        "const t = document.body.innerText; return t.includes(arguments[0]) ? t : null",
        "widget.asset.id -> asset_id",
    )
    assert "events.widget.asset.id" in shown  # the name
    assert console_errors(browser) == []
