"""Figure 3's clocks: what is subtracted from a call's wall time (issue 20).

The figure subtracted only the kernel models (``FixedStep.run`` and
``Recording.run_step``, wrapped at every step), so the emulated device's own
walk over the steps (operand reads and writes through layouts, idle steps),
which a full ELF does on the NPU, was charged to the host. The device clock
wraps ``EmuRun.execute`` once a run, on whichever thread runs it; the host's
work around it (values, staging, words, dispatch, wait, outputs) stays outside.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from ml_dtypes import bfloat16

import iron
from iron.operators import AXPY, ReLU
from iron.runtime import compiled
from iron.runtime.emu.device import EmuRun
from iron.runtime.emu.execute import RunProgram

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from figures.host_overhead import DeviceClock, KernelClock, hot_spots  # noqa: E402

PAUSE = 0.02


class Chain(iron.Graph):
    def body(self, x, y, *, n: iron.Scratchpad[int]):
        return ReLU.step(AXPY.step(x[:n], y[:n], scalar_factor=2.0))


def _version():
    version = Chain().compile(x=(256,), y=(256,))
    x = np.ones(256, bfloat16)
    return version, x


def _slowed(monkeypatch, owner, name):
    original = getattr(owner, name)

    def slow(*args, **kwargs):
        time.sleep(PAUSE)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, slow)


def test_the_devices_step_walk_is_device_time_and_not_kernel_time(monkeypatch):
    version, x = _version()
    version(x, x, n=256)
    # work the emulated device does outside every kernel model: its reading
    # of the idle steps' words from the scratchpad
    _slowed(monkeypatch, RunProgram, "zero_rows")
    with DeviceClock() as device, KernelClock() as kernel:
        version(x, x, n=256)
    assert device.runs == 1
    assert device.seconds >= PAUSE
    assert kernel.steps == 2
    assert kernel.seconds < PAUSE  # the old figure charged the walk to the host


def test_the_hosts_work_around_a_run_is_not_device_time(monkeypatch):
    version, x = _version()
    version(x, x, n=256)
    # the host's own work: checking the values and evaluating the words,
    # then reading the outputs
    _slowed(monkeypatch, compiled.CompiledGraph, "_values")
    _slowed(monkeypatch, compiled, "read")
    with DeviceClock() as device:
        start = time.perf_counter()
        out = version(x, x, n=256)
        wall = time.perf_counter() - start
    np.testing.assert_array_equal(out, np.full(256, 3, bfloat16))
    assert device.runs == 1
    assert device.seconds < PAUSE
    assert wall - device.seconds >= 2 * PAUSE


def test_runs_on_the_worker_thread_are_counted_and_the_clock_restores():
    version, x = _version()
    original = EmuRun.__dict__["execute"]
    with DeviceClock() as device:
        run = version.callable.new_run()
        version.start(run, x, x, n=128)  # queued to the device's worker thread
        run.wait()
        version(x, x, n=64)  # an idle device: in this thread
    assert device.runs == 2
    assert device.seconds > 0
    assert EmuRun.__dict__["execute"] is original


def test_the_hot_spots_are_the_hosts_alone():
    version, x = _version()
    version(x, x, n=256)
    rows = hot_spots(lambda i: version(x, x, n=256), 5, limit=200)
    where = [row[0] for row in rows]
    assert any("compiled.py" in w for w in where)  # the host's call is there
    # the device's walk is not: its loop, its steps, its reads of the words
    assert not [w for w in where if "emu/execute.py" in w], where
