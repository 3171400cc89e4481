"""The context variables recording reads: the active recorder and device fitting.

Kept apart so the modules that record (operators, handles, graphs) share them
without importing one another.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # For the type checker only: the recorder builds handles, steps and held
    # weights, whose modules reach it here at run time; importing it for real
    # would make that a cycle. Typed as the Recorder, their calls on it
    # (address, limit, handle_of, step) are checked against its methods.
    from iron.core.recorder import Recorder

__all__ = ["device_fit", "graph_recorder"]

#: The recorder of the graph whose ``body`` is running, if any.
graph_recorder: ContextVar[Recorder | None] = ContextVar("graph_recorder", default=None)

#: Whether resolving refuses shapes the device cannot run. Off while a graph is
#: recorded for its host reference, which runs any shape.
device_fit: ContextVar[bool] = ContextVar("device_fit", default=True)
