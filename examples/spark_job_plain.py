"""The job of ``spark_job.py`` with no atlas-bridge code at all: the platform switches the hook on.

Any one of these runs it with lineage (settings as for ``spark_job.py``: ``spark.atlas.*`` conf,
``ATLAS_BRIDGE_*`` variables or ``$ATLAS_CONF/atlas-application.properties``)::

    atlas-bridge instrument -- spark-submit examples/spark_job_plain.py /tmp/plain
    ATLAS_BRIDGE_SPARK_HOOK=1 python examples/spark_job_plain.py /tmp/plain
    spark-submit --conf spark.atlas.hook.atlas_bridge.enabled=true examples/spark_job_plain.py /tmp/plain

(the last line is what ``spark.atlas.hook.atlas_bridge.enabled true`` in ``spark-defaults.conf`` does for
every job). The hook drains on ``spark.stop()`` and at exit, so nothing here waits for it.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession


def main(workdir: str) -> None:
    base = Path(workdir)
    spark = (
        SparkSession.builder.appName("atlas-bridge-example-plain")
        .config("spark.sql.warehouse.dir", str(base / "warehouse"))
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")

    spark.sql("DROP TABLE IF EXISTS orders")
    spark.sql("DROP TABLE IF EXISTS revenue_by_customer")
    spark.createDataFrame(
        [(1, 1, 10.0), (2, 2, 25.5), (3, 1, 99.0)], "order_id INT, customer_id INT, amount DOUBLE"
    ).write.saveAsTable("orders")
    spark.sql(
        """
        CREATE TABLE revenue_by_customer USING parquet AS
        SELECT customer_id, sum(amount) AS revenue
        FROM orders WHERE amount > 5 GROUP BY customer_id
        """
    )
    spark.table("revenue_by_customer").selectExpr("customer_id", "revenue * 100 AS revenue_cents").write.mode(
        "overwrite"
    ).parquet(str(base / "out" / "revenue_cents"))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="atlas-bridge-plain-"))
