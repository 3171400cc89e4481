"""Graphs in graphs: inline() and a graph called inside another's body.

An inlined graph's steps take tunables from its own profile, and the outer
profile comes back after; a graph held elsewhere records its weights under its
class name, one tensor each.
"""

from __future__ import annotations

import numpy as np
import pytest
from graphs_for_tests import Calls, Inner, bf16, mul, scale, scale_profile
from ml_dtypes import bfloat16
from operators_for_tests import Scale

import iron

# -- graphs in graphs: inline() and calls in a body --------------------------------


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
    graph.profile = scale_profile(tile_size=4, num_columns=1)
    first, second = graph.record(x=(16,)).steps
    assert (first.op.tile_size, first.op.num_columns) == (2, 8)
    assert (second.op.tile_size, second.op.num_columns) == (4, 1)


def test_inline_without_its_own_profile_records_under_the_outer_one():
    graph = Outer()
    graph.inner.profile = None
    graph.profile = scale_profile(tile_size=8)
    assert [s.op.tile_size for s in graph.record(x=(16,)).steps] == [8, 8]


def test_inline_outside_a_body_raises_type_error():
    inner = Inner()
    with pytest.raises(TypeError, match=r"Inner: inline\(\) records into a graph's"):
        inner.inline(inner.block, bf16(16))


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
