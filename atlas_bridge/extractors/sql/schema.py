"""Table -> columns lookup over sqlglot's nested schema mapping, grown by the script's own DDL.

``{table: {col: type}}``, ``{db: {table: {col: type}}}`` and ``{catalog: {db: {table: ...}}}`` are all
accepted. Matching is case-insensitive; a table written without a db matches the default db first, then
any db where the name is unique.

An index may sit on a *base* index (the schema a scan learned from the whole estate, built once per
worker): a script's own DDL goes into its own layer and hides the base's entry of the same table, and the
base is shared, never copied per script.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

TableKey = tuple[str | None, str | None, str]
"""(catalog, db, name), lower-cased."""

Columns = list[tuple[str, str | None]]
"""A table's columns in declaration order: (name as written, type or None)."""

LearnedTable = tuple[str | None, str | None, str, Columns]
"""(catalog, db, name, columns) of a table a script defines, names as written."""


MAX_LOOKUPS = 10_000
"""Distinct look-ups :attr:`SchemaIndex.lookups` keeps; beyond, :data:`OVERFLOW` stands for the rest."""
OVERFLOW: TableKey = (None, None, "")
"""In :attr:`SchemaIndex.lookups`: more look-ups than were kept (any change of schema may matter)."""


class SchemaIndex:
    """Known columns of tables and views, in declaration order (needed for INSERT by position)."""

    def __init__(
        self,
        schema: Mapping[str, Any] | SchemaIndex | None = None,
        default_db: str | None = None,
    ) -> None:
        self._tables: dict[TableKey, Columns | Mapping[str, Any]] = {}
        """Columns per table; a table of the given schema keeps its mapping until first looked up (most
        scripts touch few of the schema's tables, and the index is built once per script)."""
        self._by_name: dict[str, list[TableKey]] = {}
        self._spelling: dict[TableKey, tuple[str | None, str | None, str]] = {}
        self._defined: dict[TableKey, None] = {}
        """Tables added by :meth:`add` (DDL), in order: what a script teaches."""
        self._unordered: set[TableKey] = set()
        """Tables whose columns are known by name only (read from Atlas without positions)."""
        self._unresolved: dict[TableKey, None] = {}
        """Tables a statement defines whose columns it could not tell (``SELECT *`` of an unknown table)."""
        self.lookups: dict[TableKey, None] | None = None
        """When a dict: the tables looked up here that this layer's own DDL did not answer (what the script
        read from the base or did not find), in order; a scan re-extracts a unit when their answers change."""
        self.base = schema if isinstance(schema, SchemaIndex) else None
        self.default_db = default_db.lower() if default_db else None
        if schema and not isinstance(schema, SchemaIndex):
            self._load(schema, ())

    def _load(self, node: Mapping[str, Any], path: tuple[str, ...]) -> None:
        db = path[-1] if path else None
        catalog = path[-2] if len(path) > 1 else None
        for key, value in node.items():
            if not (type(value) is dict or isinstance(value, Mapping)):  # a dict without the ABC's check
                continue
            if value and not _is_table(value):
                if len(path) < 2:
                    self._load(value, (*path, str(key)))
                continue
            self._put(catalog, db, str(key), value)

    def load(self, schema: Mapping[str, Any]) -> None:
        """Add (or replace) the tables of a nested mapping."""
        self._load(schema, ())

    def add(self, catalog: str | None, db: str | None, name: str, columns: Columns) -> None:
        """Record (or replace) a table's columns, e.g. from CREATE TABLE earlier in the script."""
        key = self._put(catalog, db, name, columns)
        self._defined.pop(key, None)  # re-defined: it moves to the end
        self._defined[key] = None
        self._unresolved.pop(key, None)

    def unresolved(self, catalog: str | None, db: str | None, name: str) -> None:
        """A statement defines this table but its columns stay unknown (another pass may tell them)."""
        key = _key(catalog, db, name)
        if key not in self._defined:
            self._unresolved[key] = None

    def defined(self) -> list[LearnedTable]:
        """The tables this layer's DDL defined, in order, with their columns."""
        out: list[LearnedTable] = []
        for key in self._defined:
            cols = self._tables[key]
            catalog, db, name = self._spelling[key]
            out.append((catalog, db, name, _as_columns(cols)))
        return out

    def pending(self) -> bool:
        """Some table defined here is still without its columns."""
        return any(k not in self._defined for k in self._unresolved)

    def add_all(self, tables: Iterable[LearnedTable], *, unordered: Iterable[TableKey] = ()) -> None:
        """Add tables (a learned schema); those named in ``unordered`` have columns in no known order."""
        for catalog, db, name, cols in tables:
            self._put(catalog, db, name, cols)
        self._unordered.update(unordered)

    def in_order(self, catalog: str | None, db: str | None, name: str) -> bool:
        """Whether the table's columns are in the table's own order (an INSERT can map by position)."""
        key = self._resolve(catalog, db, name)
        return key is not None and self._ordered(key)

    def _ordered(self, key: TableKey) -> bool:
        if key in self._tables:
            return key not in self._unordered
        return self.base._ordered(key) if self.base is not None else True

    def _put(
        self,
        catalog: str | None,
        db: str | None,
        name: str,
        columns: Columns | Mapping[str, Any],
    ) -> TableKey:
        key = _key(catalog, db, name)
        if key not in self._tables:
            self._by_name.setdefault(key[2], []).append(key)
        self._tables[key] = columns
        self._spelling[key] = (catalog or None, db or None, name)
        return key

    def _candidates(self, low: str) -> list[TableKey]:
        own = self._by_name.get(low, [])
        if self.base is None:
            return own
        below = self.base._candidates(low)
        if not own:
            return below
        return [*own, *(k for k in below if k not in self._tables)]

    def _get(self, key: TableKey) -> Columns:
        if key in self._tables:
            cols = self._tables[key]
            if isinstance(cols, Mapping):
                cols = self._tables[key] = _as_columns(cols)
            return cols
        assert self.base is not None
        return self.base._get(key)

    def columns(
        self, catalog: str | None, db: str | None, name: str, *, record: bool = True
    ) -> Columns | None:
        """Columns (name, type) of the table, or None when the schema does not know it.

        ``record=False``: a look-up the answer of which does not shape the lineage (the target a statement
        is about to define), left out of :attr:`lookups`."""
        key = self._resolve(catalog, db, name)
        if record and self.lookups is not None and (key is None or key not in self._defined):
            if len(self.lookups) < MAX_LOOKUPS:
                self.lookups[_key(catalog, db, name)] = None
            else:
                self.lookups[OVERFLOW] = None
        return None if key is None else self._get(key)

    def _resolve(self, catalog: str | None, db: str | None, name: str) -> TableKey | None:
        low = name.lower()
        cands = self._candidates(low)
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
        return matches[0]


def _key(catalog: str | None, db: str | None, name: str) -> TableKey:
    return (catalog.lower() if catalog else None, db.lower() if db else None, name.lower())


def _as_columns(cols: Columns | Mapping[str, Any]) -> Columns:
    if isinstance(cols, Mapping):
        if set(map(type, cols)) <= _TYPE_NAMES and set(map(type, cols.values())) <= _TYPE_NAMES:
            return list(cols.items())  # names and types as strings already (the common case)
        return [(str(c), None if t is None else str(t)) for c, t in cols.items()]
    return list(cols)


def _is_table(value: Mapping[str, Any]) -> bool:
    """A table maps column names to types (strings), not to further mappings."""
    # by the values' types (a handful), not value by value: the schema is indexed once per script
    types = set(map(type, value.values()))
    return types <= _TYPE_NAMES or not any(issubclass(t, Mapping) for t in types)


_TYPE_NAMES = frozenset({str})
"""The types of a table's values in the common case (type names), known not to be mappings."""
