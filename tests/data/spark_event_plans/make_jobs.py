"""The jobs whose event logs and hook lineage the event-log plan tests compare (run by hand, see README.md).

Usage: ``python make_jobs.py OUT_DIR`` with pyspark importable and this worktree on PYTHONPATH. Writes
``OUT_DIR/eventlog/`` (Spark's event log, uncompressed, not rolling) and ``OUT_DIR/hook.jsonl`` (one line per
lineage the hook extracted: the shape it belongs to and the lineage, model form).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any


def main(out: Path, only: set[str] | None = None) -> None:
    from pyspark.sql import SparkSession

    import atlas_bridge.spark.plan as plan_mod
    from atlas_bridge.atlas.sink import FileSink
    from atlas_bridge.config import Settings
    from atlas_bridge.spark import install

    out.mkdir(parents=True, exist_ok=True)
    (out / "eventlog").mkdir(exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="evjobs-"))
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("atlas-bridge-eventlog-shapes")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.sql.warehouse.dir", str(base / "warehouse"))
        .config("spark.sql.catalogImplementation", "hive")
        .config(
            "spark.hadoop.javax.jdo.option.ConnectionURL",
            f"jdbc:derby:;databaseName={base / 'ms'};create=true",
        )
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={base / 'derby'}")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", str(out / "eventlog"))
        .config("spark.eventLog.compress", "false")
        .config("spark.eventLog.rolling.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    shape = {"name": "setup"}
    got: list[dict[str, Any]] = []
    real = plan_mod.extract_spark_plan_lineage

    def spy(*args: Any, **kw: Any) -> Any:
        res = real(*args, **kw)
        if res.lineage.processes:
            got.append({"shape": shape["name"], "lineage": res.lineage.model_dump(mode="json")})
        return res

    plan_mod.extract_spark_plan_lineage = spy  # type: ignore[assignment]
    settings = Settings.load(namespace="test", output_dir=out / "sink")
    handle = install(spark, settings=settings, sink=FileSink(out / "sink", fresh=True), coalesce_s=600)
    sql = spark.sql
    for stmt in (
        "CREATE TABLE src (id BIGINT, amount DOUBLE, cust INT, tag STRING) USING parquet",
        "INSERT INTO src VALUES (1, 10.0, 1, 'a'), (2, 25.5, 2, 'b'), (3, 99.0, 1, 'c')",
        "CREATE TABLE customers (id INT, name STRING, country STRING) USING parquet",
        "INSERT INTO customers VALUES (1, 'alice', 'DE'), (2, 'bob', 'FR')",
        "CREATE TABLE hive_src (id BIGINT, name STRING) STORED AS TEXTFILE",
        "INSERT INTO hive_src VALUES (1, 'x'), (2, 'y')",
        "CREATE TABLE arr_src (id BIGINT, items ARRAY<STRING>) USING parquet",
        "INSERT INTO arr_src VALUES (1, array('a', 'b')), (2, array('c'))",
        "CREATE TABLE tgt (id BIGINT, amount_x2 DOUBLE, tag STRING) USING parquet",
        "CREATE TABLE st_src (id BIGINT, s STRUCT<a: INT, b: STRING>) USING parquet",
        "INSERT INTO st_src VALUES (1, named_struct('a', 1, 'b', 'x'))",
        "CREATE TABLE agg_ins (country STRING, total DOUBLE, n BIGINT) USING parquet",
        "CREATE TABLE win_ins (id BIGINT, cust INT, rk INT, pick DOUBLE, cust_total DOUBLE) USING parquet",
        "CREATE TABLE exp_ins (id BIGINT, item STRING) USING parquet",
        "CREATE TABLE roll_ins (cust INT, tag STRING, total DOUBLE) USING parquet",
        "CREATE TABLE sub_ins (id BIGINT, amount DOUBLE, mx INT) USING parquet",
        "CREATE TABLE cache_ins (id INT, name STRING) USING parquet",
        "CREATE TABLE top_ins (tag STRING, v STRING) USING parquet",
        "CREATE TABLE st_ins (id BIGINT, a INT) USING parquet",
        "CREATE TABLE smj_ins (id BIGINT, name STRING) USING parquet",
        "CREATE TABLE path_ins (id BIGINT, tag STRING) USING parquet",
        "CREATE TABLE wide_src (" + ", ".join(f"c{i} INT" for i in range(30)) + ") USING parquet",
        "CREATE TABLE wide_ins (" + ", ".join(f"c{i} INT" for i in range(30)) + ") USING parquet",
        "CREATE TABLE short_ins (id BIGINT, amount DOUBLE) USING parquet",
    ):
        sql(stmt)
    assert handle.flush(timeout=60)

    def run(name: str, fn: Any) -> None:
        if only is not None and name not in only:
            return
        shape["name"] = name
        spark.sparkContext.setJobDescription(f"shape:{name}")
        try:
            fn()
        except Exception as e:  # the failed write is a shape too
            print(f"{name}: {type(e).__name__}", file=sys.stderr)
        assert handle.flush(timeout=60)
        spark.sparkContext.setJobDescription(None)

    paths = base / "paths"
    run(
        "ctas_join_aggregate",
        lambda: sql(
            "CREATE TABLE agg_t USING parquet AS SELECT c.country, sum(s.amount) AS total, count(*) AS n "
            "FROM src s JOIN customers c ON s.cust = c.id WHERE s.amount > 5 GROUP BY c.country"
        ),
    )
    run(
        "insert_into",
        lambda: sql(
            "INSERT INTO tgt SELECT id, amount * 2, concat(tag, '_', cust) FROM src WHERE amount > 20"
        ),
    )
    run("insert_overwrite", lambda: sql("INSERT OVERWRITE TABLE tgt SELECT id, amount, tag FROM src"))
    run(
        "save_as_table",
        lambda: spark.table("src").selectExpr("id", "amount + 1 AS amount_plus").write.saveAsTable("sat"),
    )
    run(
        "path_write",
        lambda: (
            spark.table("src")
            .selectExpr("id", "upper(tag) AS tag")
            .write.mode("overwrite")
            .parquet(str(paths / "p1"))
        ),
    )
    run(
        "path_read_ctas",
        lambda: spark.read.parquet(str(paths / "p1")).where("id > 1").write.saveAsTable("from_path"),
    )
    run(
        "window",
        lambda: sql(
            "CREATE TABLE win_t USING parquet AS SELECT id, cust, "
            "row_number() OVER (PARTITION BY cust ORDER BY amount DESC) AS rn, "
            "sum(amount) OVER (PARTITION BY cust) AS cust_total FROM src"
        ),
    )
    run(
        "union",
        lambda: sql(
            "INSERT INTO tgt SELECT id, amount, tag FROM src WHERE cust = 1 "
            "UNION ALL SELECT id, CAST(id AS DOUBLE), name FROM hive_src"
        ),
    )
    run(
        "explode",
        lambda: sql(
            "CREATE TABLE exploded USING parquet AS SELECT id, item "
            "FROM arr_src LATERAL VIEW explode(items) t AS item"
        ),
    )
    run(
        "expand_rollup",
        lambda: sql(
            "CREATE TABLE rolled USING parquet AS SELECT cust, tag, sum(amount) AS total FROM src "
            "GROUP BY ROLLUP(cust, tag)"
        ),
    )
    run(
        "subquery",
        lambda: sql(
            "CREATE TABLE subq USING parquet AS SELECT id, amount, (SELECT max(id) FROM customers) AS mx "
            "FROM src WHERE cust IN (SELECT id FROM customers WHERE country = 'DE')"
        ),
    )
    run(
        "view_create",
        lambda: sql("CREATE VIEW v_src AS SELECT id, amount * 2 AS a2, tag FROM src WHERE cust = 1"),
    )
    run("view_read", lambda: sql("CREATE TABLE from_view USING parquet AS SELECT id, a2 FROM v_src"))

    def temp_view() -> None:
        spark.table("src").where("amount > 1").createOrReplaceTempView("tv")
        sql("CREATE TABLE from_tv USING parquet AS SELECT id, amount FROM tv")

    run("temp_view", temp_view)

    def cached() -> None:
        sql("CACHE TABLE customers")
        sql("CREATE TABLE from_cache USING parquet AS SELECT id, upper(name) AS name FROM customers")
        sql("UNCACHE TABLE customers")

    run("cached", cached)
    run("hive_insert", lambda: sql("INSERT INTO hive_src SELECT id, upper(tag) FROM src WHERE id > 0"))
    run(
        "insert_directory",
        lambda: sql(f"INSERT OVERWRITE DIRECTORY '{paths / 'dir1'}' USING parquet SELECT id, tag FROM src"),
    )
    run("rename", lambda: sql("ALTER TABLE sat RENAME TO sat_renamed"))
    # the same shapes as INSERTs: their event-log plans are physical, not the command's logical query
    run(
        "insert_join_aggregate",
        lambda: sql(
            "INSERT INTO agg_ins SELECT c.country, sum(s.amount), count(*) FROM src s JOIN customers c "
            "ON s.cust = c.id WHERE s.amount > 5 GROUP BY c.country HAVING sum(s.amount) > 1"
        ),
    )
    run(
        "insert_window",
        lambda: sql(
            "INSERT INTO win_ins SELECT id, cust, rank() OVER (PARTITION BY cust ORDER BY amount DESC), "
            "CASE WHEN amount > 20 THEN amount ELSE coalesce(amount, 0) END, "
            "sum(amount) OVER (PARTITION BY cust) FROM src"
        ),
    )
    run(
        "insert_explode",
        lambda: sql("INSERT INTO exp_ins SELECT id, item FROM arr_src LATERAL VIEW explode(items) t AS item"),
    )
    run(
        "insert_expand",
        lambda: sql("INSERT INTO roll_ins SELECT cust, tag, sum(amount) FROM src GROUP BY ROLLUP(cust, tag)"),
    )
    run(
        "insert_subquery",
        lambda: sql(
            "INSERT INTO sub_ins SELECT id, amount, (SELECT max(id) FROM customers) FROM src "
            "WHERE cust IN (SELECT id FROM customers WHERE country = 'DE')"
        ),
    )

    def insert_cached() -> None:
        sql("CACHE TABLE customers")
        sql("INSERT INTO cache_ins SELECT id, upper(name) FROM customers WHERE id > 0")
        sql("UNCACHE TABLE customers")

    run("insert_cached", insert_cached)
    run(
        "insert_distinct_top",
        lambda: sql("INSERT INTO top_ins SELECT DISTINCT tag, upper(tag) FROM src ORDER BY tag LIMIT 2"),
    )
    run("insert_struct_field", lambda: sql("INSERT INTO st_ins SELECT id, s.a FROM st_src"))

    def insert_smj() -> None:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
        sql("INSERT INTO smj_ins SELECT s.id, c.name FROM src s LEFT JOIN customers c ON s.cust = c.id")
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")

    run("insert_sort_merge_join", insert_smj)
    run(
        "insert_from_path",
        lambda: spark.read.parquet(str(paths / "p1")).where("id > 0").write.insertInto("path_ins"),
    )
    # shapes of the second run (``--only``): a Hive CTAS, a Python UDF, GROUP BY without an aggregate
    run(
        "hive_ctas",
        lambda: sql(
            "CREATE TABLE hive_ctas STORED AS TEXTFILE AS SELECT id, upper(name) AS name FROM hive_src WHERE id > 0"
        ),
    )

    def python_udf() -> None:
        from pyspark.sql.functions import udf

        spark.udf.register("plus_one", udf(lambda x: x + 1.0, "double"))
        sql("INSERT INTO short_ins SELECT id, plus_one(amount) FROM src")

    run("python_udf", python_udf)
    run("group_by_no_aggregate", lambda: sql("INSERT INTO top_ins SELECT tag, tag FROM src GROUP BY tag"))
    # plans Spark cuts: a list longer than spark.sql.debug.maxToStringFields, a text longer than
    # spark.sql.maxPlanStringLength
    run(
        "cut_fields",
        lambda: sql(
            "INSERT INTO wide_ins SELECT " + ", ".join(f"c{i} + 1" for i in range(30)) + " FROM wide_src"
        ),
    )
    spark.conf.set("spark.sql.maxPlanStringLength", "400")
    run("cut_text", lambda: sql("INSERT INTO short_ins SELECT id, amount * 3 FROM src WHERE cust > 0"))
    spark.conf.unset("spark.sql.maxPlanStringLength")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    run("failed_write", lambda: sql("INSERT INTO tgt SELECT id, amount / 0, tag FROM src"))
    spark.conf.set("spark.sql.ansi.enabled", "false")
    handle.close(timeout=60)
    spark.stop()
    with (out / "hook.jsonl").open("w", encoding="utf-8") as f:
        for entry in got:
            f.write(json.dumps(entry, sort_keys=True) + "\n")
    print("versions", spark.version if hasattr(spark, "version") else "", file=sys.stderr)


_SQL_EVENT = "org.apache.spark.sql.execution.ui.SparkListenerSQL"
_KEEP = {
    "SparkListenerSQLExecutionStart": (
        "Event",
        "executionId",
        "rootExecutionId",
        "description",
        "time",
        "physicalPlanDescription",
    ),
    "SparkListenerSQLAdaptiveExecutionUpdate": ("Event", "executionId"),  # its plan text is not read
    "SparkListenerSQLExecutionEnd": ("Event", "executionId", "time", "errorMessage"),
}


def _end(ref: dict[str, Any]) -> str:
    """A relation's end as the tests compare it: dataset.column, with the field path below it if any."""
    field = ref.get("field")
    return f"{ref['dataset_id']}.{ref['column']}" + (f".{field}" if field else "")


def extract(out: Path, dest: Path, suffix: str = "") -> None:
    """Keep what the tests need: the SQL execution events of the shapes (without ``sparkPlanInfo``, which the
    reader does not use), and the hook's lineage per shape in the compact form the tests compare."""
    dest.mkdir(parents=True, exist_ok=True)
    (log,) = sorted((out / "eventlog").iterdir())
    shapes: set[int] = set()  # the executions of the shapes (not the setup statements)
    with log.open(encoding="utf-8") as f, (dest / f"events{suffix}.jsonl").open("w", encoding="utf-8") as w:
        for line in f:
            if _SQL_EVENT not in line:
                continue
            event = json.loads(line)
            if str(event.get("description", "")).startswith("shape:"):
                shapes.add(int(event["executionId"]))
            if int(event["executionId"]) not in shapes:
                continue
            keep = _KEEP.get(event["Event"].rsplit(".", 1)[-1])
            if keep is not None:
                kept = {k: event[k] for k in keep if k in event}
                if "more characters" in str(event.get("physicalPlanDescription", ""))[-200:]:
                    kept["sparkPlanInfo"] = event.get("sparkPlanInfo")  # read when the text was cut
                w.write(json.dumps(kept, sort_keys=True) + "\n")
    with (
        (out / "hook.jsonl").open(encoding="utf-8") as f,
        (dest / f"hook{suffix}.jsonl").open("w", encoding="utf-8") as w,
    ):
        for line in f:
            entry = json.loads(line)
            if entry["shape"] == "setup":
                continue
            lin = entry["lineage"]
            compact = {
                "shape": entry["shape"],
                "processes": sorted(p["type"] for p in lin["processes"]),
                "datasets": sorted(d["id"] for d in lin["datasets"]),
                "relations": sorted(
                    [
                        r["type"],
                        _end(r["source"]),
                        _end(r["target"]),
                        r["clause_type"] or r["effect"] or "",
                    ]
                    for r in lin["relations"]
                ),
            }
            w.write(json.dumps(compact, sort_keys=True) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "--extract":
        extract(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "")
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        only = set(sys.argv[3].split(",")) if len(sys.argv) > 3 and sys.argv[2] == "--only" else None
        main(Path(sys.argv[1]), only)
