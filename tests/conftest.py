"""Shared fixtures for the cross-package tests: a bound device and the repo root."""

from __future__ import annotations

from pathlib import Path

import pytest

import iron

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def root() -> Path:
    """The repository's root directory."""
    return ROOT


@pytest.fixture(autouse=True)
def npu2():
    """Bind the npu2 device description for each test (device-free)."""
    with iron.use_device("npu2"):
        yield iron.NPU2


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "npu: needs a Ryzen AI NPU with XRT (pyxrt) and mlir-aie; skipped elsewhere",
    )
