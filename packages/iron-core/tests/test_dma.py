"""iron.core.dma: the one home of shim DMA walk arithmetic.

Each walk helper keeps the elements a walk visits, in order; the descriptor
model (``encode`` then ``shim_elements``) moves the elements a legal walk
names; the limits are the device's. Every distribution's DMA walks call
these (``tests/layering`` refuses another's underscore names).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iron.core import dma
from iron.core.device import NPU1, NPU2
from iron.core.tap import TensorAccessPattern


def _visits(offset: int, sizes: tuple[int, ...], strides: tuple[int, ...]):
    reach = offset + dma.walk_reach(sizes, strides)
    return TensorAccessPattern((reach,), offset, sizes, strides).indices().ravel()


walks = st.lists(
    st.tuples(st.integers(1, 6), st.integers(0, 40)), min_size=1, max_size=4
).map(lambda dims: (tuple(s for s, _ in dims), tuple(t for _, t in dims)))


@given(walks, st.integers(0, 9))
@settings(max_examples=150, deadline=None)
def test_simplify_walk_keeps_the_visits(walk, offset):
    sizes, strides = walk
    merged = dma.simplify_walk(sizes, strides)
    assert len(merged[0]) <= len(sizes)
    np.testing.assert_array_equal(
        _visits(offset, *merged), _visits(offset, sizes, strides)
    )


def test_tap_simplify_is_simplify_walk():
    tap = TensorAccessPattern((4, 8), 0, (1, 4, 8), (0, 8, 1))
    assert (tap.simplify().sizes, tap.simplify().strides) == ((32,), (1,))
    assert dma.simplify_walk((1, 1), (5, 7)) == ((1,), (1,))


@pytest.mark.parametrize(
    "sizes,strides",
    [((6000,), (1,)), ((2048, 16), (32, 1)), ((3000, 2), (4, 1)), ((1031,), (1,))],
)
def test_split_long_dims_keeps_the_visits_within_the_wrap(sizes, strides):
    wrap = dma.wrap_limit(NPU2)
    assert wrap == 1023
    split = dma.split_long_dims(NPU2, sizes, strides, 2)
    np.testing.assert_array_equal(_visits(0, *split), _visits(0, sizes, strides))
    if sizes != (1031,):  # a prime run has no divisor: kept for a check to refuse
        assert all(s <= wrap for s in split[0][:-1])
        assert split[0][-1] * 2 // 4 <= wrap


@pytest.mark.parametrize("count", [2, 512, 4096, 1 << 20, 96 * 1024])
def test_linear_walk_is_one_legal_descriptor_of_the_run(count):
    sizes, strides = dma.linear_walk(count, 2, NPU2)
    assert not dma.shim_transfer_problems(NPU2, sizes, strides, 0, 2)
    moved = dma.shim_elements(dma.encode(sizes, strides, 0, 2))
    np.testing.assert_array_equal(moved, np.arange(count))


def test_shim_pieces_cover_a_run_too_long_for_one_descriptor():
    # 2 x 2053 bf16 (2053 prime): no split into wrap-sized dimensions, so the
    # run is cut into a bulk of whole 1023-word rows and a rest
    count = 2 * 2053
    pieces = dma.shim_pieces(NPU1, (8, (count,), (1,)), 2)
    assert len(pieces) == 2
    for o, s, t in pieces:
        assert not dma.shim_transfer_problems(NPU1, s, t, o, 2)
    moved = np.concatenate(
        [dma.shim_elements(dma.encode(s, t, o, 2)) for o, s, t in pieces]
    )
    np.testing.assert_array_equal(moved, 8 + np.arange(count))
    strided = dma.shim_pieces(NPU1, (0, (4, 16), (32, 1)), 2)
    assert strided == [(0, (1, 1, 4, 16), (0, 0, 32, 1))]


def test_the_offset_limit_is_a_signed_32_bit_byte_offset():
    assert dma.ARG_OFFSET_LIMIT == 2**31
    below = dma.ARG_OFFSET_LIMIT // 2 - 16
    assert not dma.shim_transfer_problems(NPU2, (1, 1, 1, 32), (0, 0, 0, 1), below, 2)
    (problem,) = dma.shim_transfer_problems(NPU2, (1, 1, 1, 32), (0, 0, 0, 1), 2**30, 2)
    assert "2^31" in problem


def test_the_recording_check_and_the_design_check_agree_on_a_legal_walk():
    tap = TensorAccessPattern((64 * 64,), 0, (2, 4, 8, 16), (2048, 512, 64, 1))
    assert dma.shim_descriptor_fits(NPU2, tap, np.float32)
    assert not dma.shim_transfer_problems(NPU2, tap.sizes, tap.strides, 0, 4)
    assert not dma.shim_descriptor_fits(NPU2, tap.permute((0, 1, 3, 2)), np.int16)
