"""The GEMV design: golden text, FileCheck patterns, legality and the kernel contract.

Golden files (regenerate with ``IRON_UPDATE_GOLDEN=1``), each at the default
resolved tunables: ``golden/gemv_2048x2048_<dev>.mlir`` GEMV M=2048 K=2048;
``golden/gemv_batched_4x256x1024_<dev>.mlir`` GEMV M=256 K=1024 batch=4;
``golden/gemv_medium_2048x2048_npu2.mlir`` GEMV M=2048 K=2048 at
``precision="medium"`` (bfp16 on NPU2); ``golden/gemv_wide_64x4096_<dev>.mlir``
GEMV M=64 K=4096 (a Llama decode shape whose tile rows of 2048 bf16 are wider
than the shim's d0 wrap, walked in two halves, a transfer per row tile).

The design is also run here, on the host: its shim transfers are decoded
(``legality.encode`` / ``shim_elements``) into the streams each column's
FIFOs carry, a numpy emulation of the core's loops and of the kernels'
arithmetic (``gemv.cc``: 16 fp32 lanes then a reduction per K tile; bfp16
blocks of 8 through an 8x8x8 block multiply) consumes them, and the result is
judged against ``GEMV.reference`` with the operator's tolerance.
"""

from __future__ import annotations

import dataclasses
import re
from types import SimpleNamespace

import numpy as np
import pytest
from ml_dtypes import bfloat16

from iron.core.device import as_device
from iron.core.operator import RefusedShapeError
from iron.core.precision import Precision
from iron.core.tolerance import compare
from iron.operators import GEMV, bfp16
from iron.runtime.image import Placement
from iron.runtime.npu import LegalityError, legality
from iron.runtime.npu.designs import build_design, design, gemv
from iron.runtime.npu.kernels import contract

from .support import check_golden, filecheck

GOLDENS = [
    ("gemv_2048x2048", dict(M=2048, K=2048), "npu1"),
    ("gemv_2048x2048", dict(M=2048, K=2048), "npu2"),
    ("gemv_batched_4x256x1024", dict(M=256, K=1024, batch=4), "npu1"),
    ("gemv_batched_4x256x1024", dict(M=256, K=1024, batch=4), "npu2"),
    ("gemv_medium_2048x2048", dict(M=2048, K=2048, precision="medium"), "npu2"),
    ("gemv_wide_64x4096", dict(M=64, K=4096), "npu1"),
    ("gemv_wide_64x4096", dict(M=64, K=4096), "npu2"),
]


@pytest.mark.parametrize(("stem", "fields", "dev"), GOLDENS)
def test_golden(stem, fields, dev):
    text = design(GEMV(**fields), dev)
    check_golden(stem, dev, text, subject=f"the GEMV design {stem} on {dev}")


CHECK_GEMV_NPU1 = """\
// CHECK: mlir-aie v1.4.1
// CHECK-LABEL: aie.device(npu1) @main {
// CHECK: func.func private @gemv_f32_zero(memref<4xf32>, i32) attributes {link_with = "gemv.o"}
// CHECK: func.func private @gemv_bf16_acc(memref<4x2048xbf16>, memref<2048xbf16>, memref<4xf32>, i32, i32) attributes {link_with = "gemv.o"}
// CHECK: func.func private @gemv_bf16_store(memref<4xf32>, memref<4xbf16>, i32) attributes {link_with = "gemv.o"}
// CHECK-DAG: %[[SHIM0:.*]] = aie.tile(0, 0)
// CHECK-DAG: %[[CORE0:.*]] = aie.tile(0, 2)
// CHECK-NOT: aie.tile(4,
// CHECK: aie.objectfifo @w_0(%[[SHIM0]], {%[[CORE0]]}, 2 : i32) : !aie.objectfifo<memref<4x2048xbf16>>
// CHECK: aie.objectfifo @x_0(%[[SHIM0]], {%[[CORE0]]}, 2 : i32) : !aie.objectfifo<memref<2048xbf16>>
// CHECK: aie.objectfifo @out_0(%[[CORE0]], {%[[SHIM0]]}, 2 : i32) : !aie.objectfifo<memref<4xbf16>>
// CHECK: %[[ACC:.*]] = aie.buffer(%[[CORE0]]) {sym_name = "acc_0"} : memref<4xf32>
// CHECK: aie.core(%[[CORE0]]) {
// CHECK: %[[ROWS:.*]] = arith.constant 128 : index
// CHECK: %[[TM:.*]] = arith.constant 4 : i32
// CHECK: %[[TK:.*]] = arith.constant 2048 : i32
// CHECK: aie.objectfifo.acquire @x_0(Consume, 1)
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[ROWS]]
// CHECK: func.call @gemv_f32_zero(%[[ACC]], %[[TM]])
// CHECK: aie.objectfifo.acquire @w_0(Consume, 1)
// CHECK: func.call @gemv_bf16_acc(%{{.*}}, %{{.*}}, %[[ACC]], %[[TM]], %[[TK]])
// CHECK: aie.objectfifo.release @w_0(Consume, 1)
// CHECK: aie.objectfifo.acquire @out_0(Produce, 1)
// CHECK: func.call @gemv_bf16_store(%[[ACC]], %{{.*}}, %[[TM]])
// CHECK: aie.objectfifo.release @out_0(Produce, 1)
// CHECK: aie.objectfifo.release @x_0(Consume, 1)
// CHECK: aie.end
// CHECK: aie.runtime_sequence @sequence(%[[W:.*]]: memref<4194304xbf16>, %[[X:.*]]: memref<2048xbf16>, %[[O:.*]]: memref<2048xbf16>) {
// CHECK: aiex.npu.dma_memcpy_nd(%[[O]][0, 0, 0, 0][1, 1, 1, 512][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[W]][0, 0, 0, 0]{{.*}} {id = 1 : i64, metadata = @w_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[X]][0, 0, 0, 0]{{.*}} {id = 2 : i64, metadata = @x_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[W]][0, 0, 0, 3145728]
// CHECK: aiex.npu.dma_wait {symbol = @out_0}
// CHECK: aiex.npu.dma_wait {symbol = @out_3}
"""

CHECK_GEMV_HIGH_NPU2 = """\
// CHECK-LABEL: aie.device(npu2) @main {
// CHECK-NOT: @gemv_bf16_acc(
// CHECK: func.func private @gemv_bf16_acc_round(memref<4x512xbf16>, memref<512xbf16>, memref<4xf32>, i32, i32)
// CHECK: aie.objectfifo @w_0({{.*}}, 2 : i32) : !aie.objectfifo<memref<4x512xbf16>>
// CHECK: aie.objectfifo @x_0({{.*}}, 2 : i32) : !aie.objectfifo<memref<512xbf16>>
// CHECK: scf.for
// CHECK: func.call @gemv_f32_zero(
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step
// CHECK: aie.objectfifo.acquire @w_0(Consume, 1)
// CHECK: aie.objectfifo.acquire @x_0(Consume, 1)
// CHECK: func.call @gemv_bf16_acc_round(
// CHECK: aie.objectfifo.release @x_0(Consume, 1)
// CHECK: func.call @gemv_bf16_store(
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 0][32, 8, 4, 512][16384, 512, 4096, 1]) {id = 1 : i64, metadata = @w_0}
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 0][32, 1, 4, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @x_0}
"""

HIGH = dict(M=256, K=4096, tile_m=4, tile_k=512, num_aie_columns=2, precision="high")


def test_filecheck_gemv_npu1(tmp_path):
    filecheck(tmp_path, CHECK_GEMV_NPU1, design(GEMV(M=2048, K=2048), "npu1"))


def test_filecheck_gemv_high_streams_x_chunks(tmp_path):
    filecheck(tmp_path, CHECK_GEMV_HIGH_NPU2, design(GEMV(**HIGH), "npu2"))


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_default_design_uses_every_resolved_column(dev):
    op = GEMV(M=2048, K=2048).resolved(dev)
    d = build_design(op, dev)
    assert d.kernels == ("gemv",)
    assert d.args == ("w", "x", "out")
    assert d.arg_bytes == (2048 * 2048 * 2, 2048 * 2, 2048 * 2)
    assert d.text.count("aie.core(") == op.num_aie_columns


def _expected_walk(op, col: int) -> np.ndarray:
    """w's element indices for column ``col``, tile by tile."""
    rows = op.M // op.num_aie_columns
    idx = np.arange(op.M * op.K).reshape(op.M, op.K)[col * rows : (col + 1) * rows]
    tiles = idx.reshape(rows // op.tile_m, op.tile_m, op.K // op.tile_k, op.tile_k)
    return tiles.transpose(0, 2, 1, 3).reshape(-1)


@pytest.mark.parametrize(
    "fields",
    [
        dict(M=2048, K=2048),
        HIGH,
        dict(M=1024, K=1024, tile_m=2, tile_k=128, num_aie_columns=2),  # > 64 rows
    ],
)
def test_w_transfers_move_the_row_block_tile_by_tile(fields):
    op_dev = as_device("npu2")
    op = GEMV(**fields).resolved(op_dev)
    lay = gemv.layout(op, op_dev)
    for col in range(op.num_aie_columns):
        moved = [
            legality.shim_elements(
                legality.encode(t.sizes, t.strides, t.offset, t.itemsize)
            )
            for t in lay.transfers
            if t.fifo == f"w_{col}"
        ]
        assert all(
            not legality.shim_transfer_problems(op_dev, t.sizes, t.strides, t.offset, 2)
            for t in lay.transfers
        )
        np.testing.assert_array_equal(np.concatenate(moved), _expected_walk(op, col))


def test_x_is_repeated_per_row_tile_when_chunked():
    op = GEMV(**HIGH).resolved("npu2")
    lay = gemv.layout(op, as_device("npu2"))
    (t,) = [t for t in lay.transfers if t.fifo == "x_0"]
    moved = legality.shim_elements(legality.encode(t.sizes, t.strides, t.offset, 2))
    np.testing.assert_array_equal(moved, np.tile(np.arange(op.K), op.M // 2 // 4))


def test_a_tile_that_does_not_fit_is_refused():
    # w 8 x 4096 bf16 double-buffered is 128 KiB: over a 64 KiB core.
    op = GEMV(M=2048, K=8192, tile_m=8, tile_k=4096, num_aie_columns=4)
    with pytest.raises(RefusedShapeError, match="double-buffered"):
        build_design(op, "npu1")
    # The design's own legality refuses the same tiles (here without the
    # operator's check, which refuses them first in build_design).
    dev = as_device("npu1")
    tiles = SimpleNamespace(
        **{**op.fields(), "vector_width": 64, "fifo_depth": op.fifo_depth}
    )
    with pytest.raises(LegalityError, match=r"compute tile \(0, 2\).*bytes"):
        legality.check(gemv.layout(tiles, dev), dev)


def test_the_accumulator_counts_against_core_memory():
    dev = as_device("npu1")
    op = GEMV(M=2048, K=2048).resolved(dev)
    lay = gemv.layout(op, dev)
    assert lay.buffers and all(n == op.tile_m * 4 for _, n in lay.buffers)


def test_arena_placement_reads_at_the_planned_offsets():
    placement = {
        "w": Placement("arena", 0, 512 * 256 * 2),
        "x": Placement("arena", 512 * 256 * 2, 512),
        "out": Placement("output", 0, 1024),
    }
    d = build_design(GEMV(M=512, K=256, num_aie_columns=2), "npu1", placement)
    assert d.args == ("arena", "out")
    assert "%arena[0, 0, 0, 65536]" in d.text  # x at byte 131072 = element 65536


def test_the_contract_parses_and_names_the_design_symbols():
    c = contract("gemv")
    assert c.operator.startswith("GEMV")
    named = set(re.findall(r"(gemv_\w+)\(", c.arguments))
    used = {s for syms in gemv.SYMBOLS.values() for s in syms}
    assert named == used
    assert "multiple of 16" in c.tile
    assert "HIGHEST" in c.rounding and "HIGH (" in c.rounding
    assert "MEDIUM (gemv_bfp16_acc_round)" in c.rounding
    source = c.path.read_text(encoding="utf-8")
    for symbol in used:
        assert f"void {symbol}(" in source
    d = build_design(GEMV(**HIGH), "npu2")
    declared = set(re.findall(r"func\.func private @(\w+)\(", d.text))
    assert declared == set(
        gemv.SYMBOLS[GEMV(**HIGH).resolved("npu2").effective_precision]
    )
    # The bfp16 symbol is compiled only where aie_api has bfp16ebs8 (AIE2P).
    guarded = source.split("#if __AIE_ARCH__ == 21")
    assert len(guarded) == 3 and "void gemv_bfp16_acc_round(" in guarded[2]
    assert "void gemv_bfp16_acc_round(" not in guarded[0] + guarded[1]


# -- batched GEMV ------------------------------------------------------------------

CHECK_GEMV_BATCHED_NPU2 = """\
// CHECK-LABEL: aie.device(npu2) @main {
// CHECK: aie.objectfifo @x_0({{.*}}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
// CHECK: aie.core(%{{.*}}) {
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 8 : index
// CHECK-DAG: %[[BATCH:.*]] = arith.constant 4 : index
// CHECK: scf.for %{{.*}} = %{{.*}} to %c9223372036854775807
// CHECK-NEXT: scf.for %{{.*}} = %{{.*}} to %[[BATCH]]
// CHECK-NEXT: aie.objectfifo.acquire @x_0(Consume, 1)
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[ROWS]]
// CHECK: func.call @gemv_bf16_acc(
// CHECK: func.call @gemv_bf16_store(
// CHECK: aie.objectfifo.release @x_0(Consume, 1)
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK: aie.runtime_sequence @sequence(%[[W:.*]]: memref<1048576xbf16>, %[[X:.*]]: memref<4096xbf16>, %[[O:.*]]: memref<1024xbf16>) {
// CHECK: dma_memcpy_nd(%[[O]][0, 0, 0, 0][4, 1, 1, 32][256, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0}
// CHECK: dma_memcpy_nd(%[[W]][0, 0, 0, 0][4, 1, 32, 1024][262144, 0, 1024, 1]) {id = 1 : i64, metadata = @w_0}
// CHECK: dma_memcpy_nd(%[[X]][0, 0, 0, 0][1, 1, 4, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @x_0}
// CHECK: dma_memcpy_nd(%[[O]][0, 0, 0, 32][4, 1, 1, 32][256, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_1}
// CHECK: dma_memcpy_nd(%[[W]][0, 0, 0, 32768]
"""

CHECK_GEMV_BATCHED_CHUNKED = """\
// CHECK: aie.objectfifo @x_0({{.*}}) : !aie.objectfifo<memref<1024xbf16>>
// CHECK: scf.for %{{.*}} = %{{.*}} to %c3 step
// CHECK-NOT: aie.objectfifo.acquire @x_0
// CHECK: scf.for %{{.*}} = %{{.*}} to %c2 step
// CHECK: scf.for %{{.*}} = %{{.*}} to %c2 step
// CHECK: aie.objectfifo.acquire @w_0(Consume, 1)
// CHECK: aie.objectfifo.acquire @x_0(Consume, 1)
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 0][2, 2, 4, 1024][8192, 1024, 2048, 1]) {id = 1 : i64, metadata = @w_0}
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 131072][2, 2, 4, 1024]{{.*}} {id = 2 : i64, metadata = @w_0}
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 262144][2, 2, 4, 1024]{{.*}} {id = 3 : i64, metadata = @w_0}
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 0][2, 1, 2, 1024][0, 0, 1024, 1]) {id = 4 : i64, metadata = @x_0}
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 2048][2, 1, 2, 1024][0, 0, 1024, 1]) {id = 5 : i64, metadata = @x_0}
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 4096][2, 1, 2, 1024][0, 0, 1024, 1]) {id = 6 : i64, metadata = @x_0}
"""

CHUNKED = dict(M=64, K=2048, tile_k=1024, batch=3)


def test_filecheck_batched_loops_products_outermost(tmp_path):
    filecheck(
        tmp_path, CHECK_GEMV_BATCHED_NPU2, design(GEMV(M=256, K=1024, batch=4), "npu2")
    )


def test_filecheck_batched_chunked_walks_repeat_per_product(tmp_path):
    filecheck(tmp_path, CHECK_GEMV_BATCHED_CHUNKED, design(GEMV(**CHUNKED), "npu2"))


def test_batched_arguments_hold_every_product():
    d = build_design(GEMV(M=256, K=1024, batch=4), "npu1")
    assert d.args == ("w", "x", "out")
    assert d.arg_bytes == (4 * 256 * 1024 * 2, 4 * 1024 * 2, 4 * 256 * 2)


def _stream(lay, fifo: str) -> np.ndarray:
    """The element indices the shim moves for ``fifo``, transfer after transfer."""
    moved = [
        legality.shim_elements(
            legality.encode(t.sizes, t.strides, t.offset, t.itemsize, t.repeat)
        )
        for t in lay.transfers
        if t.fifo == fifo
    ]
    return np.concatenate(moved)


def _expected_streams(op, col: int) -> dict[str, np.ndarray]:
    """What column ``col``'s core consumes and produces, product by product."""
    batch = op.batch or 1
    rows = op.M // op.num_aie_columns
    row_tiles, k_tiles = rows // op.tile_m, op.K // op.tile_k
    w, x, out = [], [], []
    for p in range(batch):
        idx = np.arange(op.M * op.K).reshape(op.M, op.K) + p * op.M * op.K
        block = idx[col * rows : (col + 1) * rows]
        tiles = block.reshape(row_tiles, op.tile_m, k_tiles, op.tile_k)
        w.append(tiles.transpose(0, 2, 1, 3).reshape(-1))
        xs = np.arange(op.K) + p * op.K
        x.append(xs if k_tiles == 1 else np.tile(xs, row_tiles))
        out.append(np.arange(col * rows, (col + 1) * rows) + p * op.M)
    return {k: np.concatenate(v) for k, v in (("w", w), ("x", x), ("out", out))}


BATCHED = [
    dict(M=256, K=1024, batch=4),  # linear w, x whole: the batch in the iteration
    dict(M=256, K=1024, batch=4, num_aie_columns=1),  # products back to back
    dict(M=64, K=256, batch=70, num_aie_columns=2),  # > 64 products: two groups
    dict(M=64, K=512, tile_k=128, batch=2),  # chunked x, tiled w, per product
    dict(M=64, K=512, tile_k=128, batch=5, num_aie_columns=1),  # one tile sequence
    dict(M=16, K=512, tile_k=256, tile_m=4, batch=6, num_aie_columns=4),  # 1 row tile
]


@pytest.mark.parametrize("fields", BATCHED)
@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_batched_transfers_move_each_products_rows(fields, dev):
    device = as_device(dev)
    op = GEMV(**fields).resolved(device)
    d = build_design(op, device)  # legality included
    for col in range(op.num_aie_columns):
        want = _expected_streams(op, col)
        for port in ("w", "x", "out"):
            got = _stream(d.layout, f"{port}_{col}")
            np.testing.assert_array_equal(got, want[port], err_msg=f"{port}_{col}")


def test_batched_walks_fold_the_batch_into_descriptors():
    # Linear walks take the batch in the iteration: one descriptor per port.
    lay = build_design(GEMV(M=256, K=1024, batch=4), "npu2").layout
    assert len([t for t in lay.transfers if t.shim.col == 0]) == 3
    # One column: x repeats per product, 5 pushes at once, past a channel's
    # task queue of 4 (issue 28): the sequence runs in blocks with waits,
    # each FIFO at most a queue's transfers between them.
    op = GEMV(M=64, K=512, tile_k=128, batch=5, num_aie_columns=1)
    lay = build_design(op, "npu2").layout
    assert lay.waits
    assert len([t for t in lay.transfers if t.fifo == "x_0"]) >= 5


def test_more_per_product_walks_than_a_shim_has_run_in_blocks():
    # 8 products' repeated walks need 17 descriptors at once: the sequence
    # runs in blocks of row tiles, reusing ids after waits.
    dev = as_device("npu2")
    op = GEMV(**{**CHUNKED, "batch": 8}).resolved(dev)
    d = build_design(op, dev)
    assert d.layout.waits and "aiex.npu.dma_wait" in d.text
    for col in range(op.num_aie_columns):
        want = _expected_streams(op, col)
        for port in ("w", "x", "out"):
            got = _stream(d.layout, f"{port}_{col}")
            np.testing.assert_array_equal(got, want[port], err_msg=f"{port}_{col}")
    # The same transfers without the waits between blocks reuse busy ids.
    end = len(d.layout.transfers)
    late = dataclasses.replace(
        d.layout, waits=tuple((end, f) for _, f in d.layout.waits)
    )
    with pytest.raises(LegalityError, match=r"shim tile \(0, 0\): buffer .*reused"):
        legality.check(late, dev)


# -- tile rows wider than the shim's d0 wrap ---------------------------------------

WIDE = [
    ("npu2", dict(M=64, K=4096)),  # resolved: tile_k 2048 on 8 columns, at once
    ("npu1", dict(M=64, K=4096, tile_m=4, tile_k=2048, num_aie_columns=1)),
    ("npu2", dict(M=32, K=8192, tile_m=2, tile_k=4096, num_aie_columns=2)),
    ("npu1", dict(M=16, K=4096, tile_k=2048, tile_m=2, batch=3, num_aie_columns=1)),
]


@pytest.mark.parametrize(("dev", "fields"), WIDE)
def test_wide_tile_rows_are_walked_in_parts(dev, fields):
    device = as_device(dev)
    op = GEMV(**fields).resolved(device)
    assert op.tile_k * 2 // 4 > 1023  # the row alone overflows the d0 wrap
    d = build_design(op, device)  # legality included
    for t in d.layout.transfers:
        assert t.sizes[3] * 2 // 4 <= 1023
    for col in range(op.num_aie_columns):
        want = _expected_streams(op, col)
        for port in ("w", "x", "out"):
            got = _stream(d.layout, f"{port}_{col}")
            np.testing.assert_array_equal(got, want[port], err_msg=f"{port}_{col}")


def test_the_llama_shapes_pass_legality():
    # The FFN down projection at NPU1's profile: 128 row tiles a column,
    # each its own w transfer, in blocks of two row tiles.
    dev = as_device("npu1")
    op = GEMV(M=2048, K=8192, tile_m=4, tile_k=2048, num_aie_columns=4)
    lay = build_design(op, dev).layout
    w0 = [t for t in lay.transfers if t.fifo == "w_0"]
    assert len(w0) == 128
    assert w0[1].offset == 4 * 8192 and w0[1].sizes == (4, 4, 2, 1024)
    assert w0[1].strides == (2048, 8192, 1024, 1)
    assert len(lay.waits) == 64 * 4
    build_design(GEMV(M=64, K=4096), "npu2")
    build_design(GEMV(M=2048, K=8192), "npu2")


CHECK_GEMV_BLOCKED = """\
// CHECK: aie.objectfifo @w_0({{.*}}) : !aie.objectfifo<memref<4x2048xbf16>>
// CHECK: aie.runtime_sequence
// CHECK-NEXT: dma_memcpy_nd(%{{.*}}[0, 0, 0, 0][2, 4, 2, 1024][2048, 4096, 1024, 1]) {id = 0 : i64, metadata = @w_0}
// CHECK-NEXT: dma_memcpy_nd(%{{.*}}[0, 0, 0, 16384][2, 4, 2, 1024][2048, 4096, 1024, 1]) {id = 1 : i64, metadata = @w_0}
// CHECK-NEXT: dma_memcpy_nd(%{{.*}}[0, 0, 0, 0][2, 1, 4, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @x_0}
// CHECK-NEXT: dma_memcpy_nd(%{{.*}}[0, 0, 0, 0][1, 1, 1, 8][0, 0, 0, 1]) {id = 3 : i64, issue_token = true, metadata = @out_0}
// CHECK-NOT: dma_wait
// CHECK: {id = 8 : i64, metadata = @w_0}
// CHECK: {id = 11 : i64, issue_token = true, metadata = @out_0}
// CHECK-NEXT: aiex.npu.dma_wait {symbol = @out_0}
// CHECK-NEXT: dma_memcpy_nd(%{{.*}}[0, 0, 0, 65536]{{.*}} {id = 0 : i64, metadata = @w_0}
// CHECK: %out_buf[0, 0, 0, 56][1, 1, 1, 8]{{.*}} {id = 11 : i64, issue_token = true, metadata = @out_0}
// CHECK-NEXT: aiex.npu.dma_wait {symbol = @out_0}
// CHECK-NEXT: aiex.npu.dma_wait {symbol = @out_0}
// CHECK-NEXT: }
"""


def test_filecheck_blocked_sequence_waits_before_reusing_ids(tmp_path):
    text = design(GEMV(**dict(WIDE[1][1])), "npu1")
    filecheck(tmp_path, CHECK_GEMV_BLOCKED, text)


def test_single_rows_run_in_blocks_of_whole_words():
    # x sent again for each of 1024 one-row tiles: 16 transfers at the
    # iteration limit, too many at once; blocks hold an even number of rows
    # (out in whole 4-byte words).
    dev = as_device("npu1")
    op = GEMV(M=1024, K=256, tile_m=1, tile_k=128, num_aie_columns=1).resolved(dev)
    d = build_design(op, dev)
    assert d.layout.waits
    outs = [t for t in d.layout.transfers if t.fifo == "out_0"]
    assert all(np.prod(t.sizes) % 2 == 0 for t in outs)
    want = _expected_streams(op, 0)
    for port in ("w", "x", "out"):
        np.testing.assert_array_equal(_stream(d.layout, f"{port}_0"), want[port])


def test_a_column_of_out_in_half_words_is_refused_by_name():
    op = GEMV(M=8, K=512, tile_m=1, num_aie_columns=8)
    with pytest.raises(LegalityError, match=r"1 rows of out are 2 bytes.*=1 or 2 or 4"):
        build_design(op, "npu2")


def test_batched_arena_placement_offsets_every_product():
    w_bytes, x_bytes = 2 * 64 * 256 * 2, 2 * 256 * 2
    placement = {
        "w": Placement("arena", 1024, w_bytes),
        "x": Placement("arena", 1024 + w_bytes, x_bytes),
        "out": Placement("arena", 1024 + w_bytes + x_bytes, 2 * 64 * 2),
    }
    op = GEMV(M=64, K=256, batch=2, num_aie_columns=2)
    d = build_design(op, "npu1", placement)
    assert d.args == ("arena",)
    base = {p: pl.offset // 2 for p, pl in placement.items()}
    for col in range(2):
        want = _expected_streams(op.resolved("npu1"), col)
        for port in ("w", "x", "out"):
            got = _stream(d.layout, f"{port}_{col}")
            np.testing.assert_array_equal(got, want[port] + base[port])


# -- MEDIUM (bfp16) --------------------------------------------------------------

CHECK_GEMV_MEDIUM_NPU2 = """\
// CHECK-LABEL: aie.device(npu2) @main {
// CHECK-NOT: @gemv_bf16_acc
// CHECK: func.func private @gemv_bfp16_acc_round(memref<4x2048xbf16>, memref<2048xbf16>, memref<4xf32>, i32, i32) attributes {link_with = "gemv.o"}
// CHECK: aie.core(
// CHECK: func.call @gemv_f32_zero(
// CHECK: func.call @gemv_bfp16_acc_round(
// CHECK: func.call @gemv_bf16_store(
"""


def test_filecheck_medium_calls_the_bfp16_kernel(tmp_path):
    text = design(GEMV(M=2048, K=2048, precision="medium"), "npu2")
    filecheck(tmp_path, CHECK_GEMV_MEDIUM_NPU2, text)


def test_medium_on_npu1_runs_as_high():
    d = build_design(GEMV(M=256, K=256, precision="medium"), "npu1")
    assert "@gemv_bf16_acc_round(" in d.text and "bfp16" not in d.text
    forced = GEMV(M=256, K=256, precision="medium", effective_precision="medium")
    with pytest.raises(RefusedShapeError, match="needs bfp16"):
        build_design(forced, "npu1")


def test_medium_and_batched_together():
    op = GEMV(M=64, K=512, batch=3, precision="medium")
    d = build_design(op, "npu2")
    assert "func.call @gemv_bfp16_acc_round(" in d.text
    assert d.text.count("aie.core(") == op.resolved("npu2").num_aie_columns


# -- the kernels' arithmetic and the design, emulated on the host -----------------------

_LANES = 16  # iron::kLanes


def _f32(v) -> np.ndarray:
    return np.asarray(v, dtype=np.float32)


def _bf16(v) -> np.ndarray:
    return _f32(v).astype(bfloat16).astype(np.float32)


def _dot_rows(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """gemv.cc dot_row for each row of ``w``: 16 fp32 lanes, then a tree sum."""
    lanes = np.zeros((w.shape[0], _LANES), np.float32)
    for k in range(0, w.shape[1], _LANES):
        lanes = _f32(lanes + w[:, k : k + _LANES] * x[k : k + _LANES])
    while lanes.shape[1] > 1:  # reduce_add: halves added pairwise
        half = lanes.shape[1] // 2
        lanes = _f32(lanes[:, :half] + lanes[:, half:])
    return lanes[:, 0]


def _bfp16_rows(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """gemv_bfp16_acc_round's sums before the rounding, rows 8 at a time.

    Each 8 x 8 operand is converted as the kernel converts it (blocks of 8
    along K, per row; the hardware conversion modelled by bfp16.quantize),
    the block products summed into fp32 accumulators block after block;
    column 0 of C = A B (B^T holding x's block in every row) is read.
    """
    tile_m, tile_k = w.shape
    sums = np.zeros(tile_m, np.float32)
    for r0 in range(0, tile_m, 8):
        rows = min(8, tile_m - r0)
        acc = np.zeros((8, 8), np.float32)
        for k in range(0, tile_k, 8):
            a = np.zeros((8, 8), np.float32)
            a[:rows] = w[r0 : r0 + rows, k : k + 8]
            bt = np.tile(x[k : k + 8], (8, 1))
            qa, qbt = bfp16.quantize(a, axis=-1), bfp16.quantize(bt, axis=-1)
            block = np.zeros((8, 8), np.float32)
            for j in range(8):  # the products, exact in fp32, summed in fp32
                block = _f32(block + qa[:, None, j] * qbt[None, :, j])
            acc = _f32(acc + block)
        sums[r0 : r0 + rows] = acc[:rows, 0]
    return sums


def _kernel(level: Precision, w, x, acc) -> np.ndarray:
    """One call of the accumulate symbol SYMBOLS[level] on an fp32 ``acc``."""
    if level is Precision.HIGHEST:
        return _f32(acc + _dot_rows(w, x))
    if level is Precision.HIGH:
        return _bf16(acc + _dot_rows(w, x))
    return _bf16(acc + _bfp16_rows(w, x))


def _run_design(op, d, w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The design's result: decoded shim streams through each core's loops."""
    batch = op.batch or 1
    flat = {"w": _f32(w).reshape(-1), "x": _f32(x).reshape(-1)}
    out = np.full(batch * op.M, np.nan, np.float32)
    rows = op.M // op.num_aie_columns
    row_tiles, k_tiles = rows // op.tile_m, op.K // op.tile_k
    tm, tk = op.tile_m, op.tile_k
    calls = 0
    for col in range(op.num_aie_columns):
        w_s = iter(_stream(d.layout, f"w_{col}").reshape(-1, tm * tk))
        x_len = op.K if k_tiles == 1 else tk
        x_s = iter(_stream(d.layout, f"x_{col}").reshape(-1, x_len))
        o_s = iter(_stream(d.layout, f"out_{col}").reshape(-1, tm))
        for _ in range(batch):  # the core's loops, outermost first
            whole = flat["x"][next(x_s)] if k_tiles == 1 else None
            for _ in range(row_tiles):
                acc = np.zeros(tm, np.float32)
                for _ in range(k_tiles):
                    wt = flat["w"][next(w_s)].reshape(tm, tk)
                    xk = whole if whole is not None else flat["x"][next(x_s)]
                    acc = _kernel(op.effective_precision, wt, xk, acc)
                    calls += 1
                out[next(o_s)] = acc  # gemv_bf16_store rounds below
        for stream in (w_s, x_s, o_s):  # every element moved is consumed
            assert next(stream, None) is None
    assert calls == op.cost(as_device(d.device)).calls * op.num_aie_columns
    shape = (op.M,) if op.batch is None else (batch, op.M)
    return out.astype(bfloat16).reshape(shape)


EMULATED = [
    (dict(M=64, K=256), "npu1"),
    (dict(M=64, K=512, tile_k=128, precision="high"), "npu2"),
    (dict(M=32, K=256, batch=3), "npu1"),
    (dict(M=64, K=512, tile_k=128, batch=2, precision="high"), "npu2"),
    (dict(M=64, K=512, tile_k=256, precision="medium"), "npu2"),
    (dict(M=32, K=256, tile_m=2, batch=2, precision="medium"), "npu2"),
    (dict(M=96, K=128, tile_m=12, num_aie_columns=1, precision="medium"), "npu2"),
    (dict(M=64, K=4096, tile_k=2048, num_aie_columns=1, precision="high"), "npu1"),
    (dict(M=64, K=2048, tile_k=1024, batch=8), "npu2"),  # blocked products
]


@pytest.mark.parametrize(("fields", "dev"), EMULATED)
def test_the_design_computes_the_reference_within_tolerance(fields, dev):
    op = GEMV(**fields).resolved(dev)
    d = build_design(op, dev)
    rng = np.random.default_rng(10)
    lead = () if op.batch is None else (op.batch,)
    w = rng.standard_normal((*lead, op.M, op.K)).astype(bfloat16)
    x = rng.standard_normal((*lead, op.K)).astype(bfloat16)
    got = _run_design(op, d, w, x)
    verdict = compare(got, op.reference(w, x), op.tolerance(w, x))
    assert verdict, str(verdict)


def test_the_emulation_can_fail():
    # A walk off by one product (x of the wrong product) breaks the result.
    op = GEMV(M=32, K=256, batch=3).resolved("npu1")
    d = build_design(op, "npu1")
    rng = np.random.default_rng(3)
    w = rng.standard_normal((3, 32, 256)).astype(bfloat16)
    x = rng.standard_normal((3, 256)).astype(bfloat16)
    got = _run_design(op, d, w, x[[1, 2, 0]])
    assert not compare(got, op.reference(w, x), op.tolerance(w, x))


@pytest.mark.parametrize("level", ["highest", "high", "medium"])
@pytest.mark.parametrize(("tile_m", "tile_k"), [(4, 256), (1, 64), (8, 512)])
def test_the_kernel_arithmetic_meets_the_operator_tolerance(level, tile_m, tile_k):
    # The kernels alone over K = 4 tile_k, against GEMV.reference, with
    # a wide dynamic range (scales 2**-8 .. 2**8) and cancellation.
    K, M = 4 * tile_k, 2 * tile_m
    fields = dict(tile_m=tile_m, tile_k=tile_k, num_aie_columns=1)
    op = GEMV(M=M, K=K, precision=level, **fields).resolved("npu2")
    rng = np.random.default_rng(tile_k + tile_m)
    scale = np.exp2(rng.integers(-8, 9, size=(M, K)))
    w = (rng.standard_normal((M, K)) * scale).astype(bfloat16)
    x = rng.standard_normal(K).astype(bfloat16)
    wf, xf = _f32(w), _f32(x)
    acc = np.zeros(M, np.float32)
    for r in range(0, M, tile_m):
        part = np.zeros(tile_m, np.float32)
        for k in range(0, K, tile_k):
            part = _kernel(
                op.effective_precision,
                wf[r : r + tile_m, k : k + tile_k],
                xf[k : k + tile_k],
                part,
            )
        acc[r : r + tile_m] = part
    verdict = compare(acc.astype(bfloat16), op.reference(w, x), op.tolerance(w, x))
    assert verdict, str(verdict)


def test_the_bfp16_kernel_quantizes_as_the_model():
    # Converting each 8 x 8 operand in the kernel gives the model's blocks:
    # the results match GEMV.reference at MEDIUM nearly bit for bit (only the
    # fp32 summation order differs), and not HIGH's, which lacks the blocks.
    op = GEMV(M=24, K=256, tile_m=12, tile_k=128, num_aie_columns=1)
    medium = op.replace(precision="medium").resolved("npu2")
    high = op.replace(precision="high").resolved("npu2")
    rng = np.random.default_rng(5)
    w = rng.standard_normal((24, 256)) * np.exp2(rng.integers(-6, 7, (24, 256)))
    w, x = w.astype(bfloat16), rng.standard_normal(256).astype(bfloat16)
    got = _run_design(medium, build_design(medium, "npu2"), w, x)
    same = got.astype(np.float32) == medium.reference(w, x).astype(np.float32)
    assert same.mean() >= 0.9
    assert not compare(got, high.reference(w, x), high.tolerance(w, x))
