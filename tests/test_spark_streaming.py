"""Structured Streaming lineage: real PySpark streams on the run's local session, into the Atlas stub.

Every stream runs with ``trigger(availableNow=True)`` (or ``processAllAvailable``) so it ends by itself
once its input is read: quick and deterministic, no sleeps. Kafka is tested on captured plans in
``tests/test_spark_stream_plans.py`` (Spark's Kafka connector is not in PySpark).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from atlas_stub import AtlasStub

from atlas_bridge.atlas.client import AtlasClient
from atlas_bridge.atlas.sink import AtlasSink
from atlas_bridge.atlas.typedefs import register_typedefs
from atlas_bridge.config import Settings
from atlas_bridge.spark import SparkHookHandle, install, uninstall

NS = "test"
_WAIT_S = 900
"""The most a stream may take to read its few files and end (a loaded machine is slow, never this slow)."""
pytestmark = pytest.mark.spark


class Hooked:
    def __init__(self, handle: SparkHookHandle, stub: AtlasStub, spark: Any) -> None:
        self.handle = handle
        self.stub = stub
        self.spark = spark

    def flush(self) -> None:
        assert self.handle.flush(timeout=60)

    def names(self, type_name: str) -> list[str]:
        return sorted(e["attributes"]["qualifiedName"] for e in self.stub.active_entities(type_name))

    def entity(self, type_name: str, qn: str) -> dict[str, Any]:
        ent = self.stub.find(type_name, qn)
        assert ent is not None, f"{type_name} {qn} not in Atlas; have: {self.names(type_name)}"
        return ent

    def refs(self, ent: dict[str, Any], attribute: str) -> set[str]:
        return {r["attributes"]["qualifiedName"] for r in self.stub.related(ent["guid"], attribute)}

    def executions(self) -> list[dict[str, Any]]:
        return [e["attributes"] for e in self.stub.active_entities("atlas_bridge_process_execution")]

    def column_sources(self, column_qn: str) -> dict[str, set[str]]:
        """DIRECT / INDIRECT -> source column qualifiedNames of one target column."""
        out: dict[str, set[str]] = {}
        for ent in self.stub.active_entities("atlas_bridge_column_lineage"):
            if column_qn in self.refs(ent, "outputs"):
                out.setdefault(ent["attributes"]["dependencyType"], set()).update(self.refs(ent, "inputs"))
        return out


@pytest.fixture
def hooked(spark: Any, atlas_stub: AtlasStub, tmp_path: Path) -> Iterator[Hooked]:
    client = AtlasClient(atlas_stub.base_url, retries=0, backoff=0)
    register_typedefs(client)
    sink = AtlasSink(client, spool_dir=tmp_path / "spool")
    settings = Settings.load(namespace=NS, output_dir=tmp_path / "out")
    handle = install(spark, settings=settings, sink=sink, coalesce_s=600)
    assert handle.streaming is not None
    yield Hooked(handle, atlas_stub, spark)
    uninstall(spark)
    assert handle.stats.callback_errors == 0
    assert handle.streaming.stats.errors == 0


def _files(spark: Any, folder: Path, batches: int) -> Any:
    """``batches`` parquet files of (id, name) rows in ``folder``; returns their schema."""
    for b in range(batches):
        rows = [(b * 10 + i, f"n{b}{i}") for i in range(3)]
        spark.createDataFrame(rows, "id BIGINT, name STRING").coalesce(1).write.mode("append").parquet(
            str(folder)
        )
    return spark.read.parquet(str(folder)).schema


def _path_qn(p: Path) -> str:
    return f"{p}@{NS}"


def test_file_stream_into_a_file_sink_is_one_process_with_column_lineage(
    hooked: Hooked, tmp_path: Path
) -> None:
    src, out = tmp_path / "in", tmp_path / "out_files"
    schema = _files(hooked.spark, src, 3)
    q = (
        hooked.spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(src))
        .selectExpr("id", "upper(name) AS uname")
        .where("id > 0")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(_WAIT_S)  # ended by itself (availableNow)
    hooked.flush()
    procs = hooked.names("atlas_bridge_process")
    assert procs == [f"STREAMING_APPEND:{_path_qn(src)}->{_path_qn(out)}"]
    proc = hooked.entity("atlas_bridge_process", procs[0])
    assert proc["attributes"]["operationType"] == "streaming_append"
    assert hooked.refs(proc, "inputs") == {_path_qn(src)}
    assert hooked.refs(proc, "outputs") == {_path_qn(out)}
    uname = f"{out}#uname@{NS}"
    sources = hooked.column_sources(uname)
    assert sources["DIRECT"] == {f"{src}#name@{NS}"}
    assert f"{src}#id@{NS}" in sources["INDIRECT"]  # the WHERE
    # One execution for the run, not one per micro-batch; its end recorded.
    (run,) = hooked.executions()
    assert run["status"] == "SUCCEEDED"
    assert run["batches"] == 3
    assert run["inputRows"] == 9
    assert run["endTime"] >= run["startTime"]
    assert hooked.handle.streaming.stats.progress >= 3


def test_table_stream_into_a_table_and_restart_from_checkpoint_is_the_same_process(
    hooked: Hooked, tmp_path: Path
) -> None:
    spark = hooked.spark
    for t in ("st_src", "st_dst"):
        spark.sql(f"DROP TABLE IF EXISTS {t}")
    spark.sql("CREATE TABLE st_src (id BIGINT, name STRING) USING parquet")
    spark.sql("CREATE TABLE st_dst (id BIGINT, label STRING) USING parquet")
    spark.sql("INSERT INTO st_src VALUES (1, 'a'), (2, 'b')")

    def run_once() -> None:
        q = (
            spark.readStream.table("st_src")
            .selectExpr("id", "concat(name, '!') AS label")
            .writeStream.option("checkpointLocation", str(tmp_path / "ck_tables"))
            .trigger(availableNow=True)
            .toTable("st_dst")
        )
        assert q.awaitTermination(_WAIT_S)  # ended by itself (availableNow)

    run_once()
    spark.sql("INSERT INTO st_src VALUES (3, 'c')")
    run_once()  # restarted from its checkpoint: the same query id, a new run id
    hooked.flush()
    qn = f"STREAMING_APPEND:default.st_src@{NS}->default.st_dst@{NS}"
    assert qn in hooked.names("atlas_bridge_process")
    assert [n for n in hooked.names("atlas_bridge_process") if n.startswith("STREAMING")] == [qn]
    assert hooked.column_sources(f"default.st_dst.label@{NS}")["DIRECT"] == {f"default.st_src.name@{NS}"}
    runs = [e for e in hooked.executions() if e["qualifiedName"].startswith(qn)]
    assert len(runs) == 2
    assert {r["status"] for r in runs} == {"SUCCEEDED"}
    assert spark.table("st_dst").count() == 3  # the job itself unchanged


def test_foreach_batch_writes_are_linked_to_the_stream_sources_once(hooked: Hooked, tmp_path: Path) -> None:
    spark = hooked.spark
    spark.sql("DROP TABLE IF EXISTS fb_dst")
    spark.sql("CREATE TABLE fb_dst (id BIGINT, uname STRING) USING parquet")
    src = tmp_path / "fb_in"
    schema = _files(spark, src, 3)
    calls: list[int] = []

    def per_batch(df: Any, batch_id: int) -> None:
        df.selectExpr("id", "uname").write.insertInto("fb_dst")
        calls.append(batch_id)

    hooked.flush()  # the set-up's own writes sent first
    before = len(hooked.stub.requests_to("POST", "/entity/bulk"))
    q = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(src))
        .selectExpr("id", "upper(name) AS uname")
        .writeStream.foreachBatch(per_batch)
        .option("checkpointLocation", str(tmp_path / "ck_fb"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(_WAIT_S)  # ended by itself (availableNow)
    hooked.flush()
    assert len(calls) == 3
    qn = f"INSERT:{_path_qn(src)}->default.fb_dst@{NS}"
    assert hooked.names("atlas_bridge_process") == [qn]
    proc = hooked.entity("atlas_bridge_process", qn)
    assert hooked.refs(proc, "inputs") == {_path_qn(src)}
    assert hooked.column_sources(f"default.fb_dst.uname@{NS}")["DIRECT"] == {f"{src}#name@{NS}"}
    # The process with the run's start, then the run's end: not the table after every micro-batch.
    assert len(hooked.stub.requests_to("POST", "/entity/bulk")) - before == 2
    (run,) = hooked.executions()
    assert run["status"] == "SUCCEEDED"
    assert run["batches"] == 3
    assert hooked.handle.streaming.stats.batch_writes == 3


def test_a_failing_stream_is_a_failed_run_and_the_failure_is_the_jobs_own(
    hooked: Hooked, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    spark = hooked.spark
    src, out = tmp_path / "bad_in", tmp_path / "bad_out"
    spark.createDataFrame([("x",)], "name STRING").write.parquet(str(src))
    q = (
        spark.readStream.schema("name STRING")
        .parquet(str(src))
        .selectExpr("assert_true(name = 'never') AS ok", "name")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "ck_bad"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(StreamingQueryException):
        assert q.awaitTermination(_WAIT_S)  # ended by itself (availableNow)
    hooked.flush()
    assert hooked.names("atlas_bridge_process") == [f"STREAMING_APPEND:{_path_qn(src)}->{_path_qn(out)}"]
    (run,) = hooked.executions()
    assert run["status"] == "FAILED"
    assert run["message"]


def test_rate_into_memory_and_console_sinks_send_no_dataset(hooked: Hooked) -> None:
    spark = hooked.spark
    for fmt in ("memory", "console"):
        writer = spark.readStream.format("rate").option("rowsPerSecond", 100).load().writeStream.format(fmt)
        if fmt == "memory":
            writer = writer.queryName("rate_mem")
        q = writer.start()
        q.processAllAvailable()
        q.stop()
    hooked.flush()
    assert hooked.names("atlas_bridge_process") == []
    assert hooked.names("atlas_bridge_path") == []
    assert hooked.names("atlas_bridge_table") == []
    stats = hooked.handle.streaming.stats
    assert stats.started == 2
    assert stats.terminated == 2


def test_foreach_batch_save_as_table_is_one_process_for_its_table(hooked: Hooked, tmp_path: Path) -> None:
    spark = hooked.spark
    spark.sql("DROP TABLE IF EXISTS fb_sat")
    src = tmp_path / "sat_in"
    schema = _files(spark, src, 2)

    def per_batch(df: Any, batch_id: int) -> None:
        df.write.mode("append").saveAsTable("fb_sat")  # batch 0 creates the table, batch 1 appends

    q = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(src))
        .writeStream.foreachBatch(per_batch)
        .option("checkpointLocation", str(tmp_path / "ck_sat"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(_WAIT_S)  # ended by itself (availableNow)
    hooked.flush()
    table = f"default.fb_sat@{NS}"
    procs = [
        p for p in hooked.stub.active_entities("atlas_bridge_process") if table in hooked.refs(p, "outputs")
    ]
    assert len(procs) == 1, [p["attributes"]["qualifiedName"] for p in procs]
    assert hooked.refs(procs[0], "inputs") == {_path_qn(src)}
    assert spark.table("fb_sat").count() == 6
