"""Delivery under faults, whole runs: what is lost, duplicated, how long a clear failure takes, what leaks.

Not a speed benchmark: it runs ``atlas-bridge scan`` and ``push`` as a user does (subprocesses, DEBUG logs)
against the tests' Atlas stub behind a real HTTP server on 127.0.0.1 that fails on purpose, with a canary
password, and prints one line per scenario with its goal beside the figure::

    .venv/bin/python benchmarks/faults.py

Goals: entities lost 0, duplicates 0, canary hits 0, a clear failure within give_up_after_s (plus one
request deadline), one login attempt after a 401. Then the paths less travelled (issue 29): two scans
sharing one ``unsent/``, batches Atlas refuses (413), Ctrl-C during delivery, two jobs sharing one spool.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from atlas_stub.http import Fault, FaultServer  # noqa: E402

WAREHOUSE = REPO / "examples" / "warehouse"
CLI = str(Path(sys.executable).with_name("atlas-bridge"))
CANARY = "Cnry-7f3/Pw-bench"
GIVE_UP_S = 20.0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_last_stdout = [""]


def _run(args: list[str], env: dict[str, str]) -> tuple[int, str, float]:
    t0 = time.monotonic()
    proc = subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=900, check=False)
    _last_stdout[0] = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - t0


def _env(url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATLAS_BRIDGE_")}
    env.update(
        ATLAS_BRIDGE_REST_ADDRESS=url,
        ATLAS_BRIDGE_USERNAME="admin",
        ATLAS_BRIDGE_PASSWORD=CANARY,
        ATLAS_BRIDGE_LOG_LEVEL="DEBUG",
        ATLAS_BRIDGE_GIVE_UP_AFTER_S=str(GIVE_UP_S),
        ATLAS_BRIDGE_REQUEST_DEADLINE_S="10",
        ATLAS_BRIDGE_READ_TIMEOUT_S="5",
        ATLAS_BRIDGE_BACKOFF_S="0.05",
        ATLAS_BRIDGE_RETRIES="10",
    )
    env.update({f"ATLAS_BRIDGE_{k.upper()}": v for k, v in extra.items()})
    return env


def _payload_entities(folder: Path) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for path in sorted(folder.glob("*-entities.json")):
        batch = json.loads(path.read_text(encoding="utf-8"))
        for e in [*batch["entities"], *batch.get("referredEntities", {}).values()]:
            out[(e["typeName"], e["attributes"]["qualifiedName"])] += 1
    return out


def _atlas(srv: FaultServer) -> Counter[tuple[str, str]]:
    return Counter(
        (e["typeName"], e["attributes"]["qualifiedName"])
        for e in srv.stub.active_entities()
        if e["typeName"].startswith("atlas_bridge")
    )


def _canary_hits(text: str, folder: Path) -> int:
    forms = [CANARY, base64.b64encode(f"admin:{CANARY}".encode()).decode()]
    files = "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())
    return sum((text + files).count(f) for f in forms)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="atlas-bridge-faults-"))
    clean_dir = work / "clean"
    code, out, _ = _run(["scan", str(WAREHOUSE), "--to", str(clean_dir), "--batch-size", "40"], _env(""))
    assert code == 0, out
    clean = _payload_entities(clean_dir)
    rows: list[tuple[str, str, str]] = []
    leaks = 0

    def verdict(srv: FaultServer) -> tuple[int, int]:
        got = _atlas(srv)
        return len(set(clean) - set(got)), sum(n - 1 for n in got.values() if n > 1)

    scan = ["scan", str(WAREHOUSE), "--to", "atlas", "--batch-size", "40"]

    # 1. 30 % random faults over a whole scan, then over a whole push of the clean payloads.
    for what, seed in (("scan", 7), ("push", 11)):
        out_dir = work / f"random-{what}"
        with FaultServer() as srv:
            srv.stub.require_auth("admin", CANARY)
            srv.random_faults(0.3, seed=seed)
            args = [*scan, "--out", str(out_dir)] if what == "scan" else ["push", str(clean_dir)]
            code, text, secs = _run(args, _env(srv.url))
            lost, dup = verdict(srv)
            faults = sum(1 for *_, o in srv.log if o != "ok")
            posts = sum(1 for m, p, o in srv.log if p.endswith("/entity/bulk") and o == "ok")
        leaks += _canary_hits(text, out_dir if out_dir.exists() else clean_dir)
        rows.append(
            (
                f"random 30% faults, whole {what}",
                f"exit {code}, {faults} faults, {posts} bulk posts ok, "
                f"lost {lost}, duplicates {dup}, {secs:.0f}s",
                "lost 0, duplicates 0",
            )
        )

    # 2. Nothing listening: how long to a clear failure; then push what was kept.
    out_dir = work / "down"
    code, text, secs = _run([*scan, "--out", str(out_dir)], _env(f"http://127.0.0.1:{_closed_port()}"))
    last = _last_stdout[0]
    leaks += _canary_hits(text, out_dir)
    with FaultServer() as srv:
        pcode, ptext, _ = _run(["push", str(out_dir / "unsent")], _env(srv.url))
        lost, dup = verdict(srv)
    leaks += _canary_hits(ptext, out_dir)
    rows.append(
        (
            "Atlas not listening, then push unsent/",
            f"exit {code} in {secs:.0f}s; push exit {pcode}; "
            f"lost {lost}, duplicates {dup}; last line: {last[-60:]!r}",
            "exit 1, lost 0",
        )
    )

    # 3. A server that never answers / trickles: time to a clear failure (give_up_after_s set low here).
    for kind in ("silent", "trickle"):
        out_dir = work / kind
        with FaultServer(max_hold_s=GIVE_UP_S * 3) as srv:
            srv.add(Fault(kind, times=None, interval_s=3.0))
            code, text, secs = _run([*scan, "--out", str(out_dir)], _env(srv.url))
        kept = len(list((out_dir / "unsent").glob("*-entities.json")))
        leaks += _canary_hits(text, out_dir)
        rows.append(
            (
                f"Atlas {kind}",
                f"exit {code} after {secs:.0f}s (incl. ~15s Spark start), {kept} batches kept",
                f"clear failure within give_up_after_s={GIVE_UP_S:g}s + start-up",
            )
        )

    # 4. 401: one attempt, no lockout.
    out_dir = work / "401"
    with FaultServer() as srv:
        srv.stub.require_auth("admin", "another-password")
        code, text, secs = _run([*scan, "--out", str(out_dir)], _env(srv.url))
        attempts = len(srv.log)
    leaks += _canary_hits(text, out_dir)
    rows.append(("login refused (401)", f"exit {code}, {attempts} request(s) to Atlas", "1 request"))

    # 5. Atlas emptied between runs: the resume state is checked, everything is sent again.
    out_dir = work / "emptied"
    with FaultServer() as srv:
        _run([*scan, "--out", str(out_dir)], _env(srv.url))
        srv.reset_atlas()
        code, text, _ = _run([*scan, "--out", str(out_dir)], _env(srv.url))
        lost, dup = verdict(srv)
    leaks += _canary_hits(text, out_dir)
    rows.append(("Atlas emptied between runs", f"exit {code}, lost {lost}, duplicates {dup}", "lost 0"))

    # 6. An echoing proxy: Authorization in error bodies.
    out_dir = work / "echo"
    with FaultServer() as srv:
        srv.add(Fault("echo_auth", times=None))
        code, text, _ = _run([*scan, "--out", str(out_dir)], _env(srv.url, retries="1"))
    leaks += _canary_hits(text, out_dir)
    rows.append(("proxy echoing Authorization", f"exit {code}", "canary hits 0 (below)"))

    # 7. Two scans of different folders share one --out while Atlas is down; then push unsent/.
    out_dir = work / "shared-out"
    down = _env(f"http://127.0.0.1:{_closed_port()}")
    expected: Counter[tuple[str, str]] = Counter()
    for part in ("marts", "views"):
        _run(
            ["scan", str(WAREHOUSE / part), "--to", str(work / f"clean-{part}"), "--batch-size", "40"],
            _env(""),
        )
        expected.update(_payload_entities(work / f"clean-{part}"))
        _run(
            ["scan", str(WAREHOUSE / part), "--to", "atlas", "--out", str(out_dir), "--batch-size", "40"],
            down,
        )
    with FaultServer() as srv:
        pcode, _, _ = _run(["push", str(out_dir / "unsent")], _env(srv.url))
        got = _atlas(srv)
    ours = {k for k in expected if k[0].startswith("atlas_bridge")}
    rows.append(
        (
            "two scans share unsent/ (Atlas down), then push",
            f"push exit {pcode}; lost {len(ours - set(got))} of {len(ours)}, "
            f"duplicates {sum(n - 1 for n in got.values() if n > 1)}",
            "lost 0",
        )
    )

    # 8. Atlas refuses two batches as too large (413); then push unsent/.
    out_dir = work / "refused"
    with FaultServer() as srv:
        srv.add(Fault("status", status=413, method="POST", path_contains="/entity/bulk", after=1, times=2))
        code, text, _ = _run([*scan, "--out", str(out_dir)], _env(srv.url))
        answers = len(list((out_dir / "unsent").glob("*.error.json")))  # a push removes delivered ones
        srv.clear()
        pcode, _, _ = _run(["push", str(out_dir / "unsent")], _env(srv.url))
        lost, dup = verdict(srv)
    rows.append(
        (
            "2 batches refused with 413, then push unsent/",
            f"exit {code}, {answers} answers kept, --batch-size hint {'smaller --batch-size' in text}; "
            f"push exit {pcode}; lost {lost}, duplicates {dup}",
            "lost 0",
        )
    )

    # 9. Ctrl-C while a slow Atlas takes the batches; then push unsent/.
    out_dir = work / "ctrl-c"
    with FaultServer() as srv:
        srv.add(Fault("delay", method="POST", path_contains="/entity/bulk", times=None, interval_s=0.5))
        args = [*scan, "--out", str(out_dir), "--batch-size", "5", "--no-progress"]
        proc = subprocess.Popen(
            [CLI, *args], env=_env(srv.url), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )

        def posts() -> int:
            with srv.lock:
                return sum(1 for m, p, _ in srv.log if m == "POST" and p.endswith("/entity/bulk"))

        deadline = time.monotonic() + 600
        while posts() < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        t0, at_signal = time.monotonic(), posts()
        proc.communicate(timeout=120)
        secs, after = time.monotonic() - t0, posts() - at_signal
        srv.clear()
        pcode, _, _ = _run(["push", str(out_dir / "unsent")], _env(srv.url))
        lost, dup = verdict(srv)
    rows.append(
        (
            "Ctrl-C during delivery (slow Atlas), then push",
            f"exit {proc.returncode} {secs:.1f}s after the signal, {after} batch(es) sent after it; "
            f"push exit {pcode}; lost {lost}, duplicates {dup}",
            "exit 130, lost 0",
        )
    )

    # 10. Two jobs (processes) x 100 batches share one spool while Atlas is down; then push the spool.
    spool, go = work / "shared-spool", work / "go"
    writer = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from atlas_bridge.atlas.client import AtlasClient\n"
        "from atlas_bridge.atlas.sink import AtlasSink\n"
        "url, spool, go, name = sys.argv[1:5]\n"
        "client = AtlasClient(url, backoff=0, retries=0, timeout=(0.5, 0.5))\n"
        "sink = AtlasSink(client, spool, retry_interval_s=0)\n"
        "deadline = time.monotonic() + 60\n"
        "while not Path(go).exists() and time.monotonic() < deadline: time.sleep(0.01)\n"
        "for i in range(100):\n"
        "    sink.emit({'entities': [{'typeName': 'DataSet', 'guid': '-1', 'attributes':"
        " {'qualifiedName': f'{name}.t{i}@p', 'name': f't{i}'}}], 'referredEntities': {}})\n"
        "sink.close()\n"
    )
    down_url = f"http://127.0.0.1:{_closed_port()}"
    procs = [
        subprocess.Popen([sys.executable, "-c", writer, down_url, str(spool), str(go), name])
        for name in ("job1", "job2")
    ]
    go.touch()
    for p in procs:
        p.wait(timeout=600)
    with FaultServer() as srv:
        pcode, _, _ = _run(["push", str(spool), "--skip-typedefs"], _env(srv.url))
        names = {e["attributes"]["qualifiedName"] for e in srv.stub.active_entities("DataSet")}
    rows.append(
        (
            "two jobs x 100 batches share a spool (Atlas down)",
            f"push exit {pcode}; lost {200 - len(names)} of 200",
            "lost 0",
        )
    )

    width = max(len(r[0]) for r in rows)
    for name, figure, goal in rows:
        print(f"{name:<{width}}  {figure}   [goal: {goal}]")
    print(
        f"{'canary hits, all runs':<{width}}  {leaks} (stdout, stderr, DEBUG logs, summary, state, payloads)"
        "   [goal: 0]"
    )
    print(f"work folder: {work}")


if __name__ == "__main__":
    main()
