"""Procedures and scripts: stored procedure bodies, anonymous blocks, variables, cursors and records.

sqlglot does not parse procedural code (PL/SQL blocks, T-SQL / Teradata / MySQL procedure bodies), so it is
handled from the tokens, as SQLFlow does it:

1. :func:`regroup_blocks` (a chunk hook) keeps a block together: a ``CREATE PROCEDURE|FUNCTION|TRIGGER``
   with a body, a PL/SQL ``DECLARE ... BEGIN ... END`` or a ``BEGIN ... END`` block, whose inner
   semicolons had split it. The inner statements are kept as the block's ``parts``.
2. :func:`procedural_block` (a text handler) reads the header (name, arguments -> a
   :class:`~atlas_bridge.model.Procedure`), the declarations (scalar variables, ``REF CURSOR`` /
   ``CURSOR c IS`` cursors, ``%ROWTYPE`` records), skips control flow (IF/ELSIF/LOOP/WHILE/BEGIN/END...)
   and analyses each inner statement at its own position in the file:

   - ``OPEN c FOR query`` / ``CURSOR c IS query`` / ``DECLARE c CURSOR FOR query``: query -> cursor;
   - ``FETCH c INTO rec | v1, v2``: cursor -> record (by field) or scalars (by position);
   - ``SELECT ... INTO v1, v2`` (PL/SQL, Teradata), ``SELECT @v = expr`` and ``SET @v = expr`` (T-SQL):
     query -> variables (WHERE columns -> the variable's PseudoRows, fdr);
   - any other statement goes to its ordinary handler, with variables resolved in its expressions and its
     :class:`~atlas_bridge.model.Process` carrying the procedure's name.

Variables are ``DatasetKind.VARIABLE`` datasets scoped to their procedure or block (``sub_type`` scalar /
cursor / record; a scalar has one column named like itself, a cursor or record ``*`` plus its fields), as
seed 000 shows them. What cannot be read becomes a warning naming its position; the rest goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeAlias

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.parser import Parser
from sqlglot.tokens import Token, TokenType  # type: ignore[attr-defined]

from atlas_bridge.extractors.sql.builder import ColKey, DatasetBuilder, GraphBuilder
from atlas_bridge.extractors.sql.core import QueryResult, ScriptState, StatementContext, UnsupportedSQL
from atlas_bridge.extractors.sql.registry import chunk_hook, find_handler, run_post_hooks, text_handler
from atlas_bridge.extractors.sql.resplit import token_statements
from atlas_bridge.extractors.sql.split import StatementChunk
from atlas_bridge.extractors.sql.textual import (
    dotted_name,
    parse_failure,
    problem,
    run_on_text,
    skip_create_prefix,
    split_name,
    word,
)
from atlas_bridge.model import (
    Argument,
    ClauseType,
    DatasetKind,
    Effect,
    Procedure,
    RelationType,
    Severity,
    dataset_id,
    query_hash,
    unquote,
)

logger = logging.getLogger(__name__)

FDD = RelationType.FDD
FDR = RelationType.FDR

StatementFn: TypeAlias = Callable[[StatementContext], None]

_ROUTINES = {"PROCEDURE": "procedure", "PROC": "procedure", "FUNCTION": "function", "TRIGGER": "trigger"}
_TRANSACTION_WORDS = {
    "TRANSACTION",
    "TRAN",
    "WORK",
    "DISTRIBUTED",
    "ISOLATION",
    "READ",
    "DEFERRED",
    "IMMEDIATE",
}
_NOT_CLOSING = {"IF", "LOOP", "WHILE", "REPEAT", "FOR", "TRY", "CATCH"}
_SILENT = {
    "COMMIT",
    "ROLLBACK",
    "EXIT",
    "CONTINUE",
    "RETURN",
    "NULL",
    "RAISE",
    "PRINT",
    "RAISERROR",
    "THROW",
    "CLOSE",
    "DEALLOCATE",
    "EXEC",
    "EXECUTE",
    "CALL",
    "GOTO",
    "LEAVE",
    "ITERATE",
    "SIGNAL",
    "RESIGNAL",
    "SAVEPOINT",
    "DBMS_OUTPUT",
    "WAITFOR",
    "BREAK",
    "USE",
    "DROP",
    "TRUNCATE",
    "PRAGMA",
    "LOCK",
    "GRANT",
    "REVOKE",
    "ANALYZE",
}
_DECLARE_BLOCK_DIALECTS = frozenset({"oracle", "snowflake"})
"""Where ``DECLARE ... BEGIN ... END`` is an anonymous block (elsewhere DECLARE is one statement)."""
_STATEMENT_WORDS = {"SELECT", "WITH", "INSERT", "UPDATE", "DELETE", "MERGE", "CREATE", "OPEN", "FETCH", "SET"}


class BlockChunk(StatementChunk):
    """A procedural block: the chunks its inner semicolons made, kept together."""

    def __init__(self, index: int, parts: list[StatementChunk]) -> None:
        tokens = [t for p in parts for t in p.tokens]
        super().__init__(index=index, start=parts[0].start, end=parts[-1].end, tokens=tokens)
        self.parts = parts


# ---------------------------------------------------------------------------------------------------------
# 1. Keeping blocks together


def _block_kind(tokens: list[Token]) -> str | None:
    if not tokens:
        return None
    first = word(tokens[0])
    if first in ("CREATE", "ALTER", "REPLACE"):
        i = skip_create_prefix(tokens)
        if i < len(tokens) and word(tokens[i]) in _ROUTINES:
            return "routine"
        return None
    if first == "DECLARE":
        if len(tokens) > 1 and (
            str(tokens[1].text).startswith("@") or tokens[1].token_type is TokenType.PARAMETER
        ):
            return None  # T-SQL DECLARE @x INT: a statement, not a block
        return "declare"
    if first == "BEGIN":
        if len(tokens) == 1 or word(tokens[1]) in _TRANSACTION_WORDS:
            return None
        return "begin"
    return None


def _depth_change(tokens: list[Token]) -> tuple[int, bool]:
    """(BEGIN/CASE opened minus END closed, whether a BEGIN was seen)."""
    depth, seen = 0, False
    for k, tok in enumerate(tokens):
        w = word(tok)
        if w == "BEGIN":
            nxt = word(tokens[k + 1]) if k + 1 < len(tokens) else ""
            if nxt in _TRANSACTION_WORDS:
                continue
            depth += 1
            seen = True
        elif w == "CASE":
            prev = word(tokens[k - 1]) if k else ""
            if prev != "END":
                depth += 1
        elif w == "END":
            nxt = word(tokens[k + 1]) if k + 1 < len(tokens) else ""
            if nxt in _NOT_CLOSING:
                continue
            depth -= 1
    return depth, seen


def _batch_break(state: ScriptState, a: StatementChunk, b: StatementChunk) -> bool:
    """A T-SQL GO line between two chunks."""
    between = state.text[a.end : b.start]
    return any(line.strip().upper().split()[:1] == ["GO"] for line in between.splitlines() if line.strip())


@chunk_hook
def regroup_blocks(chunks: list[StatementChunk], state: ScriptState) -> list[StatementChunk]:
    """Merge the chunks of each procedural block into one :class:`BlockChunk`."""
    out: list[StatementChunk] = []
    i = 0
    dialect = type(state.dialect).__name__.lower()
    tsql = dialect == "tsql"
    chunks = [_unswallow(c, state) for c in chunks]
    if dialect == "oracle":
        chunks = [_drop_sqlplus_slash(c, state) for c in chunks]
        chunks = [c for c in chunks if c.tokens or c.error is not None]
    while i < len(chunks):
        chunk = chunks[i]
        kind = _block_kind(chunk.tokens) if chunk.error is None else None
        if kind == "declare" and dialect not in _DECLARE_BLOCK_DIALECTS:
            kind = None  # BigQuery, Teradata, MySQL, Postgres: DECLARE is a statement of its own
        if kind is None:
            out.append(chunk)
            i += 1
            continue
        end = _block_end(chunks, i, kind, state, tsql)
        if end is None:
            out.append(chunk)
            i += 1
            continue
        out.append(BlockChunk(0, chunks[i : end + 1]))
        i = end + 1
    for n, c in enumerate(out, 1):
        c.index = n
    return out


def _is_swallowed(tok: Token) -> bool:
    """A raw STRING token standing for the rest of a statement: its offsets do not span its text (a real
    string literal spans its text plus quotes)."""
    return tok.token_type is TokenType.STRING and (tok.end - tok.start + 1) < len(str(tok.text))


def _unswallow(chunk: StatementChunk, state: ScriptState) -> StatementChunk:
    """A statement that starts as one raw STRING token (the tokenizer swallowed it after a command word
    such as T-SQL's ``GO``, which the splitter then cut off) gets its real tokens back."""
    toks = chunk.tokens
    if not toks or chunk.error is not None:
        return chunk
    first = toks[0]
    if not _is_swallowed(first):
        return chunk
    expanded = _expand_tokens(state, toks, search_from=max(chunk.start - len(str(first.text)) - 8, 0))
    if not expanded or expanded[0] is first:
        return chunk
    return StatementChunk(index=chunk.index, start=expanded[0].start, end=chunk.end, tokens=expanded)


def _drop_sqlplus_slash(chunk: StatementChunk, state: ScriptState) -> StatementChunk:
    """SQL*Plus runs a block with a ``/`` alone on its line: it belongs to no statement."""
    toks = chunk.tokens
    n = 0
    while n < len(toks) and toks[n].token_type is TokenType.SLASH:
        line_start = state.text.rfind("\n", 0, toks[n].start) + 1
        line_end = state.text.find("\n", toks[n].end + 1)
        line = state.text[line_start : len(state.text) if line_end == -1 else line_end]
        if line.strip() != "/":
            break
        n += 1
    if n == 0:
        return chunk
    rest = toks[n:]
    if not rest:
        return StatementChunk(index=chunk.index, start=chunk.end, end=chunk.end, tokens=[])
    return StatementChunk(index=chunk.index, start=rest[0].start, end=chunk.end, tokens=rest)


def _body_starts_with_begin(toks: list[Token]) -> bool:
    """``CREATE PROCEDURE p ... AS BEGIN``: the body is the BEGIN ... END block."""
    depth = 0
    for k, tok in enumerate(toks):
        if tok.token_type is TokenType.L_PAREN:
            depth += 1
        elif tok.token_type is TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and word(tok) == "AS":
            return k + 1 < len(toks) and word(toks[k + 1]) == "BEGIN"
        elif depth == 0 and word(tok) == "BEGIN":
            return True
    return False


def _block_end(chunks: list[StatementChunk], i: int, kind: str, state: ScriptState, tsql: bool) -> int | None:
    """Index of the block's last chunk (None: not a block after all)."""
    first = chunks[i].tokens
    if kind == "routine" and tsql and not _body_starts_with_begin(first):
        # T-SQL without BEGIN: the body runs to the end of the batch (GO or the end of the script).
        j = i
        while j + 1 < len(chunks) and not _batch_break(state, chunks[j], chunks[j + 1]):
            if chunks[j + 1].error is not None:
                break
            j += 1
        return j
    if kind == "routine" and not any(word(t) in ("BEGIN", "IS", "AS") for t in first):
        return None
    depth, seen = 0, False
    for j in range(i, len(chunks)):
        if chunks[j].error is not None:
            return None
        d, s = _depth_change(chunks[j].tokens)
        depth += d
        seen = seen or s
        if seen and depth <= 0:
            return j
    return None


# ---------------------------------------------------------------------------------------------------------
# 2. Analysing a block


@dataclass
class Variable:
    name: str
    sub_type: str
    """scalar, cursor or record."""
    columns: list[str] = field(default_factory=list)
    rows: bool = False


@dataclass
class Block:
    """What the statements of one block share: their procedure, variables and position in the script."""

    state: ScriptState
    parser: Parser
    chunk: StatementChunk
    budget: float | None
    scope: str
    procedure: str | None = None
    function: Procedure | None = None
    """The function whose body this is (its RETURN value flows to the function's ``RETURN`` column)."""
    variables: dict[str, Variable] = field(default_factory=dict)
    graphs: list[GraphBuilder] = field(default_factory=list)
    ctx: StatementContext | None = None

    # -- variables ------------------------------------------------------------------------------------

    def declare(self, name: str, sub_type: str) -> Variable:
        key = name.lower()
        var = self.variables.get(key)
        if var is None or sub_type != "scalar":
            var = Variable(name=name, sub_type=sub_type, columns=[name] if sub_type == "scalar" else ["*"])
            self.variables[key] = var
        return var

    def dataset(self, ctx: StatementContext, var: Variable) -> DatasetBuilder:
        ds = ctx.graph.dataset(
            DatasetBuilder(
                id=dataset_id(DatasetKind.VARIABLE, var.name, scope=self.scope),
                kind=DatasetKind.VARIABLE,
                name=var.name,
                sub_type=var.sub_type,
            )
        )
        for c in var.columns:
            ds.column(c)
        return ds

    def field(self, ctx: StatementContext, var: Variable, name: str) -> ColKey:
        if name.lower() not in {c.lower() for c in var.columns}:
            var.columns.append(name)
        ds = self.dataset(ctx, var)
        return (ds.id, ds.column(name))

    def value(self, ctx: StatementContext, var: Variable) -> ColKey:
        """The column a variable's value is: a scalar's own column, a record's ``*``."""
        return self.field(ctx, var, var.columns[0])

    def resolve(self, node: exp.Expr) -> ColKey | None:
        """Resolver hook for :meth:`StatementContext._collect`: the variable column ``node`` names."""
        ctx = self.ctx
        if ctx is None or not self.variables:
            return None
        if isinstance(node, exp.Parameter):
            var = self.variables.get(node.sql().lower()) or self.variables.get(node.name.lower())
            return self.value(ctx, var) if var is not None else None
        if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
            return None
        qual = node.table
        if qual and not node.db:
            var = self.variables.get(qual.lower())
            if var is not None and var.sub_type != "scalar":
                return self.field(ctx, var, node.name)
            return None
        if not qual:
            var = self.variables.get(node.name.lower())
            if var is not None:
                return self.value(ctx, var)
        return None

    # -- running statements ---------------------------------------------------------------------------

    def run(self, start: int, end: int, fn: StatementFn) -> None:
        def go(ctx: StatementContext) -> None:
            self.ctx = ctx
            try:
                fn(ctx)
            finally:
                self.ctx = None

        self.graphs.extend(run_on_text(self.state, self.chunk, self.budget, go, start=start, end=end))

    def parse(self, tokens: list[Token]) -> exp.Expr | None:
        try:
            parsed = self.parser.parse(tokens, self.state.text)
        except Exception as e:  # sqlglot's own bugs too: they cost this inner statement only
            self.warn(tokens[0].start, f"statement in procedural block not analysed: {parse_failure(e)}")
            return None
        stmts = [p for p in parsed if p is not None and not isinstance(p, exp.Semicolon)]
        return stmts[0] if stmts else None

    def warn(self, offset: int, message: str) -> None:
        p = problem(self.state, self.chunk.index, offset, message, "unsupported")
        self.state.problems.append(p.model_copy(update={"severity": Severity.WARNING}))


@text_handler
def procedural_block(
    chunk: StatementChunk, state: ScriptState, parser: Parser, budget: float | None
) -> list[GraphBuilder] | None:
    """Claim a block (or a one-chunk CREATE PROCEDURE / TRIGGER) and analyse its statements."""
    if not isinstance(chunk, BlockChunk):
        kind = _block_kind(chunk.tokens)
        if kind != "routine":
            return None
        i = skip_create_prefix(chunk.tokens)
        if word(chunk.tokens[i]) == "FUNCTION" and not any(word(t) == "BEGIN" for t in chunk.tokens):
            return None  # CREATE FUNCTION ... AS $$ body $$ / RETURN (query): no procedural body here
        parts = [chunk]
    else:
        parts = chunk.parts
    scope = f"block:{query_hash(state.text[chunk.start : chunk.end])[:16]}"
    block = Block(state=state, parser=parser, chunk=chunk, budget=budget, scope=scope)
    first_tokens = parts[0].tokens
    body_from = 0
    procedure: Procedure | None = None
    if _block_kind(first_tokens) == "routine":
        i = skip_create_prefix(first_tokens)
        if i + 1 >= len(first_tokens) or first_tokens[i + 1].token_type is TokenType.L_PAREN:
            what = word(first_tokens[i]) if i < len(first_tokens) else "ROUTINE"
            msg = f"cannot parse: CREATE {what} without a name"
            state.problems.append(problem(state, chunk.index, first_tokens[-1].start, msg, "parse"))
            return []
        procedure, body_from = _header(block, first_tokens)
        block.procedure = procedure.name
        block.scope = procedure.id
        if procedure.type == "function":
            block.function = procedure
        for arg in procedure.arguments:
            block.declare(arg.name, "scalar")
    old_proc, old_resolver = state.procedure, state.resolve_variable
    state.procedure, state.resolve_variable = block.procedure, block.resolve
    try:
        in_declare = _block_kind(first_tokens) == "declare" or (
            procedure is not None and type(state.dialect).__name__.lower() == "oracle"
        )
        for n, part in enumerate(parts):
            toks = part.tokens[body_from:] if n == 0 else part.tokens
            if n == 0 and _block_kind(first_tokens) == "declare":
                toks = toks[1:]
            for piece in token_statements(toks, state.dialect):  # T-SQL: semicolons are optional
                in_declare = _inner_statement(block, piece, in_declare)
    finally:
        state.procedure, state.resolve_variable = old_proc, old_resolver
    if procedure is not None:
        g = GraphBuilder()
        g.procedures.append(procedure)
        block.graphs.append(g)
    return block.graphs


def _header(block: Block, toks: list[Token]) -> tuple[Procedure, int]:
    """``CREATE PROCEDURE name (args) ... AS|IS|BEGIN``: the procedure and where its body starts."""
    i = skip_create_prefix(toks)
    ptype = _ROUTINES.get(word(toks[i]), "procedure")
    i += 1
    parts, j, end = dotted_name(toks, i)
    name, db, catalog = split_name([unquote(p) for p in parts])
    args: list[Argument] = []
    state = block.state
    if j < len(toks) and toks[j].token_type is TokenType.L_PAREN:
        close = _matching_paren(toks, j)
        args = _arguments(state, toks[j + 1 : close])
        j = close + 1
    elif ptype == "procedure":
        stop = next(
            (k for k in range(j, len(toks)) if word(toks[k]) in ("AS", "IS", "BEGIN", "WITH")), len(toks)
        )
        args = _arguments(state, toks[j:stop])
    body = next(
        (k for k in range(j, len(toks)) if word(toks[k]) in ("AS", "IS", "BEGIN", "DECLARE")), len(toks)
    )
    if body < len(toks) and word(toks[body]) in ("AS", "IS"):
        body += 1
    full = ".".join(p for p in (catalog, db, name) if p)
    proc = Procedure(
        id=f"procedure:{full.lower()}",
        name=full,
        type=ptype,
        db=db,
        catalog=catalog,
        arguments=tuple(args),
        span=state.lines.span(toks[i].start, end),
    )
    return proc, body


def _matching_paren(toks: list[Token], j: int) -> int:
    depth = 0
    for k in range(j, len(toks)):
        if toks[k].token_type is TokenType.L_PAREN:
            depth += 1
        elif toks[k].token_type is TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return k
    return len(toks) - 1


def _arguments(state: ScriptState, toks: list[Token]) -> list[Argument]:
    """``IN id CHAR(12), OUT dname CHAR(10)`` / ``p IN NUMBER`` / ``@p INT = 1 OUTPUT``."""
    args: list[Argument] = []
    groups: list[list[Token]] = [[]]
    depth = 0
    for tok in toks:
        if tok.token_type is TokenType.L_PAREN:
            depth += 1
        elif tok.token_type is TokenType.R_PAREN:
            depth -= 1
        if tok.token_type is TokenType.COMMA and depth == 0:
            groups.append([])
            continue
        groups[-1].append(tok)
    for g in groups:
        if not g:
            continue
        mode = None
        k = 0
        while k < len(g) and word(g[k]) in ("IN", "OUT", "INOUT"):
            mode = "inout" if mode else word(g[k]).lower()
            k += 1
        if k >= len(g):
            continue
        name_tok = g[k]
        name = str(name_tok.text)
        if name == "@" and k + 1 < len(g):
            k += 1
            name = "@" + str(g[k].text)
        rest = g[k + 1 :]
        while rest and word(rest[0]) in ("IN", "OUT", "INOUT", "NOCOPY"):
            mode = "inout" if mode and word(rest[0]) != "NOCOPY" else (mode or word(rest[0]).lower())
            rest = rest[1:]
        if rest and word(rest[-1]) in ("OUTPUT", "OUT", "READONLY"):
            mode = "out" if word(rest[-1]) != "READONLY" else mode
            rest = rest[:-1]
        cut = next((n for n, t in enumerate(rest) if word(t) in ("DEFAULT", "=", ":=")), len(rest))
        rest = rest[:cut]
        dtype = state.text[rest[0].start : rest[-1].end + 1] if rest else None
        args.append(
            Argument(
                name=unquote(name),
                data_type=dtype,
                mode=mode or "in",
                span=state.lines.span(g[0].start, g[-1].end + 1),
            )
        )
    return args


# -- one inner statement ------------------------------------------------------------------------------


def _skip_control(toks: list[Token]) -> int:
    """Index of the first token after leading control flow (BEGIN, IF ... THEN, ELSE, LOOP, END IF...)."""
    i = 0
    n = len(toks)
    while i < n:
        w = word(toks[i])
        nxt = word(toks[i + 1]) if i + 1 < n else ""
        if w == "BEGIN" and nxt not in _TRANSACTION_WORDS:
            i += 2 if nxt in ("TRY", "CATCH", "ATOMIC") else 1
        elif w == "END":
            i += 2 if nxt in _NOT_CLOSING or nxt == "CASE" else 1
            if i < n and toks[i].token_type is TokenType.VAR and word(toks[i]) not in _STATEMENT_WORDS:
                i += 1  # END label
        elif w in ("ELSE", "LOOP", "EXCEPTION", "DO", "THEN"):
            i += 1
        elif w in ("IF", "ELSIF", "ELSEIF", "WHILE", "WHEN", "FOR"):
            j = _after_condition(toks, i + 1)
            if j is None:
                return n
            i = j
        elif w == "<<" or (toks[i].token_type is TokenType.LT and nxt == "<"):
            close = next(
                (
                    k
                    for k in range(i, n)
                    if str(toks[k].text) == ">>"
                    or (
                        toks[k].token_type is TokenType.GT
                        and k + 1 < n
                        and toks[k + 1].token_type is TokenType.GT
                    )
                ),
                None,
            )
            i = n if close is None else close + (1 if str(toks[close].text) == ">>" else 2)
        else:
            return i
    return i


def _after_condition(toks: list[Token], i: int) -> int | None:
    """After an IF/WHILE/WHEN condition: past THEN/LOOP/DO, or (T-SQL) at the statement it guards."""
    depth = 0
    for k in range(i, len(toks)):
        tt = toks[k].token_type
        if tt is TokenType.L_PAREN:
            depth += 1
        elif tt is TokenType.R_PAREN:
            depth -= 1
        elif depth == 0:
            w = word(toks[k])
            if w in ("THEN", "LOOP", "DO"):
                return k + 1
            if w in _STATEMENT_WORDS | {"BEGIN"} and k > i:
                return k
    return None


def _expand_tokens(state: ScriptState, toks: list[Token], search_from: int | None = None) -> list[Token]:
    """Undo the tokenizer's command swallowing: after a command word (``BEGIN`` in BigQuery, ``FETCH``
    everywhere) at a statement start, sqlglot keeps the rest of the statement as one raw STRING token."""
    out: list[Token] = []
    prev_end = search_from if search_from is not None else (toks[0].start if toks else 0)
    for tok in toks:
        text = str(tok.text)
        swallowed = _is_swallowed(tok)
        begin = state.text.find(text, prev_end) if swallowed else -1
        raw = state.text[begin : begin + len(text)] if begin >= 0 else ""
        swallowed = swallowed and bool(raw)
        if not swallowed:
            out.append(tok)
            prev_end = max(prev_end, tok.end + 1)
            continue
        # "x " keeps the first word off the statement start, so it is not swallowed again.
        lead = max(begin - 2, 0)
        pad = "".join("\n" if c == "\n" else " " for c in state.text[:lead])
        try:
            again = state.dialect.tokenize(pad + ("x " if begin >= 2 else "") + raw)
        except SqlglotError:
            out.append(tok)
            continue
        out.extend(again[1:] if begin >= 2 else again)
        prev_end = begin + len(raw)
    return out


def _inner_statement(block: Block, toks: list[Token], in_declare: bool) -> bool:
    """Analyse one inner statement; returns whether we are still in a declaration section."""
    toks = _expand_tokens(block.state, toks)
    i = _skip_control(toks)
    if i > 0 and i <= len(toks) and any(word(t) == "BEGIN" for t in toks[:i]):
        in_declare = False
    toks = toks[i:]
    if not toks:
        return in_declare
    w = word(toks[0])
    start, end = toks[0].start, toks[-1].end + 1
    if w == "DECLARE":
        _tsql_declare(block, toks)
        return in_declare
    if w in ("CURSOR",) or (w == "TYPE" and in_declare):
        _plsql_declaration(block, toks)
        return in_declare
    if w == "OPEN":
        _open_cursor(block, toks)
        return in_declare
    if w == "FETCH":
        _fetch(block, toks)
        return in_declare
    if w == "RETURN" and block.function is not None and len(toks) > 1:
        _function_return(block, toks[1:])
        return in_declare
    if w in _SILENT or w.startswith("DBMS_"):
        return in_declare
    if (
        len(toks) > 1
        and toks[1].token_type is TokenType.COLON
        and len(toks) > 2
        and toks[2].token_type is TokenType.EQ
    ):
        _assignment(block, toks[0], toks[3:])
        return in_declare
    if in_declare and w not in _STATEMENT_WORDS:
        _plsql_declaration(block, toks)
        return in_declare
    if w not in _STATEMENT_WORDS and w not in ("ALTER", "REPLACE", "COPY", "LOAD"):
        block.warn(start, f"{w} statement in procedural block not analysed for lineage")
        return in_declare
    block.run(start, end, lambda ctx: _dispatch(block, ctx, toks))
    return in_declare


def _dispatch(block: Block, ctx: StatementContext, toks: list[Token]) -> None:
    stmt = block.parse(toks)
    if stmt is None:
        return
    if isinstance(stmt, exp.Select) and _select_into_variables(block, ctx, stmt):
        return
    if isinstance(stmt, exp.Set) and _set_variables(block, ctx, stmt):
        return
    values = stmt.expression if isinstance(stmt, exp.Insert) else None
    if isinstance(values, exp.Values) and values.expressions:
        # INSERT ... VALUES (v1, v2): constants outside a block, but here the values may be variables.
        row = values.expressions[0]
        items = list(row.expressions) if isinstance(row, exp.Tuple) else [row]
        stmt = stmt.copy()
        stmt.set("expression", exp.select(*[i.copy() for i in items]))
    fn = find_handler(stmt)
    if fn is None:
        ctx.warn(f"{stmt.key.upper()} statement not analysed for lineage", kind="unsupported")
        return
    fn(stmt, ctx)
    run_post_hooks(stmt, ctx)


# -- declarations ---------------------------------------------------------------------------------------


def _plsql_declaration(block: Block, toks: list[Token]) -> None:
    """``TYPE c IS REF CURSOR`` / ``CURSOR c IS query`` / ``r t%ROWTYPE`` / ``v NUMBER [:= expr]``."""
    w = word(toks[0])
    if w == "TYPE":
        if len(toks) > 1 and any(word(t) == "CURSOR" for t in toks[2:]):
            block.declare(str(toks[1].text), "cursor")
        return
    if w == "CURSOR" and len(toks) > 1:
        var = block.declare(str(toks[1].text), "cursor")
        q = next((k for k in range(2, len(toks)) if word(toks[k]) in ("IS", "FOR")), None)
        if q is not None and q + 1 < len(toks):
            _query_into(block, var, toks[q + 1 :])
        return
    if len(toks) < 2 or toks[0].token_type not in (TokenType.VAR, TokenType.IDENTIFIER):
        return
    rest = [word(t) for t in toks[1:]]
    name = str(toks[0].text)
    if "%" in [str(t.text) for t in toks] and "ROWTYPE" in rest:
        block.declare(name, "record")
        return
    if rest and rest[0] in ("EXCEPTION",):
        return
    var = block.declare(name, "scalar")
    assign = next(
        (
            k
            for k in range(1, len(toks) - 1)
            if toks[k].token_type is TokenType.COLON and toks[k + 1].token_type is TokenType.EQ
        ),
        None,
    )
    if assign is not None and assign + 2 < len(toks):
        _assignment(block, toks[0], toks[assign + 2 :], var)


def _tsql_declare(block: Block, toks: list[Token]) -> None:
    """``DECLARE @a INT [= expr], @b ...`` and ``DECLARE c CURSOR FOR query``."""
    if (len(toks) > 2 and word(toks[2]) == "CURSOR") or (
        len(toks) > 3 and "CURSOR" in [word(t) for t in toks[2:5]]
    ):
        var = block.declare(str(toks[1].text), "cursor")
        q = next((k for k in range(2, len(toks)) if word(toks[k]) == "FOR"), None)
        if q is not None and q + 1 < len(toks):
            _query_into(block, var, toks[q + 1 :])
        return
    depth = 0
    expect = True
    for k in range(1, len(toks)):
        tok = toks[k]
        if tok.token_type is TokenType.L_PAREN:
            depth += 1
        elif tok.token_type is TokenType.R_PAREN:
            depth -= 1
        elif tok.token_type is TokenType.COMMA and depth == 0:
            expect = True
            continue
        if expect and depth == 0:
            name = str(tok.text)
            if name == "@" and k + 1 < len(toks):
                name = "@" + str(toks[k + 1].text)
            var = block.declare(name, "scalar")
            expect = False
            eq = next(
                (
                    m
                    for m in range(k + 1, len(toks))
                    if toks[m].token_type is TokenType.EQ or toks[m].token_type is TokenType.COMMA
                ),
                None,
            )
            if eq is not None and toks[eq].token_type is TokenType.EQ:
                stop = next(
                    (
                        m
                        for m in range(eq + 1, len(toks))
                        if toks[m].token_type is TokenType.COMMA and _depth(toks, eq + 1, m) == 0
                    ),
                    len(toks),
                )
                if stop > eq + 1:
                    _assignment(block, tok, toks[eq + 1 : stop], var)


def _depth(toks: list[Token], a: int, b: int) -> int:
    d = 0
    for t in toks[a:b]:
        if t.token_type is TokenType.L_PAREN:
            d += 1
        elif t.token_type is TokenType.R_PAREN:
            d -= 1
    return d


# -- values into variables ------------------------------------------------------------------------------


def _write_columns(block: Block, ctx: StatementContext, qr: QueryResult, targets: list[Variable]) -> None:
    """Query outputs into variables: one record/cursor by field name, else scalars by position."""
    if len(targets) == 1 and targets[0].sub_type != "scalar":
        var = targets[0]
        pairs = [(c, block.field(ctx, var, c)) for c in qr.columns]
    else:
        pairs = [(c, block.value(ctx, v)) for c, v in zip(qr.columns, targets, strict=False)]
    for src_col, key in pairs:
        ctx.graph.add(FDD, (qr.ds.id, src_col), key, effect=Effect.EXACT_COPY)
    if ctx.graph.is_fed(qr.rows_key):
        for var in targets:
            ds = block.dataset(ctx, var)
            var.rows = True
            ctx.graph.add(FDR, qr.rows_key, (ds.id, ds.rows()), clause_type=ClauseType.SELECT)


def _query_into(block: Block, var: Variable, toks: list[Token]) -> None:
    """A cursor's query: its outputs become the cursor's fields."""

    def fn(ctx: StatementContext) -> None:
        stmt = block.parse(toks)
        if stmt is None:
            return
        if not isinstance(stmt, (exp.Query, exp.Subquery)):
            msg = f"cursor {var.name} over {stmt.key.upper()} not analysed"
            raise UnsupportedSQL(msg)
        qr = ctx.query_lineage(stmt)
        _write_columns(block, ctx, qr, [var])

    block.run(toks[0].start, toks[-1].end + 1, fn)


def _open_cursor(block: Block, toks: list[Token]) -> None:
    """``OPEN c FOR query`` (PL/SQL REF CURSOR); plain ``OPEN c`` moves nothing new."""
    if len(toks) < 2:
        return
    name = str(toks[1].text)
    q = next((k for k in range(2, len(toks)) if word(toks[k]) == "FOR"), None)
    if q is None or q + 1 >= len(toks):
        return
    var = block.variables.get(name.lower()) or block.declare(name, "cursor")
    _query_into(block, var, toks[q + 1 :])


def _fetch(block: Block, toks: list[Token]) -> None:
    """``FETCH [NEXT FROM] c [BULK COLLECT] INTO a [, b]``: cursor fields -> record or scalars."""
    into = next((k for k in range(len(toks)) if word(toks[k]) == "INTO"), None)
    if into is None:
        return
    head = [
        t
        for t in toks[1:into]
        if word(t) not in ("NEXT", "PRIOR", "FIRST", "LAST", "FROM", "BULK", "COLLECT")
    ]
    if not head:
        return
    cursor_name = "".join(str(t.text) for t in head)
    cursor = block.variables.get(cursor_name.lower())
    names = _names(toks[into + 1 :])
    targets = [block.variables.get(n.lower()) or block.declare(n, "scalar") for n in names]
    if cursor is None or not targets:
        block.warn(toks[0].start, f"FETCH from unknown cursor {cursor_name!r} not analysed")
        return

    def fn(ctx: StatementContext) -> None:
        src = block.dataset(ctx, cursor)
        fields = [c for c in cursor.columns if c != "*"]
        if len(targets) == 1 and targets[0].sub_type != "scalar":
            rec = targets[0]
            pairs = [((src.id, src.column(c)), block.field(ctx, rec, c)) for c in ["*", *fields]]
        else:
            pairs = [
                ((src.id, src.column(c)), block.value(ctx, v)) for c, v in zip(fields, targets, strict=False)
            ]
        for a, b in pairs:
            ctx.graph.add(FDD, a, b, effect=Effect.EXACT_COPY)
        if cursor.rows:
            for v in targets:
                ds = block.dataset(ctx, v)
                v.rows = True
                ctx.graph.add(FDR, (src.id, src.rows()), (ds.id, ds.rows()), clause_type=ClauseType.SELECT)

    block.run(toks[0].start, toks[-1].end + 1, fn)


def _names(toks: list[Token]) -> list[str]:
    out: list[str] = []
    cur = ""
    for t in toks:
        if t.token_type is TokenType.COMMA:
            if cur:
                out.append(cur)
            cur = ""
        elif t.token_type is TokenType.COLON:
            continue
        else:
            cur += str(t.text)
    if cur:
        out.append(cur)
    return [unquote(n) for n in out]


def _assignment(block: Block, target: Token, value: list[Token], var: Variable | None = None) -> None:
    """``v := expr`` / ``SET @v = expr`` / ``DECLARE @v INT = expr``: the expression's columns -> v."""
    name = str(target.text)
    if var is None:
        var = block.variables.get(name.lower())
        if var is None:
            block.warn(target.start, f"assignment to undeclared variable {name!r} not analysed")
            return
    if not any(t.token_type in (TokenType.VAR, TokenType.SELECT) for t in value):
        return  # a constant
    v = var

    def fn(ctx: StatementContext) -> None:
        expr = block.parse(value)
        if expr is not None:
            _expression_into(block, ctx, expr, v)

    block.run(value[0].start, value[-1].end + 1, fn)


def _expression_into(block: Block, ctx: StatementContext, expr: exp.Expr, var: Variable) -> None:
    if isinstance(expr, (exp.Subquery, exp.Select)):
        qr = ctx.query_lineage(expr)
        _write_columns(block, ctx, qr, [var])
        return
    qr = ctx.query_lineage(exp.select(exp.alias_(expr, "value")))
    _write_columns(block, ctx, qr, [var])


RETURN_COLUMN = "RETURN"
"""The column of a scalar function's object that holds what it returns."""


def returns_key(function_id: str) -> str:
    """Marker in ``ScriptState.counters``: the script defines this function's RETURN value."""
    return f"function-return:{function_id}"


def _function_return(block: Block, toks: list[Token]) -> None:
    """``RETURN expr`` in a scalar function: expr -> function.RETURN (a call site then reads it)."""
    fn = block.function
    assert fn is not None
    if len(toks) == 1 and toks[0].token_type is not TokenType.VAR and not str(toks[0].text).startswith("@"):
        return  # RETURN of a constant

    def run(ctx: StatementContext) -> None:
        expr = block.parse(toks)
        if expr is None:
            return
        ctx.begin_process("function_return", f"Return of function {fn.name}", effect_type="function")
        qr = ctx.query_lineage(exp.select(exp.alias_(expr, RETURN_COLUMN)))
        target = ctx.graph.dataset(
            DatasetBuilder(
                id=dataset_id(DatasetKind.TABLE, fn.name.split(".")[-1], fn.db, fn.catalog),
                kind=DatasetKind.TABLE,
                name=fn.name.split(".")[-1],
                db=fn.db,
                catalog=fn.catalog,
                sub_type="function",
            )
        )
        ctx.write_into(qr, target, [RETURN_COLUMN])
        ctx.state.counters[returns_key(target.id)] = 1

    block.run(toks[0].start, toks[-1].end + 1, run)


def _select_into_variables(block: Block, ctx: StatementContext, stmt: exp.Select) -> bool:
    """``SELECT a INTO v FROM ...`` / ``SELECT @v = a FROM ...``: query -> variables."""
    into = stmt.args.get("into")
    if isinstance(into, exp.Into):
        nodes = list(into.expressions) or ([into.this] if into.this is not None else [])
        names = [n.name if not isinstance(n, exp.Table) else n.sql() for n in nodes]
        names = [unquote(n.lstrip(":")) for n in names]
        targets = [block.variables.get(n.lower()) for n in names]
        if not names or any(t is None for t in targets):
            return False  # SELECT INTO a table
        query = stmt.copy()
        query.set("into", None)
        qr = ctx.query_lineage(query)
        _write_columns(block, ctx, qr, [t for t in targets if t is not None])
        return True
    projections = stmt.expressions
    if projections and all(isinstance(p, exp.EQ) and isinstance(p.this, exp.Parameter) for p in projections):
        targets2: list[Variable] = []
        query = stmt.copy()
        new = []
        for n, p in enumerate(projections):
            var = block.variables.get(p.this.sql().lower()) or block.declare(p.this.sql(), "scalar")
            targets2.append(var)
            new.append(exp.alias_(p.expression.copy(), f"v{n + 1}"))
        query.set("expressions", new)
        qr = ctx.query_lineage(query)
        _write_columns(block, ctx, qr, targets2)
        return True
    return False


def _set_variables(block: Block, ctx: StatementContext, stmt: exp.Set) -> bool:
    """T-SQL ``SET @v = expr``."""
    done = False
    for item in stmt.expressions:
        eq = item.this if isinstance(item, exp.SetItem) else item
        if isinstance(eq, exp.EQ) and isinstance(eq.this, exp.Parameter):
            var = block.variables.get(eq.this.sql().lower()) or block.declare(eq.this.sql(), "scalar")
            _expression_into(block, ctx, eq.expression, var)
            done = True
    return done
