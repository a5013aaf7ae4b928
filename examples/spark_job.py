"""A PySpark job whose writes show up in Atlas with table- and column-level lineage.

One line does it: ``atlas_bridge.spark.install(spark)``. Settings come from Spark conf keys that mirror
Atlas's property names (or from ``ATLAS_BRIDGE_*`` variables / ``$ATLAS_CONF/atlas-application.properties``)::

    SPARK_HOME=$VENV/lib/python3.11/site-packages/pyspark PYSPARK_PYTHON=$VENV/bin/python \\
    $VENV/bin/spark-submit --master 'local[2]' \\
        --conf spark.atlas.rest.address=http://atlas.example.com:21000 \\
        --conf spark.atlas.client.username=admin \\
        --conf spark.atlas.metadata.namespace=prod \\
        --conf spark.atlas.hook.atlas_bridge.spoolDir=/var/spool/atlas-bridge \\
        examples/spark_job.py /tmp/atlas-bridge-example

(the password from ``ATLAS_BRIDGE_PASSWORD``; with no ``spark.atlas.rest.address`` the request bodies are
written under ``atlas-bridge-out/`` for ``atlas-bridge push`` later). When Atlas is down the lineage
is kept in the spool folder and sent by the next job (or ``atlas-bridge push``).

The same without the line: ``spark_job_plain.py`` and the switch (README, "Without touching the job").
With the switch on, ``install(spark)`` here returns the hook the switch installed: still one listener.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

from atlas_bridge.spark import install


def main(workdir: str) -> None:
    base = Path(workdir)
    spark = (
        SparkSession.builder.appName("atlas-bridge-example")
        .config("spark.sql.warehouse.dir", str(base / "warehouse"))
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    handle = install(spark)  # the one line; idempotent, drained on spark.stop() and at exit

    spark.sql("DROP TABLE IF EXISTS orders")
    spark.sql("DROP TABLE IF EXISTS revenue_by_country")
    spark.createDataFrame(
        [(1, 1, 10.0), (2, 2, 25.5), (3, 1, 99.0)], "order_id INT, customer_id INT, amount DOUBLE"
    ).write.saveAsTable("orders")  # in-memory rows: a table without inputs
    customers_csv = base / "input" / "customers"
    spark.createDataFrame(
        [(1, "alice", "DE"), (2, "bob", "FR")], "id INT, name STRING, country STRING"
    ).write.mode("overwrite").option("header", True).csv(str(customers_csv))

    customers = spark.read.option("header", True).csv(str(customers_csv))
    customers.createOrReplaceTempView("customers")  # temp views are resolved through to the CSV path
    spark.sql(
        """
        CREATE TABLE revenue_by_country USING parquet AS
        SELECT c.country, sum(o.amount) AS revenue, count(*) AS orders
        FROM orders o JOIN customers c ON o.customer_id = CAST(c.id AS INT)
        WHERE o.amount > 5
        GROUP BY c.country
        """
    )
    spark.table("revenue_by_country").selectExpr("country", "revenue * 100 AS revenue_cents").write.mode(
        "overwrite"
    ).parquet(str(base / "out" / "revenue_cents"))

    handle.flush()
    print(f"atlas-bridge: {handle.stats.processes} processes emitted, {handle.stats.dropped} events dropped")
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="atlas-bridge-example-"))
