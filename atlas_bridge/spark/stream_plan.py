"""Lineage of a Structured Streaming query from its plan (``StreamExecution.logicalPlan().toJSON()``).

Pure: no py4j, no I/O. :mod:`atlas_bridge.spark.streaming` reads the plan and the few facts the JSON leaves
out (each source's and the sink's ``toString``, a Kafka sink's ``topic`` option) once per query run; this
module turns them into the model's lineage by rewriting the streaming plan into the batch shape
:func:`atlas_bridge.spark.plan.extract_spark_plan_lineage` reads (the column lineage is the batch
extractor's, unchanged):

* the root (``WriteToMicroBatchDataSourceV1`` / ``WriteToMicroBatchDataSource``) becomes a file write
  into the sink's table or path (a Kafka topic, a V2 catalog table);
* each source leaf (``StreamingExecutionRelation``, ``StreamingDataSourceV2Relation`` and its
  ``ScanRelation``) becomes a ``LogicalRelation`` read of its table, path or Kafka topic, or an in-memory
  leaf (no dataset) for rate, memory and socket sources.

Sources and sinks are told by their ``toString``, which Spark prints in every progress report too:
``FileStreamSource[<uri>]``, ``FileSink[<uri>]``, ``KafkaV2[Subscribe[a, b]]`` / ``KafkaSourceV1[...]``
(``Assign[t-0, t-1]`` names partitions, ``SubscribePattern[...]`` no topic), ``MemorySink``,
``ForeachBatchSink``, ``ConsoleTable$``. A table read or written by name carries ``catalogTable`` in the
JSON (Spark 3.4+).

``foreachBatch``: the DataFrame a batch function gets is a ``LogicalRDD`` over the micro-batch, so a write
inside it reads "nothing". :func:`compose_foreach_batch` puts the stream's query (sources resolved as
above) in place of that leaf, so the batch's write reads the stream's sources, column by column.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any

from atlas_bridge import naming
from atlas_bridge.model import (
    ColumnRef,
    Dataset,
    DatasetKind,
    ExtractionResult,
    Lineage,
    Problem,
    Process,
    Severity,
    dataset_id,
)
from atlas_bridge.spark.jvm import split_table_name
from atlas_bridge.spark.plan import _Extractor, _parse, extract_spark_plan_lineage

__all__ = [
    "KAFKA_TOPIC",
    "StreamPlan",
    "compose_foreach_batch",
    "extract_stream_lineage",
    "kafka_topics",
    "prepare_stream",
    "source_leaf_paths",
]

KAFKA_TOPIC = naming.KAFKA_TOPIC
"""``Dataset.sub_type`` of a Kafka topic (kind STREAM): Atlas's ``kafka_topic`` type."""

_KAFKA_MARK = "atlas-bridge-kafka-topic:"
"""A path the rewritten plan reads or writes for a Kafka topic; replaced by a topic dataset afterwards."""

_LOGICAL_RELATION = "org.apache.spark.sql.execution.datasources.LogicalRelation"
_LOCAL_RELATION = "org.apache.spark.sql.catalyst.plans.logical.LocalRelation"
_FILE_WRITE = "org.apache.spark.sql.execution.datasources.InsertIntoHadoopFsRelationCommand"
_PROJECT = "org.apache.spark.sql.catalyst.plans.logical.Project"
_ALIAS = "org.apache.spark.sql.catalyst.expressions.Alias"

_SOURCE_LEAVES = {
    "StreamingExecutionRelation": ["source", "toString"],
    "StreamingDataSourceV2Relation": ["stream", "toString"],
    "StreamingDataSourceV2ScanRelation": ["relation", "stream", "toString"],
    "StreamingRelation": ["dataSource", "sourceInfo", "name"],
    "StreamingRelationV2": ["sourceName"],
}
"""Streaming leaf class -> the method path (from the leaf) whose text names its source."""

_NO_DATASET_SINKS = ("MemorySink", "ConsoleTable", "ForeachBatchSink", "ForeachWriterTable", "NoopTable")
_BRACKETED = re.compile(r"^\w+\[(.*)\]$", re.DOTALL)


def _short(cls: str) -> str:
    return cls.rsplit(".", 1)[-1]


def kafka_topics(description: str) -> list[str] | None:
    """Topics a Kafka source's ``toString`` names; None when it names none (a pattern).

    >>> kafka_topics("KafkaV2[Subscribe[orders, refunds]]")
    ['orders', 'refunds']
    >>> kafka_topics("KafkaV2[Assign[orders-0, orders-1, audit-2]]")
    ['audit', 'orders']
    >>> kafka_topics("KafkaSourceV1[SubscribePattern[orders.*]]") is None
    True
    """
    m = re.search(r"(SubscribePattern|Subscribe|Assign)\[(.*?)\]", description)
    if m is None or m.group(1) == "SubscribePattern":
        return None
    names = [p.strip() for p in m.group(2).split(",") if p.strip()]
    if m.group(1) == "Assign":
        names = [n.rsplit("-", 1)[0] if re.search(r"-\d+$", n) else n for n in names]
    return sorted(set(names)) or None


def _source_identity(description: str | None) -> dict[str, Any] | None:
    """What a source leaf reads: ``{"paths": [...]}`` / ``{"kafka": [topics]}``; None for no dataset."""
    if not description:
        return None
    text = description.strip()
    if text.startswith("FileStreamSource"):
        m = _BRACKETED.match(text)
        return {"paths": [m.group(1)]} if m else None
    if text.startswith(("KafkaV2", "KafkaSourceV1", "KafkaSource")):
        topics = kafka_topics(text)
        return {"kafka": topics} if topics else {"kafka_pattern": text}
    return None


@dataclass
class StreamPlan:
    """A streaming query's plan rewritten into batch shape, and what its sink is."""

    query: list[dict[str, Any]]
    """The query under the write root, sources turned into batch leaves (pre-order nodes)."""
    leaves: list[dict[str, Any]] = field(default_factory=list)
    """Leaf facts (``exprIds`` -> ``paths`` / ``table``) for the batch extractor."""
    sink: dict[str, Any] | None = None
    """The write: ``{"path": ...}`` or ``{"table": ...}`` (a path may be a Kafka mark); None: no dataset."""
    sink_kind: str = "none"
    """file, table, kafka, foreach_batch, memory, console or other."""
    output_mode: str = "append"
    problems: list[str] = field(default_factory=list)


def source_leaf_paths(plan: list[dict[str, Any]]) -> list[tuple[int, list[str]]]:
    """(index among the plan's leaves in pre-order, method path) of each streaming source leaf: what the
    reader asks the JVM (``logicalPlan.collectLeaves().apply(i)``) for the source's ``toString``."""
    out: list[tuple[int, list[str]]] = []
    leaf = 0
    for node in plan:
        if int(node.get("num-children", 0) or 0) != 0:
            continue
        path = _SOURCE_LEAVES.get(_short(str(node.get("class", ""))))
        if path is not None:
            out.append((leaf, path))
        leaf += 1
    return out


def _output(node: dict[str, Any]) -> list[Any]:
    """The output attributes of a streaming leaf (a ScanRelation keeps them in its relation)."""
    out = node.get("output")
    if isinstance(out, list) and out:
        return out
    rel = node.get("relation")
    if isinstance(rel, list) and rel and isinstance(rel[0], dict):
        inner = rel[0].get("output")
        if isinstance(inner, list):
            return inner
    return []


def _expr_ids(attrs: list[Any]) -> list[int]:
    ids: list[int] = []
    for attr in attrs:
        node = attr[0] if isinstance(attr, list) and attr else attr
        if isinstance(node, dict):
            xid = (node.get("exprId") or {}).get("id")
            if isinstance(xid, int):
                ids.append(xid)
    return ids


def prepare_stream(plan_json: str | list[dict[str, Any]], facts: dict[str, Any]) -> StreamPlan:
    """The stream's plan in batch shape.

    ``facts``: ``{"sources": {leaf index: toString}, "sink_class": str, "sink": toString,
    "topic": str | None (a Kafka sink's option), "sink_table": str | None (a V2 table's name)}``.
    Raises ValueError on a plan that is not a streaming write.
    """
    items = json.loads(plan_json) if isinstance(plan_json, str) else plan_json
    if not isinstance(items, list) or not items or not isinstance(items[0], dict):
        msg = "a streaming plan is a JSON list of nodes"
        raise ValueError(msg)
    root = items[0]
    root_name = _short(str(root.get("class", "")))
    if root_name not in (
        "WriteToMicroBatchDataSourceV1",
        "WriteToMicroBatchDataSource",
        "WriteToDataSourceV2",
    ):
        msg = f"not a streaming write: {root_name}"
        raise ValueError(msg)
    mode = str((root.get("outputMode") or {}).get("object", "")).rstrip("$").rsplit("$", 1)[-1]
    out = StreamPlan(query=[], output_mode=mode.lower() or "append")
    sources = {int(k): v for k, v in (facts.get("sources") or {}).items()}
    leaf = 0
    for node in items[1:]:
        node = copy.deepcopy(node)
        if int(node.get("num-children", 0) or 0) != 0:
            out.query.append(node)
            continue
        name = _short(str(node.get("class", "")))
        if name not in _SOURCE_LEAVES:
            out.query.append(node)
            leaf += 1
            continue
        attrs = _output(node)
        ident = _source_identity(sources.get(leaf))
        ct = node.get("catalogTable")
        if isinstance(ct, dict) and isinstance(ct.get("identifier"), dict):
            out.query.append(
                {"class": _LOGICAL_RELATION, "num-children": 0, "output": attrs, "catalogTable": ct}
            )
        elif ident is not None and ("paths" in ident or "kafka" in ident):
            paths = ident.get("paths") or [_KAFKA_MARK + t for t in ident["kafka"]]
            out.query.append(
                {"class": _LOGICAL_RELATION, "num-children": 0, "output": attrs, "catalogTable": None}
            )
            out.leaves.append({"exprIds": _expr_ids(attrs), "paths": paths})
        else:
            if ident is not None and "kafka_pattern" in ident:
                out.problems.append(
                    f"a Kafka source subscribes to a pattern, no topic named: {ident['kafka_pattern']}"
                )
            out.query.append({"class": _LOCAL_RELATION, "num-children": 0, "output": attrs})
        leaf += 1
    if not out.query:
        msg = "a streaming write without a query"
        raise ValueError(msg)
    out.sink, out.sink_kind = _sink(root, facts, out.problems)
    return out


def _sink(
    root: dict[str, Any], facts: dict[str, Any], problems: list[str]
) -> tuple[dict[str, Any] | None, str]:
    sink_class = _short(str(facts.get("sink_class") or "")).rstrip("$")
    text = str(facts.get("sink") or "")
    ct = root.get("catalogTable")
    if isinstance(ct, dict) and isinstance(ct.get("identifier"), dict):
        return {"catalogTable": ct}, "table"
    for kind in _NO_DATASET_SINKS:
        if sink_class == kind or text.startswith(kind):
            label = {"MemorySink": "memory", "ConsoleTable": "console", "ForeachBatchSink": "foreach_batch"}
            return None, label.get(kind, "other")
    if sink_class == "FileStreamSink" or text.startswith("FileSink["):
        m = _BRACKETED.match(text)
        if m:
            return {"path": m.group(1)}, "file"
        problems.append(f"a file sink without a path: {text[:200]}")
        return None, "file"
    if "kafka" in sink_class.lower() or "kafka" in str(facts.get("sink_class") or "").lower():
        topic = facts.get("topic")
        if isinstance(topic, str) and topic:
            return {"path": _KAFKA_MARK + topic}, "kafka"
        problems.append("the Kafka sink has no topic option (each row names its topic): no dataset")
        return None, "kafka"
    table = facts.get("sink_table")
    if isinstance(table, str) and table:
        return {"catalogTable": {"identifier": split_table_name(table)}}, "table"
    problems.append(f"a sink that is no dataset atlas-bridge knows: {sink_class or text[:100]}")
    return None, "other"


def _batch_plan(stream: StreamPlan) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    assert stream.sink is not None
    head: dict[str, Any] = {"class": _FILE_WRITE, "num-children": 1, "query": 0, "catalogTable": None}
    write: dict[str, Any] = {"mode": "Append"}
    if "catalogTable" in stream.sink:
        head["catalogTable"] = stream.sink["catalogTable"]
    else:
        write["path"] = stream.sink["path"]
    return [head, *copy.deepcopy(stream.query)], {"write": write, "leaves": list(stream.leaves)}


def _topic_dataset(topic: str) -> Dataset:
    return Dataset(
        id=dataset_id(DatasetKind.STREAM, f"kafka:{topic}"),
        kind=DatasetKind.STREAM,
        name=topic,
        sub_type=KAFKA_TOPIC,
        uri=topic,
    )


def _kafka_topics_in(lineage: Lineage) -> Lineage:
    """Path datasets that stand for Kafka topics become topic datasets (kind STREAM, sub type kafka_topic)."""
    renamed: dict[str, Dataset] = {}
    for ds in lineage.datasets:
        if ds.kind is DatasetKind.PATH and (ds.uri or "").startswith(_KAFKA_MARK):
            topic = (ds.uri or "")[len(_KAFKA_MARK) :]
            renamed[ds.id] = _topic_dataset(topic).model_copy(
                update={"columns": ds.columns, "process_ids": ds.process_ids}
            )
    if not renamed:
        return lineage

    def end(ref: ColumnRef) -> ColumnRef:
        new = renamed.get(ref.dataset_id)
        return ref if new is None else ColumnRef(dataset_id=new.id, column=ref.column, field=ref.field)

    return Lineage(
        datasets=tuple(renamed.get(d.id, d) for d in lineage.datasets),
        processes=lineage.processes,
        relations=tuple(
            r.model_copy(update={"source": end(r.source), "target": end(r.target)}) for r in lineage.relations
        ),
        procedures=lineage.procedures,
    )


def _retag(
    result: ExtractionResult, *, kind: str | None, name: str | None, extra: list[str]
) -> ExtractionResult:
    lineage = _kafka_topics_in(result.lineage)
    if kind is not None or name is not None:
        procs: list[Process] = []
        for p in lineage.processes:
            update: dict[str, Any] = {}
            if kind is not None:
                update["type"] = kind
            if name is not None:
                update["name"] = name
            procs.append(p.model_copy(update=update))
        lineage = Lineage(
            datasets=lineage.datasets,
            processes=tuple(procs),
            relations=lineage.relations,
            procedures=lineage.procedures,
        )
    problems = list(result.problems) + [
        Problem(message=m, severity=Severity.WARNING, kind="unsupported") for m in extra
    ]
    return ExtractionResult(lineage=lineage, problems=tuple(problems))


def extract_stream_lineage(stream: StreamPlan, *, label: str) -> ExtractionResult:
    """The stream's own process: its sources into its sink (empty when the sink is no dataset).

    The process type is ``streaming_<output mode>`` (``streaming_append`` ...), so a stream and a batch job
    between the same datasets stay two processes; ``label`` (the query's name or id) goes into its name.
    """
    if stream.sink is None:
        extra = [*stream.problems]
        if stream.sink_kind not in ("memory", "console", "foreach_batch"):
            extra.append(f"streaming query {label}: its sink is no dataset ({stream.sink_kind})")
        return ExtractionResult(
            problems=tuple(Problem(message=m, severity=Severity.WARNING, kind="unsupported") for m in extra)
        )
    plan, facts = _batch_plan(stream)
    result = extract_spark_plan_lineage(plan, facts)
    target = _target_label(result.lineage)
    return _retag(
        result,
        kind=f"streaming_{stream.output_mode}",
        name=f"Stream {label} into {target}",
        extra=stream.problems,
    )


def _target_label(lineage: Lineage) -> str:
    for p in lineage.processes:
        for ds in lineage.datasets:
            if p.id in ds.process_ids:
                return ds.name if ds.sub_type == KAFKA_TOPIC else ds.qualified_name.removeprefix(_KAFKA_MARK)
    return "?"


def _splice(nodes: list[dict[str, Any]], replace: Any) -> tuple[list[dict[str, Any]], int]:
    """The pre-order list with leaves replaced (``replace(node)`` -> a list of nodes or None), nested plans
    (a CTAS's ``query`` field) too; and how many leaves were replaced."""
    out: list[dict[str, Any]] = []
    count = 0
    for node in nodes:
        node = dict(node)
        for key, value in list(node.items()):
            if (
                isinstance(value, list)
                and value
                and isinstance(value[0], dict)
                and "num-children" in value[0]
                and ".expressions." not in str(value[0].get("class", ""))
            ):
                node[key], n = _splice(value, replace)
                count += n
        if int(node.get("num-children", 0) or 0) == 0:
            new = replace(node)
            if new is not None:
                out.extend(new)
                count += 1
                continue
        out.append(node)
    return out, count


def compose_foreach_batch(
    plan_json: str | list[dict[str, Any]], facts: dict[str, Any], stream: StreamPlan
) -> tuple[list[dict[str, Any]], dict[str, Any], int]:
    """A write made inside ``foreachBatch``, reading the stream's sources instead of the micro-batch.

    Each ``LogicalRDD`` leaf with as many columns as the stream's query outputs is replaced by that query
    (its columns aliased position by position to the leaf's exprIds). Returns the plan, its facts (the
    stream's leaf facts added) and how many leaves were replaced (0: the write does not read the batch).
    """
    items = json.loads(plan_json) if isinstance(plan_json, str) else plan_json
    ex = _Extractor({}, temp_views=True)
    stream_out = ex.output_attrs(_parse(stream.query))
    stream_ids = [(a.f.get("exprId") or {}).get("id") for a in stream_out]

    def replace(node: dict[str, Any]) -> list[dict[str, Any]] | None:
        if _short(str(node.get("class", ""))) != "LogicalRDD":
            return None
        attrs = node.get("output") or []
        ids = _expr_ids(attrs)
        if len(ids) != len(stream_out) or len(ids) != len(attrs):
            return None
        query = copy.deepcopy(stream.query)
        if ids == stream_ids:
            return query
        aliases: list[list[dict[str, Any]]] = []
        for attr, src in zip(attrs, stream_out, strict=True):
            a = attr[0] if isinstance(attr, list) else attr
            ref = {
                "class": "org.apache.spark.sql.catalyst.expressions.AttributeReference",
                "num-children": 0,
                "name": src.f.get("name"),
                "dataType": src.f.get("dataType") or a.get("dataType"),
                "exprId": src.f.get("exprId"),
                "qualifier": [],
            }
            alias = {
                "class": _ALIAS,
                "num-children": 1,
                "child": 0,
                "name": a.get("name"),
                "exprId": a.get("exprId"),
            }
            aliases.append([alias, ref])
        return [{"class": _PROJECT, "num-children": 1, "projectList": aliases, "child": 0}, *query]

    new, count = _splice(items, replace)
    out_facts = dict(facts)
    out_facts["leaves"] = list(facts.get("leaves") or []) + list(stream.leaves)
    return new, out_facts, count


def extract_foreach_batch_lineage(
    plan_json: str | list[dict[str, Any]],
    facts: dict[str, Any],
    stream: StreamPlan,
    *,
    label: str,
    temp_views: bool = False,
) -> ExtractionResult | None:
    """Lineage of a write inside ``foreachBatch`` from the stream's sources; None when the write does not
    read the micro-batch (it is then an ordinary write of its own)."""
    plan, out_facts, count = compose_foreach_batch(plan_json, facts, stream)
    if not count:
        return None
    result = extract_spark_plan_lineage(plan, out_facts, temp_views=temp_views)
    names = {p.id: p.name for p in result.lineage.processes}
    name = next(iter(names.values()), None)
    return _retag(
        result,
        kind=None,
        name=f"foreachBatch of stream {label}: {name}" if name else None,
        extra=stream.problems,
    )
