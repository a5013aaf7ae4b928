"""``atlas-bridge instrument -- CMD ...``: run an unmodified PySpark job with the Spark hook on.

Like ``opentelemetry-instrument``: CMD (``spark-submit job.py``, ``python job.py``, ``pyspark``) runs with
``ATLAS_BRIDGE_SPARK_HOOK=1`` and a ``sitecustomize`` directory first on ``PYTHONPATH``; every SparkSession
the Python driver creates gets the hook (see :mod:`atlas_bridge.spark.auto`). The exit code is CMD's.
"""

from __future__ import annotations

import os
import subprocess
import sys

import click

from atlas_bridge.spark.auto import instrument_environment


def register(group: click.Group) -> None:
    """Add this module's commands to the ``atlas-bridge`` group."""
    group.add_command(instrument_command)


@click.command(
    "instrument",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option(
    "--auto",
    "auto",
    is_flag=True,
    help="Only sessions whose Spark conf sets spark.atlas.hook.atlas_bridge.enabled=true "
    "(default: every session unless it sets it to false).",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def instrument_command(auto: bool, command: tuple[str, ...]) -> None:
    """Run COMMAND with the Spark hook installed on every SparkSession its Python driver creates.

    \b
    atlas-bridge instrument -- spark-submit --master yarn job.py ARGS
    atlas-bridge instrument -- python job.py ARGS

    Settings come from --conf spark.atlas.*, ATLAS_BRIDGE_* variables or atlas-application.properties,
    as for install(). The job's Python must be one with atlas-bridge installed (PYSPARK_DRIVER_PYTHON is
    set to this interpreter when neither it nor PYSPARK_PYTHON is set).
    """
    env = instrument_environment(os.environ, sys.executable, mode="auto" if auto else "on")
    try:
        proc = subprocess.run(list(command), env=env, check=False)
    except (FileNotFoundError, PermissionError) as e:  # not found, or a PATH entry not readable
        msg = f"cannot run {command[0]!r}: {e.strerror}"
        raise click.UsageError(msg) from e
    except KeyboardInterrupt:
        sys.exit(130)
    code = proc.returncode
    sys.exit(code if code >= 0 else 128 - code)
