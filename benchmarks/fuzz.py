"""Bad input never costs minutes or gigabytes (issue 11): fuzzing, the split's fallback, the statement hash.

Three parts, each printing its figures beside the budget (README, "Budgets"):

- ``fuzz``  N seeded mutated inputs (tests/sql_fuzz.py, the suite's generator at a bigger ``--scale``:
  deeper nesting, bigger literals, longer names and scripts) through ``extract_sql_lineage``. Printed:
  exceptions that escaped (goal 0); CPU seconds per statement (the thread's CPU time for the input /
  statements in it, so that other work on the machine does not inflate it; wall time's max beside it),
  p99 and max, and inputs over the budget (goal 0); peak traced memory per input byte (tracemalloc, on every
  ``--mem-every``-th input and on every input over 16 KB, in a second, traced run), max and over-budget
  count (goal 0).
- ``split`` ``"SELECT 1;" * N + "'"`` (tokenizing fails on the last quote, our scanner takes over) for
  N = 4,000 / 8,000 / 20,000, against its peer in the same process: the dialect's tokenizer on the same
  text without the quote. Linear = the ratio stays flat as N grows (it was 6.9 s, 25 s, 620 s).
- ``hash``  ``query_hash`` of a statement with a 1 MB and a 10 MB literal: seconds and peak memory, against
  ``hashlib.sha256`` of the encoded text (the least any hash of the text costs).

Run: ``python benchmarks/fuzz.py [--count 100000] [--scale 3] [--jobs 2] [--only fuzz|split|hash]``.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import logging
import multiprocessing
import os
import sys
import time
import tracemalloc
from pathlib import Path

from sqlglot.dialects.dialect import Dialect

from atlas_bridge import extract_sql_lineage
from atlas_bridge.extractors.sql.split import split_statements
from atlas_bridge.model import ExtractionResult, query_hash

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from sql_fuzz import mutants

BUDGET_S_PER_STATEMENT = 0.5
"""Seconds one statement may take (parse + analysis), mutated or not."""
BUDGET_BYTES_PER_INPUT_BYTE = 1500
"""Peak traced memory per byte of input, for inputs over 16 KB (small ones are dominated by fixed costs).
It follows token density: sqlglot keeps ~250 bytes per token and its tree more, so ordinary SQL costs ~300,
dense SQL (``a+b, a+b, ...``, runs of quotes) up to ~1,000. What must never happen again is a cost per
character of a literal or a run of blanks (now ~0.1; it was ~150)."""
BUDGET_BYTES_SMALL = 16 * 1024 * 1024
"""Peak traced memory of any input up to 16 KB."""
SPLIT_GROWTH = 1.5
"""How much the split's cost per statement (vs the clean tokenizer's) may grow from N=4,000 to 20,000."""
HASH_BYTES_PER_CHAR = 1.0
"""Peak memory of query_hash per literal character (the text itself is not counted: it exists already)."""


Shard = tuple[list[str], list[tuple[float, int, str]], list[tuple[float, int, str]], int, float]


def _fuzz_shard(count: int, scale: int, mem_every: int, shard: int, shards: int) -> Shard:
    """Every ``shards``-th input from ``shard`` on (the generator runs whole: the inputs do not depend on
    how the run is cut), pinned to one core."""
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[shard % len(cpus)]})
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    escaped: list[str] = []
    per_stmt: list[tuple[float, int, str]] = []
    mem: list[tuple[float, int, str]] = []
    small_peak = 0
    max_wall = 0.0
    started = time.perf_counter()
    for n, (dialect, sql) in enumerate(mutants(count, seed=1111, scale=scale, max_len=4000 * scale)):
        if n % shards != shard:
            continue
        size = len(sql.encode("utf-8", "surrogatepass"))
        t0 = time.thread_time()
        w0 = time.perf_counter()
        try:
            result = extract_sql_lineage(sql, dialect)
            elapsed = time.thread_time() - t0
            wall_s = time.perf_counter() - w0
            ExtractionResult.model_validate_json(result.model_dump_json().encode("utf-8"))
        except Exception as e:
            escaped.append(f"{dialect} {sql[:60]!r}: {type(e).__name__}: {str(e)[:120]}")
            continue
        if size > 16 * 1024 or n % mem_every == 0:  # again, traced (tracemalloc slows it several times)
            gc.collect()
            tracemalloc.start()
            extract_sql_lineage(sql, dialect)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            if size > 16 * 1024:
                mem.append((peak / size, size, f"{dialect} {sql[:50]!r}"))
            else:
                small_peak = max(small_peak, peak)
        d = Dialect.get_or_raise(None if dialect == "ansi" else dialect)
        stmts = max(1, len(split_statements(sql, d)))
        per_stmt.append((elapsed / stmts, stmts, f"{dialect} {sql[:50]!r} ({size} bytes)"))
        max_wall = max(max_wall, wall_s / stmts)
        if n and n % 10_000 < shards:
            print(f"  ... shard {shard}: input {n}, {time.perf_counter() - started:.0f} s", flush=True)
    return escaped, per_stmt, mem, small_peak, max_wall


def fuzz(count: int, scale: int, mem_every: int, jobs: int = 1) -> bool:
    started = time.perf_counter()
    if jobs == 1:
        shards = [_fuzz_shard(count, scale, mem_every, 0, 1)]
    else:
        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            shards = pool.starmap(_fuzz_shard, [(count, scale, mem_every, k, jobs) for k in range(jobs)])
    escaped = [e for sh in shards for e in sh[0]]
    per_stmt = [p for sh in shards for p in sh[1]]
    mem = [m for sh in shards for m in sh[2]]
    small_peak = max(sh[3] for sh in shards)
    max_wall = max(sh[4] for sh in shards)
    wall = time.perf_counter() - started
    per_stmt.sort()
    mem.sort()
    slow = [p for p in per_stmt if p[0] > BUDGET_S_PER_STATEMENT]
    heavy = [m for m in mem if m[0] > BUDGET_BYTES_PER_INPUT_BYTE]
    p99 = per_stmt[min(len(per_stmt) - 1, int(0.99 * len(per_stmt)))][0]
    print(f"fuzz: {count} inputs (scale {scale}) in {wall:.0f} s on {jobs} process(es)")
    print(f"  exceptions escaped          : {len(escaped):>8}        goal 0")
    for line in escaped[:10]:
        print(f"    {line}")
    print(f"  CPU s/statement p99         : {p99:>8.3f}")
    print(f"  CPU s/statement max         : {per_stmt[-1][0]:>8.3f}        budget {BUDGET_S_PER_STATEMENT}")
    print(f"  wall s/statement max        : {max_wall:>8.3f}        (inflated when the machine is shared)")
    print(f"    slowest: {per_stmt[-1][2]}")
    print(f"  inputs over the time budget : {len(slow):>8}        goal 0")
    small_mb = small_peak / 2**20
    print(f"  peak memory, inputs <= 16 KB: {small_mb:>8.1f} MB     budget {BUDGET_BYTES_SMALL >> 20} MB")
    if mem:
        budget = BUDGET_BYTES_PER_INPUT_BYTE
        print(f"  peak bytes per input byte   : {mem[-1][0]:>8.1f}        budget {budget}")
        print(f"    (over {len(mem)} inputs > 16 KB, largest {max(m[1] for m in mem) / 1024:.0f} KB)")
        print(f"    heaviest: {mem[-1][2]} ({mem[-1][1]} bytes)")
    print(f"  inputs over the memory budget: {len(heavy):>7}        goal 0")
    return not escaped and not slow and not heavy and small_peak <= BUDGET_BYTES_SMALL


def split() -> bool:
    d = Dialect.get_or_raise(None)
    ratios: dict[int, float] = {}
    per_stmt: dict[int, float] = {}
    print("split: 'SELECT 1;' * N + \"'\" (fallback scanner) vs the tokenizer on the text without the quote")
    print(f"  {'N':>6} {'split s':>8} {'tokenize s':>10} {'ratio':>6} {'us/stmt':>8}")
    for n in (4_000, 8_000, 20_000):
        text = "SELECT 1;" * n
        best_split = best_tok = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            chunks = split_statements(text + "'", d)
            best_split = min(best_split, time.perf_counter() - t0)
            t0 = time.perf_counter()
            d.tokenize(text)
            best_tok = min(best_tok, time.perf_counter() - t0)
        assert len(chunks) == n + 1
        ratios[n] = best_split / best_tok
        per_stmt[n] = best_split / n
        print(f"  {n:>6} {best_split:>8.3f} {best_tok:>10.3f} {ratios[n]:>6.2f} {1e6 * best_split / n:>8.1f}")
    growth = ratios[20_000] / ratios[4_000]
    own = per_stmt[20_000] / per_stmt[4_000]
    print(f"  ratio growth 4,000 -> 20,000  : {growth:.2f}x   budget {SPLIT_GROWTH}x (quadratic would be 5x)")
    print(f"  us/stmt growth 4,000 -> 20,000: {own:.2f}x   (alone: noisy on a shared machine)")
    return growth <= SPLIT_GROWTH


def hash_() -> bool:
    ok = True
    print("hash: query_hash of a statement with one big literal vs sha256 of the encoded text")
    print(f"  {'literal':>8} {'hash s':>7} {'sha256 s':>8} {'peak MB':>8} {'B/char':>7}")
    for size in (1_000_000, 10_000_000):
        sql = "SELECT '" + "x" * size + "' AS big FROM t"
        gc.collect()
        tracemalloc.start()
        t0 = time.perf_counter()
        query_hash(sql)
        elapsed = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        t0 = time.perf_counter()
        hashlib.sha256(sql.encode("utf-8")).hexdigest()
        peer = time.perf_counter() - t0
        per_char = peak / size
        ok = ok and per_char <= HASH_BYTES_PER_CHAR
        mb = peak / 2**20
        print(f"  {size // 1_000_000:>5} MB {elapsed:>7.3f} {peer:>8.3f} {mb:>8.2f} {per_char:>7.3f}")
    print(f"  budget: {HASH_BYTES_PER_CHAR} byte per literal character (was ~150: 148 MB for 1 MB)")
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=100_000, help="fuzz inputs (default 100,000)")
    ap.add_argument("--scale", type=int, default=3, help="mutation size factor (the suite's test uses 1)")
    ap.add_argument("--mem-every", type=int, default=10, help="trace memory of every n-th small input")
    ap.add_argument("--jobs", type=int, default=1, help="processes, each pinned to a core (default 1)")
    ap.add_argument("--only", choices=["fuzz", "split", "hash"], action="append")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity") and args.jobs == 1:  # shards pin themselves, one core each
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    parts = args.only or ["split", "hash", "fuzz"]
    results = []
    for part in parts:
        if part == "fuzz":
            results.append(fuzz(args.count, args.scale, args.mem_every, args.jobs))
        elif part == "split":
            results.append(split())
        else:
            results.append(hash_())
        print()
    print("within budgets" if all(results) else "OVER BUDGET")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
