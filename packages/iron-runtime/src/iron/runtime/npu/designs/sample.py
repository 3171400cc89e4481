"""The Sample design: one token id from a logits vector, greedy or a seeded top-k/top-p draw.

:class:`iron.operators.sample.Sample` runs on one core, ``(0, 2)``, fed by
the shim tile ``(0, 0)`` (no memory tile). Object FIFOs:

* ``logits_0``: ``tile_size`` logits (bf16, or f32 when ``itemsize`` is 4),
  depth 2, shim to core;
* ``token_0``: one ``i32``, depth 1, core to shim;
* ``words_0``: the run's scratchpad (:func:`.sequence.words_fifo`), only when
  a per-call value is read: ``seed`` (unless the draw is greedy), or any of
  ``temperature``, ``top_k`` and ``top_p``.

The core keeps its running top-k list in a core-local ``aie.buffer``
``topk_0`` of ``2 + 2k`` ``i32`` (entries kept, the next logit's index, ``k``
integer keys, ``k`` indices), ``k`` the operator's ``top_k``, or 1 when greedy
(``temperature == 0`` ignores ``top_k``), or ``min(256, vocab)`` when
``top_k`` is per call (the call's ``k`` then uses the list's first
``2 + 2k`` words). It loops forever; per call it
acquires ``words_0`` and loads ``seed`` from its slot (when per-call), calls
``sample_reset(topk, k)``, then for each of the ``vocab / tile_size`` chunks
acquires ``logits_0``, calls ``sample_scan_bf16`` (or ``sample_scan_f32``)
``(chunk, topk, tile_size, k)`` and releases it; then acquires ``token_0``,
calls ``sample_pick(topk, token, k, greedy, inv_bits, seed)`` and releases it
(and ``words_0``). ``inv_bits`` is the fp32 bit pattern of ``fp32(1) /
fp32(temperature)``, computed here exactly as
:func:`iron.operators.sample.draw` computes it; a fixed ``seed`` is a
compile-time ``i32`` (modulo ``2**32``, as ``hash32`` reads it), a per-call
one is read with :func:`.sequence.load_words` from its scratchpad slot.

*Per-call settings.* When ``temperature``, ``top_k`` or ``top_p`` is a
per-call value, or ``top_p`` is below 1, the pick is instead
``sample_pick_call(topk, token, k, temperature_code, top_p_bits, seed)``:
each a constant or its loaded word (``k`` too, for reset and scan), the
temperature as :func:`iron.operators.sample.temperature_code` (0 greedy; the
kernel divides ``1 / T`` itself, an IEEE single division as ``draw`` does)
and ``top_p`` as its float32 bits (:func:`iron.operators.sample.top_p_code`),
so a request's settings change nothing but words.

The runtime sequence drains ``token`` (buffer descriptor 0), fills
``logits`` (1) and, with a per-call seed, ``words`` (2), then waits on
``token_0``. Arguments: ``logits`` (bf16 or f32), ``token`` (i32), then
``words`` (i32) when read; a port placed in the arena is addressed in the
arena's bf16 elements (the shim moves bytes), so it needs a 4-byte aligned
offset, which legality names otherwise.

All five kernel symbols live in ``sample.cc`` (its contract:
:func:`iron.runtime.npu.kernels.contract` of ``sample``); the host tests run
that very source's algorithm against ``Sample.reference``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from iron.core.device import Device
from iron.core.dma import linear_walk
from iron.core.handle import is_expr
from iron.operators import Sample
from iron.operators.sample import temperature_code, top_p_code
from iron.runtime.image import Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design, Words
from iron.runtime.npu.designs.sequence import (
    assemble,
    in_arena,
    load_words,
    runtime_sequence,
    sequence_args,
    word_slots,
    words_fifo,
    words_transfer,
)
from iron.runtime.npu.mlir import INDEX_MAX, MLIR_AIE_RELEASE, Builder, memref

__all__ = [
    "FAMILY",
    "KERNEL_SOURCE",
    "build",
    "handles",
    "inv_bits",
    "layout",
    "list_words",
    "seed_bits",
]

_BF16 = 2
_WORD = 4
_TOKEN_DEPTH = 1  # one token a call
_COL = 0
_CORE_ROW = 2

#: The operators this module designs.
FAMILY: tuple[type, ...] = (Sample,)

#: The kernel source (``sample.cc``, linked as ``sample.o``).
KERNEL_SOURCE = "sample"

_RESET, _PICK, _PICK_CALL = "sample_reset", "sample_pick", "sample_pick_call"
#: The fields a design may read per call, in their slot order standalone.
_PER_CALL = ("seed", "temperature", "top_k", "top_p")
_SCAN = {2: "sample_scan_bf16", 4: "sample_scan_f32"}
_LOGIT_TYPE = {2: "bf16", 4: "f32"}


def handles(op: Any) -> bool:
    """Whether ``op`` is a Sample."""
    return isinstance(op, FAMILY)


def list_words(k: int) -> int:
    """The ``i32`` words of the core's top-k list: count, next index, keys, indices."""
    return 2 + 2 * k


def inv_bits(temperature: float) -> int:
    """The int32 whose bits are ``fp32(1) / fp32(temperature)`` (0 when greedy).

    The same numpy expression :func:`iron.operators.sample.draw` evaluates.
    """
    if temperature == 0:
        return 0
    with np.errstate(all="ignore"):
        inv = np.float32(1) / np.float32(temperature)
    return int(np.asarray(inv, dtype=np.float32).view(np.int32))


def seed_bits(seed: int) -> int:
    """A fixed seed as the int32 with the same low 32 bits (``hash32`` wraps)."""
    return int(np.array(int(seed) % (1 << 32), dtype=np.uint32).view(np.int32))


def per_call_pick(op: Any) -> bool:
    """Whether ``op`` picks with ``sample_pick_call``: a per-call setting, or
    a nucleus (``top_p < 1``); a fixed greedy Sample never does."""
    if not is_expr(op.temperature) and op.temperature == 0:
        return False
    settings = (op.temperature, op.top_k, op.top_p)
    return any(is_expr(v) for v in settings) or op.top_p < 1


def list_k(op: Any) -> int:
    """The entries the core's list holds: ``top_k``, 1 when greedy, and
    ``min(256, vocab)`` for a per-call ``top_k``."""
    if is_expr(op.top_k):
        return int(op.max_top_k)
    if not is_expr(op.temperature) and op.temperature == 0:
        return 1
    return int(op.top_k)


def _read(op: Any) -> tuple[str, ...]:
    """The per-call fields the core reads."""
    if not per_call_pick(op):
        greedy = op.temperature == 0
        return () if greedy else ("seed",)
    return _PER_CALL


def _bytes(op: Any) -> dict[str, int]:
    return {"logits": op.vocab * op.itemsize, "token": _WORD}


def layout(
    op: Any,
    dev: Device,
    where: Mapping[str, tuple[str, int]] | None = None,
    words: int = 0,
) -> legality.Layout:
    """What the design of resolved ``op`` places on ``dev`` (not yet checked).

    ``where`` maps each port to ``(argument, element offset)`` as
    :func:`.sequence.sequence_args` gives it (bf16 elements in the arena);
    ``words`` is the scratchpad's size when the core reads a per-call seed.
    """
    where = dict(where or {"logits": ("logits", 0), "token": ("token", 0)})
    k = list_k(op)
    shim, core = legality.Tile(_COL, 0), legality.Tile(_COL, _CORE_ROW)
    fifos = [
        legality.Fifo(
            f"logits_{_COL}", shim, (core,), op.fifo_depth, op.tile_size, op.itemsize
        ),
        legality.Fifo(f"token_{_COL}", core, (shim,), _TOKEN_DEPTH, 1, _WORD),
    ]
    if words:
        fifos.append(words_fifo(_COL, shim, core, words))
    item = {"logits": op.itemsize, "token": _WORD}
    transfers = []
    for bd, p in enumerate(("token", "logits")):
        arg, base = where[p]
        size = _BF16 if in_arena(arg) else item[p]
        sizes, strides = linear_walk(_bytes(op)[p] // size, size, dev)
        transfers.append(
            legality.Transfer(f"{p}_{_COL}", shim, arg, base, sizes, strides, size, bd)
        )
    if words:
        transfers.append(words_transfer(_COL, shim, words, len(transfers)))
    return legality.Layout(
        repr(op),
        (core,),
        tuple(fifos),
        tuple(transfers),
        legality.core_stack(dev, (KERNEL_SOURCE,)),
        buffers=((core, list_words(k) * _WORD),),
    )


def build(
    op: Any,
    dev: Device,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
    words: Words | None = None,
) -> Design:
    """The design of Sample ``op`` on ``dev`` (see the module docstring).

    ``words`` places each per-call field in the run's scratchpad (standalone,
    slots ``0, 1, ...`` in the order seed, temperature, top_k, top_p); a
    fixed greedy Sample reads no seed and takes no ``words`` argument.

    Raises:
        iron.runtime.npu.legality.LegalityError: A device limit is broken (an
            arena port off a 4-byte boundary, or a vocabulary the shim cannot
            walk in one descriptor).
        iron.core.operator.RefusedShapeError: The operator refuses ``dev``.
        ValueError: A placement is too small, misplaced, or names no port, a
            per-call field has no slot in ``words``, or a fixed temperature
            of a per-call pick is outside what ``temperature_code`` holds.
    """
    op = op.resolved(dev)
    op.check(dev)
    call = per_call_pick(op)
    greedy = not call and op.temperature == 0
    k = list_k(op)
    read = _read(op)
    slots, count = word_slots(op, read, words) if read else ({}, 0)
    args, where = sequence_args(
        op, _bytes(op), placement, arena_bytes, unit=_BF16, words=count
    )
    lay = layout(op, dev, where, count)
    legality.check(lay, dev)

    tile, item = op.tile_size, op.itemsize
    chunk_t = memref(tile, _LOGIT_TYPE[item])
    list_t, token_t = memref(list_words(k), "i32"), memref(1, "i32")
    scan = _SCAN[item]
    obj = f"{KERNEL_SOURCE}.o"
    scan_types = [chunk_t, list_t, "i32", "i32"]
    pick_types = [list_t, token_t, "i32", "i32", "i32", "i32"]
    pick = _PICK_CALL if call else _PICK
    b = Builder()
    b.comment(f"IRON design: {op!r} on {dev.name}; mlir-aie {MLIR_AIE_RELEASE}")
    with b.region("module"), b.device(dev.name, "main"):
        b.func_decl(_RESET, [list_t, "i32"], obj)
        b.func_decl(scan, scan_types, obj)
        b.func_decl(pick, pick_types, obj)
        shim_v = b.tile(_COL, 0, "shim_noc_tile")
        core_v = b.tile(_COL, _CORE_ROW)
        elem = {"logits": chunk_t, "token": token_t}
        for f in lay.fifos:
            port = f.name.rsplit("_", 1)[0]
            prod, cons = (
                (shim_v, core_v) if f.producer.kind == "shim" else (core_v, shim_v)
            )
            if port == "words":
                elem_t = memref(count, "i32")
            else:
                elem_t = elem[port]
            b.objectfifo(f.name, prod, [cons], f.depth, elem_t)
        topk = b.buffer(core_v, f"topk_{_COL}", list_t)
        with b.core(core_v, stack_size=lay.stack_bytes):
            c0, c1 = b.constant(0, "index"), b.constant(1, "index")
            forever = b.constant(INDEX_MAX, "index")
            chunks = b.constant(op.vocab // tile, "index")
            n = b.constant(tile, "i32")
            fixed = _constants(b, op, call, greedy, k, slots)
            with b.for_(c0, forever, c1, "run"):
                loaded = load_words(b, _COL, count, slots) if count else {}
                value = {**fixed, **loaded}
                kk = value["top_k"]
                b.call(_RESET, [topk, kk], [list_t, "i32"])
                with b.for_(c0, chunks, c1, "t"):
                    chunk = b.acquire(f"logits_{_COL}", "Consume", chunk_t, "chunk")
                    b.call(scan, [chunk, topk, n, kk], scan_types)
                    b.release(f"logits_{_COL}", "Consume")
                token = b.acquire(f"token_{_COL}", "Produce", token_t, "token")
                if call:
                    last = [value["temperature"], value["top_p"], value["seed"]]
                else:
                    last = [value["greedy"], value["inv"], value["seed"]]
                b.call(pick, [topk, token, kk, *last], pick_types)
                b.release(f"token_{_COL}", "Produce")
                if count:
                    b.release(f"words_{_COL}", "Consume")
            b.end()
        runtime_sequence(
            b,
            args,
            lay.transfers,
            ["token"],
            1,
            # Keyed by argument (a port's is "output:sample<k>" in a graph);
            # an arena argument stays bf16, addressed in bf16 elements.
            dtypes={
                where[p][0]: t
                for p, t in (("logits", _LOGIT_TYPE[item]), ("token", "i32"))
                if not in_arena(where[p][0])
            },
        )
    return assemble(b, op, dev, args, (KERNEL_SOURCE,), lay)


def _constants(
    b: Builder, op: Any, call: bool, greedy: bool, k: int, slots: Mapping[str, int]
) -> dict[str, str]:
    """The pick's fixed arguments as ``i32`` constants, by name (the per-call
    ones are loaded each call instead)."""
    out = {"top_k": b.constant(k, "i32")} if "top_k" not in slots else {}
    if not call:
        out["greedy"] = b.constant(int(greedy), "i32")
        out["inv"] = b.constant(inv_bits(op.temperature), "i32")
        if "seed" not in slots:  # greedy never reads the seed: it passes 0
            out["seed"] = b.constant(0 if greedy else seed_bits(op.seed), "i32")
        return out
    if "temperature" not in slots:
        out["temperature"] = b.constant(temperature_code(op.temperature), "i32")
    if "top_p" not in slots:
        out["top_p"] = b.constant(top_p_code(op.top_p), "i32")
    if "seed" not in slots:
        out["seed"] = b.constant(seed_bits(op.seed), "i32")
    return out
