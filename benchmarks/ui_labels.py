"""Labels on Atlas's Lineage tabs (issue 32): how many nodes read the same as a neighbour once cut to 18
characters, as Atlas's web UI draws them with "Display full name" off.

Every ACTIVE dataset, column, process and column lineage of an estate is opened as a Lineage tab
(``GET /v2/lineage/{guid}?depth=3&direction=BOTH`` on the Atlas stub, as the UI asks it), and on each tab
the nodes of one kind (processes and column lineage; datasets and columns) whose cut label equals another's
are counted. Estates: the example warehouse (its SQL scripts) and TPC-DS's 99 queries as CTAS statements
with distinct targets (``../shared/bench``, the corpus of ``atlas_push.py``), 100 per script.

    python benchmarks/ui_labels.py                      # warehouse + 1,000 TPC-DS statements
    python benchmarks/ui_labels.py --statements 200     # quick
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

WAREHOUSE = ROOT / "examples" / "warehouse"


def warehouse_lineage() -> Any:
    """The example warehouse's SQL scripts, extracted with its schema (no Spark)."""
    from atlas_bridge.extractors.sql import extract_sql_lineage
    from atlas_bridge.model import merge_lineage

    schema = json.loads((WAREHOUSE / "schema.json").read_text(encoding="utf-8"))
    files = sorted(p for p in WAREHOUSE.rglob("*") if p.suffix in (".sql", ".hql"))
    parts = [
        extract_sql_lineage(p.read_text(encoding="utf-8"), None, schema, None, file=str(p.relative_to(ROOT)))
        for p in files
    ]
    return merge_lineage([r.lineage for r in parts])


def tpcds_lineage(statements: int) -> Any:
    """``statements`` TPC-DS CTAS statements (``atlas_push.scripts``), extracted with the TPC-DS schema."""
    import atlas_push

    from atlas_bridge.extractors.sql import extract_sql_lineage
    from atlas_bridge.model import merge_lineage

    schema = json.loads((atlas_push.BENCH / "tpc-ds.schema.json").read_text(encoding="utf-8"))
    parts = [
        extract_sql_lineage(text, dialect="spark", schema=schema, file=f"script_{i:05d}.sql").lineage
        for i, text in enumerate(atlas_push.scripts(statements))
    ]
    return merge_lineage(parts)


def collisions(lineage: Any, namespace: str = "primary") -> tuple[dict[str, int], int]:
    """(label collisions per kind, tabs opened) of a lineage pushed into an empty Atlas stub."""
    from atlas_stub import AtlasStub
    from atlas_stub.ui import label_collisions

    from atlas_bridge.atlas.client import AtlasClient
    from atlas_bridge.atlas.convert import to_atlas_batches
    from atlas_bridge.atlas.typedefs import register_typedefs

    with AtlasStub() as stub:
        client = AtlasClient(stub.base_url, retries=0, backoff=0)
        register_typedefs(client)
        for batch in to_atlas_batches(lineage, namespace=namespace):
            client.post_entities(batch)
        tabs = sum(
            1
            for e in stub.entities.values()
            if e["status"] == "ACTIVE"
            and (stub._is_a(e["typeName"], "DataSet") or stub._is_a(e["typeName"], "Process"))
        )
        return label_collisions(stub), tabs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--statements", type=int, default=1000, help="TPC-DS CTAS statements (0: none)")
    args = parser.parse_args(argv)
    estates = [("example warehouse", warehouse_lineage)]
    if args.statements:
        estates.append((f"TPC-DS, {args.statements} statements", lambda: tpcds_lineage(args.statements)))
    for name, make in estates:
        t0 = time.perf_counter()
        found, tabs = collisions(make())
        print(
            f"{name}: {tabs} tabs; nodes whose 18-character label a neighbour shares: "
            f"processes {found['process']}, column lineage {found['column_lineage']}, "
            f"datasets {found['dataset']}, columns {found['column']}"
            f" ({time.perf_counter() - t0:.1f} s)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
