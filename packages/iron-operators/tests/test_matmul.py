"""Tests for GEMV and GEMM: precision levels, references, bounds, resolve, check, cost.

References are judged against an exact oracle (``math.fsum`` of float64
products, which are exact for bf16 inputs) under the operator's own
``tolerance(*inputs)``, and under the undoubled ``error_bound`` (the bound on
a kernel's distance from the exact product) to test the derivation itself.
Wrong kernel models are built here and shown to fail on inputs constructed
to expose them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ml_dtypes import bfloat16

import iron
from iron.core.cost import step_time
from iron.core.declare import Divisors, Input, Output
from iron.core.device import NPU1, NPU2
from iron.core.operator import Cost, DimensionConflictError, RefusedShapeError
from iron.core.precision import Precision
from iron.core.tolerance import Tolerance, compare
from iron.operators import bfp16
from iron.operators.matmul import GEMM, GEMV, STACK_BYTES, mmul_shape, model_product

HIGHEST, HIGH, MEDIUM = Precision.HIGHEST, Precision.HIGH, Precision.MEDIUM
DEVICES = (NPU1, NPU2)
SIGN = 0x8000


def bf16(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint16).view(bfloat16)


def b16(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).astype(bfloat16)


# -- the oracle ------------------------------------------------------------------------


def exact(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` correctly rounded to float64: fsum of exact products."""
    a64, b64 = np.asarray(a).astype(np.float64), np.asarray(b).astype(np.float64)
    if not (np.isfinite(a64).all() and np.isfinite(b64).all()):
        with np.errstate(all="ignore"):
            return a64 @ b64
    if b64.ndim == 1:
        return np.array([math.fsum(row * b64) for row in a64])
    return np.array(
        [
            [math.fsum(a64[i] * b64[:, j]) for j in range(b64.shape[1])]
            for i in range(len(a64))
        ]
    )


def tight(op, *inputs) -> Tolerance:
    """The undoubled bound: a kernel's distance from the exact product."""
    return Tolerance.bounded(op.error_bound(*inputs))


def holds(op, *inputs):
    """Assert op's reference holds both its tolerance and the tight bound."""
    got = op.reference(*inputs)
    if isinstance(op, GEMV) and op.batch is not None:
        want = np.stack([exact(w, x) for w, x in zip(*inputs)])
    elif isinstance(op, GEMV):
        want = exact(*inputs)
    else:
        a, b = inputs
        want = exact(a, b.T if op.b_transposed else b)
    for tol in (op.tolerance(*inputs), tight(op, *inputs)):
        verdict = compare(got, want, tol)
        assert verdict, f"{op}: {verdict}"
    return got, want


# -- inputs ------------------------------------------------------------------------------


def signed(magnitude):
    return st.tuples(st.booleans(), magnitude).map(lambda t: t[1] | (SIGN * t[0]))


moderate = signed(st.integers(0x3000, 0x4FFF))  # ~2**-31 .. 2**32
unit_scale = signed(st.integers(0x3E00, 0x4080))  # ~0.125 .. 4
tiny = signed(st.integers(0x0000, 0x00FF))  # zeros and subnormals
elements = st.one_of(moderate, unit_scale, unit_scale, tiny, st.just(SIGN))


def matrices(rows, cols, elems=elements):
    return st.lists(elems, min_size=rows * cols, max_size=rows * cols).map(
        lambda bits: bf16(bits).reshape(rows, cols)
    )


@st.composite
def cancelling_rows(draw, rows, k):
    """``(w, x)``: each row of w is ``[u, -u]`` against ``x = [y, y]``, a few nudged."""
    u = draw(matrices(rows, k // 2, unit_scale))
    y = draw(matrices(1, k // 2, moderate))[0]
    w = np.concatenate([u, -u], axis=1)
    bits = w.view(np.uint16).astype(np.int64)
    for _ in range(draw(st.integers(0, 3))):
        i, j = draw(st.integers(0, rows - 1)), draw(st.integers(0, k - 1))
        bits[i, j] += draw(st.sampled_from([-1, 1]))
    w = bf16(np.clip(bits, 0, 0xFFFF)).reshape(rows, k)
    return w, np.concatenate([y, y])


def legal_tile_ks(k: int, width: int = 16) -> list[int]:
    return [t for t in range(2 * width, k + 1, width) if k % t == 0]


@st.composite
def gemv_cases(draw, cancel=False):
    m = draw(st.sampled_from([1, 2, 3, 4, 8]))
    k = draw(st.sampled_from([32, 48, 64, 96, 128, 256]))
    if cancel:
        w, x = draw(cancelling_rows(m, k))
    else:
        w, x = draw(matrices(m, k)), draw(matrices(1, k))[0]
    op = GEMV(
        M=m,
        K=k,
        precision=draw(st.sampled_from(list(Precision))),
        vector_width=16,
        tile_k=draw(st.sampled_from(legal_tile_ks(k))),
    ).resolved(draw(st.sampled_from(DEVICES)))
    return op, w, x


# -- declarations ------------------------------------------------------------------------


def test_gemv_declaration():
    d = GEMV.declaration
    assert d.dimensions == ("M", "K", "batch", "precision")
    assert d.tunables == (
        "effective_precision",
        "num_aie_columns",
        "tile_m",
        "tile_k",
        "vector_width",
    )
    assert d.params["effective_precision"].domain is Precision
    assert d.params["tile_k"].domain == Divisors("K", multiple_of=16)
    assert d.params["vector_width"].domain == (64, 32, 16)
    assert d.inputs == (Input("w", "M", "K"), Input("x", "K"))
    assert d.outputs == (Output("out", "M"),)


def test_gemm_declaration():
    d = GEMM.declaration
    assert d.dimensions == ("M", "K", "N", "b_transposed", "precision")
    assert d.tunables == (
        "effective_precision",
        "num_aie_columns",
        "tile_m",
        "tile_k",
        "tile_n",
        "out_depth",
    )
    assert d.params["tile_k"].domain == Divisors("K", multiple_of=8)
    assert d.params["out_depth"].domain == (2, 1)
    assert d.inputs == (Input("a", "M", "K"), Input("b", "K", "N"))


# -- precision -----------------------------------------------------------------------------


def test_precision_defaults_to_highest_and_converts_strings():
    assert GEMV(M=4, K=64).precision is HIGHEST
    assert GEMM(M=16, K=8, N=16, precision="High").precision is HIGH
    assert GEMV(M=4, K=64, precision=Precision.MEDIUM).precision is MEDIUM
    with pytest.raises(ValueError, match="'fast' is not a Precision"):
        GEMV(M=4, K=64, precision="fast")


@pytest.mark.parametrize(
    "precision, dev, effective",
    [
        (HIGHEST, NPU1, HIGHEST),
        (HIGHEST, NPU2, HIGHEST),
        (HIGH, NPU1, HIGH),
        (HIGH, NPU2, HIGH),
        (MEDIUM, NPU2, MEDIUM),
        (MEDIUM, NPU1, HIGH),  # no bfp16 multiplies on npu1: the fallback
    ],
    ids=str,
)
@pytest.mark.parametrize("cls", [GEMV, GEMM])
def test_resolve_records_the_effective_precision(cls, precision, dev, effective):
    fields = {"M": 32, "K": 256} if cls is GEMV else {"M": 32, "K": 256, "N": 32}
    op = cls(**fields, precision=precision).resolved(dev)
    assert op.precision is precision
    assert op.effective_precision is effective
    assert op.level() is effective


def test_medium_on_npu1_computes_exactly_what_high_does():
    w, x = mixed_magnitude_blocks()
    on_npu1 = GEMV(M=8, K=64, precision="medium").resolved("npu1")
    high = GEMV(M=8, K=64, precision="high", tile_k=on_npu1.tile_k).resolved("npu1")
    np.testing.assert_array_equal(on_npu1.reference(w, x), high.reference(w, x))
    on_npu2 = GEMV(M=8, K=64, precision="medium", tile_k=64).resolved("npu2")
    assert not np.array_equal(on_npu2.reference(w, x), on_npu1.reference(w, x))
    assert on_npu1.tolerance(w, x) == high.tolerance(w, x)


def test_a_more_precise_effective_level_is_allowed():
    op = GEMM(M=32, K=64, N=32, precision="medium", effective_precision="highest")
    assert op.resolved("npu2").effective_precision is HIGHEST
    assert op.pinned == frozenset({"effective_precision"})


def test_unresolved_reference_needs_a_device_below_highest():
    w, x = b16(np.ones((4, 64))), b16(np.ones(64))
    assert GEMV(M=4, K=64).reference(w, x).tolist() == [64.0] * 4  # no device needed
    with pytest.raises(ValueError, match=r"resolve it first \(op.resolved"):
        GEMV(M=4, K=64, precision="high").reference(w, x)
    with pytest.raises(ValueError, match="effective_precision and tile_k"):
        GEMV(M=4, K=64, precision="medium", tile_k=64).tolerance(w, x)


# -- tolerances ----------------------------------------------------------------------------


@pytest.mark.parametrize("op", [GEMV(M=64, K=256), GEMM(M=32, K=64, N=32)], ids=repr)
def test_without_inputs_the_tolerance_is_amds_gemv_figure(op):
    tol = op.resolved("npu2").tolerance()
    assert tol.kind == "relative" and (tol.rtol, tol.atol) == (0.04, 1e-3)
    assert "without cancellation" in tol.note and "AMD IRON" in tol.note


@pytest.mark.parametrize("precision", list(Precision), ids=str)
def test_with_inputs_the_tolerance_is_a_derived_bound(precision):
    rng = np.random.default_rng(0)
    w, x = b16(rng.standard_normal((8, 128))), b16(rng.standard_normal(128))
    op = GEMV(M=8, K=128, precision=precision).resolved("npu2")
    tol = op.tolerance(w, x)
    assert tol.kind == "bounded" and tol.bound.shape == (8,)
    np.testing.assert_array_equal(tol.bound, 2 * op.error_bound(w, x))
    assert "derived" in tol.note and precision.value in tol.note
    assert ("bfp16" in tol.note) == (precision is MEDIUM)


def test_highest_bound_is_the_one_rounding_and_f32_sum_formula():
    rng = np.random.default_rng(1)
    a, b = b16(rng.uniform(-2, 2, (16, 512))), b16(rng.uniform(-2, 2, (512, 16)))
    op = GEMM(M=16, K=512, N=16)
    c, s = np.abs(exact(a, b)), np.abs(a.astype(float)) @ np.abs(b.astype(float))
    gamma = 512 * 2.0**-24 / (1 - 512 * 2.0**-24)
    formula = gamma * s + 2.0**-8 * (c + gamma * s)
    bound = op.error_bound(a, b)
    assert (bound >= formula).all()
    # The rest is the flush allowance and float64 slack, far below a rounding.
    assert (bound - formula < 2.0**-100 + 1e-12 * s).all()


# -- references against the oracle ------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(gemv_cases())
def test_gemv_reference_holds_its_bound(case):
    op, w, x = case
    got, _ = holds(op, w, x)
    assert got.dtype == bfloat16 and got.shape == (op.M,)


@settings(max_examples=150, deadline=None)
@given(gemv_cases(cancel=True))
def test_gemv_reference_holds_its_bound_under_cancellation(case):
    holds(*case)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([16, 32]),
    st.sampled_from([8, 24, 64, 128]),
    st.sampled_from([16, 32]),
    st.sampled_from(list(Precision)),
    st.booleans(),
    st.data(),
)
def test_gemm_reference_holds_its_bound(m, k, n, precision, transposed, data):
    a = data.draw(matrices(m, k))
    b = data.draw(matrices(n, k) if transposed else matrices(k, n))
    tile_k = data.draw(st.sampled_from([t for t in (8, 16, 32, 64) if k % t == 0]))
    op = GEMM(
        M=m, K=k, N=n, b_transposed=transposed, precision=precision, tile_k=tile_k
    ).resolved(data.draw(st.sampled_from(DEVICES)))
    got, _ = holds(op, a, b)
    assert got.dtype == bfloat16 and got.shape == (m, n)


@pytest.mark.parametrize("precision", list(Precision), ids=str)
@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_large_k_cancelling_rows(precision, dev):
    # K = 4096: each row is [u, -u] against [y, y], so the exact result is 0
    # (or a few nudged ulps) while the partial sums reach ~3000.
    rng = np.random.default_rng(2)
    u = b16(rng.uniform(1, 2, (16, 2048)))
    w = np.concatenate([u, -u], axis=1)
    w[3, 5] = b16(float(w[3, 5]) + 2**-7)
    x = b16(np.ones(4096))
    op = GEMV(M=16, K=4096, precision=precision, tile_k=256).resolved(dev)
    got, want = holds(op, w, x)
    assert np.count_nonzero(want) == 1


@pytest.mark.parametrize("precision", list(Precision), ids=str)
def test_large_k_mixed_magnitudes(precision):
    rng = np.random.default_rng(3)
    scale = 2.0 ** rng.integers(-20, 20, (8, 4096))
    w = b16(rng.standard_normal((8, 4096)) * scale)
    x = b16(rng.standard_normal(4096) * 2.0 ** rng.integers(-20, 20, 4096))
    holds(GEMV(M=8, K=4096, precision=precision).resolved("npu2"), w, x)


def test_special_values():
    w = b16([[1.0] * 32, [np.inf] + [1.0] * 31, [np.nan] + [0.0] * 31, [-0.0] * 32])
    x = b16([1.0] * 31 + [-0.0])
    for precision in Precision:
        op = GEMV(M=4, K=32, precision=precision).resolved("npu2")
        got = op.reference(w, x)
        assert got[1] == np.inf and np.isnan(got[2]) and got[3] == 0.0
        assert compare(got, exact(w, x), op.tolerance(w, x))


def test_subnormals_and_signed_zeros():
    w = bf16([[0x0001] * 16 + [0x8001] * 16, [0x0080] * 32, [0x8000] * 32])
    x = bf16([0x3F80] * 32)
    for precision in Precision:
        op = GEMV(M=3, K=32, precision=precision).resolved("npu2")
        holds(op, w, x)
        # A device that flushes every subnormal to zero is still within it.
        assert compare(np.zeros(3, bfloat16), exact(w, x), op.tolerance(w, x))


def test_batched_gemv():
    rng = np.random.default_rng(4)
    w, x = b16(rng.standard_normal((3, 16, 64))), b16(rng.standard_normal((3, 64)))
    op = GEMV(M=16, K=64, batch=3, precision="high").resolved("npu2")
    got, _ = holds(op, w, x)
    assert got.shape == (3, 16)
    for i in range(3):
        single = GEMV(M=16, K=64, precision="high", tile_k=op.tile_k).resolved("npu2")
        np.testing.assert_array_equal(got[i], single.reference(w[i], x[i]))
    assert op.output_shapes() == [(3, 16)]
    assert GEMV(M=16, K=64).output_shapes() == [(16,)]


def test_gemm_transposed_b_is_the_same_product():
    rng = np.random.default_rng(5)
    a, b = b16(rng.standard_normal((32, 64))), b16(rng.standard_normal((64, 16)))
    plain = GEMM(M=32, K=64, N=16, precision="medium").resolved("npu2")
    transposed = GEMM(M=32, K=64, N=16, precision="medium", b_transposed=True)
    transposed = transposed.resolved("npu2")
    np.testing.assert_array_equal(
        plain.reference(a, b), transposed.reference(a, np.ascontiguousarray(b.T))
    )


@pytest.mark.parametrize(
    "op, a, b, words",
    [
        (GEMV(M=4, K=64), np.ones((4, 32)), np.ones(64), "takes w [4, 64]"),
        (GEMV(M=4, K=64, batch=2), np.ones((4, 64)), np.ones(64), "w [2, 4, 64]"),
        (GEMM(M=16, K=8, N=16), np.ones((16, 8)), np.ones((16, 8)), "b [8, 16]"),
    ],
)
def test_reference_refuses_operands_of_the_wrong_shape(op, a, b, words):
    with pytest.raises(ValueError, match=re_escape(words)):
        op.reference(b16(a), b16(b))


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


# -- the bounds are not vacuous ------------------------------------------------------------


def test_highest_reference_uses_a_fair_share_of_its_bound():
    rng = np.random.default_rng(6)
    w, x = b16(rng.standard_normal((256, 512))), b16(rng.standard_normal(512))
    op = GEMV(M=256, K=512).resolved("npu2")
    err = np.abs(op.reference(w, x).astype(np.float64) - exact(w, x))
    ratio = (err / op.error_bound(w, x)).max()
    assert 0.25 < ratio <= 1  # the output rounding is close to half an ulp


def test_high_reference_uses_a_fair_share_of_its_bound_when_roundings_align():
    w, x = sliver_row()
    op = GEMV(M=1, K=1024, precision="high", tile_k=256).resolved("npu2")
    err = abs(float(op.reference(w, x)[0]) - float(exact(w, x)[0]))
    assert 0.05 < err / op.error_bound(w, x)[0] <= 1


# -- wrong kernel models are caught --------------------------------------------------------


def sliver_row():
    """One row: 256, then 0.96875 in every 64-element chunk, against ones.

    Exact: 256 + 16 * 0.96875 = 271.5. A bf16 partial sum near 256 has an
    ulp of 2, so a chunk's 0.96875 (under half an ulp) is lost whenever the
    partial is rounded after every 64 elements, but four chunks together
    (3.875) survive a rounding every 256.
    """
    w = np.zeros((1, 1024))
    w[0, 0] = 256.0
    w[0, 1::64] = 0.96875
    return b16(w), b16(np.ones(1024))


def test_highest_tolerance_catches_per_tile_rounding_under_cancellation():
    rng = np.random.default_rng(7)
    u = b16(rng.uniform(1, 2, (16, 2048)))
    w, x = np.concatenate([u, -u], axis=1), b16(np.ones(4096))
    op = GEMV(M=16, K=4096).resolved("npu2")
    want = exact(w, x)
    assert (want == 0).all()
    assert compare(op.reference(w, x), want, op.tolerance(w, x))
    wrong = model_product(w, x[:, None], HIGH, 64)[:, 0]
    verdict = compare(wrong, want, op.tolerance(w, x))
    assert not verdict and verdict.n_mismatch >= 8


def test_highest_tolerance_catches_a_bf16_accumulator():
    w, x = sliver_row()
    op = GEMV(M=1, K=1024).resolved("npu1")
    want = exact(w, x)
    assert want[0] == 271.5 and compare(op.reference(w, x), want, op.tolerance(w, x))
    # Every product added to a bf16 accumulator: each 0.96875 is lost.
    acc = np.float32(0)
    for p in w[0].astype(np.float32) * x.astype(np.float32):
        acc = np.float32(bfloat16(acc + p))
    assert acc == 256 and not compare(b16([acc]), want, op.tolerance(w, x))


def test_high_tolerance_catches_rounding_more_often_than_tile_k():
    w, x = sliver_row()
    op = GEMV(M=1, K=1024, precision="high", tile_k=256).resolved("npu2")
    want = exact(w, x)
    assert op.reference(w, x)[0] == 272 and compare(
        op.reference(w, x), want, op.tolerance(w, x)
    )
    wrong = model_product(w, x[:, None], HIGH, 64)[:, 0]
    assert wrong[0] == 256
    assert not compare(wrong, want, op.tolerance(w, x))


def mixed_magnitude_blocks():
    """Rows of blocks [256, 1.5 x 7] against ones: bfp16 loses every 1.5."""
    w = np.tile(np.array([256.0] + [1.5] * 7), (8, 8))
    return b16(w), b16(np.ones(64))


def test_high_tolerance_catches_bfp16_quantization():
    w, x = mixed_magnitude_blocks()
    op = GEMV(M=8, K=64, precision="high", tile_k=64).resolved("npu2")
    want = exact(w, x)
    assert compare(op.reference(w, x), want, op.tolerance(w, x))
    wrong = model_product(w, x[:, None], MEDIUM, 64)[:, 0]
    assert (wrong == 2048).all() and (want == 2132).all()
    assert not compare(wrong, want, op.tolerance(w, x))
    medium = GEMV(M=8, K=64, precision="medium", tile_k=64).resolved("npu2")
    np.testing.assert_array_equal(medium.reference(w, x), wrong)
    assert compare(wrong, want, medium.tolerance(w, x))


def test_medium_tolerance_catches_blocks_along_the_wrong_axis():
    # Row 0 is large, rows 1-7 small: blocked along K each small row keeps
    # its values; blocked down the columns (along M) they share row 0's
    # exponent and vanish.
    a = b16(np.vstack([np.full((1, 64), 256.0), np.full((15, 64), 1.5)]))
    b = b16(np.ones((64, 16)))
    op = GEMM(M=16, K=64, N=16, precision="medium", tile_k=64).resolved("npu2")
    want = exact(a, b)
    assert compare(op.reference(a, b), want, op.tolerance(a, b))
    quantized_down_columns = bfp16.quantize(a, axis=0)
    wrong = model_product(quantized_down_columns, b, HIGH, 64)
    assert (wrong[1:8] == 0).all() and (wrong[8:] == 96).all()
    verdict = compare(wrong, want, op.tolerance(a, b))
    assert not verdict and verdict.n_mismatch == 7 * 16


def test_medium_tolerance_catches_a_coarser_mantissa():
    # A 4-bit block mantissa (2 fraction bits) instead of 8 (6 fraction
    # bits): 1.125 in a block led by 1.0 is 72 units of 2**-6, exact in
    # bfp16ebs8, but 4.5 units of 2**-2, a tie to 1.0, with 2 fraction bits.
    # Aligned over K = 64 the loss is 7 a row, beyond the bound's 4.84.
    a = b16(np.tile([1.0] + [1.125] * 7, (16, 8)))
    b = b16(np.ones((64, 16)))
    op = GEMM(M=16, K=64, N=16, precision="medium", tile_k=64).resolved("npu2")
    want = exact(a, b)
    assert (want == 71).all()
    assert compare(op.reference(a, b), want, op.tolerance(a, b))
    unit = bfp16.block_unit(a) * 16
    coarse = (np.rint(a.astype(np.float64) / unit) * unit).astype(np.float32)
    wrong = model_product(coarse, b, HIGH, 64)
    assert (wrong == 64).all()
    assert not compare(wrong, want, op.tolerance(a, b))


def test_gemm_tolerance_catches_an_ignored_transpose_and_a_dropped_tile():
    rng = np.random.default_rng(8)
    a, bt = b16(rng.uniform(0, 1, (16, 64))), b16(rng.uniform(0, 1, (64, 64)))
    op = GEMM(M=16, K=64, N=64, b_transposed=True, precision="high", tile_k=16)
    op = op.resolved("npu2")
    want = exact(a, bt.T)
    tol = op.tolerance(a, bt)
    assert compare(op.reference(a, bt), want, tol)
    ignored = model_product(a, bt, HIGH, 16)  # b read as (K, N)
    assert not compare(ignored, want, tol)
    dropped = model_product(a[:, :48], bt.T[:48], HIGH, 16)  # the last K tile lost
    assert not compare(dropped, want, tol)


# -- resolve and check -----------------------------------------------------------------------


def assert_gemv_legal(op, dev):
    assert op.open_tunables() == ()
    assert op.num_aie_columns <= dev.columns
    assert op.K % op.vector_width == 0 and op.tile_k % op.vector_width == 0
    assert op.tile_k >= 2 * op.vector_width and op.K % op.tile_k == 0
    assert op.M % (op.tile_m * op.num_aie_columns) == 0
    need = 2 * (op.tile_m * op.tile_k * 2 + op.tile_k * 2 + op.tile_m * 4)
    assert need <= dev.core_memory_bytes - STACK_BYTES
    op.check(dev)


def assert_gemm_legal(op, dev):
    m, k, n = mmul_shape(dev, op.effective_precision)
    assert op.open_tunables() == ()
    assert op.tile_m % (2 * m) == 0 and op.tile_k % k == 0 and op.tile_n % (2 * n) == 0
    assert op.M % op.tile_m == 0 and op.K % op.tile_k == 0
    assert op.N % (op.tile_n * op.num_aie_columns) == 0
    assert op.num_aie_columns <= dev.columns
    need = 2 * (2 * op.tile_m * op.tile_k + 2 * op.tile_k * op.tile_n)
    need += 2 * 4 * op.tile_m * op.tile_n
    assert need <= dev.core_memory_bytes - STACK_BYTES
    op.check(dev)


@settings(max_examples=200, deadline=None)
@given(
    m=st.integers(1, 4096),
    k=st.integers(2, 1024).map(lambda v: 16 * v),
    dev=st.sampled_from(DEVICES),
    precision=st.sampled_from(list(Precision)),
)
def test_gemv_resolve_gives_legal_tunables(m, k, dev, precision):
    op = GEMV(M=m, K=k, precision=precision)
    budget = dev.core_memory_bytes - STACK_BYTES
    # Whether any width and K tile fits, for the one row a core can take.
    fits = any(
        2 * (t * 2 + t * 2 + 4) <= budget
        for w in (64, 32, 16)
        if k % w == 0 and k >= 2 * w
        for t in range(2 * w, k + 1, w)
        if k % t == 0
    )
    if fits:
        assert_gemv_legal(op.resolved(dev), dev)
    else:
        with pytest.raises(RefusedShapeError, match=f"no tile_k fits a core for K={k}"):
            op.resolved(dev)


@settings(max_examples=200, deadline=None)
@given(
    m=st.integers(1, 64).map(lambda v: 16 * v),
    k=st.integers(1, 256).map(lambda v: 8 * v),
    n=st.integers(1, 64).map(lambda v: 16 * v),
    dev=st.sampled_from(DEVICES),
    precision=st.sampled_from(list(Precision)),
)
def test_gemm_resolve_gives_legal_tunables(m, k, n, dev, precision):
    assert_gemm_legal(GEMM(M=m, K=k, N=n, precision=precision).resolved(dev), dev)


@pytest.mark.parametrize(
    "op, dev, tunables",
    [
        (
            GEMV(M=2048, K=8192),
            NPU2,
            {"num_aie_columns": 8, "tile_m": 4, "tile_k": 2048, "vector_width": 64},
        ),
        (
            GEMV(M=2048, K=2048),
            NPU1,
            {"num_aie_columns": 4, "tile_m": 4, "tile_k": 2048, "vector_width": 64},
        ),
        (
            GEMV(M=6, K=96),
            NPU2,
            {"num_aie_columns": 2, "tile_m": 1, "tile_k": 96, "vector_width": 32},
        ),
        # 64 x 64 x 64 needs 65536 bytes with an fp32 C: the largest output
        # tile with a K tile of 64 is 64 x 32 (40960 bytes).
        (
            GEMM(M=512, K=1024, N=512),
            NPU2,
            {"num_aie_columns": 8, "tile_m": 64, "tile_k": 64, "tile_n": 32},
        ),
        (
            GEMM(M=512, K=1024, N=512),
            NPU1,
            {"num_aie_columns": 4, "tile_m": 64, "tile_k": 64, "tile_n": 32},
        ),
        (
            GEMV(M=8, K=192, tile_k=96),
            NPU2,  # 96 is no tile of width 64: the widest it is a tile of
            {"num_aie_columns": 8, "tile_m": 1, "tile_k": 96, "vector_width": 32},
        ),
        (
            GEMV(M=1, K=8864),
            NPU1,  # 8864 = 32 * 277: only width 16 has a K tile that fits
            {"num_aie_columns": 1, "tile_m": 1, "tile_k": 4432, "vector_width": 16},
        ),
        (
            GEMM(M=16, K=24, N=24),
            NPU1,
            {"num_aie_columns": 1, "tile_m": 16, "tile_k": 24, "tile_n": 24},
        ),
    ],
    ids=str,
)
def test_resolve_defaults(op, dev, tunables):
    got = op.resolve(dev)
    assert {name: got[name] for name in tunables} == tunables


def test_npu1_takes_an_n_npu2_refuses():
    # AIE2's bf16 mmul is (4, 8, 4): n tiles of 8 work; AIE2P's is (4, 8, 8).
    assert_gemm_legal(GEMM(M=16, K=64, N=24).resolved(NPU1), NPU1)


def test_tunables_outside_their_domains_are_refused_on_construction():
    with pytest.raises(ValueError, match="divisors of K, multiples of 16"):
        GEMV(M=4, K=256, tile_k=24)
    with pytest.raises(ValueError, match="one of 64, 32, 16"):
        GEMV(M=4, K=256, vector_width=8)
    with pytest.raises(ValueError, match="one of 'highest', 'high', 'medium'"):
        GEMM(M=16, K=8, N=16, effective_precision="low")


# -- cost --------------------------------------------------------------------------------------


def _work(cost: Cost) -> tuple[int, int]:
    """A cost's MACs and bytes: what the shape alone fixes."""
    return cost.macs, cost.bytes


@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_cost_of_a_batch_and_of_a_transposed_b(dev):
    # A batch of 4 re-reads the weights for each vector.
    assert _work(GEMV(M=64, K=128, batch=4).cost(dev)) == (
        32_768,
        4 * (8192 + 128 + 64) * 2,
    )
    assert GEMM(M=512, K=1024, N=256, b_transposed=True).cost(dev) == GEMM(
        M=512, K=1024, N=256
    ).cost(dev)


def _tiling(cost: Cost) -> tuple[int, int, int, int]:
    """How a cost is spread: columns, cores, calls per core, bytes re-read."""
    return cost.columns, cost.cores, cost.calls, cost.reread_bytes


@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_gemv_cost_follows_the_tiling(dev):
    op = GEMV(M=2048, K=2048, num_aie_columns=4, tile_m=4, tile_k=512)
    # 512 row tiles, 128 a column's core, each 4 K tiles: 512 calls; x is
    # streamed with every row tile, 511 times more than once.
    assert _tiling(op.resolved(dev).cost(dev)) == (4, 4, 512, 511 * 2048 * 2)

    def seconds(**tunables):
        return step_time(GEMV(M=2048, K=2048, **tunables).resolved(dev), dev).seconds

    base = seconds(num_aie_columns=2, tile_m=4, tile_k=512)
    assert seconds(num_aie_columns=4, tile_m=4, tile_k=512) < base  # columns
    assert seconds(num_aie_columns=2, tile_m=8, tile_k=512) < base  # rows
    assert seconds(num_aie_columns=2, tile_m=4, tile_k=1024) < base  # K tile
    # The same calls, but x re-read less often with taller row tiles.
    assert seconds(num_aie_columns=2, tile_m=8, tile_k=512) < seconds(
        num_aie_columns=2, tile_m=4, tile_k=1024
    )


@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_gemm_cost_follows_the_tiling(dev):
    op = GEMM(M=256, K=512, N=512, num_aie_columns=2, tile_m=32, tile_k=64, tile_n=64)
    # 8 M tiles over a column's 4 cores (2 passes), 512 / (64 * 2) = 4 passes
    # over N, 8 K tiles: 2 * 4 * 8 calls a core; a is read 4 times, b twice.
    reread = (3 * 256 * 512 + 1 * 512 * 512) * 2
    assert _tiling(op.resolved(dev).cost(dev)) == (2, 8, 64, reread)
    # Fewer M tiles than rows: only as many cores as tiles.
    short = GEMM(M=16, K=512, N=512, num_aie_columns=2, tile_m=16, tile_k=64, tile_n=64)
    assert short.resolved(dev).cost(dev).cores == 2

    def seconds(**tunables):
        gemm = GEMM(M=256, K=512, N=512, **tunables).resolved(dev)
        return step_time(gemm, dev).seconds

    base = seconds(num_aie_columns=2, tile_m=16, tile_k=64, tile_n=32)
    assert seconds(num_aie_columns=4, tile_m=16, tile_k=64, tile_n=32) < base
    assert seconds(num_aie_columns=2, tile_m=16, tile_k=128, tile_n=32) < base
    assert seconds(num_aie_columns=2, tile_m=16, tile_k=64, tile_n=64) < base
    assert seconds(num_aie_columns=2, tile_m=32, tile_k=64, tile_n=32) < base


def test_gemm_out_depth_defaults_to_two_and_one_fits_a_longer_k_tile():
    # Issue 20, target 5: at 64 x 64 output tiles a K tile of 64 needs 64 KiB
    # with two bf16 output tiles (over the 63 KiB a core leaves its tiles);
    # with one (out_depth=1) 56 KiB, and check() accepts it.
    tiles = dict(M=512, K=2048, N=512, tile_m=64, tile_k=64, tile_n=64)
    assert GEMM(M=512, K=2048, N=512).resolved(NPU2).out_depth == 2
    with pytest.raises(RefusedShapeError, match=r"out_depth=2 .* need 65536 bytes"):
        GEMM(**tiles, out_depth=2).resolved(NPU2)
    single = GEMM(**tiles, out_depth=1).resolved(NPU2)
    assert (single.tile_k, single.out_depth) == (64, 1)
    # resolve picks its tiles within out_depth's bytes: a given out_depth=1
    # leaves room for a longer K tile at the same output tile.
    free = dict(M=512, K=2048, N=512, tile_m=64, tile_n=64)
    assert GEMM(**free).resolved(NPU2).tile_k == 32
    assert GEMM(**free, out_depth=1).resolved(NPU2).tile_k == 64
    with pytest.raises(ValueError, match="out_depth=3 is outside its domain"):
        GEMM(**tiles, out_depth=3)


@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_gemm_single_output_tile_stalls_where_the_drain_outlasts_the_k_loop(dev):
    # One core's output tile drains at one DMA channel's 4 bytes a cycle (a
    # quarter of a column's shim rate); the core waits what that drain
    # outlasts the next tile's K loop (its MACs at the core's peak plus its
    # kernel calls), once per tile after the first.
    short = GEMM(M=512, K=32, N=512, num_aie_columns=4, tile_m=64, tile_k=32, tile_n=64)
    drain = 64 * 64 * 2 / (dev.shim_bytes_per_s_per_column / 4)
    loop = 64 * 32 * 64 / dev.core_peak_macs_per_s + dev.kernel_call_seconds
    assert drain > loop  # K = 32: one short kernel call a tile
    cost = short.replace(out_depth=1).resolved(dev).cost(dev)
    tiles = (512 // 64 // dev.core_rows) * (512 // (64 * 4))
    assert cost.stall_seconds == pytest.approx((tiles - 1) * (drain - loop))
    t1 = step_time(short.replace(out_depth=1).resolved(dev), dev)
    t2 = step_time(short.replace(out_depth=2).resolved(dev), dev)
    assert t1.stall_s == cost.stall_seconds and t2.stall_s == 0.0
    assert t1.seconds == pytest.approx(t2.seconds + cost.stall_seconds)
    # A long K loop hides the drain: no stall, and a K tile twice as long
    # halves the kernel calls.
    tiles = dict(M=512, K=2048, N=512, num_aie_columns=4, tile_m=64, tile_n=64)
    long_k = GEMM(**tiles, tile_k=64, out_depth=1).resolved(dev)
    assert long_k.cost(dev).stall_seconds == 0.0
    double = GEMM(**tiles, tile_k=32, out_depth=2).resolved(dev)
    assert long_k.cost(dev).calls * 2 == double.cost(dev).calls
    assert step_time(long_k, dev).seconds < step_time(double, dev).seconds


# -- in a graph ----------------------------------------------------------------------------------


class Projection(iron.Graph):
    def __init__(self, precision="highest", **fields):
        self.precision, self.fields = precision, fields

    def body(self, w, x):
        return GEMV.step(w, x, precision=self.precision, **self.fields)


class Product(iron.Graph):
    def __init__(self, **fields):
        self.fields = fields

    def body(self, a, b):
        return GEMM.step(a, b, **self.fields)


@pytest.mark.parametrize("precision", list(Precision), ids=str)
def test_gemv_in_a_graph(precision):
    rng = np.random.default_rng(9)
    w, x = b16(rng.standard_normal((64, 256))), b16(rng.standard_normal(256))
    graph = Projection(precision)
    with iron.use_device("npu2"):
        recording = graph.record(w=(64, 256), x=(256,))
        result = graph.reference(w, x)
    (step,) = recording.steps
    op = step.op
    assert type(op) is GEMV and (op.M, op.K, op.batch) == (64, 256, None)
    assert op.effective_precision is precision
    assert_gemv_legal(op, NPU2)
    np.testing.assert_array_equal(result, op.reference(w, x))
    assert compare(result, exact(w, x), op.tolerance(w, x))


def test_batched_gemv_in_a_graph():
    rng = np.random.default_rng(10)
    w, x = b16(rng.standard_normal((2, 32, 64))), b16(rng.standard_normal((2, 64)))
    graph = Projection("high")
    with iron.use_device("npu2"):
        recording = graph.record(w=(2, 32, 64), x=(2, 64))
        result = graph.reference(w, x)
    op = recording.steps[0].op
    assert (op.batch, op.M, op.K) == (2, 32, 64)
    assert recording.outputs[0].shape == (2, 32)
    np.testing.assert_array_equal(result, op.reference(w, x))


def test_medium_in_a_graph_on_npu1_falls_back_to_high():
    w, x = mixed_magnitude_blocks()
    graph = Projection("medium")
    with iron.use_device("npu1"):
        op = graph.record(w=(8, 64), x=(64,)).steps[0].op
        result = graph.reference(w, x)
    assert op.precision is MEDIUM and op.effective_precision is HIGH
    # One K tile: the exact 2132 rounded once to bf16; bfp16 would give 2048.
    assert (result == 2128).all()
    high = GEMV(M=8, K=64, precision="high", tile_k=op.tile_k).resolved("npu1")
    np.testing.assert_array_equal(result, high.reference(w, x))


@pytest.mark.parametrize(
    "shapes, fields, message",
    [
        (
            {"w": (64, 256), "x": (128,)},
            {},
            "GEMV: K is 256 from w.shape[1] but 128 from x.shape[0]",
        ),
        (
            {"w": (2, 64, 256), "x": (3, 256)},
            {},
            "GEMV: batch is 2 from w.shape[0] but 3 from x.shape[0]",
        ),
        (
            {"w": (2, 64, 256), "x": (2, 128)},
            {},
            "GEMV: K is 256 from w.shape[2] but 128 from x.shape[1]",
        ),
        (
            {"w": (64, 256), "x": (256,)},
            {"M": 32},
            "GEMV: M is 32 from the call's keyword but 64 from w.shape[0]",
        ),
    ],
)
def test_gemv_dimension_conflicts_name_both_sources(shapes, fields, message):
    with iron.use_device("npu2"), pytest.raises(DimensionConflictError) as info:
        Projection(**fields).record(**shapes)
    assert str(info.value) == message


@pytest.mark.parametrize(
    "shapes, message",
    [
        ({"w": (64, 256), "x": (2, 256)}, "x has shape [2, 256]"),
        ({"w": (2, 64, 256), "x": (256,)}, "so x is (batch, K); got [256]"),
    ],
)
def test_gemv_operand_ranks_must_agree(shapes, message):
    with iron.use_device("npu2"), pytest.raises(ValueError, match=re_escape(message)):
        Projection().record(**shapes)


def test_gemm_in_a_graph_reads_the_layout_off_b():
    rng = np.random.default_rng(11)
    a, bt = b16(rng.standard_normal((32, 64))), b16(rng.standard_normal((48, 64)))
    graph = Product(precision="medium")
    with iron.use_device("npu2"):
        recording = graph.record(a=(32, 64), b=(48, 64))
        result = graph.reference(a, bt)
    op = recording.steps[0].op
    assert (op.M, op.K, op.N, op.b_transposed) == (32, 64, 48, True)
    assert recording.outputs[0].shape == (32, 48)
    np.testing.assert_array_equal(result, op.reference(a, bt))
    assert compare(result, exact(a, bt.T), op.tolerance(a, bt))
    with iron.use_device("npu2"):
        square = Product(b_transposed=True).record(a=(32, 64), b=(64, 64)).steps[0]
        plain = Product().record(a=(32, 64), b=(64, 48)).steps[0]
    assert square.op.b_transposed is True and square.op.N == 64
    assert plain.op.b_transposed is False and plain.op.N == 48


@pytest.mark.parametrize(
    "shapes, fields, message",
    [
        (
            {"a": (32, 64), "b": (48, 32)},
            {},
            "GEMM: K is 64 from a.shape[1] but 48 from b.shape[0] and 32 from "
            "b.shape[1]; b is (K, N), or (N, K) with b_transposed=True",
        ),
        (
            {"a": (32, 64), "b": (64, 48)},
            {"b_transposed": True},
            "GEMM: b_transposed is True from the call's keyword but False from "
            "b.shape=[64, 48] (K rows: b is (K, N))",
        ),
        (
            {"a": (32, 64), "b": (64, 48)},
            {"N": 64},
            "GEMM: N is 64 from the call's keyword but 48 from b.shape[1]",
        ),
    ],
)
def test_gemm_dimension_conflicts_name_both_sources(shapes, fields, message):
    with iron.use_device("npu2"), pytest.raises(DimensionConflictError) as info:
        Product(**fields).record(**shapes)
    assert str(info.value) == message


def test_step_outside_a_body_says_where_it_belongs():
    with pytest.raises(TypeError, match=r"GEMV.step records a step into a Graph.body"):
        GEMV.step(b16(np.ones((4, 64))), b16(np.ones(64)))
