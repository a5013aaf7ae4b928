"""Fixtures for this area; see conftest.py."""

from __future__ import annotations
