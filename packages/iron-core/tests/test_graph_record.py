"""Graph.record(**shapes) and the steps a body records.

Shapes are named per input (missing and unknown ones raise the spec's texts),
recording needs a bound device, and each step infers its dimensions from its
operand handles, refusing wrong ranks, dtypes, counts and non-handles.
"""

from __future__ import annotations

import numpy as np
import pytest
from graphs_for_tests import ScaleThenMul, bf16
from ml_dtypes import bfloat16
from operators_for_tests import MatVec, Mul, Scale

import iron
from iron.core import context
from iron.core.device import NoDeviceError
from iron.core.operator import DimensionConflictError, StepOutsideBodyError

# -- record(**shapes) -----------------------------------------------------------


class Mixed(iron.Graph):
    """Returns its int32 input beside a bf16 step: inputs of two dtypes."""

    def body(self, x, ids):
        return Scale.step(x), ids


def test_shapes_are_tuples_ints_or_shape_and_dtype():
    recording = Mixed().record(x=16, ids=((3,), np.int32))
    x, ids = recording.inputs
    assert (x.shape, x.dtype) == ((16,), np.dtype(bfloat16))
    assert (ids.shape, ids.dtype) == ((3,), np.dtype(np.int32))
    recording = Mixed().record(x=([16], "bfloat16"), ids=[2, 3])
    x, ids = recording.inputs
    assert (x.shape, ids.shape, ids.dtype) == ((16,), (2, 3), np.dtype(bfloat16))


def test_a_missing_shape_raises_the_spec_text():
    with pytest.raises(TypeError) as info:
        ScaleThenMul().record(x=(16,))
    assert str(info.value) == "ScaleThenMul: shapes for ['y'] missing"


def test_missing_and_unknown_shapes_are_named_together():
    with pytest.raises(TypeError) as info:
        ScaleThenMul().record(x=(16,), z=(16,), w=(2,))
    assert str(info.value) == (
        "ScaleThenMul: shapes for ['y'] missing; ['z', 'w'] are not inputs"
    )


def test_an_unknown_shape_alone_raises():
    with pytest.raises(TypeError) as info:
        ScaleThenMul().record(x=(16,), y=(16,), z=(16,))
    assert (
        str(info.value) == "ScaleThenMul: shapes for [] missing; ['z'] are not inputs"
    )


def test_recording_without_a_device_takes_the_default(emulated_default):
    with iron.use_device(None):
        recording = ScaleThenMul().record(x=(16,), y=(16,))
    assert recording.device.name == "npu2"  # as iron-lm without --device


def test_recording_without_a_device_names_the_three_ways(monkeypatch, no_runtime):
    monkeypatch.delenv("IRON_DEVICE", raising=False)
    with iron.use_device(None):
        with pytest.raises(RuntimeError) as info:
            ScaleThenMul().record(x=(16,), y=(16,))
    assert isinstance(info.value, NoDeviceError)
    message = str(info.value)
    for way in ("iron.set_current_device", "iron.use_device", "IRON_DEVICE"):
        assert way in message


def test_the_environment_variable_binds_a_device(monkeypatch):
    monkeypatch.setenv("IRON_DEVICE", "npu1")
    with iron.use_device(None):
        recording = ScaleThenMul().record(x=(16,), y=(16,))
    assert recording.device == iron.NPU1
    assert recording.steps[0].op.num_columns == 4


def test_record_runs_on_the_bound_device():
    with iron.use_device("npu1"):
        recording = ScaleThenMul().record(x=(16,), y=(16,))
    assert recording.device == iron.NPU1
    assert ScaleThenMul().record(x=(16,), y=(16,)).device == iron.NPU2


def test_record_refuses_a_shape_the_device_cannot_run():
    """Scale refuses a size that is no multiple of its columns (8 on npu2)."""
    from iron.core.operator import RefusedShapeError

    class One(iron.Graph):
        def body(self, x):
            return Scale.step(x)

    with pytest.raises(RefusedShapeError, match="size=12"):
        One().record(x=(12,))
    x = bf16(12)
    np.testing.assert_array_equal(One().reference(x), x)  # the host runs any shape


# -- steps: operands, inferred dimensions ----------------------------------------


class Gemv(iron.Graph):
    def body(self, w, x):
        return MatVec.step(w, x)


def test_a_step_infers_its_dimensions_from_the_handles():
    recording = Gemv().record(w=(4, 1024), x=(1024,))
    (step,) = recording.steps
    assert (step.op.M, step.op.K) == (4, 1024)
    assert step.outputs[0].shape == (4,)


def test_two_handles_disagreeing_on_a_dimension_name_both_sources():
    with pytest.raises(DimensionConflictError) as info:
        Gemv().record(w=(4, 2048), x=(1024,))
    assert isinstance(info.value, ValueError)
    assert (
        str(info.value) == "MatVec: K is 2048 from w.shape[1] but 1024 from x.shape[0]"
    )


def test_a_keyword_disagreeing_with_a_handle_names_both():
    class Sized(iron.Graph):
        def body(self, x):
            return Scale.step(x, size=8)

    with pytest.raises(DimensionConflictError) as info:
        Sized().record(x=(16,))
    assert str(info.value) == (
        "Scale: size is 8 from the call's keyword but 16 from x.shape[0]"
    )


def test_a_keyword_agreeing_with_a_handle_is_fine():
    class Sized(iron.Graph):
        def body(self, x):
            return Scale.step(x, size=16, factor=0.5)

    assert Sized().record(x=(16,)).steps[0].op.size == 16


def test_operands_may_be_given_by_name():
    class ByName(iron.Graph):
        def body(self, w, x):
            return MatVec.step(x=x, w=w)

    w, x = bf16(3, 8), bf16(8, seed=1)
    expected = (w.astype(np.float32) @ x.astype(np.float32)).astype(bfloat16)
    np.testing.assert_array_equal(ByName().reference(w, x), expected)


def test_an_operand_of_the_wrong_rank_raises():
    with pytest.raises(ValueError, match=r"w has shape \[8\], but its operand is 2-D"):
        Gemv().record(w=(8,), x=(8,))


def test_an_operand_of_the_wrong_dtype_raises():
    class One(iron.Graph):
        def body(self, x):
            return Scale.step(x)

    with pytest.raises(TypeError, match=r"Scale\.x takes bfloat16, got x\[16\] f32"):
        One().record(x=((16,), np.float32))


def test_too_many_operands_raise():
    class Two(iron.Graph):
        def body(self, x, y):
            return Scale.step(x, y)

    with pytest.raises(TypeError, match=r"Scale\.step takes 1 operands \(x\), got 2"):
        Two().record(x=(8,), y=(8,))


def test_a_missing_operand_raises():
    class Nothing(iron.Graph):
        def body(self, x):
            return Mul.step(x)

    with pytest.raises(TypeError, match=r"Mul\.step needs operand y"):
        Nothing().record(x=(8,))


def test_a_step_refuses_an_array_the_graph_does_not_hold():
    table = bf16(8)

    class Closure(iron.Graph):
        def body(self, x):
            return Mul.step(x, table)

    with pytest.raises(TypeError, match="the graph does not hold; hold it as an"):
        Closure().record(x=(8,))


def test_a_step_refuses_a_python_value_as_an_operand():
    class Number(iron.Graph):
        def body(self, x):
            return Mul.step(x, 2.0)

    with pytest.raises(TypeError, match=r"Mul\.y is 2\.0, not a handle"):
        Number().record(x=(8,))


def test_step_outside_a_body_says_where_it_belongs_and_how_to_run_alone():
    with pytest.raises(TypeError) as info:
        Scale.step(bf16(8), factor=2.0)
    assert isinstance(info.value, StepOutsideBodyError)
    message = str(info.value)
    assert "Scale.step records a step into a Graph.body" in message
    assert "Scale(...)(arrays...)" in message
    assert "Scale(...).reference(arrays...)" in message


def test_a_failed_record_leaves_no_body_recording():
    class Fails(iron.Graph):
        def body(self, x):
            Scale.step(x)
            raise RuntimeError("body failed")

    with pytest.raises(RuntimeError, match="body failed"):
        Fails().record(x=(8,))
    assert context.graph_recorder.get() is None
    with pytest.raises(StepOutsideBodyError):
        Scale.step(bf16(8))


def test_body_must_return_handles_then_a_carry():
    class Number(iron.Graph):
        def body(self, x):
            return Scale.step(x), 3

    with pytest.raises(TypeError, match=r"Number\.body returned 3 as output 1"):
        Number().record(x=(8,))


def test_a_body_returning_nothing_has_no_outputs():
    class Nothing(iron.Graph):
        def body(self, x):
            Scale.step(x)

    recording = Nothing().record(x=(8,))
    assert recording.outputs == []
    assert Nothing().reference(bf16(8)) == ()


def test_a_body_returning_its_input_outputs_it():
    class Same(iron.Graph):
        def body(self, x):
            return x

    x = bf16(8)
    assert Same().record(x=(8,)).outputs[0].name == "x"
    np.testing.assert_array_equal(Same().reference(x), x)
