"""Per-call expressions' canonical forms, names, ranges and printing.

Arithmetic on per-call values builds one canonical Affine (terms merged and
sorted, zero terms dropped, ints only as factors, floor division by powers of
two); str() prints Python that reads back.
"""

from __future__ import annotations

import pytest
from percall_for_tests import m, n, pos

from iron.core.percall import (
    VALUE_BITS,
    VALUE_MAX,
    Affine,
    FloorDiv,
    Kind,
    PerCall,
    clamp,
    evaluate,
)

# ------------------------------------------------------------ canonical forms


def test_value_bits():
    assert VALUE_BITS == 30
    assert VALUE_MAX == 2**30 - 1


def test_per_call_value_is_a_one_term_expression():
    assert pos.affine() == Affine((("position", 1),), 0)
    assert pos.affine().terms == (("position", 1),)
    assert pos.kind is Kind.SCRATCHPAD
    assert PerCall("t", Kind.CARRIED).kind is Kind.CARRIED


def test_add_an_int_commutes_structurally():
    left, right = pos + 1, 1 + pos
    assert isinstance(left, Affine) and isinstance(right, Affine)
    assert left.terms == right.terms == (("position", 1),)
    assert left.const == right.const == 1
    assert left.key() == right.key()
    assert left == right
    assert hash(left) == hash(right)
    assert str(left) == str(right) == "position + 1"


def test_terms_merge_and_sort():
    e = n + m + n
    assert e.terms == (("m", 1), ("n", 2))
    assert (m + n).key() == (n + m).key()
    assert (2 * n - m + 3).key() == (3 - m + n + n).key()
    assert str(n + n) == "2 * n"


def test_zero_terms_drop_to_an_int():
    assert n - n == 0 and type(n - n) is int
    assert n * 0 == 0 and type(n * 0) is int
    assert 0 * n == 0
    assert (n + 5) - n == 5 and type((n + 5) - n) is int
    assert -n + n == 0
    assert (n + m) - (m + n) == 0


def test_subtraction_and_negation():
    assert str(n - 4) == "n - 4"
    assert str(4 - n) == "-n + 4"
    assert str(-n) == "-n"
    assert str(-(n + 1)) == "-n - 1"
    assert (5 - n).key() == (-n + 5).key()
    assert evaluate(4 - n, {"n": 10}) == -6


def test_add_subtract_returns_canonical_equal_to_per_call():
    e = (n + 1) - 1
    assert isinstance(e, Affine)
    assert e == n and n == e
    assert hash(e) == hash(n)
    assert {n: "x"}[e] == "x"


def test_sum_of_per_call_values():
    assert sum([n, m, n]) == 2 * n + m


def test_multiply_by_ints_only():
    assert (3 * n).terms == (("n", 3),)
    assert (n * 3) == (3 * n)
    assert (n + 1) * 2 == 2 * n + 2
    for bad in (m, m + 1, 1.5, True, "2", None):
        with pytest.raises(TypeError, match="Python ints only"):
            n * bad
    with pytest.raises(TypeError, match="another per-call value"):
        n * m
    with pytest.raises(TypeError, match="another per-call value"):
        (n + 1) * (m + 1)


def test_add_takes_ints_and_expressions_only():
    for bad in (1.5, True, "x", None):
        with pytest.raises(TypeError):
            n + bad
    for bad in (1.5, True):
        with pytest.raises(TypeError):
            bad + n
        with pytest.raises(TypeError):
            bad - n


def test_floor_division_by_powers_of_two():
    q = n // 4
    assert isinstance(q, Affine)
    ((atom, coeff),) = q.terms
    assert isinstance(atom, FloorDiv) and atom.shift == 2 and coeff == 1
    assert str(q) == "n // 4"
    assert n // 1 == n
    assert str((n + 1) // 8) == "(n + 1) // 8"
    assert (n // 2) // 4 != n // 8  # structurally different, equal in value
    assert evaluate((n // 2) // 4, {"n": 77}) == 77 // 8


@pytest.mark.parametrize("k", [3, 0, -2, -4, 6, 12])
def test_floor_division_by_other_ints_names_the_fix(k):
    with pytest.raises(TypeError, match="power of two") as info:
        n // k
    assert "per-call value" in str(info.value)


@pytest.mark.parametrize("bad", [m, 2.0, True, "4"])
def test_floor_division_only_by_ints(bad):
    with pytest.raises(TypeError):
        n // bad


def test_no_true_division_or_modulo():
    with pytest.raises(TypeError):
        n / 2  # type: ignore[operator]
    with pytest.raises(TypeError):
        n % 2  # type: ignore[operator]
    with pytest.raises(TypeError):
        8 // n  # type: ignore[operator]


def test_right_shift_is_division_by_a_power_of_two():
    assert (n >> 2) == (n // 4)
    assert (n >> 0) == n
    assert evaluate((n - 9) >> 1, {"n": 0}) == (0 - 9) >> 1
    with pytest.raises(TypeError):
        n >> m
    with pytest.raises(TypeError):
        n >> 1.0


def test_floor_division_floors_negative_values():
    e = (n - 5) // 4
    for v in range(0, 12):
        assert evaluate(e, {"n": v}) == (v - 5) // 4


# ---------------------------------------------------------- names, linear


def test_names_reach_nested_atoms():
    assert n.affine().names() == frozenset({"n"})
    e = clamp(n - m, 0, 8) + (pos // 4) + 3
    assert e.names() == frozenset({"n", "m", "position"})
    assert clamp(clamp(n, 0, 9) + m, 1, 5).names() == {"n", "m"}


def test_is_linear():
    assert (2 * n + m - 1).is_linear()
    assert not (n // 2).is_linear()
    assert not (clamp(n - 3, 0, 4) + m).is_linear()


def test_range():
    assert n.affine().range() == (0, VALUE_MAX)
    assert (n - 4).range() == (-4, VALUE_MAX - 4)
    assert (-2 * n).range() == (-2 * VALUE_MAX, 0)
    assert clamp(n - 4, 0, 16).range() == (0, 16)
    assert (n // 4).range() == (0, VALUE_MAX // 4)


# ------------------------------------------------------------------ printing


@pytest.mark.parametrize(
    "expr, text",
    [
        (pos + 1, "position + 1"),
        (1 + pos, "position + 1"),
        (clamp(n - 4, 0, 16), "clamp(n - 4, 0, 16)"),
        (2 * n - 3, "2 * n - 3"),
        (-n + 4, "-n + 4"),
        (-3 * n, "-3 * n"),
        (n - m, "-m + n"),
        (n // 4, "n // 4"),
        (n // 4 + 1, "n // 4 + 1"),
        ((n + 1) // 8, "(n + 1) // 8"),
        (3 * (n // 4), "3 * (n // 4)"),
        (-(n // 4), "-(n // 4)"),
        (m - n // 4, "m - n // 4"),
        (clamp(pos + 1, None, 31) * 2, "2 * clamp(position + 1, None, 31)"),
    ],
)
def test_str_is_readable(expr, text):
    assert str(expr) == text


def test_repr():
    assert repr(n) == "PerCall('n', scratchpad)"
    assert repr(PerCall("t", Kind.CARRIED)) == "PerCall('t', carried)"
    assert repr(n + 1) == "Affine(n + 1)"
    assert str(n) == "n"
