"""The data handed from stage to stage: input files, work units, options, per-unit results."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from atlas_bridge.atlas.convert import RunInfo
from atlas_bridge.extractors.sql.schema import LearnedTable, TableKey
from atlas_bridge.model import Lineage, Problem

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``; phases are ``extract``, ``merge`` and ``deliver``."""


class InputKind:
    """What a discovered file holds."""

    SQL = "sql"
    SQLFLOW = "sqlflow"
    QUERY_LOG = "query_log"
    OPENLINEAGE = "openlineage"
    """OpenLineage events (JSON, JSON lines), as the file transport and ``dbt-ol`` write them."""
    SPARK_EVENT_LOG = "spark_event_log"
    """A Spark event log: one file, or a rolling log's ``eventlog_v2_*`` folder (``path`` is the folder)."""
    SCHEMA = "schema"
    """A sqlglot schema mapping (``{db: {table: {col: type}}}``): not lineage, skipped (use ``--schema``)."""


@dataclasses.dataclass(frozen=True)
class InputFile:
    """A file to scan. ``name`` is how reports spell it (relative to the working directory if below it);
    ``source`` is how payloads do (its processes' ``sourceFile``): the path below the scanned folder, or the
    file's name when the file itself was given, so the same estate gives the same payloads wherever the
    scan runs. None: ``name``."""

    path: str
    name: str
    kind: str
    size: int
    source: str | None = None

    @property
    def source_name(self) -> str:
        return self.source if self.source is not None else self.name


@dataclasses.dataclass(frozen=True)
class ScanOptions:
    """Everything the executors need, and nothing secret: it is pickled to every task."""

    dialect: str | None = None
    schema: Mapping[str, Any] | None = None
    default_db: str | None = None
    query_field: str | None = None
    user_field: str | None = None
    time_field: str | None = None
    chunk_bytes: int = 8 * 1024 * 1024
    """Query logs larger than this are cut into line-aligned byte ranges of about this size."""
    sql_chunk_bytes: int = 256 * 1024
    """Plain SQL scripts larger than this are cut into pieces of about this size at statement ends."""
    sqlflow_chunk_relations: int = 5_000
    """A SQLFlow export is read and converted this many relations at a time (whole statements)."""
    eventlog_chunk_runs: int = 256
    """A Spark event log's job runs are extracted and converted this many at a time (memory stays bounded
    whatever the log's length)."""
    partition_bytes: int = 1024 * 1024
    """Input bytes per Spark partition (at least 4 partitions per core are used)."""
    learn_schema: bool = True
    """Learn the columns of the tables and views the estate's own DDL defines before extracting (see
    :mod:`atlas_bridge.bridge.schema`); ``schema`` still wins for the tables it names."""
    tables_read: bool = False
    """Also list the tables each input reads (``FROM`` / ``JOIN`` names), for ``--schema-from-atlas``."""
    schema_driver_bytes: int = 64 * 1024 * 1024
    """Inputs up to this many bytes in all are learned from on the driver (a Spark job costs more than
    reading their CREATE statements); larger estates in a Spark pass."""
    end_to_end: bool = True
    """Collapse each statement's intermediate resultsets on the executor (what Atlas receives anyway)
    before converting; the relation counts of the report are of the collapsed lineage."""


@dataclasses.dataclass(frozen=True)
class WorkUnit:
    """A file, or a byte range ``[start, end)`` of a query log or a big script, for one executor task."""

    file: InputFile
    start: int = 0
    end: int = -1
    content: bytes | None = None
    """The bytes themselves when executors cannot read the driver's files (a remote master)."""
    first_line: int = 1
    """Line of the file where a piece of a big script starts."""
    prelude: str = ""
    """The script's last ``USE`` before the piece, run first so names resolve as in the whole script."""
    dialect: str | None = None
    """The dialect the whole script declares in its first lines (a piece no longer holds them)."""
    more: tuple[tuple[InputFile, bytes | None], ...] = ()
    """OpenLineage: the scan's other event files (and their bytes when shipped), read with ``file`` in
    one unit: one run's events may be in several files (the file transport writes a file per event)."""


@dataclasses.dataclass
class UnitResult:
    """What one work unit yielded."""

    file: str
    kind: str
    lineage: Lineage
    statements: int = 0
    problems: list[Problem] = dataclasses.field(default_factory=list)
    users: set[str] = dataclasses.field(default_factory=set)
    first_time_ms: int | None = None
    last_time_ms: int | None = None
    defines: list[LearnedTable] = dataclasses.field(default_factory=list)
    """Tables and views the unit's DDL defined, with their columns (what the estate learns from it)."""
    lookups: list[TableKey] = dataclasses.field(default_factory=list)
    """Tables the unit looked up that its own DDL did not define (see ``SchemaIndex.lookups``)."""
    runs: dict[str, tuple[RunInfo, ...]] = dataclasses.field(default_factory=dict)
    """Runs of single processes (OpenLineage runs; a Spark event log's job runs), recorded as their process
    executions."""


@dataclasses.dataclass(frozen=True)
class LogRecord:
    """One query of a query log, with the file line it starts on."""

    line: int
    query: str
    user: str | None = None
    time_ms: int | None = None
