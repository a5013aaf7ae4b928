"""Lineage from a Spark analyzed logical plan (``TreeNode.toJSON``) plus the few facts py4j must supply.

Pure: no py4j, no I/O. The hook (:mod:`atlas_bridge.spark`) reads ``qe.analyzed().toJSON()`` and a small
``facts`` dict while the plan is live; everything here runs later, on a worker thread or in tests over
captured plans.

How columns are resolved: every attribute carries an ``exprId``. Leaves (catalog tables, Hive tables, file
paths, persistent views) define the source exprIds; ``Alias`` es in Project / Aggregate / Window define new
ones from the attributes inside them; Union outputs also depend on the other children's outputs at the same
position. Following exprIds from the write command's output columns down to the leaves gives ``fdd`` edges
(EXACT_COPY for a copy or lossless cast, MODIFIED_COPY for a transformation, AGGREGATION when an aggregate
function is on the way) with the expression text in ``transform``, and ``fdr`` edges for what only
restricts: WHERE / HAVING / JOIN / ORDER BY into the target's PseudoRows (row-set effects), GROUP BY into the
aggregated columns (seed 000's rule) and window PARTITION BY / ORDER BY (a ranking function's keys included)
into the windowed column. CASE/IF conditions flow (``fdd``), as SQLFlow reads CASE (a function of all its
columns). ``COALESCE(a, b)`` is a conditional: its arguments are values (a bare column's a PARTIAL_COPY); all
but the last also decide (``fdr`` condition), which one edge per column pair (the direct one winning) drops
where the column already flows.

Decisions (documented here because the SQL side must agree):

- Names: ``spark_catalog`` is dropped, the database kept (``default.t`` -> ``table:default.t``); other
  catalogs are kept as ``catalog``.
- Paths: :func:`normalize_uri` -- local files become ``/abs/path`` (Spark prints ``file:/abs/path``; the
  SQL extractor keeps ``'/abs/path'`` as written), other schemes keep their form; a trailing ``/`` is cut.
- Temp views are transparent: reads through them reach their sources. Creating a temp view yields lineage
  only with ``temp_views=True`` (a session-local name is no Atlas entity by default). Persistent views are
  sources of their own (their lineage is their CREATE VIEW process).
- In-memory leaves (LocalRelation, LogicalRDD, Range, OneRowRelation) have no stable identity: skipped;
  their columns simply have no source. A checkpointed DataFrame's LogicalRDD is walked through: the plan it
  was made from comes in ``facts["checkpoints"]`` (matched by its output exprIds, which the LogicalRDD
  keeps); without it, a warning (kind ``checkpoint``) says the sources are missing.
- Process ids: ``process:<16 hex of query_hash>``; the hash is :func:`atlas_bridge.model.query_hash` of the
  SQL text when it is known (so a statement run from a SQL file and from Spark meets), otherwise a hash of
  the write's normalised plan (no exprIds, temp paths, timestamps, in-memory rows) and its target.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeGuard

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
    Severity,
    dataset_id,
    query_hash,
)
from atlas_bridge.spark import fields

logger = logging.getLogger(__name__)

__all__ = [
    "QUERY_ROOTS",
    "WRITE_COMMANDS",
    "extract_spark_plan_lineage",
    "normalize_uri",
    "output_expr_ids",
    "plan_signature",
    "rdd_leaf_outputs",
    "write_priority",
]

SESSION_CATALOG = "spark_catalog"
_MAX_TRANSFORM = 400

# Write commands handled, short class name -> priority when one statement fires several events (higher
# wins: the command that names the table over the inner file write it runs).
WRITE_COMMANDS: dict[str, int] = {
    "InsertIntoHadoopFsRelationCommand": 20,
    "InsertIntoHiveTable": 30,
    "InsertIntoDataSourceCommand": 30,
    "InsertIntoDataSourceDirCommand": 25,
    "InsertIntoHiveDirCommand": 25,
    "CreateDataSourceTableAsSelectCommand": 40,
    "CreateHiveTableAsSelectCommand": 40,
    "OptimizedCreateHiveTableAsSelectCommand": 40,
    "SaveAsV1TableCommand": 10,
    "SaveIntoDataSourceCommand": 20,
    "AppendData": 30,
    "OverwriteByExpression": 30,
    "OverwritePartitionsDynamic": 30,
    "CreateTableAsSelect": 40,
    "ReplaceTableAsSelect": 40,
    "CreateViewCommand": 40,
    "AlterTableRenameCommand": 40,
    "MergeIntoTable": 40,
}
"""Root classes that write something, with their de-duplication priority."""

QUERY_ROOTS = frozenset(
    {
        "Project",
        "Filter",
        "Aggregate",
        "Sort",
        "GlobalLimit",
        "LocalLimit",
        "Join",
        "Union",
        "Window",
        "Distinct",
        "Deduplicate",
        "SubqueryAlias",
        "Generate",
        "Expand",
        "Tail",
        "Offset",
        "Sample",
        "Repartition",
        "RepartitionByExpression",
        "LogicalRelation",
        "HiveTableRelation",
        "View",
        "DeserializeToObject",
        "SerializeFromObject",
    }
)
"""Root classes of plain queries (collect, show, count): resultsets when asked for."""

_PASS_THROUGH = frozenset(
    {
        "SubqueryAlias",
        "Filter",
        "Sort",
        "GlobalLimit",
        "LocalLimit",
        "Limit",
        "Distinct",
        "Deduplicate",
        "DeduplicateWithinWatermark",
        "Repartition",
        "RepartitionByExpression",
        "RebalancePartitions",
        "Sample",
        "Tail",
        "Offset",
        "ResolvedHint",
        "WithCTE",
        "CTERelationDef",
        "Subquery",
        "WriteFiles",
        "EventTimeWatermark",
        "Intersect",
        "Except",
    }
)
_IN_MEMORY = frozenset(
    {
        "LocalRelation",
        "LogicalRDD",
        "Range",
        "OneRowRelation",
        "ExternalRDD",
        "InMemoryRelation",
        "EmptyRelation",
        "LocalTableScan",
    }
)
_LOSSLESS_CASTS = {
    "byte": {"short", "integer", "long", "float", "double"},
    "short": {"integer", "long", "float", "double"},
    "integer": {"long", "double"},
    "float": {"double"},
}
_AGG_CLASSES = frozenset({"AggregateExpression"})


# ---------------------------------------------------------------------------------------------------------
# Tree parsing


@dataclass
class _Node:
    cls: str
    f: dict[str, Any]
    children: list[_Node] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.cls.rsplit(".", 1)[-1]

    @property
    def is_expr(self) -> bool:
        return ".expressions." in self.cls


def _is_tree(value: Any) -> TypeGuard[list[dict[str, Any]]]:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, dict) for v in value)
        and "class" in value[0]
        and "num-children" in value[0]
    )


def _parse(items: list[dict[str, Any]]) -> _Node:
    """Pre-order node list -> tree, iteratively (plans can be deeper than Python's recursion limit)."""
    if not items:
        msg = "empty plan"
        raise ValueError(msg)
    nodes = [_Node(cls=str(d.get("class", "")), f=d) for d in items]
    stack: list[tuple[_Node, int]] = []
    root = nodes[0]
    for i, node in enumerate(nodes):
        if i > 0:
            if not stack:
                msg = f"plan has more nodes than its tree ({len(nodes)})"
                raise ValueError(msg)
            parent, left = stack.pop()
            parent.children.append(node)
            if left > 1:
                stack.append((parent, left - 1))
        n = int(node.f.get("num-children", 0) or 0)
        if n > 0:
            stack.append((node, n))
    return root


def _exprs(value: Any) -> list[_Node]:
    """An expression field: one tree (list of dicts) or a Seq of trees (list of lists)."""
    if _is_tree(value):
        return [_parse(value)]
    if isinstance(value, list):
        out: list[_Node] = []
        for v in value:
            if _is_tree(v):
                out.append(_parse(v))
        return out
    return []


def _walk(node: _Node) -> Iterator[_Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _expr_id(node: _Node) -> int | None:
    e = node.f.get("exprId")
    if isinstance(e, dict) and isinstance(e.get("id"), int):
        return int(e["id"])
    return None


def _seq_str(value: Any) -> list[str] | None:
    """``"[a, b]"`` -> ``["a", "b"]``; None when absent or truncated by spark.sql.maxToStringFields."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    if not isinstance(value, str) or not value.startswith("["):
        return None
    if "more field" in value:
        return None
    inner = value[1:-1].strip()
    return [p.strip() for p in inner.split(",")] if inner else []


# ---------------------------------------------------------------------------------------------------------
# Naming


def normalize_uri(uri: str) -> str:
    """One spelling per location, so Spark's and SQL's paths meet.

    Local files lose their ``file:`` scheme (Spark prints ``file:/abs/path``, a SQL script says
    ``'/abs/path'``, and :func:`atlas_bridge.naming.path_qualified_name` treats both as cluster-local);
    other schemes keep their form. A trailing ``/`` is cut.

    >>> normalize_uri("file:/tmp/x/")
    '/tmp/x'
    >>> normalize_uri("file:///tmp/x")
    '/tmp/x'
    >>> normalize_uri("hdfs://nn:8020/data/t/")
    'hdfs://nn:8020/data/t'
    """
    u = uri.strip()
    if u.startswith("file:"):
        u = "/" + u[len("file:") :].lstrip("/")
    if len(u) > 1 and u.endswith("/") and not u.endswith("://"):
        u = u.rstrip("/")
    return u


@dataclass(frozen=True)
class _Ident:
    name: str
    db: str | None
    catalog: str | None

    @property
    def text(self) -> str:
        return ".".join(p for p in (self.catalog, self.db, self.name) if p)


def _ident(obj: Any, default_db: str | None = None) -> _Ident | None:
    """A TableIdentifier-like dict (``{"table", "database", "catalog"}``) -> our naming."""
    if not isinstance(obj, dict):
        return None
    name = obj.get("table") or obj.get("name")
    if not isinstance(name, str) or not name:
        return None
    db = obj.get("database") or obj.get("db") or default_db
    catalog = obj.get("catalog")
    if catalog == SESSION_CATALOG:
        catalog = None
    return _Ident(
        name=name,
        db=db if isinstance(db, str) else None,
        catalog=catalog if isinstance(catalog, str) and catalog else None,
    )


# ---------------------------------------------------------------------------------------------------------
# Resolution state


@dataclass(frozen=True)
class _Src:
    dataset: str
    column: str
    field: str | None = None
    """A field below the column (``widget.asset.id``: column widget, field asset.id), issue 31."""
    into: str | None = None
    """The field of the resolved value this source feeds (``named_struct('a', x)``: x into a); None: the
    whole value. Only on direct sources."""


@dataclass
class _Resolved:
    direct: dict[_Src, tuple[int, str | None]] = field(default_factory=dict)
    """source -> (effect rank, transform text)"""
    indirect: set[tuple[_Src, ClauseType]] = field(default_factory=set)

    def add_direct(self, src: _Src, rank: int, transform: str | None) -> None:
        old = self.direct.get(src)
        if old is None or rank > old[0] or (rank == old[0] and (transform or "") < (old[1] or "")):
            self.direct[src] = (rank, transform)

    def merge(self, other: _Resolved) -> None:
        for src, (rank, tr) in other.direct.items():
            self.add_direct(src, rank, tr)
        self.indirect |= other.indirect


_EXACT, _PARTIAL, _MODIFIED, _AGG = 0, 1, 2, 3
_EFFECTS = {
    _EXACT: Effect.EXACT_COPY,
    _PARTIAL: Effect.PARTIAL_COPY,
    _MODIFIED: Effect.MODIFIED_COPY,
    _AGG: Effect.AGGREGATION,
}


@dataclass
class _Def:
    kind: str  # "leaf" | "expr" | "multi"
    srcs: list[_Src] = field(default_factory=list)
    expr: _Node | None = None
    ctx: _Node | None = None
    alts: list[int] = field(default_factory=list)
    exprs: list[_Node] = field(default_factory=list)
    field: str | None = None
    """A generator output that is one field of each element (``inline``, ``json_tuple``)."""


class _Problems(Exception):
    pass


class _Extractor:
    def __init__(self, facts: dict[str, Any], *, temp_views: bool) -> None:
        self.facts = facts
        self.temp_views = temp_views
        self.defs: dict[int, _Def] = {}
        self.union_alts: dict[int, list[int]] = {}
        self.rowset: list[tuple[_Node, ClauseType]] = []
        self.aggregates: dict[int, _Node] = {}
        self.datasets: dict[str, Dataset] = {}
        self.dataset_cols: dict[str, dict[str, str | None]] = {}
        self.leaf_datasets: dict[int, list[str]] = {}  # id(leaf node) -> dataset ids
        self.problems: list[Problem] = []
        self.memo: dict[int, _Resolved] = {}
        self.in_progress: set[int] = set()
        self.render_memo: dict[int, str] = {}
        self.parsed: dict[int, list[_Node]] = {}
        self.subplans: dict[int, _Node] = {}
        self.leaf_facts: list[dict[str, Any]] = [
            lf for lf in (facts.get("leaves") or []) if isinstance(lf, dict)
        ]
        self.checkpoints: list[dict[str, Any]] = [
            c for c in (facts.get("checkpoints") or []) if isinstance(c, dict)
        ]
        self.checkpoint_leaves: dict[tuple[int, ...], list[str]] = {}

    def exprs(self, value: Any) -> list[_Node]:
        """Parse an expression field once, so node identities stay stable within one extraction."""
        if value is None:
            return []
        got = self.parsed.get(id(value))
        if got is None:
            got = _exprs(value)
            self.parsed[id(value)] = got
        return got

    # -- problems ------------------------------------------------------------------------------------
    def warn(self, message: str, kind: str = "resolve") -> None:
        self.problems.append(Problem(message=message, severity=Severity.WARNING, kind=kind))

    # -- datasets ------------------------------------------------------------------------------------
    def add_dataset(self, ds: Dataset, columns: Iterable[tuple[str, str | None]] = ()) -> str:
        old = self.datasets.get(ds.id)
        if old is None:
            self.datasets[ds.id] = ds
            self.dataset_cols[ds.id] = {}
        cols = self.dataset_cols[ds.id]
        for name, dtype in columns:
            if name not in cols or cols[name] is None:
                cols[name] = dtype
        return ds.id

    def table_dataset(
        self, ident: _Ident, kind: DatasetKind = DatasetKind.TABLE, file_format: str | None = None
    ) -> Dataset:
        return Dataset(
            id=dataset_id(kind, ident.name, ident.db, ident.catalog),
            kind=kind,
            name=ident.name,
            db=ident.db,
            catalog=ident.catalog,
            file_format=file_format,
        )

    @staticmethod
    def path_dataset(uri: str, file_format: str | None) -> Dataset:
        norm = normalize_uri(uri)
        return Dataset(
            id=dataset_id(DatasetKind.PATH, norm),
            kind=DatasetKind.PATH,
            name=norm,
            uri=norm,
            file_format=file_format.lower() if file_format else None,
        )

    def use_column(self, ds_id: str, column: str) -> None:
        self.dataset_cols[ds_id].setdefault(column, None)

    def build_datasets(self, process_id: str | None, targets: set[str]) -> list[Dataset]:
        out: list[Dataset] = []
        for ds_id, ds in self.datasets.items():
            cols = self.dataset_cols[ds_id]
            columns = [Column(name=n, system=(n == PSEUDO_ROWS), data_type=t) for n, t in cols.items()]
            update: dict[str, Any] = {"columns": tuple(columns)}
            if process_id and ds_id in targets:
                update["process_ids"] = (process_id,)
            out.append(ds.model_copy(update=update))
        return out

    # -- leaves --------------------------------------------------------------------------------------
    def facts_for_leaf(self, ids: set[int]) -> dict[str, Any] | None:
        for lf in self.leaf_facts:
            got = lf.get("exprIds") or []
            if ids & {int(i) for i in got if isinstance(i, int)}:
                return lf
        return None

    def register_read(
        self, node: _Node, attrs: list[_Node], table: _Ident | None, facts: dict[str, Any], missing: str
    ) -> None:
        """A leaf that reads a catalog table if the facts name one, else the file paths they list."""
        paths = [p for p in (facts.get("paths") or []) if isinstance(p, str)]
        if table is not None:
            ds = self.table_dataset(table)
            self.add_dataset(ds)
            self.register_leaf(node, attrs, [ds.id])
        elif paths:
            dss = [self.add_dataset(self.path_dataset(p, facts.get("format"))) for p in paths]
            self.register_leaf(node, attrs, dss)
        else:
            self.warn(missing)

    def register_leaf(self, node: _Node, attrs: list[_Node], dss: list[str]) -> None:
        self.leaf_datasets[id(node)] = dss
        for a in attrs:
            xid = _expr_id(a)
            if xid is None:
                continue
            col = str(a.f.get("name"))
            dtype = a.f.get("dataType") if isinstance(a.f.get("dataType"), str) else None
            for ds_id in dss:
                self.add_dataset(self.datasets[ds_id], [(col, dtype)])
            self.defs[xid] = _Def(kind="leaf", srcs=[_Src(ds_id, col) for ds_id in dss])

    def leaf(self, node: _Node) -> bool:
        """Register a source leaf; True when the walk must not descend further."""
        name = node.name
        if name == "LogicalRelation":
            attrs = self.exprs(node.f.get("output"))
            ident = _ident((node.f.get("catalogTable") or {}).get("identifier"))
            ids = {i for i in (_expr_id(a) for a in attrs) if i is not None}
            lf = self.facts_for_leaf(ids) or {}
            if ident is not None:
                provider = (node.f.get("catalogTable") or {}).get("provider")
                ds = self.table_dataset(ident, file_format=provider if isinstance(provider, str) else None)
                self.add_dataset(ds)
                self.register_leaf(node, attrs, [ds.id])
                return True
            missing = f"a file read has no path (facts missing for exprIds {sorted(ids)[:5]})"
            self.register_read(node, attrs, _ident(lf.get("table")), lf, missing)
            return True
        if name == "HiveTableRelation":
            meta = node.f.get("tableMeta") or {}
            ident = _ident(meta.get("identifier"))
            attrs = self.exprs(node.f.get("dataCols")) + self.exprs(node.f.get("partitionCols"))
            if ident is None:
                self.warn("a Hive table read has no identifier")
                return True
            storage = meta.get("storage") or {}
            fmt = _hive_format(storage) or (
                meta.get("provider") if isinstance(meta.get("provider"), str) else None
            )
            ds = self.table_dataset(ident, file_format=fmt)
            self.add_dataset(ds)
            self.register_leaf(node, attrs, [ds.id])
            return True
        if name in ("DataSourceV2Relation", "DataSourceV2ScanRelation", "StreamingDataSourceV2Relation"):
            attrs = self.exprs(node.f.get("output"))
            ids = {i for i in (_expr_id(a) for a in attrs) if i is not None}
            lf = self.facts_for_leaf(ids) or {}
            table = _ident(lf.get("table")) or _ident(_v2_identifier(node.f))
            self.register_read(
                node, attrs, table, lf, "a DataSource V2 read has no identifier (facts missing)"
            )
            return True
        if name == "View" and not node.f.get("isTempView"):
            desc = node.f.get("desc") or {}
            ident = _ident(desc.get("identifier"))
            if ident is None:
                return False
            ds = self.table_dataset(ident, kind=DatasetKind.VIEW)
            self.add_dataset(ds)
            attrs = [a for a in self.output_attrs(node)]
            self.register_leaf(node, attrs, [ds.id])
            return True
        if name == "LogicalRDD":
            self.checkpointed(node)
            return True
        return name in _IN_MEMORY

    def checkpointed(self, node: _Node) -> None:
        """A checkpointed DataFrame: its LogicalRDD keeps the output (same exprIds) of the plan it was made
        from, which the facts may hold (the hook remembers the plans of this session's checkpoints); that
        plan is walked as if it stood here. Other RDDs (``createDataFrame(rdd)``) have no identity."""
        ids = [i for i in (_expr_id(a) for a in self.exprs(node.f.get("output"))) if i is not None]
        done = self.checkpoint_leaves.get(tuple(ids))
        if done is not None:  # the same checkpoint read twice (a union with itself): walked once
            self.leaf_datasets[id(node)] = done
            return
        for entry in self.checkpoints:
            if entry.get("exprIds") != ids or not isinstance(entry.get("plan"), str):
                continue
            try:
                sub = _parse(json.loads(entry["plan"]))
            except (ValueError, TypeError, KeyError, AttributeError):
                break
            self.leaf_facts.extend(lf for lf in (entry.get("leaves") or []) if isinstance(lf, dict))
            self.checkpoints.extend(c for c in (entry.get("checkpoints") or []) if isinstance(c, dict))
            self.checkpoint_leaves[tuple(ids)] = []
            self.register(sub)
            self.leaf_datasets[id(node)] = self.checkpoint_leaves[tuple(ids)] = self.leaf_ids_under(sub)
            return
        if node.f.get("fromCheckpoint"):
            self.warn(
                "a checkpointed DataFrame is read, but the plan it was made from is unknown (checkpointed "
                "before the hook was installed, or too long ago): the write's sources through it are missing",
                kind="checkpoint",
            )

    # -- outputs -------------------------------------------------------------------------------------
    def output_attrs(self, node: _Node) -> list[_Node]:
        """The attributes (AttributeReference or Alias nodes) a plan node outputs, in order."""
        name = node.name
        if name in ("Project",):
            return self.exprs(node.f.get("projectList"))
        if name == "Aggregate":
            return self.exprs(node.f.get("aggregateExpressions"))
        if name == "Window":
            base = self.output_attrs(node.children[0]) if node.children else []
            return base + self.exprs(node.f.get("windowExpressions"))
        if name == "Join":
            jt = str((node.f.get("joinType") or {}).get("object", ""))
            left = self.output_attrs(node.children[0]) if node.children else []
            if "LeftSemi" in jt or "LeftAnti" in jt:
                return left
            right = self.output_attrs(node.children[1]) if len(node.children) > 1 else []
            return left + right
        if name == "Union":
            return self.output_attrs(node.children[0]) if node.children else []
        if name == "HiveTableRelation":
            return self.exprs(node.f.get("dataCols")) + self.exprs(node.f.get("partitionCols"))
        if name == "Generate":
            base = self.output_attrs(node.children[0]) if node.children else []
            skip = set(node.f.get("unrequiredChildIndex") or [])
            base = [a for i, a in enumerate(base) if i not in skip]
            return base + self.exprs(node.f.get("generatorOutput"))
        if "output" in node.f and self.exprs(node.f.get("output")):
            return self.exprs(node.f.get("output"))
        if node.children:
            return self.output_attrs(node.children[0])
        return []

    # -- registration --------------------------------------------------------------------------------
    def register(self, root: _Node) -> None:
        """Walk a query plan: leaves, definitions, row-set restrictions."""
        stack = [root]
        while stack:
            node = stack.pop()
            if self.leaf(node):
                continue
            name = node.name
            if name in ("Project", "Aggregate"):
                key = "projectList" if name == "Project" else "aggregateExpressions"
                for e in self.exprs(node.f.get(key)):
                    self.register_expr(e, node)
                if name == "Aggregate":
                    self.aggregates[id(node)] = node
            elif name == "Window":
                for e in self.exprs(node.f.get("windowExpressions")):
                    self.register_expr(e, node)
            elif name == "Filter":
                clause = ClauseType.WHERE
                if node.children and node.children[0].name == "Aggregate":
                    clause = ClauseType.HAVING
                for e in self.exprs(node.f.get("condition")):
                    self.rowset.append((e, clause))
                    self.register_subqueries(e)
            elif name == "Join":
                for e in self.exprs(node.f.get("condition")):
                    self.rowset.append((e, ClauseType.JOIN))
                    self.register_subqueries(e)
            elif name == "Sort":
                for e in self.exprs(node.f.get("order")):
                    self.rowset.append((e, ClauseType.ORDER_BY))
            elif name in ("Union", "Intersect", "Except"):
                # both sides of INTERSECT / EXCEPT flow too (a convention the SQL extractor keeps)
                outs = [self.output_attrs(c) for c in node.children]
                if outs:
                    for i, a in enumerate(outs[0]):
                        xid = _expr_id(a)
                        if xid is None:
                            continue
                        for other in outs[1:]:
                            if i < len(other):
                                oid = _expr_id(other[i])
                                if oid is not None and oid != xid:
                                    self.union_alts.setdefault(xid, []).append(oid)
            elif name == "Generate":
                gens = self.exprs(node.f.get("generator"))
                outputs = self.exprs(node.f.get("generatorOutput"))
                names = _generated_fields(gens[0], len(outputs)) if gens else None
                for i, a in enumerate(outputs):
                    xid = _expr_id(a)
                    if xid is not None and gens:
                        fld = names[i] if names else None
                        self.defs[xid] = _Def(kind="expr", expr=gens[0], ctx=node, field=fld)
            elif name == "Expand":
                expand_out = self.exprs(node.f.get("output"))
                projections = node.f.get("projections") or []
                for i, a in enumerate(expand_out):
                    xid = _expr_id(a)
                    if xid is None:
                        continue
                    alts: list[_Node] = []
                    for proj in projections:
                        proj_exprs = self.exprs(proj)
                        if i < len(proj_exprs) and _expr_id(proj_exprs[i]) != xid:
                            alts.append(proj_exprs[i])
                    if alts:
                        self.defs[xid] = _Def(kind="multi", exprs=alts, ctx=node)
            stack.extend(reversed(node.children))

    def register_expr(self, e: _Node, ctx: _Node) -> None:
        if e.name == "Alias":
            xid = _expr_id(e)
            if xid is not None and e.children:
                self.defs[xid] = _Def(kind="expr", expr=e.children[0], ctx=ctx)
        self.register_subqueries(e)

    def register_subqueries(self, e: _Node) -> None:
        for n in _walk(e):
            plan = n.f.get("plan")
            if n.is_expr and _is_tree(plan) and id(n) not in self.subplans:
                sub = _parse(plan)
                self.subplans[id(n)] = sub
                self.register(sub)

    # -- resolution ----------------------------------------------------------------------------------
    def resolve(self, xid: int) -> _Resolved:
        got = self.memo.get(xid)
        if got is not None:
            return got
        if xid in self.in_progress:
            return _Resolved()
        self.in_progress.add(xid)
        res = _Resolved()
        d = self.defs.get(xid)
        if d is not None:
            if d.kind == "leaf":
                for s in d.srcs:
                    res.add_direct(s, _EXACT, None)
            elif d.kind == "expr" and d.expr is not None:
                got = self.resolve_expr(d.expr, d.ctx)
                res.merge(_read_field(got, d.field) if d.field else got)
            elif d.kind == "multi":
                for ex in d.exprs:
                    res.merge(self.resolve_expr(ex, d.ctx))
        for alt in self.union_alts.get(xid, ()):
            res.merge(self.resolve(alt))
        self.in_progress.discard(xid)
        self.memo[xid] = res
        return res

    def resolve_expr(self, e: _Node, ctx: _Node | None) -> _Resolved:
        coalesce = _coalesce(e)
        if coalesce is not None:
            return self.resolve_coalesce(e, coalesce, ctx)
        res = _Resolved()
        local = _local_effect(e)
        transform = None if local == _EXACT else self.render(e)
        has_agg = False
        agg_without_inputs = False
        for ref, role, path, into, copy in _refs_paths(e):
            if role == "agg":
                has_agg = True
                continue
            if role == "agg_empty":
                agg_without_inputs = True
                continue
            if ref is None:
                continue
            sub = self.read(ref, path)
            if role == "value":
                for src, (rank, tr) in sub.direct.items():
                    # a struct built here puts the value into its field; a value copied as is keeps the
                    # field of it the source fed, a computed one does not (to_json(s) is no struct)
                    fed = _with(src, into=fields.join_path(into, src.into if copy else None))
                    res.add_direct(fed, max(rank, local), transform if local != _EXACT else tr)
                res.indirect |= sub.indirect
            else:
                clause = ClauseType.WINDOW if role == "window" else ClauseType.CONDITION
                for src in sub.direct:
                    res.indirect.add((_with(src, into=None), clause))
                res.indirect |= sub.indirect
        if has_agg and ctx is not None and ctx.name == "Aggregate":
            grouping = self.exprs(ctx.f.get("groupingExpressions"))
            if grouping:
                for g in grouping:
                    for ref, _role, path, _into, _copy in _refs_paths(g):
                        if ref is None:
                            continue
                        sub = self.read(ref, path)
                        for src in sub.direct:
                            res.indirect.add((_with(src, into=None), ClauseType.GROUP_BY))
                        res.indirect |= sub.indirect
            elif not agg_without_inputs:
                # No GROUP BY: the whole row set is the one group (seed 000).
                for ds_id in self.leaf_ids_under(ctx):
                    res.indirect.add((_Src(ds_id, PSEUDO_ROWS), ClauseType.GROUP_BY))
            if agg_without_inputs:
                for ds_id in self.leaf_ids_under(ctx):
                    res.indirect.add((_Src(ds_id, PSEUDO_ROWS), ClauseType.SELECT))
        return res

    def resolve_coalesce(self, e: _Node, coalesce: _Node, ctx: _Node | None) -> _Resolved:
        """``COALESCE(a, b)`` is the conditional ``CASE WHEN a IS NOT NULL THEN a ELSE b END``: every argument
        is a value (a bare column's is a partial copy: it gives the rows where it is chosen), and every
        argument but the last also decides, by its nullness, which one is taken (fdr condition)."""
        res = _Resolved()
        text = self.render(e)
        last = len(coalesce.children) - 1
        for i, arg in enumerate(coalesce.children):
            sub = self.resolve_expr(arg, ctx)
            for src, (rank, _tr) in sub.direct.items():
                res.add_direct(src, max(rank, _PARTIAL), text)
                if i < last:
                    res.indirect.add((src, ClauseType.CONDITION))
            res.indirect |= sub.indirect
        return res

    def ref_resolved(self, ref: _Node) -> _Resolved:
        """What an attribute or a subquery expression inside an expression depends on."""
        if ref.name == "AttributeReference" or ref.name == "OuterReference":
            xid = _expr_id(ref) if ref.name == "AttributeReference" else self._outer_id(ref)
            return self.resolve(xid) if xid is not None else _Resolved()
        sub = self.subplans.get(id(ref))
        res = _Resolved()
        if sub is not None:
            for a in self.output_attrs(sub):
                xid = _expr_id(a)
                if xid is not None:
                    for src, (rank, tr) in self.resolve(xid).direct.items():
                        res.add_direct(src, max(rank, _MODIFIED), tr)
                    res.indirect |= self.resolve(xid).indirect
            for src, clause in self.rowset_sources(sub):
                res.indirect.add((src, clause))
        return res

    def read(self, ref: _Node, path: str | None) -> _Resolved:
        """:meth:`ref_resolved`, reading field ``path`` of the value (None: the whole of it)."""
        sub = self.ref_resolved(ref)
        return _read_field(sub, path) if path else sub

    def _outer_id(self, ref: _Node) -> int | None:
        """The outer query's attribute a correlated subquery refers to: ``outer(o.id)`` is a leaf whose
        attribute sits in its ``e`` field (a child only in older plans)."""
        inner = ref.children[0] if ref.children else next(iter(self.exprs(ref.f.get("e"))), None)
        return _expr_id(inner) if inner is not None else None

    def leaf_ids_under(self, node: _Node) -> list[str]:
        out: list[str] = []
        for n in _walk(node):
            for ds_id in self.leaf_datasets.get(id(n), ()):
                if ds_id not in out:
                    out.append(ds_id)
        return out

    def rowset_sources(self, root: _Node | None) -> set[tuple[_Src, ClauseType]]:
        """Row-set restrictions (where, having, join, order by) of the plan or of a subquery plan."""
        items = self.rowset
        if root is not None:
            items = []
            for n in _walk(root):
                if n.name == "Filter":
                    items.extend((e, ClauseType.WHERE) for e in self.exprs(n.f.get("condition")))
                elif n.name == "Join":
                    items.extend((e, ClauseType.JOIN) for e in self.exprs(n.f.get("condition")))
        found: set[tuple[_Src, ClauseType]] = set()
        for e, clause in items:
            for ref, _role, path, _into, _copy in _refs_paths(e):
                if ref is None:
                    continue
                sub = self.read(ref, path)
                for src in sub.direct:
                    found.add((_with(src, into=None), clause))
                found |= sub.indirect
        return found

    # -- rendering -----------------------------------------------------------------------------------
    def render(self, e: _Node) -> str:
        text = _render(e, self._inline)
        if len(text) > _MAX_TRANSFORM:
            text = text[: _MAX_TRANSFORM - 3] + "..."
        return text

    def _inline(self, xid: int, name: str) -> str:
        d = self.defs.get(xid)
        if d is None or d.kind != "expr" or d.expr is None or d.ctx is None or d.ctx.name == "Generate":
            return name
        got = self.render_memo.get(xid)
        if got is None:
            self.render_memo[xid] = name  # cycle guard
            got = _render(d.expr, self._inline)
            if len(got) > _MAX_TRANSFORM:
                got = name
            self.render_memo[xid] = got
        return got


def _hive_format(storage: dict[str, Any]) -> str | None:
    serde = str(storage.get("serde") or storage.get("inputFormat") or "").lower()
    for key, fmt in (
        ("parquet", "parquet"),
        ("orc", "orc"),
        ("avro", "avro"),
        ("lazysimpleserde", "textfile"),
        ("textinputformat", "textfile"),
        ("json", "json"),
    ):
        if key in serde:
            return fmt
    return None


def _v2_identifier(f: dict[str, Any]) -> dict[str, Any] | None:
    ident = f.get("identifier")
    if isinstance(ident, dict):
        ns = ident.get("namespace")
        db = ns[-1] if isinstance(ns, list) and ns else None
        return {"table": ident.get("name"), "database": db}
    return None


# ---------------------------------------------------------------------------------------------------------
# Expression helpers


def _strip(e: _Node) -> _Node:
    while e.name == "Alias" and e.children:
        e = e.children[0]
    return e


def _coalesce(e: _Node) -> _Node | None:
    """The ``Coalesce`` an expression is (``nvl`` / ``ifnull`` hold theirs as their only child), else None."""
    x = _strip(e)
    if x.name in _COALESCE_ALIASES and len(x.children) == 1:
        x = x.children[0]
    return x if x.name == "Coalesce" and x.children else None


_COALESCE_ALIASES = frozenset({"Nvl", "IfNull"})


def _local_effect(e: _Node) -> int:
    """EXACT for a bare attribute or a lossless cast of one, AGG if an aggregate is inside, else MODIFIED."""
    if any(n.name in _AGG_CLASSES for n in _walk(e)):
        return _AGG
    x = _strip(e)
    while x.name in ("Cast", "AnsiCast", "Upcast") and x.children:
        child = _strip(x.children[0])
        to = str(x.f.get("dataType", ""))
        frm = str(child.f.get("dataType", "")) if child.name == "AttributeReference" else None
        if (
            child.name == "AttributeReference"
            and frm is not None
            and (frm == to or to in _LOSSLESS_CASTS.get(frm, set()))
        ):
            return _EXACT
        if child.name not in ("Cast", "AnsiCast", "Upcast"):
            return _MODIFIED
        x = child
    while x.name in ("GetStructField", "GetArrayStructFields") and x.children:
        x = x.children[0]  # a struct field is a copy of that field (as ``a.b`` is in SQL)
    return _EXACT if x.name == "AttributeReference" else _MODIFIED


def _refs(e: _Node) -> Iterator[tuple[_Node | None, str]]:
    """Attributes (and subquery expressions) inside an expression, with their role.

    Roles: ``value`` (the value flows into the result; a CASE/IF predicate too, as SQLFlow and the SQL
    extractor read CASE: a function of all its columns), ``condition`` (an aggregate FILTER), ``window``
    (PARTITION BY / ORDER BY of a window), ``agg`` (one per aggregate function, ref None) and ``agg_empty``
    (an aggregate without column inputs, e.g. count(*)).
    """
    for ref, role, _path, _into, _copy in _refs_paths(e):
        yield ref, role


_RefPath = tuple[_Node | None, str, str | None, str | None, bool]


def _refs_paths(e: _Node) -> Iterator[_RefPath]:
    """:func:`_refs`, each attribute with the field of it read (``GetStructField`` and friends, a lambda's
    element of an array), the field of the result it is built into (``CreateNamedStruct``) and whether the
    value reaches the result as is (so a field it fed stays that field). Issue 31, docs/nested-data.md."""
    stack: list[tuple[_Node, str, str | None, bool]] = [(e, "value", None, True)]
    lambdas: dict[int, tuple[_Node, str | None]] = {}  # a lambda variable's exprId -> its array and path
    while stack:
        n, role, into, copy = stack.pop()
        name = n.name
        chain = fields.path_chain(n) if name in _PATH_CLASSES else None
        if chain is not None:
            start, steps, others = chain
            path = ".".join(steps) or None
            var = lambdas.get(_expr_id(start) or -1) if start.name == "NamedLambdaVariable" else None
            if var is not None:
                yield var[0], role, fields.join_path(var[1], path), into, copy
            elif start.name != "NamedLambdaVariable":
                yield start, role, path, into, copy
            stack.extend((o, role, into, False) for o in others)
            continue
        if name == "NamedLambdaVariable":
            var = lambdas.get(_expr_id(n) or -1)
            if var is not None:
                yield var[0], role, var[1], into, copy
            continue
        if name in _LAMBDA_OVER_ARRAY and len(n.children) == 2 and n.children[1].name == "LambdaFunction":
            array, lam = n.children
            found = fields.path_chain(array) if array.name in _PATH_CLASSES else None
            element = array if array.name in ("AttributeReference", "OuterReference") else None
            start_path: str | None = None
            if found is not None and found[0].name != "NamedLambdaVariable" and not found[2]:
                element, start_path = found[0], ".".join(found[1]) or None
            if element is None or len(lam.children) < 2:
                stack.extend((c, role, into, False) for c in n.children)
                continue
            start = element
            arg_id = _expr_id(lam.children[1])
            body = lam.children[0]
            reads_element = any(
                x.name == "NamedLambdaVariable" and _expr_id(x) == arg_id for x in _walk(body)
            )
            if name == "ArrayTransform" and reads_element and arg_id is not None:
                lambdas[arg_id] = (start, start_path)
                stack.append((body, role, into, False))  # each element is what the body makes of it
            else:  # filter: the array's elements themselves (what the body reads of them is not data)
                yield start, role, start_path, into, copy
                stack.append((body, role, into, False))
            continue
        members = fields.struct_members(n) if name == "CreateNamedStruct" else None
        if members is not None:
            for fname, value in reversed(members):
                stack.append((value, role, fields.join_path(into, fname), copy))
            continue
        if name in ("AttributeReference", "OuterReference"):
            yield n, role, None, into, copy
            continue
        if n.is_expr and _is_tree(n.f.get("plan")):
            yield n, role, None, into, False
            continue
        if name == "Alias":
            stack.extend((c, role, into, copy) for c in reversed(n.children))
            continue
        copy = False  # below any other expression the value is computed, not copied
        if name == "AggregateExpression":
            yield None, "agg", None, None, False
            fn = n.children[0] if n.children else None
            if fn is not None and not any(c.name == "AttributeReference" for c in _walk(fn)):
                yield None, "agg_empty", None, None, False
            for i, c in enumerate(n.children):
                stack.append((c, role if i == 0 else "condition", into, False))
            continue
        if name == "WindowSpecDefinition" or name in _RANKING:
            # a ranking function's children are its window's ORDER BY keys: they order, copy nothing
            for c in n.children:
                stack.append((c, "window", into, False))
            continue
        if name == "Coalesce":
            # each argument is a value; all but the last also decide (by their nullness) which is taken
            for i, c in enumerate(n.children):
                stack.append((c, role, into, False))
                if i < len(n.children) - 1:
                    stack.append((c, "condition", into, False))
            continue
        for c in n.children:
            stack.append((c, role, into, False))


_PATH_CLASSES = frozenset(
    {"GetStructField", "GetArrayStructFields", "GetMapValue", "ElementAt", "GetArrayItem", "GetJsonObject"}
)
"""Expressions that step into a value (:func:`atlas_bridge.spark.fields.path_chain`)."""
_LAMBDA_OVER_ARRAY = frozenset({"ArrayTransform", "ArrayFilter"})
"""Higher-order functions whose lambda's first argument is each element of the array (issue 31)."""


def _with(src: _Src, *, into: str | None) -> _Src:
    return src if src.into == into else _Src(src.dataset, src.column, src.field, into)


def _read_field(res: _Resolved, path: str | None) -> _Resolved:
    """What reading field ``path`` of a value depends on: each source that fed the whole value is read at
    that field, one that fed that field (or a field below it, or above it) continues, another field's does
    not (docs/nested-data.md). Restrictions stay as they are."""
    if not path:
        return res
    out = _Resolved()
    for src, (rank, tr) in res.direct.items():
        step = fields.read_through(src.into, path)
        if step is None:
            continue
        deeper, into = step
        out.add_direct(_Src(src.dataset, src.column, fields.join_path(src.field, deeper), into), rank, tr)
    out.indirect |= res.indirect
    return out


def _generated_fields(generator: _Node, count: int) -> list[str | None] | None:
    """Per output of a generator, the field of each element it is: ``inline(items)``'s outputs are the
    fields of the struct elements (by position), ``json_tuple(j, 'a', 'b')``'s the keys; None for the
    others (``explode``'s element is the whole element, its position comes from the whole array)."""
    if generator.name == "Inline" and generator.children:
        names = fields.element_fields(fields.data_type(generator.children[0]))
        if names is not None and len(names) == count:
            return list(names)
        return None
    if generator.name == "JsonTuple" and len(generator.children) == count + 1:
        keys = [c.f.get("value") if c.name == "Literal" else None for c in generator.children[1:]]
        return [k if isinstance(k, str) else None for k in keys]
    return None


_RANKING = frozenset({"Rank", "DenseRank", "PercentRank"})
"""Ranking functions whose children Spark fills with the window's ORDER BY keys (row_number, ntile and
cume_dist have none)."""

_BINARY = {
    "Add": "+",
    "Subtract": "-",
    "Multiply": "*",
    "Divide": "/",
    "Remainder": "%",
    "IntegralDivide": "div",
    "EqualTo": "=",
    "EqualNullSafe": "<=>",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
    "LessThan": "<",
    "LessThanOrEqual": "<=",
    "And": "AND",
    "Or": "OR",
    "Like": "LIKE",
    "RLike": "RLIKE",
    "BitwiseAnd": "&",
    "BitwiseOr": "|",
}
_FUNC_NAMES = {
    "StringTrim": "trim",
    "Substring": "substring",
    "CaseWhen": "CASE",
    "AggregateExpression": "",
    "RowNumber": "row_number",
    "DenseRank": "dense_rank",
    "Rank": "rank",
    "NTile": "ntile",
    "Lag": "lag",
    "Lead": "lead",
    "ToPrettyString": "to_pretty_string",
    "UnscaledValue": "unscaled_value",
    "DateFormatClass": "date_format",
    "CountDistinct": "count",
    "ArrayTransform": "transform",
    "ArrayFilter": "filter",
    "JsonToStructs": "from_json",
    "CreateNamedStruct": "named_struct",
}


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _render(e: _Node, inline: Any) -> str:
    """Spark-like SQL text of an expression; attributes defined upstream are inlined through ``inline``."""
    name = e.name
    kids = e.children
    if name == "Alias":
        return _render(kids[0], inline) if kids else str(e.f.get("name"))
    if name == "AttributeReference":
        xid = _expr_id(e)
        col = str(e.f.get("name"))
        return str(inline(xid, col)) if xid is not None else col
    if name == "Literal":
        v = e.f.get("value")
        if v is None:
            return "NULL"
        return f"'{v}'" if e.f.get("dataType") == "string" else str(v)
    if name in ("Cast", "AnsiCast"):
        return f"CAST({_render(kids[0], inline)} AS {str(e.f.get('dataType', '')).upper()})" if kids else ""
    if name in _BINARY and len(kids) == 2:
        return f"({_render(kids[0], inline)} {_BINARY[name]} {_render(kids[1], inline)})"
    if name == "Not" and kids:
        return f"(NOT {_render(kids[0], inline)})"
    if name in ("IsNull", "IsNotNull") and kids:
        return f"({_render(kids[0], inline)} IS {'NOT ' if name == 'IsNotNull' else ''}NULL)"
    if name == "CaseWhen":
        nb = len(e.f.get("branches") or [])
        parts = ["CASE"]
        for i in range(nb):
            if 2 * i + 1 < len(kids):
                parts.append(f"WHEN {_render(kids[2 * i], inline)} THEN {_render(kids[2 * i + 1], inline)}")
        if len(kids) > 2 * nb:
            parts.append(f"ELSE {_render(kids[2 * nb], inline)}")
        parts.append("END")
        return " ".join(parts)
    if name == "If" and len(kids) == 3:
        return f"if({', '.join(_render(k, inline) for k in kids)})"
    if name == "AggregateExpression" and kids:
        fn = kids[0]
        inner = ", ".join(_render(k, inline) for k in fn.children) or "*"
        if fn.name == "Count" and all(k.name == "Literal" for k in fn.children):
            inner = "*"
        distinct = "DISTINCT " if e.f.get("isDistinct") else ""
        return f"{_FUNC_NAMES.get(fn.name, _snake(fn.name))}({distinct}{inner})"
    if name in _COALESCE_ALIASES and len(kids) == 1 and kids[0].name == "Coalesce":
        return f"{_snake(name)}({', '.join(_render(k, inline) for k in kids[0].children)})"
    if name in _RANKING:
        return f"{_FUNC_NAMES.get(name, _snake(name))}()"  # its children repeat the window's ORDER BY
    if name == "WindowExpression" and len(kids) == 2:
        return f"{_render(kids[0], inline)} OVER ({_render(kids[1], inline)})"
    if name == "WindowSpecDefinition":
        ps = e.f.get("partitionSpec") or []
        os_ = e.f.get("orderSpec") or []
        part = [_render(kids[i], inline) for i in ps if isinstance(i, int) and i < len(kids)]
        order = [_render(kids[i], inline) for i in os_ if isinstance(i, int) and i < len(kids)]
        txt = []
        if part:
            txt.append("PARTITION BY " + ", ".join(part))
        if order:
            txt.append("ORDER BY " + ", ".join(order))
        return " ".join(txt)
    if name == "SortOrder" and kids:
        direction = str((e.f.get("direction") or {}).get("object", ""))
        return _render(kids[0], inline) + (" DESC" if "Descending" in direction else "")
    if name in ("ScalarSubquery", "Exists", "ListQuery", "InSubquery"):
        return f"{_snake(name)}(...)"
    if name == "GetStructField" and kids:  # nested data as SQL writes it: a.b, m['k'], a[0]
        return f"{_render(kids[0], inline)}.{fields.struct_field_name(e) or e.f.get('ordinal')}"
    if name == "GetArrayStructFields" and kids:
        fld = e.f.get("field")
        return f"{_render(kids[0], inline)}.{fld.get('name') if isinstance(fld, dict) else '?'}"
    if name in ("GetMapValue", "GetArrayItem") and len(kids) == 2:
        return f"{_render(kids[0], inline)}[{_render(kids[1], inline)}]"
    if name == "NamedLambdaVariable":
        return str(e.f.get("name"))
    if name == "LambdaFunction" and kids:
        args = ", ".join(_render(k, inline) for k in kids[1:])
        return f"{args if len(kids) == 2 else '(' + args + ')'} -> {_render(kids[0], inline)}"
    fn_name = _FUNC_NAMES.get(name, _snake(name))
    return f"{fn_name}({', '.join(_render(k, inline) for k in kids)})"


# ---------------------------------------------------------------------------------------------------------
# Writes


@dataclass
class _Write:
    kind: str  # process type
    target: Dataset | None
    query: _Node | None
    columns: list[str] | None
    effect_type: str
    verb: str
    source: Dataset | None = None  # rename
    columns_typed: dict[str, str | None] = field(default_factory=dict)


def _child_or_nested(node: _Node, key: str) -> _Node | None:
    value = node.f.get(key)
    if _is_tree(value):
        return _parse(value)
    if isinstance(value, int) and not isinstance(value, bool) and value < len(node.children):
        return node.children[value]
    return None


def _mode_kind(mode: str | None, default: str = "insert") -> str:
    m = (mode or "").lower()
    if m == "append":
        return "insert"
    if m in ("overwrite", "errorifexists", "ignore"):
        return "insert_overwrite"
    return default


def _describe_write(root: _Node, facts: dict[str, Any], ex: _Extractor) -> _Write | None:
    """Target, process type and query of a write command (None: not a write)."""
    name = root.name
    wf: dict[str, Any] = facts.get("write") if isinstance(facts.get("write"), dict) else {}  # type: ignore[assignment]
    fmt = wf.get("format") if isinstance(wf.get("format"), str) else None
    cols = _seq_str(root.f.get("outputColumnNames"))

    def table_target(
        ident: _Ident | None, kind: DatasetKind = DatasetKind.TABLE, file_format: str | None = None
    ) -> Dataset | None:
        if ident is None:
            ident = _ident(wf.get("table"), facts.get("current_database"))
        return ex.table_dataset(ident, kind, file_format) if ident is not None else None

    def path_target() -> Dataset | None:
        path = wf.get("path")
        if isinstance(path, str) and path:
            return ex.path_dataset(path, fmt)
        ex.warn(f"{name}: the output path is unknown (facts missing)")
        return None

    if name == "InsertIntoHadoopFsRelationCommand":
        query = _child_or_nested(root, "query")
        ct = root.f.get("catalogTable")
        ident = _ident(ct.get("identifier")) if isinstance(ct, dict) else None
        kind = _mode_kind(wf.get("mode") if isinstance(wf.get("mode"), str) else None)
        if ident is not None:
            provider = ct.get("provider") if isinstance(ct, dict) else None
            tgt = table_target(ident, file_format=provider if isinstance(provider, str) else None)
            verb = "Insert overwrite" if kind == "insert_overwrite" else "Insert into"
        else:
            tgt = path_target()
            verb = "Overwrite path" if kind == "insert_overwrite" else "Append to path"
        return _Write(kind, tgt, query, cols, "insert", verb)
    if name == "InsertIntoHiveTable":
        query = _child_or_nested(root, "query")
        table = root.f.get("table") or {}
        kind = "insert_overwrite" if root.f.get("overwrite") else "insert"
        tgt = table_target(
            _ident(table.get("identifier")), file_format=_hive_format(table.get("storage") or {})
        )
        verb = "Insert overwrite" if kind == "insert_overwrite" else "Insert into"
        return _Write(kind, tgt, query, cols, "insert", verb)
    if name in ("InsertIntoDataSourceDirCommand", "InsertIntoHiveDirCommand"):
        query = _child_or_nested(root, "query")
        storage = root.f.get("storage") or {}
        loc = storage.get("locationUri") if isinstance(storage.get("locationUri"), str) else None
        provider = root.f.get("provider") if isinstance(root.f.get("provider"), str) else fmt
        path = wf.get("path") or loc
        tgt = ex.path_dataset(path, provider) if isinstance(path, str) and path else path_target()
        return _Write("insert_overwrite", tgt, query, cols, "insert", "Insert overwrite directory")
    if name in (
        "CreateDataSourceTableAsSelectCommand",
        "CreateHiveTableAsSelectCommand",
        "OptimizedCreateHiveTableAsSelectCommand",
        "SaveAsV1TableCommand",
    ):
        query = _child_or_nested(root, "query")
        desc = root.f.get("table") or root.f.get("tableDesc") or {}
        provider = desc.get("provider") if isinstance(desc.get("provider"), str) else None
        ident = _ident(desc.get("identifier"), facts.get("current_database"))
        tgt = table_target(ident, file_format=provider)
        return _Write("create_table_as_select", tgt, query, cols, "create_table", "Create table as select")
    if name == "InsertIntoDataSourceCommand":
        query = _child_or_nested(root, "query")
        kind = "insert_overwrite" if root.f.get("overwrite") else "insert"
        return _Write(
            kind,
            table_target(None),
            query,
            cols,
            "insert",
            "Insert overwrite" if kind == "insert_overwrite" else "Insert into",
        )
    if name == "SaveIntoDataSourceCommand":
        query = _child_or_nested(root, "query")
        kind = _mode_kind(wf.get("mode") if isinstance(wf.get("mode"), str) else None)
        tgt = table_target(None) if isinstance(wf.get("table"), dict) else path_target()
        return _Write(kind, tgt, query, cols, "insert", "Save into")
    if name in (
        "AppendData",
        "OverwriteByExpression",
        "OverwritePartitionsDynamic",
        "CreateTableAsSelect",
        "ReplaceTableAsSelect",
    ):
        query = _child_or_nested(root, "query")
        table_node = _child_or_nested(root, "table")
        ident = None
        if table_node is not None:
            ident = _ident(_v2_identifier(table_node.f))
        kinds = {
            "AppendData": ("insert", "Insert into", "insert"),
            "OverwriteByExpression": ("insert_overwrite", "Insert overwrite", "insert"),
            "OverwritePartitionsDynamic": ("insert_overwrite", "Insert overwrite", "insert"),
            "CreateTableAsSelect": ("create_table_as_select", "Create table as select", "create_table"),
            "ReplaceTableAsSelect": ("replace_table_as_select", "Replace table as select", "create_table"),
        }
        kind, verb, eff = kinds[name]
        return _Write(kind, table_target(ident), query, cols, eff, verb)
    if name == "CreateViewCommand":
        view_type = str((root.f.get("viewType") or {}).get("object", ""))
        temp = "Temp" in view_type
        if temp and not ex.temp_views:
            return None
        ident = _ident(root.f.get("name"))
        if ident is not None and "GlobalTemp" in view_type and ident.db is None:
            ident = _Ident(ident.name, "global_temp", None)
        query = _child_or_nested(root, "plan")
        user_cols = root.f.get("userSpecifiedColumns") or []
        vcols = [c.get("_1") if isinstance(c, dict) else c for c in user_cols]
        names = [str(c) for c in vcols if isinstance(c, str)] or None
        tgt = ex.table_dataset(ident, DatasetKind.VIEW) if ident is not None else None
        return _Write(
            "create_view", tgt, query, names, "create_view", "Create temp view" if temp else "Create view"
        )
    if name == "MergeIntoTable":
        if len(root.children) < 2:
            return None
        ex.register(root)
        target_ids = ex.leaf_ids_under(root.children[0])
        if not target_ids:
            ex.warn("MERGE target has no identity")
            return None
        return _Write("merge", ex.datasets[target_ids[0]], None, None, "merge", "Merge into")
    if name == "AlterTableRenameCommand":
        old = _ident(root.f.get("oldName"))
        new = _ident(root.f.get("newName"))
        if old is None or new is None:
            return None
        if new.db is None:
            new = _Ident(new.name, old.db, old.catalog)
        kind = DatasetKind.VIEW if root.f.get("isView") else DatasetKind.TABLE
        return _Write(
            "alter_table_rename",
            ex.table_dataset(new, kind),
            None,
            None,
            "rename_table",
            "Rename",
            source=ex.table_dataset(old, kind),
        )
    return None


# ---------------------------------------------------------------------------------------------------------
# Process identity

_VOLATILE_KEYS = frozenset(
    {
        "exprId",
        "jvmId",
        "resultId",
        "createTime",
        "lastAccessTime",
        "createVersion",
        "stats",
        "owner",
        "data",
        "outputPath",
        "fileIndex",
        "hiveTmpPath",
        "locationUri",
        "timeZoneId",
        "properties",
        "options",
        "tracksPartitionsInCatalog",
        "num-children",
    }
)


def _normalised(value: Any) -> Any:
    """The plan without what changes between runs of one statement (ids, times, storage details)."""
    if isinstance(value, dict):
        if str(value.get("product-class", "")).endswith(".CatalogTable"):
            return {"identifier": _normalised(value.get("identifier"))}
        return {k: _normalised(v) for k, v in sorted(value.items()) if k not in _VOLATILE_KEYS}
    if isinstance(value, list):
        return [_normalised(v) for v in value]
    return value


def _plan_hash(items: list[dict[str, Any]], target_id: str, kind: str) -> str:
    """Hash of what the statement does: its kind, target and query; the command node's own fields (which
    the hook may read over py4j instead of serialising) do not count."""
    root = items[0] if items else {}
    slim: dict[str, Any] = {"class": root.get("class")}
    for key in ("query", "plan"):
        if isinstance(root.get(key), list):
            slim[key] = root[key]
    body = json.dumps(
        [kind, target_id, _normalised([slim, *items[1:]])], sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def plan_identity(
    plan: str | list[dict[str, Any]], facts: dict[str, Any] | None = None
) -> tuple[str | None, str | None]:
    """``(signature, target)`` of a write event, from one parse of its plan.

    The signature is the identity of the data a write moves: the exprIds of its query's output (the same
    across the 2-3 events CTAS / saveAsTable / INSERT OVERWRITE DIRECTORY fire); None for plans without a
    query. The target is the dataset id written; it lets the hook tell the outer command of a statement
    (``SaveAsV1TableCommand``) from a new write when their queries differ in exprIds (an append into an
    existing table re-aliases the query's output).
    """
    items = json.loads(plan) if isinstance(plan, str) else plan
    try:
        root = _parse(items)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None, None
    signature = None
    query = _child_or_nested(root, "query") or _child_or_nested(root, "plan")
    if query is not None:
        ex = _Extractor({}, temp_views=True)
        ids = [(_expr_id(a), (a.f.get("exprId") or {}).get("jvmId")) for a in ex.output_attrs(query)]
        if ids:
            signature = hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:32]
    try:
        w = _describe_write(root, facts or {}, _Extractor({}, temp_views=True))
    except (ValueError, TypeError, KeyError, AttributeError):
        w = None
    return signature, (w.target.id if w is not None and w.target is not None else None)


def output_expr_ids(plan: str | list[dict[str, Any]]) -> tuple[int, ...]:
    """The exprIds of a query plan's output, in order (a checkpoint's LogicalRDD keeps them); () if none."""
    try:
        items = json.loads(plan) if isinstance(plan, str) else plan
        root = _parse(items)
    except (ValueError, TypeError, KeyError, AttributeError):
        return ()
    ids = [_expr_id(a) for a in _Extractor({}, temp_views=True).output_attrs(root)]
    return tuple(i for i in ids if i is not None)


def rdd_leaf_outputs(items: list[dict[str, Any]]) -> list[tuple[int, ...]]:
    """The output exprIds of each LogicalRDD leaf in a plan, nested plans (a CTAS's query) included."""
    out: list[tuple[int, ...]] = []
    stack: list[Any] = [items]
    while stack:
        value = stack.pop()
        if isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, dict):
            if str(value.get("class", "")).endswith(".LogicalRDD"):
                ids = [_expr_id(a) for a in _exprs(value.get("output"))]
                out.append(tuple(i for i in ids if i is not None))
            else:
                stack.extend(v for v in value.values() if isinstance(v, (list, dict)))
    return out


def plan_signature(plan: str | list[dict[str, Any]]) -> str | None:
    """The signature part of :func:`plan_identity`."""
    return plan_identity(plan)[0]


def write_priority(root_class: str) -> int:
    """Which of several events of one statement to keep (higher wins); 0 when not a write."""
    return WRITE_COMMANDS.get(root_class.rsplit(".", 1)[-1], 0)


# ---------------------------------------------------------------------------------------------------------
# Entry point


def extract_spark_plan_lineage(
    plan_json: str | list[dict[str, Any]],
    facts: dict[str, Any] | None = None,
    *,
    event: str = "onSuccess",
    func_name: str | None = None,
    sql: str | None = None,
    resultsets: bool = False,
    temp_views: bool = False,
) -> ExtractionResult:
    """Lineage of one QueryExecutionListener event.

    ``plan_json`` is ``qe.analyzed().toJSON()`` (text or parsed). ``facts`` holds what the JSON leaves out::

        {"write": {"path": str, "mode": "Append|Overwrite|...", "format": str,
                   "table": {"catalog", "database", "table"}},        # write target when not in the JSON
         "leaves": [{"exprIds": [int, ...], "paths": [str, ...], "format": str,
                     "table": {...}}],                                 # file / V2 reads, matched by exprId
         "current_database": str, "sql": str}

    Plain queries (collect, show) give an empty lineage unless ``resultsets``; failed queries
    (``event="onFailure"``) are skipped. Never raises on a bad plan: problems are returned.
    """
    facts = dict(facts or {})
    sql = sql or (facts.get("sql") if isinstance(facts.get("sql"), str) else None)
    if event != "onSuccess":
        return ExtractionResult(
            problems=(
                Problem(message=f"{event} event skipped", severity=Severity.WARNING, kind="unsupported"),
            )
        )
    try:
        items = json.loads(plan_json) if isinstance(plan_json, str) else plan_json
        if not isinstance(items, list):
            msg = "a plan is a JSON list of nodes"
            raise TypeError(msg)
        root = _parse(items)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        return ExtractionResult(problems=(Problem(message=f"unreadable plan: {e}", kind="parse"),))
    try:
        return _extract(
            root, items, facts, sql=sql, resultsets=resultsets, temp_views=temp_views, func_name=func_name
        )
    except RecursionError:
        return ExtractionResult(problems=(Problem(message=f"{root.name}: plan too deep", kind="resolve"),))


def _extract(
    root: _Node,
    items: list[dict[str, Any]],
    facts: dict[str, Any],
    *,
    sql: str | None,
    resultsets: bool,
    temp_views: bool,
    func_name: str | None,
) -> ExtractionResult:
    ex = _Extractor(facts, temp_views=temp_views)
    w = _describe_write(root, facts, ex)
    if w is None:
        if resultsets and root.name in QUERY_ROOTS:
            w = _Write("select", None, root, None, "select", "Query")
        else:
            return ExtractionResult(problems=tuple(ex.problems))
    if w.kind != "select" and w.target is None:
        ex.problems.append(Problem(message=f"{root.name}: write target unknown", kind="resolve"))
        return ExtractionResult(problems=tuple(ex.problems))

    # Process identity
    if w.kind == "select":
        hash_target = func_name or "query"
    else:
        assert w.target is not None
        hash_target = w.target.id
    original = root.f.get("originalText")
    if sql:
        qh = query_hash(sql)
    elif w.kind == "create_view" and isinstance(original, str) and original:
        qh = query_hash(f"CREATE VIEW {hash_target} AS {original}")
    else:
        qh = _plan_hash(items, hash_target, w.kind)
    process_id = f"process:{qh[:16]}"
    if w.kind == "select":
        w.target = Dataset(
            id=dataset_id(DatasetKind.RESULTSET, "RS-1", scope=process_id),
            kind=DatasetKind.RESULTSET,
            name="RS-1",
            sub_type="select_list",
        )
    assert w.target is not None
    target = w.target
    ex.add_dataset(target)
    relations: list[Relation] = []

    def rel(
        rtype: RelationType,
        src: _Src,
        col: str,
        *,
        clause: ClauseType | None = None,
        effect: Effect | None = None,
        transform: str | None = None,
    ) -> None:
        ex.use_column(src.dataset, src.column)
        ex.use_column(target.id, col)
        relations.append(
            Relation(
                type=rtype,
                source=ColumnRef(dataset_id=src.dataset, column=src.column, field=src.field),
                target=ColumnRef(dataset_id=target.id, column=col, field=src.into),
                effect_type=w.effect_type,
                clause_type=clause,
                process_id=process_id,
                effect=effect,
                transform=transform,
            )
        )

    if w.kind == "alter_table_rename":
        assert w.source is not None
        ex.add_dataset(w.source)
        rel(RelationType.FDD, _Src(w.source.id, PSEUDO_ROWS), PSEUDO_ROWS)
    elif w.kind == "merge":
        _merge_relations(root, ex, target, rel)
    elif w.query is not None:
        ex.register(w.query)
        outs = ex.output_attrs(w.query)
        names = w.columns if w.columns is not None and len(w.columns) == len(outs) else None
        for i, attr in enumerate(outs):
            col = names[i] if names else str(attr.f.get("name"))
            dtype = attr.f.get("dataType") if isinstance(attr.f.get("dataType"), str) else None
            if dtype is None and attr.name == "Alias" and attr.children:
                dt = attr.children[0].f.get("dataType")
                dtype = dt if isinstance(dt, str) else None
            ex.add_dataset(target, [(col, dtype)])
            xid = _expr_id(attr)
            if xid is None:
                continue
            res = ex.resolve(xid)
            for src, (rank, tr) in sorted(res.direct.items(), key=lambda kv: (kv[0].dataset, kv[0].column)):
                rel(
                    RelationType.FDD,
                    src,
                    col,
                    effect=_EFFECTS[rank],
                    transform=tr if rank != _EXACT else None,
                )
            for src, clause in sorted(res.indirect, key=lambda x: (x[0].dataset, x[0].column, x[1].value)):
                if src not in res.direct:  # one edge per column pair, the direct one winning
                    rel(RelationType.FDR, src, col, clause=clause)
        for src, clause in sorted(
            ex.rowset_sources(None), key=lambda x: (x[0].dataset, x[0].column, x[1].value)
        ):
            rel(RelationType.FDR, src, PSEUDO_ROWS, clause=clause)
        # GROUP BY keys decide the written row set (with or without an aggregate), as in the SQL extractor.
        for agg in ex.aggregates.values():
            for g in ex.exprs(agg.f.get("groupingExpressions")):
                for ref, _role in _refs(g):
                    if ref is not None:
                        for src in ex.ref_resolved(ref).direct:
                            rel(RelationType.FDR, src, PSEUDO_ROWS, clause=ClauseType.GROUP_BY)

    name = _process_name(w, target)
    process = Process(id=process_id, type=w.kind, name=name, query_hash=qh, sql=sql)
    targets = {target.id} if target.kind.is_permanent else set()
    datasets = ex.build_datasets(process_id, targets)
    lineage = Lineage(datasets=tuple(datasets), processes=(process,), relations=tuple(relations))
    return ExtractionResult(lineage=lineage, problems=tuple(ex.problems))


def _merge_relations(root: _Node, ex: _Extractor, target: Dataset, rel: Any) -> None:
    """MERGE INTO: each assignment's value flows into its target column; the ON condition and each
    action's condition decide (fdr condition). The target's own columns in the ON condition are skipped:
    they only locate rows, they do not feed the target."""
    assigned: set[str] = set()
    for key in ("matchedActions", "notMatchedActions", "notMatchedBySourceActions"):
        for action in ex.exprs(root.f.get(key)):
            conditions = [c for c in action.children if c.name != "Assignment"]
            columns: list[str] = []
            for assignment in (c for c in action.children if c.name == "Assignment"):
                if len(assignment.children) != 2:
                    continue
                k, value = assignment.children
                column = str(_strip(k).f.get("name"))
                columns.append(column)
                ex.add_dataset(
                    target, [(column, k.f.get("dataType") if isinstance(k.f.get("dataType"), str) else None)]
                )
                res = ex.resolve_expr(value, None)
                for src, (rank, tr) in sorted(
                    res.direct.items(), key=lambda kv: (kv[0].dataset, kv[0].column)
                ):
                    rel(RelationType.FDD, src, column, effect=_EFFECTS[rank], transform=tr)
                for src, clause in sorted(
                    res.indirect, key=lambda x: (x[0].dataset, x[0].column, x[1].value)
                ):
                    rel(RelationType.FDR, src, column, clause=clause)
            for cond in conditions:
                for ref, _role in _refs(cond):
                    if ref is not None:
                        for src in sorted(ex.ref_resolved(ref).direct, key=lambda x: (x.dataset, x.column)):
                            for column in columns:
                                rel(RelationType.FDR, src, column, clause=ClauseType.CONDITION)
            assigned.update(columns)
    for cond in ex.exprs(root.f.get("mergeCondition")):
        for ref, _role in _refs(cond):
            if ref is None:
                continue
            for src in sorted(ex.ref_resolved(ref).direct, key=lambda x: (x.dataset, x.column)):
                if src.dataset != target.id:
                    rel(RelationType.FDR, src, PSEUDO_ROWS, clause=ClauseType.CONDITION)


def _process_name(w: _Write, target: Dataset) -> str:
    if w.kind == "alter_table_rename" and w.source is not None:
        return f"Rename {w.source.qualified_name} to {target.qualified_name}"
    if w.kind == "select":
        return "Query"
    return f"{w.verb} {target.qualified_name}"
