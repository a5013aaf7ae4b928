"""Benchmark of the Atlas side: converter throughput, pushes into the Atlas stub, HTTP requests per statement.

The corpus is TPC-DS's 99 queries (``../shared/bench/tpcds_queries.jsonl``) turned into CTAS statements with
distinct targets (``bench.q14_c0042``), 100 per script, extracted with the TPC-DS schema. Figures:

* **convert**: entities per second of ``to_atlas_batches`` over the merged lineage, and its time as a ratio
  of the extraction time of the same statements (the peer, measured in the same process);
* **push**: entities per second through the converter, ``AtlasClient`` and the ``responses``-based Atlas
  stub (``tests/atlas_stub.py``, which validates every reference), for a subset of the statements, plus a
  second push of the same lineage (it must create nothing);
* **HTTP requests per 1,000 statements** (fewer is better): merged lineage in 500-entity batches, one
  conversion per 100-statement script, and the naive peer of one conversion per statement.

    python benchmarks/atlas_push.py                    # 1,000 statements, 200 of them through the stub
    python benchmarks/atlas_push.py --statements 300 --stub-statements 100    # quick
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from atlas_bridge.atlas.encoded import encode_body, entity_count
from atlas_bridge.atlas.limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTITIES

ROOT = Path(__file__).resolve().parent.parent
BENCH = next(
    (p / "shared" / "bench" for p in ROOT.parents if (p / "shared" / "bench").is_dir()),
    ROOT.parent / "shared" / "bench",
)
PER_SCRIPT = 100
NAMESPACE = "bench"


def scripts(statements: int) -> list[str]:
    """``statements`` CTAS statements with distinct targets, 100 per script."""
    queries = [json.loads(line) for line in (BENCH / "tpcds_queries.jsonl").read_text().splitlines() if line]
    out: list[str] = []
    parts: list[str] = []
    for n in range(statements):
        q = queries[n % len(queries)]
        qid = q["id"].replace("tpcds-", "")
        parts.append(
            f"CREATE TABLE bench.{qid}_c{n // len(queries):05d} AS\n{q['sql'].strip().rstrip(';')};\n"
        )
        if len(parts) == PER_SCRIPT:
            out.append("\n".join(parts))
            parts = []
    if parts:
        out.append("\n".join(parts))
    return out


def _entities(batches: list[dict[str, Any]]) -> int:
    return sum(len(b["entities"]) for b in batches)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--statements", type=int, default=1000)
    parser.add_argument("--stub-statements", type=int, default=200)
    parser.add_argument("--max-entities", type=int, default=DEFAULT_MAX_ENTITIES)
    parser.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES)
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT / "tests"))
    from atlas_stub import AtlasStub  # the test stub: a strict in-memory Atlas on `responses`

    from atlas_bridge.atlas.client import AtlasClient
    from atlas_bridge.atlas.convert import to_atlas_batches, to_entity_records
    from atlas_bridge.atlas.typedefs import register_typedefs
    from atlas_bridge.bridge.merge import EntityCollector
    from atlas_bridge.extractors.sql import extract_sql_lineage
    from atlas_bridge.graph import end_to_end
    from atlas_bridge.model import Lineage, merge_lineage

    schema = json.loads((BENCH / "tpc-ds.schema.json").read_text())
    texts = scripts(args.statements)

    t0 = time.perf_counter()
    per_script: list[Lineage] = []
    problems = 0
    for i, text in enumerate(texts):
        result = extract_sql_lineage(text, dialect="spark", schema=schema, file=f"script_{i:05d}.sql")
        problems += sum(1 for p in result.problems if p.severity.value == "error")
        per_script.append(result.lineage)
    t_extract = time.perf_counter() - t0
    merged = merge_lineage(per_script)
    n_statements = len(merged.processes)

    t0 = time.perf_counter()
    batches = to_atlas_batches(
        merged, namespace=NAMESPACE, max_entities=args.max_entities, max_bytes=args.max_bytes
    )
    t_convert = time.perf_counter() - t0
    n_entities = _entities(batches)
    t0 = time.perf_counter()
    for b in batches:
        json.dumps(b, sort_keys=True)
    t_json = time.perf_counter() - t0
    t0 = time.perf_counter()
    end_to_end(merged)  # the converter's first step, graph.py's: how much of convert it is
    t_e2e = time.perf_counter() - t0

    # What `atlas-bridge scan` sends: per-script records folded by the driver's collector, then streamed.
    with tempfile.TemporaryDirectory() as spill:
        collector = EntityCollector(spill)
        for lin in per_script:
            collector.add(json.loads(json.dumps(to_entity_records(lin, namespace=NAMESPACE))))
        collector.finish()
        scan_sizes = [
            (entity_count(b), len(encode_body(b)))  # the bytes the client posts
            for b in collector.batches(args.max_entities, args.max_bytes)
        ]
    scan_per_request = sum(n for n, _ in scan_sizes) / max(len(scan_sizes), 1)

    # HTTP requests: one POST per batch (typedef registration, 2 requests once, left out).
    per_script_batches = sum(
        len(to_atlas_batches(lin, namespace=NAMESPACE, max_entities=args.max_entities)) for lin in per_script
    )
    per_statement = 0
    for lin in per_script:
        for proc in lin.processes:
            rels = tuple(r for r in lin.relations if r.process_id == proc.id)
            ids = {e.dataset_id for r in rels for e in (r.source, r.target)}
            one = Lineage(
                datasets=tuple(d for d in lin.datasets if d.id in ids or proc.id in d.process_ids),
                processes=(proc,),
                relations=rels,
            )
            per_statement += len(to_atlas_batches(one, namespace=NAMESPACE, max_entities=args.max_entities))

    def per_1000(requests: int) -> float:
        return requests * 1000 / max(n_statements, 1)

    # Through the stub.
    sub = merge_lineage(
        extract_sql_lineage(t, dialect="spark", schema=schema).lineage for t in scripts(args.stub_statements)
    )
    with AtlasStub() as stub:
        client = AtlasClient(stub.base_url, backoff=0)
        register_typedefs(client)
        t0 = time.perf_counter()
        sub_batches = to_atlas_batches(sub, namespace=NAMESPACE, max_entities=args.max_entities)
        for b in sub_batches:
            client.post_entities(b)
        t_push = time.perf_counter() - t0
        posts = len(stub.requests_to("POST", "/entity/bulk"))
        stored = len(stub.active_entities())
        t0 = time.perf_counter()
        created_again = 0
        for b in to_atlas_batches(sub, namespace=NAMESPACE, max_entities=args.max_entities):
            created_again += len(client.post_entities(b).get("mutatedEntities", {}).get("CREATE", []))
        t_repush = time.perf_counter() - t0
    n_sub = _entities(sub_batches)

    print(
        f"corpus: {n_statements} statements (TPC-DS CTAS), {len(texts)} scripts, {problems} extraction errors"
    )
    print(f"merged lineage: {len(merged.datasets)} datasets, {len(merged.relations)} relations")
    print(f"extract (peer):   {t_extract:8.2f} s  {n_statements / t_extract:10.0f} statements/s")
    print(
        f"convert:          {t_convert:8.2f} s  {n_entities / t_convert:10.0f} entities/s "
        f"({n_entities} entities, {len(batches)} batches); convert/extract = {t_convert / t_extract:.2f}"
    )
    print(f"  of which end_to_end (graph.py): {t_e2e:.2f} s ({t_e2e / t_convert:.0%})")
    print(f"json.dumps:       {t_json:8.2f} s  (convert/json = {t_convert / max(t_json, 1e-9):.1f})")
    print(
        f"push into stub:   {t_push:8.2f} s  {n_sub / t_push:10.0f} entities/s "
        f"({args.stub_statements} statements, {n_sub} entities, {posts} POSTs, {stored} stored); "
        f"push/convert per entity = {(t_push / n_sub) / (t_convert / n_entities):.1f}"
    )
    print(f"push again:       {t_repush:8.2f} s  created {created_again} (must be 0)")
    print(
        f"entities per request, `scan` delivery ({args.max_entities} entities / {args.max_bytes:,} bytes "
        f"at most): {scan_per_request:.0f} (goal >= 500); {len(scan_sizes)} requests, "
        f"largest body {max((b for _, b in scan_sizes), default=0):,} bytes"
    )
    print("HTTP requests per 1,000 statements (fewer is better):")
    print(f"  scan (collector):         {per_1000(len(scan_sizes)):8.1f}")
    print(f"  merged, {args.max_entities}/batch:    {per_1000(len(batches)):8.1f}")
    print(f"  per 100-statement script: {per_1000(per_script_batches):8.1f}")
    print(
        f"  per statement (peer):     {per_1000(per_statement):8.1f}"
        f"  -> merged sends {per_statement / max(len(batches), 1):.0f}x fewer requests"
    )
    return 0 if created_again == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
