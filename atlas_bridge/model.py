"""The lineage model every part of atlas-bridge speaks (Gudu SQLFlow's model, v1 and v2 views).

Objects (``Dataset``) are tables, views, resultsets, paths, stages, variables and the orphan-column pseudo
table; each holds its ``Column`` s, including the system-made ``PseudoRows`` column that stands for the row
set. ``Relation`` s are atomic column-to-column edges: ``fdd`` (direct data flow), ``fdr`` (indirect: WHERE,
JOIN, GROUP BY, HAVING, window...), ``join``, ``call`` and ``er``. Every edge also carries its v2 reading
(``flow`` = data_flow / restricts / groups / calls, ``transform`` code and copy ``effect``).

The model is frozen and canonical: :class:`Lineage` sorts and de-duplicates what it holds, so the same
input always serialises to the same bytes. Identity is by ``Dataset.id``; build ids with :func:`dataset_id`
so the SQL, Spark and SQLFlow extractors name the same table the same way.
"""

from __future__ import annotations

import enum
import gc
import hashlib
import re
from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

PSEUDO_ROWS = "PseudoRows"
"""Name of the system-made column that stands for a dataset's row set."""

ORPHAN_TABLE = "pseudo_table_include_orphan_column"
"""Name of the pseudo table that holds columns no table could be found for (without a schema)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)


_M = TypeVar("_M", bound=BaseModel)


_FIELDS: dict[type[BaseModel], tuple[dict[str, Any], frozenset[str]]] = {}


def construct_trusted(cls: type[_M], **values: Any) -> _M:
    """An instance of a frozen model from already-canonical values, without validation.

    Only for values taken from validated models or built in canonical form by our own code (the SQL
    builder, the end-to-end collapse). What ``model_construct`` does (fields in declaration order, defaults
    filled), a little cheaper; it matters because a TPC-DS query makes hundreds of relations. Defaults
    here are immutable (None, (), False), so sharing them is safe.
    """
    known = _FIELDS.get(cls)
    if known is None:
        defaults = {name: f.default for name, f in cls.model_fields.items()}
        known = _FIELDS[cls] = (defaults, frozenset(defaults))
    if not known[1].issuperset(values):
        msg = f"{cls.__name__} has no field(s) {sorted(set(values) - known[1])}"
        raise TypeError(msg)
    data = dict(known[0])
    data.update(values)
    obj = cls.__new__(cls)
    object.__setattr__(obj, "__dict__", data)
    object.__setattr__(obj, "__pydantic_fields_set__", set(data))
    object.__setattr__(obj, "__pydantic_extra__", None)
    object.__setattr__(obj, "__pydantic_private__", None)
    return obj


def construct_complete(cls: type[_M], data: dict[str, Any]) -> _M:
    """:func:`construct_trusted` for hot paths that pass every field of ``cls``, in declaration order.

    Nothing is checked, not even the field names: only for our own builders, whose output
    ``tests/test_sql_extract.py`` and ``tests/test_sql_tpc.py`` compare with the validated construction.
    The slots are set through their descriptors, and every instance of a class shares one fields-set (all
    fields are set): pydantic adds to that set only on assignment, which frozen models refuse, and copies
    it in ``model_copy``.
    """
    obj = _new(cls)
    _set_dict(obj, data)
    fields = _ALL_SET.get(cls)
    if fields is None:
        fields = _ALL_SET[cls] = set(cls.model_fields)
    _set_fields(obj, fields)
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


def construct_all(cls: type[_M], data: Iterable[dict[str, Any]]) -> list[_M]:
    """:func:`construct_complete` of each dict in ``data``: one call for many instances of a class (a
    statement's relations, a dataset's columns), not one per instance."""
    fields = _ALL_SET.get(cls)
    if fields is None:
        fields = _ALL_SET[cls] = set(cls.model_fields)
    new, set_dict, set_fields, set_extra, set_private = _new, _set_dict, _set_fields, _set_extra, _set_private
    out: list[_M] = []
    for values in data:
        obj = new(cls)
        set_dict(obj, values)
        set_fields(obj, fields)
        set_extra(obj, None)
        set_private(obj, None)
        out.append(obj)
    return out


class PausedGC:
    """Python's cyclic collector paused for one extraction or collapse, its previous state restored on exit.

    sqlglot's trees are cyclic (parent pointers), and a collection pass while a statement is analysed walks
    every object still alive - the tree, the builders - only to find them reachable, again and again as
    they age (about a tenth of our own time on TPC-DS). Objects that refcounting frees go at once as
    before; only cyclic garbage waits: :meth:`tidy` (between statements) collects the youngest generation
    once it holds more than :data:`GC_TIDY_OBJECTS`, so a long script's dead trees do not pile up. Left
    alone when the caller had paused the collector itself.

    >>> import gc
    >>> with PausedGC():
    ...     gc.isenabled()
    False
    >>> from atlas_bridge import extract_sql_lineage
    >>> _ = extract_sql_lineage("insert into t select a from s; select b from u"); gc.isenabled()
    True
    >>> gc.disable(); _ = extract_sql_lineage("select a from s"); gc.isenabled()
    False
    >>> gc.enable()
    """

    __slots__ = ("_was_enabled",)

    def __enter__(self) -> PausedGC:
        self._was_enabled = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._was_enabled:
            gc.enable()

    def tidy(self) -> None:
        """Between statements: collect the youngest generation if it has grown past the bound."""
        if self._was_enabled and gc.get_count()[0] > GC_TIDY_OBJECTS:
            gc.collect(0)


GC_TIDY_OBJECTS = 20_000
"""Net new container objects (gc's generation-0 count) after which :meth:`PausedGC.tidy` collects: about
twenty TPC-DS statements' trees, a few MB of garbage at most."""


_new = object.__new__
_ALL_SET: dict[type[BaseModel], set[str]] = {}
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


class DatasetKind(str, enum.Enum):
    """What an object in the lineage is. Permanent kinds become Atlas entities of their own."""

    TABLE = "table"
    VIEW = "view"
    RESULTSET = "resultset"
    PATH = "path"
    STAGE = "stage"
    STREAM = "stream"
    VARIABLE = "variable"
    PSEUDO_TABLE = "pseudoTable"
    CONSTANT_TABLE = "constantTable"

    @property
    def is_permanent(self) -> bool:
        """Whether objects of this kind outlive the statement (and so sit in table-level lineage)."""
        return self in _PERMANENT_KINDS


_PERMANENT_KINDS = frozenset(
    {DatasetKind.TABLE, DatasetKind.VIEW, DatasetKind.PATH, DatasetKind.STAGE, DatasetKind.STREAM}
)


class RelationType(str, enum.Enum):
    """v1 relation types as SQLFlow writes them."""

    FDD = "fdd"
    FDR = "fdr"
    JOIN = "join"
    CALL = "call"
    ER = "er"


class ClauseType(str, enum.Enum):
    """Where in the statement an indirect (``fdr``) source was found."""

    WHERE = "where"
    JOIN = "join"
    GROUP_BY = "group by"
    HAVING = "having"
    WINDOW = "window"
    ORDER_BY = "order by"
    CONDITION = "condition"
    """A CASE/IF/FILTER condition or MERGE ON: decides which value or branch, copies nothing."""
    INSERT_VALUES = "insertValues"
    SELECT = "select"
    """Row-count flow through a FROM-clause subquery/CTE, or COUNT(*) fed by the table's PseudoRows."""


class FlowKind(str, enum.Enum):
    """v2 relationship kinds."""

    DATA_FLOW = "data_flow"
    RESTRICTS = "restricts"
    GROUPS = "groups"
    CALLS = "calls"


class Effect(str, enum.Enum):
    """v2 strength of a data flow."""

    EXACT_COPY = "EXACT_COPY"
    MODIFIED_COPY = "MODIFIED_COPY"
    AGGREGATION = "AGGREGATION"
    PARTIAL_COPY = "PARTIAL_COPY"
    AMBIGUOUS = "AMBIGUOUS"

    @property
    def rank(self) -> int:
        """Strength order: a chain or merge of flows is as strong as its strongest effect."""
        return _EFFECT_ORDER.index(self)


_EFFECT_ORDER = (
    Effect.EXACT_COPY,
    Effect.PARTIAL_COPY,
    Effect.MODIFIED_COPY,
    Effect.AGGREGATION,
    Effect.AMBIGUOUS,
)


class Span(_Frozen):
    """A 1-based, inclusive-start / exclusive-end range in the input text."""

    line: int = Field(ge=1)
    column: int = Field(ge=1)
    end_line: int = Field(ge=1)
    end_column: int = Field(ge=1)

    def __str__(self) -> str:
        return f"{self.line}:{self.column}-{self.end_line}:{self.end_column}"


class Column(_Frozen):
    """A column of a dataset. ``system`` marks tool-made columns such as PseudoRows."""

    name: str
    system: bool = False
    data_type: str | None = None
    expression: str | None = None
    """For resultset columns: the SQL text that computes the column."""
    spans: tuple[Span, ...] = ()
    position: int | None = None
    """The column's place in its table (0 first, as Hive numbers them), where the table's whole column
    list is known in its own order (its DDL, its defining query, a given schema); None otherwise."""


class Dataset(_Frozen):
    """A table, view, resultset, path, stage, stream, variable or pseudo table.

    ``name`` is the object's own name (unquoted, case kept); ``db`` and ``catalog`` qualify it the way
    sqlglot does (``catalog.db.name``). Paths and stages keep their location in ``uri``. ``sub_type``
    holds SQLFlow's resultset type (``select_list``, ``insert-select``...), a table's ``function`` subType,
    or a variable's ``scalar`` / ``cursor`` / ``record``.
    """

    id: str
    kind: DatasetKind
    name: str
    db: str | None = None
    catalog: str | None = None
    sub_type: str | None = None
    uri: str | None = None
    alias: str | None = None
    file_format: str | None = None
    columns: tuple[Column, ...] = ()
    process_ids: tuple[str, ...] = ()
    """Processes that write into this object (SQLFlow ``processIds``)."""
    spans: tuple[Span, ...] = ()

    @model_validator(mode="after")
    def _canonical(self) -> Dataset:
        by_name: dict[str, Column] = {}
        for col in self.columns:
            by_name.setdefault(col.name, col)
        cols = tuple(sorted(by_name.values(), key=lambda c: (c.system, c.name.lower(), c.name)))
        object.__setattr__(self, "columns", cols)
        object.__setattr__(self, "process_ids", tuple(sorted(set(self.process_ids))))
        object.__setattr__(self, "spans", _sorted_spans(self.spans))
        return self

    @property
    def qualified_name(self) -> str:
        """``catalog.db.name`` with the parts that are known (paths: their uri)."""
        if self.kind in (DatasetKind.PATH,) and self.uri:
            return self.uri
        return ".".join(p for p in (self.catalog, self.db, self.name) if p)

    def column(self, name: str) -> Column | None:
        """The column called ``name`` (exact match first, then case-insensitive)."""
        for col in self.columns:
            if col.name == name:
                return col
        low = name.lower()
        for col in self.columns:
            if col.name.lower() == low:
                return col
        return None


class ColumnRef(_Frozen):
    """One end of a relation: a column of a dataset, by the dataset's id."""

    dataset_id: str
    column: str

    def __str__(self) -> str:
        return f"{self.dataset_id}.{self.column}"


_DEFAULT_FLOW = {
    RelationType.FDD: FlowKind.DATA_FLOW,
    RelationType.FDR: FlowKind.RESTRICTS,
    RelationType.JOIN: FlowKind.RESTRICTS,
    RelationType.CALL: FlowKind.CALLS,
    RelationType.ER: FlowKind.DATA_FLOW,
}


def default_flow(type_: RelationType, clause: ClauseType | None) -> FlowKind:
    """The v2 kind a v1 edge reads as: GROUP BY -> groups, other fdr -> restricts, fdd -> data_flow."""
    if type_ is RelationType.FDR and clause is ClauseType.GROUP_BY:
        return FlowKind.GROUPS
    return _DEFAULT_FLOW[type_]


class Relation(_Frozen):
    """An atomic edge from one source column to one target column.

    SQLFlow groups several sources under one target; we keep one edge per source so the v2 reading
    (always 1 -> 1) and the end-to-end collapse work on the same records. ``flow`` defaults to the v2
    kind implied by ``type`` and ``clause_type`` (GROUP BY -> groups, other fdr -> restricts).
    """

    type: RelationType
    source: ColumnRef
    target: ColumnRef
    effect_type: str | None = None
    """v1 statement kind that made the edge: select, insert, create_view, rename_table, foreign_key..."""
    clause_type: ClauseType | None = None
    process_id: str | None = None
    flow: FlowKind | None = None
    effect: Effect | None = None
    transform: str | None = None
    """The SQL expression text the value passes through (v2 ``transforms.code``)."""
    function: str | None = None
    span: Span | None = None

    @model_validator(mode="after")
    def _default_flow(self) -> Relation:
        if self.flow is None:
            object.__setattr__(self, "flow", default_flow(self.type, self.clause_type))
        return self

    def sort_key(self) -> tuple[str, ...]:
        source, target = self.source, self.target
        return relation_sort_key(
            self.type,
            (source.dataset_id, source.column),
            (target.dataset_id, target.column),
            self.clause_type,
            self.process_id,
            self.effect_type,
            self.transform,
            self.span,
        )


def relation_sort_key(
    type_: RelationType,
    source: tuple[str, str],
    target: tuple[str, str],
    clause_type: ClauseType | None,
    process_id: str | None,
    effect_type: str | None,
    transform: str | None,
    span: Span | None,
) -> tuple[str, ...]:
    """The canonical order (and identity) of a relation, from its parts: :class:`Lineage` sorts and
    de-duplicates on it, and builders compute it before making the model object (or dropping it).
    ``_value_`` rather than ``value``: the enum property costs a Python call per read."""
    return (
        target[0],
        target[1],
        source[0],
        source[1],
        type_._value_,
        clause_type._value_ if clause_type is not None else "",
        process_id or "",
        effect_type or "",
        transform or "",
        str(span) if span is not None else "",
    )


class Process(_Frozen):
    """One statement that moves data (SQLFlow ``process``).

    ``query_hash`` is a stable hash of the normalised statement text: the same statement gives the same
    hash across runs, which is what Atlas's process de-duplication keys on.
    """

    id: str
    type: str
    """Statement kind in snake_case: insert, insert_overwrite, create_table_as_select, merge..."""
    name: str
    query_hash: str
    statement_index: int | None = None
    """1-based index of the statement in its script."""
    sql: str | None = None
    span: Span | None = None
    procedure: str | None = None
    """Fully qualified name of the procedure the statement sits in, if any."""
    source_file: str | None = None
    job_namespace: str | None = None
    """With ``job_name``: the scheduler's job this process is (an OpenLineage job's namespace and name).
    Such a process is named after its job, not after what it reads and writes
    (:func:`atlas_bridge.naming.job_process_qualified_name`)."""
    job_name: str | None = None


class Argument(_Frozen):
    """A procedure or function argument."""

    name: str
    data_type: str | None = None
    mode: str | None = None
    """in, out or inout."""
    span: Span | None = None


class Procedure(_Frozen):
    """A stored procedure, function or trigger defined in the input."""

    id: str
    name: str
    type: str = "procedure"
    db: str | None = None
    catalog: str | None = None
    arguments: tuple[Argument, ...] = ()
    span: Span | None = None


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"


class Problem(_Frozen):
    """Something an extractor could not do, located precisely enough to fix the input."""

    message: str
    severity: Severity = Severity.ERROR
    kind: str = "parse"
    """parse, unsupported, resolve, timeout, orphan_column, sqlflow..."""
    file: str | None = None
    statement_index: int | None = None
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = self.file or "<input>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        stmt = f" statement {self.statement_index}" if self.statement_index is not None else ""
        return f"{where}:{stmt} {self.severity.value}: {self.message}"


class Lineage(_Frozen):
    """A canonical lineage graph: sorted, de-duplicated, every reference resolvable.

    Construct it freely; the validator sorts everything and checks that each relation's ends name a
    dataset and a column that exist, so a half-built graph fails where it is built.
    """

    datasets: tuple[Dataset, ...] = ()
    processes: tuple[Process, ...] = ()
    relations: tuple[Relation, ...] = ()
    procedures: tuple[Procedure, ...] = ()

    @model_validator(mode="after")
    def _canonical(self) -> Lineage:
        datasets = _unique_by_id(self.datasets, "dataset")
        processes = _unique_by_id(self.processes, "process")
        procedures = _unique_by_id(self.procedures, "procedure")
        columns = {d.id: {c.name for c in d.columns} for d in datasets}
        for rel in self.relations:
            for end in (rel.source, rel.target):
                names = columns.get(end.dataset_id)
                if names is None:
                    msg = f"relation {rel.source} -> {rel.target} names unknown dataset {end.dataset_id!r}"
                    raise ValueError(msg)
                if end.column not in names:
                    msg = f"relation {rel.source} -> {rel.target}: no column {end.column!r}"
                    raise ValueError(msg)
        proc_ids = {p.id for p in processes}
        for rel in self.relations:
            if rel.process_id is not None and rel.process_id not in proc_ids:
                msg = f"relation {rel.source} -> {rel.target} names unknown process {rel.process_id!r}"
                raise ValueError(msg)
        rels = {r.sort_key(): r for r in self.relations}
        object.__setattr__(self, "datasets", tuple(sorted(datasets, key=lambda d: d.id)))
        object.__setattr__(self, "processes", tuple(sorted(processes, key=lambda p: p.id)))
        object.__setattr__(self, "procedures", tuple(sorted(procedures, key=lambda p: p.id)))
        object.__setattr__(self, "relations", tuple(rels[k] for k in sorted(rels)))
        return self

    def dataset(self, dataset_id: str) -> Dataset:
        """The dataset with this id (KeyError if absent)."""
        for ds in self.datasets:
            if ds.id == dataset_id:
                return ds
        raise KeyError(dataset_id)

    def process(self, process_id: str) -> Process:
        """The process with this id (KeyError if absent)."""
        for proc in self.processes:
            if proc.id == process_id:
                return proc
        raise KeyError(process_id)

    def to_json(self) -> str:
        """Canonical JSON: the same lineage always gives the same bytes."""
        return self.model_dump_json(indent=2, exclude_defaults=True) + "\n"


class ExtractionResult(_Frozen):
    """What every extractor returns: the lineage it could build and the problems it met."""

    lineage: Lineage = Field(default_factory=lambda: Lineage())
    problems: tuple[Problem, ...] = ()

    @property
    def ok(self) -> bool:
        """True when no problem of severity error was met."""
        return not any(p.severity is Severity.ERROR for p in self.problems)


# ---------------------------------------------------------------------------------------------------------
# Identity helpers: the one place dataset ids are spelled, so every extractor meets on the same objects.

_QUOTES = re.compile(r'^(?:"(.*)"|`(.*)`|\[(.*)\]|\'(.*)\')$', re.DOTALL)


def unquote(identifier: str) -> str:
    """Strip one level of SQL quoting: ``"a"``, ```a```, ``[a]`` or ``'a'``."""
    m = _QUOTES.match(identifier.strip())
    if not m:
        return identifier.strip()
    return next(g for g in m.groups() if g is not None)


def dataset_id(
    kind: DatasetKind,
    name: str,
    db: str | None = None,
    catalog: str | None = None,
    *,
    scope: str | None = None,
) -> str:
    """The stable id of a dataset.

    Permanent tables and views are keyed case-insensitively on ``catalog.db.name`` (Atlas hooks lower-case
    them too); paths and stages on their uri, exactly; statement-local objects (resultsets, variables) on
    ``scope`` (e.g. the process id) plus their name, so the same RS-1 of two scripts never merge.

    >>> dataset_id(DatasetKind.TABLE, "Emp", "Scott")
    'table:scott.emp'
    >>> dataset_id(DatasetKind.PATH, "s3://b/k/")
    'path:s3://b/k/'
    >>> dataset_id(DatasetKind.RESULTSET, "RS-1", scope="p1")
    'resultset:p1/RS-1'
    """
    if not db and not catalog:  # (many per statement: the common cases without a join or a Python call)
        if kind in _LOCATION_KINDS:
            key = name if kind is DatasetKind.PATH else name.lower()
        else:
            key = name.lower() if kind in _CASELESS_KINDS else name
    else:
        key = ".".join(p for p in (catalog, db, name) if p)
        if kind in _CASELESS_KINDS:
            key = key.lower()
    kind_key = "table" if kind is DatasetKind.VIEW else kind._value_
    if scope:
        return f"{kind_key}:{scope}/{key}"
    return f"{kind_key}:{key}"


_LOCATION_KINDS = frozenset({DatasetKind.PATH, DatasetKind.STAGE, DatasetKind.STREAM})
"""Kinds keyed on their location when they have no db or catalog."""
_CASELESS_KINDS = frozenset(
    {
        DatasetKind.TABLE,
        DatasetKind.VIEW,
        DatasetKind.PSEUDO_TABLE,
        DatasetKind.STAGE,
        DatasetKind.STREAM,
        DatasetKind.CONSTANT_TABLE,
    }
)
"""Kinds keyed case-insensitively on ``catalog.db.name``."""


def query_hash(sql: str) -> str:
    """A stable hash of a statement: whitespace-folded and case-folded outside string literals.

    Streams: the text is hashed segment by segment (literals in bounded slices), so memory stays a small
    multiple of the longest stretch outside literals, whatever a literal's size. Lone surrogates (not
    Unicode, but possible in a Python ``str``) hash by their code points rather than raising.

    >>> query_hash("select a  from t") == query_hash("SELECT a\\nFROM t")
    True
    """
    text = sql.strip().rstrip(";").strip()
    if len(text) <= _SLICE:  # a statement of ordinary size: one pass, the same bytes hashed
        # Cut at every quote: outside, literal, outside, ... (a literal's '' leaves an empty outside part
        # between its quotes); with an odd number of quotes the last one opens no literal (_LITERAL finds
        # none there), so what follows it is outside. The same text as folding around _LITERAL's matches,
        # without a regex pass over the whole text.
        parts = text.split("'")
        parts[::2] = [_fold(p) for p in parts[::2]]
        if not len(parts) % 2:
            parts[-1] = _fold(parts[-1])
        return hashlib.sha256(_utf8("'".join(parts))).hexdigest()
    return _streamed_hash(text)


def _streamed_hash(text: str) -> str:
    """:func:`query_hash` of a stripped text, segment by segment around :data:`_LITERAL`'s matches."""
    h = hashlib.sha256()
    pos = 0
    for m in _LITERAL.finditer(text):
        h.update(_utf8(_WHITESPACE.sub(" ", text[pos : m.start()]).lower()))
        for k in range(m.start(), m.end(), _SLICE):
            h.update(_utf8(text[k : min(k + _SLICE, m.end())]))
        pos = m.end()
    h.update(_utf8(_WHITESPACE.sub(" ", text[pos:]).lower()))
    return h.hexdigest()


def _fold(part: str) -> str:
    """``_WHITESPACE.sub(" ", part).lower()``: str.split's whitespace is the regex's ``\\s``, and splitting
    costs a fraction of the substitution."""
    words = part.split()
    if not words:
        return " " if part else ""
    folded = " ".join(words)
    if part[0].isspace():
        folded = " " + folded
    if part[-1].isspace():
        folded += " "
    return folded.lower()


_LITERAL = re.compile(r"'[^']*(?:''[^']*)*'")
"""A single-quoted literal (``''`` inside). Unrolled so that no repeat keeps per-character state: the
former ``'(?:[^']|'')*'`` cost about 150 bytes per literal character."""
_WHITESPACE = re.compile(r"\s+")
_SLICE = 1 << 16


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def merge_lineage(parts: Iterable[Lineage]) -> Lineage:
    """One lineage from many: datasets with the same id are one dataset, their columns the union."""
    datasets: dict[str, Dataset] = {}
    processes: dict[str, Process] = {}
    procedures: dict[str, Procedure] = {}
    relations: list[Relation] = []
    for part in parts:
        for ds in part.datasets:
            old = datasets.get(ds.id)
            datasets[ds.id] = ds if old is None else _merge_dataset(old, ds)
        for proc in part.processes:
            processes.setdefault(proc.id, proc)
        for pr in part.procedures:
            procedures.setdefault(pr.id, pr)
        relations.extend(part.relations)
    return Lineage(
        datasets=tuple(datasets.values()),
        processes=tuple(processes.values()),
        relations=tuple(relations),
        procedures=tuple(procedures.values()),
    )


def _merge_dataset(a: Dataset, b: Dataset) -> Dataset:
    cols: dict[str, Column] = {c.name: c for c in a.columns}
    for c in b.columns:
        old = cols.get(c.name)
        if old is None or (old.data_type is None and c.data_type is not None):
            cols[c.name] = c
            if old is not None and c.position is None and old.position is not None:
                cols[c.name] = c.model_copy(update={"position": old.position})
        elif old.position is None and c.position is not None:
            cols[c.name] = old.model_copy(update={"position": c.position})
    # A table seen once as a view is a view: CREATE VIEW outranks a bare reference.
    kind = (
        a.kind if a.kind is b.kind else (DatasetKind.VIEW if DatasetKind.VIEW in (a.kind, b.kind) else a.kind)
    )
    update: dict[str, Any] = {
        "kind": kind,
        "columns": tuple(cols.values()),
        "process_ids": a.process_ids + b.process_ids,
        "spans": a.spans + b.spans,
    }
    for field in ("db", "catalog", "sub_type", "uri", "alias", "file_format"):
        if getattr(a, field) is None and getattr(b, field) is not None:
            update[field] = getattr(b, field)
    return Dataset(**{**dict(a), **update})


def _unique_by_id(items: Iterable[Any], what: str) -> list[Any]:
    seen: dict[str, Any] = {}
    for item in items:
        old = seen.get(item.id)
        if old is not None and old != item:
            if what == "dataset":
                seen[item.id] = _merge_dataset(old, item)
                continue
            msg = f"two different {what}s share the id {item.id!r}"
            raise ValueError(msg)
        seen[item.id] = item
    return list(seen.values())


def _sorted_spans(spans: tuple[Span, ...]) -> tuple[Span, ...]:
    return tuple(sorted(set(spans), key=lambda s: (s.line, s.column, s.end_line, s.end_column)))
