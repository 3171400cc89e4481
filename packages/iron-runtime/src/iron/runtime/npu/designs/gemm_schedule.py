"""The GEMM design's work and its order, for the design of :mod:`.gemm`.

This module owns which output tiles each core computes (:class:`GemmTiling`), the
order the cores walk them (:func:`tile_order`), the shim walks that feed
them folded into 4-D buffer descriptors, and the blocks a long sequence runs
in (:class:`Schedule`, :func:`schedule`). :mod:`.gemm` describes the layout
and emits the design.

The order the cores walk the tiles (M passes outer, ``mn``, or N passes
outer, ``nm``) is the one whose shim walks need fewer buffer descriptors on
the busiest shim; a walk repeating a tile (``a`` once per N pass, ``b`` once
per M pass) repeats it on the shim's iteration dimension (stride 0) where it
can, else issues one transfer per repetition.

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
blocking fits is refused by legality.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from iron.core.device import Device
from iron.operators.matmul import mmul_shape
from iron.runtime.npu import legality

__all__ = [
    "ITEM",
    "PORTS",
    "GemmTiling",
    "PackedRows",
    "Schedule",
    "schedule",
    "sequence_transfers",
    "tile_order",
    "tiling",
]

#: Bytes of a bf16 element.
ITEM = 2

#: The ports, in the order their walks are issued.
PORTS = ("a", "b", "out")


@dataclasses.dataclass(frozen=True)
class GemmTiling:
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


@dataclasses.dataclass(frozen=True)
class PackedRows:
    """``b`` as ``N`` rows of another item: a quantized weight's packed rows.

    QGEMM's ``w`` (``(N, row_bytes)`` uint8, :mod:`iron.operators.quantized`)
    is walked as a transposed ``b`` is, a tile being ``tile_n`` rows' K tiles,
    with a row and its K tile counted in ``item``-byte items instead of bf16
    elements. Given to :func:`schedule` and :func:`sequence_transfers`, it
    replaces ``b``'s walk; ``a``'s and ``out``'s are GEMM's.

    Attributes:
        row: Items of one whole row (all of K).
        tile: Items of one row's K tile.
        item: Bytes of an item (1 for a byte argument, 2 in the arena).
    """

    row: int
    tile: int
    item: int


def tiling(op: Any, dev: Device) -> GemmTiling:
    """The :class:`GemmTiling` of resolved, checked GEMM ``op`` on ``dev``.

    ``op`` is a GEMM or an operator with its fields (``M``, ``K``, ``N``, the
    tiles, ``num_aie_columns``, ``effective_precision``): QGEMM.

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
    return GemmTiling(
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


def _fold(
    offset: int, dims: Sequence[tuple[int, int]], dev: Device, item: int = ITEM
) -> list[tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """A loop nest of ``(size, stride)``, outermost first, as 4-D shim walks.

    Dimensions of size 1 are dropped and contiguous neighbours merged while
    the merged size fits its field. The innermost (at most three) dimensions
    with a nonzero stride become d2, d1, d0; the next one out is the
    iteration (split at the iteration limit); any further out are unrolled
    into separate transfers, as is any dimension whose stride exceeds the
    step field (the transfer's offset carries it). Sizes and strides count
    ``item``-byte items. Returns ``(offset, sizes, strides)`` per walk.
    """
    wrap = (1 << dev.dma_size_bits) - 1
    inner_max = wrap * dev.dma_granule_bytes // item
    nest: list[tuple[int, int]] = []  # innermost first
    for n, s in reversed([d for d in dims if d[0] > 1]):
        if nest and s and s == nest[-1][0] * nest[-1][1]:
            size = n * nest[-1][0]
            if size <= (inner_max if len(nest) == 1 else wrap):
                nest[-1] = (size, nest[-1][1])
                continue
        nest.append((n, s))
    step_max = (1 << dev.dma_stride_bits) * dev.dma_granule_bytes // item
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
    op: Any,
    p: GemmTiling,
    where: Mapping[str, tuple[str, int]],
    order: str,
    packed: PackedRows | None = None,
) -> dict[str, list[tuple[str, int, list[tuple[int, int]]]]]:
    """Each shim FIFO's ``(argument, offset, loop nest)``, for tile order ``order``.

    ``b``'s nest counts ``packed.item`` items when ``packed`` is given, else bf16.
    """
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
        if packed is not None:  # packed rows: as (N, K), in the rows' items
            row, tile = packed.row, packed.tile
            nest = [
                *passes(0, cols * tn * row),
                (p.k_tiles, tile),
                (tn, row),
                (tile, 1),
            ]
            found[f"b_{c}"] = [(arg, base + c * tn * row, nest)]
        elif op.b_transposed:  # (N, K): a tile is tile_n rows of tile_k
            nest = [*passes(0, cols * tn * K), (p.k_tiles, tk), (tn, K), (tk, 1)]
            found[f"b_{c}"] = [(arg, base + c * tn * K, nest)]
        else:
            nest = [*passes(0, cols * tn), (p.k_tiles, tk * N), (tk, N), (tn, 1)]
            found[f"b_{c}"] = [(arg, base + c * tn, nest)]
    return found


def _item(name: str, packed: PackedRows | None) -> int:
    """Bytes of an item of FIFO ``name``'s walk."""
    return packed.item if packed is not None and name.startswith("b_") else ITEM


def _transfers(
    op: Any,
    p: GemmTiling,
    dev: Device,
    where: Mapping[str, tuple[str, int]],
    order: str,
    packed: PackedRows | None = None,
) -> list[legality.Transfer]:
    """The shim transfers of tile order ``order``: per column ``out``, ``a``, ``b``."""
    walks = _walks(op, p, where, order, packed)
    transfers = []
    for c in range(p.columns):
        shim = legality.Tile(c, 0)
        bd = 0
        for name in (f"out_{c}", f"a_{c}", f"b_{c}"):
            item = _item(name, packed)
            for arg, offset, nest in walks.get(name, []):
                for off, sizes, strides in _fold(offset, nest, dev, item):
                    transfers.append(
                        legality.Transfer(
                            name, shim, arg, off, sizes, strides, item, bd
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
    p: GemmTiling,
    dev: Device,
    walks: Mapping[str, list[tuple[str, int, list[tuple[int, int]]]]],
    inner: int,
    block: tuple[int, int],
    half: int,
    packed: PackedRows | None = None,
) -> list[legality.Transfer]:
    """One block's transfers: per column ``a``, ``b``, then ``out``.

    The last ``out`` transfer of a column issues the token. ``walks`` are
    ``_walks`` of the tile order, whose inner passes number ``inner``;
    buffer descriptor ids count from ``half`` times half a shim's.
    """
    found = []
    for c in range(p.columns):
        shim = legality.Tile(c, 0)
        bd = half * (dev.shim_bds // 2)
        for name in (f"a_{c}", f"b_{c}", f"out_{c}"):
            item = _item(name, packed)
            for arg, offset, nest in walks.get(name, []):
                (_, s_o), (_, s_i), *rest = nest
                for o, i, n, whole in _runs(*block, inner):
                    base = offset + o * s_o + i * s_i
                    dims = [(n, s_o), nest[1], *rest] if whole else [(n, s_i), *rest]
                    for off, sizes, strides in _fold(base, dims, dev, item):
                        found.append(
                            legality.Transfer(
                                name, shim, arg, off, sizes, strides, item, bd
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
    op: Any,
    p: GemmTiling,
    dev: Device,
    where: Mapping[str, tuple[str, int]],
    order: str,
    packed: PackedRows | None = None,
) -> tuple[tuple[int, int], ...]:
    """The fewest equal blocks (the last may be short) that each fit; () if none."""
    walks = _walks(op, p, where, order, packed)
    inner = p.n_passes if order == "mn" else p.m_passes
    units = p.tiles
    if not _block_fits(_block_transfers(p, dev, walks, inner, (0, 1), 0, packed), dev):
        return ()  # not even one output tile a block
    tried = set()
    for count in range(2, units + 1):
        size = -(-units // count)
        if size in tried:
            continue
        tried.add(size)
        blocks = tuple((s, min(size, units - s)) for s in range(0, units, size))
        if all(
            _block_fits(_block_transfers(p, dev, walks, inner, blk, 0, packed), dev)
            for blk in blocks
        ):
            return blocks
    return ()


def schedule(
    op: Any,
    dev: Device,
    where: Mapping[str, tuple[str, int]] | None = None,
    packed: PackedRows | None = None,
) -> Schedule:
    """How resolved ``op``'s sequence runs on ``dev``: the tile order, and blocks.

    ``packed``: ``b`` is packed rows (:class:`PackedRows`), walked as such.

    Unblocked when the order of fewer descriptors on the busiest shim (then
    fewer in all; ``mn`` on a tie) fits a shim's descriptors at once and
    queues at most a channel's ``task_queue`` transfers on each FIFO (the
    hardware drops a push onto a full queue: mlir-aie PR #3734); else
    the order needing fewer blocks (that order on a tie). With no blocking
    that fits, the unblocked schedule, which legality refuses naming the
    shim and the count.
    """
    where = dict(where or {q: (q, 0) for q in PORTS})
    p = tiling(op, dev)
    walks = {o: _transfers(op, p, dev, where, o, packed) for o in ("mn", "nm")}

    def busiest(order: str) -> tuple[int, int]:
        per = collections.Counter(t.shim for t in walks[order])
        return max(per.values()), len(walks[order])

    def pushes(order: str) -> int:
        """The most transfers one FIFO's channel queues without a wait."""
        return max(collections.Counter(t.fifo for t in walks[order]).values())

    first = min(("mn", "nm"), key=busiest)
    queued = pushes(first) <= legality.TILE_LIMITS[dev.arch].task_queue
    if queued and busiest(first)[0] <= dev.shim_bds and _legal(walks[first], dev):
        return Schedule(first)
    found = [
        Schedule(order, blocks)
        for order in dict.fromkeys((first, "mn", "nm"))
        if (blocks := _blocks(op, p, dev, where, order, packed))
    ]
    return min(found, key=lambda s: len(s.blocks)) if found else Schedule(first)


def tile_order(
    op: Any, dev: Device, where: Mapping[str, tuple[str, int]] | None = None
) -> str:
    """The order each core walks its output tiles: ``mn`` or ``nm``.

    ``mn``: M passes outer, N passes inner; ``nm`` the reverse. The one whose
    shim walks need fewer buffer descriptors on the busiest shim (then fewer
    in all), ``mn`` on a tie; for a blocked sequence, the one of fewer
    blocks (:func:`schedule`).
    """
    return schedule(op, dev, where).order


def sequence_transfers(
    op: Any,
    p: GemmTiling,
    dev: Device,
    where: Mapping[str, tuple[str, int]],
    sch: Schedule,
    packed: PackedRows | None = None,
) -> tuple[list[legality.Transfer], tuple[tuple[int, str], ...]]:
    """The transfers of ``sch`` and the sequence's waits (none unblocked).

    ``packed``: ``b`` is packed rows (:class:`PackedRows`), walked as such.
    """
    if not sch.blocks:
        return _transfers(op, p, dev, where, sch.order, packed), ()
    walks = _walks(op, p, where, sch.order, packed)
    inner = p.n_passes if sch.order == "mn" else p.m_passes
    outs = [f"out_{c}" for c in range(p.columns)]
    transfers: list[legality.Transfer] = []
    waits: list[tuple[int, str]] = []
    for i, blk in enumerate(sch.blocks):
        transfers += _block_transfers(p, dev, walks, inner, blk, i % 2, packed)
        if i:  # the previous block's outputs: its descriptor ids are free after
            waits += [(len(transfers), f) for f in outs]
    waits += [(len(transfers), f) for f in outs]
    return transfers, tuple(waits)
