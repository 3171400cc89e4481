"""The schedule of the attention design of :mod:`.attention`, and its layout.

This module owns the :class:`AttentionSchedule` (the design's sizes, in the
notation of :mod:`.attention`, and the span chosen), what decides the span
(the candidates in order of preference, whether one shim descriptor can
alternate ``k_cache`` and ``v_cache``, their pairing, the memory tile's write
of a span chunk by chunk and its descriptor checks, the shim walks of K and
V), and where a schedule puts things: its object FIFOs and the shim each
input stream leaves from, the walks of the query tiles and results, every
shim transfer in the order the runtime sequence issues it, the memory tiles'
FIFO bytes (:func:`memtile_bytes`), the core terms the operator's ``check``
does not count, and the fix a refused schedule's error names.
:mod:`.attention` chooses among the candidates and emits the design.

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

With ``m > 1`` the memory tile writes each arriving ``[K_blk | V_blk]``
element chunk by chunk, interleaved (``dimensionsFromStream [2, m, T, D]`` on
``kv_in``), and ``kv`` reads it in order; a write whose sizes or steps are
past the memory tile's 10-bit wrap or 17-bit step (in 32-bit words) is
refused, naming the fix.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping

from iron.core.device import Device
from iron.core.dma import linear_walk
from iron.operators import CausalAttention, DecodeAttention
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Words, registered
from iron.runtime.npu.designs.sequence import (
    word_slots,
    words_fifo,
    words_transfer,
)

__all__ = [
    "CORE_ROW",
    "ITEM",
    "MEM_ROW",
    "AttentionSchedule",
    "base_sizes",
    "candidates",
    "check_core_memory",
    "check_memtile_dims",
    "fix_hint",
    "kv_dims",
    "kv_features",
    "kv_group",
    "kv_pushes",
    "kv_repeat",
    "layout_of",
    "memtile_bytes",
    "memtile_dim_problems",
    "pairing",
    "streaming",
]

ITEM = 2  # bf16
_WORD = 4  # i32, f32
CORE_ROW = 2
MEM_ROW = 1
#: A memory tile's buffer-descriptor wrap (10 bits) and step (17 bits), in words.
_MEM_WRAP = (1 << 10) - 1
_MEM_STEP = 1 << 17

#: Each operator's per-call parameter (its word, or its fixed value).
_PER_CALL: dict[type, str] = {DecodeAttention: "length", CausalAttention: "start"}


@dataclasses.dataclass(frozen=True)
class AttentionSchedule:
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
        depth: Depth of every other FIFO: the operator's ``fifo_depth``,
            which its ``core_bytes`` counts.
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
    depth: int

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


def base_sizes(
    op: DecodeAttention | CausalAttention, dev: Device, words: Words | None
) -> dict:
    """The schedule's fields that do not depend on how K and V stream."""
    causal = isinstance(op, CausalAttention)
    param = registered(op, _PER_CALL)
    if param is None:
        raise KeyError(f"{type(op).__name__} is not an attention operator")
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
        rows=op.rows if isinstance(op, CausalAttention) else 1,
        q_tile=op.q_tile if isinstance(op, CausalAttention) else 1,
        kv_tile=op.kv_tile,
        columns=n,
        param=param,
        slot=slots.get(param),
        value=0 if slots else int(getattr(op, param)),
        count=count,
        group=group,
        depth=op.fifo_depth,
    )


def pairing(
    where: Mapping[str, tuple[str, int]], dev: Device
) -> tuple[int | None, str]:
    """The K-to-V distance one shim descriptor can step by, or None and why not."""
    (karg, kb), (varg, vb) = where["k_cache"], where["v_cache"]
    if karg != varg:
        return None, "k_cache and v_cache are separate arguments"
    dist = vb - kb
    words = dist * ITEM // dev.dma_granule_bytes
    if dist <= 0:
        return None, f"v_cache is {-dist} elements before k_cache in {karg}"
    if (dist * ITEM) % dev.dma_granule_bytes or words > 1 << dev.dma_stride_bits:
        return None, (
            f"v_cache is {words} words after k_cache in {karg}, past the shim's "
            f"{dev.dma_stride_bits}-bit step (<= {1 << dev.dma_stride_bits} words)"
        )
    return dist, ""


def candidates(base: dict, dist: int | None) -> list[AttentionSchedule]:
    """Plans in order of preference (see the module docstring: the span)."""
    chunks = base["max_len"] // base["kv_tile"]
    spans = [m for m in range(1, chunks + 1) if chunks % m == 0]
    if dist is None:
        spans.reverse()  # two descriptors a span: the fewest spans
    return [
        AttentionSchedule(**base, span=m, dist=dist, kv_depth=depth)
        for m in spans
        for depth in (2, 1)
    ]


def kv_dims(p: AttentionSchedule) -> tuple[tuple[int, int], ...]:
    """``dimensionsFromStream`` of ``kv_in_<c>`` on its memory tile, or none.

    The shim sends a span as ``[K_blk | V_blk]`` (K's ``m`` chunks, then V's);
    the memory tile writes it interleaved, ``[K_0 | V_0 | K_1 | V_1 | ...]``
    (sizes ``[2, m, T, D]``, strides ``[T D, 2 T D, D, 1]``), so the linked
    ``kv_<c>`` reads it in order, ``[K_t | V_t]`` an element. Empty when a
    span is one chunk (the element arrives as ``[K_t | V_t]``).
    """
    D, T = p.head_dim, p.kv_tile
    if p.span == 1:
        return ()
    return ((2, T * D), (p.span, 2 * T * D), (T, D), (D, 1))


def kv_features(p: AttentionSchedule) -> tuple[frozenset[str], frozenset[str]]:
    """The object-FIFO features of ``kv_in_<c>`` and of ``kv_<c>``.

    ``kv_in_<c>`` is the input of a one-to-one link and ``kv_<c>`` its output
    (:data:`~iron.runtime.npu.legality.FIFO_FEATURES`); with spans of several
    chunks their elements differ in size (``resize``), ``kv_in_<c>`` is
    written through :func:`kv_dims` and, when a resident head is read once a
    query tile, ``kv_<c>`` repeats it (``repeat``). Each is a combination
    mlir-aie v1.4.1 tests (:data:`~iron.runtime.npu.legality.TESTED_FIFO_FEATURES`).
    """
    kv_in, kv = {"link_in"}, {"link_out"}
    if p.span > 1:
        kv_in |= {"resize", "dims_from_stream"}
        kv |= {"resize"}
    if kv_repeat(p) > 1:
        kv.add("repeat")
    return frozenset(kv_in), frozenset(kv)


def kv_repeat(p: AttentionSchedule) -> int:
    """How many times the memory tile sends each ``kv_in`` element to the core."""
    return p.q_tiles if p.resident else 1


def memtile_dim_problems(p: AttentionSchedule, dev: Device) -> list[str]:
    """How the memory tile's write of a span breaks its descriptor fields."""
    words = lambda n: n * ITEM // dev.dma_granule_bytes  # noqa: E731
    dims = kv_dims(p)
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


def check_memtile_dims(op: str, p: AttentionSchedule, dev: Device) -> None:
    """The memory tile's write of ``[K_blk | V_blk]`` within its descriptor fields.

    Raises:
        legality.LegalityError: A size or step is past the memory tile's
            10-bit wrap or 17-bit step (in 32-bit words).
    """
    problems = memtile_dim_problems(p, dev)
    if problems:
        raise legality.LegalityError(
            f"{op} on {dev}: {legality.Tile(0, MEM_ROW)}: the write of @kv_in_0 "
            f"(dimensionsFromStream {[list(d) for d in kv_dims(p)]}) breaks the "
            f"memory tile's descriptor limits: " + "; ".join(problems) + "; use a "
            "smaller max_len or head_dim"
        )


def _split(count: int, dev: Device) -> tuple[int, int]:
    """``(a, b)``, ``a b = count``: ``b`` the largest whole-word run within a wrap."""
    wrap = (1 << dev.dma_size_bits) - 1
    most = wrap * dev.dma_granule_bytes // ITEM
    b = next(
        (
            d
            for d in range(min(count, most), 0, -1)
            if count % d == 0 and (d * ITEM) % dev.dma_granule_bytes == 0
        ),
        count,
    )
    return count // b, b


def _kv_walks(
    p: AttentionSchedule, col: int, where: Mapping[str, tuple[str, int]], dev: Device
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
        walk = linear_walk(blk, ITEM, dev)
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


def streaming(p: AttentionSchedule) -> str:
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


def memtile_bytes(
    p: AttentionSchedule, dev: Device
) -> dict[legality.Tile, dict[str, int]]:
    """Each memory tile's FIFO bytes by FIFO (element bytes times depth)."""
    out: dict[legality.Tile, dict[str, int]] = defaultdict(dict)
    for f in _fifos(p, dev):
        for end in (f.producer, *f.consumers):
            if end.kind == "mem":
                out[end][f.name] = f.depth * f.element_bytes
    return dict(out)


def _shim_of(p: AttentionSchedule, dev: Device) -> dict[str, int]:
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


def _fifos(p: AttentionSchedule, dev: Device) -> list[legality.Fifo]:
    shim_of = _shim_of(p, dev)
    D, T = p.head_dim, p.kv_tile
    fifos = []
    kv_in_features, kv_features_ = kv_features(p)
    for c in range(p.columns):
        core, mem = legality.Tile(c, CORE_ROW), legality.Tile(c, MEM_ROW)
        fifos += [
            legality.Fifo(
                f"kv_in_{c}",
                legality.Tile(c, 0),
                (mem,),
                p.kv_depth,
                2 * p.block,
                features=kv_in_features,
            ),
            legality.Fifo(
                f"kv_{c}", mem, (core,), p.depth, 2 * T * D, features=kv_features_
            ),
        ]
        if not p.count:
            fifos.append(
                legality.Fifo(
                    f"q_{c}", legality.Tile(c, 0), (core,), p.depth, p.q_elems
                )
            )
        fifos.append(
            legality.Fifo(f"out_{c}", core, (legality.Tile(c, 0),), p.depth, p.q_elems)
        )
    if p.count:
        G = p.group
        for q in range(p.columns // G):
            mem = legality.Tile(q * G, MEM_ROW)
            cores = tuple(legality.Tile(q * G + k, CORE_ROW) for k in range(G))
            shim = legality.Tile(shim_of[f"q_in_{q}"], 0)
            wshim = legality.Tile(shim_of[f"words_{q}"], 0)
            join_in = frozenset({"join_in"})
            fifos += [
                legality.Fifo(
                    f"q_in_{q}",
                    shim,
                    (mem,),
                    p.depth,
                    G * p.q_elems // 2,
                    4,
                    features=join_in,
                ),
                dataclasses.replace(
                    words_fifo(q, wshim, mem, p.count), features=join_in
                ),
                legality.Fifo(
                    f"qw_{q}",
                    mem,
                    cores,
                    p.depth,
                    G * p.q_elems // 2 + p.count,
                    4,
                    features=frozenset({"join_out"}),
                ),
            ]
    return fifos


def check_core_memory(
    op: DecodeAttention | CausalAttention, p: AttentionSchedule, dev: Device
) -> None:
    """The core's memory by the operator's own account, with this schedule's terms.

    One account: ``op.core_bytes`` (the sum the operator's ``check`` and
    ``resolve`` use) given the scratchpad words each query element carries
    and whether columns are paired.

    Raises:
        legality.LegalityError: Past a core's data memory (the terms named).
    """
    need = op.core_bytes(p.q_tile, p.kv_tile, words=p.count, pair=p.group)
    if need <= dev.core_memory_bytes:
        return
    words = p.depth * p.count * _WORD
    partner = p.depth * (p.group - 1) * p.q_elems * ITEM
    fix = "use a smaller kv_tile" + (" or q_tile" if p.causal else "")
    if partner:
        fix += (
            f", or num_aie_columns={dev.columns * 2 // 3} or fewer so each column "
            f"has its own query element"
        )
    raise legality.LegalityError(
        f"{op!r} on {dev}: {legality.Tile(0, CORE_ROW)}: needs {need} bytes of "
        f"core memory, {words} of them scratchpad words and {partner} the partner "
        f"column's query tile (double-buffered query elements); a core has "
        f"{dev.core_memory_bytes}; {fix}"
    )


def _q_walks(
    p: AttentionSchedule, col: int, base: int, dev: Device
) -> list[tuple[int, tuple, tuple]]:
    """``(offset, sizes, strides)`` moving column ``col``'s query (or result) tiles.

    Element ``(j, qt)``: token rows ``qt Q .. qt Q + Q - 1`` of the ``g``
    heads of kv head ``col * hpc + j``, each row ``g D`` contiguous.
    """
    H, D, g, Q = p.heads, p.head_dim, p.g, p.q_tile
    first = base + col * p.hpc * g * D
    if p.q_tiles == 1 and Q == 1:
        return [(first, *linear_walk(p.hpc * g * D, ITEM, dev))]
    sizes = (p.hpc, p.q_tiles, Q, g * D)
    strides = (
        g * D if p.hpc > 1 else 0,
        Q * H * D if p.q_tiles > 1 else 0,
        H * D if Q > 1 else 0,
        1,
    )
    return [(first, sizes, strides)]


def _pair_walks(
    p: AttentionSchedule, grp: int, base: int
) -> list[tuple[int, tuple, tuple]]:
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


def layout_of(
    op: DecodeAttention | CausalAttention,
    p: AttentionSchedule,
    dev: Device,
    where: Mapping[str, tuple[str, int]],
    *,
    waited: bool = False,
) -> legality.Layout:
    """The layout of schedule ``p`` with ports at ``where``.

    ``waited``: issue K and V in groups with waits between them (see
    :func:`kv_groups`) rather than every transfer up front; a long cache's
    descriptors then never outnumber the shim's or a channel's task queue.
    """
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
                ITEM,
                len(per_shim[shim]),
                token=waited and fifo.startswith("out_"),
            )
        )

    for c in range(p.columns):
        arg, base = where["out"]
        for off, sizes, strides in _q_walks(p, c, base, dev):
            send(f"out_{c}", c, arg, off, sizes, strides)
    if waited:
        return _waited_layout(op, p, dev, where, fifos, per_shim, send)
    for c in range(p.columns):
        for arg, off, sizes, strides in _kv_walks(p, c, where, dev):
            send(f"kv_in_{c}", c, arg, off, sizes, strides)
        if not p.count:
            arg, base = where["q"]
            for off, sizes, strides in _q_walks(p, c, base, dev):
                send(f"q_{c}", c, arg, off, sizes, strides)
    _send_query_words(p, dev, where, shim_of, per_shim, send)
    return _layout(
        op, p, dev, fifos, [t for s in sorted(per_shim) for t in per_shim[s]]
    )


def kv_group(dev: Device) -> int:
    """K/V transfers a column issues between waits in a waited layout.

    Half a shim channel's task queue (``legality.TileLimits.task_queue``,
    4): a group is issued while the one before it still runs, so the
    channel always has work queued and never more than the queue holds (a
    push onto a full queue is dropped by the hardware, mlir-aie PR #3734).
    """
    return legality.TILE_LIMITS[dev.arch].task_queue // 2


def kv_pushes(layout: legality.Layout) -> int:
    """The most K/V transfers one ``kv_in`` FIFO has issued between waits."""
    if layout.waits:
        return 0  # the waited layout is held to the queue by legality.check
    counts: dict[str, int] = defaultdict(int)
    for t in layout.transfers:
        if t.fifo.startswith("kv_in_"):
            counts[t.fifo] += 1
    return max(counts.values(), default=0)


def _waited_layout(op, p, dev, where, fifos, per_shim, send) -> legality.Layout:
    """K and V in groups of :func:`kv_group` transfers, each awaited a group later.

    The results' drains (each issuing a token) are issued first, then the
    query tiles and words, so a core never waits for its query while its K
    and V queue behind a wait. Then, round by round, every column issues its
    next group (buffer descriptor ids alternating between two sets past the
    ids the drains and queries hold for the whole call; the group's last
    transfer issues a token) and the sequence waits on each column's group
    of the round before, which frees that set for the next round. Last, it
    waits on the groups still running and on every drain. However long the
    cache, a shim holds at most ``2 * kv_group`` K/V descriptors and a
    channel queues at most its four tasks.
    """
    shim_of = _shim_of(p, dev)
    if not p.count:
        for c in range(p.columns):
            arg, base = where["q"]
            for off, sizes, strides in _q_walks(p, c, base, dev):
                send(f"q_{c}", c, arg, off, sizes, strides)
    _send_query_words(p, dev, where, shim_of, per_shim, send)
    order = [t for s in sorted(per_shim) for t in per_shim[s]]
    held = {s: len(ts) for s, ts in per_shim.items()}  # ids in use all call
    size = kv_group(dev)
    groups = {}
    for c in range(p.columns):
        walks = _kv_walks(p, c, where, dev)
        groups[c] = [walks[i : i + size] for i in range(0, len(walks), size)]
    waits: list[tuple[int, str]] = []
    running: list[str] = []  # FIFOs whose last group is not awaited yet
    for r in range(max(len(g) for g in groups.values())):
        issued = []
        for c in range(p.columns):
            if r >= len(groups[c]):
                continue
            group = groups[c][r]
            first = held.get(c, 0) + (r % 2) * size
            for i, (arg, off, sizes, strides) in enumerate(group):
                order.append(
                    legality.Transfer(
                        f"kv_in_{c}",
                        legality.Tile(c, 0),
                        arg,
                        off,
                        tuple(sizes),
                        tuple(strides),
                        ITEM,
                        first + i,
                        token=i == len(group) - 1,
                    )
                )
            issued.append(f"kv_in_{c}")
        waits += [(len(order), f) for f in running]
        running = issued
    waits += [(len(order), f) for f in running]
    waits += [(len(order), f"out_{c}") for c in range(p.columns)]
    return _layout(op, p, dev, fifos, order, tuple(waits))


def _send_query_words(p, dev, where, shim_of, per_shim, send) -> None:
    """The query tiles and scratchpad words of a design reading a per-call value."""
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


def _layout(
    op: DecodeAttention | CausalAttention,
    p: AttentionSchedule,
    dev: Device,
    fifos: list[legality.Fifo],
    transfers: list[legality.Transfer],
    waits: tuple[tuple[int, str], ...] = (),
) -> legality.Layout:
    """The layout of ``p``'s cores, FIFOs and ``transfers`` (in issue order)."""
    cores = tuple(legality.Tile(c, CORE_ROW) for c in range(p.columns))
    scratch = (p.q_rows * p.kv_tile + p.q_rows * p.head_dim + 2 * p.q_rows) * _WORD
    return legality.Layout(
        repr(op),
        cores,
        tuple(fifos),
        tuple(transfers),
        # Its cores link the attention kernels (attention.KERNEL_SOURCE).
        legality.core_stack(dev, ("attention_bf16",)),
        buffers=tuple((t, scratch) for t in cores),
        waits=waits,
    )


def fix_hint(
    p: AttentionSchedule, dev: Device, where: Mapping[str, tuple[str, int]]
) -> str:
    """The way out of a refused schedule, for the legality error."""
    if p.dist is not None:
        return (
            f"no span of kv_tile={p.kv_tile}-position chunks fits; use a shorter "
            f"max_len or fewer kv heads a column"
        )
    _, why = pairing(where, dev)
    mem = max(sum(v.values()) for v in memtile_bytes(p, dev).values())
    return (
        f"each kv head streams {p.passes} time(s) in {p.spans} span(s) of "
        f"{p.span} chunks ({mem} bytes in a memory tile), two shim descriptors a "
        f"span because {why}; place k_cache and v_cache in one argument (the "
        f"arena, as a model's plan does) with v_cache after k_cache within "
        f"{1 << dev.dma_stride_bits} words, so one descriptor alternates them, or "
        f"use a shorter max_len"
    )
