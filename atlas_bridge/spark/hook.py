"""The Spark hook: one line in a PySpark job puts every write's lineage into Atlas.

::

    from atlas_bridge.spark import install
    handle = install(spark)              # settings from kwargs, Spark conf spark.atlas.*, env, properties

A Python object implementing ``org.apache.spark.sql.util.QueryExecutionListener`` is registered through
py4j. Spark calls it on its listener thread after each query; the callback makes no py4j call: it drops
events of plain query actions (collect, count, show) by their name, and puts the QueryExecution reference of
any other on a bounded queue. A daemon worker reads the plan's root class and the query id (one round trip,
by :class:`atlas_bridge.spark.jvm.JvmReader`; what is no write stops there), then the plan's JSON and
the few facts it leaves out (paths, save mode, format, SQL text) in one more round trip (two when a file is
read without a catalog table: the plan is immutable and our reference keeps it), extracts
(:func:`atlas_bridge.spark.plan.extract_spark_plan_lineage`), converts
(:func:`atlas_bridge.atlas.convert.to_atlas_batches`) and emits through a sink; when Atlas is down the
sink keeps batches on disk and resends them later (this job or the next). The job is never slowed or
failed by the hook: everything is caught and counted.

One statement may fire several events (CTAS: the inner file write and the command; saveAsTable: three;
INSERT OVERWRITE DIRECTORY: two). They share their query's exprIds, so the worker groups them by that
signature and keeps the most specific one (the command naming the table). Events of the inner file write
(``funcName == "file source write"``) are skipped in the callback already.

Importing this module needs no pyspark; :func:`install` does.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import datetime
import functools
import getpass
import logging
import queue
import re
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from atlas_bridge.errors import ConfigError
from atlas_bridge.spark.jvm import split_table_name

logger = logging.getLogger(__name__)

__all__ = ["HookStats", "SparkHookHandle", "install", "uninstall"]

_LISTENER_INTERFACE = "org.apache.spark.sql.util.QueryExecutionListener"
_INNER_WRITE = "file source write"
_CHECKPOINTS = frozenset({"checkpoint", "localCheckpoint"})
"""Actions whose event carries the plan a checkpointed DataFrame came from (its LogicalRDD keeps none)."""
_QUERY_ACTIONS = frozenset(
    {
        "collect",
        "collectToPython",
        "collectAsArrowToPython",
        "collectAsList",
        "count",
        "head",
        "first",
        "take",
        "tail",
        "showString",
        "toLocalIterator",
        "toPythonIterator",
        "foreach",
        "foreachPartition",
        "isEmpty",
        "getRowsToPython",
    }
)
"""Dataset actions that only read (their events are dropped in the callback unless resultsets are on)."""
_CHECKPOINT_MEMORY = 64
"""Checkpointed plans remembered per session, newest kept: a write reading an older one says so."""
_CHECKPOINT_DEPTH = 8
"""Checkpoints of checkpoints followed back this far (an iterative job checkpoints every round)."""
_CONF_PREFIX = "spark."
_HOOK_CONF = "spark.atlas.hook.atlas_bridge."
# Hook knobs that are not Settings fields: Spark conf suffix -> install() keyword.
_HOOK_KNOBS = {
    "resultsets": "resultsets",
    "tempViews": "temp_views",
    "coalesceSecs": "coalesce_s",
}
_STOP = object()

_handles: dict[str, SparkHookHandle] = {}
_handles_lock = threading.Lock()


_SPOOL_DRAIN_S = 10.0
"""Once Atlas is given up on at a job's end, the longest wait for the queue to reach the spool (disk)."""


@dataclass
class HookStats:
    """What the hook saw and did; read it from :attr:`SparkHookHandle.stats`."""

    events: int = 0
    """Callbacks received."""
    captured: int = 0
    """Events put on the queue (all but plain query actions, inner file writes and failures)."""
    skipped: int = 0
    """Events ignored: in the callback (plain query actions, inner file writes, failures) or by the worker
    once it read their root class (no write; no query when resultsets are on)."""
    dropped: int = 0
    """Events lost because the queue was full."""
    callback_errors: int = 0
    superseded: int = 0
    """Events of a statement whose lineage came from a more specific event of the same statement."""
    processes: int = 0
    """Lineage processes emitted."""
    openlineage_events: int = 0
    """OpenLineage run events sent (the ``openlineage`` setting)."""
    batches: int = 0
    emit_errors: int = 0
    problems: int = 0
    callback_ns: collections.deque[int] = field(default_factory=lambda: collections.deque(maxlen=10_000))
    """Time spent in each capturing callback (benchmarks)."""
    callback_round_trips: collections.deque[int] = field(
        default_factory=lambda: collections.deque(maxlen=10_000)
    )
    """py4j round trips made by each capturing callback (on Spark's listener thread)."""
    round_trips: collections.deque[int] = field(default_factory=lambda: collections.deque(maxlen=10_000))
    """py4j round trips made for each captured event in all (callback and worker)."""


@dataclass
class _Item:
    event: str
    func_name: str
    root: str
    plan_json: str
    facts: dict[str, Any]
    end_ms: int
    duration_ms: int | None
    seq: int
    qe_id: int | None = None
    target: str | None = None
    """The dataset id written, filled by the worker (not the callback: it parses the plan)."""
    jqe: Any = None
    """The event's QueryExecution (py4j), until the worker has read the plan and facts off it."""
    calls: int = 0
    """py4j round trips made for this event so far."""


@dataclass
class _Group:
    """The events of one statement seen so far, and the one that will be emitted."""

    best: _Item
    priority: int
    min_qe_id: int | None
    deadline: float


def _belongs(qe_id: int | None, group_min: int | None) -> bool:
    """Whether an event is an outer event of a group (its QueryExecution was created earlier)."""
    if qe_id is None or group_min is None or group_min < 0:
        return True
    return qe_id < group_min


@dataclass
class _Flush:
    done: threading.Event = field(default_factory=threading.Event)


class _Listener:
    """The py4j-implemented QueryExecutionListener. Never raises into the JVM."""

    def __init__(self, handle: SparkHookHandle) -> None:
        self._handle = weakref.ref(handle)

    def onSuccess(self, funcName: str, qe: Any, durationNs: int) -> None:
        handle = self._handle()
        if handle is not None:
            handle._on_event("onSuccess", funcName, qe, durationNs)

    def onFailure(self, funcName: str, qe: Any, exception: Any) -> None:
        handle = self._handle()
        if handle is not None:
            handle._on_event("onFailure", funcName, qe, None)

    class Java:
        implements = [_LISTENER_INTERFACE]


class SparkHookHandle:
    """One installed hook: its listener, queue, worker and sink. Returned by :func:`install`."""

    def __init__(
        self,
        spark: Any,
        *,
        settings: Any,
        sink: Any | None,
        resultsets: bool,
        temp_views: bool,
        coalesce_s: float,
        session_id: str,
    ) -> None:
        self.settings = settings
        self.stats = HookStats()
        self.resultsets = resultsets
        self.temp_views = temp_views
        self.coalesce_s = coalesce_s
        self.session_id = session_id
        self._spark = spark
        self._sink = self._with_sender(sink) if sink is not None else None
        self._ol_sink: Any = None
        self._sink_given = sink is not None
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=int(settings.queue_size))
        self._seq = 0
        self._seq_lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._pending: dict[str, _Group] = {}
        self._done: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._done_targets: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._listener: _Listener | None = None
        self._holder: Any = None
        self._worker: threading.Thread | None = None
        self._closed = False
        self._orig_stop: Callable[..., Any] | None = None
        self._stop_was_own = False
        sc = spark.sparkContext
        self.application_id: str = str(sc.applicationId)
        try:
            self.user: str | None = str(sc.sparkUser())
        except Exception:
            self.user = getpass.getuser()
        self._bus = sc._jsc.sc().listenerBus()
        self._reader: Any = None
        """Reads the plan and its facts off the JVM (:class:`atlas_bridge.spark.jvm.JvmReader`)."""
        self._warned_drop = 0
        self._checkpoints: collections.OrderedDict[tuple[int, ...], tuple[str, dict[str, Any]]] = (
            collections.OrderedDict()
        )
        """Output exprIds of a checkpointed DataFrame -> the plan (JSON) and facts it was made from."""
        self._warned_checkpoint = False
        self._shared: Any = None
        """This session's statements that share a process (``convert.SharedProcesses``)."""
        self.automatic = False
        """Installed by the switch (:mod:`atlas_bridge.spark.auto`), not by a call in the job."""
        self.streaming: Any = None
        """Structured Streaming lineage (:class:`atlas_bridge.spark.streaming.StreamTracker`), Spark 3.4+."""

    # -- lifecycle -----------------------------------------------------------------------------------
    def _start(self) -> None:
        from pyspark import SparkContext
        from pyspark.java_gateway import ensure_callback_server_started

        gateway: Any = SparkContext._gateway
        ensure: Any = ensure_callback_server_started
        ensure(gateway)
        from atlas_bridge.spark.jvm import JvmReader

        self._reader = JvmReader(self._spark._jvm)  # compiled before the first event, not in its callback
        self._listener = _Listener(self)
        jvm = self._spark._jvm
        # One JVM proxy, kept, so unregister can hand Spark the very object it registered (P5).
        self._holder = jvm.java.util.ArrayList()
        self._holder.add(self._listener)
        self._invoke_listener_manager("register")
        from atlas_bridge.spark.streaming import attach

        self.streaming = attach(self, self._spark)
        if not self.settings.synchronous:
            self._worker = threading.Thread(target=self._run, name="atlas-bridge-spark-hook", daemon=True)
            self._worker.start()
        atexit.register(self._atexit)
        self._wrap_stop()

    def _invoke_listener_manager(self, method: str) -> None:
        from pyspark import SparkContext

        jvm = self._spark._jvm
        gateway: Any = SparkContext._gateway
        cls = gateway.new_array(jvm.java.lang.Class, 1)
        cls[0] = jvm.java.lang.Class.forName(_LISTENER_INTERFACE)
        lm = self._spark._jsparkSession.listenerManager()
        lm.getClass().getMethod(method, cls).invoke(lm, self._holder.toArray())

    def _wrap_stop(self) -> None:
        """Drain before ``spark.stop()`` shuts the JVM down, so nothing captured is lost."""
        spark = self._spark
        orig = spark.stop
        handle_ref = weakref.ref(self)

        def stop(*args: Any, **kwargs: Any) -> Any:
            handle = handle_ref()
            if handle is not None:
                handle.close()
            return orig(*args, **kwargs)

        try:
            self._stop_was_own = "stop" in vars(spark)
            spark.stop = stop
            self._orig_stop = orig
        except (AttributeError, TypeError):  # pragma: no cover - a session class that forbids it
            logger.debug("cannot wrap spark.stop(); relying on atexit")

    def _atexit(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def flush(self, timeout: float = 30.0) -> bool:
        """Block until every event Spark has delivered so far is extracted and emitted.

        Waits for Spark's listener bus, then for the worker to drain its queue and emit statements held
        for de-duplication, then retries batches the sink kept on disk. True when all of that finished
        within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        try:
            self._bus.waitUntilEmpty(int(max(timeout, 0.001) * 1000))
        except Exception as e:
            logger.debug("listener bus wait failed: %s", e)
        if self.settings.synchronous or self._worker is None or not self._worker.is_alive():
            with self._sync_lock:
                self._drain_inline()
                self._emit_pending(force=True)
                done = threading.Event()
                self._flush_spool(done)
            return done.wait(max(deadline - time.monotonic(), 0.001))
        marker = _Flush()
        try:
            self._queue.put(marker, timeout=max(deadline - time.monotonic(), 0.001))
        except queue.Full:
            return False
        return marker.done.wait(max(deadline - time.monotonic(), 0.001))

    def close(self, timeout: float | None = None) -> None:
        """Flush, stop the worker, close the sink and unregister the listener. Idempotent.

        A job's end waits at most ``timeout`` seconds (``close_timeout_s``, default 5) for Atlas: what is
        not acknowledged by then is written to the spool at once (the next job or ``atlas-bridge push``
        sends it), so an Atlas that is down or slow never holds a finished job for minutes.
        """
        if self._closed:
            return
        timeout = float(self.settings.close_timeout_s) if timeout is None else timeout
        try:
            if not self.flush(timeout):
                go_offline = getattr(self._sink, "go_offline", None)
                if callable(go_offline):
                    msg = "atlas-bridge: Atlas did not take the lineage within %.0fs; keeping it on disk"
                    logger.warning(msg, timeout)
                    go_offline()  # cut the call in flight; the rest goes to the spool, local and fast
                    self.flush(_SPOOL_DRAIN_S)
        finally:
            self._closed = True
            if self._worker is not None and self._worker.is_alive():
                with contextlib.suppress(queue.Full):
                    self._queue.put(_STOP, timeout=1.0)
                self._worker.join(_SPOOL_DRAIN_S)
            with contextlib.suppress(Exception):
                self._invoke_listener_manager("unregister")
            if self.streaming is not None:
                self.streaming.close()
            if self._sink is not None:
                with contextlib.suppress(Exception):
                    self._sink.close()
            if self._ol_sink is not None:
                with contextlib.suppress(Exception):
                    self._ol_sink.close()
            if self._orig_stop is not None:
                with contextlib.suppress(Exception):
                    if self._stop_was_own:
                        self._spark.stop = self._orig_stop
                    else:
                        del self._spark.stop
            with contextlib.suppress(Exception):
                atexit.unregister(self._atexit)
            with _handles_lock:
                if _handles.get(self.session_id) is self:
                    del _handles[self.session_id]

    # -- callback (Spark's listener thread) ----------------------------------------------------------
    def _on_event(self, event: str, func_name: str, qe: Any, duration_ns: int | None) -> None:
        t0 = time.perf_counter_ns()
        self.stats.events += 1
        if self._closed:
            return
        try:
            item, calls = self._capture(event, func_name, qe, duration_ns)
        except Exception as e:
            self.stats.callback_errors += 1
            logger.warning("atlas-bridge: could not capture a %s event (%s): %s", func_name, event, e)
            return
        if item is None:
            self.stats.skipped += 1
            return
        self.stats.callback_ns.append(time.perf_counter_ns() - t0)
        self.stats.callback_round_trips.append(calls)
        if self.settings.synchronous:
            with self._sync_lock:
                self._handle_item(item)
            return
        try:
            self._queue.put_nowait(item)
            self.stats.captured += 1
        except queue.Full:
            self.stats.dropped += 1
            if self._warned_drop == 0 or self.stats.dropped % 100 == 0:
                logger.warning(
                    "atlas-bridge: queue full (%d); %d events dropped so far",
                    self._queue.maxsize,
                    self.stats.dropped,
                )
            self._warned_drop += 1

    def _capture(
        self, event: str, func_name: str, qe: Any, duration_ns: int | None
    ) -> tuple[_Item | None, int]:
        """No py4j call: the event's QueryExecution is queued and the worker reads the rest off it.

        Spark's listener thread waits for this callback, and under load a round trip to the JVM from it
        (a reply to wait for, the GIL to take back from the worker after it) was what made its slow
        tail. The worker reads the plan's root class first and drops what is no write; actions known to
        be plain queries (collect, count, show...) are dropped here already. The analyzed plan is
        immutable and the QueryExecution reference we keep holds it on the JVM, so the worker reads the
        same plan later, off Spark's listener thread.
        """
        if event != "onSuccess" or func_name == _INNER_WRITE:
            return None, 0
        if func_name in _QUERY_ACTIONS and not self.resultsets:
            return None, 0
        with self._seq_lock:
            self._seq += 1
            seq = self._seq
        item = _Item(
            event=event,
            func_name=func_name,
            root="",
            plan_json="",
            facts={},
            end_ms=int(time.time() * 1000),
            duration_ms=int(duration_ns // 1_000_000) if duration_ns is not None else None,
            seq=seq,
            jqe=qe,
        )
        return item, 0

    def _classify(self, item: _Item) -> bool:
        """Read the event's root class and query id (one round trip); False when it is no write to record
        (nor a query, when resultsets are on, nor a checkpoint)."""
        from atlas_bridge.spark.plan import QUERY_ROOTS, WRITE_COMMANDS

        if item.jqe is None:
            return False
        (root, qe_id_text), calls = self._reader.read(item.jqe, [["analyzed", "nodeName"], ["id"]])
        item.calls += calls
        if not isinstance(root, str):
            msg = "the plan's root class cannot be read"
            raise RuntimeError(msg)
        item.root = root
        if isinstance(qe_id_text, str) and qe_id_text.lstrip("-").isdigit():
            item.qe_id = int(qe_id_text)
        if (
            root not in WRITE_COMMANDS
            and not (self.resultsets and root in QUERY_ROOTS)
            and item.func_name not in _CHECKPOINTS
        ):
            item.jqe = None
            return False
        return True

    def _materialize(self, item: _Item) -> None:
        """Read the plan's JSON and the facts it lacks off the kept QueryExecution, then let it go."""
        qe, item.jqe = item.jqe, None
        if qe is None:
            return
        checkpoint = item.func_name in _CHECKPOINTS
        item.plan_json, item.facts, calls = _read_plan(self._reader, qe, item.root, whole=checkpoint)
        item.calls += calls
        self.stats.round_trips.append(item.calls)
        if _LOGICAL_RDD in item.plan_json:  # reads a checkpointed DataFrame (or an RDD)
            found = [
                {"exprIds": list(ids), "plan": plan, **facts}
                for ids in _rdd_outputs(item.plan_json)
                for plan, facts in [self._checkpoints.get(ids, ("", {}))]
                if plan and int(facts.get("depth", 0)) < _CHECKPOINT_DEPTH
            ]
            if found:
                item.facts["checkpoints"] = found
                if checkpoint:  # a checkpoint of a checkpoint: its facts hold the ones before, to a depth
                    item.facts["depth"] = 1 + max(int(f.get("depth", 0)) for f in found)

    def _remember_checkpoint(self, item: _Item) -> None:
        """Keep the plan a checkpointed DataFrame was made from, keyed by its output's exprIds (which its
        LogicalRDD keeps), so a later write that reads it reaches the sources."""
        from atlas_bridge.spark.plan import output_expr_ids

        self._materialize(item)
        ids = output_expr_ids(item.plan_json)
        if ids:
            self._checkpoints[ids] = (item.plan_json, item.facts)
            self._checkpoints.move_to_end(ids)
            while len(self._checkpoints) > _CHECKPOINT_MEMORY:
                self._checkpoints.popitem(last=False)

    # -- worker --------------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            timeout = self._next_deadline()
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                self._safe(lambda: self._emit_pending(force=False))
                continue
            if item is _STOP:
                self._safe(lambda: self._emit_pending(force=True))
                return
            if isinstance(item, _Flush):
                self._safe(lambda: self._emit_pending(force=True))
                self._safe(functools.partial(self._flush_spool, item.done))
                continue
            if callable(item):  # streaming work (atlas_bridge.spark.streaming), in order with the writes
                self._safe(item)
                continue
            self._safe(functools.partial(self._handle_item, item))
            self._safe(lambda: self._emit_pending(force=False))

    def _safe(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as e:
            self.stats.emit_errors += 1
            logger.warning("atlas-bridge: lineage could not be emitted: %s", e, exc_info=True)

    def _drain_inline(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, _Item):
                self._handle_item(item)
            elif callable(item):
                item()
            elif isinstance(item, _Flush):
                item.done.set()

    def _next_deadline(self) -> float | None:
        if not self._pending:
            return None
        soonest = min(g.deadline for g in self._pending.values())
        return max(soonest - time.monotonic(), 0.0)

    def _handle_item(self, item: _Item) -> None:
        """Group the events of one statement; emit at once when the statement's last event arrives.

        Events of one statement share their query's exprIds (the signature). Spark creates the outer
        command's QueryExecution before the inner ones it runs, and the outer event arrives last: an
        event whose QueryExecution id is *lower* than the group's belongs to it; a higher id is the same
        statement run again (a loop), a new group.
        """
        from atlas_bridge.spark.plan import plan_identity, write_priority

        if not item.root and not self._classify(item):
            self.stats.skipped += 1
            return
        if item.func_name in _CHECKPOINTS:
            self._remember_checkpoint(item)
            return
        self._materialize(item)
        if self.streaming is not None and self.streaming.take_batch_write(item):
            return  # a foreachBatch write: linked to its stream's sources, once per run
        sig, target = plan_identity(item.plan_json, item.facts)
        if sig is None:
            self._emit(item)
            return
        prio = write_priority(item.root)
        done = self._done.get(sig)
        if done is not None and _belongs(item.qe_id, done):
            self.stats.superseded += 1
            return
        item.target = target
        done_target = self._done_targets.get(target) if target is not None else None
        if done_target is not None and item.qe_id is not None and item.qe_id < done_target:
            # The outer command of a statement whose inner write was emitted already (saveAsTable in
            # append mode: its query's exprIds differ from the inner CTAS's, so the signatures do too).
            self.stats.superseded += 1
            return
        group = self._pending.get(sig)
        if group is not None and not _belongs(item.qe_id, group.min_qe_id):
            del self._pending[sig]  # the same statement again: the earlier run is complete
            self._finish(sig, group)
            group = None
        if group is None:
            group = _Group(
                best=item, priority=prio, min_qe_id=item.qe_id, deadline=time.monotonic() + self.coalesce_s
            )
            self._pending[sig] = group
        else:
            self.stats.superseded += 1
            if prio > group.priority:
                group.best, group.priority = item, prio
            if item.qe_id is not None and (group.min_qe_id is None or item.qe_id < group.min_qe_id):
                group.min_qe_id = item.qe_id
            group.deadline = time.monotonic() + self.coalesce_s
        if item.root in _FINAL_ROOTS:
            del self._pending[sig]
            self._finish(sig, group)

    def _finish(self, sig: str, group: _Group) -> None:
        self._done[sig] = group.min_qe_id if group.min_qe_id is not None else -1
        self._done.move_to_end(sig)
        while len(self._done) > 1024:
            self._done.popitem(last=False)
        target = group.best.target
        if target is not None and group.min_qe_id is not None:
            self._done_targets[target] = group.min_qe_id
            self._done_targets.move_to_end(target)
            while len(self._done_targets) > 1024:
                self._done_targets.popitem(last=False)
        self._emit(group.best)

    def _emit_pending(self, *, force: bool) -> None:
        now = time.monotonic()
        for sig, group in sorted(self._pending.items(), key=lambda kv: kv[1].best.seq):
            if force or group.deadline <= now:
                del self._pending[sig]
                self._finish(sig, group)

    def _emit(self, item: _Item) -> None:
        from atlas_bridge.spark.plan import extract_spark_plan_lineage

        result = extract_spark_plan_lineage(
            item.plan_json,
            item.facts,
            event=item.event,
            func_name=item.func_name,
            resultsets=self.resultsets,
            temp_views=self.temp_views,
        )
        for p in result.problems:
            self.stats.problems += 1
            if p.kind == "checkpoint" and not self._warned_checkpoint:
                self._warned_checkpoint = True  # once per session: a loop over checkpoints would flood
                logger.warning("atlas-bridge: %s (further cases are logged at INFO)", p.message)
            else:
                logger.info("atlas-bridge: %s event %s: %s", item.root, item.func_name, p.message)
        lineage = result.lineage
        if not lineage.processes:
            return
        from atlas_bridge.atlas.convert import RunInfo, SharedProcesses, to_atlas_batches

        if self._shared is None:
            self._shared = SharedProcesses(self.settings.namespace)
        count = len(lineage.processes)
        lineage = self._shared.add(lineage)  # a process shared by statements: their union, whole
        start_ms = item.end_ms - item.duration_ms if item.duration_ms is not None else None
        sql = item.facts.get("sql") if isinstance(item.facts.get("sql"), str) else None
        run = RunInfo(
            run_id=f"{self.application_id}:{self.session_id[:8]}:{item.seq}",
            user=self.user,
            start_ms=start_ms,
            end_ms=item.end_ms,
            application_id=self.application_id,
            query_text=sql or "",  # this run's own text ("" when none), not its shared process's
            status="SUCCESS" if item.event == "onSuccess" else "FAILED",
        )
        batches = to_atlas_batches(lineage, namespace=self.settings.namespace, run=run)
        sink = self._get_sink()
        for batch in batches:
            sink.emit(batch)
            self.stats.batches += 1
        self.stats.processes += count
        if getattr(self.settings, "openlineage", None):
            self._send_openlineage(lineage, run)

    def _send_openlineage(self, lineage: Any, run: Any) -> None:
        """The statement as OpenLineage run events too (the ``openlineage`` setting: a URL or a folder).
        A failure is logged, never raised: the job goes on, and Atlas delivery is not touched."""
        from atlas_bridge.errors import AtlasBridgeError
        from atlas_bridge.openlineage.write import lineage_to_events

        try:
            if self._ol_sink is None:
                from atlas_bridge.openlineage.sink import make_event_sink

                self._ol_sink = make_event_sink(str(self.settings.openlineage), self.settings)
            when = run.end_ms if run.end_ms is not None else int(time.time() * 1000)
            stamp = datetime.datetime.fromtimestamp(when / 1000, tz=datetime.timezone.utc)
            events = lineage_to_events(
                lineage,
                namespace=self.settings.namespace,
                event_time=stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                run=run,
                job_namespace=self.settings.openlineage_job_namespace,
            )
            for event in events:
                self._ol_sink.emit(event)
                self.stats.openlineage_events += 1
        except (AtlasBridgeError, OSError) as e:
            logger.warning("atlas-bridge: OpenLineage events not sent: %s", e)

    def _get_sink(self) -> Any:
        if self._sink is None:
            from atlas_bridge.atlas.sink import make_sink

            self._sink = self._with_sender(make_sink(self.settings))
            self._flush_spool()
        return self._sink

    def _with_sender(self, sink: Any) -> Any:
        """A sink with a spool gets a sender thread (:class:`~atlas_bridge.atlas.sink.QueuedSink`): the
        worker then never waits on Atlas, so a slow Atlas fills no queue and drops no event; batches
        beyond ``queue_size`` waiting for Atlas wait on disk."""
        from atlas_bridge.atlas.sink import AtlasSink, QueuedSink

        if self.settings.synchronous or not isinstance(sink, AtlasSink) or sink.spool_dir is None:
            return sink
        return QueuedSink(sink, max_pending=int(self.settings.queue_size))

    def _flush_spool(self, done: threading.Event | None = None) -> None:
        """Retry the spool; ``done`` is set once that is over (by the sender, in order, if there is one)."""
        try:
            sink = self._get_sink()
            flush_then = getattr(sink, "flush_then", None)
            if callable(flush_then):
                flush_then(done if done is not None else threading.Event())
                done = None
                return
            pending = getattr(sink, "spool_pending", None)
            flush = getattr(sink, "flush_spool", None)
            if pending is None or flush is None:
                return
            try:
                if pending():
                    flush()
            except Exception as e:
                logger.info("atlas-bridge: kept lineage not sent yet: %s", e)
        finally:
            if done is not None:
                done.set()


_FINAL_ROOTS = frozenset(
    {
        "CreateDataSourceTableAsSelectCommand",
        "CreateHiveTableAsSelectCommand",
        "OptimizedCreateHiveTableAsSelectCommand",
        "InsertIntoDataSourceDirCommand",
        "InsertIntoHiveDirCommand",
        "SaveAsV1TableCommand",
        "CreateViewCommand",
        "CreateTableAsSelect",
        "ReplaceTableAsSelect",
        "AppendData",
        "OverwriteByExpression",
        "OverwritePartitionsDynamic",
        "MergeIntoTable",
    }
)
"""Roots that are the last event of their statement: emit at once instead of waiting for company."""


# ---------------------------------------------------------------------------------------------------------
# JVM reads: the plan and what toJSON drops (spark.md §4/§5), as paths read in one round trip.


_V2_WRITES = ("AppendData", "OverwriteByExpression", "OverwritePartitionsDynamic")
_DIR_WRITES = ("InsertIntoDataSourceDirCommand", "InsertIntoHiveDirCommand")
_PLAN = "analyzed"


def _read_plan(reader: Any, qe: Any, root: str, *, whole: bool = False) -> tuple[str, dict[str, Any], int]:
    """(plan JSON, facts, round trips): one read for the plan and its facts, one more for file leaves.

    The plan is ``qe.analyzed().toJSON()``, except for an InsertIntoHadoopFsRelationCommand: its command
    node costs ~45 ms in ``toJSON`` (its query ~1 ms), so that node is built here from four fields.
    ``whole``: the plan is a query (a checkpointed DataFrame's), whose leaves are all read ones.
    """
    import json

    from atlas_bridge.spark.jvm import FAILED

    insert = root == "InsertIntoHadoopFsRelationCommand"
    paths: dict[str, list[Any]] = {}
    if insert:
        paths["query_json"] = [_PLAN, "query", "toJSON"]
        paths["names"] = [_PLAN, "outputColumnNames", ("mkString", "\u0001")]
        paths["table"] = [_PLAN, "catalogTable", "identifier", "quotedString"]
        paths["provider"] = [_PLAN, "catalogTable", "provider"]
        paths["mode"] = [_PLAN, "mode"]
        paths["path"] = [_PLAN, "outputPath"]
        paths["format"] = [_PLAN, "fileFormat"]
    else:
        paths["json"] = [_PLAN, "toJSON"]
    paths["sql"] = [_PLAN, "origin", "sqlText"]
    paths["session"] = ["sparkSession", "sessionUUID"]  # a streaming query's own session: foreachBatch
    if root in _DIR_WRITES:
        paths["location"] = [_PLAN, "storage", "locationUri"]
    elif root == "SaveAsV1TableCommand":
        paths["current_database"] = ["sparkSession", "catalog", "currentDatabase"]
    elif root in _V2_WRITES:
        paths["v2_table"] = [_PLAN, "table", "name"]
    elif root in ("CreateTableAsSelect", "ReplaceTableAsSelect"):
        paths["v2_name"] = [_PLAN, "name"]
    values, calls = reader.read(qe, list(paths.values()))
    got = dict(zip(paths, values, strict=True))

    def need(key: str) -> str:
        value = got[key]
        if not isinstance(value, str):
            msg = f"cannot read {'.'.join(str(s) for s in paths[key])} of a {root}"
            raise RuntimeError(msg)
        return value

    def text(key: str) -> str | None:
        value = got.get(key)
        return value if isinstance(value, str) else None

    if insert:
        names = need("names")
        node: dict[str, Any] = {
            "class": "org.apache.spark.sql.execution.datasources.InsertIntoHadoopFsRelationCommand",
            "num-children": 1,
            "query": 0,
            "outputColumnNames": names.split("\u0001") if names else [],
            "catalogTable": None,
        }
        table = got["table"]
        if table is FAILED:
            need("table")
        if isinstance(table, str):
            node["catalogTable"] = {"identifier": _parse_quoted(table), "provider": text("provider")}
        plan_json = "[" + json.dumps(node) + "," + need("query_json")[1:]
    else:
        plan_json = need("json")

    facts: dict[str, Any] = {}
    nodes = json.loads(plan_json)
    head = nodes[0] if nodes else {}
    sql = text("sql")
    if sql:
        facts["sql"] = sql
    session = text("session")
    if session:
        facts["session"] = session
    write: dict[str, Any] = {}
    query_field = "plan" if root == "CreateViewCommand" else "query"
    if insert:
        write["mode"] = need("mode")
        if not head.get("catalogTable"):
            write["path"] = need("path")
            write["format"] = need("format")
    elif root in _DIR_WRITES:
        loc = text("location")
        if loc:
            write["path"] = loc
    elif root == "SaveAsV1TableCommand":
        desc = head.get("tableDesc") or {}
        if not (desc.get("identifier") or {}).get("database"):
            facts["current_database"] = need("current_database")
    elif root in _V2_WRITES:
        write["table"] = split_table_name(need("v2_table"))
    elif root in ("CreateTableAsSelect", "ReplaceTableAsSelect"):
        write["table"] = split_table_name(need("v2_name").split(",")[-1].strip())
    if write:
        facts["write"] = write
    leaves, more = _read_leaves(reader, qe, root, nodes, head, None if whole else query_field)
    if leaves:
        facts["leaves"] = leaves
    return plan_json, facts, calls + more


def _read_leaves(
    reader: Any, qe: Any, root: str, nodes: list[Any], head: dict[str, Any], query_field: str | None
) -> tuple[list[dict[str, Any]], int]:
    """Identity of the leaves the JSON cannot name (file reads without a catalog table, V2 relations).

    ``query_field`` None: the whole plan is the query."""
    query_nodes = head.get(query_field) if query_field is not None else None
    base: list[Any]
    if query_field is None:
        query_nodes_list, base = nodes, [_PLAN]
    elif root == "MergeIntoTable":  # target and source are both children
        query_nodes_list, base = nodes[1:], [_PLAN]
    elif isinstance(query_nodes, list):
        query_nodes_list, base = query_nodes, [_PLAN, query_field]
    elif isinstance(query_nodes, int):
        query_nodes_list, base = nodes[1:], [_PLAN, query_field]
    else:
        return [], 0
    needed = _leaves_needing_facts(query_nodes_list)
    if not needed:
        return [], 0
    paths: list[list[Any]] = []
    for index, _ids, kind in needed:
        leaf = [*base, "collectLeaves", ("apply", index)]
        if kind == "file":
            paths.append([*leaf, "relation", "location", "rootPaths", ("mkString", "\n")])
            paths.append([*leaf, "relation", "fileFormat"])
            paths.append([])
        else:  # a V2 file table (spark.sql.sources.useV1SourceList without the format), else by name
            paths.append([*leaf, "table", "paths", ("mkString", "\n")])
            paths.append([*leaf, "table", "formatName"])
            paths.append([*leaf, "table", "name"])
    values, calls = reader.read(qe, [p for p in paths if p])
    it = iter(values)
    leaves: list[dict[str, Any]] = []
    for index, expr_ids, kind in needed:
        roots, fmt = next(it), next(it)
        name = next(it) if kind != "file" else None
        entry: dict[str, Any] = {"exprIds": expr_ids}
        if isinstance(roots, str) and isinstance(fmt, str):
            entry["paths"] = [p for p in roots.split("\n") if p]
            entry["format"] = fmt
        elif kind != "file" and isinstance(name, str):
            entry["table"] = split_table_name(name)
        else:
            logger.debug("leaf %d has no readable identity", index)
            continue
        leaves.append(entry)
    return leaves, calls


_LOGICAL_RDD = "org.apache.spark.sql.execution.LogicalRDD"


def _rdd_outputs(plan_json: str) -> list[tuple[int, ...]]:
    """The output exprIds of each LogicalRDD leaf of a plan (a checkpointed DataFrame keeps its plan's)."""
    import json

    from atlas_bridge.spark.plan import rdd_leaf_outputs

    try:
        return rdd_leaf_outputs(json.loads(plan_json))
    except (ValueError, TypeError):
        return []


def _parse_quoted(text: str) -> dict[str, Any]:
    """```cat`.`db`.`t``` -> TableIdentifier-like dict."""
    parts = [p.replace("``", "`") for p in re.findall(r"`((?:[^`]|``)*)`", text)] or text.split(".")
    out: dict[str, Any] = {"table": parts[-1]}
    if len(parts) >= 2:
        out["database"] = parts[-2]
    if len(parts) >= 3:
        out["catalog"] = ".".join(parts[:-2])
    return out


def _leaves_needing_facts(items: list[dict[str, Any]]) -> list[tuple[int, list[int], str]]:
    """(index among the plan's leaves in pre-order, output exprIds, kind) of leaves JSON cannot name."""
    out: list[tuple[int, list[int], str]] = []
    leaf_index = 0
    for d in items:
        if int(d.get("num-children", 0) or 0) != 0:
            continue
        cls = str(d.get("class", "")).rsplit(".", 1)[-1]
        kind = None
        if cls == "LogicalRelation" and not d.get("catalogTable"):
            kind = "file"
        elif cls in ("DataSourceV2Relation", "DataSourceV2ScanRelation"):
            kind = "v2"
        if kind is not None:
            ids: list[int] = []
            for attr in d.get("output") or []:
                node = attr[0] if isinstance(attr, list) and attr else attr
                if isinstance(node, dict):
                    xid = (node.get("exprId") or {}).get("id")
                    if isinstance(xid, int):
                        ids.append(xid)
            out.append((leaf_index, ids, kind))
        leaf_index += 1
    return out


# ---------------------------------------------------------------------------------------------------------
# install / uninstall


def _is_connect(spark: Any) -> bool:
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return True
    try:
        return getattr(spark, "_jsparkSession", None) is None
    except Exception:
        return True


def _spark_conf(spark: Any) -> dict[str, str]:
    """``spark.atlas.*`` entries of the SparkConf and the session's runtime conf."""
    out: dict[str, str] = {}
    try:
        for key, value in spark.sparkContext.getConf().getAll():
            if key.startswith("spark.atlas."):
                out[key] = value
    except Exception as e:
        logger.debug("cannot read SparkConf: %s", e)
    return out


def _settings_from_conf(conf: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split ``spark.atlas.*`` into Settings fields (Atlas property names) and hook knobs."""
    from atlas_bridge.config import fields_from_properties

    props = {k[len(_CONF_PREFIX) :]: v for k, v in conf.items()}
    fields = fields_from_properties(props)
    knobs: dict[str, Any] = {}
    for suffix, kw in _HOOK_KNOBS.items():
        value = conf.get(_HOOK_CONF + suffix)
        if value is not None:
            knobs[kw] = value
    return fields, knobs


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def install(
    spark: Any,
    *,
    settings: Any | None = None,
    sink: Any | None = None,
    resultsets: bool | None = None,
    temp_views: bool | None = None,
    coalesce_s: float | None = None,
    **setting_overrides: Any,
) -> SparkHookHandle:
    """Register the lineage listener on ``spark`` (idempotent per session) and return its handle.

    A session has at most one listener: a second call returns the installed handle. When the hook was
    installed automatically (:mod:`atlas_bridge.spark.auto`) and this call passes arguments, the automatic
    hook is flushed and replaced by one with these arguments, so the job's own settings win.

    Args:
        spark: a classic (JVM-backed) ``SparkSession``.
        settings: an :class:`atlas_bridge.config.Settings`; else built from ``setting_overrides`` >
            Spark conf ``spark.atlas.*`` (Atlas property names, e.g. ``spark.atlas.rest.address``,
            ``spark.atlas.metadata.namespace``, ``spark.atlas.hook.atlas_bridge.queueSize``) > environment >
            ``atlas-application.properties``.
        sink: where batches go (default: ``make_sink(settings)``: Atlas with an on-disk spool, or files).
        resultsets: also record queries that write nothing (collect, show) as resultsets.
        temp_views: record temp view creation as view lineage (default: temp views are transparent).
        coalesce_s: how long a write waits for later events of the same statement (default 2 s).

    Raises:
        ConfigError: under Spark Connect (no JVM to listen on) or with bad settings.
    """
    explicit = any(v is not None for v in (settings, sink, resultsets, temp_views, coalesce_s)) or bool(
        setting_overrides
    )
    return _install(
        spark,
        automatic=False,
        replace_automatic=explicit,
        settings=settings,
        sink=sink,
        resultsets=resultsets,
        temp_views=temp_views,
        coalesce_s=coalesce_s,
        **setting_overrides,
    )


def _install(
    spark: Any,
    *,
    automatic: bool,
    replace_automatic: bool = False,
    settings: Any | None = None,
    sink: Any | None = None,
    resultsets: bool | None = None,
    temp_views: bool | None = None,
    coalesce_s: float | None = None,
    **setting_overrides: Any,
) -> SparkHookHandle:
    if _is_connect(spark):
        msg = (
            "atlas_bridge.spark.install() needs a classic SparkSession with a JVM driver; under Spark "
            "Connect no listener can be registered from the client. Install a JVM listener on the "
            "Connect server instead."
        )
        raise ConfigError(msg)
    try:
        session_id = str(spark._jsparkSession.sessionUUID())
    except Exception as e:
        msg = f"cannot reach the Spark session's JVM: {e}"
        raise ConfigError(msg) from e
    with _handles_lock:
        existing = _handles.get(session_id)
    if existing is not None and not existing._closed:
        if not (replace_automatic and existing.automatic):
            return existing
        logger.info("atlas-bridge: replacing the automatic Spark hook by the job's install() arguments")
        existing.close()
    with _handles_lock:
        existing = _handles.get(session_id)
        if existing is not None and not existing._closed:  # another thread won
            return existing
        conf_fields, knobs = _settings_from_conf(_spark_conf(spark))
        if settings is None:
            from atlas_bridge.config import Settings

            settings = Settings.load(**{**conf_fields, **setting_overrides})
        elif setting_overrides:
            settings = settings.model_copy(update=setting_overrides)
        handle = SparkHookHandle(
            spark,
            settings=settings,
            sink=sink,
            resultsets=_as_bool(resultsets if resultsets is not None else knobs.get("resultsets", False)),
            temp_views=_as_bool(temp_views if temp_views is not None else knobs.get("temp_views", False)),
            coalesce_s=float(coalesce_s if coalesce_s is not None else knobs.get("coalesce_s", 2.0)),
            session_id=session_id,
        )
        handle.automatic = automatic
        if settings.disabled:
            logger.info("atlas-bridge Spark hook disabled by settings")
            handle._closed = True
            return handle
        try:
            handle._start()
        except BaseException:
            # Leave the session as if the hook had never been there.
            handle._closed = True
            with contextlib.suppress(Exception):
                handle._invoke_listener_manager("unregister")
            with contextlib.suppress(Exception):
                atexit.unregister(handle._atexit)
            if handle._worker is not None:
                with contextlib.suppress(queue.Full):
                    handle._queue.put_nowait(_STOP)
            raise
        _handles[session_id] = handle
        logger.info("atlas-bridge Spark hook installed on session %s", session_id)
        return handle


def uninstall(spark: Any, timeout: float | None = None) -> bool:
    """Flush and remove the hook of this session; False when none was installed.

    ``timeout``: the most to wait for Atlas (default ``close_timeout_s``); the rest goes to the spool.
    """
    try:
        session_id = str(spark._jsparkSession.sessionUUID())
    except Exception:
        return False
    with _handles_lock:
        handle = _handles.get(session_id)
    if handle is None:
        return False
    handle.close(timeout)
    return True
