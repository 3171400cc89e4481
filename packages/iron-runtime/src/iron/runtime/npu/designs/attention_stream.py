"""How K and V stream in the attention design of :mod:`.attention`: its plan.

This module owns the :class:`Plan` (the design's sizes, in the notation of
:mod:`.attention`, and the span chosen) and what decides the span: the
candidates in order of preference, whether one shim descriptor can alternate
``k_cache`` and ``v_cache`` (their pairing), the memory tile's read of a
span chunk by chunk and its descriptor checks, and the shim walks of K and
V. :mod:`.attention_layout` places a plan's FIFOs and transfers;
:mod:`.attention` emits the design.

The span is chosen, in this order of preference, as the first that passes
legality (memory-tile bytes and descriptor fields, shim buffer descriptors):

* *paired*: ``k_cache`` and ``v_cache`` are one argument (the arena, as a
  model's plan places them) with ``v_cache`` after ``k_cache`` at a distance
  ``d`` elements within the shim's 20-bit step (in 4-byte words). One shim
  descriptor then alternates the caches: sizes ``[n, 2, a, b]``, strides
  ``[m T D, d, b, 1]`` (``a b = m T D``, ``n <= 64`` spans of the iteration),
  runs of spans that are contiguous in the cache (a decode column's heads
  one after another) sharing a descriptor. Spans are tried smallest first, so
  normally ``m = 1``: the memory tile holds two chunks of K and V whatever
  ``max_len``;
* *unpaired* (separate arguments, ``v_cache`` before ``k_cache`` or too far
  from it): each span takes two descriptors (K, then V; contiguous each), so
  spans are tried largest first: a resident head when it fits the memory
  tile, else the fewest spans that do. The shim's 16 descriptors bound this:
  a long cache with several heads a column or several query tiles is refused,
  the error naming the fix (place both caches in the arena, ``v_cache`` after
  ``k_cache`` within the step, or a shorter ``max_len``).

With ``m > 1`` the memory tile reads each ``[K_blk | V_blk]`` element chunk
by chunk (``dimensionsToStream [m, 2, T, D]``); a read whose sizes or steps
are past the memory tile's 10-bit wrap or 17-bit step (in 32-bit words) is
refused, naming the fix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from iron.core.device import Device
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Words, linear_walk
from iron.runtime.npu.designs._common import word_slots

__all__ = ["Plan"]

_ITEM = 2  # bf16
_WORD = 4  # i32, f32
_DEPTH = 2  # double-buffered, as _Attention.core_bytes counts them
_CORE_ROW = 2
_MEM_ROW = 1
#: A memory tile's buffer-descriptor wrap (10 bits) and step (17 bits), in words.
_MEM_WRAP = (1 << 10) - 1
_MEM_STEP = 1 << 17

#: Each operator's per-call parameter (its word, or its fixed value).
_PER_CALL = {"DecodeAttention": "length", "CausalAttention": "start"}


@dataclasses.dataclass(frozen=True)
class Plan:
    """The sizes of one design (see :mod:`.attention` for the names).

    Attributes:
        causal: CausalAttention (else DecodeAttention).
        param: The per-call parameter's name (``length`` or ``start``).
        slot: Its scratchpad slot, or None when it is fixed.
        value: Its fixed value (when ``slot`` is None).
        count: Scratchpad words (0 without a per-call parameter).
        group: Columns sharing a query/words element (1 or 2).
        span: Chunks of K (and of V) in one ``kv_in_<c>`` element (``m``).
        dist: Elements from ``k_cache`` to ``v_cache`` in their one argument
            when one shim descriptor alternates them (paired), else None.
        kv_depth: Depth of ``kv_in_<c>`` in the memory tile.
    """

    causal: bool
    heads: int
    kv_heads: int
    head_dim: int
    max_len: int
    rows: int
    q_tile: int
    kv_tile: int
    columns: int
    param: str
    slot: int | None
    value: int
    count: int
    group: int
    span: int
    dist: int | None
    kv_depth: int

    @property
    def g(self) -> int:
        """Query heads per kv head."""
        return self.heads // self.kv_heads

    @property
    def hpc(self) -> int:
        """Kv heads per column."""
        return self.kv_heads // self.columns

    @property
    def chunks(self) -> int:
        """Cache chunks of ``kv_tile`` positions."""
        return self.max_len // self.kv_tile

    @property
    def q_tiles(self) -> int:
        """Query tiles per kv head."""
        return self.rows // self.q_tile

    @property
    def q_rows(self) -> int:
        """Query rows one kernel call takes (``q_tile * g``)."""
        return self.q_tile * self.g

    @property
    def q_elems(self) -> int:
        """bf16 of one column's query tile (and of one result element)."""
        return self.q_rows * self.head_dim

    @property
    def word_index(self) -> int:
        """The i32 index of the word in a ``qw`` element (``G q_elems / 2 + slot``)."""
        return self.group * self.q_elems // 2 + (self.slot or 0)

    @property
    def spans(self) -> int:
        """Spans (``kv_in`` elements) in one pass over a kv head's cache."""
        return self.chunks // self.span

    @property
    def block(self) -> int:
        """bf16 of K (or of V) in one span: ``m T D``."""
        return self.span * self.kv_tile * self.head_dim

    @property
    def resident(self) -> bool:
        """Whether a ``kv_in`` element holds a whole kv head (the memory tile repeats it)."""
        return self.span == self.chunks

    @property
    def passes(self) -> int:
        """Times the shim sends each kv head per call (1 when resident)."""
        return 1 if self.resident else self.q_tiles

    def q_fifo(self, col: int) -> str:
        """The FIFO column ``col``'s core takes its query tiles from."""
        return f"qw_{col // self.group}" if self.count else f"q_{col}"


def _base(op: Any, dev: Device, words: Words | None) -> dict:
    """The plan's fields that do not depend on how K and V stream."""
    causal = type(op).__name__ == "CausalAttention"
    param = _PER_CALL[type(op).__name__]
    slots, count = word_slots(op, (param,), words)
    count = count if slots else 0
    n = op.num_aie_columns
    group = 1 if not count or 3 * n <= 2 * dev.columns else 2
    return dict(
        causal=causal,
        heads=op.heads,
        kv_heads=op.kv_heads,
        head_dim=op.head_dim,
        max_len=op.max_len,
        rows=op.rows if causal else 1,
        q_tile=op.q_tile if causal else 1,
        kv_tile=op.kv_tile,
        columns=n,
        param=param,
        slot=slots.get(param),
        value=0 if slots else int(getattr(op, param)),
        count=count,
        group=group,
    )


def _pairing(
    where: Mapping[str, tuple[str, int]], dev: Device
) -> tuple[int | None, str]:
    """The K-to-V distance one shim descriptor can step by, or None and why not."""
    (karg, kb), (varg, vb) = where["k_cache"], where["v_cache"]
    if karg != varg:
        return None, "k_cache and v_cache are separate arguments"
    dist = vb - kb
    words = dist * _ITEM // dev.dma_granule_bytes
    if dist <= 0:
        return None, f"v_cache is {-dist} elements before k_cache in {karg}"
    if (dist * _ITEM) % dev.dma_granule_bytes or words > 1 << dev.dma_stride_bits:
        return None, (
            f"v_cache is {words} words after k_cache in {karg}, past the shim's "
            f"{dev.dma_stride_bits}-bit step (<= {1 << dev.dma_stride_bits} words)"
        )
    return dist, ""


def _candidates(base: dict, dist: int | None) -> list[Plan]:
    """Plans in order of preference (see the module docstring: the span)."""
    chunks = base["max_len"] // base["kv_tile"]
    spans = [m for m in range(1, chunks + 1) if chunks % m == 0]
    if dist is None:
        spans.reverse()  # two descriptors a span: the fewest spans
    return [
        Plan(**base, span=m, dist=dist, kv_depth=depth)
        for m in spans
        for depth in (2, 1)
    ]


def _kv_dims(p: Plan) -> tuple[tuple[int, int], ...]:
    """``dimensionsToStream`` of ``kv_<c>``: ``[K_t | V_t]`` for each chunk of a span.

    Empty when a span is one chunk (the element is already ``[K_t | V_t]``).
    """
    D, T = p.head_dim, p.kv_tile
    if p.span == 1:
        return ()
    return ((p.span, T * D), (2, p.block), (T, D), (D, 1))


def _memtile_dim_problems(p: Plan, dev: Device) -> list[str]:
    """How the memory tile's read of a span breaks its descriptor fields."""
    words = lambda n: n * _ITEM // dev.dma_granule_bytes  # noqa: E731
    dims = _kv_dims(p)
    problems = []
    if dims and words(p.head_dim) > _MEM_WRAP:
        problems.append(f"d0 wrap {words(p.head_dim)} words > {_MEM_WRAP}")
    for k, (size, _) in enumerate(dims[:-1]):
        if size > _MEM_WRAP:
            problems.append(f"dimension {k} size {size} > {_MEM_WRAP}")
    for k, (_, stride) in enumerate(dims):
        if words(stride) > _MEM_STEP:
            problems.append(f"dimension {k} step {words(stride)} words > {_MEM_STEP}")
    return problems


def _check_memtile_dims(op: str, p: Plan, dev: Device) -> None:
    """The memory tile's read of ``[K_blk | V_blk]`` within its descriptor fields.

    Raises:
        legality.LegalityError: A size or step is past the memory tile's
            10-bit wrap or 17-bit step (in 32-bit words).
    """
    problems = _memtile_dim_problems(p, dev)
    if problems:
        raise legality.LegalityError(
            f"{op} on {dev}: {legality.Tile(0, _MEM_ROW)}: the read of @kv_0 "
            f"(dimensionsToStream {[list(d) for d in _kv_dims(p)]}) breaks the "
            f"memory tile's descriptor limits: " + "; ".join(problems) + "; use a "
            "smaller max_len or head_dim"
        )


def _split(count: int, dev: Device) -> tuple[int, int]:
    """``(a, b)``, ``a b = count``: ``b`` the largest whole-word run within a wrap."""
    wrap = (1 << dev.dma_size_bits) - 1
    most = wrap * dev.dma_granule_bytes // _ITEM
    b = next(
        (
            d
            for d in range(min(count, most), 0, -1)
            if count % d == 0 and (d * _ITEM) % dev.dma_granule_bytes == 0
        ),
        count,
    )
    return count // b, b


def _kv_walks(
    p: Plan, col: int, where: Mapping[str, tuple[str, int]], dev: Device
) -> list[tuple[str, int, tuple, tuple]]:
    """``(argument, offset, sizes, strides)`` moving column ``col``'s K and V.

    In the core's order: per kv head, per pass, per span ``[K_blk | V_blk]``.
    """
    (karg, kb), (varg, vb) = where["k_cache"], where["v_cache"]
    L, D, blk = p.max_len, p.head_dim, p.block
    starts = [  # each span's first element within a cache
        (col * p.hpc + j) * L * D + s * blk
        for j in range(p.hpc)
        for _ in range(p.passes)
        for s in range(p.spans)
    ]
    if p.dist is None:
        walk = linear_walk(blk, _ITEM, dev)
        return [
            w for s in starts for w in ((karg, kb + s, *walk), (varg, vb + s, *walk))
        ]
    runs: list[list[int]] = []  # [first, spans] of contiguous spans
    for s in starts:
        if runs and runs[-1][0] + runs[-1][1] * blk == s:
            if runs[-1][1] < dev.dma_iteration_max:
                runs[-1][1] += 1
                continue
        runs.append([s, 1])
    a, b = _split(blk, dev)
    return [
        (
            karg,
            kb + s,
            (n, 2, a, b),
            (blk if n > 1 else 0, p.dist, b if a > 1 else 0, 1),
        )
        for s, n in runs
    ]


def _streaming(p: Plan) -> str:
    """One line saying how K and V stream (a comment in the design)."""
    span = f"spans of {p.span} chunk{'s' * (p.span > 1)} of {p.kv_tile} positions"
    how = (
        f"one descriptor alternates k_cache and v_cache ({p.dist} elements apart)"
        if p.dist is not None
        else "two descriptors a span (k_cache, then v_cache)"
    )
    if p.resident:
        rep = "whole kv heads resident in the memory tile"
        if p.q_tiles > 1:
            rep += f", each read {p.q_tiles} times (repeat_count)"
    else:
        rep = "the shim sends each kv head " + (
            f"{p.passes} times (once a query tile)" if p.passes > 1 else "once"
        )
    return f"K and V stream in {span}; {how}; {rep}"
