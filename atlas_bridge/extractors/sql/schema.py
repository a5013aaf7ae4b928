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

ColumnMaps = tuple[Columns, dict[str, str], dict[str, str | None]]
"""A table's columns, and their spellings and their types by lower-cased name (the last of equal names wins,
as a dict's would)."""

LearnedTable = tuple[str | None, str | None, str, Columns]
"""(catalog, db, name, columns) of a table a script defines, names as written."""


class ClosedTable(tuple[str | None, str | None, str, Columns]):
    """A :data:`LearnedTable` that is a view or CTAS table: its columns are its definition's, and a read of
    another column of it is an orphan column with a warning, in any script (see :meth:`SchemaIndex.closed`).
    A tuple like any learned table; JSON loses the class: a unit's learned tables say which are closed."""

    __slots__ = ()


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
        self._maps: dict[TableKey, ColumnMaps] = {}
        """:meth:`column_maps` of this layer's tables, made when first asked for."""
        self._spelling: dict[TableKey, tuple[str | None, str | None, str]] = {}
        self._defined: dict[TableKey, None] = {}
        """Tables added by :meth:`add` (DDL), in order: what a script teaches."""
        self._closed: set[TableKey] = set()
        """Views and CTAS tables of this layer: their columns are their definition's (see :meth:`closed`)."""
        self._unordered: set[TableKey] = set()
        """Tables whose columns are known by name only (read from Atlas without positions)."""
        self._unresolved: dict[TableKey, None] = {}
        """Tables a statement defines whose columns it could not tell (``SELECT *`` of an unknown table)."""
        self.lookups: dict[TableKey, None] | None = None
        """When a dict: the tables looked up here that this layer's own DDL did not answer (what the script
        read from the base or did not find), in order; a scan re-extracts a unit when their answers change."""
        self.base = schema if isinstance(schema, SchemaIndex) else None
        self.default_db = default_db.lower() if default_db else None
        self._own_base = False
        """The base holds this index's own schema (shared, :func:`_shared`): its tables are this layer's."""
        if schema and not isinstance(schema, SchemaIndex):
            self.base = _shared(schema)
            if self.base is None:
                self._load(schema, ())
            else:
                self._own_base = True

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

    def add(
        self, catalog: str | None, db: str | None, name: str, columns: Columns, *, closed: bool = False
    ) -> None:
        """Record (or replace) a table's columns, e.g. from CREATE TABLE earlier in the script; ``closed``:
        a view or CTAS table, whose columns are its definition's."""
        key = self._put(catalog, db, name, columns)
        if closed:
            self._closed.add(key)
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
            table = (catalog, db, name, _as_columns(cols))
            out.append(ClosedTable(table) if key in self._closed else table)
        return out

    def pending(self) -> bool:
        """Some table defined here is still without its columns."""
        return any(k not in self._defined for k in self._unresolved)

    def add_all(self, tables: Iterable[LearnedTable], *, unordered: Iterable[TableKey] = ()) -> None:
        """Add tables (a learned schema); those named in ``unordered`` have columns in no known order; a
        :class:`ClosedTable` is a view or CTAS table (see :meth:`closed`)."""
        for table in tables:
            catalog, db, name, cols = table
            key = self._put(catalog, db, name, cols)
            if isinstance(table, ClosedTable):
                self._closed.add(key)
        self._unordered.update(unordered)

    def closed(self, catalog: str | None, db: str | None, name: str) -> bool:
        """Whether the table is a view or CTAS table whose definition gave its columns: a column it does not
        have is not one of it (a plain table's DDL may be older than the table: any column is taken)."""
        key = self._resolve(catalog, db, name)
        return key is not None and self._is_closed(key)

    def _is_closed(self, key: TableKey) -> bool:
        if key in self._tables:
            return key in self._closed
        return self.base._is_closed(key) if self.base is not None else False

    def in_order(self, catalog: str | None, db: str | None, name: str) -> bool:
        """Whether the table's columns are in the table's own order (an INSERT can map by position)."""
        key = self._resolve(catalog, db, name)
        return key is not None and self._ordered(key)

    def _ordered(self, key: TableKey) -> bool:
        if key in self._tables or (self._own_base and key in self._unordered):
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
        self._closed.discard(key)  # (re)defined: closed again only if its new definition says so
        self._maps.pop(key, None)
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
        if record and self.lookups is not None:
            self._record(catalog, db, name, key)
        return None if key is None else self._get(key)

    def column_maps(self, catalog: str | None, db: str | None, name: str) -> ColumnMaps | None:
        """:meth:`columns`, with the columns' spellings and types by lower-cased name: made once per table
        by the index that holds it (a shared base: once, not once per script that reads the table)."""
        key = self._resolve(catalog, db, name)
        if self.lookups is not None:
            self._record(catalog, db, name, key)
        return None if key is None else self._maps_of(key)

    def _record(self, catalog: str | None, db: str | None, name: str, key: TableKey | None) -> None:
        assert self.lookups is not None
        if key is None or key not in self._defined:
            if len(self.lookups) < MAX_LOOKUPS:
                self.lookups[_key(catalog, db, name)] = None
            else:
                self.lookups[OVERFLOW] = None

    def _maps_of(self, key: TableKey) -> ColumnMaps:
        if key not in self._tables:
            assert self.base is not None
            return self.base._maps_of(key)
        maps = self._maps.get(key)
        if maps is None:
            cols = self._get(key)
            spelled = [c for c, _ in cols]
            lows = list(map(str.lower, spelled))
            maps = self._maps[key] = (
                cols,
                dict(zip(lows, spelled, strict=True)),
                dict(zip(lows, [t for _, t in cols], strict=True)),
            )
        return maps

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


_SHARED: tuple[dict[str, Any], list[tuple[str, ...]], SchemaIndex] | None = None
"""The last plain schema mapping indexed (a copy of it, the keys of its levels in order) and its index,
shared as the base of every script given an equal mapping: the API and the CLI pass the same schema script
after script."""
SHARED_MAX_VALUES = 100_000
"""A bigger schema is not copied for sharing: it is indexed per script, as any other mapping."""


def _shared(schema: Mapping[str, Any]) -> SchemaIndex | None:
    """The shared index of a plain schema (:func:`_plain_copy`), built once while the mapping stays equal to
    the copy taken then (keys in the same order: columns are positional); None for any other mapping.

    Comparing is C-level but for one step per level above the tables, a fraction of indexing again (TPC-DS's
    24 tables: 8 us against 25), and a table's columns are converted once, not once per script that reads
    it. The shared index is only read, and converted lazily (the same result whichever thread does it);
    what a script's DDL defines goes into the script's own layer above it."""
    global _SHARED
    cached = _SHARED
    if (
        cached is not None
        and type(schema) is dict
        and cached[0] == schema
        and _key_orders(schema) == cached[1]
    ):
        return cached[2]
    copy = _plain_copy(schema, 0, [SHARED_MAX_VALUES])
    if copy is None:
        return None
    index = SchemaIndex()
    index._load(copy, ())
    _SHARED = (copy, _key_orders(copy), index)
    return index


def _plain_copy(node: Any, depth: int, budget: list[int]) -> dict[str, Any] | None:
    """A copy of a plain schema, else None. Plain: dicts with string keys; a table maps to strings (or
    None), any other level maps to tables only or to such levels only (at most three above the tables);
    at most ``budget`` keys in all."""
    if type(node) is not dict or depth > 3:
        return None
    budget[0] -= len(node)
    if budget[0] < 0 or not all(type(key) is str for key in node):
        return None
    kinds = {type(value) for value in node.values()}
    if not kinds <= _LEAF_TYPES:  # a level above tables: the same kind of level under every key
        if kinds != {dict} or len({_is_level(value) for value in node.values()}) != 1:
            return None
        out: dict[str, Any] = {}
        for key, value in node.items():
            value = _plain_copy(value, depth + 1, budget)
            if value is None:
                return None
            out[key] = value
        return out
    return dict(node)


def _is_level(node: dict[str, Any]) -> bool:
    """A non-empty level whose first value is a dict (plain: a level above tables, not a table)."""
    return bool(node) and type(next(iter(node.values()))) is dict


def _key_orders(node: dict[str, Any]) -> list[tuple[str, ...]]:
    """The keys of every dict of a plain schema, in order (dict equality does not see the order)."""
    if _is_level(node) and _is_level(next(iter(node.values()))):  # a level of dbs (or catalogs)
        return [tuple(node), *(keys for child in node.values() for keys in _key_orders(child))]
    return [tuple(node), *map(tuple, node.values())]  # tables under this level (or a table itself)


_LEAF_TYPES = frozenset({str, type(None)})


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
