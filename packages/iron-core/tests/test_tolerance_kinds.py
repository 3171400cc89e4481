"""Tolerance: its kinds, the figures it refuses, and how it prints.

exact, ulps and relative follow from the figures set; negative, NaN or
infinite figures, rtol with ulps, and non-integer ulps are refused with the
field named.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from iron.core.tolerance import Tolerance

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
