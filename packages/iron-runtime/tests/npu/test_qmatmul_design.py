"""The quantized-weight designs (QGEMV, DequantRows) and their kernel.

Golden files ``golden/qgemv_q4_2048x2048_<dev>.mlir`` are a Llama-3.2-1B
q/o projection (M = K = 2048) with 4-bit weights, and
``golden/dequant_rows_q4_16x2048_<dev>.mlir`` 16 packed 4-bit rows of a
2048-wide embedding (a 16-token prompt chunk's lookup), at the default resolved tunables; regenerate with
``IRON_UPDATE_GOLDEN=1``. The kernel source ``qmatmul.cc`` is compiled for
the host against the aie_api model (``host_qmatmul.cc``) and judged against
``QGEMV.reference`` and ``DequantRows.reference`` on random and edge
inputs, in every format.
"""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from ml_dtypes import bfloat16

from iron.core.device import as_device
from iron.core.operator import RefusedShapeError
from iron.core.tolerance import compare
from iron.operators.qmatmul import QGEMV, DequantRows
from iron.operators.quantized import FORMATS, QuantFormat, quantize
from iron.runtime.image import Placement
from iron.runtime.npu import LegalityError, kernels, legality
from iron.runtime.npu.designs import build_design, design, family_of, qmatmul

from .support import (
    MATMUL_MODELS,
    check_golden,
    kernel_harness,
    shim_moved,
)

Q4, Q8, Q8_16 = FORMATS["q4"], FORMATS["q8"], FORMATS["q8_16"]


def _qgemv(fmt: QuantFormat, **fields: int) -> QGEMV:
    return QGEMV(bits=fmt.bits, group=fmt.group, **fields)


# -- golden text ----------------------------------------------------------------------


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_golden_qgemv(dev):
    text = design(_qgemv(Q4, M=2048, K=2048), dev)
    check_golden("qgemv_q4_2048x2048", dev, text, subject=f"the QGEMV design on {dev}")


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_golden_dequant_rows(dev):
    op = DequantRows(rows=16, K=2048, bits=4, group=32)
    text = design(op, dev)
    check_golden("dequant_rows_q4_16x2048", dev, text, subject=f"DequantRows on {dev}")


def test_the_family_designs_both():
    assert family_of(_qgemv(Q4, M=64, K=64)) is qmatmul
    assert family_of(DequantRows(rows=1, K=64, bits=4, group=32)) is qmatmul


# -- what the design moves ------------------------------------------------------------


def _moved_bytes(transfers: list[legality.Transfer]) -> np.ndarray:
    """The byte offsets a port's transfers move, in order."""
    parts = []
    for t in transfers:
        idx = shim_moved(t, "npu2").astype(np.int64)
        parts.append((idx[:, None] * t.itemsize + np.arange(t.itemsize)).reshape(-1))
    return np.concatenate(parts)


@pytest.mark.parametrize(
    "fmt, fields",
    [
        (Q4, dict(M=64, K=512, tile_m=4, tile_k=128, num_aie_columns=2)),
        (Q8, dict(M=32, K=256, tile_m=2, tile_k=64, num_aie_columns=4)),
        (Q8_16, dict(M=2048, K=2048)),
        (Q4, dict(M=16, K=2048, tile_m=1, tile_k=512, num_aie_columns=1)),
        # 1024 row tiles a column: walked in blocks with waits between them.
        (Q4, dict(M=16384, K=128, tile_m=2, tile_k=64, num_aie_columns=8)),
    ],
)
def test_each_column_moves_its_packed_rows_tile_by_tile(fmt, fields):
    dev = as_device("npu2")
    op = _qgemv(fmt, **fields).resolved(dev)
    lay = qmatmul.layout(op, dev)
    cols, tm, tk = op.num_aie_columns, op.tile_m, op.tile_k
    rb, rbk = op.row_bytes, fmt.row_bytes(tk)
    rows = op.M // cols
    for c in range(cols):
        # The core's order: row tile, K tile, the tile's rows, their bytes.
        want = [
            np.arange(rbk) + (c * rows + r0 + r) * rb + k * rbk
            for r0 in range(0, rows, tm)
            for k in range(op.K // tk)
            for r in range(tm)
        ]
        got = _moved_bytes([t for t in lay.transfers if t.fifo == f"w_{c}"])
        np.testing.assert_array_equal(got, np.concatenate(want))
        out = _moved_bytes([t for t in lay.transfers if t.fifo == f"out_{c}"])
        np.testing.assert_array_equal(out, np.arange(c * rows * 2, (c + 1) * rows * 2))
        x = _moved_bytes([t for t in lay.transfers if t.fifo == f"x_{c}"])
        times = 1 if tk == op.K else rows // tm
        np.testing.assert_array_equal(x, np.tile(np.arange(op.K * 2), times))
    sizes = {f.name: f.element_bytes for f in lay.fifos if f.name.endswith("_0")}
    assert sizes == {
        "w_0": tm * rbk,
        "x_0": (op.K if tk == op.K else tk) * 2,
        "out_0": tm * 2,
    }


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize(
    "fmt, fields",
    [
        (Q4, dict(M=2048, K=2048)),
        (Q8, dict(M=2048, K=8192)),
        (Q4, dict(M=64, K=512, tile_m=4, tile_k=128, num_aie_columns=2)),
    ],
)
def test_the_cost_counts_the_packed_bytes_the_shims_move(dev, fmt, fields):
    op = _qgemv(fmt, **fields).resolved(dev)
    d = build_design(op, dev)
    moved = {p: 0 for p in ("w", "x", "out")}
    for t in d.layout.transfers:
        moved[t.fifo.rsplit("_", 1)[0]] += int(np.prod(t.sizes)) * t.itemsize
    cost = op.cost(dev)
    assert moved["w"] == op.M * fmt.row_bytes(op.K) == op.M * op.row_bytes
    assert moved["out"] == op.M * 2
    x_cost = cost.bytes + cost.reread_bytes - moved["w"] - moved["out"]
    if op.tile_k < op.K:  # x again per row tile, as cost counts it
        assert moved["x"] == x_cost
    else:  # x whole once per column: cost's per-row-tile count bounds it
        assert moved["x"] == op.num_aie_columns * op.K * 2 <= x_cost
    # A kernel call per K tile of each row tile of a column, as cost counts.
    per_column = op.M // op.num_aie_columns // op.tile_m
    assert cost.calls == per_column * (op.K // op.tile_k)
    assert f"arith.constant {per_column} : index" in d.text
    assert d.arg_bytes == (op.M * op.row_bytes, op.K * 2, op.M * 2)


def test_the_kernel_call_and_its_declaration_match_the_contract():
    c = kernels.contract("qmatmul")
    assert c.operator.startswith("QGEMV and DequantRows")
    assert "bit for bit" in c.rounding and "QGEMV.reference" in c.rounding
    assert "-fstack-usage" in c.stack
    op = _qgemv(Q8_16, M=256, K=1024, tile_m=4, tile_k=512, num_aie_columns=2)
    d = build_design(op, "npu1")
    assert d.kernels == ("qmatmul",)
    decl = re.search(r"func\.func private @qgemv_acc\((.*)\) attributes", d.text)
    assert decl is not None
    # 4 rows of 512 q8_16 elements: 4 * 32 groups * 18 bytes.
    assert decl.group(1) == (
        "memref<2304xi8>, memref<512xbf16>, memref<4xf32>, i32, i32, i32, i32"
    )
    call = re.search(r"func\.call @qgemv_acc\((.*)\) :", d.text)
    assert call is not None
    consts = dict(re.findall(r"(%\S+) = arith\.constant (\d+) : i32", d.text))
    args = [a.strip() for a in call.group(1).split(",")]
    assert [consts[a] for a in args[3:]] == ["4", "512", "8", "16"]
    assert f"%w_buf: memref<{256 * Q8_16.row_bytes(1024)}xi8>" in d.text
    source = c.path.read_text(encoding="utf-8")
    for symbol in (*qmatmul.SYMBOLS["qgemv"], *qmatmul.SYMBOLS["dequant"]):
        assert f"void {symbol}(" in source


# -- legality -----------------------------------------------------------------------


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_every_core_reserves_the_stated_stack_and_counts_it(dev):
    for op in (
        _qgemv(Q4, M=2048, K=2048),
        DequantRows(rows=16, K=2048, bits=4, group=32),
    ):
        d = build_design(op, dev)
        stack = legality.core_stack(as_device(dev), ("qmatmul",))
        assert d.layout.stack_bytes == stack
        assert d.text.count(f"stack_size = {stack} : i32") == len(d.layout.cores)


def test_legality_counts_the_packed_tiles_the_accumulator_and_the_stack():
    dev = as_device("npu1")
    # The operator's own rule passes (its core bytes fit); legality's count of
    # the design's buffers is then the same kind of sum, and a tile past a
    # core's memory is refused by both.
    op = _qgemv(Q8, M=64, K=8192, tile_m=8, tile_k=4096, num_aie_columns=1)
    with pytest.raises(RefusedShapeError, match="over a core's 65536"):
        build_design(op, dev)
    lay = qmatmul.layout(op, dev)
    with pytest.raises(LegalityError, match=r"compute tile \(0, 2\).*bytes"):
        legality.check(lay, dev)
    need = 2 * (8 * Q8.row_bytes(4096) + 8192 * 2 + 8 * 2) + 8 * 4 + lay.stack_bytes
    assert need > dev.core_memory_bytes


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("fmt", [Q4, Q8, Q8_16], ids=lambda f: f.name)
def test_the_operators_core_bytes_are_what_the_design_places(dev, fmt):
    # QGEMV.core_bytes (what resolve() and check() fit tiles by) counts the
    # core's FIFO buffers, its fp32 sums and its stack, nothing more: no
    # dequantized tile, as the kernel holds none.
    device = as_device(dev)
    for m, k in ((2048, 2048), (128256, 2048), (2048, 8192)):
        op = _qgemv(fmt, M=m, K=k).resolved(dev)
        lay = build_design(op, dev).layout
        core = lay.cores[0]
        held = sum(f.depth * f.element_bytes for f in lay.fifos if core in f.consumers)
        held += sum(f.depth * f.element_bytes for f in lay.fifos if f.producer == core)
        held += sum(n for t, n in lay.buffers if t == core) + lay.stack_bytes
        assert op.core_bytes(op.tile_m, op.tile_k) == held <= device.core_memory_bytes


@pytest.mark.parametrize(
    "dev, fields",
    [
        # Llama-2-7B's LM head (M=32000, K=4096) in the small tiles the old
        # resolve() picked: 1000 row tiles a column, 33 walks a shim.
        ("npu2", dict(M=32000, K=4096, tile_m=4, tile_k=2048)),
        # 11008 rows in K tiles of 2048 on npu1's 4 columns: 688 row tiles.
        ("npu1", dict(M=11008, K=4096, tile_m=4, tile_k=2048)),
    ],
)
def test_walks_past_a_shims_descriptors_run_in_blocks_with_waits(dev, fields):
    op = _qgemv(Q4, **fields).resolved(dev)
    device = as_device(dev)
    d = build_design(op, dev)  # legality passed: ids reused only after waits
    cols = op.num_aie_columns
    assert d.layout.waits and len(d.layout.waits) % cols == 0
    per_shim = len([t for t in d.layout.transfers if t.shim == legality.Tile(0, 0)])
    assert per_shim > device.shim_bds
    assert d.text.count("aiex.npu.dma_wait") == len(d.layout.waits)
    # Every w byte moves once, every out element once, in the blocks' order.
    for port, want in (("w", op.M * op.row_bytes), ("out", op.M * 2)):
        moved = sum(
            int(np.prod(t.sizes)) * t.itemsize
            for t in d.layout.transfers
            if t.fifo.startswith(f"{port}_")
        )
        assert moved == want


def test_the_arena_holds_packed_rows_at_word_offsets_only():
    op = _qgemv(Q4, M=64, K=256, num_aie_columns=2)
    nbytes = 64 * Q4.row_bytes(256)
    placement = {
        "w": Placement("arena", 1024, nbytes),
        "x": Placement("arena", 0, 512),
        "out": Placement("output", 0, 128),
    }
    d = build_design(op, "npu2", placement)
    assert d.args == ("arena", "out")
    (w1,) = [t for t in d.layout.transfers if t.fifo == "w_1"]
    assert (w1.buffer, w1.itemsize) == ("arena", 2)
    got = _moved_bytes([w1])
    np.testing.assert_array_equal(got, 1024 + nbytes // 2 + np.arange(nbytes // 2))
    bad = {**placement, "w": Placement("arena", 1026, nbytes)}
    with pytest.raises(LegalityError, match=r"shim tile \(0, 0\).*4-byte alignment"):
        build_design(op, "npu2", bad)


def test_refusals_are_named():
    with pytest.raises(
        RefusedShapeError, match="K=96 is not a positive multiple of 64"
    ):
        build_design(_qgemv(Q4, M=4, K=96), "npu1")
    with pytest.raises(RefusedShapeError, match="exceeds the device's 4 columns"):
        build_design(_qgemv(Q4, M=64, K=64, num_aie_columns=8), "npu1")
    with pytest.raises(LegalityError, match="rows of out are 2 bytes"):
        build_design(_qgemv(Q4, M=4, K=64, tile_m=1, num_aie_columns=4), "npu1")


def test_dequant_rows_moves_every_row_once_in_tiles_that_fit():
    dev = as_device("npu2")
    op = DequantRows(rows=64, K=4096, bits=8, group=16)
    tr = qmatmul.dequant_tile_rows(op, dev)
    per_row = Q8_16.row_bytes(4096) + 4096 * 2
    assert 64 % tr == 0 and 2 * tr * per_row <= dev.core_memory_bytes
    assert 2 * 2 * tr * per_row > dev.core_memory_bytes or tr == 64
    lay = qmatmul.layout(op, dev)
    (w,) = [t for t in lay.transfers if t.fifo == "w_0"]
    np.testing.assert_array_equal(
        _moved_bytes([w]), np.arange(64 * Q8_16.row_bytes(4096))
    )
    text = design(op, dev)
    assert f"arith.constant {64 // tr} : index" in text
    assert "func.call @qdequant_rows(" in text


# -- the kernel, compiled for the host --------------------------------------------------


@pytest.fixture(scope="module", params=["fp32", "aie2"])
def host_qmatmul(request, tmp_path_factory) -> Path:
    build = tmp_path_factory.mktemp(f"qmatmul_{request.param}")
    return kernel_harness(build, "host_qmatmul", aie2=request.param == "aie2")


def _run(exe: Path, args: list, data: bytes) -> np.ndarray:
    done = subprocess.run(
        [str(exe), *map(str, args)], input=data, capture_output=True, check=True
    )
    return np.frombuffer(done.stdout, np.uint16).view(bfloat16)


def _f16_fields(
    w: np.ndarray, fmt: QuantFormat, offset: int, values: np.ndarray
) -> None:
    """Write float16 ``values`` (cycled) into every group's field at ``offset``."""
    groups = w.reshape(w.shape[0], -1, fmt.group_bytes)
    n = groups.shape[0] * groups.shape[1]
    cycled = np.resize(np.asarray(values, np.float16), n).reshape(groups.shape[:2])
    groups[..., offset : offset + 2] = cycled[..., None].view(np.uint8)


#: fp16 extremes: the largest, the smallest normal and subnormal, signed
#: zeros, values with all 11 significant bits set.
EDGE_F16 = np.array(
    [
        65504.0,
        -65504.0,
        2.0**-14,
        2.0**-24,
        -(2.0**-24),
        0.0,
        -0.0,
        2047 * 2.0**-24,
        1.0 + 1023 / 1024,
        -(2.0 - 2.0**-10) * 2.0**15,
        1023 * 2.0**-24,
    ],
    np.float16,
)


def _weights(fmt: QuantFormat, rows: int, k: int, case: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if case == "quantized":
        return quantize(rng.standard_normal((rows, k)) * 0.05, fmt)
    w = rng.integers(0, 256, (rows, fmt.row_bytes(k)), dtype=np.uint8)
    if case == "random":  # random codes, finite random fields
        fields = rng.standard_normal(rows * k // fmt.group) * 3
    elif case == "zero":  # zero scales (and minimums): every weight zero
        fields = np.zeros(1)
    else:  # fp16 extremes in the scale and the minimum
        fields = EDGE_F16
    _f16_fields(w, fmt, 0, fields)
    if fmt.bits == 4:
        _f16_fields(w, fmt, 2, fields[::-1] if case != "zero" else fields)
    return w


CASES = ["quantized", "random", "zero", "edge"]


@pytest.mark.parametrize("fmt", [Q4, Q8, Q8_16], ids=lambda f: f.name)
def test_the_kernel_dequantizes_bit_for_bit(host_qmatmul, fmt):
    rows, k = 8, 512
    for case in CASES:
        w = _weights(fmt, rows, k, case, seed=3)
        want = DequantRows(rows=rows, K=k, bits=fmt.bits, group=fmt.group).reference(w)
        for model in MATMUL_MODELS:
            args = ["dequant", fmt.bits, fmt.group, rows, k, model]
            got = _run(host_qmatmul, args, w.tobytes()).reshape(rows, k)
            np.testing.assert_array_equal(
                got.view(np.uint16), want.view(np.uint16), err_msg=f"{case} {model}"
            )


def test_every_code_and_nonfinite_fields_dequantize_as_the_reference(host_qmatmul):
    # Every byte in every code position; scales and minimums that are
    # infinities or NaNs (the formats refuse them, the kernel still matches).
    for fmt in (Q4, Q8):
        groups = 256
        w = np.zeros((1, groups * fmt.group_bytes), np.uint8)
        g = w.reshape(groups, fmt.group_bytes)
        g[:, fmt.header_bytes :] = (
            np.arange(groups)[:, None] + np.arange(fmt.group_bytes - fmt.header_bytes)
        ) % 256
        fields = np.array([1.5, np.inf, -np.inf, np.nan, -3.25, 0.0], np.float16)
        _f16_fields(w, fmt, 0, fields)
        if fmt.bits == 4:
            _f16_fields(w, fmt, 2, fields[::-1])
        k = groups * fmt.group
        with np.errstate(invalid="ignore"):
            want = DequantRows(rows=1, K=k, bits=fmt.bits, group=fmt.group).reference(w)
        got = _run(
            host_qmatmul, ["dequant", fmt.bits, fmt.group, 1, k, "itez"], w.tobytes()
        )
        wf, gf = want.astype(np.float32).ravel(), got.astype(np.float32)
        np.testing.assert_array_equal(np.isnan(gf), np.isnan(wf))
        keep = ~np.isnan(wf)
        np.testing.assert_array_equal(
            gf.view(np.uint32)[keep], wf.view(np.uint32)[keep]
        )


@pytest.mark.parametrize("fmt", [Q4, Q8, Q8_16], ids=lambda f: f.name)
def test_the_kernel_product_meets_qgemv_reference(host_qmatmul, fmt):
    rng = np.random.default_rng(5)
    # The last: tiles as large as resolve() now picks (256 packed rows a
    # call, a group at a time, no dequantized tile held).
    tilings = [
        (32, 512, 4, 128),
        (8, 1024, 8, 1024),
        (4, 256, 1, 64),
        (512, 256, 256, 128),
    ]
    for (m, k, tm, tk), case in itertools.product(tilings, CASES):
        op = _qgemv(fmt, M=m, K=k, tile_m=tm, tile_k=tk, num_aie_columns=1)
        w = _weights(fmt, m, k, case, seed=m + k)
        x = rng.standard_normal(k).astype(bfloat16)
        if case == "edge":  # large and tiny activations too
            x[::3] = np.float32(3e4)
            x[1::3] = np.float32(1e-30)
        with np.errstate(all="ignore"):
            want = op.reference(w, x)
        for model in MATMUL_MODELS:
            args = ["qgemv", fmt.bits, fmt.group, m, k, tm, tk, model]
            got = _run(host_qmatmul, args, w.tobytes() + x.view(np.uint16).tobytes())
            verdict = compare(got, want, op.tolerance(w, x))
            assert verdict, f"{case} {m}x{k} tiles {tm}x{tk} {model}: {verdict}"
            # Summed in another order than numpy's, the fp32 sums round to
            # the same bf16 all but rarely: the dequantized weights are the
            # reference's bit for bit, and so are nearly all results.
            same = (got.view(np.uint16) == want.view(np.uint16)).mean()
            assert same >= 0.9, f"{case} {m}x{k} {model}: {same:.2f} bit-equal"


def test_a_wrong_group_layout_fails_the_check(host_qmatmul):
    # The same bytes read as q8 groups of 32 instead of 16: not the reference.
    m, k = 8, 256
    w = _weights(Q8_16, m, k, "quantized", seed=1)[:, : Q8.row_bytes(k)]
    w = np.ascontiguousarray(w)
    x = np.random.default_rng(2).standard_normal(k).astype(bfloat16)
    op = _qgemv(Q8, M=m, K=k, tile_m=4, tile_k=256, num_aie_columns=1)
    got = _run(
        host_qmatmul,
        ["qgemv", 8, 32, m, k, 4, 256, "itez"],
        w.tobytes() + x.view(np.uint16).tobytes(),
    )
    assert compare(got, op.reference(w, x), op.tolerance(w, x))
    swapped = w.reshape(m, -1, Q8.group_bytes)[:, ::-1].reshape(m, -1).copy()
    assert not compare(
        _run(
            host_qmatmul,
            ["qgemv", 8, 32, m, k, 4, 128, "itez"],
            swapped.tobytes() + x.view(np.uint16).tobytes(),
        ),
        op.reference(w, x),
        op.tolerance(w, x),
    )


def test_the_harness_refuses_bad_arguments(host_qmatmul):
    done = subprocess.run([str(host_qmatmul), "qgemv", "4"], capture_output=True)
    assert done.returncode == 2 and b"usage" in done.stderr
