"""Choosing the backend: IRON_BACKEND, set_backend, auto, poison, xrt's error."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import iron
import iron.runtime
from iron.runtime import BackendUnavailableError, backend_name, select, xrt
from iron.runtime.emu import EmuDevice


@pytest.fixture
def env(monkeypatch):
    """Back to IRON_BACKEND and IRON_EMU_POISON, restored after the test."""
    monkeypatch.setattr(select, "_chosen", None)
    monkeypatch.setattr(select, "_poison", None)
    monkeypatch.setattr(select, "_logged", set())
    monkeypatch.delenv("IRON_BACKEND", raising=False)
    monkeypatch.delenv("IRON_EMU_POISON", raising=False)
    return monkeypatch


def test_the_session_runs_on_the_emulator():
    assert backend_name() == "emu"
    device = select.open_device(iron.NPU2)
    assert isinstance(device, EmuDevice) and device.backend == "emu"
    assert device.poison, "tests run with dead memory poisoned"
    assert select.open_device(iron.NPU2) is device, "opened once"


def test_iron_backend_chooses(env):
    env.setenv("IRON_BACKEND", "emu")
    assert backend_name() == "emu"
    env.setenv("IRON_BACKEND", "xrt")
    assert backend_name() == "xrt"


def test_set_backend_wins_over_the_environment(env):
    env.setenv("IRON_BACKEND", "xrt")
    iron.runtime.set_backend("emu")
    assert backend_name() == "emu"
    iron.runtime.set_backend(None)
    assert backend_name() == "xrt"


def test_an_unknown_backend_is_refused(env):
    with pytest.raises(ValueError, match="'npu' is not one of emu, xrt, auto"):
        iron.runtime.set_backend("npu")
    env.setenv("IRON_BACKEND", "cuda")
    with pytest.raises(ValueError, match="IRON_BACKEND='cuda'"):
        backend_name()


def test_auto_takes_the_emulator_without_an_npu_and_logs_why_once(env, caplog):
    env.setattr(xrt, "missing", lambda: ["the pyxrt module", "an NPU device node"])
    with caplog.at_level(logging.INFO, logger="iron.runtime"):
        assert backend_name() == "emu"
        assert backend_name() == "emu"
    logged = [r.getMessage() for r in caplog.records if "backend auto" in r.message]
    assert len(logged) == 1
    assert "emulated NPU" in logged[0] and "pyxrt" in logged[0]


def test_auto_takes_xrt_where_an_npu_and_pyxrt_are(env, caplog):
    env.setattr(xrt, "missing", lambda: [])
    with caplog.at_level(logging.INFO, logger="iron.runtime"):
        assert backend_name() == "xrt"
    assert "backend auto: xrt" in caplog.text


def test_auto_is_the_default(env):
    env.setattr(xrt, "missing", lambda: ["the pyxrt module"])
    assert backend_name() == "emu"


def test_xrt_names_what_is_missing(env):
    iron.runtime.set_backend("xrt")
    env.setattr(xrt, "missing", lambda: ["the pyxrt module (it ships with XRT)"])

    class One(iron.Graph):
        def body(self, x):
            from iron.operators import ReLU

            return ReLU.step(x)

    with pytest.raises(BackendUnavailableError) as info:
        One().compile(x=(256,))
    text = str(info.value)
    assert "pyxrt" in text and "npu2" in text
    assert "IRON_BACKEND=emu" in text


def test_xrt_opens_pyxrt_where_nothing_else_is_missing(env):
    import sys

    env.setattr(xrt, "missing", lambda: [])
    env.setitem(sys.modules, "pyxrt", None)  # found by missing(), not importable
    with pytest.raises(BackendUnavailableError, match="cannot import pyxrt"):
        xrt.open_device(iron.NPU1)


def test_xrt_missing_lists_this_machines_gaps():
    lacks = xrt.missing()
    assert isinstance(lacks, list) and all(isinstance(s, str) for s in lacks)


@pytest.mark.parametrize(
    ("value", "poison"), [("1", True), ("yes", True), ("0", False), ("", False)]
)
def test_iron_emu_poison(env, value, poison):
    env.setenv("IRON_EMU_POISON", value)
    assert select._poisoning() is poison
    iron.runtime.set_poison(not poison)
    assert select._poisoning() is (not poison)


def test_poison_off_opens_another_emulated_device(env):
    env.setenv("IRON_BACKEND", "emu")
    iron.runtime.set_poison(False)
    quiet = select.open_device(iron.NPU2)
    iron.runtime.set_poison(True)
    loud = select.open_device(iron.NPU2)
    assert quiet is not loud and not quiet.poison and loud.poison


def test_without_poison_dead_transients_keep_their_bytes(env):
    from ops import Add32, Scale32

    env.setenv("IRON_BACKEND", "emu")
    iron.runtime.set_poison(False)

    class Two(iron.Graph):
        def body(self, x):
            return Add32.step(Scale32.step(x, factor=2.0), x)

    version = Two().compile(x=((64,), np.float32))
    x = np.ones(64, np.float32)
    np.testing.assert_array_equal(version(x), 3 * x)
    (placed,) = [p for p in version.plan.buffers.values() if p.kind == "transient"]
    raw = version.arena.buffer().device[placed.offset : placed.end]
    np.testing.assert_array_equal(raw.view(np.float32), 2 * x)


# -- the default device (issue 15: an NPU1 owner who forgets IRON_DEVICE) ---------


@pytest.mark.parametrize(("reported", "expected"), [("npu1", "npu1"), (None, "npu2")])
def test_the_default_device_is_the_npu_xrt_reports(env, reported, expected):
    env.delenv("IRON_DEVICE", raising=False)
    env.setattr(xrt, "missing", lambda: [])  # auto takes xrt: an NPU is here
    env.setattr(xrt, "detect", lambda: reported)
    with iron.use_device(None):
        assert iron.runtime.default_device() == expected


def test_a_named_device_wins_over_detection(env):
    env.setattr(xrt, "missing", lambda: [])

    def detect():
        raise AssertionError("IRON_DEVICE is set: XRT is not asked")

    env.setattr(xrt, "detect", detect)
    env.setenv("IRON_DEVICE", "npu2")
    with iron.use_device(None):
        assert iron.runtime.default_device() == "npu2"


def test_the_emulator_defaults_to_npu2_without_asking_xrt(env):
    env.delenv("IRON_DEVICE", raising=False)
    env.setenv("IRON_BACKEND", "emu")
    env.setattr(xrt, "detect", lambda: pytest.fail("the emulator asks no XRT"))
    with iron.use_device(None):
        assert iron.runtime.default_device() == select.FALLBACK_DEVICE == "npu2"


@pytest.mark.parametrize(("reported", "expected"), [("npu1", "npu1"), (None, "npu2")])
def test_the_python_api_takes_the_same_default(env, reported, expected):
    """iron-core's require_device, with no device named, asks this runtime
    (the iron.backends entry point): the device iron-lm takes too."""
    from iron.core import device as core_device

    env.delenv("IRON_DEVICE", raising=False)
    env.setattr(xrt, "missing", lambda: [])
    env.setattr(xrt, "detect", lambda: reported)
    env.setattr(core_device, "_announced", set())
    with iron.use_device(None):
        assert core_device.require_device().name == expected


def test_without_xrt_the_default_device_leaves_the_error_to_opening(env):
    """IRON_BACKEND=xrt on a machine without XRT: no detection (its error would
    lack the way out); opening the device names what is missing."""
    env.delenv("IRON_DEVICE", raising=False)
    env.setenv("IRON_BACKEND", "xrt")
    env.setattr(xrt, "missing", lambda: ["the pyxrt module"])
    env.setattr(xrt, "detect", lambda: pytest.fail("XRT is missing: not asked"))
    with iron.use_device(None):
        assert iron.runtime.default_device() == "npu2"
