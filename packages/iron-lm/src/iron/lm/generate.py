"""Running a Llama: loading, scoring, and streamed generation.

:class:`Decoder` owns a :class:`~iron.lm.model.Llama` graph and its two
compiled versions (a prompt chunk and a decode step). It loads weights
piecewise with a progress bar (releasing checkpoint pages as it goes),
scores token ids (:meth:`Decoder.logits`), and generates: the prompt runs in
chunks, then the decode step loops on the device with
:class:`~iron.runtime.CarriedLoop` where the device runs a full ELF (npu2),
or from the host with each call's ``Carry`` passed back in elsewhere (npu1)
— the same tokens either way for the same seed.
"""

from __future__ import annotations

import dataclasses
import logging
import numbers
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

import iron
from iron.lm.checkpoint import Checkpoint
from iron.lm.config import LlamaConfig
from iron.lm.model import Llama
from iron.runtime import CarriedLoop, CompiledGraph, backend_name

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
    """

    prompt_tokens: int = 0
    new_tokens: int = 0
    first_token_s: float = 0.0
    decode_s: float = 0.0
    backend: str = ""
    device: str = ""
    loop: str = ""

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
        return (
            f"{self.prompt_tokens} prompt tokens, first token in "
            f"{self.first_token_s * 1e3:.0f} ms, {self.new_tokens} new tokens at "
            f"{self.decode_tokens_per_s:.1f} tokens/s ({self.loop} loop) on "
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
    """

    def __init__(
        self,
        graph: Llama,
        *,
        device: iron.Device | str | None = None,
        checkpoint: Checkpoint | None = None,
        progress: bool = True,
    ) -> None:
        self.graph = graph
        self.device = iron.core.device.require_device(device)
        self.checkpoint = checkpoint
        self.progress = progress
        self._prompt: CompiledGraph | None = None
        self._decode: CompiledGraph | None = None
        self._loop: CarriedLoop | None = None
        self.stats = Stats()

    @classmethod
    def from_pretrained(
        cls,
        directory: str | Path,
        *,
        device: iron.Device | str | None = None,
        context: int | None = None,
        rows: int = 16,
        temperature: float = 0.0,
        top_k: int = 1,
        progress: bool = True,
    ) -> Decoder:
        """Load a Hugging Face Llama checkpoint directory.

        Weights stay memory-mapped until uploaded, piece by piece, each
        piece's pages released once on the device.

        Raises:
            FileNotFoundError: No such directory, or no config.json or shards.
            ValueError: An unsupported architecture or setting (named), or
                tensors missing, extra or of the wrong shape (all named).
        """
        graph = Llama.from_pretrained(
            directory, context=context, rows=rows, temperature=temperature, top_k=top_k
        )
        checkpoint = graph.checkpoint
        return cls(graph, device=device, checkpoint=checkpoint, progress=progress)

    @property
    def config(self) -> LlamaConfig:
        """The model's configuration."""
        return self.graph.config

    # -- building ---------------------------------------------------------------

    def compile(self) -> Decoder:
        """Compile both versions, then upload the weights once.

        The decode step first, as the prompt's Emit starts it; both before
        the arena is allocated, so it is allocated once at its full size.
        """
        if self._prompt is not None:
            return self
        with iron.use_device(self.device):
            decode = self.graph.compile()
            prompt = self.graph.compile(
                tokens=((self.graph.rows,), np.int32),
                feeds=decode if decode.emit else None,
            )
        self._decode, self._prompt = decode, prompt
        self._upload(prompt)
        if prompt.emit is not None and decode.emit is not None:
            self._loop = CarriedLoop(prompt, decode, depth=2)
        return self

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
        """
        ids = self._check_ids(token_ids)
        self._check_checkpoint()
        out = np.zeros((len(ids), self.config.vocab_size), np.float32)
        for start, chunk, n in self._chunks(ids):
            logits, _ = self.prompt(chunk, token=0, position=start, n=n)
            out[start : start + n] = np.asarray(logits, np.float32)[:n]
        return out

    def _chunks(self, ids: np.ndarray) -> Iterator[tuple[int, np.ndarray, int]]:
        rows = self.graph.rows
        for start in range(0, len(ids), rows):
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
        stop: Sequence[int] | None = None,
        device_loop: bool | None = None,
    ) -> Iterator[int]:
        """Yield generated token ids as they are decoded.

        Args:
            prompt_ids: The prompt's token ids.
            max_new_tokens: At most this many tokens (fewer near the context end).
            seed: The sampling seed (the draw for position ``p`` uses
                ``seed + p``); greedy decoding ignores it.
            stop: Ids that end generation (the stop id is yielded); by
                default the model's eos ids.
            device_loop: Loop on the device (CarriedLoop) or from the host;
                by default on the device where it runs a full ELF.

        Raises:
            ValueError: The prompt is empty, not flat, longer than the
                context allows, or holds an id outside the vocabulary;
                ``max_new_tokens`` is negative; or ``device_loop`` is asked
                of a device without a full ELF. Raised by this call, before
                any token is generated.
            TypeError: ``prompt_ids`` holds other than ints,
                ``max_new_tokens`` is not an int, or ``stop`` is not a
                collection of ints (a str is refused: it never stops).
            iron.lm.checkpoint.CheckpointChangedError: A checkpoint shard
                changed on disk since it was mapped.
            NonFiniteLogitsError: While iterating: the model computed NaN
                or infinite logits; generation ends there.
        """
        ids = self._check_ids(prompt_ids, "prompt_ids")
        max_new_tokens = _count("max_new_tokens", max_new_tokens)
        stop_ids = set(
            self.config.eos_token_ids if stop is None else _ids("stop", stop)
        )
        self._check_checkpoint()
        room = self.graph.context - len(ids)
        steps = max(0, min(max_new_tokens, room))
        self.compile()
        loop = self._loop is not None if device_loop is None else device_loop
        if loop and self._loop is None:
            raise ValueError(
                f"{self.device.name} runs no full ELF, so the decode step cannot loop "
                f"on the device; use device_loop=False"
            )
        return self._generate(ids, seed, steps, stop_ids, loop)

    def _generate(
        self, ids: np.ndarray, seed: int, steps: int, stop_ids: set[int], loop: bool
    ) -> Iterator[int]:
        self.stats = Stats(
            prompt_tokens=len(ids),
            backend=backend_name(),
            device=self.device.name,
            loop="device" if loop else "host",
        )
        if steps == 0:
            return
        self._reset()
        started = time.perf_counter()
        chunks = list(self._chunks(ids))
        carry: Any = None
        for start, chunk, n in chunks[:-1]:
            _, carry = self.prompt(chunk, token=0, position=start, n=n, seed=seed)
        start, chunk, n = chunks[-1]
        if loop:
            yield from self._device_loop(
                chunk, start, n, seed, steps, stop_ids, started
            )
        else:
            yield from self._host_loop(chunk, start, n, seed, steps, stop_ids, started)

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

    def _device_loop(self, chunk, start, n, seed, steps, stop_ids, started):
        assert self._loop is not None
        position = start + n  # where the first generated token goes
        self._loop.start(chunk, token=0, position=start, n=n, seed=seed)
        _check_finite(self._logits(self.prompt)[n - 1], position)
        token = self._record(position, 0)
        self._timed(0, started, started)
        first_done = time.perf_counter()
        yield token
        if token in stop_ids or steps == 1:
            return
        generator = self._loop.steps(steps - 1)
        try:
            for k in generator:
                _check_finite(self._logits(self.decode), position + k + 1)
                token = self._record(position, k + 1)
                self._timed(k + 1, started, first_done)
                yield token
                if token in stop_ids:
                    break
        finally:
            generator.close()

    def _host_loop(self, chunk, start, n, seed, steps, stop_ids, started):
        logits, carry = self.prompt(chunk, token=0, position=start, n=n, seed=seed)
        _check_finite(logits[n - 1], start + n)
        token = int(carry["token"])
        self._timed(0, started, started)
        first_done = time.perf_counter()
        yield token
        for k in range(1, steps):
            if token in stop_ids:
                return
            logits, carry = self.decode(
                token=carry["token"],
                position=carry["position"],
                n=1,
                seed=carry["seed"],
            )
            _check_finite(logits, int(carry["position"]))
            token = int(carry["token"])
            self._timed(k, started, first_done)
            yield token


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
