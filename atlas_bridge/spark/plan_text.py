"""Lineage from the plans Spark prints into its event logs, through the hook's plan core.

Pure: no I/O. A ``SparkListenerSQLExecutionStart`` event carries ``physicalPlanDescription``: the plan as
``explain(mode="formatted")`` prints it (Spark 3.x and 4.x default, ``spark.sql.ui.explainMode``): a tree of
numbered nodes, then one block of details per node (``Output [n]: [...]``, ``Condition : ...``,
``Arguments: ...``), then the subqueries. A command run by ``ExecutedCommandExec`` (CTAS, CREATE VIEW,
INSERT OVERWRITE DIRECTORY, rename) prints its logical query as inner nodes with their ``Arguments``; a
file write (``DataWritingCommandExec``: INSERT, the inner write of a CTAS or saveAsTable) prints the
physical plan under it.

This module turns both into the node list ``TreeNode.toJSON`` gives the hook (logical class names, fields,
expression trees with exprIds) and hands it to :func:`atlas_bridge.spark.plan.extract_spark_plan_lineage`:
one core for both sources. Physical nodes map to the logical ones the core reads (``Scan parquet t`` ->
``LogicalRelation``, ``HashAggregate`` (final) -> ``Aggregate``, ``BroadcastHashJoin`` -> ``Join``, ...);
exchanges, sorts a join or window needs, codegen and adaptive wrappers are walked through. What the text
lacks and the core reads from py4j facts in the hook (the paths of file reads and writes) comes from the
physical scans and write nodes of the same root execution, matched by exprId.

A node the reader does not know, or a list Spark cut (``... 5 more fields``), is a Problem naming the
execution and the node; such a write keeps its table-level lineage (``PseudoRows`` edges from each source
it reads) and no column edge.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from atlas_bridge.model import (
    PSEUDO_ROWS,
    ColumnRef,
    ExtractionResult,
    Lineage,
    Problem,
    Relation,
    RelationType,
    Severity,
)
from atlas_bridge.spark.plan import extract_spark_plan_lineage, plan_identity, write_priority

__all__ = ["SqlExecution", "extract_root_execution", "parse_formatted_plan", "plan_from_info"]

_L = "org.apache.spark.sql.catalyst.plans.logical."
_C = "org.apache.spark.sql.execution.command."
_D = "org.apache.spark.sql.execution.datasources."
_E = "org.apache.spark.sql.catalyst.expressions."
_A = "org.apache.spark.sql.catalyst.expressions.aggregate."


@dataclass(frozen=True)
class SqlExecution:
    """One SQL execution as an event log records it (events parsed from JSON)."""

    execution_id: int
    root_execution_id: int | None
    start: Mapping[str, Any]
    """The SparkListenerSQLExecutionStart event."""
    adaptive: Sequence[Mapping[str, Any]]
    """Its SparkListenerSQLAdaptiveExecutionUpdate events, in order."""
    end: Mapping[str, Any] | None
    """Its SparkListenerSQLExecutionEnd (None: the log was cut before it)."""
    line: int
    """1-based line of the start event in its events file."""

    @property
    def failed(self) -> bool:
        if self.end is None:
            return True
        err = self.end.get("errorMessage")
        return isinstance(err, str) and bool(err)


# ---------------------------------------------------------------------------------------------------------
# The formatted text -> nodes


@dataclass
class TextNode:
    """One numbered node of a formatted plan."""

    id: int
    label: str
    children: list[TextNode] = field(default_factory=list)
    inner: list[TextNode] = field(default_factory=list)
    """Nodes printed deeper than a child: a command's query, a subquery's plan, a cached relation's plan."""
    details: dict[str, str] = field(default_factory=dict)
    has_details: bool = False

    @property
    def name(self) -> str:
        """The operator: the label's first word (``Scan`` for ``Scan parquet db.t``), ``Execute`` kept."""
        return self.label.split(" ", 1)[0]


@dataclass
class FormattedPlan:
    roots: list[TextNode]
    """The main plan first, then each subquery's plan."""
    subqueries: list[tuple[str, TextNode]]
    """(hosting expression text, plan) of each subquery block."""
    nodes: dict[int, TextNode]
    cut: bool = False
    """The text was cut (``spark.sql.maxPlanStringLength``)."""


_TREE_LINE = re.compile(r"^(?P<prefix>[ :|+\-]*?)(?:\* )?(?P<label>[^ (:*+\-][^\n]*?) \((?P<id>\d+)\)$")
_DETAIL_HEAD = re.compile(r"^\((?P<id>\d+)\) (?P<label>.*)$")
_DETAIL_LINE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z ]*?)(?: \[\d+\])?\s?: ?(?P<value>.*)$")
_CUT_TEXT = re.compile(r"\.\.\. \d+ more (?:characters|chars)")


def parse_formatted_plan(text: str) -> FormattedPlan:
    """Split ``explain(mode="formatted")`` text into its trees and per-node details."""
    nodes: dict[int, TextNode] = {}
    roots: list[TextNode] = []
    subqueries: list[tuple[str, TextNode]] = []
    stack: list[tuple[int, TextNode]] = []  # (marker column, node)
    hosting: str | None = None
    current: TextNode | None = None
    in_tree = False
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith("== ") or line.startswith("===== "):
            in_tree = line.startswith("== Physical Plan")
            stack = []
            current = None
            continue
        if line.startswith("Subquery:"):
            m = re.search(r"Hosting Expression = (.*)$", line)
            hosting = m.group(1) if m else ""
            in_tree = True
            stack = []
            current = None
            continue
        if not line:
            if in_tree and stack:
                in_tree = False
            current = None
            continue
        head = _DETAIL_HEAD.match(line)
        if head is not None and not in_tree:  # "(3) Filter": the details of node 3 follow
            node = nodes.get(int(head.group("id")))
            if node is not None:
                node.has_details = True
                current = node
            in_tree = False
            continue
        if in_tree or (current is None and _TREE_LINE.match(line)):
            m = _TREE_LINE.match(line)
            if m is None:
                continue
            in_tree = True
            prefix = m.group("prefix")
            marker = max(prefix.rfind("+-"), prefix.rfind(":-"))
            col = marker if marker >= 0 else -3
            node = TextNode(id=int(m.group("id")), label=m.group("label").strip())
            nodes.setdefault(node.id, node)
            node = nodes[node.id]
            while stack and stack[-1][0] >= col:
                stack.pop()
            if not stack:
                roots.append(node)
                if hosting is not None:
                    subqueries.append((hosting, node))
                    hosting = None
            else:
                parent_col, parent = stack[-1]
                (parent.children if col == parent_col + 3 else parent.inner).append(node)
            stack.append((col, node))
            continue
        if current is not None:
            d = _DETAIL_LINE.match(line)
            if d is not None:
                current.details[d.group("key").strip()] = d.group("value").strip()
            elif current.details:
                last = list(current.details)[-1]
                current.details[last] += "\n" + line
    return FormattedPlan(roots=roots, subqueries=subqueries, nodes=nodes, cut=bool(_CUT_TEXT.search(text)))


def plan_from_info(info: Mapping[str, Any]) -> FormattedPlan:
    """The start event's ``sparkPlanInfo`` tree as a (cut) formatted plan: read when the plan text was cut
    by ``spark.sql.maxPlanStringLength``. It keeps the write command's arguments and the scans' tables and
    locations, enough for table-level lineage; the other nodes come without their details."""
    nodes: dict[int, TextNode] = {}
    counter = 0

    def build(item: Mapping[str, Any]) -> TextNode:
        nonlocal counter
        counter += 1
        name = str(item.get("nodeName") or "")
        simple = str(item.get("simpleString") or "")
        meta = item.get("metadata") if isinstance(item.get("metadata"), Mapping) else {}
        node = TextNode(id=counter, label=re.sub(r" \(\d+\)$", "", name), has_details=True)
        nodes[node.id] = node
        if name.startswith("Execute ") and simple.startswith(name):
            node.details["Arguments"] = simple[len(name) :].strip()
        elif name.startswith("Scan "):
            m = re.match(r"^\w*Scan \S+ [^\[\s]*\[([^\]]*)\]", simple)
            if m is not None:
                node.details["Output"] = "[" + m.group(1) + "]"
            for key in ("Location", "ReadSchema"):
                if isinstance(meta, Mapping) and isinstance(meta.get(key), str):
                    node.details[key] = meta[key]
        kids = item.get("children")
        for child in kids if isinstance(kids, list) else []:
            if isinstance(child, Mapping):
                node.children.append(build(child))
        return node

    root = build(info)
    return FormattedPlan(roots=[root], subqueries=[], nodes=nodes, cut=True)


# ---------------------------------------------------------------------------------------------------------
# Expression text -> toJSON-shaped expression trees


class _Cut(Exception):
    """A list Spark cut (``... N more fields``): positions past it are unknown."""


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets and parentheses."""
    out: list[str] = []
    depth = 0
    start = 0
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            out.append(text[start:i].strip())
            i += len(sep)
            start = i
            continue
        i += 1
    tail = text[start:].strip()
    if tail or out:
        out.append(tail)
    return out


def _find_top(text: str, word: str, start: int = 0) -> int:
    """Index of ``word`` outside brackets, at or after ``start``, or -1."""
    i = text.find(word, start)
    depth = 0
    done = 0  # brackets counted up to here
    while i >= 0:
        for ch in text[done:i]:
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
        done = i
        if depth == 0:
            return i
        i = text.find(word, i + 1)
    return -1


def _matching(text: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] in "([{":
            depth += 1
        elif text[i] in ")]}":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _list(text: str) -> list[str]:
    """``[a, b]`` -> ``["a", "b"]``; raises _Cut for a cut list."""
    t = text.strip()
    if t.startswith("[") and _matching(t, 0) == len(t) - 1:
        t = t[1:-1]
    items = _split_top(t) if t.strip() else []
    if any(re.match(r"^\.\.\. \d+ more fields?$", i) for i in items):
        raise _Cut(text[:80])
    return items


_BINARY_OPS = [
    (" AND ", "And"),
    (" OR ", "Or"),
    (" <=> ", "EqualNullSafe"),
    (" >= ", "GreaterThanOrEqual"),
    (" <= ", "LessThanOrEqual"),
    (" = ", "EqualTo"),
    (" > ", "GreaterThan"),
    (" < ", "LessThan"),
    (" + ", "Add"),
    (" - ", "Subtract"),
    (" * ", "Multiply"),
    (" / ", "Divide"),
    (" % ", "Remainder"),
    (" div ", "IntegralDivide"),
    (" LIKE ", "Like"),
    (" RLIKE ", "RLike"),
    (" & ", "BitwiseAnd"),
    (" | ", "BitwiseOr"),
    (" || ", "Concat"),
]
_FUNCTIONS = {
    "cast": "Cast",
    "ansi_cast": "Cast",
    "try_cast": "Cast",
    "isnotnull": "IsNotNull",
    "isnull": "IsNull",
    "coalesce": "Coalesce",
    "if": "If",
    "row_number": "RowNumber",
    "rank": "Rank",
    "dense_rank": "DenseRank",
    "percent_rank": "PercentRank",
    "ntile": "NTile",
    "lag": "Lag",
    "lead": "Lead",
    "upper": "Upper",
    "lower": "Lower",
    "concat": "Concat",
    "trim": "StringTrim",
    "substring": "Substring",
    "explode": "Explode",
    "explode_outer": "Explode",
    "posexplode": "PosExplode",
    "posexplode_outer": "PosExplode",
    "inline": "Inline",
    "inline_outer": "Inline",
    "size": "Size",
    "length": "Length",
    "year": "Year",
    "nvl": "Nvl",
    "ifnull": "IfNull",
}
_AGGREGATES = {
    "sum": "Sum",
    "count": "Count",
    "avg": "Average",
    "mean": "Average",
    "min": "Min",
    "max": "Max",
    "first": "First",
    "last": "Last",
    "first_value": "First",
    "last_value": "Last",
    "collect_list": "CollectList",
    "collect_set": "CollectSet",
    "stddev": "StddevSamp",
    "stddev_samp": "StddevSamp",
    "stddev_pop": "StddevPop",
    "var_samp": "VarianceSamp",
    "var_pop": "VariancePop",
    "variance": "VarianceSamp",
    "approx_count_distinct": "HyperLogLogPlusPlus",
    "percentile": "Percentile",
    "percentile_approx": "ApproximatePercentile",
    "any_value": "AnyValue",
    "count_if": "CountIf",
    "bool_and": "BoolAnd",
    "bool_or": "BoolOr",
    "every": "BoolAnd",
    "corr": "Corr",
    "covar_pop": "CovPopulation",
    "covar_samp": "CovSample",
    "kurtosis": "Kurtosis",
    "skewness": "Skewness",
    "median": "Median",
    "mode": "Mode",
    "max_by": "MaxBy",
    "min_by": "MinBy",
    "product": "Product",
    "bit_and": "BitAndAgg",
    "bit_or": "BitOrAgg",
    "bit_xor": "BitXorAgg",
}
_TYPES = {
    "int": "integer",
    "bigint": "long",
    "smallint": "short",
    "tinyint": "byte",
    "double": "double",
    "float": "float",
    "string": "string",
    "boolean": "boolean",
    "date": "date",
    "timestamp": "timestamp",
}
_ATTR = re.compile(r"^(?P<name>.+?)#(?P<id>\d+)(?P<long>L?)$")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?P<suffix>[LDSYBF]|BD)?$")
_CALL = re.compile(r"^(?P<fn>[A-Za-z_][\w$]*)\(")
_SUBQUERY = re.compile(r"^(?P<kind>scalar-subquery|list|exists|lateral-subquery)#(?P<id>\d+) \[.*\]$")
_PHYS_SUBQUERY = re.compile(r"^Subquery subquery#(?P<id>\d+), \[id=#\d+\]$")
_PHYS_SUBQUERY_ANY = re.compile(r"(?:Reused)?Subquery subquery#(\d+), \[id=#\d+\]")


@dataclass
class _Expr:
    cls: str
    fields: dict[str, Any] = field(default_factory=dict)
    children: list[_Expr] = field(default_factory=list)

    def items(self) -> list[dict[str, Any]]:
        """Pre-order toJSON node list."""
        out: list[dict[str, Any]] = []
        stack = [self]
        while stack:
            e = stack.pop()
            out.append({"class": e.cls, "num-children": len(e.children), **e.fields})
            stack.extend(reversed(e.children))
        return out


def _attr(name: str, xid: int, long: bool = False, dtype: str | None = None) -> _Expr:
    fields: dict[str, Any] = {"name": name, "exprId": {"product-class": _E + "ExprId", "id": xid}}
    if dtype or long:
        fields["dataType"] = dtype or "long"
    return _Expr(_E + "AttributeReference", fields)


class _ExprParser:
    """Spark's ``Expression.toString`` text -> expression trees the core reads.

    ``subplans`` gives the plan items of a subquery expression by its exprId (``scalar-subquery#120``);
    ``types`` known data types by exprId (from the scans' ReadSchema).
    """

    def __init__(self, subplans: Mapping[int, list[dict[str, Any]]], types: Mapping[int, str]) -> None:
        self.subplans = subplans
        self.types = types

    def parse(self, text: str) -> _Expr:
        t = text.strip()
        # alias: "<expr> AS name#id"
        at = -1
        i = _find_top(t, " AS ")
        while i >= 0:
            at = i
            i = _find_top(t, " AS ", i + 1)
        if at >= 0:
            m = _ATTR.match(t[at + 4 :].strip())
            if m is not None:
                child = self.parse(t[:at])
                alias = {
                    "name": m.group("name"),
                    "exprId": {"product-class": _E + "ExprId", "id": int(m.group("id"))},
                }
                return _Expr(_E + "Alias", alias, [child])
        if t.startswith("(") and _matching(t, 0) == len(t) - 1:
            inner = t[1:-1]
            for op, cls in _BINARY_OPS:
                k = _find_top(inner, op)
                if k > 0:
                    return _Expr(_E + cls, {}, [self.parse(inner[:k]), self.parse(inner[k + len(op) :])])
            return self.parse(inner)
        if t.startswith("CASE WHEN ") and t.endswith(" END"):
            return self.case_when(t[len("CASE ") : -len(" END")])
        if t.startswith("NOT "):
            return _Expr(_E + "Not", {}, [self.parse(t[4:])])
        for suffix, direction in (
            (" ASC NULLS FIRST", "Ascending$"),
            (" ASC NULLS LAST", "Ascending$"),
            (" DESC NULLS LAST", "Descending$"),
            (" DESC NULLS FIRST", "Descending$"),
        ):
            if t.endswith(suffix):
                return _Expr(
                    _E + "SortOrder",
                    {"direction": {"object": _E + direction}},
                    [self.parse(t[: -len(suffix)])],
                )
        k = _find_top(t, " IN (")
        if k > 0:
            value = self.parse(t[:k])
            items = _split_top(t[k + 5 : -1])
            return _Expr(_E + "In", {}, [value, *(self.parse(x) for x in items)])
        w = _find_top(t, " windowspecdefinition(")
        if w > 0:
            fn = self.parse(t[:w])
            spec = self.window_spec(t[w + 1 :])
            return _Expr(_E + "WindowExpression", {}, [fn, spec])
        m = _SUBQUERY.match(t) or _PHYS_SUBQUERY.match(t)
        if m is not None:
            kind = m.groupdict().get("kind") or "scalar-subquery"
            cls = {"scalar-subquery": "ScalarSubquery", "list": "ListQuery", "exists": "Exists"}.get(
                kind, "LateralSubquery"
            )
            fields: dict[str, Any] = {"exprId": {"product-class": _E + "ExprId", "id": int(m.group("id"))}}
            plan = self.subplans.get(int(m.group("id")))
            if plan:
                fields["plan"] = plan
            return _Expr(_E + cls, fields)
        call = _CALL.match(t)
        if call is not None:
            close = _matching(t, call.end() - 1)
            rest = t[close + 1 :] if close > 0 else ""
            if close > 0 and not rest:
                return self.call(call.group("fn"), t[call.end() : close])
            am = re.match(r"^#(\d+)(L?)$", rest)
            if am is not None:  # an aggregate's result attribute, named after its function
                xid = int(am.group(1))
                return _attr(t[: close + 1], xid, bool(am.group(2)), self.types.get(xid))
        m = _ATTR.match(t)
        if m is not None and " " not in m.group("name"):
            return self.attribute(m.group("name"), int(m.group("id")), bool(m.group("long")))
        dot = re.match(r"^(?P<base>[^\s#]+#\d+L?)(?P<path>(?:\.[\w$]+|\[[^\]]*\])+)$", t)
        if dot is not None:  # struct field / array item / map value
            node = self.parse(dot.group("base"))
            for part in re.findall(r"\.[\w$]+|\[[^\]]*\]", dot.group("path")):
                if part.startswith("."):
                    node = _Expr(_E + "GetStructField", {"name": part[1:]}, [node])
                else:
                    node = _Expr(_E + "GetArrayItem", {}, [node, self.parse(part[1:-1])])
            return node
        m = _ATTR.match(t)
        if m is not None:  # an attribute named after the expression it holds ("RANK() OVER (...)#434")
            return self.attribute(m.group("name"), int(m.group("id")), bool(m.group("long")))
        return self.literal(t)

    def attribute(self, name: str, xid: int, long: bool) -> _Expr:
        return _attr(name, xid, long, self.types.get(xid))

    def literal(self, t: str) -> _Expr:
        if t == "null":
            return _Expr(_E + "Literal", {"value": None, "dataType": "null"})
        if t in ("true", "false"):
            return _Expr(_E + "Literal", {"value": t, "dataType": "boolean"})
        m = _NUMBER.match(t)
        if m is not None:
            suffix = m.group("suffix")
            dtype = {
                "L": "long",
                "D": "double",
                "S": "short",
                "Y": "byte",
                "BD": "decimal",
                "F": "float",
            }.get(suffix or "", "double" if "." in t or "e" in t.lower() else "integer")
            return _Expr(_E + "Literal", {"value": t.rstrip("LDSYBF"), "dataType": dtype})
        return _Expr(_E + "Literal", {"value": t, "dataType": "string"})

    def call(self, fn: str, args_text: str) -> _Expr:
        low = fn.lower()
        if low in ("cast", "ansi_cast", "try_cast"):
            k = _find_top(args_text, " as ")
            if k > 0:
                target = args_text[k + 4 :].strip()
                return _Expr(
                    _E + "Cast", {"dataType": _TYPES.get(target, target)}, [self.parse(args_text[:k])]
                )
        distinct = False
        body = args_text
        if body.startswith("distinct "):
            distinct, body = True, body[len("distinct ") :]
        args = [self.parse(a) for a in _split_top(body)] if body.strip() else []
        if low.startswith("partial_") or low.startswith("merge_"):
            low = low.split("_", 1)[1]
        if low in _AGGREGATES:
            fn_node = _Expr(_A + _AGGREGATES[low], {}, args)
            return _Expr(_A + "AggregateExpression", {"isDistinct": distinct}, [fn_node])
        if low == "if" and len(args) == 3:
            return _Expr(_E + "If", {}, args)
        if low in ("specifiedwindowframe", "unspecifiedframe$"):
            return _Expr(_E + "SpecifiedWindowFrame", {})
        cls = _FUNCTIONS.get(low) or "".join(p.capitalize() for p in re.split(r"[_$]", low) if p)
        return _Expr(_E + cls, {}, args)

    def case_when(self, body: str) -> _Expr:
        """``WHEN c THEN v WHEN ... ELSE e`` -> CaseWhen(c1, v1, ..., e) with its branch count."""
        parts: list[tuple[str, str]] = []
        rest = body
        els: str | None = None
        while rest.startswith("WHEN "):
            then = _find_top(rest, " THEN ")
            nxt = _find_top(rest, " WHEN ", then)
            el = _find_top(rest, " ELSE ", then)
            ends = [x for x in (nxt, el) if x > 0]
            stop = min(ends) if ends else len(rest)
            parts.append((rest[5:then], rest[then + 6 : stop]))
            rest = rest[stop:].lstrip()
            if rest.startswith("ELSE "):
                els = rest[5:]
                break
        children: list[_Expr] = []
        for cond, value in parts:
            children += [self.parse(cond), self.parse(value)]
        if els is not None:
            children.append(self.parse(els))
        return _Expr(_E + "CaseWhen", {"branches": [None] * len(parts)}, children)

    def window_spec(self, text: str) -> _Expr:
        """``windowspecdefinition(p1, o1 DESC NULLS LAST, frame)`` -> WindowSpecDefinition."""
        open_at = text.index("(")
        args = [self.parse(a) for a in _split_top(text[open_at + 1 : _matching(text, open_at)])]
        args = [a for a in args if not a.cls.endswith("WindowFrame")]
        part = [a for a in args if not a.cls.endswith(".SortOrder")]
        order = [a for a in args if a.cls.endswith(".SortOrder")]
        fields = {
            "partitionSpec": list(range(len(part))),
            "orderSpec": list(range(len(part), len(part) + len(order))),
        }
        return _Expr(_E + "WindowSpecDefinition", fields, part + order)


# ---------------------------------------------------------------------------------------------------------
# Plan nodes -> toJSON-shaped logical plans


@dataclass
class _PlanNode:
    cls: str
    fields: dict[str, Any] = field(default_factory=dict)
    children: list[_PlanNode] = field(default_factory=list)

    def items(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        stack = [self]
        while stack:
            p = stack.pop()
            out.append({"class": p.cls, "num-children": len(p.children), **p.fields})
            stack.extend(reversed(p.children))
        return out


def _ident_text(text: str) -> dict[str, str] | None:
    """`` `cat`.`db`.`t` ``, ``cat.db.t`` or ``[Database: db, TableName: t]`` -> a TableIdentifier-like
    dict."""
    t = text.strip()
    m = re.match(r"^\[Database: ([^,\]]+), TableName: ([^,\]]+)\]$", t)
    if m is not None:
        return {"database": m.group(1).strip(), "table": m.group(2).strip()}
    parts = re.findall(r"`((?:[^`]|``)*)`", t) if "`" in t else t.split(".")
    parts = [p.replace("``", "`") for p in parts if p]
    if not parts:
        return None
    out: dict[str, str] = {"table": parts[-1]}
    if len(parts) >= 2:
        out["database"] = parts[-2]
    if len(parts) >= 3:
        out["catalog"] = parts[-3]
    return out


_WRITE_MODES = ("Append", "Overwrite", "ErrorIfExists", "Ignore")
_WALK_THROUGH = {
    "AdaptiveSparkPlan",
    "WriteFiles",
    "ColumnarToRow",
    "RowToColumnar",
    "InputAdapter",
    "WholeStageCodegen",
    "Exchange",
    "BroadcastExchange",
    "ShuffleExchange",
    "AQEShuffleRead",
    "CustomShuffleReader",
    "ShuffleQueryStage",
    "BroadcastQueryStage",
    "TableCacheQueryStage",
    "ResultQueryStage",
    "CollectLimit",
    "Coalesce",
    "CoalesceExec",
    "SubqueryAlias",
    "Subquery",
    "SubqueryBroadcast",
    "ReusedSubquery",
    "ResolvedHint",
    "Limit",
    "GlobalLimit",
    "LocalLimit",
    "Repartition",
    "RepartitionByExpression",
    "RebalancePartitions",
    "Distinct",
    "Deduplicate",
    "Sample",
    "Tail",
    "Offset",
    "WithCTE",
    "CTERelationDef",
    "Intersect",
    "Except",
    "DeserializeToObject",
    "SerializeFromObject",
    "MapElements",
    "ObjectConsumer",
    "EventTimeWatermark",
    "SortAggregate",  # partial stages only; finals are handled as aggregates below
}
_PYTHON_EVAL = {"BatchEvalPython", "ArrowEvalPython", "BatchEvalPythonUDTF", "ArrowEvalPythonUDTF"}
_AGGREGATE_NODES = {"HashAggregate", "SortAggregate", "ObjectHashAggregate", "MergingSessions"}
_JOIN_NODES = {
    "BroadcastHashJoin",
    "SortMergeJoin",
    "ShuffledHashJoin",
    "BroadcastNestedLoopJoin",
    "CartesianProduct",
}
_IN_MEMORY_SCANS = {"LocalTableScan", "Range", "RDDScan", "ExistingRDD", "Scan ExistingRDD", "OneRowRelation"}


class _Converter:
    """Numbered text nodes -> the logical plan items the core reads; problems name execution and node."""

    def __init__(self, plan: FormattedPlan, execution_id: int, types: dict[int, str], line: int = 0) -> None:
        self.plan = plan
        self.execution_id = execution_id
        self.where = f"execution {execution_id}" + (f" (line {line})" if line else "")
        self.types = types
        self.problems: list[Problem] = []
        self.degraded = False
        self.leaves: list[dict[str, Any]] = []
        self.subplans: dict[int, list[dict[str, Any]]] = {}
        self.exprs = _ExprParser(self.subplans, types)
        self.normalise()
        self.join_keys = {
            m.group(0)
            for n in plan.nodes.values()
            if n.name == "Generate"
            for m in re.finditer(r"[^\s(),\[\]]+#\d+L?", _split_top(n.details.get("Arguments", ""))[0])
        } | {
            m.group(0)
            for n in plan.nodes.values()
            for k in ("Left keys", "Right keys", "Join condition")
            for m in re.finditer(r"[^\s(),\[\]]+#\d+L?", n.details.get(k, ""))
        }
        for hosting, root in plan.subqueries:
            m = re.search(r"subquery#(\d+)", hosting)
            if m is not None:
                try:
                    self.subplans[int(m.group(1))] = self.physical(root).items()
                except _Cut as e:
                    self.cut(root, str(e))

    # -- problems ------------------------------------------------------------------------------------
    def problem(self, node: TextNode, message: str, kind: str) -> None:
        self.degraded = True
        self.problems.append(
            Problem(
                message=f"{self.where}, node ({node.id}) {node.label}: {message}",
                severity=Severity.WARNING,
                kind=kind,
            )
        )

    def cut(self, node: TextNode, what: str) -> None:
        self.problem(node, f"the plan text was cut ({what}): table-level lineage only", "cut_plan")

    # -- expressions ---------------------------------------------------------------------------------
    def e(self, text: str) -> list[dict[str, Any]]:
        return self.exprs.parse(text).items()

    def es(self, text: str) -> list[list[dict[str, Any]]]:
        return [self.e(x) for x in _list(text)]

    def args(self, node: TextNode) -> list[str]:
        return _split_top(node.details.get("Arguments", ""))

    def normalise(self) -> None:
        """One spelling per subquery reference: the physical ``Subquery subquery#1, [id=#2]`` (which holds
        a top-level comma) as the logical ``scalar-subquery#1 []``."""
        for n in self.plan.nodes.values():
            for k, v in n.details.items():
                if "ubquery subquery#" in v:
                    n.details[k] = _PHYS_SUBQUERY_ANY.sub(r"scalar-subquery#\1 []", v)

    # -- logical (a command's printed query) ------------------------------------------------------------
    def logical(self, node: TextNode) -> _PlanNode:
        """A printed logical node (a command's query); a cut one keeps its children (the sources)."""
        inner_plans = [self.logical(i) for i in node.inner]
        kids = [self.logical(c) for c in node.children]
        if not node.has_details:
            self.cut(node, "no details for this node")
            return _PlanNode(_L + "Cut", {}, kids)
        try:
            self.bind_subqueries(node, inner_plans)
            return self.logical_node(node, kids)
        except _Cut as e:
            self.cut(node, str(e))
            return _PlanNode(_L + "Cut", {}, kids)

    def logical_node(self, node: TextNode, kids: list[_PlanNode]) -> _PlanNode:
        name = node.name
        a = self.args(node)
        f: dict[str, Any] = {}
        if name == "LogicalRelation":
            attrs = self.es(a[1]) if len(a) > 1 else []
            f["output"] = attrs
            if len(a) > 2 and a[2].startswith("`"):
                f["catalogTable"] = {"identifier": _ident_text(a[2]), "provider": a[0]}
            return _PlanNode(_D + "LogicalRelation", f)
        if name == "HiveTableRelation":
            if a and a[0].startswith("`"):  # `cat`.`db`.`t`, <serde>, [output]
                cols = next((x for x in a[1:] if x.startswith("[")), "[]")
                return _PlanNode(
                    _L.replace("plans.logical.", "catalog.") + "HiveTableRelation",
                    {"tableMeta": {"identifier": _ident_text(a[0])}, "dataCols": self.es(cols)},
                )
            return self.hive_relation(node.details.get("Arguments", node.label))
        if name in ("Project",):
            f["projectList"] = self.es(node.details.get("Arguments", "[]"))
        elif name == "Filter":
            f["condition"] = self.e(node.details.get("Arguments", "true"))
        elif name == "Join":
            f["joinType"] = {"object": _L.replace("logical.", "") + a[0] + "$"} if a else {}
            f["condition"] = self.e(a[1]) if len(a) > 1 and a[1] != "None" else None
        elif name == "Aggregate":
            f["groupingExpressions"] = self.es(a[0]) if a else []
            f["aggregateExpressions"] = self.es(a[1]) if len(a) > 1 else []
            if len(a) == 1:  # Spark prints no grouping list when it is empty
                f["groupingExpressions"], f["aggregateExpressions"] = [], self.es(a[0])
        elif name == "Window":
            f["windowExpressions"] = self.es(a[0]) if a else []
        elif name == "Generate":
            gen = a[0] if a else ""
            f["generator"] = self.e(gen)
            f["generatorOutput"] = self.es(a[-1]) if len(a) > 1 else []
        elif name == "Expand":
            f["projections"] = [self.es(p) for p in _list(a[0])] if a else []
            f["output"] = self.es(a[1]) if len(a) > 1 else []
        elif name == "Sort":
            f["order"] = self.es(a[0]) if a else []
        elif name == "View":  # `db`.`v`, <serde>, false[, []] (persistent); `tv`, true[, []] (temporary)
            f["desc"] = {"identifier": _ident_text(a[0])} if a else {}
            f["isTempView"] = "true" in a[1:]
        elif name == "Union":
            pass
        elif name in ("InMemoryRelation",):
            return self.in_memory(node)
        elif name in _WALK_THROUGH or name in ("LocalRelation", "OneRowRelation", "Range", "LogicalRDD"):
            cls = {"LocalRelation", "OneRowRelation", "Range", "LogicalRDD"}
            if name in cls:
                return _PlanNode(_L + name, {"output": []})
            return _PlanNode(_L + name, f, kids)
        else:
            return self.unknown(node, kids)
        return _PlanNode(_L + name, f, kids)

    def bind_subqueries(self, node: TextNode, inner_plans: list[_PlanNode]) -> None:
        """A logical node's inner nodes are the plans of its subquery expressions, in printed order."""
        if not inner_plans:
            return
        text = node.details.get("Arguments", "")
        ids = [
            int(m.group(2))
            for m in re.finditer(r"(scalar-subquery|list|exists|lateral-subquery)#(\d+)", text)
        ]
        for xid, plan in zip(ids, inner_plans, strict=False):
            self.subplans[xid] = plan.items()

    def hive_relation(self, text: str) -> _PlanNode:
        m = re.search(r"HiveTableRelation \[(?P<ident>[^,]+),", text) or re.match(
            r"\[?(?P<ident>`[^,]+),", text
        )
        data = re.search(r"Data Cols: (\[[^\]]*\])", text)
        part = re.search(r"Partition Cols: (\[[^\]]*\])", text)
        f = {
            "tableMeta": {"identifier": _ident_text(m.group("ident")) if m else None},
            "dataCols": self.es(data.group(1)) if data else [],
            "partitionCols": self.es(part.group(1)) if part else [],
        }
        return _PlanNode(_L.replace("plans.logical.", "catalog.") + "HiveTableRelation", f)

    def unknown(self, node: TextNode, kids: list[_PlanNode]) -> _PlanNode:
        self.problem(node, "a plan node the event-log reader does not know", "unknown_node")
        out = node.details.get("Output")
        f: dict[str, Any] = {}
        if out:
            with contextlib.suppress(_Cut):
                f["output"] = self.es(out)
        return _PlanNode(_L + "Unknown" + node.name, f, kids)

    # -- physical --------------------------------------------------------------------------------------
    def physical(self, node: TextNode) -> _PlanNode:
        """A physical node as the logical node it implements; a cut one keeps its children (the sources)."""
        cached = node.name == "InMemoryTableScan" or node.label.startswith("Scan In-memory table")
        kids = [self.physical(c) for c in node.children] if not cached else []
        if not node.has_details:
            self.cut(node, "no details for this node")
            return _PlanNode(_L + "Cut", {}, kids)
        try:
            return self.physical_node(node, kids)
        except _Cut as e:
            self.cut(node, str(e))
            return _PlanNode(_L + "Cut", {}, kids)

    def physical_node(self, node: TextNode, kids: list[_PlanNode]) -> _PlanNode:
        name = node.name
        d = node.details
        label = node.label
        if name == "InMemoryTableScan" or label.startswith("Scan In-memory table"):
            if node.inner:
                return self.in_memory(node.inner[0])
            return self.unknown(node, [])
        if name == "Scan" or label.startswith("BatchScan") or label.startswith("FileScan"):
            return self.scan(node)
        f: dict[str, Any] = {}
        if name == "Project":
            f["projectList"] = self.es(d.get("Output", "[]"))
            return _PlanNode(_L + "Project", f, kids)
        if name == "Filter":
            cond = d.get("Condition", "true")
            return _PlanNode(
                _L + "Filter", {"condition": self.e(_drop_inferred_not_null(cond, self.join_keys))}, kids
            )
        if name in _AGGREGATE_NODES:
            functions = _list(d.get("Functions", "[]"))
            if any(fn.startswith(("partial_", "merge_")) for fn in functions):
                return kids[0] if kids else _PlanNode(_L + "LocalRelation")  # a partial stage
            if not functions and _list(d.get("Results", "[]")) == _list(d.get("Keys", "[]")):
                # no aggregate function and the keys are the output: a DISTINCT (the analyzed plan the hook
                # reads has Distinct there, which restricts nothing) -- or GROUP BY the whole select list
                return kids[0] if kids else _PlanNode(_L + "LocalRelation")
            attrs = _list(d.get("Aggregate Attributes", "[]"))
            subst = {}
            for fn_text, attr_text in zip(functions, attrs, strict=False):
                m = re.search(r"#(\d+)L?$", attr_text)
                if m is not None:
                    subst[m.group(0)] = (attr_text, fn_text)
            results = []
            for r in _list(d.get("Results", "[]")):
                for _key, (attr_text, fn_text) in subst.items():
                    if attr_text in r:
                        r = r.replace(attr_text, fn_text)
                results.append(self.e(r))
            f["groupingExpressions"] = self.es(d.get("Keys", "[]"))
            f["aggregateExpressions"] = results
            return _PlanNode(_L + "Aggregate", f, kids)
        if name in _JOIN_NODES:
            jt = d.get("Join type") or (label.split(" ")[1] if " " in label else "Inner")
            left = _list(d.get("Left keys", "[]"))
            right = _list(d.get("Right keys", "[]"))
            conds = [f"({lk} = {rk})" for lk, rk in zip(left, right, strict=False)]
            extra = d.get("Join condition", "None")
            if extra and extra != "None":
                conds.append(extra)
            cond_text = conds[0] if conds else None
            for c in conds[1:]:
                cond_text = f"({cond_text} AND {c})"
            f["joinType"] = {"object": "org.apache.spark.sql.catalyst.plans." + jt + "$"}
            if jt.startswith(("LeftSemi", "LeftAnti", "ExistenceJoin")):
                # what the optimizer makes of IN / EXISTS subqueries (RewritePredicateSubquery): the
                # analyzed plan the hook reads has a WHERE there
                f["condition"] = None
                join = _PlanNode(_L + "Join", f, kids)
                if not cond_text:
                    return join
                return _PlanNode(_L + "Filter", {"condition": self.e(cond_text)}, [join])
            f["condition"] = self.e(cond_text) if cond_text else None
            return _PlanNode(_L + "Join", f, kids)
        if name == "Window":
            a = self.args(node)
            f["windowExpressions"] = self.es(a[0]) if a else []
            return _PlanNode(_L + "Window", f, kids)
        if name == "Generate":
            a = self.args(node)
            f["generator"] = self.e(a[0]) if a else []
            f["generatorOutput"] = self.es(a[-1]) if len(a) > 1 else []
            # a physical Generate outputs only the child columns it lists (requiredChildOutput)
            required = {x for x in (_list(a[1]) if len(a) > 2 else [])}
            child_out = [x for x in _list(d.get("Input", "[]"))]
            f["unrequiredChildIndex"] = [i for i, x in enumerate(child_out) if x not in required]
            return _PlanNode(_L + "Generate", f, kids)
        if name == "Expand":
            a = self.args(node)
            f["projections"] = [self.es(p) for p in _list(a[0])] if a else []
            f["output"] = self.es(a[1]) if len(a) > 1 else []
            return _PlanNode(_L + "Expand", f, kids)
        if name == "Union":
            return _PlanNode(_L + "Union", f, kids)
        if name in _PYTHON_EVAL:
            # [udf(a#1)#9, ...], [pythonUDF0#10, ...]: the child's columns, then each UDF's result
            a = self.args(node)
            udfs = _list(a[0]) if a else []
            udf_outs = _list(a[1]) if len(a) > 1 else []
            proj = self.es(d.get("Input", "[]"))
            for udf_text, result in zip(udfs, udf_outs, strict=False):
                udf_call = re.sub(r"#\d+L?$", "", udf_text)
                proj.append(self.e(f"{udf_call} AS {result}"))
            return _PlanNode(_L + "Project", {"projectList": proj}, kids)
        if name in ("Sort", "TakeOrderedAndProject"):
            a = self.args(node)
            if name == "Sort" and (len(a) < 2 or a[1] != "true"):
                return kids[0] if kids else _PlanNode(_L + "LocalRelation")  # a sort a join or window needs
            if name == "TakeOrderedAndProject":
                lists = [x.split("=", 1)[-1] for x in a if x.split("=", 1)[-1].startswith("[")]
                sort = _PlanNode(_L + "Sort", {"order": self.es(lists[0]) if lists else []}, kids)
                if len(lists) < 2:
                    return sort
                return _PlanNode(_L + "Project", {"projectList": self.es(lists[1])}, [sort])
            return _PlanNode(_L + "Sort", {"order": self.es(a[0]) if a else []}, kids)
        if name in _WALK_THROUGH or name in ("Sort",):
            return kids[0] if len(kids) == 1 else _PlanNode(_L + "Union", {}, kids)
        if (
            name in _IN_MEMORY_SCANS
            or label.startswith("Scan ExistingRDD")
            or label.startswith("Scan OneRowRelation")
        ):
            return _PlanNode(_L + "LocalRelation", {"output": []})
        return self.unknown(node, kids)

    def scan(self, node: TextNode) -> _PlanNode:
        """A file, Hive or V2 scan: a LogicalRelation (or HiveTableRelation) with the same output exprIds."""
        d = node.details
        label = node.label
        words = label.split(" ")
        out = self.es(d.get("Output", "[]"))
        ids = [int(x["exprId"]["id"]) for x in (o[0] for o in out) if "exprId" in x]
        schema = d.get("ReadSchema", "")
        for attr, (col, dtype) in zip(out, _read_schema(schema), strict=False):
            if attr[0].get("name") == col and "exprId" in attr[0]:
                attr[0]["dataType"] = dtype
                self.types.setdefault(int(attr[0]["exprId"]["id"]), dtype)
        if len(words) > 1 and words[1] == "hive":
            return self.hive_relation(d.get("Arguments", ""))
        fmt = words[1] if len(words) > 1 else None
        table = _ident_text(words[2]) if len(words) > 2 else None
        loc = d.get("Location", "")
        paths = re.findall(r"(?:file|hdfs|s3a?|s3n|abfss?|wasbs?|gs|viewfs|dbfs|oss|cos):[^\s,\]]+", loc)
        if not paths:
            m = re.search(r"\[(/[^\],]+(?:, /[^\],]+)*)\]", loc)
            paths = [p.strip() for p in m.group(1).split(",")] if m else []
        f: dict[str, Any] = {"output": out}
        if table is not None and len(words) > 2:
            f["catalogTable"] = {"identifier": table, "provider": fmt}
        else:
            self.leaves.append({"exprIds": ids, "paths": paths, "format": fmt})
        return _PlanNode(_D + "LogicalRelation", f)

    def in_memory(self, node: TextNode) -> _PlanNode:
        """A cached relation: the plan it caches, its output re-aliased to the relation's exprIds."""
        a = self.args(node)
        rel_out = _list(a[0]) if a else []
        if not node.inner:
            return self.unknown(node, [])
        logical = bool(node.inner[0].details) and set(node.inner[0].details) <= {"Arguments"}
        child = self.logical(node.inner[0]) if logical else self.physical(node.inner[0])
        cached_out = _child_outputs(node.inner[0])
        proj = []
        for i, text in enumerate(rel_out):
            m = _ATTR.match(text)
            if m is None:
                continue
            if i < len(cached_out):
                proj.append(self.e(f"{cached_out[i]} AS {text}") if cached_out[i] != text else self.e(text))
        return _PlanNode(_L + "Project", {"projectList": proj}, [child])

    # -- the command -----------------------------------------------------------------------------------
    def command(self, root: TextNode) -> tuple[_PlanNode, dict[str, Any]] | None:
        """The write command of one execution as a logical command node, and the facts it gives."""
        node = root
        while node.name in ("AdaptiveSparkPlan", "ResultQueryStage") and node.children:
            node = node.children[0]
        if node.name == "Execute":
            cmd_name = node.label.split(" ", 1)[1] if " " in node.label else ""
            if node.inner:  # ExecutedCommandExec: the logical command, its query inside it
                return self.logical_command(node.inner[0])
            return self.data_writing(node, cmd_name)
        if write_priority(node.name) or node.name in _V2_WRITES:
            return self.v2_write(node)
        return None

    def logical_command(self, cmd: TextNode) -> tuple[_PlanNode, dict[str, Any]] | None:
        name = cmd.name
        a = self.args(cmd)
        query = self.logical(cmd.inner[0]) if cmd.inner else None
        facts: dict[str, Any] = {}
        f: dict[str, Any] = {}
        if name in (
            "CreateDataSourceTableAsSelectCommand",
            "CreateHiveTableAsSelectCommand",
            "OptimizedCreateHiveTableAsSelectCommand",
        ):
            key = "table" if name == "CreateDataSourceTableAsSelectCommand" else "tableDesc"
            f[key] = {"identifier": _ident_text(a[0]) if a else None}
            f["outputColumnNames"] = a[-1] if len(a) > 1 and a[-1].startswith("[") else None
        elif name == "SaveAsV1TableCommand":
            return None  # its query is printed as one line: the CTAS it runs carries the plan
        elif name == "InsertIntoDataSourceDirCommand":
            m = re.search(r"Location: ([^,)]+)", cmd.details.get("Arguments", ""))
            f["storage"] = {"locationUri": m.group(1).strip() if m else None}
            f["provider"] = a[1] if len(a) > 1 else None
        elif name == "CreateViewCommand":
            temp = any(x in ("LocalTempView", "GlobalTempView") for x in a)
            view_type = next((x for x in a if x.endswith("View")), "PersistedView")
            f["name"] = _ident_text(a[0]) if a else None
            f["viewType"] = {"object": "org.apache.spark.sql.catalyst.analysis." + view_type + "$"}
            if not temp and len(a) > 1:
                f["originalText"] = a[1]
        elif name == "AlterTableRenameCommand":
            f["oldName"] = _ident_text(a[0]) if a else None
            f["newName"] = _ident_text(a[1]) if len(a) > 1 else None
            f["isView"] = len(a) > 2 and a[2] == "true"
        elif name == "InsertIntoHadoopFsRelationCommand" or name == "InsertIntoHiveTable":
            return self.data_writing(cmd, name)
        else:
            return None
        if query is not None:
            f["query" if name != "CreateViewCommand" else "plan"] = query.items()
        return _PlanNode(_C + name, f), facts

    def data_writing(self, node: TextNode, cmd_name: str) -> tuple[_PlanNode, dict[str, Any]] | None:
        a = self.args(node)
        query = self.physical(node.children[0]) if node.children else None
        f: dict[str, Any] = {}
        facts: dict[str, Any] = {}
        if cmd_name == "InsertIntoHadoopFsRelationCommand":
            write: dict[str, Any] = {"path": a[0] if a else None}
            if len(a) > 2:
                write["format"] = a[2].lower()
            mode = next((x for x in a if x in _WRITE_MODES), None)
            if mode:
                write["mode"] = mode
            table = next((x for x in a if x.startswith("`")), None)
            if table is not None:
                f["catalogTable"] = {"identifier": _ident_text(table), "provider": write.get("format")}
            f["outputColumnNames"] = a[-1] if len(a) > 1 and a[-1].startswith("[") else None
            facts["write"] = write
        elif cmd_name == "InsertIntoHiveTable":
            f["table"] = {"identifier": _ident_text(a[0]) if a else None}
            f["overwrite"] = len(a) > 3 and a[3] == "true"
            names = next((x for x in a if x.startswith("[")), None)
            f["outputColumnNames"] = names
        elif cmd_name in ("CreateHiveTableAsSelectCommand", "OptimizedCreateHiveTableAsSelectCommand"):
            f["tableDesc"] = {"identifier": _ident_text(a[0]) if a else None}
            f["outputColumnNames"] = a[-1] if len(a) > 1 and a[-1].startswith("[") else None
        elif cmd_name == "InsertIntoHiveDirCommand":
            m = re.search(r"Location: ([^,)]+)", node.details.get("Arguments", ""))
            f["storage"] = {"locationUri": m.group(1).strip() if m else None}
        else:
            self.problem(
                node, f"a write command the event-log reader does not know ({cmd_name})", "unknown_node"
            )
            return None
        if query is not None:
            f["query"] = query.items()
        return _PlanNode(_D + cmd_name, f), facts

    def v2_write(self, node: TextNode) -> tuple[_PlanNode, dict[str, Any]] | None:
        """DataSource V2 writes (AppendData, OverwriteByExpression, ReplaceTableAsSelect ...): the target is
        the first argument (a table or its identifier), the query the child."""
        a = self.args(node)
        name = _V2_WRITES.get(node.name, node.name)
        query = self.physical(node.children[0]) if node.children else None
        ident = None
        for x in a:
            m = re.search(r"(`[^`]+`(?:\.`[^`]+`)*|[\w]+\.[\w.]+)", x)
            if m is not None:
                ident = _ident_text(m.group(1))
                break
        if ident is None:
            self.problem(node, "the V2 write's target is not in the text", "unknown_node")
            return None
        table = _PlanNode(
            "org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation",
            {"identifier": {"name": ident["table"], "namespace": [ident.get("database", "")]}},
        )
        f: dict[str, Any] = {"table": table.items()}
        if query is not None:
            f["query"] = query.items()
        return _PlanNode(_L + name, f), {}


_V2_WRITES = {
    "AppendData": "AppendData",
    "AppendDataExec": "AppendData",
    "OverwriteByExpression": "OverwriteByExpression",
    "OverwriteByExpressionExec": "OverwriteByExpression",
    "OverwritePartitionsDynamic": "OverwritePartitionsDynamic",
    "OverwritePartitionsDynamicExec": "OverwritePartitionsDynamic",
    "ReplaceTableAsSelect": "ReplaceTableAsSelect",
    "AtomicReplaceTableAsSelect": "ReplaceTableAsSelect",
    "CreateTableAsSelect": "CreateTableAsSelect",
    "AtomicCreateTableAsSelect": "CreateTableAsSelect",
}


def _child_outputs(node: TextNode) -> list[str]:
    out = node.details.get("Output")
    if out:
        try:
            return _list(out)
        except _Cut:
            return []
    a = _split_top(node.details.get("Arguments", ""))
    for x in a:
        if x.startswith("["):
            try:
                return _list(x)
            except _Cut:
                return []
    return _child_outputs(node.children[0]) if node.children else []


def _read_schema(schema: str) -> Iterator[tuple[str, str]]:
    """``struct<a:int,b:string>`` -> (column, Spark JSON type name) pairs, top-level only."""
    if not schema.startswith("struct<") or not schema.endswith(">"):
        return
    for part in _split_top(schema[7:-1].replace("<", "(").replace(">", ")"), ","):
        name, _, dtype = part.partition(":")
        base = dtype.split("(", 1)[0]
        yield name, _TYPES.get(base, base)


def _drop_inferred_not_null(cond: str, join_keys: set[str]) -> str:
    """Drop the ``isnotnull(x)`` conjuncts Spark infers (InferFiltersFromConstraints) from other predicates
    on x or from a join on x: they are not in the query, the hook's analyzed plan has none."""
    parts: list[str] = []
    stack = [cond.strip()]
    while stack:
        c = stack.pop()
        if c.startswith("(") and _matching(c, 0) == len(c) - 1:
            k = _find_top(c[1:-1], " AND ")
            if k > 0:
                stack.append(c[1:-1][k + 5 :])
                stack.append(c[1:-1][:k])
                continue
        parts.append(c)
    kept = []
    for p in parts:
        m = re.match(r"^isnotnull\(([^()]+#\d+L?)\)$", p) or re.match(
            r"^\(size\(([^()]+#\d+L?), (?:true|false)\) > 0\)$", p
        )
        if m is not None and (m.group(1) in join_keys or any(m.group(1) in q for q in parts if q is not p)):
            continue
        kept.append(p)
    if not kept:
        return "true"
    out = kept[0]
    for p in kept[1:]:
        out = f"({out} AND {p})"
    return out


# ---------------------------------------------------------------------------------------------------------
# Entry point


def _read_plan(ex: SqlExecution) -> FormattedPlan:
    """The execution's plan text; its ``sparkPlanInfo`` when the text was cut."""
    text = ex.start.get("physicalPlanDescription")
    plan = parse_formatted_plan(text if isinstance(text, str) else "")
    info = ex.start.get("sparkPlanInfo")
    if plan.cut and isinstance(info, Mapping):
        return plan_from_info(info)
    return plan


def extract_root_execution(
    executions: Sequence[SqlExecution], *, current_database: str = "default", temp_views: bool = False
) -> ExtractionResult:
    """Lineage of one root execution and the executions nested in it (same rootExecutionId): one process
    per write statement, as the hook makes it; failed executions give nothing."""
    if not executions:
        return ExtractionResult()
    ordered = sorted(executions, key=lambda x: x.execution_id)
    root = next((x for x in ordered if x.root_execution_id in (None, x.execution_id)), ordered[0])
    if root.failed:  # a failed statement wrote nothing (or what it wrote was rolled back)
        return ExtractionResult()
    ordered = [x for x in ordered if not x.failed]
    types: dict[int, str] = {}
    leaves: list[dict[str, Any]] = []
    problems: list[Problem] = []
    writes: list[tuple[int, int, list[dict[str, Any]], dict[str, Any], bool, _Converter]] = []
    parsed = [(x, _read_plan(x)) for x in ordered]
    # the physical scans first: their paths and types serve every execution of the group
    for x, plan in parsed:
        conv = _Converter(plan, x.execution_id, types)
        for r in plan.roots:
            try:
                conv.physical(r)
            except (_Cut, ValueError, IndexError, KeyError, RecursionError):
                continue
        leaves.extend(conv.leaves)
    for x, plan in parsed:
        if not plan.roots:
            problems.append(
                Problem(
                    message=f"execution {x.execution_id} (line {x.line}): no plan text to read",
                    severity=Severity.WARNING,
                    kind="parse",
                )
            )
            continue
        conv = _Converter(plan, x.execution_id, types, x.line)
        try:
            got = conv.command(plan.roots[0])
        except _Cut as e:
            conv.cut(plan.roots[0], str(e))
            got = None
        except (ValueError, IndexError, KeyError, RecursionError) as e:
            conv.problem(plan.roots[0], f"unreadable plan text: {type(e).__name__}: {e}", "parse")
            got = None
        if plan.cut:
            conv.cut(plan.roots[0], "spark.sql.maxPlanStringLength")
        problems.extend(conv.problems)
        if got is None:
            continue
        node, facts = got
        items = node.items()
        nested_file_write = (
            x.execution_id != root.execution_id
            and node.cls.endswith(".InsertIntoHadoopFsRelationCommand")
            and "catalogTable" not in node.fields
        )
        if nested_file_write and any(w[1] > write_priority(node.cls) for w in writes):
            continue  # the file write a CTAS / saveAsTable / INSERT OVERWRITE DIRECTORY runs: one process
        writes.append((x.execution_id, write_priority(node.cls), items, facts, conv.degraded, conv))
    # one process per statement: of the writes of one target, the command that names it (highest priority)
    best: dict[str, tuple[int, int, list[dict[str, Any]], dict[str, Any], bool, _Converter]] = {}
    order: list[str] = []
    seen: dict[str, str] = {}  # query signature or target -> statement key
    for w in writes:
        sig, target = plan_identity(w[2], {**w[3], "current_database": current_database})
        names = [n for n in (sig, target) if n]
        key = next((seen[n] for n in names if n in seen), None) or (names[0] if names else f"x{w[0]}")
        for n in names:
            seen.setdefault(n, key)
        old = best.get(key)
        if old is None:
            order.append(key)
            best[key] = w
        elif w[1] > old[1]:
            best[key] = w
    lineages: list[Lineage] = []
    for key in order:
        _xid, _prio, items, facts, degraded, _conv = best[key]
        all_facts = {**facts, "leaves": leaves, "current_database": current_database}
        res = extract_spark_plan_lineage(items, all_facts, temp_views=temp_views)
        problems.extend(res.problems)
        lin = res.lineage
        if degraded and lin.processes:
            lin = _table_level(lin)
        lineages.append(lin)
    return ExtractionResult(lineage=_union(lineages), problems=tuple(problems))


def _table_level(lin: Lineage) -> Lineage:
    """Keep only the datasets read and written: ``PseudoRows`` edges from each source to each target."""
    targets = {ds.id for ds in lin.datasets if ds.process_ids}
    sources = sorted(ds.id for ds in lin.datasets if ds.id not in targets)
    rels = []
    pid = lin.processes[0].id
    for t in sorted(targets):
        for s in sources:
            rels.append(
                Relation(
                    type=RelationType.FDD,
                    source=ColumnRef(dataset_id=s, column=PSEUDO_ROWS),
                    target=ColumnRef(dataset_id=t, column=PSEUDO_ROWS),
                    process_id=pid,
                )
            )
    from atlas_bridge.model import Column

    datasets = tuple(
        ds.model_copy(update={"columns": (Column(name=PSEUDO_ROWS, system=True),)}) for ds in lin.datasets
    )
    return Lineage(datasets=datasets, processes=lin.processes, relations=tuple(rels))


def _union(lineages: Sequence[Lineage]) -> Lineage:
    if len(lineages) == 1:
        return lineages[0]
    datasets: dict[str, Any] = {}
    processes: dict[str, Any] = {}
    relations: list[Relation] = []
    for lin in lineages:
        for ds in lin.datasets:
            old = datasets.get(ds.id)
            if old is None:
                datasets[ds.id] = ds
            else:
                cols = {c.name: c for c in old.columns}
                for c in ds.columns:
                    cols.setdefault(c.name, c)
                pids = tuple(dict.fromkeys((*old.process_ids, *ds.process_ids)))
                datasets[ds.id] = old.model_copy(
                    update={"columns": tuple(cols.values()), "process_ids": pids}
                )
        for p in lin.processes:
            processes.setdefault(p.id, p)
        relations.extend(lin.relations)
    return Lineage(
        datasets=tuple(datasets.values()), processes=tuple(processes.values()), relations=tuple(relations)
    )
