"""The bridge: batch import of a SQL estate (scripts, SQLFlow exports, query logs) into Atlas on PySpark.

What runs where:

* **driver**: :func:`discover_inputs` lists the files (paths and sizes only, never their text) and
  :func:`plan_units` cuts them into work units (one per script or export; query logs in line-aligned byte
  ranges). Settings, clients and credentials stay here.
* **executors**: :func:`extract_partition` reads its units, runs the *pure* extractors
  (``extract_sql_lineage``, ``extract_sqlflow_lineage``) and converts each unit's lineage to Atlas entity
  records on its own (``convert.to_entity_records``): processes and column lineage are final there, as
  they depend only on their statements and on the qualifiedNames of the datasets they touch, unless
  statements of other units share the process (then the driver merges the units' records into their
  union, from what each unit sends beside them: ``convert.merge_process_group``). What is shipped is
  only the units, :class:`ScanOptions` and the namespace (nothing secret).
* **driver again**: partition results are computed in parallel and kept by Spark (``MEMORY_AND_DISK``),
  then streamed back in partition (file-name) order into an :class:`EntityCollector`, which merges only
  datasets and their columns in memory (the union of columns, the most specific type) and spills the
  process tier to a temporary file (a process that recurs in later units: those occurrences too, until
  they are merged). Batches are then rendered one at a time as they are delivered, so
  the driver's memory follows the number of distinct tables and columns, not the number of statements.
  A unit-by-unit conversion does not depend on the partitioning: the same input gives the same batches
  on any number of cores.

Resume: every acknowledged batch's content hash is appended (and fsynced) to a state file per target, so
a run that died halfway skips what was already acknowledged; the same input gives the same batches, hence
the same hashes, so a re-run with nothing changed sends nothing. Against Atlas, upserts by qualifiedName
make a resend harmless anyway; created / updated / unchanged come from Atlas's ``mutatedEntities``.

Stages, one module each (data between them: :mod:`atlas_bridge.bridge.types`):

* :mod:`~atlas_bridge.bridge.inputs`: find the files, tell their kind, cut them into work units;
* :mod:`~atlas_bridge.bridge.querylog`: read query logs (JSON lines, CSV, sniffed JSON);
* :mod:`~atlas_bridge.bridge.extract`: per unit, on the executors: extract and convert;
* :mod:`~atlas_bridge.bridge.job`: the PySpark job and its progress;
* :mod:`~atlas_bridge.bridge.merge`: merge datasets on the driver, spill the process tier;
* :mod:`~atlas_bridge.bridge.deliver`: send or write the batches, with resume state;
* :mod:`~atlas_bridge.bridge.summary`: the report;
* :mod:`~atlas_bridge.bridge.run`: :func:`scan`, all of the above in order.
"""

from __future__ import annotations

from atlas_bridge.bridge.deliver import (
    AtlasDelivery,
    ClientDelivery,
    Delivery,
    DeliveryStats,
    KafkaDelivery,
    SentState,
    SinkDelivery,
    batch_hash,
    check_resume_state,
    deliver,
    is_not_an_atlas,
    not_an_atlas,
)
from atlas_bridge.bridge.dialects import dialect_hint
from atlas_bridge.bridge.extract import extract_partition, extract_unit
from atlas_bridge.bridge.inputs import (
    LOG_SUFFIXES,
    QUERY_FIELDS,
    SQL_SUFFIXES,
    SQLFLOW_SUFFIXES,
    TIME_FIELDS,
    USER_FIELDS,
    classify_file,
    count_statements,
    discover_inputs,
    partition_units,
    plan_units,
    split_script,
)
from atlas_bridge.bridge.job import ExtractStats, extract_entities, spark_session
from atlas_bridge.bridge.merge import EntityCollector, distinct_relations
from atlas_bridge.bridge.querylog import read_query_log
from atlas_bridge.bridge.run import scan
from atlas_bridge.bridge.summary import ScanSummary, lineage_counts, push_command, write_summary
from atlas_bridge.bridge.types import (
    InputFile,
    InputKind,
    LogRecord,
    Progress,
    ScanOptions,
    UnitResult,
    WorkUnit,
)

__all__ = [
    "LOG_SUFFIXES",
    "QUERY_FIELDS",
    "SQLFLOW_SUFFIXES",
    "SQL_SUFFIXES",
    "TIME_FIELDS",
    "USER_FIELDS",
    "AtlasDelivery",
    "ClientDelivery",
    "Delivery",
    "DeliveryStats",
    "EntityCollector",
    "ExtractStats",
    "InputFile",
    "InputKind",
    "KafkaDelivery",
    "LogRecord",
    "Progress",
    "ScanOptions",
    "ScanSummary",
    "SentState",
    "SinkDelivery",
    "UnitResult",
    "WorkUnit",
    "batch_hash",
    "check_resume_state",
    "classify_file",
    "count_statements",
    "deliver",
    "dialect_hint",
    "discover_inputs",
    "distinct_relations",
    "extract_entities",
    "extract_partition",
    "extract_unit",
    "is_not_an_atlas",
    "lineage_counts",
    "not_an_atlas",
    "partition_units",
    "plan_units",
    "push_command",
    "read_query_log",
    "scan",
    "spark_session",
    "split_script",
    "write_summary",
]
