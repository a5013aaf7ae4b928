"""Unit tests of the SQL extractor: statements, resolution rules, isolation, positions, determinism."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from atlas_bridge import extract_sql_lineage
from atlas_bridge.errors import ExtractionError
from atlas_bridge.extractors.sql import resolve_dialect
from atlas_bridge.extractors.sql.core import ScriptState, StatementContext, StatementTimeout
from atlas_bridge.extractors.sql.schema import SchemaIndex
from atlas_bridge.extractors.sql.split import LineIndex, split_statements
from atlas_bridge.graph import end_to_end, relation_lines, table_level
from atlas_bridge.model import (
    ORPHAN_TABLE,
    ClauseType,
    DatasetKind,
    Effect,
    FlowKind,
    Lineage,
    RelationType,
    Severity,
    query_hash,
)


def e2e_lines(sql: str, dialect: str | None = None, schema: dict | None = None, **kw: object) -> set[str]:
    result = extract_sql_lineage(sql, dialect, schema, **kw)  # type: ignore[arg-type]
    assert result.ok, [str(p) for p in result.problems]
    return set(relation_lines(end_to_end(result.lineage)))


# -- statements -----------------------------------------------------------------------------------------


def test_insert_with_column_list_maps_by_position() -> None:
    lines = e2e_lines("INSERT INTO t (x, y) SELECT a, b + 1 FROM s")
    assert lines == {"s.a -> fdd -> t.x", "s.b -> fdd -> t.y"}


def test_insert_without_column_list_uses_schema_order_and_skips_static_partitions() -> None:
    schema = {"db": {"t": {"x": "int", "y": "int", "dt": "string"}, "s": {"a": "int", "b": "int"}}}
    lines = e2e_lines(
        "INSERT OVERWRITE TABLE db.t PARTITION (dt='2024') SELECT b, a FROM db.s", "hive", schema
    )
    assert lines == {"db.s.b -> fdd -> db.t.x", "db.s.a -> fdd -> db.t.y"}


def test_insert_without_schema_maps_by_name() -> None:
    assert e2e_lines("INSERT INTO t SELECT a AS x FROM s") == {"s.a -> fdd -> t.x"}


def test_insert_by_name_ignores_the_schema_order() -> None:
    schema = {"t": {"y": "int", "x": "int"}, "s": {"a": "int", "b": "int"}}
    lines = e2e_lines("INSERT INTO t BY NAME SELECT a AS x, b AS y FROM s", "spark", schema)
    assert lines == {"s.a -> fdd -> t.x", "s.b -> fdd -> t.y"}


def test_insert_process_and_target_edges() -> None:
    result = extract_sql_lineage(
        "-- load\nINSERT OVERWRITE TABLE sales.o SELECT id FROM raw.o", "hive", file="f.sql"
    )
    lin = result.lineage
    (proc,) = lin.processes
    sql = "INSERT OVERWRITE TABLE sales.o SELECT id FROM raw.o"
    assert proc.id == f"process:{query_hash(sql)[:16]}"
    assert (proc.type, proc.name, proc.statement_index, proc.sql, proc.source_file) == (
        "insert_overwrite",
        "Insert overwrite sales.o",
        1,
        sql,
        "f.sql",
    )
    assert proc.span is not None
    assert (proc.span.line, proc.span.column) == (2, 1)
    assert lin.dataset("table:sales.o").process_ids == (proc.id,)
    into = [r for r in lin.relations if r.target.dataset_id == "table:sales.o"]
    assert into
    assert all(r.process_id == proc.id and r.effect_type == "insert" for r in into)
    (tl_edge,) = table_level(lin).edges
    assert (tl_edge.source, tl_edge.process_id, tl_edge.target) == ("table:raw.o", proc.id, "table:sales.o")


def test_repeated_statement_text_gets_numbered_process_ids() -> None:
    sql = "insert into t select a from s;\ninsert into t select a from s;"
    ids = [p.id for p in extract_sql_lineage(sql).lineage.processes]
    assert len(ids) == 2
    assert ids[1] == ids[0] + "#2"


def test_bare_select_has_no_process_and_resultsets_numbered_over_the_script() -> None:
    lin = extract_sql_lineage("select a from t; select b from u union select c from v").lineage
    assert not lin.processes
    names = sorted(d.name for d in lin.datasets if d.kind is DatasetKind.RESULTSET)
    assert names == ["RESULT_OF_UNION-1", "RS-1", "RS-2", "RS-3"]
    union = next(d for d in lin.datasets if d.name == "RESULT_OF_UNION-1")
    assert union.sub_type == "select_union"


def test_create_view_with_column_list_and_ctas() -> None:
    sql = "create view v (x) as select a from t;\ncreate table c as select x from v"
    result = extract_sql_lineage(sql)
    lin = result.lineage
    assert {p.type for p in lin.processes} == {"create_view", "create_table_as_select"}
    assert lin.dataset("table:v").kind is DatasetKind.VIEW
    assert set(relation_lines(end_to_end(lin))) == {"t.a -> fdd -> v.x", "v.x -> fdd -> c.x"}


def test_create_table_ddl_teaches_later_statements_the_columns() -> None:
    sql = "create table t (x int, y int);\ninsert into t select a, b from s"
    assert e2e_lines(sql) == {"s.a -> fdd -> t.x", "s.b -> fdd -> t.y"}


def test_a_schema_passed_again_is_read_as_it_is_now() -> None:
    """The index of a schema mapping is shared by the calls given an equal one: a change to the mapping
    between calls is seen, and what one script's DDL defines does not reach the next script."""
    schema: dict[str, Any] = {"db": {"t": {"x": "int", "y": "int"}, "s": {"a": "int", "b": "int"}}}
    insert = "INSERT INTO db.t SELECT b, a FROM db.s"
    assert e2e_lines(insert, None, schema) == {"db.s.b -> fdd -> db.t.x", "db.s.a -> fdd -> db.t.y"}
    schema["db"]["t"] = {"y": "int", "x": "int"}  # the same mapping, changed in place
    assert e2e_lines(insert, None, schema) == {"db.s.b -> fdd -> db.t.y", "db.s.a -> fdd -> db.t.x"}
    redefined = "CREATE TABLE db.t (z INT, w INT);\n" + insert
    assert e2e_lines(redefined, None, schema) == {"db.s.b -> fdd -> db.t.z", "db.s.a -> fdd -> db.t.w"}
    assert e2e_lines(insert, None, schema) == {"db.s.b -> fdd -> db.t.y", "db.s.a -> fdd -> db.t.x"}
    index = SchemaIndex(schema)
    index.add_all([], unordered=[(None, "db", "t")])  # columns known, their order not: written by name
    assert e2e_lines("INSERT INTO db.t SELECT a AS x, b AS y FROM db.s", None, index) == {
        "db.s.a -> fdd -> db.t.x",
        "db.s.b -> fdd -> db.t.y",
    }
    assert not index.in_order(None, "db", "t")
    assert SchemaIndex(schema).in_order(None, "db", "t")


def test_with_insert_and_recursive_cte() -> None:
    sql = (
        "with recursive r (n) as (select id from seed union all select n + 1 from r where n < 10)\n"
        "insert into out_t select n from r"
    )
    lines = e2e_lines(sql, "postgres")
    assert "seed.id -> fdd -> out_t.n" in lines
    lin = extract_sql_lineage(sql, "postgres").lineage
    cte = next(d for d in lin.datasets if d.name == "r")
    assert cte.sub_type == "with_cte"


def test_union_feeds_positionally() -> None:
    assert e2e_lines("insert into t select a from x union all select b from y") == {
        "x.a -> fdd -> t.a",
        "y.b -> fdd -> t.a",
    }


# -- resolution rules -----------------------------------------------------------------------------------


def test_window_partition_and_order_are_fdr_window() -> None:
    lin = extract_sql_lineage("select sum(v) over (partition by p order by o) s from t").lineage
    rels = {(r.source.column, r.type, r.clause_type) for r in end_to_end(lin).relations}
    assert ("v", RelationType.FDD, None) in rels
    assert ("p", RelationType.FDR, ClauseType.WINDOW) in rels
    assert ("o", RelationType.FDR, ClauseType.WINDOW) in rels


def test_ranking_functions_keys_are_indirect_as_in_the_spark_hook() -> None:
    """Ranking functions copy no value of their keys: PARTITION BY / ORDER BY are fdr window only (the
    Spark hook reads rank / dense_rank the same way, tests/test_spark_hook.py)."""
    cols = ("rank()", "dense_rank()", "percent_rank()", "ntile(2)", "cume_dist()", "row_number()")
    select = ", ".join(f"{fn} over (partition by p order by o) c{i}" for i, fn in enumerate(cols))
    for dialect in ("spark", "postgres", "oracle"):
        lines = e2e_lines(f"insert into r select {select} from t", dialect)
        assert lines == {f"t.{k} -> fdr -> r.c{i}" for i in range(len(cols)) for k in ("p", "o")}, dialect


def test_coalesce_is_a_conditional_as_in_the_spark_hook() -> None:
    """COALESCE / NVL / IFNULL (a, b): both arguments flow (a bare one a PARTIAL_COPY) and all but the
    last also decide by their nullness (fdr, clause condition), as the Spark hook reads Spark's Coalesce."""
    for dialect, fn in (("spark", "coalesce"), ("oracle", "nvl"), ("mysql", "ifnull"), ("tsql", "isnull")):
        sql = f"insert into r select {fn}(a, b) c, upper({fn}(a, b)) u, coalesce(a, b, 'z') c3 from t"
        lin = extract_sql_lineage(sql, dialect).lineage
        got = {
            (r.source.column, r.target.column, r.type.value, (r.clause_type or r.effect or ""))
            for r in lin.relations
            if r.source.dataset_id == "table:t"
        }
        assert got == {
            ("a", "c", "fdd", Effect.PARTIAL_COPY),
            ("b", "c", "fdd", Effect.PARTIAL_COPY),
            ("a", "c", "fdr", ClauseType.CONDITION),
            ("a", "u", "fdd", Effect.MODIFIED_COPY),
            ("b", "u", "fdd", Effect.MODIFIED_COPY),
            ("a", "u", "fdr", ClauseType.CONDITION),
            ("a", "c3", "fdd", Effect.PARTIAL_COPY),
            ("b", "c3", "fdd", Effect.PARTIAL_COPY),
            ("a", "c3", "fdr", ClauseType.CONDITION),
            ("b", "c3", "fdr", ClauseType.CONDITION),
        }, dialect
    # UPDATE ... SET reads its values the same way
    lin = extract_sql_lineage(
        "update r set c = coalesce(s.a, s.b) from s where s.id = r.id", "postgres"
    ).lineage
    got = {(r.source.column, r.type.value, r.clause_type) for r in lin.relations if r.target.column == "c"}
    assert ("a", "fdr", ClauseType.CONDITION) in got
    assert ("b", "fdr", ClauseType.CONDITION) not in got


def test_effects_and_transforms() -> None:
    lin = extract_sql_lineage(
        "select a, b as bb, upper(c) cu, sum(d) sd, count(*) n from t group by a, b, c"
    ).lineage
    by_target = {}
    for r in lin.relations:
        if r.type is RelationType.FDD or r.flow is FlowKind.DATA_FLOW:
            by_target[r.target.column] = r
    assert by_target["a"].effect is Effect.EXACT_COPY
    assert by_target["a"].transform is None
    assert by_target["bb"].effect is Effect.EXACT_COPY
    assert by_target["bb"].transform == "b AS bb"
    assert by_target["cu"].effect is Effect.MODIFIED_COPY
    assert by_target["cu"].transform == "UPPER(c)"
    assert by_target["cu"].function == "UPPER"
    assert by_target["sd"].effect is Effect.AGGREGATION
    assert by_target["sd"].function == "SUM"
    count = by_target["n"]
    assert (count.source.column, count.type, count.effect) == (
        "PseudoRows",
        RelationType.FDR,
        Effect.AGGREGATION,
    )


def test_group_by_flows_are_groups_and_where_restricts() -> None:
    lin = extract_sql_lineage("select k, sum(v) s from t where f = 1 group by k").lineage
    flows = {(r.source.column, r.target.column, r.flow) for r in lin.relations}
    assert ("k", "s", FlowKind.GROUPS) in flows
    assert ("f", "s", FlowKind.RESTRICTS) in flows
    assert ("f", "PseudoRows", FlowKind.RESTRICTS) in flows


def test_star_kept_without_schema_and_expanded_with_it() -> None:
    assert e2e_lines("insert into t select * from s") == {"s.* -> fdd -> t.*"}
    schema = {"s": {"a": "int", "b": "int"}}
    assert e2e_lines("insert into t select * from s", schema=schema) == {
        "s.a -> fdd -> t.a",
        "s.b -> fdd -> t.b",
    }


def test_star_through_subquery_resolves_named_columns_without_schema() -> None:
    assert e2e_lines("insert into t select x.a from (select * from s) x") == {"s.a -> fdd -> t.a"}


def test_unplaceable_column_goes_to_orphan_table_with_a_warning() -> None:
    result = extract_sql_lineage("select a from t1, t2")
    (warning,) = result.problems
    assert warning.severity is Severity.WARNING
    assert warning.kind == "orphan_column"
    assert (warning.line, warning.column, warning.statement_index) == (1, 8, 1)
    (rel,) = [r for r in result.lineage.relations if r.type is RelationType.FDD]
    assert rel.source.dataset_id.endswith(ORPHAN_TABLE)
    assert rel.effect is Effect.AMBIGUOUS
    orphan = result.lineage.dataset(rel.source.dataset_id)
    assert orphan.kind is DatasetKind.PSEUDO_TABLE


def test_schema_places_columns_among_several_tables() -> None:
    schema = {"t1": {"a": "int"}, "t2": {"b": "int"}}
    assert e2e_lines("insert into t select a, b from t1, t2", schema=schema) == {
        "t1.a -> fdd -> t.a",
        "t2.b -> fdd -> t.b",
    }


def test_correlated_subquery_and_exists() -> None:
    sql = "insert into t select a from s where exists (select 1 from u where u.k = s.k and u.f > 0)"
    lines = e2e_lines(sql)
    assert {"s.a -> fdd -> t.a", "u.f -> fdr -> t.PseudoRows", "s.k -> fdr -> t.PseudoRows"} <= lines


def test_lateral_alias_reference() -> None:
    assert e2e_lines("insert into t select a + 1 as x, x * 2 as y from s", "snowflake") == {
        "s.a -> fdd -> t.x",
        "s.a -> fdd -> t.y",
    }


def test_join_relation_and_using() -> None:
    result = extract_sql_lineage("select a.v from a join b on a.k = b.k join c using (z)")
    lin = result.lineage
    joins = [(r.source.dataset_id, r.target.dataset_id) for r in lin.relations if r.type is RelationType.JOIN]
    assert joins == [("table:a", "table:b")]
    fdr = {r.source.dataset_id for r in lin.relations if r.clause_type is ClauseType.JOIN}
    assert fdr == {"table:a", "table:b", "table:c"}


def test_default_db_qualifies_tables() -> None:
    assert e2e_lines("insert into t select a from s", default_db="dw") == {"dw.s.a -> fdd -> dw.t.a"}


def test_column_spelling_is_shared_across_statements() -> None:
    lin = extract_sql_lineage("select SAL from emp; select sal from emp").lineage
    assert [c.name for c in lin.dataset("table:emp").columns] == ["SAL"]


def test_alter_table_rename_and_swap() -> None:
    lin = extract_sql_lineage("alter table db.t2 rename to t3").lineage
    assert relation_lines(lin) == ["db.t2.PseudoRows -> fdd -> db.t3.PseudoRows"]
    lin = extract_sql_lineage("alter table a swap with b", "snowflake").lineage
    assert relation_lines(lin) == [
        "a.PseudoRows -> fdd -> b.PseudoRows",
        "b.PseudoRows -> fdd -> a.PseudoRows",
    ]


@pytest.mark.parametrize(
    ("dialect", "sql"),
    [
        ("spark", "insert overwrite table t select `a` from s"),
        ("hive", "insert into table t select a from s"),
        ("ansi", 'insert into t select "a" from s'),
        ("snowflake", "insert into t select a from s qualify row_number() over (order by a) = 1"),
        ("bigquery", "insert into `p.d.t` (a) select a from `p.d.s`"),
        ("tsql", "insert into t select top 10 [a] from s"),
        ("oracle", "insert into t select a from s where rownum < 10"),
        ("postgres", "insert into t select a::int from s"),
        ("mysql", "insert into t select `a` from s limit 1"),
        ("teradata", "insert into t sel a from s"),
        (None, "insert into t select a from s"),
    ],
)
def test_dialects(dialect: str | None, sql: str) -> None:
    result = extract_sql_lineage(sql, dialect)
    assert result.ok, [str(p) for p in result.problems]
    e2e = end_to_end(result.lineage)
    assert any(r.source.column == "a" and r.type is RelationType.FDD for r in e2e.relations)


def test_unknown_dialect_is_a_clear_error() -> None:
    with pytest.raises(ExtractionError, match="unknown SQL dialect"):
        extract_sql_lineage("select 1", "no-such-dialect")


# -- isolation, positions, budget, determinism -----------------------------------------------------------

FIVE = """insert into t1 select a from s1;
insert into t2 select 'x;y' as b /* ; */ from s2; -- ; comment
insert into t3 select from where;
insert into t4
  select d from s4;
insert into t5 select e from s5
"""


def test_third_of_five_broken_keeps_the_other_four() -> None:
    result = extract_sql_lineage(FIVE, file="five.sql")
    (problem,) = result.problems
    assert (problem.file, problem.statement_index, problem.line, problem.column) == ("five.sql", 3, 3, 28)
    assert problem.kind == "parse"
    assert problem.severity is Severity.ERROR
    assert str(problem).startswith("five.sql:3:28: statement 3 error: cannot parse")
    targets = {r.target.dataset_id for r in end_to_end(result.lineage).relations}
    assert targets == {"table:t1", "table:t4", "table:t5"}  # t2 gets a constant only
    assert sorted(p.statement_index or 0 for p in result.lineage.processes) == [1, 2, 4, 5]
    t4 = next(p for p in result.lineage.processes if p.statement_index == 4)
    assert t4.span is not None
    assert (t4.span.line, t4.span.column, t4.span.end_line) == (4, 1, 5)


def test_split_keeps_semicolons_in_strings_and_comments() -> None:
    chunks = split_statements(FIVE, resolve_dialect(None))
    assert len(chunks) == 5
    assert FIVE[chunks[1].start : chunks[1].end] == "insert into t2 select 'x;y' as b /* ; */ from s2"


def test_unterminated_string_only_costs_its_statement() -> None:
    sql = "insert into t select a from s;\nselect 'oops from u"
    result = extract_sql_lineage(sql)
    (problem,) = result.problems
    assert (problem.statement_index, problem.line, problem.kind) == (2, 2, "parse")
    assert relation_lines(end_to_end(result.lineage)) == ["s.a -> fdd -> t.a"]


def test_time_budget_reports_a_timeout_per_statement() -> None:
    result = extract_sql_lineage("select a from t; select b from u", time_budget_s=0.0)
    assert [(p.kind, p.statement_index) for p in result.problems] == [("timeout", 1), ("timeout", 2)]
    assert not result.lineage.relations


def test_cooperative_check_raises_once_the_deadline_passed() -> None:
    text = "select 1"
    state = ScriptState(schema=SchemaIndex(), dialect=resolve_dialect(None), text=text, lines=LineIndex(text))
    ctx = StatementContext(state, index=1, start=0, end=len(text), deadline=time.monotonic() - 1)

    def tick_many() -> None:
        for _ in range(64):
            ctx.check()

    with pytest.raises(StatementTimeout):
        tick_many()


def test_same_input_gives_byte_identical_json() -> None:
    schema = {"s": {"a": "int", "b": "int"}, "u": {"k": "int", "c": "int"}}
    sql = FIVE + ";\ncreate view v as with w as (select * from s) select w.a, u.c from w join u on w.a = u.k"
    first = extract_sql_lineage(sql, None, schema).lineage.to_json()
    second = extract_sql_lineage(sql, None, dict(reversed(list(schema.items())))).lineage.to_json()
    assert first == second
    assert Lineage.model_validate_json(first).to_json() == first


def test_fast_construction_matches_the_validators() -> None:
    """The builder skips per-object validation; what it builds must equal what validation would give."""
    from atlas_bridge.model import Dataset, Relation

    lin = extract_sql_lineage(FIVE + ";\nselect k, sum(v) over (partition by p) from t group by k").lineage
    for ds in lin.datasets:
        assert Dataset.model_validate(ds.model_dump()) == ds
    for rel in lin.relations:
        assert Relation.model_validate(rel.model_dump(exclude={"flow"})) == rel


def test_tsql_go_lines_end_batches() -> None:
    sql = "insert into t select a from s\nGO\ninsert into u select go from w\n  go 2\nselect 1"
    chunks = split_statements(sql, resolve_dialect("tsql"))
    assert [sql[c.start : c.end] for c in chunks] == [
        "insert into t select a from s",
        "insert into u select go from w",
        "select 1",
    ]
    assert e2e_lines(sql, "tsql") == {"s.a -> fdd -> t.a", "w.go -> fdd -> u.go"}


def test_orphan_columns_spelled_differently_in_two_statements() -> None:
    result = extract_sql_lineage("select level from a, b;\nselect LEVEL from c, d")
    orphans = [d for d in result.lineage.datasets if d.kind is DatasetKind.PSEUDO_TABLE]
    assert [c.name for c in orphans[0].columns] == ["level"]
    assert len(result.problems) == 2


def test_a_statement_that_breaks_the_merge_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    """Safety net for bugs of ours: a statement whose graph does not merge is dropped with a problem."""
    from sqlglot import exp

    from atlas_bridge.extractors.sql import registry
    from atlas_bridge.extractors.sql.builder import GraphBuilder

    def dangling(stmt: exp.Expr, ctx: StatementContext) -> None:
        ctx.graph.add(RelationType.FDD, ("table:nowhere", "x"), ("table:nothing", "y"))

    monkeypatch.setitem(registry._HANDLERS, exp.Drop, dangling)
    monkeypatch.setattr(GraphBuilder, "finish", lambda self, spelling: None)
    result = extract_sql_lineage(
        "insert into t select a from s;\ndrop table z;\ninsert into u select b from v"
    )
    assert [(p.kind, p.statement_index) for p in result.problems] == [("internal", 2)]
    assert set(relation_lines(end_to_end(result.lineage))) == {"s.a -> fdd -> t.a", "v.b -> fdd -> u.b"}


def test_window_aggregates_are_not_grouped_aggregates() -> None:
    lin = extract_sql_lineage(
        "select sum(v) over (partition by p) s, lag(x) over (order by o) l from t"
    ).lineage
    into = {(r.source.column, r.target.column): r for r in lin.relations}
    assert into[("v", "s")].effect is Effect.AGGREGATION
    assert into[("x", "l")].effect is Effect.MODIFIED_COPY
    assert ("PseudoRows", "s") not in into  # no GROUP BY-less aggregate: the window is the group


def test_grouped_window_over_an_aggregate() -> None:
    lin = extract_sql_lineage("select k, sum(sum(v)) over (partition by k) s from t group by k").lineage
    kinds = {
        (r.source.column, r.target.column, r.clause_type) for r in lin.relations if r.type is RelationType.FDR
    }
    assert ("k", "s", ClauseType.GROUP_BY) in kinds
    assert ("k", "s", ClauseType.WINDOW) in kinds


def test_long_union_chain_is_one_resultset_and_does_not_recurse() -> None:
    union = " union all ".join(f"select a{i} from t{i}" for i in range(1500))
    result = extract_sql_lineage(f"insert into x {union}")
    assert result.ok
    unions = [d for d in result.lineage.datasets if d.sub_type == "select_union"]
    assert len(unions) == 1
    assert len(end_to_end(result.lineage).relations) == 1500


def test_star_replace_is_a_modified_copy() -> None:
    schema = {"s": {"a": "int", "b": "int"}}
    lin = extract_sql_lineage(
        "insert into t select * replace (a + b as a) from s", "bigquery", schema
    ).lineage
    into_rs = {
        (r.source.column, r.target.column): r
        for r in lin.relations
        if r.target.dataset_id.startswith("resultset")
    }
    assert into_rs[("b", "a")].effect is Effect.MODIFIED_COPY
    assert into_rs[("b", "a")].transform == "a + b"
    assert into_rs[("b", "b")].effect is Effect.EXACT_COPY


def test_very_long_expressions_do_not_recurse() -> None:
    terms = " and ".join(f"c{i} = 1" for i in range(3000))
    result = extract_sql_lineage(f"insert into x select a from t where {terms}")
    assert result.ok
    restricting = {
        r.source.column for r in end_to_end(result.lineage).relations if r.type is RelationType.FDR
    }
    assert len(restricting) == 3000


def test_output_does_not_depend_on_hash_seed() -> None:
    """Byte-identical JSON across processes with different hash seeds (no set-order leaks)."""
    sql = (Path(__file__).parent / "data" / "sql" / "snowflake_views.sql").read_text(encoding="utf-8")
    script = (
        "import sys; from atlas_bridge import extract_sql_lineage as x; "
        "sys.stdout.write(x(sys.stdin.read(), 'snowflake').lineage.to_json())"
    )
    outs = [
        subprocess.run(
            [sys.executable, "-c", script],
            input=sql,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    ]
    assert outs[0] == outs[1]
    assert outs[0] == extract_sql_lineage(sql, "snowflake").lineage.to_json()


def test_freeze_orders_and_deduplicates_relations_that_differ_only_by_span() -> None:
    """The builder groups relations on their sort key without the span and orders a group by span text
    (``10:1`` before ``9:1``), keeping the last of equal ones: as the validated Lineage does."""
    from atlas_bridge.extractors.sql.builder import DatasetBuilder, RelationBuilder, ScriptGraph
    from atlas_bridge.model import Span

    graph = ScriptGraph()
    for ds_id in ("table:s", "table:t"):
        ds = DatasetBuilder(id=ds_id, kind=DatasetKind.TABLE, name=ds_id[6:])
        ds.column("a")
        graph.datasets[ds_id] = ds

    def span(line: int) -> Span:
        return Span(line=line, column=1, end_line=line, end_column=2)

    for sp, effect in [
        (span(9), Effect.EXACT_COPY),
        (span(10), Effect.EXACT_COPY),
        (None, Effect.EXACT_COPY),
        (span(9), Effect.MODIFIED_COPY),  # equal to the first but for its effect: the last one wins
    ]:
        graph.relations.append(
            RelationBuilder(RelationType.FDD, ("table:s", "a"), ("table:t", "a"), effect=effect, span=sp)
        )
    frozen = graph.freeze()
    validated = Lineage.model_validate_json(frozen.model_dump_json())
    assert validated == frozen
    assert [(str(r.span) if r.span else "", r.effect) for r in frozen.relations] == [
        ("", Effect.EXACT_COPY),
        ("10:1-10:2", Effect.EXACT_COPY),
        ("9:1-9:2", Effect.MODIFIED_COPY),
    ]
