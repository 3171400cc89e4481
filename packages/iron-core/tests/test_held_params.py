"""iron.param and Graph.held(): the tensors a graph holds, found by path.

A param is declared by shape (unbound zeros) or given an array; held() walks
lists, dicts, dataclasses and nested graphs, refuses bare arrays and
unloaded params, and lists a param tied at two paths once.
"""

from __future__ import annotations

import numpy as np
import pytest
from held_for_tests import Leaf, Norm, bf16
from ml_dtypes import bfloat16
from operators_for_tests import Mul

import iron
from iron.core.held import _Param, _Unbound, walk

# -- param() ---------------------------------------------------------------------


def test_a_param_declared_by_shape_is_unbound_bf16_zeros():
    for p in (iron.param(4, 8), iron.param((4, 8)), iron.param([4, 8])):
        assert isinstance(p, _Unbound)
        assert (p.shape, p.dtype) == ((4, 8), np.dtype(bfloat16))
    p = iron.param(3, dtype=np.int32)
    assert (p.shape, p.dtype) == ((3,), np.dtype(np.int32))


def test_a_param_of_an_array_holds_that_array():
    a = bf16(4, 8)
    p = iron.param(a)
    assert isinstance(p, _Param)
    assert np.shares_memory(p, a)
    np.testing.assert_array_equal(p, a)
    assert iron.param(p) is p


# -- held() ----------------------------------------------------------------------


class Holder(iron.Graph):
    """Holds tensors at every kind of path."""

    def __init__(self):
        self.layers = [Leaf(), Leaf()]
        self.blocks = {"a": iron.param(bf16(8)), "b": [iron.param(bf16(8))]}
        self.norm = Norm(iron.param(bf16(8)))
        self.inner = Leaf()
        self.table = iron.weight(bf16(4, 8))
        self.cache = iron.state((4, 8))
        self.config = {"eps": 1e-5, "name": "holder"}
        self._scratch = np.zeros(3)  # private: not held
        self.eps = np.float32(1e-5)  # a numpy scalar is no array

    def body(self, x):
        return x


def test_held_finds_params_weights_and_states_at_nested_paths():
    graph = Holder()
    held = graph.held()
    paths = {path: x for path, x in held.values()}
    assert set(paths) == {
        "layers.0.w",
        "layers.1.w",
        "blocks.a",
        "blocks.b.0",
        "norm.scale",
        "inner.w",
        "table",
        "cache",
    }
    assert paths["layers.1.w"] is graph.layers[1].w
    assert paths["norm.scale"] is graph.norm.scale
    assert paths["table"] is graph.table and paths["cache"] is graph.cache
    assert all(key == id(x) for key, (_, x) in held.items())


def test_a_bare_array_is_refused():
    class Bare(iron.Graph):
        def __init__(self):
            self.layers = [{"w": np.ones(8)}]

        def body(self, x):
            return x

    with pytest.raises(TypeError) as info:
        Bare().held()
    assert str(info.value) == (
        "Bare: layers.0.w is an array, not a weight: wrap it in iron.param"
    )
    with pytest.raises(TypeError, match="is an array, not a weight"):
        Bare().record(x=(8,))


def test_an_unloaded_param_was_never_loaded():
    class Unloaded(iron.Graph):
        def __init__(self):
            self.inner = {"w": iron.param(8)}

        def body(self, x):
            return Mul.step(x, self.inner["w"])

    with pytest.raises(TypeError, match=r"Unloaded: inner\.w was never loaded"):
        Unloaded().held()
    with pytest.raises(TypeError, match="was never loaded"):
        Unloaded().record(x=(8,))


def test_a_param_shared_at_two_paths_appears_once_at_the_first():
    class Tied(iron.Graph):
        def __init__(self):
            self.embed = iron.param(bf16(8))
            self.head = [self.embed]

        def body(self, x):
            return Mul.step(Mul.step(x, self.embed), self.head[0])

    graph = Tied()
    assert list(graph.held().values()) == [("embed", graph.embed)]
    recording = graph.record(x=(8,))
    assert list(recording.weights) == ["embed"]
    x = bf16(8, seed=1)
    once = (x.astype(np.float32) * graph.embed.astype(np.float32)).astype(bfloat16)
    twice = (once.astype(np.float32) * graph.embed.astype(np.float32)).astype(bfloat16)
    np.testing.assert_array_equal(graph.reference(x), twice)


def test_walk_visits_a_shared_container_once_and_notes_its_second_path():
    common = [iron.param(bf16(8))]
    tree = {"a": common, "b": {"c": common}}
    shared: list[str] = []
    assert [path for path, *_ in walk(tree, shared=shared)] == ["a.0"]
    assert shared == ["b.c"]


def test_walk_can_stop_at_nested_graphs():
    graph = Holder()
    leaves = {path for path, *_ in walk(graph, graphs=False)}
    assert {"layers.0", "layers.1", "inner"} <= leaves
    assert "inner.w" not in leaves
