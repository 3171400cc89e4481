"""Python-side legality of an NPU design, checked before any tool runs.

A design is described here as a :class:`Layout`: the tiles it uses, its
object FIFOs (producer, consumers, depth, element count) and the shim
transfers its runtime sequence makes. :func:`check` refuses, with a
:class:`LegalityError` naming the operator, the tile and the limit, a layout
that breaks any of:

* each compute tile's buffers (every FIFO element it holds, times depth) plus
  its stack fit its data memory; each memory tile's fit its 512 KiB. A
  layout with cores states their stack (``Layout.stack_bytes``, from
  :func:`core_stack`: the kernels' contracts), the very figure its design
  sets as ``stack_size`` on every ``aie.core``; the toolchain's default is
  never assumed;
* DMA channels per tile and direction (compute 2 + 2, memory 6 + 6, shim
  2 + 2), buffer descriptors (a FIFO end holds one per element) and locks
  (two per FIFO end) within the tile's counts, FIFO depths within a lock's
  largest value;
* every shim transfer within the buffer-descriptor limits
  (:func:`iron.core.dma.shim_transfer_problems`), its byte offset into its
  argument below :data:`iron.core.dma.ARG_OFFSET_LIMIT` (2^31);
* the runtime sequence's buffer-descriptor ids: without waits
  (``Layout.waits`` empty: every transfer issued, then the outputs awaited)
  each id once per shim; with waits, an id may be used again once a wait has
  retired its earlier use (:func:`check`'s sequence rules), and each FIFO's
  outstanding transfers stay within the channel's task queue;
* each object FIFO's combination of features (links, joins and distributes,
  ``dimensionsToStream`` / ``dimensionsFromStream``, ``repeat_count``,
  element types that differ) is one the pinned mlir-aie release's own tests
  use on one FIFO (:func:`check_fifo_features`, :data:`TESTED_FIFO_FEATURES`).

The shim's limits and address generation (:func:`iron.core.dma.encode` then
:func:`iron.core.dma.shim_elements`: 4-D counters with wraps and steps in
32-bit words, the iteration outermost) live in :mod:`iron.core.dma`, so tests
can check that a transfer that passes moves exactly the elements its access
pattern names; this module imports them under the same names.

Sources: mlir-aie's ``include/aie/Dialect/AIE/IR/AIETargetModel.h``
(memories, locks, channels, BDs, field widths) and
``lib/Dialect/AIEX/IR/AIEXDialect.cpp`` (the ``dma_memcpy_nd`` verifier) of
the pinned era (https://github.com/Xilinx/mlir-aie); the Device fields of
iron-core carry the same numbers with the same citations.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable

from iron.core.device import Device

# The shim's limits and address generation live in iron.core.dma, their one
# home; legality's callers (designs, their tests) reach them here too.
from iron.core.dma import ARG_OFFSET_LIMIT as ARG_OFFSET_LIMIT
from iron.core.dma import ShimDescriptor as ShimDescriptor
from iron.core.dma import encode as encode
from iron.core.dma import shim_elements as shim_elements
from iron.core.dma import shim_transfer_problems as shim_transfer_problems
from iron.runtime.npu import kernels as npu_kernels

__all__ = [
    "FIFO_FEATURES",
    "TESTED_FIFO_FEATURES",
    "CORE_BODY_STACK_BYTES",
    "STACK_ALIGN",
    "TILE_LIMITS",
    "Fifo",
    "LegalityError",
    "Layout",
    "Tile",
    "TileLimits",
    "Transfer",
    "check",
    "check_fifo_features",
    "check_shim_transfer",
    "emitted_fifo_features",
    "core_stack",
]


class LegalityError(ValueError):
    """A design breaks a device limit; the message names operator, tile and limit."""


@dataclasses.dataclass(frozen=True)
class TileLimits:
    """Per-tile counts iron-core's Device does not carry (yet).

    From mlir-aie ``AIETargetModel.h`` (AIE2 and AIE2P alike):
    ``getNum*SwitchboxConnections`` for the DMA bundle and
    ``getNum*ShimMuxConnections`` (channels), ``getNumLocks`` (16 per compute or
    shim tile, 64 per memory tile, largest value 63), and the default core
    stack of 0x400 bytes (``getDefaultCoreStackSize``), which IRON never
    leaves implicit: it is the least :func:`core_stack` states.
    ``task_queue`` is a DMA channel's task-queue depth (4 tasks per channel
    on AIE2 and AIE2P: ``dma_task_queue_depth`` in AMD IRON's ``dma.py``,
    https://github.com/amd/IRON); a sequence with waits holds each FIFO to it
    between the waits that retire its transfers, one without waits holds its
    every transfer of a FIFO to it (see :func:`check`).
    """

    channels: dict[str, tuple[int, int]]  # kind -> (MM2S, S2MM)
    locks: dict[str, int]
    lock_max: int = 63
    stack_bytes: int = 0x400
    task_queue: int = 4


_AIE2 = TileLimits(
    channels={"core": (2, 2), "mem": (6, 6), "shim": (2, 2)},
    locks={"core": 16, "mem": 64, "shim": 16},
)
#: Tile limits by architecture (``Device.arch``).
TILE_LIMITS: dict[str, TileLimits] = {"aie2": _AIE2, "aie2p": _AIE2}


@dataclasses.dataclass(frozen=True, order=True)
class Tile:
    """An array tile: row 0 the shim, row 1 the memory tile, rows 2.. cores."""

    col: int
    row: int

    @property
    def kind(self) -> str:
        """``shim``, ``mem`` or ``core``."""
        return "shim" if self.row == 0 else "mem" if self.row == 1 else "core"

    def __str__(self) -> str:
        name = {"shim": "shim tile", "mem": "memory tile", "core": "compute tile"}
        return f"{name[self.kind]} ({self.col}, {self.row})"


@dataclasses.dataclass(frozen=True)
class Fifo:
    """An object FIFO: ``depth`` elements of ``elements`` items of ``itemsize`` bytes.

    ``features`` names the object-FIFO features the design gives it (see
    :data:`FIFO_FEATURES`); empty, it is a plain FIFO.
    """

    name: str
    producer: Tile
    consumers: tuple[Tile, ...]
    depth: int
    elements: int
    itemsize: int = 2
    features: frozenset[str] = frozenset()

    @property
    def element_bytes(self) -> int:
        """Bytes of one FIFO element (one buffer)."""
        return self.elements * self.itemsize


@dataclasses.dataclass(frozen=True)
class Transfer:
    """One shim DMA transfer of the runtime sequence, in elements of the buffer.

    ``sizes`` and ``strides`` are four-dimensional, outermost (the iteration)
    first; ``repeat`` is the task's extra repetitions of the whole pattern.
    ``token``: the transfer issues a task-completion token, which a wait in
    ``Layout.waits`` consumes (read only for a layout with waits; without
    them the sequence emitter decides which transfers issue tokens).
    """

    fifo: str
    shim: Tile
    buffer: str
    offset: int
    # Four each; typed open-ended, as the walks that build them are.
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    itemsize: int = 2
    bd_id: int = 0
    repeat: int = 0
    token: bool = False


@dataclasses.dataclass(frozen=True)
class Layout:
    """What a design places: its cores, object FIFOs and shim transfers.

    ``buffers`` are core-local buffers besides the FIFOs' (an fp32 scratch
    row, say), as ``(tile, bytes)`` pairs; they count against the tile's
    data memory.

    ``stack_bytes`` is each core's stack (:func:`core_stack`), the
    ``stack_size`` its design sets on every ``aie.core``; a layout with cores
    must state it (:func:`check` refuses None rather than assume the
    toolchain's default).

    ``waits`` are the runtime sequence's ``dma_wait`` points as ``(position,
    fifo)``: after the first ``position`` transfers, wait for the oldest
    token of ``fifo`` not yet awaited. Empty (the default), the sequence
    issues every transfer and then waits on its outputs, and each buffer
    descriptor id is used once per shim; given, the waits are the whole
    story (none is added at the end) and ids may be reused (:func:`check`).
    """

    operator: str
    cores: tuple[Tile, ...]
    fifos: tuple[Fifo, ...]
    transfers: tuple[Transfer, ...]
    stack_bytes: int | None = None
    buffers: tuple[tuple[Tile, int], ...] = ()
    waits: tuple[tuple[int, str], ...] = ()


#: Stack bytes a core needs besides its kernels' frames, reserved in every
#: core's ``stack_size``: the frame of the core function aiecc generates from
#: the design's ``aie.core`` body (its callee-saved registers: lr, r16-r23, p6
#: and p7 on AIE2, 44 bytes, ``CSR_AIE2`` in Xilinx/llvm-aie
#: ``llvm/lib/Target/AIE/aie2/AIE2CallingConv.td``; outgoing arguments past the
#: six pointer and eight integer registers, 4 bytes each: attention's chunk
#: call passes two) and of the C runtime's start-up code that calls it
#: (``_main_init`` in crt1.o). An estimate, rounded up with room to spare:
#: aiecc compiles that code, so no build here measures it.
CORE_BODY_STACK_BYTES = 128

#: The AIE stack's alignment in bytes (Xilinx/llvm-aie
#: ``llvm/lib/Target/AIE/AIEBaseFrameLowering.h``: ``StackAlignment`` 32):
#: frames are whole multiples of it, so a core's stack is too.
STACK_ALIGN = 32


def core_stack(dev: Device, kernels: Iterable[str]) -> int:
    """The stack bytes a core of ``dev`` linking ``kernels`` reserves.

    The largest stack a kernel's contract declares
    (:attr:`iron.runtime.npu.kernels.KernelContract.stack_bytes`, held to
    Peano's measured frames at every build) plus
    :data:`CORE_BODY_STACK_BYTES`, rounded up to :data:`STACK_ALIGN`, and
    never below the toolchain's default (``TileLimits.stack_bytes``, the
    0x400 upstream's own aie_api kernels run with: the core body's share is
    an estimate). Designs put it on every ``aie.core`` as ``stack_size`` and
    in their layout as ``stack_bytes``, so legality counts what the core
    reserves.

    Raises:
        ValueError: ``kernels`` is empty (a core runs at least one kernel).
        KeyError: A kernel does not ship.
    """
    symbols = tuple(kernels)
    if not symbols:
        raise ValueError(
            "core_stack needs the kernels the core links; a core that calls none "
            "has nothing to size its stack from"
        )
    need = max(npu_kernels.contract(s).stack_bytes for s in symbols)
    need += CORE_BODY_STACK_BYTES
    need = -(-need // STACK_ALIGN) * STACK_ALIGN
    return max(need, TILE_LIMITS[dev.arch].stack_bytes)


def check_shim_transfer(op: str, dev: Device, t: Transfer) -> None:
    """Raise :class:`LegalityError` if transfer ``t`` breaks a shim limit.

    Raises:
        LegalityError: Naming ``op``, the shim tile, the FIFO and every limit.
    """
    problems = shim_transfer_problems(
        dev, t.sizes, t.strides, t.offset, t.itemsize, t.repeat
    )
    if problems:
        raise LegalityError(
            f"{op} on {dev}: the transfer of {t.buffer} for @{t.fifo} on {t.shim} "
            f"(offset {t.offset}, sizes {list(t.sizes)}, strides {list(t.strides)}) "
            f"breaks the shim descriptor limits: " + "; ".join(problems)
        )


# -- object-FIFO features ---------------------------------------------------------

#: The object-FIFO features :func:`check_fifo_features` counts, by name:
#:
#: * ``link_in`` / ``link_out``: the input / the output of a one-to-one
#:   ``aie.objectfifo.link``;
#: * ``join_in`` / ``join_out``: an input / the output of a join (several
#:   inputs at offsets of the output's element);
#: * ``distribute_in`` / ``distribute_out``: the input / an output of a
#:   distribute (several outputs at offsets of the input's element);
#: * ``resize``: in a one-to-one link whose two FIFOs' elements differ in
#:   size (the memory tile holds the larger element; the smaller side moves
#:   it in pieces of its own size);
#: * ``asymmetric``: a consumer element type of its own
#:   (``: !aie.objectfifo<A> -> !aie.objectfifo<B>``);
#: * ``dims_to_stream``: the producer's ``dimensionsToStream``;
#: * ``dims_from_stream``: a consumer's ``dimensionsFromStream``;
#: * ``repeat``: ``{repeat_count = N}`` with N above 1.
#:
#: How many consumers a FIFO has (a broadcast) is not among them.
FIFO_FEATURES: tuple[str, ...] = (
    "link_in",
    "link_out",
    "join_in",
    "join_out",
    "distribute_in",
    "distribute_out",
    "resize",
    "asymmetric",
    "dims_to_stream",
    "dims_from_stream",
    "repeat",
)

_A = "Xilinx/mlir-aie v1.4.1 "  # https://github.com/Xilinx/mlir-aie/tree/v1.4.1
_OFT = _A + "test/objectFifo-stateful-transform/"
_WHOLE = (
    _A + "programming_examples/basic/matrix_multiplication/whole_array/whole_array.py"
)
_ATB = (
    _A + "programming_examples/ml/block_datatypes/gemm_asymmetric_tile_buffering/"
    "config1/n32_core.py"
)

#: Each combination of :data:`FIFO_FEATURES` that a test of the pinned
#: mlir-aie release (tag v1.4.1, commit 601fc859532f) gives one object FIFO,
#: with that test: *hardware* where a lit test builds it with aiecc and runs
#: it on an NPU, *lowering* where only ``aie-opt
#: --aie-objectFifo-stateful-transform`` (with ``dynamic-objFifos=false``)
#: checks it. A plain FIFO (no feature) is not listed. The survey behind it is
#: in :mod:`iron.runtime.npu.designs.attention`'s docstring.
TESTED_FIFO_FEATURES: dict[frozenset[str], str] = {
    frozenset({"link_in"}): "hardware: " + _A + "test/npu-xrt/cascade_flows/aie.mlir",
    frozenset({"link_out"}): "hardware: " + _A + "test/npu-xrt/cascade_flows/aie.mlir",
    frozenset({"link_in", "resize"}): (
        "hardware: " + _A + "test/npu-xrt/add_one_objFifo/aie.mlir (16xi32 -> 8xi32)"
    ),
    frozenset({"link_out", "resize"}): (
        "hardware: " + _A + "test/npu-xrt/add_one_objFifo/aie.mlir (16xi32 -> 8xi32)"
    ),
    frozenset({"link_in", "resize", "dims_from_stream"}): (
        "hardware: " + _ATB + " (A_L3L2)"
    ),
    frozenset({"link_out", "resize", "dims_to_stream", "dims_from_stream"}): (
        "hardware: " + _ATB + " (A_L2L1)"
    ),
    frozenset({"link_in", "resize", "repeat"}): (
        "lowering: " + _OFT + "repeat_count/link_repeat_count_test.mlir (@of2)"
    ),
    frozenset({"link_out", "resize", "repeat"}): (
        "lowering: " + _OFT + "repeat_count/link_repeat_count_test.mlir (@of1)"
    ),
    frozenset({"link_out", "repeat"}): (
        "hardware: " + _A + "test/npu-xrt/objectfifo_repeat/simple_repeat/aie2.py"
    ),
    frozenset({"link_out", "dims_to_stream"}): "hardware: " + _WHOLE + " (B_L2L1)",
    frozenset({"join_in"}): "hardware: " + _A + "test/npu-xrt/two_col/aie.mlir",
    frozenset({"join_out"}): "hardware: " + _A + "test/npu-xrt/two_col/aie.mlir",
    frozenset({"distribute_in"}): "hardware: " + _A + "test/npu-xrt/two_col/aie.mlir",
    frozenset({"distribute_out"}): "hardware: " + _A + "test/npu-xrt/two_col/aie.mlir",
    frozenset({"distribute_out", "dims_to_stream"}): (
        "hardware: " + _WHOLE + " (A_L2L1, one or two columns)"
    ),
    frozenset({"join_out", "dims_to_stream"}): "hardware: " + _WHOLE + " (C_L2L3)",
    frozenset({"distribute_out", "repeat"}): (
        "hardware: " + _A + "test/npu-xrt/bd_chain_repeat_on_memtile/aie2.py"
    ),
    frozenset({"join_in", "repeat"}): (
        "lowering: " + _OFT + "repeat_count/link_join_repeat_count_test.mlir"
    ),
    frozenset({"join_in", "dims_from_stream"}): (
        "lowering: " + _OFT + "dma_transformations/nd_dma_fromStream_join.mlir"
    ),
    frozenset({"repeat"}): (
        "hardware: " + _A + "test/npu-xrt/objectfifo_repeat/compute_repeat/aie2.py"
    ),
    frozenset({"dims_to_stream"}): (
        "lowering: " + _OFT + "dma_transformations/nd_dma_multiple_consumers_AIE2.mlir"
    ),
    frozenset({"dims_from_stream"}): (
        "lowering: " + _OFT + "dma_transformations/nd_dma_multiple_consumers_AIE2.mlir"
    ),
    frozenset({"dims_to_stream", "dims_from_stream"}): (
        "lowering: " + _OFT + "dma_transformations/nd_dma_base_AIE2.mlir"
    ),
    frozenset({"asymmetric"}): (
        "lowering: " + _OFT + "asymmetric_element_type/asymmetric_element_type.mlir"
    ),
}


def check_fifo_features(layout: Layout, dev: Device) -> None:
    """Each FIFO's features, together, are a combination the release tests.

    A FIFO with no features passes. Otherwise its ``features`` must be
    names in :data:`FIFO_FEATURES` and, as a set, a key of
    :data:`TESTED_FIFO_FEATURES`: aiecc's object-FIFO lowering of any other
    combination is untested upstream, so a design would be the first to try
    it on a device.

    Raises:
        LegalityError: Naming the operator, the FIFO's producer tile, the
            FIFO, its features and the tested combinations nearest to it.
    """
    for f in layout.fifos:
        if not f.features:
            continue
        unknown = sorted(f.features - set(FIFO_FEATURES))
        if unknown:
            raise _fail(
                layout,
                dev,
                f.producer,
                f"object FIFO @{f.name} names features {unknown}, which are not "
                f"object-FIFO features this check knows ({', '.join(FIFO_FEATURES)})",
            )
        if f.features in TESTED_FIFO_FEATURES:
            continue
        near = sorted(
            (k for k in TESTED_FIFO_FEATURES if k < f.features),
            key=lambda k: (-len(k), sorted(k)),
        )
        nearest = (
            "; the largest tested combinations within it: "
            + ", ".join("{" + ", ".join(sorted(k)) + "}" for k in near[:3])
            if near
            else ""
        )
        raise _fail(
            layout,
            dev,
            f.producer,
            f"object FIFO @{f.name} combines {{{', '.join(sorted(f.features))}}}, "
            f"which no test of mlir-aie v1.4.1 gives one FIFO{nearest}; move a "
            f"feature onto another FIFO of its link, or into the runtime "
            f"sequence's walk, so each FIFO keeps to a tested combination "
            f"(legality.TESTED_FIFO_FEATURES)",
        )


_OBJECTFIFO = re.compile(
    r"aie\.objectfifo @(?P<name>[\w$.]+)\((?P<ends>.*)\)(?P<attrs> \{[^{}]*\})?"
    r" : (?P<type>!aie\.objectfifo<[^>]*>>)(?P<cons> -> !aie\.objectfifo<[^>]*>>)?$"
)
_LINK = re.compile(r"aie\.objectfifo\.link \[(?P<ins>[^\]]*)\] -> \[(?P<outs>[^\]]*)\]")
_REPEAT = re.compile(r"repeat_count = (\d+)")
_ELEMENTS = re.compile(r"memref<(?P<shape>[\dx]+)x[a-z]\w*>")


def _elements(type_: str) -> int:
    shape = _ELEMENTS.search(type_)
    assert shape is not None, type_
    return math.prod(int(d) for d in shape["shape"].split("x"))


def emitted_fifo_features(text: str) -> dict[str, frozenset[str]]:
    """The :data:`FIFO_FEATURES` of each object FIFO in a design's MLIR text.

    Reads the one-line ``aie.objectfifo`` and ``aie.objectfifo.link`` forms
    IRON emits (:mod:`iron.runtime.npu.mlir`), so a test can hold what a
    design declares in its :class:`Layout` to what it emits.
    """
    found: dict[str, set[str]] = {}
    elements: dict[str, int] = {}
    links: list[tuple[list[str], list[str]]] = []
    for line in text.splitlines():
        line = line.strip()
        fifo = _OBJECTFIFO.match(line)
        if fifo:
            name, ends = fifo["name"], fifo["ends"]
            feats = found.setdefault(name, set())
            elements[name] = _elements(fifo["type"])
            if "dimensionsToStream" in ends:
                feats.add("dims_to_stream")
            if "dimensionsFromStream" in ends:
                feats.add("dims_from_stream")
            repeat = _REPEAT.search(fifo["attrs"] or "")
            if repeat and int(repeat[1]) > 1:
                feats.add("repeat")
            if fifo["cons"]:
                feats.add("asymmetric")
            continue
        link = _LINK.match(line)
        if link:
            ins = [n.strip().lstrip("@") for n in link["ins"].split(",")]
            outs = [n.strip().lstrip("@") for n in link["outs"].split(",")]
            links.append((ins, outs))
    for ins, outs in links:
        kind = "join" if len(ins) > 1 else "distribute" if len(outs) > 1 else "link"
        for n in ins:
            found[n].add(f"{kind}_in")
        for n in outs:
            found[n].add(f"{kind}_out")
        if kind == "link" and elements[ins[0]] != elements[outs[0]]:
            found[ins[0]].add("resize")
            found[outs[0]].add("resize")
    return {n: frozenset(v) for n, v in found.items()}


# -- the whole layout -----------------------------------------------------------


def _fail(layout: Layout, dev: Device, tile: Tile, what: str) -> LegalityError:
    return LegalityError(f"{layout.operator} on {dev}: {tile}: {what}")


def _wait_free_queues(layout: Layout, dev: Device, limits: TileLimits) -> None:
    """A sequence without waits keeps every transfer of a FIFO in its
    channel's task queue until the end: at most ``task_queue`` of them.

    A push onto a full queue is dropped and the run hangs (mlir-aie PR #3734;
    mlir-air PR #1826 measured it), so a wait-free design's FIFO moves its
    data in at most four transfers, else the design waits between them.

    Raises:
        LegalityError: Naming the operator, the FIFO, its count and the fix.
    """
    per_fifo = Counter(t.fifo for t in layout.transfers)
    for fifo, n in per_fifo.items():
        if n > limits.task_queue:
            shim = next(t.shim for t in layout.transfers if t.fifo == fifo)
            raise _fail(
                layout,
                dev,
                shim,
                f"@{fifo} pushes {n} transfers in a sequence without waits; a "
                f"DMA channel's task queue holds {limits.task_queue} and drops "
                f"the rest (the run hangs): move its data in at most "
                f"{limits.task_queue} transfers (larger tiles) or give the "
                f"design waits between them",
            )


def _sequence_peaks(layout: Layout, dev: Device, limits: TileLimits) -> Counter[Tile]:
    """Replay a sequence with waits; each shim's most buffer descriptors in use.

    The rules (mlir-aie ``AIEX.td``, ``npu.dma_memcpy_nd``: reusing a BD id
    needs a prior token wait):

    * a wait on ``@f`` consumes the oldest token of ``f`` not yet awaited,
      issued by a transfer before the wait (a wait with none would hang);
    * that wait retires, on the token transfer's shim, every transfer issued
      up to and including it: their ids are free again. The design vouches
      that the awaited transfer completes only after those did (an output
      whose data needs every input issued before it; tasks on one channel
      run in order);
    * an id in use (issued, not retired) on a shim is not issued again;
    * a FIFO has at most ``task_queue`` transfers issued and not retired
      (its channel's task queue);
    * every token is awaited by the end of the sequence.

    Raises:
        LegalityError: Naming the operator, the shim tile, the FIFO and the rule.
    """
    n = len(layout.transfers)
    at: defaultdict[int, list[str]] = defaultdict(list)
    for position, fifo in layout.waits:
        if not 0 <= position <= n:
            raise LegalityError(
                f"{layout.operator} on {dev}: the wait on @{fifo} is at position "
                f"{position}, outside the sequence's 0..{n} transfers"
            )
        at[position].append(fifo)
    busy: defaultdict[Tile, dict[int, int]] = defaultdict(dict)  # id -> transfer
    tokens: defaultdict[str, list[int]] = defaultdict(list)
    queued: defaultdict[str, list[int]] = defaultdict(list)
    peak: Counter[Tile] = Counter()
    for j in range(n + 1):
        for fifo in at[j]:
            if not tokens[fifo]:
                shim = next(
                    (t.shim for t in layout.transfers if t.fifo == fifo), Tile(0, 0)
                )
                raise _fail(
                    layout,
                    dev,
                    shim,
                    f"the wait on @{fifo} after {j} transfers has no token to wait "
                    f"for: no transfer of @{fifo} before it issues one not yet "
                    f"awaited",
                )
            k = tokens[fifo].pop(0)
            shim = layout.transfers[k].shim
            busy[shim] = {i: e for i, e in busy[shim].items() if e > k}
            for f in queued:
                queued[f] = [
                    e for e in queued[f] if e > k or layout.transfers[e].shim != shim
                ]
        if j == n:
            break
        t = layout.transfers[j]
        if not 0 <= t.bd_id < dev.shim_bds:
            raise _fail(
                layout,
                dev,
                t.shim,
                f"buffer descriptor id {t.bd_id} for @{t.fifo} is outside "
                f"0..{dev.shim_bds - 1}",
            )
        if t.bd_id in busy[t.shim]:
            e = busy[t.shim][t.bd_id]
            raise _fail(
                layout,
                dev,
                t.shim,
                f"buffer descriptor id {t.bd_id} for @{t.fifo} (transfer {j}) is "
                f"reused while transfer {e} (@{layout.transfers[e].fifo}) may still "
                f"run: reusing an id needs a wait on a token issued on this shim "
                f"at or after transfer {e}",
            )
        busy[t.shim][t.bd_id] = j
        peak[t.shim] = max(peak[t.shim], len(busy[t.shim]))
        queued[t.fifo].append(j)
        if len(queued[t.fifo]) > limits.task_queue:
            raise _fail(
                layout,
                dev,
                t.shim,
                f"@{t.fifo} has {len(queued[t.fifo])} transfers outstanding at "
                f"transfer {j}; a DMA channel's task queue holds "
                f"{limits.task_queue}: wait before issuing more",
            )
        if t.token:
            tokens[t.fifo].append(j)
    for fifo, left in tokens.items():
        if left:
            raise _fail(
                layout,
                dev,
                layout.transfers[left[0]].shim,
                f"the token of @{fifo}'s transfer {left[0]} is never awaited; "
                f"the sequence must wait for every token it asks for",
            )
    return peak


def check(layout: Layout, dev: Device) -> None:
    """Check a design's layout against ``dev``'s limits.

    Raises:
        LegalityError: The first limit broken, naming operator, tile and limit.
    """
    limits = TILE_LIMITS[dev.arch]
    check_fifo_features(layout, dev)
    stack = layout.stack_bytes or 0
    if layout.cores and layout.stack_bytes is None:
        raise _fail(
            layout,
            dev,
            layout.cores[0],
            "the layout states no core stack; give Layout.stack_bytes = "
            "core_stack(dev, <the kernels the core links>), the stack_size its "
            "aie.core sets (the toolchain's 0x400 default is never assumed)",
        )
    rows = 2 + dev.core_rows
    tiles = set(layout.cores)
    for f in layout.fifos:
        tiles |= {f.producer, *f.consumers}
    tiles |= {t.shim for t in layout.transfers}
    tiles |= {t for t, _ in layout.buffers}
    for tile in sorted(tiles):
        if not (0 <= tile.col < dev.columns and 0 <= tile.row < rows):
            raise _fail(
                layout,
                dev,
                tile,
                f"outside the {dev.columns}-column, {rows}-row array",
            )
    mem: Counter[Tile] = Counter()
    out_ch: Counter[Tile] = Counter()
    in_ch: Counter[Tile] = Counter()
    bds: Counter[Tile] = Counter()
    locks: Counter[Tile] = Counter()
    for f in layout.fifos:
        if not 1 <= f.depth <= limits.lock_max:
            raise _fail(
                layout,
                dev,
                f.producer,
                f"object FIFO @{f.name} depth {f.depth} is outside 1..{limits.lock_max} "
                f"(a lock's largest value)",
            )
        out_ch[f.producer] += 1
        for c in f.consumers:
            in_ch[c] += 1
        for end in (f.producer, *f.consumers):
            locks[end] += 2
            if end.kind != "shim":  # the shim's buffers are the host's
                mem[end] += f.depth * f.element_bytes
                bds[end] += f.depth
    for tile in layout.cores:
        mem[tile] += stack
    for tile, nbytes in layout.buffers:
        mem[tile] += nbytes
    if layout.waits:
        bds.update(_sequence_peaks(layout, dev, limits))
    else:
        for t in layout.transfers:
            bds[t.shim] += 1
        _wait_free_queues(layout, dev, limits)
    for tile in sorted(tiles):
        mm2s, s2mm = limits.channels[tile.kind]
        if out_ch[tile] > mm2s or in_ch[tile] > s2mm:
            raise _fail(
                layout,
                dev,
                tile,
                f"uses {out_ch[tile]} MM2S and {in_ch[tile]} S2MM DMA channels; a "
                f"{tile.kind} tile has {mm2s} + {s2mm}",
            )
        if locks[tile] > limits.locks[tile.kind]:
            raise _fail(
                layout,
                dev,
                tile,
                f"needs {locks[tile]} locks (two per object FIFO end); it has "
                f"{limits.locks[tile.kind]}",
            )
        bd_max = {"core": dev.core_bds, "mem": dev.mem_tile_bds, "shim": dev.shim_bds}
        if bds[tile] > bd_max[tile.kind]:
            raise _fail(
                layout,
                dev,
                tile,
                f"needs {bds[tile]} buffer descriptors; it has {bd_max[tile.kind]}",
            )
        size = {"core": dev.core_memory_bytes, "mem": dev.mem_tile_bytes}.get(tile.kind)
        if size is not None and mem[tile] > size:
            extra = (
                f" with its {stack}-byte stack (the aie.core's stack_size, from "
                f"its kernels' contracts)"
                if tile.kind == "core" and tile in layout.cores
                else ""
            )
            raise _fail(
                layout,
                dev,
                tile,
                f"its buffers need {mem[tile]} bytes{extra}; it has {size}",
            )
    ids: defaultdict[Tile, set[int]] = defaultdict(set)
    for t in layout.transfers:
        if layout.waits:  # ids checked by _sequence_peaks
            check_shim_transfer(layout.operator, dev, t)
            continue
        if not 0 <= t.bd_id < dev.shim_bds or t.bd_id in ids[t.shim]:
            raise _fail(
                layout,
                dev,
                t.shim,
                f"buffer descriptor id {t.bd_id} for @{t.fifo} is reused or outside "
                f"0..{dev.shim_bds - 1}",
            )
        ids[t.shim].add(t.bd_id)
        check_shim_transfer(layout.operator, dev, t)
