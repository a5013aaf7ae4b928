"""The columns of tables the estate only reads, from Atlas: our ``atlas_bridge_column`` s and the
``hive_column`` s a Hive hook (or ``import-hive.sh``) made.

Tables are looked up by qualifiedName (:mod:`atlas_bridge.naming`, the Hive hook's convention) in bulk
``uniqueAttribute`` requests of at most ``batch`` names, then their columns the same way; at most
``max_tables`` tables per run. Columns come in their ``position`` order when every column has one (the
Hive hook's do, and ours where the table's order was known); a table with a column without one is marked
*unordered*: its names resolve columns, but an INSERT without a column list does not map by its order. A
failed request is a warning (the rest of the run goes on without what it would have told), never an error.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from atlas_bridge.errors import AtlasBridgeError
from atlas_bridge.extractors.sql.schema import LearnedTable, TableKey
from atlas_bridge.naming import table_qualified_name

logger = logging.getLogger(__name__)

TABLE_TYPES = ("atlas_bridge_table", "hive_table")
"""Looked up in this order (``atlas_bridge_table`` takes its subtype ``atlas_bridge_view`` too)."""

_COLUMN_TYPE = {"atlas_bridge_table": "atlas_bridge_column", "atlas_bridge_view": "atlas_bridge_column"}


def read_atlas_schema(
    client: Any,
    tables: Iterable[TableKey],
    *,
    namespace: str,
    batch: int = 50,
    max_tables: int = 5000,
) -> tuple[list[LearnedTable], set[TableKey], list[str]]:
    """Columns of ``tables`` (catalog, db, name) that Atlas knows; returns them, the tables whose column
    order is unknown, and warnings. Tables without a db are not looked up (Atlas names always have one).
    """
    wanted: dict[str, TableKey] = {}
    for key in sorted(tables, key=lambda k: tuple(p or "" for p in k)):
        catalog, db, name = key
        if db is not None:
            wanted.setdefault(table_qualified_name(db, name, namespace, catalog), key)
    warnings: list[str] = []
    if len(wanted) > max_tables:
        warnings.append(
            f"schema from Atlas: {len(wanted)} tables read, only the first {max_tables} looked up"
        )
        wanted = dict(list(wanted.items())[:max_tables])
    found: dict[str, dict[str, Any]] = {}
    try:
        for type_name in TABLE_TYPES:
            missing = [qn for qn in wanted if qn not in found]
            for entity in _bulk(client, type_name, missing, batch):
                qn = (entity.get("attributes") or {}).get("qualifiedName")
                if isinstance(qn, str) and qn in wanted:
                    found.setdefault(qn, entity)
        out: list[LearnedTable] = []
        unordered: set[TableKey] = set()
        for qn, entity in found.items():
            cols, ordered = _columns(client, entity, batch)
            if not cols:
                continue
            catalog, db, name = wanted[qn]
            out.append((catalog, db, name, cols))
            if not ordered:
                unordered.add(wanted[qn])
    except AtlasBridgeError as e:
        warnings.append(f"schema from Atlas: lookup failed, going on without it: {e}")
        return [], set(), warnings
    return out, unordered, warnings


def _bulk(client: Any, type_name: str, names: Sequence[str], batch: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(0, len(names), batch):
        out.extend(client.get_entities_by_qualified_names(type_name, list(names[i : i + batch])))
    return out


def _columns(client: Any, table: dict[str, Any], batch: int) -> tuple[list[tuple[str, str | None]], bool]:
    rels = table.get("relationshipAttributes") or {}
    group: dict[str, int] = {}  # the table's columns first, then its partition keys (Hive puts them last)
    for g, key in enumerate(("columns", "partitionKeys")):
        for r in rels.get(key) or []:
            if isinstance(r, dict) and r.get("relationshipStatus", "ACTIVE") == "ACTIVE":
                qn = (r.get("uniqueAttributes") or {}).get("qualifiedName")
                if isinstance(qn, str):
                    group.setdefault(qn, g)
    col_type = _COLUMN_TYPE.get(str(table.get("typeName")), "hive_column")
    rows: list[tuple[int, int | None, str, str | None]] = []
    for entity in _bulk(client, col_type, sorted(group), batch):
        attrs = entity.get("attributes") or {}
        name, position, kind = attrs.get("name"), attrs.get("position"), attrs.get("type")
        if not isinstance(name, str) or not name:
            continue
        rows.append(
            (
                group.get(str(attrs.get("qualifiedName")), 0),
                position if isinstance(position, int) else None,
                name,
                kind if isinstance(kind, str) else None,
            )
        )
    ordered = bool(rows) and all(r[1] is not None for r in rows)
    rows.sort(key=lambda r: (r[0], r[1] if ordered and r[1] is not None else 0, r[2].lower()))
    seen: set[str] = set()
    cols = []
    for _, _, name, kind in rows:
        if name.lower() not in seen:
            seen.add(name.lower())
            cols.append((name, kind or None))
    return cols, ordered
