"""bf16_ulp_distance: steps between two values on bf16's lattice.

The distance is symmetric, zero only for values equal after rounding to bf16
(float64 correctly, ties to even), one for neighbours and additive along the
order; NaN is at distance zero from NaN only.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from ml_dtypes import bfloat16
from tolerance_for_tests import BF16_MAX, bf16, bf16_bits

from iron.core.tolerance import bf16_ulp_distance

BF16_MIN_SUB = 2.0**-133

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
