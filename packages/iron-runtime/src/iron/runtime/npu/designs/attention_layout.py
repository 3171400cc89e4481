"""The layout of an attention plan, for the design of :mod:`.attention`.

This module owns where a :class:`~.attention_stream.Plan` puts things: its
object FIFOs and the shim each input stream leaves from, the walks of the
query tiles and results, every shim transfer in the order the runtime
sequence issues it (K and V walked as :mod:`.attention_stream` says), the
memory tiles' FIFO bytes (:func:`memtile_bytes`), the core terms the
operator's ``check`` does not count, and the fix a refused plan's error
names. :mod:`.attention` describes the layout and emits it.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from iron.core.device import Device
from iron.runtime.npu import legality
from iron.runtime.npu.designs import linear_walk
from iron.runtime.npu.designs._common import words_fifo, words_transfer
from iron.runtime.npu.designs.attention_stream import (
    _CORE_ROW,
    _DEPTH,
    _ITEM,
    _MEM_ROW,
    _WORD,
    Plan,
    _kv_walks,
    _pairing,
)

__all__ = ["memtile_bytes"]


def memtile_bytes(p: Plan, dev: Device) -> dict[legality.Tile, dict[str, int]]:
    """Each memory tile's FIFO bytes by FIFO (element bytes times depth)."""
    out: dict[legality.Tile, dict[str, int]] = defaultdict(dict)
    for f in _fifos(p, dev):
        for end in (f.producer, *f.consumers):
            if end.kind == "mem":
                out[end][f.name] = f.depth * f.element_bytes
    return dict(out)


def _shim_of(p: Plan, dev: Device) -> dict[str, int]:
    """Which shim column each input stream's FIFO leaves from."""
    shim = {}
    n, G = p.columns, p.group
    for c in range(n):
        shim[f"kv_in_{c}"] = c
        if not p.count:
            shim[f"q_{c}"] = c
    if p.count and G == 1:
        for c in range(n):
            shim[f"q_in_{c}"] = c
            shim[f"words_{c}"] = n + c // 2  # the spare shims' channels
    elif p.count:
        for q in range(n // G):
            shim[f"q_in_{q}"] = q * G
            shim[f"words_{q}"] = q * G + 1
    return shim


def _fifos(p: Plan, dev: Device) -> list[legality.Fifo]:
    shim_of = _shim_of(p, dev)
    D, T = p.head_dim, p.kv_tile
    fifos = []
    for c in range(p.columns):
        core, mem = legality.Tile(c, _CORE_ROW), legality.Tile(c, _MEM_ROW)
        fifos += [
            legality.Fifo(
                f"kv_in_{c}", legality.Tile(c, 0), (mem,), p.kv_depth, 2 * p.block
            ),
            legality.Fifo(f"kv_{c}", mem, (core,), _DEPTH, 2 * T * D),
        ]
        if not p.count:
            fifos.append(
                legality.Fifo(f"q_{c}", legality.Tile(c, 0), (core,), _DEPTH, p.q_elems)
            )
        fifos.append(
            legality.Fifo(f"out_{c}", core, (legality.Tile(c, 0),), _DEPTH, p.q_elems)
        )
    if p.count:
        G = p.group
        for q in range(p.columns // G):
            mem = legality.Tile(q * G, _MEM_ROW)
            cores = tuple(legality.Tile(q * G + k, _CORE_ROW) for k in range(G))
            shim = legality.Tile(shim_of[f"q_in_{q}"], 0)
            wshim = legality.Tile(shim_of[f"words_{q}"], 0)
            fifos += [
                legality.Fifo(f"q_in_{q}", shim, (mem,), _DEPTH, G * p.q_elems // 2, 4),
                words_fifo(q, wshim, mem, p.count),
                legality.Fifo(
                    f"qw_{q}", mem, cores, _DEPTH, G * p.q_elems // 2 + p.count, 4
                ),
            ]
    return fifos


def _check_core_memory(op: Any, p: Plan, dev: Device) -> None:
    """The core's memory by the operator's own account, with this plan's terms.

    One account: ``op.core_bytes`` (the sum the operator's ``check`` and
    ``resolve`` use) given the scratchpad words each query element carries
    and whether columns are paired.

    Raises:
        legality.LegalityError: Past a core's data memory (the terms named).
    """
    need = op.core_bytes(p.q_tile, p.kv_tile, words=p.count, pair=p.group)
    if need <= dev.core_memory_bytes:
        return
    words = _DEPTH * p.count * _WORD
    partner = _DEPTH * (p.group - 1) * p.q_elems * _ITEM
    fix = "use a smaller kv_tile" + (" or q_tile" if p.causal else "")
    if partner:
        fix += (
            f", or num_aie_columns={dev.columns * 2 // 3} or fewer so each column "
            f"has its own query element"
        )
    raise legality.LegalityError(
        f"{op!r} on {dev}: {legality.Tile(0, _CORE_ROW)}: needs {need} bytes of "
        f"core memory, {words} of them scratchpad words and {partner} the partner "
        f"column's query tile (double-buffered query elements); a core has "
        f"{dev.core_memory_bytes}; {fix}"
    )


def _q_walks(
    p: Plan, col: int, base: int, dev: Device
) -> list[tuple[int, tuple, tuple]]:
    """``(offset, sizes, strides)`` moving column ``col``'s query (or result) tiles.

    Element ``(j, qt)``: token rows ``qt Q .. qt Q + Q - 1`` of the ``g``
    heads of kv head ``col * hpc + j``, each row ``g D`` contiguous.
    """
    H, D, g, Q = p.heads, p.head_dim, p.g, p.q_tile
    first = base + col * p.hpc * g * D
    if p.q_tiles == 1 and Q == 1:
        return [(first, *linear_walk(p.hpc * g * D, _ITEM, dev))]
    sizes = (p.hpc, p.q_tiles, Q, g * D)
    strides = (
        g * D if p.hpc > 1 else 0,
        Q * H * D if p.q_tiles > 1 else 0,
        H * D if Q > 1 else 0,
        1,
    )
    return [(first, sizes, strides)]


def _pair_walks(p: Plan, grp: int, base: int) -> list[tuple[int, tuple, tuple]]:
    """Query tiles of both columns of pair ``grp``, element ``(j, qt)`` each."""
    H, D, g, Q = p.heads, p.head_dim, p.g, p.q_tile
    first = base + 2 * grp * p.hpc * g * D
    other = p.hpc * g * D  # the second column's heads
    if p.q_tiles == 1:
        sizes = (p.hpc, 2, Q, g * D)
        strides = (g * D if p.hpc > 1 else 0, other, H * D if Q > 1 else 0, 1)
        return [(first, sizes, strides)]
    sizes = (p.q_tiles, 2, Q, g * D)
    strides = (Q * H * D, other, H * D if Q > 1 else 0, 1)
    return [(first + j * g * D, sizes, strides) for j in range(p.hpc)]


def _layout_of(
    op: Any, p: Plan, dev: Device, where: Mapping[str, tuple[str, int]]
) -> legality.Layout:
    """The layout of plan ``p`` with ports at ``where``."""
    fifos = _fifos(p, dev)
    shim_of = _shim_of(p, dev)
    per_shim: dict[int, list[legality.Transfer]] = defaultdict(list)

    def send(fifo: str, shim: int, arg: str, offset: int, sizes, strides):
        per_shim[shim].append(
            legality.Transfer(
                fifo,
                legality.Tile(shim, 0),
                arg,
                offset,
                tuple(sizes),
                tuple(strides),
                _ITEM,
                len(per_shim[shim]),
            )
        )

    for c in range(p.columns):
        arg, base = where["out"]
        for off, sizes, strides in _q_walks(p, c, base, dev):
            send(f"out_{c}", c, arg, off, sizes, strides)
    for c in range(p.columns):
        for arg, off, sizes, strides in _kv_walks(p, c, where, dev):
            send(f"kv_in_{c}", c, arg, off, sizes, strides)
        if not p.count:
            arg, base = where["q"]
            for off, sizes, strides in _q_walks(p, c, base, dev):
                send(f"q_{c}", c, arg, off, sizes, strides)
    if p.count:
        elements = p.hpc * p.q_tiles  # query elements per call, each with words
        for grp in range(p.columns // p.group):
            arg, base = where["q"]
            walks = (
                _q_walks(p, grp, base, dev)
                if p.group == 1
                else _pair_walks(p, grp, base)
            )
            for off, sizes, strides in walks:
                send(f"q_in_{grp}", shim_of[f"q_in_{grp}"], arg, off, sizes, strides)
            wshim = shim_of[f"words_{grp}"]
            for start in range(0, elements, dev.dma_iteration_max):
                reps = min(dev.dma_iteration_max, elements - start)
                t = words_transfer(
                    grp, legality.Tile(wshim, 0), p.count, len(per_shim[wshim])
                )
                per_shim[wshim].append(
                    dataclasses.replace(
                        t, sizes=(reps, 1, 1, p.count), strides=(0, 0, 0, 1)
                    )
                )
    transfers = [t for s in sorted(per_shim) for t in per_shim[s]]
    cores = tuple(legality.Tile(c, _CORE_ROW) for c in range(p.columns))
    scratch = (p.q_rows * p.kv_tile + p.q_rows * p.head_dim + 2 * p.q_rows) * _WORD
    return legality.Layout(
        repr(op),
        cores,
        tuple(fifos),
        tuple(transfers),
        buffers=tuple((t, scratch) for t in cores),
    )


def _fix(p: Plan, dev: Device, where: Mapping[str, tuple[str, int]]) -> str:
    """The way out of a refused plan, for the legality error."""
    if p.dist is not None:
        return (
            f"no span of kv_tile={p.kv_tile}-position chunks fits; use a shorter "
            f"max_len or fewer kv heads a column"
        )
    _, why = _pairing(where, dev)
    mem = max(sum(v.values()) for v in memtile_bytes(p, dev).values())
    return (
        f"each kv head streams {p.passes} time(s) in {p.spans} span(s) of "
        f"{p.span} chunks ({mem} bytes in a memory tile), two shim descriptors a "
        f"span because {why}; place k_cache and v_cache in one argument (the "
        f"arena, as a model's plan does) with v_cache after k_cache within "
        f"{1 << dev.dma_stride_bits} words, so one descriptor alternates them, or "
        f"use a shorter max_len"
    )
