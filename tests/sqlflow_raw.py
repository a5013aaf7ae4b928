"""An independent, deliberately naive walk over raw SQLFlow files, for the no-loss tests.

It shares no code with the reader: it lists what a file declares (objects, columns, processes,
procedures, errors) and the atomic edges it states, by plain stdlib parsing, so the tests can check that
every one of them made it into the model.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OBJECT_TAGS = {"table", "view", "resultset", "variable", "path", "stage", "stream"}
TYPE_ALIASES = {"frd": "fdr", "fddi": "fdr", "impact": "fdr", "dataflow_recordset": "fdr", "dataflow": "fdd"}
V2_FLOWS = {"data_flow", "restricts", "groups", "calls"}
_PART = re.compile(r'\[[^\]]*\]|"[^"]*"|`[^`]*`|[^.]+')


def strip_quotes(text: str) -> str:
    text = text.strip()
    for left, right in (('"', '"'), ("[", "]"), ("`", "`"), ("'", "'")):
        if len(text) >= 2 and text[0] == left and text[-1] == right:
            return text[1:-1]
    return text


def object_name(name: str, tag: str) -> str:
    if tag == "path":
        return strip_quotes(name).lower()
    parts = _PART.findall(name)
    return strip_quotes(parts[-1] if parts else name).lower()


def column_name(name: str, tag: str) -> str:
    if name.strip().lower() in ("pseudorows", "relationrows"):
        return "pseudorows"
    if tag == "constanttable":
        return name.lower()
    return strip_quotes(name).lower()


@dataclass
class RawFile:
    objects: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (tag, normalised name)
    columns: dict[tuple[str, str], str] = field(default_factory=dict)  # (object id, column id) -> name
    processes: dict[str, str] = field(default_factory=dict)  # id -> name
    procedures: list[str] = field(default_factory=list)
    edges: set[tuple[str, str, str, str, str]] = field(default_factory=set)  # type, tgt obj, tgt col, src..
    edges_with_process: set[tuple[str, str, str, str, str]] = field(default_factory=set)
    table_edges: set[tuple[str, str, str]] = field(default_factory=set)  # ("in"|"out", object, process)
    v2_edges: set[tuple[str, str, str]] = field(default_factory=set)  # flow, target column, source column
    v2_has: set[tuple[str, str]] = field(default_factory=set)  # table, column
    errors: int = 0

    def add_object(self, oid: str, tag: str, name: str, cols: list[tuple[str, str]]) -> None:
        self.objects.setdefault(oid, (tag, object_name(name, tag)))
        for cid, cname in cols:
            self.columns[(oid, cid)] = column_name(cname, tag)

    def end(
        self, parent: str | None, parent_name: str | None, cid: str | None, col: str | None
    ) -> tuple[str, str]:
        if parent not in self.objects:
            name = parent_name or str(parent)
            tag = "table"
            self.objects[str(parent)] = (tag, object_name(name, tag))
        tag, oname = self.objects[str(parent)]
        cname = self.columns.get((str(parent), str(cid)))
        if cname is None:
            cname = column_name(col or "", tag)
        return oname, cname

    def add_edge(self, rtype: str, target: dict[str, Any], source: dict[str, Any], process: Any) -> None:
        rtype = TYPE_ALIASES.get(rtype.lower(), rtype.lower())
        t_parent = target.get("parent_id", target.get("parentId"))
        s_parent = source.get("parent_id", source.get("parentId"))
        t_obj = target.get("target_id", target.get("targetId"))
        s_obj = source.get("source_id", source.get("sourceId"))
        if t_parent is None and s_parent is None:  # table level: object -> process -> object
            t_obj = t_obj if t_obj is not None else target.get("id")
            if str(t_obj) in self.processes:
                self.table_edges.add(("in", self.objects[str(s_obj)][1], self.processes[str(t_obj)]))
            else:
                self.table_edges.add(("out", self.objects[str(t_obj)][1], self.processes[str(s_obj)]))
            return
        tgt = self.end(
            t_parent,
            target.get("parent_name", target.get("parentName")),
            target.get("id"),
            target.get("column"),
        )
        src = self.end(
            s_parent,
            source.get("parent_name", source.get("parentName")),
            source.get("id"),
            source.get("column"),
        )
        edge = (rtype, *tgt, *src)
        self.edges.add(edge)
        if process:
            self.edges_with_process.add(edge)


def walk(path: Path) -> RawFile:
    text = path.read_text(encoding="utf-8")
    if text.lstrip()[:1] == "<":
        return _walk_xml(text)
    return _walk_json(json.loads(text))


def _walk_xml(text: str) -> RawFile:
    raw = RawFile()
    text = re.sub(r'=""([^"<>&\n]*)""', r'="&quot;\1&quot;"', text)  # Gudu's docs print name=""eName""
    body = re.sub(r"^\s*<\?xml[^>]*\?>", "", text)
    root = ET.fromstring(f"<wrap>{body}</wrap>")  # trusted test data
    elements: list[ET.Element] = []
    for el in root:
        elements.extend(list(el) if el.tag in ("dlineage", "dligneage") else [el])
    for el in list(elements):
        if el.tag == "package":
            elements.extend(el)
    for el in elements:
        a = el.attrib
        if el.tag in OBJECT_TAGS:
            tag = a.get("type", el.tag).lower() if el.tag == "table" else el.tag
            cols = [(c.attrib["id"], c.attrib["name"]) for c in el if c.tag == "column"]
            raw.add_object(a["id"], tag, a.get("name", a.get("uri", "")), cols)
        elif el.tag == "process":
            raw.processes[a["id"]] = a["name"]
        elif el.tag == "procedure":
            raw.procedures.append(object_name(a["name"], "procedure"))
        elif el.tag == "error":
            raw.errors += 1
    for el in elements:
        if el.tag in ("relation", "relationship"):
            target = next(c.attrib for c in el if c.tag == "target")
            for src in (c.attrib for c in el if c.tag == "source"):
                raw.add_edge(
                    el.attrib.get("type", "fdd"), dict(target), dict(src), el.attrib.get("processId")
                )
    return raw


def _walk_json(top: Any) -> RawFile:
    raw = RawFile()
    if isinstance(top, list) or "sourceId" in top or "lineageObjects" in top:
        return _walk_v2(top, raw)
    model = top
    if "data" in top and "dbobjs" not in top:
        model = top["data"].get("sqlflow", top["data"])
    dbobjs = model.get("dbobjs", [])
    if isinstance(dbobjs, list):
        for obj in dbobjs:
            _json_obj(obj, raw, "table")
    else:
        _json_tree(dbobjs, raw)
    for p in model.get("processes", []):
        raw.processes[str(p["id"])] = p["name"]
    for rel in model.get("relationships", model.get("relations", [])):
        sources = rel.get("sources", rel.get("source", []))
        for src in sources if isinstance(sources, list) else [sources]:
            raw.add_edge(rel.get("type", "fdd"), rel["target"], src, rel.get("processId"))
    raw.errors = len(model.get("errors", []))
    return raw


def _json_obj(obj: dict[str, Any], raw: RawFile, default: str) -> None:
    otype = str(obj.get("type", default)).lower()
    if otype == "process":
        raw.processes[str(obj["id"])] = obj["name"]
    elif "arguments" in obj or otype in ("procedure", "trigger"):
        raw.procedures.append(object_name(obj["name"], "procedure"))
    else:
        tag = otype if otype in OBJECT_TAGS | {"pseudotable", "constanttable"} else "resultset"
        cols = [(str(c["id"]), c["name"]) for c in obj.get("columns", [])]
        raw.add_object(str(obj["id"]), tag, obj["name"], cols)


def _json_tree(node: dict[str, Any], raw: RawFile) -> None:
    for key, value in node.items():
        if not isinstance(value, list):
            continue
        for item in value:
            if not isinstance(item, dict):
                continue
            if key in ("tables", "views", "others"):
                _json_obj(item, raw, {"tables": "table", "views": "view"}.get(key, "resultset"))
            elif key == "processes":
                raw.processes[str(item["id"])] = item["name"]
            elif key in ("procedures", "functions", "triggers"):
                raw.procedures.append(object_name(item["name"], "procedure"))
            else:  # servers, databases, schemas, packages
                _json_tree(item, raw)


def _walk_v2(top: Any, raw: RawFile) -> RawFile:
    edges = top if isinstance(top, list) else [top] if "sourceId" in top else top.get("relationships", [])
    objects = {} if isinstance(top, list) else {o["id"]: o for o in top.get("lineageObjects", [])}

    def col(ref: str) -> str:
        obj = objects.get(ref)
        if obj is not None:
            return obj["name"].lower() if obj["type"] == "column" else "pseudorows"
        return ref.rsplit(".", 1)[1].lower() if "." in ref else "pseudorows"

    for e in edges:
        if e["type"] == "has":
            raw.v2_has.add((e["sourceId"].lower(), col(e["targetId"])))
        else:
            raw.v2_edges.add((e["type"], col(e["targetId"]), col(e["sourceId"])))
    return raw
