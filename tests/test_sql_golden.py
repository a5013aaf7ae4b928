"""Golden files: tests/data/sql/<stem>.sql -> tests/golden/sql/<stem>.json (reviewed).

Header lines configure the run: ``-- dialect: hive``, ``-- default_db: dw``, ``-- schema: x.schema.json``.
The golden holds the canonical model JSON plus, for review, the end-to-end and table-level lines and the
problems.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from golden import assert_golden

from atlas_bridge import extract_sql_lineage
from atlas_bridge.graph import end_to_end, relation_lines, table_level

DATA = Path(__file__).parent / "data" / "sql"
FILES = sorted(DATA.glob("*.sql"))
_HEADER = re.compile(r"^--\s*(dialect|default_db|schema):\s*(\S+)\s*$")


def run_file(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    opts: dict[str, str] = {}
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            opts[m.group(1)] = m.group(2)
        elif line.strip() and not line.startswith("--"):
            break
    schema = json.loads((DATA / opts["schema"]).read_text(encoding="utf-8")) if "schema" in opts else None
    result = extract_sql_lineage(
        text, opts.get("dialect"), schema, opts.get("default_db"), file=f"tests/data/sql/{path.name}"
    )
    lineage = result.lineage
    tl = table_level(lineage)
    procs = {p.id: p.type for p in tl.processes}
    return {
        "end_to_end": relation_lines(end_to_end(lineage)),
        "table_level": sorted(
            f"{e.source} -> {procs.get(e.process_id or '', '?')} -> {e.target}" for e in tl.edges
        ),
        "problems": [str(p) for p in result.problems],
        "lineage": json.loads(lineage.to_json()),
    }


def test_there_are_golden_inputs() -> None:
    assert len(FILES) >= 4


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_golden(path: Path, update_golden: bool) -> None:
    assert_golden(run_file(path), f"sql/{path.stem}.json", update_golden)
