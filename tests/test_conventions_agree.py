"""The conventions kept on purpose hold the same in the Spark hook and the SQL extractor.

Each statement of ``tests/data/conventions/spark.sql`` runs for real on the run's Spark session with the hook
on, and is read by the SQL extractor (dialect spark, the base tables' schema given); every written column must
get the same direct and the same indirect inputs in the column lineage sent to Atlas from both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from atlas_bridge.atlas.convert import to_atlas_batches
from atlas_bridge.atlas.encoded import as_dict
from atlas_bridge.config import Settings
from atlas_bridge.extractors.sql import extract_sql_lineage
from atlas_bridge.model import merge_lineage
from atlas_bridge.spark import eventlog, install, uninstall

NS = "conv"
STATEMENTS = Path(__file__).parent / "data" / "conventions" / "spark.sql"
SCHEMA = {
    "default": {
        "src": {"id": "bigint", "amount": "double", "cust": "int", "tag": "string"},
        "customers": {"id": "int", "name": "string", "country": "string"},
    }
}
Edges = dict[tuple[str, str], set[str]]  # (target column, DIRECT|INDIRECT) -> source columns

pytestmark = pytest.mark.spark


class _MemorySink:
    def __init__(self) -> None:
        self.batches: list[dict[str, Any]] = []

    def emit(self, batch: Mapping[str, Any]) -> None:
        self.batches.append(as_dict(batch))

    def close(self) -> None:
        pass


def _statements() -> list[str]:
    text = "\n".join(line for line in STATEMENTS.read_text().splitlines() if not line.startswith("--"))
    return [s.strip() for s in text.split(";") if s.strip()]


def _targets() -> list[str]:
    return [s.split()[2] for s in _statements()]


def column_edges(batches: Iterable[Mapping[str, Any]]) -> Edges:
    """Column lineage of the written tables, by qualifiedName without the namespace."""
    out: Edges = {}
    for batch in batches:
        entities = batch.get("entities", [])
        names = {e["guid"]: e["attributes"]["qualifiedName"] for e in entities if "guid" in e}

        def qn(ref: Mapping[str, Any], names: dict[str, str] = names) -> str:
            unique = ref.get("uniqueAttributes") or {}
            found = unique.get("qualifiedName") or names[ref["guid"]]
            return str(found).removesuffix(f"@{NS}")

        for e in entities:
            if e["typeName"] != "atlas_bridge_column_lineage":
                continue
            a, rel = e["attributes"], e.get("relationshipAttributes", {})
            inputs = a.get("inputs") or rel.get("inputs") or []
            outputs = a.get("outputs") or rel.get("outputs") or []
            for target in outputs:
                key = (qn(target), a["dependencyType"])
                out.setdefault(key, set()).update(qn(i) for i in inputs)
    return out


@pytest.fixture(scope="module")
def hook_edges(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Edges:
    for t in ["src", "customers", *_targets()]:
        spark.sql(f"DROP TABLE IF EXISTS {t}")
    spark.sql("CREATE TABLE src (id BIGINT, amount DOUBLE, cust INT, tag STRING) USING parquet")
    spark.sql("INSERT INTO src VALUES (1, 10.0, 1, 'a'), (2, 25.5, 2, 'b'), (3, 99.0, 1, 'c')")
    spark.sql("CREATE TABLE customers (id INT, name STRING, country STRING) USING parquet")
    spark.sql("INSERT INTO customers VALUES (1, 'alice', 'DE'), (2, 'bob', 'FR')")
    sink = _MemorySink()
    base = tmp_path_factory.mktemp("conventions")
    settings = Settings.load(namespace=NS, output_dir=base / "out")
    handle = install(spark, settings=settings, sink=sink, coalesce_s=600)
    try:
        for statement in _statements():
            spark.sql(statement)
        assert handle.flush(timeout=60)
    finally:
        uninstall(spark)
        for t in ["src", "customers", *_targets()]:
            spark.sql(f"DROP TABLE IF EXISTS {t}")
    assert handle.stats.callback_errors == 0
    return column_edges(sink.batches)


@pytest.fixture(scope="module")
def event_log_edges(spark: Any, hook_edges: Edges) -> Edges:
    """What the event-log reader makes of the same statements, from the session's own (open) event log."""
    folder = Path(spark.sparkContext.getConf().get("spark.eventLog.dir").removeprefix("file:"))
    logs = sorted(folder.iterdir())
    assert len(logs) == 1, logs
    parts = []
    for run in eventlog.read_executions(logs[0]):
        lineage, _runs, _problems = eventlog.run_lineage(run, source=logs[0].name)
        if any(d.name.startswith("cv_") for d in lineage.datasets if d.kind.is_permanent):
            parts.append(lineage)
    assert parts, f"no statement of {STATEMENTS.name} in the event log {logs[0]}"
    return column_edges(as_dict(b) for b in to_atlas_batches(merge_lineage(parts), namespace=NS))


@pytest.fixture(scope="module")
def sql_edges() -> Edges:
    result = extract_sql_lineage(STATEMENTS.read_text(), dialect="spark", default_db="default", schema=SCHEMA)
    assert result.ok, result.problems
    return column_edges(as_dict(b) for b in to_atlas_batches(result.lineage, namespace=NS))


@pytest.mark.parametrize("table", _targets())
def test_hook_and_sql_extractor_agree(table: str, hook_edges: Edges, sql_edges: Edges) -> None:
    hook, sql = _of(hook_edges, table), _of(sql_edges, table)
    assert hook, f"the hook sent no column lineage for {table}"
    assert hook == sql


@pytest.mark.parametrize("table", _targets())
def test_event_log_and_hook_agree(table: str, hook_edges: Edges, event_log_edges: Edges) -> None:
    hook, logged = _of(hook_edges, table), _of(event_log_edges, table)
    assert hook, f"the hook sent no column lineage for {table}"
    assert logged == hook


def _of(edges: Edges, table: str) -> Edges:
    return {k: v for k, v in edges.items() if k[0].startswith(f"default.{table}.")}
