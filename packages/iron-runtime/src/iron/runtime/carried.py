"""``CarriedLoop``: a graph's carried values looped on the device.

``first`` runs once from the host; then ``body`` (a version that takes no
tensor) runs with ``depth`` runs in flight, each run's Emit writing the next
run's scratchpad, so the host only waits and restarts. Where the device has
no full ELF (npu1) there is no Emit: loop from the host instead, passing each
call's ``Carry`` back in as the next call's values.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterator
from typing import Any

from iron.runtime.compiled import CompiledGraph, Loaded
from iron.runtime.driver import Run

__all__ = ["CarriedLoop"]


class CarriedLoop:
    """A graph's carried values looped on the device.

    ``first`` runs once from the host, then ``body`` (no tensor) with
    ``depth`` runs in flight, each run's Emit writing the next's scratchpad,
    so the host only waits and restarts.

    Raises:
        ValueError: A version has no Emit step, the two are not versions of
            one graph, ``body`` takes a tensor, or ``depth`` is below 1.
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
        first.emit_to(body)
        body.emit_to(body)
        self._runs: list[Run] | None = None
        self._loaded: Loaded | None = None

    def start(self, *tensors: Any, **values: Any) -> None:
        """Run ``first`` on ``tensors`` and ``values``, and wait for it."""
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
        first_run.wait()

    def steps(self, steps: int) -> Iterator[int]:
        """Run ``steps`` steps of ``body``, yielding each index once complete.

        Closing early waits out the steps in flight.
        """
        if self._runs is None:
            raise RuntimeError("CarriedLoop.steps: start() runs first before the loop")
        runs = self._runs
        in_flight: deque[int] = deque()
        for k in range(min(self.depth, steps)):
            self.body.restart(runs[k])
            in_flight.append(k)
        try:
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

    def run(self, steps: int, /, *tensors: Any, **values: Any) -> Iterator[int]:
        """``start`` now, then ``steps``, each index yielded once complete."""
        self.start(*tensors, **values)
        return self.steps(steps)
