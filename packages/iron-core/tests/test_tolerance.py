"""Tests for iron.core.tolerance: Tolerance, Verdict, compare, bf16_ulp_distance."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from ml_dtypes import bfloat16

from iron.core.tolerance import Tolerance, Verdict, bf16_ulp_distance, compare

BF16_MIN_SUB = 2.0**-133
BF16_MAX = float(np.array(0x7F7F, np.uint16).view(bfloat16))


def bf16(*values: float) -> np.ndarray:
    return np.array(values, dtype=bfloat16)


def bf16_bits(*bits: int) -> np.ndarray:
    return np.array(bits, dtype=np.uint16).view(bfloat16)


ALL_KINDS = [
    Tolerance.exact(),
    Tolerance.bf16_ulps(1, atol=2**-126),
    Tolerance.relative(1e6, 1e6),
    # An infinite bound accepts every finite value: the NaN and infinity rules
    # must still hold.
    Tolerance.bounded(np.inf),
]

# --------------------------------------------------------------------- Tolerance


class TestToleranceKind:
    def test_exact_when_nothing_set(self):
        assert Tolerance().kind == "exact"
        assert Tolerance.exact(note="selects only").kind == "exact"
        assert Tolerance.exact(note="selects only").note == "selects only"

    def test_ulps_when_ulps_set(self):
        tol = Tolerance.bf16_ulps(2)
        assert (tol.kind, tol.ulps, tol.atol, tol.rtol) == ("ulps", 2, None, None)

    def test_ulps_keeps_atol_floor(self):
        tol = Tolerance.bf16_ulps(1, atol=2**-126, note="npu2")
        assert (tol.kind, tol.atol, tol.note) == ("ulps", 2**-126, "npu2")

    def test_relative_when_rtol_or_atol_set(self):
        assert Tolerance.relative(0.04, 1e-3).kind == "relative"
        assert Tolerance(rtol=0.1).kind == "relative"
        assert Tolerance(atol=0.1).kind == "relative"

    def test_relative_constructor_fields(self):
        tol = Tolerance.relative(0.04, 0.15, max_mismatch_frac=0.005, note="mha")
        assert (tol.rtol, tol.atol, tol.max_mismatch_frac, tol.note) == (
            0.04,
            0.15,
            0.005,
            "mha",
        )
        assert Tolerance.relative(0.1).atol == 0.0

    def test_frozen_and_hashable(self):
        tol = Tolerance.bf16_ulps(1)
        with pytest.raises(dataclasses.FrozenInstanceError):
            tol.ulps = 2  # type: ignore[misc]
        assert hash(tol) == hash(Tolerance.bf16_ulps(1))
        assert tol == Tolerance(ulps=1)


class TestToleranceValidation:
    @pytest.mark.parametrize(
        ("kwargs", "field", "value"),
        [
            ({"rtol": -0.1}, "rtol", "-0.1"),
            ({"atol": -1.0}, "atol", "-1.0"),
            ({"ulps": -1}, "ulps", "-1"),
            ({"max_mismatch_frac": -0.01}, "max_mismatch_frac", "-0.01"),
            ({"max_mismatch_frac": 1.5}, "max_mismatch_frac", "1.5"),
            ({"rtol": float("nan")}, "rtol", "nan"),
            ({"atol": float("inf")}, "atol", "inf"),
        ],
    )
    def test_bad_figure_names_field_and_value(self, kwargs, field, value):
        with pytest.raises(ValueError, match=rf"{field}={value}.*give"):
            Tolerance(**kwargs)

    def test_constructors_validate(self):
        with pytest.raises(ValueError, match="ulps=-1"):
            Tolerance.bf16_ulps(-1)
        with pytest.raises(ValueError, match="atol=-0.5"):
            Tolerance.bf16_ulps(1, atol=-0.5)
        with pytest.raises(ValueError, match="rtol=-0.04"):
            Tolerance.relative(-0.04)

    def test_zero_is_allowed(self):
        assert Tolerance.bf16_ulps(0).ulps == 0
        assert Tolerance.relative(0.0, 0.0).kind == "relative"

    def test_rtol_with_ulps_is_ambiguous(self):
        with pytest.raises(ValueError, match="rtol=0.1.*ulps=1"):
            Tolerance(rtol=0.1, ulps=1)

    @pytest.mark.parametrize("ulps", [1.5, True, "1"])
    def test_ulps_must_be_integer(self, ulps):
        with pytest.raises(TypeError, match="ulps="):
            Tolerance(ulps=ulps)

    def test_numpy_integer_ulps_accepted(self):
        tol = Tolerance(ulps=np.int64(3))
        assert tol.ulps == 3 and type(tol.ulps) is int

    def test_figures_must_be_numbers(self):
        with pytest.raises(TypeError, match="rtol='0.1'"):
            Tolerance(rtol="0.1")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="max_mismatch_frac=None"):
            Tolerance(max_mismatch_frac=None)  # type: ignore[arg-type]

    def test_note_must_be_str(self):
        with pytest.raises(TypeError, match="note=3"):
            Tolerance(note=3)  # type: ignore[arg-type]


class TestToleranceStr:
    @pytest.mark.parametrize(
        ("tol", "text"),
        [
            (Tolerance.exact(), "exact"),
            (Tolerance.bf16_ulps(1), "<= 1 bf16 ulp"),
            (Tolerance.bf16_ulps(2), "<= 2 bf16 ulps"),
            (Tolerance.bf16_ulps(1, atol=2**-126), "<= 1 bf16 ulp (atol 1.18e-38)"),
            (Tolerance.relative(0.04, 0.001), "rel 0.04, abs 0.001"),
            (Tolerance.relative(0.128), "rel 0.128"),
            (Tolerance(atol=0.5), "abs 0.5"),
            (Tolerance.relative(0.0), "rel 0, abs 0"),
            (
                Tolerance.relative(0.04, 0.15, max_mismatch_frac=0.005),
                "rel 0.04, abs 0.15, 0.5% may mismatch",
            ),
        ],
    )
    def test_readable(self, tol, text):
        assert str(tol) == text


# ----------------------------------------------------------------- compare: ulps


class TestUlps:
    def test_one_ulp_off_passes_ulps_fails_exact(self):
        ref = bf16(1.0, 2.0, -3.0)
        res = ref.copy()
        res[1] = np.nextafter(res[1], bf16(4.0)[0])
        assert compare(res, ref, Tolerance.bf16_ulps(1))
        verdict = compare(res, ref, Tolerance.exact())
        assert not verdict
        assert verdict.n_mismatch == 1 and verdict.worst_index == (1,)

    def test_two_ulps_off_fails_one_ulp(self):
        ref = bf16(1.0)
        res = bf16(1.0 + 2 * 2.0**-7)
        verdict = compare(res, ref, Tolerance.bf16_ulps(1))
        assert not verdict
        assert verdict.max_ulp_err == 2
        assert compare(res, ref, Tolerance.bf16_ulps(2))

    def test_reference_rounded_to_bf16_first(self):
        # 1.0039 is within half an ulp of 1.0 in bf16: 0 ulps after rounding.
        ref = np.array([1.0039], dtype=np.float64)
        assert compare(bf16(1.0), ref, Tolerance.bf16_ulps(0))
        assert not compare(bf16(1.0078125), ref, Tolerance.bf16_ulps(0))

    def test_reference_rounded_once_from_float64(self):
        # Through float32 this rounds twice (to the tie 1 + 2**-8, then to 1.0);
        # correctly rounded it is 1 + 2**-7.
        ref = np.array([1 + 2.0**-8 + 2.0**-30])
        assert compare(bf16(1 + 2.0**-7), ref, Tolerance.bf16_ulps(0))
        assert not compare(bf16(1.0), ref, Tolerance.bf16_ulps(0))

    def test_atol_floor_is_an_alternative(self):
        ref = np.array([2.0**-130], dtype=np.float32)  # 8 subnormal ulps from 0
        res = bf16(0.0)
        assert not compare(res, ref, Tolerance.bf16_ulps(1))
        assert compare(res, ref, Tolerance.bf16_ulps(1, atol=2**-126))
        assert not compare(res, ref, Tolerance.bf16_ulps(1, atol=2**-131))

    def test_ulps_measured_across_zero(self):
        res = bf16_bits(0x8001)  # -smallest subnormal
        ref = bf16_bits(0x0001)
        assert compare(res, ref, Tolerance.bf16_ulps(2))
        assert not compare(res, ref, Tolerance.bf16_ulps(1))

    def test_reference_overflowing_to_inf_matches_inf(self):
        ref = np.array([3.399e38], dtype=np.float32)  # rounds to bf16 inf
        assert compare(bf16(np.inf), ref, Tolerance.bf16_ulps(0))
        assert not compare(bf16(BF16_MAX), ref, Tolerance.bf16_ulps(1))

    def test_float32_result(self):
        ref = np.array([1.0, 2.0], dtype=np.float32)
        res = np.array([1.0, 2.0 + 2.0**-6], dtype=np.float32)
        assert compare(res, ref, Tolerance.bf16_ulps(1))
        assert not compare(res, ref, Tolerance.bf16_ulps(0))


# ---------------------------------------------------------------- compare: exact


class TestExact:
    def test_equal_passes(self):
        x = bf16(0.5, -1.25, 3.0)
        verdict = compare(x, x.copy(), Tolerance.exact())
        assert verdict.passed and verdict.n == 3 and verdict.n_mismatch == 0

    def test_reference_cast_to_result_dtype(self):
        ref = np.array([0.1, 1 / 3], dtype=np.float64)
        res = ref.astype(np.float32)
        assert compare(res, ref, Tolerance.exact())
        assert not compare(res.astype(np.float64), ref + 1e-12, Tolerance.exact())

    def test_bf16_reference_cast_rounds_once(self):
        ref = np.array([1 + 2.0**-8 + 2.0**-30])
        assert compare(bf16(1 + 2.0**-7), ref, Tolerance.exact())

    def test_signed_zeros_equal(self):
        assert compare(bf16(-0.0), bf16(0.0), Tolerance.exact())
        assert compare(np.float32([0.0]), np.float32([-0.0]), Tolerance.exact())

    def test_nan_payloads_match(self):
        assert compare(bf16_bits(0x7FC1), bf16_bits(0xFFC0), Tolerance.exact())


# ------------------------------------------------------------- compare: relative


class TestRelative:
    def test_boundary_passes_just_beyond_fails(self):
        tol = Tolerance.relative(0.25)
        # |3 - 5| = 2 == 0.25 * (3 + 5): on the boundary, which passes.
        assert compare(np.array([3.0]), np.array([5.0]), tol)
        assert not compare(np.array([3.0]), np.array([np.nextafter(5.0, 6)]), tol)

    def test_uses_both_magnitudes(self):
        # rtol * |reference| alone (1.25) would fail this element.
        assert compare(np.array([-3.0]), np.array([-5.0]), Tolerance.relative(0.25))

    def test_atol_boundary(self):
        tol = Tolerance.relative(0.0, 0.5)
        assert compare(np.array([0.0]), np.array([0.5]), tol)
        assert not compare(np.array([0.0]), np.array([np.nextafter(0.5, 1)]), tol)

    def test_max_not_sum(self):
        # |a-b| = 2.25; rtol term 2.0625, atol 0.5: max fails, a sum would pass.
        tol = Tolerance.relative(0.25, 0.5)
        assert not compare(np.array([3.0]), np.array([5.25]), tol)

    def test_computed_in_float64(self):
        # In float16, |a - b| and |a| + |b| both overflow to inf and inf <= inf.
        res = np.array([-60000.0], dtype=np.float16)
        ref = np.array([60000.0], dtype=np.float16)
        assert not compare(res, ref, Tolerance.relative(0.5))

    def test_reference_not_cast(self):
        # Cast to bf16 the reference would equal the result.
        res = bf16(1.0)
        ref = np.array([1.001])
        assert not compare(res, ref, Tolerance.relative(1e-4))


# --------------------------------------------------- compare: NaN and infinities


class TestSpecials:
    @pytest.mark.parametrize("tol", ALL_KINDS, ids=str)
    @pytest.mark.parametrize("dtype", [bfloat16, np.float32, np.float64])
    def test_nan_matches_nan(self, tol, dtype):
        x = np.array([np.nan, 1.0], dtype=dtype)
        verdict = compare(x, x.copy(), tol)
        assert verdict.passed and verdict.n_mismatch == 0

    @pytest.mark.parametrize("tol", ALL_KINDS, ids=str)
    def test_nan_against_number_fails(self, tol):
        verdict = compare(bf16(np.nan), bf16(1.0), tol)
        assert not verdict
        assert verdict.max_abs_err == np.inf
        assert "NaN must match NaN" in verdict.detail
        assert not compare(bf16(1.0), bf16(np.nan), tol)

    @pytest.mark.parametrize("tol", ALL_KINDS, ids=str)
    def test_infinities_must_match_in_sign(self, tol):
        assert compare(bf16(np.inf, -np.inf), bf16(np.inf, -np.inf), tol)
        verdict = compare(bf16(np.inf), bf16(-np.inf), tol)
        assert not verdict
        assert "infinity" in verdict.detail

    @pytest.mark.parametrize("tol", ALL_KINDS, ids=str)
    def test_infinity_against_finite_fails(self, tol):
        assert not compare(bf16(np.inf), bf16(1.0), tol)
        assert not compare(bf16(1.0), bf16(-np.inf), tol)

    def test_special_mismatch_not_excused_by_fraction(self):
        res = np.ones(100, dtype=np.float32)
        res[0] = np.nan
        ref = np.ones(100, dtype=np.float32)
        tol = Tolerance.relative(0.1, max_mismatch_frac=0.5)
        verdict = compare(res, ref, tol)
        assert not verdict and verdict.n_mismatch == 1
        assert "never allowed" in verdict.detail


# -------------------------------------------------------- compare: mismatch frac


class TestMismatchFraction:
    def _case(self, frac: float) -> Verdict:
        ref = np.arange(100, dtype=np.float32)
        res = ref.copy()
        res[[3, 10, 20, 30, 40]] += 1000
        return compare(res, ref, Tolerance.relative(0.01, max_mismatch_frac=frac))

    def test_within_fraction_passes(self):
        verdict = self._case(0.05)
        assert verdict.passed and verdict.n_mismatch == 5
        assert "5 of 100 elements outside" in verdict.detail
        assert "within the allowed fraction" in verdict.detail

    def test_beyond_fraction_fails(self):
        verdict = self._case(0.04)
        assert not verdict.passed and verdict.n_mismatch == 5

    def test_default_is_zero(self):
        ref = np.zeros(1000, dtype=np.float32)
        res = ref.copy()
        res[0] = 1
        assert not compare(res, ref, Tolerance.relative(0.1))

    def test_exact_with_fraction(self):
        res = np.array([1, 2, 3, 4], dtype=np.int32)
        ref = np.array([1, 2, 3, 5], dtype=np.int32)
        assert compare(res, ref, Tolerance(max_mismatch_frac=0.25))
        assert not compare(res, ref, Tolerance(max_mismatch_frac=0.2))


# ---------------------------------------------------------------- compare: ints


class TestIntegers:
    def test_exact_equality(self):
        x = np.array([1, -2, 3], dtype=np.int8)
        assert compare(x, x.copy(), Tolerance.exact())
        verdict = compare(x, np.array([1, -2, 4], dtype=np.int8), Tolerance.exact())
        assert not verdict
        assert verdict.max_ulp_err == 0 and verdict.max_abs_err == 1.0
        assert verdict.detail.endswith("got 3, expected 4 (abs 1)")

    def test_reference_cast_for_exact(self):
        res = np.array([3, 4], dtype=np.int32)
        assert compare(res, np.array([3.0, 4.0]), Tolerance.exact())

    def test_ulps_is_absolute_difference(self):
        res = np.array([5], dtype=np.int32)
        ref = np.array([3], dtype=np.int32)
        assert not compare(res, ref, Tolerance.bf16_ulps(1))
        assert compare(res, ref, Tolerance.bf16_ulps(2))

    def test_ulps_on_large_ints_not_rounded_to_bf16(self):
        # 1000 and 1001 are the same bf16; as integers they are 1 apart.
        res = np.array([1001], dtype=np.int32)
        ref = np.array([1000], dtype=np.int32)
        assert not compare(res, ref, Tolerance.bf16_ulps(0))

    def test_relative_as_numbers(self):
        res = np.array([100], dtype=np.uint8)
        ref = np.array([104], dtype=np.uint8)  # uint8 subtraction would wrap
        assert compare(res, ref, Tolerance.relative(0.02))
        assert not compare(res, ref, Tolerance.relative(0.01))

    def test_bool(self):
        assert compare(np.array([True, False]), np.array([1, 0]), Tolerance.exact())


# ------------------------------------------------------------- compare: verdict


class TestVerdict:
    def test_pass_fields_and_text(self):
        x = np.ones(2048, dtype=bfloat16)
        verdict = compare(x, x.copy(), Tolerance.exact())
        assert verdict == Verdict(
            passed=True,
            n=2048,
            n_mismatch=0,
            max_abs_err=0.0,
            max_ulp_err=0,
            worst_index=None,
            tolerance=Tolerance.exact(),
            detail="2048 elements within exact",
        )
        assert bool(verdict) is True
        assert str(verdict) == "PASS: 2048 elements within exact"

    def test_fail_fields_and_text(self):
        ref = np.full(2048, 1.4921875, dtype=bfloat16)
        res = ref.copy()
        res[17] = 1.5  # 1 ulp
        res[100] = 1.5078125  # 2 ulps: the worst
        res[5] = 1.5
        tol = Tolerance.bf16_ulps(0)
        verdict = compare(res, ref, tol)
        assert bool(verdict) is False
        assert verdict.n == 2048 and verdict.n_mismatch == 3
        assert verdict.max_abs_err == pytest.approx(2**-6)
        assert verdict.max_ulp_err == 2
        assert verdict.worst_index == (100,)
        assert verdict.tolerance is tol
        assert verdict.detail == (
            "3 of 2048 elements outside <= 0 bf16 ulps; worst at (100,): "
            "got 1.5078125, expected 1.4921875 (abs 0.0156, 2 ulps)"
        )
        assert str(verdict) == "FAIL: " + verdict.detail

    def test_pass_reports_largest_error(self):
        ref = bf16(1.0, 2.0)
        res = bf16(1.0, 2.015625)
        verdict = compare(res, ref, Tolerance.bf16_ulps(1))
        assert verdict.worst_index == (1,)
        assert verdict.max_ulp_err == 1
        assert (
            verdict.detail == "2 elements within <= 1 bf16 ulp (max abs 0.0156, 1 ulp)"
        )

    def test_worst_index_multidimensional(self):
        ref = np.zeros((3, 4), dtype=np.float32)
        res = ref.copy()
        res[0, 1] = 0.5
        res[2, 3] = 2.0
        verdict = compare(res, ref, Tolerance.relative(0.01, 0.1))
        assert verdict.worst_index == (2, 3)
        assert verdict.max_abs_err == 2.0

    def test_worst_relative_by_excess_not_size(self):
        # 100 vs 110 is 10 off but nearly in; 0 vs 1 is 1 off and far out.
        res = np.array([100.0, 0.0])
        ref = np.array([110.0, 1.0])
        verdict = compare(res, ref, Tolerance.relative(0.04, 0.01))
        assert verdict.n_mismatch == 2 and verdict.worst_index == (1,)

    def test_verdict_frozen(self):
        verdict = compare(bf16(1.0), bf16(1.0), Tolerance.exact())
        with pytest.raises(dataclasses.FrozenInstanceError):
            verdict.passed = False  # type: ignore[misc]

    def test_empty_and_scalar(self):
        empty = compare(np.zeros(0), np.zeros(0), Tolerance.exact())
        assert empty.passed and empty.n == 0 and empty.worst_index is None
        scalar = compare(np.float32(1.5), np.float32(1.0), Tolerance.exact())
        assert not scalar and scalar.n == 1 and scalar.worst_index == ()


class TestCompareErrors:
    def test_shape_mismatch_names_both(self):
        with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
            compare(np.zeros((2, 3)), np.zeros((3, 2)), Tolerance.exact())

    def test_tolerance_required(self):
        with pytest.raises(TypeError, match="Tolerance"):
            compare(np.zeros(2), np.zeros(2), 0.1)  # type: ignore[arg-type]

    def test_complex_rejected(self):
        with pytest.raises(TypeError, match="complex"):
            compare(np.zeros(2, complex), np.zeros(2), Tolerance.exact())


# ------------------------------------------------------------ bf16_ulp_distance

finite_bits = st.integers(0, 0xFFFF).filter(lambda b: (b & 0x7FFF) < 0x7F80)
non_nan_bits = st.integers(0, 0xFFFF).filter(lambda b: (b & 0x7FFF) <= 0x7F80)
any_float = st.floats(allow_nan=True, allow_infinity=True, width=64)
# Every finite bf16 value, ascending (+0 only).
FINITE_BF16 = np.sort(
    bf16_bits(*range(0, 0x7F80), *range(0x8001, 0xFF80)).astype(np.float64)
)


class TestUlpDistance:
    def test_known_values(self):
        assert bf16_ulp_distance(1.0, 2.0) == 128
        assert bf16_ulp_distance(-0.0, 0.0) == 0
        assert bf16_ulp_distance(0.0, BF16_MIN_SUB) == 1
        assert bf16_ulp_distance(-BF16_MIN_SUB, BF16_MIN_SUB) == 2
        assert bf16_ulp_distance(BF16_MAX, np.inf) == 1
        assert bf16_ulp_distance(np.nan, np.nan) == 0
        assert bf16_ulp_distance(np.nan, 1.0) == np.iinfo(np.int64).max

    def test_signalling_nan_stays_nan(self):
        snan = np.array([0x7F800001, 0xFF800001], np.uint32).view(np.float32)
        assert bf16_ulp_distance(snan, np.inf).tolist() == [np.iinfo(np.int64).max] * 2
        assert bf16_ulp_distance(snan, np.nan).tolist() == [0, 0]

    def test_int64_and_broadcast(self):
        d = bf16_ulp_distance(bf16(1.0, 2.0, 4.0), np.float32(1.0))
        assert d.dtype == np.int64 and d.tolist() == [0, 128, 256]
        with pytest.raises(ValueError, match=r"\(2,\).*\(3,\)"):
            bf16_ulp_distance(np.zeros(2), np.zeros(3))

    @given(any_float, any_float)
    def test_symmetric(self, a, b):
        assert bf16_ulp_distance(a, b) == bf16_ulp_distance(b, a)

    @given(st.floats(width=32), st.floats(width=32))
    def test_zero_iff_equal_after_rounding(self, a, b):
        # float32 inputs: ml_dtypes rounds float32 to bf16 once, correctly.
        ra = np.float32(a).astype(bfloat16)
        rb = np.float32(b).astype(bfloat16)
        same = bool(ra == rb) or bool(np.isnan(ra) and np.isnan(rb))
        assert (bf16_ulp_distance(np.float32(a), np.float32(b)) == 0) == same

    @given(finite_bits, st.sampled_from([-np.inf, np.inf]))
    def test_nextafter_is_one(self, bits, direction):
        x = bf16_bits(bits)
        step = np.nextafter(x, np.array([direction], dtype=bfloat16))
        assert bf16_ulp_distance(x, step)[0] == 1

    @given(non_nan_bits, non_nan_bits, non_nan_bits)
    def test_lattice_is_additive_along_order(self, a, b, c):
        x, y, z = sorted(
            (bf16_bits(a), bf16_bits(b), bf16_bits(c)), key=lambda v: float(v[0])
        )
        assert bf16_ulp_distance(x, z) == bf16_ulp_distance(x, y) + bf16_ulp_distance(
            y, z
        )

    @given(st.floats(allow_nan=False, allow_infinity=False, width=64))
    def test_rounds_float64_correctly(self, x):
        # The bf16 value at distance 0 from x is the nearest, ties to even.
        assume(abs(x) < BF16_MAX)
        at = int(np.searchsorted(FINITE_BF16, x, side="right"))
        lo, hi = (
            float(FINITE_BF16[at - 1]),
            float(FINITE_BF16[min(at, len(FINITE_BF16) - 1)]),
        )
        if lo == x:
            hi = lo
        dlo, dhi = Fraction(x) - Fraction(lo), Fraction(hi) - Fraction(x)
        if dlo != dhi:
            expected = lo if dlo < dhi else hi
        else:
            expected = lo if int(bf16(lo).view(np.uint16)[0]) % 2 == 0 else hi
        assert bf16_ulp_distance(x, expected) == 0
        assert bf16_ulp_distance(x, np.nextafter(bf16(expected), bf16(np.inf)))[0] == 1


# --------------------------------------------------------------- the bounded kind


class TestBounded:
    def test_kind_and_fields(self):
        tol = Tolerance.bounded(np.array([0.5, 1.0]), note="|A| @ |B| * 2**-8")
        assert tol.kind == "bounded"
        assert (tol.rtol, tol.atol, tol.ulps) == (None, None, None)
        assert tol.note == "|A| @ |B| * 2**-8"
        assert tol.max_mismatch_frac == 0.0
        assert tol.bound.dtype == np.float64
        assert tol.bound.tolist() == [0.5, 1.0]

    def test_bound_is_a_read_only_copy(self):
        source = np.array([0.5, 1.0])
        tol = Tolerance.bounded(source)
        source[0] = 100.0
        assert tol.bound[0] == 0.5
        with pytest.raises(ValueError, match="read-only"):
            tol.bound[0] = 2.0
        with pytest.raises(dataclasses.FrozenInstanceError):
            tol.bound = np.zeros(2)  # type: ignore[misc]

    def test_equal_and_hashed_by_value(self):
        a = Tolerance.bounded(np.array([0.5, 1.0]), note="n")
        b = Tolerance.bounded([0.5, 1.0], note="n")
        assert a == b and hash(a) == hash(b)
        assert a != Tolerance.bounded([0.5, 2.0], note="n")
        assert a != Tolerance.bounded([[0.5, 1.0]], note="n")  # shape differs
        assert a != Tolerance.bounded([0.5, 1.0], note="other")
        assert a != Tolerance.relative(0.5)
        assert len({a, b, Tolerance.exact()}) == 2

    def test_other_kinds_unchanged(self):
        assert Tolerance().bound is None and Tolerance().kind == "exact"
        assert Tolerance.bf16_ulps(1).kind == "ulps"
        assert Tolerance.relative(0.1).kind == "relative"

    @pytest.mark.parametrize(
        ("bound", "match"),
        [
            ([0.1, -0.5], r"-0.5 at \(1,\)"),
            ([np.nan], r"nan at \(0,\)"),
            ([[0.0, 1.0], [1.0, -np.inf]], r"-inf at \(1, 1\)"),
        ],
    )
    def test_negative_or_nan_bound_is_refused(self, bound, match):
        with pytest.raises(ValueError, match=match):
            Tolerance.bounded(np.array(bound))

    def test_non_numeric_bound_is_refused(self):
        with pytest.raises(TypeError, match="not an array of numbers"):
            Tolerance.bounded(np.array(["a"]))  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        "kwargs", [{"rtol": 0.1}, {"atol": 0.1}, {"ulps": 1}, {"atol": 0.0}]
    )
    def test_bound_with_another_figure_is_refused(self, kwargs):
        with pytest.raises(ValueError, match="bound is set together with"):
            Tolerance(bound=np.ones(2), **kwargs)

    @pytest.mark.parametrize(
        ("tol", "text"),
        [
            (Tolerance.bounded(np.array([0.25, 0.0625])), "<= bound (max 0.25)"),
            (Tolerance.bounded(np.zeros(0)), "<= bound"),
            (Tolerance.bounded(np.inf), "<= bound (max inf)"),
            (
                Tolerance(bound=np.array([1.0]), max_mismatch_frac=0.01),
                "<= bound (max 1), 1% may mismatch",
            ),
        ],
    )
    def test_readable(self, tol, text):
        assert str(tol) == text

    def test_passes_within_the_bound_elementwise(self):
        res = np.array([1.0, 2.0, 3.0], dtype=np.float32)
        ref = np.array([1.25, 2.0, 2.0])
        bound = np.array([0.25, 0.0, 1.0])  # both edges are inclusive
        verdict = compare(res, ref, Tolerance.bounded(bound))
        assert verdict.passed and verdict.n_mismatch == 0
        assert verdict.max_abs_err == 1.0

    def test_fails_where_one_element_exceeds_its_own_bound(self):
        res = np.array([1.0, 2.0, 3.0], dtype=np.float32)
        ref = np.array([1.5, 2.0, 3.25])
        # Element 0 is off by 0.5 under a bound of 1; element 2 by 0.25 under
        # a bound of 0.125: only element 2 fails, though its error is smaller.
        verdict = compare(res, ref, Tolerance.bounded(np.array([1.0, 0.0, 0.125])))
        assert not verdict
        assert verdict.n_mismatch == 1 and verdict.worst_index == (2,)
        assert "got 3.0, expected 3.25" in verdict.detail
        assert "outside <= bound (max 1)" in verdict.detail

    def test_zero_bound_is_exact_equality(self):
        tol = Tolerance.bounded(np.zeros(3))
        assert compare(bf16(1.0, -0.0, 2.0), np.array([1.0, 0.0, 2.0]), tol)
        verdict = compare(bf16(1.0, 0.0, 2.0), np.array([1.0, 0.0, 2.0078125]), tol)
        assert not verdict and verdict.worst_index == (2,)

    def test_bound_broadcasts_to_the_result(self):
        res = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
        ref = res.astype(np.float64) + np.array([[0.1, 0.3], [0.1, 0.3]])
        assert compare(res, ref, Tolerance.bounded(np.array([0.125, 0.5])))
        assert not compare(res, ref, Tolerance.bounded(np.array([0.5, 0.125])))
        assert compare(res, ref, Tolerance.bounded(0.5))  # a scalar bound

    def test_bound_that_does_not_broadcast_is_refused(self):
        res = np.zeros((2, 3), dtype=np.float32)
        with pytest.raises(ValueError, match=r"shape \(2,\).*shape \(2, 3\)"):
            compare(res, res, Tolerance.bounded(np.ones(2)))

    def test_reference_is_used_as_given(self):
        # Not rounded to the result's dtype first: 1 + 2**-10 is off bf16's
        # lattice, and a bound of 2**-11 is too small for the bf16 1.0.
        res = bf16(1.0)
        ref = np.array([1.0 + 2**-10])
        assert not compare(res, ref, Tolerance.bounded(np.array([2**-11])))
        assert compare(res, ref, Tolerance.bounded(np.array([2**-10])))

    def test_infinite_bound_element_accepts_any_finite_value(self):
        tol = Tolerance.bounded(np.array([np.inf, 0.0]))
        assert compare(bf16(1e30, 1.0), np.array([-1e30, 1.0]), tol)
        assert not compare(bf16(np.inf, 1.0), np.array([1.0, 1.0]), tol)

    def test_mismatch_fraction_applies(self):
        res = np.zeros(100, dtype=np.float32)
        ref = np.zeros(100)
        ref[:3] = 1.0
        tol = Tolerance(bound=np.full(100, 0.5), max_mismatch_frac=0.03)
        verdict = compare(res, ref, tol)
        assert verdict.passed and verdict.n_mismatch == 3
        assert not compare(res, ref, Tolerance.bounded(np.full(100, 0.5)))

    @given(
        st.lists(
            st.tuples(
                st.floats(-1e6, 1e6, width=32),
                st.floats(-1e6, 1e6),
                st.floats(0, 1e6),
            ),
            min_size=1,
            max_size=20,
        )
    )
    def test_matches_the_definition(self, rows):
        res = np.array([r[0] for r in rows], dtype=np.float32)
        ref = np.array([r[1] for r in rows])
        bound = np.array([r[2] for r in rows])
        within = np.abs(res.astype(np.float64) - ref) <= bound
        verdict = compare(res, ref, Tolerance.bounded(bound))
        assert verdict.passed == bool(within.all())
        assert verdict.n_mismatch == int((~within).sum())
