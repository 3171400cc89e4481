"""llama.cpp's repetition penalties and min-p, applied on the host.

The device's sampler (:class:`iron.operators.sample.Sample`) draws from the
logits as the model computed them, with ``temperature``, ``top_k`` and
``top_p``. llama.cpp's server and Ollama also take ``repeat_penalty``,
``repeat_last_n``, ``presence_penalty``, ``frequency_penalty`` and
``min_p``: :class:`Penalties` holds those five, checks them against the one
set of limits the Python API, ``iron-lm generate``/``chat``/``serve`` and
the server's requests share (:data:`LIMITS`), and applies them to a step's
logits on the host before the same draw the device makes (same sampler,
same seed rule), as constrained decoding does.

The semantics are llama.cpp's (``src/llama-sampling.cpp`` of
https://github.com/ggml-org/llama.cpp, functions
``llama_sampler_penalties_apply``/``_accept`` and
``llama_sampler_min_p_apply``; the default chain order is
``penalties -> top-k -> top-p -> min-p -> temperature -> dist``, as
``common/sampling.cpp``'s ``common_sampler_init`` builds it from
``common_params_sampling::samplers``):

* The window is the last ``repeat_last_n`` tokens of the prompt and the
  text generated so far: llama-server accepts every prompt token into the
  sampler before the first draw (``tools/server``, "Process all prompt
  tokens through sampler system"). ``repeat_last_n = 0`` turns the three
  penalties off; ``-1`` is the whole context (as llama-server reads it).
* A token seen ``c > 0`` times in the window has its logit ``l`` made
  ``l * repeat_penalty`` if ``l <= 0``, else ``l / repeat_penalty`` (the
  CTRL penalty with the usual fix for negative logits), then
  ``l - (c * frequency_penalty + presence_penalty)``: OpenAI's formula for
  the two additive penalties
  (https://platform.openai.com/docs/advanced-usage/parameter-details,
  "Frequency and presence penalties"), counted over llama.cpp's window.
  All in float32, as llama.cpp computes it.
* ``min_p`` keeps the tokens whose logit is at least the largest plus
  ``log(min_p)`` (probability at least ``min_p`` times the likeliest's,
  before temperature); the others get ``-inf``.

IRON's draw then applies top-k, temperature and top-p. Top-k and min-p
commute (both keep a prefix of the sorted logits); IRON's top-p is taken
on the temperature-scaled probabilities (:mod:`iron.operators.sample`),
llama.cpp's before temperature: at temperature 1 the two agree.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["LIMITS", "Penalties", "check_field", "describe"]

#: Each field's allowed values, as (low, high, low_open) with None for no
#: bound: what the Python API, the CLI flags and the server all refuse past.
#: presence/frequency: OpenAI's documented range; min_p: a probability ratio;
#: repeat_penalty: any positive factor (llama.cpp bounds it no further; 0
#: would divide by zero); repeat_last_n: -1 (the whole context), 0 (off) or a
#: count of tokens.
LIMITS: dict[str, tuple[float | None, float | None, bool]] = {
    "min_p": (0.0, 1.0, False),
    "repeat_penalty": (0.0, None, True),
    "repeat_last_n": (-1, None, False),
    "presence_penalty": (-2.0, 2.0, False),
    "frequency_penalty": (-2.0, 2.0, False),
}


def describe(name: str) -> str:
    """The allowed values of field ``name`` in words (for error messages)."""
    low, high, low_open = LIMITS[name]
    if name == "repeat_last_n":
        return "an integer >= -1 (-1: the whole context, 0: off)"
    if high is None:
        return "a number > 0" if low_open else f"a number >= {low:g}"
    return f"a number in [{low:g}, {high:g}]"


def check_field(name: str, value: Any) -> float | int:
    """``value`` for field ``name`` if :data:`LIMITS` allows it.

    Raises:
        TypeError: Not a number (an int for ``repeat_last_n``; a bool is
            refused).
        ValueError: Out of range, or not finite (naming the field, the
            value and the range).
    """
    integral = name == "repeat_last_n"
    kind = numbers.Integral if integral else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{name} is {describe(name)}, got {value!r}")
    try:
        number = int(value) if integral else float(value)  # type: ignore[call-overload]
    except OverflowError:  # an int past float's range
        number = math.inf
    low, high, low_open = LIMITS[name]
    ok = math.isfinite(number)
    if ok and low is not None:
        ok = number > low if low_open else number >= low
    if ok and high is not None:
        ok = number <= high
    if not ok:
        raise ValueError(f"{name} is {describe(name)}, got {value!r}")
    return number


@dataclasses.dataclass(frozen=True)
class Penalties:
    """llama.cpp's repetition penalties and min-p for one generation.

    Each field's default is its neutral value except ``repeat_last_n``
    (llama.cpp's and Ollama's default window of 64): with every field
    neutral nothing runs on the host, and the device draws as it always
    does. See the module docstring for the exact formulas.

    Attributes:
        min_p: Keep only tokens at least this fraction as likely as the
            likeliest (0 is off), in ``[0, 1]``.
        repeat_penalty: Divide a positive logit (multiply a negative one)
            of a token in the window by this (1 is off), ``> 0``.
        repeat_last_n: The window: this many of the last tokens (prompt
            and generated); 0 turns the penalties off, -1 is the context.
        presence_penalty: Subtract this from the logit of each token in the
            window, in ``[-2, 2]`` (0 is off).
        frequency_penalty: Subtract this times the token's count in the
            window, in ``[-2, 2]`` (0 is off).

    Raises:
        TypeError: A field is not a number (``repeat_last_n``: an int).
        ValueError: A field is outside :data:`LIMITS` (named, with its range).
    """

    min_p: float = 0.0
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            object.__setattr__(
                self, field.name, check_field(field.name, getattr(self, field.name))
            )

    @property
    def penalizes(self) -> bool:
        """Whether the repetition penalties change any logit (as float32,
        the precision llama.cpp compares them in)."""
        return self.repeat_last_n != 0 and bool(
            np.float32(self.repeat_penalty) != 1
            or np.float32(self.presence_penalty) != 0
            or np.float32(self.frequency_penalty) != 0
        )

    @property
    def neutral(self) -> bool:
        """Whether these settings change nothing (the device draws alone)."""
        return not self.penalizes and bool(np.float32(self.min_p) <= 0)

    def window(self, context: int) -> int:
        """The tokens the penalties look back over, for a ``context``."""
        return context if self.repeat_last_n == -1 else self.repeat_last_n

    def penalize(
        self, logits: np.ndarray, history: Sequence[int], context: int
    ) -> np.ndarray:
        """``logits`` (float32, ``(vocab,)``) with the repetition penalties
        applied for the tokens so far, ``history`` (prompt then generated);
        a new array."""
        scores = np.array(logits, np.float32).reshape(-1)
        window = self.window(context)
        if not self.penalizes or window <= 0 or not len(history):
            return scores
        recent = np.asarray(history[-window:], np.int64)
        recent = recent[(recent >= 0) & (recent < scores.size)]
        ids, counts = np.unique(recent, return_counts=True)
        repeat = np.float32(self.repeat_penalty)
        seen = scores[ids]
        with np.errstate(over="ignore"):
            seen = np.where(seen <= 0, seen * repeat, seen / repeat)
            seen -= counts.astype(np.float32) * np.float32(
                self.frequency_penalty
            ) + np.float32(self.presence_penalty)
        scores[ids] = seen
        return scores

    def cut(self, logits: np.ndarray) -> np.ndarray:
        """``logits`` (float32) with every token below min-p's threshold set
        to ``-inf``: a new array (the same values when min-p is off)."""
        scores = np.array(logits, np.float32).reshape(-1)
        p = np.float32(self.min_p)
        if p <= 0 or scores.size == 0:
            return scores
        top = scores.max()
        if not np.isfinite(top):
            return scores  # nothing allowed, or an infinite logit: no ratio
        threshold = top + np.log(p)  # float32, as llama.cpp's logf
        scores[scores < threshold] = -np.inf
        return scores

    def apply(
        self, logits: np.ndarray, history: Sequence[int], context: int
    ) -> np.ndarray:
        """:meth:`penalize`, then :meth:`cut`: a step's logits as llama.cpp's
        chain leaves them for the draw (a new array)."""
        return self.cut(self.penalize(logits, history, context))
