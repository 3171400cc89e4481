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

#: The issue's catalog table: every operator, and one shape it runs on both devices.
EXAMPLES = {
    "ElementwiseAdd": {"size": 2048},
    "ElementwiseMul": {"size": 2048},
    "AXPY": {"size": 2048, "scalar_factor": 1.0},
    "ReLU": {"size": 2048},
    "SiLU": {"size": 2048},
    "GELU": {"size": 2048},
    "Sigmoid": {"size": 2048},
    "Tanh": {"size": 2048},
    "LeakyReLU": {"size": 2048, "alpha": 0.01},
    "Clamp": {"size": 2048, "low": -1.0, "high": 1.0},
    "SiLUMul": {"size": 2048},
    "RMSNorm": {"rows": 8, "cols": 2048},
    "LayerNorm": {"rows": 8, "cols": 2048},
    "Softmax": {"rows": 8, "cols": 256},
    "RoPE": {"rows": 8, "heads": 8, "head_dim": 64},
    "GEMV": {"M": 2048, "K": 2048},
    "GEMM": {"M": 64, "K": 2048, "N": 2048},
    "DecodeAttention": {
        "heads": 32,
        "kv_heads": 8,
        "head_dim": 64,
        "max_len": 1024,
        "length": 100,
    },
    "CausalAttention": {
        "heads": 32,
        "kv_heads": 8,
        "head_dim": 64,
        "max_len": 1024,
        "rows": 16,
    },
    "Copy": {"shape": (64, 64)},
    "Transpose": {"rows": 64, "cols": 64},
    "Repeat": {"rows": 8, "repeat": 4, "row_shape": (64,)},
    "Dequant": {"N": 4096},
    "Sample": {"vocab": 4096},
}


def test_catalog_holds_the_issues_table_by_name():
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


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_catalog_entries_are_complete_operators(name):
    cls = CATALOG[name]
    assert cls.__name__ == name
    assert issubclass(cls, Operator)
    assert isinstance(cls.declaration, Declaration)
    for hook in ("reference", "tolerance", "cost", "resolve", "check"):
        assert getattr(cls, hook) is not getattr(Operator, hook), hook
    for dev in (NPU1, NPU2):
        op = cls(**EXAMPLES[name]).resolved(dev)
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
