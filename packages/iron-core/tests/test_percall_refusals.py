"""Using a per-call value as a Python value raises PerCallValueError.

bool, int, indexing, comparisons with numbers and ``if`` need the value, which
is known only per call; equality between expressions is structural, and with
a non-number it is False.
"""

from __future__ import annotations

import operator

import pytest
from percall_for_tests import m, n

from iron.core.percall import Kind, PerCall, PerCallValueError, clamp

# ------------------------------------------------------- refusing a value


REFUSALS = [
    ("bool", bool),
    ("not", operator.not_),
    ("int", int),
    ("float", float),
    ("index", operator.index),
    ("range", range),
    ("list index", lambda x: [1, 2, 3][x]),
    ("hex", hex),
    ("<", lambda x: x < 1),
    ("<=", lambda x: x <= 1),
    (">", lambda x: x > 1),
    (">=", lambda x: x >= 1),
    ("==", lambda x: x == 1),
    ("!=", lambda x: x != 1),
    ("int ==", lambda x: 1 == x),
    ("int <", lambda x: 1 < x),
    ("== float", lambda x: x == 1.0),
    ("== True", lambda x: x == True),  # noqa: E712
    ("< expr", lambda x: x < m),
    ("in ints", lambda x: x in [1, 2]),
]


@pytest.mark.parametrize("use", [u for _, u in REFUSALS], ids=[i for i, _ in REFUSALS])
@pytest.mark.parametrize("x", [n, n + 1, clamp(n - 4, 0, 16), n // 2], ids=str)
def test_using_a_per_call_value_as_a_value_raises(x, use):
    with pytest.raises(PerCallValueError, match="computed per call") as info:
        use(x)
    assert isinstance(info.value, TypeError)
    assert str(x) in str(info.value)


def test_if_on_a_per_call_value_raises():
    with pytest.raises(PerCallValueError, match="bool"):
        if n:  # noqa: SIM108
            pass
    with pytest.raises(PerCallValueError):
        while n + 1:
            break


def test_per_call_value_error_is_a_type_error():
    assert issubclass(PerCallValueError, TypeError)


def test_equality_between_expressions_is_structural():
    assert n == n
    assert n == PerCall("n")
    assert PerCall("n") == PerCall("n", Kind.CARRIED)
    assert n == n.affine()
    assert n.affine() == n
    assert n != m
    assert not (n == m)
    assert n + 1 != n + 2
    assert n + 1 == n + 1
    assert len({n, PerCall("n"), n + 0, m}) == 2


def test_equality_with_non_numbers_is_false():
    # no per-call value is needed to know an expression is not None or ...
    assert (n == None) is False  # noqa: E711
    assert (n != None) is True  # noqa: E711
    assert n not in (None, Ellipsis, "n")
    assert (n + 1) != "n + 1"
