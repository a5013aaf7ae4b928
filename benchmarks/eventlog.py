"""Benchmark of Spark event logs in ``atlas-bridge scan``: MB of log a second on local[2], and memory.

The logs are built from a real one (``tests/data/spark_eventlogs/spark-4.3``, PySpark 4.3): its header, then
its body again and again, execution ids renumbered each time, each task event written ten times (task events
are most of a long job's log). They are zstd-compressed, Spark's default codec; sizes are of the JSON
(uncompressed), as Spark counts them.

* throughput: ``--logs`` logs of ``--log-mb`` MB in one folder, scanned on local[2] (the delivery counted
  in memory); MB/s is the logs' JSON over the scan's wall time. The reader alone (one core, no Spark) too.
* memory: one log of each of ``--memory-sizes`` MB read by the code the executors run, in a fresh process
  each (``ru_maxrss``), and one scan of the largest on local[2] (driver and executor peaks).

Each measurement runs in a child process (its own driver and JVM), so its peak RSS is its own.

    python benchmarks/eventlog.py                                   # 4 x 100 MB, memory at 100 and 1000 MB
    python benchmarks/eventlog.py --logs 2 --log-mb 20 --memory-sizes 20,100   # quick
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SOURCE = next(
    p
    for p in sorted((ROOT / "tests" / "data" / "spark_eventlogs" / "spark-4.3").iterdir())
    if "." not in p.name
)
GOAL_MB_S = 50.0
"""MB of event log a second on local[2]: a day of a busy cluster's logs (a few hundred GB) in about an hour
on a small Spark cluster of 32 cores."""
GOAL_MEMORY_GROWTH = 1.10
"""Peak RSS reading 1 GB over reading 100 MB: at most 10 % more (memory must not follow the log's size)."""

_ID = re.compile(rb'"(executionId|rootExecutionId)":(\d+)')
_TASK_ID = re.compile(rb'"Task ID":\d+')


def build_log(path: Path, mb: int, task_copies: int = 10) -> int:
    """Write a zstd log of about ``mb`` MB of JSON, each task event ``task_copies`` times (more: fewer SQL
    executions a MB); returns its JSON bytes."""
    import zstandard

    # the application's id from the file's name (as Spark names logs): each log an application of its own
    own_id = path.name.split(".")[0].encode()
    lines = SOURCE.read_bytes().replace(SOURCE.name.encode(), own_id).splitlines(keepends=True)
    first_sql = next(i for i, line in enumerate(lines) if b"SparkListenerSQL" in line[:120])
    head, body = lines[:first_sql], [x for x in lines[first_sql:] if b"SparkListenerApplicationEnd" not in x]
    top = max(int(m.group(2)) for x in body for m in _ID.finditer(x[:200])) + 1
    target = mb * 1024 * 1024
    written = 0
    with open(path, "wb") as raw, zstandard.ZstdCompressor(level=3).stream_writer(raw) as out:
        for line in head:
            out.write(line)
            written += len(line)
        block = task = 0
        while written < target:
            shift = block * top
            for line in body:
                if b"SparkListenerSQL" in line[:120]:
                    line = _ID.sub(lambda m, s=shift: b'"%s":%d' % (m.group(1), int(m.group(2)) + s), line)  # type: ignore[misc]
                copies = task_copies if b'"Event":"SparkListenerTask' in line[:40] else 1
                for _ in range(copies):
                    if copies > 1:  # each copy a task of its own, as in a real log
                        task += 1
                        line = _TASK_ID.sub(b'"Task ID":%d' % task, line, count=1)
                    out.write(line)
                    written += len(line)
            block += 1
    return written


def child_read(log: str) -> None:
    """The executors' reading of one log, alone: peak RSS and MB/s on one core."""
    from atlas_bridge.spark.eventlog import ReadStats, read_executions

    stats = ReadStats()
    t0 = time.perf_counter()
    runs = sum(1 for _ in read_executions(log, stats=stats))
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"runs": runs, "mb": stats.bytes / 2**20, "wall_s": wall, "peak_rss_mb": rss}))


class _CountingDelivery:
    target = "memory:benchmark"

    def __init__(self) -> None:
        self.batches = 0

    def send(self, batch: Any) -> None:
        self.batches += 1

    def close(self) -> None:
        pass


def child_scan(folder: str, master: str) -> None:
    from atlas_bridge import bridge

    spark = bridge.spark_session(master, app_name="atlas-bridge-bench")
    spark.sparkContext.parallelize([0], 1).count()  # JVM and worker start-up are not the scan's cost
    delivery = _CountingDelivery()
    t0 = time.perf_counter()
    summary = bridge.scan([folder], delivery, namespace="bench", spark=spark)
    wall = time.perf_counter() - t0
    spark.stop()
    out = {
        "files": len(summary.files),
        "runs": summary.extract.statements,
        "errors": len(summary.errors),
        "batches": delivery.batches,
        "wall_s": wall,
        "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "executor_peak_rss_mb": summary.extract.executor_max_rss_kb / 1024,
    }
    print(json.dumps(out))


def _child(*args: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True)
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logs", type=int, default=4)
    parser.add_argument("--log-mb", type=int, default=100)
    parser.add_argument("--memory-sizes", default="100,1000", help="MB of the logs of the memory runs")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--task-copies",
        type=int,
        default=10,
        help="copies of each task event: 10 gives ~9 job runs a MB (a log of many small queries), "
        "100 ~1 a MB (longer jobs, more tasks a query)",
    )
    parser.add_argument("--child-read")
    parser.add_argument("--child-scan")
    args = parser.parse_args()
    if args.child_read:
        child_read(args.child_read)
        return
    if args.child_scan:
        child_scan(args.child_scan, args.master)
        return

    with tempfile.TemporaryDirectory(prefix="atlas-bridge-eventlog-bench-") as tmp:
        folder = Path(tmp) / "logs"
        folder.mkdir()
        total = 0
        for i in range(args.logs):
            total += build_log(folder / f"local-{1700000000000 + i}.zstd", args.log_mb, args.task_copies)
        disk = sum(p.stat().st_size for p in folder.iterdir())
        mb = total / 2**20
        print(
            f"logs: {args.logs} x {args.log_mb} MB of JSON ({mb:.0f} MB, {disk / 2**20:.1f} MB zstd on disk)"
        )
        scan = _child("--child-scan", str(folder), "--master", args.master)
        print(
            f"scan on {args.master}: {scan['wall_s']:.1f} s, {mb / scan['wall_s']:.1f} MB/s "
            f"(goal: at least {GOAL_MB_S:.0f} MB/s); {scan['runs']} job runs "
            f"({scan['runs'] / mb:.1f} a MB, {scan['runs'] / scan['wall_s']:.0f} a second), "
            f"{scan['batches']} batches, {scan['errors']} errors"
        )
        one = _child("--child-read", str(next(folder.iterdir())))
        print(f"reader alone, one core: {one['mb'] / one['wall_s']:.1f} MB/s")

        sizes = [int(s) for s in args.memory_sizes.split(",") if s]
        if not sizes:
            return
        peaks: dict[str, list[float]] = {"reader": [], "driver": [], "executor": []}
        for size in sizes:
            log = Path(tmp) / f"mem-{size}" / "local-1800000000000.zstd"
            log.parent.mkdir()
            build_log(log, size, args.task_copies)
            got = _child("--child-read", str(log))
            scan = _child("--child-scan", str(log.parent), "--master", args.master)
            peaks["reader"].append(got["peak_rss_mb"])
            peaks["driver"].append(scan["driver_peak_rss_mb"])
            peaks["executor"].append(scan["executor_peak_rss_mb"])
            print(
                f"{size:>5} MB log ({got['runs']} job runs): reader alone peak RSS "
                f"{got['peak_rss_mb']:.0f} MB; "
                f"scan on {args.master}: driver {scan['driver_peak_rss_mb']:.0f} MB, "
                f"executor {scan['executor_peak_rss_mb']:.0f} MB"
            )
            log.unlink()
        for who, values in peaks.items():
            growth = values[-1] / values[0]
            verdict = "ok" if growth <= GOAL_MEMORY_GROWTH else "GROWS"
            print(
                f"{who} peak RSS {sizes[0]} MB -> {sizes[-1]} MB log: x{growth:.3f} "
                f"(goal: at most x{GOAL_MEMORY_GROWTH:.2f}, not growing with the log) {verdict}"
            )


if __name__ == "__main__":
    main()
