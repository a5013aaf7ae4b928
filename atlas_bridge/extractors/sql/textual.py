"""Running a statement handler on text sqlglot cannot parse (Snowflake stages, procedural blocks...).

A text handler (:func:`.registry.text_handler`) claims a statement from its tokens and analyses it with a
function of the :class:`~.core.StatementContext` it is given; :func:`run_on_text` gives that function the
same protection :func:`atlas_bridge.extractors.sql.extract_sql_lineage` gives parsed statements: a
failure costs this statement only and becomes a Problem naming file, statement, line and column.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token, TokenType  # type: ignore[attr-defined]

from atlas_bridge.extractors.sql.builder import GraphBuilder
from atlas_bridge.extractors.sql.core import ScriptState, StatementContext, StatementTimeout, UnsupportedSQL
from atlas_bridge.extractors.sql.split import StatementChunk
from atlas_bridge.model import Problem

logger = logging.getLogger(__name__)


def problem(state: ScriptState, index: int, offset: int, message: str, kind: str) -> Problem:
    line, col = state.lines.position(offset)
    return Problem(message=message, kind=kind, file=state.file, statement_index=index, line=line, column=col)


def failure(e: Exception) -> tuple[str, str]:
    """(message, kind) of a Problem for an exception that escaped a statement's analysis.

    Deep nesting exhausts Python's stack (sqlglot and our resolver recurse): that is a limit, not a bug.
    Messages are cut short: an exception may quote the whole (huge) statement.
    """
    if isinstance(e, RecursionError):
        return "statement nested too deeply to analyse (Python recursion limit)", "unsupported"
    return f"internal error: {type(e).__name__}: {_short(str(e))}", "internal"


def parse_failure(e: Exception) -> str:
    """The message of a Problem for a parse that failed other than with a ParseError."""
    if isinstance(e, RecursionError):
        return "cannot parse: statement nested too deeply (Python recursion limit)"
    if isinstance(e, SqlglotError):
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return f"cannot parse: {_short(first)}"
    return f"cannot parse: sqlglot failed on this statement ({type(e).__name__}: {_short(str(e))})"


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run_on_text(
    state: ScriptState,
    chunk: StatementChunk,
    budget: float | None,
    fn: Callable[[StatementContext], None],
    *,
    start: int | None = None,
    end: int | None = None,
) -> list[GraphBuilder]:
    """Run ``fn`` on a fresh context for ``text[start:end]`` (default: the chunk); [] when it failed."""
    deadline = None if budget is None else time.monotonic() + budget
    ctx = StatementContext(
        state,
        index=chunk.index,
        start=chunk.start if start is None else start,
        end=chunk.end if end is None else end,
        deadline=deadline,
    )
    counters = dict(state.counters)
    try:
        fn(ctx)
        ctx.graph.finish(state.spelling)
    except StatementTimeout:
        state.counters = counters
        state.problems.append(
            problem(
                state,
                chunk.index,
                ctx.start,
                f"time budget of {budget}s exceeded; statement skipped",
                "timeout",
            )
        )
        return []
    except UnsupportedSQL as e:
        state.counters = counters
        state.problems.append(problem(state, chunk.index, ctx.start, str(e), "unsupported"))
        return []
    except Exception as e:  # a bug of ours must not cost the rest of the script
        logger.debug("statement %d failed", chunk.index, exc_info=True)
        state.counters = counters
        state.problems.append(problem(state, chunk.index, ctx.start, *failure(e)))
        return []
    state.problems.extend(ctx.problems)
    return [ctx.graph]


# ---------------------------------------------------------------------------------------------------------
# Token helpers


def word(tok: Token) -> str:
    """The token's text, upper-cased (keywords and identifiers alike)."""
    return str(tok.text).upper()


def words(tokens: list[Token], n: int) -> list[str]:
    return [word(t) for t in tokens[:n]]


def skip_create_prefix(tokens: list[Token]) -> int:
    """Index after ``CREATE [OR REPLACE] [TEMPORARY|TRANSIENT|VOLATILE|GLOBAL|SECURE...]*``."""
    i = 0
    if i < len(tokens) and word(tokens[i]) in ("CREATE", "REPLACE", "ALTER"):
        i += 1
    if i + 1 < len(tokens) and word(tokens[i]) == "OR" and word(tokens[i + 1]) in ("REPLACE", "ALTER"):
        i += 2
    while i < len(tokens) and word(tokens[i]) in (
        "TEMPORARY",
        "TEMP",
        "TRANSIENT",
        "VOLATILE",
        "GLOBAL",
        "LOCAL",
        "SECURE",
        "EDITIONABLE",
        "NONEDITIONABLE",
        "DEFINER",
    ):
        i += 1
    return i


def dotted_name(tokens: list[Token], i: int) -> tuple[list[str], int, int]:
    """``a.b.c`` from token ``i``: (parts unquoted, next index, end offset exclusive)."""
    parts: list[str] = []
    end = tokens[i].end + 1 if i < len(tokens) else 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.token_type in (TokenType.L_PAREN, TokenType.R_PAREN, TokenType.COMMA, TokenType.EQ):
            break
        parts.append(str(tok.text))
        end = tok.end + 1
        i += 1
        if i < len(tokens) and tokens[i].token_type is TokenType.DOT:
            i += 1
            continue
        break
    return parts, i, end


def split_name(parts: list[str]) -> tuple[str, str | None, str | None]:
    """(name, db, catalog) of a dotted name."""
    name = parts[-1] if parts else ""
    db = parts[-2] if len(parts) > 1 else None
    catalog = parts[-3] if len(parts) > 2 else None
    return name, db, catalog
