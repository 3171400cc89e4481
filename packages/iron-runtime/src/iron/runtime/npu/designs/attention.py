"""Designs for attention over a key/value cache: DecodeAttention and CausalAttention.

Notation: ``n`` columns (``num_aie_columns``), ``hpc = kv_heads / n`` kv heads
per column, ``g = heads / kv_heads`` query heads per kv head, ``D =
head_dim``, ``L = max_len``, ``T = kv_tile``, ``C = L / T`` chunks, ``Q`` the
query tile in token rows (``q_tile``; 1 for decode), ``R`` the token rows (1
for decode), ``Q * g`` the query rows a kernel call takes.

Every kv head is one column's: column ``c`` owns kv heads ``c*hpc ..
c*hpc + hpc - 1`` and its core at row 2 takes them one after another; for each
it takes the ``R / Q`` query tiles in turn and, for each tile, streams the
head's whole cache in ``C`` chunks of ``T`` positions, keeping the running max,
sum and fp32 accumulator (the kernel model of :mod:`iron.operators.attention`).

**The whole cache is streamed.** A shim descriptor is static, so it cannot
depend on a per-call ``length`` or ``start``: every call moves all ``L``
positions of the column's kv heads, and the kernel masks the positions at or
beyond a row's limit (decode: ``length``; causal: ``start + row + 1``) by
selection, so a stale or NaN cache entry there is never read into a result.
A call therefore costs the bandwidth of ``max_len``, not of ``length`` (times
``R / Q`` for causal query tiles when the cache is not resident in the memory
tile, see the span below).

Channels. A core has 2 input DMA channels and a shim 2 MM2S channels per
column, and the core needs four streams (q, K, V and, with a per-call value,
the scratchpad words); with every column computing there is no spare shim.
So K and V share one shim channel, per column ``c``:

* ``kv_in_<c>`` (shim -> memory tile ``(c, 1)``, one shim channel): elements
  ``[K_blk | V_blk]`` of ``2 m T D`` bf16, a *span* of ``m`` chunks of K
  (positions ``g m T .. g m T + m T - 1`` of one kv head) and the matching
  span of V, depth 2 when two fit the memory tile, else 1;
* ``kv_<c>`` (memory tile -> core, linked to ``kv_in_<c>``): the core
  receives ``[K_t | V_t]`` elements of ``2 T D`` bf16, depth 2. With ``m = 1``
  the memory tile forwards its elements as they are; with ``m > 1`` it reads
  each one chunk by chunk with ``dimensionsToStream [m, 2, T, D]`` (strides
  ``[T D, m T D, D, 1]``; an asymmetric producer/consumer element type);
* ``out_<c>`` (core -> shim): ``Q g D`` bf16 results per query tile, depth 2.

The span. Each query tile streams its kv head's whole cache, so with ``R / Q
> 1`` query tiles the cache passes ``R / Q`` times. When a memory-tile element
holds a whole head (``m = C``, *resident*), the memory tile repeats it
(``repeat_count = R / Q``) and the shim sends each head once; otherwise the
shim sends each head's spans once per query tile. The span is chosen, in this
order of preference, as the first that passes legality (memory-tile bytes and
descriptor fields, shim buffer descriptors):

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

The query tile and the scratchpad words share the core's second input:

* without a per-call parameter, ``q_<c>`` (shim -> core): ``Q g D`` bf16 per
  query tile, depth 2;
* with one, the scratchpad convention of :mod:`._common` (``word_slots``,
  ``words_fifo``, ``words_transfer``) with the words joined onto the query
  element in a memory tile: ``q_in_<p>`` (query tiles) and ``words_<p>`` (the
  whole scratchpad, sent once per query element) are joined by
  ``aie.objectfifo.link`` into ``qw_<p>`` = ``[q tiles | words]`` (typed
  ``i32``, the bf16 queries two to a word), depth 2. When ``3 n`` streams fit
  the device's shims (``3 n <= 2 * columns``) each column is its own group
  ``p = c``; otherwise pairs of columns share one group (``qw_<p>`` is
  broadcast to both cores and holds both columns' query tiles, the column's
  at ``(c % 2) Q g D``), which makes ``2 n`` shim streams. The core reads its
  word with ``memref.load`` at ``G Q g D / 2 + slot`` (``G`` columns a
  group), ``slot`` from ``word_slots``.

The core loops forever; per call, for each of its kv heads and query tiles it
acquires the query element (and loads the word), calls
``attention_bf16_init(acc, stats, rows, D)``, then for each chunk ``t``
acquires ``kv_<c>`` and calls ``attention_bf16_chunk(q, kv, scores, acc,
stats, q_offset, rows, g, D, T, t, word, q_index, causal, scale_bits)``, and finally
``attention_bf16_store(acc, stats, out, rows, D)`` into ``out_<c>``. The fp32
scores of a chunk, the accumulator and the running max and sum are core-local
``aie.buffer``s: with the double-buffered K/V and query/result elements that
is exactly what ``_Attention.core_bytes`` counts plus the scratchpad words
and, with paired columns, the partner's query tile (terms the operator's
``check`` does not count: the design refuses, naming them, when they do not
fit). The operator counts no memory-tile term; the design's is the
``kv_in`` elements plus the ``q_in``, ``words`` and ``qw`` elements
(:func:`memtile_bytes`).

The runtime sequence per shim drains ``out`` (buffer descriptor 0), then
sends K and V (as above), the query tiles (one descriptor, or one per kv head
for paired causal tiles) and the words (the iteration dimension repeats them
once per query element), from host buffers or from the arena at the planned
offsets, then waits on every ``out``.

mlir-aie syntax beyond :mod:`iron.runtime.npu.mlir` (emitted by local helpers
here; they could move into the Builder), from the pinned era's tests in
Xilinx/mlir-aie:

* [link_join] ``aie.objectfifo.link [@a, @b] -> [@c]([0, n] [])``:
  test/objectFifo-stateful-transform/bd_chain_on_memtile/join_with_iterations.mlir;
* [dims_link] ``aie.objectfifo @x(%mem_tile dimensionsToStream [<size = s,
  stride = t>, ...], {%tile}, 2 : i32)`` and ``aie.objectfifo.link [@in] ->
  [@x]([] [])``: the memtile tests of the same era (e.g. a ``memA``/``memX``
  link from a shim FIFO);
* [repeat] ``{repeat_count = N : i32}`` after the FIFO's operands:
  test/objectFifo-stateful-transform/bd_chain_on_memtile/bd_chain_with_repeat_count.mlir;
* [asym] ``: !aie.objectfifo<memref<big>> -> !aie.objectfifo<memref<small>>``:
  test/objectFifo-stateful-transform/asymmetric_element_type/asymmetric_element_type.mlir.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Mapping

import numpy as np

from iron.core.device import Device
from iron.runtime.image import Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design, Words, linear_walk
from iron.runtime.npu.designs._common import (
    _design,
    _runtime_sequence,
    _sequence_args,
    word_slots,
    words_fifo,
    words_transfer,
)
from iron.runtime.npu.mlir import (
    INDEX_MAX,
    MLIR_AIE_RELEASE,
    Builder,
    memref,
    objectfifo_type,
)

__all__ = [
    "FAMILY",
    "KERNEL_SOURCE",
    "SYMBOLS",
    "Plan",
    "build",
    "handles",
    "layout",
    "memtile_bytes",
    "scale_bits",
]

_ITEM = 2  # bf16
_WORD = 4  # i32, f32
_DEPTH = 2  # double-buffered, as _Attention.core_bytes counts them
_CORE_ROW = 2
_MEM_ROW = 1
#: A memory tile's buffer-descriptor wrap (10 bits) and step (17 bits), in words.
_MEM_WRAP = (1 << 10) - 1
_MEM_STEP = 1 << 17

#: The operators this module designs.
FAMILY = ("DecodeAttention", "CausalAttention")

#: The kernel source (``<KERNEL_SOURCE>.cc``, linked as ``<KERNEL_SOURCE>.o``).
KERNEL_SOURCE = "attention_bf16"

#: The kernel symbols: (init, chunk, store).
SYMBOLS = ("attention_bf16_init", "attention_bf16_chunk", "attention_bf16_store")

#: The int32 arguments of ``attention_bf16_chunk`` after its five buffers.
_CHUNK_SCALARS = 10

#: Each operator's per-call parameter (its word, or its fixed value).
_PER_CALL = {"DecodeAttention": "length", "CausalAttention": "start"}


def scale_bits(head_dim: int) -> int:
    """The int32 bits of fp32 ``1/sqrt(head_dim)``, the reference's scale."""
    scale = np.float32(1.0 / math.sqrt(head_dim))
    return int(np.asarray(scale).view(np.int32))


def handles(op: object) -> bool:
    """Whether ``op`` is DecodeAttention or CausalAttention."""
    return type(op).__name__ in FAMILY


@dataclasses.dataclass(frozen=True)
class Plan:
    """The sizes of one design (see the module docstring for the names).

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


def _base(op: object, dev: Device, words: Words | None) -> dict:
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


def memtile_bytes(p: Plan, dev: Device) -> dict[legality.Tile, dict[str, int]]:
    """Each memory tile's FIFO bytes by FIFO (element bytes times depth)."""
    out: dict[legality.Tile, dict[str, int]] = defaultdict(dict)
    for f in _fifos(p, dev):
        for end in (f.producer, *f.consumers):
            if end.kind == "mem":
                out[end][f.name] = f.depth * f.element_bytes
    return dict(out)


def _shim_of(p: Plan, dev: Device) -> dict[str, int]:
    """Which shim column each input stream's FIFO leaves from."""
    shim = {}
    n, G = p.columns, p.group
    for c in range(n):
        shim[f"kv_in_{c}"] = c
        if not p.count:
            shim[f"q_{c}"] = c
    if p.count and G == 1:
        for c in range(n):
            shim[f"q_in_{c}"] = c
            shim[f"words_{c}"] = n + c // 2  # the spare shims' channels
    elif p.count:
        for q in range(n // G):
            shim[f"q_in_{q}"] = q * G
            shim[f"words_{q}"] = q * G + 1
    return shim


def _fifos(p: Plan, dev: Device) -> list[legality.Fifo]:
    shim_of = _shim_of(p, dev)
    D, T = p.head_dim, p.kv_tile
    fifos = []
    for c in range(p.columns):
        core, mem = legality.Tile(c, _CORE_ROW), legality.Tile(c, _MEM_ROW)
        fifos += [
            legality.Fifo(
                f"kv_in_{c}", legality.Tile(c, 0), (mem,), p.kv_depth, 2 * p.block
            ),
            legality.Fifo(f"kv_{c}", mem, (core,), _DEPTH, 2 * T * D),
        ]
        if not p.count:
            fifos.append(
                legality.Fifo(f"q_{c}", legality.Tile(c, 0), (core,), _DEPTH, p.q_elems)
            )
        fifos.append(
            legality.Fifo(f"out_{c}", core, (legality.Tile(c, 0),), _DEPTH, p.q_elems)
        )
    if p.count:
        G = p.group
        for q in range(p.columns // G):
            mem = legality.Tile(q * G, _MEM_ROW)
            cores = tuple(legality.Tile(q * G + k, _CORE_ROW) for k in range(G))
            shim = legality.Tile(shim_of[f"q_in_{q}"], 0)
            wshim = legality.Tile(shim_of[f"words_{q}"], 0)
            fifos += [
                legality.Fifo(f"q_in_{q}", shim, (mem,), _DEPTH, G * p.q_elems // 2, 4),
                words_fifo(q, wshim, mem, p.count),
                legality.Fifo(
                    f"qw_{q}", mem, cores, _DEPTH, G * p.q_elems // 2 + p.count, 4
                ),
            ]
    return fifos


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


def _check_core_memory(op: object, p: Plan, dev: Device) -> None:
    """The core terms the operator's ``check`` does not count, named.

    Raises:
        legality.LegalityError: The operator's ``core_bytes`` plus the
            scratchpad words and the partner's query tile in each query
            element (double-buffered) are past a core's data memory.
    """
    counted = op.core_bytes(p.q_tile, p.kv_tile)
    words = _DEPTH * p.count * _WORD
    partner = _DEPTH * (p.group - 1) * p.q_elems * _ITEM
    if counted + words + partner <= dev.core_memory_bytes:
        return
    fix = "use a smaller kv_tile" + (" or q_tile" if p.causal else "")
    if partner:
        fix += (
            f", or num_aie_columns={dev.columns * 2 // 3} or fewer so each column "
            f"has its own query element"
        )
    raise legality.LegalityError(
        f"{op!r} on {dev}: {legality.Tile(0, _CORE_ROW)}: the operator counts "
        f"{counted} bytes of core memory; the design adds {words} bytes of "
        f"scratchpad words and {partner} bytes of the partner column's query tile "
        f"(double-buffered query elements), {counted + words + partner} bytes in "
        f"all; a core has {dev.core_memory_bytes}; {fix}"
    )


def _q_walks(
    p: Plan, col: int, base: int, dev: Device
) -> list[tuple[int, tuple, tuple]]:
    """``(offset, sizes, strides)`` moving column ``col``'s query (or result) tiles.

    Element ``(j, qt)``: token rows ``qt Q .. qt Q + Q - 1`` of the ``g``
    heads of kv head ``col * hpc + j``, each row ``g D`` contiguous.
    """
    H, D, g, Q = p.heads, p.head_dim, p.g, p.q_tile
    first = base + col * p.hpc * g * D
    if p.q_tiles == 1 and Q == 1:
        return [(first, *linear_walk(p.hpc * g * D, _ITEM, dev))]
    sizes = (p.hpc, p.q_tiles, Q, g * D)
    strides = (
        g * D if p.hpc > 1 else 0,
        Q * H * D if p.q_tiles > 1 else 0,
        H * D if Q > 1 else 0,
        1,
    )
    return [(first, sizes, strides)]


def _pair_walks(p: Plan, grp: int, base: int) -> list[tuple[int, tuple, tuple]]:
    """Query tiles of both columns of pair ``grp``, element ``(j, qt)`` each."""
    H, D, g, Q = p.heads, p.head_dim, p.g, p.q_tile
    first = base + 2 * grp * p.hpc * g * D
    other = p.hpc * g * D  # the second column's heads
    if p.q_tiles == 1:
        sizes = (p.hpc, 2, Q, g * D)
        strides = (g * D if p.hpc > 1 else 0, other, H * D if Q > 1 else 0, 1)
        return [(first, sizes, strides)]
    sizes = (p.q_tiles, 2, Q, g * D)
    strides = (Q * H * D, other, H * D if Q > 1 else 0, 1)
    return [(first + j * g * D, sizes, strides) for j in range(p.hpc)]


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


def _layout_of(
    op: object, p: Plan, dev: Device, where: Mapping[str, tuple[str, int]]
) -> legality.Layout:
    """The layout of plan ``p`` with ports at ``where``."""
    fifos = _fifos(p, dev)
    shim_of = _shim_of(p, dev)
    per_shim: dict[int, list[legality.Transfer]] = defaultdict(list)

    def send(fifo: str, shim: int, arg: str, offset: int, sizes, strides):
        per_shim[shim].append(
            legality.Transfer(
                fifo,
                legality.Tile(shim, 0),
                arg,
                offset,
                tuple(sizes),
                tuple(strides),
                _ITEM,
                len(per_shim[shim]),
            )
        )

    for c in range(p.columns):
        arg, base = where["out"]
        for off, sizes, strides in _q_walks(p, c, base, dev):
            send(f"out_{c}", c, arg, off, sizes, strides)
    for c in range(p.columns):
        for arg, off, sizes, strides in _kv_walks(p, c, where, dev):
            send(f"kv_in_{c}", c, arg, off, sizes, strides)
        if not p.count:
            arg, base = where["q"]
            for off, sizes, strides in _q_walks(p, c, base, dev):
                send(f"q_{c}", c, arg, off, sizes, strides)
    if p.count:
        elements = p.hpc * p.q_tiles  # query elements per call, each with words
        for grp in range(p.columns // p.group):
            arg, base = where["q"]
            walks = (
                _q_walks(p, grp, base, dev)
                if p.group == 1
                else _pair_walks(p, grp, base)
            )
            for off, sizes, strides in walks:
                send(f"q_in_{grp}", shim_of[f"q_in_{grp}"], arg, off, sizes, strides)
            wshim = shim_of[f"words_{grp}"]
            for start in range(0, elements, dev.dma_iteration_max):
                reps = min(dev.dma_iteration_max, elements - start)
                t = words_transfer(
                    grp, legality.Tile(wshim, 0), p.count, len(per_shim[wshim])
                )
                per_shim[wshim].append(
                    dataclasses.replace(
                        t, sizes=(reps, 1, 1, p.count), strides=(0, 0, 0, 1)
                    )
                )
    transfers = [t for s in sorted(per_shim) for t in per_shim[s]]
    cores = tuple(legality.Tile(c, _CORE_ROW) for c in range(p.columns))
    scratch = (p.q_rows * p.kv_tile + p.q_rows * p.head_dim + 2 * p.q_rows) * _WORD
    return legality.Layout(
        repr(op),
        cores,
        tuple(fifos),
        tuple(transfers),
        buffers=tuple((t, scratch) for t in cores),
    )


def layout(
    op: object,
    dev: Device,
    where: Mapping[str, tuple[str, int]] | None = None,
    words: Words | None = None,
) -> tuple[legality.Layout, Plan]:
    """What the design of resolved ``op`` places on ``dev``, and its plan.

    ``where`` maps each port to ``(argument, element offset)``; by default
    each port is its own buffer at offset 0. The plan is the first candidate
    (see the module docstring: the span) that passes legality; when none
    does, the preferred one among those whose memory tiles fit (else the
    first), which :func:`build` then refuses by name.
    """
    base = _base(op, dev, words)
    where = dict(where or {x: (x, 0) for x in ("q", "k_cache", "v_cache", "out")})
    dist, _ = _pairing(where, dev)
    fallback = None
    for p in _candidates(base, dist):
        lay = _layout_of(op, p, dev, where)
        fits = not _memtile_dim_problems(p, dev) and all(
            sum(v.values()) <= dev.mem_tile_bytes
            for v in memtile_bytes(p, dev).values()
        )
        try:
            legality.check(lay, dev)
        except legality.LegalityError:
            passed = False
        else:
            passed = True
        if passed and fits:
            return lay, p
        if fallback is None or (fits and not fallback[2]):
            fallback = (lay, p, fits)
    assert fallback is not None
    return fallback[0], fallback[1]


def _fifo_line(
    name: str,
    prod: str,
    cons: list[str],
    depth: int,
    elem: str,
    *,
    dims: tuple[tuple[int, int], ...] = (),
    repeat: int = 1,
    cons_elem: str | None = None,
) -> str:
    """An ``aie.objectfifo`` with dims [dims_link], repeat [repeat] and an
    asymmetric consumer element [asym]."""
    to_stream = ""
    if dims:
        to_stream = (
            " dimensionsToStream ["
            + ", ".join(f"<size = {s}, stride = {t}>" for s, t in dims)
            + "]"
        )
    attrs = f" {{repeat_count = {repeat} : i32}}" if repeat > 1 else ""
    ty = objectfifo_type(elem)
    if cons_elem:
        ty += " -> " + objectfifo_type(cons_elem)
    return (
        f"aie.objectfifo @{name}({prod}{to_stream}, {{{', '.join(cons)}}}, "
        f"{depth} : i32){attrs} : {ty}"
    )


def _link_line(ins: list[str], outs: list[str], in_offsets: list[int]) -> str:
    """``aie.objectfifo.link [@ins] -> [@outs]([offsets] [])`` [link_join]."""
    a = ", ".join("@" + i for i in ins)
    z = ", ".join("@" + o for o in outs)
    offs = ", ".join(str(o) for o in in_offsets)
    return f"aie.objectfifo.link [{a}] -> [{z}]([{offs}] [])"


def build(
    op: object,
    dev: Device,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
    words: Words | None = None,
) -> Design:
    """The design of an attention ``op`` on ``dev`` (see the module docstring).

    Raises:
        iron.runtime.npu.legality.LegalityError: A device limit is broken.
        iron.core.operator.RefusedShapeError: The operator refuses ``dev``.
        ValueError: A placement is too small, misplaced, or names no port; a
            per-call parameter has no slot in ``words``.
    """
    op = op.resolved(dev)
    op.check(dev)
    p0 = _base(op, dev, words)
    H, D, R = op.heads, op.head_dim, (op.rows if p0["causal"] else 1)
    cache = op.kv_heads * op.max_len * D * _ITEM
    need = {
        "q": R * H * D * _ITEM,
        "k_cache": cache,
        "v_cache": cache,
        "out": R * H * D * _ITEM,
    }
    args, where = _sequence_args(
        op, need, placement, arena_bytes, unit=_ITEM, words=p0["count"]
    )
    lay, p = layout(op, dev, where, words)
    _check_core_memory(op, p, dev)
    try:
        legality.check(lay, dev)
    except legality.LegalityError as e:
        raise legality.LegalityError(f"{e}; {_fix(p, dev, where)}") from None
    _check_memtile_dims(repr(op), p, dev)

    n, T, L = p.columns, p.kv_tile, p.max_len
    kv_t, big_t = memref(2 * T * D), memref(2 * p.block)
    qel = p.q_elems
    q_t = memref(p.group * qel // 2 + p.count, "i32") if p.count else memref(qel)
    out_t = memref(qel)
    sc_t, acc_t = memref(p.q_rows * T, "f32"), memref(p.q_rows * D, "f32")
    st_t = memref(2 * p.q_rows, "f32")
    init, chunk, store = SYMBOLS
    obj = f"{KERNEL_SOURCE}.o"
    chunk_types = [q_t, kv_t, sc_t, acc_t, st_t] + ["i32"] * _CHUNK_SCALARS
    b = Builder()
    b.comment(f"IRON design: {op!r} on {dev.name}; mlir-aie {MLIR_AIE_RELEASE}")
    b.comment(
        f"streams all max_len={L} cache positions per call; the kernel masks "
        f"positions past each row's limit ({p.param})"
    )
    b.comment(_streaming(p))
    with b.region("module"), b.device(dev.name, "main"):
        b.func_decl(init, [acc_t, st_t, "i32", "i32"], obj)
        b.func_decl(chunk, chunk_types, obj)
        b.func_decl(store, [acc_t, st_t, out_t, "i32", "i32"], obj)
        used = sorted({t.shim.col for t in lay.transfers})
        shim_v = {c: b.tile(c, 0, "shim_noc_tile") for c in used}
        mem_v = {c: b.tile(c, _MEM_ROW, "mem_tile") for c in range(n)}
        core_v = {c: b.tile(c, _CORE_ROW) for c in range(n)}

        def tile_of(t: legality.Tile) -> str:
            return {0: shim_v, 1: mem_v}.get(t.row, core_v)[t.col]

        for f in lay.fifos:
            prod = tile_of(f.producer)
            cons = [tile_of(t) for t in f.consumers]
            if f.name.startswith("kv_in_"):
                b.line(_fifo_line(f.name, prod, cons, f.depth, big_t))
            elif f.name.startswith("kv_"):
                c = int(f.name.rsplit("_", 1)[1])
                b.line(
                    _fifo_line(
                        f.name,
                        prod,
                        cons,
                        f.depth,
                        big_t,
                        dims=_kv_dims(p),
                        repeat=p.q_tiles if p.resident else 1,
                        cons_elem=kv_t if p.span > 1 else None,
                    )
                )
                b.line(_link_line([f"kv_in_{c}"], [f.name], []))
            else:
                elem = memref(f.elements, "i32" if f.itemsize == 4 else "bf16")
                b.line(_fifo_line(f.name, prod, cons, f.depth, elem))
                if f.name.startswith("qw_"):
                    grp = f.name.rsplit("_", 1)[1]
                    b.line(
                        _link_line(
                            [f"q_in_{grp}", f"words_{grp}"],
                            [f.name],
                            [0, p.group * qel // 2],
                        )
                    )
        bufs = {
            c: (
                b.buffer(core_v[c], f"scores_{c}", sc_t),
                b.buffer(core_v[c], f"acc_{c}", acc_t),
                b.buffer(core_v[c], f"stats_{c}", st_t),
            )
            for c in range(n)
        }
        for c in range(n):
            with b.core(core_v[c]):
                _core_body(b, p, c, bufs[c], (q_t, kv_t, out_t, sc_t, acc_t, st_t))
                b.end()
        _runtime_sequence(b, args, lay.transfers, ["out"], n)
    return _design(b, op, dev, args, (KERNEL_SOURCE,), lay)


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


def _fix(p: Plan, dev: Device, where: Mapping[str, tuple[str, int]]) -> str:
    """The way out of a refused plan, for the legality error."""
    if p.dist is not None:
        return (
            f"no span of kv_tile={p.kv_tile}-position chunks fits; use a shorter "
            f"max_len or fewer kv heads a column"
        )
    _, why = _pairing(where, dev)
    mem = max(sum(v.values()) for v in memtile_bytes(p, dev).values())
    return (
        f"each kv head streams {p.passes} time(s) in {p.spans} span(s) of "
        f"{p.span} chunks ({mem} bytes in a memory tile), two shim descriptors a "
        f"span because {why}; place k_cache and v_cache in one argument (the "
        f"arena, as a model's plan does) with v_cache after k_cache within "
        f"{1 << dev.dma_stride_bits} words, so one descriptor alternates them, or "
        f"use a shorter max_len"
    )


def _core_body(
    b: Builder,
    p: Plan,
    col: int,
    bufs: tuple[str, str, str],
    types: tuple[str, ...],
) -> None:
    """Column ``col``'s core: forever, per kv head and query tile, init, one
    chunk call per ``kv_<col>`` element, store."""
    q_t, kv_t, out_t, sc_t, acc_t, st_t = types
    scores, acc, stats = bufs
    init, chunk, store = SYMBOLS
    qfifo = p.q_fifo(col)
    c0, c1 = b.constant(0, "index"), b.constant(1, "index")
    forever = b.constant(INDEX_MAX, "index")
    heads = b.constant(p.hpc, "index")
    tiles = b.constant(p.q_tiles, "index")
    chunks = b.constant(p.chunks, "index")
    rows = b.constant(p.q_rows, "i32")
    dim = b.constant(p.head_dim, "i32")
    group = b.constant(p.g, "i32")
    tile = b.constant(p.kv_tile, "i32")
    q_off = b.constant((col % p.group) * p.q_elems if p.count else 0, "i32")
    causal = b.constant(int(p.causal), "i32")
    scale = b.constant(scale_bits(p.head_dim), "i32")
    index = b.constant(p.word_index, "index") if p.count else None
    fixed = None if p.count else b.constant(p.value, "i32")
    with b.for_(c0, forever, c1, "run"):
        with b.for_(c0, heads, c1, "h"):
            with b.for_(c0, tiles, c1, "qt") as qt:
                q = b.acquire(qfifo, "Consume", q_t, "q")
                word = b.load(q, index, q_t, p.param) if p.count else fixed
                qi = b.fresh("q_index")
                b.line(f"{qi} = arith.index_cast {qt} : index to i32")
                b.call(init, [acc, stats, rows, dim], [acc_t, st_t, "i32", "i32"])
                with b.for_(c0, chunks, c1, "t") as t:
                    kv = b.acquire(f"kv_{col}", "Consume", kv_t, "kv")
                    ti = b.fresh("chunk")
                    b.line(f"{ti} = arith.index_cast {t} : index to i32")
                    b.call(
                        chunk,
                        [q, kv, scores, acc, stats, q_off, rows, group, dim, tile]
                        + [ti, word, qi, causal, scale],
                        [q_t, kv_t, sc_t, acc_t, st_t] + ["i32"] * _CHUNK_SCALARS,
                    )
                    b.release(f"kv_{col}", "Consume")
                out = b.acquire(f"out_{col}", "Produce", out_t, "out")
                b.call(
                    store,
                    [acc, stats, out, rows, dim],
                    [acc_t, st_t, out_t, "i32", "i32"],
                )
                b.release(f"out_{col}", "Produce")
                b.release(qfifo, "Consume")
