"""Writing SQLFlow XML / JSON: what we write reads back into an equal lineage, deterministically."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from golden import assert_golden

from atlas_bridge.graph import table_level
from atlas_bridge.model import (
    PSEUDO_ROWS,
    Argument,
    ClauseType,
    Column,
    ColumnRef,
    Dataset,
    DatasetKind,
    Effect,
    FlowKind,
    Lineage,
    Procedure,
    Process,
    Relation,
    RelationType,
    Span,
    dataset_id,
)
from atlas_bridge.sqlflow.read import extract_sqlflow_lineage
from atlas_bridge.sqlflow.write import to_sqlflow_json, to_sqlflow_xml

DATA = Path(__file__).parent / "data" / "sqlflow"
NOT_SAMPLES = {"sql_vs_sqlflow.json"}  # the SQL-vs-SQLFlow comparison cases, not an export
SAMPLES = sorted(
    p.name for p in DATA.iterdir() if p.suffix in (".xml", ".json") and p.name not in NOT_SAMPLES
)
WRITERS = {"xml": to_sqlflow_xml, "json": to_sqlflow_json}


def read(text: str | bytes, file: str | None = None) -> Lineage:
    result = extract_sqlflow_lineage(text, file=file)
    assert not [p for p in result.problems if "SQLFlow " not in p.message], result.problems
    return result.lineage


@pytest.mark.parametrize("fmt", sorted(WRITERS))
@pytest.mark.parametrize("name", SAMPLES)
def test_sample_round_trip(name: str, fmt: str) -> None:
    original = extract_sqlflow_lineage((DATA / name).read_bytes(), file=name).lineage
    written = WRITERS[fmt](original)
    again = read(written, file=f"elsewhere/other-name.{fmt}")  # a different file must not change ids
    assert again == original
    assert WRITERS[fmt](again) == written


def _rich_lineage() -> Lineage:
    """Every field the model has, with awkward values: quotes, dots, newlines, same-hash processes."""
    span = Span(line=2, column=3, end_line=2, end_column=9)
    p1 = Process(
        id="process:aaaaaaaaaaaaaaaa",
        type="insert_overwrite",
        name='Insert into "x".y',
        query_hash="a" * 64,
        statement_index=1,
        sql="INSERT OVERWRITE TABLE y\nSELECT '<&>' FROM t",
        span=span,
        procedure="db.proc_a",
        source_file="jobs/load.sql",
    )
    p2 = Process(id="process:aaaaaaaaaaaaaaaa#2", type="insert_overwrite", name="again", query_hash="a" * 64)
    p3 = Process(
        id="process:spark-app-1", type="InsertIntoHadoopFsRelationCommand", name="spark", query_hash="b"
    )
    t = Dataset(
        id=dataset_id(DatasetKind.TABLE, "t.x", "sales", "hive"),
        kind=DatasetKind.TABLE,
        name="t.x",
        db="sales",
        catalog="hive",
        alias="src",
        spans=(span, span.model_copy(update={"line": 5})),
        columns=(
            Column(name="a", data_type="int"),
            Column(name='"q"'),
            Column(name="Row Number"),
            Column(name=PSEUDO_ROWS, system=True),
        ),
    )
    c = Dataset(
        id=dataset_id(DatasetKind.TABLE, "y", None, "cat"),
        kind=DatasetKind.TABLE,
        name="y",
        catalog="cat",
        process_ids=(p1.id, p2.id),
        columns=(Column(name="a"), Column(name="b"), Column(name=PSEUDO_ROWS, system=True)),
    )
    path = Dataset(
        id="path:s3://b/k/",
        kind=DatasetKind.PATH,
        name="s3://b/k/",
        uri="s3://b/k/",
        file_format="PARQUET",
        process_ids=(p3.id,),
        columns=(Column(name="*"),),
    )
    rs = Dataset(
        id=f"resultset:{p1.id}/RS-1",
        kind=DatasetKind.RESULTSET,
        name="RS-1",
        sub_type="select_list",
        columns=(Column(name="a", expression="upper(a) || '\"'"),),
    )
    odd = Dataset(
        id="resultset:x/T",
        kind=DatasetKind.RESULTSET,
        name="T",
        sub_type="table",
        columns=(Column(name="v"),),
    )
    var = Dataset(
        id="variable:proc/@v",
        kind=DatasetKind.VARIABLE,
        name="@v",
        sub_type="scalar",
        columns=(Column(name="@v"),),
    )
    const = Dataset(
        id="constantTable:x/SQL_CONSTANTS-1",
        kind=DatasetKind.CONSTANT_TABLE,
        name="SQL_CONSTANTS-1",
        columns=(Column(name="'k'"),),
    )
    stage = Dataset(
        id=dataset_id(DatasetKind.STAGE, "stg"), kind=DatasetKind.STAGE, name="stg", uri="@stg/p/"
    )
    view = Dataset(
        id=dataset_id(DatasetKind.VIEW, "v", "sales"),
        kind=DatasetKind.VIEW,
        name="v",
        db="sales",
        sub_type="function",
        columns=(Column(name="a"),),
    )

    def ref(ds: Dataset, col: str) -> ColumnRef:
        return ColumnRef(dataset_id=ds.id, column=col)

    rels = (
        Relation(
            type=RelationType.FDD,
            source=ref(t, "a"),
            target=ref(rs, "a"),
            effect_type="select",
            transform="upper(a)",
            function="upper",
            effect=Effect.MODIFIED_COPY,
            span=span,
        ),
        Relation(
            type=RelationType.FDD,
            source=ref(rs, "a"),
            target=ref(c, "a"),
            process_id=p1.id,
            effect_type="insert",
        ),
        Relation(
            type=RelationType.FDR,
            source=ref(t, '"q"'),
            target=ref(c, PSEUDO_ROWS),
            process_id=p2.id,
            clause_type=ClauseType.GROUP_BY,
        ),
        Relation(
            type=RelationType.FDR,
            source=ref(t, "Row Number"),
            target=ref(c, "b"),
            clause_type=ClauseType.WHERE,
            flow=FlowKind.RESTRICTS,
        ),
        Relation(
            type=RelationType.FDR,
            source=ref(t, "a"),
            target=ref(c, "b"),
            clause_type=ClauseType.JOIN,
            flow=FlowKind.DATA_FLOW,
        ),
        Relation(type=RelationType.FDD, source=ref(c, PSEUDO_ROWS), target=ref(path, "*"), process_id=p3.id),
        Relation(type=RelationType.JOIN, source=ref(var, "@v"), target=ref(odd, "v")),
        Relation(type=RelationType.ER, source=ref(const, "'k'"), target=ref(view, "a")),
        Relation(type=RelationType.CALL, source=ref(t, "a"), target=ref(view, "a")),
        # the view has no processIds, yet one edge into it names a process: the others must stay without
        Relation(type=RelationType.FDD, source=ref(t, "a"), target=ref(view, "a"), process_id=p3.id),
        # fields below columns (issue 31): a struct field read, a struct field built
        Relation(
            type=RelationType.FDD,
            source=ColumnRef(dataset_id=t.id, column="a", field="asset.id"),
            target=ColumnRef(dataset_id=c.id, column="b", field="s.x"),
            process_id=p1.id,
        ),
    )
    proc = Procedure(
        id="procedure:db.proc_a",
        name="proc_a",
        db="db",
        type="function",
        span=span,
        arguments=(Argument(name="@p", data_type="int", mode="in", span=span), Argument(name="x")),
    )
    pkg = Procedure(id="procedure:other-scheme", name="pkg.proc", catalog="c")
    return Lineage(
        datasets=(t, c, path, rs, odd, var, const, stage, view),
        processes=(p1, p2, p3),
        relations=rels,
        procedures=(proc, pkg),
    )


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_every_model_field_survives_a_round_trip(fmt: str) -> None:
    lineage = _rich_lineage()
    written = WRITERS[fmt](lineage)
    assert read(written) == lineage
    assert WRITERS[fmt](lineage) == written  # deterministic


def test_xml_output_is_sqlflow_shaped() -> None:
    root = ET.fromstring(to_sqlflow_xml(_rich_lineage()))
    assert root.tag == "dlineage"
    tags = [el.tag for el in root]
    assert tags[:5] == ["process", "process", "process", "procedure", "procedure"]
    assert set(tags) == {
        "process",
        "procedure",
        "path",
        "stage",
        "table",
        "view",
        "resultset",
        "variable",
        "relation",
    }
    ids = [
        el.get("id") for el in root.iter() if el.tag not in ("relation", "target", "source") and el.get("id")
    ]
    assert len(ids) == len(set(ids))
    assert all(i.isdigit() for i in ids)
    rows = [c for c in root.iter("column") if c.get("name") == PSEUDO_ROWS]
    assert rows
    assert all(c.get("source") == "system" for c in rows)
    c_table = next(el for el in root if el.tag == "table" and el.get("name") == "cat..y")
    procs = {el.get("id"): el for el in root if el.tag == "process"}
    assert sorted(procs[i].get("name") for i in c_table.get("processIds", "").split()) == [
        'Insert into "x".y',
        "again",
    ]
    for rel in root.iter("relation"):
        assert [c.tag for c in rel] == ["target", "source"]


def test_json_output_is_flat_j1() -> None:
    doc = json.loads(to_sqlflow_json(_rich_lineage()))
    assert sorted(doc) == ["dbobjs", "relationships"]
    assert [o["type"] for o in doc["dbobjs"]][:3] == ["process"] * 3
    first = doc["relationships"][0]
    assert {"id", "sources", "target", "type"} <= set(first)
    assert {"parentId", "parentName", "column", "id"} <= set(first["target"])


def test_table_level_xml_matches_the_column_levels_table_lineage() -> None:
    for name in (
        "mssql-view-update-insert.column-level.1.xml",
        "oracle-insert-all.relationship.1.xml",
        "oracle-vsal-insertall-fk.graph.json",
        "seed000-rename.column-level.xml",
    ):
        lineage = read((DATA / name).read_bytes(), file=name)
        written = to_sqlflow_xml(lineage, level="table")
        root = ET.fromstring(written)
        assert not list(root.iter("column"))
        for rel in root.iter("relation"):
            target, source = list(rel)
            assert target.get("target_id")
            assert source.get("source_id")
        back = read(written, file=name)  # same file name: same process ids

        def triples(lin: Lineage) -> set[tuple[str, str | None, str]]:
            return set(table_level(lin).triples())

        assert triples(back) == triples(lineage), name


def test_xml_goldens(update_golden: bool) -> None:
    for name in ("seed000-rename.column-level.xml", "oracle-insert-deptsal.lineage.json"):
        lineage = read((DATA / name).read_bytes(), file=name)
        for level in ("column", "table"):
            assert_golden(to_sqlflow_xml(lineage, level), f"sqlflow/out/{name}.{level}.xml", update_golden)
        assert_golden(json.loads(to_sqlflow_json(lineage)), f"sqlflow/out/{name}.json", update_golden)


def test_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError, match="level must be one of column, table"):
        to_sqlflow_xml(Lineage(), level="schema")


SQL_FILES = sorted(p.name for p in DATA.glob("*.sql"))


@pytest.mark.parametrize("fmt", sorted(WRITERS))
@pytest.mark.parametrize("name", SQL_FILES)
def test_sql_extractor_output_round_trip(name: str, fmt: str) -> None:
    """What the SQL extractor builds (other ids, types, spans, expressions) survives our formats too."""
    sql = pytest.importorskip("atlas_bridge.extractors.sql")
    lineage = sql.extract_sql_lineage((DATA / name).read_text(encoding="utf-8"), None, file=name).lineage
    # SQLFlow's formats have no column position (a table's column order, issue 32): not carried.
    lineage = lineage.model_copy(
        update={
            "datasets": tuple(
                d.model_copy(
                    update={"columns": tuple(c.model_copy(update={"position": None}) for c in d.columns)}
                )
                for d in lineage.datasets
            )
        }
    )
    assert read(WRITERS[fmt](lineage)) == lineage
