"""The command line as a new user meets it: addresses, unreachable or wrong Atlases, the lineage page from
any folder of payloads, ``lineage`` reading inputs as ``scan`` does, and what the terminal shows.

Faults of a server are played by a real HTTP server on 127.0.0.1 (``atlas_stub.http``); the start-up of
a scan is watched in a real child process.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click
import pytest
from atlas_stub.http import Fault, FaultServer
from click.testing import CliRunner

from atlas_bridge.atlas import client as client_module
from atlas_bridge.atlas.client import AtlasClient, RetryPolicy
from atlas_bridge.atlas.sink import FileSink, make_sink
from atlas_bridge.cli import cli
from atlas_bridge.config import Settings
from atlas_bridge.errors import AtlasUnavailableError

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = (
    "CREATE TABLE sales.orders (id INT, amount DECIMAL(10,2), status STRING);\n"
    "INSERT INTO marts.big_orders SELECT id, amount FROM sales.orders WHERE status = 'paid';\n"
)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _estate(tmp_path: Path) -> Path:
    folder = tmp_path / "estate"
    folder.mkdir()
    (folder / "load.sql").write_text(SCRIPT, encoding="utf-8")
    return folder


def _fast_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "BACKOFF_S": "0",
        "RETRIES": "1",
        "CONNECT_TIMEOUT_S": "1",
        "READ_TIMEOUT_S": "2",
        "GIVE_UP_AFTER_S": "5",
    }.items():
        monkeypatch.setenv(f"ATLAS_BRIDGE_{key}", value)
    monkeypatch.delenv("ATLAS_BRIDGE_REST_ADDRESS", raising=False)
    monkeypatch.delenv("ATLAS_CONF", raising=False)


def _entities(folder: Path) -> set[str]:
    names: set[str] = set()
    for path in folder.rglob("*-entities.json"):
        for e in json.loads(path.read_text(encoding="utf-8"))["entities"]:
            names.add(e["attributes"]["qualifiedName"])
    return names


# --- addresses -----------------------------------------------------------------------------------------


def test_scan_refuses_an_address_that_is_no_atlas_and_makes_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["scan", str(_estate(tmp_path)), "--to", "kafka://broker:9092"])
    assert result.exit_code == 2, result.output
    assert "not an Atlas address" in result.output
    assert "--to kafka" in result.output  # the hint
    assert not (tmp_path / "kafka:").exists()


def test_scan_refuses_two_different_atlas_addresses(tmp_path: Path) -> None:
    args = ["scan", str(_estate(tmp_path)), "--to", "http://a:21000", "--atlas", "http://b:21000"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert "two Atlas addresses" in result.output


@pytest.mark.spark
@pytest.mark.usefixtures("spark")
def test_scan_to_an_http_address_sends_there_with_the_user_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It once wrote into a folder named ``http:``, exited 0 and reported "1 sent"."""
    _fast_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATLAS_BRIDGE_PASSWORD", "s3cret")
    with FaultServer() as srv:
        srv.stub.require_auth("analyst", "s3cret")
        args = ["scan", str(_estate(tmp_path)), "--to", srv.url, "--user", "analyst", "--out", "out"]
        result = CliRunner().invoke(cli, args)
        stored = {e["attributes"].get("qualifiedName") for e in srv.stub.entities.values()}
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "http:").exists()
    assert "marts.big_orders@primary" in stored


# --- Atlas unreachable, silent, or not an Atlas ----------------------------------------------------------


def test_unreachable_atlas_is_one_clear_line_said_before_spark_starts(tmp_path: Path) -> None:
    """A real scan in a child process: the line comes first, before any Spark or extraction output."""
    port = _closed_port()
    env = {
        **os.environ,
        "ATLAS_BRIDGE_RETRIES": "0",
        "ATLAS_BRIDGE_CONNECT_TIMEOUT_S": "1",
        "ATLAS_BRIDGE_LOG_LEVEL": "INFO",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("ATLAS_CONF", None)
    cmd = [sys.executable, "-m", "atlas_bridge", "scan", str(_estate(tmp_path)), "--master", "local[1]"]
    cmd += ["--to", f"http://127.0.0.1:{port}", "--out", str(tmp_path / "out")]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True, text=True
    )
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "cannot reach Atlas" in line:
                found.set()
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert found.wait(60), "".join(lines)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    said = lines[-1]
    assert said.startswith(f"error: cannot reach Atlas at http://127.0.0.1:{port}: connection refused"), said
    assert f"kept in {tmp_path / 'out' / 'unsent'}" in said
    before = "".join(lines[:-1])
    assert "extract" not in before, before
    assert "Spark" not in before, before
    assert "Max retries" not in said
    assert "HTTPConnection" not in said


def test_retries_say_what_they_are_waiting_for(caplog: pytest.LogCaptureFixture) -> None:
    port = _closed_port()
    client = AtlasClient(f"http://127.0.0.1:{port}", retries=2, backoff=0.01, timeout=(1, 1))
    with caplog.at_level(logging.WARNING, "atlas_bridge.atlas.client"), pytest.raises(AtlasUnavailableError):
        client.get_typedef_headers()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said
    assert said[0].startswith(f"cannot reach Atlas at http://127.0.0.1:{port}: connection refused")
    assert "retry 1 of 2 in" in said[0]
    assert "retry 2 of 2 in" in said[1]


def test_a_silent_server_is_told_within_seconds(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It once said nothing for 120 s."""
    monkeypatch.setattr(client_module, "SLOW_NOTICE_S", 0.5)
    with FaultServer() as srv:
        srv.add(Fault("silent", times=None))
        policy = RetryPolicy(deadline_s=3.0, give_up_after_s=3.0)
        client = AtlasClient(srv.url, retries=0, backoff=0, policy=policy, timeout=(1.0, 10.0))
        started = time.time()
        with (
            caplog.at_level(logging.WARNING, "atlas_bridge.atlas.client"),
            pytest.raises(AtlasUnavailableError),
        ):
            client.get_typedef_headers()
    notices = [r for r in caplog.records if "still waiting for Atlas" in r.getMessage()]
    assert len(notices) == 1
    assert notices[0].created - started < 2.0
    assert srv.url in notices[0].getMessage()


@pytest.mark.spark
@pytest.mark.usefixtures("spark")
def test_a_404_keeps_the_batches_in_unsent_and_says_to_check_the_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fast_env(monkeypatch)
    with FaultServer() as srv:
        srv.add(Fault("status", status=404, body="<html>Not Found</html>", times=None))
        out = tmp_path / "out"
        result = CliRunner().invoke(
            cli, ["scan", str(_estate(tmp_path)), "--atlas", srv.url, "--out", str(out)]
        )
    assert result.exit_code == 1, result.output
    assert "check the address" in result.output
    assert "marts.big_orders@primary" in _entities(out / "unsent")
    assert f"finish with: atlas-bridge push {out / 'unsent'}" in result.output


# --- where the hook's output goes, and the page of any folder -------------------------------------------


def test_with_no_atlas_the_hooks_sink_says_once_where_the_lineage_went(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ATLAS_BRIDGE_REST_ADDRESS", raising=False)
    monkeypatch.delenv("ATLAS_CONF", raising=False)
    folder = tmp_path / "hook-out"
    sink = make_sink(Settings.load(output_dir=folder))
    assert isinstance(sink, FileSink)
    with caplog.at_level(logging.WARNING, "atlas_bridge.atlas.sink"):
        for i in range(3):
            sink.emit({"entities": [{"typeName": "DataSet", "attributes": {"qualifiedName": f"t{i}"}}]})
    said = [r.getMessage() for r in caplog.records if str(folder) in r.getMessage()]
    assert len(said) == 1, said
    assert f"atlas-bridge push {folder}" in said[0]
    assert f"atlas-bridge page {folder}" in said[0]


def _table(qn: str) -> dict[str, Any]:
    return {"typeName": "atlas_bridge_table", "guid": "-1", "attributes": {"qualifiedName": qn, "name": qn}}


def test_page_draws_any_folder_of_payloads(tmp_path: Path) -> None:
    unsent = tmp_path / "out" / "unsent"
    FileSink(unsent).emit({"entities": [_table("sales.orders@primary")]})
    spool = tmp_path / "spool"
    FileSink(spool / "overflow-1-abc").emit({"entities": [_table("marts.big_orders@primary")]})
    (spool / "notes.txt").write_text("not a batch", encoding="utf-8")
    page = tmp_path / "page.html"
    result = CliRunner().invoke(cli, ["page", str(unsent), str(spool), "-o", str(page)])
    assert result.exit_code == 0, result.output
    html = page.read_text(encoding="utf-8")
    assert "sales.orders" in html
    assert "marts.big_orders" in html
    empty = CliRunner().invoke(cli, ["page", str(tmp_path / "out" / "unsent" / ".."), "-o", str(page)])
    assert empty.exit_code == 0  # the parent holds unsent/: found at any depth
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    none = CliRunner().invoke(cli, ["page", str(nothing), "-o", str(tmp_path / "x.html")])
    assert none.exit_code == 1
    assert "nothing to draw" in none.output


# --- lineage reads inputs as scan does --------------------------------------------------------------------


def _lineage(*args: str) -> Any:
    return CliRunner().invoke(cli, ["lineage", *args])


def test_lineage_skips_a_binary_file_with_one_warning(tmp_path: Path) -> None:
    binary = tmp_path / "dump.sql"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    good = tmp_path / "good.sql"
    good.write_text(SCRIPT, encoding="utf-8")
    result = _lineage(str(binary), str(good))
    assert result.exit_code == 0, result.output
    assert result.output.count(str(binary)) == 1
    assert f"{binary}: warning: skipped, binary content (not text)" in result.output
    assert "\x7fELF" not in result.output


def test_lineage_takes_an_unknown_dialect_line_as_an_error(tmp_path: Path) -> None:
    script = tmp_path / "x.sql"
    script.write_text("-- dialect: hivesql\n" + SCRIPT, encoding="utf-8")
    result = _lineage(str(script))
    assert result.exit_code == 1
    assert "unknown SQL dialect 'hivesql'" in result.output


def test_lineage_honours_a_scripts_dialect_line(tmp_path: Path) -> None:
    script = tmp_path / "x.sql"
    script.write_text("-- dialect: tsql\nINSERT INTO b SELECT [a] FROM c;\n", encoding="utf-8")
    result = _lineage(str(script))
    assert result.exit_code == 0, result.output
    assert "c.a -> direct -> b.a" in result.output


def test_lineage_reads_a_query_log_as_scan_does() -> None:
    log = ROOT / "examples" / "warehouse" / "logs" / "analyst_queries.jsonl"
    result = _lineage(str(log))
    assert result.exit_code == 0, result.output
    assert "-> direct -> sandbox.top_products.units" in result.output
    assert "STRUCT" not in result.output  # once read as one SQL script of JSON


def test_lineage_still_reads_a_file_named_otherwise_as_sql(tmp_path: Path) -> None:
    script = tmp_path / "job.q"
    script.write_text("INSERT INTO b SELECT a FROM c;\n", encoding="utf-8")
    result = _lineage(str(script))
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "c.a -> direct -> b.a"


def test_parse_errors_quote_the_offending_token(tmp_path: Path) -> None:
    script = tmp_path / "bad.sql"
    script.write_text("SELECT a FRM t;\n", encoding="utf-8")
    result = _lineage(str(script))
    assert result.exit_code == 1
    assert "near 't'" in result.output
    assert "<class" not in result.output


def test_text_output_says_direct_and_indirect(tmp_path: Path) -> None:
    script = tmp_path / "x.sql"
    script.write_text(SCRIPT, encoding="utf-8")
    result = _lineage(str(script))
    lines = result.output.splitlines()
    assert "sales.orders.amount -> direct -> marts.big_orders.amount" in lines
    assert "sales.orders.status -> indirect -> marts.big_orders (rows)" in lines
    assert not any(word in result.output for word in ("fdd", "fdr", "PseudoRows"))
    table = _lineage("--level", "table", str(script)).output
    assert "fdr" not in table


def test_help_texts_have_no_double_backticks_and_name_the_default_dialect() -> None:
    def commands(
        group: click.Group, path: tuple[str, ...] = ()
    ) -> list[tuple[tuple[str, ...], click.Command]]:
        out: list[tuple[tuple[str, ...], click.Command]] = []
        for name, cmd in group.commands.items():
            out.append(((*path, name), cmd))
            if isinstance(cmd, click.Group):
                out.extend(commands(cmd, (*path, name)))
        return out

    for path, _cmd in commands(cli):
        text = CliRunner().invoke(cli, [*path, "--help"]).output
        assert "``" not in text, path
    for name in ("scan", "lineage"):
        text = " ".join(CliRunner().invoke(cli, [name, "--help"]).output.split())
        assert "default: ansi" in text, name


def test_sqlglot_warnings_stay_off_the_terminal(tmp_path: Path) -> None:
    script = tmp_path / "x.sql"
    script.write_text("VACUUM t;\nINSERT INTO b SELECT a FROM c;\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "atlas_bridge", "lineage", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "sqlglot" not in done.stderr
    assert "unsupported syntax" not in done.stderr
    assert done.stdout.strip() == "c.a -> direct -> b.a"


# --- what a scan prints -----------------------------------------------------------------------------------


@pytest.mark.spark
def test_a_scan_prints_no_spark_start_up_lines(tmp_path: Path) -> None:
    """A fresh process (its own JVM): Spark's and the JVM's start-up notices do not reach the terminal."""
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("ATLAS_BRIDGE_REST_ADDRESS", "ATLAS_CONF")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "atlas_bridge",
            "scan",
            str(_estate(tmp_path)),
            "--master",
            "local[1]",
            "--to",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for noise in ("Setting default log level", "Using incubator modules", "sc.setLogLevel", "of about ?"):
        assert noise not in done.stderr, done.stderr
    assert (out / "summary.json").is_file()


def test_pytest_q_prints_no_accuracy_lines() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(ROOT / "tests" / "test_sql_accuracy.py") + "::test_scores_by_group",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stdout
    assert "accuracy group" not in done.stdout
