"""A job for the switch tests: one write, then prints how many QueryExecutionListeners its session has.

``--install`` also calls ``atlas_bridge.spark.install(spark)`` the way a job written for the hook does,
to show that the switch plus an explicit install register one listener.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pyspark.sql import SparkSession


def main() -> None:
    base = Path(sys.argv[1])
    spark = (
        SparkSession.builder.appName("atlas-bridge-switch-test")
        .config("spark.sql.warehouse.dir", str(base / "warehouse"))
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    if "--install" in sys.argv:
        from atlas_bridge.spark import install

        install(spark)
    spark.range(3).selectExpr("id", "id * 2 AS twice").write.mode("overwrite").parquet(str(base / "twice"))
    listeners = len(spark._jsparkSession.listenerManager().listListeners())
    auto = sys.modules.get("atlas_bridge.spark.auto")  # imported only when the start-up files armed it
    print(json.dumps({"listeners": listeners, "armed": auto.is_armed() if auto else None}))
    spark.stop()


if __name__ == "__main__":
    main()
