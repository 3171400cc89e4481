"""The ``Copy`` design of :mod:`.movers`, and what the movers share (per-call
windows, the memory-tile forward ``Repeat`` uses too, the runtime sequence).

Copy and Repeat only move elements, so the array only forwards them: the
column-0 shim tile reads the input with its DMA walks into object FIFO
``<in>_0`` (shim to the column's memory tile, depth 2), which
``aie.objectfifo.link`` forwards as ``out_0`` (memory tile back to a shim
tile), whose S2MM walks write the output. No core runs and no kernel is
called (``Copy.cost`` and ``Repeat.cost`` count no core and no call).

Why a memory-tile link and not a core that passes elements through: an
object FIFO joins two tiles that hold its buffers, and a shim holds none, so
shim-to-shim needs a tile in between; the memory tile's DMA forwards a
linked FIFO by itself (mlir-aie's ``programming_examples/basic/
passthrough_dmas/passthrough_dmas.py``, whose
``of_in.cons().forward()`` makes exactly this link, runs with no worker),
where a core would spend a kernel call and two core DMA channels on a copy.
The link syntax ``aie.objectfifo.link [@a] -> [@b]([] [])`` is that of
mlir-aie's ``test/objectFifo-stateful-transform/adjacent_memtile_allocation/
twofifo_on_2memtile.mlir`` (2025, npu1, shim -> memory tile -> shim), whose
CHECK lines also show the memory tile allocating one set of buffers for both
ends of a one-to-one link.

The FIFO element (the chunk the memory tile holds) is the largest divisor of
every shim transfer's element count whose bytes are whole 4-byte words and
at most 32 KiB, so no transfer ends inside a chunk.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from math import gcd, prod
from typing import Any, cast

from iron.core.device import Device
from iron.core.dma import shim_pieces, walk_reach
from iron.operators.movers import Access, Copy
from iron.runtime.image import Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design
from iron.runtime.npu.designs.sequence import (
    assemble,
    in_arena,
    runtime_sequence,
    sequence_args,
)
from iron.runtime.npu.mlir import MLIR_AIE_RELEASE, Builder, memref

__all__ = [
    "HOST_BUFFERS_MAX",
    "TASK_QUEUE",
    "HostBufferLimitError",
    "Wait",
    "Window",
    "build_copy",
    "copy_windows",
]

#: Host buffers one XRT kernel run takes (aiecc's ``kMaxHostBOs``, mlir-aie
#: tools/aiecc/SidecarFiles.h).
HOST_BUFFERS_MAX = 16

#: Tasks one shim DMA channel queues (``dma_task_queue_depth`` in AMD IRON's
#: dma.py, https://github.com/amd/IRON); more wait for a completion token.
TASK_QUEUE = 4

_DEPTH = 2  # the memory tile double-buffers the forwarded chunks
_CHUNK_BYTES = 32 * 1024
_MEM_ROW = 1
_DTYPE = {1: "i8", 2: "bf16", 4: "i32"}


class HostBufferLimitError(NotImplementedError):
    """A design would take more host buffers than one XRT kernel run binds."""


@dataclasses.dataclass(frozen=True)
class Window:
    """A runtime-sequence argument the host binds per run inside a buffer.

    The argument is the ``elements`` elements of the port's buffer that start
    at element ``start + sum(c * v)``, ``v`` being the values of the view's
    per-call offset terms this call in their order (``per_call`` are their
    coefficients, :attr:`iron.operators.movers.Access.per_call`); for row
    ``i`` of a gather by an id handle, ``v`` is ``ids[i]``.
    """

    arg: str
    start: int
    per_call: tuple[int, ...]
    elements: int


@dataclasses.dataclass(frozen=True)
class Wait:
    """A wait in the runtime sequence for the token of FIFO ``fifo``'s channel."""

    fifo: str


@dataclasses.dataclass(frozen=True)
class _Port:
    """How a port is read or written: argument(s), walks in them, bytes each."""

    args: tuple[str, ...]
    walks: tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...]
    arg_of_walk: tuple[int, ...]
    need: tuple[int, ...]  # elements per argument
    windows: tuple[Window, ...]


def _port(name: str, access: Access) -> _Port:
    """Arguments and walks of port ``name`` read (or written) as ``access`` walks."""
    walks = access.walks
    if not access.per_call:
        reach = max(o + walk_reach(s, t) for o, s, t in walks)
        return _Port((name,), walks, (0,) * len(walks), (reach,), ())
    if access.per_walk:  # rows by an id handle: one window per row
        args = tuple(f"{name}_{i}" for i in range(len(walks)))
        rel = tuple((0, s, t) for _, s, t in walks)
        need = tuple(walk_reach(s, t) for _, s, t in walks)
        wins = tuple(
            Window(a, o, access.per_call, n)
            for a, (o, _, _), n in zip(args, walks, need)
        )
        return _Port(args, rel, tuple(range(len(walks))), need, wins)
    lo = min(o for o, _, _ in walks)
    rel = tuple((o - lo, s, t) for o, s, t in walks)
    extent = max(o + walk_reach(s, t) for o, s, t in rel)
    win = Window(name, lo, access.per_call, extent)
    return _Port((name,), rel, (0,) * len(walks), (extent,), (win,))


def copy_windows(op: Copy, out_access: Access | None = None) -> tuple[Window, ...]:
    """The per-call windows the host binds for a ``Copy``'s design, in order."""
    n = prod(op.shape)
    dense = Access("dense", ((0, (n,), (1,)),))
    view = _port("view", op.access or dense)
    out = _port("out", out_access or dense)
    return view.windows + out.windows


def _chunk(counts: Sequence[int], itemsize: int) -> int:
    """The FIFO element: the largest divisor of every count, whole words, <= 32 KiB."""
    g = 0
    for c in counts:
        g = gcd(g, c)
    for d in range(min(g, _CHUNK_BYTES // itemsize), 0, -1):
        if g % d == 0 and (d * itemsize) % 4 == 0:
            return d
    return g


def _itemsize(op: Any, itemsize: int) -> str:
    if itemsize not in _DTYPE:
        raise NotImplementedError(
            f"{op!r}: {itemsize}-byte elements have no NPU design (a shim DMA "
            f"moves 1-, 2- or 4-byte items); move the tensor as a 4-byte dtype "
            f"(twice the elements) or run it on the emulated NPU (IRON_BACKEND=emu)"
        )
    return _DTYPE[itemsize]


def _refuse_sized(op: Any, port: str, access: Access) -> None:
    if access.sized_per_call:
        raise NotImplementedError(
            f"{op!r}: the {port} walk {access!r} takes a per-call repeat or length "
            f"as its sizes, which a static shim descriptor cannot; copy the whole "
            f"walk (no repeat= or length=) or run it on the emulated NPU "
            f"(IRON_BACKEND=emu)"
        )


def _check_window_placement(
    op: Any, name: str, port: _Port, placement: Mapping[str, Placement]
) -> None:
    """A per-call port is its own argument: refuse a placement in the arena."""
    p = placement.get(name)
    if port.windows and p is not None and in_arena(p.where):
        raise ValueError(
            f"{op!r}: port {name} moves per call, so the design reads it from its "
            f"own argument the host binds at the evaluated offset; place it as "
            f"a 'window', not in the arena at byte {p.offset}"
        )


def _args(
    op: Any,
    ports: Mapping[str, _Port],
    placement: Mapping[str, Placement] | None,
    arena_bytes: int | None,
    itemsize: int,
) -> tuple[list[tuple[str, int]], dict[str, tuple[str, int]]]:
    """Runtime-sequence arguments and each argument's ``(arg, element offset)``.

    Raises:
        HostBufferLimitError: More than :data:`HOST_BUFFERS_MAX` arguments.
    """
    placement = dict(placement or {})
    need: dict[str, int] = {}
    for name, port in ports.items():
        _check_window_placement(op, name, port, placement)
        if port.args != (name,):
            placement.pop(name, None)  # one argument per gathered row instead
        for a, n in zip(port.args, port.need):
            need[a] = n * itemsize
    args, where = sequence_args(op, need, placement, arena_bytes, unit=itemsize)
    if len(args) > HOST_BUFFERS_MAX:
        rows = sum(len(p.args) for p in ports.values() if len(p.args) > 1)
        raise HostBufferLimitError(
            f"{op!r}: the design takes {len(args)} host buffers "
            f"({', '.join(a for a, _ in args)}), over the {HOST_BUFFERS_MAX} an "
            f"XRT kernel run binds (aiecc's host-buffer slots); gather at most "
            f"{HOST_BUFFERS_MAX - (len(args) - rows)} rows by id per Copy (split "
            f"the ids over several copies)"
        )
    return args, where


def _transfers(
    dev: Device,
    fifo: str,
    shim: legality.Tile,
    port: _Port,
    where: Mapping[str, tuple[str, int]],
    itemsize: int,
    first_bd: int,
) -> list[legality.Transfer]:
    """One shim transfer per descriptor piece of each of ``port``'s walks."""
    found: list[legality.Transfer] = []
    for walk, k in zip(port.walks, port.arg_of_walk):
        arg, base = where[port.args[k]]
        for offset, sizes, strides in shim_pieces(dev, walk, itemsize):
            found.append(
                legality.Transfer(
                    fifo,
                    shim,
                    arg,
                    base + offset,
                    tuple(sizes),
                    tuple(strides),
                    itemsize,
                    first_bd + len(found),
                )
            )
    return found


def _in_bf16(op: Any, t: legality.Transfer) -> legality.Transfer:
    """``t`` in the bf16 elements of its argument when that is the arena's.

    Every design types an arena argument (``arena``, ``arena#<k>``, a window
    ``arena@<i>``) bf16, so a full ELF's steps all pass it one type (aiecc
    refuses an ``aiex.run`` operand typed unlike its callee's argument); a
    Copy of 1- or 4-byte items addresses it in bf16 elements instead of its
    own. The innermost dimension is contiguous (a sub-word item is walked so
    upstream, and a 4-byte item's two halves are adjacent).

    Raises:
        NotImplementedError: The walk cannot be said in bf16 elements.
    """
    if not t.buffer.startswith("arena") or t.itemsize == 2:
        return t
    num, den = (2, 1) if t.itemsize == 4 else (1, 2)
    sizes, strides = list(t.sizes), list(t.strides)
    sizes[-1] *= num
    scaled = [t.offset * num, sizes[-1], *(x * num for x in strides[:-1])]
    if (sizes[-1] > num and strides[-1] != 1) or any(x % den for x in scaled):
        raise NotImplementedError(
            f"{op!r}: the {t.itemsize}-byte walk {t.sizes}/{t.strides} at "
            f"{t.offset} of {t.buffer} is not whole bf16 elements of the arena "
            f"(offset, innermost size and strides in even bytes, innermost "
            f"stride 1); copy 4-byte-aligned whole words"
        )
    sizes[-1] //= den
    strides = [x * num // den for x in strides[:-1]] + [1]
    return dataclasses.replace(
        t,
        offset=t.offset * num // den,
        sizes=tuple(sizes),
        strides=tuple(strides),
        itemsize=2,
    )


def sequenced(
    layout: legality.Layout, items: Sequence[tuple[legality.Transfer, bool] | Wait]
) -> legality.Layout:
    """``layout`` with the transfers, tokens and waits of the sequence ``items``.

    What legality checks is then what :func:`emit_sequence` emits: the
    transfers in issue order, each token where it is issued and each wait
    where it stands (issue 28: a layout and its text must not disagree).
    """
    transfers, waits = _flatten(items)
    return dataclasses.replace(layout, transfers=tuple(transfers), waits=tuple(waits))


def _flatten(
    items: Sequence[tuple[legality.Transfer, bool] | Wait],
) -> tuple[list[legality.Transfer], list[tuple[int, str]]]:
    """The transfers of ``items`` (each token set where it is issued) and the
    waits, as ``(transfers before it, fifo)``."""
    transfers: list[legality.Transfer] = []
    waits: list[tuple[int, str]] = []
    for item in items:
        if isinstance(item, Wait):
            waits.append((len(transfers), item.fifo))
        else:
            t, token = item
            transfers.append(dataclasses.replace(t, token=token))
    return transfers, waits


def _queued(
    outs: Sequence[legality.Transfer], ins: Sequence[legality.Transfer]
) -> list[tuple[legality.Transfer, bool] | Wait]:
    """The sequence: every output transfer, then the inputs in rounds of the queue.

    The last output transfer issues the token the final wait takes; an input
    round that fills its channel's queue ends with a token and a wait before
    the next (every output is queued already, so the input always drains).
    """
    items: list[tuple[legality.Transfer, bool] | Wait] = [
        (t, i == len(outs) - 1) for i, t in enumerate(outs)
    ]
    for start in range(0, len(ins), TASK_QUEUE):
        part = ins[start : start + TASK_QUEUE]
        more = start + TASK_QUEUE < len(ins)
        items += [(t, more and i == len(part) - 1) for i, t in enumerate(part)]
        if more:
            items.append(Wait(part[-1].fifo))
    if outs:
        items.append(Wait(outs[-1].fifo))
    return items


def emit_sequence(
    b: Builder,
    args: Sequence[tuple[str, int]],
    items: Sequence[tuple[legality.Transfer, bool] | Wait],
    dtype: str,
) -> None:
    """Emit ``aie.runtime_sequence @sequence`` of ``items`` over ``args`` (of ``dtype``).

    A transfer item is ``(transfer, issues_token)``; a :class:`Wait` waits
    for the token of its FIFO's channel [npu_xclbin].
    """
    transfers, points = _flatten(items)
    assert points or not any(t.token for t in transfers), "a token nobody waits on"
    runtime_sequence(
        b,
        args,
        transfers,
        [],
        1,
        dtypes={a: dtype for a, _ in args if not a.startswith("arena")},
        points=points,
    )


def _forward(
    b: Builder,
    op: Any,
    dev: Device,
    layout: legality.Layout,
    names: tuple[str, str],
    dtype: str,
    args: Sequence[tuple[str, int]],
    items: Sequence[tuple[legality.Transfer, bool] | Wait],
) -> Design:
    """The text of a forward: tiles, the two FIFOs, their link, the sequence."""
    fin, fout = layout.fifos
    b.comment(f"IRON design: {op!r} on {dev.name}; mlir-aie {MLIR_AIE_RELEASE}")
    with b.region("module"), b.device(dev.name, "main"):
        shims = sorted({fin.producer, *fout.consumers})
        ssa = {t: b.tile(t.col, t.row, "shim_noc_tile") for t in shims}
        ssa[fin.consumers[0]] = b.tile(fin.consumers[0].col, _MEM_ROW, "mem_tile")
        elem = memref(fin.elements, dtype)
        for f in (fin, fout):
            cons = [ssa[c] for c in f.consumers]
            b.objectfifo(f.name, ssa[f.producer], cons, f.depth, elem)
        b.line(f"aie.objectfifo.link [@{names[0]}] -> [@{names[1]}]([] [])")
        emit_sequence(b, args, items, dtype)
    return assemble(b, op, dev, args, (), layout)


def build_copy(
    op: Copy,
    dev: Device,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
    out_access: Access | None = None,
) -> Design:
    """The design of ``Copy`` ``op`` on ``dev`` (see :mod:`.movers`).

    ``out_access`` is how an ``out=`` view is written (``Access.of`` the
    step's output handle); None writes a contiguous run.

    Raises:
        NotImplementedError: A per-call repeat or length, elements wider than
            4 bytes, or a write of more descriptors than a channel queues.
        HostBufferLimitError: More host buffers than an XRT run binds.
        iron.core.operator.RefusedShapeError: A walk is not shim descriptors.
        iron.runtime.npu.legality.LegalityError: A device limit is broken.
        ValueError: A placement is too small, misplaced, or names no port.
    """
    # resolved() returns a copy of op's own class (typed as any Operator).
    op = cast(Copy, op.resolved(dev))
    op.check(dev)
    s = op.itemsize
    dtype = _itemsize(op, s)
    n = prod(op.shape)
    dense = Access("dense", ((0, (n,), (1,)),))
    view = op.access or dense
    out = out_access or dense
    if out_access is not None:
        # The write obeys the read's rules: check it as a Copy of that view.
        Copy(shape=op.shape, itemsize=s, access=out_access).check(dev)
        moved = sum(prod(sz) for _, sz, _ in out_access.walks)
        if moved != n:
            raise ValueError(
                f"{op!r}: out_access {out_access!r} walks {moved} elements; the "
                f"copy has {n}"
            )
    _refuse_sized(op, "view", view)
    _refuse_sized(op, "out", out)
    # A port the image builder placed in an arena window ("arena@<i>": the
    # arena shifted per run by the per-call part of its start) is walked at
    # its static offsets there, like any port in the arena.
    shifted = {
        port: access
        for port, access in (("view", view), ("out", out))
        if placement and port in placement and "@" in placement[port].where
    }
    if "view" in shifted:
        view = dataclasses.replace(view, per_call=())
    if "out" in shifted:
        out = dataclasses.replace(out, per_call=())
    ports = {"view": _port("view", view), "out": _port("out", out)}
    args, where = _args(op, ports, placement, arena_bytes, s)

    shim_in = legality.Tile(0, 0)
    mem = legality.Tile(0, _MEM_ROW)
    ins = _transfers(dev, "view_0", shim_in, ports["view"], where, s, 0)
    outs = _transfers(dev, "out_0", shim_in, ports["out"], where, s, 0)
    if len(outs) > TASK_QUEUE:
        raise NotImplementedError(
            f"{op!r}: the write is {len(outs)} shim descriptors, more than the "
            f"{TASK_QUEUE} a channel queues before the read has run; copy into "
            f"a contiguous buffer and copy that in parts"
        )
    # Outputs take the first BDs; with the view's they may fill the shim's
    # buffer descriptors, and then the output drains through column 1's shim.
    shared = len(ins) + len(outs) <= dev.shim_bds or dev.columns == 1
    shim_out = shim_in if shared else legality.Tile(1, 0)
    outs = [dataclasses.replace(t, shim=shim_out, bd_id=i) for i, t in enumerate(outs)]
    first = len(outs) if shared else 0
    ins = [dataclasses.replace(t, bd_id=first + i) for i, t in enumerate(ins)]
    e = _chunk([prod(t.sizes) for t in ins + outs], s)
    ins = [_in_bf16(op, t) for t in ins]
    outs = [_in_bf16(op, t) for t in outs]
    fifos = (
        legality.Fifo("view_0", shim_in, (mem,), _DEPTH, e, s),
        legality.Fifo("out_0", mem, (shim_out,), _DEPTH, e, s),
    )
    items = _queued(outs, ins)
    layout = sequenced(legality.Layout(repr(op), (), fifos, tuple(outs + ins)), items)
    legality.check(layout, dev)
    return _forward(Builder(), op, dev, layout, ("view_0", "out_0"), dtype, args, items)
