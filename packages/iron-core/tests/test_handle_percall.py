"""Per-call views: indices ``x[pos]``, bounds ``x[:n]``, windows ``x[p : p + k]``.

A per-call index or start moves a view's offset; a bound keeps the shape and
cuts the valid rows per call. Inside a recording each notes the range it must
keep; outside its axis it raises when read.
"""

from __future__ import annotations

import numpy as np
import pytest
from handles_for_tests import consecutive, flat, m, n, pos, shapes, whole
from hypothesis import given
from hypothesis import strategies as st

import iron
from iron.core.access import bounded, indices, read, write
from iron.core.handle import Dense, Handle, Strided
from iron.core.percall import PerCall, clamp
from iron.core.recorder import Recorder

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
