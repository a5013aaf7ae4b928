"""The switch end to end: real ``spark-submit`` runs of jobs without hook code (subprocesses, ~12 s each).

Each run writes Atlas request bodies with the file sink (no Atlas configured); the test pushes them into
the Atlas stub and reads the lineage back through its lineage API.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from atlas_stub import AtlasStub
from fixtures_spark import _java_available

from atlas_bridge.atlas.client import AtlasClient
from atlas_bridge.atlas.sink import push_directory
from atlas_bridge.atlas.typedefs import register_typedefs

REPO = Path(__file__).resolve().parent.parent
LISTENERS_JOB = Path(__file__).resolve().parent / "data" / "spark_auto" / "listeners_job.py"
NS = "test"
TIMEOUT_S = 300

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark_home() -> Path:
    pyspark = pytest.importorskip("pyspark")
    if not _java_available():
        pytest.skip("no Java runtime for pyspark")
    return Path(pyspark.__file__).resolve().parent


def _env(spark_home: Path, out: Path, **extra: str) -> dict[str, str]:
    """A clean environment: none of the caller's Atlas or Spark-driver variables."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ATLAS_BRIDGE_", "PYSPARK_", "PYTHON_WORKER_FACTORY_")) and k != "ATLAS_CONF"
    }
    env.update(
        SPARK_HOME=str(spark_home),
        PYSPARK_PYTHON=sys.executable,
        ATLAS_BRIDGE_OUTPUT_DIR=str(out),
        ATLAS_BRIDGE_NAMESPACE=NS,
        **extra,
    )
    return env


def _submit(spark_home: Path, args: list[str], env: dict[str, str], cwd: Path, wrap: bool = False) -> str:
    import subprocess

    cmd = [
        str(spark_home / "bin" / "spark-submit"),
        "--master",
        "local[1]",
        "--conf",
        "spark.ui.enabled=false",
    ]
    if wrap:
        cmd = [sys.executable, "-m", "atlas_bridge", "instrument", "--", *cmd]
    proc = subprocess.run(
        [*cmd, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "atlas-bridge: the Spark hook is not active" not in proc.stderr
    return proc.stdout


def _job_line(stdout: str) -> Any:
    """The job's JSON line. spark-submit's Python runner merges the driver's stderr into its stdout, so the
    hook's one note of where the lineage went (on stderr) may come after it."""
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    assert lines, stdout[-2000:]
    return json.loads(lines[-1])


def _upstream(out: Path, type_name: str, qn: str) -> set[str]:
    """Everything upstream of one dataset, after pushing ``out`` into a fresh Atlas stub."""
    with AtlasStub() as stub:
        client = AtlasClient(stub.base_url, retries=0, backoff=0)
        register_typedefs(client)
        report = push_directory(out, client)
        assert not report.failures
        ent = stub.find(type_name, qn)
        assert ent is not None, sorted(
            e["attributes"]["qualifiedName"] for e in stub.active_entities(type_name)
        )
        lin = client.get_lineage(str(ent["guid"]), direction="INPUT", depth=6)
        ents: dict[str, Any] = lin["guidEntityMap"]
        return {
            e["attributes"]["qualifiedName"]
            for e in ents.values()
            if e["typeName"] in ("atlas_bridge_table", "atlas_bridge_path")
        }


def test_instrument_runs_a_plain_example_with_lineage(spark_home: Path, tmp_path: Path) -> None:
    """``atlas-bridge instrument -- spark-submit examples/spark_job_plain.py``: no hook code, full lineage."""
    out, work = tmp_path / "out", tmp_path / "work"
    _submit(
        spark_home,
        [str(REPO / "examples" / "spark_job_plain.py"), str(work)],
        _env(spark_home, out),
        tmp_path,
        wrap=True,
    )
    cents = f"{work / 'out' / 'revenue_cents'}@{NS}"
    assert _upstream(out, "atlas_bridge_path", cents) == {
        cents,
        f"default.revenue_by_customer@{NS}",
        f"default.orders@{NS}",
    }


def test_conf_switch_and_explicit_install_register_one_listener(spark_home: Path, tmp_path: Path) -> None:
    """``--conf spark.atlas.hook.atlas_bridge.enabled=true`` alone (what spark-defaults.conf sets) arms the
    installed .pth; the job's own ``install(spark)`` then finds the hook and adds no second listener."""
    out, work = tmp_path / "out", tmp_path / "work"
    stdout = _submit(
        spark_home,
        ["--conf", "spark.atlas.hook.atlas_bridge.enabled=true", str(LISTENERS_JOB), str(work), "--install"],
        _env(spark_home, out),
        tmp_path,
    )
    assert _job_line(stdout) == {"listeners": 1, "armed": "conf"}
    twice = f"{work / 'twice'}@{NS}"
    assert _upstream(out, "atlas_bridge_path", twice) == {twice}  # spark.range: no input dataset
    assert len(list(out.glob("*-entities.json"))) == 1


def test_switch_off_registers_nothing(spark_home: Path, tmp_path: Path) -> None:
    """Nothing set: the driver watches for the conf switch, which is absent: no listener, no output."""
    out, work = tmp_path / "out", tmp_path / "work"
    stdout = _submit(spark_home, [str(LISTENERS_JOB), str(work)], _env(spark_home, out), tmp_path)
    assert _job_line(stdout) == {"listeners": 0, "armed": "conf"}
    assert (work / "twice").is_dir()
    assert not out.exists()
