"""The HookNotification envelope as Atlas's Java hooks write it: fields, compression, split, decoding.

Inputs are the reviewed converter goldens (``tests/golden/atlas/*.json``: request bodies); expected
envelopes follow Atlas's ``AbstractNotification.createNotificationMessages`` and its deserializer.
"""

from __future__ import annotations

import base64
import gzip
import json
import random
import string
from pathlib import Path
from typing import Any

import pytest
from golden import assert_golden

from atlas_bridge.atlas import kafka
from atlas_bridge.atlas.kafka import (
    ENVELOPE_RESERVE_BYTES,
    batches_from_messages,
    decode_messages,
    hook_notification,
    notification_messages,
)
from atlas_bridge.atlas.sink import AtlasSink, FileSink, KafkaSink, make_sink
from atlas_bridge.config import Settings
from atlas_bridge.errors import ConfigError, NotificationError

GOLDEN = Path(__file__).parent / "golden" / "atlas"
FIXED: dict[str, Any] = {
    "created_at_ms": 1_700_000_000_000,
    "msg_id": "00000000-0000-0000-0000-000000000000_0",
    "source_ip": "127.0.0.1",
    "created_by": "etl",
}


def _batches(name: str = "view_over_ctas") -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))
    return data


def _big_batch(entities: int, seed: int = 1) -> dict[str, Any]:
    """A batch of ``entities`` tables with random (incompressible) descriptions and some non-ASCII."""
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + "éß中"
    return {
        "entities": [
            {
                "typeName": "atlas_bridge_table",
                "guid": f"-{i + 1}",
                "attributes": {
                    "qualifiedName": f"db.t{i}@primary",
                    "name": f"t{i}",
                    "description": "".join(rng.choice(alphabet) for _ in range(400)),
                },
            }
            for i in range(entities)
        ],
        "referredEntities": {},
    }


def test_a_small_batch_is_one_message_with_atlas_envelope(update_golden: bool) -> None:
    batch = _batches()[0]
    source = {"source": "atlas-bridge", "version": "0.0.0"}
    [value] = notification_messages(hook_notification(batch, user="etl"), source=source, **FIXED)
    envelope = json.loads(value)
    assert list(envelope) == [
        "source",
        "version",
        "msgCompressionKind",
        "msgSplitIdx",
        "msgSplitCount",
        "msgSourceIP",
        "msgCreatedBy",
        "msgCreationTime",
        "spooled",
        "message",
    ]
    assert envelope["version"] == {"version": "1.0.0", "versionParts": [1]}
    assert (envelope["msgCompressionKind"], envelope["msgSplitIdx"], envelope["msgSplitCount"]) == (
        "NONE",
        1,
        1,
    )
    assert envelope["spooled"] is False
    assert "msgId" not in envelope
    assert envelope["message"] == {"type": "ENTITY_CREATE_V2", "user": "etl", "entities": batch}
    assert ": " not in value[:200]
    assert ", " not in value[:200]
    assert_golden(value + "\n", "kafka/view_over_ctas.message.json", update_golden)


def test_same_arguments_same_bytes() -> None:
    batch = _big_batch(300)
    one = notification_messages(hook_notification(batch, user="u"), max_length_bytes=20_000, **FIXED)
    two = notification_messages(hook_notification(batch, user="u"), max_length_bytes=20_000, **FIXED)
    assert one == two
    assert len(one) > 1


def test_a_message_over_the_limit_is_gzipped_like_java_and_decodes_back() -> None:
    batch = {"entities": _batches()[0]["entities"] * 200, "referredEntities": {}}  # repetitive: compresses
    notification = hook_notification(batch, user="etl", kind="ENTITY_FULL_UPDATE_V2")
    plain = notification_messages(notification, **FIXED, max_length_bytes=10**9)[0]
    limit = 100_000
    assert len(plain.encode()) > limit
    [value] = notification_messages(notification, **FIXED, max_length_bytes=limit)
    compressed = json.loads(value)
    assert compressed["msgCompressionKind"] == "GZIP"
    assert compressed["msgId"] == FIXED["msg_id"]
    assert (compressed["msgSplitIdx"], compressed["msgSplitCount"]) == (1, 1)
    assert len(value.encode()) <= limit  # the text fits in max - 512; the envelope in the 512
    raw = base64.b64decode(compressed["message"])
    assert raw[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00"  # GZIPOutputStream's header
    assert gzip.decompress(raw).decode() == plain
    [decoded] = decode_messages([value.encode()])
    assert decoded == json.loads(plain)
    assert batches_from_messages([value]) == [batch]


@pytest.mark.parametrize("compression", [True, False])
def test_a_message_still_too_long_is_split_and_joined_back(compression: bool) -> None:
    batch = _big_batch(400)
    notification = hook_notification(batch, user="etl")
    limit = 30_000
    values = notification_messages(notification, **FIXED, max_length_bytes=limit, compression=compression)
    parts = [json.loads(v) for v in values]
    assert len(parts) > 2
    assert [p["msgSplitIdx"] for p in parts] == list(range(len(parts)))
    assert {p["msgSplitCount"] for p in parts} == {len(parts)}
    assert {p["msgId"] for p in parts} == {FIXED["msg_id"]}
    assert {p["msgCompressionKind"] for p in parts} == {"GZIP" if compression else "NONE"}
    assert all(len(p["message"]) == limit - ENVELOPE_RESERVE_BYTES for p in parts[:-1])
    assert all(len(v.encode()) <= limit for v in values)
    [decoded] = decode_messages(values)
    assert decoded["message"] == notification
    assert decoded["msgCreatedBy"] == "etl"
    assert decoded["msgCreationTime"] == FIXED["created_at_ms"]


def test_decoding_reads_a_stream_of_plain_and_split_messages_in_order() -> None:
    small = _batches()
    big = _big_batch(200)
    values: list[str] = []
    for i, batch in enumerate([small[0], big, *small[1:]]):
        args = {**FIXED, "msg_id": f"m_{i}"}
        values += notification_messages(hook_notification(batch, user="u"), max_length_bytes=20_000, **args)
    assert len(values) > len(small) + 1
    assert batches_from_messages(values) == [small[0], big, *small[1:]]


def test_decoding_refuses_what_atlas_would_drop() -> None:
    values = notification_messages(
        hook_notification(_big_batch(200), user="u"), max_length_bytes=20_000, **FIXED
    )
    with pytest.raises(NotificationError, match="before the first part") as info:
        decode_messages(values[1:])
    assert info.value.msg_id == FIXED["msg_id"]
    with pytest.raises(NotificationError, match="missing at the end"):
        decode_messages(values[:-1])
    with pytest.raises(NotificationError, match="not an Atlas notification"):
        decode_messages(['{"type": "ENTITY_CREATE_V2"}'])
    with pytest.raises(NotificationError, match="not a JSON"):
        decode_messages([b"\xff"])


def test_hook_notification_checks_its_input() -> None:
    assert hook_notification({"entities": []}, user=None)["user"] == "UNKNOWN"  # HookNotification.getUser()
    with pytest.raises(ValueError, match="ENTITY_CREATE_V2"):
        hook_notification({"entities": []}, user="u", kind="ENTITY_DELETE_V2")
    with pytest.raises(TypeError):
        hook_notification({"guid": "x"}, user="u")
    with pytest.raises(ValueError, match="typeName"):
        kafka.delete_notification([{"uniqueAttributes": {"qualifiedName": "q"}}], user="u")


# -- settings: the keys Atlas's Java hooks read -------------------------------------------------------------

PROPERTIES = """\
atlas.rest.address=http://atlas.example.com:21000
atlas.kafka.bootstrap.servers=kafka1.example.com:9093, kafka2.example.com:9093
atlas.notification.hook.topic.name=ATLAS_HOOK_TEST
atlas.kafka.security.protocol=SASL_SSL
atlas.kafka.sasl.mechanism=SCRAM-SHA-512
atlas.kafka.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="atlas_hook" password="{secret}";
atlas.kafka.ssl.truststore.location={ca}
atlas.kafka.ssl.endpoint.identification.algorithm=
atlas.notification.message.max.length.bytes=500000
atlas.notification.message.compression.enabled=false
"""
SECRET = "s3cr3t-kafka-Pw"


def _settings(
    tmp_path: Path, text: str = PROPERTIES, ca: str = "/etc/pki/kafka-ca.pem", **kw: Any
) -> Settings:
    path = tmp_path / "atlas-application.properties"
    path.write_text(text.format(secret=SECRET, ca=ca), encoding="utf-8")
    path.chmod(0o600)
    return Settings.load(path, **kw)


def test_kafka_settings_come_from_atlas_properties(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert settings.kafka_bootstrap_servers == ["kafka1.example.com:9093", "kafka2.example.com:9093"]
    assert settings.kafka_topic == "ATLAS_HOOK_TEST"
    assert (settings.message_max_length_bytes, settings.message_compression) == (500_000, False)
    assert settings.sink_kind == "kafka"  # Kafka configured: the hook publishes, as Atlas's hooks do
    config = kafka.producer_config(settings)
    assert config["security_protocol"] == "SASL_SSL"
    assert config["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (config["sasl_plain_username"], config["sasl_plain_password"]) == ("atlas_hook", SECRET)
    assert config["ssl_cafile"] == "/etc/pki/kafka-ca.pem"
    assert config["ssl_check_hostname"] is False
    assert config["acks"] == "all"
    assert config["max_in_flight_requests_per_connection"] == 1
    assert SECRET not in repr(settings)
    assert SECRET not in str(settings.model_dump())


def test_kafka_defaults_and_refusals(tmp_path: Path) -> None:
    settings = Settings(kafka_bootstrap_servers="127.0.0.1:9092", kafka_security_protocol="plaintextsasl")
    assert settings.kafka_topic == "ATLAS_HOOK"
    assert settings.message_max_length_bytes == 1_000_000
    assert settings.kafka_security_protocol == "SASL_PLAINTEXT"  # the old HDP spelling
    with pytest.raises(ConfigError, match="needs a user and password") as info:
        kafka.producer_config(settings)
    assert "ATLAS_BRIDGE_KAFKA_SASL_USERNAME" in str(info.value)
    with pytest.raises(ConfigError, match="PEM") as jks:
        kafka.producer_config(_settings(tmp_path, ca="/etc/pki/truststore.jks"))
    assert SECRET not in str(jks.value)
    with pytest.raises(ConfigError, match="kafka_security_protocol"):
        Settings.load(kafka_bootstrap_servers="h:1", kafka_security_protocol="TLS")
    assert Settings().sink_kind == "files"
    assert not Settings().kafka_configured


def test_make_sink_picks_kafka_unless_told_rest(tmp_path: Path) -> None:
    settings = Settings(
        kafka_bootstrap_servers="127.0.0.1:9", rest_address="http://a:21000", output_dir=tmp_path
    )
    sink = make_sink(settings)
    assert isinstance(sink, KafkaSink)
    assert sink.client.base_url == "kafka://127.0.0.1:9/ATLAS_HOOK"
    assert sink.spool_dir == tmp_path / "spool"
    rest = make_sink(settings.model_copy(update={"delivery": "rest"}))
    assert isinstance(rest, AtlasSink)
    assert not isinstance(rest, KafkaSink)
    assert isinstance(make_sink(Settings(output_dir=tmp_path)), FileSink)


# -- Atlas's own hook messages (tests/data/kafka, from Atlas's test resources) --------------------------

ATLAS_MESSAGES = Path(__file__).parent / "data" / "kafka"


@pytest.mark.parametrize("name", ["atlas-create-db-ddl", "atlas-delete-db"])
def test_we_write_the_bytes_atlas_hooks_write(name: str) -> None:
    """Atlas's messages, rebuilt from their notification and envelope fields: byte-identical."""
    text = (ATLAS_MESSAGES / f"{name}.json").read_text(encoding="utf-8").strip()
    expected = text.replace('"--ts--"', "1700000000000")
    envelope = json.loads(expected)
    notification = envelope["message"]
    if notification["type"] == "ENTITY_DELETE_V2":
        rebuilt = kafka.delete_notification(notification["entities"], user=notification["user"])
    else:
        rebuilt = hook_notification(notification["entities"], user=notification["user"])
    assert rebuilt == notification
    [ours] = notification_messages(
        rebuilt,
        created_at_ms=envelope["msgCreationTime"],
        msg_id="unused",
        source_ip=envelope["msgSourceIP"],
        created_by=envelope["msgCreatedBy"],
    )
    assert ours == expected


@pytest.mark.parametrize("name", ["atlas-create-db-ddl", "atlas-create-db", "atlas-delete-db"])
def test_we_decode_atlas_hook_messages(name: str) -> None:
    text = (ATLAS_MESSAGES / f"{name}.json").read_text(encoding="utf-8")
    [envelope] = decode_messages([text.encode("utf-8")])
    assert envelope == json.loads(text)
    kind = envelope["message"]["type"]
    assert batches_from_messages([text]) == (
        [envelope["message"]["entities"]] if kind.endswith("CREATE_V2") else []
    )


def test_to_kafka_without_brokers_is_a_usage_error(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from atlas_bridge.cli import cli

    (tmp_path / "a.sql").write_text("CREATE TABLE t AS SELECT 1 AS x;\n", encoding="utf-8")
    scan = CliRunner().invoke(cli, ["scan", str(tmp_path / "a.sql"), "--to", "kafka", "--out", str(tmp_path)])
    assert scan.exit_code == 2
    assert "atlas.kafka.bootstrap.servers" in scan.output
    FileSink(tmp_path / "batches").emit(_batches()[0])
    push = CliRunner().invoke(cli, ["push", str(tmp_path / "batches"), "--to", "kafka"])
    assert push.exit_code == 2
    assert "atlas.kafka.bootstrap.servers" in push.output
