"""The cost model: per-step modelled time, dispatch charging, the roofline."""

from __future__ import annotations

import pytest

import iron
from iron.core.cost import roofline, step_time
from iron.core.declare import Input, Output, param
from iron.core.operator import Cost, Operator


class Stream(Operator):
    """Moves ``size`` bf16 elements in and out, one op each (memory-bound)."""

    size: int = param()
    inputs = (Input("x", "size"),)
    outputs = (Output("out", "size"),)

    def reference(self, x):
        return x

    def cost(self, dev):
        return Cost(macs=self.size, bytes=4 * self.size)


class Crunch(Operator):
    """A square matmul's worth of MACs on a small vector (compute-bound)."""

    size: int = param()
    inputs = (Input("x", "size"),)
    outputs = (Output("out", "size"),)

    def reference(self, x):
        return x

    def cost(self, dev):
        return Cost(macs=self.size**3, bytes=4 * self.size)


class Chain(iron.Graph):
    def body(self, x):
        return Crunch.step(Stream.step(x))


@pytest.fixture(autouse=True)
def npu2():
    with iron.use_device("npu2"):
        yield


def test_step_time_is_the_larger_of_compute_and_memory_plus_dispatch():
    dev = iron.NPU2
    t = step_time(Stream(size=1 << 24), dev, dispatches=1)
    assert t.memory_s == pytest.approx(4 * (1 << 24) / dev.ddr_bytes_per_s)
    assert t.compute_s == pytest.approx((1 << 24) / dev.peak_bf16_macs_per_s)
    assert t.seconds == pytest.approx(
        max(t.memory_s, t.compute_s) + dev.dispatch_seconds
    )
    assert t.bound == "memory"
    assert step_time(Crunch(size=4096), dev, dispatches=0).bound == "compute"
    assert step_time(Stream(size=16), dev).bound == "dispatch"


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


def test_roofline_totals_bound_and_table():
    recording = Chain().record(x=(4096,))
    model = roofline(recording)
    assert model.bytes == 8 * 4096 and model.macs == 4096 + 4096**3
    assert model.bandwidth_bound_s == pytest.approx(
        model.bytes / iron.NPU2.ddr_bytes_per_s
    )
    assert model.seconds >= model.bandwidth_bound_s
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
