"""The Spark hook without job code: install it on every SparkSession a process creates.

Platforms switch lineage on once for all jobs, so the hook cannot depend on a line in each job. Two things
arm this module at interpreter start-up, both before the job's code runs:

* ``atlas_bridge_spark_hook.pth``, installed with the package into site-packages. Python runs it at every
  start-up; it reads two environment variables and, unless the switch applies, does nothing else (it
  imports neither this module nor pyspark).
* ``atlas-bridge instrument -- CMD ...``, which puts a ``sitecustomize`` directory on ``PYTHONPATH`` (the way
  ``opentelemetry-instrument`` does) and sets ``ATLAS_BRIDGE_SPARK_HOOK=1`` for CMD and its children;
  ``spark-submit`` passes ``PYTHONPATH`` on to the Python driver.

Armed, this module adds one finder to ``sys.meta_path`` that waits for ``pyspark.sql.session`` to be
imported (it imports nothing itself), then wraps ``SparkSession.__init__`` and
``SparkSession.Builder.getOrCreate``. Every classic session object goes through ``__init__``
(``builder.getOrCreate()``, ``builder.create()``, ``SparkSession.active()`` / ``getActiveSession()`` when
they build one, ``newSession()``, the ``pyspark`` shell), and ``getOrCreate`` also catches a session made
before the hook was armed. On each new session :func:`atlas_bridge.spark.install` runs, which is idempotent
per JVM session, so an explicit ``install(spark)`` in the job does not add a second listener.

Nothing here may break a job: every failure is caught, the job goes on without the hook and one warning is
logged per process.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import threading
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger(__name__)

__all__ = [
    "CONF_ENABLED",
    "ENV_SWITCH",
    "boot",
    "disable",
    "enable",
    "instrument_environment",
    "is_armed",
    "mode_from_environment",
    "sitecustomize_dir",
]

ENV_SWITCH = "ATLAS_BRIDGE_SPARK_HOOK"
"""``1``/``true``: every session; ``auto``: sessions whose conf enables it; ``0``/``false``: never."""
CONF_ENABLED = "spark.atlas.hook.atlas_bridge.enabled"
"""Spark conf switch (``spark-defaults.conf`` or ``--conf``); ``false`` opts one job out."""

_TARGET = "pyspark.sql.session"
_WORKER_ENV = "PYTHON_WORKER_FACTORY_"
_SEEN = "_atlas_bridge_auto_seen"
_WRAPPED = "__atlas_bridge_wrapped__"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})

_lock = threading.RLock()
_mode: str | None = None
_finder: _SessionModuleFinder | None = None
_originals: dict[str, Any] = {}
_warned = False


def mode_from_environment(environ: Mapping[str, str]) -> str | None:
    """``"on"`` (every session), ``"conf"`` (sessions whose conf says so) or None (not armed).

    Unset means ``"conf"`` in a Python driver started by ``spark-submit`` (it finds ``PYSPARK_GATEWAY_PORT``
    set by Spark) and nothing elsewhere, so ``spark-defaults.conf`` alone switches spark-submit jobs on.
    Spark's executor-side Python workers (``PYTHON_WORKER_FACTORY_*`` set) create no sessions: never armed.

    >>> mode_from_environment({"ATLAS_BRIDGE_SPARK_HOOK": "1"})
    'on'
    >>> mode_from_environment({"PYSPARK_GATEWAY_PORT": "40000"})
    'conf'
    >>> mode_from_environment({"ATLAS_BRIDGE_SPARK_HOOK": "off", "PYSPARK_GATEWAY_PORT": "40000"}) is None
    True
    """
    if is_python_worker(environ):
        return None
    value = environ.get(ENV_SWITCH, "").strip().lower()
    if value in _TRUE:
        return "on"
    if value == "auto":
        return "conf"
    if value in _FALSE:
        return None
    if value:
        _warn_once(f"{ENV_SWITCH}={value!r} is not one of 1, true, auto, 0, false; the Spark hook stays off")
        return None
    return "conf" if environ.get("PYSPARK_GATEWAY_PORT") else None


def is_python_worker(environ: Mapping[str, str]) -> bool:
    """Whether this process is a PySpark worker (UDFs, ``mapPartitions``) started by an executor."""
    return any(key.startswith(_WORKER_ENV) for key in environ)


def sitecustomize_dir() -> str:
    """The directory ``atlas-bridge instrument`` puts first on ``PYTHONPATH``."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_boot", "site")


def instrument_environment(environ: Mapping[str, str], python: str, *, mode: str = "on") -> dict[str, str]:
    """The environment ``atlas-bridge instrument`` runs its command with.

    The switch (``mode`` ``"on"``, or ``"auto"``: only sessions whose conf enables it), the sitecustomize
    directory first on ``PYTHONPATH``, and, when neither ``PYSPARK_DRIVER_PYTHON`` nor ``PYSPARK_PYTHON``
    names one, ``python`` (an interpreter with atlas-bridge) as spark-submit's driver interpreter.

    >>> env = instrument_environment({"PYTHONPATH": "/x"}, "/venv/bin/python")
    >>> env["ATLAS_BRIDGE_SPARK_HOOK"], env["PYTHONPATH"].endswith(os.pathsep + "/x")
    ('1', True)
    """
    env = dict(environ)
    env[ENV_SWITCH] = "1" if mode == "on" else "auto"
    site_dir = sitecustomize_dir()
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != site_dir]
    env["PYTHONPATH"] = os.pathsep.join([site_dir, *parts])
    if not env.get("PYSPARK_DRIVER_PYTHON") and not env.get("PYSPARK_PYTHON"):
        env["PYSPARK_DRIVER_PYTHON"] = python
    return env


def boot() -> None:
    """Arm from the environment; called by the ``.pth`` file and the ``instrument`` sitecustomize."""
    try:
        mode = mode_from_environment(os.environ)
        if mode is not None:
            enable(mode)
    except Exception as e:  # pragma: no cover - defensive: start-up must never fail
        _warn_once(f"could not arm the Spark hook: {e.__class__.__name__}: {e}")


def enable(mode: str = "on") -> None:
    """Install the hook on sessions created from now on (``mode="conf"``: only where the conf enables it).

    Upgrading ``"conf"`` to ``"on"`` is allowed; calling it again changes nothing else.
    """
    global _mode, _finder
    if mode not in ("on", "conf"):
        msg = f"mode must be 'on' or 'conf', not {mode!r}"
        raise ValueError(msg)
    with _lock:
        if _mode != "on":
            _mode = mode
        module = sys.modules.get(_TARGET)
        if module is not None:
            _patch(module)
        elif _finder is None:
            _finder = _SessionModuleFinder()
            sys.meta_path.insert(0, _finder)


def disable() -> None:
    """Undo :func:`enable`: restore pyspark's methods and drop the finder (installed hooks stay)."""
    global _mode, _finder
    with _lock:
        _mode = None
        if _finder is not None:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(_finder)
            _finder = None
        module = sys.modules.get(_TARGET)
        if module is not None and _originals:
            cls = module.SparkSession
            cls.__init__ = _originals.pop("init")
            cls.Builder.getOrCreate = _originals.pop("getOrCreate")


def is_armed() -> str | None:
    """The current mode (``"on"``/``"conf"``) or None."""
    return _mode


# ---------------------------------------------------------------------------------------------------------
# the import hook


class _SessionModuleFinder:
    """A ``sys.meta_path`` finder that only reacts to ``pyspark.sql.session`` and patches it once loaded."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != _TARGET:
            return None
        for finder in list(sys.meta_path):
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _PatchingLoader(spec.loader)
        return spec


class _PatchingLoader:
    """Runs the real loader, then wraps SparkSession; everything else is the real loader's."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        global _finder
        with _lock:
            if _finder is not None:
                with contextlib.suppress(ValueError):
                    sys.meta_path.remove(_finder)
                _finder = None
            if _mode is not None:
                _patch(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _patch(module: Any) -> None:
    try:
        cls = module.SparkSession
        if getattr(cls.__init__, _WRAPPED, False):
            return
        orig_init = cls.__init__
        orig_get = cls.Builder.getOrCreate

        @functools.wraps(orig_init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            orig_init(self, *args, **kwargs)
            _on_session(self)

        @functools.wraps(orig_get)
        def getOrCreate(self: Any) -> Any:
            session = orig_get(self)
            _on_session(session)
            return session

        setattr(__init__, _WRAPPED, True)
        setattr(getOrCreate, _WRAPPED, True)
        _originals["init"] = orig_init
        _originals["getOrCreate"] = orig_get
        cls.__init__ = __init__
        cls.Builder.getOrCreate = getOrCreate
    except Exception as e:
        _warn_once(f"cannot wrap pyspark's SparkSession: {e.__class__.__name__}: {e}")


# ---------------------------------------------------------------------------------------------------------
# per session


def _on_session(session: Any) -> None:
    """Install on a session the first time this process sees it; never raises."""
    mode = _mode
    if mode is None or session is None:
        return
    try:
        if vars(session).get(_SEEN):
            return
        vars(session)[_SEEN] = True
    except TypeError:  # no __dict__: not a session we know how to hook
        return
    try:
        from atlas_bridge.spark import hook

        if hook._is_connect(session):
            _warn_once("a Spark Connect session has no JVM to listen on; the Spark hook is not installed")
            return
        flag = _conf_switch(session)
        if flag is False or (mode == "conf" and flag is not True):
            logger.debug("Spark hook not switched on for this session (%s=%s)", CONF_ENABLED, flag)
            return
        hook._install(session, automatic=True)
    except Exception as e:
        _warn_once(f"{e.__class__.__name__}: {e}")


def _conf_switch(session: Any) -> bool | None:
    """The session's ``spark.atlas.hook.atlas_bridge.enabled`` (runtime conf, else SparkConf), if set."""
    value = session.conf.get(CONF_ENABLED, None)
    if value is None:
        value = session.sparkContext.getConf().get(CONF_ENABLED)
    if value is None:
        return None
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    msg = f"{CONF_ENABLED} must be true or false, got {value!r}"
    raise ValueError(msg)


def _warn_once(reason: str) -> None:
    global _warned
    with _lock:
        if _warned:
            logger.debug("atlas-bridge Spark hook: %s", reason)
            return
        _warned = True
    logger.warning("atlas-bridge: the Spark hook is not active; the job runs without lineage (%s)", reason)
