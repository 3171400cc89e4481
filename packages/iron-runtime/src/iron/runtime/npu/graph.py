"""From a planned image to NPU designs: one per step (NPU1), one full ELF (NPU2).

:func:`graph_design` turns an :class:`~iron.runtime.image.ImageSpec` (the
steps one dispatch runs, where every buffer lives, the scratchpad layout)
into a :class:`GraphDesign`: each step's operator design, placed where the
plan put its handles, and the arguments the driver binds.

Arguments of a graph image, in order:

* ``arena``: the one arena buffer, every step reading and writing it at the
  planned byte offsets (plus each handle's own offset in its buffer);
* ``arena#<k>``: where the arena is 2^31 bytes or more (Llama-3.2-1B's bf16
  weights alone are 2.47 GB), a stretch of it from a fixed byte on
  (:class:`Segment`), bound by the driver as a sub-buffer of the arena:
  aiecc patches a transfer's byte offset into its argument as a 32-bit
  value (:data:`~iron.core.dma.ARG_OFFSET_LIMIT`), so
  :func:`arena_segments` cuts the arena, between buffers, into arguments
  each below 2^31 bytes, and every offset into one is below 2^31 too
  (``arena`` is then the first stretch);
* ``arena@<i>``: the arena again, shifted by a per-call byte offset. A view
  whose start moves per call (``cache[position]``, ``rope[position]``, the
  embedding row of a carried token) is read or written at its static offset
  in this argument; the driver binds it per run as a sub-buffer of the arena
  (``pyxrt.bo(parent, size, offset)``) at the offset the run's scratchpad
  gives (:class:`WindowShift`). A shim buffer descriptor's address is fixed
  when the design is built, so this is how a per-call offset reaches the DMA;
  views whose per-call parts agree share one such argument;
* ``input:<name>``, ``output:<name>``: the graph's own input and output
  buffers;
* ``words``: the run's scratchpad (the device's scratchpad words, then the
  carried values), read by designs with per-call scalars;
* ``program``, ``feedback``: in a version ending in an Emit step
  (:mod:`iron.runtime.npu.designs.emit`), the Emit program and the next
  run's ``words`` buffer, which the Emit writes.

Per-call bounds (``x[:n]``) are not read on the device: a design moves its
operator's whole static extent, so a bounded step computes every row and
writes them all (the rows past ``n`` from whatever its inputs hold there).
A write through a bounded view therefore reaches its whole extent; the
emulated NPU writes only the first ``n`` rows. The Llama graphs stay within
this (a prompt chunk's extra rows land in cache positions no attention reads
before a later call writes them).

On NPU1 (or with ``check``) the plan gives one step per image: its design is
the image. On NPU2 a full ELF holds one device per distinct array
configuration (:class:`Configuration`, ``@config<j>``): the steps whose
designs differ only in their runtime sequences (every layer's q projection,
say) share one device, which holds each one's sequence
(``@step<k>_sequence``). A ``@main`` device's runtime sequence configures
the devices in step order and runs each step's sequence on the graph's
arguments (``aiex.configure`` / ``aiex.run``, the reconfiguration form of
mlir-aie v1.4.1's hardware test ``test/npu-xrt/reconfigure_loadpdi/aie.mlir``,
built with ``aiecc --get-full-elf``), consecutive steps of one configuration
in one ``aiex.configure`` (one PDI load); the host starts ``main:sequence``
once a call. Llama-3.2-1B's ~277 steps are 14-15 configurations.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Mapping, Sequence
from math import prod
from typing import Any

import numpy as np

from iron.core import dma
from iron.core.device import Device, as_device
from iron.core.handle import Handle
from iron.core.percall import Affine
from iron.runtime.image import ImageSpec, Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Design, Words, build_design, emit
from iron.runtime.npu.designs.sequence import arg_memref
from iron.runtime.npu.mlir import MLIR_AIE_RELEASE, Builder

__all__ = [
    "EMIT",
    "Configuration",
    "GraphDesign",
    "HostGather",
    "Segment",
    "StepDesign",
    "WindowShift",
    "arena_segments",
    "graph_design",
    "placements",
]

_WORD = 4

#: The step index of an image's Emit step (it follows every recorded step).
EMIT = -1


@dataclasses.dataclass(frozen=True)
class WindowShift:
    """How a ``<base>@<i>`` window shifts: ``base`` from a per-call byte offset on.

    (A standalone Copy's per-run argument is
    :class:`iron.runtime.npu.designs.movers_copy.Window`, in view terms.)

    The offset is ``(scratchpad[slot] - const) * itemsize``: the word at
    ``slot`` holds a view's start in elements, ``const`` its static part.

    Attributes:
        arg: The argument's name (``arena@0``, ``output:logits@1``, ...).
        slot: The scratchpad slot of a view start using this shift.
        const: That view start's static part, in elements.
        itemsize: Bytes per element of that view.
        base: The argument it is a sub-buffer of (``arena``, ``output:<name>``).
    """

    arg: str
    slot: int
    const: int
    itemsize: int
    base: str = "arena"
    start: int = 0

    def shift(self, scratchpad: np.ndarray) -> int:
        """The run's byte offset of this argument into ``base``.

        ``start`` (the :class:`Segment` the view lies in) plus the per-call
        part.
        """
        return self.start + (int(scratchpad[self.slot]) - self.const) * self.itemsize


@dataclasses.dataclass(frozen=True)
class Segment:
    """An ``arena#<k>`` argument: the arena's bytes ``[start, start + nbytes)``.

    Attributes:
        arg: The argument's name (``arena`` for the first stretch).
        start: Its first byte in the arena.
        nbytes: Its bytes (below 2^31).
    """

    arg: str
    start: int
    nbytes: int


def arena_segments(spec: ImageSpec, arena_bytes: int) -> dict[str, Segment]:
    """The arena argument each arena buffer of ``spec`` lies in, by buffer name.

    An arena below :data:`~iron.core.dma.ARG_OFFSET_LIMIT` is one
    argument, ``arena``. A larger one is cut between buffers, in address
    order, into stretches each below the limit (``arena``, ``arena#1``, ...);
    a buffer lies wholly in one.

    Raises:
        iron.runtime.npu.legality.LegalityError: One buffer alone is 2^31
            bytes or more (named, with the limit).
    """
    limit = dma.ARG_OFFSET_LIMIT
    arena = sorted(
        (p.offset, p.offset + p.nbytes, name)
        for name, p in spec.placement.items()
        if p.where == "arena"
    )
    if max(arena_bytes, max((hi for _, hi, _ in arena), default=0)) < limit:
        whole = Segment("arena", 0, arena_bytes)
        return {name: whole for *_, name in arena}
    spans: list[list[Any]] = []  # [start, end, members]
    for lo, hi, name in arena:
        if hi - (lo - lo % _WORD) >= limit:
            raise legality.LegalityError(
                f"{spec.name}: buffer {name} takes {hi - lo} bytes of the arena; "
                f"an NPU argument must be below 2^31 = {limit} bytes (aiecc "
                f"patches offsets into it as 32-bit values); split the buffer"
            )
        if not spans or hi - spans[-1][0] >= limit:
            spans.append([0 if not spans else lo - lo % _WORD, hi, []])
        spans[-1][1] = max(spans[-1][1], hi)
        spans[-1][2].append(name)
    found: dict[str, Segment] = {}
    for k, (start, end, members) in enumerate(spans):
        seg = Segment(
            "arena" if k == 0 else f"arena#{k}", start, -(-(end - start) // 4) * 4
        )
        found.update((name, seg) for name in members)
    return found


@dataclasses.dataclass(frozen=True)
class HostGather:
    """A Copy of table rows picked by a graph input's ids, done by the host.

    A shim descriptor's address is fixed when the design is built, and the
    ids of a prompt's tokens arrive with the call; so a gather by the ids of
    a graph input is the host's, before the run starts: it reads the ids
    from the staged input, copies each row from the table's bytes (a weight:
    the host's copy is the device's) to the step's output and sends those
    bytes to the device. It must be its image's first step.

    Attributes:
        step: The step's index.
        ids: The argument holding the ids (``input:<name>``), int32.
        ids_offset: Byte offset of the first id there.
        count: Ids the view holds (at most; see ``bound_slot``).
        bound_slot: The scratchpad slot of the view's per-call row bound,
            or None.
        source: The argument holding the table (``arena``).
        source_offset: Byte offset of the table's row 0.
        rows: Rows the table has (every id must be below).
        row_bytes: Bytes of one row.
        dest: The argument the rows are written to.
        dest_offset: Byte offset of the first row written.
    """

    step: int
    ids: str
    ids_offset: int
    count: int
    bound_slot: int | None
    source: str
    source_offset: int
    rows: int
    row_bytes: int
    dest: str
    dest_offset: int

    def run(self, buffers: Mapping[str, Any], scratchpad: np.ndarray) -> None:
        """Gather the rows in ``buffers`` (driver buffer objects by argument).

        Raises:
            IndexError: An id is outside the table (nothing is written).
        """
        n = self.count
        if self.bound_slot is not None:
            n = max(0, min(n, int(scratchpad[self.bound_slot])))
        raw = buffers[self.ids].host()[self.ids_offset : self.ids_offset + 4 * n]
        ids = np.frombuffer(raw.tobytes(), np.int32)
        bad = ids[(ids < 0) | (ids >= self.rows)]
        if bad.size:
            raise IndexError(
                f"step {self.step} Copy: id {int(bad[0])} is outside the table's "
                f"{self.rows} rows"
            )
        src, dst = buffers[self.source].host(), buffers[self.dest].host()
        r = self.row_bytes
        for k, i in enumerate(ids.tolist()):
            start = self.source_offset + i * r
            dst[self.dest_offset + k * r : self.dest_offset + (k + 1) * r] = src[
                start : start + r
            ]
        if n:
            buffers[self.dest].to_device(self.dest_offset, n * r)


def _host_gather(spec: ImageSpec, step: Any) -> HostGather | None:
    """``step`` as a :class:`HostGather`, if it is a Copy gathering by input ids."""
    try:
        from iron.operators import Copy
    except ModuleNotFoundError:  # without the catalog no step is a Copy
        return None
    if not isinstance(step.op, Copy):
        return None
    view, out = step.inputs[0], step.outputs[0]
    layout = view.layout
    reads = layout.reads()
    if len(reads) != 1:
        return None
    (ids,) = reads
    # rows by ids: one walk per row, each moved by its id times the row
    row = prod(view.shape[1:])
    walks = layout.dma_walks(view.elements)
    if not walks.per_walk or walks.per_call != (row,):
        return None
    ids_buf = spec.placement[ids.buffer.name]
    table = spec.placement[view.buffer.name]
    dest = spec.placement[out.buffer.name]
    ids_offset, out_offset = ids.layout.static_offset, out.layout.static_offset
    if (
        ids_buf.where != "input"
        or np.dtype(ids.dtype) != np.int32
        or ids_offset is None
        or table.where != "arena"
        or out_offset is None
    ):
        return None
    itemsize = np.dtype(view.dtype).itemsize
    row_bytes = row * itemsize
    bound = view.valid.get(0, ids.valid.get(0))
    slot = None
    if isinstance(bound, Affine):
        slot = spec.slot_of_key.get(bound.key())
    first = table.offset + layout.start * itemsize
    return HostGather(
        step=step.index,
        ids=f"input:{ids.buffer.name}",
        ids_offset=ids_offset * 4,
        count=ids.shape[0],
        bound_slot=slot,
        source="arena",
        source_offset=first,
        rows=(table.offset + table.nbytes - first) // row_bytes,
        row_bytes=row_bytes,
        dest="arena" if dest.where == "arena" else f"{dest.where}:{out.buffer.name}",
        dest_offset=(dest.offset if dest.where == "arena" else 0)
        + out_offset * itemsize,
    )


@dataclasses.dataclass(frozen=True)
class StepDesign:
    """One step's design; its arguments are the image's, by name.

    Attributes:
        index: The step's index in its recording.
        design: The operator's design, placed.
    """

    index: int
    design: Design


@dataclasses.dataclass(frozen=True)
class GraphDesign:
    """What the XRT backend builds and loads for one image.

    Attributes:
        name: The image's name.
        device: ``npu1`` or ``npu2``.
        steps: Each step's design.
        args: The image's arguments, in the order its kernel takes them.
        arg_bytes: Each argument's size in bytes.
        windows: The per-run arena shifts, one per ``arena@<i>`` argument.
        design: What :func:`iron.runtime.npu.build.build` compiles: the one
            step's design (one step), else the full ELF's; None when the host
            does the image's one step (a :class:`HostGather`).
        spec: The image it was made from (the ``program`` argument holds
            the Emit program ``emit_to`` composed, which each run is given).
        host_gathers: Steps the host runs before each start.
        segments: The ``arena#<k>`` arguments (a static stretch of the
            arena each), which the driver binds as sub-buffers of the arena.
        configurations: The full ELF's devices, one per distinct array
            configuration, each with the steps it runs (one per step when
            the image is one step's design).
    """

    name: str
    device: str
    steps: tuple[StepDesign, ...]
    args: tuple[str, ...]
    arg_bytes: tuple[int, ...]
    windows: tuple[WindowShift, ...]
    design: Design | None
    spec: ImageSpec
    host_gathers: tuple[HostGather, ...] = ()
    segments: tuple[Segment, ...] = ()
    configurations: tuple[Configuration, ...] = ()

    @property
    def loads(self) -> int:
        """Array configurations loaded a run: a full ELF's ``aiex.configure``
        blocks (consecutive steps of one configuration load it once), else
        one per designed step (an xclbin of one step)."""
        if self.design is None:
            return 0
        if len(self.steps) == 1 and self.design is self.steps[0].design:
            return 1
        where = {i: c.name for c in self.configurations for i in c.steps}
        return len(
            list(itertools.groupby(range(len(self.steps)), key=where.__getitem__))
        )


def _start(h: Handle) -> int | Affine:
    """A handle's start in its buffer, in elements (a per-call expression or not)."""
    layout = h.layout
    if layout.reads():
        raise NotImplementedError(
            f"{h.name}: a {layout.kind} by ids a device buffer holds has no NPU "
            f"design (a shim descriptor cannot read its address from device "
            f"memory); gather with per-call values (iron.Carried / "
            f"iron.Scratchpad) instead"
        )
    return layout.start


def _dense_whole(h: Handle) -> bool:
    """Whether ``h`` is a contiguous run of its buffer (a Copy writes it as one)."""
    return h.layout.contiguous


def placements(
    spec: ImageSpec,
    step_index: int,
    windows: dict[tuple, WindowShift],
    segments: Mapping[str, Segment] | None = None,
) -> dict[str, Placement]:
    """Each port of step ``step_index``: where its handle starts, in bytes.

    Static views are placed in ``arena`` (or their input or output buffer)
    at their buffer's offset plus their own; a view whose start moves per call
    is placed in a ``<buffer>@<i>`` window (added to ``windows``, keyed by
    its buffer and the start's per-call part) at its static part. With
    ``segments`` (:func:`arena_segments`), an arena buffer is placed in its
    stretch's argument, at its offset from the stretch's start.

    Raises:
        NotImplementedError: A gather reads ids from device memory.
        ValueError: A per-call start has no scratchpad word.
    """
    step = next(s for s in spec.steps if s.index == step_index)
    op = step.op
    ports = [i.name for i in op.inputs] + [o.name for o in op.outputs]
    handles = list(step.inputs) + list(step.outputs)
    found: dict[str, Placement] = {}
    for port, h in zip(ports, handles):
        if h is None:
            continue
        buf = spec.placement[h.buffer.name]
        itemsize = np.dtype(h.dtype).itemsize
        start = _start(h)
        const = start.const if isinstance(start, Affine) else int(start)
        # A Copy walks its views itself (their static offsets are in its
        # access walks): its view ports are placed at their buffers' starts.
        # Its read view is walked by the access recorded from it even when
        # contiguous (a state's row ``batch_k[4:5]``: the walk starts at the
        # row; a kv head's row of a projection, written to a long cache a head
        # at a time), so a static start is not added to the placement a second
        # time.
        copy = type(op).__name__ == "Copy"
        static = not (isinstance(start, Affine) and start.terms)
        walked = copy and (not _dense_whole(h) or (port == "view" and static))
        own = 0 if walked else const * itemsize
        seg = (segments or {}).get(h.buffer.name)
        base = 0 if seg is None else seg.start
        offset = buf.offset - base + own if buf.where == "arena" else own
        nbytes = buf.nbytes - own
        if buf.where != "arena":
            where = f"{buf.where}:{h.buffer.name}"
        else:
            where = "arena" if seg is None else seg.arg
        if isinstance(start, Affine) and start.terms:
            slot = spec.slot_of_key.get(start.key())
            if slot is None:
                raise ValueError(
                    f"step {step.index}: the start {start} of {h.name} has no "
                    f"scratchpad word; plan the recording that made this image"
                )
            key = (where, *Affine(start.terms, 0).key(), itemsize)
            if const < 0:  # a start like 512 * n - 512: shift by all of it
                key = (where, *start.key(), itemsize)
                const = 0
                offset -= own
            if key not in windows:
                arg = f"{where}@{len(windows)}"
                windows[key] = (
                    WindowShift(arg, slot, const, itemsize, where)
                    if buf.where != "arena"
                    else WindowShift(arg, slot, const, itemsize, "arena", base)
                )
            where = windows[key].arg
            nbytes = buf.nbytes  # the window reaches as far as its buffer does
        found[port] = Placement(where, offset, nbytes)
    return found


def _graph_args(
    steps: Sequence[StepDesign], arena_bytes: int
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The image's arguments in order: arena, windows, inputs, outputs, words."""
    sizes: dict[str, int] = {}
    for s in steps:
        for arg, n in zip(s.design.args, s.design.arg_bytes):
            sizes[arg] = max(sizes.get(arg, 0), n)

    def rank(a: str) -> tuple[int, str]:
        order = ("arena", "arena@", "input:", "output:", "words", "program", "feedback")
        return next(i for i, p in enumerate(order) if a.startswith(p)), a

    args = tuple(sorted(sizes, key=rank))
    return args, tuple(
        max(sizes[a], arena_bytes) if a.startswith("arena") else sizes[a] for a in args
    )


_DEVICE = re.compile(r"aie\.device\((\w+)\) @main \{")


@dataclasses.dataclass(frozen=True)
class _Parts:
    """A design's ``aie.device`` block in two parts.

    ``body`` is the array configuration (tiles, buffers, locks, object FIFOs,
    cores and their kernels); ``sequence`` is the runtime sequence, the only
    part that names arguments and their offsets.
    """

    kind: str
    body: tuple[str, ...]
    sequence: tuple[str, ...]


def _parts(text: str) -> _Parts:
    """Split a design's text into its array configuration and its sequence."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if _DEVICE.search(line))
    end = max(i for i, line in enumerate(lines) if line.strip() == "}")  # module's
    block = lines[start + 1 : end - 1]  # inside the device's braces
    at = next(
        i for i, line in enumerate(block) if "aie.runtime_sequence @sequence(" in line
    )
    m = _DEVICE.search(lines[start])
    assert m is not None
    return _Parts(m.group(1), tuple(block[:at]), tuple(block[at:]))


@dataclasses.dataclass(frozen=True)
class Configuration:
    """One ``aie.device`` of a full ELF: an array configuration and its steps.

    Steps whose emitted device bodies are identical (same tiles, buffers,
    locks, object FIFOs, cores and kernels) differ only in their runtime
    sequences, so the full ELF holds the body once, with one runtime sequence
    per step (``@step<k>_sequence``), and aiecc builds one PDI and one set of
    core ELFs for them. ``aiex.run`` looks its callee up by name in the
    configured device (mlir-aie ``RunOp::getCalleeRuntimeSequenceOp``,
    ``lib/Dialect/AIEX/IR/AIEXDialect.cpp``), and a device may hold several
    named runtime sequences (mlir-aie ``test/aiecc/cpp_multi_device_sequence
    .mlir``; ``test/python/aiex_ops.py``), https://github.com/Xilinx/mlir-aie.

    Attributes:
        name: The device's symbol (``config<j>``, or ``emit`` for an Emit).
        steps: Positions in :attr:`GraphDesign.steps` of the steps it runs.
    """

    name: str
    steps: tuple[int, ...]


def _configurations(labels: Sequence[str], texts: Sequence[str]) -> list[Configuration]:
    """Steps grouped by their array configuration, in order of first use.

    ``labels[i]`` is step ``i``'s sequence label (``emit`` names an Emit's
    device); ``texts[i]`` its design text.
    """
    keys: dict[tuple, list[int]] = {}
    for i, text in enumerate(texts):
        p = _parts(text)
        keys.setdefault((p.kind, p.body), []).append(i)
    out: list[Configuration] = []
    for group in keys.values():
        arrays = len([c for c in out if c.name != "emit"])
        name = "emit" if labels[group[0]] == "emit" else f"config{arrays}"
        out.append(Configuration(name, tuple(group)))
    return out


def _device_lines(
    parts: Sequence[_Parts], labels: Sequence[str], name: str
) -> list[str]:
    """One configuration's ``aie.device @<name>``: the body once, then each
    step's sequence renamed ``@<label>_sequence``."""
    head = f"aie.device({parts[0].kind}) @{name} {{"
    lines = [head, *parts[0].body]
    for p, label in zip(parts, labels):
        lines += [
            line.replace(
                "aie.runtime_sequence @sequence(",
                f"aie.runtime_sequence @{label}_sequence(",
            )
            for line in p.sequence
        ]
    return [*lines, "}"]


class ArgumentTypeError(TypeError):
    """Two steps of a full ELF type one shared argument differently."""


_SEQUENCE = re.compile(r"aie\.runtime_sequence @sequence\((.*)\) \{")
_MEMREF = re.compile(r"memref<[^>]*>")


def _sequence_types(design: Design) -> list[str]:
    """The memref types of ``design``'s runtime-sequence arguments, in order."""
    line = next(m for m in map(_SEQUENCE.search, design.text.splitlines()) if m)
    return _MEMREF.findall(line.group(1))


def _main_types(
    steps: Sequence[StepDesign], labels: Sequence[str], args, arg_bytes
) -> dict[str, str]:
    """``@main``'s type of each argument: the one every step that takes it declares.

    ``aiex.run`` passes ``@main``'s values to a step's sequence, and aiecc's
    AIEMaterializeRuntimeSequences refuses an operand whose type is not the
    callee's ("argument type mismatch"; mlir-aie lib/Dialect/AIEX/Transforms/
    AIEMaterializeRuntimeSequences.cpp, https://github.com/Xilinx/mlir-aie).

    Raises:
        ArgumentTypeError: Two steps declare one argument with two types.
    """
    types: dict[str, tuple[str, str]] = {}
    for label, s in zip(labels, steps):
        for a, t in zip(s.design.args, _sequence_types(s.design), strict=True):
            seen = types.setdefault(a, (t, label))
            if seen[0] != t:
                raise ArgumentTypeError(
                    f"argument {a} is {seen[0]} in {seen[1]} "
                    f"({_operator(steps, labels, seen[1])}) but {t} in {label} "
                    f"({s.design.operator}); one argument has one type in every "
                    f"step: type it alike in both designs (an arena argument is "
                    f"bf16, addressed in bf16 elements)"
                )
    return {
        a: types[a][0] if a in types else arg_memref(a, n)
        for a, n in zip(args, arg_bytes)
    }


def _operator(steps: Sequence[StepDesign], labels: Sequence[str], label: str) -> str:
    return steps[list(labels).index(label)].design.operator


def _full_elf(
    name: str, dev: Device, steps: Sequence[StepDesign], args, arg_bytes
) -> tuple[Design, tuple[Configuration, ...]]:
    """The full ELF's design: a device per array configuration, ``@main``
    running every step's sequence in order.

    Consecutive steps of one configuration share one ``aiex.configure``
    block: aiecc inserts one ``load_pdi`` per block (mlir-aie
    ``AIEMaterializeRuntimeSequences.cpp``, ``InsertLoadPdiForConfigurePattern``)
    and the cores run their loops unbounded, so the second step runs on the
    array as the first left it (as upstream's ``reconfigure_loadpdi`` test
    runs one sequence twice in one block).

    Raises:
        ArgumentTypeError: Two steps type one shared argument differently.
    """
    b = Builder()
    b.comment(f"IRON full ELF: {name} on {dev.name}; mlir-aie {MLIR_AIE_RELEASE}")
    labels = ["emit" if s.index == EMIT else f"step{k}" for k, s in enumerate(steps)]
    types = _main_types(steps, labels, args, arg_bytes)
    parts = [_parts(s.design.text) for s in steps]
    configs = _configurations(labels, [s.design.text for s in steps])
    device_of = {i: c.name for c in configs for i in c.steps}
    with b.region("module"):
        for c in configs:
            group = [parts[i] for i in c.steps]
            for line in _device_lines(group, [labels[i] for i in c.steps], c.name):
                b.line(line.removeprefix("  "))
        with b.device(dev.name, "main"):
            hints = [(a, types[a]) for a in args]
            with b.runtime_sequence(hints, "sequence") as names:
                ssa = dict(zip(args, names))
                runs = itertools.groupby(range(len(steps)), key=device_of.__getitem__)
                for device, group in runs:
                    with b.region(f"aiex.configure @{device}"):
                        for i in group:
                            s = steps[i]
                            operands = ", ".join(ssa[a] for a in s.design.args)
                            sig = ", ".join(types[a] for a in s.design.args)
                            b.line(
                                f"aiex.run @{labels[i]}_sequence({operands}) : ({sig})"
                            )
    kernels = tuple(dict.fromkeys(k for s in steps for k in s.design.kernels))
    design = Design(
        operator=name,
        device=dev.name,
        text=b.text(),
        args=tuple(args),
        arg_bytes=tuple(arg_bytes),
        kernels=kernels,
        layout=legality.Layout(name, (), (), ()),
    )
    return design, tuple(configs)


def graph_design(
    spec: ImageSpec, dev: Device | str, *, arena_bytes: int = 0
) -> GraphDesign:
    """The designs of ``spec``'s steps on ``dev``, and the image's arguments.

    ``arena_bytes`` is the arena's size (every step sees the same arena
    type). One step: its design is the image (NPU1). More: one full ELF.

    Raises:
        NotImplementedError: A step's operator or view has no NPU design.
        iron.runtime.npu.legality.LegalityError: A step breaks a device limit.
        iron.core.operator.RefusedShapeError: A step refuses the device.
    """
    device = as_device(dev)
    windows: dict[tuple, WindowShift] = {}
    segments = arena_segments(spec, arena_bytes)
    stretches = tuple(dict.fromkeys(segments.values()))
    if len(stretches) > 1:  # every arena argument is sized as the largest stretch
        arena_bytes = max(seg.nbytes for seg in stretches)
    # Every run's scratchpad buffer holds the device's words and the carried
    # values, so an Emit can write any version's whole scratchpad into it.
    capacity = device.scratchpad_words + len(spec.carried)
    words = Words(dict(spec.slot_of_key), capacity)
    steps = []
    gathers = []
    for step in spec.steps:
        gather = _host_gather(spec, step)
        if gather is not None:
            if step is not spec.steps[0]:
                raise NotImplementedError(
                    f"{spec.name}: step {step.index} gathers rows by the ids of a "
                    f"graph input, which the host does before the run; on the NPU "
                    f"it must be its image's first step"
                )
            gathers.append(gather)
            continue
        place = placements(spec, step.index, windows, segments)
        out = step.outputs[0] if step.outputs else None
        if (
            type(step.op).__name__ == "Copy"
            and out is not None
            and not _dense_whole(out)
        ):
            # A Copy records how it reads its view; how its out= view is
            # written is the step's output handle's.
            from iron.operators.movers import Access
            from iron.runtime.npu.designs import movers

            d = movers.build(
                step.op,
                device,
                place,
                arena_bytes=arena_bytes,
                words=words,
                out_access=Access.of(out),
            )
        else:
            d = build_design(
                step.op, device, place, arena_bytes=arena_bytes, words=words
            )
        steps.append(StepDesign(step.index, d))
    if spec.emit is not None:
        if not device.full_elf:
            raise ValueError(
                f"{spec.name}: an Emit step needs a full ELF, which {device.name} "
                f"has not; loop the version from the host"
            )
        d = emit.build(
            spec, device, capacity=capacity, arena_bytes=arena_bytes, segments=segments
        )
        steps.append(StepDesign(EMIT, d))
    design: Design | None
    configs: tuple[Configuration, ...] = tuple(
        Configuration(f"config{k}", (k,)) for k in range(len(steps))
    )
    if not steps:  # only host gathers (an image of one step on npu1)
        design = None
    elif len(steps) == 1 and spec.emit is None:
        design = steps[0].design
    elif not device.full_elf:
        raise ValueError(
            f"{spec.name}: {len(steps)} steps in one image on {device.name}, which "
            f"has no full ELF; plan it with one step per image"
        )
    else:
        args, arg_bytes = _graph_args(steps, arena_bytes)
        design, configs = _full_elf(spec.name, device, steps, args, arg_bytes)
    return GraphDesign(
        name=spec.name,
        device=device.name,
        steps=tuple(steps),
        host_gathers=tuple(gathers),
        args=design.args if design else (),
        arg_bytes=design.arg_bytes if design else (),
        windows=tuple(windows.values()),
        design=design,
        spec=spec,
        segments=tuple(seg for seg in stretches if seg.arg != "arena"),
        configurations=configs,
    )
