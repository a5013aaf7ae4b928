"""Entities (§3): upsert by unique attributes per type, placeholder guids, reference resolution,
required attributes, relationships, soft delete."""

from __future__ import annotations

import copy
import re
from typing import Any

from atlas_stub.common import _HEADER_ATTRS, _MISSING, AtlasHTTPError, _e007, _kv, _RelAttr


class EntityStore:
    """Mixin of :class:`atlas_stub.AtlasStub`; the state it uses is set up there."""

    def find(
        self, type_name: str, qualified_name: str, *, status: str | None = "ACTIVE"
    ) -> dict[str, Any] | None:
        """The stored entity of exactly ``type_name`` with this qualifiedName."""
        for ent in self.entities.values():
            if (
                ent["typeName"] == type_name
                and ent["attributes"].get("qualifiedName") == qualified_name
                and (status is None or ent["status"] == status)
            ):
                return ent
        return None

    def active_entities(self, type_name: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.entities.values()
            if e["status"] == "ACTIVE" and (type_name is None or e["typeName"] == type_name)
        ]

    def related(self, guid: str, attribute: str) -> list[dict[str, Any]]:
        """The ACTIVE entities ``guid`` points at through relationship attribute ``attribute``."""
        ent = self.entities[guid]
        rel = self._rel_attrs(ent["typeName"]).get(attribute)
        if rel is None:
            return []
        return [self.entities[g] for g, _e in self._edges_of(guid, rel[0], active_only=True)]

    def _index_qn(self, guid: str, old: Any, new: Any) -> None:
        if isinstance(old, str) and guid in self._qn_index.get(old, ()):
            self._qn_index[old].remove(guid)
        if isinstance(new, str):
            self._qn_index.setdefault(new, []).append(guid)

    def _post_entity(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        if not isinstance(body, dict) or not isinstance(body.get("entity"), dict):
            raise AtlasHTTPError(400, "ATLAS-400-00-01A", "no entities to create/update.")
        return self._post_bulk(
            path,
            params,
            {"entities": [body["entity"]], "referredEntities": body.get("referredEntities") or {}},
        )

    def _post_bulk(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        if not isinstance(body, dict):
            raise AtlasHTTPError(400, None, "", raw={"error": "Cannot deserialize AtlasEntitiesWithExtInfo"})
        entities = body.get("entities") or []
        referred = body.get("referredEntities") or {}
        if not isinstance(entities, list) or not isinstance(referred, dict):
            raise AtlasHTTPError(400, None, "", raw={"error": "Cannot deserialize AtlasEntitiesWithExtInfo"})
        if not entities:
            raise AtlasHTTPError(400, "ATLAS-400-00-01A", "no entities to create/update.")
        plan = self._plan(entities, referred)
        return self._apply(plan)

    def _plan(self, entities: list[Any], referred: dict[str, Any]) -> list[dict[str, Any]]:
        """Validate and resolve a whole request before touching the store: all or nothing (§2.4)."""
        items: list[dict[str, Any]] = []
        by_placeholder: dict[str, dict[str, Any]] = {}
        pending: list[tuple[dict[str, Any], bool]] = [(e, True) for e in entities]
        pending += [(e, False) for e in referred.values()]
        for raw, top in pending:
            if raw is None:
                # AtlasEntityStoreV2.createOrUpdate: a null entry is "no entities" (400-00-01A, issue 16).
                raise AtlasHTTPError(400, "ATLAS-400-00-01A", "no entities to create/update.")
            if not isinstance(raw, dict):
                raise AtlasHTTPError(400, None, "", raw={"error": "Cannot deserialize AtlasEntity"})
            if "guid" in raw and raw["guid"] is None:
                # §2.3: an explicit null guid is refused.
                raise AtlasHTTPError(400, "ATLAS-400-00-021", "Given instance guid null is invalid/not found")
            if raw.get("guid") == "":
                # AtlasTypeUtil.isValidGuid: "" is neither a placeholder nor a guid (400-00-021, issue 16).
                raise AtlasHTTPError(400, "ATLAS-400-00-021", "ObjectId is not valid AtlasObjectId{guid=''}")
            guid = raw.get("guid")
            if guid is None:
                self._counter += 1
                guid = f"-{self._counter}"
            if str(guid) in by_placeholder:
                # The stream looks entities up by guid: the first with a guid wins, later ones are never
                # read (issue 16).
                continue
            type_name = raw.get("typeName")
            if not isinstance(type_name, str) or self._entity_def(type_name) is None:
                raise AtlasHTTPError(
                    400, "ATLAS-400-00-014", f"Type ENTITY with name {type_name} does not exist"
                )
            item = {"raw": raw, "guid": str(guid), "typeName": type_name, "top": top, "match": None}
            items.append(item)
            by_placeholder[str(guid)] = item
        # §9: referredEntities that nothing in `entities` references are ignored, not created.
        referenced: set[str] = set()
        for item in items:
            if item["top"]:
                referenced.update(self._guids_referenced(item["raw"]))
        changed = True
        while changed:
            changed = False
            for item in items:
                if not item["top"] and item["guid"] in referenced and not item.get("used"):
                    item["used"] = True
                    referenced.update(self._guids_referenced(item["raw"]))
                    changed = True
        items = [i for i in items if i["top"] or i.get("used")]
        by_placeholder = {i["guid"]: i for i in items}
        # The same type and unique attributes twice in one request are one entity: the first occurrence
        # creates (or matches) it and the later ones are applied on top, in order (issue 16).
        first_of: dict[tuple[str, str], dict[str, Any]] = {}
        kept: list[dict[str, Any]] = []
        for item in items:
            qn = (item["raw"].get("attributes") or {}).get("qualifiedName")
            key = (item["typeName"], qn) if isinstance(qn, str) else None
            first = first_of.get(key) if key is not None else None
            if first is None:
                if key is not None:
                    first_of[key] = item
                kept.append(item)
                continue
            merged = copy.deepcopy(first["raw"])
            for section in ("attributes", "relationshipAttributes"):
                later = item["raw"].get(section) or {}
                if later:
                    merged[section] = {**(merged.get(section) or {}), **later}
            first["raw"] = merged
            first.setdefault("aliases", []).append(item["guid"])
            by_placeholder[item["guid"]] = first
        items = kept
        # Match: a real guid by guid, else by unique attributes among ACTIVE entities of the type or subtypes.
        for item in items:
            guid = item["guid"]
            attrs = item["raw"].get("attributes") or {}
            if not guid.startswith("-"):
                stored = self.entities.get(guid)
                if (
                    stored is not None
                    and self._is_a(stored["typeName"], item["typeName"]) is False
                    and not self._is_a(item["typeName"], stored["typeName"])
                ):
                    stored = None
                if stored is None:
                    stored = self._find_unique(item["typeName"], attrs)
                if stored is None:
                    # §9: an invented real-looking guid is refused unless the qualifiedName matches.
                    raise AtlasHTTPError(404, "ATLAS-404-00-00A", f"Referenced entity {guid} is not found")
                item["match"] = stored["guid"]
            else:
                stored = self._find_unique(item["typeName"], attrs)
                item["match"] = stored["guid"] if stored is not None else None
        # Validate attributes (matched entities too, §9) and resolve references.
        for item in items:
            self._validate_item(item, by_placeholder)
        return items

    def _guids_referenced(self, raw: dict[str, Any]) -> set[str]:
        out: set[str] = set()
        for section in ("attributes", "relationshipAttributes"):
            for value in (raw.get(section) or {}).values():
                for ref in value if isinstance(value, list) else [value]:
                    if isinstance(ref, dict) and isinstance(ref.get("guid"), str) and "typeName" in ref:
                        out.add(ref["guid"])
        return out

    def _find_unique(self, type_name: str, attrs: dict[str, Any]) -> dict[str, Any] | None:
        unique = [a for a in self._unique_attrs(type_name) if attrs.get(a) is not None]
        if not unique:
            return None
        for a in unique:
            if a == "qualifiedName" and isinstance(attrs[a], str):
                candidates = [self.entities[g] for g in self._qn_index.get(attrs[a], ())]
            else:
                candidates = [e for e in self.entities.values() if e["attributes"].get(a) == attrs[a]]
            for ent in candidates:
                if ent["status"] == "ACTIVE" and self._is_a(ent["typeName"], type_name):
                    return ent
        return None

    def _validate_item(self, item: dict[str, Any], by_placeholder: dict[str, dict[str, Any]]) -> None:
        type_name = item["typeName"]
        raw = item["raw"]
        attr_defs = self._attr_defs(type_name)
        rel_attrs = self._rel_attrs_all(type_name)
        attributes = dict(raw.get("attributes") or {})
        rel_values = dict(raw.get("relationshipAttributes") or {})
        # §2.3: a relationship attribute placed in `attributes` is moved to relationshipAttributes.
        for name in list(attributes):
            if name in rel_attrs:
                rel_values.setdefault(name, attributes.pop(name))
        plain: dict[str, Any] = {}
        for name, value in attributes.items():
            if name not in attr_defs:
                continue  # §2.3: unknown attribute names are silently ignored
            declaring, adef = attr_defs[name]
            if value is not None and not self._value_ok(adef.get("typeName", "string"), value):
                raise _e007(
                    f"{type_name}.{name}={value}: invalid value for type {adef.get('typeName')}",
                )
            plain[name] = value
        # §2.1 / §9: every required attribute must be present, for matched entities too.
        for name, (declaring, adef) in attr_defs.items():
            if adef.get("isOptional", False) or name in rel_attrs:
                continue
            if plain.get(name) is None:
                raise _e007(
                    f"{type_name}.{name}: mandatory attribute value missing in type {declaring}",
                )
        # §9: the child end of a COMPOSITION is mandatory on the child (one of the relationships sharing
        # the attribute name is enough, e.g. hive_column.table in columns or partitionKeys).
        for name, options in sorted(rel_attrs.items()):
            # A stored child re-sent without it is refused too: matched entities are validated in full (§9).
            children = [o for o in options if o.category == "COMPOSITION" and not o.is_container]
            if not children or rel_values.get(name) is not None:
                continue
            raise _e007(
                f"{type_name}.{name}: mandatory attribute value missing in type {type_name}",
            )
        resolved: dict[str, tuple[_RelAttr, list[str] | str | None]] = {}
        for name, value in rel_values.items():
            if name not in rel_attrs:
                self.warnings.append(f"{type_name}: unknown relationship attribute {name} ignored")
                continue
            refs = value if isinstance(value, list) else ([] if value is None else [value])
            first_rt = next((r.get("relationshipType") for r in refs if isinstance(r, dict)), None)
            opt = self._choose_rel(type_name, name, first_rt)
            guids = [self._resolve_ref(ref, opt, by_placeholder, type_name, name) for ref in refs]
            if opt.cardinality == "SINGLE":
                if isinstance(value, list):
                    raise _e007(
                        f"{type_name}.{name}={value}: invalid value for type {opt.other_type}",
                    )
                resolved[name] = (opt, guids[0] if guids else None)
            else:
                if not isinstance(value, list):
                    raise _e007(
                        f"{type_name}.{name}: invalid value for type array<{opt.other_type}>",
                    )
                resolved[name] = (opt, guids)
        item["plain"] = plain
        item["rels"] = resolved

    def _has_edge(self, guid: str | None, opt: _RelAttr) -> bool:
        return guid is not None and bool(self._edges_of(guid, opt, active_only=True))

    def _resolve_ref(
        self, ref: Any, opt: _RelAttr, by_placeholder: dict[str, dict[str, Any]], owner_type: str, attr: str
    ) -> str:
        """§2.3: by guid (negative: in this payload; real: in the store), else by uniqueAttributes (store)."""
        if isinstance(ref, str):
            # A bare string is read as an AtlasObjectId with no guid and no unique attributes
            # (AtlasEntityGraphDiscoveryV2.validateObjectId: ATLAS-400-00-021, issue 16).
            raise AtlasHTTPError(400, "ATLAS-400-00-021", f"ObjectId is not valid {ref}")
        if not isinstance(ref, dict):
            raise _e007(
                f"{owner_type}.{attr}={ref}: invalid value for type {opt.other_type}",
            )
        guid = ref.get("guid")
        ref_type = ref.get("typeName")
        if not guid and not ref.get("uniqueAttributes"):
            # Only a typeName: nothing to resolve it by (ATLAS-400-00-021, issue 16).
            raise AtlasHTTPError(400, "ATLAS-400-00-021", f"ObjectId is not valid {ref}")
        target_type: str
        target: str
        if isinstance(guid, str) and guid.startswith("-"):
            item = by_placeholder.get(guid)
            if item is None:
                raise AtlasHTTPError(404, "ATLAS-404-00-00A", f"Referenced entity {guid} is not found")
            target, target_type = item["guid"], item["typeName"]
        elif isinstance(guid, str) and guid:
            stored = self.entities.get(guid)
            if stored is None and ref_type and ref.get("uniqueAttributes"):
                stored = self._find_unique(ref_type, ref["uniqueAttributes"])
            if stored is None:
                raise AtlasHTTPError(404, "ATLAS-404-00-00A", f"Referenced entity {guid} is not found")
            target, target_type = stored["guid"], stored["typeName"]
        else:
            if not isinstance(ref_type, str) or self._entity_def(ref_type) is None:
                raise AtlasHTTPError(
                    400, "ATLAS-400-00-014", f"Type ENTITY with name {ref_type} does not exist"
                )
            unique = ref.get("uniqueAttributes") or {}
            # UniqAttrBasedEntityResolver looks at the store only, never at this payload.
            stored = self._find_unique(ref_type, unique) if isinstance(unique, dict) else None
            if stored is None:
                raise AtlasHTTPError(
                    404,
                    "ATLAS-404-00-00A",
                    f"Referenced entity AtlasObjectId{{guid='null', typeName='{ref_type}',"
                    f" uniqueAttributes={{{_kv(unique, ':')}}}}} is not found",
                )
            target, target_type = stored["guid"], stored["typeName"]
        if not self._is_a(target_type, opt.other_type):
            # §9: a reference of the wrong type is refused with 400 ATLAS-400-00-036.
            raise AtlasHTTPError(
                400,
                "ATLAS-400-00-036",
                f"invalid relationshipDef: {opt.relationship}: end type 1: {owner_type},"
                f" end type 2: {target_type}",
            )
        return target

    def _value_ok(self, type_name: str, value: Any) -> bool:
        t = type_name.strip()
        if t == "string":
            return True
        if t in ("int", "long", "short", "byte", "biginteger"):
            if isinstance(value, str) and re.fullmatch(r"-?\d+", value) is not None:
                value = int(value)
            if not isinstance(value, int) or isinstance(value, bool):
                return False
            # AtlasBuiltInTypes: a value outside the type's range is invalid (404-007, issue 16).
            bits = {"byte": 8, "short": 16, "int": 32, "long": 64}.get(t)
            return bits is None or -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)
        if t in ("float", "double", "bigdecimal"):
            if isinstance(value, bool):
                return False
            if isinstance(value, (int, float)):
                return True
            try:
                float(value)
            except (TypeError, ValueError):
                return False
            return True
        if t == "boolean":
            return isinstance(value, bool) or (isinstance(value, str) and value.lower() in ("true", "false"))
        if t == "date":
            # §2.3: epoch millis, a numeric string, or yyyy-MM-dd'T'HH:mm:ss.SSS'Z'.
            if isinstance(value, int) and not isinstance(value, bool):
                return True
            return isinstance(value, str) and (
                re.fullmatch(r"-?\d+", value) is not None
                or re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z", value) is not None
            )
        m = re.fullmatch(r"array<(.+)>", t)
        if m:
            return isinstance(value, list) and all(
                self._value_ok(m.group(1), v) for v in value if v is not None
            )
        m = re.fullmatch(r"map<([^,]+),(.+)>", t)
        if m:
            return isinstance(value, dict) and all(
                self._value_ok(m.group(2), v) for v in value.values() if v is not None
            )
        d = self.typedefs.get(t)
        if d is not None and d["category"] == "ENUM":
            return value in [e.get("value") for e in d.get("elementDefs") or []]
        if d is not None and d["category"] == "STRUCT":
            # AtlasStructType.isValidValue: every mandatory field present, every field valid (issue 16).
            if not isinstance(value, dict):
                return False
            for a in d.get("attributeDefs") or []:
                v = value.get(a["name"])
                if v is None:
                    if not a.get("isOptional", False):
                        return False
                elif not self._value_ok(a.get("typeName", "string"), v):
                    return False
            return True
        return True

    def _apply(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        """Write a validated plan: new entities first, then matched ones (§9), then relationships."""
        now = self._tick()
        assignments: dict[str, str] = {}
        created: list[str] = []
        updated: list[str] = []
        deleted: list[str] = []
        touched: set[str] = set()
        real_of: dict[str, str] = {}
        for item in items:
            if item["match"] is None:
                guid = self._next_guid()
                self.entities[guid] = {
                    "typeName": item["typeName"],
                    "guid": guid,
                    "status": "ACTIVE",
                    "attributes": {},
                    "createTime": now,
                    "updateTime": now,
                    "version": 0,
                    "createdBy": "stub",
                    "updatedBy": "stub",
                }
                real_of[item["guid"]] = guid
                created.append(guid)
            else:
                real_of[item["guid"]] = item["match"]
            if item["guid"].startswith("-"):
                assignments[item["guid"]] = real_of[item["guid"]]
            for alias in item.get("aliases", ()):
                real_of[alias] = real_of[item["guid"]]
                if alias.startswith("-"):
                    assignments[alias] = real_of[item["guid"]]
        ordered = [i for i in items if i["match"] is None] + [i for i in items if i["match"] is not None]
        for item in ordered:
            guid = real_of[item["guid"]]
            ent = self.entities[guid]
            changed = False
            for name, value in item["plain"].items():
                if ent["attributes"].get(name, _MISSING) != value:
                    if name == "qualifiedName":
                        self._index_qn(guid, ent["attributes"].get(name), value)
                    ent["attributes"][name] = copy.deepcopy(value)
                    changed = True
            for _name, (opt, target) in sorted(item["rels"].items()):
                targets = [
                    real_of.get(t, t)
                    for t in (target if isinstance(target, list) else [target] if target else [])
                ]
                changed |= self._set_relationship(guid, opt, targets, deleted, touched)
            if item["match"] is not None and changed and guid not in deleted:
                ent["updateTime"] = now
                ent["version"] += 1
                updated.append(guid)
        # The other end of a relationship added or removed is updated too (EntityGraphMapper records the
        # inverse vertex: RequestContext.recordEntityUpdate), so it is in mutatedEntities.UPDATE (issue 16).
        for guid in sorted(touched):
            ent = self.entities[guid]
            if guid in created or guid in updated or guid in deleted or ent["status"] != "ACTIVE":
                continue
            ent["updateTime"] = now
            ent["version"] += 1
            updated.append(guid)
        mutated: dict[str, list[dict[str, Any]]] = {}
        if created:
            mutated["CREATE"] = [self._header(g) for g in created]
        if updated:
            mutated["UPDATE"] = [self._header(g) for g in updated if g not in created]
        if deleted:
            mutated["DELETE"] = [self._header(g) for g in deleted]
        return {"mutatedEntities": mutated, "guidAssignments": assignments}

    def _edges_of(self, guid: str, opt: _RelAttr, *, active_only: bool) -> list[tuple[str, str]]:
        """(other entity guid, edge guid) for relationship ``opt`` with ``guid`` on end ``opt.end``."""
        out = []
        for edge_guid in sorted(self._edges_by_entity.get(guid, ())):
            edge = self.edges[edge_guid]
            if edge["typeName"] != opt.relationship or edge[f"end{opt.end}"] != guid:
                continue
            if active_only and edge["status"] != "ACTIVE":
                continue
            out.append((edge[f"end{3 - opt.end}"], edge_guid))
        return out

    def _set_relationship(
        self,
        guid: str,
        opt: _RelAttr,
        targets: list[str],
        deleted: list[str],
        touched: set[str] | None = None,
    ) -> bool:
        """§2.4: the array (or single ref) sent replaces the stored one; dropped owned children die."""
        current = self._edges_of(guid, opt, active_only=True)
        current_targets = {t for t, _e in current}
        wanted = list(dict.fromkeys(targets))
        changed = False
        touched = touched if touched is not None else set()
        for target, edge_guid in current:
            if target not in wanted:
                self.edges[edge_guid]["status"] = "DELETED"
                touched.add(target)
                changed = True
                if opt.is_container and opt.category == "COMPOSITION":
                    self._soft_delete(target, deleted)
        for target in wanted:
            if target in current_targets:
                continue
            # The other end, when SINGLE, holds one edge of this relationship: a new one replaces it.
            other_opt = _RelAttr(opt.relationship, 3 - opt.end, "", "", "", False, opt.category, False)
            other_single = self._other_end_single(opt)
            if other_single:
                for old_owner, old_edge in self._edges_of(target, other_opt, active_only=True):
                    self.edges[old_edge]["status"] = "DELETED"
                    touched.add(old_owner)
            edge_guid = self._next_guid()
            ends = {f"end{opt.end}": guid, f"end{3 - opt.end}": target}
            self.edges[edge_guid] = {
                "guid": edge_guid,
                "typeName": opt.relationship,
                "status": "ACTIVE",
                **ends,
            }
            self._edges_by_entity.setdefault(guid, set()).add(edge_guid)
            self._edges_by_entity.setdefault(target, set()).add(edge_guid)
            touched.add(target)
            changed = True
        return changed

    def _other_end_single(self, opt: _RelAttr) -> bool:
        rd = self.typedefs[opt.relationship]
        return (rd.get(f"endDef{3 - opt.end}") or {}).get("cardinality", "SINGLE") == "SINGLE"

    def _soft_delete(self, guid: str, deleted: list[str]) -> None:
        """§2.5: status DELETED, edges DELETED, COMPOSITION children cascade."""
        ent = self.entities.get(guid)
        if ent is None or ent["status"] == "DELETED":
            return
        ent["status"] = "DELETED"
        ent["updateTime"] = self._tick()
        deleted.append(guid)
        for edge_guid in sorted(self._edges_by_entity.get(guid, ())):
            edge = self.edges[edge_guid]
            if edge["status"] != "ACTIVE":
                continue
            edge["status"] = "DELETED"
            rd = self.typedefs.get(edge["typeName"]) or {}
            if rd.get("relationshipCategory") == "COMPOSITION":
                for end in (1, 2):
                    if edge[f"end{end}"] == guid and (rd.get(f"endDef{end}") or {}).get("isContainer"):
                        self._soft_delete(edge[f"end{3 - end}"], deleted)

    def _header(self, guid: str) -> dict[str, Any]:
        ent = self.entities[guid]
        attrs = {
            a: ent["attributes"][a]
            for a in (*self._unique_attrs(ent["typeName"]), *_HEADER_ATTRS)
            if a in ent["attributes"]
        }
        return {
            "typeName": ent["typeName"],
            "guid": guid,
            "status": ent["status"],
            "displayText": self._display_text(ent),
            "attributes": attrs,
            "classificationNames": [],
            "labels": [],
            "meaningNames": [],
            "isIncomplete": False,
        }

    def _display_text(self, ent: dict[str, Any]) -> Any:
        """§2.6: displayTextAttribute option, else name, else displayName, else qualifiedName."""
        for t in self._supertypes(ent["typeName"]):
            opt = (self.typedefs[t].get("options") or {}).get("displayTextAttribute")
            if opt and ent["attributes"].get(opt) is not None:
                return ent["attributes"][opt]
        for a in ("name", "displayName", "qualifiedName"):
            if ent["attributes"].get(a) is not None:
                return ent["attributes"][a]
        return None

    def _entity_json(self, guid: str) -> dict[str, Any]:
        ent = self.entities[guid]
        out = copy.deepcopy({k: v for k, v in ent.items()})
        rels: dict[str, Any] = {}
        for name, options in self._rel_attrs_all(ent["typeName"]).items():
            refs = []
            for opt in options:
                for other, edge_guid in self._edges_of(guid, opt, active_only=False):
                    edge = self.edges[edge_guid]
                    o = self.entities[other]
                    refs.append(
                        {
                            "guid": other,
                            "typeName": o["typeName"],
                            "uniqueAttributes": {"qualifiedName": o["attributes"].get("qualifiedName")},
                            "entityStatus": o["status"],
                            "displayText": self._display_text(o),
                            "relationshipType": opt.relationship,
                            "relationshipGuid": edge_guid,
                            "relationshipStatus": edge["status"],
                        }
                    )
            single = all(o.cardinality == "SINGLE" for o in options)
            if single:
                active = [r for r in refs if r["relationshipStatus"] == "ACTIVE"]
                rels[name] = active[0] if active else None
            else:
                rels[name] = refs
            if any(o.is_legacy for o in options):
                value = rels[name]
                out["attributes"][name] = (
                    [
                        {
                            "guid": r["guid"],
                            "typeName": r["typeName"],
                            "uniqueAttributes": r["uniqueAttributes"],
                        }
                        for r in value
                        if r["relationshipStatus"] == "ACTIVE"
                    ]
                    if isinstance(value, list)
                    else value
                )
        out["relationshipAttributes"] = rels
        return out

    def _get_entity_by_guid(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        guid = path.split("/")[3]
        if guid not in self.entities:
            raise AtlasHTTPError(404, "ATLAS-404-00-005", f"Given instance guid {guid} is invalid/not found")
        # §2.5: soft-deleted entities are still returned, with status DELETED.
        return {"entity": self._entity_json(guid), "referredEntities": {}}

    def _lookup_unique(self, type_name: str, params: dict[str, list[str]]) -> dict[str, Any]:
        if self._entity_def(type_name) is None:
            raise AtlasHTTPError(400, "ATLAS-400-00-014", f"Type ENTITY with name {type_name} does not exist")
        attrs = {k[5:]: v[0] for k, v in params.items() if k.startswith("attr:")}
        unique = set(self._unique_attrs(type_name))
        for k in attrs:
            if k not in unique:
                raise AtlasHTTPError(400, "ATLAS-400-00-013", f"{k}: not a unique attribute of {type_name}")
        stored = self._find_unique(type_name, attrs) if attrs else None
        if stored is None:
            raise AtlasHTTPError(
                404,
                "ATLAS-404-00-009",
                f"Instance {type_name} with unique attribute {{{_kv(attrs, '=')}}} does not exist",
            )
        return stored

    def _get_entity_by_attr(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        type_name = path.split("/")[4]
        stored = self._lookup_unique(type_name, params)
        return {"entity": self._entity_json(stored["guid"]), "referredEntities": {}}

    def _get_entities_by_attrs(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        """§2.5 bulk lookup: ``attr_<n>:qualifiedName=..``; ACTIVE matches of the type or its subtypes."""
        type_name = path.split("/")[5]
        if self._entity_def(type_name) is None:
            raise AtlasHTTPError(400, "ATLAS-400-00-014", f"Type ENTITY with name {type_name} does not exist")
        found = []
        for key in sorted(params, key=lambda k: (len(k), k)):
            prefix, _, attr = key.partition(":")
            if not prefix.startswith("attr_") or attr != "qualifiedName":
                continue
            stored = self._find_unique(type_name, {attr: params[key][0]})
            if stored is not None:
                found.append(self._entity_json(stored["guid"]))
        return {"entities": found, "referredEntities": {}}

    def _delete_entity_by_attr(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        type_name = path.split("/")[4]
        stored = self._lookup_unique(type_name, params)
        deleted: list[str] = []
        self._soft_delete(stored["guid"], deleted)
        return {"mutatedEntities": {"DELETE": [self._header(g) for g in deleted]} if deleted else {}}

    def _delete_entity(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        guid = path.split("/")[3]
        deleted: list[str] = []
        # §2.5: deleting a missing or already-deleted entity is not an error.
        if guid in self.entities:
            self._soft_delete(guid, deleted)
        return {"mutatedEntities": {"DELETE": [self._header(g) for g in deleted]} if deleted else {}}
