"""The Spark hook with the ``openlineage`` setting: each statement also goes out as OpenLineage run events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from atlas_stub import AtlasStub

from atlas_bridge.atlas.client import AtlasClient
from atlas_bridge.atlas.convert import to_atlas_entities
from atlas_bridge.atlas.sink import AtlasSink
from atlas_bridge.atlas.typedefs import register_typedefs
from atlas_bridge.config import Settings
from atlas_bridge.openlineage.files import read_event_text
from atlas_bridge.openlineage.read import read_events
from atlas_bridge.openlineage.schema import validate_event
from atlas_bridge.spark import install, uninstall

pytestmark = pytest.mark.spark
NS = "test"


def test_hook_sends_the_statement_as_openlineage_too(
    spark: Any, atlas_stub: AtlasStub, tmp_path: Path
) -> None:
    spark.sql("DROP TABLE IF EXISTS ol_src")
    spark.sql("DROP TABLE IF EXISTS ol_out")
    spark.sql("CREATE TABLE ol_src (id BIGINT, amount DOUBLE) USING parquet")
    client = AtlasClient(atlas_stub.base_url, retries=0, backoff=0)
    register_typedefs(client)
    folder = tmp_path / "ol"
    settings = Settings.load(namespace=NS, output_dir=tmp_path / "out", openlineage=str(folder))
    handle = install(spark, settings=settings, sink=AtlasSink(client), coalesce_s=600)
    try:
        spark.sql("INSERT INTO ol_src VALUES (1, 2.0)")
        spark.sql(
            "CREATE TABLE ol_out USING parquet AS SELECT id, amount * 2 AS doubled FROM ol_src WHERE id > 0"
        )
        assert handle.flush(timeout=60)
    finally:
        uninstall(spark)
    assert handle.stats.openlineage_events >= 1
    events = [e for f in sorted(folder.iterdir()) for _, _, e in read_event_text(f.read_text(), f.name)[0]]
    assert len(events) == handle.stats.openlineage_events
    for event in events:
        assert validate_event(event) == []
    read = read_events(events)
    from_events = {
        (e["typeName"], e["attributes"]["qualifiedName"])
        for e in to_atlas_entities(read.result.lineage, namespace=NS, runs=read.runs)
    }
    in_atlas = {(e["typeName"], e["attributes"]["qualifiedName"]) for e in atlas_stub.active_entities()}
    assert from_events == in_atlas
    assert any(
        t == "atlas_bridge_column_lineage" and q.endswith("ol_out.doubled:direct") for t, q in from_events
    )
