"""The stub itself: state, routes, faults, auth; the Atlas rules live in the mixins."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import requests
import responses

from atlas_stub.common import BASE_MODEL, DEFAULT_BASE_URL, AtlasHTTPError, Received, _Fault, _RelAttr
from atlas_stub.entities import EntityStore
from atlas_stub.lineage import LineageGraph
from atlas_stub.registry import TypeRegistry
from atlas_stub.ui import AtlasUI


class AtlasStub(TypeRegistry, EntityStore, LineageGraph, AtlasUI):
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

    def requests_to(self, method: str, path_suffix: str) -> list[Received]:
        return [r for r in self.received if r.method == method and r.path.endswith(path_suffix)]

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
            ("DELETE", r"/entity/uniqueAttribute/type/([^/?]+)/?", self._delete_entity_by_attr),
            ("GET", r"/entity/bulk/uniqueAttribute/type/([^/?]+)/?", self._get_entities_by_attrs),
            ("GET", r"/lineage/uniqueAttribute/type/([^/?]+)/?", self._get_lineage_by_attr),
            ("GET", r"/lineage/([^/?]+)/?", self._get_lineage),
        ]
        # What Atlas's web UI asks besides (atlas_stub.ui), so an entity page works against the stub; first,
        # where they are more specific than the REST routes (an entity's header, the root types).
        ui: list[tuple[str, str, Any]] = [
            ("GET", r"/types/(entitydef|classificationdef)/name/_ALL_(ENTITY|CLASSIFICATION)_TYPES/?",
             self._root_typedef),
            ("GET", r"/entity/guid/([^/?]+)/header/?", self._get_entity_header),
            ("GET", r"/entity/([^/?]+)/audit/?", self._empty_list),
            ("GET", r"/search/relationship/?", self._search_relationship),
            ("GET", r"/search/basic/?", self._search_basic),
            ("POST", r"/search/basic/?", self._search_basic),
            ("GET", r"/search/saved/?", self._empty_list),
            ("GET", r"/glossary/?", self._empty_list),
        ]  # fmt: skip
        admin: list[tuple[str, str, Any]] = [
            ("GET", r"/session/?", self._admin_session),
            ("GET", r"/version/?", self._admin_version),
            ("GET", r"/status/?", self._admin_status),
            ("GET", r"/metrics/?", self._admin_metrics),
            ("GET", r"/tasks/?", self._admin_empty_list),
            ("GET", r"/audits/?", self._admin_empty_list),
        ]
        # (method, regex over the local path, handler, prefix cut before the handler sees the path)
        self._routes = [
            *[(m, re.compile(r"/api/atlas/v2" + pat + "$"), h, "/api/atlas/v2") for m, pat, h in ui + routes],
            *[(m, re.compile(r"/api/atlas/admin" + pat + "$"), h, "/api/atlas") for m, pat, h in admin],
        ]
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
        for m, regex, handler, prefix in self._routes:
            if m == method and regex.match(local):
                return handler, local[len(prefix) :]
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

    def _next_guid(self) -> str:
        self._counter += 1
        return f"000a71a5-0000-4000-8000-{self._counter:012x}"  # deterministic, uuid-shaped

    def _tick(self) -> int:
        self.clock_ms += 1
        return self.clock_ms
