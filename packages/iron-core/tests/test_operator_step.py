"""Operator.step in a graph body, and an operator called outside one.

A step infers its dimensions from handles and keywords, refuses conflicts and
what the device cannot run, and carries row bounds; a graph's reference runs
each operator's reference, and the base hooks raise NotImplementedError.
"""

from __future__ import annotations

import numpy as np
import pytest
from handles_for_tests import handle
from operators_for_tests import DomainScale, NoResolve, PerCallRows, TiledMatVec

import iron
from iron.core import plugins
from iron.core.device import NPU2
from iron.core.operator import (
    Cost,
    DimensionConflictError,
    RefusedShapeError,
    StepOutsideBodyError,
)
from iron.core.percall import PerCall

# -- step and graphs ---------------------------------------------------------------------


class MatVecGraph(iron.Graph):
    def __init__(self, **fields):
        self.fields = fields

    def body(self, w, x):
        return TiledMatVec.step(w, x, **self.fields)


def test_step_outside_a_body_raises():
    with pytest.raises(StepOutsideBodyError) as info:
        TiledMatVec.step(handle("w", 4, 8), handle("x", 8))
    assert isinstance(info.value, TypeError)
    message = str(info.value)
    assert "TiledMatVec.step records a step into a Graph.body" in message
    assert "TiledMatVec(...)(arrays...)" in message
    assert "TiledMatVec(...).reference(arrays...)" in message


def test_step_infers_dimensions_in_a_graph():
    with iron.use_device("npu2"):
        recording = MatVecGraph().record(w=(8, 32), x=(32,))
    (step,) = recording.steps
    assert step.op == TiledMatVec(M=8, K=32, tile=32)
    assert step.op.pinned == frozenset()
    assert recording.outputs[0].shape == (8,)


def test_step_keyword_agreeing_with_a_handle_is_fine():
    with iron.use_device("npu2"):
        recording = MatVecGraph(K=32, tile=8).record(w=(8, 32), x=(32,))
    op = recording.steps[0].op
    assert (op.K, op.tile, op.pinned) == (32, 8, frozenset({"tile"}))


def test_step_keyword_conflicting_with_a_handle_raises():
    with iron.use_device("npu2"):
        with pytest.raises(DimensionConflictError) as info:
            MatVecGraph(K=64).record(w=(8, 32), x=(32,))
    assert str(info.value) == (
        "TiledMatVec: K is 64 from the call's keyword but 32 from w.shape[1]"
    )


def test_step_keyword_conflicting_with_x_raises():
    class Sized(iron.Graph):
        def body(self, x):
            return DomainScale.step(x, size=64)

    with iron.use_device("npu2"):
        with pytest.raises(DimensionConflictError) as info:
            Sized().record(x=(32,))
    assert str(info.value) == (
        "DomainScale: size is 64 from the call's keyword but 32 from x.shape[0]"
    )


def test_step_needs_its_required_operands():
    class OnlyX(iron.Graph):
        def body(self, x):
            return TiledMatVec.step(None, x, M=4, K=8)

    with iron.use_device("npu2"):
        with pytest.raises(TypeError, match="needs operand w"):
            OnlyX().record(x=(16,))


def test_step_keyword_fills_what_no_handle_gives():
    class WithTile(iron.Graph):
        def body(self, x):
            return DomainScale.step(x, factor=3.0, columns=2)

    with iron.use_device("npu1"):
        recording = WithTile().record(x=(64,))
    op = recording.steps[0].op
    assert (op.size, op.factor, op.columns, op.tile) == (64, 3.0, 2, 16)
    assert op.pinned == frozenset({"columns"})


def test_step_refuses_what_the_device_cannot_run():
    class TooWide(iron.Graph):
        def body(self, x):
            return DomainScale.step(x, columns=8)

    with iron.use_device("npu1"):
        with pytest.raises(RefusedShapeError, match="columns=8 exceeds 4"):
            TooWide().record(x=(64,))


def test_step_handles_conflicting_in_a_graph():
    with iron.use_device("npu2"):
        with pytest.raises(DimensionConflictError, match="K is 2048 from w.shape"):
            MatVecGraph().record(w=(8, 2048), x=(1024,))


def test_graph_reference_runs_the_operator_reference():
    w = np.arange(8 * 16, dtype=np.float32).reshape(8, 16) / 64
    x = np.linspace(-1, 1, 16, dtype=np.float32)
    w16, x16 = w.astype("bfloat16"), x.astype("bfloat16")
    with iron.use_device("npu2"):
        result = MatVecGraph().reference(w16, x16)
    want = (w16.astype(np.float32) @ x16.astype(np.float32)).astype("bfloat16")
    np.testing.assert_array_equal(result, want)


def test_step_propagates_a_per_call_row_bound():
    class Bounded(iron.Graph):
        def body(self, x, *, n: iron.Scratchpad[int]):
            return PerCallRows.step(x[:n])[0]

    with iron.use_device("npu2"):
        recording = Bounded().record(x=(8, 16))
    (out,) = recording.outputs
    assert out.shape == (8, 16)
    assert set(out.valid) == {0}
    assert out.valid[0] == PerCall("n").affine()


def test_standalone_call_without_runtime_names_iron_runtime(monkeypatch):
    monkeypatch.setattr(plugins, "entry_points", lambda group: [])
    op = DomainScale(size=16).resolved("npu2")
    with pytest.raises(ImportError) as info:
        op(np.zeros(16, "bfloat16"))
    assert "iron-runtime" in str(info.value)


def test_base_hooks():
    op = NoResolve(size=4, tile=1)
    assert op.resolve(NPU2) == {}
    assert op.check(NPU2) is None
    with pytest.raises(NotImplementedError, match="NoResolve has no reference"):
        op.reference()
    with pytest.raises(NotImplementedError, match="NoResolve has no tolerance"):
        op.tolerance()
    with pytest.raises(NotImplementedError, match="NoResolve has no cost"):
        op.cost(NPU2)
    assert Cost(macs=1, bytes=2) == Cost(1, 2)


def test_graph_reference_runs_shapes_the_device_refuses():
    class TooWide(iron.Graph):
        def body(self, x):
            return DomainScale.step(x, columns=8, factor=2.0)

    x = np.arange(64, dtype=np.float32).astype("bfloat16")
    # Recorded for its host reference, a graph does not fit the device.
    result = TooWide().reference(x, dev="npu1")
    np.testing.assert_array_equal(result, (2 * x.astype(np.float32)).astype("bfloat16"))
    with pytest.raises(RefusedShapeError):
        with iron.use_device("npu1"):
            TooWide().record(x=(64,))
