"""The lineage page (``lineage --format html``, ``write_lineage_page``): its data, escaping, no network."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from golden import assert_golden

from atlas_bridge.atlas.convert import to_atlas_batches, to_atlas_entities
from atlas_bridge.atlas.sink import FileSink
from atlas_bridge.cli import cli
from atlas_bridge.extractors.sql import extract_sql_lineage
from atlas_bridge.page import page_data, render_page, write_lineage_page

DATA = Path(__file__).parent / "data" / "page"
REPO = Path(__file__).resolve().parent.parent
WAREHOUSE = REPO / "examples" / "warehouse"
SCRIPT_IN_SQL = DATA / "script_in_sql.sql"
_DATA_TAG = re.compile(r'<script type="application/json" id="lineage-data">(.*?)</script>', re.S)


def _entities(*paths: Path, schema: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    from atlas_bridge.model import merge_lineage

    parts = [
        extract_sql_lineage(
            p.read_text(encoding="utf-8"), None, schema, None, file=str(p.relative_to(REPO))
        ).lineage
        for p in paths
    ]
    return to_atlas_entities(merge_lineage(parts), namespace="primary", include_resultsets=True)


def _warehouse_entities() -> list[dict[str, Any]]:
    schema = json.loads((WAREHOUSE / "schema.json").read_text(encoding="utf-8"))
    files = sorted(p for p in WAREHOUSE.rglob("*") if p.suffix in (".sql", ".hql"))
    return _entities(*files, schema=schema)


def _embedded(html: str) -> Any:
    found = _DATA_TAG.findall(html)
    assert len(found) == 1
    return json.loads(found[0])


def test_page_data_of_a_small_script_matches_its_golden(update_golden: bool) -> None:
    data = page_data(_entities(REPO / "tests" / "data" / "sql" / "hive_etl.sql"), title="hive_etl")
    assert_golden(data, "page/hive_etl.json", update_golden)


def test_page_data_of_nested_data_shows_the_field_paths(update_golden: bool) -> None:
    """Issue 31: a link whose source is a field below a column says which field, into which."""
    path = REPO / "tests" / "data" / "sql" / "nested_events.sql"
    lineage = extract_sql_lineage(path.read_text(encoding="utf-8"), "spark", file=path.name).lineage
    data = page_data(to_atlas_entities(lineage, namespace="primary", include_resultsets=True), title="nested")
    assert_golden(data, "page/nested_events.json", update_golden)
    fields = {
        (link["source"], link["target"], link["kind"]): link["fields"]
        for link in data["links"]
        if link.get("fields")
    }
    asset = ("c:raw.events.widget@primary", "c:mart.widget_assets.asset_id@primary")
    assert fields[(*asset, "fdd")] == ["widget.asset.id -> asset_id"]
    assert fields[(*asset, "fdr")] == ["widget.asset.kind -> asset_id"]  # WHERE e.widget.asset.kind = ...
    city = ("c:raw.customers.city@primary", "c:mart.customers_nested.address@primary")
    assert fields[(*city, "fdd")] == ["city -> address.city"]


def test_page_data_keeps_every_entity_and_every_column_edge_of_the_warehouse() -> None:
    entities = _warehouse_entities()
    data = page_data(entities)

    def qn(e: dict[str, Any]) -> str:
        return str(e["attributes"]["qualifiedName"])

    kinds = {"atlas_bridge_table", "atlas_bridge_view", "atlas_bridge_path", "atlas_bridge_resultset"}
    assert {d["id"] for d in data["datasets"]} == {"d:" + qn(e) for e in entities if e["typeName"] in kinds}
    procs = {p["id"]: p for p in data["processes"]}
    expected_links = set()
    for e in entities:
        rel = e.get("relationshipAttributes", {})
        ins = ["d:" + r["uniqueAttributes"]["qualifiedName"] for r in rel.get("inputs", [])]
        outs = ["d:" + r["uniqueAttributes"]["qualifiedName"] for r in rel.get("outputs", [])]
        if e["typeName"] == "atlas_bridge_process":
            p = procs["p:" + qn(e)]
            assert (p["inputs"], p["outputs"]) == (sorted(ins), sorted(outs))
            assert p["sql"] == e["attributes"]["queryText"]
            # file:line points at the first line of the statement in its script
            first = (
                (REPO / p["file"]).read_text(encoding="utf-8").splitlines()[p["line"] - 1].strip().rstrip(";")
            )
            assert first, p["name"]
            assert p["sql"].lstrip().startswith(first), (p["name"], first)
        if e["typeName"] == "atlas_bridge_column_lineage":
            kind = "fdd" if e["attributes"]["dependencyType"] == "DIRECT" else "fdr"
            sources = [src["uniqueAttributes"]["qualifiedName"] for src in rel["inputs"]]
            # a row count (COUNT(*)) is the table's "(rows)" pseudo-column
            sources += [f"{row}#(rows)" for row in e["attributes"].get("rowSources", [])]
            for source in sources:
                for out in rel["outputs"]:
                    target = out["uniqueAttributes"]["qualifiedName"]
                    expected_links.add(
                        (
                            "c:" + source,
                            "c:" + target,
                            kind,
                            "p:" + rel["process"]["uniqueAttributes"]["qualifiedName"],
                        )
                    )
    got = {(lk["source"], lk["target"], lk["kind"], lk["process"]) for lk in data["links"]}
    assert got == expected_links
    assert any(lk[2] == "fdr" for lk in got)
    assert any(lk[2] == "fdd" for lk in got)
    # every end of a link is a column of a known dataset
    columns = {c["id"]: c for c in data["columns"]}
    datasets = {d["id"] for d in data["datasets"]}
    assert all(columns[lk[0]]["dataset"] in datasets and columns[lk[1]]["dataset"] in datasets for lk in got)
    assert not any(d["kind"] == "unknown" for d in data["datasets"])
    clauses = {c for lk in data["links"] for c in lk.get("clauses", [])}
    assert {"where", "join", "group by"} <= clauses


def test_sql_text_cannot_end_the_data_script_and_round_trips() -> None:
    entities = _entities(SCRIPT_IN_SQL)
    sql = next(e["attributes"]["queryText"] for e in entities if e["typeName"] == "atlas_bridge_process")
    assert "</script>" in sql
    assert "<!--" in sql
    assert "\u2028" in sql
    html = render_page(entities, title="</title><b>x")
    # one closing tag per script element: the data, the layout library and the page's code
    assert len(re.findall(r"</script", html, re.I)) == html.count("<script") == 3
    assert "<!--" not in html
    assert "\u2028" not in html
    assert _embedded(html) == json.loads(json.dumps(page_data(entities, title="</title><b>x")))
    assert "<title>&lt;/title&gt;&lt;b&gt;x</title>" in html


def test_the_page_needs_no_network_and_is_deterministic() -> None:
    entities = _warehouse_entities()
    html = render_page(entities)
    assert html == render_page(list(reversed(entities)))  # same lineage, same bytes
    # nothing is loaded from anywhere: no src/href attributes, no url(), no imports, no source maps
    assert not re.search(r"""\b(src|href)\s*=\s*["']?[a-z]""", html, re.I)
    assert "url(http" not in html
    assert "@import" not in html
    assert "sourceMappingURL" not in html
    assert "default-src 'none'" in html  # and the CSP would refuse it anyway
    assert "dagre" in html
    assert "Chris Pettitt" in html


def test_write_lineage_page_reads_every_batch_of_a_folder(tmp_path: Path) -> None:
    from atlas_bridge.model import merge_lineage

    schema = json.loads((WAREHOUSE / "schema.json").read_text(encoding="utf-8"))
    files = sorted(p for p in WAREHOUSE.rglob("*") if p.suffix in (".sql", ".hql"))
    lineage = merge_lineage(
        [
            extract_sql_lineage(
                p.read_text(encoding="utf-8"), None, schema, None, file=str(p.relative_to(REPO))
            ).lineage
            for p in files
        ]
    )
    sink = FileSink(tmp_path)
    batches = to_atlas_batches(lineage, namespace="primary", max_entities=17)
    assert len(batches) > 3
    for b in batches:
        sink.emit(b)
    sink.close()
    page = write_lineage_page(tmp_path)
    assert page == tmp_path / "lineage.html"
    whole = page_data(to_atlas_entities(lineage, namespace="primary"), title=f"Lineage: {tmp_path.name}")
    assert _embedded(page.read_text(encoding="utf-8")) == json.loads(json.dumps(whole))


def test_cli_lineage_html_writes_the_page(tmp_path: Path) -> None:
    out = tmp_path / "lineage.html"
    result = CliRunner().invoke(cli, ["lineage", str(SCRIPT_IN_SQL), "--format", "html", "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = _embedded(out.read_text(encoding="utf-8"))
    assert {d["name"] for d in data["datasets"]} == {"db.s", "db.t"}
    assert {
        (lk["source"].rsplit(".", 1)[-1], lk["target"].rsplit(".", 1)[-1], lk["kind"]) for lk in data["links"]
    } == {
        ("a@primary", "a@primary", "fdd"),
        ("c@primary", "a@primary", "fdr"),  # the WHERE column restricts the rows of what is copied
        ("c@primary", "b@primary", "fdr"),  # ... and of the literal column too (issue 16)
    }
