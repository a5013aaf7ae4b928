"""Lineage model -> Atlas bulk bodies: references, placeholders, no clobbering, batches, PseudoRows."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from atlas_stub import AtlasStub
from golden import assert_golden

from atlas_bridge import naming
from atlas_bridge.atlas import convert
from atlas_bridge.atlas.client import AtlasClient
from atlas_bridge.atlas.convert import RunInfo, to_atlas_batches, to_atlas_entities
from atlas_bridge.atlas.typedefs import CATEGORIES, load_typedefs, register_typedefs
from atlas_bridge.graph import table_level
from atlas_bridge.model import (
    PSEUDO_ROWS,
    Column,
    ColumnRef,
    Dataset,
    DatasetKind,
    Lineage,
    Process,
    Relation,
    dataset_id,
)
from atlas_bridge.naming import dataset_qualified_name

NS = "primary"
DATA = Path(__file__).parent / "data" / "atlas"
K = DatasetKind


# -- building lineages by hand --


def _table(name: str, db: str | None, columns: list[str], kind: K = K.TABLE, **kw: Any) -> Dataset:
    cols = [Column(name=c) for c in columns] + [Column(name=PSEUDO_ROWS, system=True)]
    return Dataset(id=dataset_id(kind, name, db), kind=kind, name=name, db=db, columns=cols, **kw)


def _rel(kind: str, src: tuple[Dataset, str], tgt: tuple[Dataset, str], pid: str, **kw: Any) -> Relation:
    return Relation(
        type=kind,  # type: ignore[arg-type]
        source=ColumnRef(dataset_id=src[0].id, column=src[1]),
        target=ColumnRef(dataset_id=tgt[0].id, column=tgt[1]),
        process_id=pid,
        **kw,
    )


def _proc(pid: str, name: str, sql: str, kind: str = "insert") -> Process:
    return Process(id=pid, type=kind, name=name, query_hash=pid.split(":")[1] * 4, sql=sql)


ORDERS = _table("orders", "sales", ["id", "amount", "status", "region"])


def insert_where() -> Lineage:
    """INSERT INTO mart.big_orders SELECT id, amount * 2 FROM sales.orders WHERE status = 'X'."""
    pid = "process:1111222233334444"
    rs = Dataset(
        id=f"resultset:{pid}/RS-1",
        kind=K.RESULTSET,
        name="RS-1",
        columns=[Column(name="id"), Column(name="amount"), Column(name=PSEUDO_ROWS, system=True)],
    )
    tgt = _table("big_orders", "mart", ["id", "amount"], process_ids=(pid,))
    proc = _proc(pid, "Insert into mart.big_orders", "INSERT INTO mart.big_orders SELECT id, amount * 2 ...")
    return Lineage(
        datasets=[ORDERS, rs, tgt],
        processes=[proc],
        relations=[
            _rel("fdd", (ORDERS, "id"), (rs, "id"), pid, transform="id", effect="EXACT_COPY"),
            _rel(
                "fdd", (ORDERS, "amount"), (rs, "amount"), pid, transform="amount * 2", effect="MODIFIED_COPY"
            ),
            _rel(
                "fdr",
                (ORDERS, "status"),
                (rs, PSEUDO_ROWS),
                pid,
                clause_type="where",
                transform="status = 'X'",
            ),
            _rel("fdd", (rs, "id"), (tgt, "id"), pid),
            _rel("fdd", (rs, "amount"), (tgt, "amount"), pid),
            _rel("fdr", (rs, PSEUDO_ROWS), (tgt, PSEUDO_ROWS), pid, clause_type="select"),
        ],
    )


def count_group_by() -> Lineage:
    """INSERT INTO mart.summary SELECT region, count(*) FROM sales.orders GROUP BY region."""
    pid = "process:5555666677778888"
    tgt = _table("summary", "mart", ["region", "n"], process_ids=(pid,))
    return Lineage(
        datasets=[ORDERS, tgt],
        processes=[
            _proc(pid, "Insert into mart.summary", "INSERT INTO mart.summary SELECT region, count(*) ...")
        ],
        relations=[
            _rel("fdd", (ORDERS, "region"), (tgt, "region"), pid, effect="EXACT_COPY"),
            _rel("fdr", (ORDERS, PSEUDO_ROWS), (tgt, "n"), pid, clause_type="select", transform="count(*)"),
            _rel("fdr", (ORDERS, "region"), (tgt, PSEUDO_ROWS), pid, clause_type="group by"),
            _rel("fdr", (ORDERS, PSEUDO_ROWS), (tgt, PSEUDO_ROWS), pid, clause_type="select"),
        ],
    )


def path_to_table_to_view() -> Lineage:
    """LOAD DATA INPATH 's3a://lake/raw/events/' INTO TABLE raw.events; CREATE VIEW raw.v AS SELECT ..."""
    load, view = "process:9999aaaabbbbcccc", "process:ddddeeeeffff0000"
    path = Dataset(
        id=dataset_id(K.PATH, "s3a://lake/raw/events/"),
        kind=K.PATH,
        name="s3a://lake/raw/events/",
        uri="s3a://lake/raw/events/",
        file_format="parquet",
        columns=[Column(name="User_Id", data_type="bigint"), Column(name="*")],
    )
    events = Dataset(
        id=dataset_id(K.TABLE, "events", "raw"),
        kind=K.TABLE,
        name="Events",
        db="raw",
        columns=[Column(name="user_id", data_type="bigint"), Column(name="*")],
        process_ids=(load,),
    )
    v = _table("v", "raw", ["user_id"], kind=K.VIEW, process_ids=(view,))
    return Lineage(
        datasets=[path, events, v],
        processes=[
            _proc(load, "Load data into raw.events", "LOAD DATA INPATH ...", kind="load_data"),
            _proc(
                view,
                "Create view raw.v",
                "CREATE VIEW raw.v AS SELECT user_id FROM raw.events",
                "create_view",
            ),
        ],
        relations=[
            _rel("fdd", (path, "User_Id"), (events, "user_id"), load),
            _rel("fdd", (path, "*"), (events, "*"), load),
            _rel("fdd", (events, "user_id"), (v, "user_id"), view, effect="EXACT_COPY"),
        ],
    )


CASES = {
    "insert_where": insert_where,
    "count_group_by": count_group_by,
    "path_to_view": path_to_table_to_view,
}
RUN = RunInfo(run_id="run-1", user="etl", start_ms=1_700_000_000_000, end_ms=1_700_000_005_000, host="edge1")


def _all_lineages() -> list[Lineage]:
    return [f() for f in CASES.values()]


# -- walking the output --


def _refs(entity: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for section in ("attributes", "relationshipAttributes"):
        for name, value in (entity.get(section) or {}).items():
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, dict) and "typeName" in v:
                    yield name, v


def _by_qn(entities: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["attributes"]["qualifiedName"]: e for e in entities}


def _names(refs: list[dict[str, Any]]) -> list[str]:
    return [r["uniqueAttributes"]["qualifiedName"] for r in refs]


def _inputs(entity: dict[str, Any]) -> list[str]:
    return _names(entity["relationshipAttributes"]["inputs"])


# -- unit cases --


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_reference_carries_its_relationship_type_and_matches_the_typedefs(case: str) -> None:
    typedefs = load_typedefs()
    entity_defs = {d["name"]: d for d in typedefs["entityDefs"]}
    ends: dict[str, dict[str, str]] = {}  # relationshipType -> {our end type: end name}
    for r in typedefs["relationshipDefs"]:
        ends[r["name"]] = {
            r["endDef1"]["type"]: r["endDef1"]["name"],
            r["endDef2"]["type"]: r["endDef2"]["name"],
        }
    ends["dataset_process_inputs"] = {"Process": "inputs"}
    ends["process_dataset_outputs"] = {"Process": "outputs"}

    def lineage_of(t: str) -> list[str]:
        d = entity_defs.get(t)
        return [t] if d is None else [t] + [a for s in d["superTypes"] for a in lineage_of(s)]

    entities = to_atlas_entities(CASES[case](), namespace=NS, run=RUN)
    assert entities
    n = 0
    for e in entities:
        assert e["typeName"] in entity_defs
        assert "relationshipAttributes" not in e["attributes"]
        for attr, ref in _refs(e):
            n += 1
            rt = ref["relationshipType"]
            assert rt in ends, (e["typeName"], attr, rt)
            names = {ends[rt][t] for t in lineage_of(e["typeName"]) if t in ends[rt]}
            assert names == {attr}, (e["typeName"], attr, rt)
            assert ref["uniqueAttributes"]["qualifiedName"]
            assert attr in e["relationshipAttributes"]  # references travel as relationship attributes
    assert n > 0


def test_placeholders_are_negative_unique_and_in_order() -> None:
    for lineage in _all_lineages():
        entities = to_atlas_entities(lineage, namespace=NS, run=RUN)
        assert [e["guid"] for e in entities] == [f"-{i}" for i in range(1, len(entities) + 1)]
        defined = {e["guid"]: (e["typeName"], e["attributes"]["qualifiedName"]) for e in entities}
        for e in entities:
            for _, ref in _refs(e):
                # One list: every reference is to an entity of the list, by its placeholder.
                assert defined[ref["guid"]] == (ref["typeName"], ref["uniqueAttributes"]["qualifiedName"])


def test_output_is_byte_stable_and_independent_of_input_order() -> None:
    for make in CASES.values():
        lineage = make()
        first = json.dumps(to_atlas_batches(lineage, namespace=NS, run=RUN), sort_keys=True)
        assert json.dumps(to_atlas_batches(make(), namespace=NS, run=RUN), sort_keys=True) == first
        rng = random.Random(7)
        shuffled = Lineage(
            datasets=rng.sample(lineage.datasets, len(lineage.datasets)),
            processes=rng.sample(lineage.processes, len(lineage.processes)),
            relations=rng.sample(lineage.relations, len(lineage.relations)),
        )
        assert json.dumps(to_atlas_batches(shuffled, namespace=NS, run=RUN), sort_keys=True) == first


def test_no_null_values_are_sent() -> None:
    for lineage in _all_lineages():
        for e in to_atlas_entities(lineage, namespace=NS):
            assert all(v is not None for v in e["attributes"].values()), e
            assert e["attributes"]["name"]


def test_only_defined_tables_carry_their_columns_and_columns_carry_their_table() -> None:
    entities = to_atlas_entities(insert_where(), namespace=NS)
    by_qn = _by_qn(entities)
    for e in entities:
        if e["typeName"] in (convert.TYPE_TABLE, convert.TYPE_VIEW, convert.TYPE_PATH):
            # INSERT ... SELECT neither defines its target nor its source: no columns array
            assert "columns" not in e["attributes"]
            assert "columns" not in e.get("relationshipAttributes", {})
        if e["typeName"] == convert.TYPE_COLUMN:
            table = e["relationshipAttributes"]["table"]
            assert table["relationshipType"] == convert.REL_COLUMNS
            owner = by_qn[table["uniqueAttributes"]["qualifiedName"]]
            assert owner["guid"] == table["guid"]
    # A view (CREATE VIEW defines its whole schema) lists its columns, so an edit drops the ones it lost.
    view = _by_qn(to_atlas_entities(path_to_table_to_view(), namespace=NS))["raw.v@primary"]
    assert _names(view["relationshipAttributes"]["columns"]) == ["raw.v.user_id@primary"]
    # A process lists its column lineage (complete for its statement), never its executions (one per run).
    for e in to_atlas_entities(insert_where(), namespace=NS, run=RUN):
        rels = e.get("relationshipAttributes", {})
        assert "processExecutions" not in rels
        if e["typeName"] == convert.TYPE_PROCESS:
            assert len(rels["columnLineages"]) == 4  # id, amount: direct and indirect (WHERE)


@pytest.mark.parametrize("max_bytes", [None, 1500])
@pytest.mark.parametrize("max_entities", [1, 2, 3, 5, 8, 500])
def test_batches_stand_alone_in_order(max_entities: int, max_bytes: int | None) -> None:
    for lineage in _all_lineages():
        whole = to_atlas_entities(lineage, namespace=NS, run=RUN)
        batches = to_atlas_batches(
            lineage, namespace=NS, run=RUN, max_entities=max_entities, max_bytes=max_bytes
        )
        assert all(set(b) == {"entities", "referredEntities"} for b in batches)
        assert all(0 < len(b["entities"]) <= max_entities for b in batches)
        flat = [e for b in batches for e in b["entities"]]
        firsts: list[dict[str, Any]] = []
        for e in flat:  # an owner too big for one body is sent again after its children, with their list
            if e["guid"] in {f["guid"] for f in firsts}:
                assert {"columns", "columnLineages"} & set(e["relationshipAttributes"])
                continue
            firsts.append(e)
        assert [(e["guid"], e["typeName"]) for e in firsts] == [(e["guid"], e["typeName"]) for e in whole]
        sent: set[tuple[str, str]] = set()
        for b in batches:
            here = {e["guid"]: (e["typeName"], e["attributes"]["qualifiedName"]) for e in b["entities"]}
            for e in b["entities"]:
                for _, ref in _refs(e):
                    key = (ref["typeName"], ref["uniqueAttributes"]["qualifiedName"])
                    if "guid" in ref:
                        assert ref["guid"].startswith("-")
                        assert here.get(ref["guid"]) == key, "a placeholder from another batch"
                    else:
                        assert key in sent, f"{key} is referenced before it is sent"
            sent |= set(here.values())
    if max_entities >= 100 and max_bytes is None:
        assert len(to_atlas_batches(insert_where(), namespace=NS, run=RUN, max_entities=max_entities)) == 1


def test_batch_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_entities"):
        to_atlas_batches(insert_where(), namespace=NS, max_entities=0)


def test_direct_and_indirect_column_lineage_are_told_apart() -> None:
    by_qn = _by_qn(to_atlas_entities(insert_where(), namespace=NS))
    pqn = "INSERT:sales.orders@primary->mart.big_orders@primary"
    direct = by_qn[f"{pqn}:mart.big_orders.amount:direct"]
    indirect = by_qn[f"{pqn}:mart.big_orders.amount:indirect"]
    assert direct["typeName"] == indirect["typeName"] == convert.TYPE_COLUMN_LINEAGE
    assert direct["attributes"]["dependencyType"] == "DIRECT"
    assert direct["attributes"]["expression"] == "amount * 2"  # the transform is kept (end to end)
    assert direct["attributes"]["effect"] == "MODIFIED_COPY"
    assert _inputs(direct) == ["sales.orders.amount@primary"]
    assert indirect["attributes"]["dependencyType"] == "INDIRECT"
    assert indirect["attributes"]["clauses"] == ["where"]
    assert indirect["attributes"]["expression"] == "status = 'X'"
    assert _inputs(indirect) == ["sales.orders.status@primary"]
    # the UI cuts labels to 18 characters: the kind ("=" direct, "~" indirect) comes right after the column
    assert direct["attributes"]["name"] == "amount=big_orders, from orders.amount"
    assert indirect["attributes"]["name"] == "amount~big_orders, filtered by where on orders.status"
    for cl in (direct, indirect):
        assert cl["relationshipAttributes"]["process"]["uniqueAttributes"]["qualifiedName"] == pqn
        assert [o["uniqueAttributes"]["qualifiedName"] for o in cl["relationshipAttributes"]["outputs"]] == [
            "mart.big_orders.amount@primary"
        ]


def test_pseudo_rows_is_never_a_column() -> None:
    for lineage in _all_lineages():
        entities = to_atlas_entities(lineage, namespace=NS, run=RUN)
        for e in entities:
            qn = e["attributes"]["qualifiedName"].lower()
            assert "pseudorows" not in qn
            assert "*" not in qn
            for _, ref in _refs(e):
                assert "pseudorows" not in ref["uniqueAttributes"]["qualifiedName"].lower()


def test_pseudo_rows_ends_become_tables_or_every_written_column() -> None:
    by_qn = _by_qn(to_atlas_entities(count_group_by(), namespace=NS))
    pqn = "INSERT:sales.orders@primary->mart.summary@primary"
    # COUNT(*): the row set of sales.orders feeds n: named in rowSources, not an input (the table's Lineage
    # tab shows table-level processes only).
    n = by_qn[f"{pqn}:mart.summary.n:indirect"]
    assert _inputs(n) == ["sales.orders.region@primary"]
    assert n["attributes"]["rowSources"] == ["sales.orders@primary"]
    assert n["attributes"]["clauses"] == ["group by", "select"]
    # GROUP BY region restricts the rows of summary: an indirect source of every column written.
    region = by_qn[f"{pqn}:mart.summary.region:indirect"]
    assert _inputs(region) == ["sales.orders.region@primary"]
    assert f"{pqn}:mart.summary.n:direct" not in by_qn
    # Row set -> row set is the table-level edge only.
    proc = by_qn[pqn]
    assert _inputs(proc) == ["sales.orders@primary"]
    assert len([e for e in by_qn.values() if e["typeName"] == convert.TYPE_COLUMN_LINEAGE]) == 3


def test_processes_follow_table_level_lineage() -> None:
    for lineage in _all_lineages():
        entities = to_atlas_entities(lineage, namespace=NS)
        got = set()
        for e in entities:
            if e["typeName"] == convert.TYPE_PROCESS:
                ra = e["relationshipAttributes"]
                for i in ra["inputs"]:
                    for o in ra["outputs"]:
                        got.add(
                            (i["uniqueAttributes"]["qualifiedName"], o["uniqueAttributes"]["qualifiedName"])
                        )
        tl = table_level(lineage)
        names = {d.id: d for d in tl.datasets}
        want = {
            (dataset_qualified_name(names[s], NS), dataset_qualified_name(names[t], NS))
            for s, _, t in tl.triples()
        }
        assert got == want


def test_only_permanent_datasets_and_real_columns_go_to_atlas() -> None:
    entities = to_atlas_entities(path_to_table_to_view(), namespace=NS)
    by_qn = _by_qn(entities)
    assert {e["typeName"] for e in entities} >= {convert.TYPE_PATH, convert.TYPE_TABLE}
    assert convert.TYPE_VIEW not in {e["typeName"] for e in entities}  # a view is a table (tableType)
    path = by_qn["s3a://lake/raw/events/"]
    assert path["typeName"] == convert.TYPE_PATH
    assert path["attributes"]["uri"] == "s3a://lake/raw/events/"
    assert path["attributes"]["fileFormat"] == "parquet"
    col = by_qn["s3a://lake/raw/events/#user_id"]
    assert col["attributes"]["type"] == "bigint"
    assert by_qn["raw.events@primary"]["attributes"]["name"] == "events"
    assert by_qn["raw.v@primary"]["typeName"] == convert.TYPE_TABLE
    assert by_qn["raw.v@primary"]["attributes"]["tableType"] == "VIRTUAL_VIEW"
    assert by_qn["raw.v@primary"]["attributes"]["viewOriginalText"].startswith("CREATE VIEW")
    assert not any(
        e["typeName"] == convert.TYPE_RESULTSET for e in to_atlas_entities(insert_where(), namespace=NS)
    )
    assert not any(
        "rs-1" in e["attributes"]["qualifiedName"].lower()
        for e in to_atlas_entities(insert_where(), namespace=NS)
    )


def test_a_table_also_seen_as_a_view_is_one_table_entity_typed_as_a_view() -> None:
    pid = "process:0000111122223333"
    as_table = _table("v", "s", ["a"])
    src = _table("t", "s", ["a"])
    lineage = Lineage(
        datasets=[src, as_table],
        processes=[_proc(pid, "Insert", "INSERT ...")],
        relations=[_rel("fdd", (src, "a"), (as_table, "a"), pid)],
    )
    # Two model objects that land on one qualifiedName (e.g. from two extractors): one entity, a view.
    clash = Dataset(
        id="table:s.v#2", kind=K.VIEW, name="v", db="s", columns=[Column(name="a")], process_ids=(pid,)
    )
    merged = Lineage(
        datasets=[*lineage.datasets, clash], processes=lineage.processes, relations=lineage.relations
    )
    entities = to_atlas_entities(merged, namespace=NS)
    named = [e for e in entities if e["attributes"]["qualifiedName"] == "s.v@primary"]
    assert [e["typeName"] for e in named] == [convert.TYPE_TABLE]
    assert named[0]["attributes"]["tableType"] == "VIRTUAL_VIEW"
    col = _by_qn(entities)["s.v.a@primary"]
    assert col["relationshipAttributes"]["table"]["typeName"] == convert.TYPE_TABLE


def test_executions_only_with_a_run() -> None:
    assert not any(
        e["typeName"] == convert.TYPE_PROCESS_EXECUTION
        for e in to_atlas_entities(insert_where(), namespace=NS)
    )
    entities = to_atlas_entities(path_to_table_to_view(), namespace=NS, run=RUN)
    execs = [e for e in entities if e["typeName"] == convert.TYPE_PROCESS_EXECUTION]
    procs = [e for e in entities if e["typeName"] == convert.TYPE_PROCESS]
    assert len(execs) == len(procs) == 2
    for e in execs:
        pqn = e["relationshipAttributes"]["process"]["uniqueAttributes"]["qualifiedName"]
        assert e["attributes"]["qualifiedName"] == f"{pqn}:run-1"
        assert e["attributes"]["startTime"] == RUN.start_ms
        assert e["attributes"]["userName"] == "etl"
        assert e["attributes"]["hostName"] == "edge1"
    # The process itself carries nothing of the run, so it is the same entity every run.
    again = to_atlas_entities(path_to_table_to_view(), namespace=NS, run=RunInfo(run_id="run-2"))
    assert [e for e in again if e["typeName"] == convert.TYPE_PROCESS] == procs


def test_empty_lineage_sends_nothing() -> None:
    assert to_atlas_entities(Lineage(), namespace=NS) == []
    assert to_atlas_batches(Lineage(), namespace=NS) == []


# -- goldens --


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_handbuilt(case: str, update_golden: bool) -> None:
    assert_golden(to_atlas_batches(CASES[case](), namespace=NS, run=RUN), f"atlas/{case}.json", update_golden)


def _sql_case(path: Path) -> tuple[str, str | None, str | None]:
    text = path.read_text(encoding="utf-8")
    meta = {}
    for line in text.splitlines():
        if not line.startswith("-- ") or ":" not in line:
            break
        key, _, value = line[3:].partition(":")
        meta[key.strip()] = value.strip()
    return text, meta.get("dialect"), meta.get("default_db")


SQL_CASES = sorted(DATA.glob("*.sql"))


@pytest.mark.parametrize("path", SQL_CASES, ids=lambda p: p.stem)
def test_golden_from_sql(path: Path, update_golden: bool) -> None:
    sql_mod = pytest.importorskip("atlas_bridge.extractors.sql")
    schema = json.loads((DATA / "schema.json").read_text(encoding="utf-8"))
    text, dialect, default_db = _sql_case(path)
    result = sql_mod.extract_sql_lineage(
        text, dialect=dialect, schema=schema, default_db=default_db, file=path.name
    )
    assert result.ok, result.problems
    assert_golden(to_atlas_batches(result.lineage, namespace=NS), f"atlas/{path.stem}.json", update_golden)


# -- against the Atlas stub --


def _stub_columns(stub: AtlasStub, table_qn: str) -> list[str]:
    table = stub.find(convert.TYPE_TABLE, table_qn)
    assert table is not None
    return sorted(c["attributes"]["qualifiedName"] for c in stub.related(table["guid"], "columns"))


def test_partial_read_keeps_the_other_columns(atlas_stub: AtlasStub) -> None:
    client = AtlasClient(atlas_stub.base_url, backoff=0)
    register_typedefs(client)
    # First a statement that writes all ten columns of s.wide.
    pid = "process:abcdabcdabcdabcd"
    names = [f"c{i}" for i in range(10)]
    src, wide = _table("src", "s", names), _table("wide", "s", names, process_ids=(pid,))
    copy_all = Lineage(
        datasets=[src, wide],
        processes=[_proc(pid, "Insert into s.wide", "INSERT INTO s.wide SELECT * FROM s.src")],
        relations=[_rel("fdd", (src, c), (wide, c), pid) for c in names],
    )
    for body in to_atlas_batches(copy_all, namespace=NS):
        client.post_entities(body)
    assert len(_stub_columns(atlas_stub, "s.wide@primary")) == 10
    # Now a statement that reads two of its columns.
    pid2 = "process:ffffeeeeddddcccc"
    narrow = _table("wide", "s", ["c1", "c2"])
    out = _table("two", "s", ["c1", "c2"], process_ids=(pid2,))
    read_two = Lineage(
        datasets=[narrow, out],
        processes=[_proc(pid2, "Insert into s.two", "INSERT INTO s.two SELECT c1, c2 FROM s.wide")],
        relations=[_rel("fdd", (narrow, c), (out, c), pid2) for c in ("c1", "c2")],
    )
    for body in to_atlas_batches(read_two, namespace=NS, max_entities=3):
        client.post_entities(body)
    assert len(_stub_columns(atlas_stub, "s.wide@primary")) == 10
    assert _stub_columns(atlas_stub, "s.two@primary") == ["s.two.c1@primary", "s.two.c2@primary"]


def test_push_twice_creates_nothing_new_and_lineage_shows_both_kinds(atlas_stub: AtlasStub) -> None:
    client = AtlasClient(atlas_stub.base_url, backoff=0)
    register_typedefs(client)
    for body in to_atlas_batches(insert_where(), namespace=NS, run=RUN, max_entities=4):
        client.post_entities(body)
    guids = {e["guid"] for e in atlas_stub.active_entities()}
    for body in to_atlas_batches(insert_where(), namespace=NS, run=RUN, max_entities=4):
        resp = client.post_entities(body)
        assert not resp.get("mutatedEntities", {}).get("CREATE")
    assert {e["guid"] for e in atlas_stub.active_entities()} == guids
    assert atlas_stub.warnings == []

    column = atlas_stub.find(convert.TYPE_COLUMN, "mart.big_orders.amount@primary")
    assert column is not None
    lineage = client.get_lineage(column["guid"], direction="INPUT", depth=3)
    names = {g: e["attributes"]["qualifiedName"] for g, e in lineage["guidEntityMap"].items()}
    edges = {(names[r["fromEntityId"]], names[r["toEntityId"]]) for r in lineage["relations"]}
    pqn = "INSERT:sales.orders@primary->mart.big_orders@primary"
    assert edges == {
        ("sales.orders.amount@primary", f"{pqn}:mart.big_orders.amount:direct"),
        (f"{pqn}:mart.big_orders.amount:direct", "mart.big_orders.amount@primary"),
        ("sales.orders.status@primary", f"{pqn}:mart.big_orders.amount:indirect"),
        (f"{pqn}:mart.big_orders.amount:indirect", "mart.big_orders.amount@primary"),
    }
    table = client.get_lineage_by_qualified_name(convert.TYPE_TABLE, "mart.big_orders@primary", depth=3)
    table_names = {e["attributes"]["qualifiedName"] for e in table["guidEntityMap"].values()}
    assert table_names == {"sales.orders@primary", pqn, "mart.big_orders@primary"}  # no column nodes


def test_typedef_categories_are_known() -> None:
    assert set(load_typedefs()) == set(CATEGORIES)


def test_the_same_statement_twice_is_one_process() -> None:
    src, tgt = _table("log_src", "s", ["a"]), _table("log", "s", ["a"])
    procs = [
        Process(id=pid, type="insert", name="Insert into s.log", query_hash="12" * 32, statement_index=i)
        for i, pid in enumerate(("process:1212121212121212", "process:1212121212121212#2"), start=1)
    ]
    lineage = Lineage(
        datasets=[src, tgt],
        processes=procs,
        relations=[_rel("fdd", (src, "a"), (tgt, "a"), p.id) for p in procs],
    )
    entities = to_atlas_entities(lineage, namespace=NS, run=RUN)
    kinds = [
        e["typeName"] for e in entities if e["typeName"] not in (convert.TYPE_TABLE, convert.TYPE_COLUMN)
    ]
    assert kinds == [convert.TYPE_PROCESS, convert.TYPE_COLUMN_LINEAGE, convert.TYPE_PROCESS_EXECUTION]
    qns = [e["attributes"]["qualifiedName"] for e in entities]
    assert len(qns) == len(set(qns))
    for p in procs:  # the converter's bulk naming agrees with naming.py's
        assert naming.process_qualified_name(p, lineage, NS) == "INSERT:s.log_src@primary->s.log@primary"


def test_resultsets_are_opt_in() -> None:
    pid = "process:4444333322221111"
    rs = Dataset(
        id=f"resultset:{pid}/RS-1",
        kind=K.RESULTSET,
        name="RS-1",
        sub_type="select_list",
        columns=[Column(name="total", expression="sum(amount)"), Column(name=PSEUDO_ROWS, system=True)],
    )
    lineage = Lineage(
        datasets=[ORDERS, rs],
        processes=[_proc(pid, "Select", "SELECT sum(amount) AS total FROM sales.orders", kind="select")],
        relations=[_rel("fdd", (ORDERS, "amount"), (rs, "total"), pid, effect="AGGREGATION")],
    )
    assert to_atlas_entities(lineage, namespace=NS) == []  # nothing permanent is written
    by_qn = _by_qn(to_atlas_entities(lineage, namespace=NS, include_resultsets=True))
    rs_qn = f"{pid}/RS-1@primary"
    assert by_qn[rs_qn]["typeName"] == convert.TYPE_RESULTSET
    assert by_qn[rs_qn]["attributes"]["resultsetType"] == "select_list"
    assert by_qn[f"{pid}/RS-1.total@primary"]["attributes"]["expression"] == "sum(amount)"
    proc = by_qn["4444333322221111@primary"]  # writes nothing permanent: named by its fingerprint
    assert _inputs(proc) == ["sales.orders@primary"]
    assert proc["relationshipAttributes"]["outputs"][0]["typeName"] == convert.TYPE_RESULTSET


def test_batches_can_be_bounded_in_bytes() -> None:
    lineage = path_to_table_to_view()
    whole = to_atlas_batches(lineage, namespace=NS, run=RUN)
    assert len(whole) == 1
    limit = 2000
    batches = to_atlas_batches(lineage, namespace=NS, run=RUN, max_bytes=limit)
    assert len(batches) > 2
    for b in batches:
        body = json.dumps(b["entities"], sort_keys=True)
        assert len(body) <= limit or len(b["entities"]) == 1
    sent = [e["guid"] for b in batches for e in b["entities"]]
    assert list(dict.fromkeys(sent)) == [e["guid"] for e in whole[0]["entities"]]  # owners may come twice


def test_shared_processes_send_the_union_of_a_runs_statements() -> None:
    """Statement by statement (the hook; a reader of event logs): a statement whose process an earlier
    statement of the run shares is sent with it (their union), within bounds; a CTAS stands alone."""
    from atlas_bridge import extract_sql_lineage

    def lin(sql: str) -> Lineage:
        return extract_sql_lineage(sql, "hive").lineage

    shared = convert.SharedProcesses(NS, members=2)
    upper = "INSERT INTO t SELECT id, upper(name) AS name FROM s"
    copy = "INSERT INTO t SELECT other AS id, name FROM s"
    assert shared.add(lin(upper)) == lin(upper)
    both = shared.add(lin(copy))
    assert {p.sql for p in both.processes} == {upper, copy}
    (proc,) = [e for e in to_atlas_entities(both, namespace=NS) if e["typeName"] == convert.TYPE_PROCESS]
    assert sorted(proc["attributes"]["queryText"].split(";\n")) == sorted([upper, copy])
    # bounded: a third statement starts again from itself
    third = "INSERT INTO t SELECT id, lower(name) AS name FROM s"
    assert {p.sql for p in shared.add(lin(third)).processes} == {third}
    # a statement that defines its output replaces it: alone, whatever came before
    ctas = "CREATE TABLE c AS SELECT id FROM s"
    shared.add(lin(ctas))
    assert {p.sql for p in shared.add(lin("CREATE TABLE c AS SELECT other AS id FROM s")).processes} == {
        "CREATE TABLE c AS SELECT other AS id FROM s"
    }
