"""QGEMV, QGEMM and DequantRows: the quantized products' numerics, rules and costs.

The references are judged against an exact oracle (``math.fsum`` of float64
products) over the dequantized bf16 weights, on random and adversarial
(cancelling, mixed-magnitude) inputs, within the derived tolerance and the
undoubled bound; a kernel that skips a step the model takes (keeps the
float32 dequantized weights, sums in bf16) is caught by it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from ml_dtypes import bfloat16

from iron.core.cost import step_time
from iron.core.device import NPU1, NPU2
from iron.core.operator import Cost, DimensionConflictError, RefusedShapeError
from iron.core.tolerance import Tolerance, compare
from iron.operators import GEMM, GEMV
from iron.operators.qmatmul import QGEMM, QGEMV, DequantRows
from iron.operators.quantized import Q4, Q8, Q8_16, dequantize, quantize

FORMATS = (Q4, Q8, Q8_16)


def exact(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` (b 1-D or 2-D) correctly rounded to float64."""
    a64, b64 = np.asarray(a).astype(np.float64), np.asarray(b).astype(np.float64)
    if b64.ndim == 1:
        return np.array([math.fsum(row * b64) for row in a64])
    return np.array(
        [
            [math.fsum(a64[i] * b64[:, j]) for j in range(b64.shape[1])]
            for i in range(len(a64))
        ]
    )


def weights(fmt, rows, k, seed=0, scale=0.05):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((rows, k)) * scale).astype(np.float32)
    packed = quantize(w, fmt)
    return packed, dequantize(packed, fmt).astype(bfloat16)


def b16(x):
    return np.asarray(x, np.float64).astype(bfloat16)


def holds(op, got, want, *inputs):
    tight = Tolerance.bounded(op.error_bound(*inputs))
    for tol in (op.tolerance(*inputs), tight):
        verdict = compare(got, want, tol)
        assert verdict, f"{op}: {verdict}"


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("case", ["random", "cancelling", "mixed"])
def test_qgemv_reference_holds_its_bound(fmt, case):
    rng = np.random.default_rng(1)
    m, k = 8, 256
    if case == "cancelling":
        # rows [u, -u] against [y, y]: the exact product is zero
        half = rng.standard_normal((m, k // 2)).astype(np.float32)
        w = np.concatenate([half, -half], axis=1)
        packed = quantize(w, fmt)
        x = b16(np.tile(rng.uniform(1, 2, k // 2), 2))
    else:
        packed, _ = weights(fmt, m, k, seed=2)
        x = b16(rng.standard_normal(k))
        if case == "mixed":
            x = b16(x.astype(np.float64) * 10.0 ** rng.integers(-8, 8, k))
    wb = dequantize(packed, fmt).astype(bfloat16)
    op = QGEMV(M=m, K=k, bits=fmt.bits, group=fmt.group).resolved("npu2")
    got = op.reference(packed, x)
    assert got.dtype == bfloat16 and got.shape == (m,)
    want = exact(wb, x)
    if case == "cancelling" and fmt.bits == 8:
        assert (want == 0).all()  # symmetric codes: the halves cancel exactly
    holds(op, got, want, packed, x)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_qgemv_is_gemv_over_the_dequantized_weights_bit_for_bit(fmt):
    packed, wb = weights(fmt, 16, 512, seed=3)
    x = b16(np.random.default_rng(4).standard_normal(512))
    op = QGEMV(M=16, K=512, bits=fmt.bits, group=fmt.group).resolved("npu1")
    ref = GEMV(M=16, K=512).resolved("npu1").reference(wb, x)
    np.testing.assert_array_equal(
        op.reference(packed, x).view(np.uint16), ref.view(np.uint16)
    )


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("rows", [16, 5])  # 5: a chunk bounded per call
def test_qgemm_reference_holds_its_bound_and_is_gemm(fmt, rows):
    rng = np.random.default_rng(5)
    packed, wb = weights(fmt, 32, 128, seed=6)
    a = b16(rng.standard_normal((16, 128)) * 10.0 ** rng.integers(-3, 3, (16, 1)))[
        :rows
    ]
    # N a multiple of npu2's 16 (QGEMM's device tiles are GEMM's mmul's).
    op = QGEMM(M=16, K=128, N=32, bits=fmt.bits, group=fmt.group).resolved("npu2")
    got = op.reference(a, packed)
    assert got.shape == (rows, 32) and got.dtype == bfloat16
    holds(op, got, exact(a, wb.T), a, packed)
    ref = GEMM(M=16, K=128, N=32, b_transposed=True).reference(a, wb)
    np.testing.assert_array_equal(got.view(np.uint16), ref.view(np.uint16))


def _constant_q4(values: list[float], k: int) -> np.ndarray:
    """q4 rows whose groups are all ``value`` (scale 0, min ``value``)."""
    rows = []
    for v in values:
        group = np.zeros(20, np.uint8)
        group[2:4] = np.array([v], np.float16).view(np.uint8)
        rows.append(np.tile(group, k // 32))
    return np.stack(rows)


def test_the_tolerance_catches_undequantized_weights_and_a_bf16_accumulator():
    """A kernel that multiplies the float32 dequantized weights (no bf16
    rounding), or sums in bf16, is outside the tolerance."""
    k = 2048
    # 1 + 3 * 2**-10 is a float16, not a bf16 (it rounds to 1): against x =
    # [1, -1] halves, the first half of the row 1.0029 and the second 1.0,
    # the product is 0 with bf16 weights and 0.0029 * 1024 without.
    top = _constant_q4([1 + 3 * 2**-10], k // 2)
    bottom = _constant_q4([1.0], k // 2)
    packed = np.concatenate([top, bottom], axis=1)
    x = b16(np.repeat([1.0, -1.0], k // 2))
    op = QGEMV(M=1, K=k, bits=4, group=32).resolved("npu2")
    wb = dequantize(packed, Q4).astype(bfloat16)
    want = exact(wb, x)
    assert want[0] == 0 and compare(
        op.reference(packed, x), want, op.tolerance(packed, x)
    )
    w32 = dequantize(packed, Q4).astype(np.float64)
    unrounded = b16(w32 @ x.astype(np.float64))
    assert unrounded[0] == 3.0 and not compare(unrounded, want, op.tolerance(packed, x))
    # a bf16 accumulator over ones sticks at 256
    ones = _constant_q4([1.0], k)
    acc = np.float32(0)
    for p in dequantize(ones, Q4)[0].astype(bfloat16).astype(np.float32):
        acc = np.float32(bfloat16(acc + p))
    y = b16(np.ones(k))
    exact_sum = exact(dequantize(ones, Q4), y)
    assert exact_sum[0] == k and acc == 256
    assert not compare(b16([acc]), exact_sum, op.tolerance(ones, y))


def test_dequant_rows_is_exact_and_reads_gathered_rows():
    packed, wb = weights(Q4, 10, 128, seed=9)
    op = DequantRows(rows=3, K=128, bits=4, group=32)
    got = op.reference(packed[[7, 0, 7]])
    np.testing.assert_array_equal(got.view(np.uint16), wb[[7, 0, 7]].view(np.uint16))
    assert op.reference(packed[[2]]).shape == (1, 128)  # rows bounded per call
    assert op.tolerance().kind == "exact"


def test_declarations_read_the_format_off_the_packed_rows():
    packed = np.zeros((6, Q8_16.row_bytes(256)), np.uint8)
    found = QGEMV.infer({"w": packed, "x": np.zeros(256, bfloat16)})
    assert (found["M"][0], found["K"][0], found["bits"][0], found["group"][0]) == (
        6,
        256,
        8,
        16,
    )
    found = QGEMM.infer({"a": np.zeros((4, 256), bfloat16), "w": packed})
    assert (found["N"][0], found["M"][0], found["bits"][0]) == (6, 4, 8)
    with pytest.raises(DimensionConflictError, match=r"QGEMV: a packed row of 7 bytes"):
        QGEMV.infer({"w": np.zeros((2, 7), np.uint8), "x": np.zeros(256, bfloat16)})
    op = QGEMV(M=6, K=256, bits=8, group=16)
    assert op.row_bytes == 16 * 18 and op.quant_format is Q8_16


@pytest.mark.parametrize("dev", [NPU1, NPU2])
@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_resolve_gives_tiles_check_accepts_and_cost_counts_packed_bytes(dev, fmt):
    m, k, n = 2048, 2048, 2048
    v = QGEMV(M=m, K=k, bits=fmt.bits, group=fmt.group).resolved(dev)
    v.check(dev)
    cost = v.cost(dev)
    assert isinstance(cost, Cost) and cost.macs == m * k
    assert cost.bytes == m * fmt.row_bytes(k) + 2 * k + 2 * m
    bf16_bytes = GEMV(M=m, K=k).resolved(dev).cost(dev).bytes
    assert cost.bytes / bf16_bytes < {4: 0.32, 8: 0.57}[fmt.bits]
    g = QGEMM(M=16, K=k, N=n, bits=fmt.bits, group=fmt.group).resolved(dev)
    g.check(dev)
    assert g.cost(dev).bytes == 16 * k * 2 + n * fmt.row_bytes(k) + 16 * n * 2
    r = DequantRows(rows=4, K=k, bits=fmt.bits, group=fmt.group).resolved(dev)
    assert r.cost(dev).bytes == 4 * fmt.row_bytes(k) + 4 * k * 2


def test_core_bytes_count_what_the_kernel_holds_no_dequantized_tile():
    # The kernel dequantizes one group at a time on its stack: a core holds
    # the packed w, x and bf16 out tiles double-buffered, the fp32 sums and
    # the stack. A Llama-3.2-1B projection's 256 x 128 q4 tile fits npu2 so;
    # with a whole bf16 tile besides (64 KiB more) it could not.
    op = QGEMV(M=2048, K=2048, bits=4, group=32)
    want = 2 * (256 * 80 + 128 * 2 + 256 * 2) + 256 * 4 + 1024
    assert op.core_bytes(256, 128) == want
    assert op.core_bytes(256, 128) + 256 * 128 * 2 > NPU2.core_memory_bytes
    op.replace(num_aie_columns=8, tile_m=256, tile_k=128).check(NPU2)
    with pytest.raises(
        RefusedShapeError,
        match=r"tile_k=256 need 86016 bytes \(packed w, x and bf16 out",
    ):
        op.replace(num_aie_columns=8, tile_m=256, tile_k=256).check(NPU2)


def _least_modelled(op, dev):
    """The least modelled time of any tiling of ``op`` that check accepts."""
    best = math.inf
    for cols in (1, 2, 4, 8):
        if cols > dev.columns or op.M % cols:
            continue
        rows = op.M // cols
        for m in (d for d in range(1, rows + 1) if rows % d == 0):
            for k in range(64, op.K + 1, 64):
                if op.K % k or op.core_bytes(m, k) > dev.core_memory_bytes:
                    continue
                tried = op.replace(num_aie_columns=cols, tile_m=m, tile_k=k)
                tried.check(dev)
                best = min(best, step_time(tried, dev, dispatches=0).seconds)
    return best


@pytest.mark.parametrize(
    "dev, fmt, m, k, want",
    [
        # Llama-3.2-1B's q/o projection and tied LM head, 4-bit, on npu2.
        (NPU2, Q4, 2048, 2048, (8, 256, 128)),
        (NPU2, Q4, 128256, 2048, (8, 668, 64)),
        (NPU1, Q8, 2048, 8192, (4, 256, 64)),
        (NPU2, Q8, 512, 2048, (8, 64, 256)),
    ],
)
def test_resolve_picks_the_tiling_of_least_modelled_time(dev, fmt, m, k, want):
    op = QGEMV(M=m, K=k, bits=fmt.bits, group=fmt.group)
    got = op.resolved(dev)
    got.check(dev)
    assert (got.num_aie_columns, got.tile_m, got.tile_k) == want
    seconds = step_time(got, dev, dispatches=0).seconds
    assert seconds == pytest.approx(_least_modelled(op, dev), rel=1e-12)


def test_resolve_keeps_a_given_tile():
    op = QGEMV(M=2048, K=2048, bits=4, group=32, tile_m=4).resolved(NPU2)
    assert (op.tile_m, op.tile_k) == (4, 2048)
    op = QGEMV(M=2048, K=2048, bits=4, group=32, tile_k=64).resolved(NPU2)
    assert (op.tile_m, op.tile_k) == (256, 64)


def test_device_rules_name_what_breaks():
    with pytest.raises(
        RefusedShapeError, match=r"QGEMV on npu2: K=96 is not a positive multiple of 64"
    ):
        QGEMV(M=4, K=96, bits=4, group=32).resolved("npu2")
    with pytest.raises(RefusedShapeError, match=r"tile_k=64, tile_n=2048 need"):
        QGEMM(
            M=32,
            K=2048,
            N=2048,
            bits=4,
            group=32,
            num_aie_columns=1,
            tile_m=32,
            tile_k=64,
            tile_n=2048,
        ).resolved("npu2").check(NPU2)
    with pytest.raises(ValueError, match=r"bits=4, group=16 is no quantized format"):
        QGEMV(M=4, K=64, bits=4, group=16).quant_format  # noqa: B018


def test_reference_refuses_operands_of_the_wrong_format():
    packed, _ = weights(Q8, 4, 64)
    op = QGEMV(M=4, K=64, bits=4, group=32)
    with pytest.raises(
        ValueError, match=r"w is packed q4 rows \[4, 40\] uint8; got \[4, 68\]"
    ):
        op.reference(packed, b16(np.ones(64)))


@pytest.mark.parametrize("dev, unit_n", [(NPU1, 8), (NPU2, 16)])
@pytest.mark.parametrize("k, n", [(2048, 2048), (2048, 512), (8192, 2048), (128, 384)])
def test_qgemm_resolves_to_gemms_mmul_multiples_that_fit(dev, unit_n, k, n):
    """The device multiplies the dequantized tile with GEMM's mmul: tile_m a
    multiple of 8, tile_n of twice the mmul's n, and the core bytes fit."""
    for fmt in FORMATS:
        op = QGEMM(M=16, K=k, N=n, bits=fmt.bits, group=fmt.group).resolved(dev)
        op.check(dev)
        assert op.tile_m % 8 == 0 and op.tile_n % unit_n == 0
        assert n % (op.tile_n * op.num_aie_columns) == 0
        need = op.core_bytes(op.tile_m, op.tile_k, op.tile_n)
        assert need <= dev.core_memory_bytes
        # the longest K tile that fits: the next longer divisor does not
        longer = [t for t in range(op.tile_k + 64, k + 1, 64) if k % t == 0]
        if longer:
            assert (
                op.core_bytes(op.tile_m, longer[0], op.tile_n) > dev.core_memory_bytes
            )


# -- kept decoded (Operator.decoded) ------------------------------------------------


@pytest.mark.parametrize("fmt", [Q4, Q8, Q8_16], ids=lambda f: f.name)
def test_the_decoded_weight_gives_the_packed_rows_bits(fmt) -> None:
    rng = np.random.default_rng(7)
    w = quantize(rng.standard_normal((96, 128)) * 0.1, fmt)
    gemv = QGEMV(M=96, K=128, bits=fmt.bits, group=fmt.group)
    gemm = QGEMM(M=8, K=128, N=96, bits=fmt.bits, group=fmt.group)
    rows = DequantRows(rows=4, K=128, bits=fmt.bits, group=fmt.group)
    # each says which input it takes decoded: the packed weight's
    assert gemv.decoded(0) is not None and gemv.decoded(1) is None
    assert gemm.decoded(1) is not None and gemm.decoded(0) is None
    assert rows.decoded(0) is None  # it reads a few packed rows at a time
    copy = gemv.decoded(0)(w)
    assert copy.dtype == bfloat16 and copy.shape == (96, 128)
    np.testing.assert_array_equal(
        copy.view(np.uint16), dequantize(w, fmt).astype(bfloat16).view(np.uint16)
    )
    x = rng.standard_normal(128).astype(bfloat16)
    a = rng.standard_normal((8, 128)).astype(bfloat16)
    for got, want in [
        (gemv.reference(copy, x), gemv.reference(w, x)),
        (gemm.reference(a, gemm.decoded(1)(w)), gemm.reference(a, w)),
    ]:
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_a_decoded_weight_of_the_wrong_shape_is_refused() -> None:
    w = quantize(np.ones((96, 128)), Q4)
    gemv = QGEMV(M=96, K=128, bits=4, group=32)
    copy = gemv.decoded(0)(w)
    with pytest.raises(
        ValueError, match=r"QGEMV: a decoded w is bf16 \[96, 128\]; got \[96, 64\]"
    ):
        gemv.reference(copy[:, :64], np.ones(128, bfloat16))
    gemm = QGEMM(M=8, K=128, N=96, bits=4, group=32)
    with pytest.raises(ValueError, match=r"QGEMM: a decoded w is bf16 \[96, 128\]"):
        gemm.reference(np.ones((8, 128), bfloat16), copy[:48])
