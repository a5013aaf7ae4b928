"""What Atlas's web UI needs from the server and from our payloads, without a browser (issue 32): the stub's
UI answers over HTTP, the lineage answer's shape, column positions, the typedef update that brings them,
and the icons' install step."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import requests
from atlas_stub import AtlasStub
from atlas_stub.http import FaultServer
from click.testing import CliRunner

from atlas_bridge.atlas.client import AtlasClient
from atlas_bridge.atlas.convert import TYPE_COLUMN, to_atlas_batches
from atlas_bridge.atlas.icons import icon_names, install_icons
from atlas_bridge.atlas.typedefs import load_typedefs, register_typedefs
from atlas_bridge.errors import ConfigError
from atlas_bridge.extractors.sql import extract_sql_lineage
from atlas_bridge.model import merge_lineage

NS = "primary"
DDL = """CREATE TABLE sales.orders (id BIGINT, amount DECIMAL(10,2), day DATE, channel STRING);
CREATE VIEW rpt.daily AS SELECT day, channel, SUM(amount) AS revenue FROM sales.orders GROUP BY day, channel;
INSERT INTO sales.copy SELECT * FROM sales.orders;"""


def _push(client: AtlasClient, sql: str, schema: dict[str, Any] | None = None) -> None:
    result = extract_sql_lineage(sql, dialect="hive", schema=schema)
    assert result.ok, result.problems
    for batch in to_atlas_batches(result.lineage, namespace=NS):
        client.post_entities(batch)


def test_columns_carry_their_position_in_the_table() -> None:
    """DDL order, a view's select-list order, and a given schema's order; a table known by name only has
    none."""
    lineage = extract_sql_lineage(DDL, dialect="hive").lineage
    by_name = {d.name: {c.name: c.position for c in d.columns if not c.system} for d in lineage.datasets}
    assert by_name["orders"] == {"id": 0, "amount": 1, "day": 2, "channel": 3}
    assert by_name["daily"] == {"day": 0, "channel": 1, "revenue": 2}
    # INSERT into a table no DDL or schema describes: its columns' order is unknown
    assert set(by_name["copy"].values()) == {None}
    schema = {"s": {"t": {"b": "int", "a": "int"}}}
    read = extract_sql_lineage("INSERT INTO s.u SELECT a FROM s.t;", dialect="hive", schema=schema).lineage
    t = next(d for d in read.datasets if d.name == "t")
    assert {c.name: c.position for c in t.columns if not c.system} == {"a": 1}  # the schema's order
    unknown = next(d for d in read.datasets if d.name == "u")
    assert {c.position for c in unknown.columns if not c.system} == {None}
    # a part that knows the position fills it in for one that does not (merge keeps it)
    merged = merge_lineage(
        [read, extract_sql_lineage("CREATE TABLE s.t (b INT, a INT);", dialect="hive").lineage]
    )
    t = next(d for d in merged.datasets if d.name == "t")
    assert {c.name: c.position for c in t.columns if not c.system} == {"a": 1, "b": 0}


def _previous_release() -> dict[str, Any]:
    """Our typedefs as the release before issue 32 registered them: the column type without position."""
    old = copy.deepcopy(load_typedefs())
    column = next(d for d in old["entityDefs"] if d["name"] == TYPE_COLUMN)
    column["typeVersion"] = "1.0"
    column["attributeDefs"] = [a for a in column["attributeDefs"] if a["name"] != "position"]
    column["options"] = {"schemaAttributes": '["name", "type", "expression", "description", "owner"]'}
    return old


def test_an_atlas_holding_the_previous_column_type_takes_position_in_place(atlas_stub: AtlasStub) -> None:
    atlas_stub.load_typedefs(_previous_release())
    client = AtlasClient(atlas_stub.base_url, retries=0, backoff=0)
    plan = register_typedefs(client)
    assert plan.updated_names == (TYPE_COLUMN,)  # an added optional attribute: a PUT Atlas accepts
    column = atlas_stub.typedefs[TYPE_COLUMN]
    assert any(a["name"] == "position" and a["isOptional"] for a in column["attributeDefs"])
    assert "position" in json.loads(column["options"]["schemaAttributes"])
    assert column["options"]["displayTextAttribute"] == "displayName"
    _push(client, DDL)
    stored = {
        c["attributes"]["name"]: c["attributes"]
        for c in atlas_stub.active_entities(TYPE_COLUMN)
        if c["attributes"]["qualifiedName"].startswith("sales.orders.")
    }
    assert {n: a["position"] for n, a in stored.items()} == {"id": 0, "amount": 1, "day": 2, "channel": 3}
    assert stored["amount"]["displayName"] == "amount (orders)"


def test_lineage_answer_carries_what_atlas_always_sends(atlas_stub: AtlasStub) -> None:
    client = AtlasClient(atlas_stub.base_url, retries=0, backoff=0)
    register_typedefs(client)
    _push(client, DDL)
    answer = client.get_lineage_by_qualified_name(
        "atlas_bridge_table", f"sales.orders@{NS}", direction="BOTH"
    )
    assert answer["relationsOnDemand"] == {}
    assert {"baseEntityGuid", "lineageDirection", "lineageDepth", "guidEntityMap", "relations"} <= set(answer)
    for header in answer["guidEntityMap"].values():
        for key in ("classificationNames", "labels", "meaningNames", "meanings"):
            assert header[key] == [], key
        assert header["isIncomplete"] is False
    # a column's label (displayText) says whose column it is; its name stays the column's own
    col = client.get_lineage_by_qualified_name(TYPE_COLUMN, f"sales.orders.amount@{NS}", direction="BOTH")
    texts = {h["displayText"] for h in col["guidEntityMap"].values() if h["typeName"] == TYPE_COLUMN}
    assert {"amount (orders)", "revenue (daily)"} <= texts


def test_the_ui_endpoints_answer_over_http(tmp_path: Path) -> None:
    web = tmp_path / "webapp"
    (web / "img").mkdir(parents=True)
    (web / "index.html").write_text("<html>atlas</html>")
    (web / "img" / "x.png").write_bytes(b"\x89PNG")
    (tmp_path / "secret.txt").write_text("not served")
    with FaultServer(webapp=web) as srv:
        client = AtlasClient(srv.url, retries=0, backoff=0)
        register_typedefs(client)
        _push(client, DDL)
        api = f"{srv.url}/api/atlas"

        def get(path: str, **params: Any) -> Any:
            r = requests.get(api + path, params=params, timeout=10)
            assert r.status_code == 200, (path, r.status_code, r.text)
            return r.json()

        session = get("/admin/session")
        assert session["userName"]
        assert session["atlas.lineage.on.demand.enabled"] is False
        assert session["atlas.relationship.search.enabled"] is True
        assert get("/admin/version")["Version"]
        assert get("/admin/status") == {"Status": "ACTIVE"}
        assert get("/admin/metrics")["entity"]["entityActive"]["atlas_bridge_table"] == 3
        assert get("/admin/tasks") == get("/admin/audits") == []
        for kind, name in (
            ("entitydef", "_ALL_ENTITY_TYPES"),
            ("classificationdef", "_ALL_CLASSIFICATION_TYPES"),
        ):
            root = get(f"/v2/types/{kind}/name/{name}")
            assert root["name"] == name
            assert root["attributeDefs"]
        # every def carries the lists the UI reads without checking (a missing one broke the entity page)
        for d in get("/v2/types/typedefs")["entityDefs"]:
            assert isinstance(d["attributeDefs"], list), d["name"]
            assert isinstance(d["relationshipAttributeDefs"], list), d["name"]
        table = srv.stub._qn_index[f"sales.orders@{NS}"][0]
        assert get(f"/v2/entity/guid/{table}/header")["displayText"] == "orders"
        rows = get("/v2/search/relationship", guid=table, relation="columns", attributes=["type", "position"])
        assert sorted((r["attributes"]["name"], r["attributes"]["position"]) for r in rows["entities"]) == [
            ("amount", 1),
            ("channel", 3),
            ("day", 2),
            ("id", 0),
        ]
        assert rows["approximateCount"] == 4
        assert get("/v2/search/basic")["entities"] == []
        assert get("/v2/search/saved") == get("/v2/glossary") == get(f"/v2/entity/{table}/audit") == []
        # static files: the UI's, nothing outside its folder
        assert requests.get(f"{srv.url}/", timeout=10).text == "<html>atlas</html>"
        assert requests.get(f"{srv.url}/img/x.png", timeout=10).headers["Content-Type"] == "image/png"
        assert requests.get(f"{srv.url}/img/none.png", timeout=10).status_code == 404
        assert requests.get(f"{srv.url}/%2e%2e/secret.txt", timeout=10).status_code == 404
        assert ("/img/none.png", 404) in srv.static_log


def test_icons_install_into_a_webapp_folder(tmp_path: Path) -> None:
    from atlas_bridge.cli import cli

    (tmp_path / "index.html").write_text("")
    (tmp_path / "img" / "entity-icon").mkdir(parents=True)
    result = CliRunner().invoke(cli, ["icons", "install", "--webapp", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for type_name in ("table", "path", "column", "process", "column_lineage"):
        type_name = f"atlas_bridge_{type_name}"
        for sub in ("", "disabled/"):
            png = tmp_path / "img" / "entity-icon" / f"{sub}{type_name}.png"
            assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n"), png
    # every type we register has its icon
    ours = {d["name"] for d in load_typedefs()["entityDefs"]}
    assert {f"{t}.png" for t in ours} <= set(icon_names())
    with pytest.raises(ConfigError, match="not Atlas's web UI folder"):
        install_icons(tmp_path / "img")
    bad = CliRunner().invoke(cli, ["icons", "install", "--webapp", str(tmp_path / "img")])
    assert bad.exit_code == 1
    assert "not Atlas's web UI folder" in bad.output
