"""The Verdict compare() returns, and the arguments compare() refuses.

A verdict counts mismatches, reports the worst element and largest errors,
prints PASS or FAIL with a readable detail, and is frozen.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from ml_dtypes import bfloat16
from tolerance_for_tests import bf16

from iron.core.tolerance import Tolerance, Verdict, compare


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
