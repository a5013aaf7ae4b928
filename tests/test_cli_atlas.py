"""``atlas-bridge typedefs register|diff|export`` and ``atlas-bridge push`` against the stub."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from atlas_stub import AtlasStub
from click.testing import CliRunner

from atlas_bridge.atlas.sink import FileSink
from atlas_bridge.atlas.typedefs import load_typedefs
from atlas_bridge.cli import cli

SECRET = "cli-Secret-pw"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _atlas(stub: AtlasStub) -> list[str]:
    return ["--atlas", stub.base_url]


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATLAS_BRIDGE_BACKOFF_S", "0")
    monkeypatch.setenv("ATLAS_BRIDGE_RETRIES", "1")


def test_typedefs_export(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["typedefs", "export"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == load_typedefs()
    out = tmp_path / "model.json"
    assert runner.invoke(cli, ["typedefs", "export", "-o", str(out)]).exit_code == 0
    assert json.loads(out.read_text(encoding="utf-8")) == load_typedefs()
    # into a folder that does not exist yet: made, no traceback
    deep = tmp_path / "models" / "9000-atlas_bridge" / "model.json"
    made = runner.invoke(cli, ["typedefs", "export", "-o", str(deep)])
    assert made.exit_code == 0, made.output
    assert json.loads(deep.read_text(encoding="utf-8")) == load_typedefs()
    # where a file cannot be written: a message, not a traceback
    blocked = runner.invoke(cli, ["typedefs", "export", "-o", str(out / "x.json")])  # out is a file
    assert blocked.exit_code == 1
    assert "cannot write" in blocked.output
    assert blocked.exc_info is None or blocked.exc_info[0] is SystemExit


@pytest.mark.usefixtures("fast_retries")
def test_typedefs_diff_then_register_twice(runner: CliRunner, atlas_stub: AtlasStub) -> None:
    ours = sorted(d["name"] for defs in load_typedefs().values() for d in defs)
    diff = runner.invoke(cli, ["typedefs", "diff", *_atlas(atlas_stub)])
    assert diff.exit_code == 0, diff.output
    assert f"create: {', '.join(ours)}" in diff.output
    bodies = runner.invoke(cli, ["typedefs", "diff", *_atlas(atlas_stub), "-o", "-"])
    assert sorted(d["name"] for defs in json.loads(bodies.output)["create"].values() for d in defs) == ours
    assert not atlas_stub.requests_to("POST", "/types/typedefs")  # diff changes nothing

    first = runner.invoke(cli, ["typedefs", "register", *_atlas(atlas_stub)])
    assert first.exit_code == 0, first.output
    assert f"created {len(ours)}, updated 0" in first.output
    assert set(ours) <= set(atlas_stub.typedefs)
    second = runner.invoke(cli, ["typedefs", "register", *_atlas(atlas_stub)])
    assert second.exit_code == 0, second.output
    assert f"created 0, updated 0, unchanged {len(ours)}" in second.output
    assert len(atlas_stub.requests_to("POST", "/types/typedefs")) == 1
    assert not atlas_stub.requests_to("PUT", "/types/typedefs")


@pytest.mark.usefixtures("fast_retries")
def test_push_directory_command(runner: CliRunner, atlas_stub: AtlasStub, tmp_path: Path) -> None:
    atlas_stub.load_typedefs(
        {"entityDefs": [{"name": "t_table", "superTypes": ["DataSet"], "attributeDefs": []}]}
    )
    sink = FileSink(tmp_path)
    for qn in ("a@p", "b@p"):
        sink.emit(
            {
                "entities": [
                    {"typeName": "t_table", "guid": "-1", "attributes": {"qualifiedName": qn, "name": qn}}
                ]
            }
        )
    result = runner.invoke(cli, ["push", str(tmp_path), *_atlas(atlas_stub), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "created 2, updated 0, unchanged 0, failed 0 (2 batches)" in result.output
    again = runner.invoke(cli, ["push", str(tmp_path), *_atlas(atlas_stub), "--no-progress"])
    assert "2 already sent" in again.output
    assert len(atlas_stub.requests_to("POST", "/entity/bulk")) == 2

    sink.emit({"entities": [{"typeName": "nope", "attributes": {"qualifiedName": "x", "name": "x"}}]})
    refused = runner.invoke(cli, ["push", str(tmp_path), *_atlas(atlas_stub), "--no-progress"])
    assert refused.exit_code == 1
    assert "failed 1" in refused.output
    assert "ATLAS-400-00-014" in refused.output


@pytest.mark.usefixtures("fast_retries")
def test_push_when_atlas_is_down(runner: CliRunner, atlas_stub: AtlasStub, tmp_path: Path) -> None:
    FileSink(tmp_path).emit(
        {"entities": [{"typeName": "DataSet", "attributes": {"qualifiedName": "a", "name": "a"}}]}
    )
    atlas_stub.refuse_connections()
    result = runner.invoke(cli, ["push", str(tmp_path), *_atlas(atlas_stub), "--no-progress"])
    assert result.exit_code == 1
    assert "cannot reach Atlas at http://atlas.test:21000" in result.output


def test_no_atlas_configured_is_a_usage_error(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["typedefs", "register"])
    assert result.exit_code == 2
    assert "no Atlas address" in result.output
    missing = runner.invoke(cli, ["typedefs", "diff", "--config", str(tmp_path / "none.properties")])
    assert missing.exit_code == 2
    assert "not found" in missing.output


@pytest.mark.usefixtures("fast_retries")
def test_config_file_and_password_from_env(
    runner: CliRunner, atlas_stub: AtlasStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    props = tmp_path / "atlas-application.properties"
    props.write_text(
        f"atlas.rest.address={atlas_stub.base_url}\natlas.client.username=carol\n", encoding="utf-8"
    )
    atlas_stub.require_auth("carol", SECRET)
    monkeypatch.setenv("ATLAS_BRIDGE_PASSWORD", SECRET)
    result = runner.invoke(cli, ["typedefs", "diff", "--config", str(props)])
    assert result.exit_code == 0, result.output


@pytest.mark.usefixtures("fast_retries")
def test_401_names_the_user_not_the_password(
    runner: CliRunner, atlas_stub: AtlasStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    atlas_stub.require_auth("alice", "other")
    monkeypatch.setenv("ATLAS_BRIDGE_PASSWORD", SECRET)
    result = runner.invoke(cli, ["-vv", "typedefs", "register", *_atlas(atlas_stub), "--user", "alice"])
    assert result.exit_code == 1
    assert "refused the credentials of user 'alice'" in result.output
    assert SECRET not in result.output


@pytest.mark.usefixtures("fast_retries")
def test_password_prompt_only_on_a_terminal(
    runner: CliRunner, atlas_stub: AtlasStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    atlas_stub.require_auth("dave", SECRET)
    args = ["typedefs", "diff", *_atlas(atlas_stub), "--user", "dave"]
    no_tty = runner.invoke(cli, args)
    assert no_tty.exit_code == 1  # no prompt without a terminal: the request goes out without a password
    assert "Atlas password" not in no_tty.output
    monkeypatch.setattr("atlas_bridge.cli.atlas._stdin_is_tty", lambda: True)
    tty = runner.invoke(cli, args, input=f"{SECRET}\n")
    assert tty.exit_code == 0, tty.output
    assert "Atlas password for dave" in tty.output
    assert SECRET not in tty.output
