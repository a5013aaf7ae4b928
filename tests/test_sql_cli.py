"""``atlas-bridge lineage`` on SQL files: text/json, column/table level, problems and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from atlas_bridge.cli import cli
from atlas_bridge.model import Lineage

SCRIPT = """create view v1 as select f1 from t2;
select from where;
insert into t3 select a, b from t4 where c > 1;
"""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["lineage", *args])
    return result.exit_code, result.stdout, result.stderr


def write(tmp_path: Path, text: str, name: str = "script.sql") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_text_end_to_end_with_a_broken_statement(tmp_path: Path) -> None:
    path = write(tmp_path, SCRIPT)
    code, out, err = run(str(path))
    assert code == 1
    assert out.splitlines() == [
        "t2.f1 -> direct -> v1.f1",
        "t4.a -> direct -> t3.a",
        "t4.b -> direct -> t3.b",
        "t4.c -> indirect -> t3 (rows)",
    ]
    assert err.splitlines() == [
        f"{path}:2:13: statement 2 error: cannot parse: Expected table name but got 'where'"
    ]


def test_chain_shows_resultsets(tmp_path: Path) -> None:
    code, out, _ = run("--chain", str(write(tmp_path, "create view v1 as select f1 from t2")))
    assert code == 0
    assert out.splitlines() == ["RS-1.f1 -> direct -> v1.f1", "t2.f1 -> direct -> RS-1.f1"]


def test_table_level_text_and_json(tmp_path: Path) -> None:
    path = write(tmp_path, "create view v1 as select f1 from t2;\nalter table t2 rename to t3;")
    code, out, _ = run("--level", "table", str(path))
    assert code == 0
    assert out.splitlines() == ["t2 -> process:alter_table_rename -> t3", "t2 -> process:create_view -> v1"]
    code, out, _ = run("--level", "table", "--format", "json", str(path))
    edges = json.loads(out)["edges"]
    assert {(e["source"], e["target"]) for e in edges} == {("table:t2", "table:v1"), ("table:t2", "table:t3")}


def test_json_is_the_canonical_model(tmp_path: Path) -> None:
    code, out, _ = run("--format", "json", str(write(tmp_path, "insert into t select a from s")))
    assert code == 0
    lineage = Lineage.model_validate_json(out)
    assert lineage.to_json() == out
    assert any(d.name == "RS-1" for d in lineage.datasets)  # the full chain, not end to end


def test_schema_dialect_and_default_db(tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"dw": {"s": {"x": "int", "y": "int"}}}), encoding="utf-8")
    path = write(tmp_path, "insert overwrite table t select * from s")
    code, out, _ = run("--dialect", "hive", "--schema", str(schema), "--default-db", "dw", str(path))
    assert code == 0
    assert out.splitlines() == ["dw.s.x -> direct -> dw.t.x", "dw.s.y -> direct -> dw.t.y"]


def test_several_files_merge_and_warnings_do_not_fail(tmp_path: Path) -> None:
    a = write(tmp_path, "insert into t select a from s1, s2", "a.sql")
    b = write(tmp_path, "insert into u select x from t", "b.sql")
    code, out, err = run(str(a), str(b))
    assert code == 0
    assert "warning: column 'a' cannot be placed" in err
    assert "t.x -> direct -> u.x" in out.splitlines()


def test_bad_schema_file_is_a_usage_error(tmp_path: Path) -> None:
    schema = write(tmp_path, "{not json", "schema.json")
    code, _, err = run("--schema", str(schema), str(write(tmp_path, "select 1")))
    assert code == 2
    assert "--schema" in err


def test_sqlflow_xml_output(tmp_path: Path) -> None:
    code, out, _ = run("--format", "sqlflow-xml", str(write(tmp_path, "create view v1 as select f1 from t2")))
    assert code == 0
    assert out.lstrip().startswith("<?xml")
    assert "v1" in out
