"""Tolerance.bounded: an elementwise bound on the absolute error.

The bound is a read-only float64 copy compared by value; it refuses negative
or NaN elements and other figures, broadcasts to the result, and is checked
against the reference as given.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tolerance_for_tests import bf16

from iron.core.tolerance import Tolerance, compare

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
