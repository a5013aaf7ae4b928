"""The batch bridge (``atlas-bridge scan``): discovery, query logs, the Spark job, delivery and resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from atlas_bridge import bridge
from atlas_bridge.bridge import InputKind, ScanOptions, WorkUnit

DATA = Path(__file__).parent / "data" / "scan"
TREE = DATA / "tree"


def _rel(files: list[bridge.InputFile]) -> dict[str, str]:
    return {Path(f.path).relative_to(TREE.resolve()).as_posix(): f.kind for f in files}


# ---------------------------------------------------------------------------------------------- discovery


def test_discovery_finds_every_kind_and_tells_logs_from_sqlflow() -> None:
    files, notes = bridge.discover_inputs([TREE])
    assert _rel(files) == {
        "a/x.sql": InputKind.SQL,
        "a/y.hql": InputKind.SQL,
        "b/z.ddl": InputKind.SQL,
        "b/z_test.sql": InputKind.SQL,
        "exports/flow.json": InputKind.SQLFLOW,
        "exports/flow.xml": InputKind.SQLFLOW,
        "logs/log_as.json": InputKind.QUERY_LOG,  # JSON lines with a "sql" field, despite .json
        "logs/q.csv": InputKind.QUERY_LOG,
        "logs/q.jsonl": InputKind.QUERY_LOG,
    }
    # hidden directories and unknown suffixes are not taken; a schema mapping is named, not scanned
    assert [n for n in notes if "schema.json" in n] == [n for n in notes if "schema mapping" in n]
    assert len(notes) == 1
    # sorted by name: deterministic order whatever the file system gives
    assert [f.name for f in files] == sorted(f.name for f in files)


def test_include_and_exclude_globs() -> None:
    files, _ = bridge.discover_inputs([TREE], include=["a/*", "*.ddl", "*.sql"], exclude=["*_test.sql"])
    assert sorted(_rel(files)) == ["a/x.sql", "a/y.hql", "b/z.ddl"]
    files, _ = bridge.discover_inputs([TREE], exclude=["logs/*", "exports/*"])
    assert all(k == InputKind.SQL for k in _rel(files).values())
    assert len(files) == 4


def test_a_file_named_twice_is_scanned_once_and_missing_paths_are_refused() -> None:
    files, _ = bridge.discover_inputs([TREE / "a", TREE / "a" / "x.sql", TREE / "a"])
    assert sorted(_rel(files)) == ["a/x.sql", "a/y.hql"]
    from atlas_bridge.errors import ConfigError

    with pytest.raises(ConfigError, match="no-such-dir"):
        bridge.discover_inputs([TREE / "no-such-dir"])


def test_query_field_option_decides_what_a_json_file_is(tmp_path: Path) -> None:
    log = tmp_path / "events.json"
    log.write_text('{"qtext": "INSERT INTO a SELECT b FROM c"}\n', encoding="utf-8")
    assert bridge.classify_file(log) == InputKind.SQLFLOW
    assert bridge.classify_file(log, query_field="QText") == InputKind.QUERY_LOG


# ---------------------------------------------------------------------------------------------- query logs


def _records(path: Path, **opts: object) -> tuple[list[bridge.LogRecord], list[str]]:
    problems: list = []
    f = bridge.InputFile(str(path), path.name, InputKind.QUERY_LOG, path.stat().st_size)
    recs = list(bridge.read_query_log(WorkUnit(f, 0, f.size), ScanOptions(**opts), problems))  # type: ignore[arg-type]
    return recs, [f"{p.line}: {p.message}" for p in problems]


def test_jsonl_query_log_reads_query_user_time_and_names_bad_lines() -> None:
    recs, problems = _records(DATA / "queries.jsonl")
    assert [(r.line, r.user, r.time_ms) for r in recs] == [
        (1, "ann", 1717405200000),
        (3, "bob", 1717405200000),
        (6, "dan", 1717405400000),
    ]
    assert recs[0].query.startswith("INSERT INTO sales.daily")
    assert [p.split(":")[0] for p in problems] == ["4", "5"]
    assert "not a JSON object" in problems[0]
    assert "no query text" in problems[1]


def test_csv_query_log_detects_columns_and_keeps_multiline_queries() -> None:
    recs, problems = _records(DATA / "queries.csv")
    assert [(r.line, r.user) for r in recs] == [(2, "ann"), (6, "carl")]
    assert recs[0].query == "INSERT INTO sales.daily\nSELECT d, SUM(x) AS x\nFROM sales.raw GROUP BY d"
    assert recs[0].time_ms == 1717405200000
    assert recs[1].time_ms == 1717405500000
    assert recs[1].query == "SELECT \"quoted\", 'a,b' FROM sales.daily"
    assert problems == ["5: record has no query text"]


def test_csv_without_a_query_column_is_one_clear_problem(tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    log.write_text("a,b\n1,2\n", encoding="utf-8")
    recs, problems = _records(log)
    assert recs == []
    assert len(problems) == 1
    assert problems[0].startswith("1: no query text column")
    recs, problems = _records(log, query_field="b")
    assert [r.query for r in recs] == ["2"]


def test_large_jsonl_logs_split_into_byte_ranges_that_lose_and_repeat_nothing(tmp_path: Path) -> None:
    log = tmp_path / "big.jsonl"
    lines = [json.dumps({"query": f"INSERT INTO t{i} SELECT x FROM s{'y' * (i % 17)}"}) for i in range(200)]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    f = bridge.InputFile(str(log), log.name, InputKind.QUERY_LOG, log.stat().st_size)
    options = ScanOptions(chunk_bytes=997)  # ranges start and end mid-line
    units = bridge.plan_units([f], options)
    assert len(units) > 5
    seen: list[tuple[int, str]] = []
    for unit in units:
        seen.extend((r.line, r.query) for r in bridge.read_query_log(unit, options, []))
    assert seen == [(i + 1, f"INSERT INTO t{i} SELECT x FROM s{'y' * (i % 17)}") for i in range(200)]


# ---------------------------------------------------------------------------------------------- planning


def test_partitions_are_contiguous_and_balanced_by_bytes() -> None:
    files = [
        bridge.InputFile(f"/x/{i:03}", f"{i:03}", InputKind.SQL, 100 if i % 2 else 300) for i in range(40)
    ]
    units = bridge.plan_units(files, ScanOptions())
    parts = bridge.partition_units(units, 4)
    assert [u for p in parts for u in p] == units  # order kept: merge order independent of parallelism
    sizes = [sum(u.end - u.start for u in p) for p in parts]
    assert max(sizes) - min(sizes) <= 300
    assert bridge.partition_units(units[:2], 8) == [[units[0]], [units[1]]]


def test_the_last_partitions_are_smaller_so_the_cores_finish_together() -> None:
    """Tasks start in partition order: a job that ends on short tasks leaves no core idle for long."""
    files = [bridge.InputFile(f"/x/{i:03}", f"{i:03}", InputKind.SQL, 1000) for i in range(101)]
    units = bridge.plan_units(files, ScanOptions())
    even = bridge.partition_units(units, 22)
    tapered = bridge.partition_units(units, 22, taper=2)
    assert [u for p in tapered for u in p] == units  # order kept
    assert tapered[:20] == even[:20]  # the bulk is cut as before
    assert [len(p) for p in tapered[20:]] == [3, 2, 1, 1, 1, 1]  # two partitions' worth, in halves, quarters
    assert max(len(p) for p in even[20:]) >= 4
    few = units[:3]  # too few units to cut the tail smaller
    assert bridge.partition_units(few, 2, taper=2) == bridge.partition_units(few, 2) == [few[:2], few[2:]]


def test_statement_count_ignores_semicolons_in_strings_and_comments() -> None:
    text = (TREE / "a" / "x.sql").read_text(encoding="utf-8")
    assert bridge.count_statements(text) == 1
    assert bridge.count_statements("a; b;\n-- c;\n/* d; */ 'e;'; `f;g`") == 4
    assert bridge.count_statements("  \n-- only a comment\n") == 0


# ---------------------------------------------------------------------------------------------- resume state


def test_sent_state_survives_a_torn_last_line_and_is_kept_per_target(tmp_path: Path) -> None:
    state = bridge.SentState.for_target(tmp_path, "atlas:http://a|ns")
    state.record("h1", 3)
    state.record("h2", 4)
    state.close()
    with open(state.path, "a", encoding="utf-8") as fh:
        fh.write('{"hash": "h3", "enti')  # the process died while writing
    again = bridge.SentState.for_target(tmp_path, "atlas:http://a|ns")
    assert "h1" in again
    assert "h2" in again
    assert "h3" not in again
    assert len(bridge.SentState.for_target(tmp_path, "atlas:http://b|ns")) == 0


class _Memory:
    target = "memory:unit"

    def __init__(self, fail_at: int | None = None) -> None:
        self.sent: list[dict] = []  # type: ignore[type-arg]
        self.fail_at = fail_at

    def send(self, b: dict) -> tuple[int, int] | None:  # type: ignore[type-arg]
        if self.fail_at is not None and len(self.sent) == self.fail_at:
            from atlas_bridge.errors import AtlasUnavailableError

            raise AtlasUnavailableError("down")
        self.sent.append(b)
        return (len(b["entities"]), 0)

    def close(self) -> None:
        pass


def test_deliver_resumes_after_a_failure_and_keeps_the_state_file_small(tmp_path: Path) -> None:
    batches = [
        {"entities": [{"typeName": "t", "attributes": {"n": i}}], "referredEntities": {}} for i in range(5)
    ]
    state = bridge.SentState.for_target(tmp_path, "memory:unit")
    state.record("hash-of-a-batch-of-last-year", 1)
    first = bridge.deliver(batches, _Memory(fail_at=2), state)
    assert (first.sent, first.created, len(first.errors)) == (2, 2, 1)
    again = _Memory()
    second = bridge.deliver(batches, again, state)
    assert (second.skipped, second.sent, second.created, second.unchanged) == (2, 3, 3, 2)
    assert again.sent == batches[2:]
    state.close()
    lines = state.path.read_text(encoding="utf-8").splitlines()
    assert sorted(json.loads(line)["hash"] for line in lines) == sorted(bridge.batch_hash(b) for b in batches)


def test_batch_hash_is_the_content_not_the_key_order() -> None:
    a = {"entities": [{"typeName": "t", "attributes": {"x": 1, "y": 2}}], "referredEntities": {}}
    b = {"referredEntities": {}, "entities": [{"attributes": {"y": 2, "x": 1}, "typeName": "t"}]}
    assert bridge.batch_hash(a) == bridge.batch_hash(b)
    b["entities"][0]["attributes"]["y"] = 3  # type: ignore[index]
    assert bridge.batch_hash(a) != bridge.batch_hash(b)


# ---------------------------------------------------------------------------------------------- on Spark

REPO = Path(__file__).resolve().parent.parent
WAREHOUSE = REPO / "examples" / "warehouse"
NS = "test"


@pytest.fixture
def session(request: pytest.FixtureRequest) -> object:
    """The run's one Spark session (tests/fixtures_spark.py); skipped until that fixture exists."""
    try:
        return request.getfixturevalue("spark")
    except pytest.FixtureLookupError:
        pytest.skip("the session-scoped 'spark' fixture is not available")


def _warehouse_options() -> ScanOptions:
    return ScanOptions(schema=json.loads((WAREHOUSE / "schema.json").read_text(encoding="utf-8")))


class _Stop(Exception):
    """Stands for the process dying mid-delivery."""


class _Recording:
    """A delivery that keeps what it was given (and can die after ``die_after`` batches)."""

    def __init__(self, inner: bridge.Delivery | None = None, die_after: int | None = None) -> None:
        self.inner = inner
        self.target = inner.target if inner is not None else "memory:test"  # resume state is per target
        self.die_after = die_after
        self.sent: list[str] = []

    def send(self, b: dict) -> tuple[int, int] | None:  # type: ignore[type-arg]
        if self.die_after is not None and len(self.sent) >= self.die_after:
            raise _Stop
        result = self.inner.send(b) if self.inner is not None else None
        self.sent.append(bridge.batch_hash(b))
        return result

    def close(self) -> None:
        pass


def _atlas(stub: object) -> tuple[object, bridge.SinkDelivery]:
    from atlas_bridge.atlas.client import AtlasClient
    from atlas_bridge.atlas.sink import AtlasSink
    from atlas_bridge.atlas.typedefs import register_typedefs

    client = AtlasClient(stub.base_url, retries=0, backoff=0)  # type: ignore[attr-defined]
    register_typedefs(client)
    return client, bridge.SinkDelivery(AtlasSink(client, spool_dir=None), f"atlas:{stub.base_url}")  # type: ignore[attr-defined]


def _upstream(client: object, type_name: str, qualified_name: str) -> set[str]:
    """qualifiedNames of every entity upstream of one, through the lineage API."""
    lineage = client.get_lineage_by_qualified_name(type_name, qualified_name, direction="INPUT", depth=12)  # type: ignore[attr-defined]
    names = {g: e["attributes"]["qualifiedName"] for g, e in lineage["guidEntityMap"].items()}
    return set(names.values()) - {qualified_name}


@pytest.mark.spark
def test_scan_warehouse_into_atlas_then_again_changes_nothing(
    session: object, atlas_stub: object, tmp_path: Path
) -> None:
    from atlas_bridge.naming import column_qualified_name, table_qualified_name

    client, delivery = _atlas(atlas_stub)
    summary = bridge.scan(
        [WAREHOUSE], delivery, namespace=NS, spark=session, options=_warehouse_options(), state_dir=tmp_path
    )
    assert summary.errors == [], [str(p) for p in summary.errors]
    assert summary.delivery.errors == []
    assert summary.delivery.created > 0
    assert summary.extract.statements >= 20

    fct = table_qualified_name("marts", "fct_orders", NS)
    view = table_qualified_name("reporting", "v_customer_revenue", NS)
    # table level, end to end: landing path -> staging -> mart -> view
    up = _upstream(client, "atlas_bridge_table", view)
    assert fct in up
    assert {table_qualified_name("staging", t, NS) for t in ("stg_orders", "stg_order_items")} <= up
    assert table_qualified_name("marts", "dim_customer", NS) in up
    # column level: the view's revenue comes from the mart's amount, which comes from the order lines
    col_up = _upstream(client, "atlas_bridge_column", column_qualified_name(view, "revenue"))
    assert column_qualified_name(fct, "order_amount") in col_up
    items = table_qualified_name("staging", "stg_order_items", NS)
    assert {column_qualified_name(items, c) for c in ("quantity", "unit_price", "discount")} <= col_up
    assert column_qualified_name(items, "line_no") not in col_up

    entities = {e["guid"] for e in atlas_stub.active_entities()}  # type: ignore[attr-defined]
    posts = len(atlas_stub.requests_to("POST", "/entity/bulk"))  # type: ignore[attr-defined]

    # Same input, same state: every batch was acknowledged already, nothing is sent.
    again = bridge.scan(
        [WAREHOUSE], delivery, namespace=NS, spark=session, options=_warehouse_options(), state_dir=tmp_path
    )
    assert again.delivery.sent == 0
    assert again.delivery.skipped == summary.delivery.batches
    assert len(atlas_stub.requests_to("POST", "/entity/bulk")) == posts  # type: ignore[attr-defined]

    # Without the state (another machine, --no-resume): sent again, and Atlas creates nothing new.
    fresh = bridge.scan(
        [WAREHOUSE],
        delivery,
        namespace=NS,
        spark=session,
        options=_warehouse_options(),
        resume=False,
        state_dir=tmp_path,
    )
    assert fresh.delivery.sent == summary.delivery.batches
    assert fresh.delivery.created == 0
    assert {e["guid"] for e in atlas_stub.active_entities()} == entities  # type: ignore[attr-defined]


@pytest.mark.spark
@pytest.mark.parametrize("corpus", ["warehouse", "schema learning"])
@pytest.mark.parametrize("max_entities", [7, 1000])
def test_texts_the_local_tasks_write_give_the_bodies_of_texts_sent_with_the_results(
    session: object, tmp_path: Path, corpus: str, max_entities: int
) -> None:
    """On a local master the tasks write the process groups' texts beside the driver's spill and send only
    where they are; the bodies are those of texts sent with the results (as from a cluster's executors),
    byte for byte: whole groups, groups cut apart (7 entities a body), and units extracted again because
    the learned schema answers their look-ups otherwise."""
    from atlas_bridge.atlas.encoded import encode_body
    from atlas_bridge.bridge.job import extract_entities
    from atlas_bridge.bridge.merge import EntityCollector

    if corpus == "warehouse":
        paths, options = [WAREHOUSE], _warehouse_options()
    else:
        paths, options = [REPO / "tests" / "data" / "schema_learning" / "estate"], ScanOptions()
    files, _ = bridge.discover_inputs(paths)
    units = bridge.plan_units(files, options, ship_content=False)

    def run(on_disk: bool, where: Path) -> tuple[list[bytes], int, list[str]]:
        collector = EntityCollector(where)
        stats = extract_entities(
            session,  # type: ignore[arg-type]
            units,
            options,
            collector,
            namespace=NS,
            learn=options.learn_schema,
            texts_on_disk=on_disk,
        )
        collector.finish()
        written = sorted(p.name for p in collector.task_dir.iterdir())
        rounds = stats.schema.rounds if stats.schema is not None else 0
        return [encode_body(b) for b in collector.batches(max_entities)], rounds, written

    on_disk, rounds, written = run(True, tmp_path / "on_disk")
    sent, rounds_sent, none = run(False, tmp_path / "sent")
    assert len(sent) >= (1 if max_entities == 1000 else 5)
    assert on_disk == sent
    assert written  # the texts were read from the tasks' files ...
    assert not none  # ... and were not there when they travelled with the results
    assert rounds == rounds_sent >= (1 if corpus == "warehouse" else 2)  # some units extracted again


@pytest.mark.spark
def test_a_text_the_task_wrote_already_is_not_written_again(session: object, tmp_path: Path) -> None:
    """The same script in three places (one job checked in many times): a task writes each process's text
    once, the first copy's (the others travel with the results, and the driver keeps the first), and
    the bodies are those of the first copy alone."""
    from atlas_bridge.atlas.encoded import encode_body
    from atlas_bridge.bridge.job import extract_entities
    from atlas_bridge.bridge.merge import EntityCollector

    script = next(p for p in sorted(WAREHOUSE.rglob("*.sql")) if "INSERT" in p.read_text(encoding="utf-8"))
    for copy in range(3):
        (tmp_path / "in" / f"c{copy}").mkdir(parents=True)
        (tmp_path / "in" / f"c{copy}" / script.name).write_bytes(script.read_bytes())
    # the first copy alone, at the same path below the scanned folder (its processes' sourceFile)
    (tmp_path / "alone" / "c0").mkdir(parents=True)
    (tmp_path / "alone" / "c0" / script.name).write_bytes(script.read_bytes())
    options = _warehouse_options()

    def run(directory: Path, where: Path, on_disk: bool) -> tuple[list[bytes], int]:
        files, _ = bridge.discover_inputs([directory])
        units = bridge.plan_units(files, options, ship_content=False)
        collector = EntityCollector(where)
        extract_entities(
            session,  # type: ignore[arg-type]
            units,
            options,
            collector,
            namespace=NS,
            partitions=1,
            texts_on_disk=on_disk,
        )
        collector.finish()
        written = sum(p.stat().st_size for p in collector.task_dir.iterdir())
        return [encode_body(b) for b in collector.batches(1000)], written

    three, written = run(tmp_path / "in", tmp_path / "three", True)
    one, written_once = run(tmp_path / "alone", tmp_path / "one", True)
    assert written_once > 1000
    assert written == written_once
    assert three == one == run(tmp_path / "in", tmp_path / "sent", False)[0]


@pytest.mark.spark
def test_warehouse_lineage_starts_at_the_landing_paths(session: object, atlas_stub: object) -> None:
    """paths -> staging -> mart -> view: external tables' LOCATION and LOAD DATA INPATH feed staging."""
    from atlas_bridge.naming import path_qualified_name, table_qualified_name

    client, delivery = _atlas(atlas_stub)
    summary = bridge.scan([WAREHOUSE], delivery, namespace=NS, spark=session, options=_warehouse_options())
    assert summary.delivery.errors == []
    view = table_qualified_name("reporting", "v_customer_revenue", NS)
    up = _upstream(client, "atlas_bridge_table", view)
    assert path_qualified_name("hdfs://nameservice1/data/landing/orders", NS) in up
    assert path_qualified_name("hdfs://nameservice1/data/landing/order_items", NS) in up
    assert path_qualified_name("hdfs://nameservice1/data/inbound/crm/customers", NS) in up


@pytest.mark.spark
def test_a_delivery_that_dies_halfway_resumes_without_sending_twice(
    session: object, atlas_stub: object, tmp_path: Path
) -> None:
    _client, atlas = _atlas(atlas_stub)
    options = _warehouse_options()
    dying = _Recording(atlas, die_after=3)
    with pytest.raises(_Stop):
        bridge.scan(
            [WAREHOUSE],
            dying,
            namespace=NS,
            spark=session,
            options=options,
            state_dir=tmp_path,
            max_entities=20,
        )
    assert len(dying.sent) == 3
    created_before = len(atlas_stub.active_entities())  # type: ignore[attr-defined]

    second = _Recording(atlas)
    summary = bridge.scan(
        [WAREHOUSE], second, namespace=NS, spark=session, options=options, state_dir=tmp_path, max_entities=20
    )
    assert summary.delivery.skipped == 3
    assert summary.delivery.batches > 6
    assert summary.delivery.errors == []
    assert not set(second.sent) & set(dying.sent)  # nothing sent twice
    assert len(second.sent) == summary.delivery.batches - 3
    # what the two runs sent together is exactly one whole run's batches
    reference = _Recording()
    calls: list[tuple[str, int, int]] = []
    bridge.scan(
        [WAREHOUSE],
        reference,
        namespace=NS,
        spark=session,
        options=options,
        max_entities=20,
        progress=lambda *c: calls.append(c),
    )
    assert dying.sent + second.sent == reference.sent
    # progress: every phase reported, each ending complete (extraction's total is an estimate until then)
    assert {c[0] for c in calls} == {"extract", "merge", "deliver"}
    for phase in ("extract", "merge", "deliver"):
        mine = [(d, t) for p, d, t in calls if p == phase]
        assert mine[-1][0] == mine[-1][1] == max(d for d, _ in mine)
        assert all(d <= t for d, t in mine)
    assert summary.delivery.created == len(atlas_stub.active_entities()) - created_before  # type: ignore[attr-defined]


@pytest.mark.spark
def test_atlas_going_down_mid_run_stops_cleanly_and_the_rerun_completes(
    session: object, atlas_stub: object, tmp_path: Path
) -> None:
    _client, atlas = _atlas(atlas_stub)

    class GoesDown(_Recording):
        def send(self, b: dict) -> tuple[int, int] | None:  # type: ignore[type-arg]
            if len(self.sent) == 2:
                atlas_stub.refuse_connections()  # type: ignore[attr-defined]
            return super().send(b)

    first = bridge.scan(
        [WAREHOUSE],
        GoesDown(atlas),
        namespace=NS,
        spark=session,
        options=_warehouse_options(),
        state_dir=tmp_path,
        max_entities=20,
    )
    assert first.delivery.sent == 2
    assert len(first.delivery.errors) == 1
    assert "re-run to resume" in first.delivery.errors[0]
    assert first.failed("error")
    assert not first.failed("never")

    atlas_stub.clear_faults()  # type: ignore[attr-defined]
    second = bridge.scan(
        [WAREHOUSE],
        atlas,
        namespace=NS,
        spark=session,
        options=_warehouse_options(),
        state_dir=tmp_path,
        max_entities=20,
    )
    assert second.delivery.skipped == 2
    assert second.delivery.sent == second.delivery.batches - 2
    assert not second.failed("error")


@pytest.mark.spark
def test_cli_scan_writes_payloads_and_summary_and_rewrites_them_identically(
    session: object, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from atlas_bridge.cli import cli

    out = tmp_path / "out"
    runner = CliRunner()
    result = runner.invoke(cli, ["scan", str(WAREHOUSE), "--to", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["errors"] == []
    assert summary["files"]["by_kind"] == {"query_log": 1, "sql": 10}
    assert summary["processes"] > 5
    assert summary["entities"]["written_to_files"] == summary["entities"]["total"] > 0
    assert "statements:" in result.output
    assert "summary.json" in result.output
    payloads = {p.name: p.read_bytes() for p in out.glob("*-entities.json")}
    assert payloads

    result = runner.invoke(cli, ["scan", str(WAREHOUSE), "--to", str(out)])
    assert result.exit_code == 0, result.output
    assert {p.name: p.read_bytes() for p in out.glob("*-entities.json")} == payloads


@pytest.mark.spark
def test_cli_exit_code_follows_fail_on(session: object, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from atlas_bridge.cli import cli

    bad = tmp_path / "bad.sql"
    bad.write_text("INSERT INTO t2 SELECT a FROM t1;\nSELEC oops FROM;\n", encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(cli, ["scan", str(bad), "--to", str(tmp_path / "o1")])
    assert result.exit_code == 1, result.output
    assert "bad.sql:2" in result.output
    errors = json.loads((tmp_path / "o1" / "summary.json").read_text(encoding="utf-8"))["errors"]
    assert [(e["line"], e["kind"]) for e in errors] == [(2, errors[0]["kind"])]
    result = runner.invoke(cli, ["scan", str(bad), "--to", str(tmp_path / "o2"), "--fail-on", "never"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["scan", str(bad), "--to", "atlas"])
    assert result.exit_code == 2
    assert "ATLAS_BRIDGE_REST_ADDRESS" in result.output


@pytest.mark.spark
def test_cli_scan_to_atlas_with_an_address_then_rerun_sends_nothing(
    session: object, atlas_stub: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from atlas_bridge.cli import cli

    monkeypatch.setenv("ATLAS_BRIDGE_REST_ADDRESS", atlas_stub.base_url)  # type: ignore[attr-defined]
    args = ["scan", str(WAREHOUSE), "--to", "atlas", "--out", str(tmp_path), "--namespace", NS]
    runner = CliRunner()
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    first = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert first["entities"]["created"] > 0
    assert first["target"] == f"atlas:{atlas_stub.base_url}"  # type: ignore[attr-defined]
    assert not list(tmp_path.glob("*-entities.json"))  # nothing written as files

    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    second = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert second["batches"]["sent"] == 0
    assert second["batches"]["skipped_already_acknowledged"] == first["batches"]["total"]
    assert second["entities"]["created"] == 0


def test_a_statement_repeated_across_scripts_merges_into_one_set_of_edges() -> None:
    from atlas_bridge.model import (
        Column,
        ColumnRef,
        Dataset,
        DatasetKind,
        Lineage,
        Relation,
        Span,
        merge_lineage,
    )

    def part(line: int) -> Lineage:
        cols = [Column(name="a")]
        s = Dataset(id="table:s", kind=DatasetKind.TABLE, name="s", columns=cols)
        t = Dataset(id="table:t", kind=DatasetKind.TABLE, name="t", columns=cols)
        rel = Relation(
            type="fdd",
            source=ColumnRef(dataset_id="table:s", column="a"),
            target=ColumnRef(dataset_id="table:t", column="a"),
            span=Span(line=line, column=1, end_line=line, end_column=9),
        )
        return Lineage(datasets=[s, t], relations=[rel])

    parts = [part(n) for n in (1, 7, 7, 30)]
    assert len(merge_lineage(parts).relations) == 3  # positions keep copies apart
    merged = merge_lineage(bridge.distinct_relations(parts, strip_spans=True))
    assert len(merged.relations) == 1
    assert merged.relations[0].span is None


# ---------------------------------------------------------------------------------------------- by parts


def _collect(
    units: list[WorkUnit], options: ScanOptions, partitions: int, spill: Path
) -> bridge.EntityCollector:
    """What the scan's driver folds, with the executors' work done here partition by partition."""
    collector = bridge.EntityCollector(spill)
    for group in bridge.partition_units(units, partitions):
        for tag, payload in bridge.extract_partition(group, options, NS):
            if tag == "unit":
                collector.add(json.loads(payload))
    collector.finish()
    return collector


def _without_guids(entity: dict) -> str:  # type: ignore[type-arg]
    e = json.loads(json.dumps(entity))
    del e["guid"]
    for value in e.get("relationshipAttributes", {}).values():
        for ref in value if isinstance(value, list) else [value]:
            ref.pop("guid", None)
    return json.dumps(e, sort_keys=True)


def test_converting_by_parts_gives_the_whole_conversion_whatever_the_partitions(tmp_path: Path) -> None:
    """Units converted one by one and merged on the driver = one conversion of the merged lineage; the
    partitioning changes nothing, and every batch stands alone (placeholders only within the batch)."""
    from atlas_bridge.atlas.convert import to_atlas_entities
    from atlas_bridge.graph import end_to_end
    from atlas_bridge.model import merge_lineage

    # The warehouse plus a second copy of one script: the same statements in two files are one process.
    tree = tmp_path / "tree"
    tree.mkdir()
    for p in sorted(WAREHOUSE.rglob("*")):
        if p.is_file():
            target = tree / p.relative_to(WAREHOUSE)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(p.read_bytes())
    copied = sorted(WAREHOUSE.rglob("*.sql"))[-1]
    (tree / "zz_copy.sql").write_bytes(copied.read_bytes())
    options = _warehouse_options()
    files, _ = bridge.discover_inputs([tree])
    units = bridge.plan_units(files, options)

    one = _collect(units, options, 1, tmp_path / "s1")
    many = _collect(units, options, 5, tmp_path / "s5")
    batches = list(one.batches(20))
    assert batches == list(many.batches(20))
    assert one.counts() == many.counts()
    assert len(batches) == one.batch_count(20) > 3

    merged = merge_lineage(end_to_end(bridge.extract_unit(u, options).lineage) for u in units)
    whole = to_atlas_entities(merged, namespace=NS)
    got = [e for b in batches for e in b["entities"]]
    assert sorted(map(_without_guids, got)) == sorted(map(_without_guids, whole))
    # A statement that writes from no source (CREATE TABLE, INSERT ... VALUES) is a process of the lineage
    # but no Atlas process (every Atlas process has inputs): only processes with edges are delivered.
    moving = {r.process_id for r in merged.relations}
    assert one.counts()["processes"] == len([p for p in merged.processes if p.id in moving])
    assert one.counts()["datasets"] == len(merged.datasets)

    for b in batches:
        defined = {e["guid"] for e in b["entities"]}
        for e in b["entities"]:
            for value in e.get("relationshipAttributes", {}).values():
                for ref in value if isinstance(value, list) else [value]:
                    if "guid" in ref:
                        assert ref["guid"] in defined


@pytest.mark.parametrize("max_bytes", [6_000, 20_000])
def test_streamed_batches_keep_under_the_byte_cap_and_stand_alone(tmp_path: Path, max_bytes: int) -> None:
    """The scan's bodies are cut by entity count and by size: each body's JSON stays under ``max_bytes``
    (unless one entity alone is bigger), the count is known before sending, the entities are those of
    the uncapped cut, and a placeholder guid is only used in the body that defines it."""
    options = _warehouse_options()
    files, _ = bridge.discover_inputs([WAREHOUSE])
    collector = _collect(bridge.plan_units(files, options), options, 2, tmp_path / "spill")
    uncapped = list(collector.batches(10_000, None))
    capped = list(collector.batches(10_000, max_bytes))
    assert len(uncapped) == 1 < len(capped) == collector.batch_count(10_000, max_bytes)
    for b in capped:
        size = len(json.dumps(dict(b), separators=(",", ":")))
        assert size <= max_bytes or len(b["entities"]) == 1, size
        defined = {e["guid"] for e in b["entities"]}
        for e in b["entities"]:
            for value in e.get("relationshipAttributes", {}).values():
                for ref in value if isinstance(value, list) else [value]:
                    assert ref.get("guid", next(iter(defined))) in defined
    names = [e["attributes"]["qualifiedName"] for b in capped for e in b["entities"]]
    assert sorted(set(names)) == sorted(e["attributes"]["qualifiedName"] for e in uncapped[0]["entities"])
