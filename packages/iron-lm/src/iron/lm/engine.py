"""Many sequences on one model: KV slots, their prefix index, the batched step.

An :class:`Engine` runs a :class:`~iron.lm.generate.Decoder` whose graph
holds several slots (``Llama(slots=S)``): each sequence takes a slot (its
own KV cache in device memory), its prompt runs in chunks of the prompt
version on that slot, and every sequence that is decoding advances by one
token per :meth:`Engine.step`, all of them in one call of the batched decode
version (the weights streamed once for the batch). A caller (the server's
scheduler) decides what runs when; the engine keeps the slots' books.

Each token is the one the sequence would get alone: row ``i`` of the batched
step has the bits of slot ``i``'s decode step (issue 30's path invariance),
and the host draws from it exactly as the device's Sample would
(:func:`iron.operators.sample.draw`, seed ``seed + position``). A slot that
is freed keeps the ids its cache holds, so a later prompt starting with them
(in any free slot) prefills only the rest.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Sequence

import numpy as np

from iron.lm.config import LlamaConfig
from iron.lm.generate import Decoder, _check_finite
from iron.lm.model import BATCHES, MAX_SLOTS
from iron.operators.sample import draw, temperature_of, top_p_of

__all__ = ["Engine", "NoSlotFree", "Stream", "slot_bytes", "slots_for"]


class NoSlotFree(RuntimeError):
    """Every slot holds a sequence; one must finish (or be cancelled) first."""


def slot_bytes(config: LlamaConfig, context: int) -> int:
    """Device bytes one slot's KV caches take: every layer's keys and values
    for ``context`` positions, bf16."""
    per_layer = 2 * config.num_key_value_heads * context * config.head_dim * 2
    return per_layer * config.num_hidden_layers


def slots_for(config: LlamaConfig, context: int, budget_bytes: int) -> int:
    """The slots a KV-cache memory budget holds: at most :data:`MAX_SLOTS`.

    Raises:
        ValueError: The budget does not hold one slot (naming both sizes).
    """
    one = slot_bytes(config, context)
    slots = min(MAX_SLOTS, budget_bytes // one)
    if slots < 1:
        raise ValueError(
            f"a KV-cache budget of {budget_bytes} bytes does not hold one slot: "
            f"a slot of {context} positions takes {one} bytes for this model; "
            f"raise the budget or lower the context"
        )
    return int(slots)


@dataclasses.dataclass(eq=False)
class Stream:
    """One sequence in a slot: its prompt, settings and progress.

    Attributes:
        slot: The slot its KV cache is in.
        ids: The prompt's token ids.
        seed: Its sampling seed (the draw for position ``p`` uses ``seed + p``).
        draw: Its sampling settings, the codes
            :meth:`iron.lm.model.Llama.sampling` gives.
        max_new_tokens: At most this many tokens.
        stop: Ids that end it (yielded, then it is done).
        cached: Prompt tokens found in the slot's cache, not prefilled.
        prefilled: Prompt positions written so far.
        position: Where its last token (``token``) goes in the cache.
        token: Its last token, fed to the next step.
        made: Tokens made so far.
        done: It made its last token.
        logits: Those its last token was drawn from (float32, ``(vocab,)``).
    """

    slot: int
    ids: np.ndarray
    seed: int
    draw: dict[str, int]
    max_new_tokens: int
    stop: frozenset[int]
    cached: int = 0
    prefilled: int = 0
    position: int = 0
    token: int = -1
    made: int = 0
    done: bool = False
    logits: np.ndarray | None = None

    @property
    def decoding(self) -> bool:
        """Its prompt is in the cache and it has tokens to make."""
        return self.made > 0 and not self.done


class Engine:
    """The slots of a decoder, its prompt chunks and batched decode steps.

    Args:
        decoder: A decoder whose graph holds ``slots`` >= 1 (it is compiled
            here with its batched versions).

    Not thread-safe: one thread (the scheduler's) drives it.
    """

    def __init__(self, decoder: Decoder) -> None:
        self.decoder = decoder
        self.graph = decoder.graph
        self.slots = self.graph.slots
        decoder.compile()
        self._batched = decoder.batched
        #: Per slot: the ids its cache holds at positions 0, 1, ...
        self._held: list[list[int]] = [[] for _ in range(self.slots)]
        self._busy: list[Stream | None] = [None] * self.slots
        self._owner: list[str | None] = [None] * self.slots
        #: Prompt tokens found in a slot's cache, summed over sequences.
        self.cached_tokens = 0
        self._warm()

    def _warm(self) -> None:
        """Run every version once now, so no request's first step pays for
        loading an image or compiling a kernel model: a prompt chunk and a
        decode step on slot 0 at position 0, each batched step with every
        row idle (at the last position, which no held prefix keeps). Slot
        0's held ids are forgotten."""
        graph, decoder = self.graph, self.decoder
        chunk = np.zeros(graph.rows, np.int32)
        decoder.prompt(chunk, token=0, position=0, n=1, slot=0)
        decoder.decode(token=0, position=0, n=1, slot=0)
        last = graph.context - 1
        for batch, version in self._batched.items():
            names = ["position", *(f"position{i}" for i in range(1, batch))]
            version(np.zeros((batch, 1), np.int32), **dict.fromkeys(names, last))
        self._held[0] = []
        decoder._cached = []  # slot 0 no longer holds what the decoder wrote

    # -- memory ----------------------------------------------------------------------

    @property
    def slot_bytes(self) -> int:
        """Device bytes one slot's KV caches take."""
        return slot_bytes(self.graph.config, self.graph.context)

    @property
    def cache_bytes(self) -> int:
        """Device bytes every slot's KV caches take together."""
        return self.slot_bytes * self.slots

    @property
    def free(self) -> int:
        """Slots holding no sequence."""
        return sum(s is None for s in self._busy)

    @property
    def active(self) -> list[Stream]:
        """The sequences in slots, by slot."""
        return [s for s in self._busy if s is not None]

    # -- sequences ---------------------------------------------------------------------

    def open(
        self,
        ids: Sequence[int],
        *,
        max_new_tokens: int,
        seed: int = 0,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        stop: Iterable[int] = (),
        reuse: bool = True,
        owner: str | None = None,
    ) -> Stream:
        """Take a slot for ``ids``: the free slot whose cache holds the longest
        prefix of them (with ``reuse``), else the free slot holding the
        fewest ids (the lowest of those), so other prefixes stay. Only a
        slot last filled by the same ``owner`` is reused (a caller's
        prompt never tells another caller anything through the time it
        takes).

        Raises:
            NoSlotFree: Every slot holds a sequence.
            ValueError, TypeError: As :meth:`Decoder.generate` for the ids
                and the sampling settings.
        """
        checked = self.decoder._check_ids(ids, "prompt_ids")
        settings = self.graph.sampling(
            temperature=temperature, top_k=top_k, top_p=top_p
        )
        free = [i for i, s in enumerate(self._busy) if s is None]
        if not free:
            raise NoSlotFree(
                f"all {self.slots} slots hold a sequence; wait for one to finish"
            )
        common = {
            i: _common(self._held[i], checked[:-1].tolist())
            if self._owner[i] == owner
            else 0
            for i in free
        }
        # the longest prefix held; else the slot holding least (keeping
        # others' prefixes for their next turn), the lowest of those
        slot = max(
            free, key=lambda i: (common[i] if reuse else 0, -len(self._held[i]), -i)
        )
        cached = common[slot] if reuse else 0
        room = self.graph.context - len(checked)
        seq = Stream(
            slot=slot,
            ids=checked,
            seed=int(seed),
            draw=settings,
            max_new_tokens=max(0, min(int(max_new_tokens), room)),
            stop=frozenset(int(i) for i in stop),
            cached=cached,
            prefilled=cached,
        )
        self._held[slot] = self._held[slot][:cached]
        self._owner[slot] = owner
        self._busy[slot] = seq
        self.cached_tokens += cached
        if seq.max_new_tokens == 0:
            seq.done = True
        return seq

    def close(self, seq: Stream) -> None:
        """Free ``seq``'s slot at once (its cache's ids stay for reuse)."""
        if self._busy[seq.slot] is seq:
            self._busy[seq.slot] = None
        seq.done = True

    def prefill(self, seq: Stream) -> int | None:
        """Run ``seq``'s next prompt chunk; after the last, its first token.

        Returns None while prompt chunks remain.
        """
        rows, ids = self.graph.rows, seq.ids
        start = seq.prefilled
        part = ids[start : start + rows]
        chunk = np.zeros(rows, np.int32)
        chunk[: len(part)] = part
        n = len(part)
        logits, carry = self.decoder.prompt(
            chunk,
            token=0,
            position=start,
            n=n,
            seed=seq.seed,
            slot=seq.slot,
            **seq.draw,
        )
        seq.prefilled = start + n
        self._held[seq.slot] = ids[: seq.prefilled].tolist()
        if seq.prefilled < len(ids):
            return None
        _check_finite(logits[n - 1], seq.prefilled)
        seq.logits = np.array(logits[n - 1], np.float32)
        return self._made(seq, int(carry["token"]), len(ids))

    def step(self, seqs: Sequence[Stream] | None = None) -> dict[int, int]:
        """One batched decode step of ``seqs`` (by default every decoding one).

        Returns:
            Each sequence's slot and its new token.
        """
        seqs = [s for s in (self.active if seqs is None else seqs) if s.decoding]
        if not seqs:
            return {}
        if not self._batched:  # one slot: the decode step (GEMV), same bits
            return self._alone(seqs[0])
        top = max(s.slot for s in seqs) + 1
        batch = next(b for b in BATCHES if b >= top)
        tokens = np.zeros((batch, 1), np.int32)
        # a row without a sequence decodes its slot's last position, which
        # no prompt reaches and no held prefix keeps (see _made)
        positions = [self.graph.context - 1] * batch
        for s in seqs:
            tokens[s.slot, 0] = s.token
            positions[s.slot] = s.position
        names = ["position", *(f"position{i}" for i in range(1, batch))]
        logits, _ = self._batched[batch](
            tokens, **dict(zip(names, positions, strict=True))
        )
        rows = np.asarray(logits, np.float32)
        out = {}
        for s in seqs:
            row = rows[s.slot]
            _check_finite(row, s.position + 1)
            s.logits = row.copy()
            token = draw(
                row,
                temperature=temperature_of(s.draw["temperature"]),
                top_k=s.draw["top_k"],
                top_p=top_p_of(s.draw["top_p"]),
                seed=s.seed + s.position + 1,
            )
            self._held[s.slot].append(s.token)
            out[s.slot] = self._made(s, token, s.position + 1)
        return out

    def _alone(self, s: Stream) -> dict[int, int]:
        """One decode step of ``s`` by the decode version (a graph of one
        slot): its token is sampled on the device, the draw :func:`draw`
        makes on the host. With slots the batched version of one row runs
        instead: it is one image, where the decode version of a graph with
        slots is an image per step (no Emit carries the slot)."""
        logits, carry = self.decoder.decode(
            token=s.token, position=s.position, n=1, seed=s.seed, slot=s.slot, **s.draw
        )
        _check_finite(logits, s.position + 1)
        s.logits = np.array(logits, np.float32)
        self._held[s.slot].append(s.token)
        return {s.slot: self._made(s, int(carry["token"]), s.position + 1)}

    def _made(self, seq: Stream, token: int, position: int) -> int:
        """``token`` made at ``position``: ``seq``'s books updated."""
        seq.token, seq.position = token, position
        seq.made += 1
        last = self.graph.context - 1  # idle rows write here: never held
        del self._held[seq.slot][last:]
        if (
            token in seq.stop
            or seq.made >= seq.max_new_tokens
            or position >= self.graph.context - 1
        ):
            seq.done = True
        return token

    def alone(self) -> None:
        """Make room for a run of the decoder's own versions (slot 0): every
        slot must be free; slot 0's held ids are forgotten.

        Raises:
            RuntimeError: A slot holds a sequence.
        """
        if self.free != self.slots:
            raise RuntimeError(
                f"{self.slots - self.free} slots hold sequences; a run alone "
                "waits for them to finish"
            )
        self._held[0] = []
        self._owner[0] = None
        self.decoder._cached = []  # nor what this engine wrote there


def _common(a: list[int], b: list[int]) -> int:
    """The length of ``a`` and ``b``'s common prefix."""
    return sum(1 for _ in itertools.takewhile(lambda p: p[0] == p[1], zip(a, b)))
