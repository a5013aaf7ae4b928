"""Work-arounds for statements sqlglot cannot parse as written (issue 12, group 8), beyond the accuracy cases
in tests/data/sql/accuracy/groups_3_8_9.jsonl: where the pieces of a T-SQL script without semicolons are
cut, that the piece which still fails is reported at its own position while the others give lineage, and
that token rewrites keep file positions."""

from __future__ import annotations

import pytest
from sqlglot.dialects.dialect import Dialect

from atlas_bridge import extract_sql_lineage
from atlas_bridge.extractors.sql.resplit import compound_assignments, statement_pieces, teradata_attributes
from atlas_bridge.extractors.sql.split import split_statements
from atlas_bridge.graph import end_to_end, relation_lines
from atlas_bridge.model import Severity


def _pieces(sql: str, dialect: str = "tsql") -> list[str]:
    (chunk,) = split_statements(sql, Dialect.get_or_raise(dialect))
    return [sql[p.start : p.end] for p in statement_pieces(chunk)]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "INSERT INTO a SELECT x FROM b\nUPDATE c SET y = 1\nSELECT z FROM d",
            ["INSERT INTO a SELECT x FROM b", "UPDATE c SET y = 1", "SELECT z FROM d"],
        ),
        # a second SELECT after a set operator, a SELECT in parentheses, SET of an UPDATE: one statement
        ("SELECT a FROM b UNION ALL SELECT a FROM c WHERE a IN (SELECT a FROM d)", []),
        ("UPDATE t SET a = CASE WHEN b = 1 THEN 2 ELSE 3 END WHERE c = 1", []),
        # MERGE's INSERT/UPDATE/DELETE, ALTER TABLE ... DROP, ON DELETE, CURSOR FOR SELECT: continuations
        (
            "MERGE INTO t USING s ON t.k = s.k WHEN MATCHED THEN UPDATE SET t.v = s.v "
            "WHEN NOT MATCHED THEN INSERT (k, v) VALUES (s.k, s.v) SELECT 1",
            [
                "MERGE INTO t USING s ON t.k = s.k WHEN MATCHED THEN UPDATE SET t.v = s.v "
                "WHEN NOT MATCHED THEN INSERT (k, v) VALUES (s.k, s.v)",
                "SELECT 1",
            ],
        ),
        (
            "ALTER TABLE t DROP COLUMN a\nDROP TABLE u",
            ["ALTER TABLE t DROP COLUMN a", "DROP TABLE u"],
        ),
        (
            "WITH c AS (SELECT 1 AS x) INSERT INTO t SELECT x FROM c\nSELECT 2",
            ["WITH c AS (SELECT 1 AS x) INSERT INTO t SELECT x FROM c", "SELECT 2"],
        ),
        ("GRANT SELECT, INSERT ON t TO u", []),
        ("DECLARE c CURSOR FOR SELECT a FROM t FOR UPDATE", []),
        (
            "SELECT a FROM t WITH (NOLOCK)\nIF @x > 0\nDELETE FROM t",
            ["SELECT a FROM t WITH (NOLOCK)", "DELETE FROM t"],
        ),
    ],
)
def test_tsql_statements_are_cut_only_where_one_can_start(sql: str, expected: list[str]) -> None:
    assert _pieces(sql) == expected


def test_the_statement_that_still_fails_is_reported_where_it_is_and_the_others_give_lineage() -> None:
    sql = "INSERT INTO s.a SELECT x FROM s.b\n  UPDATE s.c SET y = = 1\nINSERT INTO s.e SELECT w FROM s.f"
    result = extract_sql_lineage(sql, "tsql", file="x.sql")
    errors = [p for p in result.problems if p.severity is Severity.ERROR]
    assert [(p.kind, p.file, p.statement_index, p.line) for p in errors] == [("parse", "x.sql", 1, 2)]
    assert relation_lines(end_to_end(result.lineage)) == ["s.b.x -> fdd -> s.a.x", "s.f.w -> fdd -> s.e.w"]
    spans = sorted((p.span.line, p.span.end_line) for p in result.lineage.processes if p.span)
    assert spans == [(1, 1), (3, 3)]
    assert sorted(p.sql for p in result.lineage.processes) == [
        "INSERT INTO s.a SELECT x FROM s.b",
        "INSERT INTO s.e SELECT w FROM s.f",
    ]


def test_a_script_that_parses_whole_is_not_cut() -> None:
    """The cutting only runs when sqlglot cannot parse the statement: other dialects and valid T-SQL keep
    their statements as they are."""
    sql = "INSERT INTO s.a SELECT x FROM s.b WHERE x IN (SELECT x FROM s.c)"
    for dialect in ("tsql", "postgres"):
        result = extract_sql_lineage(sql, dialect)
        assert not result.problems
        assert len(result.lineage.processes) == 1


def test_compound_assignment_rewrite_keeps_positions() -> None:
    d = Dialect.get_or_raise("tsql")
    sql = "UPDATE t SET a += b * 2, c -= (SELECT 1) WHERE d = 1"
    (chunk,) = split_statements(sql, d)
    toks = compound_assignments(chunk.tokens)
    assert " ".join(t.text for t in toks) == (
        "UPDATE t SET a = a + ( b * 2 ) , c = c - ( ( SELECT 1 ) ) WHERE d = 1"
    )
    assert all(0 <= t.start <= t.end < len(sql) for t in toks)
    assert compound_assignments(chunk.tokens[:3]) == chunk.tokens[:3]
    result = extract_sql_lineage(sql.replace(" t ", " s.t "), "tsql")
    assert not result.problems
    assert result.lineage.processes[0].sql == sql.replace(" t ", " s.t ")


def test_teradata_attribute_lists_only() -> None:
    d = Dialect.get_or_raise("teradata")
    sql = "SELECT a (TITLE 'x'), f (b, c), d (NAMED e, FORMAT '9'), g (FORMAT 'X') FROM t"
    (chunk,) = split_statements(sql, d)
    assert " ".join(t.text for t in teradata_attributes(chunk.tokens)) == (
        "SELECT a , f ( b , c ) , d AS e , g FROM t"
    )


def test_unload_of_a_broken_query_is_a_problem_at_its_statement() -> None:
    sql = "SELECT 1;\nUNLOAD ('select a from (') TO 's3://b/k/' IAM_ROLE 'r';"
    result = extract_sql_lineage(sql, "redshift", file="u.sql")
    assert [(p.kind, p.statement_index, p.line) for p in result.problems] == [("unsupported", 2, 2)]
    assert "UNLOAD" in result.problems[0].message
