"""Figure 8: ``iron-lm serve`` under 1, 4 and 16 clients, and a chat's cache reused.

The real command (``python -m iron.lm serve``) serves the embedded tiny
Llama (random weights, greedy) on the emulated npu2, in a subprocess
listening on 127.0.0.1 at a free port; the clients are threads in this
process speaking HTTP with the standard library (``http.client``), each
request a streamed completion (server-sent events). For each number of
concurrent clients, every client sends its share of the requests one after
another: requests per second is all of them over the wall time from the
first sent to the last answered, and the time to first token of a request
runs from sending it to the first chunk that carries text. The device runs
one request at a time (``--slots 1``: the server queues the rest in arrival
order; figure 15 decodes them together), so the time to first token grows
with the queue. The numbers of clients are taken
in turn, round after round, and the rate is reported as a median and range.

The cache figure: a chat's second turn (a long system prompt, a first
exchange, a new user message) is asked right after its first turn, whose
tokens the KV cache then holds (``usage.prompt_tokens_details.cached_tokens``
says how many were reused), and, as the peer, with the cache holding
another request's tokens (a one-token completion in between), so the whole
prompt is prefilled. The two are measured alternately, several times, in the
same run, and their answers must be the same text (issue 30: a position's
logits do not depend on whether its prefix came from the cache).
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from .common import (
    DEVICE,
    Context,
    ServerProcess,
    command,
    free_port,
    have,
    median,
    result,
    table,
)

NUMBER = 8
MODEL = "iron-tiny"
#: The tiny model's whole context (its max_position_embeddings), rows per chunk.
CONTEXT = 256
ROWS = 16
CLIENTS = (1, 4, 16)
START_S = 300  # loading and compiling on a busy emulator
TIMEOUT_S = 300
#: Each ends in a different word, so the greedy answers differ.
WORDS = (
    "apple river stone cloud tiger lemon piano rocket glass maple orbit quartz "
    "velvet desert harbor jungle"
).split()
SYSTEM = "You are a careful assistant who answers about processors. " * 5
#: A completion of token ids the chat never starts with: it leaves the cache
#: holding nothing the chat shares.
EVICT = [7, 8, 9]


class Server(ServerProcess):
    """``iron-lm serve`` in a subprocess, answering /health."""

    def __init__(self, *args: str) -> None:
        env = {
            **os.environ,
            "IRON_BACKEND": "emu",
            "IRON_DEVICE": DEVICE,
            "IRON_EMU_POISON": "0",
        }
        port = free_port()
        argv = [sys.executable, "-m", "iron.lm", "serve", "--port", str(port)]
        argv += ["--context", str(CONTEXT), "--rows", str(ROWS), *args]
        super().__init__(argv, port, "/health", env, START_S)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """One request, streamed; the first-token time, the wall and the usage.

        Returns ``ttft_s`` (sending to the first chunk with text; the wall
        when no chunk had text), ``wall_s``, ``text`` and ``usage``.
        """
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        data = json.dumps(body).encode()
        connection = http.client.HTTPConnection("127.0.0.1", self.port, TIMEOUT_S)
        try:
            start = time.perf_counter()
            connection.request("POST", path, data, {"Content-Type": "application/json"})
            response = connection.getresponse()
            if response.status != 200:
                raise RuntimeError(
                    f"POST {path}: {response.status} {response.read()[:500]!r}"
                )
            first: float | None = None
            text, use = [], None
            for line in _lines(response):
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[len("data: ") :])
                if "error" in chunk:
                    raise RuntimeError(f"POST {path}: {chunk['error']}")
                if chunk.get("usage"):
                    use = chunk["usage"]
                for choice in chunk.get("choices", []):
                    piece = choice.get("text") or choice.get("delta", {}).get("content")
                    if piece:
                        first = first or time.perf_counter() - start
                        text.append(piece)
            wall = time.perf_counter() - start
        finally:
            connection.close()
        return {
            "ttft_s": first if first is not None else wall,
            "wall_s": wall,
            "text": "".join(text),
            "usage": use,
        }


def _lines(response: http.client.HTTPResponse) -> Iterator[str]:
    while True:
        line = response.readline()
        if not line:
            return
        yield line.decode().rstrip("\r\n")


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (linear interpolation, numpy's default)."""
    return float(np.percentile(np.asarray(values, np.float64), q))


def concurrency(
    server: Server, clients: int, total: int, tokens: int
) -> dict[str, Any]:
    """``total`` streamed completions from ``clients`` threads; what it measured."""
    share = max(1, total // clients)
    ttfts: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def client(c: int) -> None:
        try:
            for r in range(share):
                word = WORDS[(c + r * clients) % len(WORDS)]
                answer = server.post(
                    "/v1/completions",
                    {
                        "model": MODEL,
                        "prompt": f"Prompt {c} of {r} is about {word}",
                        "max_tokens": tokens,
                        "seed": 0,
                    },
                )
                with lock:
                    ttfts.append(answer["ttft_s"])
        except BaseException as error:  # raised below, in the figure's thread
            errors.append(error)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    if errors:
        raise errors[0]
    return {
        "clients": clients,
        "requests": share * clients,
        "wall_s": wall,
        "requests_per_s": share * clients / wall,
        "ttft_s": ttfts,
    }


def level(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One number of clients over its rounds: the rate's range, TTFT percentiles."""
    rates = [r["requests_per_s"] for r in runs]
    ttfts = [t for r in runs for t in r["ttft_s"]]
    return {
        "clients": runs[0]["clients"],
        "requests": sum(r["requests"] for r in runs),
        "requests_per_s": median(rates),
        "requests_per_s_range": [min(rates), max(rates)],
        "ttft_p50_s": percentile(ttfts, 50),
        "ttft_p99_s": percentile(ttfts, 99),
        "rounds": runs,
    }


def second_turn(server: Server, reuse: bool, tokens: int) -> dict[str, Any]:
    """A chat's second turn, its cache reused (or evicted first); its first token."""
    server.post("/v1/completions", {"model": MODEL, "prompt": EVICT, "max_tokens": 1})
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What is an NPU?"},
    ]
    chat = {"model": MODEL, "max_tokens": tokens, "seed": 0}
    first = server.post("/v1/chat/completions", {**chat, "messages": messages})
    messages += [
        {"role": "assistant", "content": first["text"]},
        {"role": "user", "content": "And what does the emulator do?"},
    ]
    if not reuse:
        server.post(
            "/v1/completions", {"model": MODEL, "prompt": EVICT, "max_tokens": 1}
        )
    second = server.post("/v1/chat/completions", {**chat, "messages": messages})
    use = second["usage"] or {}
    return {
        "ttft_s": second["ttft_s"],
        "text": second["text"],
        "prompt_tokens": use.get("prompt_tokens"),
        "cached_tokens": (use.get("prompt_tokens_details") or {}).get("cached_tokens"),
    }


def run(ctx: Context) -> dict[str, Any]:
    """Measure figure 8."""
    quick = ctx.quick
    lacking = [m for m in ("starlette", "uvicorn") if not have(m)]
    if lacking:
        return result(
            figure="Serving: a chat's second turn, time to first token with its "
            "cache reused (not measured)",
            value=None,
            target="below the same turn's with the cache evicted (full prefill)",
            met=False,
            peer="the same second turn after another request replaced the cache",
            peer_value=None,
            unit="ms",
            command=command(NUMBER, quick),
            judged=False,
            notes=[
                f"not measured: {', '.join(lacking)} not installed (the serve "
                "extra, pip install './packages/iron-lm[serve]'; nox -s bench "
                "installs it)"
            ],
        )
    total = 16 if quick else 32  # requests per number of clients and round
    tokens = 4 if quick else 16  # new tokens per request
    rounds = 1 if quick else 3  # of the numbers of clients, in turn
    alternations = 2 if quick else 5  # of the cache figure
    server = Server("--slots", "1")  # one request at a time: figure 15 batches
    try:
        server.post(  # warm up: the first request's host-side caches
            "/v1/completions", {"model": MODEL, "prompt": "Hello", "max_tokens": 2}
        )
        runs: dict[int, list[dict[str, Any]]] = {c: [] for c in CLIENTS}
        for r in range(rounds):  # each round in another order
            for c in CLIENTS[r % len(CLIENTS) :] + CLIENTS[: r % len(CLIENTS)]:
                runs[c].append(concurrency(server, c, total, tokens))
        levels = [level(runs[c]) for c in CLIENTS]
        turns: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
        for r in range(alternations):  # alternately, the order swapped each time
            for reuse in (True, False) if r % 2 == 0 else (False, True):
                turns[reuse].append(second_turn(server, reuse, tokens))
    finally:
        server.stop()

    reused = median([t["ttft_s"] for t in turns[True]])
    full = median([t["ttft_s"] for t in turns[False]])
    cached = [t["cached_tokens"] for t in turns[True]]
    uncached = [t["cached_tokens"] for t in turns[False]]
    prompt_tokens = turns[True][0]["prompt_tokens"]
    # the cached and the uncached second turns must answer the same text
    answers = {t["text"] for reuse in (True, False) for t in turns[reuse]}
    identical = len(answers) == 1
    met = reused < full and min(cached) > 0 and max(uncached) == 0 and identical

    def ms(seconds: float) -> float:
        return round(seconds * 1e3, 1)

    rows = [
        [
            one["clients"],
            one["requests"],
            round(one["requests_per_s"], 2),
            "-".join(f"{x:.2f}" for x in one["requests_per_s_range"]),
            ms(one["ttft_p50_s"]),
            ms(one["ttft_p99_s"]),
        ]
        for one in levels
    ]
    turn_rows = [
        [
            "reused" if reuse else "evicted (full prefill)",
            ms(min(t["ttft_s"] for t in turns[reuse])),
            ms(median([t["ttft_s"] for t in turns[reuse]])),
            ms(max(t["ttft_s"] for t in turns[reuse])),
            f"{min(t['cached_tokens'] for t in turns[reuse])}-"
            f"{max(t['cached_tokens'] for t in turns[reuse])}",
        ]
        for reuse in (True, False)
    ]
    notes = [
        f"iron-lm serve with the embedded tiny Llama (random weights, greedy), "
        f"context {CONTEXT}, rows {ROWS}, emulated {DEVICE}; started and compiled "
        f"in {server.start_s:.0f} s. Clients: threads in the bench process, "
        f"http.client, streamed completions of {tokens} new tokens.",
        f"Requests per second: a round's {total} requests over the wall time from "
        f"the first sent to the last answered; {rounds} round(s) per number of "
        "clients, the numbers taken in turn (median and range). Time to first token: sending a "
        "request to its first chunk carrying text (p50, p99 over all its "
        "rounds' requests). The device runs one request at a time (the others wait in the "
        "server's queue, in arrival order), so with more clients a first token "
        "waits behind the requests ahead of it.",
        f"Cache reuse: a chat's second turn ({prompt_tokens} prompt tokens, a "
        f"long system prompt) right after its first turn, against the same turn "
        f"after a one-token completion of other ids has replaced the cache; "
        f"{alternations} times, alternately. Reused: {ms(reused)} ms median, "
        f"{min(cached)}-{max(cached)} tokens from the cache; evicted: "
        f"{ms(full)} ms median, {min(uncached)}-{max(uncached)} from the cache "
        f"(ratio {full / reused:.1f}x). The answers, cached and not: "
        + (
            f"identical in all {2 * alternations} (the same text token for token)."
            if identical
            else f"{len(answers)} different texts in {2 * alternations}: NOT "
            "identical (the figure is not met)."
        ),
    ]
    return result(
        figure="Serving: a chat's second turn, time to first token with its cache "
        "reused" + (" (quick)" if quick else ""),
        value=ms(reused),
        target="below the same turn's with the cache evicted (full prefill)",
        met=met,
        peer="the same second turn after another request replaced the cache",
        peer_value=ms(full),
        unit="ms",
        peer_unit="ms",
        command=command(NUMBER, quick),
        notes=notes,
        tables=[
            table(
                "Concurrent clients (streamed completions)",
                [
                    "clients",
                    "requests",
                    "requests/s (median)",
                    "requests/s (range)",
                    "TTFT p50 ms",
                    "TTFT p99 ms",
                ],
                rows,
            ),
            table(
                "A chat's second turn, time to first token",
                ["cache", "min ms", "median ms", "max ms", "cached tokens"],
                turn_rows,
            ),
        ],
        data={
            "concurrency": levels,
            "second_turn": {
                "reused": turns[True],
                "evicted": turns[False],
                "ratio": full / reused,
                "answers_identical": identical,
            },
            "start_s": server.start_s,
            "new_tokens": tokens,
        },
    )
