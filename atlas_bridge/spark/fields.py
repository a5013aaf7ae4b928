"""Field paths in Spark plans (issue 31): which field of a struct, map key or array element an expression
reads, and which field of a struct it builds. Pure helpers over plan nodes (``spark/plan.py``'s ``_Node``:
``name``, ``f`` and ``children``), so the SQL extractor and the hook give the same paths for one query.

Conventions (docs/nested-data.md, as ``extractors/sql/nested.py``): a struct field (``GetStructField``,
``GetArrayStructFields``), a map's literal key (``GetMapValue``, ``ElementAt``) and a literal JSON path
(``GetJsonObject``) are path steps; an array index is none (an element keeps its array's path);
``from_json`` (``JsonToStructs``) is looked through.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol, TypeVar


class PlanNode(Protocol):
    """What these helpers read of a plan node."""

    @property
    def name(self) -> str: ...

    @property
    def f(self) -> dict[str, Any]: ...

    @property
    def children(self) -> list[Any]: ...


N = TypeVar("N", bound=PlanNode)

VARIABLE_CLASSES = frozenset({"AttributeReference", "OuterReference", "NamedLambdaVariable"})
"""The values a path starts from: a column (attribute) or a lambda's variable."""

_LOOKED_THROUGH = frozenset({"JsonToStructs"})
_JSON_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\['([^']*)'\]|\[(\d+|\*)\]")


def path_chain(node: N) -> tuple[N, list[str], list[N]] | None:
    """``(start, steps, others)`` of an expression that steps into a value: the attribute (or lambda
    variable) it starts from, the field steps (outermost last), and the expressions it also reads (an index
    computed from columns). None when ``node`` steps into nothing or starts from no attribute."""
    steps: list[str] = []
    others: list[N] = []
    cur: N = node
    while True:
        name = cur.name
        if name == "GetStructField" and cur.children:
            step = struct_field_name(cur)
            if step is None:
                return None
            steps.append(step)
            cur = cur.children[0]
        elif name == "GetArrayStructFields" and cur.children:
            fld = cur.f.get("field")
            if not (isinstance(fld, dict) and isinstance(fld.get("name"), str)):
                return None
            steps.append(fld["name"])
            cur = cur.children[0]
        elif name in ("GetMapValue", "ElementAt", "GetArrayItem") and len(cur.children) == 2:
            key = cur.children[1]
            text = _string_literal(key)
            if text is not None and name != "GetArrayItem":
                steps.append(text)
            elif not _int_literal(key):
                others.append(key)
            cur = cur.children[0]
        elif name == "GetJsonObject" and len(cur.children) == 2:
            path = _string_literal(cur.children[1])
            keys = json_path_steps(path) if path is not None else None
            if keys is None:
                return None
            steps.extend(reversed(keys))
            cur = cur.children[0]
        elif name in _LOOKED_THROUGH and cur.children:
            cur = cur.children[0]
        else:
            break
    if cur is node or cur.name not in VARIABLE_CLASSES:
        return None
    return cur, steps[::-1], others


def json_path_steps(path: str) -> list[str] | None:
    """The keys of a literal JSON path (``$.user.id``, ``$['a'].b[0].c``): subscripts are elements; None
    for wildcards or anything else."""
    if not path.startswith("$"):
        return None
    rest, pos, out = path[1:], 0, []
    while pos < len(rest):
        m = _JSON_STEP.match(rest, pos)
        if m is None or m.group(3) == "*":
            return None
        if m.group(1) is not None:
            out.append(m.group(1))
        elif m.group(2) is not None:
            out.append(m.group(2))
        pos = m.end()
    return out


def struct_field_name(node: PlanNode) -> str | None:
    """The field a ``GetStructField`` reads: its ``name``, else the child's struct type at its ordinal
    (``s.*`` leaves the name out)."""
    name = node.f.get("name")
    if isinstance(name, str) and name:
        return name
    ordinal = node.f.get("ordinal")
    dtype = data_type(node.children[0]) if node.children else None
    if isinstance(dtype, dict) and dtype.get("type") == "struct" and isinstance(ordinal, int):
        fields = dtype.get("fields") or []
        if 0 <= ordinal < len(fields) and isinstance(fields[ordinal], dict):
            got = fields[ordinal].get("name")
            return got if isinstance(got, str) else None
    return None


def data_type(node: PlanNode) -> Any:
    """A node's Spark data type as the plan's JSON gives it (a name, or a dict for struct/array/map);
    what a field access yields is read off its child's type. None when unknown."""
    raw = node.f.get("dataType")
    if raw is not None:
        if isinstance(raw, str) and raw.startswith("{"):
            try:
                return json.loads(raw)
            except ValueError:
                return raw
        return raw
    if node.name == "GetStructField" and node.children:
        parent = data_type(node.children[0])
        ordinal = node.f.get("ordinal")
        if isinstance(parent, dict) and parent.get("type") == "struct" and isinstance(ordinal, int):
            fields = parent.get("fields") or []
            if 0 <= ordinal < len(fields) and isinstance(fields[ordinal], dict):
                return fields[ordinal].get("type")
    return None


def element_fields(array_type: Any) -> list[str] | None:
    """The field names of an array's struct elements, in order (what ``inline`` outputs)."""
    if isinstance(array_type, dict) and array_type.get("type") == "array":
        element = array_type.get("elementType")
        if isinstance(element, dict) and element.get("type") == "struct":
            names = [f.get("name") for f in element.get("fields") or [] if isinstance(f, dict)]
            return [n for n in names if isinstance(n, str)]
    return None


def struct_members(node: N) -> list[tuple[str, N]] | None:
    """The (field name, value) pairs a ``CreateNamedStruct`` builds (``named_struct``, ``struct(...)``)."""
    if node.name != "CreateNamedStruct" or len(node.children) % 2:
        return None
    out: list[tuple[str, N]] = []
    for i in range(0, len(node.children), 2):
        name = _string_literal(node.children[i])
        if name is None:
            return None
        out.append((name, node.children[i + 1]))
    return out


def join_path(*parts: str | None) -> str | None:
    """Dotted paths joined, empty parts left out; None when nothing is left."""
    kept = [p for p in parts if p]
    return ".".join(kept) if kept else None


def read_through(written: str | None, read: str | None) -> tuple[str | None, str | None] | None:
    """How reading field ``read`` of a value continues a source that fed its field ``written`` (None: the
    whole value): ``(path to add below the source, sub-field of the result it feeds)``, or None when they
    are two different fields (``s.a`` built, ``s.b`` read: no flow)."""
    if written == read:
        return None, None
    if written is None:
        return read, None
    if read is None:
        return None, written
    if read.startswith(written + "."):
        return read[len(written) + 1 :], None
    if written.startswith(read + "."):
        return None, written[len(read) + 1 :]
    return None


def _string_literal(node: PlanNode) -> str | None:
    if node.name == "Literal" and node.f.get("dataType") == "string" and isinstance(node.f.get("value"), str):
        return str(node.f["value"])
    return None


def _int_literal(node: PlanNode) -> bool:
    return node.name == "Literal" and node.f.get("dataType") in ("integer", "long", "short", "byte")
