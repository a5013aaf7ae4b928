"""Mutable builders the SQL extractor fills while it walks a statement, frozen into the model at the end.

Walking a statement creates many small objects; validating a pydantic model for each would cost more than
the walk itself. So datasets and relations are collected here, each statement's graph is checked for
dangling ends (a bug costs that statement only), statements are merged into a :class:`ScriptGraph`, and
the models are built without validation in the canonical form their validators would give (sorted
columns, flow defaults; the script's :class:`~atlas_bridge.model.Lineage` sorted, de-duplicated and its
references checked here). ``tests/test_sql_extract.py`` and ``tests/test_sql_tpc.py`` check that this
equals the validated construction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import groupby
from operator import eq, itemgetter
from typing import Any, NamedTuple, TypeVar

from atlas_bridge.model import (
    PSEUDO_ROWS,
    ClauseType,
    Column,
    ColumnRef,
    Dataset,
    DatasetKind,
    Effect,
    FlowKind,
    Lineage,
    Procedure,
    Process,
    Relation,
    RelationType,
    Span,
    default_flow,
    ref_key,
)
from atlas_bridge.model import construct_all as _complete_all
from atlas_bridge.model import construct_complete as _complete

PositionsOf = Callable[["DatasetBuilder"], Mapping[str, int] | None]
"""A dataset's column positions (lower-cased name -> place), where known."""


@dataclass(slots=True)  # many per statement: slots make them cheaper to build and to collect
class ColumnBuilder:
    name: str
    system: bool = False
    data_type: str | None = None
    spans: list[Span] = field(default_factory=list)


@dataclass
class DatasetBuilder:
    """A dataset under construction. ``columns`` is keyed by lower-cased name (first spelling kept)."""

    id: str
    kind: DatasetKind
    name: str
    db: str | None = None
    catalog: str | None = None
    sub_type: str | None = None
    alias: str | None = None
    uri: str | None = None
    columns: dict[str, ColumnBuilder] = field(default_factory=dict)
    process_ids: set[str] = field(default_factory=set)
    spans: list[Span] = field(default_factory=list)

    def column(self, name: str, span: Span | None = None, *, system: bool = False) -> str:
        """The canonical spelling of column ``name`` on this dataset, adding it when new."""
        key = name.lower()
        col = self.columns.get(key)
        if col is None:
            col = ColumnBuilder(name, system)
            self.columns[key] = col
        if span is not None and len(col.spans) < 8:
            col.spans.append(span)
        return col.name

    def rows(self) -> str:
        """The system-made PseudoRows column (added on first use)."""
        return self.column(PSEUDO_ROWS, system=True)

    def has_column(self, name: str) -> bool:
        return name.lower() in self.columns

    def freeze(self, positions: Mapping[str, int] | None = None) -> Dataset:
        """``positions``: each column's place in the table by lower-cased name, where known."""
        # sorted as Dataset's validator sorts them: system last, then by lower-cased name (the key), then
        # by name; decorated rather than keyed, so no Python call per column (hot path)
        order = sorted([(c.system, key, c.name, c) for key, c in self.columns.items()])
        columns = _complete_all(
            Column,
            [
                {
                    "name": c.name,
                    "system": c.system,
                    "data_type": c.data_type,
                    "expression": None,
                    "spans": _spans(c.spans) if len(c.spans) > 1 else tuple(c.spans),
                    "position": positions.get(key) if positions else None,
                }
                for _, key, _, c in order  # (a starred target would make a list per column)
            ],
        )
        return _complete(
            Dataset,
            {
                "id": self.id,
                "kind": self.kind,
                "name": self.name,
                "db": self.db,
                "catalog": self.catalog,
                "sub_type": self.sub_type,
                "uri": self.uri,
                "alias": self.alias,
                "file_format": None,
                "columns": tuple(columns),
                "process_ids": tuple(sorted(self.process_ids)),
                "spans": _spans(self.spans),
            },
        )

    def absorb(self, other: DatasetBuilder) -> None:
        """Merge the same dataset seen by a later statement (a CREATE VIEW outranks a bare reference)."""
        for key, col in other.columns.items():
            mine = self.columns.get(key)
            if mine is None:
                self.columns[key] = col
            else:
                mine.spans.extend(col.spans[: max(0, 8 - len(mine.spans))])
                mine.data_type = mine.data_type or col.data_type
        self.process_ids |= other.process_ids
        self.spans.extend(other.spans[: max(0, 8 - len(self.spans))])
        if other.kind is DatasetKind.VIEW:
            self.kind = DatasetKind.VIEW
        for attr in ("db", "catalog", "sub_type", "alias", "uri"):
            if getattr(self, attr) is None and getattr(other, attr) is not None:
                setattr(self, attr, getattr(other, attr))


def _spans(spans: list[Span]) -> tuple[Span, ...]:
    if not spans:
        return ()
    if len(spans) == 1:
        return (spans[0],)
    unique = {(s.line, s.column, s.end_line, s.end_column): s for s in spans}
    return tuple(unique[k] for k in sorted(unique))


ColKey = tuple[str, str]
"""(dataset id, column name)."""

FieldKey = tuple[str, str, str]
"""(dataset id, column name, field path): a struct field (or array element's field) below a column."""

EndKey = ColKey | FieldKey
"""One end of an edge: a column, or a field of one (see :func:`with_field`)."""


def with_field(key: EndKey, path: str | None) -> EndKey:
    """``key`` with ``path`` appended below it (its own field path first); ``key`` itself when no path."""
    if not path:
        return key
    if len(key) == 3:
        return (key[0], key[1], f"{key[2]}.{path}")
    return (key[0], key[1], path)


def column_of(key: EndKey) -> ColKey:
    """The column an end is in (its field path dropped)."""
    return key if len(key) == 2 else (key[0], key[1])  # type: ignore[return-value]


_new_relation = tuple.__new__


class RelationBuilder(NamedTuple):
    """One edge of a statement. A tuple, the cheapest object to make (one or more per edge): changed by
    replacing it (``_replace``), which few are."""

    type: RelationType
    source: EndKey
    target: EndKey
    clause_type: ClauseType | None = None
    effect_type: str | None = None
    process_id: str | None = None
    flow: FlowKind | None = None
    effect: Effect | None = None
    transform: str | None = None
    function: str | None = None
    span: Span | None = None


class GraphBuilder:
    """Datasets and relations of one statement. Relations are de-duplicated on (type, ends, clause)."""

    def __init__(self) -> None:
        self.datasets: dict[str, DatasetBuilder] = {}
        self.relations: dict[tuple[str, EndKey, EndKey, str], RelationBuilder] = {}
        self.processes: list[Process] = []
        self.procedures: list[Procedure] = []
        self._incoming: set[ColKey] = set()

    def dataset(self, ds: DatasetBuilder) -> DatasetBuilder:
        """Register ``ds`` (or return the one already registered under its id)."""
        old = self.datasets.get(ds.id)
        if old is not None:
            return old
        self.datasets[ds.id] = ds
        return ds

    def is_fed(self, key: ColKey) -> bool:
        """Whether any relation ends in this column (used to skip dangling PseudoRows hops)."""
        return key in self._incoming

    def add(
        self,
        rtype: RelationType,
        source: EndKey,
        target: EndKey,
        *,
        clause_type: ClauseType | None = None,
        effect_type: str | None = "select",
        process_id: str | None = None,
        flow: FlowKind | None = None,
        effect: Effect | None = None,
        transform: str | None = None,
        function: str | None = None,
        span: Span | None = None,
    ) -> None:
        if source == target:
            return
        key = (rtype._value_, source, target, clause_type._value_ if clause_type else "")
        new = _new_relation(  # the tuple's own constructor (hot path): fields in order
            RelationBuilder,
            (
                rtype,
                source,
                target,
                clause_type,
                effect_type,
                process_id,
                flow,
                effect,
                transform,
                function,
                span,
            ),
        )
        old = self.relations.setdefault(key, new)  # the key hashed once
        if old is not new:
            if effect is not None and (old.effect is None or effect.rank > old.effect.rank):
                self.relations[key] = old._replace(effect=effect)
            return
        if rtype is not _JOIN:
            self._incoming.add(target if len(target) == 2 else (target[0], target[1]))  # type: ignore[arg-type]

    def finish(self, spelling: dict[tuple[str, str], str]) -> None:
        """End of the statement: shared column spellings, and a check that every relation end exists.

        ``spelling`` (script-wide, updated here) makes every statement use the first spelling seen of a
        dataset's column, so ``SAL`` and ``sal`` stay one column of a table several statements share.
        Raises ValueError on a dangling end (a bug of ours), so only this statement is lost.
        """
        renames: dict[ColKey, ColKey] = {}
        for ds in self.datasets.values():  # permanent ones and the shared orphan pseudo table
            for key, col in ds.columns.items():
                canon = spelling.setdefault((ds.id, key), col.name)
                if canon != col.name:
                    renames[(ds.id, col.name)] = (ds.id, canon)
                    col.name = canon
        # a column's key is its lower-cased name, so an end exists iff (dataset, spelling) is one of these
        exists = {(ds_id, col.name) for ds_id, ds in self.datasets.items() for col in ds.columns.values()}
        if renames:
            for rel_key, rel in self.relations.items():
                source, target = column_of(rel.source), column_of(rel.target)
                if source in renames or target in renames:
                    self.relations[rel_key] = rel._replace(
                        source=_renamed(rel.source, renames), target=_renamed(rel.target, renames)
                    )
        rels = self.relations.values()
        if all(map(exists.__contains__, map(_SOURCE, rels))) and all(
            map(exists.__contains__, map(_TARGET, rels))
        ):
            return  # every end exists (checked in C: no Python step per relation)
        for rel in rels:
            source, target = column_of(rel.source), column_of(rel.target)
            if source not in exists or target not in exists:
                ds_id, col_name = source if source not in exists else target
                msg = f"relation {rel.source} -> {rel.target}: no column {col_name!r} on {ds_id!r}"
                raise ValueError(msg)


def _renamed(key: EndKey, renames: dict[ColKey, ColKey]) -> EndKey:
    """``key`` with its column spelt as ``renames`` says (its field path kept)."""
    new = renames.get(column_of(key))
    if new is None:
        return key
    return new if len(key) == 2 else (new[0], new[1], key[2])  # type: ignore[misc]


class ScriptGraph:
    """The finished statements of a script, merged; frozen once into the validated Lineage."""

    def __init__(self) -> None:
        self.datasets: dict[str, DatasetBuilder] = {}
        self.relations: list[RelationBuilder] = []
        self.processes: list[Process] = []
        self.procedures: list[Procedure] = []

    def absorb(self, graph: GraphBuilder) -> None:
        for ds in graph.datasets.values():
            mine = self.datasets.get(ds.id)
            if mine is None:
                self.datasets[ds.id] = ds
            else:
                mine.absorb(ds)
        self.relations.extend(graph.relations.values())
        self.processes.extend(graph.processes)
        self.procedures.extend(graph.procedures)

    def freeze(self, positions: PositionsOf | None = None) -> Lineage:
        """The canonical Lineage, built as its validator would build it (sorted, de-duplicated, every end
        and process resolvable), without validating each object again. Raises ValueError where the
        validator would (a dangling end, two different processes under one id): a bug of ours.
        ``positions`` tells a dataset's column positions (the script's schema), where known."""
        processes = _unique_by_id(self.processes, "process")
        # A script may create one procedure twice (CREATE OR REPLACE): the last definition is the one the
        # database keeps; both bodies' statements stay processes of their own.
        procedures = list({p.id: p for p in self.procedures}.values())
        columns = {(d.id, c.name) for d in self.datasets.values() for c in d.columns.values()}
        proc_ids = {p.id for p in processes}
        # Each relation's fields are paired with Relation.sort_key of it but the last part (the span's text),
        # and sorted on that; only relations equal on it are ordered by their span texts, the last of equal
        # ones kept, as the validator does (tests/test_sql_tpc.py compares the two constructions). The
        # models are made last, in one call.
        refs: dict[EndKey, ColumnRef] = {}  # one (immutable) ColumnRef per column, shared
        keyed: list[tuple[tuple[str, ...], dict[str, Any]]] = []
        # unpacked, not read field by field (hot path): RelationBuilder's fields in order
        for (
            rtype,
            source,
            target,
            clause,
            effect_type,
            process_id,
            flow,
            effect,
            transform,
            fn,
            span,
        ) in self.relations:
            # an end is checked when first met (its ColumnRef made): every end is, once
            source_ref = refs.get(source)
            if source_ref is None:
                if column_of(source) not in columns:
                    msg = f"relation {source} -> {target}: no column {source[1]!r} on {source[0]!r}"
                    raise ValueError(msg)
                source_ref = refs[source] = _complete(
                    ColumnRef,
                    {"dataset_id": source[0], "column": source[1], "field": _field(source)},
                )
            target_ref = refs.get(target)
            if target_ref is None:
                if column_of(target) not in columns:
                    msg = f"relation {source} -> {target}: no column {target[1]!r} on {target[0]!r}"
                    raise ValueError(msg)
                target_ref = refs[target] = _complete(
                    ColumnRef,
                    {"dataset_id": target[0], "column": target[1], "field": _field(target)},
                )
            if process_id is not None and process_id not in proc_ids:
                msg = f"relation {source} -> {target} names unknown process {process_id!r}"
                raise ValueError(msg)
            if flow is None:  # default_flow, inline
                if rtype is _FDD:
                    flow = _DATA_FLOW
                elif rtype is _FDR:
                    flow = _GROUPS if clause is _GROUP_BY else _RESTRICTS
                else:
                    flow = default_flow(rtype, clause)
            keyed.append(
                (
                    (
                        target[0],
                        target[1] if len(target) == 2 else ref_key(target[1], target[2]),  # type: ignore[misc]
                        source[0],
                        source[1] if len(source) == 2 else ref_key(source[1], source[2]),  # type: ignore[misc]
                        rtype._value_,
                        clause._value_ if clause is not None else "",
                        process_id or "",
                        effect_type or "",
                        transform or "",
                    ),
                    {
                        "type": rtype,
                        "source": source_ref,
                        "target": target_ref,
                        "effect_type": effect_type,
                        "clause_type": clause,
                        "process_id": process_id,
                        "flow": flow,
                        "effect": effect,
                        "transform": transform,
                        "function": fn,
                        "span": span,
                    },
                )
            )
        keyed.sort(key=_first)  # stable: equal keys stay in the order they were added
        keys = list(map(_first, keyed))
        if any(map(eq, keys, keys[1:])):  # rare: relations that differ only in their spans
            relations = _complete_all(Relation, _by_span_text(keyed))
        else:
            relations = _complete_all(Relation, map(_second, keyed))
        return _complete(
            Lineage,
            {
                "datasets": tuple(
                    self.datasets[k].freeze(positions(self.datasets[k]) if positions else None)
                    for k in sorted(self.datasets)
                ),
                "processes": tuple(sorted(processes, key=_id)),
                "relations": tuple(relations),
                "procedures": tuple(sorted(procedures, key=_id)),
            },
        )


def _field(key: EndKey) -> str | None:
    return key[2] if len(key) == 3 else None  # type: ignore[misc]


_SOURCE = itemgetter(1)
_TARGET = itemgetter(2)
"""A RelationBuilder's source and target (its second and third fields; an end with a field path is no
column key, so it takes the slower check)."""
_first = itemgetter(0)
"""The key of a keyed relation (a C function: no Python call per relation when sorting)."""
_second = itemgetter(1)
"""The fields of a keyed relation."""


def _by_span_text(keyed: list[tuple[tuple[str, ...], dict[str, Any]]]) -> list[dict[str, Any]]:
    """Relations (their fields) sorted on their keys, those of equal keys ordered by their span texts (the
    last of equal span texts kept): the validator's order and de-duplication on the whole sort key."""
    out: list[dict[str, Any]] = []
    for _, group in groupby(keyed, key=_first):
        by_span = {(str(r["span"]) if r["span"] is not None else ""): r for _, r in group}  # the last wins
        out.extend(by_span[k] for k in sorted(by_span))
    return out


_FDD, _FDR, _JOIN = RelationType.FDD, RelationType.FDR, RelationType.JOIN
_DATA_FLOW, _GROUPS, _RESTRICTS = FlowKind.DATA_FLOW, FlowKind.GROUPS, FlowKind.RESTRICTS
_GROUP_BY = ClauseType.GROUP_BY

_P = TypeVar("_P", Process, Procedure)


def _unique_by_id(items: list[_P], what: str) -> list[_P]:
    seen: dict[str, _P] = {}
    for item in items:
        old = seen.get(item.id)
        if old is not None and old != item:
            msg = f"two different {what}s share the id {item.id!r}"
            raise ValueError(msg)
        seen[item.id] = item
    return list(seen.values())


def _id(item: Process | Procedure) -> str:
    return item.id
