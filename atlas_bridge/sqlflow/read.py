"""Read Gudu SQLFlow / DataFlowAnalyzer lineage (dlineage XML and SQLFlow JSON) into the lineage model.

Every generation of the format is accepted (``../shared/reference/sqlflow.md`` §1):

- dlineage XML with ``<relation>`` (legacy and 2020-2021) or ``<relationship>`` (2022 on) elements, two- or
  three-part coordinates, ``PseudoRows`` or ``RelationRows`` pseudo columns, column-level and table-level
  relations (``target_id`` / ``source_id`` naming tables and processes), and fragments: a run of elements
  without the ``<dlineage>`` root, or relations whose objects are not declared (copied out of docs);
- SQLFlow JSON: the flat model (``dbobjs`` list + ``relations`` / ``relationships``), the hierarchical one
  (``dbobjs.servers[].databases[].schemas[]`` + top-level ``processes``), bare or inside the REST envelope
  (``{code, data: {mode, sqlflow, graph}}`` or the model directly in ``data``). ``data.graph`` is UI layout
  and is ignored; ``mode == "summary"`` holds no column data and is refused;
- the v2 design form (``lineageObjects`` + atomic ``sourceId`` -> ``targetId`` edges typed data_flow /
  restricts / groups / calls / has), whole or as single edges, as Gudu's docs print it.

Mapping decisions:

- Endpoints resolve by ids (``parent_id`` + column ``id``), never by names. An object a relation names but the
  document does not declare is rebuilt from ``parent_name`` (a resultset if the name is one SQLFlow generates,
  else a table) with a warning, so fragments keep their edges.
- SQL quoting is stripped from object and column names (not from constant-table columns, which are literals);
  ``RelationRows`` becomes :data:`~atlas_bridge.model.PSEUDO_ROWS`. ``schema`` is our ``db`` and ``database``
  our ``catalog`` (J2: the schema and database containers; ``DEFAULT`` means none).
- Resultsets, variables, constant tables and the orphan-column pseudo table are statement-local: their
  scope is the process whose coordinates enclose them, else the one process writing into them, else the
  one process their data flows into, else the derived process of their statement, else a per-file scope
  ``sqlflow:<file stem>`` (``#2``, ``#3``... after it for same-named resultsets of other statements).
- A statement is the resultsets its relations join. Edges into permanent objects that name no process and
  whose writer cannot be told get a derived process per statement (kind from ``effectType``, span from its
  resultsets; edges between permanent objects, one per target and kind), with a warning; statements that
  only read are said in a warning too (nothing of theirs can be sent to Atlas).
- Processes keep SQLFlow's name; their type becomes snake_case (``sstcreateview`` and ``Create View`` ->
  ``create_view``); ``queryHashId`` is the query hash and ``process:<first 16 hex>`` the id.
- An edge without ``processId`` is credited to its target's writer: the only process in the target's
  ``processIds`` (or of its other incoming edges), or the one whose statement kind is the edge's
  ``effectType`` - SQLFlow's own rule for deriving table-level lineage.
- Table-level relations (object -> process -> object) become ``PseudoRows -> PseudoRows`` edges from every
  source of a process to every target of it (targets also from ``processIds``), tagged with the process.
- Lone surrogates in JSON strings (valid JSON, not text) are read as their ``\\uXXXX`` escape, with a warning.
- ``<error>`` elements become :class:`~atlas_bridge.model.Problem` s of kind ``sqlflow``; anything else the
  model cannot hold (packages, database/schema elements, unknown values) becomes a warning.
- Attributes in the ``urn:atlas-bridge:sqlflow`` namespace (JSON: an ``atlasBridge`` object) are written by
  :mod:`atlas_bridge.sqlflow.write` for what SQLFlow has no slot for (exact ids, SQL text, v2 flow/effect...),
  so what we write reads back into an equal model. SQLFlow ignores them.

Untrusted XML is parsed with defusedxml with DTDs, entities and external references forbidden, after a size
check; nothing is ever expanded.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import logging
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, overload
from xml.etree.ElementTree import Element, ParseError, TreeBuilder

import defusedxml.ElementTree as DefusedET
from defusedxml import DefusedXmlException, DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden

from atlas_bridge.errors import ExtractionError, UnsafeInputError
from atlas_bridge.model import (
    PSEUDO_ROWS,
    Argument,
    ClauseType,
    Column,
    ColumnRef,
    Dataset,
    DatasetKind,
    Effect,
    ExtractionResult,
    FlowKind,
    Lineage,
    Problem,
    Procedure,
    Process,
    Relation,
    RelationType,
    Severity,
    Span,
    dataset_id,
    unquote,
)

logger = logging.getLogger(__name__)

AB_NAMESPACE = "urn:atlas-bridge:sqlflow"
"""XML namespace of atlas-bridge's extension attributes (JSON: the ``atlasBridge`` member)."""

AB_JSON_KEY = "atlasBridge"

DEFAULT_MAX_BYTES = 64 * 1024 * 1024

_PSEUDO_NAMES = frozenset({"pseudorows", "relationrows"})

_RELATION_TYPES: dict[str, tuple[RelationType, ClauseType | None]] = {
    "fdd": (RelationType.FDD, None),
    "fdr": (RelationType.FDR, None),
    "frd": (RelationType.FDR, None),
    "fddi": (RelationType.FDR, ClauseType.CONDITION),
    "join": (RelationType.JOIN, None),
    "call": (RelationType.CALL, None),
    "er": (RelationType.ER, None),
    "dataflow": (RelationType.FDD, None),
    "impact": (RelationType.FDR, None),
    "dataflow_recordset": (RelationType.FDR, None),
    # v2 design relationship types
    "data_flow": (RelationType.FDD, None),
    "restricts": (RelationType.FDR, None),
    "groups": (RelationType.FDR, ClauseType.GROUP_BY),
    "calls": (RelationType.CALL, None),
}

_CLAUSE_TYPES: dict[str, ClauseType] = {
    "where": ClauseType.WHERE,
    "join": ClauseType.JOIN,
    "joincondition": ClauseType.JOIN,
    "on": ClauseType.JOIN,
    "groupby": ClauseType.GROUP_BY,
    "having": ClauseType.HAVING,
    "window": ClauseType.WINDOW,
    "orderby": ClauseType.ORDER_BY,
    "condition": ClauseType.CONDITION,
    "insertvalues": ClauseType.INSERT_VALUES,
    "select": ClauseType.SELECT,
}

_FLOWS = {f.value: f for f in FlowKind}
_EFFECTS = {e.value: e for e in Effect} | {"WEAK_COPY": Effect.MODIFIED_COPY}

_PROCESS_TYPES = {
    "sstinsert": "insert",
    "sstcreateview": "create_view",
    "sstcreatetable": "create_table",
    "sstaltertable": "alter_table",
    "sstupdate": "update",
    "sstmerge": "merge",
    "sstdelete": "delete",
    "ssttruncatetable": "truncate",
    "sstselect": "select",
    "hive_load": "load_data",
}

# Object kinds by XML element / JSON dbobj type (lower case). Anything else in a dbobj list is a resultset.
_KINDS: dict[str, DatasetKind] = {
    "table": DatasetKind.TABLE,
    "view": DatasetKind.VIEW,
    "pseudotable": DatasetKind.PSEUDO_TABLE,
    "constanttable": DatasetKind.CONSTANT_TABLE,
    "path": DatasetKind.PATH,
    "file": DatasetKind.PATH,
    "directory": DatasetKind.PATH,
    "stage": DatasetKind.STAGE,
    "datasource": DatasetKind.STAGE,
    "stream": DatasetKind.STREAM,
    "variable": DatasetKind.VARIABLE,
    "resultset": DatasetKind.RESULTSET,
}
_OBJECT_TAGS = frozenset({"table", "view", "resultset", "variable", "path", "stage", "stream", "datasource"})
_PROCEDURE_TYPES = frozenset({"procedure", "function", "trigger", "macro", "createprocedure"})
_IGNORED_TAGS = frozenset({"orientation"})
_PERMANENT_TAGS = frozenset({"table", "view"})
_STATEMENT_LOCAL = frozenset(
    {DatasetKind.RESULTSET, DatasetKind.VARIABLE, DatasetKind.CONSTANT_TABLE, DatasetKind.PSEUDO_TABLE}
)
_DEFAULT_CONTAINERS = frozenset({"default", "default_server", ""})

# Names SQLFlow generates for resultsets: RS-1, INSERT-SELECT-1, CTE-X-1, RESULT_OF_A-1, FUNCTION-2 ...
_RESULTSET_NAME = re.compile(
    r"^(RS|INSERT-SELECT|UPDATE-SET|UPDATE-SELECT|MERGE-INSERT|MERGE-UPDATE|CTE|RESULT_OF|FUNCTION|"
    r"PIVOT-TABLE|UNPIVOT-TABLE|ALIAS|CASE-WHEN|OUTPUT|ARRAY|STRUCT)([-_].*)?$",
    re.IGNORECASE,
)

_NO_ATTRS: dict[str, str] = {}
"""The attributes of an object once the model holds it (shared: never written to)."""
_NO_COLUMNS: list[Any] = []
"""The raw columns of an object once the model holds them (shared: never written to)."""

_DOUBLED_QUOTES = re.compile(r'=""([^"<>&\n]*)""')
_COORD_POINT = re.compile(r"\[\s*(-?\d+)\s*,\s*(-?\d+)\s*(?:,([^\],\[]*))?\]")  # linear: no lazy part


# ---------------------------------------------------------------------------------------------------------
# Raw document: what the XML and JSON readers produce, before ids are resolved.


@dataclass(slots=True)
class _RawSpan:
    line: int
    column: int
    end_line: int
    end_column: int
    file_hash: str = "0"

    def span(self) -> Span:
        return Span(line=self.line, column=self.column, end_line=self.end_line, end_column=self.end_column)

    def encloses(self, other: _RawSpan) -> bool:
        if self.file_hash != other.file_hash:
            return False
        return (self.line, self.column) <= (other.line, other.column) and (
            other.end_line,
            other.end_column,
        ) <= (
            self.end_line,
            self.end_column,
        )


_SpanKeys = tuple[int, ...] | int
"""Spans as one flat run of (line, column, end line, end column), what the builder keeps until it makes the
model's :class:`~atlas_bridge.model.Span` s (a tenth of their size); one span of values under 2**31 (about
every one) packed in one int (a third of the tuple)."""

_PACK_BITS = 31
_PACK_MASK = (1 << _PACK_BITS) - 1


def _span_keys(spans: tuple[_RawSpan, ...]) -> _SpanKeys:
    return _pack_keys(tuple(v for s in spans for v in (s.line, s.column, s.end_line, s.end_column)))


def _pack_keys(flat: tuple[int, ...]) -> _SpanKeys:
    if len(flat) != 4 or not all(0 <= v <= _PACK_MASK for v in flat):
        return flat
    a, b, c, d = flat
    return (((((a << _PACK_BITS) | b) << _PACK_BITS) | c) << _PACK_BITS) | d


def _flat_keys(keys: _SpanKeys) -> tuple[int, ...]:
    if not isinstance(keys, int):
        return keys
    m = _PACK_MASK
    return (keys >> 3 * _PACK_BITS, (keys >> 2 * _PACK_BITS) & m, (keys >> _PACK_BITS) & m, keys & m)


def _join_keys(a: _SpanKeys, b: _SpanKeys) -> _SpanKeys:
    if a == ():
        return b
    if b == ():
        return a
    return _flat_keys(a) + _flat_keys(b)


def _spans(keys: _SpanKeys) -> tuple[Span, ...]:
    if keys == ():
        return ()
    flat = _flat_keys(keys)
    return tuple(
        Span(line=flat[i], column=flat[i + 1], end_line=flat[i + 2], end_column=flat[i + 3])
        for i in range(0, len(flat), 4)
    )


@dataclass(slots=True)
class _LightColumn:
    """A column as the builder gathers it (merged over declarations and relation ends), made into a
    :class:`~atlas_bridge.model.Column` only when a piece holds its dataset: a big export's model is never
    all in memory at once."""

    name: str
    system: bool
    data_type: str | None
    expression: str | None
    spans: _SpanKeys

    def column(self) -> Column:
        return Column(
            name=self.name,
            system=self.system,
            data_type=self.data_type,
            expression=self.expression,
            spans=_spans(self.spans),
        )


_OPTIONAL_DATASET_FIELDS = ("db", "catalog", "sub_type", "uri", "alias", "file_format")
_RARE_FIELDS = _OPTIONAL_DATASET_FIELDS[1:]


@dataclass(slots=True)
class _LightDataset:
    """A dataset as the builder gathers it (merged over the objects of its id), made into a
    :class:`~atlas_bridge.model.Dataset` only when a piece holds it. Its columns are a list (most datasets
    have a few: a dict each cost more than the rest of the dataset), looked up by name through an index
    once they are many."""

    id: str
    kind: DatasetKind
    name_or_length: str | int
    """The name, or its length when it is how the id ends (most names: one string less)."""
    db: str | None
    rare: tuple[str | None, ...] | None
    """catalog, sub_type, uri, alias, file_format (None: all None)."""
    process_ids: tuple[str, ...]
    spans: _SpanKeys
    columns: _LightColumn | tuple[_LightColumn, ...] | list[_LightColumn] = ()
    """One column alone, a tuple while they are few, a list with an index once many (most datasets have
    one or two: a list each cost more than they)."""
    index: dict[str, _LightColumn] | None = None

    @property
    def name(self) -> str:
        n = self.name_or_length
        return self.id[len(self.id) - n :] if isinstance(n, int) else n

    @name.setter
    def name(self, name: str) -> None:
        self.name_or_length = len(name) if name and self.id.endswith(name) else name

    def get(self, key: str) -> str | None:
        if key == "db":
            return self.db
        return self.rare[_RARE_FIELDS.index(key)] if self.rare is not None else None

    def keep(self, values: dict[str, str | None]) -> None:
        """Take the optional values this dataset lacks (an earlier object's values stand)."""
        if self.db is None:
            self.db = values["db"]
        rare = tuple(
            v if v is not None else values[k] for k, v in zip(_RARE_FIELDS, self.all_rare(), strict=True)
        )
        self.rare = None if all(v is None for v in rare) else rare

    def all_rare(self) -> tuple[str | None, ...]:
        return self.rare if self.rare is not None else (None,) * len(_RARE_FIELDS)

    def all_columns(self) -> tuple[_LightColumn, ...] | list[_LightColumn]:
        cols = self.columns
        return (cols,) if isinstance(cols, _LightColumn) else cols

    def column(self, name: str) -> _LightColumn | None:
        if self.index is not None:
            return self.index.get(name)
        for col in self.all_columns():
            if col.name == name:
                return col
        return None

    def add(self, col: _LightColumn) -> None:
        if self.columns == ():
            self.columns = col
            return
        cols = self.all_columns()
        if isinstance(cols, tuple):
            if len(cols) < 8:
                self.columns = (*cols, col)
                return
            cols = list(cols)
            self.columns = cols
            self.index = {c.name: c for c in cols}
        cols.append(col)
        assert self.index is not None
        self.index[col.name] = col

    def dataset(self) -> Dataset:
        kwargs: dict[str, Any] = {"id": self.id, "kind": self.kind, "name": self.name}
        for key in _OPTIONAL_DATASET_FIELDS:
            value = self.get(key)
            if value is not None:
                kwargs[key] = value
        if self.process_ids:
            kwargs["process_ids"] = self.process_ids
        if self.spans:
            kwargs["spans"] = _spans(self.spans)
        return Dataset(**kwargs, columns=tuple(c.column() for c in self.all_columns()))


@dataclass(slots=True)
class _RawColumn:
    id: str
    name: str
    spans: tuple[_RawSpan, ...]
    system: bool = False
    data_type: str | None = None
    ext: dict[str, str] = field(default_factory=dict)


_KEYS: dict[tuple[str, ...], tuple[str, ...]] = {}
"""One tuple per set of attribute names (objects of a document share a few sets)."""
_MAX_KEYS = 10_000


class _Attrs(tuple[Any, ...]):
    """An object's attributes, read only: its names' tuple (shared by the objects of the same names) then
    its values. A dict each cost more than most objects' text (two or three attributes each)."""

    __slots__ = ()

    @classmethod
    def of(cls, attrs: dict[str, str]) -> _Attrs:
        keys = tuple(attrs)
        shared = _KEYS.get(keys)
        if shared is None:
            if len(_KEYS) >= _MAX_KEYS:  # names made up by the thousand: no sharing to be had
                _KEYS.clear()
            shared = _KEYS[keys] = keys
        return cls((shared, *attrs.values()))

    @overload
    def get(self, key: str) -> str | None: ...

    @overload
    def get(self, key: str, default: str) -> str: ...

    def get(self, key: str, default: str | None = None) -> str | None:
        try:
            value: str = self[self[0].index(key) + 1]
        except ValueError:
            return default
        return value

    def __contains__(self, key: object) -> bool:
        return key in self[0]


_NO_OBJECT_ATTRS = _Attrs.of({})


@dataclass(slots=True)
class _RawObject:
    id: str
    tag: str
    """Element name (XML) or dbobj ``type`` (JSON), lower case."""
    attrs: _Attrs | dict[str, str]
    """A dict while it is made, then :class:`_Attrs`."""
    spans: tuple[_RawSpan, ...]
    columns: list[_RawColumn] = field(default_factory=list)
    ext: dict[str, str] = field(default_factory=dict)
    declared: bool = True
    position: int = 0
    """Its place in the document (the builder's, until its dataset is made)."""
    kind: DatasetKind | None = None
    ds_id: str = ""
    """Its dataset's id, once the builder made it."""

    def __post_init__(self) -> None:
        if isinstance(self.attrs, dict):
            self.attrs = _Attrs.of(self.attrs)


@dataclass(slots=True)
class _RawProcess:
    id: str
    attrs: dict[str, str]
    spans: tuple[_RawSpan, ...]
    ext: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class _RawArgument:
    name: str
    data_type: str | None
    mode: str | None
    spans: tuple[_RawSpan, ...]


@dataclass(slots=True)
class _RawProcedure:
    id: str
    attrs: dict[str, str]
    spans: tuple[_RawSpan, ...]
    arguments: list[_RawArgument] = field(default_factory=list)
    ext: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class _RawEnd:
    id: str | None
    column: str | None
    parent_id: str | None
    parent_name: str | None
    parent_alias: str | None
    spans: tuple[_RawSpan, ...]
    system: bool = False
    clause_type: str | None = None
    object_id: str | None = None
    """Table level: the table/view/process the end names (``target_id`` / ``source_id``)."""
    transforms: list[str] = field(default_factory=list)
    function: str | None = None


@dataclass(slots=True)
class _RawRelation:
    id: str
    type: str
    attrs: dict[str, str]
    target: _RawEnd | None
    sources: list[_RawEnd]
    ext: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class _RawError:
    message: str
    type: str | None
    spans: tuple[_RawSpan, ...]


@dataclass(slots=True)
class _RawDoc:
    objects: list[_RawObject] = field(default_factory=list)
    processes: list[_RawProcess] = field(default_factory=list)
    procedures: list[_RawProcedure] = field(default_factory=list)
    relations: list[_RawRelation] = field(default_factory=list)
    errors: list[_RawError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    relation_source: Callable[[], Iterator[_RawRelation]] | None = None
    """Streaming XML: relations are read again from the text at each pass instead of kept in ``relations``
    (they are most of a document, and the builder needs them in four passes, one at a time); only their
    bytes are parsed again, not the whole document (see :class:`_RelationRuns`)."""

    def iter_relations(self) -> Iterator[_RawRelation]:
        return iter(self.relations) if self.relation_source is None else self.relation_source()


# ---------------------------------------------------------------------------------------------------------
# Public entry point


def extract_sqlflow_lineage(
    data: str | bytes,
    *,
    file: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> ExtractionResult:
    """Read a SQLFlow dlineage XML or JSON export (auto-detected) into the lineage model.

    Raises :class:`~atlas_bridge.errors.UnsafeInputError` for DTDs, entities or input over ``max_bytes``, and
    :class:`~atlas_bridge.errors.ExtractionError` for input that is neither, a summary-mode export, or
    malformed documents. Problems inside a readable document come back as ``Problem`` s.

    >>> xml = '<dlineage><table id="1" name="t"><column id="2" name="a"/></table></dlineage>'
    >>> [d.id for d in extract_sqlflow_lineage(xml).lineage.datasets]
    ['table:t']
    """
    pieces = list(iter_sqlflow_lineage(data, file=file, max_bytes=max_bytes, chunk_relations=None))
    return pieces[0]


DEFAULT_CHUNK_RELATIONS = 5_000
"""Relations per piece of :func:`iter_sqlflow_lineage` (a few MB of model and entity records)."""


def iter_sqlflow_lineage(
    data: str | bytes,
    *,
    file: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    chunk_relations: int | None = DEFAULT_CHUNK_RELATIONS,
) -> Iterator[ExtractionResult]:
    """:func:`extract_sqlflow_lineage` in pieces, so that no one holds the whole model of a big export.

    XML is read as a stream (the element tree of the whole document is never built): a first pass keeps
    the objects, processes and procedures (the id -> name maps) and resolves every relation's ends, a
    last pass turns the relations into the model ``chunk_relations`` at a time. Each piece but the last
    holds whole statements: the relations of a process, or joined by a statement-local object (resultset,
    variable...), are never cut apart, so a piece's end-to-end view and process entities are those of the
    whole. A piece carries the datasets and processes its relations name; the last piece holds every
    process and procedure and all the problems; the datasets come in pieces of about as many columns before
    it (and in the relations' pieces, those they name). :func:`~atlas_bridge.model.merge_lineage` of the
    pieces equals :func:`extract_sqlflow_lineage`. ``chunk_relations=None`` gives one piece. A document
    with table-level relations (few, and aggregated over the whole document) is one piece.

    Errors are raised before the first piece is yielded.
    """
    size = _byte_size(data, max_bytes)
    if size > max_bytes:
        msg = f"input is {size} bytes, over the limit of {max_bytes} bytes; refused"
        raise UnsafeInputError(msg, file=file)
    text_start = _first_char(data)
    try:
        if text_start == "<":
            doc = _parse_xml_stream(data, file) or _parse_xml(data, file)
        elif text_start in ("{", "["):
            doc = _parse_json(data, file)
        else:
            msg = "not a SQLFlow export: expected dlineage XML ('<') or SQLFlow JSON ('{')"
            raise ExtractionError(msg, file=file)
        builder = _Builder(doc, file, _file_scope(data, file))
        final = builder.prepare(chunk_relations is not None)
    except ExtractionError:
        raise
    except _UNREADABLE as e:
        raise _unreadable(e, file) from None
    yield from builder.pieces(final, chunk_relations)


_UNREADABLE = (TypeError, ValueError, KeyError, AttributeError, IndexError, LookupError, RecursionError)


def _unreadable(e: BaseException, file: str | None) -> ExtractionError:
    # A document of the right outline with wrong insides (a string where SQLFlow has a list, an id of
    # 100,000 digits, an encoding Python's XML parser does not take): the file's problem, said as one.
    msg = f"not a readable SQLFlow export: {e.__class__.__name__}: {str(e)[:200]}"
    return ExtractionError(msg, file=file)


def _byte_size(data: str | bytes, max_bytes: int) -> int:
    if isinstance(data, bytes):
        return len(data)
    if len(data) > max_bytes or len(data) * 4 <= max_bytes:
        return len(data)  # a lower bound that decides alone: over, or surely under
    return len(data.encode("utf-8", "surrogatepass"))


def _first_char(data: str | bytes) -> str:
    head = data[:4096]
    text = head.decode("utf-8", "replace") if isinstance(head, bytes) else head
    text = text.lstrip("\ufeff \t\r\n")
    return text[:1]


def _file_scope(data: str | bytes, file: str | None) -> str:
    if file:
        name = PurePath(file).name
        for suffix in (".xml", ".json"):
            if name.lower().endswith(suffix):
                name = name[: -len(suffix)]
        return f"sqlflow:{name}"
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    return f"sqlflow:{hashlib.sha256(raw).hexdigest()[:12]}"


# ---------------------------------------------------------------------------------------------------------
# XML


def _parse_xml(data: str | bytes, file: str | None) -> _RawDoc:
    doc = _RawDoc()
    try:
        root = _safe_fromstring(data, file)
    except ExtractionError as e:
        if isinstance(e, UnsafeInputError):
            raise
        # Gudu's docs render quoted names as name=""eName"" (a lost &quot;): repair that one thing.
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        repaired, n = _DOUBLED_QUOTES.subn(r'="&quot;\1&quot;"', text)
        if not n:
            raise
        root = _safe_fromstring(repaired, file)
        doc.warnings.append(f'repaired {n} attribute value(s) written as ""name"" (unescaped quotes)')
    tag = _local(root.tag).lower()
    if tag in ("dlineage", "dligneage", "fragment"):
        children = list(root)
    else:
        children = [root]
    for child in children:
        _read_xml_element(child, doc)
    return doc


def _safe_fromstring(data: str | bytes, file: str | None) -> Element:
    try:
        return _defused_fromstring(data, file)
    except ParseError as e:
        if getattr(e, "code", None) != 9:  # 9 = junk after document element: a fragment of siblings
            raise _xml_error(e, file) from e
    # A run of elements copied out of a page: read it inside a synthetic root.
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = re.sub(r"^\ufeff?\s*<\?xml[^>]*\?>", "", text, count=1)
    try:
        return _defused_fromstring(f"<fragment>{text}</fragment>", file)
    except ParseError as e:
        raise _xml_error(e, file) from e


def _defused_fromstring(data: str | bytes, file: str | None) -> Element:
    with _defused(file):
        root: Element = DefusedET.fromstring(
            data, forbid_dtd=True, forbid_entities=True, forbid_external=True
        )
    return root


@contextlib.contextmanager
def _defused(file: str | None) -> Iterator[None]:
    """defusedxml's refusals as :class:`UnsafeInputError` s that say what was refused."""
    try:
        yield
    except DTDForbidden as e:
        msg = (
            "refused XML with a document type declaration (DTD): DTDs carry entity-expansion "
            "(billion laughs) and external-entity (XXE) attacks, and SQLFlow never writes one; "
            "nothing was expanded"
        )
        raise UnsafeInputError(msg, file=file) from e
    except EntitiesForbidden as e:
        msg = f"refused XML that declares entity {e.name!r} (entity expansion); nothing was expanded"
        raise UnsafeInputError(msg, file=file) from e
    except ExternalReferenceForbidden as e:
        msg = f"refused XML with an external reference ({e.sysid or e.pubid}); nothing was fetched"
        raise UnsafeInputError(msg, file=file) from e
    except DefusedXmlException as e:
        msg = f"refused unsafe XML construct ({type(e).__name__}); nothing was expanded"
        raise UnsafeInputError(msg, file=file) from e


_ROOT_TAGS = frozenset({"dlineage", "dligneage", "fragment"})


_RELATION_TAGS = frozenset({"relation", "relationship"})


class _RelationRuns(TreeBuilder):
    """A tree builder that hands over the document's top-level elements as they complete (``done``), and
    notes where the root's relation children lie in the text (byte ranges, runs of adjacent ones joined),
    as expat reads them: the builder's later passes over the relations then read those bytes only, not the
    whole document again (in a catalogue-like export, relations are a few percent of it)."""

    def __init__(self) -> None:
        super().__init__()
        self.expat: Any = None
        self.root: Element | None = None
        self.done: list[Element] = []
        self.depth = 0
        self.dlineage = False  # the root is <dlineage> (else it is the one element: no ranges)
        self.first_child = -1
        """Where the root's first child starts: the text before it (declaration, root tag) starts a pass."""
        self.root_end = -1
        """Where the root's end tag starts: the text from it on ends each pass."""
        self.runs: list[list[int]] = []  # [start, end] of each run of relation elements
        self.open = False  # the last child seen is a relation: its run is not closed yet
        self.is_relation: dict[str, bool] = {}

    def start(self, tag: str, attrs: dict[str, str]) -> Element:
        self.depth += 1
        if self.depth == 1:
            self.dlineage = _local(tag).lower() in _ROOT_TAGS
            self.root = super().start(tag, attrs)
            return self.root
        if self.depth == 2:
            at = int(self.expat.CurrentByteIndex)
            if self.first_child < 0:
                self.first_child = at
            relation = self.is_relation.get(tag)
            if relation is None:
                relation = self.is_relation[tag] = _local(tag).lower() in _RELATION_TAGS
            if self.open and not relation:
                self.runs[-1][1] = at
            elif relation and not self.open:
                self.runs.append([at, -1])
            self.open = relation
        el: Element = super().start(tag, attrs)
        return el

    def end(self, tag: str) -> Element:
        if self.depth == 1:
            self.root_end = int(self.expat.CurrentByteIndex)
            if self.open:
                self.runs[-1][1] = self.root_end
                self.open = False
        self.depth -= 1
        el: Element = super().end(tag)
        if self.depth == 1 if self.dlineage else self.depth == 0:
            self.done.append(el)
        return el

    def ranges(self, size: int) -> list[tuple[int, int]] | None:
        """The byte ranges of a document holding the root and its relations only (None: not known)."""
        if not self.dlineage or self.first_child < 0 or self.root_end < 0 or any(e < 0 for _, e in self.runs):
            return None
        return [(0, self.first_child), *((a, b) for a, b in self.runs), (self.root_end, size)]


def _xml_top_elements(
    data: bytes,
    file: str | None,
    *,
    runs: _RelationRuns | None = None,
    ranges: list[tuple[int, int]] | None = None,
) -> Iterator[Element]:
    """The document's top-level elements one at a time, each dropped once read (streamed): the tree of
    the whole document never exists. A root that is not ``<dlineage>`` is itself the one element.
    ``runs``: note where the relations lie; ``ranges``: read those byte ranges of ``data`` only."""
    source = _Feed(data, ranges)
    target = runs if runs is not None else _RelationRuns()
    with _defused(file):
        parser = DefusedET.DefusedXMLParser(
            target=target, forbid_dtd=True, forbid_entities=True, forbid_external=True
        )
        target.expat = parser.parser
        while chunk := source.read():
            parser.feed(chunk)
            if target.done:
                yield from _handed_over(target)
                source.events = 1
        parser.close()
        yield from _handed_over(target)


def _handed_over(target: _RelationRuns) -> Iterator[Element]:
    done, target.done = target.done, []
    yield from done
    if target.dlineage and target.root is not None:
        target.root.clear()  # the root keeps its children: let them go


class _Feed:
    """The text for the parser, in chunks that double while a chunk completes no element.

    expat (before 2.6) scans a token cut by the end of a chunk again from its start at every feed: with
    ``iterparse``'s fixed 16 KB reads, one 16 MB attribute was scanned a thousand times (quadratic). Doubled
    chunks make that a geometric sum (linear); once elements come again, chunks are small again, so the
    elements a chunk completes (held until read) stay few.
    """

    BASE = 64 * 1024

    def __init__(self, data: bytes, ranges: list[tuple[int, int]] | None = None) -> None:
        self.data = memoryview(data)
        self.ranges = ranges if ranges is not None else [(0, len(data))]
        self.part = 0
        self.pos = self.ranges[0][0] if self.ranges else 0
        self.size = self.BASE
        self.events = 1  # the first read is of the base size

    def read(self, _size: int = -1) -> bytes:
        self.size = self.BASE if self.events else self.size * 2
        self.events = 0
        while self.part < len(self.ranges):
            end = self.ranges[self.part][1]
            if self.pos < end:
                chunk = bytes(self.data[self.pos : min(end, self.pos + self.size)])
                self.pos += len(chunk)
                return chunk
            self.part += 1
            if self.part < len(self.ranges):
                self.pos = self.ranges[self.part][0]
        return b""


def _parse_xml_stream(data: str | bytes, file: str | None) -> _RawDoc | None:
    """Streaming read of a well-formed dlineage XML; None for anything else (a fragment of siblings, the
    docs' doubled quotes, malformed text), which :func:`_parse_xml` reads or reports as before."""
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    if isinstance(data, str) and raw[:200].lstrip().startswith(b"<?xml") and b"encoding" in raw[:200]:
        return None  # a declared encoding no longer describes the text once it is a str
    doc = _RawDoc()
    runs = _RelationRuns()
    try:
        for el in _xml_top_elements(raw, file, runs=runs):
            is_relation = _local(el.tag).lower() in _RELATION_TAGS
            _read_xml_element(el, doc)
            if doc.relations and not is_relation:
                return None  # relations nested in another element: read the whole tree
            doc.relations.clear()  # read for their warnings only; the builder reads them again
    except ParseError:
        return None

    # Later passes read the relations' bytes only (within the root's start and end tags, so that its
    # namespace declarations and the document's encoding hold): a document whose root is the one element
    # is read whole again.
    ranges = runs.ranges(len(raw))

    def relations() -> Iterator[_RawRelation]:
        scratch = _RawDoc()
        for el in _xml_top_elements(raw, file, ranges=ranges):
            if _local(el.tag).lower() in _RELATION_TAGS:
                attrs, ext = _xml_attrs(el)
                _read_xml_relation(el, attrs, ext, scratch)
                yield scratch.relations.pop()

    doc.relation_source = relations
    return doc


def _xml_error(e: ParseError, file: str | None) -> ExtractionError:
    line, column = getattr(e, "position", (None, None))
    msg = f"malformed dlineage XML: {e}"
    return ExtractionError(msg, file=file, line=line, column=column + 1 if column is not None else None)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _xml_attrs(el: Element) -> tuple[dict[str, str], dict[str, str]]:
    """Plain attributes, and atlas-bridge extension attributes (namespace stripped)."""
    attrib: dict[str, str] = el.attrib
    for key in attrib:
        if key[:1] == "{":
            break
    else:  # no namespaced name (about every element): the same names and values
        return dict(attrib), _NO_ATTRS
    attrs: dict[str, str] = {}
    ext: dict[str, str] = {}
    prefix = "{" + AB_NAMESPACE + "}"
    for key, value in el.attrib.items():
        if key.startswith(prefix):
            ext[key[len(prefix) :]] = value
        else:
            attrs[_local(key)] = value
    return attrs, ext or _NO_ATTRS  # most elements have none: one shared empty dict (memory)


def _read_xml_element(el: Element, doc: _RawDoc) -> None:
    tag = _local(el.tag)
    low = tag.lower()
    attrs, ext = _xml_attrs(el)
    spans = _parse_coordinates(attrs.get("coordinate"))
    if low in _OBJECT_TAGS:
        obj_tag = sys.intern(low)  # one string for every object's tag
        if low == "table" and attrs.get("type", "").lower() in ("pseudotable", "constanttable"):
            obj_tag = attrs["type"].lower()
        attrs.pop("coordinate", None)  # in spans now (an object's coordinate string is kept by nothing)
        obj = _RawObject(id=attrs.get("id", ""), tag=obj_tag, attrs=attrs, spans=spans, ext=ext)
        for col in el:
            if _local(col.tag).lower() == "column":
                obj.columns.append(_xml_column(col))
            else:
                doc.warnings.append(
                    f"element <{_local(col.tag)}> inside <{tag} id={obj.id!r}> is not represented"
                )
        doc.objects.append(obj)
    elif low == "process":
        doc.processes.append(_RawProcess(id=attrs.get("id", ""), attrs=attrs, spans=spans, ext=ext))
    elif low == "procedure":
        proc = _RawProcedure(id=attrs.get("id", ""), attrs=attrs, spans=spans, ext=ext)
        for arg in el:
            if _local(arg.tag).lower() == "argument":
                a, _ = _xml_attrs(arg)
                proc.arguments.append(
                    _RawArgument(
                        name=a.get("name", ""),
                        data_type=a.get("datatype") or a.get("dataType"),
                        mode=a.get("inout"),
                        spans=_parse_coordinates(a.get("coordinate")),
                    )
                )
        doc.procedures.append(proc)
    elif low == "package":
        doc.warnings.append(
            f"package {attrs.get('name', attrs.get('id', '?'))!r} is not represented (its procedures are)"
        )
        for child in el:
            before = len(doc.procedures)
            _read_xml_element(child, doc)
            for proc in doc.procedures[before:]:
                proc.attrs.setdefault("package", attrs.get("name", ""))
    elif low in ("relation", "relationship"):
        _read_xml_relation(el, attrs, ext, doc)
    elif low == "error":
        doc.errors.append(
            _RawError(
                message=attrs.get("errorMessage", ""),
                type=attrs.get("errorType"),
                spans=spans or _parse_coordinates(attrs.get("originCoordinate")),
            )
        )
    elif low in _IGNORED_TAGS:
        return
    else:
        doc.warnings.append(f"element <{tag}> id={attrs.get('id', '?')!r} is not represented")


def _xml_column(el: Element) -> _RawColumn:
    attrs, ext = _xml_attrs(el)
    return _RawColumn(
        id=attrs.get("id", ""),
        name=sys.intern(attrs.get("name", "")),  # the same few names in many tables: one string each
        spans=_parse_coordinates(attrs.get("coordinate")),
        system=attrs.get("source", "").lower() == "system",
        data_type=attrs.get("dataType") or attrs.get("datatype"),
        ext=ext,
    )


def _read_xml_relation(el: Element, attrs: dict[str, str], ext: dict[str, str], doc: _RawDoc) -> None:
    target: _RawEnd | None = None
    sources: list[_RawEnd] = []
    for child in el:
        ctag = _local(child.tag).lower()
        end_attrs, _ = _xml_attrs(child)
        if ctag in ("target", "caller"):
            target = _xml_end(child, end_attrs, "target_id")
        elif ctag in ("source", "callee"):
            sources.append(_xml_end(child, end_attrs, "source_id"))
        else:
            doc.warnings.append(
                f"element <{_local(child.tag)}> in relation {attrs.get('id', '?')!r} is ignored"
            )
    doc.relations.append(
        _RawRelation(
            id=attrs.get("id", ""),
            type=attrs.get("type", "fdd"),
            attrs=attrs,
            target=target,
            sources=sources,
            ext=ext,
        )
    )


def _xml_end(el: Element, attrs: dict[str, str], object_key: str) -> _RawEnd:
    transforms: list[str] = []
    if len(el):
        for tr in el.iter():
            if _local(tr.tag).lower() == "code" and tr.text and tr.text.strip():
                transforms.append(tr.text.strip())
    return _RawEnd(
        id=attrs.get("id"),
        column=attrs.get("column") if "column" in attrs else attrs.get("name"),
        parent_id=attrs.get("parent_id"),
        parent_name=attrs.get("parent_name"),
        parent_alias=attrs.get("parent_alias"),
        spans=_parse_coordinates(attrs.get("coordinate")),
        system=attrs.get("source", "").lower() == "system",
        clause_type=attrs.get("clauseType"),
        object_id=attrs.get(object_key),
        transforms=transforms,
        function=attrs.get("function"),
    )


def _parse_coordinates(value: Any) -> tuple[_RawSpan, ...]:
    """``"[l,c,h],[l,c,h]"`` (or two-part ``[l,c]``) strings and JSON ``[{x, y, hashCode}]`` lists."""
    points: list[tuple[int, int, str]] = []
    if isinstance(value, str):
        for m in _COORD_POINT.finditer(value):
            points.append((int(m.group(1)), int(m.group(2)), (m.group(3) or "").strip() or "0"))
    elif isinstance(value, list):
        for p in value:
            if isinstance(p, dict) and "x" in p and "y" in p:
                try:
                    points.append((int(p["x"]), int(p["y"]), str(p.get("hashCode", "0"))))
                except (TypeError, ValueError):
                    continue
    if not points:
        return ()
    spans: list[_RawSpan] = []
    for i in range(0, len(points), 2):
        start = points[i]
        end = points[i + 1] if i + 1 < len(points) else start
        if min(start[0], start[1], end[0], end[1]) < 1:
            continue  # [-1,-1] = no position
        spans.append(_RawSpan(start[0], start[1], end[0], end[1], start[2]))
    return tuple(spans)


# ---------------------------------------------------------------------------------------------------------
# JSON


def _parse_json(data: str | bytes, file: str | None) -> _RawDoc:
    try:
        top = json.loads(data)
    except json.JSONDecodeError as e:
        msg = f"malformed SQLFlow JSON: {e.msg}"
        raise ExtractionError(msg, file=file, line=e.lineno, column=e.colno) from e
    except (RecursionError, UnicodeDecodeError) as e:
        msg = f"unreadable SQLFlow JSON: {type(e).__name__}"
        raise UnsafeInputError(msg, file=file) from e
    escaped = 0
    if isinstance(data, str):
        suspect = bool(_MAYBE_SURROGATE.search(data) or _SURROGATE.search(data))
    else:
        suspect = bool(_MAYBE_SURROGATE_BYTES.search(data))
    if suspect:
        top, escaped = _escape_surrogates(top)
    if _is_v2(top):
        doc = _parse_v2(top)
    else:
        doc = _parse_json_model(top, file)
    if escaped:
        doc.warnings.append(
            f"{escaped} string(s) held a lone UTF-16 surrogate (valid JSON, but not text that can be "
            "sent): read with each written as its \\uXXXX escape"
        )
    return doc


_MAYBE_SURROGATE_TEXT = r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
_MAYBE_SURROGATE = re.compile(_MAYBE_SURROGATE_TEXT)
_MAYBE_SURROGATE_BYTES = re.compile(_MAYBE_SURROGATE_TEXT.encode())
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_surrogates(top: Any) -> tuple[Any, int]:
    """The parsed document with every lone surrogate (``"\\ud800"`` is valid JSON; json joins the pairs)
    written as its escape text, and how many strings held one: such a string cannot be encoded as UTF-8,
    so it would fail wherever the lineage is sent (a lone surrogate is no character of any name)."""
    count = 0

    def fix(value: str) -> str:
        nonlocal count
        if not _SURROGATE.search(value):
            return value
        count += 1
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", value)

    def walk(value: Any) -> Any:
        # iterative: the depth is what json.loads accepted, but a deep walk must not recurse
        root: list[Any] = [value]
        stack: list[tuple[list[Any] | dict[str, Any], Any]] = [(root, 0)]
        while stack:
            holder, key = stack.pop()
            item = holder[key]
            if isinstance(item, str):
                holder[key] = fix(item)
            elif isinstance(item, list):
                stack.extend((item, i) for i in range(len(item)))
            elif isinstance(item, dict):
                fixed = {fix(k): v for k, v in item.items()}
                if len(fixed) != len(item) or any(a is not b for a, b in zip(fixed, item, strict=True)):
                    item.clear()
                    item.update(fixed)
                stack.extend((item, k) for k in item)
        return root[0]

    return walk(top), count


def _parse_json_model(top: Any, file: str | None) -> _RawDoc:
    model = _json_model(top, file)
    doc = _RawDoc()
    dbobjs = model.get("dbobjs")
    if isinstance(dbobjs, list):
        for obj in dbobjs:
            if isinstance(obj, dict):
                _read_json_dbobj(obj, {}, doc)
    elif isinstance(dbobjs, dict):
        _read_json_tree(dbobjs, doc)
    processes: dict[str, _RawProcess] = {}
    for proc in doc.processes:
        processes.setdefault(proc.id, proc)
    for p in model.get("processes") or ():
        if isinstance(p, dict):
            raw = _json_process(p)
            old = processes.get(raw.id)
            if old is None:
                processes[raw.id] = raw
            else:  # top-level entry carries the type; the schema-level copy may not
                old.attrs.update({k: v for k, v in raw.attrs.items() if v})
                old.spans = old.spans or raw.spans
                old.ext.update(raw.ext)
    doc.processes = list(processes.values())
    rels = model.get("relationships")
    if rels is None:
        rels = model.get("relations")
    for rel in rels or ():
        if isinstance(rel, dict):
            _read_json_relation(rel, doc)
    for err in model.get("errors") or ():
        if isinstance(err, dict):
            doc.errors.append(
                _RawError(
                    message=str(err.get("errorMessage", "")),
                    type=_str(err.get("errorType")),
                    spans=_parse_coordinates(err.get("coordinates", err.get("coordinate"))),
                )
            )
    if (
        not model.get("errors")
        and isinstance(top, dict)
        and isinstance(top.get("error"), str)
        and top["error"]
    ):
        doc.errors.append(_RawError(message=top["error"], type=None, spans=()))
    return doc


def _json_model(top: Any, file: str | None) -> dict[str, Any]:
    if not isinstance(top, dict):
        msg = "not a SQLFlow JSON export: the top level is not an object"
        raise ExtractionError(msg, file=file)
    data = top.get("data") if "data" in top and "dbobjs" not in top else None
    if data is None:
        model = top
    elif isinstance(data, dict):
        if str(data.get("mode", "")).lower() == "summary":
            msg = (
                "SQLFlow export is in summary mode (the relation count exceeded the server's limit): "
                "it has no column-level data; export again with a higher relation_limit or per statement"
            )
            raise ExtractionError(msg, file=file)
        sqlflow = data.get("sqlflow")
        model = sqlflow if isinstance(sqlflow, dict) else data
    else:
        msg = "not a SQLFlow JSON export: 'data' is not an object"
        raise ExtractionError(msg, file=file)
    if "dbobjs" not in model and "relationships" not in model and "relations" not in model:
        if isinstance(top.get("error"), str) and top.get("error"):
            msg = f"SQLFlow reported an error and no lineage (code {top.get('code')}): {top['error']}"
        else:
            msg = "not a SQLFlow JSON export: no 'dbobjs' or 'relationships'"
        raise ExtractionError(msg, file=file)
    return model


def _is_v2_edge(obj: Any) -> bool:
    return isinstance(obj, dict) and "sourceId" in obj and "targetId" in obj and "target" not in obj


def _is_v2(top: Any) -> bool:
    """The v2 design form (``lineageObjects``, atomic ``sourceId`` -> ``targetId`` edges), whole or part."""
    if isinstance(top, list):
        return bool(top) and all(_is_v2_edge(e) for e in top)
    if not isinstance(top, dict):
        return False
    if _is_v2_edge(top) or "lineageObjects" in top:
        return True
    rels = top.get("relationships")
    return "dbobjs" not in top and isinstance(rels, list) and bool(rels) and all(_is_v2_edge(e) for e in rels)


def _parse_v2(top: Any) -> _RawDoc:
    """v2 design JSON (seeds 001/002, sqlflow_public basic-concepts): objects by id, 1 -> 1 typed edges.

    Endpoints are lineage-object ids, or (as the docs write them) dotted ``table.column`` names; a table
    endpoint stands for its row set (``PseudoRows``). ``has`` edges are structure: they declare the column.
    """
    doc = _RawDoc()
    edges: list[Any]
    objects: list[Any]
    if isinstance(top, list):
        edges, objects = top, []
    elif _is_v2_edge(top):
        edges, objects = [top], []
    else:
        edges, objects = list(top.get("relationships") or []), list(top.get("lineageObjects") or [])
    by_qn: dict[str, _RawObject] = {}
    by_id: dict[str, tuple[_RawObject, str | None]] = {}  # v2 id -> (object, column name or None)
    column_objs: list[dict[str, Any]] = []
    for obj in objects:
        if not isinstance(obj, dict):
            continue
        if str(obj.get("type", "")).lower() == "column":
            column_objs.append(obj)
            continue
        props = obj.get("properties")
        temporary = isinstance(props, dict) and bool(props.get("isTemporary"))
        name = _str(obj.get("name")) or _str(obj.get("id")) or ""
        qn = _str(obj.get("qualifiedName")) or name
        tag = _v2_object_tag(name, qn, temporary)
        attrs = {"name": name} if tag != "table" else {"name": _v2_table_name(qn, name)}
        raw = _RawObject(id=_str(obj.get("id")) or qn, tag=tag, attrs=attrs, spans=())
        doc.objects.append(raw)
        by_qn[qn.lower()] = raw
        by_id[raw.id] = (raw, None)
    for col_obj in column_objs:
        name = _str(col_obj.get("name")) or ""
        qn = _str(col_obj.get("qualifiedName")) or ""
        parent_qn = qn[: -len(name) - 1] if name and qn.endswith("." + name) else qn.rpartition(".")[0]
        parent = by_qn.get(parent_qn.lower())
        if parent is None:
            tag = _v2_object_tag(name, parent_qn, True)
            parent_name = name if tag == "variable" else parent_qn.rpartition(".")[2] or name
            parent_attrs = {"name": parent_name}
            if tag == "variable":
                parent_attrs["subType"] = "scalar"
            parent = _RawObject(id=f"v2:{parent_qn}", tag=tag, attrs=parent_attrs, spans=())
            doc.objects.append(parent)
            by_qn[parent_qn.lower()] = parent
        cid = _str(col_obj.get("id")) or qn
        parent.columns.append(_RawColumn(id=cid, name=name, spans=()))
        by_id[cid] = (parent, name)

    def endpoint(ref: str) -> tuple[_RawObject, str, str]:
        found = by_id.get(ref)
        if found is not None:
            obj, col = found
            if col is not None:
                return obj, col, ref
            col = PSEUDO_ROWS
        else:
            parts = split_qualified(ref)
            table = ".".join(parts[:-1]) if len(parts) > 1 else ref
            col = parts[-1] if len(parts) > 1 else PSEUDO_ROWS
            known = by_qn.get(table.lower())
            if known is None:
                tag = "resultset" if _RESULTSET_NAME.match(unquote(table)) else "table"
                known = _RawObject(id=f"v2:{table}", tag=tag, attrs={"name": table}, spans=())
                doc.objects.append(known)
                by_qn[table.lower()] = known
            obj = known
        col_id = f"{obj.id}.{col}"
        if not any(c.id == col_id for c in obj.columns):
            obj.columns.append(_RawColumn(id=col_id, name=col, spans=(), system=col == PSEUDO_ROWS))
        return obj, col, col_id

    for i, edge in enumerate(edges, start=1):
        if not isinstance(edge, dict):
            continue
        etype = str(edge.get("type", "data_flow")).lower()
        src_obj, src_col, src_id = endpoint(str(edge.get("sourceId")))
        tgt_obj, tgt_col, tgt_id = endpoint(str(edge.get("targetId")))
        if etype == "has":
            continue  # structure: the endpoint() calls declared the column
        attrs = {"id": _str(edge.get("id")) or f"v2-{i}", "type": etype}
        if isinstance(edge.get("effectType"), str):
            attrs["effectType"] = edge["effectType"]
        codes = [
            t["code"].strip()
            for t in edge.get("transforms") or ()
            if isinstance(t, dict) and isinstance(t.get("code"), str) and t["code"].strip()
        ]
        ext = {"v2": "1"}
        if etype in _FLOWS:
            ext["flow"] = etype
        process_ids = [str(p) for p in edge.get("processIds") or ()] or [""]
        for pid in process_ids:
            rel_attrs = dict(attrs)
            if pid:
                rel_attrs["processId"] = pid
            doc.relations.append(
                _RawRelation(
                    id=attrs["id"],
                    type=etype,
                    attrs=rel_attrs,
                    target=_RawEnd(
                        id=tgt_id,
                        column=tgt_col,
                        parent_id=tgt_obj.id,
                        parent_name=tgt_obj.attrs.get("name"),
                        parent_alias=None,
                        spans=(),
                    ),
                    sources=[
                        _RawEnd(
                            id=src_id,
                            column=src_col,
                            parent_id=src_obj.id,
                            parent_name=src_obj.attrs.get("name"),
                            parent_alias=None,
                            spans=_parse_coordinates(edge.get("sqlCoordinates")),
                            transforms=codes,
                        )
                    ],
                    ext=ext,
                )
            )
        dropped = sorted(
            k for k in ("condition", "statementKey", "observations", "confidence", "metadata") if k in edge
        )
        if dropped:
            doc.warnings.append(f"v2 relationship {attrs['id']!r}: {', '.join(dropped)} not represented")
    return doc


def _v2_object_tag(name: str, qualified_name: str, temporary: bool) -> str:
    low = qualified_name.lower()
    if ".variable." in f".{low}" or name.startswith("@"):
        return "variable"
    if name.upper().startswith("SQL_CONSTANTS") or ".resultset.const" in low:
        return "constanttable"
    if temporary or ".resultset." in low:
        return "resultset"
    return "table"


def _v2_table_name(qualified_name: str, name: str) -> str:
    """``server.database.schema.table`` without SQLFlow's default container names."""
    parts = split_qualified(qualified_name)
    if len(parts) >= 4:
        parts = parts[-3:]
    kept = [
        p for p in parts[:-1] if p.lower() not in _DEFAULT_CONTAINERS and not p.lower().startswith("default_")
    ]
    return ".".join([*kept, parts[-1]]) if parts[-1] else name


def _str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _json_ext(obj: dict[str, Any]) -> dict[str, str]:
    ext = obj.get(AB_JSON_KEY)
    if not isinstance(ext, dict):
        return {}
    return {str(k): str(v) for k, v in ext.items() if v is not None}


def _json_scalars(obj: dict[str, Any]) -> dict[str, str]:
    return {k: s for k, v in obj.items() if not isinstance(v, (dict, list)) and (s := _str(v)) is not None}


def _json_spans(obj: dict[str, Any]) -> tuple[_RawSpan, ...]:
    return _parse_coordinates(obj.get("coordinates", obj.get("coordinate")))


def _read_json_tree(dbobjs: dict[str, Any], doc: _RawDoc) -> None:
    for server in dbobjs.get("servers") or ():
        if not isinstance(server, dict):
            continue
        supports_catalogs = server.get("supportsCatalogs", True) is not False
        supports_schemas = server.get("supportsSchemas", True) is not False
        server_name = _str(server.get("name")) or ""
        _read_json_container(server, {"server": server_name}, doc)
        for db in server.get("databases") or ():
            if not isinstance(db, dict):
                continue
            db_name = _container_name(db.get("name"))
            # Without schemas, SQLFlow's database is what sqlglot calls the db.
            db_ctx = {"server": server_name}
            if supports_schemas:
                db_ctx["database"] = db_name
            else:
                db_ctx["schema"] = db_name
            _read_json_container(db, db_ctx, doc)
            for schema in db.get("schemas") or ():
                if isinstance(schema, dict):
                    ctx = {**db_ctx, "schema": _container_name(schema.get("name"))}
                    _read_json_container(schema, ctx, doc)
        if not supports_catalogs:
            for schema in server.get("schemas") or ():
                if isinstance(schema, dict):
                    ctx = {"server": server_name, "schema": _container_name(schema.get("name"))}
                    _read_json_container(schema, ctx, doc)


def _container_name(value: Any) -> str:
    name = unquote(_str(value) or "")
    return "" if name.lower() in _DEFAULT_CONTAINERS else name


def _read_json_container(node: dict[str, Any], ctx: dict[str, str], doc: _RawDoc) -> None:
    for key in ("tables", "views", "others"):
        for obj in node.get(key) or ():
            if isinstance(obj, dict):
                default_type = {"tables": "table", "views": "view"}.get(key, "resultset")
                _read_json_dbobj(obj, ctx, doc, default_type=default_type)
    for p in node.get("processes") or ():
        if isinstance(p, dict):
            doc.processes.append(_json_process(p))
    for key in ("procedures", "functions", "triggers"):
        for p in node.get(key) or ():
            if isinstance(p, dict):
                doc.procedures.append(_json_procedure(p, ctx, default_type=key[:-1]))
    for pkg in node.get("packages") or ():
        if isinstance(pkg, dict):
            package = _str(pkg.get("name")) or ""
            doc.warnings.append(
                f"package {package or pkg.get('id', '?')!r} is not represented (its procedures are)"
            )
            for p in pkg.get("procedures") or ():
                if isinstance(p, dict):
                    proc = _json_procedure(p, ctx, default_type="procedure")
                    proc.attrs["package"] = package
                    doc.procedures.append(proc)


def _read_json_dbobj(
    obj: dict[str, Any], ctx: dict[str, str], doc: _RawDoc, default_type: str = "table"
) -> None:
    otype = (_str(obj.get("type")) or default_type).strip()
    low = otype.lower()
    if low == "process":
        doc.processes.append(_json_process(obj))
        return
    if "arguments" in obj or low in ("procedure", "trigger", "macro", "createprocedure"):
        doc.procedures.append(_json_procedure(obj, ctx, default_type="procedure"))
        return
    attrs = _json_scalars(obj)
    for key in ("database", "schema"):
        if key in ctx and ctx[key] and not attrs.get(key):
            attrs[key] = ctx[key]
    if isinstance(obj.get("processIds"), list):
        attrs["processIds"] = " ".join(str(p) for p in obj["processIds"])
    if low in _KINDS:
        tag = low
    else:  # every resultset type (select_list, insert-select, function, with_cte...) sits in dbobjs as such
        tag = "resultset"
        attrs["type"] = otype
    raw = _RawObject(
        id=_str(obj.get("id")) or "",
        tag=tag,
        attrs=attrs,
        spans=_json_spans(obj),
        ext=_json_ext(obj),
    )
    for col in obj.get("columns") or ():
        if isinstance(col, dict):
            raw.columns.append(
                _RawColumn(
                    id=_str(col.get("id")) or "",
                    name=_str(col.get("name")) or "",
                    spans=_json_spans(col),
                    system=str(col.get("source", "")).lower() == "system",
                    data_type=_str(col.get("dataType", col.get("datatype"))),
                    ext=_json_ext(col),
                )
            )
    doc.objects.append(raw)


def _json_process(obj: dict[str, Any]) -> _RawProcess:
    attrs = _json_scalars(obj)
    if attrs.get("type", "").lower() == "process":  # J1: a dbobj of type process; the kind is elsewhere
        attrs.pop("type")
        if attrs.get("processType"):
            attrs["type"] = attrs["processType"]
    return _RawProcess(id=attrs.get("id", ""), attrs=attrs, spans=_json_spans(obj), ext=_json_ext(obj))


def _json_procedure(obj: dict[str, Any], ctx: dict[str, str], default_type: str) -> _RawProcedure:
    attrs = _json_scalars(obj)
    attrs.setdefault("type", default_type)
    for key in ("database", "schema"):
        if key in ctx and ctx[key] and not attrs.get(key):
            attrs[key] = ctx[key]
    proc = _RawProcedure(id=attrs.get("id", ""), attrs=attrs, spans=_json_spans(obj), ext=_json_ext(obj))
    for arg in obj.get("arguments") or ():
        if isinstance(arg, dict):
            proc.arguments.append(
                _RawArgument(
                    name=_str(arg.get("name")) or "",
                    data_type=_str(arg.get("datatype", arg.get("dataType"))),
                    mode=_str(arg.get("inout")),
                    spans=_json_spans(arg),
                )
            )
    return proc


def _read_json_relation(rel: dict[str, Any], doc: _RawDoc) -> None:
    attrs = _json_scalars(rel)
    target_obj = rel.get("target", rel.get("caller"))
    target = _json_end(target_obj, "targetId") if isinstance(target_obj, dict) else None
    raw_sources = rel.get("sources", rel.get("source", rel.get("callees")))
    if isinstance(raw_sources, dict):
        raw_sources = [raw_sources]
    sources = [_json_end(s, "sourceId") for s in raw_sources or () if isinstance(s, dict)]
    doc.relations.append(
        _RawRelation(
            id=attrs.get("id", ""),
            type=attrs.get("type", "fdd"),
            attrs=attrs,
            target=target,
            sources=sources,
            ext=_json_ext(rel),
        )
    )


def _json_end(obj: dict[str, Any], object_key: str) -> _RawEnd:
    transforms: list[str] = []
    for tr in obj.get("transforms") or ():
        if isinstance(tr, dict) and isinstance(tr.get("code"), str) and tr["code"].strip():
            transforms.append(tr["code"].strip())
    parent_id = _str(obj.get("parentId", obj.get("parent_id")))
    object_id = _str(obj.get(object_key, obj.get(object_key.replace("Id", "_id"))))
    if parent_id is None and object_id is None and obj.get("column") is None:
        object_id = _str(obj.get("id"))  # table-level JSON: target {id} names the object itself
    return _RawEnd(
        id=_str(obj.get("id")),
        column=_str(obj.get("column", obj.get("name"))),
        parent_id=parent_id,
        parent_name=_str(obj.get("parentName", obj.get("parent_name"))),
        parent_alias=_str(obj.get("parentAlias", obj.get("parent_alias"))),
        spans=_json_spans(obj),
        system=str(obj.get("source", "")).lower() == "system",
        clause_type=_str(obj.get("clauseType")),
        object_id=object_id,
        transforms=transforms,
        function=_str(obj.get("function")),
    )


# ---------------------------------------------------------------------------------------------------------
# Building the model


def split_qualified(name: str) -> list[str]:
    """Split ``a.b.c`` into parts, keeping dots inside ``"..."``, ``[...]`` or ```...``` quoting.

    >>> split_qualified('[SalesLT].[Product]')
    ['[SalesLT]', '[Product]']
    >>> split_qualified('c..t')
    ['c', '', 't']
    """
    if '"' not in name and "[" not in name and "`" not in name:
        return name.split(".")
    # A part: blanks, then a quoted stretch if one opens there, then anything up to the next dot. Found
    # with str.find (linear, whatever the name: a 16 MB one of quotes and dots alike).
    parts: list[str] = []
    start, n = 0, len(name)
    while True:
        i = start
        while i < n and name[i].isspace():
            i += 1
        if i < n and name[i] in _CLOSING:
            end = name.find(_CLOSING[name[i]], i + 1)
            if end < 0:
                parts.append(name[start:])
                return parts
            i = end + 1
        dot = name.find(".", i)
        if dot < 0:
            parts.append(name[start:])
            return parts
        parts.append(name[start:dot])
        start = dot + 1


_CLOSING = {'"': '"', "[": "]", "`": "`"}


def qualify(name: str, schema: str | None, database: str | None) -> tuple[str, str | None, str | None]:
    """(name, db, catalog) from a SQLFlow name that may be qualified, and its schema/database attributes.

    >>> qualify("scott.emp", "scott", None)
    ('emp', 'scott', None)
    >>> qualify("WarehouseReporting.dbo.fnListToTable", "dbo", "WarehouseReporting")
    ('fnListToTable', 'dbo', 'WarehouseReporting')
    >>> qualify("a.b", None, "a")
    ('b', 'a', None)
    """
    parts = [unquote(p) for p in split_qualified(name)]
    schema = unquote(schema) if schema else None
    database = unquote(database) if database else None
    obj = parts[-1]
    db: str | None
    catalog: str | None
    if len(parts) >= 3:
        catalog, db = parts[-3], parts[-2]
    elif len(parts) == 2:
        db = parts[0]
        catalog = database if database and (schema or database.lower() != db.lower()) else None
    elif schema:
        db, catalog = schema, database
    else:
        db, catalog = database, None
    return obj, db or None, catalog or None


def normalise_process_type(value: str | None, name: str | None = None) -> str:
    """snake_case statement kind from SQLFlow's ``sst*`` enum, its human text, or the process name.

    >>> normalise_process_type("sstcreateview"), normalise_process_type("Create View")
    ('create_view', 'create_view')
    >>> normalise_process_type(None, "QUERY INSERT-1")
    'insert'
    """
    text = (value or "").strip()
    if not text and name:
        text = re.sub(r"-\d+$", "", re.sub(r"^query\s+", "", name.strip(), flags=re.IGNORECASE))
    snake = re.sub(r"[^0-9A-Za-z]+", "_", text).strip("_").lower()
    if snake in _PROCESS_TYPES:
        return _PROCESS_TYPES[snake]
    if snake.startswith("sst") and len(snake) > 3:
        return snake[3:]
    return snake or "unknown"


def is_pseudo_rows(name: str) -> bool:
    """Whether a column name is SQLFlow's row-set pseudo column (``PseudoRows`` or ``RelationRows``)."""
    return name.strip().lower() in _PSEUDO_NAMES


class _Builder:
    def __init__(self, doc: _RawDoc, file: str | None, scope: str) -> None:
        self.doc = doc
        self.file = file
        self.scope = scope
        self.problems: list[Problem] = []
        self.objects: dict[str, _RawObject] = {}
        # Declared tables that name no writer, once their datasets are made: raw object id -> dataset id
        # (all the later passes need of them; most objects of a catalogue-like export).
        self.plain: dict[str, str] = {}
        self.process_ids: dict[str, str] = {}  # raw id -> model id
        self.process_spans: dict[str, tuple[_RawSpan, ...]] = {}
        self.process_types: dict[str, str] = {}
        self._taken: dict[str, int] = {}  # model process id -> times made (a repeated queryHashId)
        self._starts: dict[str, list[tuple[tuple[int, int], _RawSpan, str]]] | None = None
        self._start_keys: dict[str, list[tuple[int, int]]] = {}
        self.upstream: dict[str, set[str]] = defaultdict(set)  # raw object id -> processes writing into it
        # raw column id -> (raw object id, name) of its first declaration; (raw object id, raw column id) ->
        # column name where that differs (a column id reused, a column renamed): most columns are in one map.
        self.global_columns: dict[str, tuple[str, str]] = {}
        self.column_by_id: dict[tuple[str, str], str] = {}
        # Column ids the relations' ends name (each kept as one string): only those are ever looked up, so
        # only those are in the maps above (most columns of a catalogue-like export are in no relation).
        self._named_columns: dict[str, str] = {}
        self.datasets: dict[str, _LightDataset] = {}  # model id -> dataset
        self.relations: list[Relation] = []
        self._keys: list[str | None] = []  # per column-level relation: its group's key (chunked reading)
        self._parent: dict[str, str] = {}  # union-find of group tokens
        self._chunked = False
        self._quiet = False  # a second pass over the relations: its warnings were said in the first
        # What survey() found: (process id, processType, relation id, v2) of undeclared processes; (relation
        # id, parent id, parent name, parent alias, function target, v2) of undeclared objects; (target
        # object, raw process id) writes and (source object, target object, raw process id) edges.
        self._survey_processes: list[tuple[str, str | None, str, bool]] = []
        self._survey_objects: list[tuple[str, str, str | None, str | None, bool, bool]] = []
        self._survey_writes: set[tuple[str, str | None]] = set()
        self._survey_edges: set[tuple[str, str, str | None]] = set()
        # Relations that name no process, by (target object, source objects, statement kind): the
        # processes derive_processes() makes for the statements they belong to.
        self._survey_unnamed: dict[_UnnamedKey, None] = {}
        self._derived: dict[_UnnamedKey, str] = {}  # key -> raw id of its derived process
        self._statement: dict[str, str] = {}  # resultset raw id -> its statement's root (union-find)
        self._derived_scope: dict[str, str] = {}  # statement root -> raw id of its derived process

    def warn(self, message: str, span: _RawSpan | None = None) -> None:
        if self._quiet:
            return
        self.problems.append(
            Problem(
                message=message,
                severity=Severity.WARNING,
                kind="sqlflow",
                file=self.file,
                line=span.line if span else None,
                column=span.column if span else None,
            )
        )

    # -- processes -------------------------------------------------------------------------------------
    def processes(self) -> list[Process]:
        for raw_pid, process_type, rel_id, v2 in self._survey_processes:
            ptype = normalise_process_type(process_type or "unknown")
            pname = "Query " + ptype.replace("_", " ").title() if ptype != "unknown" else raw_pid
            attrs = {"id": raw_pid, "name": pname, "type": ptype}
            self.doc.processes.append(_RawProcess(id=raw_pid, attrs=attrs, spans=(), ext={}))
            if not v2:
                self.warn(
                    f"relation {rel_id!r} names process {raw_pid!r} that the document does not declare; "
                    "rebuilt from the relation"
                )
        return self._make_processes(self.doc.processes)

    def _make_processes(self, raws: list[_RawProcess], *, register_spans: bool = True) -> list[Process]:
        out: list[Process] = []
        taken = self._taken
        for raw in raws:
            if not raw.id:
                self.warn(f"process without id ({raw.attrs.get('name', '?')!r}) skipped")
                continue
            name = raw.attrs.get("name") or f"Process {raw.id}"
            qhash = (
                raw.attrs.get("queryHashId")
                or hashlib.sha256(
                    "\x00".join((self.scope, raw.id, name, raw.attrs.get("coordinate", ""))).encode()
                ).hexdigest()
            )
            pid = raw.ext.get("id")
            if not pid:
                pid = f"process:{qhash[:16]}"
                taken[pid] = taken.get(pid, 0) + 1
                if taken[pid] > 1:
                    pid = f"{pid}#{taken[pid]}"
            procedure = raw.attrs.get("procedureName")
            if procedure and procedure.lower() == "batchqueries":
                procedure = None
            index = raw.ext.get("statementIndex")
            out.append(
                Process(
                    id=pid,
                    type=raw.ext.get("type") or normalise_process_type(raw.attrs.get("type"), name),
                    name=name,
                    query_hash=qhash,
                    statement_index=int(index) if index and index.isdigit() else None,
                    sql=raw.ext.get("sql"),
                    span=raw.spans[0].span() if raw.spans else None,
                    procedure=procedure,
                    source_file=raw.ext.get("sourceFile"),
                )
            )
            self.process_ids[raw.id] = pid
            if register_spans:  # a derived statement's span encloses nothing it does not own already
                self.process_spans[raw.id] = raw.spans
            self.process_types[raw.id] = out[-1].type
        return out

    # -- procedures ------------------------------------------------------------------------------------
    def procedures(self) -> list[Procedure]:
        out: list[Procedure] = []
        seen: set[str] = set()
        for raw in self.doc.procedures:
            raw_name = raw.attrs.get("name", raw.id)
            package = unquote(raw.attrs.get("package", ""))
            if package:  # the package is part of the procedure's own name, not its db
                parts = split_qualified(raw_name)
                kept = [p for p in parts[:-1] if unquote(p).lower() != package.lower()]
                raw_name = ".".join([*kept, parts[-1]])
            name, db, catalog = qualify(raw_name, raw.attrs.get("schema"), raw.attrs.get("database"))
            if package:
                name = f"{package}.{name}"
            ptype = (raw.attrs.get("type") or "procedure").lower()
            if ptype == "createprocedure":
                ptype = "procedure"
            pid = raw.ext.get("id") or "procedure:" + ".".join(p for p in (catalog, db, name) if p).lower()
            if pid in seen:  # a script that creates it twice: one procedure, as for objects
                self.warn(f"procedure {raw_name!r} declared twice; the first declaration is used")
                continue
            seen.add(pid)
            out.append(
                Procedure(
                    id=pid,
                    name=name,
                    type=ptype,
                    db=db,
                    catalog=catalog,
                    arguments=tuple(
                        Argument(
                            name=a.name,
                            data_type=a.data_type,
                            mode=a.mode,
                            span=a.spans[0].span() if a.spans else None,
                        )
                        for a in raw.arguments
                    ),
                    span=raw.spans[0].span() if raw.spans else None,
                )
            )
        return out

    # -- datasets --------------------------------------------------------------------------------------
    def collect_objects(self) -> None:
        for obj in self.doc.objects:
            if not obj.id:
                self.warn(f"<{obj.tag}> {obj.attrs.get('name', '?')!r} without id skipped")
                continue
            if obj.id in self.objects:
                self.warn(f"object id {obj.id!r} declared twice; the first declaration is used")
                continue
            if obj.tag not in _PERMANENT_TAGS or "kind" in obj.ext:  # only resultsets' order is asked
                obj.position = len(self.objects)
            self.objects[obj.id] = obj
        # Objects relations name but the document does not declare (fragments copied out of docs).
        for rel_id, parent_id, parent_name, parent_alias, function, v2 in self._survey_objects:
            if parent_id in self.objects or parent_id in self.process_ids:
                continue
            name = parent_name or parent_id
            tag = "resultset" if _RESULTSET_NAME.match(unquote(name)) else "table"
            attrs = {"name": name}
            if function:
                tag, attrs["type"] = "resultset", "function"  # the function node a value passes through
            if parent_alias:
                attrs["alias"] = parent_alias
            self.objects[parent_id] = _RawObject(
                id=parent_id, tag=tag, attrs=attrs, spans=(), declared=False, position=len(self.objects)
            )
            if not v2:
                self.warn(
                    f"relation {rel_id!r} names object {parent_id!r} ({name}) that the document does "
                    f"not declare; rebuilt as a {tag} from the relation"
                )

    def survey(self) -> None:
        """One pass over the relations for what the builder needs of them all before resolving any: the
        processes and objects they name but the document does not declare, and the object-level edges."""
        declared_processes = {p.id for p in self.doc.processes}
        declared_objects = {o.id for o in self.doc.objects if o.id}
        named: set[str] = set()
        named_columns = self._named_columns
        for rel in self.doc.iter_relations():
            pid = rel.attrs.get("processId")
            v2 = bool(rel.ext.get("v2"))
            for end in (rel.target, *rel.sources):
                if end is not None and end.id:
                    named_columns.setdefault(end.id, end.id)
            if pid and pid not in declared_processes:
                declared_processes.add(pid)
                self._survey_processes.append((pid, rel.attrs.get("processType"), rel.id, v2))
            for end in (rel.target, *rel.sources):
                if end is None or end.parent_id is None or end.parent_id in declared_objects:
                    continue
                if end.parent_id not in named:
                    named.add(end.parent_id)
                    function = end is rel.target and rel.attrs.get("effectType", "").lower() == "function"
                    self._survey_objects.append(
                        (rel.id, end.parent_id, end.parent_name, end.parent_alias, function, v2)
                    )
            if rel.target is None or rel.target.parent_id is None:
                continue
            self._survey_writes.add((rel.target.parent_id, pid))
            if not pid and "process" not in rel.ext:
                self._survey_unnamed[_unnamed_key(rel)] = None
            for src in rel.sources:
                if src.parent_id is not None:
                    self._survey_edges.add((src.parent_id, rel.target.parent_id, pid))

    def derive_processes(self) -> list[Process]:
        """Processes for the statements whose relations name none (an export without process objects, or
        edges SQLFlow left without one), as :meth:`processes` makes them from declared ones.

        A statement is a set of resultsets joined by relations (an ``INSERT-SELECT`` and the subqueries and
        CTEs feeding it); its process writes the permanent objects those resultsets flow into, and its
        type is the edges' ``effectType`` (SQLFlow's statement kind). An edge between two permanent objects
        (a rename, a foreign key) is a statement of its own per target and kind. Edges into an object whose
        writer is known (``processIds``, or another edge's process) are left to :meth:`_writing_process`.
        """
        for target_id, pid in self._survey_writes:
            if pid in self.process_ids:
                self.upstream[target_id].add(pid)
        parent = self._statement
        for oid, obj in self.objects.items():
            if self._kind(obj) is DatasetKind.RESULTSET:
                parent[oid] = oid
        for source_id, target_id, _ in self._survey_edges:
            if source_id in parent and target_id in parent:
                a, b = _root(parent, source_id), _root(parent, target_id)
                if a != b:
                    parent[max(a, b, key=self._order)] = min(a, b, key=self._order)
        raw_by_statement: dict[tuple[str, ...], _RawProcess] = {}
        for key in self._survey_unnamed:
            target_id, source_ids, effect_type, rel_type = key
            mapped = _RELATION_TYPES.get(rel_type)
            if mapped is None or mapped[0] not in _DERIVED_TYPES:
                continue  # a join or a call moves no data: no statement wrote anything by it
            target = self.objects.get(target_id)
            if target is None or self._kind(target) in _STATEMENT_LOCAL:
                continue  # into a resultset: the chain takes the process of its last hop
            if self._writing_process(target_id, effect_type or None) is not None:
                continue
            kind = effect_type or ("foreign_key" if rel_type == "er" else "")
            local = next((s for s in source_ids if s in parent), None)
            statement = ("rs", _root(parent, local)) if local is not None else ("obj", target_id, kind)
            raw = raw_by_statement.get(statement)
            if raw is None:
                ptype = normalise_process_type(kind) if kind else "unknown"
                name = "Query " + ptype.replace("_", " ").title() if ptype != "unknown" else "Query"
                raw_id = f"derived-{len(raw_by_statement) + 1}"
                while raw_id in self.process_ids:
                    raw_id += "'"
                raw = _RawProcess(id=raw_id, attrs={"name": name, "type": ptype}, spans=())
                raw_by_statement[statement] = raw
                if local is not None:
                    self._derived_scope[statement[1]] = raw.id
            self._derived[key] = raw.id
        if not raw_by_statement:
            return []
        # A derived statement's span: from its first resultset's start to its last one's end.
        hull: dict[str, _RawSpan] = {}
        for oid in parent:
            spans = self.objects[oid].spans
            pid = self._derived_scope.get(_root(parent, oid))
            if pid is None or not spans:
                continue
            old = hull.get(pid)
            first = spans[0]
            if old is None:
                hull[pid] = _RawSpan(
                    first.line, first.column, first.end_line, first.end_column, first.file_hash
                )
            elif old.file_hash == first.file_hash:
                if (first.line, first.column) < (old.line, old.column):
                    old.line, old.column = first.line, first.column
                if (first.end_line, first.end_column) > (old.end_line, old.end_column):
                    old.end_line, old.end_column = first.end_line, first.end_column
        raws = list(raw_by_statement.values())
        for raw in raws:
            if raw.id in hull:
                raw.spans = (hull[raw.id],)
        self.warn(
            f"{len(raws)} statement(s) have relations but no process object: their processes are derived "
            "from the relations (one per statement, its kind from effectType; no SQL text)"
        )
        return self._make_processes(raws, register_spans=False)

    def _order(self, oid: str) -> tuple[int, str]:
        """Document order of objects (the union-find's roots are the first of their statement)."""
        obj = self.objects.get(oid)
        return (obj.position if obj is not None else 0, oid)

    def _kind(self, obj: _RawObject) -> DatasetKind:
        kind = _KINDS.get(obj.tag)
        if obj.ext.get("kind"):
            try:
                return DatasetKind(obj.ext["kind"])
            except ValueError:
                self.warn(f"unknown dataset kind {obj.ext['kind']!r} on object {obj.id!r}")
        if kind is None:
            return DatasetKind.RESULTSET
        if kind is DatasetKind.TABLE:
            t = obj.attrs.get("type", "").lower()
            if t in ("pseudotable", "constanttable"):
                return _KINDS[t]
        return kind

    def _scope_of(self, obj: _RawObject, downstream: dict[str, set[str]]) -> str:
        if obj.spans:
            enclosing = self._enclosing_process(obj.spans[0])
            if enclosing is not None:
                return self.process_ids[enclosing]
        writers = self.upstream.get(obj.id, set())
        if len(writers) == 1:
            return self.process_ids[next(iter(writers))]
        candidates = downstream.get(obj.id, set())
        if len(candidates) == 1:
            return self.process_ids[next(iter(candidates))]
        if obj.id in self._statement:
            derived = self._derived_scope.get(_root(self._statement, obj.id))
            if derived is not None:
                return self.process_ids[derived]
        return self.scope

    def _statement_scopes(self, downstream: dict[str, set[str]]) -> dict[str, str]:
        """The scope of every statement-local object. Resultsets of no process keep the file's scope, but
        same-named ones of different statements never share it (they would merge into one dataset: false
        edges across statements, and chains that grow with the square of the file)."""
        scopes: dict[str, str] = {}
        loose: dict[str, dict[str, None]] = {}  # resultset name -> statement roots of that name, in order
        read_into = {
            root for target_id, _ in self._survey_writes if (root := _root(self._statement, target_id))
        }
        for oid, obj in self.objects.items():
            kind = obj.kind
            if kind not in _STATEMENT_LOCAL:
                continue
            scope = scopes[oid] = self._scope_of(obj, downstream)
            if scope == self.scope and kind is DatasetKind.RESULTSET and "id" not in obj.ext:
                name = obj.ext.get("name") or unquote(obj.attrs.get("name") or oid)
                loose.setdefault(name, {})[_root(self._statement, oid)] = None
        if not loose:
            return scopes
        index: dict[tuple[str, str], int] = {}
        for name, roots in loose.items():
            for k, root in enumerate(roots, start=1):
                index[(name, root)] = k
        for oid, scope in scopes.items():
            obj = self.objects[oid]
            if scope == self.scope and obj.kind is DatasetKind.RESULTSET and "id" not in obj.ext:
                name = obj.ext.get("name") or unquote(obj.attrs.get("name") or oid)
                k = index[(name, _root(self._statement, oid))]
                if k > 1:
                    scopes[oid] = f"{self.scope}#{k}"
        statements = {root: name for name, roots in loose.items() for root in roots if root in read_into}
        if statements:
            names = sorted(set(statements.values()))
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            self.warn(
                f"{len(statements)} statement(s) read data but write no table, view or path (their "
                f"results: {shown}): a query's reads have nothing to deliver to Atlas"
            )
        return scopes

    def _enclosing_process(self, span: _RawSpan) -> str | None:
        """The one process (statement) whose coordinates enclose ``span``, among the nearest before it."""
        if self._starts is None:
            index: dict[str, list[tuple[tuple[int, int], _RawSpan, str]]] = defaultdict(list)
            for pid, spans in self.process_spans.items():
                for s in spans:
                    index[s.file_hash].append(((s.line, s.column), s, pid))
            self._starts = {h: sorted(v, key=lambda t: (t[0], t[2])) for h, v in index.items()}
            self._start_keys = {h: [e[0] for e in v] for h, v in self._starts.items()}
        entries = self._starts.get(span.file_hash, [])
        pos = bisect.bisect_right(self._start_keys.get(span.file_hash, []), (span.line, span.column))
        found = {pid for _, s, pid in entries[max(0, pos - 8) : pos] if s.encloses(span)}
        return next(iter(found)) if len(found) == 1 else None

    def _downstream_processes(self) -> dict[str, set[str]]:
        """Per statement-local object: the processes its data reaches before the next permanent object."""
        edges: dict[str, set[tuple[str, str | None]]] = defaultdict(set)
        for source_id, target_id, pid in self._survey_edges:
            edges[source_id].add((target_id, pid if pid in self.process_ids else None))
        result: dict[str, set[str]] = {}
        for oid, obj in self.objects.items():
            if self._kind(obj) not in _STATEMENT_LOCAL:
                continue
            found: set[str] = set()
            seen = {oid}
            stack = [oid]
            while stack:
                cur = stack.pop()
                for nxt, pid in edges.get(cur, ()):
                    if pid:
                        found.add(pid)
                    nobj = self.objects.get(nxt)
                    if nobj is None:
                        continue
                    if self._kind(nobj) in _STATEMENT_LOCAL:
                        if nxt not in seen:
                            seen.add(nxt)
                            stack.append(nxt)
                    else:
                        pids = [p for p in nobj.attrs.get("processIds", "").split() if p in self.process_ids]
                        if len(pids) == 1:
                            found.add(pids[0])
            result[oid] = found
        return result

    def datasets_from_objects(self) -> None:
        downstream = self._downstream_processes()
        for obj in self.objects.values():
            obj.kind = self._kind(obj)
        scopes = self._statement_scopes(downstream)
        del downstream
        for oid, obj in self.objects.items():
            kind = obj.kind
            assert kind is not None
            attrs = (
                obj.attrs
                if isinstance(obj.attrs, dict)
                else dict(zip(obj.attrs[0], obj.attrs[1:], strict=True))
            )
            raw_name = attrs.get("name") or attrs.get("displayName") or attrs.get("uri") or oid
            location = attrs.get("uri") or attrs.get("location")  # stages/datasources: location
            uri = unquote(location) if location else None
            db: str | None = None
            catalog: str | None = None
            if kind is DatasetKind.PATH:
                name = unquote(raw_name)
                uri = uri or name
            elif kind in (DatasetKind.RESULTSET, DatasetKind.VARIABLE, DatasetKind.CONSTANT_TABLE):
                name = unquote(raw_name)
            else:
                # J2: unqualified name + qualified displayName; prefer the latter when it ends in the former.
                display = attrs.get("displayName", "")
                qualified = (
                    display
                    if len(split_qualified(display)) > 1 and split_qualified(display)[-1] == raw_name
                    else raw_name
                )
                name, db, catalog = qualify(qualified, attrs.get("schema"), attrs.get("database"))
            name = obj.ext.get("name", name)
            db = obj.ext["db"] or None if "db" in obj.ext else db
            catalog = obj.ext["catalog"] or None if "catalog" in obj.ext else catalog
            if kind is DatasetKind.RESULTSET:
                sub_type = attrs.get("type")
                if sub_type and sub_type.lower() == "resultset":
                    sub_type = None
            else:
                sub_type = attrs.get("subType") or attrs.get("tableType")
            scope = scopes.get(oid)
            ds_id = obj.ext.get("id") or dataset_id(
                kind, uri if kind is DatasetKind.PATH and uri else name, db, catalog, scope=scope
            )
            process_ids: list[str] = []
            for token in attrs.get("processIds", "").split():
                if token in self.process_ids:
                    process_ids.append(self.process_ids[token])
                else:
                    self.warn(f"object {oid!r} ({raw_name}) names unknown process {token!r} in processIds")
            obj.ds_id = ds_id
            spans = _span_keys(obj.spans)
            ds = self.datasets.get(ds_id)
            values = {
                "db": db,
                "catalog": catalog,
                "sub_type": sub_type or None,
                "uri": uri,
                "alias": attrs.get("alias") or None,
                "file_format": attrs.get("fileFormat") or None,
            }
            if ds is None:
                ds = self.datasets[ds_id] = _LightDataset(
                    ds_id, kind, name, None, None, tuple(process_ids), spans
                )
                ds.name = name  # its length only, when the id ends with it
            else:  # another object of the same dataset: its first values stand, its lists grow
                ds.name = name
                ds.process_ids += tuple(process_ids)
                ds.spans = _join_keys(ds.spans, spans)
            ds.keep(values)
            for col in obj.columns:
                self._add_column(oid, col.id, col.name, col.system, col.spans, col.data_type, col.ext)
            # What the relations still need of the object is its writers: the rest is let go (memory).
            obj.columns, obj.spans, obj.position = _NO_COLUMNS, (), 0
            writers = obj.attrs.get("processIds")
            obj.attrs = _Attrs.of({"processIds": writers}) if writers else _NO_OBJECT_ATTRS
            obj.ext = _NO_ATTRS
            if not writers and obj.declared and kind is DatasetKind.TABLE:
                self.plain[oid] = ds_id
        self.doc.objects = []
        self.objects = {oid: obj for oid, obj in self.objects.items() if oid not in self.plain}

    def dataset(self, ds_id: str) -> Dataset:
        """The model's dataset, made from what the builder gathered (see :class:`_LightDataset`)."""
        return self.datasets[ds_id].dataset()

    def _column_name(self, oid: str, raw_name: str, system: bool) -> tuple[str, bool]:
        if is_pseudo_rows(raw_name):
            return PSEUDO_ROWS, True
        obj = self.objects.get(oid)
        if obj is not None and obj.kind is DatasetKind.CONSTANT_TABLE:
            return raw_name, system  # literal text: its quotes are the value
        return unquote(raw_name), system

    def _add_column(
        self,
        oid: str,
        col_id: str | None,
        raw_name: str,
        system: bool,
        spans: tuple[_RawSpan, ...],
        data_type: str | None,
        ext: dict[str, str],
    ) -> str:
        if "name" in ext:
            name = ext["name"]
        else:
            name, system = self._column_name(oid, raw_name, system)
        ds = self.datasets[self._ds_id(oid)]
        keys = _span_keys(spans)
        old = ds.column(name)
        if old is None:
            ds.add(_LightColumn(name, system, data_type or None, ext.get("expression"), keys))
        else:
            old.spans = _join_keys(old.spans, keys)
            old.system = old.system or system
            old.data_type = old.data_type or data_type or None
            old.expression = old.expression or ext.get("expression")
        col_id = self._named_columns.get(col_id) if col_id else None
        if col_id is not None:
            first = self.global_columns.setdefault(col_id, (oid, name))
            key = (oid, col_id)
            if first != (oid, name) or key in self.column_by_id:
                self.column_by_id[key] = name
        return name

    # -- relations -------------------------------------------------------------------------------------
    def _resolve(self, end: _RawEnd, rel: _RawRelation) -> ColumnRef | None:
        oid = end.parent_id
        ds_id = self._ds_id(oid) if oid is not None else ""
        if oid is None or not ds_id:
            self.warn(
                f"relation {rel.id!r}: endpoint {end.id!r} ({end.parent_name}.{end.column}) names no known "
                "object; edge dropped",
                end.spans[0] if end.spans else None,
            )
            return None
        name = self.column_by_id.get((oid, end.id)) if end.id and self.column_by_id else None
        if (
            name is None
            and end.id
            and end.id in self.global_columns
            and self.global_columns[end.id][0] == oid
        ):
            name = self.global_columns[end.id][1]
        if name is None:
            raw_name = end.column or end.id or "?"
            if oid in self.plain or self.objects[oid].declared:
                self.warn(
                    f"relation {rel.id!r}: column {end.id!r} ({raw_name}) is not declared in object "
                    f"{oid!r}; added",
                    end.spans[0] if end.spans else None,
                )
            name = self._add_column(oid, end.id, raw_name, end.system, (), None, {})
        return ColumnRef(dataset_id=ds_id, column=name)

    def _column_relations(self, *, table_level: bool = True) -> Iterator[dict[str, Any]]:
        """The column-level relations (as ``Relation`` arguments) in document order; table-level ones go
        to ``self.relations`` at the end (``table_level``)."""
        table_edges: list[
            tuple[_RawRelation, str, str]
        ] = []  # (relation, source object id, target object id)
        for rel in self.doc.iter_relations():
            mapped = _RELATION_TYPES.get(rel.type.strip().lower())
            if mapped is None:
                self.warn(f"relation {rel.id!r} has unknown type {rel.type!r}; skipped")
                continue
            if rel.target is None or not rel.sources:
                self.warn(f"relation {rel.id!r} lacks a target or sources; skipped")
                continue
            if rel.target.parent_id is None and rel.target.object_id is not None:
                for src in rel.sources:
                    sid = src.object_id if src.parent_id is None else None
                    if sid is None:
                        self.warn(f"relation {rel.id!r} mixes table-level and column-level ends; skipped")
                        continue
                    table_edges.append((rel, sid, rel.target.object_id))
                continue
            target = self._resolve(rel.target, rel)
            if target is None:
                continue
            for src in rel.sources:
                if src.parent_id is None and src.object_id is not None:
                    self.warn(f"relation {rel.id!r} mixes table-level and column-level ends; skipped")
                    continue
                source = self._resolve(src, rel)
                if source is None:
                    continue
                yield self._relation(rel, mapped, source, target, src)
        if table_edges and table_level:
            self._table_level(table_edges)

    def _relation(
        self,
        rel: _RawRelation,
        mapped: tuple[RelationType, ClauseType | None],
        source: ColumnRef,
        target: ColumnRef,
        src: _RawEnd,
    ) -> dict[str, Any]:
        rtype, clause = mapped
        if src.clause_type:
            key = re.sub(r"[\s_-]+", "", src.clause_type).lower()
            if key in _CLAUSE_TYPES:
                clause = _CLAUSE_TYPES[key]
            else:
                self.warn(f"relation {rel.id!r}: unknown clauseType {src.clause_type!r} not kept")
        flow = _FLOWS.get(rel.ext.get("flow", ""))
        effect = _EFFECTS.get(rel.ext.get("effect", rel.attrs.get("effect", "")))
        effect_type = rel.attrs.get("effectType") or None
        if effect_type in _EFFECTS:  # a v2 copy strength, not a v1 statement kind
            effect, effect_type = _EFFECTS[effect_type], None
        pid_raw = rel.attrs.get("processId")
        process_id = None
        if "process" in rel.ext:  # written by us: exactly this process, or explicitly none
            process_id = rel.ext["process"] or None
            if process_id is not None and process_id not in self.process_ids.values():
                self.warn(f"relation {rel.id!r} names unknown process {process_id!r}")
                process_id = None
        elif pid_raw:
            process_id = self.process_ids.get(pid_raw)
            if process_id is None:
                self.warn(f"relation {rel.id!r} names unknown process {pid_raw!r}")
        elif rel.target is not None and rel.target.parent_id is not None:
            process_id = self._writing_process(rel.target.parent_id, effect_type)
            if process_id is None and self._derived:
                derived = self._derived.get(_unnamed_key(rel))
                process_id = self.process_ids[derived] if derived is not None else None
        if rel.ext.get("sourceField"):  # written by us: a field below the column (docs/nested-data.md)
            source = ColumnRef(
                dataset_id=source.dataset_id, column=source.column, field=rel.ext["sourceField"]
            )
        if rel.ext.get("targetField"):
            target = ColumnRef(
                dataset_id=target.dataset_id, column=target.column, field=rel.ext["targetField"]
            )
        return {
            "type": rtype,
            "source": source,
            "target": target,
            "effect_type": effect_type,
            "clause_type": clause,
            "process_id": process_id,
            "flow": flow,
            "effect": effect,
            "transform": src.transforms[-1] if src.transforms else None,
            "function": rel.attrs.get("function") or src.function or None,
            "span": src.spans[0].span() if src.spans else None,
        }

    def _writing_process(self, oid: str, effect_type: str | None) -> str | None:
        """The process that wrote an edge without ``processId``: the target's only writer, or the one of its
        writers whose statement kind is the edge's ``effectType`` (SQLFlow's own table-level rule)."""
        obj = self.objects.get(oid)
        if obj is None and oid not in self.plain:
            return None
        tokens = obj.attrs.get("processIds", "") if obj is not None else ""
        writers = [t for t in tokens.split() if t in self.process_ids]
        if not writers:  # no processIds: the processes other edges into the object name
            writers = sorted(self.upstream.get(oid, ()))
        if len(writers) > 1 and effect_type:
            kind = normalise_process_type(effect_type)
            writers = [t for t in writers if self.process_types.get(t) == kind]
        return self.process_ids[writers[0]] if len(writers) == 1 else None

    def _table_level(self, edges: list[tuple[_RawRelation, str, str]]) -> None:
        """object -> process -> object edges become PseudoRows edges from each source to each target."""
        into: dict[str, dict[str, RelationType]] = defaultdict(dict)  # process raw id -> source obj -> type
        out_of: dict[str, dict[str, RelationType]] = defaultdict(dict)  # process raw id -> target obj -> type
        direct: list[tuple[str, str, RelationType]] = []
        for rel, sid, tid in edges:
            rtype = _RELATION_TYPES[rel.type.strip().lower()][0]
            s_proc, t_proc = sid in self.process_ids, tid in self.process_ids
            if (not s_proc and not self._has_dataset(sid)) or (not t_proc and not self._has_dataset(tid)):
                self.warn(f"table-level relation {rel.id!r} names unknown object {sid!r} or {tid!r}; skipped")
                continue
            if t_proc and not s_proc:
                into[tid][sid] = _stronger(into[tid].get(sid), rtype)
            elif s_proc and not t_proc:
                out_of[sid][tid] = _stronger(out_of[sid].get(tid), rtype)
            elif not s_proc and not t_proc:
                direct.append((sid, tid, rtype))
            else:
                self.warn(f"table-level relation {rel.id!r} joins two processes; not represented")
        for oid, obj in self.objects.items():
            for token in obj.attrs.get("processIds", "").split():
                if token in self.process_ids and token in into:
                    out_of[token].setdefault(oid, RelationType.FDD)
        for pid in sorted(set(into) | set(out_of)):
            if not into.get(pid) or not out_of.get(pid):
                self.warn(f"process {pid!r} has table-level edges on one side only; those edges are dropped")
                continue
            for sid, s_type in into[pid].items():
                for tid, t_type in out_of[pid].items():
                    self._pseudo_edge(sid, tid, _weaker(s_type, t_type), self.process_ids[pid])
        for sid, tid, rtype in direct:
            self._pseudo_edge(sid, tid, rtype, None)

    def _has_dataset(self, oid: str) -> bool:
        return bool(self._ds_id(oid))

    def _ds_id(self, oid: str) -> str:
        """The dataset id of a raw object ("": none, or not made yet)."""
        plain = self.plain.get(oid)
        if plain is not None:
            return plain
        obj = self.objects.get(oid)
        return obj.ds_id if obj is not None else ""

    def _pseudo_edge(self, sid: str, tid: str, rtype: RelationType, process_id: str | None) -> None:
        source = self._add_column(sid, None, PSEUDO_ROWS, True, (), None, {})
        target = self._add_column(tid, None, PSEUDO_ROWS, True, (), None, {})
        self.relations.append(
            Relation(
                type=rtype,
                source=ColumnRef(dataset_id=self._ds_id(sid), column=source),
                target=ColumnRef(dataset_id=self._ds_id(tid), column=target),
                process_id=process_id,
            )
        )

    # -- errors ----------------------------------------------------------------------------------------
    def errors(self) -> None:
        for err in self.doc.errors:
            etype = err.type or "error"
            severity = (
                Severity.ERROR
                if etype.lower() in ("syntaxerror", "analyzeerror", "error")
                else Severity.WARNING
            )
            span = err.spans[0] if err.spans else None
            # The position is in the SQL SQLFlow analysed, not in this file: it goes into the message.
            where = f" (SQL line {span.line}, column {span.column})" if span else ""
            self.problems.append(
                Problem(
                    message=f"SQLFlow {etype}{where}: {err.message}",
                    severity=severity,
                    kind="sqlflow",
                    file=self.file,
                )
            )

    def prepare(self, chunked: bool) -> Lineage:
        """Everything but the pieces: the last piece's lineage (all datasets, processes, procedures; every
        relation too unless ``chunked``), with every problem found. Raises for an inconsistent document."""
        for message in self.doc.warnings:
            self.warn(message)
        self.survey()
        processes = self.processes()
        procedures = self.procedures()
        self.collect_objects()
        processes = [*processes, *self.derive_processes()]
        self.datasets_from_objects()
        local = {o.ds_id for o in self.objects.values() if o.kind in _STATEMENT_LOCAL}
        for kwargs in self._column_relations():
            if chunked:
                self._keys.append(self._group(kwargs, local))
            else:
                self.relations.append(Relation(**kwargs))
        if chunked and self.relations:  # table-level edges: one piece, with everything
            self._keys = []
            self._quiet = True
            self.relations.extend(Relation(**kw) for kw in self._column_relations(table_level=False))
            self._quiet = False
        self._chunked = chunked and not self.relations
        self.errors()
        self.doc.processes, self.doc.procedures = [], []  # in the model now
        # Chunked, the datasets are made piece by piece (:meth:`pieces`): never all of them at once.
        datasets = [] if self._chunked else [self.dataset(ds_id) for ds_id in self.datasets]
        try:
            lineage = Lineage(
                datasets=tuple(datasets),
                processes=tuple(processes),
                relations=tuple(self.relations),
                procedures=tuple(procedures),
            )
        except ValueError as e:
            msg = f"SQLFlow document does not form a consistent lineage: {e}"
            raise ExtractionError(msg, file=self.file) from e
        self.relations = []
        if not self._chunked:
            self.datasets = {}  # in the lineage now
        logger.debug(
            "read SQLFlow %s: %d datasets, %d processes, %d relations, %d problems",
            self.file or "<input>",
            len(self.datasets) if self._chunked else len(lineage.datasets),
            len(lineage.processes),
            len(lineage.relations) if not self._chunked else len(self._keys),
            len(self.problems),
        )
        return lineage

    def _group(self, kwargs: dict[str, Any], local: set[str]) -> str | None:
        """Join the relation's process and its statement-local ends into one group (union-find); the
        relation's key is one of them (None: a loose edge between permanent objects, a group alone)."""
        ends: tuple[str, str] = (kwargs["source"].dataset_id, kwargs["target"].dataset_id)
        tokens = [t for t in ends if t in local]
        process_id: str | None = kwargs["process_id"]
        if process_id:
            tokens.append(process_id)
        if not tokens:
            return None
        first = self._find(tokens[0])
        for t in tokens[1:]:
            root = self._find(t)
            if root != first:
                self._parent[root] = first
        return tokens[0]

    def _find(self, token: str) -> str:
        parent = self._parent
        root = parent.setdefault(token, token)
        while parent[root] != root:
            root = parent[root]
        while parent[token] != root:  # path compression
            parent[token], token = root, parent[token]
        return root

    def pieces(self, final: Lineage, chunk_relations: int | None) -> Iterator[ExtractionResult]:
        """The relations in pieces of about ``chunk_relations`` (whole groups), then the last piece."""
        problems = tuple(self.problems)
        if not self._chunked or chunk_relations is None:
            yield ExtractionResult(lineage=final, problems=problems)
            return
        processes = {p.id: p for p in final.processes}
        keys = self._keys
        last: dict[str, int] = {}
        for i, key in enumerate(keys):
            if key is not None:
                last[self._find(key)] = i
        waiting: dict[str, list[Relation]] = {}
        piece: list[Relation] = []
        self._quiet = True
        for i, kwargs in enumerate(self._column_relations()):
            rel = Relation(**kwargs)
            key = keys[i]
            if key is None:
                piece.append(rel)
            else:
                root = self._find(key)
                waiting.setdefault(root, []).append(rel)
                if last[root] == i:
                    piece.extend(waiting.pop(root))
            if len(piece) >= chunk_relations:
                yield _piece(piece, self.dataset, processes)
                piece = []
        self._quiet = False
        if piece:
            yield _piece(piece, self.dataset, processes)
        del piece, waiting
        # The datasets too, about as many columns at a time: their entity records are the rest of the bulk.
        batch: list[Dataset] = []
        weight = 0
        for ds_id in sorted(self.datasets):
            ds = self.dataset(ds_id)
            del self.datasets[ds_id]  # no piece names it any more
            batch.append(ds)
            weight += 1 + len(ds.columns)
            if weight >= chunk_relations:
                yield ExtractionResult(lineage=Lineage(datasets=tuple(batch)))
                batch, weight = [], 0
        yield ExtractionResult(lineage=final.model_copy(update={"datasets": tuple(batch)}), problems=problems)


_DERIVED_TYPES = frozenset({RelationType.FDD, RelationType.FDR, RelationType.ER})
"""Relation types that a statement writes by (the others join or call)."""

_UnnamedKey = tuple[str, tuple[str, ...], str, str]
"""A relation that names no process: (target object, source objects, effectType, relation type)."""


def _unnamed_key(rel: _RawRelation) -> _UnnamedKey:
    target = rel.target.parent_id if rel.target is not None and rel.target.parent_id else ""
    sources = tuple(dict.fromkeys(s.parent_id for s in rel.sources if s.parent_id))
    return (target, sources, rel.attrs.get("effectType", ""), rel.type.strip().lower())


def _root(parent: dict[str, str], item: str | None) -> str:
    """The root of ``item`` in a union-find (``item`` itself if it is in none), with path halving."""
    if item is None or item not in parent:
        return item or ""
    while parent[item] != item:
        parent[item] = parent[parent[item]]
        item = parent[item]
    return item


def _piece(
    relations: list[Relation], dataset: Callable[[str], Dataset], processes: dict[str, Process]
) -> ExtractionResult:
    ds_ids = {r.source.dataset_id for r in relations} | {r.target.dataset_id for r in relations}
    proc_ids = {r.process_id for r in relations if r.process_id}
    return ExtractionResult(
        lineage=Lineage(
            datasets=tuple(dataset(i) for i in sorted(ds_ids)),
            processes=tuple(processes[i] for i in sorted(proc_ids)),
            relations=tuple(relations),
        )
    )


def _stronger(old: RelationType | None, new: RelationType) -> RelationType:
    return RelationType.FDD if RelationType.FDD in (old, new) else new


def _weaker(a: RelationType, b: RelationType) -> RelationType:
    if a is RelationType.FDD:
        return b
    return a
