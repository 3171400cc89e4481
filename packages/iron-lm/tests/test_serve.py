"""``iron-lm serve`` against OpenAI's own Python client.

Each server is the real command (``python -m iron.lm serve``) in a
subprocess on 127.0.0.1 at a free port, serving the embedded tiny model on
the emulated NPU; every test's waits are bounded, and every server is
stopped (SIGTERM, then SIGKILL) whatever happens. Greedy answers are
compared token for token (text and count) with the same model run in this
process through ``Decoder``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from iron.lm import tiny
from iron.lm.generate import Decoder
from iron.lm.serve import command
from iron.lm.serve.logprobs import token_text

MODEL = "iron-tiny"
CONTEXT = 256
ROWS = 16
START_S = 180  # compiling on a busy emulator
TIMEOUT_S = 60
#: Each ends in a different word: the tiny model's random weights tend to
#: repeat a prompt's last token, so these lead to different answers.
WORDS = "apple river stone cloud tiger lemon piano rocket glass maple orbit quartz velvet desert harbor jungle"
PROMPTS = [f"Prompt {i} is about {word}" for i, word in enumerate(WORDS.split())]
JSON = {"Content-Type": "application/json"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``iron-lm serve`` in a subprocess; ``url`` once it answers /health."""

    def __init__(self, *args: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "IRON_BACKEND": "emu", "IRON_DEVICE": "npu2"}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "iron.lm",
                "serve",
                "--port",
                str(self.port),
                "--context",
                str(CONTEXT),
                "--rows",
                str(ROWS),
                *args,
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {self.process.stderr.read()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the server did not answer /health in {START_S} s")

    def health(self) -> dict:
        return httpx.get(f"{self.url}/health", timeout=10).json()

    def client(self, api_key: str = "none") -> openai.OpenAI:
        return openai.OpenAI(
            base_url=f"{self.url}/v1", api_key=api_key, timeout=TIMEOUT_S, max_retries=0
        )

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(TIMEOUT_S)
        self.process.stderr.close()
        return self.process.returncode


@contextlib.contextmanager
def serving(*args: str) -> Iterator[Server]:
    server = Server(*args)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with serving() as s:
        yield s


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Decoder:
    """The served model, in this process: the server's checkpoint and sizes."""
    directory = tiny.write_checkpoint(tmp_path_factory.mktemp("tiny"))
    return Decoder.from_pretrained(
        directory, device="npu2", context=CONTEXT, rows=ROWS, progress=False
    ).compile()


def expected(reference: Decoder, prompt: str, max_tokens: int) -> tuple[str, int]:
    stream = reference.stream(prompt, max_new_tokens=max_tokens)
    return stream.read(), len(stream.token_ids)


# -- the endpoints ---------------------------------------------------------------


def test_models_and_health(server):
    models = server.client().models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert server.client().models.retrieve(MODEL).id == MODEL
    health = server.health()
    assert health["status"] == "ok" and health["model"] == MODEL


def test_a_completion_is_the_decoders_text(server, reference):
    answer = server.client().completions.create(
        model=MODEL, prompt="The NPU", max_tokens=10
    )
    text, count = expected(reference, "The NPU", 10)
    assert answer.object == "text_completion"
    assert answer.choices[0].text == text
    assert answer.choices[0].finish_reason == "length"
    ids = reference.tokenizer.encode("The NPU")
    assert answer.usage.prompt_tokens == len(ids)
    assert answer.usage.completion_tokens == count == 10
    assert answer.usage.total_tokens == len(ids) + 10


def test_a_streamed_completion_ends_with_done(server, reference):
    chunks = list(
        server.client().completions.create(
            model=MODEL,
            prompt="The NPU",
            max_tokens=10,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text, count = expected(reference, "The NPU", 10)
    pieces = [c.choices[0].text for c in chunks if c.choices]
    assert "".join(pieces) == text
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "length" and set(finishes[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == count
    # the raw stream: OpenAI's SSE lines, ending data: [DONE]
    with httpx.stream(
        "POST",
        f"{server.url}/v1/completions",
        json={"model": MODEL, "prompt": "The NPU", "max_tokens": 3, "stream": True},
        timeout=TIMEOUT_S,
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"


def test_chat_applies_the_template(server, reference):
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello!"},
    ]
    answer = server.client().chat.completions.create(
        model=MODEL, messages=messages, max_tokens=8
    )
    prompt = reference.tokenizer.apply_chat_template(messages)
    text, count = expected(reference, prompt, 8)
    assert answer.object == "chat.completion"
    assert answer.choices[0].message.role == "assistant"
    assert answer.choices[0].message.content == text
    assert answer.usage.prompt_tokens == len(reference.tokenizer.encode(prompt))
    assert answer.usage.completion_tokens == count
    chunks = list(
        server.client().chat.completions.create(
            model=MODEL, messages=messages, max_tokens=8, stream=True
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == text
    assert chunks[-1].choices[0].finish_reason == "length"


def test_a_continued_chat_reuses_the_cache(server, reference):
    client = server.client()
    messages = [{"role": "user", "content": "Tell me about the NPU."}]
    first = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=6)
    messages += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "And the emulator?"},
    ]
    second = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=6
    )
    # at least the first turn's prompt was not prefilled again
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert first.usage.prompt_tokens <= cached < second.usage.prompt_tokens
    # and the answer is the one a fresh decode gives
    assert second.choices[0].message.content == reference.chat(
        messages, max_new_tokens=6
    )


def test_a_stop_string_ends_the_text_and_is_never_streamed(server, reference):
    text, _ = expected(reference, "Hello there", 20)
    stop = text[4:6]
    answer = server.client().completions.create(
        model=MODEL, prompt="Hello there", max_tokens=20, stop=[stop]
    )
    assert answer.choices[0].text == text[: text.find(stop)]
    assert answer.choices[0].finish_reason == "stop"
    chunks = server.client().completions.create(
        model=MODEL, prompt="Hello there", max_tokens=20, stop=stop, stream=True
    )
    streamed = "".join(c.choices[0].text for c in chunks)
    assert streamed == text[: text.find(stop)]


# -- log-probabilities -------------------------------------------------------------

#: The served values against a float64 log-softmax of the same logits computed
#: here another way (logaddexp): they agree to rounding, far inside this.
LOGPROB_ATOL = 1e-9


def evict(server: Server) -> None:
    """Leave the server's cache holding ids no prompt here starts with, so the
    next request is prefilled from position 0 in the same chunks as the
    reference's (a reused prefix moves the chunks, and bf16 rounding moves
    the logits by about 1e-4)."""
    server.client().completions.create(model=MODEL, prompt=[7, 8, 9], max_tokens=1)


def scored_reference(reference: Decoder, ids: list[int], count: int):
    """The reference's tokens and, for each, the float64 log-softmax of the
    logits it was sampled from (its decode loop from the host, as the
    server's when a request asks for log-probabilities)."""
    rows: list = []
    eos = {*reference.config.eos_token_ids, *reference.tokenizer.eos_ids}
    tokens = list(
        reference.generate(
            ids, max_new_tokens=count, stop=sorted(eos), on_logits=rows.append
        )
    )
    wide = [np.asarray(r, np.float64) for r in rows]
    return tokens, [w - np.logaddexp.reduce(w) for w in wide]


def token_name(reference: Decoder, token: int) -> str:
    """A token's text as the server writes it (its bytes, as UTF-8)."""
    return token_text(reference.tokenizer.token_bytes(int(token)))


def test_a_completion_gives_its_tokens_logprobs(server, reference):
    prompt = "The NPU"
    evict(server)
    answer = server.client().completions.create(
        model=MODEL, prompt=prompt, max_tokens=10, logprobs=3
    )
    text = answer.choices[0].text
    tokens, rows = scored_reference(reference, reference.tokenizer.encode(prompt), 10)
    logprobs = answer.choices[0].logprobs
    assert len(logprobs.tokens) == len(tokens) == 10
    assert logprobs.tokens == [token_name(reference, t) for t in tokens]
    assert "".join(logprobs.tokens) == text
    # text_offset: from the start of the prompt, each token where its text begins
    starts = [len(prompt) + len("".join(logprobs.tokens[:i])) for i in range(10)]
    assert logprobs.text_offset == starts
    for token, row, value, top in zip(
        tokens, rows, logprobs.token_logprobs, logprobs.top_logprobs, strict=True
    ):
        assert value == pytest.approx(row[token], abs=LOGPROB_ATOL)
        best = np.argsort(-row, kind="stable")[:3]
        names = [token_name(reference, i) for i in best]
        assert list(top)[:3] == names  # the 3 most likely, most likely first
        for name, i in zip(names, best, strict=True):
            assert top[name] == pytest.approx(row[i], abs=LOGPROB_ATOL)
        assert int(best[0]) == token  # greedy: the sampled one is the likeliest
    evict(server)
    streamed = list(
        server.client().completions.create(
            model=MODEL, prompt=prompt, max_tokens=10, logprobs=3, stream=True
        )
    )
    pieces = [c.choices[0] for c in streamed if c.choices[0].text]
    # each chunk carries the logprobs of its own text's tokens
    assert all("".join(p.logprobs.tokens) == p.text for p in pieces)
    joined = [t for p in pieces for t in p.logprobs.tokens]
    assert joined == logprobs.tokens
    assert [v for p in pieces for v in p.logprobs.token_logprobs] == (
        logprobs.token_logprobs
    )
    assert [o for p in pieces for o in p.logprobs.text_offset] == starts
    plain = server.client().completions.create(
        model=MODEL, prompt=prompt, max_tokens=10
    )
    assert plain.choices[0].logprobs is None and plain.choices[0].text == text


def test_a_chat_gives_its_tokens_logprobs(server, reference):
    messages = [{"role": "user", "content": "Hello!"}]
    evict(server)
    answer = server.client().chat.completions.create(
        model=MODEL, messages=messages, max_tokens=8, logprobs=True, top_logprobs=2
    )
    prompt = reference.tokenizer.apply_chat_template(messages)
    tokens, rows = scored_reference(reference, reference.tokenizer.encode(prompt), 8)
    content = answer.choices[0].logprobs.content
    shown = [t for t in tokens if t not in reference.tokenizer.eos_ids]
    assert len(content) == len(shown) and content
    assert "".join(c.token for c in content) == answer.choices[0].message.content
    for entry, token, row in zip(content, shown, rows, strict=False):
        assert entry.token == token_name(reference, token)
        assert entry.bytes == list(reference.tokenizer.token_bytes(token))
        assert entry.logprob == pytest.approx(row[token], abs=LOGPROB_ATOL)
        assert len(entry.top_logprobs) == 2
        best = np.argsort(-row, kind="stable")[:2]
        for alternative, i in zip(entry.top_logprobs, best, strict=True):
            assert alternative.token == token_name(reference, i)
            assert alternative.logprob == pytest.approx(row[i], abs=LOGPROB_ATOL)
        assert entry.top_logprobs[0].logprob == entry.logprob  # greedy
    evict(server)
    chunks = list(
        server.client().chat.completions.create(
            model=MODEL,
            messages=messages,
            max_tokens=8,
            logprobs=True,
            top_logprobs=2,
            stream=True,
        )
    )
    texts = [c.choices[0] for c in chunks if c.choices and c.choices[0].delta.content]
    assert all(
        "".join(e.token for e in c.logprobs.content) == c.delta.content for c in texts
    )
    assert [e for c in texts for e in c.logprobs.content] == content
    alone = server.client().chat.completions.create(
        model=MODEL, messages=messages, max_tokens=8, logprobs=True
    )
    assert [e.top_logprobs for e in alone.choices[0].logprobs.content] == [[]] * len(
        content
    )


def test_logprobs_stop_where_the_text_stops(server, reference):
    text, _ = expected(reference, "Hello there", 20)
    stop = text[4:6]
    answer = server.client().completions.create(
        model=MODEL, prompt="Hello there", max_tokens=20, stop=[stop], logprobs=1
    )
    shown = answer.choices[0].text
    assert shown == text[: text.find(stop)]
    logprobs = answer.choices[0].logprobs
    # every token listed begins inside the text sent; none lies past the stop
    end = len("Hello there") + len(shown)
    assert logprobs.text_offset and all(o < end for o in logprobs.text_offset)
    assert "".join(logprobs.tokens).startswith(shown)
    assert len("".join(logprobs.tokens[:-1])) < len(shown)


def test_sixteen_concurrent_clients_get_the_sequential_answers(server):
    client = server.client()

    def ask(i: int, stream: bool) -> str:
        settings = {"model": MODEL, "prompt": PROMPTS[i], "max_tokens": 12}
        if not stream:
            answer = client.completions.create(**settings)
            assert answer.usage.completion_tokens == 12
            return answer.choices[0].text
        chunks = client.completions.create(**settings, stream=True)
        return "".join(c.choices[0].text for c in chunks)

    sequential = [ask(i, False) for i in range(16)]
    assert len(set(sequential)) > 8  # the prompts lead to different text
    answers: dict[int, str] = {}
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            answers[i] = ask(i, stream=i % 2 == 1)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT_S * 2)
    assert not errors, errors
    assert [answers.get(i) for i in range(16)] == sequential


KILLED_CLIENT = textwrap.dedent(
    """
    import sys, openai
    client = openai.OpenAI(base_url=sys.argv[1], api_key="none", max_retries=0)
    for chunk in client.completions.create(
        model="iron-tiny", prompt="The NPU", max_tokens=200, stream=True
    ):
        print("chunk", flush=True)
    """
)


def test_a_client_killed_mid_stream_stops_its_generation(server, reference):
    before = server.health()
    client = subprocess.Popen(
        [sys.executable, "-c", KILLED_CLIENT, f"{server.url}/v1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert client.stdout.readline() == "chunk\n"  # it is streaming
    finally:
        client.kill()
        client.wait(TIMEOUT_S)
        client.stdout.close()
    deadline = time.monotonic() + TIMEOUT_S
    while server.health()["cancelled"] == before["cancelled"]:
        assert time.monotonic() < deadline, "the generation was not cancelled"
        time.sleep(0.1)
    assert server.health()["done"] == before["done"]  # it did not run to its end
    answer = server.client().completions.create(
        model=MODEL, prompt="The NPU", max_tokens=5
    )
    assert answer.choices[0].text == expected(reference, "The NPU", 5)[0]


def test_a_client_that_gives_up_waiting_stops_its_generation(server):
    """A non-streamed request whose client gives up is cancelled, never run to
    its end. Requests ahead of it hold every slot for far longer than the
    client waits (each runs to the end of the context), however fast this
    machine decodes, so the client surely gives up first."""
    before = server.health()
    slots = before["slots"]  # decoded together; the rest wait
    ahead = slots + 4

    def busy() -> None:
        httpx.post(
            f"{server.url}/v1/completions",
            json={"model": MODEL, "prompt": "The NPU", "max_tokens": CONTEXT},
            timeout=TIMEOUT_S * 4,
        )

    threads = [threading.Thread(target=busy) for _ in range(ahead)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + TIMEOUT_S
    while server.health()["waiting"] < ahead - slots - 1:  # one may have a slot
        assert time.monotonic() < deadline, "the busy requests never queued"
        time.sleep(0.01)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            f"{server.url}/v1/completions",
            json={"model": MODEL, "prompt": "The NPU", "max_tokens": 200},
            timeout=httpx.Timeout(TIMEOUT_S, read=0.5),
        )
    for thread in threads:
        thread.join(TIMEOUT_S * 4)
    deadline = time.monotonic() + TIMEOUT_S
    while server.health()["cancelled"] == before["cancelled"]:
        assert time.monotonic() < deadline, "the generation was not cancelled"
        time.sleep(0.1)
    after = server.health()
    assert after["cancelled"] == before["cancelled"] + 1
    assert after["done"] == before["done"] + ahead  # the busy ones, not the gone one


def test_a_chunked_body_over_the_limit_is_413(server):
    def chunks():
        for _ in range(40):
            yield b"x" * 65536  # 2.5 MiB, no Content-Length

    response = httpx.post(
        f"{server.url}/v1/completions",
        content=chunks(),
        headers=JSON,
        timeout=TIMEOUT_S,
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"


# -- sampling per request ----------------------------------------------------------


def test_each_request_samples_with_its_own_settings(server, reference):
    client = server.client()
    settings = [
        {"temperature": 0.9, "top_p": 0.8, "seed": 5, "extra_body": {"top_k": 40}},
        {"temperature": 1.2, "seed": 5},
        {"temperature": 1.2, "top_p": 0.3, "seed": 6},
    ]
    for s in settings:
        answer = client.completions.create(
            model=MODEL, prompt="The NPU", max_tokens=8, **s
        )
        own = {k: v for k, v in s.items() if k != "extra_body"}
        own["top_k"] = s.get("extra_body", {}).get("top_k", 256)
        seed = own.pop("seed")
        want = reference.stream("The NPU", max_new_tokens=8, seed=seed, **own)
        assert answer.choices[0].text == want.read(), s
    # and greedy after them is greedy still
    answer = client.completions.create(model=MODEL, prompt="The NPU", max_tokens=10)
    assert answer.choices[0].text == expected(reference, "The NPU", 10)[0]


#: llama-server's names (min_p, repeat_penalty, repeat_last_n) and OpenAI's
#: (presence_penalty, frequency_penalty), each set
PENALIZED = {
    "presence_penalty": 0.8,
    "frequency_penalty": 0.4,
    "extra_body": {"min_p": 0.5, "repeat_penalty": 1.5, "repeat_last_n": 16},
}


def test_llama_cpp_sampling_fields_are_applied(server, reference):
    fields = {**PENALIZED["extra_body"], "presence_penalty": 0.8}
    fields["frequency_penalty"] = 0.4
    for settings in ({"temperature": 0.0}, {"temperature": 0.9, "seed": 4}):
        answer = server.client().completions.create(
            model=MODEL, prompt="The NPU", max_tokens=12, **PENALIZED, **settings
        )
        seed = settings.get("seed", 0)
        want = reference.stream(
            "The NPU",
            max_new_tokens=12,
            seed=seed,
            temperature=settings["temperature"],
            **fields,
        ).read()
        plain = reference.stream(
            "The NPU", max_new_tokens=12, seed=seed, temperature=settings["temperature"]
        ).read()
        assert answer.choices[0].text == want != plain, settings
    # chat takes them too, streamed or not
    messages = [{"role": "user", "content": "Hello!"}]
    prompt = reference.tokenizer.apply_chat_template(messages)
    want = reference.stream(prompt, max_new_tokens=8, **fields).read()
    answer = server.client().chat.completions.create(
        model=MODEL, messages=messages, max_tokens=8, **PENALIZED
    )
    assert answer.choices[0].message.content == want
    chunks = server.client().chat.completions.create(
        model=MODEL, messages=messages, max_tokens=8, stream=True, **PENALIZED
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == want


def test_a_large_repeat_penalty_repeats_no_token_within_its_window(server, reference):
    window = 8
    answer = server.client().completions.create(
        model=MODEL,
        prompt="The NPU",
        max_tokens=24,
        logprobs=0,
        extra_body={"repeat_penalty": 50.0, "repeat_last_n": window},
    )
    prompt = reference.tokenizer.encode("The NPU")
    tokens = list(
        reference.generate(
            prompt, max_new_tokens=24, repeat_penalty=50.0, repeat_last_n=window
        )
    )
    assert answer.choices[0].logprobs.tokens == [
        token_name(reference, t) for t in tokens
    ]
    text = prompt + tokens
    for i in range(len(prompt), len(text)):
        assert text[i] not in text[max(0, i - window) : i], (i, text)


def test_neutral_sampling_fields_change_no_bit(server, reference):
    request = {"model": MODEL, "prompt": "The NPU", "max_tokens": 10, "logprobs": 3}
    neutral = {
        "presence_penalty": 0,
        "frequency_penalty": 0.0,
        "extra_body": {"min_p": 0, "repeat_penalty": 1, "repeat_last_n": 64},
    }
    for settings in ({}, {"temperature": 0.8, "seed": 3}):
        plain = server.client().completions.create(**request, **settings)
        same = server.client().completions.create(**request, **settings, **neutral)
        assert same.choices[0].text == plain.choices[0].text
        assert same.choices[0].logprobs == plain.choices[0].logprobs  # every bit
        # and both are what the device's own loop draws
        want = reference.stream(
            "The NPU",
            max_new_tokens=10,
            seed=settings.get("seed", 0),
            temperature=settings.get("temperature", 0.0),
        ).read()
        assert reference.stats.loop == "device" and same.choices[0].text == want


# -- bad requests --------------------------------------------------------------------

LONG = "the NPU " * 400  # far over the context


@pytest.mark.parametrize(
    ("settings", "status", "param"),
    [
        ({"model": 3}, 400, "model"),
        ({"extra_body": {"min_p": 1.5}}, 400, "min_p"),
        ({"extra_body": {"repeat_penalty": 0}}, 400, "repeat_penalty"),
        ({"extra_body": {"repeat_last_n": -2}}, 400, "repeat_last_n"),
        ({"presence_penalty": 2.5}, 400, "presence_penalty"),
        ({"frequency_penalty": -2.5}, 400, "frequency_penalty"),
        ({"prompt": LONG}, 400, "prompt"),
        ({"max_tokens": 0}, 400, "max_tokens"),
        ({"temperature": 3}, 400, "temperature"),
        ({"top_p": 0}, 400, "top_p"),
        ({"extra_body": {"top_k": 0}}, 400, "top_k"),
        ({"extra_body": {"top_k": 257}}, 400, "top_k"),
        ({"n": 2}, 400, "n"),
        ({"logprobs": 6}, 400, "logprobs"),  # OpenAI's range is [0, 5]
        ({"extra_body": {"top_logprobs": 2}}, 400, "top_logprobs"),  # chat's
        ({"echo": True}, 400, "echo"),
        ({"seed": -1}, 400, "seed"),
        ({"stop": ["a", "b", "c", "d", "e"]}, 400, "stop"),
        ({"extra_body": {"mirostat": 2}}, 400, "mirostat"),
        ({"extra_body": {"prompt": [1, 10**9]}}, 400, "prompt"),
    ],
    ids=lambda v: json.dumps(v)[:40] if isinstance(v, dict) else str(v),
)
def test_a_bad_completion_gets_its_error_object(server, settings, status, param):
    request = {"model": MODEL, "prompt": "The NPU", "max_tokens": 4, **settings}
    with pytest.raises(openai.APIStatusError) as caught:
        server.client().completions.create(**request)
    error = caught.value
    assert error.status_code == status
    body = error.response.json()["error"]
    assert body["param"] == param
    assert body["type"] and body["message"]
    assert error.response.status_code < 500


@pytest.mark.parametrize(
    ("settings", "param"),
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "robot", "content": "hi"}]}, "messages"),
        ({"messages": [{"role": "user", "content": LONG}]}, "messages"),
        ({"logprobs": 1}, "logprobs"),  # true or false
        ({"top_logprobs": 21, "logprobs": True}, "top_logprobs"),  # [0, 20]
        ({"top_logprobs": 3}, "top_logprobs"),  # without logprobs: true
        ({"tools": [{"type": "function"}]}, "tools"),  # no function
        ({"response_format": {"type": "yaml"}}, "response_format"),
    ],
    ids=lambda v: json.dumps(v)[:40],
)
def test_a_bad_chat_gets_its_error_object(server, settings, param):
    request = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
        **settings,
    }
    with pytest.raises(openai.BadRequestError) as caught:
        server.client().chat.completions.create(**request)
    assert caught.value.response.json()["error"]["param"] == param


@pytest.mark.parametrize(
    ("method", "path", "content", "status", "code"),
    [
        ("POST", "/v1/completions", b"{not json", 400, "invalid_json"),
        ("POST", "/v1/completions", b"[1, 2]", 400, None),
        ("POST", "/v1/completions", b"x" * (2 << 20), 413, "request_too_large"),
        ("GET", "/v1/completions", b"", 405, None),
        ("GET", "/v1/nothing", b"", 404, None),
    ],
    ids=["malformed", "not-an-object", "too-large", "method", "path"],
)
def test_a_malformed_request_gets_its_error_object(
    server, method, path, content, status, code
):
    response = httpx.request(
        method, f"{server.url}{path}", content=content, headers=JSON, timeout=TIMEOUT_S
    )
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code and error["message"]
    assert server.health()["status"] == "ok"  # and it still serves


# -- browsers, and callers kept apart -------------------------------------------------


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("localhost", 200),
        ("localhost:{port}", 200),
        ("127.0.0.1:{port}", 200),
        ("[::1]:{port}", 200),
        ("LocalHost", 200),
        ("attacker.example", 403),  # a DNS-rebound page names its own site
        ("attacker.example:{port}", 403),
        ("localhost.attacker.example", 403),
        ("127.0.0.1.nip.io", 403),
    ],
)
def test_a_loopback_server_answers_only_loopback_host_names(server, host, status):
    headers = {"Host": host.format(port=server.port)}
    for method, path in [("GET", "/health"), ("POST", "/v1/completions")]:
        body = {"model": MODEL, "prompt": "x", "max_tokens": 1}
        response = httpx.request(
            method, f"{server.url}{path}", json=body, headers=headers, timeout=TIMEOUT_S
        )
        assert response.status_code == status, (method, response.text)
        if status == 403:
            error = response.json()["error"]
            assert error["param"] == "Host" and error["code"] == "host_not_allowed"
            assert "--allowed-hosts" in error["message"]


@pytest.mark.parametrize(
    "kind",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"],
)
def test_a_post_body_must_say_it_is_json(server, kind):
    """The content types a web page may send cross-site without a preflight."""
    body = json.dumps({"model": MODEL, "prompt": "x", "max_tokens": 1}).encode()
    headers = {} if kind is None else {"Content-Type": kind}
    response = httpx.post(
        f"{server.url}/v1/completions", content=body, headers=headers, timeout=60
    )
    assert response.status_code == 415
    error = response.json()["error"]
    assert error["param"] == "Content-Type" and "application/json" in error["message"]
    typed = {"Content-Type": "application/json; charset=utf-8"}
    response = httpx.post(
        f"{server.url}/v1/completions", content=body, headers=typed, timeout=60
    )
    assert response.status_code == 200


def test_cors_is_off_by_default(server):
    origin = {"Origin": "https://attacker.example"}
    preflight = httpx.options(
        f"{server.url}/v1/completions",
        headers={**origin, "Access-Control-Request-Method": "POST"},
        timeout=TIMEOUT_S,
    )
    assert preflight.status_code == 405
    assert "access-control-allow-origin" not in preflight.headers
    answer = httpx.get(f"{server.url}/v1/models", headers=origin, timeout=TIMEOUT_S)
    assert answer.status_code == 200
    assert "access-control-allow-origin" not in answer.headers


@pytest.fixture(scope="module")
def opened() -> Iterator[Server]:
    """A server reached by another name, for one web page's origin."""
    hosts = ("--allowed-hosts", "npu.example", "127.0.0.1")  # the tests' own
    with serving(*hosts, "--cors-origins", "http://app.example") as s:
        yield s


def test_cors_origins_and_allowed_hosts_open_what_they_name(opened):
    named = {"Host": f"npu.example:{opened.port}"}
    ask = {"Access-Control-Request-Method": "POST"}
    url = f"{opened.url}/v1/completions"
    good = httpx.options(
        url, headers={**named, **ask, "Origin": "http://app.example"}, timeout=60
    )
    assert good.status_code == 200
    assert good.headers["access-control-allow-origin"] == "http://app.example"
    other = httpx.options(
        url, headers={**named, **ask, "Origin": "http://attacker.example"}, timeout=60
    )
    assert "access-control-allow-origin" not in other.headers
    assert other.status_code == 400
    assert other.json()["error"]["param"] == "Origin"
    body = {"model": MODEL, "prompt": "x", "max_tokens": 1}
    answer = httpx.post(
        url, json=body, headers={**named, "Origin": "http://app.example"}, timeout=60
    )
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == "http://app.example"
    # the names given replace the loopback's
    local = {"Host": f"localhost:{opened.port}"}
    assert httpx.get(f"{opened.url}/health", headers=local).status_code == 403


def test_the_prefix_cache_is_shared_only_by_the_same_caller(server):
    prompt = "Tell me everything about " + "the secret plan " * 6

    def cached(key: str, **extra) -> int:
        answer = server.client(key).completions.create(
            model=MODEL, prompt=prompt, max_tokens=1, **extra
        )
        return answer.usage.prompt_tokens_details.cached_tokens

    cached("alice")
    assert cached("alice") > 0  # the same caller reuses its prefix
    assert cached("bob") == 0  # another key learns nothing of alice's prompt
    assert cached("bob") > 0
    assert cached("bob", user="carol") == 0  # nor another user under one key
    assert cached("bob", user="carol") > 0
    # each caller's prefix stays in a slot of its own while slots are free
    assert server.health()["slots"] >= 3
    assert cached("alice") > 0


def test_any_model_name_is_answered_by_the_served_model(server, reference):
    answer = server.client().completions.create(
        model="Llama-3.2-1B-Instruct", prompt="The NPU", max_tokens=4
    )
    assert answer.model == MODEL  # says which model answered
    assert answer.choices[0].text == expected(reference, "The NPU", 4)[0]


SERVING = Path(__file__).resolve().parents[3] / "docs" / "guide" / "serving.md"


def _fenced(section: str, language: str) -> list[str]:
    """The ``language`` blocks of serving.md's ``## section``."""
    text = SERVING.read_text().split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return [b.split("\n```", 1)[0] for b in text.split(f"```{language}\n")[1:]]


def test_the_serving_pages_examples_work_against_the_default_server(server):
    """Its curl and openai examples, as written, against a default server
    (only the port is this test's)."""
    here = f"http://127.0.0.1:{server.port}"
    for block in _fenced("With curl", "sh"):
        script = block.replace("http://127.0.0.1:8000", here)
        done = subprocess.run(
            ["sh", "-e", "-c", script.replace("curl ", "curl -sf ")],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S * 2,
        )
        assert done.returncode == 0, done.stderr
        assert '"model":"iron-tiny"' in done.stdout.replace(" ", "")
        assert done.stdout.rstrip().endswith("data: [DONE]")
    (python,) = _fenced("With the openai client", "python")
    printed = subprocess.run(
        [sys.executable, "-c", python.replace("http://127.0.0.1:8000", here)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S * 2,
    )
    assert printed.returncode == 0, printed.stderr
    assert "CompletionUsage" in printed.stdout


def test_a_slow_template_does_not_hold_the_event_loop(tmp_path: Path):
    """Rendering runs on the prompt thread, and stops at the template's bound;
    /health answers meanwhile."""
    from iron.lm.tokenizer import TEMPLATE_SECONDS

    directory = tiny.write_checkpoint(tmp_path / "slow")
    config = directory / "tokenizer_config.json"
    settings = json.loads(config.read_text())
    settings["chat_template"] = (
        "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}"
    )
    config.write_text(json.dumps(settings))
    with serving("--checkpoint", str(directory), "--model-name", MODEL) as server:
        answers: list[httpx.Response] = []
        chat = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        thread = threading.Thread(
            target=lambda: answers.append(
                httpx.post(
                    f"{server.url}/v1/chat/completions", json=chat, timeout=TIMEOUT_S
                )
            )
        )
        start = time.monotonic()
        thread.start()
        time.sleep(0.3)  # rendering
        health = httpx.get(f"{server.url}/health", timeout=TIMEOUT_S)
        assert health.status_code == 200
        assert time.monotonic() - start < TEMPLATE_SECONDS / 2  # not held
        plain = server.client().completions.create(
            model=MODEL, prompt="The NPU", max_tokens=2
        )
        assert plain.usage.completion_tokens == 2
        thread.join(TIMEOUT_S)
        assert time.monotonic() - start < TEMPLATE_SECONDS + 3
        (answer,) = answers
        assert answer.status_code == 400
        assert answer.json()["error"]["param"] == "messages"
        assert "stopped" in answer.json()["error"]["message"]


# -- slow and idle connections ---------------------------------------------------------


def _closed_after(sock: socket.socket, limit: float) -> tuple[float, bytes]:
    """Seconds until the server closes ``sock`` (reading what it sent)."""
    start = time.monotonic()
    sock.settimeout(limit)
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return time.monotonic() - start, got


def test_slow_and_idle_connections_are_closed_within_their_bounds(server):
    from iron.lm.serve._http import HEADER_SECONDS
    from iron.lm.serve.app import BODY_SECONDS

    address = ("127.0.0.1", server.port)
    with (
        socket.create_connection(address) as idle,
        socket.create_connection(address) as loris,
        socket.create_connection(address) as slow_body,
    ):
        loris.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        slow_body.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        )
        start = time.monotonic()
        threading.Timer(3, loris.sendall, (b"X-Slow: 1\r\n",)).start()  # trickles
        for sock in (idle, loris):
            waited, _ = _closed_after(sock, HEADER_SECONDS + 10)
            assert time.monotonic() - start < HEADER_SECONDS + 3
        waited, answer = _closed_after(slow_body, BODY_SECONDS + 10)
        assert BODY_SECONDS - 1 < time.monotonic() - start < BODY_SECONDS + 5
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408")
    assert json.loads(body)["error"]["code"] == "request_timeout"
    assert server.health()["status"] == "ok"


@pytest.mark.parametrize(
    "head",
    [
        b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "
        + b"x" * 40000
        + b"\r\n\r\n",
        b"NOT HTTP AT ALL\r\n\r\n",
    ],
    ids=["oversized", "malformed"],
)
def test_a_bad_request_head_gets_a_json_400(server, head):
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        for start in range(0, len(head), 4096):  # as a slow client sends it
            with contextlib.suppress(OSError):  # the server may be done
                sock.sendall(head[start : start + 4096])
            time.sleep(0.01)
        _, answer = _closed_after(sock, TIMEOUT_S)
    status, _, body = answer.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 400")
    assert json.loads(body)["error"]["code"] == "invalid_http"


# -- the API key, the queue's bound, SIGTERM -----------------------------------------


@pytest.fixture(scope="module")
def guarded() -> Iterator[Server]:
    """A server with an API key, one slot and no room to wait."""
    with serving("--api-key", "sekret", "--max-queue", "0", "--slots", "1") as s:
        yield s


def test_the_api_key_is_checked(guarded):
    with pytest.raises(openai.AuthenticationError) as caught:
        guarded.client("wrong").models.list()
    assert caught.value.response.json()["error"]["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        guarded.client("wrong").completions.create(
            model=MODEL, prompt="x", max_tokens=1
        )
    assert [m.id for m in guarded.client("sekret").models.list().data] == [MODEL]


def test_past_the_queue_bound_is_503_with_retry_after(guarded):
    client = guarded.client("sekret")
    stream = client.completions.create(
        model=MODEL, prompt="The NPU", max_tokens=200, stream=True
    )
    try:
        next(iter(stream))  # it holds the device now
        response = httpx.post(
            f"{guarded.url}/v1/completions",
            json={"model": MODEL, "prompt": "x", "max_tokens": 1},
            headers={"Authorization": "Bearer sekret"},
            timeout=TIMEOUT_S,
        )
        assert response.status_code == 503
        assert response.headers["retry-after"] == "1"
        assert response.json()["error"]["code"] == "queue_full"
    finally:
        stream.close()


def test_sigterm_finishes_what_is_in_flight_and_exits():
    server = Server()
    try:
        with httpx.stream(
            "POST",
            f"{server.url}/v1/completions",
            json={
                "model": MODEL,
                "prompt": "The NPU",
                "max_tokens": 150,
                "stream": True,
            },
            timeout=TIMEOUT_S,
        ) as response:
            lines = response.iter_lines()
            assert next(lines).startswith("data: ")  # streaming
            server.process.send_signal(signal.SIGTERM)
            rest = [line for line in lines if line]
        assert rest[-1] == "data: [DONE]"
        assert server.process.wait(TIMEOUT_S) == 0
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{server.url}/health", timeout=5)
    finally:
        server.stop()


def test_a_forced_stop_answers_what_it_cuts_with_json():
    """A second Ctrl-C cuts the requests in flight: one waiting gets a JSON
    503 (uvicorn's own answer was a plain-text 500)."""
    # one slot: the second request waits for the device (with more it is
    # decoded beside the first, and may finish before the forced stop)
    server = Server("--slots", "1")
    answers: dict[str, httpx.Response | list[str]] = {}
    body = {"model": MODEL, "prompt": "The NPU", "max_tokens": CONTEXT - ROWS - 8}

    def waiting() -> None:
        answers["plain"] = httpx.post(
            f"{server.url}/v1/completions", json=body, timeout=TIMEOUT_S
        )

    try:
        with httpx.stream(
            "POST",
            f"{server.url}/v1/completions",
            json={**body, "stream": True},
            timeout=TIMEOUT_S,
        ) as response:
            lines = response.iter_lines()
            assert next(lines).startswith("data: ")  # it holds the device
            thread = threading.Thread(target=waiting)
            thread.start()
            time.sleep(0.3)  # the second request waits for the device
            server.process.send_signal(signal.SIGINT)
            time.sleep(0.2)
            server.process.send_signal(signal.SIGINT)  # forced
            rest = [line for line in lines if line]
            thread.join(TIMEOUT_S)
        # the stream ends: [DONE] if it finished, else the same error as an event
        assert rest[-1] == "data: [DONE]" or "shutting_down" in rest[-1]
        plain = answers["plain"]
        assert isinstance(plain, httpx.Response)
        assert plain.status_code == 503
        assert plain.json()["error"]["code"] == "shutting_down"
        server.process.wait(TIMEOUT_S)
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--port", "70000"), "--port is in [0, 65535], got 70000"),
        (("--max-queue", "-1"), "--max-queue is at least 0"),
        (("--top-k", "300"), "--top-k is 0 (off) or 1..256, got 300"),
        (("--rows", "0"), "--rows is a positive number of prompt tokens per chunk"),
        (("--temperature", "nan"), "--temperature is a number >= 0"),
        (("--api-key", ""), "--api-key must not be empty"),
        (("--api-key", "clé"), "--api-key holds 'é', which an HTTP header cannot"),
        (("--temperature", "5"), "--temperature is at most 2 (the server's bound"),
        (("--speculate", "16"), "--speculate is in [0, 15] with --rows 16"),
        (("--speculate", "-1"), "--speculate is in [0, 15]"),
        (("--min-p", "2"), "--min-p is a number in [0, 1] (the server's bound too)"),
        (("--repeat-penalty", "0"), "--repeat-penalty is a number > 0"),
        (("--repeat-last-n", "-3"), "--repeat-last-n is an integer >= -1"),
        (("--presence-penalty", "9"), "--presence-penalty is a number in [-2, 2]"),
    ],
)
def test_bad_settings_are_usage_errors(args, message):
    done = subprocess.run(
        [sys.executable, "-m", "iron.lm", "serve", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 2
    assert message in done.stderr


def test_the_api_key_can_come_from_the_environment(monkeypatch):
    def parsed(*args: str):
        parser = argparse.ArgumentParser()
        command.add_parser(parser.add_subparsers(dest="command"))
        return parser.parse_args(["serve", *args])

    monkeypatch.setenv("IRON_LM_API_KEY", "from-env")
    assert parsed().api_key == "from-env"
    assert parsed("--api-key", "given").api_key == "given"
    monkeypatch.delenv("IRON_LM_API_KEY")
    assert parsed().api_key is None


def test_without_the_extra_the_command_says_what_to_install(tmp_path: Path):
    # a stand-in uvicorn that cannot be imported, first on the path
    (tmp_path / "uvicorn.py").write_text("raise ImportError('no uvicorn here')\n")
    done = subprocess.run(
        [sys.executable, "-m", "iron.lm", "serve"],
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 1
    assert "pip install './packages/iron-lm[serve]'" in done.stderr


def test_per_request_sampling_compiles_nothing(reference, monkeypatch):
    """The app in this process, on the reference decoder: many settings, no build."""
    from starlette.testclient import TestClient

    from iron.core.graph import Graph
    from iron.lm.serve.app import create_app
    from iron.runtime.backend import Runtime

    built: list[str] = []
    record, compile_ = Graph.record, Runtime.compile

    def counted_record(self, **shapes):
        built.append(f"record {self.name}")
        return record(self, **shapes)

    def counted_compile(self, graph, recording, **options):
        built.append(f"compile {graph.name}")
        return compile_(self, graph, recording, **options)

    monkeypatch.setattr(Graph, "record", counted_record)
    monkeypatch.setattr(Runtime, "compile", counted_compile)
    app = create_app(reference, model=MODEL)
    texts = []
    with TestClient(app, base_url="http://localhost") as client:
        for s in (
            {},
            {"temperature": 0.7, "seed": 1},
            {"temperature": 0.7, "top_p": 0.5, "seed": 1},
            {"temperature": 1.5, "top_k": 3, "seed": 2},
            {},
        ):
            body = {"model": MODEL, "prompt": "The NPU", "max_tokens": 6, **s}
            response = client.post("/v1/completions", json=body)
            assert response.status_code == 200, response.text
            texts.append(response.json()["choices"][0]["text"])
    assert built == []
    assert texts[0] == texts[-1] and len(set(texts)) >= 3


def test_a_checkpoint_changed_on_disk_makes_the_server_unhealthy(tmp_path: Path):
    """Health tells the truth: 503 once the model can no longer answer."""
    from starlette.testclient import TestClient

    from iron.lm.serve.app import create_app

    directory = tiny.write_checkpoint(tmp_path / "tiny")
    decoder = Decoder.from_pretrained(
        directory, device="npu2", context=CONTEXT, rows=ROWS, progress=False
    ).compile()
    body = {"model": MODEL, "prompt": "The NPU", "max_tokens": 2}
    with TestClient(create_app(decoder, model=MODEL), base_url="http://localhost") as c:
        assert c.get("/health").status_code == 200
        assert c.post("/v1/completions", json=body).status_code == 200
        shard = next(directory.glob("*.safetensors"))
        with open(shard, "ab") as f:
            f.write(b"\0" * 8)  # rewritten in place while served
        health = c.get("/health")
        assert health.status_code == 503
        assert health.json()["status"] == "unavailable"
        assert "changed on disk" in health.json()["error"]["message"]
        answer = c.post("/v1/completions", json=body)
        assert answer.status_code == 503
        assert answer.json()["error"]["code"] == "model_unavailable"
        assert "retry-after" not in answer.headers  # restart, not retry
