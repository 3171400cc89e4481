"""The same request, repeated against a running server, gets the same answer.

Issue 30: at temperature 0 a request sent again, with its prompt's prefix
now in the server's cache, used to answer other text (a prompt chunk and the
decode step computed a position apart). Now every path gives a position the
same logits, so a request repeated in any order with others, streamed or not,
returns identical text and log-probabilities, greedy and seeded; and the
Python API's ``Decoder`` gives the server's text.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_serve import MODEL, Server, reference, serving  # noqa: F401 (fixture)

from iron.operators import matvec

pytestmark = pytest.mark.skipif(
    not matvec.available(),
    reason="bit-equal paths need the compiled kernel models (iron-operators[jit])",
)

PROMPT = "The capital of the NPU is"
OTHER = "The capital of the NPU was never"  # shares a prefix, then differs


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with serving() as s:
        yield s


def answer(server: Server, prompt: str, stream: bool, **settings) -> tuple:
    """The text and every token's logprob and alternatives of one completion."""
    client = server.client()
    request = {"model": MODEL, "prompt": prompt, "max_tokens": 12, "logprobs": 3}
    if not stream:
        choice = client.completions.create(**request, **settings).choices[0]
        lp = choice.logprobs
        return choice.text, lp.tokens, lp.token_logprobs, lp.top_logprobs
    text, tokens, values, tops = "", [], [], []
    for chunk in client.completions.create(**request, **settings, stream=True):
        piece = chunk.choices[0]
        text += piece.text
        if piece.logprobs is not None:
            tokens += piece.logprobs.tokens
            values += piece.logprobs.token_logprobs
            tops += piece.logprobs.top_logprobs
    return text, tokens, values, tops


@pytest.mark.parametrize(
    "settings", [{}, {"temperature": 0.9, "seed": 11}], ids=["greedy", "seeded"]
)
def test_a_request_repeated_in_any_order_gets_identical_text_and_logprobs(
    server,
    reference,  # noqa: F811 (the fixture imported above)
    settings,
):
    first = answer(server, PROMPT, False, **settings)
    order = [
        (PROMPT, True),  # again, streamed: all but its last token cached
        (OTHER, False),  # another caller's prompt between
        (PROMPT, False),  # its shared prefix cached, the rest prefilled
        ("Something else entirely", True),
        (PROMPT, True),
    ]
    for prompt, stream in order:
        got = answer(server, prompt, stream, **settings)
        if prompt == PROMPT:
            assert got == first, f"streamed={stream}"
    text = reference.stream(
        PROMPT,
        max_new_tokens=12,
        seed=settings.get("seed", 0),
        temperature=settings.get("temperature", 0.0),
        top_k=256 if settings else None,
    ).read()
    assert first[0] == text


def test_a_speculating_request_gets_the_same_text_and_says_what_it_drafted(server):
    client = server.client()
    request = {
        "model": MODEL,
        "prompt": "one two three one two three one two three one two",
        "max_tokens": 16,
    }
    plain = client.completions.create(**request)
    fast = client.completions.create(**request, extra_body={"speculate": 6})
    assert fast.choices[0].text == plain.choices[0].text
    details = fast.usage.completion_tokens_details
    assert details is not None
    assert details.accepted_prediction_tokens > 0
    assert details.rejected_prediction_tokens >= 0
    assert plain.usage.completion_tokens_details is None  # it did not speculate
    streamed = client.completions.create(
        **request,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"speculate": 6},
    )
    chunks = list(streamed)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == (
        plain.choices[0].text
    )
    assert chunks[-1].usage.completion_tokens_details.accepted_prediction_tokens == (
        details.accepted_prediction_tokens
    )
    with pytest.raises(Exception) as refused:
        client.completions.create(**request, extra_body={"speculate": 99})
    assert refused.value.status_code == 400
    assert "speculate" in str(refused.value)
