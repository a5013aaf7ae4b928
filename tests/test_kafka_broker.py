"""Kafka delivery against a real Kafka-protocol broker (tansu, started by the tests; see fixtures_kafka).

What is read back from the broker is decoded as Atlas's consumer decodes it and replayed into the Atlas
stub: it must give what the REST payloads give, and nothing sent twice may change Atlas's state.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from atlas_stub import AtlasStub
from click.testing import CliRunner
from fixtures_kafka import Broker, free_port

from atlas_bridge.atlas.client import AtlasClient
from atlas_bridge.atlas.kafka import KafkaPublisher, batches_from_messages, decode_messages
from atlas_bridge.atlas.sink import KafkaSink, make_sink, read_directory_entities
from atlas_bridge.atlas.typedefs import register_typedefs
from atlas_bridge.cli import cli
from atlas_bridge.config import Settings
from atlas_bridge.errors import KafkaUnavailableError

REPO = Path(__file__).resolve().parent.parent
WAREHOUSE = REPO / "examples" / "warehouse"
GOLDEN = Path(__file__).parent / "golden" / "atlas"
NS = "kafkatest"


def _golden_batches() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name in ("ctas_where", "view_over_ctas", "insert_join_group_by"):
        out += json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))
    return out


def _big_batch() -> dict[str, Any]:
    """Over 20,000 bytes even compressed: split into several messages at that limit."""
    import random

    rng = random.Random(3)
    return {
        "entities": [
            {
                "typeName": "atlas_bridge_table",
                "guid": f"-{i + 1}",
                "attributes": {
                    "qualifiedName": f"big.t{i}@{NS}",
                    "name": f"t{i}",
                    "description": "".join(
                        rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(300)
                    ),
                },
            }
            for i in range(200)
        ],
        "referredEntities": {},
    }


def _settings(servers: str, tmp_path: Path, **kw: Any) -> Settings:
    return Settings(
        **{
            "kafka_bootstrap_servers": servers,
            "namespace": NS,
            "output_dir": tmp_path / "out",
            "kafka_request_timeout_s": 3,
            **kw,
        }
    )


def _values(records: list[tuple[bytes | None, bytes]]) -> list[bytes]:
    return [v for _, v in records]


def test_sink_publishes_one_keyed_notification_per_batch(kafka_broker: Broker, tmp_path: Path) -> None:
    before = len(kafka_broker.read())
    sink = make_sink(_settings(kafka_broker.servers, tmp_path, message_max_length_bytes=20_000))
    assert isinstance(sink, KafkaSink)
    batches = [*_golden_batches(), _big_batch()]
    for batch in batches:
        sink.emit(batch)
    sink.close()
    records = kafka_broker.read()[before:]
    assert len(records) > len(batches)  # the big batch went out in parts
    assert {k for k, _ in records} == {f"atlas-bridge@{NS}".encode()}  # one key: one partition, in order
    envelopes = decode_messages(_values(records))
    assert [e["message"]["entities"] for e in envelopes] == batches
    assert {e["message"]["type"] for e in envelopes} == {"ENTITY_CREATE_V2"}
    assert {e["source"]["source"] for e in envelopes} == {"atlas-bridge"}
    assert sink.report.batches == len(batches)
    assert sink.report.spooled == 0
    assert sink.report.published == sum(len(b["entities"]) + len(b["referredEntities"]) for b in batches)
    assert sink.report.summary().startswith(f"published {sink.report.published} entities to Kafka")


def test_broker_down_batches_are_spooled_then_sent_once_when_it_is_back(
    broker_factory: Any, tmp_path: Path
) -> None:
    port = free_port()
    settings = _settings(f"127.0.0.1:{port}", tmp_path, message_max_length_bytes=20_000)
    sink = KafkaSink.from_settings(settings)
    first, second, third = _golden_batches()[0], _big_batch(), _golden_batches()[1]
    sink.emit(first)  # nobody listens: kept, and the job goes on
    sink.emit(second)  # Kafka failed a moment ago: kept at once, behind the first
    assert (sink.report.spooled, sink.spool_pending()) == (2, 2)
    with pytest.raises(KafkaUnavailableError) as info:
        sink.client.post_entities(first)
    assert info.value.servers == f"127.0.0.1:{port}"
    assert info.value.topic == "ATLAS_HOOK"

    broker = broker_factory(port)  # the broker is back at the same address
    sink.flush_spool()
    assert sink.spool_pending() == 0
    sink.flush_spool()  # nothing left: nothing sent again
    sink._down_until = 0.0  # the retry interval has passed
    sink.emit(third)
    sink.close()
    assert batches_from_messages(_values(broker.read())) == [first, second, third]


def test_push_a_folder_to_kafka_resumes_without_resending(kafka_broker: Broker, tmp_path: Path) -> None:
    from atlas_bridge.atlas.sink import FileSink

    folder = tmp_path / "batches"
    files = FileSink(folder)
    for batch in _golden_batches():
        files.emit(batch)
    env = {"ATLAS_BRIDGE_KAFKA_BOOTSTRAP_SERVERS": kafka_broker.servers, "ATLAS_BRIDGE_NAMESPACE": NS}
    before = len(kafka_broker.read())
    dry = CliRunner().invoke(cli, ["push", str(folder), "--to", "kafka", "--dry-run"], env=env)
    assert dry.exit_code == 0, dry.output
    assert f"would send {len(_golden_batches())} batch(es)" in dry.output
    result = CliRunner().invoke(cli, ["push", str(folder), "--to", "kafka", "--no-progress"], env=env)
    assert result.exit_code == 0, result.output
    assert "published" in result.output
    again = CliRunner().invoke(cli, ["push", str(folder), "--to", "kafka", "--no-progress"], env=env)
    assert again.exit_code == 0, again.output
    assert f"{len(_golden_batches())} already sent" in again.output
    assert batches_from_messages(_values(kafka_broker.read()[before:])) == _golden_batches()


# -- whole runs: scan --to kafka, replayed into Atlas ----------------------------------------------------


def _replay(batches: list[dict[str, Any]], times: int = 1) -> dict[str, tuple[str, str, str]]:
    """What Atlas's hook consumer does with ENTITY_CREATE_V2 (createOrUpdate), into a fresh stub; the
    resulting active entities by guid. Each replay after the first must change nothing."""
    with AtlasStub() as stub:
        client = AtlasClient(stub.base_url, backoff=0)
        register_typedefs(client)
        snapshots = []
        for _ in range(times):
            for batch in batches:
                client.post_entities(batch)
            snapshots.append(
                {
                    e["guid"]: (
                        e["typeName"],
                        e["attributes"]["qualifiedName"],
                        json.dumps(e["attributes"], sort_keys=True),
                    )
                    for e in stub.active_entities()
                }
            )
        assert all(s == snapshots[0] for s in snapshots), "a second delivery changed Atlas's state"
        return snapshots[0]


def _entity_view(state: dict[str, tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    return set(state.values())


@pytest.fixture(scope="module")
def rest_payloads(tmp_path_factory: pytest.TempPathFactory, spark: object) -> Path:
    """The example warehouse scanned to files: the REST request bodies."""
    out = tmp_path_factory.mktemp("rest")
    result = CliRunner().invoke(
        cli,
        ["scan", str(WAREHOUSE), "--to", str(out), "--namespace", NS, "--batch-size", "40", "--no-progress"],
    )
    assert result.exit_code == 0, result.output
    return out


def _file_batches(folder: Path) -> list[dict[str, Any]]:
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    return [json.loads((folder / e["file"]).read_text(encoding="utf-8")) for e in manifest["batches"]]


def _scan_to_kafka(out: Path, servers: str, **env: str) -> Any:
    args = [
        "scan",
        str(WAREHOUSE),
        "--to",
        "kafka",
        "--out",
        str(out),
        "--namespace",
        NS,
        "--batch-size",
        "40",
    ]
    environment = {"ATLAS_BRIDGE_KAFKA_BOOTSTRAP_SERVERS": servers, **env}
    return CliRunner().invoke(cli, [*args, "--no-progress"], env=environment)


@pytest.mark.spark
def test_scan_to_kafka_replays_into_atlas_like_the_rest_payloads(
    kafka_broker: Broker, rest_payloads: Path, tmp_path: Path
) -> None:
    before = len(kafka_broker.read())
    result = _scan_to_kafka(tmp_path, kafka_broker.servers)
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    rest = _file_batches(rest_payloads)
    assert summary["target"] == f"kafka:{kafka_broker.servers}/ATLAS_HOOK"
    assert summary["batches"]["sent"] == len(rest)
    assert summary["entities"]["published_to_kafka"] == summary["entities"]["total"]
    assert "published to Kafka" in result.output

    published = batches_from_messages(_values(kafka_broker.read()[before:]))
    assert published == rest  # the same request bodies, one notification each, in order
    assert len(read_directory_entities(rest_payloads)) == sum(len(b["entities"]) for b in published)
    from_kafka = _replay(published, times=2)  # delivered twice (at least once): same Atlas state
    assert _entity_view(from_kafka) == _entity_view(_replay(rest))

    again = _scan_to_kafka(tmp_path, kafka_broker.servers)  # re-run: resume state, nothing published again
    assert again.exit_code == 0, again.output
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert summary["batches"]["sent"] == 0
    assert summary["batches"]["skipped_already_acknowledged"] == len(rest)


@pytest.mark.spark
def test_scan_with_kafka_down_keeps_batches_for_push_to_kafka(
    broker_factory: Any, rest_payloads: Path, tmp_path: Path
) -> None:
    port = free_port()
    result = _scan_to_kafka(tmp_path, f"127.0.0.1:{port}", ATLAS_BRIDGE_KAFKA_REQUEST_TIMEOUT_S="2")
    assert result.exit_code == 1, result.output
    unsent = tmp_path / "unsent"
    assert _file_batches(unsent) == _file_batches(rest_payloads)
    assert result.output.strip().splitlines()[-1].endswith(f"atlas-bridge push {unsent} --to kafka")
    assert "Kafka did not acknowledge" in result.output

    broker = broker_factory(port)
    env = {"ATLAS_BRIDGE_KAFKA_BOOTSTRAP_SERVERS": broker.servers}
    pushed = CliRunner().invoke(cli, ["push", str(unsent), "--to", "kafka", "--no-progress"], env=env)
    assert pushed.exit_code == 0, pushed.output
    assert batches_from_messages(_values(broker.read())) == _file_batches(rest_payloads)


@pytest.mark.spark
def test_the_spark_hook_publishes_to_kafka(kafka_broker: Broker, spark: Any, tmp_path: Path) -> None:
    from atlas_bridge.spark import install, uninstall

    before = len(kafka_broker.read())
    settings = Settings.load(
        namespace=NS, output_dir=tmp_path / "out", kafka_bootstrap_servers=kafka_broker.servers
    )
    spark.sql("DROP TABLE IF EXISTS kafka_hook_out")
    spark.sql("DROP TABLE IF EXISTS kafka_hook_src")
    spark.sql("CREATE TABLE kafka_hook_src USING parquet AS SELECT id FROM range(3)")
    handle = install(spark, settings=settings, coalesce_s=600)
    try:
        spark.sql(
            "CREATE TABLE kafka_hook_out USING parquet AS SELECT id, id * 2 AS twice FROM kafka_hook_src"
        )
        assert handle.flush(60)
    finally:
        uninstall(spark)
        spark.sql("DROP TABLE IF EXISTS kafka_hook_out")
        spark.sql("DROP TABLE IF EXISTS kafka_hook_src")
    entities = [
        e for b in batches_from_messages(_values(kafka_broker.read()[before:])) for e in b["entities"]
    ]
    names = {e["attributes"]["qualifiedName"] for e in entities}
    assert f"default.kafka_hook_out@{NS}" in names
    assert any(e["typeName"] == "atlas_bridge_process" for e in entities), sorted(
        {e["typeName"] for e in entities}
    )
    assert handle.stats.emit_errors == 0


def test_refused_or_failed_sasl_leaks_no_secret(
    kafka_broker: Broker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from atlas_bridge.errors import AtlasError

    caplog.set_level(logging.DEBUG)
    secret = "Kafka-Canary-9f3a"
    settings = _settings(
        kafka_broker.servers,
        tmp_path,
        kafka_security_protocol="SASL_PLAINTEXT",
        kafka_sasl_mechanism="PLAIN",
        kafka_sasl_username="hook",
        kafka_sasl_password=secret,
    )
    sink = KafkaSink.from_settings(settings)
    with pytest.raises(AtlasError) as info:
        sink.client.post_entities(_golden_batches()[0])
    sink.emit(_golden_batches()[0])
    sink.close()
    assert sink.report.spooled == 1
    files = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())
    for text in (str(info.value), repr(info.value), caplog.text, files, repr(settings)):
        assert secret not in text


def test_a_job_ending_cuts_a_publish_that_waits_for_brokers(tmp_path: Path) -> None:
    """go_offline() (the hook's job end) frees a batch stuck looking for brokers; it and later ones are kept
    on disk."""
    import threading

    from kafka import KafkaProducer

    started = threading.Event()

    def producer(**config: Any) -> Any:
        started.set()
        return KafkaProducer(**config)  # the real client, looking for a broker for up to 30 s

    settings = _settings(f"127.0.0.1:{free_port()}", tmp_path, kafka_request_timeout_s=30)
    sink = KafkaSink(KafkaPublisher.from_settings(settings, producer_factory=producer), tmp_path / "spool")
    batches = _golden_batches()
    worker = threading.Thread(target=sink.emit, args=(batches[0],))
    worker.start()
    assert started.wait(10)
    sink.go_offline()
    worker.join(10)
    assert not worker.is_alive(), "the publish was not cut"
    sink.emit(batches[1])  # offline: kept at once
    closer = threading.Thread(target=sink.close)
    closer.start()
    closer.join(10)
    assert not closer.is_alive(), "close() waited for the cut publish"
    assert sink.report.spooled == 2
    assert [e["file"] for e in json.loads((tmp_path / "spool" / "manifest.json").read_text())["batches"]] == [
        "0001-entities.json",
        "0002-entities.json",
    ]
