"""A SQLFlow export read in pieces (bounded memory, issue 11) gives the lineage and entities of the whole."""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from pathlib import Path

import pytest

from atlas_bridge.bridge.extract import extract_partition
from atlas_bridge.bridge.merge import EntityCollector
from atlas_bridge.bridge.types import InputFile, InputKind, ScanOptions, WorkUnit
from atlas_bridge.model import Lineage, merge_lineage
from atlas_bridge.sqlflow.read import extract_sqlflow_lineage, iter_sqlflow_lineage

DATA = Path(__file__).parent / "data" / "sqlflow"
SAMPLES = sorted(
    p.name for p in DATA.iterdir() if p.suffix in (".xml", ".json") and p.name != "sql_vs_sqlflow.json"
)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from big_inputs import (  # noqa: E402  # the benchmark's generators, small
    small_objects_xml,
    sqlflow_json,
    sqlflow_xml,
)


@pytest.mark.parametrize("name", SAMPLES)
def test_pieces_of_every_sample_merge_into_the_whole(name: str) -> None:
    data = (DATA / name).read_bytes()
    whole = extract_sqlflow_lineage(data, file=name)
    pieces = list(iter_sqlflow_lineage(data, file=name, chunk_relations=2))
    assert merge_lineage(p.lineage for p in pieces) == whole.lineage
    assert pieces[-1].problems == whole.problems
    assert all(not p.problems for p in pieces[:-1])


def test_a_generated_export_is_read_in_several_pieces_of_whole_statements() -> None:
    data = sqlflow_xml(40).encode()
    pieces = list(iter_sqlflow_lineage(data, file="big.xml", chunk_relations=7))
    assert len(pieces) > 10
    # 12 relations per statement (6 into its resultset, 6 out of it): a piece never cuts one apart.
    assert all(len(p.lineage.relations) % 12 == 0 for p in pieces[:-1])
    assert not pieces[-1].lineage.relations
    assert len(pieces[-1].lineage.processes) == 40
    assert merge_lineage(p.lineage for p in pieces) == extract_sqlflow_lineage(data, file="big.xml").lineage


@pytest.mark.parametrize("short", [False, True], ids=["names", "short-names"])
def test_many_small_objects_are_read_in_bounded_memory_per_input_byte(short: bool) -> None:
    # Issue 29: an export of many small objects took 53 bytes of worker memory per input byte (every
    # dataset and column held as models from the first pass to the last piece). The builder keeps light
    # records (a slotted dataset with its columns, a packed span, a table's dataset id alone once made,
    # column-id maps only for ids that relations name): 11.0 / 12.0 traced bytes per input byte here,
    # 17.4 / 20.0 before (names as short as the ids: the 660,000 objects in 60 MB).
    data = small_objects_xml(10_000, short=short).encode()
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        datasets = 0
        for piece in iter_sqlflow_lineage(data, file="objects.xml"):
            datasets += len(piece.lineage.datasets)
            del piece
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert datasets >= 10_000
    assert (peak - start) / len(data) < 14


def test_the_scan_learns_a_sqlflow_exports_tables_without_reading_it_again_whole(tmp_path: Path) -> None:
    # Issue 29: with schema learning (``per_unit``, as ``scan`` runs), the worker read the export a second
    # time, whole, for the tables its CREATE processes define: 41 traced bytes per input byte against 33
    # without learning here (53 in a worker on 60 MB). It learns them from the pieces it reads anyway now.
    path = tmp_path / "objects.xml"
    path.write_text(small_objects_xml(10_000), encoding="utf-8")
    unit = WorkUnit(InputFile(str(path), path.name, InputKind.SQLFLOW, path.stat().st_size))

    def peak(per_unit: bool) -> int:
        gc.collect()
        tracemalloc.start()
        try:
            start = tracemalloc.get_traced_memory()[0]
            kinds = [kind for kind, _ in extract_partition([unit], ScanOptions(), per_unit=per_unit)]
            assert ("schema" in kinds) is per_unit
            return tracemalloc.get_traced_memory()[1] - start
        finally:
            tracemalloc.stop()

    assert peak(True) < 1.1 * peak(False)


def test_the_tables_learned_in_the_scans_pass_are_those_of_the_whole_export(tmp_path: Path) -> None:
    from atlas_bridge.bridge.schema import learn_unit

    learned = 0
    for name in SAMPLES:
        path = DATA / name
        unit = WorkUnit(InputFile(str(path), name, InputKind.SQLFLOW, path.stat().st_size))
        for chunk in (2, 5_000):
            options = ScanOptions(sqlflow_chunk_relations=chunk)
            payloads = extract_partition([unit], options, per_unit=True)
            learned_tables = next(json.loads(p) for k, p in payloads if k == "schema")["tables"]
            tables = [(*t[:3], [tuple(c) for c in t[3]]) for t in learned_tables]
            whole = _created_tables(extract_sqlflow_lineage(path.read_bytes(), file=name).lineage)
            assert tables == whole, name
            assert [(*t[:3], list(t[3])) for t in learn_unit(unit, options).tables] == whole
        learned += len(whole)
    assert learned > 0


def _created_tables(lineage: Lineage) -> list[tuple[object, ...]]:
    """What the whole lineage's CREATE processes define (the learning pass's rule, said again here)."""
    creates = {p.id for p in lineage.processes if p.type.startswith("create_")}
    out: list[tuple[object, ...]] = []
    for ds in lineage.datasets:
        if ds.kind.value not in ("table", "view") or not creates & set(ds.process_ids):
            continue
        cols = [(c.name, c.data_type) for c in ds.columns if not c.system and c.name != "*"]
        if cols and len(cols) == len({c.lower() for c, _ in cols}):
            out.append((ds.catalog, ds.db, ds.name, cols))
    return out


def _scan_records(path: Path, chunk: int, tmp: Path) -> tuple[list[dict[str, object]], dict[str, object]]:
    unit = WorkUnit(InputFile(str(path), path.name, InputKind.SQLFLOW, path.stat().st_size))
    collector = EntityCollector(tmp)
    header: dict[str, object] = {}
    units = 0
    for tag, payload in extract_partition([unit], ScanOptions(sqlflow_chunk_relations=chunk)):
        if tag == "unit":
            units += 1
            collector.add(json.loads(payload))
        else:
            header = json.loads(payload)
    collector.finish()
    header["pieces"] = units
    return list(collector.records()), header


@pytest.mark.parametrize(("fmt", "make"), [("xml", sqlflow_xml), ("json", sqlflow_json)])
def test_scan_of_a_sqlflow_export_in_pieces_gives_the_entities_of_the_whole(
    fmt: str, make: object, tmp_path: Path
) -> None:
    path = tmp_path / f"export.{fmt}"
    path.write_text(make(30), encoding="utf-8")  # type: ignore[operator]
    chunked, h1 = _scan_records(path, 7, tmp_path / "a")
    whole, h2 = _scan_records(path, 1_000_000, tmp_path / "b")
    assert h1["pieces"] > 10
    assert h2["pieces"] == 2
    assert chunked == whole
    # ... and those of the whole model converted at once, as the scan did before it read in pieces.
    from atlas_bridge.atlas.convert import to_entity_records
    from atlas_bridge.graph import end_to_end

    at_once = EntityCollector(tmp_path / "c")
    lineage = extract_sqlflow_lineage(path.read_bytes(), file=path.name).lineage
    at_once.add(to_entity_records(end_to_end(lineage), namespace="default"))
    at_once.finish()
    assert list(at_once.records()) == whole
    assert (
        h1["files"]
        == h2["files"]
        == {path.name: {"kind": "sqlflow", "statements": 30, "units": 1, "users": []}}
    )
    assert sum(r["typeName"] == "atlas_bridge_process" for r in whole) == 30
