"""check=True: each step dispatched alone and judged against its reference."""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16
from ops import Add32, Scale32

import iron
from iron.core.recording import Recording
from iron.operators import AXPY, ReLU
from iron.runtime import StepCheckError


class Chain(iron.Graph):
    def body(self, x, y):
        return ReLU.step(AXPY.step(x, y, scalar_factor=2.0))


class Three(iron.Graph):
    def body(self, x):
        a = Scale32.step(x, factor=2.0)
        b = Scale32.step(a, factor=3.0)
        return Add32.step(a, b)


def _bf16(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(bfloat16)


@pytest.fixture
def faulty(monkeypatch):
    """Make the kernel of step ``index`` misbehave: ``fault(index, how)``."""

    def fault(index: int, how) -> None:
        original = Recording.run_step

        def run_step(step, values, buffers):
            original(step, values, buffers)
            if step.index == index:
                out = buffers[step.outputs[0].name].reshape(-1)
                how(out)

        monkeypatch.setattr(Recording, "run_step", staticmethod(run_step))

    return fault


def test_check_dispatches_each_step_and_passes_a_good_graph():
    graph = Chain()
    version = graph.compile(x=(256,), y=(256,), check=True)
    assert not version.plan.full_elf
    assert "check=True dispatches each step on its own" in version.plan.reasons
    assert len(version.images) == 2 and all(i.check for i in version.images)
    x, y = _bf16(256, 1), _bf16(256, 2)
    np.testing.assert_array_equal(graph(x, y), graph.reference(x, y))


def test_check_with_full_elf_is_refused():
    with pytest.raises(ValueError, match="check=True dispatches each step"):
        Chain().compile(x=(256,), y=(256,), check=True, full_elf=True)


def test_a_step_outside_its_tolerance_raises_naming_step_buffer_verdict(faulty):
    graph = Three()
    version = graph.compile(x=((64,), np.float32), check=True)
    faulty(1, lambda out: out.__setitem__(5, out[5] + 1))
    with pytest.raises(StepCheckError) as info:
        version(np.ones(64, np.float32))
    text = str(info.value)
    name = version.recording.steps[1].outputs[0].name
    assert "step 1 Scale32" in text and name in text
    assert "FAIL" in text and "1 of 64" in text


def test_the_first_bad_step_is_reported(faulty):
    graph = Three()
    version = graph.compile(x=((64,), np.float32), check=True)
    faulty(0, lambda out: out.__setitem__(0, np.nan))
    with pytest.raises(StepCheckError, match="step 0 Scale32"):
        version(np.ones(64, np.float32))


def test_without_check_a_bad_kernel_is_only_a_wrong_answer(faulty):
    graph = Three()
    version = graph.compile(x=((64,), np.float32))
    faulty(1, lambda out: out.__setitem__(5, out[5] + 1))
    out = version(np.ones(64, np.float32))
    assert out[5] == 9 and (np.delete(out, 5) == 8).all()


def _ulps(k: int):
    def bump(out: np.ndarray) -> None:
        bits = out.view(np.uint16)
        bits[:] = np.where(bits & 0x7FFF, bits + k, bits)

    return bump


def test_a_step_within_its_tolerance_passes_and_the_next_is_judged_on_it(faulty):
    # AXPY one ulp off passes (its tolerance); ReLU (exact) is judged on the
    # inputs the device gave it, not on the host's chain, so it passes too.
    graph = Chain()
    version = graph.compile(x=(256,), y=(256,), check=True)
    x, y = _bf16(256, 3), _bf16(256, 4)
    want = graph.reference(x, y)  # before the fault: the host runs steps too
    faulty(0, _ulps(1))  # AXPY allows one bf16 ulp
    out = version(x, y)
    assert not np.array_equal(out, want)


def test_a_step_past_its_tolerance_raises(faulty):
    graph = Chain()
    version = graph.compile(x=(256,), y=(256,), check=True)
    faulty(0, _ulps(3))
    with pytest.raises(StepCheckError, match="step 0 AXPY") as info:
        version(_bf16(256, 3), _bf16(256, 4))
    assert "ulp" in str(info.value)
