"""Join the estate a site already has: point our lineage at the datasets other hooks made.

Most Atlas installations hold ``hive_table`` / ``hive_column`` (the Hive hook, ``import-hive.sh``),
``hdfs_path`` and S3 entities. Our qualifiedNames follow the same conventions (:mod:`atlas_bridge.naming`),
so before a batch goes out the datasets and columns in it are looked up, in bulk and cached per run,
under those types; a match replaces our entity: it is left out of the batch (another hook owns it, we send
no attribute of it) and every reference to it names the other type instead. ``Process.inputs/outputs``
take any ``DataSet``, so our processes and column lineage then hang off the Hive hook's own tables and the
two lineages join up. What is not found is created as our own type, as before.

A column must hang off its table (Atlas refuses a column without its ``table``: 404 ATLAS-404-00-007), and
only another hook's column type can hang off another hook's table. So the columns of a reused table are
looked up as that table's column type whatever ``reuse_types`` says, and one the estate lacks (a column
added since the last Hive import) is created as that type under that table, with only its name and the
type we know; the Hive hook's next import of the table settles it. A dataset of a type that has no
columns (``hdfs_path``, the S3 types) whose columns the batch sends stays ours, columns and all.

:func:`rewrite_batch` is pure; :class:`EntityReuse` does the lookups through the client.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from atlas_bridge.atlas.encoded import entity_count
from atlas_bridge.errors import AtlasError

logger = logging.getLogger(__name__)

DEFAULT_REUSE_TYPES: dict[str, tuple[str, ...]] = {
    "atlas_bridge_table": ("hive_table",),
    "atlas_bridge_view": ("hive_table",),
    "atlas_bridge_column": ("hive_column",),
    "atlas_bridge_path": ("hdfs_path", "aws_s3_v2_directory", "aws_s3_v2_object", "aws_s3_pseudo_dir"),
}
"""Our dataset type -> the types other hooks make for the same thing, looked up in this order."""

_COLUMN_TYPE = "atlas_bridge_column"
_COLUMNS_RELATIONSHIP = "atlas_bridge_dataset_columns"

FOREIGN_COLUMN_TYPES: dict[str, tuple[str, str]] = {"hive_table": ("hive_column", "hive_table_columns")}
"""Another hook's table type -> the column type that hangs off it, and their relationship."""
_NO_COLUMNS = {
    t for ours, theirs in DEFAULT_REUSE_TYPES.items() if ours != _COLUMN_TYPE for t in theirs
} - set(FOREIGN_COLUMN_TYPES)
"""Other hooks' dataset types that hold no columns (paths, S3 objects)."""
_FOREIGN_COLUMNS = {column for column, _ in FOREIGN_COLUMN_TYPES.values()}


def parse_reuse_types(spec: str | Sequence[str] | None) -> dict[str, tuple[str, ...]]:
    """``"none"`` / ``""`` switches reuse off; ``"hive_table,hive_column"`` keeps only those foreign types.

    >>> parse_reuse_types("none")
    {}
    >>> parse_reuse_types("hive_table")["atlas_bridge_table"]
    ('hive_table',)
    >>> parse_reuse_types("hive_table")["atlas_bridge_column"]  # a hive_table's columns are hive_columns
    ('hive_column',)
    >>> "atlas_bridge_table" in parse_reuse_types("hive_column")
    False
    """
    if spec is None:
        return dict(DEFAULT_REUSE_TYPES)
    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    if not names or names == ["none"]:
        return {}
    if names == ["default"]:
        return dict(DEFAULT_REUSE_TYPES)
    wanted = set(names)
    out = {ours: tuple(t for t in theirs if t in wanted) for ours, theirs in DEFAULT_REUSE_TYPES.items()}
    for extra in wanted - {t for ts in DEFAULT_REUSE_TYPES.values() for t in ts}:
        logger.warning("reuse type %r is not one we know how to match; ignored", extra)
    # Only a hive_column can hang off a hive_table: reusing the table means looking its columns up too.
    implied = tuple(
        FOREIGN_COLUMN_TYPES[t][0] for t in out["atlas_bridge_table"] if t in FOREIGN_COLUMN_TYPES
    )
    out[_COLUMN_TYPE] = tuple(dict.fromkeys((*out[_COLUMN_TYPE], *implied)))
    return {k: v for k, v in out.items() if v}


def column_holders(batch: Mapping[str, Any]) -> set[str]:
    """qualifiedNames of the datasets whose columns the batch sends (their ``table`` end)."""
    by_guid = {
        str(e.get("guid")): (e.get("attributes") or {}).get("qualifiedName")
        for e in batch.get("entities") or []
    }
    out: set[str] = set()
    for entity in batch.get("entities") or []:
        if entity.get("typeName") != _COLUMN_TYPE:
            continue
        table = (entity.get("relationshipAttributes") or {}).get("table")
        if isinstance(table, dict):
            qn = (table.get("uniqueAttributes") or {}).get("qualifiedName") or by_guid.get(
                str(table.get("guid"))
            )
            if isinstance(qn, str):
                out.add(qn)
    return out


def _as_foreign_column(entity: Mapping[str, Any], column_type: str, table: dict[str, Any]) -> dict[str, Any]:
    """Our column as another hook's column under that hook's table: name and known type only (the other
    hook's next import of the table fills in the rest; ``type`` is mandatory, so unknown is empty)."""
    attrs = entity.get("attributes") or {}
    kind = attrs.get("type")
    return {
        "typeName": column_type,
        "guid": entity.get("guid"),
        "attributes": {
            "qualifiedName": attrs.get("qualifiedName"),
            "name": attrs.get("name"),
            "type": kind if isinstance(kind, str) else "",
        },
        "relationshipAttributes": {"table": table},
    }


def rewrite_batch(batch: Mapping[str, Any], found: Mapping[str, str]) -> dict[str, Any]:
    """The batch with every entity whose qualifiedName is in ``found`` (qn -> foreign type) left out and
    every reference to it pointing at the foreign entity; pure, the input is not changed.

    A column of ours whose table is now a foreign table with a column type of its own
    (:data:`FOREIGN_COLUMN_TYPES`) becomes that type under that table (a foreign table cannot own our
    column type); a dataset whose columns the batch sends is kept ours when its foreign type has none.
    """
    holders = column_holders(batch)
    found = {qn: t for qn, t in found.items() if qn not in holders or t not in _NO_COLUMNS}
    dropped: dict[str, tuple[str, str]] = {}  # placeholder guid -> (foreign type, qn)
    kept: list[dict[str, Any]] = []
    for entity in batch.get("entities") or []:
        qn = (entity.get("attributes") or {}).get("qualifiedName")
        if isinstance(qn, str) and qn in found and entity.get("typeName") in DEFAULT_REUSE_TYPES:
            dropped[str(entity.get("guid"))] = (found[qn], qn)
        else:
            kept.append(entity)
    if not found:
        return dict(batch)

    def ref(value: Any) -> Any:
        if isinstance(value, list):
            return [ref(v) for v in value]
        if not isinstance(value, dict) or "typeName" not in value:
            return value
        qn = (value.get("uniqueAttributes") or {}).get("qualifiedName")
        target = dropped.get(str(value.get("guid"))) or (
            (found[qn], qn) if isinstance(qn, str) and qn in found else None
        )
        if target is None or value.get("typeName") not in DEFAULT_REUSE_TYPES:
            converted = converts.get(str(value.get("guid"))) or (
                converts.get(qn) if isinstance(qn, str) else None
            )
            return value if converted is None else {**value, "typeName": converted}
        out = {"typeName": target[0], "uniqueAttributes": {"qualifiedName": target[1]}}
        if "relationshipType" in value:
            out["relationshipType"] = value["relationshipType"]
        return out

    # Our columns of foreign tables that the estate lacks: placeholder guid and qn -> the foreign column type.
    converts: dict[str, str] = {}
    for entity in kept:
        table = (entity.get("relationshipAttributes") or {}).get("table")
        if entity.get("typeName") == _COLUMN_TYPE and isinstance(table, dict):
            holder = ref(table)
            if holder is not table and holder["typeName"] in FOREIGN_COLUMN_TYPES:
                column_type = FOREIGN_COLUMN_TYPES[holder["typeName"]][0]
                converts[str(entity.get("guid"))] = converts[entity["attributes"]["qualifiedName"]] = (
                    column_type
                )

    entities = []
    for entity in kept:
        rels = dict(entity.get("relationshipAttributes") or {})
        if entity.get("typeName") == _COLUMN_TYPE and str(entity.get("guid")) in converts:
            holder = ref(rels["table"])
            column_type, relationship = FOREIGN_COLUMN_TYPES[holder["typeName"]]
            entities.append(
                _as_foreign_column(entity, column_type, {**holder, "relationshipType": relationship})
            )
            continue
        rels = {k: ref(v) for k, v in rels.items()}
        if isinstance(rels.get("columns"), list):
            # A table of ours cannot own another hook's column: those stay out of its column list.
            rels["columns"] = [
                c for c in rels["columns"] if str(c.get("typeName", "")).startswith("atlas_bridge")
            ]
        new = dict(entity)
        if rels or "relationshipAttributes" in entity:
            new["relationshipAttributes"] = rels
        entities.append(new)
    out = dict(batch)
    out["entities"] = entities
    return out


def dataset_names(batch: Mapping[str, Any]) -> dict[str, list[str]]:
    """Our dataset types in a batch -> their qualifiedNames (what there is to look up): the entities,
    and the references to ones an earlier batch held (that batch may have been sent by an earlier run)."""
    out: dict[str, list[str]] = {}

    def add(type_name: Any, qn: Any) -> None:
        if type_name in DEFAULT_REUSE_TYPES and isinstance(qn, str):
            out.setdefault(str(type_name), []).append(qn)

    def refs(value: Any) -> None:
        if isinstance(value, list):
            for v in value:
                refs(v)
        elif isinstance(value, dict) and "typeName" in value:
            add(value.get("typeName"), (value.get("uniqueAttributes") or {}).get("qualifiedName"))

    for entity in batch.get("entities") or []:
        add(entity.get("typeName"), (entity.get("attributes") or {}).get("qualifiedName"))
        for value in (entity.get("relationshipAttributes") or {}).values():
            refs(value)
    return out


def reuse_from_settings(settings: Any, client: Any) -> EntityReuse | None:
    """The reuse a run's settings ask for (None when switched off)."""
    types = parse_reuse_types(getattr(settings, "reuse_types", "default"))
    return EntityReuse(client.get_entities_by_qualified_names, types) if types else None


class EntityReuse:
    """Looks up, per run and in bulk, which of a batch's datasets exist under other hooks' types.

    ``lookup(type_name, qualified_names)`` returns the entities found (the client's
    ``get_entities_by_qualified_names``). Results, found or not, are cached for the run.
    """

    def __init__(
        self,
        lookup: Callable[[str, Sequence[str]], list[dict[str, Any]]],
        types: Mapping[str, Iterable[str]] | None = None,
        *,
        chunk: int = 100,
    ) -> None:
        self._lookup = lookup
        self.types = {k: tuple(v) for k, v in (DEFAULT_REUSE_TYPES if types is None else types).items()}
        self.chunk = chunk
        self._cache: dict[str, str | None] = {}
        self._found: dict[str, str] = {}
        """The cache's hits: qualifiedName -> the other hook's type."""
        self._absent: set[str] = set()
        self.lookups = 0
        """Lookup requests made."""
        self.reused = 0
        """Entities of ours left out because another hook's entity has the same qualifiedName."""
        self.looked_up = 0

    def rewrite(self, batch: Mapping[str, Any]) -> Mapping[str, Any]:
        """The batch as it is when none of its datasets is another hook's (an encoded batch then keeps
        its bytes), else :func:`rewrite_batch`'s copy."""
        if not self.types:
            return batch
        wanted = dataset_names(batch)
        for our_type, names in wanted.items():
            todo = [qn for qn in dict.fromkeys(names) if qn not in self._cache]
            self.looked_up += len(todo)
            for foreign in self.types.get(our_type, ()):
                if not todo:
                    break
                if foreign in self._absent:
                    continue
                for i in range(0, len(todo), self.chunk):
                    part = todo[i : i + self.chunk]
                    self.lookups += 1
                    try:
                        entities = self._lookup(foreign, part)
                    except AtlasError as e:
                        if e.status_code != 400:
                            raise  # Atlas down or refusing: the batch is not sent, as for its POST
                        # ATLAS-400-00-014: this Atlas has no such type (no Hive hook here): never ask again.
                        logger.info("no %s entities to reuse: %s", foreign, e.error_code or e)
                        self._absent.add(foreign)
                        break
                    for entity in entities:
                        qn = (entity.get("attributes") or {}).get("qualifiedName")
                        theirs = str(entity.get("typeName") or foreign)
                        # Atlas matches subtypes too: only another hook's type counts, never one of ours.
                        if isinstance(qn, str) and not theirs.startswith("atlas_bridge"):
                            self._cache[qn] = self._found[qn] = theirs
                todo = [qn for qn in todo if qn not in self._cache]
            for qn in todo:
                self._cache[qn] = None
        for qn in column_holders(batch):
            if self._found.get(qn) in _NO_COLUMNS:
                # Its columns need a dataset of ours to hang off: it stays ours for the run.
                del self._found[qn]
                self._cache[qn] = None
        if not any(qn in self._found for names in wanted.values() for qn in names):
            return batch
        out = rewrite_batch(batch, self._found)
        for entity in out.get("entities") or []:
            # Columns created under another hook's table: later batches refer to them by that type.
            if entity.get("typeName") in _FOREIGN_COLUMNS:
                qn = entity["attributes"]["qualifiedName"]
                self._cache[qn] = self._found[qn] = str(entity["typeName"])
        self.reused += len(batch.get("entities") or []) - len(out.get("entities") or [])
        return out


def post_batch(client: Any, batch: Mapping[str, Any], reuse: EntityReuse | None) -> dict[str, Any]:
    """POST a batch after reuse rewrote it; a batch left with nothing of ours to send is not sent (Atlas
    refuses an empty one: 400-01A) and counts as acknowledged."""
    body = reuse.rewrite(batch) if reuse is not None else batch
    if not entity_count(body):
        return {}
    response: dict[str, Any] = client.post_entities(body)
    return response
