"""Running a Llama: loading, scoring, and streamed generation.

:class:`Decoder` owns a :class:`~iron.lm.model.Llama` graph and its two
compiled versions (a prompt chunk and a decode step). It loads weights
piecewise with a progress bar (releasing checkpoint pages as it goes),
scores token ids (:meth:`Decoder.logits`), and generates: the prompt runs in
chunks, then the decode step loops on the device with
:class:`~iron.runtime.CarriedLoop` where the device runs a full ELF (npu2),
or from the host with each call's ``Carry`` passed back in elsewhere (npu1)
— the same tokens either way for the same seed.

A decoder serves one use at a time: its KV cache, generated-token record
and device loop are its own. Calls from several threads are serialized; a
generation in progress (started, not finished or closed) makes any other
use raise :class:`~iron.runtime.InUseError` naming it, before anything runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import numbers
import threading
import time
from collections.abc import (
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

import iron
from iron.core.held import held_dtype
from iron.lm.checkpoint import Checkpoint
from iron.lm.config import LlamaConfig
from iron.lm.constrain import Constraint, constraint_of
from iron.lm.model import BATCHES, Llama
from iron.lm.penalties import Penalties
from iron.lm.speculate import lookup_draft
from iron.lm.text import TextStream
from iron.lm.tokenizer import TOKENIZER_FILE, Tokenizer
from iron.operators.sample import draw, temperature_of, top_p_of
from iron.runtime import CarriedLoop, CompiledGraph, InUseError, backend_name

__all__ = ["Decoder", "NonFiniteLogitsError", "Stats"]

logger = logging.getLogger("iron.lm")


class NonFiniteLogitsError(RuntimeError):
    """The model computed NaN or infinite logits while generating.

    The sampled token would be meaningless (id 0 for NaN), so generation
    ends with this error instead of yielding it. Loading refuses weights
    that are not finite, so this means the arithmetic itself overflowed.
    """


@dataclasses.dataclass
class Stats:
    """What one generation measured.

    Attributes:
        prompt_tokens: Tokens in the prompt.
        new_tokens: Tokens generated.
        first_token_s: Seconds from the start to the first generated token.
        decode_s: Seconds spent on the tokens after the first.
        backend: ``emu`` or ``xrt``.
        device: The device description (``npu1``/``npu2``).
        loop: ``device`` (CarriedLoop) or ``host``.
        cached_tokens: Of the prompt's tokens, how many were already in the
            KV cache and not prefilled again (``reuse_cache``).
        drafted_tokens: Tokens drafted for speculative decoding
            (``speculate``) and verified.
        accepted_tokens: Of them, how many the model kept.
        verify_passes: Prompt chunks that verified drafts. Each yields its
            kept drafts and one token of its own, so the tokens after the
            first came from ``accepted_tokens + verify_passes`` in passes
            and the rest from single decode steps.
    """

    prompt_tokens: int = 0
    new_tokens: int = 0
    first_token_s: float = 0.0
    decode_s: float = 0.0
    backend: str = ""
    device: str = ""
    loop: str = ""
    cached_tokens: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    verify_passes: int = 0

    @property
    def acceptance(self) -> float:
        """The share of drafted tokens kept (0 when none were drafted)."""
        return (
            self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else 0.0
        )

    @property
    def decode_tokens_per_s(self) -> float:
        """Tokens per second after the first (0 when fewer than two)."""
        return (
            (self.new_tokens - 1) / self.decode_s
            if self.new_tokens > 1 and self.decode_s
            else 0.0
        )

    def summary(self) -> str:
        """One line for a terminal."""
        cached = f" ({self.cached_tokens} cached)" if self.cached_tokens else ""
        drafted = (
            f", {self.accepted_tokens} of {self.drafted_tokens} drafted tokens kept"
            if self.drafted_tokens
            else ""
        )
        return (
            f"{self.prompt_tokens} prompt tokens{cached}, first token in "
            f"{self.first_token_s * 1e3:.0f} ms, {self.new_tokens} new tokens at "
            f"{self.decode_tokens_per_s:.1f} tokens/s ({self.loop} loop{drafted}) on "
            f"{self.backend} {self.device}"
        )


class Decoder:
    """A Llama graph, its prompt and decode versions, and generation.

    Args:
        graph: The Llama graph, its weights bound.
        device: The device (or name); else the current one.
        checkpoint: The memory-mapped checkpoint the weights are views of,
            whose pages are released as they are uploaded.
        progress: Show a progress bar while uploading.
        tokenizer: Text to ids and back, for the text-level calls
            (:meth:`complete`, :meth:`stream`, :meth:`chat`).


    One use at a time: calls from several threads wait for each other, and
    while a generation is in progress (its first token asked for, not yet
    exhausted or closed) every other use (``logits``, another
    ``generate``) raises :class:`~iron.runtime.InUseError` naming it.

    Example:
        >>> from iron.lm import Decoder
        >>> decoder = Decoder.from_pretrained(
        ...     directory, device="npu2", context=64, progress=False
        ... )
        >>> ids = decoder.tokenizer.encode("The NPU")
        >>> len(list(decoder.generate(ids, max_new_tokens=4)))
        4
    """

    def __init__(
        self,
        graph: Llama,
        *,
        device: iron.Device | str | None = None,
        checkpoint: Checkpoint | None = None,
        progress: bool = True,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        self.graph = graph
        self.tokenizer = tokenizer
        self.device = iron.core.device.require_device(device)
        self.checkpoint = checkpoint
        self.progress = progress
        self._prompt: CompiledGraph | None = None
        self._decode: CompiledGraph | None = None
        self._batched: dict[int, CompiledGraph] = {}
        self._loop: CarriedLoop | None = None
        self.stats = Stats()
        # The ids whose keys and values the caches hold at positions 0, 1, ...
        # (what generate and logits wrote; for reuse_cache).
        self._cached: list[int] = []
        self._lock = threading.RLock()  # held while the decoder runs anything
        self._live: _Generation | None = None  # the generation in progress

    @classmethod
    def from_pretrained(
        cls,
        directory: str | Path,
        *,
        device: iron.Device | str | None = None,
        context: int | None = None,
        rows: int = 16,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float = 1.0,
        progress: bool = True,
        weights: str | None = None,
        slots: int = 1,
    ) -> Decoder:
        """Load a Hugging Face Llama checkpoint directory (or a GGUF file).

        ``weights`` (``"bf16"``, ``"q8"``, ``"q4"`` or None, the checkpoint's
        own) is how the device holds the weights: see
        :meth:`iron.lm.model.Llama.from_pretrained`; :attr:`weight_bytes`
        tells the bytes they take.

        Weights stay memory-mapped until uploaded, piece by piece, each
        piece's pages released once on the device. The directory's
        tokenizer (``tokenizer.json`` and what goes with it), or a GGUF
        file's own, becomes :attr:`tokenizer` when it has one.

        ``temperature``, ``top_k`` and ``top_p`` are the sampling a call
        uses unless it gives its own (:meth:`generate`): they are per-call
        values, so changing them compiles nothing.

        ``slots`` (1 to 8) is how many sequences' KV caches the graph holds:
        with more than one, :meth:`compile` also builds the batched decode
        versions that :class:`iron.lm.engine.Engine` runs.

        Raises:
            FileNotFoundError: No such directory, or no config.json or shards.
            ValueError: An unsupported architecture or setting (named), or
                tensors missing, extra or of the wrong shape (all named).
        """
        graph = Llama.from_pretrained(
            directory,
            context=context,
            rows=rows,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            weights=weights,
            slots=slots,
        )
        from iron.lm.gguf import GGUFCheckpoint

        checkpoint = graph.checkpoint
        # a GGUF file may carry its tokenizer; a directory may hold tokenizer.json
        if isinstance(checkpoint, GGUFCheckpoint):
            has_tokenizer = "tokenizer.ggml.tokens" in checkpoint.metadata
        else:
            has_tokenizer = (Path(directory) / TOKENIZER_FILE).is_file()
        tokenizer = Tokenizer.from_directory(directory) if has_tokenizer else None
        return cls(
            graph,
            device=device,
            # A GGUFCheckpoint serves as the Checkpoint it mirrors (verify,
            # release); the public signature (its API snapshot) names only that.
            checkpoint=checkpoint,  # type: ignore[arg-type]
            progress=progress,
            tokenizer=tokenizer,
        )

    @property
    def config(self) -> LlamaConfig:
        """The model's configuration."""
        return self.graph.config

    @property
    def weight_bytes(self) -> int:
        """Bytes the weights take on the device.

        Every weight the graph holds (the rotary table too) at the dtype it
        is resident as: a quantized weight's packed bytes, a bf16 one's two
        bytes an element (a float32 checkpoint's weights are narrowed).
        """
        total = 0
        for _, held in self.graph.held().values():
            if isinstance(held, np.ndarray):
                total += held.size * held_dtype(held).itemsize
        return total

    # -- building ---------------------------------------------------------------

    def compile(self) -> Decoder:
        """Compile both versions, then upload the weights once.

        The decode step first, as the prompt's Emit starts it; both before
        the arena is allocated, so it is allocated once at its full size.
        """
        with self._lock:
            if self._prompt is None:
                self._compile()
        return self

    def _compile(self) -> None:
        slots = self.graph.slots
        with iron.use_device(self.device):
            # With slots, the slot is a per-call value no Emit carries, so
            # the decode step runs from the host (no device loop).
            decode = self.graph.compile(full_elf=False if slots > 1 else None)
            prompt = self.graph.compile(
                tokens=((self.graph.rows,), np.int32),
                feeds=decode if decode.emit else None,
            )
            # with slots, the batched decode steps too, before the upload
            batched = {
                b: self.graph.compile(tokens=((b, 1), np.int32))
                for b in BATCHES
                if slots > 1 and b <= slots
            }
        self._decode, self._prompt, self._batched = decode, prompt, batched
        self._upload(prompt)
        if prompt.emit is not None and decode.emit is not None:
            self._loop = CarriedLoop(prompt, decode, depth=2)

    def _upload(self, version: CompiledGraph) -> None:
        # bytes read from the source: a narrowed weight's are its stored ones
        total = sum(np.asarray(t).nbytes for t, _ in version.recording.weights.values())
        bar = tqdm(
            total=total,
            unit="B",
            unit_scale=True,
            desc="uploading weights",
            disable=not self.progress,
            leave=False,
        )
        checkpoint = self.checkpoint
        if checkpoint is not None:
            checkpoint.verify()  # a shard rewritten since it was mapped

        def release(piece: np.ndarray) -> None:
            bar.update(piece.nbytes)
            if checkpoint is not None:
                checkpoint.release(piece)

        try:
            version.load(release=release)
        finally:
            bar.close()

    @property
    def prompt(self) -> CompiledGraph:
        """The prompt-chunk version."""
        self.compile()
        assert self._prompt is not None
        return self._prompt

    @property
    def decode(self) -> CompiledGraph:
        """The decode-step version."""
        self.compile()
        assert self._decode is not None
        return self._decode

    @property
    def batched(self) -> dict[int, CompiledGraph]:
        """The batched decode versions by rows (B in
        :data:`~iron.lm.model.BATCHES` up to the graph's slots); none when the
        graph holds one slot."""
        self.compile()
        return dict(self._batched)

    def _reset(self) -> None:
        """Zero the generated-token record (the caches are overwritten as used)."""
        view = self.decode.read(self.graph.generated)
        view[:] = 0
        self.decode.push(self.graph.generated)

    # -- scoring ------------------------------------------------------------------

    def logits(self, token_ids: Sequence[int]) -> np.ndarray:
        """The next-token logits after every position of ``token_ids``.

        Runs the prompt version over the ids, chunk by chunk, from position 0.

        Returns:
            float32 of shape ``(len(token_ids), vocab)``.

        Raises:
            InUseError: A generation is in progress (it would find its KV
                cache overwritten); nothing ran.
        """
        ids = self._check_ids(token_ids)
        self._check_checkpoint()
        out = np.zeros((len(ids), self.config.vocab_size), np.float32)
        with self._lock:
            self._check_free("Decoder.logits")
            self._cached = []
            for start, chunk, n in self._chunks(ids):
                logits, _ = self.prompt(chunk, token=0, position=start, n=n)
                out[start : start + n] = np.asarray(logits, np.float32)[:n]
            self._cached = ids.tolist()
        return out

    # -- one use at a time ----------------------------------------------------------

    def _check_free(self, what: str) -> None:
        live = self._live
        if live is not None:
            raise InUseError(
                f"{what}: this decoder is in use by {live}, which has not finished; "
                f"iterate it to the end or close() it first (one use at a time: "
                f"its KV cache and device loop are this decoder's). Nothing ran."
            )

    def _one_use(
        self, generation: _Generation, tokens: Generator[int, None, None]
    ) -> Iterator[int]:
        """``tokens`` as this decoder's one use: every other use raises until it ends."""
        with self._lock:
            self._check_free("Decoder.generate")
            self._live = generation
        try:
            while True:
                with self._lock:
                    try:
                        token = next(tokens)
                    except StopIteration:
                        return
                generation.yielded += 1
                yield token
        finally:
            with self._lock:
                tokens.close()  # a device loop waits out its steps in flight
                self._live = None

    def _chunks(
        self, ids: np.ndarray, first: int = 0
    ) -> Iterator[tuple[int, np.ndarray, int]]:
        rows = self.graph.rows
        for start in range(first, len(ids), rows):
            part = ids[start : start + rows]
            chunk = np.zeros(rows, np.int32)
            chunk[: len(part)] = part
            yield start, chunk, len(part)

    def _check_checkpoint(self) -> None:
        """Refuse to read the mapped checkpoint again if a shard changed.

        A call after ``graph.release()`` uploads the weights again from the
        mapping; a shard truncated meanwhile would kill the process (SIGBUS).
        """
        if self.checkpoint is not None:
            self.checkpoint.verify()

    def _check_ids(
        self, token_ids: Sequence[int], what: str = "token_ids"
    ) -> np.ndarray:
        """``token_ids`` as int32, checked: a flat sequence of integers, a
        length the context holds, ids the vocabulary has."""
        if isinstance(token_ids, (str, bytes)):
            raise TypeError(
                f"{what} takes token ids (a sequence of ints), got a "
                f"{type(token_ids).__name__}; encode text with the tokenizer first"
            )
        given = np.asarray(token_ids)
        if given.ndim != 1:
            raise ValueError(
                f"{what} takes a flat sequence of token ids, got an array of shape "
                f"{given.shape}; pass one sequence (a list or 1-D array of ints)"
            )
        if given.size and (given.dtype.kind not in "iu"):
            raise TypeError(
                f"{what} takes integer token ids, got {given.dtype} values "
                f"(such as {given[0]!r}); pass ints"
            )
        ids = given.astype(np.int64)
        self._check_length(len(ids))
        vocab = self.config.vocab_size
        bad = ids[(ids < 0) | (ids >= vocab)]
        if bad.size:
            raise ValueError(
                f"token id {int(bad[0])} is outside this model's vocabulary "
                f"[0, {vocab})"
            )
        return ids.astype(np.int32)

    def _check_length(self, length: int) -> None:
        if length < 1:
            raise ValueError("the prompt has no tokens")
        limit = self.graph.context - self.graph.rows
        if length > limit:
            raise ValueError(
                f"the prompt is {length} tokens, longer than this model's context of "
                f"{self.graph.context} positions allows for a prompt ({limit}); "
                f"shorten it or load with a larger context"
            )

    # -- generation -----------------------------------------------------------------

    def generate(
        self,
        prompt_ids: Sequence[int],
        *,
        max_new_tokens: int = 32,
        seed: int = 0,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        stop: Sequence[int] | None = None,
        device_loop: bool | None = None,
        reuse_cache: bool = False,
        on_logits: Callable[[np.ndarray], object] | None = None,
        speculate: int = 0,
        draft: Decoder | None = None,
        constraint: Constraint | None = None,
        json_schema: Mapping[str, Any] | str | None = None,
        regex: str | None = None,
        grammar: str | None = None,
        min_p: float = 0.0,
        repeat_penalty: float = 1.0,
        repeat_last_n: int = 64,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
    ) -> Iterator[int]:
        """Yield generated token ids as they are decoded.

        Args:
            prompt_ids: The prompt's token ids.
            max_new_tokens: At most this many tokens (fewer near the context end).
            seed: The sampling seed (the draw for position ``p`` uses
                ``seed + p``); greedy decoding ignores it.
            temperature: This call's sampling temperature (0 is greedy);
                None is the graph's (``Llama(temperature=...)``). It, ``top_k``
                and ``top_p`` are per-call values of the compiled versions:
                changing them between calls compiles nothing.
            top_k: Candidates a draw is from (at most ``min(256, vocab)``);
                None is the graph's.
            top_p: Nucleus sampling, the probability mass kept, in ``(0,
                1]``; None is the graph's.
            stop: Ids that end generation (the stop id is yielded); by
                default the model's eos ids.
            device_loop: Loop on the device (CarriedLoop) or from the host;
                by default on the device where it runs a full ELF.
            reuse_cache: Prefill only the ids after the longest prefix the
                KV cache already holds from this decoder's last
                :meth:`generate` or :meth:`logits` (a chat continuing, the
                same system prompt again); ``stats.cached_tokens`` says how
                many were reused. The tokens are the same as without. Leave
                it off if anything else ran :attr:`prompt` or :attr:`decode`
                since: the cache would no longer hold what this decoder
                recorded.
            on_logits: Called with the logits each token is sampled from
                (float32, shape ``(vocab,)``: the model's scores before
                the penalties, min-p, temperature and top-k, a copy the
                caller may keep), before
                that token is yielded. Reading them back needs each step
                finished before the next starts, so the decode loop then
                runs from the host (the device loop keeps steps in flight,
                each writing the same logits); the tokens are the same.
            speculate: Speculative decoding by prompt lookup
                (:mod:`iron.lm.speculate`): up to this many tokens drafted
                from the text so far and verified in one prompt-version pass
                (at most ``graph.rows - 1``); 0 (the default) is off. The
                tokens are exactly those without it, greedy or sampled (a
                draft is kept only where the step would have sampled it);
                ``stats.accepted_tokens`` of ``stats.drafted_tokens`` says
                how many were kept. The loop runs from the host.
            draft: With ``speculate``, a smaller model of the same vocabulary
                drafts instead of prompt lookup: its greedy continuation of
                the text so far (its own KV cache reused from pass to pass).
                The tokens are still exactly those without speculation.
            constraint: The text must match this
                :class:`~iron.lm.constrain.Constraint` (a JSON schema, JSON
                object, regex or Lark grammar): each token is drawn from the
                logits with every token the grammar does not allow next set
                to ``-inf`` (temperature, top-k and top-p after the mask),
                and the eos token is allowed only once the text is complete.
                The loop runs from the host (the mask is computed there).
                Needs the ``iron-lm[structured]`` extra.
            json_schema: Shorthand for ``constraint=Constraint.json_schema(
                json_schema, decoder.tokenizer)``.
            regex: Shorthand for a :meth:`~iron.lm.constrain.Constraint.regex`
                constraint.
            grammar: Shorthand for a :meth:`~iron.lm.constrain.Constraint.lark`
                constraint (a Lark grammar).
            min_p: llama.cpp's min-p: keep only tokens at least this fraction
                as likely as the likeliest, in ``[0, 1]`` (0, the default,
                is off).
            repeat_penalty: llama.cpp's repetition penalty: the logit of a
                token among the last ``repeat_last_n`` (prompt and generated)
                is divided by it if positive, multiplied if not; ``> 0``
                (1, the default, is off).
            repeat_last_n: The penalties' window in tokens (llama.cpp's
                default 64); 0 turns them off, -1 is the whole context.
            presence_penalty: Subtracted from the logit of each token in the
                window, in ``[-2, 2]`` (OpenAI's; 0 is off).
            frequency_penalty: Subtracted times the token's count in the
                window, in ``[-2, 2]`` (OpenAI's; 0 is off).

                These five follow llama.cpp's sampler chain
                (:mod:`iron.lm.penalties`): penalties, then a constraint's
                mask, then min-p, then the device's own draw (top-k,
                temperature, top-p) with the same seed rule, run on the
                host. At their defaults nothing changes: the tokens are
                bit-identical to a call without them, and the decode loop
                runs where it would. Otherwise the loop runs from the host
                (the logits are read back each step), as for a constraint.

        Raises:
            ValueError: The prompt is empty, not flat, longer than the
                context allows, or holds an id outside the vocabulary;
                ``max_new_tokens`` is negative; a sampling setting is out of
                range (``temperature < 0``, ``top_p`` outside ``(0, 1]``,
                ``top_k`` below 1 or above the device's limit); or
                ``device_loop`` is asked of a device without a full ELF, or
                together with ``on_logits`` or ``speculate``; ``speculate``
                is negative or over ``graph.rows - 1``; a ``draft`` without
                ``speculate``, of another vocabulary, or this decoder itself;
                more than one constraint, one with ``speculate`` or
                ``device_loop``, or a schema, regex or grammar the engine
                refuses (:class:`~iron.lm.constrain.ConstraintError`); a
                penalty or ``min_p`` out of range (named, with its range),
                or set together with ``speculate`` or ``device_loop``.
                Raised by this call, before any token is generated.
            TypeError: ``prompt_ids`` holds other than ints,
                ``max_new_tokens`` is not an int, or ``stop`` is not a
                collection of ints (a str is refused: it never stops).
            iron.lm.checkpoint.CheckpointChangedError: A checkpoint shard
                changed on disk since it was mapped.
            NonFiniteLogitsError: While iterating: the model computed NaN
                or infinite logits; generation ends there.
            InUseError: Another generation on this decoder is in progress
                (raised by this call, or by the first token asked for if it
                started since).
        """
        self._check_free("Decoder.generate")
        ids = self._check_ids(prompt_ids, "prompt_ids")
        max_new_tokens = _count("max_new_tokens", max_new_tokens)
        draw = self.graph.sampling(temperature=temperature, top_k=top_k, top_p=top_p)
        penalties = Penalties(
            min_p=min_p,
            repeat_penalty=repeat_penalty,
            repeat_last_n=repeat_last_n,
            presence_penalty=presence_penalty,
            frequency_penalty=frequency_penalty,
        )
        stop_ids = set(
            self.config.eos_token_ids if stop is None else _ids("stop", stop)
        )
        self._check_checkpoint()
        room = self.graph.context - len(ids)
        steps = max(0, min(max_new_tokens, room))
        self.compile()
        speculate = self._check_speculate(speculate, draft)
        constrained = constraint_of(
            self.tokenizer,
            self.config.vocab_size,
            constraint=constraint,
            json_schema=json_schema,
            regex=regex,
            grammar=grammar,
        )
        if constrained is not None and (device_loop or speculate):
            raise ValueError(
                "a constraint masks each step's logits on the host before the "
                "draw, which neither the device loop nor speculate can; leave "
                "device_loop and speculate out"
            )
        if not penalties.neutral and (device_loop or speculate):
            raise ValueError(
                "min_p and the repetition penalties change each step's logits on "
                "the host before the draw, which neither the device loop nor "
                "speculate can; leave device_loop and speculate out"
            )
        if on_logits is not None and device_loop:
            raise ValueError(
                "on_logits reads each step's logits before the next step starts, "
                "which the device loop (steps in flight) cannot; leave device_loop "
                "out or pass device_loop=False"
            )
        if speculate and device_loop:
            raise ValueError(
                f"speculate={speculate} verifies drafts from the host, which the "
                f"device loop cannot; leave device_loop out or pass device_loop=False"
            )
        drawn = constrained is not None or not penalties.neutral
        if on_logits is not None or speculate or drawn:
            loop = False
        else:
            loop = self._loop is not None if device_loop is None else device_loop
        if loop and self._loop is None:
            raise ValueError(
                f"{self.device.name} runs no full ELF, so the decode step cannot loop "
                f"on the device; use device_loop=False"
            )
        reuse = self._reusable(ids) if reuse_cache else 0
        generation = _Generation(len(ids), "device" if loop else "host")
        return self._one_use(
            generation,
            self._generate(
                ids,
                seed,
                draw,
                steps,
                stop_ids,
                loop,
                reuse,
                on_logits,
                (speculate, draft),
                constrained,
                penalties,
            ),
        )

    def _check_speculate(self, speculate: Any, draft: Any = None) -> int:
        if draft is not None:
            if not isinstance(draft, Decoder):
                raise TypeError(f"draft takes a Decoder or None, got {draft!r}")
            if draft is self:
                raise ValueError(
                    "draft is this decoder: a model cannot draft for itself while "
                    "it generates; load a second (smaller) decoder"
                )
            if draft.config.vocab_size != self.config.vocab_size:
                raise ValueError(
                    f"the draft model's vocabulary has {draft.config.vocab_size} "
                    f"tokens, this model's {self.config.vocab_size}: a draft needs "
                    f"the same tokenizer"
                )
            if not speculate:
                raise ValueError(
                    "a draft model drafts for speculate=k tokens a pass; give "
                    "speculate (1 or more)"
                )
        most = self.graph.rows - 1
        if not isinstance(speculate, numbers.Integral) or isinstance(speculate, bool):
            raise TypeError(
                f"speculate takes an int (tokens drafted per pass, 0 is off), got "
                f"{speculate!r}"
            )
        count = int(speculate)
        if not 0 <= count <= most:
            raise ValueError(
                f"speculate={count} is outside [0, {most}]: a pass verifies the "
                f"drafts and the token before them in one prompt chunk of "
                f"{self.graph.rows} rows"
            )
        return count

    def _reusable(self, ids: np.ndarray) -> int:
        """The ids at the start of ``ids`` the cache holds, leaving the last
        one to prefill (its logits give the first token)."""
        same = 0
        for a, b in zip(self._cached, ids[:-1].tolist()):
            if a != b:
                break
            same += 1
        return same

    def _generate(
        self,
        ids: np.ndarray,
        seed: int,
        draw: dict[str, int],
        steps: int,
        stop_ids: set[int],
        loop: bool,
        reuse: int,
        on_logits: Callable[[np.ndarray], object] | None = None,
        speculation: tuple[int, Decoder | None] = (0, None),
        constraint: Constraint | None = None,
        penalties: Penalties | None = None,
    ) -> Generator[int, None, None]:
        self.stats = Stats(
            prompt_tokens=len(ids),
            cached_tokens=reuse,
            backend=backend_name(),
            device=self.device.name,
            loop="device" if loop else "host",
        )
        if steps == 0:
            return
        self._reset()
        started = time.perf_counter()
        self._cached = self._cached[:reuse]  # positions from reuse on are rewritten
        chunks = list(self._chunks(ids, reuse))
        carry: Any = None
        for start, chunk, n in chunks[:-1]:
            _, carry = self.prompt(
                chunk, token=0, position=start, n=n, seed=seed, **draw
            )
        start, chunk, n = chunks[-1]
        first = {"token": 0, "position": start, "n": n, "seed": seed, **draw}
        if loop:
            tokens = self._device_loop(chunk, first, steps, stop_ids, started)
        elif constraint is not None or (penalties and not penalties.neutral):
            tokens = self._drawn_loop(
                chunk,
                first,
                steps,
                stop_ids,
                started,
                on_logits,
                constraint,
                penalties or Penalties(),
                ids,
            )
        elif speculation[0]:
            tokens = self._speculative_loop(
                chunk, first, steps, stop_ids, started, on_logits, ids, *speculation
            )
        else:
            tokens = self._host_loop(chunk, first, steps, stop_ids, started, on_logits)
        # Once a token is out, the prompt is in the cache; once the next is,
        # so is the one before (the decode step fed it).
        previous: int | None = None
        with contextlib.closing(tokens):
            for token in tokens:
                if previous is None:
                    self._cached = ids.tolist()
                else:
                    self._cached.append(previous)
                previous = token
                yield token

    @staticmethod
    def _logits(version: CompiledGraph) -> np.ndarray:
        """The logits a version's last run left (its first output)."""
        return version.read(version.recording.outputs[0])

    def _record(self, first: int, k: int) -> int:
        return int(self.decode.read(self.graph.generated)[first + k, 0])

    def _timed(self, k: int, started: float, first_done: float) -> None:
        now = time.perf_counter()
        if k == 0:
            self.stats.first_token_s = now - started
        else:
            self.stats.decode_s = now - first_done
        self.stats.new_tokens = k + 1

    def _device_loop(self, chunk, first, steps, stop_ids, started):
        loop = self._loop
        assert loop is not None
        n = first["n"]
        position = first["position"] + n  # where the first generated token goes
        loop.start(chunk, **first)
        try:
            _check_finite(self._logits(self.prompt)[n - 1], position)
            token = self._record(position, 0)
            self._timed(0, started, started)
            first_done = time.perf_counter()
            yield token
            if token in stop_ids or steps == 1:
                return
            for k in loop.steps(steps - 1):
                # Step k + 1 runs already and may have written these logits:
                # this sees the latest, so a transient overflow of one step
                # can go unseen (docs/guide/reliability.md says so).
                _check_finite(self._logits(self.decode), position + k + 1)
                token = self._record(position, k + 1)
                self._timed(k + 1, started, first_done)
                yield token
                if token in stop_ids:
                    break
        finally:
            loop.close()  # waits out the steps in flight, frees the graph

    def _host_loop(self, chunk, first, steps, stop_ids, started, on_logits=None):
        carry = self._prompt_step(chunk, first, on_logits)
        token = int(carry["token"])
        self._timed(0, started, started)
        first_done = time.perf_counter()
        yield token
        for k in range(1, steps):
            if token in stop_ids:
                return
            carry = self._decode_step({**dict(carry), "n": 1}, on_logits)
            token = int(carry["token"])
            self._timed(k, started, first_done)
            yield token

    def _prompt_step(self, chunk, first, on_logits) -> Any:
        """The prompt's last chunk: its carry (the first token sampled)."""
        n = first["n"]
        logits, carry = self.prompt(chunk, **first)
        _check_finite(logits[n - 1], first["position"] + n)
        if on_logits is not None:
            on_logits(np.array(logits[n - 1], np.float32))
        return carry

    def _decode_step(self, values: Mapping[str, Any], on_logits) -> Any:
        """One decode step from the host: its carry (the token sampled)."""
        logits, carry = self.decode(**values)
        _check_finite(logits, int(carry["position"]))
        if on_logits is not None:
            on_logits(np.array(logits, np.float32))
        return carry

    def _drawn_loop(
        self,
        chunk,
        first,
        steps,
        stop_ids,
        started,
        on_logits,
        constraint: Constraint | None,
        penalties: Penalties,
        ids: np.ndarray,
    ):
        """The host loop, each token drawn on the host from the logits as
        llama.cpp's chain leaves them: the repetition penalties, then the
        constraint's mask, then min-p (:mod:`iron.lm.penalties`).

        The step's own draw (on the device, from the logits as computed) is
        ignored: the token is drawn with the same sampler and seed (``seed +
        position``, as the device's), and fed to the next decode step.
        """
        settings = {
            "temperature": temperature_of(first["temperature"]),
            "top_k": first["top_k"],
            "top_p": top_p_of(first["top_p"]),
        }
        matcher = None if constraint is None else constraint.matcher()
        eos = () if constraint is None else constraint.tokenizer.eos_ids
        history = ids.tolist()  # the penalties' window: prompt, then generated
        context = self.graph.context
        n, seed = first["n"], first["seed"]
        logits, _ = self.prompt(chunk, **first)
        row = logits[n - 1]
        position = first["position"] + n  # where the token drawn goes
        first_done = started
        for k in range(steps):
            _check_finite(row, position)
            scores = np.array(row, np.float32)
            if on_logits is not None:
                on_logits(scores.copy())
            scores = penalties.penalize(scores, history, context)
            masked = scores
            if matcher is not None:
                masked = matcher.mask(scores)
                if matcher.accepting:  # complete: any of the stop ids may end it
                    ends = [i for i in (*stop_ids, *eos) if i < masked.size]
                    masked[ends] = np.maximum(masked[ends], scores[ends])
            token = draw(penalties.cut(masked), seed=seed + position, **settings)
            self._timed(k, started, first_done)
            if k == 0:
                first_done = time.perf_counter()
            yield token
            if token in stop_ids or k == steps - 1:
                return
            history.append(token)
            if matcher is not None:
                matcher.consume(token)
            if matcher is not None and matcher.stopped:
                # nothing may follow: end as the model would
                stop = next(iter(sorted(stop_ids)), None)
                if stop is not None:
                    self._timed(k + 1, started, first_done)
                    yield stop
                return
            values = {**first, "token": token, "position": position, "n": 1}
            row, _ = self.decode(**values)
            position += 1

    def _speculative_loop(
        self, chunk, first, steps, stop_ids, started, on_logits, ids, speculate, model
    ):
        """The host loop, verifying drafts (prompt lookup's, or ``model``'s
        greedy tokens) in prompt chunks.

        A pass feeds the last token and up to ``speculate`` drafted ones at
        their positions through the prompt version; its row ``i`` has the
        logits the decode step would have had there (the same bits), so the
        token the step would have sampled is drawn from it on the host with
        the same seed. Drafts are kept while they equal those tokens; the
        first that differs is replaced by the drawn one. The cache's
        positions past the kept tokens hold rejected drafts and are written
        again by the next pass before anything reads them.
        """
        settings = {
            "temperature": temperature_of(first["temperature"]),
            "top_k": first["top_k"],
            "top_p": top_p_of(first["top_p"]),
        }
        seed, rows, context = first["seed"], self.graph.rows, self.graph.context
        token = int(self._prompt_step(chunk, first, on_logits)["token"])
        position = first["position"] + first["n"]  # where ``token`` goes
        text = [*ids.tolist(), token]
        self._timed(0, started, started)
        first_done = time.perf_counter()
        made = 1
        yield token
        while made < steps and token not in stop_ids:
            # a pass writes a whole chunk's positions: room for them, and a
            # draft leaves a token to make after it within the steps
            fits = position + rows <= context
            room = min(speculate, steps - made - 1) if fits else 0
            draft = self._drafted(model, text, room) if room > 0 else []
            values = {**first, "token": token, "position": position, "n": 1}
            if not draft:  # nothing to verify: one decode step
                step, carry = self.decode(**values)
                _check_finite(step, position + 1)
                out, rows_of = [int(carry["token"])], [step]
            else:
                fed = np.zeros(rows, np.int32)
                fed[: len(draft) + 1] = [token, *draft]
                logits, _ = self.prompt(fed, **{**values, "n": len(draft) + 1})
                out, rows_of = [], []
                for i in range(len(draft) + 1):
                    _check_finite(logits[i], position + i + 1)
                    rows_of.append(logits[i])
                    out.append(
                        draw(logits[i], seed=seed + position + i + 1, **settings)
                    )
                    if i == len(draft) or out[-1] != draft[i] or out[-1] in stop_ids:
                        break
                self.stats.verify_passes += 1
                self.stats.drafted_tokens += len(draft)
                self.stats.accepted_tokens += sum(
                    1 for kept, drafted in zip(out, draft) if kept == drafted
                )
            for token, row in zip(out, rows_of, strict=True):
                if on_logits is not None:  # each token's own, before it
                    on_logits(np.array(row, np.float32))
                self._timed(made, started, first_done)
                made += 1
                text.append(token)
                yield token
                if token in stop_ids or made == steps:
                    return
            position += len(out)

    @staticmethod
    def _drafted(model: Decoder | None, text: list[int], count: int) -> list[int]:
        """Up to ``count`` drafted tokens: prompt lookup, or ``model``'s greedy
        continuation (its cache keeps the text it has seen)."""
        if model is None:
            return lookup_draft(text, count)
        if len(text) > model.graph.context - model.graph.rows:
            return []  # the draft model's context is full: no draft
        return list(
            model.generate(
                text,
                max_new_tokens=count,
                temperature=0.0,
                stop=(),
                device_loop=False,
                reuse_cache=True,
            )
        )

    # -- checking ---------------------------------------------------------------------

    def reference_tokens(
        self,
        prompt_ids: Sequence[int],
        count: int,
        *,
        seed: int = 0,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
    ) -> list[int]:
        """The first ``count`` tokens the host reference generates.

        The Llama graph evaluated step by step with each operator's numpy
        reference (no device, no compiled version): the prompt in chunks of
        ``rows``, then ``count - 1`` decode steps, each fed the last one's
        carried values, with the sampling settings given (None: the
        decoder's graph's, as for :meth:`generate`).
        :meth:`generate` yields the same tokens for the same prompt and seed
        on any backend whose kernels are exact (the emulated NPU is), so a
        test, an example or ``iron-lm generate --check`` compares the two.
        Stop ids are not applied: compare against a generation's prefix.
        """
        ids = self._check_ids(prompt_ids)
        draw = self.graph.sampling(temperature=temperature, top_k=top_k, top_p=top_p)
        tokens: list[int] = []
        carry: Any = None
        with iron.use_device(self.device):
            for start, chunk, n in self._chunks(ids):
                _, carry = self.graph.reference(
                    chunk, token=0, position=start, n=n, seed=seed, **draw
                )
            for k in range(count):
                tokens.append(int(carry["token"]))
                if k == count - 1:
                    break
                _, carry = self.graph.reference(
                    **{name: int(v) for name, v in dict(carry).items()} | {"n": 1}
                )
        return tokens

    # -- text -----------------------------------------------------------------------

    def stream(
        self,
        prompt: str | Sequence[int],
        *,
        max_new_tokens: int = 32,
        seed: int = 0,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        stop: str | Sequence[str] | None = None,
        device_loop: bool | None = None,
        reuse_cache: bool = False,
        min_p: float = 0.0,
        repeat_penalty: float = 1.0,
        repeat_last_n: int = 64,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
    ) -> TextStream:
        """Generate from ``prompt`` and stream the text, piece by piece.

        Args:
            prompt: Text (encoded with :attr:`tokenizer`, bos added as the
                model expects) or token ids.
            max_new_tokens: At most this many tokens (fewer near the context end).
            seed: The sampling seed, as for :meth:`generate`.
            temperature: As for :meth:`generate` (per call, never a recompile).
            top_k: As for :meth:`generate`.
            top_p: As for :meth:`generate`.
            stop: Strings that end the text (not included, never yielded).
            device_loop: As for :meth:`generate`.
            reuse_cache: As for :meth:`generate`.
            min_p: As for :meth:`generate` (llama.cpp's min-p).
            repeat_penalty: As for :meth:`generate`.
            repeat_last_n: As for :meth:`generate`.
            presence_penalty: As for :meth:`generate`.
            frequency_penalty: As for :meth:`generate`.

        Returns:
            The pieces; afterwards its ``finish_reason`` says ``"stop"`` (an
            eos token or a stop string) or ``"length"``, and its
            ``token_ids`` the tokens generated.

        Raises:
            RuntimeError: This decoder has no tokenizer.
            ValueError: As :meth:`generate`, before any token is generated.

        Example:
            >>> pieces = decoder.stream("The NPU", max_new_tokens=8)
            >>> text = "".join(pieces)
            >>> pieces.finish_reason, len(pieces.token_ids)
            ('length', 8)
        """
        tokenizer = self._text_tokenizer()
        ids = tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)
        eos = {*self.config.eos_token_ids, *tokenizer.eos_ids}
        tokens = self.generate(
            ids,
            max_new_tokens=max_new_tokens,
            seed=seed,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            stop=sorted(eos),
            device_loop=device_loop,
            reuse_cache=reuse_cache,
            min_p=min_p,
            repeat_penalty=repeat_penalty,
            repeat_last_n=repeat_last_n,
            presence_penalty=presence_penalty,
            frequency_penalty=frequency_penalty,
        )
        return TextStream(
            tokens, tokenizer, stop=stop, eos_ids=eos, prompt_tokens=len(ids)
        )

    def complete(self, prompt: str | Sequence[int], **settings: Any) -> str:
        """The text generated from ``prompt`` (settings as for :meth:`stream`).

        Example:
            >>> text = decoder.complete("The NPU", max_new_tokens=8)
            >>> text == decoder.complete("The NPU", max_new_tokens=8)
            True
        """
        return self.stream(prompt, **settings).read()

    def chat(self, messages: Sequence[Mapping[str, Any]], **settings: Any) -> str:
        """The assistant's reply to ``messages`` (the chat template applied).

        ``messages`` are ``{"role": ..., "content": ...}`` dicts; settings
        are as for :meth:`stream`.

        Raises:
            ChatTemplateError: The tokenizer has no chat template (a base
                model), or the template refused the messages.

        Example:
            >>> messages = [{"role": "user", "content": "Hello!"}]
            >>> reply = decoder.chat(messages, max_new_tokens=8)
            >>> messages.append({"role": "assistant", "content": reply})
        """
        text = self._text_tokenizer().apply_chat_template(messages)
        return self.complete(text, **settings)

    def _text_tokenizer(self) -> Tokenizer:
        if self.tokenizer is None:
            raise RuntimeError(
                "this Decoder has no tokenizer (its checkpoint directory has no "
                f"{TOKENIZER_FILE}): pass tokenizer=Tokenizer.from_directory(DIR) "
                "to Decoder, or call generate() with token ids"
            )
        return self.tokenizer


class _Generation:
    """A generation in progress, as an error names it."""

    def __init__(self, prompt_tokens: int, loop: str) -> None:
        self.prompt_tokens = prompt_tokens
        self.loop = loop
        self.yielded = 0
        self.thread = threading.current_thread().name

    def __str__(self) -> str:
        return (
            f"the generation on a {self.prompt_tokens}-token prompt ({self.loop} "
            f"loop, made in thread {self.thread!r}), suspended after "
            f"{self.yielded} tokens"
        )


def _count(name: str, value: Any) -> int:
    """An argument that is a count: an int (not a bool, float or str), >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{name} takes an int (a number of tokens), got {value!r} "
            f"({type(value).__name__})"
        )
    if value < 0:
        raise ValueError(f"{name} takes an int >= 0, got {value}")
    return int(value)


def _ids(name: str, value: Any) -> list[int]:
    """An argument that is a collection of token ids (not a str)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(
            f"{name} takes a collection of token ids (ints), got {value!r} "
            f"({type(value).__name__}); a str is not one: encode it with the "
            "tokenizer and pass its ids"
        )
    ids = list(value)
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, numbers.Integral):
            raise TypeError(
                f"{name} takes token ids (ints), got {i!r} ({type(i).__name__}) "
                "among them"
            )
    return [int(i) for i in ids]


def _check_finite(logits: Any, position: int) -> None:
    """End generation if the logits a token is sampled from are not finite."""
    values = np.asarray(logits, np.float32)
    finite = np.isfinite(values)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise NonFiniteLogitsError(
            f"the model computed non-finite logits for position {position} "
            f"({np.count_nonzero(~finite)} of {values.size}, such as "
            f"{float(values.reshape(-1)[bad])} for token id {bad}); the token "
            "sampled from them would be meaningless, so generation stops here. "
            "Weights loaded by from_pretrained are checked finite, so with them "
            "the arithmetic overflowed in bf16"
        )
