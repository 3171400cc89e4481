"""iron.clamp on per-call expressions: min/max with either bound optional.

A clamp the value can never reach or never leave folds to a bound or to the
expression itself; otherwise it is a Clamp atom that evaluates as min/max.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from percall_for_tests import m, n, pos, py_clamp

import iron
from iron.core.carry import Carried, Carry
from iron.core.percall import (
    VALUE_MAX,
    Affine,
    Clamp,
    Scratchpad,
    clamp,
    evaluate,
)

# ------------------------------------------------------------------ clamp


def test_clamp_bounds_order():
    with pytest.raises(ValueError, match="lo is above hi"):
        clamp(n, 5, 4)
    with pytest.raises(ValueError):
        (n + 1).clamp(10, 0)


@pytest.mark.parametrize("x", [3, 3.0, None, "n"])
def test_clamp_takes_per_call_values_only(x):
    with pytest.raises(TypeError, match="min/max"):
        clamp(x, 0, 4)


def test_clamp_makes_a_clamp_atom():
    c = clamp(n - 4, 0, 16)
    assert isinstance(c, Affine)
    ((atom, coeff),) = c.terms
    assert isinstance(atom, Clamp) and coeff == 1
    assert (atom.lo, atom.hi) == (0, 16)
    assert atom.inner == n - 4
    assert str(c) == "clamp(n - 4, 0, 16)"
    assert [evaluate(c, {"n": v}) for v in (0, 4, 10, 20, 21, 100)] == [
        0,
        0,
        6,
        16,
        16,
        16,
    ]


def test_clamp_one_sided():
    lo_only = clamp(n - 4, 0)
    hi_only = clamp(n, None, 16)
    assert str(lo_only) == "clamp(n - 4, 0, None)"
    assert str(hi_only) == "clamp(n, None, 16)"
    assert evaluate(lo_only, {"n": 1}) == 0
    assert evaluate(hi_only, {"n": 99}) == 16
    assert clamp(n) == n


def test_clamp_where_x_never_reaches_the_range_is_the_nearer_bound():
    # every per-call value lies in [0, 2**30)
    assert clamp(n - 2**30, 0, 10) == 0
    assert type(clamp(n - 2**30, 0, 10)) is int
    assert clamp(n + 2**30, 0, 10) == 10
    assert clamp(n + 2**30, None, 10) == 10
    assert clamp(n - 2**30, 0, None) == 0
    assert clamp(-n, 1, None) == 1
    assert clamp(-n, 0, None) == 0  # only touches the range at 0
    assert clamp(n + 20, None, 20) == 20  # only touches the range at 20


def test_clamp_where_x_never_leaves_the_range_is_x_itself():
    x = n + 4
    assert clamp(x, 0, None) is x
    assert clamp(x, 4, 2**30 + 3) is x
    assert clamp(-n, None, 0) == -n
    assert clamp(n, 0, VALUE_MAX) == n
    assert clamp(n // 4, 0, VALUE_MAX // 4) == n // 4
    assert clamp(pos, 0, None) == pos
    assert isinstance(clamp(pos, 0, None), Affine)


def test_clamp_with_equal_bounds_is_that_value():
    c = clamp(n, 5, 5)
    assert all(evaluate(c, {"n": v}) == 5 for v in (0, 5, 9))


def test_clamps_with_and_without_a_bound_combine():
    # a None and an int bound on the same inner expression must still sort
    e = clamp(n, 0, 5) + clamp(n, None, 5)
    assert len(e.terms) == 2
    assert e.key() == (clamp(n, None, 5) + clamp(n, 0, 5)).key()
    assert evaluate(e, {"n": 9}) == 10
    nested = clamp(clamp(n, None, 5) + m, 0, 7) + clamp(clamp(n, 1, 5) + m, 0, 7)
    assert evaluate(nested, {"n": 0, "m": 3}) == 3 + 4


def test_iron_exports_the_same_clamp_and_kinds():
    assert iron.clamp is clamp
    assert iron.Scratchpad is Scratchpad
    assert iron.Carried is Carried
    assert iron.Carry is Carry


@given(
    coeff=st.integers(-3, 3).filter(bool),
    const=st.integers(-(2**31), 2**31),
    lo=st.none() | st.integers(-(2**31), 2**31),
    hi=st.none() | st.integers(-(2**31), 2**31),
    v=st.integers(0, VALUE_MAX) | st.integers(0, 50),
)
def test_clamp_is_min_max_for_every_value(coeff, const, lo, hi, v):
    x = coeff * n + const
    if lo is not None and hi is not None and lo > hi:
        with pytest.raises(ValueError):
            clamp(x, lo, hi)
        return
    c = clamp(x, lo, hi)
    assert evaluate(c, {"n": v}) == py_clamp(coeff * v + const, lo, hi)
    for edge in (0, VALUE_MAX):
        assert evaluate(c, {"n": edge}) == py_clamp(coeff * edge + const, lo, hi)
