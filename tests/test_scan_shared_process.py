"""Statements of several files that share one process (same operation, inputs and outputs), issue 28.

A scan sends such a process as the union of all its statements, as it does for statements of one file:
its inputs, outputs and column lineage (each column lineage with the expressions of every statement that
writes that column), its text, hash and source describing every statement. Whatever the order the files
are named in, the number of partitions, how a big script is cut into units, or the working directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from atlas_bridge import bridge
from atlas_bridge.atlas.convert import (
    RunInfo,
    statement_attributes,
    to_atlas_entities,
    to_entity_records,
)
from atlas_bridge.bridge import ScanOptions, WorkUnit
from atlas_bridge.extractors.sql import extract_sql_lineage
from atlas_bridge.graph import end_to_end
from atlas_bridge.model import merge_lineage

DATA = Path(__file__).parent / "data" / "sql" / "shared_process"
NS = "test"
PROCESS = "INSERT:crm.customers@test->crm.customers_clean@test"
A_TEXT = (DATA / "a.sql").read_text(encoding="utf-8")
B_TEXT = (DATA / "b.sql").read_text(encoding="utf-8")


def _collect(
    units: list[WorkUnit], options: ScanOptions, partitions: int, spill: Path
) -> bridge.EntityCollector:
    """What the scan's driver folds, the executors' work done here partition by partition (as the scan's
    results come back: packed, then decoded)."""
    from atlas_bridge.bridge.extract import decode_unit, pack_unit

    collector = bridge.EntityCollector(spill)
    for group in bridge.partition_units(units, partitions):
        for tag, payload in bridge.extract_partition(group, options, NS, spill_groups=True):
            if tag == "unit":
                collector.add(decode_unit(pack_unit(payload)))
    collector.finish()
    return collector


def _entities(
    paths: list[Path], tmp: Path, *, partitions: int = 1, options: ScanOptions | None = None
) -> list[Any]:
    options = options or ScanOptions()
    files, _ = bridge.discover_inputs(paths)
    units = bridge.plan_units(files, options)
    spill = tmp / f"spill-{len(list(tmp.glob('spill-*')))}"
    collector = _collect(units, options, partitions, spill)
    return [e for b in collector.batches(1000) for e in b["entities"]]


def _by_name(entities: list[Any]) -> dict[str, dict[str, Any]]:
    return {e["attributes"]["qualifiedName"]: e for e in entities}


def _one_file(tmp: Path) -> Path:
    """The two statements in one script, a.sql's first."""
    path = tmp / "one" / "ab.sql"
    path.parent.mkdir()
    path.write_text(A_TEXT + B_TEXT, encoding="utf-8")
    return path


def test_a_process_two_files_share_holds_both_statements_lineage(tmp_path: Path) -> None:
    got = _by_name(_entities([DATA], tmp_path))
    process = got[PROCESS]["attributes"]
    # Its statements, both: texts in file order, the hash of both hashes, where the first starts.
    a_hash, b_hash = (statement_attributes([p])["queryHash"] for p in _processes(A_TEXT, B_TEXT))
    assert process["queryText"].split(";\n") == [
        A_TEXT[A_TEXT.index("INSERT") :].strip().rstrip(";"),
        B_TEXT[B_TEXT.index("INSERT") :].strip().rstrip(";"),
    ]
    assert process["queryHash"] not in (a_hash, b_hash)
    assert (process["sourceFile"], process["sourceLine"]) == ("a.sql", 3)
    # Its column lineage: every column either statement writes, each with its own expressions.
    lineage = {
        qn[len(PROCESS) + 1 :]: e["attributes"]
        for qn, e in got.items()
        if e["typeName"] == "atlas_bridge_column_lineage"
    }
    assert lineage["crm.customers_clean.region:direct"]["expression"] == ""  # b.sql's alone
    assert lineage["crm.customers_clean.name:direct"]["expression"] == "UPPER(name)"  # and b's plain copy
    assert lineage["crm.customers_clean.name:direct"]["effect"] == "MODIFIED_COPY"
    assert (
        lineage["crm.customers_clean.city:direct"]["expression"] == "COALESCE(city, 'unknown')\nLOWER(city)"
    )
    # a.sql's WHERE restricts the rows of what a.sql writes only
    assert "crm.customers_clean.name:indirect" in lineage
    assert "crm.customers_clean.region:indirect" not in lineage
    owned = {
        r["uniqueAttributes"]["qualifiedName"]
        for r in got[PROCESS]["relationshipAttributes"]["columnLineages"]
    }
    assert owned == {PROCESS + ":" + k for k in lineage}


def _processes(*texts: str) -> list[Any]:
    return [extract_sql_lineage(t).lineage.processes[0] for t in texts]


def test_two_files_send_what_one_file_of_both_statements_sends(tmp_path: Path) -> None:
    """The same entities, byte for byte, but for the file the process names (a.sql, or the one file)."""
    two = _entities([DATA], tmp_path)
    one = _entities([_one_file(tmp_path)], tmp_path)
    assert _by_name(one)[PROCESS]["attributes"]["sourceFile"] == "ab.sql"
    for e in one:
        if "sourceFile" in e["attributes"]:
            e["attributes"]["sourceFile"] = "a.sql"
    assert json.dumps(two, sort_keys=True) == json.dumps(one, sort_keys=True)
    # ... and what one conversion of both files' lineage sends (the reference the scan is built against)
    options = ScanOptions()
    files, _ = bridge.discover_inputs([DATA])
    merged = merge_lineage(
        end_to_end(bridge.extract_unit(u, options).lineage) for u in bridge.plan_units(files, options)
    )
    whole = to_atlas_entities(merged, namespace=NS)
    assert json.dumps(whole, sort_keys=True) == json.dumps(two, sort_keys=True)


def test_file_order_partitions_and_pieces_of_a_script_change_no_byte(tmp_path: Path) -> None:
    first = _entities([DATA / "a.sql", DATA / "b.sql"], tmp_path)
    assert _entities([DATA / "b.sql", DATA / "a.sql"], tmp_path) == first
    assert _entities([DATA], tmp_path, partitions=2) == first
    # One script cut into pieces at statement ends (one unit each): what the whole script gives.
    one = _one_file(tmp_path)
    whole = _entities([one], tmp_path)
    cut = ScanOptions(sql_chunk_bytes=64)
    files, _ = bridge.discover_inputs([one])
    assert len(bridge.plan_units(files, cut)) == 2
    assert _entities([one], tmp_path, options=cut, partitions=2) == whole


def test_the_merge_does_not_depend_on_the_order_of_the_parts() -> None:
    """Pure: the union of a group's parts, in any order; each execution once, its text the process's."""
    from atlas_bridge.atlas.convert import merge_process_group

    parts = []
    for n, text in enumerate((A_TEXT, B_TEXT, A_TEXT)):  # a.sql's statement again in c.sql: one statement
        lineage = extract_sql_lineage(text, file=f"{'abc'[n]}.sql").lineage
        run = RunInfo(run_id=f"run-{n % 2}", start_ms=n)  # two parts ran in run-0: one execution
        pid = lineage.processes[0].id
        records = to_entity_records(end_to_end(lineage), namespace=NS, runs={pid: (run,)})
        parts.append(([r for r in records["processes"] if r["group"] == PROCESS], records["sides"][PROCESS]))
    merged = merge_process_group(parts)
    assert merge_process_group(parts[::-1]) == merged
    assert merge_process_group([parts[1], parts[0], parts[2]]) == merged
    executions = [r for r in merged if r["typeName"] == "atlas_bridge_process_execution"]
    process = merged[0]["attributes"]
    assert [e["attributes"]["runId"] for e in executions] == ["run-0", "run-1"]
    assert {e["attributes"]["queryText"] for e in executions} == {process["queryText"]}
    assert process["queryText"].count("INSERT") == 2
    assert executions[0]["attributes"]["startTime"] == 0  # run-0 as a.sql's part recorded it


def test_the_collector_holds_only_the_processes_that_recur(tmp_path: Path) -> None:
    """Memory: a process seen once is spilled, not held; only the recurring ones are known in memory
    (where their later occurrences are), until the merge."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for n in range(30):
        (tree / f"s{n:02}.sql").write_text(f"INSERT INTO t{n} SELECT a, b FROM s{n};\n", encoding="utf-8")
    for name in ("x.sql", "y.sql", "z.sql"):
        (tree / name).write_text(f"INSERT INTO t SELECT {name[0]} AS a FROM s;\n", encoding="utf-8")
    options = ScanOptions()
    files, _ = bridge.discover_inputs([tree])
    collector = bridge.EntityCollector(tmp_path / "spill")
    from atlas_bridge.bridge.extract import decode_unit

    for tag, payload in bridge.extract_partition(
        bridge.plan_units(files, options), options, NS, spill_groups=True
    ):
        if tag == "unit":
            collector.add(decode_unit(payload))
    assert {g: len(at) for g, at in collector._aside.items()} == {"INSERT:default.s@test->default.t@test": 2}
    collector.finish()
    assert collector.counts()["processes"] == 31
    process = _by_name([e for b in collector.batches(1000) for e in b["entities"]])[
        "INSERT:default.s@test->default.t@test"
    ]
    assert process["attributes"]["queryText"].count("INSERT") == 3


# ------------------------------------------------------------------------------------------- with Spark


@pytest.fixture
def session(request: pytest.FixtureRequest) -> object:
    """The run's one Spark session (tests/fixtures_spark.py)."""
    try:
        return request.getfixturevalue("spark")
    except pytest.FixtureLookupError:
        pytest.skip("the session-scoped 'spark' fixture is not available")


@pytest.mark.spark
def test_scan_into_atlas_holds_the_union_of_the_files_statements(
    session: object, atlas_stub: Any, tmp_path: Path
) -> None:
    from atlas_bridge.atlas.client import AtlasClient
    from atlas_bridge.atlas.sink import AtlasSink
    from atlas_bridge.atlas.typedefs import register_typedefs

    client = AtlasClient(atlas_stub.base_url, retries=0, backoff=0)
    register_typedefs(client)
    delivery = bridge.SinkDelivery(AtlasSink(client, spool_dir=None), f"atlas:{atlas_stub.base_url}")
    summary = bridge.scan([DATA], delivery, namespace=NS, spark=session, state_dir=tmp_path)
    assert summary.errors == []
    assert summary.delivery.errors == []

    process = atlas_stub.find("atlas_bridge_process", PROCESS)
    assert process is not None
    assert process["attributes"]["queryText"].count("INSERT INTO crm.customers_clean") == 2
    held = {
        e["attributes"]["qualifiedName"][len(PROCESS) + 1 :]: e["attributes"]["expression"]
        for e in atlas_stub.related(process["guid"], "columnLineages")
    }
    assert held["crm.customers_clean.region:direct"] == ""  # b.sql's
    assert held["crm.customers_clean.name:direct"] == "UPPER(name)"  # a.sql's
    assert held["crm.customers_clean.city:direct"] == "COALESCE(city, 'unknown')\nLOWER(city)"  # both
    assert "crm.customers_clean.id:indirect" in held  # a.sql's WHERE

    # A later scan of b.sql alone replaces the process whole (never a mix of two scans): its text, hash
    # and column lineage are b.sql's; what only a.sql wrote is gone with it.
    again = bridge.scan([DATA / "b.sql"], delivery, namespace=NS, spark=session, state_dir=tmp_path)
    assert again.delivery.errors == []
    process = atlas_stub.find("atlas_bridge_process", PROCESS)
    assert process["attributes"]["queryText"] == B_TEXT[B_TEXT.index("INSERT") :].strip().rstrip(";")
    held = {
        e["attributes"]["qualifiedName"][len(PROCESS) + 1 :]: e["attributes"]["expression"]
        for e in atlas_stub.related(process["guid"], "columnLineages")
    }
    assert held == {
        "crm.customers_clean.id:direct": "",
        "crm.customers_clean.name:direct": "",
        "crm.customers_clean.city:direct": "LOWER(city)",
        "crm.customers_clean.region:direct": "",
    }
    left = {
        e["attributes"]["qualifiedName"] for e in atlas_stub.active_entities("atlas_bridge_column_lineage")
    }
    assert not any(qn.endswith(":indirect") for qn in left)


@pytest.mark.spark
def test_cli_payloads_are_the_same_bytes_in_any_file_order_and_working_directory(
    session: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from atlas_bridge.cli import cli

    runner = CliRunner()

    def payloads(out: Path, *args: str) -> dict[str, bytes]:
        result = runner.invoke(cli, ["scan", *args, "--to", str(out)])
        assert result.exit_code == 0, result.output
        found = {p.name: p.read_bytes() for p in out.glob("*-entities.json")}
        assert found
        return found

    a, b = str(DATA / "a.sql"), str(DATA / "b.sql")
    first = payloads(tmp_path / "o1", a, b)
    assert b"LOWER(city)" in first["0001-entities.json"]
    assert payloads(tmp_path / "o2", b, a) == first
    assert payloads(tmp_path / "o3", a, b, "--partitions", "2") == first
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert payloads(tmp_path / "o4", os.path.relpath(a), os.path.relpath(b)) == first


def test_the_union_of_parts_is_the_conversion_of_the_whole_lineage() -> None:
    """Parts that share a process, with what the side encodes in every form: expressions holding line
    breaks, a row count (COUNT(*): a row source), fields below columns, clauses, effects, statements
    repeated and procedures. Merged from records, they are what one conversion of the parts together
    gives, attribute for attribute and reference for reference."""
    from atlas_bridge.atlas.convert import merge_process_group
    from atlas_bridge.model import (
        PSEUDO_ROWS,
        ClauseType,
        Column,
        ColumnRef,
        Dataset,
        DatasetKind,
        Effect,
        Lineage,
        Process,
        Relation,
        Span,
    )

    src = Dataset(
        id="table:s.src",
        kind=DatasetKind.TABLE,
        name="Src",
        db="s",
        columns=[Column(name=c) for c in ("a", "B", "ev", "flag", PSEUDO_ROWS)],
    )
    other = Dataset(
        id="table:s.other",
        kind=DatasetKind.TABLE,
        name="other",
        db="s",
        columns=[Column(name="k"), Column(name=PSEUDO_ROWS)],
    )
    tgt = Dataset(
        id="table:s.tgt",
        kind=DatasetKind.TABLE,
        name="tgt",
        db="s",
        columns=[Column(name=c) for c in ("x", "y", "n", PSEUDO_ROWS)],
    )

    def part(
        file: str, n: int, rels: list[tuple[Any, ...]], *, text: str, procedure: str | None = None
    ) -> Lineage:
        pid = f"process:{file}{n}"
        proc = Process(
            id=pid,
            type="insert",
            name="Insert into s.tgt",
            query_hash=f"{text:0<64}"[:64],
            statement_index=n,
            sql=text,
            span=Span(line=n * 3, column=1, end_line=n * 3 + 1, end_column=2),
            source_file=file,
            procedure=procedure,
        )
        relations = [
            Relation(
                type=kind,
                source=ColumnRef(dataset_id=s, column=c, field=f),
                target=ColumnRef(dataset_id=tgt.id, column=t),
                process_id=pid,
                transform=x,
                effect=e,
                clause_type=cl,
            )
            for kind, s, c, f, t, x, e, cl in rels
        ]
        return Lineage(datasets=[src, other, tgt], processes=[proc], relations=relations)

    fdd, fdr = "fdd", "fdr"
    parts = [
        part(
            "a.sql",
            1,
            [
                (fdd, src.id, "a", None, "x", "CASE\n  WHEN a > 0 THEN a\nEND", Effect.MODIFIED_COPY, None),
                (fdd, src.id, "ev", "payload.id", "y", None, Effect.EXACT_COPY, None),
                (fdd, src.id, PSEUDO_ROWS, None, "n", "COUNT(*)", Effect.AGGREGATION, None),
                (fdr, src.id, "flag", None, PSEUDO_ROWS, "flag = 1", None, ClauseType.WHERE),
            ],
            text="INSERT INTO s.tgt SELECT ... a.sql 1",
        ),
        part(
            "a.sql",
            2,
            [(fdd, src.id, "a", None, "x", "CASE\n  WHEN a > 0 THEN a\nEND", Effect.MODIFIED_COPY, None)],
            text="INSERT INTO s.tgt SELECT ... a.sql 1",  # the same text again: one statement
        ),
        part(
            "b.sql",
            4,
            [
                (fdd, src.id, "B", None, "x", "b + 1", Effect.MODIFIED_COPY, None),
                (fdd, src.id, "ev", "payload.kind", "y", None, Effect.PARTIAL_COPY, None),
                (fdd, src.id, "ev", None, "y", None, Effect.EXACT_COPY, None),
                (fdd, other.id, "k", None, "n", "SUM(k)", Effect.AGGREGATION, None),
                (fdr, other.id, "k", None, PSEUDO_ROWS, None, None, ClauseType.JOIN),
                (fdr, other.id, PSEUDO_ROWS, None, "n", "EXISTS (...)", None, ClauseType.CONDITION),
            ],
            text="INSERT INTO s.tgt SELECT ... b.sql 4",
            procedure="s.load",
        ),
    ]
    group = "INSERT:s.other@test,s.src@test->s.tgt@test"

    def records(lineage: Lineage) -> tuple[list[Any], Any]:
        out = to_entity_records(end_to_end(lineage), namespace=NS)
        return [r for r in out["processes"] if r["group"] == group], out["sides"][group]

    # Each part converted on its own names the process after what that part reads: give every part both
    # tables (a join key of the other table in a.sql's parts, as b.sql has), so all three share the group.
    parts = [
        p.model_copy(
            update={
                "relations": (
                    *p.relations,
                    Relation(
                        type="fdr",
                        source=ColumnRef(dataset_id=other.id, column="k"),
                        target=ColumnRef(dataset_id=tgt.id, column=PSEUDO_ROWS),
                        process_id=p.processes[0].id,
                        clause_type=ClauseType.JOIN,
                    ),
                )
            }
        )
        for p in parts
    ]
    whole, _ = records(merge_lineage(parts))
    merged = merge_process_group([records(p) for p in parts])

    def canonical(recs: list[Any]) -> list[str]:
        """Records as Atlas reads them: a reference array is a set (rendering sorts it, drops repeats)."""
        out = []
        for r in recs:
            refs = {
                k: v if v and isinstance(v[0], str) else sorted(set(map(tuple, v)))
                for k, v in r["refs"].items()
            }
            out.append(json.dumps({**r, "refs": refs}, sort_keys=True))
        return out

    assert canonical(merged) == canonical(whole)
    by_qn = {r["qualifiedName"]: r["attributes"] for r in merged}
    x = by_qn[f"{group}:s.tgt.x:direct"]
    assert x["expression"] == "CASE\n  WHEN a > 0 THEN a\nEND\nb + 1"
    assert "fieldPaths" in by_qn[f"{group}:s.tgt.y:direct"]
    assert by_qn[f"{group}:s.tgt.y:direct"]["fieldPaths"] == ["ev.payload.id -> y", "ev.payload.kind -> y"]
    assert by_qn[f"{group}:s.tgt.y:direct"]["effect"] == "PARTIAL_COPY"  # the strongest of both
    assert (
        by_qn[f"{group}:s.tgt.y:direct"]["name"]
        == "y=tgt, from src.ev, src.ev.payload.id and src.ev.payload.kind"
    )
    assert by_qn[f"{group}:s.tgt.n:direct"]["name"] == "n=tgt, from other.k and src"  # COUNT(*): src's rows
    assert by_qn[f"{group}:s.tgt.n:indirect"]["rowSources"] == ["s.other@test"]
    assert by_qn[f"{group}:s.tgt.n:indirect"]["clauses"] == ["condition", "join", "where"]
    assert by_qn[group]["procedureName"] == ""  # a.sql's statement comes first


def test_two_event_logs_of_one_job_give_its_process_a_run_from_each(tmp_path: Path) -> None:
    """Event logs are units too: the same job run twice (two applications, two logs) is one process per
    statement with an execution per run, whichever log is read first."""
    logs = Path(__file__).parent / "data" / "spark_eventlogs" / "spark-4.3"
    first, second = logs / "local-1795809355750.zstd", logs / "local-1795809395949.lz4"

    def entities(paths: list[Path], partitions: int) -> list[Any]:
        options = ScanOptions()
        files, _ = bridge.discover_inputs(paths)
        spill = tmp_path / f"spill-{len(list(tmp_path.glob('spill-*')))}"
        collector = _collect(bridge.plan_units(files, options), options, partitions, spill)
        return [e for b in collector.batches(1000) for e in b["entities"]]

    got = entities([first, second], 1)
    runs: dict[str, list[str]] = {}
    for e in got:
        if e["typeName"] == "atlas_bridge_process_execution":
            owner = e["relationshipAttributes"]["process"]["uniqueAttributes"]["qualifiedName"]
            runs.setdefault(owner, []).append(e["attributes"]["runId"].split(":")[0])
    ctas = "default.rev@test:CREATE"
    assert sorted(runs[ctas]) == ["local-1795809355750", "local-1795809395949"]  # the two applications
    process = _by_name(got)[ctas]["attributes"]
    assert process["sourceFile"] == first.name  # the first log's run describes it
    assert entities([second, first], 2) == got


def _without_guids(entity: dict[str, Any]) -> str:
    e = json.loads(json.dumps(entity))
    del e["guid"]
    for value in e.get("relationshipAttributes", {}).values():
        for ref in value if isinstance(value, list) else [value]:
            ref.pop("guid", None)
    return json.dumps(e, sort_keys=True)
