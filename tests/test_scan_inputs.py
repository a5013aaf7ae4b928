"""The scanner's inputs and command line under bad input: one bad record, file or option costs itself only.

Inputs under tests/data/scan_inputs/ (one per case); each test fails on the behaviour the bad-input
issue reported (a whole log lost to one record, a binary file parsed as SQL, a dialect refused after
Spark's start-up...).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from atlas_bridge import bridge
from atlas_bridge.bridge import ScanOptions, WorkUnit
from atlas_bridge.cli import cli
from atlas_bridge.errors import ExtractionError
from atlas_bridge.sqlflow.read import extract_sqlflow_lineage

DATA = Path(__file__).parent / "data" / "scan_inputs"


def _unit(path: Path) -> WorkUnit:
    files, notes = bridge.discover_inputs([path])
    assert len(files) == 1, notes
    return WorkUnit(files[0])


def test_a_json_file_of_3000_brackets_is_a_problem_of_that_file_only() -> None:
    result = bridge.extract_unit(_unit(DATA / "brackets.json"), ScanOptions())
    assert result.file.endswith("brackets.json")
    assert [p.kind for p in result.problems] == ["input"]
    assert "SQLFlow JSON: RecursionError" in result.problems[0].message


def test_a_record_with_an_overflowing_time_costs_its_time_only() -> None:
    problems: list[object] = []
    records = list(bridge.read_query_log(_unit(DATA / "overflow_time.jsonl"), ScanOptions(), problems))  # type: ignore[arg-type]
    assert [r.user for r in records] == ["u1", "u2", "u3"]
    assert [r.time_ms is None for r in records] == [False, True, False]
    result = bridge.extract_unit(_unit(DATA / "overflow_time.jsonl"), ScanOptions())
    assert {f"{d.db}.{d.name}" for d in result.lineage.datasets} >= {"s.a", "s.c", "s.d"}


def test_a_csv_field_over_131072_characters_does_not_lose_the_records_after_it() -> None:
    problems: list[object] = []
    records = list(bridge.read_query_log(_unit(DATA / "long_field.csv"), ScanOptions(), problems))  # type: ignore[arg-type]
    assert [r.user for r in records] == ["u1", "u2", "u3"]
    assert problems == []


def test_a_binary_file_named_sql_is_skipped_with_one_note() -> None:
    files, notes = bridge.discover_inputs([DATA])
    assert "binary.sql" not in {Path(f.path).name for f in files}
    binary = [n for n in notes if "binary.sql" in n]
    assert len(binary) == 1
    assert binary[0].endswith("binary.sql: skipped, binary content (not text)")


def test_control_bytes_never_reach_a_problem_message_and_good_statements_keep_lineage() -> None:
    result = bridge.extract_unit(_unit(DATA / "control_bytes.sql"), ScanOptions())
    assert result.problems, "the bad statement is reported"
    for p in result.problems:
        assert not any(ord(c) < 32 and c not in "\t" for c in p.message), p.message
    assert {f"{d.db}.{d.name}" for d in result.lineage.datasets} >= {"s.a", "s.c"}


@pytest.mark.parametrize(
    "data",
    [
        b'{"dbobjs":"x","relationships":5}',
        b'{"dbobjs":[{"id":' + b"1" * 100_000 + b',"name":"t","type":"table"}]}',
        b'<?xml version="1.0" encoding="UTF-7"?><dlineage></dlineage>',
    ],
    ids=["wrong-shapes", "100000-digit-id", "utf-7-xml"],
)
def test_broken_sqlflow_files_raise_the_documented_error_naming_the_file(data: bytes) -> None:
    with pytest.raises(ExtractionError, match=r"^bad\.json: not a readable SQLFlow export: \w+Error") as info:
        extract_sqlflow_lineage(data, file="bad.json")
    assert info.value.file == "bad.json"


def test_an_unknown_dialect_is_a_usage_error_before_anything_starts(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["scan", str(DATA), "--dialect", "nosuch", "--to", str(tmp_path)])
    assert result.exit_code == 2
    assert "unknown SQL dialect 'nosuch'; known: " in result.output
    assert "tsql" in result.output
    assert "sqlserver" in result.output
    assert not (tmp_path / "summary.json").exists()


@pytest.mark.parametrize("option", ["--to", "--out"])
def test_an_output_folder_that_is_a_file_is_a_usage_error(option: str, tmp_path: Path) -> None:
    """``--to FILE`` ended in a FileExistsError traceback, exit 0."""
    taken = tmp_path / "taken"
    taken.write_text("mine\n", encoding="utf-8")
    args = ["scan", str(DATA / "repeated.sql"), option, str(taken)]
    result = CliRunner().invoke(cli, [*args, "--to", str(tmp_path / "out")] if option == "--out" else args)
    assert result.exit_code == 2, result.output
    assert f"{option} {taken}: exists and is not a folder" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert taken.read_text(encoding="utf-8") == "mine\n"


@pytest.mark.parametrize("alias", ["sqlserver", "mssql", "postgresql"])
def test_common_dialect_aliases_are_taken(alias: str, tmp_path: Path) -> None:
    script = tmp_path / "a.sql"
    script.write_text("insert into s.a select x from s.b", encoding="utf-8")
    result = CliRunner().invoke(cli, ["lineage", str(script), "--dialect", alias])
    assert result.exit_code == 0, result.output
    assert "s.b.x -> direct -> s.a.x" in result.output


def test_an_empty_folder_says_so_and_fails_unless_allowed(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(cli, ["scan", str(empty), "--to", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "nothing to scan" in result.output
    result = CliRunner().invoke(cli, ["scan", str(empty), "--to", str(tmp_path / "out"), "--allow-empty"])
    assert result.exit_code == 0


@pytest.mark.spark
def test_identical_statements_are_one_process_and_the_summary_says_so(spark: object, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["scan", str(DATA / "repeated.sql"), "--to", str(tmp_path)])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    payload = [
        e
        for f in sorted(tmp_path.glob("*-entities.json"))
        for e in json.loads(f.read_text())["entities"]
        if e["typeName"] == "atlas_bridge_process"
    ]
    assert summary["processes"] == len(payload) == 1
    assert summary["statements"] == 5
    assert "1 process(es) (from 5 statement(s) that write; identical ones share a process)" in result.output


def _big_script(n: int) -> str:
    lines = ["-- dialect: hive", "USE sales;"]
    for i in range(n):
        lines.append(f"INSERT INTO t{i % 7} SELECT a, b FROM src WHERE c > {i};")
        if i == n - 5:
            lines.append("SELECT ((((a FROM broken;")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_a_big_plain_script_is_cut_at_statement_ends_and_gives_the_same_lineage(
    tmp_path: Path, newline: str
) -> None:
    """Windows line endings too (a CR LF script was one unit: 943 MB and 493 s for 2 MB)."""
    from atlas_bridge.model import merge_lineage

    script = tmp_path / "big.sql"
    script.write_bytes(_big_script(600).replace("\n", newline).encode("utf-8"))
    files, _ = bridge.discover_inputs([script])
    whole = bridge.extract_unit(bridge.WorkUnit(files[0]), ScanOptions())
    units = bridge.plan_units(files, ScanOptions(sql_chunk_bytes=4096))
    assert len(units) > 5
    assert [u.start for u in units[1:]] == [u.end for u in units[:-1]]  # contiguous, nothing lost
    parts = [bridge.extract_unit(u, ScanOptions()) for u in units]
    assert sum(p.statements for p in parts) == whole.statements == 602
    # The same tables read and written, and the same problem at the same line of the file.
    tables = {d.id for d in merge_lineage([p.lineage for p in parts]).datasets if d.id.startswith("table:")}
    assert tables == {d.id for d in whole.lineage.datasets if d.id.startswith("table:")}
    assert len(tables) == 8
    bad = [(p.file, p.line) for part in parts for p in part.problems]
    assert bad == [(w.file, w.line) for w in whole.problems] == [(files[0].name, 599)]


def test_a_script_with_lone_carriage_returns_is_not_cut(tmp_path: Path) -> None:
    """sqlglot ends a line at a lone CR, the pieces' line count does not: line numbers would drift."""
    script = tmp_path / "big.sql"
    script.write_bytes(_big_script(600).replace("\n", "\r").encode("utf-8"))
    files, _ = bridge.discover_inputs([script])
    assert len(bridge.plan_units(files, ScanOptions(sql_chunk_bytes=4096))) == 1


def test_a_procedural_script_is_never_cut() -> None:
    text = "CREATE PROCEDURE p AS BEGIN INSERT INTO a SELECT 1; INSERT INTO b SELECT 2; END;\n" * 200
    assert bridge.split_script(text, 100) == [(0, len(text), 1, "")]


def test_lineage_of_a_big_script_piece_by_piece_is_the_lineage_of_the_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import atlas_bridge.cli.lineage as lineage_cli

    script = tmp_path / "big.sql"
    script.write_text(_big_script(300), encoding="utf-8")
    whole = CliRunner().invoke(cli, ["lineage", str(script)])
    monkeypatch.setattr(lineage_cli, "_PIECE_CHARS", 2048)
    pieces = CliRunner().invoke(cli, ["lineage", str(script)])
    assert whole.exit_code == pieces.exit_code == 1  # the one broken statement
    assert pieces.output == whole.output
    assert f"{script}:299" in pieces.output  # its problem, at its line in the file
    # Printed end to end, each piece is collapsed as it comes (a big script's resultsets are never all held):
    # the same output as collapsing the merged pieces.
    from atlas_bridge.model import merge_lineage

    collapsed = CliRunner().invoke(cli, ["lineage", str(script), "--format", "json", "--end-to-end"])
    kept = lineage_cli._read_sql(script, None, None, None)
    expected = lineage_cli._render(merge_lineage([kept.lineage]), "json", "column", False)
    assert expected in collapsed.output
    assert '"relations"' in expected


class _Discard:
    target = "memory:progress"

    def send(self, b: dict) -> None:  # type: ignore[type-arg]
        return None

    def close(self) -> None:
        pass


@pytest.mark.spark
def test_progress_of_a_big_script_in_pieces_counts_statements_not_partitions(
    spark: object, tmp_path: Path
) -> None:
    script = tmp_path / "big.sql"
    script.write_text(_big_script(600), encoding="utf-8")
    calls: list[tuple[str, int, int]] = []
    summary = bridge.scan(
        [str(script)],
        _Discard(),  # type: ignore[arg-type]
        namespace="progress",
        spark=spark,  # type: ignore[arg-type]
        options=ScanOptions(sql_chunk_bytes=4096, partition_bytes=8192),
        progress=lambda *c: calls.append(c),
    )
    extract = [(d, t) for phase, d, t in calls if phase == "extract"]
    assert summary.extract.partitions > 2  # one script, over several partitions
    assert extract[-1] == (602, 602) == (summary.extract.statements, summary.extract.statements)
    assert all(d <= t for d, t in extract[:-1])
    assert all(
        t == 0 or t >= 100 for _, t in extract
    )  # statements (an estimate until the end), not partitions


def test_the_estimate_of_statements_follows_the_input_bytes_done() -> None:
    from atlas_bridge.bridge.job import statement_progress

    assert statement_progress(150, 1_000, 4_000) == (150, 600)  # a quarter of the bytes: 4x the statements
    assert statement_progress(150, 4_000, 4_000) == (150, 150)  # all done: exact
    assert statement_progress(0, 0, 4_000) == (0, 0)  # nothing finished: no guess


def test_lineage_of_a_file_with_crashing_statements_keeps_the_good_ones_without_a_traceback(
    tmp_path: Path,
) -> None:
    script = tmp_path / "mixed.sql"
    script.write_text(
        "INSERT INTO keep_one (a) SELECT x FROM src_one;\nDATE_SUB(;\nSELECT '\ud800' AS x FROM s;\n"
        "INSERT INTO keep_two (b) SELECT z FROM src_two;\n",
        encoding="utf-8",
        errors="surrogatepass",
    )
    result = CliRunner().invoke(cli, ["lineage", str(script), "--dialect", "mysql"])
    assert result.exit_code == 1, result.output  # the bad statements are errors ...
    assert "Traceback" not in result.output
    assert "src_one.x -> direct -> keep_one.a" in result.output  # ... and their neighbours keep their lineage
    assert "src_two.z -> direct -> keep_two.b" in result.output
    assert f"{script}:2" in result.output


def test_spark_log_config_is_per_user_and_readable() -> None:
    """Another user's copy in the shared temp folder (mode 0600) must not be the one Spark is given."""
    from atlas_bridge.bridge.job import _log4j2

    path = Path(_log4j2("error"))
    assert f"-{os.getuid()}-" in path.name
    assert os.access(path, os.R_OK)
    assert "rootLogger.level = error" in path.read_text(encoding="utf-8")


def test_the_scans_own_local_session_runs_its_jvm_without_c2() -> None:
    """In local mode the executors share the driver's JVM and the cores with the Python workers: C2's
    compiling is CPU taken from them. Elsewhere the JVM keeps its defaults; a configured Spark, its own."""
    from atlas_bridge.bridge.job import driver_java_options

    assert driver_java_options("local[2]", "WARN", configured=False) == "-XX:TieredStopAtLevel=1"
    assert driver_java_options("yarn", "WARN", configured=False) == ""
    assert driver_java_options("local[*]", "WARN", configured=True) == ""
    quiet = driver_java_options("spark://127.0.0.1:7077", "ERROR", configured=False).split(" ")
    assert len(quiet) == 1
    assert quiet[0].startswith("-Dlog4j.configurationFile=")
    assert os.access(quiet[0].split("=", 1)[1], os.R_OK)
    both = driver_java_options("local", "OFF", configured=False).split(" ")
    assert both[0] == "-XX:TieredStopAtLevel=1"
    assert both[1].startswith("-Dlog4j.configurationFile=")


def test_a_configured_spark_keeps_its_jvm_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A site's spark-defaults.conf may set the driver's JVM options: the scan's session leaves them."""
    from atlas_bridge.bridge.job import _spark_configured

    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    assert not _spark_configured()
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "spark-defaults.conf").write_text("spark.driver.extraJavaOptions -Dsite=1\n")
    assert _spark_configured()
    monkeypatch.delenv("SPARK_HOME")
    assert not _spark_configured()
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "elsewhere"))
    assert _spark_configured()


@pytest.mark.parametrize("name", ["ssms_utf16le.sql", "ssms_utf16be.sql", "utf8_bom.sql"])
def test_a_script_saved_as_utf16_or_with_a_utf8_bom_is_read(name: str) -> None:
    """SQL Server Management Studio saves UTF-16 with a byte order mark: it was 'skipped, binary content'."""
    files, notes = bridge.discover_inputs([DATA / name])
    assert notes == []
    result = bridge.extract_unit(WorkUnit(files[0]), ScanOptions(dialect="tsql"))
    assert result.problems == []
    assert result.statements == 2
    assert sorted((p.name, p.span.line if p.span else None) for p in result.lineage.processes) == [
        ("Insert into dbo.café", 4),
        ("Insert into dbo.sales_copy", 2),
    ]


def test_the_lineage_command_reads_a_utf16_script() -> None:
    result = CliRunner().invoke(cli, ["lineage", "--dialect", "tsql", str(DATA / "ssms_utf16be.sql")])
    assert result.exit_code == 0, result.output
    assert "dbo.sales.amount -> direct -> dbo.sales_copy.amount" in result.output
    assert "dbo.clients.name -> direct -> dbo.café.name" in result.output


def _cte_chain(n: int) -> str:
    ctes = ",\n".join(
        ["c0 AS (SELECT a FROM s.src)", *(f"c{i} AS (SELECT a FROM c{i - 1})" for i in range(1, n))]
    )
    tail = "INSERT INTO s.ok SELECT a FROM s.src;\n"
    return f"INSERT INTO s.dst (a)\nWITH {ctes}\nSELECT a FROM c{n - 1};\n{tail}"


def test_a_chain_of_500_ctes_is_converted_end_to_end(tmp_path: Path) -> None:
    """The end-to-end walk recursed once per CTE: RecursionError in the task, the whole scan lost."""
    from atlas_bridge.bridge.extract import decode_unit, extract_partition
    from atlas_bridge.graph import end_to_end

    script = tmp_path / "ctes.sql"
    script.write_text(_cte_chain(500), encoding="utf-8")
    unit = _unit(script)
    result = bridge.extract_unit(unit, ScanOptions())
    assert result.problems == []
    edges = {(r.source.dataset_id, r.target.dataset_id) for r in end_to_end(result.lineage).relations}
    assert edges == {("table:s.src", "table:s.dst"), ("table:s.src", "table:s.ok")}
    out = dict(extract_partition([unit], ScanOptions()))
    assert json.loads(out["header"])["problems"] == []
    assert len(decode_unit(out["unit"])["process_ids"]) == 2


def test_a_conversion_that_fails_costs_that_unit_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The safety net under the conversion (no real input is known to break it now: a stand-in fault)."""
    import atlas_bridge.graph as graph
    from atlas_bridge.bridge.extract import decode_unit, extract_partition

    good, bad = tmp_path / "good.sql", tmp_path / "bad.sql"
    good.write_text("INSERT INTO s.ok SELECT a FROM s.src;\n", encoding="utf-8")
    bad.write_text("INSERT INTO s.broken SELECT a FROM s.src;\n", encoding="utf-8")
    real = graph.end_to_end

    def end_to_end(lineage: object) -> object:
        if any(d.name == "broken" for d in lineage.datasets):  # type: ignore[attr-defined]
            raise RecursionError("maximum recursion depth exceeded")
        return real(lineage)  # type: ignore[arg-type]

    monkeypatch.setattr(graph, "end_to_end", end_to_end)
    out = list(extract_partition([_unit(bad), _unit(good)], ScanOptions()))
    assert [k for k, _ in out] == ["unit", "unit", "header"]
    assert [len(decode_unit(p)["process_ids"]) for k, p in out if k == "unit"] == [0, 1]
    (problem,) = json.loads(out[-1][1])["problems"]
    assert problem["file"].endswith("bad.sql")
    assert problem["message"].startswith("internal error: its lineage could not be converted: RecursionError")


# -- inputs that cannot be read: a problem of their own, the rest is scanned ------------------------------

_GOOD = "INSERT INTO s.good SELECT a FROM s.src;\n"
_NO_CAPS = ["--inh-caps=-dac_override,-dac_read_search", "--ambient-caps=-dac_override,-dac_read_search"]
_NO_CAPS += ["--bounding-set=-dac_override,-dac_read_search"]


def _estate(root: Path) -> Path:
    """Good scripts beside inputs that cannot be read as root can make them (a link to nothing, a FIFO, a
    file name that is not UTF-8, a statement of 500 CTEs) and those only permissions stop (mode 000)."""
    (root / "sub").mkdir(parents=True)
    (root / "good.sql").write_text(_GOOD, encoding="utf-8")
    (root / "sub" / "ctes.sql").write_text(_cte_chain(500), encoding="utf-8")
    latin = os.path.join(os.fsencode(root), b"caf\xe9.sql")
    with open(latin, "wb") as fh:
        fh.write(b"INSERT INTO s.latin SELECT a FROM s.src;\n")
    (root / "dangling.sql").symlink_to(root / "nowhere.sql")
    os.mkfifo(root / "sub" / "fifo.sql")
    (root / "locked").mkdir()
    (root / "locked" / "x.sql").write_text(_GOOD, encoding="utf-8")
    for name, text in (("noperm.sql", _GOOD), ("noperm.json", '{"dbobjs": []}'), ("noperm.jsonl", "{}")):
        (root / name).write_text(text, encoding="utf-8")
        (root / name).chmod(0)
    (root / "locked").chmod(0)
    return root


def _unprivileged(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``args`` in a process that file permissions stop (as root: without the capabilities that pass them)."""
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: mode 000 does not stop a read")
        args = [setpriv, *_NO_CAPS, *args]
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)


_UNREADABLE = [
    ("est/dangling.sql", "error", "not scanned: a link to nothing"),
    ("est/locked", "error", "folder not scanned: Permission denied"),
    ("est/noperm.json", "error", "not scanned: Permission denied"),
    ("est/noperm.jsonl", "error", "not scanned: Permission denied"),
    ("est/noperm.sql", "error", "not scanned: Permission denied"),
    ("est/sub/fifo.sql", "error", "not scanned: not a regular file"),
    ("est/caf\\xe9.sql", "warning", "file name is not UTF-8: its bytes are shown as \\xNN (caf\\xe9.sql)"),
]


def test_inputs_that_cannot_be_read_are_problems_of_their_own(tmp_path: Path) -> None:
    """Each ended the whole scan with a traceback (an unreadable folder was skipped without a word)."""
    _estate(tmp_path / "est")
    code = (
        "import json; from atlas_bridge import bridge; problems = []\n"
        "files, notes = bridge.discover_inputs(['est'], problems=problems)\n"
        "print(json.dumps([[f.name, f.source] for f in files]))\n"
        "print(json.dumps([[p.file, p.severity.value, p.message] for p in problems]))\n"
    )
    done = _unprivileged([sys.executable, "-c", code], tmp_path)
    assert done.returncode == 0, done.stderr
    files, problems = (json.loads(line) for line in done.stdout.splitlines())
    assert files == [
        ["est/caf\\xe9.sql", "caf\\xe9.sql"],
        ["est/good.sql", "good.sql"],
        ["est/sub/ctes.sql", "sub/ctes.sql"],
    ]
    assert sorted(map(tuple, problems)) == sorted(_UNREADABLE)


@pytest.mark.spark
def test_a_scan_reports_each_unreadable_input_and_delivers_the_rest(tmp_path: Path) -> None:
    """The whole command, in a process permissions stop: the summary is written, exit 1 for the errors."""
    _estate(tmp_path / "est")
    cli_path = Path(sys.executable).parent / "atlas-bridge"
    done = _unprivileged([str(cli_path), "scan", "est", "--to", "out", "--no-progress"], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    problems = summary["errors"] + summary["warnings"]
    assert sorted((p["file"], p["severity"], p["message"]) for p in problems) == sorted(_UNREADABLE)
    entities = [
        e
        for f in sorted((tmp_path / "out").glob("*-entities.json"))
        for e in json.loads(f.read_bytes())["entities"]
    ]
    sources = sorted(
        e["attributes"].get("sourceFile") for e in entities if e["typeName"] == "atlas_bridge_process"
    )
    assert sources == ["caf\\xe9.sql", "good.sql", "sub/ctes.sql", "sub/ctes.sql"]


@pytest.mark.spark
def test_payloads_do_not_depend_on_where_the_scan_runs(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sourceFile`` was relative to the working directory when the input was below it, absolute else: the
    same estate scanned from two places updated every process. It is the path below the scanned folder."""
    estate = tmp_path / "work" / "estate"
    (estate / "marts").mkdir(parents=True)
    (estate / "good.sql").write_text(_GOOD, encoding="utf-8")
    shutil.copy(DATA / "repeated.sql", estate / "marts" / "repeated.sql")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    payloads = []
    for cwd, arg in ((tmp_path / "work", "estate"), (outside, str(estate)), (estate, ".")):
        monkeypatch.chdir(cwd)
        out = tmp_path / f"out{len(payloads)}"
        result = CliRunner().invoke(cli, ["scan", arg, "--to", str(out), "--no-progress"])
        assert result.exit_code == 0, result.output
        payloads.append([f.read_bytes() for f in sorted(out.glob("*-entities.json"))])
    assert payloads[0] == payloads[1] == payloads[2]
    sources = {
        e["attributes"]["sourceFile"]
        for e in json.loads(payloads[0][0])["entities"]
        if e["typeName"] == "atlas_bridge_process"
    }
    assert sources == {"good.sql", "marts/repeated.sql"}
