"""Stage 3-4 (driver): the process tier kept on disk group by group, cut into bodies joined as JSON text.

A process and what it owns (its column lineage, executions) is one *group*: it travels in one body unless
it is too big for one. Each group is spilled once as

* a meta line (``meta.jsonl``): what cutting needs, the sizes of its entities;
* a text (``texts``, one after another, each as long as its meta line says): the group's entities as one
  JSON text with ``%d`` where a placeholder guid goes, valid whenever the group is whole in a body without
  datasets (nearly always), and its entities' names. Texts stay bytes from the spill to the body;
* the executor's records as they came (``records.jsonl``, read back by offset only for a body that needs
  them: one holding datasets, part of a split group, or a dataset whose type the merge changed).

So counting the bodies reads the small meta lines, and a body is, per group, one ``%`` formatting. Every
body is byte for byte the JSON of what :func:`atlas_bridge.atlas.convert.batches_from_records` renders.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from atlas_bridge.atlas.encoded import RefTable, attributes_text, dumps, loads, quote, ref_text

logger = logging.getLogger(__name__)
_first = operator.itemgetter(0)
_second = operator.itemgetter(1)
_third = operator.itemgetter(2)

ENTITY_BYTES = 96  # as convert._ENTITY_BYTES / _REF_BYTES: the size bound of an entity in a body
REF_BYTES = 96
CHILD_ARRAYS = ("columnLineages", "columns")  # as convert._CHILD_ARRAYS


class Group:
    """One owner and its children, as cutting sees them; ``data`` is what renders them."""

    __slots__ = ("data", "group", "sizes", "split", "tier")

    def __init__(self, tier: int, group: str, sizes: list[int], split: bool, data: Any) -> None:
        self.tier = tier
        self.group = group
        self.sizes = sizes
        self.split = split
        """Its owner lists its children (sent first without that array when the group is cut)."""
        self.data = data


Item = tuple[Group, int, bool]
"""In a body: a whole group (index -1), or one entity of a cut group (index, and whether it is the owner's
first copy, without its child arrays)."""


def cut_groups(groups: Iterable[Group], max_entities: int, max_bytes: int | None) -> Iterator[list[Item]]:
    """Bodies as :func:`atlas_bridge.atlas.convert._cut` cuts the same entities (decision for decision)."""
    chunk: list[Item] = []
    count = used = 0
    for g in groups:
        n = len(g.sizes)
        total = sum(g.sizes) if max_bytes is not None else 0
        if count and not (count + n <= max_entities and (max_bytes is None or used + total <= max_bytes)):
            yield chunk
            chunk, count, used = [], 0, 0
        if count + n <= max_entities and (max_bytes is None or used + total <= max_bytes):
            chunk.append((g, -1, False))
            count += n
            used += total
            continue
        seq = [(j, False) for j in range(n)]
        if g.split:
            seq = [(0, True), *seq[1:], (0, False)]
        for j, first in seq:
            size = g.sizes[j] if max_bytes is not None else 0
            if count and not (count + 1 <= max_entities and (max_bytes is None or used + size <= max_bytes)):
                yield chunk
                chunk, count, used = [], 0, 0
            chunk.append((g, j, first))
            count += 1
            used += size
    if chunk:
        yield chunk


def record_size(record: Mapping[str, Any], text_length: int) -> int:
    """The size bound of a record's entity in a body, from the length of its JSON (``convert._stream_size``
    of the entity ``convert._entity_of`` makes)."""
    return text_length + ENTITY_BYTES + REF_BYTES * reference_count(record["refs"])


class GroupText:
    """Builds a process group's text line: its entities' JSON with ``%d`` for each placeholder guid.

    References to datasets and columns never carry a guid in such a body (none is in it), and their text
    is the same in every group: it is made once per reference. A reference to an entity of the group
    carries that entity's guid; one to any other entity makes the text unusable (the group is then always
    rendered from its records).
    """

    def __init__(self, dataset_tier_types: frozenset[str], dataset_types: frozenset[str]) -> None:
        self.dataset_tier_types = dataset_tier_types
        self.dataset_types = dataset_types
        self._texts: dict[tuple[str, ...], str] = {}  # reference -> its JSON, "%" doubled
        self._by_name: dict[tuple[str, str], dict[str, str]] = {}  # the same by (type, relationship), name
        self._heads: dict[str, str] = {}  # typeName -> an entity's JSON up to its attributes
        self._keys: dict[tuple[bool, str, bool], str] = {}  # a relationship attribute's name, as it starts

    def _named(self, by_name: dict[str, str], kind: str, qn: str, rel: str) -> str:
        text = by_name.get(qn)
        if text is None:
            text = by_name[qn] = self._ref((kind, qn, rel))
        return text

    def _ref(self, key: tuple[str, ...]) -> str:
        text = self._texts.get(key)
        if text is None:
            text = self._texts[key] = (ref_text(key[0], key[1], key[2]) + "}").replace("%", "%%")
        return text

    def line(self, records: list[dict[str, Any]]) -> tuple[bool, str]:
        """Whether the text renders the group, and the line: ``[usable, dataset references, names, holes]``
        (JSON), a tab, the text."""
        names = [[r["typeName"], r["qualifiedName"]] for r in records]
        index: dict[tuple[str, str], int] = {}
        for j, (t, q) in enumerate(names):
            index.setdefault((t, q), j)
        usable = len(index) == len(names)
        holes: list[int] = []
        dsrefs: list[list[str]] = []
        tier_types, dataset_types = self.dataset_tier_types, self.dataset_types
        texts, heads, keys = self._texts, self._heads, self._keys
        own: dict[tuple[str, ...], str] = {}  # references within the group (each column lineage's process)
        parts: list[str] = []
        for j, rec in enumerate(records):
            type_name = rec["typeName"]
            head = heads.get(type_name)
            if head is None:
                head = heads[type_name] = '{"typeName":' + quote(type_name) + ',"guid":"-%d","attributes":'
            parts.append(head if not j else "," + head)
            parts.append(attributes_text(rec["attributes"]).replace("%", "%%"))
            holes.append(j)
            first = True
            refs = rec["refs"]
            for name in sorted(refs):
                value = refs[name]
                is_list = not (value and isinstance(value[0], str))
                key_of_name = (first, name, is_list)
                first = False
                lead = keys.get(key_of_name)
                if lead is None:
                    sep = ',"relationshipAttributes":{' if key_of_name[0] else ","
                    lead = keys[key_of_name] = sep + quote(name) + (":[" if is_list else ":")
                parts.append(lead)
                one = value if not is_list else value[0] if len(value) == 1 else None
                if one is not None:  # one reference (a column lineage's output, its process)
                    k = (one[0], one[1], one[2])
                    if k[0] in tier_types:
                        text = texts.get(k) or self._ref(k)
                        if k[0] in dataset_types:
                            dsrefs.append([k[0], k[1]])
                    else:
                        text = own.get(k)  # type: ignore[assignment]
                        if text is None:
                            at = index.get((k[0], k[1]))
                            if at is None:
                                usable = False
                                text = ""
                            else:
                                quoted = ref_text(k[0], k[1], k[2]).replace("%", "%%")
                                text = own[k] = quoted + ',"guid":"-%d"}'
                        if text:
                            holes.append(index[(k[0], k[1])])
                    parts.append(text + "]" if is_list else text)
                    continue
                if value:
                    kinds = set(map(_first, value))
                    rels = set(map(_third, value))
                    if len(kinds) == 1 and len(rels) == 1 and tier_types.issuperset(kinds):
                        # One type, one relationship (a column lineage's source columns): by name alone.
                        kind, rel = next(iter(kinds)), next(iter(rels))
                        names_sorted = sorted(set(map(_second, value)))
                        if kind in dataset_types:
                            dsrefs.extend([kind, q] for q in names_sorted)
                        by_name = self._by_name.setdefault((kind, rel), {})
                        found = list(map(by_name.get, names_sorted))
                        if None in found:
                            found = [self._named(by_name, kind, q, rel) for q in names_sorted]
                        parts.append(",".join(found))  # type: ignore[arg-type]
                        parts.append("]")
                        continue
                uniq = sorted(set(map(tuple, value)))
                kinds = set(map(_first, uniq))
                if not dataset_types.isdisjoint(kinds):
                    dsrefs.extend([k[0], k[1]] for k in uniq if k[0] in dataset_types)
                if tier_types.issuperset(kinds):
                    found = list(map(texts.get, uniq))
                    parts.append(",".join(map(self._ref, uniq) if None in found else found))  # type: ignore[arg-type]
                else:
                    out: list[str] = []
                    for k in uniq:
                        if k[0] in tier_types:
                            out.append(self._ref(k))
                            continue
                        at = index.get((k[0], k[1]))
                        if at is None:
                            usable = False
                            continue
                        mine = own.get(k)
                        if mine is None:
                            mine = own[k] = ref_text(k[0], k[1], k[2]).replace("%", "%%") + ',"guid":"-%d"}'
                        out.append(mine)
                        holes.append(at)
                    parts.append(",".join(out))
                parts.append("]")
            parts.append("}}" if not first else "}")
        return usable, dumps([int(usable), dsrefs, names, holes]) + "\t" + ("".join(parts) if usable else "")


def process_groups(
    lines: Iterable[tuple[str, str]] | Iterable[list[str]], texts: GroupText
) -> list[list[Any]]:
    """A unit's process tier as spill groups: ``[group, tier, sizes, split, text line, records]`` for each run
    of records of one owner, ``records`` their JSON as given, one a line, or ``""`` when the text line is
    usable (:func:`records_from_text` gives them back: they were a third of what executors sent). Pure
    (executors make them; the driver too, from ``process_lines``)."""
    out: list[list[Any]] = []
    run: list[dict[str, Any]] = []
    texts_of_run: list[str] = []

    def flush() -> None:
        owner = run[0]
        split = owner["qualifiedName"] == owner["group"] and any(k in owner["refs"] for k in CHILD_ARRAYS)
        sizes = [record_size(r, len(x) + 1) for r, x in zip(run, texts_of_run, strict=True)]
        usable, line = texts.line(run)
        # A usable text holds the records too (records_from_text): they travel only when it is not.
        records = "" if usable else "\n".join(texts_of_run) + "\n"
        out.append([owner["group"], owner["tier"], sizes, int(split), line, records])

    for _, line in lines:
        rec = loads(line)
        if run and (rec["tier"], rec["group"]) != (run[0]["tier"], run[0]["group"]):
            flush()
            run, texts_of_run = [], []
        run.append(rec)
        texts_of_run.append(line)
    if run:
        flush()
    return out


def render_records(
    items: list[tuple[dict[str, Any], bool]], counter: int, table: RefTable
) -> tuple[list[str], list[tuple[str, str, str]], int]:
    """Entities' JSON from their records (``convert._render``'s rules), in a body of these entities only:
    each item is a record and whether it is an owner's first copy (without its child arrays). Returns the
    texts, the (guid, typeName, qualifiedName) of each, and the last placeholder number used."""
    local: dict[tuple[str, str], str] = {}
    for rec, _ in items:
        counter += 1
        local.setdefault((rec["typeName"], rec["qualifiedName"]), f"-{counter}")
    local_datasets = any(rec["tier"] == 1 for rec, _ in items)
    texts: list[str] = []
    names: list[tuple[str, str, str]] = []
    for rec, first in items:
        key = (rec["typeName"], rec["qualifiedName"])
        guid = local[key]
        refs = rec["refs"]
        wanted = {k: None for k in refs if not (first and k in CHILD_ARRAYS)}
        # A dataset's references are its own (its table, its columns), each met once: not worth interning.
        rels = _plain_rels(refs) if rec["tier"] == 1 else table.rels(refs)[0]
        attrs = attributes_text(rec["attributes"])
        texts.append(table.entity_text(key[0], guid, attrs, rels, wanted, local, local_datasets))
        names.append((guid, key[0], key[1]))
    return texts, names, counter


def _plain_rels(refs: Mapping[str, Any]) -> list[Any]:
    """References as :meth:`RefTable.rels` gives them, none interned."""
    out: list[Any] = []
    for name, value in sorted(refs.items()):
        is_list = not (value and isinstance(value[0], str))
        out.append([name, int(is_list), 0, value if is_list else [value]])
    return out


def records_from_text(tier: int, group: str, head: str, text: str) -> list[dict[str, Any]]:
    """A usable group's records back from its text line's head and text (the parts either side of its tab),
    for a body that needs records: one holding datasets, part of a split group, a dataset retyped by the
    merge. Rendered as :func:`render_records` renders them, they give the same bytes as the records the
    executor made: rendering sorts attributes and references and drops repeats, and the text was made from
    those records by the same rules."""
    usable, _, names, holes = loads(head)
    if not usable:
        msg = f"group {group!r}: its text line is not usable, its records are needed"
        raise ValueError(msg)
    entities = loads("[" + text % ((0,) * len(holes)) + "]")
    out: list[dict[str, Any]] = []
    for (type_name, qualified_name), entity in zip(names, entities, strict=True):
        refs: dict[str, Any] = {}
        for name, value in entity.get("relationshipAttributes", {}).items():
            refs[name] = [_ref_of(v) for v in value] if isinstance(value, list) else _ref_of(value)
        out.append(
            {
                "tier": tier,
                "group": group,
                "typeName": type_name,
                "qualifiedName": qualified_name,
                "attributes": entity["attributes"],
                "refs": refs,
            }
        )
    return out


def _ref_of(ref: Mapping[str, Any]) -> list[str]:
    return [ref["typeName"], ref["uniqueAttributes"]["qualifiedName"], ref["relationshipType"]]


def reference_count(refs: Mapping[str, Any]) -> int:
    """How many references a record holds (as :func:`record_size` counts them)."""
    return sum(1 if v and isinstance(v[0], str) else len(v) for v in refs.values())
