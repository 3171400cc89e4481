"""Handle views by fixed indexing: whole handles, basic indexing, transpose, reshape.

Each view's element indices equal numpy's on ``flat(shape)`` (hypothesis over
shapes and basic indices); a view is dense exactly when its elements are
consecutive, and views of strided views are refused.
"""

from __future__ import annotations

import numpy as np
import pytest
from handles_for_tests import (
    basic_keys,
    consecutive,
    flat,
    forward_views,
    n,
    pos,
    shapes,
    shapes_and_keys,
    walks_backwards,
    whole,
)
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from ml_dtypes import bfloat16

from iron.core.access import indices, read
from iron.core.handle import Buffer, BufferRef, Dense, Handle, Strided

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
