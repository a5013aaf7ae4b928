"""The PySpark job: the session, partitions computed in parallel, streamed back to the collector."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from atlas_bridge.bridge.extract import decode_unit, extract_partition, pack_unit
from atlas_bridge.bridge.inputs import partition_units
from atlas_bridge.bridge.merge import EntityCollector, task_file_name
from atlas_bridge.bridge.schema import UnitSchema, schema_index
from atlas_bridge.bridge.types import Progress, ScanOptions, WorkUnit
from atlas_bridge.errors import ConfigError
from atlas_bridge.extractors.sql.schema import OVERFLOW, ClosedTable, LearnedTable, SchemaIndex, TableKey
from atlas_bridge.model import PausedGC, Problem

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)


def spark_session(master: str | None = None, *, app_name: str = "atlas-bridge-scan") -> SparkSession:
    """A session for the scan: ``local[*]`` unless told otherwise; workers use this interpreter."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        msg = "the scan runs on PySpark: pip install 'atlas-bridge[spark]' (and Java 17)"
        raise ConfigError(msg) from e

    master = master or "local[*]"
    if local_master(master):
        # A venv's console script may not have its python first on PATH; workers must import atlas_bridge.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    builder = builder.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
    # Pools scheduled fairly: the merge's reads of finished partitions (a pool of their own, see
    # _MergeAhead) take the next free core instead of waiting for the extraction job's last task.
    builder = builder.config("spark.scheduler.mode", "FAIR").config(
        "spark.scheduler.allocation.file", _pools_file()
    )
    level = os.environ.get("ATLAS_BRIDGE_SPARK_LOG", "WARN").upper()
    options = driver_java_options(master, level, configured=_spark_configured())
    if options:
        builder = builder.config("spark.driver.extraJavaOptions", options)
    with _jvm_stderr_filtered(level in _QUIET_LEVELS):
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel(level if level in _QUIET_LEVELS else "WARN")
    return session


_JVM_NOISE = (b"WARNING: Using incubator modules:",)
"""Lines the JVM itself prints at start (no logging configuration reaches them), dropped when quiet."""


@contextlib.contextmanager
def _jvm_stderr_filtered(quiet: bool) -> Iterator[None]:
    """While a JVM is launched, its standard error is a pipe that a thread copies to ours, less the
    JVM's own start-up notices (:data:`_JVM_NOISE`); the JVM keeps the pipe for its life, so later errors
    still reach the terminal. Nothing changes when not ``quiet`` or when a JVM already runs."""
    from pyspark import SparkContext

    if not quiet or SparkContext._gateway is not None:
        yield
        return
    try:
        read_fd, write_fd = os.pipe()
        saved = os.dup(2)
    except OSError:  # no file descriptors to spare: the notices are harmless
        yield
        return
    copier = threading.Thread(target=_copy_stderr, args=(read_fd, saved), name="jvm-stderr", daemon=True)
    copier.start()
    sys.stderr.flush()
    os.dup2(write_fd, 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # this process's stderr is its own again; the JVM keeps the pipe
        os.close(write_fd)


def _copy_stderr(read_fd: int, target_fd: int) -> None:
    with os.fdopen(read_fd, "rb", buffering=0) as pipe, os.fdopen(target_fd, "wb", buffering=0) as out:
        for line in iter(pipe.readline, b""):
            if not line.startswith(_JVM_NOISE):
                out.write(line)


def local_master(master: str | None) -> bool:
    """Whether the executors run on the driver's machine, and so see its files (inputs, the spill)."""
    return (master or "local").startswith("local")


def _spark_configured() -> bool:
    """Whether Spark has a configuration of its own (then the site's settings rule, not ours)."""
    if os.environ.get("SPARK_CONF_DIR"):
        return True
    home = os.environ.get("SPARK_HOME")
    return bool(home) and (Path(str(home)) / "conf" / "spark-defaults.conf").is_file()


def driver_java_options(master: str, level: str, *, configured: bool) -> str:
    """The driver JVM's options for a session the scan makes itself; none when Spark is ``configured``
    (``SPARK_CONF_DIR``, or a ``spark-defaults.conf`` under ``SPARK_HOME``), and ``--driver-java-options``
    in ``PYSPARK_SUBMIT_ARGS`` wins over them."""
    if configured:
        return ""
    options: list[str] = []
    if local_master(master):
        # Local mode: the executors live in this JVM, and the Python workers need every core. The JVM
        # only moves bytes; its C2 compiler threads cost about 3 CPU seconds per 10,000 statements
        # scanned (benchmarks/scan.py), taken from the workers, for code that is not hot enough to pay.
        options.append("-XX:TieredStopAtLevel=1")
    if level in _QUIET_LEVELS:
        # Spark's start-up WARN lines (loopback hostname, native-hadoop...) come before setLogLevel can
        # act: only a log4j2 configuration given at JVM start keeps them off the terminal.
        options.append(f"-Dlog4j.configurationFile={_log4j2(level)}")
    return " ".join(options)


_QUIET_LEVELS = ("ERROR", "FATAL", "OFF")
_LOG4J2 = """rootLogger.level = {level}
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = {level}
logger.repl.additivity = false
logger.repl.appenderRef.stderr.ref = stderr
logger.submit.name = org.apache.spark.deploy.SparkSubmit
logger.submit.level = {level}
logger.submit.additivity = false
logger.submit.appenderRef.stderr.ref = stderr
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = {level}
logger.gateway.additivity = false
logger.gateway.appenderRef.stderr.ref = stderr
logger.context.name = org.apache.spark.SparkContext
logger.context.level = {level}
logger.context.additivity = false
logger.context.appenderRef.stderr.ref = stderr
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
"""


def _log4j2(level: str) -> str:
    return _config_file(f"log4j2-{level.lower()}.properties", _LOG4J2.format(level=level.lower()))


def _config_file(name: str, text: str) -> str:
    """A configuration file Spark reads at start, in the temp folder. One per user: the shared folder may
    hold another user's copy, unreadable to this one (Spark then falls back to its defaults)."""
    user = os.getuid() if hasattr(os, "getuid") else "u"
    path = Path(tempfile.gettempdir()) / f"atlas-bridge-{user}-{name}"
    if not (path.is_file() and os.access(path, os.R_OK) and path.read_text(encoding="utf-8") == text):
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    return str(path)


_POOLS = """<?xml version="1.0"?>
<allocations>
  <pool name="default"><schedulingMode>FIFO</schedulingMode><weight>1</weight><minShare>0</minShare></pool>
  <pool name="{merge}"><schedulingMode>FIFO</schedulingMode><weight>1</weight><minShare>1</minShare></pool>
</allocations>
"""


def _pools_file() -> str:
    """The scheduler pools (a file Spark reads at start)."""
    return _config_file("pools.xml", _POOLS.format(merge=MERGE_POOL))


def running_session() -> SparkSession | None:
    """The session this process already runs (notebook, spark-submit, tests): use it, never stop it."""
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError:
        return None
    if SparkContext._active_spark_context is None:
        return None
    return SparkSession.builder.getOrCreate()


@dataclasses.dataclass
class SchemaStats:
    """What the learning pass did (the report's ``schema`` entry)."""

    tables: int = 0
    pending: int = 0
    rounds: int = 0
    pass_s: float = 0.0
    fixed_point_s: float = 0.0
    from_atlas: int = 0
    on_driver: bool = False
    """Learned on the driver (small inputs), not in a Spark pass."""


@dataclasses.dataclass
class ExtractStats:
    """What the extraction phase saw, summed over partitions."""

    files: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    problems: list[Problem] = dataclasses.field(default_factory=list)
    executor_max_rss_kb: int = 0
    executor_cpu_s: float = 0.0
    """CPU time the executors' Python workers spent on extraction, summed over partitions."""
    partitions: int = 0
    extract_s: float = 0.0
    merge_s: float = 0.0
    merged_during_extraction: int = 0
    """Partitions merged while the extraction job still ran (:class:`_MergeAhead`)."""
    schema: SchemaStats | None = None
    """The schema learned before extraction (None: not learned)."""

    @property
    def statements(self) -> int:
        return sum(int(f["statements"]) for f in self.files.values())

    def add(self, header: Mapping[str, Any]) -> None:
        for name, entry in header["files"].items():
            old = self.files.get(name)
            if old is None:
                self.files[name] = dict(entry)
                continue
            old["statements"] += entry["statements"]
            old["units"] += entry["units"]
            old["users"] = sorted(set(old["users"]) | set(entry["users"]))
            for key, pick in (("first_time_ms", min), ("last_time_ms", max)):
                if key in entry:
                    old[key] = entry[key] if key not in old else pick(old[key], entry[key])
        self.problems.extend(Problem.model_validate(p) for p in header["problems"])
        self.executor_max_rss_kb = max(self.executor_max_rss_kb, int(header.get("max_rss_kb", 0)))
        self.executor_cpu_s += float(header.get("cpu_s", 0.0))

    def absorb(self, other: ExtractStats) -> None:
        """Take in what a merge gathered into ``other``: files, problems, the executors' figures."""
        self.add({"files": other.files, "problems": []})
        self.problems.extend(other.problems)
        self.executor_max_rss_kb = max(self.executor_max_rss_kb, other.executor_max_rss_kb)
        self.executor_cpu_s += other.executor_cpu_s


def _partition(
    spark: SparkSession, units: Sequence[WorkUnit], options: ScanOptions, partitions: int | None
) -> list[list[WorkUnit]]:
    if partitions is not None:
        return partition_units(units, partitions)
    # Enough to balance the cores, and small enough that one partition's result stays small; the last
    # ones smaller, so the cores finish together.
    cores = max(1, spark.sparkContext.defaultParallelism)
    total = sum(max(u.end - u.start, 1) for u in units)
    return partition_units(units, max(cores * 4, -(-total // options.partition_bytes)), taper=cores)


def learn_schema_job(
    spark: SparkSession,
    units: Sequence[WorkUnit],
    options: ScanOptions,
    *,
    partitions: int | None = None,
) -> tuple[list[LearnedTable], SchemaStats, list[TableKey]]:
    """The schema the estate's own DDL defines: CREATE statements read on the executors (one Spark pass;
    only what each unit defines comes back, and the CREATE text of units whose views / CTAS are unresolved),
    or on the driver for inputs up to ``options.schema_driver_bytes``; then the fixed point on the driver
    (:mod:`atlas_bridge.bridge.schema`). Also the tables the inputs read, when ``options.tables_read``."""
    from atlas_bridge.bridge.schema import fixed_point, learn_unit

    t0 = time.perf_counter()
    stats = SchemaStats()
    if not units:
        return [], stats, []
    opts = options

    def run(items: Iterable[list[WorkUnit]]) -> Iterator[UnitSchema]:
        base = SchemaIndex(opts.schema, opts.default_db) if opts.schema else None
        for group in items:
            for unit in group:
                yield learn_unit(unit, opts, base)

    total = sum(u.file.size if u.end < 0 else u.end - u.start for u in units)
    if total <= options.schema_driver_bytes:
        stats.on_driver = True
        results = list(run([list(units)]))
    else:
        sc = spark.sparkContext
        groups = _partition(spark, units, options, partitions)
        sc.setJobDescription(f"atlas-bridge scan: learn the schema from {len(units)} input(s)")
        results = sc.parallelize(groups, len(groups)).mapPartitions(run).collect()
        sc.setJobDescription(None)  # type: ignore[arg-type]  # None clears it
    stats.pass_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    stats.pending = sum(1 for r in results if r.pending)
    learned, stats.rounds = fixed_point(results, options)
    stats.fixed_point_s = time.perf_counter() - t0
    stats.tables = len(learned)
    logger.info(
        "schema: %d table(s) and view(s) learned from the inputs' DDL %s in %.1fs (+%.2fs, %d round(s) "
        "for %d unit(s) with unresolved views)",
        stats.tables,
        "on the driver" if stats.on_driver else "in a Spark pass",
        stats.pass_s,
        stats.fixed_point_s,
        stats.rounds,
        stats.pending,
    )
    reads = sorted({k for r in results for k in r.reads}, key=lambda k: tuple(p or "" for p in k))
    return learned, stats, reads


_WORKER_INDEX: list[tuple[Any, SchemaIndex]] = []
"""The extraction schema of the current broadcast, built once per Python worker (workers are reused
across tasks, and a worker's broadcast value is one object while the broadcast lives)."""


def _worker_index(bc: Any) -> SchemaIndex:
    value = bc.value
    if _WORKER_INDEX and _WORKER_INDEX[0][0] is value:
        return _WORKER_INDEX[0][1]
    learned, given, default_db, unordered = value
    index = schema_index(learned, given, default_db, unordered)
    _WORKER_INDEX[:] = [(value, index)]
    return index


def extract_entities(
    spark: SparkSession,
    units: Sequence[WorkUnit],
    options: ScanOptions,
    collector: EntityCollector,
    *,
    namespace: str,
    partitions: int | None = None,
    progress: Progress | None = None,
    learned: Sequence[LearnedTable] | None = None,
    unordered: Sequence[TableKey] = (),
    learn: bool = False,
    texts_on_disk: bool = True,
) -> ExtractStats:
    """Extract and convert ``units`` on Spark; fold the results into ``collector`` on the driver.

    Partition results are computed in one parallel job and kept by Spark, then streamed back in partition
    order (file-name order) into the collector, which keeps only datasets and columns in memory.
    ``learned``: the schema learned from the inputs; it is broadcast with the given schema (which wins) and
    indexed once per worker.

    ``learn``: learn the schema from the extraction itself (:func:`_learning_rounds`): every unit is
    extracted once with the given schema; what the units' DDL defines is folded into the learned schema;
    only the units whose look-ups it answers differently are extracted again (a few rounds at most), and
    each unit's last extraction is what the collector receives, in unit order.

    ``texts_on_disk``: on a local master, tasks write the process groups' texts into the collector's
    directory (False: they travel with the results, as they do from a cluster's executors).
    """
    stats = ExtractStats()
    if not units:
        return stats
    sc = spark.sparkContext
    groups = _partition(spark, units, options, partitions)
    stats.partitions = len(groups)
    logger.info("extracting %d unit(s) in %d partition(s) on %s", len(units), len(groups), sc.master)
    pairs: list[list[tuple[int, WorkUnit]]] = []
    n = 0
    for group in groups:
        pairs.append([(n + j, u) for j, u in enumerate(group)])
        n += len(group)
    # A local master's tasks write the groups' texts beside the driver's spill (same disk): the driver
    # then neither receives, inflates nor copies them, and Spark keeps an eighth of the bytes.
    local = local_master(sc.master) and texts_on_disk
    job = _ExtractJob(
        spark, options, namespace, per_unit=learn, text_dir=str(collector.task_dir) if local else None
    )
    rounds: list[Any] = []
    ahead = _MergeAhead(sc, collector, len(units), per_unit=learn)
    try:
        t0 = time.perf_counter()
        first = job.start(
            pairs,
            list(learned or ()),
            list(unordered),
            progress=progress,
            total_units=len(units),
            ahead=ahead,
        )
        rounds.append(first)
        final = [0] * len(units)
        if learn:
            stats.schema = SchemaStats()
            _learning_rounds(
                job, first, pairs, units, options, final, rounds, stats.schema, on_redo=ahead.cancel
            )
        stats.extract_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        if len(rounds) == 1:  # what was merged ahead is final
            ahead.finish(progress)
            stats.absorb(ahead.stats)
            stats.merged_during_extraction = ahead.during_job
        else:  # some units were extracted again: merge each unit's last results, from the start
            ahead.cancel()
            collector.reset()
            iters = [iter(r.rdd.toLocalIterator(prefetchPartitions=True)) for r in rounds]
            _merge(iters, final, len(groups), collector, stats, progress, per_unit=learn)
        collector.finish()
        stats.merge_s = time.perf_counter() - t0
    finally:
        ahead.cancel(wait=False)  # stopped already, unless the scan is failing
        for r in rounds:
            r.release()
    counts = collector.counts()
    logger.info(
        "extracted %d statement(s) from %d file(s) in %.1fs; merged in %.1fs more (%d of %d partition(s) "
        "while extracting): %d dataset(s), %d process(es)",
        stats.statements,
        len(stats.files),
        stats.extract_s,
        stats.merge_s,
        stats.merged_during_extraction,
        stats.partitions,
        counts["datasets"],
        counts["processes"],
    )
    return stats


class _ListParam:
    """An accumulator of lists, concatenated (the units' schema entries, as tasks finish); PySpark only
    calls these two methods of an ``AccumulatorParam``."""

    def zero(self, value: list[Any]) -> list[Any]:
        return []

    def addInPlace(self, value1: list[Any], value2: list[Any]) -> list[Any]:  # PySpark's name
        value1.extend(value2)
        return value1


class _Round:
    """One extraction job's results, kept by Spark (memory, then disk) until merged."""

    def __init__(self, rdd: Any, broadcast: Any, schema: Any, finished: Any, partitions: int) -> None:
        self.rdd = rdd
        self.broadcast = broadcast
        self._schema = schema
        self._finished = finished
        self.partitions = partitions
        self.complete = threading.Event()
        """The job has ended: every partition's results are kept."""

    def finished(self, part: int) -> bool:
        """Whether the partition's task has ended (its results kept), as the task results arrive."""
        return self.complete.is_set() or part in self._finished.value

    def schema_results(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """Each unit's ``schema`` entry (tables defined, look-ups), in unit order; read once (the texts are
        let go as they are read: they add up to tens of KB a unit). They reach the driver with the task
        results (an accumulator), so the kept results are not read again for them; a task run twice adds
        its units twice, with the same content."""
        rows = dict(self._schema.value)
        self._schema.value = []
        for i in sorted(rows):
            yield i, json.loads(rows.pop(i))

    def release(self) -> None:
        self.rdd.unpersist()
        if self.broadcast is not None:
            self.broadcast.unpersist()


class _ExtractJob:
    """Runs extraction jobs over (unit index, unit) groups; every payload carries its unit's index."""

    def __init__(
        self,
        spark: SparkSession,
        options: ScanOptions,
        namespace: str,
        *,
        per_unit: bool,
        text_dir: str | None = None,
    ) -> None:
        self.spark = spark
        self.options = options
        self.namespace = namespace
        self.per_unit = per_unit
        self.text_dir = text_dir

    def start(
        self,
        pairs: list[list[tuple[int, WorkUnit]]],
        learned: list[LearnedTable],
        unordered: list[TableKey],
        *,
        progress: Progress | None = None,
        total_units: int = 0,
        ahead: _MergeAhead | None = None,
    ) -> _Round:
        """Run one extraction job; with ``ahead``, its partitions are merged as they finish."""
        from pyspark import StorageLevel

        sc = self.spark.sparkContext
        options = self.options
        bc = (
            sc.broadcast((learned, options.schema, options.default_db, unordered))
            if learned or options.schema
            else None
        )
        # The schema travels in the broadcast, not in every task's closure.
        opts = dataclasses.replace(options, schema=None) if bc is not None else options
        ns, per_unit, text_dir = self.namespace, self.per_unit, self.text_dir
        # Progress counts statements: each task adds its statements and input bytes when it ends (Spark
        # accumulators reach the driver as tasks finish), the input bytes left give the estimate of the
        # rest. Only the first round counts (a later one extracts some units again).
        done_statements = sc.accumulator(0)
        done_bytes = sc.accumulator(0)
        total_bytes = sum(_unit_bytes(u) for group in pairs for _, u in group)
        learned_acc: Any = sc.accumulator([], cast(Any, _ListParam()))
        finished_acc: Any = sc.accumulator([], cast(Any, _ListParam()))

        def run(part: int, items: Iterable[list[tuple[int, WorkUnit]]]) -> Iterator[tuple[str, int, Any]]:
            index = _worker_index(bc) if bc is not None else None
            with _TaskTexts(text_dir) as sink:
                yield from extract_group(items, index, sink if text_dir is not None else None)
            finished_acc.add([part])  # its results are kept by now: the task ends after its last row

        def extract_group(
            items: Iterable[list[tuple[int, WorkUnit]]], index: SchemaIndex | None, sink: _TaskTexts | None
        ) -> Iterator[tuple[str, int, Any]]:
            for group in items:
                statements = 0
                ids = [i for i, _ in group]
                j = 0
                work = [u for _, u in group]
                for tag, payload in extract_partition(
                    work, opts, ns, index, per_unit=per_unit, spill_groups=True, text_sink=sink
                ):
                    if tag == "header":
                        if not per_unit:
                            statements = sum(
                                int(f["statements"]) for f in json.loads(payload)["files"].values()
                            )
                        yield tag, -1, payload
                        continue
                    if tag == "schema":  # to the driver with the task's result, not kept with the rest
                        learned_acc.add([(ids[j], payload)])
                        continue
                    yield tag, ids[j], pack_unit(payload) if tag == "unit" else payload
                    if tag == "uhead":
                        statements += sum(int(f["statements"]) for f in json.loads(payload)["files"].values())
                        j += 1
                done_statements.add(statements)
                done_bytes.add(sum(_unit_bytes(u) for u in work))

        rdd = (
            sc.parallelize(pairs, len(pairs))
            .mapPartitionsWithIndex(run)
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        r = _Round(rdd, bc, learned_acc, finished_acc, len(pairs))
        if ahead is not None:
            ahead.start(r)
        sc.setJobDescription(f"atlas-bridge scan: extract lineage from {total_units} input(s)")
        counted = (lambda: int(done_statements.value), lambda: int(done_bytes.value), total_bytes)
        try:
            with _ProgressTracker(self.spark, len(pairs), progress, counted):
                rdd.count()
        except BaseException:
            if ahead is not None:
                ahead.cancel(wait=False)
            rdd.unpersist()
            raise
        finally:
            sc.setJobDescription(None)  # type: ignore[arg-type]  # None clears it
        r.complete.set()
        if ahead is not None:
            ahead.during_job = ahead.merged
        return r


class _TaskTexts:
    """A task's file of process-group texts (see ``extract_partition``'s ``text_sink``), named by the
    task attempt: a task run again writes a file of its own, and its rows name that one. Opened at the
    first text. A group the task has written already travels with the results instead, as from a
    cluster (the driver keeps a group's first text only): scripts that repeat one job take the disk of
    their distinct groups, a task's worth each."""

    def __init__(self, directory: str | None) -> None:
        self._dir = directory
        self._fh: Any = None
        self._name = ""
        self._offset = 0
        self._groups: set[str] = set()

    def __enter__(self) -> _TaskTexts:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._fh.close()

    def __call__(self, group: str, line: bytes) -> tuple[str, int, int, int] | None:
        if group in self._groups:
            return None
        self._groups.add(group)
        if self._fh is None:
            from pyspark import TaskContext

            assert self._dir is not None
            ctx = TaskContext.get()
            attempt = ctx.taskAttemptId() if ctx is not None else os.getpid()
            self._name = task_file_name(attempt)
            self._fh = open(os.path.join(self._dir, self._name), "xb")  # noqa: SIM115
        at = self._offset
        self._fh.write(line)
        self._offset += len(line)
        return self._name, at, len(line), line.index(b"\t")


def _learning_rounds(
    job: _ExtractJob,
    first: _Round,
    pairs: list[list[tuple[int, WorkUnit]]],
    units: Sequence[WorkUnit],
    options: ScanOptions,
    final: list[int],
    rounds: list[_Round],
    stats: SchemaStats,
    *,
    on_redo: Callable[[], None] | None = None,
) -> None:
    """Learn the schema from the units' own results; extract again the units it would change.

    A unit is extracted again when some table it looked up (and did not define itself) has other columns
    in the schema learned so far than in the schema it was extracted with; the learned schema is folded
    as :func:`atlas_bridge.bridge.schema.fold` folds it (SQL DDL before SQLFlow, then unit order), the
    given schema wins. At most :data:`~atlas_bridge.bridge.schema.MAX_ROUNDS` further rounds (a chain of
    views across files in reverse file order resolves one link per round); ``final`` gets, per unit, the
    round whose results count.
    """
    from atlas_bridge.bridge.schema import MAX_ROUNDS, UnitSchema, fold

    t0 = time.perf_counter()
    results: list[UnitSchema] = [UnitSchema(u.file.name) for u in units]
    lookups: list[list[TableKey]] = [[] for _ in units]
    signature: list[bytes] = [b""] * len(units)
    used = schema_index([], options.schema, options.default_db)

    # Units that define or read the same tables (one job checked in many places) share one copy of each
    # definition and key: what is kept per unit is then a few pointers, and the driver stays flat.
    shared: dict[Any, Any] = {}

    def one(value: Any) -> Any:
        return shared.setdefault(value, value)

    def absorb(
        rows: Iterable[tuple[int, dict[str, Any]]], index: SchemaIndex, learned: list[LearnedTable]
    ) -> None:
        for i, entry in rows:
            tables: list[LearnedTable] = []
            closed = set(entry.get("closed", ()))
            for n, t in enumerate(entry["tables"]):
                columns = tuple((str(c), None if ty is None else str(ty)) for c, ty in t[3])
                key = one((t[0], t[1], t[2], columns))
                table: LearnedTable = (key[0], key[1], key[2], list(columns))
                if n in closed:  # a view or CTAS table: its columns are its definition's
                    table = ClosedTable(table)
                tables.append(shared.setdefault(("table", n in closed, key), table))
            results[i] = UnitSchema(units[i].file.name, tuple(tables), rank=int(entry["rank"]))
            lookups[i] = [one((k[0], k[1], k[2])) for k in entry["lookups"]]
            signature[i] = _signature(index, lookups[i], learned)

    absorb(first.schema_results(), used, [])
    learned = fold(results)
    while stats.rounds < MAX_ROUNDS:
        index = schema_index(learned, options.schema, options.default_db)
        redo = [
            i for i, keys in enumerate(lookups) if keys and _signature(index, keys, learned) != signature[i]
        ]
        if not redo:
            break
        if on_redo is not None and not stats.rounds:
            on_redo()  # what was merged so far is dropped: stop merging ahead
        stats.rounds += 1
        stats.pending += len(redo)
        wanted = set(redo)
        again = [[(i, u) for i, u in group if i in wanted] for group in pairs]
        again = [g for g in again if g]
        logger.info("schema: extracting %d unit(s) again with %d learned table(s)", len(redo), len(learned))
        r = job.start(again, list(learned), [], total_units=len(redo))
        rounds.append(r)
        for i in redo:
            final[i] = len(rounds) - 1
        absorb(r.schema_results(), index, learned)
        new = fold(results)
        if new == learned:
            break
        learned = new
    stats.tables = len(learned)
    stats.fixed_point_s = time.perf_counter() - t0
    logger.info(
        "schema: %d table(s) and view(s) learned from the inputs' DDL (%d more round(s), %d unit(s) again)",
        stats.tables,
        stats.rounds,
        stats.pending,
    )


def _signature(index: SchemaIndex, keys: Sequence[TableKey], learned: Sequence[LearnedTable]) -> bytes:
    """What ``index`` answers for the look-ups (a digest: one per unit is kept); for a unit with more
    look-ups than were kept, the whole learned schema."""
    answers: Any = (
        [(t, isinstance(t, ClosedTable)) for t in learned]
        if OVERFLOW in keys
        else [(index.columns(*k, record=False), index.closed(*k)) for k in keys]
    )
    return hashlib.blake2b(repr(answers).encode("utf-8"), digest_size=16).digest()


class _MergeAhead:
    """Folds the first round's partitions into the collector in order, each as soon as its task has ended,
    while the extraction job still runs: the driver's merge takes the time a core is idle instead of
    following the job. The reads run in a scheduler pool of their own (the scan's session schedules
    pools fairly), so they do not wait for the job's last task. Speculative: when the learned schema
    sends some units to a second round, the caller cancels it, resets the collector and merges again."""

    def __init__(self, sc: Any, collector: EntityCollector, units: int, *, per_unit: bool) -> None:
        self._sc = sc
        self._collector = collector
        self._units = units
        self._per_unit = per_unit
        self.stats = ExtractStats()
        self.merged = 0
        """Partitions folded so far."""
        self.during_job = 0
        """Partitions folded before the job ended."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._round: _Round | None = None
        self._error: BaseException | None = None
        self._group = f"atlas-bridge-merge-{id(self):x}"

    def start(self, r: _Round) -> None:
        self._round = r
        self._thread = threading.Thread(target=self._run, name="atlas-bridge-merge", daemon=True)
        self._thread.start()

    def _rows(self) -> Iterator[tuple[str, int, Any]]:
        """The round's rows in order; the next partition is asked for only once its task has ended (a
        partition's header is its last row), so its read is of kept results (no extraction again)."""
        r = self._round
        assert r is not None
        self._wait(0)
        for row in r.rdd.toLocalIterator():
            yield row
            if row[0] == "header":
                self.merged += 1
                if self.merged < r.partitions:
                    self._wait(self.merged)

    def _wait(self, part: int) -> None:
        r = self._round
        assert r is not None
        while not r.finished(part):
            if self._stop.wait(_POLL_S):
                raise _Cancelled
        if self._stop.is_set():
            raise _Cancelled

    def _run(self) -> None:
        self._sc.setLocalProperty("spark.scheduler.pool", MERGE_POOL)
        self._sc.setJobGroup(self._group, "atlas-bridge scan: merge the extracted lineage")
        try:
            units, stats = [0] * self._units, self.stats
            _merge([self._rows()], units, 0, self._collector, stats, None, per_unit=self._per_unit)
        except _Cancelled:
            pass
        except BaseException as e:  # handed to the caller in finish()
            self._error = e

    def finish(self, progress: Progress | None) -> None:
        """Wait for the merge to end (the job has); its error, if any, is the caller's."""
        assert self._thread is not None
        assert self._round is not None
        total = self._round.partitions
        while self._thread.is_alive():
            if progress is not None:
                progress("merge", self.merged, total)
            self._thread.join(_POLL_S * 10)
        if self._error is not None:
            raise self._error
        if progress is not None:
            progress("merge", self.merged, total)

    def cancel(self, *, wait: bool = True) -> None:
        """Stop at the next partition; with ``wait``, return once the merge has stopped (the collector is
        the caller's again): a read under way (of kept results: milliseconds) is let finish, and cancelled
        only if it does not (Spark logs a cancelled read as an ERROR with a Java stack trace). Without: the
        scan is failing or interrupted, and whatever stops the session's jobs (quietly, on Ctrl-C) ends a
        read under way."""
        self._stop.set()
        thread = self._thread
        if not wait or thread is None or not thread.is_alive():
            return
        thread.join(_STOP_GRACE_S)
        if not thread.is_alive():
            return
        try:
            self._sc.cancelJobGroup(self._group)
        except Exception:  # the context may be stopping (Ctrl-C): the read then fails by itself
            logger.debug("cancelling the merge reads failed", exc_info=True)
        thread.join(_CANCEL_WAIT_S)
        if thread.is_alive():  # never seen: a read of kept results that neither ends nor fails
            msg = f"the merge ahead did not stop within {_CANCEL_WAIT_S:.0f} s"
            raise RuntimeError(msg)


class _Cancelled(Exception):
    pass


MERGE_POOL = "atlas-bridge-merge"
_POLL_S = 0.05
_CANCEL_WAIT_S = 10.0
_STOP_GRACE_S = 5.0


def _merge(
    iters: list[Iterator[tuple[str, int, Any]]],
    final: list[int],
    partitions: int,
    collector: EntityCollector,
    stats: ExtractStats,
    progress: Progress | None,
    *,
    per_unit: bool,
) -> None:
    """Stream each unit's final results into the collector in unit order (several rounds: each round's
    results read in order at the same time, a unit taken from the round that counts for it)."""
    headers = 0

    def header(payload: str) -> None:
        nonlocal headers
        stats.add(json.loads(payload))
        headers += 1
        if progress is not None and headers <= partitions:
            progress("merge", headers, partitions)

    if not per_unit:
        for tag, _, payload in iters[0]:
            if tag == "unit":
                _fold(collector, payload)
            else:
                header(payload)  # a partition's header comes after its units
        return
    for i, r in enumerate(final):
        for tag, j, payload in iters[r]:
            if tag == "header":
                header(payload)
            elif j != i:
                continue  # a result another round replaced
            elif tag == "unit":
                _fold(collector, payload)
            elif tag == "uhead":
                stats.add(json.loads(payload))
                break
    for it in iters:  # the rest: superseded results and the partition headers (CPU, memory)
        for tag, _, payload in it:
            if tag == "header":
                header(payload)


def _fold(collector: EntityCollector, payload: str | bytes) -> None:
    with PausedGC():  # a unit's records: thousands of small objects, alive until folded
        collector.add(decode_unit(payload))


def _unit_bytes(unit: WorkUnit) -> int:
    end = unit.end if unit.end >= 0 else unit.file.size
    return max(end - unit.start, 1)


def statement_progress(statements: int, done_bytes: int, total_bytes: int) -> tuple[int, int]:
    """(statements done, estimated statements in all): the rest estimated from the input bytes left.

    >>> statement_progress(500, 1_000, 4_000)
    (500, 2000)
    >>> statement_progress(0, 0, 4_000), statement_progress(1_900, 4_000, 4_000)
    ((0, 0), (1900, 1900))
    """
    if done_bytes <= 0:
        return statements, 0
    if done_bytes >= total_bytes:
        return statements, statements
    return statements, max(statements, round(statements * total_bytes / done_bytes))


def progress_line(
    done: int, total: int, tasks: int, partitions: int, done_bytes: int, total_bytes: int
) -> str:
    """The extraction's progress as a log line; an estimate only once there is one.

    >>> progress_line(0, 0, 0, 7, 0, 7_100)
    'extraction: 0 statement(s) done, 0/7 partition(s), 0 B of 7.1 KB read'
    >>> progress_line(800, 2_000, 3, 8, 2_000_000, 5_000_000)
    'extraction: 800 statement(s) done (of about 2000), 3/8 partition(s), 2.0 MB of 5.0 MB read'
    """
    about = f" (of about {total})" if total else ""
    return (
        f"extraction: {done} statement(s) done{about}, {tasks}/{partitions} partition(s),"
        f" {human_bytes(done_bytes)} of {human_bytes(total_bytes)} read"
    )


def human_bytes(n: int) -> str:
    """A size as people read it.

    >>> human_bytes(0), human_bytes(2_500), human_bytes(3_400_000), human_bytes(5_000_000_000)
    ('0 B', '2.5 KB', '3.4 MB', '5.0 GB')
    """
    if n < 1000:
        return f"{n} B"
    for power, unit in ((1, "KB"), (2, "MB")):
        if n < 999_950 * 1000 ** (power - 1):
            return f"{n / 1000**power:.1f} {unit}"
    return f"{n / 1e9:.1f} GB"


class _ProgressTracker:
    """Polls, while a job runs, the statements the finished tasks extracted and their input bytes."""

    def __init__(
        self,
        spark: SparkSession,
        total: int,
        progress: Progress | None,
        counted: tuple[Callable[[], int], Callable[[], int], int],
    ) -> None:
        self._sc = spark.sparkContext
        self._total = total
        self._progress = progress
        self._statements, self._bytes, self._total_bytes = counted
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _ProgressTracker:
        self._thread = threading.Thread(target=self._poll, name="atlas-bridge-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if exc[0] is None:
            statements = self._statements()
            if self._progress is not None:
                self._progress("extract", statements, statements)
            logger.info(
                "extraction: %d statement(s) done, %d/%d partition(s)", statements, self._total, self._total
            )

    def _poll(self) -> None:
        tracker = self._sc.statusTracker()
        last_log = time.monotonic()
        last: tuple[int, int] | None = None
        while not self._stop.wait(0.5):
            tasks = 0
            try:
                statements, done_bytes = self._statements(), self._bytes()
                for stage_id in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(stage_id)
                    if info is not None and info.numTasks == self._total:
                        tasks = max(tasks, info.numCompletedTasks)
            except Exception:  # the tracker is best effort; a gateway hiccup must not end the scan
                logger.debug("status tracker failed", exc_info=True)
                continue
            done, total = statement_progress(statements, done_bytes, self._total_bytes)
            if (done, total) != last and self._progress is not None:
                self._progress("extract", done, total)
            last = (done, total)
            if time.monotonic() - last_log >= 10:
                logger.info(
                    "%s", progress_line(done, total, tasks, self._total, done_bytes, self._total_bytes)
                )
                last_log = time.monotonic()
