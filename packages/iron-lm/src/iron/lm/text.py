"""Generated token ids as text: pieces, stop strings and why generation ended.

:class:`TextStream` turns the token ids a decoder yields into text pieces as
they become stable (a multi-byte character is never split), ends at an
end-of-sequence id or at the first stop string (the one that ends first),
and never yields text past a stop string: text that could be the start of
one is held back until the next tokens show whether it is. Afterwards it says why it ended
(``finish_reason``: ``"stop"`` or ``"length"``, OpenAI's words) and which
ids were generated.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from iron.lm.tokenizer import Tokenizer

__all__ = ["TextStream", "stop_strings"]


def stop_strings(stop: str | Sequence[str] | None) -> tuple[str, ...]:
    """``stop`` (one string, several, or None) as a tuple of strings.

    Raises:
        TypeError: ``stop`` holds something other than text.
        ValueError: ``stop`` holds an empty string (it would match at once).
    """
    if stop is None:
        return ()
    items = (stop,) if isinstance(stop, str) else tuple(stop)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(
                f"a stop string must be text, got {item!r} "
                f"({type(item).__name__}); pass a str or a list of str"
            )
        if not item:
            raise ValueError("a stop string must not be empty ('' would match at once)")
    return items


class TextStream:
    """The text of a generation, piece by piece, up to a stop.

    Iterating yields non-empty text pieces. Generation ends at an id of
    ``eos_ids`` (not shown), at the first of ``stop`` in the text (the text
    before it is the last yielded; the stop string is not), or when the
    token ids run out. :meth:`close` (or leaving a ``with`` block) stops the
    ids' generator, which frees the device at the next token.

    Args:
        tokens: The generated token ids, as they come.
        tokenizer: Turns them into text (special tokens skipped).
        stop: Strings that end the text.
        eos_ids: Ids that end generation.
        prompt_tokens: How many ids the prompt had (reported, not used).

    Attributes:
        token_ids: The ids generated so far (an eos id included).
        text: The text yielded so far.
        finish_reason: None while running; then ``"stop"`` (an eos id or a
            stop string) or ``"length"`` (the ids ran out: ``max_new_tokens``
            or the end of the context).
        prompt_tokens: As given.
    """

    def __init__(
        self,
        tokens: Iterable[int],
        tokenizer: Tokenizer,
        *,
        stop: str | Sequence[str] | None = None,
        eos_ids: Iterable[int] = (),
        prompt_tokens: int = 0,
    ) -> None:
        self._tokens = iter(tokens)
        self._stop = stop_strings(stop)
        self._eos = frozenset(int(i) for i in eos_ids)
        self.token_ids: list[int] = []
        self.text = ""
        self.finish_reason: str | None = None
        self.prompt_tokens = prompt_tokens
        self._detok = tokenizer.detokenizer(skip_special_tokens=True)
        self._pending = ""  # decoded text not yet shown (it may begin a stop)
        self._finished = False  # nothing is held back any more
        self._pieces = self._run()

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        return next(self._pieces)

    def __enter__(self) -> TextStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop generating (the ids' generator is closed); idempotent."""
        self._pieces.close()
        close = getattr(self._tokens, "close", None)
        if close is not None:
            close()

    def read(self) -> str:
        """Every remaining piece, joined: the whole text when called first."""
        return "".join(self)

    def _held(self, pending: str) -> int:
        """Characters at the end of ``pending`` that may begin a stop string."""
        longest = max((len(s) for s in self._stop), default=1) - 1
        for n in range(min(longest, len(pending)), 0, -1):
            tail = pending[-n:]
            if any(s.startswith(tail) for s in self._stop):
                return n
        return 0

    def _cut(self, pending: str) -> int | None:
        """Where the stop string that ends first in ``pending`` starts, if any.

        The one that ends first is the one a stream would see first, however
        the text arrives (for stops "b" and "aba", "aba" ends at "a").
        """
        found = [(i + len(s), i) for s in self._stop if (i := pending.find(s)) >= 0]
        return min(found)[1] if found else None

    def push(self, token: int) -> str:
        """Take the next generated id; the text it makes stable.

        The push form of iterating, for a caller that is handed the ids
        one by one (the server's event loop): each call returns the text
        that id released (``""`` while text is held back, as the start of
        a multi-byte character or of a stop string), and :meth:`finish`
        the rest. Once an eos id or a stop string has ended the text,
        ``finish_reason`` is ``"stop"`` and later ids are ignored. Use
        either this or iteration, not both.
        """
        if self.finish_reason is not None:
            return ""
        token = int(token)
        self.token_ids.append(token)
        if token in self._eos:
            self.finish_reason = "stop"
            return ""
        pending = self._pending + self._detok.push(token)
        cut = self._cut(pending)
        if cut is not None:  # the text before the stop string is the last
            self.finish_reason, self._pending = "stop", ""
            self._finished = True  # nothing past it is shown
            return self._shown(pending[:cut])
        ready = len(pending) - self._held(pending)
        self._pending = pending[ready:]
        return self._shown(pending[:ready])

    def finish(self) -> str:
        """No more ids: the text still held back (none after a stop string).

        ``finish_reason`` becomes ``"length"`` unless an eos id or a stop
        string ended the text first. Idempotent.
        """
        if self.finish_reason is None:
            self.finish_reason = "length"
        if self._finished:
            return ""
        self._finished = True
        pending = self._pending + self._detok.flush()  # what the last ids left
        self._pending = ""
        cut = self._cut(pending)
        if cut is not None:
            self.finish_reason = "stop"
            pending = pending[:cut]
        return self._shown(pending)

    def _shown(self, piece: str) -> str:
        self.text += piece
        return piece

    def _run(self) -> Generator[str, None, None]:
        try:
            for token in self._tokens:
                piece = self.push(token)
                if piece:
                    yield piece
                if self.finish_reason is not None:
                    break
        finally:
            close = getattr(self._tokens, "close", None)
            if close is not None:
                close()
        tail = self.finish()
        if tail:
            yield tail
