"""The runtime sequence every family's design shares: its arguments, its
per-call words, the sequence itself and the finished :class:`Design`.

A family module decides its tiles, object FIFOs, cores and shim transfers;
this module turns the operator's ports and their placements into the runtime
sequence's arguments, emits the sequence that moves the transfers and waits
for the outputs, and wraps the result as a :class:`Design`.

Per-call scalars (``Softmax.length``, ``DecodeAttention.length``,
``CausalAttention.start``, ``Sample.seed``): an operator parameter holding a
per-call expression is read on the device from the run's scratchpad. The
scratchpad is the runtime sequence's ``words`` argument (``i32``, one word a
slot, as :class:`iron.runtime.image.ImageSpec` lays it out); each column that
needs a word has an object FIFO ``words_<c>`` of depth 1 holding the whole
scratchpad, which the sequence fills once per call from ``words`` and the
core acquires at the start of a call, reads with ``memref.load`` at the
expression's slot and releases at the end (:func:`words_fifo`,
:func:`words_transfer`, :func:`load_words`). The slot of an expression comes
from :class:`Words` (``ImageSpec.slot_of_key``); a standalone operator's
per-call parameters take slots ``0, 1, ...`` in declaration order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from iron.core.device import Device
from iron.core.percall import Affine, PerCall
from iron.runtime.image import Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design, Words
from iron.runtime.npu.legality import Layout
from iron.runtime.npu.mlir import Builder, memref

__all__ = [
    "ARG_DTYPES",
    "ItemSizeError",
    "WORDS",
    "arg_memref",
    "assemble",
    "check_items",
    "column_fifos",
    "in_arena",
    "load_words",
    "per_call_params",
    "runtime_sequence",
    "sequence_args",
    "word_slots",
    "words_fifo",
    "words_transfer",
]

_ITEM = 2  # bf16: the sequence's arguments are bf16 memrefs unless typed
_WORD = 4  # a scratchpad word is an int32

#: The runtime-sequence argument holding the run's scratchpad.
WORDS = "words"


def per_call_params(op: Any, names: Sequence[str]) -> tuple[str, ...]:
    """Which of ``op``'s parameters ``names`` hold a per-call expression."""
    return tuple(n for n in names if isinstance(getattr(op, n), PerCall | Affine))


def word_slots(
    op: Any, names: Sequence[str], words: Words | None
) -> tuple[dict[str, int], int]:
    """Each per-call parameter's scratchpad slot, and the scratchpad's words.

    Without ``words`` (a standalone operator) the per-call parameters among
    ``names`` take slots ``0, 1, ...`` in that order.

    Raises:
        ValueError: An expression has no slot in ``words``.
    """
    found = per_call_params(op, names)
    if words is None:
        return {n: i for i, n in enumerate(found)}, len(found)
    slots = {}
    for n in found:
        expr = getattr(op, n)
        key = (expr if isinstance(expr, Affine) else expr.affine()).key()
        if key not in words.slots:
            raise ValueError(
                f"{op!r}: per-call {n}={expr} has no scratchpad slot (the image's "
                f"words hold {len(words.slots)} expressions); plan the graph "
                f"that records this step"
            )
        slots[n] = words.slots[key]
    return slots, words.count


def words_fifo(
    col: int, shim: legality.Tile, core: legality.Tile, count: int
) -> legality.Fifo:
    """The ``words_<col>`` FIFO: the whole scratchpad (``count`` i32), depth 1."""
    return legality.Fifo(f"words_{col}", shim, (core,), 1, count, _WORD)


def words_transfer(
    col: int, shim: legality.Tile, count: int, bd_id: int
) -> legality.Transfer:
    """The shim transfer filling ``words_<col>`` from the ``words`` argument."""
    return legality.Transfer(
        f"words_{col}",
        shim,
        WORDS,
        0,
        (1, 1, 1, count),
        (0, 0, 0, 1),
        _WORD,
        bd_id,
    )


def load_words(
    b: Builder, col: int, count: int, slots: Mapping[str, int]
) -> dict[str, str]:
    """In a core: acquire ``words_<col>`` and load each slot; ``{param: %i32}``.

    The caller releases ``words_<col>`` (``Consume``) when the call is done.
    """
    t = memref(count, "i32")
    buf = b.acquire(f"words_{col}", "Consume", t, "words")
    return {
        n: b.load(buf, b.constant(slot, "index"), t, n) for n, slot in slots.items()
    }


def column_fifos(
    b: Builder,
    fifos: Sequence[legality.Fifo],
    shims: Sequence[str],
    cores: Sequence[str],
    elem: Mapping[str, str],
) -> None:
    """Declare FIFOs between each column's shim and core (``<port>_<column>``).

    ``shims`` and ``cores`` are the tiles' SSA names by column; ``elem`` the
    element type of each port.
    """
    for f in fifos:
        c = f.producer.col
        port = f.name.rsplit("_", 1)[0]
        if f.producer.kind == "shim":
            prod, cons = shims[c], cores[c]
        else:
            prod, cons = cores[c], shims[c]
        b.objectfifo(f.name, prod, [cons], f.depth, elem[port])


def in_arena(where: str) -> bool:
    """Whether a placement is the arena or a static stretch of it (``arena#<k>``).

    Both are bf16 arguments addressed in bf16 elements; a window
    (``arena@<i>``) is not one of them.
    """
    return where == "arena" or (where.startswith("arena#") and "@" not in where)


def _shared(where: str) -> bool:
    """Whether a placement names an argument ports share (not a port's own).

    The arena, a stretch of it (``arena#<k>``), a window (``...@<i>``) or a
    graph's input or output (``input:<name>``).
    """
    return where == "arena" or any(c in where for c in "#@:")


def sequence_args(
    op: Any,
    need: Mapping[str, int],
    placement: Mapping[str, Placement] | None,
    arena_bytes: int | None,
    *,
    unit: int = 1,
    words: int = 0,
) -> tuple[list[tuple[str, int]], dict[str, tuple[str, int]]]:
    """Runtime-sequence arguments ``(name, bytes)`` and each port's ``(arg, offset)``.

    ``need`` gives each port's bytes, in argument order. Ports placed in the
    arena share one ``arena`` argument at their planned offsets (in units of
    ``unit`` bytes, which an arena offset must then be a multiple of); every
    other port is an argument of its own at offset 0. A port placed in
    ``arena@<word>`` (a view whose start moves per call) is read at its
    static offset in that argument, the arena shifted by the word's byte
    offset, which the driver binds per run; ports sharing the shift share the
    argument. A design reading
    ``words`` scratchpad words takes them as a last ``words`` argument.

    Raises:
        ValueError: A placement names no port, is smaller than its port, or
            is not on a ``unit`` boundary.
    """
    ports = list(need)
    placement = dict(placement or {})
    unknown = sorted(set(placement) - set(ports))
    if unknown:
        raise ValueError(
            f"{op!r}: placement names {unknown}, not ports of "
            f"{type(op).__name__} ({', '.join(ports)})"
        )
    for port, p in placement.items():
        if p.nbytes < need[port]:
            raise ValueError(
                f"{op!r}: port {port} is placed in {p.nbytes} bytes "
                f"({p.where} at {p.offset}); it needs {need[port]}"
            )
        if unit > 1 and _shared(p.where) and p.offset % unit:
            raise ValueError(
                f"{op!r}: port {port} is placed at byte {p.offset}, not on a bf16 "
                f"boundary"
            )
    # The arena (or a stretch of it, "arena#<k>": an argument below 2^31
    # bytes), the arena shifted by a per-call byte offset ("arena@<i>": a
    # window the driver binds per run) and a graph's named input or output
    # buffer ("input:<name>", "output:<name>") are arguments ports share.
    shared: dict[str, list[str]] = {}
    for p in ports:
        if p in placement and _shared(placement[p].where):
            shared.setdefault(placement[p].where, []).append(p)
    args: list[tuple[str, int]] = []
    where: dict[str, tuple[str, int]] = {}
    for arg, members in shared.items():
        end = max(placement[p].offset + need[p] for p in members)
        if arg.startswith("arena"):
            end = max(arena_bytes or 0, end)
        else:  # a graph's input or output: all of it (every step, one type)
            end = max(
                [end] + [placement[p].offset + placement[p].nbytes for p in members]
            )
        args.append((arg, -(-end // 4) * 4))
        for p in members:
            where[p] = (arg, placement[p].offset // unit)
    for p in ports:
        if p not in where:
            args.append((p, need[p]))
            where[p] = (p, 0)
    if words:
        args.append((WORDS, words * _WORD))
    return args, where


#: Element types of the arguments that are not bf16 by default: the run's
#: scratchpad, and an Emit's program and the scratchpad it feeds.
ARG_DTYPES = {WORDS: "i32", "program": "i32", "feedback": "i32"}
_DTYPE_BYTES = {"bf16": _ITEM, "i32": _WORD, "f32": _WORD, "i8": 1}


def arg_memref(arg: str, nbytes: int, dtypes: Mapping[str, str] | None = None) -> str:
    """The memref type of runtime-sequence argument ``arg`` of ``nbytes``.

    bf16 unless ``dtypes`` or ``ARG_DTYPES`` names its element type.
    """
    dt = (dtypes or {}).get(arg) or ARG_DTYPES.get(arg, "bf16")
    return memref(nbytes // _DTYPE_BYTES[dt], dt)


class ItemSizeError(TypeError):
    """A transfer was planned in items of another size than its argument's type."""


def check_items(transfers: Sequence[Any], types: Mapping[str, str]) -> None:
    """Every transfer's item is its argument's element, as the memref types say.

    The emitted ``dma_memcpy_nd`` counts sizes, strides and offset in the
    elements of its argument's memref type, which upstream's verifier
    multiplies by the element's width (the 4-byte rule of mlir-aie's
    lib/Dialect/AIEX/IR/AIEXDialect.cpp, ``verifyStridesWraps``,
    https://github.com/Xilinx/mlir-aie); a layout planned in other items
    would be checked in one size and moved in another.

    Raises:
        ItemSizeError: A transfer's item size differs from its argument's.
    """
    for t in transfers:
        dt = types[t.buffer].rsplit("x", 1)[1].rstrip(">")
        if _DTYPE_BYTES[dt] != t.itemsize:
            raise ItemSizeError(
                f"transfer on FIFO {t.fifo} moves {t.itemsize}-byte items of "
                f"argument {t.buffer}, typed {types[t.buffer]} "
                f"({_DTYPE_BYTES[dt]}-byte elements); key the design's dtypes by "
                f"argument name or plan the transfer in the argument's elements"
            )


def runtime_sequence(
    b: Builder,
    args: Sequence[tuple[str, int]],
    transfers: Sequence[Any],
    outs: Sequence[str],
    columns: int,
    dtypes: Mapping[str, str] | None = None,
    waits: Sequence[str] | None = None,
    points: Sequence[tuple[int, str]] = (),
) -> None:
    """Emit the sequence: every transfer in order, then a wait on each output FIFO.

    Output transfers (FIFOs named ``<port>_<column>`` for a port in ``outs``)
    issue a completion token; the sequence waits on each column's. An
    argument's type is ``arg_memref``'s. ``waits`` names the FIFOs to wait on
    instead (their transfers issue the tokens).

    ``points`` (a layout's ``waits``, ``(position, fifo)``), when given,
    replace both: a transfer issues a token when its ``token`` is set, and
    the sequence waits on ``fifo`` after the first ``position`` transfers,
    nothing more (buffer descriptors reused after a wait; see
    :func:`iron.runtime.npu.legality.check`).
    """
    types = {a: arg_memref(a, n, dtypes) for a, n in args}
    check_items(transfers, types)
    hints = [(a if a == "arena" else f"{a}_buf", types[a]) for a, _ in args]
    # Where each transfer issues a token, and the waits after the first k
    # transfers (k = len(transfers): at the end).
    if points:
        token = [bool(t.token) for t in transfers]
        waits_at: dict[int, list[str]] = {}
        for position, fifo in points:
            waits_at.setdefault(position, []).append(fifo)
    elif waits:
        token = [t.fifo in waits for t in transfers]
        waits_at = {len(transfers): list(waits)}
    else:
        token = [t.fifo.rsplit("_", 1)[0] in outs for t in transfers]
        waits_at = {len(transfers): [f"{p}_{c}" for c in range(columns) for p in outs]}
    with b.runtime_sequence(hints, "sequence") as names:
        ssa = dict(zip([a for a, _ in args], names))
        for j, t in enumerate([*transfers, None]):
            for fifo in waits_at.get(j, ()):
                b.dma_wait(fifo)
            if t is not None:
                b.dma_memcpy_nd(
                    ssa[t.buffer],
                    types[t.buffer],
                    (0, 0, 0, t.offset),
                    t.sizes,
                    t.strides,
                    metadata=t.fifo,
                    bd_id=t.bd_id,
                    issue_token=token[j],
                )


def assemble(
    b: Builder,
    op: Any,
    dev: Device,
    args: Sequence[tuple[str, int]],
    kernels: tuple[str, ...],
    layout: Layout,
) -> Design:
    """The finished :class:`Design` of ``op`` from its builder's text."""
    return Design(
        operator=repr(op),
        device=dev.name,
        text=b.text(),
        args=tuple(a for a, _ in args),
        arg_bytes=tuple(n for _, n in args),
        kernels=kernels,
        layout=layout,
    )
