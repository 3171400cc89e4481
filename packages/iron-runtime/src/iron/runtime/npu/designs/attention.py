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
A call therefore costs the bandwidth of ``max_len``, not of ``length``.

Channels. A core has 2 input DMA channels and a shim 2 MM2S channels per
column, and the core needs four streams (q, K, V and, with a per-call value,
the scratchpad words); with every column computing there is no spare shim.
So, per column ``c``:

* ``kv_in_<c>`` (shim -> memory tile ``(c, 1)``, one shim channel): each
  kv head's K then V (two transfers a head) fill one memory-tile element
  ``[K_h | V_h]`` of ``2 L D`` bf16 (depth 2 when two fit the memory tile,
  else 1);
* ``kv_<c>`` (memory tile -> core, linked to ``kv_in_<c>``): the memory tile
  reads that element chunk by chunk with ``dimensionsToStream [C, 2, T, D]``
  (strides ``[T D, L D, D, 1]``) and the core receives ``[K_t | V_t]``
  elements of ``2 T D`` bf16 (an asymmetric producer/consumer element type),
  depth 2; with ``R / Q > 1`` query tiles the memory tile sends each head
  ``R / Q`` times (``repeat_count``);
* ``out_<c>`` (core -> shim): ``Q g D`` bf16 results per query tile, depth 2.

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
is exactly what ``_Attention.core_bytes`` counts (plus the scratchpad words,
and with paired columns the partner's query tile, which legality counts).

The runtime sequence per shim drains ``out`` (buffer descriptor 0), then
sends K and V per kv head, the query tiles (one descriptor, or one per kv head
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

    def q_fifo(self, col: int) -> str:
        """The FIFO column ``col``'s core takes its query tiles from."""
        return f"qw_{col // self.group}" if self.count else f"q_{col}"


def _plan(op: object, dev: Device, words: Words | None) -> Plan:
    causal = type(op).__name__ == "CausalAttention"
    param = _PER_CALL[type(op).__name__]
    slots, count = word_slots(op, (param,), words)
    count = count if slots else 0
    n = op.num_aie_columns
    group = 1 if not count or 3 * n <= 2 * dev.columns else 2
    base = dict(
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
    two = Plan(**base, kv_depth=2)
    memtile = defaultdict(int)
    for f in _fifos(two, dev):
        for end in (f.producer, *f.consumers):
            if end.kind == "mem":
                memtile[end] += f.depth * f.element_bytes
    fits = all(v <= dev.mem_tile_bytes for v in memtile.values())
    return two if fits else Plan(**base, kv_depth=1)


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
    D, L, T = p.head_dim, p.max_len, p.kv_tile
    fifos = []
    for c in range(p.columns):
        core, mem = legality.Tile(c, _CORE_ROW), legality.Tile(c, _MEM_ROW)
        fifos += [
            legality.Fifo(
                f"kv_in_{c}", legality.Tile(c, 0), (mem,), p.kv_depth, 2 * L * D
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
    """``dimensionsToStream`` of ``kv_<c>``: ``[K_t | V_t]`` for each chunk ``t``."""
    D, L, T = p.head_dim, p.max_len, p.kv_tile
    return ((p.chunks, T * D), (2, L * D), (T, D), (D, 1))


def _check_memtile_dims(op: str, p: Plan, dev: Device) -> None:
    """The memory tile's read of ``[K_h | V_h]`` within its descriptor fields.

    Raises:
        legality.LegalityError: A size or step is past the memory tile's
            10-bit wrap or 17-bit step (in 32-bit words).
    """
    dims = _kv_dims(p)
    words = lambda n: n * _ITEM // dev.dma_granule_bytes  # noqa: E731
    problems = []
    if words(p.head_dim) > _MEM_WRAP:
        problems.append(f"d0 wrap {words(p.head_dim)} words > {_MEM_WRAP}")
    for k, (size, _) in enumerate(dims[:-1]):
        if size > _MEM_WRAP:
            problems.append(f"dimension {k} size {size} > {_MEM_WRAP}")
    for k, (_, stride) in enumerate(dims):
        if words(stride) > _MEM_STEP:
            problems.append(f"dimension {k} step {words(stride)} words > {_MEM_STEP}")
    if problems:
        raise legality.LegalityError(
            f"{op} on {dev}: {legality.Tile(0, _MEM_ROW)}: the read of @kv_0 "
            f"(dimensionsToStream {[list(d) for d in dims]}) breaks the memory "
            f"tile's descriptor limits: " + "; ".join(problems) + "; use a smaller "
            "max_len or head_dim"
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


def layout(
    op: object,
    dev: Device,
    where: Mapping[str, tuple[str, int]] | None = None,
    words: Words | None = None,
) -> tuple[legality.Layout, Plan]:
    """What the design of resolved ``op`` places on ``dev`` (not yet checked).

    ``where`` maps each port to ``(argument, element offset)``; by default
    each port is its own buffer at offset 0.
    """
    p = _plan(op, dev, words)
    where = dict(where or {x: (x, 0) for x in ("q", "k_cache", "v_cache", "out")})
    fifos = _fifos(p, dev)
    shim_of = _shim_of(p, dev)
    per_shim: dict[int, list[legality.Transfer]] = defaultdict(list)
    L, D = p.max_len, p.head_dim

    def send(fifo: str, shim: int, arg: str, offset: int, sizes, strides, item=2):
        bd = len(per_shim[shim])
        per_shim[shim].append(
            legality.Transfer(
                fifo,
                legality.Tile(shim, 0),
                arg,
                offset,
                tuple(sizes),
                tuple(strides),
                item,
                bd,
            )
        )

    for c in range(p.columns):
        arg, base = where["out"]
        for off, sizes, strides in _q_walks(p, c, base, dev):
            send(f"out_{c}", c, arg, off, sizes, strides)
    for c in range(p.columns):
        for j in range(p.hpc):
            h = c * p.hpc + j
            for port in ("k_cache", "v_cache"):
                arg, base = where[port]
                sizes, strides = linear_walk(L * D, _ITEM, dev)
                send(f"kv_in_{c}", c, arg, base + h * L * D, sizes, strides)
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
    scratch = (p.q_rows * p.kv_tile + p.q_rows * D + 2 * p.q_rows) * _WORD
    lay = legality.Layout(
        repr(op),
        cores,
        tuple(fifos),
        tuple(transfers),
        buffers=tuple((t, scratch) for t in cores),
    )
    return lay, p


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
    p0 = _plan(op, dev, words)
    H, D, R = op.heads, op.head_dim, (op.rows if p0.causal else 1)
    cache = op.kv_heads * op.max_len * D * _ITEM
    need = {
        "q": R * H * D * _ITEM,
        "k_cache": cache,
        "v_cache": cache,
        "out": R * H * D * _ITEM,
    }
    args, where = _sequence_args(
        op, need, placement, arena_bytes, unit=_ITEM, words=p0.count
    )
    lay, p = layout(op, dev, where, words)
    legality.check(lay, dev)
    _check_memtile_dims(repr(op), p, dev)

    n, T, L = p.columns, p.kv_tile, p.max_len
    kv_t, big_t = memref(2 * T * D), memref(2 * L * D)
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
                        repeat=p.q_tiles,
                        cons_elem=kv_t,
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
