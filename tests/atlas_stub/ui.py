"""What Atlas's own web UI asks besides entities and lineage (``shared/atlas-ui/README.md``).

The UI (dashboardv2) asks, on start-up and on an entity page: the session and its ``atlas.*`` switches, the
server's version, metrics and status, typedef headers, the built-in root types ``_ALL_ENTITY_TYPES`` and
``_ALL_CLASSIFICATION_TYPES``, an entity's header, the relationship search behind the Schema tab, and
searches, glossaries, audits and tasks. Those a test does not look at get an empty, well-formed answer, so
the page keeps working and its console stays clean.
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path
from typing import Any

from atlas_stub.common import AtlasHTTPError

# Atlas's built-in root types (AtlasEntityType.ENTITY_ROOT, AtlasClassificationType.CLASSIFICATION_ROOT):
# not in any model file, yet answered by typedef-by-name, with the system attributes every entity has.
_SYSTEM_ATTRIBUTES = ("__guid", "__typeName", "__createdBy", "__modifiedBy", "__state", "__labels")
_ROOT_TYPES = {"_ALL_ENTITY_TYPES": "ENTITY", "_ALL_CLASSIFICATION_TYPES": "CLASSIFICATION"}

SESSION = {
    "userName": "admin",
    "groups": [],
    "roles": ["ROLE_ADMIN"],
    "timezones": ["UTC"],
    "atlas.entity.create.allowed": False,
    "atlas.entity.update.allowed": False,
    "atlas.ui.editable.entity.types": "",
    "atlas.ui.default.version": "v2",
    "atlas.ui.date.format": "MM/DD/YYYY hh:mm:ss A",
    "atlas.ui.date.timezone.format.enabled": True,
    "atlas.debug.metrics.enabled": False,
    "atlas.tasks.enabled": False,
    "atlas.tasks.ui.tab.enabled": False,
    "atlas.session.timeout.secs": 900,
    "atlas.lineage.on.demand.enabled": False,
    "atlas.lineage.on.demand.default.node.count": 3,
    "atlas.relationship.search.enabled": True,
    "atlas.rest-csrf.enabled": True,
    "atlas.rest-csrf.custom-header": "X-XSRF-HEADER",
    "atlas.rest-csrf.methods-to-ignore": "GET,OPTIONS,HEAD,TRACE",
}


def _root_def(name: str, category: str) -> dict[str, Any]:
    return {
        "category": category,
        "guid": f"-{name}",
        "name": name,
        "description": name,
        "typeVersion": "1.0",
        "serviceType": "atlas_core",
        "attributeDefs": [
            {"name": a, "typeName": "string", "isOptional": True, "cardinality": "SINGLE", "isUnique": False}
            for a in _SYSTEM_ATTRIBUTES
        ],
        "superTypes": [],
        "subTypes": [],
    }


def _search_result(query_type: str, params: dict[str, list[str]]) -> dict[str, Any]:
    return {"queryType": query_type, "searchParameters": {}, "entities": [], "approximateCount": 0}


class AtlasUI:
    """Mixin of :class:`atlas_stub.AtlasStub`; the state it uses is set up there."""

    # -- /api/atlas/admin --------------------------------------------------------------------------
    def _admin_session(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        return dict(SESSION)

    def _admin_version(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        return {"Version": "2.5.0-stub", "Name": "apache-atlas", "Description": "Atlas stub"}

    def _admin_status(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        return {"Status": "ACTIVE"}

    def _admin_metrics(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        active: dict[str, int] = {}
        deleted: dict[str, int] = {}
        for ent in self.entities.values():  # type: ignore[attr-defined]
            counts = active if ent["status"] == "ACTIVE" else deleted
            counts[ent["typeName"]] = counts.get(ent["typeName"], 0) + 1
        return {
            "general": {
                "entityCount": sum(active.values()) + sum(deleted.values()),
                "typeCount": len(self.typedefs),  # type: ignore[attr-defined]
                "tagCount": 0,
                "typeUnusedCount": 0,
                "collectionTime": self.clock_ms,  # type: ignore[attr-defined]
                "stats": {},
            },
            "entity": {
                "entityActive": dict(sorted(active.items())),
                "entityDeleted": dict(sorted(deleted.items())),
                "entityActive-typeAndSubTypes": {},
                "entityDeleted-typeAndSubTypes": {},
                "entityShell": {},
                "entityShell-typeAndSubTypes": {},
            },
            "tag": {"tagEntities": {}},
            "system": {},
        }

    def _admin_empty_list(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        return []  # tasks, audits

    # -- /api/atlas/v2: what an entity page asks besides the entity --------------------------------
    def _root_typedef(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        name = path.rstrip("/").rsplit("/", 1)[-1]
        return _root_def(name, _ROOT_TYPES[name])

    def _get_entity_header(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        guid = path.split("/")[3]
        if guid not in self.entities:  # type: ignore[attr-defined]
            raise AtlasHTTPError(404, "ATLAS-404-00-005", f"Given instance guid {guid} is invalid/not found")
        return self._header(guid)  # type: ignore[attr-defined]

    def _search_relationship(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        """``/v2/search/relationship?guid=..&relation=columns&attributes=type&attributes=position``: the
        entities at the other end of a relationship attribute, as headers carrying the asked attributes
        (the Schema tab's rows). Unsorted, as Atlas answers with ``disableDefaultSorting``."""
        guid = (params.get("guid") or [""])[0]
        relation = (params.get("relation") or [""])[0]
        if guid not in self.entities:  # type: ignore[attr-defined]
            raise AtlasHTTPError(404, "ATLAS-404-00-005", f"Given instance guid {guid} is invalid/not found")
        ent = self.entities[guid]  # type: ignore[attr-defined]
        options = self._rel_attrs_all(ent["typeName"]).get(relation)  # type: ignore[attr-defined]
        if not options:
            raise AtlasHTTPError(
                400, "ATLAS-400-00-0AB", f"Invalid relation {relation} for type {ent['typeName']}"
            )
        exclude_deleted = (params.get("excludeDeletedEntities") or ["false"])[0] == "true"
        wanted = params.get("attributes") or []
        rows = []
        for opt in options:
            for other, _edge in self._edges_of(guid, opt, active_only=False):  # type: ignore[attr-defined]
                o = self.entities[other]  # type: ignore[attr-defined]
                if exclude_deleted and o["status"] != "ACTIVE":
                    continue
                header = self._header(other)  # type: ignore[attr-defined]
                for a in wanted:
                    if a in o["attributes"]:
                        header["attributes"][a] = o["attributes"][a]
                rows.append(header)
        offset = int((params.get("offset") or ["0"])[0])
        limit = int((params.get("limit") or ["100"])[0])
        return {
            "queryType": "RELATIONSHIP",
            "searchParameters": {"relation": relation, "guid": guid},
            "entities": rows[offset : offset + limit],
            "approximateCount": len(rows),
        }

    def _search_basic(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        return _search_result("BASIC", params)

    def _empty_list(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        return []  # saved searches, glossaries, entity audits


LABEL_CHARS = 18
"""The UI cuts node labels to this many characters (``String.prototype.trunc(18)`` in atlas-lineage)."""


def ui_label(text: str | None) -> str:
    """A node's label as the Lineage tab draws it with "Display full name" off.

    >>> ui_label("marts.fct_orders.order_amount"), ui_label("fct_orders")
    ('marts.fct_orders....', 'fct_orders')
    """
    text = text if text else " "
    return text[: LABEL_CHARS - 1] + "..." if len(text) > LABEL_CHARS else text


def _kind(stub: Any, type_name: str) -> str:
    if stub._is_a(type_name, "Process"):
        return "column_lineage" if type_name.endswith("column_lineage") else "process"
    return "column" if type_name.endswith("_column") else "dataset"


def label_collisions(stub: Any, guids: list[str] | None = None) -> dict[str, int]:
    """Nodes whose cut label equals another's of the same kind on the same Lineage tab, summed over the tabs
    of ``guids`` (default: every ACTIVE DataSet and Process), per kind: ``process``, ``column_lineage``,
    ``dataset``, ``column``; a node is counted once per tab it is confused on."""
    if guids is None:
        guids = sorted(
            g
            for g, e in stub.entities.items()
            if e["status"] == "ACTIVE"
            and (stub._is_a(e["typeName"], "DataSet") or stub._is_a(e["typeName"], "Process"))
        )
    out = {"process": 0, "column_lineage": 0, "dataset": 0, "column": 0}
    # the store does not change while the tabs are opened: each entity's lineage edges are read once
    edges: dict[tuple[str, str, int], list[tuple[str, str]]] = {}
    read = stub._lineage_edges

    def lineage_edges(guid: str, label: str, end: int) -> list[tuple[str, str]]:
        key = (guid, label, end)
        found = edges.get(key)
        if found is None:
            found = edges[key] = read(guid, label, end)
        return found

    stub._lineage_edges = lineage_edges
    try:
        for guid in guids:
            answer = stub._lineage(guid, {"direction": ["BOTH"], "depth": ["3"]})
            labels: dict[tuple[str, str], int] = {}
            for header in answer["guidEntityMap"].values():
                key = (_kind(stub, header["typeName"]), ui_label(header["displayText"]))
                labels[key] = labels.get(key, 0) + 1
            for (kind, _label), n in labels.items():
                if n > 1:
                    out[kind] += n
    finally:
        del stub._lineage_edges
    return out


def copy_webapp(source: Path, dest: Path) -> Path:
    """A writable copy of Atlas's built web UI (where ``icons install`` can add ours): the shared one may be
    read-only, and copytree keeps its modes, which stop anyone but root from writing into the copy."""
    shutil.copytree(source, dest)
    for path in (dest, *dest.rglob("*")):
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return dest
