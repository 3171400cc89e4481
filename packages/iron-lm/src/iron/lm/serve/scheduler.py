"""The device's one thread: requests batched over the engine's slots.

Continuous batching: a request takes a free slot between steps and leaves
when it is done or cancelled (its slot is free for the next step). Each turn
of the loop admits waiting requests into free slots (first come, first
served), runs one prompt chunk of one request still reading its prompt
(taking turns, so a long prompt never stalls the others for more than a
chunk), then one decode step of every request that is decoding, all of them
in one batched call (:class:`iron.lm.engine.Engine`). Each request's tokens
are the ones it would get alone, whatever runs beside it.

A request in a slot needs no thread of its own (:meth:`Scheduler.listen`):
after each turn the scheduler hands every token that turn made to the
event loop in one call (one wake of the loop a step, however many streams
run), where each request's :class:`Listener` turns its tokens into text. A
thread that wants to pull tokens (:meth:`Scheduler.generate`) gets them
through a queue instead. At most ``bound`` requests wait for a slot beyond
those holding one, more are refused
(:class:`~iron.lm.serve.worker.QueueFull`, the server's 503). A request the
batched path cannot serve (speculative decoding, a reply drawn on the host)
runs *alone*, on a thread of its own (:meth:`Scheduler.submit`): it waits
for every slot to empty, then has the device to itself.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import numpy as np

from iron.lm.engine import Engine, Stream
from iron.lm.generate import Decoder
from iron.lm.serve.metrics import Metrics
from iron.lm.serve.worker import Job, QueueFull

__all__ = ["Generation", "Listener", "Listening", "Scheduler"]

logger = logging.getLogger("iron.lm.serve")

_END = object()  # the last item of a request's token queue


@dataclasses.dataclass(eq=False)
class _Ticket:
    """A request's place: what it asks, and where its tokens go."""

    ids: list[int]
    settings: dict[str, Any]
    owner: str | None
    cancelled: threading.Event  # the request's: its client went away
    out: queue.Queue[Any] = dataclasses.field(default_factory=queue.Queue)
    #: Its generation was closed (done with, or stopped by a stop string).
    closed: threading.Event = dataclasses.field(default_factory=threading.Event)
    alone: threading.Event | None = None  # set: the device is this request's
    finished: threading.Event = dataclasses.field(default_factory=threading.Event)
    stream: Stream | None = None
    submitted: float = dataclasses.field(default_factory=time.perf_counter)
    #: When its last token came (for the latency histograms).
    last: float | None = None
    #: A listening request's: where its tokens go, and its job (whose loop
    #: they go to).
    listener: Listener | None = None
    job: Job | None = None
    #: A listening request was told its end.
    over: bool = False

    def arrived(self, metrics: Metrics) -> None:
        """A token reached the request: its latency observed."""
        now = time.perf_counter()
        if self.last is None:
            metrics.first_token(now - self.submitted)
        else:
            metrics.next_token(now - self.last)
        self.last = now


class Listener(Protocol):
    """What a listening request is told, on its event loop, in order."""

    def token(self, token: int, logits: np.ndarray) -> None:
        """A token made, with the logits it was drawn from (float32)."""

    def end(self, error: BaseException | None) -> None:
        """No more tokens: its generation ended, was cancelled or closed
        (``error`` None), or failed (``error``, a request's own mistake
        in its settings or a failed step)."""


class Listening:
    """A listening request's handle: close it to free its slot.

    Args:
        scheduler: Whose slot it holds (or waits for).
        ticket: Its place.
    """

    def __init__(self, scheduler: Scheduler, ticket: _Ticket) -> None:
        self._scheduler = scheduler
        self._ticket = ticket

    @property
    def cached_tokens(self) -> int:
        """Of the prompt's tokens, how many a slot's cache held already."""
        stream = self._ticket.stream
        return 0 if stream is None else stream.cached

    def close(self) -> None:
        """Stop (its text has ended): the slot is freed at the next step."""
        self._ticket.closed.set()
        self._scheduler.wake()


class Generation(Listening):
    """A request's tokens as the scheduler makes them (an iterator), for a
    thread that pulls them.

    Closing it (or the request's ``cancelled`` event) frees its slot at the
    next step.
    """

    def __init__(
        self,
        scheduler: Scheduler,
        ticket: _Ticket,
        on_logits: Callable[[np.ndarray], object] | None,
    ) -> None:
        super().__init__(scheduler, ticket)
        self._on_logits = on_logits
        self._ended = False

    def __iter__(self) -> Iterator[int]:
        return self

    def __next__(self) -> int:
        if self._ended:
            raise StopIteration
        item = self._ticket.out.get()
        if item is _END:
            self._ended = True
            raise StopIteration
        if isinstance(item, BaseException):
            self._ended = True
            raise item
        token, logits = item
        self._ticket.arrived(self._scheduler.metrics)
        if self._on_logits is not None:
            self._on_logits(logits)
        return int(token)

    def close(self) -> None:
        """Stop: the slot is freed at the next step."""
        if not self._ended:
            super().close()
        self._ended = True


class Scheduler:
    """Runs every request of one decoder: batched, in slots, one thread.

    Args:
        decoder: The model (its graph's ``slots`` are the requests decoded
            together); only this scheduler's thread runs it, except a
            request running alone.
        bound: At most this many requests wait for a slot.
        metrics: Where the counts go (``/metrics``); a new set by default.
    """

    def __init__(
        self, decoder: Decoder, bound: int, metrics: Metrics | None = None
    ) -> None:
        self.decoder = decoder
        self.engine = Engine(decoder)
        self.bound = bound
        self.metrics = metrics or Metrics()
        self.metrics.watch(self)
        #: Requests run to their end, and requests cancelled.
        self.done = 0
        self.cancelled = 0
        self._jobs = 0  # submitted jobs not yet ended
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._waiting: collections.deque[_Ticket] = collections.deque()
        self._active: dict[int, _Ticket] = {}  # by slot
        self._turn = 0  # whose prompt chunk runs next
        #: What this turn sent to listening requests, by event loop.
        self._outbox: dict[asyncio.AbstractEventLoop, list[tuple[_Ticket, Any]]] = {}
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name="iron-lm-device")
        self._thread.daemon = True
        self._thread.start()

    # -- what the server reads ----------------------------------------------------

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot (or for the device, to run alone)."""
        return len(self._waiting)

    @property
    def slots(self) -> int:
        """The slots: requests decoded together."""
        return self.engine.slots

    @property
    def slots_free(self) -> int:
        """Slots holding no request."""
        return self.engine.slots - len(self._active)

    # -- the request side ------------------------------------------------------------

    def submit(self, job: Job) -> None:
        """Run ``job`` on a thread of its own (a request that runs alone:
        it asks :meth:`alone` for the device, or :meth:`generate` for
        tokens).

        Raises:
            QueueFull: ``bound`` requests already wait beyond the slots.
            ValueError: ``job`` has no ``run`` (a job on the loop listens).
        """
        if job.run is None:
            raise ValueError(
                "a Job without run has no thread to run on: pass it to "
                "Scheduler.listen with the request's ids and listener"
            )
        self._count()
        thread = threading.Thread(
            target=self._run, args=(job,), name="iron-lm-request", daemon=True
        )
        thread.start()

    def _count(self) -> None:
        """One more job, within the queue's bound."""
        with self._lock:
            if self._jobs >= self.bound + self.engine.slots:
                raise QueueFull(
                    f"the device's {self.engine.slots} slots are busy and "
                    f"{self._jobs - self.engine.slots} requests wait for them, the "
                    f"most this server queues (--max-queue {self.bound}); retry "
                    "shortly"
                )
            self._jobs += 1

    def _ended(self, job: Job) -> None:
        """``job`` is over: counted by its outcome."""
        with self._lock:
            self._jobs -= 1
            if job.outcome == "cancelled":
                self.cancelled += 1
            else:
                self.done += 1
        self.metrics.ended(job.outcome or "error")

    def _run(self, job: Job) -> None:
        assert job.run is not None
        try:
            if job.cancelled.is_set():
                job.outcome = "cancelled"
                job.put("cancelled")
                return
            job.run(job)
        except _Cancelled:  # left (or the server stops) before its turn alone
            job.outcome = "cancelled"
            job.put("cancelled")
        except Exception as error:  # reported to the request, never lost
            logger.exception("a request failed on the device")
            job.put("error", error)
        finally:
            self._ended(job)

    def listen(
        self,
        job: Job,
        ids: list[int],
        listener: Listener,
        *,
        max_new_tokens: int,
        seed: int = 0,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        stop: Any = (),
        owner: str | None = None,
    ) -> Listening:
        """Queue ``ids`` for a slot, with no thread: ``listener`` is told each
        token on ``job``'s event loop (every request's tokens of a turn in
        one call to the loop), then the end. Call it on that loop.

        The settings are :meth:`iron.lm.engine.Engine.open`'s. ``job`` is
        counted against the queue's bound, and its cancellation (the
        client went away) frees the slot at the next step; its
        ``outcome`` is set before ``listener.end``.

        Raises:
            QueueFull: ``bound`` requests already wait beyond the slots.
        """
        self._count()
        ticket = _Ticket(
            ids=list(ids),
            settings=_settings(max_new_tokens, seed, temperature, top_k, top_p, stop),
            owner=owner,
            cancelled=job.cancelled,
            listener=listener,
            job=job,
        )
        self._enqueue(ticket)
        return Listening(self, ticket)

    def generate(
        self,
        ids: list[int],
        *,
        max_new_tokens: int,
        seed: int = 0,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        stop: Any = (),
        owner: str | None = None,
        cancelled: threading.Event | None = None,
        on_logits: Callable[[np.ndarray], object] | None = None,
    ) -> Generation:
        """Queue ``ids`` for a slot; its tokens come as they are made.

        The settings are :meth:`iron.lm.engine.Engine.open`'s (checked
        there, on the scheduler's thread: an error ends the iteration).
        """
        ticket = _Ticket(
            ids=list(ids),
            settings=_settings(max_new_tokens, seed, temperature, top_k, top_p, stop),
            owner=owner,
            cancelled=cancelled or threading.Event(),
        )
        self._enqueue(ticket)
        return Generation(self, ticket, on_logits)

    @contextlib.contextmanager
    def alone(self, cancelled: threading.Event | None = None) -> Iterator[Decoder]:
        """The decoder to itself, once every slot is empty (in turn with the
        requests that came before); the batched loop waits meanwhile."""
        ticket = _Ticket(
            ids=[],
            settings={},
            owner=None,
            cancelled=cancelled or threading.Event(),
            alone=threading.Event(),
        )
        self._enqueue(ticket)
        assert ticket.alone is not None
        while not ticket.alone.wait(0.05):
            if ticket.cancelled.is_set() or self._stopping:
                ticket.finished.set()
                self.wake()
                raise _Cancelled()
        try:
            yield self.decoder
        finally:
            ticket.finished.set()
            self.wake()

    def _enqueue(self, ticket: _Ticket) -> None:
        with self._wake:
            self._waiting.append(ticket)
            self._wake.notify()

    def wake(self) -> None:
        """Have the loop look again (a request was cancelled)."""
        with self._wake:
            self._wake.notify()

    def stop(self, timeout: float = 30.0) -> None:
        """Cancel what waits, let the running requests end, join the thread."""
        with self._wake:
            self._stopping = True
            for ticket in self._waiting:
                ticket.cancelled.set()
            self._wake.notify()
        self._thread.join(timeout)

    # -- the loop ---------------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            with self._wake:
                while not (self._waiting or self._active or self._stopping):
                    self._wake.wait(0.1)
                if self._stopping and not self._active:
                    for ticket in self._waiting:
                        self._send(ticket, _END)
                    self._waiting.clear()
                    self._flush()
                    return
            try:
                self._turn_once()
            except Exception as error:  # a failed step ends its requests
                logger.exception("a batched step failed")
                for slot, ticket in list(self._active.items()):
                    self._send(ticket, error)
                    self._close(slot)
            finally:
                self._flush()

    def _send(self, ticket: _Ticket, item: Any) -> None:
        """``item`` for ``ticket``: a ``(token, logits)``, an error or the
        end; a listening request's wait in the outbox for the turn's end."""
        if ticket.job is None:
            ticket.out.put(item)
        else:
            self._outbox.setdefault(ticket.job.loop, []).append((ticket, item))

    def _flush(self) -> None:
        """Hand each loop this turn's items, in one call a loop."""
        outbox, self._outbox = self._outbox, {}
        for loop, items in outbox.items():
            try:
                loop.call_soon_threadsafe(self._dispatch, items)
            except RuntimeError:  # the loop is closed: nobody is listening
                for ticket, _ in items:
                    ticket.cancelled.set()

    def _dispatch(self, items: list[tuple[_Ticket, Any]]) -> None:
        """On a listening request's loop: its tokens, then its end (once:
        a failed request's slot is closed after its error)."""
        for ticket, item in items:
            listener, job = ticket.listener, ticket.job
            assert listener is not None and job is not None
            if ticket.over:
                continue
            error = item if isinstance(item, BaseException) else None
            if isinstance(item, tuple):
                ticket.arrived(self.metrics)
                try:
                    listener.token(int(item[0]), item[1])
                    continue
                except Exception as failed:  # its own, never another's
                    logger.exception("a request failed reading its tokens")
                    ticket.closed.set()  # its slot is freed at the next step
                    error = failed
            elif error is None:
                job.outcome = "cancelled" if ticket.cancelled.is_set() else "done"
            ticket.over = True
            try:
                listener.end(error)
            except Exception:  # the others' items still reach them
                logger.exception("a request failed ending its reply")
            finally:
                self._ended(job)

    def _turn_once(self) -> None:
        self._reap()
        head = self._waiting[0] if self._waiting else None
        if head is not None and head.alone is not None:
            if not self._active:  # every slot empty: the device is its
                with self._wake:
                    self._waiting.popleft()
                self.engine.alone()
                head.alone.set()
                head.finished.wait()
                return
        else:
            self._admit()
        self._prefill_one()
        self._flush()  # a first token goes out now, not after the step
        made = self.engine.step()
        for slot, token in made.items():
            self._deliver(slot, token)
        if not made and not any(
            t.stream is not None and t.stream.prefilled < len(t.stream.ids)
            for t in self._active.values()
        ):
            with self._wake:  # nothing ran: wait for a change
                self._wake.wait(0.05)

    def _reap(self) -> None:
        """Drop cancelled requests: waiting ones, and active ones' slots."""
        with self._wake:
            kept: collections.deque[_Ticket] = collections.deque()
            for ticket in self._waiting:
                if not (ticket.cancelled.is_set() or ticket.closed.is_set()):
                    kept.append(ticket)
                elif ticket.alone is None:
                    self._send(ticket, _END)
                # a cancelled request waiting to run alone has left: dropped
            self._waiting = kept
        for slot, ticket in list(self._active.items()):
            if ticket.cancelled.is_set() or ticket.closed.is_set():
                self._close(slot)

    def _admit(self) -> None:
        while self._waiting and self.engine.free:
            ticket = self._waiting[0]
            if ticket.alone is not None:
                return  # it waits for every slot to empty
            with self._wake:
                self._waiting.popleft()
            try:
                stream = self.engine.open(
                    ticket.ids, owner=ticket.owner, **ticket.settings
                )
            except Exception as error:  # the request's own mistake
                self._send(ticket, error)
                continue
            ticket.stream = stream
            self.metrics.admitted(stream.cached)
            if stream.done:  # nothing to make
                self._send(ticket, _END)
                self.engine.close(stream)
                continue
            self._active[stream.slot] = ticket

    def _prefill_one(self) -> None:
        """One prompt chunk, of the next request reading its prompt."""
        reading = sorted(
            slot
            for slot, t in self._active.items()
            if t.stream is not None and t.stream.made == 0
        )
        if not reading:
            return
        slot = next((s for s in reading if s >= self._turn), reading[0])
        self._turn = slot + 1
        ticket = self._active[slot]
        assert ticket.stream is not None
        try:
            token = self.engine.prefill(ticket.stream)
        except Exception as error:
            self._send(ticket, error)
            self._close(slot)
            return
        if token is not None:
            self._deliver(slot, token)

    def _deliver(self, slot: int, token: int) -> None:
        ticket = self._active[slot]
        stream = ticket.stream
        assert stream is not None
        self._send(ticket, (token, stream.logits))
        self.metrics.token()
        if stream.done:
            self._close(slot)

    def _close(self, slot: int) -> None:
        ticket = self._active.pop(slot)
        if ticket.stream is not None:
            self.engine.close(ticket.stream)
        self._send(ticket, _END)


def _settings(
    max_new_tokens: int,
    seed: int,
    temperature: float | None,
    top_k: int | None,
    top_p: float | None,
    stop: Any,
) -> dict[str, Any]:
    """A request's settings, as :meth:`iron.lm.engine.Engine.open` takes them."""
    return {
        "max_new_tokens": max_new_tokens,
        "seed": seed,
        "temperature": temperature,
        "top_k": top_k,
        "top_p": top_p,
        "stop": tuple(stop),
    }


class _Cancelled(Exception):
    """A request waiting to run alone was cancelled (or the server stops)."""
