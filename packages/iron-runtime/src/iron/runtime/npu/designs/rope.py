"""The RoPE design: rotate every head row of ``x`` by its position's table row.

``RoPE`` has ``rows`` positions of ``heads`` head rows of ``head_dim`` bf16;
the table has one row of ``head_dim`` bf16 per position (cosines, then
sines). The work is cut into tiles of ``heads_per_tile`` head rows of one
position, numbered position-major (tile ``t`` is position ``t // per_position``,
``per_position = heads / heads_per_tile``), so a tile is a contiguous run of
``x``. The ``rows * per_position`` tiles split over ``num_aie_columns``
columns in contiguous blocks of equal length (``RoPE.check`` refuses a count
that does not divide), one core per column at row 2. A block covers whole
positions, part of one position, or (when neither divides the other) a
partial position, whole positions and a partial one; :func:`tile_runs` names
these runs.

Per column there are three object FIFOs between the column's shim tile and
its core (no memory tile), exactly the buffers ``RoPE.core_bytes`` counts:

* ``x_<c>``: ``heads_per_tile * head_dim`` bf16, depth 2.
* ``table_<c>``: one table row, ``head_dim`` bf16, depth 2 (the next
  position's row arrives while the core rotates the current one).
* ``out_<c>``: like ``x_<c>``, core to shim, depth 2.

The core loops forever; per call it walks its tile runs: per position it
acquires the table row once, then for each of that position's tiles in the
block acquires an ``x`` and an ``out`` element, calls ``rope_bf16(x, table,
out, n, head_dim, interleaved)`` with ``n = heads_per_tile * head_dim`` and
``interleaved`` 0 for ``method="half"``, 1 for ``"interleaved"``, releases
them, and releases the table row after the position's last tile. The kernel
and its contract are ``kernels/rope_bf16.cc``.

The runtime sequence per column drains the column's block of ``out``
(buffer descriptor 0), fills its block of ``x`` (1) and the table rows of
the positions the block touches, once each (2), from host buffers or from
the arena at the planned offsets, then waits on every ``out``. A position
split over columns has its row sent to each of them; with the tiles
``RoPE.resolve`` picks (one tile per position per column, or whole
positions of one tile) that is exactly the table traffic ``RoPE.cost``
counts, and with smaller pinned tiles it is less (``cost`` counts a row per
tile).

Per-call bounds of a graph (``x[:n]``) are the image builder's concern: the
design is for the operator's static shape, and RoPE has no per-call scalars,
so it reads no ``words``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, NamedTuple

from iron.core.device import Device
from iron.core.dma import linear_walk
from iron.operators import RoPE
from iron.runtime.image import Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design, Words
from iron.runtime.npu.designs.sequence import (
    assemble,
    runtime_sequence,
    sequence_args,
)
from iron.runtime.npu.mlir import INDEX_MAX, MLIR_AIE_RELEASE, Builder, memref

__all__ = [
    "FAMILY",
    "KERNEL",
    "METHOD_FLAG",
    "TileRun",
    "build",
    "handles",
    "layout",
    "tile_runs",
]

_ITEM = 2  # bf16
_CORE_ROW = 2

#: The operators this module designs.
FAMILY: tuple[type, ...] = (RoPE,)

#: The kernel symbol (``rope_bf16.cc``, linked as ``rope_bf16.o``).
KERNEL = "rope_bf16"

#: The kernel's last argument per ``RoPE.method``.
METHOD_FLAG = {"half": 0, "interleaved": 1}

_PORTS = ("x", "table", "out")


class TileRun(NamedTuple):
    """A run of a column's tiles: ``positions`` positions from ``position`` on,
    ``tiles`` tiles of each (one table row acquired per position)."""

    position: int
    positions: int
    tiles: int


def handles(op: Any) -> bool:
    """Whether ``op`` is a RoPE."""
    return isinstance(op, FAMILY)


def tile_runs(op: RoPE, col: int) -> tuple[TileRun, ...]:
    """The runs of resolved ``op``'s tiles that column ``col`` rotates, in order.

    Column ``col`` owns tiles ``col * k .. (col + 1) * k - 1`` with ``k =
    rows * per_position / num_aie_columns``: a leading part of one position,
    then whole positions, then a trailing part, each present or not.
    """
    per_position = op.heads // op.heads_per_tile
    k = op.rows * per_position // op.num_aie_columns
    t, end = col * k, (col + 1) * k
    found = []
    while t < end:
        p, into = divmod(t, per_position)
        if into == 0 and end - t >= per_position:
            whole = (end - t) // per_position
            found.append(TileRun(p, whole, per_position))
            t += whole * per_position
        else:
            m = min(per_position - into, end - t)
            found.append(TileRun(p, 1, m))
            t += m
    return tuple(found)


def layout(
    op: Any,
    dev: Device,
    where: Mapping[str, tuple[str, int]] | None = None,
) -> legality.Layout:
    """What the design of resolved ``op`` places on ``dev`` (not yet checked).

    ``where`` maps each port to ``(argument, element offset)``; by default
    each port is its own buffer at offset 0.
    """
    where = dict(where or {p: (p, 0) for p in _PORTS})
    ncol, d = op.num_aie_columns, op.head_dim
    tile = op.heads_per_tile * d
    per_col = op.rows * op.heads * d // ncol  # x (and out) elements per column
    shim = [legality.Tile(c, 0) for c in range(ncol)]
    cores = [legality.Tile(c, _CORE_ROW) for c in range(ncol)]
    fifos, transfers = [], []
    for c in range(ncol):
        fifos += [
            legality.Fifo(f"x_{c}", shim[c], (cores[c],), op.fifo_depth, tile),
            legality.Fifo(f"table_{c}", shim[c], (cores[c],), op.fifo_depth, d),
            legality.Fifo(f"out_{c}", cores[c], (shim[c],), op.fifo_depth, tile),
        ]
    block = linear_walk(per_col, _ITEM, dev)
    for c in range(ncol):
        segs = tile_runs(op, c)
        first = segs[0].position
        count = segs[-1].position + segs[-1].positions - first
        runs = {
            "out": (c * per_col, block),
            "x": (c * per_col, block),
            "table": (first * d, linear_walk(count * d, _ITEM, dev)),
        }
        for bd, port in enumerate(("out", "x", "table")):
            arg, base = where[port]
            start, (sizes, strides) = runs[port]
            transfers.append(
                legality.Transfer(
                    f"{port}_{c}", shim[c], arg, base + start, sizes, strides, _ITEM, bd
                )
            )
    return legality.Layout(
        repr(op),
        tuple(cores),
        tuple(fifos),
        tuple(transfers),
        legality.core_stack(dev, (KERNEL,)),
    )


def build(
    op: Any,
    dev: Device,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
    words: Words | None = None,
) -> Design:
    """The design of RoPE ``op`` on ``dev`` (see the module docstring).

    ``words`` is accepted for the common signature; RoPE reads none.

    Raises:
        iron.runtime.npu.legality.LegalityError: A device limit is broken.
        iron.core.operator.RefusedShapeError: The operator refuses ``dev``.
        ValueError: A placement is too small, misplaced, or names no port.
    """
    op = op.resolved(dev)
    op.check(dev)
    rows, heads, d = op.rows, op.heads, op.head_dim
    need = {"x": rows * heads * d, "table": rows * d, "out": rows * heads * d}
    args, where = sequence_args(
        op, {p: n * _ITEM for p, n in need.items()}, placement, arena_bytes, unit=_ITEM
    )
    lay = layout(op, dev, where)
    legality.check(lay, dev)

    ncol, tile = op.num_aie_columns, op.heads_per_tile * d
    x_t, t_t = memref(tile), memref(d)
    kernel_types = [x_t, t_t, x_t, "i32", "i32", "i32"]
    b = Builder()
    b.comment(f"IRON design: {op!r} on {dev.name}; mlir-aie {MLIR_AIE_RELEASE}")
    with b.region("module"), b.device(dev.name, "main"):
        b.func_decl(KERNEL, kernel_types, f"{KERNEL}.o")
        shim_v = [b.tile(c, 0, "shim_noc_tile") for c in range(ncol)]
        core_v = [b.tile(c, _CORE_ROW) for c in range(ncol)]
        for f in lay.fifos:
            c = f.producer.col
            prod, cons = (
                (shim_v[c], core_v[c])
                if f.producer.kind == "shim"
                else (core_v[c], shim_v[c])
            )
            b.objectfifo(f.name, prod, [cons], f.depth, memref(f.elements))
        for c in range(ncol):
            with b.core(core_v[c], stack_size=lay.stack_bytes):
                _core_body(b, op, c, kernel_types)
                b.end()
        runtime_sequence(b, args, lay.transfers, ["out"], ncol)
    return assemble(b, op, dev, args, (KERNEL,), lay)


def _core_body(b: Builder, op: RoPE, col: int, kernel_types: list[str]) -> None:
    """One column's core: forever, per tile run and position, acquire the table
    row, rotate the position's tiles, release the row."""
    d = op.head_dim
    tile = op.heads_per_tile * d
    x_t, t_t = memref(tile), memref(d)
    segs = tile_runs(op, col)
    c0, c1 = b.constant(0, "index"), b.constant(1, "index")
    forever = b.constant(INDEX_MAX, "index")
    counts = {}
    for s in segs:
        for v in (s.positions, s.tiles):
            if v > 1:
                counts[v] = b.constant(v, "index")
    n = b.constant(tile, "i32")
    hd = b.constant(d, "i32")
    flag = b.constant(METHOD_FLAG[op.method], "i32")
    xf, tf, of = f"x_{col}", f"table_{col}", f"out_{col}"

    def tiles(count: int, table: str) -> None:
        loop = (
            b.for_(c0, counts[count], c1, "h")
            if count > 1
            else contextlib.nullcontext()
        )
        with loop:
            x = b.acquire(xf, "Consume", x_t, "x")
            out = b.acquire(of, "Produce", x_t, "out")
            b.call(KERNEL, [x, table, out, n, hd, flag], kernel_types)
            b.release(xf, "Consume")
            b.release(of, "Produce")

    with b.for_(c0, forever, c1, "run"):
        for s in segs:
            loop = (
                b.for_(c0, counts[s.positions], c1, "p")
                if s.positions > 1
                else contextlib.nullcontext()
            )
            with loop:
                table = b.acquire(tf, "Consume", t_t, "table")
                tiles(s.tiles, table)
                b.release(tf, "Consume")
