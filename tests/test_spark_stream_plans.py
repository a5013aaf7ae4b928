"""Streaming plans -> lineage -> Atlas entities, without Spark: Kafka sources and sinks on constructed plans.

Spark's Kafka connector is not in PySpark, so the Kafka streams here are plans built in the shape PySpark 4.3
prints and with the ``toString`` texts of Spark's Kafka classes (``tests/data/spark_streams/README.md``); the
other streaming sources and sinks run for real in ``tests/test_spark_streaming.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import DATA

from atlas_bridge.atlas.convert import TYPE_KAFKA_TOPIC, to_atlas_entities
from atlas_bridge.model import DatasetKind
from atlas_bridge.spark.stream_plan import extract_stream_lineage, kafka_topics, prepare_stream

NS = "test"


def _load(name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    data = json.loads((DATA / "spark_streams" / f"{name}.json").read_text())
    return data["plan"], data["facts"]


def _entities(name: str) -> dict[tuple[str, str], dict[str, Any]]:
    plan, facts = _load(name)
    result = extract_stream_lineage(prepare_stream(plan, facts), label="q1")
    assert not [p for p in result.problems if p.severity.value == "error"]
    ents = to_atlas_entities(result.lineage, namespace=NS)
    return {(e["typeName"], e["attributes"]["qualifiedName"]): e for e in ents}


def test_a_kafka_source_is_atlas_kafka_topic_named_as_the_kafka_bridge_names_it() -> None:
    ents = _entities("kafka_source_to_file_sink")
    topics = {qn: e for (t, qn), e in ents.items() if t == TYPE_KAFKA_TOPIC}
    assert set(topics) == {f"orders@{NS}", f"refunds@{NS}"}  # lower-cased, @namespace
    assert topics[f"orders@{NS}"]["attributes"] == {
        "qualifiedName": f"orders@{NS}",
        "name": "Orders",
        "topic": "Orders",
        "uri": "Orders",
    }
    (proc,) = [e for (t, _qn), e in ents.items() if t == "atlas_bridge_process"]
    assert proc["attributes"]["qualifiedName"] == (
        f"STREAMING_APPEND:orders@{NS},refunds@{NS}->/data/lake/orders_raw@{NS}"
    )
    inputs = proc["relationshipAttributes"]["inputs"]
    assert {(r["typeName"], r["uniqueAttributes"]["qualifiedName"]) for r in inputs} == {
        (TYPE_KAFKA_TOPIC, f"orders@{NS}"),
        (TYPE_KAFKA_TOPIC, f"refunds@{NS}"),
    }
    # Atlas's kafka_topic has no columns: no column entity of a topic, no column lineage from one.
    assert not [qn for (t, qn) in ents if t == "atlas_bridge_column" and qn.startswith(("orders", "refunds"))]
    assert not [qn for (t, qn) in ents if t == "atlas_bridge_column_lineage"]
    assert ("atlas_bridge_column", f"/data/lake/orders_raw#body@{NS}") in ents


def test_a_kafka_sink_writes_its_topic_option() -> None:
    ents = _entities("file_source_to_kafka_sink")
    assert (TYPE_KAFKA_TOPIC, f"customer-events@{NS}") in ents
    (proc,) = [e for (t, _qn), e in ents.items() if t == "atlas_bridge_process"]
    assert proc["attributes"]["qualifiedName"] == (
        f"STREAMING_APPEND:/data/in/customers@{NS}->customer-events@{NS}"
    )
    outputs = proc["relationshipAttributes"]["outputs"]
    assert [(r["typeName"], r["uniqueAttributes"]["qualifiedName"]) for r in outputs] == [
        (TYPE_KAFKA_TOPIC, f"customer-events@{NS}")
    ]


def test_the_model_keeps_the_topic_columns_lineage() -> None:
    plan, facts = _load("kafka_source_to_file_sink")
    lineage = extract_stream_lineage(prepare_stream(plan, facts), label="q1").lineage
    topic = next(d for d in lineage.datasets if d.name == "Orders")
    assert topic.kind is DatasetKind.STREAM
    edges = {(r.source.column, r.target.column) for r in lineage.relations if r.source.dataset_id == topic.id}
    assert ("value", "body") in edges


def test_a_kafka_sink_without_a_topic_option_and_a_pattern_source_say_so() -> None:
    plan, facts = _load("file_source_to_kafka_sink")
    result = extract_stream_lineage(prepare_stream(plan, {**facts, "topic": None}), label="q1")
    assert not result.lineage.processes
    assert any("topic" in p.message for p in result.problems)
    plan, facts = _load("kafka_source_to_file_sink")
    facts = {**facts, "sources": {"0": "KafkaV2[SubscribePattern[orders.*]]"}}
    result = extract_stream_lineage(prepare_stream(plan, facts), label="q1")
    assert any("pattern" in p.message for p in result.problems)
    assert not [d for d in result.lineage.datasets if d.kind is DatasetKind.STREAM]


@pytest.mark.parametrize(
    ("text", "topics"),
    [
        ("KafkaV2[Subscribe[a]]", ["a"]),
        ("KafkaSourceV1[Subscribe[a, b]]", ["a", "b"]),
        ("KafkaV2[Assign[t-1-0, t-1-3]]", ["t-1"]),
        ("KafkaV2[SubscribePattern[a.*]]", None),
    ],
)
def test_kafka_topics_from_the_consumer_strategy(text: str, topics: list[str] | None) -> None:
    assert kafka_topics(text) == topics


def test_a_plan_that_is_no_streaming_write_is_refused() -> None:
    with pytest.raises(ValueError, match="not a streaming write"):
        prepare_stream(
            [{"class": "org.apache.spark.sql.catalyst.plans.logical.Project", "num-children": 0}], {}
        )
