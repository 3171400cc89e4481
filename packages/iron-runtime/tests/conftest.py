"""Fixtures for iron-runtime's tests: the emulated NPU, dead memory poisoned.

The whole session runs on the emulator with poison on (a planning bug is a
wrong answer, not luck); each test binds a device, npu2 unless it is marked
``@pytest.mark.device("npu1")``.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

import iron
import iron.runtime
from iron.runtime.emu import EmuRun

# The test operators live next to the tests (ops.py), not in any package.
sys.path.insert(0, str(Path(__file__).parent))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "device(name): the device the test binds (npu2 by default)"
    )


@pytest.fixture(scope="session", autouse=True)
def _emulated_npu():
    """The emulated NPU with poison on, for the whole session."""
    iron.runtime.set_backend("emu")
    iron.runtime.set_poison(True)
    yield
    iron.runtime.set_backend(None)
    iron.runtime.set_poison(None)


@pytest.fixture(autouse=True)
def dev(request: pytest.FixtureRequest):
    """Bind the test's device (``@pytest.mark.device``; npu2 by default)."""
    marker = request.node.get_closest_marker("device")
    with iron.use_device(marker.args[0] if marker else "npu2") as device:
        yield device


@pytest.fixture
def gate(monkeypatch):
    """Each emulated run waits for a permit before it executes."""
    permits = threading.Semaphore(0)
    original = EmuRun.execute

    def gated(self):
        assert permits.acquire(timeout=30), "a run waited for a permit too long"
        original(self)

    monkeypatch.setattr(EmuRun, "execute", gated)
    yield permits
    permits.release(1000)  # never leave the device's worker blocked
