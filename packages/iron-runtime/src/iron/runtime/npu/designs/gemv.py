"""The GEMV design: ``out = w @ x`` in bf16 with fp32 accumulation, batched or not.

``GEMV`` splits its ``M`` rows over ``num_aie_columns`` columns, one core per
column at row 2; a column owns ``M / num_aie_columns`` rows of every product
and produces them ``tile_m`` at a time. Batched (``batch`` products: ``w``
``(batch, M, K)``, ``x`` ``(batch, K)``, ``out`` ``(batch, M)``), every column
takes its rows of each product in turn: the batch loop is the outermost loop
of the core and of every shim walk, so a column makes ``batch * rows /
tile_m * K / tile_k`` kernel calls per run, as ``GEMV.cost`` counts them.
Per column there are three object FIFOs of depth 2 between the column's shim
tile and its core (no memory tile):

* ``w_<c>``: ``tile_m x tile_k`` bf16 tiles of ``w``. The shim walks the
  column's row block of each product tile by tile (row tile outermost, then
  K tile, then the tile's rows): one linear run when ``tile_k == K`` or
  ``tile_m == 1`` (the walk is then the block's own order), else ``(row
  tiles, K tiles, tile_m, tile_k)``, split into several transfers when the
  row tiles exceed the shim's iteration limit. A ``tile_k`` row wider than
  the shim's d0 wrap (1023 words: ``tile_k >= 2048`` bf16) is walked as
  ``(tile_k / d, d)``, which takes d1, so each row tile becomes a transfer
  of its own, ``(K tiles, tile_m, tile_k / d, d)``.
* ``x_<c>``: ``x`` whole (when ``tile_k == K``: the core acquires a
  product's ``x`` once and keeps it across that product's row tiles), else
  ``tile_k`` chunks, which the shim sends again for every row tile (the
  iteration dimension with stride 0).
* ``out_<c>``: ``tile_m`` bf16 results per row tile.

Batched walks: a product's walk that leaves the iteration dimension free
takes the batch there (stride one product; at most the iteration limit of
products per transfer); products that lie back to back (``x`` whole, and
``w`` and ``out`` on one column) are one linear run; a ``w`` tile walk on
one column walks the row tiles of every product as one sequence (they are
``tile_m * K`` apart throughout); any other walk repeats once per product,
each transfer a buffer descriptor of the shim's.

The core keeps an fp32 accumulator of ``tile_m`` in a core-local
``aie.buffer``. Per row tile it calls ``gemv_f32_zero(acc, tile_m)``, then for
each K tile acquires ``w`` (and an ``x`` chunk) and calls the accumulate
symbol of the effective precision (:data:`SYMBOLS`) as ``(w, x, acc, tile_m,
tile_k)``: ``gemv_bf16_acc`` (``HIGHEST``: the sum stays fp32, one rounding at
the store), ``gemv_bf16_acc_round`` (``HIGH``: the partial sum is rounded to
bf16 after every K tile, as ``iron.operators.matmul.model_product`` models
it) or ``gemv_bfp16_acc_round`` (``MEDIUM``, NPU2 only: ``w`` and ``x`` are
converted to bfp16 blocks of 8 along K and multiplied in bfp16, then rounded
as at ``HIGH``; :mod:`iron.operators.bfp16` models the blocks); finally
``gemv_bf16_store(acc, out, tile_m)`` rounds to bf16 into the output FIFO.
Every symbol lives in ``gemv.cc`` (its contract:
:func:`iron.runtime.npu.kernels.contract` of ``gemv``); the bfp16 one is
compiled for AIE2P only. ``MEDIUM`` on NPU1 resolves to ``HIGH`` (no bfp16
multiplies), so NPU1 never calls it.

The runtime sequence per column drains ``out`` (buffer descriptor 0), then
fills ``w`` and ``x``, from host buffers or from the arena at the planned
offsets (as :mod:`.elementwise`), then waits on every ``out``.

Walks needing more buffer descriptors than a shim has (many row tiles with
wide tile rows, or a batch whose walks repeat per product) run in blocks
of row tiles instead (counted through the products), as :mod:`.gemm` does:
each block per column ``w``, ``x``, then ``out``, whose last transfer
issues a token; blocks alternate between the two halves of a shim's
descriptor ids; after issuing block ``i`` the sequence waits on block
``i - 1``'s ``out`` of every column (which retires that block's ``w`` and
``x`` on the column's shim: the core consumed them before its last result
left), and on the last block at the end. A block holds at most half a
shim's ids and two transfers per FIFO, so two blocks in flight stay within
a channel's task queue (``legality.TileLimits.task_queue``). A column
whose rows of ``out`` are not whole 4-byte words has no design and is
refused, naming the column counts that fit.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Mapping
from typing import Any

from iron.core.device import Device
from iron.core.dma import linear_walk
from iron.core.precision import Precision
from iron.operators import GEMV
from iron.runtime.image import Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design, Words
from iron.runtime.npu.designs.sequence import (
    assemble,
    column_fifos,
    runtime_sequence,
    sequence_args,
)
from iron.runtime.npu.mlir import INDEX_MAX, MLIR_AIE_RELEASE, Builder, memref

__all__ = [
    "FAMILY",
    "KERNEL_SOURCE",
    "SYMBOLS",
    "build",
    "check_out_words",
    "fits_shims",
    "handles",
    "layout",
]

_ITEM = 2  # bf16
_F32 = 4
_CORE_ROW = 2

#: The operators this module designs.
FAMILY: tuple[type, ...] = (GEMV,)

#: The kernel source (``<KERNEL_SOURCE>.cc``, linked as ``<KERNEL_SOURCE>.o``).
KERNEL_SOURCE = "gemv"

#: The kernel symbols per effective precision: (zero, accumulate, store).
SYMBOLS: dict[Precision, tuple[str, str, str]] = {
    Precision.HIGHEST: ("gemv_f32_zero", "gemv_bf16_acc", "gemv_bf16_store"),
    Precision.HIGH: ("gemv_f32_zero", "gemv_bf16_acc_round", "gemv_bf16_store"),
    Precision.MEDIUM: ("gemv_f32_zero", "gemv_bfp16_acc_round", "gemv_bf16_store"),
}

_PORTS = ("w", "x", "out")

# (element offset, sizes, strides) of one shim walk.
_Walk = tuple[int, tuple[int, ...], tuple[int, ...]]


def handles(op: Any) -> bool:
    """Whether ``op`` is a GEMV."""
    return isinstance(op, FAMILY)


def _batch(op: Any) -> int:
    """The products a run computes: ``batch``, or 1 unbatched."""
    return getattr(op, "batch", None) or 1


def _sizes(op: Any) -> dict[str, int]:
    n = _batch(op)
    return {"w": n * op.M * op.K, "x": n * op.K, "out": n * op.M}


def _groups(count: int, most: int) -> list[tuple[int, int]]:
    """``(start, length)`` runs of at most ``most`` covering ``range(count)``."""
    return [(s, min(most, count - s)) for s in range(0, count, most)]


def _batched(
    walks: list[_Walk],
    batch: int,
    stride: int,
    dev: Device,
    run: int | None = None,
) -> list[_Walk]:
    """The walks of product 0 extended to ``batch`` products ``stride`` apart.

    ``run`` is the length of product 0's one linear run, when it is one:
    products lying back to back (``run == stride``) are then one linear run.
    Else a single walk with a free iteration takes the batch there (in
    groups of at most the iteration limit), and anything else repeats per
    product.
    """
    if batch == 1:
        return walks
    if run is not None and run == stride and len(walks) == 1:
        sizes, strides = linear_walk(batch * run, _ITEM, dev)
        return [(walks[0][0], sizes, strides)]
    if len(walks) == 1 and walks[0][1][0] == 1:
        offset, sizes, strides = walks[0]
        return [
            (
                offset + s * stride,
                (n, *sizes[1:]),
                (stride if n > 1 else 0, *strides[1:]),
            )
            for s, n in _groups(batch, dev.dma_iteration_max)
        ]
    return [(o + p * stride, s, t) for p in range(batch) for o, s, t in walks]


def _fifos(op: Any) -> list[legality.Fifo]:
    """Each column's ``w``, ``x`` and ``out`` object FIFOs."""
    cols, tm, tk = op.num_aie_columns, op.tile_m, op.tile_k
    x_elems = op.K if op.K == tk else tk
    fifos = []
    for c in range(cols):
        shim, core = legality.Tile(c, 0), legality.Tile(c, _CORE_ROW)
        fifos += [
            legality.Fifo(f"w_{c}", shim, (core,), op.fifo_depth, tm * tk),
            legality.Fifo(f"x_{c}", shim, (core,), op.fifo_depth, x_elems),
            legality.Fifo(f"out_{c}", core, (shim,), op.fifo_depth, tm),
        ]
    return fifos


def _whole_walks(
    op: Any, dev: Device, where: Mapping[str, tuple[str, int]]
) -> list[legality.Transfer]:
    """Every column's whole walks at once, the batch folded where it can be."""
    cols, tm, tk, M, K = op.num_aie_columns, op.tile_m, op.tile_k, op.M, op.K
    batch = _batch(op)
    rows = M // cols  # rows per column
    row_tiles = rows // tm
    k_tiles = K // tk
    transfers = []
    iters = dev.dma_iteration_max
    for c in range(cols):
        shim = legality.Tile(c, 0)
        walks: dict[str, list[_Walk]] = {}
        base = where["out"][1]
        sizes, strides = linear_walk(rows, _ITEM, dev)
        walks["out"] = _batched(
            [(base + c * rows, sizes, strides)], batch, M, dev, run=rows
        )
        base = where["w"][1]
        block = base + c * rows * K
        if k_tiles == 1 or tm == 1:  # the tile walk is the block's own order
            sizes, strides = linear_walk(rows * K, _ITEM, dev)
            walks["w"] = _batched(
                [(block, sizes, strides)], batch, M * K, dev, run=rows * K
            )
        else:
            # One column holds every row: the products' row tiles are all
            # tm * K apart, one sequence.
            seq = batch * row_tiles if cols == 1 else row_tiles
            tiled: list[_Walk] = [
                (block + s * tm * K, (n, k_tiles, tm, tk), (tm * K, tk, K, 1))
                for s, n in _groups(seq, iters)
            ]
            walks["w"] = tiled if cols == 1 else _batched(tiled, batch, M * K, dev)
        base = where["x"][1]
        xs, xt = linear_walk(K, _ITEM, dev)
        if k_tiles == 1:  # whole, once per product
            walks["x"] = _batched([(base, xs, xt)], batch, K, dev, run=K)
        elif xs[0] == 1:  # again for every row tile: the iteration, stride 0
            per: list[_Walk] = [
                (base, (n, *xs[1:]), (0, *xt[1:])) for _, n in _groups(row_tiles, iters)
            ]
            walks["x"] = _batched(per, batch, K, dev)
        else:
            walks["x"] = _batched([(base, xs, xt)] * row_tiles, batch, K, dev)
        bd = 0
        for port in ("out", "w", "x"):
            arg = where[port][0]
            for offset, sizes, strides in walks[port]:
                transfers.append(
                    legality.Transfer(
                        f"{port}_{c}", shim, arg, offset, sizes, strides, _ITEM, bd
                    )
                )
                bd += 1
    return transfers


def _row_split(tk: int, dev: Device) -> int | None:
    """The longest run ``d`` of a ``tile_k`` row within the d0 wrap.

    ``d`` divides ``tile_k`` in whole words and ``tile_k / d`` fits d1's
    size field; None if no divisor does.
    """
    wrap = (1 << dev.dma_size_bits) - 1
    g = dev.dma_granule_bytes
    return next(
        (
            d
            for d in range(min(tk, wrap * g // _ITEM), 0, -1)
            if tk % d == 0 and (d * _ITEM) % g == 0 and tk // d <= wrap
        ),
        None,
    )


def _unit_walks(
    op: Any,
    dev: Device,
    where: Mapping[str, tuple[str, int]],
    c: int,
    start: int,
    count: int,
) -> dict[str, list[_Walk]]:
    """Column ``c``'s walks of its row tiles ``start .. start + count``.

    Row tiles count through the products (product ``u // row_tiles``). A
    ``w`` tile whose row of ``tile_k`` is wider than the d0 wrap walks each
    row as ``(tile_k / d, d)`` (:func:`_row_split`), so each row tile takes
    transfers of its own: ``(K tiles, tile_m, tile_k / d, d)``.
    """
    cols, tm, tk, M, K = op.num_aie_columns, op.tile_m, op.tile_k, op.M, op.K
    rows = M // cols
    row_tiles, k_tiles = rows // tm, K // tk
    iters = dev.dma_iteration_max
    wrap_elems = ((1 << dev.dma_size_bits) - 1) * dev.dma_granule_bytes // _ITEM
    split = _row_split(tk, dev) if tk > wrap_elems else None
    xs, xt = linear_walk(K, _ITEM, dev)
    found: dict[str, list[_Walk]] = {"w": [], "x": [], "out": []}
    u, end = start, start + count
    while u < end:
        prod, r0 = divmod(u, row_tiles)
        n = min(row_tiles - r0, end - u)
        u += n
        block = where["w"][1] + prod * M * K + (c * rows + r0 * tm) * K
        if k_tiles == 1 or tm == 1:  # the tiles' walk is the rows' own order
            sizes, strides = linear_walk(n * tm * K, _ITEM, dev)
            found["w"].append((block, sizes, strides))
        elif split is None:
            found["w"] += [
                (block + s * tm * K, (g, k_tiles, tm, tk), (tm * K, tk, K, 1))
                for s, g in _groups(n, iters)
            ]
        else:
            found["w"] += [
                (
                    block + r * tm * K + s * tk,
                    (g, tm, tk // split, split),
                    (tk if g > 1 else 0, K, split, 1),
                )
                for r in range(n)
                for s, g in _groups(k_tiles, iters)
            ]
        x0 = where["x"][1] + prod * K
        if k_tiles == 1:  # whole, with the product's first row tile
            found["x"] += [(x0, xs, xt)] if r0 == 0 else []
        elif xs[0] == 1:  # a chunk per K tile, again for every row tile
            found["x"] += [
                (x0, (g, *xs[1:]), (0, *xt[1:])) for _, g in _groups(n, iters)
            ]
        else:
            found["x"] += [(x0, xs, xt)] * n
        sizes, strides = linear_walk(n * tm, _ITEM, dev)
        found["out"].append(
            (where["out"][1] + prod * M + c * rows + r0 * tm, sizes, strides)
        )
    return found


def _block_transfers(
    op: Any,
    dev: Device,
    where: Mapping[str, tuple[str, int]],
    block: tuple[int, int],
    half: int | None,
) -> list[legality.Transfer]:
    """Every column's transfers of its row tiles ``block`` (``(first, count)``).

    ``half`` None: all at once (per column ``out``, ``w``, ``x``, ids from
    0, as the unblocked sequence). Else one block of a sequence with waits:
    per column ``w``, ``x``, then ``out``, whose last transfer issues the
    token, ids from ``half`` times half a shim's.
    """
    ports = ("out", "w", "x") if half is None else ("w", "x", "out")
    found = []
    for c in range(op.num_aie_columns):
        shim = legality.Tile(c, 0)
        walks = _unit_walks(op, dev, where, c, *block)
        bd = 0 if half is None else half * (dev.shim_bds // 2)
        for port in ports:
            arg = where[port][0]
            for offset, sizes, strides in walks[port]:
                found.append(
                    legality.Transfer(
                        f"{port}_{c}", shim, arg, offset, sizes, strides, _ITEM, bd
                    )
                )
                bd += 1
        if half is not None:
            found[-1] = dataclasses.replace(found[-1], token=True)
    return found


def fits_shims(transfers: list[legality.Transfer], dev: Device, bds: int) -> bool:
    """Within the descriptor limits, at most ``bds`` transfers per shim and at
    most a task queue's transfers per FIFO (issued together, without waits,
    a channel queues them all: ``legality.TileLimits.task_queue``).

    QGEMV's design blocks its long walks by the same rule.
    """
    shims = collections.Counter(t.shim for t in transfers)
    fifos = collections.Counter(t.fifo for t in transfers)
    queue = legality.TILE_LIMITS[dev.arch].task_queue
    return (
        max(shims.values()) <= bds
        and max(fifos.values()) <= queue
        and not any(
            legality.shim_transfer_problems(
                dev, t.sizes, t.strides, t.offset, t.itemsize
            )
            for t in transfers
        )
    )


def _blocks(
    op: Any, dev: Device, where: Mapping[str, tuple[str, int]]
) -> tuple[tuple[int, int], ...]:
    """The fewest equal blocks of row tiles that each fit; () if none does.

    A block holds at most half a shim's descriptor ids and two transfers per
    FIFO: two blocks in flight stay within the ids and a channel's task
    queue (``legality.TileLimits.task_queue``).
    """
    units = _batch(op) * (op.M // op.num_aie_columns // op.tile_m)
    per_fifo = legality.TILE_LIMITS[dev.arch].task_queue // 2

    def fits(blk: tuple[int, int]) -> bool:
        ts = _block_transfers(op, dev, where, blk, 0)
        most = max(collections.Counter(t.fifo for t in ts).values())
        return most <= per_fifo and fits_shims(ts, dev, dev.shim_bds // 2)

    least = 1 if op.tile_m * _ITEM % dev.dma_granule_bytes == 0 else 2
    if units < least or not fits((0, least)):
        return ()  # not even the fewest row tiles of whole words of out
    tried = set()
    for count in range(2, units + 1):
        size = -(-units // count)
        if size in tried:
            continue
        tried.add(size)
        blocks = tuple((s, min(size, units - s)) for s in range(0, units, size))
        if all(fits(blk) for blk in blocks):
            return blocks
    return ()


def layout(
    op: Any,
    dev: Device,
    where: Mapping[str, tuple[str, int]] | None = None,
) -> legality.Layout:
    """What the design of resolved ``op`` places on ``dev`` (not yet checked).

    ``where`` maps each port to ``(argument, element offset)``; by default
    each port is its own buffer at offset 0. The transfers are the whole
    walks (``_whole_walks``) when they fit a shim at once; else the row
    tiles' own walks (wide tile rows split, ``_unit_walks``) at once;
    else those in blocks with waits (``_blocks``); else the whole walks,
    which legality refuses, naming the shim and the limit.
    """
    where = dict(where or {p: (p, 0) for p in _PORTS})
    units = _batch(op) * (op.M // op.num_aie_columns // op.tile_m)
    waits: list[tuple[int, str]] = []
    transfers = _whole_walks(op, dev, where)
    if not fits_shims(transfers, dev, dev.shim_bds):
        at_once = _block_transfers(op, dev, where, (0, units), None)
        if fits_shims(at_once, dev, dev.shim_bds):
            transfers = at_once
        elif blocks := _blocks(op, dev, where):
            outs = [f"out_{c}" for c in range(op.num_aie_columns)]
            transfers = []
            for i, blk in enumerate(blocks):
                transfers += _block_transfers(op, dev, where, blk, i % 2)
                if i:  # the block before: its descriptor ids are free after
                    waits += [(len(transfers), f) for f in outs]
            waits += [(len(transfers), f) for f in outs]
    cores = tuple(legality.Tile(c, _CORE_ROW) for c in range(op.num_aie_columns))
    return legality.Layout(
        repr(op),
        cores,
        tuple(_fifos(op)),
        tuple(transfers),
        legality.core_stack(dev, (KERNEL_SOURCE,)),
        buffers=tuple((t, op.tile_m * _F32) for t in cores),
        waits=tuple(waits),
    )


def check_out_words(op: Any, dev: Device) -> None:
    """Refuse columns whose rows of ``out`` are not whole words of the shim.

    ``op`` is a matrix-vector product whose ``M`` rows of bf16 ``out`` are
    split over ``num_aie_columns`` (GEMV, QGEMV).

    Raises:
        iron.runtime.npu.legality.LegalityError: Naming the rows, the word
            and the column counts that fit.
    """
    rows = op.M // op.num_aie_columns
    g = dev.dma_granule_bytes
    if rows * _ITEM % g == 0:
        return
    fit = [
        c
        for c in (1, 2, 4, 8)
        if c <= dev.columns
        and op.M % (c * op.tile_m) == 0
        and op.M // c * _ITEM % g == 0
    ]
    way = f"give num_aie_columns={' or '.join(map(str, fit))}" if fit else "pad M"
    raise legality.LegalityError(
        f"{op!r} on {dev}: shim tile (0, 0): each column's {rows} rows of out are "
        f"{rows * _ITEM} bytes, and a shim transfer moves whole {g}-byte words; "
        f"{way}"
    )


def _core(
    b: Builder,
    op: Any,
    c: int,
    acc: str,
    symbols: tuple[str, str, str],
    types: tuple[str, str, str],
) -> None:
    """Column ``c``'s core body: forever, each product's row tiles in turn."""
    zero, acc_sym, store = symbols
    w_t, x_t, out_t = types
    acc_t = memref(op.tile_m, "f32")
    whole_x = op.K == op.tile_k
    c0, c1 = b.constant(0, "index"), b.constant(1, "index")
    forever = b.constant(INDEX_MAX, "index")
    n_rows = b.constant(op.M // op.num_aie_columns // op.tile_m, "index")
    n_k = b.constant(op.K // op.tile_k, "index")
    i_m, i_k = b.constant(op.tile_m, "i32"), b.constant(op.tile_k, "i32")
    n_batch = None if op.batch is None else b.constant(op.batch, "index")
    x_fifo, w_fifo, o_fifo = f"x_{c}", f"w_{c}", f"out_{c}"

    def product() -> None:
        # One product's rows of this column: x once (when whole), then per
        # row tile: zero, accumulate per K tile, store.
        x = b.acquire(x_fifo, "Consume", x_t, "x") if whole_x else None
        with b.for_(c0, n_rows, c1, "r"):
            b.call(zero, [acc, i_m], [acc_t, "i32"])
            with b.for_(c0, n_k, c1, "k"):
                w = b.acquire(w_fifo, "Consume", w_t, "w")
                xk = x or b.acquire(x_fifo, "Consume", x_t, "x")
                b.call(acc_sym, [w, xk, acc, i_m, i_k], [w_t, x_t, acc_t, "i32", "i32"])
                b.release(w_fifo, "Consume")
                if x is None:
                    b.release(x_fifo, "Consume")
            out = b.acquire(o_fifo, "Produce", out_t, "out")
            b.call(store, [acc, out, i_m], [acc_t, out_t, "i32"])
            b.release(o_fifo, "Produce")
        if x is not None:
            b.release(x_fifo, "Consume")

    with b.for_(c0, forever, c1, "run"):
        if n_batch is None:
            product()
        else:  # the products one after another, outermost
            with b.for_(c0, n_batch, c1, "b"):
                product()


def build(
    op: Any,
    dev: Device,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
    words: Words | None = None,
) -> Design:
    """The design of GEMV ``op`` on ``dev`` (see the module docstring).

    Raises:
        iron.runtime.npu.legality.LegalityError: A device limit is broken
            (a column's rows of ``out`` not whole 4-byte words, say, or
            walks no blocking fits in a shim's descriptors).
        iron.core.operator.RefusedShapeError: The operator refuses ``dev``
            (``MEDIUM`` given as the effective precision on NPU1, say).
        ValueError: A placement is too small, misplaced, or names no port.
    """
    op = op.resolved(dev)
    op.check(dev)
    check_out_words(op, dev)
    level = op.effective_precision
    zero, acc_sym, store = SYMBOLS[level]
    args, where = sequence_args(
        op,
        {p: _sizes(op)[p] * _ITEM for p in _PORTS},
        placement,
        arena_bytes,
        unit=_ITEM,
    )
    lay = layout(op, dev, where)
    legality.check(lay, dev)

    cols, tm, tk, K = op.num_aie_columns, op.tile_m, op.tile_k, op.K
    w_t, x_t = memref((tm, tk)), memref(K if tk == K else tk)
    out_t, acc_t = memref(tm), memref(tm, "f32")
    elem = {"w": w_t, "x": x_t, "out": out_t}
    obj = f"{KERNEL_SOURCE}.o"
    b = Builder()
    b.comment(f"IRON design: {op!r} on {dev.name}; mlir-aie {MLIR_AIE_RELEASE}")
    with b.region("module"), b.device(dev.name, "main"):
        b.func_decl(zero, [acc_t, "i32"], obj)
        b.func_decl(acc_sym, [w_t, x_t, acc_t, "i32", "i32"], obj)
        b.func_decl(store, [acc_t, out_t, "i32"], obj)
        shim_v = [b.tile(c, 0, "shim_noc_tile") for c in range(cols)]
        core_v = [b.tile(c, _CORE_ROW) for c in range(cols)]
        column_fifos(b, lay.fifos, shim_v, core_v, elem)
        accs = [b.buffer(core_v[c], f"acc_{c}", acc_t) for c in range(cols)]
        for c in range(cols):
            with b.core(core_v[c], stack_size=lay.stack_bytes):
                _core(b, op, c, accs[c], (zero, acc_sym, store), (w_t, x_t, out_t))
                b.end()
        runtime_sequence(b, args, lay.transfers, ["out"], cols, points=lay.waits)
    return assemble(b, op, dev, args, (KERNEL_SOURCE,), lay)
