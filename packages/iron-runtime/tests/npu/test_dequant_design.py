"""The Dequant design: golden text, FileCheck patterns, transfers, refusals, kernel.

Golden files ``golden/dequant_4194304_<dev>.mlir`` are Dequant N=2048*2048
(one Llama projection's int4 weights) at the default resolved tunables;
regenerate with ``IRON_UPDATE_GOLDEN=1``. The kernel's nibble unpacking is
compiled for the host (``host_dequant.cc``) and checked against
``Dequant.reference``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from ml_dtypes import bfloat16

from iron.core.device import as_device
from iron.core.operator import RefusedShapeError
from iron.operators import Dequant
from iron.operators.dequant import unpack_int4
from iron.runtime.image import Placement
from iron.runtime.npu import LegalityError, kernels, legality
from iron.runtime.npu.designs import Words, build_design, dequant, design

from .support import HERE, check_golden, compile_host, filecheck, shim_moved

LLAMA = 2048 * 2048


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_golden(dev):
    text = design(Dequant(N=LLAMA), dev)
    check_golden(f"dequant_{LLAMA}", dev, text, subject=f"the Dequant design on {dev}")


CHECK_NPU1 = """\
// CHECK: mlir-aie v1.4.1
// CHECK-LABEL: aie.device(npu1) @main {
// CHECK: func.func private @dequant_bf16(memref<2048xi8>, memref<128xbf16>, memref<4096xbf16>, i32) attributes {link_with = "dequant_bf16.o"}
// CHECK-DAG: %[[SHIM0:.*]] = aie.tile(0, 0)
// CHECK-DAG: %[[CORE0:.*]] = aie.tile(0, 2)
// CHECK-DAG: aie.tile(3, 2)
// CHECK-NOT: aie.tile(4,
// CHECK: aie.objectfifo @packed_0(%[[SHIM0]], {%[[CORE0]]}, 2 : i32) : !aie.objectfifo<memref<2048xi8>>
// CHECK: aie.objectfifo @scales_0(%[[SHIM0]], {%[[CORE0]]}, 2 : i32) : !aie.objectfifo<memref<128xbf16>>
// CHECK: aie.objectfifo @out_0(%[[CORE0]], {%[[SHIM0]]}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
// CHECK: aie.core(%[[CORE0]]) {
// CHECK: %[[TILES:.*]] = arith.constant 256 : index
// CHECK: %[[N:.*]] = arith.constant 4096 : i32
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[TILES]]
// CHECK: %[[P:.*]] = aie.objectfifo.subview.access %{{.*}} -> memref<2048xi8>
// CHECK: %[[S:.*]] = aie.objectfifo.subview.access %{{.*}} -> memref<128xbf16>
// CHECK: aie.objectfifo.acquire @out_0(Produce, 1)
// CHECK: func.call @dequant_bf16(%[[P]], %[[S]], %{{.*}}, %[[N]])
// CHECK: aie.objectfifo.release @packed_0(Consume, 1)
// CHECK: aie.objectfifo.release @scales_0(Consume, 1)
// CHECK: aie.objectfifo.release @out_0(Produce, 1)
// CHECK: aie.end
// CHECK: aie.runtime_sequence @sequence(%[[PB:.*]]: memref<2097152xi8>, %[[SB:.*]]: memref<131072xbf16>, %[[OB:.*]]: memref<4194304xbf16>) {
// CHECK: aiex.npu.dma_memcpy_nd(%[[OB]][0, 0, 0, 0]{{.*}} {id = 0 : i64, issue_token = true, metadata = @out_0} : memref<4194304xbf16>
// CHECK: aiex.npu.dma_memcpy_nd(%[[PB]][0, 0, 0, 0]{{.*}} {id = 1 : i64, metadata = @packed_0} : memref<2097152xi8>
// CHECK: aiex.npu.dma_memcpy_nd(%[[SB]][0, 0, 0, 0]{{.*}} {id = 2 : i64, metadata = @scales_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[PB]][0, 0, 0, 1572864]{{.*}} metadata = @packed_3}
// CHECK: aiex.npu.dma_wait {symbol = @out_0}
// CHECK: aiex.npu.dma_wait {symbol = @out_3}
"""

CHECK_NPU2 = """\
// CHECK-LABEL: aie.device(npu2) @main {
// CHECK: aie.tile(7, 0)
// CHECK: aie.tile(7, 2)
// CHECK: aie.objectfifo @packed_7(
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step
// CHECK: arith.constant 128 : index
// CHECK: aie.runtime_sequence @sequence(%{{.*}}: memref<2097152xi8>, %{{.*}}: memref<131072xbf16>, %{{.*}}: memref<4194304xbf16>)
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 1835008][1, 1, 128, 2048][0, 0, 2048, 1]) {id = 1 : i64, metadata = @packed_7}
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 114688][1, 1, 16, 1024][0, 0, 1024, 1]) {id = 2 : i64, metadata = @scales_7}
// CHECK: aiex.npu.dma_wait {symbol = @out_7}
"""


def test_filecheck_npu1(tmp_path):
    filecheck(tmp_path, CHECK_NPU1, design(Dequant(N=LLAMA), "npu1"))


def test_filecheck_npu2(tmp_path):
    filecheck(tmp_path, CHECK_NPU2, design(Dequant(N=LLAMA), "npu2"))


def test_filecheck_catches_a_swapped_port(tmp_path):
    text = design(Dequant(N=LLAMA), "npu1").replace(
        "@dequant_bf16(%packed, %scales", "@dequant_bf16(%scales, %packed"
    )
    with pytest.raises(AssertionError):
        filecheck(tmp_path, CHECK_NPU1, text)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_default_design_uses_every_resolved_column(dev):
    op = Dequant(N=LLAMA).resolved(dev)
    d = build_design(op, dev)
    assert d.kernels == ("dequant_bf16",)
    assert d.args == ("packed", "scales", "out")
    assert d.arg_bytes == (LLAMA // 2, LLAMA // 32 * 2, LLAMA * 2)
    assert d.text.count("aie.core(") == op.num_aie_columns == as_device(dev).columns
    # A kernel call per tile on each column: the operator's cost counts them.
    calls = op.cost(dev).calls
    assert f"arith.constant {calls} : index" in d.text


@pytest.mark.parametrize(
    "fields",
    [
        dict(N=LLAMA),
        dict(N=1 << 16, tile_size=1024, num_aie_columns=2),
        dict(N=64 * 3 * 5, tile_size=64 * 5, num_aie_columns=1),
    ],
)
def test_each_column_moves_exactly_its_block_of_every_port(fields):
    dev = as_device("npu2")
    op = Dequant(**fields).resolved(dev)
    lay = dequant.layout(op, dev)
    cols = op.num_aie_columns
    counts = {"packed": op.N // 2, "scales": op.N // 32, "out": op.N}
    for port, total in counts.items():
        per = total // cols
        for c in range(cols):
            (t,) = [t for t in lay.transfers if t.fifo == f"{port}_{c}"]
            assert t.buffer == port and t.itemsize == (1 if port == "packed" else 2)
            np.testing.assert_array_equal(
                shim_moved(t, "npu2"), np.arange(c * per, (c + 1) * per)
            )
    # Per FIFO element: a tile's bytes, scales and results.
    tile = op.tile_size
    sizes = {f.name.rsplit("_", 1)[0]: f.element_bytes for f in lay.fifos}
    assert sizes == {"packed": tile // 2, "scales": tile // 32 * 2, "out": tile * 2}


def test_arena_placement_reads_at_the_planned_offsets():
    n = 1 << 14  # 8 KiB packed, 1 KiB scales, 32 KiB out
    placement = {
        "packed": Placement("arena", 4096, n // 2),
        "scales": Placement("arena", 0, n // 16),
        "out": Placement("output", 0, n * 2),
    }
    d = build_design(Dequant(N=n, tile_size=4096, num_aie_columns=2), "npu1", placement)
    assert d.args == ("arena", "out")
    assert d.arg_bytes == (4096 + n // 2, n * 2)
    # packed at byte 4096 = bf16 element 2048; column 1 starts 4096 bytes on.
    (p1,) = [t for t in d.layout.transfers if t.fifo == "packed_1"]
    assert (p1.buffer, p1.offset, p1.itemsize) == ("arena", 2048 + 2048, 2)
    moved = shim_moved(p1, "npu2")  # bf16 elements of the arena, i.e. byte pairs
    bytes_moved = (moved[:, None] * 2 + np.arange(2)).reshape(-1)
    np.testing.assert_array_equal(bytes_moved, 4096 + np.arange(4096, 8192))
    assert "%arena[0, 0, 0, 4096][1, 1, 2, 1024][0, 0, 1024, 1])" in d.text
    assert "%arena[0, 0, 0, 256][1, 1, 1, 256]" in d.text  # scales_1
    assert "%arena: memref<6144xbf16>" in d.text


def test_an_arena_port_off_a_word_boundary_is_refused_by_legality():
    n = 1 << 12
    placement = {"packed": Placement("arena", 2, n // 2)}
    with pytest.raises(LegalityError, match=r"shim tile \(0, 0\).*4-byte alignment"):
        build_design(Dequant(N=n, num_aie_columns=1), "npu1", placement)


def test_words_are_not_read():
    d = build_design(Dequant(N=4096), "npu2", words=Words({}, 4))
    assert "words" not in d.args and "memref.load" not in d.text


def test_refusals_are_named():
    with pytest.raises(RefusedShapeError, match="multiple of 64"):
        build_design(Dequant(N=96), "npu1")
    with pytest.raises(RefusedShapeError, match="exceeds the device's 4 columns"):
        build_design(Dequant(N=8192, num_aie_columns=8), "npu1")
    with pytest.raises(RefusedShapeError, match="double-buffered"):
        build_design(Dequant(N=1 << 16, tile_size=16384, num_aie_columns=1), "npu2")


def test_legality_counts_every_buffer_of_a_tile():
    # The operator refuses 16384-value tiles first; the design's own legality
    # refuses the same buffers (packed, scales, out double-buffered > 64 KiB).
    dev = as_device("npu2")
    tiles = SimpleNamespace(
        N=1 << 16, tile_size=16384, num_aie_columns=1, fifo_depth=Dequant.fifo_depth
    )
    with pytest.raises(LegalityError, match=r"compute tile \(0, 2\).*bytes"):
        legality.check(dequant.layout(tiles, dev), dev)


def test_the_contract_parses_and_matches_the_declaration():
    c = kernels.contract("dequant_bf16")
    assert c.operator == "Dequant"
    assert "low nibble first" in c.arguments and "two's complement" in c.arguments
    assert "multiple of 64" in c.tile
    assert "nearest even" in c.rounding and "Dequant.reference" in c.rounding
    assert c.buffer_count == 2  # scales and out (packed is uint8)
    d = build_design(Dequant(N=8192), "npu1")
    decl = re.search(r"func\.func private @dequant_bf16\((.*)\) attributes", d.text)
    assert decl is not None
    assert re.fullmatch(
        r"memref<\d+xi8>, memref<\d+xbf16>, memref<\d+xbf16>, i32", decl.group(1)
    )
    assert "void dequant_bf16(uint8_t" in c.path.read_text(encoding="utf-8")


# -- the kernel's unpacking, compiled for the host -----------------------------------


@pytest.fixture(scope="module")
def host_dequant(tmp_path_factory) -> Path:
    return compile_host(
        tmp_path_factory.mktemp("dequant"),
        [HERE / "host_dequant.cc"],
        "host_dequant",
        flags=("-Wall", "-Werror"),
    )


def _unpack(exe: Path, packed: np.ndarray) -> np.ndarray:
    done = subprocess.run(
        [str(exe)], input=packed.astype(np.uint8).tobytes(), capture_output=True
    )
    assert done.returncode == 0, done.stderr
    return np.frombuffer(done.stdout, np.uint16).view(bfloat16)


def test_the_nibble_table_is_the_reference_unpacking(host_dequant):
    every = np.arange(256 * 16, dtype=np.int64) % 256  # each byte, 16 per group
    got = _unpack(host_dequant, every.astype(np.uint8)).astype(np.float32)
    np.testing.assert_array_equal(got, unpack_int4(every).astype(np.float32))
    # Low nibble first, signed: 0x8F is (-1, -8).
    one = np.full(16, 0x8F, np.uint8)
    assert _unpack(host_dequant, one)[:2].astype(np.float32).tolist() == [-1.0, -8.0]


def test_the_kernel_arithmetic_reproduces_the_reference(host_dequant):
    # The core multiplies the table's bf16 values by the bf16 scale into an
    # fp32 accumulator (exact) and rounds once to bf16, nearest even.
    rng = np.random.default_rng(7)
    n = 64 * 64
    packed = rng.integers(0, 256, n // 2, dtype=np.uint8)
    scales = rng.standard_normal(n // 32).astype(bfloat16)
    scales[:6] = np.array(
        [3.0e38, -3.0e38, 1e-39, 0.0, np.inf, np.nan], np.float32
    ).astype(bfloat16)
    values = _unpack(host_dequant, packed).astype(np.float32)
    with np.errstate(all="ignore"):
        got = (values * np.repeat(scales.astype(np.float32), 32)).astype(bfloat16)
    want = Dequant(N=n).reference(packed, scales)
    np.testing.assert_array_equal(
        got.view(np.uint16)[~np.isnan(want.astype(np.float32))],
        want.view(np.uint16)[~np.isnan(want.astype(np.float32))],
    )
    assert np.array_equal(
        np.isnan(got.astype(np.float32)), np.isnan(want.astype(np.float32))
    )


def test_the_design_groups_by_the_operators_group(monkeypatch):
    # One value, declared by the operator: changed there, the design's
    # scales FIFO follows (1024 values a tile: 32 scales, then 16).
    import iron.operators.dequant as operator_module

    op = Dequant(N=4096, tile_size=1024, num_aie_columns=1)
    assert "memref<32xbf16>" in design(op, "npu2")
    monkeypatch.setattr(operator_module, "GROUP", 64)
    assert "memref<16xbf16>" in design(op, "npu2")
