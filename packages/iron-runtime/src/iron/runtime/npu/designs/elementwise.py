"""Designs for the elementwise family: AXPY, ReLU, binary arithmetic, activations.

Every :class:`iron.operators.elementwise.Elementwise` operator splits its
``size`` bf16 elements over ``num_aie_columns`` columns, one core per column
at row 2. Per column and port there is one object FIFO of ``tile_size``
elements, as deep as the operator's ``fifo_depth`` (2), between the column's
shim tile and its core (no memory tile). The core loops forever over its column's ``size / columns /
tile_size`` tiles: acquire one element of each input FIFO and of the output
FIFO, call ``<op>_bf16(in..., out, tile_size[, scalar bits...])``, release.
The runtime sequence drains each column's slice of the output, fills each
column's slices of the inputs (from the host buffers, or from the arena at
the planned offsets), then waits on the outputs.

Each operator declares its kernel symbol and scalar arguments
(:func:`kernel_of` reads them); each kernel's contract is in its source
(:mod:`iron.runtime.npu.kernels`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from ml_dtypes import bfloat16

from iron.core.device import Device
from iron.core.dma import linear_walk
from iron.operators import (
    AXPY,
    GELU,
    Clamp,
    ElementwiseAdd,
    ElementwiseMul,
    LeakyReLU,
    ReLU,
    Sigmoid,
    SiLU,
    SiLUMul,
    Tanh,
)
from iron.operators.elementwise import Elementwise
from iron.runtime.image import Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design, Words
from iron.runtime.npu.designs.sequence import (
    assemble,
    runtime_sequence,
    sequence_args,
)
from iron.runtime.npu.mlir import INDEX_MAX, MLIR_AIE_RELEASE, Builder, memref

__all__ = ["FAMILY", "build", "handles", "kernel_of"]

_ITEM = 2  # bf16
_CORE_ROW = 2

#: The operators this module designs. Each declares its kernel
#: (``kernel_symbol()``, ``kernel_scalars``) and its FIFOs' depth
#: (``fifo_depth``, which its ``check()`` counts); see
#: :class:`iron.operators.elementwise.Elementwise`.
FAMILY: tuple[type, ...] = (
    AXPY,
    ReLU,
    ElementwiseAdd,
    ElementwiseMul,
    SiLU,
    Sigmoid,
    Tanh,
    GELU,
    LeakyReLU,
    Clamp,
    SiLUMul,
)


def handles(op: Any) -> bool:
    """Whether ``op`` is of the elementwise family."""
    return isinstance(op, FAMILY)


def kernel_of(op: Elementwise) -> tuple[str, tuple[int, ...]]:
    """``op``'s kernel symbol and its scalar arguments (bf16 bit patterns)."""
    bits = tuple(
        int(np.asarray(bfloat16(getattr(op, f)), dtype=bfloat16).view(np.uint16))
        for f in op.kernel_scalars
    )
    return op.kernel_symbol(), bits


def _ports(op: Any) -> tuple[list[str], list[str]]:
    decl = type(op).declaration
    return [i.name for i in decl.inputs], [o.name for o in decl.outputs]


def build(
    op: Any,
    dev: Device,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
    words: Words | None = None,
) -> Design:
    """The design of elementwise ``op`` on ``dev`` (see the module docstring).

    Raises:
        iron.runtime.npu.legality.LegalityError: A device limit is broken.
        iron.core.operator.RefusedShapeError: The operator refuses ``dev``.
        ValueError: A placement is too small, misplaced, or names no port.
    """
    op = op.resolved(dev)
    op.check(dev)
    ins, outs = _ports(op)
    symbol, scalars = kernel_of(op)
    cols, tile = op.num_aie_columns, op.tile_size
    per_col = op.size // cols
    tiles = per_col // tile
    args, where = sequence_args(
        op, {p: op.size * _ITEM for p in ins + outs}, placement, arena_bytes
    )
    shim = [legality.Tile(c, 0) for c in range(cols)]
    cores = [legality.Tile(c, _CORE_ROW) for c in range(cols)]

    fifos, transfers = [], []
    for c in range(cols):
        for p in ins:
            fifos.append(
                legality.Fifo(f"{p}_{c}", shim[c], (cores[c],), op.fifo_depth, tile)
            )
        for p in outs:
            fifos.append(
                legality.Fifo(f"{p}_{c}", cores[c], (shim[c],), op.fifo_depth, tile)
            )
    sizes, strides = linear_walk(per_col, _ITEM, dev)
    for c in range(cols):
        for bd, p in enumerate(outs + ins):
            arg, offset = where[p]
            if offset % _ITEM:
                raise ValueError(
                    f"{op!r}: port {p} is placed at byte {offset}, not on a bf16 "
                    f"boundary"
                )
            transfers.append(
                legality.Transfer(
                    fifo=f"{p}_{c}",
                    shim=shim[c],
                    buffer=arg,
                    offset=offset // _ITEM + c * per_col,
                    sizes=sizes,
                    strides=strides,
                    itemsize=_ITEM,
                    bd_id=bd,
                )
            )
    layout = legality.Layout(
        repr(op),
        tuple(cores),
        tuple(fifos),
        tuple(transfers),
        legality.core_stack(dev, (symbol,)),
    )
    legality.check(layout, dev)

    elem = memref(tile)
    kernel_types = [elem] * (len(ins) + len(outs)) + ["i32"] * (1 + len(scalars))
    b = Builder()
    b.comment(f"IRON design: {op!r} on {dev.name}; mlir-aie {MLIR_AIE_RELEASE}")
    with b.region("module"), b.device(dev.name, "main"):
        b.func_decl(symbol, kernel_types, f"{symbol}.o")
        shim_v = [b.tile(t.col, t.row, "shim_noc_tile") for t in shim]
        core_v = [b.tile(t.col, t.row) for t in cores]
        for f in fifos:
            col = f.producer.col
            prod, cons = (
                (shim_v[col], core_v[col])
                if f.producer.kind == "shim"
                else (core_v[col], shim_v[col])
            )
            b.objectfifo(f.name, prod, [cons], f.depth, elem)
        for c in range(cols):
            _core(
                b,
                core_v[c],
                layout.stack_bytes,
                c,
                ins,
                outs,
                symbol,
                tile,
                tiles,
                scalars,
                kernel_types,
            )
        runtime_sequence(b, args, transfers, outs, cols)
    return assemble(b, op, dev, args, (symbol,), layout)


def _core(
    b: Builder,
    tile: str,
    stack: int | None,
    col: int,
    ins: list[str],
    outs: list[str],
    symbol: str,
    tile_size: int,
    tiles: int,
    scalars: tuple[int, ...],
    kernel_types: list[str],
) -> None:
    """One column's core: forever, per tile, acquire, call the kernel, release."""
    elem = memref(tile_size)
    with b.core(tile, stack_size=stack):
        c0, c1 = b.constant(0, "index"), b.constant(1, "index")
        forever = b.constant(INDEX_MAX, "index")
        count = b.constant(tiles, "index")
        n = b.constant(tile_size, "i32")
        bits = [b.constant(v, "i32") for v in scalars]
        with b.for_(c0, forever, c1, "run"), b.for_(c0, count, c1, "t"):
            bufs = [b.acquire(f"{p}_{col}", "Consume", elem, p) for p in ins]
            bufs += [b.acquire(f"{p}_{col}", "Produce", elem, p) for p in outs]
            b.call(symbol, [*bufs, n, *bits], kernel_types)
            for p in ins:
                b.release(f"{p}_{col}", "Consume")
            for p in outs:
                b.release(f"{p}_{col}", "Produce")
        b.end()
