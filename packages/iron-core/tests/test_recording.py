"""Recording: its fields, its printed table (golden), and running it on the host."""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16
from operators_for_tests import ArgMax, Copy, Copy2D, MatVec, Mul, Scale

import iron
from iron.core.recording import HostStep, Limit, Step


def bf16(*shape: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(np.float32).astype(bfloat16)


def scale(x: np.ndarray, factor: float) -> np.ndarray:
    return (np.float32(factor) * x.astype(np.float32)).astype(bfloat16)


class ScaleThenMul(iron.Graph):
    """``2 * x * y`` in two steps."""

    def body(self, x, y):
        return Mul.step(Scale.step(x, factor=2.0), y)


def record_two_steps() -> iron.Recording:
    return ScaleThenMul().record(x=(16,), y=(16,))


def show(*args) -> None:
    """A host step (named, so the printed table is stable)."""


class Everything(iron.Graph):
    """Values, weights, a state, a gather by ids, a host step and a carry."""

    def __init__(self):
        self.w = iron.param(np.ones((4, 8), bfloat16))
        self.table = iron.weight(np.arange(32).reshape(4, 8).astype(bfloat16))
        self.cache = iron.state((4, 8))

    def body(self, x, w, *, token: iron.Carried[int], n: iron.Scratchpad[int] = 2):
        t = ArgMax.step(x[:n])
        rows = Copy2D.step(self.table[t])
        a = Scale.step(x[:n], factor=2.0)
        iron.on_host(show, a, writes=self.cache)
        m = MatVec.step(self.w, x)
        return m, a, rows, x[1:3], iron.carry(token=t)


# -- printing ------------------------------------------------------------------


GOLDEN_TWO_STEPS = """\
Recording ScaleThenMul: 2 steps
  inputs   x[16] bf16, y[16] bf16
  #  operator                                                 reads      writes
  0  Scale(size=16, factor=2.0, tile_size=16, num_columns=8)  x          scale0
  1  Mul(size=16)                                             scale0, y  mul1
  outputs  mul1[16] bf16"""


def test_a_two_step_recording_prints_a_stable_table():
    assert str(record_two_steps()) == GOLDEN_TWO_STEPS
    assert str(record_two_steps()) == str(record_two_steps())


GOLDEN_EVERYTHING = """\
Recording Everything: 4 steps
  inputs   x[8] bf16, w[2] bf16
  values   token (carried), n (scratchpad, default 2)
  weight   table[4, 8] bf16
  weight   w.1[4, 8] bf16 <- w
  state    cache[4, 8] bf16
  #     operator                                               reads                      writes
  0     ArgMax(size=8)                                         x[8 (valid n)] dense       argmax0
  1     Copy2D(rows=1, cols=8)                                 table[1, 8] gather         copy2d1
  2     Scale(size=8, factor=2.0, tile_size=8, num_columns=8)  x[8 (valid n)] dense       scale2[8 (valid n)] dense
  host  on_host show                                           scale2[8 (valid n)] dense  cache
  3     MatVec(M=4, K=8)                                       w.1, x                     matvec3
  outputs  matvec3[4] bf16, scale2[8 (valid n)] bf16 dense, copy2d1[1, 8] bf16, x[2] bf16 dense
  carry    token = argmax0"""


def test_a_recording_prints_values_residents_host_steps_and_carry():
    """A weight whose path is taken (by the input ``w``) shows ``<- path``."""
    assert str(Everything().record(x=(8,), w=(2,))) == GOLDEN_EVERYTHING


def test_a_host_step_after_the_last_step_prints_last():
    class Tail(iron.Graph):
        def __init__(self):
            self.st = iron.state(8)

        def body(self, x):
            a = Scale.step(x)
            iron.on_host(show, a, writes=self.st)
            return a

    lines = str(Tail().record(x=(8,))).splitlines()
    assert lines[-2].split() == ["host", "on_host", "show", "scale0", "st"]
    assert lines[-1] == "  outputs  scale0[8] bf16"


def test_an_empty_body_prints():
    class Empty(iron.Graph):
        def body(self):
            return None

    assert str(Empty().record()) == (
        "Recording Empty: 0 steps\n"
        "  inputs   -\n"
        "  #  operator  reads  writes\n"
        "  outputs  -"
    )


class Cache(iron.Graph):
    """Writes x into row ``position`` of a state; returns the state's rows so far."""

    def __init__(self):
        self.cache = iron.state((4, 8))

    def body(self, x, *, position: iron.Scratchpad[int]):
        Copy.step(x, out=self.cache[position])
        return Copy2D.step(self.cache[: position + 1])


def test_a_recording_writing_a_state_at_a_position_prints():
    """A view's per-call offset is not shown (Handle's repr shows shape and bounds)."""
    assert str(Cache().record(x=(8,))) == (
        "Recording Cache: 2 steps\n"
        "  inputs   x[8] bf16\n"
        "  values   position (scratchpad)\n"
        "  state    cache[4, 8] bf16\n"
        "  #  operator                reads                                   writes\n"
        "  0  Copy(size=8)            x                                       "
        "cache[8] dense\n"
        "  1  Copy2D(rows=4, cols=8)  cache[4 (valid position + 1), 8] dense  "
        "copy2d1[4 (valid position + 1), 8] dense\n"
        "  outputs  copy2d1[4 (valid position + 1), 8] bf16 dense"
    )


def test_repr_is_one_line():
    assert repr(record_two_steps()) == (
        "<Recording ScaleThenMul: 2 steps, 2 inputs, 1 outputs>"
    )


# -- fields -----------------------------------------------------------------------


def test_steps_hold_the_operator_and_the_handles_read_and_written():
    recording = record_two_steps()
    first, second = recording.steps
    assert isinstance(first, Step)
    assert (first.index, second.index) == (0, 1)
    assert type(first.op) is Scale and type(second.op) is Mul
    assert first.op.factor == 2.0 and first.op.size == 16
    assert first.op.open_tunables() == ()  # resolved for the device
    x, y = recording.inputs
    assert first.inputs == (x,)
    assert second.inputs == (first.outputs[0], y)
    assert recording.outputs == [second.outputs[0]]
    assert (
        repr(first)
        == "Step(0, Scale(size=16, factor=2.0, tile_size=16, num_columns=8))"
    )


def test_inputs_outputs_values_carry_and_device():
    recording = Everything().record(x=(8,), w=(2,))
    assert recording.name == "Everything"
    assert [h.name for h in recording.inputs] == ["x", "w"]
    assert [h.name for h in recording.outputs] == ["matvec3", "scale2", "copy2d1", "x"]
    assert [(v.name, v.kind.value) for v in recording.values] == [
        ("token", "carried"),
        ("n", "scratchpad"),
    ]
    assert recording.carry == {"token": recording.steps[0].outputs[0]}
    assert recording.defaults == {"n": 2}
    assert recording.device == iron.NPU2


def test_weights_and_states_are_kept_by_path():
    graph = Everything()
    recording = graph.record(x=(8,), w=(2,))
    assert list(recording.weights) == ["table", "w"]
    table, table_handle = recording.weights["table"]
    assert table is graph.table.array
    assert (table_handle.name, table_handle.buffer.role) == ("table", "weight")
    w, w_handle = recording.weights["w"]
    assert w is graph.w and w_handle.name == "w.1"
    state, state_handle = recording.states["cache"]
    assert state is graph.cache
    assert (state_handle.shape, state_handle.buffer.role) == ((4, 8), "state")
    assert list(recording.residents) == ["table", "w", "cache"]


def test_buffers_are_inputs_then_residents_then_step_outputs():
    recording = Everything().record(x=(8,), w=(2,))
    assert {n: b.role for n, b in recording.buffers.items()} == {
        "x": "input",
        "w": "input",
        "table": "weight",
        "w.1": "weight",
        "cache": "state",
        "argmax0": "transient",
        "copy2d1": "transient",
        "scale2": "transient",
        "matvec3": "transient",
    }


def test_host_steps_limits_and_addresses():
    recording = Everything().record(x=(8,), w=(2,))
    (host,) = recording.host
    assert isinstance(host, HostStep)
    assert host.fn is show and host.after == 3
    assert [h.name for h in host.reads] == ["scale2"]
    assert [h.name for h in host.writes] == ["cache"]
    assert recording.addresses == {"argmax0": ("table", "argmax0", 4)}
    assert all(isinstance(limit, Limit) for limit in recording.limits)
    assert {(str(limit.expr), limit.lo, limit.hi) for limit in recording.limits} == {
        ("n", 0, 9)
    }


def test_reads_are_the_values_this_version_uses():
    class Unused(iron.Graph):
        def body(self, x, *, n: iron.Scratchpad[int], m: iron.Scratchpad[int]):
            return Scale.step(x[:n])

    assert [v.name for v in Unused().record(x=(8,)).reads] == ["n"]
    everything = Everything().record(x=(8,), w=(2,))
    assert [v.name for v in everything.reads] == ["token", "n"]


# -- running on the host -------------------------------------------------------------


def test_recording_reference_returns_outputs_and_next_values():
    recording = Everything().record(x=(8,), w=(2,))
    x = np.array([1, 5, 3, 9, 0, 0, 0, 0], dtype=bfloat16)
    outputs, carry = recording.reference({"x": x, "w": bf16(2)}, {"token": 0, "n": 3})
    m, a, rows, part = outputs
    np.testing.assert_array_equal(m, np.full(4, x.astype(np.float32).sum(), bfloat16))
    np.testing.assert_array_equal(a, scale(x[:3], 2.0))
    np.testing.assert_array_equal(rows, np.arange(8, 16).astype(bfloat16)[None])
    np.testing.assert_array_equal(part, x[1:3])
    assert carry == {"token": 1}


def test_check_values_raises_index_error_for_a_view_left():
    recording = Everything().record(x=(8,), w=(2,))
    recording.check_values({"token": 0, "n": 8})
    with pytest.raises(IndexError, match=r"n is 9 this call, outside \[0, 9\)"):
        recording.check_values({"token": 0, "n": 9})


def test_a_state_written_at_a_position_persists_between_calls():
    graph, rows = Cache(), bf16(4, 8)
    for position in range(4):
        out = graph.reference(rows[position], position=position)
        np.testing.assert_array_equal(out, rows[: position + 1])
    np.testing.assert_array_equal(graph.cache.host, rows)
    graph.cache.reset()
    np.testing.assert_array_equal(graph.cache.host, np.zeros((4, 8), bfloat16))


def test_a_state_position_outside_it_raises_index_error():
    with pytest.raises(IndexError, match=r"position is 4 this call, outside \[0, 4\)"):
        Cache().reference(bf16(8), position=4)


class Hosted(iron.Graph):
    """scale0 -> host (st = scale0 + 1) -> mul(st, x) -> host (log) ."""

    def __init__(self, log: list):
        self.st = iron.state(8)
        self.log = log

    def body(self, x):
        a = Scale.step(x, factor=2.0)

        def bump(a, st):
            self.log.append(("bump", a.copy()))
            st[...] = (a.astype(np.float32) + 1).astype(bfloat16)

        def see(out):
            self.log.append(("see", out.copy()))

        iron.on_host(bump, a, writes=self.st)
        out = Mul.step(self.st, x)
        iron.on_host(see, out)
        return out


def test_host_steps_run_between_the_steps_around_them_in_order():
    log: list = []
    x = bf16(8)
    out = Hosted(log).reference(x)
    bumped = (scale(x, 2.0).astype(np.float32) + 1).astype(bfloat16)
    expected = (bumped.astype(np.float32) * x.astype(np.float32)).astype(bfloat16)
    np.testing.assert_array_equal(out, expected)
    assert [name for name, _ in log] == ["bump", "see"]
    np.testing.assert_array_equal(log[0][1], scale(x, 2.0))
    np.testing.assert_array_equal(log[1][1], expected)


def test_a_host_step_reads_its_inputs_cut_to_their_bounds():
    seen = []

    class Cut(iron.Graph):
        def body(self, x, *, n: iron.Scratchpad[int]):
            iron.on_host(lambda part: seen.append(part.copy()), x[:n])
            return Scale.step(x)

    x = bf16(8)
    Cut().reference(x, n=3)
    np.testing.assert_array_equal(seen[0], x[:3])


def test_a_host_step_writes_part_of_a_state():
    class Part(iron.Graph):
        def __init__(self):
            self.st = iron.state((4, 8))

        def body(self, x, *, position: iron.Scratchpad[int]):
            def put(x, row):
                row[...] = x

            iron.on_host(put, x, writes=(self.st[position],))
            return Copy2D.step(self.st)

    graph, x = Part(), bf16(8)
    out = graph.reference(x, position=2)
    np.testing.assert_array_equal(out[2], x)
    np.testing.assert_array_equal(np.delete(out, 2, axis=0), np.zeros((3, 8), bfloat16))


def test_on_host_writes_only_states():
    class Transient(iron.Graph):
        def body(self, x):
            a = Scale.step(x)
            iron.on_host(show, writes=a)
            return a

    with pytest.raises(
        ValueError, match=r"on_host writes parts of states; .* transient"
    ):
        Transient().record(x=(8,))


def test_on_host_writes_no_state_a_step_writes():
    class Both(iron.Graph):
        def __init__(self):
            self.st = iron.state(8)

        def body(self, x):
            iron.on_host(show, writes=self.st)
            Copy.step(x, out=self.st)
            return Copy.step(self.st)

    with pytest.raises(ValueError) as info:
        Both().record(x=(8,))
    assert str(info.value) == (
        "Both: on_host writes st, which a step writes too; a host step writes "
        "parts of states no step writes"
    )


def test_on_host_outside_a_body_raises_type_error():
    with pytest.raises(TypeError, match="on_host records into a graph's body"):
        iron.on_host(show, bf16(8))


def test_on_host_runs_a_function():
    class NotCallable(iron.Graph):
        def body(self, x):
            iron.on_host("show", x)
            return x

    with pytest.raises(TypeError, match="on_host runs a function; got 'show'"):
        NotCallable().record(x=(8,))


def test_on_host_moves_contiguous_tensors():
    class Strided(iron.Graph):
        def body(self, x):
            iron.on_host(show, x[::2])
            return x

    with pytest.raises(ValueError, match="on_host moves contiguous tensors"):
        Strided().record(x=(8,))


def test_a_gather_by_ids_a_step_made_reads_them_on_the_host():
    recording = Everything().record(x=(8,), w=(2,))
    x = np.zeros(8, bfloat16)
    x[1] = 4
    (_, _, rows, _), carry = recording.reference(
        {"x": x, "w": bf16(2)}, {"token": 0, "n": 2}
    )
    np.testing.assert_array_equal(rows, np.arange(8, 16).astype(bfloat16)[None])
    assert carry == {"token": 1}


def test_scale_rounds_once_in_the_reference():
    """The reference casts an input to its recorded dtype as the device would."""
    graph = ScaleThenMul()
    x = bf16(16)
    y = np.ones(16, bfloat16)
    recording = graph.record(x=(16,), y=(16,))
    (out,), _ = recording.reference({"x": x, "y": y}, {})
    np.testing.assert_array_equal(out, scale(x, 2.0))
