"""The Spark hook on the run's real local session, into the Atlas stub (checked via its lineage API)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from atlas_stub import AtlasStub

from atlas_bridge.atlas.client import AtlasClient
from atlas_bridge.atlas.sink import AtlasSink
from atlas_bridge.atlas.typedefs import register_typedefs
from atlas_bridge.config import Settings
from atlas_bridge.model import query_hash
from atlas_bridge.spark import SparkHookHandle, install, uninstall

NS = "test"


# ---------------------------------------------------------------------------------------------------------
# helpers


class Hooked:
    def __init__(self, handle: SparkHookHandle, client: AtlasClient, stub: AtlasStub, spark: Any) -> None:
        self.handle = handle
        self.client = client
        self.stub = stub
        self.spark = spark

    def sql(self, text: str) -> None:
        self.spark.sql(text)

    def flush(self) -> None:
        assert self.handle.flush(timeout=60)

    def guid(self, type_name: str, qn: str) -> str:
        ent = self.stub.find(type_name, qn)
        assert ent is not None, f"{type_name} {qn} not in Atlas; have: {self.names(type_name)}"
        return str(ent["guid"])

    def names(self, type_name: str) -> list[str]:
        return sorted(e["attributes"]["qualifiedName"] for e in self.stub.active_entities(type_name))

    def table_inputs(self, qn: str, type_name: str = "atlas_bridge_table") -> dict[str, set[str]]:
        """Process name -> input dataset qualifiedNames, from GET /v2/lineage/{guid} (INPUT, depth 1)."""
        guid = self.guid(type_name, qn)
        lin = self.client.get_lineage(guid, direction="INPUT", depth=1)
        ents = lin["guidEntityMap"]
        out: dict[str, set[str]] = {}
        for rel in lin["relations"]:
            if rel["toEntityId"] == guid:
                proc = rel["fromEntityId"]
                out[ents[proc]["attributes"]["qualifiedName"]] = {
                    ents[r["fromEntityId"]]["attributes"]["qualifiedName"]
                    for r in lin["relations"]
                    if r["toEntityId"] == proc
                }
        return out

    def column_inputs(self, qn: str) -> dict[str, set[str]]:
        """DIRECT / INDIRECT -> input qualifiedNames (no @ns) of one target column, via the lineage API."""
        guid = self.guid("atlas_bridge_column", qn)
        lin = self.client.get_lineage(guid, direction="INPUT", depth=1)
        ents = lin["guidEntityMap"]
        out: dict[str, set[str]] = {}
        for rel in lin["relations"]:
            if rel["toEntityId"] != guid:
                continue
            cl = rel["fromEntityId"]
            dep = self.stub.entities[cl]["attributes"]["dependencyType"]
            srcs = {
                ents[r["fromEntityId"]]["attributes"]["qualifiedName"].removesuffix(f"@{NS}")
                for r in lin["relations"]
                if r["toEntityId"] == cl
            }
            out.setdefault(dep, set()).update(srcs)
        return out

    def column_lineage_attrs(self, qn: str, dep: str) -> dict[str, Any]:
        for ent in self.stub.active_entities("atlas_bridge_column_lineage"):
            a = ent["attributes"]
            if a["qualifiedName"].endswith(f":{qn.removesuffix('@' + NS)}:{dep.lower()}"):
                return dict(a)
        raise AssertionError(f"no {dep} column lineage for {qn}")


@pytest.fixture(scope="module")
def base_tables(spark: Any) -> Any:
    spark.sql("DROP TABLE IF EXISTS src")
    spark.sql("DROP TABLE IF EXISTS customers")
    spark.sql("DROP TABLE IF EXISTS hive_src")
    spark.sql("CREATE TABLE src (id BIGINT, amount DOUBLE, cust INT, tag STRING) USING parquet")
    spark.sql("INSERT INTO src VALUES (1, 10.0, 1, 'a'), (2, 25.5, 2, 'b'), (3, 99.0, 1, 'c')")
    spark.sql("CREATE TABLE customers (id INT, name STRING, country STRING) USING parquet")
    spark.sql("INSERT INTO customers VALUES (1, 'alice', 'DE'), (2, 'bob', 'FR')")
    spark.sql("CREATE TABLE hive_src (id BIGINT, name STRING) STORED AS TEXTFILE")
    spark.sql("INSERT INTO hive_src VALUES (1, 'x'), (2, 'y')")
    return spark


def _client(stub: AtlasStub) -> AtlasClient:
    return AtlasClient(stub.base_url, retries=0, backoff=0)


@pytest.fixture
def hooked(base_tables: Any, atlas_stub: AtlasStub, tmp_path: Path) -> Iterator[Hooked]:
    client = _client(atlas_stub)
    register_typedefs(client)
    sink = AtlasSink(client, spool_dir=tmp_path / "spool")
    settings = Settings.load(namespace=NS, output_dir=tmp_path / "out")
    # A long coalescing window: statements are emitted by their final event or by flush(), never by a timer.
    handle = install(base_tables, settings=settings, sink=sink, coalesce_s=600)
    yield Hooked(handle, client, atlas_stub, base_tables)
    uninstall(base_tables)
    assert handle.stats.callback_errors == 0
    assert handle.stats.dropped == 0


def drop(spark: Any, *tables: str) -> None:
    for t in tables:
        spark.sql(f"DROP TABLE IF EXISTS {t}")


# ---------------------------------------------------------------------------------------------------------
# tests on the real session

pytestmark = pytest.mark.spark


def test_ctas_join_aggregate_where(hooked: Hooked) -> None:
    drop(hooked.spark, "agg_t")
    hooked.sql(
        "CREATE TABLE agg_t USING parquet AS SELECT c.country, sum(s.amount) AS total, count(*) AS n "
        "FROM src s JOIN customers c ON s.cust = c.id WHERE s.amount > 5 GROUP BY c.country"
    )
    hooked.flush()
    # one statement, two Spark events: one process, no process for the warehouse folder
    procs = hooked.names("atlas_bridge_process")
    assert len(procs) == 1
    assert procs[0].startswith(f"default.agg_t@{NS}:")
    assert hooked.table_inputs(f"default.agg_t@{NS}") == {
        procs[0]: {f"default.src@{NS}", f"default.customers@{NS}"}
    }
    total = hooked.column_inputs(f"default.agg_t.total@{NS}")
    assert total["DIRECT"] == {"default.src.amount"}
    # WHERE amount, JOIN keys, GROUP BY country restrict the aggregate
    assert total["INDIRECT"] == {
        "default.src.amount",
        "default.src.cust",
        "default.customers.id",
        "default.customers.country",
    }
    country = hooked.column_inputs(f"default.agg_t.country@{NS}")
    assert country["DIRECT"] == {"default.customers.country"}
    assert hooked.column_lineage_attrs(f"default.agg_t.total@{NS}", "DIRECT")["effect"] == "AGGREGATION"
    assert hooked.column_lineage_attrs(f"default.agg_t.country@{NS}", "DIRECT")["effect"] == "EXACT_COPY"
    n = hooked.column_inputs(f"default.agg_t.n@{NS}")
    assert "DIRECT" not in n  # count(*) copies no column
    # ... it counts src's rows: a property of its column lineage, not an input (no node on src's Lineage tab)
    assert "default.src" not in n.get("INDIRECT", set())
    rows = hooked.column_lineage_attrs(f"default.agg_t.n@{NS}", "INDIRECT")["rowSources"]
    assert f"default.src@{NS}" in rows  # the join's row set: both tables


def test_insert_into_and_insert_overwrite(hooked: Hooked) -> None:
    drop(hooked.spark, "tgt")
    hooked.sql("CREATE TABLE tgt (id BIGINT, amount_x2 DOUBLE, tag STRING) USING parquet")
    hooked.sql("INSERT INTO tgt SELECT id, amount * 2, concat(tag, '_', cust) FROM src WHERE amount > 20")
    hooked.sql("INSERT OVERWRITE TABLE tgt SELECT id, amount, tag FROM src")
    hooked.flush()
    inputs = hooked.table_inputs(f"default.tgt@{NS}")
    assert len(inputs) == 2  # two statements, two processes
    assert set(map(frozenset, inputs.values())) == {frozenset({f"default.src@{NS}"})}
    names = {e["attributes"]["name"] for e in hooked.stub.active_entities("atlas_bridge_process")}
    assert names == {"tgt: insert from default.src", "tgt: insert overwrite from default.src"}
    tag = hooked.column_inputs(f"default.tgt.tag@{NS}")
    assert tag["DIRECT"] == {"default.src.tag", "default.src.cust"}
    assert tag["INDIRECT"] == {"default.src.amount"}  # only the first statement filters
    amount = hooked.column_lineage_attrs(f"default.tgt.amount_x2@{NS}", "DIRECT")
    assert "(amount * CAST(2 AS DOUBLE))" in amount["expression"]


def test_save_as_table_one_process(hooked: Hooked) -> None:
    drop(hooked.spark, "sat")
    hooked.spark.table("src").selectExpr("id", "amount + 1 AS amount_plus").write.saveAsTable("sat")
    hooked.flush()
    assert len(hooked.names("atlas_bridge_process")) == 1  # three events, one process
    assert hooked.column_inputs(f"default.sat.amount_plus@{NS}") == {"DIRECT": {"default.src.amount"}}
    assert hooked.handle.stats.superseded >= 1


def test_save_as_table_append_into_an_existing_table_is_one_process(hooked: Hooked) -> None:
    drop(hooked.spark, "sat_append")
    hooked.spark.sql("CREATE TABLE sat_append (id BIGINT, amount_plus DOUBLE) USING parquet")
    hooked.flush()
    before = set(hooked.names("atlas_bridge_process"))
    df = hooked.spark.table("src").selectExpr("id", "amount + 1 AS amount_plus")
    df.write.mode("append").saveAsTable("sat_append")
    hooked.flush()
    new = set(hooked.names("atlas_bridge_process")) - before
    assert len(new) == 1, sorted(new)  # one write, one process (not one per event of the write)
    assert hooked.column_inputs(f"default.sat_append.amount_plus@{NS}") == {"DIRECT": {"default.src.amount"}}


def test_parquet_and_csv_paths(hooked: Hooked, tmp_path: Path) -> None:
    csv_dir, pq_dir = tmp_path / "csv_out", tmp_path / "pq_out"
    drop(hooked.spark, "from_pq")
    hooked.spark.table("customers").write.option("header", True).mode("overwrite").csv(str(csv_dir))
    df = hooked.spark.read.option("header", True).csv(str(csv_dir))
    df.selectExpr("cast(id AS INT) AS id", "upper(name) AS name_u").write.mode("overwrite").parquet(
        str(pq_dir)
    )
    hooked.spark.read.parquet(str(pq_dir)).where("id > 1").write.saveAsTable("from_pq")
    hooked.flush()
    csv_qn, pq_qn = f"{csv_dir}@{NS}", f"{pq_dir}@{NS}"
    assert set(hooked.table_inputs(csv_qn, "atlas_bridge_path").popitem()[1]) == {f"default.customers@{NS}"}
    assert set(hooked.table_inputs(pq_qn, "atlas_bridge_path").popitem()[1]) == {csv_qn}
    assert set(hooked.table_inputs(f"default.from_pq@{NS}").popitem()[1]) == {pq_qn}
    name_u = hooked.column_inputs(f"{pq_dir}#name_u@{NS}")
    assert name_u == {"DIRECT": {f"{csv_dir}#name"}}
    from_pq_id = hooked.column_inputs(f"default.from_pq.id@{NS}")
    assert from_pq_id == {"DIRECT": {f"{pq_dir}#id"}, "INDIRECT": {f"{pq_dir}#id"}}


def test_v2_file_read(hooked: Hooked, tmp_path: Path) -> None:
    src_dir = tmp_path / "v2_in"
    drop(hooked.spark, "from_v2")
    hooked.spark.table("src").write.mode("overwrite").parquet(str(src_dir))
    hooked.spark.conf.set("spark.sql.sources.useV1SourceList", "")
    try:
        df = hooked.spark.read.parquet(str(src_dir)).selectExpr("id", "amount * 2 AS a2")
        assert "RelationV2" in df._jdf.queryExecution().analyzed().toString()  # a V2 read
        df.write.saveAsTable("from_v2")
    finally:
        hooked.spark.conf.unset("spark.sql.sources.useV1SourceList")
    hooked.flush()
    assert hooked.column_inputs(f"default.from_v2.a2@{NS}") == {"DIRECT": {f"{src_dir}#amount"}}


def test_temp_view_chain_resolves_to_sources(hooked: Hooked) -> None:
    drop(hooked.spark, "chain_t")
    hooked.spark.table("src").where("cust = 1").createOrReplaceTempView("tv1")
    hooked.sql("CREATE OR REPLACE TEMP VIEW tv2 AS SELECT id, amount * 10 AS amt10 FROM tv1")
    hooked.sql("CREATE TABLE chain_t USING parquet AS SELECT * FROM tv2")
    hooked.flush()
    tables = hooked.names("atlas_bridge_table")
    # temp views are no Atlas entities
    assert not [n for n in tables if n.startswith(("default.tv1@", "default.tv2@"))]
    assert set(hooked.table_inputs(f"default.chain_t@{NS}").popitem()[1]) == {f"default.src@{NS}"}
    assert hooked.column_inputs(f"default.chain_t.amt10@{NS}") == {
        "DIRECT": {"default.src.amount"},
        "INDIRECT": {"default.src.cust"},
    }


def test_persistent_view(hooked: Hooked) -> None:
    hooked.sql("DROP VIEW IF EXISTS v_big")
    hooked.sql("CREATE VIEW v_big AS SELECT id, amount FROM src WHERE amount > 20")
    hooked.flush()
    assert set(hooked.table_inputs(f"default.v_big@{NS}", "atlas_bridge_table").popitem()[1]) == {
        f"default.src@{NS}"
    }


def test_window_and_union(hooked: Hooked) -> None:
    drop(hooked.spark, "wu")
    hooked.sql("CREATE TABLE wu (id BIGINT, amount DOUBLE, tag STRING) USING parquet")
    hooked.sql(
        "INSERT INTO wu SELECT id, CASE WHEN rn = 1 THEN amount ELSE 0 END, tag FROM ("
        "SELECT id, amount, tag, row_number() OVER (PARTITION BY cust ORDER BY amount DESC) AS rn FROM src) "
        "UNION ALL SELECT id, amount, 'u' FROM src"
    )
    hooked.flush()
    amount = hooked.column_inputs(f"default.wu.amount@{NS}")
    assert amount["DIRECT"] == {"default.src.amount"}
    # rn's window keys restrict; amount's own key is dropped: one edge per column pair, the direct one winning
    assert amount["INDIRECT"] == {"default.src.cust"}
    assert hooked.column_lineage_attrs(f"default.wu.amount@{NS}", "INDIRECT")["clauses"] == ["window"]
    assert hooked.column_inputs(f"default.wu.tag@{NS}") == {"DIRECT": {"default.src.tag"}}


def test_ranking_functions_keys_are_indirect(hooked: Hooked) -> None:
    """rank / dense_rank / percent_rank / ntile / cume_dist read their ORDER BY keys as row_number does:
    the keys order the rows (indirect, window), no value of them is copied (Spark gives rank and
    dense_rank the keys as children, which once read as a direct edge ``rank(amount) OVER ...``)."""
    drop(hooked.spark, "ranks")
    hooked.sql(
        "CREATE TABLE ranks USING parquet AS SELECT id,"
        " rank() OVER (PARTITION BY cust ORDER BY amount) AS r,"
        " dense_rank() OVER (PARTITION BY cust ORDER BY amount) AS dr,"
        " percent_rank() OVER (PARTITION BY cust ORDER BY amount) AS pr,"
        " ntile(2) OVER (PARTITION BY cust ORDER BY amount) AS nt,"
        " cume_dist() OVER (PARTITION BY cust ORDER BY amount) AS cd,"
        " row_number() OVER (PARTITION BY cust ORDER BY amount) AS rn FROM src"
    )
    hooked.flush()
    for col in ("r", "dr", "pr", "nt", "cd", "rn"):
        assert hooked.column_inputs(f"default.ranks.{col}@{NS}") == {
            "INDIRECT": {"default.src.amount", "default.src.cust"}
        }, col
        assert hooked.column_lineage_attrs(f"default.ranks.{col}@{NS}", "INDIRECT")["clauses"] == ["window"]


def test_coalesce_is_a_conditional(hooked: Hooked) -> None:
    """COALESCE(a, b): both arguments flow, each a partial copy (the rows it is chosen in); the first one's
    nullness also decides which is taken, but that column already flows directly into the result: one edge
    per column pair, the direct one winning, as in the SQL extractor. NVL is the same function."""
    drop(hooked.spark, "coal")
    hooked.sql(
        "CREATE TABLE coal USING parquet AS SELECT c.id, coalesce(c.name, c.country) AS who,"
        " nvl(c.country, 'none') AS land FROM customers c"
    )
    hooked.flush()
    assert hooked.column_inputs(f"default.coal.who@{NS}") == {
        "DIRECT": {"default.customers.name", "default.customers.country"},
    }
    direct = hooked.column_lineage_attrs(f"default.coal.who@{NS}", "DIRECT")
    assert direct["effect"] == "PARTIAL_COPY"
    assert direct["expression"] == "coalesce(name, country)"
    assert hooked.column_inputs(f"default.coal.land@{NS}") == {"DIRECT": {"default.customers.country"}}
    assert hooked.column_lineage_attrs(f"default.coal.land@{NS}", "DIRECT")["effect"] == "PARTIAL_COPY"


def test_checkpointed_dataframes_keep_their_lineage(hooked: Hooked, tmp_path: Path) -> None:
    """checkpoint() and localCheckpoint() hand the write a LogicalRDD without sources; the plan before the
    checkpoint (the checkpoint action's own event) is remembered and walked in its place."""
    spark = hooked.spark
    spark.sparkContext.setCheckpointDir(str(tmp_path / "checkpoints"))
    drop(spark, "ck_t", "lck_t")
    df = spark.table("src").where("amount > 1").selectExpr("id", "upper(tag) AS t")
    df.checkpoint().write.saveAsTable("ck_t")
    spark.table("customers").selectExpr("id", "name").localCheckpoint().write.saveAsTable("lck_t")
    hooked.flush()
    assert hooked.table_inputs(f"default.ck_t@{NS}").popitem()[1] == {f"default.src@{NS}"}
    assert hooked.column_inputs(f"default.ck_t.t@{NS}") == {
        "DIRECT": {"default.src.tag"},
        "INDIRECT": {"default.src.amount"},
    }
    assert hooked.table_inputs(f"default.lck_t@{NS}").popitem()[1] == {f"default.customers@{NS}"}
    assert hooked.column_inputs(f"default.lck_t.name@{NS}") == {"DIRECT": {"default.customers.name"}}


def test_a_checkpoint_the_hook_did_not_see_is_said_once(
    base_tables: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A DataFrame checkpointed before the hook was installed: its writes have no sources, and the hook
    says so once (a warning), not once per write."""
    spark = base_tables
    spark.sparkContext.setCheckpointDir(str(tmp_path / "checkpoints"))
    drop(spark, "unseen_1", "unseen_2")
    unseen = spark.table("src").selectExpr("id", "tag").localCheckpoint()
    handle = install(spark, settings=Settings.load(namespace=NS, output_dir=tmp_path), sink=_ListSink())
    try:
        with caplog.at_level("WARNING", logger="atlas_bridge.spark"):
            unseen.write.saveAsTable("unseen_1")
            unseen.write.saveAsTable("unseen_2")
            assert handle.flush(60)
    finally:
        uninstall(spark)
        drop(spark, "unseen_1", "unseen_2")
    said = [r for r in caplog.records if "checkpointed DataFrame" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in caplog.records]
    assert said[0].levelname == "WARNING"


def test_statements_sharing_a_process_are_one_union(hooked: Hooked) -> None:
    """Two writes with the same operation, inputs and output are one process: Atlas holds the union of
    both statements' column lineage, each column lineage with what feeds it (not the later statement's
    edges with the earlier one's expression), and each run its own text."""
    drop(hooked.spark, "two")
    hooked.sql("CREATE TABLE two (id BIGINT, t STRING) USING parquet")
    first = "INSERT INTO two SELECT id, upper(tag) FROM src"
    hooked.sql(first)
    hooked.spark.table("src").selectExpr("CAST(cust AS BIGINT) AS id", "tag AS t").write.insertInto("two")
    hooked.flush()
    process = f"INSERT:default.src@{NS}->default.two@{NS}"
    assert hooked.names("atlas_bridge_process") == [process]
    assert hooked.column_inputs(f"default.two.id@{NS}") == {"DIRECT": {"default.src.id", "default.src.cust"}}
    t = hooked.column_lineage_attrs(f"default.two.t@{NS}", "DIRECT")
    assert (t["effect"], t["expression"]) == ("MODIFIED_COPY", "upper(tag)")
    attrs = hooked.stub.find("atlas_bridge_process", process)["attributes"]  # type: ignore[index]
    assert attrs["queryText"] == first  # the only text known; the hash is the union's
    assert attrs["queryHash"] != query_hash(first)
    runs = sorted(
        e["attributes"].get("queryText", "")
        for e in hooked.stub.active_entities("atlas_bridge_process_execution")
    )
    assert runs == ["", first]


def test_hive_table_insert(hooked: Hooked) -> None:
    drop(hooked.spark, "hive_tgt")
    hooked.sql("CREATE TABLE hive_tgt (id BIGINT, name_upper STRING) STORED AS TEXTFILE")
    hooked.sql("INSERT INTO hive_tgt SELECT id, upper(name) FROM hive_src WHERE id > 0")
    hooked.flush()
    assert hooked.column_inputs(f"default.hive_tgt.name_upper@{NS}") == {
        "DIRECT": {"default.hive_src.name"},
        "INDIRECT": {"default.hive_src.id"},
    }


def test_rename(hooked: Hooked) -> None:
    drop(hooked.spark, "r1", "r2")
    hooked.sql("CREATE TABLE r1 USING parquet AS SELECT id FROM src")
    hooked.sql("ALTER TABLE r1 RENAME TO r2")
    hooked.flush()
    (inputs,) = [v for k, v in hooked.table_inputs(f"default.r2@{NS}").items()]
    assert inputs == {f"default.r1@{NS}"}


def test_plain_queries_ignored(hooked: Hooked) -> None:
    before = hooked.handle.stats.skipped
    hooked.spark.table("src").where("amount > 1").collect()
    hooked.spark.table("src").count()
    hooked.flush()
    assert hooked.handle.stats.skipped >= before + 2
    assert hooked.names("atlas_bridge_process") == []


def test_install_is_idempotent_and_uninstall_unregisters(hooked: Hooked) -> None:
    spark = hooked.spark
    assert install(spark) is hooked.handle
    assert "stop" in vars(spark)  # spark.stop() drains the hook first
    listeners = spark._jsparkSession.listenerManager().listListeners()
    assert len(listeners) == 1
    assert uninstall(spark)
    assert len(spark._jsparkSession.listenerManager().listListeners()) == 0
    assert "stop" not in vars(spark)
    assert not uninstall(spark)


def test_same_statement_same_process_across_runs(hooked: Hooked) -> None:
    for _ in range(2):
        drop(hooked.spark, "again_t")
        hooked.sql("CREATE TABLE again_t USING parquet AS SELECT id, upper(tag) AS t FROM src")
        hooked.flush()
    assert len(hooked.names("atlas_bridge_process")) == 1
    assert len(hooked.names("atlas_bridge_process_execution")) == 2  # each run recorded


def test_repeated_insert_is_two_runs_of_one_process(hooked: Hooked) -> None:
    drop(hooked.spark, "rep")
    hooked.sql("CREATE TABLE rep (id BIGINT) USING parquet")
    for _ in range(3):
        hooked.sql("INSERT INTO rep SELECT id FROM src")  # same exprIds each time: must not merge
    hooked.flush()
    assert len(hooked.names("atlas_bridge_process")) == 1
    assert len(hooked.names("atlas_bridge_process_execution")) == 3


def test_atlas_down_then_back_nothing_lost_or_duplicated(
    base_tables: Any, atlas_stub: AtlasStub, tmp_path: Path
) -> None:
    spark = base_tables
    client = _client(atlas_stub)
    register_typedefs(client)
    spool = tmp_path / "spool"
    settings = Settings.load(namespace=NS, output_dir=tmp_path / "out")
    handle = install(spark, settings=settings, sink=AtlasSink(client, spool_dir=spool), coalesce_s=600)
    atlas_stub.refuse_connections()
    drop(spark, "down1", "down2")
    spark.sql("CREATE TABLE down1 USING parquet AS SELECT id, amount FROM src")  # the job goes on
    spark.sql("CREATE TABLE down2 USING parquet AS SELECT id FROM down1")
    assert handle.flush(60)
    assert atlas_stub.find("atlas_bridge_table", f"default.down1@{NS}") is None
    assert any(spool.iterdir())
    uninstall(spark)  # end of the job while Atlas is still down: the spool stays
    assert handle.stats.emit_errors == 0

    atlas_stub.clear_faults()  # Atlas is back; the next job sends what the last one kept
    handle2 = install(spark, settings=settings, sink=AtlasSink(client, spool_dir=spool), coalesce_s=600)
    assert handle2 is not handle
    assert handle2.flush(60)
    uninstall(spark)
    h = Hooked(handle2, client, atlas_stub, spark)
    assert set(h.table_inputs(f"default.down2@{NS}").popitem()[1]) == {f"default.down1@{NS}"}
    assert h.column_inputs(f"default.down1.amount@{NS}") == {"DIRECT": {"default.src.amount"}}
    assert len(h.names("atlas_bridge_process")) == 2
    assert len(h.names("atlas_bridge_process_execution")) == 2
    posts = len(atlas_stub.requests_to("POST", "/entity/bulk"))
    assert AtlasSink(client, spool_dir=spool).spool_pending() == 0
    assert len(atlas_stub.requests_to("POST", "/entity/bulk")) == posts  # nothing sent twice


class _BlockingSink:
    def __init__(self) -> None:
        self.release = threading.Event()
        self.batches: list[dict[str, Any]] = []

    def emit(self, batch: dict[str, Any]) -> None:
        self.release.wait(60)
        self.batches.append(batch)

    def close(self) -> None:
        pass


def test_full_queue_drops_and_counts_never_blocks(base_tables: Any, tmp_path: Path) -> None:
    spark = base_tables
    sink = _BlockingSink()
    settings = Settings.load(namespace=NS, output_dir=tmp_path / "out", queue_size=1)
    handle = install(spark, settings=settings, sink=sink)
    try:
        for i in range(4):
            spark.sql(f"CREATE OR REPLACE VIEW qv{i} AS SELECT id FROM src")
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(60000)
        assert handle.stats.dropped >= 2
        sink.release.set()
        assert handle.flush(60)
        assert handle.stats.processes + handle.stats.dropped == 4
    finally:
        sink.release.set()
        uninstall(spark)
    for i in range(4):
        spark.sql(f"DROP VIEW IF EXISTS qv{i}")


class _FailingSink:
    def emit(self, batch: dict[str, Any]) -> None:
        msg = "boom"
        raise RuntimeError(msg)

    def close(self) -> None:
        pass


def test_failing_sink_never_fails_the_job(base_tables: Any, tmp_path: Path) -> None:
    spark = base_tables
    handle = install(spark, settings=Settings.load(namespace=NS, output_dir=tmp_path), sink=_FailingSink())
    try:
        drop(spark, "fs_t")
        spark.sql("CREATE TABLE fs_t USING parquet AS SELECT id FROM src")
        assert spark.table("fs_t").count() == 3
        assert handle.flush(60)
        assert handle.stats.emit_errors == 1
    finally:
        uninstall(spark)


def test_a_silent_atlas_never_holds_the_jobs_end(base_tables: Any, tmp_path: Path) -> None:
    """Atlas accepts connections and never answers: the job's end waits ``close_timeout_s`` at most, then
    cuts the call in flight and keeps every statement's lineage in the spool (nothing lost)."""
    from atlas_stub.http import Fault, FaultServer

    from atlas_bridge.atlas.client import RetryPolicy

    spark = base_tables
    spool = tmp_path / "spool"
    with FaultServer() as srv:
        srv.add(Fault("silent", times=None))
        # Patient settings on purpose: without the end-of-job cut, close() would wait on them for minutes.
        client = AtlasClient(
            srv.url, retries=5, backoff=0, timeout=(5, 120), policy=RetryPolicy(give_up_after_s=600)
        )
        settings = Settings.load(namespace=NS, output_dir=tmp_path / "out", close_timeout_s=0.5)
        handle = install(spark, settings=settings, sink=AtlasSink(client, spool_dir=spool), coalesce_s=600)
        drop(spark, "silent1", "silent2")
        spark.sql("CREATE TABLE silent1 USING parquet AS SELECT id, amount FROM src")
        spark.sql("CREATE TABLE silent2 USING parquet AS SELECT id FROM silent1")
        uninstall(spark)
        posts = [o for m, p, o in srv.log if p.endswith("/entity/bulk")]
    assert len(posts) <= 1, srv.log  # one call was in flight and cut; no retries, no call per batch
    kept = [
        e["attributes"]["qualifiedName"]
        for f in sorted(spool.glob("*-entities.json"))
        for e in json.loads(f.read_text())["entities"]
        if e["typeName"] == "atlas_bridge_process"
    ]
    assert len(kept) == 2
    assert handle.stats.processes == 2
    assert handle.stats.emit_errors == 0


def test_a_slow_atlas_drops_no_event(base_tables: Any, tmp_path: Path) -> None:
    """Issue 29: while the worker waited on a slow Atlas, events beyond the queue were dropped. Atlas calls
    now wait in a sender thread: the worker keeps converting, and batches beyond the queue wait on disk."""
    from atlas_stub.http import Fault, FaultServer

    spark = base_tables
    spool = tmp_path / "spool"
    with FaultServer(max_hold_s=120) as srv:
        client = AtlasClient(srv.url, retries=0, backoff=0, timeout=(5, 150))
        register_typedefs(client)
        srv.add(Fault("hold", method="POST", path_contains="/entity/bulk"))  # the first call waits
        settings = Settings.load(namespace=NS, output_dir=tmp_path / "out", queue_size=1, close_timeout_s=60)
        handle = install(spark, settings=settings, sink=AtlasSink(client, spool_dir=spool), coalesce_s=600)
        tables = [f"slow{i}" for i in range(5)]
        try:
            drop(spark, *tables)
            for t in tables:
                spark.sql(f"CREATE TABLE {t} USING parquet AS SELECT id FROM src")
            spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(60000)
            assert handle.stats.dropped == 0
            srv.release.set()
            assert handle.flush(120)
        finally:
            srv.release.set()
            uninstall(spark)
            drop(spark, *tables)
        made = {e["attributes"]["qualifiedName"] for e in srv.stub.active_entities("atlas_bridge_process")}
    assert len(made) == 5
    assert handle.stats.processes == 5
    assert not list(spool.glob("overflow-*"))  # what waited on disk was sent, and its folder removed


class _ListSink:
    def __init__(self) -> None:
        self.batches: list[dict[str, Any]] = []

    def emit(self, batch: dict[str, Any]) -> None:
        self.batches.append(batch)

    def close(self) -> None:
        pass


class _CountingClient:
    """Counts the py4j round trips made by threads other than the test's own (the hook's listener callback
    and its worker): each command sent, plus one for each JVM object reference handed back to them (py4j
    deletes it with one more command when the Python side lets it go). Memory deletes themselves are not
    counted where they are sent, since py4j's finalizer thread sends them for every thread."""

    def __init__(self, spark: Any) -> None:
        self.client = spark.sparkContext._gateway._gateway_client
        self.main = threading.get_ident()
        self.commands: list[str] = []
        self._send = self.client.send_command

    def __enter__(self) -> _CountingClient:
        def send_command(command: str, *args: Any, **kwargs: Any) -> Any:
            answer = self._send(command, *args, **kwargs)
            if threading.get_ident() != self.main and not command.startswith("m\n"):
                self.commands.append(" ".join(command.split("\n")[1:3]))
                if isinstance(answer, str) and answer.startswith("yro"):
                    self.commands.append(f"(delete {answer[3:]} later)")
            return answer

        self.client.send_command = send_command
        return self

    def __exit__(self, *exc: object) -> None:
        del self.client.send_command


def test_an_insert_costs_at_most_five_py4j_round_trips(base_tables: Any, tmp_path: Path) -> None:
    """Every py4j command the hook sends for one INSERT event, callback and worker together, counted at
    the gateway client (not by the hook's own bookkeeping)."""
    spark = base_tables
    drop(spark, "rt_t")
    spark.sql("CREATE TABLE rt_t (id BIGINT, amount_x2 DOUBLE, tag STRING) USING parquet")
    sink = _ListSink()
    handle = install(spark, settings=Settings.load(namespace=NS, output_dir=tmp_path), sink=sink)
    try:
        spark.sql("SELECT 1").collect()  # the reader is compiled at install; warm the path once
        assert handle.flush(60)
        with _CountingClient(spark) as counted:
            spark.sql(
                "INSERT INTO rt_t SELECT id, amount * 2, concat(tag, '_', cust) FROM src WHERE amount > 0"
            )
            assert handle.flush(60)
        assert handle.stats.processes == 1
        assert handle.stats.round_trips[-1] <= 5
        # One INSERT event: its QueryExecution reference (deleted later) plus the hook's own commands.
        assert 1 <= 1 + len(counted.commands) <= 5, counted.commands
        print("py4j commands of one INSERT:", counted.commands)
    finally:
        uninstall(spark)
        drop(spark, "rt_t")
    names = {e["attributes"]["qualifiedName"] for b in sink.batches for e in b["entities"]}
    assert f"default.rt_t.amount_x2@{NS}" in names, sorted(names)


def test_the_fallback_reader_reads_what_the_jvm_reader_reads(base_tables: Any) -> None:
    from atlas_bridge.spark.jvm import FAILED, JvmReader

    spark = base_tables
    qe = spark._jsparkSession.sql("SELECT id, upper(tag) AS t FROM src WHERE amount > 1").queryExecution()
    paths: list[Any] = [
        ["analyzed", "nodeName"],
        ["id"],
        ["analyzed", "origin", "sqlText"],
        ["analyzed", "toJSON"],
        ["analyzed", "collectLeaves", ("apply", 0), "catalogTable", "identifier", "quotedString"],
        ["analyzed", "collectLeaves", ("apply", 0), "output", ("mkString", "|")],
        ["analyzed", "collectLeaves", ("apply", 0), "catalogTable", "bucketSpec"],
        ["analyzed", "no_such_method"],
    ]
    java = JvmReader(spark._jvm)
    assert java.batched
    fast, calls = java.read(qe, paths)
    slow, slow_calls = JvmReader(spark._jvm, use_java=False).read(qe, paths)
    assert calls == 1 < slow_calls
    assert fast == slow
    assert fast[0] == "Project"
    assert fast[4] == "`spark_catalog`.`default`.`src`"
    assert fast[6] is None
    assert fast[7] is FAILED
