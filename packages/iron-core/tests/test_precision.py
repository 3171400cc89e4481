"""Tests for iron.core.precision.Precision."""

from __future__ import annotations

import pytest

import iron.core.precision as precision_module
from iron.core.precision import Precision

ORDER = [Precision.HIGHEST, Precision.HIGH, Precision.MEDIUM]


def test_values_named_as_torch():
    assert [p.value for p in Precision] == ["highest", "high", "medium"]
    assert [p.name for p in Precision] == ["HIGHEST", "HIGH", "MEDIUM"]


def test_is_a_str():
    assert isinstance(Precision.HIGH, str)
    assert Precision.HIGH == "high"
    assert str(Precision.MEDIUM) == "medium"
    assert f"{Precision.HIGHEST}" == "highest"


@pytest.mark.parametrize("text", ["high", "HIGH", "High"])
def test_converts_from_string(text):
    assert Precision(text) is Precision.HIGH


def test_unknown_value_names_choices():
    with pytest.raises(ValueError, match=r"'low' is not a Precision.*'highest'"):
        Precision("low")
    with pytest.raises(ValueError, match="3 is not a Precision"):
        Precision(3)


@pytest.mark.parametrize("i", range(3))
@pytest.mark.parametrize("j", range(3))
def test_allows_itself_and_levels_above(i, j):
    # Each level allows the roundings of every level above it (lower index).
    assert ORDER[i].allows(ORDER[j]) == (i >= j)


def test_allows_examples():
    assert Precision.MEDIUM.allows(Precision.HIGH)
    assert Precision.MEDIUM.allows(Precision.HIGHEST)
    assert Precision.HIGH.allows(Precision.HIGHEST)
    assert not Precision.HIGHEST.allows(Precision.HIGH)
    assert not Precision.HIGH.allows(Precision.MEDIUM)


def test_allows_accepts_strings():
    assert Precision.HIGH.allows("highest")
    assert not Precision.HIGHEST.allows("MEDIUM")
    with pytest.raises(ValueError, match="'fast' is not a Precision"):
        Precision.HIGH.allows("fast")


def test_public_docstrings():
    assert precision_module.__doc__
    assert (
        Precision.__doc__ and "torch.set_float32_matmul_precision" in Precision.__doc__
    )
    assert Precision.allows.__doc__
