"""evaluate() on per-call expressions, checked against Python arithmetic.

Hypothesis builds random expressions next to the same sum on ints: values,
ranges, printed text and keys must agree, and a sum in any order has one
canonical form.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from percall_for_tests import m, n, py_clamp

from iron.core.percall import VALUE_MAX, PerCall, clamp, evaluate

NAMES = ("a", "b", "c")
values_of = st.fixed_dictionaries(
    {name: st.integers(0, VALUE_MAX) for name in NAMES}
) | st.fixed_dictionaries({name: st.integers(0, 40) for name in NAMES})

# ------------------------------------------------------------- evaluation


def test_evaluate_passes_ints_through():
    assert evaluate(7, {}) == 7
    assert evaluate(n, {"n": 3}) == 3
    assert evaluate(n + m * 2 - 1, {"n": 3, "m": 4}) == 10


def test_evaluate_needs_every_name():
    with pytest.raises(KeyError):
        evaluate(n + m, {"n": 1})


@st.composite
def expressions(draw, depth: int = 3):
    """A random expression over 2-3 names, with the same computed on ints.

    Returns ``(expr, fn)``: ``expr`` is built from per-call values, ``fn``
    computes the same from a values dict with Python arithmetic.
    """
    names = NAMES[: draw(st.integers(2, 3))]
    return draw(_trees(names, depth))


def _trees(names, depth):
    leaf = st.sampled_from(names).map(lambda s: (PerCall(s), lambda v, s=s: v[s]))
    const = st.integers(-50, 50).map(lambda k: (k, lambda v, k=k: k))
    base = leaf | const
    if depth == 0:
        return base
    sub = _trees(names, depth - 1)

    def add(pair):
        (x, f), (y, g) = pair
        return x + y, lambda v: f(v) + g(v)

    def sub_(pair):
        (x, f), (y, g) = pair
        return x - y, lambda v: f(v) - g(v)

    def neg(p):
        x, f = p
        return -x, lambda v: -f(v)

    def mul(pair):
        (x, f), k = pair
        return x * k, lambda v: f(v) * k

    def rmul(pair):
        (x, f), k = pair
        return k * x, lambda v: k * f(v)

    def div(pair):
        (x, f), s = pair
        return x // (1 << s), lambda v: f(v) // (1 << s)

    def shr(pair):
        (x, f), s = pair
        return x >> s, lambda v: f(v) >> s

    def clamp_(args):
        (x, f), lo, hi = args
        if lo is not None and hi is not None and lo > hi:
            lo, hi = hi, lo
        made = clamp(x, lo, hi) if not isinstance(x, int) else py_clamp(x, lo, hi)
        return made, lambda v: py_clamp(f(v), lo, hi)

    bound = st.none() | st.integers(-20, 2**30 + 20) | st.integers(-20, 60)
    return st.one_of(
        base,
        st.tuples(sub, sub).map(add),
        st.tuples(sub, sub).map(sub_),
        sub.map(neg),
        st.tuples(sub, st.integers(-4, 4)).map(mul),
        st.tuples(sub, st.integers(-4, 4)).map(rmul),
        st.tuples(sub, st.integers(0, 5)).map(div),
        st.tuples(sub, st.integers(0, 5)).map(shr),
        st.tuples(sub, bound, bound).map(clamp_),
    )


@settings(max_examples=200)
@given(expressions(), values_of)
def test_evaluate_matches_python_arithmetic(pair, values):
    expr, fn = pair
    assert evaluate(expr, values) == fn(values)


@settings(max_examples=200)
@given(expressions(), values_of)
def test_range_bounds_every_value(pair, values):
    expr, _ = pair
    if isinstance(expr, int):
        return
    lo, hi = expr.affine().range()
    assert lo <= evaluate(expr, values) <= hi


@settings(max_examples=200)
@given(expressions(), values_of)
def test_printed_expression_is_python_with_the_same_value(pair, values):
    expr, _ = pair
    if isinstance(expr, int):
        return
    text = str(expr)
    assert eval(text, {"clamp": py_clamp, **values}) == evaluate(expr, values)


@settings(max_examples=100)
@given(expressions(), expressions())
def test_equal_keys_are_equal_expressions(p, q):
    (x, _), (y, _) = p, q
    if isinstance(x, int) or isinstance(y, int):
        return
    assert (x == y) == (x.affine().key() == y.affine().key())
    if x == y:
        assert hash(x) == hash(y)
    # x - x cancels whatever x is
    assert x - x == 0


@given(
    st.lists(
        st.tuples(st.sampled_from(NAMES), st.integers(-3, 3)), min_size=1, max_size=6
    ),
    st.integers(-9, 9),
    st.randoms(use_true_random=False),
)
def test_a_sum_in_any_order_is_one_canonical_form(terms, const, rnd):
    def build(order):
        e = const
        for name, coeff in order:
            e = e + coeff * PerCall(name)
        return e

    shuffled = list(terms)
    rnd.shuffle(shuffled)
    a, b = build(terms), build(shuffled)
    if isinstance(a, int):
        assert a == b == const
    else:
        assert a.key() == b.key()
        assert str(a) == str(b)
        assert all(c != 0 for _, c in a.terms)
        assert [t[0] for t in a.terms] == sorted(t[0] for t in a.terms)
