"""Operator construction: fields, tunable domains, pinning, equality, replace.

Unknown or missing fields and values outside a tunable's domain are refused
with the field named; fields are fixed once built, equal operators hash
alike, and replace() re-derives, re-checks and pins what it sets.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from operators_for_tests import (
    DerivedTile,
    DomainScale,
    Mode,
    NoResolve,
    PerCallRows,
    TiledMatVec,
    TunableFirst,
)

# -- construction ------------------------------------------------------------------


def test_construction_sets_fields():
    op = DomainScale(size=64, factor=2.0, tile=32)
    assert (op.size, op.factor, op.tile, op.columns, op.mode) == (
        64,
        2.0,
        32,
        None,
        None,
    )
    assert op.fields() == {
        "size": 64,
        "factor": 2.0,
        "tile": 32,
        "columns": None,
        "mode": None,
    }
    assert op.open_tunables() == ("columns", "mode")


def test_param_default_applies():
    assert DomainScale(size=64).factor == 1.0


def test_unknown_field_is_a_type_error_listing_fields():
    with pytest.raises(TypeError) as info:
        DomainScale(size=64, bogus=1, other=2)
    assert str(info.value) == (
        "DomainScale declares no field ['bogus', 'other']; its fields are "
        "['size', 'factor', 'tile', 'columns', 'mode']"
    )


def test_missing_required_is_a_type_error_naming_them():
    with pytest.raises(TypeError) as info:
        TiledMatVec()
    assert (
        str(info.value)
        == "TiledMatVec needs ['M', 'K']: give them as keywords (M=..., K=...)"
    )
    with pytest.raises(TypeError, match=r"needs \['K'\]"):
        TiledMatVec(M=4)


def test_tunables_and_defaulted_and_derived_params_are_not_required():
    DomainScale(size=16)
    PerCallRows(rows=4)


def test_tunable_outside_tuple_domain_names_the_domain():
    with pytest.raises(ValueError) as info:
        DomainScale(size=64, columns=3)
    assert str(info.value) == (
        "DomainScale.columns=3 is outside its domain (one of 1, 2, 4, 8)"
    )


def test_tunable_outside_divisors_domain_names_the_domain():
    with pytest.raises(ValueError) as info:
        DomainScale(size=64, tile=24)
    assert str(info.value) == (
        "DomainScale.tile=24 is outside its domain (divisors of size, multiples of 16)"
    )
    with pytest.raises(ValueError, match="divisors of size"):
        DomainScale(size=64, tile=128)


def test_tunable_outside_enum_domain_names_the_domain():
    with pytest.raises(ValueError) as info:
        DomainScale(size=64, mode="slow")
    assert str(info.value) == (
        "DomainScale.mode='slow' is outside its domain (one of 'fast', 'exact')"
    )


def test_enum_domain_coerces_values():
    assert DomainScale(size=64, mode="exact").mode is Mode.EXACT
    assert DomainScale(size=64, mode=Mode.FAST).mode is Mode.FAST


def test_divisors_domain_of_a_derived_field_is_checked():
    assert DerivedTile(rows=4, cols=8, tile=16).tile == 16
    with pytest.raises(ValueError, match=r"DerivedTile.tile=7 is outside its domain"):
        DerivedTile(rows=4, cols=8, tile=7)
    with pytest.raises(ValueError, match=r"DerivedTile.tile=64 is outside"):
        DerivedTile(rows=4, cols=8, tile=64)
    # Given explicitly, the derived field is what the domain reads.
    assert DerivedTile(rows=4, cols=8, n=7, tile=7).tile == 7


@given(size=st.integers(1, 4096).map(lambda k: 16 * k), tile=st.integers(1, 1 << 16))
def test_divisors_domain_accepts_exactly_its_values(size, tile):
    allowed = size % tile == 0 and tile % 16 == 0
    if allowed:
        assert DomainScale(size=size, tile=tile).tile == tile
    else:
        with pytest.raises(ValueError, match="outside its domain"):
            DomainScale(size=size, tile=tile)


# -- pinned ----------------------------------------------------------------------------


def test_pinned_is_the_given_tunables_by_default():
    assert DomainScale(size=64).pinned == frozenset()
    assert DomainScale(size=64, tile=16, mode="fast").pinned == frozenset(
        {"tile", "mode"}
    )


def test_pinned_leaves_out_dimensions_and_none():
    assert DomainScale(size=64, factor=3.0).pinned == frozenset()
    assert DomainScale(size=64, tile=None).pinned == frozenset()


def test_pinned_as_passed():
    op = DomainScale(size=64, tile=16, pinned=frozenset({"columns"}))
    assert op.pinned == frozenset({"columns"})
    assert DomainScale(size=64, tile=16, pinned=frozenset()).pinned == frozenset()
    assert DomainScale(size=64, pinned={"tile"}).pinned == frozenset({"tile"})


# -- immutability, equality, repr -------------------------------------------------------


def test_fields_are_immutable_after_construction():
    op = DomainScale(size=64)
    for name in ("size", "factor", "tile"):
        with pytest.raises(
            AttributeError, match=rf"DomainScale.{name} is fixed once constructed"
        ):
            setattr(op, name, 32)
    with pytest.raises(AttributeError, match="fixed once constructed"):
        del op.size
    assert op.size == 64 and op.tile is None


def test_non_field_attributes_may_be_set():
    op = DomainScale(size=64)
    op.note = "scratch"
    assert op.note == "scratch"


def test_equality_and_hash_follow_fields():
    a, b = DomainScale(size=64, tile=16), DomainScale(size=64, tile=16)
    assert a == b and hash(a) == hash(b)
    assert a != DomainScale(size=64, tile=32)
    assert DomainScale(size=64) != NoResolve(size=64)
    assert len({a, b, DomainScale(size=32)}) == 2


def test_repr_lists_dimensions_before_tunables():
    op = TunableFirst(size=8, tile=2, columns=1)
    assert repr(op) == "TunableFirst(size=8, scale=2.0, tile=2, columns=1)"
    assert repr(DomainScale(size=64, mode="fast")) == (
        "DomainScale(size=64, factor=1.0, tile=None, columns=None, mode=<Mode.FAST: 'fast'>)"
    )
    assert repr(PerCallRows(rows=2)) == "PerCallRows(rows=2, length=0, half=0)"


# -- replace ---------------------------------------------------------------------------


def test_replace_changes_fields_and_returns_a_new_operator():
    op = DomainScale(size=64, tile=16)
    new = op.replace(factor=3.0)
    assert new is not op and type(new) is DomainScale
    assert (new.size, new.factor, new.tile) == (64, 3.0, 16)
    assert (op.factor, op.tile) == (1.0, 16)


def test_replace_recomputes_derived_fields():
    op = PerCallRows(rows=4, length=10)
    assert op.half == 5
    assert op.replace(length=20).half == 10


def test_replace_pins_the_tunables_it_sets():
    op = DomainScale(size=64, tile=16)
    assert op.replace(columns=2).pinned == frozenset({"tile", "columns"})
    assert op.replace(factor=2.0).pinned == frozenset({"tile"})
    assert op.replace(tile=None).pinned == frozenset()
    assert op.replace(tile=None).tile is None


def test_replace_checks_domains_and_fields():
    op = DomainScale(size=64, tile=64)
    with pytest.raises(ValueError, match="outside its domain"):
        op.replace(size=48)  # 64 does not divide 48
    with pytest.raises(TypeError, match="declares no field"):
        op.replace(bogus=1)
