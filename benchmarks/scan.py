"""Benchmark of ``atlas-bridge scan``: statements per minute on local[1] vs local[2], and peak memory.

The corpus is TPC-DS's 99 queries (``../shared/bench/tpcds_queries.jsonl``) turned into CTAS statements,
replicated until there are enough of them, 99 statements (one copy of TPC-DS) per script:

* ``distinct``: every copy writes a distinct target table (``bench.q14_c0042``), so every statement is a
  process of its own and the merged lineage grows with the corpus;
* ``repeat``: every script is the same 99 statements (as the same nightly job checked into many places), so
  the merged lineage is the same whatever the corpus size: memory that grows here is the pipeline's own.

Each measurement runs in a fresh child process (its own driver and JVM) so ``ru_maxrss`` is that run's
peak; executors report their Python workers' peak RSS in the partition results. The delivery is counted in
memory (no disk, no HTTP; each body encoded as the Atlas client posts it), so the figures are discover +
extract and convert (on the executors) + merge (driver) + rendering of the batches (driver, as they are
delivered).

    python benchmarks/scan.py       # 10,000 statements, local[1] and local[2] (4 runs each, alternating)
    python benchmarks/scan.py --statements 2000 --memory-sizes 1000,2000   # quick
    python benchmarks/scan.py --memory-corpus distinct --memory-sizes 2500,10000   # a growing lineage
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = next(
    (p / "shared" / "bench" for p in ROOT.parents if (p / "shared" / "bench").is_dir()),
    ROOT.parent / "shared" / "bench",
)
PER_FILE = 99  # one copy of TPC-DS per script: in "repeat" mode every script is the same


def write_corpus(directory: Path, statements: int, mode: str) -> int:
    """Write ``statements`` CTAS statements, 99 per file; returns the number written."""
    queries = [json.loads(line) for line in (BENCH / "tpcds_queries.jsonl").read_text().splitlines() if line]
    directory.mkdir(parents=True, exist_ok=True)
    written = 0
    file_no = 0
    while written < statements:
        parts = []
        for i in range(min(PER_FILE, statements - written)):
            n = written + i
            q = queries[n % len(queries)]
            copy = n // len(queries) if mode == "distinct" else 0
            qid = q["id"].replace("tpcds-", "")
            parts.append(f"CREATE TABLE bench.{qid}_c{copy:05d} AS\n{q['sql'].strip().rstrip(';')};\n")
        (directory / f"script_{file_no:05d}.sql").write_text("\n".join(parts), encoding="utf-8")
        written += len(parts)
        file_no += 1
    return written


class _CountingDelivery:
    target = "memory:benchmark"

    def __init__(self) -> None:
        self.batches = 0
        self.entities = 0
        self.bytes = 0

    def send(self, batch: Any) -> None:
        from atlas_bridge.atlas.encoded import encode_body, entity_count

        self.batches += 1
        self.entities += entity_count(batch)  # a scan's batch says so without being decoded
        self.bytes += len(encode_body(batch))  # what the Atlas client would post

    def close(self) -> None:
        pass


def _jvm_cpu_s(spark: Any) -> float:
    """CPU seconds of the driver's JVM so far (Linux ``/proc``; NaN elsewhere). In local mode it holds the
    executors too, and its threads take cores from the Python workers."""
    try:
        pid = spark.sparkContext._gateway.proc.pid
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (AttributeError, OSError, IndexError, ValueError):
        return float("nan")


def child(corpus: str, master: str) -> None:
    """One measured scan; prints a JSON line."""
    from atlas_bridge import bridge

    schema = json.loads((BENCH / "tpc-ds.schema.json").read_text())
    spark = bridge.spark_session(master, app_name="atlas-bridge-bench")
    spark.sparkContext.parallelize([0], 1).count()  # JVM and worker start-up are not the scan's cost
    delivery = _CountingDelivery()
    jvm = _jvm_cpu_s(spark)
    py = time.process_time()
    t0 = time.perf_counter()
    summary = bridge.scan(
        [corpus],
        delivery,
        namespace="bench",
        spark=spark,
        options=bridge.ScanOptions(dialect="spark", schema=schema),
    )
    total = time.perf_counter() - t0
    jvm = _jvm_cpu_s(spark) - jvm  # the JVM's own threads (scheduler, task results, JIT, GC), not workers
    py = time.process_time() - py
    spark.stop()
    out = {
        "master": master,
        "files": len(summary.files),
        "statements": summary.extract.statements,
        "errors": len(summary.errors),
        "processes": summary.lineage_counts["processes"],
        "datasets": summary.lineage_counts["datasets"],
        "relations": summary.lineage_counts["column_relations"],
        "entities": delivery.entities,
        "batches": delivery.batches,
        "partitions": summary.extract.partitions,
        "total_s": total,
        **{f"{k}_s": v for k, v in summary.timings_s.items()},
        "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "executor_peak_rss_mb": summary.extract.executor_max_rss_kb / 1024,
        "executor_cpu_s": summary.extract.executor_cpu_s,
        "driver_cpu_s": py,
        "jvm_cpu_s": jvm,
        "schema_rounds": summary.extract.schema.rounds if summary.extract.schema is not None else 0,
        "merged_ahead": summary.extract.merged_during_extraction,
    }
    print(json.dumps(out))


def run(corpus: Path, master: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", str(corpus), "--master", master],
        check=True,
        capture_output=True,
        text=True,
    )
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--statements", type=int, default=10_000)
    parser.add_argument("--memory-sizes", default="5000,20000", help="two corpus sizes for the memory runs")
    parser.add_argument(
        "--memory-corpus",
        default="repeat",
        choices=("repeat", "distinct"),
        help="corpus of the memory runs: 'repeat' (same lineage at every size) or 'distinct' (grows)",
    )
    parser.add_argument("--runs", type=int, default=4, help="runs of each master, in alternating order")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--master", default="local[1]", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.master)
        return

    with tempfile.TemporaryDirectory(prefix="atlas-bridge-bench-") as tmp:
        corpus = Path(tmp) / "distinct"
        n = write_corpus(corpus, args.statements, "distinct")
        print(f"corpus: {n} TPC-DS CTAS statements (distinct targets) in {corpus}")
        # Alternating order (1, 2, then 2, 1, ...): a machine that warms up or gets busier favours neither;
        # the best run of each is kept (noise only ever slows a run down).
        runs: dict[str, list[dict[str, Any]]] = {"local[1]": [], "local[2]": []}
        for k in range(args.runs):
            order = ("local[1]", "local[2]") if k % 2 == 0 else ("local[2]", "local[1]")
            for m in order:
                runs[m].append(run(corpus, m))
                r = runs[m][-1]
                rate = r["statements"] / r["total_s"] * 60
                cpu = r["executor_cpu_s"] / r["statements"] * 1000  # moves with the machine, not the master
                print(
                    f"  run {k + 1} {m}: {r['total_s']:.1f} s, {rate:,.0f} stmts/min, "
                    f"executor CPU {cpu:.2f} ms a statement",
                    flush=True,
                )
        results = {m: min(rs, key=lambda r: r["total_s"]) for m, rs in runs.items()}
        print(
            f"{'master':10} {'stmts':>6} {'err':>4} {'extract s':>9} {'exec cpu s':>10} {'cores busy':>10} "
            f"{'merge s':>8} {'convert s':>9} {'deliver s':>9} {'total s':>8} {'stmts/min':>10} "
            f"{'driver MB':>9} {'exec MB':>8} {'py cpu s':>8} {'jvm cpu s':>9}"
        )
        for m, r in results.items():
            print(
                f"{m:10} {r['statements']:6d} {r['errors']:4d} {r['extract_s']:9.1f} "
                f"{r['executor_cpu_s']:10.1f} "
                f"{r['executor_cpu_s'] / r['extract_s']:10.2f} {r['merge_s']:8.1f} {r['convert_s']:9.1f} "
                f"{r['deliver_s']:9.1f} "
                f"{r['total_s']:8.1f} {r['statements'] / r['total_s'] * 60:10.0f} "
                f"{r['driver_peak_rss_mb']:9.0f} {r['executor_peak_rss_mb']:8.0f} "
                f"{r['driver_cpu_s']:8.1f} {r['jvm_cpu_s']:9.1f}"
            )
        r1, r2 = results["local[1]"], results["local[2]"]
        serial = r2["merge_s"] + r2["convert_s"] + r2["deliver_s"]
        print(
            f"local[2]: {r2['statements'] / r2['total_s'] * 60:,.0f} statements a minute (goal >= 12,000); "
            f"schema learning {r2.get('schema_s', 0.0):.1f} s ({r2['schema_rounds']} extra round(s)); driver "
            f"after extraction (merge + convert + deliver) {serial:.1f} s ({r2.get('merged_ahead', 0)} of "
            f"{r2['partitions']} partitions merged during the extraction); "
            f"load average now {os.getloadavg()[0]:.1f} (2 cores: figures above ~2 are from a shared machine)"
        )
        print(
            f"speed-up local[2] / local[1]: extraction {r1['extract_s'] / r2['extract_s']:.2f}x, "
            f"end to end {r1['total_s'] / r2['total_s']:.2f}x (goal >= 1.85); executor CPU per statement "
            f"{r1['executor_cpu_s'] / r1['statements'] * 1000:.1f} ms (local[1]), "
            f"{r2['executor_cpu_s'] / r2['statements'] * 1000:.1f} ms (local[2])"
        )
        # The best runs may be minutes apart, and this machine's speed drifts by a few percent over minutes:
        # the two runs of a pair are next to each other in time, so their ratio is the one least moved by it.
        paired = list(zip(runs["local[1]"], runs["local[2]"], strict=True))
        pairs = [a["total_s"] / b["total_s"] for a, b in paired]
        print(
            f"speed-up, end to end, of each pair of adjacent runs: {', '.join(f'{p:.2f}' for p in pairs)}; "
            f"median {statistics.median(pairs):.2f} (goal >= 1.85)"
        )
        # The machine's speed drifts (7.2 to 9.1 ms a statement for the same work, seen here): each run's time
        # over its executors' CPU per statement takes the drift out of a pair. It takes out too any slowing of
        # two workers that share the caches, so it reads a little high; the goal is on the figures above.
        steady = [
            (a["total_s"] / a["executor_cpu_s"]) / (b["total_s"] / b["executor_cpu_s"]) for a, b in paired
        ]
        print(
            f"  the same pairs, each run's time over its executor CPU a statement (the machine's drift out): "
            f"{', '.join(f'{p:.3f}' for p in steady)}; median {statistics.median(steady):.3f}"
        )
        print(
            f"lineage: {r1['processes']} processes, {r1['datasets']} datasets, {r1['relations']} column "
            f"relations -> {r1['entities']} entities in {r1['batches']} batches"
        )

        sizes = [int(s) for s in args.memory_sizes.split(",")]
        mode = args.memory_corpus
        what = "same lineage at every size" if mode == "repeat" else "every statement a new target"
        print(f"\nmemory, {mode!r} corpus ({what}), local[2]:")
        peaks: list[float] = []
        for size in sizes:
            rep = Path(tmp) / f"{mode}-{size}"
            write_corpus(rep, size, mode)
            r = run(rep, "local[2]")
            print(
                f"  {r['statements']:6d} statements: driver peak {r['driver_peak_rss_mb']:6.0f} MB, executor "
                f"worker peak {r['executor_peak_rss_mb']:5.0f} MB, "
                f"{r['statements'] / r['total_s'] * 60:7.0f} "
                f"stmts/min, lineage {r['relations']} relations, {r['entities']} entities"
            )
            peaks.append(r["driver_peak_rss_mb"])
        print(
            f"  driver peak, largest / smallest corpus: {peaks[-1] / peaks[0]:.2f} "
            f"({sizes[-1] / sizes[0]:.0f}x the statements; goal: flat, about 1.0)"
        )


if __name__ == "__main__":
    main()
