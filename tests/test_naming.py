"""qualifiedNames follow the Atlas hooks' conventions and are stable across runs."""

from __future__ import annotations

import pytest

from atlas_bridge import naming
from atlas_bridge.model import Column, ColumnRef, Dataset, DatasetKind, Lineage, Process, Relation, dataset_id


@pytest.mark.parametrize(
    ("db", "name", "catalog", "namespace", "expected"),
    [
        ("Sales", "Orders", None, "primary", "sales.orders@primary"),
        (None, "T1", None, "primary", "default.t1@primary"),
        ("sales", "orders", "Hive", "primary", "hive.sales.orders@primary"),
        ("s", "t", None, "Cluster-EU", "s.t@Cluster-EU"),  # the namespace keeps its case, as in the hook
    ],
)
def test_table_qualified_name(
    db: str | None, name: str, catalog: str | None, namespace: str, expected: str
) -> None:
    assert naming.table_qualified_name(db, name, namespace, catalog) == expected


def test_column_qualified_name_inserts_before_the_namespace() -> None:
    assert naming.column_qualified_name("sales.orders@primary", "Amount") == "sales.orders.amount@primary"
    assert naming.column_qualified_name("sales.orders@a@b", "x") == "sales.orders@a.x@b"  # last @ wins


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("hdfs://nn:8020/warehouse/Events", "hdfs://nn:8020/warehouse/Events@primary"),
        ("/tmp/pv_gender_sum", "/tmp/pv_gender_sum@primary"),
        ("file:///data/x.csv", "file:///data/x.csv@primary"),
        ("s3a://Bucket/Raw/", "s3a://Bucket/Raw/"),
        ("gs://b/k", "gs://b/k"),
        ("abfss://c@acct.dfs.core.windows.net/dir", "abfss://c@acct.dfs.core.windows.net/dir"),
    ],
)
def test_path_qualified_name(uri: str, expected: str) -> None:
    assert naming.path_qualified_name(uri, "primary") == expected


def test_path_columns_use_a_fragment_even_when_the_uri_has_an_at() -> None:
    qn = naming.path_qualified_name("abfss://c@acct.dfs.core.windows.net/dir", "primary")
    assert (
        naming.path_column_qualified_name(qn, "Id", "primary") == "abfss://c@acct.dfs.core.windows.net/dir#id"
    )
    hdfs = naming.path_qualified_name("hdfs://nn/d", "primary")
    assert naming.path_column_qualified_name(hdfs, "id", "primary") == "hdfs://nn/d#id@primary"


def _ds(kind: DatasetKind, name: str, db: str | None = None, uri: str | None = None, **kw: object) -> Dataset:
    return Dataset(id=dataset_id(kind, uri or name, db), kind=kind, name=name, db=db, uri=uri, **kw)  # type: ignore[arg-type]


def test_dataset_qualified_name_per_kind() -> None:
    ns = "primary"
    assert naming.dataset_qualified_name(_ds(DatasetKind.TABLE, "T", "S"), ns) == "s.t@primary"
    assert naming.dataset_qualified_name(_ds(DatasetKind.VIEW, "v"), ns) == "default.v@primary"
    assert naming.dataset_qualified_name(_ds(DatasetKind.PATH, "s3://b/k", uri="s3://b/k"), ns) == "s3://b/k"
    stage = Dataset(id="stage:@my_stage", kind=DatasetKind.STAGE, name="@my_stage", uri="s3://b/stage/")
    assert naming.dataset_qualified_name(stage, ns) == "s3://b/stage/"
    path = _ds(DatasetKind.PATH, "s3://b/k", uri="s3://b/k")
    assert naming.dataset_column_qualified_name(path, "C", ns) == "s3://b/k#c"
    assert naming.dataset_column_qualified_name(_ds(DatasetKind.TABLE, "t", "s"), "C", ns) == "s.t.c@primary"


def _lineage(sql_hash: str, target: str = "b") -> tuple[Process, Lineage]:
    src = _ds(DatasetKind.TABLE, "a", "s", columns=[Column(name="x")])
    tgt = _ds(DatasetKind.TABLE, target, "s", columns=[Column(name="x")])
    proc = Process(id=f"process:{sql_hash[:16]}", type="insert", name="Insert", query_hash=sql_hash)
    rel = Relation(
        type="fdd",
        source=ColumnRef(dataset_id=src.id, column="x"),
        target=ColumnRef(dataset_id=tgt.id, column="x"),
        process_id=proc.id,
    )
    return proc, Lineage(datasets=[src, tgt], processes=[proc], relations=[rel])


def test_process_qualified_name_is_operation_inputs_outputs_never_the_text() -> None:
    proc, lineage = _lineage("0123456789abcdef" * 4)
    qn = naming.process_qualified_name(proc, lineage, "primary")
    assert qn == "INSERT:s.a@primary->s.b@primary"
    # An edited statement (another text, same operation, reads and writes) updates the same process.
    proc2, lineage2 = _lineage("fedcba9876543210" * 4)
    assert naming.process_qualified_name(proc2, lineage2, "primary") == qn
    # Another target is another process.
    proc4, lineage4 = _lineage("0123456789abcdef" * 4, target="c")
    assert naming.process_qualified_name(proc4, lineage4, "primary") != qn
    # A statement that defines what it writes is named after its output, as the Hive hook names CTAS.
    ctas = proc.model_copy(update={"type": "create_table_as_select"})
    lineage_ctas = lineage.model_copy(update={"processes": [ctas]})
    assert naming.process_qualified_name(ctas, lineage_ctas, "primary") == "s.b@primary:CREATE"


def test_process_outputs_include_datasets_written_without_relations() -> None:
    tgt = Dataset(id="table:s.z", kind=DatasetKind.TABLE, name="z", db="s", process_ids=("process:1",))
    other = Dataset(id="table:s.y", kind=DatasetKind.TABLE, name="y", db="s", process_ids=("process:1",))
    proc = Process(id="process:1", type="insert", name="Insert", query_hash="ab" * 32)
    lineage = Lineage(datasets=[tgt, other], processes=[proc])
    assert naming.process_qualified_name(proc, lineage, "ns") == "INSERT:->s.y@ns,s.z@ns"
    # nothing permanent written: nothing to name it after but the statement
    alone = Lineage(processes=[proc])
    assert naming.process_qualified_name(proc, alone, "ns") == "abababababababab@ns"


def test_column_lineage_and_execution_names() -> None:
    pqn = "s.b@primary:0123456789abcdef"
    direct = naming.column_lineage_qualified_name(pqn, "s.b.x@primary", naming.DEPENDENCY_DIRECT, "primary")
    indirect = naming.column_lineage_qualified_name(
        pqn, "s.b.x@primary", naming.DEPENDENCY_INDIRECT, "primary"
    )
    assert direct == "s.b@primary:0123456789abcdef:s.b.x:direct"
    assert indirect != direct
    path_col = naming.column_lineage_qualified_name(pqn, "abfss://c@a/d#x", "DIRECT", "primary")
    assert path_col == f"{pqn}:abfss://c@a/d#x:direct"
    assert naming.process_execution_qualified_name(pqn, "app-1:7") == f"{pqn}:app-1:7"
