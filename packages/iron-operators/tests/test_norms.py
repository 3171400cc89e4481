"""Tests for RMSNorm and LayerNorm: references, tolerances, resolve, check, cost, graphs.

References are judged against float64 oracles of the exact math, written here
apart from the operators, with ``iron.compare`` under the operator's own
``tolerance()``. Weighted RMSNorm's oracle is the exact math too (its
tolerance covers the two kernels' roundings); a second oracle of the two
kernels (the normalized row correctly rounded to bf16, then times the weight)
shows the reference models that intermediate rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from ml_dtypes import bfloat16

import iron
from iron.core.cost import step_time
from iron.core.declare import Divisors, Input, Output
from iron.core.device import NPU1, NPU2
from iron.core.operator import Cost, DimensionConflictError
from iron.core.tolerance import bf16_ulp_distance, compare
from iron.operators import GEMV, SiLU, Softmax
from iron.operators.norms import STACK_BYTES, LayerNorm, RMSNorm

DEVICES = (NPU1, NPU2)
SIGN = 0x8000
FP32_MAX_SQUARES = 3.0e38  # rows whose fp32 sum of squares stays below fp32's max


def bf16(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).astype(np.float32).astype(bfloat16)


def from_bits(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint16).view(bfloat16)


def signed(magnitude):
    return st.tuples(st.booleans(), magnitude).map(lambda t: t[1] | (SIGN * t[0]))


special = signed(st.sampled_from((0x0000, 0x0001, 0x007F, 0x0080, 0x3F80, 0x3F81)))
tiny = signed(st.integers(0x0000, 0x06FF))  # zeros and subnormals up to ~2**-113
huge = signed(st.integers(0x5F00, 0x7F7F))  # ~2**63 up to the largest finite
moderate = signed(st.integers(0x3000, 0x4FFF))  # ~2**-31 to ~2**32
near_one = signed(st.integers(0x3F00, 0x4000))  # [0.5, 2]
finite_bits = st.one_of(special, tiny, huge, moderate, near_one)
any_bits = st.integers(0, 0xFFFF)  # NaNs and infinities included


@st.composite
def row_arrays(draw, elements=None, long_rows=True):
    """A (rows, cols) bf16 array: short rows, or now and then a long one."""
    rows = draw(st.integers(1, 3))
    cols = draw(
        st.sampled_from((16, 32, 48, 64, 4096) if long_rows else (16, 32, 48, 64))
    )
    if elements is None:
        elements = st.one_of(finite_bits, any_bits)
    if cols > 64:
        # A long row: one value pattern tiled, with a few drawn elements.
        base = draw(st.lists(elements, min_size=16, max_size=16))
        bits = np.tile(np.array(base, np.uint16), (rows, cols // 16))
    else:
        flat = draw(st.lists(elements, min_size=rows * cols, max_size=rows * cols))
        bits = np.array(flat, np.uint16).reshape(rows, cols)
    return from_bits(bits)


def weights(cols: int):
    magnitude = st.one_of(near_one, st.integers(0x3C00, 0x4300), special)
    return st.lists(
        signed(magnitude.map(lambda b: b & 0x7FFF)), min_size=cols, max_size=cols
    ).map(from_bits)


# -- oracles --------------------------------------------------------------------------


def rms_oracle(x, weight=None, eps=1e-5):
    """The exact ``x / sqrt(mean(x**2) + eps) [* weight]``, in float64."""
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        y = x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + eps)
        return y if weight is None else y * weight.astype(np.float64)


def rms_two_kernels(x, weight, eps=1e-5):
    """The two kernels exactly: the normalized row rounded to bf16, times weight."""
    normalized = rms_oracle(x, eps=eps).astype(np.float32).astype(bfloat16)
    return normalized.astype(np.float64) * weight.astype(np.float64)


def layer_oracle(x, weight=None, bias=None, eps=1e-5):
    """The exact ``(x - mean) / sqrt(var + eps) [* weight] [+ bias]``, in float64."""
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        mean = np.mean(x, axis=1, keepdims=True)
        var = np.mean((x - mean) ** 2, axis=1, keepdims=True)
        y = (x - mean) / np.sqrt(var + eps)
        if weight is not None:
            y = y * weight.astype(np.float64)
        if bias is not None:
            y = y + bias.astype(np.float64)
        return y


def squares_overflow_fp32(x) -> np.ndarray:
    """Rows whose sum of squares is finite but beyond the kernel's fp32 range."""
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        squares = np.sum(x * x, axis=1)
    return np.isfinite(x).all(axis=1) & (squares > FP32_MAX_SQUARES)


def deviations_overflow_fp32(x) -> np.ndarray:
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        d = x - np.mean(x, axis=1, keepdims=True)
        total = np.sum(d * d, axis=1)
        big = np.sum(np.abs(x), axis=1) > FP32_MAX_SQUARES
    return np.isfinite(x).all(axis=1) & ((total > FP32_MAX_SQUARES) | big)


def rms(x, weight=None, eps=1e-5):
    return RMSNorm(
        rows=x.shape[0], cols=x.shape[1], eps=eps, weighted=weight is not None
    )


def layer(x, weight=None, bias=None, eps=1e-5):
    return LayerNorm(
        rows=x.shape[0],
        cols=x.shape[1],
        eps=eps,
        weighted=weight is not None,
        biased=bias is not None,
    )


# -- declarations ---------------------------------------------------------------------


def test_rmsnorm_declaration():
    d = RMSNorm.declaration
    assert list(d.params) == [
        "rows",
        "cols",
        "rows_per_tile",
        "num_aie_columns",
        "eps",
        "weighted",
    ]
    assert d.tunables == ("rows_per_tile", "num_aie_columns")
    assert d.params["rows_per_tile"].domain == Divisors("rows")
    assert d.params["num_aie_columns"].domain == (1, 2, 4, 8)
    assert d.params["eps"].default == 1e-5
    assert d.inputs == (
        Input("x", "rows", "cols"),
        Input("weight", "cols", optional=True),
    )
    assert d.outputs == (Output("out", "rows", "cols"),)


def test_layernorm_declaration():
    d = LayerNorm.declaration
    assert d.dimensions == ("rows", "cols", "eps", "weighted", "biased")
    assert d.tunables == ("rows_per_tile", "num_aie_columns")
    assert [i.name for i in d.inputs] == ["x", "weight", "bias"]
    assert [i.optional for i in d.inputs] == [False, True, True]


def test_reference_refuses_a_weight_it_was_not_declared_with():
    x = bf16(np.ones((2, 16)))
    with pytest.raises(
        TypeError, match=r"got a weight; construct it with weighted=True"
    ):
        RMSNorm(rows=2, cols=16).reference(x, bf16(np.ones(16)))
    with pytest.raises(TypeError, match=r"got no bias; construct it with biased=False"):
        LayerNorm(rows=2, cols=16, biased=True).reference(x)
    with pytest.raises(ValueError, match=r"weight has shape \(8,\), but a row has 16"):
        RMSNorm(rows=2, cols=16, weighted=True).reference(x, bf16(np.ones(8)))


# -- tolerances -----------------------------------------------------------------------


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_rmsnorm_tolerances_are_amds_contract(dev):
    plain = RMSNorm(rows=4, cols=64).resolved(dev).tolerance()
    assert (plain.kind, plain.ulps, plain.atol) == ("ulps", 1, 2.0**-126)
    assert "one rounding" in plain.note
    weighted = RMSNorm(rows=4, cols=64, weighted=True).resolved(dev).tolerance()
    assert (weighted.kind, weighted.ulps, weighted.atol) == ("ulps", 2, 2.0**-126)
    assert "two kernels" in weighted.note


def test_layernorm_tolerance_without_and_with_inputs():
    op = LayerNorm(rows=1, cols=16)
    plain = op.tolerance()
    assert (plain.kind, plain.ulps, plain.atol) == ("ulps", 1, 2.0**-126)
    x = bf16([[3.0e9, -3.0e9, 1.0] + [0.0] * 13])
    derived = op.tolerance(x)
    assert derived.kind == "bounded" and derived.bound.shape == (1, 16)
    assert "error_bounds" in derived.note and "doubled" in derived.note
    exact, fp32 = op.error_bounds(x)
    assert np.all(derived.bound >= 2 * fp32)


# -- RMSNorm references against the oracle -------------------------------------------------


def check_rms(x, weight=None, eps=1e-5):
    op = rms(x, weight, eps)
    got = op.reference(x, weight) if weight is not None else op.reference(x)
    assert got.dtype == bfloat16 and got.shape == x.shape
    keep = ~squares_overflow_fp32(x)
    want = rms_oracle(x, weight, eps)
    verdict = compare(got[keep], want[keep], op.tolerance())
    assert verdict, f"{verdict} for x={x!r}, weight={weight!r}"


@settings(max_examples=300, deadline=None)
@given(row_arrays())
def test_rmsnorm_reference_holds_its_tolerance(x):
    check_rms(x)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_weighted_rmsnorm_reference_holds_its_tolerance(data):
    x = data.draw(row_arrays(finite_bits))
    w = data.draw(weights(x.shape[1]))
    check_rms(x, w)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_weighted_rmsnorm_models_the_two_kernels(data):
    # Against the two kernels done exactly, each kernel's one rounding: 1 ulp.
    x = data.draw(row_arrays(finite_bits))
    w = data.draw(weights(x.shape[1]))
    keep = ~squares_overflow_fp32(x)
    got = rms(x, w).reference(x, w)
    one = rms(x).tolerance()
    assert compare(got[keep], rms_two_kernels(x, w)[keep], one)


@pytest.mark.parametrize(
    "rows",
    [
        [0.0] * 16,  # a zero row is 0 (eps keeps the rsqrt finite)
        [-0.0, 0.0] * 8,
        [2.0**-133] * 16,  # subnormals: squares underflow, eps dominates
        [1.0] + [0.0] * 15,
        [3.0e18] * 16,  # big, squares still in fp32's range
        [1e-3] * 15 + [1e3],  # one element dominates the mean
        [1.0, -1.0] * 8,
        [np.inf] + [1.0] * 15,  # NaN where x is infinite, 0 elsewhere
        [np.nan] + [1.0] * 15,
    ],
)
@pytest.mark.parametrize("weighted", [False, True])
def test_rmsnorm_reference_on_adversarial_rows(rows, weighted):
    x = bf16([rows])
    w = bf16(np.linspace(-2, 2, 16)) if weighted else None
    check_rms(x, w)


@pytest.mark.parametrize("eps", [1e-6, 1e-5, 0.5])
def test_rmsnorm_eps_is_added_to_the_mean_of_squares(eps):
    x = bf16([[1e-3] * 16])
    check_rms(x, eps=eps)
    # 1e-3 / sqrt(1e-6 + eps)
    want = 1e-3 / np.sqrt(1e-6 + float(np.float32(eps)))
    assert bf16_ulp_distance(rms(x, eps=eps).reference(x)[0, 0], want) <= 1


def test_rmsnorm_long_rows():
    rng = np.random.default_rng(3)
    for cols in (2048, 4096, 8064):
        x = bf16(rng.standard_normal((2, cols)) * 10.0 ** rng.integers(-3, 4))
        w = bf16(rng.uniform(-2, 2, cols))
        check_rms(x)
        check_rms(x, w)


def test_rmsnorm_fp32_overflow_is_outside_the_contract():
    # Squares summing past fp32's range overflow the kernel's accumulator:
    # the rsqrt is 0 and so is the row, though the exact result is finite.
    x = bf16([[2.0e19] * 16])
    assert squares_overflow_fp32(x).all()
    got = rms(x).reference(x)
    assert not np.any(got.astype(np.float32))
    assert not compare(got, rms_oracle(x), rms(x).tolerance())


def test_weighted_rmsnorm_rounds_the_normalized_row_first():
    # The last element normalizes to 1.00731...: bf16 1.0078125, times 1.5 is
    # 1.51171875, a tie that rounds to even, 1.515625. Without the rounding in
    # between (one fused kernel) it would be 1.51097... -> 1.5078125.
    x = bf16([[1.0] * 15 + [1.0078125]])
    w = bf16([1.0] * 15 + [1.5])
    exact = rms_oracle(x)[0, 15]
    assert float(bf16(exact)) == 1.0078125
    assert float(bf16(exact * 1.5)) == 1.5078125  # fused
    got = rms(x, w).reference(x, w)
    assert float(got[0, 15]) == 1.515625  # two kernels
    assert float(bf16(rms_two_kernels(x, w)[0, 15])) == 1.515625


# -- LayerNorm references against the oracle ---------------------------------------------------


def check_layer(x, weight=None, bias=None, eps=1e-5):
    op = layer(x, weight, bias, eps)
    got = op.reference(x, weight, bias)
    assert got.dtype == bfloat16 and got.shape == x.shape
    keep = ~deviations_overflow_fp32(x)
    want = layer_oracle(x, weight, bias, eps)
    tolerance = op.tolerance(x[keep], weight, bias)
    verdict = compare(got[keep], want[keep], tolerance)
    assert verdict, f"{verdict} for x={x!r}, weight={weight!r}, bias={bias!r}"
    return tolerance


@settings(max_examples=300, deadline=None)
@given(row_arrays())
def test_layernorm_reference_holds_its_tolerance(x):
    check_layer(x)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_affine_layernorm_reference_holds_its_tolerance(data):
    x = data.draw(row_arrays(finite_bits))
    cols = x.shape[1]
    w = data.draw(st.none() | weights(cols))
    b = data.draw(st.none() | weights(cols))
    check_layer(x, w, b)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_layernorm_bias_cancelling_the_scaled_row(data):
    # bias is minus the normalized row (times weight), nudged by a few steps:
    # the result is what the fp32 rounding left, the hardest case for ulps.
    x = data.draw(row_arrays(st.one_of(moderate, near_one), long_rows=False))
    cols = x.shape[1]
    w = data.draw(weights(cols))
    scaled = layer_oracle(x, w)[0]
    nudge = np.array(
        data.draw(st.lists(st.integers(-2, 2), min_size=cols, max_size=cols))
    )
    bits = (-bf16(scaled)).view(np.uint16).astype(np.int64) + nudge
    b = from_bits(np.clip(bits, 0, 0xFFFF))
    assume(np.isfinite(b.astype(np.float32)).all())
    check_layer(x[:1], w, b)


def test_bias_cancellation_needs_the_inputs_bound():
    # Where the bias cancels the scaled row, the fp32 sum's rounding is a
    # large part of the result: the plain 1-ulp contract misses some rows,
    # the bound from the inputs holds them all.
    rng = np.random.default_rng(0)
    plain_misses = 0
    for _ in range(300):
        x = bf16(rng.standard_normal((1, 16)))
        w = bf16(rng.uniform(0.5, 2, 16))
        bits = (-bf16(layer_oracle(x, w)[0])).view(np.uint16).astype(np.int64)
        b = from_bits(np.clip(bits + rng.integers(-2, 3, 16), 0, 0xFFFF))
        op = layer(x, w, b)
        got, want = op.reference(x, w, b), layer_oracle(x, w, b)
        plain_misses += not compare(got, want, op.tolerance())
        assert compare(got, want, op.tolerance(x, w, b))
    assert plain_misses > 0


@pytest.mark.parametrize(
    "rows",
    [
        [0.0] * 16,
        [5.0] * 16,  # constant: zero variance, eps keeps it finite
        [1000.0, 1004.0] * 8,  # mean large against the spread
        [3.0e9, -3.0e9, 1.0] + [0.0] * 13,  # the fp32 mean cancels
        [2.0**-133, -(2.0**-133)] * 8,
        [1.0] + [0.0] * 15,
        [1e30, 1.0] * 8,
        [np.inf] + [1.0] * 15,
        [np.nan] + [1.0] * 15,
    ],
)
def test_layernorm_reference_on_adversarial_rows(rows):
    x = bf16([rows])
    check_layer(x)
    check_layer(x, bf16(np.linspace(-2, 2, 16)), bf16(np.linspace(3, -3, 16)))


def test_layernorm_long_rows():
    rng = np.random.default_rng(4)
    for cols in (1024, 4096, 5376):
        x = bf16(rng.standard_normal((2, cols)) * 3 + 100)
        check_layer(x, bf16(rng.uniform(-2, 2, cols)), bf16(rng.uniform(-1, 1, cols)))


def test_layernorm_bound_is_about_an_ulp_for_ordinary_rows():
    # The derived bound is half an ulp per rounding (the reference's and the
    # device's) plus fp32 error that is tiny unless the element is near 0.
    rng = np.random.default_rng(5)
    x = bf16(rng.standard_normal((8, 256)))
    bound = check_layer(x).bound
    exact = np.abs(layer_oracle(x))
    ulp = np.exp2(np.floor(np.log2(exact)) - 7)
    assert np.median(bound / ulp) < 1.1
    assert np.all(bound <= 2 * ulp + 2.0**-12)


# -- a wrong kernel model is caught --------------------------------------------------------------


def rms_without_eps(x):
    xf = x.astype(np.float32)
    mean = np.mean(xf * xf, axis=1, keepdims=True, dtype=np.float32)
    with np.errstate(all="ignore"):
        return (xf / np.sqrt(mean)).astype(bfloat16)


def rms_bf16_accumulator(x, weight=None):
    """A wrong RMSNorm: the sum of squares accumulated in bf16 (a rounding per term)."""
    xf = x.astype(np.float32)
    total = np.zeros((x.shape[0], 1), np.float32)
    for j in range(x.shape[1]):
        total = (total + xf[:, j : j + 1] ** 2).astype(bfloat16).astype(np.float32)
    y = (xf / np.sqrt(total / x.shape[1] + np.float32(1e-5))).astype(bfloat16)
    return y if weight is None else (y.astype(np.float32) * weight).astype(bfloat16)


def test_rmsnorm_tolerance_catches_a_missing_eps():
    x = bf16([[1e-3] * 16])
    verdict = compare(rms_without_eps(x), rms_oracle(x), rms(x).tolerance())
    assert not verdict and verdict.n_mismatch == 16


def test_rmsnorm_tolerance_catches_a_bf16_accumulator():
    # 1024 ones and one 2: the bf16 sum stalls at 256 (256 + 1 rounds to 256).
    x = bf16([[1.0] * 1023 + [2.0]])
    assert compare(rms(x).reference(x), rms_oracle(x), rms(x).tolerance())
    assert not compare(rms_bf16_accumulator(x), rms_oracle(x), rms(x).tolerance())
    w = bf16(np.full(1024, 1.5))
    assert compare(rms(x, w).reference(x, w), rms_oracle(x, w), rms(x, w).tolerance())
    assert not compare(
        rms_bf16_accumulator(x, w), rms_oracle(x, w), rms(x, w).tolerance()
    )


def test_weighted_rmsnorm_tolerance_catches_a_missing_weight():
    x = bf16([[1.0, 2.0] * 8])
    w = bf16([1.5] * 16)
    assert not compare(rms(x).reference(x), rms_oracle(x, w), rms(x, w).tolerance())


def layer_mean_rounded(x):
    """A wrong LayerNorm: the mean rounded to bf16 before the deviations."""
    xf = x.astype(np.float32)
    mean = np.mean(xf, axis=1, keepdims=True, dtype=np.float32)
    mean = mean.astype(bfloat16).astype(np.float32)
    d = xf - mean
    var = np.mean(d * d, axis=1, keepdims=True, dtype=np.float32)
    return (d / np.sqrt(var + np.float32(1e-5))).astype(bfloat16)


def layer_one_pass(x):
    """A wrong LayerNorm: the variance as mean(x**2) - mean**2 in fp32."""
    xf = x.astype(np.float32)
    mean = np.mean(xf, axis=1, keepdims=True, dtype=np.float32)
    var = np.mean(xf * xf, axis=1, keepdims=True, dtype=np.float32) - mean * mean
    with np.errstate(all="ignore"):
        return ((xf - mean) / np.sqrt(var + np.float32(1e-5))).astype(bfloat16)


def test_layernorm_tolerance_catches_a_rounded_mean():
    # Values 1000 and 1004 (bf16 steps of 4): the mean 1002 rounds to 1000
    # or 1004, and every deviation is off by the whole spread.
    x = bf16([[1000.0, 1004.0] * 8])
    op = layer(x)
    tolerance = op.tolerance(x)
    assert compare(op.reference(x), layer_oracle(x), tolerance)
    assert not compare(layer_mean_rounded(x), layer_oracle(x), tolerance)


def test_layernorm_tolerance_catches_a_one_pass_variance():
    # 1023 elements of 1000 and one of 1004: the variance (~0.0156) is under
    # an fp32 step of mean(x**2) (~1e6, steps of 0.0625), so it cancels away.
    x = bf16([[1000.0] * 1023 + [1004.0]])
    op = layer(x)
    tolerance = op.tolerance(x)
    assert compare(op.reference(x), layer_oracle(x), tolerance)
    assert not compare(layer_one_pass(x), layer_oracle(x), tolerance)


# -- resolve and check -------------------------------------------------------------------


def max_cols(op_cls, **flags) -> int:
    per_col = 8 + 2 * sum(bool(v) for v in flags.values())
    return (NPU2.core_memory_bytes - STACK_BYTES) // per_col // 16 * 16


def assert_legal(op, dev):
    assert op.open_tunables() == ()
    assert op.num_aie_columns in (1, 2, 4, 8) and op.num_aie_columns <= dev.columns
    assert op.rows % (op.rows_per_tile * op.num_aie_columns) == 0
    assert op.core_bytes() <= dev.core_memory_bytes - STACK_BYTES
    op.check(dev)


@settings(max_examples=300, deadline=None)
@given(
    rows=st.integers(1, 4096),
    k=st.integers(1, 1000),
    dev=st.sampled_from(DEVICES),
    kind=st.sampled_from(["rms", "rms_w", "layer", "layer_wb"]),
)
def test_resolve_gives_legal_tunables(rows, k, dev, kind):
    flags = {
        "rms": {},
        "rms_w": {"weighted": True},
        "layer": {},
        "layer_wb": {"weighted": True, "biased": True},
    }[kind]
    cls = RMSNorm if kind.startswith("rms") else LayerNorm
    cols = min(16 * k, max_cols(cls, **flags))
    assert_legal(cls(rows=rows, cols=cols, **flags).resolved(dev), dev)


@pytest.mark.parametrize("dev", DEVICES, ids=str)
@pytest.mark.parametrize(
    "rows, cols", [(1, 16), (1, 4096), (7, 2048), (16, 64), (2048, 4096), (1, 8064)]
)
def test_resolve_at_edges(rows, cols, dev):
    for op in (
        RMSNorm(rows=rows, cols=cols),
        LayerNorm(rows=rows, cols=min(cols, 6448)),
    ):
        assert_legal(op.resolved(dev), dev)


@pytest.mark.parametrize(
    "rows, cols, dev, tunables",
    [
        (1, 2048, NPU2, {"num_aie_columns": 1, "rows_per_tile": 1}),
        (2048, 4096, NPU1, {"num_aie_columns": 4, "rows_per_tile": 1}),
        (2048, 4096, NPU2, {"num_aie_columns": 8, "rows_per_tile": 1}),
        (64, 64, NPU2, {"num_aie_columns": 8, "rows_per_tile": 8}),
        (6, 256, NPU2, {"num_aie_columns": 2, "rows_per_tile": 3}),
    ],
    ids=str,
)
def test_resolve_spreads_rows_then_fills_a_bank(rows, cols, dev, tunables):
    assert RMSNorm(rows=rows, cols=cols).resolve(dev) == tunables


def test_resolve_keeps_pinned_tunables():
    op = RMSNorm(rows=64, cols=64, num_aie_columns=2).resolved("npu2")
    assert (op.num_aie_columns, op.rows_per_tile) == (2, 32)
    op = RMSNorm(rows=64, cols=64, rows_per_tile=16).resolved("npu2")
    assert (op.num_aie_columns, op.rows_per_tile) == (4, 16)


def test_largest_rows_that_fit():
    RMSNorm(rows=1, cols=8064).resolved("npu1")
    RMSNorm(rows=1, cols=6448, weighted=True).resolved("npu1")
    LayerNorm(rows=1, cols=5376, weighted=True, biased=True).resolved("npu2")


def test_tunables_outside_their_domains_are_refused_on_construction():
    with pytest.raises(ValueError, match="divisors of rows"):
        RMSNorm(rows=6, cols=64, rows_per_tile=4)
    with pytest.raises(ValueError, match="one of 1, 2, 4, 8"):
        LayerNorm(rows=6, cols=64, num_aie_columns=3)


# -- cost --------------------------------------------------------------------------------


def _tiling(cost: Cost) -> tuple[int, int, int, int]:
    """How a cost is spread: columns, cores, calls per core, bytes re-read."""
    return cost.columns, cost.cores, cost.calls, cost.reread_bytes


@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_cost_follows_the_row_tiling(dev):
    # 64 rows, 2 a tile, over 4 columns: 8 kernel calls a core.
    op = RMSNorm(rows=64, cols=2048, weighted=True, rows_per_tile=2, num_aie_columns=4)
    assert _tiling(op.resolved(dev).cost(dev)) == (4, 4, 8, 0)

    def seconds(**tunables):
        return step_time(RMSNorm(rows=64, cols=2048, **tunables), dev).seconds

    base = seconds(rows_per_tile=2, num_aie_columns=2)
    assert seconds(rows_per_tile=2, num_aie_columns=4) < base  # more columns
    assert seconds(rows_per_tile=4, num_aie_columns=2) < base  # fewer calls
    layer = LayerNorm(rows=64, cols=2048, rows_per_tile=4, num_aie_columns=4)
    assert _tiling(layer.cost(dev)) == (4, 4, 4, 0)


# -- in a graph --------------------------------------------------------------------------


class Norm(iron.Graph):
    def body(self, x, w):
        return RMSNorm.step(x, weight=w, eps=1e-6)


class PlainNorm(iron.Graph):
    def body(self, x):
        return RMSNorm.step(x)


class BoundedNorm(iron.Graph):
    """The first n rows of x, normalized with a held weight."""

    def __init__(self, w):
        self.w = iron.param(w)

    def body(self, x, *, n: iron.Scratchpad[int]):
        return RMSNorm.step(x[:n], weight=self.w)


class Affine(iron.Graph):
    def body(self, x, w, b):
        return LayerNorm.step(x, weight=w, bias=b)


class BiasOnly(iron.Graph):
    def body(self, x, b):
        return LayerNorm.step(x, bias=b)


def samples(rows=8, cols=64, seed=0):
    rng = np.random.default_rng(seed)
    return (
        bf16(rng.standard_normal((rows, cols))),
        bf16(rng.uniform(0.5, 1.5, cols)),
        bf16(rng.uniform(-1, 1, cols)),
    )


def same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_rmsnorm_in_a_graph(dev):
    x, w, _ = samples()
    with iron.use_device(dev):
        recording = Norm().record(x=(8, 64), w=(64,))
        result = Norm().reference(x, w)
    (step,) = recording.steps
    op = step.op
    assert type(op) is RMSNorm
    assert (op.rows, op.cols, op.eps, op.weighted) == (8, 64, 1e-6, True)
    assert op.open_tunables() == ()
    same(result, RMSNorm(rows=8, cols=64, eps=1e-6, weighted=True).reference(x, w))
    assert compare(result, rms_oracle(x, w, 1e-6), op.tolerance())
    with iron.use_device(dev):
        (plain,) = PlainNorm().record(x=(8, 64)).steps
    assert plain.op.weighted is False


def test_bounded_rows_reach_the_reference_cut():
    x, w, _ = samples(rows=8)
    graph = BoundedNorm(w)
    with iron.use_device("npu2"):
        out = graph.reference(x, n=3)
        (step,) = graph.record(x=(8, 64)).steps
    assert out.shape == (3, 64)
    same(out, RMSNorm(rows=8, cols=64, weighted=True).reference(x[:3], w))
    assert step.outputs[0].valid  # the leading-axis bound propagates
    assert step.op.rows == 8


def test_layernorm_in_a_graph():
    x, w, b = samples()
    with iron.use_device("npu2"):
        (step,) = Affine().record(x=(8, 64), w=(64,), b=(64,)).steps
        result = Affine().reference(x, w, b)
        (bias_only,) = BiasOnly().record(x=(8, 64), b=(64,)).steps
        only = BiasOnly().reference(x, b)
    assert (step.op.rows, step.op.cols, step.op.weighted, step.op.biased) == (
        8,
        64,
        True,
        True,
    )
    same(result, layer(x, w, b).reference(x, w, b))
    assert (bias_only.op.weighted, bias_only.op.biased) == (False, True)
    same(only, layer(x, bias=b).reference(x, None, b))


def test_a_dimension_conflict_names_both_sources():
    with iron.use_device("npu2"):
        with pytest.raises(DimensionConflictError) as info:
            Norm().record(x=(8, 64), w=(32,))
    assert (
        str(info.value)
        == "RMSNorm: cols is 64 from x.shape[1] but 32 from weight.shape[0]"
    )
    with iron.use_device("npu2"):
        with pytest.raises(DimensionConflictError, match="bias.shape"):
            Affine().record(x=(8, 64), w=(64,), b=(48,))


def test_a_weighted_keyword_that_contradicts_the_operands_conflicts():
    class Contradiction(iron.Graph):
        def body(self, x, w):
            return RMSNorm.step(x, weight=w, weighted=False)

    with iron.use_device("npu2"):
        with pytest.raises(DimensionConflictError) as info:
            Contradiction().record(x=(8, 64), w=(64,))
    assert (
        "weighted is False from the call's keyword but True from weight operand"
        in str(info.value)
    )


# -- a 1-D vector is one row (issue 35) --------------------------------------------------


class VectorNormThenProject(iron.Graph):
    """RMSNorm -> GEMV -> SiLU over a (hidden,) vector, as a newcomer writes it."""

    def body(self, x, norm_weight, w):
        return SiLU.step(GEMV.step(w, RMSNorm.step(x, weight=norm_weight)))


def test_a_vector_is_normalized_as_one_row():
    rng = np.random.default_rng(3)
    x = rng.standard_normal(512).astype(bfloat16)
    nw = rng.standard_normal(512).astype(bfloat16)
    w = (rng.standard_normal((256, 512)) / 16).astype(bfloat16)
    with iron.use_device("npu2"):
        recording = VectorNormThenProject().record(
            x=(512,), norm_weight=(512,), w=(256, 512)
        )
        norm = recording.steps[0].op
        assert (norm.rows, norm.cols) == (1, 512)
        assert recording.steps[0].outputs[0].shape == (1, 512)  # the step's row
        assert recording.steps[1].inputs[1].shape == (512,)  # GEMV reads a vector
        assert recording.outputs[0].shape == (256,)
        # (tutorial 2 runs the same graph on the emulated NPU)
        got = VectorNormThenProject().reference(x, nw, w)
        row = RMSNorm(rows=1, cols=512, weighted=True).reference(x.reshape(1, -1), nw)
        projected = GEMV(M=256, K=512).resolved().reference(w, row[0])
        expected = SiLU(size=256).resolved().reference(projected)
    assert got.shape == (256,)
    assert np.array_equal(got, expected)
    with iron.use_device("npu2"):
        for op in (LayerNorm, Softmax):
            one = OneRow(op).record(x=(64,))
            assert one.outputs[0].shape == (64,)


class OneRow(iron.Graph):
    def __init__(self, op):
        self.op = op

    def body(self, x):
        return self.op.step(x)


def test_a_wrong_rank_says_the_reshape_to_write():
    class Matrix(iron.Graph):
        def body(self, w, x):
            return GEMV.step(w, x)

    with iron.use_device("npu2"):
        with pytest.raises(ValueError) as info:
            Matrix().record(w=(256,), x=(256,))
    assert str(info.value).endswith("; for a single row write w.reshape(1, -1)")
