"""Drafting tokens for speculative decoding: prompt lookup.

A decode step reads every weight to make one token. Speculative decoding
drafts several next tokens cheaply, runs them through the model in one
prompt-version pass (the weights read once for all of them), and keeps the
drafted tokens the model would have produced itself; the first it would not
is replaced by the model's own, so every pass yields at least one token.

:func:`lookup_draft` drafts by prompt lookup (no second model): the last few
tokens of the text so far are searched for earlier in it, and the tokens that
followed their latest earlier occurrence are the draft. Text that repeats
itself (code edits, summaries, answers quoting their context) drafts well;
text that does not drafts nothing, and decoding runs as it would without.

:meth:`iron.lm.generate.Decoder.generate` verifies the drafts
(``speculate=k``): because a position's logits are the same bits in a prompt
chunk and in a decode step (docs/guide/numerics.md), and the sampler's draw
for a position depends only on those logits and ``seed + position``, a draft
token is kept exactly when the step without speculation would have sampled
it. The output is the same tokens as without, greedy or sampled.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["MAX_NGRAM", "MIN_NGRAM", "lookup_draft"]

#: The longest suffix searched for: longer matches predict better and are
#: tried first.
MAX_NGRAM = 3
#: The shortest: a single token's match drafts more often but is kept less
#: often than a pass costs. Measured with figure 13's prompts (SmolLM2-135M,
#: 96-token answers, 8 drafted): modelled npu2 speedups of 1.90x and 1.77x
#: matching down to 1 token, 1.98x and 1.86x down to 2, 1.89x and 1.69x at 3.
MIN_NGRAM = 2


def lookup_draft(
    tokens: Sequence[int],
    count: int,
    max_ngram: int = MAX_NGRAM,
    min_ngram: int = MIN_NGRAM,
) -> list[int]:
    """Up to ``count`` tokens drafted from ``tokens`` by prompt lookup.

    For ``n`` from ``max_ngram`` down to ``min_ngram``, the last ``n`` tokens
    are looked for earlier in ``tokens`` (the latest occurrence first); at
    the first match, the tokens that followed it, at most ``count``, are the
    draft.

    Args:
        tokens: The prompt and the tokens generated so far.
        count: The most tokens to draft (0 drafts nothing).
        max_ngram: The longest suffix tried.
        min_ngram: The shortest suffix tried.

    Returns:
        The drafted tokens, possibly none.

    Raises:
        ValueError: ``count`` is negative, or ``min_ngram`` is below 1 or
            above ``max_ngram``.
    """
    if count < 0:
        raise ValueError(f"lookup_draft: count={count} is negative; give 0 or more")
    if not 1 <= min_ngram <= max_ngram:
        raise ValueError(
            f"lookup_draft: min_ngram={min_ngram} and max_ngram={max_ngram}; give "
            f"1 <= min_ngram <= max_ngram"
        )
    seq = list(tokens)
    size = len(seq)
    if count == 0 or size < 2:
        return []
    for n in range(min(max_ngram, size - 1), min_ngram - 1, -1):
        suffix = seq[size - n :]
        # the latest start before the suffix itself whose n tokens match
        for start in range(size - n - 1, -1, -1):
            if seq[start : start + n] == suffix:
                follow = seq[start + n : start + n + count]
                if follow:
                    return follow
    return []
