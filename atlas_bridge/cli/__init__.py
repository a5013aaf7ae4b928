"""The ``atlas-bridge`` command line (click). The only place that configures logging and progress bars.

Exit codes: 0 success; 1 the run finished but something failed; 2 usage or configuration error;
130 interrupted.
"""

from __future__ import annotations

import importlib
import logging
import os

import click

from atlas_bridge import __version__


def check_dialect(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--dialect`` checked before any work starts (not after Spark's start-up), with the names known."""
    if value is None:
        return None
    from atlas_bridge.errors import ExtractionError
    from atlas_bridge.extractors.sql import resolve_dialect

    try:
        resolve_dialect(value)
    except ExtractionError as e:
        raise click.BadParameter(str(e).removeprefix("<input>: ")) from None
    return value


# Each module defines ``register(group)`` and owns its commands.
_COMMAND_MODULES = (
    "atlas_bridge.cli.lineage",
    "atlas_bridge.cli.atlas",
    "atlas_bridge.cli.scan",
    "atlas_bridge.cli.instrument",
    "atlas_bridge.cli.icons",
    "atlas_bridge.cli.page",
    "atlas_bridge.cli.serve",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="atlas-bridge")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug, including py4j/urllib3).")
def cli(verbose: int) -> None:
    """Lineage from SQL, Spark and SQLFlow exports into Apache Atlas."""
    level_name = os.environ.get("ATLAS_BRIDGE_LOG_LEVEL")
    level = logging.WARNING - 10 * verbose if level_name is None else logging.getLevelName(level_name.upper())
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if verbose < 2:
        for noisy in ("py4j", "urllib3"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
        # sqlglot warns about what it cannot do (unsupported syntax it skips...); each statement's own
        # problems already say what went wrong, so its warnings only repeat them in its own words.
        logging.getLogger("sqlglot").setLevel(logging.ERROR)
    os.environ.setdefault("ATLAS_BRIDGE_SPARK_LOG", "WARN" if verbose else "ERROR")


for _name in _COMMAND_MODULES:
    importlib.import_module(_name).register(cli)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="atlas-bridge")
