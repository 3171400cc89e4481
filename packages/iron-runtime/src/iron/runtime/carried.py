"""``CarriedLoop``: a graph's carried values looped on the device.

``first`` runs once from the host; then ``body`` (a version that takes no
tensor) runs with ``depth`` runs in flight, each run's Emit writing the next
run's scratchpad, so the host only waits and restarts. Where the device has
no full ELF (npu1) there is no Emit: loop from the host instead, passing each
call's ``Carry`` back in as the next call's values.

A loop claims its graph from ``start`` until its steps end or it is closed
(:class:`~iron.runtime.use.GraphUse`): meanwhile any other use of the graph
(a call, a compile, a release, a second loop) raises ``InUseError`` before
it writes anything.
"""

from __future__ import annotations

import contextlib
import weakref
from collections import deque
from collections.abc import Iterator
from typing import Any

from iron.runtime.compiled import CompiledGraph, Loaded
from iron.runtime.driver import Run
from iron.runtime.use import InUseError

__all__ = ["CarriedLoop"]


class CarriedLoop:
    """A graph's carried values looped on the device.

    ``first`` runs once from the host, then ``body`` (no tensor) with
    ``depth`` runs in flight, each run's Emit writing the next's scratchpad,
    so the host only waits and restarts.

    The loop holds its graph from ``start`` until its steps end (all done,
    broken out of, failed) or :meth:`close`: any other use of the graph
    meanwhile raises ``InUseError``, and so does this one's ``start`` while
    its steps are suspended.

    Raises:
        ValueError: A version has no Emit step, the two are not versions of
            one graph, ``body`` takes a tensor, or ``depth`` is below 1.
        InUseError: Another loop over the graph has not finished.
    """

    def __init__(self, first: CompiledGraph, body: CompiledGraph, depth: int = 2):
        for version in (first, body):
            if version.emit is None:
                raise ValueError(
                    f"{version.recording.name}: a full-ELF version with carried "
                    f"values loops; this one has no Emit step (compile one that "
                    f"takes a tensor with feeds= the version it starts)"
                )
        if first.arena is None or first.arena is not body.arena:
            raise ValueError("first and body are versions of one graph")
        if body.recording.inputs:
            raise ValueError(
                f"{body.recording.name}: the looped version takes no tensor, got "
                f"{[h.name for h in body.recording.inputs]}"
            )
        if depth < 1:
            raise ValueError(f"depth is at least 1, got {depth}")
        self.first, self.body, self.depth = first, body, depth
        self.use = body.use
        with self.use.lock:
            self.use.check(f"a new {self!r}")
            first.emit_to(body)
            body.emit_to(body)
        self._runs: list[Run] | None = None
        self._loaded: Loaded | None = None
        self._claim: Any = None  # the graph's claim while started
        self._steps: weakref.ref | None = None  # the live steps() generator

    def _stepping(self) -> bool:
        steps = self._steps() if self._steps is not None else None
        return steps is not None and steps.gi_frame is not None

    def start(self, *tensors: Any, **values: Any) -> None:
        """Run ``first`` on ``tensors`` and ``values``, and wait for it.

        Raises:
            InUseError: Another loop over the graph has not finished, or
                this loop's steps are suspended; nothing was written.
        """
        with self.use.lock:
            if self._stepping():
                raise InUseError(
                    f"{self!r}.start: this loop's steps are suspended with runs "
                    f"in flight; finish or close them (loop.close()) first. "
                    f"Nothing was written."
                )
            # started before, its steps never run or done: nothing in flight
            self.use.free(self._claim)
            self.use.check(f"{self!r}.start")
            body_call = self.body.load().callable
            if self._runs is None or self._loaded is not body_call:
                # Made again when body was released and loaded since.
                self._loaded = body_call
                self._runs = [body_call.run] + [
                    body_call.new_run() for _ in range(self.depth - 1)
                ]
            # Bound again each start: a host call of body between loops reuses
            # its first run and unbinds that run's feedback.
            for k, run in enumerate(self._runs):
                run.bind_feedback(self._runs[(k + 1) % self.depth])
            if self.first is self.body:
                first_run = self._runs[-1]
            else:
                first_run = self.first.callable.run
            first_run.bind_feedback(self._runs[0])
            self.first.start(first_run, *tensors, **values)
            self._claim = self.use.claim(self, repr(self))
            try:
                first_run.wait()
            except BaseException:
                # failed or interrupted: nothing left in flight, nothing held
                Loaded.wait_out(first_run)
                self.use.free(self._claim)
                self._claim = None
                raise

    def steps(self, steps: int) -> Iterator[int]:
        """Run ``steps`` steps of ``body``, yielding each index once complete.

        Closing early waits out the steps in flight. When the steps end (all
        done, closed early, or failed) the loop lets go of its graph.

        Raises:
            RuntimeError: ``start`` has not run since the last steps.
            InUseError: This loop's steps are already under way.
        """
        with self.use.lock:
            if self._stepping():
                raise InUseError(
                    f"{self!r}.steps: this loop's steps are already under way; "
                    f"finish or close them (loop.close()) first"
                )
            if self._runs is None or not self.use.holds(self._claim):
                raise RuntimeError(
                    "CarriedLoop.steps: start() runs first before the loop "
                    "(each start feeds one steps())"
                )
            generator = self._steps_of(steps, self._runs, self._claim)
            self.use.hand_over(self._claim, generator)
            self._steps = weakref.ref(generator)
            return generator

    def _steps_of(self, steps: int, runs: list[Run], claim: Any) -> Iterator[int]:
        in_flight: deque[int] = deque()
        try:
            for k in range(min(self.depth, steps)):
                self.body.restart(runs[k])
                in_flight.append(k)
            for k in range(steps):
                runs[k % self.depth].wait()
                in_flight.popleft()
                if k + self.depth < steps:
                    self.body.restart(runs[k % self.depth])
                    in_flight.append(k + self.depth)
                yield k
        except BaseException:
            # closed early, or a run failed: wait out the runs in flight, and
            # report the first failure, not the runs it left without a feed
            for k in in_flight:
                with contextlib.suppress(Exception):
                    runs[k % self.depth].wait()
            raise
        finally:
            self.use.free(claim)
            if self._claim is claim:
                self._claim = None

    def run(self, steps: int, /, *tensors: Any, **values: Any) -> Iterator[int]:
        """``start`` now, then ``steps``, each index yielded once complete."""
        self.start(*tensors, **values)
        return self.steps(steps)

    def close(self) -> None:
        """End the loop: close its steps (waiting out runs in flight), free the graph.

        Safe to call at any time, and more than once.
        """
        steps = self._steps() if self._steps is not None else None
        if steps is not None:
            steps.close()
        self.use.free(self._claim)
        self._claim = None

    def __repr__(self) -> str:
        return f"CarriedLoop({self.first.name}, {self.body.name}, depth={self.depth})"
