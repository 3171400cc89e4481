"""The ``Repeat`` design of :mod:`.movers`: one re-read forwarded by the memory tile.

Column 0's shim reads ``x`` into object FIFO ``x_0`` (shim to memory tile,
depth 2) with one descriptor whose iteration re-reads ``x`` ``repeat``
times (iteration stride 0); the memory tile forwards it as ``out_0`` (linked
as in :mod:`.movers_copy`), whose one S2MM descriptor walks ``(repeat, rows,
row)`` with strides ``(row, repeat * row, 1)`` so copy ``r`` of row ``i``
lands at row ``i * repeat + r``. A row longer than the wrap field is two
dimensions, as ``Repeat.check`` split it. No core, no kernel.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import prod
from typing import Any

from iron.core.device import Device
from iron.core.dma import split_long_dims
from iron.runtime.image import Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design
from iron.runtime.npu.designs.movers_copy import (
    _DEPTH,
    _MEM_ROW,
    _chunk,
    _forward,
    _in_bf16,
    _itemsize,
    _queued,
    sequenced,
)
from iron.runtime.npu.designs.sequence import sequence_args
from iron.runtime.npu.mlir import Builder

__all__ = ["build_repeat"]


def build_repeat(
    op: Any,
    dev: Device,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
) -> Design:
    """The design of ``Repeat`` ``op`` on ``dev`` (see :mod:`.movers`).

    Raises:
        NotImplementedError: Elements wider than 4 bytes.
        iron.core.operator.RefusedShapeError: The operator refuses ``dev``.
        iron.runtime.npu.legality.LegalityError: A device limit is broken.
        ValueError: A placement is too small, misplaced, or names no port.
    """
    op = op.resolved(dev)
    op.check(dev)
    s = op.itemsize
    dtype = _itemsize(op, s)
    rows, rep, row = op.rows, op.repeat, prod(op.row_shape)
    need = {"x": rows * row * s, "out": rows * rep * row * s}
    args, where = sequence_args(op, need, placement, arena_bytes, unit=s)
    # The walks Repeat.check checked: a row in at most two dimensions.
    sizes, strides = split_long_dims(dev, (row,), (1,), s)
    inner = sizes if len(sizes) == 2 else (1, row)
    inner_t = strides if len(strides) == 2 else (row, 1)
    shim = legality.Tile(0, 0)
    mem = legality.Tile(0, _MEM_ROW)
    (oarg, obase), (xarg, xbase) = where["out"], where["x"]
    write = legality.Transfer(
        "out_0",
        shim,
        oarg,
        obase,
        (rep, rows, *inner),
        (row, rep * row, *inner_t),
        s,
        0,
    )
    # The iteration re-reads x (stride 0) once per copy.
    read = legality.Transfer(
        "x_0", shim, xarg, xbase, (rep, rows, *inner), (0, row, *inner_t), s, 1
    )
    e = _chunk([rows * row], s)
    write, read = _in_bf16(op, write), _in_bf16(op, read)
    fifos = (
        legality.Fifo("x_0", shim, (mem,), _DEPTH, e, s),
        legality.Fifo("out_0", mem, (shim,), _DEPTH, e, s),
    )
    items = _queued([write], [read])
    layout = sequenced(legality.Layout(repr(op), (), fifos, (write, read)), items)
    legality.check(layout, dev)
    return _forward(Builder(), op, dev, layout, ("x_0", "out_0"), dtype, args, items)
