"""Graphs and plan checks shared by the ``test_arena_*`` files.

The graphs are built of ``Resize`` and ``Mix`` (from ``operators_for_tests``);
``assert_sound``, ``assert_liveness`` and ``assert_steps_apart`` recompute a
plan's invariants independently rather than trusting ArenaPlan.check().
"""

from __future__ import annotations

import numpy as np
from ml_dtypes import bfloat16
from operators_for_tests import Mix, Resize

import iron
from iron.core.arena import ALIGN, ArenaPlan, version_key

# -- graphs ----------------------------------------------------------------------------


class Chain(iron.Graph):
    """x resized through ``sizes`` one step after another."""

    def __init__(self, sizes):
        self.sizes = list(sizes)

    def body(self, x):
        h = x
        for s in self.sizes:
            h = Resize.step(h, size_out=s)
        return h


class Held(iron.Graph):
    """A chain that adds weights and writes states along the way."""

    def __init__(self, weights, states, sizes):
        self.w = [iron.param(np.ones(n, dtype=bfloat16)) for n in weights]
        self.s = [iron.state(n) for n in states]
        self.sizes = list(sizes)

    def body(self, x):
        h = x
        for i, size in enumerate(self.sizes):
            h = Resize.step(h, size_out=size)
            if self.w:
                h = Mix.step(h, self.w[i % len(self.w)], size_out=size)
            if self.s and i % 2 == 0:
                state = self.s[i % len(self.s)]
                Resize.step(h, size_out=state.shape[0], out=state)
        if self.s:
            h = Mix.step(h, self.s[0], size_out=self.sizes[-1])
        return h


def record(graph, **shapes):
    with iron.use_device("npu2"):
        return graph.record(**shapes)


# -- an independent check of a plan ----------------------------------------------------


def _live_together(va, a, vb, b):
    """Whether two arena buffers are live at once (residents always are)."""
    if a.kind == "resident" or b.kind == "resident":
        return True
    return va == vb and a.first <= b.last and b.first <= a.last


def assert_sound(plan: ArenaPlan):
    """Recompute every invariant here, not trusting check()."""
    plan.check()
    arena = []
    for version, placed in plan.versions.items():
        for name, p in placed.items():
            assert p.name == name
            assert p.kind in ("input", "output", "transient", "resident")
            assert 0 <= p.first <= p.last
            if p.in_arena:
                assert p.offset % ALIGN == 0, p
                assert p.end <= plan.size
                arena.append((version, p))
            else:
                assert p.offset == 0
            if p.kind == "resident":
                r = plan.residents[name]
                assert (p.offset, p.nbytes) == (r.offset, r.nbytes)
    for i, (va, a) in enumerate(arena):
        for vb, b in arena[i + 1 :]:
            if a.kind == b.kind == "resident" and a.name == b.name:
                continue
            if a.nbytes == 0 or b.nbytes == 0:
                continue
            if _live_together(va, a, vb, b):
                assert a.end <= b.offset or b.end <= a.offset, (va, a, vb, b)


def assert_liveness(plan: ArenaPlan, recording, version=None):
    """Each transient is live from the first step touching it to the last."""
    placed = plan.versions[version or version_key(recording)]
    touch: dict[str, list[int]] = {}
    for step in recording.steps:
        for h in (*step.inputs, *step.outputs):
            if h is not None:
                touch.setdefault(h.name, []).append(step.index)
    for name, p in placed.items():
        if p.kind == "transient":
            assert (p.first, p.last) == (min(touch[name]), max(touch[name])), p


def assert_steps_apart(plan: ArenaPlan, recording, version=None):
    """A step's inputs and outputs never share a byte."""
    placed = plan.versions[version or version_key(recording)]
    for step in recording.steps:
        names = {h.name for h in (*step.inputs, *step.outputs) if h is not None}
        ranges = sorted(
            (placed[n].offset, placed[n].end)
            for n in names
            if placed[n].in_arena and placed[n].nbytes
        )
        for (_, end), (start, _) in zip(ranges, ranges[1:]):
            assert end <= start, (step, ranges)
