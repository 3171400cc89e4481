"""Log-probabilities of generated tokens, in OpenAI's two shapes.

A token's log-probability is that of the distribution the model gave for
its position: the float64 log-softmax of the logits the token was sampled
from (:meth:`iron.lm.generate.Decoder.generate`'s ``on_logits``), before
temperature and top-k, as OpenAI reports the model's own distribution. The
most likely alternatives are the largest of those, ties to the lower id.

Shapes follow OpenAI's API reference
(https://platform.openai.com/docs/api-reference/completions/object and
https://platform.openai.com/docs/api-reference/chat/object):
``/v1/completions`` gives ``{"tokens", "token_logprobs", "top_logprobs",
"text_offset"}``, where ``top_logprobs`` maps each of the ``logprobs`` most
likely tokens' text to its log-probability and holds the sampled token too
("up to logprobs+1 elements"), and ``text_offset`` counts characters from
the start of the prompt; ``/v1/chat/completions`` gives ``{"content":
[{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
"bytes"}]}], "refusal": None}`` with the ``top_logprobs`` most likely.

A token's text is its bytes (:meth:`iron.lm.tokenizer.Tokenizer.token_bytes`)
as UTF-8; a token holding part of a multi-byte character is written
``bytes:\\xNN...`` as OpenAI writes those, and its ``bytes`` are exact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from iron.lm.tokenizer import Tokenizer

__all__ = [
    "MAX_CHAT_TOP",
    "MAX_COMPLETION_TOP",
    "Alternative",
    "Scored",
    "Scorer",
    "chat_logprobs",
    "completion_logprobs",
    "log_softmax",
    "token_text",
]

#: The most alternatives a request may ask: OpenAI's bounds.
MAX_COMPLETION_TOP = 5
MAX_CHAT_TOP = 20


def log_softmax(logits: Any) -> np.ndarray:
    """The float64 log-softmax of ``logits`` (one row of scores)."""
    values = np.asarray(logits, np.float64)
    shifted = values - values.max()
    return shifted - np.log(np.exp(shifted).sum())


@dataclasses.dataclass(frozen=True)
class Alternative:
    """A token and its log-probability.

    Attributes:
        id: The token id.
        token: Its text alone (special tokens by name; ``bytes:\\xNN...``
            for part of a character).
        raw: The bytes it stands for.
        logprob: Its log-probability.
    """

    id: int
    token: str
    raw: bytes
    logprob: float


@dataclasses.dataclass(frozen=True)
class Scored:
    """A generated token, its log-probability and the most likely ones.

    Attributes:
        chosen: The generated token.
        top: The most likely tokens at its position, most likely first.
        offset: Characters of generated text before it.
    """

    chosen: Alternative
    top: tuple[Alternative, ...]
    offset: int


class Scorer:
    """Scores each generated token from the logits it was sampled from.

    Pass :meth:`logits` as ``on_logits``; then, for each token yielded,
    :meth:`score` pairs it with the last logits seen.

    Args:
        tokenizer: Gives each token's text.
        top: How many of the most likely tokens to list per position.
    """

    def __init__(self, tokenizer: Tokenizer, top: int) -> None:
        self.tokenizer = tokenizer
        self.top = top
        self._row: np.ndarray | None = None

    def logits(self, row: np.ndarray) -> None:
        """Keep the log-softmax of the next token's logits."""
        self._row = log_softmax(row)

    def _alternative(self, row: np.ndarray, token: int) -> Alternative:
        raw = self.tokenizer.token_bytes(token)
        return Alternative(token, token_text(raw), raw, float(row[token]))

    def score(self, token: int, offset: int) -> Scored:
        """``token``, scored by the logits given last.

        Raises:
            RuntimeError: No logits came before it.
        """
        row = self._row
        if row is None:
            raise RuntimeError(
                f"no logits came before token {token}: pass Scorer.logits as "
                "the generation's on_logits"
            )
        self._row = None
        top: tuple[Alternative, ...] = ()
        if self.top:
            count = min(self.top, row.size)
            best = np.argpartition(-row, count - 1)[:count]
            best = best[np.lexsort((best, -row[best]))]  # most likely, then id
            top = tuple(self._alternative(row, int(i)) for i in best)
        return Scored(self._alternative(row, token), top, offset)


def token_text(raw: bytes) -> str:
    """A token's text from its bytes: the UTF-8 text, or (part of a
    character) ``bytes:`` and each byte as ``\\xNN``, as OpenAI writes it."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{b:02x}" for b in raw)


def chat_logprobs(scored: Sequence[Scored]) -> dict[str, Any]:
    """A chat choice's ``logprobs``: ``{"content": [...], "refusal": None}``."""
    return {
        "content": [
            {
                "token": s.chosen.token,
                "logprob": s.chosen.logprob,
                "bytes": list(s.chosen.raw),
                "top_logprobs": [
                    {"token": a.token, "logprob": a.logprob, "bytes": list(a.raw)}
                    for a in s.top
                ],
            }
            for s in scored
        ],
        "refusal": None,
    }


def completion_logprobs(scored: Sequence[Scored], start: int) -> dict[str, Any]:
    """A completion choice's ``logprobs``; ``start``: the prompt's characters.

    Each ``top_logprobs`` entry maps text to log-probability: two tokens of
    the same text (rare: a special token and its text) keep the likelier.
    """
    tops = []
    for s in scored:
        top: dict[str, float] = {}
        for a in (*s.top, s.chosen):  # the sampled token always among them
            top.setdefault(a.token, a.logprob)
        tops.append(top)
    return {
        "tokens": [s.chosen.token for s in scored],
        "token_logprobs": [s.chosen.logprob for s in scored],
        "top_logprobs": tops,
        "text_offset": [start + s.offset for s in scored],
    }
