"""The stub behind a real HTTP server on 127.0.0.1, with faults a network and a sick Atlas produce.

``responses`` only replaces ``requests``'s adapter: it cannot cut a connection halfway, trickle a body or
never answer. This server can. Every request goes through the same :class:`AtlasStub` rules; faults are
queued (optionally for one path) or drawn at random with a fixed seed:

* ``status``: answer with an HTTP status (5xx, 401, 429 + ``Retry-After``...), the stub untouched;
* ``applied_status``: apply the request to the stub, then answer an error status anyway;
* ``reset``: close the connection without answering (RST);
* ``truncate``: apply the request, send the headers and half the body, close;
* ``trickle``: answer one byte every ``interval_s`` seconds;
* ``silent``: read the request and never answer (until the server stops);
* ``delay``: wait ``interval_s`` seconds, then answer as usual (a slow but working Atlas);
* ``hold``: wait until the test sets ``release`` (at most ``max_hold_s``), then answer as usual;
* ``echo_auth``: a proxy error page that quotes the request's Authorization header, or (``echo``) the
  credentials in it encoded one of the ways in :data:`ECHOES`.

Only loopback; every handler ends when the server stops, and no wait is longer than ``max_hold_s``.

With ``webapp`` (a folder, e.g. Atlas's built web UI ``shared/atlas-ui/webapp``) every GET outside ``/api/``
is a static file from there, so a browser opens Atlas's own UI against the stub; ``static_log`` records
each such request with its status.
"""

from __future__ import annotations

import base64
import html
import json
import mimetypes
import random
import re
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlencode, urlsplit

import requests

from atlas_stub.server import AtlasStub

FAULT_KINDS = (
    "status",
    "applied_status",
    "reset",
    "truncate",
    "trickle",
    "silent",
    "delay",
    "hold",
    "echo_auth",
)


def _lower_escapes(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), text)


def _b64(text: str, *, urlsafe: bool = False, padded: bool = True) -> str:
    encoded = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(text.encode()).decode()
    return encoded if padded else encoded.rstrip("=")


ECHOES: dict[str, Callable[[str, str], str]] = {
    "plain": lambda u, p: f"user={u} password={p}",
    "percent": lambda u, p: "password=" + quote(p, safe=""),
    "percent_lower": lambda u, p: "password=" + _lower_escapes(quote(p, safe="")),
    "percent_user_password": lambda u, p: "auth=" + _lower_escapes(quote(f"{u}:{p}", safe="")),
    "form": lambda u, p: urlencode({"j_username": u, "j_password": p}),
    "form_lower": lambda u, p: _lower_escapes(urlencode({"j_username": u, "j_password": p})),
    "base64_user_password": lambda u, p: "token=" + _b64(f"{u}:{p}"),
    "base64_user_password_unpadded": lambda u, p: "token=" + _b64(f"{u}:{p}", padded=False),
    "base64_user_password_urlsafe": lambda u, p: "token=" + _b64(f"{u}:{p}", urlsafe=True, padded=False),
    "base64_password": lambda u, p: "secret=" + _b64(p),
    "base64_password_unpadded": lambda u, p: "secret=" + _b64(p, padded=False),
    "base64_password_urlsafe": lambda u, p: "secret=" + _b64(p, urlsafe=True),
    "hex_password": lambda u, p: "secret=" + p.encode().hex(),
    "hex_password_upper": lambda u, p: "secret=0x" + p.encode().hex().upper(),
    "json": lambda u, p: json.dumps({"password": p}).replace("/", "\\/"),
    "json_ascii": lambda u, p: json.dumps({"password": p}, ensure_ascii=True).replace(" ", "\\u0020"),
    "html": lambda u, p: f"<td>{html.escape(p)}</td>",
}
"""Ways a server or a proxy echoes a request's credentials back: name -> (user, password) -> text."""


@dataclass
class Fault:
    kind: str
    status: int = 503
    headers: dict[str, str] = field(default_factory=dict)
    body: str = "Service Unavailable"
    path_contains: str | None = None
    method: str | None = None
    after: int = 0
    """Let this many matching requests through first (a fault midway)."""
    times: int | None = 1
    """How many requests it hits; None: every matching request until cleared."""
    interval_s: float = 0.5
    echo: str | None = None
    """``echo_auth``: echo the credentials encoded this way (a key of :data:`ECHOES`), not the headers."""


@dataclass
class _Request:
    """What the stub's callback reads of a ``requests.PreparedRequest``."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None


class FaultServer:
    """``with FaultServer() as srv:`` -> ``srv.url`` is an Atlas at ``http://127.0.0.1:<port>``."""

    def __init__(
        self,
        stub: AtlasStub | None = None,
        *,
        tls: ssl.SSLContext | None = None,
        max_hold_s: float = 20.0,
        webapp: Path | None = None,
    ) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self._server.fault_server = self  # type: ignore[attr-defined]
        self.port = self._server.server_address[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.stub = stub if stub is not None else AtlasStub(self.url)
        self.faults: list[Fault] = []
        self.random_rate = 0.0
        self.random_kinds: tuple[str, ...] = ("status", "applied_status", "reset", "truncate")
        self._rng = random.Random(0)
        self.max_hold_s = max_hold_s
        self.stopping = threading.Event()
        self.release = threading.Event()
        """Lets ``hold`` faults answer."""
        self.lock = threading.Lock()
        self.stub_lock = threading.Lock()
        self.log: list[tuple[str, str, str]] = []
        """(method, path, outcome) per request: ``ok``, or the fault kind."""
        self.webapp = webapp.resolve() if webapp is not None else None
        self.static_log: list[tuple[str, int]] = []
        """(path, status) per static file asked for (``webapp``)."""
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})
        self._thread.daemon = True

    def reset_atlas(self) -> AtlasStub:
        """An emptied Atlas at the same address (a rebuilt or restored server)."""
        with self.lock:
            self.stub = AtlasStub(self.url)
        return self.stub

    def add(self, fault: Fault) -> None:
        with self.lock:
            self.faults.append(fault)

    def random_faults(self, rate: float, *, seed: int = 0, kinds: tuple[str, ...] | None = None) -> None:
        with self.lock:
            self.random_rate = rate
            self._rng = random.Random(seed)
            if kinds is not None:
                self.random_kinds = kinds

    def clear(self) -> None:
        with self.lock:
            self.faults.clear()
            self.random_rate = 0.0

    def take_fault(self, method: str, path: str) -> Fault | None:
        with self.lock:
            for f in self.faults:
                if (f.path_contains is None or f.path_contains in path) and f.method in (None, method):
                    if f.after > 0:
                        f.after -= 1
                        continue
                    if f.times is not None:
                        f.times -= 1
                        if f.times <= 0:
                            self.faults.remove(f)
                    return f
            if self.random_rate and self._rng.random() < self.random_rate:
                kind = self._rng.choice(self.random_kinds)
                return Fault(kind, status=self._rng.choice((500, 502, 503, 504)))
        return None

    def start(self) -> FaultServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "AtlasStub/1"

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _serve(self) -> None:
        srv: FaultServer = self.server.fault_server  # type: ignore[attr-defined]
        if srv.webapp is not None and self.command == "GET" and not self.path.startswith("/api/"):
            self._static(srv, srv.webapp)
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        host = srv.url
        req = _Request(self.command, host + self.path, dict(self.headers.items()), body)
        path = self.path.split("?", 1)[0]
        fault = srv.take_fault(self.command, path)
        kind = fault.kind if fault else "ok"
        with srv.lock:
            srv.log.append((self.command, path, kind))
        if fault is not None and fault.kind == "reset":
            self._reset()
            return
        if fault is not None and fault.kind == "silent":
            srv.stopping.wait(srv.max_hold_s)
            self._reset()
            return
        if (
            fault is not None
            and fault.kind == "delay"
            and srv.stopping.wait(min(fault.interval_s, srv.max_hold_s))
        ):
            self._reset()
            return
        if fault is not None and fault.kind == "hold":
            srv.release.wait(srv.max_hold_s)
        if fault is not None and fault.kind == "status":
            self._send(fault.status, {"Content-Type": "text/plain", **fault.headers}, fault.body.encode())
            return
        if fault is not None and fault.kind == "echo_auth" and fault.echo is not None:
            user, _, password = (
                base64.b64decode(self.headers.get("Authorization", "Basic ").split(" ", 1)[1])
                .decode()
                .partition(":")
            )
            echoed = ECHOES[fault.echo](user, password)
            page = json.dumps(
                {"errorCode": f"ATLAS-{fault.status}-00-001", "errorMessage": f"proxy refused {echoed}"}
            )
            self._send(fault.status, {"Content-Type": "application/json"}, f"{page}\n{echoed}\n".encode())
            return
        if fault is not None and fault.kind == "echo_auth":
            page = f"Proxy error 502 for {self.command} {self.path}. Request headers: "
            page += "; ".join(f"{k}: {v}" for k, v in self.headers.items())
            self._send(502, {"Content-Type": "text/plain"}, page.encode())
            return
        try:
            with srv.stub_lock:
                status, headers, text = srv.stub._wrap(self.command)(req)
        except requests.ConnectionError:
            self._reset()
            return
        payload = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        if fault is not None and fault.kind == "applied_status":
            self._send(fault.status, {"Content-Type": "text/plain"}, fault.body.encode())
            return
        if fault is not None and fault.kind == "truncate":
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(payload) + 10))
            self.end_headers()
            self.wfile.write(payload[: len(payload) // 2])
            self.wfile.flush()
            self._reset()
            return
        if fault is not None and fault.kind == "trickle":
            head = f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\n"
            head += f"Content-Length: {len(payload)}\r\n\r\n"
            deadline = time.monotonic() + srv.max_hold_s
            for byte in head.encode() + payload:
                if srv.stopping.wait(fault.interval_s) or time.monotonic() > deadline:
                    break
                try:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                except OSError:
                    break
            self._reset()
            return
        self._send(status, headers, payload)

    def _static(self, srv: FaultServer, root: Path) -> None:
        """A file of ``root`` (``/`` is ``index.html``); 404 for anything else, nothing outside ``root``."""
        rel = unquote(urlsplit(self.path).path).lstrip("/") or "index.html"
        target = (root / rel).resolve()
        if target.is_relative_to(root) and target.is_file():
            ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
            status, headers, payload = 200, {"Content-Type": ctype}, target.read_bytes()
        else:
            status, headers, payload = 404, {"Content-Type": "text/plain"}, b"Not Found"
        with srv.lock:
            srv.static_log.append((urlsplit(self.path).path, status))
        self._send(status, headers, payload)

    def _send(self, status: int, headers: dict[str, str], payload: bytes) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _reset(self) -> None:
        """Close with RST (SO_LINGER 0), as a crashed server or a proxy timeout does."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    do_GET = do_POST = do_PUT = do_DELETE = _serve


@contextmanager
def fault_server(**kwargs: Any) -> Iterator[FaultServer]:
    with FaultServer(**kwargs) as srv:
        yield srv
