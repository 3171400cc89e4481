"""The GEMV design: ``out = w @ x`` in bf16 with fp32 accumulation.

``GEMV`` (unbatched) splits its ``M`` rows over ``num_aie_columns`` columns,
one core per column at row 2; a column owns ``M / num_aie_columns`` rows and
produces them ``tile_m`` at a time. Per column there are three object FIFOs
of depth 2 between the column's shim tile and its core (no memory tile):

* ``w_<c>``: ``tile_m x tile_k`` bf16 tiles of ``w``. The shim walks the
  column's row block tile by tile (row tile outermost, then K tile, then the
  tile's rows): one linear run when ``tile_k == K`` or ``tile_m == 1`` (the
  walk is then the block's own order), else ``(row tiles, K tiles, tile_m,
  tile_k)``, split into several transfers when the row tiles exceed the
  shim's iteration limit.
* ``x_<c>``: ``x`` whole (when ``tile_k == K``: the core acquires it once
  per run and keeps it across the row tiles), else ``tile_k`` chunks, which
  the shim sends again for every row tile (the iteration dimension with
  stride 0).
* ``out_<c>``: ``tile_m`` bf16 results per row tile.

The core keeps an fp32 accumulator of ``tile_m`` in a core-local
``aie.buffer``. Per row tile it calls ``gemv_f32_zero(acc, tile_m)``, then for
each K tile acquires ``w`` (and an ``x`` chunk), calls ``gemv_bf16_acc(w, x,
acc, tile_m, tile_k)`` (``HIGHEST``: the sum stays fp32, one rounding at the
store) or ``gemv_bf16_acc_round`` (``HIGH``: the partial sum is rounded to bf16
after every K tile, as ``iron.operators.matmul.model_product`` models it),
and finally ``gemv_bf16_store(acc, out, tile_m)`` rounds to bf16 into the
output FIFO. All four symbols live in ``gemv.cc`` (its contract:
:func:`iron.runtime.npu.kernels.contract` of ``gemv``).

The runtime sequence per column drains ``out`` (buffer descriptor 0), then
fills ``w`` and ``x``, from host buffers or from the arena at the planned
offsets (as :mod:`.elementwise`), then waits on every ``out``. ``MEDIUM``
(bfp16 on NPU2) and batched GEMV have no design yet and raise
:class:`NotImplementedError`.
"""

from __future__ import annotations

from collections.abc import Mapping

from iron.core.device import Device
from iron.core.precision import Precision
from iron.runtime.image import Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design, Words, linear_walk
from iron.runtime.npu.designs._common import (
    _design,
    _runtime_sequence,
    _sequence_args,
)
from iron.runtime.npu.mlir import INDEX_MAX, MLIR_AIE_RELEASE, Builder, memref

__all__ = ["FAMILY", "KERNEL_SOURCE", "SYMBOLS", "build", "handles", "layout"]

_ITEM = 2  # bf16
_F32 = 4
_DEPTH = 2  # double-buffered, as GEMV.check() counts the tiles
_CORE_ROW = 2

#: The operators this module designs.
FAMILY = ("GEMV",)

#: The kernel source (``<KERNEL_SOURCE>.cc``, linked as ``<KERNEL_SOURCE>.o``).
KERNEL_SOURCE = "gemv"

#: The kernel symbols per effective precision: (zero, accumulate, store).
SYMBOLS: dict[Precision, tuple[str, str, str]] = {
    Precision.HIGHEST: ("gemv_f32_zero", "gemv_bf16_acc", "gemv_bf16_store"),
    Precision.HIGH: ("gemv_f32_zero", "gemv_bf16_acc_round", "gemv_bf16_store"),
}

_PORTS = ("w", "x", "out")


def handles(op: object) -> bool:
    """Whether ``op`` is a GEMV."""
    return type(op).__name__ in FAMILY


def _sizes(op: object) -> dict[str, int]:
    return {"w": op.M * op.K, "x": op.K, "out": op.M}


def _groups(count: int, most: int) -> list[tuple[int, int]]:
    """``(start, length)`` runs of at most ``most`` covering ``range(count)``."""
    return [(s, min(most, count - s)) for s in range(0, count, most)]


def layout(
    op: object,
    dev: Device,
    where: Mapping[str, tuple[str, int]] | None = None,
) -> legality.Layout:
    """What the design of resolved ``op`` places on ``dev`` (not yet checked).

    ``where`` maps each port to ``(argument, element offset)``; by default
    each port is its own buffer at offset 0.
    """
    where = dict(where or {p: (p, 0) for p in _PORTS})
    cols, tm, tk, K = op.num_aie_columns, op.tile_m, op.tile_k, op.K
    rows = op.M // cols  # rows per column
    row_tiles = rows // tm
    k_tiles = K // tk
    shim = [legality.Tile(c, 0) for c in range(cols)]
    cores = [legality.Tile(c, _CORE_ROW) for c in range(cols)]
    x_elems = K if k_tiles == 1 else tk

    fifos, transfers = [], []
    for c in range(cols):
        fifos += [
            legality.Fifo(f"w_{c}", shim[c], (cores[c],), _DEPTH, tm * tk),
            legality.Fifo(f"x_{c}", shim[c], (cores[c],), _DEPTH, x_elems),
            legality.Fifo(f"out_{c}", cores[c], (shim[c],), _DEPTH, tm),
        ]
    iters = dev.dma_iteration_max
    for c in range(cols):
        bd = 0
        arg, base = where["out"]
        sizes, strides = linear_walk(rows, _ITEM, dev)
        transfers.append(
            legality.Transfer(
                f"out_{c}", shim[c], arg, base + c * rows, sizes, strides, _ITEM, bd
            )
        )
        bd += 1
        arg, base = where["w"]
        block = base + c * rows * K
        if k_tiles == 1 or tm == 1:  # the tile walk is the block's own order
            sizes, strides = linear_walk(rows * K, _ITEM, dev)
            walks = [(block, sizes, strides)]
        else:
            walks = [
                (block + s * tm * K, (n, k_tiles, tm, tk), (tm * K, tk, K, 1))
                for s, n in _groups(row_tiles, iters)
            ]
        for offset, sizes, strides in walks:
            transfers.append(
                legality.Transfer(
                    f"w_{c}", shim[c], arg, offset, sizes, strides, _ITEM, bd
                )
            )
            bd += 1
        arg, base = where["x"]
        xs, xt = linear_walk(K, _ITEM, dev)
        if k_tiles == 1:  # whole, once per run
            walks = [(xs, xt)]
        elif xs[0] == 1:  # again for every row tile: the iteration, stride 0
            walks = [((n, *xs[1:]), (0, *xt[1:])) for _, n in _groups(row_tiles, iters)]
        else:
            walks = [(xs, xt)] * row_tiles
        for sizes, strides in walks:
            transfers.append(
                legality.Transfer(
                    f"x_{c}", shim[c], arg, base, sizes, strides, _ITEM, bd
                )
            )
            bd += 1
    return legality.Layout(
        repr(op),
        tuple(cores),
        tuple(fifos),
        tuple(transfers),
        buffers=tuple((t, tm * _F32) for t in cores),
    )


def build(
    op: object,
    dev: Device,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
    words: Words | None = None,
) -> Design:
    """The design of GEMV ``op`` on ``dev`` (see the module docstring).

    Raises:
        NotImplementedError: ``op`` is batched, or runs at ``MEDIUM`` (bfp16).
        iron.runtime.npu.legality.LegalityError: A device limit is broken.
        iron.core.operator.RefusedShapeError: The operator refuses ``dev``.
        ValueError: A placement is too small, misplaced, or names no port.
    """
    if op.batch is not None:
        raise NotImplementedError(
            f"{op!r}: batched GEMV (batch={op.batch}) has no NPU design yet; run "
            f"it on the emulated NPU (IRON_BACKEND=emu) or as {op.batch} GEMVs"
        )
    op = op.resolved(dev)
    op.check(dev)
    level = op.effective_precision
    if level not in SYMBOLS:
        raise NotImplementedError(
            f"{op!r}: GEMV at effective_precision={level.value!r} (bfp16 blocks) "
            f"has no NPU kernel yet; give precision='high' or 'highest'"
        )
    zero, acc_sym, store = SYMBOLS[level]
    args, where = _sequence_args(
        op,
        {p: _sizes(op)[p] * _ITEM for p in _PORTS},
        placement,
        arena_bytes,
        unit=_ITEM,
    )
    lay = layout(op, dev, where)
    legality.check(lay, dev)

    cols, tm, tk, K = op.num_aie_columns, op.tile_m, op.tile_k, op.K
    row_tiles = op.M // cols // tm
    k_tiles = K // tk
    w_t, x_t = memref((tm, tk)), memref(K if k_tiles == 1 else tk)
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
        for f in lay.fifos:
            c = f.producer.col
            port = f.name.rsplit("_", 1)[0]
            prod, cons = (
                (shim_v[c], core_v[c])
                if f.producer.kind == "shim"
                else (core_v[c], shim_v[c])
            )
            b.objectfifo(f.name, prod, [cons], f.depth, elem[port])
        accs = [b.buffer(core_v[c], f"acc_{c}", acc_t) for c in range(cols)]
        for c in range(cols):
            with b.core(core_v[c]):
                c0, c1 = b.constant(0, "index"), b.constant(1, "index")
                forever = b.constant(INDEX_MAX, "index")
                n_rows = b.constant(row_tiles, "index")
                n_k = b.constant(k_tiles, "index")
                i_m, i_k = b.constant(tm, "i32"), b.constant(tk, "i32")
                x_fifo, w_fifo, o_fifo = f"x_{c}", f"w_{c}", f"out_{c}"
                with b.for_(c0, forever, c1, "run"):
                    x = b.acquire(x_fifo, "Consume", x_t, "x") if k_tiles == 1 else None
                    with b.for_(c0, n_rows, c1, "r"):
                        b.call(zero, [accs[c], i_m], [acc_t, "i32"])
                        with b.for_(c0, n_k, c1, "k"):
                            w = b.acquire(w_fifo, "Consume", w_t, "w")
                            xk = x or b.acquire(x_fifo, "Consume", x_t, "x")
                            b.call(
                                acc_sym,
                                [w, xk, accs[c], i_m, i_k],
                                [w_t, x_t, acc_t, "i32", "i32"],
                            )
                            b.release(w_fifo, "Consume")
                            if x is None:
                                b.release(x_fifo, "Consume")
                        out = b.acquire(o_fifo, "Produce", out_t, "out")
                        b.call(store, [accs[c], out, i_m], [acc_t, out_t, "i32"])
                        b.release(o_fifo, "Produce")
                    if x is not None:
                        b.release(x_fifo, "Consume")
                b.end()
        _runtime_sequence(b, args, lay.transfers, ["out"], cols)
    return _design(b, op, dev, args, (KERNEL_SOURCE,), lay)
