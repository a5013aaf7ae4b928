"""Screenshots of Atlas's own web UI showing the example warehouse's lineage (for the README).

Serves Atlas's built web UI (``../shared/atlas-ui/webapp``, with our icons installed the documented way)
and the Atlas stub of the tests on 127.0.0.1, loads the example warehouse's SQL scripts into it, opens the
Lineage tab of a table and of a column in headless chromium, and saves them as PNGs in ``docs/img/``.

    python docs/screenshots.py [--webapp DIR] [--out docs/img]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))
SHARED = next((p / "shared" for p in ROOT.parents if (p / "shared").is_dir()), ROOT.parent / "shared")

SHOTS = {
    # file name -> (type, qualifiedName) of the entity whose Lineage tab is shot
    "atlas-ui-table-lineage.png": ("atlas_bridge_table", "marts.fct_orders@primary"),
    "atlas-ui-column-lineage.png": ("atlas_bridge_column", "marts.fct_orders.order_amount@primary"),
}


def _browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=2200,1500",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def _wait(driver: Any, script: str, *args: Any, timeout_s: float = 60.0) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout_s, poll_frequency=0.1).until(
        lambda d: d.execute_script(script, *args)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--webapp", type=Path, default=SHARED / "atlas-ui" / "webapp")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args(argv)

    import ui_labels
    from atlas_stub.http import FaultServer
    from atlas_stub.ui import copy_webapp
    from selenium.webdriver.common.by import By

    from atlas_bridge.atlas.client import AtlasClient
    from atlas_bridge.atlas.convert import to_atlas_batches
    from atlas_bridge.atlas.icons import install_icons
    from atlas_bridge.atlas.typedefs import register_typedefs

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="atlas-ui-") as tmp:
        webapp = copy_webapp(args.webapp, Path(tmp) / "webapp")
        install_icons(webapp)
        with FaultServer(webapp=webapp) as srv:
            client = AtlasClient(srv.url, retries=0, backoff=0)
            register_typedefs(client)
            for batch in to_atlas_batches(ui_labels.warehouse_lineage(), namespace="primary"):
                client.post_entities(batch)
            driver = _browser()
            try:
                for name, (type_name, qn) in SHOTS.items():
                    guid = next(
                        g for g in srv.stub._qn_index[qn] if srv.stub.entities[g]["typeName"] == type_name
                    )
                    driver.get(f"{srv.url}/index.html#!/detailPage/{guid}?tabActive=lineage")
                    _wait(driver, "return document.querySelector(`g.node[id='${arguments[0]}']`)", guid)
                    time.sleep(1.0)  # the graph's zoom-to-fit transition (500 ms) and the icons' loads
                    # the UI's own "Full screen" button: the whole graph, not the tab's box
                    driver.find_element(By.CSS_SELECTOR, "[data-id='fullScreen-toggler']").click()
                    time.sleep(1.0)
                    # the drawn graph's own box (the SVG group of its nodes and edges), not the margins
                    graph = driver.find_element(By.CSS_SELECTOR, ".fullscreen-mode svg > g")
                    graph.screenshot(str(args.out / name))
                    print(f"wrote {args.out / name}")  # noqa: T201
            finally:
                driver.quit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
