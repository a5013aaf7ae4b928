"""Derived views of a lineage: end-to-end column lineage and table-level lineage (seed 000's rules).

End to end: chains that pass through intermediate objects (resultsets, variables that feed something
else) are collapsed so only their ends remain. A chain with any ``fdr`` hop is ``fdr``; where several
chains join the same two columns, an all-``fdd`` chain wins.

Table level: tables, views, paths, stages and streams joined through the process that moved the data;
resultsets and variables are skipped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from operator import itemgetter
from typing import Any, NamedTuple

from atlas_bridge.model import (
    ClauseType,
    ColumnRef,
    Dataset,
    DatasetKind,
    Effect,
    FlowKind,
    Lineage,
    PausedGC,
    Process,
    Relation,
    RelationType,
    Span,
    _Frozen,
    construct_all,
    construct_trusted,
    join_field,
)

_CHAIN_TYPES = (RelationType.FDD, RelationType.FDR)
_FDD = RelationType.FDD.value
_FDR = RelationType.FDR.value


def intermediate_dataset_ids(lineage: Lineage) -> frozenset[str]:
    """Ids of statement-local objects that feed something else (and so vanish end to end)."""
    feeding = {r.source.dataset_id for r in lineage.relations if r.type in _CHAIN_TYPES}
    return frozenset(
        d.id
        for d in lineage.datasets
        if not d.kind.is_permanent and d.id in feeding and _is_statement_local(d)
    )


def _is_statement_local(ds: Dataset) -> bool:
    return ds.kind in _LOCAL_KINDS


_LOCAL_KINDS = frozenset({DatasetKind.RESULTSET, DatasetKind.VARIABLE})


def end_to_end(lineage: Lineage) -> Lineage:
    """Collapse chains through intermediate resultsets and variables.

    >>> from atlas_bridge.model import Column, Dataset, DatasetKind as K, Lineage, Relation, ColumnRef
    >>> t = Dataset(id="table:t", kind=K.TABLE, name="t", columns=[Column(name="a")])
    >>> rs = Dataset(id="resultset:RS-1", kind=K.RESULTSET, name="RS-1", columns=[Column(name="a")])
    >>> v = Dataset(id="table:v", kind=K.VIEW, name="v", columns=[Column(name="a")])
    >>> hop = lambda s, t: Relation(type="fdd", source=ColumnRef(dataset_id=s, column="a"),
    ...                            target=ColumnRef(dataset_id=t, column="a"))
    >>> g = Lineage(datasets=[t, rs, v], relations=[hop("table:t", "resultset:RS-1"),
    ...                                             hop("resultset:RS-1", "table:v")])
    >>> [f"{r.source} {r.type.value} {r.target}" for r in end_to_end(g).relations]
    ['table:t.a fdd table:v.a']
    """
    local = {d.id for d in lineage.datasets if d.kind in _LOCAL_KINDS}
    if not local:
        return lineage
    with PausedGC():  # it makes no cyclic garbage; the collector would only walk the live chains
        if any(r.source.field or r.target.field for r in lineage.relations):
            return _collapse_fields(lineage, local)
        return _collapse(lineage, local)


def _collapse(lineage: Lineage, local: set[str]) -> Lineage:
    """End to end, with ``local`` the ids of the statement-local datasets: those that feed a chain are the
    intermediate ones (:func:`intermediate_dataset_ids`), found in the same pass that collects the hops."""
    # only intermediate columns are walked from (reach), so only their out-edges are kept
    out_edges: dict[tuple[str, str], list[tuple[tuple[str, str], _Chain]]] = defaultdict(list)
    for rel in lineage.relations:
        if rel.type in _CHAIN_TYPES:
            source = rel.source
            if source.dataset_id in local:
                target = rel.target
                out_edges[(source.dataset_id, source.column)].append(
                    ((target.dataset_id, target.column), _one_hop(rel))
                )
    inter = {node[0] for node in out_edges}  # a local dataset is intermediate iff it feeds a chain
    if not inter:
        return lineage

    reach = _Reach(out_edges, inter).reach

    # Keyed first, built last: chains that _prefer_fdd_keyed drops never become Relation objects. The key is
    # Relation.sort_key of the edge without its last part (the span's text, made only where it decides).
    keyed: list[_Keyed] = []
    used: set[str] = set()  # intermediate datasets still named by an edge (a join into a resultset)
    for rel in lineage.relations:
        source = rel.source
        if source.dataset_id in inter:
            continue
        target = rel.target
        clause = rel.clause_type
        if rel.type not in _CHAIN_TYPES or target.dataset_id not in inter:
            if target.dataset_id in inter:
                used.add(target.dataset_id)
            key = (
                target.dataset_id,
                target.column,
                source.dataset_id,
                source.column,
                rel.type._value_,
                clause._value_ if clause is not None else "",
                rel.process_id or "",
                rel.effect_type or "",
                rel.transform or "",
            )
            keyed.append((key, rel, rel.span))
            continue
        head = _one_hop(rel)  # its source is not intermediate, so it heads its chains
        source_id, source_column, span = source.dataset_id, source.column, rel.span
        process_id, effect_type = rel.process_id or "", rel.effect_type or ""
        _, _, head_fdr, head_restricting, head_clause, _, head_transform, _ = head
        for chain in reach((target.dataset_id, target.column)).values():
            # the key of chain.prepend(head).edge(), without making either (the first hop is ``rel``;
            # tests/test_sql_tpc.py compares with the validator's order): about a third of the chains
            # are dropped by _prefer_fdd_keyed, and only the kept ones are prepended
            _, last, fdr, restricting, clause, _, transform, _ = chain
            if head_restricting or (head_fdr and not restricting):  # as _Chain.prepend
                clause = head_clause
            fdr = head_fdr or fdr
            end = last.target
            key = (
                end.dataset_id,
                end.column,
                source_id,
                source_column,
                _FDR if fdr else _FDD,
                clause._value_ if fdr and clause is not None else "",
                last.process_id or process_id,
                last.effect_type or effect_type,
                transform or head_transform or "",
            )
            keyed.append((key, (chain, head), span))
    kept = _prefer_fdd_keyed(keyed)
    made = iter(
        construct_all(
            Relation, [item[0].prepend(item[1]).edge() for item in kept if not isinstance(item, Relation)]
        )
    )
    relations = [item if isinstance(item, Relation) else next(made) for item in kept]
    datasets = [d for d in lineage.datasets if d.id not in inter or d.id in used]
    # Canonical already, so not validated again: the datasets, processes and procedures are the input's
    # (sorted, unique); relations come sorted and unique from _prefer_fdd_keyed, and each end is a column
    # of an input dataset kept above (tests/test_sql_tpc.py checks this equals the validated construction).
    return construct_trusted(
        Lineage,
        datasets=tuple(datasets),
        processes=lineage.processes,
        relations=tuple(relations),
        procedures=lineage.procedures,
    )


def _collapse_fields(lineage: Lineage, local: set[str]) -> Lineage:
    """End to end where some ends are fields of columns (``widget.asset.id``): :func:`_collapse`'s chains,
    each hop also matched on its field paths (docs/nested-data.md).

    A hop that writes field ``q`` of an intermediate column continues through a hop that reads field ``p``
    of it when one path holds the other: reading deeper (``p`` below ``q``) makes the source deeper by the
    rest, reading the whole (``q`` below ``p``) makes the target deeper by the rest when the hop copies the
    value as is; two different fields (``s.a`` written, ``s.b`` read) make no chain. A separate walk from
    :func:`_collapse` (lineage without fields, nearly all of it, keeps that one's speed).
    """
    out_edges: dict[tuple[str, str], list[Relation]] = defaultdict(list)
    for rel in lineage.relations:
        if rel.type in _CHAIN_TYPES and rel.source.dataset_id in local:
            out_edges[(rel.source.dataset_id, rel.source.column)].append(rel)
    inter = {node[0] for node in out_edges}
    if not inter:
        return lineage
    memo: dict[tuple[str, str, str | None], dict[_FieldEnd, _Chain]] = {}
    in_progress: set[tuple[str, str, str | None]] = set()

    def reach(node: tuple[str, str], arriving: str | None, depth: int) -> dict[_FieldEnd, _Chain]:
        """Ends reachable from ``node`` when field ``arriving`` of it was written (None: the whole), each
        keyed with the path to add below the first source; memoised per (node, field)."""
        mkey = (node[0], node[1], arriving)
        if mkey in memo:
            return memo[mkey]
        found: dict[_FieldEnd, _Chain] = {}
        if mkey in in_progress or depth > _MAX_FIELD_DEPTH:  # a recursive CTE: the loop adds nothing
            return found
        in_progress.add(mkey)
        for hop in out_edges.get(node, ()):
            step = _match_fields(arriving, hop)
            if step is None:
                continue
            extra_source, written = step
            head = _one_hop(hop)
            target = hop.target
            if target.dataset_id not in inter:
                _keep(found, (target.dataset_id, target.column, written, extra_source), head)
                continue
            for (end_ds, end_col, end_field, deeper), chain in reach(
                (target.dataset_id, target.column), written, depth + 1
            ).items():
                _keep(
                    found, (end_ds, end_col, end_field, join_field(extra_source, deeper)), chain.prepend(head)
                )
        in_progress.discard(mkey)
        memo[mkey] = found
        return found

    relations: list[Relation] = []
    used: set[str] = set()
    for rel in lineage.relations:
        source, target = rel.source, rel.target
        if source.dataset_id in inter:
            continue
        if rel.type not in _CHAIN_TYPES or target.dataset_id not in inter:
            if target.dataset_id in inter:
                used.add(target.dataset_id)
            relations.append(rel)
            continue
        head = _one_hop(rel)
        for (end_ds, end_col, end_field, deeper), chain in reach(
            (target.dataset_id, target.column), target.field, 0
        ).items():
            edge = chain.prepend(head).edge()
            edge["source"] = _ref(source.dataset_id, source.column, join_field(source.field, deeper))
            edge["target"] = _ref(end_ds, end_col, end_field)
            relations.append(Relation(**edge))
    datasets = [d for d in lineage.datasets if d.id not in inter or d.id in used]
    kept = _prefer_fdd(
        Lineage(datasets=tuple(datasets), processes=lineage.processes, relations=tuple(relations)).relations
    )
    return Lineage(
        datasets=tuple(datasets),
        processes=lineage.processes,
        relations=tuple(kept),
        procedures=lineage.procedures,
    )


_FieldEnd = tuple[str, str, str | None, str | None]
"""An end reached with field paths: (dataset id, column, its field, the path to add below the source)."""
_MAX_FIELD_DEPTH = 400
"""How deep :func:`_collapse_fields` follows a chain (it recurses: field paths come with small graphs)."""


def _match_fields(arriving: str | None, hop: Relation) -> tuple[str | None, str | None] | None:
    """How a hop continues a chain that wrote field ``arriving`` of the hop's source column: (the path to add
    below the chain's source, the field the hop writes), or None when the hop reads another field."""
    read, written = hop.source.field, hop.target.field
    if arriving == read:
        return None, written
    if arriving is None or (read is not None and read.startswith(arriving + ".")):
        rest = read if arriving is None else read[len(arriving) + 1 :]  # type: ignore[index]
        return rest, written
    if read is None or arriving.startswith(read + "."):
        rest = arriving if read is None else arriving[len(read) + 1 :]
        copies = hop.type is _FDD_TYPE and hop.effect in (None, Effect.EXACT_COPY)
        return None, join_field(written, rest) if copies else written
    return None


def _keep(found: dict[_FieldEnd, _Chain], end: _FieldEnd, chain: _Chain) -> None:
    old = found.get(end)
    if old is None or (old.fdr and not chain.fdr):
        found[end] = chain


def _ref(dataset: str, column: str, field: str | None) -> ColumnRef:
    return ColumnRef(dataset_id=dataset, column=column, field=field)


def _prefer_fdd(relations: tuple[Relation, ...]) -> list[Relation]:
    """Where both an fdd and an fdr edge join the same two ends, the fdd one alone (as _prefer_fdd_keyed)."""
    fdd = {(r.source, r.target) for r in relations if r.type is _FDD_TYPE}
    kept: dict[tuple[str, ...], Relation] = {}  # sorted: the earliest span of equal edges is met first
    for r in relations:
        if r.type is _FDR_TYPE and (r.source, r.target) in fdd:
            continue
        kept.setdefault(r.sort_key()[:-1], r)
    return list(kept.values())


class _Reach:
    """The chains from intermediate columns, memoised. An object, not a closure that calls itself: such a
    closure is a reference cycle, which kept every chain made alive until the collector's next pass (and
    gave that pass all of them to walk)."""

    __slots__ = ("in_progress", "inter", "memo", "out_edges")

    def __init__(
        self, out_edges: dict[tuple[str, str], list[tuple[tuple[str, str], _Chain]]], inter: set[str]
    ) -> None:
        self.out_edges = out_edges
        self.inter = inter
        self.memo: dict[tuple[str, str], dict[tuple[str, str], _Chain]] = {}
        self.in_progress: set[tuple[str, str]] = set()

    def reach(self, node: tuple[str, str]) -> dict[tuple[str, str], _Chain]:
        """Terminal columns reachable from an intermediate column, each with its best chain.

        Depth first with a stack of its own, not by recursion: a chain of 500 CTEs is 500 levels deep, past
        Python's recursion limit."""
        memo = self.memo
        if node in memo:
            return memo[node]
        out_edges, inter, in_progress = self.out_edges, self.inter, self.in_progress
        # a frame: the column, its edges still to follow, what it reaches so far, the edge being followed
        stack: list[_Frame] = [_Frame(node, iter(out_edges.get(node, ())), {})]
        in_progress.add(node)
        while stack:
            frame = stack[-1]
            found = frame.found
            descend: _Frame | None = None
            for tgt, head in frame.edges:
                if tgt[0] not in inter:
                    old = found.get(tgt)
                    if old is None or (old.fdr and not head.fdr):
                        found[tgt] = head
                elif tgt in memo:
                    _take(found, memo[tgt], head)
                elif tgt not in in_progress:  # (in progress: a recursive CTE, the loop adds nothing new)
                    frame.head = head
                    descend = _Frame(tgt, iter(out_edges.get(tgt, ())), {})
                    break
            if descend is not None:
                in_progress.add(descend.node)
                stack.append(descend)
                continue
            stack.pop()
            in_progress.discard(frame.node)
            memo[frame.node] = found
            if stack:
                parent = stack[-1]
                assert parent.head is not None
                _take(parent.found, found, parent.head)
                parent.head = None
        return memo[node]


class _Frame:
    """One column of :meth:`_Reach.reach`'s walk."""

    __slots__ = ("edges", "found", "head", "node")

    def __init__(
        self,
        node: tuple[str, str],
        edges: Iterator[tuple[tuple[str, str], _Chain]],
        found: dict[tuple[str, str], _Chain],
    ) -> None:
        self.node = node
        self.edges = edges
        self.found = found
        self.head: _Chain | None = None


def _take(found: dict[tuple[str, str], _Chain], reached: dict[tuple[str, str], _Chain], head: _Chain) -> None:
    """Add the chains ``head`` then each of ``reached`` to ``found``; an fdd chain wins over an fdr one."""
    for end, chain in reached.items():
        old = found.get(end)
        if old is None or (old.fdr and not (head.fdr or chain.fdr)):
            found[end] = chain.prepend(head)


class _Chain(NamedTuple):
    """What the end-to-end edge needs of a chain of hops, composable without keeping the hops."""

    first: Relation
    last: Relation
    fdr: bool
    restricting: bool  # an fdr hop on the chain reads as restricts/groups (not a COUNT(*) data flow)
    clause: ClauseType | None  # clause of the first restricting fdr hop, else of the first fdr hop
    effect: Effect | None  # the strongest effect on the chain
    transform: str | None  # the last transform on the chain
    function: str | None  # the first function on the chain

    def prepend(self, head: _Chain) -> _Chain:
        """The chain ``head`` (a one-hop chain, :func:`_one_hop`) then this one."""
        # unpacked, not read field by field (hot path)
        first, _, head_fdr, head_restricting, head_clause, head_effect, head_transform, head_function = head
        _, last, fdr, restricting, clause, effect, transform, function = self
        if head_effect is not None and (effect is None or _RANK[head_effect] > _RANK[effect]):
            effect = head_effect
        if head_restricting or (head_fdr and not restricting):
            clause = head_clause
        return _new_chain(  # the tuple's own constructor (cheaper): first, last, fdr, restricting, ...
            _Chain,
            (
                first,
                last,
                head_fdr or fdr,
                head_restricting or restricting,
                clause,
                effect,
                transform or head_transform,
                head_function or function,
            ),
        )

    def edge(self) -> dict[str, Any]:
        """The end-to-end edge's fields (every one, in order: the models are made in one call); an fdr
        chain whose every fdr hop is a data flow (``COUNT(*)`` fed by the table's rows) keeps that reading
        and its effect instead of turning into "restricts"."""
        first, last, fdr, restricting, clause, effect, transform, function = self
        if fdr:
            kind = _FDR_TYPE
            flow = (_GROUPS if clause is _GROUP_BY else _RESTRICTS) if restricting else _DATA_FLOW
        else:
            kind, clause, flow = _FDD_TYPE, None, _DATA_FLOW
        # Every field comes from validated relations: not validated again (hot path on big lineage).
        return {
            "type": kind,
            "source": first.source,
            "target": last.target,
            "effect_type": last.effect_type or first.effect_type,
            "clause_type": clause,
            "process_id": last.process_id or first.process_id,
            "flow": flow,
            "effect": None if restricting else effect,
            "transform": transform,
            "function": function,
            "span": first.span,
        }


def _one_hop(rel: Relation) -> _Chain:
    """The chain of one relation."""
    fdr = rel.type is _FDR_TYPE
    clause = rel.clause_type if fdr else None
    return _new_chain(
        _Chain,
        (rel, rel, fdr, fdr and rel.flow is not _DATA_FLOW, clause, rel.effect, rel.transform, rel.function),
    )


_new_chain = tuple.__new__
_FDR_TYPE = RelationType.FDR
_FDD_TYPE = RelationType.FDD
_DATA_FLOW = FlowKind.DATA_FLOW
# default_flow of an fdr edge, inline (hot path)
_GROUPS, _RESTRICTS, _GROUP_BY = FlowKind.GROUPS, FlowKind.RESTRICTS, ClauseType.GROUP_BY
_RANK = {effect: effect.rank for effect in Effect}


def _prefer_fdd_keyed(keyed: list[_Keyed]) -> list[Relation | _Pending]:
    """Where both an fdd and an fdr edge join the same two columns, the fdd one stands alone.

    ``keyed`` pairs each edge (or what will make it) with its edge's ``sort_key`` but the last part, and
    its span. Chains that differ only in where the source was read (their span) are one end-to-end edge;
    the earliest span (in ``sort_key`` order: by its text) is kept, the first given of equal ones. The
    result is in ``sort_key`` order and unique, as :class:`Lineage` keeps it.
    """
    keyed.sort(key=_first)  # stable: equal keys stay in the order given
    # sort_key starts with the ends (target dataset, target column, source dataset, source column), then
    # the type: the edges of two ends are adjacent, an fdd one before any fdr one. So an fdr edge has an
    # fdd rival iff the last fdd edge seen joins the same ends (no set of all fdd ends is needed).
    kept: list[Relation | _Pending] = []
    last: tuple[str, ...] | None = None
    last_fdd: tuple[str, ...] | None = None
    last_span: Span | None = None
    texts: dict[int, str] = {}  # span texts by span (alive while here), made only where keys meet
    for key, item, span in keyed:
        kind = key[4]
        if kind == _FDD:
            last_fdd = key
        elif kind == _FDR and last_fdd is not None and key[:4] == last_fdd[:4]:
            continue
        if key != last:  # sorted: equal keys are adjacent
            kept.append(item)
            last, last_span = key, span
            continue
        if span is last_span:
            continue
        text = texts.get(id(span))
        if text is None:
            text = texts[id(span)] = _span_text(span)
        last_text = texts.get(id(last_span))
        if last_text is None:
            last_text = texts[id(last_span)] = _span_text(last_span)
        if text < last_text:
            kept[-1], last_span = item, span
    return kept


_Pending = tuple[_Chain, _Chain]
"""An end-to-end edge not made yet: a chain and the one-hop chain to prepend to it."""
_Keyed = tuple[tuple[str, ...], Relation | _Pending, Span | None]


def _span_text(span: Span | None) -> str:
    return "" if span is None else str(span)


_first = itemgetter(0)
"""The key of a keyed item (a C function: no Python call per item when sorting)."""


class TableEdge(_Frozen):
    """A table-level edge: ``source`` -> ``process`` -> ``target`` (dataset ids; process may be None)."""

    source: str
    target: str
    process_id: str | None = None
    type: RelationType = RelationType.FDD


class TableLineage(_Frozen):
    """Table-level lineage: permanent datasets (columns dropped), processes and the edges between them."""

    datasets: tuple[Dataset, ...] = ()
    processes: tuple[Process, ...] = ()
    edges: tuple[TableEdge, ...] = ()

    def triples(self) -> Iterator[tuple[str, str | None, str]]:
        """(source id, process id, target id) for every edge."""
        for e in self.edges:
            yield e.source, e.process_id, e.target


def table_level(lineage: Lineage) -> TableLineage:
    """Table-level lineage derived from the column level, as seed 000 describes it."""
    e2e = end_to_end(lineage)
    by_id = {d.id: d for d in e2e.datasets}
    kinds: dict[tuple[str, str | None, str], RelationType] = {}
    for rel in e2e.relations:
        if rel.type not in _CHAIN_TYPES and rel.type is not RelationType.ER:
            continue
        src, tgt = by_id[rel.source.dataset_id], by_id[rel.target.dataset_id]
        if not (src.kind.is_permanent and tgt.kind.is_permanent) or src.id == tgt.id:
            continue
        key = (src.id, rel.process_id, tgt.id)
        old = kinds.get(key)
        kinds[key] = (
            RelationType.FDD
            if RelationType.FDD in (old, rel.type) or rel.type is RelationType.ER
            else RelationType.FDR
        )
    used = {k[0] for k in kinds} | {k[2] for k in kinds}
    datasets = tuple(
        d.model_copy(update={"columns": ()}) for d in e2e.datasets if d.kind.is_permanent and d.id in used
    )
    procs = {k[1] for k in kinds}
    edges = tuple(
        TableEdge(source=s, process_id=p, target=t, type=kinds[(s, p, t)])
        for s, p, t in sorted(kinds, key=lambda k: (k[2], k[1] or "", k[0]))
    )
    return TableLineage(
        datasets=datasets,
        processes=tuple(p for p in lineage.processes if p.id in procs),
        edges=edges,
    )


def relation_lines(lineage: Lineage) -> list[str]:
    """Readable ``source -> type -> target`` lines, as the seeds write them (sorted)."""
    by_id = {d.id: d for d in lineage.datasets}

    def name(ref: ColumnRef) -> str:
        ds = by_id[ref.dataset_id]
        return f"{ds.qualified_name}.{ref.path}"

    return sorted(f"{name(r.source)} -> {r.type.value} -> {name(r.target)}" for r in lineage.relations)
