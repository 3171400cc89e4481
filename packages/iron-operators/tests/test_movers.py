"""Tests for the data movers Copy, Transpose and Repeat.

Each is exact: its reference is checked bit for bit against numpy indexing in
float64 (or the integers themselves) under ``Tolerance.exact``, NaN payloads
and signed zeros included, and a wrong permutation that a 1-ulp tolerance
would accept is caught. Copy is also recorded on every kind of view a handle
makes (strided, per-call offset, gathered rows, bounded) and refused where its
walk is not shim DMA descriptors.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from ml_dtypes import bfloat16

import iron
from iron.core.cost import step_time
from iron.core.device import NPU1, NPU2
from iron.core.operator import Cost, DimensionConflictError, RefusedShapeError
from iron.core.tolerance import Tolerance, compare
from iron.operators.movers import Access, Copy, Repeat, Transpose

DEVICES = (NPU1, NPU2)


def bf16_bits(shape, rng):
    """bf16 values from random bit patterns: NaNs, infinities, subnormals, -0."""
    return rng.integers(0, 1 << 16, shape, dtype=np.uint16).view(bfloat16)


def same_bits(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    return np.array_equal(a.view(np.uint8), b.view(np.uint8))


def exact_against_float64(got, want):
    """compare() under exact, with the oracle in float64 (or integers)."""
    with np.errstate(invalid="ignore"):
        want = np.asarray(want).astype(np.float64)
    verdict = compare(got, want, Tolerance.exact())
    assert verdict, verdict


# -- Copy ----------------------------------------------------------------------------------


class CopyOf(iron.Graph):
    """Copy of one view of x, the view given as a function."""

    def __init__(self, view):
        self.view = view

    def body(self, x):
        return Copy.step(self.view(x))


VIEWS = [
    pytest.param((8, 16), lambda x: x[2:6], lambda a: a[2:6], "dense", id="rows"),
    pytest.param(
        (8, 16), lambda x: x[:, 4:12], lambda a: a[:, 4:12], "strided", id="columns"
    ),
    pytest.param(
        (8, 16), lambda x: x[::2], lambda a: a[::2], "strided", id="every-other-row"
    ),
    pytest.param(
        (4, 6, 8),
        lambda x: x[1:3, ::2, 2:6],
        lambda a: a[1:3, ::2, 2:6],
        "strided",
        id="3d",
    ),
    pytest.param(
        (8, 16),
        lambda x: x[[0, 1, 5]],
        lambda a: a[[0, 1, 5]],
        "gather",
        id="fixed-ids",
    ),
    pytest.param((8, 16), lambda x: x[3], lambda a: a[3], "dense", id="one-row"),
    pytest.param(
        (2, 8, 16), lambda x: x[:, 5], lambda a: a[:, 5], "strided", id="cache-column"
    ),
]


@pytest.mark.parametrize("shape, view, index, kind", VIEWS)
def test_copy_of_a_view_is_numpy_indexing(shape, view, index, kind):
    rng = np.random.default_rng(0)
    x = bf16_bits(shape, rng)
    graph = CopyOf(view)
    with iron.use_device("npu2"):
        recording = graph.record(x=shape)
        got = graph.reference(x)
    (step,) = recording.steps
    assert step.op.access.kind == kind
    assert step.op.shape == index(x).shape and step.op.itemsize == 2
    assert same_bits(got, index(x))
    with np.errstate(invalid="ignore"):
        wide = x.astype(np.float64)
    exact_against_float64(got, index(wide))


@settings(max_examples=200, deadline=None)
@given(
    hnp.arrays(np.uint16, hnp.array_shapes(min_dims=1, max_dims=4, max_side=6)),
    st.data(),
)
def test_copy_reference_is_bit_exact_for_any_array(bits, data):
    x = bits.view(bfloat16)
    slices = tuple(
        slice(data.draw(st.integers(0, n - 1)), None, data.draw(st.integers(1, 3)))
        for n in x.shape
    )
    view = x[slices]
    got = Copy(shape=view.shape).reference(view)
    assert same_bits(got, view)
    exact_against_float64(got, view.astype(np.float64))


def test_copy_of_a_per_call_offset_and_into_a_state():
    class Append(iron.Graph):
        def __init__(self):
            self.cache = iron.state((2, 8, 16))

        def body(self, k, *, position: iron.Scratchpad[int]):
            Copy.step(k, out=self.cache[:, position])
            return Copy.step(self.cache[:, position])

    rng = np.random.default_rng(1)
    graph = Append()
    with iron.use_device("npu2"):
        recording = graph.record(k=(2, 16))
        write, read = recording.steps
        assert read.op.access.kind == "strided" and read.op.access.per_call == (16,)
        for position in (0, 3, 7):
            k = bf16_bits((2, 16), rng)
            got = graph.reference(k, position=position)
            assert same_bits(got, k)
            assert same_bits(graph.cache.host[:, position], k)


def test_copy_of_rows_gathered_by_a_device_made_id():
    class Lookup(iron.Graph):
        def body(self, table, ids):
            return Copy.step(table[ids])

    table = bf16_bits((16, 8), np.random.default_rng(2))
    ids = np.array([3, 3, 15], np.int32)
    graph = Lookup()
    with iron.use_device("npu1"):
        recording = graph.record(table=(16, 8), ids=((3,), np.int32))
        got = graph.reference(table, ids)
    access = recording.steps[0].op.access
    assert (
        access.kind == "gather" and len(access.walks) == 3 and access.per_call == (8,)
    )
    assert same_bits(got, table[ids])


def test_copy_of_a_bounded_view_is_bounded():
    class Head(iron.Graph):
        def body(self, x, *, n: iron.Scratchpad[int]):
            return Copy.step(x[:n, 2:10])

    x = bf16_bits((8, 16), np.random.default_rng(3))
    with iron.use_device("npu2"):
        recording = Head().record(x=(8, 16))
        got = Head().reference(x, n=5)
    (out,) = recording.steps[0].outputs
    assert set(out.valid) == {0}
    assert same_bits(got, x[:5, 2:10])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.int8])
def test_copy_takes_any_dtype(dtype):
    x = (np.arange(64) % 120).astype(dtype).reshape(4, 16)
    graph = CopyOf(lambda h: h[1:3, 4:8] if np.dtype(dtype).itemsize == 4 else h[1:3])
    with iron.use_device("npu2"):
        recording = graph.record(x=((4, 16), dtype))
        got = graph.reference(x)
    op = recording.steps[0].op
    assert op.itemsize == np.dtype(dtype).itemsize
    want = x[1:3, 4:8] if op.itemsize == 4 else x[1:3]
    assert got.dtype == dtype and np.array_equal(got, want)


def test_copy_of_a_float32_transpose_is_a_word_walk():
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    with iron.use_device("npu2"):
        got = CopyOf(lambda h: h.T).reference(x)
        CopyOf(lambda h: h.T).record(x=((8, 8), np.float32))  # not refused
    assert np.array_equal(got, x.T)


def test_a_wrong_permutation_passes_one_ulp_but_not_exact():
    x = np.array([[1.0, 1.0078125], [2.0, 2.015625]], bfloat16)  # 1-ulp neighbours
    want = x[:, ::-1].astype(np.float64)
    wrong = Copy(shape=(2, 2)).reference(x)  # the unreversed copy
    assert compare(wrong, want, Tolerance.bf16_ulps(1))
    assert not compare(wrong, want, Copy(shape=(2, 2)).tolerance())


def test_copy_shape_is_normalised_and_conflicts_name_both_sources():
    assert Copy(shape=[4, 8]).shape == (4, 8)
    assert Copy(shape=[4, 8]) == Copy(shape=(4, 8))

    class Keyword(iron.Graph):
        def body(self, x):
            return Copy.step(x[1:3], shape=(9,))

    with iron.use_device("npu2"):
        with pytest.raises(DimensionConflictError) as info:
            Keyword().record(x=(8, 16))
    assert str(info.value) == (
        "Copy: shape is (9,) from the call's keyword but (2, 16) from view.shape"
    )


def test_access_reads_each_layout():
    h = iron.core.handle.Handle.whole((8, 16), bfloat16, "x", "input")
    assert Access.of(h) == Access("dense", ((0, (128,), (1,)),))
    assert Access.of(h[:, 2:6]).walks == ((2, (8, 4), (16, 1)),)
    runs = Access.of(h[[0, 1, 2, 6, 7]])
    assert runs.walks == ((0, (48,), (1,)), (96, (32,), (1,)))
    assert repr(runs) == "gather(@0 48; @96 32)"


COPY_REFUSED = [
    pytest.param(
        (64,),
        lambda x: x[1:5],
        "starts at element 1 (byte 2), not 4-byte aligned",
        id="odd-start",
    ),
    pytest.param(
        (64,),
        lambda x: x[0:3],
        "a contiguous run of 3 elements (6 bytes) is not a whole number of 4-byte DMA words",
        id="odd-run",
    ),
    pytest.param(
        (8, 8),
        lambda x: x.T,
        "steps 8 elements innermost: the DMA moves whole 4-byte words",
        id="bf16-transpose",
    ),
    pytest.param(
        (8, 8), lambda x: x[:, 0], "steps 8 elements innermost", id="bf16-column"
    ),
    pytest.param(
        (8, 6),
        lambda x: x[:, :3],
        "moves runs of 3 elements (6 bytes), not whole 4-byte DMA words",
        id="odd-inner-run",
    ),
    pytest.param(
        (8, 5),
        lambda x: x[:, :2],
        "steps 5 elements (10 bytes), not whole 4-byte DMA words",
        id="odd-row-stride",
    ),
    pytest.param(
        (4, 4, 4, 4, 4),
        lambda x: x[::2, ::2, ::2, ::2],
        "needs 5 DMA dimensions, more than a shim descriptor's four",
        id="five-dims",
    ),
    pytest.param(
        (100, 3, 3, 8),
        lambda x: x[:, ::2, ::2, :],
        "is not one shim descriptor (iteration <= 64 outermost",
        id="iteration-over-64",
    ),
    pytest.param(
        (1031, 4),
        lambda x: x[:, :2],
        "is not one shim descriptor",
        id="prime-rows-over-wrap",
    ),
    pytest.param(
        (64, 4),
        lambda x: x[list(range(0, 36, 2))],
        "the view is 18 shim descriptors (gather), over the shim tile's 16",
        id="gather-runs",
    ),
]


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("shape, view, words", COPY_REFUSED)
def test_copy_refuses_views_a_dma_cannot_walk(shape, view, words, dev):
    with iron.use_device(dev):
        with pytest.raises(RefusedShapeError) as info:
            CopyOf(view).record(x=shape)
        assert str(info.value).startswith(f"Copy on {dev}: ")
        assert words in str(info.value)
        # The host reference still runs it.
        x = np.arange(np.prod(shape)).astype(bfloat16).reshape(shape)
        index = view(x)
        assert same_bits(CopyOf(view).reference(x), index)


def test_copy_refuses_a_misaligned_per_call_offset():
    class Row(iron.Graph):
        def body(self, x, *, i: iron.Scratchpad[int]):
            return Copy.step(x[i])

    with iron.use_device("npu2"):
        with pytest.raises(
            RefusedShapeError,
            match=r"moves the view by 3 elements \(6 bytes\) per unit",
        ):
            Row().record(x=(8, 3))
        Row().record(x=(8, 4))


def test_long_walks_split_into_descriptor_dimensions():
    # 2048 rows split as 4 x 512; a 4096-word contiguous row as 8 x 512 words.
    with iron.use_device("npu2"):
        CopyOf(lambda x: x[:, :2]).record(x=(2048, 4))
        CopyOf(lambda x: x[::2]).record(x=(4, 8192))


@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_copy_resolves_with_no_tunables_and_checks(dev):
    op = Copy(shape=(4, 8)).resolved(dev)
    assert op.open_tunables() == () and op.resolve(dev) == {}
    with pytest.raises(RefusedShapeError, match="3 elements"):
        Copy(shape=(3,)).resolved(dev)


def _work(cost: Cost) -> tuple[int, int]:
    """A cost's MACs and bytes: what the shape alone fixes."""
    return cost.macs, cost.bytes


def _tiling(cost: Cost) -> tuple[int, int, int, int]:
    """How a cost is spread: columns, cores, calls per core, bytes re-read."""
    return cost.columns, cost.cores, cost.calls, cost.reread_bytes


def test_copy_is_the_view_consumer():
    assert Copy.consumes_views
    assert not Transpose.consumes_views and not Repeat.consumes_views
    assert Copy(shape=(2,)).tolerance().kind == "exact"


# -- Transpose ----------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    batch=st.one_of(st.none(), st.integers(1, 3)),
    rows=st.integers(1, 12),
    cols=st.integers(1, 12),
    seed=st.integers(0, 2**32 - 1),
)
def test_transpose_reference_is_exact(batch, rows, cols, seed):
    shape = (rows, cols) if batch is None else (batch, rows, cols)
    x = bf16_bits(shape, np.random.default_rng(seed))
    op = Transpose(batch=batch, rows=rows, cols=cols)
    got = op.reference(x)
    oracle = np.swapaxes(x.astype(np.float64), -1, -2)
    assert got.shape == op.output_shapes()[0]
    assert got.flags.c_contiguous
    assert same_bits(got, np.swapaxes(x, -1, -2))
    exact_against_float64(got, oracle)


def test_transpose_wrong_models_are_caught():
    x = np.arange(8 * 16).astype(bfloat16).reshape(8, 16)
    want = x.T.astype(np.float64)
    tol = Transpose(rows=8, cols=16).tolerance()
    assert not compare(x.reshape(16, 8), want, tol)  # a reshape is no transpose
    square = np.array([[1.0, 1.0078125], [1.0078125, 1.0]], bfloat16)
    assert compare(square, square.T.astype(np.float64), tol)  # symmetric: equal


class Transposed(iron.Graph):
    def body(self, x):
        return Transpose.step(x)


class TransposedRows(iron.Graph):
    def body(self, x, *, n: iron.Scratchpad[int]):
        return Transpose.step(x[:n])


@pytest.mark.parametrize("shape", [(16, 24), (3, 16, 8)])
def test_transpose_in_a_graph(shape):
    x = bf16_bits(shape, np.random.default_rng(4))
    with iron.use_device("npu2"):
        recording = Transposed().record(x=shape)
        got = Transposed().reference(x)
    op = recording.steps[0].op
    assert (op.rows, op.cols) == shape[-2:]
    assert op.batch == (shape[0] if len(shape) == 3 else None)
    assert same_bits(got, op.reference(x))


def test_transpose_bounds_follow_their_axes():
    x = bf16_bits((16, 8), np.random.default_rng(5))
    with iron.use_device("npu2"):
        recording = TransposedRows().record(x=(16, 8))
        got = TransposedRows().reference(x, n=5)
        batched = Transposed().record(x=(4, 16, 8))
    (out,) = recording.steps[0].outputs
    assert out.shape == (8, 16) and set(out.valid) == {1}
    assert same_bits(got, x[:5].T)
    assert batched.steps[0].op.output_valid(
        [iron.core.handle.Handle.whole((4, 16, 8), bfloat16, "x", "input")[:2]]
    ) == [{}]
    op = Transpose(batch=4, rows=16, cols=8)
    h = iron.core.handle.Handle.whole((4, 16, 8), bfloat16, "x", "input")
    bounded = iron.core.handle.Handle(
        h.buffer, h.shape, h.dtype, {0: 2, 1: 3}, h.layout
    )
    assert op.output_valid([bounded]) == [{0: 2, 2: 3}]


def test_transpose_takes_two_or_three_dimensions():
    with iron.use_device("npu2"):
        with pytest.raises(ValueError, match=r"x has shape \[2, 2, 8, 8\]; it takes"):
            Transposed().record(x=(2, 2, 8, 8))


@settings(max_examples=150, deadline=None)
@given(
    batch=st.one_of(st.none(), st.integers(1, 4)),
    rows=st.integers(1, 64).map(lambda r: 8 * r),
    cols=st.integers(1, 64).map(lambda c: 8 * c),
    dev=st.sampled_from(DEVICES),
)
def test_transpose_resolve_is_legal(batch, rows, cols, dev):
    op = Transpose(batch=batch, rows=rows, cols=cols).resolved(dev)
    assert rows % op.tile_rows == 0 and cols % op.tile_cols == 0
    assert op.tile_rows % 8 == 0 and op.tile_cols % 8 == 0
    assert 4 * op.tile_rows * op.tile_cols * 2 + 1024 <= dev.core_memory_bytes
    assert op.num_aie_columns <= dev.columns


def test_transpose_resolve_picks():
    assert Transpose(rows=2048, cols=64).resolve(NPU2) == {
        "tile_rows": 64,
        "tile_cols": 64,
        "num_aie_columns": 8,
    }
    assert Transpose(rows=8, cols=24).resolve(NPU1) == {
        "tile_rows": 8,
        "tile_cols": 24,
        "num_aie_columns": 1,
    }


@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_transpose_cost_follows_the_blocks(dev):
    op = Transpose(
        batch=2, rows=64, cols=64, tile_rows=16, tile_cols=32, num_aie_columns=2
    )
    # 2 * 4 * 2 = 16 blocks over 2 columns: 8 kernel calls a core.
    assert _tiling(op.cost(dev)) == (2, 2, 8, 0)
    bigger = op.replace(tile_rows=32)
    wider = op.replace(num_aie_columns=4)
    assert step_time(bigger, dev).seconds < step_time(op, dev).seconds
    assert step_time(wider, dev).seconds < step_time(op, dev).seconds


def test_copy_and_repeat_are_dma_only():
    for op in (Copy(shape=(4, 8)), Repeat(rows=2, row_shape=(16,), repeat=4)):
        assert _tiling(op.cost(NPU2)) == (1, 0, 0, 0)
        assert step_time(op, NPU2).compute_s == 0


# -- Repeat ------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    hnp.arrays(np.uint16, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5)),
    st.integers(1, 5),
)
def test_repeat_reference_is_exact(bits, repeat):
    x = bits.view(bfloat16)
    op = Repeat(rows=x.shape[0], row_shape=x.shape[1:], repeat=repeat)
    got = op.reference(x)
    oracle = np.stack(
        [x.astype(np.float64)[i // repeat] for i in range(len(x) * repeat)]
    )
    assert got.shape == op.output_shapes()[0]
    exact_against_float64(got, oracle)
    assert same_bits(got, np.repeat(x, repeat, axis=0))


def test_repeat_is_not_tile():
    x = np.array([[1.0, 2.0], [1.0078125, 2.015625]], bfloat16)  # 1-ulp apart
    want = np.repeat(x, 2, axis=0).astype(np.float64)
    tiled = np.tile(x, (2, 1))
    tol = Repeat(rows=2, row_shape=(2,), repeat=2).tolerance()
    assert compare(tiled, want, Tolerance.bf16_ulps(1))
    assert not compare(tiled, want, tol)


class Expand(iron.Graph):
    def __init__(self, group):
        self.group = group

    def body(self, k, *, n: iron.Scratchpad[int]):
        return Repeat.step(k[:n], repeat=self.group)


def test_repeat_expands_kv_heads_in_a_graph():
    k = bf16_bits((2, 4, 16), np.random.default_rng(6))
    graph = Expand(4)
    with iron.use_device("npu2"):
        recording = graph.record(k=(2, 4, 16))
        whole = graph.reference(k, n=2)
        part = graph.reference(k, n=1)
    op = recording.steps[0].op
    assert (op.rows, op.row_shape, op.repeat, op.itemsize) == (2, (4, 16), 4, 2)
    (out,) = recording.steps[0].outputs
    assert out.shape == (8, 4, 16) and str(out.valid[0]) == "4 * n"
    assert same_bits(whole, k[[0, 0, 0, 0, 1, 1, 1, 1]])
    assert same_bits(part, k[[0, 0, 0, 0]])


def test_repeat_of_int32_rows():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert np.array_equal(
        Repeat(rows=3, row_shape=(4,), repeat=2, itemsize=4).reference(x),
        np.repeat(x, 2, axis=0),
    )


def test_repeat_cost_by_hand():
    # x re-read once per copy and the result written: 2 * (2 * 4 * 16) bf16.
    assert _work(Repeat(rows=2, row_shape=(16,), repeat=4).cost(NPU2)) == (0, 512)
