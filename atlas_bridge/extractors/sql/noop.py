"""Statements that move no data, beyond the core list in :mod:`.statements`: neither an edge nor a problem.

sqlglot keeps many of them as a bare ``Command`` (SHOW, EXPLAIN, VACUUM, MSCK...): the ones listed in
:data:`NO_LINEAGE_COMMANDS` are known to move no data and stay silent; any other command still gets the
core's "not analysed" warning, so a statement that may move data is never dropped without a word.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.parser import Parser

from atlas_bridge.extractors.sql import ddl, dml, statements
from atlas_bridge.extractors.sql.builder import GraphBuilder
from atlas_bridge.extractors.sql.core import ScriptState, StatementContext
from atlas_bridge.extractors.sql.registry import handler, text_handler
from atlas_bridge.extractors.sql.split import StatementChunk

NO_LINEAGE_COMMANDS = frozenset(
    {
        "SHOW",
        "EXPLAIN",
        "DESCRIBE",
        "DESC",
        "VACUUM",
        "MSCK",
        "MSCK REPAIR",
        "OPTIMIZE",
        "ANALYZE",
        "GRANT",
        "REVOKE",
        "DENY",
        "USE",
        "SET",
        "RESET",
        "UNSET",
        "CACHE",
        "UNCACHE",
        "REFRESH",
        "CLEAR",
        "COMMIT",
        "ROLLBACK",
        "SAVEPOINT",
        "RELEASE",
        "BEGIN",
        "START",
        "END",
        "ABORT",
        "LOCK",
        "UNLOCK",
        "KILL",
        "CHECKPOINT",
        "REINDEX",
        "CLUSTER",
        "DISCARD",
        "LISTEN",
        "NOTIFY",
        "UNLISTEN",
        "PRINT",
        "RAISERROR",
        "THROW",
        "GO",
        "DBCC",
        "DECLARE",
        "DEALLOCATE",
        "PREPARE",
        "ADD",
        "LIST",
        "REMOVE",
        "RM",
        "LS",
        "COMMENT",
        "CLOSE",
        "RETURN",
        "EXIT",
        "BACKUP",
        "RESTORE",
        "WAITFOR",
        "FLUSH",
        "PURGE",
        "UNDROP",
        "ALTER SESSION",
        "ALTER WAREHOUSE",
        "ALTER USER",
        "ALTER ROLE",
        "SETUSER",
        "EXECUTE AS",
        "REVERT",
        "COLLECT",
        "HELP",
        "LOGOFF",
        "LOGON",
        "SYNC",
        "INVALIDATE",
    }
)
"""First word(s) of commands with no lineage (upper case)."""

_EXTRA_NO_LINEAGE = tuple(
    t
    for t in (
        getattr(exp, name, None)
        for name in (
            "Declare",
            "Kill",
            "Summarize",
            "Detach",
            "Attach",
            "Install",
            "Export",
            "LockingStatement",
        )
    )
    if isinstance(t, type) and issubclass(t, exp.Expr)
)


@handler(exp.Command)
def handle_command(stmt: exp.Expr, ctx: StatementContext) -> None:
    """A known no-lineage command is silent; any other keeps the core's warning."""
    head = str(stmt.this or "").strip().upper()
    rest = str(stmt.expression.name if isinstance(stmt.expression, exp.Expr) else "").strip().upper()
    two = f"{head} {rest.split()[0]}" if rest.split() else head
    if head in NO_LINEAGE_COMMANDS or two in NO_LINEAGE_COMMANDS:
        return
    if head == "CREATE" and ddl.clone_command(ctx):
        return
    if head == "REPLACE" and dml.replace_command(ctx):
        return
    statements.handle_command(stmt, ctx)


if _EXTRA_NO_LINEAGE:

    @handler(*_EXTRA_NO_LINEAGE)
    def handle_no_lineage(stmt: exp.Expr, ctx: StatementContext) -> None:
        """Declarations and session statements: no data moves."""


@text_handler
def use_statement(
    chunk: StatementChunk, state: ScriptState, parser: Parser, budget: float | None
) -> list[GraphBuilder] | None:
    """``USE <name>`` only changes the session's default: claimed before sqlglot, which trips on some
    names (T-SQL ``USE warehouse``: WAREHOUSE is a keyword)."""
    if chunk.tokens and str(chunk.tokens[0].text).upper() == "USE":
        return []
    return None
