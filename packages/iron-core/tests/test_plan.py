"""Planning: packaging and its reasons, commands around host steps, idle steps, the report."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from ml_dtypes import bfloat16
from operators_for_tests import Copy, Scale

import iron
from iron.core.arena import ArenaPlan
from iron.core.percall import evaluate
from iron.core.plan import IdleProgram


class Chain(iron.Graph):
    """Two scales; with ``host=True`` a host step runs between them."""

    def __init__(self, host: bool = False):
        self.host = host
        self.seen = []

    def body(self, x, *, n: iron.Scratchpad[int] = 16):
        a = Scale.step(x[:n], factor=2.0)
        if self.host:
            iron.on_host(self.seen.append, a)
        return Scale.step(a, factor=3.0)


def _record(graph, dev="npu2", size=16):
    with iron.use_device(dev):
        return graph.record(x=(size,))


def test_npu2_packages_a_full_elf_and_npu1_one_xclbin_per_step():
    recording = _record(Chain())
    whole = iron.plan("npu2", recording)
    assert whole.full_elf and whole.reasons == () and whole.loops
    each = iron.plan("npu1", _record(Chain(), "npu1"))
    assert not each.full_elf and each.reasons == ("npu1 has no full ELF",)
    assert not each.loops


def test_check_forces_per_step_dispatch():
    plan = iron.plan("npu2", _record(Chain()), check=True)
    assert not plan.full_elf
    assert plan.reasons == ("check=True dispatches each step on its own",)


def test_full_elf_true_where_something_forces_per_step_raises_listing_every_reason():
    recording = _record(Chain(), "npu1")
    with pytest.raises(ValueError) as caught:
        iron.plan("npu1", recording, full_elf=True, check=True)
    message = str(caught.value)
    assert "npu1 has no full ELF" in message
    assert "check=True dispatches each step on its own" in message


def test_full_elf_false_is_a_reason_of_its_own():
    plan = iron.plan("npu2", _record(Chain()), full_elf=False)
    assert not plan.full_elf and plan.reasons == ("full_elf=False was asked",)


def test_host_steps_end_a_command_and_the_version_cannot_loop():
    plan = iron.plan("npu2", _record(Chain(host=True)))
    assert plan.commands == [(0,), (1,)]
    assert plan.full_elf and not plan.loops
    assert "cannot loop on the device" in plan.report()
    assert iron.plan("npu2", _record(Chain())).commands == [(0, 1)]


def test_idle_steps_are_those_with_a_zero_row_bound_this_call():
    recording = _record(Chain())
    plan = iron.plan("npu2", recording)
    assert plan.idle(recording.steps, {"n": 0}) == frozenset({0, 1})
    assert plan.idle(recording.steps, {"n": 5}) == frozenset()


class Bounds(iron.Graph):
    """Steps under two per-call bounds, one an expression, and one under none."""

    def body(self, x, *, n: iron.Scratchpad[int] = 16, m: iron.Scratchpad[int] = 16):
        a = Scale.step(x[:n], factor=2.0)
        b = Scale.step(x[: m - 2], factor=3.0)
        c = Scale.step(x, factor=4.0)
        return Scale.step(a, factor=5.0), b, c


def _walk(steps, values):
    """The definition: a step is idle when one of its handles' bounds is <= 0."""
    return frozenset(
        step.index
        for step in steps
        if any(
            evaluate(b, values) <= 0
            for h in (*step.inputs, *step.outputs)
            if h is not None
            for b in h.valid.values()
        )
    )


def test_the_idle_program_evaluates_each_bound_once_and_agrees_with_the_walk():
    recording = _record(Bounds())
    program = IdleProgram.of(recording.steps)
    # n and m - 2 (each used by several handles) are held once each
    assert sorted(str(expr) for expr, _ in program.bounds) == ["m - 2", "n"]
    plan = iron.plan("npu2", recording)
    seen = set()
    # values alternate, so a program that kept an earlier call's answer fails
    for n, m in [(16, 16), (0, 16), (16, 2), (0, 0), (5, 3), (0, 2), (1, 16)]:
        values = {"n": n, "m": m}
        want = _walk(recording.steps, values)
        assert program(values) == want
        assert plan.idle(recording.steps, values) == want
        seen.add(want)
    assert len(seen) == 4  # none, n's steps, m's step, both


def test_a_fixed_bound_of_zero_rows_idles_its_step_every_call():
    recording = _record(Chain())
    first, second = recording.steps
    x = first.inputs[0]
    steps = [
        dataclasses.replace(first, inputs=(dataclasses.replace(x, valid={0: 0}),)),
        dataclasses.replace(second, inputs=(dataclasses.replace(x, valid={0: 4}),)),
    ]
    program = IdleProgram.of(steps)
    assert program.always == frozenset({0})
    # the second step's output keeps its bound n; the first is idle anyway
    assert [(str(e), s) for e, s in program.bounds] == [("n", frozenset({1}))]
    for n, want in ((0, {0, 1}), (5, {0}), (0, {0, 1})):
        assert program({"n": n}) == _walk(steps, {"n": n}) == frozenset(want)


def test_versions_share_one_arena_and_the_report_explains_every_choice():
    small = iron.plan("npu2", _record(Chain(), size=16), arena=ArenaPlan())
    big = iron.plan("npu2", _record(Chain(), size=64), arena=small.arena)
    assert len(big.arena.versions) == 2 and small.version != big.version
    text = big.report("Chain")
    assert text.splitlines()[0] == f"Chain on npu2: version {big.version}"
    for phrase in (
        "packaging: one full ELF",
        "per-call words: 1 in its one image, of the 32 an image can read",
        "n  (",
        "arena:",
    ):
        assert phrase in text, phrase
    assert "lower bound" in text


def test_the_summary_is_two_lines_and_words_count_per_image():
    # issue 35: "-v" reads this; "97 of 32 scratchpad words" read as an overflow
    elf = iron.plan("npu2", _record(Chain(), size=16))
    assert elf.summary("Chain").splitlines() == [
        f"Chain on npu2, version {elf.version}: 2 device steps in one run, "
        "one full ELF",
        f"  arena {elf.arena.size} bytes ({elf.arena.resident_bytes} of residents); "
        "per-call words: 1 in its one image, of the 32 an image can read",
    ]
    per_step = iron.plan("npu1", _record(Chain(), dev="npu1", size=16))
    assert not per_step.full_elf and per_step.images == 2
    # a word per use on npu1 (a read and a write of each step bounded by n),
    # but each step's own image reads only its own expressions: n, once
    assert len(per_step.words) == 4 and per_step.words_per_image == 1
    assert {w.step for w in per_step.words} == {0, 1}
    assert (
        "per-call words: 4 in all across 2 step images, at most 1 in one image, "
        "of the 32 an image can read"
    ) in per_step.summary()
    assert "of 32 scratchpad words" not in per_step.report()


def test_a_version_without_per_call_values_has_no_words():
    class Plain(iron.Graph):
        def body(self, x):
            return Scale.step(x, factor=2.0)

    plan = iron.plan("npu2", _record(Plain()))
    assert plan.words == []
    assert "per-call words: none" in plan.report()


def test_weights_and_states_are_residents_in_the_arena():
    class Keeps(iron.Graph):
        def __init__(self):
            self.w = iron.param(np.ones(16, bfloat16))
            self.acc = iron.state((16,), bfloat16)

        def body(self, x):
            Copy.step(x, out=self.acc)
            return Scale.step(self.w, factor=2.0)

    with iron.use_device("npu2"):
        recording = Keeps().record(x=(16,))
    plan = iron.plan("npu2", recording)
    residents = {n: p for n, p in plan.buffers.items() if p.kind == "resident"}
    assert set(residents) == {"w", "acc"}
    assert all(p.in_arena and p.offset % 64 == 0 for p in residents.values())
    assert plan.buffers["x"].kind == "input" and not plan.buffers["x"].in_arena
    report = plan.report()
    assert "w " in report and "resident" in report


# -- planning is pure: a plan is a snapshot ------------------------------------


def test_planning_leaves_the_arena_given_as_it_was():
    arena = ArenaPlan()
    first = iron.plan("npu2", _record(Chain(), size=16), arena=arena)
    assert arena.versions == {} and arena.size == 0
    assert first.arena is not arena and list(first.arena.versions) == [first.version]
    arena.commit(first.arena)
    size = arena.size
    second = iron.plan("npu2", _record(Chain(), size=256), arena=arena)
    assert second.arena.size > size
    assert list(arena.versions) == [first.version] and arena.size == size


def test_an_earlier_plans_report_never_changes_after_a_later_plan():
    first = iron.plan("npu2", _record(Chain(), size=16))
    before = first.report("Chain")
    later = iron.plan("npu2", _record(Chain(), size=4096), arena=first.arena)
    assert later.arena.size > first.arena.size
    assert first.report("Chain") == before


def test_a_commit_of_a_stale_snapshot_changes_nothing():
    arena = ArenaPlan()
    a = iron.plan("npu2", _record(Chain(), size=16), arena=arena)
    b = iron.plan("npu2", _record(Chain(), size=64), arena=arena)
    arena.commit(a.arena)
    with pytest.raises(ValueError, match="does not extend this plan"):
        arena.commit(b.arena)
    assert list(arena.versions) == [a.version] and arena.size == a.arena.size


def test_an_emit_is_planned_only_for_a_version_that_loops():
    class Walk(iron.Graph):
        def body(self, x, *, position: iron.Carried[int] = 0):
            return Scale.step(x, factor=2.0), iron.carry(position=position + 1)

    with iron.use_device("npu2"):
        recording = Walk().record(x=(16,))
    looping = iron.plan("npu2", recording, emit=True)
    assert looping.emit is not None and looping.emit.carried == ("position",)
    assert iron.plan("npu2", recording).emit is None
    with iron.use_device("npu1"):
        on_npu1 = Walk().record(x=(16,))
    with pytest.raises(ValueError, match="npu1 has no full ELF"):
        iron.plan("npu1", on_npu1, emit=True)
