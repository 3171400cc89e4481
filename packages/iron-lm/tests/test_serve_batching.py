"""Many requests at once (issue 31): slots, the scheduler, /metrics.

Sixteen streaming clients at once get the answers they get one at a time;
a long prompt is read a chunk at a time between the others' decode steps;
cancelling frees a slot at once; the queue bound counts beyond the slots;
a KV budget that holds no slot is refused at start; ``/metrics`` speaks
Prometheus' text format.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_serve import CONTEXT, MODEL, TIMEOUT_S, Server, serving

from iron.lm import tiny
from iron.lm.config import LlamaConfig
from iron.lm.engine import slot_bytes
from iron.lm.generate import Decoder
from iron.lm.serve.scheduler import Scheduler
from iron.lm.serve.worker import Job, QueueFull
from iron.operators import matvec

needs_jit = pytest.mark.skipif(
    not matvec.available(),
    reason="bit-equal paths need the compiled kernel models (iron-operators[jit])",
)

#: (prompt, settings): greedy and seeded draws, each its own.
REQUESTS = [
    (f"Request {i}: the NPU " + "and more " * (i % 5), settings)
    for i, settings in enumerate(
        [
            {},
            {"temperature": 0.9, "seed": 3},
            {"temperature": 1.1, "seed": 4, "top_p": 0.8},
            {"temperature": 0.7, "seed": 5, "extra_body": {"top_k": 20}},
        ]
        * 4
    )
]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with serving("--slots", "4") as s:
        yield s


def streamed(server: Server, prompt: str, settings: dict, tokens: int = 24) -> str:
    chunks = server.client().completions.create(
        model=MODEL, prompt=prompt, max_tokens=tokens, stream=True, **settings
    )
    return "".join(c.choices[0].text for c in chunks if c.choices)


def metrics(server: Server) -> dict[str, float]:
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    return {
        sample.name + str(sorted(sample.labels.items()) or ""): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@needs_jit
def test_sixteen_streaming_clients_get_their_answers_alone(server):
    alone = [streamed(server, prompt, settings) for prompt, settings in REQUESTS]
    together: list[str | None] = [None] * len(REQUESTS)
    most = [0]

    def client(i: int) -> None:
        prompt, settings = REQUESTS[i]
        together[i] = streamed(server, prompt, settings)

    def watch() -> None:  # how many slots were ever busy at once
        while any(t is None for t in together):
            health = server.health()
            most[0] = max(most[0], health["slots"] - health["slots_free"])
            time.sleep(0.005)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    watcher = threading.Thread(target=watch)
    for thread in threads:
        thread.start()
    watcher.start()
    for thread in threads:
        thread.join(TIMEOUT_S * 4)
    watcher.join(TIMEOUT_S)
    assert together == alone
    assert len(set(alone)) > 4  # the settings and prompts differ
    assert most[0] > 1  # they shared the device's steps
    assert server.health()["slots_free"] == 4


def test_metrics_are_prometheus_text(server):
    before = metrics(server)
    for _ in range(2):  # the second reuses the first's prefix
        server.client().completions.create(
            model=MODEL, prompt="The NPU is a chip for " * 3, max_tokens=5
        )
    after = metrics(server)
    assert after["iron_lm_slots"] == 4
    assert after["iron_lm_slots_active"] == 0
    assert after["iron_lm_queue_depth"] == 0
    made = after["iron_lm_generated_tokens_total"]
    assert made - before.get("iron_lm_generated_tokens_total", 0) == 10
    count = "iron_lm_time_to_first_token_seconds_count"
    assert after[count] - before.get(count, 0) == 2
    per = "iron_lm_time_per_output_token_seconds_count"
    assert after[per] - before.get(per, 0) == 8
    hits = "iron_lm_prompt_cache_hits_total"
    assert after[hits] - before.get(hits, 0) >= 1
    done = "iron_lm_requests_total[('outcome', 'done')]"
    assert after[done] - before.get(done, 0) == 2
    assert after["iron_lm_tokens_per_second"] > 0


def test_cancelling_frees_a_slot_at_once(server):
    assert server.health()["slots_free"] == 4
    with httpx.stream(
        "POST",
        f"{server.url}/v1/completions",
        json={"model": MODEL, "prompt": "The NPU", "max_tokens": 200, "stream": True},
        timeout=TIMEOUT_S,
    ) as response:
        lines = response.iter_lines()
        assert next(lines).startswith("data: ")
        assert server.health()["slots_free"] == 3
    deadline = time.monotonic() + TIMEOUT_S
    while server.health()["slots_free"] != 4:
        assert time.monotonic() < deadline, "the slot was never freed"
        time.sleep(0.01)


def test_a_budget_that_holds_no_slot_is_refused_at_start():
    done = subprocess.run(
        [sys.executable, "-m", "iron.lm", "serve", "--kv-budget", "1K"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S * 4,
        env={**os.environ, "IRON_BACKEND": "emu", "IRON_DEVICE": "npu2"},
    )
    assert done.returncode == 2
    assert "--kv-budget" in done.stderr and "does not hold one slot" in done.stderr


def test_a_budget_sets_the_slots():
    config = LlamaConfig.tiny()
    budget = 2 * slot_bytes(config, CONTEXT) + 100
    server = Server("--slots", "8", "--kv-budget", str(budget))
    try:
        health = server.health()
        assert health["slots"] == 2
        assert health["kv_cache_bytes"] == 2 * slot_bytes(config, CONTEXT) <= budget
    finally:
        server.stop()


@pytest.fixture(scope="module")
def decoder(tmp_path_factory) -> Decoder:
    directory = tiny.write_checkpoint(tmp_path_factory.mktemp("tiny"))
    return Decoder.from_pretrained(
        directory, device="npu2", context=256, rows=16, progress=False, slots=2
    ).compile()


def test_a_long_prompt_is_read_between_the_others_steps(decoder):
    scheduler = Scheduler(decoder, bound=4)
    try:
        short = scheduler.generate([5, 6, 7], max_new_tokens=100, stop=())
        next(short)  # it decodes now
        before = short._ticket.stream.made
        chunks = 6
        long = scheduler.generate(
            list(range(3, 3 + 16 * chunks)), max_new_tokens=2, stop=()
        )
        next(long)  # its first token: after all its chunks
        during = short._ticket.stream.made - before
        assert during >= chunks - 1  # a step of the short one after each chunk
        short.close()
        long.close()
    finally:
        scheduler.stop()


def test_the_queue_bound_counts_beyond_the_slots(decoder):
    import asyncio

    scheduler = Scheduler(decoder, bound=1)
    release = threading.Event()

    def hold(job: Job) -> None:
        release.wait(TIMEOUT_S)
        job.outcome = "done"

    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        outcomes = []
        for _ in range(4):  # 2 slots and 1 waiting fit; the 4th does not
            try:
                scheduler.submit(Job(hold, loop))
                outcomes.append("taken")
            except QueueFull as e:
                outcomes.append(str(e))
        return outcomes

    try:
        outcomes = asyncio.run(scenario())
    finally:
        release.set()
        scheduler.stop()
    assert outcomes[:3] == ["taken"] * 3
    assert "--max-queue 1" in outcomes[3] and "2 slots" in outcomes[3]


def test_a_failing_job_reports_its_error_and_a_cancelled_one_never_runs(decoder):
    import asyncio

    scheduler = Scheduler(decoder, bound=2)
    ran: list[str] = []

    def fail(job: Job) -> None:
        ran.append("fail")
        raise ValueError("refused")

    def never(job: Job) -> None:
        ran.append("never")

    async def scenario() -> tuple:
        loop = asyncio.get_running_loop()
        failing, gone = Job(fail, loop), Job(never, loop)
        gone.cancel()  # its client left before it started
        scheduler.submit(failing)
        scheduler.submit(gone)
        return (
            await asyncio.wait_for(failing.out.get(), TIMEOUT_S),
            await asyncio.wait_for(gone.out.get(), TIMEOUT_S),
        )

    try:
        (kind, error), (left, _) = asyncio.run(scenario())
        deadline = time.monotonic() + TIMEOUT_S  # counted as each thread ends
        while scheduler.done + scheduler.cancelled < 2:
            assert time.monotonic() < deadline, "the jobs' threads never ended"
            time.sleep(0.01)
    finally:
        scheduler.stop()
    assert kind == "error" and isinstance(error, ValueError)
    assert left == "cancelled" and ran == ["fail"]
    assert (scheduler.done, scheduler.cancelled) == (1, 1)


class Heard:
    """A listener keeping what it is told (on the loop), and when it ends."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.tokens: list[int] = []
        self.ended: BaseException | None | str = "not yet"
        self.fail_at = fail_at
        self.over = None  # an asyncio.Event, made on the loop

    def token(self, token: int, logits) -> None:
        assert logits.shape == (512,)  # the tiny model's vocabulary
        if len(self.tokens) == self.fail_at:
            raise RuntimeError("the listener broke")
        self.tokens.append(token)

    def end(self, error: BaseException | None) -> None:
        self.ended = error
        self.over.set()


def test_listening_requests_get_their_tokens_a_turn_in_one_call(decoder):
    import asyncio

    prompts = [[5, 6, 7], [9, 10, 11, 12]]
    scheduler = Scheduler(decoder, bound=4)
    try:
        alone = [  # each pulled by a thread, one at a time
            list(scheduler.generate(p, max_new_tokens=8, stop=())) for p in prompts
        ]

        async def scenario() -> tuple[list[Heard], list[Job], int]:
            loop = asyncio.get_running_loop()
            calls = 0
            post = loop.call_soon_threadsafe

            def counted(*args, **kwargs):
                nonlocal calls
                calls += threading.current_thread().name == "iron-lm-device"
                return post(*args, **kwargs)

            loop.call_soon_threadsafe = counted
            heard, jobs = [Heard(), Heard()], [Job(None, loop), Job(None, loop)]
            for h, job, p in zip(heard, jobs, prompts, strict=True):
                h.over = asyncio.Event()
                scheduler.listen(job, p, h, max_new_tokens=8, stop=())
            for h in heard:
                await asyncio.wait_for(h.over.wait(), TIMEOUT_S)
            return heard, jobs, calls

        heard, jobs, calls = asyncio.run(scenario())
    finally:
        scheduler.stop()
    assert [h.tokens for h in heard] == alone
    assert all(h.ended is None for h in heard)
    assert [j.outcome for j in jobs] == ["done", "done"]
    # 16 tokens and 2 ends: one call each would be 18; decoded together,
    # a turn's tokens share one (the prompts' first tokens come in turns)
    assert calls <= 11
    assert (scheduler.done, scheduler.cancelled) == (2, 0)


def test_a_listener_that_fails_ends_alone_and_frees_its_slot(decoder):
    import asyncio

    scheduler = Scheduler(decoder, bound=0)  # 2 slots, nobody waits
    try:

        async def scenario() -> list[Heard]:
            loop = asyncio.get_running_loop()
            heard = [Heard(fail_at=2), Heard()]
            for h, p in zip(heard, ([5, 6, 7], [9, 10, 11]), strict=True):
                h.over = asyncio.Event()
                scheduler.listen(Job(None, loop), p, h, max_new_tokens=40, stop=())
            await asyncio.wait_for(heard[0].over.wait(), TIMEOUT_S)
            # its slot is free again: a third request is taken, not refused
            third = Heard()
            third.over = asyncio.Event()
            deadline = time.monotonic() + TIMEOUT_S
            while True:
                try:
                    scheduler.listen(Job(None, loop), [3, 4], third, max_new_tokens=2)
                    break
                except QueueFull:
                    assert time.monotonic() < deadline, "the slot was never freed"
                    await asyncio.sleep(0.01)
            for h in (heard[1], third):
                await asyncio.wait_for(h.over.wait(), TIMEOUT_S)
            return [*heard, third]

        broken, other, third = asyncio.run(scenario())
    finally:
        scheduler.stop()
    assert isinstance(broken.ended, RuntimeError) and len(broken.tokens) == 2
    assert other.ended is None and len(other.tokens) == 40
    assert third.ended is None and len(third.tokens) == 2


def test_a_job_without_a_thread_is_refused_by_submit(decoder):
    import asyncio

    scheduler = Scheduler(decoder, bound=1)
    try:

        async def scenario() -> None:
            with pytest.raises(ValueError, match="Scheduler.listen"):
                scheduler.submit(Job(None, asyncio.get_running_loop()))

        asyncio.run(scenario())
    finally:
        scheduler.stop()


def test_a_listener_failing_at_its_end_leaves_the_others_items(decoder):
    """The items of one turn go to several listeners in one call: one that
    raises at its end is counted and logged, and the rest still come."""
    import asyncio

    from iron.lm.serve import scheduler as module

    class Broken(Heard):
        def end(self, error):
            raise RuntimeError("the listener broke at its end")

    scheduler = Scheduler(decoder, bound=2)
    try:

        async def scenario() -> Heard:
            loop = asyncio.get_running_loop()
            broken, fine = Broken(), Heard()
            fine.over = asyncio.Event()
            tickets = [
                module._Ticket(
                    ids=[5],
                    settings={},
                    owner=None,
                    cancelled=threading.Event(),
                    listener=listener,
                    job=Job(None, loop),
                )
                for listener in (broken, fine)
            ]
            scheduler._jobs += 2  # as listen() counts them
            logits = np.zeros(512, np.float32)
            scheduler._dispatch(
                [(tickets[0], (7, logits)), (tickets[0], module._END)]
                + [(tickets[1], (8, logits)), (tickets[1], module._END)]
            )
            await asyncio.wait_for(fine.over.wait(), TIMEOUT_S)
            return fine

        fine = asyncio.run(scenario())
    finally:
        scheduler.stop()
    assert fine.tokens == [8] and fine.ended is None
    assert (scheduler.done, scheduler.cancelled) == (2, 0)


def test_a_first_token_is_handed_over_before_the_next_step(decoder):
    """A prompt's last chunk makes the first token; it reaches the loop then,
    not after the decode step that follows in the same turn (the time to
    the first token would grow by a step)."""
    import asyncio

    scheduler = Scheduler(decoder, bound=2)
    held_at_step: list[int] = []
    step = scheduler.engine.step

    def watched(*args, **kwargs):
        held_at_step.append(sum(len(v) for v in scheduler._outbox.values()))
        return step(*args, **kwargs)

    scheduler.engine.step = watched
    try:

        async def scenario() -> Heard:
            loop = asyncio.get_running_loop()
            heard = Heard()
            heard.over = asyncio.Event()
            scheduler.listen(Job(None, loop), [5, 6, 7], heard, max_new_tokens=3)
            await asyncio.wait_for(heard.over.wait(), TIMEOUT_S)
            return heard

        heard = asyncio.run(scenario())
    finally:
        scheduler.stop()
    assert len(heard.tokens) == 3
    assert held_at_step and set(held_at_step) == {0}
