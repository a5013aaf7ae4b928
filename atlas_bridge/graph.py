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

from atlas_bridge.model import (
    ClauseType,
    ColumnRef,
    Dataset,
    Effect,
    Lineage,
    Process,
    Relation,
    RelationType,
    _Frozen,
)

_CHAIN_TYPES = (RelationType.FDD, RelationType.FDR)
_EFFECT_RANK = {
    Effect.EXACT_COPY: 0,
    Effect.PARTIAL_COPY: 1,
    Effect.MODIFIED_COPY: 2,
    Effect.AGGREGATION: 3,
    Effect.AMBIGUOUS: 4,
}


def intermediate_dataset_ids(lineage: Lineage) -> frozenset[str]:
    """Ids of statement-local objects that feed something else (and so vanish end to end)."""
    feeding = {r.source.dataset_id for r in lineage.relations if r.type in _CHAIN_TYPES}
    return frozenset(
        d.id
        for d in lineage.datasets
        if not d.kind.is_permanent and d.id in feeding and _is_statement_local(d)
    )


def _is_statement_local(ds: Dataset) -> bool:
    return ds.kind.value in ("resultset", "variable")


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
    inter = intermediate_dataset_ids(lineage)
    if not inter:
        return lineage
    out_edges: dict[tuple[str, str], list[Relation]] = defaultdict(list)
    for rel in lineage.relations:
        if rel.type in _CHAIN_TYPES:
            out_edges[(rel.source.dataset_id, rel.source.column)].append(rel)

    memo: dict[tuple[str, str], dict[tuple[str, str], list[Relation]]] = {}
    in_progress: set[tuple[str, str]] = set()

    def reach(node: tuple[str, str]) -> dict[tuple[str, str], list[Relation]]:
        """Terminal columns reachable from an intermediate column, each with its best hop list."""
        if node in memo:
            return memo[node]
        if node in in_progress:  # a recursive CTE: the loop adds nothing new
            return {}
        in_progress.add(node)
        found: dict[tuple[str, str], list[Relation]] = {}
        for rel in out_edges.get(node, ()):
            tgt = (rel.target.dataset_id, rel.target.column)
            if tgt[0] in inter:
                for end, path in reach(tgt).items():
                    _keep_best(found, end, [rel, *path])
            else:
                _keep_best(found, tgt, [rel])
        in_progress.discard(node)
        memo[node] = found
        return found

    relations: list[Relation] = []
    for rel in lineage.relations:
        if rel.source.dataset_id in inter:
            continue
        if rel.type not in _CHAIN_TYPES or rel.target.dataset_id not in inter:
            relations.append(rel)
            continue
        tgt = (rel.target.dataset_id, rel.target.column)
        for path in reach(tgt).values():
            relations.append(_collapse([rel, *path]))
    relations = _prefer_fdd(relations)
    used = {e.dataset_id for r in relations for e in (r.source, r.target)}
    datasets = [d for d in lineage.datasets if d.id not in inter or d.id in used]
    return Lineage(
        datasets=tuple(datasets),
        processes=lineage.processes,
        relations=tuple(relations),
        procedures=lineage.procedures,
    )


def _path_type(path: list[Relation]) -> RelationType:
    return RelationType.FDR if any(r.type is RelationType.FDR for r in path) else RelationType.FDD


def _keep_best(found: dict[tuple[str, str], list[Relation]], end: tuple[str, str],
               path: list[Relation]) -> None:
    old = found.get(end)
    if old is None or (_path_type(old) is RelationType.FDR and _path_type(path) is RelationType.FDD):
        found[end] = path


def _collapse(path: list[Relation]) -> Relation:
    first, last = path[0], path[-1]
    kind = _path_type(path)
    clause: ClauseType | None = None
    if kind is RelationType.FDR:
        clause = next(r.clause_type for r in path if r.type is RelationType.FDR)
    effects = [r.effect for r in path if r.effect is not None]
    effect = max(effects, key=lambda e: _EFFECT_RANK[e]) if effects else None
    transforms = [r.transform for r in path if r.transform]
    return Relation(
        type=kind,
        source=first.source,
        target=last.target,
        effect_type=last.effect_type or first.effect_type,
        clause_type=clause,
        process_id=last.process_id or first.process_id,
        effect=effect if kind is RelationType.FDD else None,
        transform=transforms[-1] if transforms else None,
        function=next((r.function for r in path if r.function), None),
        span=first.span,
    )


def _prefer_fdd(relations: list[Relation]) -> list[Relation]:
    """Where both an fdd and an fdr edge join the same two columns, the fdd one stands alone."""
    fdd_pairs = {(r.source, r.target) for r in relations if r.type is RelationType.FDD}
    return [r for r in relations if r.type is not RelationType.FDR or (r.source, r.target) not in fdd_pairs]


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
        kinds[key] = RelationType.FDD if RelationType.FDD in (old, rel.type) or rel.type is RelationType.ER \
            else RelationType.FDR
    used = {k[0] for k in kinds} | {k[2] for k in kinds}
    datasets = tuple(d.model_copy(update={"columns": ()}) for d in e2e.datasets
                     if d.kind.is_permanent and d.id in used)
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
        return f"{ds.qualified_name}.{ref.column}"

    return sorted(f"{name(r.source)} -> {r.type.value} -> {name(r.target)}" for r in lineage.relations)
