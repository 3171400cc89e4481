"""Tests for iron.operators.CATALOG and the entry point iron-core finds it through."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

import iron
import iron.operators
from iron.core.declare import Declaration
from iron.core.device import NPU1, NPU2
from iron.core.operator import Cost, Operator
from iron.core.profile import Profile
from iron.core.tolerance import Tolerance
from iron.operators import AXPY, CATALOG, ReLU


def test_catalog_holds_axpy_and_relu_by_name():
    assert CATALOG == {"AXPY": AXPY, "ReLU": ReLU}
    assert CATALOG["AXPY"] is AXPY and CATALOG["ReLU"] is ReLU


def test_public_names():
    assert set(iron.operators.__all__) == {"AXPY", "CATALOG", "ReLU", "__version__"}
    assert iron.operators.__version__ == "0.1.0"


def test_entry_point_loads_the_catalog():
    eps = list(entry_points(group="iron.operators"))
    ours = [ep for ep in eps if ep.value == "iron.operators:CATALOG"]
    assert len(ours) == 1
    assert ours[0].name == "catalog"
    assert ours[0].load() is CATALOG


def test_core_plugins_catalog_returns_it(fresh_catalog):
    found = fresh_catalog()
    assert found == CATALOG
    for name, cls in CATALOG.items():
        assert found[name] is cls


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_catalog_entries_are_complete_operators(name):
    cls = CATALOG[name]
    assert cls.__name__ == name
    assert issubclass(cls, Operator)
    assert isinstance(cls.declaration, Declaration)
    for hook in ("reference", "tolerance", "cost", "resolve", "check"):
        assert getattr(cls, hook) is not getattr(Operator, hook), hook
    fields = {"scalar_factor": 1.0} if "scalar_factor" in cls.declaration.params else {}
    for dev in (NPU1, NPU2):
        op = cls(size=2048, **fields).resolved(dev)
        assert op.open_tunables() == ()
        assert isinstance(op.tolerance(), Tolerance)
        assert op.tolerance().note
        assert isinstance(op.cost(dev), Cost)


def test_profile_round_trips_through_the_catalog(tmp_path, fresh_catalog):
    profile = iron.Profile()
    profile.add(AXPY, size=2048, tile_size=1024, num_aie_columns=2)
    profile.add(ReLU, tile_size=256)
    path = tmp_path / "npu2.json"
    profile.save(path)
    text = path.read_text()
    assert '"operator": "AXPY"' in text and '"operator": "ReLU"' in text
    loaded = Profile.load(path)
    assert loaded.tunables_for(AXPY, {"size": 2048}) == {
        "tile_size": 1024,
        "num_aie_columns": 2,
    }
    assert loaded.tunables_for(ReLU, {"size": 4096}) == {"tile_size": 256}
    op = loaded.make(AXPY, size=2048, scalar_factor=1.5)
    assert (op.tile_size, op.num_aie_columns, op.pinned) == (1024, 2, frozenset())
