"""Field paths of nested data in SQL (issue 31): what part of a struct, map or array an expression reads or
builds, read off sqlglot's tree. Pure functions; the resolver (core.py) turns them into lineage ends.

Conventions (docs/nested-data.md): a struct field and a map's literal key are path steps (``a.b.c``,
``a['b']``, ``element_at(m, 'k')``, ``get_json_object(j, '$.a.b')``, ``raw:a.b``); an array index is none
(an element keeps its array's path: ``items[0].sku`` is ``items.sku``, as each element of ``explode(items)``
is); a path that is not a literal ends the walk there.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import ParseError

PATH_NODES: tuple[type[exp.Expr], ...] = (exp.Dot, exp.Bracket, exp.JSONExtract, exp.JSONExtractScalar)
"""Nodes that step into a value: a struct field, a map key, an array element, a JSON path."""

_TRANSPARENT = (exp.FromJson, exp.ParseJSON)
"""Functions whose result has the fields of their argument: ``from_json(j, schema).a`` reads ``j.a``."""


def field_path(node: exp.Expr) -> tuple[exp.Expr, list[str], list[exp.Expr]] | None:
    """``(base, steps, others)`` of a path expression: the value it starts from (a Column, or a lambda's
    Identifier), the field names it steps through (outermost first), and the expressions it also reads (a
    non-literal index). None when ``node`` is no path over a column."""
    steps: list[str] = []
    others: list[exp.Expr] = []
    cur: exp.Expr = node
    while True:
        if isinstance(cur, exp.Dot):
            right = cur.expression
            if not isinstance(right, exp.Identifier):
                return None  # ``x.*`` and the like
            steps.append(right.name)
            cur = cur.this
        elif isinstance(cur, exp.Bracket):
            keys = cur.expressions
            if len(keys) == 1 and isinstance(keys[0], exp.Literal) and keys[0].is_string:
                steps.append(keys[0].name)  # a map key or a struct field by name
            elif not (len(keys) == 1 and _is_index(keys[0])):
                others.extend(keys)  # an index computed from columns: an element, and those columns
            cur = cur.this
        elif isinstance(cur, (exp.JSONExtract, exp.JSONExtractScalar)):
            path = cur.expression
            if not isinstance(path, exp.JSONPath):
                return None
            names = _json_steps(path)
            if names is None:
                return None
            steps.extend(reversed(names))
            cur = cur.this
        elif isinstance(cur, (*_TRANSPARENT, exp.Paren)):
            cur = cur.this
        else:
            break
    if cur is node:
        return None
    if isinstance(cur, exp.Column) and not isinstance(cur.this, exp.Star):
        return cur, steps[::-1], others
    if isinstance(cur, exp.Identifier):
        return cur, steps[::-1], others
    return None


def _is_index(node: exp.Expr) -> bool:
    """An array index that names no column: ``0``, ``OFFSET(1)``, ``SAFE_ORDINAL(2)``, ``-1``."""
    return not any(isinstance(n, exp.Column) for n in node.walk())


def _json_steps(path: exp.JSONPath) -> list[str] | None:
    """The keys of a literal JSON path (subscripts are elements, no step); None for wildcards, filters."""
    names: list[str] = []
    for part in path.expressions:
        if isinstance(part, exp.JSONPathRoot):
            continue
        if isinstance(part, exp.JSONPathKey):
            if not isinstance(part.this, str) or part.this == "*":
                return None
            names.append(part.this)
        elif isinstance(part, exp.JSONPathSubscript):
            if not isinstance(part.this, int):
                return None
        else:
            return None
    return names


def struct_members(node: exp.Struct) -> list[tuple[str | None, exp.Expr]]:
    """The fields a struct constructor builds, each with the expression that computes it: ``named_struct
    ('x', a)``, ``STRUCT(a AS x)``, ``struct(a, b)`` (a bare column names its field, as Spark and BigQuery
    name it); None for a field without a name (its value still reaches the struct)."""
    out: list[tuple[str | None, exp.Expr]] = []
    for member in node.expressions:
        if isinstance(member, exp.PropertyEQ):
            out.append((member.this.name or None, member.expression))
        elif isinstance(member, exp.Alias):
            out.append((member.alias or None, member.this))
        elif isinstance(member, exp.Column) and not isinstance(member.this, exp.Star):
            out.append((member.name, member))
        elif isinstance(member, exp.Dot) and isinstance(member.expression, exp.Identifier):
            out.append((member.expression.name, member))
        else:
            out.append((None, member))
    return out


def built_fields(expr: exp.Expr, prefix: str | None = None) -> list[tuple[str | None, exp.Expr]] | None:
    """The fields an output value is built of, each with the expression that computes it: a struct
    constructor's fields (nested ones by their dotted path); an array of structs (``array(...)``,
    ``collect_list(...)``, ``ARRAY_AGG(...)``, ``transform(a, x -> named_struct(...))``) by its elements'
    fields (an element keeps the array's path), each field's expression wrapped as the array's is, so
    it is read in the same context (an aggregate, a lambda). None when ``expr`` builds no struct."""
    while isinstance(expr, exp.Paren):
        expr = expr.this
    if isinstance(expr, exp.Array) and len(expr.expressions) == 1:
        return built_fields(expr.expressions[0], prefix)
    if isinstance(expr, exp.ArrayAgg) and isinstance(expr.this, exp.Struct):
        inner = built_fields(expr.this, prefix)
        return None if inner is None else [(path, _rewrapped(expr, "this", value)) for path, value in inner]
    if isinstance(expr, exp.Transform) and isinstance(expr.expression, exp.Lambda):
        lam = expr.expression
        body = built_fields(lam.this, prefix)
        if body is None:
            return None
        return [
            (path, exp.Transform(this=expr.this.copy(), expression=_rewrapped(lam, "this", value)))
            for path, value in body
        ]
    if not isinstance(expr, exp.Struct):
        return None
    out: list[tuple[str | None, exp.Expr]] = []
    for name, value in struct_members(expr):
        path = f"{prefix}.{name}" if prefix and name else (name if name else None)
        inner = built_fields(value, path) if path is not None else None
        if inner is not None:
            out.extend(inner)
        else:
            out.append((path if name else prefix, value))
    return out


def _rewrapped(node: exp.Expr, arg: str, value: exp.Expr) -> exp.Expr:
    """A copy of ``node`` with ``value`` (a copy) in place of its argument ``arg``."""
    copy = node.copy()
    copy.set(arg, value.copy())
    return copy


def tuple_keys(func: exp.Expr) -> list[str] | None:
    """The literal keys of Hive's ``json_tuple(j, 'a', 'b')`` (each output column is that field of ``j``)."""
    if not (isinstance(func, exp.Anonymous) and func.name.lower() == "json_tuple"):
        return None
    keys = func.expressions[1:]
    if not keys or not all(isinstance(k, exp.Literal) and k.is_string for k in keys):
        return None
    return [k.name for k in keys]


def struct_fields(type_text: str | None, steps: list[str], dialect: str | None = None) -> list[str] | None:
    """The field names of the struct at ``steps`` inside a column of type ``type_text`` (in order); None
    when the type is not known or holds no struct there. An array's element stands for the array."""
    if not type_text:
        return None
    try:
        dtype = exp.DataType.build(type_text, dialect=dialect)
    except (ParseError, ValueError):
        return None
    for step in [*steps, None]:
        while dtype.this == exp.DataType.Type.ARRAY and dtype.expressions:
            inner = dtype.expressions[0]
            if not isinstance(inner, exp.DataType):
                return None
            dtype = inner
        if dtype.this != exp.DataType.Type.STRUCT:
            return None
        fields = {
            d.name: d.args.get("kind") for d in dtype.expressions if isinstance(d, exp.ColumnDef) and d.name
        }
        if step is None:
            return list(fields)
        match = next((k for k in fields if k.lower() == step.lower()), None)
        kind = fields.get(match) if match is not None else None
        if not isinstance(kind, exp.DataType):
            return None
        dtype = kind
    return None
