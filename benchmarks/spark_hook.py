"""Overhead of the Spark hook: the same loop of queries with and without it, in one process.

Blocks alternate on one local session, and which side comes first alternates too (off/on, then on/off,
...), so JIT warm-up, the slow first block and machine noise hit both sides alike. Reported: wall time and
CPU time (this Python process plus the Spark JVM) per query either way and their ratios (goal: under 1.02),
the callback cost per captured event (p50/p95; goal p95 < 10 ms), the py4j round trips per event
(goal: at most 5), and how long the worker
needed to catch up after the loop (flush; its CPU is counted separately). The worker extracts and converts
for real; the sink only counts.

``--busy``: the same on a busy machine, with a CPU-burning child process per core but one kept running
throughout (the driver then competes for the CPU, as on a loaded edge node).

Run: ``python benchmarks/spark_hook.py [--iterations 30] [--blocks 3] [--busy]`` (needs pyspark and Java 17).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


class CountingSink:
    def __init__(self) -> None:
        self.batches = 0
        self.entities = 0

    def emit(self, batch: dict[str, Any]) -> None:
        self.batches += 1
        self.entities += len(batch["entities"])

    def close(self) -> None:
        pass


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def loop(spark: Any, out: Path, iterations: int) -> tuple[float, int]:
    """One block: per iteration an INSERT ... SELECT, a path write and a collect -> (seconds, queries)."""
    t0 = time.perf_counter()
    for i in range(iterations):
        spark.sql(
            "INSERT INTO bench_t SELECT id, amount * 2, concat(tag, '_', cust) FROM src WHERE amount > 1"
        )
        spark.table("src").selectExpr("id", "upper(tag) AS t").write.mode("overwrite").parquet(
            str(out / f"p{i % 3}")
        )
        spark.table("src").where("amount > 1").select("id").collect()
    return time.perf_counter() - t0, iterations * 3


class CpuClock:
    """CPU seconds used so far by this Python process and by the Spark JVM (user + system).

    The JVM is the process PySpark launched (``spark-submit`` execs into ``java``); its figure is read from
    ``/proc/<pid>/stat`` (Linux), so nothing is asked of the JVM. Where that cannot be read the JVM side is
    reported as 0 and the header says so.
    """

    def __init__(self, spark: Any) -> None:
        proc = getattr(spark.sparkContext._gateway, "proc", None)
        self._stat = Path(f"/proc/{proc.pid}/stat") if proc is not None else None
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.jvm_seen = self._jvm() is not None

    def _jvm(self) -> float | None:
        if self._stat is None:
            return None
        try:
            fields = self._stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / self._tick  # utime, stime (fields 14, 15)

    def __call__(self) -> tuple[float, float]:
        return time.process_time(), self._jvm() or 0.0


@contextlib.contextmanager
def busy_machine(burners: int) -> Any:
    """``burners`` child processes that burn CPU until the block ends (each stopped by its own pid)."""
    children = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        for _ in range(burners)
    ]
    try:
        yield children
    finally:
        for child in children:
            child.kill()
            child.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--busy", action="store_true", help="load the other cores with CPU-burning children")
    args = ap.parse_args()
    burners = max((os.cpu_count() or 2) - 1, 1) if args.busy else 0
    with busy_machine(burners):
        if burners:
            print(f"busy machine: {burners} CPU-burning child process(es) throughout")
        measure(args)


def measure(args: argparse.Namespace) -> None:

    from pyspark.sql import SparkSession

    from atlas_bridge.config import Settings
    from atlas_bridge.spark import install, uninstall

    base = Path(tempfile.mkdtemp(prefix="atlas-bridge-bench-"))
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.warehouse.dir", str(base / "warehouse"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql("CREATE TABLE src (id BIGINT, amount DOUBLE, cust INT, tag STRING) USING parquet")
    spark.sql("INSERT INTO src VALUES (1, 10.0, 1, 'a'), (2, 25.5, 2, 'b'), (3, 99.0, 1, 'c')")
    spark.sql("CREATE TABLE bench_t (id BIGINT, amount_x2 DOUBLE, tag STRING) USING parquet")
    loop(spark, base / "warm", args.warmup)  # warm-up (JIT, caches), not measured

    settings = Settings.load(namespace="bench", output_dir=base / "out")
    off: list[float] = []
    on: list[float] = []
    cpu_off: list[tuple[float, float]] = []
    cpu_on: list[tuple[float, float]] = []
    flush_s: list[float] = []
    flush_cpu: list[float] = []
    callback_ms: list[float] = []
    round_trips: list[int] = []
    callback_trips: list[int] = []
    events = captured = processes = 0
    cpu = CpuClock(spark)
    if not cpu.jvm_seen:
        print("(JVM CPU time not readable here: CPU figures are this Python process only)")

    def run_off() -> None:
        py0, jvm0 = cpu()
        seconds, n = loop(spark, base / "off", args.iterations)
        py1, jvm1 = cpu()
        off.append(seconds / n)
        cpu_off.append(((py1 - py0) / n, (jvm1 - jvm0) / n))

    def run_on() -> None:
        nonlocal events, captured, processes
        sink = CountingSink()
        handle = install(spark, settings=settings, sink=sink)
        py0, jvm0 = cpu()
        seconds, n = loop(spark, base / "on", args.iterations)
        py1, jvm1 = cpu()
        on.append(seconds / n)
        cpu_on.append(((py1 - py0) / n, (jvm1 - jvm0) / n))
        t0 = time.perf_counter()
        handle.flush(120)
        flush_s.append(time.perf_counter() - t0)
        py2, jvm2 = cpu()
        flush_cpu.append((py2 - py1) + (jvm2 - jvm1))
        callback_ms.extend(ns / 1e6 for ns in handle.stats.callback_ns)
        round_trips.extend(handle.stats.round_trips)
        callback_trips.extend(handle.stats.callback_round_trips)
        events += handle.stats.events
        captured += handle.stats.captured
        processes += handle.stats.processes
        uninstall(spark)

    order: list[str] = []
    for block in range(args.blocks):
        sides = (run_off, run_on) if block % 2 == 0 else (run_on, run_off)
        order.append("off/on" if block % 2 == 0 else "on/off")
        for side in sides:
            side()

    mean_off, mean_on = statistics.mean(off), statistics.mean(on)
    n_q = args.iterations * 3
    print(f"queries per block: {n_q} ({args.blocks} blocks each way; order {', '.join(order)})")
    print(
        f"without hook: {mean_off * 1000:.1f} ms/query  (blocks: {', '.join(f'{x * 1000:.1f}' for x in off)})"
    )
    print(
        f"with hook:    {mean_on * 1000:.1f} ms/query  (blocks: {', '.join(f'{x * 1000:.1f}' for x in on)})"
    )
    pairs = sorted(b / a for a, b in zip(off, on, strict=True))
    ratio, pair_median = mean_on / mean_off, statistics.median(pairs)
    print(
        f"wall overhead ratio (with / without): {ratio:.3f} "
        f"(per block pair: median {pair_median:.3f}; goal < 1.02)"
    )
    for name, blocks in (("without hook", cpu_off), ("with hook", cpu_on)):
        py, jvm = statistics.mean(b[0] for b in blocks), statistics.mean(b[1] for b in blocks)
        print(
            f"CPU {name:<13}: {(py + jvm) * 1000:.1f} ms/query (python {py * 1000:.1f}, jvm {jvm * 1000:.1f})"
        )
    cpu_ratio = sum(sum(b) for b in cpu_on) / sum(sum(b) for b in cpu_off)
    caught_up = sum(flush_cpu) / (args.blocks * n_q)
    print(
        f"CPU overhead ratio (with / without): {cpu_ratio:.3f} in the loop; "
        f"the worker's catch-up adds {caught_up * 1000:.1f} ms/query of CPU"
    )
    print(f"events: {events}, queued: {captured}, processes emitted: {processes}")
    p50, p95 = pct(callback_ms, 0.5), pct(callback_ms, 0.95)
    print(
        f"callback per captured event: p50 {p50:.2f} ms, p95 {p95:.2f} ms (goal < 10), "
        f"max {max(callback_ms):.2f} ms"
    )
    print(
        f"py4j round trips per captured event (INSERT and path write; callback + worker): "
        f"p50 {pct([float(r) for r in round_trips], 0.5):.0f}, max {max(round_trips)} (goal <= 5); "
        f"in the callback: max {max(callback_trips)}"
    )
    print(f"worker catch-up after each block (flush): {', '.join(f'{x * 1000:.0f} ms' for x in flush_s)}")
    spark.stop()


if __name__ == "__main__":
    main()
