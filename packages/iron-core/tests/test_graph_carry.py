"""Carried values: iron.Carried[int] parameters and the carry a body returns last.

reference() returns the outputs then an iron.Carry of ints; the carry names
exactly the carried values, and a next value is an expression, an int or a
one-element int32 handle (a sampled token).
"""

from __future__ import annotations

import numpy as np
import pytest
from graphs_for_tests import bf16
from ml_dtypes import bfloat16
from operators_for_tests import ArgMax, Scale

import iron

# -- carried values -------------------------------------------------------------------


class Counter(iron.Graph):
    """Scales row ``position`` and carries ``position + 1``."""

    def body(self, x, *, position: iron.Carried[int]):
        return Scale.step(x[position]), iron.carry(position=position + 1)


def test_a_carried_value_is_returned_last_with_its_next_value():
    recording = Counter().record(x=(4, 8))
    assert [v.kind.value for v in recording.values] == ["carried"]
    assert str(recording.carry["position"]) == "position + 1"


def test_reference_returns_the_outputs_then_a_carry_of_ints():
    x = bf16(4, 8)
    out, carry = Counter().reference(x, position=2)
    np.testing.assert_array_equal(out, x[2])
    assert isinstance(carry, iron.Carry)
    assert carry == {"position": 3}
    assert carry.position == 3
    assert type(carry["position"]) is int


def test_a_carry_alone_is_returned_alone():
    class Only(iron.Graph):
        def body(self, x, *, position: iron.Carried[int]):
            return iron.carry(position=iron.clamp(position + 2, hi=5))

    assert Only().record(x=(8,)).outputs == []
    assert Only().reference(bf16(8), position=1) == {"position": 3}
    assert Only().reference(bf16(8), position=4) == {"position": 5}


def test_a_carried_value_may_be_carried_unchanged_or_set():
    class Fixed(iron.Graph):
        def body(self, x, *, a: iron.Carried[int], b: iron.Carried[int]):
            return x, iron.carry(a=a, b=7)

    _, carry = Fixed().reference(bf16(8), a=3, b=1)
    assert carry == {"a": 3, "b": 7}


def test_a_body_with_carried_values_must_return_a_carry():
    class Forgot(iron.Graph):
        def body(self, x, *, position: iron.Carried[int]):
            return Scale.step(x)

    with pytest.raises(TypeError) as info:
        Forgot().record(x=(8,))
    assert str(info.value) == (
        "Forgot.body takes carried values ['position'] and must return their "
        "next values last: iron.carry(position=...)"
    )


def test_the_carry_comes_last():
    class First(iron.Graph):
        def body(self, x, *, position: iron.Carried[int]):
            return iron.carry(position=position + 1), Scale.step(x)

    with pytest.raises(TypeError, match=r"returns iron\.carry\(\.\.\.\) last"):
        First().record(x=(8,))


def test_the_carry_names_exactly_the_carried_values():
    class Wrong(iron.Graph):
        def body(self, x, *, position: iron.Carried[int], n: iron.Scratchpad[int] = 1):
            return x, iron.carry(n=n + 1)

    with pytest.raises(TypeError) as info:
        Wrong().record(x=(8,))
    assert str(info.value) == (
        "Wrong: iron.carry gives ['n'], but body carries ['position']; ['n'] are "
        "not iron.Carried values; ['position'] have no next value"
    )


def test_a_carry_without_carried_values_raises():
    class Stray(iron.Graph):
        def body(self, x):
            return x, iron.carry(token=1)

    with pytest.raises(TypeError, match=r"\['token'\] are not iron\.Carried values"):
        Stray().record(x=(8,))


class Sampler(iron.Graph):
    """Carries the index of x's greatest element: a sampled token."""

    def body(self, x, *, token: iron.Carried[int]):
        return Scale.step(x), iron.carry(token=ArgMax.step(x))


def test_a_carried_handle_is_read_as_an_int():
    x = np.array([0, 3, 9, 1, -2, 4, 4, 0], dtype=bfloat16)
    out, carry = Sampler().reference(x, token=0)
    np.testing.assert_array_equal(out, x)
    assert carry == {"token": 2}
    recording = Sampler().record(x=(8,))
    assert recording.carry["token"] is recording.steps[1].outputs[0]


@pytest.mark.parametrize("what", ["bf16", "two"])
def test_a_carried_handle_is_one_int32_element(what):
    class Bad(iron.Graph):
        def body(self, x, ids, *, token: iron.Carried[int]):
            return x, iron.carry(token=Scale.step(x) if what == "bf16" else ids)

    with pytest.raises(TypeError, match="a carried handle is one int32 element"):
        Bad().record(x=(8,), ids=((2,), np.int32))


@pytest.mark.parametrize("value", [True, 1.5, "1", None])
def test_a_next_value_is_an_expression_an_int_or_a_handle(value):
    class Bad(iron.Graph):
        def body(self, x, *, position: iron.Carried[int]):
            return x, iron.carry(position=value)

    with pytest.raises(TypeError, match="a next value is an expression of per-call"):
        Bad().record(x=(8,))
