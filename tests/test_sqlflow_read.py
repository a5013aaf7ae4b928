"""Reading SQLFlow exports: every sample file without loss, plus the mapping rules one by one."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from golden import assert_golden
from sqlflow_raw import walk

from atlas_bridge.bridge.extract import extract_partition
from atlas_bridge.bridge.types import InputFile, InputKind, ScanOptions, WorkUnit
from atlas_bridge.errors import ExtractionError
from atlas_bridge.graph import end_to_end, table_level
from atlas_bridge.model import (
    PSEUDO_ROWS,
    ClauseType,
    DatasetKind,
    Effect,
    FlowKind,
    Lineage,
    RelationType,
    Severity,
    Span,
)
from atlas_bridge.sqlflow.read import extract_sqlflow_lineage

DATA = Path(__file__).parent / "data" / "sqlflow"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from big_inputs import sample_repeated_json  # noqa: E402  # the benchmark's generator, small

NOT_SAMPLES = {"sql_vs_sqlflow.json"}  # the SQL-vs-SQLFlow comparison cases, not an export
SAMPLES = sorted(
    p.name for p in DATA.iterdir() if p.suffix in (".xml", ".json") and p.name not in NOT_SAMPLES
)


def read(name: str) -> tuple[Lineage, list[str]]:
    result = extract_sqlflow_lineage((DATA / name).read_bytes(), file=name)
    return result.lineage, [str(p) for p in result.problems]


def test_every_sample_is_covered() -> None:
    assert len(SAMPLES) >= 55
    shared = DATA.parent.parent.parent.parent / "shared" / "sqlflow-samples"
    if shared.is_dir():  # every xml/json sample file of the shared folder is here, unchanged
        for sample in [*shared.glob("xml/*.xml"), *shared.glob("json/*.json")]:
            assert (DATA / sample.name).read_bytes() == sample.read_bytes()


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_reads_without_loss(name: str) -> None:
    raw = walk(DATA / name)
    lineage, problems = read(name)
    by_id = {d.id: d for d in lineage.datasets}
    names = {d.name.lower() for d in lineage.datasets}
    for oid, (_tag, oname) in raw.objects.items():
        assert oname in names, f"object {oid} ({oname}) missing"
    for (oid, _cid), cname in raw.columns.items():
        oname = raw.objects[oid][1]
        assert any(
            d.name.lower() == oname and any(c.name.lower() == cname for c in d.columns)
            for d in lineage.datasets
        ), f"column {oname}.{cname} missing"
    assert sorted(raw.processes.values()) == sorted(
        p.name for p in lineage.processes if p.name in raw.processes.values()
    )
    assert {p.name for p in lineage.processes} >= set(raw.processes.values())
    assert sorted(raw.procedures) == sorted(p.name.rsplit(".", 1)[-1].lower() for p in lineage.procedures)

    def edge(r):  # type: ignore[no-untyped-def]
        s, t = by_id[r.source.dataset_id], by_id[r.target.dataset_id]
        return (
            r.type.value,
            t.name.lower(),
            r.target.column.lower(),
            s.name.lower(),
            r.source.column.lower(),
        )

    if raw.edges:
        model_edges = {edge(r) for r in lineage.relations}
        assert raw.edges == model_edges  # each stated edge is there, and nothing else
        with_process = {edge(r) for r in lineage.relations if r.process_id is not None}
        assert raw.edges_with_process <= with_process
    if raw.table_edges:
        procs = {p.id: p.name for p in lineage.processes}
        model_hops = set()
        for r in lineage.relations:
            assert r.source.column == PSEUDO_ROWS
            assert r.target.column == PSEUDO_ROWS
            assert r.process_id is not None
            model_hops.add(("in", by_id[r.source.dataset_id].name.lower(), procs[r.process_id]))
            model_hops.add(("out", by_id[r.target.dataset_id].name.lower(), procs[r.process_id]))
        assert raw.table_edges == model_hops
    if raw.v2_edges:
        assert raw.v2_edges == {
            (r.flow.value, r.target.column.lower(), r.source.column.lower())
            for r in lineage.relations
            if r.flow is not None
        }
    for table, column in raw.v2_has:
        assert any(d.name.lower() == table and d.column(column) for d in lineage.datasets)
    sqlflow_errors = [p for p in problems if ": SQLFlow " in p]
    assert len(sqlflow_errors) == raw.errors
    assert raw.objects or raw.v2_edges or raw.v2_has, "the walk found nothing: the test would prove nothing"


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_model_golden(name: str, update_golden: bool) -> None:
    lineage, problems = read(name)
    data = {"lineage": json.loads(lineage.to_json()), "problems": problems}
    assert_golden(data, f"sqlflow/{name}.model.json", update_golden)


# ---------------------------------------------------------------------------------------------------------
# Mapping rules


def test_coordinates_three_part_two_part_and_json() -> None:
    xml3 = '<dlineage><table id="1" name="t" coordinate="[4,7,0],[4,18,0]"/></dlineage>'
    xml2 = '<dlineage><table id="1" name="t" coordinate="[4,7],[4,18]"/></dlineage>'
    hashed = '<dlineage><table id="1" name="t" coordinate="[4,7,f904f83],[4,18,f904f83]"/></dlineage>'
    js = json.dumps(
        {
            "dbobjs": [
                {
                    "id": "1",
                    "name": "t",
                    "type": "table",
                    "coordinates": [{"x": 4, "y": 7, "hashCode": "0"}, {"x": 4, "y": 18, "hashCode": "0"}],
                }
            ],
            "relationships": [],
        }
    )
    want = (Span(line=4, column=7, end_line=4, end_column=18),)
    for doc in (xml3, xml2, hashed, js):
        assert extract_sqlflow_lineage(doc).lineage.datasets[0].spans == want
    none = '<dlineage><path id="1" name="/x" uri="/x" coordinate="[-1,-1,0],[-1,-1,0]"/></dlineage>'
    assert extract_sqlflow_lineage(none).lineage.datasets[0].spans == ()


def test_relationrows_and_pseudorows_are_one_system_column() -> None:
    for name in ("RelationRows", "PseudoRows", "RELATIONROWS"):
        doc = f'<dlineage><table id="1" name="t"><column id="2" name="{name}" source="SYSTEM"/></table>'
        doc += "</dlineage>"
        (col,) = extract_sqlflow_lineage(doc).lineage.datasets[0].columns
        assert (col.name, col.system) == (PSEUDO_ROWS, True)


@pytest.mark.parametrize(
    ("wire", "rtype", "clause"),
    [
        ("fdd", RelationType.FDD, None),
        ("fdr", RelationType.FDR, None),
        ("frd", RelationType.FDR, None),
        ("fddi", RelationType.FDR, ClauseType.CONDITION),
        ("join", RelationType.JOIN, None),
        ("er", RelationType.ER, None),
        ("call", RelationType.CALL, None),
        ("dataflow", RelationType.FDD, None),
        ("impact", RelationType.FDR, None),
        ("dataflow_recordset", RelationType.FDR, None),
    ],
)
def test_relation_types(wire: str, rtype: RelationType, clause: ClauseType | None) -> None:
    doc = f"""<dlineage>
      <table id="1" name="s"><column id="2" name="a"/></table>
      <table id="3" name="t"><column id="4" name="b"/></table>
      <relation id="1" type="{wire}">
        <target id="4" column="b" parent_id="3" parent_name="t"/>
        <source id="2" column="a" parent_id="1" parent_name="s"/>
      </relation></dlineage>"""
    (rel,) = extract_sqlflow_lineage(doc).lineage.relations
    assert (rel.type, rel.clause_type) == (rtype, clause)


def test_unknown_relation_type_is_a_warning_not_a_crash() -> None:
    doc = """<dlineage><table id="1" name="s"><column id="2" name="a"/></table>
      <relation id="9" type="teleport"><target id="2" parent_id="1"/><source id="2" parent_id="1"/></relation>
      <gizmo id="5"/></dlineage>"""
    result = extract_sqlflow_lineage(doc, file="x.xml")
    assert result.lineage.relations == ()
    assert [p.severity for p in result.problems] == [Severity.WARNING, Severity.WARNING]
    assert any("teleport" in p.message for p in result.problems)
    assert any("<gizmo>" in p.message for p in result.problems)


def test_endpoints_resolve_by_id_not_by_name() -> None:
    # oracle-vsal-insertall-fk: relationships name SCOTT.EMP / DEPTNO, the objects are emp / deptno
    lineage, _ = read("oracle-vsal-insertall-fk.graph.json")
    fk = [r for r in lineage.relations if r.effect_type == "foreign_key"]
    assert [(r.source.dataset_id, r.source.column, r.target.dataset_id, r.target.column) for r in fk] == [
        ("table:scott.dept", "deptno", "table:scott.emp", "deptno")
    ]
    assert lineage.dataset("table:scott.emp").db == "scott"


def test_names_are_unquoted_and_split_into_db_and_catalog() -> None:
    doc = """<dlineage>
      <table id="1" database="WarehouseReporting" schema="dbo" name="WarehouseReporting.dbo.fnListToTable"
             type="table" tableType="function"/>
      <table id="2" schema="SalesLT" name="[SalesLT].[Product]"/>
      <table id="3" database="a" name="a.b"/>
      <table id="4" name="&quot;users&quot;"><column id="5" name="&quot;id&quot;"/></table>
      <table id="6" name="SQL_CONSTANTS-1" type="constantTable"><column id="7" name="'constant'"/></table>
    </dlineage>"""
    lineage = extract_sqlflow_lineage(doc, file="names.xml").lineage
    got = {(d.id, d.name, d.db, d.catalog, d.sub_type) for d in lineage.datasets}
    assert got == {
        (
            "table:warehousereporting.dbo.fnlisttotable",
            "fnListToTable",
            "dbo",
            "WarehouseReporting",
            "function",
        ),
        ("table:saleslt.product", "Product", "SalesLT", None, None),
        ("table:a.b", "b", "a", None, None),
        ("table:users", "users", None, None, None),
        ("constantTable:sqlflow:names/sql_constants-1", "SQL_CONSTANTS-1", None, None, None),
    }
    assert lineage.dataset("table:users").columns[0].name == "id"
    assert lineage.dataset("constantTable:sqlflow:names/sql_constants-1").columns[0].name == "'constant'"


def test_hierarchical_json_containers() -> None:
    lineage, problems = read("json-format-lineage-model.dbobjs.json")
    assert sorted(d.id for d in lineage.datasets) == [
        "table:humanresources.employee",
        "table:oe.orders",
        "table:table1",
    ]
    assert sorted(p.name for p in lineage.procedures) == ["package1.procedure1", "package2.procedure1"]
    assert [p for p in problems if "package" in p]


def test_resultsets_are_scoped_by_their_process() -> None:
    lineage, _ = read("oracle-insert-all.relationship.1.xml")
    (proc,) = lineage.processes
    assert proc.id == "process:96cd680daef072c1"  # queryHashId
    assert (proc.type, proc.name, proc.procedure) == ("insert", "Query Insert-1", None)
    rs = next(d for d in lineage.datasets if d.kind is DatasetKind.RESULTSET)
    assert rs.id == f"resultset:{proc.id}/INSERT-SELECT-1"
    # no process in the file: a per-file scope
    lineage, _ = read("top-level-select-list.dlineage.xml")
    rs = next(d for d in lineage.datasets if d.kind is DatasetKind.RESULTSET)
    assert rs.id == "resultset:sqlflow:top-level-select-list.dlineage/RS-1"


def test_edges_without_process_id_get_the_targets_writer() -> None:
    # gen A: relations carry no processId; the view has processIds="11 14 21" and effectType picks one
    lineage, _ = read("mssql-view-update-insert.column-level.1.xml")
    procs = {p.id: p.name for p in lineage.processes}
    into_view = {
        (r.effect_type, procs[r.process_id])
        for r in lineage.relations  # type: ignore[index]
        if r.target.dataset_id == "table:dbo.hiredate_view"
    }
    assert into_view == {
        ("create_view", "Query Create View"),
        ("update", "Query Update"),
        ("insert", "Query Insert"),
    }


def test_table_level_xml_becomes_pseudorows_edges_through_the_process() -> None:
    column, _ = read("seed000-rename.column-level.xml")
    table, _ = read("seed000-rename.table-level.xml")

    def triples(lineage: Lineage) -> set[tuple[str, str | None, str]]:
        tl = table_level(lineage)
        names = {p.id: p.name for p in tl.processes}
        return {(s, names.get(p or ""), t) for s, p, t in tl.triples()}

    want = {("table:t2", "Query Create View", "table:v1"), ("table:t2", "Query Alter Table", "table:t3")}
    assert triples(column) == want
    assert triples(table) == want
    assert {(r.source.column, r.target.column) for r in table.relations} == {(PSEUDO_ROWS, PSEUDO_ROWS)}


def test_errors_become_problems_with_the_sql_position_in_the_message() -> None:
    _, problems = read("mssql-proc-view-insert.api-result.json")
    assert (
        "mssql-proc-view-insert.api-result.json: warning: SQLFlow SyntaxHint (SQL line 47, column 39): "
        "find orphan column(10500) near: PostalCode(47,39)" in problems
    )
    doc = '<dlineage><error errorMessage="bad" errorType="SyntaxError" coordinate="[3,4,0],[3,9,0]"/>'
    doc += "</dlineage>"
    (problem,) = extract_sqlflow_lineage(doc, file="e.xml").problems
    assert (problem.severity, problem.kind, problem.file) == (Severity.ERROR, "sqlflow", "e.xml")


def test_transforms_functions_and_clause_types_are_kept() -> None:
    lineage, _ = read("transforms.v1-v2.6.xml")
    (rel,) = lineage.relations
    assert (rel.transform, rel.effect_type) == ("SUM(Quantity)", "function")
    assert lineage.dataset(rel.target.dataset_id).sub_type == "function"
    lineage, _ = read("oracle-insert-deptsal.lineage.json")
    assert {r.function for r in lineage.relations if r.function} == {"Nvl", "SUM"}
    assert {r.clause_type for r in lineage.relations if r.clause_type} == {ClauseType.WHERE, ClauseType.JOIN}


def test_v2_edges() -> None:
    lineage, _ = read("transforms.v1-v2.3.json")
    (rel,) = lineage.relations
    assert (rel.type, rel.flow, rel.effect, rel.transform) == (
        RelationType.FDD,
        FlowKind.DATA_FLOW,
        Effect.AGGREGATION,
        "SUM(amount)",
    )
    assert lineage.dataset(rel.target.dataset_id).kind is DatasetKind.RESULTSET
    lineage, _ = read("transforms.v1-v2.4.json")
    (rel,) = lineage.relations
    assert (rel.type, rel.clause_type, rel.flow) == (RelationType.FDR, ClauseType.GROUP_BY, FlowKind.GROUPS)


def test_summary_mode_is_refused() -> None:
    doc = json.dumps({"code": 200, "data": {"mode": "summary", "summary": {"table": 900}}})
    with pytest.raises(ExtractionError, match=r"^big\.json: SQLFlow export is in summary mode"):
        extract_sqlflow_lineage(doc, file="big.json")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("hello", "not a SQLFlow export"),
        ("<dlineage><table id='1'></dlineage>", "malformed dlineage XML"),
        ('{"dbobjs": [', "malformed SQLFlow JSON"),
        ('{"foo": 1}', "no 'dbobjs' or 'relationships'"),
        ('{"code": 500, "error": "license expired"}', "SQLFlow reported an error"),
    ],
)
def test_unreadable_input_names_the_file(doc: str, message: str) -> None:
    with pytest.raises(ExtractionError, match=message) as err:
        extract_sqlflow_lineage(doc, file="in.xml")
    assert str(err.value).startswith("in.xml")


# ---------------------------------------------------------------------------------------------------------
# Issue 29: an export without process objects, same-named resultsets of different statements


def _scan_records(data: bytes, name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The process-tier records and the problems of one export, read as ``scan`` reads a file."""
    unit = WorkUnit(InputFile(name, name, InputKind.SQLFLOW, len(data)), content=data)
    records: list[dict[str, Any]] = []
    header: dict[str, Any] = {}
    for tag, payload in extract_partition([unit], ScanOptions()):
        if tag == "unit":
            records.extend(json.loads(line) for _, line in json.loads(payload)["process_lines"])
        else:
            header = json.loads(payload)
    return records, header["problems"]


def test_an_export_without_process_objects_delivers_its_lineage() -> None:
    # The shipped REST result: 7 tables, 2 views, 20 column relations and not one process object. It sent
    # nothing (every entity of the process tier needs a process), with no word.
    name = "mssql-proc-view-insert.api-result.json"
    records, problems = _scan_records((DATA / name).read_bytes(), name)
    processes = sorted(r["qualifiedName"] for r in records if r["typeName"] == "atlas_bridge_process")
    assert processes == [
        "INSERT:person.person@default,sales.salesperson@default->dbo.employeesales@default",
        "default.hiredate_view@default:CREATE",
        "default.view1@default:CREATE",
    ]
    lineage = {
        r["qualifiedName"].rsplit(":", 2)[-2]
        for r in records
        if r["typeName"] == "atlas_bridge_column_lineage"
    }
    assert lineage == {
        "dbo.employeesales.businessentityid",
        "dbo.employeesales.lastname",
        "dbo.employeesales.salesdollars",
        *(f"default.hiredate_view.{c}" for c in ("businessentityid", "firstname", "hiredate", "lastname")),
        *(
            f"default.view1.{c}"
            for c in (
                "customerkey",
                "orderdatekey",
                "productkey",
                "salesterritorykey",
                "salesterritoryregion",
            )
        ),
    }
    said = [p["message"] for p in problems if p["file"] == name and p["severity"] == "warning"]
    assert any(m.startswith("3 statement(s) have relations but no process object") for m in said)
    # what cannot be delivered is said too: the two top-level SELECTs write nothing
    assert any(
        m.startswith("2 statement(s) read data but write no table") and "RS-3, RS-4" in m for m in said
    )
    # the derived processes are those of the statements, spans included
    lineage_model = extract_sqlflow_lineage((DATA / name).read_bytes(), file=name).lineage
    assert sorted((p.type, p.span.line if p.span else None) for p in lineage_model.processes) == [
        ("create_view", 33),
        ("create_view", 40),
        ("insert", 22),
    ]


def test_same_named_resultsets_of_different_statements_are_kept_apart() -> None:
    # Three copies of the sample on tables of their own: every copy has its RS-1 ... RS-4 and INSERT-SELECT-1.
    # They merged into one resultset each: every copy's sources flowed into every copy's targets (false
    # edges, and end-to-end chains growing with the square of the file: 53 MB ran 20 minutes, 11.6 GB).
    one = extract_sqlflow_lineage(sample_repeated_json(1), file="r.json").lineage
    three = extract_sqlflow_lineage(sample_repeated_json(3), file="r.json").lineage
    e2e_one, e2e_three = end_to_end(one), end_to_end(three)
    assert len(e2e_three.relations) == 3 * len(e2e_one.relations) == 60
    by_id = {d.id: d for d in three.datasets}

    def copy(dataset_id: str) -> int:  # tables by their suffix, resultsets by place (60 lines a copy)
        ds = by_id[dataset_id]
        if ds.kind is DatasetKind.RESULTSET:
            return (ds.spans[0].line - 1) // 60
        return int(ds.name.rsplit("_", 1)[1]) if ds.name[-2:-1] == "_" else 0

    assert {(copy(r.source.dataset_id), copy(r.target.dataset_id)) for r in e2e_three.relations} == {
        (0, 0),
        (1, 1),
        (2, 2),
    }
    resultsets = [d for d in three.datasets if d.kind is DatasetKind.RESULTSET]
    assert len(resultsets) == 15
    assert len(three.processes) == 9
    # a resultset of no process keeps the file's scope, numbered where its name repeats
    assert {d.id for d in resultsets if d.name == "RS-3"} == {
        "resultset:sqlflow:r/RS-3",
        "resultset:sqlflow:r#2/RS-3",
        "resultset:sqlflow:r#3/RS-3",
    }


def test_a_procedure_declared_twice_is_read_once_with_a_warning() -> None:
    doc = """<dlineage>
      <procedure id="1" name="dbo.p" type="procedure" coordinate="[1,1,0],[1,9,0]"/>
      <procedure id="2" name="dbo.p" type="procedure" coordinate="[9,1,0],[9,9,0]"/>
      <table id="3" name="t"><column id="4" name="a"/></table>
    </dlineage>"""
    result = extract_sqlflow_lineage(doc, file="twice.xml")  # it was "does not form a consistent lineage"
    (proc,) = result.lineage.procedures
    assert proc.span == Span(line=1, column=1, end_line=1, end_column=9)
    assert [p.message for p in result.problems] == [
        "procedure 'dbo.p' declared twice; the first declaration is used"
    ]
