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

__all__ = ["MAX_NGRAM", "lookup_draft"]

#: The longest suffix searched for: longer matches predict better and are
#: tried first, down to one token.
MAX_NGRAM = 3


def lookup_draft(
    tokens: Sequence[int], count: int, max_ngram: int = MAX_NGRAM
) -> list[int]:
    """Up to ``count`` tokens drafted from ``tokens`` by prompt lookup.

    For ``n`` from ``max_ngram`` down to 1, the last ``n`` tokens are looked
    for earlier in ``tokens`` (the latest occurrence first); at the first
    match, the tokens that followed it, at most ``count``, are the draft.

    Args:
        tokens: The prompt and the tokens generated so far.
        count: The most tokens to draft (0 drafts nothing).
        max_ngram: The longest suffix tried.

    Returns:
        The drafted tokens, possibly none.

    Raises:
        ValueError: ``count`` is negative or ``max_ngram`` below 1.
    """
    if count < 0:
        raise ValueError(f"lookup_draft: count={count} is negative; give 0 or more")
    if max_ngram < 1:
        raise ValueError(f"lookup_draft: max_ngram={max_ngram} is below 1")
    seq = list(tokens)
    size = len(seq)
    if count == 0 or size < 2:
        return []
    for n in range(min(max_ngram, size - 1), 0, -1):
        suffix = seq[size - n :]
        # the latest start before the suffix itself whose n tokens match
        for start in range(size - n - 1, -1, -1):
            if seq[start : start + n] == suffix:
                follow = seq[start + n : start + n + count]
                if follow:
                    return follow
    return []
