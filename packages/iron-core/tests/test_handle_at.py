"""Handle.at(tap, shape): walking a handle by a tensor access pattern.

Any pattern reads what numpy's as_strided would; per-call repeats and lengths
need bounds, a device, and patterns one shim descriptor takes (``BLOCKS`` is
one on npu2).
"""

from __future__ import annotations

import dataclasses
from math import prod

import numpy as np
import pytest
from handles_for_tests import m, n, pos, shapes, whole
from hypothesis import assume, given
from hypothesis import strategies as st
from ml_dtypes import bfloat16
from numpy.lib.stride_tricks import as_strided

import iron
from iron.core.access import indices, read
from iron.core.device import as_device
from iron.core.dma import shim_descriptor_fits
from iron.core.handle import BufferRef, Dense, Handle, Strided
from iron.core.percall import Affine
from iron.core.recorder import Recorder
from iron.core.tap import TensorAccessPattern as TAP

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
