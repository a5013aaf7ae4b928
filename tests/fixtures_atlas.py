"""Fixtures for the Atlas area; see conftest.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from atlas_stub import AtlasStub


@pytest.fixture
def atlas_stub() -> Iterator[AtlasStub]:
    """A started, empty Atlas (base model only) at ``http://atlas.test:21000``; every HTTP call is mocked."""
    with AtlasStub() as stub:
        yield stub
