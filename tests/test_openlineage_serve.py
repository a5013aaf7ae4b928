"""``atlas-bridge serve`` as producers meet it: a real process on 127.0.0.1, OpenLineage's own Python
client posting to it, and the Atlas stub behind a real HTTP server (``atlas_stub.http``).

Each guarantee has a test: what is acknowledged reaches Atlas (Atlas down for a while, serve killed with
-9, serve stopped with SIGTERM mid-delivery), bad input is a clear 4xx and never a 5xx.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import requests
from atlas_stub.http import Fault, FaultServer
from click.testing import CliRunner
from openlineage_serve_helpers import (
    ServeProcess,
    atlas_entities,
    expected_entities,
    fast_env,
    ol_client,
    run_events,
    wait_for,
)

from atlas_bridge.cli import cli

pytest.importorskip("openlineage.client")
pytest.importorskip("waitress")

KEY = "ol-Key-4f9a/Zq"  # a '/' on purpose, as base64-ish keys hold


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _complete(srv: FaultServer, expected: set[tuple[str, str]]) -> bool:
    return expected <= set(atlas_entities(srv.stub))


def _assert_once(srv: FaultServer, expected: set[tuple[str, str]]) -> None:
    got = atlas_entities(srv.stub)
    assert expected <= set(got), sorted(expected - set(got))[:5]
    assert max(got.values()) == 1, [k for k, v in got.items() if v > 1][:5]


# -- OpenLineage's client -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("compression", "api_key"), [(None, None), ("gzip", None), ("gzip", KEY), (None, KEY)]
)
def test_the_openlineage_client_posts_to_serve_and_atlas_holds_the_lineage(
    tmp_path: Path, compression: str | None, api_key: str | None
) -> None:
    events = [e for i in range(3) for e in run_events(i)]
    expected = expected_entities(events)
    assert any(t == "atlas_bridge_column_lineage" for t, _ in expected)  # the facets are mapped
    extra = {"ATLAS_BRIDGE_SERVE_API_KEY": f"old-key,{api_key}"} if api_key else {}
    with FaultServer() as atlas, ServeProcess(fast_env(atlas.url, tmp_path / "out", **extra)) as serve:
        client = ol_client(serve.url, compression=compression, api_key=api_key)
        for event in events:
            client.emit(event)  # raises on any answer but 2xx
        wait_for("the events' entities in Atlas", lambda: _complete(atlas, expected), 30)
        _assert_once(atlas, expected)
        bodies = [r for r in atlas.log if r[0] == "POST" and "/entity/bulk" in r[1]]
        assert bodies
        assert len(bodies) <= len(events)  # batched, never one request per entity
        assert serve.terminate() == 0
    assert "6 event(s) kept" in "".join(serve.stdout)


def test_health_and_readiness_say_whether_atlas_answers(tmp_path: Path) -> None:
    env = fast_env(f"http://127.0.0.1:{_closed_port()}", tmp_path / "out")
    with ServeProcess(env) as serve:
        assert requests.get(serve.url + "/health", timeout=5).json() == {"status": "ok"}
        ol_client(serve.url).emit(run_events(0)[0])
        wait_for(
            "readiness to report Atlas down",
            lambda: requests.get(serve.url + "/ready", timeout=5).json().get("atlas") == "down",
            20,
        )
        ready = requests.get(serve.url + "/ready", timeout=5)
        assert ready.status_code == 200  # still taking events: they are kept
        assert ready.json()["pending_batches"] >= 1
        assert ready.json()["events_kept"] == 1


# -- bad input ------------------------------------------------------------------------------------------


def _post(url: str, body: bytes, **headers: str) -> requests.Response:
    headers.setdefault("Content-Type", "application/json")
    return requests.post(url, data=body, headers=headers, timeout=10)


def test_bad_input_is_a_clear_4xx_never_a_5xx(tmp_path: Path) -> None:
    good = json.loads(_serialise(run_events(0)[0]))
    env = fast_env(f"http://127.0.0.1:{_closed_port()}", tmp_path / "out", ATLAS_BRIDGE_SERVE_API_KEY=KEY)
    auth = {"Authorization": f"Bearer {KEY}"}
    with ServeProcess(env, "--max-body-bytes", "100000") as serve:
        url = serve.lineage_url
        cases: list[tuple[str, requests.Response, int, str]] = []

        def case(name: str, response: requests.Response, status: int, says: str) -> None:
            cases.append((name, response, status, says))

        case("no key", _post(url, json.dumps(good).encode()), 401, "API key is required")
        case(
            "wrong key",
            _post(url, json.dumps(good).encode(), Authorization="Bearer nope"),
            401,
            "not accepted",
        )
        case("basic auth", _post(url, b"{}", Authorization="Basic dTpw"), 401, "Bearer")
        case("invalid JSON", _post(url, b'{"eventType": "START",', **auth), 400, "invalid JSON at line 1")
        case("not UTF-8", _post(url, b'{"a": "\xff"}', **auth), 400, "not UTF-8")
        case("empty", _post(url, b"", **auth), 400, "empty")
        case("array", _post(url, b"[]", **auth), 400, "JSON object")
        case("null", _post(url, b"null", **auth), 400, "JSON object")
        case("deep", _post(url, b"[" * 40_000 + b"]" * 40_000, **auth), 400, "nested too deeply")
        case("nested", _post(url, b'{"a":' * 5000 + b"1" + b"}" * 5000, **auth), 400, "")
        missing = {k: v for k, v in good.items() if k not in ("eventTime", "producer")}
        case(
            "invalid event", _post(url, json.dumps(missing).encode(), **auth), 400, "not a valid OpenLineage"
        )
        wrong = {**good, "run": {"runId": 7}}
        case("wrong type", _post(url, json.dumps(wrong).encode(), **auth), 400, "not a valid OpenLineage")
        big = json.dumps({**good, "pad": "x" * 200_000}).encode()
        case("too large", _post(url, big, **auth), 413, "exceeds max_body of 100000")
        bomb = gzip.compress(json.dumps({**good, "pad": " " * 5_000_000}).encode())
        assert len(bomb) < 100_000
        case("gzip bomb", _post(url, bomb, **auth, **{"Content-Encoding": "gzip"}), 413, "once decompressed")
        case(
            "bad gzip", _post(url, b"\x1f\x8b not gzip", **auth, **{"Content-Encoding": "gzip"}), 400, "gzip"
        )
        cut = gzip.compress(json.dumps(good).encode())[:-20]
        case("cut gzip", _post(url, cut, **auth, **{"Content-Encoding": "gzip"}), 400, "gzip")
        case("brotli", _post(url, b"{}", **auth, **{"Content-Encoding": "br"}), 415, "Content-Encoding")
        case(
            "form",
            _post(url, b"a=b", **auth, **{"Content-Type": "application/x-www-form-urlencoded"}),
            415,
            "JSON",
        )
        case("GET", requests.get(url, timeout=5), 405, "POST")
        case(
            "unknown path",
            requests.post(serve.url + "/api/v1/nope", json=good, timeout=5),
            404,
            "/api/v1/lineage",
        )
        for name, response, status, says in cases:
            assert response.status_code == status, (name, response.status_code, response.text)
            assert says in response.text, (name, response.text)
            assert response.status_code < 500
        for name, response, status, _ in cases:
            if status != 413 or name != "too large":  # waitress answers that one in text
                assert "error" in response.json(), name
        assert KEY not in "".join(serve.stdout + serve.stderr)
        ok = _post(url, json.dumps(good).encode(), **auth)
        assert ok.status_code == 200, ok.text  # still serving after all that
        assert serve.proc.poll() is None


def _serialise(event: Any) -> str:
    from openlineage.client.serde import Serde

    return str(Serde.to_json(event))


# -- nothing lost -------------------------------------------------------------------------------------


def test_atlas_down_for_part_of_a_run_every_event_arrives_once(tmp_path: Path) -> None:
    runs = 12
    events = [e for i in range(runs) for e in run_events(i)]
    expected = expected_entities(events)
    with FaultServer() as atlas, ServeProcess(fast_env(atlas.url, tmp_path / "out")) as serve:
        client = ol_client(serve.url)
        for event in events[: len(events) // 3]:
            client.emit(event)
        wait_for("the first third in Atlas", lambda: len(atlas_entities(atlas.stub)) > 0, 30)
        atlas.add(Fault("reset", times=None, path_contains="/entity"))  # Atlas goes away
        for event in events[len(events) // 3 : 2 * len(events) // 3]:
            client.emit(event)  # acknowledged all the same: kept
        wait_for(
            "readiness to report Atlas down",
            lambda: requests.get(serve.url + "/ready", timeout=5).json().get("atlas") == "down",
            20,
        )
        atlas.clear()  # Atlas is back
        for event in events[2 * len(events) // 3 :]:
            client.emit(event)
        wait_for("every event's entities in Atlas", lambda: _complete(atlas, expected), 40)
        _assert_once(atlas, expected)
        wait_for(
            "an empty spool",
            lambda: requests.get(serve.url + "/ready", timeout=5).json()["pending_batches"] == 0,
            20,
        )
    executions = Counter(
        t for t, _ in atlas_entities(atlas.stub).elements() if t == "atlas_bridge_process_execution"
    )
    assert executions["atlas_bridge_process_execution"] == runs


def test_kill_9_after_acknowledging_loses_nothing(tmp_path: Path) -> None:
    events = [e for i in range(8) for e in run_events(i)]
    expected = expected_entities(events)
    out = tmp_path / "out"
    down = f"http://127.0.0.1:{_closed_port()}"
    with ServeProcess(fast_env(down, out)) as serve:
        client = ol_client(serve.url)
        for event in events:
            client.emit(event)  # each answer means "kept"
        serve.proc.kill()  # -9: no drain, no flush
        serve.proc.wait(10)
    assert (out / "spool" / "manifest.json").is_file()
    with FaultServer() as atlas:
        env = {"ATLAS_BRIDGE_REST_ADDRESS": atlas.url, "ATLAS_BRIDGE_NAMESPACE": "ol"}
        result = CliRunner().invoke(cli, ["push", str(out / "spool"), "--no-progress"], env=env)
        assert result.exit_code == 0, result.output
        _assert_once(atlas, expected)


def test_kill_9_then_a_restart_sends_what_was_kept(tmp_path: Path) -> None:
    events = [e for i in range(5) for e in run_events(i)]
    expected = expected_entities(events)
    out = tmp_path / "out"
    with ServeProcess(fast_env(f"http://127.0.0.1:{_closed_port()}", out)) as serve:
        client = ol_client(serve.url)
        for event in events:
            client.emit(event)
        serve.proc.kill()
        serve.proc.wait(10)
    with FaultServer() as atlas, ServeProcess(fast_env(atlas.url, out)):
        wait_for("what the killed serve kept, in Atlas", lambda: _complete(atlas, expected), 30)
        _assert_once(atlas, expected)


def test_sigterm_finishes_what_is_in_flight_and_keeps_the_rest(tmp_path: Path) -> None:
    """SIGTERM while clients post and Atlas is slow: every acknowledged event is in Atlas after a push,
    the process exits 0 in bounded time and says what waits."""
    events = [e for i in range(20) for e in run_events(i)]
    out = tmp_path / "out"
    acknowledged: list[Any] = []
    with FaultServer(max_hold_s=5.0) as atlas:
        atlas.add(Fault("hold", times=None, path_contains="/entity/bulk"))  # each batch waits on release
        serve = ServeProcess(
            fast_env(atlas.url, out, ATLAS_BRIDGE_READ_TIMEOUT_S="10", ATLAS_BRIDGE_GIVE_UP_AFTER_S="20")
        )
        with serve:
            client = ol_client(serve.url)
            for event in events[:10]:
                client.emit(event)
                acknowledged.append(event)
            wait_for("a batch held in Atlas", lambda: any(r[2] == "hold" for r in atlas.log), 20)
            posting = threading.Event()

            def post_more() -> None:
                posting.set()
                for event in events[10:]:
                    try:
                        client.emit(event)
                    except Exception:  # refused or cut off by the shutdown: not acknowledged
                        return
                    acknowledged.append(event)

            thread = threading.Thread(target=post_more)
            thread.start()
            posting.wait(5)
            serve.proc.send_signal(15)
            atlas.release.set()  # the batch in flight finishes
            assert serve.proc.wait(30) == 0
            thread.join(15)
        assert "stopped:" in "".join(serve.stdout)
        atlas.clear()
        env = {"ATLAS_BRIDGE_REST_ADDRESS": atlas.url, "ATLAS_BRIDGE_NAMESPACE": "ol"}
        if (out / "spool" / "manifest.json").is_file():
            result = CliRunner().invoke(cli, ["push", str(out / "spool"), "--no-progress"], env=env)
            assert result.exit_code == 0, result.output
        _assert_once(atlas, expected_entities(acknowledged))
    assert len(acknowledged) >= 10


def test_no_atlas_configured_keeps_request_bodies_in_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with ServeProcess(fast_env(None, out)) as serve:
        ol_client(serve.url).emit(run_events(0)[1])
        assert requests.get(serve.url + "/ready", timeout=5).json()["delivery"] == "files"
        # the spec's batch endpoint: all kept, or none when one is not OpenLineage
        two = [json.loads(_serialise(e)) for e in run_events(1)]
        batch = requests.post(serve.url + "/api/v1/lineage/batch", json=two, timeout=10)
        assert (batch.status_code, batch.json()) == (200, {"events": 2, "status": "kept"})
        mixed = requests.post(
            serve.url + "/api/v1/lineage/batch", json=[two[0], {"eventTime": 1}], timeout=10
        )
        assert mixed.status_code == 400
        assert all(p.startswith("event 1: ") for p in mixed.json()["problems"]), mixed.text
        assert requests.get(serve.url + "/ready", timeout=5).json()["events_kept"] == 3
        assert serve.terminate() == 0
    assert (out / "manifest.json").is_file()
    assert list(out.glob("0001-entities.json"))
    assert not os.environ.get("ATLAS_BRIDGE_SERVE_API_KEY")


# -- a real producer: dbt through OpenLineage's dbt-ol -------------------------------------------------

DBT_PROJECT = Path(__file__).resolve().parent / "data" / "dbt_project"


def _dbt_ol() -> Path:
    """``dbt-ol`` of the dbt venv (dbt-core pins a pathspec mypy cannot use, so dbt has its own venv:
    ``python3 -m venv .venv-dbt && .venv-dbt/bin/pip install -e '.[dbt]'``), or ATLAS_BRIDGE_TEST_DBT_VENV."""
    venv = Path(
        os.environ.get("ATLAS_BRIDGE_TEST_DBT_VENV") or Path(__file__).resolve().parent.parent / ".venv-dbt"
    )
    path = venv / "bin" / "dbt-ol"
    if not path.is_file():
        pytest.skip(
            f"no dbt-ol in {venv} (python3 -m venv .venv-dbt && .venv-dbt/bin/pip install -e '.[dbt]')"
        )
    return path


def test_a_real_dbt_project_run_through_dbt_ol_lands_in_atlas_with_column_lineage(tmp_path: Path) -> None:
    import shutil
    import subprocess

    dbt_ol = _dbt_ol()
    project = tmp_path / "dbt_project"
    shutil.copytree(DBT_PROJECT, project)
    with (
        FaultServer() as atlas,
        ServeProcess(fast_env(atlas.url, tmp_path / "out", ATLAS_BRIDGE_SERVE_API_KEY=KEY)) as serve,
    ):
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("ATLAS_BRIDGE_", "OPENLINEAGE", "DBT_"))
        }
        env.update(
            {
                "OPENLINEAGE__TRANSPORT__TYPE": "http",
                "OPENLINEAGE__TRANSPORT__URL": serve.url,
                "OPENLINEAGE__TRANSPORT__COMPRESSION": "gzip",
                "OPENLINEAGE__TRANSPORT__AUTH__TYPE": "api_key",
                "OPENLINEAGE__TRANSPORT__AUTH__APIKEY": KEY,
                "OPENLINEAGE_NAMESPACE": "dbt",
                "DBT_DUCKDB_PATH": str(tmp_path / "shop.duckdb"),
                "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
                "DO_NOT_TRACK": "1",
                "PATH": f"{dbt_ol.parent}{os.pathsep}{os.environ.get('PATH', '')}",  # dbt-ol runs `dbt`
            }
        )
        done = subprocess.run(
            [str(dbt_ol), "build", "--project-dir", str(project), "--profiles-dir", str(project)],
            env=env,
            cwd=str(project),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        models = ("stg_orders", "stg_customers", "customer_totals")

        def landed() -> bool:
            names = {qn for t, qn in atlas_entities(atlas.stub) if t == "atlas_bridge_column_lineage"}
            return all(any(m in qn for qn in names) for m in ("customer_totals",))

        wait_for("the dbt models' column lineage in Atlas", landed, 60)
        entities = atlas_entities(atlas.stub)
        assert max(entities.values()) == 1
        tables = {
            qn for t, qn in entities if t in ("atlas_bridge_table", "atlas_bridge_view", "atlas_bridge_path")
        }
        for model in models:
            assert any(model in qn for qn in tables), (model, sorted(tables))
        processes = {qn for t, qn in entities if t == "atlas_bridge_process"}
        assert len([p for p in processes if any(m in p for m in models)]) >= 3, sorted(processes)
        columns = {qn for t, qn in entities if t == "atlas_bridge_column"}
        assert any("customer_totals" in qn and "total_amount" in qn for qn in columns), sorted(columns)
        # total_amount comes from stg_orders.amount, through the model's SQL
        stub_lineage = [
            e for e in atlas.stub.active_entities() if e["typeName"] == "atlas_bridge_column_lineage"
        ]
        texts = [json.dumps(e) for e in stub_lineage]
        assert any(
            all(w in t for w in ("customer_totals", "total_amount", "stg_orders", "amount")) for t in texts
        )
        assert serve.terminate() == 0
    assert KEY not in "".join(serve.stdout + serve.stderr)


def test_an_invalid_event_among_concurrent_ones_is_its_own_400_and_the_rest_are_kept(tmp_path: Path) -> None:
    """Requests are converted in groups: one invalid event must not cost the others of its group."""
    runs = [run_events(i) for i in range(16)]
    good = [json.loads(_serialise(e)) for run in runs for e in run]
    bad = [{**json.loads(_serialise(run[0])), "eventTime": "yesterday"} for run in runs[:8]]
    answers: list[tuple[bool, int, str]] = []
    lock = threading.Lock()
    with FaultServer() as atlas, ServeProcess(fast_env(atlas.url, tmp_path / "out")) as serve:

        def post(events: list[dict[str, Any]], valid: bool) -> None:
            session = requests.Session()
            for event in events:
                r = session.post(serve.lineage_url, json=event, timeout=30)
                with lock:
                    answers.append((valid, r.status_code, r.text))

        threads = [threading.Thread(target=post, args=(good[k::6], True)) for k in range(6)]
        threads += [threading.Thread(target=post, args=(bad[k::2], False)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(answers) == len(good) + len(bad)
        assert all(status == 200 for valid, status, _ in answers if valid)
        refused = [text for valid, status, text in answers if not valid and status == 400]
        assert len(refused) == len(bad)
        assert all("eventTime" in text for text in refused), refused[0]
        expected = expected_entities([e for run in runs for e in run])
        wait_for("every valid event's entities in Atlas", lambda: _complete(atlas, expected), 40)
        _assert_once(atlas, expected)


# -- configuration ------------------------------------------------------------------------------------


def test_serve_options_come_from_flags_then_environment_then_properties(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from atlas_bridge.cli.serve import serve_options
    from atlas_bridge.errors import ConfigError

    props = {
        "atlas.hook.atlas_bridge.serve.port": "7000",
        "atlas.hook.atlas_bridge.serve.threads": "3",
        "atlas.hook.atlas_bridge.serve.maxBodyBytes": "1234",
        "atlas.hook.atlas_bridge.serve.apiKey": "from-file",
        "atlas.hook.atlas_bridge.serve.fsync": "false",
    }
    for name in ("PORT", "THREADS", "MAX_BODY_BYTES", "API_KEY", "FSYNC"):
        monkeypatch.delenv(f"ATLAS_BRIDGE_SERVE_{name}", raising=False)
    options = serve_options(props, {}, None)
    assert (options.port, options.threads, options.max_body_bytes) == (7000, 3, 1234)
    assert options.api_keys == ("from-file",)
    assert options.fsync is False
    monkeypatch.setenv("ATLAS_BRIDGE_SERVE_THREADS", "5")
    monkeypatch.setenv("ATLAS_BRIDGE_SERVE_API_KEY", "a, b")
    options = serve_options(props, {"port": 0}, None)
    assert (options.port, options.threads, options.api_keys) == (0, 5, ("a", "b"))
    keys = tmp_path / "keys"
    keys.write_text("k1\nk2\n", encoding="utf-8")
    assert serve_options(props, {}, keys).api_keys == ("k1", "k2")
    monkeypatch.setenv("ATLAS_BRIDGE_SERVE_THREADS", "many")
    with pytest.raises(ConfigError, match="threads: not a valid int"):
        serve_options(props, {}, None)


def test_serve_refuses_a_taken_port_with_a_usage_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(
            cli,
            ["serve", "--port", str(port), "--out", str(tmp_path / "out")],
            env={"ATLAS_BRIDGE_REST_ADDRESS": ""},
        )
    assert result.exit_code == 2, result.output
    assert "cannot listen on 127.0.0.1" in result.output


def test_connections_beyond_the_limit_wait_and_are_served_once_others_close(tmp_path: Path) -> None:
    env = fast_env(None, tmp_path / "out")
    with ServeProcess(env, "--max-connections", "4", "--threads", "1") as serve:
        host, port = serve.url.removeprefix("http://").split(":")
        idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(4)]
        try:
            with pytest.raises(requests.exceptions.ReadTimeout):
                requests.get(serve.url + "/health", timeout=(2, 1.5))  # queued behind the limit
        finally:
            for s in idle:
                s.close()
        wait_for(
            "the server to take connections again",
            lambda: requests.get(serve.url + "/health", timeout=5).status_code == 200,
            20,
        )
        assert serve.proc.poll() is None


# -- the keeper, in-process: what the mapping cannot convert is kept as it came -----------------------


def test_an_event_the_mapping_cannot_convert_is_kept_as_it_came_and_the_rest_of_its_group_is_written(
    tmp_path: Path,
) -> None:
    from atlas_bridge.openlineage.serve import Conversion, EventKeeper, InvalidEventError

    def convert(events: list[dict[str, Any]]) -> Conversion:
        if any(e.get("boom") for e in events):
            msg = "a mapping bug"
            raise RuntimeError(msg)
        table = {"typeName": "DataSet", "guid": "-1", "attributes": {"qualifiedName": "t", "name": "t"}}
        return Conversion([{"entities": [table], "referredEntities": {}}] if events else [])

    def validate(event: dict[str, Any]) -> list[str]:
        return ["eventTime: missing"] if event.get("bad") else []

    keeper = EventKeeper(convert, validate, tmp_path / "spool", tmp_path / "unconverted", fsync=True)
    try:
        assert keeper.keep([{"boom": True, "n": 1}], 10) == 1
        with pytest.raises(InvalidEventError) as info:
            keeper.keep([{"boom": True, "bad": True}], 10)
        assert info.value.problems == ["eventTime: missing"]
        assert keeper.keep([{"n": 2}], 10) == 0
    finally:
        keeper.close()
    kept = [json.loads(line) for p in (tmp_path / "unconverted").glob("*.jsonl") for line in p.open()]
    assert kept == [{"boom": True, "n": 1}]
    assert [p.name for p in (tmp_path / "spool").glob("*-entities.json")] == ["0001-entities.json"]
    assert keeper.events_kept == 1
    assert keeper.unconverted == 1


# -- Kafka: Atlas's hook topic instead of its REST API ------------------------------------------------


def test_serve_to_kafka_publishes_the_events_entities_to_atlas_hook_topic(
    kafka_broker: Any, tmp_path: Path
) -> None:
    from atlas_bridge.atlas.kafka import batches_from_messages

    events = [e for i in range(2) for e in run_events(i)]
    expected = expected_entities(events)
    before = len(kafka_broker.read())
    env = fast_env(None, tmp_path / "out", ATLAS_BRIDGE_KAFKA_BOOTSTRAP_SERVERS=kafka_broker.servers)
    with ServeProcess(env, "--to", "kafka") as serve:
        assert requests.get(serve.url + "/ready", timeout=5).json()["delivery"] == "kafka"
        client = ol_client(serve.url, compression="gzip")
        for event in events:
            client.emit(event)

        def sent() -> bool:
            ready = requests.get(serve.url + "/ready", timeout=5).json()
            return bool(ready["atlas"] == "up" and ready["pending_batches"] == 0)

        wait_for("the spool published", sent, 30, 0.1)
        values = [v for _, v in kafka_broker.read()[before:]]
        published = {
            (e["typeName"], e["attributes"]["qualifiedName"])
            for b in batches_from_messages(values)
            for e in b["entities"]
        }
        assert expected <= published, sorted(expected - published)[:5]
        assert serve.terminate() == 0


# -- our own lineage, out as OpenLineage and in through serve ------------------------------------------


def test_scan_to_openlineage_through_serve_gives_atlas_what_scan_to_atlas_gives(tmp_path: Path) -> None:
    """examples/warehouse scanned twice: straight into one Atlas, and as OpenLineage events posted to
    serve in front of another. The second holds every entity of the first, plus one process execution
    per process (an OpenLineage event always has a run)."""
    import subprocess
    import sys

    warehouse = str(Path(__file__).resolve().parent.parent / "examples" / "warehouse")
    with FaultServer() as direct, FaultServer() as via:
        scan = [sys.executable, "-m", "atlas_bridge", "scan", warehouse]
        env = fast_env(direct.url, tmp_path / "direct")
        done = subprocess.run(
            [*scan, "--to", "atlas", "--out", str(tmp_path / "direct")],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        with ServeProcess(fast_env(via.url, tmp_path / "serve")) as serve:
            done = subprocess.run(
                [*scan, "--to", f"openlineage:{serve.url}"],
                env=fast_env(None, tmp_path / "events"),
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            assert done.returncode == 0, done.stderr[-2000:]

            def delivered() -> bool:
                ready = requests.get(serve.url + "/ready", timeout=5).json()
                return bool(ready["atlas"] == "up" and ready["pending_batches"] == 0)

            wait_for("serve's spool delivered", delivered, 60)
        straight, through = atlas_entities(direct.stub), atlas_entities(via.stub)
    assert set(straight) <= set(through), sorted(set(straight) - set(through))[:5]
    extra = Counter(t for t, _ in set(through) - set(straight))
    processes = sum(1 for t, _ in straight if t == "atlas_bridge_process")
    assert extra == Counter({"atlas_bridge_process_execution": processes})
    assert max(through.values()) == 1
