"""Sending OpenLineage events: to a real HTTP endpoint on 127.0.0.1 (retries, token, refusals), to files."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from atlas_bridge.cli import cli
from atlas_bridge.config import Settings, fields_from_properties
from atlas_bridge.errors import OpenLineageError
from atlas_bridge.openlineage.files import read_event_text
from atlas_bridge.openlineage.read import read_events
from atlas_bridge.openlineage.schema import validate_event
from atlas_bridge.openlineage.sink import FolderEventSink, HttpEventSink, make_event_sink

DATA = Path(__file__).parent / "data"
EVENT = json.loads((DATA / "openlineage" / "spark_insert_hive.jsonl").read_text().splitlines()[0])


class Endpoint:
    """An OpenLineage endpoint: records what is POSTed, answers the queued statuses first, then 201."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.received: list[tuple[str, dict[str, str], Any]] = []
        self.lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with endpoint.lock:
                    status = endpoint.statuses.pop(0) if endpoint.statuses else 201
                    if status < 300:
                        endpoint.received.append((self.path, dict(self.headers), json.loads(body)))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                if status == 429:
                    self.send_header("Retry-After", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                """Quiet."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def events(self) -> list[Any]:
        return [body for _, _, body in self.received]


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    ep = Endpoint()
    ep.thread.start()
    try:
        yield ep
    finally:
        ep.server.shutdown()
        ep.server.server_close()
        ep.thread.join(5)


def test_posts_to_the_lineage_path_with_the_token_retrying_what_may_pass(endpoint: Endpoint) -> None:
    endpoint.statuses = [503, 429]
    sink = HttpEventSink(endpoint.url, api_key="s3cret", backoff_s=0, retries=3)
    sink.emit(EVENT)
    sink.close()
    ((path, headers, body),) = endpoint.received
    assert path == "/api/v1/lineage"
    assert headers["Authorization"] == "Bearer s3cret"
    assert headers["Content-Type"] == "application/json"
    assert body == EVENT
    assert sink.sent == 1


def test_a_refusal_is_final_and_an_endpoint_down_gives_up_after_the_retries(endpoint: Endpoint) -> None:
    endpoint.statuses = [400]
    sink = HttpEventSink(endpoint.url + "/api/v1/lineage", backoff_s=0, retries=3)
    with pytest.raises(OpenLineageError) as refused:
        sink.emit(EVENT)
    assert (refused.value.status_code, refused.value.attempts) == (400, 1)
    assert endpoint.received == []
    endpoint.statuses = [503] * 3
    with pytest.raises(OpenLineageError) as down:
        HttpEventSink(endpoint.url, backoff_s=0, retries=2).emit(EVENT)
    assert (down.value.status_code, down.value.attempts) == (503, 3)
    port = endpoint.server.server_address[1]
    endpoint.server.shutdown()
    endpoint.server.server_close()
    with pytest.raises(OpenLineageError, match="after 2 attempt") as refused_conn:
        HttpEventSink(f"http://127.0.0.1:{port}", backoff_s=0, retries=1, connect_timeout_s=2).emit(EVENT)
    assert refused_conn.value.status_code is None


def test_folder_sink_writes_one_file_per_event_named_by_content(tmp_path: Path) -> None:
    sink = make_event_sink(str(tmp_path / "events"))
    assert isinstance(sink, FolderEventSink)
    sink.emit(EVENT)
    sink.emit(EVENT)
    (file,) = (tmp_path / "events").iterdir()
    events, problems = read_event_text(file.read_text(), file.name)
    assert problems == []
    assert [e for _, _, e in events] == [EVENT]


def test_scan_to_an_openlineage_endpoint_sends_valid_events_that_read_back(
    endpoint: Endpoint, tmp_path: Path
) -> None:
    script = DATA / "sql" / "hive_etl.sql"
    result = CliRunner().invoke(
        cli, ["scan", str(script), "--to", f"openlineage:{endpoint.url}", "--namespace", "primary"]
    )
    assert result.exit_code == 0, result.output
    events = endpoint.events()
    assert len(events) == 5
    assert "events:     5 sent to" in result.output
    for event in events:
        assert validate_event(event) == []
    read = read_events(events)
    assert read.result.problems == ()
    # the same events in a folder: the same lineage
    out = tmp_path / "ol"
    result = CliRunner().invoke(
        cli, ["scan", str(script), "--to", f"openlineage:{out}", "--namespace", "primary"]
    )
    assert result.exit_code == 0, result.output
    from_files = [e for f in sorted(out.iterdir()) for _, _, e in read_event_text(f.read_text(), f.name)[0]]
    assert read_events(from_files).result.lineage == read.result.lineage


def test_scan_to_openlineage_without_a_target_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ATLAS_BRIDGE_OPENLINEAGE", raising=False)
    result = CliRunner().invoke(cli, ["scan", str(DATA / "sql" / "hive_etl.sql"), "--to", "openlineage"])
    assert result.exit_code == 2
    assert "needs a URL or a folder" in result.output


def test_the_setting_comes_from_env_and_spark_conf(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATLAS_BRIDGE_OPENLINEAGE", "http://marquez:5000")
    monkeypatch.setenv("ATLAS_BRIDGE_OPENLINEAGE_API_KEY", "tok-9f3e")
    settings = Settings.load()
    assert settings.openlineage == "http://marquez:5000"
    assert settings.openlineage_api_key is not None
    assert "tok-9f3e" not in repr(settings)
    assert fields_from_properties({"atlas.hook.atlas_bridge.openlineage": "/var/ol"}) == {
        "openlineage": "/var/ol"
    }
