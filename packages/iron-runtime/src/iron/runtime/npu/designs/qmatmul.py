"""The quantized-weight designs: ``QGEMV`` and ``DequantRows`` on packed rows.

The weight stays packed from the host to the core: a shim moves the packed
row bytes (:mod:`iron.operators.quantized`'s groups, each self-contained),
and the kernel (``qmatmul.cc``) dequantizes one group at a time into bf16
on its stack and multiplies it at once, so no bf16 copy of a weight exists
in device memory, nor a dequantized tile in a core's.

``QGEMV`` (``out = w @ x``, ``w`` ``(M, row_bytes)`` uint8) splits its ``M``
rows over ``num_aie_columns`` columns, one core per column at row 2, as the
bf16 GEMV design does (:mod:`.gemv`). Per column three object FIFOs of depth
2 run between the column's shim and its core:

* ``w_<c>``: ``tile_m`` packed rows of ``tile_k`` elements,
  ``tile_m * row_bytes(tile_k)`` bytes (``i8``). A row's K tile is the
  contiguous run of its groups, so the shim walks the column's rows tile by
  tile as ``(row tiles, K tiles, tile_m, row_bytes(tile_k))`` with strides
  ``(tile_m * row_bytes(K), row_bytes(tile_k), row_bytes(K), 1)`` bytes (one
  linear run when ``tile_k == K`` or ``tile_m == 1``), in groups of at most
  the iteration limit of row tiles. K is a multiple of 64, so every run is
  whole 4-byte words in every format.
* ``x_<c>``: ``x`` whole when ``tile_k == K`` (acquired once, kept across
  the column's row tiles), else ``tile_k`` chunks sent again for every row
  tile (the iteration dimension with stride 0).
* ``out_<c>``: ``tile_m`` bf16 results per row tile.

The runtime sequence per column drains ``out``, then fills ``w`` and ``x``,
then waits on every ``out``. Walks needing more buffer descriptors than a
shim has (many row tiles in K tiles: Llama-2-7B's head, M=32000 and
K=4096, in tiles of 4 x 2048) run in blocks of a column's row tiles
instead, as GEMV's (:mod:`.gemv`): each block per column ``w``, ``x``, then
``out``, whose transfer issues a token; blocks alternate between the two
halves of a shim's descriptor ids, and after issuing block ``i`` the
sequence waits on block ``i - 1``'s ``out`` of every column (which retires
its ``w`` and ``x``: the core consumed them before its last result left),
and on the last block at the end. A block holds at most half a shim's ids
and two transfers per FIFO (``legality.TileLimits.task_queue``).

The core keeps an fp32 accumulator of ``tile_m`` in a core-local
``aie.buffer``: per row tile ``qmatmul_f32_zero``, per K tile
``qgemv_acc(w, x, acc, tile_m, tile_k, bits, group)``, then
``qmatmul_bf16_store`` into ``out``. That is ``QGEMV.reference``'s
arithmetic (HIGHEST: one rounding at the store) and ``QGEMV.cost``'s calls;
the packed bytes the shims move are ``cost``'s ``M * row_bytes``.

``DequantRows`` (``(rows, row_bytes)`` uint8 to ``(rows, K)`` bf16, the
quantized embedding's lookup) runs on one core: ``w_0`` takes a tile of
``tile_rows`` packed rows, ``out_0`` gives back their bf16 rows, and the core
calls ``qdequant_rows(w, out, tile_rows, K, bits, group)`` per tile.
``tile_rows`` is the most rows (dividing ``rows``) whose packed and bf16
tiles fit a core double-buffered.

Ports are their own arguments (``w`` an ``i8`` memref) or placed at planned
offsets of a shared argument (the arena), addressed there in bf16 elements
as every family's are: the packed bytes then move as byte pairs, which
needs a 4-byte aligned offset (legality names it otherwise).

The kernels' contract is in ``qmatmul.cc``
(:func:`iron.runtime.npu.kernels.contract` of ``qmatmul``).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Mapping
from typing import Any

from iron.core.device import Device
from iron.core.dma import linear_walk
from iron.operators.qmatmul import QGEMV, DequantRows
from iron.runtime.image import Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design, Words
from iron.runtime.npu.designs.gemv import check_out_words, fits_shims
from iron.runtime.npu.designs.sequence import (
    assemble,
    column_fifos,
    runtime_sequence,
    sequence_args,
)
from iron.runtime.npu.mlir import INDEX_MAX, MLIR_AIE_RELEASE, Builder, memref

__all__ = ["FAMILY", "KERNEL_SOURCE", "SYMBOLS", "build", "handles", "layout"]

_BF16 = 2
_F32 = 4
_BYTE = 1
_CORE_ROW = 2

#: The operators this module designs.
FAMILY: tuple[type, ...] = (QGEMV, DequantRows)

#: The kernel source (``qmatmul.cc``, linked as ``qmatmul.o``).
KERNEL_SOURCE = "qmatmul"

#: QGEMV's symbols (zero, accumulate, store) and DequantRows' one.
SYMBOLS = {
    "qgemv": ("qmatmul_f32_zero", "qgemv_acc", "qmatmul_bf16_store"),
    "dequant": ("qdequant_rows",),
}

# (element offset, sizes, strides) of one shim walk.
_Walk = tuple[int, tuple[int, ...], tuple[int, ...]]


def handles(op: Any) -> bool:
    """Whether ``op`` is a QGEMV or a DequantRows."""
    return isinstance(op, FAMILY)


def _groups(count: int, most: int) -> list[tuple[int, int]]:
    """``(start, length)`` runs of at most ``most`` covering ``range(count)``."""
    return [(s, min(most, count - s)) for s in range(0, count, most)]


def _item(where: Mapping[str, tuple[str, int]], port: str) -> int:
    """Bytes of one addressed element of ``w``: its own argument is bytes
    (``i8``), a shared one (the arena) bf16 elements, byte pairs."""
    return _BYTE if where[port][0] == port else _BF16


def _packed(op: Any, k: int) -> int:
    """Bytes of a packed row of ``k`` elements."""
    return int(op.quant_format.row_bytes(k))


def _qgemv_sizes(op: Any) -> dict[str, int]:
    """Each port's bytes."""
    return {"w": op.M * op.row_bytes, "x": op.K * _BF16, "out": op.M * _BF16}


def _qgemv_walks(
    op: Any,
    dev: Device,
    where: Mapping[str, tuple[str, int]],
    c: int,
    first: int = 0,
    count: int | None = None,
) -> dict[str, list[_Walk]]:
    """Column ``c``'s walks of ``out``, ``w`` and ``x`` over its row tiles
    ``first`` to ``first + count`` (all by default; module docstring)."""
    cols, tm, tk, K = op.num_aie_columns, op.tile_m, op.tile_k, op.K
    rows = op.M // cols
    k_tiles = K // tk
    n = rows // tm - first if count is None else count
    iters = dev.dma_iteration_max
    u = _item(where, "w")
    rb, rbk = op.row_bytes // u, _packed(op, tk) // u
    walks: dict[str, list[_Walk]] = {}
    sizes, strides = linear_walk(n * tm, _BF16, dev)
    walks["out"] = [(where["out"][1] + c * rows + first * tm, sizes, strides)]
    block = where["w"][1] + (c * rows + first * tm) * rb
    if k_tiles == 1 or tm == 1:  # the tile walk is the rows' own order
        sizes, strides = linear_walk(n * tm * rb, u, dev)
        walks["w"] = [(block, sizes, strides)]
    else:
        walks["w"] = [
            (block + s * tm * rb, (g, k_tiles, tm, rbk), (tm * rb, rbk, rb, 1))
            for s, g in _groups(n, iters)
        ]
    base = where["x"][1]
    xs, xt = linear_walk(K, _BF16, dev)
    if k_tiles == 1:  # whole, once, with the column's first row tile
        walks["x"] = [(base, xs, xt)] if first == 0 else []
    elif xs[0] == 1:  # again for every row tile: the iteration, stride 0
        walks["x"] = [(base, (g, *xs[1:]), (0, *xt[1:])) for _, g in _groups(n, iters)]
    else:
        walks["x"] = [(base, xs, xt)] * n
    return walks


def _qgemv_transfers(
    op: Any,
    dev: Device,
    where: Mapping[str, tuple[str, int]],
    block: tuple[int, int] | None = None,
    half: int | None = None,
) -> list[legality.Transfer]:
    """Every column's transfers of its row tiles ``block`` (``(first,
    count)``; all by default).

    ``half`` None: all at once, per column ``out``, ``w``, ``x``, ids from 0.
    Else one block of a sequence with waits: per column ``w``, ``x``, then
    ``out``, whose transfer issues the token, ids from ``half`` times half a
    shim's.
    """
    first, count = block or (0, None)
    ports = ("out", "w", "x") if half is None else ("w", "x", "out")
    found: list[legality.Transfer] = []
    for c in range(op.num_aie_columns):
        shim = legality.Tile(c, 0)
        walks = _qgemv_walks(op, dev, where, c, first, count)
        bd = 0 if half is None else half * (dev.shim_bds // 2)
        for port in ports:
            item = _item(where, "w") if port == "w" else _BF16
            for offset, sizes, strides in walks[port]:
                found.append(
                    legality.Transfer(
                        f"{port}_{c}",
                        shim,
                        where[port][0],
                        offset,
                        sizes,
                        strides,
                        item,
                        bd,
                    )
                )
                bd += 1
        if half is not None:
            found[-1] = dataclasses.replace(found[-1], token=True)
    return found


def _qgemv_blocks(
    op: Any, dev: Device, where: Mapping[str, tuple[str, int]]
) -> tuple[tuple[int, int], ...]:
    """The fewest equal blocks of a column's row tiles that each fit; () if none.

    A block holds at most half a shim's descriptor ids and two transfers per
    FIFO, so two blocks in flight stay within the ids and a channel's task
    queue (``legality.TileLimits.task_queue``), as GEMV's blocks
    (:mod:`.gemv`). A block's ``out`` is whole 4-byte words.
    """
    units = op.M // op.num_aie_columns // op.tile_m
    per_fifo = legality.TILE_LIMITS[dev.arch].task_queue // 2
    words = dev.dma_granule_bytes

    def fits(blk: tuple[int, int]) -> bool:
        if blk[1] * op.tile_m * _BF16 % words:
            return False
        ts = _qgemv_transfers(op, dev, where, blk, 0)
        most = max(collections.Counter(t.fifo for t in ts).values())
        return most <= per_fifo and fits_shims(ts, dev, dev.shim_bds // 2)

    for count in range(2, units + 1):
        size = -(-units // count)
        blocks = tuple((s, min(size, units - s)) for s in range(0, units, size))
        if all(fits(blk) for blk in blocks):
            return blocks
    return ()


def _qgemv_layout(
    op: Any, dev: Device, where: Mapping[str, tuple[str, int]]
) -> legality.Layout:
    """The columns' FIFOs and walks: at once when they fit a shim's
    descriptors, else in blocks of row tiles with waits (module docstring),
    else at once (legality refuses them, naming the shim and the limit)."""
    cols, tm, tk = op.num_aie_columns, op.tile_m, op.tile_k
    x_elems = op.K if tk == op.K else tk
    fifos = []
    for c in range(cols):
        shim, core = legality.Tile(c, 0), legality.Tile(c, _CORE_ROW)
        fifos += [
            legality.Fifo(
                f"w_{c}", shim, (core,), op.fifo_depth, tm * _packed(op, tk), _BYTE
            ),
            legality.Fifo(f"x_{c}", shim, (core,), op.fifo_depth, x_elems),
            legality.Fifo(f"out_{c}", core, (shim,), op.fifo_depth, tm),
        ]
    transfers = _qgemv_transfers(op, dev, where)
    waits: list[tuple[int, str]] = []
    if not fits_shims(transfers, dev, dev.shim_bds) and (
        blocks := _qgemv_blocks(op, dev, where)
    ):
        outs = [f"out_{c}" for c in range(cols)]
        transfers = []
        for i, blk in enumerate(blocks):
            transfers += _qgemv_transfers(op, dev, where, blk, i % 2)
            if i:  # the block before: its descriptor ids are free after
                waits += [(len(transfers), f) for f in outs]
        waits += [(len(transfers), f) for f in outs]
    cores = tuple(legality.Tile(c, _CORE_ROW) for c in range(cols))
    return legality.Layout(
        repr(op),
        cores,
        tuple(fifos),
        tuple(transfers),
        legality.core_stack(dev, (KERNEL_SOURCE,)),
        buffers=tuple((t, tm * _F32) for t in cores),
        waits=tuple(waits),
    )


def dequant_tile_rows(op: Any, dev: Device) -> int:
    """The rows of a DequantRows tile: the most dividing ``rows`` whose packed
    and bf16 tiles fit a core double-buffered with the stack (at least 1)."""
    stack = legality.core_stack(dev, (KERNEL_SOURCE,))
    per_row = _packed(op, op.K) + op.K * _BF16
    fits = [
        t
        for t in range(1, op.rows + 1)
        if op.rows % t == 0 and 2 * t * per_row + stack <= dev.core_memory_bytes
    ]
    return max(fits, default=1)


def _dequant_layout(
    op: Any, dev: Device, where: Mapping[str, tuple[str, int]]
) -> legality.Layout:
    tr = dequant_tile_rows(op, dev)
    shim, core = legality.Tile(0, 0), legality.Tile(0, _CORE_ROW)
    fifos = (
        legality.Fifo("w_0", shim, (core,), 2, tr * _packed(op, op.K), _BYTE),
        legality.Fifo("out_0", core, (shim,), 2, tr * op.K),
    )
    u = _item(where, "w")
    ws, wt = linear_walk(op.rows * op.row_bytes // u, u, dev)
    os_, ot = linear_walk(op.rows * op.K, _BF16, dev)
    transfers = (
        legality.Transfer("out_0", shim, where["out"][0], where["out"][1], os_, ot),
        legality.Transfer("w_0", shim, where["w"][0], where["w"][1], ws, wt, u, 1),
    )
    return legality.Layout(
        repr(op),
        (core,),
        fifos,
        transfers,
        legality.core_stack(dev, (KERNEL_SOURCE,)),
    )


def layout(
    op: Any,
    dev: Device,
    where: Mapping[str, tuple[str, int]] | None = None,
) -> legality.Layout:
    """What the design of resolved ``op`` places on ``dev`` (not yet checked).

    ``where`` maps each port to ``(argument, element offset)`` as
    :func:`.sequence.sequence_args` gives it; by default each port is its
    own buffer at offset 0.
    """
    ports = ("w", "x", "out") if isinstance(op, QGEMV) else ("w", "out")
    where = dict(where or {p: (p, 0) for p in ports})
    if isinstance(op, QGEMV):
        return _qgemv_layout(op, dev, where)
    return _dequant_layout(op, dev, where)


def _build_qgemv(
    op: Any,
    dev: Device,
    placement: Mapping[str, Placement] | None,
    arena_bytes: int | None,
) -> Design:
    check_out_words(op, dev)
    args, where = sequence_args(
        op, _qgemv_sizes(op), placement, arena_bytes, unit=_BF16
    )
    lay = layout(op, dev, where)
    legality.check(lay, dev)

    cols, tm, tk, K = op.num_aie_columns, op.tile_m, op.tile_k, op.K
    zero, acc_sym, store = SYMBOLS["qgemv"]
    w_t, x_t = memref(tm * _packed(op, tk), "i8"), memref(K if tk == K else tk)
    out_t, acc_t = memref(tm), memref(tm, "f32")
    acc_types = [w_t, x_t, acc_t, "i32", "i32", "i32", "i32"]
    obj = f"{KERNEL_SOURCE}.o"
    b = Builder()
    b.comment(f"IRON design: {op!r} on {dev.name}; mlir-aie {MLIR_AIE_RELEASE}")
    with b.region("module"), b.device(dev.name, "main"):
        b.func_decl(zero, [acc_t, "i32"], obj)
        b.func_decl(acc_sym, acc_types, obj)
        b.func_decl(store, [acc_t, out_t, "i32"], obj)
        shim_v = [b.tile(c, 0, "shim_noc_tile") for c in range(cols)]
        core_v = [b.tile(c, _CORE_ROW) for c in range(cols)]
        column_fifos(b, lay.fifos, shim_v, core_v, {"w": w_t, "x": x_t, "out": out_t})
        accs = [b.buffer(core_v[c], f"acc_{c}", acc_t) for c in range(cols)]
        for c in range(cols):
            with b.core(core_v[c], stack_size=lay.stack_bytes):
                c0, c1 = b.constant(0, "index"), b.constant(1, "index")
                forever = b.constant(INDEX_MAX, "index")
                n_rows = b.constant(op.M // cols // tm, "index")
                n_k = b.constant(K // tk, "index")
                i_m, i_k = b.constant(tm, "i32"), b.constant(tk, "i32")
                bits, group = b.constant(op.bits, "i32"), b.constant(op.group, "i32")
                with b.for_(c0, forever, c1, "run"):
                    whole = tk == K
                    x = b.acquire(f"x_{c}", "Consume", x_t, "x") if whole else None
                    with b.for_(c0, n_rows, c1, "r"):
                        b.call(zero, [accs[c], i_m], [acc_t, "i32"])
                        with b.for_(c0, n_k, c1, "k"):
                            w = b.acquire(f"w_{c}", "Consume", w_t, "w")
                            xk = x or b.acquire(f"x_{c}", "Consume", x_t, "x")
                            b.call(
                                acc_sym,
                                [w, xk, accs[c], i_m, i_k, bits, group],
                                acc_types,
                            )
                            b.release(f"w_{c}", "Consume")
                            if x is None:
                                b.release(f"x_{c}", "Consume")
                        out = b.acquire(f"out_{c}", "Produce", out_t, "out")
                        b.call(store, [accs[c], out, i_m], [acc_t, out_t, "i32"])
                        b.release(f"out_{c}", "Produce")
                    if x is not None:
                        b.release(f"x_{c}", "Consume")
                b.end()
        dtypes = {"w": "i8"}
        runtime_sequence(
            b, args, lay.transfers, ["out"], cols, dtypes=dtypes, points=lay.waits
        )
    return assemble(b, op, dev, args, (KERNEL_SOURCE,), lay)


def _build_dequant(
    op: Any,
    dev: Device,
    placement: Mapping[str, Placement] | None,
    arena_bytes: int | None,
) -> Design:
    need = {"w": op.rows * op.row_bytes, "out": op.rows * op.K * _BF16}
    args, where = sequence_args(op, need, placement, arena_bytes, unit=_BF16)
    lay = layout(op, dev, where)
    legality.check(lay, dev)

    tr = dequant_tile_rows(op, dev)
    (symbol,) = SYMBOLS["dequant"]
    w_t, out_t = memref(tr * _packed(op, op.K), "i8"), memref(tr * op.K)
    types = [w_t, out_t, "i32", "i32", "i32", "i32"]
    b = Builder()
    b.comment(f"IRON design: {op!r} on {dev.name}; mlir-aie {MLIR_AIE_RELEASE}")
    with b.region("module"), b.device(dev.name, "main"):
        b.func_decl(symbol, types, f"{KERNEL_SOURCE}.o")
        shim_v = [b.tile(0, 0, "shim_noc_tile")]
        core_v = [b.tile(0, _CORE_ROW)]
        column_fifos(b, lay.fifos, shim_v, core_v, {"w": w_t, "out": out_t})
        with b.core(core_v[0], stack_size=lay.stack_bytes):
            c0, c1 = b.constant(0, "index"), b.constant(1, "index")
            forever = b.constant(INDEX_MAX, "index")
            count = b.constant(op.rows // tr, "index")
            scalars = [b.constant(v, "i32") for v in (tr, op.K, op.bits, op.group)]
            with b.for_(c0, forever, c1, "run"), b.for_(c0, count, c1, "t"):
                w = b.acquire("w_0", "Consume", w_t, "w")
                out = b.acquire("out_0", "Produce", out_t, "out")
                b.call(symbol, [w, out, *scalars], types)
                b.release("w_0", "Consume")
                b.release("out_0", "Produce")
            b.end()
        runtime_sequence(b, args, lay.transfers, ["out"], 1, dtypes={"w": "i8"})
    return assemble(b, op, dev, args, (KERNEL_SOURCE,), lay)


def build(
    op: Any,
    dev: Device,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
    words: Words | None = None,
) -> Design:
    """The design of QGEMV or DequantRows ``op`` on ``dev`` (module docstring).

    Neither has per-call parameters, so ``words`` is not read.

    Raises:
        iron.runtime.npu.legality.LegalityError: A device limit is broken (a
            packed tile row past the shim's wrap, walks no blocking fits in a
            shim's descriptors, an arena ``w`` off a 4-byte boundary, say).
        iron.core.operator.RefusedShapeError: The operator refuses ``dev``.
        ValueError: A placement is too small, misplaced, or names no port.
    """
    op = op.resolved(dev)
    op.check(dev)
    if isinstance(op, QGEMV):
        return _build_qgemv(op, dev, placement, arena_bytes)
    return _build_dequant(op, dev, placement, arena_bytes)
