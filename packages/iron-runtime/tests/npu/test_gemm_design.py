"""The GEMM design: golden text, FileCheck patterns, the data it moves, legality.

Golden files ``golden/gemm_<case>_<dev>.mlir``: ``16x2048x2048`` is a Llama
prompt projection (M=16 K=2048 N=2048) at the default resolved tunables;
``bt_high_256x512x512`` a transposed ``b`` at HIGH on two columns, four cores
each (the ``a`` rows then share a memory tile and are distributed);
``bt_16x2048x128256`` the Llama LM head (M=16 K=2048 N=128256, ``b``
transposed) at NPU1's tuning profile (tile 16 x 128 x 64 on four columns),
whose sequence runs in blocks that reuse buffer descriptors after waits.
Regenerate with ``IRON_UPDATE_GOLDEN=1``.

The data-movement tests decode every shim transfer (``legality.encode`` /
``shim_elements``) and replay the whole design in numpy: the shim walks, the
memory tiles' links and ``dimensionsToStream`` patterns, a kernel reading the
blocks its contract states, the join and the write-back; the result must be
``GEMM.reference`` exactly (integer data, so fp32 sums are exact).
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from ml_dtypes import bfloat16

from iron.core.device import as_device
from iron.core.operator import RefusedShapeError
from iron.core.precision import Precision
from iron.core.tolerance import compare
from iron.operators import GEMM
from iron.operators.matmul import STACK_BYTES
from iron.runtime.image import Placement
from iron.runtime.npu import LegalityError, legality
from iron.runtime.npu.designs import build_design, design, gemm, gemm_schedule
from iron.runtime.npu.kernels import contract

from .support import (
    MATMUL_MODELS,
    check_golden,
    filecheck,
    kernel_harness,
)

CASES = {
    "16x2048x2048": dict(M=16, K=2048, N=2048),
    "bt_high_256x512x512": dict(
        M=256, K=512, N=512, b_transposed=True, precision="high", num_aie_columns=2
    ),
    "bt_16x2048x128256": dict(
        M=16,
        K=2048,
        N=128256,
        b_transposed=True,
        tile_m=16,
        tile_k=128,
        tile_n=64,
        num_aie_columns=4,
    ),
}


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case, dev):
    text = design(GEMM(**CASES[case]), dev)
    check_golden(f"gemm_{case}", dev, text, subject=f"the GEMM design {case} on {dev}")


CHECK_LLAMA_NPU1 = """\
// CHECK: mlir-aie v1.4.1
// CHECK-LABEL: aie.device(npu1) @main {
// CHECK: func.func private @gemm_f32_zero(memref<16x64xf32>, i32, i32) attributes {link_with = "gemm.o"}
// CHECK: func.func private @gemm_bf16_acc(memref<16x128xbf16>, memref<128x64xbf16>, memref<16x64xf32>, i32, i32, i32) attributes {link_with = "gemm.o"}
// CHECK: func.func private @gemm_bf16_store(memref<16x64xf32>, memref<16x64xbf16>, i32, i32) attributes {link_with = "gemm.o"}
// CHECK-DAG: %[[SHIM0:.*]] = aie.tile(0, 0)
// CHECK-DAG: %[[MEM0:.*]] = aie.tile(0, 1)
// CHECK-DAG: %[[C00:.*]] = aie.tile(0, 2)
// CHECK-DAG: %[[C30:.*]] = aie.tile(3, 2)
// CHECK-NOT: aie.tile(0, 3)
// CHECK: aie.objectfifo @a_0(%[[SHIM0]], {%[[MEM0]]}, 2 : i32) : !aie.objectfifo<memref<2048xbf16>>
// CHECK: aie.objectfifo @a_row0(%[[MEM0]] dimensionsToStream [<size = 4, stride = 512>, <size = 16, stride = 8>, <size = 4, stride = 128>, <size = 8, stride = 1>], {%[[C00]], %{{.*}}, %{{.*}}, %[[C30]]}, 2 : i32) : !aie.objectfifo<memref<16x128xbf16>>
// CHECK: aie.objectfifo.link [@a_0] -> [@a_row0] ([] [])
// CHECK: aie.objectfifo @b_col0(%[[MEM0]] dimensionsToStream [<size = 16, stride = 512>, <size = 16, stride = 4>, <size = 8, stride = 64>, <size = 4, stride = 1>], {%[[C00]]}, 2 : i32) : !aie.objectfifo<memref<128x64xbf16>>
// CHECK: aie.objectfifo.link [@b_0] -> [@b_col0] ([] [])
// CHECK: aie.objectfifo @c_0_0(%[[C00]], {%[[MEM0]]}, 2 : i32) : !aie.objectfifo<memref<16x64xbf16>>
// CHECK: aie.objectfifo @out_0(%[[MEM0]] dimensionsToStream [<size = 4, stride = 256>, <size = 4, stride = 4>, <size = 16, stride = 16>, <size = 4, stride = 1>], {%[[SHIM0]]}, 2 : i32)
// CHECK: aie.objectfifo.link [@c_0_0] -> [@out_0] ([] [])
// CHECK-NOT: @a_1(
// CHECK: %[[ACC:.*]] = aie.buffer(%[[C00]]) {sym_name = "acc_0_0"} : memref<16x64xf32>
// CHECK: aie.core(%[[C00]]) {
// CHECK: %[[TILES:.*]] = arith.constant 8 : index
// CHECK: %[[KT:.*]] = arith.constant 16 : index
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[TILES]]
// CHECK: func.call @gemm_f32_zero(%[[ACC]],
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[KT]]
// CHECK: aie.objectfifo.acquire @a_row0(Consume, 1)
// CHECK: aie.objectfifo.acquire @b_col0(Consume, 1)
// CHECK: func.call @gemm_bf16_acc(%{{.*}}, %{{.*}}, %[[ACC]],
// CHECK: aie.objectfifo.release @a_row0(Consume, 1)
// CHECK: aie.objectfifo.release @b_col0(Consume, 1)
// CHECK: aie.objectfifo.acquire @c_0_0(Produce, 1)
// CHECK: func.call @gemm_bf16_store(%[[ACC]],
// CHECK: aie.objectfifo.release @c_0_0(Produce, 1)
// CHECK: aie.end
// CHECK: aie.runtime_sequence @sequence(%[[A:.*]]: memref<32768xbf16>, %[[B:.*]]: memref<4194304xbf16>, %[[O:.*]]: memref<32768xbf16>) {
// CHECK: aiex.npu.dma_memcpy_nd(%[[O]][0, 0, 0, 0][1, 8, 16, 64][0, 256, 2048, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[A]][0, 0, 0, 0][8, 16, 16, 128][0, 128, 2048, 1]) {id = 1 : i64, metadata = @a_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[B]][0, 0, 0, 0][8, 16, 128, 64][256, 262144, 2048, 1]) {id = 2 : i64, metadata = @b_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[B]][0, 0, 0, 192]{{.*}} {id = 1 : i64, metadata = @b_3}
// CHECK: aiex.npu.dma_wait {symbol = @out_0}
// CHECK: aiex.npu.dma_wait {symbol = @out_3}
"""

CHECK_BT_HIGH_NPU2 = """\
// CHECK-LABEL: aie.device(npu2) @main {
// CHECK-NOT: @gemm_bf16_acc(
// CHECK: func.func private @gemm_bf16_acc_round_bt(memref<64x64xbf16>, memref<32x64xbf16>, memref<64x32xf32>, i32, i32, i32)
// CHECK: aie.tile(1, 5)
// CHECK-NOT: aie.tile(2,
// CHECK: aie.objectfifo @a_0(%{{.*}}, {%{{.*}}}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
// CHECK: aie.objectfifo.link [@a_0] -> [@a_row0, @a_row1] ([] [0, 4096])
// CHECK: aie.objectfifo.link [@a_1] -> [@a_row2, @a_row3] ([] [0, 4096])
// CHECK: aie.objectfifo @b_col0(%{{.*}} dimensionsToStream [<size = 4, stride = 512>, <size = 8, stride = 8>, <size = 8, stride = 64>, <size = 8, stride = 1>], {{.*}} : !aie.objectfifo<memref<32x64xbf16>>
// CHECK: aie.objectfifo.link [@c_0_0, @c_0_1, @c_0_2, @c_0_3] -> [@out_0] ([0, 2048, 4096, 6144] [])
// CHECK: func.call @gemm_bf16_acc_round_bt(
"""


def test_filecheck_llama_prompt_npu1(tmp_path):
    filecheck(tmp_path, CHECK_LLAMA_NPU1, design(GEMM(**CASES["16x2048x2048"]), "npu1"))


def test_filecheck_transposed_high_npu2(tmp_path):
    text = design(GEMM(**CASES["bt_high_256x512x512"]), "npu2")
    filecheck(tmp_path, CHECK_BT_HIGH_NPU2, text)


def test_filecheck_catches_a_changed_layout(tmp_path):
    text = design(GEMM(**CASES["16x2048x2048"]), "npu1")
    text = text.replace("<size = 8, stride = 1>]", "<size = 8, stride = 2>]")
    with pytest.raises(AssertionError):
        filecheck(tmp_path, CHECK_LLAMA_NPU1, text)


# -- what the shims move -------------------------------------------------------------


def _moved(lay: legality.Layout, fifo: str) -> np.ndarray:
    parts = [
        legality.shim_elements(
            legality.encode(t.sizes, t.strides, t.offset, t.itemsize)
        )
        for t in lay.transfers
        if t.fifo == fifo
    ]
    return np.concatenate(parts)


def _tiles(op, p: gemm_schedule.GemmTiling, order: str):
    """``(p, q)`` of each output tile a core computes, in the core's order."""
    m, n = range(p.m_passes), range(p.n_passes)
    if order == "mn":
        return list(itertools.product(m, n))
    return [(pm, qn) for qn, pm in itertools.product(n, m)]


def _expected(op, dev) -> dict[str, np.ndarray]:
    """Each shim FIFO's element indices, from GEMM's access semantics."""
    p, order = gemm_schedule.tiling(op, dev), gemm_schedule.tile_order(op, dev)
    M, K, N = op.M, op.K, op.N
    R, cols, tm, tk, tn = p.rows, p.columns, p.tm, p.tk, p.tn
    A = np.arange(M * K).reshape(M, K)
    B = np.arange(K * N).reshape((N, K) if op.b_transposed else (K, N))
    OUT = np.arange(M * N).reshape(M, N)
    want: dict[str, list[np.ndarray]] = {}
    for pm, qn in _tiles(op, p, order):
        for g, rows in enumerate(p.groups):
            lo = (pm * R + rows[0]) * tm
            for k in range(p.k_tiles):
                blk = A[lo : lo + len(rows) * tm, k * tk : (k + 1) * tk]
                want.setdefault(f"a_{g}", []).append(blk.ravel())
        for c in range(cols):
            n0 = (qn * cols + c) * tn
            for k in range(p.k_tiles):
                ks = slice(k * tk, (k + 1) * tk)
                blk = B[n0 : n0 + tn, ks] if op.b_transposed else B[ks, n0 : n0 + tn]
                want.setdefault(f"b_{c}", []).append(blk.ravel())
            blk = OUT[pm * R * tm : (pm + 1) * R * tm, n0 : n0 + tn]
            want.setdefault(f"out_{c}", []).append(blk.ravel())
    return {k: np.concatenate(v) for k, v in want.items()}


NARROW = dict(tile_n=16, tile_k=32, num_aie_columns=1)
SHAPES = [
    ("npu1", dict(M=16, K=512, N=1024)),  # a repeated per N pass: stride-0 iteration
    ("npu2", dict(M=16, K=512, N=1024, b_transposed=True)),
    ("npu1", dict(M=512, K=128, N=256)),  # M and N passes: one transfer per pass
    ("npu2", dict(M=256, K=128, N=256, b_transposed=True, num_aie_columns=2)),
    ("npu1", dict(M=256, K=256, N=128, num_aie_columns=1)),  # rows share one shim
    ("npu2", dict(M=48, K=256, N=256, tile_m=16)),  # three cores a column
    ("npu1", dict(M=1024, K=128, N=256)),  # more M passes than N: N passes outer
    # Blocked sequences (descriptors reused after waits): whole M passes a
    # block, and parts of the one M pass.
    (
        "npu1",
        dict(M=1024, K=128, N=512, b_transposed=True, tile_n=64, num_aie_columns=1),
    ),
    ("npu2", dict(M=16, K=128, N=8192, b_transposed=True, **NARROW)),
    ("npu1", dict(M=128, K=64, N=4096, b_transposed=True, tile_m=16, **NARROW)),
]
BLOCKED = SHAPES[-3:]


def test_both_tile_orders_are_exercised():
    orders = {
        gemm_schedule.tile_order(GEMM(**f).resolved(d), as_device(d)) for d, f in SHAPES
    }
    assert orders == {"mn", "nm"}


@pytest.mark.parametrize(("dev", "fields"), SHAPES)
def test_shim_transfers_move_exactly_the_tiles_the_cores_consume(dev, fields):
    d = as_device(dev)
    op = GEMM(**fields).resolved(d)
    lay = build_design(op, d).layout
    want = _expected(op, d)
    assert {t.fifo for t in lay.transfers} == set(want)
    for fifo, indices in want.items():
        np.testing.assert_array_equal(_moved(lay, fifo), indices, err_msg=fifo)
    for t in lay.transfers:
        assert not legality.shim_transfer_problems(
            d, t.sizes, t.strides, t.offset, t.itemsize
        )


def _grid(t: legality.Transfer) -> np.ndarray:
    """A transfer's element indices by its 4-D sizes and strides (numpy, fast)."""
    axes = [
        (np.arange(n, dtype=np.int64) * s).reshape(
            [-1 if i == k else 1 for i in range(4)]
        )
        for k, (n, s) in enumerate(zip(t.sizes, t.strides))
    ]
    return (t.offset + sum(axes)).ravel()


def test_a_stride_beyond_the_step_field_is_unrolled_into_transfers():
    # b (N, K) with K=8192: the next N pass of a column is 8 * 64 * 8192
    # elements on, 2**21 words, past the 20-bit step: one transfer per pass.
    d = as_device("npu2")
    op = GEMM(M=16, K=8192, N=1024, b_transposed=True, tile_n=64).resolved(d)
    lay = build_design(op, d).layout
    want = _expected(op, d)
    for c in (0, 7):
        ts = [t for t in lay.transfers if t.fifo == f"b_{c}"]
        assert len(ts) == gemm_schedule.tiling(op, d).n_passes == 2
        assert all(t.sizes[0] == 1 and max(t.strides) <= 1 << 21 for t in ts)
        np.testing.assert_array_equal(
            np.concatenate([_grid(t) for t in ts]), want[f"b_{c}"]
        )


def test_the_fast_decode_agrees_with_legalitys_shim_model():
    d = as_device("npu1")
    lay = build_design(GEMM(M=512, K=128, N=256), d).layout
    for t in lay.transfers:
        got = legality.shim_elements(legality.encode(t.sizes, t.strides, t.offset, 2))
        np.testing.assert_array_equal(_grid(t), got)


def _walk(dims: list[tuple[int, int]]) -> np.ndarray:
    """The element offsets a ``dimensionsToStream`` pattern reads, in order."""
    sizes = [n for n, _ in dims]
    strides = np.array([s for _, s in dims])
    return np.array([np.dot(i, strides) for i in np.ndindex(*sizes)], dtype=np.int64)


def _blocks(x: np.ndarray, r: int, c: int) -> np.ndarray:
    """``x`` (rows x cols) as ``r x c`` blocks, row blocks outer, each row-major."""
    h, w = x.shape
    return x.reshape(h // r, r, w // c, c).transpose(0, 2, 1, 3).ravel()


def _unblock(flat: np.ndarray, h: int, w: int, r: int, c: int) -> np.ndarray:
    return flat.reshape(h // r, w // c, r, c).transpose(0, 2, 1, 3).reshape(h, w)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("transposed", [False, True])
def test_memory_tile_patterns_make_the_kernels_blocks(dev, transposed):
    d = as_device(dev)
    op = GEMM(M=128, K=256, N=256, b_transposed=transposed).resolved(d)
    p = gemm_schedule.tiling(op, d)
    r, s, t = p.mmul
    tm, tk, tn = p.tm, p.tk, p.tn
    a = np.arange(tm * tk).reshape(tm, tk)
    np.testing.assert_array_equal(
        a.ravel()[_walk(gemm.stream_dims(op, p, "a"))], _blocks(a, r, s)
    )
    if transposed:  # (N, K) tile: t x s blocks, n blocks outer
        bt = np.arange(tn * tk).reshape(tn, tk)
        want = _blocks(bt, t, s)
    else:  # s x t blocks, k blocks outer
        bt = np.arange(tk * tn).reshape(tk, tn)
        want = _blocks(bt, s, t)
    np.testing.assert_array_equal(bt.ravel()[_walk(gemm.stream_dims(op, p, "b"))], want)
    # The joined C tiles (each r x t blocks) stream out row-major.
    tiles = np.arange(p.rows * tm * tn).reshape(p.rows * tm, tn)
    joined = np.concatenate([_blocks(x, r, t) for x in np.split(tiles, p.rows)])
    np.testing.assert_array_equal(
        joined[_walk(gemm.stream_dims(op, p, "out"))], tiles.ravel()
    )
    for dims in (gemm.stream_dims(op, p, f) for f in ("a", "b", "out")):
        assert all(n <= 1023 for n, _ in dims) and dims[-1][1] == 1


def _replay(op, dev, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The design's data movement in numpy, with a kernel reading its contract's blocks."""
    d = as_device(dev)
    lay = build_design(op, d).layout
    p = gemm_schedule.tiling(op, d)
    r, s, t = p.mmul
    R, tm, tk, tn, nk = p.rows, p.tm, p.tk, p.tn, p.k_tiles
    flat = {"a": a.ravel(), "b": b.ravel()}

    def elements(fifo: str, port: str, size: int) -> list[np.ndarray]:
        stream = flat[port][_moved(lay, fifo)]
        return np.split(stream, len(stream) // size)

    a_rows: dict[int, list[np.ndarray]] = {}
    for g, rows in enumerate(p.groups):  # distribute, then re-lay
        for e in elements(f"a_{g}", "a", len(rows) * tm * tk):
            for i, row in enumerate(rows):
                tile = e[i * tm * tk : (i + 1) * tm * tk]
                a_rows.setdefault(row, []).append(
                    tile[_walk(gemm.stream_dims(op, p, "a"))]
                )
    out = np.zeros((op.M, op.N), np.float32)
    level = op.effective_precision
    for c in range(p.columns):
        b_tiles = [
            e[_walk(gemm.stream_dims(op, p, "b"))]
            for e in elements(f"b_{c}", "b", tk * tn)
        ]
        joined = []
        for j in range(p.tiles):
            blocks = []
            for row in range(R):
                acc = np.zeros((tm, tn), np.float32)
                for k in range(nk):
                    at = _unblock(a_rows[row][j * nk + k], tm, tk, r, s)
                    bk = b_tiles[j * nk + k]
                    if op.b_transposed:
                        bk = _unblock(bk, tn, tk, t, s).T
                    else:
                        bk = _unblock(bk, tk, tn, s, t)
                    acc = acc + at.astype(np.float32) @ bk.astype(np.float32)
                    if level is Precision.HIGH:
                        acc = acc.astype(bfloat16).astype(np.float32)
                blocks.append(_blocks(acc.astype(bfloat16).astype(np.float32), r, t))
            joined.append(np.concatenate(blocks)[_walk(gemm.stream_dims(op, p, "out"))])
        stream = np.concatenate(joined)
        out.ravel()[_moved(lay, f"out_{c}")] = stream
    return out.astype(bfloat16)


@pytest.mark.parametrize(
    ("dev", "fields"),
    [
        ("npu1", dict(M=64, K=128, N=128, tile_k=32)),
        (
            "npu2",
            dict(M=64, K=128, N=256, b_transposed=True, precision="high", tile_k=32),
        ),
        (
            "npu1",
            dict(M=128, K=64, N=64, num_aie_columns=1, precision="high", tile_k=16),
        ),
        ("npu2", dict(M=96, K=64, N=128, num_aie_columns=2, tile_m=16, tile_n=32)),
        ("npu1", dict(M=256, K=32, N=128, tile_m=16, tile_n=32, num_aie_columns=2)),
        BLOCKED[0],  # a blocked sequence
    ],
)
def test_the_design_replayed_in_numpy_is_the_reference(dev, fields):
    op = GEMM(**fields).resolved(dev)
    rng = np.random.default_rng(3)
    a = rng.integers(-3, 4, (op.M, op.K)).astype(bfloat16)
    shape_b = (op.N, op.K) if op.b_transposed else (op.K, op.N)
    b = rng.integers(-3, 4, shape_b).astype(bfloat16)
    got = _replay(op, dev, a, b)
    np.testing.assert_array_equal(
        got.astype(np.float32), op.reference(a, b).astype(np.float32)
    )


# -- legality, refusals, placement, the kernel ---------------------------------------


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_core_memory_is_exactly_what_check_counts(case, dev):
    d = as_device(dev)
    op = GEMM(**CASES[case]).resolved(d)
    lay = gemm.layout(op, d)
    core = lay.cores[-1]
    held = sum(
        f.depth * f.element_bytes
        for f in lay.fifos
        if core in (f.producer, *f.consumers)
    )
    held += sum(n for t, n in lay.buffers if t == core)
    assert held == op._need(op.tile_m, op.tile_k, op.tile_n)
    assert held + STACK_BYTES <= d.core_memory_bytes


def test_rows_sharing_a_shim_stay_within_the_memory_tiles_channels():
    d = as_device("npu1")
    op = GEMM(M=512, K=1024, N=256, num_aie_columns=1).resolved(d)
    p = gemm_schedule.tiling(op, d)
    assert p.rows == 4 and p.groups == ((0, 1, 2, 3),)
    lay = gemm.layout(op, d)
    mem = legality.Tile(0, 1)
    out = sum(f.producer == mem for f in lay.fifos)
    into = sum(mem in f.consumers for f in lay.fifos)
    assert (out, into) == (6, 6)  # four a rows + b + out; a + b + four c
    legality.check(lay, d)


# -- blocked sequences: buffer descriptors reused after waits ----------------------


@pytest.mark.parametrize(("dev", "fields"), BLOCKED)
def test_blocked_shapes_run_in_blocks(dev, fields):
    d = as_device(dev)
    op = GEMM(**fields).resolved(d)
    assert len(gemm_schedule.schedule(op, d).blocks) > 1
    lay = gemm.layout(op, d)
    assert len(lay.transfers) > d.shim_bds  # more than one shim's ids at once
    legality.check(lay, d)


LLAMA = [
    dict(M=16, K=2048, N=128256, b_transposed=True),  # the LM head, resolved
    CASES["bt_16x2048x128256"],  # ... at NPU1's tuning profile
    dict(M=2048, K=2048, N=2048),
    dict(M=2048, K=2048, N=2048, b_transposed=True),
]


@pytest.mark.parametrize("fields", LLAMA)
@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_llama_shapes_pass_legality(dev, fields):
    d = build_design(GEMM(**fields), dev)  # legality included
    per_shim = collections.Counter(t.shim for t in d.layout.transfers)
    if max(per_shim.values()) > as_device(dev).shim_bds:
        assert d.layout.waits  # ids reused: only after waits
    for t in d.layout.transfers:
        assert 0 <= t.bd_id < 16


def _wait_sites(text: str) -> list[tuple[str, str]]:
    """``(kind, fifo)`` of every sequence line: ``dma`` (with its id) or ``wait``."""
    sites = []
    for line in text.splitlines():
        if m := re.search(r"dma_memcpy_nd.*id = (\d+) .*metadata = @(\w+)", line):
            sites.append((f"dma{m.group(1)}", m.group(2)))
        elif m := re.search(r"dma_wait \{symbol = @(\w+)\}", line):
            sites.append(("wait", m.group(1)))
    return sites


def test_blocks_alternate_id_halves_and_wait_for_the_block_before():
    d = as_device("npu1")
    op = GEMM(**CASES["bt_16x2048x128256"]).resolved(d)
    design_ = build_design(op, d)
    blocks = gemm_schedule.schedule(op, d).blocks
    assert [n for _, n in blocks] == [126, 126, 126, 123]  # 501 N passes
    lay = design_.layout
    outs = [f"out_{c}" for c in range(4)]
    # After block i (i >= 1) the waits for block i - 1; the last at the end.
    ends = list(itertools.accumulate(len(lay.transfers) // 4 for _ in blocks))
    want = [(e, f) for e in ends[1:] for f in outs] + [(ends[-1], f) for f in outs]
    assert list(lay.waits) == want
    for t in lay.transfers:  # ids from the block's half: 0..7, then 8..15
        block = next(i for i, e in enumerate(ends) if lay.transfers.index(t) < e)
        assert t.bd_id // 8 == block % 2
    # Tokens: the out transfer of each column and block, nothing else.
    assert [t.fifo for t in lay.transfers if t.token] == outs * len(blocks)
    # The text: an id is issued again only after a wait on its shim's out.
    sites = _wait_sites(design_.text)
    assert sum(k == "wait" for k, _ in sites) == len(want)
    assert sites[-4:] == [("wait", f) for f in outs]
    assert "issue_token = true, metadata = @out_0}" in design_.text


def test_legality_refuses_the_blocks_without_their_waits():
    d = as_device("npu1")
    lay = gemm.layout(GEMM(M=2048, K=2048, N=2048).resolved(d), d)
    legality.check(lay, d)
    end = len(lay.transfers)
    late = dataclasses.replace(lay, waits=tuple((end, f) for _, f in lay.waits))
    with pytest.raises(LegalityError, match=r"shim tile \(0, 0\): buffer .* reused"):
        legality.check(late, d)
    # Without waits at all (every transfer, then the outputs): each FIFO's
    # every transfer waits in its channel's task queue (issue 28).
    bare = dataclasses.replace(lay, waits=())
    with pytest.raises(LegalityError, match=r"@a_0 pushes 8 transfers .* holds 4"):
        legality.check(bare, d)


def test_a_block_may_end_inside_an_outer_pass():
    # Blocks cut anywhere in the tile order (here inside the M passes of
    # 256 N passes each) still move each FIFO's elements in the core's order.
    d = as_device("npu1")
    op = GEMM(**dict(BLOCKED[-1][1])).resolved(d)
    p = gemm_schedule.tiling(op, d)
    assert p.m_passes == 2 and p.n_passes == 256
    walks = gemm_schedule._walks(op, p, {q: (q, 0) for q in ("a", "b", "out")}, "mn")
    ts = [
        t
        for blk in ((0, 100), (100, 200), (300, 212))
        for t in gemm_schedule._block_transfers(p, d, walks, 256, blk, 0)
    ]
    lay = legality.Layout("blocks", (), (), tuple(ts))
    want = _expected(op, d)
    for fifo, indices in want.items():
        np.testing.assert_array_equal(_moved(lay, fifo), indices, err_msg=fifo)
    assert gemm_schedule._runs(100, 200, 256) == [
        (0, 100, 156, False),
        (1, 0, 44, False),
    ]
    assert gemm_schedule._runs(0, 512, 256) == [(0, 0, 2, True)]


def test_a_tile_that_does_not_fit_is_refused():
    op = GEMM(M=64, K=1024, N=256, tile_m=64, tile_k=256, tile_n=64)
    with pytest.raises(RefusedShapeError, match="double-buffered"):
        build_design(op, "npu1")
    # The design's own legality refuses the same tiles (without check()).
    d = as_device("npu1")
    fields = {
        **op.fields(),
        "num_aie_columns": 4,
        "effective_precision": Precision.HIGHEST,
        "fifo_depth": op.fifo_depth,
        "out_depth": 2,
    }
    with pytest.raises(LegalityError, match=r"compute tile \(0, 2\).*bytes"):
        legality.check(gemm.layout(SimpleNamespace(**fields), d), d)


def _core_bytes(op, dev):
    """The bytes legality counts on core (0, 2) of ``op``'s layout."""
    lay = gemm.layout(op, dev)
    core = legality.Tile(0, 2)
    fifos = sum(
        f.depth * f.element_bytes
        for f in lay.fifos
        if core == f.producer or core in f.consumers
    )
    return fifos + sum(n for t, n in lay.buffers if t == core) + lay.stack_bytes


def test_a_single_output_tile_fits_a_k_tile_twice_as_long():
    # Issue 20, target 5: at 64 x 64 output tiles a K tile of 64 needs
    # 64 KiB of tiles double-buffered (over the 63 KiB a core leaves them);
    # one bf16 output tile (out_depth=1) frees 8 KiB, and it fits. check()
    # and the design's legality count the same bytes.
    d = as_device("npu2")
    tiles = dict(M=512, K=2048, N=512, tile_m=64, tile_k=64, tile_n=64)
    double = GEMM(**tiles, num_aie_columns=8, out_depth=2)
    single = GEMM(**tiles, num_aie_columns=8, out_depth=1)
    with pytest.raises(RefusedShapeError, match="out_depth=2.*65536 bytes"):
        double.resolved(d)
    # The design's legality, given the tiles without check().
    unchecked = SimpleNamespace(
        **{**double.fields(), "effective_precision": Precision.HIGHEST},
        fifo_depth=2,
    )
    with pytest.raises(LegalityError, match=r"compute tile \(0, 2\).*bytes"):
        legality.check(gemm.layout(unchecked, d), d)
    built = build_design(single, d)
    assert _core_bytes(single.resolved(d), d) <= d.core_memory_bytes
    freed = _core_bytes(unchecked, d) - _core_bytes(single.resolved(d), d)
    assert freed == 64 * 64 * 2  # one bf16 output tile
    # The design emits the core's output FIFO at depth 1, the memory tile's
    # joined FIFO towards the shim (and every input FIFO) at depth 2.
    assert re.search(r"aie\.objectfifo @c_0_0\(%\S+, \{%\S+\}, 1 : i32\)", built.text)
    assert re.search(r"aie\.objectfifo @out_0\(.*\}, 2 : i32\)", built.text)
    assert re.search(r"aie\.objectfifo @b_col0\(.*\}, 2 : i32\)", built.text)
    shorter = design(double.replace(tile_k=32), d)  # out_depth=2 fits at K 32
    assert re.search(r"aie\.objectfifo @c_0_0\(%\S+, \{%\S+\}, 2 : i32\)", shorter)


def test_medium_has_no_design_on_npu2_and_runs_as_high_on_npu1():
    with pytest.raises(NotImplementedError, match=r"medium.*precision='high'"):
        build_design(GEMM(M=64, K=256, N=256, precision="medium"), "npu2")
    d = build_design(GEMM(M=64, K=256, N=256, precision="medium"), "npu1")
    assert "@gemm_bf16_acc_round(" in d.text


def test_arena_placement_reads_at_the_planned_offsets():
    op = GEMM(M=16, K=256, N=256, num_aie_columns=2)
    placement = {
        "a": Placement("arena", 1024, 16 * 256 * 2),
        "b": Placement("arena", 65536, 256 * 256 * 2),
        "out": Placement("output", 0, 16 * 256 * 2),
    }
    d = build_design(op, "npu2", placement, arena_bytes=1 << 20)
    assert d.args == ("arena", "out") and d.arg_bytes == (1 << 20, 8192)
    lay = d.layout
    a = [t for t in lay.transfers if t.fifo == "a_0"]
    assert a[0].buffer == "arena" and a[0].offset == 512  # byte 1024
    b1 = [t for t in lay.transfers if t.fifo == "b_1"]
    tn = op.resolved("npu2").tile_n
    assert b1[0].offset == 32768 + tn  # byte 65536, then column 1's first tile
    assert f"%arena[0, 0, 0, {32768 + tn}]" in d.text


def test_the_contract_parses_and_names_the_design_symbols():
    c = contract("gemm")
    assert c.operator.startswith("GEMM")
    named = set(re.findall(r"(gemm_\w+)\(", c.arguments))
    used = {*gemm.ACCUMULATE.values(), gemm.ZERO, gemm.STORE}
    assert named == used
    assert "(4, 8, 4)" in c.tile and "(4, 8, 8)" in c.tile
    assert "HIGHEST" in c.rounding and "HIGH (" in c.rounding
    source = c.path.read_text(encoding="utf-8")
    for symbol in used:
        assert f"void {symbol}(" in source
    for fields in CASES.values():
        op = GEMM(**fields).resolved("npu2")
        declared = set(re.findall(r"func\.func private @(\w+)\(", design(op, "npu2")))
        acc = gemm.ACCUMULATE[op.effective_precision, op.b_transposed]
        assert declared == {gemm.ZERO, acc, gemm.STORE}


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_the_kernel_geometry_is_the_operators_mmul_shape(dev):
    d = as_device(dev)
    op = GEMM(M=64, K=256, N=256).resolved(d)
    assert gemm_schedule.tiling(op, d).mmul == (
        (4, 8, 4) if dev == "npu1" else (4, 8, 8)
    )


def test_cores_and_tiles_follow_the_plan():
    d = as_device("npu2")
    op = GEMM(M=256, K=512, N=512).resolved(d)
    p = gemm_schedule.tiling(op, d)
    text = design(op, d)
    assert text.count("aie.core(") == p.columns * p.rows
    assert p.rows * p.m_passes * p.tm == op.M
    assert p.columns * p.n_passes * p.tn == op.N
    assert f"arith.constant {p.tiles} : index" in text


# -- the kernel, compiled for the host --------------------------------------------------


@pytest.fixture(scope="module", params=["npu2", "npu1"])
def host_gemm(request, tmp_path_factory) -> Path:
    build = tmp_path_factory.mktemp(f"gemm_{request.param}")
    return kernel_harness(build, "host_gemm", aie2=request.param == "npu1")


def _host_product(exe: Path, args: list, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    done = subprocess.run(
        [str(exe), *map(str, args)],
        input=a.view(np.uint16).tobytes() + b.view(np.uint16).tobytes(),
        capture_output=True,
        check=True,
    )
    return np.frombuffer(done.stdout, np.uint16).view(bfloat16)


@pytest.mark.parametrize("level", ["highest", "high"])
@pytest.mark.parametrize("bt", [False, True], ids=["b", "bt"])
def test_the_kernel_product_meets_gemm_reference(host_gemm, bt, level):
    """Each entry point (b or transposed b, HIGHEST or HIGH) on npu1's and
    npu2's mmul, over several tilings and on random and extreme values:
    within GEMM's derived bound, and the same bf16 as the reference all but
    rarely (its fp32 sums in another order)."""
    rng = np.random.default_rng(3)
    um, un = (8, 8) if "npu1" in host_gemm.parent.name else (8, 16)
    tilings = [
        (16, 256, 2 * un, 8, 128, un),
        (2 * um, 64, un, um, 64, un),
        (um, 512, 4 * un, um, 256, 2 * un),
    ]
    for (m, k, n, tm, tk, tn), case in itertools.product(tilings, ["random", "edge"]):
        op = GEMM(
            M=m, K=k, N=n, b_transposed=bt, precision=level, effective_precision=level
        ).replace(tile_k=tk)  # the K tile HIGH rounds after
        a = rng.standard_normal((m, k)).astype(bfloat16)
        b = rng.standard_normal((n, k) if bt else (k, n)).astype(bfloat16)
        if case == "edge":  # large and tiny values, and cancellation
            a[:, ::3] = np.float32(3e4)
            a[:, 1::3] = np.float32(1e-30)
            b[::5] = -b[::5]
        with np.errstate(all="ignore"):
            want = op.reference(a, b)
            tol = op.tolerance(a, b)
        for model in MATMUL_MODELS:
            args = [m, k, n, tm, tk, tn, int(bt), int(level == "high"), model]
            got = _host_product(host_gemm, args, a, b).reshape(m, n)
            verdict = compare(got, want, tol)
            assert verdict, (
                f"{case} {m}x{k}x{n} tiles {tm}x{tk}x{tn} {model}: {verdict}"
            )
            same = (got.view(np.uint16) == want.view(np.uint16)).mean()
            assert same >= 0.9, f"{case} {m}x{k}x{n} {model}: {same:.2f} bit-equal"


def test_a_b_read_in_the_other_layout_fails_the_reference(host_gemm):
    """The check can fail: b's bytes given to the transposed entry point
    (read as t x s blocks of an (N, K) matrix) are far from a @ b."""
    rng = np.random.default_rng(4)
    un = 8 if "npu1" in host_gemm.parent.name else 16
    m, k, n = 8, 64, 2 * un
    op = GEMM(M=m, K=k, N=n)
    a = rng.standard_normal((m, k)).astype(bfloat16)
    b = rng.standard_normal((k, n)).astype(bfloat16)
    args = [m, k, n, 8, 64, un, 0, 0, "itez"]
    right = _host_product(host_gemm, args, a, b).reshape(m, n)
    assert compare(right, op.reference(a, b), op.tolerance(a, b))
    args[6] = 1
    wrong = _host_product(host_gemm, args, a, b).reshape(m, n)
    assert not compare(wrong, op.reference(a, b), op.tolerance(a, b))


def _most_between_waits(lay) -> int:
    """The most transfers one FIFO queues between two of the layout's waits."""
    stops = sorted({pos for pos, _ in lay.waits} | {len(lay.transfers)})
    most, start = 0, 0
    for stop in stops:
        per = collections.Counter(t.fifo for t in lay.transfers[start:stop])
        most, start = max(most, *per.values(), 0), stop
    return most


def test_the_lm_head_gemm_keeps_each_channels_task_queue():
    # Issue 28, C3: the untuned npu2 LM-head GEMM pushed 6 transfers on a
    # channel with no wait (its descriptors fit); a channel queues 4 and the
    # hardware drops the rest, so the schedule blocks instead.
    d = as_device("npu2")
    op = GEMM(M=16, K=2048, N=128256, b_transposed=True).resolved(d)
    lay = gemm.layout(op, d)
    legality.check(lay, d)
    assert lay.waits
    assert _most_between_waits(lay) <= legality.TILE_LIMITS[d.arch].task_queue
