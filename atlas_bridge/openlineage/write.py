"""The lineage model -> OpenLineage run events (pure, deterministic: same lineage, same bytes).

One RunEvent per process and run, its job named after the process (the job of an OpenLineage job read in
keeps its own namespace and name; any other process is a job in ``job_namespace`` named by its Atlas
qualifiedName, so the same statement is the same job every run). Inputs and outputs are what the process
reads and writes (end to end: intermediate results collapsed), each with a ``schema`` facet (its columns
and types) and, on outputs, a ``columnLineage`` facet: direct sources as ``DIRECT`` transformations
(``IDENTITY`` for an exact copy, ``AGGREGATION``, else ``TRANSFORMATION``; the expression as its
description), indirect ones as ``INDIRECT`` (``FILTER``, ``JOIN``, ``GROUP_BY``, ``SORT``, ``WINDOW``,
``CONDITIONAL``), and what restricts the rows written as the facet's dataset-level dependencies. The
statement's text is the job's ``sql`` facet.

Datasets are named by OpenLineage's naming spec: a table ``[catalog.]db.table`` in ``table_namespace``
(default ``hive://<Atlas namespace>``), a view with a ``datasetType`` facet saying ``VIEW``; a path by its
location (``hdfs://nn:8020`` + ``/data/x``, ``s3://bucket`` + ``key``, ``file`` + ``/local/path``); a
Kafka topic in ``kafka://<Atlas namespace>``. :mod:`atlas_bridge.openlineage.read` reads them back to the
same model datasets. What OpenLineage has no field for (the statement's operation, position and file, the
run as the hook recorded it, the exact effect or clause of an edge) travels in ``atlasBridge`` facets and
properties, which other consumers ignore.
"""

from __future__ import annotations

import datetime
import hashlib
import re
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from atlas_bridge import naming
from atlas_bridge.atlas.convert import RunInfo
from atlas_bridge.graph import end_to_end
from atlas_bridge.model import (
    PSEUDO_ROWS,
    ClauseType,
    Dataset,
    DatasetKind,
    Effect,
    Lineage,
    Process,
    RelationType,
)
from atlas_bridge.openlineage.read import OUR_FACET, PRODUCER
from atlas_bridge.openlineage.schema import SPEC_VERSION

DEFAULT_JOB_NAMESPACE = "atlas-bridge"
"""The namespace of the jobs our own statements become."""

RUN_EVENT_SCHEMA_URL = f"https://openlineage.io/spec/{SPEC_VERSION}/OpenLineage.json#/$defs/RunEvent"
_FACET_URL = "https://openlineage.io/spec/facets/{version}/{name}.json#/$defs/{name}"
_OUR_FACET_URL = (
    "https://github.com/atlas-bridge/atlas-bridge/blob/main/docs/openlineage.md#atlasbridge-facets"
)

_EVENT_TYPE = {"SUCCESS": "COMPLETE", "FAILED": "FAIL", "ABORTED": "ABORT", "RUNNING": "RUNNING"}
_SUBTYPE = {Effect.EXACT_COPY: "IDENTITY", Effect.AGGREGATION: "AGGREGATION"}
_CLAUSE_SUBTYPE = {
    ClauseType.WHERE: "FILTER",
    ClauseType.HAVING: "FILTER",
    ClauseType.JOIN: "JOIN",
    ClauseType.GROUP_BY: "GROUP_BY",
    ClauseType.ORDER_BY: "SORT",
    ClauseType.WINDOW: "WINDOW",
    ClauseType.CONDITION: "CONDITIONAL",
}
_SCHEME_AUTHORITY = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^/]*)(/.*)?$")


def lineage_to_events(
    lineage: Lineage,
    *,
    namespace: str,
    event_time: str,
    run: RunInfo | None = None,
    runs: Mapping[str, Sequence[RunInfo]] | None = None,
    job_namespace: str = DEFAULT_JOB_NAMESPACE,
    table_namespace: str | None = None,
    producer: str = PRODUCER,
) -> list[dict[str, Any]]:
    """OpenLineage RunEvents for a lineage: one per process and run.

    Args:
        namespace: Atlas's metadata namespace (what the processes' qualifiedNames are made with).
        event_time: the events' time (ISO 8601) when a run gives none (passed in, so the function is pure).
        run: the run of every process (the hook's); ``runs``: each process's own (OpenLineage read in).
            A process with neither makes one COMPLETE event of a run named after the process and the time.
        job_namespace: the namespace of the jobs our statements become.
        table_namespace: the namespace of tables (default ``hive://<namespace>``).
    """
    e2e = end_to_end(lineage)
    by_id = {d.id: d for d in e2e.datasets}
    tables = table_namespace or f"hive://{namespace}"
    events: list[dict[str, Any]] = []
    for proc in e2e.processes:
        written = naming.written_dataset_ids(proc, e2e)
        read = naming.read_dataset_ids(proc, e2e)
        if not written and not read:
            continue
        qn = naming.process_qualified_name(proc, e2e, namespace)
        job = _job(proc, qn, job_namespace, producer)
        inputs = [_dataset(by_id[i], namespace, tables, producer) for i in read]
        outputs = []
        for ds_id in written:
            out = _dataset(by_id[ds_id], namespace, tables, producer)
            facet = _column_lineage(proc, ds_id, e2e, lineage, by_id, namespace, tables, producer)
            if facet is not None:
                out["facets"]["columnLineage"] = facet
            outputs.append(out)
        proc_runs: Sequence[RunInfo | None] = (runs or {}).get(proc.id) or (
            [run] if run is not None else [None]
        )
        for info in proc_runs:
            events.append(_event(info, qn, job, inputs, outputs, event_time, producer))
    return events


def _facet(name: str, version: str, producer: str, **fields: Any) -> dict[str, Any]:
    return {"_producer": producer, "_schemaURL": _FACET_URL.format(version=version, name=name), **fields}


def _job(proc: Process, qn: str, job_namespace: str, producer: str) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    if proc.sql:
        facets["sql"] = _facet("SQLJobFacet", "1-1-0", producer, query=proc.sql)
    if proc.job_name is not None:
        return {"namespace": proc.job_namespace or job_namespace, "name": proc.job_name, "facets": facets}
    ours: dict[str, Any] = {"type": proc.type, "name": proc.name, "queryHash": proc.query_hash}
    if proc.statement_index is not None:
        ours["statementIndex"] = proc.statement_index
    if proc.span is not None:
        ours["span"] = proc.span.model_dump()
    if proc.procedure:
        ours["procedure"] = proc.procedure
    if proc.source_file:
        ours["sourceFile"] = proc.source_file
    facets[OUR_FACET] = {"_producer": producer, "_schemaURL": _OUR_FACET_URL, "process": ours}
    return {"namespace": job_namespace, "name": qn, "facets": facets}


def dataset_name(ds: Dataset, namespace: str, table_namespace: str | None = None) -> tuple[str, str]:
    """An OpenLineage (namespace, name) for a model dataset, by OpenLineage's naming spec.

    >>> from atlas_bridge.model import dataset_id
    >>> dataset_name(Dataset(id="t", kind=DatasetKind.TABLE, name="orders", db="sales"), "primary")
    ('hive://primary', 'sales.orders')
    >>> dataset_name(Dataset(id="p", kind=DatasetKind.PATH, name="x", uri="hdfs://nn:8020/data/x"), "primary")
    ('hdfs://nn:8020', '/data/x')
    >>> dataset_name(Dataset(id="p", kind=DatasetKind.PATH, name="x", uri="s3a://bucket/raw/x"), "primary")
    ('s3a://bucket', 'raw/x')
    >>> dataset_name(Dataset(id="p", kind=DatasetKind.PATH, name="x", uri="/tmp/out"), "primary")
    ('file', '/tmp/out')
    """
    if ds.kind is DatasetKind.STREAM and ds.sub_type == naming.KAFKA_TOPIC:
        return f"kafka://{namespace}", ds.name
    if ds.kind in (DatasetKind.PATH, DatasetKind.STAGE) and (ds.uri or ds.kind is DatasetKind.PATH):
        uri = ds.uri or ds.name
        m = _SCHEME_AUTHORITY.match(uri)
        if m is None:
            return "file", uri
        authority, path = m.group(1), m.group(2) or "/"
        scheme = authority.split(":", 1)[0].lower()
        if scheme in ("hdfs", "viewfs", "maprfs", "file", "ofs", "o3fs"):
            return authority, path
        return authority, path.lstrip("/")
    name = ".".join(p for p in (ds.catalog, ds.db, ds.name) if p)
    return table_namespace or f"hive://{namespace}", name


def _dataset(ds: Dataset, namespace: str, tables: str, producer: str) -> dict[str, Any]:
    ns, name = dataset_name(ds, namespace, tables)
    facets: dict[str, Any] = {}
    columns = [c for c in ds.columns if not c.system and c.name != "*"]
    if columns:
        fields = []
        for c in sorted(columns, key=lambda c: (c.position if c.position is not None else 1 << 30, c.name)):
            field: dict[str, Any] = {"name": c.name}
            if c.data_type:
                field["type"] = c.data_type
            if c.position is not None:
                field["ordinal_position"] = c.position + 1
            fields.append(field)
        facets["schema"] = _facet("SchemaDatasetFacet", "1-2-0", producer, fields=fields)
    if ds.file_format:
        facets["storage"] = _facet(
            "StorageDatasetFacet", "1-0-1", producer, storageLayer="file", fileFormat=ds.file_format
        )
    if ds.kind is DatasetKind.VIEW:
        facets["datasetType"] = _facet("DatasetTypeDatasetFacet", "1-0-0", producer, datasetType="VIEW")
    return {"namespace": ns, "name": name, "facets": facets}


def _column_lineage(
    proc: Process,
    target_id: str,
    lineage: Lineage,
    whole_lineage: Lineage,
    by_id: Mapping[str, Dataset],
    namespace: str,
    tables: str,
    producer: str,
) -> dict[str, Any] | None:
    per_field: dict[str, dict[tuple[str, str, str], list[dict[str, Any]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    whole: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for rel in whole_lineage.relations:  # written, even from no dataset (a literal): empty inputFields
        tgt = rel.target
        mine = rel.process_id == proc.id and tgt.dataset_id == target_id
        if mine and tgt.column not in (PSEUDO_ROWS, "*") and rel.type in (RelationType.FDD, RelationType.FDR):
            per_field[tgt.column]  # the defaultdict makes its entry
    for rel in lineage.relations:
        if rel.process_id != proc.id or rel.target.dataset_id != target_id:
            continue
        if rel.type not in (RelationType.FDD, RelationType.FDR):
            continue
        src = by_id.get(rel.source.dataset_id)
        if src is None or not src.kind.is_permanent:
            continue
        if rel.source.column == PSEUDO_ROWS and rel.target.column == PSEUDO_ROWS:
            continue  # the table-level edge: inputs and outputs say it
        ns, name = dataset_name(src, namespace, tables)
        key = (ns, name, rel.source.column)
        t: dict[str, Any]
        if rel.type is RelationType.FDD and rel.target.column != PSEUDO_ROWS:
            t = {
                "type": "DIRECT",
                "subtype": _SUBTYPE.get(rel.effect, "TRANSFORMATION") if rel.effect else "TRANSFORMATION",
            }
            if rel.effect is not None:
                t[OUR_FACET + "Effect"] = rel.effect.value
        else:
            t = {"type": "INDIRECT"}
            if rel.clause_type is not None:
                if rel.clause_type in _CLAUSE_SUBTYPE:
                    t["subtype"] = _CLAUSE_SUBTYPE[rel.clause_type]
                t[OUR_FACET + "Clause"] = rel.clause_type.value
        t["description"] = rel.transform or ""
        t["masking"] = False
        if rel.target.column == PSEUDO_ROWS:
            whole[key].append(t)
        else:
            per_field[rel.target.column][key].append(t)
    if not per_field and not whole:
        return None

    def input_fields(sources: Mapping[tuple[str, str, str], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        return [
            {
                "namespace": ns,
                "name": name,
                "field": column,
                "transformations": _unique(sources[(ns, name, column)]),
            }
            for ns, name, column in sorted(sources)
        ]

    facet = _facet(
        "ColumnLineageDatasetFacet",
        "1-2-0",
        producer,
        fields={column: {"inputFields": input_fields(per_field[column])} for column in sorted(per_field)},
    )
    if whole:
        facet["dataset"] = input_fields(whole)
    return facet


def _unique(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for item in items:
        seen.setdefault(repr(sorted(item.items())), item)
    return [seen[k] for k in sorted(seen)]


def _iso(ms: int) -> str:
    when = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _run_id(info: RunInfo | None, qn: str, event_time: str) -> str:
    """The run's own id when it is a UUID (a run read from OpenLineage), else a UUID made from it."""
    if info is not None:
        try:
            return str(uuid.UUID(info.run_id))
        except ValueError:
            pass
    key = f"{qn}\n{info.run_id if info is not None else event_time}"
    return str(uuid.UUID(bytes=hashlib.sha256(key.encode("utf-8")).digest()[:16], version=5))


def _event(
    info: RunInfo | None,
    qn: str,
    job: dict[str, Any],
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
    event_time: str,
    producer: str,
) -> dict[str, Any]:
    run_facets: dict[str, Any] = {}
    state = "COMPLETE"
    when = event_time
    if info is not None:
        state = _EVENT_TYPE.get((info.status or "SUCCESS").upper(), "COMPLETE")
        moment = info.end_ms if info.end_ms is not None else info.start_ms
        if moment is not None:
            when = _iso(moment)
        if info.message and state in ("FAIL", "ABORT"):
            run_facets["errorMessage"] = _facet(
                "ErrorMessageRunFacet", "1-0-1", producer, message=info.message, programmingLanguage="python"
            )
        run_facets[OUR_FACET] = {
            "_producer": producer,
            "_schemaURL": _OUR_FACET_URL,
            "run": info.model_dump(exclude_none=True),
        }
    return {
        "eventType": state,
        "eventTime": when,
        "producer": producer,
        "schemaURL": RUN_EVENT_SCHEMA_URL,
        "run": {"runId": _run_id(info, qn, event_time), "facets": run_facets},
        "job": job,
        "inputs": inputs,
        "outputs": outputs,
    }
