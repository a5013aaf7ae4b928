"""The type system (§2): typedef create/update rules, supertypes, attribute and relationship defs."""

from __future__ import annotations

import copy
import re
from typing import Any

from atlas_stub.common import (
    _CATEGORY_KEY,
    _DEF_KEYS,
    _TYPE_NAME_RE,
    PRIMITIVES,
    AtlasHTTPError,
    _public_def,
    _RelAttr,
)

_RESERVED_TYPE_NAMES = frozenset(
    # Atlas's DSL keywords (AtlasDSLLexer) and AtlasEntityHeader fields: a type so named could not be queried
    {"select", "from", "where", "orderby", "groupby", "limit", "offset", "as", "isa", "is", "has", "asc",
     "desc", "count", "max", "min", "sum", "and", "or", "like", "true", "false", "between", "in", "not",
     "guid", "typename", "version", "status", "createdby", "updatedby", "createtime", "updatetime"}
)  # fmt: skip


def _end_identity(end: dict[str, Any]) -> tuple[Any, ...]:
    return (
        end.get("type"),
        end.get("name"),
        end.get("cardinality") or "SINGLE",
        bool(end.get("isContainer", False)),
    )


class TypeRegistry:
    """Mixin of :class:`atlas_stub.AtlasStub`; the state it uses is set up there."""

    def load_typedefs(self, typesdef: dict[str, Any]) -> None:
        """Preload typedefs without going through the REST rules (e.g. more of Atlas's own models)."""
        self._store_typedefs(typesdef)

    def _store_typedefs(self, typesdef: dict[str, Any]) -> None:
        for key, category in _DEF_KEYS:
            for d in typesdef.get(key) or []:
                self._store_def({**d, "category": category})

    def _store_def(self, d: dict[str, Any]) -> None:
        stored = copy.deepcopy(d)
        stored.setdefault("guid", self._next_guid())
        stored.setdefault("typeVersion", "1.0")
        stored.setdefault("version", 1)
        self.typedefs[stored["name"]] = stored
        self._rel_cache = {}
        self._chain_cache = {}
        self._attr_cache = {}

    def _entity_def(self, name: str) -> dict[str, Any] | None:
        d = self.typedefs.get(name)
        return d if d is not None and d["category"] == "ENTITY" else None

    def _supertypes(self, name: str, defs: dict[str, dict[str, Any]] | None = None) -> list[str]:
        """``name`` and all its supertypes, nearest first."""
        defs = defs if defs is not None else self.typedefs
        out: list[str] = []
        todo = [name]
        while todo:
            t = todo.pop(0)
            if t in out or t not in defs:
                continue
            out.append(t)
            todo.extend(defs[t].get("superTypes") or [])
        return out

    def _is_a(self, type_name: str, base: str) -> bool:
        chain = self._chain_cache.get(type_name)
        if chain is None:
            chain = self._chain_cache[type_name] = frozenset(self._supertypes(type_name))
        return base in chain

    def _attr_defs(self, type_name: str) -> dict[str, tuple[str, dict[str, Any]]]:
        """attribute name -> (declaring type, attributeDef), over the type and its supertypes."""
        cached = self._attr_cache.get(type_name)
        if cached is not None:
            return cached
        out: dict[str, tuple[str, dict[str, Any]]] = {}
        for t in reversed(self._supertypes(type_name)):
            for a in self.typedefs[t].get("attributeDefs") or []:
                out[a["name"]] = (t, a)
        self._attr_cache[type_name] = out
        return out

    def _unique_attrs(self, type_name: str) -> list[str]:
        return sorted(n for n, (_t, a) in self._attr_defs(type_name).items() if a.get("isUnique"))

    def _rel_attrs_all(self, type_name: str) -> dict[str, list[_RelAttr]]:
        """Relationship attributes of an entity type (from any relationshipDef end on it or a supertype)."""
        cached = self._rel_cache.get(type_name)
        if cached is not None:
            return cached
        chain = self._supertypes(type_name)
        out: dict[str, list[_RelAttr]] = {}
        for rd in sorted(
            (d for d in self.typedefs.values() if d["category"] == "RELATIONSHIP"), key=lambda d: d["name"]
        ):
            for end, other in ((1, 2), (2, 1)):
                e = rd.get(f"endDef{end}") or {}
                o = rd.get(f"endDef{other}") or {}
                if e.get("type") in chain:
                    out.setdefault(e["name"], []).append(
                        _RelAttr(
                            relationship=rd["name"],
                            end=end,
                            name=e["name"],
                            cardinality=e.get("cardinality", "SINGLE"),
                            other_type=o.get("type", ""),
                            is_container=bool(e.get("isContainer")),
                            category=rd.get("relationshipCategory", "ASSOCIATION"),
                            is_legacy=bool(e.get("isLegacyAttribute")),
                        )
                    )
        self._rel_cache[type_name] = out
        return out

    def _rel_attrs(self, type_name: str) -> dict[str, tuple[_RelAttr, ...]]:
        return {k: tuple(v) for k, v in self._rel_attrs_all(type_name).items()}

    def _choose_rel(self, type_name: str, attr: str, relationship_type: str | None) -> _RelAttr:
        """§2.3: a relationshipType picks among relationships sharing an attribute name."""
        options = self._rel_attrs_all(type_name)[attr]
        if relationship_type:
            for opt in options:
                if opt.relationship == relationship_type:
                    return opt
            self.warnings.append(
                f"{type_name}.{attr}: relationshipType {relationship_type} does not define this attribute;"
                f" used {options[0].relationship}"
            )
        elif len(options) > 1:
            self.warnings.append(
                f"{type_name}.{attr} is in several relationships {[o.relationship for o in options]} and the"
                " reference names none: Atlas picks one arbitrarily"
            )
        return options[0]

    def _filter_defs(self, params: dict[str, list[str]]) -> list[dict[str, Any]]:
        defs = list(self.typedefs.values())
        if (params.get("excludeInternalTypesAndReferences") or ["false"])[0] == "true":
            defs = [d for d in defs if not d["name"].startswith("__")]
        if params.get("type"):
            defs = [d for d in defs if d["category"] == params["type"][0].upper()]
        if params.get("name"):
            defs = [d for d in defs if d["name"] == params["name"][0]]
        if params.get("servicetype"):
            defs = [d for d in defs if d.get("serviceType") == params["servicetype"][0]]
        if params.get("supertype"):
            defs = [d for d in defs if params["supertype"][0] in (d.get("superTypes") or [])]
        return sorted(defs, key=lambda d: d["name"])

    def _get_headers(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        # §2.2: headers carry no typeVersion.
        return [
            {
                "guid": d["guid"],
                "name": d["name"],
                "category": d["category"],
                "serviceType": d.get("serviceType"),
            }
            for d in self._filter_defs(params)
        ]

    def _get_typedefs(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        out: dict[str, list[Any]] = {key: [] for key, _c in _DEF_KEYS}
        for d in self._filter_defs(params):
            out[_CATEGORY_KEY[d["category"]]].append(self._answer_def(d))
        return out

    def _get_typedef_by_name(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        m = re.match(r"/types/(\w+)/name/([^/]+)", path)
        assert m
        kind, name = m.group(1), m.group(2)
        d = self.typedefs.get(name)
        want = {
            "entitydef": "ENTITY",
            "relationshipdef": "RELATIONSHIP",
            "enumdef": "ENUM",
            "structdef": "STRUCT",
            "classificationdef": "CLASSIFICATION",
        }.get(kind)
        if d is None or (want is not None and d["category"] != want):
            raise AtlasHTTPError(404, "ATLAS-404-00-001", f"Given typename {name} was invalid")
        return self._answer_def(d)

    def _answer_def(self, d: dict[str, Any]) -> dict[str, Any]:
        """A def as a GET answers it: Atlas always sends the lists a def may leave out (``attributeDefs``,
        ``superTypes``) and what it derives (``subTypes``, ``relationshipAttributeDefs``); Atlas's web UI
        reads them without checking they are there."""
        out = _public_def(d)
        if d["category"] in ("ENTITY", "STRUCT", "CLASSIFICATION", "BUSINESS_METADATA", "RELATIONSHIP"):
            out.setdefault("attributeDefs", [])
        if d["category"] in ("ENTITY", "CLASSIFICATION"):
            out.setdefault("superTypes", [])
            out["subTypes"] = sorted(
                t["name"]
                for t in self.typedefs.values()
                if t["category"] == d["category"] and d["name"] in (t.get("superTypes") or [])
            )
        if d["category"] == "ENTITY":
            out["relationshipAttributeDefs"] = [
                {
                    "name": rel.name,
                    "typeName": f"array<{rel.other_type}>" if rel.cardinality != "SINGLE" else rel.other_type,
                    "isOptional": True,
                    "cardinality": rel.cardinality,
                    "isUnique": False,
                    "isIndexable": False,
                    "relationshipTypeName": rel.relationship,
                    "isLegacyAttribute": rel.is_legacy,
                }
                for rels in self._rel_attrs_all(d["name"]).values()
                for rel in rels
            ]
            out.setdefault("businessAttributeDefs", {})
        return out

    def _incoming_defs(self, body: Any) -> list[dict[str, Any]]:
        if not isinstance(body, dict):
            raise AtlasHTTPError(
                400, None, "", raw={"error": "Cannot deserialize AtlasTypesDef from non-object"}
            )
        out: list[dict[str, Any]] = []
        for key, category in _DEF_KEYS:
            defs = body.get(key) or []
            if not isinstance(defs, list):
                raise AtlasHTTPError(400, None, "", raw={"error": f"Cannot deserialize {key}: not an array"})
            for d in defs:
                if not isinstance(d, dict) or not isinstance(d.get("name"), str):
                    raise AtlasHTTPError(400, None, "", raw={"error": f"Cannot deserialize a def in {key}"})
                # §2.2: options are Map<String,String>; anything else fails in Jackson with 400 {"error"}.
                for holder in [d, *(d.get("attributeDefs") or [])]:
                    options = holder.get("options")
                    if options is not None and (
                        not isinstance(options, dict) or not all(isinstance(v, str) for v in options.values())
                    ):
                        raise AtlasHTTPError(
                            400,
                            None,
                            "",
                            raw={
                                "error": "Cannot deserialize value of type `java.lang.String` from Object"
                                f" value (options of {d['name']})"
                            },
                        )
                nd = copy.deepcopy(d)
                nd["category"] = category
                out.append(nd)
        return out

    def _resolve_type_name(self, type_name: str, defs: dict[str, dict[str, Any]]) -> bool:
        t = type_name.strip()
        if t in PRIMITIVES:
            return True
        m = re.fullmatch(r"array<(.+)>", t)
        if m:
            return self._resolve_type_name(m.group(1), defs)
        m = re.fullmatch(r"map<([^,]+),(.+)>", t)
        if m:
            return self._resolve_type_name(m.group(1), defs) and self._resolve_type_name(m.group(2), defs)
        return t in defs and defs[t]["category"] in ("ENUM", "STRUCT", "ENTITY", "CLASSIFICATION")

    def _validate_defs(self, incoming: list[dict[str, Any]], merged: dict[str, dict[str, Any]]) -> None:
        """Rules applied on create and update: names, resolution, relationship shape (§2.1, §2.2, §9)."""
        for d in incoming:
            name = d["name"]
            if not _TYPE_NAME_RE.match(name):
                raise AtlasHTTPError(400, "ATLAS-400-00-019", f"{name}: invalid name for type")
            # AtlasTypeDefGraphStore: a DSL keyword or an entity header field cannot name a type
            # (ATLAS-400-00-102, issue 16).
            if name.lower() in _RESERVED_TYPE_NAMES:
                raise AtlasHTTPError(400, "ATLAS-400-00-102", f"{name}: is a reserved keyword")
        for d in incoming:
            # AtlasStructType/AtlasEntityType.resolveReferences: a supertype chain may not lead back to the
            # type itself (ATLAS-400-00-002 CIRCULAR_REFERENCE, issue 16).
            todo, seen = list(d.get("superTypes") or []), set()
            while todo:
                st = todo.pop()
                if st == d["name"]:
                    raise AtlasHTTPError(
                        400,
                        "ATLAS-400-00-002",
                        f"{d['name']}: invalid supertypes - circular reference back to self",
                    )
                if st in seen or st not in merged:
                    continue
                seen.add(st)
                todo.extend(merged[st].get("superTypes") or [])
        for d in incoming:
            name = d["name"]
            for st in d.get("superTypes") or []:
                if st not in merged or merged[st]["category"] != d["category"]:
                    raise AtlasHTTPError(400, "ATLAS-400-00-029", f"Given typename {st} was invalid")
            for a in d.get("attributeDefs") or []:
                if not self._resolve_type_name(a.get("typeName", ""), merged):
                    raise AtlasHTTPError(
                        400, "ATLAS-400-00-029", f"Given typename {a.get('typeName')} was invalid"
                    )
            if d["category"] == "ENTITY":
                # §9: a subtype may not re-declare an inherited attribute.
                inherited: set[str] = set()
                for st in self._supertypes(name, merged)[1:]:
                    inherited.update(a["name"] for a in merged[st].get("attributeDefs") or [])
                for a in d.get("attributeDefs") or []:
                    if a["name"] in inherited:
                        raise AtlasHTTPError(
                            400,
                            "ATLAS-400-00-09E",
                            f"Invalid attribute name: {name}.{a['name']}. Attribute already exists in another"
                            " regular type",
                        )
            if d["category"] == "RELATIONSHIP":
                self._validate_relationship_def(d, merged)

    def _validate_relationship_def(self, d: dict[str, Any], merged: dict[str, dict[str, Any]]) -> None:
        name = d["name"]
        e1, e2 = d.get("endDef1"), d.get("endDef2")
        if not isinstance(e1, dict) or not isinstance(e2, dict):
            raise AtlasHTTPError(
                400, "ATLAS-400-00-02C", f"relationshipDef {name} creation attempted without 2 ends"
            )
        for end in (e1, e2):
            t = end.get("type")
            if t not in merged or merged[t]["category"] != "ENTITY":
                raise AtlasHTTPError(400, "ATLAS-400-00-029", f"Given typename {t} was invalid")
        category = d.get("relationshipCategory", "ASSOCIATION")
        c1, c2 = bool(e1.get("isContainer")), bool(e2.get("isContainer"))
        if c1 and c2:
            raise AtlasHTTPError(
                400,
                "ATLAS-400-00-02D",
                f"relationshipDef {name} creation attempted with both ends as containers",
            )
        if (c1 or c2) and category == "ASSOCIATION":
            raise AtlasHTTPError(
                400,
                "ATLAS-400-00-030",
                f"ASSOCIATION relationshipDef {name} creation attempted with an end specifying isContainer",
            )
        if not (c1 or c2) and category == "COMPOSITION":
            raise AtlasHTTPError(
                400,
                "ATLAS-400-00-031",
                f"COMPOSITION relationshipDef {name} creation attempted without an end specifying"
                " isContainer",
            )
        if not (c1 or c2) and category == "AGGREGATION":
            raise AtlasHTTPError(
                400,
                "ATLAS-400-00-032",
                f"AGGREGATION relationshipDef {name} creation attempted without an end specifying"
                " isContainer",
            )
        if category == "COMPOSITION":
            for end in (e1, e2):
                if end.get("cardinality") == "SET" and not end.get("isContainer"):
                    raise AtlasHTTPError(
                        400,
                        "ATLAS-400-00-033",
                        f"COMPOSITION relationshipDef {name} can only have one parent; so cannot have"
                        " SET cardinality on children",
                    )
        for end in (e1, e2):
            if end.get("cardinality") == "LIST":
                raise AtlasHTTPError(
                    400,
                    "ATLAS-400-00-034",
                    f"relationshipDef {name} cannot have a LIST cardinality on an end",
                )

    def _post_typedefs(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        incoming = self._incoming_defs(body)
        seen: set[str] = set()
        for d in incoming:
            # §2.2: POST only creates; any existing name fails the whole request with 409.
            if d["name"] in self.typedefs or d["name"] in seen:
                raise AtlasHTTPError(409, "ATLAS-409-00-001", f"Given type {d['name']} already exists")
            seen.add(d["name"])
        merged = {**self.typedefs, **{d["name"]: d for d in incoming}}
        self._validate_defs(incoming, merged)
        created: dict[str, list[Any]] = {key: [] for key, _c in _DEF_KEYS}
        for d in incoming:
            self._store_def(d)
            created[_CATEGORY_KEY[d["category"]]].append(_public_def(self.typedefs[d["name"]]))
        return created

    def _put_typedefs(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        incoming = self._incoming_defs(body)
        by_guid = {d["guid"]: d for d in self.typedefs.values()}
        pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for d in incoming:
            # §2.2: matched by guid when set, else by name; a missing type gives 404 ATLAS-404-00-001.
            old = by_guid.get(d["guid"]) if d.get("guid") else self.typedefs.get(d["name"])
            if old is None or old["category"] != d["category"]:
                raise AtlasHTTPError(404, "ATLAS-404-00-001", f"Given typename {d['name']} was invalid")
            pairs.append((old, d))
        merged = {**self.typedefs, **{d["name"]: d for d in incoming}}
        self._validate_defs(incoming, merged)
        for old, new in pairs:
            self._check_update(old, new)
        updated = {key: [] for key, _c in _DEF_KEYS}
        for old, new in pairs:
            stored = copy.deepcopy(new)
            stored["guid"] = old["guid"]
            stored["version"] = int(old.get("version", 1)) + 1
            stored.setdefault("typeVersion", old.get("typeVersion", "1.0"))
            self.typedefs[stored["name"]] = stored
            updated[_CATEGORY_KEY[stored["category"]]].append(_public_def(stored))
        self._rel_cache = {}
        self._chain_cache = {}
        self._attr_cache = {}
        return updated

    def _check_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """§2.1 / §2.2: what a PUT may not change."""
        name = old["name"]
        old_attrs = {a["name"]: a for a in old.get("attributeDefs") or []}
        new_attrs = {a["name"]: a for a in new.get("attributeDefs") or []}
        for a in old_attrs:
            if a not in new_attrs:
                raise AtlasHTTPError(400, "ATLAS-400-00-00D", f"{name}.{a} : attribute delete not supported")
        for a, nd in new_attrs.items():
            od = old_attrs.get(a)
            if od is None:
                if not nd.get("isOptional", False):
                    raise AtlasHTTPError(
                        400, "ATLAS-400-00-00C", f"{name}.{a} : can not add mandatory attribute"
                    )
            elif od.get("typeName") != nd.get("typeName"):
                raise AtlasHTTPError(
                    400, "ATLAS-400-00-029", "Data type update for attribute is not supported"
                )
            elif od.get("isOptional", False) and not nd.get("isOptional", False):
                # Allowed by Atlas (§2.2: flags other than typeName may change), but every stored entity
                # without a value then fails its next update with ATLAS-404-00-007 (§9): flag it.
                self.warnings.append(f"{name}.{a}: optional attribute made mandatory")
        removed = set(old.get("superTypes") or []) - set(new.get("superTypes") or [])
        if removed:
            raise AtlasHTTPError(400, "ATLAS-400-00-00E", f"{name}: superType remove not supported")
        if old["category"] == "RELATIONSHIP":
            if old.get("relationshipCategory") != new.get("relationshipCategory"):
                raise AtlasHTTPError(
                    400, "ATLAS-400-00-039", f"invalid update for relationshipDef {name}: category"
                )
            # §2.1 (AtlasRelationshipDefStoreV2.preUpdateCheck): an end's type, name, cardinality and
            # isContainer are fixed once created.
            for i, code in ((1, "ATLAS-400-00-037"), (2, "ATLAS-400-00-038")):
                oe, ne = old.get(f"endDef{i}") or {}, new.get(f"endDef{i}") or {}
                if _end_identity(oe) != _end_identity(ne):
                    raise AtlasHTTPError(400, code, f"invalid update for relationshipDef {name}: end{i}")
