"""A request's reply as it is made: token ids in, what the client is sent out.

A :class:`Reply` is pushed the request's tokens one by one (from the event
loop, for a request in a slot; from its own thread, for one that runs
alone) and says what to send through ``put(kind, value)``:
``("logprobs", [Scored, ...])`` for the tokens whose text begins in the
next piece (when the request asks for log-probabilities), ``("text",
piece)``, and at the end ``("done", (finish_reason, completion_tokens,
cached_tokens, drafted))`` or ``("cancelled", None)``. The text stops at an
end-of-sequence id or a stop string (:class:`iron.lm.text.TextStream`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from iron.lm.serve.logprobs import Scored, Scorer
from iron.lm.text import TextStream

if TYPE_CHECKING:
    import numpy as np

    from iron.lm.tokenizer import Tokenizer

__all__ = ["Reply"]


class Reply:
    """The events of one request's reply, from its tokens.

    Args:
        tokenizer: Turns the tokens into text.
        stop: The request's stop strings.
        eos_ids: Ids that end the reply.
        scorer: Scores each token, when the request asks for
            log-probabilities.
        put: Where the events go (called on the caller's thread).
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        stop: Any,
        eos_ids: Iterable[int],
        scorer: Scorer | None,
        put: Callable[[str, Any], None],
    ) -> None:
        self.text = TextStream((), tokenizer, stop=stop, eos_ids=eos_ids)
        self._scorer = scorer
        self._put = put
        self._scored: list[Scored] = []  # scored tokens whose text is not yet sent
        # the scores' offsets count every token's text, past a stop string too
        self._offsets = (
            None if scorer is None else tokenizer.detokenizer(skip_special_tokens=True)
        )
        self._length = 0

    @property
    def ended(self) -> bool:
        """An eos id or a stop string ended the text: later tokens are not
        part of it (the caller stops the generation)."""
        return self.text.finish_reason is not None

    def token(self, token: int, logits: np.ndarray | None = None) -> bool:
        """The next token (with the logits it was drawn from, unless the
        scorer was given them already); whether the reply goes on."""
        if self.ended:
            return False
        if self._scorer is not None and self._offsets is not None:
            if logits is not None:
                self._scorer.logits(logits)
            self._scored.append(self._scorer.score(token, self._length))
            self._length += len(self._offsets.push(token))
        self._send(self.text.push(token))
        return not self.ended

    def finish(
        self, *, cancelled: bool, cached: int, drafted: tuple[int, int] | None
    ) -> None:
        """No more tokens: ``("done", ...)``, or ``("cancelled", None)`` when
        the client went away (nothing more is sent then)."""
        if cancelled:
            self._put("cancelled", None)
            return
        self._send(self.text.finish())
        self._send_scored()
        stream = self.text
        done = (stream.finish_reason, len(stream.token_ids), cached, drafted)
        self._put("done", done)

    def _send(self, piece: str) -> None:
        if piece:
            self._send_scored()
            self._put("text", piece)

    def _send_scored(self) -> None:
        """The scored tokens whose text begins in the text sent (with the
        piece about to be); the rest (past a stop string, an eos) wait."""
        shown = len(self.text.text)
        count = sum(1 for s in self._scored if s.offset < shown)
        if count:
            self._put("logprobs", self._scored[:count])
            del self._scored[:count]
