"""Stage 3 (driver): fold the units' entity records: datasets merged in memory, the process tier spilled."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atlas_bridge.atlas.encoded import EncodedBatch, RefTable, attributes_text, body_text, dumps, loads
from atlas_bridge.atlas.limits import DEFAULT_MAX_BYTES
from atlas_bridge.model import Lineage, Relation

if TYPE_CHECKING:
    from atlas_bridge.atlas.convert import _Entity


class EntityCollector:
    """Driver side: folds the units' entity records, in unit order, into what is delivered.

    Datasets and columns are merged in memory (one record per qualifiedName: the union of columns, the
    most specific type, attributes first seen kept); they are as many as the distinct tables and columns,
    whatever the number of scripts. Process-tier records (processes, column lineage, executions) are
    final already and go straight to spill files, so the driver's memory does not grow with the number of
    statements. A process (by qualifiedName) seen in an earlier unit is skipped with everything it owns:
    the same statement writing the same tables, first occurrence in file order wins.
    """

    def __init__(self, spill_dir: str | os.PathLike[str]) -> None:
        self._dir = Path(spill_dir)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._datasets: dict[tuple[bool, str], list[Any]] = {}  # key -> [typeName, group, attributes]
        self._used: set[str] = set()
        self._kinds: dict[str, str] = {}
        self._process_relations: dict[str, int] = {}
        self._loose_relations: set[str] = set()
        self._groups: set[str] = set()
        self._defined: set[str] = set()  # datasets some unit defines (CTAS, view): they list their columns
        # One spill file: a unit's records come sorted, each process followed by what it owns.
        self._spill = [self._dir / "processes.jsonl"]
        self._fhs: list[io.TextIOWrapper] | None = [open(p, "w", encoding="utf-8") for p in self._spill]  # noqa: SIM115
        self._spilled = 0
        self._dataset_order: list[tuple[bool, str]] | None = None
        self._nbytes: dict[tuple[bool, str], int] = {}  # JSON size of each dataset record, once computed
        self._refs: RefTable | None = None  # references to the dataset tier, numbered (see _spill_line)

    def add(self, records: Mapping[str, Any]) -> None:
        """Fold one unit's records (see :func:`extract_partition`)."""
        from atlas_bridge.atlas.convert import merge_entity_record, record_key

        if self._fhs is None:
            msg = "the collector is finished"
            raise RuntimeError(msg)
        unused = set(records.get("unused", ()))
        for rec in records["datasets"]:
            key = record_key(rec)
            if not key[0] and rec["qualifiedName"] not in unused:
                self._used.add(rec["qualifiedName"])
            if not key[0] and "columns" in rec.get("refs", {}):
                self._defined.add(rec["qualifiedName"])
            old = self._datasets.get(key)
            if old is None:
                self._datasets[key] = [rec["typeName"], rec["group"], rec["attributes"]]
            else:
                merged = {"typeName": old[0], "attributes": old[2]}
                merge_entity_record(merged, rec)
                old[0] = merged["typeName"]
        # Process-tier records come as spill lines already (executors serialise them), or as records.
        lines = records.get("process_lines")
        if lines is None:
            lines = [
                [rec["group"], json.dumps(rec, separators=(",", ":"), ensure_ascii=False)]
                for rec in records["processes"]
            ]
        groups = {group for group, _ in lines}
        seen = groups & self._groups
        self._groups |= groups
        fh = self._fhs[0]
        for group, line in lines:
            if group in seen:
                continue
            fh.write(self._spill_line(line))
            self._spilled += 1
        for ds_id, kind in records.get("kinds", {}).items():
            old_kind = self._kinds.get(ds_id)
            if old_kind is None or (kind == "view" and old_kind != "view"):
                self._kinds[ds_id] = kind  # as merge_lineage: a table seen once as a view is a view
        for pid in records.get("process_ids", ()):
            if pid not in self._process_relations:
                self._process_relations[pid] = int(records.get("relations", {}).get(pid, 0))
        self._loose_relations.update(records.get("loose_relations", ()))

    def close(self) -> None:
        """Close the spill files (a run that failed before :meth:`finish`)."""
        if self._fhs is not None:
            for fh in self._fhs:
                fh.close()
            self._fhs = None

    def finish(self) -> None:
        """Close the spill files and fix the dataset tier's order (types are final now)."""
        self.close()
        if self._dataset_order is None:
            keep = [k for k, v in self._datasets.items() if v[1] in self._used]
            self._dataset_order = sorted(keep, key=self._sort_key)

    def _sort_key(self, key: tuple[bool, str]) -> tuple[str, int, str, str]:
        type_name, group, _ = self._datasets[key]
        return (group, 0 if key[1] == group else 1, type_name, key[1])

    @property
    def entities(self) -> int:
        """Entities to deliver (after :meth:`finish`)."""
        self.finish()
        assert self._dataset_order is not None
        return len(self._dataset_order) + self._spilled

    def batch_count(self, max_entities: int, max_bytes: int | None = DEFAULT_MAX_BYTES) -> int:
        """Bodies :meth:`batches` will give (cut without splitting an owner from its children)."""
        from atlas_bridge.atlas.convert import _cut, _stream_size

        if max_entities < 1:
            msg = f"max_entities must be at least 1, not {max_entities}"
            raise ValueError(msg)
        size = _stream_size if max_bytes is not None else None
        return sum(1 for _ in _cut(self._entities(False), max_entities, size, max_bytes))

    def counts(self) -> dict[str, int]:
        """Headline numbers for the report, as :func:`lineage_counts` gives them for a merged lineage."""
        kinds: dict[str, int] = {}
        for kind in self._kinds.values():
            kinds[kind] = kinds.get(kind, 0) + 1
        return {
            "datasets": len(self._kinds),
            "tables": kinds.get("table", 0),
            "views": kinds.get("view", 0),
            "paths": kinds.get("path", 0),
            "processes": len(self._groups),
            "statement_processes": len(self._process_relations),
            "column_relations": sum(self._process_relations.values()) + len(self._loose_relations),
        }

    def records(self) -> Iterator[dict[str, Any]]:
        """Every record in delivery order: datasets each with its columns, then processes each with its
        column lineage and executions (so an owner and its children travel in one body).

        Each has an ``nbytes``: the length of its JSON as the executor wrote it (a bound of its size in a
        body, see :func:`~atlas_bridge.atlas.convert.batches_from_records`).
        """

        yield from self._dataset_records()
        table = self._ref_table()
        for path in self._spill:
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    meta, rels, attrs = line.rstrip("\n").split("\t", 2)
                    tier, group, type_name, qn, nbytes, _count, _names = loads(meta)
                    yield {
                        "tier": tier,
                        "group": group,
                        "typeName": type_name,
                        "qualifiedName": qn,
                        "attributes": json.loads(attrs),
                        "refs": table.refs_of(json.loads(rels)),
                        "nbytes": nbytes,
                    }

    def _dataset_records(self) -> Iterator[dict[str, Any]]:
        """The dataset tier's records in delivery order (each with ``nbytes``, see :meth:`records`)."""
        from atlas_bridge.atlas.convert import REL_COLUMNS, TYPE_COLUMN

        self.finish()
        assert self._dataset_order is not None
        types = self.dataset_types()
        # A defined dataset lists every column the estate holds for it (the union), so none is dropped
        # that another unit still reads; a column no unit mentions any more leaves its Schema tab.
        owned: dict[str, list[list[str]]] = {}
        for key in self._dataset_order:
            type_name, group, _attrs = self._datasets[key]
            if type_name == TYPE_COLUMN and group in self._defined:
                owned.setdefault(group, []).append([TYPE_COLUMN, key[1], REL_COLUMNS])
        for key in self._dataset_order:
            type_name, group, attrs = self._datasets[key]
            refs: dict[str, Any] = {}
            if type_name == TYPE_COLUMN:
                refs = {"table": [types[group], group, REL_COLUMNS]}
            elif key[1] in self._defined:
                refs = {"columns": owned.get(key[1], [])}
            record = {
                "tier": 1,
                "group": group,
                "typeName": type_name,
                "qualifiedName": key[1],
                "attributes": attrs,
                "refs": refs,
            }
            nbytes = self._nbytes.get(key)
            if nbytes is None:  # once per dataset: each later pass (count, then send) reuses it
                nbytes = self._nbytes[key] = len(dumps(record))
            record["nbytes"] = nbytes
            yield record

    def _entities(self, render: bool) -> Iterator[_Entity]:
        """What :func:`~atlas_bridge.atlas.convert._cut` cuts: every entity with its size and the names of
        its references; with ``render``, its ``attributes`` hold what :meth:`batches` renders it from."""
        from atlas_bridge.atlas.convert import _ENTITY_BYTES, _REF_BYTES, _Entity, _Ref

        for record in self._dataset_records():
            names: dict[str, list[_Ref] | _Ref] = {k: [] for k in record["refs"]}
            count = sum(1 if v and isinstance(v[0], str) else len(v) for v in record["refs"].values())
            yield _Entity(
                1,
                record["group"],
                record["typeName"],
                record["qualifiedName"],
                {"": record if render else None},
                names,
                record["nbytes"] + _ENTITY_BYTES + _REF_BYTES * count,
            )
        for path in self._spill:
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    meta, _, rest = line.partition("\t")
                    tier, group, type_name, qn, nbytes, count, ref_names = loads(meta)
                    names = {k: [] for k in ref_names}
                    yield _Entity(
                        tier,
                        group,
                        type_name,
                        qn,
                        {"": rest if render else None},
                        names,
                        nbytes + _ENTITY_BYTES + _REF_BYTES * count,
                    )

    def _ref_table(self) -> RefTable:
        if self._refs is None:
            from atlas_bridge.atlas.convert import _DATASET_TYPES, TYPE_COLUMN

            self._refs = RefTable(_DATASET_TYPES | {TYPE_COLUMN}, _DATASET_TYPES)
        return self._refs

    def _spill_line(self, line: str) -> str:
        """A process-tier record's spill line: what cutting needs (JSON), its references (JSON: numbers
        for those to datasets and columns, see :class:`RefTable`), its attributes as sent (JSON); tabs
        between (JSON text holds no raw tab).

        ``line`` is the record's JSON as the executor wrote it; its length bounds the entity's size in a
        body (see ``convert._stream_size``), so the cut does not depend on how the record is kept here.
        """
        rec = loads(line)
        rels, count = self._ref_table().rels(rec["refs"])
        meta = [
            rec["tier"],
            rec["group"],
            rec["typeName"],
            rec["qualifiedName"],
            len(line) + 1,
            count,
            [r[0] for r in rels],
        ]
        return dumps(meta) + "\t" + dumps(rels) + "\t" + attributes_text(rec["attributes"]) + "\n"

    def dataset_types(self) -> dict[str, str]:
        """Final typeName of every dataset, by qualifiedName."""
        return {k[1]: v[0] for k, v in self._datasets.items() if not k[0]}

    def batches(self, max_entities: int, max_bytes: int | None = DEFAULT_MAX_BYTES) -> Iterator[EncodedBatch]:
        """The bulk bodies, one at a time, as JSON text: each is, byte for byte, the JSON (as the Atlas
        client encodes a body) of what :func:`atlas_bridge.atlas.convert.batches_from_records` renders from
        :meth:`records`."""
        from atlas_bridge.atlas.convert import _cut, _stream_size

        if max_entities < 1:
            msg = f"max_entities must be at least 1, not {max_entities}"
            raise ValueError(msg)
        table = self._ref_table()
        table.finalize(self.dataset_types())
        size = _stream_size if max_bytes is not None else None
        counter = 0
        for chunk in _cut(self._entities(True), max_entities, size, max_bytes):
            local: dict[tuple[str, str], str] = {}
            for e in chunk:
                counter += 1
                local.setdefault(e.key, f"-{counter}")
            local_datasets = chunk[0].tier == 1  # the dataset tier comes first
            texts: list[str] = []
            names: list[tuple[str, str, str]] = []
            for e in chunk:
                guid = local[e.key]
                payload = e.attributes[""]
                if isinstance(payload, str):  # a spill line's references and attributes
                    rels_text, _, attrs = payload.rstrip("\n").partition("\t")
                    rels = loads(rels_text)
                else:  # a dataset record
                    rels, _ = table.rels(payload["refs"])
                    attrs = attributes_text(payload["attributes"])
                texts.append(table.entity_text(e.type_name, guid, attrs, rels, e.refs, local, local_datasets))
                names.append((guid, e.type_name, e.qualified_name))
            yield EncodedBatch(body_text(texts), names)


def distinct_relations(parts: Iterable[Lineage], *, strip_spans: bool = False) -> Iterator[Lineage]:
    """The parts with every relation an earlier part had already dropped, as they stream by.

    ``merge_lineage`` keeps every relation until the merged lineage is built; dropping repeats on the way
    keeps the merge as big as the distinct lineage when a statement recurs across an estate, not as big as
    the estate. ``strip_spans`` first drops relation positions, which keep copies of a statement apart.
    """
    seen: set[Relation] = set()  # frozen models hash by value; the set holds the kept objects, no copies
    for part in parts:
        fresh: list[Relation] = []
        for rel in part.relations:
            if strip_spans and rel.span is not None:
                rel = rel.model_copy(update={"span": None})
            if rel not in seen:
                seen.add(rel)
                fresh.append(rel)
        yield part.model_copy(update={"relations": tuple(fresh)})
