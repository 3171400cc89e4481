"""Tests for iron.operators.CATALOG and the entry point iron-core finds it through."""

from __future__ import annotations

from importlib.metadata import entry_points

from test_contract import EXAMPLES

import iron
import iron.operators
from iron.core.profile import Profile
from iron.operators import AXPY, CATALOG, ReLU


def test_catalog_holds_the_issues_table_by_name():
    # The contract's EXAMPLES begin with the issue's table: one shape per operator.
    assert sorted(CATALOG) == sorted(EXAMPLES)
    assert CATALOG["AXPY"] is AXPY and CATALOG["ReLU"] is ReLU


def test_public_names():
    assert set(iron.operators.__all__) == {"CATALOG", "__version__", *EXAMPLES}
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
