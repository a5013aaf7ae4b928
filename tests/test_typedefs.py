"""Our typedefs against Atlas's base model and the rules the server and UI impose; registration plans."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from atlas_bridge.atlas import convert
from atlas_bridge.atlas.typedefs import (
    CATEGORIES,
    export_typedefs,
    load_typedefs,
    plan_typedef_changes,
    register_typedefs,
)
from atlas_bridge.errors import TypedefError

DATA = Path(__file__).parent / "data" / "atlas"
PREFIX = "atlas_bridge_"
PRIMITIVES = {
    "boolean", "byte", "short", "int", "long", "float", "double", "biginteger", "bigdecimal", "string",
    "date", "object",
}  # fmt: skip
# Added to Referenceable / Asset by base-model patches the server applies at start-up.
PATCHED_ATTRIBUTES = {"Referenceable": {"replicatedFrom", "replicatedTo"}}
CATEGORIES_REL = {"ASSOCIATION", "AGGREGATION", "COMPOSITION"}
PROPAGATE = {"NONE", "ONE_TO_TWO", "TWO_TO_ONE", "BOTH"}


@pytest.fixture(scope="module")
def base() -> dict[str, Any]:
    return json.loads((DATA / "0010-base_model.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def ours() -> dict[str, Any]:
    return load_typedefs()


def _all(base: dict[str, Any], ours: dict[str, Any], cat: str) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for src in (base, ours) for d in src.get(cat) or ()}


def _ancestors(name: str, entities: dict[str, dict[str, Any]]) -> list[str]:
    out: list[str] = []
    todo = [name]
    while todo:
        n = todo.pop()
        if n in out:
            continue
        out.append(n)
        todo.extend(entities[n].get("superTypes") or ())
    return out


def _type_resolves(type_name: str, known: set[str]) -> bool:
    m = re.fullmatch(r"array<(.+)>", type_name)
    if m:
        return _type_resolves(m.group(1), known)
    m = re.fullmatch(r"map<([^,]+),(.+)>", type_name)
    if m:
        return _type_resolves(m.group(1), known) and _type_resolves(m.group(2), known)
    return type_name in PRIMITIVES or type_name in known


def _relationship_ends(rels: dict[str, dict[str, Any]]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Entity type -> the relationship ends declared on it: (relationship name, end)."""
    ends: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for r in rels.values():
        for key in ("endDef1", "endDef2"):
            ends.setdefault(r[key]["type"], []).append((r["name"], r[key]))
    return ends


def _our_defs(ours: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for cat in CATEGORIES for d in ours.get(cat) or ()]


# -- the model files -------------------------------------------------------------------------------------


def test_names_carry_prefix_service_type_and_version(ours: dict[str, Any]) -> None:
    defs = _our_defs(ours)
    assert len(defs) >= 11
    for d in defs:
        assert d["name"].startswith(PREFIX), d["name"]
        assert re.fullmatch(r"[a-zA-Z][a-zA-Z0-9_ ]*", d["name"]), d["name"]
        assert d["serviceType"] == "atlas_bridge", d["name"]
        assert re.fullmatch(r"\d+(\.\d+)*", d["typeVersion"]), d["name"]
        assert d.get("description"), d["name"]


def test_the_briefed_types_exist_with_the_right_supertypes(
    base: dict[str, Any], ours: dict[str, Any]
) -> None:
    entities = _all(base, ours, "entityDefs")
    wanted = {
        convert.TYPE_TABLE: "DataSet",
        convert.TYPE_VIEW: "DataSet",
        convert.TYPE_RESULTSET: "DataSet",
        convert.TYPE_PATH: "Path",
        convert.TYPE_COLUMN: "DataSet",
        convert.TYPE_PROCESS: "Process",
        convert.TYPE_COLUMN_LINEAGE: "Process",
        convert.TYPE_PROCESS_EXECUTION: "ProcessExecution",
    }
    for name, ancestor in wanted.items():
        assert ancestor in _ancestors(name, entities), name
    # Views are tables, so a reference by table type also finds a view.
    assert convert.TYPE_TABLE in _ancestors(convert.TYPE_VIEW, entities)
    rels = {r["name"] for r in ours["relationshipDefs"]}
    assert {convert.REL_COLUMNS, convert.REL_COLUMN_LINEAGES, convert.REL_EXECUTIONS} <= rels


def test_every_supertype_attribute_type_and_relationship_end_resolves(
    base: dict[str, Any], ours: dict[str, Any]
) -> None:
    known = {d["name"] for cat in CATEGORIES for src in (base, ours) for d in src.get(cat) or ()}
    entities = _all(base, ours, "entityDefs")
    for d in _our_defs(ours):
        for sup in d.get("superTypes") or ():
            assert sup in entities, f"{d['name']}: supertype {sup}"
        for a in d.get("attributeDefs") or ():
            assert _type_resolves(a["typeName"], known), f"{d['name']}.{a['name']}: {a['typeName']}"
    for r in ours["relationshipDefs"]:
        for key in ("endDef1", "endDef2"):
            assert r[key]["type"] in entities, f"{r['name']}.{key}"


def test_options_are_strings_and_attributes_explicitly_optional(ours: dict[str, Any]) -> None:
    for d in _our_defs(ours):
        for k, v in (d.get("options") or {}).items():
            assert isinstance(v, str), f"{d['name']}.options.{k}"
        for a in d.get("attributeDefs") or ():
            assert a.get("isOptional") is True, f"{d['name']}.{a['name']} must say isOptional: true"
            assert a.get("cardinality") in {"SINGLE", "SET"}, f"{d['name']}.{a['name']}"
            if a["typeName"].startswith("array<"):
                assert a["cardinality"] == "SET"
            for k, v in (a.get("options") or {}).items():
                assert isinstance(v, str), f"{d['name']}.{a['name']}.options.{k}"


def test_no_attribute_redeclares_an_inherited_one(base: dict[str, Any], ours: dict[str, Any]) -> None:
    entities = _all(base, ours, "entityDefs")
    for d in ours["entityDefs"]:
        inherited: set[str] = set()
        for anc in _ancestors(d["name"], entities)[1:]:
            inherited |= {a["name"] for a in entities[anc].get("attributeDefs") or ()}
            inherited |= PATCHED_ATTRIBUTES.get(anc, set())
        own = [a["name"] for a in d.get("attributeDefs") or ()]
        assert len(own) == len(set(own)), d["name"]
        assert not set(own) & inherited, f"{d['name']} redeclares {set(own) & inherited}"


def test_relationship_rules(base: dict[str, Any], ours: dict[str, Any]) -> None:
    entities = _all(base, ours, "entityDefs")
    rels = _all(base, ours, "relationshipDefs")
    ends = _relationship_ends(rels)
    for r in ours["relationshipDefs"]:
        cat = r["relationshipCategory"]
        assert cat in CATEGORIES_REL, r["name"]
        assert r.get("propagateTags", "NONE") in PROPAGATE, r["name"]
        e1, e2 = r["endDef1"], r["endDef2"]
        for e in (e1, e2):
            assert e["cardinality"] in {"SINGLE", "SET"}, f"{r['name']}: LIST ends are refused"
        containers = [e for e in (e1, e2) if e.get("isContainer")]
        if cat == "ASSOCIATION":
            assert not containers, r["name"]
        else:
            assert len(containers) == 1, f"{r['name']}: exactly one container end"
        if cat == "COMPOSITION":
            child = e2 if containers[0] is e1 else e1
            assert child["cardinality"] == "SINGLE", f"{r['name']}: the child end of a COMPOSITION is SINGLE"
            assert containers[0]["cardinality"] == "SET", r["name"]
    # End names are unique per type (own and inherited) and never shadow an attribute.
    for d in ours["entityDefs"]:
        lineage = _ancestors(d["name"], entities)
        names: list[str] = []
        attrs: set[str] = set()
        for t in lineage:
            names += [e["name"] for _, e in ends.get(t, ())]
            attrs |= {a["name"] for a in entities[t].get("attributeDefs") or ()}
            attrs |= PATCHED_ATTRIBUTES.get(t, set())
        ours_ends = [e["name"] for _, e in ends.get(d["name"], ())]
        # Base legacy ends (Process.inputs/outputs) are declared as attributes too; ours are not.
        assert not set(ours_ends) & attrs, f"{d['name']}: end name shadows an attribute"
        assert len(names) == len(set(names)), f"{d['name']}: duplicate relationship end names {names}"


def test_column_lineage_is_composed_by_its_process(ours: dict[str, Any]) -> None:
    rel = next(r for r in ours["relationshipDefs"] if r["name"] == convert.REL_COLUMN_LINEAGES)
    assert rel["relationshipCategory"] == "COMPOSITION"
    parent = rel["endDef1"] if rel["endDef1"]["isContainer"] else rel["endDef2"]
    child = rel["endDef2"] if parent is rel["endDef1"] else rel["endDef1"]
    assert parent["type"] == convert.TYPE_PROCESS
    assert child["type"] == convert.TYPE_COLUMN_LINEAGE
    assert child["name"] not in {"inputs", "outputs"}
    execs = next(r for r in ours["relationshipDefs"] if r["name"] == convert.REL_EXECUTIONS)
    assert execs["endDef1"]["type"] == convert.TYPE_PROCESS
    assert execs["endDef1"]["isContainer"] is True
    assert execs["endDef2"]["type"] == convert.TYPE_PROCESS_EXECUTION


def test_schema_tab_options(base: dict[str, Any], ours: dict[str, Any]) -> None:
    entities = _all(base, ours, "entityDefs")
    rels = _all(base, ours, "relationshipDefs")
    ends = _relationship_ends(rels)
    for name in (convert.TYPE_TABLE, convert.TYPE_VIEW, convert.TYPE_RESULTSET, convert.TYPE_PATH):
        # The UI reads the option off the entity's own type, not its supertypes.
        attr = entities[name]["options"]["schemaElementsAttribute"]
        found = [(r, e) for t in _ancestors(name, entities) for r, e in ends.get(t, ()) if e["name"] == attr]
        assert len(found) == 1, name
        rel_name, end = found[0]
        assert end["cardinality"] == "SET"
        other = rels[rel_name]["endDef2"] if rels[rel_name]["endDef1"] is end else rels[rel_name]["endDef1"]
        assert other["type"] == convert.TYPE_COLUMN
    schema = json.loads(entities[convert.TYPE_COLUMN]["options"]["schemaAttributes"])
    column_attrs = {a["name"] for t in _ancestors(convert.TYPE_COLUMN, entities)
                    for a in entities[t].get("attributeDefs") or ()}  # fmt: skip
    assert isinstance(schema, list)
    assert set(schema) <= column_attrs


def test_column_lineage_type_tells_direct_from_indirect(ours: dict[str, Any]) -> None:
    cl = next(d for d in ours["entityDefs"] if d["name"] == convert.TYPE_COLUMN_LINEAGE)
    names = {a["name"] for a in cl["attributeDefs"]}
    assert {"dependencyType", "expression", "clauses"} <= names


def test_export_round_trips(ours: dict[str, Any]) -> None:
    assert json.loads(export_typedefs()) == ours
    assert export_typedefs() == export_typedefs()


# -- registration plans -----------------------------------------------------------------------------------


def _as_server_returns(defs: dict[str, Any]) -> dict[str, Any]:
    """What GET /v2/types/typedefs gives back: our defs plus server-filled fields."""
    out = copy.deepcopy(defs)
    for cat in CATEGORIES:
        for i, d in enumerate(out.get(cat) or ()):
            d.update({"guid": f"g-{cat}-{i}", "createdBy": "admin", "createTime": 1, "version": 1})
            if cat == "entityDefs":
                d.update({"subTypes": [], "relationshipAttributeDefs": []})
            for a in d.get("attributeDefs") or ():
                a.update({"valuesMinCount": 0, "valuesMaxCount": 1, "includeInNotification": False})
            for key in ("endDef1", "endDef2"):
                if key in d:
                    d[key].setdefault("isLegacyAttribute", False)
                    d[key].setdefault("description", "")
    return out


def _server(base: dict[str, Any], *parts: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {cat: list(base.get(cat) or ()) for cat in CATEGORIES}
    for part in parts:
        for cat in CATEGORIES:
            out[cat] += part.get(cat) or []
    return out


def test_plan_on_an_empty_server_creates_everything(base: dict[str, Any], ours: dict[str, Any]) -> None:
    plan = plan_typedef_changes(base, ours)
    assert plan.created_names == tuple(sorted(d["name"] for d in _our_defs(ours)))
    assert plan.update == {}
    assert set(plan.create) == {"entityDefs", "relationshipDefs"}  # empty categories left out


def test_plan_is_empty_when_the_server_holds_ours(base: dict[str, Any], ours: dict[str, Any]) -> None:
    plan = plan_typedef_changes(_server(base, _as_server_returns(ours)), ours)
    assert not plan.has_changes
    assert len(plan.unchanged) == len(_our_defs(ours))


def _older(ours: dict[str, Any]) -> dict[str, Any]:
    """An older release: the table lacks tableType, and had an attribute we no longer declare."""
    old = copy.deepcopy(ours)
    table = next(d for d in old["entityDefs"] if d["name"] == convert.TYPE_TABLE)
    table["typeVersion"] = "0.9"
    table["attributeDefs"] = [a for a in table["attributeDefs"] if a["name"] != "tableType"]
    table["attributeDefs"].append(
        {"name": "legacyNote", "typeName": "string", "cardinality": "SINGLE", "isOptional": True}
    )
    table["options"]["extraOption"] = "kept"
    return old


def test_plan_updates_a_changed_def_without_dropping_anything(
    base: dict[str, Any], ours: dict[str, Any]
) -> None:
    existing = _server(base, _as_server_returns(_older(ours)))
    plan = plan_typedef_changes(existing, ours)
    assert plan.create == {}
    assert plan.updated_names == (convert.TYPE_TABLE,)
    (table,) = plan.update["entityDefs"]
    names = [a["name"] for a in table["attributeDefs"]]
    assert "legacyNote" in names  # the server's attribute is kept
    assert "tableType" in names  # ours is added
    assert table["options"] == {"schemaElementsAttribute": "columns", "extraOption": "kept"}
    our_table = next(d for d in ours["entityDefs"] if d["name"] == convert.TYPE_TABLE)
    assert table["typeVersion"] == our_table["typeVersion"]
    assert "guid" not in table
    assert "createTime" not in table
    # Once applied, the next plan changes nothing.
    applied = copy.deepcopy(existing)
    applied["entityDefs"] = [table if d["name"] == table["name"] else d for d in applied["entityDefs"]]
    assert not plan_typedef_changes(applied, ours).has_changes


def test_plan_leaves_extra_server_attributes_alone(base: dict[str, Any], ours: dict[str, Any]) -> None:
    server = _as_server_returns(ours)
    column = next(d for d in server["entityDefs"] if d["name"] == convert.TYPE_COLUMN)
    column["attributeDefs"].append({"name": "addedByAdmin", "typeName": "string", "isOptional": True})
    assert not plan_typedef_changes(_server(base, server), ours).has_changes


def test_plan_skips_a_newer_server_version(base: dict[str, Any], ours: dict[str, Any]) -> None:
    server = _as_server_returns(_older(ours))
    next(d for d in server["entityDefs"] if d["name"] == convert.TYPE_TABLE)["typeVersion"] = "1.10"
    mine = copy.deepcopy(ours)
    next(d for d in mine["entityDefs"] if d["name"] == convert.TYPE_TABLE)["typeVersion"] = "1.9"
    plan = plan_typedef_changes(_server(base, server), mine)
    assert plan.skipped == (convert.TYPE_TABLE,)  # 1.10 > 1.9 as numbers
    assert not plan.has_changes


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("attribute_type", "refuses to change an attribute's type"),
        ("mandatory", "mandatory attribute"),
        ("relationship_end", "relationship"),
    ],
)
def test_plan_refuses_changes_atlas_refuses(
    base: dict[str, Any], ours: dict[str, Any], change: str, message: str
) -> None:
    server = _as_server_returns(ours)
    mine = copy.deepcopy(ours)
    if change == "attribute_type":
        col = next(d for d in mine["entityDefs"] if d["name"] == convert.TYPE_COLUMN)
        next(a for a in col["attributeDefs"] if a["name"] == "type")["typeName"] = "int"
    elif change == "mandatory":
        col = next(d for d in mine["entityDefs"] if d["name"] == convert.TYPE_COLUMN)
        col["attributeDefs"].append({"name": "needed", "typeName": "string", "isOptional": False})
    else:
        rel = next(d for d in mine["relationshipDefs"] if d["name"] == convert.REL_COLUMNS)
        rel["endDef2"]["name"] = "owner_table"
    with pytest.raises(TypedefError, match=message):
        plan_typedef_changes(_server(base, server), mine)


def test_plan_refuses_a_name_used_by_another_category(base: dict[str, Any], ours: dict[str, Any]) -> None:
    clash = {"structDefs": [{"name": convert.TYPE_TABLE, "typeVersion": "1.0"}]}
    with pytest.raises(TypedefError, match="structDefs"):
        plan_typedef_changes(_server(base, clash), ours)


class FakeTypedefClient:
    """Just enough of AtlasClient for registration: a typedef store that refuses what Atlas refuses."""

    def __init__(self, existing: dict[str, Any]) -> None:
        self.store = {
            d["name"]: (cat, copy.deepcopy(d)) for cat in CATEGORIES for d in existing.get(cat) or ()
        }
        self.calls: list[tuple[str, list[str]]] = []

    def get_all_typedefs(self) -> dict[str, Any]:
        out: dict[str, Any] = {cat: [] for cat in CATEGORIES}
        for cat, d in self.store.values():
            out[cat].append(copy.deepcopy(d))
        return _as_server_returns(out)

    def create_typedefs(self, body: dict[str, Any]) -> None:
        names = [d["name"] for cat in CATEGORIES for d in body.get(cat) or ()]
        assert not set(names) & set(self.store), "409: already exists"
        self.calls.append(("POST", names))
        for cat in CATEGORIES:
            for d in body.get(cat) or ():
                self.store[d["name"]] = (cat, copy.deepcopy(d))

    def update_typedefs(self, body: dict[str, Any]) -> None:
        names = [d["name"] for cat in CATEGORIES for d in body.get(cat) or ()]
        assert set(names) <= set(self.store), "404: update of a missing type"
        for cat in CATEGORIES:
            for d in body.get(cat) or ():
                old = {a["name"] for a in self.store[d["name"]][1].get("attributeDefs") or ()}
                new = {a["name"] for a in d.get("attributeDefs") or ()}
                assert old <= new, "400: attribute delete not supported"
                self.store[d["name"]] = (cat, copy.deepcopy(d))
        self.calls.append(("PUT", names))


def test_register_twice_changes_nothing_the_second_time(base: dict[str, Any], ours: dict[str, Any]) -> None:
    older = _older(ours)  # and without process executions yet
    older["entityDefs"] = [d for d in older["entityDefs"] if d["name"] != convert.TYPE_PROCESS_EXECUTION]
    older["relationshipDefs"] = [d for d in older["relationshipDefs"] if d["name"] != convert.REL_EXECUTIONS]
    client = FakeTypedefClient(_server(base, older))
    plan = register_typedefs(client)
    assert [c[0] for c in client.calls] == ["POST", "PUT"]  # create first, so updates may use new types
    assert plan.created_names == (convert.TYPE_PROCESS_EXECUTION, convert.REL_EXECUTIONS)
    assert plan.updated_names == (convert.TYPE_TABLE,)
    client.calls.clear()
    again = register_typedefs(client)
    assert client.calls == []
    assert not again.has_changes


def test_register_needs_the_base_model() -> None:
    with pytest.raises(TypedefError, match="base model"):
        register_typedefs(FakeTypedefClient({}))


def test_setup_cfg_ships_every_package_and_the_typedefs() -> None:
    """``packages`` is an explicit list (``find:`` cannot see ``typedefs/`` mapped into the package)."""
    import configparser

    root = Path(__file__).resolve().parent.parent
    cfg = configparser.ConfigParser()
    cfg.read(root / "setup.cfg")
    listed = set(cfg["options"]["packages"].split())
    on_disk = {
        ".".join(p.parent.relative_to(root).parts) for p in (root / "atlas_bridge").rglob("__init__.py")
    }
    assert on_disk | {"atlas_bridge.typedefs"} == listed
    assert "atlas_bridge.typedefs = typedefs" in cfg["options"]["package_dir"]
    data = cfg["options.package_data"]["atlas_bridge.typedefs"]
    assert "*/*.json" in data
    assert (root / "typedefs" / "__init__.py").is_file()
    assert list((root / "typedefs").glob("*/*.json"))
