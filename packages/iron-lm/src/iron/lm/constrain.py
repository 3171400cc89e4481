"""Constrained decoding: generated text that matches a JSON schema or grammar.

A :class:`Constraint` is a grammar (a JSON schema, any JSON object, a
regular expression, or a Lark grammar) compiled for one tokenizer by
`llguidance <https://github.com/guidance-ai/llguidance>`_, a Rust engine
with no torch dependency (the ``iron-lm[structured]`` extra). At each
generated token it gives the set of token ids that keep the text a prefix
of a sentence of the grammar; :meth:`Decoder.generate
<iron.lm.generate.Decoder.generate>` (``constraint=`` or ``json_schema=``)
sets every other logit to ``-inf`` before the draw, so temperature, top-k
and top-p apply to the allowed tokens only. The end-of-sequence token is
allowed exactly when the text is complete: a generation that runs out of
tokens first ends with ``finish_reason == "length"``, never with incomplete
JSON claimed complete.

The mask is computed on the host, so a constrained generation runs the
decode loop from the host (an unconstrained one keeps the device loop).
``docs/guide/structured-output.md`` gives the measured cost per token.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from iron.lm.tokenizer import Tokenizer

__all__ = [
    "Constraint",
    "ConstraintError",
    "Matcher",
    "StructuredOutputUnavailableError",
]

_EXTRA = "iron-lm[structured]"


class StructuredOutputUnavailableError(ImportError):
    """llguidance, the engine constrained decoding uses, is not installed."""


class ConstraintError(ValueError):
    """A schema, regular expression or grammar the engine refuses (named)."""


def _llguidance() -> Any:
    try:
        import llguidance
        import llguidance.numpy
    except ImportError as e:
        raise StructuredOutputUnavailableError(
            f"constrained decoding (JSON schema, regex, grammar) needs the "
            f"llguidance package ({e}); install it with: pip install '{_EXTRA}'"
        ) from None
    return llguidance


def _engine_tokenizer(tokenizer: Tokenizer, vocab_size: int | None) -> Any:
    """The llguidance tokenizer of ``tokenizer`` (built once, kept on it)."""
    cache = _ENGINES.setdefault(tokenizer, {})
    if vocab_size not in cache:
        llg = _llguidance()
        eos = list(tokenizer.eos_ids) or None
        # The tokenizers.Tokenizer that iron.lm.tokenizer wraps (this
        # package's), as its JSON: what llguidance.hf.from_tokenizer hands
        # LLTokenizer, without the transformers import that module makes.
        text = tokenizer._tok.to_str()
        cache[vocab_size] = llg.LLTokenizer(text, n_vocab=vocab_size, eos_token=eos)
    return cache[vocab_size]


#: llguidance tokenizers by Tokenizer and vocabulary size (building one
#: walks the whole vocabulary: ~0.1 s for 128k tokens)
_ENGINES: weakref.WeakKeyDictionary[Tokenizer, dict[int | None, Any]] = (
    weakref.WeakKeyDictionary()
)


class Constraint:
    """A grammar the generated text must match, compiled for a tokenizer.

    Build one with :meth:`json_schema`, :meth:`json_object`, :meth:`regex`
    or :meth:`lark`; each checks the grammar at once and raises
    :class:`ConstraintError` (a ValueError) naming what is wrong. A
    constraint may serve any number of generations: each gets its own
    :meth:`matcher`.

    Example:
        >>> from iron.lm.constrain import Constraint
        >>> schema = {"type": "object", "properties": {"n": {"type": "integer"}},
        ...           "required": ["n"]}
        >>> c = Constraint.json_schema(schema, decoder.tokenizer)
        >>> c.kind
        'json_schema'
    """

    def __init__(
        self,
        grammar: str,
        tokenizer: Tokenizer,
        *,
        kind: str,
        vocab_size: int | None = None,
    ) -> None:
        llg = _llguidance()
        self.kind = kind
        self.grammar = grammar
        self.tokenizer = tokenizer
        self._engine = _engine_tokenizer(tokenizer, vocab_size)
        self.vocab_size = int(self._engine.vocab_size)
        is_error, messages = llg.LLMatcher.validate_grammar_with_warnings(
            grammar, self._engine
        )
        if is_error:
            raise ConstraintError(
                f"the {kind.replace('_', ' ')} is not one the engine accepts: "
                f"{'; '.join(messages)}"
            )

    @classmethod
    def json_schema(
        cls,
        schema: Mapping[str, Any] | str,
        tokenizer: Tokenizer,
        *,
        vocab_size: int | None = None,
    ) -> Constraint:
        """JSON text valid against ``schema`` (a JSON Schema, as a dict or text).

        Whitespace between tokens is left out (compact JSON: a model cannot
        spend its tokens on blanks). An object schema without
        ``additionalProperties: false`` allows properties beyond those it
        lists, as JSON Schema says (OpenAI's ``strict`` mode asks schemas to
        say ``false``).

        Raises:
            ConstraintError: ``schema`` is not JSON, not an object, or uses
                what the engine cannot enforce (named).
        """
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except ValueError as e:
                raise ConstraintError(f"the JSON schema is not JSON: {e}") from None
        if not isinstance(schema, Mapping):
            raise ConstraintError(
                f"a JSON schema is an object (a dict), got {type(schema).__name__}: "
                f"{schema!r}"
            )
        llg = _llguidance()
        try:
            grammar = llg.LLMatcher.grammar_from_json_schema(
                dict(schema),
                defaults={"whitespace_flexible": False},
            )
        except (ValueError, TypeError) as e:
            raise ConstraintError(f"the JSON schema is refused: {e}") from None
        return cls(grammar, tokenizer, kind="json_schema", vocab_size=vocab_size)

    @classmethod
    def json_object(
        cls, tokenizer: Tokenizer, *, vocab_size: int | None = None
    ) -> Constraint:
        """Any JSON object (OpenAI's ``response_format: json_object``)."""
        return cls.json_schema(
            {"type": "object"}, tokenizer, vocab_size=vocab_size
        ).relabel("json_object")

    @classmethod
    def regex(
        cls, pattern: str, tokenizer: Tokenizer, *, vocab_size: int | None = None
    ) -> Constraint:
        """Text matching the regular expression ``pattern`` in full (Rust's
        ``regex`` syntax, anchored at both ends).

        Raises:
            ConstraintError: ``pattern`` is not a regular expression.
        """
        if not isinstance(pattern, str):
            raise ConstraintError(f"a regex is text, got {pattern!r}")
        grammar = _llguidance().LLMatcher.grammar_from_regex(pattern)
        return cls(grammar, tokenizer, kind="regex", vocab_size=vocab_size)

    @classmethod
    def lark(
        cls, grammar: str, tokenizer: Tokenizer, *, vocab_size: int | None = None
    ) -> Constraint:
        """Text of the Lark grammar ``grammar`` (its ``start`` rule).

        llguidance's Lark dialect (https://github.com/guidance-ai/llguidance,
        docs/syntax.md): rules, ``/regex/`` terminals, ``%json {...}`` for
        an embedded JSON schema.

        Raises:
            ConstraintError: ``grammar`` does not parse or has no ``start``.
        """
        if not isinstance(grammar, str):
            raise ConstraintError(f"a Lark grammar is text, got {grammar!r}")
        text = _llguidance().LLMatcher.grammar_from_lark(grammar)
        return cls(text, tokenizer, kind="lark", vocab_size=vocab_size)

    def relabel(self, kind: str) -> Constraint:
        """This constraint, its ``kind`` named ``kind`` (for messages)."""
        self.kind = kind
        return self

    def matcher(self) -> Matcher:
        """A fresh matcher, at the start of the text."""
        return Matcher(self)

    def __repr__(self) -> str:
        return f"Constraint({self.kind}, vocab={self.vocab_size})"


class Matcher:
    """One generation's place in a :class:`Constraint`'s grammar.

    :meth:`mask` the logits of the next token, draw, then :meth:`consume`
    the token drawn.
    """

    def __init__(self, constraint: Constraint) -> None:
        llg = _llguidance()
        self._llg = llg
        self.constraint = constraint
        self._matcher = llg.LLMatcher(constraint._engine, constraint.grammar)
        self._bits = llg.numpy.allocate_token_bitmask(1, constraint.vocab_size)

    def allowed(self) -> np.ndarray:
        """A bool per token id of the tokenizer's vocabulary: may it come next."""
        self._llg.numpy.fill_next_token_bitmask(self._matcher, self._bits, 0)
        self._check()
        bits = np.unpackbits(self._bits.view(np.uint8), bitorder="little")
        return bits[: self.constraint.vocab_size].astype(bool)

    def mask(self, logits: np.ndarray) -> np.ndarray:
        """``logits`` (float32, ``(vocab,)``) with every token the grammar does
        not allow next set to ``-inf`` (a new array; ids past the
        tokenizer's vocabulary are never allowed)."""
        out = np.full(np.shape(logits), -np.inf, np.float32)
        allowed = self.allowed()
        n = min(len(allowed), out.size)
        keep = np.flatnonzero(allowed[:n])
        out[keep] = np.asarray(logits, np.float32)[keep]
        return out

    def consume(self, token: int) -> None:
        """Advance past ``token`` (one the last :meth:`mask` allowed)."""
        self._matcher.consume_token(int(token))
        self._check()

    @property
    def accepting(self) -> bool:
        """Whether the text so far is a whole sentence of the grammar."""
        return bool(self._matcher.is_accepting())

    @property
    def stopped(self) -> bool:
        """Whether the grammar allows nothing more (the text is complete)."""
        return bool(self._matcher.is_stopped())

    def _check(self) -> None:
        if self._matcher.is_error():
            raise RuntimeError(
                f"the constraint's matcher failed: {self._matcher.get_error()}"
            )


def constraint_of(
    tokenizer: Tokenizer | None,
    vocab_size: int,
    *,
    constraint: Constraint | None = None,
    json_schema: Mapping[str, Any] | str | None = None,
    regex: str | None = None,
    grammar: str | None = None,
) -> Constraint | None:
    """The one constraint :meth:`Decoder.generate` was given, if any.

    Raises:
        ValueError: More than one was given, or one needs a tokenizer the
            decoder lacks.
        ConstraintError: The schema, regex or grammar is refused.
    """
    given = {
        name: value
        for name, value in (
            ("constraint", constraint),
            ("json_schema", json_schema),
            ("regex", regex),
            ("grammar", grammar),
        )
        if value is not None
    }
    if not given:
        return None
    if len(given) > 1:
        raise ValueError(
            f"give at most one of constraint, json_schema, regex, grammar; got "
            f"{', '.join(given)}"
        )
    if constraint is not None:
        if not isinstance(constraint, Constraint):
            raise TypeError(
                f"constraint takes a Constraint (iron.lm.constrain), got {constraint!r}"
            )
        return constraint
    if tokenizer is None:
        raise ValueError(
            f"{next(iter(given))} needs this decoder's tokenizer, and it has none; "
            "pass a Constraint built for the tokenizer instead"
        )
    if json_schema is not None:
        return Constraint.json_schema(json_schema, tokenizer, vocab_size=vocab_size)
    if regex is not None:
        return Constraint.regex(regex, tokenizer, vocab_size=vocab_size)
    assert grammar is not None
    return Constraint.lark(grammar, tokenizer, vocab_size=vocab_size)
