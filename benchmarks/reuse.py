"""Reuse of other hooks' entities: lookups per 1,000 datasets, entities reused vs created.

An Atlas that already holds the TPC-DS base tables as the Hive hook makes them (``hive_table`` and
``hive_column`` in Atlas's own hive model) receives the lineage of TPC-DS CTAS statements (the corpus of
``benchmarks/atlas_push.py``) through ``AtlasSink`` with :class:`~atlas_bridge.atlas.reuse.EntityReuse`.
Goals printed beside the figures: no base table or column created twice, and lookups in bulk (at most
about 20 requests per 1,000 datasets and columns looked up, against the 1,000 of a lookup per entity).

    .venv/bin/python benchmarks/reuse.py [--statements 300]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT.parent / "shared" / "bench"
NS = "bench"
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--statements", type=int, default=300)
    args = parser.parse_args(argv)

    from atlas_push import scripts
    from atlas_stub import AtlasStub

    from atlas_bridge.atlas.client import AtlasClient
    from atlas_bridge.atlas.convert import to_atlas_batches
    from atlas_bridge.atlas.reuse import EntityReuse
    from atlas_bridge.atlas.sink import AtlasSink
    from atlas_bridge.atlas.typedefs import register_typedefs
    from atlas_bridge.extractors.sql import extract_sql_lineage
    from atlas_bridge.graph import end_to_end
    from atlas_bridge.model import merge_lineage

    schema = json.loads((BENCH / "tpc-ds.schema.json").read_text())
    lineage = merge_lineage(
        [
            end_to_end(extract_sql_lineage(t, dialect="spark", schema=schema).lineage)
            for t in scripts(args.statements)
        ]
    )
    batches = to_atlas_batches(lineage, namespace=NS)
    with AtlasStub() as stub:
        for model in ("1020-fs_model.json", "1030-hive_model.json"):
            stub.load_typedefs(json.loads((ROOT / "tests" / "data" / "atlas" / model).read_text()))
        client = AtlasClient(stub.base_url, retries=0, backoff=0)
        register_typedefs(client)
        estate = [
            {
                "typeName": "hive_db",
                "guid": "-1",
                "attributes": {"qualifiedName": f"default@{NS}", "name": "default", "clusterName": NS},
            }
        ]
        for n, (table, columns) in enumerate(sorted(schema.items()), start=1):
            tguid = f"-{n * 1000}"
            estate.append(
                {
                    "typeName": "hive_table",
                    "guid": tguid,
                    "attributes": {"qualifiedName": f"default.{table}@{NS}", "name": table},
                    "relationshipAttributes": {"db": {"guid": "-1", "typeName": "hive_db"}},
                }
            )
            for c, (column, ctype) in enumerate(sorted(columns.items()), start=1):
                estate.append(
                    {
                        "typeName": "hive_column",
                        "guid": f"-{n * 1000 + c}",
                        "attributes": {
                            "qualifiedName": f"default.{table}.{column}@{NS}",
                            "name": column,
                            "type": ctype,
                        },
                        "relationshipAttributes": {"table": {"guid": tguid, "typeName": "hive_table"}},
                    }
                )
        client.post_entities({"entities": estate, "referredEntities": {}})
        before = {
            e["guid"]: json.dumps(e["attributes"], sort_keys=True)
            for e in stub.active_entities()
            if e["typeName"].startswith("hive_")
        }
        reuse = EntityReuse(client.get_entities_by_qualified_names)
        sink = AtlasSink(client, reuse=reuse)
        for batch in batches:
            sink.emit(batch)
        ours_dup = [
            e["attributes"]["qualifiedName"]
            for e in stub.active_entities()
            if e["typeName"] in ("atlas_bridge_table", "atlas_bridge_column")
            and e["attributes"]["qualifiedName"].startswith("default.")
            and e["attributes"]["qualifiedName"].split(".")[1].split("@")[0] in schema
        ]
        changed = sum(
            1
            for e in stub.active_entities()
            if e["guid"] in before and json.dumps(e["attributes"], sort_keys=True) != before[e["guid"]]
        )
        created = sum(len(b["entities"]) for b in batches) - reuse.reused
    per_1000 = 1000 * reuse.lookups / max(reuse.looked_up, 1)
    print(f"statements: {args.statements}, entities in batches: {sum(len(b['entities']) for b in batches)}")
    print(f"datasets and columns looked up: {reuse.looked_up}; lookup requests: {reuse.lookups}")
    print(f"lookups per 1,000 datasets and columns: {per_1000:.1f}   [goal: <= 20; one per entity: 1,000]")
    print(f"entities reused (Hive hook's): {reuse.reused}; created as ours: {created}")
    print(f"base tables / columns created twice as ours: {len(ours_dup)}   [goal: 0]")
    print(f"Hive hook entities changed by us: {changed}   [goal: 0]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
