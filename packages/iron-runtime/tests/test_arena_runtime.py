"""The scratch arena on the emulated NPU: planned bytes, poison, sharing, growth."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest
from ops import Add32, Scale32, Take, Take2

import iron
from iron.runtime import CompiledGraph
from iron.runtime.emu.execute import POISON_BYTES


class Diamond(iron.Graph):
    """``a = 2x; b = 2a; a + b``: two transients live together at step 1."""

    def body(self, x):
        a = Scale32.step(x, factor=2.0)
        b = Scale32.step(a, factor=2.0)
        return Add32.step(a, b)


class Grow(iron.Graph):
    """Transients as big as ``x``, and a state row written per call."""

    def __init__(self) -> None:
        self.s = iron.state((4, 16), np.float32)

    def body(self, x, *, row: iron.Scratchpad[int]):
        a = Scale32.step(x, factor=3.0)
        b = Add32.step(a, x)
        Take.step(b[:16], out=self.s[row])
        return Take2.step(self.s)


def _arena_bytes(version) -> np.ndarray:
    return version.arena.buffer().device


def test_the_arena_is_the_planned_size():
    graph = Diamond()
    version = graph.compile(x=((1024,), np.float32))
    version(np.ones(1024, np.float32))
    assert version.arena.nbytes == max(version.plan.arena.size, 64)
    assert version.arena.generation == 1


def test_a_state_lives_at_its_planned_offset():
    graph = Grow()
    version = graph.compile(x=((64,), np.float32))
    x = np.arange(64, dtype=np.float32)
    version(x, row=2)
    placed = version.plan.buffers[version.recording.states["s"][1].name]
    raw = _arena_bytes(version)[placed.offset : placed.end].view(np.float32)
    want = np.zeros((4, 16), np.float32)
    want[2] = 4 * x[:16]
    np.testing.assert_array_equal(raw.reshape(4, 16), want)


def test_dead_transients_hold_the_poison_pattern():
    graph = Diamond()
    version = graph.compile(x=((256,), np.float32))
    version(np.ones(256, np.float32))
    raw = _arena_bytes(version)
    transients = [p for p in version.plan.buffers.values() if p.kind == "transient"]
    assert transients
    for placed in transients:
        region = raw[placed.offset : placed.end]
        np.testing.assert_array_equal(
            region, np.resize(POISON_BYTES, placed.nbytes), err_msg=placed.name
        )
        assert np.isnan(region.view(np.float32)).all()


def test_an_overlap_in_the_plan_is_a_wrong_answer():
    graph = Diamond()
    version = graph.compile(x=((256,), np.float32))
    x = np.linspace(-1, 1, 256, dtype=np.float32)
    np.testing.assert_array_equal(version(x), graph.reference(x))
    # Place b over a, which is still live when b is written.
    spec = version.images[0]
    a, b = (s.outputs[0].name for s in version.recording.steps[:2])
    spec.placement[b] = dataclasses.replace(
        spec.placement[b], offset=spec.placement[a].offset
    )
    assert not np.array_equal(version(x), graph.reference(x))


def test_a_read_of_a_dead_buffer_reads_poison():
    graph = Diamond()
    version = graph.compile(x=((256,), np.float32))
    spec = version.images[0]
    a = version.recording.steps[0].outputs[0].name
    # Pretend a dies after step 0, as a liveness bug would.
    spec.transients = tuple(
        dataclasses.replace(p, last=0) if p.name == a else p for p in spec.transients
    )
    out = version(np.ones(256, np.float32))
    assert np.isnan(out).all()


def test_residents_keep_one_offset_in_every_version():
    graph = Grow()
    small = graph.compile(x=((16,), np.float32))
    big = graph.compile(x=((2048,), np.float32))
    name = small.recording.states["s"][1].name
    assert small.plan.buffers[name].offset == big.plan.buffers[name].offset
    assert small.arena is big.arena
    # each plan keeps the snapshot it was made on; the arena took both
    assert list(small.plan.arena.versions) == [small.plan.version]
    assert list(big.arena.plan.versions) == [small.plan.version, big.plan.version]


def test_compiling_every_shape_first_allocates_once(caplog):
    graph = Grow()
    small = graph.compile(x=((16,), np.float32))
    big = graph.compile(x=((2048,), np.float32))
    with caplog.at_level(logging.WARNING, logger="iron.runtime"):
        small(np.ones(16, np.float32), row=0)
        big(np.ones(2048, np.float32), row=1)
    assert small.arena.generation == 1
    assert "grows the arena" not in caplog.text


def test_growth_after_a_call_copies_the_arena_and_rebinds(caplog):
    graph = Grow()
    small = graph.compile(x=((16,), np.float32))
    x16 = np.arange(16, dtype=np.float32)
    small(x16, row=0)
    old = small.arena.buffer()
    assert small.arena.generation == 1
    big = graph.compile(x=((4096,), np.float32))
    assert big.plan.arena.size > old.nbytes
    x = np.linspace(0, 1, 4096, dtype=np.float32)
    with caplog.at_level(logging.WARNING, logger="iron.runtime"):
        out = big(x, row=1)
    assert "grows the arena" in caplog.text
    assert "Compile every shape before the first call" in caplog.text
    assert small.arena.generation == 2 and old.freed
    np.testing.assert_array_equal(out[0], 4 * x16, err_msg="the state survived")
    np.testing.assert_array_equal(out[1], 4 * x[:16])
    # The version compiled first binds the new buffer too.
    out = small(x16 + 1, row=2)
    np.testing.assert_array_equal(out[:2], np.stack([4 * x16, 4 * x[:16]]))
    np.testing.assert_array_equal(out[2], 4 * (x16 + 1))


def test_release_frees_the_arena_and_the_next_use_allocates_it():
    graph = Grow()
    version = graph.compile(x=((16,), np.float32))
    version(np.ones(16, np.float32), row=0)
    arena = version.arena
    buffer = arena.buffer()
    arena.release()
    assert arena.nbytes == 0 and buffer.freed
    out = version(np.ones(16, np.float32), row=1)
    assert arena.generation == 2
    np.testing.assert_array_equal(out[0], 0)


@pytest.mark.parametrize("full_elf", [True, False])
def test_versions_reuse_each_others_transient_bytes(full_elf):
    graph = Diamond()
    small = graph.compile(x=((256,), np.float32), full_elf=full_elf)
    big = graph.compile(x=((1024,), np.float32), full_elf=full_elf)
    offsets = lambda v: {  # noqa: E731
        p.offset for p in v.plan.buffers.values() if p.kind == "transient"
    }
    assert offsets(small) & offsets(big), "the plan shares bytes across versions"
    for n in (256, 1024, 256):
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        np.testing.assert_array_equal(graph(x), graph.reference(x))


# -- a failed compile changes nothing (issue 19, section 2) ---------------------


class Loops(iron.Graph):
    """A version that loops on the device when it takes no tensor."""

    def __init__(self) -> None:
        self.s = iron.state((4, 16), np.float32)

    def body(self, x=None, *, row: iron.Carried[int]):
        if x is not None:
            Take.step(Scale32.step(x, factor=2.0)[:16], out=self.s[row])
        Take.step(self.s[row], out=self.s[row + 1])
        return iron.carry(row=row + 1)


def _snapshot(graph: iron.Graph, versions: list[CompiledGraph]) -> tuple:
    """The arena's size, versions and residents, each version's report and result."""
    (arena,) = {v.arena for v in versions}
    results = [
        v(np.ones(v.recording.inputs[0].shape, np.float32), row=0) for v in versions
    ]
    return (
        arena.plan.size,
        dict(arena.plan.versions),
        dict(arena.plan.residents),
        [v.plan.report(graph.name) for v in versions],
        [np.asarray(r).copy() for r in results],
    )


def _same(before: tuple, after: tuple) -> None:
    """The arena and the versions' reports and results are as they were."""
    assert before[:4] == after[:4]
    for a, b in zip(before[4], after[4]):
        np.testing.assert_array_equal(a, b)


def test_a_bad_feeds_leaves_the_arena_and_earlier_versions_as_they_were():
    graph = Grow()
    small = graph.compile(x=((16,), np.float32))
    before = _snapshot(graph, [small])
    # x=2048 would grow the arena; feeds= a version that cannot loop is refused
    with pytest.raises(ValueError, match="feeds= needs a version that loops"):
        graph.compile(x=((2048,), np.float32), feeds=small)
    with pytest.raises(TypeError, match="feeds= is the version"):
        graph.compile(x=((2048,), np.float32), feeds="small")
    _same(before, _snapshot(graph, [small]))
    assert len(graph.versions) == 1


def test_a_failure_while_building_leaves_the_arena_and_earlier_versions(monkeypatch):
    import iron.runtime.compiled as compiled

    graph = Grow()
    small = graph.compile(x=((16,), np.float32))
    before = _snapshot(graph, [small])

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the build failed")

    monkeypatch.setattr(compiled, "build_images", broken)
    with pytest.raises(RuntimeError, match="the build failed"):
        graph.compile(x=((2048,), np.float32))
    monkeypatch.undo()
    _same(before, _snapshot(graph, [small]))
    big = graph.compile(x=((2048,), np.float32))  # and a later compile works
    assert big.arena.plan.size > before[0]


def test_an_emit_that_cannot_start_its_target_leaves_the_arena(monkeypatch):
    import iron.runtime.backend as backend

    graph = Loops()
    looped = graph.compile()
    program = looped.program
    size, versions = looped.arena.plan.size, dict(looped.arena.plan.versions)

    def refuse(*args: object, **kwargs: object) -> None:
        raise ValueError("cannot start it")

    monkeypatch.setattr(backend, "program_for", refuse)
    with pytest.raises(ValueError, match="cannot start it"):
        graph.compile(x=((2048,), np.float32), feeds=looped)
    assert len(graph.versions) == 1 and looped.program is program
    assert (looped.arena.plan.size, dict(looped.arena.plan.versions)) == (
        size,
        versions,
    )


def test_an_old_versions_report_does_not_change_after_a_later_compile():
    graph = Grow()
    small = graph.compile(x=((16,), np.float32))
    report = small.plan.report(graph.name)
    big = graph.compile(x=((2048,), np.float32))
    assert big.arena.plan.size > small.plan.arena.size
    assert small.plan.report(graph.name) == report


def test_the_emit_program_is_an_input_of_the_run_not_of_the_image():
    from iron.runtime import CarriedLoop

    graph = Loops()
    looped = graph.compile()
    assert looped.plan.emit is not None and looped.emit is looped.plan.emit
    assert not hasattr(looped.images[-1], "program")
    # compile programmed it to start itself: each run is given the program
    given = looped._args()["program"].host()
    assert given.tobytes() == looped.program.tobytes()
    loop = CarriedLoop(looped, looped, depth=1)
    loop.start(row=0)
    assert list(loop.steps(2)) == [0, 1]
