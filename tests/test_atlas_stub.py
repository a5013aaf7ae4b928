"""Each rule the Atlas stub enforces: a payload it rejects (as atlas.md says) and one it accepts."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import requests
from atlas_stub import AtlasStub

API = "/api/atlas/v2"

MODEL: dict[str, Any] = {
    "entityDefs": [
        {
            "name": "t_table",
            "superTypes": ["DataSet"],
            "serviceType": "t",
            "typeVersion": "1.0",
            "options": {"schemaElementsAttribute": "columns"},
            "attributeDefs": [{"name": "createTime", "typeName": "date", "isOptional": True}],
        },
        {
            "name": "t_column",
            "superTypes": ["DataSet"],
            "serviceType": "t",
            "typeVersion": "1.0",
            "options": {"schemaAttributes": '["name", "type"]'},
            "attributeDefs": [{"name": "type", "typeName": "string", "isOptional": False}],
        },
        {"name": "t_process", "superTypes": ["Process"], "serviceType": "t", "attributeDefs": []},
        {"name": "t_column_lineage", "superTypes": ["Process"], "serviceType": "t", "attributeDefs": []},
        {"name": "t_db", "superTypes": ["Asset"], "serviceType": "t", "attributeDefs": []},
    ],
    "relationshipDefs": [
        {
            "name": "t_table_columns",
            "relationshipCategory": "COMPOSITION",
            "endDef1": {"type": "t_table", "name": "columns", "isContainer": True, "cardinality": "SET"},
            "endDef2": {"type": "t_column", "name": "table", "isContainer": False, "cardinality": "SINGLE"},
        },
        {
            "name": "t_table_partitionkeys",
            "relationshipCategory": "COMPOSITION",
            "endDef1": {
                "type": "t_table",
                "name": "partitionKeys",
                "isContainer": True,
                "cardinality": "SET",
            },
            "endDef2": {"type": "t_column", "name": "table", "isContainer": False, "cardinality": "SINGLE"},
        },
        {
            "name": "t_process_column_lineages",
            "relationshipCategory": "COMPOSITION",
            "endDef1": {
                "type": "t_process",
                "name": "columnLineages",
                "isContainer": True,
                "cardinality": "SET",
            },
            "endDef2": {
                "type": "t_column_lineage",
                "name": "query",
                "isContainer": False,
                "cardinality": "SINGLE",
            },
        },
    ],
}


def call(stub: AtlasStub, method: str, path: str, body: Any = None, **params: str) -> tuple[int, Any]:
    response = requests.request(method, stub.api + path, json=body, params=params or None, timeout=5)
    try:
        return response.status_code, response.json()
    except ValueError:
        return response.status_code, response.text


def ok(stub: AtlasStub, method: str, path: str, body: Any = None, **params: str) -> Any:
    status, payload = call(stub, method, path, body, **params)
    assert status == 200, payload
    return payload


def refused(
    stub: AtlasStub, method: str, path: str, body: Any, status: int, code: str | None, **params: str
) -> dict[str, Any]:
    got, payload = call(stub, method, path, body, **params)
    assert got == status, payload
    if code is not None:
        assert payload["errorCode"] == code, payload
        assert payload["errorMessage"]
    return payload if isinstance(payload, dict) else {"text": payload}


@pytest.fixture
def stub(atlas_stub: AtlasStub) -> AtlasStub:
    ok(atlas_stub, "POST", "/types/typedefs", MODEL)
    return atlas_stub


def table(qn: str, guid: str = "-1", **rels: Any) -> dict[str, Any]:
    ent: dict[str, Any] = {
        "typeName": "t_table",
        "guid": guid,
        "attributes": {"qualifiedName": qn, "name": qn},
    }
    if rels:
        ent["relationshipAttributes"] = rels
    return ent


def column(
    qn: str, guid: str, table_ref: dict[str, Any] | None, rel: str = "t_table_columns"
) -> dict[str, Any]:
    ent: dict[str, Any] = {
        "typeName": "t_column",
        "guid": guid,
        "attributes": {"qualifiedName": qn, "name": qn.split(".")[-1], "type": "int"},
    }
    if table_ref is not None:
        ent["relationshipAttributes"] = {"table": {**table_ref, "relationshipType": rel}}
    return ent


def ref(guid: str, type_name: str = "t_table", rel: str | None = None) -> dict[str, Any]:
    out = {"guid": guid, "typeName": type_name}
    if rel:
        out["relationshipType"] = rel
    return out


def uref(type_name: str, qn: str, rel: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"typeName": type_name, "uniqueAttributes": {"qualifiedName": qn}}
    if rel:
        out["relationshipType"] = rel
    return out


def process(
    qn: str, guid: str, inputs: list[Any], outputs: list[Any], type_name: str = "t_process"
) -> dict[str, Any]:
    return {
        "typeName": type_name,
        "guid": guid,
        "attributes": {"qualifiedName": qn, "name": qn},
        "relationshipAttributes": {
            "inputs": [{**r, "relationshipType": "dataset_process_inputs"} for r in inputs],
            "outputs": [{**r, "relationshipType": "process_dataset_outputs"} for r in outputs],
        },
    }


def bulk(*entities: dict[str, Any], referred: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"entities": list(entities), "referredEntities": referred or {}}


# -- typedefs (§2.2) ---------------------------------------------------------------------------------------


def test_base_model_preloaded_and_headers_carry_no_type_version(atlas_stub: AtlasStub) -> None:
    headers = ok(atlas_stub, "GET", "/types/typedefs/headers")
    names = {h["name"] for h in headers}
    assert {"Referenceable", "Asset", "DataSet", "Process", "dataset_process_inputs"} <= names
    assert all(set(h) == {"guid", "name", "category", "serviceType"} for h in headers)
    assert "__internal" in names
    public = ok(atlas_stub, "GET", "/types/typedefs/headers", excludeInternalTypesAndReferences="true")
    assert not any(h["name"].startswith("__") for h in public)
    entity_only = ok(atlas_stub, "GET", "/types/typedefs/headers", type="ENTITY")
    assert {h["category"] for h in entity_only} == {"ENTITY"}


def test_get_typedef_by_name(stub: AtlasStub) -> None:
    assert ok(stub, "GET", "/types/entitydef/name/t_table")["typeVersion"] == "1.0"
    assert ok(stub, "GET", "/types/typedef/name/t_table_columns")["category"] == "RELATIONSHIP"
    refused(stub, "GET", "/types/entitydef/name/t_table_columns", None, 404, "ATLAS-404-00-001")
    refused(stub, "GET", "/types/typedef/name/nope", None, 404, "ATLAS-404-00-001")


def test_post_duplicate_type_is_409_and_nothing_is_created(stub: AtlasStub) -> None:
    body = {"entityDefs": [{"name": "t_new", "superTypes": ["DataSet"]}, MODEL["entityDefs"][0]]}
    err = refused(stub, "POST", "/types/typedefs", body, 409, "ATLAS-409-00-001")
    assert err["errorMessage"] == "Given type t_table already exists"
    assert "t_new" not in stub.typedefs  # one transaction: all or nothing
    twice = {"entityDefs": [{"name": "t_twice", "superTypes": ["DataSet"]}] * 2}
    refused(stub, "POST", "/types/typedefs", twice, 409, "ATLAS-409-00-001")
    ok(stub, "POST", "/types/typedefs", {"entityDefs": [{"name": "t_new", "superTypes": ["DataSet"]}]})


@pytest.mark.parametrize(
    "body",
    [
        {"entityDefs": [{"name": "t_x", "superTypes": ["NoSuchType"]}]},
        {
            "entityDefs": [
                {
                    "name": "t_x",
                    "attributeDefs": [{"name": "a", "typeName": "array<nope>", "isOptional": True}],
                }
            ]
        },
        {
            "relationshipDefs": [
                {
                    "name": "t_rel",
                    "relationshipCategory": "ASSOCIATION",
                    "endDef1": {"type": "t_table", "name": "x", "cardinality": "SINGLE"},
                    "endDef2": {"type": "nope", "name": "y", "cardinality": "SINGLE"},
                }
            ]
        },
    ],
    ids=["supertype", "attribute-type", "relationship-end"],
)
def test_unresolvable_type_references_refused(stub: AtlasStub, body: dict[str, Any]) -> None:
    err = refused(stub, "POST", "/types/typedefs", body, 400, "ATLAS-400-00-029")
    assert "was invalid" in err["errorMessage"]


def test_types_defined_in_the_same_request_resolve(atlas_stub: AtlasStub) -> None:
    body = copy.deepcopy(MODEL)
    body["entityDefs"].append(
        {
            "name": "t_view",
            "superTypes": ["t_table"],
            "attributeDefs": [{"name": "m", "typeName": "map<string,t_db>", "isOptional": True}],
        }
    )
    ok(atlas_stub, "POST", "/types/typedefs", body)


def test_bad_type_name_refused(stub: AtlasStub) -> None:
    refused(stub, "POST", "/types/typedefs", {"entityDefs": [{"name": "9bad-name"}]}, 400, "ATLAS-400-00-019")


def _rel(category: str, end1: dict[str, Any], end2: dict[str, Any]) -> dict[str, Any]:
    return {
        "relationshipDefs": [
            {
                "name": "t_rel",
                "relationshipCategory": category,
                "endDef1": {"type": "t_table", "name": "r1", "cardinality": "SINGLE", **end1},
                "endDef2": {"type": "t_db", "name": "r2", "cardinality": "SINGLE", **end2},
            }
        ]
    }


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (_rel("AGGREGATION", {"isContainer": True}, {"isContainer": True}), "ATLAS-400-00-02D"),
        (_rel("ASSOCIATION", {"isContainer": True}, {}), "ATLAS-400-00-030"),
        (_rel("COMPOSITION", {}, {}), "ATLAS-400-00-031"),
        (_rel("AGGREGATION", {}, {}), "ATLAS-400-00-032"),
        (
            _rel("COMPOSITION", {"isContainer": True, "cardinality": "SET"}, {"cardinality": "SET"}),
            "ATLAS-400-00-033",
        ),
        (_rel("ASSOCIATION", {"cardinality": "LIST"}, {}), "ATLAS-400-00-034"),
    ],
    ids=[
        "double-container",
        "association-container",
        "composition-no-container",
        "aggregation-no-container",
        "composition-set-child",
        "list-end",
    ],
)
def test_relationship_def_shape_rules(stub: AtlasStub, body: dict[str, Any], code: str) -> None:
    refused(stub, "POST", "/types/typedefs", body, 400, code)


def test_good_relationship_def_accepted(stub: AtlasStub) -> None:
    ok(stub, "POST", "/types/typedefs", _rel("AGGREGATION", {"isContainer": True, "cardinality": "SET"}, {}))


def test_redeclared_inherited_attribute_refused(stub: AtlasStub) -> None:
    body = {
        "entityDefs": [
            {
                "name": "t_x",
                "superTypes": ["DataSet"],
                "attributeDefs": [{"name": "description", "typeName": "string", "isOptional": True}],
            }
        ]
    }
    refused(stub, "POST", "/types/typedefs", body, 400, "ATLAS-400-00-09E")


def test_options_must_be_strings(stub: AtlasStub) -> None:
    body = {
        "entityDefs": [{"name": "t_x", "superTypes": ["DataSet"], "options": {"schemaAttributes": ["name"]}}]
    }
    err = refused(stub, "POST", "/types/typedefs", body, 400, None)
    assert "error" in err
    assert "errorCode" not in err
    body["entityDefs"][0]["options"] = {"schemaAttributes": '["name"]'}
    ok(stub, "POST", "/types/typedefs", body)


def _updated(name: str, change: Any) -> dict[str, Any]:
    body = copy.deepcopy(MODEL)
    for key in ("entityDefs", "relationshipDefs"):
        body[key] = [d for d in body[key] if d["name"] == name]
    d = (body["entityDefs"] or body["relationshipDefs"])[0]
    change(d)
    return body


def test_put_of_missing_type_is_404(stub: AtlasStub) -> None:
    body = {"entityDefs": [{"name": "t_missing", "superTypes": ["DataSet"]}]}
    refused(stub, "PUT", "/types/typedefs", body, 404, "ATLAS-404-00-001")


@pytest.mark.parametrize(
    ("name", "change", "code"),
    [
        ("t_table", lambda d: d.update(attributeDefs=[]), "ATLAS-400-00-00D"),
        (
            "t_table",
            lambda d: d["attributeDefs"].append({"name": "n", "typeName": "string"}),
            "ATLAS-400-00-00C",
        ),
        ("t_table", lambda d: d["attributeDefs"][0].update(typeName="long"), "ATLAS-400-00-029"),
        ("t_table", lambda d: d.update(superTypes=[]), "ATLAS-400-00-00E"),
        ("t_table_columns", lambda d: d.update(relationshipCategory="AGGREGATION"), "ATLAS-400-00-039"),
        ("t_table_columns", lambda d: d["endDef1"].update(name="cols"), "ATLAS-400-00-037"),
        ("t_table_columns", lambda d: d["endDef2"].update(name="tbl"), "ATLAS-400-00-038"),
    ],
    ids=[
        "drop-attribute",
        "add-mandatory",
        "change-type",
        "drop-supertype",
        "rel-category",
        "rel-end1",
        "rel-end2",
    ],
)
def test_illegal_updates_refused(stub: AtlasStub, name: str, change: Any, code: str) -> None:
    refused(stub, "PUT", "/types/typedefs", _updated(name, change), 400, code)


def test_legal_update_accepted(stub: AtlasStub) -> None:
    def change(d: dict[str, Any]) -> None:
        d["typeVersion"] = "1.1"
        d["options"]["displayTextAttribute"] = "name"
        d["attributeDefs"].append({"name": "comment", "typeName": "string", "isOptional": True})
        d["attributeDefs"][0]["isIndexable"] = True  # flags other than typeName may change

    ok(stub, "PUT", "/types/typedefs", _updated("t_table", change))
    stored = ok(stub, "GET", "/types/entitydef/name/t_table")
    assert stored["typeVersion"] == "1.1"
    assert [a["name"] for a in stored["attributeDefs"]] == ["createTime", "comment"]


# -- entity upsert (§2.3, §2.4, §9) -------------------------------------------------------------------------


def test_empty_entity_list_refused(stub: AtlasStub) -> None:
    refused(stub, "POST", "/entity/bulk", bulk(), 400, "ATLAS-400-00-01A")


def test_unknown_entity_type_refused(stub: AtlasStub) -> None:
    body = bulk({"typeName": "nope", "attributes": {"qualifiedName": "x", "name": "x"}})
    refused(stub, "POST", "/entity/bulk", body, 400, "ATLAS-400-00-014")
    refused(
        stub,
        "POST",
        "/entity/bulk",
        bulk({**table("x"), "typeName": "t_table_columns"}),
        400,
        "ATLAS-400-00-014",
    )


def test_explicit_null_guid_refused_missing_guid_accepted(stub: AtlasStub) -> None:
    refused(stub, "POST", "/entity/bulk", bulk({**table("db.a@p"), "guid": None}), 400, "ATLAS-400-00-021")
    no_guid = table("db.a@p")
    del no_guid["guid"]
    result = ok(stub, "POST", "/entity/bulk", bulk(no_guid))
    assert len(result["mutatedEntities"]["CREATE"]) == 1


def test_required_attributes(stub: AtlasStub) -> None:
    no_qn = bulk({"typeName": "t_table", "guid": "-1", "attributes": {"name": "a"}})
    err = refused(stub, "POST", "/entity/bulk", no_qn, 404, "ATLAS-404-00-007")
    assert err["errorMessage"].endswith(
        "t_table.qualifiedName: mandatory attribute value missing in type Referenceable"
    )
    no_name = bulk({"typeName": "t_table", "guid": "-1", "attributes": {"qualifiedName": "db.a@p"}})
    refused(stub, "POST", "/entity/bulk", no_name, 404, "ATLAS-404-00-007")
    # own required attribute (t_column.type)
    col = column("db.a.x@p", "-2", ref("-1"))
    del col["attributes"]["type"]
    refused(stub, "POST", "/entity/bulk", bulk(table("db.a@p"), col), 404, "ATLAS-404-00-007")
    ok(stub, "POST", "/entity/bulk", bulk(table("db.a@p"), column("db.a.x@p", "-2", ref("-1"))))


def test_matched_entities_are_validated_in_full(stub: AtlasStub) -> None:
    """§9: re-sending an existing table with only its qualifiedName fails."""
    ok(stub, "POST", "/entity/bulk", bulk(table("db.a@p")))
    only_qn = bulk({"typeName": "t_table", "guid": "-5", "attributes": {"qualifiedName": "db.a@p"}})
    refused(stub, "POST", "/entity/bulk", only_qn, 404, "ATLAS-404-00-007")


def test_bad_attribute_value_refused(stub: AtlasStub) -> None:
    bad = table("db.a@p")
    bad["attributes"]["createTime"] = "abc"
    err = refused(stub, "POST", "/entity/bulk", bulk(bad), 404, "ATLAS-404-00-007")
    assert "invalid value for type date" in err["errorMessage"]
    for good in (1700000000000, "1700000000000", "2024-01-02T03:04:05.678Z"):
        bad["attributes"]["createTime"] = good
        ok(stub, "POST", "/entity/bulk", bulk(bad))


def test_composition_child_needs_its_parent(stub: AtlasStub) -> None:
    """§9: a column without its table is refused (the spark_column.table complaint in §7)."""
    orphan = column("db.a.x@p", "-2", None)
    err = refused(stub, "POST", "/entity/bulk", bulk(orphan), 404, "ATLAS-404-00-007")
    assert "t_column.table: mandatory attribute value missing" in err["errorMessage"]
    ok(stub, "POST", "/entity/bulk", bulk(table("db.a@p"), column("db.a.x@p", "-2", ref("-1"))))
    # once stored with its table, re-sending it without the reference is refused as well (issue 16)
    refused(stub, "POST", "/entity/bulk", bulk(orphan), 404, "ATLAS-404-00-007")


def test_negative_guid_must_be_in_the_payload(stub: AtlasStub) -> None:
    body = bulk(column("db.a.x@p", "-2", ref("-1")))
    err = refused(stub, "POST", "/entity/bulk", body, 404, "ATLAS-404-00-00A")
    assert err["errorMessage"] == "Referenced entity -1 is not found"
    ok(
        stub,
        "POST",
        "/entity/bulk",
        bulk(column("db.a.x@p", "-2", ref("-1")), referred={"-1": table("db.a@p")}),
    )


def test_unique_attribute_reference_only_to_stored_entities(stub: AtlasStub) -> None:
    # by uniqueAttributes the resolver looks at the store only, never at the same payload
    same_payload = bulk(table("db.a@p"), column("db.a.x@p", "-2", uref("t_table", "db.a@p")))
    err = refused(stub, "POST", "/entity/bulk", same_payload, 404, "ATLAS-404-00-00A")
    assert "AtlasObjectId" in err["errorMessage"]
    assert "db.a@p" in err["errorMessage"]
    ok(stub, "POST", "/entity/bulk", bulk(table("db.a@p")))
    ok(stub, "POST", "/entity/bulk", bulk(column("db.a.x@p", "-2", uref("t_table", "db.a@p"))))
    # a supertype in the reference finds subtypes (§2.3)
    ok(stub, "POST", "/entity/bulk", bulk(process("p1", "-3", [uref("DataSet", "db.a@p")], [])))
    refused(
        stub,
        "POST",
        "/entity/bulk",
        bulk(process("p2", "-3", [uref("nope", "db.a@p")], [])),
        400,
        "ATLAS-400-00-014",
    )


def test_invented_real_guid_refused_unless_qualified_name_matches(stub: AtlasStub) -> None:
    invented = "6d0f5c1e-0000-4000-8000-000000000000"
    refused(stub, "POST", "/entity/bulk", bulk(table("db.a@p", guid=invented)), 404, "ATLAS-404-00-00A")
    refused(
        stub, "POST", "/entity/bulk", bulk(column("db.a.x@p", "-2", ref(invented))), 404, "ATLAS-404-00-00A"
    )
    real = ok(stub, "POST", "/entity/bulk", bulk(table("db.a@p")))["guidAssignments"]["-1"]
    result = ok(stub, "POST", "/entity/bulk", bulk(table("db.a@p", guid=invented)))
    assert "CREATE" not in result["mutatedEntities"]
    ok(stub, "POST", "/entity/bulk", bulk(column("db.a.x@p", "-2", ref(real))))


def test_wrong_type_reference_refused(stub: AtlasStub) -> None:
    ok(
        stub,
        "POST",
        "/entity/bulk",
        bulk({"typeName": "t_db", "guid": "-1", "attributes": {"qualifiedName": "db@p", "name": "db"}}),
    )
    body = bulk(process("p1", "-2", [uref("t_db", "db@p")], []))
    refused(stub, "POST", "/entity/bulk", body, 400, "ATLAS-400-00-036")


def test_upsert_by_qualified_name_keeps_guid(stub: AtlasStub) -> None:
    first = ok(stub, "POST", "/entity/bulk", bulk(table("db.a@p")))
    guid = first["guidAssignments"]["-1"]
    assert [h["guid"] for h in first["mutatedEntities"]["CREATE"]] == [guid]
    same = ok(stub, "POST", "/entity/bulk", bulk(table("db.a@p", guid="-9")))
    assert same["mutatedEntities"] == {}  # unchanged: in no op list (§2.4)
    assert same["guidAssignments"] == {"-9": guid}  # matched entities get assignments too
    changed = table("db.a@p", guid="-7")
    changed["attributes"]["description"] = "now described"
    result = ok(stub, "POST", "/entity/bulk", bulk(changed))
    assert [h["guid"] for h in result["mutatedEntities"]["UPDATE"]] == [guid]
    assert len(stub.active_entities("t_table")) == 1


def test_upsert_matches_supertype_unique_attributes_per_type(stub: AtlasStub) -> None:
    """qualifiedName is Referenceable's unique attribute; the index is per type (§2.2)."""
    ok(stub, "POST", "/entity/bulk", bulk(table("same@p")))
    other = {"typeName": "t_process", "guid": "-1", "attributes": {"qualifiedName": "same@p", "name": "p"}}
    result = ok(stub, "POST", "/entity/bulk", bulk(other))
    assert len(result["mutatedEntities"]["CREATE"]) == 1


def test_unreferenced_referred_entities_ignored(stub: AtlasStub) -> None:
    result = ok(
        stub, "POST", "/entity/bulk", bulk(table("db.a@p"), referred={"-5": table("db.b@p", guid="-5")})
    )
    assert list(result["guidAssignments"]) == ["-1"]
    assert stub.find("t_table", "db.b@p") is None


def test_relationship_attribute_in_attributes_is_moved_and_unknown_attributes_ignored(
    stub: AtlasStub,
) -> None:
    col = column("db.a.x@p", "-2", None)
    col["attributes"]["table"] = ref("-1", rel="t_table_columns")
    col["attributes"]["noSuchAttribute"] = 42
    ok(stub, "POST", "/entity/bulk", bulk(table("db.a@p"), col))
    stored = stub.find("t_column", "db.a.x@p")
    assert stored is not None
    assert "noSuchAttribute" not in stored["attributes"]
    assert [e["attributes"]["qualifiedName"] for e in stub.related(stored["guid"], "table")] == ["db.a@p"]


def test_relationship_arrays_replace_stored_sets(stub: AtlasStub) -> None:
    body = bulk(
        table(
            "db.a@p",
            columns=[ref("-2", "t_column", "t_table_columns"), ref("-3", "t_column", "t_table_columns")],
        ),
        column("db.a.x@p", "-2", ref("-1")),
        column("db.a.y@p", "-3", ref("-1")),
    )
    guids = ok(stub, "POST", "/entity/bulk", body)["guidAssignments"]
    # the table now sends only x: y loses its edge and, owned by COMPOSITION, is soft-deleted
    result = ok(
        stub,
        "POST",
        "/entity/bulk",
        bulk(table("db.a@p", columns=[ref(guids["-2"], "t_column", "t_table_columns")])),
    )
    assert [h["guid"] for h in result["mutatedEntities"]["DELETE"]] == [guids["-3"]]
    assert stub.entities[guids["-3"]]["status"] == "DELETED"
    # the inverse end is updated too
    col_y = ok(stub, "GET", f"/entity/guid/{guids['-3']}")["entity"]
    assert col_y["relationshipAttributes"]["table"] is None
    tbl = ok(stub, "GET", f"/entity/guid/{guids['-1']}")["entity"]
    active = [
        r["guid"] for r in tbl["relationshipAttributes"]["columns"] if r["relationshipStatus"] == "ACTIVE"
    ]
    assert active == [guids["-2"]]
    # leaving the key out leaves the stored set alone
    ok(stub, "POST", "/entity/bulk", bulk(table("db.a@p")))
    assert [e["guid"] for e in stub.related(guids["-1"], "columns")] == [guids["-2"]]


def test_aggregation_arrays_replace_without_deleting(stub: AtlasStub) -> None:
    guids = ok(
        stub, "POST", "/entity/bulk", bulk(table("a@p", "-1"), table("b@p", "-2"), table("c@p", "-3"))
    )["guidAssignments"]
    ok(
        stub,
        "POST",
        "/entity/bulk",
        bulk(process("p@p", "-4", [ref(guids["-1"]), ref(guids["-2"])], [ref(guids["-3"])])),
    )
    p = stub.find("t_process", "p@p")
    assert p is not None
    ok(stub, "POST", "/entity/bulk", bulk(process("p@p", "-4", [ref(guids["-1"])], [ref(guids["-3"])])))
    assert [e["attributes"]["qualifiedName"] for e in stub.related(p["guid"], "inputs")] == ["a@p"]
    assert stub.entities[guids["-2"]]["status"] == "ACTIVE"
    assert stub.related(guids["-2"], "inputToProcesses") == []


def test_new_entities_written_before_matched_ones(stub: AtlasStub) -> None:
    """§9: a matched table whose columns array leaves out a column created in the same request kills it."""
    ok(stub, "POST", "/entity/bulk", bulk(table("db.a@p"), column("db.a.x@p", "-2", ref("-1"))))
    body = bulk(table("db.a@p", guid="-1", columns=[]), column("db.a.y@p", "-3", ref("-1")))
    result = ok(stub, "POST", "/entity/bulk", body)
    new_y = result["guidAssignments"]["-3"]
    assert stub.entities[new_y]["status"] == "DELETED"
    assert new_y in [h["guid"] for h in result["mutatedEntities"]["DELETE"]]


def test_relationship_type_is_honoured(stub: AtlasStub) -> None:
    body = bulk(table("db.a@p"), column("db.a.dt@p", "-2", ref("-1"), rel="t_table_partitionkeys"))
    guids = ok(stub, "POST", "/entity/bulk", body)["guidAssignments"]
    assert [e["guid"] for e in stub.related(guids["-1"], "partitionKeys")] == [guids["-2"]]
    assert stub.related(guids["-1"], "columns") == []
    assert stub.warnings == []
    # without relationshipType Atlas picks one arbitrarily: the stub records a warning
    ambiguous = column("db.a.z@p", "-3", None)
    ambiguous["relationshipAttributes"] = {"table": ref(guids["-1"])}
    ok(stub, "POST", "/entity/bulk", bulk(ambiguous))
    assert any("several relationships" in w for w in stub.warnings)


def test_request_is_all_or_nothing(stub: AtlasStub) -> None:
    body = bulk(table("db.a@p"), column("db.a.x@p", "-2", ref("-99")))
    refused(stub, "POST", "/entity/bulk", body, 404, "ATLAS-404-00-00A")
    assert stub.find("t_table", "db.a@p") is None


# -- reads and deletes (§2.5) ------------------------------------------------------------------------------


def test_get_entity_by_unique_attribute(stub: AtlasStub) -> None:
    ok(stub, "POST", "/entity/bulk", bulk(table("db.a@p")))
    found = ok(stub, "GET", "/entity/uniqueAttribute/type/t_table", **{"attr:qualifiedName": "db.a@p"})
    assert found["entity"]["attributes"]["name"] == "db.a@p"
    assert ok(stub, "GET", "/entity/uniqueAttribute/type/DataSet", **{"attr:qualifiedName": "db.a@p"})
    refused(
        stub,
        "GET",
        "/entity/uniqueAttribute/type/t_table",
        None,
        404,
        "ATLAS-404-00-009",
        **{"attr:qualifiedName": "db.b@p"},
    )
    refused(
        stub,
        "GET",
        "/entity/uniqueAttribute/type/t_table",
        None,
        400,
        "ATLAS-400-00-013",
        **{"attr:name": "x"},
    )
    refused(
        stub,
        "GET",
        "/entity/uniqueAttribute/type/nope",
        None,
        400,
        "ATLAS-400-00-014",
        **{"attr:qualifiedName": "x"},
    )


def test_soft_delete(stub: AtlasStub) -> None:
    guids = ok(stub, "POST", "/entity/bulk", bulk(table("db.a@p"), column("db.a.x@p", "-2", ref("-1"))))[
        "guidAssignments"
    ]
    result = ok(stub, "DELETE", f"/entity/guid/{guids['-1']}")
    assert sorted(h["guid"] for h in result["mutatedEntities"]["DELETE"]) == sorted(guids.values())  # cascade
    got = ok(stub, "GET", f"/entity/guid/{guids['-1']}")
    assert got["entity"]["status"] == "DELETED"
    refused(
        stub,
        "GET",
        "/entity/uniqueAttribute/type/t_table",
        None,
        404,
        "ATLAS-404-00-009",
        **{"attr:qualifiedName": "db.a@p"},
    )
    # deleting again or deleting a missing guid is not an error
    assert ok(stub, "DELETE", f"/entity/guid/{guids['-1']}")["mutatedEntities"] == {}
    assert ok(stub, "DELETE", "/entity/guid/no-such")["mutatedEntities"] == {}
    refused(stub, "GET", "/entity/guid/no-such", None, 404, "ATLAS-404-00-005")
    # re-creating makes a new entity with a new guid; the old one stays DELETED
    again = ok(stub, "POST", "/entity/bulk", bulk(table("db.a@p")))["guidAssignments"]["-1"]
    assert again != guids["-1"]
    assert stub.entities[guids["-1"]]["status"] == "DELETED"


# -- lineage (§2.6) ----------------------------------------------------------------------------------------


def _chain(stub: AtlasStub) -> dict[str, str]:
    """a -> p1 -> b -> p2 -> c"""
    g = ok(stub, "POST", "/entity/bulk", bulk(table("a@p", "-1"), table("b@p", "-2"), table("c@p", "-3")))[
        "guidAssignments"
    ]
    g.update(
        ok(stub, "POST", "/entity/bulk", bulk(process("p1", "-4", [ref(g["-1"])], [ref(g["-2"])])))[
            "guidAssignments"
        ]
    )
    g.update(
        ok(stub, "POST", "/entity/bulk", bulk(process("p2", "-5", [ref(g["-2"])], [ref(g["-3"])])))[
            "guidAssignments"
        ]
    )
    return g


def _pairs(stub: AtlasStub, lineage: dict[str, Any]) -> set[tuple[str, str]]:
    name = {g: h["attributes"]["qualifiedName"] for g, h in lineage["guidEntityMap"].items()}
    return {(name[r["fromEntityId"]], name[r["toEntityId"]]) for r in lineage["relations"]}


def test_lineage_walks_inputs_and_outputs(stub: AtlasStub) -> None:
    g = _chain(stub)
    up = ok(stub, "GET", f"/lineage/{g['-3']}", direction="INPUT", depth="3")
    assert up["baseEntityGuid"] == g["-3"]
    assert up["lineageDirection"] == "INPUT"
    assert _pairs(stub, up) == {("a@p", "p1"), ("p1", "b@p"), ("b@p", "p2"), ("p2", "c@p")}
    assert _pairs(stub, ok(stub, "GET", f"/lineage/{g['-3']}", direction="INPUT", depth="1")) == {
        ("b@p", "p2"),
        ("p2", "c@p"),
    }
    assert _pairs(stub, ok(stub, "GET", f"/lineage/{g['-1']}", direction="OUTPUT", depth="0")) == {
        ("a@p", "p1"),
        ("p1", "b@p"),
        ("b@p", "p2"),
        ("p2", "c@p"),
    }
    both = ok(stub, "GET", f"/lineage/{g['-2']}")  # defaults BOTH, 3
    assert _pairs(stub, both) == {("a@p", "p1"), ("p1", "b@p"), ("b@p", "p2"), ("p2", "c@p")}
    header = both["guidEntityMap"][g["-4"]]
    assert header["typeName"] == "t_process"
    assert header["displayText"] == "p1"
    assert header["status"] == "ACTIVE"
    # from a process: one hop first
    assert _pairs(stub, ok(stub, "GET", f"/lineage/{g['-4']}", direction="INPUT", depth="1")) == {
        ("a@p", "p1")
    }
    by_qn = ok(
        stub,
        "GET",
        "/lineage/uniqueAttribute/type/t_table",
        **{"attr:qualifiedName": "c@p", "direction": "INPUT"},
    )
    assert by_qn["baseEntityGuid"] == g["-3"]


def test_lineage_keeps_deleted_edges(stub: AtlasStub) -> None:
    g = _chain(stub)
    ok(stub, "POST", "/entity/bulk", bulk(process("p1", "-4", [ref(g["-1"])], [ref(g["-3"])])))
    lineage = ok(stub, "GET", f"/lineage/{g['-2']}", direction="INPUT")
    assert ("p1", "b@p") in _pairs(stub, lineage)  # §9: the replaced output edge still shows


def test_lineage_errors(stub: AtlasStub) -> None:
    refused(stub, "GET", "/lineage/no-such", None, 404, "ATLAS-404-00-005")
    guid = ok(
        stub,
        "POST",
        "/entity/bulk",
        bulk({"typeName": "t_db", "guid": "-1", "attributes": {"qualifiedName": "d@p", "name": "d"}}),
    )["guidAssignments"]["-1"]
    refused(stub, "GET", f"/lineage/{guid}", None, 404, "ATLAS-404-00-011")
    refused(
        stub,
        "GET",
        "/lineage/uniqueAttribute/type/t_table",
        None,
        404,
        "ATLAS-404-00-009",
        **{"attr:qualifiedName": "x"},
    )


# -- transport behaviour ------------------------------------------------------------------------------------


def test_unknown_path_and_bad_json(atlas_stub: AtlasStub) -> None:
    status, text = call(atlas_stub, "GET", "/no/such/endpoint")
    assert status == 404
    assert "There was an error processing your request" in text
    response = requests.post(atlas_stub.api + "/entity/bulk", data="{not json", timeout=5)
    assert response.status_code == 400
    assert "error" in response.json()


def test_faults_and_received(atlas_stub: AtlasStub) -> None:
    atlas_stub.fail_next(503, times=1)
    atlas_stub.refuse_connections(times=1)
    assert call(atlas_stub, "GET", "/types/typedefs/headers")[0] == 503
    with pytest.raises(requests.ConnectionError):
        call(atlas_stub, "GET", "/types/typedefs/headers")
    assert call(atlas_stub, "GET", "/types/typedefs/headers")[0] == 200
    assert [r.status for r in atlas_stub.received] == [503, None, 200]
    assert atlas_stub.received[0].path == API + "/types/typedefs/headers"
    atlas_stub.require_auth("u", "p")
    status, page = call(atlas_stub, "GET", "/types/typedefs/headers")
    assert status == 401
    assert "<html>" in page


def test_single_entity_route(stub: AtlasStub) -> None:
    """``POST /v2/entity`` takes ``{entity, ...}``; a bulk body there is an empty entity (§5 flaw 4)."""
    result = ok(stub, "POST", "/entity", {"entity": table("db.a@p"), "referredEntities": {}})
    assert len(result["mutatedEntities"]["CREATE"]) == 1
    refused(stub, "POST", "/entity", bulk(table("db.b@p")), 400, "ATLAS-400-00-01A")


def test_browser_like_clients_are_treated_like_the_ui(atlas_stub: AtlasStub) -> None:
    """§2.1: X-Requested-With turns 401 into 419; a Mozilla User-Agent needs X-XSRF-HEADER on writes."""
    atlas_stub.require_auth("u", "p")
    xhr = requests.get(
        atlas_stub.api + "/types/typedefs", headers={"X-Requested-With": "XMLHttpRequest"}, timeout=5
    )
    assert xhr.status_code == 419
    atlas_stub.clear_auth()
    browser = {"User-Agent": "Mozilla/5.0"}
    refused_csrf = requests.post(atlas_stub.api + "/entity/bulk", json=bulk(), headers=browser, timeout=5)
    assert refused_csrf.status_code == 400
    assert "CSRF" in refused_csrf.text
    with_header = requests.post(
        atlas_stub.api + "/entity/bulk", json=bulk(), headers={**browser, "X-XSRF-HEADER": "x"}, timeout=5
    )
    assert with_header.json()["errorCode"] == "ATLAS-400-00-01A"  # past the filter, into the entity rules


def test_one_sided_process_is_in_no_dataset_lineage(stub: AtlasStub) -> None:
    g = ok(stub, "POST", "/entity/bulk", bulk(table("a@p", "-1"), table("b@p", "-2")))["guidAssignments"]
    ok(stub, "POST", "/entity/bulk", bulk(process("p_out_only", "-3", [], [ref(g["-2"])])))
    assert ok(stub, "GET", f"/lineage/{g['-2']}")["relations"] == []
    ok(stub, "POST", "/entity/bulk", bulk(process("p_out_only", "-3", [ref(g["-1"])], [ref(g["-2"])])))
    assert _pairs(stub, ok(stub, "GET", f"/lineage/{g['-2']}")) == {
        ("a@p", "p_out_only"),
        ("p_out_only", "b@p"),
    }


def test_optional_to_required_is_allowed_but_flagged(stub: AtlasStub) -> None:
    """§2.2 lets a PUT change flags other than typeName; the stub accepts it as Atlas does, with a warning."""
    ok(
        stub,
        "PUT",
        "/types/typedefs",
        _updated("t_table", lambda d: d["attributeDefs"][0].update(isOptional=False)),
    )
    assert stub.warnings == ["t_table.createTime: optional attribute made mandatory"]
    # ... and from then on an entity without the attribute is refused
    refused(stub, "POST", "/entity/bulk", bulk(table("db.a@p")), 404, "ATLAS-404-00-007")


# -- stricter rules (issue 16): what Atlas refuses or stores differently ----------------------------------


def test_same_type_and_name_twice_in_one_request_is_one_entity(stub: AtlasStub) -> None:
    first = table("db.t@c", "-1")
    second = table("db.t@c", "-2")
    second["attributes"]["description"] = "later"
    resp = ok(stub, "POST", "/entity/bulk", bulk(first, second))
    assert len(resp["mutatedEntities"]["CREATE"]) == 1
    assert resp["guidAssignments"]["-1"] == resp["guidAssignments"]["-2"]
    (stored,) = [e for e in stub.active_entities("t_table")]
    assert stored["attributes"]["description"] == "later"  # the later one is applied on top


def test_two_entities_sharing_a_placeholder_keep_the_first(stub: AtlasStub) -> None:
    resp = ok(stub, "POST", "/entity/bulk", bulk(table("db.a@c", "-1"), table("db.b@c", "-1")))
    assert len(resp["mutatedEntities"]["CREATE"]) == 1
    assert [e["attributes"]["qualifiedName"] for e in stub.active_entities("t_table")] == ["db.a@c"]


def test_empty_guid_refused(stub: AtlasStub) -> None:
    refused(stub, "POST", "/entity/bulk", bulk(table("db.t@c", "")), 400, "ATLAS-400-00-021")
    assert stub.active_entities("t_table") == []


def test_stored_column_resent_without_its_table_refused(stub: AtlasStub) -> None:
    # §9: the child end of a COMPOSITION is mandatory on the child, for matched entities too.
    ok(stub, "POST", "/entity/bulk", bulk(table("db.t@c"), column("db.t.a@c", "-2", ref("-1"))))
    refused(stub, "POST", "/entity/bulk", bulk(column("db.t.a@c", "-1", None)), 404, "ATLAS-404-00-007")


@pytest.mark.parametrize(
    ("category", "change", "code"),
    [
        ("COMPOSITION", {"endDef1": {"cardinality": "SINGLE"}}, "ATLAS-400-00-037"),
        (
            "AGGREGATION",
            {"endDef1": {"isContainer": False}, "endDef2": {"isContainer": True}},
            "ATLAS-400-00-037",
        ),
        ("ASSOCIATION", {"endDef2": {"cardinality": "SET"}}, "ATLAS-400-00-038"),
    ],
)
def test_put_changing_a_relationship_end_refused(
    stub: AtlasStub, category: str, change: dict[str, Any], code: str
) -> None:
    # AtlasRelationshipDefStoreV2.preUpdateCheck (§2.1 table): an end's type, name, cardinality and
    # isContainer are fixed once created; only the shape-valid changes reach that check.
    rel = {
        "name": "t_db_tables",
        "relationshipCategory": category,
        "endDef1": {
            "type": "t_db",
            "name": "tables",
            "isContainer": category != "ASSOCIATION",
            "cardinality": "SET",
        },
        "endDef2": {"type": "t_table", "name": "db", "isContainer": False, "cardinality": "SINGLE"},
    }
    ok(stub, "POST", "/types/typedefs", {"relationshipDefs": [rel]})
    new = copy.deepcopy(rel)
    for end, fields in change.items():
        new[end] = {**new[end], **fields}
    refused(stub, "PUT", "/types/typedefs", {"relationshipDefs": [new]}, 400, code)


def test_circular_supertypes_refused(stub: AtlasStub) -> None:
    body = {
        "entityDefs": [
            {"name": "t_a", "superTypes": ["t_b"], "attributeDefs": []},
            {"name": "t_b", "superTypes": ["t_a"], "attributeDefs": []},
        ]
    }
    refused(stub, "POST", "/types/typedefs", body, 400, "ATLAS-400-00-002")


def test_reserved_type_name_refused(stub: AtlasStub) -> None:
    body = {"entityDefs": [{"name": "version", "superTypes": ["DataSet"], "attributeDefs": []}]}
    refused(stub, "POST", "/types/typedefs", body, 400, "ATLAS-400-00-102")


def test_int_out_of_range_and_struct_missing_a_field_refused(stub: AtlasStub) -> None:
    model = {
        "structDefs": [
            {"name": "t_span", "attributeDefs": [{"name": "line", "typeName": "int", "isOptional": False}]}
        ],
        "entityDefs": [
            {
                "name": "t_file",
                "superTypes": ["DataSet"],
                "attributeDefs": [
                    {"name": "size", "typeName": "int", "isOptional": True},
                    {"name": "span", "typeName": "t_span", "isOptional": True},
                ],
            }
        ],
    }
    ok(stub, "POST", "/types/typedefs", model)

    def file(**attrs: Any) -> dict[str, Any]:
        return {
            "typeName": "t_file",
            "guid": "-1",
            "attributes": {"qualifiedName": "f", "name": "f", **attrs},
        }

    refused(stub, "POST", "/entity/bulk", bulk(file(size=2**31)), 404, "ATLAS-404-00-007")
    refused(stub, "POST", "/entity/bulk", bulk(file(span={})), 404, "ATLAS-404-00-007")
    ok(stub, "POST", "/entity/bulk", bulk(file(size=2**31 - 1, span={"line": 3})))


def test_entities_whose_relationships_changed_are_updated(stub: AtlasStub) -> None:
    ok(stub, "POST", "/entity/bulk", bulk(table("db.t@c")))
    resp = ok(
        stub,
        "POST",
        "/entity/bulk",
        bulk(column("db.t.a@c", "-1", uref("t_table", "db.t@c"))),
    )
    (table_guid,) = [e["guid"] for e in stub.active_entities("t_table")]
    assert table_guid in {h["guid"] for h in resp["mutatedEntities"].get("UPDATE", [])}


@pytest.mark.parametrize(
    ("bad_ref", "code"),
    [("db.t@c", "ATLAS-400-00-021"), ({"typeName": "t_table"}, "ATLAS-400-00-021")],
)
def test_references_without_an_id_refused(stub: AtlasStub, bad_ref: Any, code: str) -> None:
    ok(stub, "POST", "/entity/bulk", bulk(table("db.t@c")))
    col = column("db.t.a@c", "-1", None)
    col["relationshipAttributes"] = {"table": bad_ref}
    refused(stub, "POST", "/entity/bulk", bulk(col), 400, code)


def test_null_inside_entities_refused(stub: AtlasStub) -> None:
    refused(stub, "POST", "/entity/bulk", bulk(table("db.t@c"), None), 400, "ATLAS-400-00-01A")  # type: ignore[arg-type]
