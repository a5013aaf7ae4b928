"""Lineage model -> Atlas ``POST /v2/entity/bulk`` bodies (pure, deterministic).

What goes to Atlas by default:

* **Datasets**: the permanent tables, views, paths, stages and streams that take part in the lineage (or
  that a process writes), as ``atlas_bridge_table`` (a view too, with ``tableType`` ``VIRTUAL_VIEW``: one
  type whatever a scan saw, so one entity per qualifiedName) / ``_path``, each with its real columns as
  ``atlas_bridge_column`` entities. Tool-made columns (``PseudoRows``) and ``*`` are never columns.
* **Processes**: one ``atlas_bridge_process`` per statement that moves data, inputs and outputs taken from
  table-level lineage (``graph.table_level``'s rule: self-lineage dropped). Its qualifiedName is stable
  across runs and edits (operation, inputs and outputs, never the text: ``naming``), so Atlas
  de-duplicates re-runs and an edited statement updates its own process.
* **Column lineage**: from *end-to-end* column lineage (resultsets collapsed), one
  ``atlas_bridge_column_lineage`` per (process, target column, dependency kind): ``DIRECT`` gathers the
  ``fdd`` sources (with the transform ``expression`` and ``effect``), ``INDIRECT`` the ``fdr`` ones (with the
  ``clauses``: where, join, group by...). Both are Process subtypes between column entities, so both show on
  a column's Lineage tab, as two differently named nodes.
* **PseudoRows** (the row set) is not a column:

  - a column that restricts the target's rows (``x -fdr-> target.PseudoRows``: WHERE, JOIN ON, GROUP BY,
    HAVING) becomes an ``INDIRECT`` source of every real column the same statement writes in that target,
    as Hive's lineage does with predicates. Sending the *table* as the output instead would put a
    column-lineage node, and all the column lineage upstream of the filter, on the target table's
    Lineage tab, for nearly every statement. When the statement writes no real column there (``DELETE
    ... WHERE``), the restriction stays in table-level lineage only;
  - a row count that feeds a value (``source.PseudoRows -> target.col``: COUNT(*), EXISTS) has no source
    column. The dataset is *not* made an input of the column lineage (that would draw a column-lineage node
    on the table's own Lineage tab, which shows table-level processes only); its qualifiedName goes into
    the column lineage's ``rowSources`` attribute instead, shown in its properties (the table-level edge is
    drawn by the process anyway). A column lineage whose only source is a row count has no inputs, so it
    shows on no Lineage tab; its ``rowSources`` still says what it counts;
  - row set to row set (``PseudoRows -> PseudoRows``) is exactly the table-level edge, already drawn by
    the process.
* **Process executions**: one ``atlas_bridge_process_execution`` per process when a :class:`RunInfo` is
  given.
* **Resultsets** only on request (``include_resultsets=True``): what a statement returns without writing it
  anywhere, as ``atlas_bridge_resultset``; intermediate resultsets never (end to end collapses them).

How it is sent, because Atlas replaces any relationship array it receives:

* a column carries its ``table`` end. A dataset carries ``columns`` only when the lineage defines it
  (CTAS, CREATE VIEW, CREATE EXTERNAL TABLE: its whole schema is known), so an edited definition drops
  the columns it lost, while reading two columns of a ten-column table leaves the other eight alone.
  Column lineage and executions carry their ``process`` end; the process carries ``columnLineages``
  (complete for its statement, so an edit drops the column lineage it lost), never ``processExecutions``
  (one per run, they accumulate). A process's ``inputs`` and ``outputs`` and a column lineage's are sent
  whole: they are complete for that statement.
* every entity is sent with its required attributes (qualifiedName, name), never with nulls, so
  re-sending a table that is only read changes nothing. A process and its column lineage, which describe
  statements, send every attribute they own (empty when the statements have none): Atlas keeps what an
  upsert leaves out, and two statements share a process when they share operation, inputs and outputs,
  so a field left out would stay from the other statement (:func:`statement_attributes`).
* every reference is an ``AtlasRelatedObjectId`` with ``relationshipType``, ``typeName`` and
  ``uniqueAttributes``, plus the negative placeholder ``guid`` when the referenced entity is in the same
  body (Atlas resolves unique attributes against the store only).
* entities are ordered in tiers (datasets and their columns, then processes each followed by their column
  lineage and executions) and batches are cut from that order without splitting an owner from its
  children, so a reference is either to the same batch (by guid) or to an earlier one (by unique
  attributes): every batch stands alone when batches are sent in order. An owner with more children than
  one batch holds is sent first without its child array and again after its last child with it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict

from atlas_bridge import naming
from atlas_bridge.atlas.limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTITIES
from atlas_bridge.graph import end_to_end
from atlas_bridge.model import (
    PSEUDO_ROWS,
    Column,
    ColumnRef,
    Dataset,
    DatasetKind,
    Effect,
    Lineage,
    Process,
    RelationType,
)

logger = logging.getLogger(__name__)

TYPE_TABLE = "atlas_bridge_table"
TYPE_VIEW = "atlas_bridge_view"
"""Registered only for entities older versions stored; never sent (a view is a table, ``tableType``)."""
TABLE_TYPE_VIEW = "VIRTUAL_VIEW"
TABLE_TYPE_STREAM = "STREAM"
TYPE_PATH = "atlas_bridge_path"
TYPE_RESULTSET = "atlas_bridge_resultset"
TYPE_COLUMN = "atlas_bridge_column"
TYPE_PROCESS = "atlas_bridge_process"
TYPE_COLUMN_LINEAGE = "atlas_bridge_column_lineage"
TYPE_PROCESS_EXECUTION = "atlas_bridge_process_execution"
TYPE_KAFKA_TOPIC = "kafka_topic"
"""Atlas's own Kafka model type (``1070-kafka_model.json``, in every Atlas): a topic has no columns there."""

REL_COLUMNS = "atlas_bridge_dataset_columns"
REL_COLUMN_LINEAGES = "atlas_bridge_process_column_lineages"
REL_EXECUTIONS = "atlas_bridge_process_process_executions"
REL_INPUTS = "dataset_process_inputs"
REL_OUTPUTS = "process_dataset_outputs"

_PSEUDO_NAMES = frozenset({PSEUDO_ROWS.lower(), "relationrows"})
# When two model datasets land on one qualifiedName, the more specific type wins.
_TYPE_RANK = {TYPE_VIEW: 0, TYPE_PATH: 1, TYPE_TABLE: 2, TYPE_RESULTSET: 3, TYPE_KAFKA_TOPIC: 4}
# A process and what it owns (column lineage, executions) share one tier and sort together, as a dataset
# and its columns do: an owner that lists its children (``columns``, ``columnLineages``) travels in one body
# with them.
_TIER_DATASETS, _TIER_PROCESSES = 1, 2
_TIER_DETAILS = _TIER_PROCESSES
_CHILD_ARRAYS = ("columnLineages", "columns")
"""Owner-side arrays of COMPOSITION children: sent whole, so Atlas deletes the children no longer listed."""


class RunInfo(BaseModel):
    """One run of the lineage's statements, recorded as a process execution per process.

    ``run_id`` must be unique per run (a Spark application id plus execution id, a scheduler's run id, a
    UUID): it makes the execution's qualifiedName. Times are epoch milliseconds.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    user: str | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    application_id: str | None = None
    query_text: str | None = None
    """Overrides each process's own statement text (e.g. when the run's text is all that is known)."""
    host: str | None = None
    status: str | None = None
    batches: int | None = None
    """A streaming query's run: the micro-batches it has run so far."""
    input_rows: int | None = None
    """A streaming query's run: the rows its sources gave so far."""
    message: str | None = None
    """Why a run failed (the first line of the error)."""
    application_name: str | None = None
    source_file: str | None = None
    """Where the run was read from (a Spark event log's events file), with ``source_line``."""
    source_line: int | None = None


class _Ref(NamedTuple):
    """A reference by unique attributes (a tuple: hashing and sorting millions of them stay in C)."""

    type_name: str
    qualified_name: str
    relationship_type: str


@dataclass
class _Entity:
    tier: int
    group: str
    type_name: str
    qualified_name: str
    attributes: dict[str, Any]
    refs: dict[str, list[_Ref] | _Ref] = field(default_factory=dict)
    nbytes: int | None = None
    """An upper bound of its JSON in a body when known already (from its record's text)."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.type_name, self.qualified_name)

    def sort_key(self) -> tuple[int, str, int, str, str]:
        # Tier first (so references only ever point back), then owner: a dataset sorts just before its
        # columns, and a process's column lineage and executions sort together, so chunks keep them close.
        own = 0 if self.qualified_name == self.group else 1
        return (self.tier, self.group, own, self.type_name, self.qualified_name)


def _is_real(col: Column) -> bool:
    """Whether a column is a real one (not tool-made like PseudoRows/RelationRows, not ``*``)."""
    return not col.system and col.name.lower() not in _PSEUDO_NAMES and col.name != "*"


def _dataset_type(ds: Dataset, resultsets: bool = False) -> str | None:
    # A view is an atlas_bridge_table with tableType VIRTUAL_VIEW, as Hive's model keeps views as hive_table:
    # a scan that only reads a view cannot tell it from a table, and Atlas matches a qualifiedName within
    # one type and its subtypes, so one type for both is what keeps one entity per name in any scan order.
    if ds.kind is DatasetKind.STREAM and ds.sub_type == naming.KAFKA_TOPIC:
        return TYPE_KAFKA_TOPIC
    if ds.kind in (DatasetKind.TABLE, DatasetKind.VIEW, DatasetKind.STREAM):
        return TYPE_TABLE
    if ds.kind in (DatasetKind.PATH, DatasetKind.STAGE):
        return TYPE_PATH
    if resultsets and ds.kind is DatasetKind.RESULTSET:
        return TYPE_RESULTSET
    return None


# -- display names: what Atlas's web UI writes on a node (``name``, or the type's displayTextAttribute) ------
# The Lineage tab cuts labels to 18 characters (17 and "...") unless "Display full name" is on, so a name
# starts with what tells it from its neighbours on a tab; with full names on it still reads as a sentence.
# qualifiedNames stay in ``naming``: these are for reading only.

_LISTED = 3
"""Names listed in a display name before "and N more"."""


def short_name(ds: Dataset) -> str:
    """What a dataset's label starts with: a table's or view's own name, a path's last segment.

    >>> from atlas_bridge.model import dataset_id
    >>> short_name(Dataset(id="path:x", kind=DatasetKind.PATH, name="x", uri="s3a://b/exports/daily/"))
    'daily'
    >>> short_name(Dataset(id=dataset_id(DatasetKind.TABLE, "Orders", "Sales"), kind=DatasetKind.TABLE,
    ...                    name="Orders", db="Sales"))
    'orders'
    """
    if ds.kind in (DatasetKind.PATH, DatasetKind.STAGE) and (ds.uri or ds.kind is DatasetKind.PATH):
        uri = (ds.uri or ds.name).rstrip("/")
        return uri.rsplit("/", 1)[-1] or uri
    return ds.name.lower()


def _full_name(ds: Dataset) -> str:
    if ds.kind in (DatasetKind.PATH, DatasetKind.STAGE) and (ds.uri or ds.kind is DatasetKind.PATH):
        return ds.uri or ds.name
    return ".".join(p for p in (ds.catalog, ds.db, ds.name) if p).lower()


def _listing(names: Iterable[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``, ``a, b, c and 2 more``."""
    items = list(dict.fromkeys(names))
    if len(items) > _LISTED:
        return f"{', '.join(items[:_LISTED])} and {len(items) - _LISTED} more"
    if len(items) > 1:
        return f"{', '.join(items[:-1])} and {items[-1]}"
    return items[0] if items else ""


def _operation_words(operation: str) -> str:
    """``insert_overwrite`` -> ``insert overwrite``; ``InsertIntoHiveTable`` -> ``insert into hive table``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", operation)
    return " ".join(spaced.replace("_", " ").lower().split())


def process_display_name(proc: Process, written: list[Dataset], read: list[Dataset]) -> str:
    """What the process writes first (the tables' own names), then what it does, from what.

    >>> from atlas_bridge.model import dataset_id
    >>> def t(db, n):
    ...     return Dataset(id=dataset_id(DatasetKind.TABLE, n, db), kind=DatasetKind.TABLE, name=n, db=db)
    >>> p = Process(id="process:1", type="insert_overwrite", name="Insert overwrite marts.fct_orders",
    ...             query_hash="ab" * 32)
    >>> process_display_name(p, [t("marts", "fct_orders")], [t("staging", "orders"), t("staging", "items")])
    'fct_orders: insert overwrite from staging.items and staging.orders'
    """
    if not written:
        return proc.name or _operation_words(proc.type)
    head = _listing(sorted({short_name(d) for d in written}))
    text = f"{head}: {_operation_words(proc.type)}"
    sources = sorted({_full_name(d) for d in read})
    return f"{text} from {_listing(sources)}" if sources else text


def path_display_name(ds: Dataset) -> str:
    """A path's last segment, then the whole location: paths under one folder differ within the first
    characters (``orders (hdfs://nn/data/orders)``), where the bare URIs share their first 18.

    >>> path_display_name(Dataset(id="path:x", kind=DatasetKind.PATH, name="x", uri="hdfs://nn/data/orders"))
    'orders (hdfs://nn/data/orders)'
    """
    return f"{short_name(ds)} ({_full_name(ds)})"


def column_display_name(column: str, ds: Dataset) -> str:
    """A column, then whose it is: columns of one table, and one column name in several tables, differ
    within the first characters (``order_id (stg_orders)``, ``order_ts (stg_orders)``).

    >>> from atlas_bridge.model import dataset_id
    >>> column_display_name("Order_Id", Dataset(id=dataset_id(DatasetKind.TABLE, "stg_orders", "staging"),
    ...                                         kind=DatasetKind.TABLE, name="stg_orders", db="staging"))
    'order_id (stg_orders)'
    """
    return f"{column.lower()} ({short_name(ds)})"


def column_lineage_display_name(
    column: str, target: Dataset, dependency: str, clauses: list[str], sources: list[str]
) -> str:
    """The target column, ``=`` (DIRECT: its value comes from the sources) or ``~`` (INDIRECT: its rows
    are chosen by them), its table, then where from: a direct and an indirect lineage of one column, and
    the same column name in two tables, differ within the first characters (no spaces around the mark:
    a 14-character column name still leaves its table two).

    >>> from atlas_bridge.model import dataset_id
    >>> t = Dataset(id=dataset_id(DatasetKind.TABLE, "fct_orders", "marts"), kind=DatasetKind.TABLE,
    ...             name="fct_orders", db="marts")
    >>> column_lineage_display_name("order_amount", t, "DIRECT", [], ["items.qty", "items.price"])
    'order_amount=fct_orders, from items.qty and items.price'
    >>> column_lineage_display_name("order_amount", t, "INDIRECT", ["join", "where"], ["orders.status"])
    'order_amount~fct_orders, filtered by join and where on orders.status'
    """
    head = _label_head(column, short_name(target), dependency)
    return _column_lineage_label(head, dependency, clauses, sources)


def _label_head(column: str, target: str, dependency: str) -> str:
    """What a column lineage's display name starts with: its column, ``=`` or ``~``, its table."""
    return f"{column.lower()}{'=' if dependency == naming.DEPENDENCY_DIRECT else '~'}{target}"


def _column_lineage_label(text: str, dependency: str, clauses: list[str], sources: list[str]) -> str:
    """:func:`column_lineage_display_name` from its head (:func:`_label_head`)."""
    direct = dependency == naming.DEPENDENCY_DIRECT
    if direct:
        return f"{text}, from {_listing(sources)}" if sources else text
    how = f"filtered by {_listing(clauses)}" if clauses else "filtered"
    return f"{text}, {how} on {_listing(sources)}" if sources else f"{text}, {how}"


class _Builder:
    """Collects the entities of one lineage, keyed by (typeName, qualifiedName)."""

    def __init__(self, lineage: Lineage, namespace: str, resultsets: bool) -> None:
        self.resultsets = resultsets
        self.namespace = namespace
        self.by_id = {d.id: d for d in lineage.datasets}
        self.procs = {p.id: p for p in lineage.processes}
        self.entities: dict[tuple[str, str], _Entity] = {}
        self.dataset_qn: dict[str, str] = {}  # model dataset id -> qualifiedName of its entity
        self.dataset_type: dict[str, str] = {}  # dataset qualifiedName -> its entity's typeName
        self.process_qn: dict[str, str] = {}
        self._column_qns: dict[tuple[str, str], str] = {}
        self._column_refs: dict[tuple[str, str, str], _Ref] = {}
        self.dataset_id_of_column: dict[_Ref, str] = {}
        self.column_of_ref: dict[_Ref, str] = {}
        self.sides: dict[str, _Side] | None = None
        """With a part of a bigger lineage: what each process group's union with other parts needs."""

    # -- datasets ---------------------------------------------------------------------------------
    def add_dataset(self, ds: Dataset) -> str | None:
        """Add a permanent dataset (and its real columns); returns its qualifiedName."""
        type_name = _dataset_type(ds, self.resultsets)
        if type_name is None:
            return None
        qn = naming.dataset_qualified_name(ds, self.namespace)
        attrs: dict[str, Any] = {"qualifiedName": qn}
        if type_name == TYPE_RESULTSET:
            attrs["name"] = ds.name
            if ds.sub_type:
                attrs["resultsetType"] = ds.sub_type
        elif type_name == TYPE_KAFKA_TOPIC:  # as Atlas's Kafka bridge fills it
            attrs.update(name=ds.name, topic=ds.name, uri=ds.uri or ds.name)
        elif type_name == TYPE_PATH:
            attrs["name"] = ds.name
            attrs["displayName"] = path_display_name(ds)  # its label: the last segment first
            if ds.uri:
                attrs["uri"] = ds.uri
            if ds.file_format:
                attrs["fileFormat"] = ds.file_format
        else:
            attrs["name"] = ds.name.lower()
            attrs["databaseName"] = (ds.db or naming.DEFAULT_DB).lower()
            if ds.catalog:
                attrs["catalogName"] = ds.catalog.lower()
            if ds.kind is DatasetKind.STREAM:
                attrs["tableType"] = TABLE_TYPE_STREAM
            if ds.kind is DatasetKind.VIEW:
                attrs["tableType"] = TABLE_TYPE_VIEW
                text = self._view_text(ds)
                if text:
                    attrs["viewOriginalText"] = text
        old_type = self.dataset_type.get(qn)
        if old_type is not None:
            old = self.entities.pop((old_type, qn))
            if _TYPE_RANK[type_name] < _TYPE_RANK[old_type]:
                old.type_name = type_name
            for k, v in attrs.items():
                old.attributes.setdefault(k, v)
            entity = old
        else:
            entity = _Entity(_TIER_DATASETS, qn, type_name, qn, attrs)
        self.entities[entity.key] = entity
        self.dataset_type[qn] = entity.type_name
        self.dataset_qn[ds.id] = qn
        for col in ds.columns:
            if not _is_real(col) or type_name == TYPE_KAFKA_TOPIC:
                continue
            cqn = self.column_qn(ds.id, col.name)
            key = (TYPE_COLUMN, cqn)
            # name: the column's own (the Schema tab's rows); displayName (the type's displayTextAttribute):
            # whose column it is, as the Lineage tab labels it
            cattrs: dict[str, Any] = {
                "qualifiedName": cqn,
                "name": col.name.lower(),
                "displayName": column_display_name(col.name, ds),
            }
            if col.data_type:
                cattrs["type"] = col.data_type
            if col.position is not None and type_name != TYPE_RESULTSET:
                cattrs["position"] = col.position  # the Schema tab's order
            if col.expression and type_name == TYPE_RESULTSET:
                cattrs["expression"] = col.expression
            existing = self.entities.get(key)
            if existing is not None:
                for k, v in cattrs.items():
                    existing.attributes.setdefault(k, v)
                continue
            self.entities[key] = _Entity(_TIER_DATASETS, qn, TYPE_COLUMN, cqn, cattrs)
        return qn

    def _view_text(self, ds: Dataset) -> str | None:
        for pid in ds.process_ids:
            proc = self.procs.get(pid)
            if proc is not None and "view" in proc.type and proc.sql:
                return proc.sql
        return None

    def table_ref(self, dataset_id: str, relationship_type: str) -> _Ref:
        qn = self.dataset_qn[dataset_id]
        return _Ref(self.dataset_type[qn], qn, relationship_type)

    def column_qn(self, dataset_id: str, column: str) -> str:
        key = (dataset_id, column)
        cqn = self._column_qns.get(key)
        if cqn is None:
            ds = self.by_id[dataset_id]
            cqn = self._column_qns[key] = naming.dataset_column_qualified_name(ds, column, self.namespace)
        return cqn

    def column_ref(self, dataset_id: str, column: str, relationship_type: str) -> _Ref:
        key = (dataset_id, column, relationship_type)
        ref = self._column_refs.get(key)
        if ref is None:  # one object per reference: fewer allocations, far less GC work on big lineage
            ref = self._column_refs[key] = _Ref(
                TYPE_COLUMN, self.column_qn(dataset_id, column), relationship_type
            )
            self.dataset_id_of_column[ref] = dataset_id
            self.column_of_ref[ref] = column
        return ref

    # -- processes --------------------------------------------------------------------------------
    def add_process(
        self,
        proc: Process,
        inputs: Iterable[str],
        outputs: Iterable[str],
        members: list[Process],
        targets: Iterable[str] = (),
    ) -> _Entity:
        """The process entity of ``proc`` and the other statements that share its qualifiedName
        (``members``, ``proc`` first): see :func:`statement_attributes`. ``targets``: what the process
        writes (model dataset ids) when it has no table-level output."""
        qn = self.process_qn[proc.id]
        entity = self.entities.get((TYPE_PROCESS, qn))
        inputs, outputs = list(inputs), list(outputs)
        if entity is None:
            written = [self.by_id[i] for i in dict.fromkeys([*outputs, *targets]) if i in self.by_id]
            read = [self.by_id[i] for i in dict.fromkeys(inputs) if i in self.by_id]
            attrs: dict[str, Any] = {
                "qualifiedName": qn,
                "name": process_display_name(proc, written, read),
                "operationType": proc.type,
                **statement_attributes(members),
            }
            # columnLineages is complete for the statement: an edit drops the column lineage it lost.
            refs: dict[str, list[_Ref] | _Ref] = {"inputs": [], "outputs": [], "columnLineages": []}
            entity = _Entity(_TIER_PROCESSES, qn, TYPE_PROCESS, qn, attrs, refs)
            self.entities[entity.key] = entity
        ins = entity.refs["inputs"]
        outs = entity.refs["outputs"]
        assert isinstance(ins, list)
        assert isinstance(outs, list)
        ins.extend(self.table_ref(i, REL_INPUTS) for i in inputs)
        outs.extend(self.table_ref(o, REL_OUTPUTS) for o in outputs)
        return entity

    def add_execution(self, proc_entity: _Entity, proc: Process, run: RunInfo) -> None:
        pqn = proc_entity.qualified_name
        qn = naming.process_execution_qualified_name(pqn, run.run_id)
        if (TYPE_PROCESS_EXECUTION, qn) in self.entities:
            return
        attrs: dict[str, Any] = {
            "qualifiedName": qn,
            "name": f"{proc_entity.attributes['name']} (run {run.run_id})",
            "runId": run.run_id,
        }
        optional = {
            "startTime": run.start_ms,
            "endTime": run.end_ms,
            "userName": run.user,
            # the run's own text when given, else its process's (all the statements the process holds)
            "queryText": run.query_text
            if run.query_text is not None
            else proc_entity.attributes["queryText"],
            "applicationId": run.application_id,
            "applicationName": run.application_name,
            "sourceFile": run.source_file,
            "sourceLine": run.source_line,
            "hostName": run.host,
            "status": run.status,
            "batches": run.batches,
            "inputRows": run.input_rows,
            "message": run.message,
        }
        attrs.update({k: v for k, v in optional.items() if v is not None and v != ""})  # one run: no clearing
        refs: dict[str, list[_Ref] | _Ref] = {"process": _Ref(TYPE_PROCESS, pqn, REL_EXECUTIONS)}
        self.entities[(TYPE_PROCESS_EXECUTION, qn)] = _Entity(
            _TIER_DETAILS, pqn, TYPE_PROCESS_EXECUTION, qn, attrs, refs
        )
        if run.query_text is None and self.sides is not None:
            self.sides.setdefault(pqn, _Side()).runs.append(qn)


@dataclass
class _ColumnLineage:
    process_id: str
    target_id: str
    output: _Ref
    inputs: set[_Ref] = field(default_factory=set)
    table_inputs: set[str] = field(default_factory=set)
    """Datasets whose row set feeds the column (COUNT(*)): referenced once their entity type is final."""
    clauses: set[str] = field(default_factory=set)
    expressions: set[str] = field(default_factory=set)
    effects: set[Effect] = field(default_factory=set)
    paths: dict[_Ref, set[str]] = field(default_factory=dict)
    """What of each input column is read, where a field below it is (``widget.asset.id``; the column's name
    when it is also read whole): the display name lists these."""
    field_paths: set[str] = field(default_factory=set)
    """``source path -> target path`` of each edge with a field at either end (``widget.asset.id ->
    asset_id``): the ``fieldPaths`` attribute, docs/nested-data.md."""


def _note_fields(
    paths: dict[_Ref, set[str]], field_paths: set[str], ref: _Ref, src: ColumnRef, tgt: ColumnRef
) -> None:
    """Record what an edge whose source column is ``ref`` reads of it, and its field paths if it has any."""
    seen = paths.get(ref)
    if seen is None:
        seen = paths[ref] = set()
    seen.add(src.path)
    if src.field is not None or tgt.field is not None:
        field_paths.add(f"{src.path} -> {tgt.path}")


def _shown(column: str, paths: dict[_Ref, set[str]], ref: _Ref) -> list[str]:
    """How an input shows in a display name: its column, or the fields of it that are read."""
    seen = paths.get(ref)
    if not seen or seen == {column}:
        return [column]
    return sorted(seen)


def _column_lineage(
    b: _Builder,
    col_lineage: dict[tuple[str, str, str], _ColumnLineage],
    pid: str,
    tgt_id: str,
    column: str,
    dep: str,
) -> _ColumnLineage:
    out = b.column_ref(tgt_id, column, REL_OUTPUTS)
    key = (b.process_qn[pid], out.qualified_name, dep)
    cl = col_lineage.get(key)
    if cl is None:
        cl = col_lineage[key] = _ColumnLineage(pid, tgt_id, out)
    return cl


@dataclass
class _Restriction:
    """Columns that restrict the rows a process writes into one dataset (``x -fdr-> target.PseudoRows``)."""

    sources: set[_Ref] = field(default_factory=set)
    clauses: set[str] = field(default_factory=set)
    expressions: set[str] = field(default_factory=set)
    paths: dict[_Ref, set[str]] = field(default_factory=dict)
    field_paths: set[str] = field(default_factory=set)


def _process_qualified_names(lineage: Lineage, e2e: Lineage, namespace: str) -> dict[str, str]:
    """Every process's qualifiedName in one pass (``naming.process_qualified_name`` for each, in bulk):
    operation, permanent inputs (end to end) and outputs, never the statement's text."""
    by_id = {d.id: d for d in lineage.datasets}
    e2e_by_id = {d.id: d for d in e2e.datasets}
    written: dict[str, set[str]] = defaultdict(set)
    for rel in lineage.relations:
        if rel.process_id is not None:
            written[rel.process_id].add(rel.target.dataset_id)
    for ds in lineage.datasets:
        for pid in ds.process_ids:
            written[pid].add(ds.id)
    read: dict[str, set[str]] = defaultdict(set)
    for rel in e2e.relations:
        if rel.process_id is not None:
            read[rel.process_id].add(rel.source.dataset_id)
    out: dict[str, str] = {}
    for proc in lineage.processes:
        if proc.job_name is not None:  # a scheduler's job: named after the job, whatever it touches
            out[proc.id] = naming.job_process_qualified_name(
                proc.job_namespace or "", proc.job_name, namespace
            )
            continue
        ids = sorted(i for i in written.get(proc.id, ()) if i in by_id and by_id[i].kind.is_permanent)
        outputs = [naming.dataset_qualified_name(by_id[i], namespace) for i in ids]
        srcs = sorted(i for i in read.get(proc.id, ()) if i in e2e_by_id and e2e_by_id[i].kind.is_permanent)
        inputs = [naming.dataset_qualified_name(e2e_by_id[i], namespace) for i in srcs]
        out[proc.id] = naming.process_qualified_name_from(
            proc.type, inputs, outputs, proc.query_hash, namespace
        )
    return out


def _build(
    lineage: Lineage,
    namespace: str,
    run: RunInfo | None,
    resultsets: bool = False,
    *,
    unused: set[str] | None = None,
    runs: Mapping[str, Sequence[RunInfo]] | None = None,
    sides: dict[str, _Side] | None = None,
) -> list[_Entity]:
    """The entities of a lineage, sorted; with ``unused`` given, also every other permanent dataset (and
    its columns), whose qualifiedNames are added to ``unused`` (a part of a bigger lineage: another part
    may use them, and their columns belong to the union). ``runs``: the run of each process id, where the
    processes of one lineage ran in different runs (a Spark event log's executions); ``run`` for the
    others. ``sides``: filled with each process group's :class:`_Side`."""
    b = _Builder(lineage, namespace, resultsets)
    b.sides = sides
    e2e = end_to_end(lineage)
    b.process_qn = _process_qualified_names(lineage, e2e, namespace)
    # Permanent datasets only -> their real column names.
    real = {
        d.id: {c.name for c in d.columns if _is_real(c)} for d in e2e.datasets if _dataset_type(d, resultsets)
    }
    # Datasets whose Atlas type has no columns (a Kafka topic): table-level lineage only.
    columnless = {d.id for d in e2e.datasets if _dataset_type(d, resultsets) == TYPE_KAFKA_TOPIC}
    for ds_id in columnless:
        real[ds_id] = set()

    chain = (RelationType.FDD, RelationType.FDR)
    # Table level (graph.table_level's rule) and the real columns each process writes per target.
    table_edges: dict[str, set[tuple[str, str]]] = defaultdict(set)
    written: dict[tuple[str, str], set[str]] = defaultdict(set)
    for rel in e2e.relations:
        src_id, tgt_id = rel.source.dataset_id, rel.target.dataset_id
        if (
            rel.process_id is None
            or rel.process_id not in b.process_qn
            or src_id not in real
            or tgt_id not in real
        ):
            continue
        if (rel.type in chain or rel.type is RelationType.ER) and src_id != tgt_id:
            table_edges[rel.process_id].add((src_id, tgt_id))
        if rel.type in chain and rel.target.column in real[tgt_id]:
            written[(rel.process_id, tgt_id)].add(rel.target.column)

    # A column written from no source (a literal, CAST(GETDATE() AS DATE)) has no end-to-end relation, yet a
    # filter on the statement's rows restricts it like any other: count it among the written columns.
    for rel in lineage.relations:
        tgt = rel.target
        if (
            rel.type in chain
            and rel.process_id in b.process_qn
            and tgt.dataset_id in real
            and tgt.column in real[tgt.dataset_id]
        ):
            written[(rel.process_id, tgt.dataset_id)].add(tgt.column)

    # Column lineage, keyed by qualifiedNames (process, target column, dependency) so the same statement
    # twice in a script makes one entity. Row restrictions (column -> target row set) are gathered per
    # (process, target) and fanned out to the written columns afterwards.
    col_lineage: dict[tuple[str, str, str], _ColumnLineage] = {}
    restrict: dict[tuple[str, str], _Restriction] = defaultdict(_Restriction)
    for rel in e2e.relations:
        pid = rel.process_id
        if rel.type not in chain or pid is None or pid not in b.process_qn:
            continue
        src, tgt = rel.source, rel.target
        if src.dataset_id not in real or tgt.dataset_id not in real:
            continue
        if src.dataset_id in columnless or tgt.dataset_id in columnless:
            continue
        if src.column == "*" or tgt.column == "*":
            continue  # no schema known: only the table-level edge is certain
        src_real = src.column in real[src.dataset_id]
        if tgt.column in real[tgt.dataset_id]:
            dep = naming.DEPENDENCY_DIRECT if rel.type is RelationType.FDD else naming.DEPENDENCY_INDIRECT
            cl = _column_lineage(b, col_lineage, pid, tgt.dataset_id, tgt.column, dep)
            if src_real:
                in_ref = b.column_ref(src.dataset_id, src.column, REL_INPUTS)
                cl.inputs.add(in_ref)
                _note_fields(cl.paths, cl.field_paths, in_ref, src, tgt)
            else:
                cl.table_inputs.add(src.dataset_id)  # COUNT(*): the source's row set
            if rel.type is RelationType.FDR and rel.clause_type is not None:
                cl.clauses.add(rel.clause_type.value)
            if rel.transform:
                cl.expressions.add(rel.transform)
            if rel.effect is not None and dep == naming.DEPENDENCY_DIRECT:
                cl.effects.add(rel.effect)
        elif src_real and written.get((pid, tgt.dataset_id)):
            r = restrict[(pid, tgt.dataset_id)]
            in_ref = b.column_ref(src.dataset_id, src.column, REL_INPUTS)
            r.sources.add(in_ref)
            r.paths.setdefault(in_ref, set()).add(src.path)
            if rel.clause_type is not None:
                r.clauses.add(rel.clause_type.value)
            if rel.transform:
                r.expressions.add(rel.transform)
        # else row set -> row set (or nothing written): the table-level edge says it all
    for (pid, tgt_id), r in restrict.items():
        for column in written[(pid, tgt_id)]:
            cl = _column_lineage(b, col_lineage, pid, tgt_id, column, naming.DEPENDENCY_INDIRECT)
            cl.inputs |= r.sources
            cl.clauses |= r.clauses
            cl.expressions |= r.expressions
            for in_ref, seen in r.paths.items():
                cl.paths.setdefault(in_ref, set()).update(seen)
                cl.field_paths.update(f"{p} -> {column}" for p in seen if p != b.column_of_ref[in_ref])

    # Datasets: everything in a table-level edge or column lineage, or written by a process.
    used: set[str] = set()
    for edges in table_edges.values():
        for s, t in edges:
            used.update((s, t))
    for cl in col_lineage.values():
        used.add(cl.target_id)
        used |= cl.table_inputs
        used.update(b.dataset_id_of_column[ref] for ref in cl.inputs)
    used.update(d.id for d in lineage.datasets if d.process_ids and d.id in real)
    for ds in lineage.datasets:
        if ds.id in used:
            b.add_dataset(ds)
    if unused is not None:
        used_qns = set(b.dataset_type)
        for ds in lineage.datasets:
            if ds.id not in used:
                qn = b.add_dataset(ds)
                if qn is not None and qn not in used_qns:
                    unused.add(qn)
    for ent in b.entities.values():
        if ent.type_name == TYPE_COLUMN:  # its owner's type is final only now (table -> path)
            ent.refs["table"] = _Ref(b.dataset_type[ent.group], ent.group, REL_COLUMNS)
    # A dataset this lineage defines (CTAS, CREATE VIEW, DDL: its whole schema is known) lists its columns,
    # so Atlas drops the ones an edited definition no longer has. A dataset that is only read or inserted
    # into never does: reading two columns of a ten-column table must leave the other eight alone.
    defined: set[str] = set()
    for (pid, tgt_id), cols in written.items():
        target = b.by_id.get(tgt_id)
        if (
            cols
            and naming.is_defining_operation(b.procs[pid].type)
            and target is not None
            and not any(c.name == "*" for c in target.columns)
            and tgt_id in b.dataset_qn
        ):
            defined.add(b.dataset_qn[tgt_id])
    for ent in b.entities.values():
        if ent.type_name == TYPE_COLUMN and ent.group in defined:
            owner = b.entities[(b.dataset_type[ent.group], ent.group)]
            owned = owner.refs.setdefault("columns", [])
            assert isinstance(owned, list)
            owned.append(_Ref(TYPE_COLUMN, ent.qualified_name, REL_COLUMNS))

    # Processes: those with table-level edges or column lineage; one entity per qualifiedName, describing
    # every statement that shares it (their union, see statement_attributes).
    proc_entities: dict[str, _Entity] = {}
    cl_targets: dict[str, set[str]] = defaultdict(set)
    for cl in col_lineage.values():
        cl_targets[cl.process_id].add(cl.target_id)
    pids = sorted(set(table_edges) | set(cl_targets))
    members: dict[str, list[Process]] = defaultdict(list)
    for pid in pids:
        members[b.process_qn[pid]].append(b.procs[pid])
    for pid in pids:
        pairs = sorted(table_edges.get(pid, ()))
        proc_entities[pid] = b.add_process(
            b.procs[pid],
            [s for s, _ in pairs],
            [t for _, t in pairs],
            members[b.process_qn[pid]],
            sorted(cl_targets.get(pid, ())),
        )
    if sides is not None:
        for pqn, procs in members.items():
            side = sides.setdefault(pqn, _Side())
            side.pid = procs[0].id  # pids are sorted: the one add_process named the process after
            side.statements = distinct_statements(procs)

    for (pqn, out_qn, dep), cl in col_lineage.items():
        # A column is never its own source (MERGE ... ON t.id = s.id makes t.id restrict the rows written
        # into t.id): Atlas would draw a loop. What is left with no source at all is not sent.
        cl.inputs.discard(_Ref(TYPE_COLUMN, out_qn, REL_INPUTS))  # every input is a column_ref
        if not cl.inputs and not cl.table_inputs:
            continue
        qn = naming.column_lineage_qualified_name(pqn, out_qn, dep, namespace)
        inputs = sorted(cl.inputs)
        facts = _LineageFacts(
            _label_head(b.column_of_ref[cl.output], short_name(b.by_id[cl.target_id]), dep),
            [
                (short_name(b.by_id[b.dataset_id_of_column[r]]), _shown(b.column_of_ref[r], cl.paths, r))
                for r in inputs
            ],
            [(i, short_name(b.by_id[i])) for i in sorted(cl.table_inputs)],
            sorted(cl.expressions),
        )
        effect = max(cl.effects, key=lambda e: e.rank).value if cl.effects else ""
        row_sources = sorted({b.dataset_qn[i] for i in cl.table_inputs})
        attrs = _column_lineage_attributes(
            qn, dep, facts, sorted(cl.clauses), effect, row_sources, sorted(cl.field_paths)
        )
        if sides is not None:
            sides.setdefault(pqn, _Side()).lineages[qn] = facts
        refs: dict[str, list[_Ref] | _Ref] = {
            "inputs": inputs,
            "outputs": [cl.output],
            "process": _Ref(TYPE_PROCESS, pqn, REL_COLUMN_LINEAGES),
        }
        b.entities[(TYPE_COLUMN_LINEAGE, qn)] = _Entity(
            _TIER_DETAILS, pqn, TYPE_COLUMN_LINEAGE, qn, attrs, refs
        )
        owned = b.entities[(TYPE_PROCESS, pqn)].refs["columnLineages"]
        assert isinstance(owned, list)
        owned.append(_Ref(TYPE_COLUMN_LINEAGE, qn, REL_COLUMN_LINEAGES))

    if run is not None:
        for pid, proc_entity in sorted(proc_entities.items()):
            b.add_execution(proc_entity, b.procs[pid], run)
    for pid, infos in sorted((runs or {}).items()):  # each process its own runs (OpenLineage jobs)
        runs_owner = proc_entities.get(pid)
        if runs_owner is not None:
            for info in sorted(infos, key=lambda r: r.run_id):
                b.add_execution(runs_owner, b.procs[pid], info)

    return sorted(b.entities.values(), key=_Entity.sort_key)


class Statement(NamedTuple):
    """One statement as its process entity describes it (:func:`statement_attributes`). Fields in
    statement order: its file, the line where it starts (a piece of a big script counts its statements
    from 1 again, its lines are the file's), its index in the file, its process id."""

    source_file: str
    line: int
    statement_index: int
    id: str
    query_hash: str
    sql: str
    procedure: str


def statement_of(proc: Process) -> Statement:
    """What :func:`statement_attributes` needs of a statement's process."""
    return Statement(
        proc.source_file or "",
        proc.span.line if proc.span is not None else 0,
        proc.statement_index or 0,
        proc.id,
        proc.query_hash,
        proc.sql or "",
        proc.procedure or "",
    )


def distinct_statements(members: Iterable[Process | Statement]) -> list[Statement]:
    """The statements in statement order, one per text (a statement repeated is one statement: its first
    occurrence). What one conversion keeps of a part's statements is all a union of parts needs."""
    ordered = sorted(m if isinstance(m, Statement) else statement_of(m) for m in members)
    by_hash: dict[str, Statement] = {}
    for st in ordered:
        by_hash.setdefault(st.query_hash, st)
    return list(by_hash.values())


def statement_attributes(members: Iterable[Process | Statement]) -> dict[str, Any]:
    """What a process entity says about its statements, always whole (never a field left out).

    Two statements with the same operation, inputs and outputs share one process (Atlas's Hive hook does
    the same). Atlas keeps the attributes an upsert leaves out, so each field is sent, empty when unknown:
    a later upsert replaces all of it and never mixes one statement's text with another's hash. Several
    statements in one conversion make one description of their union: their texts (in statement order:
    file, line, index; one per line group) and a hash of their hashes; one statement is described as
    itself. The hook, the scan (within a file and across the files of one scan, see
    :func:`merge_process_group`) and any later reader of runs (event logs) all describe them through here.
    """
    unique = distinct_statements(members)
    first = unique[0]
    if len(unique) == 1:
        query_hash = first.query_hash
    else:
        query_hash = hashlib.sha256(",".join(sorted(s.query_hash for s in unique)).encode()).hexdigest()
    texts = [s.sql for s in unique if s.sql]
    return {
        "queryHash": query_hash,
        "queryText": ";\n".join(t.strip().rstrip(";").strip() for t in texts)
        if len(texts) > 1
        else "".join(texts),
        "sourceFile": first.source_file,
        # where the (first) statement starts, so a reader can open file:line; 0: not from a file
        "sourceLine": first.line,
        "procedureName": first.procedure,
    }


class _LineageFacts(NamedTuple):
    """What a column lineage entity's attributes are made of, beyond its records (see
    :func:`merge_process_group`): its display name's head (:func:`_label_head`), each input (in the
    order of the record's ``inputs``) as its table's short name and what of it is read, the row sources
    (model dataset id, short name), the expressions."""

    head: str
    inputs: list[tuple[str, list[str]]]
    tables: list[tuple[str, str]]
    expressions: list[str]


def _column_lineage_attributes(
    qn: str,
    dependency: str,
    facts: _LineageFacts,
    clauses: list[str],
    effect: str,
    row_sources: list[str],
    field_paths: list[str],
) -> dict[str, Any]:
    """A column lineage entity's attributes (one conversion, or the union of several parts' records)."""
    sources = [f"{short}.{shown.lower()}" for short, seen in facts.inputs for shown in seen]
    sources += [short for _, short in facts.tables]
    # Every attribute that describes the statements is sent, empty when they have none: an upsert
    # replaces the attributes it sends and keeps the others, so a field left out would stay from an
    # earlier statement of the same process (an exact copy showing another statement's upper(name)).
    attrs: dict[str, Any] = {
        "qualifiedName": qn,
        "name": _column_lineage_label(facts.head, dependency, clauses, sources),
        "dependencyType": dependency,
        "expression": "\n".join(facts.expressions),
    }
    if field_paths:  # only with nested data: other payloads (and older typedefs) stay as they were
        attrs["fieldPaths"] = field_paths
    if dependency == naming.DEPENDENCY_DIRECT:
        attrs["effect"] = effect
    else:
        attrs["clauses"] = clauses
        # a property, not an input: the table's Lineage tab shows processes only
        attrs["rowSources"] = row_sources
    return attrs


@dataclass
class _Side:
    """What a part's conversion knows of one process group beyond its records: enough for the union of
    the group's records from several parts (:func:`merge_process_group`). Never delivered."""

    pid: str = ""
    """The smallest process id among its statements: that statement names the process."""
    statements: list[Statement] = field(default_factory=list)
    lineages: dict[str, _LineageFacts] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)
    """Executions whose ``queryText`` is the process's (not their run's own text)."""


def _encode_side(side: _Side) -> dict[str, Any]:
    """JSON of a side, small (it travels with every process group): one statement as its index and id
    (the rest is its process's attributes); each column lineage, in qualifiedName order (as its records
    come), as the length of its name's head, its inputs as indexes into the side's distinct ``sources``,
    then its row sources and expressions when it has any (expressions only when one holds a line break:
    else the ``expression`` attribute, split, gives them)."""
    out: dict[str, Any] = {"pid": side.pid}
    if len(side.statements) == 1:
        out["statements"] = [side.statements[0].statement_index, side.statements[0].id]
    else:
        out["statements"] = [list(st) for st in side.statements]
    sources: dict[tuple[str, tuple[str, ...]], int] = {}
    lineages: list[list[Any]] = []
    for _, f in sorted(side.lineages.items()):
        row = [len(f.head), [sources.setdefault((s, tuple(v)), len(sources)) for s, v in f.inputs]]
        expressions = f.expressions if any("\n" in e for e in f.expressions) else None
        if f.tables or expressions is not None:
            row.append([list(t) for t in f.tables])
        if expressions is not None:
            row.append(expressions)
        lineages.append(row)
    if lineages:
        out["lineages"] = lineages
        out["sources"] = [[s, list(v)] for s, v in sources]
    if side.runs:
        out["runs"] = side.runs
    return out


def _decode_statements(raw: list[Any], owner: Mapping[str, Any]) -> list[Statement]:
    if raw and not isinstance(raw[0], list):
        a = owner["attributes"]
        index, pid = raw
        sql = a["queryText"]
        return [
            Statement(a["sourceFile"], a["sourceLine"], index, pid, a["queryHash"], sql, a["procedureName"])
        ]
    return [Statement(*st) for st in raw]


def _decode_facts(side: Mapping[str, Any], records: list[Mapping[str, Any]]) -> list[_LineageFacts]:
    """The facts of each column lineage record (``records``, in qualifiedName order) from its side."""
    sources = side.get("sources", [])
    out: list[_LineageFacts] = []
    for rec, raw in zip(records, side.get("lineages", []), strict=True):
        attrs = rec["attributes"]
        tables = raw[2] if len(raw) > 2 else []
        if len(raw) > 3:
            expressions = list(raw[3])
        else:
            text = attrs["expression"]
            expressions = text.split("\n") if text else []
        inputs = [(sources[k][0], list(sources[k][1])) for k in raw[1]]
        out.append(_LineageFacts(attrs["name"][: raw[0]], inputs, [(i, t) for i, t in tables], expressions))
    return out


def _is_list_ref(value: Any) -> bool:
    return not (value and isinstance(value[0], str))


def merge_process_group(
    occurrences: Sequence[tuple[Sequence[Mapping[str, Any]], Mapping[str, Any]]],
) -> list[dict[str, Any]]:
    """One process group's records as one conversion of all its statements makes them, from the records
    and side (``to_entity_records``'s ``sides``) of each part that holds some of them (scripts of one
    scan): the process's inputs, outputs and column lineage are the union, its statement attributes
    describe every statement (:func:`statement_attributes`), a column lineage in several parts is one
    entity whose sources, expressions, clauses and effect are the union (as within one conversion); each
    execution is kept once. Pure; the result does not depend on the order of ``occurrences``.
    """
    parts: list[
        tuple[str, list[Statement], Sequence[Mapping[str, Any]], Mapping[str, Any], Mapping[str, Any]]
    ] = []
    for records, side in occurrences:
        owner = next(
            (r for r in records if r["typeName"] == TYPE_PROCESS and r["qualifiedName"] == r["group"]), None
        )
        if owner is None:
            msg = f"no process among the records of group {records[0]['group'] if records else '?'!r}"
            raise ValueError(msg)
        parts.append((side["pid"], _decode_statements(side["statements"], owner), records, side, owner))
    # The statement with the smallest process id names the process, as in one conversion.
    parts.sort(key=lambda p: (p[0], p[1]))
    base = parts[0][4]
    statements = [st for p in parts for st in p[1]]
    attrs = dict(base["attributes"])
    attrs.update(statement_attributes(statements))
    # Reference arrays: the first part's as it is (rendering sorts them and drops repeats), then what the
    # others add, sorted: a group that recurs unchanged (a script copied) is its first occurrence again.
    refs: dict[str, Any] = {k: list(v) if _is_list_ref(v) else v for k, v in base["refs"].items()}
    added: dict[str, set[tuple[str, ...]]] = {}
    for _, _, _, _, owner in parts[1:]:
        for name, value in owner["refs"].items():
            if name not in refs:
                refs[name] = list(value) if _is_list_ref(value) else value
            elif _is_list_ref(value):
                added.setdefault(name, set()).update(map(tuple, value))
    for name, more in added.items():
        have = set(map(tuple, refs[name]))
        refs[name].extend(list(r) for r in sorted(more - have))
    owner_out = {**base, "attributes": attrs, "refs": refs}
    out: dict[tuple[str, str], dict[str, Any]] = {
        (owner_out["typeName"], owner_out["qualifiedName"]): owner_out
    }
    lineages: dict[str, list[tuple[Mapping[str, Any], _LineageFacts]]] = {}
    for _, _, records, side, owner in parts:
        text_runs = set(side.get("runs", ()))
        mine = sorted(
            (r for r in records if r["typeName"] == TYPE_COLUMN_LINEAGE), key=lambda r: r["qualifiedName"]
        )
        try:
            facts = _decode_facts(side, mine)
        except ValueError as e:  # zip(strict=True): one a column lineage, one a fact
            msg = f"process {owner['qualifiedName']!r}: its side does not match its column lineage"
            raise ValueError(msg) from e
        for rec, f in zip(mine, facts, strict=True):
            lineages.setdefault(rec["qualifiedName"], []).append((rec, f))
        for rec in records:
            if rec is owner or rec["typeName"] == TYPE_COLUMN_LINEAGE:
                continue
            qn = rec["qualifiedName"]
            key = (rec["typeName"], qn)
            if key in out:
                continue  # an execution of the same run, met in an earlier part: one entity
            copy = {**rec, "attributes": dict(rec["attributes"])}
            if rec["typeName"] == TYPE_PROCESS_EXECUTION:
                ea = copy["attributes"]
                ea["name"] = f"{attrs['name']} (run {ea['runId']})"
                if qn in text_runs:  # the text of the process: all its statements now
                    if attrs["queryText"]:
                        ea["queryText"] = attrs["queryText"]
                    else:
                        ea.pop("queryText", None)
            out[key] = copy
    for qn, found in lineages.items():
        rec = found[0][0] if len(found) == 1 else _merge_column_lineage(found)
        out[(rec["typeName"], qn)] = dict(rec)
    return sorted(out.values(), key=record_sort_key)


def _merge_column_lineage(found: list[tuple[Mapping[str, Any], _LineageFacts]]) -> dict[str, Any]:
    """One column lineage entity from several parts' (the union, as :func:`_build` gathers it)."""
    first, facts = found[0]
    inputs: dict[tuple[str, ...], tuple[str, set[str]]] = {}
    tables: dict[str, str] = {}
    expressions: set[str] = set()
    clauses: set[str] = set()
    row_sources: set[str] = set()
    field_paths: set[str] = set()
    effects: set[str] = set()
    for rec, f in found:
        for ref, (short, seen) in zip(rec["refs"]["inputs"], f.inputs, strict=True):
            inputs.setdefault(tuple(ref), (short, set()))[1].update(seen)
        tables.update((i, t) for i, t in f.tables if i not in tables)
        expressions.update(f.expressions)
        a = rec["attributes"]
        clauses.update(a.get("clauses", ()))
        row_sources.update(a.get("rowSources", ()))
        field_paths.update(a.get("fieldPaths", ()))
        if a.get("effect"):
            effects.add(a["effect"])
    keys = sorted(inputs)
    merged = _LineageFacts(
        facts.head,
        [(inputs[k][0], sorted(inputs[k][1])) for k in keys],
        sorted(tables.items()),
        sorted(expressions),
    )
    attrs = first["attributes"]
    effect = max((Effect(e) for e in effects), key=lambda e: e.rank).value if effects else ""
    return {
        **first,
        "attributes": _column_lineage_attributes(
            attrs["qualifiedName"],
            attrs["dependencyType"],
            merged,
            sorted(clauses),
            effect,
            sorted(row_sources),
            sorted(field_paths),
        ),
        "refs": {**first["refs"], "inputs": [list(k) for k in keys]},
    }


class SharedProcesses:
    """The statements of one run that share a process, for a caller that converts statement by statement
    (the Spark hook; a reader of event logs): :meth:`add` gives the lineage to convert, the statement's own
    merged with the earlier statements of the run that share its process, so the process is sent as their
    union (a lone statement would replace the earlier ones' column lineage). A statement that defines its
    output (CTAS, CREATE VIEW) replaces it, so it is sent alone. Bounded: at most ``members`` statements
    per process (then it starts again from the newest) and ``processes`` processes (the oldest forgotten).
    """

    def __init__(self, namespace: str, *, members: int = 16, processes: int = 256) -> None:
        self.namespace = namespace
        self.members = members
        self.processes = processes
        self._by_qn: dict[str, Lineage] = {}

    def add(self, lineage: Lineage) -> Lineage:
        from atlas_bridge.model import merge_lineage

        e2e = end_to_end(lineage)
        qns = _process_qualified_names(lineage, e2e, self.namespace)
        merged = lineage
        for proc in lineage.processes:
            if naming.is_defining_operation(proc.type):
                continue
            earlier = self._by_qn.get(qns[proc.id])
            if earlier is not None and len(earlier.processes) < self.members:
                merged = merge_lineage([earlier, merged])
        for proc in lineage.processes:
            qn = qns[proc.id]
            self._by_qn.pop(qn, None)
            self._by_qn[qn] = merged  # newest last
        while len(self._by_qn) > self.processes:
            del self._by_qn[next(iter(self._by_qn))]
        return merged


def _render_ref(ref: _Ref, guids: dict[tuple[str, str], str]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "typeName": ref.type_name,
        "uniqueAttributes": {"qualifiedName": ref.qualified_name},
        "relationshipType": ref.relationship_type,
    }
    guid = guids.get((ref.type_name, ref.qualified_name))
    if guid is not None:
        out["guid"] = guid
    return out


def _render(entity: _Entity, guid: str, local: dict[tuple[str, str], str]) -> dict[str, Any]:
    rel_attrs: dict[str, Any] = {}
    for name, value in sorted(entity.refs.items()):
        if isinstance(value, list):
            unique = sorted(set(value))
            rel_attrs[name] = [_render_ref(r, local) for r in unique]
        else:
            rel_attrs[name] = _render_ref(value, local)
    body: dict[str, Any] = {
        "typeName": entity.type_name,
        "guid": guid,
        "attributes": dict(sorted(entity.attributes.items())),
    }
    if rel_attrs:
        body["relationshipAttributes"] = rel_attrs
    return body


def _guids(entities: list[_Entity]) -> dict[tuple[str, str], str]:
    return {e.key: f"-{i}" for i, e in enumerate(entities, start=1)}


def to_atlas_entities(
    lineage: Lineage,
    *,
    namespace: str,
    run: RunInfo | None = None,
    include_resultsets: bool = False,
    runs: Mapping[str, Sequence[RunInfo]] | None = None,
) -> list[dict[str, Any]]:
    """All Atlas entities for a lineage, in one list whose references use placeholder guids.

    Args:
        lineage: the lineage to send.
        namespace: Atlas's metadata namespace (``atlas.metadata.namespace``), the ``@`` part of names.
        run: when given, one process execution per process records this run.
        include_resultsets: also send what statements return without writing it anywhere (a top-level
            SELECT's result) as ``atlas_bridge_resultset`` entities, so queries that only read show too.
        runs: runs of single processes (process id -> its runs, as OpenLineage gives them), each recorded
            as a process execution of that process alone.

    Returns:
        ``AtlasEntity`` dicts, sorted (datasets and columns, processes, then column lineage and executions),
        with guids ``-1``, ``-2``... in that order.

    >>> from atlas_bridge.model import Column, ColumnRef, Dataset, DatasetKind as K, Process, Relation
    >>> a = Dataset(id="table:s.a", kind=K.TABLE, name="a", db="s", columns=[Column(name="x")])
    >>> b = Dataset(id="table:s.b", kind=K.TABLE, name="b", db="s", columns=[Column(name="x")])
    >>> p = Process(id="process:1", type="insert", name="Insert into s.b", query_hash="ab" * 32)
    >>> r = Relation(type="fdd", source=ColumnRef(dataset_id=a.id, column="x"),
    ...              target=ColumnRef(dataset_id=b.id, column="x"), process_id=p.id)
    >>> ents = to_atlas_entities(Lineage(datasets=[a, b], processes=[p], relations=[r]), namespace="cl1")
    >>> [(e["guid"], e["typeName"], e["attributes"]["qualifiedName"]) for e in ents]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('-1', 'atlas_bridge_table', 's.a@cl1'), ('-2', 'atlas_bridge_column', 's.a.x@cl1'),
     ('-3', 'atlas_bridge_table', 's.b@cl1'), ('-4', 'atlas_bridge_column', 's.b.x@cl1'),
     ('-5', 'atlas_bridge_process', 'INSERT:s.a@cl1->s.b@cl1'),
     ('-6', 'atlas_bridge_column_lineage', 'INSERT:s.a@cl1->s.b@cl1:s.b.x:direct')]
    >>> ents[4]["relationshipAttributes"]["inputs"]  # doctest: +NORMALIZE_WHITESPACE
    [{'typeName': 'atlas_bridge_table', 'uniqueAttributes': {'qualifiedName': 's.a@cl1'},
      'relationshipType': 'dataset_process_inputs', 'guid': '-1'}]
    """
    entities = _build(lineage, namespace, run, include_resultsets, runs=runs)
    guids = _guids(entities)
    return [_render(e, guids[e.key], guids) for e in entities]


def _groups(entities: Iterable[_Entity]) -> Iterator[list[_Entity]]:
    """Runs of entities of one owner (a dataset and its columns, a process and what it owns)."""
    run: list[_Entity] = []
    for e in entities:
        if run and (e.tier, e.group) != (run[0].tier, run[0].group):
            yield run
            run = []
        run.append(e)
    if run:
        yield run


def _cut(
    entities: Iterable[_Entity],
    max_entities: int,
    size: Callable[[_Entity], int] | None = None,
    max_bytes: int | None = None,
) -> Iterator[list[_Entity]]:
    """Bodies of at most ``max_entities`` (and about ``max_bytes``), an owner's group never split when it fits
    one body. A group too big for one body sends its owner first without its child arrays (the children do
    not exist yet) and once more after the last child with them, so every body stands alone."""
    chunk: list[_Entity] = []
    used = 0

    def fits(count: int, nbytes: int) -> bool:
        return len(chunk) + count <= max_entities and (max_bytes is None or used + nbytes <= max_bytes)

    for group in _groups(entities):
        sizes = [size(e) for e in group] if size is not None else [0] * len(group)
        if not fits(len(group), sum(sizes)) and chunk:
            yield chunk
            chunk, used = [], 0
        if fits(len(group), sum(sizes)):
            chunk.extend(group)
            used += sum(sizes)
            continue
        owner = group[0]
        seq = list(zip(group, sizes, strict=True))
        if owner.qualified_name == owner.group and any(k in owner.refs for k in _CHILD_ARRAYS):
            refs = {k: v for k, v in owner.refs.items() if k not in _CHILD_ARRAYS}
            first = _Entity(
                owner.tier,
                owner.group,
                owner.type_name,
                owner.qualified_name,
                owner.attributes,
                refs,
                owner.nbytes,
            )
            seq = [(first, size(first) if size is not None else 0), *seq[1:], seq[0]]
        for e, n in seq:
            if chunk and not fits(1, n):
                yield chunk
                chunk, used = [], 0
            if max_bytes is not None and n > max_bytes:
                logger.warning(
                    "entity %s alone is %d bytes, over max_bytes=%d", e.qualified_name, n, max_bytes
                )
            chunk.append(e)
            used += n
    if chunk:
        yield chunk


def _chunks(
    entities: list[_Entity], guids: dict[tuple[str, str], str], max_entities: int, max_bytes: int | None
) -> list[list[_Entity]]:
    if max_bytes is None:
        return list(_cut(entities, max_entities))

    def size(e: _Entity) -> int:
        # Rendered with every reference carrying its guid: an upper bound of the size in any chunk.
        return len(json.dumps(_render(e, guids[e.key], guids), sort_keys=True)) + 2

    return list(_cut(entities, max_entities, size, max_bytes))


def to_atlas_batches(
    lineage: Lineage,
    *,
    namespace: str,
    run: RunInfo | None = None,
    max_entities: int = 500,
    include_resultsets: bool = False,
    max_bytes: int | None = None,
    runs: Mapping[str, Sequence[RunInfo]] | None = None,
) -> list[dict[str, Any]]:
    """The same entities as :func:`to_atlas_entities`, cut into bulk bodies that each stand alone.

    Batches must be sent in order: a reference to an entity of an earlier batch is by unique attributes
    (it is in the store by then); one within the batch also carries the placeholder guid. No batch ever
    names a placeholder it does not define. Small lineage is one batch, so one HTTP request.

    Args:
        max_entities: at most this many entities per body (Atlas writes a body in one transaction).
        max_bytes: when set, also keep each body's entities under about this many bytes of JSON (an
            entity bigger than that travels alone).

    Returns:
        ``AtlasEntitiesWithExtInfo`` bodies: ``{"entities": [...], "referredEntities": {}}``.
    """
    if max_entities < 1:
        msg = f"max_entities must be at least 1, not {max_entities}"
        raise ValueError(msg)
    entities = _build(lineage, namespace, run, include_resultsets, runs=runs)
    guids = _guids(entities)
    batches: list[dict[str, Any]] = []
    for chunk in _chunks(entities, guids, max_entities, max_bytes):
        local = {e.key: guids[e.key] for e in chunk}
        batches.append({"entities": [_render(e, guids[e.key], local) for e in chunk], "referredEntities": {}})
    logger.debug("%d entities in %d batches", len(entities), len(batches))
    return batches


# --------------------------------------------------------------------------------------------------------
# Conversion by parts: each part of a big lineage (a script, a query-log chunk) converted on its own, the
# parts' datasets merged, their processes passed through. What a process tier says depends only on its own
# statement plus the qualifiedNames of the datasets it touches; only datasets and their columns (union of
# what every part saw, the most specific type) need the whole picture.

_DATASET_TYPES = frozenset(_TYPE_RANK)


def _encode_refs(refs: dict[str, list[_Ref] | _Ref]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in refs.items():
        if isinstance(value, list):
            out[name] = [[r.type_name, r.qualified_name, r.relationship_type] for r in value]
        else:
            out[name] = [value.type_name, value.qualified_name, value.relationship_type]
    return out


def _record(entity: _Entity) -> dict[str, Any]:
    return {
        "tier": entity.tier,
        "group": entity.group,
        "typeName": entity.type_name,
        "qualifiedName": entity.qualified_name,
        "attributes": entity.attributes,
        "refs": _encode_refs(entity.refs),
    }


def to_entity_records(
    lineage: Lineage,
    *,
    namespace: str,
    run: RunInfo | None = None,
    include_resultsets: bool = False,
    runs: Mapping[str, Sequence[RunInfo]] | None = None,
) -> dict[str, Any]:
    """One part's entities as JSON-ready records, split into what needs a global merge and what does not.

    Returns:
        ``{"datasets": [...], "processes": [...], "unused": [...], "sides": {...}}``: ``datasets`` are
        the dataset and column records (every permanent dataset of the part, used or not, so columns
        seen only here join the union); ``unused`` names the dataset qualifiedNames the part itself does
        not use (send them only if another part does); ``processes`` are the processes, column lineage
        and executions, complete for the part's statements (``runs``: a process id's own run, see
        :func:`_build`); ``sides``, by process qualifiedName, what :func:`merge_process_group` needs to
        make the union of a process group several parts hold (never delivered). Records are sorted as
        :func:`to_atlas_entities` sorts entities. Fold datasets with :func:`merge_entity_record`
        and render with :func:`batches_from_records`.
    """
    unused: set[str] = set()
    sides: dict[str, _Side] = {}
    entities = _build(lineage, namespace, run, include_resultsets, unused=unused, runs=runs, sides=sides)
    return {
        "datasets": [_record(e) for e in entities if e.tier == _TIER_DATASETS],
        "processes": [_record(e) for e in entities if e.tier != _TIER_DATASETS],
        "unused": sorted(unused),
        "sides": {qn: _encode_side(side) for qn, side in sorted(sides.items())},
    }


def record_key(record: dict[str, Any]) -> tuple[bool, str]:
    """Identity of a dataset-tier record: a column and a dataset may share a qualifiedName string."""
    return (record["typeName"] == TYPE_COLUMN, record["qualifiedName"])


def record_sort_key(record: dict[str, Any]) -> tuple[int, str, int, str, str]:
    """The order :func:`to_atlas_entities` gives entities (tier, owner, owner first, type, name)."""
    qn = record["qualifiedName"]
    own = 0 if qn == record["group"] else 1
    return (record["tier"], record["group"], own, record["typeName"], qn)


def merge_entity_record(old: dict[str, Any], new: dict[str, Any]) -> None:
    """Fold a later part's record of the same entity into ``old``, as one conversion of the whole would:
    the more specific dataset type wins, attributes first seen are kept and missing ones filled in."""
    old_type, new_type = old["typeName"], new["typeName"]
    if old_type in _TYPE_RANK and new_type in _TYPE_RANK and _TYPE_RANK[new_type] < _TYPE_RANK[old_type]:
        old["typeName"] = new_type
    attrs = old["attributes"]
    for k, v in new["attributes"].items():
        attrs.setdefault(k, v)


def _decode_ref(raw: list[str], dataset_types: Mapping[str, str]) -> _Ref:
    type_name, qn, rel = raw
    if type_name in _DATASET_TYPES:
        type_name = dataset_types.get(qn, type_name)  # the type only the merge knows (table -> view)
    return _Ref(type_name, qn, rel)


_NO_REF = _Ref("", "", "")


def _entity_of(record: dict[str, Any], dataset_types: Mapping[str, str], *, decode: bool = True) -> _Entity:
    """The entity of a record; ``decode=False`` leaves its references empty (enough to cut, not to render).

    A record with ``nbytes`` (the length of its JSON text) gets a size bound without being serialised.
    """
    refs: dict[str, list[_Ref] | _Ref] = {}
    count = 0
    for name, value in record["refs"].items():
        if value and isinstance(value[0], str):
            refs[name] = _decode_ref(value, dataset_types) if decode else _NO_REF
            count += 1
        else:
            refs[name] = [_decode_ref(r, dataset_types) for r in value] if decode else []
            count += len(value)
    text = record.get("nbytes")
    return _Entity(
        record["tier"],
        record["group"],
        record["typeName"],
        record["qualifiedName"],
        record["attributes"],
        refs,
        text + _ENTITY_BYTES + _REF_BYTES * count if isinstance(text, int) else None,
    )


def count_batches(
    records: Iterable[dict[str, Any]],
    *,
    dataset_types: Mapping[str, str],
    max_entities: int = DEFAULT_MAX_ENTITIES,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
) -> int:
    """How many bodies :func:`batches_from_records` cuts from these records (nothing rendered)."""
    size = _stream_size if max_bytes is not None else None
    entities = (_entity_of(r, dataset_types, decode=False) for r in records)
    return sum(1 for _ in _cut(entities, max_entities, size, max_bytes))


def _stream_size(e: _Entity) -> int:
    """About the bytes of an entity's JSON in a body, without rendering it (every reference counted with
    a placeholder guid and its keys: an upper bound for ASCII names)."""
    if e.nbytes is not None:
        return e.nbytes
    size = _ENTITY_BYTES + len(e.type_name) + len(json.dumps(e.attributes, separators=(",", ":")))
    for name, value in e.refs.items():
        size += len(name) + 6
        for r in value if isinstance(value, list) else (value,):
            size += _REF_BYTES + len(r.type_name) + len(r.qualified_name) + len(r.relationship_type)
    return size


_ENTITY_BYTES = 96
"""``{"typeName":"","guid":"-1234567890","attributes":,"relationshipAttributes":{}}`` and a comma."""
_REF_BYTES = 96
"""``{"typeName":"","uniqueAttributes":{"qualifiedName":""},"relationshipType":"","guid":"-1234567890"}``
and a comma."""


def batches_from_records(
    records: Iterable[dict[str, Any]],
    *,
    dataset_types: Mapping[str, str],
    max_entities: int = DEFAULT_MAX_ENTITIES,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
) -> Iterator[dict[str, Any]]:
    """Bulk bodies from records already in tier order, cut as :func:`to_atlas_batches` cuts them.

    A generator: one body is held at a time. References to datasets take their merged type from
    ``dataset_types`` (qualifiedName -> typeName). Placeholder guids run ``-1``, ``-2``... over the stream
    and a reference carries one only within its own body, so every body stands alone when sent in order.
    """
    if max_entities < 1:
        msg = f"max_entities must be at least 1, not {max_entities}"
        raise ValueError(msg)
    counter = 0
    size = _stream_size if max_bytes is not None else None
    for chunk in _cut((_entity_of(r, dataset_types) for r in records), max_entities, size, max_bytes):
        local: dict[tuple[str, str], str] = {}
        for e in chunk:
            counter += 1
            local.setdefault(e.key, f"-{counter}")
        yield {"entities": [_render(e, local[e.key], local) for e in chunk], "referredEntities": {}}
