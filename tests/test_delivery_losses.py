"""Issue 29, delivery: nothing kept on disk is lost on the paths less travelled.

Shared folders (two jobs on one spool, scans on one ``unsent/``), refused batches, a damaged folder to push,
and a scan stopped by a signal or killed: each on real processes where the fault is a process's.
"""

from __future__ import annotations

import json
import os
import signal
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

from atlas_bridge.atlas.client import AtlasClient, RetryPolicy
from atlas_bridge.atlas.sink import MANIFEST, AtlasSink, FileSink, dumps_batch, push_directory
from atlas_bridge.cli import cli
from test_faults import _closed_port, _fast_env, _payload_entities

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
