"""What iron-core keeps for one graph between calls, in one object it owns.

A :class:`GraphState` holds a graph's profile, whether its params are bound,
its host-reference recordings, its compiled versions by device and input
shapes, and one slot the backend fills as it likes (the runtime keeps its
scratch arenas there). Nothing else is kept on the graph: no package reads
or writes a graph's private attributes; the runtime finds the state through
:func:`state_of`.

The backend slot follows a small protocol: each value is :class:`Releasable`,
and :meth:`GraphState.release` (what ``Graph.release`` calls) releases the
versions first, then each value of the slot.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from iron.core.profile import Profile
    from iron.core.recording import Recording, Signature

__all__ = ["GraphState", "Releasable", "state_of"]

#: The key a graph's state is kept under in its ``__dict__`` (iron-core's alone).
_KEY = "_iron_graph_state"


@runtime_checkable
class Releasable(Protocol):
    """Anything holding device memory that a graph's ``release`` frees."""

    def release(self) -> None:
        """Free the device memory held; a later use may allocate it again."""


@dataclasses.dataclass(eq=False)
class GraphState:
    """One graph's state between calls.

    Attributes:
        profile: The profile steps are made under: a Profile, a directory of
            ``<device>.json`` profiles, or None.
        bound: Whether ``load_state_dict`` bound the graph's params.
        signature: ``body``'s signature, once read.
        references: The host reference's recordings, by device name and
            input signature (dropped when the profile changes).
        versions: The compiled versions, by device name, then input signature.
        backend: The backend's own state for the graph (the runtime's scratch
            arenas, by backend and device), opaque to iron-core; each value
            is :class:`Releasable`.
    """

    profile: Profile | str | os.PathLike[str] | None = None
    bound: bool = False
    signature: Signature | None = None
    references: dict[tuple[Any, ...], Recording] = dataclasses.field(
        default_factory=dict
    )
    versions: dict[str, dict[tuple[Any, ...], Releasable]] = dataclasses.field(
        default_factory=dict
    )
    backend: dict[Hashable, Releasable] = dataclasses.field(default_factory=dict)

    def versions_on(self, device: str) -> dict[tuple[Any, ...], Any]:
        """The versions compiled for ``device`` (a device name), by input signature."""
        return self.versions.setdefault(device, {})

    def release(self) -> None:
        """Release every version, then every value of the backend slot."""
        for versions in self.versions.values():
            for version in versions.values():
                version.release()
        for held in self.backend.values():
            held.release()


def state_of(graph: Any) -> GraphState:
    """The state of ``graph`` (an :class:`~iron.core.graph.Graph`), made on first use.

    Graph subclasses need not call ``Graph.__init__``, so the state is made
    here, the first time anything asks.
    """
    found: GraphState | None = vars(graph).get(_KEY)
    if found is not None:
        return found
    made: GraphState = vars(graph).setdefault(_KEY, GraphState())
    return made
