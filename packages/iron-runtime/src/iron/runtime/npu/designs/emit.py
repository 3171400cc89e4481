"""The Emit step's design: the next run's scratchpad, computed on the device.

A looping full-ELF version ends in an Emit step (:mod:`iron.core.emit`): from
this run's carried values (its scratchpad's carried slots) and the values
the device made (a sampled token, read from its handle in the arena) it
computes the next run's scratchpad and writes it into that run's ``words``
buffer, so the host only waits and restarts (``CarriedLoop``).

Layout: one core, (0, 2), fed by column 0's shim. Three object FIFOs of
depth 1, int32:

* ``emit_program``: the program (:data:`PROGRAM_WORDS`, from the
  ``program`` argument, where the host writes what ``emit_to`` composed);
* ``emit_slots``: the slots in :func:`iron.core.emit.slots_of` order, one
  shim transfer a slot: a carried value from ``words`` at its scratchpad
  slot, a made value from ``arena`` at its handle's planned offset (or from
  the graph output that holds it);
* ``emit_next``: the next scratchpad, the whole ``words`` capacity, drained
  into the ``feedback`` argument (the next run's ``words`` buffer).

The core loops forever: acquire the three, call ``iron_emit(program, slots,
next, regs, PROGRAM_WORDS, REGISTERS)`` (``kernels/emit.cc``, with a
core-local register file), release. The runtime sequence drains
``emit_next`` (descriptor 0), sends the program (1) and each slot (2, 3,
...), and waits for the drain.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from iron.core.device import Device
from iron.core.dma import linear_walk
from iron.core.emit import HEADER, WIDTH, slots_of
from iron.core.handle import Handle
from iron.runtime.image import ImageSpec
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design
from iron.runtime.npu.designs.sequence import WORDS, runtime_sequence
from iron.runtime.npu.mlir import INDEX_MAX, MLIR_AIE_RELEASE, Builder, memref

__all__ = ["INSTRUCTIONS", "PROGRAM_WORDS", "REGISTERS", "build"]

#: Instructions an Emit program may have on the device.
INSTRUCTIONS = 256
#: Words of the program buffer: the header and :data:`INSTRUCTIONS` instructions.
PROGRAM_WORDS = HEADER + WIDTH * INSTRUCTIONS
#: Registers the core-local register file holds.
REGISTERS = 256

_WORD = 4
_CORE = legality.Tile(0, 2)
_SHIM = legality.Tile(0, 0)
KERNEL_SOURCE = "emit"


def _made_at(
    spec: ImageSpec, name: str, segments: Mapping[str, Any] | None = None
) -> tuple[str, int]:
    """Where the int32 the device made for carried ``name`` is: argument, byte.

    ``segments`` maps an arena buffer to its stretch (an argument and its
    first byte; :func:`iron.runtime.npu.graph.arena_segments`).
    """
    handle = spec.recording.carry[name]
    assert isinstance(handle, Handle)
    buf = spec.placement[handle.buffer.name]
    offset = handle.layout.static_offset
    if offset is None or np.dtype(handle.dtype).itemsize != _WORD:
        raise NotImplementedError(
            f"{spec.name}: the Emit reads carried {name} from {handle.name}; on the "
            f"NPU it must be an int32 at a fixed place (a step's output)"
        )
    if buf.where == "arena":
        seg = (segments or {}).get(handle.buffer.name)
        if seg is not None:
            return seg.arg, buf.offset - seg.start + offset * _WORD
        return "arena", buf.offset + offset * _WORD
    return f"{buf.where}:{handle.buffer.name}", offset * _WORD


def build(
    spec: ImageSpec,
    dev: Device,
    *,
    capacity: int,
    arena_bytes: int,
    segments: Mapping[str, Any] | None = None,
) -> Design:
    """The Emit design of ``spec`` (which ends in an Emit step) on ``dev``.

    ``capacity`` is the words of every run's scratchpad buffer (what
    ``emit_next`` writes whole). ``segments``: the arena argument each arena
    buffer lies in (:func:`iron.runtime.npu.graph.arena_segments`).

    Raises:
        NotImplementedError: A made value is not an int32 at a fixed arena place.
        iron.runtime.npu.legality.LegalityError: Too many slots for the shim's
            buffer descriptors.
    """
    site = spec.emit
    assert site is not None
    slots = slots_of(site)
    args = [(WORDS, capacity * _WORD), ("program", PROGRAM_WORDS * _WORD)]
    sources = []
    for name in slots:
        if name in site.carried:
            sources.append((WORDS, spec.carried_slot(name), (1, 1, 1, 1), _WORD))
        else:
            arg, byte = _made_at(spec, name.rsplit(".", 1)[0], segments)
            if arg.startswith("arena"):  # bf16 in every design: two halves
                sources.append((arg, byte // 2, (1, 1, 1, 2), 2))
            else:  # a graph output, int32 as its step (Sample) types it
                sources.append((arg, byte // _WORD, (1, 1, 1, 1), _WORD))
    stretches = [
        a for a in dict.fromkeys(s[0] for s in sources) if a.startswith("arena")
    ]
    for k, arg in enumerate(sorted(stretches)):
        args.insert(k, (arg, arena_bytes))
    for arg in dict.fromkeys(s[0] for s in sources):
        if arg.startswith(("input:", "output:")):  # a graph output holds it
            name = arg.split(":", 1)[1]
            args.insert(-1, (arg, spec.placement[name].nbytes))
    args.append(("feedback", capacity * _WORD))
    fifos = (
        legality.Fifo("emit_program", _SHIM, (_CORE,), 1, PROGRAM_WORDS, _WORD),
        legality.Fifo("emit_slots", _SHIM, (_CORE,), 1, max(1, len(slots)), _WORD),
        legality.Fifo("emit_next", _CORE, (_SHIM,), 1, capacity, _WORD),
    )
    next_walk = linear_walk(capacity, _WORD, dev)
    program_walk = linear_walk(PROGRAM_WORDS, _WORD, dev)
    transfers = [
        legality.Transfer(
            "emit_next", _SHIM, "feedback", 0, *next_walk, _WORD, 0, token=True
        ),
        legality.Transfer("emit_program", _SHIM, "program", 0, *program_walk, _WORD, 1),
    ]
    # The slots' one-word transfers go in rounds of a channel's task queue:
    # pushed together, a fifth would be dropped (issue 28; mlir-aie PR
    # #3734), so a round that leaves more ends with a token and a wait.
    queue = legality.TILE_LIMITS[dev.arch].task_queue
    waits: list[tuple[int, str]] = []
    for k, (arg, offset, sizes, itemsize) in enumerate(sources):
        more = (k + 1) % queue == 0 and k + 1 < len(sources)
        transfers.append(
            legality.Transfer(
                "emit_slots",
                _SHIM,
                arg,
                offset,
                sizes,
                (0, 0, 0, 1),
                itemsize,
                2 + k,
                token=more,
            )
        )
        if more:
            waits.append((len(transfers), "emit_slots"))
    waits.append((len(transfers), "emit_next"))
    layout = legality.Layout(
        f"Emit of {spec.name}",
        (_CORE,),
        fifos,
        tuple(transfers),
        legality.core_stack(dev, (KERNEL_SOURCE,)),
        buffers=((_CORE, REGISTERS * _WORD),),
        waits=tuple(waits),
    )
    legality.check(layout, dev)

    prog_t, slots_t = memref(PROGRAM_WORDS, "i32"), memref(max(1, len(slots)), "i32")
    next_t, regs_t = memref(capacity, "i32"), memref(REGISTERS, "i32")
    b = Builder()
    b.comment(
        f"IRON design: Emit of {spec.name} on {dev.name}; mlir-aie {MLIR_AIE_RELEASE}"
    )
    sig = [prog_t, slots_t, next_t, regs_t, "i32", "i32"]
    with b.region("module"), b.device(dev.name, "main"):
        b.func_decl("iron_emit", sig, f"{KERNEL_SOURCE}.o")
        shim = b.tile(0, 0, "shim_noc_tile")
        core = b.tile(0, 2)
        b.objectfifo("emit_program", shim, [core], 1, prog_t)
        b.objectfifo("emit_slots", shim, [core], 1, slots_t)
        b.objectfifo("emit_next", core, [shim], 1, next_t)
        regs = b.buffer(core, "emit_regs", regs_t)
        with b.core(core, stack_size=layout.stack_bytes):
            c0, c1 = b.constant(0, "index"), b.constant(1, "index")
            forever = b.constant(INDEX_MAX, "index")
            n_prog, n_regs = (
                b.constant(PROGRAM_WORDS, "i32"),
                b.constant(REGISTERS, "i32"),
            )
            with b.for_(c0, forever, c1, "run"):
                prog = b.acquire("emit_program", "Consume", prog_t, "program")
                vals = b.acquire("emit_slots", "Consume", slots_t, "slots")
                nxt = b.acquire("emit_next", "Produce", next_t, "next")
                b.call("iron_emit", [prog, vals, nxt, regs, n_prog, n_regs], sig)
                b.release("emit_program", "Consume")
                b.release("emit_slots", "Consume")
                b.release("emit_next", "Produce")
            b.end()
        runtime_sequence(
            b,
            args,
            layout.transfers,
            [],
            1,
            dtypes={a: "i32" for a, *_ in sources if not a.startswith("arena")},
            points=layout.waits,
        )
    return Design(
        operator=f"Emit of {spec.name}",
        device=dev.name,
        text=b.text(),
        args=tuple(a for a, _ in args),
        arg_bytes=tuple(n for _, n in args),
        kernels=(KERNEL_SOURCE,),
        layout=layout,
    )
