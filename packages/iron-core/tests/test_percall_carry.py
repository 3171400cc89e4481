"""iron.Carry and the Scratchpad and Carried annotations.

A Carry is an unhashable mapping with attribute access that copies and
pickles; Scratchpad[int] and Carried[int] are Annotated ints that name their
kind.
"""

from __future__ import annotations

import copy
import pickle
import typing

import pytest
from percall_for_tests import n, pos

import iron
from iron.core.carry import Carried, Carry
from iron.core.percall import Kind, Scratchpad

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
