"""Hostile HTTP against a running ``iron-lm serve``: each answer within a bound.

Issue 37, item 5: the server's own protocol (:mod:`iron.lm.serve._http`)
bounds a request's head in time and size. These tests send what a hostile
or broken client sends (heads at and past the bound in one read,
pipelined requests, mutated heads and bodies) and assert the server answers
each within a stated time, only with JSON errors or real answers, never a
500, and that its memory stays flat.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_serve import Server, serving

from iron.lm.serve.command import MAX_HEAD_BYTES

#: Seconds any answer below may take (the tiny model answers in well under one).
ANSWER_S = 10.0
#: Growth of the server's resident memory allowed over the whole fuzz run.
RSS_GROWTH_BYTES = 64 * 2**20

HEALTH = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with serving() as s:
        yield s


def _exchange(server: Server, data: bytes, answers: int | None = None) -> bytes:
    """Send ``data`` in one write; what the server answers.

    With ``answers`` the connection stays open (uvicorn takes a half-close for
    a client gone, as a reset) until that many whole responses came; without,
    the writing side is closed and all is read until the server closes.
    """
    with socket.create_connection(("127.0.0.1", server.port), timeout=ANSWER_S) as sock:
        with contextlib.suppress(OSError):  # the server may close before all is sent
            sock.sendall(data)
            if answers is None:
                sock.shutdown(socket.SHUT_WR)
        got = b""
        start = time.monotonic()
        while answers is None or _complete(got) < answers:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += chunk
            assert time.monotonic() - start < ANSWER_S, (
                f"no end to the answer to {data[:80]!r}"
            )
    return got


def _complete(raw: bytes) -> int:
    """How many whole responses ``raw`` holds."""
    try:
        return len(_responses(raw))
    except (ValueError, IndexError, KeyError):
        return (
            len(_responses(raw[: raw.rfind(b"HTTP/1.1 ")]))
            if raw.count(b"HTTP/1.1 ") > 1
            else 0
        )


def _responses(raw: bytes, *, bodiless_first: bool = False) -> list[tuple[int, bytes]]:
    """(status, body) of each response in ``raw`` (bodies have a Content-Length).

    ``bodiless_first``: the first answers a HEAD request, a head only
    (the app's answers, refusals too; h11's refusal of a malformed head,
    written before the method is known, has its JSON body: both are tried).
    """
    found: list[tuple[int, bytes]] = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        fields = dict(line.lower().split(b": ", 1) for line in lines[1:])
        bodiless = bodiless_first and not found
        length = 0 if bodiless else int(fields[b"content-length"])
        if len(rest) < length:
            raise ValueError("a response cut short")
        found.append((status, rest[:length]))
        raw = rest[length:]
    return found


def _health_head(total: int) -> bytes:
    """A GET /health head of exactly ``total`` bytes, padded with one header."""
    bare = HEALTH + b"X-Pad: \r\n\r\n"
    return HEALTH + b"X-Pad: " + b"p" * (total - len(bare)) + b"\r\n\r\n"


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


@pytest.mark.parametrize(
    ("total", "status"),
    [(MAX_HEAD_BYTES, 200), (MAX_HEAD_BYTES + 1, 400), (40_000, 400), (1_000_000, 400)],
)
def test_a_head_in_one_read_is_held_to_the_same_bound(server, total, status):
    """h11's bound covers only a head still arriving; one sent whole is measured too."""
    head = _health_head(total)
    assert len(head) == total
    [(got, body)] = _responses(_exchange(server, head, answers=1))
    assert got == status
    if status == 400:
        assert json.loads(body)["error"]["code"] == "invalid_http"
    assert server.health()["status"] == "ok"


def test_pipelined_requests_are_answered_in_order(server):
    completion = json.dumps({"model": "m", "prompt": "Hi", "max_tokens": 2}).encode()
    post = (
        b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: "
        + str(len(completion)).encode()
        + b"\r\n\r\n"
        + completion
    )
    raw = _exchange(server, post + HEALTH + b"\r\n" + post, answers=3)
    answers = _responses(raw)
    assert [status for status, _ in answers] == [200, 200, 200]
    first, health, third = (json.loads(body) for _, body in answers)
    assert first["object"] == "text_completion"
    assert health["status"] == "ok"
    assert third["choices"][0]["text"] == first["choices"][0]["text"]


def test_an_oversized_head_pipelined_after_a_good_request_is_refused(server):
    raw = _exchange(
        server, HEALTH + b"\r\n" + _health_head(MAX_HEAD_BYTES + 100), answers=2
    )
    answers = _responses(raw)
    assert [status for status, _ in answers] == [200, 400]
    assert json.loads(answers[1][1])["error"]["code"] == "invalid_http"


# A valid request's parts, for mutation: method, target, header lines, body.
_METHODS = st.sampled_from(
    [b"GET", b"POST", b"PUT", b"DELETE", b"OPTIONS", b"HEAD", b"BREW"]
)
_TARGETS = st.sampled_from(
    [
        b"/health",
        b"/v1/models",
        b"/v1/completions",
        b"/v1/chat/completions",
        b"/%00",
        b"/" + b"a" * 5000,
    ]
)
_NAMES = st.sampled_from(
    [
        b"Host",
        b"Content-Type",
        b"Content-Length",
        b"Transfer-Encoding",
        b"Authorization",
        b"X-Any",
    ]
)
_VALUES = st.one_of(
    st.sampled_from(
        [
            b"127.0.0.1",
            b"evil.example",
            b"application/json",
            b"text/plain",
            b"chunked",
            b"-1",
            b"99999999999999999999",
            b"0",
            b"Bearer x",
            b"\x00",
            b"\xff\xfe",
        ]
    ),
    st.binary(max_size=64),
)
_BODIES = st.one_of(
    st.just(b'{"model": "m", "prompt": "Hi", "max_tokens": 1}'),
    st.just(
        b'{"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}'
    ),
    st.binary(max_size=256),
    st.text(max_size=64).map(
        lambda t: json.dumps({"prompt": t, "max_tokens": 1}).encode()
    ),
)


@st.composite
def _hostile_requests(draw) -> bytes:
    line = (
        draw(_METHODS)
        + b" "
        + draw(_TARGETS)
        + b" "
        + draw(st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2", b"HTTP/1.1 x"]))
    )
    headers = [(b"Host", b"127.0.0.1")]
    headers += draw(st.lists(st.tuples(_NAMES, _VALUES), max_size=5))
    body = draw(_BODIES)
    raw = (
        line
        + b"\r\n"
        + b"".join(n + b": " + v + b"\r\n" for n, v in headers)
        + b"\r\n"
        + body
    )
    cut = draw(st.integers(0, len(raw)))  # a mutation: one byte changed (or none)
    flip = draw(st.sampled_from([None, b"\r", b"\n", b"\x00", b" ", b":"]))
    if flip is not None and cut < len(raw):
        raw = raw[:cut] + flip + raw[cut + 1 :]
    return raw


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(request=_hostile_requests())
def test_a_hostile_request_gets_json_or_an_answer_never_a_500(server, request):
    started = time.monotonic()
    raw = _exchange(server, request)
    assert time.monotonic() - started < ANSWER_S
    if not raw:  # closed without an answer: allowed for a cut-off request
        return
    try:
        answers = _responses(raw, bodiless_first=request.startswith(b"HEAD "))
    except (ValueError, IndexError, KeyError):
        answers = _responses(raw)
    for status, body in answers:
        assert status < 500, (request, raw)
        if status >= 400 and body:
            assert json.loads(body)["error"]["message"], (request, raw)


def test_the_hostile_requests_leave_the_server_healthy_and_its_memory_flat(server):
    before = _rss(server.process.pid)
    for seed in range(200):
        garbage = random.Random(seed).randbytes(1 + seed * 20)
        data = garbage if seed % 2 else _health_head(MAX_HEAD_BYTES + seed)
        _exchange(server, data)
    grown = _rss(server.process.pid) - before
    assert grown < RSS_GROWTH_BYTES, f"the server's memory grew {grown} bytes"
    assert server.health()["status"] == "ok"
