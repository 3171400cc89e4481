"""Fixtures shared by iron-core's tests."""

from __future__ import annotations

import pytest

import iron


@pytest.fixture(autouse=True)
def _bound_device():
    """Bind npu2 for each test: recording resolves tunables for a device."""
    with iron.use_device("npu2"):
        yield


@pytest.fixture
def no_runtime(monkeypatch: pytest.MonkeyPatch):
    """iron-runtime as if not installed: the ``iron.backends`` entry point finds none."""
    from iron.core import plugins

    def missing():
        raise plugins.MissingDistributionError("iron-runtime is not installed")

    monkeypatch.setattr(plugins, "backend", missing)
