"""Calling a CompiledGraph: inputs, per-call values, states, weights, host steps."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from ml_dtypes import bfloat16
from ops import Add1, Add32, Scale32, Take, Take2

import iron
from iron.core.carry import Carry
from iron.core.words import evaluate_words
from iron.operators import AXPY, ReLU
from iron.runtime import RunError
from iron.runtime.emu import EmuBuffer
from iron.runtime.emu.execute import RunProgram, execute


def _bf16(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(bfloat16)


class Chain(iron.Graph):
    def body(self, x, y):
        return ReLU.step(AXPY.step(x, y, scalar_factor=2.0))


class Bounded(iron.Graph):
    """ReLU of the first ``n`` entries."""

    def body(self, x, *, n: iron.Scratchpad[int]):
        return ReLU.step(x[:n])


class TwoOut(iron.Graph):
    def body(self, x):
        a = Scale32.step(x, factor=3.0)
        return a, Add32.step(a, x)


class Cache(iron.Graph):
    """Writes ``x`` into row ``position`` of a state and returns the state."""

    def __init__(self, rows: int = 8, cols: int = 64) -> None:
        self.cache = iron.state((rows, cols), np.float32)

    def body(self, x, *, position: iron.Scratchpad[int]):
        Take.step(x, out=self.cache[position])
        return Take2.step(self.cache)


class Counter(iron.Graph):
    """Adds one to ``x`` and carries ``i + 1``."""

    def body(self, x, *, i: iron.Carried[int]):
        return Add1.step(x), iron.carry(i=i + 1)


class Weighted(iron.Graph):
    """``2 x + w[:len(x)]`` with one weight held at two paths."""

    def __init__(self, w: np.ndarray) -> None:
        self.w = iron.weight(w)
        self.same = self.w

    def body(self, x):
        return AXPY.step(x, self.w[: x.shape[0]], scalar_factor=2.0)


# -- outputs -----------------------------------------------------------------------


def test_several_outputs_come_back_as_a_tuple():
    graph = TwoOut()
    x = np.linspace(-4, 4, 128, dtype=np.float32)
    a, b = graph(x)
    np.testing.assert_array_equal(a, 3 * x)
    np.testing.assert_array_equal(b, 4 * x)


def test_a_carried_value_comes_back_as_a_carry_last():
    graph = Counter()
    x = np.arange(32, dtype=np.int32)
    out, carry = graph(x, i=7)
    np.testing.assert_array_equal(out, x + 1)
    assert isinstance(carry, Carry) and carry == {"i": 8}
    assert graph.reference(x, i=7)[1] == carry


# -- per-call values -----------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 17, 100, 256])
def test_a_per_call_bound_cuts_the_output(n):
    graph = Bounded()
    graph.compile(x=(256,))
    x = _bf16(256)
    out = graph(x, n=n)
    assert out.shape == (n,)
    np.testing.assert_array_equal(out, np.maximum(x[:n], 0))
    np.testing.assert_array_equal(out, graph.reference(x, n=n))


def test_per_call_bounds_vary_call_to_call_on_one_version():
    graph = Bounded()
    version = graph.compile(x=(256,))
    x = _bf16(256)
    for n in (256, 3, 0, 128):
        np.testing.assert_array_equal(version(x, n=n), np.maximum(x[:n], 0))


class TwoBounds(iron.Graph):
    """ReLUs of the first ``n`` and the first ``m`` entries."""

    def body(self, x, *, n: iron.Scratchpad[int], m: iron.Scratchpad[int]):
        return ReLU.step(x[:n]), ReLU.step(x[:m])


def test_the_emulator_reads_each_bound_from_its_word_once_per_run():
    version = TwoBounds().compile(x=(64,))
    spec = version.images[0]
    program = RunProgram(spec)
    assert program.unread == frozenset() and len(program.words) == 2
    x = _bf16(64)
    # alternating values: a run that kept an earlier run's idle steps fails
    for n, m in [(64, 64), (0, 5), (5, 0), (0, 0), (3, 7), (0, 5), (64, 64)]:
        values = {"n": n, "m": m}
        pad = evaluate_words(spec.words, values)
        assert program.zero_rows(pad) == version.plan.idle(spec.steps, values)
        a, b = version(x, n=n, m=m)
        np.testing.assert_array_equal(a, np.maximum(x[:n], 0))
        np.testing.assert_array_equal(b, np.maximum(x[:m], 0))


def test_a_bound_no_word_holds_still_fails_at_its_step():
    version = TwoBounds().compile(x=(64,))
    spec = dataclasses.replace(version.images[0], words=[])
    program = RunProgram(spec)
    assert program.unread == frozenset({0, 1}) and program.words == ()
    memory = {"arena": np.zeros(1 << 12, np.uint8)}
    for name, place in spec.placement.items():
        if place.where != "arena":
            memory[f"{place.where}:{name}"] = np.zeros(place.nbytes, np.uint8)
    pad = np.zeros(0, np.int32)
    with pytest.raises(RunError, match=r"no scratchpad word holds n; .*planning bug"):
        execute(spec, memory, pad, program=program)
    # idle steps are skipped before their bounds are read, as before
    execute(spec, memory, pad, idle=frozenset({0, 1}), program=program)


@pytest.mark.parametrize("poison", [False, True])
def test_runs_with_poison_off_and_on_agree_and_fail_alike(poison, monkeypatch):
    """Poison off, the emulator takes its lean loop: the same bytes, the same errors."""
    iron.runtime.set_poison(poison)
    try:
        version = TwoBounds().compile(x=(64,))
        x = _bf16(64)
        for n, m in [(64, 64), (0, 5), (5, 0), (3, 7)]:
            a, b = version(x, n=n, m=m)
            np.testing.assert_array_equal(a, np.maximum(x[:n], 0))
            np.testing.assert_array_equal(b, np.maximum(x[:m], 0))
        chain = Chain().compile(x=(256,), y=(256,))

        def boom(self, x):
            raise ValueError("boom")

        monkeypatch.setattr(ReLU, "reference", boom)
        with pytest.raises(RunError, match=r"step 1 ReLU failed: boom") as caught:
            chain(_bf16(256), _bf16(256, seed=1))
        assert isinstance(caught.value.__cause__, ValueError)
    finally:
        iron.runtime.set_poison(None)


def test_a_per_call_offset_writes_the_planned_row():
    graph = Cache()
    version = graph.compile(x=((64,), np.float32))
    want = np.zeros((8, 64), np.float32)
    for position in (3, 0, 7, 3):
        x = np.arange(64, dtype=np.float32) + np.float32(position + 0.5)
        want[position] = x
        np.testing.assert_array_equal(version(x, position=position), want)
    np.testing.assert_array_equal(version.read(graph.cache), want)


def test_per_call_values_are_checked_before_anything_runs():
    graph = Cache()
    version = graph.compile(x=((64,), np.float32))
    x = np.ones(64, np.float32)
    with pytest.raises(IndexError, match="outside"):
        version(x, position=8)
    with pytest.raises(TypeError, match="missing"):
        version(x)
    with pytest.raises(TypeError, match="not per-call values"):
        version(x, position=1, other=2)
    with pytest.raises(TypeError, match="not an int"):
        version(x, position=True)
    with pytest.raises(TypeError, match="not an int"):
        version(x, position=1.0)
    with pytest.raises(ValueError, match="30 bits"):
        version(x, position=1 << 30)
    assert version._callable is None, "nothing was loaded for a refused call"


class Defaulted(iron.Graph):
    def body(self, x, *, n: iron.Scratchpad[int] = 3):
        return ReLU.step(x[:n])


def test_a_per_call_value_may_default():
    graph = Defaulted()
    x = _bf16(64)
    np.testing.assert_array_equal(graph(x), np.maximum(x[:3], 0))
    np.testing.assert_array_equal(graph(x, n=10), np.maximum(x[:10], 0))


# -- inputs ----------------------------------------------------------------------------


def test_input_mismatches_raise_before_anything_is_written():
    graph = Chain()
    version = graph.compile(x=(256,), y=(256,))
    x, y = _bf16(256, 1), _bf16(256, 2)
    with pytest.raises(ValueError, match=r"x is \[128\] bfloat16"):
        version(x[:128], y)
    with pytest.raises(ValueError, match="float32"):
        version(x.astype(np.float32), y)
    with pytest.raises(TypeError, match="takes 2 inputs"):
        version(x, y, y)
    with pytest.raises(TypeError, match="takes inputs"):
        version(x)
    assert version._callable is None and version.arena.nbytes == 0
    assert not version.arena.called
    np.testing.assert_array_equal(version(x, y), graph.reference(x, y))
    staged = version._io["input:x"]
    before = staged.device.copy()
    with pytest.raises(ValueError):
        version(x.astype(np.float32), y)
    np.testing.assert_array_equal(staged.device, before)


# -- states: read and push ---------------------------------------------------------------


def test_read_and_push_a_state():
    graph = Cache(rows=4, cols=16)
    version = graph.compile(x=((16,), np.float32))
    view = version.read(graph.cache)
    assert view.shape == (4, 16) and view.dtype == np.float32
    view[:] = np.arange(64, dtype=np.float32).reshape(4, 16)
    version.push(graph.cache)
    x = np.full(16, -1.0, np.float32)
    out = version(x, position=2)
    want = np.arange(64, dtype=np.float32).reshape(4, 16)
    want[2] = -1
    np.testing.assert_array_equal(out, want)


def test_read_names_what_a_version_does_not_hold():
    graph = Chain()
    version = graph.compile(x=(256,), y=(256,))
    with pytest.raises(KeyError, match="holds no state"):
        version.read(iron.state((4,), np.float32))


def test_states_persist_across_calls_and_versions():
    graph = Cache(rows=4, cols=16)
    first = graph.compile(x=((16,), np.float32))
    first(np.ones(16, np.float32), position=1)
    again = graph.compile(x=((16,), np.float32))
    assert again is not first
    out = again(np.full(16, 2.0, np.float32), position=3)
    assert (out[1] == 1).all() and (out[3] == 2).all()


# -- weights ---------------------------------------------------------------------------------


def _uploads(monkeypatch) -> list[tuple[str, int, int]]:
    sent: list[tuple[str, int, int]] = []
    original = EmuBuffer.to_device

    def spy(self, offset=0, nbytes=None):
        sent.append((self.name, offset, self.nbytes if nbytes is None else nbytes))
        return original(self, offset, nbytes)

    monkeypatch.setattr(EmuBuffer, "to_device", spy)
    return sent


def test_weights_upload_once_per_storage_piecewise(monkeypatch):
    w = _bf16(1024, seed=5)
    graph = Weighted(w)
    small = graph.compile(x=(256,))
    big = graph.compile(x=(1024,))
    assert len(small.recording.weights) == 1, "one storage held at two paths"
    pieces: list[np.ndarray] = []
    big.upload(release=pieces.append, piece_bytes=500)
    assert [p.size for p in pieces] == [500, 500, 500, 500, 48]
    np.testing.assert_array_equal(np.concatenate(pieces).view(bfloat16), w)
    small.upload(release=pieces.append)
    big.upload(release=pieces.append)
    assert len(pieces) == 5, "the arena's weights are every version's"
    sent = _uploads(monkeypatch)
    x = _bf16(256, seed=6)
    for _ in range(3):
        np.testing.assert_array_equal(small(x), graph.reference(x))
    assert not [s for s in sent if "arena" in s[0]], "no weight is sent again"


def test_load_uploads_now():
    w = _bf16(256, seed=1)
    graph = Weighted(w)
    version = graph.compile(x=(256,))
    pieces: list[np.ndarray] = []
    assert version.load(release=pieces.append) is version
    assert sum(p.size for p in pieces) == w.nbytes
    x = _bf16(256, seed=2)
    np.testing.assert_array_equal(version(x), graph.reference(x))
    assert sum(p.size for p in pieces) == w.nbytes


def test_upload_refuses_a_piece_of_no_bytes():
    graph = Weighted(_bf16(256))
    version = graph.compile(x=(256,))
    with pytest.raises(ValueError, match="piece_bytes"):
        version.upload(piece_bytes=0)


# -- release ---------------------------------------------------------------------------------


def test_version_release_then_a_call_loads_again():
    graph = Chain()
    version = graph.compile(x=(256,), y=(256,))
    x, y = _bf16(256, 1), _bf16(256, 2)
    want = graph.reference(x, y)
    np.testing.assert_array_equal(graph(x, y), want)
    version.release()
    assert version._callable is None and not version._io
    np.testing.assert_array_equal(graph(x, y), want)


def test_graph_release_frees_everything_and_reloads():
    w = _bf16(256, seed=3)
    graph = Weighted(w)
    version = graph.compile(x=(256,))
    x = _bf16(256, seed=4)
    want = graph.reference(x)
    np.testing.assert_array_equal(graph(x), want)
    assert version.arena.nbytes > 0
    graph.release()
    assert version._callable is None
    assert version.arena.nbytes == 0, "the arena is freed with the versions"
    pieces: list[np.ndarray] = []
    version.load(release=pieces.append)
    assert sum(p.size for p in pieces) == w.nbytes, "weights upload again"
    np.testing.assert_array_equal(graph(x), want)


def test_graph_release_drops_states():
    graph = Cache(rows=2, cols=16)
    version = graph.compile(x=((16,), np.float32))
    version(np.ones(16, np.float32), position=0)
    graph.release()
    out = version(np.full(16, 2.0, np.float32), position=1)
    np.testing.assert_array_equal(out[0], 0)
    np.testing.assert_array_equal(out[1], 2)


# -- host steps ----------------------------------------------------------------------------


class Host(iron.Graph):
    """A step, a host step reading its result cut to ``n``, a step after."""

    def __init__(self) -> None:
        self.s = iron.state((64,), np.float32)
        self._seen: list[np.ndarray] = []

    def _on_host(self, a: np.ndarray, s: np.ndarray) -> None:
        self._seen.append(a.copy())
        s[:] = 0
        s[: a.size] = a + 1

    def body(self, x, *, n: iron.Scratchpad[int]):
        a = Scale32.step(x, factor=2.0)
        iron.on_host(self._on_host, a[:n], writes=self.s)
        return Add32.step(a, self.s)


@pytest.mark.parametrize("full_elf", [True, False])
def test_host_steps_run_between_commands_on_bounded_reads(full_elf):
    graph = Host()
    version = graph.compile(x=((64,), np.float32), full_elf=full_elf)
    assert version.plan.commands == [(0,), (1,)]
    assert len(version.images) == 2
    x = np.arange(64, dtype=np.float32)
    for n in (5, 64, 0):
        out = version(x, n=n)
        np.testing.assert_array_equal(graph._seen[-1], 2 * x[:n])
        want = 2 * x
        want[:n] += 2 * x[:n] + 1
        np.testing.assert_array_equal(out, want)


def test_start_refuses_a_graph_with_host_steps():
    graph = Host()
    version = graph.compile(x=((64,), np.float32))
    run = version.callable.runs[0]
    with pytest.raises(ValueError, match="a host step runs between its commands"):
        version.start(run, np.zeros(64, np.float32), n=1)


def test_start_runs_a_full_elf_without_waiting():
    graph = Chain()
    version = graph.compile(x=(256,), y=(256,))
    x, y = _bf16(256, 1), _bf16(256, 2)
    run = version.callable.new_run()
    version.start(run, x, y)
    run.wait()
    out = version.read(version.recording.outputs[0])
    np.testing.assert_array_equal(out, graph.reference(x, y))


def test_start_refuses_a_version_dispatched_per_step():
    graph = Chain()
    version = graph.compile(x=(256,), y=(256,), full_elf=False)
    with pytest.raises(ValueError, match="dispatched per step"):
        version.start(version.callable.runs[0], _bf16(256), _bf16(256))


class HeldBias(iron.Graph):
    """``x + bias`` with the bias a held bf16 weight (kept widened by the emulator)."""

    def __init__(self):
        self.bias = iron.param(np.ones(256, bfloat16))

    def body(self, x):
        return AXPY.step(x, self.bias, scalar_factor=1.0)


def test_a_weight_pushed_again_is_read_anew():
    """The emulator keeps float32 copies of weights; a push makes them stale."""
    graph = HeldBias()
    version = graph.compile(x=(256,))
    x = np.zeros(256, bfloat16)
    np.testing.assert_array_equal(version(x), np.ones(256, bfloat16))
    view = version.read(graph.bias)
    view[:] = 3
    version.push(graph.bias)
    np.testing.assert_array_equal(version(x), np.full(256, 3, bfloat16))


def test_a_float32_copy_is_made_once_per_upload_and_anew_after_a_write(monkeypatch):
    """EmuBuffer.widened keeps one float32 copy until its bytes are sent again."""
    monkeypatch.setenv("IRON_EMU_MEMORY", "inf")  # room for the copy
    values = _bf16(64, seed=9)
    bo = EmuBuffer(4 * values.nbytes, "arena")
    bo.host()[values.nbytes : 2 * values.nbytes] = values.view(np.uint8)
    bo.to_device()
    first = bo.widened(values.nbytes, values.nbytes, (8, 8))
    assert first.dtype == np.float32
    np.testing.assert_array_equal(first, values.astype(np.float32).reshape(8, 8))
    assert bo.widened(values.nbytes, values.nbytes, (8, 8)) is first  # kept
    # a write elsewhere in the buffer (a run's inputs) leaves it kept; one
    # touching the weight's bytes, even one byte of them, stales it
    bo.to_device(0, 16)
    bo.to_device(2 * values.nbytes, values.nbytes)
    assert bo.widened(values.nbytes, values.nbytes, (8, 8)) is first
    bo.to_device(values.nbytes - 1, 2)
    again = bo.widened(values.nbytes, values.nbytes, (8, 8))
    assert again is not first
    np.testing.assert_array_equal(again, first)
    bo.host()[values.nbytes : 2 * values.nbytes] = (-values).view(np.uint8)
    bo.to_device(values.nbytes, values.nbytes)
    np.testing.assert_array_equal(
        bo.widened(values.nbytes, values.nbytes, (8, 8)),
        -values.astype(np.float32).reshape(8, 8),
    )


class Declared(iron.Graph):
    """``2 x + w[:len(x)]`` with ``w`` a bf16 param bound by load_state_dict."""

    def __init__(self) -> None:
        self.w = iron.param(1024)

    def body(self, x):
        return AXPY.step(x, self.w[: x.shape[0]], scalar_factor=2.0)


def test_a_wider_read_only_weight_is_narrowed_piece_by_piece():
    """A mapped float32 checkpoint tensor is not copied whole to bf16 at load:
    each uploaded piece is converted, and release gets the float32 piece."""
    wide = np.random.default_rng(7).standard_normal(1024).astype(np.float32)
    wide.flags.writeable = False  # as a memory-mapped checkpoint tensor is
    graph = Declared()
    graph.load_state_dict({"w": wide})
    assert np.shares_memory(graph.w, wide), "held as it is, not converted"
    version = graph.compile(x=(1024,))
    pieces: list[np.ndarray] = []
    version.upload(release=pieces.append, piece_bytes=500)
    assert [p.dtype for p in pieces] == [np.dtype(np.float32)] * 5
    assert [p.size for p in pieces] == [250, 250, 250, 250, 24]
    np.testing.assert_array_equal(np.concatenate(pieces), wide)
    eager = Declared()
    eager.load_state_dict({"w": wide.astype(bfloat16)})
    x = _bf16(1024, seed=8)
    want = eager.reference(x)
    np.testing.assert_array_equal(graph.reference(x), want)
    np.testing.assert_array_equal(version(x), want)
    graph.release()  # uploaded again, narrowed again
    np.testing.assert_array_equal(graph(x), want)


def test_the_lean_loop_with_fixed_operands_writes_what_step_by_step_does(monkeypatch):
    """Fixed at load (operator without per-call fields, operands at fixed
    offsets) or bound and located per call: the same bytes, per-call offsets
    and bounds included."""
    from iron.runtime.emu import execute as emu_execute

    def results(fixed: bool) -> list[np.ndarray]:
        if not fixed:

            def nothing_fixed(self, step, *where):
                self.op, self.inputs = None, (None,) * len(step.inputs)
                self.outputs = (None,) * len(step.outputs)

            monkeypatch.setattr(emu_execute.FixedStep, "__init__", nothing_fixed)
        out = []
        chain = Chain().compile(x=(256,), y=(256,))
        out.append(chain(_bf16(256), _bf16(256, seed=1)))
        bounds = TwoBounds().compile(x=(64,))
        for n, m in [(64, 64), (0, 5), (3, 7)]:
            out.extend(bounds(_bf16(64, seed=n), n=n, m=m))
        cache = Cache().compile(x=((64,), np.float32))
        for position in (3, 0, 7):
            out.append(
                cache(np.arange(64, dtype=np.float32) + position, position=position)
            )
        monkeypatch.undo()
        return [np.asarray(o).copy() for o in out]

    iron.runtime.set_poison(False)
    try:
        program = RunProgram(Chain().compile(x=(256,), y=(256,)).images[0])
        assert all(f.op is not None for f in program.fixed.values())
        # bounded operands (x[:n]) are located at load, cut per call
        assert "cut" in _kinds(TwoBounds().compile(x=(64,)))
        fast, slow = results(True), results(False)
    finally:
        iron.runtime.set_poison(None)
    assert len(fast) == len(slow)
    for a, b in zip(fast, slow, strict=True):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def test_the_lean_loop_refuses_a_result_of_the_wrong_shape(monkeypatch):
    iron.runtime.set_poison(False)
    try:
        chain = Chain().compile(x=(256,), y=(256,))
        monkeypatch.setattr(ReLU, "reference", lambda self, x: np.zeros(3, bfloat16))
        with pytest.raises(
            RunError, match=r"step 1 ReLU failed: .* takes shape \[256\]"
        ):
            chain(_bf16(256), _bf16(256, seed=1))
    finally:
        iron.runtime.set_poison(None)


class Columns(iron.Graph):
    """Writes ``x`` down column ``position`` of a state (a strided walk moved
    per call), returns that column read back and the whole state."""

    def __init__(self, rows: int = 8, cols: int = 16) -> None:
        self.cache = iron.state((rows, cols), np.float32)

    def body(self, x, *, position: iron.Scratchpad[int]):
        Take.step(x, out=self.cache[:, position])
        return Take.step(self.cache[:, position]), Take2.step(self.cache)


def _kinds(version) -> set[str]:
    program = RunProgram(version.images[0])
    return {
        where[0]
        for fixed in program.fixed.values()
        for where in (*fixed.inputs, *fixed.outputs)
        if where is not None
    }


def test_the_lean_loop_locates_per_call_runs_and_walks_as_read_and_write_do(
    monkeypatch,
):
    """A row at a per-call offset (a contiguous run) and a column at one (a
    strided walk), written and read back: located from the scratchpad word
    at load, or bound and walked per call, the same bytes."""
    from iron.runtime.emu import execute as emu_execute

    def results(fixed: bool) -> list[np.ndarray]:
        if not fixed:

            def nothing_fixed(self, step, *where):
                self.op, self.inputs = None, (None,) * len(step.inputs)
                self.outputs = (None,) * len(step.outputs)

            monkeypatch.setattr(emu_execute.FixedStep, "__init__", nothing_fixed)
        out = []
        rows = Cache().compile(x=((64,), np.float32))
        columns = Columns().compile(x=((8,), np.float32))
        for position in (3, 0, 7, 15):
            if position < 8:
                out.append(
                    rows(np.arange(64, dtype=np.float32) - position, position=position)
                )
            out.extend(
                columns(np.arange(8, dtype=np.float32) * position, position=position)
            )
        monkeypatch.undo()
        return [np.asarray(o).copy() for o in out]

    iron.runtime.set_poison(False)
    try:
        assert {"run"} <= _kinds(Cache().compile(x=((64,), np.float32)))
        assert {"walk", "arena"} <= _kinds(Columns().compile(x=((8,), np.float32)))
        fast, slow = results(True), results(False)
    finally:
        iron.runtime.set_poison(None)
    assert len(fast) == len(slow) == 11
    for a, b in zip(fast, slow, strict=True):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))
    column, state = fast[-2:]
    np.testing.assert_array_equal(column, np.arange(8) * 15)
    np.testing.assert_array_equal(state[:, 15], column)


def test_a_cut_operand_outside_its_bound_is_left_to_read_and_write():
    """A bound word outside ``[0, rows]`` (or a whole run outside its buffer)
    gives no view: read() and write() then name the elements, as step by
    step."""
    from iron.runtime.emu.execute import _view

    flats: dict[str, np.ndarray] = {"x": np.arange(12, dtype=np.float32)}

    class Flats(dict):
        words = np.array([2, -1, 4], np.int32)

    found = Flats(flats)
    whole = ("span", "x", 0, 12, (4, 3))
    np.testing.assert_array_equal(
        _view(("cut", whole, 0, 4), found), np.arange(6).reshape(2, 3)
    )
    np.testing.assert_array_equal(
        _view(("cut", whole, 2, 4), found), np.arange(12).reshape(4, 3)
    )
    assert _view(("cut", whole, 1, 4), found) is None  # n = -1
    assert _view(("cut", ("span", "x", 0, 15, (5, 3)), 0, 5), found) is None


def test_a_walk_that_visits_an_element_twice_is_not_located_at_load():
    from iron.runtime.emu.execute import _injective

    assert _injective((8, 1, 64), (16384, 0, 1))  # a size-1 axis may stride 0
    assert _injective((3, 64), (64, 1)) and _injective((64, 3), (1, 64))
    assert not _injective((2, 64), (0, 1))  # the same row twice
    assert not _injective((4, 64), (32, 1))  # rows overlapping


class Diamond(iron.Graph):
    """``a = 2x; b = 2a; a + b``: two transients live together at step 1."""

    def body(self, x):
        a = Scale32.step(x, factor=2.0)
        return Add32.step(a, Scale32.step(a, factor=2.0))


def test_the_lean_loop_reads_a_placement_changed_after_load():
    """As test_arena_runtime's overlap test, without poison: the operands
    located at load are located again when a buffer moves."""
    iron.runtime.set_poison(False)
    try:
        graph = Diamond()
        version = graph.compile(x=((256,), np.float32))
        x = np.linspace(-1, 1, 256, dtype=np.float32)
        np.testing.assert_array_equal(version(x), graph.reference(x))
        spec = version.images[0]
        a, b = (s.outputs[0].name for s in version.recording.steps[:2])
        spec.placement[b] = dataclasses.replace(
            spec.placement[b], offset=spec.placement[a].offset
        )
        assert not np.array_equal(version(x), graph.reference(x))
    finally:
        iron.runtime.set_poison(None)


@pytest.mark.parametrize("graph", ["rows", "columns"])
def test_a_per_call_offset_outside_its_buffer_fails_as_read_and_write_say(graph):
    """A word the host never writes (past the state's end) reaches the device:
    the lean loop leaves the located operand to write() and read(), which
    name the elements, as the step-by-step loop (poison on) does."""
    if graph == "rows":
        version = Cache().compile(x=((64,), np.float32))
        values = {"position": 9}
    else:
        version = Columns().compile(x=((8,), np.float32))
        values = {"position": 16}
    spec = version.images[0]
    arena = max(p.offset + p.nbytes for p in spec.placement.values())
    memory = {"arena": np.zeros(arena, np.uint8)}
    for name, place in spec.placement.items():
        if place.where != "arena":
            memory[f"{place.where}:{name}"] = np.zeros(place.nbytes, np.uint8)
    pad = np.asarray(evaluate_words(spec.words, values), np.int32)
    errors = []
    for poison in (False, True):
        with pytest.raises(
            RunError, match=r"step 0 Take failed: .* writes elements"
        ) as caught:
            execute(spec, memory, pad, poison=poison, program=RunProgram(spec))
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
