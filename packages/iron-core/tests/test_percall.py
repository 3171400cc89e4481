"""Tests for iron.core.percall: per-call values and their affine expressions."""

from __future__ import annotations

import copy
import operator
import pickle
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import iron
from iron.core.percall import (
    VALUE_BITS,
    VALUE_MAX,
    Affine,
    Carried,
    Carry,
    Clamp,
    FloorDiv,
    Kind,
    PerCall,
    PerCallValueError,
    Scratchpad,
    clamp,
    evaluate,
)

pos = PerCall("position")
n = PerCall("n")
m = PerCall("m")

NAMES = ("a", "b", "c")
values_of = st.fixed_dictionaries(
    {name: st.integers(0, VALUE_MAX) for name in NAMES}
) | st.fixed_dictionaries({name: st.integers(0, 40) for name in NAMES})


def py_clamp(x: int, lo: int | None, hi: int | None) -> int:
    if lo is not None:
        x = max(x, lo)
    if hi is not None:
        x = min(x, hi)
    return x


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


# --------------------------------------------------------------------- Carry


def test_carry_is_a_mapping():
    c = Carry(position=n + 1, token=3)
    assert len(c) == 2
    assert list(c) == ["position", "token"]
    assert c["token"] == 3
    assert c["position"] == n + 1
    assert dict(c) == {"position": n + 1, "token": 3}
    assert "token" in c and "other" not in c
    assert c.get("other") is None
    with pytest.raises(KeyError):
        c["other"]


def test_carry_attributes():
    c = Carry(position=5, token=3)
    assert c.position == 5 and c.token == 3
    with pytest.raises(AttributeError) as info:
        c.other  # noqa: B018
    text = str(info.value)
    assert "'other'" in text and "['position', 'token']" in text


def test_carry_equality_and_repr():
    assert Carry(a=1, b=2) == Carry(b=2, a=1)
    assert Carry(a=1) == {"a": 1}
    assert Carry(a=1) != Carry(a=2)
    assert Carry(a=1) != 3
    assert repr(Carry(position=n + 1, token=3)) == "Carry(position=n + 1, token=3)"
    with pytest.raises(TypeError):
        hash(Carry(a=1))


def test_carry_copies_and_pickles():
    c = Carry(position=4, token=9)
    assert copy.copy(c) == c
    assert copy.deepcopy(c) == c
    assert pickle.loads(pickle.dumps(c)) == c
    assert copy.deepcopy(Carry(p=n + 1))["p"] == n + 1


def test_iron_carry_makes_a_carry():
    c = iron.carry(position=pos + 1)
    assert isinstance(c, Carry)
    assert c.position == pos + 1


# --------------------------------------------------------- the annotations


@pytest.mark.parametrize(
    "alias, kind", [(Scratchpad, Kind.SCRATCHPAD), (Carried, Kind.CARRIED)]
)
def test_annotations_carry_the_kind(alias, kind):
    hint = alias[int]
    assert typing.get_origin(hint) is typing.Annotated
    assert typing.get_args(hint) == (int, kind.value)
    assert hint.__metadata__ == (kind.value,)
    assert Kind(hint.__metadata__[0]) is kind


def test_annotations_resolve_in_signatures():
    def body(x, *, pos: iron.Scratchpad[int], tok: iron.Carried[int]):
        pass

    hints = typing.get_type_hints(body, include_extras=True)
    assert typing.get_args(hints["pos"]) == (int, "scratchpad")
    assert typing.get_args(hints["tok"]) == (int, "carried")
