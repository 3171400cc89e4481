"""CarriedLoop on the emulated NPU: a linked list walked on the device.

The graph holds the list's ``nodes`` (node ``i`` links to ``nodes[i]``) and a
``history``. Each run reads ``nodes[token]`` (a per-call offset), writes it to
``history[position]`` and carries ``token=<that node>, position=position+1``;
so after the first run and ``k`` steps, ``history[j]`` is the ``j+1``-th node
visited for every ``j <= k``. The looped version takes no tensor: its Emit
starts itself. ``first`` is either that same version or one taking a dummy
tensor compiled with ``feeds=`` the looped one.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from ops import Add1, Take, Take2

import iron
from iron.runtime import CarriedLoop, InUseError, RunError
from iron.runtime.driver import RunState
from iron.runtime.emu import EmuRun

N = 64
STEPS = 300


class Walk(iron.Graph):
    """One hop along a linked list per run, recorded in a history."""

    def __init__(self, links: np.ndarray, *, on_host: bool = False, steps=STEPS):
        if on_host:
            self.nodes = iron.state((N, 1), np.int32)
        else:
            self.nodes = iron.weight(np.asarray(links, np.int32).reshape(N, 1))
        self.history = iron.state((steps + 1, 1), np.int32)

    def body(
        self,
        dummy=None,
        *,
        token: iron.Carried[int],
        position: iron.Carried[int],
    ):
        if dummy is not None:
            Take.step(dummy)  # a transient as big as the dummy
            # position's word comes first here, token's first in the loop.
            Take.step(self.history[position])
        node = Take.step(self.nodes[token])
        Take.step(node, out=self.history[position])
        return iron.carry(token=node, position=position + 1)


def _links(seed: int) -> np.ndarray:
    """A random linked list: one cycle through every node, in random order."""
    order = np.random.default_rng(seed).permutation(N)
    links = np.empty(N, np.int32)
    links[order] = np.roll(order, -1)
    return links


def _walk(links: np.ndarray, start: int, hops: int) -> list[int]:
    """The nodes visited after ``start``, ``hops`` of them."""
    visited, node = [], start
    for _ in range(hops):
        node = int(links[node])
        visited.append(node)
    return visited


def _history(version, graph) -> np.ndarray:
    return version.read(graph.history).reshape(-1).copy()


def _all_done(loop: CarriedLoop) -> bool:
    return all(run.state() is RunState.COMPLETED for run in loop._runs)


# -- the walk ----------------------------------------------------------------------


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_walk_hundreds_of_steps_with_runs_in_flight(depth):
    links = _links(seed=depth)
    graph = Walk(links)
    looped = graph.compile()
    assert looped.emit is not None and not looped.recording.inputs
    loop = CarriedLoop(looped, looped, depth=depth)
    start = depth * 7 % N
    want = _walk(links, start, STEPS + 1)
    seen = []
    for k in loop.run(STEPS, token=start, position=0):
        seen.append(k)
        if k % 50 == 0:  # yielded once complete: its node is written
            assert looped.read(graph.history)[k + 1, 0] == want[k + 1]
    assert seen == list(range(STEPS))
    np.testing.assert_array_equal(_history(looped, graph), want)
    assert _all_done(loop)


@pytest.mark.parametrize("depth", [1, 3])
def test_walk_nodes_the_host_pushed_into_a_state(depth):
    links = _links(seed=10 + depth)
    graph = Walk(links, on_host=True, steps=120)
    looped = graph.compile()
    nodes = looped.read(graph.nodes)
    nodes[:] = links.reshape(N, 1)
    looped.push(graph.nodes)
    loop = CarriedLoop(looped, looped, depth=depth)
    assert list(loop.run(120, token=5, position=0)) == list(range(120))
    np.testing.assert_array_equal(_history(looped, graph), _walk(links, 5, 121))


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_first_is_a_version_taking_a_tensor_that_feeds_the_loop(depth):
    links = _links(seed=20 + depth)
    graph = Walk(links, steps=100)
    looped = graph.compile()
    first = graph.compile(dummy=(64,), feeds=looped)
    assert first.emit is not None and first is not looped
    loop = CarriedLoop(first, looped, depth=depth)
    loop.start(
        np.ones(64, np.float32).astype(first.recording.inputs[0].dtype),
        token=9,
        position=0,
    )
    assert list(loop.steps(100)) == list(range(100))
    np.testing.assert_array_equal(_history(looped, graph), _walk(links, 9, 101))


def test_a_loop_runs_again_after_a_host_call_of_its_version():
    links = _links(seed=31)
    graph = Walk(links, steps=60)
    looped = graph.compile()
    loop = CarriedLoop(looped, looped, depth=2)
    for _ in loop.run(20, token=0, position=0):
        pass
    want = _walk(links, 0, 21)
    carry = looped(token=want[-1], position=21)  # a host call on the same runs
    assert carry == {"token": int(links[want[-1]]), "position": 22}
    want.append(int(links[want[-1]]))
    for _ in loop.run(30, token=want[-1], position=22):
        pass
    want += _walk(links, want[-1], 31)
    np.testing.assert_array_equal(_history(looped, graph)[:53], want)


# -- runs in flight, early close ----------------------------------------------------------


@pytest.mark.parametrize("depth", [2, 3])
def test_depth_runs_are_really_in_flight(gate, depth):
    links = _links(seed=40 + depth)
    graph = Walk(links, steps=20)
    looped = graph.compile()
    loop = CarriedLoop(looped, looped, depth=depth)
    gate.release()  # first
    loop.start(token=1, position=0)
    steps = loop.steps(20)
    gate.release()  # step 0
    assert next(steps) == 0
    in_flight = [r.state() for r in loop._runs]
    assert all(s in (RunState.QUEUED, RunState.RUNNING) for s in in_flight), in_flight
    gate.release(100)
    assert list(steps) == list(range(1, 20))
    np.testing.assert_array_equal(_history(looped, graph), _walk(links, 1, 21))


def test_closing_early_waits_out_the_runs_in_flight(gate):
    graph = Walk(_links(seed=50), steps=40)
    looped = graph.compile()
    loop = CarriedLoop(looped, looped, depth=3)
    gate.release()
    loop.start(token=2, position=0)
    steps = loop.steps(40)
    gate.release()
    assert next(steps) == 0
    assert not _all_done(loop)
    timer = threading.Timer(0.2, gate.release, args=(100,))
    timer.start()
    steps.close()  # blocks until the timer lets the runs in flight finish
    timer.join()
    assert _all_done(loop)


def test_breaking_out_leaves_no_run_in_flight():
    links = _links(seed=51)
    graph = Walk(links, steps=200)
    looped = graph.compile()
    loop = CarriedLoop(looped, looped, depth=3)
    for k in loop.run(200, token=4, position=0):
        if k == 10:
            break
    assert _all_done(loop)
    history = _history(looped, graph)
    # first and steps 0..10 were yielded; the three in flight finished too.
    np.testing.assert_array_equal(history[:15], _walk(links, 4, 15))
    assert (history[15:] == 0).all()


def test_a_failed_step_is_raised_where_it_is_waited_for():
    links = _links(seed=52)
    graph = Walk(links, steps=10)
    looped = graph.compile()
    loop = CarriedLoop(looped, looped, depth=2)
    # position reaches 11, past the history's rows, on step 10.
    done = []
    with pytest.raises(RunError, match=r"Walk\(\) .*step 1 Take failed"):
        for k in loop.run(15, token=0, position=0):
            done.append(k)
    assert done == list(range(10))
    assert all(r.state() is not RunState.QUEUED for r in loop._runs)


@pytest.mark.parametrize("steps", [0, 1, 2])
def test_fewer_steps_than_depth(steps):
    links = _links(seed=53)
    graph = Walk(links, steps=10)
    looped = graph.compile()
    loop = CarriedLoop(looped, looped, depth=3)
    assert list(loop.run(steps, token=6, position=0)) == list(range(steps))
    history = _history(looped, graph)
    np.testing.assert_array_equal(history[: steps + 1], _walk(links, 6, steps + 1))
    assert (history[steps + 1 :] == 0).all()


# -- arena growth under a loop --------------------------------------------------------------


def test_arena_growth_after_a_loop_preserves_the_state_it_wrote():
    links = _links(seed=60)
    graph = Walk(links, steps=200)
    looped = graph.compile()
    loop = CarriedLoop(looped, looped, depth=2)
    for _ in loop.run(50, token=3, position=0):
        pass
    want = _walk(links, 3, 51)
    size = looped.arena.nbytes
    generation = looped.arena.generation
    first = graph.compile(dummy=(1 << 16,), feeds=looped)
    grown = CarriedLoop(first, looped, depth=3)
    dummy = np.zeros(1 << 16, first.recording.inputs[0].dtype)
    grown.start(dummy, token=want[-1], position=51)
    assert looped.arena.nbytes > size
    assert looped.arena.generation == generation + 1
    for _ in grown.steps(100):
        pass
    want.append(int(links[want[-1]]))
    want += _walk(links, want[-1], 100)
    np.testing.assert_array_equal(_history(looped, graph)[:152], want)


# -- the host path (npu1: no full ELF, no Emit) ------------------------------------------------


@pytest.mark.device("npu1")
def test_npu1_loops_from_the_host_passing_carry_back_in():
    links = _links(seed=70)
    graph = Walk(links, steps=150)
    version = graph.compile()
    assert version.emit is None and not version.plan.full_elf
    with pytest.raises(ValueError, match="no Emit step"):
        CarriedLoop(version, version)
    carry = graph(token=11, position=0)
    for _ in range(150):
        carry = graph(token=carry["token"], position=carry["position"])
    assert carry["position"] == 151
    want = _walk(links, 11, 151)
    assert carry["token"] == want[-1]
    np.testing.assert_array_equal(_history(version, graph), want)


def test_the_host_path_works_on_a_full_elf_too():
    links = _links(seed=71)
    graph = Walk(links, steps=30)
    graph.compile()
    carry = graph(token=0, position=0)
    for _ in range(30):
        carry = graph(token=carry.token, position=carry.position)
    np.testing.assert_array_equal(
        _history(graph.versions[()], graph), _walk(links, 0, 31)
    )


# -- what CarriedLoop refuses -------------------------------------------------------------------


def test_a_version_without_emit_is_refused():
    graph = Walk(_links(seed=80), steps=10)
    looped = graph.compile()
    plain = graph.compile(dummy=(64,))
    assert plain.emit is None
    with pytest.raises(ValueError, match="has no Emit step") as info:
        CarriedLoop(plain, looped)
    assert "feeds=" in str(info.value)


def test_versions_of_two_graphs_are_refused():
    one = Walk(_links(seed=81), steps=10).compile()
    other = Walk(_links(seed=82), steps=10).compile()
    with pytest.raises(ValueError, match="first and body are versions of one graph"):
        CarriedLoop(one, other)


def test_a_body_taking_a_tensor_is_refused():
    graph = Walk(_links(seed=83), steps=10)
    looped = graph.compile()
    fed = graph.compile(dummy=(64,), feeds=looped)
    with pytest.raises(ValueError, match="the looped version takes no tensor"):
        CarriedLoop(looped, fed)


@pytest.mark.parametrize("depth", [0, -1])
def test_depth_below_one_is_refused(depth):
    looped = Walk(_links(seed=84), steps=10).compile()
    with pytest.raises(ValueError, match=f"depth is at least 1, got {depth}"):
        CarriedLoop(looped, looped, depth=depth)


def test_steps_before_start_raises():
    looped = Walk(_links(seed=85), steps=10).compile()
    loop = CarriedLoop(looped, looped)
    with pytest.raises(RuntimeError, match="start"):
        next(loop.steps(3))


def test_a_loop_runs_again_after_its_graph_is_released():
    links = _links(seed=32)
    graph = Walk(links, steps=40)
    looped = graph.compile()
    loop = CarriedLoop(looped, looped, depth=2)
    for _ in loop.run(10, token=0, position=0):
        pass
    graph.release()
    for _ in loop.run(20, token=1, position=0):
        pass
    history = _history(looped, graph)
    np.testing.assert_array_equal(history[:21], _walk(links, 1, 21))
    assert (history[21:] == 0).all(), "the release dropped the earlier walk"


# -- derived words, gathers by device-made ids ---------------------------------------------

K = 16


class Derived(iron.Graph):
    """Words the Emit derives: a clamp and a floor division of a carried value."""

    def __init__(self) -> None:
        self.src = iron.weight(np.arange(100, 100 + K, dtype=np.int32).reshape(K, 1))
        self.out = iron.state((K, 1), np.int32)

    def body(self, *, i: iron.Carried[int]):
        v = Add1.step(self.src[iron.clamp(i - 3, 0, K - 1)])
        Take.step(v, out=self.out[i // 2])
        return iron.carry(i=i + 1)


@pytest.mark.parametrize("depth", [1, 3])
def test_the_emit_derives_clamped_and_divided_words(depth):
    graph = Derived()
    looped = graph.compile()
    symbols = [str(w.expr) for w in looped.words]
    assert any("clamp" in s for s in symbols) and any("// 2" in s for s in symbols)
    loop = CarriedLoop(looped, looped, depth=depth)
    for _ in loop.run(2 * K - 2, i=0):
        pass
    want = np.zeros(K, np.int32)
    for i in range(2 * K - 1):
        want[i // 2] = 100 + min(max(i - 3, 0), K - 1) + 1
    np.testing.assert_array_equal(looped.read(graph.out).reshape(-1), want)


class Gathering(iron.Graph):
    """Rows of a table gathered by a token the device made."""

    def __init__(self, links: np.ndarray) -> None:
        self.links = iron.weight(np.asarray(links, np.int32).reshape(N, 1))
        self.table = iron.weight(np.arange(N * 4, dtype=np.float32).reshape(N, 4))

    def body(self, *, token: iron.Carried[int]):
        nxt = Take.step(self.links[token])
        return Take2.step(self.table[nxt]), iron.carry(token=nxt)


def test_an_emit_cannot_start_a_gather_by_device_made_ids():
    with pytest.raises(ValueError, match="an Emit cannot start it") as info:
        Gathering(_links(seed=90)).compile()
    assert "table" in str(info.value)


@pytest.mark.device("npu1")
def test_a_gather_by_device_made_ids_loops_from_the_host():
    links = _links(seed=91)
    graph = Gathering(links)
    table = np.arange(N * 4, dtype=np.float32).reshape(N, 4)
    token = 7
    for _ in range(20):
        rows, carry = graph(token=token)
        np.testing.assert_array_equal(rows, table[[links[token]]])
        assert carry.token == links[token]
        token = carry.token


def test_emit_to_from_a_version_without_emit_raises():
    graph = Walk(_links(seed=92), steps=10)
    looped = graph.compile()
    plain = graph.compile(dummy=(64,))
    with pytest.raises(ValueError, match="this version has no Emit step"):
        plain.emit_to(looped)


def test_runs_fed_by_a_failed_run_do_not_run(gate):
    """The run after a failure has no fresh scratchpad: it fails without running."""
    links = _links(seed=54)
    graph = Walk(links, steps=10)
    looped = graph.compile()
    loop = CarriedLoop(looped, looped, depth=3)
    gate.release()
    loop.start(token=0, position=0)
    steps = loop.steps(15)
    gate.release(1000)
    with pytest.raises(RunError, match=r"step 1 Take failed") as caught:
        list(steps)
    assert "not run" not in str(caught.value)  # the first failure is reported
    states = [r.state() for r in loop._runs]
    assert states.count(RunState.ERROR) >= 2, states  # the failure and the one it fed


# -- one use at a time: a loop holds its graph until its steps end -------------------------


def _suspended(loop: CarriedLoop, steps: int, stop: int, **values):
    """``loop.run(steps, **values)`` advanced to just after step ``stop``."""
    it = loop.run(steps, **values)
    assert [next(it) for _ in range(stop + 1)] == list(range(stop + 1))
    return it


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_a_host_call_while_the_loop_is_suspended_raises_and_the_loop_walks_on(depth):
    links = _links(seed=100 + depth)
    graph = Walk(links, steps=40)
    looped = graph.compile()
    loop = CarriedLoop(looped, looped, depth=depth)
    loop.start(token=0, position=0)  # first done, its Emit fed the loop's run
    with pytest.raises(InUseError, match=r"a call of Walk\(\).*CarriedLoop\(Walk"):
        looped(token=5, position=30)
    steps = loop.steps(40)
    assert [next(steps) for _ in range(6)] == list(range(6))
    for call in (
        lambda: looped(token=5, position=30),
        lambda: graph(token=5, position=30),
    ):
        with pytest.raises(InUseError, match="has not finished") as info:
            call()
        assert "Nothing was written" in str(info.value)
    assert list(steps) == list(range(6, 40))
    want = _walk(links, 0, 41)
    np.testing.assert_array_equal(_history(looped, graph), want)
    # over: the graph is free again
    assert looped(token=want[-1], position=0) == {
        "token": int(links[want[-1]]),
        "position": 1,
    }


def test_a_call_from_another_thread_while_a_loop_is_suspended_raises():
    links = _links(seed=104)
    graph = Walk(links, steps=30)
    looped = graph.compile()
    loop = CarriedLoop(looped, looped, depth=3)
    steps = _suspended(loop, 30, 4, token=1, position=0)
    raised: list = []

    def call() -> None:
        with iron.use_device("npu2"):
            try:
                looped(token=2, position=20)
            except InUseError as error:
                raised.append(error)

    other = threading.Thread(target=call)
    other.start()
    other.join(timeout=30)
    assert len(raised) == 1  # raised at once: a suspended loop may never resume
    assert list(steps) == list(range(5, 30))
    np.testing.assert_array_equal(_history(looped, graph), _walk(links, 1, 31))


def test_a_second_loop_over_a_version_in_a_loop_raises_and_the_first_walks_on():
    links = _links(seed=105)
    graph = Walk(links, steps=40)
    looped = graph.compile()
    first = CarriedLoop(looped, looped, depth=2)
    made_before = CarriedLoop(looped, looped, depth=3)
    steps = _suspended(first, 40, 7, token=3, position=0)
    with pytest.raises(InUseError, match=r"a new CarriedLoop\(Walk\(\)"):
        CarriedLoop(looped, looped)
    with pytest.raises(InUseError, match=r"CarriedLoop\(Walk\(\), Walk\(\), depth=3\)"):
        made_before.start(token=9, position=0)
    with pytest.raises(InUseError):
        made_before.run(5, token=9, position=0)
    with pytest.raises(InUseError, match="compiling a version of Walk"):
        graph.compile(dummy=(64,), feeds=looped)
    with pytest.raises(InUseError, match="release of"):
        graph.release()
    with pytest.raises(RuntimeError, match="start"):
        made_before.steps(3)
    assert list(steps) == list(range(8, 40))
    np.testing.assert_array_equal(_history(looped, graph), _walk(links, 3, 41))
    # the first loop is over: the other one runs now
    assert list(made_before.run(20, token=6, position=0)) == list(range(20))
    np.testing.assert_array_equal(_history(looped, graph)[:21], _walk(links, 6, 21))


def test_a_loop_refuses_its_own_start_and_steps_while_its_steps_are_suspended():
    links = _links(seed=106)
    graph = Walk(links, steps=30)
    looped = graph.compile()
    loop = CarriedLoop(looped, looped, depth=2)
    steps = _suspended(loop, 30, 2, token=0, position=0)
    with pytest.raises(InUseError, match="steps are suspended"):
        loop.start(token=4, position=0)
    with pytest.raises(InUseError, match="already under way"):
        loop.steps(3)
    assert list(steps) == list(range(3, 30))
    np.testing.assert_array_equal(_history(looped, graph), _walk(links, 0, 31))


def test_a_loop_started_and_left_holds_its_graph_until_closed_or_dropped():
    links = _links(seed=107)
    graph = Walk(links, steps=30)
    looped = graph.compile()
    loop = CarriedLoop(looped, looped, depth=2)
    loop.start(token=0, position=0)
    with pytest.raises(InUseError):
        looped(token=1, position=5)
    loop.close()  # nothing in flight after start: frees the graph
    assert looped(token=1, position=5)["position"] == 6
    loop.close()  # again: nothing
    # a closed suspended loop: its runs in flight waited out first
    steps = _suspended(loop, 30, 3, token=2, position=0)
    loop.close()
    assert _all_done(loop)
    with pytest.raises(StopIteration):
        next(steps)
    np.testing.assert_array_equal(_history(looped, graph)[:5], _walk(links, 2, 5))
    # dropped with its steps never begun, or dropped after start: nothing held
    loop.run(10, token=2, position=0)
    assert looped(token=1, position=5)["position"] == 6
    with pytest.raises(RuntimeError, match=r"start\(\) runs first"):
        loop.steps(3)  # that start's words may be stale now: start again
    again = CarriedLoop(looped, looped, depth=3)
    again.start(token=2, position=0)
    del again
    assert looped(token=1, position=5)["position"] == 6


@pytest.mark.parametrize("depth", [2, 3])
def test_a_failed_loop_once_closed_leaves_its_version_working(depth):
    """A run fed by a failed run fails; one whose words the host or a good
    Emit wrote later runs: the failure does not outlive its loop."""
    links = _links(seed=108 + depth)
    graph = Walk(links, steps=10)
    looped = graph.compile()
    loop = CarriedLoop(looped, looped, depth=depth)
    for _ in range(2):  # the history has 11 rows: position 11 fails
        with pytest.raises(RunError, match=r"step 1 Take failed") as caught:
            for _ in loop.run(15, token=0, position=0):
                pass
        assert "not run" not in str(caught.value)
    # the same loop, another over the same version, and host calls all run
    assert list(loop.run(6, token=3, position=0)) == list(range(6))
    np.testing.assert_array_equal(_history(looped, graph)[:7], _walk(links, 3, 7))
    carry = looped(token=5, position=0)
    assert carry == {"token": int(links[5]), "position": 1}
    other = CarriedLoop(looped, looped, depth=depth)
    assert list(other.run(10, token=7, position=0)) == list(range(10))
    np.testing.assert_array_equal(_history(looped, graph), _walk(links, 7, 11))


def test_ctrl_c_while_start_waits_for_first_leaves_nothing_held(monkeypatch):
    links = _links(seed=111)
    graph = Walk(links, steps=20)
    looped = graph.compile()
    loop = CarriedLoop(looped, looped, depth=2)
    original = EmuRun.wait
    interrupts = [KeyboardInterrupt()]

    def wait(self, timeout=None):
        if interrupts:
            raise interrupts.pop()
        return original(self, timeout)

    monkeypatch.setattr(EmuRun, "wait", wait)
    with pytest.raises(KeyboardInterrupt):
        loop.start(token=0, position=0)
    in_flight = (RunState.QUEUED, RunState.RUNNING)
    assert not any(r.state() in in_flight for r in loop._runs)  # first waited out
    assert looped(token=3, position=0) == {"token": int(links[3]), "position": 1}
    assert list(loop.run(20, token=0, position=0)) == list(range(20))
    np.testing.assert_array_equal(_history(looped, graph), _walk(links, 0, 21))
