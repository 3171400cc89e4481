"""One use at a time of a graph's device memory, shared by all its versions.

Every version of a graph works in the graph's one arena: its transients at
the same offsets, its states, its weights. So the runtime lets one use at a
time touch it:

- calls, compiles, loads, releases, ``read`` and ``push`` of any of the
  graph's versions hold the graph's :attr:`GraphUse.lock` (a re-entrant
  lock) for their whole length: a call from a second thread waits, then runs
  on its own inputs and returns its own outputs;
- a :class:`~iron.runtime.CarriedLoop` *claims* the graph from its
  ``start`` until its steps end (exhausted, broken out of, failed) or it is
  closed. Meanwhile every other use (a call, a compile, a release, another
  loop, from any thread) raises :class:`InUseError` before it writes
  anything: a loop suspended between two steps has runs in flight and
  scratchpads its Emits wrote, which any other use would clobber.

A claim holds only while what holds it lives: a loop started and dropped,
or a loop's steps dropped before their first step, leave nothing in flight
and free the graph.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

__all__ = ["GraphUse", "InUseError"]


class InUseError(RuntimeError):
    """A graph (or a decoder) is held by a use that has not finished.

    The message names what holds it (a loop or a generation suspended
    between two steps) and how to end it. Nothing was written.
    """


class _Claim:
    """A loop's hold on a graph: what keeps it (weakly) and how to name it."""

    def __init__(self, holder: Any, what: str) -> None:
        self.holder = weakref.ref(holder)
        self.what = what


class GraphUse:
    """The lock and the claim shared by one graph's versions on one device.

    Attributes:
        name: The graph's name, for messages.
        lock: Held by every call, compile, load, release, read and push of
            the graph's versions; re-entrant.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.lock = threading.RLock()
        self._claim: _Claim | None = None

    @classmethod
    def of(cls, arena: Any) -> GraphUse:
        """The use of the graph whose scratch arena is ``arena`` (made once).

        Kept by the arena's identity without keeping the arena alive.
        """
        with _registry_lock:
            use = _registry.get(arena)
            if use is None:
                use = _registry[arena] = cls(arena.name)
            return use

    def holder(self) -> str | None:
        """What claims the graph now (a loop not finished), or None."""
        claim = self._claim
        if claim is not None and claim.holder() is None:
            # what held it was dropped; it left nothing in flight
            self._claim = claim = None
        return None if claim is None else claim.what

    def check(self, what: str) -> None:
        """Raise unless the graph is free of any claim.

        Args:
            what: The use asking, as its message names it.

        Raises:
            InUseError: A loop claims the graph.
        """
        holder = self.holder()
        if holder is not None:
            raise InUseError(
                f"{what}: {self.name} is in use by {holder}, which has not "
                f"finished (a loop's runs are in flight and its Emits wrote the "
                f"next runs' words); finish its steps or close the loop "
                f"(CarriedLoop.close()) first. Nothing was written."
            )

    def claim(self, holder: Any, what: str) -> _Claim:
        """Claim the graph for ``holder`` (held while it lives), named ``what``.

        Raises:
            InUseError: Another claim holds the graph.
        """
        with self.lock:
            self.check(what)
            claim = self._claim = _Claim(holder, what)
            return claim

    def holds(self, claim: _Claim | None) -> bool:
        """Whether ``claim`` still holds the graph (its holder lives, not freed)."""
        return claim is not None and self.holder() is not None and self._claim is claim

    def hand_over(self, claim: _Claim, holder: Any) -> None:
        """Keep ``claim`` while ``holder`` lives instead (a loop's steps)."""
        claim.holder = weakref.ref(holder)

    def free(self, claim: _Claim | None) -> None:
        """End ``claim`` if it still holds the graph."""
        with self.lock:
            if claim is not None and self._claim is claim:
                self._claim = None


_registry: weakref.WeakKeyDictionary[Any, GraphUse] = weakref.WeakKeyDictionary()
_registry_lock = threading.Lock()
