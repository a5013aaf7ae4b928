"""Atlas entity payloads -> one self-contained HTML lineage page (pure, deterministic).

The page is drawn from the converter's output (``to_atlas_entities``, or a scan's payload files), so what a
user sees without Atlas is exactly what Atlas would get. The graph is boiled down to four lists (datasets,
columns, processes, column links) and embedded as JSON in a ``<script type="application/json">`` tag, with
``<``, ``>`` and ``&`` escaped so no SQL text can close the tag. The page's own script, its stylesheet and
the vendored layout library (dagre, MIT) are inlined from package data: opening the file needs no network.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from importlib.resources import files
from typing import Any

_TYPE_KIND = {
    "atlas_bridge_table": "table",
    "atlas_bridge_view": "view",
    "atlas_bridge_path": "path",
    "atlas_bridge_resultset": "resultset",
}
_TYPE_COLUMN = "atlas_bridge_column"
_TYPE_PROCESS = "atlas_bridge_process"
_TYPE_COLUMN_LINEAGE = "atlas_bridge_column_lineage"
_ROWS = "(rows)"
_UNKNOWN_DATASET = "d:(not in the payloads)"
# JSON inside <script>: these never appear raw, so "</script>" or "<!--" in SQL text cannot end the tag.
_SCRIPT_ESCAPES = {
    ord("<"): "\\u003c",
    ord(">"): "\\u003e",
    ord("&"): "\\u0026",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}
_SOURCE_MAP = "//# sourceMappingURL="
_PLACEHOLDER = re.compile(r"\{\{(title|css|library|script|data)\}\}")


def _qn(obj: Mapping[str, Any]) -> str:
    """qualifiedName of an entity (attributes) or of a reference (uniqueAttributes)."""
    attrs = obj.get("attributes") or obj.get("uniqueAttributes") or {}
    return str(attrs.get("qualifiedName", ""))


def _strip_namespace(qn: str, namespace: str | None) -> str:
    return qn.removesuffix(f"@{namespace}") if namespace else qn


def _namespace(entities: list[Mapping[str, Any]]) -> str | None:
    """The ``@namespace`` the payloads share (shown once in the header rather than on every label)."""
    found = {_qn(e).rpartition("@")[2] for e in entities if e.get("typeName") in _TYPE_KIND and "@" in _qn(e)}
    return found.pop() if len(found) == 1 else None


def _refs(entity: Mapping[str, Any], name: str) -> list[Mapping[str, Any]]:
    value = (entity.get("relationshipAttributes") or {}).get(name)
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _dataset_label(entity: Mapping[str, Any], namespace: str | None) -> str:
    attrs = entity.get("attributes") or {}
    if entity.get("typeName") in ("atlas_bridge_table", "atlas_bridge_view") and attrs.get("databaseName"):
        parts = [attrs.get("catalogName"), attrs["databaseName"], attrs.get("name")]
        return ".".join(str(p) for p in parts if p)
    return _strip_namespace(_qn(entity), namespace)


def page_data(entities: Iterable[Mapping[str, Any]], title: str = "Lineage") -> dict[str, Any]:
    """The page's graph: datasets, columns, processes and column links, with ids prefixed by kind.

    Ids are ``d:``, ``c:`` and ``p:`` plus the qualifiedName (a column and a dataset may share one).
    A column-lineage input that is a dataset (its row set, as in ``COUNT(*)``) becomes a ``(rows)``
    pseudo-column of that dataset; references to entities the payloads do not hold still get a node.
    """
    ents = [e for e in entities if isinstance(e, Mapping)]
    namespace = _namespace(ents)
    datasets: dict[str, dict[str, Any]] = {}
    columns: dict[str, dict[str, Any]] = {}
    processes: dict[str, dict[str, Any]] = {}
    links: dict[tuple[str, str, str, str], dict[str, Any]] = {}

    def dataset(qn: str, type_name: str, entity: Mapping[str, Any] | None = None) -> str:
        did = f"d:{qn}"
        if did not in datasets:
            label = _dataset_label(entity, namespace) if entity else _strip_namespace(qn, namespace)
            datasets[did] = {"id": did, "qn": qn, "name": label, "kind": _TYPE_KIND.get(type_name, "table")}
        if entity is not None:
            attrs = entity.get("attributes") or {}
            if attrs.get("tableType") == "VIRTUAL_VIEW":  # a view is an atlas_bridge_table (issue 16)
                datasets[did]["kind"] = "view"
            view_text = attrs.get("viewOriginalText") or attrs.get("viewText")
            if view_text:
                datasets[did]["sql"] = view_text
        return did

    def column(qn: str, dataset_id: str | None, name: str | None = None) -> str:
        cid = f"c:{qn}"
        if cid not in columns:
            if dataset_id is None:
                if _UNKNOWN_DATASET not in datasets:
                    label = _UNKNOWN_DATASET[2:]
                    datasets[_UNKNOWN_DATASET] = {
                        "id": _UNKNOWN_DATASET,
                        "qn": "",
                        "name": label,
                        "kind": "unknown",
                    }
                dataset_id = _UNKNOWN_DATASET
            label = name if name is not None else _strip_namespace(qn, namespace)
            columns[cid] = {"id": cid, "qn": qn, "name": label, "dataset": dataset_id}
        return cid

    for e in ents:  # datasets first: columns and processes point at them
        if e.get("typeName") in _TYPE_KIND:
            dataset(_qn(e), str(e["typeName"]), e)
    for e in ents:
        if e.get("typeName") != _TYPE_COLUMN:
            continue
        table = _refs(e, "table")
        did = dataset(_qn(table[0]), str(table[0].get("typeName", ""))) if table else None
        attrs = e.get("attributes") or {}
        cid = column(_qn(e), did, str(attrs.get("name", _qn(e))))
        if attrs.get("type"):
            columns[cid]["type"] = attrs["type"]
    for e in ents:
        if e.get("typeName") != _TYPE_PROCESS:
            continue
        attrs = e.get("attributes") or {}
        pid = f"p:{_qn(e)}"
        proc: dict[str, Any] = {
            "id": pid,
            "qn": _qn(e),
            "name": attrs.get("name") or attrs.get("operationType") or _qn(e),
            "op": attrs.get("operationType") or "process",
            "inputs": sorted({dataset(_qn(r), str(r.get("typeName", ""))) for r in _refs(e, "inputs")}),
            "outputs": sorted({dataset(_qn(r), str(r.get("typeName", ""))) for r in _refs(e, "outputs")}),
        }
        for key, attr in (("sql", "queryText"), ("file", "sourceFile"), ("line", "sourceLine")):
            if attrs.get(attr) is not None:
                proc[key] = attrs[attr]
        processes[pid] = proc
    for e in ents:
        if e.get("typeName") != _TYPE_COLUMN_LINEAGE:
            continue
        attrs = e.get("attributes") or {}
        kind = "fdr" if attrs.get("dependencyType") == "INDIRECT" else "fdd"
        owner = _refs(e, "process")
        pid = f"p:{_qn(owner[0])}" if owner else ""
        sources = []
        for r in _refs(e, "inputs"):
            if r.get("typeName") == _TYPE_COLUMN:
                sources.append(column(_qn(r), None))
            else:  # older payloads: a dataset's row set as an input (COUNT(*))
                did = dataset(_qn(r), str(r.get("typeName", "")))
                sources.append(column(f"{_qn(r)}#{_ROWS}", did, _ROWS))
        for row_qn in attrs.get("rowSources") or ():  # a dataset's row set feeds the column (COUNT(*))
            did = dataset(str(row_qn), "atlas_bridge_table")
            sources.append(column(f"{row_qn}#{_ROWS}", did, _ROWS))
        for out in _refs(e, "outputs"):
            target = column(_qn(out), None)
            for source in sources:
                link = links.setdefault(
                    (source, target, kind, pid),
                    {"source": source, "target": target, "kind": kind, "process": pid},
                )
                if attrs.get("clauses"):
                    link["clauses"] = sorted(set(link.get("clauses", [])) | set(attrs["clauses"]))
                if attrs.get("expression"):
                    link["expression"] = attrs["expression"]
                fields = _fields_from(attrs.get("fieldPaths") or (), columns[source]["name"])
                if fields:  # nested data: which field of the source column, into which field of the target
                    link["fields"] = sorted(set(link.get("fields", [])) | set(fields))
    return {
        "title": title,
        "namespace": namespace,
        "datasets": sorted(datasets.values(), key=lambda d: d["id"]),
        "columns": sorted(
            columns.values(), key=lambda c: (c["dataset"], c["name"] != _ROWS, c["name"], c["id"])
        ),
        "processes": sorted(processes.values(), key=lambda p: p["id"]),
        "links": [links[k] for k in sorted(links)],
    }


def _fields_from(field_paths: Iterable[str], column: str) -> list[str]:
    """The ``fieldPaths`` entries (``widget.asset.id -> asset_id``) whose source is ``column`` or a field of
    it (docs/nested-data.md)."""
    low = column.lower()
    out = []
    for entry in field_paths:
        src = str(entry).split(" -> ", 1)[0].lower()
        if src == low or src.startswith(low + "."):
            out.append(str(entry))
    return out


def _static(name: str) -> str:
    return files("atlas_bridge.page").joinpath("static", name).read_text(encoding="utf-8")


def script_json(data: Any) -> str:
    """JSON that is safe as the text of a ``<script>`` element (and still parses to the same value)."""
    return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":")).translate(
        _SCRIPT_ESCAPES
    )


def _html_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render_page(entities: Iterable[Mapping[str, Any]], title: str = "Lineage") -> str:
    """One self-contained HTML page showing the lineage of Atlas entity payloads.

    >>> html = render_page([], title="x</title>")
    >>> "x&lt;/title&gt;" in html and "http://" not in html.split("<svg")[0].replace("http://www.w3.org", "")
    True
    """
    library = "\n".join(
        line for line in _static("dagre.min.js").splitlines() if not line.startswith(_SOURCE_MAP)
    )
    notice = _static("dagre.LICENSE").replace("*/", "* /")
    library = (
        f"/*! @dagrejs/dagre (MIT licence, vendored in atlas_bridge/page/static):\n{notice}*/\n{library}"
    )
    for name, text in (("dagre.min.js", library), ("page.js", _static("page.js"))):
        if "</script" in text.lower():  # a vendored update must not be able to end its own tag
            msg = f"static/{name} contains '</script'"
            raise ValueError(msg)
    parts = {
        "title": _html_text(title),
        "css": _static("page.css"),
        "library": library,
        "script": _static("page.js"),
        "data": script_json(page_data(entities, title)),
    }
    # one pass over the template only: placeholders inside the inserted texts are left alone
    return _PLACEHOLDER.sub(lambda m: parts[m.group(1)], _static("page.html"))
