"""The device's one worker: requests in arrival order, a bounded queue.

One model per process, one thread driving it: jobs wait in a FIFO queue
and run one at a time. Past ``bound`` waiting jobs, :meth:`Worker.submit`
refuses (the server answers 503 with ``Retry-After``). A job reports to the
asyncio side through its own queue; cancelling it (the client went away)
stops its generation at the next token, or skips it if it has not started.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Job", "QueueFull", "Worker"]

logger = logging.getLogger("iron.lm.serve")


class QueueFull(RuntimeError):
    """The queue holds its bound of waiting jobs."""


class Job:
    """One request's work, run on the worker thread.

    Args:
        run: Called on the worker thread with the job; it reports with
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


class Worker:
    """A thread that runs jobs one at a time, in the order they came.

    Args:
        bound: At most this many jobs wait behind the running one.
    """

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._waiting = 0
        self._running = 0
        self._lock = threading.Lock()
        #: Jobs run to their end, and jobs cancelled (before or while running).
        self.done = 0
        self.cancelled = 0
        self._thread = threading.Thread(target=self._serve, name="iron-lm-device")
        self._thread.daemon = True
        self._thread.start()

    @property
    def waiting(self) -> int:
        """Jobs submitted and not yet started."""
        return self._waiting

    def submit(self, job: Job) -> None:
        """Queue ``job`` behind the others.

        Raises:
            QueueFull: ``bound`` jobs already wait behind a running one.
        """
        with self._lock:
            if self._waiting + self._running > self.bound:
                raise QueueFull(
                    f"the device is busy and {self._waiting} requests wait for it, "
                    f"the most this server queues (--max-queue {self.bound}); "
                    "retry shortly"
                )
            self._waiting += 1
            self._jobs.put(job)

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            with self._lock:
                self._waiting -= 1
                self._running = 1
            try:
                self._run(job)
            finally:
                with self._lock:
                    self._running = 0

    def _run(self, job: Job) -> None:
        if job.cancelled.is_set():
            self.cancelled += 1
            job.put("cancelled")
            return
        try:
            job.run(job)
        except Exception as error:  # reported to the request, never lost
            logger.exception("a request failed on the device")
            job.put("error", error)
        if job.outcome == "cancelled":
            self.cancelled += 1
            logger.info("a request was cancelled (its client went away)")
        else:
            self.done += 1

    def stop(self, timeout: float = 30.0) -> None:
        """Cancel what waits, let the running job end, join the thread."""
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job.cancel()
                job.put("cancelled")
        self._jobs.put(None)
        self._thread.join(timeout)
