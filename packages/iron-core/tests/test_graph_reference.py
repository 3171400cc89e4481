"""Graph.reference(*tensors, dev=None, **values): the graph run by numpy.

Results equal numpy's rounding for any shape; inputs and per-call values are
checked (count, int, 30 bits, inside their views); dev= picks the device for
that call alone.
"""

from __future__ import annotations

import numpy as np
import pytest
from graphs_for_tests import Head, Row, ScaleThenMul, bf16, mul, scale
from hypothesis import given, settings
from hypothesis import strategies as st
from ml_dtypes import bfloat16
from operators_for_tests import Scale

import iron

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


def test_reference_without_a_device_takes_the_default(emulated_default):
    x, y = bf16(8), bf16(8)
    with iron.use_device(None):
        got = ScaleThenMul().reference(x, y)
    with iron.use_device("npu2"):  # the CLI's default where no NPU is present
        np.testing.assert_array_equal(got, ScaleThenMul().reference(x, y))


def test_reference_without_a_device_or_runtime_raises_runtime_error(
    monkeypatch, no_runtime
):
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
