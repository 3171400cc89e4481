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


@pytest.fixture
def emulated_default(monkeypatch: pytest.MonkeyPatch):
    """A runtime that finds no NPU: its default device is npu2, which the
    emulated NPU runs (``iron.runtime.default_device`` there; iron-runtime's
    own tests check that function). iron-core's session has no iron-runtime,
    so the ``iron.backends`` entry point is stood in for."""
    from iron.core import device, plugins

    class NoNPU:
        def default_device(self) -> str:
            return "npu2"

    monkeypatch.setattr(plugins, "backend", NoNPU)
    monkeypatch.setattr(device, "_announced", set())
    monkeypatch.delenv("IRON_DEVICE", raising=False)
