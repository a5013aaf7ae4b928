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
    from sqlglot.parser import Parser

    from atlas_bridge.extractors.sql.builder import GraphBuilder
    from atlas_bridge.extractors.sql.core import ScriptState, StatementContext
    from atlas_bridge.extractors.sql.split import StatementChunk

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


# ---------------------------------------------------------------------------------------------------------
# Script-level hooks (issue 3): procedural blocks and statements sqlglot cannot parse as written.

ChunkHook: TypeAlias = "Callable[[list[StatementChunk], ScriptState], list[StatementChunk]]"
"""Re-cut the split statements (e.g. keep a ``BEGIN ... END`` block with inner semicolons together)."""

TextHandler: TypeAlias = (
    "Callable[[StatementChunk, ScriptState, Parser, float | None], list[GraphBuilder] | None]"
)
"""Claim a statement before sqlglot parses it: its graphs (one per inner statement), or None = not mine."""

PostHook: TypeAlias = "Callable[[exp.Expr, StatementContext], None]"
"""Runs after a statement's handler, on its parsed tree and context (e.g. to add ``call`` edges)."""

_CHUNK_HOOKS: list[ChunkHook] = []
_TEXT_HANDLERS: list[TextHandler] = []
_POST_HOOKS: list[PostHook] = []


def chunk_hook(fn: ChunkHook) -> ChunkHook:
    """Decorator: register a statement re-cutting hook (applied in registration order)."""
    _CHUNK_HOOKS.append(fn)
    return fn


def text_handler(fn: TextHandler) -> TextHandler:
    """Decorator: register a handler that may claim a statement before it is parsed."""
    _TEXT_HANDLERS.append(fn)
    return fn


def post_hook(fn: PostHook) -> PostHook:
    """Decorator: register a hook run after every statement handler."""
    _POST_HOOKS.append(fn)
    return fn


def regroup_chunks(chunks: list[StatementChunk], state: ScriptState) -> list[StatementChunk]:
    for fn in _CHUNK_HOOKS:
        chunks = fn(chunks, state)
    return chunks


def run_text_handlers(
    state: ScriptState, parser: Parser, chunk: StatementChunk, budget: float | None
) -> list[GraphBuilder] | None:
    for fn in _TEXT_HANDLERS:
        graphs = fn(chunk, state, parser, budget)
        if graphs is not None:
            return graphs
    return None


def run_post_hooks(stmt: exp.Expr, ctx: StatementContext) -> None:
    for fn in _POST_HOOKS:
        fn(stmt, ctx)
