"""The scan's bodies, joined as JSON text on the driver, are byte for byte those the dict rendering gave.

The reference is built here independently of the collector's spill: the executors' records as they come
(datasets merged by the collector's in-memory tier, process records straight from the executors' JSON,
a process seen in an earlier unit skipped), rendered by ``convert.batches_from_records`` and encoded as
the Atlas client encodes a body.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from atlas_bridge.atlas.convert import TYPE_PATH, TYPE_TABLE, batches_from_records
from atlas_bridge.atlas.encoded import EncodedBatch, as_dict, encode_body
from atlas_bridge.atlas.sink import dumps_batch
from atlas_bridge.bridge.extract import decode_unit, extract_partition, pack_unit
from atlas_bridge.bridge.inputs import discover_inputs, plan_units
from atlas_bridge.bridge.merge import EntityCollector, task_file_name
from atlas_bridge.bridge.schema import schema_index
from atlas_bridge.bridge.types import ScanOptions

COPIES = 2  # TPC-DS's 99 queries twice, as CTAS to distinct tables, plus one script repeated


def _payloads(shared: Path, tmp: Path) -> list[dict[str, Any]]:
    """What the driver receives for a TPC-DS CTAS estate (the executors' work done here)."""
    text = (shared / "bench" / "tpcds_queries.jsonl").read_text(encoding="utf-8")
    queries = [json.loads(x) for x in text.splitlines() if x]
    corpus = tmp / "corpus"
    corpus.mkdir()
    for copy in range(COPIES):
        parts = [
            f"CREATE TABLE bench.{q['id'][6:]}_c{copy} AS\n{q['sql'].strip().rstrip(';')};\n" for q in queries
        ]
        (corpus / f"script_{copy}.sql").write_text("\n".join(parts), encoding="utf-8")
    again = (corpus / "script_0.sql").read_text(encoding="utf-8")
    (corpus / "script_9.sql").write_text(again, encoding="utf-8")
    schema = json.loads((shared / "bench" / "tpc-ds.schema.json").read_text())
    options = ScanOptions(dialect="spark", schema=schema)
    files, _ = discover_inputs([corpus])
    index = schema_index([], schema, None, [])
    units = plan_units(files, options, ship_content=False)
    return [json.loads(p) for tag, p in extract_partition(units, options, "bench", index) if tag == "unit"]


def _path_unit(payloads: list[dict[str, Any]]) -> dict[str, Any]:
    """One more unit that sees a table read by many processes as a path: the merge makes it a path (the
    more specific type), so references written as a table take the path type and sort differently."""
    counts: dict[str, int] = {}
    for p in payloads:
        for _, line in p["process_lines"]:
            rec = json.loads(line)
            if rec["typeName"] == "atlas_bridge_process":
                inputs = rec["refs"].get("inputs", [])
                if len(inputs) > 1:
                    counts[inputs[-1][1]] = counts.get(inputs[-1][1], 0) + 1
    qn = max(sorted(counts), key=counts.__getitem__)
    record = {
        "tier": 1,
        "group": qn,
        "typeName": TYPE_PATH,
        "qualifiedName": qn,
        "attributes": {"qualifiedName": qn, "name": "seen as a path"},
        "refs": {},
    }
    return {"datasets": [record], "process_lines": [], "unused": []}


def _odd_units(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Two copies of one statement's group under other names, with text to escape (non-ASCII, "%"), the
    second with a reference to the first's process (a group rendered from its records every time)."""
    first = payloads[0]["process_lines"]
    owner = first[0][0]
    odd_column = ["atlas_bridge_column", "bench.odd ünï %s.c 1%@bench", "dataset_process_inputs"]
    units = []
    for copy in ("-copy ünï %d%%", "-other ünï %s"):
        renamed = [json.loads(line.replace(owner, owner + copy)) for group, line in first if group == owner]
        renamed[0]["attributes"]["sourceFile"] = "dir/ünï %s 100%.sql"
        renamed[-1]["refs"]["inputs"].append(odd_column)
        if copy.startswith("-other"):
            rel = "atlas_bridge_process_column_lineages"
            renamed[-1]["refs"]["other"] = ["atlas_bridge_process", owner + "-copy ünï %d%%", rel]
        lines = [[r["group"], json.dumps(r, separators=(",", ":"), ensure_ascii=False)] for r in renamed]
        units.append({"datasets": [], "process_lines": lines, "unused": []})
    return units


def _reference_records(
    collector: EntityCollector, payloads: list[dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    yield from collector._dataset_records()
    seen: set[str] = set()
    for p in payloads:
        groups = {g for g, _ in p["process_lines"]}
        for group, line in p["process_lines"]:
            if group not in seen:
                rec = json.loads(line)
                rec["nbytes"] = len(line) + 1  # as the old spill gave it: the line read back with its newline
                yield rec
        seen |= groups


@pytest.fixture(scope="module")
def estates(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    payloads = _payloads(shared_dir, tmp_path_factory.mktemp("estate"))
    # Without the path, bodies without datasets are joined from each group's text; with it, nearly every
    # body has a group that reads the retyped table and is rendered from the records.
    copy, other = _odd_units(payloads)
    return {
        "tables": [*payloads[:1], copy, *payloads[1:], other],
        "a path": [*payloads[:1], copy, *payloads[1:], _path_unit(payloads), other],
    }


@pytest.mark.parametrize("name", ["tables", "a path"])
@pytest.mark.parametrize(
    ("max_entities", "max_bytes"),
    [(1000, 4_000_000), (500, None), (7, 6_000), (40, 30_000), (1, None)],
)
def test_encoded_bodies_are_the_rendered_ones_byte_for_byte(
    estates: dict[str, list[dict[str, Any]]],
    name: str,
    tmp_path: Path,
    max_entities: int,
    max_bytes: int | None,
) -> None:
    estate = estates[name]
    collector = EntityCollector(tmp_path / "spill")
    for p in estate:
        collector.add(json.loads(json.dumps(p)))
    collector.finish()
    types = collector.dataset_types()
    assert (TYPE_PATH in types.values()) == (name == "a path")
    assert TYPE_TABLE in types.values()
    expected = [
        json.dumps(b, separators=(",", ":")).encode("utf-8")
        for b in batches_from_records(
            _reference_records(collector, estate),
            dataset_types=types,
            max_entities=max_entities,
            max_bytes=max_bytes,
        )
    ]
    got = list(collector.batches(max_entities, max_bytes))
    assert all(isinstance(b, EncodedBatch) for b in got)
    assert [encode_body(b) for b in got] == expected
    assert collector.batch_count(max_entities, max_bytes) == len(expected)
    assert len(expected) > (1 if max_entities >= 500 else 100)
    # The records the collector gives back render the same bodies (the spill keeps every reference).
    again = batches_from_records(
        collector.records(), dataset_types=types, max_entities=max_entities, max_bytes=max_bytes
    )
    assert [json.dumps(b, separators=(",", ":")).encode("utf-8") for b in again] == expected
    # Decoded, a body is the rendered dict: what a file sink writes, what the resume state hashes.
    first = json.loads(expected[0])
    assert got[0] == first
    assert as_dict(got[0]) == first
    assert dumps_batch(got[0]) == dumps_batch(first)
    assert got[0].entity_count == len(first["entities"])
    assert [(g, t, q) for g, t, q in got[0].names] == [
        (e["guid"], e["typeName"], e["attributes"]["qualifiedName"]) for e in first["entities"]
    ]


def test_an_encoded_batch_goes_to_atlas_as_it_is(atlas_stub: Any, tmp_path: Path) -> None:
    """Posted by the client from its own bytes, counted and probed from its names: never decoded."""
    from atlas_bridge.atlas.client import AtlasClient
    from atlas_bridge.bridge.deliver import AtlasDelivery, deliver

    client = AtlasClient(atlas_stub.base_url, backoff=0)
    client.create_typedefs(
        {"entityDefs": [{"name": "t_table", "superTypes": ["DataSet"], "attributeDefs": []}]}
    )
    qn = "db.ünï %s 1%@p"
    body = {
        "entities": [{"typeName": "t_table", "guid": "-1", "attributes": {"name": qn, "qualifiedName": qn}}],
        "referredEntities": {},
    }
    batch = EncodedBatch(json.dumps(body, separators=(",", ":")).encode("ascii"), [("-1", "t_table", qn)])
    delivery = AtlasDelivery(client, "atlas:stub", tmp_path / "unsent")
    stats = deliver([batch], delivery, None, total=1)
    assert (stats.sent, stats.created, stats.errors) == (1, 1, [])
    assert not batch.decoded
    assert atlas_stub.requests_to("POST", "/entity/bulk")[-1].body == body
    assert delivery.last_probe is not None
    assert (delivery.last_probe["typeName"], delivery.last_probe["qualifiedName"]) == ("t_table", qn)
    # The resume state hashes it as it hashes the same body as a dict.
    from atlas_bridge.bridge.deliver import batch_hash

    assert batch_hash(batch) == batch_hash(body)


def test_spill_groups_made_on_the_executors_give_the_same_bodies(shared_dir: Path, tmp_path: Path) -> None:
    """The scan's executors send the process tier as spill groups (``extract_partition(spill_groups=True)``,
    one reference cache per partition); the bodies are those of record lines grouped on the driver."""
    schema = json.loads((shared_dir / "bench" / "tpc-ds.schema.json").read_text())
    queries = [
        json.loads(x) for x in (shared_dir / "bench" / "tpcds_queries.jsonl").read_text().splitlines() if x
    ]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for copy in range(2):
        parts = [
            f"CREATE TABLE bench.{q['id'][6:]}_c{copy} AS\n{q['sql'].strip().rstrip(';')};\n" for q in queries
        ]
        (corpus / f"script_{copy}.sql").write_text("\n".join(parts[: 40 + copy * 30]), encoding="utf-8")
    options = ScanOptions(dialect="spark", schema=schema)
    files, _ = discover_inputs([corpus])
    units = plan_units(files, options, ship_content=False)
    index = schema_index([], schema, None, [])

    def bodies(spill_groups: bool, where: Path) -> tuple[list[bytes], dict[str, int]]:
        collector = EntityCollector(where)
        payloads = extract_partition(units, options, "bench", index, spill_groups=spill_groups)
        units_seen = [decode_unit(p) for tag, p in payloads if tag == "unit"]
        assert all(("process_groups" in u) is spill_groups for u in units_seen)
        for u in units_seen:
            collector.add(u)
        collector.finish()
        return [encode_body(b) for b in collector.batches(300, 400_000)], collector.counts()

    made_there, counts = bodies(True, tmp_path / "a")
    assert len(made_there) > 5
    assert counts["datasets"] > 0  # the report's figures travel too
    assert counts["column_relations"] > 0
    assert (made_there, counts) == bodies(False, tmp_path / "b")

    # A local master's tasks write the text lines to files (here one group in two: a unit's payload then
    # carries both kinds); the driver reads them there.
    collector = EntityCollector(tmp_path / "c")
    written: list[int] = []

    def sink(group: str, line: bytes) -> tuple[str, int, int, int] | None:
        written.append(len(written))
        if len(written) % 2 == 0:
            return None
        path = collector.task_dir / task_file_name(7)
        with open(path, "ab") as fh:
            at = fh.tell()
            fh.write(line)
        return path.name, at, len(line), line.index(b"\t")

    for tag, p in extract_partition(units, options, "bench", index, spill_groups=True, text_sink=sink):
        if tag == "unit":
            collector.add(decode_unit(pack_unit(p)))
    collector.finish()
    assert len(written) > 50
    assert [encode_body(b) for b in collector.batches(300, 400_000)] == made_there
    assert collector.counts() == counts


def _normalised(record: dict[str, Any]) -> dict[str, Any]:
    """A record as rendering sees it: each list of references sorted, without repeats."""
    refs = {
        name: sorted({tuple(r) for r in v}) if v and not isinstance(v[0], str) else v
        for name, v in record["refs"].items()
    }
    return {**record, "refs": refs}


def test_a_usable_group_travels_as_its_text_alone(estates: dict[str, list[dict[str, Any]]]) -> None:
    """Executors send a group's records only when its text cannot render it (a reference out of the
    group); otherwise the driver rebuilds them from the text, for the few bodies that need records."""
    from atlas_bridge.bridge.bodies import process_groups, records_from_text
    from atlas_bridge.bridge.extract import _group_text

    usable = unusable = 0
    for unit in estates["tables"]:
        lines = unit["process_lines"]
        originals: dict[str, list[dict[str, Any]]] = {}
        for group, line in lines:
            originals.setdefault(group, []).append(json.loads(line))
        for group, tier, _sizes, _split, text_line, records in process_groups(lines, _group_text()):
            if json.loads(text_line.partition("\t")[0])[0]:
                usable += 1
                assert records == ""
                rebuilt = records_from_text(tier, group, *text_line.split("\t", 1))
                assert [_normalised(r) for r in rebuilt] == [_normalised(r) for r in originals[group]]
            else:
                unusable += 1
                assert [json.loads(x) for x in records.splitlines()] == originals[group]
                with pytest.raises(ValueError, match="not usable"):
                    records_from_text(tier, group, *text_line.split("\t", 1))
    assert usable > 100
    assert unusable == 1  # the odd unit's group that references another group's process


def test_a_packed_unit_decodes_as_its_text(shared_dir: Path, tmp_path: Path) -> None:
    """Units travel deflated from the executors (pack_unit): the driver reads the same records."""

    schema = json.loads((shared_dir / "bench" / "tpc-ds.schema.json").read_text())
    query = json.loads((shared_dir / "bench" / "tpcds_queries.jsonl").read_text().splitlines()[0])
    (tmp_path / "q.sql").write_text(f"CREATE TABLE bench.t AS\n{query['sql'].strip().rstrip(';')};\n")
    options = ScanOptions(dialect="spark", schema=schema)
    files, _ = discover_inputs([tmp_path / "q.sql"])
    units = plan_units(files, options, ship_content=False)
    index = schema_index([], schema, None, [])
    made = extract_partition(units, options, "b", index, spill_groups=True)
    payloads = [p for tag, p in made if tag == "unit"]
    assert payloads
    for p in payloads:
        packed = pack_unit(p)
        assert len(packed) * 5 < len(p.encode("utf-8"))
        assert decode_unit(packed) == decode_unit(p)


def test_a_reset_collector_is_a_new_one(estates: dict[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    """A merge that ran ahead is dropped (the learned schema sent units to a second round): nothing of it
    stays, in memory or in the spill."""
    estate = estates["a path"]
    fresh = EntityCollector(tmp_path / "fresh")
    reused = EntityCollector(tmp_path / "reused")
    for p in estate[:2]:
        reused.add(json.loads(json.dumps(p)))
    reused.reset()
    for c in (fresh, reused):
        for p in estate[2:]:
            c.add(json.loads(json.dumps(p)))
        c.finish()
    assert reused.counts() == fresh.counts()
    assert [encode_body(b) for b in reused.batches(500)] == [encode_body(b) for b in fresh.batches(500)]
