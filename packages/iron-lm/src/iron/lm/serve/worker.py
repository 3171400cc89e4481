"""A request's work as the server hands it to the device's scheduler.

A :class:`Job` reports to the asyncio side through its own queue: from a
thread of its own (``run``, which :mod:`iron.lm.serve.scheduler` starts),
or, for a request in a slot, from the event loop itself (the scheduler's
listener calls, no thread); cancelling it (the client went away) frees its
slot at the next step, or skips it if it has not started. Past the queue's
bound the scheduler refuses a job with :class:`QueueFull` (the server
answers 503 with ``Retry-After``).
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
    """One request's work: on a thread of its own, or on the loop.

    Args:
        run: Called on the job's thread with the job; it reports with
            :meth:`put` and checks :attr:`cancelled` between tokens. None
            for a job that runs on the loop (it reports with
            ``out.put_nowait``).
        loop: The event loop whose side reads :attr:`out`.
    """

    def __init__(
        self, run: Callable[[Job], None] | None, loop: asyncio.AbstractEventLoop
    ):
        self.run = run
        self.cancelled = threading.Event()
        #: How it ended: "done" or "cancelled" (set by ``run``, or by the
        #: scheduler for a job on the loop).
        self.outcome: str | None = None
        self.out: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.loop = loop

    def put(self, kind: str, value: Any = None) -> None:
        """Hand ``(kind, value)`` to the asyncio side (from any thread)."""
        try:
            self.loop.call_soon_threadsafe(self.out.put_nowait, (kind, value))
        except RuntimeError:  # the loop is closed: nobody is listening
            self.cancelled.set()

    def cancel(self) -> None:
        """Stop at the next token (or never start)."""
        self.cancelled.set()
