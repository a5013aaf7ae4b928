"""The schema learned from the estate (issue 12): files whose DDL defines the tables others read give the
lineage a schema.json gives, whatever the file order, cycles between files included; schema.json wins.

Data: tests/data/schema_learning/estate (a view in one file reads a table of another, whose CTAS reads
that view; the queries sit in other files) and schema.json, the same tables written out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from atlas_bridge.bridge.schema import create_statements, learn_locally, schema_index
from atlas_bridge.bridge.types import InputFile, InputKind, ScanOptions, WorkUnit
from atlas_bridge.extractors.sql import SchemaIndex, extract_sql_lineage
from atlas_bridge.graph import end_to_end, relation_lines
from atlas_bridge.model import DatasetKind, Lineage, merge_lineage

DATA = Path(__file__).resolve().parent / "data" / "schema_learning"
ESTATE = DATA / "estate"
FILES = sorted(ESTATE.glob("*.sql"))
SCHEMA = json.loads((DATA / "schema.json").read_text(encoding="utf-8"))


def _units(files: list[Path]) -> list[WorkUnit]:
    return [WorkUnit(InputFile(str(f), f.name, InputKind.SQL, f.stat().st_size)) for f in files]


def _lineage(schema: dict[str, Any] | SchemaIndex | None) -> tuple[Lineage, int]:
    parts, problems = [], 0
    for f in FILES:
        r = extract_sql_lineage(f.read_text(encoding="utf-8"), None, schema, file=f.name)
        parts.append(r.lineage)
        problems += len(r.problems)
    return end_to_end(merge_lineage(parts)), problems


def _bare(lineage: Lineage) -> int:
    kinds = {d.id: d.kind for d in lineage.datasets}
    return sum(1 for r in lineage.relations if kinds[r.source.dataset_id] is DatasetKind.PSEUDO_TABLE)


def _learned(files: list[Path], given: dict[str, Any] | None = None) -> dict[str, list[str]]:
    learned, _ = learn_locally(_units(files), ScanOptions(schema=given))
    return {f"{db}.{name}": [c for c, _ in cols] for _, db, name, cols in learned}


@pytest.mark.parametrize("order", ["name", "reversed", "rotated"])
def test_every_table_view_and_ctas_is_learned_in_any_file_order(order: str) -> None:
    files = {"name": FILES, "reversed": FILES[::-1], "rotated": FILES[2:] + FILES[:2]}[order]
    learned = _learned(files)
    assert learned == _learned(FILES)
    assert learned["sales.orders"] == ["order_id", "customer_id", "amount"]
    # The view reads the table of a later file; the CTAS of that file reads the view: both resolve.
    assert learned["sales.v_orders"] == learned["sales.big_orders"] == learned["sales.orders"]
    assert set(learned) == {
        "sales.orders",
        "sales.v_orders",
        "sales.big_orders",
        "mart.customer_totals",
        "mart.order_copy",
    }


def test_learned_schema_gives_the_lineage_schema_json_gives() -> None:
    learned, _ = learn_locally(_units(FILES), ScanOptions())
    with_ddl, ddl_problems = _lineage(schema_index(learned, None))
    with_json, json_problems = _lineage(SCHEMA)
    without, no_schema_problems = _lineage(None)
    assert set(relation_lines(with_ddl)) == set(relation_lines(with_json))
    assert _bare(with_ddl) == _bare(with_json) == 0
    assert ddl_problems == json_problems == 0
    # Without any schema the join's columns cannot be placed and * stays *.
    assert _bare(without) > 0
    assert no_schema_problems > 0
    assert any(".* ->" in line for line in relation_lines(without))


def test_given_schema_wins_over_what_is_learned() -> None:
    given = {"sales": {"orders": {"order_id": "BIGINT", "note": "STRING"}}}
    learned = _learned(FILES, given)
    # The DDL of sales.orders is learned, but the views over it are resolved against the given one.
    assert learned["sales.v_orders"] == ["order_id", "note"]
    index = schema_index(learn_locally(_units(FILES), ScanOptions(schema=given))[0], given)
    assert index.columns(None, "sales", "orders") == [("order_id", "BIGINT"), ("note", "STRING")]
    assert index.columns(None, "mart", "order_copy") == [
        ("order_id", "BIGINT"),
        ("customer_id", "BIGINT"),
        ("amount", "DECIMAL(10, 2)"),
    ]


def test_a_view_over_a_table_nobody_defines_stays_unresolved_and_the_rounds_are_bounded() -> None:
    from atlas_bridge.bridge.schema import MAX_ROUNDS, UnitSchema, fixed_point

    text = "create view s.v1 as select * from s.v2; create view s.v2 as select * from s.v1"
    results = [UnitSchema("x.sql", (), text, None)]
    learned, rounds = fixed_point(results, ScanOptions())
    assert learned == []
    assert 1 <= rounds <= MAX_ROUNDS


def test_only_create_statements_are_cut_out_for_the_learning_pass() -> None:
    text = (
        "insert into t select 'create' from u; -- create\n"
        "/* create */ CREATE OR REPLACE VIEW v AS SELECT a FROM t;\n"
        "select 1;"
    )
    # The comments before a statement stay with it (they are not statements of their own).
    assert create_statements(text) == "-- create\n/* create */ CREATE OR REPLACE VIEW v AS SELECT a FROM t;"


def test_cli_lineage_over_several_files_learns_the_schema() -> None:
    from click.testing import CliRunner

    from atlas_bridge.cli import cli

    runner = CliRunner()
    args = ["lineage", *map(str, FILES)]
    learned = runner.invoke(cli, args)
    given = runner.invoke(cli, [*args, "--schema", str(DATA / "schema.json"), "--no-learn-schema"])
    unlearned = runner.invoke(cli, [*args, "--no-learn-schema"])
    assert learned.exit_code == given.exit_code == 0, learned.output
    assert learned.stdout == given.stdout
    assert unlearned.stdout != learned.stdout


@pytest.fixture
def session(request: pytest.FixtureRequest) -> object:
    """The run's one Spark session (tests/fixtures_spark.py); skipped until that fixture exists."""
    try:
        return request.getfixturevalue("spark")
    except pytest.FixtureLookupError:
        pytest.skip("the session-scoped 'spark' fixture is not available")


@pytest.mark.spark
def test_scan_learns_the_schema_on_spark_and_types_reach_the_column_entities(
    session: object, tmp_path: Path
) -> None:
    from atlas_bridge import bridge
    from atlas_bridge.atlas.sink import FileSink

    def run(out: Path, options: ScanOptions) -> tuple[bridge.ScanSummary, list[dict[str, Any]]]:
        delivery = bridge.SinkDelivery(FileSink(out), f"files:{out}")
        summary = bridge.scan([ESTATE], delivery, namespace="test", spark=session, options=options)  # type: ignore[arg-type]
        entities = [
            e for p in sorted(out.glob("*-entities.json")) for e in json.loads(p.read_text())["entities"]
        ]
        return summary, entities

    learned, learned_entities = run(tmp_path / "learned", ScanOptions())
    _, given_entities = run(tmp_path / "given", ScanOptions(schema=SCHEMA, learn_schema=False))
    assert learned.extract.schema is not None
    assert learned.extract.schema.tables == 5
    assert learned.to_dict()["schema"]["learned_tables"] == 5

    def lineage_qns(entities: list[dict[str, Any]]) -> set[str]:
        return {e["attributes"]["qualifiedName"] for e in entities}

    assert lineage_qns(learned_entities) == lineage_qns(given_entities)
    types = {
        e["attributes"]["qualifiedName"]: e["attributes"].get("type")
        for e in learned_entities
        if e["typeName"] == "atlas_bridge_column"
    }
    assert types["mart.order_copy.amount@test"] == "DECIMAL(10, 2)"
    assert types["sales.orders.customer_id@test"] == "BIGINT"
