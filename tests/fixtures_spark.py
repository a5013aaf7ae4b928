"""Fixtures for the Spark area; see conftest.py.

One local PySpark session per test run (startup costs ~7 s): ``local[2]``, one shuffle partition, no UI,
warehouse and Derby metastore in a temporary folder, Hive support (the Hive classes ship in the pyspark
wheel and cost nothing extra at startup). Tests that use it are marked ``@pytest.mark.spark`` and are
skipped when pyspark or Java is missing.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def _java_available() -> bool:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return True
    return shutil.which("java") is not None


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The run's only SparkSession (classic, JVM-backed)."""
    pyspark = pytest.importorskip("pyspark")
    if not _java_available():
        pytest.skip("no Java runtime for pyspark")
    from pyspark.sql import SparkSession

    base = tmp_path_factory.mktemp("spark")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("atlas-bridge-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.sql.warehouse.dir", str(base / "warehouse"))
        .config("spark.sql.catalogImplementation", "hive")
        .config(
            "spark.hadoop.javax.jdo.option.ConnectionURL",
            f"jdbc:derby:;databaseName={base / 'metastore_db'};create=true",
        )
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={base / 'derby'}")
        .config("spark.sql.session.timeZone", "UTC")
        # the run's own event log, as a cluster keeps it (Spark's defaults otherwise): the event-log reader
        # is checked against the hook on the same statements (test_conventions_agree.py)
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", str(base / "events"))
    )
    (base / "events").mkdir()
    try:
        session = builder.getOrCreate()
    except Exception as e:
        pytest.skip(f"cannot start a local Spark session: {e}")
    session.sparkContext.setLogLevel("ERROR")
    assert pyspark.__version__
    yield session
    session.stop()
