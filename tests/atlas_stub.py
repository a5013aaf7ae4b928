"""A stateful Apache Atlas REST stub on ``responses``, enforcing the server rules our bridge must meet.

Every rule cites the section of ``shared/reference/atlas.md`` it comes from. The stub is deliberately
strict where Atlas is strict (typedef create/update, entity upsert, reference resolution, required
attributes, relationship arrays replacing stored sets) so a payload it accepts is one Atlas accepts.

Use::

    with AtlasStub() as stub:            # base URL http://atlas.test:21000
        client = AtlasClient(stub.base_url, backoff=0)
        ...
        stub.fail_next(503, times=2)      # faults for retry tests
        stub.refuse_connections(times=1)  # requests.ConnectionError, like a refused connect

``stub.received`` lists every request (method, path, params, parsed JSON body, answered status).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import requests
import responses

DEFAULT_BASE_URL = "http://atlas.test:21000"
BASE_MODEL = Path(__file__).parent / "data" / "atlas" / "0010-base_model.json"

PRIMITIVES = {
    "boolean",
    "byte",
    "short",
    "int",
    "long",
    "float",
    "double",
    "biginteger",
    "bigdecimal",
    "string",
    "date",
}
_TYPE_NAME_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9_ ]*$")  # §2.1 ATLAS-400-00-019
_DEF_KEYS = (
    ("enumDefs", "ENUM"),
    ("structDefs", "STRUCT"),
    ("classificationDefs", "CLASSIFICATION"),
    ("entityDefs", "ENTITY"),
    ("relationshipDefs", "RELATIONSHIP"),
    ("businessMetadataDefs", "BUSINESS_METADATA"),
)
_CATEGORY_KEY = {cat: key for key, cat in _DEF_KEYS}
_LINEAGE_RELATIONSHIPS = {"dataset_process_inputs": "inputs", "process_dataset_outputs": "outputs"}
_HEADER_ATTRS = ("qualifiedName", "name", "description", "owner", "createTime")  # §2.6


class AtlasHTTPError(Exception):
    """Raised inside the stub to answer with an Atlas error body (§2.1)."""

    def __init__(self, status: int, code: str | None, message: str, *, raw: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.raw = raw

    def body(self) -> str:
        if self.raw is not None:
            return self.raw if isinstance(self.raw, str) else json.dumps(self.raw)
        return json.dumps({"errorCode": self.code, "errorMessage": self.message})


@dataclass
class Received:
    """One request as the stub saw it."""

    method: str
    path: str
    params: dict[str, list[str]]
    body: Any
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class _Fault:
    status: int | None  # None = connection refused
    headers: dict[str, str]
    body: str
    times: int | None  # None = until cleared
    path_contains: str | None


@dataclass
class _RelAttr:
    """An attribute an entity type gets from one end of a relationshipDef."""

    relationship: str
    end: int  # 1 or 2: the end this attribute sits on
    name: str
    cardinality: str
    other_type: str
    is_container: bool
    category: str
    is_legacy: bool


class AtlasStub:
    """In-memory Atlas: typedef store, entity store with relationships, lineage, fault injection."""

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        load_base_model: bool = True,
        mock: responses.RequestsMock | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api = self.base_url + "/api/atlas/v2"
        self._own_mock = mock is None
        self.mock = mock if mock is not None else responses.RequestsMock(assert_all_requests_are_fired=False)
        self.received: list[Received] = []
        self.warnings: list[str] = []
        self.typedefs: dict[str, dict[str, Any]] = {}
        self.entities: dict[str, dict[str, Any]] = {}
        self.edges: dict[str, dict[str, Any]] = {}
        self._edges_by_entity: dict[str, set[str]] = {}
        self._faults: list[_Fault] = []
        self._auth: tuple[str, str] | None = None
        self._counter = 0
        self._rel_cache: dict[str, dict[str, list[_RelAttr]]] = {}
        self._chain_cache: dict[str, frozenset[str]] = {}
        self._attr_cache: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {}
        self._qn_index: dict[str, list[str]] = {}
        self.clock_ms = 1_700_000_000_000
        if load_base_model:
            self._store_typedefs(json.loads(BASE_MODEL.read_text(encoding="utf-8")))
        self._register_routes()

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> AtlasStub:
        if self._own_mock:
            self.mock.start()
        return self

    def stop(self) -> None:
        if self._own_mock:
            self.mock.stop()
            self.mock.reset()

    def __enter__(self) -> AtlasStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- test helpers ------------------------------------------------------------------------------

    def fail_next(
        self,
        status: int = 503,
        times: int | None = 1,
        *,
        headers: dict[str, str] | None = None,
        body: str | None = None,
        path_contains: str | None = None,
    ) -> None:
        """Answer the next ``times`` requests (None = until :meth:`clear_faults`) with ``status``."""
        text = body if body is not None else "There was an error processing your request."
        self._faults.append(_Fault(status, headers or {}, text, times, path_contains))

    def refuse_connections(self, times: int | None = None, *, path_contains: str | None = None) -> None:
        """Make the next ``times`` requests (None = all until cleared) fail as a refused connection."""
        self._faults.append(_Fault(None, {}, "", times, path_contains))

    def clear_faults(self) -> None:
        self._faults.clear()

    def require_auth(self, username: str, password: str) -> None:
        """Answer 401 (servlet HTML page, §2.1) unless basic auth with these credentials is sent."""
        self._auth = (username, password)

    def clear_auth(self) -> None:
        """Accept anonymous requests again (the default)."""
        self._auth = None

    def load_typedefs(self, typesdef: dict[str, Any]) -> None:
        """Preload typedefs without going through the REST rules (e.g. more of Atlas's own models)."""
        self._store_typedefs(typesdef)

    def requests_to(self, method: str, path_suffix: str) -> list[Received]:
        return [r for r in self.received if r.method == method and r.path.endswith(path_suffix)]

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

    # -- routes ------------------------------------------------------------------------------------

    def _register_routes(self) -> None:
        routes: list[tuple[str, str, Any]] = [
            ("GET", r"/types/typedefs/headers/?", self._get_headers),
            ("GET", r"/types/typedefs/?", self._get_typedefs),
            ("POST", r"/types/typedefs/?", self._post_typedefs),
            ("PUT", r"/types/typedefs/?", self._put_typedefs),
            (
                "GET",
                r"/types/(typedef|entitydef|relationshipdef|enumdef|structdef|classificationdef)/name/([^/?]+)/?",
                self._get_typedef_by_name,
            ),
            ("POST", r"/entity/bulk/?", self._post_bulk),
            ("POST", r"/entity/?", self._post_entity),
            ("GET", r"/entity/guid/([^/?]+)/?", self._get_entity_by_guid),
            ("DELETE", r"/entity/guid/([^/?]+)/?", self._delete_entity),
            ("GET", r"/entity/uniqueAttribute/type/([^/?]+)/?", self._get_entity_by_attr),
            ("GET", r"/lineage/uniqueAttribute/type/([^/?]+)/?", self._get_lineage_by_attr),
            ("GET", r"/lineage/([^/?]+)/?", self._get_lineage),
        ]
        self._routes = [(m, re.compile(r"/api/atlas/v2" + pat + "$"), h) for m, pat, h in routes]
        # One callback per method over the whole base URL: responses drops the first of several matching
        # registrations, so routes must not overlap there; dispatch happens in _dispatch.
        for method in ("GET", "POST", "PUT", "DELETE"):
            self.mock.add_callback(
                method,
                re.compile(re.escape(self.base_url) + r"(/[^?]*)?(\?.*)?$"),
                callback=self._wrap(method),
            )

    def _route(self, method: str, path: str) -> tuple[Any, str]:
        base_path = urlsplit(self.base_url).path.rstrip("/")
        local = path[len(base_path) :] if path.startswith(base_path) else path
        for m, regex, handler in self._routes:
            if m == method and regex.match(local):
                return handler, local[len("/api/atlas/v2") :]
        return None, local

    def _wrap(self, method: str) -> Any:
        def callback(request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
            url = urlsplit(str(request.url))
            path = unquote(url.path)
            params = parse_qs(url.query, keep_blank_values=True)
            raw = request.body.decode("utf-8") if isinstance(request.body, bytes) else request.body
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw
            rec = Received(str(request.method), path, params, body, headers=dict(request.headers))
            self.received.append(rec)
            fault = self._take_fault(path)
            if fault is not None:
                if fault.status is None:
                    rec.status = None
                    raise requests.ConnectionError("Connection refused (stub)")
                rec.status = fault.status
                return fault.status, {"Content-Type": "text/plain", **fault.headers}, fault.body
            if self._auth is not None and not self._authorised(request):
                # §2.1: the servlet's error page, not JSON; 419 instead when the client looks like the UI.
                status = 419 if request.headers.get("X-Requested-With") == "XMLHttpRequest" else 401
                rec.status = status
                page = f"<html><body><h2>HTTP ERROR {status}</h2><p>Unauthorized</p></body></html>"
                return status, {"Content-Type": "text/html", "WWW-Authenticate": 'Basic realm="atlas"'}, page
            agent = request.headers.get("User-Agent", "")
            if (
                method in ("POST", "PUT", "DELETE")
                and re.match(r"^(Mozilla|Opera|Chrome)", agent)
                and "X-XSRF-HEADER" not in request.headers
            ):
                # §2.1: a browser-like User-Agent makes the CSRF filter demand X-XSRF-HEADER on writes.
                rec.status = 400
                return (
                    400,
                    {"Content-Type": "text/plain"},
                    "Missing Required Header for CSRF Vulnerability Protection",
                )
            handler, sub = self._route(method, path)
            try:
                if handler is None:
                    raise AtlasHTTPError(404, None, "", raw="There was an error processing your request.")
                if isinstance(body, str):
                    # §2.1: unparsable JSON is Jackson's problem: 400 {"error": ...}
                    raise AtlasHTTPError(400, None, "", raw={"error": "Unexpected character: not JSON"})
                result = handler(sub, params, body)
                status, payload = result if isinstance(result, tuple) else (200, result)
            except AtlasHTTPError as e:
                rec.status = e.status
                ctype = "application/json" if e.raw is None or isinstance(e.raw, dict) else "text/plain"
                return e.status, {"Content-Type": ctype}, e.body()
            rec.status = status
            return status, {"Content-Type": "application/json"}, json.dumps(payload)

        return callback

    def _take_fault(self, path: str) -> _Fault | None:
        for fault in self._faults:
            if fault.path_contains is None or fault.path_contains in path:
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                return fault
        return None

    def _authorised(self, request: requests.PreparedRequest) -> bool:
        import base64

        assert self._auth is not None
        header = request.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:]).decode("utf-8").partition(":")
        except ValueError:
            return False
        return (user, password) == self._auth

    # -- type system helpers -----------------------------------------------------------------------

    def _next_guid(self) -> str:
        self._counter += 1
        return f"000a71a5-0000-4000-8000-{self._counter:012x}"  # deterministic, uuid-shaped

    def _tick(self) -> int:
        self.clock_ms += 1
        return self.clock_ms

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

    def _index_qn(self, guid: str, old: Any, new: Any) -> None:
        if isinstance(old, str) and guid in self._qn_index.get(old, ()):
            self._qn_index[old].remove(guid)
        if isinstance(new, str):
            self._qn_index.setdefault(new, []).append(guid)

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

    # -- typedef endpoints (§2.2) ------------------------------------------------------------------

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
            out[_CATEGORY_KEY[d["category"]]].append(_public_def(d))
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
        return _public_def(d)

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
            for i, code in ((1, "ATLAS-400-00-037"), (2, "ATLAS-400-00-038")):
                oe, ne = old.get(f"endDef{i}") or {}, new.get(f"endDef{i}") or {}
                if (oe.get("type"), oe.get("name")) != (ne.get("type"), ne.get("name")):
                    raise AtlasHTTPError(400, code, f"invalid update for relationshipDef {name}: end{i}")

    # -- entity endpoints (§2.3, §2.4, §2.5, §9) ---------------------------------------------------

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
            if not isinstance(raw, dict):
                raise AtlasHTTPError(400, None, "", raw={"error": "Cannot deserialize AtlasEntity"})
            if "guid" in raw and raw["guid"] is None:
                # §2.3: an explicit null guid is refused.
                raise AtlasHTTPError(400, "ATLAS-400-00-021", "Given instance guid null is invalid/not found")
            guid = raw.get("guid")
            if guid is None:
                self._counter += 1
                guid = f"-{self._counter}"
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
            children = [o for o in options if o.category == "COMPOSITION" and not o.is_container]
            if not children or rel_values.get(name) is not None:
                continue
            if not any(self._has_edge(item["match"], o) for o in children):
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
        if not isinstance(ref, dict):
            raise _e007(
                f"{owner_type}.{attr}={ref}: invalid value for type {opt.other_type}",
            )
        guid = ref.get("guid")
        ref_type = ref.get("typeName")
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
            return (isinstance(value, int) and not isinstance(value, bool)) or (
                isinstance(value, str) and re.fullmatch(r"-?\d+", value) is not None
            )
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
            return isinstance(value, dict)
        return True

    def _apply(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        """Write a validated plan: new entities first, then matched ones (§9), then relationships."""
        now = self._tick()
        assignments: dict[str, str] = {}
        created: list[str] = []
        updated: list[str] = []
        deleted: list[str] = []
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
                changed |= self._set_relationship(guid, opt, targets, deleted)
            if item["match"] is not None and changed and guid not in deleted:
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

    def _set_relationship(self, guid: str, opt: _RelAttr, targets: list[str], deleted: list[str]) -> bool:
        """§2.4: the array (or single ref) sent replaces the stored one; dropped owned children die."""
        current = self._edges_of(guid, opt, active_only=True)
        current_targets = {t for t, _e in current}
        wanted = list(dict.fromkeys(targets))
        changed = False
        for target, edge_guid in current:
            if target not in wanted:
                self.edges[edge_guid]["status"] = "DELETED"
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
                for _o, old_edge in self._edges_of(target, other_opt, active_only=True):
                    self.edges[old_edge]["status"] = "DELETED"
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

    def _delete_entity(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        guid = path.split("/")[3]
        deleted: list[str] = []
        # §2.5: deleting a missing or already-deleted entity is not an error.
        if guid in self.entities:
            self._soft_delete(guid, deleted)
        return {"mutatedEntities": {"DELETE": [self._header(g) for g in deleted]} if deleted else {}}

    # -- lineage (§2.6) ----------------------------------------------------------------------------

    def _get_lineage_by_attr(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        type_name = path.split("/")[4]
        stored = self._lookup_unique(type_name, params)
        return self._lineage(stored["guid"], params)

    def _get_lineage(self, path: str, params: dict[str, list[str]], body: Any) -> Any:
        guid = path.split("/")[2]
        if guid not in self.entities:
            raise AtlasHTTPError(404, "ATLAS-404-00-005", f"Given instance guid {guid} is invalid/not found")
        return self._lineage(guid, params)

    def _lineage(self, guid: str, params: dict[str, list[str]]) -> dict[str, Any]:
        direction = (params.get("direction") or ["BOTH"])[0]
        if direction not in ("INPUT", "OUTPUT", "BOTH"):
            raise AtlasHTTPError(404, None, "", raw="There was an error processing your request.")
        try:
            depth = int((params.get("depth") or ["3"])[0])
        except ValueError as e:
            raise AtlasHTTPError(404, None, "", raw="There was an error processing your request.") from e
        ent = self.entities[guid]
        is_process = self._is_a(ent["typeName"], "Process")
        if not is_process and not self._is_a(ent["typeName"], "DataSet"):
            raise AtlasHTTPError(
                404, "ATLAS-404-00-011", f"{guid}: lineage not supported for type {ent['typeName']}"
            )
        relations: dict[str, dict[str, str]] = {}
        nodes: set[str] = {guid}
        for d in ["INPUT", "OUTPUT"] if direction == "BOTH" else [direction]:
            if is_process:
                self._walk_process(guid, d, depth, relations, nodes, set())
            else:
                self._walk_dataset(guid, d, depth, relations, nodes, set())
        return {
            "baseEntityGuid": guid,
            "lineageDirection": direction,
            "lineageDepth": depth,
            "guidEntityMap": {g: self._header(g) for g in sorted(nodes)},
            "relations": list(relations.values()),
            "relationsOnDemand": {},
        }

    def _lineage_edges(self, guid: str, label: str, end: int) -> list[tuple[str, str]]:
        """(other guid, edge guid) of lineage edges ``label`` (inputs/outputs) where ``guid`` sits on ``end``.

        The traversal does not filter edge or vertex state (§2.6, §9).
        """
        out = []
        for edge_guid in sorted(self._edges_by_entity.get(guid, ())):
            edge = self.edges[edge_guid]
            if _LINEAGE_RELATIONSHIPS.get(edge["typeName"]) == label and edge[f"end{end}"] == guid:
                out.append((edge[f"end{3 - end}"], edge_guid))
        return out

    def _walk_dataset(
        self,
        guid: str,
        direction: str,
        depth: int,
        relations: dict[str, dict[str, str]],
        nodes: set[str],
        seen: set[str],
    ) -> None:
        if guid in seen:
            return
        seen.add(guid)
        # INPUT: processes that output this dataset (end1 = process, end2 = dataset).
        label = "outputs" if direction == "INPUT" else "inputs"
        onward = "inputs" if direction == "INPUT" else "outputs"
        for process, edge_guid in self._lineage_edges(guid, label, 2):
            if not self._lineage_edges(process, onward, 1):
                continue  # §9: a process with no inputs (or no outputs) appears in no dataset's lineage
            nodes.add(process)
            relations[edge_guid] = (
                _relation(process, guid, edge_guid)
                if direction == "INPUT"
                else _relation(guid, process, edge_guid)
            )
            self._walk_process(process, direction, depth, relations, nodes, seen)

    def _walk_process(
        self,
        guid: str,
        direction: str,
        depth: int,
        relations: dict[str, dict[str, str]],
        nodes: set[str],
        seen: set[str],
    ) -> None:
        if guid in seen:
            return
        seen.add(guid)
        label = "inputs" if direction == "INPUT" else "outputs"
        for dataset, edge_guid in self._lineage_edges(guid, label, 1):
            nodes.add(dataset)
            relations[edge_guid] = (
                _relation(dataset, guid, edge_guid)
                if direction == "INPUT"
                else _relation(guid, dataset, edge_guid)
            )
            if depth != 1:
                self._walk_dataset(dataset, direction, depth - 1 if depth > 0 else 0, relations, nodes, seen)


def _kv(mapping: dict[str, Any], sep: str) -> str:
    return ", ".join(f"{k}{sep}{v}" for k, v in sorted(mapping.items()))


def _e007(detail: str) -> AtlasHTTPError:
    """§2.1: missing required attribute or bad value: 404 (not 400) ATLAS-404-00-007."""
    return AtlasHTTPError(
        404, "ATLAS-404-00-007", f"Invalid instance creation/updation parameters passed : {detail}"
    )


def _relation(src: str, dst: str, edge_guid: str) -> dict[str, str]:
    return {"fromEntityId": src, "toEntityId": dst, "relationshipId": edge_guid}


def _public_def(d: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(d)


_MISSING = object()


def iter_typedefs(typesdef: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(category, def) over an AtlasTypesDef."""
    for key, category in _DEF_KEYS:
        for d in typesdef.get(key) or []:
            yield category, d


def names(defs: Iterable[dict[str, Any]]) -> list[str]:
    return sorted(d["name"] for d in defs)
