"""The automatic Spark hook (atlas_bridge.spark.auto): switch parsing, start-up cost, the instrument
wrapper, and, on the run's one Spark session, session coverage, one listener per session and the
fail-safe path. The real spark-submit runs are in test_spark_auto_submit.py."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from atlas_bridge.atlas.sink import FileSink
from atlas_bridge.cli import cli
from atlas_bridge.spark import auto as spark_auto
from atlas_bridge.spark.auto import CONF_ENABLED, ENV_SWITCH, instrument_environment, mode_from_environment
from atlas_bridge.spark.hook import SparkHookHandle, _handles, install, uninstall

# ---------------------------------------------------------------------------------------------------------
# no Spark needed


@pytest.mark.parametrize(
    ("environ", "mode"),
    [
        ({}, None),
        ({ENV_SWITCH: "1"}, "on"),
        ({ENV_SWITCH: " TRUE "}, "on"),
        ({ENV_SWITCH: "auto"}, "conf"),
        ({ENV_SWITCH: "0", "PYSPARK_GATEWAY_PORT": "4000"}, None),
        ({ENV_SWITCH: "false"}, None),
        ({"PYSPARK_GATEWAY_PORT": "4000"}, "conf"),  # a spark-submit driver: watch for the conf switch
        ({ENV_SWITCH: "1", "PYTHON_WORKER_FACTORY_SECRET": "s"}, None),  # an executor's Python worker
    ],
)
def test_mode_from_environment(environ: dict[str, str], mode: str | None) -> None:
    assert mode_from_environment(environ) == mode


def test_unknown_switch_value_is_off_and_says_so(
    caplog: pytest.LogCaptureFixture, fresh_warning: None
) -> None:
    with caplog.at_level(logging.WARNING):
        assert mode_from_environment({ENV_SWITCH: "maybe"}) is None
    assert [r.getMessage() for r in caplog.records if "ATLAS_BRIDGE_SPARK_HOOK='maybe'" in r.getMessage()]


def test_instrument_environment() -> None:
    site_dir = spark_auto.sitecustomize_dir()
    env = instrument_environment({"PYTHONPATH": f"{site_dir}{os.pathsep}/x", "HOME": "/h"}, "/v/bin/python")
    assert env == {
        "PYTHONPATH": f"{site_dir}{os.pathsep}/x",  # first, once
        "HOME": "/h",
        ENV_SWITCH: "1",
        "PYSPARK_DRIVER_PYTHON": "/v/bin/python",
    }
    assert (Path(site_dir) / "sitecustomize.py").is_file()
    kept = instrument_environment({"PYSPARK_PYTHON": "/other/python"}, "/v/bin/python", mode="auto")
    assert kept[ENV_SWITCH] == "auto"
    assert "PYSPARK_DRIVER_PYTHON" not in kept  # the platform's interpreter choice stands


_PROBE = """
import json, sys
before = {"auto": "atlas_bridge.spark.auto" in sys.modules, "pyspark": "pyspark" in sys.modules}
auto = sys.modules.get("atlas_bridge.spark.auto")
before["mode"] = auto.is_armed() if auto else None
if auto is not None:
    import pyspark.sql.session as s
    before["wrapped"] = bool(getattr(s.SparkSession.__init__, "__atlas_bridge_wrapped__", False))
print(json.dumps(before))
"""


def _probe(**env: str) -> dict[str, Any]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ATLAS_BRIDGE_", "PYSPARK_", "PYTHON_WORKER_FACTORY_"))
    }
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stderr == ""
    return dict(json.loads(out.stdout))


def test_installed_pth_costs_nothing_when_off_and_wraps_lazily_when_on() -> None:
    """The .pth installed with the package: off, nothing of ours is imported; on, no pyspark is imported
    until the job imports it, and then SparkSession is wrapped."""
    assert _probe() == {"auto": False, "pyspark": False, "mode": None}
    assert _probe(ATLAS_BRIDGE_SPARK_HOOK="0", PYSPARK_GATEWAY_PORT="1") == {
        "auto": False,
        "pyspark": False,
        "mode": None,
    }
    assert _probe(ATLAS_BRIDGE_SPARK_HOOK="1") == {
        "auto": True,
        "pyspark": False,
        "mode": "on",
        "wrapped": True,
    }


def test_instrument_command_arms_the_child_and_keeps_its_sitecustomize(tmp_path: Path) -> None:
    own = tmp_path / "own_site"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['OWN_SITECUSTOMIZE_RAN'] = 'yes'\n")
    report = tmp_path / "report.json"
    code = (
        "import json, os, sys\n"
        "auto = sys.modules.get('atlas_bridge.spark.auto')\n"
        f"json.dump({{'mode': auto and auto.is_armed(), 'own': os.environ.get('OWN_SITECUSTOMIZE_RAN'),"
        f" 'pyspark': 'pyspark' in sys.modules}}, open({str(report)!r}, 'w'))\n"
        "sys.exit(3)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATLAS_BRIDGE_", "PYSPARK_"))}
    env["PYTHONPATH"] = str(own)
    result = CliRunner().invoke(cli, ["instrument", "--", sys.executable, "-c", code], env=env)
    assert result.exit_code == 3  # the command's own exit code
    assert json.loads(report.read_text()) == {"mode": "on", "own": "yes", "pyspark": False}


def test_enable_wraps_and_disable_restores(fresh_warning: None) -> None:
    session_module = pytest.importorskip("pyspark.sql.session")
    cls = session_module.SparkSession
    init, get = cls.__init__, cls.Builder.getOrCreate
    spark_auto.enable("conf")
    try:
        assert spark_auto.is_armed() == "conf"
        assert getattr(cls.__init__, "__atlas_bridge_wrapped__", False)
        spark_auto.enable("on")  # upgrade, no second wrapper
        assert spark_auto.is_armed() == "on"
        assert cls.__init__.__wrapped__ is init
    finally:
        spark_auto.disable()
    assert spark_auto.is_armed() is None
    assert (cls.__init__, cls.Builder.getOrCreate) == (init, get)


def test_instrument_command_not_found() -> None:
    result = CliRunner().invoke(cli, ["instrument", "--", "no-such-command-atlas-bridge"])
    assert result.exit_code == 2
    assert "cannot run 'no-such-command-atlas-bridge'" in result.output


# ---------------------------------------------------------------------------------------------------------
# on the run's Spark session (never a second one: new Python objects wrap the same JVM session)


@pytest.fixture
def fresh_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_auto, "_warned", False)


@pytest.fixture
def auto(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_warning: None) -> Iterator[Any]:
    """The switch armed in this process (pyspark is imported already: SparkSession is wrapped at once)."""
    from pyspark.sql import SparkSession

    monkeypatch.setattr(SparkSession, "_instantiatedSession", SparkSession._instantiatedSession)
    monkeypatch.setattr(SparkSession, "_activeSession", SparkSession._activeSession)
    uninstall(spark)
    monkeypatch.setenv("ATLAS_BRIDGE_OUTPUT_DIR", str(tmp_path / "out"))
    monkeypatch.setenv("ATLAS_BRIDGE_NAMESPACE", "test")
    yield spark
    spark_auto.disable()
    uninstall(spark)
    vars(spark).pop(spark_auto._SEEN, None)
    spark.conf.unset(CONF_ENABLED)


def _listeners(spark: Any) -> int:
    return len(spark._jsparkSession.listenerManager().listListeners())


def _handle(spark: Any) -> SparkHookHandle | None:
    return _handles.get(str(spark._jsparkSession.sessionUUID()))


def _shell_session(spark: Any) -> Any:
    from pyspark.sql import SparkSession

    return SparkSession._create_shell_session()  # what the pyspark shell runs


def _new_wrapper(spark: Any) -> Any:
    from pyspark.sql import SparkSession

    # SparkSession.getActiveSession()/active() build a Python session object like this when they need one.
    return SparkSession(spark.sparkContext, jsparkSession=spark._jsparkSession)


def _builder(spark: Any) -> Any:
    from pyspark.sql import SparkSession

    return SparkSession.builder.getOrCreate()


def _active(spark: Any) -> Any:
    from pyspark.sql import SparkSession

    # As when the JVM holds an active session that Python has no object for (made on the JVM side, or
    # Python's was reset): SparkSession.active() builds one. The `auto` fixture restores the class state.
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    session = SparkSession.active()
    assert session is not spark
    return session


@pytest.mark.spark
@pytest.mark.parametrize(
    "create",
    [_builder, _active, _new_wrapper, _shell_session],
    ids=["getOrCreate", "active", "init", "shell"],
)
def test_sessions_get_the_hook_once(auto: Any, create: Any) -> None:
    spark = auto
    before = _listeners(spark)
    assert _handle(spark) is None
    spark_auto.enable("on")
    session = create(spark)
    assert session._jsparkSession.sessionUUID() == spark._jsparkSession.sessionUUID()
    handle = _handle(spark)
    assert handle is not None
    assert handle.automatic
    assert _listeners(spark) == before + 1
    # The job's own install() finds it (no second listener) ...
    assert install(session) is handle
    assert install(spark) is handle
    from pyspark.sql import SparkSession

    assert SparkSession.active()._jsparkSession.sessionUUID() == spark._jsparkSession.sessionUUID()
    assert _listeners(spark) == before + 1
    # ... and install() with arguments replaces the automatic hook, still one listener.
    explicit = install(spark, coalesce_s=600)
    assert explicit is not handle
    assert not explicit.automatic
    assert handle._closed
    assert _listeners(spark) == before + 1
    uninstall(spark)
    assert _listeners(spark) == before


@pytest.mark.spark
def test_conf_mode_follows_the_session_conf(auto: Any) -> None:
    spark = auto
    spark_auto.enable("conf")
    _builder(spark)
    assert _handle(spark) is None  # no spark.atlas.hook.atlas_bridge.enabled
    spark.conf.set(CONF_ENABLED, "true")
    _new_wrapper(spark)
    assert _handle(spark) is not None


@pytest.mark.spark
def test_a_job_can_opt_out(auto: Any) -> None:
    spark = auto
    before = _listeners(spark)
    spark.conf.set(CONF_ENABLED, "false")
    spark_auto.enable("on")
    _builder(spark)
    _new_wrapper(spark)
    assert _handle(spark) is None
    assert _listeners(spark) == before


@pytest.mark.spark
def test_failure_runs_the_job_without_the_hook_and_warns_once(
    auto: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    spark = auto
    before = _listeners(spark)
    monkeypatch.setenv("ATLAS_BRIDGE_QUEUE_SIZE", "0")  # invalid settings: install() raises ConfigError
    spark_auto.enable("on")
    with caplog.at_level(logging.WARNING, logger="atlas_bridge.spark.auto"):
        assert _builder(spark) is spark
        _new_wrapper(spark)
        _shell_session(spark)
    warnings = [
        r for r in caplog.records if r.name == "atlas_bridge.spark.auto" and r.levelno == logging.WARNING
    ]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "the job runs without lineage" in warnings[0].getMessage()
    assert "queue_size" in warnings[0].getMessage()
    assert _handle(spark) is None
    assert _listeners(spark) == before
    assert spark.range(3).count() == 3


@pytest.mark.spark
def test_failure_while_registering_leaves_no_trace(
    auto: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    spark = auto
    before = _listeners(spark)
    real = SparkHookHandle._invoke_listener_manager

    def broken(self: SparkHookHandle, method: str) -> None:
        if method == "register":
            real(self, method)  # registered, then the JVM side "fails"
            raise RuntimeError("py4j went away")
        real(self, method)

    monkeypatch.setattr(SparkHookHandle, "_invoke_listener_manager", broken)
    spark_auto.enable("on")
    with caplog.at_level(logging.WARNING, logger="atlas_bridge.spark.auto"):
        _builder(spark)
    assert any("py4j went away" in r.getMessage() for r in caplog.records)
    assert _handle(spark) is None
    assert _listeners(spark) == before  # the half-registered listener was taken off again
    assert "stop" not in vars(spark)


@pytest.mark.spark
def test_the_automatic_hook_emits_with_settings_from_the_environment(auto: Any, tmp_path: Path) -> None:
    spark = auto
    spark_auto.enable("on")
    _builder(spark)
    handle = _handle(spark)
    assert handle is not None
    target = tmp_path / "auto_written"
    spark.range(2).selectExpr("id AS n").write.mode("overwrite").parquet(str(target))
    assert handle.flush(timeout=60)
    assert isinstance(handle._sink, FileSink)
    names = {
        e["attributes"]["qualifiedName"]
        for f in sorted((tmp_path / "out").glob("*-entities.json"))
        for e in json.loads(f.read_text())["entities"]
        if e["typeName"] == "atlas_bridge_path"
    }
    assert names == {f"{target}@test"}
