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
* ``kv_<c>`` (memory tile -> core, linked one to one to ``kv_in_<c>``): the
  core receives ``[K_t | V_t]`` elements of ``2 T D`` bf16, depth 2, its own
  element type. With ``m = 1`` the memory tile forwards its elements as they
  are; with ``m > 1`` the memory tile writes each arriving ``kv_in`` element
  interleaved, ``[K_0 | V_0 | K_1 | V_1 | ...]``, through
  ``dimensionsFromStream [2, m, T, D]`` (strides ``[T D, 2 T D, D, 1]``) on
  ``kv_in_<c>``'s consumer, and ``kv_<c>`` reads it in order, ``2 T D`` bf16
  an element (a link whose sides' elements differ in size: ``m`` core
  elements a memory-tile element);
* ``out_<c>`` (core -> shim): ``Q g D`` bf16 results per query tile, depth 2.

The span. Each query tile streams its kv head's whole cache, so with ``R / Q
> 1`` query tiles the cache passes ``R / Q`` times. When a memory-tile element
holds a whole head (``m = C``, *resident*), the memory tile repeats it
(``repeat_count = R / Q`` on ``kv_<c>``) and the shim sends each head once;
otherwise the
shim sends each head's spans once per query tile. The span is the first
candidate that passes legality (memory-tile bytes and descriptor fields,
shim buffer descriptors) in the order of preference :mod:`.attention_schedule`
gives: *paired* caches (``k_cache`` and ``v_cache`` in one argument, which
one shim descriptor alternates) smallest span first, *unpaired* ones
largest first, a long cache that overflows the shim's descriptors refused
with the fix named.

The query tile and the scratchpad words share the core's second input:

* without a per-call parameter, ``q_<c>`` (shim -> core): ``Q g D`` bf16 per
  query tile, depth 2;
* with one, the scratchpad convention of :mod:`.sequence` (``word_slots``,
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
``aie.buffer``s: with the double-buffered K/V and query/result elements,
the scratchpad words and, with paired columns, the partner's query tile, that
is exactly what ``_Attention.core_bytes(q_tile, kv_tile, words=, pair=)``
counts: one account, which the operator's ``check`` and ``resolve`` use too
(with an image's ``scratchpad_words``) and the design checks with its own
count of words. The operator counts no memory-tile term; the design's is the
``kv_in`` elements plus the ``q_in``, ``words`` and ``qw`` elements
(:func:`~.attention_schedule.memtile_bytes`).

The runtime sequence per shim drains ``out`` (buffer descriptor 0), then
sends K and V (as above), the query tiles (one descriptor, or one per kv head
for paired causal tiles) and the words (the iteration dimension repeats them
once per query element), from host buffers or from the arena at the planned
offsets, then waits on every ``out``.

A long cache (issue 34). Where K and V take more descriptors than a shim
holds (16) or than a DMA channel's task queue takes without a wait (4; the
hardware drops a push onto a full queue, mlir-aie PR #3734), the sequence is
*waited* instead (:func:`~.attention_schedule.layout_of` with ``waited``):
the drains (each issuing a token), the query tiles and the words first, so a
core never waits for its query behind a wait; then, round by round, each
column's next :func:`~.attention_schedule.kv_group` (2) K/V transfers, the
last issuing a token, with buffer descriptor ids alternating between two
sets past those the drains and queries hold for the whole call; after
issuing a round the sequence waits on every column's round before it, which
frees that set; at the end it waits on the last round and every drain. So
any ``max_len`` streams in ``max_len / kv_tile`` chunks (the core's loop is
an index, no DMA repeat count), at most 4 K/V tasks queued a channel and 16
descriptors a shim. A design whose transfers fit without waits keeps the
wait-free sequence.

Object-FIFO features. aiecc lowers each object FIFO by its features, and
mlir-aie v1.4.1 tests some combinations of them on one FIFO and not others,
so every FIFO here keeps to a combination an upstream test uses, and
:func:`iron.runtime.npu.legality.check_fifo_features` refuses any other by
name. The features (:data:`~iron.runtime.npu.legality.FIFO_FEATURES`): the
role in a one-to-one link, a join or a distribute (``link``/``join``/
``distribute``, ``_in``/``_out``), link sides whose elements differ in size
(``resize``), a consumer element type of its own (``asymmetric``),
``dims_to_stream``, ``dims_from_stream`` and ``repeat``. This design's:

| FIFO | features | tested by (v1.4.1) |
| --- | --- | --- |
| ``kv_in``, m = 1 | ``link_in`` | hardware [cascade] |
| ``kv``, m = 1 | ``link_out`` | hardware [cascade] |
| ``kv_in``, m > 1 | ``link_in``, ``resize``, ``dims_from_stream`` | hardware [atb] |
| ``kv``, m > 1 | ``link_out``, ``resize`` | hardware [add_one] |
| ``kv``, resident, R / Q > 1 | ``link_out``, ``resize``, ``repeat`` | lowering [link_rep] |
| ``q_in``, ``words`` | ``join_in`` | hardware [two_col] |
| ``qw`` | ``join_out`` | hardware [two_col] |
| ``q``, ``out`` | none | |

No upstream test gives one FIFO an asymmetric type together with a link or
with dimensions, nor a repeat together with dimensions, so the memory tile
re-lays a span as it writes it (``kv_in``) and the linked ``kv`` only reads
and repeats; the core receives the same bytes in the same order either way.

The survey: every ``aie.objectfifo`` in v1.4.1's ``test/`` MLIR
(``objectFifo-stateful-transform``, ``npu-xrt`` and the rest, 908 FIFOs) was
read for its features, and the IRON Python of ``test/npu-xrt`` and
``programming_examples`` (no attention, flash-attention or MHA example exists
at v1.4.1) for those that link, repeat, re-lay or re-type. *Hardware*: a lit
test builds it with aiecc (its default ``--dynamic-objFifos``) and runs it on
an NPU; *lowering*: only ``aie-opt --aie-objectFifo-stateful-transform=
"dynamic-objFifos=false"`` checks it. Combinations on one FIFO:

| features on one FIFO | test | kind |
| --- | --- | --- |
| ``link_in``; ``link_out`` | [cascade] | hardware |
| ``link_in`` + ``resize``; ``link_out`` + ``resize`` | [add_one] | hardware (16 to 8 i32) |
| ``link_in`` + ``resize`` + ``dims_from_stream`` | [atb] | hardware (npu2) |
| ``link_out`` + ``resize`` + ``dims_to_stream`` + ``dims_from_stream`` | [atb] | hardware (npu2, 8 consumers) |
| ``link_out`` + ``dims_to_stream`` | [whole] | hardware (``B_L2L1``) |
| ``distribute_out`` + ``dims_to_stream`` | [whole] | hardware (``A_L2L1``) |
| ``join_out`` + ``dims_to_stream`` | [whole] | hardware (``C_L2L3``) |
| ``join_in``; ``join_out``; ``distribute_in``; ``distribute_out`` (offsets) | [two_col] | hardware |
| ``distribute_out`` + ``repeat`` | [chain] | hardware |
| ``link_out`` + ``repeat`` (to a shim) | [simple] | hardware |
| ``repeat`` (core to shim) | [compute] | hardware |
| ``link_in`` + ``resize`` + ``repeat``; ``link_out`` + ``resize`` + ``repeat`` | [link_rep] | lowering |
| ``join_in`` + ``repeat`` | [join_rep] | lowering |
| ``join_in`` + ``dims_from_stream`` | [join_nd] | lowering |
| ``dims_to_stream`` + ``dims_from_stream`` | [nd_base] | lowering |
| ``asymmetric`` | [asym] | lowering |
| ``asymmetric`` + ``repeat``, with initial values, no link | [mobile] | hardware (npu2, ``dynamic-objFifos`` off) |
| ``asymmetric`` with a link or dimensions; ``repeat`` with dimensions; a join's output broadcast to cores | none | |

The last row is untested upstream. Broadcast is not one of the features the
check counts: ``qw_<p>`` with paired columns is a join whose output two
cores consume, which no upstream test does (joins there go to a shim).

Sources (Xilinx/mlir-aie at tag v1.4.1, commit 601fc859532f):

* [cascade] test/npu-xrt/cascade_flows/aie.mlir;
* [add_one] test/npu-xrt/add_one_objFifo/aie.mlir;
* [atb] programming_examples/ml/block_datatypes/gemm_asymmetric_tile_buffering/
  config1/n32_core.py (``A_L3L2``, ``A_L2L1``; run_strix_makefile_chess.lit):
  a shim FIFO of 128 x 512 bf16 elements written through
  ``dims_from_stream_per_cons`` on its memory tile, ``forward()``-ed (a
  one-to-one link, offsets ``[0]``) to 32 x 64-element core elements;
* [whole] programming_examples/basic/matrix_multiplication/whole_array/
  whole_array.py (tests/run_makefile_*_col.lit);
* [two_col] test/npu-xrt/two_col/aie.mlir;
* [chain] test/npu-xrt/bd_chain_repeat_on_memtile/aie2.py;
* [simple], [compute] test/npu-xrt/objectfifo_repeat/simple_repeat/aie2.py,
  .../compute_repeat/aie2.py;
* [link_rep], [join_rep] test/objectFifo-stateful-transform/repeat_count/
  link_repeat_count_test.mlir, link_join_repeat_count_test.mlir;
* [join_nd], [nd_base] test/objectFifo-stateful-transform/
  dma_transformations/nd_dma_fromStream_join.mlir, nd_dma_base_AIE2.mlir;
* [asym] test/objectFifo-stateful-transform/asymmetric_element_type/
  asymmetric_element_type.mlir;
* [mobile] programming_examples/ml/mobilenet/bottleneck/post_l1.py
  (run_e2e.lit; its Makefile passes ``--dynamic-objFifos=false``).

mlir-aie syntax beyond :mod:`iron.runtime.npu.mlir` (emitted by local helpers
here; they could move into the Builder), from the same tests:

* [link_join] ``aie.objectfifo.link [@a, @b] -> [@c]([0, n] [])``:
  test/objectFifo-stateful-transform/bd_chain_on_memtile/join_with_iterations.mlir;
* [resize_link] ``aie.objectfifo.link [@in] -> [@x]([] [])`` between FIFOs of
  different element sizes: [add_one];
* [dims_from] ``aie.objectfifo @x(%shim, {%mem_tile dimensionsFromStream
  [<size = s, stride = t>, ...]}, 2 : i32)``: [join_nd];
* [repeat] ``{repeat_count = N : i32}`` after the FIFO's operands: [link_rep].
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from iron.core.device import Device
from iron.operators import CausalAttention, DecodeAttention
from iron.runtime.image import Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design, Words
from iron.runtime.npu.designs.attention_schedule import (
    CORE_ROW,
    ITEM,
    MEM_ROW,
    AttentionSchedule,
    base_sizes,
    candidates,
    check_core_memory,
    check_memtile_dims,
    fix_hint,
    kv_dims,
    kv_pushes,
    kv_repeat,
    layout_of,
    memtile_bytes,
    memtile_dim_problems,
    pairing,
    streaming,
)
from iron.runtime.npu.designs.sequence import (
    assemble,
    runtime_sequence,
    sequence_args,
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
    "build",
    "handles",
    "layout",
    "scale_bits",
]

#: The operators this module designs.
FAMILY: tuple[type, ...] = (DecodeAttention, CausalAttention)

#: The kernel source (``<KERNEL_SOURCE>.cc``, linked as ``<KERNEL_SOURCE>.o``).
KERNEL_SOURCE = "attention_bf16"

#: The kernel symbols: (init, chunk, store).
SYMBOLS = ("attention_bf16_init", "attention_bf16_chunk", "attention_bf16_store")

#: The int32 arguments of ``attention_bf16_chunk`` after its five buffers.
_CHUNK_SCALARS = 10


def scale_bits(head_dim: int) -> int:
    """The int32 bits of fp32 ``1/sqrt(head_dim)``, the reference's scale."""
    scale = np.float32(1.0 / math.sqrt(head_dim))
    return int(np.asarray(scale).view(np.int32))


def handles(op: Any) -> bool:
    """Whether ``op`` is DecodeAttention or CausalAttention."""
    return isinstance(op, FAMILY)


def layout(
    op: Any,
    dev: Device,
    where: Mapping[str, tuple[str, int]] | None = None,
    words: Words | None = None,
) -> tuple[legality.Layout, AttentionSchedule]:
    """What the design of resolved ``op`` places on ``dev``, and its schedule.

    ``where`` maps each port to ``(argument, element offset)``; by default
    each port is its own buffer at offset 0. The schedule is the first candidate
    (see the module docstring: the span) that passes legality; when none
    does, the preferred one among those whose memory tiles fit (else the
    first), which :func:`build` then refuses by name.
    """
    base = base_sizes(op, dev, words)
    where = dict(where or {x: (x, 0) for x in ("q", "k_cache", "v_cache", "out")})
    dist, _ = pairing(where, dev)
    fallback = None
    queue = legality.TILE_LIMITS[dev.arch].task_queue
    for waited in (False, True):
        for p in candidates(base, dist):
            lay = layout_of(op, p, dev, where, waited=waited)
            fits = not memtile_dim_problems(p, dev) and all(
                sum(v.values()) <= dev.mem_tile_bytes
                for v in memtile_bytes(p, dev).values()
            )
            try:
                legality.check(lay, dev)
            except legality.LegalityError:
                passed = False
            else:
                passed = kv_pushes(lay) <= queue
            if passed and fits:
                return lay, p
            if fallback is None or (fits and not fallback[2]):
                fallback = (lay, p, fits)
    assert fallback is not None
    return fallback[0], fallback[1]


def _dims(dims: tuple[tuple[int, int], ...]) -> str:
    """``[<size = s, stride = t>, ...]``, a ``bd_dim_layout`` array [dims_from]."""
    return "[" + ", ".join(f"<size = {s}, stride = {t}>" for s, t in dims) + "]"


def _fifo_line(
    name: str,
    prod: str,
    cons: list[str],
    depth: int,
    elem: str,
    *,
    dims_from: tuple[tuple[int, int], ...] = (),
    repeat: int = 1,
) -> str:
    """An ``aie.objectfifo``, its consumers writing through ``dims_from``
    [dims_from] and the producer repeating each element ``repeat`` times
    [repeat]."""
    from_stream = f" dimensionsFromStream {_dims(dims_from)}" if dims_from else ""
    consumers = ", ".join(c + from_stream for c in cons)
    attrs = f" {{repeat_count = {repeat} : i32}}" if repeat > 1 else ""
    return (
        f"aie.objectfifo @{name}({prod}, {{{consumers}}}, {depth} : i32){attrs} : "
        f"{objectfifo_type(elem)}"
    )


def _link_line(ins: list[str], outs: list[str], in_offsets: list[int]) -> str:
    """``aie.objectfifo.link [@ins] -> [@outs]([offsets] [])`` [link_join]."""
    a = ", ".join("@" + i for i in ins)
    z = ", ".join("@" + o for o in outs)
    offs = ", ".join(str(o) for o in in_offsets)
    return f"aie.objectfifo.link [{a}] -> [{z}]([{offs}] [])"


def build(
    op: Any,
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
    p0 = base_sizes(op, dev, words)
    H, D, R = op.heads, op.head_dim, (op.rows if p0["causal"] else 1)
    cache = op.kv_heads * op.max_len * D * ITEM
    need = {
        "q": R * H * D * ITEM,
        "k_cache": cache,
        "v_cache": cache,
        "out": R * H * D * ITEM,
    }
    args, where = sequence_args(
        op, need, placement, arena_bytes, unit=ITEM, words=p0["count"]
    )
    lay, p = layout(op, dev, where, words)
    check_core_memory(op, p, dev)
    try:
        legality.check(lay, dev)
    except legality.LegalityError as e:
        raise legality.LegalityError(f"{e}; {fix_hint(p, dev, where)}") from None
    check_memtile_dims(repr(op), p, dev)

    n, T, L = p.columns, p.kv_tile, p.max_len
    kv_t, big_t = memref(2 * T * D), memref(2 * p.block)
    dims, repeat = kv_dims(p), kv_repeat(p)
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
    b.comment(streaming(p))
    with b.region("module"), b.device(dev.name, "main"):
        b.func_decl(init, [acc_t, st_t, "i32", "i32"], obj)
        b.func_decl(chunk, chunk_types, obj)
        b.func_decl(store, [acc_t, st_t, out_t, "i32", "i32"], obj)
        used = sorted({t.shim.col for t in lay.transfers})
        shim_v = {c: b.tile(c, 0, "shim_noc_tile") for c in used}
        mem_v = {c: b.tile(c, MEM_ROW, "mem_tile") for c in range(n)}
        core_v = {c: b.tile(c, CORE_ROW) for c in range(n)}

        def tile_of(t: legality.Tile) -> str:
            return {0: shim_v, 1: mem_v}.get(t.row, core_v)[t.col]

        for f in lay.fifos:
            prod = tile_of(f.producer)
            cons = [tile_of(t) for t in f.consumers]
            if f.name.startswith("kv_in_"):
                b.line(_fifo_line(f.name, prod, cons, f.depth, big_t, dims_from=dims))
            elif f.name.startswith("kv_"):
                c = int(f.name.rsplit("_", 1)[1])
                b.line(_fifo_line(f.name, prod, cons, f.depth, kv_t, repeat=repeat))
                b.line(_link_line([f"kv_in_{c}"], [f.name], []))  # [resize_link]
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
            with b.core(core_v[c], stack_size=lay.stack_bytes):
                _core_body(b, p, c, bufs[c], (q_t, kv_t, out_t, sc_t, acc_t, st_t))
                b.end()
        runtime_sequence(b, args, lay.transfers, ["out"], n, points=lay.waits)
    return assemble(b, op, dev, args, (KERNEL_SOURCE,), lay)


def _core_body(
    b: Builder,
    p: AttentionSchedule,
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
                word = b.load(q, index, q_t, p.param) if index is not None else fixed
                assert word is not None  # fixed is made where no word carries it
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
