"""Standalone operator calls: a one-step image compiled once and run."""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16
from ops import Add1, Take2

import iron
from iron.operators import AXPY, ReLU
from iron.runtime import backend
from iron.runtime.backend import Runtime


def _bf16(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(bfloat16)


@pytest.fixture
def compiles(monkeypatch) -> list[str]:
    """The name of each graph the runtime compiles from now on (none cached)."""
    monkeypatch.setattr(backend, "_standalone", {})
    seen: list[str] = []
    original = Runtime.compile

    def spy(self, graph, recording, **kwargs):
        seen.append(graph.name)
        return original(self, graph, recording, **kwargs)

    monkeypatch.setattr(Runtime, "compile", spy)
    return seen


def test_axpy_runs_alone():
    x, y = _bf16(2048, 1), _bf16(2048, 2)
    op = AXPY(size=2048, scalar_factor=2.0)
    out = op(x, y)
    assert isinstance(out, np.ndarray) and out.dtype == bfloat16
    np.testing.assert_array_equal(out, op.reference(x, y))


@pytest.mark.device("npu1")
def test_relu_runs_alone_on_npu1():
    x = _bf16(256, 3)
    np.testing.assert_array_equal(ReLU(size=256)(x), np.maximum(x, 0))


def test_the_one_step_image_is_compiled_once(compiles):
    x, y = _bf16(512, 1), _bf16(512, 2)
    op = AXPY(size=512, scalar_factor=-3.0)
    for _ in range(3):
        np.testing.assert_array_equal(op(x, y), op.reference(x, y))
    np.testing.assert_array_equal(
        AXPY(size=512, scalar_factor=-3.0)(x, y), op.reference(x, y)
    )
    assert compiles == ["AXPY"]
    AXPY(size=512, scalar_factor=0.5)(x, y)
    assert compiles == ["AXPY", "AXPY"], "another scalar is another image"


def test_each_device_gets_its_own_image(compiles):
    x = _bf16(256, 4)
    ReLU(size=256)(x)
    with iron.use_device("npu1"):
        np.testing.assert_array_equal(ReLU(size=256)(x), np.maximum(x, 0))
    assert compiles == ["ReLU", "ReLU"]


def test_test_operators_of_other_dtypes_run_alone():
    x = np.arange(64, dtype=np.int32)
    np.testing.assert_array_equal(Add1(size=64)(x), x + 1)
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(Take2(rows=3, cols=4)(m), m)


def test_a_wrong_shape_raises():
    op = AXPY(size=256, scalar_factor=1.0)
    x = _bf16(256)
    op(x, x)
    with pytest.raises(ValueError, match=r"\[128\]"):
        op(x[:128], x[:128])
