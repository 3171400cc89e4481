"""A request's work as the server hands it to the device's scheduler.

A :class:`Job` runs on a thread of its own (:mod:`iron.lm.serve.scheduler`
starts it) and reports to the asyncio side through its own queue;
cancelling it (the client went away) frees its slot at the next step, or
skips it if it has not started. Past the queue's bound the scheduler
refuses a job with :class:`QueueFull` (the server answers 503 with
``Retry-After``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Job", "QueueFull"]

logger = logging.getLogger("iron.lm.serve")


class QueueFull(RuntimeError):
    """The queue holds its bound of waiting jobs."""


class Job:
    """One request's work, run on a thread of its own.

    Args:
        run: Called on the job's thread with the job; it reports with
            :meth:`put` and checks :attr:`cancelled` between tokens.
        loop: The event loop whose side reads :attr:`out`.
    """

    def __init__(self, run: Callable[[Job], None], loop: asyncio.AbstractEventLoop):
        self.run = run
        self.cancelled = threading.Event()
        #: How the run ended: "done" or "cancelled" (set by ``run``).
        self.outcome: str | None = None
        self.out: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._loop = loop

    def put(self, kind: str, value: Any = None) -> None:
        """Hand ``(kind, value)`` to the asyncio side (from any thread)."""
        try:
            self._loop.call_soon_threadsafe(self.out.put_nowait, (kind, value))
        except RuntimeError:  # the loop is closed: nobody is listening
            self.cancelled.set()

    def cancel(self) -> None:
        """Stop at the next token (or never start)."""
        self.cancelled.set()
