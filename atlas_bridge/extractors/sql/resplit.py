"""Pre-processing for statements sqlglot cannot parse as written (issue 12, group 8); all of it linear.

- T-SQL lets statements follow one another without semicolons (``INSERT INTO a SELECT x FROM b`` then
  ``UPDATE c SET y = 1`` on the next line). When a T-SQL statement does not parse whole,
  :func:`statement_pieces` cuts it before each token that can only start a new statement (at parenthesis
  depth 0, judged by the statement being read: a second ``SELECT`` not after UNION/EXCEPT/INTERSECT, a
  ``SET`` not of an UPDATE, ``INSERT``/``UPDATE``/``DELETE`` not after THEN/ON/FOR...), and each piece is
  analysed alone at its own file position; the one that still does not parse is reported, the others give
  lineage. Control-flow heads left alone (``IF cond``, ``ELSE``, ``BEGIN``, ``END``) are dropped: no data
  moves there.
- Teradata column attributes after an expression (``a (TITLE 'x')``, ``b (NAMED c)``):
  :func:`teradata_attributes` drops them (``NAMED`` becomes an alias).
- T-SQL compound assignments (``SET @x += 1``, ``UPDATE t SET c *= 2``) become ``x = x + (1)``:
  :func:`compound_assignments` rewrites the tokens (sqlglot has no such operators), keeping file positions.
"""

from __future__ import annotations

import itertools

from sqlglot.dialects.dialect import Dialect
from sqlglot.dialects.teradata import Teradata
from sqlglot.dialects.tsql import TSQL
from sqlglot.tokens import Token, TokenType  # type: ignore[attr-defined]

from atlas_bridge.extractors.sql.split import StatementChunk

_STRONG = frozenset(
    {
        "INSERT",
        "UPDATE",
        "DELETE",
        "MERGE",
        "CREATE",
        "ALTER",
        "DROP",
        "TRUNCATE",
        "DECLARE",
        "EXEC",
        "EXECUTE",
    }
    | {"PRINT", "USE", "GRANT", "REVOKE", "DENY", "RAISERROR", "RETURN", "BREAK", "CONTINUE"}
    | {"IF", "ELSE", "WHILE", "BEGIN", "END", "COMMIT", "ROLLBACK", "WAITFOR", "OPEN", "FETCH", "CLOSE"}
    | {"DEALLOCATE", "BULK"}
)
"""Words that start a statement when they are not a continuation of the one being read (all reserved in
T-SQL, so never a bare column name)."""
_CONTINUES_AFTER = frozenset(
    {"ON", "FOR", "OF", "AFTER", "INSTEAD", "THEN", "NOT", ",", "(", ".", "BY", "ELSE", "ROWS", "ROW"}
    | {"GRANT", "REVOKE", "DENY"}
)
"""A start word right after one of these is part of the statement (``ON DELETE``, ``FOR UPDATE``...)."""
_SET_OPERATORS = frozenset({"UNION", "ALL", "EXCEPT", "INTERSECT", "MINUS", "DISTINCT"})
_TAKES_QUERY = frozenset({"INSERT", "CREATE", "ALTER", "DECLARE", "WITH"})
"""Statements whose first SELECT at depth 0 is their own query (INSERT ... SELECT, CREATE VIEW ... AS
SELECT, DECLARE c CURSOR FOR SELECT, WITH ... SELECT)."""
_CONTROL = frozenset({"IF", "ELSE", "WHILE", "BEGIN", "END"})
_KEEP_BEGIN = frozenset({"TRAN", "TRANSACTION", "TRY", "CATCH", "DISTRIBUTED"})
_COMPOUND = frozenset(
    {
        TokenType.PLUS,
        TokenType.DASH,
        TokenType.STAR,
        TokenType.SLASH,
        TokenType.MOD,
        TokenType.AMP,
        TokenType.PIPE,
        TokenType.CARET,
    }
)
_EXPRESSION_ENDS = _STRONG | {",", "FROM", "WHERE", "OUTPUT", "OPTION", "SET", "SELECT", "WITH"}
"""Where the value of a compound assignment ends (at its depth, outside CASE ... END)."""
_MAX_TARGET = 12
"""Tokens an assignment's target may have (``@x``, ``[db].[s].[t].[c]``): the look-back stays bounded."""


def _word(tok: Token) -> str:
    return (
        ","
        if tok.token_type is TokenType.COMMA
        else "("
        if tok.token_type is TokenType.L_PAREN
        else str(tok.text).upper()
    )


def token_statements(toks: list[Token], dialect: Dialect) -> list[list[Token]]:
    """The statements of a T-SQL procedure body part (semicolons between them are optional there too);
    other dialects' parts are one statement."""
    if not toks or not isinstance(dialect, TSQL):
        return [toks]
    chunk = StatementChunk(index=0, start=toks[0].start, end=toks[-1].end + 1, tokens=toks)
    pieces = statement_pieces(chunk)
    return [p.tokens for p in pieces] if pieces else [toks]


def statement_pieces(chunk: StatementChunk) -> list[StatementChunk]:
    """The statements a T-SQL chunk holds one after another (at least two), or [] when it is only one."""
    toks = chunk.tokens
    cuts: list[int] = [0]
    depth = 0
    head = _word(toks[0]) if toks else ""
    query_seen = set_seen = False
    cases = 0
    for i in range(1, len(toks)):
        tok = toks[i]
        if tok.token_type is TokenType.L_PAREN:
            depth += 1
            continue
        if tok.token_type is TokenType.R_PAREN:
            depth = max(depth - 1, 0)
            continue
        if depth or tok.token_type in (TokenType.STRING, TokenType.NUMBER, TokenType.IDENTIFIER):
            continue
        w, prev = _word(tok), _word(toks[i - 1])
        if w == "CASE" or (cases and w == "END"):
            cases += 1 if w == "CASE" else -1
            continue
        if cases:
            continue
        cut = False
        if w in _STRONG and prev not in _CONTINUES_AFTER:
            continuing = (
                (head == "ALTER" and w in ("DROP", "ALTER") and not _object_follows(toks, i))
                or (head == "MERGE" and w in ("INSERT", "UPDATE", "DELETE"))
                or (head == "WITH" and not query_seen and w in ("INSERT", "UPDATE", "DELETE", "MERGE"))
                or (head == "INSERT" and not query_seen and w in ("EXEC", "EXECUTE"))
            )
            if continuing:  # WITH ... INSERT: the INSERT's own query follows; INSERT ... EXEC: no query
                head, query_seen = (w, False) if head == "WITH" else (head, True)
            cut = not continuing
        elif w == "SELECT" and prev not in _SET_OPERATORS and prev not in _CONTINUES_AFTER:
            cut = head not in _TAKES_QUERY or query_seen
            query_seen = True
        elif w == "SET":
            cut = head not in ("UPDATE", "MERGE", "ALTER", "CREATE") or (head == "UPDATE" and set_seen)
            cut = cut and prev not in ("DELETE", "UPDATE")
            set_seen = True
        elif w == "WITH" and i + 2 < len(toks) and _word(toks[i + 2]) in ("AS", "("):
            cut = toks[i + 1].token_type is not TokenType.L_PAREN and (head not in _TAKES_QUERY or query_seen)
        if cut:
            cuts.append(i)
            head, query_seen, set_seen = w, False, w == "SET"
    if len(cuts) < 2:
        return []
    pieces: list[StatementChunk] = []
    for a, b in zip(cuts, [*cuts[1:], len(toks)], strict=True):
        part = toks[a:b]
        if _control_only(part):
            continue
        pieces.append(
            StatementChunk(index=chunk.index, start=part[0].start, end=part[-1].end + 1, tokens=part)
        )
    return pieces


def _object_follows(toks: list[Token], i: int) -> bool:
    """``DROP TABLE`` / ``ALTER VIEW`` (a statement), not ``ALTER TABLE t DROP COLUMN a`` (a clause)."""
    return i + 1 < len(toks) and _word(toks[i + 1]) in _OBJECTS


_OBJECTS = frozenset(
    {"TABLE", "VIEW", "PROCEDURE", "PROC", "FUNCTION", "TRIGGER", "SCHEMA", "DATABASE", "SEQUENCE", "INDEX"}
    | {"SYNONYM", "TYPE", "USER", "ROLE", "LOGIN"}
)


def _control_only(part: list[Token]) -> bool:
    """``IF cond`` / ``WHILE cond`` / ``ELSE`` / ``BEGIN`` / ``END`` left alone by the cutting."""
    first = _word(part[0])
    if first not in _CONTROL:
        return False
    return not (first == "BEGIN" and len(part) > 1 and _word(part[1]) in _KEEP_BEGIN)


def compound_assignments(toks: list[Token]) -> list[Token]:
    """``target op= expr`` -> ``target = target op (expr)`` (T-SQL ``+= -= *= /= %= &= |= ^=``).

    The target runs back to ``SET`` or a comma, the expression on to the next comma, FROM, WHERE, OUTPUT or
    OPTION at its depth (or the statement's end). New tokens take the positions of the operator.
    """
    if not any(
        t.token_type in _COMPOUND and u.token_type is TokenType.EQ and u.start == t.end + 1
        for t, u in itertools.pairwise(toks)
    ):
        return toks
    out: list[Token] = []
    i, n = 0, len(toks)
    while i < n:
        tok = toks[i]
        if not (
            i + 1 < n
            and tok.token_type in _COMPOUND
            and toks[i + 1].token_type is TokenType.EQ
            and toks[i + 1].start == tok.end + 1
        ):
            out.append(tok)
            i += 1
            continue
        k = len(out)
        while k > 0 and len(out) - k < _MAX_TARGET and _word(out[k - 1]) not in ("SET", ","):
            k -= 1
        target = out[k:]
        if not target or (k > 0 and _word(out[k - 1]) not in ("SET", ",")):
            out.append(tok)
            i += 1
            continue
        j, depth, cases = i + 2, 0, 0
        while j < n:
            t = toks[j]
            w = _word(t)
            if t.token_type is TokenType.L_PAREN:
                depth += 1
            elif t.token_type is TokenType.R_PAREN:
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and (w == "CASE" or (cases and w == "END")):
                cases += 1 if w == "CASE" else -1
            elif (
                depth == 0
                and not cases
                and t.token_type is not TokenType.IDENTIFIER
                and w in _EXPRESSION_ENDS
            ):
                break
            j += 1
        if j == i + 2:  # no value: leave the tokens for the parser to report
            out.append(tok)
            i += 1
            continue
        at = toks[i + 1]
        out.append(toks[i + 1])
        out.extend(_like(t.token_type, str(t.text), at) for t in target)
        out.append(tok)
        out.append(_like(TokenType.L_PAREN, "(", at))
        out.extend(toks[i + 2 : j])
        out.append(_like(TokenType.R_PAREN, ")", toks[j - 1] if j - 1 > i + 1 else at))
        i = j
    return out


def _like(kind: TokenType, text: str, at: Token) -> Token:
    """A new token of ``kind`` placed where ``at`` is."""
    return Token(kind, text, line=at.line, col=at.col, start=at.start, end=at.end, comments=[])


def prepare_tokens(toks: list[Token], dialect: Dialect) -> list[Token]:
    """A statement's tokens with the dialect's constructs sqlglot cannot parse rewritten (see the module)."""
    if isinstance(dialect, TSQL):
        return compound_assignments(toks)
    if isinstance(dialect, Teradata):
        return teradata_attributes(toks)
    return toks


_ATTRIBUTE_WORDS = frozenset({"TITLE", "NAMED", "FORMAT", "UPPERCASE", "CASESPECIFIC", "CS", "NOT"})
_MAX_ATTRIBUTES = 16
"""Tokens a Teradata attribute list may hold: the look-ahead from each ``(`` stays bounded."""


def teradata_attributes(toks: list[Token]) -> list[Token]:
    """Teradata's column attributes after an expression, ``a (TITLE 'x')``, ``b (NAMED c, FORMAT '9')``:
    dropped, a ``NAMED`` name becoming an ``AS`` alias (sqlglot reads ``(FORMAT '...')`` alone, but names
    the column after it). Only lists with nothing but attributes in them are touched."""
    out: list[Token] = []
    i, n = 0, len(toks)
    while i < n:
        tok = toks[i]
        got = _attribute_list(toks, i) if tok.token_type is TokenType.L_PAREN and i else None
        if got is None:
            out.append(tok)
            i += 1
            continue
        end, alias = got
        if alias is not None:
            out.append(_like(TokenType.ALIAS, "AS", tok))
            out.append(alias)
        i = end + 1
    return out


def _attribute_list(toks: list[Token], i: int) -> tuple[int, Token | None] | None:
    """(index of the closing parenthesis, the NAMED name) of an attribute list opening at ``i``, or None."""
    if toks[i - 1].token_type not in _EXPRESSION_END:
        return None
    named: Token | None = None
    j = i + 1
    limit = min(len(toks), i + _MAX_ATTRIBUTES)
    while j < limit:
        w = _word(toks[j])
        if w in ("TITLE", "FORMAT") and j + 1 < limit and toks[j + 1].token_type is TokenType.STRING:
            j += 2
        elif w == "NAMED" and j + 1 < limit and toks[j + 1].token_type in _NAMES:
            named = toks[j + 1]
            j += 2
        elif w in ("UPPERCASE", "CASESPECIFIC", "CS"):
            j += 1
        elif w == "NOT" and j + 1 < limit and _word(toks[j + 1]) in ("CASESPECIFIC", "CS"):
            j += 2
        else:
            return None
        if j < limit and toks[j].token_type is TokenType.R_PAREN:
            return j, named
        if j >= limit or toks[j].token_type is not TokenType.COMMA:
            return None
        j += 1
    return None


_NAMES = frozenset({TokenType.VAR, TokenType.IDENTIFIER, TokenType.STRING})
_EXPRESSION_END = frozenset(
    {TokenType.VAR, TokenType.IDENTIFIER, TokenType.R_PAREN, TokenType.NUMBER, TokenType.STRING}
    | {TokenType.STAR}
)
