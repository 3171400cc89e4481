"""min_p and the repetition penalties (iron.lm.penalties) through Decoder.generate.

The formulas are checked against a reference written here from llama.cpp's
and OpenAI's descriptions, one token at a time in float32; generation is
checked to draw each token from the logits so changed, with the device's
sampler and seed rule, and to leave everything as it was at the neutral
values.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from lm_support import CONTEXT, prompt_ids

from iron.lm.penalties import Penalties, describe
from iron.operators.sample import draw, temperature_of, top_p_of

F32 = np.float32


def reference_penalized(logits, history, window, repeat, presence, frequency):
    """llama.cpp's penalties, token by token (float32): a token seen ``c``
    times among the last ``window`` tokens has ``l <= 0`` multiplied by
    ``repeat`` (else divided), then ``c * frequency + presence`` subtracted
    (OpenAI's formula)."""
    out = [F32(v) for v in logits]
    recent = list(history)[-window:] if window > 0 else []
    for token in set(recent):
        count = recent.count(token)
        value = out[token]
        value = value * F32(repeat) if value <= 0 else value / F32(repeat)
        value = F32(value - (F32(count) * F32(frequency) + F32(presence)))
        out[token] = value
    return np.array(out, np.float32)


def reference_min_p(logits, min_p):
    """The tokens min-p keeps: probability at least ``min_p`` times the
    likeliest's (softmax in float64)."""
    x = np.asarray(logits, np.float64)
    p = np.exp(x - x.max())
    return set(np.flatnonzero(p >= min_p * p.max()).tolist())


# -- the formulas ----------------------------------------------------------------


@pytest.mark.parametrize("seed", range(12))
def test_the_penalties_equal_the_formulas(seed):
    rng = np.random.default_rng(seed)
    vocab = 50
    logits = rng.normal(0, 4, vocab).astype(np.float32)
    history = rng.integers(0, vocab, int(rng.integers(1, 120))).tolist()
    window = int(rng.integers(1, 100))
    repeat = float(rng.uniform(0.5, 3))
    presence = float(rng.uniform(-2, 2))
    frequency = float(rng.uniform(-2, 2))
    penalties = Penalties(
        repeat_penalty=repeat,
        repeat_last_n=window,
        presence_penalty=presence,
        frequency_penalty=frequency,
    )
    got = penalties.penalize(logits, history, context=CONTEXT)
    want = reference_penalized(logits, history, window, repeat, presence, frequency)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert got is not logits and not np.shares_memory(got, logits)


def test_a_positive_logit_is_divided_and_a_negative_one_multiplied():
    logits = np.array([2.0, -2.0, 0.0, 5.0], np.float32)
    got = Penalties(repeat_penalty=2.0).penalize(logits, [0, 1, 2], CONTEXT)
    assert got.tolist() == [1.0, -4.0, 0.0, 5.0]  # never made likelier
    got = Penalties(presence_penalty=0.5, frequency_penalty=0.25).penalize(
        logits, [0, 0, 0, 1], CONTEXT
    )
    assert got.tolist() == [2.0 - 0.75 - 0.5, -2.0 - 0.25 - 0.5, 0.0, 5.0]


def test_the_window_is_the_last_repeat_last_n_tokens():
    logits = np.ones(6, np.float32)
    history = [0, 1, 2, 3, 4]
    got = Penalties(presence_penalty=1.0, repeat_last_n=2).penalize(
        logits, history, CONTEXT
    )
    assert got.tolist() == [1, 1, 1, 0, 0, 1]  # only 3 and 4
    off = Penalties(presence_penalty=1.0, repeat_last_n=0)
    assert off.penalize(logits, history, CONTEXT).tolist() == [1] * 6
    assert off.neutral
    whole = Penalties(presence_penalty=1.0, repeat_last_n=-1)
    assert whole.window(CONTEXT) == CONTEXT
    long = list(range(6)) * 20  # 120 tokens: the context's last 64 hold all
    assert whole.penalize(logits, long, 100).tolist() == [0] * 6
    assert whole.penalize(logits, long, 3).tolist() == [1, 1, 1, 0, 0, 0]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("min_p", [0.001, 0.05, 0.3, 0.9, 1.0])
def test_min_p_keeps_the_tokens_at_least_min_p_times_the_likeliest(seed, min_p):
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 3, 200).astype(np.float32)
    got = Penalties(min_p=min_p).cut(logits)
    kept = set(np.flatnonzero(np.isfinite(got)).tolist())
    # no logit sits on the threshold, where float32 and float64 may disagree
    gap = np.abs(logits.astype(np.float64) - logits.max() - math.log(min_p))
    assert gap.min() > 1e-5 or min_p == 1.0
    assert kept == reference_min_p(logits, min_p)
    np.testing.assert_array_equal(got[sorted(kept)], logits[sorted(kept)])
    assert int(np.argmax(logits)) in kept


def test_min_p_off_and_neutral_settings_change_nothing():
    logits = np.random.default_rng(0).normal(size=30).astype(np.float32)
    neutral = Penalties(min_p=0.0, repeat_penalty=1.0, presence_penalty=0.0)
    assert neutral.neutral
    got = neutral.apply(logits, [1, 2, 3, 3], CONTEXT)
    np.testing.assert_array_equal(got.view(np.uint32), logits.view(np.uint32))
    assert not Penalties(min_p=1e-9).neutral
    assert not Penalties(frequency_penalty=-0.1).neutral
    assert Penalties(repeat_penalty=3.0, repeat_last_n=0, min_p=0).neutral


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("min_p", 1.01, ValueError),
        ("min_p", -0.01, ValueError),
        ("repeat_penalty", 0.0, ValueError),
        ("repeat_penalty", math.inf, ValueError),
        ("repeat_last_n", -2, ValueError),
        ("repeat_last_n", 1.5, TypeError),
        ("presence_penalty", 2.01, ValueError),
        ("frequency_penalty", math.nan, ValueError),
        ("frequency_penalty", "0.1", TypeError),
        ("min_p", True, TypeError),
        ("repeat_penalty", 10**400, ValueError),  # past float's range
    ],
)
def test_a_value_out_of_range_is_refused_naming_the_field_and_range(
    field, value, error
):
    with pytest.raises(error) as caught:
        Penalties(**{field: value})
    message = str(caught.value)
    assert field in message and repr(value) in message
    assert describe(field) in message


# -- through Decoder.generate -------------------------------------------------------


@pytest.fixture(scope="module")
def decoder(decoders):
    return decoders("tied", "npu2")


PROMPT = prompt_ids(12, seed=3).tolist()
SAMPLED = {"temperature": 0.9, "top_k": 40, "top_p": 0.9}


def _expected(decoder, tokens, rows, penalties, seed, settings):
    """The tokens a host draw from the changed logits gives, step by step."""
    draw_settings = decoder.graph.sampling(**settings)
    history = list(PROMPT)
    want = []
    for k, row in enumerate(rows):
        scores = penalties.apply(row, history, decoder.graph.context)
        position = len(PROMPT) + k
        want.append(
            draw(
                scores,
                temperature=temperature_of(draw_settings["temperature"]),
                top_k=draw_settings["top_k"],
                top_p=top_p_of(draw_settings["top_p"]),
                seed=seed + position,
            )
        )
        history.append(tokens[k])
    return want


@pytest.mark.parametrize(
    "fields",
    [
        {"repeat_penalty": 1.8, "repeat_last_n": 16},
        {"presence_penalty": 1.5, "frequency_penalty": 0.7, "repeat_last_n": -1},
        {"min_p": 0.6},
        {"min_p": 0.5, "repeat_penalty": 1.3, "frequency_penalty": 0.4},
    ],
    ids=lambda f: ",".join(f),
)
@pytest.mark.parametrize("settings", [{"temperature": 0.0}, SAMPLED], ids=str)
def test_each_token_is_drawn_from_the_changed_logits(decoder, fields, settings):
    rows: list[np.ndarray] = []
    seed = 11
    tokens = list(
        decoder.generate(
            PROMPT,
            max_new_tokens=24,
            seed=seed,
            stop=(),
            on_logits=rows.append,
            **settings,
            **fields,
        )
    )
    assert decoder.stats.loop == "host"
    assert len(tokens) == len(rows) == 24
    penalties = Penalties(**fields)
    assert tokens == _expected(decoder, tokens, rows, penalties, seed, settings)
    plain = list(
        decoder.generate(PROMPT, max_new_tokens=24, seed=seed, stop=(), **settings)
    )
    if settings["temperature"] or set(fields) != {"min_p"}:  # greedy: argmax stays
        assert tokens != plain  # they changed something


def test_a_large_repeat_penalty_repeats_nothing_within_the_window(decoder):
    window = 12
    tokens = list(
        decoder.generate(
            PROMPT,
            max_new_tokens=32,
            stop=(),
            repeat_penalty=50.0,
            repeat_last_n=window,
        )
    )
    text = PROMPT + tokens
    for i in range(len(PROMPT), len(text)):
        assert text[i] not in text[max(0, i - window) : i], (i, text)
    plain = list(decoder.generate(PROMPT, max_new_tokens=32, stop=()))
    assert any(
        plain[i] in (PROMPT + plain)[len(PROMPT) + i - window : len(PROMPT) + i]
        for i in range(len(plain))
    )  # without the penalty the tiny model repeats itself


@pytest.mark.parametrize("settings", [{}, SAMPLED], ids=str)
def test_neutral_values_give_the_same_tokens_on_the_same_loop(decoder, settings):
    before = list(decoder.generate(PROMPT, max_new_tokens=20, seed=5, **settings))
    loop = decoder.stats.loop
    neutral = list(
        decoder.generate(
            PROMPT,
            max_new_tokens=20,
            seed=5,
            min_p=0.0,
            repeat_penalty=1.0,
            repeat_last_n=64,
            presence_penalty=0.0,
            frequency_penalty=0.0,
            **settings,
        )
    )
    assert neutral == before and decoder.stats.loop == loop == "device"
    off = list(
        decoder.generate(
            PROMPT,
            max_new_tokens=20,
            seed=5,
            repeat_penalty=5.0,
            repeat_last_n=0,
            **settings,
        )
    )
    assert off == before and decoder.stats.loop == "device"


def test_the_host_draw_is_the_devices_draw(decoder):
    # a min_p too small to cut anything runs the host loop: the same tokens
    device = list(decoder.generate(PROMPT, max_new_tokens=20, seed=9, **SAMPLED))
    host = list(
        decoder.generate(PROMPT, max_new_tokens=20, seed=9, min_p=1e-30, **SAMPLED)
    )
    assert decoder.stats.loop == "host"
    assert host == device


def test_penalties_with_the_device_loop_or_speculation_are_refused(decoder):
    with pytest.raises(ValueError, match="device_loop and speculate"):
        decoder.generate(PROMPT, device_loop=True, min_p=0.1)
    with pytest.raises(ValueError, match="device_loop and speculate"):
        decoder.generate(PROMPT, speculate=2, repeat_penalty=1.1)
    with pytest.raises(ValueError, match="presence_penalty"):
        decoder.generate(PROMPT, presence_penalty=3)
