"""What ``GET /metrics`` reports, in Prometheus' text format.

One registry per app (``prometheus_client.CollectorRegistry``), so two apps
in one process never share counts. Reported:

- ``iron_lm_queue_depth``: requests waiting for a slot;
- ``iron_lm_slots`` and ``iron_lm_slots_active``: the slots, and those
  holding a request;
- ``iron_lm_generated_tokens_total`` and ``iron_lm_tokens_per_second`` (over
  the last :data:`WINDOW_S` seconds);
- ``iron_lm_time_to_first_token_seconds`` and
  ``iron_lm_time_per_output_token_seconds``: histograms, from a request's
  arrival to its first token, and between its tokens;
- ``iron_lm_prompt_cache_hits_total`` (requests that reused a slot's cached
  prefix) and ``iron_lm_prompt_cached_tokens_total``;
- ``iron_lm_requests_total{outcome}``: requests ended, by outcome.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

__all__ = ["CONTENT_TYPE", "WINDOW_S", "Metrics"]

#: The media type of :meth:`Metrics.render`'s text.
CONTENT_TYPE = CONTENT_TYPE_LATEST
#: Seconds ``iron_lm_tokens_per_second`` averages over.
WINDOW_S = 10.0

#: Histogram buckets in seconds: the first token (a prompt's chunks and a
#: wait for a slot) and the time per token after it (one step).
_FIRST_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_TOKEN_BUCKETS = (0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56)


class Metrics:
    """The server's counters, gauges and histograms, in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self._queue = Gauge(
            "iron_lm_queue_depth", "Requests waiting for a slot", registry=r
        )
        self._slots = Gauge(
            "iron_lm_slots", "Slots: requests decoded together", registry=r
        )
        self._active = Gauge(
            "iron_lm_slots_active", "Slots holding a request", registry=r
        )
        self._tokens = Counter(
            "iron_lm_generated_tokens", "Tokens generated", registry=r
        )
        self._rate = Gauge(
            "iron_lm_tokens_per_second",
            f"Tokens generated per second over the last {WINDOW_S:g} s",
            registry=r,
        )
        self._first = Histogram(
            "iron_lm_time_to_first_token_seconds",
            "Seconds from a request's arrival to its first token",
            buckets=_FIRST_BUCKETS,
            registry=r,
        )
        self._per_token = Histogram(
            "iron_lm_time_per_output_token_seconds",
            "Seconds between a request's tokens after the first",
            buckets=_TOKEN_BUCKETS,
            registry=r,
        )
        self._hits = Counter(
            "iron_lm_prompt_cache_hits",
            "Requests whose prompt reused a slot's cached prefix",
            registry=r,
        )
        self._cached = Counter(
            "iron_lm_prompt_cached_tokens",
            "Prompt tokens found in a slot's cache (not prefilled)",
            registry=r,
        )
        self._requests = Counter(
            "iron_lm_requests", "Requests ended", ["outcome"], registry=r
        )
        self._times: collections.deque[float] = collections.deque()
        self._lock = threading.Lock()
        self._rate.set_function(self.tokens_per_second)

    def watch(self, scheduler: Any) -> None:
        """Read the queue and the slots off ``scheduler`` at each scrape."""
        self._queue.set_function(lambda: scheduler.waiting)
        self._slots.set_function(lambda: scheduler.slots)
        self._active.set_function(lambda: scheduler.slots - scheduler.slots_free)

    def token(self) -> None:
        """A token was made."""
        self._tokens.inc()
        now = time.monotonic()
        with self._lock:
            self._times.append(now)
            self._trim(now)

    def tokens_per_second(self) -> float:
        """Tokens made over the last :data:`WINDOW_S` seconds, per second."""
        now = time.monotonic()
        with self._lock:
            self._trim(now)
            return len(self._times) / WINDOW_S

    def _trim(self, now: float) -> None:
        while self._times and self._times[0] < now - WINDOW_S:
            self._times.popleft()

    def first_token(self, seconds: float) -> None:
        """A request's first token came ``seconds`` after it arrived."""
        self._first.observe(seconds)

    def next_token(self, seconds: float) -> None:
        """A request's next token came ``seconds`` after its last."""
        self._per_token.observe(seconds)

    def admitted(self, cached: int) -> None:
        """A request took a slot, ``cached`` of its prompt's tokens held."""
        if cached:
            self._hits.inc()
            self._cached.inc(cached)

    def ended(self, outcome: str) -> None:
        """A request ended: ``done``, ``cancelled`` or ``error``."""
        self._requests.labels(outcome=outcome).inc()

    def render(self) -> bytes:
        """Every metric in Prometheus' text format."""
        return generate_latest(self.registry)
