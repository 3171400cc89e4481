"""Fixtures shared by iron-core's tests."""

from __future__ import annotations

import pytest

import iron


@pytest.fixture(autouse=True)
def _bound_device():
    """Bind npu2 for each test: recording resolves tunables for a device."""
    with iron.use_device("npu2"):
        yield
