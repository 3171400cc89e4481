"""Arena plans over random chains, DAGs and graphs holding weights and states.

Hypothesis checks each plan independently (arena_for_tests): sound, live
exactly while touched, a step's operands apart, near the lower bound, and
residents at one offset in every version while the arena only grows.
"""

from __future__ import annotations

from arena_for_tests import (
    Chain,
    Held,
    assert_liveness,
    assert_sound,
    assert_steps_apart,
    record,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from operators_for_tests import Mix, Resize

import iron
from iron.core.arena import ArenaPlan


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
