"""Nested data (issue 31): field paths below columns in the model, the end-to-end collapse and the SQL
extractor. The scored cases are in tests/data/sql/accuracy/nested_31.jsonl; these test the parts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from atlas_bridge import extract_sql_lineage
from atlas_bridge.graph import end_to_end, relation_lines
from atlas_bridge.model import (
    Column,
    ColumnRef,
    Dataset,
    DatasetKind,
    Effect,
    Lineage,
    Relation,
    RelationType,
)


def _lines(sql: str, dialect: str, schema: dict[str, object] | None = None) -> list[str]:
    result = extract_sql_lineage(sql, dialect, schema)
    assert result.ok, result.problems
    return [line for line in relation_lines(end_to_end(result.lineage)) if "PseudoRows" not in line]


def test_a_field_shows_below_its_column_and_json_omits_an_absent_one() -> None:
    ref = ColumnRef(dataset_id="table:t", column="widget", field="asset.id")
    assert str(ref) == "table:t.widget.asset.id"
    assert ref.path == "widget.asset.id"
    assert ColumnRef(dataset_id="table:t", column="a").path == "a"
    plain = _two_tables(None)
    assert '"field"' not in plain.to_json()  # existing payloads keep their bytes
    with_field = _two_tables("asset.id")
    assert json.loads(with_field.to_json())["relations"][0]["source"]["field"] == "asset.id"
    assert Lineage.model_validate_json(with_field.to_json()) == with_field


def _two_tables(field: str | None) -> Lineage:
    t = Dataset(id="table:t", kind=DatasetKind.TABLE, name="t", columns=[Column(name="widget")])
    u = Dataset(id="table:u", kind=DatasetKind.TABLE, name="u", columns=[Column(name="asset_id")])
    rel = Relation(
        type=RelationType.FDD,
        source=ColumnRef(dataset_id="table:t", column="widget", field=field),
        target=ColumnRef(dataset_id="table:u", column="asset_id"),
    )
    return Lineage(datasets=[t, u], relations=[rel])


def test_two_fields_of_one_column_are_two_relations() -> None:
    t = Dataset(id="table:t", kind=DatasetKind.TABLE, name="t", columns=[Column(name="s")])
    u = Dataset(id="table:u", kind=DatasetKind.TABLE, name="u", columns=[Column(name="x")])
    rels = [
        Relation(
            type=RelationType.FDD,
            source=ColumnRef(dataset_id="table:t", column="s", field=f),
            target=ColumnRef(dataset_id="table:u", column="x"),
        )
        for f in ("b", "a", None)
    ]
    lin = Lineage(datasets=[t, u], relations=rels)
    assert [r.source.field for r in lin.relations] == [None, "a", "b"]


def _chain(first_target: str | None, second_source: str | None, effect: Effect | None) -> list[str]:
    """t.c -> RS.s (field first_target) -> u.x (reading field second_source of RS.s)."""
    t = Dataset(id="table:t", kind=DatasetKind.TABLE, name="t", columns=[Column(name="c")])
    rs = Dataset(id="resultset:p/RS-1", kind=DatasetKind.RESULTSET, name="RS-1", columns=[Column(name="s")])
    u = Dataset(id="table:u", kind=DatasetKind.TABLE, name="u", columns=[Column(name="x")])
    rels = [
        Relation(
            type=RelationType.FDD,
            source=ColumnRef(dataset_id="table:t", column="c"),
            target=ColumnRef(dataset_id=rs.id, column="s", field=first_target),
        ),
        Relation(
            type=RelationType.FDD,
            source=ColumnRef(dataset_id=rs.id, column="s", field=second_source),
            target=ColumnRef(dataset_id="table:u", column="x"),
            effect=effect,
        ),
    ]
    return relation_lines(end_to_end(Lineage(datasets=[t, rs, u], relations=rels)))


@pytest.mark.parametrize(
    ("written", "read", "effect", "expected"),
    [
        ("a", "a", None, ["t.c -> fdd -> u.x"]),
        ("a", "b", None, []),  # another field of the struct: no chain
        (None, "a.b", None, ["t.c.a.b -> fdd -> u.x"]),  # a deeper read makes the source deeper
        ("a", "a.b", None, ["t.c.b -> fdd -> u.x"]),
        ("a.b", None, Effect.EXACT_COPY, ["t.c -> fdd -> u.x.a.b"]),  # the whole copied: the target deeper
        ("a.b", "a", Effect.EXACT_COPY, ["t.c -> fdd -> u.x.b"]),
        ("a.b", None, Effect.MODIFIED_COPY, ["t.c -> fdd -> u.x"]),  # to_json(s): no field in the result
    ],
)
def test_end_to_end_matches_field_paths_hop_by_hop(
    written: str | None, read: str | None, effect: Effect | None, expected: list[str]
) -> None:
    assert _chain(written, read, effect) == expected


def test_a_struct_built_then_one_field_read_brings_only_that_field() -> None:
    sql = (
        "INSERT INTO s.t SELECT v.addr.city AS city, v.addr AS whole FROM "
        "(SELECT named_struct('city', c, 'zip', z) AS addr FROM s.u) v"
    )
    assert _lines(sql, "spark") == [
        "s.u.c -> fdd -> s.t.city",
        "s.u.c -> fdd -> s.t.whole.city",
        "s.u.z -> fdd -> s.t.whole.zip",
    ]


def test_a_table_alias_wins_over_a_struct_column_of_the_same_name() -> None:
    """``a.b``: ``a`` is a table in FROM, so ``b`` is its column (no field); ``a.b.c``: column b, field c."""
    sql = "INSERT INTO s.t SELECT a.b AS x, a.b.c AS y FROM s.src a"
    assert _lines(sql, "spark") == ["s.src.b -> fdd -> s.t.x", "s.src.b.c -> fdd -> s.t.y"]


def test_the_schema_tells_a_struct_field_from_a_table_alias_in_a_join() -> None:
    """Two tables, no qualifier that names one: the schema says which has the struct column."""
    schema = {"s": {"a": {"id": "INT", "info": "STRUCT<name: STRING>"}, "b": {"id": "INT", "x": "INT"}}}
    sql = "INSERT INTO s.t SELECT info.name AS name FROM s.a JOIN s.b ON a.id = b.id"
    assert [line for line in _lines(sql, "spark", schema) if "-> fdd ->" in line] == [
        "s.a.info.name -> fdd -> s.t.name"
    ]


def test_struct_star_without_a_schema_reads_the_whole_struct_and_says_so() -> None:
    result = extract_sql_lineage("INSERT INTO s.t SELECT addr.* FROM s.u", "spark")
    assert [p.message for p in result.problems] == [
        "addr.*: the fields of the struct are not known (give a schema)"
    ]
    assert relation_lines(end_to_end(result.lineage)) == ["s.u.addr -> fdd -> s.t.addr"]


def test_a_non_literal_index_reads_the_element_and_the_index_column() -> None:
    lines = _lines("INSERT INTO s.t SELECT items[i].sku AS sku FROM s.o", "spark")
    assert lines == ["s.o.i -> fdd -> s.t.sku", "s.o.items.sku -> fdd -> s.t.sku"]


def test_nested_extraction_is_canonical_and_deterministic() -> None:
    sql = (
        "INSERT INTO s.t SELECT o.id, i.sku, named_struct('a', o.x.y) AS s FROM s.orders o "
        "LATERAL VIEW explode(o.items) v AS i"
    )
    first = extract_sql_lineage(sql, "spark").lineage
    assert Lineage.model_validate_json(first.to_json()) == first
    assert extract_sql_lineage(sql, "spark").lineage.to_json() == first.to_json()
    e2e = end_to_end(first)
    assert Lineage.model_validate_json(e2e.to_json()) == e2e
    for rel in first.relations:
        assert Relation.model_validate(rel.model_dump(exclude={"flow"})) == rel


# -- where a user sees the field: Atlas, SQLFlow ------------------------------------------------------------

_FLATTEN = (
    "INSERT INTO mart.assets SELECT e.widget.asset.id AS asset_id, e.id FROM raw.events e;\n"
    "CREATE TABLE mart.c AS SELECT named_struct('city', city, 'zip', zip) AS address FROM raw.customers"
)


def _column_lineage(entities: list[dict[str, Any]], name_start: str) -> dict[str, Any]:
    found = [
        e["attributes"]
        for e in entities
        if e["typeName"] == "atlas_bridge_column_lineage" and e["attributes"]["name"].startswith(name_start)
    ]
    assert len(found) == 1, [e["attributes"]["name"] for e in entities]
    return found[0]


def test_atlas_column_lineage_names_the_field_and_lists_the_paths() -> None:
    """The column entities stay columns (widget), the column lineage shows which field went where."""
    from atlas_bridge.atlas.convert import to_atlas_entities

    lineage = extract_sql_lineage(_FLATTEN, "spark").lineage
    entities = to_atlas_entities(lineage, namespace="primary")
    asset = _column_lineage(entities, "asset_id=")
    assert asset["name"] == "asset_id=assets, from events.widget.asset.id"
    assert asset["fieldPaths"] == ["widget.asset.id -> asset_id"]
    address = _column_lineage(entities, "address=")
    assert address["fieldPaths"] == ["city -> address.city", "zip -> address.zip"]
    plain = _column_lineage(entities, "id=")
    assert "fieldPaths" not in plain  # no field: the payload is as before (and older typedefs take it)
    columns = {e["attributes"]["qualifiedName"] for e in entities if e["typeName"] == "atlas_bridge_column"}
    assert "raw.events.widget@primary" in columns
    assert not any("asset" in qn for qn in columns if qn.startswith("raw."))


def test_sqlflow_output_names_the_field_path_and_reads_it_back() -> None:
    from atlas_bridge.sqlflow import extract_sqlflow_lineage, to_sqlflow_json, to_sqlflow_xml

    def read(text: str) -> Lineage:
        result = extract_sqlflow_lineage(text)
        assert result.ok, result.problems
        return result.lineage

    lineage = extract_sql_lineage(_FLATTEN, "spark").lineage
    xml = to_sqlflow_xml(lineage)
    assert 'column="widget.asset.id"' in xml
    assert 'ab:sourceField="asset.id"' in xml
    assert 'ab:targetField="city"' in xml
    assert read(xml).relations == lineage.relations  # (column positions are not in SQLFlow's formats)
    assert read(to_sqlflow_json(lineage)).relations == lineage.relations


def test_a_star_over_a_name_that_is_neither_table_nor_column_stays_a_warning() -> None:
    result = extract_sql_lineage("INSERT INTO s.t SELECT x.* FROM s.a JOIN s.b ON a.id = b.id", "spark")
    assert [p.message for p in result.problems] == ["x.*: no such table in FROM"]
    assert {d.id for d in result.lineage.datasets if d.kind is DatasetKind.TABLE} == {
        "table:s.a",
        "table:s.b",
        "table:s.t",
    }


def test_a_kafka_topic_read_in_a_stream_keeps_the_field_read_of_it() -> None:
    """A streaming plan names a topic as a path first; renamed to the topic, the field stays."""
    from atlas_bridge.spark.stream_plan import _KAFKA_MARK, _kafka_topics_in

    uri = f"{_KAFKA_MARK}events"
    path = Dataset(id=f"path:{uri}", kind=DatasetKind.PATH, name=uri, uri=uri, columns=[Column(name="value")])
    out = Dataset(id="table:t", kind=DatasetKind.TABLE, name="t", columns=[Column(name="user_id")])
    rel = Relation(
        type=RelationType.FDD,
        source=ColumnRef(dataset_id=path.id, column="value", field="user.id"),
        target=ColumnRef(dataset_id=out.id, column="user_id"),
    )
    renamed = _kafka_topics_in(Lineage(datasets=[path, out], relations=[rel]))
    assert [str(r.source) for r in renamed.relations] == ["stream:kafka:events.value.user.id"]
