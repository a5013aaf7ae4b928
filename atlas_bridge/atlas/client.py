"""A small, strict REST client for the handful of Atlas v2 endpoints the bridge needs.

Built on ``requests`` and the official ``apache-atlas`` package, going around the latter where it falls
short (see the reference, §5): it sets no timeout, never retries, returns ``None`` on 503, keeps no status
code or ``errorCode`` in its exceptions, and drops a base URL's path prefix (``urljoin``). What we take
from ``apache-atlas``:

* the endpoint paths (``EntityClient`` / ``TypeDefClient`` / ``LineageClient`` constants), so the URLs are
  the ones Atlas's own Python client uses;
* its session, when a caller already holds an ``apache_atlas`` client (:meth:`AtlasClient.from_apache_atlas`
  keeps its auth and TLS settings and mounts our retrying adapter on it);
* its full API for anything we do not wrap: :attr:`AtlasClient.apache_atlas` is an ``apache_atlas``
  client on *our* session (retries, timeouts, auth) with the path prefix kept.

Everything this module raises derives from :class:`atlas_bridge.errors.AtlasError` and carries
``status_code``, Atlas's ``error_code``, the ``url`` (never with credentials) and a short body excerpt.
Passwords never reach a log line or an error message.
"""

from __future__ import annotations

import base64
import contextlib
import email.utils
import functools
import html
import json
import logging
import re
import socket
import ssl
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

import requests
from apache_atlas.client.entity import EntityClient
from apache_atlas.client.lineage import LineageClient
from apache_atlas.client.typedef import TypeDefClient
from pydantic import SecretStr
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import InsecureRequestWarning
from urllib3.util.retry import Retry

from atlas_bridge import __version__
from atlas_bridge.atlas.encoded import encode_body, entity_count
from atlas_bridge.config import split_userinfo
from atlas_bridge.errors import (
    AtlasAuthError,
    AtlasConflictError,
    AtlasError,
    AtlasNotFoundError,
    AtlasUnavailableError,
    ConfigError,
)

if TYPE_CHECKING:
    from atlas_bridge.config import Settings

logger = logging.getLogger(__name__)

USER_AGENT = f"atlas-bridge/{__version__} python-requests/{requests.__version__}"
"""Not browser-like on purpose: a ``Mozilla`` agent makes Atlas's CSRF filter demand a header (§2.1)."""

RETRY_STATUSES = (429, 500, 502, 503, 504)
_BODY_EXCERPT = 500
_SCRUB_WINDOW = 64 * 1024


def _api_path(constant: str) -> str:
    """An ``apache_atlas`` endpoint constant (``api/atlas/v2/entity/bulk/``) as a clean relative path."""
    return constant.strip("/")


TYPEDEFS_PATH = _api_path(TypeDefClient.TYPEDEFS_API)  # api/atlas/v2/types/typedefs
TYPEDEF_HEADERS_PATH = TYPEDEFS_PATH + "/headers"
TYPEDEF_BY_NAME_PATH = _api_path(TypeDefClient.TYPEDEF_BY_NAME)  # api/atlas/v2/types/typedef/name
ENTITY_PATH = _api_path(EntityClient.ENTITY_API)  # api/atlas/v2/entity
ENTITY_BULK_PATH = _api_path(EntityClient.ENTITY_BULK_API)  # api/atlas/v2/entity/bulk
LINEAGE_PATH = _api_path(LineageClient.LINEAGE_URI)  # api/atlas/v2/lineage


class _Watch:
    """The connections one request uses, so a watchdog can cut them when the request's deadline passes.

    A read timeout bounds each ``recv``, not the request: a server trickling a byte every few seconds
    would hold a request for ever. Shutting the socket down from the timer thread ends the blocked read.
    """

    def __init__(self) -> None:
        self.connections: list[Any] = []
        self.expired = False
        self._lock = threading.Lock()

    def add(self, conn: Any) -> None:
        with self._lock:
            self.connections.append(conn)
            expired = self.expired
        if expired:
            _cut(conn)

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            connections = list(self.connections)
        for conn in connections:
            _cut(conn)


def _cut(conn: Any) -> None:
    sock = getattr(conn, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


_current = threading.local()


def _watch_connection(conn: Any) -> None:
    watch = getattr(_current, "watch", None)
    if watch is not None:
        watch.add(conn)


class _WatchedHTTPConnection(HTTPConnection):
    def request(self, *args: Any, **kwargs: Any) -> None:
        _watch_connection(self)
        super().request(*args, **kwargs)


class _WatchedHTTPSConnection(HTTPSConnection):
    def request(self, *args: Any, **kwargs: Any) -> None:
        _watch_connection(self)
        super().request(*args, **kwargs)


class _WatchedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


class _CappedRetry(Retry):
    """urllib3's policy with ``Retry-After`` capped, for ``apache_atlas`` calls made on our session."""

    cap_s: float = 30.0

    def get_retry_after(self, response: Any) -> float | None:
        value = super().get_retry_after(response)
        return None if value is None else min(value, self.cap_s)


def make_retry(policy: RetryPolicy) -> Retry:
    """urllib3 retries for requests that ``apache_atlas`` code makes on our session (ours retry in
    :meth:`AtlasClient._request`, under one deadline)."""
    capped: type[Retry] = type("_CappedRetry", (_CappedRetry,), {"cap_s": policy.retry_after_cap_s})
    return capped(
        total=policy.retries,
        other=0,
        backoff_factor=policy.backoff_s,
        backoff_max=policy.retry_after_cap_s,
        status_forcelist=RETRY_STATUSES,
        allowed_methods=frozenset({"GET", "PUT", "POST", "DELETE"}),
        respect_retry_after_header=True,
        raise_on_status=False,
        raise_on_redirect=False,
    )


_NO_RETRY = Retry(0, read=False, redirect=False, raise_on_status=False)


class _DeadlineAdapter(HTTPAdapter):
    """Watchable connections; no retries for the client's own calls (its loop retries, under a deadline),
    urllib3's capped policy for calls ``apache_atlas`` code makes on the same session."""

    def __init__(self, timeout: tuple[float, float], retry: Retry) -> None:
        self._timeout = timeout
        self._retry = retry
        super().__init__()

    @property  # type: ignore[override]
    def max_retries(self) -> Retry:
        return _NO_RETRY if getattr(_current, "watch", None) is not None else self._retry

    @max_retries.setter
    def max_retries(self, value: Any) -> None:
        """``HTTPAdapter.__init__`` sets its own default; the property above decides."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        if kwargs.get("timeout") is None:  # requests made by apache_atlas code get a timeout too
            kwargs["timeout"] = self._timeout
        return super().send(request, *args, **kwargs)


@dataclass(frozen=True)
class RetryPolicy:
    """How long one call may take in all, and how its attempts are spaced.

    ``give_up_after_s`` bounds a call whatever the server does (refusing, failing, trickling, silent);
    ``deadline_s`` bounds one attempt, headers and body included; ``Retry-After`` is obeyed up to
    ``retry_after_cap_s``.
    """

    retries: int = 5
    backoff_s: float = 0.5
    deadline_s: float = 90.0
    retry_after_cap_s: float = 30.0
    give_up_after_s: float = 120.0

    def wait(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before attempt ``attempt + 1`` (exponential backoff, or a capped Retry-After)."""
        wait = self.backoff_s * (2 ** (attempt - 1))
        return float(min(max(wait, retry_after or 0.0), self.retry_after_cap_s))


def _retry_after(response: requests.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())


class _Retryable(Exception):
    """One attempt failed in a way another attempt may not (internal)."""

    def __init__(self, error: AtlasUnavailableError, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


def _split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """``https://u:p@h/x`` -> (``https://h/x``, u, p): credentials never stay in a URL we log or raise."""
    try:
        url, user, password = split_userinfo(url.strip())
    except ValueError as e:
        msg = f"Atlas address {e}"
        raise ConfigError(msg) from None
    try:
        parts = urlsplit(url)
        hostname, port = parts.hostname, parts.port  # .port raises ValueError on a bad port
    except ValueError:
        # Said in our words: the credentials are out of ``url`` already, but not of urllib's exception.
        msg = f"Atlas address is not a valid URL: {url!r} (check the host, the port and brackets of IPv6)"
        raise ConfigError(msg) from None
    if not parts.scheme or not hostname:
        msg = f"Atlas address must be an http(s) URL, got {url!r}"
        raise ConfigError(msg)
    if parts.scheme not in ("http", "https"):
        msg = f"Atlas address must use http or https, got {parts.scheme!r}"
        raise ConfigError(msg)
    netloc = hostname if ":" not in hostname else f"[{hostname}]"
    if port is not None:
        netloc += f":{port}"
    clean = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    return clean, user, password


def _redact_userinfo(url: str) -> str:
    """Hide everything up to the last ``@``: a password may hold ``/`` or ``@`` unquoted."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)?.*@", r"\1***@", url.strip(), flags=re.DOTALL)


_AUTH_VALUE = re.compile(r"\b(Basic|Bearer|Negotiate|Digest)\s+[A-Za-z0-9+/=._~-]+", re.IGNORECASE)
_AUTH_HEADER = re.compile(r"((?:Proxy-)?Authorization|Cookie|Set-Cookie)(\W{1,3})[^\r\n,;}]*", re.IGNORECASE)
_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


def scrub(text: str, username: str | None = None, secret: str | None = None) -> str:
    """Remove credentials from text that came from elsewhere (a server's error page, a proxy's echo).

    Our own messages never hold a secret; this is for what Atlas or a proxy sends back. Auth header values
    of every scheme and URL userinfo go, and the password (alone, or as ``user:password``) in every form a
    server may echo it in (:func:`_secret_pattern`). A password shorter than 8 characters only goes as a
    whole token: blanking every occurrence of a short password inside other words would reveal it.
    """
    text = _AUTH_HEADER.sub(r"\1\2***", text)
    text = _AUTH_VALUE.sub(r"\1 ***", text)
    text = _USERINFO.sub("***@", text)
    if secret:
        text = _secret_pattern(username, secret).sub("***", text)
    return text


def _hex(value: int, digits: int) -> str:
    """``value`` in hex as a regex matching either case."""
    return "".join(f"[{h}{h.upper()}]" if h.isalpha() else h for h in f"{value:0{digits}x}")


def _char_forms(char: str) -> str:
    """A regex for one character as a server may echo it: itself, percent-encoded (either case; '+' for a
    space, as form encoding writes it), JSON-escaped (once or more), or an HTML entity."""
    forms = [re.escape(char), "".join("%" + _hex(b, 2) for b in char.encode("utf-8"))]
    if char == " ":
        forms.append(r"\+")
    # JSON escapes, as many backslashes deep as JSON quoted in JSON (in JSON...) makes them.
    if ord(char) <= 0xFFFF:
        forms.append(r"\\{1,8}u" + _hex(ord(char), 4))
    if char in '"\\/':
        forms.append(r"\\{1,8}" + re.escape(char))
    if html.escape(char) != char:
        forms.append(re.escape(html.escape(char)))
    forms += [f"&#0{{0,4}}{ord(char)};", f"&#[xX]0{{0,4}}{_hex(ord(char), 1)};"]
    return "(?:" + "|".join(forms) + ")"


_LONGEST_CHAR_FORM = 16
"""No form of one character in :func:`_char_forms` is longer (``&#x0000`` + 6 digits + ``;``), nor its
base64 or hex."""


def _longest_form(username: str | None, secret: str | None) -> int:
    """The most characters one echo of the credentials can take (see :func:`_secret_pattern`)."""
    return _LONGEST_CHAR_FORM * (len(username or "") + 1 + len(secret or ""))


@functools.lru_cache(maxsize=8)
def _secret_pattern(username: str | None, secret: str) -> re.Pattern[str]:
    """The password, and ``user:password``, in every encoding a server may echo: as text (see
    :func:`_char_forms`, which covers URL and form encoding in either case), base64 (standard or URL-safe,
    padded or not) and hex (either case)."""
    raws = [f"{username}:{secret}", secret] if username is not None else [secret]
    forms: list[str] = []
    for raw in raws:
        data = raw.encode("utf-8")
        forms.append("".join(_char_forms(c) for c in raw))
        for encoded in (base64.b64encode(data), base64.urlsafe_b64encode(data)):
            forms.append(re.escape(encoded.decode("ascii").rstrip("=")) + "={0,2}")
        forms.append("".join(_hex(b, 2) for b in data))
    pattern = "|".join(forms)
    if len(secret) < 8:
        pattern = r"(?<![A-Za-z0-9])(?:" + pattern + r")(?![A-Za-z0-9])"
    return re.compile(pattern)


_unverified_said: set[str] = set()
_unverified_lock = threading.Lock()


def _say_once_unverified(base_url: str) -> None:
    """One warning per address and process that its certificate goes unchecked, instead of urllib3's
    ``InsecureRequestWarning`` on every request (hundreds in a scan); urllib3's is silenced for that host
    only, so other code in the process (a Spark job's own requests) still gets its own."""
    if not base_url.startswith("https://"):
        return
    host = urlsplit(base_url).hostname or ""
    warnings.filterwarnings(
        "ignore",
        message=re.escape(f"Unverified HTTPS request is being made to host '{host}'"),
        category=InsecureRequestWarning,
    )
    with _unverified_lock:
        if base_url in _unverified_said:
            return
        _unverified_said.add(base_url)
    logger.warning("Atlas at %s: its TLS certificate is not verified (verify_tls is false)", base_url)


class AtlasClient:
    """Atlas REST v2 on one ``requests.Session``: timeouts, retries, failover, typed errors.

    Args:
        base_url: one Atlas address or several (HA: tried in order, the last good one is kept). A path
            prefix is kept: ``https://gw/x/atlas`` -> ``https://gw/x/atlas/api/atlas/v2/...``.
        auth: any ``requests`` auth object (e.g. ``requests_kerberos.HTTPKerberosAuth()``) or a tuple.
        username, password: basic auth, when ``auth`` is not given.
        timeout: ``(connect, read)`` seconds, applied to every request.
        retries: retries per address for transport errors, timeouts, 429 and 5xx.
        backoff: first wait between attempts in seconds, doubling (0 in tests).
        policy: deadlines and the Retry-After cap (:class:`RetryPolicy`); ``retries``/``backoff`` win.
        verify: TLS verification: True, False, or a CA bundle path.
        session: a session to use (its auth/TLS settings are kept unless given here).
    """

    def __init__(
        self,
        base_url: str | Sequence[str],
        *,
        auth: requests.auth.AuthBase | tuple[str, str] | None = None,
        username: str | None = None,
        password: str | SecretStr | None = None,
        timeout: tuple[float, float] = (5.0, 60.0),
        retries: int = 5,
        backoff: float = 0.5,
        verify: bool | str = True,
        session: requests.Session | None = None,
        policy: RetryPolicy | None = None,
    ) -> None:
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        if not urls:
            msg = "AtlasClient needs at least one Atlas address"
            raise ConfigError(msg)
        self.base_urls: list[str] = []
        for url in urls:
            clean, url_user, url_password = _split_credentials(url)
            self.base_urls.append(clean)
            if url_user and username is None and auth is None:
                username, password = url_user, url_password
        if isinstance(auth, tuple) and len(auth) == 2 and username is None:
            username, password = str(auth[0]), str(auth[1])  # a (user, password) tuple is basic auth
        self._active = 0
        self.timeout = (float(timeout[0]), float(timeout[1]))
        base = policy or RetryPolicy()
        self.policy = RetryPolicy(
            retries=retries,
            backoff_s=backoff,
            deadline_s=base.deadline_s,
            retry_after_cap_s=base.retry_after_cap_s,
            give_up_after_s=base.give_up_after_s,
        )
        self._sleep: Callable[[float], None] = time.sleep
        self._watches: set[_Watch] = set()
        self._watches_lock = threading.Lock()
        self._aborted = False
        self.username = username
        secret = password.get_secret_value() if isinstance(password, SecretStr) else password
        # Kept only to scrub it from bodies we quote in errors; never logged or formatted.
        self._secret = secret or None

        self.session = session if session is not None else requests.Session()
        if auth is not None:
            self.session.auth = auth
        elif username is not None:
            self.session.auth = requests.auth.HTTPBasicAuth(username, secret or "")
        if session is None or verify is not True:
            self.session.verify = verify
        # Passed with every request too: a session's verify loses to REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE.
        self.verify: bool | str = (
            self.session.verify if isinstance(self.session.verify, (bool, str)) else True
        )
        if self.verify is False:
            for url in self.base_urls:
                _say_once_unverified(url)
        self.session.headers["User-Agent"] = USER_AGENT
        self.session.headers["Accept"] = "application/json"
        adapter = _DeadlineAdapter(self.timeout, make_retry(self.policy))
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)

    def __repr__(self) -> str:
        return f"AtlasClient({self.base_urls!r}, username={self.username!r})"

    @classmethod
    def from_settings(cls, settings: Settings) -> AtlasClient:
        """A client for ``settings`` (Kerberos needs the ``kerberos`` extra)."""
        if not settings.atlas_configured:
            msg = "no Atlas address configured (atlas.rest.address / ATLAS_BRIDGE_REST_ADDRESS / --atlas)"
            raise ConfigError(msg)
        auth: Any = None
        if settings.kerberos:
            try:
                from requests_kerberos import OPTIONAL, HTTPKerberosAuth
            except ImportError as e:
                msg = (
                    "Kerberos authentication needs the 'kerberos' extra: pip install 'atlas-bridge[kerberos]'"
                )
                raise ConfigError(msg) from e
            auth = HTTPKerberosAuth(mutual_authentication=OPTIONAL)
        verify: bool | str = str(settings.ca_bundle) if settings.ca_bundle else settings.verify_tls
        return cls(
            settings.base_urls,
            auth=auth,
            username=None if auth is not None else settings.username,
            password=None if auth is not None else settings.password,
            timeout=(settings.connect_timeout_s, settings.read_timeout_s),
            retries=settings.retries,
            backoff=settings.backoff_s,
            verify=verify,
            policy=RetryPolicy(
                deadline_s=settings.request_deadline_s,
                retry_after_cap_s=settings.retry_after_cap_s,
                give_up_after_s=settings.give_up_after_s,
            ),
        )

    @classmethod
    def from_apache_atlas(cls, client: Any, **kwargs: Any) -> AtlasClient:
        """Wrap an ``apache_atlas.client.base_client.AtlasClient``: reuse its session (auth, TLS) and host.

        Its host keeps its path prefix here (the official client's ``urljoin`` drops it), and its session
        gets our retrying, timing-out adapter, so the official client's own calls gain both too.
        """
        auth = getattr(client.session, "auth", None)
        kwargs.setdefault("session", client.session)
        if (
            isinstance(auth, requests.auth.HTTPBasicAuth)
            and "username" not in kwargs
            and "auth" not in kwargs
        ):
            kwargs["username"], kwargs["password"] = auth.username, auth.password
        elif isinstance(auth, tuple) and "auth" not in kwargs:
            kwargs["auth"] = auth
        wrapped = cls(client.host, **kwargs)
        return wrapped

    @property
    def apache_atlas(self) -> Any:
        """An ``apache_atlas`` client sharing this session, for endpoints we do not wrap.

        Errors from it are still the official client's (``AtlasServiceException``, ``None`` on 503).
        """
        from apache_atlas.client.base_client import AtlasClient as OfficialClient

        official = OfficialClient(self.base_url, None)
        official.session = self.session
        official.host = self.base_url + "/"  # a trailing slash makes its urljoin keep the path prefix
        return official

    @property
    def base_url(self) -> str:
        """The address in use (the last one that answered)."""
        return self.base_urls[self._active]

    # -- typedefs ---------------------------------------------------------------------------------

    def get_typedef_headers(self, **filters: str) -> list[dict[str, Any]]:
        """``GET /v2/types/typedefs/headers`` (no typeVersion in it: see the reference §2.2)."""
        result = self._request("GET", TYPEDEF_HEADERS_PATH, params=filters or None)
        return list(result) if isinstance(result, list) else []

    def get_all_typedefs(self, **filters: str) -> dict[str, Any]:
        """``GET /v2/types/typedefs``: the full ``AtlasTypesDef``; filters as Atlas's SearchFilter."""
        return self._expect_dict(self._request("GET", TYPEDEFS_PATH, params=filters or None))

    def get_typedef(self, name: str) -> dict[str, Any] | None:
        """One typedef by name, or None when Atlas has no such type."""
        try:
            return self._expect_dict(self._request("GET", f"{TYPEDEF_BY_NAME_PATH}/{quote(name, safe='')}"))
        except AtlasNotFoundError:
            return None

    def create_typedefs(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /v2/types/typedefs``: creates only; any existing name fails the request with 409."""
        return self._expect_dict(self._request("POST", TYPEDEFS_PATH, body=body))

    def update_typedefs(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``PUT /v2/types/typedefs``: updates only; a missing name gives 404."""
        return self._expect_dict(self._request("PUT", TYPEDEFS_PATH, body=body))

    # -- entities ---------------------------------------------------------------------------------

    def post_entities(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /v2/entity/bulk`` (upsert): returns the ``EntityMutationResponse``."""
        logger.debug("posting %d entities", entity_count(body))
        return self._expect_dict(self._request("POST", ENTITY_BULK_PATH, body=body))

    def get_entity(self, type_name: str, qualified_name: str) -> dict[str, Any] | None:
        """``{entity, referredEntities}`` of the ACTIVE entity with this qualifiedName, or None."""
        path = f"{ENTITY_PATH}/uniqueAttribute/type/{quote(type_name, safe='')}"
        try:
            return self._expect_dict(
                self._request("GET", path, params={"attr:qualifiedName": qualified_name})
            )
        except AtlasNotFoundError:
            return None

    def get_entities_by_qualified_names(
        self, type_name: str, qualified_names: Sequence[str]
    ) -> list[dict[str, Any]]:
        """``GET /v2/entity/bulk/uniqueAttribute/type/{type}``: the ACTIVE ones there are (subtypes too)."""
        if not qualified_names:
            return []
        path = f"{ENTITY_BULK_PATH}/uniqueAttribute/type/{quote(type_name, safe='')}"
        params = {f"attr_{i}:qualifiedName": qn for i, qn in enumerate(qualified_names)}
        try:
            result = self._expect_dict(self._request("GET", path, params=params))
        except AtlasNotFoundError:
            return []  # a server that answers 404 when any one is missing: treat all as missing
        return [e for e in result.get("entities") or [] if isinstance(e, dict)]

    def delete_entity_by_qualified_name(self, type_name: str, qualified_name: str) -> dict[str, Any]:
        """Soft-delete one entity by type and qualifiedName; a missing one is not an error."""
        path = f"{ENTITY_PATH}/uniqueAttribute/type/{quote(type_name, safe='')}"
        try:
            return self._expect_dict(
                self._request("DELETE", path, params={"attr:qualifiedName": qualified_name})
            )
        except AtlasNotFoundError:
            return {}

    def get_entity_by_guid(self, guid: str) -> dict[str, Any]:
        """``{entity, referredEntities}``; deleted entities come back with ``status: DELETED``."""
        return self._expect_dict(self._request("GET", f"{ENTITY_PATH}/guid/{quote(guid, safe='')}"))

    def delete_entity(self, guid: str) -> dict[str, Any]:
        """Soft-delete by guid (a missing or deleted entity is not an error in Atlas)."""
        return self._expect_dict(self._request("DELETE", f"{ENTITY_PATH}/guid/{quote(guid, safe='')}"))

    # -- lineage ----------------------------------------------------------------------------------

    def get_lineage(self, guid: str, direction: str = "BOTH", depth: int = 3) -> dict[str, Any]:
        """``GET /v2/lineage/{guid}``: ``guidEntityMap`` + ``relations`` (data-flow direction)."""
        params = {"direction": direction, "depth": str(depth)}
        return self._expect_dict(
            self._request("GET", f"{LINEAGE_PATH}/{quote(guid, safe='')}", params=params)
        )

    def get_lineage_by_qualified_name(
        self, type_name: str, qualified_name: str, direction: str = "BOTH", depth: int = 3
    ) -> dict[str, Any]:
        """``GET /v2/lineage/uniqueAttribute/type/{type}?attr:qualifiedName=..``."""
        path = f"{LINEAGE_PATH}/uniqueAttribute/type/{quote(type_name, safe='')}"
        params = {"attr:qualifiedName": qualified_name, "direction": direction, "depth": str(depth)}
        return self._expect_dict(self._request("GET", path, params=params))

    # -- transport --------------------------------------------------------------------------------

    def _expect_dict(self, result: Any) -> dict[str, Any]:
        return result if isinstance(result, dict) else {}

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> Any:
        """One call: rounds over the addresses (HA failover), retried under one deadline.

        Each round tries every address once, the last good one first; a round that found none answering
        is followed by a wait (backoff, or a capped ``Retry-After``) and another round, until ``retries``
        rounds are spent or ``give_up_after_s`` has passed: then :class:`AtlasUnavailableError` says so.

        A passive HA instance redirects to the active one (302, or 307 for writes). requests would drop
        the Authorization header on that cross-host hop, so redirects are not followed blindly: one that
        points at another configured address moves the call there; any other is an error.
        """
        data = encode_body(body) if body is not None else None  # a scan's batch comes encoded already
        policy = self.policy
        started = time.monotonic()
        give_up_at = started + policy.give_up_after_s
        n = len(self.base_urls)
        attempt = 0
        while True:
            attempt += 1
            last: _Retryable | None = None
            redirected: _PeerRedirect | None = None
            order = [(self._active + step) % n for step in range(n)]
            tried: set[int] = set()
            while order:
                index = order.pop(0)
                if index in tried:
                    continue
                tried.add(index)
                try:
                    result = self._attempt(self.base_urls[index], method, path, params, data, give_up_at)
                except _PeerRedirect as r:
                    logger.info(
                        "Atlas at %s is not active; it redirects to %s", self.base_urls[index], r.target
                    )
                    order.insert(0, r.index)
                    redirected = r
                    continue
                except _Retryable as r:
                    last = r
                    if n > 1:
                        logger.warning(
                            "Atlas at %s unavailable (%s); trying the next address", r.error.url, r
                        )
                    continue
                if index != self._active:
                    logger.info("failed over to Atlas at %s", self.base_urls[index])
                    self._active = index
                return result
            if last is None:
                assert redirected is not None
                msg = f"no Atlas address answered ({len(tried)} tried); last: {redirected}"
                raise AtlasUnavailableError(msg, status_code=redirected.status_code, url=redirected.url)
            remaining = give_up_at - time.monotonic()
            if attempt > policy.retries or remaining <= 0 or self._aborted:
                raise self._gave_up(last, attempt, time.monotonic() - started, n, len(tried), remaining)
            wait = min(policy.wait(attempt, last.retry_after), max(0.0, remaining))
            # Said at WARNING: a user watching a terminal sees what the pause is for, not silence.
            logger.warning(
                "%s; retry %d of %d in %.1fs (gives up after %gs in all)",
                last.error,
                attempt,
                policy.retries,
                wait,
                policy.give_up_after_s,
            )
            if wait > 0:
                self._sleep(wait)

    def _gave_up(
        self, last: _Retryable, attempts: int, elapsed: float, n: int, tried: int, remaining: float
    ) -> AtlasUnavailableError:
        err = last.error
        if remaining <= 0 and attempts <= self.policy.retries:
            reason = f"gave up after {elapsed:.0f}s, give_up_after_s={self.policy.give_up_after_s:g}"
        else:
            reason = f"after {attempts - 1} retries, {elapsed:.0f}s"
        msg = f"{err} ({reason})"
        if n > 1:
            msg = f"no Atlas address answered ({tried} tried); last: {msg}"
        return AtlasUnavailableError(
            msg,
            status_code=err.status_code,
            error_code=err.error_code,
            url=err.url,
            body=err.body,
            attempts=attempts,
            elapsed_s=elapsed,
        )

    def abort(self) -> None:
        """Cut every call in flight and fail every later one at once (a job ending: keep, don't wait)."""
        self._aborted = True
        with self._watches_lock:
            watches = list(self._watches)
        for watch in watches:
            watch.expire()

    def _attempt(
        self,
        base: str,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        data: bytes | None,
        give_up_at: float,
    ) -> Any:
        url = f"{base}/{path}"
        if self._aborted:
            msg = f"not sent to Atlas at {base} ({method} {path}): the client was stopped"
            raise AtlasUnavailableError(msg, url=url)
        headers = {"Content-Type": "application/json"} if data is not None else None
        logger.debug("%s %s (%d bytes)", method, url, len(data) if data else 0)
        budget = max(0.001, min(self.policy.deadline_s, give_up_at - time.monotonic()))
        timeout = (min(self.timeout[0], budget), min(self.timeout[1], budget))
        watch = _Watch()
        timer = threading.Timer(budget, watch.expire)
        timer.daemon = True
        # A server that accepts and never answers: say so after a few seconds, not only at the deadline.
        notice = threading.Timer(
            min(SLOW_NOTICE_S, budget),
            logger.warning,
            (
                "still waiting for Atlas at %s to answer %s %s (gives up after %.0fs)",
                base,
                method,
                path,
                budget,
            ),
        )
        notice.daemon = True
        _current.watch = watch
        with self._watches_lock:
            self._watches.add(watch)
        timer.start()
        if budget > SLOW_NOTICE_S:
            notice.start()
        try:
            response = self.session.request(
                method,
                url,
                params=params,
                data=data,
                headers=headers,
                timeout=timeout,
                allow_redirects=False,
                verify=self.verify,
                stream=True,
            )
            try:
                content = response.content  # read under the same watchdog as the headers
            finally:
                response.close()
        except (
            requests.Timeout,
            requests.ConnectionError,
            requests.exceptions.ChunkedEncodingError,
            requests.exceptions.ContentDecodingError,
        ) as e:
            if self._aborted:
                msg = f"not sent to Atlas at {base} ({method} {path}): the client was stopped"
                raise AtlasUnavailableError(msg, url=url) from e
            if watch.expired:
                msg = (
                    f"Atlas at {base} did not answer {method} {path} within {budget:.0f}s"
                    f" (deadline per request)"
                )
            elif isinstance(e, requests.Timeout):
                msg = (
                    f"Atlas at {base} timed out on {method} {path}"
                    f" (timeouts: {timeout[0]:g}s connect, {timeout[1]:g}s read)"
                )
            else:
                msg = f"cannot reach Atlas at {base}: {connection_reason(e)} ({method} {path})"
            raise _Retryable(AtlasUnavailableError(msg, url=url)) from e
        except requests.RequestException as e:
            msg = f"request to Atlas at {base} failed ({method} {path}): {e.__class__.__name__}"
            raise AtlasError(msg, url=url) from e
        finally:
            timer.cancel()
            notice.cancel()
            _current.watch = None
            with self._watches_lock:
                self._watches.discard(watch)
        status = response.status_code
        if 200 <= status < 300:
            if not content:
                return {}
            try:
                return json.loads(content)
            except ValueError as e:
                # A cut-off or garbled body: the request may or may not have been applied; entity upserts
                # and typedef registration are safe to repeat, so it is retried like a dropped connection.
                msg = f"Atlas answered {method} {path} with an incomplete or non-JSON body (HTTP {status})"
                body = self._excerpt(content.decode("utf-8", "replace"))
                raise _Retryable(AtlasUnavailableError(msg, status_code=status, url=url, body=body)) from e
        response._content = content
        if 300 <= status < 400 and response.headers.get("Location"):
            raise self._redirect(method, path, url, response)
        error = self._error(method, path, url, response)
        if isinstance(error, AtlasUnavailableError):
            raise _Retryable(error, _retry_after(response))
        raise error

    def _redirect(self, method: str, path: str, url: str, response: requests.Response) -> AtlasError:
        target = urljoin(url, response.headers["Location"])
        clean_target = self._scrub(_redact_userinfo(target.split("?", 1)[0]))
        for i, peer in enumerate(self.base_urls):
            if target.startswith(peer + "/") and peer != url[: len(peer)]:
                return _PeerRedirect(i, clean_target, status_code=response.status_code, url=url)
        msg = (
            f"Atlas at {url.split('/api/atlas')[0]} redirected {method} {path} to {clean_target}"
            f" (HTTP {response.status_code}); not followed, so credentials only go to configured"
            " addresses: add that address to atlas.rest.address"
        )
        return AtlasError(msg, status_code=response.status_code, url=url)

    def _excerpt(self, text: str) -> str:
        """The scrubbed start of a text from elsewhere. Of a long body only a window is scrubbed (scrubbing
        takes about a second a megabyte), less its last characters: they may hold a secret it cut in two."""
        if len(text) <= _SCRUB_WINDOW:
            return self._scrub(text)[:_BODY_EXCERPT]
        clean = self._scrub(text[:_SCRUB_WINDOW])
        return clean[: max(0, len(clean) - _longest_form(self.username, self._secret))][:_BODY_EXCERPT]

    def _scrub(self, text: str) -> str:
        return scrub(text, self.username, self._secret)

    def _error(self, method: str, path: str, url: str, response: requests.Response) -> AtlasError:
        status = response.status_code
        body = self._excerpt(response.text or "")
        error_code: str | None = None
        detail = ""
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if isinstance(payload, dict):
            error_code = payload.get("errorCode") if isinstance(payload.get("errorCode"), str) else None
            detail = str(payload.get("errorMessage") or payload.get("error") or "")
        if not detail and body and not body.lstrip().startswith("<"):
            detail = body.strip().splitlines()[0] if body.strip() else ""
        detail = self._excerpt(detail)[:300]
        where = f"{method} {path}"
        kwargs: dict[str, Any] = {"status_code": status, "error_code": error_code, "url": url, "body": body}
        if status in (401, 419):
            who = f"user {self.username!r}" if self.username else "the configured authentication"
            base = url.split("/api/atlas")[0]
            msg = f"Atlas at {base} refused the credentials of {who} (HTTP {status}) on {where}"
            return AtlasAuthError(msg, **kwargs)
        if status == 403:
            who = f"user {self.username!r}" if self.username else "the authenticated user"
            msg = f"Atlas denied {who} permission for {where} (HTTP 403{_code(error_code)}): {detail}"
            return AtlasAuthError(msg, **kwargs)
        msg = f"Atlas answered {where} with HTTP {status}{_code(error_code)}"
        if detail:
            msg += f": {detail}"
        if status == 404:
            return AtlasNotFoundError(msg, **kwargs)
        if status == 409:
            return AtlasConflictError(msg, **kwargs)
        if status in RETRY_STATUSES:
            return AtlasUnavailableError(msg, **kwargs)
        return AtlasError(msg, **kwargs)


class _PeerRedirect(AtlasError):
    """A passive HA instance pointed at another configured address (internal: never escapes)."""

    def __init__(self, index: int, target: str, *, status_code: int, url: str) -> None:
        super().__init__(f"redirected to {target} (HTTP {status_code})", status_code=status_code, url=url)
        self.index = index
        self.target = target


SLOW_NOTICE_S = 5.0
"""After this long without an answer, one attempt says it is still waiting (a silent server)."""

_REASONS: tuple[tuple[type[BaseException], str], ...] = (
    (ConnectionRefusedError, "connection refused"),
    (ConnectionResetError, "connection reset"),
    (ConnectionAbortedError, "connection aborted"),
    (socket.gaierror, "host name not found"),
    (socket.timeout, "connection timed out"),
)


def connection_reason(exc: BaseException) -> str:
    """A few words for why a connection failed (``connection refused``), from the OS error urllib3 wraps
    three levels deep; its own message (pool and connection reprs) says nothing a user can act on.

    >>> connection_reason(ConnectionRefusedError(111, "Connection refused"))
    'connection refused'
    """
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, ssl.SSLError):  # what the check said (CERTIFICATE_VERIFY_FAILED...) is what to fix
            verify, reason = getattr(e, "verify_message", None), getattr(e, "reason", None)
            said = "TLS handshake failed" + (f": {verify}" if verify else "")
            return said + (f" ({reason})" if reason else "")
        for kind, words in _REASONS:
            if isinstance(e, kind):
                return words
        stack.extend([e.__cause__, e.__context__, getattr(e, "reason", None)])
        stack.extend(a for a in getattr(e, "args", ()) if isinstance(a, BaseException))
    text = str(exc)
    for marker, words in (
        ("Name or service not known", "host name not found"),
        ("refused", "connection refused"),
    ):
        if marker in text:
            return words
    return exc.__class__.__name__


def _code(error_code: str | None) -> str:
    return f" {error_code}" if error_code else ""
