"""The cost model: per-step modelled time, dispatch charging, the roofline."""

from __future__ import annotations

import pytest
from operators_for_tests import Crunch, Spread, Stream

import iron
from iron.core.cost import roofline, step_time
from iron.core.declare import Input, Output, param
from iron.core.operator import Cost, Operator


class Chain(iron.Graph):
    def body(self, x):
        return Crunch.step(Stream.step(x))


@pytest.fixture(autouse=True)
def npu2():
    with iron.use_device("npu2"):
        yield


def test_step_time_is_the_larger_of_compute_and_memory_plus_calls_and_dispatch():
    dev = iron.NPU2
    t = step_time(Stream(size=1 << 24), dev, dispatches=1)
    # One column, one core, one kernel call: Cost's defaults.
    assert (t.columns, t.cores, t.calls, t.reread_bytes) == (1, 1, 1, 0)
    assert t.memory_s == pytest.approx(4 * (1 << 24) / dev.shim_bytes_per_s_per_column)
    assert t.compute_s == pytest.approx((1 << 24) / dev.core_peak_macs_per_s)
    assert t.calls_s == pytest.approx(dev.kernel_call_seconds)
    assert t.seconds == pytest.approx(
        max(t.memory_s, t.compute_s) + dev.kernel_call_seconds + dev.dispatch_seconds
    )
    assert t.bound == "memory"
    assert step_time(Crunch(size=4096), dev, dispatches=0).bound == "compute"
    assert step_time(Stream(size=16), dev).bound == "dispatch"
    assert step_time(Spread(size=16, calls=100), dev, dispatches=0).bound == "calls"


@pytest.mark.parametrize("dev", [iron.NPU1, iron.NPU2], ids=str)
def test_compute_is_the_macs_at_the_peak_of_the_cores_used(dev):
    one = step_time(Spread(size=1 << 12), dev, dispatches=0)
    assert one.compute_s == pytest.approx((1 << 24) / dev.core_peak_macs_per_s)
    four = step_time(Spread(size=1 << 12, columns=2, cores=4), dev, dispatches=0)
    assert four.cores == 4 and four.compute_s == pytest.approx(one.compute_s / 4)
    every = Spread(size=1 << 12, columns=dev.columns, cores=dev.compute_tiles)
    assert step_time(every, dev).compute_s == pytest.approx(
        (1 << 24) / dev.peak_bf16_macs_per_s
    )
    # Cores default to one per column.
    assert step_time(Spread(size=1 << 12, columns=2), dev).cores == 2


@pytest.mark.parametrize("dev", [iron.NPU1, iron.NPU2], ids=str)
def test_memory_is_the_bytes_and_rereads_at_the_shim_rate_up_to_the_dma_roof(dev):
    size = 1 << 20
    shim = dev.shim_bytes_per_s_per_column
    for columns in range(1, dev.columns + 1):
        t = step_time(Spread(size=size, columns=columns), dev, dispatches=0)
        rate = min(dev.dma_bytes_per_s, shim * columns)
        assert t.memory_s == pytest.approx(4 * size / rate)
    # More columns never model slower, and the DMA roof caps what they add.
    times = [
        step_time(Spread(size=size, columns=c), dev).memory_s
        for c in range(1, dev.columns + 1)
    ]
    assert times == sorted(times, reverse=True)
    assert times[-1] >= 4 * size / dev.dma_bytes_per_s * (1 - 1e-12)
    reread = step_time(Spread(size=size, reread=1000), dev, dispatches=0)
    assert reread.reread_bytes == 1000
    assert reread.memory_s == pytest.approx((4 * size + 1000) / shim)


@pytest.mark.parametrize("dev", [iron.NPU1, iron.NPU2], ids=str)
def test_each_kernel_call_costs_the_devices_call_overhead_once(dev):
    base = step_time(Spread(size=64, calls=0), dev, dispatches=0)
    assert base.calls_s == 0
    ten = step_time(Spread(size=64, calls=10), dev, dispatches=0)
    assert ten.calls_s == pytest.approx(10 * dev.kernel_call_seconds)
    assert ten.seconds - base.seconds == pytest.approx(10 * dev.kernel_call_seconds)
    # Cores call in parallel: more of them do not add to the overhead.
    wide = step_time(Spread(size=64, calls=10, columns=4), dev, dispatches=0)
    assert wide.calls_s == ten.calls_s
    charged = step_time(Spread(size=64, calls=10), dev, dispatches=2)
    assert charged.seconds - ten.seconds == pytest.approx(2 * dev.dispatch_seconds)


def test_the_new_device_facts_are_derived_from_the_clock():
    for dev, clock, tile_macs in ((iron.NPU1, 1.0e9, 128), (iron.NPU2, 1.5e9, 256)):
        assert dev.shim_bytes_per_s_per_column == (2 + 2) * 4 * clock
        assert dev.kernel_call_seconds == pytest.approx(300 / clock)
        assert dev.core_peak_macs_per_s == pytest.approx(tile_macs * clock)
        assert dev.core_peak_macs_per_s * dev.compute_tiles == pytest.approx(
            dev.peak_bf16_macs_per_s
        )


def test_npu2_moves_bytes_at_its_measured_dma_roof_not_its_ddr_figure():
    # amd/IRON pull request #195: a memcpy through XDNA2's DMA sustains 63-70
    # GB/s, about half of LPDDR5X-7500's theoretical 120 GB/s.
    npu2 = iron.NPU2
    assert npu2.ddr_bytes_per_s == 120e9
    assert npu2.dma_bytes_per_s == 63e9
    every = step_time(Spread(size=1 << 20, columns=npu2.columns), npu2, dispatches=0)
    assert every.memory_s == pytest.approx(4 * (1 << 20) / 63e9)
    # npu1 has no measured roof: the model keeps its theoretical DDR figure,
    # and its four columns' shim rate (64 GB/s) is what bounds a call there.
    npu1 = iron.NPU1
    assert npu1.dma_bytes_per_s == npu1.ddr_bytes_per_s == 102.4e9
    wide = step_time(Spread(size=1 << 20, columns=npu1.columns), npu1, dispatches=0)
    assert wide.memory_s == pytest.approx(4 * (1 << 20) / 64e9)


def test_cost_defaults_and_refusals():
    assert Cost(1, 2) == Cost(macs=1, bytes=2, columns=1, cores=1, calls=1)
    assert Cost(1, 2, columns=4).cores == 4
    assert Cost(0, 8, cores=0, calls=0).cores == 0  # pure data movement
    with pytest.raises(ValueError, match="needs at least one core"):
        Cost(5, 8, cores=0)
    with pytest.raises(ValueError, match="below 1"):
        Cost(5, 8, columns=0)
    with pytest.raises(ValueError, match="cannot be negative"):
        Cost(5, 8, reread_bytes=-1)
    with pytest.raises(ValueError, match="stall_seconds=-1e-06 cannot be negative"):
        Cost(5, 8, stall_seconds=-1e-6)


@pytest.mark.parametrize("dev", [iron.NPU1, iron.NPU2], ids=str)
def test_a_core_waiting_on_its_dma_adds_its_stall_on_top(dev):
    # A single-buffered tile (a GEMM's out_depth=1) makes a core wait on its
    # own DMA: the stall is charged on top of the work and the calls.
    base = step_time(Spread(size=64, calls=10), dev, dispatches=0)
    assert base.stall_s == 0.0
    stalled = step_time(Spread(size=64, calls=10, stall=3e-6), dev, dispatches=0)
    assert stalled.stall_s == 3e-6
    assert stalled.seconds - base.seconds == pytest.approx(3e-6)


def test_full_elf_charges_one_dispatch_per_call_and_per_step_packaging_one_each():
    recording = Chain().record(x=(4096,))
    whole = roofline(recording, "npu2")
    each = roofline(recording, "npu2", full_elf=False)
    assert whole.full_elf and not each.full_elf
    assert sum(s.dispatch_s for s in whole.steps) == pytest.approx(
        iron.NPU2.dispatch_seconds
    )
    assert sum(s.dispatch_s for s in each.steps) == pytest.approx(
        2 * iron.NPU2.dispatch_seconds
    )
    assert each.seconds > whole.seconds
    # npu1 runs no full ELF: one dispatch per step by default
    assert not roofline(recording, "npu1").full_elf


class Repeats(iron.Graph):
    """Stream, Stream, Crunch, Stream: three runs of one operator or another."""

    def body(self, x):
        return Stream.step(Crunch.step(Stream.step(Stream.step(x))))


def test_npu1_loads_a_configuration_every_step():
    """Issue 28: npu1 runs each step as an xclbin of its own (its hardware
    contexts cycle through every step's image), so each step is charged one
    configuration load on top of its dispatch."""
    recording = Repeats().record(x=(4096,))
    model = roofline(recording, "npu1")
    assert [s.loads for s in model.steps] == [1, 1, 1, 1] and model.loads == 4
    assert iron.NPU1.reconfigure_seconds > 0
    for s, step in zip(model.steps, recording.steps):
        assert s.reconfigure_s == pytest.approx(iron.NPU1.reconfigure_seconds)
        bare = step_time(step.op, iron.NPU1, dispatches=1)
        assert s.seconds - bare.seconds == pytest.approx(s.reconfigure_s)
    assert model.steps[0].bound == "reconfigure"  # milliseconds against a stream


def test_a_full_elf_loads_once_a_run_of_one_operator():
    """Consecutive steps of one operator share one configuration (one
    aiex.configure, one load_pdi); npu2 charges each load its figure."""
    import dataclasses

    recording = Repeats().record(x=(4096,))
    dev = dataclasses.replace(iron.NPU2, reconfigure_seconds=1e-3)
    model = roofline(recording, dev)
    assert [s.loads for s in model.steps] == [1, 0, 1, 1]
    assert sum(s.reconfigure_s for s in model.steps) == pytest.approx(3e-3)
    # the shipped npu2 figure is assumed free until measured
    assert roofline(recording, "npu2").loads == 3
    assert sum(s.reconfigure_s for s in roofline(recording, "npu2").steps) == 0


def test_roofline_totals_bound_and_table():
    recording = Chain().record(x=(4096,))
    model = roofline(recording)
    assert model.bytes == 8 * 4096 and model.macs == 4096 + 4096**3
    assert model.bandwidth_bound_s == pytest.approx(
        model.bytes / iron.NPU2.dma_bytes_per_s
    )
    assert model.seconds >= model.bandwidth_bound_s

    # The bound counts each byte once: rereads are the model's, not the bound's.
    class Rereads(iron.Graph):
        def body(self, x):
            return Spread.step(x, reread=1 << 20)

    reread = roofline(Rereads().record(x=(4096,)))
    assert reread.bytes == 4 * 4096
    assert reread.bandwidth_bound_s == pytest.approx(
        4 * 4096 / iron.NPU2.dma_bytes_per_s
    )
    assert reread.steps[0].memory_s > reread.bandwidth_bound_s
    assert [s.name for s in model.slowest(1)] == ["Crunch"]
    text = model.table()
    assert "Chain on npu2 (full ELF)" in text and "Crunch" in text and "compute" in text


def test_an_operator_without_cost_is_named():
    class NoCost(Operator):
        size: int = param()
        inputs = (Input("x", "size"),)
        outputs = (Output("out", "size"),)

    class G(iron.Graph):
        def body(self, x):
            return NoCost.step(x)

    with pytest.raises(NotImplementedError, match="NoCost has no cost"):
        roofline(G().record(x=(16,)))
