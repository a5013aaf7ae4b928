"""The Spark hook's logic that needs no Spark session: Connect refusal, conf mapping, event grouping."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from atlas_bridge.config import Settings
from atlas_bridge.errors import ConfigError
from atlas_bridge.spark.hook import (
    SparkHookHandle,
    _Item,
    _leaves_needing_facts,
    _settings_from_conf,
    install,
)
from atlas_bridge.spark.jvm import split_table_name

NS = "test"

# ---------------------------------------------------------------------------------------------------------
# no Spark needed


def test_spark_connect_is_refused() -> None:
    class ConnectSession:
        pass

    ConnectSession.__module__ = "pyspark.sql.connect.session"
    with pytest.raises(ConfigError, match="Spark Connect"):
        install(ConnectSession())


def test_importable_without_pyspark() -> None:
    code = "import sys, atlas_bridge.spark; assert 'pyspark' not in sys.modules; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_spark_conf_keys_mirror_atlas_properties() -> None:
    fields, knobs = _settings_from_conf(
        {
            "spark.atlas.rest.address": "http://a:21000,http://b:21000",
            "spark.atlas.metadata.namespace": "prod",
            "spark.atlas.hook.atlas_bridge.queueSize": "7",
            "spark.atlas.hook.atlas_bridge.disabled": "true",
            "spark.atlas.hook.atlas_bridge.resultsets": "true",
            "spark.atlas.client.password": "s3cret",
        }
    )
    s = Settings.load(**fields)
    assert s.rest_address == ["http://a:21000", "http://b:21000"]
    assert s.namespace == "prod"
    assert s.queue_size == 7
    assert s.disabled
    assert s.password is not None
    assert s.password.get_secret_value() == "s3cret"
    assert knobs == {"resultsets": "true"}


class _FakeBus:
    def waitUntilEmpty(self, ms: int) -> None:
        pass


class _FakeSpark:
    """Just enough of a SparkSession for the handle's bookkeeping (no JVM)."""

    def __init__(self) -> None:
        bus = _FakeBus()
        self.sparkContext = SimpleNamespace(
            applicationId="app-1",
            sparkUser=lambda: "alice",
            _jsc=SimpleNamespace(sc=lambda: SimpleNamespace(listenerBus=lambda: bus)),
        )


def _item(case: str, index: int, qe_id: int, seq: int) -> Any:
    event = json.loads((Path(__file__).parent / "data" / "spark" / f"{case}.json").read_text())["events"][
        index
    ]
    return _Item(
        event="onSuccess",
        func_name=event["funcName"],
        root=event["analyzed_class"].rsplit(".", 1)[-1],
        plan_json=json.dumps(event["analyzed"]),
        facts=event["py4j_identities"] or {},
        end_ms=1000,
        duration_ms=10,
        seq=seq,
        qe_id=qe_id,
    )


def _bare_handle() -> tuple[SparkHookHandle, list[Any]]:
    handle = SparkHookHandle(
        _FakeSpark(),
        settings=Settings(namespace=NS),
        sink=None,
        resultsets=False,
        temp_views=False,
        coalesce_s=600,
        session_id="s" * 36,
    )
    emitted: list[Any] = []
    handle._emit = emitted.append  # type: ignore[method-assign]
    return handle, emitted


def test_grouping_keeps_the_most_specific_event_of_one_statement() -> None:
    handle, emitted = _bare_handle()
    # Hive CTAS: the inner InsertIntoHiveTable (created later, higher id) arrives first, the command last
    handle._handle_item(_item("hive_ctas_textfile", 0, qe_id=10, seq=1))
    assert emitted == []
    handle._handle_item(_item("hive_ctas_textfile", 1, qe_id=9, seq=2))
    assert [i.root for i in emitted] == ["CreateHiveTableAsSelectCommand"]
    # saveAsTable: CreateDataSourceTableAsSelectCommand (final) then the SaveAsV1TableCommand wrapper
    handle._handle_item(_item("save_as_table", 1, qe_id=17, seq=3))
    handle._handle_item(_item("save_as_table", 2, qe_id=15, seq=4))
    assert [i.root for i in emitted][1:] == ["CreateDataSourceTableAsSelectCommand"]
    assert handle.stats.superseded == 2


def test_grouping_keeps_repeated_runs_apart() -> None:
    handle, emitted = _bare_handle()
    for qe_id in (20, 25, 30):  # the same INSERT three times: same exprIds, later QueryExecutions
        handle._handle_item(_item("insert_into_select", 0, qe_id=qe_id, seq=qe_id))
    handle._emit_pending(force=True)
    assert [i.qe_id for i in emitted] == [20, 25, 30]


def test_split_name_and_leaf_positions() -> None:
    assert split_table_name("spark_catalog.default.t") == {
        "table": "t",
        "database": "default",
        "catalog": "spark_catalog",
    }
    assert split_table_name("t") == {"table": "t"}
    event = json.loads((Path(__file__).parent / "data" / "spark" / "read_csv_write_parquet.json").read_text())
    nodes = event["events"][2]["analyzed"]
    assert _leaves_needing_facts(nodes[1:]) == [(0, [77, 78, 79], "file")]
    catalog_read = json.loads(
        (Path(__file__).parent / "data" / "spark" / "insert_into_select.json").read_text()
    )
    assert _leaves_needing_facts(catalog_read["events"][0]["analyzed"][1:]) == []


def test_parse_quoted_identifier() -> None:
    from atlas_bridge.spark.hook import _parse_quoted

    assert _parse_quoted("`spark_catalog`.`default`.`tgt`") == {
        "table": "tgt",
        "database": "default",
        "catalog": "spark_catalog",
    }
    assert _parse_quoted("`db`.`we``ird.t`") == {"table": "we`ird.t", "database": "db"}
