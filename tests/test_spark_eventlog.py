"""Spark event logs as scan inputs: which files are logs, every codec, rolling and cut logs, job runs.

The logs under tests/data/spark_eventlogs come from real runs (make_logs.py and scala_job.scala there).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from atlas_bridge import bridge
from atlas_bridge.bridge import InputKind
from atlas_bridge.model import ExtractionResult, Severity
from atlas_bridge.spark import eventlog
from atlas_bridge.spark.eventlog import ReadStats, RootRun, read_executions

LOGS = Path(__file__).parent / "data" / "spark_eventlogs"
SPARK43 = LOGS / "spark-4.3"
SPARK35 = LOGS / "spark-3.5"
CODEC_FILES = {p.name.rsplit(".", 1)[-1] if "." in p.name else "none": p for p in sorted(SPARK43.iterdir())}
PLAIN = CODEC_FILES["none"]


def _runs(path: Path, **kw: Any) -> tuple[list[RootRun], ReadStats]:
    stats = ReadStats()
    return list(read_executions(path, stats=stats, **kw)), stats


def _shape(runs: Sequence[RootRun]) -> list[tuple[Any, ...]]:
    """What a log's runs say, without the ids that differ from one application to the next."""
    return [
        (
            r.line,
            len(r.executions),
            r.failed,
            r.root.start.get("physicalPlanDescription"),
            [len(e.adaptive) for e in r.executions],
        )
        for r in runs
    ]


# ---------------------------------------------------------------------------------------------- detection


def test_every_codec_spark_writes_is_told_by_its_first_bytes_and_read_alike() -> None:
    assert sorted(CODEC_FILES) == ["lz4", "lzf", "none", "snappy", "zstd"]
    plain, _ = _runs(PLAIN)
    assert len(plain) == 7
    for codec, path in CODEC_FILES.items():
        assert eventlog.is_event_log(path), codec
        assert eventlog.codec_of(path.read_bytes()[:16]) == codec
        runs, stats = _runs(path)
        assert stats.problems == [], codec
        # the same job in each application: the same runs, lines and plans (ids aside)
        assert [s[:3] for s in _shape(runs)] == [s[:3] for s in _shape(plain)], codec
        assert all(r.app.app_id and path.name.startswith(r.app.app_id) for r in runs), codec


def test_what_is_not_a_log_is_not_taken_for_one(tmp_path: Path) -> None:
    (tmp_path / "notes").write_text("hello\n", encoding="utf-8")
    (tmp_path / "random.bin").write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 40)  # zstd magic, then garbage
    (tmp_path / "other.json").write_text('{"Event":"SomethingElse"}\n', encoding="utf-8")
    (tmp_path / "empty").write_bytes(b"")
    assert not any(eventlog.is_event_log(p) for p in tmp_path.iterdir())
    files, _ = bridge.discover_inputs([tmp_path])
    assert all(f.kind != InputKind.SPARK_EVENT_LOG for f in files)


def test_discovery_finds_logs_by_content_and_a_rolling_log_is_one_input() -> None:
    files, _ = bridge.discover_inputs([LOGS])
    logs = {f.source: f for f in files if f.kind == InputKind.SPARK_EVENT_LOG}
    rolling = [s for s in logs if s.rsplit("/", 1)[-1].startswith("eventlog_v2_")]
    assert len(rolling) == 1
    folder = Path(logs[rolling[0]].path)
    assert folder.is_dir()
    assert logs[rolling[0]].size == sum(p.stat().st_size for p in eventlog.events_files(folder))
    # no file of the rolling folder is an input of its own, and the job scripts here are not logs
    assert not any(Path(f.path).parent == folder for f in files)
    assert {Path(f.path).name for f in files}.isdisjoint({"make_logs.py", "scala_job.scala"})
    singles = {Path(f.path) for f in files if f.kind == InputKind.SPARK_EVENT_LOG} - {folder}
    expected = {
        p.resolve()
        for p in LOGS.rglob("*")
        if p.is_file() and p.parent.parent == LOGS and eventlog.is_event_log(p)
    }
    assert singles == expected
    assert len(singles) == 8  # five codecs of 4.3, 3.5 lz4, the Scala job, the in-progress one


def test_a_rolling_folder_or_one_of_its_files_named_is_the_whole_log() -> None:
    folder = _rolling_dir()
    for given in (folder, eventlog.events_files(folder)[1], folder / f"appstatus_{folder.name[12:]}"):
        files, _ = bridge.discover_inputs([given])
        assert [(f.path, f.kind, f.source) for f in files] == [
            (str(folder.resolve()), InputKind.SPARK_EVENT_LOG, folder.name)
        ], given


def test_a_log_named_on_the_command_line_is_taken_whatever_its_name(tmp_path: Path) -> None:
    copy = tmp_path / "job.log.json"
    shutil.copy(PLAIN, copy)
    files, notes = bridge.discover_inputs([copy])
    assert [f.kind for f in files] == [InputKind.SPARK_EVENT_LOG], notes
    files, _ = bridge.discover_inputs([CODEC_FILES["zstd"]])
    assert [f.kind for f in files] == [InputKind.SPARK_EVENT_LOG]


# ---------------------------------------------------------------------------------------------- rolling


def _rolling_dir() -> Path:
    return next(LOGS.glob("rolling/eventlog_v2_*"))


def test_the_real_rolling_log_is_read_in_index_order_across_its_files() -> None:
    folder = _rolling_dir()
    files = eventlog.events_files(folder)
    assert len(files) >= 2
    assert [int(p.name.split("_")[1]) for p in files] == list(range(1, len(files) + 1))
    assert any(p.name.startswith("appstatus_") for p in folder.iterdir())
    runs, stats = _runs(folder, name="r")
    assert stats.problems == []
    assert len(runs) >= 7
    assert runs[0].file == f"r/{files[0].name}"
    ids = [r.root.execution_id for r in runs]
    assert ids == sorted(ids)  # the job's statements, in the order they ran
    assert not eventlog.is_in_progress(folder)


def test_events_files_are_ordered_by_their_index_not_their_name(tmp_path: Path) -> None:
    """The plain log cut into 12 events files: read as one log, in index order (10 after 9)."""
    lines = PLAIN.read_bytes().splitlines(keepends=True)
    folder = tmp_path / "eventlog_v2_local-1"
    folder.mkdir()
    per = -(-len(lines) // 12)
    for i in range(12):
        (folder / f"events_{i + 1}_local-1").write_bytes(b"".join(lines[i * per : (i + 1) * per]))
    (folder / "appstatus_local-1").write_bytes(b"")
    assert [p.name for p in eventlog.events_files(folder)][8:11] == [
        "events_9_local-1",
        "events_10_local-1",
        "events_11_local-1",
    ]
    whole, _ = _runs(PLAIN)
    split, stats = _runs(folder)
    assert stats.problems == []
    assert [(r.root.execution_id, len(r.executions), r.failed) for r in split] == [
        (r.root.execution_id, len(r.executions), r.failed) for r in whole
    ]
    # a run's line is the line in its own events file
    for r in split:
        assert r.events_file is not None
        assert (folder / r.events_file).read_bytes().splitlines()[r.line - 1].find(b"SQLExecutionStart") > 0


def test_a_remote_executor_reads_the_same_runs_from_the_shipped_bytes() -> None:
    folder = _rolling_dir()
    data = b"".join(p.read_bytes() for p in eventlog.events_files(folder))
    shipped, _ = _runs(folder, data=data)
    local, _ = _runs(folder)
    assert [(r.root.execution_id, r.failed) for r in shipped] == [
        (r.root.execution_id, r.failed) for r in local
    ]


# ---------------------------------------------------------------------------------------------- cut logs


def test_the_killed_drivers_log_is_in_progress_and_read_up_to_its_last_event() -> None:
    path = next((LOGS / "inprogress").iterdir())
    assert path.name.endswith(".inprogress")
    assert eventlog.is_in_progress(path)
    runs, stats = _runs(path)
    assert [r.root.execution_id for r in runs] == sorted(r.root.execution_id for r in runs)
    assert len([r for r in runs if r.root.end is not None]) >= 6
    assert all(p.severity is not Severity.ERROR for p in stats.problems)


def test_a_cut_last_line_is_left_out_with_a_warning_not_an_error(tmp_path: Path) -> None:
    data = PLAIN.read_bytes()
    last_start = data.rindex(b'{"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart"')
    cut = tmp_path / "local-1.inprogress"
    cut.write_bytes(data[: last_start + 300])  # the writer died inside the last run's start event
    runs, stats = _runs(cut, name="cut")
    whole, _ = _runs(PLAIN)
    assert len(runs) == len(whole) - 1
    assert [p.severity for p in stats.problems] == [Severity.WARNING]
    assert stats.problems[0].line == data[:last_start].count(b"\n") + 1
    assert stats.cut


def test_a_bad_line_inside_a_log_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    lines = PLAIN.read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if b"SQLExecutionEnd" in line)
    lines[at] = lines[at][:60] + b"\n"
    bad = tmp_path / "local-2"
    bad.write_bytes(b"".join(lines))
    runs, stats = _runs(bad, name="bad")
    assert [(p.severity, p.file, p.line) for p in stats.problems] == [(Severity.ERROR, "bad", at + 1)]
    assert len(runs) == 7  # the run whose end was lost is handed on last, as not ended


@pytest.mark.parametrize("codec", ["zstd", "lz4", "lzf", "snappy"])
def test_a_compressed_log_cut_mid_stream_reads_what_is_whole(codec: str, tmp_path: Path) -> None:
    data = CODEC_FILES[codec].read_bytes()
    cut = tmp_path / f"local-3.{codec}.inprogress"
    cut.write_bytes(data[: len(data) * 2 // 3])
    runs, stats = _runs(cut)
    whole, _ = _runs(CODEC_FILES[codec])
    assert 0 < len([r for r in runs if r.root.end is not None]) < len(whole)
    assert all(p.severity is Severity.WARNING for p in stats.problems)


# ---------------------------------------------------------------------------------------------- bounded


def test_only_sql_and_application_events_are_parsed() -> None:
    _, stats = _runs(PLAIN)
    text = PLAIN.read_bytes()
    sql = text.count(b'{"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQL')
    app = sum(
        text.count(b'{"Event":"' + k) for k in (b"SparkListenerApplicationStart", b"SparkListenerLogStart")
    )
    app += text.count(b'{"Event":"SparkListenerApplicationEnd"')
    assert stats.parsed == sql + app
    assert stats.parsed < stats.lines / 2


def test_executions_that_never_end_do_not_pile_up(tmp_path: Path) -> None:
    lines = [b'{"Event":"SparkListenerLogStart","Spark Version":"4.3.0"}\n']
    for i in range(50):
        lines.append(
            b'{"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart","executionId":%d,'
            b'"rootExecutionId":%d,"time":1}\n' % (i, i)
        )
    path = tmp_path / "local-4"
    path.write_bytes(b"".join(lines))
    stats = ReadStats()
    seen = []
    for r in read_executions(path, stats=stats, max_open=10):
        seen.append(r.root.execution_id)
    assert seen == list(range(50))  # the oldest handed on as soon as more than 10 are open
    assert len(stats.problems) == 40


# ---------------------------------------------------------------------------------------------- job runs


class _FakePlans:
    """Stands for the plan reader: one process per run, writing a table named after the root."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []

    def __call__(self, executions: Sequence[Any], *, current_database: str = "default") -> ExtractionResult:
        from atlas_bridge.model import Column, ColumnRef, Dataset, DatasetKind, Lineage, Process, Relation

        self.calls.append([e.execution_id for e in executions])
        src = Dataset(
            id="table:default.src",
            kind=DatasetKind.TABLE,
            name="src",
            db="default",
            columns=[Column(name="x")],
        )
        tgt = Dataset(
            id="table:default.tgt",
            kind=DatasetKind.TABLE,
            name="tgt",
            db="default",
            columns=[Column(name="x")],
        )
        proc = Process(
            id="process:1", type="insert", name="insert", query_hash="ab" * 32, sql="INSERT INTO tgt"
        )
        rel = Relation(
            type="fdd",
            source=ColumnRef(dataset_id=src.id, column="x"),
            target=ColumnRef(dataset_id=tgt.id, column="x"),
            process_id=proc.id,
        )
        return ExtractionResult(lineage=Lineage(datasets=(src, tgt), processes=(proc,), relations=(rel,)))


@pytest.fixture
def fake_plans(monkeypatch: pytest.MonkeyPatch) -> _FakePlans:
    import atlas_bridge.spark.plan_text as plan_text

    fake = _FakePlans()
    monkeypatch.setattr(plan_text, "extract_root_execution", fake)
    return fake


def test_a_failed_execution_gives_nothing(fake_plans: _FakePlans) -> None:
    runs, _ = _runs(PLAIN)
    failed = [r for r in runs if r.failed]
    assert len(failed) == 1
    assert "CAST_INVALID_INPUT" in (eventlog.error_of(failed[0].root) or "")
    lineage, info, problems = eventlog.run_lineage(failed[0], source="x")
    assert (lineage.processes, info, problems) == ((), {}, [])
    ok = [r for r in runs if not r.failed]
    for r in ok:
        assert eventlog.run_lineage(r, source="x")[0].processes
    assert len(fake_plans.calls) == len(ok)  # the failed one never reached the plan reader


def test_a_run_that_never_ended_gives_nothing_and_says_so(fake_plans: _FakePlans, tmp_path: Path) -> None:
    data = PLAIN.read_bytes()
    last_end = data.rindex(b'{"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd"')
    cut = tmp_path / "local-5.inprogress"
    cut.write_bytes(data[:last_end])
    last = _runs(cut)[0][-1]
    assert last.root.end is None
    lineage, info, problems = eventlog.run_lineage(last, source="x")
    assert not lineage.processes
    assert not info
    assert "has not ended" in problems[0].message


def test_nested_executions_make_one_run_for_the_plan_reader(fake_plans: _FakePlans) -> None:
    runs, _ = _runs(PLAIN)
    nested = [r for r in runs if len(r.executions) > 1]
    assert nested  # saveAsTable and the CTAS nest their writes
    for r in nested:
        eventlog.run_lineage(r, source="x")
        assert {e.root_execution_id for e in r.executions} == {r.root.execution_id}
    assert [len(c) for c in fake_plans.calls] == [len(r.executions) for r in nested]


def test_each_run_is_a_process_execution_with_app_user_times_file_and_line(fake_plans: _FakePlans) -> None:
    from atlas_bridge.atlas.convert import TYPE_PROCESS_EXECUTION, to_entity_records
    from atlas_bridge.model import merge_lineage

    runs, _ = _runs(_rolling_dir(), name="shown/eventlog_v2_x")
    done = [r for r in runs if not r.failed]
    parts, all_runs = [], {}
    for r in done[:2]:
        lineage, info, _ = eventlog.run_lineage(r, source="logs/eventlog_v2_x")
        parts.append(lineage)
        all_runs.update(info)
    first = done[0]
    (pid,) = [p.id for p in parts[0].processes]
    info = all_runs[pid]
    assert info.run_id == f"{first.app.app_id}:{first.root.execution_id}"
    assert info.application_id == first.app.app_id
    assert info.application_name == "pyspark43 rolling"
    assert info.user == first.app.user
    assert info.start_ms == first.root.start["time"]
    assert info.end_ms == first.root.end["time"]  # type: ignore[index]
    assert info.start_ms <= info.end_ms
    assert info.source_file == f"logs/eventlog_v2_x/{first.events_file}"
    assert info.source_line == first.line
    # the same statement in two runs: one process, two executions, each saying where it was read
    merged = merge_lineage(parts)
    records = to_entity_records(merged, namespace="ns", runs={pid: (run,) for pid, run in all_runs.items()})
    execs = [r for r in records["processes"] if r["typeName"] == TYPE_PROCESS_EXECUTION]
    assert len(execs) == 2
    attrs = execs[0]["attributes"]
    assert {
        "applicationId",
        "applicationName",
        "userName",
        "startTime",
        "endTime",
        "sourceFile",
        "sourceLine",
    } <= set(attrs)
    assert {e["attributes"]["runId"] for e in execs} == {all_runs[p.id].run_id for p in merged.processes}
    procs = [r for r in records["processes"] if r["typeName"] == "atlas_bridge_process"]
    assert len(procs) == 1
    assert procs[0]["attributes"]["sourceFile"].startswith("logs/eventlog_v2_x/events_")


def test_spark_35_logs_are_read_too() -> None:
    for path in sorted(SPARK35.iterdir()):
        runs, stats = _runs(path)
        assert stats.problems == [], path
        assert len(runs) >= 6, path
        assert sum(r.failed for r in runs) == 1, path
        assert runs[0].app.spark_version is not None
        assert runs[0].app.spark_version.startswith("3.5")


def test_the_scala_jobs_log_is_read() -> None:
    (path,) = sorted((LOGS / "scala").iterdir())
    runs, stats = _runs(path)
    assert stats.problems == []
    assert runs[0].app.app_name == "Spark shell"  # spark-shell names its application so
    assert len(runs) >= 3
    assert not any(r.failed for r in runs)


# ---------------------------------------------------------------------------------------------- scan


class _Recording:
    """A delivery that keeps the batches it was given."""

    target = "memory:eventlog"

    def __init__(self) -> None:
        self.batches: list[dict[str, Any]] = []

    def send(self, b: dict[str, Any]) -> None:
        self.batches.append(b)

    def close(self) -> None:
        pass


def _entities(batches: Sequence[dict[str, Any]], type_name: str) -> list[dict[str, Any]]:
    return [e for b in batches for e in b["entities"] if e["typeName"] == type_name]


@pytest.mark.spark
def test_scan_of_the_log_folder_reads_every_log_and_a_rerun_sends_nothing(spark: Any, tmp_path: Path) -> None:
    first = _Recording()
    summary = bridge.scan([LOGS], first, namespace="ns", spark=spark, state_dir=tmp_path)
    assert summary.errors == [], [str(p) for p in summary.errors]
    logs = [f for f in summary.files if f.kind == InputKind.SPARK_EVENT_LOG]
    assert len(logs) == 9
    runs = sum(len(list(read_executions(f.path))) for f in logs)
    assert summary.extract.statements == runs
    # the same logs again: every batch was acknowledged already, nothing is sent
    again = _Recording()
    second = bridge.scan([LOGS], again, namespace="ns", spark=spark, state_dir=tmp_path)
    assert second.delivery.sent == 0
    assert second.delivery.skipped == summary.delivery.batches
    assert again.batches == []


def _stub_delivery(stub: Any) -> tuple[Any, bridge.SinkDelivery]:
    from atlas_bridge.atlas.client import AtlasClient
    from atlas_bridge.atlas.sink import AtlasSink
    from atlas_bridge.atlas.typedefs import register_typedefs

    client = AtlasClient(stub.base_url, retries=0, backoff=0)
    register_typedefs(client)
    return client, bridge.SinkDelivery(AtlasSink(client, spool_dir=None), f"atlas:{stub.base_url}")


@pytest.mark.spark
def test_scan_of_a_log_folder_puts_the_jobs_tables_and_runs_into_atlas(
    spark: Any, atlas_stub: Any, tmp_path: Path
) -> None:
    from atlas_bridge.naming import column_qualified_name, table_qualified_name

    folder = tmp_path / "spark-events"
    folder.mkdir()
    shutil.copy(PLAIN, folder / PLAIN.name)
    _, delivery = _stub_delivery(atlas_stub)
    summary = bridge.scan([folder], delivery, namespace="ns", spark=spark)
    assert summary.errors == [], [str(p) for p in summary.errors]
    assert summary.delivery.errors == []
    tables = {e["attributes"]["qualifiedName"] for e in atlas_stub.active_entities("atlas_bridge_table")}
    rev, orders, customers = (
        table_qualified_name("default", t, "ns") for t in ("rev", "orders", "customers")
    )
    assert {rev, orders, customers} <= tables
    assert table_qualified_name("default", "bad", "ns") not in tables  # its write failed

    def qns(ent: dict[str, Any], attribute: str) -> set[str]:
        return {e["attributes"]["qualifiedName"] for e in atlas_stub.related(ent["guid"], attribute)}

    procs = atlas_stub.active_entities("atlas_bridge_process")
    ctas = [p for p in procs if rev in qns(p, "outputs")]
    assert len(ctas) == 1
    assert qns(ctas[0], "inputs") >= {orders, customers}
    paths = atlas_stub.active_entities("atlas_bridge_path")
    assert any(p["attributes"]["qualifiedName"].endswith("/cents@ns") for p in paths)
    cols = {e["attributes"]["qualifiedName"] for e in atlas_stub.active_entities("atlas_bridge_column")}
    assert column_qualified_name(rev, "total") in cols
    runs = atlas_stub.active_entities("atlas_bridge_process_execution")
    (run,) = [r for r in runs if r["attributes"]["runId"].endswith(":5")]  # the CTAS's root execution
    app_id = PLAIN.name
    assert run["attributes"]["applicationId"] == app_id
    assert run["attributes"]["applicationName"] == "pyspark43 none"
    assert run["attributes"]["sourceFile"] == PLAIN.name
    assert run["attributes"]["sourceLine"] == 39
    assert run["attributes"]["userName"]


def test_a_long_log_is_extracted_and_converted_a_few_runs_at_a_time() -> None:
    """Memory follows ``eventlog_chunk_runs``, not the log: the pieces add up to the whole."""
    from atlas_bridge.bridge.extract import extract_unit, unit_results
    from atlas_bridge.bridge.types import ScanOptions, WorkUnit

    (f,) = bridge.discover_inputs([_rolling_dir()])[0]
    unit = WorkUnit(f, 0, f.size)
    whole = extract_unit(unit, ScanOptions())
    pieces = list(unit_results(unit, ScanOptions(eventlog_chunk_runs=2)))
    runs = len(list(read_executions(f.path)))
    assert len(pieces) == -(-runs // 2)
    assert [p.statements for p in pieces[:-1]] == [2] * (len(pieces) - 1)
    assert sum(p.statements for p in pieces) == whole.statements == runs
    assert max(len(p.lineage.processes) for p in pieces) < len(whole.lineage.processes)
    assert {p.id for piece in pieces for p in piece.lineage.processes} == {
        p.id for p in whole.lineage.processes
    }
    assert {k: v for piece in pieces for k, v in piece.runs.items()} == whole.runs
    assert whole.users == {next(read_executions(f.path)).app.user}


def _table_edges(path: Path) -> set[tuple[str, str]]:
    """Table-level edges of a log's lineage (through the real plan reader), by dataset name."""
    from atlas_bridge.model import merge_lineage

    lineage = merge_lineage(eventlog.run_lineage(r, source="x")[0] for r in read_executions(path))
    names = {
        d.id: d.name if d.kind.value != "path" else d.name.rstrip("/").rsplit("/", 1)[-1]
        for d in lineage.datasets
    }
    kinds = {d.id: d.kind.value for d in lineage.datasets}
    return {
        (names[r.source.dataset_id], names[r.target.dataset_id])
        for r in lineage.relations
        if r.source.dataset_id != r.target.dataset_id
        and "resultset" not in (kinds[r.source.dataset_id], kinds[r.target.dataset_id])
    }


@pytest.mark.parametrize(
    "path",
    [*CODEC_FILES.values(), *sorted(SPARK35.iterdir()), LOGS / "inprogress", LOGS / "rolling"],
    ids=lambda p: p.name,
)
def test_every_pyspark_log_gives_the_jobs_table_lineage(path: Path) -> None:
    """The job of make_logs.py, whatever the version, codec or layout: the CTAS reads both tables, the path
    write reads the CTAS's table; the failed INSERT into ``bad`` gives nothing."""
    if path.is_dir() and not eventlog.is_rolling_dir(path):
        (path,) = [p for p in path.iterdir() if p.is_file() or eventlog.is_rolling_dir(p)]
    assert _table_edges(path) == {("orders", "rev"), ("customers", "rev"), ("rev", "cents")}


def test_the_scala_jobs_log_gives_its_table_lineage() -> None:
    (path,) = sorted((LOGS / "scala").iterdir())
    assert _table_edges(path) == {("sales", "region_totals"), ("sales", "big_sales")}
