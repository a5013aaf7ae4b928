"""The schema learned from the estate (issue 12): TPC-DS whose DDL is scanned as a file gives the lineage
``schema.json`` gives.

The 99 TPC-DS queries (../shared/bench) are written one per file, and CREATE TABLE statements generated
from ``tpc-ds.schema.json`` into ``tpcds_ddl.sql`` beside them (named so that it sorts *after* the
queries: order must not matter). The lineage of all files is extracted three ways, as
``atlas-bridge lineage`` does it: without a schema, with ``schema.json``, and with the DDL file among the
inputs (the schema learned from it). Printed per way: column edges (end to end), those whose source
column cannot be placed (written bare, on the orphan pseudo table), warnings, and the time; then whether
the learned run gives the same edges as the schema.json run, and the learning pass's share of the time.

Run: ``python benchmarks/schema_learning.py [--bench DIR]``. Goal printed beside the figures: the same
lineage as with schema.json (0 edges apart), learning under 25 % of the extraction time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from atlas_bridge.bridge.schema import learn_locally, schema_index
from atlas_bridge.bridge.types import InputFile, InputKind, ScanOptions, WorkUnit
from atlas_bridge.extractors.sql import SchemaIndex, extract_sql_lineage
from atlas_bridge.graph import end_to_end, relation_lines
from atlas_bridge.model import DatasetKind, Lineage, merge_lineage

DEFAULT_BENCH = next(
    (p / "shared" / "bench" for p in Path(__file__).resolve().parents if (p / "shared" / "bench").is_dir()),
    Path(__file__).resolve().parents[2] / "shared" / "bench",
)


def ddl_script(schema: dict[str, dict[str, str]]) -> str:
    """CREATE TABLE statements for a ``{table: {column: type}}`` mapping, one per table."""
    out = []
    for table, cols in schema.items():
        body = ",\n".join(f"  {c} {t}" for c, t in cols.items())
        out.append(f"CREATE TABLE {table} (\n{body}\n);\n")
    return "\n".join(out)


def write_estate(bench: Path, root: Path) -> list[Path]:
    """The 99 queries one per file and the DDL file; returns the files in name order."""
    queries = [json.loads(x) for x in (bench / "tpcds_queries.jsonl").read_text().splitlines() if x.strip()]
    for q in queries:
        (root / f"{q['id']}.sql").write_text(q["sql"].rstrip().rstrip(";") + ";\n", encoding="utf-8")
    schema = json.loads((bench / "tpc-ds.schema.json").read_text(encoding="utf-8"))
    (root / "tpcds_ddl.sql").write_text(ddl_script(schema), encoding="utf-8")
    return sorted(root.glob("*.sql"))


def run(files: list[Path], schema: dict[str, Any] | SchemaIndex | None) -> tuple[Lineage, int, float]:
    t0 = time.perf_counter()
    parts, warnings = [], 0
    for f in files:
        r = extract_sql_lineage(f.read_text(encoding="utf-8"), None, schema, file=f.name)
        parts.append(r.lineage)
        warnings += len(r.problems)
    return end_to_end(merge_lineage(parts)), warnings, time.perf_counter() - t0


def figures(lineage: Lineage) -> tuple[int, int, set[str]]:
    """Column edges, those from a bare (unplaced) source column, and the edge lines."""
    kinds = {d.id: d.kind for d in lineage.datasets}
    real = [r for r in lineage.relations if not r.source.column.startswith("Pseudo")]
    bare = sum(1 for r in real if kinds.get(r.source.dataset_id) is DatasetKind.PSEUDO_TABLE)
    return len(real), bare, set(relation_lines(lineage))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", type=Path, default=DEFAULT_BENCH)
    args = ap.parse_args(argv)
    given = json.loads((args.bench / "tpc-ds.schema.json").read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        files = write_estate(args.bench, Path(tmp))
        queries = [f for f in files if f.name != "tpcds_ddl.sql"]
        rows = []
        lineage, warnings, secs = run(queries, None)
        rows.append(("no schema", lineage, warnings, secs, 0.0))
        lineage, warnings, secs = run(queries, given)
        rows.append(("schema.json", lineage, warnings, secs, 0.0))
        t0 = time.perf_counter()
        units = [WorkUnit(InputFile(str(f), f.name, InputKind.SQL, f.stat().st_size)) for f in files]
        learned, _ = learn_locally(units, ScanOptions())
        index = schema_index(learned, None)
        learn_s = time.perf_counter() - t0
        lineage, warnings, secs = run(files, index)
        rows.append((f"DDL scanned ({len(learned)} tables learned)", lineage, warnings, secs, learn_s))
    print(f"TPC-DS, {len(queries)} query files + 1 DDL file")
    print(f"{'run':<36}{'edges':>8}{'bare':>8}{'warnings':>10}{'extract s':>11}{'learn s':>9}")
    lines = {}
    for name, lin, warn, secs, learn in rows:
        edges, bare, lines[name] = figures(lin)
        print(f"{name:<36}{edges:>8}{bare:>8}{warn:>10}{secs:>11.2f}{learn:>9.2f}")
    with_schema, learned_lines = lines["schema.json"], lines[rows[2][0]]
    apart = len(with_schema ^ learned_lines)
    share = rows[2][4] / rows[2][3] if rows[2][3] else 0.0
    print(f"edges apart between schema.json and DDL scanned: {apart} (goal: 0)")
    print(f"learning pass / extraction: {share:.1%} (goal: under 25 %)")
    return 0 if apart == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
