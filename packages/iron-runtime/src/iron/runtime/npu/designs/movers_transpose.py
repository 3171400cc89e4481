"""The ``Transpose`` design of :mod:`.movers`: blocks through cores.

``x`` (``(B,) R, C`` bf16) is cut into ``tile_rows x tile_cols`` blocks,
numbered row-major over ``(batch, block row, block column)``; column ``c``
of ``num_aie_columns`` takes the contiguous run of blocks from ``c * total //
columns`` (so every column has ``total / columns`` blocks, rounded down or
up: ``Transpose.cost`` counts the larger as calls). Per column, object FIFO
``x_<c>`` (shim to the core at row 2, depth 2, a ``tile_rows x tile_cols``
block) and ``out_<c>`` (core to shim, depth 2, the ``tile_cols x tile_rows``
block); no memory tile. The core loops forever over its blocks: acquire a
block of each, call ``transpose_bf16(x, out, tile_rows, tile_cols)``
(``transpose_bf16.cc``: 8x8 sub-blocks swapped with ``aie::transpose``),
release.

The shim walks a column's run as boxes of blocks, each box one transfer
per direction: a part of a block row, whole block rows of one batch, or
whole batches when a batch is one block row or one block column (at most
two block dimensions, the outer one at most the iteration's 64). Block
``(b, i, j)`` is read at ``b R C + i tile_rows C + j tile_cols`` with sizes
``(tile_rows, tile_cols)`` and strides ``(C, 1)`` and written at ``b C R + j
tile_cols R + i tile_rows`` with sizes ``(tile_cols, tile_rows)`` and strides
``(R, 1)``: the shim moves whole words, the core swaps the elements. The
sequence issues each column's boxes in rounds of the channel queue (inputs
first); a round that leaves more ends with a wait on that column's output.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from iron.core.device import Device
from iron.runtime.image import Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design
from iron.runtime.npu.designs.movers_copy import (
    TASK_QUEUE,
    Wait,
    emit_sequence,
    sequenced,
)
from iron.runtime.npu.designs.sequence import assemble, sequence_args
from iron.runtime.npu.mlir import INDEX_MAX, MLIR_AIE_RELEASE, Builder, memref

__all__ = ["KERNEL", "blocks_of_column", "boxes", "build_transpose"]

#: The kernel symbol (and source, ``transpose_bf16.cc``).
KERNEL = "transpose_bf16"

_ITEM = 2  # bf16: Transpose takes bf16 x only (its Input's dtype)
_DEPTH = 2  # double-buffered in and out, as Transpose.check() counts
_CORE_ROW = 2

# A box: (b0, nb, i0, ni, j0, nj) blocks.
Box = tuple[int, int, int, int, int, int]


def blocks_of_column(total: int, columns: int, col: int) -> tuple[int, int]:
    """The ``[start, end)`` run of blocks column ``col`` transposes."""
    return col * total // columns, (col + 1) * total // columns


def boxes(
    start: int, end: int, grid: tuple[int, int, int], whole_batches: bool
) -> list[Box]:
    """Blocks ``[start, end)`` of a ``(B, nI, nJ)`` grid as boxes, in order.

    A box has at most two block dimensions longer than one; whole batches
    merge only when ``whole_batches`` (a batch is one block row or column and
    a batch's stride fits a descriptor step).
    """
    nb_all, ni_all, nj_all = grid
    per_batch = ni_all * nj_all
    found: list[Box] = []
    s = start
    while s < end:
        b, rem = divmod(s, per_batch)
        i, j = divmod(rem, nj_all)
        left = end - s
        if j or left < nj_all:  # part of a block row
            n = min(nj_all - j, left)
            found.append((b, 1, i, 1, j, n))
            s += n
        elif i or left < per_batch:  # whole block rows of batch b
            n = min(ni_all - i, left // nj_all)
            found.append((b, 1, i, n, 0, nj_all))
            s += n * nj_all
        else:  # whole batches
            nb = min(left // per_batch, nb_all - b) if whole_batches else 1
            found.append((b, nb, 0, ni_all, 0, nj_all))
            s += nb * per_batch
    return found


def _walks(op: Any, box: Box, xbase: int, obase: int, iters: int):
    """``(read, write)`` ``(offset, sizes, strides)`` of a box, split by ``iters``."""
    R, C, tr, tc = op.rows, op.cols, op.tile_rows, op.tile_cols
    b0, nb, i0, ni, j0, nj = box
    # (count, read stride, write stride) of each block dimension, outermost first
    dims = [(nb, R * C, C * R, "b"), (ni, tr * C, tr, "i"), (nj, tc, tc * R, "j")]
    dims = [d for d in dims if d[0] > 1] or [dims[-1]]
    dims = [(1, 0, 0, "")] * (2 - len(dims)) + dims
    (n0, r0, w0, a0), (n1, r1, w1, _) = dims
    found = []
    for g in range(0, n0, iters):
        cnt = min(iters, n0 - g)
        at = {"b": b0, "i": i0, "j": j0}
        if a0:
            at[a0] += g
        r_off = xbase + at["b"] * R * C + at["i"] * tr * C + at["j"] * tc
        w_off = obase + at["b"] * C * R + at["j"] * tc * R + at["i"] * tr
        read = (
            r_off,
            (cnt, n1, tr, tc),
            (r0 if cnt > 1 else 0, r1 if n1 > 1 else 0, C, 1),
        )
        write = (
            w_off,
            (cnt, n1, tc, tr),
            (w0 if cnt > 1 else 0, w1 if n1 > 1 else 0, R, 1),
        )
        found.append((read, write))
    return found


def build_transpose(
    op: Any,
    dev: Device,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
) -> Design:
    """The design of ``Transpose`` ``op`` on ``dev`` (see the module docstring).

    Raises:
        iron.core.operator.RefusedShapeError: The operator refuses ``dev``.
        iron.runtime.npu.legality.LegalityError: A device limit is broken.
        ValueError: A placement is too small, misplaced, or names no port.
    """
    op = op.resolved(dev)
    op.check(dev)
    B = op.batch or 1
    R, C, tr, tc, ncol = (
        op.rows,
        op.cols,
        op.tile_rows,
        op.tile_cols,
        op.num_aie_columns,
    )
    grid = (B, R // tr, C // tc)
    total = B * grid[1] * grid[2]
    need = {"x": B * R * C * _ITEM, "out": B * R * C * _ITEM}
    args, where = sequence_args(op, need, placement, arena_bytes, unit=_ITEM)
    (xarg, xbase), (oarg, obase) = where["x"], where["out"]
    step_max = (1 << dev.dma_stride_bits) * dev.dma_granule_bytes // _ITEM
    whole = (grid[1] == 1 or grid[2] == 1) and R * C <= step_max
    shim = [legality.Tile(c, 0) for c in range(ncol)]
    cores = [legality.Tile(c, _CORE_ROW) for c in range(ncol)]
    fifos, per_col, counts = [], [], []
    for c in range(ncol):
        fifos += [
            legality.Fifo(f"x_{c}", shim[c], (cores[c],), _DEPTH, tr * tc),
            legality.Fifo(f"out_{c}", cores[c], (shim[c],), _DEPTH, tc * tr),
        ]
        lo, hi = blocks_of_column(total, ncol, c)
        counts.append(hi - lo)
        pairs = [
            w
            for box in boxes(lo, hi, grid, whole)
            for w in _walks(op, box, xbase, obase, dev.dma_iteration_max)
        ]
        outs = [
            legality.Transfer(f"out_{c}", shim[c], oarg, o, s, t, _ITEM, k)
            for k, (_, (o, s, t)) in enumerate(pairs)
        ]
        ins = [
            legality.Transfer(f"x_{c}", shim[c], xarg, o, s, t, _ITEM, len(pairs) + k)
            for k, ((o, s, t), _) in enumerate(pairs)
        ]
        per_col.append((outs, ins))
    items: list = []
    rounds = max(len(outs) for outs, _ in per_col)
    for start in range(0, rounds, TASK_QUEUE):
        waits = []
        for outs, ins in per_col:
            part = slice(start, start + TASK_QUEUE)
            o_part, i_part = outs[part], ins[part]
            last = start + TASK_QUEUE >= len(outs)
            # A round's inputs go before its outputs: the wait on the last
            # output's token then retires the round's inputs too (a wait
            # retires what was issued before its token), so no channel holds
            # more than a round, a task queue, outstanding.
            items += [(t, False) for t in i_part]
            items += [(t, k == len(o_part) - 1) for k, t in enumerate(o_part)]
            if o_part and not last:
                waits.append(Wait(o_part[-1].fifo))
        items += waits
    items += [Wait(f"out_{c}") for c in range(ncol)]

    transfers = tuple(t for outs, ins in per_col for t in outs + ins)
    layout = sequenced(
        legality.Layout(
            repr(op),
            tuple(cores),
            tuple(fifos),
            transfers,
            legality.core_stack(dev, (KERNEL,)),
        ),
        items,
    )
    legality.check(layout, dev)

    blk_in, blk_out = memref((tr, tc)), memref((tc, tr))
    types = [blk_in, blk_out, "i32", "i32"]
    b = Builder()
    b.comment(f"IRON design: {op!r} on {dev.name}; mlir-aie {MLIR_AIE_RELEASE}")
    with b.region("module"), b.device(dev.name, "main"):
        b.func_decl(KERNEL, types, f"{KERNEL}.o")
        shim_v = [b.tile(t.col, t.row, "shim_noc_tile") for t in shim]
        core_v = [b.tile(t.col, t.row) for t in cores]
        for c in range(ncol):
            b.objectfifo(f"x_{c}", shim_v[c], [core_v[c]], _DEPTH, blk_in)
            b.objectfifo(f"out_{c}", core_v[c], [shim_v[c]], _DEPTH, blk_out)
        for c in range(ncol):
            with b.core(core_v[c], stack_size=layout.stack_bytes):
                c0, c1 = b.constant(0, "index"), b.constant(1, "index")
                forever = b.constant(INDEX_MAX, "index")
                count = b.constant(counts[c], "index")
                rows_i, cols_i = b.constant(tr, "i32"), b.constant(tc, "i32")
                with b.for_(c0, forever, c1, "run"), b.for_(c0, count, c1, "blk"):
                    x = b.acquire(f"x_{c}", "Consume", blk_in, "x")
                    o = b.acquire(f"out_{c}", "Produce", blk_out, "out")
                    b.call(KERNEL, [x, o, rows_i, cols_i], types)
                    b.release(f"x_{c}", "Consume")
                    b.release(f"out_{c}", "Produce")
                b.end()
        emit_sequence(b, args, items, "bf16")
    return assemble(b, op, dev, args, (KERNEL,), layout)
