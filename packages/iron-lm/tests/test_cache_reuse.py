"""``reuse_cache``: a prompt prefix the KV cache holds is not prefilled again.

Reusing gives exactly the tokens a fresh run gives (each loop, greedy and
sampled), ``stats.cached_tokens`` says how much was reused, and the record
of what the cache holds stays true after a generation stopped early, after
``logits``, and when reuse is off (the default: nothing changes).
"""

from __future__ import annotations

import numpy as np
import pytest
from lm_support import CONTEXT, ROWS, prompt_ids

from iron.lm.generate import Decoder

LOOPS = [("npu2", True), ("npu2", False), ("npu1", None)]
SAMPLED = {"temperature": 0.8, "top_k": 8}


def fresh(checkpoints, device: str, **settings) -> Decoder:
    """A decoder of its own: these tests depend on what its cache holds."""
    return Decoder.from_pretrained(
        checkpoints(),
        device=device,
        context=CONTEXT,
        rows=ROWS,
        progress=False,
        **settings,
    ).compile()


def tokens(decoder: Decoder, ids, loop, **kw) -> list[int]:
    return list(
        decoder.generate(ids, max_new_tokens=6, seed=5, stop=[], device_loop=loop, **kw)
    )


@pytest.mark.parametrize("settings", [{}, SAMPLED], ids=["greedy", "sampled"])
@pytest.mark.parametrize(("device", "loop"), LOOPS)
def test_a_continued_prompt_reuses_the_cache_and_gives_the_same_tokens(
    checkpoints, device, loop, settings
):
    decoder = fresh(checkpoints, device, **settings)
    first = prompt_ids(21)  # two chunks
    reply = tokens(decoder, first, loop, reuse_cache=True)
    assert decoder.stats.cached_tokens == 0  # nothing was there
    # the next turn: the prompt, the reply, then new ids
    second = np.concatenate([first, reply, prompt_ids(9, seed=1)]).astype(np.int32)
    again = tokens(decoder, second, loop, reuse_cache=True)
    # the reply's last token was never fed, so the cache holds one fewer
    assert decoder.stats.cached_tokens == len(first) + len(reply) - 1
    assert decoder.stats.prompt_tokens == len(second)
    expected = tokens(fresh(checkpoints, device, **settings), second, loop)
    assert again == expected


def test_the_same_prompt_again_prefills_only_its_last_token(decoders, checkpoints):
    decoder = fresh(checkpoints, "npu2")
    ids = prompt_ids(20)
    first = tokens(decoder, ids, None, reuse_cache=True)
    assert tokens(decoder, ids, None, reuse_cache=True) == first
    assert decoder.stats.cached_tokens == len(ids) - 1
    assert "20 prompt tokens (19 cached), first token in" in decoder.stats.summary()


def test_a_different_prompt_reuses_only_the_shared_prefix(checkpoints):
    decoder = fresh(checkpoints, "npu2")
    ids = prompt_ids(20)
    tokens(decoder, ids, None, reuse_cache=True)
    other = ids.copy()
    other[7] += 1
    got = tokens(decoder, other, None, reuse_cache=True)
    assert decoder.stats.cached_tokens == 7
    assert got == tokens(fresh(checkpoints, "npu2"), other, None)


def test_a_generation_stopped_early_leaves_a_true_record(checkpoints):
    decoder = fresh(checkpoints, "npu2")
    ids = prompt_ids(18)
    stream = decoder.generate(ids, max_new_tokens=20, seed=5, stop=[], reuse_cache=True)
    taken = [next(stream), next(stream), next(stream)]
    stream.close()  # the device loop may have run ahead: not counted
    longer = np.concatenate([ids, taken, prompt_ids(4, seed=2)]).astype(np.int32)
    got = tokens(decoder, longer, None, reuse_cache=True)
    assert decoder.stats.cached_tokens == len(ids) + 2
    assert got == tokens(fresh(checkpoints, "npu2"), longer, None)


def test_logits_leave_their_ids_in_the_record(checkpoints):
    decoder = fresh(checkpoints, "npu2")
    ids = prompt_ids(12)
    decoder.logits(ids)
    longer = np.concatenate([ids, prompt_ids(5, seed=3)]).astype(np.int32)
    got = tokens(decoder, longer, None, reuse_cache=True)
    assert decoder.stats.cached_tokens == len(ids)
    assert got == tokens(fresh(checkpoints, "npu2"), longer, None)


def test_without_reuse_everything_is_prefilled(decoders):
    decoder = decoders()
    ids = prompt_ids(20)
    tokens(decoder, ids, None)
    tokens(decoder, ids, None)
    assert decoder.stats.cached_tokens == 0


def test_the_text_calls_pass_reuse_on(checkpoints):
    decoder = fresh(checkpoints, "npu2")
    messages = [{"role": "user", "content": "Hello!"}]
    reply = decoder.chat(messages, max_new_tokens=6, reuse_cache=True)
    first = decoder.stats.prompt_tokens
    messages += [
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "And then?"},
    ]
    again = decoder.chat(messages, max_new_tokens=6, reuse_cache=True)
    assert decoder.stats.cached_tokens >= first
    assert again == fresh(checkpoints, "npu2").chat(messages, max_new_tokens=6)
