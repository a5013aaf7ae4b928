"""Put first on ``PYTHONPATH`` by ``atlas-bridge instrument``: arm the Spark hook, then run the
``sitecustomize`` this file hides (a distribution's or the user's), so nothing they do is lost."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def _arm() -> None:
    try:
        from atlas_bridge.spark import auto as spark_auto

        spark_auto.boot()
    except Exception as e:  # the job must start even when atlas-bridge cannot be imported here
        print(f"atlas-bridge: Spark hook not armed in {sys.executable}: {e}", file=sys.stderr)  # noqa: T201


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


if not any(key.startswith("PYTHON_WORKER_FACTORY_") for key in os.environ):  # not on executors' workers
    _arm()
_chain()
