"""Atlas qualifiedNames: the one place they are spelled.

The rules follow the Atlas Hive hook, so our entities line up with what Hive users already see:

* tables and views: ``lower(<db>.<table>)@<namespace>``; a table with no db is in ``default``; a non-default
  catalog is kept in front (``lower(<catalog>.<db>.<table>)@<namespace>``). The namespace (Atlas's
  ``atlas.metadata.namespace``, the hook's "cluster") is not lower-cased, as in the hook.
* columns: ``lower(<db>.<table>.<column>)@<namespace>``, i.e. ``.<column>`` inserted before the ``@``.
* Kafka topics: ``lower(<topic>)@<namespace>``, as Atlas's Kafka bridge names its ``kafka_topic``.
* paths: their URI, case kept (object keys are case-sensitive). Cluster-local locations (``hdfs://``,
  ``file:``, ``viewfs://``, scheme-less paths) get ``@<namespace>`` like the hook's ``hdfs_path``;
  object-store URIs (``s3://``, ``gs://``, ``abfs://`` ...) are global and stay bare. A path's columns are
  ``<uri>#<column>`` (a URI fragment: dots are common in file names), before any ``@<namespace>``.
* processes, as the Hive hook names them and never from the statement's text, so an edited statement
  updates its own process in place: a statement that defines what it writes (CREATE VIEW, CTAS, CREATE
  EXTERNAL TABLE ... LOCATION: a process type ``create_*`` / ``replace_*``) is named after its output,
  ``<sorted output qualifiedNames, comma-joined>:CREATE`` (the hook appends the table's create time, which
  a script does not have; a fixed suffix keeps it apart from the table's own name in a search); any other
  is ``<OPERATION>:<sorted inputs>-><sorted outputs>``. Only a process that writes no permanent dataset
  falls back to ``<first 16 hex of the query hash>@<namespace>``. No run time either: re-running a
  statement updates one entity (Atlas's de-duplication key); each run is a
  process execution ``<process qn>:<run id>``. A process that is a scheduler's job (an OpenLineage job)
  is named after the job instead: ``<job namespace>:<job name>@<namespace>``.
* column lineage: ``<process qn>:<target column, without @namespace>:<direct|indirect>``: one entity per
  target column and dependency kind, so direct and indirect sources are told apart.
"""

from __future__ import annotations

import logging
import re

from atlas_bridge.graph import end_to_end
from atlas_bridge.model import Dataset, DatasetKind, Lineage, Process

logger = logging.getLogger(__name__)

DEFAULT_DB = "default"
"""The db a table with no db is put in (the Hive hook's and Spark's default database)."""

_CLUSTER_LOCAL_SCHEMES = frozenset({"hdfs", "file", "viewfs", "har", "ofs", "o3fs", "maprfs"})
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")

DEPENDENCY_DIRECT = "DIRECT"
DEPENDENCY_INDIRECT = "INDIRECT"


def table_qualified_name(db: str | None, name: str, namespace: str, catalog: str | None = None) -> str:
    """``lower(db.table)@namespace``, as the Hive hook writes it.

    >>> table_qualified_name("Sales", "Orders", "primary")
    'sales.orders@primary'
    >>> table_qualified_name(None, "t", "Prod-EU")
    'default.t@Prod-EU'
    >>> table_qualified_name("sales", "orders", "primary", catalog="hive")
    'hive.sales.orders@primary'
    """
    parts = [p for p in (catalog, db or DEFAULT_DB, name) if p]
    return f"{'.'.join(parts).lower()}@{namespace}"


def column_qualified_name(table_qn: str, column: str) -> str:
    """A table column: ``.<column>`` (lower-cased) inserted before the table's ``@namespace``.

    >>> column_qualified_name("sales.orders@primary", "Amount")
    'sales.orders.amount@primary'
    """
    base, at, ns = table_qn.rpartition("@")
    if not at:
        return f"{table_qn}.{column.lower()}"
    return f"{base}.{column.lower()}@{ns}"


def _is_cluster_local(uri: str) -> bool:
    m = _SCHEME.match(uri)
    if m is None or len(m.group(1)) == 1:  # no scheme, or a Windows drive letter
        return True
    return m.group(1).lower() in _CLUSTER_LOCAL_SCHEMES


def path_qualified_name(uri: str, namespace: str) -> str:
    """A path's URI; cluster-local locations carry ``@namespace``.

    >>> path_qualified_name("hdfs://nn:8020/data/Events", "primary")
    'hdfs://nn:8020/data/Events@primary'
    >>> path_qualified_name("/tmp/out", "primary")
    '/tmp/out@primary'
    >>> path_qualified_name("s3a://bucket/Raw/events/", "primary")
    's3a://bucket/Raw/events/'
    """
    uri = uri.strip()
    return f"{uri}@{namespace}" if _is_cluster_local(uri) else uri


def path_column_qualified_name(path_qn: str, column: str, namespace: str) -> str:
    """A column of a path: ``<uri>#<column>``, before the ``@namespace`` when the path has one.

    >>> path_column_qualified_name("s3://b/events", "User_Id", "primary")
    's3://b/events#user_id'
    >>> path_column_qualified_name("hdfs://nn/data@primary", "id", "primary")
    'hdfs://nn/data#id@primary'
    """
    suffix = f"@{namespace}"
    if path_qn.endswith(suffix):
        return f"{path_qn[: -len(suffix)]}#{column.lower()}{suffix}"
    return f"{path_qn}#{column.lower()}"


KAFKA_TOPIC = "kafka_topic"
"""``Dataset.sub_type`` of a Kafka topic (kind STREAM)."""


def kafka_topic_qualified_name(topic: str, namespace: str) -> str:
    """``lower(topic)@namespace``, as Atlas's Kafka bridge names a ``kafka_topic``.

    >>> kafka_topic_qualified_name("Orders", "primary")
    'orders@primary'
    """
    return f"{topic.lower()}@{namespace}"


def dataset_qualified_name(ds: Dataset, namespace: str) -> str:
    """The qualifiedName of any dataset of the model.

    Tables, views and streams are named like Hive tables; paths and stages by their location (a stage with
    no uri is named like a table). Statement-local objects (resultsets, variables) are named after their
    model id, which carries the process that scopes them.

    >>> from atlas_bridge.model import dataset_id
    >>> ds = Dataset(id=dataset_id(DatasetKind.TABLE, "orders", "sales"), kind=DatasetKind.TABLE,
    ...              name="orders", db="sales")
    >>> dataset_qualified_name(ds, "primary")
    'sales.orders@primary'
    """
    if ds.kind in (DatasetKind.PATH, DatasetKind.STAGE) and (ds.uri or ds.kind is DatasetKind.PATH):
        return path_qualified_name(ds.uri or ds.name, namespace)
    if ds.kind is DatasetKind.STREAM and ds.sub_type == KAFKA_TOPIC:
        return kafka_topic_qualified_name(ds.name, namespace)
    if ds.kind in (DatasetKind.TABLE, DatasetKind.VIEW, DatasetKind.STREAM, DatasetKind.STAGE):
        return table_qualified_name(ds.db, ds.name, namespace, ds.catalog)
    local = ds.id.split(":", 1)[-1]
    return f"{local}@{namespace}"


def dataset_column_qualified_name(ds: Dataset, column: str, namespace: str) -> str:
    """The qualifiedName of a column of any dataset (paths use ``#``, the rest the Hive rule)."""
    ds_qn = dataset_qualified_name(ds, namespace)
    if ds.kind in (DatasetKind.PATH, DatasetKind.STAGE) and (ds.uri or ds.kind is DatasetKind.PATH):
        return path_column_qualified_name(ds_qn, column, namespace)
    return column_qualified_name(ds_qn, column)


def written_dataset_ids(process: Process, lineage: Lineage) -> tuple[str, ...]:
    """Ids of the permanent datasets a process writes (relation targets and ``process_ids``), sorted."""
    by_id = {d.id: d for d in lineage.datasets}
    ids = {r.target.dataset_id for r in lineage.relations if r.process_id == process.id}
    ids.update(d.id for d in lineage.datasets if process.id in d.process_ids)
    return tuple(sorted(i for i in ids if i in by_id and by_id[i].kind.is_permanent))


def is_defining_operation(operation: str) -> bool:
    """Whether a process type defines the dataset it writes (its whole schema): CTAS, views, DDL.

    >>> is_defining_operation("create_view"), is_defining_operation("insert")
    (True, False)
    """
    op = operation.lower()
    return op.startswith(("create_", "replace_")) or op in ("create", "alter_view")


def process_qualified_name_from(
    operation: str,
    inputs: list[str] | tuple[str, ...],
    outputs: list[str] | tuple[str, ...],
    query_hash: str,
    namespace: str,
) -> str:
    """A process qn from its operation and the qualifiedNames it reads and writes (the dedup key).

    >>> process_qualified_name_from("create_view", ["s.a@p"], ["s.v@p"], "3f2a9c0d1e2b3c4d5e6f", "p")
    's.v@p:CREATE'
    >>> process_qualified_name_from("insert", ["s.b@p", "s.a@p"], ["s.t@p"], "3f2a9c0d1e2b3c4d5e6f", "p")
    'INSERT:s.a@p,s.b@p->s.t@p'
    >>> process_qualified_name_from("select", ["s.a@p"], [], "3f2a9c0d1e2b3c4d5e6f", "p")
    '3f2a9c0d1e2b3c4d@p'
    """
    outs = ",".join(sorted(set(outputs)))
    if not outs:
        return f"{query_hash[:16].lower()}@{namespace}"
    if is_defining_operation(operation):
        return f"{outs}:CREATE"
    ins = ",".join(sorted(set(inputs) - set(outputs)))
    return f"{operation.upper()}:{ins}->{outs}"


def job_process_qualified_name(job_namespace: str, job_name: str, namespace: str) -> str:
    """A process that is a scheduler's job (an OpenLineage job): ``<job namespace>:<job name>@<namespace>``.

    A job is known by its namespace and name (OpenLineage's identity of a job), whatever it reads and
    writes from run to run, so its process keeps one qualifiedName as its inputs change; case is kept.

    >>> job_process_qualified_name("airflow-prod", "etl_orders.load_orders", "primary")
    'airflow-prod:etl_orders.load_orders@primary'
    """
    return f"{job_namespace}:{job_name}@{namespace}"


def read_dataset_ids(process: Process, lineage: Lineage) -> tuple[str, ...]:
    """Ids of the permanent datasets a process reads (end to end, resultsets collapsed), sorted."""
    e2e = end_to_end(lineage)
    by_id = {d.id: d for d in e2e.datasets}
    ids = {r.source.dataset_id for r in e2e.relations if r.process_id == process.id}
    return tuple(sorted(i for i in ids if i in by_id and by_id[i].kind.is_permanent))


def process_qualified_name(process: Process, lineage: Lineage, namespace: str) -> str:
    """The stable qualifiedName of a process: its operation, what it reads and what it writes.

    >>> from atlas_bridge.model import Column, ColumnRef, Relation, dataset_id
    >>> src = Dataset(id="table:s.a", kind=DatasetKind.TABLE, name="a", db="s", columns=[Column(name="x")])
    >>> tgt = Dataset(id="table:s.b", kind=DatasetKind.TABLE, name="b", db="s", columns=[Column(name="x")])
    >>> p = Process(id="process:abcd", type="insert", name="Insert into s.b", query_hash="abcd" * 16)
    >>> rel = Relation(type="fdd", source=ColumnRef(dataset_id=src.id, column="x"),
    ...                target=ColumnRef(dataset_id=tgt.id, column="x"), process_id=p.id)
    >>> process_qualified_name(p, Lineage(datasets=[src, tgt], processes=[p], relations=[rel]), "primary")
    'INSERT:s.a@primary->s.b@primary'
    """
    if process.job_name is not None:
        return job_process_qualified_name(process.job_namespace or "", process.job_name, namespace)
    by_id = {d.id: d for d in lineage.datasets}
    outputs = [dataset_qualified_name(by_id[i], namespace) for i in written_dataset_ids(process, lineage)]
    inputs = [
        dataset_qualified_name(by_id[i], namespace) for i in read_dataset_ids(process, lineage) if i in by_id
    ]
    return process_qualified_name_from(process.type, inputs, outputs, process.query_hash, namespace)


def column_lineage_qualified_name(
    process_qn: str, target_column_qn: str, dependency_type: str, namespace: str
) -> str:
    """One column-lineage entity per (process, target column, dependency kind).

    >>> column_lineage_qualified_name("INSERT:s.a@p->s.b@p", "s.b.x@p", "INDIRECT", "p")
    'INSERT:s.a@p->s.b@p:s.b.x:indirect'
    """
    suffix = f"@{namespace}"
    column = target_column_qn[: -len(suffix)] if target_column_qn.endswith(suffix) else target_column_qn
    return f"{process_qn}:{column}:{dependency_type.lower()}"


def process_execution_qualified_name(process_qn: str, run_id: str) -> str:
    """One process execution per process and run.

    >>> process_execution_qualified_name("INSERT:s.a@primary->s.b@primary", "run-42")
    'INSERT:s.a@primary->s.b@primary:run-42'
    """
    return f"{process_qn}:{run_id}"
