"""Tests for ElementwiseAdd and ElementwiseMul.

References are judged against float64 oracles (``a + b`` and ``a * b`` of two
bf16 values are exact in float64, or off only far below any bf16 rounding
boundary) with ``iron.compare`` under each operator's own ``tolerance()``: on
every bf16 ``a`` against chosen ``b``, and on hypothesis-drawn pairs weighted
to cancellation, subnormals, signed zeros and overflow. Concrete inputs show
the tolerance refusing wrong kernel models.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ml_dtypes import bfloat16

import iron
from iron.core.declare import Divisors, Input, Output
from iron.core.device import NPU1, NPU2, as_device
from iron.core.operator import DimensionConflictError
from iron.core.tolerance import Tolerance, compare
from iron.operators.binary import ElementwiseAdd, ElementwiseMul
from iron.operators.elementwise import ONE_ROUNDING

DEVICES = (NPU1, NPU2)
BINARY = (ElementwiseAdd, ElementwiseMul)
SMALLEST_NORMAL = 2.0**-126
F32 = np.float32

# -- bf16 inputs ----------------------------------------------------------------------

SIGN = 0x8000
#: Every bf16 value (NaNs and infinities included), in bit order.
EVERY_BF16 = np.arange(1 << 16, dtype=np.uint16).view(bfloat16)


def bf16(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).astype(np.float32).astype(bfloat16)


def bits(patterns) -> np.ndarray:
    return np.asarray(patterns, dtype=np.uint16).view(bfloat16)


def f64(x) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # a signalling NaN converts quietly
        return np.asarray(x).astype(np.float64)


def signed(magnitude):
    return st.tuples(st.booleans(), magnitude).map(lambda t: t[1] | (SIGN * t[0]))


element_bits = st.one_of(
    st.integers(0, 0xFFFF),
    signed(st.sampled_from((0x0000, 0x0001, 0x007F, 0x0080, 0x3F80, 0x7F7F, 0x7F80))),
    signed(st.integers(0x0000, 0x06FF)),  # subnormals and the tiny
    signed(st.integers(0x7A00, 0x7F7F)),  # the huge
    signed(st.integers(0x3000, 0x4FFF)),  # ~2**-31 to ~2**32
)


@st.composite
def pairs(draw):
    """``(a, b)``: independent, or ``b`` within a few steps of ``-a`` (cancellation)."""
    n = draw(st.integers(1, 64))
    a = bits(draw(st.lists(element_bits, min_size=n, max_size=n)))
    if draw(st.booleans()):
        b = bits(draw(st.lists(element_bits, min_size=n, max_size=n)))
    else:
        nudge = draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n))
        b_bits = (a.view(np.uint16) ^ SIGN).astype(np.int64) + np.array(nudge)
        b = bits(np.clip(b_bits, 0, 0xFFFF))
    return a, b


# -- oracles ----------------------------------------------------------------------------


def add_oracle(a, b):
    with np.errstate(all="ignore"):
        return f64(a) + f64(b)


def mul_oracle(a, b):
    with np.errstate(all="ignore"):
        return f64(a) * f64(b)


ORACLE = {ElementwiseAdd: add_oracle, ElementwiseMul: mul_oracle}
#: b values every bf16 a is paired with.
PARTNERS = (
    0.0,
    -0.0,
    1.0,
    -1.0078125,
    3.0,
    2.0**-133,
    -(2.0**-126),
    2.0**-100,
    1e-30,
    2.0**100,
    -3.3895313892515355e38,
    np.inf,
    np.nan,
)


def judge(op, a, b, tolerance=None):
    got = op.reference(a, b)
    assert got.dtype == bfloat16 and got.shape == a.shape
    verdict = compare(got, ORACLE[type(op)](a, b), tolerance or op.tolerance())
    assert verdict, f"{op!r}: {verdict}"


# -- declarations and tolerances -----------------------------------------------------------


@pytest.mark.parametrize("cls", BINARY)
def test_declarations(cls):
    d = cls.declaration
    assert list(d.params) == ["size", "tile_size", "num_aie_columns"]
    assert d.dimensions == ("size",)
    assert d.tunables == ("tile_size", "num_aie_columns")
    assert d.params["tile_size"].domain == Divisors("size", multiple_of=16)
    assert d.inputs == (Input("a", "size"), Input("b", "size"))
    assert d.outputs == (Output("out", "size"),)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("cls", BINARY)
def test_tolerance_is_amds_eltwise_contract(cls, dev):
    tolerance = cls(size=2048).resolved(dev).tolerance()
    assert tolerance is ONE_ROUNDING
    assert (tolerance.kind, tolerance.ulps, tolerance.atol) == ("ulps", 1, 2.0**-126)
    assert "one rounding" in tolerance.note and "eltwise" in tolerance.note


# -- references against the oracles ----------------------------------------------------------


@pytest.mark.parametrize("cls", BINARY)
@pytest.mark.parametrize("partner", PARTNERS, ids=str)
def test_reference_on_every_bf16_value(cls, partner):
    a = EVERY_BF16
    b = bf16(np.full(a.size, partner))
    op = cls(size=a.size)
    judge(op, a, b)
    judge(op, b, a)


@pytest.mark.parametrize("cls", BINARY)
@settings(max_examples=300)
@given(ab=pairs())
def test_reference_on_drawn_pairs(cls, ab):
    judge(cls(size=16), *ab)


@pytest.mark.parametrize("cls", BINARY)
@settings(max_examples=300)
@given(ab=pairs())
def test_reference_is_correctly_rounded(cls, ab):
    # fp32 has more than 2 * 8 + 2 bits, so rounding through it is innocuous
    # (Figueroa 1995): the reference is the exact result correctly rounded.
    # The one ulp of the contract is the kernel's (its rounding mode).
    judge(cls(size=16), *ab, tolerance=Tolerance.bf16_ulps(0))


@pytest.mark.parametrize(
    "cls, a, b, want",
    [
        # Cancellation to the last bit, and to zero.
        (ElementwiseAdd, [1.0078125, 1.0], [-1.0, -1.0], [2.0**-7, 0.0]),
        # A sum fp32 cannot hold exactly (2**100 + 1) still rounds correctly.
        (ElementwiseAdd, [2.0**100], [1.0], [2.0**100]),
        # Subnormal sums; the largest finite values overflow to infinity.
        (
            ElementwiseAdd,
            [2.0**-133, 2.0**-127],
            [2.0**-133, 2.0**-127],
            [2**-132, 2**-126],
        ),
        (ElementwiseAdd, [3.3895313892515355e38], [3.3895313892515355e38], [np.inf]),
        # Signed zeros; inf - inf is NaN.
        (ElementwiseAdd, [-0.0, -0.0], [-0.0, 0.0], [-0.0, 0.0]),
        (ElementwiseAdd, [np.inf], [-np.inf], [np.nan]),
        # Products: exact, subnormal, overflowing, 0 * inf.
        (ElementwiseMul, [1.0078125], [1.0078125], [1.015625]),
        (ElementwiseMul, [2.0**-130], [2.0**20], [2.0**-110]),
        (ElementwiseMul, [2.0**100], [2.0**100], [np.inf]),
        (ElementwiseMul, [0.0], [np.inf], [np.nan]),
        (ElementwiseMul, [-0.0], [3.0], [-0.0]),
    ],
)
def test_reference_on_adversarial_inputs(cls, a, b, want):
    a, b = bf16(a), bf16(b)
    got = cls(size=16).reference(a, b)
    np.testing.assert_array_equal(got.astype(np.float64), want)
    judge(cls(size=16), a, b)


# -- wrong kernel models are caught ---------------------------------------------------------


def caught(model, op, a, b):
    tolerance = op.tolerance()
    want = ORACLE[type(op)](a, b)
    assert compare(op.reference(a, b), want, tolerance)
    with np.errstate(all="ignore"):
        wrong = np.asarray(model(a, b), F32).astype(bfloat16)
    verdict = compare(wrong, want, tolerance)
    assert not verdict, f"{model.__name__} passed: {verdict}"
    return verdict


def in_fp16(fn):
    """A wrong kernel: computes in fp16 (a 5-bit exponent) instead of fp32."""

    def model(a, b):
        return fn(a.astype(F32).astype(np.float16), b.astype(F32).astype(np.float16))

    model.__name__ = f"fp16_{fn.__name__}"
    return model


def add(a, b):
    return a + b


def mul(a, b):
    return a * b


@pytest.mark.parametrize(
    "cls, fn, a, b",
    [
        (ElementwiseAdd, add, [70000.0, 1e-6], [1.0, 1e-6]),
        (ElementwiseMul, mul, [300.0, 1e-4], [300.0, 1e-3]),
    ],
)
def test_tolerance_catches_an_fp16_kernel(cls, fn, a, b):
    verdict = caught(in_fp16(fn), cls(size=2), bf16(a), bf16(b))
    assert verdict.n_mismatch == 2  # range lost at both ends


def test_mul_tolerance_catches_flushed_subnormal_inputs():
    def flush_inputs(a, b):
        a, b = a.astype(F32), b.astype(F32)
        a = np.where(np.abs(a) < SMALLEST_NORMAL, F32(0), a)
        return a * b

    # 2**-130 * 2**20 = 2**-110 is normal: a flushed input is not excused by
    # the atol, which only covers results below 2**-126.
    caught(flush_inputs, ElementwiseMul(size=1), bf16([2.0**-130]), bf16([2.0**20]))


def test_add_tolerance_catches_a_dropped_operand_bit():
    def truncating_align(a, b):
        # Align b to a's bf16 ulp by truncation before adding (no guard bits).
        a, b = a.astype(np.float64), b.astype(np.float64)
        ulp = 2.0 ** (np.floor(np.log2(np.abs(a))) - 7)
        return a + np.trunc(b / ulp) * ulp

    # 1 + 3 * 2**-9: exact 1.005859375 rounds up to 1.0078125; with b cut to
    # 0 the kernel returns 1.0 (one ulp); 2 - 3 * 2**-9 loses more than one.
    a, b = bf16([1.0, 2.0]), bf16([3 * 2.0**-9, -3 * 2.0**-8])
    caught(truncating_align, ElementwiseAdd(size=2), a, b)


# -- resolve and check --------------------------------------------------------------------


@settings(max_examples=200)
@given(
    size=st.integers(1, 2**16).map(lambda k: 16 * k),
    dev=st.sampled_from(DEVICES),
    cls=st.sampled_from(BINARY),
)
def test_resolve_gives_legal_tunables(size, dev, cls):
    op = cls(size=size).resolved(dev)
    assert op.open_tunables() == ()
    assert op.num_aie_columns <= dev.columns
    assert op.size % (op.tile_size * op.num_aie_columns) == 0
    assert op.tile_size * 2 * 3 * 2 <= dev.core_memory_bytes // 2
    op.check(dev)


@pytest.mark.parametrize(
    "size, dev, tunables",
    [
        (2048, NPU1, {"num_aie_columns": 4, "tile_size": 512}),
        (2048, NPU2, {"num_aie_columns": 8, "tile_size": 256}),
        (16 * 3, NPU2, {"num_aie_columns": 1, "tile_size": 16}),
    ],
    ids=str,
)
def test_resolve_defaults(size, dev, tunables):
    for cls in BINARY:
        assert cls(size=size).resolve(dev) == tunables


def test_largest_tile_that_fits():
    ElementwiseMul(size=2048, tile_size=2048, num_aie_columns=1).check(NPU2)


# -- in a graph --------------------------------------------------------------------------


class MulAdd(iron.Graph):
    """``a * b + c``: two steps, each rounding once."""

    def body(self, a, b, c):
        return ElementwiseAdd.step(ElementwiseMul.step(a, b), c)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_recorded_steps_infer_size_and_match_their_references(dev):
    rng = np.random.default_rng(3)
    a, b, c = (bf16(rng.standard_normal(2048)) for _ in range(3))
    with iron.use_device(dev):
        recording = MulAdd().record(a=(2048,), b=(2048,), c=(2048,))
        result = MulAdd().reference(a, b, c)
    mul_op, add_op = (step.op for step in recording.steps)
    assert type(mul_op) is ElementwiseMul and type(add_op) is ElementwiseAdd
    assert mul_op.size == add_op.size == 2048
    assert mul_op.num_aie_columns == as_device(dev).columns
    mul_op.check(as_device(dev))
    want = add_op.reference(mul_op.reference(a, b), c)
    np.testing.assert_array_equal(result.view(np.uint16), want.view(np.uint16))


def test_dimension_conflict_names_both_sources():
    with iron.use_device("npu2"), pytest.raises(DimensionConflictError) as info:
        MulAdd().record(a=(2048,), b=(4096,), c=(2048,))
    assert str(info.value) == (
        "ElementwiseMul: size is 2048 from a.shape[0] but 4096 from b.shape[0]"
    )
