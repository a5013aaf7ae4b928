"""Big inputs never cost gigabytes (issue 11): a ~60 MB SQLFlow export and a 5 MB SQL script.

Two parts, each printing its figures beside the budget (README, "Budgets"). Every measurement runs in a
fresh child process, so its peak RSS (``VmHWM``) is that run's own (the child's start-up RSS, imports
included, is printed too and taken off before dividing by the input size).

- ``sqlflow``  a dlineage XML and a flat SQLFlow JSON of ``--statements`` INSERT ... SELECT statements in
  the samples' shape (``../shared/sqlflow-samples``: tables with columns, an ``INSERT-SELECT`` resultset per
  statement, a process, ``fdd`` relationships source -> resultset -> target), ~6 KB per statement (10,000
  statements = ~60 MB), read the way ``scan`` reads a file (:func:`extract_partition`: extract, collapse,
  convert to entity records, piece by piece). Printed: seconds, peak RSS, bytes per input byte.
- ``objects``  a dlineage XML of ``--objects`` one-column tables (~125 bytes each), one pair in ten joined
  by an INSERT ... SELECT: many small objects, read as ``scan`` reads it (seconds, bytes per input byte);
  then ``--short-objects`` of names as short as their ids and no coordinates (~90 bytes each: issue 29's
  660,000 objects in 60 MB).

"As ``scan`` reads a file" is with schema learning (its default): the file's created tables are learned
from the same reading (``extract_partition(..., per_unit=True)``).
- ``repeat``  the shipped REST result without process objects (``mssql-proc-view-insert``) repeated
  ``--copies`` / 4, / 2 and once (each copy on tables of its own, its resultsets named as in the sample),
  as JSON, read as ``scan`` reads it: time and memory must grow linearly (same-named resultsets of
  different statements were merged: chains grew with the square of the file). Printed: CPU s and peak RSS
  per MB at each size, and the growth ratios.
- ``attribute``  a dlineage XML whose one table name is 1, 4 and 16 MB long, read as ``scan`` reads it:
  CPU s per size (it was quadratic: 16 KB feeds of a token expat scanned again each time).
- ``script``  one SQL script of ``--script-mb`` MB (TPC-H/TPC-DS statements as CTAS with distinct table
  names) through ``atlas-bridge scan`` on ``local[2]`` (memory delivery) and through ``atlas-bridge
  lineage`` (its default text output, end to end): wall time, peak RSS of the driver and of the Python
  workers, cores used (CPU time / wall time).

Run: ``python benchmarks/big_inputs.py [--only sqlflow|objects|repeat|attribute|script] [--statements 10000]
[--columns 6] [--objects 500000] [--short-objects 660000] [--copies 1880] [--script-mb 5]``.
``BENCH_CODE=DIR`` runs the children on the code in DIR
(e.g. main's worktree), for a before/after pair.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = next(
    (p for p in (ROOT.parent / "shared" / "bench", ROOT.parents[1] / "shared" / "bench") if p.is_dir()),
    ROOT.parent / "shared" / "bench",
)

SQLFLOW_BYTES_PER_INPUT_BYTE = {"xml": 12.0, "json": 16.0}
"""Peak RSS (over the child's start-up RSS) per byte of a SQLFlow export read as ``scan`` reads it. XML is
read as a stream; JSON is parsed whole first (the standard library has no streaming parser)."""
SQLFLOW_S_PER_MB = 2.5
"""CPU seconds per MB of SQLFlow export (one process; CPU time, so that other work on the machine does not
count)."""
SCRIPT_PEAK_MB = 1024
"""Peak RSS of the ``scan`` driver, of any Python worker and of ``lineage`` for the 5 MB script."""
SCRIPT_CPU_MS_PER_STATEMENT = 4.0
"""CPU milliseconds per statement of the 5 MB script (the Python workers' CPU time in ``scan``, the
process's in ``lineage``): CPU, not wall time, so that other work on a shared machine does not count; wall
time and the cores used (CPU time / wall time) are printed beside it."""

_COLS = 6


def _coord(line: int, col: int, end: int) -> str:
    return f"[{line},{col},0],[{line},{end},0]"


def sqlflow_xml(statements: int, columns: int = _COLS, sources: int = 500) -> str:
    """A dlineage XML of ``statements`` INSERT ... SELECT of ``columns`` columns from ``sources`` source
    tables in turn: objects first, then processes, then relations."""
    objects: list[str] = ['<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<dlineage>\n']
    rels: list[str] = []
    procs: list[str] = []
    next_id = 1

    def new_id() -> int:
        nonlocal next_id
        next_id += 1
        return next_id

    src_cols: dict[int, tuple[int, list[int]]] = {}
    for i in range(statements):
        line = i + 1
        s = i % sources
        if s not in src_cols:
            tid = new_id()
            cids = [new_id() for _ in range(columns)]
            src_cols[s] = (tid, cids)
            cols = "".join(
                f'        <column id="{c}" name="col_{k}" coordinate="{_coord(line, 10 + k, 15 + k)}"/>\n'
                for k, c in enumerate(cids)
            )
            objects.append(
                f'    <table id="{tid}" name="src_{s:04d}" alias="s" type="table" '
                f'coordinate="{_coord(line, 40, 50)}">\n{cols}    </table>\n'
            )
        sid, scids = src_cols[s]
        pid, tid, rid = new_id(), new_id(), new_id()
        tcids = [new_id() for _ in range(columns)]
        rcids = [new_id() for _ in range(columns)]
        procs.append(
            f'    <process id="{pid}" name="Query Insert-{line}" procedureName="batchQueries" '
            f'queryHashId="{i:032x}" type="sstinsert" coordinate="{_coord(line, 1, 90)}"/>\n'
        )
        cols = "".join(
            f'        <column id="{c}" name="tgt_col_{k}" coordinate="{_coord(line, 20 + k, 25 + k)}"/>\n'
            for k, c in enumerate(tcids)
        )
        objects.append(
            f'    <table id="{tid}" name="tgt_{i:06d}" type="table" processIds="{pid}" '
            f'coordinate="{_coord(line, 13, 19)}">\n{cols}    </table>\n'
        )
        cols = "".join(
            f'        <column id="{c}" name="col_{k}" coordinate="{_coord(line, 30 + k, 35 + k)}"/>\n'
            for k, c in enumerate(rcids)
        )
        objects.append(
            f'    <resultset id="{rid}" name="INSERT-SELECT-1" type="insert-select" '
            f'coordinate="{_coord(line, 30, 80)}">\n{cols}    </resultset>\n'
        )
        for k in range(columns):
            rels.append(
                f'    <relationship id="{new_id()}" type="fdd" effectType="select">\n'
                f'        <target id="{rcids[k]}" column="col_{k}" parent_id="{rid}"'
                f' parent_name="INSERT-SELECT-1" coordinate="{_coord(line, 30 + k, 35 + k)}"/>\n'
                f'        <source id="{scids[k]}" column="col_{k}" parent_id="{sid}"'
                f' parent_name="src_{s:04d}" parent_alias="s" coordinate="{_coord(line, 10 + k, 15 + k)}"/>\n'
                "    </relationship>\n"
            )
            rels.append(
                f'    <relationship id="{new_id()}" type="fdd" effectType="insert" processId="{pid}">\n'
                f'        <target id="{tcids[k]}" column="tgt_col_{k}" parent_id="{tid}"'
                f' parent_name="tgt_{i:06d}" coordinate="{_coord(line, 20 + k, 25 + k)}"/>\n'
                f'        <source id="{rcids[k]}" column="col_{k}" parent_id="{rid}"'
                f' parent_name="INSERT-SELECT-1" coordinate="{_coord(line, 30 + k, 35 + k)}"/>\n'
                "    </relationship>\n"
            )
    return "".join(objects) + "".join(procs) + "".join(rels) + "</dlineage>\n"


def sqlflow_json(statements: int, columns: int = _COLS, sources: int = 500) -> str:
    """The same document as :func:`sqlflow_xml`, as SQLFlow's flat JSON model (dbobjs + relationships)."""
    import xml.etree.ElementTree as ET  # our own generated text: no untrusted input here

    root = ET.fromstring(sqlflow_xml(statements, columns, sources))

    def coords(value: str) -> list[dict[str, Any]]:
        out = []
        for part in value.strip("[]").split("],["):
            x, y, h = part.split(",")
            out.append({"x": int(x), "y": int(y), "hashCode": h})
        return out

    def end(el: ET.Element) -> dict[str, Any]:
        d: dict[str, Any] = {k: v for k, v in el.attrib.items() if k != "coordinate"}
        d["parentId"] = d.pop("parent_id")
        d["parentName"] = d.pop("parent_name")
        if "parent_alias" in d:
            d["parentAlias"] = d.pop("parent_alias")
        d["coordinates"] = coords(el.attrib["coordinate"])
        return d

    dbobjs: list[dict[str, Any]] = []
    rels: list[dict[str, Any]] = []
    for el in root:
        attrs = {k: v for k, v in el.attrib.items() if k != "coordinate"}
        if el.tag == "relationship":
            rel: dict[str, Any] = dict(attrs)
            for child in el:
                if child.tag == "target":
                    rel["target"] = end(child)
                else:
                    rel.setdefault("sources", []).append(end(child))
            rels.append(rel)
            continue
        obj: dict[str, Any] = dict(attrs)
        if el.tag == "process":
            obj["type"] = "process"
            obj["processType"] = attrs["type"]
        elif el.tag == "resultset":
            obj["type"] = attrs["type"]
        if "processIds" in obj:
            obj["processIds"] = obj["processIds"].split()
        obj["coordinates"] = coords(el.attrib["coordinate"])
        cols = [
            {
                **{k: v for k, v in c.attrib.items() if k != "coordinate"},
                "coordinates": coords(c.attrib["coordinate"]),
            }
            for c in el
        ]
        if cols:
            obj["columns"] = cols
        dbobjs.append(obj)
    return json.dumps({"dbobjs": dbobjs, "relationships": rels}, separators=(",", ":"))


SAMPLE = ROOT / "tests" / "data" / "sqlflow" / "mssql-proc-view-insert.api-result.json"
"""The shipped SQLFlow REST result without process objects (a procedure, an INSERT ... SELECT, two views, two
SELECTs; resultsets ``RS-1`` ... ``RS-4``, ``INSERT-SELECT-1``), repeated by :func:`sample_repeated_json`."""
_SAMPLE_LINES = 60  # the sample's SQL is 57 lines: each copy 60 lines further down


def sample_repeated_json(copies: int) -> str:
    """The shipped sample ``copies`` times in one export, as SQLFlow writes a script of ``copies`` such
    blocks on tables of their own (``Person.Person_7``): every id renumbered, every coordinate that many
    lines further down, the resultsets' names unchanged (so each copy's ``RS-1`` is another statement's
    resultset of the same name, as SQLFlow names them); the procedure is declared once."""
    top = json.loads(SAMPLE.read_text(encoding="utf-8"))
    model = top["data"]["sqlflow"]
    step = 1 + max(int(i) for i in _ids(model))
    permanent = {o["id"] for o in model["dbobjs"] if o["type"] in ("table", "view")}

    def shift(value: Any, k: int) -> Any:
        if isinstance(value, dict):
            out = {}
            for key, v in value.items():
                if key in ("id", "parentId", "processId") and isinstance(v, str) and v.isdigit():
                    out[key] = str(int(v) + k * step)
                elif key == "x" and isinstance(v, int):
                    out[key] = v + k * _SAMPLE_LINES
                elif (
                    k
                    and key in ("name", "parentName")
                    and value.get(key[:-4] + "Id", value.get("id")) in permanent
                ):
                    out[key] = f"{v}_{k}"
                else:
                    out[key] = shift(v, k)
            return out
        if isinstance(value, list):
            return [shift(v, k) for v in value]
        return value

    dbobjs, relations, errors = [], [], []
    for k in range(copies):  # the procedure once: a script creating it twice fails in SQL Server
        dbobjs.extend(shift([o for o in model["dbobjs"] if k == 0 or o["type"] != "procedure"], k))
        relations.extend(shift(model["relations"], k))
        errors.extend(shift(model["errors"], k))
    body = {"dbvendor": model["dbvendor"], "dbobjs": dbobjs, "relations": relations, "errors": errors}
    return json.dumps({"code": 200, "data": {"mode": "global", "sqlflow": body}}, separators=(",", ":"))


def _ids(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, v in value.items():
            if key in ("id", "parentId") and isinstance(v, str) and v.isdigit():
                yield v
            else:
                yield from _ids(v)
    elif isinstance(value, list):
        for v in value:
            yield from _ids(v)


_SQLFLOW_CHILD = r"""
def vmhwm_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0

import json, resource, sys, time
from atlas_bridge.bridge.extract import extract_partition
from atlas_bridge.bridge.types import InputFile, InputKind, ScanOptions, WorkUnit
path = sys.argv[1]
import os
start_kb = vmhwm_kb()
unit = WorkUnit(InputFile(path, os.path.basename(path), InputKind.SQLFLOW, os.path.getsize(path)))
t0 = time.perf_counter(); cpu0 = time.process_time()
units = relations = 0
header = {}
for kind, payload in extract_partition([unit], ScanOptions(), per_unit=True):  # as scan: schema learning
    if kind == "unit":
        units += 1
        relations += sum(json.loads(payload)["relations"].values())
    elif kind == "uhead":
        header = json.loads(payload)
print(json.dumps({"s": time.perf_counter() - t0, "cpu_s": time.process_time() - cpu0, "start_kb": start_kb,
                  "peak_kb": vmhwm_kb(), "pieces": units,
                  "relations": relations, "problems": len(header.get("problems", [])),
                  "statements": sum(f["statements"] for f in header.get("files", {}).values())}))
"""


def _child(code: str, *args: str, timeout: float = 3600) -> dict[str, Any]:
    env = dict(os.environ)
    if os.environ.get("BENCH_CODE"):  # the code under test: another checkout's package first
        env["PYTHONPATH"] = os.environ["BENCH_CODE"]
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
        cwd=os.environ.get("BENCH_CODE") or ROOT,  # python -c puts its folder first on sys.path
    )
    if out.returncode != 0:
        raise SystemExit(f"child failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def bench_sqlflow(statements: int, tmp: Path, columns: int = _COLS) -> bool:
    ok = True
    print(
        f"sqlflow: {statements} INSERT ... SELECT statements of {columns} column(s), "
        "read as scan reads a file"
    )
    for fmt, make, n in (("xml", sqlflow_xml, statements), ("json", sqlflow_json, statements * 2 // 3)):
        path = tmp / f"big.{fmt}"
        sources = 500 if columns == _COLS else n  # few columns: tables of their own (many small objects)
        path.write_text(make(n, columns, sources), encoding="utf-8")  # JSON: about the XML's size
        size = path.stat().st_size
        r = _child(_SQLFLOW_CHILD, str(path))
        grown = (r["peak_kb"] - r["start_kb"]) * 1024
        per_byte = grown / size
        per_mb = r["cpu_s"] / (size / 1e6)
        good = per_byte <= SQLFLOW_BYTES_PER_INPUT_BYTE[fmt] and per_mb <= SQLFLOW_S_PER_MB
        ok &= good
        print(
            f"  {fmt:4} {size / 1e6:6.1f} MB: {r['s']:6.1f} s wall, {r['cpu_s']:.1f} s CPU "
            f"({per_mb:.2f} CPU s/MB, budget {SQLFLOW_S_PER_MB}); "
            f"peak RSS {r['peak_kb'] / 1024:7.0f} MB (start {r['start_kb'] / 1024:.0f} MB) = "
            f"{per_byte:5.1f} B per input byte (budget {SQLFLOW_BYTES_PER_INPUT_BYTE[fmt]}); "
            f"{r['pieces']} piece(s), {r['statements']} statements, {r['relations']} relations, "
            f"{r['problems']} problems  {'ok' if good else 'OVER BUDGET'}"
        )
        path.unlink()
    return ok


def bench_repeat(copies: int, tmp: Path) -> bool:
    """The sample without processes at three sizes: CPU and memory per MB must stay flat (linear)."""
    print(
        f"repeat: {SAMPLE.name} repeated {copies // 4} / {copies // 2} / {copies} times, "
        "read as scan reads it"
    )
    rows = []
    for n in (copies // 4, copies // 2, copies):
        path = tmp / "repeat.json"
        path.write_text(sample_repeated_json(n), encoding="utf-8")
        size = path.stat().st_size
        r = _child(_SQLFLOW_CHILD, str(path))
        grown = (r["peak_kb"] - r["start_kb"]) * 1024
        rows.append((size, r["cpu_s"], grown))
        print(
            f"  {n:6} copies {size / 1e6:6.1f} MB: {r['s']:7.1f} s wall, {r['cpu_s']:7.1f} s CPU "
            f"({r['cpu_s'] / (size / 1e6):.3f} CPU s/MB); peak RSS {r['peak_kb'] / 1024:6.0f} MB "
            f"= {grown / size:5.1f} B per input byte; {r['relations']} relations, {r['statements']} processes"
        )
        path.unlink()
    (s0, c0, m0), (s2, c2, m2) = rows[0], rows[-1]
    cpu_growth, mem_growth = (c2 / c0) / (s2 / s0), (m2 / m0) / (s2 / s0)
    good = cpu_growth <= 1.5 and mem_growth <= 1.5 and m2 / s2 <= SQLFLOW_BYTES_PER_INPUT_BYTE["json"]
    print(
        f"  {s2 / s0:.1f}x the input: {c2 / c0:.2f}x the CPU, {m2 / m0:.2f}x the memory (per byte: "
        f"{cpu_growth:.2f}x / {mem_growth:.2f}x; linear is 1, quadratic {s2 / s0:.0f})  "
        f"{'ok' if good else 'NOT LINEAR OR OVER BUDGET'}"
    )
    return good


def small_objects_xml(objects: int, every: int = 10, *, short: bool = False) -> str:
    """A dlineage XML of ``objects`` small tables of one column each (~125 bytes an object, as a catalogue
    export is), every ``every``-th pair of them joined by an INSERT ... SELECT (a process, a relation).
    ``short``: names as short as the ids (``t12``, column ``a``) and no coordinates, ~92 bytes an object:
    the issue's 660,000 objects in 60 MB."""
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n<dlineage>\n']
    rels: list[str] = []
    col = "a" if short else "col_a"
    for i in range(objects):
        if short:
            out.append(f'<table id="t{i}" name="t{i}"><column id="c{i}" name="a"/></table>\n')
        else:
            out.append(
                f'<table id="t{i}" name="s.tab_{i:07d}" coordinate="[{i + 1},1,0]">'
                f'<column id="c{i}" name="col_a"/></table>\n'
            )
        if i % (2 * every) == 1:
            out.append(
                f'<process id="p{i}" name="Query Insert-{i}" type="sstinsert" queryHashId="{i:032x}"/>\n'
            )
            rels.append(
                f'<relationship id="r{i}" type="fdd" processId="p{i}"><target id="c{i}" column="{col}" '
                f'parent_id="t{i}"/><source id="c{i - 1}" column="{col}" parent_id="t{i - 1}"/>'
                "</relationship>\n"
            )
    return "".join(out) + "".join(rels) + "</dlineage>\n"


def bench_objects(objects: int, short_objects: int, tmp: Path) -> bool:
    """Many small objects (issue 29: 660,000 objects in 60 MB took 53 bytes per input byte): ``objects`` of
    the catalogue shape, then ``short_objects`` with names as short as their ids."""
    good = True
    for n, short in ((objects, False), (short_objects, True)):
        if not n:
            continue
        shape = "short names, no coordinates" if short else "names and coordinates"
        print(f"objects: a dlineage XML of {n} one-column tables ({shape}), read as scan reads a file")
        path = tmp / "objects.xml"
        path.write_text(small_objects_xml(n, short=short), encoding="utf-8")
        size = path.stat().st_size
        r = _child(_SQLFLOW_CHILD, str(path))
        grown = (r["peak_kb"] - r["start_kb"]) * 1024
        per_byte, per_mb = grown / size, r["cpu_s"] / (size / 1e6)
        ok = per_byte <= SQLFLOW_BYTES_PER_INPUT_BYTE["xml"] and per_mb <= SQLFLOW_S_PER_MB
        good &= ok
        print(
            f"  xml  {size / 1e6:6.1f} MB: {r['s']:6.1f} s wall, {r['cpu_s']:.1f} s CPU "
            f"({per_mb:.2f} CPU s/MB, budget {SQLFLOW_S_PER_MB}); peak RSS {r['peak_kb'] / 1024:7.0f} MB "
            f"(start {r['start_kb'] / 1024:.0f} MB) = {per_byte:5.1f} B per input byte "
            f"(budget {SQLFLOW_BYTES_PER_INPUT_BYTE['xml']}); "
            f"{r['pieces']} piece(s), {r['statements']} statements, {r['relations']} relations, "
            f"{r['problems']} problems  {'ok' if ok else 'OVER BUDGET'}"
        )
        path.unlink()
    return good


def bench_attribute(tmp: Path) -> bool:
    """One huge attribute (a table name) at 1, 4 and 16 MB: CPU per MB must stay flat."""
    print("attribute: a dlineage XML with one table name of 1 / 4 / 16 MB, read as scan reads it")
    rows = []
    for mb in (1, 4, 16):
        path = tmp / "attribute.xml"
        name = "n" * (mb << 20)
        path.write_text(
            f'<dlineage><table id="1" name="{name}"><column id="2" name="a"/></table></dlineage>',
            encoding="utf-8",
        )
        r = _child(_SQLFLOW_CHILD, str(path))
        rows.append((mb, r["cpu_s"]))
        print(f"  {mb:3} MB: {r['cpu_s']:7.2f} s CPU ({r['cpu_s'] / mb:.3f} s per MB), {r['s']:7.2f} s wall")
        path.unlink()
    growth = rows[-1][1] / max(rows[0][1], 1e-9) / 16
    good = growth <= 2.0
    print(
        f"  16x the attribute: {rows[-1][1] / max(rows[0][1], 1e-9):.1f}x the CPU "
        "(linear 16, quadratic 256)  "
        f"{'ok' if good else 'NOT LINEAR'}"
    )
    return good


def big_script(mb: float) -> tuple[str, int]:
    """One plain script of about ``mb`` MB: blocks of a TPC-H query as CTAS and 16 short INSERT ... SELECT,
    every table name distinct (no two statements alike). Returns the text and its statement count."""
    queries = [json.loads(line) for line in (BENCH / "tpch_queries.jsonl").read_text().splitlines() if line]
    parts = ["-- dialect: spark\nUSE bench;\n"]
    size, n, block = 0, 0, 0
    while size < mb * 1e6:
        q = queries[block % len(queries)]
        text = f"CREATE TABLE ctas_{block:06d} AS\n{q['sql'].strip().rstrip(';')};\n"
        for k in range(16):
            target, source = f"t_{block:06d}_{k:02d}", f"s_{block % 97:02d}"
            text += f"INSERT INTO {target} SELECT a, b + {k} FROM {source} WHERE c > {k};\n"
        parts.append(text)
        size += len(text)
        n += 17
        block += 1
    return "".join(parts), n + 1


_SCAN_CHILD = r"""
import json, sys, time
from atlas_bridge import bridge
def vmhwm_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0
class Count:
    target = "memory:benchmark"
    entities = 0
    def send(self, batch):
        self.entities += len(batch["entities"])
    def close(self):
        pass
spark = bridge.spark_session("local[2]", app_name="atlas-bridge-bench")
spark.sparkContext.parallelize([0], 1).count()  # JVM and worker start-up are not the scan's cost
start_kb = vmhwm_kb()
delivery = Count()
t0 = time.perf_counter(); cpu0 = time.process_time()
summary = bridge.scan([sys.argv[1]], delivery, namespace="bench", spark=spark)
wall = time.perf_counter() - t0
x = summary.extract
print(json.dumps({"s": wall, "extract_s": x.extract_s, "driver_cpu_s": time.process_time() - cpu0,
                  "worker_cpu_s": x.executor_cpu_s, "start_kb": start_kb, "peak_kb": vmhwm_kb(),
                  "worker_peak_kb": x.executor_max_rss_kb, "statements": x.statements,
                  "partitions": x.partitions, "processes": summary.lineage_counts["processes"],
                  "entities": delivery.entities}))
"""

_LINEAGE_CHILD = r"""
import json, os, sys, time
from atlas_bridge.cli import cli
def vmhwm_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0
start_kb = vmhwm_kb()
t0 = time.perf_counter(); cpu0 = time.process_time()
try:
    cli.main(["lineage", sys.argv[1], *sys.argv[2:], "-o", os.devnull], standalone_mode=False)
except SystemExit as e:
    code = e.code
else:
    code = 0
print(json.dumps({"s": time.perf_counter() - t0, "cpu_s": time.process_time() - cpu0, "start_kb": start_kb,
                  "peak_kb": vmhwm_kb(), "exit": code}))
"""


def bench_script(mb: float, tmp: Path, *, scan: bool = True) -> bool:
    text, statements = big_script(mb)
    path = tmp / "big_script.sql"
    path.write_text(text, encoding="utf-8")
    size = path.stat().st_size
    print(f"script: one {size / 1e6:.1f} MB script, {statements} statements")
    good_scan = _bench_scan(path, statements) if scan else True
    r = _child(_LINEAGE_CHILD, str(path))  # the default: text, end to end
    ms = 1000 * r["cpu_s"] / statements
    good_lineage = r["peak_kb"] / 1024 <= SCRIPT_PEAK_MB and ms <= SCRIPT_CPU_MS_PER_STATEMENT
    print(
        f"  lineage:       {r['s']:6.1f} s wall ({ms:.2f} CPU ms per statement, one process); "
        f"peak RSS {r['peak_kb'] / 1024:.0f} MB (start {r['start_kb'] / 1024:.0f} MB, "
        f"budget {SCRIPT_PEAK_MB} MB); "
        f"cores used {r['cpu_s'] / r['s']:.2f}; exit {r['exit']}  {'ok' if good_lineage else 'OVER BUDGET'}"
    )
    return bool(good_scan and good_lineage)


def _bench_scan(path: Path, statements: int) -> bool:
    r = _child(_SCAN_CHILD, str(path))
    cores = (r["worker_cpu_s"]) / max(r["extract_s"], 1e-9)
    ms = 1000 * r["worker_cpu_s"] / statements
    peak = max(r["peak_kb"], r["worker_peak_kb"]) / 1024
    good = bool(peak <= SCRIPT_PEAK_MB and ms <= SCRIPT_CPU_MS_PER_STATEMENT)
    print(
        f"  scan local[2]: {r['s']:6.1f} s wall ({ms:.2f} CPU ms per statement, budget "
        f"{SCRIPT_CPU_MS_PER_STATEMENT}); "
        f"driver peak RSS {r['peak_kb'] / 1024:.0f} MB (start {r['start_kb'] / 1024:.0f} MB), Python worker "
        f"peak {r['worker_peak_kb'] / 1024:.0f} MB (budget {SCRIPT_PEAK_MB} MB each); cores used "
        f"{cores:.2f} (workers' CPU {r['worker_cpu_s']:.0f} s / extraction {r['extract_s']:.0f} s); "
        f"{r['partitions']} partitions, {r['statements']} statements, {r['processes']} processes  "
        f"{'ok' if good else 'OVER BUDGET'}"
    )
    return good


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--only",
        choices=["sqlflow", "objects", "repeat", "attribute", "script", "lineage"],
        help="lineage: the script's part 2",
    )
    ap.add_argument("--statements", type=int, default=10_000, help="SQLFlow statements (10,000 = ~60 MB)")
    ap.add_argument("--columns", type=int, default=_COLS, help="columns per SQLFlow statement")
    ap.add_argument("--objects", type=int, default=500_000, help="small objects (500,000 = ~63 MB)")
    ap.add_argument(
        "--short-objects", type=int, default=660_000, help="small objects of short names (660,000 = ~59 MB)"
    )
    ap.add_argument("--copies", type=int, default=1880, help="copies of the sample (1,880 = ~53 MB)")
    ap.add_argument("--script-mb", type=float, default=5.0)
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="big_inputs_") as tmp:
        if args.only in (None, "sqlflow"):
            ok &= bench_sqlflow(args.statements, Path(tmp), args.columns)
        if args.only in (None, "objects"):
            ok &= bench_objects(args.objects, args.short_objects, Path(tmp))
        if args.only in (None, "repeat"):
            ok &= bench_repeat(args.copies, Path(tmp))
        if args.only in (None, "attribute"):
            ok &= bench_attribute(Path(tmp))
        if args.only in (None, "script", "lineage"):
            ok &= bench_script(args.script_mb, Path(tmp), scan=args.only != "lineage")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    time.monotonic()
    main()
