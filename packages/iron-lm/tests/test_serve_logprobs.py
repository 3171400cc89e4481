"""Log-probabilities in OpenAI's shapes, from the logits a token was sampled from.

The values are checked against a float64 log-softmax computed another way
(``x - logaddexp.reduce(x)``) to 1e-12; the alternatives are the most likely
tokens, ties to the lower id; the shapes are OpenAI's.
"""

from __future__ import annotations

import numpy as np
import pytest

from iron.lm import tiny
from iron.lm.serve.logprobs import (
    Scorer,
    chat_logprobs,
    completion_logprobs,
    log_softmax,
    token_text,
)
from iron.lm.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> Tokenizer:
    return Tokenizer.from_directory(
        tiny.write_checkpoint(tmp_path_factory.mktemp("tiny"))
    )


def test_log_softmax_is_float64_and_exact():
    rng = np.random.default_rng(0)
    row = (rng.standard_normal(512) * 30 + 200).astype(np.float32)  # large values
    got = log_softmax(row)
    assert got.dtype == np.float64
    wide = row.astype(np.float64)
    np.testing.assert_allclose(got, wide - np.logaddexp.reduce(wide), atol=1e-12)
    assert abs(np.logaddexp.reduce(got)) < 1e-12  # a distribution


def test_a_scored_token_lists_the_most_likely_ties_to_the_lower_id(tokenizer):
    row = np.zeros(tokenizer.vocab_size, np.float32)
    row[[40, 7, 300, 9]] = [5.0, 5.0, 4.0, 6.0]
    scorer = Scorer(tokenizer, top=4)
    scorer.logits(row)
    scored = scorer.score(300, offset=3)
    wide = log_softmax(row)
    assert [a.id for a in scored.top] == [9, 7, 40, 300]
    assert [a.logprob for a in scored.top] == [float(wide[i]) for i in (9, 7, 40, 300)]
    assert scored.chosen.id == 300 and scored.chosen.logprob == float(wide[300])
    assert scored.chosen.token == token_text(tokenizer.token_bytes(300))
    assert scored.offset == 3
    assert scored.chosen.raw == tokenizer.token_bytes(300)
    with pytest.raises(RuntimeError, match="no logits came before token 5"):
        scorer.score(5, offset=4)  # each token needs its own logits
    none = Scorer(tokenizer, top=0)
    none.logits(row)
    assert none.score(9, 0).top == ()


def test_the_two_shapes_are_openais(tokenizer):
    scorer = Scorer(tokenizer, top=2)
    row = np.arange(tokenizer.vocab_size, dtype=np.float32) / 100
    scored = []
    for token, offset in ((261, 0), (3, 2)):  # " t", a special token
        scorer.logits(row)
        scored.append(scorer.score(token, offset))
    text = [tokenizer.decode([t]) for t in (261, 3)]
    assert text[0] == " t"
    completion = completion_logprobs(scored, start=10)
    assert completion["tokens"] == text
    assert completion["text_offset"] == [10, 12]  # from the prompt's start
    assert completion["token_logprobs"] == [s.chosen.logprob for s in scored]
    # the 2 most likely, and the sampled token with them (OpenAI: up to N + 1)
    top = completion["top_logprobs"][0]
    assert len(top) == 3 and top[text[0]] == scored[0].chosen.logprob
    assert list(top)[:2] == [a.token for a in scored[0].top]
    chat = chat_logprobs(scored)
    assert chat["refusal"] is None
    first = chat["content"][0]
    assert set(first) == {"token", "logprob", "bytes", "top_logprobs"}
    assert first["token"] == text[0] and first["bytes"] == list(text[0].encode())
    assert chat_logprobs([]) == {"content": [], "refusal": None}
    assert [a["token"] for a in first["top_logprobs"]] == [
        a.token for a in scored[0].top
    ]
    assert all(set(a) == {"token", "logprob", "bytes"} for a in first["top_logprobs"])


def test_a_piece_of_a_character_is_written_as_its_bytes(tokenizer):
    ids = tokenizer.encode("\u2713", add_bos=False)  # one character, 3 bytes
    assert len(ids) > 1  # split across tokens (the tiny vocabulary has no merge)
    raw = [tokenizer.token_bytes(i) for i in ids]
    assert b"".join(raw) == "\u2713".encode()
    assert {tokenizer.decode([i]) for i in ids} == {"\ufffd"}  # decode loses them
    texts = [token_text(r) for r in raw]
    assert texts[0] == "bytes:" + "".join(f"\\x{b:02x}" for b in raw[0])
    assert token_text(b" t") == " t"
    scorer = Scorer(tokenizer, top=0)
    scorer.logits(np.zeros(tokenizer.vocab_size, np.float32))
    chat = chat_logprobs([scorer.score(ids[0], 0)])
    assert chat["content"][0]["bytes"] == list(raw[0])
    assert chat["content"][0]["token"] == texts[0]
    with pytest.raises(ValueError, match="token id 100000 is outside"):
        tokenizer.token_bytes(100000)
