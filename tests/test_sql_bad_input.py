"""Bad input never costs good lineage (issue 11): statements that crashed the extractor, the split's fallback.

Reproducers: tests/data/sql/bad_input/crashers.jsonl, one bad statement each, with the Problem it must give
(``kind``; ``message``, a part of the text). Each must give that Problem alone, and between two good
statements it must leave their lineage exactly as it is without it. ``repeat: [part, sep, n]`` stands for
``sep.join([part] * n)`` in place of ``{repeat}`` (a 5,000-part name does not belong in a data file);
``separator`` joins the statements (default ``;`` and a newline); ``swallows_rest``: nothing can follow.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from sqlglot.dialects.dialect import Dialect

from atlas_bridge import extract_sql_lineage
from atlas_bridge.extractors.sql.split import split_statements
from atlas_bridge.graph import end_to_end, relation_lines
from atlas_bridge.model import ExtractionResult, Severity, _streamed_hash, query_hash

DATA = Path(__file__).parent / "data" / "sql" / "bad_input"
CRASHERS: list[dict[str, Any]] = [
    json.loads(line) for line in (DATA / "crashers.jsonl").read_text(encoding="utf-8").splitlines() if line
]
GOOD = (
    "INSERT INTO keep_one (a) SELECT x FROM src_one WHERE y > 0",
    "INSERT INTO keep_two (b) SELECT z FROM src_two",
)


def _sql(case: dict[str, Any]) -> str:
    sql: str = case["sql"]
    if "repeat" in case:
        part, sep, n = case["repeat"]
        sql = sql.replace("{repeat}", sep.join([part] * n))
    return sql


def _valid(result: ExtractionResult) -> None:
    """A valid model that survives a JSON round trip (UTF-8: no lone surrogate anywhere)."""
    assert ExtractionResult.model_validate_json(result.model_dump_json().encode("utf-8")) == result


def _errors(result: ExtractionResult) -> list[tuple[int | None, str, str]]:
    return [(p.statement_index, p.kind, p.message) for p in result.problems if p.severity is Severity.ERROR]


@pytest.mark.parametrize("case", CRASHERS, ids=[c["id"] for c in CRASHERS])
def test_bad_statement_alone_is_one_problem(case: dict[str, Any]) -> None:
    result = extract_sql_lineage(_sql(case), case["dialect"], file="bad.sql")
    _valid(result)
    (problem,) = [p for p in result.problems if p.severity is Severity.ERROR]
    assert (problem.statement_index, problem.kind, problem.file) == (1, case["kind"], "bad.sql")
    assert problem.line == 1
    assert problem.column is not None
    assert case.get("message", "") in problem.message
    assert not result.lineage.processes


@pytest.mark.parametrize("case", CRASHERS, ids=[c["id"] for c in CRASHERS])
def test_bad_statement_keeps_its_neighbours_lineage(case: dict[str, Any]) -> None:
    """GOOD[0]; bad; GOOD[1] -> the good statements' lineage, and one problem on statement 2, at its line."""
    good = list(GOOD[:1]) if case.get("swallows_rest") else list(GOOD)  # an open quote eats what follows
    alone = extract_sql_lineage(";\n".join(good), case["dialect"])
    assert not alone.problems
    assert len(alone.lineage.processes) == len(good)
    sep = case.get("separator", ";\n")
    script = sep.join([good[0], _sql(case), *good[1:]])
    result = extract_sql_lineage(script, case["dialect"], file="mixed.sql")
    _valid(result)
    assert [(i, k) for i, k, _ in _errors(result)] == [(2, case["kind"])]
    line = 1 + (good[0] + sep).count("\n")
    assert [p.line for p in result.problems if p.severity is Severity.ERROR] == [line]
    assert relation_lines(end_to_end(result.lineage)) == relation_lines(end_to_end(alone.lineage))
    assert len(result.lineage.processes) == len(good)


def test_tsql_file_with_one_bad_statement_keeps_two_statements() -> None:
    """The issue's example: two good INSERTs around ``SELECT INTO`` scanned as 'statements: 0'."""
    script = (
        "INSERT INTO dbo.a (x) SELECT x FROM dbo.s;\n"
        "SELECT INTO;\n"
        "INSERT INTO dbo.b (y) SELECT y FROM dbo.s;\n"
    )
    result = extract_sql_lineage(script, "tsql")
    assert sorted(p.name for p in result.lineage.processes) == ["Insert into dbo.a", "Insert into dbo.b"]
    assert [(i, k) for i, k, _ in _errors(result)] == [(2, "parse")]


# -- the split's fallback (tokenizing the whole script failed) ------------------------------------------


@pytest.mark.parametrize("n", [1, 3, 200])
def test_unbalanced_quote_at_the_end_keeps_every_statement_before(n: int) -> None:
    """``"SELECT 1;" * n + "'"``: n statements at their own columns, then the broken one."""
    text = "SELECT 1;" * n + "'"
    chunks = split_statements(text, Dialect.get_or_raise(None))
    assert [(c.start, c.end) for c in chunks[:n]] == [(9 * k, 9 * k + 8) for k in range(n)]
    assert all(c.error is None and [t.text for t in c.tokens] == ["SELECT", "1"] for c in chunks[:n])
    assert [(t.line, t.col) for t in chunks[n - 1].tokens] == [(1, 9 * (n - 1) + 6), (1, 9 * (n - 1) + 8)]
    (broken,) = chunks[n:]
    assert broken.error is not None
    assert broken.error.startswith("cannot tokenize")
    assert (broken.start, broken.error_offset) == (9 * n, 9 * n)


def test_fallback_split_positions_are_file_positions() -> None:
    """Lines and columns of tokens after the fallback equal those of a clean tokenization of the same
    statements: the broken statement costs itself only."""
    good = "select a,\n  b from t;\n\tinsert into u -- c;\n select 'x;y' from v;\n"
    d = Dialect.get_or_raise("postgres")
    clean = split_statements(good, d)
    broken = split_statements(good + "select $$ never closed", d)
    assert len(broken) == len(clean) + 1
    assert broken[-1].error is not None

    def where(chunks: list[Any]) -> list[list[tuple[str, int, int, int, int]]]:
        return [[(t.text, t.line, t.col, t.start, t.end) for t in c.tokens] for c in chunks]

    assert where(broken[:-1]) == where(clean)


@pytest.mark.parametrize(
    ("dialect", "text", "pieces"),
    [
        ("postgres", "select $$a;b$$;select $t$ ; $t$;select 'open", ["select $$a;b$$", "select $t$ ; $t$"]),
        ("mysql", "select 1 # c;d\n;select `a;b`;select 'open", ["select 1", "select `a;b`"]),
        ("tsql", "select [a;b]\nGO\nselect 1;select 'open", ["select [a;b]", "select 1"]),
        ("bigquery", "select 'a\\';b';select 'open", ["select 'a\\';b'"]),
        ("ansi", "select 'a\\';b';select \"open", ["select 'a\\'"]),
    ],
)
def test_fallback_split_honours_the_dialects_quotes_and_comments(
    dialect: str, text: str, pieces: list[str]
) -> None:
    """Where the dialect's tokenizer fails, our scanner cuts as it would (backslash escapes only where the
    dialect has them); the statement with the open quote is the one broken piece."""
    chunks = split_statements(text, Dialect.get_or_raise(None if dialect == "ansi" else dialect))
    good = [c for c in chunks if c.error is None]
    assert [text[c.start : c.end] for c in good] == pieces
    assert len(chunks) - len(good) == 1


# -- the statement hash ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("select a  from t", "SELECT a\nFROM t;", True),
        ("select 'A  B' from t", "SELECT 'A  B' FROM T", True),
        ("select 'A  B' from t", "select 'a b' from t", False),
        ("select 'it''s  X' from t", "SELECT 'it''s  X' FROM T", True),
        ("select 'it''s  X' from t", "select 'it''s x' from t", False),
        ("select 'open  X", "SELECT 'OPEN X", True),  # an open quote is no literal: folded like the rest
        ("select 'x' || '\ud800'", "select 'x' || '\ud800'", True),
        ("select '\ud800'", "select '\udfff'", False),
    ],
)
def test_query_hash_folds_outside_literals_only(a: str, b: str, same: bool) -> None:
    assert (query_hash(a) == query_hash(b)) is same


@pytest.mark.parametrize(
    "text",
    [
        "select a  from t",
        "SELECT 'A  B'\tFROM\n T",
        "select 'it''s  X' ,'' , ''''",
        "select 'open  X",  # an odd number of quotes: the last opens no literal
        "select 'a'' B' || ' C",
        "x 'a''  b''  C",
        "'' '",
        "  'A'  ",
        "select '\u00a0A\u2003' \u00a0\u2003 FROM  \u3000T",  # Unicode whitespace, in and out of literals
        "SELECT 'İ' , İ",
    ],
)
def test_query_hash_cuts_at_quotes_as_the_literal_pattern_does(text: str) -> None:
    """Statements of ordinary size are cut at every quote; longer ones are hashed around the literal
    pattern's matches: both must hash the same text alike."""
    assert query_hash(text) == _streamed_hash(text.strip().rstrip(";").strip())


def test_query_hash_of_literals_longer_than_a_slice() -> None:
    """Literals are hashed in slices: the cut must not change what is hashed (nor fold the literal)."""
    big = "Ab " * 50_000
    assert query_hash(f"select '{big}' FROM t") == query_hash(f"SELECT '{big}' from T")
    assert query_hash(f"select '{big}'") != query_hash(f"select '{big.lower()}'")
    assert query_hash(f"select '{big}'") == hashlib.sha256(f"select '{big}'".encode()).hexdigest()


# -- sqlglot work-arounds -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["3 day", " 1 day 2 hours ", "H1day\t5day", "x5day 23day H", "\t-1.5  MONTH\n", "  ", "", "5 H\n2day.x"],
)
def test_linear_interval_regex_finds_what_sqlglots_finds(text: str) -> None:
    """The replacement for sqlglot's INTERVAL_STRING_RE (quadratic on runs of blanks) is installed and finds
    exactly the same parts, also behind a long run of blanks."""
    from sqlglot import expressions

    from atlas_bridge.extractors.sql import sqlglot_fixes

    assert expressions.INTERVAL_STRING_RE is sqlglot_fixes.INTERVAL_STRING_RE
    original = re.compile(sqlglot_fixes._ORIGINAL_INTERVAL)
    for t in (text, " " * 800 + text, text + " " * 800 + "x 1 d"):
        assert sqlglot_fixes.INTERVAL_STRING_RE.findall(t) == original.findall(t)


# -- T-SQL batches as SQL Server Management Studio writes them --------------------------------------------


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_a_procedure_closed_by_end_then_go_keeps_every_statement_after_it(newline: str) -> None:
    """``END`` (a command word to sqlglot) swallowed the text up to the next ``;``, GO lines and all: the
    statements after the first procedure were lost, with one warning. Each statement keeps its line."""
    text = (DATA.parent / "scripts" / "ssms_end_then_go.sql").read_text(encoding="utf-8")
    result = extract_sql_lineage(text.replace("\n", newline), "tsql", file="ssms.sql")
    lines = text.splitlines()
    want = {
        f"Insert into dbo.t{k}": next(n for n, line in enumerate(lines, 1) if f"dbo.t{k} " in line)
        for k in range(1, 6)
    }
    assert {p.name: p.span.line for p in result.lineage.processes if p.span} == want
    assert [p.message for p in result.problems] == []


def test_a_procedure_created_twice_in_one_script_is_its_last_definition() -> None:
    """Both definitions made a Procedure of one id: 'internal error: statement lineage does not merge' on
    the second one, exit 1. The database keeps the last definition; both bodies' statements are lineage."""
    text = (DATA.parent / "scripts" / "oracle_procedure_twice.sql").read_text(encoding="utf-8")
    result = extract_sql_lineage(text, "oracle", file="deploy.sql")
    assert result.problems == ()
    (procedure,) = result.lineage.procedures
    assert procedure.name == "s.load_x"
    assert [a.name for a in procedure.arguments] == ["p_day"]
    assert procedure.span is not None
    assert procedure.span.line == 7
    assert sorted((p.name, p.procedure) for p in result.lineage.processes) == [
        ("Insert into s.t1", "s.load_x"),
        ("Insert into s.t2", "s.load_x"),
    ]
