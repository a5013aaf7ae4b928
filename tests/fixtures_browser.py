"""Fixtures for the browser tests; see conftest.py.

One headless Debian chromium (+ chromedriver, driven by selenium) for the whole test run, with a fresh
profile; tests that use it are skipped where it is not installed.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1600,1000",
)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """The run's one headless chromium; its console (``get_log("browser")``) keeps every level."""
    webdriver = pytest.importorskip("selenium.webdriver")
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip("chromium and chromium-driver are not installed (.ci/run installs them)")
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="atlas-bridge-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SE_OFFLINE", "true")  # Selenium Manager must not look anything up on the network
        driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
