"""Statement coverage (issue 3 item 1): DML, paths and stages, DDL lineage, procedures, no-lineage statements.

Cases and the reasons where we differ from the source document: tests/data/sql/statements/cases.json (SQL
from the seeds, the SQLFlow sample pages, and our own). Every case's full lineage is also a reviewed golden
file under tests/golden/sql/statements/.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from golden import assert_golden

from atlas_bridge import extract_sql_lineage
from atlas_bridge.graph import end_to_end, relation_lines, table_level
from atlas_bridge.model import DatasetKind, ExtractionResult, Lineage, RelationType, Severity

DATA = Path(__file__).parent / "data" / "sql" / "statements"
CASES: dict[str, dict[str, Any]] = json.loads((DATA / "cases.json").read_text(encoding="utf-8"))["cases"]
NO_LINEAGE: list[list[str]] = json.loads((DATA / "no_lineage.json").read_text(encoding="utf-8"))["statements"]


def _extract(case_id: str) -> ExtractionResult:
    case = CASES[case_id]
    sql = (DATA / f"{case_id}.sql").read_text(encoding="utf-8")
    return extract_sql_lineage(sql, case["dialect"], file=f"{case_id}.sql")


def _lines(lineage: Lineage) -> set[str]:
    return {line.lower() for line in relation_lines(lineage)}


def _norm(name: str) -> str:
    return name if name.startswith("path:") else name.lower()


def _table_triples(lineage: Lineage) -> set[tuple[str, str, str]]:
    tl = table_level(lineage)
    by_id = {d.id: d for d in tl.datasets}
    types = {p.id: p.type for p in lineage.processes}

    def name(ds_id: str) -> str:
        ds = by_id[ds_id]
        return f"path:{ds.uri}" if ds.kind is DatasetKind.PATH else ds.qualified_name.lower()

    return {(name(s), types.get(p or "", ""), name(t)) for s, p, t in tl.triples()}


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_statement_case(case_id: str) -> None:
    case = CASES[case_id]
    result = _extract(case_id)
    errors = [str(p) for p in result.problems if p.severity is Severity.ERROR]
    assert not errors
    lineage = result.lineage
    e2e = _lines(end_to_end(lineage))
    full = _lines(lineage)
    missing = [r for r in case.get("relations", []) if r.lower() not in e2e]
    assert not missing, f"end-to-end relations missing: {missing}"
    missing = [r for r in case.get("chain", []) if r.lower() not in full]
    assert not missing, f"column-level hops missing: {missing}"
    present = [r for r in case.get("absent", []) if r.lower() in e2e]
    assert not present, f"relations that must not appear: {present}"
    if case.get("no_edges"):
        assert not lineage.relations
    triples = _table_triples(lineage)
    for src, ptype, tgt in case.get("table_level", []):
        want = (_norm(src), ptype, _norm(tgt))
        assert want in triples, f"table-level edge missing: {want}; have {sorted(triples)}"
    assert Counter(p.type for p in lineage.processes) == Counter(case["processes"])


def _dataset(lineage: Lineage, kind: DatasetKind, name: str) -> Any:
    found = [d for d in lineage.datasets if d.kind is kind and d.name.lower() == name.lower()]
    assert len(found) == 1, f"{kind.value} {name}: {[d.id for d in found]}"
    return found[0]


@pytest.mark.parametrize("case_id", sorted(c for c in CASES if "variables" in CASES[c]))
def test_variables(case_id: str) -> None:
    """Variables as seed 000 shows them: subType, and a scalar's own column or a cursor/record's fields."""
    lineage = _extract(case_id).lineage
    for name, spec in CASES[case_id]["variables"].items():
        var = _dataset(lineage, DatasetKind.VARIABLE, name)
        assert var.sub_type == spec["sub_type"]
        columns = {c.name.lower() for c in var.columns if not c.system}
        assert columns == {c.lower() for c in spec["columns"]}


@pytest.mark.parametrize("case_id", sorted(c for c in CASES if "procedures" in CASES[c]))
def test_procedures(case_id: str) -> None:
    """Procedure objects with their arguments; statements inside name their procedure."""
    case = CASES[case_id]
    lineage = _extract(case_id).lineage
    procs = {p.name: p for p in lineage.procedures}
    assert set(procs) == set(case["procedures"])
    for name, spec in case["procedures"].items():
        assert procs[name].type == spec["type"]
        assert [[a.name, a.mode] for a in procs[name].arguments] == spec["arguments"]
        assert procs[name].span is not None
    for ptype, proc_name in case.get("process_procedure", {}).items():
        assert {p.procedure for p in lineage.processes if p.type == ptype} == {proc_name}


@pytest.mark.parametrize("case_id", sorted(c for c in CASES if "resultsets" in CASES[c]))
def test_writing_resultsets(case_id: str) -> None:
    """UPDATE-SET-n / MERGE-INSERT-n / MERGE-UPDATE-n resultsets with SQLFlow's type names and columns."""
    case = CASES[case_id]
    lineage = _extract(case_id).lineage
    for name, sub_type in case["resultsets"].items():
        assert _dataset(lineage, DatasetKind.RESULTSET, name).sub_type == sub_type
    for name, columns in case.get("resultset_columns", {}).items():
        rs = _dataset(lineage, DatasetKind.RESULTSET, name)
        assert [c.name for c in rs.columns if not c.system] == sorted(columns, key=str.lower)


@pytest.mark.parametrize("case_id", sorted(c for c in CASES if "effect_type" in CASES[c]))
def test_effect_types(case_id: str) -> None:
    lineage = _extract(case_id).lineage
    by_id = {d.id: d for d in lineage.datasets}
    for line, effect in CASES[case_id]["effect_type"].items():
        found = {
            r.effect_type
            for r in lineage.relations
            if f"{by_id[r.source.dataset_id].qualified_name}.{r.source.column} -> {r.type.value} -> "
            f"{by_id[r.target.dataset_id].qualified_name}.{r.target.column}".lower()
            == line.lower()
        }
        assert found == {effect}


def test_udf_objects_and_calls() -> None:
    """Seed 002: a UDF (scalar or table-valued) is an object of subType function, reached by a call edge."""
    lineage = _extract("udf_calls").lineage
    for name in CASES["udf_calls"]["function_objects"]:
        db, fn = name.split(".")
        ds = _dataset(lineage, DatasetKind.TABLE, fn)
        assert (ds.db, ds.sub_type) == (db, "function")
        assert any(r.type is RelationType.CALL and r.source.dataset_id == ds.id for r in lineage.relations)
    # a built-in function stays a transform on the edge: no object, no call
    plain = extract_sql_lineage("SELECT ROUND(price) AS p FROM orders", "tsql").lineage
    assert not [r for r in plain.relations if r.type is RelationType.CALL]


def test_variables_are_scoped_to_their_block() -> None:
    """The same variable name in two procedures gives two variables (scoped like resultsets)."""
    sql = (
        "CREATE PROCEDURE p1 (IN x INT, OUT v INT) BEGIN SELECT a INTO v FROM t1 WHERE k = x; END;\n"
        "CREATE PROCEDURE p2 (IN x INT, OUT v INT) BEGIN SELECT b INTO v FROM t2 WHERE k = x; END;\n"
    )
    lineage = extract_sql_lineage(sql, "teradata").lineage
    variables = [d for d in lineage.datasets if d.kind is DatasetKind.VARIABLE and d.name == "v"]
    assert len(variables) == 2
    assert {p.name for p in lineage.procedures} == {"p1", "p2"}


def test_statement_after_a_block_keeps_its_position() -> None:
    """A block with inner semicolons is one statement; what follows it is analysed at its own position."""
    sql = "BEGIN\n  INSERT INTO a SELECT x FROM b;\n  DELETE FROM c;\nEND;\nINSERT INTO d SELECT y FROM e;\n"
    result = extract_sql_lineage(sql, "oracle")
    assert result.ok
    spans = {p.name: (p.span.line, p.span.column) if p.span else None for p in result.lineage.processes}
    assert spans == {"Insert into a": (2, 3), "Insert into d": (5, 1)}


def test_broken_statement_in_a_block_is_a_warning_and_the_rest_goes_on() -> None:
    sql = "BEGIN\n  INSERT INTO a SELECT FROM WHERE;\n  INSERT INTO c SELECT x FROM d;\nEND;\n"
    result = extract_sql_lineage(sql, "oracle", file="blk.sql")
    assert [p.type for p in result.lineage.processes] == ["insert"]
    warnings = [p for p in result.problems if p.severity is Severity.WARNING]
    assert warnings
    assert (warnings[0].line, warnings[0].file) == (2, "blk.sql")


@pytest.mark.parametrize(("dialect", "sql"), [pytest.param(d, s, id=f"{d}:{s[:40]}") for d, s in NO_LINEAGE])
def test_no_lineage_statements(dialect: str, sql: str) -> None:
    """Statements that move no data: no edge, no process, no problem of any severity."""
    result = extract_sql_lineage(sql, dialect)
    assert not result.problems, [str(p) for p in result.problems]
    assert not result.lineage.relations
    assert not result.lineage.processes


def test_unknown_command_still_warns() -> None:
    """A command that may move data is never dropped silently."""
    result = extract_sql_lineage("PUT file:///tmp/data.csv @my_stage", "snowflake")
    assert [(p.kind, p.severity) for p in result.problems] == [("unsupported", Severity.WARNING)]


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_statement_golden(case_id: str, update_golden: bool) -> None:
    """The whole lineage of each case, reviewed: every hop, every process, every problem."""
    result = _extract(case_id)
    lineage = result.lineage
    data = {
        "relations": relation_lines(lineage),
        "end_to_end": relation_lines(end_to_end(lineage)),
        "processes": sorted(
            [p.type, p.name, p.procedure, str(p.span) if p.span else None] for p in lineage.processes
        ),
        "datasets": sorted([d.id, d.kind.value, d.sub_type, d.uri] for d in lineage.datasets),
        "procedures": [
            [p.id, p.type, [[a.name, a.data_type, a.mode] for a in p.arguments]] for p in lineage.procedures
        ],
        "problems": [str(p) for p in result.problems],
    }
    assert_golden(data, f"sql/statements/{case_id}.json", update_golden)
