"""Graph.profile: a Profile, a directory of one JSON per device, or None.

A profile sets the open tunables of the steps whose shape it names; the
call's own keyword beats it, and reference() records under it too. The
catalog fixture stands in for iron-operators' catalog.
"""

from __future__ import annotations

import pytest
from graphs_for_tests import bf16, scale_profile
from operators_for_tests import Mul, Scale

import iron
from iron.core import context, plugins

# -- profiles ------------------------------------------------------------------------


class One(iron.Graph):
    def body(self, x):
        return Scale.step(x, factor=1.5)


def test_a_profile_sets_open_tunables():
    graph = One()
    graph.profile = scale_profile(tile_size=4, num_columns=2)
    (step,) = graph.record(x=(16,)).steps
    assert (step.op.tile_size, step.op.num_columns) == (4, 2)


def test_a_profile_entry_for_another_shape_does_not_apply():
    graph = One()
    graph.profile = scale_profile(tile_size=4, num_columns=2)
    (step,) = graph.record(x=(32,)).steps
    assert (step.op.tile_size, step.op.num_columns) == (16, 8)


def test_the_calls_own_keyword_beats_the_profile():
    class Pinned(iron.Graph):
        def body(self, x):
            return Scale.step(x, num_columns=1)

    graph = Pinned()
    graph.profile = scale_profile(tile_size=4, num_columns=2)
    (step,) = graph.record(x=(16,)).steps
    assert (step.op.tile_size, step.op.num_columns) == (4, 1)


def test_a_profile_is_a_profile_a_directory_or_none():
    graph = One()
    with pytest.raises(TypeError, match=r"One\.profile is a Profile or a directory"):
        graph.profile = {"Scale": {}}
    assert graph.profile is None


@pytest.fixture
def catalog(monkeypatch):
    """Stand in for iron-operators' catalog with the test operators."""
    table = {"Scale": Scale, "Mul": Mul}
    monkeypatch.setattr(plugins, "catalog", lambda: table)
    return table


def test_a_profile_directory_holds_one_json_per_device(tmp_path, catalog):
    scale_profile(tile_size=4, num_columns=2).save(tmp_path / "npu2.json")
    (tmp_path / "npu1.json").write_text(
        '{"entries": [{"operator": "Scale", "size": 16, "num_columns": 1}]}'
    )
    graph = One()
    graph.profile = tmp_path
    (step,) = graph.record(x=(16,)).steps
    assert (step.op.tile_size, step.op.num_columns) == (4, 2)
    with iron.use_device("npu1"):
        (step,) = graph.record(x=(16,)).steps
    assert (step.op.tile_size, step.op.num_columns) == (16, 1)
    graph.profile = str(tmp_path)
    assert graph.record(x=(16,)).steps[0].op.tile_size == 4


def test_a_profile_directory_without_the_device_raises(tmp_path, catalog):
    scale_profile(tile_size=4).save(tmp_path / "npu2.json")
    graph = One()
    graph.profile = tmp_path
    with pytest.raises(FileNotFoundError, match="no profile for device 'npu1'"):
        graph.reference(bf16(16), dev="npu1")


def test_reference_records_under_the_profile():
    """The reference constructs the same operators the device would run."""
    tiles = []

    class Spy(iron.Graph):
        def body(self, x):
            out = Scale.step(x)
            tiles.append(context.graph_recorder.get().steps[-1].op.tile_size)
            return out

    graph = Spy()
    graph.profile = scale_profile(tile_size=4)
    graph.reference(bf16(16))
    assert tiles == [4]
