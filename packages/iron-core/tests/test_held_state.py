"""iron.state and out=: buffers a graph keeps between calls, and writing them.

A state is host zeros until a step writes it through out= (at a per-call row,
whole, or only the rows a bound leaves valid); out= into anything else, of
another shape or with too many handles is refused.
"""

from __future__ import annotations

import numpy as np
import pytest
from held_for_tests import bf16
from hypothesis import given, settings
from hypothesis import strategies as st
from ml_dtypes import bfloat16
from operators_for_tests import Copy, Copy2D, Mul, Scale

import iron
from iron.core.held import State

# -- state() -------------------------------------------------------------------------


def test_a_state_is_zeros_on_the_host_until_written():
    s = iron.state(8)
    assert isinstance(s, State)
    assert (s.shape, s.dtype, s.name) == ((8,), np.dtype(bfloat16), None)
    np.testing.assert_array_equal(s.host, np.zeros(8, bfloat16))
    s = iron.state((2, 3), np.int32, name="kv")
    assert (s.shape, s.dtype, s.name) == ((2, 3), np.dtype(np.int32), "kv")
    assert repr(s) == "State 'kv'([2, 3], int32)"
    assert repr(iron.state(8)) == "State([8], bfloat16)"
    assert iron.state(np.int64(8)).shape == (8,)
    assert iron.state([np.int64(2), 3]).shape == (2, 3)


class Cache(iron.Graph):
    """Writes x into row ``position`` of a state; returns that row, scaled."""

    def __init__(self, rows: int = 4):
        self.cache = iron.state((rows, 8))

    def body(self, x, *, position: iron.Scratchpad[int]):
        row = Copy.step(x, out=self.cache[position])
        return Scale.step(row, factor=2.0)


def test_a_step_writes_a_state_at_a_per_call_position():
    graph = Cache()
    recording = graph.record(x=(8,))
    (copy, _) = recording.steps
    (out,) = copy.outputs
    assert out.buffer.role == "state" and out.name == "cache"
    rows = bf16(4, 8)
    for position in (2, 0, 3):
        out = graph.reference(rows[position], position=position)
        np.testing.assert_array_equal(
            out, (2 * rows[position].astype(np.float32)).astype(bfloat16)
        )
    expected = rows.copy()
    expected[1] = 0
    np.testing.assert_array_equal(graph.cache.host, expected)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 16), data=st.data())
def test_a_state_position_writes_that_row_or_raises_index_error(rows, data):
    position = data.draw(st.integers(0, rows + 3))
    graph, x = Cache(rows), bf16(8, seed=rows)
    if position >= rows:
        with pytest.raises(IndexError, match="outside"):
            graph.reference(x, position=position)
        np.testing.assert_array_equal(graph.cache.host, np.zeros((rows, 8), bfloat16))
        return
    graph.reference(x, position=position)
    np.testing.assert_array_equal(graph.cache.host[position], x)
    assert not np.delete(graph.cache.host, position, axis=0).any()


def test_out_into_a_non_state_raises_value_error():
    class IntoInput(iron.Graph):
        def body(self, x, y):
            return Copy.step(x, out=y)

    with pytest.raises(ValueError) as info:
        IntoInput().record(x=(8,), y=(8,))
    assert str(info.value) == (
        "Copy.step(out=y[8] bf16): a step writes into a state or a view of one; "
        "other buffers are written by the step that makes them"
    )


def test_out_into_a_weight_raises_value_error():
    class IntoWeight(iron.Graph):
        def __init__(self):
            self.w = iron.param(bf16(8))

        def body(self, x):
            return Copy.step(x, out=self.w)

    with pytest.raises(ValueError, match="a step writes into a state or a view of one"):
        IntoWeight().record(x=(8,))


def test_out_of_another_shape_raises_value_error():
    class Short(iron.Graph):
        def __init__(self):
            self.cache = iron.state((4, 8))

        def body(self, x, *, position: iron.Scratchpad[int]):
            return Copy.step(x, out=self.cache[position])

    with pytest.raises(ValueError, match=r"its out is \[4\] bfloat16"):
        Short().record(x=(4,))


def test_out_gives_one_handle_per_output():
    class Two(iron.Graph):
        def __init__(self):
            self.a, self.b = iron.state(8), iron.state(8)

        def body(self, x):
            return Copy.step(x, out=(self.a, self.b))

    with pytest.raises(TypeError, match=r"Copy\.step writes 1 outputs; out= gives 2"):
        Two().record(x=(8,))


def test_a_whole_state_is_written_and_read_across_calls():
    class Accumulate(iron.Graph):
        def __init__(self):
            self.total = iron.state(8)

        def body(self, x):
            return Copy.step(Mul.step(self.total, x), out=self.total)

    graph = Accumulate()
    graph.total.host[...] = 1
    x = np.full(8, 2, bfloat16)
    for k in range(1, 4):
        np.testing.assert_array_equal(graph.reference(x), np.full(8, 2**k, bfloat16))


def test_a_state_returned_as_an_output_is_a_copy():
    class Whole(iron.Graph):
        def __init__(self):
            self.st = iron.state(8)

        def body(self, x):
            Copy.step(x, out=self.st)
            return Copy.step(self.st), self.st[:]

    graph, x = Whole(), bf16(8)
    copied, state = graph.reference(x)
    np.testing.assert_array_equal(copied, x)
    np.testing.assert_array_equal(state, x)
    assert not np.shares_memory(state, graph.st.host)
    graph.reference(np.zeros(8, bfloat16))
    np.testing.assert_array_equal(state, x)


def test_indexing_a_state_outside_a_body_raises_type_error():
    with pytest.raises(TypeError, match="only while a graph's body is recorded"):
        Cache().cache[0]


class WriteRows(iron.Graph):
    """Writes the first n rows of x into a state; the rest keep their values."""

    def __init__(self):
        self.store = iron.state((4, 3), bfloat16)

    def body(self, x, *, n: iron.Scratchpad[int]):
        Copy2D.step(x[:n], out=self.store[:, :])
        return Copy2D.step(self.store[:, :])


def test_out_takes_the_bound_of_the_rows_the_step_writes():
    graph = WriteRows()
    recording = graph.record(x=(4, 3))
    written = recording.steps[0].outputs[0]
    assert str(written.valid[0]) == "n"
    graph.store.host[:] = -1
    out = graph.reference(np.ones((4, 3), bfloat16), n=2)
    np.testing.assert_array_equal(out[:2], 1)
    np.testing.assert_array_equal(out[2:], -1)  # rows past n untouched
