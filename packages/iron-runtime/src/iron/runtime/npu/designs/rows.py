"""Designs for the row family: RMSNorm, LayerNorm and Softmax.

Every operator sharing :class:`iron.operators.norms.RowOperator` splits its
``rows`` rows of ``cols`` bf16 over ``num_aie_columns`` columns (a contiguous
block of ``rows / columns`` rows each), one core per column at row 2. Per
column, ``x`` and ``out`` each have one object FIFO of ``rows_per_tile *
cols`` elements, depth 2, between the column's shim tile and its core (no
memory tile). A weight or bias (``(cols,)`` bf16) has its own FIFO per column,
depth 1 (LayerNorm's weight and bias share one, ``params``, weight then
bias: a core and a shim have two input channels, which ``x`` and one
parameter already take): each call the core acquires it once before its tile
loop, keeps it for every tile and releases it after, and the runtime
sequence sends it to every column once. Softmax's core also holds one row of fp32 exponentials in
a core-local ``aie.buffer`` passed to the kernel.

The core loops forever; per call it runs its column's ``rows / columns /
rows_per_tile`` tiles: acquire an ``x`` and an ``out`` element, call
``<kernel>(x, [weight, bias,] out, [scratch,] n, cols, scalars...)`` with ``n =
rows_per_tile * cols``, release. Scalars are compile-time ``i32`` constants,
as in :mod:`.elementwise`: ``eps`` as the bits of its fp32 value (the
references add it as fp32), Softmax's ``length`` as an int.

A per-call Softmax ``length`` (a :class:`~iron.core.percall.PerCall` or
:class:`~iron.core.percall.Affine`) is read from the run's scratchpad, as
:mod:`.sequence` lays it out: each column gets one more FIFO, ``words_<c>``
(the whole scratchpad of ``i32``, depth 1, shim to core: the core's and the
shim's second input channel besides ``x``), which the runtime sequence fills
from its last argument ``words`` before the column's other transfers. At
the start of each call the core acquires ``words_<c>``, loads the length's
slot with ``memref.load`` and passes that ``i32`` as the kernel's ``length``
argument unchanged; ``softmax_bf16`` clamps it to ``0..cols`` itself, as
``Softmax.reference`` clamps it (no arith ops in the design). The core
releases ``words_<c>`` after its last tile of the call. A LayerNorm with only
one of weight and bias has no design (its kernels take both or neither).

Kernel symbols are in :func:`kernel_of`; each kernel's contract is in its
source (:mod:`iron.runtime.npu.kernels`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from iron.core.device import Device
from iron.core.dma import linear_walk
from iron.core.percall import Affine, PerCall
from iron.operators import LayerNorm, RMSNorm, Softmax
from iron.runtime.image import Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design, Words, registered
from iron.runtime.npu.designs.sequence import (
    assemble,
    load_words,
    runtime_sequence,
    sequence_args,
    word_slots,
    words_fifo,
    words_transfer,
)
from iron.runtime.npu.mlir import INDEX_MAX, MLIR_AIE_RELEASE, Builder, memref

__all__ = ["FAMILY", "build", "handles", "kernel_of"]

_ITEM = 2  # bf16
_F32 = 4
_PARAM_DEPTH = 1  # a weight or bias, resident for the whole call
_CORE_ROW = 2

#: The operators this module designs.
FAMILY: tuple[type, ...] = (RMSNorm, LayerNorm, Softmax)

#: The row-long parameter ports: delivered once per core per call.
_PARAMS = ("weight", "bias")

#: Each operator's parameters that may be per-call (read from the scratchpad).
_PER_CALL: dict[type, tuple[str, ...]] = {Softmax: ("length",)}


def handles(op: Any) -> bool:
    """Whether ``op`` is of the row family."""
    return isinstance(op, FAMILY)


def _f32_bits(value: float) -> int:
    """The int32 whose bits are ``value`` as fp32 (what the kernel reinterprets)."""
    return int(np.asarray(np.float32(value)).view(np.int32))


def kernel_of(op: Any) -> tuple[str, tuple[int | str, ...]]:
    """``op``'s kernel symbol and its scalar arguments after ``n, cols``.

    RMSNorm and LayerNorm pass ``eps`` as fp32 bits; Softmax passes ``length``
    (``cols`` for None, clamped to ``0..cols`` as the reference clamps it).
    An int is a compile-time constant; a str names a per-call parameter the
    core reads from the scratchpad (Softmax's ``"length"``, which the kernel
    clamps).

    Raises:
        NotImplementedError: A LayerNorm has a weight without a bias or a
            bias without a weight.
    """
    if isinstance(op, RMSNorm):
        symbol = "rms_norm_weighted_bf16" if op.weighted else "rms_norm_bf16"
        return symbol, (_f32_bits(op.eps),)
    if isinstance(op, LayerNorm):
        if bool(op.weighted) != bool(op.biased):
            raise NotImplementedError(
                f"{op!r}: the NPU LayerNorm kernels take both weight and bias "
                f"(layer_norm_affine_bf16) or neither (layer_norm_bf16); one "
                f"without the other has no design yet: run it on the emulated "
                f"NPU (IRON_BACKEND=emu)"
            )
        symbol = "layer_norm_affine_bf16" if op.weighted else "layer_norm_bf16"
        return symbol, (_f32_bits(op.eps),)
    if isinstance(op, Softmax):
        length = op.length
        if length is None:
            return "softmax_bf16", (int(op.cols),)
        if isinstance(length, PerCall | Affine):
            return "softmax_bf16", ("length",)
        return "softmax_bf16", (min(max(int(length), 0), int(op.cols)),)
    names = ", ".join(cls.__name__ for cls in FAMILY)
    raise KeyError(f"{type(op).__name__} is not of the row family ({names})")


def _ports(op: Any) -> tuple[list[str], list[str], list[str]]:
    """``(row inputs, parameter inputs, outputs)`` present on ``op``."""
    decl = type(op).declaration
    flags = {"weight": "weighted", "bias": "biased"}
    rows, params = [], []
    for i in decl.inputs:
        if i.name in _PARAMS:
            if getattr(op, flags[i.name], False):
                params.append(i.name)
        else:
            rows.append(i.name)
    return rows, params, [o.name for o in decl.outputs]


def build(
    op: Any,
    dev: Device,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
    words: Words | None = None,
) -> Design:
    """The design of row-family ``op`` on ``dev`` (see the module docstring).

    ``words`` gives a per-call Softmax length its scratchpad slot (a
    standalone operator's takes slot 0 of a one-word scratchpad).

    Raises:
        NotImplementedError: Per-call rows, or a LayerNorm with only one of
            weight and bias.
        iron.runtime.npu.legality.LegalityError: A device limit is broken.
        iron.core.operator.RefusedShapeError: The operator refuses ``dev``.
        ValueError: A placement is too small, misplaced, or names no port, or
            a per-call length has no slot in ``words``.
    """
    op = op.resolved(dev)
    if not isinstance(op.rows, int):
        raise NotImplementedError(
            f"{op!r}: rows is the per-call value {op.rows}; the NPU row designs "
            f"need a fixed row count (run it on the emulated NPU, IRON_BACKEND=emu)"
        )
    op.check(dev)
    symbol, scalars = kernel_of(op)
    row_ins, params, outs = _ports(op)
    cols, rows, ncol = int(op.cols), int(op.rows), op.num_aie_columns
    tile = op.rows_per_tile * cols
    per_col = rows // ncol * cols
    tiles = per_col // tile
    need = {p: rows * cols * _ITEM for p in row_ins}
    need |= {p: cols * _ITEM for p in params}
    need |= {p: rows * cols * _ITEM for p in outs}
    slots, count = word_slots(op, registered(op, _PER_CALL) or (), words)
    count = count if slots else 0  # no per-call parameter reads no words
    args, where = sequence_args(op, need, placement, arena_bytes, words=count)
    shim = [legality.Tile(c, 0) for c in range(ncol)]
    cores = [legality.Tile(c, _CORE_ROW) for c in range(ncol)]
    scratch = cols if isinstance(op, Softmax) else 0
    # Weight and bias share one FIFO (weight, then bias): a core and a shim
    # have two input channels each, which x and a weight already take.
    pfifo = (params[0] if len(params) == 1 else "params") if params else ""

    fifos, transfers = [], []
    for c in range(ncol):
        if count:
            fifos.append(words_fifo(c, shim[c], cores[c], count))
        for p in row_ins:
            fifos.append(
                legality.Fifo(f"{p}_{c}", shim[c], (cores[c],), op.fifo_depth, tile)
            )
        if params:
            fifos.append(
                legality.Fifo(
                    f"{pfifo}_{c}",
                    shim[c],
                    (cores[c],),
                    _PARAM_DEPTH,
                    len(params) * cols,
                )
            )
        for p in outs:
            fifos.append(
                legality.Fifo(f"{p}_{c}", cores[c], (shim[c],), op.fifo_depth, tile)
            )
    row_walk = linear_walk(per_col, _ITEM, dev)
    param_walk = linear_walk(cols, _ITEM, dev)
    for c in range(ncol):
        if count:
            # The scratchpad first: the core acquires it before its first tile.
            bd_words = len(outs + row_ins + params)
            transfers.append(words_transfer(c, shim[c], count, bd_words))
        for bd, p in enumerate(outs + row_ins + params):
            arg, offset = where[p]
            if offset % _ITEM:
                raise ValueError(
                    f"{op!r}: port {p} is placed at byte {offset}, not on a bf16 "
                    f"boundary"
                )
            is_param = p in params
            sizes, strides = param_walk if is_param else row_walk
            transfers.append(
                legality.Transfer(
                    fifo=f"{pfifo if is_param else p}_{c}",
                    shim=shim[c],
                    buffer=arg,
                    offset=offset // _ITEM + (0 if is_param else c * per_col),
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
        buffers=tuple((t, scratch * _F32) for t in cores) if scratch else (),
    )
    legality.check(layout, dev)

    elem, pelem = memref(tile), memref(len(params) * cols)
    sc_type = memref(cols, "f32")
    kernel_types = (
        [elem] * len(row_ins)
        + ([pelem] if params else [])
        + [elem] * len(outs)
        + ([sc_type] if scratch else [])
        + ["i32"] * (2 + len(scalars))
    )
    fifo_types = {2: "bf16", 4: "i32"}
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
            b.objectfifo(
                f.name,
                prod,
                [cons],
                f.depth,
                memref(f.elements, fifo_types[f.itemsize]),
            )
        bufs = [
            b.buffer(core_v[c], f"scratch_{c}", sc_type) if scratch else None
            for c in range(ncol)
        ]
        for c in range(ncol):
            with b.core(core_v[c], stack_size=layout.stack_bytes):
                _core_body(
                    b,
                    c,
                    row_ins,
                    pfifo,
                    outs,
                    symbol,
                    (tile, cols, len(params)),
                    tiles,
                    scalars,
                    kernel_types,
                    bufs[c],
                    (count, slots),
                )
                b.end()
        runtime_sequence(b, args, transfers, outs, ncol)
    return assemble(b, op, dev, args, (symbol,), layout)


def _core_body(
    b: Builder,
    col: int,
    row_ins: list[str],
    pfifo: str,
    outs: list[str],
    symbol: str,
    sizes: tuple[int, int, int],
    tiles: int,
    scalars: tuple[int | str, ...],
    kernel_types: list[str],
    scratch: str | None,
    words: tuple[int, Mapping[str, int]] = (0, {}),
) -> None:
    """One column's core: forever, per call, acquire the scratchpad words (if
    any) and the parameters once, then per tile acquire, call the kernel,
    release; release the parameters and the words.

    A scalar that is a str is the per-call parameter of that name, loaded
    from ``words_<col>`` (``words`` is the scratchpad's size and each
    parameter's slot).
    """
    tile_size, cols, nparams = sizes
    elem, pelem = memref(tile_size), memref(nparams * cols)
    c0, c1 = b.constant(0, "index"), b.constant(1, "index")
    forever = b.constant(INDEX_MAX, "index")
    count = b.constant(tiles, "index")
    n = b.constant(tile_size, "i32")
    ncols = b.constant(cols, "i32")
    bits = {v: b.constant(v, "i32") for v in scalars if isinstance(v, int)}
    nwords, slots = words
    with b.for_(c0, forever, c1, "run"):
        loaded = load_words(b, col, nwords, slots) if nwords else {}
        values = [loaded[v] if isinstance(v, str) else bits[v] for v in scalars]
        pbufs = [b.acquire(f"{pfifo}_{col}", "Consume", pelem, pfifo)] if pfifo else []
        with b.for_(c0, count, c1, "t"):
            bufs = [b.acquire(f"{p}_{col}", "Consume", elem, p) for p in row_ins]
            obufs = [b.acquire(f"{p}_{col}", "Produce", elem, p) for p in outs]
            extra = [scratch] if scratch else []
            b.call(
                symbol,
                [*bufs, *pbufs, *obufs, *extra, n, ncols, *values],
                kernel_types,
            )
            for p in row_ins:
                b.release(f"{p}_{col}", "Consume")
            for p in outs:
                b.release(f"{p}_{col}", "Produce")
        if pfifo:
            b.release(f"{pfifo}_{col}", "Consume")
        if nwords:
            b.release(f"words_{col}", "Consume")
