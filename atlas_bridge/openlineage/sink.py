"""Where our OpenLineage events go: an OpenLineage HTTP endpoint, or a folder of event files.

* a URL (``http://marquez:5000``): each event is POSTed as JSON to ``<url>/api/v1/lineage`` (the path is
  added unless the URL already ends with it), as OpenLineage's HTTP transport does, with a bearer token
  when an API key is set. Connection errors, timeouts, 429 and 5xx are retried with exponential backoff
  (``retries``, ``backoff_s``; ``Retry-After`` obeyed up to ``retry_after_cap_s``), each attempt bounded
  by the connect and read timeouts, as the Atlas client does; any other 4xx is final.
* a folder: each event is a file ``ol-<hash>.json`` (one JSON line, as the file transport writes), named
  by its content, so the same event written twice is one file and writers never collide; ``atlas-bridge
  scan FOLDER`` reads it back.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

import requests

from atlas_bridge.config import split_userinfo
from atlas_bridge.errors import OpenLineageError

logger = logging.getLogger(__name__)

LINEAGE_PATH = "/api/v1/lineage"
_RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


class EventSink(Protocol):
    """Takes OpenLineage events, one at a time, in order."""

    def emit(self, event: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


def dumps_event(event: Mapping[str, Any]) -> str:
    """One event as one line of JSON (sorted keys: the same event, the same bytes)."""
    return json.dumps(event, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class FolderEventSink:
    """Event files in a folder, one per event, named by content (``ol-<first 16 hex of its sha256>.json``)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.written = 0

    def emit(self, event: Mapping[str, Any]) -> None:
        text = dumps_event(event) + "\n"
        name = f"ol-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}.json"
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".ol-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, self.folder / name)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self.written += 1

    def close(self) -> None:
        """Nothing held open."""


class HttpEventSink:
    """POSTs events to an OpenLineage endpoint, retrying what may pass on a later attempt."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 30.0,
        retries: int = 5,
        backoff_s: float = 0.5,
        retry_after_cap_s: float = 30.0,
        session: requests.Session | None = None,
    ) -> None:
        base, user, password = split_userinfo(url.rstrip("/"))
        self.url = base if base.endswith(LINEAGE_PATH) else base + LINEAGE_PATH
        self.timeout = (connect_timeout_s, read_timeout_s)
        self.retries = retries
        self.backoff_s = backoff_s
        self.retry_after_cap_s = retry_after_cap_s
        self.session = session or requests.Session()
        self.session.headers["Content-Type"] = "application/json"
        if api_key:
            self.session.headers["Authorization"] = f"Bearer {api_key}"
        elif user is not None:
            self.session.auth = (user, password or "")
        self.sent = 0

    def emit(self, event: Mapping[str, Any]) -> None:
        body = dumps_event(event).encode("utf-8")
        status: int | None = None
        for attempt in range(1, self.retries + 2):
            retry_after: float | None = None
            try:
                response = self.session.post(self.url, data=body, timeout=self.timeout)
            except (requests.ConnectionError, requests.Timeout) as e:
                reason = e.__class__.__name__
            else:
                status = response.status_code
                if status < 300:
                    self.sent += 1
                    return
                reason = f"HTTP {status}"
                if status not in _RETRY_STATUSES:
                    msg = f"{self.url} refused an OpenLineage event: HTTP {status}"
                    raise OpenLineageError(msg, status_code=status, url=self.url, attempts=attempt)
                retry_after = _retry_after(response.headers.get("Retry-After"))
            if attempt > self.retries:
                msg = f"{self.url} did not take an OpenLineage event after {attempt} attempt(s): {reason}"
                raise OpenLineageError(msg, status_code=status, url=self.url, attempts=attempt)
            wait = min(max(self.backoff_s * 2 ** (attempt - 1), retry_after or 0.0), self.retry_after_cap_s)
            logger.info("OpenLineage endpoint %s: %s; retrying in %.1fs", self.url, reason, wait)
            time.sleep(wait)

    def close(self) -> None:
        self.session.close()


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def is_url(target: str) -> bool:
    """Whether an OpenLineage target is an endpoint (http/https) rather than a folder."""
    return target.lower().startswith(("http://", "https://"))


def make_event_sink(target: str, settings: Any | None = None) -> EventSink:
    """The sink for ``target``: an HTTP endpoint for an http(s) URL, else a folder. ``settings``
    (:class:`atlas_bridge.config.Settings`) gives the timeouts, retries and the API key."""
    if not is_url(target):
        return FolderEventSink(target)
    kwargs: dict[str, Any] = {}
    if settings is not None:
        key = getattr(settings, "openlineage_api_key", None)
        kwargs = {
            "api_key": key.get_secret_value() if key is not None else None,
            "connect_timeout_s": settings.connect_timeout_s,
            "read_timeout_s": settings.read_timeout_s,
            "retries": settings.retries,
            "backoff_s": settings.backoff_s,
            "retry_after_cap_s": settings.retry_after_cap_s,
        }
    return HttpEventSink(target, **kwargs)


def send_events(sink: EventSink, events: Iterable[Mapping[str, Any]]) -> int:
    """Emit every event in order; how many."""
    count = 0
    for event in events:
        sink.emit(event)
        count += 1
    return count
