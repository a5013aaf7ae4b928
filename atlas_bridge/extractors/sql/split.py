"""Split a script into statements without losing where each one sits in the file.

The whole script is tokenized once with the dialect's own tokenizer (so semicolons inside strings, quoted
identifiers and comments never split), and the token list is cut at top-level semicolons. Tokens keep
offsets into the whole text, so every position reported later is a position in the file. When the
tokenizer itself fails (an unterminated string, say), a character scanner that knows the dialect's quotes,
comments and ``$$`` strings splits the text in one pass instead, and each piece is tokenized alone with its
positions shifted into the file: only the piece that is broken is lost, and the cost stays linear (it was
quadratic: every piece was tokenized behind a blanked copy of the text before it).

T-SQL's ``GO`` alone on a line also ends a statement (a batch). Procedural blocks (``BEGIN ... END`` with
inner semicolons) are not kept together here yet: issue 3's
procedure handlers will extend :func:`split_statements`.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from operator import attrgetter

from sqlglot import tokens as sqlglot_tokens
from sqlglot.dialects.athena import Athena
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import Token, TokenType  # type: ignore[attr-defined]

from atlas_bridge.model import _ALL_SET, Span, _new, _set_dict, _set_extra, _set_fields, _set_private

_SPAN_FIELDS = _ALL_SET.setdefault(Span, set(Span.model_fields))
"""Every field of a Span is set: the fields-set construct_complete shares among all Spans."""


_bisect_right = bisect.bisect_right


class LineIndex:
    """Offset -> 1-based (line, column) for one text. A tab counts as one column, as SQLFlow counts."""

    def __init__(self, text: str) -> None:
        self._starts = [0]
        pos = text.find("\n")
        while pos != -1:
            self._starts.append(pos + 1)
            pos = text.find("\n", pos + 1)

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._starts, offset) - 1
        return line + 1, offset - self._starts[line] + 1

    def span(self, start: int, end: int) -> Span:
        """Span of ``text[start:end]`` (end exclusive)."""
        starts = self._starts
        line = _bisect_right(starts, start) - 1
        if end < start:
            end = start
        if line + 1 < len(starts) and end >= starts[line + 1]:
            end_line = _bisect_right(starts, end) - 1
        else:  # on the start's line (most spans): no second search
            end_line = line
        # made in place (a statement makes dozens of spans): construct_complete without its call
        span = _new(Span)
        _set_dict(
            span,
            {
                "line": line + 1,
                "column": start - starts[line] + 1,
                "end_line": end_line + 1,
                "end_column": end - starts[end_line] + 1,
            },
        )
        _set_fields(span, _SPAN_FIELDS)
        _set_extra(span, None)
        _set_private(span, None)
        return span


@dataclass
class StatementChunk:
    """One statement's tokens (offsets into the whole script) or the reason it could not be tokenized."""

    index: int
    """1-based statement number in the script."""
    start: int
    end: int
    """Offsets into the script: ``text[start:end]`` is the statement without its semicolon."""
    tokens: list[Token]
    error: str | None = None
    error_offset: int | None = None
    kinds: list[TokenType] | None = None
    """The tokens' types, when the split read them off the script's tokens in one pass (a post hook scans
    them; reading them statement by statement, after parsing, cost twice as much); None: not read."""


def split_statements(text: str, dialect: Dialect) -> list[StatementChunk]:
    """Statements of ``text`` in order. Empty statements (``;;``, comments only) are dropped."""
    try:
        tokens = _ungo(text, dialect, tokenize(text, dialect))
    except Exception:  # SqlglotError, or the tokenizer's own failure: our scanner cuts the text instead
        return _split_by_scanning(text, dialect)
    chunks: list[StatementChunk] = []
    semicolon = TokenType.SEMICOLON
    kinds = token_kinds(tokens)
    start = 0  # the current statement's first token
    # only semicolons and two-letter tokens (T-SQL's GO) can end a statement: find them in one pass
    for i in [i for i, tok in enumerate(tokens) if tok.token_type is semicolon or len(tok.text) == 2]:
        if i < start:  # the count after a GO
            continue
        if tokens[i].token_type is semicolon:
            _close(chunks, tokens[start:i], kinds[start:i])
            start = i + 1
        elif (go := _batch_separator(tokens, i)) is not None:
            _close(chunks, tokens[start:i], kinds[start:i])
            start = i + 1 + go
    _close(chunks, tokens[start:], kinds[start:])
    return chunks


_TOKEN_TYPE = attrgetter("token_type")

_GO_LINE = re.compile(r"^[ \t]*go(?:[ \t]+\d+)?[ \t]*\r?$", re.IGNORECASE | re.MULTILINE)


def _ungo(text: str, dialect: Dialect, tokens: list[Token]) -> list[Token]:
    """Give back the ``GO`` lines a command word swallowed.

    After a command word at a statement start (``END`` closing a T-SQL procedure without a ``;``), sqlglot
    keeps the rest of the statement, up to the next ``;``, as one raw STRING token: a ``GO`` line in it
    (what SQL Server Management Studio writes after ``END``) was never seen, and the statements after it
    were lost inside the procedure. Such a STRING is cut at its first ``GO`` line: the words before it stay
    the command's, the text from the ``GO`` on is tokenized again at its place in the file. Linear: each
    round goes on from a later offset, and only STRING tokens are looked at (a text without a GO line is
    returned as it is).
    """
    if _GO_LINE.search(text) is None:
        return tokens
    string = TokenType.STRING
    out: list[Token] = []
    lines: LineIndex | None = None
    # token lists still to emit, from an index on, with the indices of their STRING tokens
    todo = [(tokens, 0, [k for k, t in enumerate(tokens) if t.token_type is string])]
    while todo:
        toks, j, strings = todo.pop()
        for i in strings[bisect.bisect_left(strings, j) :]:
            tok = toks[i]
            raw_text = str(tok.text)
            if tok.end - tok.start + 1 >= len(raw_text):  # a real string literal, not a swallowed statement
                continue
            prev = toks[i - 1] if i > j else (out[-1] if out else None)
            begin = text.find(raw_text, prev.end + 1 if prev is not None else 0)
            if begin < 0:
                continue
            # searched in the file from the line's start (not in the token's text): GO must be alone on its
            # line (a GO line is short: looked back a little only, so a one-line script stays linear)
            near = max(begin - 80, 0)
            line_start = text.rfind("\n", near, begin) + 1 or near
            go = _GO_LINE.search(text, line_start, begin + len(raw_text))
            if go is None:
                continue
            lines = lines or LineIndex(text)
            out.extend(toks[j:i])
            cut = go.start()
            head = text[begin:cut].rstrip()
            if head:
                line, col = lines.position(begin)
                last = begin + len(head) - 1
                out.append(Token(string, head, line, col, last, last))
            # the GO line's own tokens (GO, its count) from where the STRING starts (it may start on the GO
            # line: the count after a GO the tokenizer took for a command word), then the text after the
            # line, tokenized from a statement start
            line, col = lines.position(cut)
            for m in re.finditer(r"\w+", go.group()):
                at = cut + m.start()
                kind = TokenType.NUMBER if m.group().isdigit() else TokenType.COMMAND
                if at >= begin:
                    out.append(Token(kind, m.group(), line, col + m.start(), at, at + len(m.group()) - 1))
            after = go.end()
            if i + 1 < len(toks):
                tail_end = toks[i + 1].start
            else:
                tail_end = (
                    todo[-1][0][todo[-1][1]].start if todo and todo[-1][1] < len(todo[-1][0]) else len(text)
                )
            todo.append((toks, i + 1, strings))
            tail = tokenize(text[after:tail_end], dialect)
            shift_tokens(tail, after, *lines.position(after))
            todo.append((tail, 0, [k for k, t in enumerate(tail) if t.token_type is string]))
            break
        else:
            out.extend(toks[j:])
    return out


def tokenize(text: str, dialect: Dialect) -> list[Token]:
    """The dialect's tokens of ``text``. Athena routes a query to Trino, whose tokenizer leaves a backquote
    as an unknown character, but Athena users backquote schema and table names in queries too (as in their
    Hive DDL): such a text is read by Athena's tokenizer that knows both quotes (Trino's double quotes
    stay identifiers, Hive's backquotes become identifiers too)."""
    tokens = dialect.tokenize(text)
    if isinstance(dialect, Athena) and any(
        t.token_type is TokenType.UNKNOWN and t.text == "`" for t in tokens
    ):
        return sqlglot_tokens.Tokenizer.tokenize(dialect.tokenizer(), text)
    return tokens


def token_kinds(tokens: list[Token]) -> list[TokenType]:
    """The tokens' types, read in one C loop (scans compare them pairwise or search them)."""
    return list(map(_TOKEN_TYPE, tokens))


def _batch_separator(tokens: list[Token], i: int) -> int | None:
    """T-SQL's ``GO`` (optionally ``GO <count>``) alone on its line ends a batch: how many tokens follow it
    on that line (0 or 1), or None when ``tokens[i]`` is not such a separator."""
    tok = tokens[i]
    text = tok.text
    if len(text) != 2 or text.upper() != "GO" or (i and tokens[i - 1].line >= tok.line):
        return None
    rest = 0
    if i + 1 < len(tokens) and tokens[i + 1].line == tok.line:
        if tokens[i + 1].token_type is not TokenType.NUMBER:
            return None
        rest = 1
    j = i + 1 + rest
    if j < len(tokens) and tokens[j].line == tok.line:
        return None
    return rest


def _close(chunks: list[StatementChunk], toks: list[Token], kinds: list[TokenType] | None = None) -> None:
    if not toks:
        return
    chunks.append(
        StatementChunk(
            index=len(chunks) + 1, start=toks[0].start, end=toks[-1].end + 1, tokens=toks, kinds=kinds
        )
    )


def _split_by_scanning(text: str, dialect: Dialect) -> list[StatementChunk]:
    """Split with our own scanner, then tokenize each piece alone: linear in the text, whatever breaks."""
    chunks: list[StatementChunk] = []
    lines = LineIndex(text)
    for start, end in _scan(text, _Syntax.of(dialect)):
        piece = text[start:end]
        if not piece.strip():
            continue
        try:
            toks = [t for t in tokenize(piece, dialect) if t.token_type is not TokenType.SEMICOLON]
        except Exception as e:  # this piece only
            first = start + len(piece) - len(piece.lstrip())
            chunks.append(
                StatementChunk(
                    index=len(chunks) + 1,
                    start=first,
                    end=end,
                    tokens=[],
                    error=f"cannot tokenize: {_first_line(str(e))}",
                    error_offset=first,
                )
            )
            continue
        if toks:
            shift_tokens(toks, start, *lines.position(start))
            chunks.append(
                StatementChunk(index=len(chunks) + 1, start=toks[0].start, end=toks[-1].end + 1, tokens=toks)
            )
    return chunks


def shift_tokens(toks: list[Token], offset: int, line: int, column: int) -> None:
    """Make the positions of tokens of ``text[offset:]`` (tokenized alone) positions in ``text``."""
    for t in toks:
        if t.line == 1:
            t.col += column - 1
        t.line += line - 1
        t.start += offset
        t.end += offset


_GO = re.compile(r"[ \t]*go(?:[ \t]+\d+)?[ \t]*(?:\r?\n|$)", re.IGNORECASE)


def _go_line(text: str, i: int) -> bool:
    """A ``GO`` batch separator starting at ``i``, alone on its line."""
    j = i - 1
    while j >= 0 and text[j] in " \t\r":  # only blanks back to the line start (not a rfind: linear)
        j -= 1
    return (j < 0 or text[j] == "\n") and _GO.match(text, i) is not None


def _first_line(msg: str) -> str:
    return msg.strip().splitlines()[0] if msg.strip() else msg


@dataclass(frozen=True)
class _Syntax:
    """What the fallback scanner honours in a dialect, read from sqlglot's tokenizer settings."""

    closers: dict[str, str]
    """Quote and quoted-identifier openers (one character) -> their closer."""
    escapes: frozenset[str]
    """Openers inside whose quotes a backslash escapes the next character."""
    line_comments: tuple[str, ...]
    dollar: bool
    """``$$ ... $$`` / ``$tag$ ... $tag$`` strings (PostgreSQL, DuckDB, Snowflake)."""

    @classmethod
    def of(cls, dialect: Dialect) -> _Syntax:
        tk = dialect.tokenizer_class
        closers = {"'": "'", '"': '"', "`": "`", "[": "]"}
        for opener, closer in {**tk._QUOTES, **tk._IDENTIFIERS}.items():
            if len(opener) == 1 and len(closer) == 1:
                closers[opener] = closer
        escapes = frozenset(q for q in tk._QUOTES if len(q) == 1 and "\\" in tk._STRING_ESCAPES)
        line_comments = tuple(sorted(k for k, v in tk._COMMENTS.items() if v is None and k != "--"))
        dollar = "$" in tk.HEREDOC_STRINGS or "$$" in tk._FORMAT_STRINGS
        return cls(closers, escapes, ("--", *line_comments), dollar)


_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$")


def _scan(text: str, syntax: _Syntax) -> list[tuple[int, int]]:
    """(start, end) of the pieces between top-level semicolons, honouring quotes and comments.

    One pass over the text (every ``find`` starts where the last one stopped), so it stays linear whatever
    the input; an unterminated quote or comment makes the rest of the text one (broken) piece.
    """
    pieces: list[tuple[int, int]] = []
    i, n, start = 0, len(text), 0
    closers = syntax.closers
    while i < n:
        c = text[i]
        if c in "gG" and _go_line(text, i):
            pieces.append((start, i))
            j = text.find("\n", i)
            i = start = n if j == -1 else j
        elif c in "-#/" and any(text.startswith(m, i) for m in syntax.line_comments):
            j = text.find("\n", i)
            i = n if j == -1 else j
        elif c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j == -1 else j + 2
        elif c == "$" and syntax.dollar and (m := _dollar_open(text, i)) is not None:
            j = text.find(m, i + len(m))
            if j == -1:
                break
            i = j + len(m)
        elif c in closers:
            j = _quote_end(text, i, closers[c], backslash=c in syntax.escapes)
            if j >= n:  # unterminated: the rest of the text is one broken statement
                break
            i = j + 1
        elif c == ";":
            pieces.append((start, i))
            start = i + 1
            i += 1
        else:
            i += 1
    pieces.append((start, n))
    return pieces


def _dollar_open(text: str, i: int) -> str | None:
    """The ``$tag$`` opening a dollar-quoted string at ``i`` (not a ``$`` inside a name like ``a$b``)."""
    if i and (text[i - 1].isalnum() or text[i - 1] in "_$"):
        return None
    m = _DOLLAR_TAG.match(text, i)
    return m.group() if m else None


def _quote_end(text: str, i: int, close: str, *, backslash: bool) -> int:
    """Offset of the character closing the quote opened at ``i`` (``len(text)`` when unterminated)."""
    j, n = i + 1, len(text)
    while j < n:
        if backslash:
            k = text.find(close, j)
            b = text.find("\\", j, n if k == -1 else k)
            if b != -1:
                j = b + 2
                continue
        else:
            k = text.find(close, j)
        if k == -1:
            return n
        if k + 1 < n and text[k + 1] == close and close != "]":
            j = k + 2
            continue
        return k
    return n
