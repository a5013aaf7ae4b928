"""Bulk bodies assembled as JSON text from pre-encoded entity pieces (the scan's driver, issue 13).

A scan delivers hundreds of thousands of entities whose JSON is fixed once the executors made their
records; only the placeholder guids depend on how the bodies are cut. Rendering each entity into dicts
that a client then encodes again was most of the driver's serial work. Here an entity record becomes a
*template* once (its attributes' JSON, and each reference's JSON up to where a guid may follow); a body
is then joined from the templates with the guids of the entities in it. The text is exactly what
``json.dumps(body, separators=(",", ":"))`` gives for the body :func:`~atlas_bridge.atlas.convert.
batches_from_records` renders from the same records (the Atlas client's encoding), so what goes to Atlas,
to files and into the resume state's hashes is unchanged; :class:`EncodedBatch` decodes the body only
when something needs it as data.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Iterator, Mapping
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

_first = operator.itemgetter(0)
_quote = encode_basestring_ascii  # the C encoder ``json.dumps`` uses for strings (ASCII-only output)
quote = _quote


class EncodedBatch(Mapping[str, Any]):
    """One bulk body as its JSON bytes, read-only; a mapping that decodes them when first read.

    ``data`` is what the Atlas client posts; ``entity_count`` and ``names`` answer the delivery's own
    questions (how many entities, which guid went to which entity) without decoding the body.
    """

    __slots__ = ("_body", "data", "entity_count", "names")

    def __init__(self, data: bytes, names: list[tuple[str, str, str]]) -> None:
        self.data = data
        """The body as the Atlas client sends it (compact JSON, ASCII)."""
        self.names = names
        """(placeholder guid, typeName, qualifiedName) of each entity, in order."""
        self.entity_count = len(names)
        self._body: dict[str, Any] | None = None

    @property
    def decoded(self) -> bool:
        """Whether something read the body as data (a delivery that only posts it never does)."""
        return self._body is not None

    @property
    def body(self) -> dict[str, Any]:
        """The body as data (decoded once)."""
        if self._body is None:
            self._body = json.loads(self.data)
        return self._body

    def __getitem__(self, key: str) -> Any:
        return self.body[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.body)

    def __len__(self) -> int:
        return len(self.body)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EncodedBatch):
            return self.data == other.data
        return isinstance(other, Mapping) and self.body == dict(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EncodedBatch({self.entity_count} entities, {len(self.data)} bytes)"


def as_dict(batch: Mapping[str, Any]) -> dict[str, Any]:
    """A batch as a plain dict (for ``json.dumps``), decoding an :class:`EncodedBatch`."""
    if isinstance(batch, EncodedBatch):
        return batch.body
    return batch if isinstance(batch, dict) else dict(batch)


def entity_count(batch: Mapping[str, Any]) -> int:
    """Entities in a batch's ``entities`` (an :class:`EncodedBatch` says so without being decoded)."""
    if isinstance(batch, EncodedBatch):
        return batch.entity_count
    return len(batch.get("entities") or [])


def encode_body(body: Mapping[str, Any]) -> bytes:
    """The bytes the Atlas client posts for a body: its own text for an :class:`EncodedBatch`."""
    if isinstance(body, EncodedBatch):
        return body.data
    return json.dumps(as_dict(body), separators=(",", ":")).encode("utf-8")


# json.dumps(obj, separators=(",", ":")) and json.loads(text) of the C modules, built once: most of the
# driver's JSON is small pieces, where building an encoder per call cost more than encoding.
_encode = c_make_encoder(None, None, _quote, None, ":", ",", False, False, True)
_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def dumps(obj: Any) -> str:
    """``json.dumps(obj, separators=(",", ":"))`` of JSON data (dicts, lists, strings, numbers)."""
    return "".join(_encode(obj, 0))


def loads(text: str) -> Any:
    """``json.loads`` of a text that starts with its value (no leading white space)."""
    try:
        return _scan(text, 0)[0]
    except StopIteration:
        return json.loads(text)  # raises the usual JSONDecodeError


def attributes_text(attributes: Mapping[str, Any]) -> str:
    """An entity's ``attributes`` as they appear in a body (sorted, as ``convert._render`` orders them)."""
    return dumps(dict(sorted(attributes.items())))


def _ref_text(type_name: str, qualified_name: str, relationship_type: str) -> str:
    """A reference's JSON up to its closing brace (a ``guid`` member follows when its entity is local)."""
    return (
        '{"typeName":'
        + _quote(type_name)
        + ',"uniqueAttributes":{"qualifiedName":'
        + _quote(qualified_name)
        + '},"relationshipType":'
        + _quote(relationship_type)
    )


class RefTable:
    """References to the dataset tier (datasets, columns), each kept once and named by a number.

    They are most of a scan's references (every column lineage lists its source columns) but only as many
    distinct ones as there are datasets and columns, whatever the number of statements. Spilled records
    hold their numbers; once the merge has fixed every dataset's type, :meth:`finalize` renders each
    distinct reference once, with that type.
    """

    def __init__(self, interned_types: frozenset[str], dataset_types: frozenset[str]) -> None:
        self.interned_types = interned_types
        """typeNames whose references are kept here (the dataset tier's)."""
        self.dataset_types = dataset_types
        """typeNames whose references take the dataset's merged type."""
        self.ids: dict[tuple[str, str, str], int] = {}
        self.raw: list[tuple[str, str, str]] = []
        self._types: Mapping[str, str] | None = None
        self.sort_keys: list[tuple[str, str, str]] = []
        self.keys: list[tuple[str, str]] = []
        self.canon: list[int] = []
        self.opened: list[str] = []
        self.closed: list[str] = []
        self._canon_of: dict[tuple[str, str, str], int] = {}

    def intern(self, ref: list[str] | tuple[str, str, str]) -> int:
        key = (ref[0], ref[1], ref[2])
        i = self.ids.get(key)
        if i is None:
            i = self.ids[key] = len(self.raw)
            self.raw.append(key)
            if self._types is not None:
                self._render(i)
        return i

    def finalize(self, types: Mapping[str, str]) -> None:
        """Render every reference with the datasets' final types (and those interned from now on)."""
        self._types = types
        self.sort_keys, self.keys, self.canon, self.opened, self.closed = [], [], [], [], []
        self._canon_of = {}
        for i in range(len(self.raw)):
            self._render(i)

    def _render(self, i: int) -> None:
        assert self._types is not None
        t, q, r = self.raw[i]
        if t in self.dataset_types:
            t = self._types.get(q, t)  # the type only the merge knows
        key = (t, q, r)
        self.sort_keys.append(key)
        self.keys.append((t, q))
        self.canon.append(self._canon_of.setdefault(key, i))  # two names of one reference after the merge
        text = _ref_text(t, q, r)
        self.opened.append(text)
        self.closed.append(text + "}")

    def rels(self, refs: Mapping[str, Any]) -> tuple[list[Any], int]:
        """A record's references as spilled: ``[[name, is_list, interned, items], ...]`` by name, items the
        numbers of interned references or the raw ``[type, qn, relationship]`` (process tier); and how
        many references the record holds (as written)."""
        out: list[Any] = []
        count = 0
        interned_types = self.interned_types
        get = self.ids.get
        for name, value in sorted(refs.items()):
            is_list = not (value and isinstance(value[0], str))
            items = value if is_list else [value]
            count += len(items)
            if interned_types.issuperset(map(_first, items)):
                nums = list(map(get, map(tuple, items)))  # C loops: these are most of a scan's references
                if None in nums:
                    nums = [self.intern(r) for r in items]
                out.append([name, int(is_list), 1, nums])
            else:
                out.append([name, int(is_list), 0, items])
        return out, count

    def refs_of(self, rels: list[Any]) -> dict[str, Any]:
        """The record's references back from :meth:`rels` (as written: order and repeats kept)."""
        out: dict[str, Any] = {}
        for name, is_list, interned, items in rels:
            values = [list(self.raw[i]) for i in items] if interned else items
            out[name] = values if is_list else values[0]
        return out

    def entity_text(
        self,
        type_name: str,
        guid: str,
        attrs: str,
        rels: list[Any],
        names: Mapping[str, Any],
        local: Mapping[tuple[str, str], str],
        local_datasets: bool = True,
    ) -> str:
        """An entity's JSON in a body, as ``json.dumps(convert._render(...), separators=(",", ":"))``:
        ``rels`` from :meth:`rels`, only those in ``names``; ``local`` gives the guids of the entities in
        the same body (a reference to one of them carries its guid); ``local_datasets`` False says none of
        them is a dataset or column."""
        parts = ['{"typeName":', _quote(type_name), ',"guid":"', guid, '","attributes":', attrs]
        sep = ',"relationshipAttributes":{'
        for name, is_list, interned, items in rels:
            if name not in names:
                continue
            parts.append(sep)
            sep = ","
            parts.append(_quote(name))
            parts.append(":[" if is_list else ":")
            texts: list[str] = []
            if interned:
                order = sorted(set(map(self.canon.__getitem__, items)), key=self.sort_keys.__getitem__)
                if not local_datasets:  # no dataset or column in this body: none of these has a guid here
                    parts.append(",".join(map(self.closed.__getitem__, order)))
                    if is_list:
                        parts.append("]")
                    continue
                keys, opened, closed = self.keys, self.opened, self.closed
                for i in order:
                    g = local.get(keys[i])
                    texts.append(closed[i] if g is None else opened[i] + ',"guid":"' + g + '"}')
            else:
                types = self._types or {}
                merged = {
                    (types.get(r[1], r[0]) if r[0] in self.dataset_types else r[0], r[1], r[2]) for r in items
                }
                for t, q, r in sorted(merged):
                    g = local.get((t, q))
                    text = _ref_text(t, q, r)
                    texts.append(text + "}" if g is None else text + ',"guid":"' + g + '"}')
            parts.append(",".join(texts))
            if is_list:
                parts.append("]")
        if sep == ",":
            parts.append("}")
        parts.append("}")
        return "".join(parts)


ref_text = _ref_text


def body_data(entities: list[bytes]) -> bytes:
    """A bulk body's JSON from its entities' JSON, with one copy of them (a body is megabytes): the first
    and the last take the body's head and tail."""
    if not entities:
        return b'{"entities":[],"referredEntities":{}}'
    parts = list(entities)
    parts[0] = b'{"entities":[' + parts[0]
    parts[-1] = parts[-1] + b'],"referredEntities":{}}'
    return b",".join(parts)
