"""Everything Spark: the hook inside a PySpark driver and the plan reader it shares with other sources.

* :mod:`~atlas_bridge.spark.hook`: :func:`install` / :func:`uninstall`, the listener and its worker.
* :mod:`~atlas_bridge.spark.auto`: the hook switched on without job code (``instrument``, ``.pth``).
* :mod:`~atlas_bridge.spark.jvm`: the few py4j reads the hook makes.
* :mod:`~atlas_bridge.spark.plan`: plan to lineage, pure (no py4j, no I/O): runs in the driver, the CLI
  and executors alike.
* :mod:`~atlas_bridge.spark.streaming` / :mod:`~atlas_bridge.spark.stream_plan`: Structured Streaming.

Importing this package needs no pyspark.
"""

from __future__ import annotations

from atlas_bridge.spark.hook import HookStats, SparkHookHandle, install, uninstall

__all__ = ["HookStats", "SparkHookHandle", "install", "uninstall"]
