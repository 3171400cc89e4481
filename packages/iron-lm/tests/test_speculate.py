"""Speculative decoding by prompt lookup gives exactly the tokens without it.

Drafts come from :func:`iron.lm.speculate.lookup_draft`; ``generate(...,
speculate=k)`` verifies them in prompt chunks. The tokens must equal the
non-speculative host loop's, greedy and seeded, with stop ids, near the
context's end and at every draft length; the drafted and kept counts are
reported; bad settings are refused before anything runs.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lm_support import CONTEXT, ROWS, prompt_ids

from iron.lm.generate import Decoder
from iron.lm.speculate import lookup_draft
from iron.operators import matvec

needs_jit = pytest.mark.skipif(
    not matvec.available(),
    reason="speculation keeps the tokens only where a chunk's logits are the "
    "decode step's bits (iron-operators[jit])",
)


# -- drafting ---------------------------------------------------------------------------


def test_the_longest_latest_match_drafts_what_followed_it():
    assert lookup_draft([5, 6, 7, 8, 1, 5, 6, 7], 3) == [8, 1, 5]
    # the 3-gram [9, 5, 6] is not there; [5, 6] is, latest at position 4
    assert lookup_draft([5, 6, 1, 2, 5, 6, 3, 9, 5, 6], 2) == [3, 9]
    assert lookup_draft([1, 2, 3, 4], 5) == []  # nothing repeats
    assert lookup_draft([4, 4, 4], 3) == [4]  # what follows the match, to the end
    assert lookup_draft([1, 2, 1], 0) == []
    assert lookup_draft([7], 4) == []
    # a single token's match drafts only when asked to
    assert lookup_draft([3, 8, 5, 3], 2) == []
    assert lookup_draft([3, 8, 5, 3], 2, min_ngram=1) == [8, 5]


def test_drafting_refuses_bad_counts():
    with pytest.raises(ValueError, match="count=-1 is negative"):
        lookup_draft([1, 2], -1)
    with pytest.raises(ValueError, match="give 1 <= min_ngram <= max_ngram"):
        lookup_draft([1, 2], 1, max_ngram=0)
    with pytest.raises(ValueError, match="min_ngram=4 and max_ngram=3"):
        lookup_draft([1, 2], 1, min_ngram=4)


# -- verifying ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def decoder(checkpoints) -> Decoder:
    return Decoder.from_pretrained(
        checkpoints(), device="npu2", context=CONTEXT, rows=ROWS, progress=False
    ).compile()


def repetitive(length: int, seed: int) -> np.ndarray:
    """A prompt that repeats itself, so lookup drafts often."""
    base = prompt_ids(7, seed=seed)
    return np.resize(base, length).astype(np.int32)


@needs_jit
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    length=st.integers(3, 30),
    new=st.integers(1, 30),
    k=st.integers(1, ROWS - 1),
    temperature=st.sampled_from([0.0, 0.7, 1.3]),
    seed=st.integers(0, 50),
    stop=st.booleans(),
)
def test_speculation_gives_the_tokens_of_the_plain_loop(
    decoder, length, new, k, temperature, seed, stop
):
    prompt = repetitive(length, seed)
    run = dict(max_new_tokens=new, seed=seed, temperature=temperature)
    plain = list(decoder.generate(prompt, stop=[], device_loop=False, **run))
    stops = [plain[len(plain) // 2]] if stop else []
    if stop:
        plain = plain[: plain.index(stops[0]) + 1]
    got = list(decoder.generate(prompt, stop=stops, speculate=k, **run))
    assert got == plain
    stats = decoder.stats
    assert 0 <= stats.accepted_tokens <= stats.drafted_tokens
    assert stats.new_tokens == len(got)
    # a pass yields its kept drafts and one token of its own
    assert stats.accepted_tokens + stats.verify_passes <= len(got) - 1
    assert stats.verify_passes <= stats.drafted_tokens


@needs_jit
def test_a_repetitive_prompt_keeps_drafts_and_says_so(decoder):
    prompt = repetitive(28, seed=2)
    plain = list(
        decoder.generate(prompt, max_new_tokens=24, stop=[], device_loop=False)
    )
    got = list(decoder.generate(prompt, max_new_tokens=24, stop=[], speculate=6))
    assert got == plain
    stats = decoder.stats
    assert stats.drafted_tokens > 0 and stats.accepted_tokens > 0
    assert f"{stats.accepted_tokens} of {stats.drafted_tokens} drafted" in (
        stats.summary()
    )
    assert stats.acceptance == stats.accepted_tokens / stats.drafted_tokens


@needs_jit
def test_near_the_context_end_only_whole_chunks_that_fit_are_verified(decoder):
    prompt = repetitive(CONTEXT - ROWS, seed=4)  # the longest prompt allowed
    plain = list(
        decoder.generate(prompt, max_new_tokens=ROWS, stop=[], device_loop=False)
    )
    got = list(decoder.generate(prompt, max_new_tokens=ROWS, stop=[], speculate=5))
    assert got == plain and len(got) == ROWS
    # a pass writes a whole chunk: only the one starting right after the
    # prompt fits the context; then it goes step by step
    assert decoder.stats.drafted_tokens <= 5


def test_bad_settings_are_refused_before_anything_runs(decoder):
    prompt = prompt_ids(8)
    with pytest.raises(
        ValueError, match=rf"speculate={ROWS} is outside \[0, {ROWS - 1}\]"
    ):
        decoder.generate(prompt, speculate=ROWS)
    with pytest.raises(ValueError, match=r"speculate=-1 is outside"):
        decoder.generate(prompt, speculate=-1)
    with pytest.raises(TypeError, match="speculate takes an int"):
        decoder.generate(prompt, speculate=True)
    with pytest.raises(ValueError, match="the device loop cannot"):
        decoder.generate(prompt, speculate=2, device_loop=True)


# -- a draft model --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def twin(checkpoints) -> Decoder:
    """A second decoder of the same weights: a draft model that always agrees."""
    return Decoder.from_pretrained(
        checkpoints(), device="npu2", context=CONTEXT, rows=ROWS, progress=False
    ).compile()


@pytest.fixture(scope="module")
def other(tmp_path_factory) -> Decoder:
    """A draft model of the same vocabulary and other weights."""
    from lm_support import write_tiny

    directory = write_tiny(tmp_path_factory.mktemp("draft"), seed=99)
    return Decoder.from_pretrained(
        directory, device="npu2", context=CONTEXT, rows=ROWS, progress=False
    ).compile()


@needs_jit
def test_a_draft_model_that_agrees_has_every_greedy_draft_kept(decoder, twin):
    prompt = prompt_ids(10, seed=6)
    plain = list(
        decoder.generate(prompt, max_new_tokens=20, stop=[], device_loop=False)
    )
    got = list(
        decoder.generate(prompt, max_new_tokens=20, stop=[], speculate=4, draft=twin)
    )
    assert got == plain
    stats = decoder.stats
    assert stats.drafted_tokens > 0
    assert stats.accepted_tokens == stats.drafted_tokens


@needs_jit
@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_another_draft_model_changes_no_token(decoder, other, temperature):
    prompt = prompt_ids(12, seed=7)
    run = dict(max_new_tokens=24, stop=[], seed=4, temperature=temperature)
    plain = list(decoder.generate(prompt, device_loop=False, **run))
    got = list(decoder.generate(prompt, speculate=5, draft=other, **run))
    assert got == plain
    assert decoder.stats.drafted_tokens > 0


def test_bad_draft_models_are_refused(decoder, other):
    prompt = prompt_ids(8)
    with pytest.raises(ValueError, match="a model cannot draft for itself"):
        decoder.generate(prompt, speculate=2, draft=decoder)
    with pytest.raises(ValueError, match="give speculate"):
        decoder.generate(prompt, draft=other)
    with pytest.raises(TypeError, match="draft takes a Decoder or None"):
        decoder.generate(prompt, speculate=2, draft="small")


@needs_jit
def test_each_token_gets_its_own_logits_before_it(decoder):
    """on_logits (the server's log-probabilities) sees, before each token, the
    logits that token was drawn from: the same rows as without speculation."""
    prompt = repetitive(20, seed=8)
    events: list = []

    def run(**kw) -> list:
        events.clear()
        tokens = []
        for token in decoder.generate(
            prompt,
            max_new_tokens=16,
            stop=[],
            on_logits=lambda row: events.append(row.tobytes()),
            **kw,
        ):
            tokens.append(token)
            events.append(token)
        return list(events)

    plain = run()
    fast = run(speculate=6)
    assert decoder.stats.accepted_tokens > 0
    assert fast == plain  # logits, token, logits, token, ...
