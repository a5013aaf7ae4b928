"""Our lineage joins the entities other hooks made (issue: live with the Atlas that is already there).

The stub is preloaded with Atlas's own fs and hive models and a Hive-hook estate (tests/data/reuse/);
our lineage over ``sales.orders`` must hang off the Hive hook's table, never create a parallel one, and
never change it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from atlas_stub import AtlasStub

from atlas_bridge.atlas.client import AtlasClient
from atlas_bridge.atlas.convert import to_atlas_batches
from atlas_bridge.atlas.reuse import EntityReuse, parse_reuse_types, rewrite_batch
from atlas_bridge.atlas.sink import AtlasSink
from atlas_bridge.atlas.typedefs import register_typedefs
from atlas_bridge.errors import AtlasNotFoundError
from atlas_bridge.extractors.sql import extract_sql_lineage
from atlas_bridge.graph import end_to_end

DATA = Path(__file__).parent / "data"
NS = "primary"


def _estate(stub: AtlasStub, *, without: str | None = None) -> AtlasClient:
    """The stub with the Hive hook's estate; ``without``: the qualifiedName of an entity it lacks."""
    for model in ("1020-fs_model.json", "1030-hive_model.json"):
        stub.load_typedefs(json.loads((DATA / "atlas" / model).read_text(encoding="utf-8")))
    client = AtlasClient(stub.base_url, retries=0, backoff=0)
    estate = json.loads((DATA / "reuse" / "hive_estate.json").read_text(encoding="utf-8"))
    entities = [e for e in estate["entities"] if e["attributes"]["qualifiedName"] != without]
    client.post_entities({"entities": entities, "referredEntities": {}})
    register_typedefs(client)
    return client


def _batches(
    max_entities: int = 500, sql_file: str = "daily.sql", dialect: str = "hive"
) -> list[dict[str, Any]]:
    sql = (DATA / "reuse" / sql_file).read_text(encoding="utf-8")
    lineage = end_to_end(extract_sql_lineage(sql, dialect, file=sql_file).lineage)
    return to_atlas_batches(lineage, namespace=NS, max_entities=max_entities)


def _undelivered(stub: AtlasStub, batches: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(type, qualifiedName) of the batches' entities Atlas holds under neither our type nor another
    hook's (a reused or created hive_column / hive_table counts as delivered)."""
    held = {(e["attributes"]["qualifiedName"]) for e in stub.active_entities()}
    sent = [(e["typeName"], e["attributes"]["qualifiedName"]) for b in batches for e in b["entities"]]
    return [(t, qn) for t, qn in sent if qn not in held]


def test_rewrite_leaves_out_the_reused_entity_and_points_every_reference_at_it() -> None:
    batch = _batches()[0]
    before = copy.deepcopy(batch)
    out = rewrite_batch(batch, {"sales.orders@primary": "hive_table"})
    assert batch == before  # pure
    qns = {e["attributes"]["qualifiedName"] for e in out["entities"]}
    assert "sales.orders@primary" not in qns
    text = json.dumps(out)
    assert (
        '"typeName": "atlas_bridge_table", "uniqueAttributes": {"qualifiedName": "sales.orders@primary"}'
        not in text
    )
    process = next(e for e in out["entities"] if e["typeName"] == "atlas_bridge_process")
    assert {
        "typeName": "hive_table",
        "uniqueAttributes": {"qualifiedName": "sales.orders@primary"},
        "relationshipType": "dataset_process_inputs",
    } in process["relationshipAttributes"]["inputs"]
    # Our columns of the reused table, not found as hive_columns, become hive_columns under it (a
    # hive_table cannot own ours, and a column without its table is refused).
    col = next(
        e for e in out["entities"] if e["attributes"]["qualifiedName"] == "sales.orders.amount@primary"
    )
    assert col["typeName"] == "hive_column"
    assert col["relationshipAttributes"]["table"] == {
        "typeName": "hive_table",
        "uniqueAttributes": {"qualifiedName": "sales.orders@primary"},
        "relationshipType": "hive_table_columns",
    }
    refs = [
        ref
        for e in out["entities"]
        for value in e.get("relationshipAttributes", {}).values()
        for ref in (value if isinstance(value, list) else [value])
        if ref["uniqueAttributes"]["qualifiedName"] == "sales.orders.amount@primary"
    ]
    assert refs  # the column lineage's
    assert {r["typeName"] for r in refs} == {"hive_column"}


def test_switching_reuse_off_sends_our_own_types() -> None:
    assert parse_reuse_types("none") == {}
    reuse = EntityReuse(lambda t, q: pytest.fail("no lookup when off"), parse_reuse_types("none"))
    batch = _batches()[0]
    assert reuse.rewrite(batch) == batch


def test_our_lineage_hangs_off_the_hive_hooks_table_and_never_changes_it(atlas_stub: AtlasStub) -> None:
    client = _estate(atlas_stub)
    hive_table = atlas_stub.find("hive_table", "sales.orders@primary")
    assert hive_table is not None
    stored_before = copy.deepcopy(hive_table["attributes"])
    reuse = EntityReuse(client.get_entities_by_qualified_names)
    sink = AtlasSink(client, reuse=reuse)
    batches = _batches(max_entities=4)  # later batches refer to the reused table by name only
    assert len(batches) > 2
    for batch in batches:
        sink.emit(batch)
    # No parallel table, no parallel columns for what the Hive hook has.
    assert atlas_stub.find("atlas_bridge_table", "sales.orders@primary") is None
    assert atlas_stub.find("atlas_bridge_column", "sales.orders.amount@primary") is None
    assert atlas_stub.find("atlas_bridge_table", "marts.daily_orders@primary") is not None  # missing: ours
    # The Hive hook's entity is referenced, never updated.
    assert atlas_stub.find("hive_table", "sales.orders@primary")["attributes"] == stored_before
    # The table's Lineage tab shows the Hive hook's process and ours together.
    lineage = client.get_lineage(hive_table["guid"], direction="BOTH", depth=1)
    types = {e["typeName"] for e in lineage["guidEntityMap"].values()}
    assert {"hive_process", "atlas_bridge_process", "hdfs_path"} <= types
    # Column lineage starts at the Hive hook's column.
    hive_amount = atlas_stub.find("hive_column", "sales.orders.amount@primary")
    col_lineage = client.get_lineage(hive_amount["guid"], direction="OUTPUT", depth=1)
    assert any(e["typeName"] == "atlas_bridge_column_lineage" for e in col_lineage["guidEntityMap"].values())
    assert reuse.reused >= 3  # the table and its two columns
    assert reuse.lookups <= 8  # bulk and cached: a handful of requests, not one per entity


def test_the_stub_refuses_a_column_without_its_table(atlas_stub: AtlasStub) -> None:
    """What Atlas does (reference §9: the child end of a COMPOSITION is mandatory), for ours and Hive's."""
    client = _estate(atlas_stub)
    for type_name, extra in (("atlas_bridge_column", {}), ("hive_column", {"type": "int"})):
        column = {"qualifiedName": "sales.orders.x@primary", "name": "x", **extra}
        with pytest.raises(AtlasNotFoundError) as info:
            client.post_entities({"entities": [{"typeName": type_name, "guid": "-1", "attributes": column}]})
        assert info.value.status_code == 404
        assert info.value.error_code == "ATLAS-404-00-007"
        assert f"{type_name}.table: mandatory attribute value missing" in str(info.value)


@pytest.mark.parametrize(
    ("reuse_types", "max_entities"), [("default", 500), ("hive_table", 500), ("default", 3)]
)
def test_a_column_the_hive_estate_lacks_is_created_under_the_hive_table(
    atlas_stub: AtlasStub, reuse_types: str, max_entities: int
) -> None:
    """The SQL reads sales.orders.amount, which the Hive hook's estate has not got (yet): it was sent as
    our column without its table and Atlas refused the whole batch (404 ATLAS-404-00-007)."""
    client = _estate(atlas_stub, without="sales.orders.amount@primary")
    hive_table = atlas_stub.find("hive_table", "sales.orders@primary")
    order_id = atlas_stub.find("hive_column", "sales.orders.order_id@primary")
    assert hive_table is not None
    assert order_id is not None
    stored_before = copy.deepcopy((hive_table["attributes"], order_id["attributes"]))
    sink = AtlasSink(
        client, reuse=EntityReuse(client.get_entities_by_qualified_names, parse_reuse_types(reuse_types))
    )
    batches = _batches(max_entities=max_entities)
    for batch in batches:
        sink.emit(batch)
    assert _undelivered(atlas_stub, batches) == []
    amount = atlas_stub.find("hive_column", "sales.orders.amount@primary")
    assert amount is not None
    assert [t["guid"] for t in atlas_stub.related(amount["guid"], "table")] == [hive_table["guid"]]
    assert amount["attributes"]["name"] == "amount"
    # Nothing parallel to the Hive hook's entities; what it has is left as it was.
    assert not [
        e
        for e in atlas_stub.active_entities("atlas_bridge_column")
        if e["attributes"]["qualifiedName"].startswith("sales.")
    ]
    assert atlas_stub.find("atlas_bridge_table", "sales.orders@primary") is None
    assert (hive_table["attributes"], order_id["attributes"]) == stored_before
    # Column lineage starts at the created column.
    lineage = client.get_lineage(amount["guid"], direction="OUTPUT", depth=1)
    assert any(e["typeName"] == "atlas_bridge_column_lineage" for e in lineage["guidEntityMap"].values())


def test_a_path_whose_columns_are_read_stays_ours_when_the_estate_has_it_as_hdfs_path(
    atlas_stub: AtlasStub,
) -> None:
    """hdfs_path holds no columns: a column of it could hang off nothing, and the batch was refused."""
    client = _estate(atlas_stub)
    assert atlas_stub.find("hdfs_path", "hdfs://nn:8020/landing/orders@primary") is not None
    sink = AtlasSink(client, reuse=EntityReuse(client.get_entities_by_qualified_names))
    batches = _batches(max_entities=3, sql_file="landing.sql", dialect="sparksql")
    for batch in batches:
        sink.emit(batch)
    assert _undelivered(atlas_stub, batches) == []
    path = atlas_stub.find("atlas_bridge_path", "hdfs://nn:8020/landing/orders@primary")
    assert path is not None
    assert {c["attributes"]["name"] for c in atlas_stub.related(path["guid"], "columns")} == {
        "order_id",
        "amount",
    }
    process = next(iter(atlas_stub.active_entities("atlas_bridge_process")))
    assert [i["typeName"] for i in atlas_stub.related(process["guid"], "inputs")] == ["atlas_bridge_path"]


@pytest.mark.spark
def test_prune_takes_back_what_a_removed_statement_made_and_nothing_else(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from atlas_stub.http import FaultServer
    from click.testing import CliRunner

    from atlas_bridge.cli import cli

    estate = tmp_path / "warehouse"
    shutil.copytree(Path(__file__).resolve().parent.parent / "examples" / "warehouse", estate)
    out = tmp_path / "out"

    def scan(*extra: str) -> Any:
        result = CliRunner().invoke(cli, ["scan", str(estate), "--to", "atlas", "--out", str(out), *extra])
        return result, json.loads((out / "summary.json").read_text(encoding="utf-8"))

    def active(srv: FaultServer, type_name: str) -> set[str]:
        return {e["attributes"]["qualifiedName"] for e in srv.stub.active_entities(type_name)}

    with FaultServer() as srv:
        monkeypatch.setenv("ATLAS_BRIDGE_REST_ADDRESS", srv.url)
        first, _ = scan()
        assert first.exit_code == 0, first.output
        processes, tables = active(srv, "atlas_bridge_process"), active(srv, "atlas_bridge_path")
        export = {qn for qn in processes if "s3a://acme-exports/" in qn}
        assert export
        (estate / "exports" / "daily_sales_export.hql").unlink()  # the statement is gone from the estate

        dry, summary = scan("--prune-dry-run")
        assert dry.exit_code == 0, dry.output
        assert {f"would delete atlas_bridge_process {qn}" for qn in export} <= set(
            dry.output.splitlines()
        ) | {line.strip() for line in dry.output.splitlines()}
        assert active(srv, "atlas_bridge_process") == processes  # nothing deleted by a dry run

        (estate / "broken.sql").write_text("SELECT ((((a FROM broken;", encoding="utf-8")
        _, summary = scan("--prune", "--fail-on", "never")
        assert "not pruned" in summary["pruned"]["note"]
        assert active(srv, "atlas_bridge_process") == processes  # a run with errors prunes nothing
        (estate / "broken.sql").unlink()

        pruned, summary = scan("--prune")
        assert pruned.exit_code == 0, pruned.output
        assert active(srv, "atlas_bridge_process") == processes - export
        assert summary["pruned"]["entities"] >= len(export)
        # Datasets stay, whoever uses them; nothing of the remaining lineage was touched.
        assert active(srv, "atlas_bridge_path") == tables
        _, summary = scan("--prune")
        assert summary["pruned"] is None  # nothing left to take back
