"""Sinks: the file sink writes what the Atlas sink POSTs; push replays it; the spool loses nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from atlas_stub import AtlasStub

from atlas_bridge.atlas.client import AtlasClient
from atlas_bridge.atlas.sink import (
    MANIFEST,
    PUSH_STATE,
    AtlasSink,
    FileSink,
    NoopSink,
    PushReport,
    Sink,
    dumps_batch,
    make_sink,
    push_directory,
)
from atlas_bridge.config import Settings
from atlas_bridge.errors import AtlasNotFoundError, AtlasUnavailableError, ConfigError

MODEL = {
    "entityDefs": [
        {
            "name": "t_table",
            "superTypes": ["DataSet"],
            "serviceType": "t",
            "typeVersion": "1.0",
            "attributeDefs": [],
        },
        {
            "name": "t_process",
            "superTypes": ["Process"],
            "serviceType": "t",
            "typeVersion": "1.0",
            "attributeDefs": [],
        },
    ]
}


def _table(qn: str, guid: str) -> dict[str, Any]:
    return {
        "typeName": "t_table",
        "guid": guid,
        "attributes": {"qualifiedName": qn, "name": qn.split("@")[0]},
    }


def _batches() -> list[dict[str, Any]]:
    """Three batches that stand alone; the second and third refer to tables of the first by qualifiedName."""
    src = {"typeName": "t_table", "uniqueAttributes": {"qualifiedName": "db.src@p"}}
    tgt = {"typeName": "t_table", "uniqueAttributes": {"qualifiedName": "db.tgt@p"}}
    return [
        {"entities": [_table("db.src@p", "-1"), _table("db.tgt@p", "-2")], "referredEntities": {}},
        {
            "entities": [
                {
                    "typeName": "t_process",
                    "guid": "-1",
                    "attributes": {"qualifiedName": "p1@p", "name": "p1"},
                    "relationshipAttributes": {
                        "inputs": [{**src, "relationshipType": "dataset_process_inputs"}],
                        "outputs": [{**tgt, "relationshipType": "process_dataset_outputs"}],
                    },
                }
            ],
            "referredEntities": {},
        },
        {"entities": [_table("db.other@p", "-1")], "referredEntities": {}},
    ]


@pytest.fixture
def stub(atlas_stub: AtlasStub) -> AtlasStub:
    atlas_stub.load_typedefs(MODEL)
    return atlas_stub


@pytest.fixture
def client(stub: AtlasStub) -> AtlasClient:
    return AtlasClient(stub.base_url, backoff=0, retries=1)


def _posted(stub: AtlasStub) -> list[Any]:
    return [r.body for r in stub.requests_to("POST", "/entity/bulk") if r.status == 200]


def test_sinks_follow_the_protocol(tmp_path: Path, client: AtlasClient) -> None:
    for sink in (NoopSink(), FileSink(tmp_path), AtlasSink(client)):
        assert isinstance(sink, Sink)


def test_file_sink_writes_exactly_what_atlas_sink_posts(
    tmp_path: Path, stub: AtlasStub, client: AtlasClient
) -> None:
    file_sink = FileSink(tmp_path / "out")
    atlas_sink = AtlasSink(client, spool_dir=tmp_path / "spool")
    for batch in _batches():
        file_sink.emit(batch)
        atlas_sink.emit(batch)
    file_sink.close()
    atlas_sink.close()
    files = sorted((tmp_path / "out").glob("*-entities.json"))
    assert [f.name for f in files] == ["0001-entities.json", "0002-entities.json", "0003-entities.json"]
    written = [json.loads(f.read_text(encoding="utf-8")) for f in files]
    assert written == _posted(stub)
    # the on-disk form: sorted keys, indent 2, trailing newline
    for f, batch in zip(files, _batches(), strict=True):
        assert f.read_text(encoding="utf-8") == json.dumps(batch, sort_keys=True, indent=2) + "\n"
    manifest = json.loads((tmp_path / "out" / MANIFEST).read_text(encoding="utf-8"))
    assert [b["file"] for b in manifest["batches"]] == [f.name for f in files]
    assert [b["entities"] for b in manifest["batches"]] == [2, 1, 1]
    assert atlas_sink.report.created == 4
    assert atlas_sink.report.batches == 3


def test_file_sink_is_deterministic_and_appends(tmp_path: Path) -> None:
    for name in ("a", "b"):
        sink = FileSink(tmp_path / name)
        for batch in _batches():
            sink.emit(batch)
    for f in sorted((tmp_path / "a").iterdir()):
        assert f.read_bytes() == (tmp_path / "b" / f.name).read_bytes()
    again = FileSink(tmp_path / "a")
    assert again.pending == 3
    again.emit(_batches()[0])
    assert again.files == [tmp_path / "a" / "0004-entities.json"]


def test_file_sink_never_writes_settings(tmp_path: Path) -> None:
    settings = Settings(output_dir=tmp_path / "out", username="bob", password="pw-never-on-disk")
    sink = make_sink(settings)
    assert isinstance(sink, FileSink)
    sink.emit(_batches()[0])
    for f in (tmp_path / "out").iterdir():
        text = f.read_text(encoding="utf-8")
        assert "pw-never-on-disk" not in text
        assert "bob" not in text


def test_file_sink_rejects_non_batches(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        FileSink(tmp_path).emit({"entity": {}})


def test_push_directory_replays_in_order_and_does_not_resend(
    tmp_path: Path, stub: AtlasStub, client: AtlasClient
) -> None:
    sink = FileSink(tmp_path)
    for batch in _batches():
        sink.emit(batch)
    seen: list[tuple[int, int]] = []
    report = push_directory(tmp_path, client, progress=lambda i, n: seen.append((i, n)))
    # the two tables of the first batches gain the process's edges later: Atlas counts them updated
    assert (report.batches, report.created, report.updated, report.unchanged, report.failed) == (
        3,
        4,
        2,
        0,
        0,
    )
    assert _posted(stub) == _batches()
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert (
        stub.related(stub.find("t_process", "p1@p")["guid"], "outputs")[0]["attributes"]["name"] == "db.tgt"
    )  # type: ignore[index]
    again = push_directory(tmp_path, client)
    assert (again.batches, again.skipped) == (0, 3)
    assert len(_posted(stub)) == 3


def test_push_resumes_after_a_crash_without_duplicates(
    tmp_path: Path, stub: AtlasStub, client: AtlasClient
) -> None:
    sink = FileSink(tmp_path)
    for batch in _batches():
        sink.emit(batch)
    orig = client.post_entities

    def flaky(body: dict[str, Any]) -> dict[str, Any]:
        # batch 1 goes through, then Atlas dies
        result = orig(body)
        stub.refuse_connections(path_contains="/entity/bulk")
        return result

    client.post_entities = flaky  # type: ignore[method-assign]
    with pytest.raises(AtlasUnavailableError):
        push_directory(tmp_path, client)
    state = json.loads((tmp_path / PUSH_STATE).read_text(encoding="utf-8"))
    assert list(state[client.base_url]) == ["0001-entities.json"]
    stub.clear_faults()
    client.post_entities = orig  # type: ignore[method-assign]
    report = push_directory(tmp_path, client)
    assert (report.skipped, report.batches, report.created) == (1, 2, 2)
    assert _posted(stub) == _batches()  # each batch acknowledged exactly once
    # a crash after Atlas acknowledged but before the state was written: resending is harmless (upsert)
    (tmp_path / PUSH_STATE).unlink()
    resent = push_directory(tmp_path, client)
    assert (resent.created, resent.updated, resent.unchanged) == (0, 0, 4)
    assert len(stub.active_entities()) == 4


def test_push_state_is_per_atlas_address(tmp_path: Path, stub: AtlasStub, client: AtlasClient) -> None:
    FileSink(tmp_path).emit(_batches()[0])
    push_directory(tmp_path, client)
    with AtlasStub("http://other-atlas.test:21000", mock=stub.mock) as other:
        other.load_typedefs(MODEL)
        report = push_directory(tmp_path, AtlasClient(other.base_url, backoff=0))
        assert report.batches == 1
        assert other.find("t_table", "db.src@p") is not None


def test_push_reports_refused_batches_and_goes_on(
    tmp_path: Path, stub: AtlasStub, client: AtlasClient
) -> None:
    sink = FileSink(tmp_path)
    sink.emit({"entities": [{"typeName": "nope", "attributes": {"qualifiedName": "x", "name": "x"}}]})
    sink.emit(_batches()[0])
    report = push_directory(tmp_path, client)
    assert report.failed == 1
    assert "0001-entities.json" in report.failures[0]
    assert "ATLAS-400-00-014" in report.failures[0]
    assert report.created == 2
    assert "failed 1" in report.summary()


def test_push_directory_errors(tmp_path: Path, client: AtlasClient) -> None:
    with pytest.raises(ConfigError):
        push_directory(tmp_path / "missing", client)
    with pytest.raises(ConfigError, match="no batches"):
        push_directory(tmp_path, client)


def test_push_directory_without_manifest_takes_numbered_files(
    tmp_path: Path, stub: AtlasStub, client: AtlasClient
) -> None:
    batches = _batches()
    for i, batch in enumerate(batches, 1):
        (tmp_path / f"{i:04d}-entities.json").write_text(dumps_batch(batch), encoding="utf-8")
    assert push_directory(tmp_path, client).batches == 3
    assert _posted(stub) == batches


def test_atlas_sink_spools_when_unreachable_and_flushes_later(
    tmp_path: Path, stub: AtlasStub, client: AtlasClient
) -> None:
    spool = tmp_path / "spool"
    sink = AtlasSink(client, spool_dir=spool, retry_interval_s=0)  # try Atlas again at every batch
    batches = _batches()
    stub.refuse_connections()
    sink.emit(batches[0])
    sink.emit(batches[1])
    assert sink.spool_pending() == 2
    assert sink.report.spooled == 2
    assert [
        json.loads(p.read_text(encoding="utf-8")) for p in sorted(spool.glob("*-entities.json"))
    ] == batches[:2]
    stub.clear_faults()
    # the next emit sends the spool first, so order is kept (batch 2 refers to batch 1's tables)
    sink.emit(batches[2])
    assert _posted(stub) == batches
    assert sink.spool_pending() == 0
    assert not list(spool.glob("*.json"))
    assert sink.report.created == 4
    sink.emit(batches[0])
    assert len(_posted(stub)) == 4


def test_atlas_sink_flush_spool_and_close(tmp_path: Path, stub: AtlasStub, client: AtlasClient) -> None:
    sink = AtlasSink(client, spool_dir=tmp_path / "spool")
    stub.fail_next(503, times=None)
    sink.emit(_batches()[0])
    with pytest.raises(AtlasUnavailableError):
        sink.flush_spool()
    sink.close()  # still down: stays on disk, no exception
    assert sink.spool_pending() == 1
    stub.clear_faults()
    report = sink.flush_spool()
    assert report.created == 2
    assert sink.spool_pending() == 0
    assert sink.flush_spool().batches == 0


def test_atlas_sink_keeps_a_refused_payload_with_atlas_answer(
    tmp_path: Path, stub: AtlasStub, client: AtlasClient
) -> None:
    """Issue 29 item 5: the hook re-raised a refused batch and lost it (and its job's later batches)."""
    sink = AtlasSink(client, spool_dir=tmp_path / "spool")
    sink.emit(_batches()[1])  # refers to tables Atlas does not hold: 404 ATLAS-404-00-00A; not raised
    sink.emit(_batches()[2])  # the next batch still goes out
    assert sink.report.created == 1
    assert sink.spool_pending() == 0
    rejected = tmp_path / "spool" / "rejected"
    assert [json.loads(p.read_text()) for p in sorted(rejected.glob("*-entities.json"))] == [_batches()[1]]
    answer = json.loads((rejected / "0001-entities.error.json").read_text())
    assert answer["error_code"] == "ATLAS-404-00-00A"
    assert answer["status_code"] == 404
    assert sink.report.failed == 1
    # rejected/ is a folder `push` sends: once what the batch refers to is in Atlas, it goes through
    FileSink(tmp_path / "first").emit(_batches()[0])
    push_directory(tmp_path / "first", client)
    report = push_directory(rejected, client)
    assert (report.batches, report.failed) == (1, 0)
    assert not (rejected / "0001-entities.error.json").exists()  # the answer goes once it is delivered


def test_atlas_sink_without_spool_raises_on_refused_payload(stub: AtlasStub, client: AtlasClient) -> None:
    with pytest.raises(AtlasNotFoundError):
        AtlasSink(client).emit(_batches()[1])


def test_spooled_batch_atlas_refuses_is_set_aside(
    tmp_path: Path, stub: AtlasStub, client: AtlasClient
) -> None:
    sink = AtlasSink(client, spool_dir=tmp_path / "spool")
    stub.refuse_connections()
    sink.emit(_batches()[1])  # will be refused once Atlas is back (its tables never arrived)
    sink.emit(_batches()[2])
    stub.clear_faults()
    report = sink.flush_spool()
    assert report.failed == 1
    assert report.created == 1
    rejected = tmp_path / "spool" / "rejected"
    assert [json.loads(p.read_text()) for p in rejected.glob("*-entities.json")] == [_batches()[1]]
    assert "ATLAS-404-00-00A" in (rejected / "0001-entities.error.json").read_text()
    assert sink.spool_pending() == 0


def test_atlas_sink_without_spool_raises(stub: AtlasStub, client: AtlasClient) -> None:
    stub.refuse_connections()
    with pytest.raises(AtlasUnavailableError):
        AtlasSink(client).emit(_batches()[0])


def test_make_sink(tmp_path: Path, stub: AtlasStub) -> None:
    assert isinstance(make_sink(Settings(disabled=True, rest_address=[stub.base_url])), NoopSink)
    file_sink = make_sink(Settings(output_dir=tmp_path / "out"))
    assert isinstance(file_sink, FileSink)
    assert file_sink.directory == tmp_path / "out"
    atlas_sink = make_sink(Settings(rest_address=[stub.base_url], output_dir=tmp_path / "out"))
    assert isinstance(atlas_sink, AtlasSink)
    assert atlas_sink.spool_dir == tmp_path / "out" / "spool"
    assert atlas_sink.client.base_url == stub.base_url
    custom = make_sink(Settings(rest_address=[stub.base_url], spool_dir=tmp_path / "s"))
    assert isinstance(custom, AtlasSink)
    assert custom.spool_dir == tmp_path / "s"


def test_noop_sink_counts() -> None:
    sink = NoopSink()
    sink.emit(_batches()[0])
    sink.close()
    assert sink.batches == 1


def test_push_report_counts() -> None:
    report = PushReport()
    batch = {"entities": [{}, {}, {}], "referredEntities": {"-9": {}}}
    report.add_response(
        batch,
        {"mutatedEntities": {"CREATE": [{}], "UPDATE": [{}], "DELETE": [{}]}, "guidAssignments": {"-1": "g"}},
    )
    assert (report.created, report.updated, report.unchanged, report.deleted) == (1, 1, 2, 1)
    assert report.guid_assignments == {"-1": "g"}
    other = PushReport(batches=1, created=2, failures=["x"])
    report.merge(other)
    assert (report.batches, report.created, report.failed) == (2, 3, 1)
