"""The Dequant design: packed int4 weights times per-group bf16 scales, to bf16.

:class:`iron.operators.dequant.Dequant` splits its ``N`` values over
``num_aie_columns`` columns (a contiguous block of ``N / columns`` values
each), one core per column at row 2. Per column there are three object FIFOs
of depth 2 between the column's shim tile and its core (no memory tile), one
element per tile of ``tile_size`` values:

* ``packed_<c>``: ``tile_size / 2`` bytes (``i8``; two int4 a byte, low
  nibble first, signed);
* ``scales_<c>``: ``tile_size / 32`` bf16 scales, one per group of
  :data:`~iron.operators.dequant.GROUP`;
* ``out_<c>``: ``tile_size`` bf16 results.

The two inputs take the shim's and the core's two input channels. The core
loops forever over its column's ``N / columns / tile_size`` tiles: acquire
one element of each FIFO, call ``dequant_bf16(packed, scales, out,
tile_size)``, release. The runtime sequence per column drains ``out``
(buffer descriptor 0), fills ``packed`` (1) and ``scales`` (2), then waits on
every ``out``.

Arguments: ``packed`` is an ``i8`` memref, ``scales`` and ``out`` bf16. A port
placed in the arena is addressed in the arena's bf16 elements, as every
family's is; the packed bytes then move as bf16 pairs (the shim moves bytes,
the element type only scales the pattern), so an arena ``packed`` needs a
4-byte aligned offset, which legality names otherwise.

The kernel's contract is in ``dequant_bf16.cc``
(:func:`iron.runtime.npu.kernels.contract`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from iron.core.device import Device
from iron.core.dma import linear_walk
from iron.operators import Dequant
from iron.operators import dequant as dequant_operator
from iron.runtime.image import Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design, Words
from iron.runtime.npu.designs.sequence import (
    assemble,
    column_fifos,
    in_arena,
    runtime_sequence,
    sequence_args,
)
from iron.runtime.npu.mlir import INDEX_MAX, MLIR_AIE_RELEASE, Builder, memref

__all__ = ["FAMILY", "SYMBOL", "build", "handles", "layout"]

_BF16 = 2
_BYTE = 1
_CORE_ROW = 2

#: The operators this module designs.
FAMILY: tuple[type, ...] = (Dequant,)

#: The kernel symbol (``dequant_bf16.cc``, linked as ``dequant_bf16.o``).
SYMBOL = "dequant_bf16"

_PORTS = ("packed", "scales", "out")
#: Each port's element type in the runtime sequence, when it is its own argument.
_DTYPES = {"packed": "i8", "scales": "bf16", "out": "bf16"}
_ITEM = {"packed": _BYTE, "scales": _BF16, "out": _BF16}


def handles(op: Any) -> bool:
    """Whether ``op`` is a Dequant."""
    return isinstance(op, FAMILY)


def _bytes(op: Any) -> dict[str, int]:
    """Each port's bytes."""
    return {
        "packed": op.N // 2,
        "scales": op.N // dequant_operator.GROUP * _BF16,
        "out": op.N * _BF16,
    }


def layout(
    op: Any,
    dev: Device,
    where: Mapping[str, tuple[str, int]] | None = None,
) -> legality.Layout:
    """What the design of resolved ``op`` places on ``dev`` (not yet checked).

    ``where`` maps each port to ``(argument, element offset)`` as
    :func:`.sequence.sequence_args` gives it (offsets in bf16 elements for
    the arena); by default each port is its own buffer at offset 0.
    """
    where = dict(where or {p: (p, 0) for p in _PORTS})
    cols, tile = op.num_aie_columns, op.tile_size
    shim = [legality.Tile(c, 0) for c in range(cols)]
    cores = [legality.Tile(c, _CORE_ROW) for c in range(cols)]
    per_tile = {
        "packed": tile // 2,
        "scales": tile // dequant_operator.GROUP,
        "out": tile,
    }
    fifos, transfers = [], []
    for c in range(cols):
        for p in ("packed", "scales"):
            fifos.append(
                legality.Fifo(
                    f"{p}_{c}",
                    shim[c],
                    (cores[c],),
                    op.fifo_depth,
                    per_tile[p],
                    _ITEM[p],
                )
            )
        fifos.append(
            legality.Fifo(f"out_{c}", cores[c], (shim[c],), op.fifo_depth, tile, _BF16)
        )
    need = _bytes(op)
    for c in range(cols):
        for bd, p in enumerate(("out", "packed", "scales")):
            arg, base = where[p]
            # An arena port is addressed in bf16 elements; its own argument
            # in the port's element type.
            item = _BF16 if in_arena(arg) else _ITEM[p]
            per_col = need[p] // cols // item
            sizes, strides = linear_walk(per_col, item, dev)
            transfers.append(
                legality.Transfer(
                    fifo=f"{p}_{c}",
                    shim=shim[c],
                    buffer=arg,
                    offset=base + c * per_col,
                    sizes=sizes,
                    strides=strides,
                    itemsize=item,
                    bd_id=bd,
                )
            )
    return legality.Layout(
        repr(op),
        tuple(cores),
        tuple(fifos),
        tuple(transfers),
        legality.core_stack(dev, (SYMBOL,)),
    )


def build(
    op: Any,
    dev: Device,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
    words: Words | None = None,
) -> Design:
    """The design of Dequant ``op`` on ``dev`` (see the module docstring).

    Dequant has no per-call parameters, so ``words`` is not read.

    Raises:
        iron.runtime.npu.legality.LegalityError: A device limit is broken (an
            arena ``packed`` or ``scales`` off a 4-byte boundary, say).
        iron.core.operator.RefusedShapeError: The operator refuses ``dev``.
        ValueError: A placement is too small, misplaced, or names no port.
    """
    op = op.resolved(dev)
    op.check(dev)
    args, where = sequence_args(op, _bytes(op), placement, arena_bytes, unit=_BF16)
    lay = layout(op, dev, where)
    legality.check(lay, dev)

    cols, tile = op.num_aie_columns, op.tile_size
    tiles = op.N // cols // tile
    elem = {
        "packed": memref(tile // 2, "i8"),
        "scales": memref(tile // dequant_operator.GROUP),
        "out": memref(tile),
    }
    kernel_types = [elem["packed"], elem["scales"], elem["out"], "i32"]
    b = Builder()
    b.comment(f"IRON design: {op!r} on {dev.name}; mlir-aie {MLIR_AIE_RELEASE}")
    with b.region("module"), b.device(dev.name, "main"):
        b.func_decl(SYMBOL, kernel_types, f"{SYMBOL}.o")
        shim_v = [b.tile(c, 0, "shim_noc_tile") for c in range(cols)]
        core_v = [b.tile(c, _CORE_ROW) for c in range(cols)]
        column_fifos(b, lay.fifos, shim_v, core_v, elem)
        for c in range(cols):
            with b.core(core_v[c], stack_size=lay.stack_bytes):
                c0, c1 = b.constant(0, "index"), b.constant(1, "index")
                forever = b.constant(INDEX_MAX, "index")
                count = b.constant(tiles, "index")
                n = b.constant(tile, "i32")
                with b.for_(c0, forever, c1, "run"), b.for_(c0, count, c1, "t"):
                    packed = b.acquire(
                        f"packed_{c}", "Consume", elem["packed"], "packed"
                    )
                    scales = b.acquire(
                        f"scales_{c}", "Consume", elem["scales"], "scales"
                    )
                    out = b.acquire(f"out_{c}", "Produce", elem["out"], "out")
                    b.call(SYMBOL, [packed, scales, out, n], kernel_types)
                    b.release(f"packed_{c}", "Consume")
                    b.release(f"scales_{c}", "Consume")
                    b.release(f"out_{c}", "Produce")
                b.end()
        runtime_sequence(b, args, lay.transfers, ["out"], cols, dtypes=_DTYPES)
    return assemble(b, op, dev, args, (SYMBOL,), lay)
