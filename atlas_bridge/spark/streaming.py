"""Structured Streaming lineage for the Spark hook: one process per streaming query, runs as executions.

:func:`atlas_bridge.spark.install` attaches a :class:`StreamTracker` to the session (Spark 3.4+; on older
Spark the hook records batch writes only). It implements PySpark's ``PythonStreamingQueryListener``
interface (what ``spark.streams.addListener`` registers, through the same JVM wrapper) with a light
listener that reads only what it needs off each event in one py4j round trip, where PySpark's own
``StreamingQueryListener`` would convert every progress report field by field:

* **query started** (Spark calls it on the query's thread, before ``start()`` returns): the query's ids and
  a reference to it, two round trips; the rest is queued for the hook's worker thread, which reads the
  query's plan (``logicalPlan().toJSON()``, the sources' and sink's ``toString``) in two more and sends the
  stream's process (sources -> sink, column lineage from the plan,
  :mod:`atlas_bridge.spark.stream_plan`) with one process execution for the run, status RUNNING;
* **progress** (every micro-batch, on Spark's listener thread, never on the batch's): one round trip for
  the row count, counted in memory; the execution is re-sent with the counts at most every
  ``progress_interval_s`` (default 300 s), never a new execution per batch;
* **terminated**: the execution is sent again, with its end time and SUCCEEDED / FAILED.

A query restarted from its checkpoint keeps its id and sources, so it is the same process; each run (Spark's
``runId``) is an execution. ``foreachBatch``: the writes the batch function makes reach the hook as ordinary
write events of the stream's own session; :meth:`StreamTracker.take_batch_write` links them to the stream's
sources (one process per write target, sent once per run, the run's execution attached) instead of sending
the written table alone after every micro-batch. Memory, console and foreachBatch sinks and rate / memory
sources are no datasets.

Per micro-batch the hook does a fixed amount of work whatever the stream's age: one counter update per
progress event, and for a foreachBatch write one plan parse to see that it is known already. What it keeps
is bounded (:data:`_MAX_RUNS` runs, :data:`_MAX_PROCESSES` processes each).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from atlas_bridge.model import Lineage

logger = logging.getLogger(__name__)

__all__ = ["StreamStats", "StreamTracker", "attach"]

_LISTENER_INTERFACE = "org.apache.spark.sql.streaming.PythonStreamingQueryListener"
_MAX_RUNS = 256
"""Runs remembered (active and recently ended: a foreachBatch write event may arrive after its query's
end, the two travel on different listener queues)."""
_MAX_PROCESSES = 64
"""Distinct processes (write targets) remembered per run."""
_Q = "streamingQuery"


@dataclass
class StreamStats:
    """What the streaming side of the hook saw and did (``handle.streaming.stats``)."""

    started: int = 0
    progress: int = 0
    terminated: int = 0
    processes: int = 0
    """Stream and foreachBatch processes sent (each once per run)."""
    executions: int = 0
    """Execution records sent (start, throttled progress, end)."""
    batch_writes: int = 0
    """foreachBatch write events linked to their stream."""
    errors: int = 0
    dropped: int = 0
    callback_ns: collections.deque[int] = field(default_factory=lambda: collections.deque(maxlen=10_000))
    """Time spent in each progress callback (benchmarks)."""


@dataclass
class _Run:
    query_id: str
    run_id: str
    name: str | None
    start_ms: int
    jquery: Any = None
    """The JVM StreamingQuery until the worker has read its plan."""
    stream: Any = None
    """Its :class:`~atlas_bridge.spark.stream_plan.StreamPlan` once read (None: unreadable)."""
    session: str | None = None
    lineages: collections.OrderedDict[tuple[str, str], Lineage] = field(
        default_factory=collections.OrderedDict
    )
    batches: int = 0
    rows: int = 0
    status: str = "RUNNING"
    end_ms: int | None = None
    error: str | None = None
    last_sent: float = 0.0
    ended: bool = False

    @property
    def label(self) -> str:
        return self.name or self.query_id


class _Listener:
    """The py4j side of ``PythonStreamingQueryListener``. Never raises into the JVM."""

    def __init__(self, tracker: StreamTracker) -> None:
        self._tracker = weakref.ref(tracker)

    def _call(self, method: str, jevent: Any) -> None:
        tracker = self._tracker()
        if tracker is None:
            return
        try:
            getattr(tracker, method)(jevent)
        except Exception as e:
            tracker.stats.errors += 1
            logger.warning("atlas-bridge: streaming event %s not recorded: %s", method, e)

    def onQueryStarted(self, jevent: Any) -> None:
        self._call("_on_started", jevent)

    def onQueryProgress(self, jevent: Any) -> None:
        self._call("_on_progress", jevent)

    def onQueryIdle(self, jevent: Any) -> None:
        return None

    def onQueryTerminated(self, jevent: Any) -> None:
        self._call("_on_terminated", jevent)

    class Java:
        implements = [_LISTENER_INTERFACE]


class StreamTracker:
    """The streaming queries of one hooked session: their listener, runs and lineage."""

    def __init__(self, handle: Any, *, progress_interval_s: float = 300.0) -> None:
        self._handle = weakref.ref(handle)
        self.progress_interval_s = progress_interval_s
        self.stats = StreamStats()
        self._runs: collections.OrderedDict[str, _Run] = collections.OrderedDict()
        self._by_session: collections.OrderedDict[str, _Run] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._jsqm: Any = None
        self._jlistener: Any = None

    # -- lifecycle -----------------------------------------------------------------------------------
    def start(self, spark: Any) -> None:
        jvm = spark._jvm
        self._jsqm = spark._jsparkSession.streams()
        wrapper = jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper
        self._listener = _Listener(self)
        self._jlistener = wrapper(self._listener)
        self._jsqm.addListener(self._jlistener)

    def close(self) -> None:
        """Remove the listener (what is queued already is still sent by the hook's worker)."""
        if self._jlistener is not None and self._jsqm is not None:
            with contextlib.suppress(Exception):
                self._jsqm.removeListener(self._jlistener)
        self._jlistener = None

    # -- listener side (Spark's threads): small and bounded ------------------------------------------
    def _reader(self) -> Any:
        handle = self._handle()
        return None if handle is None else handle._reader

    def _on_started(self, jevent: Any) -> None:
        reader = self._reader()
        if reader is None:
            return
        (qid, run_id, name), _ = reader.read(jevent, [["id", "toString"], ["runId", "toString"], ["name"]])
        if not isinstance(qid, str) or not isinstance(run_id, str):
            return
        self.stats.started += 1
        run = _Run(
            query_id=qid,
            run_id=run_id,
            name=name if isinstance(name, str) and name else None,
            start_ms=int(time.time() * 1000),
            jquery=self._jsqm.get(qid),
        )
        with self._lock:
            self._runs[run_id] = run
            while len(self._runs) > _MAX_RUNS:
                self._runs.popitem(last=False)
        self._submit(functools.partial(self._begin, run))

    def _on_progress(self, jevent: Any) -> None:
        t0 = time.perf_counter_ns()
        reader = self._reader()
        if reader is None:
            return
        (run_id, rows), _ = reader.read(
            jevent, [["progress", "runId", "toString"], ["progress", "numInputRows"]]
        )
        self.stats.progress += 1
        run = self._runs.get(run_id) if isinstance(run_id, str) else None
        if run is not None:
            run.batches += 1
            if isinstance(rows, str) and rows.lstrip("-").isdigit():
                run.rows += max(int(rows), 0)
            now = time.monotonic()
            if run.stream is not None and now - run.last_sent >= self.progress_interval_s:
                run.last_sent = now
                self._submit(functools.partial(self._send_run, run))
        self.stats.callback_ns.append(time.perf_counter_ns() - t0)

    def _on_terminated(self, jevent: Any) -> None:
        reader = self._reader()
        if reader is None:
            return
        (run_id, error), _ = reader.read(jevent, [["runId", "toString"], ["exception"]])
        self.stats.terminated += 1
        run = self._runs.get(run_id) if isinstance(run_id, str) else None
        if run is None:
            return
        run.end_ms = int(time.time() * 1000)
        run.status = "FAILED" if isinstance(error, str) and error else "SUCCEEDED"
        run.error = error.splitlines()[0][:500] if isinstance(error, str) and error else None
        self._submit(functools.partial(self._end, run))

    def _submit(self, task: Callable[[], None]) -> None:
        """Hand work to the hook's worker (in order with the batch writes), inline when synchronous."""
        handle = self._handle()
        if handle is None or handle._closed:
            return
        if handle.settings.synchronous or handle._worker is None:
            with handle._sync_lock:
                self._safe(task)
            return
        try:
            handle._queue.put_nowait(functools.partial(self._safe, task))
        except Exception:
            self.stats.dropped += 1

    def _safe(self, task: Callable[[], None]) -> None:
        try:
            task()
        except Exception as e:
            self.stats.errors += 1
            logger.warning("atlas-bridge: streaming lineage not sent: %s", e, exc_info=True)

    # -- worker side ---------------------------------------------------------------------------------
    def _begin(self, run: _Run) -> None:
        """Read the query's plan, send its process and the run's execution (RUNNING)."""
        from atlas_bridge.spark.stream_plan import (
            extract_stream_lineage,
            prepare_stream,
            source_leaf_paths,
        )

        jquery, run.jquery = run.jquery, None
        reader = self._reader()
        if jquery is None or reader is None:
            return
        import json

        if not self._initialized(reader, jquery):
            logger.info("atlas-bridge: streaming query %s did not start; no lineage", run.label)
            return
        paths: list[list[Any]] = [
            [_Q, "logicalPlan", "toJSON"],
            [_Q, "sink", "toString"],
            [_Q, "sink", "getClass", "getName"],
            [_Q, "sparkSessionForStream", "sessionUUID"],
            [_Q, "logicalPlan", "writeOptions", ("get", "topic")],
            [_Q, "logicalPlan", "relation", "table", "name"],
        ]
        (plan_json, sink, sink_class, session, topic, sink_table), _ = reader.read(jquery, paths)
        if not isinstance(plan_json, str):
            logger.info("atlas-bridge: the plan of streaming query %s cannot be read", run.label)
            return
        plan = json.loads(plan_json)
        leaves = source_leaf_paths(plan)
        texts: list[Any] = []
        if leaves:
            leaf_paths: list[list[Any]] = [
                [_Q, "logicalPlan", "collectLeaves", ("apply", i), *p] for i, p in leaves
            ]
            texts, _ = reader.read(jquery, leaf_paths)
        facts = {
            "sources": {i: t for (i, _p), t in zip(leaves, texts, strict=False) if isinstance(t, str)},
            "sink": sink if isinstance(sink, str) else None,
            "sink_class": sink_class if isinstance(sink_class, str) else None,
            "topic": topic if isinstance(topic, str) else None,
            "sink_table": sink_table if isinstance(sink_table, str) else None,
        }
        run.stream = prepare_stream(plan, facts)
        if isinstance(session, str):
            run.session = session
            with self._lock:
                self._by_session[session] = run
                while len(self._by_session) > _MAX_RUNS:
                    self._by_session.popitem(last=False)
        result = extract_stream_lineage(run.stream, label=run.label)
        self._log_problems(result.problems)
        if result.lineage.processes:
            run.lineages[("stream", "")] = result.lineage
            self.stats.processes += len(result.lineage.processes)
        run.last_sent = time.monotonic()
        self._send_run(run)

    @staticmethod
    def _initialized(reader: Any, jquery: Any, timeout: float = 30.0) -> bool:
        """Wait (bounded) until the query's thread has built its plan: ``logicalPlan`` is a lazy value the
        query's thread must initialise itself (in its own session and conf); touched from here first, it
        fails or is built in the wrong context. Usually true at once: ``start()`` has returned by then."""
        deadline = time.monotonic() + timeout
        pause = 0.005
        wait = threading.Event()
        while True:
            (state,), _ = reader.read(jquery, [[_Q, "state", "get", "toString"]])
            if state != "INITIALIZING":
                return isinstance(state, str)
            if time.monotonic() >= deadline:
                return False
            wait.wait(pause)
            pause = min(pause * 2, 0.2)

    def _end(self, run: _Run) -> None:
        run.ended = True
        self._send_run(run)

    def take_batch_write(self, item: Any) -> bool:
        """A write event of a stream's own session (a foreachBatch function's write): link it to the
        stream's sources and send its process once per run. True when the event is taken care of."""
        if not self._by_session:
            return False
        session = item.facts.get("session")
        run = self._by_session.get(session) if isinstance(session, str) else None
        if run is None or run.stream is None:
            return False
        from atlas_bridge.spark.plan import plan_identity
        from atlas_bridge.spark.stream_plan import extract_foreach_batch_lineage

        _sig, target = plan_identity(item.plan_json, item.facts)
        # One process per written dataset and run: the 2-3 events of one statement (saveAsTable: the
        # insert, then the command that names the table) and every later batch's write are known already.
        key = ("write", target) if target else (item.root, "")
        self.stats.batch_writes += 1
        if key in run.lineages:
            return True  # known for this run: nothing per batch
        handle = self._handle()
        result = extract_foreach_batch_lineage(
            item.plan_json,
            item.facts,
            run.stream,
            label=run.label,
            temp_views=bool(handle is not None and handle.temp_views),
        )
        if result is None:
            return False
        self._log_problems(result.problems)
        if len(run.lineages) >= _MAX_PROCESSES:
            return True
        run.lineages[key] = result.lineage
        if result.lineage.processes:
            self.stats.processes += len(result.lineage.processes)
            self._send(run, result.lineage)
        return True

    def _send_run(self, run: _Run) -> None:
        for lineage in list(run.lineages.values()):
            self._send(run, lineage)

    def _send(self, run: _Run, lineage: Lineage) -> None:
        handle = self._handle()
        if handle is None or not lineage.processes:
            return
        from atlas_bridge.atlas.convert import RunInfo, to_atlas_batches

        info = RunInfo(
            run_id=f"{handle.application_id}:{run.run_id}",
            user=handle.user,
            start_ms=run.start_ms,
            end_ms=run.end_ms,
            application_id=handle.application_id,
            status=run.status,
            batches=run.batches,
            input_rows=run.rows,
            message=run.error,
        )
        sink = handle._get_sink()
        for batch in to_atlas_batches(lineage, namespace=handle.settings.namespace, run=info):
            sink.emit(batch)
            handle.stats.batches += 1
        self.stats.executions += len(lineage.processes)

    def _log_problems(self, problems: Any) -> None:
        for p in problems:
            logger.info("atlas-bridge: streaming: %s", p.message)


def attach(handle: Any, spark: Any) -> StreamTracker | None:
    """A tracker listening on ``spark``'s streaming queries; None where PySpark has no Python streaming
    listener (before 3.4), which is logged once."""
    try:
        tracker = StreamTracker(handle)
        tracker.start(spark)
    except Exception as e:
        logger.info("atlas-bridge: no Structured Streaming lineage on this Spark (%s)", e)
        return None
    return tracker
