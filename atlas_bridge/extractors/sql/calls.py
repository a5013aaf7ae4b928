"""User-defined function calls: the v2 ``calls`` edge (seed 002) for scalar UDFs and table-valued functions.

Built-in functions are transforms on the edges they compute (``Relation.transform``); a user-defined
function is an object of its own (a table of ``sub_type="function"``) so impact analysis can find every
statement that uses it. The call is a ``call`` relation (v2 ``calls``) from the function's ``PseudoRows``
to the column or resultset whose value the call produces, carrying the statement's process. A scalar UDF is
recognised by its qualified name (``dbo.calculate_tax(...)``): an unqualified unknown function may be a
dialect built-in sqlglot does not know, and is left a transform.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import TokenType  # type: ignore[attr-defined]

from atlas_bridge.extractors.sql.builder import DatasetBuilder
from atlas_bridge.extractors.sql.core import StatementContext
from atlas_bridge.extractors.sql.registry import post_hook
from atlas_bridge.extractors.sql.split import token_kinds
from atlas_bridge.model import DatasetKind, Effect, RelationType, dataset_id

CALL = RelationType.CALL
FDD = RelationType.FDD


def _function_dataset(
    ctx: StatementContext, name: str, db: str | None, catalog: str | None
) -> DatasetBuilder:
    ds = ctx.graph.dataset(
        DatasetBuilder(
            id=dataset_id(DatasetKind.TABLE, name, db, catalog),
            kind=DatasetKind.TABLE,
            name=name,
            db=db,
            catalog=catalog,
            sub_type="function",
        )
    )
    ds.sub_type = "function"
    return ds


def _may_call_qualified(kinds: list[TokenType]) -> bool:
    """Whether the token types hold a ``. name (`` run, which every ``schema.function(...)`` call needs: a
    scan of the tokens costs a fraction of a walk of the tree. C-level searches from dot to dot (a
    statement has a few dozen), not a Python step per token."""
    i, last = -1, len(kinds) - 3
    for _ in range(kinds.count(_DOT)):
        i = kinds.index(_DOT, i + 1)
        if i <= last and kinds[i + 2] is _L_PAREN:
            return True
    return False


_DOT = TokenType.DOT
_L_PAREN = TokenType.L_PAREN


def _scalar_udfs(stmt: exp.Expr) -> list[tuple[str, str | None, str | None, str]]:
    """(name, db, catalog, call text) of each ``schema.function(...)`` call."""
    out: list[tuple[str, str | None, str | None, str]] = []
    for dot in stmt.find_all(exp.Dot):
        call = dot.expression
        if not isinstance(call, exp.Anonymous):
            continue
        parts = [p.name for p in _dot_parts(dot.this)]
        if not parts or not all(parts):
            continue
        db = parts[-1]
        catalog = parts[-2] if len(parts) > 1 else None
        out.append((call.name, db, catalog, call.name.lower()))
    return out


def _dot_parts(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Dot):
        return [*_dot_parts(node.this), node.expression]
    if isinstance(node, exp.Column):
        return [
            p for p in (node.args.get("catalog"), node.args.get("db"), node.args.get("table"), node.this) if p
        ]
    return [node]


@post_hook
def function_calls(stmt: exp.Expr, ctx: StatementContext) -> None:
    graph = ctx.graph
    rels = list(graph.relations.values())
    if ctx.tokens is None:
        udfs = _scalar_udfs(stmt)
    else:
        kinds = ctx.kinds if ctx.kinds is not None else token_kinds(ctx.tokens)
        udfs = _scalar_udfs(stmt) if _may_call_qualified(kinds) else []
    for name, db, catalog, low in udfs:
        fn = _function_dataset(ctx, name, db, catalog)
        rows = (fn.id, fn.rows())
        targets = {r.target for r in rels if r.type is FDD and r.function and r.function.lower() == low}
        returns = ctx.state.counters.get(f"function-return:{fn.id}") is not None
        for target in sorted(targets):
            graph.add(CALL, rows, target, effect_type="function", process_id=ctx.process_id, function=name)
            if returns:  # the script defines the function: what it returns flows into the call's value
                graph.add(
                    FDD,
                    (fn.id, fn.column("RETURN")),
                    target,
                    effect_type=ctx.effect_type,
                    process_id=ctx.process_id,
                    effect=Effect.MODIFIED_COPY,
                    function=name,
                )
        if not targets:  # only constants passed: still record that the statement calls it
            for ds in graph.datasets.values():
                if ds.kind is DatasetKind.RESULTSET and ds.sub_type == "select_list":
                    graph.add(
                        CALL,
                        rows,
                        (ds.id, ds.rows()),
                        effect_type="function",
                        process_id=ctx.process_id,
                        function=name,
                    )
                    break
    for ds in list(graph.datasets.values()):
        if ds.kind is not DatasetKind.TABLE or ds.sub_type != "function":
            continue
        readers = sorted({r.target[0] for r in rels if r.source[0] == ds.id and r.type is FDD})
        for reader in readers:
            reader_ds = graph.datasets[reader]
            graph.add(
                CALL,
                (ds.id, ds.rows()),
                (reader, reader_ds.rows()),
                effect_type="function",
                process_id=ctx.process_id,
                function=ds.name,
                effect=Effect.EXACT_COPY,
            )
