"""Surprising semantics of recording, pinned so a change to them is deliberate.

A graph's ``body`` runs on handles once per input shape (and device); what
it reads from Python at that moment is frozen into the recording. Per-call
values have no value while it runs, so Python control flow on them fails
loudly, and numpy cannot compute on a handle.
"""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16
from operators_for_tests import Copy, Mul, Scale

import iron
from iron.core.percall import PerCallValueError


def bf16(*shape: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(np.float32).astype(bfloat16)


def scale(x: np.ndarray, factor: float) -> np.ndarray:
    return (np.float32(factor) * x.astype(np.float32)).astype(bfloat16)


class Scaled(iron.Graph):
    """``scalar_factor * x``, counting how often body runs."""

    def __init__(self, scalar_factor: float = 2.0):
        self.scalar_factor = scalar_factor
        self.runs = 0

    def body(self, x):
        self.runs += 1
        return Scale.step(x, factor=self.scalar_factor)


# -- Python values are frozen at record time -----------------------------------------


def test_a_python_value_is_frozen_into_the_cached_reference_recording():
    """Changing ``self.scalar_factor`` after a reference does not change the next.

    The host reference caches its recording by input shape and device, so the
    old factor stays baked in. A new shape records afresh (and sees the new
    value); reassigning ``profile`` (even to the same value) drops the cache.
    A new graph object is the clean way to change a constructor argument.
    """
    graph, x = Scaled(2.0), bf16(8)
    np.testing.assert_array_equal(graph.reference(x), scale(x, 2.0))
    graph.scalar_factor = 3.0
    np.testing.assert_array_equal(graph.reference(x), scale(x, 2.0))  # frozen
    y = bf16(16)
    np.testing.assert_array_equal(graph.reference(y), scale(y, 3.0))  # new shape
    graph.profile = graph.profile
    np.testing.assert_array_equal(graph.reference(x), scale(x, 3.0))  # cache dropped


def test_a_recording_keeps_the_value_it_was_made_with():
    graph = Scaled(2.0)
    recording = graph.record(x=(8,))
    graph.scalar_factor = 5.0
    assert recording.steps[0].op.factor == 2.0
    assert graph.record(x=(8,)).steps[0].op.factor == 5.0


def test_a_rebound_param_is_not_seen_by_a_cached_recording():
    """The recording holds the array object it saw; rebinding the attribute

    after a reference leaves the cached recording on the old array (until a
    new shape or a profile reassignment records again). Writing into the
    array in place is seen, as the reference reads it each call.
    """

    class Weighted(iron.Graph):
        def __init__(self):
            self.w = iron.param(np.full(8, 2, bfloat16))

        def body(self, x):
            return Mul.step(x, self.w)

    graph, x = Weighted(), np.ones(8, bfloat16)
    np.testing.assert_array_equal(graph.reference(x), np.full(8, 2, bfloat16))
    graph.w = iron.param(np.full(8, 3, bfloat16))
    np.testing.assert_array_equal(graph.reference(x), np.full(8, 2, bfloat16))
    graph.profile = None
    np.testing.assert_array_equal(graph.reference(x), np.full(8, 3, bfloat16))
    graph.w[...] = 4
    np.testing.assert_array_equal(graph.reference(x), np.full(8, 4, bfloat16))


def test_a_profile_changed_in_place_is_not_seen_until_reassigned():
    """``graph.profile.add(...)`` after a reference leaves the cached recording."""
    seen = []

    class Spy(iron.Graph):
        def body(self, x):
            from iron.core import context

            out = Scale.step(x)
            seen.append(context.graph_recorder.get().steps[-1].op.tile_size)
            return out

    graph, x = Spy(), bf16(16)
    graph.profile = iron.Profile()
    graph.profile.add(Scale, size=16, tile_size=4)
    graph.reference(x)
    graph.profile.add(Scale, size=16, factor=1.0, tile_size=2)
    graph.reference(x)
    assert seen == [4]
    graph.profile = graph.profile
    graph.reference(x)
    assert seen == [4, 2]


def test_python_control_flow_on_a_constructor_argument_is_decided_once():
    class Branchy(iron.Graph):
        def __init__(self):
            self.double = True

        def body(self, x):
            return Scale.step(x, factor=2.0) if self.double else x

    graph, x = Branchy(), bf16(8)
    np.testing.assert_array_equal(graph.reference(x), scale(x, 2.0))
    graph.double = False
    np.testing.assert_array_equal(graph.reference(x), scale(x, 2.0))


def test_the_reference_records_at_the_dtype_of_the_arrays_given():
    """A float32 (or a list's float64) array is a float32 input, not a bf16 one.

    The reference does not cast to what a step takes: it records the graph
    for the arrays given, so a step taking bf16 refuses the input by name.
    """
    graph = Scaled()
    with pytest.raises(TypeError, match=r"Scale\.x takes bfloat16, got x\[8\] f32"):
        graph.reference(np.zeros(8, np.float32))
    with pytest.raises(TypeError, match=r"Scale\.x takes bfloat16, got x\[8\] float64"):
        graph.reference([0.0] * 8)
    graph.reference(np.zeros(8, bfloat16))


# -- body runs once per shape ----------------------------------------------------------


def test_body_runs_once_per_shape_for_the_reference():
    graph = Scaled()
    for _ in range(3):
        graph.reference(bf16(8))
    assert graph.runs == 1
    graph.reference(bf16(16))
    graph.reference(bf16(16))
    assert graph.runs == 2
    graph.reference(bf16(8))
    assert graph.runs == 2


def test_body_runs_again_for_another_dtype_or_device():
    class Passthrough(iron.Graph):
        def __init__(self):
            self.runs = 0

        def body(self, x):
            self.runs += 1
            return x

    graph = Passthrough()
    graph.reference(np.zeros(8, bfloat16))
    graph.reference(np.zeros(8, np.float32))
    assert graph.runs == 2
    graph.reference(np.zeros(8, bfloat16), dev="npu1")
    assert graph.runs == 3


def test_body_does_not_run_again_for_other_per_call_values():
    class Head(iron.Graph):
        def __init__(self):
            self.runs = 0

        def body(self, x, *, n: iron.Scratchpad[int]):
            self.runs += 1
            return Scale.step(x[:n])

    graph, x = Head(), bf16(8)
    for n in range(9):
        assert graph.reference(x, n=n).shape == (n,)
    assert graph.runs == 1


def test_record_runs_body_every_time():
    graph = Scaled()
    graph.record(x=(8,))
    graph.record(x=(8,))
    assert graph.runs == 2


def test_a_state_outlives_reference_calls():
    """The host copy of a state is the graph's, kept across calls (and tests)."""

    class Counter(iron.Graph):
        def __init__(self):
            self.count = iron.state(8)

        def body(self, x):
            return Copy.step(Mul.step(self.count, x), out=self.count)

    graph = Counter()
    assert not graph.reference(np.full(8, 2, bfloat16)).any()  # zeros at first
    graph.count.host[...] = 1
    graph.reference(np.full(8, 2, bfloat16))
    np.testing.assert_array_equal(graph.count.host, np.full(8, 2, bfloat16))
    graph.count.reset()
    assert not graph.count.host.any()


# -- per-call values have no value while recorded ---------------------------------------


@pytest.mark.parametrize(
    "use",
    [
        lambda p: bool(p),
        lambda p: 1 if p else 0,
        lambda p: p > 0,
        lambda p: p == 0,
        lambda p: int(p),
        lambda p: range(p),
        lambda p: [0, 1][p],
        lambda p: float(p),
        lambda p: p * p,
    ],
    ids=["bool", "if", "gt", "eq-int", "int", "range", "index", "float", "product"],
)
def test_a_per_call_value_refuses_python_control_flow(use):
    class Branch(iron.Graph):
        def body(self, x, *, position: iron.Scratchpad[int]):
            use(position)
            return x

    with pytest.raises(TypeError) as info:
        Branch().record(x=(8,))
    if not isinstance(info.value, PerCallValueError):
        assert "combines with Python ints only" in str(info.value)


def test_if_position_names_the_value_and_the_fix():
    class Branch(iron.Graph):
        def body(self, x, *, position: iron.Scratchpad[int]):
            if position:
                return Scale.step(x)
            return x

    with pytest.raises(PerCallValueError) as info:
        Branch().reference(bf16(8), position=1)
    message = str(info.value)
    assert message.startswith("position is computed per call")
    assert "cannot be used as a bool (an if, while, and/or)" in message
    assert "use it in a view (x[:n], x[i])" in message


def test_a_per_call_expression_refuses_bool_too():
    class Branch(iron.Graph):
        def body(self, x, *, position: iron.Carried[int]):
            nxt = position + 1
            if nxt:
                pass
            return x, iron.carry(position=nxt)

    with pytest.raises(PerCallValueError, match=r"^position \+ 1 is computed per call"):
        Branch().record(x=(8,))


# -- a handle is no array ------------------------------------------------------------------


@pytest.mark.parametrize(
    "use",
    [np.asarray, np.exp, lambda h: np.add(h, 1), lambda h: np.array(h, np.float32)],
    ids=["asarray", "exp", "add", "array"],
)
def test_numpy_on_a_handle_raises_type_error(use):
    class Numpy(iron.Graph):
        def body(self, x):
            return use(x)

    with pytest.raises(TypeError, match="numpy cannot compute on it while body"):
        Numpy().record(x=(8,))


def test_a_handle_cannot_decide_an_if():
    class Branch(iron.Graph):
        def body(self, x):
            if Scale.step(x):
                return x
            return x

    with pytest.raises(TypeError, match="cannot decide an if or while"):
        Branch().record(x=(8,))


def test_python_arithmetic_on_a_handle_raises_type_error():
    class Arithmetic(iron.Graph):
        def body(self, x):
            return x * 2

    with pytest.raises(TypeError):
        Arithmetic().record(x=(8,))


def test_a_strided_view_given_to_a_non_copy_operator_is_refused():
    """Only data movers read strided or gathered views; others take contiguous runs."""
    from iron.core.recorder import ViewOperandError

    class Strides(iron.Graph):
        def body(self, x):
            return Scale.step(x[::2])

    with pytest.raises(
        ViewOperandError, match=r"Scale\.x is .* strided view: only a data mover"
    ):
        Strides().record(x=(16,))

    class Slices(iron.Graph):
        def body(self, x):
            return Scale.step(x[4:12])  # a contiguous slice is no view

    assert Slices().record(x=(16,)).steps[0].inputs[0].shape == (8,)
