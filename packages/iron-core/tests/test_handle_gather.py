"""Gathers of whole rows, and writing through views back into a buffer.

Rows are gathered by fixed ids (numpy fancy indexing) or by an int32 ids
handle read at read time; write() through any view, transpose or gather round
trips with read() like numpy assignment.
"""

from __future__ import annotations

from math import prod

import numpy as np
import pytest
from handles_for_tests import flat, forward_views, n, pos, shapes, whole
from hypothesis import given, settings
from hypothesis import strategies as st
from ml_dtypes import bfloat16

from iron.core.access import indices, read, write
from iron.core.handle import Gather
from iron.core.recorder import Recorder

# ----------------------------------------------------------------- gathers


@given(st.data())
def test_gather_by_fixed_ids_equals_numpy_fancy_indexing(data):
    shape = data.draw(shapes)
    ids = data.draw(st.lists(st.integers(0, shape[0] - 1), min_size=1, max_size=6))
    as_array = data.draw(st.booleans())
    key = np.array(ids, dtype=np.int32) if as_array else ids
    g = whole(shape)[key]
    assert isinstance(g.layout, Gather) and g.layout.ids == tuple(ids)
    assert g.shape == flat(shape)[ids].shape
    assert np.array_equal(indices(g, {}, {}), flat(shape)[ids])
    a = np.arange(prod(shape), dtype=np.float32).reshape(shape) * 3
    assert np.array_equal(read(g, {}, {"x": a}), a[ids])


def test_gather_of_a_contiguous_slice_keeps_its_offset():
    g = whole((5, 3))[2:][[2, 0]]
    assert np.array_equal(indices(g, {}, {}), flat((5, 3))[2:][[2, 0]])


@pytest.mark.parametrize("ids", [[0, 4], [-1], [7, 0], [[0, 1]], [0.0, 1.0]])
def test_bad_fixed_ids_raise_index_error(ids):
    with pytest.raises(IndexError):
        whole((4, 6))[ids]


def test_gather_takes_whole_rows_only():
    with pytest.raises(IndexError, match="whole leading-axis rows"):
        whole((4, 6))[[0, 1], 2]


def test_gather_by_a_handle_reads_ids_at_read_time():
    h = whole((4, 6))
    ids = whole((3,), np.int32, "ids")
    g = h[ids]
    assert g.shape == (3, 6) and g.valid == {}
    assert isinstance(g.layout, Gather) and g.layout.ids is ids
    a = np.arange(24.0).reshape(4, 6)
    buffers = {"x": a, "ids": np.array([2, 0, 3], np.int32)}
    assert np.array_equal(read(g, {}, buffers), a[[2, 0, 3]])
    buffers["ids"][:] = [1, 1, 0]
    assert np.array_equal(read(g, {}, buffers), a[[1, 1, 0]])
    buffers["ids"][:] = [1, 4, 0]
    with pytest.raises(IndexError):
        read(g, {}, buffers)


def test_gather_by_a_bounded_handle_is_bounded_the_same():
    h = whole((4, 6))
    ids = whole((3,), np.int32, "ids")
    g = h[ids[:n]]
    assert g.shape == (3, 6) and g.valid == {0: n}
    a = np.arange(24.0).reshape(4, 6)
    buffers = {"x": a, "ids": np.array([3, 1, 2], np.int32)}
    assert np.array_equal(read(g, {"n": 2}, buffers), a[[3, 1]])
    assert read(g, {"n": 0}, buffers).shape == (0, 6)


def test_gather_by_a_handle_inside_a_recording_notes_the_address():
    h = whole((4, 6))
    ids = whole((3,), np.int32, "ids")
    with Recorder("g", None, {}) as rec:
        h[ids]
    assert rec.addresses == {"ids": ("x", "ids", 4)}


def test_gather_refuses_what_it_cannot_take():
    h = whole((4, 6))
    with pytest.raises(TypeError, match="1-D integer"):
        h[whole((3,), np.float32, "f")]
    with pytest.raises(TypeError, match="1-D integer"):
        h[whole((3, 1), np.int32, "ids")]
    with pytest.raises(ValueError, match="bounded"):
        h[:n][[0]]
    with pytest.raises(ValueError, match="per-call"):
        whole((3, 4, 2))[pos][[0]]
    with pytest.raises(ValueError, match="cannot gather rows of a view"):
        h.T[[0]]
    with pytest.raises(IndexError, match="scalar"):
        whole(())[[0]]
    with pytest.raises(ValueError, match="cannot index a view"):
        h[[0, 1]][0]


# ------------------------------------------------------------ write and read


@settings(max_examples=300)
@given(forward_views(), st.sampled_from([np.float32, np.int32, bfloat16]))
def test_write_then_read_round_trips_like_numpy_assignment(case, dtype):
    shape, key = case
    v = whole(shape, dtype)[key]
    buffers = {"x": np.zeros(shape, dtype)}
    expect = np.zeros(shape, dtype)
    values = (np.arange(v.elements) + 1).astype(dtype).reshape(v.shape)
    write(v, {}, buffers, values)
    expect[key] = values
    assert np.array_equal(buffers["x"], expect)
    assert np.array_equal(read(v, {}, buffers), expect[key])
    assert np.array_equal(read(v, {}, buffers), values)


@given(st.data())
def test_write_through_transposes_and_gathers(data):
    shape = data.draw(shapes)
    axes = tuple(data.draw(st.permutations(range(len(shape)))))
    buffers = {"x": np.zeros(shape, np.float32)}
    t = whole(shape).transpose(axes)
    values = np.arange(1, t.elements + 1, dtype=np.float32).reshape(t.shape)
    write(t, {}, buffers, values)
    assert np.array_equal(buffers["x"], values.transpose(np.argsort(axes)))
    ids = data.draw(st.lists(st.integers(0, shape[0] - 1), min_size=1, unique=True))
    g = whole(shape)[ids]
    rows = -np.ones(g.shape, np.float32)
    write(g, {}, buffers, rows)
    expect = values.transpose(np.argsort(axes)).copy()
    expect[ids] = rows
    assert np.array_equal(buffers["x"], expect)


def test_write_through_a_bounded_view_writes_its_rows():
    h = whole((4, 6))[:n]
    buffers = {"x": np.zeros((4, 6))}
    write(h, {"n": 2}, buffers, np.ones((2, 6)))
    assert buffers["x"].sum() == 12 and buffers["x"][:2].all()
    with pytest.raises(ValueError, match="takes shape"):
        write(h, {"n": 2}, buffers, np.ones((4, 6)))


def test_write_through_a_per_call_view():
    buffers = {"x": np.zeros((4, 6))}
    write(whole((4, 6))[:, pos], {"pos": 5}, buffers, np.arange(1.0, 5.0))
    expect = np.zeros((4, 6))
    expect[:, 5] = np.arange(1.0, 5.0)
    assert np.array_equal(buffers["x"], expect)
