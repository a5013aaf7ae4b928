"""OpenLineage run events -> the lineage model (pure: no I/O).

The mapping (``docs/openlineage.md`` has it as a table):

* **datasets** by OpenLineage's naming spec, into the model's own kinds so that
  :mod:`atlas_bridge.naming` gives them the names the hook, the SQL scanner and Atlas's Hive hook give:
  a table namespace (``hive://``, ``postgres://``, ``mysql://``, ``snowflake://``, ``bigquery`` ...) and a
  name ``[catalog.]db.table`` become a table; a ``symlinks`` identifier of type TABLE (the Spark agent
  names a Hive table by its location and links its table name) wins over a location; file systems and
  object stores (``file``, ``hdfs://``, ``s3://``, ``gs://``, ``abfss://`` ...) become a path with the
  location as URI; ``kafka://`` a Kafka topic. An unknown namespace keeps a faithful name: a path whose
  URI is ``<namespace>/<name>``, case kept.
* **jobs** become processes named after the job (``<job namespace>:<job name>@<cluster>``), whatever
  they read and write from run to run; the ``sql`` facet is the process's query text.
* **runs** become process executions of their job's process (``<process>:<runId>``), one per run.
* the ``schema`` facet gives columns and their types; the ``columnLineage`` facet column lineage, direct
  (``fdd``) and indirect (``fdr``) apart, its dataset-level dependencies restricting the output's rows.

Every event of a job adds to one picture: a run's events may come in pieces and in any order, and the same
events in any order give the same lineage. Events are put in one order first (event time, then state,
then their canonical JSON); where two events say different things of one field (a column's type, the SQL
text), the later one in that order wins. What lands when:

* START, RUNNING, OTHER: the job's process with the inputs, outputs, columns and column lineage the event
  names, and the run's execution (status ``RUNNING``; OTHER leaves the status as it is).
* COMPLETE: the same, the execution ``SUCCESS`` (the Spark hook's word) with its end time.
* FAIL / ABORT: the lineage the run declared stays (the job reads and writes those datasets: a failed run
  does not undo what its job is); the execution says ``FAILED`` / ``ABORTED``, its end time and, from the
  ``errorMessage`` facet, why (its first line).

A JobEvent gives the job's process without a run; a DatasetEvent a dataset and its columns. An event that
is not valid OpenLineage (:func:`atlas_bridge.openlineage.schema.validate_event`) is a problem of that
event, never an exception, and the other events are read.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from atlas_bridge.atlas.convert import RunInfo
from atlas_bridge.model import (
    PSEUDO_ROWS,
    ClauseType,
    Column,
    ColumnRef,
    Dataset,
    DatasetKind,
    Effect,
    ExtractionResult,
    Lineage,
    Problem,
    Process,
    Relation,
    RelationType,
    dataset_id,
    query_hash,
)
from atlas_bridge.naming import KAFKA_TOPIC
from atlas_bridge.openlineage.schema import event_kind, validate_event

PRODUCER = "https://github.com/atlas-bridge/atlas-bridge"
"""The ``producer`` of the events atlas-bridge writes (and the ``_producer`` of their facets)."""

OUR_FACET = "atlasBridge"
"""A custom facet (job and run) on the events atlas-bridge writes: what OpenLineage has no field for (the
statement's operation, position and file; the run as the hook recorded it), so that our lineage read back
makes the same Atlas entities as sent directly."""

TABLE_SCHEMES = frozenset(
    {
        "hive",
        "postgres",
        "postgresql",
        "mysql",
        "mariadb",
        "sqlserver",
        "mssql",
        "oracle",
        "db2",
        "teradata",
        "redshift",
        "snowflake",
        "bigquery",
        "trino",
        "presto",
        "awsathena",
        "clickhouse",
        "duckdb",
        "sqlite",
        "databricks",
        "spark",
        "cassandra",
        "oceanbase",
        "crate",
        "vertica",
        "greenplum",
        "impala",
        "glue",
        "iceberg",
        "synapse",
    }
)
"""Namespace schemes of databases: their dataset names are ``[catalog.]db.table``."""

PATH_SCHEMES = frozenset(
    {
        "file",
        "hdfs",
        "viewfs",
        "maprfs",
        "s3",
        "s3a",
        "s3n",
        "gs",
        "gcs",
        "abfs",
        "abfss",
        "wasb",
        "wasbs",
        "adl",
        "dbfs",
        "oss",
        "cos",
        "r2",
        "ofs",
        "o3fs",
    }
)
"""Namespace schemes of file systems and object stores: their dataset names are locations."""

RUN_STATUS = {
    "START": "RUNNING",
    "RUNNING": "RUNNING",
    "COMPLETE": "SUCCESS",
    "FAIL": "FAILED",
    "ABORT": "ABORTED",
}
"""A run's last state -> its execution's ``status``, in the words the Spark hook uses (SUCCESS, FAILED)."""

_STATE_RANK = {"START": 0, "RUNNING": 1, "OTHER": 2, "COMPLETE": 3, "ABORT": 4, "FAIL": 5}
_TERMINAL = frozenset({"COMPLETE", "ABORT", "FAIL"})
_SCHEME_OF = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)(?::|$)")

# transformation subtypes (OpenLineage column lineage) <-> the model's
_DIRECT_EFFECT = {
    "IDENTITY": Effect.EXACT_COPY,
    "TRANSFORMATION": Effect.MODIFIED_COPY,
    "AGGREGATION": Effect.AGGREGATION,
}
_INDIRECT_CLAUSE = {
    "JOIN": ClauseType.JOIN,
    "GROUP_BY": ClauseType.GROUP_BY,
    "FILTER": ClauseType.WHERE,
    "SORT": ClauseType.ORDER_BY,
    "WINDOW": ClauseType.WINDOW,
    "CONDITIONAL": ClauseType.CONDITION,
}


@dataclasses.dataclass(frozen=True)
class OpenLineageRead:
    """What a set of events says: the lineage (and the problems met), and each process's runs."""

    result: ExtractionResult
    runs: Mapping[str, tuple[RunInfo, ...]]
    """Process id -> its runs (process executions), as :func:`atlas_bridge.atlas.convert.to_atlas_entities`
    takes them (``runs=``)."""
    events: int = 0
    """How many events were read (valid or not)."""


def lineage_from_events(
    events: Iterable[Mapping[str, Any]], *, source: str | None = None
) -> ExtractionResult:
    """The lineage of OpenLineage events (run, job and dataset events), with a problem per invalid event.

    ``source``: where the events came from (a file's name), for the problems. Runs: :func:`read_events`.
    """
    return read_events(events, source=source).result


def read_events(
    events: Iterable[Mapping[str, Any] | tuple[str | None, int | None, Any]], *, source: str | None = None
) -> OpenLineageRead:
    """:func:`lineage_from_events`, with each process's runs.

    An item may be an event, or ``(file, line, event)`` for an event read from a file (the problems then
    name that file and line); an event that is not even a JSON object is a problem too.
    """
    problems: list[Problem] = []
    valid: list[tuple[tuple[Any, ...], Mapping[str, Any]]] = []
    count = 0
    for item in events:
        count += 1
        line: int | None = None
        file = source
        event: Any = item
        if isinstance(item, tuple):
            file, line, event = item
        where = f"event {count}" if line is None else "event"
        messages = validate_event(event)
        if messages:
            for message in messages:
                problems.append(
                    Problem(
                        message=f"{where}: not a valid OpenLineage event: {message}",
                        kind="openlineage",
                        file=file,
                        line=line,
                    )
                )
            continue
        valid.append((_order_key(event), event))
    valid.sort(key=lambda pair: pair[0])
    builder = _Builder(problems, source)
    for _, event in valid:  # first what names a dataset, whichever event says it (symlinks, its type)
        builder.learn(event)
    for _, event in valid:
        builder.add(event)
    lineage, runs = builder.finish()
    return OpenLineageRead(ExtractionResult(lineage=lineage, problems=tuple(problems)), runs, count)


def _order_key(event: Mapping[str, Any]) -> tuple[Any, ...]:
    """A total order of events that does not depend on their arrival: time, state, then the text."""
    return (
        _epoch_ms(event.get("eventTime")) or 0,
        _STATE_RANK.get(str(event.get("eventType") or "OTHER"), 2),
        json.dumps(event, sort_keys=True, ensure_ascii=False, default=str),
    )


def _epoch_ms(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    text = value[:-1] + "+00:00" if value[-1:] in ("Z", "z") else value
    try:
        parsed = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return int(parsed.timestamp() * 1000)


# -- datasets -------------------------------------------------------------------------------------------


def dataset_from_name(namespace: str, name: str, facets: Mapping[str, Any] | None = None) -> Dataset:
    """The model dataset an OpenLineage dataset (namespace, name, facets) is, without columns.

    >>> dataset_from_name("hive://metastore:9083", "Sales.Orders").id
    'table:sales.orders'
    >>> dataset_from_name("postgres://db:5432", "shop.public.orders").qualified_name
    'shop.public.orders'
    >>> dataset_from_name("s3://bucket", "raw/events").uri
    's3://bucket/raw/events'
    >>> dataset_from_name("hdfs://nn:8020", "/warehouse/x").uri, dataset_from_name("file", "/tmp/out/").uri
    ('hdfs://nn:8020/warehouse/x', '/tmp/out')
    >>> dataset_from_name("custom-ns", "Some/Thing").uri
    'custom-ns/Some/Thing'
    """
    facets = facets or {}
    table = _table_symlink(facets)
    if table is not None:
        return _table(table, _is_view(facets))
    scheme = _scheme(namespace)
    if scheme == "kafka":
        return Dataset(
            id=dataset_id(DatasetKind.STREAM, name), kind=DatasetKind.STREAM, name=name, sub_type=KAFKA_TOPIC
        )
    if scheme in TABLE_SCHEMES or namespace.startswith("arn:aws:glue"):
        return _table(name, _is_view(facets))
    if scheme == "file":  # as the Spark hook spells a local path: no ``file:``
        uri = _normalize(name if namespace.rstrip("/") in ("file", "file:") else _join(namespace, name))
    else:  # the location as given (an object key's trailing ``/`` included)
        uri = _join(namespace, name)
    return Dataset(id=dataset_id(DatasetKind.PATH, uri), kind=DatasetKind.PATH, name=uri, uri=uri)


def _scheme(namespace: str) -> str:
    m = _SCHEME_OF.match(namespace)
    return m.group(1).lower() if m else ""


def _join(namespace: str, name: str) -> str:
    return f"{namespace.rstrip('/')}/{name.lstrip('/')}"


def _normalize(uri: str) -> str:
    """One spelling per location, as the Spark hook's (``atlas_bridge.spark.plan.normalize_uri``)."""
    from atlas_bridge.spark.plan import normalize_uri

    return normalize_uri(uri)


def _table(name: str, view: bool) -> Dataset:
    parts = name.split(".")
    table = parts[-1]
    db = parts[-2] if len(parts) >= 2 else None
    catalog = ".".join(parts[:-2]) if len(parts) >= 3 else None
    kind = DatasetKind.VIEW if view else DatasetKind.TABLE
    return Dataset(id=dataset_id(kind, table, db, catalog), kind=kind, name=table, db=db, catalog=catalog)


def _table_symlink(facets: Mapping[str, Any]) -> str | None:
    """The table name a ``symlinks`` facet links a location to (type TABLE), if any (the first, sorted)."""
    symlinks = facets.get("symlinks")
    if not isinstance(symlinks, Mapping):
        return None
    names = sorted(
        _glue_table(str(i.get("name")))
        for i in symlinks.get("identifiers") or ()
        if isinstance(i, Mapping) and str(i.get("type", "")).upper() == "TABLE" and i.get("name")
    )
    return names[0] if names else None


def _glue_table(name: str) -> str:
    """A Glue table's name (``table/<db>/<table>``, as Athena's symlinks give it) as ``db.table``.

    >>> _glue_table("table/sales/orders"), _glue_table("sales.orders")
    ('sales.orders', 'sales.orders')
    """
    parts = name.split("/")
    return f"{parts[1]}.{parts[2]}" if len(parts) == 3 and parts[0] == "table" else name


def _is_view(facets: Mapping[str, Any]) -> bool:
    kind = facets.get("datasetType")
    return isinstance(kind, Mapping) and str(kind.get("datasetType", "")).upper() == "VIEW"


# -- the builder ----------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Run:
    run_id: str
    state: str | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    message: str | None = None
    ours: dict[str, Any] | None = None


@dataclasses.dataclass
class _Job:
    namespace: str
    name: str
    sql: str | None = None
    statements: dict[str, tuple[dict[str, Any], str | None]] = dataclasses.field(default_factory=dict)
    """atlas-bridge's own statements of the job (our ``atlasBridge`` facet), by query hash, with their
    SQL: several statements that share a process travel as one job, each in its own event."""
    inputs: set[str] = dataclasses.field(default_factory=set)
    outputs: set[str] = dataclasses.field(default_factory=set)
    relations: dict[tuple[Any, ...], Relation] = dataclasses.field(default_factory=dict)
    runs: dict[str, _Run] = dataclasses.field(default_factory=dict)

    @property
    def process_id(self) -> str:
        return f"job:{self.namespace}/{self.name}"


class _Builder:
    """Gathers events (in :func:`_order_key` order) into jobs, runs and datasets."""

    def __init__(self, problems: list[Problem], source: str | None) -> None:
        self.problems = problems
        self.source = source
        self.datasets: dict[str, Dataset] = {}
        self.columns: dict[str, dict[str, Column]] = defaultdict(dict)
        self.jobs: dict[tuple[str, str], _Job] = {}
        self.naming: dict[tuple[str, str], dict[str, Any]] = {}

    # datasets
    def learn(self, event: Mapping[str, Any]) -> None:
        """Note the facets that name a dataset, so that a column lineage's input field (a bare namespace
        and name) finds the table its dataset links to, from any event."""
        raws = [*(event.get("inputs") or ()), *(event.get("outputs") or ())]
        if isinstance(event.get("dataset"), Mapping):
            raws.append(event["dataset"])
        for raw in raws:
            facets = raw.get("facets") or {}
            naming = {k: facets[k] for k in ("symlinks", "datasetType") if isinstance(facets.get(k), Mapping)}
            if naming:
                self.naming.setdefault((str(raw["namespace"]), str(raw["name"])), {}).update(naming)

    def dataset(self, raw: Mapping[str, Any]) -> str:
        facets = raw.get("facets") if isinstance(raw.get("facets"), Mapping) else {}
        assert isinstance(facets, Mapping)
        known = self.naming.get((str(raw["namespace"]), str(raw["name"])), {})
        ds = dataset_from_name(str(raw["namespace"]), str(raw["name"]), {**facets, **known})
        storage = facets.get("storage")
        if isinstance(storage, Mapping) and isinstance(storage.get("fileFormat"), str):
            ds = ds.model_copy(update={"file_format": storage["fileFormat"]})
        old = self.datasets.get(ds.id)
        if old is None or (ds.kind is DatasetKind.VIEW and old.kind is not DatasetKind.VIEW):
            self.datasets[ds.id] = (
                ds
                if old is None or ds.file_format
                else ds.model_copy(update={"file_format": old.file_format})
            )
        elif ds.file_format and not old.file_format:
            self.datasets[ds.id] = old.model_copy(update={"file_format": ds.file_format})
        schema = facets.get("schema")
        if isinstance(schema, Mapping) and isinstance(schema.get("fields"), list):
            ours = schema.get("_producer") == PRODUCER
            for i, field in enumerate(schema["fields"]):
                if not isinstance(field, Mapping) or not isinstance(field.get("name"), str):
                    continue
                position = field.get("ordinal_position")
                pos = position - 1 if isinstance(position, int) and position >= 1 else (None if ours else i)
                dtype = field.get("type") if isinstance(field.get("type"), str) else None
                self.columns[ds.id][field["name"]] = Column(name=field["name"], data_type=dtype, position=pos)
        return ds.id

    def constant(self, job: _Job) -> ColumnRef:
        """The job's literal values, as a constant table of its own (no Atlas entity: it only tells that
        a column is written, so that what restricts the job's rows restricts that column too)."""
        ds_id = dataset_id(DatasetKind.CONSTANT_TABLE, "constants", scope=job.process_id)
        if ds_id not in self.datasets:
            self.datasets[ds_id] = Dataset(id=ds_id, kind=DatasetKind.CONSTANT_TABLE, name="constants")
        self.column(ds_id, "value")
        return ColumnRef(dataset_id=ds_id, column="value")

    def column(self, ds_id: str, name: str) -> None:
        if name not in self.columns[ds_id]:
            self.columns[ds_id][name] = Column(name=name, system=name == PSEUDO_ROWS)

    # events
    def add(self, event: Mapping[str, Any]) -> None:
        kind = event_kind(event)
        if kind == "DatasetEvent":
            self.dataset(event["dataset"])
            return
        raw_job = event["job"]
        key = (str(raw_job["namespace"]), str(raw_job["name"]))
        job = self.jobs.get(key)
        if job is None:
            job = self.jobs[key] = _Job(*key)
        job_facets = raw_job.get("facets") or {}
        sql = job_facets.get("sql")
        if isinstance(sql, Mapping) and isinstance(sql.get("query"), str) and not sql.get("_deleted"):
            job.sql = sql["query"]
        ours = job_facets.get(OUR_FACET)
        if isinstance(ours, Mapping) and isinstance(ours.get("process"), Mapping):
            statement = dict(ours["process"])
            text = sql["query"] if isinstance(sql, Mapping) and isinstance(sql.get("query"), str) else None
            job.statements[str(statement.get("queryHash", ""))] = (statement, text)
        inputs = [self.dataset(d) for d in event.get("inputs") or ()]
        outputs = []
        for raw in event.get("outputs") or ():
            out_id = self.dataset(raw)
            outputs.append(out_id)
            facets = raw.get("facets") or {}
            self.column_lineage(job, out_id, facets.get("columnLineage"))
        job.inputs.update(inputs)
        job.outputs.update(outputs)
        if kind == "RunEvent":
            self.run(job, event)

    def run(self, job: _Job, event: Mapping[str, Any]) -> None:
        raw = event["run"]
        run_id = str(raw["runId"])
        run = job.runs.get(run_id)
        if run is None:
            run = job.runs[run_id] = _Run(run_id)
        state = str(event.get("eventType") or "OTHER")
        when = _epoch_ms(event.get("eventTime"))
        if state != "OTHER" and (run.state not in _TERMINAL or state in _TERMINAL):
            run.state = state
        if when is not None and (state == "START" or run.start_ms is None):
            run.start_ms = when if run.start_ms is None or state != "START" else min(run.start_ms, when)
        if state in _TERMINAL:
            run.end_ms = when
        facets = raw.get("facets") or {}
        error = facets.get("errorMessage")
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            run.message = error["message"].strip().split("\n", 1)[0]
        ours = facets.get(OUR_FACET)
        if isinstance(ours, Mapping) and isinstance(ours.get("run"), Mapping):
            run.ours = dict(ours["run"])

    def column_lineage(self, job: _Job, out_id: str, facet: Any) -> None:
        if not isinstance(facet, Mapping) or facet.get("_deleted"):
            return
        fields = facet.get("fields")
        for out_col, spec in sorted(fields.items()) if isinstance(fields, Mapping) else ():
            if not isinstance(spec, Mapping):
                continue
            self.column(out_id, out_col)
            legacy = str(spec.get("transformationType") or "").upper()
            sources = spec.get("inputFields") or ()
            for raw in sources:
                self.edges(job, raw, ColumnRef(dataset_id=out_id, column=out_col), legacy)
            if not sources:  # written from no dataset (a literal): still a column the job writes
                self.relation(
                    job, RelationType.FDD, self.constant(job), ColumnRef(dataset_id=out_id, column=out_col)
                )
        for raw in facet.get("dataset") or ():  # dependencies of the whole output: its row set
            self.column(out_id, PSEUDO_ROWS)
            self.edges(job, raw, ColumnRef(dataset_id=out_id, column=PSEUDO_ROWS), "", indirect=True)

    def edges(self, job: _Job, raw: Any, target: ColumnRef, legacy: str, *, indirect: bool = False) -> None:
        if not isinstance(raw, Mapping):
            return
        src_id = self.dataset({"namespace": raw["namespace"], "name": raw["name"]})
        self.column(src_id, str(raw["field"]))
        job.inputs.add(src_id)
        source = ColumnRef(dataset_id=src_id, column=str(raw["field"]))
        transformations = [t for t in raw.get("transformations") or () if isinstance(t, Mapping)]
        if not transformations:  # facet 1-0-x: the field's own transformationType, if any
            effect = Effect.EXACT_COPY if legacy == "IDENTITY" else (Effect.MODIFIED_COPY if legacy else None)
            rel_type = RelationType.FDR if indirect else RelationType.FDD
            self.relation(job, rel_type, source, target, effect=effect)
            return
        for t in transformations:
            kind = str(t.get("type", "")).upper()
            subtype = str(t.get("subtype") or "").upper()
            description = t.get("description") if isinstance(t.get("description"), str) else None
            if kind == "INDIRECT" or indirect:
                clause = _INDIRECT_CLAUSE.get(subtype)
                ours = t.get(OUR_FACET + "Clause")
                if isinstance(ours, str) and ours in {c.value for c in ClauseType}:
                    clause = ClauseType(ours)
                self.relation(job, RelationType.FDR, source, target, clause=clause, transform=description)
            else:
                effect = _DIRECT_EFFECT.get(subtype)
                if t.get("masking") is True:
                    effect = Effect.MODIFIED_COPY
                ours = t.get(OUR_FACET + "Effect")
                if isinstance(ours, str) and ours in {e.value for e in Effect}:
                    effect = Effect(ours)
                self.relation(job, RelationType.FDD, source, target, effect=effect, transform=description)

    def relation(
        self,
        job: _Job,
        rel_type: RelationType,
        source: ColumnRef,
        target: ColumnRef,
        *,
        effect: Effect | None = None,
        clause: ClauseType | None = None,
        transform: str | None = None,
    ) -> None:
        rel = Relation(
            type=rel_type,
            source=source,
            target=target,
            process_id=job.process_id,
            effect=effect,
            clause_type=clause,
            transform=transform,
        )
        job.relations[rel.sort_key()] = rel

    # the model
    def finish(self) -> tuple[Lineage, dict[str, tuple[RunInfo, ...]]]:
        processes: list[Process] = []
        relations: list[Relation] = []
        writers: dict[str, set[str]] = defaultdict(set)
        runs: dict[str, tuple[RunInfo, ...]] = {}
        for key in sorted(self.jobs):
            job = self.jobs[key]
            procs = self.processes(job)
            processes.extend(procs)
            for out_id in sorted(job.outputs):
                writers[out_id].update(p.id for p in procs)
                self.column(out_id, PSEUDO_ROWS)
                for in_id in sorted(job.inputs - {out_id}):  # the table-level edge: row set to row set
                    self.column(in_id, PSEUDO_ROWS)
                    self.relation(
                        job,
                        RelationType.FDD,
                        ColumnRef(dataset_id=in_id, column=PSEUDO_ROWS),
                        ColumnRef(dataset_id=out_id, column=PSEUDO_ROWS),
                    )
            relations.extend(job.relations.values())
            for other in procs[1:]:  # statements sharing the job's process: each the whole of its lineage
                relations.extend(
                    r.model_copy(update={"process_id": other.id}) for r in job.relations.values()
                )
            infos = tuple(self.run_info(job, r) for _, r in sorted(job.runs.items()))
            if infos:
                runs[job.process_id] = infos
        datasets = [
            ds.model_copy(
                update={
                    "columns": tuple(self.columns.get(ds_id, {}).values()),
                    "process_ids": tuple(sorted(writers.get(ds_id, ()))),
                }
            )
            for ds_id, ds in sorted(self.datasets.items())
        ]
        datasets = [Dataset(**dict(ds)) for ds in datasets]  # canonical column order again
        lineage = Lineage(datasets=datasets, processes=processes, relations=relations)
        return lineage, runs

    def processes(self, job: _Job) -> list[Process]:
        """The job's process; the statements atlas-bridge wrote it from, when it did (the job's own
        process id first)."""
        if job.statements:
            from atlas_bridge.model import Span

            out = []
            for i, key in enumerate(sorted(job.statements)):
                ours, text = job.statements[key]
                span = ours.get("span")
                out.append(
                    Process(
                        id=job.process_id if i == 0 else f"{job.process_id}#{i}",
                        type=str(ours.get("type") or "openlineage_job"),
                        name=str(ours.get("name") or job.name),
                        query_hash=key or self.hash_of(job, text),
                        statement_index=ours.get("statementIndex"),
                        sql=text,
                        span=Span(**span) if isinstance(span, Mapping) else None,
                        procedure=ours.get("procedure"),
                        source_file=ours.get("sourceFile"),
                    )
                )
            return out
        return [
            Process(
                id=job.process_id,
                type="openlineage_job",
                name=job.name,
                query_hash=self.hash_of(job, job.sql),
                sql=job.sql,
                job_namespace=job.namespace,
                job_name=job.name,
            )
        ]

    @staticmethod
    def hash_of(job: _Job, text: str | None) -> str:
        """The statement's hash; a job without SQL: a hash of its namespace and name."""
        if text:
            return query_hash(text)
        return hashlib.sha256(f"{job.namespace}\n{job.name}".encode()).hexdigest()

    @staticmethod
    def run_info(job: _Job, run: _Run) -> RunInfo:
        if run.ours:
            try:
                return RunInfo(**run.ours)
            except ValueError:
                pass
        return RunInfo(
            run_id=run.run_id,
            start_ms=run.start_ms,
            end_ms=run.end_ms,
            status=RUN_STATUS.get(run.state or ""),
            message=run.message,
            query_text=job.sql,
        )
