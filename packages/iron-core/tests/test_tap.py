"""Tests for iron.core.tap.TensorAccessPattern."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

from iron.core.tap import TensorAccessPattern as TAP


@st.composite
def patterns(draw, max_rank: int = 4) -> TAP:
    """A random valid pattern, over a tensor at least as large as it reaches."""
    rank = draw(st.integers(1, max_rank))
    sizes = draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank))
    strides = draw(st.lists(st.integers(0, 12), min_size=rank, max_size=rank))
    offset = draw(st.integers(0, 10))
    reach = offset + sum((s - 1) * t for s, t in zip(sizes, strides)) + 1
    inner = draw(st.integers(1, 6))
    outer = -(-reach // inner) + draw(st.integers(0, 2))
    dims = draw(st.sampled_from([(outer * inner,), (outer, inner)]))
    return TAP(dims, offset, tuple(sizes), tuple(strides))


@st.composite
def shapes_and_axes(draw):
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    axes = tuple(draw(st.permutations(range(len(shape)))))
    return shape, axes


def brute_indices(tap: TAP) -> np.ndarray:
    """The indices by nested iteration, one access at a time."""
    out = np.empty(tap.sizes, dtype=np.int64)
    for index in np.ndindex(*tap.sizes):
        out[index] = tap.offset + sum(i * s for i, s in zip(index, tap.strides))
    return out


# -------------------------------------------------------------------- basics


def test_fields_normalised_to_int_tuples():
    tap = TAP([4, 8], np.int64(2), [3, 2], [8, 1])
    assert tap.tensor_dims == (4, 8) and tap.sizes == (3, 2) and tap.strides == (8, 1)
    assert type(tap.offset) is int
    assert hash(tap) == hash(TAP((4, 8), 2, (3, 2), (8, 1)))


def test_frozen():
    tap = TAP.full((2, 3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        tap.offset = 1  # type: ignore[misc]


def test_str():
    tap = TAP((8, 16), 0, (16, 8), (1, 16))
    assert str(tap) == "tap(dims=[8, 16], offset=0, sizes=[16, 8], strides=[1, 16])"


def test_rank_and_count():
    tap = TAP((8, 16), 4, (2, 3, 4), (32, 1, 0))
    assert tap.rank == 3
    assert tap.count == 24


def test_full_is_row_major():
    tap = TAP.full((2, 3, 4))
    assert tap == TAP((2, 3, 4), 0, (2, 3, 4), (12, 4, 1))
    assert np.array_equal(tap.indices(), np.arange(24).reshape(2, 3, 4))


def test_indices_example():
    tap = TAP((2, 3), 0, (3, 2), (1, 3))
    assert tap.indices().tolist() == [[0, 3], [1, 4], [2, 5]]


def test_indices_repeat_with_zero_stride():
    tap = TAP((4,), 1, (3, 2), (0, 1))
    assert tap.indices().tolist() == [[1, 2], [1, 2], [1, 2]]


@given(patterns())
def test_indices_match_as_strided(tap):
    base = np.arange(math.prod(tap.tensor_dims), dtype=np.int64)
    view = as_strided(
        base[tap.offset :],
        shape=tap.sizes,
        strides=[s * base.itemsize for s in tap.strides],
        writeable=False,
    )
    got = tap.indices()
    assert got.dtype == np.int64 and got.shape == tap.sizes
    assert np.array_equal(got, view)
    assert np.array_equal(got, brute_indices(tap))


# ----------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("args", "fix"),
    [
        (((8,), 0, (2, 2), (1,)), "one stride per size"),
        (((8,), 0, (), ()), "at least one size"),
        (((8,), 0, (0,), (1,)), ">= 1"),
        (((8,), 0, (2,), (-1,)), ">= 0"),
        (((8,), -1, (1,), (1,)), r"offset in \[0, 8\)"),
        (((8,), 8, (1,), (1,)), r"offset in \[0, 8\)"),
        (((8,), 1, (8,), (1,)), "ends below 8"),
        (((2, 4), 0, (2, 2), (4, 4)), "ends below 8"),
        (((2, 0), 0, (1,), (1,)), "each >= 1"),
        (((), 0, (1,), (1,)), "at least one dimension"),
    ],
)
def test_invalid_patterns_raise(args, fix):
    dims, offset, sizes, strides = args
    shown = (
        f"tap(dims={list(dims)}, offset={offset}, "
        f"sizes={list(sizes)}, strides={list(strides)})"
    )
    with pytest.raises(ValueError, match=fix) as info:
        TAP(*args)
    assert shown in str(info.value)


def test_last_element_reachable():
    tap = TAP((8,), 1, (7,), (1,))
    assert tap.indices()[-1] == 7
    TAP((2, 4), 0, (2, 2), (4, 3))  # reaches 7 exactly
    with pytest.raises(ValueError, match="reaches element 8"):
        TAP((2, 4), 0, (3,), (4,))


def test_non_integer_fields():
    with pytest.raises(TypeError, match="sizes"):
        TAP((8,), 0, (2.0,), (1,))
    with pytest.raises(TypeError, match="offset"):
        TAP((8,), 0.5, (2,), (1,))


# ------------------------------------------------------------- is_contiguous


def test_contiguous_examples():
    assert TAP.full((4, 8)).is_contiguous()
    assert TAP((4, 8), 8, (2, 8), (8, 1)).is_contiguous()
    assert TAP((4, 8), 5, (1, 1), (3, 7)).is_contiguous()  # one element
    assert not TAP((4, 8), 0, (8, 4), (1, 8)).is_contiguous()  # transposed
    assert not TAP((4, 8), 0, (2, 4), (8, 1)).is_contiguous()  # rows with gaps
    assert not TAP((4, 8), 0, (2, 8), (0, 1)).is_contiguous()  # repeated
    assert not TAP((4, 8), 0, (4,), (2,)).is_contiguous()
    assert not TAP((4, 8), 0, (2, 3), (1, 5)).is_contiguous()


@given(patterns())
def test_contiguous_matches_definition(tap):
    flat = tap.indices().reshape(-1)
    expected = np.array_equal(flat, np.arange(tap.offset, tap.offset + tap.count))
    assert tap.is_contiguous() == expected


# ---------------------------------------------------------------- simplify


def test_simplify_merges_full():
    assert TAP.full((2, 3, 4)).simplify() == TAP((2, 3, 4), 0, (24,), (1,))


def test_simplify_drops_size_one():
    tap = TAP((4, 8), 3, (1, 4, 1), (99 % 8, 8, 5))
    assert tap.simplify() == TAP((4, 8), 3, (4,), (8,))


def test_simplify_single_element_keeps_rank_one():
    simple = TAP((4, 8), 5, (1, 1), (3, 7)).simplify()
    assert simple.rank == 1 and simple.count == 1 and simple.offset == 5


def test_simplify_keeps_unmergeable():
    tap = TAP((4, 8), 0, (4, 2), (8, 1))
    assert tap.simplify() == tap


@given(patterns())
def test_simplify_preserves_indices(tap):
    simple = tap.simplify()
    assert simple.tensor_dims == tap.tensor_dims
    assert np.array_equal(simple.indices().reshape(-1), tap.indices().reshape(-1))
    assert 1 <= simple.rank <= tap.rank
    if simple.rank > 1:
        assert 1 not in simple.sizes
    for k in range(simple.rank - 1):
        assert simple.strides[k] != simple.sizes[k + 1] * simple.strides[k + 1]
    assert simple.simplify() == simple


# ------------------------------------------------------------------ permute


@given(shapes_and_axes())
def test_permute_is_numpy_transpose(case):
    shape, axes = case
    tap = TAP.full(shape).permute(axes)
    expected = np.arange(math.prod(shape)).reshape(shape).transpose(axes)
    assert tap.sizes == expected.shape
    assert np.array_equal(tap.indices(), expected)


def test_permute_negative_axes():
    assert TAP.full((2, 3, 4)).permute((-1, 0, 1)) == TAP.full((2, 3, 4)).permute(
        (2, 0, 1)
    )


@pytest.mark.parametrize("axes", [(0,), (0, 0), (0, 2), (0, 1, 2)])
def test_permute_rejects_non_permutations(axes):
    with pytest.raises(ValueError, match=r"do not permute the 2 dimensions"):
        TAP.full((2, 3)).permute(axes)


# ----------------------------------------------------------- gather, scatter


@given(patterns())
def test_gather_is_fancy_index(tap):
    data = np.arange(math.prod(tap.tensor_dims)) * 10 + 3
    assert np.array_equal(tap.gather(data), data[tap.indices()])


def test_gather_from_shaped_array():
    data = np.arange(12).reshape(3, 4)
    tap = TAP.full((3, 4)).permute((1, 0))
    assert np.array_equal(tap.gather(data), data.T)


def test_gather_wrong_size():
    with pytest.raises(ValueError, match="array of 5 elements.*12 elements"):
        TAP.full((3, 4)).gather(np.zeros(5))


def test_scatter_in_place():
    data = np.zeros(12, dtype=np.int32)
    tap = TAP((3, 4), 1, (2, 2), (4, 2))
    values = np.array([[1, 2], [3, 4]])
    assert tap.scatter(data, values) is None
    assert data.tolist() == [0, 1, 0, 2, 0, 3, 0, 4, 0, 0, 0, 0]


def test_scatter_broadcasts_and_shaped_target():
    data = np.zeros((3, 4))
    TAP.full((3, 4)).permute((1, 0)).scatter(data, 7.0)
    assert (data == 7).all()


def test_scatter_errors():
    tap = TAP.full((3, 4))
    with pytest.raises(ValueError, match=r"shape \(5,\).*\(3, 4\)"):
        tap.scatter(np.zeros(12), np.zeros(5))
    with pytest.raises(ValueError, match="non-contiguous"):
        tap.scatter(np.zeros((4, 3)).T, 1.0)
    with pytest.raises(TypeError, match="numpy array"):
        tap.scatter([0] * 12, 1.0)
    with pytest.raises(ValueError, match="12 elements"):
        tap.scatter(np.zeros(11), 1.0)


@given(patterns())
def test_scatter_then_gather_round_trips(tap):
    data = np.full(math.prod(tap.tensor_dims), -1, dtype=np.int64)
    values = np.arange(tap.count).reshape(tap.sizes)
    tap.scatter(data, values)
    flat = tap.indices().reshape(-1)
    if len(np.unique(flat)) == flat.size:  # each element visited once
        assert np.array_equal(tap.gather(data), values)
    untouched = np.setdiff1d(np.arange(data.size), flat)
    assert (data[untouched] == -1).all()
