"""The GEMV design: golden text, FileCheck patterns, legality and the kernel contract.

Golden files ``golden/gemv_2048x2048_<dev>.mlir`` are GEMV M=2048 K=2048 at
the default resolved tunables; regenerate with ``IRON_UPDATE_GOLDEN=1``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from iron.core.device import as_device
from iron.core.operator import RefusedShapeError
from iron.operators import GEMV
from iron.runtime.image import Placement
from iron.runtime.npu import LegalityError, legality
from iron.runtime.npu.designs import build_design, design, matmul
from iron.runtime.npu.kernels import contract

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("IRON_UPDATE_GOLDEN", "") not in ("", "0")


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_golden(dev):
    text = design(GEMV(M=2048, K=2048), dev)
    path = GOLDEN / f"gemv_2048x2048_{dev}.mlir"
    if UPDATE:
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} is missing: run with IRON_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), (
        f"the GEMV design on {dev} changed; review and regenerate with "
        f"IRON_UPDATE_GOLDEN=1"
    )


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


def _filecheck(tmp_path: Path, checks: str, text: str) -> None:
    pytest.importorskip("filecheck", reason="the filecheck package is not installed")
    spec = tmp_path / "checks.txt"
    spec.write_text(checks, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "filecheck", str(spec)],
        input=text,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_filecheck_gemv_npu1(tmp_path):
    _filecheck(tmp_path, CHECK_GEMV_NPU1, design(GEMV(M=2048, K=2048), "npu1"))


def test_filecheck_gemv_high_streams_x_chunks(tmp_path):
    _filecheck(tmp_path, CHECK_GEMV_HIGH_NPU2, design(GEMV(**HIGH), "npu2"))


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
    lay = matmul.layout(op, op_dev)
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
    lay = matmul.layout(op, as_device("npu2"))
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
    tiles = SimpleNamespace(**{**op.fields(), "vector_width": 64})
    with pytest.raises(LegalityError, match=r"compute tile \(0, 2\).*bytes"):
        legality.check(matmul.layout(tiles, dev), dev)


def test_the_accumulator_counts_against_core_memory():
    dev = as_device("npu1")
    op = GEMV(M=2048, K=2048).resolved(dev)
    lay = matmul.layout(op, dev)
    assert lay.buffers and all(n == op.tile_m * 4 for _, n in lay.buffers)


def test_batched_and_medium_have_no_design_yet():
    with pytest.raises(NotImplementedError, match="batched GEMV"):
        build_design(GEMV(M=256, K=256, batch=2), "npu2")
    with pytest.raises(NotImplementedError, match="medium"):
        build_design(GEMV(M=256, K=256, precision="medium"), "npu2")


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
    used = {s for syms in matmul.SYMBOLS.values() for s in syms}
    assert named == used
    assert "multiple of 16" in c.tile
    assert "HIGHEST" in c.rounding and "HIGH (" in c.rounding
    source = c.path.read_text(encoding="utf-8")
    for symbol in used:
        assert f"void {symbol}(" in source
    d = build_design(GEMV(**HIGH), "npu2")
    declared = set(re.findall(r"func\.func private @(\w+)\(", d.text))
    assert declared == set(
        matmul.SYMBOLS[GEMV(**HIGH).resolved("npu2").effective_precision]
    )
