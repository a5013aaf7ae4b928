"""The lineage page in a real headless browser (Debian's chromium + chromedriver, driven by selenium).

The example warehouse is scanned to a folder (the run's one Spark session), ``write_lineage_page`` writes
``lineage.html`` there, and the page is opened through ``file://``. What is drawn is compared with the
payloads, and the highlight after a click with the lineage closure computed here, in Python.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from atlas_bridge.atlas.sink import read_directory_entities
from atlas_bridge.page import page_data, write_lineage_page

REPO = Path(__file__).resolve().parent.parent
WAREHOUSE = REPO / "examples" / "warehouse"
DOCS_SHOT = REPO / "docs" / "lineage-page.png"


@pytest.fixture(scope="module")
def warehouse(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """``scan examples/warehouse --to DIR``, then the page written beside its payloads; and its data."""
    from atlas_bridge.cli import cli

    out = tmp_path_factory.mktemp("scan") / "out"
    result = CliRunner().invoke(cli, ["scan", str(WAREHOUSE), "--to", str(out)])
    assert result.exit_code == 0, result.output
    page = write_lineage_page(out)
    return page, page_data(read_directory_entities(out))


def _open(driver: Any, page: Path, query: str = "") -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.as_uri() + query)
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.body.dataset.ready"))
    errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert not errors, errors


def _rendered(driver: Any) -> int:
    return int(driver.execute_script("return Number(document.body.dataset.ready)"))


def _click(driver: Any, css: str) -> None:
    """A real click (mouse events through chromium), then wait for nothing: the handlers are synchronous."""
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, css).click()


def _nodes(driver: Any, css: str = "[data-id]") -> dict[str, set[str]]:
    """data-id -> classes of the drawn nodes that match ``css``."""
    rows = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".map(e => [e.getAttribute('data-id'), e.getAttribute('class')])",
        css,
    )
    return {i: set(c.split()) for i, c in rows}


def _edges(driver: Any, css: str) -> list[tuple[str, str, set[str]]]:
    rows = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".map(e => [e.getAttribute('data-src'), e.getAttribute('data-dst'), e.getAttribute('class')])",
        css,
    )
    return [(s, t, set(c.split())) for s, t, c in rows]


def _closure(pairs: set[tuple[str, str]], start: set[str], upstream: bool) -> set[str]:
    adj: dict[str, set[str]] = {}
    for s, t in pairs:
        a, b = (t, s) if upstream else (s, t)
        adj.setdefault(a, set()).add(b)
    seen: set[str] = set()
    todo = list(start)
    while todo:
        for n in adj.get(todo.pop(), ()):
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


def _css_id(node_id: str) -> str:
    return '[data-id="' + node_id.replace("\\", "\\\\").replace('"', '\\"') + '"]'


@pytest.mark.spark
def test_tables_view_draws_every_dataset_process_and_flow(
    browser: Any, warehouse: tuple[Path, dict[str, Any]]
) -> None:
    page, data = warehouse
    _open(browser, page)
    # nothing was fetched: the page itself is the only resource the browser loaded
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert _nodes(browser, '[data-kind="process"]').keys() == {p["id"] for p in data["processes"]}
    drawn = _nodes(browser, ".node:not(.process)")
    assert drawn.keys() == {d["id"] for d in data["datasets"]}
    assert {next(iter(c & {"table", "view", "path"})) for c in drawn.values()} == {"table", "view", "path"}
    flows = {(i, p["id"]) for p in data["processes"] for i in p["inputs"]}
    flows |= {(p["id"], o) for p in data["processes"] for o in p["outputs"]}
    edges = _edges(browser, ".edges > .edge.flow")
    assert len(edges) == len(flows)
    assert {(s, t) for s, t, _ in edges} == flows


@pytest.mark.spark
def test_columns_view_draws_direct_and_indirect_edges_apart(
    browser: Any, warehouse: tuple[Path, dict[str, Any]]
) -> None:
    page, data = warehouse
    _open(browser, page)
    _click(browser, "#view-columns")
    columns = {c["id"]: c for c in data["columns"]}
    assert _nodes(browser, '[data-kind="column"]').keys() == set(columns)  # small: no box starts folded
    fdd = {(lk["source"], lk["target"]) for lk in data["links"] if lk["kind"] == "fdd"}
    drawn_fdd = _edges(browser, ".edges > path.edge.fdd")
    assert len(drawn_fdd) == len(fdd)
    assert {(s, t) for s, t, _ in drawn_fdd} == fdd
    # indirect edges: to the column, or to the whole box when the clause restricts all it writes
    drawn_fdr = {(s, t) for s, t, _ in _edges(browser, ".edges > path.edge.fdr")}
    fdr = [lk for lk in data["links"] if lk["kind"] == "fdr"]
    for lk in fdr:
        assert {(lk["source"], lk["target"]), (lk["source"], columns[lk["target"]]["dataset"])} & drawn_fdr, (
            lk
        )
    ends = {lk["target"] for lk in fdr} | {columns[lk["target"]]["dataset"] for lk in fdr}
    assert {s for s, _ in drawn_fdr} == {lk["source"] for lk in fdr}
    assert {t for _, t in drawn_fdr} <= ends
    # dashed, and a different colour from the direct ones; labelled with their clauses
    style = browser.execute_script(
        "const s = e => getComputedStyle(document.querySelector(e));"
        "return [s('path.edge.fdd').strokeDasharray, s('path.edge.fdr').strokeDasharray,"
        " s('path.edge.fdd').stroke, s('path.edge.fdr').stroke]"
    )
    assert style[0] == "none"
    assert style[1] != "none"
    assert style[2] != style[3]
    labels = set(
        browser.execute_script(
            "return Array.from(document.querySelectorAll('.clause')).map(e => e.textContent)"
        )
    )
    assert "WHERE" in labels
    assert any("GROUP BY" in x for x in labels)
    assert any("JOIN" in x for x in labels)


@pytest.mark.spark
def test_clicking_a_column_highlights_exactly_its_lineage(
    browser: Any, warehouse: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    page, data = warehouse
    _open(browser, page, "?view=columns")
    target = next(c["id"] for c in data["columns"] if c["qn"].startswith("marts.fct_orders.order_amount@"))
    pairs = {(lk["source"], lk["target"]) for lk in data["links"]}
    up, down = _closure(pairs, {target}, True), _closure(pairs, {target}, False)
    assert up
    assert down
    assert not up & down
    before = _nodes(browser, '[data-kind="column"]')
    assert not any(c & {"sel", "up", "down", "dim"} for c in before.values())

    _click(browser, _css_id(target))
    after = _nodes(browser, '[data-kind="column"]')
    assert {i for i, c in after.items() if "sel" in c} == {target}
    assert {i for i, c in after.items() if "up" in c} == up
    assert {i for i, c in after.items() if "down" in c} == down
    unrelated = set(after) - up - down - {target}
    assert unrelated
    assert all("dim" in after[i] for i in unrelated)
    # edges: lit only along the lineage, in its direction
    for s, t, cls in _edges(browser, ".edges > path.edge"):
        if "up" in cls:
            assert t in up | {target} | {c["dataset"] for c in data["columns"] if c["id"] in up | {target}}
        if "down" in cls:
            assert s in down | {target}
    assert any("up" in c for *_, c in _edges(browser, ".edges > path.edge"))
    assert any("down" in c for *_, c in _edges(browser, ".edges > path.edge"))
    # the side panel names the statement that writes it, with its file:line
    details = browser.find_element("id", "details").text
    writer = next(
        p
        for p in data["processes"]
        if p["id"] in {lk["process"] for lk in data["links"] if lk["target"] == target}
    )
    assert f"{writer['file']}:{writer['line']}" in details
    assert "INSERT OVERWRITE TABLE marts.fct_orders" in details
    shot = tmp_path / "columns-selected.png"
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000

    _click(browser, "#graph")  # the background clears the highlight
    assert not any(c & {"sel", "up", "down", "dim"} for c in _nodes(browser, '[data-kind="column"]').values())


@pytest.mark.spark
def test_clicking_a_table_highlights_up_and_downstream_and_a_process_shows_its_statement(
    browser: Any, warehouse: tuple[Path, dict[str, Any]]
) -> None:
    page, data = warehouse
    _open(browser, page)
    table = next(d["id"] for d in data["datasets"] if d["name"] == "marts.fct_orders")
    pairs = {(i, p["id"]) for p in data["processes"] for i in p["inputs"]}
    pairs |= {(p["id"], o) for p in data["processes"] for o in p["outputs"]}
    up, down = _closure(pairs, {table}, True), _closure(pairs, {table}, False)
    _click(browser, _css_id(table))
    nodes = _nodes(browser)
    assert {i for i, c in nodes.items() if "up" in c} == up
    assert {i for i, c in nodes.items() if "down" in c} == down
    assert {i for i, c in nodes.items() if "dim" in c} == set(nodes) - up - down - {table} != set()

    proc = next(p for p in data["processes"] if p["op"] == "merge")
    _click(browser, _css_id(proc["id"]))
    details = browser.find_element("id", "details").text
    assert f"{proc['file']}:{proc['line']}" in details
    assert proc["sql"].splitlines()[0] in details
    assert proc["sql"].splitlines()[-1] in details
    hover = browser.execute_script(
        f"return document.querySelector('{_css_id(proc['id'])} > title').textContent"
    )
    assert f"{proc['file']}:{proc['line']}" in hover
    assert proc["sql"] in hover


@pytest.mark.spark
def test_filter_shows_the_neighbourhood_of_matching_nodes(
    browser: Any, warehouse: tuple[Path, dict[str, Any]]
) -> None:
    from selenium.webdriver.common.keys import Keys

    page, data = warehouse
    _open(browser, page)
    pairs = {(i, p["id"]) for p in data["processes"] for i in p["inputs"]}
    pairs |= {(p["id"], o) for p in data["processes"] for o in p["outputs"]}
    match = next(d["id"] for d in data["datasets"] if d["name"] == "reporting.v_daily_sales")
    box = browser.find_element("id", "filter")
    count = _rendered(browser)
    box.send_keys("v_daily_sales", Keys.ENTER)
    assert _rendered(browser) > count
    matches = {n["id"] for n in data["datasets"] + data["processes"] if "v_daily_sales" in n["name"]}
    assert match in matches  # and the statement that creates it ("Create view reporting.v_daily_sales")
    expected = matches | _closure(pairs, matches, True) | _closure(pairs, matches, False)
    shown = _nodes(browser)
    assert shown.keys() == expected
    assert len(expected) < len(data["datasets"]) + len(data["processes"])
    assert {i for i, c in shown.items() if "match" in c} == matches
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", "depth")).select_by_value("1")  # one hop: its writers and readers
    one_hop = _nodes(browser).keys()
    assert match in one_hop
    assert one_hop < expected


def test_a_statement_with_script_tags_does_not_break_the_page(browser: Any, tmp_path: Path) -> None:
    from atlas_bridge.cli import cli

    out = tmp_path / "page.html"
    script = REPO / "tests" / "data" / "page" / "script_in_sql.sql"
    result = CliRunner().invoke(cli, ["lineage", str(script), "--format", "html", "-o", str(out)])
    assert result.exit_code == 0, result.output
    _open(browser, out)
    assert browser.title == "Lineage: script_in_sql.sql"  # the SQL's document.title="pwned" never ran
    proc = browser.execute_script(
        "return document.querySelector('[data-kind=process]').getAttribute('data-id')"
    )
    _click(browser, _css_id(proc))
    details = browser.find_element("id", "details").text
    assert '</script><script>document.title="pwned"</script><!--' in details


def test_a_page_without_lineage_says_so(browser: Any, tmp_path: Path) -> None:
    """A payload folder with nothing in it (only SELECTs were scanned) still gives a page that explains."""
    page = write_lineage_page(tmp_path)
    _open(browser, page)
    assert not _nodes(browser)
    message = browser.find_element("id", "message")
    assert message.get_attribute("hidden") is None
    assert "No lineage to show" in message.text


@pytest.mark.spark
def test_readme_screenshot_of_the_example_warehouse(
    browser: Any, warehouse: tuple[Path, dict[str, Any]], update_golden: bool, tmp_path: Path
) -> None:
    """The README's picture: columns view, one column clicked. Rewritten with --update-golden-files."""
    page, data = warehouse
    browser.set_window_size(1500, 950)
    try:
        _open(browser, page, "?view=columns")
        target = next(
            c["id"] for c in data["columns"] if c["qn"].startswith("marts.fct_orders.order_amount@")
        )
        _click(browser, _css_id(target))
        shot = DOCS_SHOT if update_golden else tmp_path / DOCS_SHOT.name
        shot.parent.mkdir(parents=True, exist_ok=True)
        assert browser.save_screenshot(str(shot))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert DOCS_SHOT.exists(), (
            "docs/lineage-page.png is missing: run this test with --update-golden-files"
        )
    finally:
        browser.set_window_size(1600, 1000)


def test_page_is_usable_at_tpc_ds_size(browser: Any, shared_dir: Path, tmp_path: Path) -> None:
    """99 TPC-DS queries, each written to a table: tables fold until expanded, the filter narrows it."""
    from atlas_bridge.extractors.sql import extract_sql_lineage
    from atlas_bridge.model import merge_lineage
    from atlas_bridge.page import lineage_page

    bench = shared_dir / "bench"
    if not (bench / "tpcds_queries.jsonl").exists():
        pytest.skip("no TPC-DS queries in the shared folder")
    schema = json.loads((bench / "tpc-ds.schema.json").read_text(encoding="utf-8"))
    parts = []
    for line in (bench / "tpcds_queries.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        sql = f"CREATE TABLE reports.{q['id'].replace('-', '_')} AS\n{q['sql'].strip().rstrip(';')}"
        parts.append(extract_sql_lineage(sql, "spark", schema, None, file=q["id"]).lineage)
    out = tmp_path / "tpcds.html"
    out.write_text(lineage_page(merge_lineage(parts)), encoding="utf-8")

    _open(browser, out, "?view=columns")
    boxes = _nodes(browser, ".node.dataset")
    assert len(boxes) > 100
    assert not _nodes(browser, '[data-kind="column"]')
    assert browser.find_element("id", "message").get_attribute("hidden") is not None
    assert "tables start folded" in browser.find_element("id", "status").text
    # + unfolds one table
    store = next(i for i in boxes if i.startswith("d:default.store_sales@"))
    _click(browser, _css_id(store) + " .toggle")
    owners = browser.execute_script(
        "return Array.from(document.querySelectorAll('[data-kind=column]'))"
        ".map(e => e.getAttribute('data-dataset'))"
    )
    assert len(owners) > 20
    assert set(owners) == {store}
    # expanding everything is over the cap: a message instead of an unreadable drawing
    _click(browser, "#expand-all")
    assert browser.find_element("id", "message").get_attribute("hidden") is None
    assert "filter" in browser.find_element("id", "message").text
    # the filter brings it back to the lineage of what matches
    from selenium.webdriver.common.keys import Keys

    browser.find_element("id", "filter").send_keys("tpcds_q3.", Keys.ENTER)
    rows = _nodes(browser, '[data-kind="column"]')
    assert rows
    assert browser.find_element("id", "message").get_attribute("hidden") is not None
    assert all(i.startswith(("c:reports.tpcds_q3.", "c:default.")) for i in rows)
