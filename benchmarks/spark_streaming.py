"""Cost of the Spark hook per micro-batch: the same streams with and without it, in one process.

Each block runs two streams over the same ``--batches`` parquet files (``maxFilesPerTrigger=1``, so one
micro-batch per file, ``trigger(availableNow=True)`` so the stream ends by itself): a file source into a file
sink, and the same source into a ``foreachBatch`` that appends each batch to a table. Blocks alternate
with and without the hook, and which side comes first alternates too, so warm-up and noise hit both alike.

Reported: wall time per micro-batch either way and their ratio (goal: under 1.05), the hook's progress
callback (p50/p95 per micro-batch, on Spark's listener thread, never the batch's; goal p95 < 10 ms), and
how long the worker needed to catch up after each block (flush). The worker extracts and converts for
real; the sink only counts.

Run: ``python benchmarks/spark_streaming.py [--batches 20] [--blocks 4]`` (needs pyspark and Java 17).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

GOAL_RATIO = 1.05
GOAL_P95_MS = 10.0


class CountingSink:
    def __init__(self) -> None:
        self.batches = 0

    def emit(self, batch: dict[str, Any]) -> None:
        self.batches += 1

    def close(self) -> None:
        pass


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def block(spark: Any, src: Path, schema: Any, work: Path, tag: str) -> tuple[float, int]:
    """Both streams once over all files -> (seconds, micro-batches)."""
    calls: list[int] = []

    def per_batch(df: Any, batch_id: int) -> None:
        df.write.mode("append").saveAsTable("bench_stream_t")
        calls.append(batch_id)

    t0 = time.perf_counter()
    reader = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(src))
    q1 = (
        reader.selectExpr("id", "upper(name) AS uname")
        .writeStream.format("parquet")
        .option("path", str(work / f"out_{tag}"))
        .option("checkpointLocation", str(work / f"ck1_{tag}"))
        .trigger(availableNow=True)
        .start()
    )
    q1.awaitTermination()
    q2 = (
        reader.selectExpr("id", "upper(name) AS uname")
        .writeStream.foreachBatch(per_batch)
        .option("checkpointLocation", str(work / f"ck2_{tag}"))
        .trigger(availableNow=True)
        .start()
    )
    q2.awaitTermination()
    seconds = time.perf_counter() - t0
    batches = len(calls) + len(q1.recentProgress)
    return seconds, batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--blocks", type=int, default=4)
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    from atlas_bridge.config import Settings
    from atlas_bridge.spark import install, uninstall

    work = Path(tempfile.mkdtemp(prefix="atlas-bridge-stream-bench-"))
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.warehouse.dir", str(work / "wh"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    src = work / "in"
    for b in range(args.batches):
        rows = [(b * 100 + i, f"n{b}_{i}") for i in range(50)]
        spark.createDataFrame(rows, "id BIGINT, name STRING").coalesce(1).write.mode("append").parquet(
            str(src)
        )
    schema = spark.read.parquet(str(src)).schema
    block(spark, src, schema, work, "warmup")  # JIT, first-stream setup: measured by neither side

    per_batch: dict[bool, list[float]] = {False: [], True: []}
    catch_up: list[float] = []
    callback_ms: list[float] = []
    for k in range(args.blocks):
        order = (False, True) if k % 2 == 0 else (True, False)
        for hooked in order:
            handle = None
            if hooked:
                settings = Settings.load(namespace="bench")
                handle = install(spark, settings=settings, sink=CountingSink(), coalesce_s=600)
            seconds, batches = block(spark, src, schema, work, f"{k}_{int(hooked)}")
            per_batch[hooked].append(seconds / max(batches, 1) * 1000)
            if handle is not None:
                t0 = time.perf_counter()
                handle.flush(timeout=120)
                catch_up.append(time.perf_counter() - t0)
                if handle.streaming is not None:
                    callback_ms.extend(ns / 1e6 for ns in handle.streaming.stats.callback_ns)
                    stats = handle.streaming.stats
                    print(
                        f"block {k}: started {stats.started}, progress {stats.progress}, processes "
                        f"{stats.processes}, executions {stats.executions}, foreachBatch writes "
                        f"{stats.batch_writes}, errors {stats.errors}"
                    )
                uninstall(spark)
    off = statistics.median(per_batch[False])
    on = statistics.median(per_batch[True])
    print(f"micro-batches per block: {2 * args.batches}, blocks: {args.blocks}")
    print(f"ms per micro-batch without the hook (median of blocks): {off:.1f}  {per_batch[False]}")
    print(f"ms per micro-batch with the hook    (median of blocks): {on:.1f}  {per_batch[True]}")
    print(f"ratio with/without: {on / off:.3f}   (goal: under {GOAL_RATIO})")
    print(
        f"progress callback per micro-batch: p50 {pct(callback_ms, 0.5):.2f} ms, "
        f"p95 {pct(callback_ms, 0.95):.2f} ms   (goal: p95 under {GOAL_P95_MS} ms)"
    )
    print(f"worker catch-up after a block (flush): max {max(catch_up):.2f} s")
    spark.stop()


if __name__ == "__main__":
    main()
