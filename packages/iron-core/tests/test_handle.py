"""Tests for iron.core.handle: views, layouts, and reading them on the host."""

from __future__ import annotations

import dataclasses
from math import prod

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from ml_dtypes import bfloat16
from numpy.lib.stride_tricks import as_strided

import iron
from iron.core.access import bounded, indices, read, write
from iron.core.device import as_device
from iron.core.dma import shim_descriptor_fits
from iron.core.handle import (
    Buffer,
    BufferRef,
    Dense,
    Gather,
    Handle,
    Strided,
)
from iron.core.percall import Affine, PerCall, clamp
from iron.core.recorder import Recorder
from iron.core.tap import TensorAccessPattern as TAP

pos = PerCall("pos")
n = PerCall("n")
m = PerCall("m")


def whole(shape, dtype=np.float32, name="x", role="input") -> Handle:
    return Handle.whole(shape, dtype, name, role)


def flat(shape) -> np.ndarray:
    return np.arange(prod(shape), dtype=np.int64).reshape(shape)


def consecutive(a: np.ndarray) -> bool:
    r = a.reshape(-1)
    return r.size <= 1 or bool(np.all(np.diff(r) == 1))


# ------------------------------------------------------------ strategies

shapes = st.lists(st.integers(1, 5), min_size=1, max_size=4).map(tuple)


@st.composite
def basic_keys(draw, shape):
    """A numpy basic index for ``shape``, and the (axis, part) of each part.

    Ints (negative too), slices with any step, at most one Ellipsis (standing
    for a run of axes) and None anywhere; maybe not a tuple when one part.
    """
    parts = []
    for axis, size in enumerate(shape):
        kinds = ["int", "slice", "slice", "full"] if size else ["slice", "full"]
        kind = draw(st.sampled_from(kinds))
        if kind == "int":
            part = draw(st.integers(-size, size - 1))
        elif kind == "full":
            part = slice(None)
        else:
            end = st.none() | st.integers(-size - 2, size + 2)
            step = draw(st.none() | st.sampled_from([1, 2, 3, -1, -2, -3]))
            part = slice(draw(end), draw(end), step)
        parts.append((axis, part))
    items: list = list(parts)
    if draw(st.booleans()):
        # ... stands for a run of axes; the parts after it align to the end
        i = draw(st.integers(0, len(items)))
        j = draw(st.integers(i, len(items)))
        items[i:j] = [(None, Ellipsis)]
    else:
        # trailing axes left out are whole
        items = items[: draw(st.integers(0, len(items)))]
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), (None, None))
    key = tuple(part for _, part in items)
    kept = [(axis, part) for axis, part in items if axis is not None]
    if len(key) == 1 and draw(st.booleans()):
        key = key[0]
    return key, kept


def walks_backwards(shape, kept) -> bool:
    """Whether a kept slice steps back over more than one element."""
    for axis, part in kept:
        if isinstance(part, slice) and (part.step or 1) < 0:
            if len(range(*part.indices(shape[axis]))) > 1:
                return True
    return False


@st.composite
def shapes_and_keys(draw):
    shape = draw(shapes)
    key, kept = draw(basic_keys(shape))
    return shape, key, kept


@st.composite
def forward_views(draw):
    """A shape and a basic index numpy and handles both take."""
    shape, key, kept = draw(shapes_and_keys())
    assume(not walks_backwards(shape, kept))
    return shape, key


# ------------------------------------------------------------ whole handles


def test_whole():
    h = whole((4, 6))
    assert h.shape == (4, 6) and h.ndim == 2 and h.elements == 24
    assert h.nbytes == 96 and h.name == "x"
    assert h.dtype == np.dtype(np.float32)
    assert isinstance(h.buffer, Buffer) and h.buffer.role == "input"
    assert h.buffer.shape == (4, 6) and h.buffer.nbytes == 96
    assert h.layout == Dense(0) and h.valid == {}
    assert h.is_whole and not h.is_view
    assert np.array_equal(indices(h, {}, {}), flat((4, 6)))


def test_whole_takes_numpy_ints_and_checks_the_role():
    h = whole(np.array([3, 2]), bfloat16)
    assert h.shape == (3, 2) and all(type(s) is int for s in h.shape)
    assert h.nbytes == 12
    with pytest.raises(ValueError, match="role"):
        Handle.whole((2,), np.float32, "x", "scratch")


def test_repr_is_readable():
    assert repr(whole((2048,), bfloat16)) == "x[2048] bf16"
    assert repr(whole((4, 6))) == "x[4, 6] f32"
    assert repr(whole((3,), np.int32, "ids")) == "ids[3] i32"
    h = whole((4, 6))
    assert repr(h[:n]) == "x[4 (valid n), 6] f32 dense"
    assert repr(h[1:3]) == "x[2, 6] f32 dense"
    assert repr(h.T) == "x[6, 4] f32 strided"
    assert repr(h[[1, 0]]) == "x[2, 6] f32 gather"
    assert repr(h[:, : n - 1]) == "x[4, 6 (valid n - 1)] f32 dense"
    assert "dense" in repr(h[pos])  # a per-call view is never whole


def test_a_handle_has_no_truth_value():
    h = whole((4,))
    with pytest.raises(TypeError, match="if or while"):
        if h:
            pass
    with pytest.raises(TypeError):
        bool(h[1:])


def test_numpy_cannot_compute_on_a_handle():
    h = whole((4,))
    with pytest.raises(TypeError, match="step"):
        np.asarray(h)
    with pytest.raises(TypeError):
        np.array(h[:2])


def test_handles_compare_by_identity():
    h = whole((4,))
    assert h == h and h != whole((4,))
    assert len({h, h}) == 1


# ----------------------------------------------------- views by basic indexing


@settings(max_examples=500)
@given(shapes_and_keys())
def test_view_indices_equal_numpys(case):
    shape, key, kept = case
    expect = flat(shape)[key]
    h = whole(shape)
    if walks_backwards(shape, kept):
        with pytest.raises(ValueError, match="forward"):
            h[key]
        return
    v = h[key]
    assert v.shape == expect.shape
    assert np.array_equal(indices(v, {}, {}), expect)
    assert v.buffer is h.buffer and v.valid == {}


@settings(max_examples=500)
@given(forward_views())
def test_view_is_dense_exactly_when_contiguous(case):
    shape, key = case
    expect = flat(shape)[key]
    v = whole(shape)[key]
    assert isinstance(v.layout, Dense) == consecutive(expect)
    assert isinstance(v.layout, (Dense, Strided))
    assert v.is_view == (not consecutive(expect))


@settings(max_examples=300)
@given(forward_views(), st.sampled_from([np.float32, bfloat16, np.int32, np.int8]))
def test_ref_is_a_byte_range_for_a_contiguous_run(case, dtype):
    shape, key = case
    expect = flat(shape)[key]
    v = whole(shape, dtype)[key]
    itemsize = np.dtype(dtype).itemsize
    ref = v.ref()
    assert ref.name == "x"
    if consecutive(expect):
        start = int(expect.reshape(-1)[0]) if expect.size else v.layout.offset
        assert ref == BufferRef("x", start * itemsize, expect.size * itemsize)
    else:
        assert ref == BufferRef("x", None, None)


def test_ref_examples():
    h = whole((4, 6), bfloat16)
    assert h.ref() == BufferRef("x", 0, 48)
    assert h[1:3].ref() == BufferRef("x", 6 * 2, 12 * 2)
    assert h[2, 1:5].ref() == BufferRef("x", 13 * 2, 4 * 2)
    assert h[:, 1].ref() == BufferRef("x")
    assert h.T.ref() == BufferRef("x")
    assert h[pos].ref() == BufferRef("x")  # a per-call offset: the whole buffer


@settings(max_examples=300)
@given(st.data())
def test_chained_views_equal_numpys(data):
    shape, a = data.draw(forward_views())
    first = whole(shape)[a]
    expect = flat(shape)[a]
    b, kept = data.draw(basic_keys(expect.shape))
    assume(not walks_backwards(expect.shape, kept))
    if not isinstance(first.layout, Dense):
        with pytest.raises(ValueError, match="cannot index a view"):
            first[b]
        return
    v = first[b]
    assert np.array_equal(indices(v, {}, {}), expect[b])
    assert isinstance(v.layout, Dense) == consecutive(expect[b])


def test_index_examples():
    h = whole((2, 3, 4))
    a = flat((2, 3, 4))
    for key in [
        1,
        -1,
        (0, 2),
        (..., 1),
        (1, ..., 2),
        (None, 1),
        (..., None),
        (slice(None), None, 2),
        (slice(None, None, 2), slice(1, None, 2)),
        (0, slice(2, 1, -1), 3),
        (slice(None), slice(5, 0, -3)),
        (slice(None), 1, slice(3, 2, -1)),
        (),
        ...,
    ]:
        assert np.array_equal(indices(h[key], {}, {}), a[key]), key


def test_empty_views_are_empty_and_dense():
    h = whole((4, 6))
    for key in [(slice(0, 0),), (slice(None), slice(3, 3)), (slice(5, None),)]:
        v = h[key]
        assert v.shape == flat((4, 6))[key].shape and v.elements == 0
        assert isinstance(v.layout, Dense)
        assert read(v, {}, {"x": np.zeros((4, 6))}).shape == v.shape


def test_negative_steps_over_more_than_one_element_raise():
    h = whole((4, 6))
    with pytest.raises(ValueError, match="forward"):
        h[::-1]
    with pytest.raises(ValueError, match="forward"):
        h[:, 4:1:-2]
    v = h[3:2:-1, ::2]  # one element walked back: no step at all
    assert np.array_equal(indices(v, {}, {}), flat((4, 6))[3:2:-1, ::2])


@pytest.mark.parametrize(
    "key, error",
    [
        ((0, 0, 0), IndexError),
        ((..., ...), IndexError),
        (4, IndexError),
        (-5, IndexError),
        ((0, 6), IndexError),
        (1.0, IndexError),
        (True, IndexError),
        ("a", IndexError),
        (([0], 1), IndexError),
    ],
)
def test_bad_keys_raise(key, error):
    with pytest.raises(error):
        whole((4, 6))[key]


def test_numpy_integer_keys():
    h = whole((4, 6))
    v = h[np.int64(-1), np.int32(2)]
    assert np.array_equal(indices(v, {}, {}), flat((4, 6))[-1, 2])


def test_scalar_handle():
    s = whole(())
    assert s.shape == () and s.elements == 1
    assert s[()].shape == () and s[...].shape == ()
    assert s[None].shape == (1,)
    assert np.array_equal(indices(s[None], {}, {}), np.array([0]))


def test_indexing_a_strided_view_raises():
    h = whole((4, 6))
    with pytest.raises(ValueError, match="cannot index a view"):
        h[:, ::2][0]
    with pytest.raises(ValueError, match="cannot index a view"):
        h.T[0]


# ---------------------------------------------------------------- transpose


@given(st.data())
def test_transpose_equals_numpys(data):
    shape = data.draw(shapes)
    axes = tuple(data.draw(st.permutations(range(len(shape)))))
    h = whole(shape)
    t = h.transpose(axes)
    assert t.shape == flat(shape).transpose(axes).shape
    assert np.array_equal(indices(t, {}, {}), flat(shape).transpose(axes))
    assert np.array_equal(indices(h.transpose(*axes), {}, {}), indices(t, {}, {}))
    assert isinstance(t.layout, Dense) == consecutive(flat(shape).transpose(axes))
    assert np.array_equal(indices(h.transpose(), {}, {}), flat(shape).T)


def test_T_is_numpys_matrix_T():
    h = whole((3, 5))
    assert np.array_equal(indices(h.T, {}, {}), flat((3, 5)).T)
    assert isinstance(h.T.layout, Strided)
    assert isinstance(whole((1, 5)).T.layout, Dense)
    with pytest.raises(ValueError, match="matrix"):
        whole((2, 3, 4)).T  # noqa: B018
    with pytest.raises(ValueError, match="matrix"):
        whole((4,)).T  # noqa: B018


def test_transpose_takes_negative_axes_and_refuses_non_permutations():
    h = whole((2, 3, 4))
    assert np.array_equal(
        indices(h.transpose(-1, 0, 1), {}, {}), flat((2, 3, 4)).transpose(-1, 0, 1)
    )
    for axes in [(0, 1), (0, 0, 1), (0, 1, 3)]:
        with pytest.raises(ValueError, match="permute"):
            h.transpose(axes)


def test_transpose_of_a_contiguous_slice_and_a_per_call_row():
    h = whole((3, 4, 5))
    assert np.array_equal(indices(h[1:].transpose(), {}, {}), flat((3, 4, 5))[1:].T)
    t = h[pos].T
    assert isinstance(t.layout, Strided)
    assert np.array_equal(indices(t, {"pos": 2}, {}), flat((3, 4, 5))[2].T)


def test_transpose_moves_the_bound():
    t = whole((4, 6))[:n].T
    assert t.shape == (6, 4) and t.valid == {1: n}
    a = np.arange(24.0).reshape(4, 6)
    assert np.array_equal(read(t, {"n": 3}, {"x": a}), a[:3].T)


def test_transpose_of_a_view_raises():
    with pytest.raises(ValueError, match="cannot transpose a view"):
        whole((4, 6))[:, ::2].T  # noqa: B018


# ------------------------------------------------------------------ reshape


def test_reshape_of_dense():
    h = whole((4, 6))
    for shape in [(24,), (2, 12), (2, 3, 4), (-1, 3), (4, -1)]:
        r = h.reshape(shape)
        assert np.array_equal(indices(r, {}, {}), flat((24,)).reshape(shape))
        assert np.array_equal(indices(h.reshape(*shape), {}, {}), indices(r, {}, {}))
        assert r.buffer is h.buffer
    s = h[1:3].reshape(3, 4)
    assert np.array_equal(indices(s, {}, {}), flat((4, 6))[1:3].reshape(3, 4))
    p = h[pos].reshape(2, 3)
    assert np.array_equal(indices(p, {"pos": 3}, {}), flat((4, 6))[3].reshape(2, 3))


def test_reshape_to_another_size_raises():
    with pytest.raises(ValueError, match="cannot reshape"):
        whole((4, 6)).reshape(5, 5)


@pytest.mark.parametrize(
    "view",
    [
        lambda h: h[:, ::2],
        lambda h: h.T,
        lambda h: h[[0, 1]],
        lambda h: h[:, 1],
    ],
)
def test_reshape_of_a_view_raises(view):
    v = view(whole((4, 6)))
    with pytest.raises(ValueError, match="cannot reshape a view"):
        v.reshape(v.elements)


def test_reshape_keeps_a_leading_bound_in_whole_rows():
    h = whole((4, 6))[:n]
    r = h.reshape(8, 3)
    assert r.valid == {0: 2 * n}
    a = np.arange(24.0).reshape(4, 6)
    assert np.array_equal(read(r, {"n": 3}, {"x": a}), a[:3].reshape(6, 3))
    assert h.reshape(4, 2, 3).valid == {0: n}
    with pytest.raises(ValueError, match="not a whole number of rows"):
        h.reshape(2, 12)
    with pytest.raises(ValueError, match="leading"):
        whole((4, 6))[:, :n].reshape(24)


# ------------------------------------------------------- per-call views


@given(st.data())
def test_per_call_index_on_one_axis_equals_numpys_int(data):
    shape = data.draw(shapes)
    axis = data.draw(st.integers(0, len(shape) - 1))
    value = data.draw(st.integers(0, shape[axis] - 1))
    offset = data.draw(st.integers(0, 3))
    key = (slice(None),) * axis + (pos - offset,)
    v = whole(shape)[key]
    expect = flat(shape)[(slice(None),) * axis + (value,)]
    assert v.shape == expect.shape
    assert np.array_equal(indices(v, {"pos": value + offset}, {}), expect)
    assert isinstance(v.layout, Dense) == consecutive(expect)
    assert v.is_view


def test_per_call_index_example():
    h = whole((4, 6))
    v = h[:, pos]
    assert isinstance(v.layout, Strided) and v.layout.shift == pos
    assert np.array_equal(indices(v, {"pos": 3}, {}), flat((4, 6))[:, 3])
    row = h[pos + 1]
    assert row.layout == Dense(6 * pos + 6)
    assert np.array_equal(indices(row, {"pos": 2}, {}), flat((4, 6))[3])
    three = whole((2, 3, 4))[1, clamp(pos, 0, 2), 1:3]
    assert np.array_equal(indices(three, {"pos": 9}, {}), flat((2, 3, 4))[1, 2, 1:3])


def test_per_call_index_beyond_the_buffer_raises_at_read():
    h = whole((4, 6))
    buffers = {"x": np.zeros((4, 6))}
    with pytest.raises(IndexError, match="reads elements"):
        read(h[pos], {"pos": 4}, buffers)
    with pytest.raises(IndexError):
        read(h[:, pos], {"pos": 6}, buffers)
    with pytest.raises(IndexError):
        read(h[pos - 1], {"pos": 0}, buffers)
    with pytest.raises(IndexError):
        write(h[pos], {"pos": 5}, buffers, np.ones(6))


def test_a_per_call_index_inside_a_recording_notes_its_range():
    h = whole((4, 6))
    with Recorder("g", None, {}) as rec:
        h[:, pos]
        h[n + 1]
    assert [(lim.expr, lim.lo, lim.hi) for lim in rec.limits] == [
        (pos.affine(), 0, 6),
        (n + 1, 0, 4),
    ]


def test_views_work_outside_a_recording_without_limits():
    h = whole((4, 6))
    assert isinstance(h[pos], Handle) and isinstance(h[:n], Handle)


# --------------------------------------------------------- per-call bounds


def test_per_call_bound_keeps_the_shape():
    h = whole((4, 6))
    v = h[:n]
    assert v.shape == (4, 6) and v.valid == {0: n}
    assert isinstance(v.layout, Dense) and v.layout.offset == 0
    a = np.arange(24.0).reshape(4, 6)
    for k in range(5):
        assert np.array_equal(read(v, {"n": k}, {"x": a}), a[:k])
    assert bounded(v, {"n": 2}) == (slice(0, 2), slice(None))


def test_per_call_bound_with_a_start_and_on_another_axis():
    h = whole((4, 6))
    a = np.arange(24.0).reshape(4, 6)
    v = h[1:n]
    assert v.shape == (3, 6) and v.valid == {0: n - 1}
    assert np.array_equal(read(v, {"n": 3}, {"x": a}), a[1:3])
    w = h[:, : m + 2]
    assert w.shape == (4, 6) and w.valid == {1: m + 2}
    assert np.array_equal(read(w, {"m": 1}, {"x": a}), a[:, :3])
    both = h[:n, :m]
    assert both.valid == {0: n, 1: m}
    assert np.array_equal(read(both, {"n": 2, "m": 5}, {"x": a}), a[:2, :5])


def test_views_of_a_bounded_handle_keep_the_bound():
    h = whole((4, 6))[:n]
    a = np.arange(24.0).reshape(4, 6)
    for v, expect in [
        (h[:], a[:3]),
        (h[:, 1:4], a[:3, 1:4]),
        (h[..., 2], a[:3, 2]),
        (h[None], a[None, :3]),
    ]:
        assert n in v.valid.values()
        assert np.array_equal(read(v, {"n": 3}, {"x": a}), expect)


@pytest.mark.parametrize(
    "key", [slice(1, None), slice(None, None, 2), slice(None, 3), slice(None, m)]
)
def test_slicing_a_bounded_axis_other_than_whole_raises(key):
    with pytest.raises(ValueError, match="bounded per call"):
        whole((4, 6))[:n][key]


def test_per_call_slice_forms_that_raise():
    h = whole((4, 6))
    with pytest.raises(ValueError, match="step"):
        h[:n:2]
    # a per-call start takes a fixed length: x[p : p + k]
    with pytest.raises(ValueError, match="fixed length"):
        h[n:]
    with pytest.raises(ValueError, match="fixed length"):
        h[n:5]
    with pytest.raises(ValueError, match="stop"):
        h[:4:n]


def test_a_bound_outside_its_axis_raises_at_read():
    h = whole((4, 6))
    buffers = {"x": np.zeros((4, 6))}
    with pytest.raises(IndexError, match="bounded"):
        read(h[:n], {"n": 5}, buffers)
    with pytest.raises(IndexError, match="bounded"):
        read(h[2:n], {"n": 1}, buffers)
    with pytest.raises(IndexError, match="bounded"):
        bounded(h[:, :n], {"n": 7})


def test_a_per_call_bound_inside_a_recording_notes_its_range():
    h = whole((4, 6))
    with Recorder("g", None, {}) as rec:
        h[1:n]
    ((lim,),) = [rec.limits]
    assert (lim.expr, lim.lo, lim.hi) == (n - 1, 0, 4)


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


# ----------------------------------------------------------------------- at


def test_at_a_contiguous_tap_is_dense():
    h = whole((4, 6))
    v = h.at(TAP((4, 6), 6, (2, 6), (6, 1)), (3, 4))
    assert v.layout == Dense(6) and v.shape == (3, 4)
    assert np.array_equal(indices(v, {}, {}), np.arange(6, 18).reshape(3, 4))
    assert v.ref() == BufferRef("x", 24, 48)


def test_at_a_strided_tap_reads_what_as_strided_would():
    h = whole((4, 6))
    tap = TAP((4, 6), 1, (6, 2), (1, 12))
    v = h.at(tap, (6, 2))
    assert isinstance(v.layout, Strided)
    assert np.array_equal(v.layout.tap.indices(), tap.indices())
    a = np.arange(24.0, dtype=np.float32).reshape(4, 6)
    expect = as_strided(a.reshape(-1)[1:], shape=(6, 2), strides=(4, 48))
    assert np.array_equal(read(v, {}, {"x": a}), expect)


@st.composite
def taps_over(draw, elements: int):
    rank = draw(st.integers(1, 4))
    sizes = draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    strides = draw(st.lists(st.integers(0, 9), min_size=rank, max_size=rank))
    reach = sum((s - 1) * t for s, t in zip(sizes, strides))
    assume(reach < elements)
    offset = draw(st.integers(0, elements - 1 - reach))
    return TAP((elements,), offset, tuple(sizes), tuple(strides))


@given(st.data())
def test_at_any_tap_equals_as_strided(data):
    shape = data.draw(shapes.filter(lambda s: prod(s) >= 2))
    tap = data.draw(taps_over(prod(shape)))
    h = whole(shape)
    v = h.at(tap, tap.sizes)
    a = np.arange(prod(shape), dtype=np.float32).reshape(shape) + 0.5
    itemsize = a.itemsize
    expect = as_strided(
        a.reshape(-1)[tap.offset :],
        shape=tap.sizes,
        strides=[s * itemsize for s in tap.strides],
    )
    assert np.array_equal(read(v, {}, {"x": a}), expect)
    assert isinstance(v.layout, Dense) == tap.is_contiguous()
    assert np.array_equal(indices(v, {}, {}), tap.indices())


def test_at_walks_a_contiguous_view_from_its_start():
    h = whole((4, 6))[1:3]
    v = h.at(TAP((12,), 0, (6, 2), (1, 6)), (6, 2))
    assert np.array_equal(
        indices(v, {}, {}), 6 + TAP((12,), 0, (6, 2), (1, 6)).indices()
    )
    d = h.at(TAP((2, 6), 6, (6,), (1,)), (6,))
    assert d.layout == Dense(12)


def test_at_a_per_call_row_keeps_its_offset():
    h = whole((4, 6))
    row = h[pos]
    v = row.at(TAP((6,), 2, (3,), (1,)), (3,))
    assert isinstance(v.layout, Dense)
    assert np.array_equal(indices(v, {"pos": 2}, {}), np.arange(14, 17))
    with pytest.raises(ValueError, match="per-call view"):
        row.at(TAP((6,), 0, (3,), (2,)), (3,))


def test_at_refuses_walks_outside_or_of_another_size():
    h = whole((4, 6))
    with pytest.raises(ValueError, match="reaches element"):
        h[1:3].at(TAP((24,), 6, (12,), (1,)), (12,))
    with pytest.raises(ValueError, match="holds"):
        h.at(TAP((4, 6), 0, (2, 3), (6, 1)), (2, 2))
    with pytest.raises(ValueError, match="cannot walk a view"):
        h[:, ::2].at(TAP((12,), 0, (2,), (1,)), (2,))


def test_at_bounds():
    h = whole((4, 6))
    v = h.at(TAP((4, 6), 0, (6, 4), (1, 6)), (6, 4), bounds={0: n})
    assert v.valid == {0: n}
    a = np.arange(24.0).reshape(4, 6)
    assert np.array_equal(read(v, {"n": 2}, {"x": a}), a.T[:2])
    with pytest.raises(ValueError, match="axis"):
        h.at(TAP((4, 6), 0, (6, 4), (1, 6)), (6, 4), bounds={2: n})
    with Recorder("g", None, {}) as rec:
        h.at(TAP((4, 6), 0, (6, 4), (1, 6)), (6, 4), bounds={1: m})
    ((lim,),) = [rec.limits]
    assert (lim.expr, lim.lo, lim.hi) == (m.affine(), 0, 5)


# A pattern that is one shim descriptor on npu2: 4 dims, the iteration first.
BLOCKS = TAP((8, 16), 0, (4, 2, 2, 4), (32, 16, 4, 1))


def blocks() -> Handle:
    return whole((8, 16), bfloat16)


def test_blocks_is_one_shim_descriptor():
    assert shim_descriptor_fits(as_device("npu2"), BLOCKS, bfloat16)


def test_at_with_a_per_call_repeat():
    h = blocks()
    v = h.at(BLOCKS, (4, 16), bounds={0: n}, repeat=n)
    assert isinstance(v.layout, Strided)
    assert v.layout.repeat == (n.affine(),) and v.valid == {0: n}
    a = np.arange(128, dtype=np.float32).astype(bfloat16).reshape(8, 16)
    got = read(v, {"n": 2}, {"x": a})
    expect = a.reshape(-1)[BLOCKS.indices()[:2]].reshape(2, 16)
    assert np.array_equal(got, expect)
    idx = indices(v, {"n": 2}, {})
    assert (idx[2:] == -1).all()
    with Recorder("g", None, {}) as rec:
        h.at(BLOCKS, (4, 16), bounds={0: n}, repeat=n)
    assert (n.affine(), 1, 5) in [(lim.expr, lim.lo, lim.hi) for lim in rec.limits]


def test_at_with_a_per_call_length():
    h = blocks()
    v = h.at(BLOCKS, (4, 16), bounds={0: n}, length=m)
    assert v.layout.length == m.affine()
    idx = indices(v, {"m": 1, "n": 4}, {})
    part = TAP((128,), 0, (4, 1, 2, 4), (32, 16, 4, 1)).indices().reshape(-1)
    assert np.array_equal(idx.reshape(-1)[:32], part)
    assert (idx.reshape(-1)[32:] == -1).all()


def test_at_with_a_repeat_per_pattern():
    h = blocks()
    second = TAP((8, 16), 8, (4, 2, 2, 4), (32, 16, 4, 1))
    v = h.at((BLOCKS, second), (8, 16), bounds={0: n}, repeat=(n, m))
    assert v.layout.repeat == (n.affine(), m.affine())
    full = indices(v, {"n": 4, "m": 4}, {})
    expect = np.concatenate(
        [BLOCKS.indices().reshape(-1), second.indices().reshape(-1)]
    )
    assert np.array_equal(full.reshape(-1), expect)


def test_at_with_a_repeat_refuses_a_pattern_not_of_rank_4():
    with pytest.raises(ValueError, match="four dimensions"):
        blocks().at(TAP((8, 16), 0, (8, 16), (16, 1)), (8, 16), bounds={0: n}, repeat=n)
    with pytest.raises(ValueError, match="four dimensions"):
        blocks().at(TAP((8, 16), 0, (8, 16), (16, 1)), (8, 16), bounds={0: n}, length=n)


def test_at_with_a_repeat_refuses_a_pattern_no_descriptor_takes():
    too_many = TAP((8, 16), 0, (128, 1, 1, 1), (1, 1, 1, 1))
    with pytest.raises(ValueError, match="descriptor"):
        blocks().at(too_many, (128,), bounds={0: n}, repeat=n)


def test_at_with_repeats_that_do_not_match_the_patterns():
    h = blocks()
    with pytest.raises(ValueError, match="repeat each"):
        h.at((BLOCKS, BLOCKS), (8, 16), bounds={0: n}, repeat=n)
    with pytest.raises(ValueError, match="repeat each"):
        h.at(BLOCKS, (4, 16), bounds={0: n}, repeat=(n, m))
    with pytest.raises(ValueError, match="repeat each"):
        h.at((BLOCKS, BLOCKS), (8, 16), bounds={0: n}, repeat=(n,))


def test_at_with_a_repeat_needs_bounds():
    with pytest.raises(ValueError, match="give bounds"):
        blocks().at(BLOCKS, (4, 16), repeat=n)
    with pytest.raises(ValueError, match="give bounds"):
        blocks().at(BLOCKS, (4, 16), length=n, bounds={})


def test_at_with_a_repeat_needs_a_device():
    with iron.use_device(None), pytest.raises(ValueError, match="descriptor"):
        blocks().at(BLOCKS, (4, 16), bounds={0: n}, repeat=n)


def test_shim_descriptor_fits():
    dev = as_device("npu2")
    assert not shim_descriptor_fits(dev, TAP((8, 16), 0, (8, 16), (16, 1)), bfloat16)
    assert not shim_descriptor_fits(
        dev, TAP((128,), 0, (65, 1, 1, 1), (1, 1, 1, 1)), bfloat16
    )
    assert not shim_descriptor_fits(  # offset of 2 bytes
        dev, TAP((128,), 1, (1, 1, 2, 4), (1, 1, 8, 1)), bfloat16
    )
    assert not shim_descriptor_fits(  # 3 bf16 innermost: 6 bytes
        dev, TAP((128,), 0, (1, 1, 2, 3), (1, 1, 8, 1)), bfloat16
    )
    assert not shim_descriptor_fits(  # a stride of 3 bf16: 6 bytes
        dev, TAP((128,), 0, (1, 1, 2, 4), (1, 1, 3, 1)), bfloat16
    )
    assert shim_descriptor_fits(
        dev, TAP((128,), 4, (1, 1, 2, 4), (1, 1, 8, 1)), np.float32
    )


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


def test_a_repeat_that_leaves_out_bounded_rows_raises_at_read():
    v = blocks().at(BLOCKS, (4, 16), bounds={0: n}, repeat=m)
    a = np.zeros((8, 16), bfloat16)
    with pytest.raises(IndexError):
        read(v, {"n": 3, "m": 2}, {"x": a})
    assert read(v, {"n": 2, "m": 2}, {"x": a}).shape == (2, 16)


def test_layouts_are_values():
    assert Dense(3) == Dense(3)
    assert dataclasses.replace(Strided(BLOCKS), shift=pos).shift == pos
    assert isinstance(whole((4, 6))[pos].layout.offset, Affine)


# ------------------------------------------------ per-call windows x[p : p + k]


def test_a_window_with_a_per_call_start_reads_k_rows_from_p():
    p = PerCall("p")
    h = whole((16, 4))
    window = h[p : p + 3]
    assert window.shape == (3, 4) and isinstance(window.layout, Dense)
    a = np.arange(64.0).reshape(16, 4)
    for start in (0, 5, 13):
        got = read(window, {"p": start}, {"x": a})
        np.testing.assert_array_equal(got, a[start : start + 3])


def test_a_window_records_the_range_its_start_keeps():
    class G(iron.Graph):
        def __init__(self):
            self.table = iron.param(np.zeros((16, 4), np.float32))

        def body(self, *, p: iron.Scratchpad[int]):
            return self.table[p : p + 3]

    with iron.use_device("npu2"):
        recording = G().record()
    (limit,) = recording.limits
    assert (str(limit.expr), limit.lo, limit.hi) == ("p", 0, 14)
    with pytest.raises(IndexError, match="outside"):
        recording.check_values({"p": 14})


def test_a_window_of_a_bounded_axis_raises():
    p = PerCall("p")
    with pytest.raises(ValueError, match="bounded per call"):
        whole((16, 4))[:n][p : p + 2]
