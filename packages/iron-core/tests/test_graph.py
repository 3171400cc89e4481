"""Graph: body's signature, record, reference, inline, profiles and versions.

The contract is the spec's API reference for ``Graph`` (names, rules, error
texts) and Section 2's walkthrough; operators are the tiny ones in
``ops_for_tests`` (iron-core's tests never import iron.operators).
"""

from __future__ import annotations

import inspect
import logging
from importlib.metadata import entry_points

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ml_dtypes import bfloat16
from ops_for_tests import ArgMax, MatVec, Mul, Scale

import iron
from iron.core import context, plugins
from iron.core.device import NoDeviceError
from iron.core.operator import DimensionConflictError, StepOutsideBodyError
from iron.core.plugins import MissingDistributionError


def bf16(*shape: int, seed: int = 0) -> np.ndarray:
    """Random bf16 values, reproducible."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(np.float32).astype(bfloat16)


def scale(x: np.ndarray, factor: float) -> np.ndarray:
    """Scale's rounding: fp32 product rounded once to bf16."""
    return (np.float32(factor) * x.astype(np.float32)).astype(bfloat16)


def mul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (x.astype(np.float32) * y.astype(np.float32)).astype(bfloat16)


class ScaleThenMul(iron.Graph):
    """``factor * x * y``: two steps, like the spec's ReluThenAxpy."""

    def __init__(self, factor: float = 2.0):
        self.factor = factor

    def body(self, x, y):
        return Mul.step(Scale.step(x, factor=self.factor), y)


class Head(iron.Graph):
    """``factor * x[:n]``: a per-call bound with a default."""

    def body(self, x, *, n: iron.Scratchpad[int] = 4):
        return Scale.step(x[:n], factor=3.0)


class Row(iron.Graph):
    """Row ``position`` of a matrix, scaled."""

    def body(self, x, *, position: iron.Scratchpad[int]):
        return Scale.step(x[position], factor=2.0)


# -- body's signature ---------------------------------------------------------


def test_positional_parameters_are_the_inputs_in_order():
    recording = ScaleThenMul().record(y=(16,), x=(16,))
    assert [h.name for h in recording.inputs] == ["x", "y"]
    assert [h.shape for h in recording.inputs] == [(16,), (16,)]
    assert all(h.dtype == np.dtype(bfloat16) for h in recording.inputs)
    assert all(h.buffer.role == "input" for h in recording.inputs)
    assert recording.values == []


class MaybeMul(iron.Graph):
    """``3 * x``, times ``y`` when given."""

    def body(self, x, y=None):
        out = Scale.step(x, factor=3.0)
        return out if y is None else Mul.step(out, y)


def test_an_optional_input_left_out_is_none_and_not_an_input():
    graph = MaybeMul()
    for recording in (graph.record(x=(8,)), graph.record(x=(8,), y=None)):
        assert [h.name for h in recording.inputs] == ["x"]
        assert len(recording.steps) == 1
    recording = graph.record(x=(8,), y=(8,))
    assert [h.name for h in recording.inputs] == ["x", "y"]
    assert len(recording.steps) == 2


def test_an_optional_input_in_the_reference():
    x, y = bf16(8), bf16(8, seed=1)
    graph = MaybeMul()
    np.testing.assert_array_equal(graph.reference(x), scale(x, 3.0))
    np.testing.assert_array_equal(graph.reference(x, None), scale(x, 3.0))
    np.testing.assert_array_equal(graph.reference(x, y), mul(scale(x, 3.0), y))


def test_an_input_defaulting_to_anything_but_none_raises():
    class Defaulted(iron.Graph):
        def body(self, x, y=0):
            return x

    with pytest.raises(TypeError, match=r"Defaulted\.body: input y defaults to 0; "):
        Defaulted().record(x=(8,))
    with pytest.raises(TypeError, match="may only default to None"):
        Defaulted().reference(bf16(8))


def _with_value(annotation):
    """A graph whose keyword-only ``position`` has ``annotation`` (or none)."""

    carried = annotation is iron.Carried[int]

    class Valued(iron.Graph):
        def body(self, x, *, position):
            return (x, iron.carry(position=position)) if carried else x

    if annotation is not inspect.Parameter.empty:
        Valued.body.__annotations__["position"] = annotation
    return Valued()


@pytest.mark.parametrize(
    "annotation",
    [
        inspect.Parameter.empty,
        int,
        iron.Scratchpad[float],
        iron.Carried[str],
        iron.Scratchpad,
        "int",
    ],
    ids=["none", "int", "scratchpad-float", "carried-str", "bare", "string"],
)
def test_a_keyword_only_value_must_be_annotated_scratchpad_or_carried(annotation):
    with pytest.raises(TypeError) as info:
        _with_value(annotation).record(x=(8,))
    message = str(info.value)
    assert "keyword-only position" in message
    assert "iron.Scratchpad[int] or iron.Carried[int]" in message


@pytest.mark.parametrize("annotation", [iron.Scratchpad[int], iron.Carried[int]])
def test_annotated_keyword_only_values_are_per_call_values(annotation):
    recording = _with_value(annotation).record(x=(8,))
    (value,) = recording.values
    assert value.name == "position"
    assert value.kind.value == annotation.__metadata__[0]


def test_var_positional_and_var_keyword_are_refused():
    class Star(iron.Graph):
        def body(self, *xs):
            return xs[0]

    class StarStar(iron.Graph):
        def body(self, x, **values):
            return x

    with pytest.raises(TypeError, match=r"Star\.body: \*xs is not allowed"):
        Star().record()
    with pytest.raises(TypeError, match=r"StarStar\.body: \*\*values is not allowed"):
        StarStar().record(x=(8,))


def test_a_graph_without_a_body_says_so():
    class NoBody(iron.Graph):
        pass

    with pytest.raises(NotImplementedError, match="NoBody defines no body()"):
        NoBody().record()


@pytest.mark.parametrize("default", [True, 1.5, "2", None])
def test_a_per_call_default_is_an_int(default):
    class Defaulted(iron.Graph):
        def body(self, x, *, n: iron.Scratchpad[int] = default):
            return x

    with pytest.raises(TypeError) as info:
        Defaulted().record(x=(8,))
    assert str(info.value) == (
        f"Defaulted.body: per-call n defaults to {default!r}; a per-call value's "
        f"default is an int"
    )


def test_per_call_defaults_are_used_when_not_given():
    graph = Head()
    assert graph.record(x=(8,)).defaults == {"n": 4}
    x = bf16(8)
    np.testing.assert_array_equal(graph.reference(x), scale(x[:4], 3.0))
    np.testing.assert_array_equal(graph.reference(x, n=6), scale(x[:6], 3.0))


class Named(iron.Graph):
    """Names its inputs and values in signature(), not body's parameters."""

    def signature(self):
        p = inspect.Parameter
        return inspect.Signature(
            [
                p("a", p.POSITIONAL_OR_KEYWORD),
                p("b", p.POSITIONAL_OR_KEYWORD, default=None),
                p("k", p.KEYWORD_ONLY, annotation=iron.Scratchpad[int], default=2),
            ]
        )

    def body(self, *tensors, **values):
        a, b = tensors
        out = Scale.step(a[: values["k"]], factor=2.0)
        return out if b is None else (out, Scale.step(b))


def test_signature_may_name_the_inputs_and_values():
    graph = Named()
    recording = graph.record(a=(8,))
    assert [h.name for h in recording.inputs] == ["a"]
    assert [v.name for v in recording.values] == ["k"]
    assert recording.defaults == {"k": 2}
    a, b = bf16(8), bf16(4, seed=1)
    np.testing.assert_array_equal(graph.reference(a), scale(a[:2], 2.0))
    out, same = graph.reference(a, b, k=5)
    np.testing.assert_array_equal(out, scale(a[:5], 2.0))
    np.testing.assert_array_equal(same, b)


def test_the_default_signature_leaves_out_self():
    assert list(ScaleThenMul().signature().parameters) == ["x", "y"]
    assert list(Head().signature().parameters) == ["x", "n"]


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


def test_recording_without_a_device_names_the_three_ways(monkeypatch):
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


# -- reference(*tensors, dev=None, **values) ----------------------------------------


def test_reference_equals_numpy():
    x, y = bf16(64), bf16(64, seed=1)
    np.testing.assert_array_equal(
        ScaleThenMul(1.5).reference(x, y), mul(scale(x, 1.5), y)
    )


@settings(max_examples=40, deadline=None)
@given(
    size=st.integers(1, 32).map(lambda n: 8 * n),
    factor=st.floats(-4, 4, allow_nan=False, width=32),
    seed=st.integers(0, 2**16),
)
def test_reference_equals_numpy_for_any_shape_and_factor(size, factor, seed):
    x, y = bf16(size, seed=seed), bf16(size, seed=seed + 1)
    out = ScaleThenMul(factor).reference(x, y)
    assert out.dtype == np.dtype(bfloat16)
    np.testing.assert_array_equal(out, mul(scale(x, factor), y))


def test_reference_outputs_are_numpy_arrays_and_tuples_for_several():
    class Two(iron.Graph):
        def body(self, x):
            return Scale.step(x, factor=2.0), Scale.step(x, factor=4.0)

    x = bf16(8)
    a, b = Two().reference(x)
    assert type(a) is np.ndarray and type(b) is np.ndarray
    np.testing.assert_array_equal(a, scale(x, 2.0))
    np.testing.assert_array_equal(b, scale(x, 4.0))


def test_reference_without_a_device_raises_runtime_error(monkeypatch):
    monkeypatch.delenv("IRON_DEVICE", raising=False)
    with iron.use_device(None), pytest.raises(RuntimeError, match="IRON_DEVICE"):
        ScaleThenMul().reference(bf16(8), bf16(8))


def test_reference_missing_an_input_raises_type_error():
    with pytest.raises(TypeError, match=r"ScaleThenMul: inputs \['y'\] missing"):
        ScaleThenMul().reference(bf16(8))
    with pytest.raises(TypeError, match=r"inputs \['y'\] missing"):
        ScaleThenMul().reference(bf16(8), None)


def test_reference_given_too_many_inputs_raises_type_error():
    with pytest.raises(TypeError, match=r"takes 2 inputs \(x, y\), got 3"):
        ScaleThenMul().reference(bf16(8), bf16(8), bf16(8))


def test_reference_given_an_unknown_value_raises_type_error():
    with pytest.raises(TypeError, match=r"\['m'\] are not per-call values; body takes"):
        Head().reference(bf16(8), m=2)
    with pytest.raises(TypeError, match=r"\['n'\] are not per-call values"):
        ScaleThenMul().reference(bf16(8), bf16(8), n=2)


def test_reference_missing_a_value_raises_type_error():
    with pytest.raises(TypeError, match=r"Row: per-call values \['position'\] missing"):
        Row().reference(bf16(4, 8))


@pytest.mark.parametrize("value", [True, 1.0, "1", None])
def test_a_per_call_value_is_an_int(value):
    with pytest.raises(TypeError, match="is not an int"):
        Row().reference(bf16(4, 8), position=value)


@pytest.mark.parametrize("value", [-1, 2**30])
def test_a_per_call_value_holds_30_bits(value):
    with pytest.raises(ValueError, match=r"outside \[0, 2\*\*30\)"):
        Row().reference(bf16(4, 8), position=value)


def test_numpy_integers_are_per_call_values():
    x = bf16(4, 8)
    np.testing.assert_array_equal(
        Row().reference(x, position=np.int64(3)), scale(x[3], 2.0)
    )


def test_a_value_indexing_outside_a_view_raises_index_error():
    x = bf16(4, 8)
    np.testing.assert_array_equal(Row().reference(x, position=3), scale(x[3], 2.0))
    with pytest.raises(IndexError) as info:
        Row().reference(x, position=4)
    assert str(info.value) == (
        "Row: position is 4 this call, outside [0, 4) for x[4, 8] bf16"
    )


def test_a_value_bounding_outside_a_view_raises_index_error():
    x = bf16(8)
    np.testing.assert_array_equal(Head().reference(x, n=8), scale(x, 3.0))
    with pytest.raises(IndexError, match=r"n is 9 this call, outside \[0, 9\)"):
        Head().reference(x, n=9)


@settings(max_examples=30, deadline=None)
@given(size=st.integers(1, 8).map(lambda n: 8 * n), data=st.data())
def test_a_per_call_bound_cuts_outputs_to_n_rows(size, data):
    n = data.draw(st.integers(0, size))
    x = bf16(size, seed=size)
    out = Head().reference(x, n=n)
    assert out.shape == (n,)
    np.testing.assert_array_equal(out, scale(x[:n], 3.0))


def test_a_bound_of_a_matrix_cuts_rows():
    class Rows(iron.Graph):
        def body(self, x, *, n: iron.Scratchpad[int]):
            return Scale.step(x[:n].reshape(-1), factor=2.0)

    x = bf16(4, 8)
    out = Rows().reference(x, n=2)
    np.testing.assert_array_equal(out, scale(x[:2].reshape(-1), 2.0))


class Where(iron.Graph):
    """Notes the device each recording runs on."""

    def __init__(self):
        self.devices: list[str] = []

    def body(self, x):
        self.devices.append(iron.get_current_device().name)
        return Scale.step(x)


def test_dev_picks_the_device_for_that_call_alone():
    graph, x = Where(), bf16(8)
    graph.reference(x, dev="npu1")
    graph.reference(x, dev=iron.NPU1)
    graph.reference(x)
    graph.reference(x, dev="npu2")
    assert graph.devices == ["npu1", "npu2"]
    assert iron.get_current_device() == iron.NPU2


def test_dev_needs_no_bound_device(monkeypatch):
    monkeypatch.delenv("IRON_DEVICE", raising=False)
    graph, x = Where(), bf16(8)
    with iron.use_device(None):
        np.testing.assert_array_equal(graph.reference(x, dev="npu1"), x)
        assert iron.get_current_device() is None
    assert graph.devices == ["npu1"]


def test_an_unknown_dev_raises_value_error():
    with pytest.raises(ValueError, match="unknown device 'npu9'"):
        Where().reference(bf16(8), dev="npu9")


# -- graphs in graphs: inline() and calls in a body --------------------------------


def _profile(**tunables) -> iron.Profile:
    profile = iron.Profile()
    profile.add(Scale, size=16, **tunables)
    return profile


class Inner(iron.Graph):
    """Holds a weight; its steps take tunables from its own profile."""

    def __init__(self, value: float = 2.0):
        self.w = iron.param(np.full(16, value, bfloat16))
        self.profile = _profile(tile_size=2)

    def block(self, x):
        return Scale.step(x, factor=0.5)

    def body(self, x):
        return Mul.step(self.block(x), self.w)


class Outer(iron.Graph):
    def __init__(self):
        self.inner = Inner()

    def body(self, x):
        a = self.inner.inline(self.inner.block, x)
        return Scale.step(a)


def test_inline_records_under_the_inner_graphs_profile():
    recording = Outer().record(x=(16,))
    first, second = recording.steps
    assert first.op.tile_size == 2  # Inner's profile
    assert second.op.tile_size == 16  # Outer has none: resolve(dev)'s default


def test_the_outer_profile_is_restored_after_inline():
    graph = Outer()
    graph.profile = _profile(tile_size=4, num_columns=1)
    first, second = graph.record(x=(16,)).steps
    assert (first.op.tile_size, first.op.num_columns) == (2, 8)
    assert (second.op.tile_size, second.op.num_columns) == (4, 1)


def test_inline_without_its_own_profile_records_under_the_outer_one():
    graph = Outer()
    graph.inner.profile = None
    graph.profile = _profile(tile_size=8)
    assert [s.op.tile_size for s in graph.record(x=(16,)).steps] == [8, 8]


def test_inline_outside_a_body_raises_type_error():
    inner = Inner()
    with pytest.raises(TypeError, match=r"Inner: inline\(\) records into a graph's"):
        inner.inline(inner.block, bf16(16))


class Calls(iron.Graph):
    def __init__(self):
        self.inner = Inner(3.0)

    def body(self, x):
        return Scale.step(self.inner(x), factor=2.0)


def test_a_graph_called_in_a_body_records_there():
    recording = Calls().record(x=(16,))
    assert [type(s.op).__name__ for s in recording.steps] == ["Scale", "Mul", "Scale"]
    assert recording.steps[0].op.tile_size == 2  # under Inner's profile
    assert list(recording.weights) == ["inner.w"]
    x = bf16(16)
    expected = scale(mul(scale(x, 0.5), np.full(16, 3.0, bfloat16)), 2.0)
    np.testing.assert_array_equal(Calls().reference(x), expected)


_shared = Inner(5.0)


def test_a_graph_held_elsewhere_records_its_weights_under_its_name():
    class Borrows(iron.Graph):
        def body(self, x):
            return _shared(x)

    recording = Borrows().record(x=(16,))
    assert list(recording.weights) == ["Inner.w"]
    x = bf16(16)
    np.testing.assert_array_equal(
        Borrows().reference(x), mul(scale(x, 0.5), np.full(16, 5.0, bfloat16))
    )


def test_two_graphs_of_one_class_held_elsewhere_keep_their_own_weights():
    """Both inline as ``Inner.w``; each must still read its own tensor."""
    first, second = Inner(2.0), Inner(3.0)

    class Both(iron.Graph):
        def body(self, x):
            return second(first(x))

    recording = Both().record(x=(16,))
    assert len(recording.weights) == 2
    assert {h.name for _, h in recording.weights.values()} == {"Inner.w", "Inner.w.1"}
    x = bf16(16)
    once = mul(scale(x, 0.5), np.full(16, 2.0, bfloat16))
    expected = mul(scale(once, 0.5), np.full(16, 3.0, bfloat16))
    np.testing.assert_array_equal(Both().reference(x), expected)


# -- profiles ------------------------------------------------------------------------


class One(iron.Graph):
    def body(self, x):
        return Scale.step(x, factor=1.5)


def test_a_profile_sets_open_tunables():
    graph = One()
    graph.profile = _profile(tile_size=4, num_columns=2)
    (step,) = graph.record(x=(16,)).steps
    assert (step.op.tile_size, step.op.num_columns) == (4, 2)


def test_a_profile_entry_for_another_shape_does_not_apply():
    graph = One()
    graph.profile = _profile(tile_size=4, num_columns=2)
    (step,) = graph.record(x=(32,)).steps
    assert (step.op.tile_size, step.op.num_columns) == (16, 8)


def test_the_calls_own_keyword_beats_the_profile():
    class Pinned(iron.Graph):
        def body(self, x):
            return Scale.step(x, num_columns=1)

    graph = Pinned()
    graph.profile = _profile(tile_size=4, num_columns=2)
    (step,) = graph.record(x=(16,)).steps
    assert (step.op.tile_size, step.op.num_columns) == (4, 1)


def test_a_profile_is_a_profile_a_directory_or_none():
    graph = One()
    with pytest.raises(TypeError, match=r"One\.profile is a Profile or a directory"):
        graph.profile = {"Scale": {}}
    assert graph.profile is None


@pytest.fixture
def catalog(monkeypatch):
    """Stand in for iron-operators' catalog with the test operators."""
    table = {"Scale": Scale, "Mul": Mul}
    monkeypatch.setattr(plugins, "catalog", lambda: table)
    return table


def test_a_profile_directory_holds_one_json_per_device(tmp_path, catalog):
    _profile(tile_size=4, num_columns=2).save(tmp_path / "npu2.json")
    (tmp_path / "npu1.json").write_text(
        '{"entries": [{"operator": "Scale", "size": 16, "num_columns": 1}]}'
    )
    graph = One()
    graph.profile = tmp_path
    (step,) = graph.record(x=(16,)).steps
    assert (step.op.tile_size, step.op.num_columns) == (4, 2)
    with iron.use_device("npu1"):
        (step,) = graph.record(x=(16,)).steps
    assert (step.op.tile_size, step.op.num_columns) == (16, 1)
    graph.profile = str(tmp_path)
    assert graph.record(x=(16,)).steps[0].op.tile_size == 4


def test_a_profile_directory_without_the_device_raises(tmp_path, catalog):
    _profile(tile_size=4).save(tmp_path / "npu2.json")
    graph = One()
    graph.profile = tmp_path
    with pytest.raises(FileNotFoundError, match="no profile for device 'npu1'"):
        graph.reference(bf16(16), dev="npu1")


def test_reference_records_under_the_profile():
    """The reference constructs the same operators the device would run."""
    tiles = []

    class Spy(iron.Graph):
        def body(self, x):
            out = Scale.step(x)
            tiles.append(context.graph_recorder.get().steps[-1].op.tile_size)
            return out

    graph = Spy()
    graph.profile = _profile(tile_size=4)
    graph.reference(bf16(16))
    assert tiles == [4]


# -- versions: compile and __call__ --------------------------------------------------


def test_compile_without_the_runtime_names_iron_runtime():
    if list(entry_points(group="iron.backends")):
        pytest.skip("a backend is installed here")
    with pytest.raises(ImportError) as info:
        ScaleThenMul().compile(x=(16,), y=(16,))
    assert isinstance(info.value, MissingDistributionError)
    assert "iron-runtime" in str(info.value)
    with pytest.raises(ImportError, match="iron-runtime"):
        ScaleThenMul()(bf16(16), bf16(16))


class FakeVersion:
    """What a backend's compile returns: called with the graph's tensors."""

    def __init__(self, graph, recording, device, options):
        self.graph, self.recording = graph, recording
        self.device, self.options = device, options
        self.calls: list[tuple] = []

    def __call__(self, *tensors, **values):
        self.calls.append((tensors, values))
        return self.graph.reference(*tensors, dev=self.device, **values)


class FakeBackend:
    def __init__(self):
        self.compiled: list[FakeVersion] = []

    def compile(self, graph, recording, *, full_elf, check, feeds):
        options = dict(full_elf=full_elf, check=check, feeds=feeds)
        version = FakeVersion(graph, recording, iron.get_current_device(), options)
        self.compiled.append(version)
        return version


@pytest.fixture
def backend(monkeypatch):
    fake = FakeBackend()
    monkeypatch.setattr(plugins, "backend", lambda: fake)
    return fake


def test_compile_returns_the_version_and_keeps_it_by_shape(backend):
    graph = ScaleThenMul()
    version = graph.compile(x=(16,), y=(16,), full_elf=True, check=True)
    assert version is backend.compiled[0]
    assert version.options == dict(full_elf=True, check=True, feeds=None)
    assert [h.shape for h in version.recording.inputs] == [(16,), (16,)]
    assert list(graph.versions.values()) == [version]


def test_compile_dev_is_for_that_compile_alone(backend):
    version = ScaleThenMul().compile(dev="npu1", x=(16,), y=(16,))
    assert version.device == iron.NPU1
    assert version.recording.device == iron.NPU1
    assert iron.get_current_device() == iron.NPU2


def test_a_call_compiles_on_first_use_and_logs_it(backend, caplog):
    graph = ScaleThenMul()
    x, y = bf16(16), bf16(16, seed=1)
    with caplog.at_level(logging.INFO, logger="iron.graph"):
        out = graph(x, y)
    np.testing.assert_array_equal(out, mul(scale(x, 2.0), y))
    assert len(backend.compiled) == 1
    (record,) = [r for r in caplog.records if r.name == "iron.graph"]
    assert "ScaleThenMul" in record.getMessage()
    assert "on first call" in record.getMessage()
    caplog.clear()
    graph(x, y)
    assert len(backend.compiled) == 1
    assert len(backend.compiled[0].calls) == 2
    assert not [r for r in caplog.records if r.name == "iron.graph"]


def test_a_call_finds_the_version_by_shape(backend):
    graph = ScaleThenMul()
    small = graph.compile(x=(16,), y=(16,))
    large = graph.compile(x=(32,), y=(32,))
    graph(bf16(32), bf16(32))
    graph(bf16(16), bf16(16))
    graph(bf16(32), bf16(32))
    assert (len(small.calls), len(large.calls)) == (1, 2)
    assert len(backend.compiled) == 2


def test_a_call_passes_per_call_values_to_the_version(backend):
    graph = Head()
    version = graph.compile(x=(8,))
    x = bf16(8)
    np.testing.assert_array_equal(graph(x, n=3), scale(x[:3], 3.0))
    assert version.calls[0][1] == {"n": 3}


def test_once_a_version_exists_an_uncompiled_shape_raises(backend):
    graph = ScaleThenMul()
    graph.compile(x=(16,), y=(16,))
    with pytest.raises(ValueError) as info:
        graph(bf16(32), bf16(32))
    assert str(info.value).startswith(
        "ScaleThenMul: no version for shapes {x: [32] bfloat16, y: [32] bfloat16}; "
        "compiled: {x: [16] bfloat16, y: [16] bfloat16}. Compile every shape "
        "before the first call"
    )
    assert len(backend.compiled) == 1


def test_an_uncompiled_dtype_names_the_dtypes(backend):
    graph = ScaleThenMul()
    graph.compile(x=(16,), y=(16,))
    graph.compile(x=(8,), y=(8,))
    with pytest.raises(ValueError) as info:
        graph(np.zeros(16, np.float32), np.zeros(16, np.float32))
    assert (
        "no version for shapes {x: [16] float32, y: [16] float32}; compiled: "
        "{x: [16] bfloat16, y: [16] bfloat16}; {x: [8] bfloat16, y: [8] bfloat16}."
    ) in str(info.value)


def test_a_call_checks_its_inputs_first(backend):
    with pytest.raises(TypeError, match=r"inputs \['y'\] missing"):
        ScaleThenMul()(bf16(16))
    assert backend.compiled == []


def test_a_call_in_a_body_records_there_rather_than_compiling(backend):
    recording = Calls().record(x=(16,))
    assert len(recording.steps) == 3
    assert backend.compiled == []


def test_release_releases_every_version(backend):
    released = []
    graph = ScaleThenMul()
    for n in (16, 32):
        version = graph.compile(x=(n,), y=(n,))
        version.release = lambda n=n: released.append(n)
    graph.release()
    assert released == [16, 32]


# -- carried values -------------------------------------------------------------------


class Counter(iron.Graph):
    """Scales row ``position`` and carries ``position + 1``."""

    def body(self, x, *, position: iron.Carried[int]):
        return Scale.step(x[position]), iron.carry(position=position + 1)


def test_a_carried_value_is_returned_last_with_its_next_value():
    recording = Counter().record(x=(4, 8))
    assert [v.kind.value for v in recording.values] == ["carried"]
    assert str(recording.carry["position"]) == "position + 1"


def test_reference_returns_the_outputs_then_a_carry_of_ints():
    x = bf16(4, 8)
    out, carry = Counter().reference(x, position=2)
    np.testing.assert_array_equal(out, x[2])
    assert isinstance(carry, iron.Carry)
    assert carry == {"position": 3}
    assert carry.position == 3
    assert type(carry["position"]) is int


def test_a_carry_alone_is_returned_alone():
    class Only(iron.Graph):
        def body(self, x, *, position: iron.Carried[int]):
            return iron.carry(position=iron.clamp(position + 2, hi=5))

    assert Only().record(x=(8,)).outputs == []
    assert Only().reference(bf16(8), position=1) == {"position": 3}
    assert Only().reference(bf16(8), position=4) == {"position": 5}


def test_a_carried_value_may_be_carried_unchanged_or_set():
    class Fixed(iron.Graph):
        def body(self, x, *, a: iron.Carried[int], b: iron.Carried[int]):
            return x, iron.carry(a=a, b=7)

    _, carry = Fixed().reference(bf16(8), a=3, b=1)
    assert carry == {"a": 3, "b": 7}


def test_a_body_with_carried_values_must_return_a_carry():
    class Forgot(iron.Graph):
        def body(self, x, *, position: iron.Carried[int]):
            return Scale.step(x)

    with pytest.raises(TypeError) as info:
        Forgot().record(x=(8,))
    assert str(info.value) == (
        "Forgot.body takes carried values ['position'] and must return their "
        "next values last: iron.carry(position=...)"
    )


def test_the_carry_comes_last():
    class First(iron.Graph):
        def body(self, x, *, position: iron.Carried[int]):
            return iron.carry(position=position + 1), Scale.step(x)

    with pytest.raises(TypeError, match=r"returns iron\.carry\(\.\.\.\) last"):
        First().record(x=(8,))


def test_the_carry_names_exactly_the_carried_values():
    class Wrong(iron.Graph):
        def body(self, x, *, position: iron.Carried[int], n: iron.Scratchpad[int] = 1):
            return x, iron.carry(n=n + 1)

    with pytest.raises(TypeError) as info:
        Wrong().record(x=(8,))
    assert str(info.value) == (
        "Wrong: iron.carry gives ['n'], but body carries ['position']; ['n'] are "
        "not iron.Carried values; ['position'] have no next value"
    )


def test_a_carry_without_carried_values_raises():
    class Stray(iron.Graph):
        def body(self, x):
            return x, iron.carry(token=1)

    with pytest.raises(TypeError, match=r"\['token'\] are not iron\.Carried values"):
        Stray().record(x=(8,))


class Sampler(iron.Graph):
    """Carries the index of x's greatest element: a sampled token."""

    def body(self, x, *, token: iron.Carried[int]):
        return Scale.step(x), iron.carry(token=ArgMax.step(x))


def test_a_carried_handle_is_read_as_an_int():
    x = np.array([0, 3, 9, 1, -2, 4, 4, 0], dtype=bfloat16)
    out, carry = Sampler().reference(x, token=0)
    np.testing.assert_array_equal(out, x)
    assert carry == {"token": 2}
    recording = Sampler().record(x=(8,))
    assert recording.carry["token"] is recording.steps[1].outputs[0]


@pytest.mark.parametrize("what", ["bf16", "two"])
def test_a_carried_handle_is_one_int32_element(what):
    class Bad(iron.Graph):
        def body(self, x, ids, *, token: iron.Carried[int]):
            return x, iron.carry(token=Scale.step(x) if what == "bf16" else ids)

    with pytest.raises(TypeError, match="a carried handle is one int32 element"):
        Bad().record(x=(8,), ids=((2,), np.int32))


@pytest.mark.parametrize("value", [True, 1.5, "1", None])
def test_a_next_value_is_an_expression_an_int_or_a_handle(value):
    class Bad(iron.Graph):
        def body(self, x, *, position: iron.Carried[int]):
            return x, iron.carry(position=value)

    with pytest.raises(TypeError, match="a next value is an expression of per-call"):
        Bad().record(x=(8,))
