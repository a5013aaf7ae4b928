"""Our Atlas typedefs: load them from package data, plan what Atlas needs, register them.

Atlas's typedef API is create-only on POST (409 for any name that exists) and update-only on PUT (404 for any
name that does not), and a PUT may not drop an attribute, change an attribute's type, remove a supertype or
change a relationship's category or ends. So registration is a plan, made by comparing what the server holds
with our defs (the recipe of Atlas's own model loader, ``AtlasTypeDefStoreInitializer``):

* missing names are created (one POST);
* defs that differ are updated (one PUT), with every attribute, supertype and option the server already
  holds merged in, so nothing is ever dropped; a change Atlas refuses raises :class:`TypedefError` first;
* a def equal to ours (on the fields we set) is not sent, so registering twice changes nothing;
* a def whose server ``typeVersion`` is newer than ours is left alone (a newer atlas-bridge put it there).
"""

from __future__ import annotations

import copy
import json
import logging
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from atlas_bridge.errors import AtlasConflictError, TypedefError

logger = logging.getLogger(__name__)

CATEGORIES = (
    "enumDefs",
    "structDefs",
    "classificationDefs",
    "entityDefs",
    "relationshipDefs",
    "businessMetadataDefs",
)
"""Keys of an ``AtlasTypesDef`` body."""

PACKAGE = "atlas_bridge.typedefs"

# Fields the server fills in or owns; never compared, never sent back.
_SERVER_FIELDS = frozenset(
    {"guid", "createdBy", "updatedBy", "createTime", "updateTime", "version", "subTypes",
     "relationshipAttributeDefs", "businessAttributeDefs", "category", "dateFormatter"}
)  # fmt: skip


class AtlasTypedefClient(Protocol):
    """The part of :class:`atlas_bridge.atlas.client.AtlasClient` registration uses."""

    def get_all_typedefs(self) -> dict[str, Any]: ...

    def create_typedefs(self, body: dict[str, Any]) -> Any: ...

    def update_typedefs(self, body: dict[str, Any]) -> Any: ...


class TypedefPlan(BaseModel):
    """What registration will do: ``create`` and ``update`` are ``AtlasTypesDef`` bodies (categories that
    have nothing are left out), ``unchanged`` and ``skipped`` (server newer) list type names."""

    model_config = ConfigDict(frozen=True)

    create: dict[str, list[dict[str, Any]]] = {}
    update: dict[str, list[dict[str, Any]]] = {}
    unchanged: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()

    @property
    def created_names(self) -> tuple[str, ...]:
        return tuple(sorted(d["name"] for defs in self.create.values() for d in defs))

    @property
    def updated_names(self) -> tuple[str, ...]:
        return tuple(sorted(d["name"] for defs in self.update.values() for d in defs))

    @property
    def has_changes(self) -> bool:
        return bool(self.create or self.update)

    def summary(self) -> dict[str, list[str]]:
        """Type names per action, for ``typedefs diff`` and logs."""
        return {
            "create": list(self.created_names),
            "update": list(self.updated_names),
            "unchanged": list(self.unchanged),
            "skipped": list(self.skipped),
        }


def _merge_types_defs(into: dict[str, list[dict[str, Any]]], part: dict[str, Any], source: str) -> None:
    seen = {d["name"] for defs in into.values() for d in defs}
    for cat in CATEGORIES:
        for d in part.get(cat) or ():
            if d["name"] in seen:
                msg = f"{source}: type {d['name']!r} is defined twice"
                raise TypedefError(msg)
            seen.add(d["name"])
            into.setdefault(cat, []).append(d)


def _typedefs_root() -> Traversable:
    """The ``atlas_bridge.typedefs`` package data; in a source checkout whose editable install predates the
    ``typedefs/`` mapping, the top-level ``typedefs/`` folder beside the package."""
    try:
        return resources.files(PACKAGE)
    except ModuleNotFoundError:
        checkout = Path(__file__).resolve().parents[2] / "typedefs"
        if (checkout / "__init__.py").is_file():
            logger.debug("%s is not installed; reading %s", PACKAGE, checkout)
            return checkout
        raise


def load_typedefs() -> dict[str, Any]:
    """Our typedefs as one ``AtlasTypesDef`` body (every model file of the ``typedefs/`` folder, by name).

    >>> sorted(d["name"] for d in load_typedefs()["entityDefs"])[:2]
    ['atlas_bridge_column', 'atlas_bridge_column_lineage']
    """
    root = _typedefs_root()
    files = sorted(
        (f for folder in root.iterdir() if folder.is_dir() for f in folder.iterdir()),
        key=lambda f: f.name,
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for f in files:
        if not f.name.endswith(".json") or not f.is_file():
            continue
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except ValueError as e:
            msg = f"typedefs/{f.name}: not valid JSON: {e}"
            raise TypedefError(msg) from e
        _merge_types_defs(out, data, f"typedefs/{f.name}")
    return {cat: out.get(cat, []) for cat in CATEGORIES}


def export_typedefs() -> str:
    """Our typedefs as canonical JSON (sorted keys), e.g. to drop into ``$ATLAS_HOME/models/``."""
    return json.dumps(load_typedefs(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _version(v: Any) -> tuple[int, ...]:
    """``"1.10"`` -> (1, 10): compared as numbers, not as strings like Atlas's loader does."""
    parts: list[int] = []
    for p in str(v or "0").split("."):
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _same(ours: Any, theirs: Any) -> bool:
    """Whether ``theirs`` agrees with ``ours`` on every field ``ours`` sets (server extras ignored)."""
    if isinstance(ours, dict):
        if not isinstance(theirs, dict):
            return False
        return all(k in _SERVER_FIELDS or _same(v, theirs.get(k)) for k, v in ours.items())
    return bool(ours == theirs)


def _attrs_same(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> bool:
    by_name = {a["name"]: a for a in theirs}
    return all(a["name"] in by_name and _same(a, by_name[a["name"]]) for a in ours)


def _def_same(ours: dict[str, Any], theirs: dict[str, Any]) -> bool:
    for key, value in ours.items():
        if key in _SERVER_FIELDS:
            continue
        if key == "attributeDefs":
            if not _attrs_same(value, theirs.get(key) or []):
                return False
        elif key == "superTypes":
            if not set(value) <= set(theirs.get(key) or []):
                return False
        elif key == "elementDefs":
            if not {e["value"] for e in value} <= {e["value"] for e in theirs.get(key) or []}:
                return False
        elif key == "options":
            if not _same(value, theirs.get(key) or {}):
                return False
        elif not _same(value, theirs.get(key)):
            return False
    return True


def _merge_def(category: str, ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """Ours, plus everything the server holds that ours lacks; refuses changes Atlas refuses."""
    name = ours["name"]
    merged = {k: copy.deepcopy(v) for k, v in theirs.items() if k not in _SERVER_FIELDS}
    for key, value in ours.items():
        if key not in ("attributeDefs", "superTypes", "options", "elementDefs"):
            merged[key] = copy.deepcopy(value)
    merged["options"] = {**(theirs.get("options") or {}), **(ours.get("options") or {})}
    if not merged["options"]:
        del merged["options"]
    if category == "relationshipDefs":
        for key in ("relationshipCategory", "endDef1", "endDef2"):
            if key in theirs and not _same(_ends(ours.get(key)), _ends(theirs.get(key))):
                msg = f"{name}: Atlas refuses to change a relationship's {key}; delete the type first"
                raise TypedefError(msg)
    if "superTypes" in ours or "superTypes" in theirs:
        sup = list(theirs.get("superTypes") or [])
        sup += [s for s in ours.get("superTypes") or [] if s not in sup]
        merged["superTypes"] = sup
    if "elementDefs" in ours or "elementDefs" in theirs:
        elems = [copy.deepcopy(e) for e in theirs.get("elementDefs") or []]
        known = {e["value"] for e in elems}
        elems += [copy.deepcopy(e) for e in ours.get("elementDefs") or [] if e["value"] not in known]
        merged["elementDefs"] = elems
    if "attributeDefs" in ours or "attributeDefs" in theirs:
        old = {a["name"]: a for a in theirs.get("attributeDefs") or []}
        new = {a["name"]: a for a in ours.get("attributeDefs") or []}
        attrs: list[dict[str, Any]] = []
        for a_name, a in old.items():
            mine = new.get(a_name)
            if mine is None:
                attrs.append(copy.deepcopy(a))  # never drop what Atlas holds
                continue
            if mine.get("typeName") != a.get("typeName"):
                msg = (
                    f"{name}.{a_name}: Atlas holds type {a.get('typeName')!r}, ours is "
                    f"{mine.get('typeName')!r}; Atlas refuses to change an attribute's type"
                )
                raise TypedefError(msg)
            attrs.append({**a, **copy.deepcopy(mine)})
        for a_name, mine in new.items():
            if a_name in old:
                continue
            if not mine.get("isOptional", False):
                msg = f"{name}.{a_name}: Atlas refuses to add a mandatory attribute to an existing type"
                raise TypedefError(msg)
            attrs.append(copy.deepcopy(mine))
        merged["attributeDefs"] = attrs
    return merged


def _ends(end: Any) -> Any:
    """The identity of a relationship end (type, name, container, cardinality) or the category."""
    if isinstance(end, dict):
        return {
            "type": end.get("type"),
            "name": end.get("name"),
            "isContainer": bool(end.get("isContainer", False)),
            "cardinality": end.get("cardinality") or "SINGLE",
        }
    return end


def plan_typedef_changes(existing: dict[str, Any], ours: dict[str, Any]) -> TypedefPlan:
    """Compare what Atlas holds (``GET /v2/types/typedefs``) with our defs.

    Args:
        existing: the server's ``AtlasTypesDef`` (at least every type ours share a name with).
        ours: our ``AtlasTypesDef``, usually :func:`load_typedefs`.

    Raises:
        TypedefError: a def needs a change Atlas refuses (attribute type, relationship ends), or a name is
            used by the server for another kind of type.

    >>> ours = {"entityDefs": [{"name": "t", "superTypes": ["DataSet"], "typeVersion": "1.0"}]}
    >>> plan_typedef_changes({}, ours).summary()
    {'create': ['t'], 'update': [], 'unchanged': [], 'skipped': []}
    >>> plan_typedef_changes(ours, ours).summary()["unchanged"]
    ['t']
    """
    server: dict[str, tuple[str, dict[str, Any]]] = {}
    for cat in CATEGORIES:
        for d in existing.get(cat) or ():
            server[d["name"]] = (cat, d)
    create: dict[str, list[dict[str, Any]]] = {}
    update: dict[str, list[dict[str, Any]]] = {}
    unchanged: list[str] = []
    skipped: list[str] = []
    for cat in CATEGORIES:
        for d in sorted(ours.get(cat) or (), key=lambda x: x["name"]):
            name = d["name"]
            found = server.get(name)
            if found is None:
                create.setdefault(cat, []).append(copy.deepcopy(d))
                continue
            their_cat, theirs = found
            if their_cat != cat:
                msg = f"{name}: Atlas holds it among {their_cat}, ours is among {cat}"
                raise TypedefError(msg)
            if _version(theirs.get("typeVersion")) > _version(d.get("typeVersion")):
                logger.warning(
                    "Atlas holds %s version %s, newer than ours (%s): left alone",
                    name,
                    theirs.get("typeVersion"),
                    d.get("typeVersion"),
                )
                skipped.append(name)
                continue
            if _def_same(d, theirs):
                unchanged.append(name)
                continue
            update.setdefault(cat, []).append(_merge_def(cat, d, theirs))
    return TypedefPlan(
        create=create, update=update, unchanged=tuple(sorted(unchanged)), skipped=tuple(sorted(skipped))
    )


def _check_dependencies(existing: dict[str, Any], ours: dict[str, Any]) -> None:
    """Every type ours name (supertypes, relationship ends) must be on the server or among ours."""
    known = {d["name"] for cat in CATEGORIES for src in (existing, ours) for d in src.get(cat) or ()}
    for d in ours.get("entityDefs") or ():
        for sup in d.get("superTypes") or ():
            if sup not in known:
                msg = f"{d['name']}: supertype {sup!r} is not in Atlas (is the base model loaded?)"
                raise TypedefError(msg)
    for d in ours.get("relationshipDefs") or ():
        for end in ("endDef1", "endDef2"):
            t = (d.get(end) or {}).get("type")
            if t not in known:
                msg = f"{d['name']}: {end} type {t!r} is not in Atlas"
                raise TypedefError(msg)


def register_typedefs(client: AtlasTypedefClient, ours: dict[str, Any] | None = None) -> TypedefPlan:
    """Create what is missing and update what changed (POST, then PUT); returns what was done.

    Running it again right after changes nothing: the second plan is all ``unchanged``.
    """
    ours = load_typedefs() if ours is None else ours
    existing = client.get_all_typedefs()
    _check_dependencies(existing, ours)
    plan = plan_typedef_changes(existing, ours)
    if plan.create:
        logger.info("creating typedefs: %s", ", ".join(plan.created_names))
        try:
            client.create_typedefs(plan.create)
        except AtlasConflictError as e:
            # A POST Atlas applied but answered with an error (a 5xx, a cut connection) is retried and
            # then meets its own types: ATLAS-409-00-001 "already exists". Read again and carry on.
            logger.info("typedefs exist already (%s); reading them again", e.error_code or "HTTP 409")
            existing = client.get_all_typedefs()
            plan = plan_typedef_changes(existing, ours)
            if plan.create:
                client.create_typedefs(plan.create)
    if plan.update:
        logger.info("updating typedefs: %s", ", ".join(plan.updated_names))
        client.update_typedefs(plan.update)
    if not plan.has_changes:
        logger.info("typedefs up to date (%d types)", len(plan.unchanged) + len(plan.skipped))
    return plan
