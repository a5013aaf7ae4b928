"""``atlas-bridge serve`` under load: events a second accepted and delivered, memory over a long run, and
Atlas down for part of a run.

A real ``serve`` process (default settings: fsync on, 8 threads) in front of the Atlas stub on a real HTTP
server (``tests/atlas_stub``, in this process); ``--clients`` threads post OpenLineage run events (START and
COMPLETE of runs of ``--jobs`` recurring jobs, with the schema, columnLineage and sql facets, made with
OpenLineage's own client classes) the way its HTTP transport does, one event a request.

1. throughput: ``--runs`` runs; accepted = events / time until every POST was answered 200; delivered =
   events / time until the spool is empty and Atlas holds one execution per run.
2. memory: posting without pause for ``--long-s`` seconds; the serve process's RSS after the first phase
   and at the end (goal: under ``GOAL_RSS_GROWTH`` more).
3. Atlas down: ``--runs`` more runs, Atlas resetting every entity call for ``--down-s`` seconds midway; every
   event must arrive once (one execution per run, no entity twice), and nothing may wait in the spool.

Run: ``python benchmarks/openlineage_serve.py [--runs 1000] [--clients 8] [--long-s 60] [--down-s 10]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import requests
from atlas_stub.http import Fault, FaultServer
from openlineage_serve_helpers import ServeProcess, atlas_entities, fast_env, run_events, wait_for

GOAL_ACCEPTED = 200.0
"""Events a second: a busy site's producers (every Airflow task and dbt model posts START and COMPLETE)."""
GOAL_DELIVERED = 100.0
GOAL_RSS_GROWTH = 0.10
"""Memory held flat: RSS at the end of the long run under 10 % above its start."""


def bodies(first: int, runs: int, jobs: int) -> list[list[bytes]]:
    """Each run's events as request bodies (START then COMPLETE)."""
    from openlineage.client.serde import Serde

    return [
        [Serde.to_json(e).encode("utf-8") for e in run_events(i, jobs=jobs)]
        for i in range(first, first + runs)
    ]


def post_all(url: str, runs: list[list[bytes]], clients: int, stop: Callable[[], bool] | None = None) -> int:
    """Post every run's events from ``clients`` threads (a run's events in order); returns events posted.
    Any answer but 200 is an error: acknowledged means kept."""
    posted = [0] * clients
    errors: list[str] = []

    def worker(k: int) -> None:
        session = requests.Session()
        for run in runs[k::clients]:
            if stop is not None and stop():
                return
            for body in run:
                r = session.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=60)
                if r.status_code != 200:
                    errors.append(f"{r.status_code} {r.text[:200]}")
                    return
                posted[k] += 1

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"refused: {errors[:3]}")
    return sum(posted)


def executions(atlas: FaultServer) -> tuple[int, int]:
    """(process executions in Atlas, the most times one entity is there)."""
    with atlas.stub_lock:
        got = atlas_entities(atlas.stub)
    return sum(1 for t, _ in got if t == "atlas_bridge_process_execution"), max(got.values(), default=0)


def pending(serve: ServeProcess) -> int:
    return int(requests.get(serve.url + "/ready", timeout=10).json().get("pending_batches", -1))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (what it cost, whatever the machine's load)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--long-s", type=float, default=60.0)
    parser.add_argument("--down-s", type=float, default=10.0)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ol-serve-bench-"))
    print(f"{args.runs} runs x 2 events, {args.jobs} jobs, {args.clients} clients; work in {work}")
    first = bodies(0, args.runs, args.jobs)
    with FaultServer(max_hold_s=5.0) as atlas:
        env = fast_env(
            atlas.url, work / "out", ATLAS_BRIDGE_SERVE_FSYNC="true", ATLAS_BRIDGE_GIVE_UP_AFTER_S="10"
        )
        env["ATLAS_BRIDGE_SERVE_RETRY_INTERVAL_S"] = "2"
        with ServeProcess(env) as serve:
            url = serve.lineage_url
            # warm-up: the first conversion imports the converter; typedefs are registered
            post_all(url, bodies(10**6, 5, 5), 1)
            wait_for("the warm-up delivered", lambda: pending(serve) == 0 and executions(atlas)[0] == 5, 60)

            # 1. throughput
            cpu0 = cpu_s(serve.proc.pid)
            t0 = time.perf_counter()
            events = post_all(url, first, args.clients)
            accepted_s = time.perf_counter() - t0
            wait_for(
                "every run in Atlas",
                lambda: executions(atlas)[0] == 5 + args.runs and pending(serve) == 0,
                600,
                0.2,
            )
            delivered_s = time.perf_counter() - t0
            cpu = cpu_s(serve.proc.pid) - cpu0
            posts = sum(1 for m, p, _ in atlas.log if m == "POST" and "/entity/bulk" in p)
            print(
                f"accepted : {events / accepted_s:8.1f} events/s  (goal >= {GOAL_ACCEPTED:g})"
                f"  [{events} events in {accepted_s:.1f}s]"
            )
            print(
                f"delivered: {events / delivered_s:8.1f} events/s  (goal >= {GOAL_DELIVERED:g})"
                f"  [{delivered_s:.1f}s, {posts} bulk requests to Atlas]"
            )
            per_event_ms = cpu / events * 1000
            print(
                f"serve CPU: {per_event_ms:8.2f} ms/event  (HTTP, schema check, conversion, spool, sending:"
                f" {1000 / per_event_ms:.0f} events/s a core)  [load average {os.getloadavg()[0]:.1f}]"
            )

            # 2. memory over a long run
            rss0 = rss_mb(serve.proc.pid)
            rate = events / accepted_s  # enough runs to post for the whole time at the rate just measured
            long_runs = bodies(2 * 10**6, int(args.long_s * rate), args.jobs)
            base = executions(atlas)[0]
            deadline = time.monotonic() + args.long_s
            posted = post_all(url, long_runs, args.clients, stop=lambda: time.monotonic() > deadline)
            wait_for("the long run delivered", lambda: pending(serve) == 0, 600, 0.2)
            rss1 = rss_mb(serve.proc.pid)
            growth = (rss1 - rss0) / rss0
            print(
                f"memory   : RSS {rss0:.1f} MB -> {rss1:.1f} MB after {posted} more events"
                f" over {args.long_s:g}s = {growth:+.1%}  (goal < {GOAL_RSS_GROWTH:+.0%})"
            )
            long_done = executions(atlas)[0] - base

            # 3. Atlas down for part of a run
            down_runs = bodies(3 * 10**6, args.runs, args.jobs)
            before = executions(atlas)[0]
            went_down = threading.Event()

            def outage() -> None:
                time.sleep(args.down_s / 2)
                atlas.add(Fault("reset", times=None, path_contains="/entity"))
                went_down.set()
                time.sleep(args.down_s)
                atlas.clear()

            t = threading.Thread(target=outage)
            t.start()
            t0 = time.perf_counter()
            events = post_all(url, down_runs, args.clients)
            t.join()
            wait_for("every run of the outage phase in Atlas", lambda: pending(serve) == 0, 600, 0.2)
            wait_for("executions", lambda: executions(atlas)[0] - before >= args.runs, 120, 0.2)
            took = time.perf_counter() - t0
            count, most = executions(atlas)
            arrived = count - before
            resets = sum(1 for _, _, kind in atlas.log if kind == "reset")
            print(
                f"Atlas down {args.down_s:g}s: {arrived}/{args.runs} runs arrived,"
                f" each entity at most {most}x (goal {args.runs}/{args.runs}, 1x);"
                f" {resets} calls refused while down; all in Atlas {took:.1f}s after the first post;"
                f" spool empty: {pending(serve) == 0}"
            )
            print(f"long run : {long_done} runs delivered, each entity at most {executions(atlas)[1]}x")
            assert serve.terminate() == 0
    print(json.dumps({"work": str(work)}))


if __name__ == "__main__":
    main()
