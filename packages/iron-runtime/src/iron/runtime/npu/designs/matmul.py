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
  row tiles exceed the shim's iteration limit.
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
each transfer a buffer descriptor of the shim's. A batch whose repeated
walks need more descriptors than a shim has is refused, naming the tunables
or the batch split that fit.

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
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace

from iron.core.device import Device
from iron.core.operator import RefusedShapeError
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
    Precision.MEDIUM: ("gemv_f32_zero", "gemv_bfp16_acc_round", "gemv_bf16_store"),
}

_PORTS = ("w", "x", "out")

# (element offset, sizes, strides) of one shim walk.
_Walk = tuple[int, tuple[int, ...], tuple[int, ...]]


def handles(op: object) -> bool:
    """Whether ``op`` is a GEMV."""
    return type(op).__name__ in FAMILY


def _batch(op: object) -> int:
    """The products a run computes: ``batch``, or 1 unbatched."""
    return getattr(op, "batch", None) or 1


def _sizes(op: object) -> dict[str, int]:
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
    cols, tm, tk, M, K = op.num_aie_columns, op.tile_m, op.tile_k, op.M, op.K
    batch = _batch(op)
    rows = M // cols  # rows per column
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
            tiled = [
                (block + s * tm * K, (n, k_tiles, tm, tk), (tm * K, tk, K, 1))
                for s, n in _groups(seq, iters)
            ]
            walks["w"] = tiled if cols == 1 else _batched(tiled, batch, M * K, dev)
        base = where["x"][1]
        xs, xt = linear_walk(K, _ITEM, dev)
        if k_tiles == 1:  # whole, once per product
            walks["x"] = _batched([(base, xs, xt)], batch, K, dev, run=K)
        elif xs[0] == 1:  # again for every row tile: the iteration, stride 0
            per = [
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
                        f"{port}_{c}", shim[c], arg, offset, sizes, strides, _ITEM, bd
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


def _descriptors(lay: legality.Layout) -> tuple[legality.Tile, int]:
    """The shim tile with the most transfers, and how many it has."""
    count: dict[legality.Tile, int] = {}
    for t in lay.transfers:
        count[t.shim] = count.get(t.shim, 0) + 1
    return max(count.items(), key=lambda kv: kv[1])


def _fits_descriptors(op: object, dev: Device, **change: object) -> bool:
    """Whether ``op`` with ``change`` passes its check and fits the shim's descriptors."""
    fields = {**op.fields(), **change}
    try:
        type(op)(**fields).check(dev)
    except (RefusedShapeError, ValueError):
        return False
    return _descriptors(layout(SimpleNamespace(**fields), dev))[1] <= dev.shim_bds


def _check_descriptors(op: object, dev: Device, lay: legality.Layout) -> None:
    """Refuse a batched layout whose per-product walks overflow a shim's descriptors.

    Raises:
        iron.runtime.npu.legality.LegalityError: Naming the tile, the count,
            the limit and the changes that fit.
    """
    if op.batch is None:
        return  # legality's own message covers the unbatched walks
    shim, need = _descriptors(lay)
    if need <= dev.shim_bds:
        return
    ways = [
        f"{name}={value}"
        for name, value in (("tile_k", op.K), ("num_aie_columns", 1))
        if getattr(op, name) != value and _fits_descriptors(op, dev, **{name: value})
    ]
    most = next(
        (n for n in range(op.batch - 1, 0, -1) if _fits_descriptors(op, dev, batch=n)),
        None,
    )
    split = (
        f"split the batch into GEMVs of at most {most} products"
        if most
        else "run the products as unbatched GEMVs"
    )
    fix = (
        f"Give {' or '.join(ways)}, or {split}"
        if ways
        else split[0].upper() + split[1:]
    )
    raise legality.LegalityError(
        f"{op!r} on {dev}: {shim}: the batched walks need {need} buffer "
        f"descriptors, as {op.batch} products' w and x walks repeat per product "
        f"(tile_k={op.tile_k} of K={op.K} over {op.num_aie_columns} columns); a "
        f"shim tile has {dev.shim_bds}. {fix}"
    )


def _core(
    b: Builder,
    op: object,
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
    op: object,
    dev: Device,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
    words: Words | None = None,
) -> Design:
    """The design of GEMV ``op`` on ``dev`` (see the module docstring).

    Raises:
        iron.runtime.npu.legality.LegalityError: A device limit is broken
            (for a batch: more per-product walks than a shim's descriptors).
        iron.core.operator.RefusedShapeError: The operator refuses ``dev``
            (``MEDIUM`` given as the effective precision on NPU1, say).
        ValueError: A placement is too small, misplaced, or names no port.
    """
    op = op.resolved(dev)
    op.check(dev)
    level = op.effective_precision
    zero, acc_sym, store = SYMBOLS[level]
    args, where = _sequence_args(
        op,
        {p: _sizes(op)[p] * _ITEM for p in _PORTS},
        placement,
        arena_bytes,
        unit=_ITEM,
    )
    lay = layout(op, dev, where)
    _check_descriptors(op, dev, lay)
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
                _core(b, op, c, accs[c], (zero, acc_sym, store), (w_t, x_t, out_t))
                b.end()
        _runtime_sequence(b, args, lay.transfers, ["out"], cols)
    return _design(b, op, dev, args, (KERNEL_SOURCE,), lay)
