"""Makes the real Spark event logs of this folder (run again only to refresh them; see README.md here).

    .venv/bin/python tests/data/spark_eventlogs/make_logs.py 4.3 OUT     # PySpark 4.3: codecs, rolling, cut
    /work/venv-spark35/bin/python tests/data/spark_eventlogs/make_logs.py 3.5 OUT

Each application runs the same small job (tables in a temporary warehouse): a table filled by INSERT, a
``saveAsTable``, a CTAS with a join, a filter and an aggregate, a write to a parquet path, and an INSERT
that fails at run time (ANSI cast of a country name to INT).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession


def job(spark: SparkSession, out: Path) -> None:
    spark.sql("CREATE TABLE orders (id BIGINT, amount DOUBLE, cust BIGINT) USING parquet")
    spark.sql("INSERT INTO orders VALUES (1, 10.0, 1), (2, 30.0, 2), (3, 50.0, 1)")
    customers = spark.createDataFrame([(1, "FR"), (2, "DE")], "cid bigint, country string")
    customers.write.saveAsTable("customers")
    spark.sql(
        "CREATE TABLE rev USING parquet AS SELECT c.country, sum(o.amount) AS total "
        "FROM orders o JOIN customers c ON o.cust = c.cid WHERE o.amount > 20 GROUP BY c.country"
    )
    spark.table("rev").selectExpr("country", "total * 100 AS cents").write.mode("overwrite").parquet(
        str(out / "cents")
    )
    spark.sql("CREATE TABLE bad (x INT) USING parquet")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        spark.sql("INSERT INTO bad SELECT CAST(country AS INT) FROM rev")
    except Exception as e:  # the failed write this log must hold
        print("failed as meant:", type(e).__name__)


def session(log_dir: Path, warehouse: Path, name: str, **conf: str) -> SparkSession:
    b = (
        SparkSession.builder.master("local[2]")
        .appName(name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", log_dir.as_uri())
    )
    for k, v in conf.items():
        b = b.config(k, v)
    return b.getOrCreate()


def run(log_dir: Path, name: str, *, kill: bool = False, busy_tasks: int = 0, **conf: str) -> None:
    work = Path(tempfile.mkdtemp(prefix="evlog-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    spark = session(log_dir, work / "warehouse", name, **conf)
    try:
        job(spark, work)
        for _ in range(busy_tasks // 1000):  # task events, to pass the 10 MiB rolling minimum
            spark.range(0, 1000, 1, 1000).count()
        if kill:  # a driver that dies: the log stays .inprogress
            spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(30000)
            pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
            os.kill(pid, signal.SIGKILL)
            return
    finally:
        if not kill:
            spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def scala() -> None:
    """The Scala job through PySpark's ``bin/spark-shell`` (uncompressed, single file)."""
    import subprocess

    import pyspark

    home = Path(pyspark.__file__).parent
    out = Path(sys.argv[2]) / "scala"
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="evlog-"))
    conf = {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": out.as_uri(),
        "spark.eventLog.rolling.enabled": "false",
        "spark.eventLog.compress": "true",
        "spark.eventLog.compression.codec": "zstd",
        "spark.sql.warehouse.dir": str(work / "warehouse"),
        "spark.ui.enabled": "false",
        "spark.app.name": "scala job",
    }
    args = [str(home / "bin" / "spark-shell"), "--master", "local[2]"]
    for k, v in conf.items():
        args += ["--conf", f"{k}={v}"]
    script = Path(__file__).with_name("scala_job.scala")
    env = {**os.environ, "SPARK_HOME": str(home)}
    subprocess.run([*args, "-i", str(script)], env=env, cwd=work, check=True, stdin=subprocess.DEVNULL)
    shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    version, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    single = {"spark.eventLog.rolling.enabled": "false"}
    if version == "3.5":
        run(out / "spark35", "pyspark35 job", **single)
        run(
            out / "spark35_lz4",
            "pyspark35 lz4",
            **single,
            **{"spark.eventLog.compress": "true", "spark.eventLog.compression.codec": "lz4"},
        )
        return
    if sys.argv[3:] == ["scala"]:
        scala()
        return
    if sys.argv[3:] == ["kill"]:
        run(
            out / "inprogress",
            "pyspark43 killed",
            kill=True,
            **single,
            **{"spark.eventLog.compress": "false"},
        )
        return
    if sys.argv[3:] == ["rolling"]:
        run(
            out / "rolling",
            "pyspark43 rolling",
            busy_tasks=6000,
            **{
                "spark.eventLog.rolling.enabled": "true",
                "spark.eventLog.rolling.maxFileSize": "10m",
                "spark.eventLog.compress": "true",
                "spark.eventLog.compression.codec": "zstd",
            },
        )
        return
    for codec in ("none", "zstd", "lz4", "lzf", "snappy"):
        compress = {"spark.eventLog.compress": str(codec != "none").lower()}
        if codec != "none":
            compress["spark.eventLog.compression.codec"] = codec
        run(out / f"codec_{codec}", f"pyspark43 {codec}", **single, **compress)


if __name__ == "__main__":
    main()
