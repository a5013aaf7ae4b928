"""Split a script into statements without losing where each one sits in the file.

The whole script is tokenized once with the dialect's own tokenizer (so semicolons inside strings, quoted
identifiers and comments never split), and the token list is cut at top-level semicolons. Tokens keep
offsets into the whole text, so every position reported later is a position in the file. When the
tokenizer itself fails (an unterminated string, say), a character scanner splits the text instead and each
piece is tokenized alone: only the piece that is broken is lost.

T-SQL's ``GO`` alone on a line also ends a statement (a batch). Procedural blocks (``BEGIN ... END`` with
inner semicolons) are not kept together here yet: issue 3's
procedure handlers will extend :func:`split_statements`.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token, TokenType  # type: ignore[attr-defined]

from atlas_bridge.extractors.sql.builder import _fast
from atlas_bridge.model import Span


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
        line, col = self.position(start)
        end_line, end_col = self.position(max(end, start))
        return _fast(Span, line=line, column=col, end_line=end_line, end_column=end_col)


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


def split_statements(text: str, dialect: Dialect) -> list[StatementChunk]:
    """Statements of ``text`` in order. Empty statements (``;;``, comments only) are dropped."""
    try:
        tokens = dialect.tokenize(text)
    except SqlglotError:
        return _split_by_scanning(text, dialect)
    chunks: list[StatementChunk] = []
    current: list[Token] = []
    skip = 0
    for i, tok in enumerate(tokens):
        if skip:
            skip -= 1
            continue
        if tok.token_type is TokenType.SEMICOLON:
            _close(chunks, current)
            current = []
        elif (go := _batch_separator(tokens, i)) is not None:
            _close(chunks, current)
            current = []
            skip = go
        else:
            current.append(tok)
    _close(chunks, current)
    return chunks


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


def _close(chunks: list[StatementChunk], toks: list[Token]) -> None:
    if not toks:
        return
    chunks.append(
        StatementChunk(index=len(chunks) + 1, start=toks[0].start, end=toks[-1].end + 1, tokens=toks)
    )


def _split_by_scanning(text: str, dialect: Dialect) -> list[StatementChunk]:
    chunks: list[StatementChunk] = []
    for start, end in _scan(text):
        piece = text[start:end]
        if not piece.strip():
            continue
        # Blank out everything before the piece so token offsets, lines and columns stay file positions.
        pad = "".join("\n" if c == "\n" else " " for c in text[:start])
        try:
            toks = [t for t in dialect.tokenize(pad + piece) if t.token_type is not TokenType.SEMICOLON]
        except SqlglotError as e:
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
            chunks.append(
                StatementChunk(index=len(chunks) + 1, start=toks[0].start, end=toks[-1].end + 1, tokens=toks)
            )
    return chunks


_GO = re.compile(r"[ \t]*go(?:[ \t]+\d+)?[ \t]*(?:\r?\n|$)", re.IGNORECASE)


def _go_line(text: str, i: int) -> bool:
    """A ``GO`` batch separator starting at ``i``, alone on its line."""
    line_start = text.rfind("\n", 0, i) + 1
    return not text[line_start:i].strip() and _GO.match(text, i) is not None


def _first_line(msg: str) -> str:
    return msg.strip().splitlines()[0] if msg.strip() else msg


def _scan(text: str) -> list[tuple[int, int]]:
    """(start, end) of the pieces between top-level semicolons, honouring quotes and comments."""
    pieces: list[tuple[int, int]] = []
    i, n, start = 0, len(text), 0
    closers = {"'": "'", '"': '"', "`": "`", "[": "]"}
    while i < n:
        c = text[i]
        if c in "gG" and _go_line(text, i):
            pieces.append((start, i))
            j = text.find("\n", i)
            i = start = n if j == -1 else j
        elif c == "-" and text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j == -1 else j
        elif c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j == -1 else j + 2
        elif c in closers:
            close = closers[c]
            j = i + 1
            while j < n:
                if text[j] == close:
                    if j + 1 < n and text[j + 1] == close and close != "]":
                        j += 2
                        continue
                    break
                if text[j] == "\\" and close != "]":
                    j += 1
                j += 1
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
