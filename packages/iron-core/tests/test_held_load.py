"""Graph.load_state_dict: binding a graph's params from a tree of tensors.

Flat or nested trees, under a path prefix, cast to each param's dtype; one
error names every missing, extra, wrong-shape and wrong-kind path, and a
param tied at two paths, or a graph held twice, binds once.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from held_for_tests import Leaf, Norm, bf16, f32
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from ml_dtypes import bfloat16
from operators_for_tests import Mul

import iron
from iron.core.held import _Param, _Unbound, held_dtype

# -- load_state_dict ------------------------------------------------------------------


class Block(iron.Graph):
    def __init__(self):
        self.w = iron.param(8)
        self.b = iron.param(8)

    def body(self, x):
        return Mul.step(Mul.step(x, self.w), self.b)


class Model(iron.Graph):
    def __init__(self, layers: int = 2):
        self.embed = iron.param(4, 8)
        self.layers = [Block() for _ in range(layers)]
        self.norm = {"scale": iron.param(8)}

    def body(self, x):
        for layer in self.layers:
            x = layer(x)
        return Mul.step(x, self.norm["scale"])


def model_tree(layers: int = 2, seed: int = 0) -> dict[str, np.ndarray]:
    tree = {"embed": f32(4, 8, seed=seed), "norm.scale": f32(8, seed=seed + 1)}
    for i in range(layers):
        tree[f"layers.{i}.w"] = f32(8, seed=seed + 2 + 2 * i)
        tree[f"layers.{i}.b"] = f32(8, seed=seed + 3 + 2 * i)
    return tree


def test_load_state_dict_binds_params_at_any_depth():
    graph, tree = Model(), model_tree()
    graph.load_state_dict(tree)
    for path, x in graph.held().values():
        assert isinstance(x, _Param)
        assert x.dtype == np.dtype(bfloat16)
        np.testing.assert_array_equal(x, tree[path].astype(bfloat16))
    assert graph.layers[1].w.shape == (8,)
    x = bf16(8, seed=9)
    expected = x
    for i in range(2):
        for name in ("w", "b"):
            w = tree[f"layers.{i}.{name}"].astype(bfloat16).astype(np.float32)
            expected = (expected.astype(np.float32) * w).astype(bfloat16)
    scale = tree["norm.scale"].astype(bfloat16).astype(np.float32)
    expected = (expected.astype(np.float32) * scale).astype(bfloat16)
    np.testing.assert_array_equal(graph.reference(x), expected)


def test_load_state_dict_takes_a_nested_tree():
    flat = model_tree()
    tree = {
        "embed": flat["embed"],
        "layers": [
            {"w": flat["layers.0.w"], "b": flat["layers.0.b"]},
            {"w": flat["layers.1.w"], "b": flat["layers.1.b"]},
        ],
        "norm": {"scale": flat["norm.scale"]},
    }
    graph = Model()
    graph.load_state_dict(tree)
    np.testing.assert_array_equal(
        graph.layers[1].b, flat["layers.1.b"].astype(bfloat16)
    )


def test_load_state_dict_under_a_path_ignores_tensors_outside_it():
    tree = {f"model.{k}": v for k, v in model_tree().items()}
    tree["lm_head.weight"] = f32(4, 8)
    graph = Model()
    graph.load_state_dict(tree, path="model.")
    np.testing.assert_array_equal(graph.embed, tree["model.embed"].astype(bfloat16))


def test_a_path_without_its_trailing_dot_raises():
    with pytest.raises(ValueError) as info:
        Model().load_state_dict(model_tree(), path="model")
    assert str(info.value) == "Model: load_state_dict's path 'model' must end in a dot"


def test_one_error_names_every_missing_extra_wrong_shape_and_wrong_kind_path():
    tree = model_tree()
    del tree["layers.1.b"]
    tree["layers.2.w"] = f32(8)
    tree["embed"] = f32(4, 4)
    tree["norm.scale"] = np.arange(8, dtype=np.int32)
    tree["layers.0.w"] = f32(9)
    graph = Model()
    with pytest.raises(ValueError) as info:
        graph.load_state_dict(tree)
    assert str(info.value) == (
        "Model: cannot load: missing layers.1.b; extra layers.2.w; wrong shape "
        "embed (4, 4), not (4, 8), layers.0.w (9,), not (8,); wrong kind "
        "norm.scale int32, not bfloat16"
    )
    # Nothing is bound: the graph loads once the tree is right.
    assert isinstance(graph.embed, _Unbound)
    assert isinstance(graph.layers[0].w, _Unbound)
    graph.load_state_dict(model_tree())
    assert isinstance(graph.embed, _Param)


def test_a_second_load_raises_already_loaded():
    graph = Model()
    graph.load_state_dict(model_tree())
    with pytest.raises(ValueError, match=r"^Model: already loaded$"):
        graph.load_state_dict(model_tree(seed=5))


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint16, np.bool_])
def test_a_non_float_tensor_into_a_float_param_is_the_wrong_kind(dtype):
    tree = model_tree()
    tree["embed"] = np.zeros((4, 8), dtype)
    with pytest.raises(ValueError, match=r"wrong kind embed .*, not bfloat16"):
        Model().load_state_dict(tree)


def test_a_float_tensor_into_an_int_param_is_the_wrong_kind():
    class Ids(iron.Graph):
        def __init__(self):
            self.ids = iron.param(3, dtype=np.int32)

        def body(self, x):
            return x

    with pytest.raises(ValueError, match="wrong kind ids float32, not int32"):
        Ids().load_state_dict({"ids": f32(3)})
    graph = Ids()
    graph.load_state_dict({"ids": np.array([1, 2, 3], np.uint8)})
    assert graph.ids.dtype == np.dtype(np.int32)
    np.testing.assert_array_equal(graph.ids, [1, 2, 3])


@settings(max_examples=50, deadline=None)
@given(
    tensor=hnp.arrays(
        np.float32,
        (4, 8),
        elements=st.floats(-(2.0**100), 2.0**100, width=32),
    )
)
def test_a_float32_tensor_into_a_bf16_param_casts_as_copy_does(tensor):
    graph = Model()
    tree = model_tree()
    tree["embed"] = tensor
    graph.load_state_dict(tree)
    assert graph.embed.dtype == np.dtype(bfloat16)
    np.testing.assert_array_equal(
        graph.embed.view(np.uint16), tensor.astype(bfloat16).view(np.uint16)
    )


def test_a_float64_tensor_casts_too():
    graph, tree = Model(), model_tree()
    tree["embed"] = tree["embed"].astype(np.float64)
    graph.load_state_dict(tree)
    np.testing.assert_array_equal(graph.embed, tree["embed"].astype(bfloat16))


def test_a_read_only_wider_tensor_is_held_as_it_is_and_narrowed_when_read():
    """A memory-mapped float32 checkpoint tensor (read-only) is not copied to
    bf16 at load: held as it is, resident as bf16, each reader converts."""
    graph, tree = Model(), model_tree()
    eager, same = Model(), model_tree()
    for t in tree.values():
        t.flags.writeable = False
    graph.load_state_dict(tree)
    eager.load_state_dict(same)
    assert np.shares_memory(graph.embed, tree["embed"])
    assert held_dtype(graph.embed) == np.dtype(bfloat16)
    assert held_dtype(eager.embed) == np.dtype(bfloat16) == eager.embed.dtype
    recording = graph.record(x=(8,))
    assert {h.dtype for _, h in recording.weights.values()} == {np.dtype(bfloat16)}
    x = bf16(8, seed=3)
    np.testing.assert_array_equal(graph.reference(x), eager.reference(x))


def test_a_narrowed_param_bound_above_binds_once_in_a_nested_graph():
    class Outer(iron.Graph):
        def __init__(self):
            self.inner = Block()
            self.alias = self.inner.w

        def body(self, x):
            return self.inner(x)

    w, b = f32(8, seed=1), f32(8, seed=2)
    w.flags.writeable = b.flags.writeable = False
    graph = Outer()
    graph.load_state_dict({"inner.w": w, "inner.b": b, "alias": w})
    assert graph.alias is graph.inner.w


def test_a_param_in_a_tuple_cannot_be_rebound():
    class InTuple(iron.Graph):
        def __init__(self):
            self.pair = (iron.param(8), iron.param(8))

        def body(self, x):
            return x

    with pytest.raises(TypeError) as info:
        InTuple().load_state_dict({"pair.0": f32(8), "pair.1": f32(8)})
    assert str(info.value) == (
        "InTuple: pair.0 is in a tuple or a frozen dataclass, which "
        "load_state_dict cannot rebind; hold it in a list"
    )


def test_a_param_in_a_frozen_dataclass_cannot_be_rebound():
    @dataclasses.dataclass(frozen=True)
    class Frozen:
        w: np.ndarray

    class InFrozen(iron.Graph):
        def __init__(self):
            self.block = Frozen(iron.param(8))

        def body(self, x):
            return x

    with pytest.raises(TypeError, match=r"model\.block\.w is in a tuple or a frozen"):
        InFrozen().load_state_dict({"model.block.w": f32(8)}, path="model.")


def test_a_param_in_a_dataclass_is_rebound():
    class InData(iron.Graph):
        def __init__(self):
            self.norm = Norm(iron.param(8))

        def body(self, x):
            return x

    graph = InData()
    graph.load_state_dict({"norm.scale": f32(8)})
    assert isinstance(graph.norm.scale, _Param)


class Tied(iron.Graph):
    """``embed`` is also ``head``: one param at two paths."""

    def __init__(self):
        self.embed = iron.param(4, 8)
        self.head = self.embed

    def body(self, x):
        return x


@pytest.mark.parametrize("paths", [("embed", "head"), ("embed",), ("head",)])
def test_a_tied_param_binds_once_from_any_of_its_paths(paths):
    tensor = f32(4, 8)
    graph = Tied()
    graph.load_state_dict({p: tensor for p in paths})
    assert graph.embed is graph.head
    assert isinstance(graph.embed, _Param)
    np.testing.assert_array_equal(graph.embed, tensor.astype(bfloat16))
    assert list(graph.held().values()) == [("embed", graph.embed)]


def test_a_tied_param_given_at_no_path_is_missing():
    with pytest.raises(ValueError, match=r"cannot load: missing embed$"):
        Tied().load_state_dict({})


def test_every_path_of_a_tied_param_given_is_checked():
    with pytest.raises(ValueError, match=r"wrong shape head \(8, 4\), not \(4, 8\)"):
        Tied().load_state_dict({"embed": f32(4, 8), "head": f32(8, 4)})


def test_a_param_tied_into_a_nested_graph_binds_once():
    class Outer(iron.Graph):
        def __init__(self):
            self.embed = iron.param(8)
            self.inner = Leaf()
            self.inner.w = self.embed

        def body(self, x):
            return self.inner(Mul.step(x, self.embed))

    for tree in ({"embed": f32(8), "inner.w": f32(8)}, {"inner.w": f32(8)}):
        graph = Outer()
        graph.load_state_dict(tree)
        assert graph.inner.w is graph.embed
        assert len(graph.held()) == 1
        assert len(graph.record(x=(8,)).weights) == 1


def test_a_shared_container_binds_once_and_excuses_its_second_path():
    class SharedList(iron.Graph):
        def __init__(self):
            self.a = [iron.param(8)]
            self.b = self.a

        def body(self, x):
            return Mul.step(x, self.b[0])

    graph = SharedList()
    graph.load_state_dict({"a.0": f32(8), "b.0": f32(8)})
    assert graph.a is graph.b and isinstance(graph.a[0], _Param)


def test_a_graph_held_at_two_paths_loads_once():
    class Twice(iron.Graph):
        def __init__(self):
            self.first = Block()
            self.again = self.first

        def body(self, x):
            return self.again(self.first(x))

    graph = Twice()
    tree = {"first.w": f32(8), "first.b": f32(8), "again.w": f32(8), "again.b": f32(8)}
    graph.load_state_dict(tree)
    np.testing.assert_array_equal(graph.again.w, tree["first.w"].astype(bfloat16))
    assert len(graph.held()) == 2


def test_a_nested_graph_loaded_on_its_own_is_left_alone():
    class Outer(iron.Graph):
        def __init__(self, inner):
            self.inner = inner
            self.scale = iron.param(8)

        def body(self, x):
            return Mul.step(self.inner(x), self.scale)

    inner = Block()
    inner.load_state_dict({"w": f32(8), "b": f32(8)})
    w = inner.w
    graph = Outer(inner)
    graph.load_state_dict({"scale": f32(8)})
    assert graph.inner.w is w
    assert len(graph.held()) == 3


def test_a_graph_may_load_from_another_graph():
    source = Model()
    source.load_state_dict(model_tree())
    target = Model()
    target.load_state_dict(source)
    assert isinstance(target.embed, _Param)
    np.testing.assert_array_equal(target.embed, source.embed)
