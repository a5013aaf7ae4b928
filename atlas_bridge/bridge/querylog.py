"""Query logs (JSON lines, CSV, JSON whose lines are objects): records with their text, user and time."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Iterator
from typing import Any

from atlas_bridge.bridge.inputs import (
    QUERY_FIELDS,
    TIME_FIELDS,
    USER_FIELDS,
    decode_text,
    make_problem,
    pick_field,
    read_unit,
)
from atlas_bridge.bridge.types import LogRecord, ScanOptions, WorkUnit
from atlas_bridge.model import Problem


def read_query_log(unit: WorkUnit, options: ScanOptions, problems: list[Problem]) -> Iterator[LogRecord]:
    """The queries of a JSON-lines or CSV query log (or of one byte range of a JSON-lines log).

    Records without query text, or that cannot be read, become problems naming their line.
    """
    name = unit.file.name
    if name.lower().endswith(".csv"):
        yield from _read_csv_log(unit, options, problems)
    else:
        yield from _read_jsonl_log(unit, options, problems)


def _jsonl_lines(unit: WorkUnit) -> Iterator[tuple[int, bytes]]:
    if unit.content is not None:
        for n, raw in enumerate(unit.content.splitlines(), start=1):
            yield n, raw
        return
    end = unit.file.size if unit.end < 0 else unit.end
    with open(unit.file.path, "rb") as fh:
        line_no = 1
        if unit.start > 0:
            # Line numbers: count the newlines before our range (cheap, sequential, bounded memory).
            remaining = unit.start
            while remaining > 0:
                block = fh.read(min(remaining, 1 << 20))
                if not block:
                    break
                line_no += block.count(b"\n")
                remaining -= len(block)
            fh.seek(unit.start - 1)
            if fh.read(1) != b"\n":
                fh.readline()  # the partial line belongs to the previous range
                line_no += 1
        pos = fh.tell()
        while pos < end:
            raw = fh.readline()
            if not raw:
                break
            yield line_no, raw
            line_no += 1
            pos += len(raw)


def _read_jsonl_log(unit: WorkUnit, options: ScanOptions, problems: list[Problem]) -> Iterator[LogRecord]:
    name = unit.file.name
    fields: tuple[str | None, str | None, str | None] | None = None
    for line_no, raw in _jsonl_lines(unit):
        text = raw.decode("utf-8", errors="replace").strip().lstrip("\ufeff")
        if not text:
            continue
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError) as e:
            msg = f"not a JSON object: {e.__class__.__name__ if isinstance(e, RecursionError) else e}"
            problems.append(make_problem(msg, name, kind="input", line=line_no))
            continue
        if not isinstance(obj, dict):
            problems.append(make_problem("not a JSON object", name, kind="input", line=line_no))
            continue
        if fields is None or fields[0] not in obj:
            keys = list(obj)
            fields = (
                pick_field(keys, options.query_field, QUERY_FIELDS),
                pick_field(keys, options.user_field, USER_FIELDS),
                pick_field(keys, options.time_field, TIME_FIELDS),
            )
        qf, uf, tf = fields
        query = obj.get(qf) if qf else None
        if not isinstance(query, str) or not query.strip():
            problems.append(make_problem("record has no query text field", name, kind="input", line=line_no))
            continue
        user = obj.get(uf) if uf else None
        yield LogRecord(
            line_no, query, str(user) if user is not None else None, _time_ms(obj.get(tf) if tf else None)
        )


def _read_csv_log(unit: WorkUnit, options: ScanOptions, problems: list[Problem]) -> Iterator[LogRecord]:
    name = unit.file.name
    text = decode_text(read_unit(unit), name, problems)
    # A query may be long: lift csv's 131,072-character field limit to the unit's own size.
    csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as e:
        problems.append(make_problem(f"unreadable CSV header: {e}", name, kind="input", line=1))
        return
    qf = pick_field(header, options.query_field, QUERY_FIELDS)
    if qf is None:
        wanted = options.query_field or " / ".join(QUERY_FIELDS)
        problems.append(
            make_problem(f"no query text column ({wanted}) in the header", name, kind="input", line=1)
        )
        return
    uf = pick_field(header, options.user_field, USER_FIELDS)
    tf = pick_field(header, options.time_field, TIME_FIELDS)
    qi, ui, ti = header.index(qf), header.index(uf) if uf else -1, header.index(tf) if tf else -1
    prev_line = reader.line_num
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            problems.append(
                make_problem(f"unreadable CSV record: {e}", name, kind="input", line=prev_line + 1)
            )
            break
        start_line, prev_line = prev_line + 1, reader.line_num
        if not row or all(not c.strip() for c in row):
            continue
        query = row[qi] if qi < len(row) else ""
        if not query.strip():
            problems.append(make_problem("record has no query text", name, kind="input", line=start_line))
            continue
        user = row[ui] if 0 <= ui < len(row) and row[ui] else None
        when = _time_ms(row[ti]) if 0 <= ti < len(row) else None
        yield LogRecord(start_line, query, user, when)


def _time_ms(value: Any) -> int | None:
    """Epoch seconds / milliseconds or an ISO-8601 string, as epoch milliseconds (None if unreadable).

    >>> _time_ms("1e400") is None, _time_ms(float("nan")) is None, _time_ms(1700000000)
    (True, True, 1700000000000)
    """
    try:
        return _time_ms_or_raise(value)
    except (ValueError, OverflowError, TypeError):  # "1e400", NaN, years out of range: no time
        return None


def _time_ms_or_raise(value: Any) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    else:
        text = str(value).strip()
        try:
            number = float(text)
        except ValueError:
            try:
                parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                return None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt.timezone.utc)
            return int(parsed.timestamp() * 1000)
    return int(number if number > 1e11 else number * 1000)
