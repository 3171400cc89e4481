"""Fixtures for iron-operators' tests."""

from __future__ import annotations

import pytest

from iron.core import plugins


@pytest.fixture
def fresh_catalog():
    """``plugins.catalog()`` is cached: look the entry points up afresh."""
    plugins.catalog.cache_clear()
    yield plugins.catalog
    plugins.catalog.cache_clear()
