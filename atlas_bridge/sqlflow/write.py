"""Write our lineage in Gudu SQLFlow's formats: dlineage XML (column or table level) and flat SQLFlow JSON.

The XML follows seed 000's listings (``<process>``, ``<table>`` / ``<view>`` / ``<path>`` /
``<resultset>`` / ``<variable>`` with ``<column>`` s, ``<relation>`` with ``<target>`` / ``<source>``,
coordinates ``[line,col,0],[line,col,0]``, ``source="system"`` on ``PseudoRows``, space-separated
``processIds``); the JSON is the flat J1 model (``dbobjs`` with processes as ``type: "process"`` objects,
``relationships`` with ``target`` / ``sources``). Ids are numbers assigned in sorted order, so the same
lineage always gives the same bytes.

Each of our relations is atomic (one source), so each becomes one SQLFlow relation with one source. What
SQLFlow has no slot for (an id our naming rules would not rebuild, SQL text, statement index, source file,
column expressions, the v2 flow and effect) goes into extension attributes in the ``urn:atlas-bridge:sqlflow``
namespace (JSON: an ``atlasBridge`` object), which SQLFlow ignores and
:func:`atlas_bridge.sqlflow.read.extract_sqlflow_lineage` reads, so a written column-level lineage reads
back into an equal :class:`~atlas_bridge.model.Lineage`.

Table level (``level="table"``) is :func:`atlas_bridge.graph.table_level` written the way SQLFlow's
``/tableLineage`` does: objects without columns and ``source -> process -> target`` relations whose ends
carry fresh ids plus ``source_id`` / ``target_id``. Reading that back gives ``PseudoRows`` edges from every
source of a process to every target of it (SQLFlow's table level cannot say more).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable
from typing import Any

from atlas_bridge.graph import table_level
from atlas_bridge.model import (
    PSEUDO_ROWS,
    ClauseType,
    Column,
    ColumnRef,
    Dataset,
    DatasetKind,
    Lineage,
    Procedure,
    Process,
    Relation,
    RelationType,
    Span,
    dataset_id,
    unquote,
)
from atlas_bridge.sqlflow.read import (
    AB_JSON_KEY,
    AB_NAMESPACE,
    is_pseudo_rows,
    normalise_process_type,
    qualify,
)

logger = logging.getLogger(__name__)

__all__ = ["to_sqlflow_json", "to_sqlflow_xml"]

_CLAUSE_OUT = {
    ClauseType.WHERE: "where",
    ClauseType.JOIN: "joinCondition",
    ClauseType.GROUP_BY: "groupBy",
    ClauseType.HAVING: "having",
    ClauseType.WINDOW: "window",
    ClauseType.ORDER_BY: "orderBy",
    ClauseType.CONDITION: "condition",
    ClauseType.INSERT_VALUES: "insertValues",
    ClauseType.SELECT: "select",
}

# Output order of the object kinds (SQLFlow: process -> path/stage -> table -> view -> resultset -> variable).
_KIND_ORDER = {
    DatasetKind.PATH: 0,
    DatasetKind.STAGE: 1,
    DatasetKind.STREAM: 2,
    DatasetKind.TABLE: 3,
    DatasetKind.PSEUDO_TABLE: 4,
    DatasetKind.CONSTANT_TABLE: 5,
    DatasetKind.VIEW: 6,
    DatasetKind.RESULTSET: 7,
    DatasetKind.VARIABLE: 8,
}
_ELEMENT = {
    DatasetKind.TABLE: ("table", "table"),
    DatasetKind.PSEUDO_TABLE: ("table", "pseudoTable"),
    DatasetKind.CONSTANT_TABLE: ("table", "constantTable"),
    DatasetKind.VIEW: ("view", "view"),
    DatasetKind.PATH: ("path", "path"),
    DatasetKind.STAGE: ("stage", "stage"),
    DatasetKind.STREAM: ("stream", "stream"),
    DatasetKind.RESULTSET: ("resultset", "resultset"),
    DatasetKind.VARIABLE: ("variable", "variable"),
}
# dbobj types the JSON reader takes for something other than a resultset
_RESERVED_TYPES = frozenset(
    {
        "table",
        "view",
        "pseudotable",
        "constanttable",
        "path",
        "file",
        "directory",
        "stage",
        "datasource",
        "stream",
        "variable",
        "process",
        "procedure",
        "trigger",
        "macro",
        "createprocedure",
    }
)

_LEVELS = ("column", "table")


# ---------------------------------------------------------------------------------------------------------
# Shared: ids and attribute values, in one neutral form both writers serialise.


class _Ids:
    """Numeric SQLFlow ids: processes, procedures, datasets and their columns, in sorted order."""

    def __init__(self, lineage: Lineage, *, with_columns: bool = True) -> None:
        self.next = 1
        self.process: dict[str, str] = {}
        self.procedure: dict[str, str] = {}
        self.dataset: dict[str, str] = {}
        self.column: dict[tuple[str, str], str] = {}
        self.hash_prefixes = Counter(p.query_hash[:16] for p in lineage.processes)
        self.has_writer = {d.id for d in lineage.datasets if d.process_ids} | {
            r.target.dataset_id for r in lineage.relations if r.process_id is not None
        }
        for proc in lineage.processes:
            self.process[proc.id] = self._take()
        for pr in lineage.procedures:
            self.procedure[pr.id] = self._take()
        for ds in _ordered(lineage.datasets):
            self.dataset[ds.id] = self._take()
            if with_columns:
                for col in ds.columns:
                    self.column[(ds.id, col.name)] = self._take()

    def _take(self) -> str:
        value = str(self.next)
        self.next += 1
        return value


def _ordered(datasets: Iterable[Dataset]) -> list[Dataset]:
    return sorted(datasets, key=lambda d: (_KIND_ORDER[d.kind], d.id))


def _coord(spans: Iterable[Span]) -> str:
    return ",".join(f"[{s.line},{s.column},0],[{s.end_line},{s.end_column},0]" for s in spans)


def _coord_json(spans: Iterable[Span]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for s in spans:
        out.append({"x": s.line, "y": s.column, "hashCode": "0"})
        out.append({"x": s.end_line, "y": s.end_column, "hashCode": "0"})
    return out


def _quote_part(part: str) -> str:
    """Quote one name part so that the reader's split + ``unquote`` gives it back exactly."""
    if "." not in part and unquote(part) == part and part[:1] not in ('"', "[", "`"):
        return part
    for left, right in (('"', '"'), ("[", "]"), ("`", "`")):
        if right not in part:
            return f"{left}{part}{right}"
    return f'"{part}"'


def _qualified(ds: Dataset) -> str:
    return _qualified_parts(ds.name, ds.db, ds.catalog)


def _qualified_parts(name: str, db: str | None, catalog: str | None) -> str:
    quoted = _quote_part(name)
    if catalog:
        return f"{_quote_part(catalog)}.{_quote_part(db) if db else ''}.{quoted}"
    if db:
        return f"{_quote_part(db)}.{quoted}"
    return quoted


def _column_name(ds: Dataset, col: Column) -> str:
    if col.system and col.name == PSEUDO_ROWS:
        return PSEUDO_ROWS
    if ds.kind is DatasetKind.CONSTANT_TABLE:
        return col.name
    return (
        _quote_part(col.name)
        if unquote(col.name) != col.name or col.name[:1] in ('"', "[", "`")
        else col.name
    )


def _human_type(ptype: str) -> str:
    return " ".join(w.capitalize() for w in ptype.split("_"))


def _rule_dataset_id(ds: Dataset) -> str | None:
    """The id the reader would give this dataset from its name alone (None: it needs a scope)."""
    if ds.kind in (
        DatasetKind.RESULTSET,
        DatasetKind.VARIABLE,
        DatasetKind.CONSTANT_TABLE,
        DatasetKind.PSEUDO_TABLE,
    ):
        return None
    if ds.kind is DatasetKind.PATH:
        return dataset_id(ds.kind, ds.uri or ds.name)
    return dataset_id(ds.kind, ds.name, ds.db, ds.catalog)


def _dataset_attrs(ds: Dataset, ids: _Ids) -> tuple[dict[str, str], dict[str, str]]:
    """SQLFlow attributes and atlas-bridge extensions of a dataset (insertion order = output order)."""
    type_attr = _ELEMENT[ds.kind][1]
    attrs: dict[str, str] = {"id": ids.dataset[ds.id]}
    ext: dict[str, str] = {}
    if ds.kind is DatasetKind.PATH:
        attrs["name"] = ds.name
        attrs["uri"] = ds.uri or ds.name
    else:
        if ds.db:
            attrs["schema"] = ds.db
        if ds.catalog:
            attrs["database"] = ds.catalog
        attrs["name"] = _display_name(ds)
        if ds.uri:
            attrs["uri"] = ds.uri
    if ds.alias:
        attrs["alias"] = ds.alias
    if ds.kind is DatasetKind.RESULTSET:
        attrs["type"] = ds.sub_type or "resultset"
        if (ds.sub_type or "").lower() in _RESERVED_TYPES or (ds.sub_type or "").lower() == "resultset":
            ext["kind"] = ds.kind.value
    else:
        attrs["type"] = type_attr
        if ds.sub_type:
            attrs["subType"] = ds.sub_type
    if ds.file_format:
        attrs["fileFormat"] = ds.file_format
    pids = [ids.process[p] for p in ds.process_ids if p in ids.process]
    unknown = [p for p in ds.process_ids if p not in ids.process]
    if unknown:
        logger.debug(
            "dataset %s names processes %s that are not written; left out of processIds", ds.id, unknown
        )
    if pids:
        attrs["processIds"] = " ".join(pids)
    if ds.spans:
        attrs["coordinate"] = _coord(ds.spans)
    if _rule_dataset_id(ds) != ds.id:
        ext["id"] = ds.id
    name, db, catalog = _read_back_name(ds)
    if name != ds.name:
        ext["name"] = ds.name
    if db != ds.db:
        ext["db"] = ds.db or ""
    if catalog != ds.catalog:
        ext["catalog"] = ds.catalog or ""
    return attrs, ext


def _read_back_name(ds: Dataset) -> tuple[str, str | None, str | None]:
    if ds.kind is DatasetKind.PATH:
        return unquote(ds.name), None, None
    if ds.kind in (DatasetKind.RESULTSET, DatasetKind.VARIABLE, DatasetKind.CONSTANT_TABLE):
        return unquote(ds.name), None, None
    return qualify(_qualified(ds), ds.db, ds.catalog)


def _column_attrs(ds: Dataset, col: Column, ids: _Ids) -> tuple[dict[str, str], dict[str, str]]:
    attrs: dict[str, str] = {"id": ids.column[(ds.id, col.name)], "name": _column_name(ds, col)}
    ext: dict[str, str] = {}
    if col.spans:
        attrs["coordinate"] = _coord(col.spans)
    if col.system:
        attrs["source"] = "system"
    if col.data_type:
        attrs["dataType"] = col.data_type
    if col.expression:
        ext["expression"] = col.expression
    if is_pseudo_rows(col.name) and not (col.system and col.name == PSEUDO_ROWS):
        ext["name"] = col.name  # a real column that only looks like the pseudo column
    return attrs, ext


def _process_attrs(proc: Process, ids: _Ids, lineage: Lineage) -> tuple[dict[str, str], dict[str, str]]:
    human = _human_type(proc.type)
    attrs: dict[str, str] = {
        "id": ids.process[proc.id],
        "name": proc.name,
        "procedureName": proc.procedure or "batchQueries",
        "queryHashId": proc.query_hash,
        "type": human,
    }
    if proc.span:
        attrs["coordinate"] = _coord([proc.span])
    ext: dict[str, str] = {}
    if proc.id != f"process:{proc.query_hash[:16]}" or ids.hash_prefixes[proc.query_hash[:16]] > 1:
        ext["id"] = proc.id
    if normalise_process_type(human, proc.name) != proc.type:
        ext["type"] = proc.type
    if proc.statement_index is not None:
        ext["statementIndex"] = str(proc.statement_index)
    if proc.sql is not None:
        ext["sql"] = proc.sql
    if proc.source_file is not None:
        ext["sourceFile"] = proc.source_file
    if proc.procedure and proc.procedure.lower() == "batchqueries":
        logger.warning(
            "process %s sits in a procedure called batchQueries; SQLFlow reads that as none", proc.id
        )
    return attrs, ext


def _procedure_attrs(pr: Procedure, ids: _Ids) -> tuple[dict[str, str], dict[str, str]]:
    attrs: dict[str, str] = {"id": ids.procedure[pr.id]}
    if pr.db:
        attrs["schema"] = pr.db
    if pr.catalog:
        attrs["database"] = pr.catalog
    attrs["name"] = _qualified_parts(pr.name, pr.db, pr.catalog)
    attrs["type"] = pr.type
    if pr.span:
        attrs["coordinate"] = _coord([pr.span])
    ext: dict[str, str] = {}
    rule = "procedure:" + ".".join(p for p in (pr.catalog, pr.db, pr.name) if p).lower()
    if rule != pr.id:
        ext["id"] = pr.id
    return attrs, ext


class _RelationOut:
    """One relation in neutral form: attributes of the relation and of its two ends, plus their spans."""

    def __init__(self, rel: Relation, ids: _Ids, by_id: dict[str, Dataset]) -> None:
        self.attrs: dict[str, str] = {"type": rel.type.value}
        if rel.effect_type:
            self.attrs["effectType"] = rel.effect_type
        if rel.function:
            self.attrs["function"] = rel.function
        if rel.process_id:
            self.attrs["processId"] = ids.process[rel.process_id]
        self.ext: dict[str, str] = {}
        if rel.process_id is None and rel.target.dataset_id in ids.has_writer:
            self.ext["process"] = ""  # the reader would otherwise credit the target's writer
        default_flow = Relation(**{**dict(rel), "flow": None}).flow  # what the model infers by itself
        if rel.flow is not None and rel.flow is not default_flow:
            self.ext["flow"] = rel.flow.value
        if rel.effect is not None:
            self.ext["effect"] = rel.effect.value
        self.transform = rel.transform
        self.target, self.target_spans = self._end(rel, rel.target, ids, by_id, is_source=False)
        self.source, self.source_spans = self._end(rel, rel.source, ids, by_id, is_source=True)
        # A field below a column (docs/nested-data.md): the end names the dotted path, as SQLFlow spells a
        # field, its id stays the column's; the field itself goes in our namespace so it reads back exactly.
        if rel.source.field:
            self.ext["sourceField"] = rel.source.field
        if rel.target.field:
            self.ext["targetField"] = rel.target.field

    @staticmethod
    def _end(
        rel: Relation, ref: ColumnRef, ids: _Ids, by_id: dict[str, Dataset], *, is_source: bool
    ) -> tuple[dict[str, str], list[Span]]:
        ds = by_id[ref.dataset_id]
        col = next(c for c in ds.columns if c.name == ref.column)
        end: dict[str, str] = {
            "id": ids.column[(ds.id, col.name)],
            "column": f"{_column_name(ds, col)}.{ref.field}" if ref.field else _column_name(ds, col),
            "parent_id": ids.dataset[ds.id],
            "parent_name": _display_name(ds),
        }
        if ds.alias:
            end["parent_alias"] = ds.alias
        if col.system:
            end["source"] = "system"
        if is_source and rel.clause_type is not None:
            end["clauseType"] = _CLAUSE_OUT[rel.clause_type]
        if is_source:
            return end, [rel.span] if rel.span else []
        return end, list(col.spans[:1])


def _display_name(ds: Dataset) -> str:
    if ds.kind in (DatasetKind.PATH, DatasetKind.RESULTSET, DatasetKind.VARIABLE, DatasetKind.CONSTANT_TABLE):
        return ds.name
    return _qualified(ds)


# ---------------------------------------------------------------------------------------------------------
# XML


def _xml_escape(value: str) -> str:
    return (
        value.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("\n", "&#10;")
        .replace("\r", "&#13;")
        .replace("\t", "&#9;")
    )


def _xml_text(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")


def _open(tag: str, attrs: dict[str, str], ext: dict[str, str], *, close: bool) -> str:
    parts = [tag]
    parts += [f'{k}="{_xml_escape(v)}"' for k, v in attrs.items()]
    parts += [f'ab:{k}="{_xml_escape(v)}"' for k, v in sorted(ext.items())]
    return "<" + " ".join(parts) + ("/>" if close else ">")


def to_sqlflow_xml(lineage: Lineage, level: str = "column") -> str:
    """The lineage as dlineage XML, column level (default) or table level (``level="table"``).

    >>> from atlas_bridge.model import Column, Dataset, DatasetKind
    >>> print(to_sqlflow_xml(Lineage(datasets=[Dataset(id="table:t", kind=DatasetKind.TABLE, name="t",
    ...                                                columns=[Column(name="a")])])))
    <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
    <dlineage>
      <table id="1" name="t" type="table">
        <column id="2" name="a"/>
      </table>
    </dlineage>
    <BLANKLINE>
    """
    if level not in _LEVELS:
        msg = f"level must be one of {', '.join(_LEVELS)}, not {level!r}"
        raise ValueError(msg)
    body = _xml_table_level(lineage) if level == "table" else _xml_column_level(lineage)
    uses_ext = any(" ab:" in line for line in body)
    root = f'<dlineage xmlns:ab="{AB_NAMESPACE}">' if uses_ext else "<dlineage>"
    lines = ['<?xml version="1.0" encoding="UTF-8" standalone="yes"?>', root, *body, "</dlineage>"]
    return "\n".join(lines) + "\n"


def _xml_column_level(lineage: Lineage) -> list[str]:
    ids = _Ids(lineage)
    by_id = {d.id: d for d in lineage.datasets}
    out: list[str] = []
    for proc in lineage.processes:
        attrs, ext = _process_attrs(proc, ids, lineage)
        out.append("  " + _open("process", attrs, ext, close=True))
    for pr in lineage.procedures:
        attrs, ext = _procedure_attrs(pr, ids)
        if not pr.arguments:
            out.append("  " + _open("procedure", attrs, ext, close=True))
            continue
        out.append("  " + _open("procedure", attrs, ext, close=False))
        for arg in pr.arguments:
            a: dict[str, str] = {"name": arg.name}
            if arg.data_type:
                a["datatype"] = arg.data_type
            if arg.mode:
                a["inout"] = arg.mode
            if arg.span:
                a["coordinate"] = _coord([arg.span])
            out.append("    " + _open("argument", a, {}, close=True))
        out.append("  </procedure>")
    for ds in _ordered(lineage.datasets):
        tag = _ELEMENT[ds.kind][0]
        attrs, ext = _dataset_attrs(ds, ids)
        if not ds.columns:
            out.append("  " + _open(tag, attrs, ext, close=True))
            continue
        out.append("  " + _open(tag, attrs, ext, close=False))
        for col in ds.columns:
            cattrs, cext = _column_attrs(ds, col, ids)
            out.append("    " + _open("column", cattrs, cext, close=True))
        out.append(f"  </{tag}>")
    for n, rel in enumerate(lineage.relations, start=1):
        r = _RelationOut(rel, ids, by_id)
        target = {**r.target, "coordinate": _coord(r.target_spans)} if r.target_spans else r.target
        source = {**r.source, "coordinate": _coord(r.source_spans)} if r.source_spans else r.source
        out.append("  " + _open("relation", {"id": str(n), **r.attrs}, r.ext, close=False))
        out.append("    " + _open("target", target, {}, close=True))
        if r.transform is None:
            out.append("    " + _open("source", source, {}, close=True))
        else:
            out.append("    " + _open("source", source, {}, close=False))
            out.append(
                f'      <transforms><transform type="expression"><code>{_xml_text(r.transform)}</code>'
                "</transform></transforms>"
            )
            out.append("    </source>")
        out.append("  </relation>")
    return out


def _xml_table_level(lineage: Lineage) -> list[str]:
    tl = table_level(lineage)
    writers: dict[str, set[str]] = {}
    for e in tl.edges:
        if e.process_id is not None:
            writers.setdefault(e.target, set()).add(e.process_id)
    datasets = tuple(
        d.model_copy(update={"process_ids": tuple(sorted(set(d.process_ids) | writers.get(d.id, set())))})
        for d in tl.datasets
    )
    table_view = Lineage(datasets=datasets, processes=tl.processes, procedures=())
    ids = _Ids(table_view, with_columns=False)
    names = {d.id: _display_name(d) for d in datasets}
    out: list[str] = []
    for proc in tl.processes:
        attrs, ext = _process_attrs(proc, ids, table_view)
        out.append("  " + _open("process", attrs, ext, close=True))
    for ds in _ordered(datasets):
        attrs, ext = _dataset_attrs(ds, ids)
        out.append("  " + _open(_ELEMENT[ds.kind][0], attrs, ext, close=True))
    # object -> process and process -> object edges, de-duplicated; direct edges where there is no process
    hops: dict[tuple[str, str, str, str], RelationType] = {}
    proc_names = {p.id: p.name for p in tl.processes}
    for e in tl.edges:
        if e.process_id is None:
            key = ("d", e.source, e.target, "")
        else:
            for k in (("s", e.source, e.process_id, ""), ("t", e.process_id, e.target, "")):
                old = hops.get(k)
                hops[k] = RelationType.FDD if RelationType.FDD in (old, e.type) else e.type
            continue
        old = hops.get(key)
        hops[key] = RelationType.FDD if RelationType.FDD in (old, e.type) else e.type
    order = {"s": 0, "t": 1, "d": 2}
    next_id = ids.next
    for (kind, src, tgt, _), rtype in sorted(hops.items(), key=lambda kv: (order[kv[0][0]], kv[0][1:])):
        if kind == "s":
            src_id, src_name, tgt_id, tgt_name = (
                ids.dataset[src],
                names[src],
                ids.process[tgt],
                proc_names[tgt],
            )
        elif kind == "t":
            src_id, src_name, tgt_id, tgt_name = (
                ids.process[src],
                proc_names[src],
                ids.dataset[tgt],
                names[tgt],
            )
        else:
            src_id, src_name, tgt_id, tgt_name = ids.dataset[src], names[src], ids.dataset[tgt], names[tgt]
        rel_id, t_id, s_id = str(next_id), str(next_id + 1), str(next_id + 2)
        next_id += 3
        out.append("  " + _open("relation", {"id": rel_id, "type": rtype.value}, {}, close=False))
        out.append(
            "    "
            + _open("target", {"id": t_id, "target_id": tgt_id, "target_name": tgt_name}, {}, close=True)
        )
        out.append(
            "    "
            + _open("source", {"id": s_id, "source_id": src_id, "source_name": src_name}, {}, close=True)
        )
        out.append("  </relation>")
    return out


# ---------------------------------------------------------------------------------------------------------
# JSON


def _with_ext(obj: dict[str, Any], ext: dict[str, str]) -> dict[str, Any]:
    if ext:
        obj[AB_JSON_KEY] = dict(sorted(ext.items()))
    return obj


def _json_coord_attrs(attrs: dict[str, str], spans: Iterable[Span]) -> dict[str, Any]:
    out: dict[str, Any] = {k: v for k, v in attrs.items() if k != "coordinate"}
    span_list = list(spans)
    if span_list:
        out["coordinates"] = _coord_json(span_list)
    return out


def to_sqlflow_json(lineage: Lineage) -> str:
    """The lineage as flat SQLFlow JSON (``dbobjs`` + ``relationships``), column level.

    >>> from atlas_bridge.model import Column, Dataset, DatasetKind
    >>> print(to_sqlflow_json(Lineage(datasets=[Dataset(id="table:t", kind=DatasetKind.TABLE, name="t")])))
    {
      "dbobjs": [
        {
          "id": "1",
          "name": "t",
          "type": "table",
          "columns": []
        }
      ],
      "relationships": []
    }
    <BLANKLINE>
    """
    ids = _Ids(lineage)
    by_id = {d.id: d for d in lineage.datasets}
    dbobjs: list[dict[str, Any]] = []
    for proc in lineage.processes:
        attrs, ext = _process_attrs(proc, ids, lineage)
        obj = _json_coord_attrs(attrs, [proc.span] if proc.span else [])
        obj["processType"] = obj.pop("type")
        obj["type"] = "process"
        dbobjs.append(_with_ext(obj, ext))
    for pr in lineage.procedures:
        attrs, ext = _procedure_attrs(pr, ids)
        obj = _json_coord_attrs(attrs, [pr.span] if pr.span else [])
        args: list[dict[str, Any]] = []
        for arg in pr.arguments:
            a: dict[str, Any] = {"name": arg.name}
            if arg.data_type:
                a["datatype"] = arg.data_type
            if arg.mode:
                a["inout"] = arg.mode
            if arg.span:
                a["coordinates"] = _coord_json([arg.span])
            args.append(a)
        obj["arguments"] = args
        dbobjs.append(_with_ext(obj, ext))
    for ds in _ordered(lineage.datasets):
        attrs, ext = _dataset_attrs(ds, ids)
        obj = _json_coord_attrs(attrs, ds.spans)
        if "processIds" in obj:
            obj["processIds"] = obj["processIds"].split()
        cols: list[dict[str, Any]] = []
        for col in ds.columns:
            cattrs, cext = _column_attrs(ds, col, ids)
            cols.append(_with_ext(_json_coord_attrs(cattrs, col.spans), cext))
        obj["columns"] = cols
        if "coordinates" in obj:
            obj["coordinates"] = obj.pop("coordinates")
        dbobjs.append(_with_ext(obj, ext))
    relationships: list[dict[str, Any]] = []
    for n, rel in enumerate(lineage.relations, start=1):
        r = _RelationOut(rel, ids, by_id)
        robj: dict[str, Any] = {"id": str(n), **r.attrs}
        robj["target"] = _json_end(r.target, r.target_spans)
        src = _json_end(r.source, r.source_spans)
        if r.transform is not None:
            src["transforms"] = [{"type": "expression", "code": r.transform}]
        robj["sources"] = [src]
        relationships.append(_with_ext(robj, r.ext))
    doc = {"dbobjs": dbobjs, "relationships": relationships}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _json_end(end: dict[str, str], spans: list[Span]) -> dict[str, Any]:
    renames = {"parent_id": "parentId", "parent_name": "parentName", "parent_alias": "parentAlias"}
    out: dict[str, Any] = {renames.get(k, k): v for k, v in end.items()}
    if spans:
        out["coordinates"] = _coord_json(spans)
    return out
