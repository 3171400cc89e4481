"""iron.weight tables and held params indexed in a body: gathering rows.

A weight gathers whole rows by fixed ids or by an int32 handle a step made;
ids outside the table, a float handle, a partial row or a weight the graph
does not hold are refused. A held param indexed by a per-call value is a view
of its resident handle.
"""

from __future__ import annotations

import numpy as np
import pytest
from held_for_tests import bf16
from ml_dtypes import bfloat16
from operators_for_tests import ArgMax, Copy, Copy2D

import iron
from iron.core.held import Weight

# -- weight(table)[ids] ----------------------------------------------------------------


def test_a_weight_is_a_table():
    table = bf16(4, 8)
    w = iron.weight(table)
    assert isinstance(w, Weight)
    assert w.array is table
    assert (w.shape, w.dtype) == ((4, 8), np.dtype(bfloat16))
    assert repr(w) == "Weight([4, 8], bfloat16)"


class Lookup(iron.Graph):
    def __init__(self, ids=None):
        self.table = iron.weight(np.arange(32).reshape(4, 8).astype(bfloat16))
        self._ids = ids  # private: a held array would be refused

    def body(self, x):
        ids = ArgMax.step(x) if self._ids is None else self._ids
        return Copy2D.step(self.table[ids])


@pytest.mark.parametrize("ids", [[2, 0, 2], np.array([2, 0, 2], np.int64)])
def test_a_weight_gathers_rows_by_fixed_ids(ids):
    graph = Lookup(ids)
    out = graph.reference(bf16(8))
    np.testing.assert_array_equal(out, graph.table.array[[2, 0, 2]])
    assert graph.record(x=(8,)).addresses == {}


def test_a_weight_gathers_rows_by_an_int32_handle_a_step_made():
    graph = Lookup()
    x = np.zeros(8, bfloat16)
    for token in (3, 1):
        x[:] = 0
        x[token] = 1
        np.testing.assert_array_equal(graph.reference(x), graph.table.array[[token]])
    recording = graph.record(x=(8,))
    assert recording.addresses == {"argmax0": ("table", "argmax0", 4)}


def test_fixed_ids_outside_the_table_raise_index_error():
    with pytest.raises(IndexError, match=r"row ids \[4\] outside 4 rows"):
        Lookup([4]).record(x=(8,))
    with pytest.raises(IndexError, match="row ids must be 1-D integers"):
        Lookup(np.array([[0]])).record(x=(8,))


def test_rows_are_gathered_by_an_integer_handle_only():
    class ByFloat(iron.Graph):
        def __init__(self):
            self.table = iron.weight(bf16(4, 8))

        def body(self, x):
            return Copy2D.step(self.table[x])

    with pytest.raises(TypeError, match="gathered by a 1-D integer handle"):
        ByFloat().record(x=(2,))


def test_a_gather_takes_whole_rows():
    class Further(iron.Graph):
        def __init__(self):
            self.table = iron.weight(bf16(4, 8))

        def body(self, x):
            return Copy2D.step(self.table[[0, 1], :4])

    with pytest.raises(IndexError, match="a gather picks whole leading-axis rows"):
        Further().record(x=(8,))


def test_a_weight_the_graph_does_not_hold_is_refused():
    table = iron.weight(bf16(4, 8))

    class Closure(iron.Graph):
        def body(self, x):
            return Copy2D.step(table[[0]])

    with pytest.raises(TypeError, match="is a Weight the graph does not hold"):
        Closure().record(x=(8,))


def test_indexing_a_weight_outside_a_body_raises_type_error():
    with pytest.raises(TypeError, match="only while a graph's body is recorded"):
        Lookup().table[[0]]


# -- a held param indexed in a body; out= writes only the bounded rows -------------


class EmbedRow(iron.Graph):
    """``self.table[token]``: a held param indexed by a per-call value."""

    def __init__(self):
        self.table = iron.param(
            np.arange(32, dtype=np.float32).reshape(8, 4).astype(bfloat16)
        )

    def body(self, *, token: iron.Scratchpad[int]):
        return Copy.step(self.table[token])


def test_a_held_param_indexed_in_a_body_is_a_view_of_its_resident_handle():
    graph = EmbedRow()
    recording = graph.record()
    (step,) = recording.steps
    assert step.inputs[0].name == "table" and step.inputs[0].buffer.role == "weight"
    for token in (0, 5, 7):
        np.testing.assert_array_equal(graph.reference(token=token), graph.table[token])
    # outside a body it indexes as the array it is
    assert isinstance(graph.table[1], np.ndarray)
    with pytest.raises(IndexError, match="outside"):
        graph.reference(token=8)
