"""A position's logits are the same bits whatever path computed them (issue 30).

The kernel models sum each output element in one order, whatever else a call
computes beside it (``iron.operators.matvec.matvecs``, the compiled attention
in ``iron.operators.attention``): so a prompt chunk of either size, a chunk
started after a prefix the cache holds, and the decode step give a position
the same logits, and everything downstream (greedy tokens, a seeded draw, the
server's answer) follows. Hypothesis picks the prompt lengths, chunk sizes and
split points.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lm_support import CONTEXT, prompt_ids

from iron.lm.generate import Decoder
from iron.operators import matvec

pytestmark = pytest.mark.skipif(
    not matvec.available(),
    reason="bit-equal paths need the compiled kernel models (iron-operators[jit])",
)

#: The chunk sizes a decoder of CONTEXT positions runs (multiples of 8).
CHUNKS = (8, 16)
WEIGHTS = ("bf16", "q4")


@pytest.fixture(scope="module")
def made(checkpoints):
    """``made(rows, weights)``: a compiled decoder of its own, made once."""
    cache: dict[tuple[int, str], Decoder] = {}

    def get(rows: int, weights: str) -> Decoder:
        if (rows, weights) not in cache:
            cache[rows, weights] = Decoder.from_pretrained(
                checkpoints("untied"),
                device="npu2",
                context=CONTEXT,
                rows=rows,
                weights=weights,
                progress=False,
            ).compile()
        return cache[rows, weights]

    return get


def bits(logits) -> np.ndarray:
    return np.asarray(logits, np.float32).view(np.uint32)


def through_decode(decoder: Decoder, ids: np.ndarray, split: int) -> np.ndarray:
    """Positions before ``split`` in prompt chunks, the rest one decode step each."""
    out = [np.asarray(decoder.logits(ids[:split]))] if split else []
    for p in range(split, len(ids)):
        logits, _ = decoder.decode(token=int(ids[p]), position=p, n=1, seed=0)
        out.append(np.asarray(logits)[None])
    return np.concatenate(out)


def after_prefix(decoder: Decoder, ids: np.ndarray, split: int) -> np.ndarray:
    """Positions from ``split`` on in prompt chunks starting there, the cache
    holding the first ``split`` positions from an earlier call."""
    out = [np.asarray(decoder.logits(ids[:split]))] if split else []
    start = split
    rows = decoder.graph.rows
    while start < len(ids):
        chunk = ids[start : start + rows]
        n = len(chunk)
        padded = np.zeros(rows, np.int32)
        padded[:n] = chunk
        logits, _ = decoder.prompt(padded, token=0, position=start, n=n)
        out.append(np.asarray(logits)[:n])
        start += n
    return np.concatenate(out)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    length=st.integers(2, 40),
    split=st.integers(0, 39),
    rows=st.sampled_from(CHUNKS),
    weights=st.sampled_from(WEIGHTS),
    seed=st.integers(0, 1000),
)
def test_every_path_gives_a_position_the_same_logits(
    made, length, split, rows, weights, seed
):
    split = min(split, length - 1)
    ids = prompt_ids(length, seed=seed)
    want = bits(made(16, weights).logits(ids))  # one path: 16-row chunks from 0
    other = made(rows, weights)
    assert (bits(other.logits(ids)) == want).all(), f"{rows}-row chunks"
    assert (bits(through_decode(other, ids, split)) == want).all(), (
        f"decode steps from position {split}"
    )
    assert (bits(after_prefix(other, ids, split)) == want).all(), (
        f"chunks from a cached prefix of {split}"
    )


@pytest.mark.parametrize("temperature", [0.0, 0.9])
@pytest.mark.parametrize("loop", [True, False])
def test_the_same_request_gives_the_same_tokens_cached_or_not(
    checkpoints, made, temperature, loop
):
    """Greedy or seeded: a request repeated after others (its prefix cached,
    or not) and a fresh decoder give the same tokens, each loop."""
    fresh = Decoder.from_pretrained(
        checkpoints("untied"), device="npu2", context=CONTEXT, progress=False
    ).compile()
    ids = prompt_ids(29, seed=3)

    def run(decoder: Decoder, prompt, reuse: bool) -> list[int]:
        return list(
            decoder.generate(
                prompt,
                max_new_tokens=12,
                seed=7,
                temperature=temperature,
                stop=[],
                device_loop=loop,
                reuse_cache=reuse,
            )
        )

    want = run(fresh, ids, False)
    decoder = made(8, "bf16")
    run(decoder, prompt_ids(17, seed=4), True)  # another request first
    assert run(decoder, ids, True) == want  # nothing shared: no reuse
    assert run(decoder, ids, True) == want  # all but the last id cached
    assert decoder.stats.cached_tokens == len(ids) - 1
    longer = np.concatenate([ids, prompt_ids(6, seed=5)])
    assert run(decoder, longer, True) == run(fresh, longer, False)
    assert decoder.stats.cached_tokens == len(ids)
