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
def test_scan_learns_the_schema_and_types_reach_the_column_entities(session: object, tmp_path: Path) -> None:
    from atlas_bridge import bridge
    from atlas_bridge.atlas.sink import FileSink

    def run(out: Path, options: ScanOptions) -> tuple[bridge.ScanSummary, list[dict[str, Any]]]:
        delivery = bridge.SinkDelivery(FileSink(out), f"files:{out}")
        summary = bridge.scan([ESTATE], delivery, namespace="test", spark=session, options=options)  # type: ignore[arg-type]
        entities = [
            e for p in sorted(out.glob("*-entities.json")) for e in json.loads(p.read_text())["entities"]
        ]
        return summary, entities

    # Learned from the extraction itself: every unit once, then again only those whose look-ups the
    # learned schema answers otherwise (the cycle between a_views and b_tables takes more than one round).
    learned, learned_entities = run(tmp_path / "learned", ScanOptions())
    _, given_entities = run(tmp_path / "given", ScanOptions(schema=SCHEMA, learn_schema=False))
    assert learned.extract.schema is not None
    assert learned.extract.schema.tables == 5
    assert learned.extract.schema.rounds >= 2
    assert learned.to_dict()["schema"]["learned_tables"] == 5
    assert learned.extract.statements == 8  # each unit counted once, however often it was extracted
    assert [f["units"] for f in learned.extract.files.values()] == [1] * 5

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


@pytest.mark.spark
def test_units_the_learned_schema_does_not_change_are_extracted_once(session: object, tmp_path: Path) -> None:
    """Every table the estate reads is in the given schema (which wins): nothing is extracted twice, and
    the payloads are those of a scan that learns nothing."""
    from atlas_bridge import bridge
    from atlas_bridge.atlas.sink import FileSink

    def run(out: Path, options: ScanOptions) -> tuple[bridge.ScanSummary, list[str]]:
        delivery = bridge.SinkDelivery(FileSink(out), f"files:{out}")
        summary = bridge.scan([ESTATE], delivery, namespace="test", spark=session, options=options)  # type: ignore[arg-type]
        return summary, [p.read_text() for p in sorted(out.glob("*-entities.json"))]

    learning, payloads = run(tmp_path / "a", ScanOptions(schema=SCHEMA))
    _, unlearned = run(tmp_path / "b", ScanOptions(schema=SCHEMA, learn_schema=False))
    assert learning.extract.schema is not None
    assert (learning.extract.schema.rounds, learning.extract.schema.pending) == (0, 0)
    assert learning.extract.schema.tables == 5  # still learned (and reported)
    assert payloads == unlearned


# ---------------------------------------------------------------------------------------------------------
# The schema of tables the estate only reads, from Atlas (--schema-from-atlas)


def _hive_estate(stub: Any, *, positions: bool = False) -> Any:
    from atlas_bridge.atlas.client import AtlasClient
    from atlas_bridge.atlas.typedefs import register_typedefs

    data = Path(__file__).resolve().parent / "data"
    for model in ("1020-fs_model.json", "1030-hive_model.json"):
        stub.load_typedefs(json.loads((data / "atlas" / model).read_text(encoding="utf-8")))
    client = AtlasClient(stub.base_url, retries=0, backoff=0)
    estate = json.loads((data / "reuse" / "hive_estate.json").read_text(encoding="utf-8"))
    if positions:  # as the Hive hook writes them: amount first, then order_id
        for e in estate["entities"]:
            if e["typeName"] == "hive_column":
                e["attributes"]["position"] = 0 if e["attributes"]["name"] == "amount" else 1
    client.post_entities({"entities": estate["entities"], "referredEntities": {}})
    register_typedefs(client)
    return client


class _Counting:
    """A client that counts bulk lookups (and can fail them)."""

    def __init__(self, inner: Any, fail: bool = False) -> None:
        self.inner, self.fail, self.calls = inner, fail, []  # type: list[tuple[str, int]]

    def get_entities_by_qualified_names(self, type_name: str, names: list[str]) -> list[dict[str, Any]]:
        from atlas_bridge.errors import AtlasUnavailableError

        self.calls.append((type_name, len(names)))
        if self.fail:
            raise AtlasUnavailableError("connection refused")
        return self.inner.get_entities_by_qualified_names(type_name, names)  # type: ignore[no-any-return]


def test_hive_columns_are_read_in_bulk_in_their_position_order(atlas_stub: Any) -> None:
    from atlas_bridge.atlas.schema import read_atlas_schema

    client = _Counting(_hive_estate(atlas_stub, positions=True))
    wanted = [(None, "sales", "orders"), (None, "sales", "nothere"), (None, "x", "y"), (None, None, "bare")]
    tables, unordered, warnings = read_atlas_schema(client, wanted, namespace="primary", batch=2)
    assert tables == [(None, "sales", "orders", [("amount", "double"), ("order_id", "bigint")])]
    assert unordered == set()
    assert warnings == []
    # 3 names with a db, 2 per request, two table types; then the found table's 2 columns in one request.
    assert client.calls == [
        ("atlas_bridge_table", 2),
        ("atlas_bridge_table", 1),
        ("hive_table", 2),
        ("hive_table", 1),
        ("hive_column", 2),
    ]


def test_columns_without_positions_resolve_names_but_an_insert_maps_them_by_name(atlas_stub: Any) -> None:
    from atlas_bridge.atlas.schema import read_atlas_schema

    client = _hive_estate(atlas_stub)
    tables, unordered, _ = read_atlas_schema(client, [(None, "sales", "orders")], namespace="primary")
    assert tables == [(None, "sales", "orders", [("amount", "double"), ("order_id", "bigint")])]
    assert unordered == {(None, "sales", "orders")}
    index = schema_index(tables, None, None, unordered)
    sql = "insert into sales.orders select id as order_id, total as amount from staging.o"
    lines = relation_lines(end_to_end(extract_sql_lineage(sql, None, index).lineage))
    assert "staging.o.id -> fdd -> sales.orders.order_id" in lines
    assert "staging.o.total -> fdd -> sales.orders.amount" in lines
    ordered = schema_index(tables, None, None)  # had the order been known, position would rule
    lines = relation_lines(end_to_end(extract_sql_lineage(sql, None, ordered).lineage))
    assert "staging.o.id -> fdd -> sales.orders.amount" in lines


def test_our_own_columns_are_read_back_with_their_types(atlas_stub: Any) -> None:
    from atlas_bridge.atlas.client import AtlasClient
    from atlas_bridge.atlas.convert import to_atlas_batches
    from atlas_bridge.atlas.schema import read_atlas_schema
    from atlas_bridge.atlas.typedefs import register_typedefs

    client = AtlasClient(atlas_stub.base_url, retries=0, backoff=0)
    register_typedefs(client)
    sql = "create table mart.t (a int, b string); insert into mart.t select x, y from s.u"
    lineage = end_to_end(extract_sql_lineage(sql, "hive").lineage)
    for batch in to_atlas_batches(lineage, namespace="primary"):
        client.post_entities(batch)
    tables, unordered, warnings = read_atlas_schema(client, [(None, "mart", "t")], namespace="primary")
    assert tables == [(None, "mart", "t", [("a", "INT"), ("b", "STRING")])]
    assert unordered == set()  # our columns carry their position where the DDL told it (issue 32)
    assert warnings == []
    # a table whose order no statement told (only read by name) stays unordered
    for batch in to_atlas_batches(
        end_to_end(extract_sql_lineage("insert into mart.w select x from s.v", "hive").lineage),
        namespace="primary",
    ):
        client.post_entities(batch)
    _, unordered, _ = read_atlas_schema(client, [(None, "s", "v")], namespace="primary")
    assert unordered == {(None, "s", "v")}


def test_a_failing_atlas_is_a_warning_not_a_crash(atlas_stub: Any) -> None:
    from atlas_bridge.atlas.schema import read_atlas_schema

    client = _Counting(_hive_estate(atlas_stub), fail=True)
    tables, unordered, warnings = read_atlas_schema(client, [(None, "sales", "orders")], namespace="primary")
    assert (tables, unordered) == ([], set())
    assert len(warnings) == 1
    assert "connection refused" in warnings[0]
    assert len(client.calls) == 1  # no retry storm: the first failure ends the lookups


@pytest.mark.spark
def test_scan_reads_the_schema_of_tables_it_only_reads_from_atlas(
    session: object, atlas_stub: Any, tmp_path: Path
) -> None:
    import functools

    from atlas_bridge import bridge
    from atlas_bridge.atlas.schema import read_atlas_schema
    from atlas_bridge.atlas.sink import FileSink

    client = _hive_estate(atlas_stub, positions=True)
    estate = tmp_path / "estate"
    estate.mkdir()
    (estate / "q.sql").write_text(
        "INSERT INTO mart.x SELECT amount, region FROM sales.orders o JOIN sales.regions r "
        "ON o.order_id = r.region_id;\n",
        encoding="utf-8",
    )

    def run(name: str, reader: Any) -> tuple[bridge.ScanSummary, set[str]]:
        out = tmp_path / name
        delivery = bridge.SinkDelivery(FileSink(out), f"files:{out}")
        summary = bridge.scan(
            [estate],
            delivery,
            namespace="primary",
            spark=session,
            schema_reader=reader,  # type: ignore[arg-type]
        )
        qns = {
            e["attributes"]["qualifiedName"]
            for p in out.glob("*-entities.json")
            for e in json.loads(p.read_text())["entities"]
        }
        return summary, qns

    reader = functools.partial(read_atlas_schema, client, namespace="primary")
    with_atlas, qns = run("atlas", reader)
    assert with_atlas.extract.schema is not None
    assert with_atlas.extract.schema.from_atlas == 1
    assert with_atlas.extract.schema.tables == 0  # no DDL in the estate
    assert with_atlas.to_dict()["schema"]["from_atlas"] == 1
    # amount is a column of sales.orders (Atlas says so), so region must be sales.regions'.
    assert {"sales.orders.amount@primary", "sales.regions.region@primary"} <= qns
    _, qns = run("plain", None)
    assert not {"sales.orders.amount@primary", "sales.regions.region@primary"} & qns  # not placed


def test_views_and_ctas_a_sqlflow_export_creates_are_learned_but_not_tables_it_only_reads(
    tmp_path: Path,
) -> None:
    from atlas_bridge.sqlflow.write import to_sqlflow_json, to_sqlflow_xml

    sql = "create view s.v as select a, b from s.t; create table s.c as select x from s.u"
    lineage = extract_sql_lineage(sql).lineage
    (tmp_path / "export.json").write_text(to_sqlflow_json(lineage), encoding="utf-8")
    (tmp_path / "export.xml").write_text(to_sqlflow_xml(lineage), encoding="utf-8")
    for name, kind in (("export.json", InputKind.SQLFLOW), ("export.xml", InputKind.SQLFLOW)):
        f = tmp_path / name
        learned, _ = learn_locally([WorkUnit(InputFile(str(f), name, kind, f.stat().st_size))], ScanOptions())
        # s.t and s.u are only read: SQLFlow lists the columns the lineage touched, not the whole table.
        assert learned == [(None, "s", "c", [("x", None)]), (None, "s", "v", [("a", None), ("b", None)])]
    # SQL DDL wins over an export for the same table, whatever the file order.
    (tmp_path / "z.sql").write_text("create view s.v as select a, b, c from s.t;", encoding="utf-8")
    files = [tmp_path / "export.json", tmp_path / "z.sql"]
    units = [
        WorkUnit(InputFile(str(f), f.name, InputKind.SQLFLOW if f.suffix == ".json" else InputKind.SQL, 1))
        for f in files
    ]
    learned, _ = learn_locally(units, ScanOptions())
    assert (None, "s", "v", [("a", None), ("b", None), ("c", None)]) in learned


def test_a_column_copied_from_a_typed_column_has_its_type_and_computed_ones_have_none() -> None:
    from atlas_bridge.extractors.sql import learn_schema

    schema = {"s": {"t": {"a": "INT", "b": "STRING", "c": "BIGINT"}}}
    sql = (
        "create view s.v as select a, x.b, sum(c) as total from (select a, b, c from s.t) x group by a, b;"
        "create table s.u as select a from s.t union all select c from s.t"
    )
    tables, pending = learn_schema(sql, None, schema)
    assert not pending
    # Through a subquery, an exact copy keeps its type; an aggregate's type is not guessed; the branches
    # of a UNION disagree (INT, BIGINT), so no type either.
    assert tables == [
        (None, "s", "v", [("a", "INT"), ("b", "STRING"), ("total", None)]),
        (None, "s", "u", [("a", None)]),
    ]
    lineage = extract_sql_lineage(sql, None, schema).lineage
    view = next(d for d in lineage.datasets if d.name == "v")
    assert {c.name: c.data_type for c in view.columns if not c.system} == {
        "a": "INT",
        "b": "STRING",
        "total": None,
    }


def test_extraction_reports_what_it_defines_and_what_it_looked_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the scan decides re-extraction on: the tables a script read that its own DDL did not define
    (found in the schema given or not at all), not the target a CTAS is about to define."""
    from atlas_bridge.extractors.sql import extract_and_learn, schema

    sql = (
        "create table s.t (a int);\n"
        "insert into s.u select a from s.t;\n"  # s.t: own DDL (no look-up); s.u: looked up (maybe known)
        "create table s.c as select x from s.w;\n"  # s.w read; s.c being defined: not a look-up
        "select * from s.c join k.known using (x)"  # s.c: own; k.known: given
    )
    given = {"k": {"known": {"x": "INT", "y": "INT"}}}
    result, defined, looked = extract_and_learn(sql, "spark", given)
    assert [t[:3] for t in defined] == [(None, "s", "t"), (None, "s", "c")]
    assert looked == [(None, "s", "u"), (None, "s", "w"), (None, "k", "known")]
    assert result == extract_sql_lineage(sql, "spark", given)  # the same lineage either way

    monkeypatch.setattr(schema, "MAX_LOOKUPS", 2)
    _, _, looked = extract_and_learn(sql, "spark", given)
    assert looked == [(None, "s", "u"), (None, "s", "w"), schema.OVERFLOW]


CLOSED = DATA / "views_closed"
_NOT_IN_DEFINITION = "has no such column in its definition (a view or CREATE TABLE AS SELECT)"


def test_a_view_or_ctas_table_has_the_columns_of_its_definition_only() -> None:
    """A read of v.b added b to the view r.v whose definition selects a only (issue 29): a warning now, in
    the defining script and in any other; a plain table's DDL still takes any column read."""
    files = sorted(CLOSED.glob("*.sql"))
    learned, _ = learn_locally(_units(files), ScanOptions())
    index = schema_index(learned, None)
    parts, warnings = [], []
    for f in files:
        r = extract_sql_lineage(f.read_text(encoding="utf-8"), None, index, file=f.name)
        parts.append(r.lineage)
        warnings += [(p.file, p.statement_index, p.kind, p.message) for p in r.problems]
    columns = {d.id: sorted(c.name for c in d.columns if not c.system) for d in merge_lineage(parts).datasets}
    assert columns["table:r.v"] == columns["table:r.c"] == ["a"]
    assert columns["table:s.plain"] == ["a", "b"]
    assert warnings == [
        ("a_view.sql", 3, "orphan_column", f"column 'b' cannot be placed: r.v {_NOT_IN_DEFINITION}"),
        ("b_reads.sql", 1, "orphan_column", f"column 'b' cannot be placed: r.v {_NOT_IN_DEFINITION}"),
        ("b_reads.sql", 2, "orphan_column", f"column 'b' cannot be placed: r.c {_NOT_IN_DEFINITION}"),
    ]


@pytest.mark.spark
def test_scan_sends_a_view_with_the_columns_of_its_definition(session: object, tmp_path: Path) -> None:
    """The scan learns which tables are views or CTAS from the units' own extraction (across files)."""
    from atlas_bridge import bridge
    from atlas_bridge.atlas.sink import FileSink

    delivery = bridge.SinkDelivery(FileSink(tmp_path), f"files:{tmp_path}")
    summary = bridge.scan([CLOSED], delivery, namespace="test", spark=session)  # type: ignore[arg-type]
    entities = [
        e for p in sorted(tmp_path.glob("*-entities.json")) for e in json.loads(p.read_text())["entities"]
    ]
    columns = {e["attributes"]["qualifiedName"] for e in entities if e["typeName"] == "atlas_bridge_column"}
    assert {c for c in columns if c.startswith(("r.v.", "r.c."))} == {"r.v.a@test", "r.c.a@test"}
    assert "s.plain.b@test" in columns
    assert sorted((Path(p.file or "").name, p.statement_index) for p in summary.warnings) == [
        ("a_view.sql", 3),
        ("b_reads.sql", 1),
        ("b_reads.sql", 2),
    ]
