"""The scan from end to end: inputs, job, merge, delivery, summary."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atlas_bridge.atlas.limits import DEFAULT_MAX_ENTITIES
from atlas_bridge.bridge.deliver import Delivery, DeliveryStats, SentState, check_resume_state, deliver
from atlas_bridge.bridge.inputs import discover_inputs, plan_units
from atlas_bridge.bridge.job import (
    ExtractStats,
    SchemaStats,
    extract_entities,
    learn_schema_job,
    local_master,
    running_session,
    spark_session,
)
from atlas_bridge.bridge.merge import EntityCollector
from atlas_bridge.bridge.prune import (
    Produced,
    read_record,
    record_path,
    scope_key,
    stale_entities,
    write_record,
)
from atlas_bridge.bridge.prune import prune as prune_entities
from atlas_bridge.bridge.schema import schema_index
from atlas_bridge.bridge.summary import ScanSummary
from atlas_bridge.bridge.types import Progress, ScanOptions
from atlas_bridge.extractors.sql.schema import LearnedTable, TableKey
from atlas_bridge.model import Problem, Severity

SchemaReader = Callable[[list[TableKey]], tuple[list[LearnedTable], set[TableKey], list[str]]]

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)


def scan(
    paths: Sequence[str | os.PathLike[str]],
    delivery: Delivery,
    *,
    namespace: str,
    spark: SparkSession | None = None,
    master: str | None = None,
    options: ScanOptions | None = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    state_dir: str | os.PathLike[str] | None = None,
    resume: bool = True,
    max_entities: int = DEFAULT_MAX_ENTITIES,
    partitions: int | None = None,
    progress: Progress | None = None,
    prune: str = "off",
    schema_reader: SchemaReader | None = None,
) -> ScanSummary:
    """Discover, extract on Spark, merge, convert and deliver; returns the closing report.

    Args:
        paths: files and directories to scan.
        delivery: where batches go (see :class:`SinkDelivery`, :class:`ClientDelivery`).
        namespace: Atlas metadata namespace for qualifiedNames.
        spark: an existing session (tests, notebooks); else one is started on ``master`` and stopped after.
        state_dir: where acknowledged batch hashes are kept; None = no resume state.
        resume: skip batches the state says were acknowledged (False: send all, still record).
        max_entities: largest batch.
        progress: ``progress(phase, done, total)``; the library itself only logs.
        prune: ``off`` (record what this run produced), ``on`` (also delete what the previous run of
            the same scope produced and this one did not), ``dry-run`` (list it); see :mod:`.prune`.
        schema_reader: ``reader(tables)`` -> (tables with columns, tables whose column order is unknown,
            warnings) for the tables the inputs read that neither their DDL nor ``options.schema`` define
            (``--schema-from-atlas``: :func:`atlas_bridge.atlas.schema.read_atlas_schema`).
    """
    options = options or ScanOptions()
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    unreadable: list[Problem] = []  # inputs that cannot be read: problems of their own, the rest goes on
    files, notes = discover_inputs(
        paths, include=include, exclude=exclude, query_field=options.query_field, problems=unreadable
    )
    for note in notes:
        logger.info("%s", note)
    logger.info("found %d input file(s)", len(files))
    timings["discover"] = time.perf_counter() - t0
    if not files:  # nothing to do: no Spark start-up, and the caller says so
        return ScanSummary(
            delivery.target, files, notes, ExtractStats(problems=unreadable), {}, DeliveryStats(), timings
        )

    with _spill_dir() as spill:
        collector = EntityCollector(spill)
        session = spark if spark is not None else running_session()
        own_session = session is None
        if session is None:
            session = spark_session(master)
        elif master is not None and session.sparkContext.master != master:
            logger.warning(
                "a Spark session on %s is running already; using it, not %s",
                session.sparkContext.master,
                master,
            )
        try:
            remote = not local_master(session.sparkContext.master)
            units = plan_units(files, options, ship_content=remote)
            learned: list[LearnedTable] = []
            schema_stats = SchemaStats()
            unordered: set[TableKey] = set()
            schema_warnings: list[str] = []
            # With --schema-from-atlas the tables the inputs read are listed first (a pass of its own,
            # which learns the DDL too); else the schema is learned from the extraction itself.
            learn_in_pass = options.learn_schema and schema_reader is None
            if schema_reader is not None:
                t0 = time.perf_counter()
                options = dataclasses.replace(options, tables_read=True)
                learned, schema_stats, reads = learn_schema_job(
                    session, units, options, partitions=partitions
                )
                if not options.learn_schema:
                    learned = []
                index = schema_index(learned, options.schema, options.default_db)
                unknown = [k for k in reads if index.columns(*k) is None]
                from_atlas, unordered, schema_warnings = schema_reader(unknown)
                schema_stats.from_atlas = len(from_atlas)
                learned = [*learned, *from_atlas]
                logger.info(
                    "schema: %d table(s) read from Atlas of %d looked up", len(from_atlas), len(unknown)
                )
                timings["schema"] = time.perf_counter() - t0
            stats = extract_entities(
                session,
                units,
                options,
                collector,
                namespace=namespace,
                partitions=partitions,
                progress=progress,
                learned=learned,
                unordered=sorted(unordered, key=lambda k: tuple(p or "" for p in k)),
                learn=learn_in_pass,
            )
            if learn_in_pass:
                assert stats.schema is not None
                timings["schema"] = stats.schema.fixed_point_s
            elif schema_reader is not None:
                stats.schema = schema_stats
            stats.problems.extend(
                Problem(message=m, severity=Severity.WARNING, kind="schema") for m in schema_warnings
            )
        except KeyboardInterrupt:
            # Ctrl-C: cancelling the job makes the JVM log broken broadcasts and tasks, with Java stack
            # traces, on the way out. Nothing in them helps once "interrupted" is said: silence log4j first.
            quiet_interrupted(session)
            raise
        finally:
            if own_session:
                session.stop()
            collector.close()
        stats.problems[:0] = unreadable
        timings["extract"] = stats.extract_s
        timings["merge"] = stats.merge_s
        for p in stats.problems:
            log = logger.error if p.severity is Severity.ERROR else logger.warning
            log("%s", p)

        t0 = time.perf_counter()
        collector.finish()  # conversion itself ran on the executors; batches are rendered as they go out
        counts = collector.counts()
        total = collector.batch_count(max_entities)
        timings["convert"] = time.perf_counter() - t0

        state = (
            SentState.for_target(state_dir, f"{delivery.target}|{namespace}")
            if state_dir is not None
            else None
        )
        reset = check_resume_state(state, delivery) if state is not None and resume else None
        keep = getattr(delivery, "keep", None)
        # Only a delivery to Atlas itself records what it produced (to prune it later): no other pays for it.
        client = getattr(delivery, "client", None)
        record = state_dir is not None and client is not None
        produced = Produced()
        batches = collector.batches(max_entities)
        try:
            with StopOnSignals() as stop:
                dstats = deliver(
                    produced.watch(batches) if record else batches,
                    delivery,
                    state,
                    skip_acknowledged=resume,
                    progress=progress,
                    total=total,
                    keep=keep if callable(keep) else None,
                    stop=stop,
                )
        finally:
            if state is not None:
                state.close()
    timings["deliver"] = dstats.deliver_s
    if record:
        assert state_dir is not None
        scope = scope_key(delivery.target, namespace, [str(p) for p in paths])
        _record_and_prune(client, record_path(state_dir, scope), scope, stats, dstats, produced, prune)
    dstats.resume_reset = reset
    if dstats.kept:
        dstats.kept_dir = str(getattr(delivery, "unsent_dir", ""))
    return ScanSummary(delivery.target, files, notes, stats, counts, dstats, timings)


SPILL_PREFIX = "atlas-bridge-scan-"
_OWNER = "owner.json"


class StopOnSignals:
    """While delivering, Ctrl-C (SIGINT) and SIGTERM ask the delivery to stop at the next batch boundary
    (``stop()`` names the signal; the rest is kept for ``push``) instead of ending the process mid-batch;
    a second one interrupts at once. Only in the main thread (signals are delivered there alone)."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopOnSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()

    def __call__(self) -> str | None:
        return self.reason

    def _handler(self, signum: int, frame: Any) -> None:
        if self.reason is not None:
            raise KeyboardInterrupt
        self.reason = signal.Signals(signum).name
        logger.warning("%s: stopping at the next batch boundary; the rest is kept", self.reason)


def _process_start(pid: int) -> str | None:
    """When a process started (clock ticks since boot, from /proc), to tell a reused pid; None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _owner_alive(owner: dict[str, Any]) -> bool:
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return True  # not ours to judge
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a live process of another user
    started = owner.get("started")
    return started is None or _process_start(pid) in (None, started)


def clean_stale_spills(root: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove the temporary folders of scans that died without cleaning up (``kill -9``, a power cut):
    those whose owner (host, pid and start time, recorded in each) is no longer running."""
    removed = []
    host = socket.gethostname()
    for folder in Path(root or tempfile.gettempdir()).glob(SPILL_PREFIX + "*"):
        try:
            owner = json.loads((folder / _OWNER).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # being made, or not a scan's of this version: left alone
        if not isinstance(owner, dict) or owner.get("host") != host or _owner_alive(owner):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            logger.info(
                "removed the temporary folder of a scan that did not end (pid %s): %s", owner["pid"], folder
            )
            removed.append(folder)
    return removed


@contextlib.contextmanager
def _spill_dir() -> Iterator[str]:
    """The scan's temporary folder, with its owner recorded so a later scan can remove it if this process
    is killed; stale ones of dead scans are removed first."""
    with contextlib.suppress(OSError):
        clean_stale_spills()
    with tempfile.TemporaryDirectory(prefix=SPILL_PREFIX) as spill:
        pid = os.getpid()
        owner = {"host": socket.gethostname(), "pid": pid, "started": _process_start(pid)}
        (Path(spill) / _OWNER).write_text(json.dumps(owner, sort_keys=True) + "\n", encoding="utf-8")
        yield spill


def quiet_interrupted(session: Any) -> None:
    """Turn the JVM's logging off, send what it prints on its own (stack traces of its thread pools
    shutting down under cancelled tasks) nowhere, and cancel the running jobs; best effort (the gateway
    may be gone)."""
    sc = session.sparkContext

    def no_stderr() -> None:
        jvm = sc._jvm
        jvm.System.setErr(jvm.java.io.PrintStream(jvm.java.io.OutputStream.nullOutputStream()))

    for step in (lambda: sc.setLogLevel("OFF"), no_stderr, sc.cancelAllJobs):
        with contextlib.suppress(Exception):
            step()


def _record_and_prune(
    client: Any,
    path: Path,
    scope: dict[str, Any],
    stats: ExtractStats,
    dstats: DeliveryStats,
    produced: Produced,
    mode: str,
) -> None:
    """Record what a complete run produced for its scope; with ``prune``, take back what is gone."""
    complete = (
        not dstats.errors
        and not dstats.kept
        and not dstats.interrupted
        and not any(p.severity is Severity.ERROR for p in stats.problems)
    )
    if not complete:
        if mode != "off":
            dstats.prune_note = "not pruned: the run had errors or batches not delivered"
            logger.warning("%s", dstats.prune_note)
        return
    stale = stale_entities(read_record(path), produced.entities)
    if mode != "off":
        dstats.prune_list = [f"{t} {q}" for t, q in stale]
        deleted, errors = prune_entities(client, stale, dry_run=mode == "dry-run")
        dstats.pruned = len(stale) if mode == "dry-run" else deleted
        dstats.errors.extend(errors)
        verb = "would delete" if mode == "dry-run" else "deleted"
        logger.info("prune: %s %d entit(y/ies) earlier runs of this scope made", verb, dstats.pruned)
        if errors:
            return  # keep the old record: the next run tries again
    if mode != "dry-run":
        write_record(path, scope, produced.entities)
