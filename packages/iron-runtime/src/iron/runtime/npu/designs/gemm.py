"""The GEMM design: ``out = a @ b`` in bf16 on the whole array, fp32 accumulation.

The output is cut in ``tile_m x tile_n`` tiles. ``num_aie_columns`` columns
each own ``tile_n`` columns of N per pass; in every column ``rows`` cores
(rows 2, 3, ... of the array; ``rows`` the largest divisor of the ``M /
tile_m`` row tiles that is at most the device's ``core_rows``) each own one
``tile_m``-row tile of M per pass. Core ``(c, 2 + r)`` computes the output
tiles ``(p * rows + r, q * columns + c)`` for every M pass ``p`` and N pass
``q``, walking K in ``tile_k`` steps: ``(M / tile_m / rows) * (N / tile_n /
columns)`` output tiles per core per call (:class:`~.gemm_schedule.GemmTiling`).

Data movement (object FIFOs of depth 2 but each core's ``c`` FIFO, of
``out_depth``, as ``GEMM.check()`` counts the core's tiles: ``a`` and ``b``
double-buffered, one fp32 accumulator and ``out_depth`` bf16 output tiles).
At ``out_depth=1`` the core's single output tile is acquired for the next
store only once the DMA has drained it, which ``GEMM.cost`` charges as a
stall. The memory tile's side of a join is the joined FIFO's buffers, of
depth 2 ([link_join]: the memory tile holds only the output FIFO's buffers
and locks, each input's producer its own), so a column still double-buffers
its output towards the shim:

* ``a``: the cores of array row ``r`` share one A row tile. Rows are grouped
  over the first ``min(rows, columns)`` columns (group ``g`` in column ``g``,
  contiguous rows); ``a_<g>`` carries the group's row tiles side by side
  (shim to memory tile), and ``aie.objectfifo.link`` distributes them, one
  ``a_row<r>`` per row, each broadcast to the row's cores in every column.
  The memory tile re-lays each ``tile_m x tile_k`` tile into the mmul's
  ``r x s`` blocks on the way out (``dimensionsToStream``).
* ``b``: ``b_<c>`` (shim to memory tile of column ``c``), linked to
  ``b_col<c>``, broadcast to the column's cores, re-laid into ``s x t``
  blocks (``k`` blocks outer); with ``b_transposed`` the tile arrives as
  ``tile_n x tile_k`` and is re-laid into ``t x s`` blocks (``n`` blocks
  outer), which the kernel transposes in registers.
* ``out``: each core's tile (``r x t`` blocks, row blocks outer) goes to its
  column's memory tile in ``c_<c>_<r>``; the link joins the column's tiles
  into ``out_<c>``, which the memory tile streams to the shim in row-major
  order (``dimensionsToStream`` undoes the blocks).

Channels per column: shim 2 MM2S (``a``, ``b``) + 1 S2MM (``out``); memory
tile ``1 + 1 + rows`` S2MM and ``len(group) + 2`` MM2S (at most 6 + 6);
core 2 S2MM + 1 MM2S.

Each core loops forever; per call, per output tile it calls
``gemm_f32_zero(acc, tile_m, tile_n)``, then per K tile acquires ``a`` and
``b`` and calls the accumulate kernel (:data:`ACCUMULATE`: ``HIGHEST`` keeps
the fp32 sum, ``HIGH`` rounds the partial sum to bf16 after every K tile, as
``iron.operators.matmul.model_product`` models it; ``_bt`` for a transposed
``b``), then ``gemm_bf16_store(acc, out, tile_m, tile_n)`` rounds into the
``c`` FIFO. The symbols live in ``gemm.cc``
(:func:`iron.runtime.npu.kernels.contract` of ``gemm``).

The runtime sequence per column drains ``out`` (one transfer, buffer
descriptor 0), then fills ``a`` (columns serving a row group) and ``b``,
from host buffers or the arena at planned offsets, then waits on every
``out``. The order the cores walk the tiles (M passes outer, ``mn``, or N
passes outer, ``nm``), the shim walks that feed them and, for a shape whose
walks need more buffer descriptors than a shim has, the blocks the sequence
runs in (waiting on one block's ``out`` before reusing its descriptor ids)
are :mod:`.gemm_schedule`'s (:func:`~.gemm_schedule.schedule`). A shape no
blocking fits is refused by legality. ``MEDIUM`` on NPU2 (bfp16 blocks) has
no design yet.

Syntax sources (paths in Xilinx/mlir-aie, the pinned era), besides those of
:mod:`iron.runtime.npu.mlir`:

* [link_distribute] ``test/objectFifo-stateful-transform/data_movement_patterns/
  link/link_test_distribute_offsets.mlir``: ``aie.objectfifo.link [@in] ->
  [@o1, @o2, @o3] ([] [0, 16, 36])``;
* [link_join] ``.../link/link_test_join_offsets.mlir``: ``aie.objectfifo.link
  [@i1, @i2, @i3] -> [@out] ([0, 16, 36] [])``;
* [dims_to_stream] ``test/objectFifo-stateful-transform/aie_stream/
  bad_dims_to_stream.mlir``: ``aie.objectfifo @of (%tile dimensionsToStream
  [<size = 16, stride = 1>], {%cons}, 2 : i32)``; the memory tile's 4-D
  blocking and un-blocking patterns are those of
  ``test/npu-xrt/matrix_multiplication_using_dma/aie.mlir`` (``A``: ``[<m/r,
  r*k>, <k/s, s>, <r, k>, <s, 1>]``; ``C``: ``[<m/r, r*n>, <r, t>, <n/t,
  r*t>, <t, 1>]``), in elements of the FIFO's type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from iron.core.device import Device
from iron.core.precision import Precision
from iron.operators import GEMM
from iron.runtime.image import Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design, Words
from iron.runtime.npu.designs.gemm_schedule import (
    ITEM,
    PORTS,
    GemmTiling,
    schedule,
    sequence_transfers,
    tiling,
)
from iron.runtime.npu.designs.sequence import (
    assemble,
    runtime_sequence,
    sequence_args,
)
from iron.runtime.npu.mlir import INDEX_MAX, MLIR_AIE_RELEASE, Builder, memref

__all__ = [
    "ACCUMULATE",
    "FAMILY",
    "KERNEL_SOURCE",
    "STORE",
    "ZERO",
    "a_fifos",
    "build",
    "emit_a_fifos",
    "emit_out_fifos",
    "handles",
    "layout",
    "link",
    "objectfifo",
    "out_fifos",
    "stream_dims",
]

_F32 = 4
_MEM_ROW = 1
_CORE_ROW = 2

#: The operators this module designs.
FAMILY: tuple[type, ...] = (GEMM,)

#: The kernel source (``<KERNEL_SOURCE>.cc``, linked as ``<KERNEL_SOURCE>.o``).
KERNEL_SOURCE = "gemm"

#: Zeroes the fp32 accumulator of an output tile.
ZERO = "gemm_f32_zero"
#: Rounds the fp32 accumulator to the bf16 output tile.
STORE = "gemm_bf16_store"
#: The accumulate symbol per (effective precision, b_transposed).
ACCUMULATE: dict[tuple[Precision, bool], str] = {
    (Precision.HIGHEST, False): "gemm_bf16_acc",
    (Precision.HIGH, False): "gemm_bf16_acc_round",
    (Precision.HIGHEST, True): "gemm_bf16_acc_bt",
    (Precision.HIGH, True): "gemm_bf16_acc_round_bt",
}


def handles(op: Any) -> bool:
    """Whether ``op`` is a GEMM."""
    return isinstance(op, FAMILY)


def stream_dims(op: Any, p: GemmTiling, fifo: str) -> list[tuple[int, int]]:
    """The memory tile's ``dimensionsToStream`` ``(size, stride)`` of a FIFO kind.

    ``fifo`` is ``a`` (an A tile into ``r x s`` blocks), ``b`` (a B tile into
    ``s x t`` blocks, or a transposed one into ``t x s`` blocks) or ``out``
    (``rows`` joined C tiles of ``r x t`` blocks back to row-major).
    Outermost first, in elements [dims_to_stream].
    """
    r, s, t = p.mmul
    tm, tk, tn = p.tm, p.tk, p.tn
    if fifo == "a":
        return [(tm // r, r * tk), (tk // s, s), (r, tk), (s, 1)]
    if fifo == "b" and op.b_transposed:
        return [(tn // t, t * tk), (tk // s, s), (t, tk), (s, 1)]
    if fifo == "b":
        return [(tk // s, s * tn), (tn // t, t), (s, tn), (t, 1)]
    return [(p.rows * tm // r, r * tn), (r, t), (tn // t, r * t), (t, 1)]


def layout(
    op: Any,
    dev: Device,
    where: Mapping[str, tuple[str, int]] | None = None,
) -> legality.Layout:
    """What the design of resolved ``op`` places on ``dev`` (not yet checked).

    ``where`` maps each port to ``(argument, element offset)``; by default
    each port is its own buffer at offset 0.
    """
    where = dict(where or {q: (q, 0) for q in PORTS})
    p = tiling(op, dev)
    cols, R, tm, tk, tn = p.columns, p.rows, p.tm, p.tk, p.tn
    fifos = a_fifos(p, op.fifo_depth)
    for c in range(cols):
        fifos += [
            legality.Fifo(
                f"b_{c}", _shim_tile(c), (_mem_tile(c),), op.fifo_depth, tk * tn
            ),
            legality.Fifo(
                f"b_col{c}", _mem_tile(c), _cores(c, R), op.fifo_depth, tk * tn
            ),
        ]
        fifos += out_fifos(p, c, op.out_depth, op.fifo_depth)
    transfers, waits = sequence_transfers(op, p, dev, where, schedule(op, dev, where))
    cores = tuple(t for c in range(cols) for t in _cores(c, R))
    return legality.Layout(
        repr(op),
        cores,
        tuple(fifos),
        tuple(transfers),
        legality.core_stack(dev, (KERNEL_SOURCE,)),
        buffers=tuple((t, tm * tn * _F32) for t in cores),
        waits=waits,
    )


def _shim_tile(c: int) -> legality.Tile:
    return legality.Tile(c, 0)


def _mem_tile(c: int) -> legality.Tile:
    return legality.Tile(c, _MEM_ROW)


def _cores(c: int, rows: int) -> tuple[legality.Tile, ...]:
    """Column ``c``'s cores, rows 2 .. 2 + ``rows``."""
    return tuple(legality.Tile(c, _CORE_ROW + r) for r in range(rows))


def a_fifos(p: GemmTiling, depth: int) -> list[legality.Fifo]:
    """The ``a`` FIFOs of tiling ``p`` (module docstring): per row group
    ``a_<g>`` (shim to memory tile), per row ``a_row<r>`` to the row's cores."""
    tm, tk = p.tm, p.tk
    fifos = []
    for g, rows in enumerate(p.groups):
        fifos.append(
            legality.Fifo(
                f"a_{g}", _shim_tile(g), (_mem_tile(g),), depth, len(rows) * tm * tk
            )
        )
        for r in rows:
            row_cores = tuple(_cores(c, p.rows)[r] for c in range(p.columns))
            fifos.append(
                legality.Fifo(f"a_row{r}", _mem_tile(g), row_cores, depth, tm * tk)
            )
    return fifos


def out_fifos(
    p: GemmTiling, c: int, core_depth: int, depth: int
) -> list[legality.Fifo]:
    """Column ``c``'s output FIFOs: each core's ``c_<c>_<r>`` (of
    ``core_depth``) and the joined ``out_<c>`` (memory tile to shim)."""
    tm, tn, R = p.tm, p.tn, p.rows
    core = _cores(c, R)
    fifos = [
        legality.Fifo(f"c_{c}_{r}", core[r], (_mem_tile(c),), core_depth, tm * tn)
        for r in range(R)
    ]
    fifos.append(
        legality.Fifo(f"out_{c}", _mem_tile(c), (_shim_tile(c),), depth, R * tm * tn)
    )
    return fifos


# -- emitters (candidates for mlir.py) ---------------------------------------------


def objectfifo(
    b: Builder,
    name: str,
    producer: str,
    consumers: Sequence[str],
    elem: str,
    depth: int,
    dims: Sequence[tuple[int, int]] | None = None,
) -> None:
    """``aie.objectfifo`` with an optional ``dimensionsToStream`` [dims_to_stream]."""
    if not dims:
        b.objectfifo(name, producer, consumers, depth, elem)
        return
    pattern = ", ".join(f"<size = {n}, stride = {s}>" for n, s in dims)
    b.line(
        f"aie.objectfifo @{name}({producer} dimensionsToStream [{pattern}], "
        f"{{{', '.join(consumers)}}}, {depth} : i32) : !aie.objectfifo<{elem}>"
    )


def link(
    b: Builder,
    sources: Sequence[str],
    dests: Sequence[str],
    src_offsets: Sequence[int] = (),
    dst_offsets: Sequence[int] = (),
) -> None:
    """``aie.objectfifo.link [@s...] -> [@d...] ([offs] [offs])`` [link_distribute], [link_join]."""

    def names(fifos: Sequence[str]) -> str:
        return "[" + ", ".join(f"@{f}" for f in fifos) + "]"

    def ints(values: Sequence[int]) -> str:
        return "[" + ", ".join(str(v) for v in values) + "]"

    b.line(
        f"aie.objectfifo.link {names(sources)} -> {names(dests)} "
        f"({ints(src_offsets)} {ints(dst_offsets)})"
    )


def emit_a_fifos(
    b: Builder,
    op: Any,
    p: GemmTiling,
    shim_v: Sequence[str],
    mem_v: Sequence[str],
    core_v: Sequence[Sequence[str]],
) -> None:
    """Emit :func:`a_fifos` and their links: each group's row tiles side by
    side, distributed to the rows, re-laid into ``r x s`` blocks."""
    tm, tk, depth = p.tm, p.tk, op.fifo_depth
    a_t = memref((tm, tk))
    for g, rows in enumerate(p.groups):
        rows_t = memref(len(rows) * tm * tk)
        objectfifo(b, f"a_{g}", shim_v[g], [mem_v[g]], rows_t, depth)
        for r in rows:
            row_cores = [core_v[c][r] for c in range(p.columns)]
            dims = stream_dims(op, p, "a")
            objectfifo(b, f"a_row{r}", mem_v[g], row_cores, a_t, depth, dims)
        link(
            b,
            [f"a_{g}"],
            [f"a_row{r}" for r in rows],
            dst_offsets=[i * tm * tk for i in range(len(rows))]
            if len(rows) > 1
            else (),
        )


def emit_out_fifos(
    b: Builder,
    op: Any,
    p: GemmTiling,
    c: int,
    core_depth: int,
    shim_v: Sequence[str],
    mem_v: Sequence[str],
    core_v: Sequence[Sequence[str]],
) -> None:
    """Emit column ``c``'s :func:`out_fifos` and their join, which the memory
    tile streams to the shim row-major (``dimensionsToStream``)."""
    tm, tn, R = p.tm, p.tn, p.rows
    c_t = memref((tm, tn))
    for r in range(R):
        objectfifo(b, f"c_{c}_{r}", core_v[c][r], [mem_v[c]], c_t, core_depth)
    dims = stream_dims(op, p, "out")
    out_t = memref(R * tm * tn)
    objectfifo(b, f"out_{c}", mem_v[c], [shim_v[c]], out_t, op.fifo_depth, dims)
    link(
        b,
        [f"c_{c}_{r}" for r in range(R)],
        [f"out_{c}"],
        src_offsets=[r * tm * tn for r in range(R)] if R > 1 else (),
    )


def build(
    op: Any,
    dev: Device,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
    words: Words | None = None,
) -> Design:
    """The design of GEMM ``op`` on ``dev`` (see the module docstring).

    GEMM has no per-call parameters, so ``words`` adds nothing.

    Raises:
        NotImplementedError: ``op`` runs at ``MEDIUM`` (bfp16) on NPU2.
        iron.runtime.npu.legality.LegalityError: A device limit is broken.
        iron.core.operator.RefusedShapeError: The operator refuses ``dev``.
        ValueError: A placement is too small, misplaced, or names no port.
    """
    op = op.resolved(dev)
    op.check(dev)
    level = op.effective_precision
    key = (level, bool(op.b_transposed))
    if key not in ACCUMULATE:
        raise NotImplementedError(
            f"{op!r}: GEMM at effective_precision={level.value!r} (bfp16 blocks) "
            f"has no NPU kernel yet; give precision='high' or 'highest'"
        )
    acc_sym = ACCUMULATE[key]
    args, where = sequence_args(
        op,
        {
            "a": op.M * op.K * ITEM,
            "b": op.K * op.N * ITEM,
            "out": op.M * op.N * ITEM,
        },
        placement,
        arena_bytes,
        unit=ITEM,
    )
    lay = layout(op, dev, where)
    legality.check(lay, dev)

    p = tiling(op, dev)
    cols, R, tm, tk, tn = p.columns, p.rows, p.tm, p.tk, p.tn
    a_t = memref((tm, tk))
    b_t = memref((tn, tk) if op.b_transposed else (tk, tn))
    c_t, acc_t = memref((tm, tn)), memref((tm, tn), "f32")
    obj = f"{KERNEL_SOURCE}.o"
    ints3 = ["i32", "i32", "i32"]
    depth = op.fifo_depth
    b = Builder()
    b.comment(f"IRON design: {op!r} on {dev.name}; mlir-aie {MLIR_AIE_RELEASE}")
    with b.region("module"), b.device(dev.name, "main"):
        b.func_decl(ZERO, [acc_t, "i32", "i32"], obj)
        b.func_decl(acc_sym, [a_t, b_t, acc_t, *ints3], obj)
        b.func_decl(STORE, [acc_t, c_t, "i32", "i32"], obj)
        shim_v = [b.tile(c, 0, "shim_noc_tile") for c in range(cols)]
        mem_v = [b.tile(c, _MEM_ROW, "mem_tile") for c in range(cols)]
        core_v = [[b.tile(c, _CORE_ROW + r) for r in range(R)] for c in range(cols)]
        emit_a_fifos(b, op, p, shim_v, mem_v, core_v)
        for c in range(cols):
            objectfifo(b, f"b_{c}", shim_v[c], [mem_v[c]], memref(tk * tn), depth)
            dims = stream_dims(op, p, "b")
            objectfifo(b, f"b_col{c}", mem_v[c], core_v[c], b_t, depth, dims)
            link(b, [f"b_{c}"], [f"b_col{c}"])
            emit_out_fifos(b, op, p, c, op.out_depth, shim_v, mem_v, core_v)
        accs = {
            (c, r): b.buffer(core_v[c][r], f"acc_{c}_{r}", acc_t)
            for c in range(cols)
            for r in range(R)
        }
        for c in range(cols):
            for r in range(R):
                _core(
                    b,
                    core_v[c][r],
                    lay.stack_bytes,
                    accs[c, r],
                    c,
                    r,
                    p,
                    acc_sym,
                    (a_t, b_t, c_t, acc_t),
                )
        runtime_sequence(b, args, lay.transfers, ["out"], cols, points=lay.waits)
    return assemble(b, op, dev, args, (KERNEL_SOURCE,), lay)


def _core(
    b: Builder,
    tile: str,
    stack: int | None,
    acc: str,
    c: int,
    r: int,
    p: GemmTiling,
    acc_sym: str,
    types: tuple[str, str, str, str],
) -> None:
    """Core ``(c, 2 + r)``: per output tile, zero, accumulate every K tile, store."""
    a_t, b_t, c_t, acc_t = types
    a_fifo, b_fifo, c_fifo = f"a_row{r}", f"b_col{c}", f"c_{c}_{r}"
    with b.core(tile, stack_size=stack):
        c0, c1 = b.constant(0, "index"), b.constant(1, "index")
        forever = b.constant(INDEX_MAX, "index")
        n_tiles = b.constant(p.tiles, "index")
        n_k = b.constant(p.k_tiles, "index")
        i_m, i_k, i_n = (b.constant(v, "i32") for v in (p.tm, p.tk, p.tn))
        with b.for_(c0, forever, c1, "run"), b.for_(c0, n_tiles, c1, "t"):
            b.call(ZERO, [acc, i_m, i_n], [acc_t, "i32", "i32"])
            with b.for_(c0, n_k, c1, "k"):
                a = b.acquire(a_fifo, "Consume", a_t, "a")
                bb = b.acquire(b_fifo, "Consume", b_t, "b")
                b.call(
                    acc_sym,
                    [a, bb, acc, i_m, i_k, i_n],
                    [a_t, b_t, acc_t, "i32", "i32", "i32"],
                )
                b.release(a_fifo, "Consume")
                b.release(b_fifo, "Consume")
            out = b.acquire(c_fifo, "Produce", c_t, "c")
            b.call(STORE, [acc, out, i_m, i_n], [acc_t, c_t, "i32", "i32"])
            b.release(c_fifo, "Produce")
        b.end()
