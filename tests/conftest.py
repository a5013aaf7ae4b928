from __future__ import annotations

from pathlib import Path

import pytest

# Fixture modules, one per area, so each area owns its own file.
pytest_plugins = ["fixtures_atlas", "fixtures_spark", "fixtures_kafka", "fixtures_browser"]

REPO = Path(__file__).resolve().parent.parent
SHARED = next((p / "shared" for p in REPO.parents if (p / "shared").is_dir()), REPO.parent / "shared")
"""The shared material: beside the checkout, or further up for a worktree (``/work/wt/<name>``)."""
DATA = Path(__file__).resolve().parent / "data"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden-files",
        action="store_true",
        default=False,
        help="rewrite tests/golden/* from the current output (review the diff!)",
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden-files"))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's Atlas settings."""
    import os

    for key in list(os.environ):
        if key.startswith("ATLAS_BRIDGE_") or key == "ATLAS_CONF":
            monkeypatch.delenv(key, raising=False)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared is not beside the checkout")
    return SHARED
