"""Tests for iron.core.profile: precedence, make(), add() errors and the file format."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from operators_for_tests import AX, AX1, MM, Mode, NotCataloged

from iron.core import plugins
from iron.core.device import NPU2
from iron.core.percall import PerCall
from iron.core.profile import Profile, ProfileFile


@pytest.fixture
def catalog(monkeypatch):
    """Stand in for iron-operators' catalog (plugins.catalog is cached)."""
    table = {"AX": AX, "AX1": AX1, "MM": MM}
    monkeypatch.setattr(plugins, "catalog", lambda: table)
    return table


# -- make(): filling, pinning, precedence over the profile --------------------


@pytest.mark.parametrize("given", [int, AX(size=8, scalar_factor=1.0)])
def test_an_entry_or_lookup_for_what_is_no_operator_class_names_it(given):
    # A profile's entries are for operator classes: anything else (a class
    # that is no operator, an operator instead of its class) is refused
    # by name, whichever method is given it.
    profile = Profile()
    profile.add(AX, tile_size=4)
    calls = [
        lambda: profile.add(given, tile_size=4),
        lambda: profile.tunables_for(given, {"size": 8}),
        lambda: Profile.dims(given, {"size": 8}),
    ]
    for call in calls:
        with pytest.raises(TypeError, match="is not an operator class") as info:
            call()
        assert repr(given) in str(info.value)
    assert len(profile) == 1


def test_make_fills_open_tunables_and_pins_none():
    profile = Profile()
    profile.add(AX, size=2048, tile_size=1024, num_aie_columns=2)
    op = profile.make(AX, size=2048, scalar_factor=1.5)
    assert (op.tile_size, op.num_aie_columns) == (1024, 2)
    assert op.pinned == frozenset()


def test_call_keyword_wins_and_is_pinned():
    profile = Profile()
    profile.add(AX, size=2048, tile_size=1024, num_aie_columns=2)
    op = profile.make(AX, size=2048, scalar_factor=1.5, num_aie_columns=1)
    assert (op.tile_size, op.num_aie_columns) == (1024, 1)
    assert op.pinned == frozenset({"num_aie_columns"})


def test_none_keyword_counts_as_not_given():
    profile = Profile()
    profile.add(AX, tile_size=64, num_aie_columns=4)
    op = profile.make(AX, size=256, scalar_factor=1.0, tile_size=None)
    assert op.tile_size == 64
    assert op.pinned == frozenset()


def test_tunable_no_entry_names_stays_open():
    profile = Profile()
    profile.add(AX, tile_size=64)
    op = profile.make(AX, size=256, scalar_factor=1.0)
    assert op.tile_size == 64
    assert op.num_aie_columns is None
    assert op.open_tunables() == ("num_aie_columns",)


def test_empty_profile_makes_the_plain_operator():
    op = Profile().make(AX, size=256, scalar_factor=1.0)
    assert op.open_tunables() == ("tile_size", "num_aie_columns")


# -- precedence ---------------------------------------------------------------


@pytest.mark.parametrize("specific_first", [True, False])
def test_most_specific_entry_wins(specific_first):
    profile = Profile()
    entries = [
        dict(size=2048, scalar_factor=1.5, num_aie_columns=8),
        dict(size=2048, num_aie_columns=4),
        dict(num_aie_columns=2),
    ]
    for fields in entries if specific_first else reversed(entries):
        profile.add(AX, **fields)
    assert profile.tunables_for(AX, {"size": 2048, "scalar_factor": 1.5}) == {
        "num_aie_columns": 8
    }
    assert profile.tunables_for(AX, {"size": 2048, "scalar_factor": 2.0}) == {
        "num_aie_columns": 4
    }
    assert profile.tunables_for(AX, {"size": 1024, "scalar_factor": 1.5}) == {
        "num_aie_columns": 2
    }


def test_each_tunable_from_its_own_most_specific_entry():
    profile = Profile()
    profile.add(AX, tile_size=128, num_aie_columns=2)
    profile.add(AX, size=2048, num_aie_columns=4)
    op = profile.make(AX, size=2048, scalar_factor=1.5)
    assert (op.tile_size, op.num_aie_columns) == (128, 4)


def test_left_out_dimension_matches_any_and_named_one_must_agree():
    profile = Profile()
    profile.add(AX, size=2048, tile_size=1024, num_aie_columns=2)
    profile.add(AX, size=1024, tile_size=256, num_aie_columns=1)
    op = profile.make(AX, size=1024, scalar_factor=3.0)
    assert (op.tile_size, op.num_aie_columns) == (256, 1)
    assert profile.tunables_for(AX, {"size": 512, "scalar_factor": 3.0}) == {}
    # A call that does not give a required dimension matches no entry naming it.
    assert profile.tunables_for(AX, {}) == {}


def test_subclass_matches_its_base_entries_but_keeps_its_fixed_tunable():
    profile = Profile()
    profile.add(AX, size=2048, tile_size=512, num_aie_columns=8)
    op = profile.make(AX1, size=2048, scalar_factor=1.5)
    assert (op.tile_size, op.num_aie_columns) == (512, 1)
    assert profile.tunables_for(AX1, {"size": 2048}) == {"tile_size": 512}


def test_base_does_not_match_subclass_entries():
    profile = Profile()
    profile.add(AX1, tile_size=512)
    assert profile.tunables_for(AX, {"size": 2048}) == {}
    assert profile.tunables_for(AX1, {"size": 2048}) == {"tile_size": 512}


def test_equal_specificity_disagreeing_raises():
    profile = Profile()
    profile.add(AX, size=2048, num_aie_columns=2)
    profile.add(AX, scalar_factor=1.5, num_aie_columns=4)
    with pytest.raises(ValueError, match="profile is ambiguous for AX ") as info:
        profile.make(AX, size=2048, scalar_factor=1.5)
    assert "num_aie_columns=2 and num_aie_columns=4" in str(info.value)
    assert "equal specificity" in str(info.value)
    # Only where both match: elsewhere each applies alone.
    assert profile.tunables_for(AX, {"size": 2048, "scalar_factor": 2.0}) == {
        "num_aie_columns": 2
    }


def test_equal_specificity_between_base_and_subclass_entries_raises():
    profile = Profile()
    profile.add(AX, tile_size=64)
    profile.add(AX1, tile_size=128)
    with pytest.raises(ValueError, match="profile is ambiguous for AX1"):
        profile.tunables_for(AX1, {"size": 256})


def test_equal_specificity_agreeing_is_fine():
    profile = Profile()
    profile.add(AX, size=2048, num_aie_columns=2)
    profile.add(AX, scalar_factor=1.5, num_aie_columns=2)
    op = profile.make(AX, size=2048, scalar_factor=1.5)
    assert op.num_aie_columns == 2


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_more_specific_entry_settles_an_ambiguity(order):
    entries = [
        dict(size=2048, num_aie_columns=2),
        dict(scalar_factor=1.5, num_aie_columns=4),
        dict(size=2048, scalar_factor=1.5, num_aie_columns=8),
    ]
    profile = Profile()
    for i in order:
        profile.add(AX, **entries[i])
    assert profile.make(AX, size=2048, scalar_factor=1.5).num_aie_columns == 8


def test_ambiguity_on_a_tunable_the_call_gives_does_not_matter():
    profile = Profile()
    profile.add(AX, size=2048, num_aie_columns=2)
    profile.add(AX, scalar_factor=1.5, num_aie_columns=4)
    op = profile.make(AX, size=2048, scalar_factor=1.5, num_aie_columns=1)
    assert op.num_aie_columns == 1


# -- dims() and matches() -----------------------------------------------------


def test_dims_defaults_derived_and_missing():
    assert Profile.dims(MM, {"m": 128}) == {
        "m": 128,
        "bias": False,
        "half": None,
        "blocks": None,
    }
    # Tunables are never dimensions; a given derived param is its value.
    assert Profile.dims(MM, {"m": 128, "half": 64, "tile_m": 32}) == {
        "m": 128,
        "bias": False,
        "half": 64,
        "blocks": None,
    }


def test_dims_of_a_per_call_value_is_none():
    assert Profile.dims(AX, {"size": PerCall("n")})["size"] is None


def test_entry_naming_a_derived_param_matches_only_a_call_giving_it():
    profile = Profile()
    profile.add(MM, half=64, tile_m=64)
    profile.add(MM, blocks=2, mode=Mode.EXACT)
    assert profile.tunables_for(MM, {"m": 128, "k": 64}) == {}
    assert profile.tunables_for(MM, {"m": 128, "k": 64, "half": 64}) == {"tile_m": 64}
    op = profile.make(MM, m=128, k=64, blocks=2)
    assert op.mode is Mode.EXACT


def test_entry_matches_a_default_dimension():
    profile = Profile()
    profile.add(MM, bias=False, tile_m=32)
    assert profile.tunables_for(MM, {"m": 128, "k": 64}) == {"tile_m": 32}
    assert profile.tunables_for(MM, {"m": 128, "k": 64, "bias": True}) == {}


def test_matches():
    assert Profile.matches({}, {})
    assert Profile.matches({"size": 2}, {"size": 2, "k": 3})
    assert not Profile.matches({"size": 2}, {"size": 3})
    assert not Profile.matches({"size": 2}, {})
    assert not Profile.matches({"size": 2}, {"size": None})


# -- add() errors ---------------------------------------------------------------


def test_add_unknown_field():
    with pytest.raises(TypeError, match=re.escape("AX declares no field ['bogus']")):
        Profile().add(AX, bogus=1, tile_size=64)


def test_add_fixed_tunable():
    with pytest.raises(
        TypeError,
        match=re.escape(
            "AX1.['num_aie_columns'] are derived or fixed by the class, not "
            "tunables a profile gives"
        ),
    ):
        Profile().add(AX1, num_aie_columns=1, tile_size=64)


def test_add_without_a_tunable():
    with pytest.raises(TypeError, match="an entry for AX must give a tunable"):
        Profile().add(AX, size=2048)


def test_add_value_outside_domain():
    with pytest.raises(ValueError, match=r"AX\.num_aie_columns=3 is outside"):
        Profile().add(AX, num_aie_columns=3)
    with pytest.raises(ValueError, match=r"AX\.tile_size=3 is outside"):
        Profile().add(AX, size=2048, tile_size=3)
    with pytest.raises(ValueError, match=r"MM\.mode='slow' is outside"):
        Profile().add(MM, mode="slow")
    # A Divisors domain whose dimension the entry leaves out is checked when made.
    Profile().add(AX, tile_size=3)


def test_add_enum_value_becomes_member():
    profile = Profile()
    profile.add(MM, mode="fast")
    ((_, _, tunables),) = list(profile)
    assert tunables == {"mode": Mode.FAST}
    assert tunables["mode"] is Mode.FAST


# -- the container --------------------------------------------------------------


def test_len_iter_eq_repr():
    a, b = Profile(), Profile()
    assert len(a) == 0 and a == b and repr(a) == "Profile(0 entries)"
    a.add(AX, size=2048, tile_size=1024)
    assert len(a) == 1 and a != b
    assert list(a) == [(AX, {"size": 2048}, {"tile_size": 1024})]
    for _, dims, _ in a:
        dims["size"] = 1  # a copy
    assert list(a) == [(AX, {"size": 2048}, {"tile_size": 1024})]
    b.add(AX, size=2048, tile_size=1024)
    assert a == b
    b.meta["by"] = "test"
    assert a != b
    assert repr(a) == "Profile(1 entry: AX(size=2048) -> tile_size=1024)"
    assert a != object()


# -- save / load ------------------------------------------------------------------


def _sample() -> Profile:
    profile = Profile()
    profile.add(AX, size=2048, tile_size=1024, num_aie_columns=2)
    profile.add(AX1, tile_size=64)
    profile.add(MM, m=128, mode=Mode.EXACT, tile_m=64)
    return profile


def test_round_trip_with_enum_tunable(tmp_path, catalog):
    profile = _sample()
    path = tmp_path / "npu2.json"
    profile.save(path)
    text = path.read_text()
    lines = text.splitlines()
    assert lines[0] == '{"entries": ['
    assert json.loads(lines[1].rstrip(",")) == {
        "operator": "AX",
        "size": 2048,
        "tile_size": 1024,
        "num_aie_columns": 2,
    }
    assert json.loads(lines[3]) == {
        "operator": "MM",
        "m": 128,
        "mode": "exact",
        "tile_m": 64,
    }
    assert lines[-1] == "]}" and text.endswith("]}\n")
    loaded = Profile.load(path)
    assert loaded == profile
    assert list(loaded)[2][2]["mode"] is Mode.EXACT
    # Saving again writes the same bytes.
    loaded.save(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_text() == text


def test_round_trip_with_meta_and_empty(tmp_path, catalog):
    profile = _sample()
    profile.meta = {"tuned_by": "test", "repeats": 3}
    path = tmp_path / "p.json"
    profile.save(path)
    assert path.read_text().startswith('{"meta": {"tuned_by": "test", "repeats": 3},')
    loaded = Profile.load(path)
    assert loaded == profile and loaded.meta == profile.meta

    empty = Profile()
    empty.save(path)
    assert json.loads(path.read_text()) == {"entries": []}
    assert Profile.load(path) == empty


def test_save_class_not_in_catalog(tmp_path, catalog):
    profile = Profile()
    profile.add(NotCataloged, tile_size=64)
    path = tmp_path / "p.json"
    with pytest.raises(ValueError, match="NotCataloged is not in iron.operators"):
        profile.save(path)
    assert not path.exists()


def _write(tmp_path, text):
    path = tmp_path / "p.json"
    path.write_text(text)
    return path


def test_load_invalid_json_names_line_and_column(tmp_path, catalog):
    path = _write(
        tmp_path, '{"entries": [\n  {"operator": "AX", "tile_size": 64,}\n]}\n'
    )
    with pytest.raises(ValueError, match=r"p\.json: line 2 column \d+: not valid JSON"):
        Profile.load(path)


@pytest.mark.parametrize(
    "text, message",
    [
        ("[]", "the top level is a JSON array"),
        (
            '{"entries": [], "tunables": {}}',
            r"unknown top-level key\(s\) \['tunables'\]",
        ),
        ('{"meta": {}}', 'no "entries" list'),
        ('{"entries": {}}', '"entries" is a JSON object, not a list'),
        ('{"meta": [], "entries": []}', '"meta" is a JSON array, not an object'),
    ],
)
def test_load_wrong_top_level(tmp_path, catalog, text, message):
    with pytest.raises(ValueError, match=message):
        Profile.load(_write(tmp_path, text))


def test_load_entry_not_an_object_or_without_operator(tmp_path, catalog):
    text = '{"entries": [\n  {"operator": "AX", "tile_size": 64},\n  [1, 2]\n]}\n'
    with pytest.raises(ValueError, match=r"entry 2 \(line 3\): is a JSON array"):
        Profile.load(_write(tmp_path, text))
    text = '{"entries": [\n  {"tile_size": 64}\n]}\n'
    with pytest.raises(ValueError, match=r'entry 1 \(line 2\): needs an "operator"'):
        Profile.load(_write(tmp_path, text))


def test_load_unknown_operator_names_entry_and_line(tmp_path, catalog):
    text = (
        '{"meta": {"a": 1},\n "entries": [\n'
        '  {"operator": "AX", "tile_size": 64},\n'
        '  {"operator": "AXX", "tile_size": 64}\n]}\n'
    )
    path = _write(tmp_path, text)
    with pytest.raises(ValueError) as info:
        Profile.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: entry 2 (line 4): ")
    assert "'AXX' is not in iron.operators" in message
    assert "did you mean 'AX'" in message


def test_load_entry_lines_from_unusual_layout(tmp_path, catalog):
    text = '{\n"entries":\n[{"operator": "AX", "tile_size": 64}\n,\n\n{"operator": "AX",\n"bogus": 1}]}'
    with pytest.raises(ValueError, match=r"entry 2 \(line 6\): AX declares no field"):
        Profile.load(_write(tmp_path, text))


def test_a_file_read_names_every_bad_entry_where_load_stops_at_the_first(
    tmp_path, catalog
):
    text = (
        '{"meta": {"device": "npu2"}, "entries": [[1],\n'
        '  {"operator": "AXX", "tile_size": 64},\n'
        '  {"operator": "MM", "m": 64, "tile_m": 32}\n]}\n'
    )
    path = _write(tmp_path, text)
    read = ProfileFile.read(path)
    assert read.meta == {"device": "npu2"} and len(read.entries) == 3
    refused = []
    for entry in read.entries[:2]:
        with pytest.raises(ValueError) as info:
            entry.parse(catalog)
        refused.append(str(info.value))
    assert refused[0].startswith(f"{path}: entry 1 (line 1): is a JSON array")
    assert refused[1].startswith(f"{path}: entry 2 (line 2): operator 'AXX'")
    assert read.entries[2].parse(catalog) == ("MM", MM, {"m": 64, "tile_m": 32})
    with pytest.raises(ValueError) as info:
        Profile.load(path)
    assert str(info.value) == refused[0]


def test_load_bad_fields_are_value_errors_naming_the_entry(tmp_path, catalog):
    profile = Profile()
    profile.add(AX, tile_size=64)
    path = tmp_path / "p.json"
    profile.save(path)
    good = path.read_text().splitlines()
    for bad, message in [
        ('{"operator": "AX", "bogus": 1, "tile_size": 64}', "AX declares no field"),
        ('{"operator": "AX1", "num_aie_columns": 1}', "derived or fixed by the class"),
        ('{"operator": "AX", "size": 64}', "an entry for AX must give a tunable"),
        ('{"operator": "MM", "mode": "slow"}', r"MM\.mode='slow' is outside"),
    ]:
        path.write_text("\n".join([good[0], good[1] + ",", "  " + bad, good[2]]))
        with pytest.raises(
            ValueError, match=r"p\.json: entry 2 \(line 3\): .*" + message
        ):
            Profile.load(path)


def test_load_missing_file(tmp_path, catalog):
    with pytest.raises(FileNotFoundError):
        Profile.load(tmp_path / "nope.json")


def test_for_device(tmp_path, catalog):
    profile = _sample()
    profile.save(tmp_path / "npu2.json")
    assert Profile.for_device(tmp_path, NPU2) == profile
    assert Profile.for_device(str(tmp_path), "npu2") == profile
    with pytest.raises(FileNotFoundError) as info:
        Profile.for_device(tmp_path, "npu1")
    message = str(info.value)
    assert "npu1.json" in message and "npu2.json" in message
    assert "one <device>.json per device" in message
    with pytest.raises(FileNotFoundError, match="directory does not exist"):
        Profile.for_device(tmp_path / "missing", NPU2)


def test_catalog_without_iron_operators_raises_import_error(monkeypatch, tmp_path):
    monkeypatch.setattr(plugins, "entry_points", lambda group: [])
    plugins.catalog.cache_clear()
    try:
        with pytest.raises(ImportError, match="iron-operators"):
            plugins.catalog()
        path = _write(tmp_path, '{"entries": []}')
        with pytest.raises(ImportError, match="iron-operators"):
            Profile.load(path)
    finally:
        plugins.catalog.cache_clear()


def test_save_numpy_scalars_and_refuses_non_json(tmp_path, catalog):
    import numpy as np

    profile = Profile()
    profile.add(AX, size=np.int64(2048), tile_size=np.int32(1024))
    path = tmp_path / "p.json"
    profile.save(path)
    assert Profile.load(path) == profile
    # add() refuses a value of another type (issue 14); one that got past it
    # is still refused by save.
    with pytest.raises(TypeError, match="AX.size=<object"):
        profile.add(AX, size=object(), tile_size=64)
    profile._entries.append((AX, {"size": object()}, {"tile_size": 64}))
    with pytest.raises(ValueError, match="AX entry .* is not JSON"):
        profile.save(path)


# -- issue 14: a profile for another device, values of another type -------------


def test_a_profile_records_its_device_and_another_device_refuses_it(tmp_path, catalog):
    profile = _sample()
    profile.meta = {"device": "npu1"}
    profile.save(tmp_path / "npu1.json")
    assert Profile.for_device(tmp_path, "npu1") == profile
    # npu1.json copied as npu2.json: used silently on npu2 before
    (tmp_path / "npu2.json").write_text((tmp_path / "npu1.json").read_text())
    with pytest.raises(ValueError) as info:
        Profile.for_device(tmp_path, NPU2)
    message = str(info.value)
    assert str(tmp_path / "npu2.json") in message
    assert "'npu1'" in message and "'npu2'" in message


def test_a_profile_without_a_device_loads_for_any(tmp_path, catalog):
    _sample().save(tmp_path / "npu2.json")
    assert len(Profile.for_device(tmp_path, NPU2)) == 3


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"size": "2048", "tile_size": 64}, ["AX.size='2048'", "str", "int"]),
        ({"size": 2048.0, "tile_size": 64}, ["AX.size=2048.0", "int"]),
        ({"size": True, "tile_size": 64}, ["AX.size=True", "bool", "int"]),
        ({"num_aie_columns": True}, ["AX.num_aie_columns=True", "bool", "int"]),
        ({"tile_size": "64"}, ["AX.tile_size='64'", "int"]),
    ],
)
def test_add_refuses_a_value_of_another_type(fields, words):
    with pytest.raises(TypeError) as info:
        Profile().add(AX, **fields)
    for word in words:
        assert word in str(info.value)


def test_add_takes_an_int_for_a_float_dimension():
    profile = Profile()
    profile.add(AX, scalar_factor=2, tile_size=64)
    assert profile.make(AX, size=128, scalar_factor=2.0).tile_size == 64


@pytest.mark.parametrize(
    "entry, words",
    [
        ('{"operator": "AX", "size": "2048", "tile_size": 64}', ["size", "'2048'"]),
        ('{"operator": "AX", "num_aie_columns": true}', ["num_aie_columns", "True"]),
    ],
)
def test_load_refuses_a_value_of_another_type_naming_the_entry(
    tmp_path, catalog, entry, words
):
    path = tmp_path / "npu2.json"
    path.write_text('{"entries": [\n  ' + entry + "\n]}\n")
    with pytest.raises(ValueError) as info:
        Profile.load(path)
    assert "entry 1 (line 2)" in str(info.value)
    for word in words:
        assert word in str(info.value)


def test_an_enum_param_left_open_round_trips(tmp_path, monkeypatch):
    """``add`` takes None for an Enum param (any value matches) and ``save``
    writes it as null: ``load`` reads that back as None, not as a bad member."""
    from iron.core.declare import Input, Output, param, tunable
    from iron.core.device import Device
    from iron.core.operator import Operator

    class Moded(Operator):
        size: int = param()
        mode: Mode = param(Mode.FAST)
        tile: int = tunable(domain=(8, 16))
        inputs = (Input("x", "size"),)
        outputs = (Output("out", "size"),)

        def resolve(self, dev: Device) -> dict[str, object]:
            return {"tile": 8}

    monkeypatch.setattr(plugins, "catalog", lambda: {"Moded": Moded})
    profile = Profile()
    profile.add(Moded, size=64, mode=None, tile=16)
    profile.add(Moded, size=32, mode=Mode.EXACT, tile=8)
    path = tmp_path / "npu2.json"
    profile.save(path)
    assert '"mode": null' in path.read_text()
    loaded = Profile.load(path)
    assert loaded == profile
    assert list(loaded)[1][1]["mode"] is Mode.EXACT
    with pytest.raises(ValueError, match=r"Moded.mode='slow' is not one of"):
        path.write_text(path.read_text().replace('"exact"', '"slow"'))
        Profile.load(path)


def test_field_types_are_read_once_per_class(monkeypatch, catalog):
    """Each entry's type check reads its class's hints from a cache: recording a
    Llama makes hundreds of steps, and get_type_hints per step doubled its cost."""
    import typing

    calls = []
    real = typing.get_type_hints
    monkeypatch.setattr(
        typing, "get_type_hints", lambda cls: calls.append(cls) or real(cls)
    )
    for _ in range(3):
        profile = Profile()
        profile.add(AX, size=2048, tile_size=1024)
    assert calls.count(AX) <= 1
