"""The scratch arena: the device buffer behind a graph's ``ArenaPlan``.

One per graph and device, shared by all its versions: transients at their
planned offsets, weights and states at theirs, and the set of weights
already uploaded. When a later compile grows the plan, the arena
reallocates, copies its contents (states survive), bumps its generation, and
every version binds the new buffer on its next call. Each image bakes its
offsets in, so the plan only grows; compile every shape before the first
call to avoid the copy. A plan is made on a snapshot of the arena's plan;
the arena takes the snapshot (:meth:`ScratchArena.commit`) only once the
version is built, so a compile that fails leaves it as it was.

A graph keeps its arenas in its state's backend slot
(:attr:`iron.core.graph_state.GraphState.backend`); ``Graph.release`` calls
:meth:`ScratchArena.release`.
"""

from __future__ import annotations

import logging

from iron.core.arena import ArenaPlan
from iron.core.plan import Plan
from iron.runtime.driver import BufferObject, DriverDevice

__all__ = ["ScratchArena"]

logger = logging.getLogger("iron.runtime")


class ScratchArena:
    """The device memory of a graph's arena plan.

    Attributes:
        plan: The graph's arena plan, shared by its versions.
        device: The opened device it lives on.
        loaded: Keys of the weights already uploaded (shared by versions).
        generation: Bumped each time the buffer is reallocated.
        called: Whether any version has been called (growth after is logged).
    """

    def __init__(self, device: DriverDevice, plan: ArenaPlan, name: str) -> None:
        self.device = device
        self.plan = plan
        self.name = name
        self.loaded: set = set()
        self.generation = 0
        self.called = False
        self._bo: BufferObject | None = None

    def commit(self, plan: Plan) -> None:
        """Take ``plan``'s arena layout: its version is built.

        Raises:
            ValueError: ``plan`` was made on an older layout than this
                arena's (see :meth:`iron.core.arena.ArenaPlan.commit`);
                nothing changes.
        """
        self.plan.commit(plan.arena)

    @property
    def nbytes(self) -> int:
        """Bytes currently allocated (0 before the first use)."""
        return 0 if self._bo is None else self._bo.nbytes

    def buffer(self) -> BufferObject:
        """The device buffer, allocated or grown to the plan's size first."""
        need = max(self.plan.size, 64)
        if self._bo is None:
            self._bo = self.device.alloc(need, f"{self.name} arena")
            self.generation += 1
        elif self._bo.nbytes < need:
            self._grow(need)
        return self._bo

    def _grow(self, need: int) -> None:
        old = self._bo
        assert old is not None
        if self.called:
            logger.warning(
                "%s: a compile after the first call grows the arena from %d to %d "
                "bytes; its contents are copied. Compile every shape before the "
                "first call to avoid it.",
                self.name,
                old.nbytes,
                need,
            )
        new = self.device.alloc(need, f"{self.name} arena")
        old.from_device()
        new.host()[: old.nbytes] = old.host()
        new.to_device()
        old.free()
        self._bo = new
        self.generation += 1

    def release(self) -> None:
        """Free the device memory; the next use allocates it again, empty."""
        if self._bo is not None:
            self._bo.free()
        self._bo = None
        self.loaded.clear()
