"""Tests for iron.core.arena: liveness, placement, residents across versions, check().

Recordings come from real graphs recorded for NPU2 with small operators
declared here; properties run over random chains, DAGs and graphs holding
weights and states (hypothesis).
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ml_dtypes import bfloat16

import iron
from iron.core.arena import (
    ALIGN,
    ArenaInvariantError,
    ArenaPlan,
    Placed,
    arena_svg,
    liveness,
    version_key,
)
from iron.core.declare import Input, Output, param
from iron.core.operator import Operator

# -- test operators --------------------------------------------------------------------


def _f32(x):
    return np.asarray(x, dtype=np.float32)


class Scale(Operator):
    """out = x * factor."""

    size: int = param()
    factor: float = param(1.0)
    inputs = (Input("x", "size"),)
    outputs = (Output("out", "size"),)

    def resolve(self, dev):
        return {}

    def reference(self, x):
        return (_f32(x) * self.factor).astype(bfloat16)


class Resize(Operator):
    """A vector of one length to another (numpy.resize)."""

    size_in: int = param()
    size_out: int = param()
    inputs = (Input("x", "size_in"),)
    outputs = (Output("out", "size_out"),)

    def resolve(self, dev):
        return {}

    def reference(self, x):
        return np.resize(_f32(x), self.size_out).astype(bfloat16)


class Add(Operator):
    """out = x + y, one length."""

    size: int = param()
    inputs = (Input("x", "size"), Input("y", "size"))
    outputs = (Output("out", "size"),)

    def resolve(self, dev):
        return {}

    def reference(self, x, y):
        return (_f32(x) + _f32(y)).astype(bfloat16)


class Mix(Operator):
    """Two vectors of any lengths to a third (resize both, add)."""

    size_a: int = param()
    size_b: int = param()
    size_out: int = param()
    inputs = (Input("a", "size_a"), Input("b", "size_b"))
    outputs = (Output("out", "size_out"),)

    def resolve(self, dev):
        return {}

    def reference(self, a, b):
        n = self.size_out
        return (np.resize(_f32(a), n) + np.resize(_f32(b), n)).astype(bfloat16)


class Argmax(Operator):
    """The index of the largest entry, as one int32 (a sampled token)."""

    size: int = param()
    inputs = (Input("x", "size"),)
    outputs = (Output("out", 1, dtype=np.int32),)

    def resolve(self, dev):
        return {}

    def reference(self, x):
        return np.array([np.argmax(_f32(x))], dtype=np.int32)


class Rows(Operator):
    """An elementwise map over a 2-D tensor (a norm, a rotary, an activation)."""

    m: int = param()
    n: int = param()
    inputs = (Input("x", "m", "n"),)
    outputs = (Output("out", "m", "n"),)

    def resolve(self, dev):
        return {}

    def reference(self, x):
        return np.tanh(_f32(x)).astype(bfloat16)


class Add2(Operator):
    """out = x + y over 2-D tensors."""

    m: int = param()
    n: int = param()
    inputs = (Input("x", "m", "n"), Input("y", "m", "n"))
    outputs = (Output("out", "m", "n"),)

    def resolve(self, dev):
        return {}

    def reference(self, x, y):
        return (_f32(x) + _f32(y)).astype(bfloat16)


class Linear(Operator):
    """out = x @ w.T, w held as a weight (n, k)."""

    m: int = param()
    k: int = param()
    n: int = param()
    inputs = (Input("x", "m", "k"), Input("w", "n", "k"))
    outputs = (Output("out", "m", "n"),)

    def resolve(self, dev):
        return {}

    def reference(self, x, w):
        return (_f32(x) @ _f32(w).T).astype(bfloat16)


class Attend(Operator):
    """A stand-in for attention: q (m, d), k and v (m, kv) to (m, d)."""

    m: int = param()
    d: int = param()
    kv: int = param()
    inputs = (Input("q", "m", "d"), Input("k", "m", "kv"), Input("v", "m", "kv"))
    outputs = (Output("out", "m", "d"),)

    def resolve(self, dev):
        return {}

    def reference(self, q, k, v):
        s = _f32(k).sum(axis=1, keepdims=True) * _f32(v).mean(axis=1, keepdims=True)
        return (_f32(q) + s).astype(bfloat16)


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


class Dag(iron.Graph):
    """Each step mixes one or two earlier handles (fan-out and fan-in)."""

    def __init__(self, plan, returned):
        self.plan = list(plan)  # (size, a, b or None), a and b index earlier handles
        self.returned = returned

    def body(self, x):
        handles = [x]
        for size, a, b in self.plan:
            ha = handles[a % len(handles)]
            if b is None:
                handles.append(Resize.step(ha, size_out=size))
            else:
                hb = handles[b % len(handles)]
                handles.append(Mix.step(ha, hb, size_out=size))
        last = handles[-1]
        extra = handles[self.returned % len(handles)]
        if extra is last or extra is x:
            return last
        return last, extra


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


class Layers(iron.Graph):
    """``layers`` identical blocks of three steps: a = x*2, b = a*3, x = a + b."""

    def __init__(self, layers):
        self.layers = layers

    def body(self, x):
        for _ in range(self.layers):
            a = Scale.step(x, factor=2.0)
            b = Scale.step(a, factor=3.0)
            x = Add.step(a, b)
        return x


class Llama(iron.Graph):
    """A Llama-shaped decoder: norm, q/k/v, rotary, attention, o, MLP, residuals."""

    def __init__(self, layers=16, d=64, kv=32, ff=256):
        def w(n, k):
            return iron.param(np.full((n, k), 0.01, dtype=bfloat16))

        self.layers = [
            {
                "q": w(d, d),
                "k": w(kv, d),
                "v": w(kv, d),
                "o": w(d, d),
                "gate": w(ff, d),
                "up": w(ff, d),
                "down": w(d, ff),
            }
            for _ in range(layers)
        ]
        self.k_cache = [iron.state((1, kv)) for _ in range(layers)]
        self.head = w(128, d)

    def body(self, x):
        for layer, cache in zip(self.layers, self.k_cache):
            h = Rows.step(x)
            q = Rows.step(Linear.step(h, layer["q"]))
            k = Rows.step(Linear.step(h, layer["k"]))
            v = Linear.step(h, layer["v"])
            Rows.step(k[0:1], out=cache)
            attn = Attend.step(q, k, v)
            x = Add2.step(x, Linear.step(attn, layer["o"]))
            h = Rows.step(x)
            gate = Rows.step(Linear.step(h, layer["gate"]))
            up = Linear.step(h, layer["up"])
            x = Add2.step(x, Linear.step(Add2.step(gate, up), layer["down"]))
        return Linear.step(Rows.step(x), self.head)


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


# -- strategies ------------------------------------------------------------------------

SIZES = [16, 32, 48, 64, 96, 100, 128, 256, 384, 500, 512, 1000, 1024, 2048, 3000, 4096]
sizes = st.sampled_from(SIZES)

chains = st.tuples(sizes, st.lists(sizes, min_size=1, max_size=40))


@st.composite
def dags(draw):
    n = draw(st.integers(1, 30))
    plan = []
    for i in range(n):
        a = draw(st.integers(0, i))
        b = draw(st.one_of(st.none(), st.integers(0, i)))
        plan.append((draw(sizes), a, b))
    return draw(sizes), plan, draw(st.integers(0, n))


held = st.tuples(
    st.lists(sizes, max_size=4),
    st.lists(sizes, max_size=3),
    st.lists(sizes, min_size=1, max_size=12),
    st.lists(sizes, min_size=1, max_size=4, unique=True),
)

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- properties ------------------------------------------------------------------------


@SETTINGS
@given(chains)
def test_chains_meet_the_lower_bound(chain):
    first, steps = chain
    recording = record(Chain(steps), x=(first,))
    plan = ArenaPlan()
    plan.add(recording)
    assert_sound(plan)
    assert_liveness(plan, recording)
    assert_steps_apart(plan, recording)
    bound = plan.lower_bound
    assert plan.lower_bound_of() == bound
    assert bound <= plan.transient_bytes() <= 1.02 * bound
    assert plan.transient_bytes() <= plan.no_reuse_bytes()
    kinds = {p.kind for p in plan.buffers.values()}
    assert kinds <= {"input", "output", "transient"}
    assert plan.buffers["x"].kind == "input"
    assert plan.buffers[recording.outputs[0].name].kind == "output"


@SETTINGS
@given(dags())
def test_dags_are_sound(dag):
    first, steps, returned = dag
    recording = record(Dag(steps, returned), x=(first,))
    plan = ArenaPlan()
    plan.add(recording)
    assert_sound(plan)
    assert_liveness(plan, recording)
    assert_steps_apart(plan, recording)
    assert plan.lower_bound <= plan.transient_bytes() <= plan.no_reuse_bytes()
    for h in recording.outputs:
        assert plan.buffers[h.name].kind in ("output", "input")


@SETTINGS
@given(held)
def test_residents_keep_their_offsets_across_versions(case):
    weights, states, steps, inputs = case
    graph = Held(weights, states, steps)
    plan = ArenaPlan()
    sizes_seen = []
    for n in inputs:
        recording = record(graph, x=(n,))
        before = plan.size
        old = dict(plan.residents)
        placed = plan.add(recording)
        sizes_seen.append(plan.size)
        assert plan.size >= before
        for name, p in placed.items():
            if p.kind == "resident":
                if name in old:
                    assert (p.offset, p.nbytes) == (old[name].offset, old[name].nbytes)
                else:
                    assert p.offset >= before
                assert (p.first, p.last) == (0, max(len(recording.steps) - 1, 0))
        assert_sound(plan)
        assert_liveness(plan, recording)
        assert_steps_apart(plan, recording)
        assert plan.lower_bound_of() <= plan.transient_bytes()
    assert sizes_seen == sorted(sizes_seen)
    expected = (
        {f"w.{i % len(weights)}" for i in range(len(steps))} if weights else set()
    )
    if states:
        expected |= {f"s.{i % len(states)}" for i in (0, *range(0, len(steps), 2))}
    assert set(plan.residents) == expected
    assert plan.resident_bytes == sum(r.nbytes for r in plan.residents.values())
    assert plan.lower_bound == max(plan.lower_bound_of(v) for v in plan.versions)


@SETTINGS
@given(st.lists(chains, min_size=1, max_size=5))
def test_versions_reuse_each_others_bytes_and_the_arena_only_grows(versions):
    plan = ArenaPlan()
    tops = []
    for i, (first, steps) in enumerate(versions):
        recording = record(Chain(steps), x=(first,))
        plan.add(recording, version=f"v{i}")
        tops.append(plan.size)
        assert_sound(plan)
    assert tops == sorted(tops)
    # Versions never run at once: the arena is the largest version, not the sum.
    assert plan.size == max(
        max((p.end for p in placed.values() if p.in_arena), default=0)
        for placed in plan.versions.values()
    )


# -- examples --------------------------------------------------------------------------


def test_identical_layers_fold_into_a_ping_pong():
    recording = record(Layers(16), x=(1024,))
    plan = ArenaPlan()
    plan.add(recording)
    assert_sound(plan)
    transients = [p for p in plan.buffers.values() if p.kind == "transient"]
    assert len(transients) == 16 * 3 - 1
    assert len({p.offset for p in transients}) <= 4
    assert plan.transient_bytes() == plan.lower_bound == 3 * 2048


def test_llama_shaped_graph_meets_the_lower_bound_in_every_version():
    graph = Llama()
    plan = ArenaPlan()
    for m in (1, 8, 3):
        recording = record(graph, x=(m, 64))
        plan.add(recording)
        assert plan.transient_bytes() <= 1.02 * plan.lower_bound_of()
        assert_steps_apart(plan, recording)
    assert_sound(plan)
    assert len(plan.versions) == 3
    assert len(plan.residents) == 16 * 7 + 16 + 1
    offsets = [
        {n: p.offset for n, p in placed.items() if p.kind == "resident"}
        for placed in plan.versions.values()
    ]
    assert offsets[0] == offsets[1] == offsets[2]


def test_a_slice_lives_in_its_parents_bytes():
    class Sliced(iron.Graph):
        def body(self, x):
            a = Scale.step(x)
            b = Scale.step(x)
            c = Scale.step(a[32:64])
            return Mix.step(c, b, size_out=16)

    recording = record(Sliced(), x=(128,))
    plan = ArenaPlan()
    placed = plan.add(recording)
    sliced = recording.steps[2].inputs[0]
    assert sliced.name == "scale0" and sliced.layout.offset == 32
    assert "scale0" in placed and placed["scale0"].last == 2
    assert placed["scale0"].nbytes == 128 * 2
    assert_sound(plan)


def test_a_host_step_keeps_its_buffers_live_around_it():
    class Hosted(iron.Graph):
        def __init__(self):
            self.s = iron.state(64)

        def body(self, x):
            a = Scale.step(x)
            b = Scale.step(a)
            iron.on_host(lambda *_: None, a, writes=self.s)
            c = Scale.step(b)
            d = Scale.step(c)
            return Mix.step(d, self.s, size_out=64)

    recording = record(Hosted(), x=(64,))
    assert recording.host[0].after == 2
    placed = ArenaPlan().add(recording)
    # Read by the host between steps 1 and 2: live over both.
    assert (placed["scale0"].first, placed["scale0"].last) == (0, 2)
    assert placed["s"].kind == "resident"
    assert (placed["s"].first, placed["s"].last) == (0, 4)


def test_a_carried_handle_is_an_output():
    class Carrying(iron.Graph):
        def body(self, x, *, token: iron.Carried[int] = 0):
            a = Scale.step(x)
            sampled = Argmax.step(a)
            return Scale.step(a), iron.carry(token=sampled)

    recording = record(Carrying(), x=(64,))
    placed = ArenaPlan().add(recording)
    carried = recording.carry["token"].name
    assert placed[carried].kind == "output"
    assert (placed[carried].first, placed[carried].last) == (1, 2)
    assert placed["scale0"].kind == "transient"
    assert {b.name: b.kind for b in liveness(recording)}[carried] == "output"


def test_planning_a_version_twice_returns_the_same_placement():
    recording = record(Chain([64, 128, 32]), x=(16,))
    plan = ArenaPlan()
    first = plan.add(recording)
    again = plan.add(record(Chain([64, 128, 32]), x=(16,)))
    assert again is first
    assert list(plan.versions) == [version_key(recording)]
    assert version_key(recording) == "Chain(x=16 bf16)"


def test_a_resident_at_another_size_raises_and_places_nothing():
    class One(iron.Graph):
        def __init__(self, n):
            self.w = iron.param(np.ones(n, dtype=bfloat16))

        def body(self, x):
            return Mix.step(x, self.w, size_out=64)

    plan = ArenaPlan()
    plan.add(record(One(64), x=(64,)), version="a")
    before = (plan.size, dict(plan.residents), list(plan.versions))
    with pytest.raises(ValueError, match=r"'w' at 256 bytes.*128 bytes"):
        plan.add(record(One(128), x=(64,)), version="b")
    assert (plan.size, dict(plan.residents), list(plan.versions)) == before
    plan.check()


def test_check_catches_an_overlap():
    recording = record(Chain([256, 512, 256, 128]), x=(64,))
    plan = ArenaPlan()
    placed = plan.add(recording)
    a, b = placed["resize0"], placed["resize1"]
    assert a.last >= b.first
    placed["resize0"] = dataclasses.replace(a, offset=b.offset)
    with pytest.raises(ArenaInvariantError, match=r"resize0.*resize1.*share bytes"):
        plan.check()


def test_check_catches_a_misaligned_offset():
    plan = ArenaPlan()
    placed = plan.add(record(Chain([256, 512, 256]), x=(64,)))
    placed["resize1"] = dataclasses.replace(placed["resize1"], offset=8)
    with pytest.raises(ArenaInvariantError, match="offset 8, not a multiple of 64"):
        plan.check()


def test_check_catches_a_moved_resident():
    graph = Held([64], [32], [128, 64])
    plan = ArenaPlan()
    plan.add(record(graph, x=(16,)))
    placed = plan.add(record(graph, x=(32,)))
    name = next(n for n, p in placed.items() if p.kind == "resident")
    placed[name] = dataclasses.replace(placed[name], offset=placed[name].offset + 64)
    with pytest.raises(ArenaInvariantError, match=f"resident {name!r}"):
        plan.check()
    assert issubclass(ArenaInvariantError, ValueError)


def test_check_catches_a_transient_over_a_resident_of_another_version():
    graph = Held([1024], [], [64, 64])
    plan = ArenaPlan()
    plan.add(record(graph, x=(16,)), version="a")
    placed = plan.add(record(Chain([64, 64, 64]), x=(16,)), version="b")
    resident = plan.residents["w.0"]
    placed["resize0"] = dataclasses.replace(placed["resize0"], offset=resident.offset)
    with pytest.raises(ArenaInvariantError, match="w.0"):
        plan.check()


def test_placed_and_report():
    p = Placed("t", 128, 100, 2, 5, "transient")
    assert p.end == 228 and p.in_arena and p.live_at(5) and not p.live_at(6)
    assert not Placed("x", 0, 4, 0, 1, "input").in_arena
    plan = ArenaPlan()
    plan.add(record(Held([64], [32], [128, 256, 64]), x=(16,)))
    text = plan.report()
    assert text.startswith("Arena of Held(x=16 bf16)")
    for word in ("resident", "transient", "input", "output", "lower bound", "ratio"):
        assert word in text
    with pytest.raises(KeyError, match="add"):
        plan.report("nope")
    with pytest.raises(ValueError, match="add"):
        ArenaPlan().report()
    with pytest.raises(ValueError, match="power of two"):
        ArenaPlan(align=48)
    assert ArenaPlan().buffers == {} and ArenaPlan().size == 0


def test_svg_is_valid_xml_with_one_rect_per_arena_buffer():
    plan = ArenaPlan()
    plan.add(record(Held([64, 128], [32], [128, 256, 64, 512]), x=(16,)))
    svg = arena_svg(plan)
    assert svg == arena_svg(plan)
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    rects = [r for r in root.iter(f"{ns}rect") if r.find(f"{ns}title") is not None]
    arena = [p for p in plan.buffers.values() if p.in_arena]
    assert len(rects) == len(arena)
    tips = {r.find(f"{ns}title").text.split(" ")[0] for r in rects}
    assert tips == {p.name for p in arena}
    assert "lower bound" in root.find(f"{ns}title").text
