"""Arena placement examples on graphs recorded for NPU2.

Identical layers fold into a ping-pong, a Llama-shaped decoder meets the lower
bound in each version, and slices, host steps, carried handles, repeated
versions and residents of another size are placed as they should be.
"""

from __future__ import annotations

import numpy as np
import pytest
from arena_for_tests import Chain, assert_sound, assert_steps_apart, record
from ml_dtypes import bfloat16
from operators_for_tests import Add, Add2D, ArgMax, Attend, Linear, Mix, Scale, Tanh

import iron
from iron.core.arena import ArenaPlan, liveness, version_key

# -- graphs --------------------------------------------------------------------------


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
            h = Tanh.step(x)
            q = Tanh.step(Linear.step(h, layer["q"]))
            k = Tanh.step(Linear.step(h, layer["k"]))
            v = Linear.step(h, layer["v"])
            Tanh.step(k[0:1], out=cache)
            attn = Attend.step(q, k, v)
            x = Add2D.step(x, Linear.step(attn, layer["o"]))
            h = Tanh.step(x)
            gate = Tanh.step(Linear.step(h, layer["gate"]))
            up = Linear.step(h, layer["up"])
            x = Add2D.step(x, Linear.step(Add2D.step(gate, up), layer["down"]))
        return Linear.step(Tanh.step(x), self.head)


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
            sampled = ArgMax.step(a)
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
