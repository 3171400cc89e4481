"""The GEMM design: ``out = a @ b`` in bf16 on the whole array, fp32 accumulation.

The output is cut in ``tile_m x tile_n`` tiles. ``num_aie_columns`` columns
each own ``tile_n`` columns of N per pass; in every column ``rows`` cores
(rows 2, 3, ... of the array; ``rows`` the largest divisor of the ``M /
tile_m`` row tiles that is at most the device's ``core_rows``) each own one
``tile_m``-row tile of M per pass. Core ``(c, 2 + r)`` computes the output
tiles ``(p * rows + r, q * columns + c)`` for every M pass ``p`` and N pass
``q``, walking K in ``tile_k`` steps: ``(M / tile_m / rows) * (N / tile_n /
columns)`` output tiles per core per call (:class:`Plan`).

Data movement (all object FIFOs of depth 2, as ``GEMM.check()`` counts the
core's tiles: ``a`` and ``b`` double-buffered, the bf16 ``out`` tile
double-buffered plus one fp32 accumulator, together exactly its two fp32 C
tiles):

* ``a``: the cores of array row ``r`` share one A row tile. Rows are grouped
  over the first ``min(rows, columns)`` columns (group ``g`` in column ``g``,
  contiguous rows); ``a_<g>`` carries the group's row tiles side by side
  (shim to memory tile), and ``aie.objectfifo.link`` distributes them, one
  ``a_row<r>`` per row, each broadcast to the row's cores in every column.
  The memory tile re-lays each ``tile_m x tile_k`` tile into the mmul's
  ``r x s`` blocks on the way out (``dimensionsToStream``).
* ``b``: ``b_<c>`` (shim to memory tile of column ``c``), linked to
  ``b_col<c>``, broadcast to the column's cores, re-laid into ``s x t``
  blocks (``k`` blocks outer); with ``b_transposed`` the tile arrives as
  ``tile_n x tile_k`` and is re-laid into ``t x s`` blocks (``n`` blocks
  outer), which the kernel transposes in registers.
* ``out``: each core's tile (``r x t`` blocks, row blocks outer) goes to its
  column's memory tile in ``c_<c>_<r>``; the link joins the column's tiles
  into ``out_<c>``, which the memory tile streams to the shim in row-major
  order (``dimensionsToStream`` undoes the blocks).

Channels per column: shim 2 MM2S (``a``, ``b``) + 1 S2MM (``out``); memory
tile ``1 + 1 + rows`` S2MM and ``len(group) + 2`` MM2S (at most 6 + 6);
core 2 S2MM + 1 MM2S.

Each core loops forever; per call, per output tile it calls
``gemm_f32_zero(acc, tile_m, tile_n)``, then per K tile acquires ``a`` and
``b`` and calls the accumulate kernel (:data:`ACCUMULATE`: ``HIGHEST`` keeps
the fp32 sum, ``HIGH`` rounds the partial sum to bf16 after every K tile, as
``iron.operators.matmul.model_product`` models it; ``_bt`` for a transposed
``b``), then ``gemm_bf16_store(acc, out, tile_m, tile_n)`` rounds into the
``c`` FIFO. The symbols live in ``gemm.cc``
(:func:`iron.runtime.npu.kernels.contract` of ``gemm``).

The runtime sequence per column drains ``out`` (one transfer, buffer
descriptor 0), then fills ``a`` (columns serving a row group) and ``b``,
from host buffers or the arena at planned offsets, then waits on every
``out``. The order the cores walk the tiles (M passes outer, ``mn``, or N
passes outer, ``nm``) is the one whose shim walks need fewer buffer
descriptors on the busiest shim; a walk repeating a tile (``a`` once per N
pass, ``b`` once per M pass) repeats it on the shim's iteration dimension
(stride 0) where it can, else issues one transfer per repetition.

A shape whose walks need more buffer descriptors than a shim has runs in
blocks (:class:`Schedule`): each block a contiguous run of every core's
output tiles (whole outer passes, or part of one), its transfers per column
``a``, ``b`` then ``out``, the last ``out`` transfer issuing a token. The
blocks alternate between the two halves of a shim's descriptor ids
(0..7, 8..15, as mlir-aie's whole-array GEMM ping-pongs them); after
issuing block ``i`` the sequence waits on block ``i - 1``'s ``out`` of
every column, which frees that half for block ``i + 1``, and it waits on
the last block at the end. A block holds at most half a shim's descriptors
and at most two transfers per FIFO, so two blocks in flight stay within a
channel's task queue of four (``legality.TileLimits.task_queue``). The
wait on ``out`` of column ``c`` retires the block's ``a`` and ``b`` on
shim ``c``: the column's cores consume every row's ``a`` tiles and their
``b`` tiles before the last output tile of the block leaves. A shape no
blocking fits is refused by legality. ``MEDIUM`` on NPU2 (bfp16 blocks) has
no design yet.

Syntax sources (paths in Xilinx/mlir-aie, the pinned era), besides those of
:mod:`iron.runtime.npu.mlir`:

* [link_distribute] ``test/objectFifo-stateful-transform/data_movement_patterns/
  link/link_test_distribute_offsets.mlir``: ``aie.objectfifo.link [@in] ->
  [@o1, @o2, @o3] ([] [0, 16, 36])``;
* [link_join] ``.../link/link_test_join_offsets.mlir``: ``aie.objectfifo.link
  [@i1, @i2, @i3] -> [@out] ([0, 16, 36] [])``;
* [dims_to_stream] ``test/objectFifo-stateful-transform/aie_stream/
  bad_dims_to_stream.mlir``: ``aie.objectfifo @of (%tile dimensionsToStream
  [<size = 16, stride = 1>], {%cons}, 2 : i32)``; the memory tile's 4-D
  blocking and un-blocking patterns are those of
  ``test/npu-xrt/matrix_multiplication_using_dma/aie.mlir`` (``A``: ``[<m/r,
  r*k>, <k/s, s>, <r, k>, <s, 1>]``; ``C``: ``[<m/r, r*n>, <r, t>, <n/t,
  r*t>, <t, 1>]``), in elements of the FIFO's type.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
from collections.abc import Mapping, Sequence

from iron.core.device import Device
from iron.core.precision import Precision
from iron.operators.matmul import mmul_shape
from iron.runtime.image import Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design, Words
from iron.runtime.npu.designs._common import (
    _design,
    _runtime_sequence,
    _sequence_args,
)
from iron.runtime.npu.mlir import INDEX_MAX, MLIR_AIE_RELEASE, Builder, memref

__all__ = [
    "ACCUMULATE",
    "FAMILY",
    "KERNEL_SOURCE",
    "STORE",
    "ZERO",
    "Plan",
    "Schedule",
    "build",
    "handles",
    "layout",
    "plan",
    "schedule",
    "stream_dims",
    "tile_order",
]

_ITEM = 2  # bf16
_F32 = 4
_DEPTH = 2  # double-buffered, as GEMM.check() counts the tiles
_MEM_ROW = 1
_CORE_ROW = 2

#: The operators this module designs.
FAMILY = ("GEMM",)

#: The kernel source (``<KERNEL_SOURCE>.cc``, linked as ``<KERNEL_SOURCE>.o``).
KERNEL_SOURCE = "gemm"

#: Zeroes the fp32 accumulator of an output tile.
ZERO = "gemm_f32_zero"
#: Rounds the fp32 accumulator to the bf16 output tile.
STORE = "gemm_bf16_store"
#: The accumulate symbol per (effective precision, b_transposed).
ACCUMULATE: dict[tuple[Precision, bool], str] = {
    (Precision.HIGHEST, False): "gemm_bf16_acc",
    (Precision.HIGH, False): "gemm_bf16_acc_round",
    (Precision.HIGHEST, True): "gemm_bf16_acc_bt",
    (Precision.HIGH, True): "gemm_bf16_acc_round_bt",
}

_PORTS = ("a", "b", "out")


def handles(op: object) -> bool:
    """Whether ``op`` is a GEMM."""
    return type(op).__name__ in FAMILY


@dataclasses.dataclass(frozen=True)
class Plan:
    """How a resolved GEMM spreads over the array.

    Attributes:
        columns: Array columns (``num_aie_columns``), each ``tile_n`` of N a pass.
        rows: Cores per column, each one ``tile_m`` row tile of M a pass.
        tm: ``tile_m``.
        tk: ``tile_k``.
        tn: ``tile_n``.
        m_passes: Row tiles per core: ``M / tile_m / rows``.
        n_passes: Column tiles per core: ``N / tile_n / columns``.
        k_tiles: ``K / tile_k``: kernel calls per output tile.
        groups: The rows whose ``a`` tiles column ``g``'s shim and memory
            tile carry, for ``g`` in ``range(len(groups))``.
        mmul: The kernel's ``aie::mmul`` shape ``(r, s, t)``.
    """

    columns: int
    rows: int
    tm: int
    tk: int
    tn: int
    m_passes: int
    n_passes: int
    k_tiles: int
    groups: tuple[tuple[int, ...], ...]
    mmul: tuple[int, int, int]

    @property
    def tiles(self) -> int:
        """Output tiles each core computes per call."""
        return self.m_passes * self.n_passes

    def group_of(self, row: int) -> int:
        """The column whose memory tile sends row ``row`` its ``a`` tiles."""
        return next(g for g, rows in enumerate(self.groups) if row in rows)


def plan(op: object, dev: Device) -> Plan:
    """The :class:`Plan` of resolved, checked GEMM ``op`` on ``dev``.

    Raises:
        ValueError: A tile does not divide its dimension.
    """
    cols, tm, tk, tn = op.num_aie_columns, op.tile_m, op.tile_k, op.tile_n
    for dim, tile, name in ((op.M, tm, "tile_m"), (op.K, tk, "tile_k")):
        if dim % tile:
            raise ValueError(
                f"{op!r}: {name}={tile} does not divide {dim}; give a divisor"
            )
    m_tiles = op.M // tm
    rows = max(d for d in range(1, dev.core_rows + 1) if m_tiles % d == 0)
    carriers = min(rows, cols)
    cut = [g * rows // carriers for g in range(carriers + 1)]
    groups = tuple(tuple(range(cut[g], cut[g + 1])) for g in range(carriers))
    return Plan(
        columns=cols,
        rows=rows,
        tm=tm,
        tk=tk,
        tn=tn,
        m_passes=m_tiles // rows,
        n_passes=op.N // (tn * cols),
        k_tiles=op.K // tk,
        groups=groups,
        mmul=mmul_shape(dev, op.effective_precision),
    )


def stream_dims(op: object, p: Plan, fifo: str) -> list[tuple[int, int]]:
    """The memory tile's ``dimensionsToStream`` ``(size, stride)`` of a FIFO kind.

    ``fifo`` is ``a`` (an A tile into ``r x s`` blocks), ``b`` (a B tile into
    ``s x t`` blocks, or a transposed one into ``t x s`` blocks) or ``out``
    (``rows`` joined C tiles of ``r x t`` blocks back to row-major).
    Outermost first, in elements [dims_to_stream].
    """
    r, s, t = p.mmul
    tm, tk, tn = p.tm, p.tk, p.tn
    if fifo == "a":
        return [(tm // r, r * tk), (tk // s, s), (r, tk), (s, 1)]
    if fifo == "b" and op.b_transposed:
        return [(tn // t, t * tk), (tk // s, s), (t, tk), (s, 1)]
    if fifo == "b":
        return [(tk // s, s * tn), (tn // t, t), (s, tn), (t, 1)]
    return [(p.rows * tm // r, r * tn), (r, t), (tn // t, r * t), (t, 1)]


def _fold(
    offset: int, dims: Sequence[tuple[int, int]], dev: Device
) -> list[tuple[int, tuple[int, int, int, int], tuple[int, int, int, int]]]:
    """A loop nest of ``(size, stride)``, outermost first, as 4-D shim walks.

    Dimensions of size 1 are dropped and contiguous neighbours merged while
    the merged size fits its field. The innermost (at most three) dimensions
    with a nonzero stride become d2, d1, d0; the next one out is the
    iteration (split at the iteration limit); any further out are unrolled
    into separate transfers, as is any dimension whose stride exceeds the
    step field (the transfer's offset carries it). Returns ``(offset, sizes,
    strides)`` per walk.
    """
    wrap = (1 << dev.dma_size_bits) - 1
    inner_max = wrap * dev.dma_granule_bytes // _ITEM
    nest: list[tuple[int, int]] = []  # innermost first
    for n, s in reversed([d for d in dims if d[0] > 1]):
        if nest and s and s == nest[-1][0] * nest[-1][1]:
            size = n * nest[-1][0]
            if size <= (inner_max if len(nest) == 1 else wrap):
                nest[-1] = (size, nest[-1][1])
                continue
        nest.append((n, s))
    step_max = (1 << dev.dma_stride_bits) * dev.dma_granule_bytes // _ITEM
    rest = list(reversed(nest))  # outermost first
    inner: list[tuple[int, int]] = []
    while rest and len(inner) < 3 and 0 < rest[-1][1] <= step_max:
        inner.insert(0, rest.pop())
    inner = [(1, 0)] * (3 - len(inner)) + inner
    it_n, it_s = rest.pop() if rest and rest[-1][1] <= step_max else (1, 0)
    most = dev.dma_iteration_max
    walks = []
    for index in itertools.product(*(range(n) for n, _ in rest)):
        base = offset + sum(i * s for i, (_, s) in zip(index, rest))
        for start in range(0, it_n, most):
            count = min(most, it_n - start)
            sizes = (count, *(n for n, _ in inner))
            strides = (
                it_s if count > 1 else 0,
                *(s if n > 1 else 0 for n, s in inner),
            )
            walks.append((base + start * it_s, sizes, strides))
    return walks


def _walks(
    op: object, p: Plan, where: Mapping[str, tuple[str, int]], order: str
) -> dict[str, list[tuple[str, int, list[tuple[int, int]]]]]:
    """Each shim FIFO's ``(argument, offset, loop nest)``, for tile order ``order``."""
    K, N = op.K, op.N
    cols, R, tm, tk, tn = p.columns, p.rows, p.tm, p.tk, p.tn
    mn = order == "mn"

    def passes(m_stride: int, n_stride: int) -> list[tuple[int, int]]:
        m, n = (p.m_passes, m_stride), (p.n_passes, n_stride)
        return [m, n] if mn else [n, m]

    found: dict[str, list[tuple[str, int, list[tuple[int, int]]]]] = {}
    for c in range(cols):
        arg, base = where["out"]
        found[f"out_{c}"] = [
            (arg, base + c * tn, [*passes(R * tm * N, cols * tn), (R * tm, N), (tn, 1)])
        ]
    for g, rows in enumerate(p.groups):
        arg, base = where["a"]
        nest = [*passes(R * tm * K, 0), (p.k_tiles, tk), (len(rows) * tm, K), (tk, 1)]
        found[f"a_{g}"] = [(arg, base + rows[0] * tm * K, nest)]
    for c in range(cols):
        arg, base = where["b"]
        if op.b_transposed:  # (N, K): a tile is tile_n rows of tile_k
            nest = [*passes(0, cols * tn * K), (p.k_tiles, tk), (tn, K), (tk, 1)]
            found[f"b_{c}"] = [(arg, base + c * tn * K, nest)]
        else:
            nest = [*passes(0, cols * tn), (p.k_tiles, tk * N), (tk, N), (tn, 1)]
            found[f"b_{c}"] = [(arg, base + c * tn, nest)]
    return found


def _transfers(
    op: object, p: Plan, dev: Device, where: Mapping[str, tuple[str, int]], order: str
) -> list[legality.Transfer]:
    """The shim transfers of tile order ``order``: per column ``out``, ``a``, ``b``."""
    walks = _walks(op, p, where, order)
    transfers = []
    for c in range(p.columns):
        shim = legality.Tile(c, 0)
        bd = 0
        for name in (f"out_{c}", f"a_{c}", f"b_{c}"):
            for arg, offset, nest in walks.get(name, []):
                for off, sizes, strides in _fold(offset, nest, dev):
                    transfers.append(
                        legality.Transfer(
                            name, shim, arg, off, sizes, strides, _ITEM, bd
                        )
                    )
                    bd += 1
    return transfers


@dataclasses.dataclass(frozen=True)
class Schedule:
    """The tile order and, for a sequence with waits, its blocks.

    Attributes:
        order: ``mn`` (M passes outer) or ``nm``.
        blocks: ``(first, count)`` ranges of each core's output tiles (in the
            core's order), one block per wait; empty when every transfer is
            issued at once (no buffer descriptor reused).
    """

    order: str
    blocks: tuple[tuple[int, int], ...] = ()


def _runs(start: int, count: int, inner: int) -> list[tuple[int, int, int, bool]]:
    """Tiles ``start .. start + count`` as ``(outer, first inner, count, whole)``.

    ``whole``: ``count`` whole outer passes from ``outer``; else ``count``
    tiles of one outer pass from its ``first inner``.
    """
    runs, u, end = [], start, start + count
    while u < end:
        o, i = divmod(u, inner)
        if i == 0 and end - u >= inner:
            k = (end - u) // inner
            runs.append((o, 0, k, True))
            u += k * inner
        else:
            n = min(inner - i, end - u)
            runs.append((o, i, n, False))
            u += n
    return runs


def _block_transfers(
    p: Plan,
    dev: Device,
    walks: Mapping[str, list[tuple[str, int, list[tuple[int, int]]]]],
    inner: int,
    block: tuple[int, int],
    half: int,
) -> list[legality.Transfer]:
    """One block's transfers: per column ``a``, ``b``, then ``out``.

    The last ``out`` transfer of a column issues the token. ``walks`` are
    :func:`_walks` of the tile order, whose inner passes number ``inner``;
    buffer descriptor ids count from ``half`` times half a shim's.
    """
    found = []
    for c in range(p.columns):
        shim = legality.Tile(c, 0)
        bd = half * (dev.shim_bds // 2)
        for name in (f"a_{c}", f"b_{c}", f"out_{c}"):
            for arg, offset, nest in walks.get(name, []):
                (_, s_o), (_, s_i), *rest = nest
                for o, i, n, whole in _runs(*block, inner):
                    base = offset + o * s_o + i * s_i
                    dims = [(n, s_o), nest[1], *rest] if whole else [(n, s_i), *rest]
                    for off, sizes, strides in _fold(base, dims, dev):
                        found.append(
                            legality.Transfer(
                                name, shim, arg, off, sizes, strides, _ITEM, bd
                            )
                        )
                        bd += 1
        found[-1] = dataclasses.replace(found[-1], token=True)
    return found


def _legal(transfers: Sequence[legality.Transfer], dev: Device) -> bool:
    """Whether every transfer is within the shim descriptor limits."""
    return not any(
        legality.shim_transfer_problems(dev, t.sizes, t.strides, t.offset, t.itemsize)
        for t in transfers
    )


def _block_fits(transfers: Sequence[legality.Transfer], dev: Device) -> bool:
    """Half a shim's descriptor ids per shim, two transfers per FIFO, all legal.

    Two blocks are in flight at once: together a shim's ids and
    ``legality.TileLimits.task_queue`` transfers per FIFO.
    """
    per_fifo = legality.TILE_LIMITS[dev.arch].task_queue // 2
    shims = collections.Counter(t.shim for t in transfers)
    fifos = collections.Counter(t.fifo for t in transfers)
    return (
        max(shims.values()) <= dev.shim_bds // 2
        and max(fifos.values()) <= per_fifo
        and _legal(transfers, dev)
    )


def _blocks(
    op: object, p: Plan, dev: Device, where: Mapping[str, tuple[str, int]], order: str
) -> tuple[tuple[int, int], ...]:
    """The fewest equal blocks (the last may be short) that each fit; () if none."""
    walks = _walks(op, p, where, order)
    inner = p.n_passes if order == "mn" else p.m_passes
    units = p.tiles
    if not _block_fits(_block_transfers(p, dev, walks, inner, (0, 1), 0), dev):
        return ()  # not even one output tile a block
    tried = set()
    for count in range(2, units + 1):
        size = -(-units // count)
        if size in tried:
            continue
        tried.add(size)
        blocks = tuple((s, min(size, units - s)) for s in range(0, units, size))
        if all(
            _block_fits(_block_transfers(p, dev, walks, inner, blk, 0), dev)
            for blk in blocks
        ):
            return blocks
    return ()


def schedule(
    op: object, dev: Device, where: Mapping[str, tuple[str, int]] | None = None
) -> Schedule:
    """How resolved ``op``'s sequence runs on ``dev``: the tile order, and blocks.

    Unblocked when the order of fewer descriptors on the busiest shim (then
    fewer in all; ``mn`` on a tie) fits a shim's descriptors at once; else
    the order needing fewer blocks (that order on a tie). With no blocking
    that fits, the unblocked schedule, which legality refuses naming the
    shim and the count.
    """
    where = dict(where or {q: (q, 0) for q in _PORTS})
    p = plan(op, dev)
    walks = {o: _transfers(op, p, dev, where, o) for o in ("mn", "nm")}

    def busiest(order: str) -> tuple[int, int]:
        per = collections.Counter(t.shim for t in walks[order])
        return max(per.values()), len(walks[order])

    first = min(("mn", "nm"), key=busiest)
    if busiest(first)[0] <= dev.shim_bds and _legal(walks[first], dev):
        return Schedule(first)
    found = [
        Schedule(order, blocks)
        for order in dict.fromkeys((first, "mn", "nm"))
        if (blocks := _blocks(op, p, dev, where, order))
    ]
    return min(found, key=lambda s: len(s.blocks)) if found else Schedule(first)


def tile_order(
    op: object, dev: Device, where: Mapping[str, tuple[str, int]] | None = None
) -> str:
    """The order each core walks its output tiles: ``mn`` or ``nm``.

    ``mn``: M passes outer, N passes inner; ``nm`` the reverse. The one whose
    shim walks need fewer buffer descriptors on the busiest shim (then fewer
    in all), ``mn`` on a tie; for a blocked sequence, the one of fewer
    blocks (:func:`schedule`).
    """
    return schedule(op, dev, where).order


def _sequence(
    op: object,
    p: Plan,
    dev: Device,
    where: Mapping[str, tuple[str, int]],
    sch: Schedule,
) -> tuple[list[legality.Transfer], tuple[tuple[int, str], ...]]:
    """The transfers of ``sch`` and the sequence's waits (none unblocked)."""
    if not sch.blocks:
        return _transfers(op, p, dev, where, sch.order), ()
    walks = _walks(op, p, where, sch.order)
    inner = p.n_passes if sch.order == "mn" else p.m_passes
    outs = [f"out_{c}" for c in range(p.columns)]
    transfers: list[legality.Transfer] = []
    waits: list[tuple[int, str]] = []
    for i, blk in enumerate(sch.blocks):
        transfers += _block_transfers(p, dev, walks, inner, blk, i % 2)
        if i:  # the previous block's outputs: its descriptor ids are free after
            waits += [(len(transfers), f) for f in outs]
    waits += [(len(transfers), f) for f in outs]
    return transfers, tuple(waits)


def layout(
    op: object,
    dev: Device,
    where: Mapping[str, tuple[str, int]] | None = None,
) -> legality.Layout:
    """What the design of resolved ``op`` places on ``dev`` (not yet checked).

    ``where`` maps each port to ``(argument, element offset)``; by default
    each port is its own buffer at offset 0.
    """
    where = dict(where or {q: (q, 0) for q in _PORTS})
    p = plan(op, dev)
    cols, R, tm, tk, tn = p.columns, p.rows, p.tm, p.tk, p.tn
    shim = [legality.Tile(c, 0) for c in range(cols)]
    mem = [legality.Tile(c, _MEM_ROW) for c in range(cols)]
    core = [[legality.Tile(c, _CORE_ROW + r) for r in range(R)] for c in range(cols)]
    fifos = []
    for g, rows in enumerate(p.groups):
        fifos.append(
            legality.Fifo(f"a_{g}", shim[g], (mem[g],), _DEPTH, len(rows) * tm * tk)
        )
        for r in rows:
            row_cores = tuple(core[c][r] for c in range(cols))
            fifos.append(legality.Fifo(f"a_row{r}", mem[g], row_cores, _DEPTH, tm * tk))
    for c in range(cols):
        fifos += [
            legality.Fifo(f"b_{c}", shim[c], (mem[c],), _DEPTH, tk * tn),
            legality.Fifo(f"b_col{c}", mem[c], tuple(core[c]), _DEPTH, tk * tn),
        ]
        fifos += [
            legality.Fifo(f"c_{c}_{r}", core[c][r], (mem[c],), _DEPTH, tm * tn)
            for r in range(R)
        ]
        fifos.append(legality.Fifo(f"out_{c}", mem[c], (shim[c],), _DEPTH, R * tm * tn))
    transfers, waits = _sequence(op, p, dev, where, schedule(op, dev, where))
    cores = tuple(t for column in core for t in column)
    return legality.Layout(
        repr(op),
        cores,
        tuple(fifos),
        tuple(transfers),
        buffers=tuple((t, tm * tn * _F32) for t in cores),
        waits=waits,
    )


# -- local emitters (candidates for mlir.py) ---------------------------------------


def _objectfifo(
    b: Builder,
    name: str,
    producer: str,
    consumers: Sequence[str],
    elem: str,
    dims: Sequence[tuple[int, int]] | None = None,
) -> None:
    """``aie.objectfifo`` with an optional ``dimensionsToStream`` [dims_to_stream]."""
    if not dims:
        b.objectfifo(name, producer, consumers, _DEPTH, elem)
        return
    pattern = ", ".join(f"<size = {n}, stride = {s}>" for n, s in dims)
    b.line(
        f"aie.objectfifo @{name}({producer} dimensionsToStream [{pattern}], "
        f"{{{', '.join(consumers)}}}, {_DEPTH} : i32) : !aie.objectfifo<{elem}>"
    )


def _link(
    b: Builder,
    sources: Sequence[str],
    dests: Sequence[str],
    src_offsets: Sequence[int] = (),
    dst_offsets: Sequence[int] = (),
) -> None:
    """``aie.objectfifo.link [@s...] -> [@d...] ([offs] [offs])`` [link_distribute], [link_join]."""

    def names(fifos: Sequence[str]) -> str:
        return "[" + ", ".join(f"@{f}" for f in fifos) + "]"

    def ints(values: Sequence[int]) -> str:
        return "[" + ", ".join(str(v) for v in values) + "]"

    b.line(
        f"aie.objectfifo.link {names(sources)} -> {names(dests)} "
        f"({ints(src_offsets)} {ints(dst_offsets)})"
    )


def build(
    op: object,
    dev: Device,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
    words: Words | None = None,
) -> Design:
    """The design of GEMM ``op`` on ``dev`` (see the module docstring).

    GEMM has no per-call parameters, so ``words`` adds nothing.

    Raises:
        NotImplementedError: ``op`` runs at ``MEDIUM`` (bfp16) on NPU2.
        iron.runtime.npu.legality.LegalityError: A device limit is broken.
        iron.core.operator.RefusedShapeError: The operator refuses ``dev``.
        ValueError: A placement is too small, misplaced, or names no port.
    """
    op = op.resolved(dev)
    op.check(dev)
    level = op.effective_precision
    key = (level, bool(op.b_transposed))
    if key not in ACCUMULATE:
        raise NotImplementedError(
            f"{op!r}: GEMM at effective_precision={level.value!r} (bfp16 blocks) "
            f"has no NPU kernel yet; give precision='high' or 'highest'"
        )
    acc_sym = ACCUMULATE[key]
    args, where = _sequence_args(
        op,
        {
            "a": op.M * op.K * _ITEM,
            "b": op.K * op.N * _ITEM,
            "out": op.M * op.N * _ITEM,
        },
        placement,
        arena_bytes,
        unit=_ITEM,
    )
    lay = layout(op, dev, where)
    legality.check(lay, dev)

    p = plan(op, dev)
    cols, R, tm, tk, tn = p.columns, p.rows, p.tm, p.tk, p.tn
    a_t = memref((tm, tk))
    b_t = memref((tn, tk) if op.b_transposed else (tk, tn))
    c_t, acc_t = memref((tm, tn)), memref((tm, tn), "f32")
    obj = f"{KERNEL_SOURCE}.o"
    ints3 = ["i32", "i32", "i32"]
    b = Builder()
    b.comment(f"IRON design: {op!r} on {dev.name}; mlir-aie {MLIR_AIE_RELEASE}")
    with b.region("module"), b.device(dev.name, "main"):
        b.func_decl(ZERO, [acc_t, "i32", "i32"], obj)
        b.func_decl(acc_sym, [a_t, b_t, acc_t, *ints3], obj)
        b.func_decl(STORE, [acc_t, c_t, "i32", "i32"], obj)
        shim_v = [b.tile(c, 0, "shim_noc_tile") for c in range(cols)]
        mem_v = [b.tile(c, _MEM_ROW, "mem_tile") for c in range(cols)]
        core_v = [[b.tile(c, _CORE_ROW + r) for r in range(R)] for c in range(cols)]
        for g, rows in enumerate(p.groups):
            rows_t = memref(len(rows) * tm * tk)
            _objectfifo(b, f"a_{g}", shim_v[g], [mem_v[g]], rows_t)
            for r in rows:
                row_cores = [core_v[c][r] for c in range(cols)]
                dims = stream_dims(op, p, "a")
                _objectfifo(b, f"a_row{r}", mem_v[g], row_cores, a_t, dims)
            _link(
                b,
                [f"a_{g}"],
                [f"a_row{r}" for r in rows],
                dst_offsets=[i * tm * tk for i in range(len(rows))]
                if len(rows) > 1
                else (),
            )
        for c in range(cols):
            _objectfifo(b, f"b_{c}", shim_v[c], [mem_v[c]], memref(tk * tn))
            dims = stream_dims(op, p, "b")
            _objectfifo(b, f"b_col{c}", mem_v[c], core_v[c], b_t, dims)
            _link(b, [f"b_{c}"], [f"b_col{c}"])
            for r in range(R):
                _objectfifo(b, f"c_{c}_{r}", core_v[c][r], [mem_v[c]], c_t)
            dims = stream_dims(op, p, "out")
            _objectfifo(b, f"out_{c}", mem_v[c], [shim_v[c]], memref(R * tm * tn), dims)
            _link(
                b,
                [f"c_{c}_{r}" for r in range(R)],
                [f"out_{c}"],
                src_offsets=[r * tm * tn for r in range(R)] if R > 1 else (),
            )
        accs = {
            (c, r): b.buffer(core_v[c][r], f"acc_{c}_{r}", acc_t)
            for c in range(cols)
            for r in range(R)
        }
        for c in range(cols):
            for r in range(R):
                _core(
                    b,
                    core_v[c][r],
                    accs[c, r],
                    c,
                    r,
                    p,
                    acc_sym,
                    (a_t, b_t, c_t, acc_t),
                )
        _runtime_sequence(b, args, lay.transfers, ["out"], cols, points=lay.waits)
    return _design(b, op, dev, args, (KERNEL_SOURCE,), lay)


def _core(
    b: Builder,
    tile: str,
    acc: str,
    c: int,
    r: int,
    p: Plan,
    acc_sym: str,
    types: tuple[str, str, str, str],
) -> None:
    """Core ``(c, 2 + r)``: per output tile, zero, accumulate every K tile, store."""
    a_t, b_t, c_t, acc_t = types
    a_fifo, b_fifo, c_fifo = f"a_row{r}", f"b_col{c}", f"c_{c}_{r}"
    with b.core(tile):
        c0, c1 = b.constant(0, "index"), b.constant(1, "index")
        forever = b.constant(INDEX_MAX, "index")
        n_tiles = b.constant(p.tiles, "index")
        n_k = b.constant(p.k_tiles, "index")
        i_m, i_k, i_n = (b.constant(v, "i32") for v in (p.tm, p.tk, p.tn))
        with b.for_(c0, forever, c1, "run"), b.for_(c0, n_tiles, c1, "t"):
            b.call(ZERO, [acc, i_m, i_n], [acc_t, "i32", "i32"])
            with b.for_(c0, n_k, c1, "k"):
                a = b.acquire(a_fifo, "Consume", a_t, "a")
                bb = b.acquire(b_fifo, "Consume", b_t, "b")
                b.call(
                    acc_sym,
                    [a, bb, acc, i_m, i_k, i_n],
                    [a_t, b_t, acc_t, "i32", "i32", "i32"],
                )
                b.release(a_fifo, "Consume")
                b.release(b_fifo, "Consume")
            out = b.acquire(c_fifo, "Produce", c_t, "c")
            b.call(STORE, [acc, out, i_m, i_n], [acc_t, c_t, "i32", "i32"])
            b.release(c_fifo, "Produce")
        b.end()
