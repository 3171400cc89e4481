"""What a graph holds: params (held, load_state_dict), states and weights."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from ml_dtypes import bfloat16
from ops_for_tests import ArgMax, Copy, Copy2D, Mul, Scale

import iron
from iron.core.held import State, Weight, _Param, _Unbound, walk


def f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def bf16(*shape: int, seed: int = 0) -> np.ndarray:
    return f32(*shape, seed=seed).astype(bfloat16)


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


@dataclasses.dataclass
class Norm:
    scale: np.ndarray


class Leaf(iron.Graph):
    def __init__(self):
        self.w = iron.param(bf16(8))

    def body(self, x):
        return Mul.step(x, self.w)


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


# -- state() -------------------------------------------------------------------------


def test_a_state_is_zeros_on_the_host_until_written():
    s = iron.state(8)
    assert isinstance(s, State)
    assert (s.shape, s.dtype, s.name) == ((8,), np.dtype(bfloat16), None)
    np.testing.assert_array_equal(s.host, np.zeros(8, bfloat16))
    s = iron.state((2, 3), np.int32, name="kv")
    assert (s.shape, s.dtype, s.name) == ((2, 3), np.dtype(np.int32), "kv")
    assert repr(s) == "State 'kv'([2, 3], int32)"
    assert repr(iron.state(8)) == "State([8], bfloat16)"
    assert iron.state(np.int64(8)).shape == (8,)
    assert iron.state([np.int64(2), 3]).shape == (2, 3)


class Cache(iron.Graph):
    """Writes x into row ``position`` of a state; returns that row, scaled."""

    def __init__(self, rows: int = 4):
        self.cache = iron.state((rows, 8))

    def body(self, x, *, position: iron.Scratchpad[int]):
        row = Copy.step(x, out=self.cache[position])
        return Scale.step(row, factor=2.0)


def test_a_step_writes_a_state_at_a_per_call_position():
    graph = Cache()
    recording = graph.record(x=(8,))
    (copy, _) = recording.steps
    (out,) = copy.outputs
    assert out.buffer.role == "state" and out.name == "cache"
    rows = bf16(4, 8)
    for position in (2, 0, 3):
        out = graph.reference(rows[position], position=position)
        np.testing.assert_array_equal(
            out, (2 * rows[position].astype(np.float32)).astype(bfloat16)
        )
    expected = rows.copy()
    expected[1] = 0
    np.testing.assert_array_equal(graph.cache.host, expected)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 16), data=st.data())
def test_a_state_position_writes_that_row_or_raises_index_error(rows, data):
    position = data.draw(st.integers(0, rows + 3))
    graph, x = Cache(rows), bf16(8, seed=rows)
    if position >= rows:
        with pytest.raises(IndexError, match="outside"):
            graph.reference(x, position=position)
        np.testing.assert_array_equal(graph.cache.host, np.zeros((rows, 8), bfloat16))
        return
    graph.reference(x, position=position)
    np.testing.assert_array_equal(graph.cache.host[position], x)
    assert not np.delete(graph.cache.host, position, axis=0).any()


def test_out_into_a_non_state_raises_value_error():
    class IntoInput(iron.Graph):
        def body(self, x, y):
            return Copy.step(x, out=y)

    with pytest.raises(ValueError) as info:
        IntoInput().record(x=(8,), y=(8,))
    assert str(info.value) == (
        "Copy.step(out=y[8] bf16): a step writes into a state or a view of one; "
        "other buffers are written by the step that makes them"
    )


def test_out_into_a_weight_raises_value_error():
    class IntoWeight(iron.Graph):
        def __init__(self):
            self.w = iron.param(bf16(8))

        def body(self, x):
            return Copy.step(x, out=self.w)

    with pytest.raises(ValueError, match="a step writes into a state or a view of one"):
        IntoWeight().record(x=(8,))


def test_out_of_another_shape_raises_value_error():
    class Short(iron.Graph):
        def __init__(self):
            self.cache = iron.state((4, 8))

        def body(self, x, *, position: iron.Scratchpad[int]):
            return Copy.step(x, out=self.cache[position])

    with pytest.raises(ValueError, match=r"its out is \[4\] bfloat16"):
        Short().record(x=(4,))


def test_out_gives_one_handle_per_output():
    class Two(iron.Graph):
        def __init__(self):
            self.a, self.b = iron.state(8), iron.state(8)

        def body(self, x):
            return Copy.step(x, out=(self.a, self.b))

    with pytest.raises(TypeError, match=r"Copy\.step writes 1 outputs; out= gives 2"):
        Two().record(x=(8,))


def test_a_whole_state_is_written_and_read_across_calls():
    class Accumulate(iron.Graph):
        def __init__(self):
            self.total = iron.state(8)

        def body(self, x):
            return Copy.step(Mul.step(self.total, x), out=self.total)

    graph = Accumulate()
    graph.total.host[...] = 1
    x = np.full(8, 2, bfloat16)
    for k in range(1, 4):
        np.testing.assert_array_equal(graph.reference(x), np.full(8, 2**k, bfloat16))


def test_a_state_returned_as_an_output_is_a_copy():
    class Whole(iron.Graph):
        def __init__(self):
            self.st = iron.state(8)

        def body(self, x):
            Copy.step(x, out=self.st)
            return Copy.step(self.st), self.st[:]

    graph, x = Whole(), bf16(8)
    copied, state = graph.reference(x)
    np.testing.assert_array_equal(copied, x)
    np.testing.assert_array_equal(state, x)
    assert not np.shares_memory(state, graph.st.host)
    graph.reference(np.zeros(8, bfloat16))
    np.testing.assert_array_equal(state, x)


def test_indexing_a_state_outside_a_body_raises_type_error():
    with pytest.raises(TypeError, match="only while a graph's body is recorded"):
        Cache().cache[0]


# -- weight(table)[ids] ----------------------------------------------------------------


def test_a_weight_is_a_table():
    table = bf16(4, 8)
    w = iron.weight(table)
    assert isinstance(w, Weight)
    assert w.array is table
    assert (w.shape, w.dtype) == ((4, 8), np.dtype(bfloat16))
    assert repr(w) == "Weight([4, 8], bfloat16)"


class Lookup(iron.Graph):
    def __init__(self, ids=None):
        self.table = iron.weight(np.arange(32).reshape(4, 8).astype(bfloat16))
        self._ids = ids  # private: a held array would be refused

    def body(self, x):
        ids = ArgMax.step(x) if self._ids is None else self._ids
        return Copy2D.step(self.table[ids])


@pytest.mark.parametrize("ids", [[2, 0, 2], np.array([2, 0, 2], np.int64)])
def test_a_weight_gathers_rows_by_fixed_ids(ids):
    graph = Lookup(ids)
    out = graph.reference(bf16(8))
    np.testing.assert_array_equal(out, graph.table.array[[2, 0, 2]])
    assert graph.record(x=(8,)).addresses == {}


def test_a_weight_gathers_rows_by_an_int32_handle_a_step_made():
    graph = Lookup()
    x = np.zeros(8, bfloat16)
    for token in (3, 1):
        x[:] = 0
        x[token] = 1
        np.testing.assert_array_equal(graph.reference(x), graph.table.array[[token]])
    recording = graph.record(x=(8,))
    assert recording.addresses == {"argmax0": ("table", "argmax0", 4)}


def test_fixed_ids_outside_the_table_raise_index_error():
    with pytest.raises(IndexError, match=r"row ids \[4\] outside 4 rows"):
        Lookup([4]).record(x=(8,))
    with pytest.raises(IndexError, match="row ids must be 1-D integers"):
        Lookup(np.array([[0]])).record(x=(8,))


def test_rows_are_gathered_by_an_integer_handle_only():
    class ByFloat(iron.Graph):
        def __init__(self):
            self.table = iron.weight(bf16(4, 8))

        def body(self, x):
            return Copy2D.step(self.table[x])

    with pytest.raises(TypeError, match="gathered by a 1-D integer handle"):
        ByFloat().record(x=(2,))


def test_a_gather_takes_whole_rows():
    class Further(iron.Graph):
        def __init__(self):
            self.table = iron.weight(bf16(4, 8))

        def body(self, x):
            return Copy2D.step(self.table[[0, 1], :4])

    with pytest.raises(IndexError, match="a gather picks whole leading-axis rows"):
        Further().record(x=(8,))


def test_a_weight_the_graph_does_not_hold_is_refused():
    table = iron.weight(bf16(4, 8))

    class Closure(iron.Graph):
        def body(self, x):
            return Copy2D.step(table[[0]])

    with pytest.raises(TypeError, match="is a Weight the graph does not hold"):
        Closure().record(x=(8,))


def test_indexing_a_weight_outside_a_body_raises_type_error():
    with pytest.raises(TypeError, match="only while a graph's body is recorded"):
        Lookup().table[[0]]


# -- a held param indexed in a body; out= writes only the bounded rows -------------


class EmbedRow(iron.Graph):
    """``self.table[token]``: a held param indexed by a per-call value."""

    def __init__(self):
        self.table = iron.param(
            np.arange(32, dtype=np.float32).reshape(8, 4).astype(bfloat16)
        )

    def body(self, *, token: iron.Scratchpad[int]):
        return Copy.step(self.table[token])


def test_a_held_param_indexed_in_a_body_is_a_view_of_its_resident_handle():
    graph = EmbedRow()
    recording = graph.record()
    (step,) = recording.steps
    assert step.inputs[0].name == "table" and step.inputs[0].buffer.role == "weight"
    for token in (0, 5, 7):
        np.testing.assert_array_equal(graph.reference(token=token), graph.table[token])
    # outside a body it indexes as the array it is
    assert isinstance(graph.table[1], np.ndarray)
    with pytest.raises(IndexError, match="outside"):
        graph.reference(token=8)


class WriteRows(iron.Graph):
    """Writes the first n rows of x into a state; the rest keep their values."""

    def __init__(self):
        self.store = iron.state((4, 3), bfloat16)

    def body(self, x, *, n: iron.Scratchpad[int]):
        Copy2D.step(x[:n], out=self.store[:, :])
        return Copy2D.step(self.store[:, :])


def test_out_takes_the_bound_of_the_rows_the_step_writes():
    graph = WriteRows()
    recording = graph.record(x=(4, 3))
    written = recording.steps[0].outputs[0]
    assert str(written.valid[0]) == "n"
    graph.store.host[:] = -1
    out = graph.reference(np.ones((4, 3), bfloat16), n=2)
    np.testing.assert_array_equal(out[:2], 1)
    np.testing.assert_array_equal(out[2:], -1)  # rows past n untouched
