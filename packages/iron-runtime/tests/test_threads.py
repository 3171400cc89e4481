"""One compiled graph called from several threads, an interrupted call, a dropped graph.

Every call of a graph's versions holds the graph's lock: calls from several
threads each get their own result (checked against the host reference),
never another thread's answer, a mix of inputs, or "already in flight". A
call interrupted while it waits (Ctrl-C) waits out its run before raising.
The emulator's worker keeps no run after it, so a dropped graph's memory
goes with its last reference.
"""

from __future__ import annotations

import gc
import signal
import threading
import time
import tracemalloc
import weakref

import numpy as np
import pytest
from ops import Add32, Scale32

import iron
from iron.runtime.driver import RunState
from iron.runtime.emu import EmuRun

THREADS = 4
ROUNDS = 40
SIZE = 2048


def F32(size: int) -> tuple:  # noqa: N802 - reads as a type in compile(x=F32(n))
    """An input's shape and dtype for ``compile``: float32 of ``size``."""
    return ((size,), np.float32)


class Mixed(iron.Graph):
    """``3 x[:n] + y[:n]``: two inputs, a transient and a per-call bound."""

    def body(self, x, y, *, n: iron.Scratchpad[int]):
        return Add32.step(Scale32.step(x[:n], factor=3.0), y[:n])


def _inputs(thread: int, rounds: int, size: int = SIZE) -> list[tuple]:
    """Each round's ``(x, y, n)``: distinct per thread and round."""
    rng = np.random.default_rng(1000 * thread + size)
    return [
        (
            rng.standard_normal(size).astype(np.float32),
            rng.standard_normal(size).astype(np.float32),
            int(rng.integers(1, size + 1)),
        )
        for _ in range(rounds)
    ]


def _hammer(call, work: list[list[tuple]]) -> list[list]:
    """Run ``call(*args)`` over each thread's work, all threads in step.

    A barrier starts every round in every thread at once, so the calls
    really race. Returns each thread's results (or the exception raised).
    """
    barrier = threading.Barrier(len(work))
    results: list[list] = [[] for _ in work]

    def serve(k: int) -> None:
        with iron.use_device(device):
            for args in work[k]:
                barrier.wait(timeout=60)
                try:
                    results[k].append(call(*args))
                except Exception as error:  # reported by the test
                    results[k].append(error)

    device = iron.get_current_device()
    threads = [threading.Thread(target=serve, args=(k,)) for k in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads)
    return results


def _check(graph: iron.Graph, work: list[list[tuple]], results: list[list]) -> None:
    failures = []
    for k, (done, asked) in enumerate(zip(results, work)):
        for r, (got, (x, y, n)) in enumerate(zip(done, asked)):
            want = graph.reference(x, y, n=n)
            if isinstance(got, Exception):
                failures.append(f"thread {k} round {r}: {got!r}")
            elif got.shape != want.shape or not np.array_equal(got, want):
                failures.append(f"thread {k} round {r}: another call's result")
    assert not failures, f"{len(failures)} wrong: {failures[:5]}"


@pytest.mark.parametrize("device", ["npu1", "npu2"])
def test_one_version_called_from_threads_gives_each_its_own_result(device):
    with iron.use_device(device):
        graph = Mixed()
        version = graph.compile(x=F32(SIZE), y=F32(SIZE))
        work = [_inputs(k, ROUNDS) for k in range(THREADS)]
        results = _hammer(lambda x, y, n: version(x, y, n=n), work)
        _check(graph, work, results)


def test_two_versions_of_one_graph_called_from_threads():
    """They share the arena (transients at the same offsets): serialized too."""
    graph = Mixed()
    graph.compile(x=F32(SIZE), y=F32(SIZE))
    graph.compile(x=F32(SIZE // 2), y=F32(SIZE // 2))
    work = [_inputs(k, ROUNDS, SIZE // (1 + k % 2)) for k in range(THREADS)]
    results = _hammer(lambda x, y, n: graph(x, y, n=n), work)
    _check(graph, work, results)


def test_a_call_waits_for_one_in_flight_then_runs_on_its_own_inputs(gate):
    """The second call writes nothing until the first is done."""
    graph = Mixed()
    version = graph.compile(x=F32(SIZE), y=F32(SIZE))
    (x1, y1, n1), (x2, y2, n2) = _inputs(0, 1)[0], _inputs(1, 1)[0]
    first: list = []
    holder = threading.Thread(target=lambda: first.append(version(x1, y1, n=n1)))
    holder.start()  # its run waits at the gate, in flight
    second: list = []
    waiter = threading.Thread(target=lambda: second.append(version(x2, y2, n=n2)))
    waiter.start()
    waiter.join(timeout=0.3)
    assert waiter.is_alive(), "the second call did not wait for the first"
    gate.release(10)
    holder.join(timeout=30)
    waiter.join(timeout=30)
    np.testing.assert_array_equal(first[0], graph.reference(x1, y1, n=n1))
    np.testing.assert_array_equal(second[0], graph.reference(x2, y2, n=n2))


@pytest.mark.parametrize("device", ["npu1", "npu2"])
def test_an_interrupted_call_waits_out_its_run_and_the_next_call_runs(
    gate, monkeypatch, device
):
    """Ctrl-C while a call waits: the run it started is waited out first."""
    with iron.use_device(device):
        graph = Mixed()
        version = graph.compile(x=F32(SIZE), y=F32(SIZE))
        original = EmuRun.wait
        interrupts = [KeyboardInterrupt()]

        def wait(self, timeout=None):
            if interrupts:
                raise interrupts.pop()  # as Ctrl-C lands in a blocked wait
            return original(self, timeout)

        monkeypatch.setattr(EmuRun, "wait", wait)
        (x, y, n), (x2, y2, n2) = _inputs(2, 2)
        timer = threading.Timer(0.5, gate.release, args=(1000,))
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            version(x, y, n=n)  # its run is held at the gate until the timer
        # not "this run is already in flight": the interrupted run was waited out
        np.testing.assert_array_equal(
            version(x2, y2, n=n2), graph.reference(x2, y2, n=n2)
        )
        timer.join()


# -- a call on an idle device runs in the caller's thread ------------------------------


def _executions(monkeypatch) -> list[tuple[EmuRun, str]]:
    """Each run the emulator executes, with the thread that executed it."""
    seen: list[tuple[EmuRun, str]] = []
    original = EmuRun.execute

    def execute(self):
        seen.append((self, threading.current_thread().name))
        original(self)

    monkeypatch.setattr(EmuRun, "execute", execute)
    return seen


def test_a_call_on_an_idle_device_runs_in_the_callers_thread(monkeypatch):
    graph = Mixed()
    version = graph.compile(x=F32(SIZE), y=F32(SIZE))
    seen = _executions(monkeypatch)
    x, y, n = _inputs(3, 1)[0]
    np.testing.assert_array_equal(version(x, y, n=n), graph.reference(x, y, n=n))
    assert [name for _, name in seen] == [threading.current_thread().name]
    assert version.callable.run.state() == RunState.COMPLETED


def test_a_call_behind_a_run_in_flight_runs_after_it_on_the_worker(gate, monkeypatch):
    """Order is kept: a run started earlier (not waited for) executes first."""
    graph = Mixed()
    version = graph.compile(x=F32(SIZE), y=F32(SIZE))
    other = version.callable.new_run()
    (x1, y1, n1), (x2, y2, n2) = _inputs(4, 2)
    seen = _executions(monkeypatch)
    version.start(other, x1, y1, n=n1)  # in flight: held at the gate
    timer = threading.Timer(0.3, gate.release, args=(1000,))
    timer.start()
    # the call's inputs are staged only once the run in flight is waited out
    np.testing.assert_array_equal(version(x2, y2, n=n2), graph.reference(x2, y2, n=n2))
    timer.join()
    assert [run for run, _ in seen] == [other, version.callable.run], "it jumped"
    assert all(name.startswith("iron-emu-") for _, name in seen)


def _ctrl_c_lands_during_a_run_here(monkeypatch, version, x, y, n):
    """Ctrl-C as the run starts in this thread: it completes, then raises."""
    original = EmuRun.execute
    finished = []

    def execute(self):
        here = threading.current_thread() is threading.main_thread()
        signal.raise_signal(signal.SIGINT)  # Ctrl-C lands as the run starts
        original(self)
        finished.append((here, self.state()))

    monkeypatch.setattr(EmuRun, "execute", execute)
    with pytest.raises(KeyboardInterrupt):
        version(x, y, n=n)
    assert finished == [(True, RunState.COMPLETED)]
    monkeypatch.undo()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_during_a_call_run_here_is_held_until_the_run_ends(monkeypatch):
    """As an interrupted wait waits out its run: the run completes, then Ctrl-C."""
    graph = Mixed()
    version = graph.compile(x=F32(SIZE), y=F32(SIZE))
    x, y, n = _inputs(5, 1)[0]
    # Runs earlier tests left queued on this device finish before this one
    # (one worker, in order): the next call finds the device idle and runs here.
    version(x, y, n=n)
    device = version.callable.images[0].device
    deadline = time.monotonic() + 30
    while not device.begin_here():  # idle, as the call below will find it
        assert time.monotonic() < deadline, "the device never fell idle"
        time.sleep(0.01)
    device.end_here()
    # A shell that starts the tests in the background ignores SIGINT, and a
    # call holds Ctrl-C only where Python's own handler is installed.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _ctrl_c_lands_during_a_run_here(monkeypatch, version, x, y, n)
    finally:
        signal.signal(signal.SIGINT, previous)
    np.testing.assert_array_equal(version(x, y, n=n), graph.reference(x, y, n=n))


# -- a dropped graph frees its memory -------------------------------------------------------

BIG = 1 << 22  # float32: 16 MiB


class Held(iron.Graph):
    """``x + w`` with a 16 MiB weight: an arena worth noticing."""

    def __init__(self) -> None:
        self.w = iron.weight(np.full(BIG, 2.0, np.float32))

    def body(self, x):
        return Add32.step(x, self.w)


@pytest.mark.parametrize("device", ["npu1", "npu2"])
def test_a_dropped_graph_frees_its_arena_and_images(device):
    """``del graph; gc.collect()``: the emulator's worker keeps no last run."""
    with iron.use_device(device):
        iron.runtime.backend_name()  # the device and its worker exist already
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            graph = Held()
            version = graph.compile(x=F32(BIG))
            x = np.ones(BIG, np.float32)
            assert float(graph(x)[-1]) == 3.0
            del x
            gone = {
                "arena buffer": weakref.ref(version.arena.buffer()),
                "image": weakref.ref(version.callable.images[0]),
                "recording": weakref.ref(version.recording),
            }
            held = tracemalloc.get_traced_memory()[0] - before
            assert held > 3 * 4 * BIG  # the weight, the arena's two copies
            del graph, version
            gc.collect()
            kept = [name for name, ref in gone.items() if ref() is not None]
            assert not kept, f"still alive after the last reference went: {kept}"
            left = tracemalloc.get_traced_memory()[0] - before
            assert left < 4 * BIG // 16, f"{left} bytes left of {held}"
        finally:
            tracemalloc.stop()
