"""Table -> columns lookup over sqlglot's nested schema mapping, grown by the script's own DDL.

``{table: {col: type}}``, ``{db: {table: {col: type}}}`` and ``{catalog: {db: {table: ...}}}`` are all
accepted. Matching is case-insensitive; a table written without a db matches the default db first, then
any db where the name is unique.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TableKey = tuple[str | None, str | None, str]
"""(catalog, db, name), lower-cased."""


class SchemaIndex:
    """Known columns of tables and views, in declaration order (needed for INSERT by position)."""

    def __init__(self, schema: Mapping[str, Any] | None = None, default_db: str | None = None) -> None:
        self._tables: dict[TableKey, list[tuple[str, str | None]] | Mapping[str, Any]] = {}
        """Columns per table; a table of the given schema keeps its mapping until first looked up (most
        scripts touch few of the schema's tables, and the index is built once per script)."""
        self._by_name: dict[str, list[TableKey]] = {}
        self.default_db = default_db.lower() if default_db else None
        if schema:
            self._load(schema, ())

    def _load(self, node: Mapping[str, Any], path: tuple[str, ...]) -> None:
        for key, value in node.items():
            if isinstance(value, Mapping) and value and not _is_table(value):
                if len(path) < 2:
                    self._load(value, (*path, str(key)))
                continue
            if isinstance(value, Mapping):
                db = path[-1] if path else None
                catalog = path[-2] if len(path) > 1 else None
                self._put(catalog, db, str(key), value)

    def add(
        self, catalog: str | None, db: str | None, name: str, columns: list[tuple[str, str | None]]
    ) -> None:
        """Record (or replace) a table's columns, e.g. from CREATE TABLE earlier in the script."""
        self._put(catalog, db, name, columns)

    def _put(
        self,
        catalog: str | None,
        db: str | None,
        name: str,
        columns: list[tuple[str, str | None]] | Mapping[str, Any],
    ) -> None:
        key = (catalog.lower() if catalog else None, db.lower() if db else None, name.lower())
        if key not in self._tables:
            self._by_name.setdefault(key[2], []).append(key)
        self._tables[key] = columns

    def columns(self, catalog: str | None, db: str | None, name: str) -> list[tuple[str, str | None]] | None:
        """Columns (name, type) of the table, or None when the schema does not know it."""
        low = name.lower()
        cands = self._by_name.get(low)
        if not cands:
            return None
        cat = catalog.lower() if catalog else None
        dbl = db.lower() if db else None
        if dbl is not None:
            matches = [k for k in cands if k[1] == dbl and (cat is None or k[0] in (None, cat))]
            if not matches:
                matches = [k for k in cands if k[1] is None]
        else:
            matches = [k for k in cands if k[1] is None or k[1] == self.default_db]
            if not matches and len(cands) == 1:
                matches = cands
        if len(matches) != 1:
            exact = [k for k in matches if k[0] == cat]
            if len(exact) != 1:
                return None
            matches = exact
        key = matches[0]
        cols = self._tables[key]
        if isinstance(cols, Mapping):
            cols = self._tables[key] = [(str(c), None if t is None else str(t)) for c, t in cols.items()]
        return cols


def _is_table(value: Mapping[str, Any]) -> bool:
    """A table maps column names to types (strings), not to further mappings."""
    # by the values' types (a handful), not value by value: the schema is indexed once per script
    return not any(issubclass(t, Mapping) for t in set(map(type, value.values())))
