"""Issue 29, delivery: nothing kept on disk is lost on the paths less travelled.

Shared folders (two jobs on one spool, scans on one ``unsent/``), refused batches, a damaged folder to push,
and a scan stopped by a signal or killed: each on real processes where the fault is a process's.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from atlas_stub.http import Fault, FaultServer
from click.testing import CliRunner
from test_faults import _closed_port, _fast_env, _payload_entities

from atlas_bridge.atlas.client import AtlasClient, RetryPolicy
from atlas_bridge.atlas.sink import MANIFEST, AtlasSink, FileSink, push_directory
from atlas_bridge.cli import cli

REPO = Path(__file__).resolve().parent.parent
WAREHOUSE = REPO / "examples" / "warehouse"
NS = "losses"


def _table(qn: str) -> dict[str, Any]:
    return {"typeName": "DataSet", "guid": "-1", "attributes": {"qualifiedName": qn, "name": qn}}


def _batch(qn: str) -> dict[str, Any]:
    return {"entities": [_table(qn)], "referredEntities": {}}


def _client(url: str) -> AtlasClient:
    policy = RetryPolicy(deadline_s=5.0, give_up_after_s=10.0)
    return AtlasClient(url, backoff=0, retries=1, policy=policy, timeout=(1.0, 2.0))


def _datasets(srv: FaultServer) -> set[str]:
    return {e["attributes"]["qualifiedName"] for e in srv.stub.active_entities("DataSet")}


def _wait_for(what: str, check: Any, timeout_s: float) -> None:
    """Poll ``check()`` until true, at most ``timeout_s`` (bounded in time and count)."""
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / 0.05) + 1):
        if check():
            return
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# -- one spool, two jobs ---------------------------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from atlas_bridge.atlas.client import AtlasClient
    from atlas_bridge.atlas.sink import AtlasSink

    url, spool, go, name, count = sys.argv[1:6]
    # retry_interval_s=0: Atlas is tried (and the spool flushed) before every batch, the busiest case
    sink = AtlasSink(AtlasClient(url, backoff=0, retries=0, timeout=(0.5, 0.5)), spool, retry_interval_s=0)
    deadline = time.monotonic() + 60
    while not Path(go).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    for i in range(int(count)):
        sink.emit({"entities": [{"typeName": "DataSet", "guid": "-1",
                   "attributes": {"qualifiedName": f"{name}.t{i}@p", "name": f"t{i}"}}],
                   "referredEntities": {}})
    sink.close()
    print(sink.report.spooled)
    """
)


def test_two_jobs_sharing_a_spool_with_atlas_down_lose_nothing(tmp_path: Path) -> None:
    """Two writers x 100 batches once lost 81-95 of them (files and manifest overwritten)."""
    spool, go = tmp_path / "spool", tmp_path / "go"
    down = f"http://127.0.0.1:{_closed_port()}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, down, str(spool), str(go), name, "100"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("job1", "job2")
    ]
    go.touch()  # both start writing at once
    outs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    assert [o[0].strip() for o in outs] == ["100", "100"]
    assert len(json.loads((spool / MANIFEST).read_text())["batches"]) == 200
    with FaultServer() as srv:
        report = push_directory(spool, _client(srv.url))
        assert (report.batches, report.failed) == (200, 0)
        assert _datasets(srv) == {f"{j}.t{i}@p" for j in ("job1", "job2") for i in range(100)}


def test_a_batch_spooled_while_the_spool_is_sent_stays_in_it(tmp_path: Path) -> None:
    """Flushing a spool removes what it sent, not what another job wrote to it meanwhile."""
    spool = tmp_path / "spool"
    FileSink(spool).emit(_batch("db.first@p"))
    with FaultServer() as srv:
        client = _client(srv.url)
        orig = client.post_entities

        def post_while_another_job_writes(body: Any) -> dict[str, Any]:
            FileSink(spool).emit(_batch("db.meanwhile@p"))  # another job's batch, mid-flush
            return orig(body)

        client.post_entities = post_while_another_job_writes  # type: ignore[method-assign]
        sink = AtlasSink(client, spool_dir=spool)
        sink.flush_spool()
        assert _datasets(srv) == {"db.first@p"}
        assert sink.spool_pending() == 1
        client.post_entities = orig  # type: ignore[method-assign]
        sink.flush_spool()
        assert _datasets(srv) == {"db.first@p", "db.meanwhile@p"}
        assert sink.spool_pending() == 0


def test_a_job_finds_the_spool_being_sent_by_another_and_queues_behind(tmp_path: Path) -> None:
    from atlas_bridge.atlas.sink import PUSH_LOCK, folder_lock

    spool = tmp_path / "spool"
    FileSink(spool).emit(_batch("db.first@p"))
    with FaultServer() as srv:
        sink = AtlasSink(_client(srv.url), spool_dir=spool)
        with folder_lock(spool, PUSH_LOCK):  # another process is sending the spool
            sink.emit(_batch("db.second@p"))
            sink.close()
        assert _datasets(srv) == set()  # order kept: the second batch waits behind the first
        assert sink.spool_pending() == 2
        sink.flush_spool()
        assert _datasets(srv) == {"db.first@p", "db.second@p"}


# -- push of a damaged folder ----------------------------------------------------------------------


def _folder(path: Path, names: list[str]) -> FileSink:
    sink = FileSink(path)
    for name in names:
        sink.emit(_batch(name))
    return sink


@pytest.mark.parametrize("damage", ["cut", "missing", "not_a_batch"])
def test_push_of_a_folder_with_a_damaged_batch_sends_the_rest(tmp_path: Path, damage: str) -> None:
    folder = tmp_path / "b"
    _folder(folder, ["db.a@p", "db.b@p", "db.c@p"])
    second = folder / "0002-entities.json"
    if damage == "cut":
        second.write_text(second.read_text()[:25], encoding="utf-8")
    elif damage == "missing":
        second.unlink()
    else:
        second.write_text("[1, 2]\n", encoding="utf-8")
    with FaultServer() as srv:
        result = CliRunner().invoke(cli, ["push", str(folder), "--atlas", srv.url, "--skip-typedefs"])
        assert result.exit_code == 1, result.output
        assert _datasets(srv) == {"db.a@p", "db.c@p"}
    assert "failed: 0002-entities.json: " in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("manifest", ["{not json", '{"batches": 3}', '{"batches": [{"file": "../x"}]}'])
def test_push_of_a_folder_with_a_bad_manifest_sends_the_numbered_files(tmp_path: Path, manifest: str) -> None:
    folder = tmp_path / "b"
    _folder(folder, ["db.a@p", "db.b@p"])
    (folder / MANIFEST).write_text(manifest, encoding="utf-8")
    with FaultServer() as srv:
        result = CliRunner().invoke(cli, ["push", str(folder), "--atlas", srv.url, "--skip-typedefs"])
        assert result.exit_code == 1, result.output
        assert _datasets(srv) == {"db.a@p", "db.b@p"}
    assert f"failed: {MANIFEST}: " in result.output
    assert "not a valid manifest" in result.output


def test_a_writer_rebuilds_a_bad_manifest_and_loses_no_batch(tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    _folder(folder, ["db.a@p"])
    (folder / MANIFEST).write_text("{cut", encoding="utf-8")
    FileSink(folder).emit(_batch("db.b@p"))
    listed = [e["file"] for e in json.loads((folder / MANIFEST).read_text())["batches"]]
    assert listed == ["0001-entities.json", "0002-entities.json"]


def test_a_refused_push_keeps_atlas_answer_beside_the_batch(tmp_path: Path) -> None:
    folder = tmp_path / "b"
    _folder(folder, ["db.a@p", "db.b@p"])
    with FaultServer() as srv:
        srv.add(Fault("status", status=413, body="Request Entity Too Large", path_contains="/entity/bulk"))
        report = push_directory(folder, _client(srv.url))
        assert (report.batches, report.failed) == (1, 1)
        answer = json.loads((folder / "0001-entities.error.json").read_text())
        assert answer["status_code"] == 413
        report = push_directory(folder, _client(srv.url))  # the answer goes once the batch is delivered
        assert (report.batches, report.skipped, report.failed) == (1, 1, 0)
        assert not (folder / "0001-entities.error.json").exists()
        assert _datasets(srv) == {"db.a@p", "db.b@p"}


# -- whole scans -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clean(spark: object, tmp_path_factory: pytest.TempPathFactory) -> set[tuple[str, str]]:
    """Our entities of the example warehouse, scanned to files: what every interrupted run must deliver."""
    out = tmp_path_factory.mktemp("clean")
    result = CliRunner().invoke(cli, ["scan", str(WAREHOUSE), "--to", str(out), "--namespace", NS])
    assert result.exit_code == 0, result.output
    return _ours(_payload_entities(out))


def _scan(out: Path, *paths: Path, extra: tuple[str, ...] = ()) -> Any:
    args = ["scan", *map(str, paths), "--to", "atlas", "--out", str(out), "--namespace", NS]
    return CliRunner().invoke(cli, [*args, "--batch-size", "40", *extra])


def _atlas_entities(srv: FaultServer) -> Counter[tuple[str, str]]:
    return Counter(
        (e["typeName"], e["attributes"]["qualifiedName"])
        for e in srv.stub.active_entities()
        if e["typeName"].startswith("atlas_bridge")
    )


def _ours(entities: Counter[tuple[str, str]]) -> set[tuple[str, str]]:
    return {k for k in entities if k[0].startswith("atlas_bridge")}


@pytest.mark.spark
def test_a_scan_keeps_the_batches_an_earlier_scan_kept_for_push(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scan A (Atlas down) kept its batches in unsent/; scan B of another folder, same --out, wiped them."""
    monkeypatch.chdir(tmp_path)
    _fast_env(monkeypatch, f"http://127.0.0.1:{_closed_port()}")
    out = tmp_path / "atlas-bridge-out"
    unsent = out / "unsent"
    first = _scan(out, WAREHOUSE / "marts")
    assert first.exit_code == 1, first.output
    kept_by_a = _payload_entities(unsent)
    assert kept_by_a
    second = _scan(out, WAREHOUSE / "views")
    assert second.exit_code == 1, second.output
    kept = _payload_entities(unsent)
    assert set(kept_by_a) <= set(kept)
    assert set(kept) - set(kept_by_a)  # and B's own
    with FaultServer() as srv:
        monkeypatch.setenv("ATLAS_BRIDGE_REST_ADDRESS", srv.url)
        pushed = CliRunner().invoke(cli, ["push", str(unsent)])
        assert pushed.exit_code == 0, pushed.output
        assert _ours(kept) <= set(_atlas_entities(srv))


@pytest.mark.spark
@pytest.mark.parametrize("status", [400, 413])
def test_a_scan_keeps_refused_batches_in_unsent_with_atlas_answer(
    clean: set[tuple[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    with FaultServer() as srv:
        srv.add(
            Fault(
                "status",
                status=status,
                method="POST",
                path_contains="/entity/bulk",
                after=1,
                times=2,
                body="refused",
            )
        )
        _fast_env(monkeypatch, srv.url)
        result = _scan(tmp_path, WAREHOUSE, extra=("--batch-size", "20"))
        assert result.exit_code == 1, result.output
        unsent = tmp_path / "unsent"
        answers = sorted(p.name for p in unsent.glob("*.error.json"))
        # the two refused, and any later batch that refers to what they hold (Atlas refuses it too)
        assert answers[:2] == ["0001-entities.error.json", "0002-entities.error.json"]
        answer = json.loads((unsent / "0001-entities.error.json").read_text())
        assert answer["status_code"] == status
        assert f"finish with: atlas-bridge push {unsent}" in result.output
        too_large = "smaller --batch-size (this run: 20; try 10)"
        assert (too_large in result.output) is (status == 413)
        summary = json.loads((tmp_path / "summary.json").read_text())
        assert summary["batches"]["kept_unsent"] == len(answers)
        srv.clear()
        pushed = CliRunner().invoke(cli, ["push", str(unsent)])
        assert pushed.exit_code == 0, pushed.output
        assert clean == set(_atlas_entities(srv))


def _scan_process(out: Path, url: str, tmp: Path, batch_size: int = 5) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATLAS_BRIDGE_")}
    env.update(
        ATLAS_BRIDGE_REST_ADDRESS=url,
        ATLAS_BRIDGE_BACKOFF_S="0",
        ATLAS_BRIDGE_RETRIES="1",
        ATLAS_BRIDGE_READ_TIMEOUT_S="10",
        ATLAS_BRIDGE_LOG_LEVEL="INFO",
        TMPDIR=str(tmp),
    )
    tmp.mkdir(exist_ok=True)
    args = ["scan", str(WAREHOUSE), "--to", "atlas", "--out", str(out), "--namespace", NS]
    args += ["--batch-size", str(batch_size), "--master", "local[1]", "--no-progress", "--no-learn-schema"]
    return subprocess.Popen(
        [sys.executable, "-m", "atlas_bridge", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, as a terminal's job
    )


def _bulk_posts(srv: FaultServer) -> int:
    with srv.lock:
        return sum(1 for m, p, _ in srv.log if m == "POST" and p.endswith("/entity/bulk"))


@pytest.mark.spark
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_delivery_stops_at_a_batch_boundary_and_keeps_the_rest(
    clean: set[tuple[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sig: signal.Signals
) -> None:
    """Ctrl-C during delivery was ignored (every batch sent, exit 0); SIGTERM left the temp folder."""
    out, tmp = tmp_path / "out", tmp_path / "tmp"
    with FaultServer() as srv:
        srv.add(Fault("delay", method="POST", path_contains="/entity/bulk", times=None, interval_s=0.5))
        proc = _scan_process(out, srv.url, tmp)
        try:
            _wait_for("the second batch", lambda: _bulk_posts(srv) >= 2 or proc.poll() is not None, 400)
            assert proc.poll() is None
            if sig == signal.SIGINT:  # Ctrl-C: the terminal signals the whole process group
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)
            posts_then = _bulk_posts(srv)
            _, err_bytes = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        err = err_bytes.decode(errors="replace")
        assert proc.returncode == 130, err[-3000:]
        assert _bulk_posts(srv) <= posts_then + 1  # the batch in flight, then nothing more
        assert f"interrupted ({sig.name})" in err
        assert "Traceback" not in err
        summary = json.loads((out / "summary.json").read_text())
        assert summary["batches"]["kept_unsent"] > 0
        assert summary["batches"]["sent"] + summary["batches"]["kept_unsent"] == summary["batches"]["total"]
        assert not list(tmp.glob("atlas-bridge-scan-*"))  # the temp folder went with the process
        srv.clear()
        monkeypatch.setenv("ATLAS_BRIDGE_REST_ADDRESS", srv.url)
        pushed = CliRunner().invoke(cli, ["push", str(out / "unsent")])
        assert pushed.exit_code == 0, pushed.output
        assert clean == set(_atlas_entities(srv))


@pytest.mark.spark
def test_the_temp_folder_of_a_killed_scan_is_removed_by_the_next(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    out, tmp = tmp_path / "out", tmp_path / "tmp"
    with FaultServer() as srv:
        srv.add(Fault("delay", method="POST", path_contains="/entity/bulk", times=None, interval_s=0.5))
        proc = _scan_process(out, srv.url, tmp)
        try:
            _wait_for("the first batch", lambda: _bulk_posts(srv) >= 1 or proc.poll() is not None, 400)
            assert proc.poll() is None
            proc.kill()  # kill -9: nothing can clean up
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    left = list(tmp.glob("atlas-bridge-scan-*"))
    assert len(left) == 1
    alive = tmp / "atlas-bridge-scan-alive"  # a running scan's (this very process): left alone
    alive.mkdir()
    (alive / "owner.json").write_text(
        json.dumps({"host": socket.gethostname(), "pid": os.getpid()}), encoding="utf-8"
    )
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    result = CliRunner().invoke(
        cli, ["scan", str(WAREHOUSE / "views"), "--to", str(tmp_path / "files"), "--namespace", NS]
    )
    assert result.exit_code == 0, result.output
    assert list(tmp.glob("atlas-bridge-scan-*")) == [alive]


# -- the hook's sender -----------------------------------------------------------------------------


def test_a_queued_sink_never_waits_on_a_slow_atlas_and_keeps_the_order(tmp_path: Path) -> None:
    import threading

    from atlas_bridge.atlas.sink import QueuedSink

    spool = tmp_path / "spool"
    with FaultServer() as srv:
        srv.add(Fault("delay", method="POST", path_contains="/entity/bulk", times=1, interval_s=1.2))
        sink = QueuedSink(AtlasSink(_client(srv.url), spool_dir=spool), max_pending=2)
        t0 = time.monotonic()
        names = [f"db.t{i}@p" for i in range(10)]
        for name in names:
            sink.emit(_batch(name))
        assert time.monotonic() - t0 < 1.0  # the first call waits 1.2 s on Atlas; the caller does not
        assert sink.overflowed >= 7
        assert list(spool.glob("overflow-*/*-entities.json"))  # beyond the queue: on disk, not dropped
        done = threading.Event()
        sink.flush_then(done)
        assert done.wait(30)
        sink.close()
        with srv.lock:
            posted = [o for m, p, o in srv.log if m == "POST" and p.endswith("/entity/bulk")]
        assert len(posted) == 10
        assert _datasets(srv) == set(names)
        order = [
            r.body["entities"][0]["attributes"]["qualifiedName"]
            for r in srv.stub.requests_to("POST", "/entity/bulk")
        ]
        assert order == names
    assert not list(spool.glob("overflow-*"))


def test_a_fresh_folder_with_a_bad_manifest_deletes_nothing(tmp_path: Path) -> None:
    """``scan --to DIR`` over a folder whose manifest is damaged: which files were ours is unknown."""
    (tmp_path / "0001-entities.json").write_text("mine\n", encoding="utf-8")
    (tmp_path / MANIFEST).write_text("{cut", encoding="utf-8")
    sink = FileSink(tmp_path, fresh=True)
    sink.emit(_batch("db.a@p"))
    assert (tmp_path / "0001-entities.json").read_text() == "mine\n"
    listed = [e["file"] for e in json.loads((tmp_path / MANIFEST).read_text())["batches"]]
    assert listed == ["0002-entities.json"]


def test_deliver_stops_at_the_batch_boundary_a_signal_asked_for(tmp_path: Path) -> None:
    from atlas_bridge.bridge import AtlasDelivery, deliver

    with FaultServer() as srv:
        delivery = AtlasDelivery(_client(srv.url), "atlas:test", tmp_path / "unsent")
        asked: list[str | None] = []

        def stop() -> str | None:  # the signal comes while the second batch is being sent
            asked.append("SIGTERM" if len(_datasets(srv)) >= 2 else None)
            return asked[-1]

        stats = deliver(
            [_batch(f"db.t{i}@p") for i in range(5)], delivery, None, keep=delivery.keep, stop=stop
        )
        assert (stats.sent, stats.kept, stats.interrupted) == (2, 3, "SIGTERM")
        assert _datasets(srv) == {"db.t0@p", "db.t1@p"}
    assert len(asked) == 3  # asked before each batch until it said stop, then never again
    assert len(json.loads((tmp_path / "unsent" / MANIFEST).read_text())["batches"]) == 3
