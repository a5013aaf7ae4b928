"""Statement-handler registry: which function analyses which kind of parsed statement.

A handler is ``def handle(stmt: exp.Expr, ctx: StatementContext) -> None``; it adds datasets,
relations and (for statements that move data) a process to ``ctx``. Register it for one or more sqlglot
expression classes with :func:`handler`; the most specific class wins (looked up along the MRO), and a
later registration for the same class replaces an earlier one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

from sqlglot import exp

if TYPE_CHECKING:
    from atlas_bridge.extractors.sql.core import StatementContext

Handler: TypeAlias = "Callable[[exp.Expr, StatementContext], None]"

_HANDLERS: dict[type[exp.Expr], Handler] = {}


def handler(*types: type[exp.Expr]) -> Callable[[Handler], Handler]:
    """Decorator: register the function as the handler of these statement classes."""

    def register(fn: Handler) -> Handler:
        for t in types:
            _HANDLERS[t] = fn
        return fn

    return register


def find_handler(stmt: exp.Expr) -> Handler | None:
    """The handler for this statement's class (or its nearest registered base class)."""
    for cls in type(stmt).__mro__:
        fn = _HANDLERS.get(cls)
        if fn is not None:
            return fn
        if cls is exp.Expr:
            break
    return None
