"""The job of ``spark_job_plain.py`` with Spark's event log on, as a cluster keeps it for its history server.

Nothing of atlas-bridge runs in the job: its lineage is read afterwards from the log Spark wrote::

    python examples/spark_eventlog_job.py /tmp/atlas-bridge-events-demo
    atlas-bridge scan /tmp/atlas-bridge-events-demo/spark-events --to out/events-demo

(``spark-events`` is the job's ``spark.eventLog.dir``; a cluster sets it in ``spark-defaults.conf``).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession
from spark_job_plain import main as plain_job


def main(workdir: str) -> None:
    shown = Path(workdir) / "spark-events"  # as given: a relative folder stays relative in the note
    base = Path(workdir).absolute()  # Spark's eventLog.dir is a URI, which a relative path is not
    events = base / "spark-events"
    events.mkdir(parents=True, exist_ok=True)  # Spark does not make spark.eventLog.dir itself
    (
        SparkSession.builder.appName("atlas-bridge-example-eventlog")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", events.as_uri())
        .config("spark.sql.warehouse.dir", str(base / "warehouse"))
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )  # the job's own getOrCreate() then takes this session
    plain_job(workdir)
    print(f"{len(list(events.iterdir()))} event log(s) in {shown}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="atlas-bridge-events-"))
