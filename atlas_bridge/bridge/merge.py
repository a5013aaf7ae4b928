"""Stage 3 (driver): fold the units' entity records: datasets merged in memory, the process tier spilled."""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from atlas_bridge.atlas.encoded import EncodedBatch, RefTable, body_data, dumps, loads
from atlas_bridge.atlas.limits import DEFAULT_MAX_BYTES
from atlas_bridge.bridge.bodies import (
    CHILD_ARRAYS,
    ENTITY_BYTES,
    REF_BYTES,
    Group,
    GroupText,
    Item,
    cut_groups,
    process_groups,
    record_size,
    records_from_text,
    reference_count,
    render_records,
)
from atlas_bridge.model import Lineage, PausedGC, Relation

logger = logging.getLogger(__name__)


def _record_line(record: Mapping[str, Any]) -> str:
    """A process-tier record's JSON line, as executors write it (its length bounds the entity's size)."""
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


class EntityCollector:
    """Driver side: folds the units' entity records, in unit order, into what is delivered.

    Datasets and columns are merged in memory (one record per qualifiedName: the union of columns, the
    most specific type, attributes first seen kept); they are as many as the distinct tables and columns,
    whatever the number of scripts. Process-tier records (processes, column lineage, executions) are
    final already and go straight to spill files, so the driver's memory does not grow with the number of
    statements. A process (by qualifiedName) that later units hold too (statements of several scripts
    sharing operation, inputs and outputs) is sent once, as the union of all of them: its later
    occurrences are spilled aside with what their merge needs (each unit's ``sides``), and
    :meth:`finish` merges them with the first (:func:`~atlas_bridge.atlas.convert.merge_process_group`),
    so memory grows with the processes that recur, never with those seen once.
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
        # The process tier on disk, group by group (see atlas_bridge.bridge.bodies): a unit's records come
        # sorted, each process followed by what it owns.
        self._meta_path = self._dir / "meta.jsonl"
        self._text_path = self._dir / "texts"
        self._records_path = self._dir / "records.jsonl"
        self._tasks_path = self._dir / "tasks"  # the tasks' text files (local masters), see task_dir
        # What merging a recurring process needs: each first occurrence's side (where: its meta line),
        # the later occurrences whole (records, text and side, a line each), then the merged groups (meta
        # lines and texts, in the order of the first occurrences they replace; records in records.jsonl).
        self._sides_path = self._dir / "sides.jsonl"
        self._aside_path = self._dir / "aside.jsonl"
        self._merged_meta_path = self._dir / "merged.jsonl"
        self._merged_text_path = self._dir / "merged-texts"
        self._fhs: list[Any] | None = [
            open(self._meta_path, "w", encoding="utf-8"),  # noqa: SIM115
            open(self._text_path, "wb"),  # noqa: SIM115
            open(self._records_path, "wb"),  # noqa: SIM115
            open(self._sides_path, "wb"),  # noqa: SIM115
            open(self._aside_path, "wb"),  # noqa: SIM115
        ]
        for path in (self._merged_meta_path, self._merged_text_path):
            path.unlink(missing_ok=True)
        self._offset = 0  # bytes written to the records file
        self._side_offset = 0  # ... to the sides file
        self._aside_offset = 0  # ... to the aside file
        self._aside: dict[str, list[int]] = {}  # a recurring group -> where its later occurrences are
        self._merged = False  # the recurring groups are merged (merged.jsonl replaces their first lines)
        self._spilled = 0
        self._group_text: GroupText | None = None
        self._dataset_groups: list[Group] | None = None
        self._dataset_order: list[tuple[bool, str]] | None = None
        self._nbytes: dict[tuple[bool, str], int] = {}  # JSON size of each dataset record, once computed
        self._refs: RefTable | None = None  # references to the dataset tier, numbered (bodies with datasets)

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
        # Process-tier records come as spill groups (made where they were converted), as the records' JSON
        # (executors serialise them), or as records.
        entries = records.get("process_groups")
        if entries is None:
            lines = records.get("process_lines")
            if lines is None:
                lines = [[rec["group"], _record_line(rec)] for rec in records["processes"]]
            entries = process_groups(lines, self._texts())
        sides = records.get("sides", {})
        for entry in entries:
            side = sides.get(entry[0])
            side_text = b"" if side is None else dumps(side).encode("utf-8")
            if entry[0] in self._groups:
                self._spill_aside(entry, side_text)
            else:
                self._spill_group(entry, side_text)
        self._groups.update(e[0] for e in entries)
        for ds_id, kind in records.get("kinds", {}).items():
            old_kind = self._kinds.get(ds_id)
            if old_kind is None or (kind == "view" and old_kind != "view"):
                self._kinds[ds_id] = kind  # as merge_lineage: a table seen once as a view is a view
        for pid in records.get("process_ids", ()):
            if pid not in self._process_relations:
                self._process_relations[pid] = int(records.get("relations", {}).get(pid, 0))
        self._loose_relations.update(records.get("loose_relations", ()))

    def reset(self) -> None:
        """Empty again (spill files truncated): a merge that ran ahead is dropped for another."""
        self.close()
        self.__init__(self._dir)  # type: ignore[misc]

    def close(self) -> None:
        """Close the spill files (a run that failed before :meth:`finish`)."""
        if self._fhs is not None:
            for fh in self._fhs:
                fh.close()
            self._fhs = None

    def finish(self) -> None:
        """Merge the processes several units hold, close the spill files and fix the dataset tier's order
        (types are final now)."""
        if self._fhs is not None and self._aside:
            self._merge_recurring()
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
        if max_entities < 1:
            msg = f"max_entities must be at least 1, not {max_entities}"
            raise ValueError(msg)
        self.finish()
        with PausedGC():
            return sum(1 for _ in cut_groups(self._all_groups(False), max_entities, max_bytes))

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
        with open(self._records_path, "rb") as raw:
            for g in self._all_groups(True):
                if g.tier == 1:
                    continue
                for record, size in zip(self._process_records(g, raw), g.sizes, strict=True):
                    # The size of its JSON as the executor wrote it bounds the entity's (see convert).
                    record["nbytes"] = size - ENTITY_BYTES - REF_BYTES * reference_count(record["refs"])
                    yield record

    @staticmethod
    def _process_records(g: Group, raw: Any) -> list[dict[str, Any]]:
        """A process group's records: from the records file, or back from its text when it is usable (then
        only the text was sent, see :func:`process_groups`)."""
        info, text, offset, length = g.data
        if not length:
            return records_from_text(g.tier, g.group, info.decode("utf-8"), text.decode("utf-8"))
        raw.seek(offset)
        return [loads(x) for x in raw.read(length).decode("utf-8").split("\n") if x]

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

    def _ref_table(self) -> RefTable:
        if self._refs is None:
            from atlas_bridge.atlas.convert import _DATASET_TYPES, TYPE_COLUMN

            self._refs = RefTable(_DATASET_TYPES | {TYPE_COLUMN}, _DATASET_TYPES)
        return self._refs

    def _texts(self) -> GroupText:
        if self._group_text is None:
            from atlas_bridge.atlas.convert import _DATASET_TYPES, TYPE_COLUMN

            self._group_text = GroupText(_DATASET_TYPES | {TYPE_COLUMN}, _DATASET_TYPES)
        return self._group_text

    @property
    def task_dir(self) -> Path:
        """Where the tasks of a local master write the groups' text lines (``extract_partition``'s
        ``text_sink``): beside the spill, and let go with it."""
        self._tasks_path.mkdir(exist_ok=True)
        return self._tasks_path

    def _spill_group(self, entry: list[Any], side: bytes, merged: tuple[Any, Any] | None = None) -> None:
        """Write one process group (see :func:`process_groups`): meta line, text line, its records, its
        side (what merging it with a later unit's needs). A text line a task wrote already (``[file,
        offset, length, tab]``) stays where it is. ``merged``: the meta and text files of merged groups."""
        assert self._fhs is not None
        group, tier, sizes, split, text_line, records = entry
        meta, text, raw, sides, _ = self._fhs
        if merged is not None:
            meta, text = merged
        # Bytes from the executor (decode_unit) to the body: a body is bytes on the wire.
        data = records if isinstance(records, bytes) else records.encode("utf-8")
        where: list[Any] = []
        if isinstance(text_line, list):
            name, at, length, tab = text_line
            if not isinstance(name, str) or not _TASK_FILE_NAME.fullmatch(name):
                msg = f"not a task's text file: {name!r}"
                raise ValueError(msg)
            where = [name, int(at)]
        else:
            line = text_line if isinstance(text_line, bytes) else text_line.encode("utf-8")
            # Where the line's tab is: the head and the text are read apart, without copying the text.
            tab, length = line.index(b"\t"), len(line)
            text.write(line)
        sides.write(side)
        at = [self._offset, len(data), tab, length, self._side_offset, len(side), *where]
        meta.write(dumps([tier, group, sizes, split, *at]) + "\n")
        raw.write(data)
        self._offset += len(data)
        self._side_offset += len(side)
        self._spilled += len(sizes)

    def _spill_aside(self, entry: list[Any], side: bytes) -> None:
        """Keep a later occurrence of a process group (another unit holds it too) for :meth:`finish`: its
        records (or text line, read from its task's file if there), and its side, on one line."""
        assert self._fhs is not None
        group, tier, sizes, split, text_line, records = entry
        if isinstance(text_line, list):
            name, at, length, _ = text_line
            if not isinstance(name, str) or not _TASK_FILE_NAME.fullmatch(name):
                msg = f"not a task's text file: {name!r}"
                raise ValueError(msg)
            with _TaskFiles(self._tasks_path) as tasks:
                text_line = tasks.at(name, int(at)).read(int(length))
        line = text_line.decode("utf-8") if isinstance(text_line, bytes) else text_line
        data = records.decode("utf-8") if isinstance(records, bytes) else records
        side_value = loads(side.decode("utf-8")) if side else None
        row = (dumps([group, tier, sizes, split, line, data, side_value]) + "\n").encode("utf-8")
        self._fhs[4].write(row)
        self._aside.setdefault(group, []).append(self._aside_offset)
        self._aside_offset += len(row)

    def _merge_recurring(self) -> None:
        """Each process group several units hold, as the union of their statements: merged with its later
        occurrences into merged.jsonl, which :meth:`_all_groups` reads in place of its first occurrence."""
        from atlas_bridge.atlas.convert import merge_process_group

        assert self._fhs is not None
        for fh in self._fhs:
            fh.flush()
        with (
            open(self._merged_meta_path, "w", encoding="utf-8") as merged_meta,
            open(self._merged_text_path, "wb") as merged_text,
            open(self._records_path, "rb") as raw,
            open(self._sides_path, "rb") as sides,
            open(self._aside_path, "rb") as aside,
        ):
            unchanged: list[str] = []
            for g, side_at, side_length in self._spilled_groups(True, with_sides=True):
                later = self._aside.get(g.group)
                if later is None:
                    continue
                sides.seek(side_at)
                side = loads(sides.read(side_length).decode("utf-8")) if side_length else None
                occurrences = [(self._process_records(g, raw), side)]
                for at in later:
                    aside.seek(at)
                    _, tier, _, _, line, data, later_side = loads(aside.readline().decode("utf-8"))
                    if data:
                        recs = [loads(x) for x in data.split("\n") if x]
                    else:
                        head, _, body = line.partition("\t")
                        recs = records_from_text(tier, g.group, head, body)
                    occurrences.append((recs, later_side))
                sided = [(r, s) for r, s in occurrences if s is not None]
                if len(sided) < len(occurrences):  # records made without sides: the first stays
                    logger.warning(
                        "process %s: units without what merging needs, the first one's kept", g.group
                    )
                    merged = occurrences[0][0]
                else:
                    merged = merge_process_group(sided)
                if merged == occurrences[0][0]:  # the later ones add nothing (a script copied): it stays
                    unchanged.append(g.group)
                    continue
                lines = [(r["group"], _record_line(r)) for r in merged]
                (entry,) = process_groups(lines, self._texts())
                self._spilled -= len(g.sizes)
                self._spill_group(entry, b"", (merged_meta, merged_text))
        for group in unchanged:
            del self._aside[group]
        self._merged = True

    def _groups_of_datasets(self) -> list[Group]:
        """The dataset tier as groups (a dataset and its columns), made once (types are final then)."""
        if self._dataset_groups is None:
            groups: list[Group] = []
            for record in self._dataset_records():
                size = record_size(record, record["nbytes"])
                last = groups[-1] if groups else None
                if last is not None and last.group == record["group"]:
                    last.sizes.append(size)
                    last.data.append(record)
                    continue
                owner = record["qualifiedName"] == record["group"]
                split = owner and any(k in record["refs"] for k in CHILD_ARRAYS)
                groups.append(Group(1, record["group"], [size], split, [record]))
            self._dataset_groups = groups
        return self._dataset_groups

    def _all_groups(self, render: bool) -> Iterator[Group]:
        """Every group in delivery order; with ``render``, a process group's ``data`` is its text line's head
        and text (the tab between them skipped), and where its records are."""
        yield from self._groups_of_datasets()
        for g, _, _ in self._spilled_groups(render):
            yield g

    def _spilled_groups(self, render: bool, *, with_sides: bool = False) -> Iterator[tuple[Group, int, int]]:
        """The process groups (see :meth:`_all_groups`), each with where its side is; once merged, a group
        several units hold is its merged group, where its first occurrence was (``with_sides``: never)."""
        merged = self._merged and not with_sides
        with (
            open(self._meta_path, encoding="utf-8") as meta,
            open(self._text_path, "rb") as own,
            _TaskFiles(self._tasks_path) as tasks,
            open(self._merged_meta_path if merged else os.devnull, encoding="utf-8") as merged_meta,
            open(self._merged_text_path if merged else os.devnull, "rb") as merged_text,
        ):
            for line in meta:
                tier, group, sizes, split, offset, length, tab, text_length, side_at, side_length, *where = (
                    loads(line)
                )
                text = own
                if merged and group in self._aside:
                    if render and not where:
                        own.seek(text_length, os.SEEK_CUR)  # its text, replaced by the merged group's
                    tier, group, sizes, split, offset, length, tab, text_length, *_ = loads(next(merged_meta))
                    where, text = [], merged_text
                if render:
                    if where:
                        text = tasks.at(*where)  # a task's file
                    head, _, body = text.read(tab), text.read(1), text.read(text_length - tab - 1)
                    yield (
                        Group(tier, group, sizes, bool(split), (head, body, offset, length)),
                        side_at,
                        side_length,
                    )
                else:
                    yield Group(tier, group, sizes, bool(split), None), side_at, side_length

    def dataset_types(self) -> dict[str, str]:
        """Final typeName of every dataset, by qualifiedName."""
        return {k[1]: v[0] for k, v in self._datasets.items() if not k[0]}

    def batches(self, max_entities: int, max_bytes: int | None = DEFAULT_MAX_BYTES) -> Iterator[EncodedBatch]:
        """The bulk bodies, one at a time, as JSON text: each is, byte for byte, the JSON (as the Atlas
        client encodes a body) of what :func:`atlas_bridge.atlas.convert.batches_from_records` renders from
        :meth:`records`."""
        if max_entities < 1:
            msg = f"max_entities must be at least 1, not {max_entities}"
            raise ValueError(msg)
        self.finish()
        types = self.dataset_types()
        table = self._ref_table()
        table.finalize(types)
        counter = 0
        with open(self._records_path, "rb") as raw:

            def records_of(g: Group) -> list[dict[str, Any]]:
                return list(g.data) if g.tier == 1 else self._process_records(g, raw)

            def body(chunk: list[Item]) -> EncodedBatch:
                nonlocal counter
                lines = [loads(g.data[0].decode("ascii")) if g.tier != 1 else None for g, _, _ in chunk]
                fast = all(
                    j == -1 and info is not None and info[0] and all(types.get(q, t) == t for t, q in info[1])
                    for (_, j, _), info in zip(chunk, lines, strict=True)
                )
                texts: list[bytes] = []
                names: list[tuple[str, str, str]] = []
                if fast:  # each group whole, no dataset in the body: its text with the guids filled in
                    for (g, _, _), info in zip(chunk, lines, strict=True):
                        assert info is not None
                        _, _, entity_names, holes = info
                        base = counter + 1
                        texts.append(g.data[1] % tuple([base + j for j in holes]))
                        names.extend((f"-{base + j}", t, q) for j, (t, q) in enumerate(entity_names))
                        counter += len(entity_names)
                else:
                    items: list[tuple[dict[str, Any], bool]] = []
                    loaded: dict[int, list[dict[str, Any]]] = {}
                    for g, j, first in chunk:
                        recs = loaded.get(id(g))
                        if recs is None:
                            recs = loaded[id(g)] = records_of(g)
                        if j == -1:
                            items.extend((r, False) for r in recs)
                        else:
                            if max_bytes is not None and g.sizes[j] > max_bytes:
                                logger.warning(
                                    "entity %s alone is %d bytes, over max_bytes=%d",
                                    recs[j]["qualifiedName"],
                                    g.sizes[j],
                                    max_bytes,
                                )
                            items.append((recs[j], first))
                    rendered, names, counter = render_records(items, counter, table)
                    texts = [t.encode("ascii") for t in rendered]
                return EncodedBatch(body_data(texts), names)

            # Python's cyclic collector paused while a body is made (thousands of small objects, all alive
            # until the body is done), never while the caller sends it.
            chunks = cut_groups(self._all_groups(True), max_entities, max_bytes)
            while True:
                with PausedGC():
                    chunk = next(chunks, None)
                    batch = None if chunk is None else body(chunk)
                if batch is None:
                    return
                yield batch


def task_file_name(attempt: int) -> str:
    """The name of the file a task attempt writes its text lines to, in :attr:`EntityCollector.task_dir`."""
    return f"texts-{attempt}"


_TASK_FILE_NAME = re.compile(r"texts-[0-9]+")  # what task_file_name makes: a name, never a path


class _TaskFiles:
    """The tasks' text files, read in the order the groups come (mostly one file after another): one open
    at a time."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._name = ""
        self._fh: Any = None

    def __enter__(self) -> _TaskFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._fh.close()

    def at(self, name: str, offset: int) -> Any:
        """The file ``name``, positioned at ``offset``."""
        if name != self._name:
            if self._fh is not None:
                self._fh.close()
            self._fh, self._name = open(self._dir / name, "rb"), name  # noqa: SIM115
        self._fh.seek(offset)
        return self._fh


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
