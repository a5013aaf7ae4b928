"""``atlas-bridge lineage`` with SQLFlow files in and ``--format sqlflow-xml|sqlflow-json`` out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from atlas_bridge.cli import cli
from atlas_bridge.model import Lineage
from atlas_bridge.sqlflow.read import extract_sqlflow_lineage

DATA = Path(__file__).parent / "data" / "sqlflow"


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["lineage", *args])
    return result.exit_code, result.stdout, result.stderr


def _read(path: Path) -> Lineage:
    return extract_sqlflow_lineage(path.read_bytes(), file=str(path)).lineage


@pytest.mark.parametrize("fmt", ["sqlflow-xml", "sqlflow-json"])
@pytest.mark.parametrize(
    "name", ["oracle-insert-all.relationship.1.xml", "oracle-vsal-insertall-fk.graph.json"]
)
def test_sqlflow_in_sqlflow_out(name: str, fmt: str) -> None:
    path = DATA / name
    code, out, err = _run(str(path), "--format", fmt)
    assert code == 0, err
    assert extract_sqlflow_lineage(out).lineage == _read(path)


def test_table_level_xml(tmp_path: Path) -> None:
    code, out, _ = _run(
        str(DATA / "seed000-rename.column-level.xml"), "--format", "sqlflow-xml", "--level", "table"
    )
    assert code == 0
    assert "<column" not in out
    assert out.count("target_id=") == 4  # t2 -> create view -> v1, t2 -> alter table -> t3


def test_sql_in_sqlflow_out() -> None:
    pytest.importorskip("atlas_bridge.extractors.sql")
    from atlas_bridge.extractors.sql import extract_sql_lineage

    path = DATA / "oracle-insert-deptsal.sql"
    code, out, err = _run(str(path), "--dialect", "oracle", "--format", "sqlflow-xml")
    assert code == 0, err
    expected = extract_sql_lineage(path.read_text(encoding="utf-8"), "oracle", file=str(path)).lineage
    assert extract_sqlflow_lineage(out).lineage == expected


def test_text_output_of_a_sqlflow_file() -> None:
    code, out, _ = _run(str(DATA / "seed000-rename.column-level.xml"))
    assert code == 0
    assert out.splitlines() == ["t2 (rows) -> direct -> t3 (rows)", "t2.f1 -> direct -> v1.f1"]


def test_unsafe_and_summary_files_fail_with_a_clear_message(tmp_path: Path) -> None:
    evil = tmp_path / "evil.xml"
    evil.write_text('<!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]><dlineage>&x;</dlineage>')
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"code": 200, "data": {"mode": "summary", "summary": {}}}))
    good = tmp_path / "good.xml"
    shutil.copy(DATA / "seed000-foreign-key.xml", good)
    code, out, err = _run(str(evil), str(summary), str(good))
    assert code == 1
    assert f"{evil}: error: {evil}: refused XML with a document type declaration" in err
    assert f"{summary}: error: {summary}: SQLFlow export is in summary mode" in err
    assert "root:" not in out + err
    assert (
        "masteTable.masterColumn -> direct -> foreignTable.foreignColumn1" in out
    )  # the good file still counts
