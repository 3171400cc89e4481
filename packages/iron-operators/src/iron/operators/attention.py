"""Attention over a key/value cache: ``DecodeAttention`` and ``CausalAttention``.

Both read a query and the caches ``k_cache``, ``v_cache`` of shape
``(kv_heads, max_len, head_dim)``, with grouped-query heads: query head ``h``
uses kv head ``h // (heads // kv_heads)``. ``DecodeAttention`` takes one
query token and attends to the first ``length`` cache positions;
``CausalAttention`` takes a chunk of ``rows`` prompt tokens whose own keys
and values are already in the caches at ``start .. start + rows - 1``, and row
``i`` attends to positions ``0 .. start + i``. ``length`` and ``start`` may be
per-call values.

The kernel model (what :meth:`reference` computes): scores ``q . k`` in fp32
(bf16 products are exact in fp32) times the fp32 scale ``1/sqrt(head_dim)``;
softmax in fp32 (max subtracted, fp32 ``exp``); the weighted sum of ``v`` in
fp32, divided by the fp32 sum of weights; one rounding to bf16. Positions a
row does not attend to are excluded by selection, never by multiplying by a
zero weight, so whatever a cache holds there (stale values, NaN) is never read
into a result.

On the device a core takes one kv head's query group at a time and streams
that kv head's keys and values in chunks of ``kv_tile`` positions (as many
chunks as ``max_len`` makes: a long cache streams in several groups of DMA
descriptors, not under one repeat count), keeping the running max, sum and
fp32 accumulator; kv heads are spread over ``num_aie_columns`` columns.

This module owns the two operators' declarations, device rules and costs.
The arithmetic they share, the kernel model ``attend`` and the tolerance
(within one bf16 ulp of the reference, or within an absolute bound
``fp32_error_bound`` computes from the inputs, covering fp32 evaluation in
another order), lives in ``iron.operators._attention_math`` and is
re-exported here.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from ml_dtypes import bfloat16

from iron.core.declare import Divisors, Input, Output, param, tunable
from iron.core.device import Device
from iron.core.handle import Handle, is_expr
from iron.core.operator import Cost, Operator, RefusedShapeError
from iron.core.tolerance import Tolerance
from iron.operators._attention_math import EXP_ERROR as EXP_ERROR
from iron.operators._attention_math import FLUSH_FLOOR as FLUSH_FLOOR
from iron.operators._attention_math import U as U
from iron.operators._attention_math import (
    attend,
    bound_tolerance,
    fp32_error_bound,
    unit_bound,
)

__all__ = ["CausalAttention", "DecodeAttention", "fp32_error_bound"]

#: Lanes of an fp32 accumulator register (512 bits): the width the q . k and
#: p . v dot products run at, so head_dim and kv_tile are multiples of it.
LANES = 16
_COLUMNS = (1, 2, 4, 8)
_BF16 = 2
_F32 = 4
#: Bytes of a core's data memory kept for its stack.
STACK_BYTES = 1024
#: The largest kv_tile resolve picks (larger chunks only grow the scores).
_KV_TILE_MAX = 256
#: The largest q_tile resolve picks for CausalAttention.
_Q_TILE_MAX = 32


class _Attention(Operator):
    """Grouped-query attention over ``(kv_heads, max_len, head_dim)`` caches."""

    heads: int = param(doc="query heads")
    kv_heads: int = param(doc="key/value heads (heads is a multiple of it)")
    head_dim: int = param(doc="elements of one head")
    max_len: int = param(doc="positions the caches hold")
    kv_tile: int = tunable(
        domain=Divisors("max_len", multiple_of=LANES),
        doc="cache positions streamed to a core per chunk",
    )
    num_aie_columns: int = tunable(
        domain=_COLUMNS, doc="columns the kv heads spread over"
    )
    #: Tiles of each streamed operand a core holds: the depth of the NPU
    #: design's object FIFOs, and what :meth:`core_bytes` counts.
    fifo_depth: ClassVar[int] = 2

    # -- what subclasses say ------------------------------------------------------

    def _q_tile(self) -> int:
        return 1

    def _q_tiles(self) -> list[int]:
        return [1]

    def _attended_end(self) -> int | None:
        """The last position + 1 a call attends to, if fixed at record time."""
        raise NotImplementedError

    # -- device rules -------------------------------------------------------------

    @property
    def group(self) -> int:
        """Query heads per kv head."""
        return self.heads // self.kv_heads if self.kv_heads else 0

    def core_bytes(
        self, q_tile: int, kv_tile: int, *, words: int = 0, pair: int = 1
    ) -> int:
        """Data memory one core needs: double-buffered tiles, scratch, stack.

        The one account of a core's memory: the NPU design checks its layout
        with this same sum (``iron.runtime.npu.designs.attention_schedule``).

        Args:
            q_tile: Query rows (tokens) per kernel call.
            kv_tile: Cache positions per chunk.
            words: Scratchpad words each query element carries (a design
                reading a per-call value streams them with the queries).
            pair: Columns sharing one query element (2 when the design pairs
                columns: each core then holds its partner's query tile too).
        """
        q_rows = q_tile * self.group
        hd = self.head_dim
        depth = self.fifo_depth
        return (
            depth * 2 * kv_tile * hd * _BF16  # K and V chunks
            + depth * 2 * q_rows * hd * _BF16  # queries in, results out
            + depth * (pair - 1) * q_rows * hd * _BF16  # the partner's queries
            + depth * words * _F32  # the scratchpad words, with each query element
            + q_rows * kv_tile * _F32  # scores of one chunk
            + q_rows * hd * _F32  # the fp32 accumulator
            + q_rows * 2 * _F32  # running max and sum
            + STACK_BYTES
        )

    def _per_call(self) -> bool:
        """Whether the length (start) is a per-call value the design reads."""
        return False

    def design_bytes(
        self, dev: Device, q_tile: int, kv_tile: int, columns: int | None = None
    ) -> int:
        """:meth:`core_bytes` with the terms a design on ``dev`` adds.

        A per-call length (start) reaches the core as the image's scratchpad
        words, counted as ``dev.scratchpad_words`` (an image's words; a
        version's carried values beyond them are not known here), streamed
        with the queries; paired columns (when ``3 * columns`` streams
        exceed the device's ``2 * columns`` shim channels) add the partner's
        query tile.
        """
        words = dev.scratchpad_words if self._per_call() else 0
        n = columns or self.num_aie_columns or dev.columns
        pair = 1 if not words or 3 * n <= 2 * dev.columns else 2
        return self.core_bytes(q_tile, kv_tile, words=words, pair=pair)

    def _refuse(self, dev: Device, rule: str) -> RefusedShapeError:
        return RefusedShapeError(f"{type(self).__name__} on {dev}: {rule}")

    def _shape_rules(self, dev: Device) -> None:
        for field in ("heads", "kv_heads", "head_dim", "max_len"):
            if getattr(self, field) < 1:
                raise self._refuse(
                    dev, f"{field}={getattr(self, field)} is not positive"
                )
        if self.heads % self.kv_heads:
            raise self._refuse(
                dev,
                f"heads={self.heads} is not a multiple of kv_heads={self.kv_heads} "
                f"(each kv head serves a whole group of query heads)",
            )
        if self.head_dim % LANES:
            raise self._refuse(
                dev,
                f"head_dim={self.head_dim} is not a multiple of the vector width "
                f"{LANES} (the fp32 accumulator's lanes)",
            )
        if self.max_len % LANES:
            raise self._refuse(
                dev,
                f"max_len={self.max_len} is not a multiple of {LANES} (keys and "
                f"values stream in chunks of whole {LANES}-lane vectors)",
            )

    def check(self, dev: Device) -> None:
        self._shape_rules(dev)
        end = self._attended_end()
        if end is not None and end > self.max_len:
            raise self._refuse(dev, self._past_end_rule(end))
        if self.num_aie_columns > dev.columns:
            raise self._refuse(
                dev,
                f"num_aie_columns={self.num_aie_columns} exceeds the device's "
                f"{dev.columns} columns",
            )
        if self.kv_heads % self.num_aie_columns:
            raise self._refuse(
                dev,
                f"kv_heads={self.kv_heads} is not a multiple of num_aie_columns="
                f"{self.num_aie_columns} (each column takes whole kv heads)",
            )
        # However many chunks max_len makes, the design streams them: its
        # core loops over them (an index, no DMA repeat count) and its shim
        # walks them in as many descriptors as they take, issued in groups a
        # channel's task queue holds, with waits between (the NPU design,
        # iron.runtime.npu.designs.attention_schedule.kv_group).
        need = self.design_bytes(dev, self._q_tile(), self.kv_tile)
        if need > dev.core_memory_bytes:
            self._some_tile_works(dev)
        if need > dev.core_memory_bytes:
            raise self._refuse(
                dev,
                f"kv_tile={self.kv_tile} with head_dim={self.head_dim} and "
                f"{self._q_tile() * self.group} query rows needs {need} bytes of "
                f"core memory (double-buffered K/V chunks, queries, results, "
                f"scratchpad words and a paired column's queries, fp32 scores "
                f"and accumulator, stack), over a core's "
                f"{dev.core_memory_bytes} bytes; use smaller tiles",
            )

    def _past_end_rule(self, end: int) -> str:
        raise NotImplementedError

    def _some_tile_works(self, dev: Device) -> None:
        """Refuse the shape itself when no kv_tile fits one query row."""
        rows = self.group
        fitting = [
            t
            for t in Divisors("max_len", LANES).values(self.fields())
            if self.design_bytes(dev, 1, t) <= dev.core_memory_bytes
        ]
        if not fitting:
            need = self.design_bytes(dev, 1, LANES)
            raise self._refuse(
                dev,
                f"head_dim={self.head_dim} with {rows} query rows needs {need} bytes "
                f"of core memory even at kv_tile={LANES}, over a core's "
                f"{dev.core_memory_bytes} bytes",
            )

    def resolve(self, dev: Device) -> dict[str, int]:
        if self.max_len < LANES or self.max_len % LANES:
            # No kv_tile is in the domain (divisors of max_len, multiples of 16).
            raise self._refuse(
                dev,
                f"max_len={self.max_len} is not a positive multiple of {LANES} "
                f"(keys and values stream in chunks of whole {LANES}-lane vectors)",
            )
        columns = self.num_aie_columns or max(
            c for c in _COLUMNS if c <= dev.columns and self.kv_heads % c == 0
        )
        domain = Divisors("max_len", LANES).values(self.fields())
        kv_tiles = (
            [self.kv_tile] if self.kv_tile else [t for t in domain if t <= _KV_TILE_MAX]
        )
        q_tiles = self._q_tiles()
        fits = [
            (q * t, t, q)
            for q in q_tiles
            for t in kv_tiles
            if self.design_bytes(dev, q, t, columns) <= dev.core_memory_bytes
        ]
        if fits:
            # The largest kernel call among those whose cache streams fit a
            # shim channel's 4-deep task queue: a column streams each of its
            # kv heads once per query tile, one push each, and a push onto a
            # full queue is dropped (mlir-aie PR #3734; issue 28, review 2 C3:
            # kv_tile=64, q_tile=4 pushed 7 times per channel on npu1).
            per_column = max(self.kv_heads // columns, 1)
            rows = getattr(self, "rows", 1)  # DecodeAttention: one query tile
            queued = [f for f in fits if per_column * (rows // f[2]) <= 4]
            _, kv_tile, q_tile = max(queued or fits)
        else:
            # Nothing fits: the smallest tiles that stream, refused by check().
            kv_tile = min(kv_tiles or domain)
            q_tile = min(q_tiles)
        chosen = {"num_aie_columns": columns, "kv_tile": kv_tile}
        if "q_tile" in type(self).declaration.params:
            chosen["q_tile"] = q_tile
        return chosen

    # -- cost and tolerance -------------------------------------------------------

    def _chunks(self, end: int) -> int:
        tile = self.kv_tile or self.max_len
        return -(-end // tile)

    def _streamed(self, end: int) -> int:
        """Cache positions streamed to attend up to ``end``: whole chunks."""
        return min(self._chunks(end) * (self.kv_tile or self.max_len), self.max_len)

    def _cost(self, dev: Device, macs: int, q_bytes: int, ends: list[int]) -> Cost:
        """The cost of attending with one query tile per entry of ``ends``.

        Each query tile (the one query, in decode) streams its kv head's keys
        and values up to its end in ``kv_tile`` chunks, a kernel call each; a
        column's core takes its kv heads one after another. ``bytes`` counts
        the cache once, up to the last end; every other tile's stream is
        ``reread_bytes``.
        """
        op = self._settled(dev)
        per_position = 2 * self.kv_heads * self.head_dim * _BF16  # K and V
        once = op._streamed(max(ends))
        streamed = sum(op._streamed(e) for e in ends)
        columns = op.num_aie_columns
        chunks = sum(op._chunks(e) for e in ends)
        return Cost(
            macs=macs,
            bytes=once * per_position + q_bytes,
            columns=columns,
            calls=-(-self.kv_heads // columns) * chunks,
            reread_bytes=(streamed - once) * per_position,
        )

    def _tolerance(
        self, inputs: tuple[np.ndarray, ...], limits: np.ndarray | None
    ) -> Tolerance:
        if not inputs:
            bound = unit_bound(self.head_dim, self.max_len, self._chunks(self.max_len))
            return bound_tolerance(
                bound, "for |q|, |k|, |v| <= 1; pass the inputs for theirs"
            )
        q, k, v = inputs[:3]
        q = q.reshape(-1, self.heads, self.head_dim)
        assert limits is not None  # given with the inputs
        chunks = self._chunks(int(limits.max()) if limits.size else 0)
        return bound_tolerance(
            fp32_error_bound(q, k, v, limits, chunks), "from these inputs"
        )


class DecodeAttention(_Attention):
    """One query token's grouped-query attention over the first ``length`` positions.

    ``step(q, k_cache, v_cache, length=...)``: ``q`` is ``(heads, head_dim)``,
    the caches ``(kv_heads, max_len, head_dim)``; the result is ``(heads,
    head_dim)`` bf16. Query head ``h`` attends with kv head
    ``h // (heads // kv_heads)`` to positions ``0 .. length - 1``, scaled by
    ``1/sqrt(head_dim)``. ``length`` may be a per-call value
    (``length=position + 1``); a call's ``length`` must be in
    ``[1, max_len]``.

    The reference computes scores, softmax and the weighted sum in fp32 and
    rounds once to bf16 (module docstring); the tolerance is one bf16 ulp or
    an absolute bound derived from the inputs (:func:`fp32_error_bound`).
    """

    length: int = param(per_call=True, doc="cache positions attended (per call)")
    inputs = (
        Input("q", "heads", "head_dim"),
        Input("k_cache", "kv_heads", "max_len", "head_dim"),
        Input("v_cache", "kv_heads", "max_len", "head_dim"),
    )
    outputs = (Output("out", "heads", "head_dim"),)

    def _attended_end(self) -> int | None:
        return None if is_expr(self.length) else int(self.length)

    def _per_call(self) -> bool:
        return is_expr(self.length)

    def _past_end_rule(self, end: int) -> str:
        return f"length={end} is outside [1, max_len={self.max_len}]"

    def check(self, dev: Device) -> None:
        if not is_expr(self.length) and self.length < 1:
            self._shape_rules(dev)
            raise self._refuse(dev, self._past_end_rule(self.length))
        super().check(dev)

    def _length(self) -> int:
        if is_expr(self.length):
            raise ValueError(
                f"DecodeAttention: length={self.length} is a per-call value; bind "
                f"it first (op.bind(values)) to run or judge one call"
            )
        length = int(self.length)
        if not 1 <= length <= self.max_len:
            raise ValueError(
                f"DecodeAttention: length={length} this call is outside "
                f"[1, max_len={self.max_len}]; attend to at least one cached position"
            )
        return length

    def reference(
        self, q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray
    ) -> np.ndarray:
        limits = np.array([self._length()])
        out = attend(q[None], k_cache, v_cache, limits)
        return out[0]

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        limits = np.array([self._length()]) if inputs else None
        return self._tolerance(inputs, limits)

    def cost(self, dev: Device) -> Cost:
        """MACs for the positions attended; bytes for the chunks streamed.

        A per-call ``length`` is costed at ``max_len`` (the longest call).
        """
        length = self.max_len if is_expr(self.length) else int(self.length)
        macs = 2 * self.heads * length * self.head_dim  # q . k and p . v
        qo = 2 * self.heads * self.head_dim * _BF16
        return self._cost(dev, macs, qo, [length])


class CausalAttention(_Attention):
    """A prompt chunk's causal grouped-query attention, continuing a cache.

    ``step(q, k_cache, v_cache, start=...)``: ``q`` is ``(rows, heads,
    head_dim)``, the caches ``(kv_heads, max_len, head_dim)`` already hold the
    chunk's own keys and values at ``start .. start + rows - 1``; row ``i``
    attends to positions ``0 .. start + i``. The result is ``(rows, heads,
    head_dim)`` bf16. ``start`` may be a per-call value, and ``q`` may be
    bounded per call (``q[:n]``): the result then has the same leading bound.
    A call needs ``start + n <= max_len``.

    The reference and tolerance are DecodeAttention's, row by row (module
    docstring, :func:`fp32_error_bound`).
    """

    rows: int = param(doc="query rows in the chunk (the most a call gives)")
    start: int = param(0, per_call=True, doc="cache position of the first row")
    q_tile: int = tunable(
        domain=Divisors("rows"), doc="query rows a core takes per kernel call"
    )
    inputs = (
        Input("q", "rows", "heads", "head_dim"),
        Input("k_cache", "kv_heads", "max_len", "head_dim"),
        Input("v_cache", "kv_heads", "max_len", "head_dim"),
    )
    outputs = (Output("out", "rows", "heads", "head_dim"),)

    def _q_tile(self) -> int:
        return self.q_tile or 1

    def _q_tiles(self) -> list[int]:
        if self.q_tile:
            return [self.q_tile]
        tiles = Divisors("rows", at_most=_Q_TILE_MAX).values(self.fields())
        return tiles or [1]

    def _attended_end(self) -> int | None:
        return None if is_expr(self.start) else int(self.start) + self.rows

    def _per_call(self) -> bool:
        return is_expr(self.start)

    def _past_end_rule(self, end: int) -> str:
        return (
            f"start={self.start} + rows={self.rows} = {end} is past max_len="
            f"{self.max_len} (the chunk's keys are in the cache)"
        )

    def _shape_rules(self, dev: Device) -> None:
        if self.rows < 1:
            raise self._refuse(dev, f"rows={self.rows} is not positive")
        super()._shape_rules(dev)

    def output_valid(self, inputs: list[Handle | None]) -> list[dict[int, Any]]:
        """The result's rows are bounded as ``q``'s are (``q[:n]``)."""
        q = inputs[0]
        return [{0: q.valid[0]} if q is not None and 0 in q.valid else {}]

    def _limits(self, n: int) -> np.ndarray:
        if is_expr(self.start):
            raise ValueError(
                f"CausalAttention: start={self.start} is a per-call value; bind it "
                f"first (op.bind(values)) to run or judge one call"
            )
        start = int(self.start)
        if start < 0 or start + n > self.max_len:
            raise ValueError(
                f"CausalAttention: start={start} with {n} rows this call reaches "
                f"position {start + n - 1}, outside the cache's max_len="
                f"{self.max_len}"
            )
        return start + 1 + np.arange(n)

    def reference(
        self, q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray
    ) -> np.ndarray:
        limits = self._limits(q.shape[0])
        if q.shape[0] == 0:
            return np.zeros(q.shape, bfloat16)
        return attend(q, k_cache, v_cache, limits)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        limits = self._limits(inputs[0].shape[0]) if inputs else None
        return self._tolerance(inputs, limits)

    def cost(self, dev: Device) -> Cost:
        """MACs for the causal triangle attended; bytes for the chunks streamed.

        Each tile of ``q_tile`` rows streams the chunks up to its own last
        row, so every tile's stream but the longest is read again
        (``reread_bytes``). A per-call ``start`` is costed at ``max_len -
        rows`` (the longest call).
        """
        start = self.max_len - self.rows if is_expr(self.start) else int(self.start)
        attended = self.rows * start + self.rows * (self.rows + 1) // 2
        macs = 2 * self.heads * attended * self.head_dim
        qo = 2 * self.rows * self.heads * self.head_dim * _BF16
        q_tile = self._settled(dev).q_tile
        tiles = range(q_tile, self.rows + q_tile, q_tile)
        ends = [start + min(r, self.rows) for r in tiles]
        return self._cost(dev, macs, qo, ends)
