"""The QGEMM design: ``out = a @ w.T`` with ``w`` packed, on the whole array.

QGEMM (``iron.operators.qmatmul``) is GEMM's product with the right operand
held as ``N`` packed rows (:mod:`iron.operators.quantized`'s groups: a
float16 scale, a minimum for 4-bit, the codes). This design is GEMM's
(:mod:`.gemm`) with ``b`` replaced by the packed rows, so the whole-array
tiling, the tile order and blocked sequences are :mod:`.gemm_schedule`'s
(``tiling``, ``schedule``, ``sequence_transfers`` given a
:class:`~.gemm_schedule.PackedRows`), and the ``a`` and ``out`` FIFOs,
their links and ``dimensionsToStream`` re-layouts are GEMM's own
(:func:`.gemm.a_fifos`, :func:`.gemm.out_fifos` and their emitters):

* ``a``: as GEMM's: row groups over the first columns' memory tiles,
  distributed to each row's cores, re-laid into the mmul's ``r x s`` blocks.
* ``w``: ``w_<c>`` (shim to memory tile of column ``c``) carries ``tile_n``
  packed rows' K tiles back to back, ``tile_n * row_bytes(tile_k)`` bytes
  (``i8``), linked to ``w_col<c>``, broadcast to the column's cores as they
  are: a packed tile is not re-laid (its groups are byte runs; a memory
  tile moves 4-byte words). The shim walks it as GEMM walks a transposed
  ``b``, a row being ``row_bytes(K)`` bytes and a K tile
  ``row_bytes(tile_k)``; K is a multiple of 64, so both are whole words.
* ``out``: as GEMM's: each core's ``c_<c>_<r>`` (``r x t`` blocks, depth 2)
  joined into ``out_<c>``, streamed to the shim row-major.

Each core holds, besides its FIFOs' buffers, an fp32 accumulator
(``tile_m x tile_n``) and a bf16 tile of ``tile_n x tile_k`` (``deq``): per
K tile the kernel dequantizes the packed tile into ``deq`` (in the ``t x
s`` blocks of a transposed ``b``) and multiplies it with GEMM's mmul loop at
``HIGHEST``. The bf16 tile lives only in the core, rewritten every K tile:
no bf16 copy of a weight exists in device memory. That is the core bytes
``QGEMM.core_bytes`` counts and legality checks, ``QGEMM.reference``'s
arithmetic (each weight ``scale * q + min`` rounded once to bf16, exact
products, fp32 sums over all of K, one rounding at the store) and
``QGEMM.cost``'s calls; the packed bytes the shims move are ``cost``'s
``N * row_bytes`` per M pass.

Per output tile the core calls ``qgemm_f32_zero(acc, tile_m, tile_n)``,
per K tile ``qgemm_acc(a, w, acc, deq, tile_m, tile_k, tile_n, bits,
group)``, then ``qgemm_bf16_store(acc, out, tile_m, tile_n)``. The symbols
and their contract are in ``qgemm.cc``
(:func:`iron.runtime.npu.kernels.contract` of ``qgemm``).

Ports are their own arguments (``w`` an ``i8`` memref, walked in bytes) or
placed at planned offsets of the arena, addressed in bf16 elements as every
family's are: the packed bytes then move as byte pairs, which needs a 4-byte
aligned offset (legality names it otherwise).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from iron.core.device import Device
from iron.operators.qmatmul import QGEMM
from iron.runtime.image import Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design, Words
from iron.runtime.npu.designs.gemm import (
    a_fifos,
    emit_a_fifos,
    emit_out_fifos,
    link,
    objectfifo,
    out_fifos,
)
from iron.runtime.npu.designs.gemm_schedule import (
    ITEM,
    GemmTiling,
    PackedRows,
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
    "PORTS",
    "STORE",
    "ZERO",
    "build",
    "handles",
    "layout",
    "packed_rows",
]

_F32 = 4
_BYTE = 1
_MEM_ROW = 1
_CORE_ROW = 2

#: The operators this module designs.
FAMILY: tuple[type, ...] = (QGEMM,)

#: The kernel source (``qgemm.cc``, linked as ``qgemm.o``).
KERNEL_SOURCE = "qgemm"

#: Zeroes the fp32 accumulator of an output tile.
ZERO = "qgemm_f32_zero"
#: Dequantizes a packed tile and accumulates its product.
ACCUMULATE = "qgemm_acc"
#: Rounds the fp32 accumulator to the bf16 output tile.
STORE = "qgemm_bf16_store"

#: The ports, in the order their walks are issued.
PORTS = ("a", "w", "out")


def handles(op: Any) -> bool:
    """Whether ``op`` is a QGEMM."""
    return isinstance(op, FAMILY)


def _item(where: Mapping[str, tuple[str, int]]) -> int:
    """Bytes of one addressed element of ``w``: its own argument is bytes
    (``i8``), a shared one (the arena) bf16 elements, byte pairs."""
    return _BYTE if where["w"][0] == "w" else ITEM


def packed_rows(op: Any, where: Mapping[str, tuple[str, int]]) -> PackedRows:
    """``w``'s rows as :mod:`.gemm_schedule` walks them: a row and a K tile
    in the items ``w`` is addressed in (bytes, or byte pairs in the arena)."""
    u = _item(where)
    return PackedRows(
        row=op.row_bytes // u,
        tile=op.quant_format.row_bytes(op.tile_k) // u,
        item=u,
    )


def _gemm_where(where: Mapping[str, tuple[str, int]]) -> dict[str, tuple[str, int]]:
    """``where`` in :mod:`.gemm_schedule`'s port names (``w`` is its ``b``)."""
    return {"a": where["a"], "b": where["w"], "out": where["out"]}


def _tile_bytes(op: Any) -> int:
    """Bytes of one packed ``w`` tile: ``tile_n`` rows of ``tile_k``."""
    return int(op.tile_n * op.quant_format.row_bytes(op.tile_k))


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
    where = dict(where or {q: (q, 0) for q in PORTS})
    p = tiling(op, dev)
    cols, R, tm, tk, tn = p.columns, p.rows, p.tm, p.tk, p.tn
    depth = op.fifo_depth
    fifos = a_fifos(p, depth)
    for c in range(cols):
        shim, mem = legality.Tile(c, 0), legality.Tile(c, _MEM_ROW)
        cores = tuple(legality.Tile(c, _CORE_ROW + r) for r in range(R))
        fifos += [
            legality.Fifo(f"w_{c}", shim, (mem,), depth, _tile_bytes(op), _BYTE),
            legality.Fifo(f"w_col{c}", mem, cores, depth, _tile_bytes(op), _BYTE),
        ]
        fifos += out_fifos(p, c, depth, depth)
    gwhere, packed = _gemm_where(where), packed_rows(op, where)
    sch = schedule(op, dev, gwhere, packed)
    transfers, waits = sequence_transfers(op, p, dev, gwhere, sch, packed)
    renamed = [
        dataclasses.replace(t, fifo="w_" + t.fifo[2:]) if t.fifo.startswith("b_") else t
        for t in transfers
    ]
    cores = tuple(
        legality.Tile(c, _CORE_ROW + r) for c in range(cols) for r in range(R)
    )
    per_core = tm * tn * _F32 + tn * tk * ITEM  # the accumulator, the bf16 tile
    return legality.Layout(
        repr(op),
        cores,
        tuple(fifos),
        tuple(renamed),
        legality.core_stack(dev, (KERNEL_SOURCE,)),
        buffers=tuple((t, per_core) for t in cores),
        waits=waits,
    )


def build(
    op: Any,
    dev: Device,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
    words: Words | None = None,
) -> Design:
    """The design of QGEMM ``op`` on ``dev`` (see the module docstring).

    QGEMM has no per-call parameters, so ``words`` adds nothing.

    Raises:
        iron.runtime.npu.legality.LegalityError: A device limit is broken (a
            memory tile's buffers, a shim's descriptors, an arena ``w`` off a
            4-byte boundary, say).
        iron.core.operator.RefusedShapeError: The operator refuses ``dev``.
        ValueError: A placement is too small, misplaced, or names no port.
    """
    op = op.resolved(dev)
    op.check(dev)
    sizes = {
        "a": op.M * op.K * ITEM,
        "w": op.N * op.row_bytes,
        "out": op.M * op.N * ITEM,
    }
    args, where = sequence_args(op, sizes, placement, arena_bytes, unit=ITEM)
    lay = layout(op, dev, where)
    legality.check(lay, dev)

    p = tiling(op, dev)
    cols, R, tm, tk, tn = p.columns, p.rows, p.tm, p.tk, p.tn
    a_t, w_t = memref((tm, tk)), memref(_tile_bytes(op), "i8")
    c_t, acc_t, deq_t = memref((tm, tn)), memref((tm, tn), "f32"), memref((tn, tk))
    types = (a_t, w_t, c_t, acc_t, deq_t)
    obj = f"{KERNEL_SOURCE}.o"
    depth = op.fifo_depth
    b = Builder()
    b.comment(f"IRON design: {op!r} on {dev.name}; mlir-aie {MLIR_AIE_RELEASE}")
    with b.region("module"), b.device(dev.name, "main"):
        b.func_decl(ZERO, [acc_t, "i32", "i32"], obj)
        b.func_decl(ACCUMULATE, [a_t, w_t, acc_t, deq_t, *["i32"] * 5], obj)
        b.func_decl(STORE, [acc_t, c_t, "i32", "i32"], obj)
        shim_v = [b.tile(c, 0, "shim_noc_tile") for c in range(cols)]
        mem_v = [b.tile(c, _MEM_ROW, "mem_tile") for c in range(cols)]
        core_v = [[b.tile(c, _CORE_ROW + r) for r in range(R)] for c in range(cols)]
        emit_a_fifos(b, op, p, shim_v, mem_v, core_v)
        for c in range(cols):
            objectfifo(b, f"w_{c}", shim_v[c], [mem_v[c]], w_t, depth)
            objectfifo(b, f"w_col{c}", mem_v[c], core_v[c], w_t, depth)
            link(b, [f"w_{c}"], [f"w_col{c}"])
            emit_out_fifos(b, op, p, c, depth, shim_v, mem_v, core_v)
        for c in range(cols):
            for r in range(R):
                acc = b.buffer(core_v[c][r], f"acc_{c}_{r}", acc_t)
                deq = b.buffer(core_v[c][r], f"deq_{c}_{r}", deq_t)
                _core(b, core_v[c][r], lay.stack_bytes, (acc, deq), c, r, op, p, types)
        runtime_sequence(
            b, args, lay.transfers, ["out"], cols, dtypes={"w": "i8"}, points=lay.waits
        )
    return assemble(b, op, dev, args, (KERNEL_SOURCE,), lay)


def _core(
    b: Builder,
    tile: str,
    stack: int | None,
    buffers: tuple[str, str],
    c: int,
    r: int,
    op: Any,
    p: GemmTiling,
    types: tuple[str, str, str, str, str],
) -> None:
    """Core ``(c, 2 + r)``: per output tile, zero, accumulate every K tile
    (dequantizing its packed ``w`` tile), store."""
    a_t, w_t, c_t, acc_t, deq_t = types
    acc, deq = buffers
    a_fifo, w_fifo, c_fifo = f"a_row{r}", f"w_col{c}", f"c_{c}_{r}"
    with b.core(tile, stack_size=stack):
        c0, c1 = b.constant(0, "index"), b.constant(1, "index")
        forever = b.constant(INDEX_MAX, "index")
        n_tiles = b.constant(p.tiles, "index")
        n_k = b.constant(p.k_tiles, "index")
        i_m, i_k, i_n = (b.constant(v, "i32") for v in (p.tm, p.tk, p.tn))
        bits, group = b.constant(op.bits, "i32"), b.constant(op.group, "i32")
        with b.for_(c0, forever, c1, "run"), b.for_(c0, n_tiles, c1, "t"):
            b.call(ZERO, [acc, i_m, i_n], [acc_t, "i32", "i32"])
            with b.for_(c0, n_k, c1, "k"):
                a = b.acquire(a_fifo, "Consume", a_t, "a")
                w = b.acquire(w_fifo, "Consume", w_t, "w")
                b.call(
                    ACCUMULATE,
                    [a, w, acc, deq, i_m, i_k, i_n, bits, group],
                    [a_t, w_t, acc_t, deq_t, *["i32"] * 5],
                )
                b.release(a_fifo, "Consume")
                b.release(w_fifo, "Consume")
            out = b.acquire(c_fifo, "Produce", c_t, "c")
            b.call(STORE, [acc, out, i_m, i_n], [acc_t, c_t, "i32", "i32"])
            b.release(c_fifo, "Produce")
        b.end()
