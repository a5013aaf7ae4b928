"""OpenLineage events in files, as the file transport and ``dbt-ol`` write them (pure: bytes in).

The file transport writes one event per file (``<path>-<time>.json``, pretty-printed in debug mode) or
appends one event per line to one file; tools also keep a JSON array of events. All of these read the same
way: JSON values one after another (white space between them), each an event or an array of events.
A value that does not parse is a problem at its line and column, and reading goes on at the next line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from atlas_bridge.model import Problem

_EVENT_KEYS = ("run", "job", "dataset")
_KEY = re.compile(rb'"(eventTime|producer|schemaURL)"\s*:')
_JSON = json.JSONDecoder()
_SPACE = re.compile(r"\s*")


def looks_like_event(obj: Any) -> bool:
    """Whether a JSON value is an OpenLineage event (its time and producer, and a run, job or dataset).

    >>> looks_like_event({"eventTime": "2026-01-01T00:00:00Z", "producer": "p", "job": {}})
    True
    >>> looks_like_event({"query": "select 1"})
    False
    """
    return (
        isinstance(obj, Mapping)
        and "eventTime" in obj
        and ("producer" in obj or "schemaURL" in obj)
        and any(k in obj for k in _EVENT_KEYS)
    )


def sniff_events(head: bytes) -> bool:
    """Whether the first bytes of a file hold OpenLineage events: a first line, the whole head, or the
    first element of an array that is an event; or, cut short, an object or array opening with the
    event's own keys (a big pretty-printed event)."""
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff").lstrip()
    if not text.startswith(("{", "[")):
        return False
    first = text.split("\n", 1)[0].strip()
    for candidate in (first, text):
        try:
            obj = json.loads(candidate)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, list):
            return bool(obj) and looks_like_event(obj[0])
        return looks_like_event(obj)
    return len({m.group(1) for m in _KEY.finditer(head[:8192])}) >= 2 and any(
        f'"{k}"'.encode() in head for k in _EVENT_KEYS
    )


def read_event_text(text: str, file: str) -> tuple[list[tuple[str, int, Any]], list[Problem]]:
    """The events of a file's text, each with its file and line, and what could not be parsed.

    A file whose first value sits on one line is read as JSON lines: a broken line costs that line
    alone. Otherwise values are read one after another, however they are laid out.

    >>> events, problems = read_event_text('{"a": 1}\\n{"b": \\n[{"c": 3}]\\n', "x.jsonl")
    >>> [(line, e) for _, line, e in events]
    [(1, {'a': 1}), (3, {'c': 3})]
    >>> [str(p) for p in problems]
    ['x.jsonl:2:7: error: not JSON: Expecting value']
    """
    start = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    try:
        _, end = _JSON.raw_decode(text, start)
        one_line = "\n" not in text[start:end]
    except (ValueError, RecursionError):
        one_line = True
    return _lines(text, file) if one_line else _values(text, file)


def _lines(text: str, file: str) -> tuple[list[tuple[str, int, Any]], list[Problem]]:
    events: list[tuple[str, int, Any]] = []
    problems: list[Problem] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as e:
            problems.append(_problem(f"not JSON: {e.msg}", file, number, e.colno))
            continue
        except RecursionError:
            problems.append(_problem("not JSON: nested too deep", file, number))
            continue
        events.extend((file, number, item) for item in (value if isinstance(value, list) else [value]))
    return events, problems


def _values(text: str, file: str) -> tuple[list[tuple[str, int, Any]], list[Problem]]:
    events: list[tuple[str, int, Any]] = []
    problems: list[Problem] = []
    pos = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    while pos < len(text):
        line = text.count("\n", 0, pos) + 1
        try:
            value, end = _JSON.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            problems.append(_problem(f"not JSON: {e.msg}", file, e.lineno, e.colno))
            break  # one value spread over lines: where the next one starts cannot be told
        except RecursionError:
            problems.append(_problem("not JSON: nested too deep", file, line))
            break
        events.extend((file, line, item) for item in (value if isinstance(value, list) else [value]))
        pos = _SPACE.match(text, end).end()  # type: ignore[union-attr]
    return events, problems


def _problem(message: str, file: str, line: int, column: int | None = None) -> Problem:
    return Problem(message=message, kind="openlineage", file=file, line=line, column=column)
