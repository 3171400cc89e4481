"""How the emulated NPU runs one image on its memory.

Each step reads its operands from the bytes of the buffers they live in (the
arena at the planned offset, or an input or output buffer), through their
layouts, with every per-call offset, bound, repeat and length read from the
run's scratchpad words — never from the host's values. It runs the
operator's kernel model (its ``reference()``) and writes the result back to
the planned bytes. In poison mode each transient's bytes are filled with a
NaN pattern when it becomes live and again when it dies, so a planning bug
(an overlap, a read of a dead buffer) shows up as a wrong answer.

At the end of a run with an Emit step and a feedback target, the Emit
program computes the next run's scratchpad from this run's carried slots
and the values the device made.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
from ml_dtypes import bfloat16

from iron.core.access import bounded, read, write
from iron.core.emit import run as run_emit
from iron.core.emit import slots_of, stored
from iron.core.handle import Handle
from iron.core.layout import offset_parts
from iron.core.percall import Affine, evaluate
from iron.core.plan import IdleProgram
from iron.core.recording import Recording, Step
from iron.core.tolerance import compare
from iron.runtime.driver import RunError
from iron.runtime.image import ImageSpec

__all__ = ["POISON_BYTES", "FixedStep", "RunProgram", "StepCheckError", "execute"]

#: The poison pattern: bf16 and f32 NaNs (0x7FC0 halves), garbage as ints.
POISON_BYTES = np.frombuffer(bytes.fromhex("c07fc07f"), np.uint8)


class StepCheckError(ValueError):
    """A step's result is outside its tolerance (``check=True``)."""


class DeviceViews(Mapping[str, np.ndarray]):
    """Typed views of device memory by buffer name, as the image places them."""

    def __init__(
        self,
        spec: ImageSpec,
        memory: Mapping[str, np.ndarray],
        widen: Callable[..., np.ndarray] | None = None,
        places: Mapping[str, _Place] | None = None,
    ) -> None:
        self.spec = spec
        self.memory = memory
        self.widen = widen
        self.buffers = spec.recording.buffers
        self.places = places if places is not None else _places(spec)
        self._cache: dict[str, np.ndarray] = {}
        self._decoded: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        view = self._cache.get(name)
        if view is not None:
            return view
        place = self.places.get(name)
        if place is None:
            self.buffers[name]  # an unknown name is a KeyError, as a mapping's
            raise RunError(f"{self.spec.name}: buffer {name} has no placement")
        key, offset, nbytes, dtype, shape, copy = place
        if copy is as_float32 and self.widen is not None:
            # weights never change during a run: their float32 values, kept
            view = self.widen(offset, nbytes, dtype, shape, copy)
        else:
            view = self.memory[key][offset : offset + nbytes].view(dtype).reshape(shape)
        self._cache[name] = view
        return view

    def decoded(self, name: str) -> np.ndarray:
        """Weight ``name`` decoded (``Operator.decoded``) if the copy is kept.

        Else its stored values, as ``self[name]`` gives them: a reader that
        decodes takes either.
        """
        key, offset, nbytes, dtype, shape, copy = self.places[name]
        if copy is None or copy is as_float32 or self.widen is None:
            return self[name]
        found = self._decoded.get(name)
        if found is None:
            found = self._decoded[name] = self.widen(offset, nbytes, dtype, shape, copy)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self.spec.placement)

    def __len__(self) -> int:
        return len(self.spec.placement)


#: Where a buffer's bytes are: memory key, byte offset, bytes, dtype, shape,
#: and, for a weight in the arena its readers prefer as a copy, the function
#: making the copy (a float32 widening, or a packed weight's decoding).
_Place = tuple[
    str, int, int, np.dtype, tuple[int, ...], Callable[[np.ndarray], np.ndarray] | None
]


def as_float32(values: np.ndarray) -> np.ndarray:
    """A bf16 weight's float32 copy: the copy a ``_Place`` names to mean it
    (compared by identity; every other copy is an operator's decoding)."""
    return values.astype(np.float32)


def _decoders(spec: ImageSpec) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """The buffers a step may read decoded (``Operator.decoded``), each's decoder.

    A buffer no step writes, that some step reads whole (a contiguous whole
    buffer, no bounds) with an operator that says how to decode it. Only
    such readers get the decoded copy (:func:`_operand`); any other reader
    of it gets its stored bytes.
    """
    found: dict[str, Callable[[np.ndarray], np.ndarray]] = {}
    steps = spec.recording.steps
    written = {h.name for step in steps for h in step.outputs if h is not None}
    for step in steps:
        for index, h in enumerate(step.inputs):
            if h is None or h.name in written or h.name in found:
                continue
            make = step.op.decoded(index)
            if make is not None and _whole(h, spec):
                found[h.name] = make
    return found


def _whole(h: Handle, spec: ImageSpec) -> bool:
    """Whether ``h`` is all of its buffer, read at once with no bounds."""
    return (
        not h.valid
        and h.layout.contiguous
        and h.layout.static_offset == 0
        and h.nbytes == spec.recording.buffers[h.name].nbytes
    )


def _places(spec: ImageSpec) -> dict[str, _Place]:
    """Each placed buffer's ``_Place``, worked out once.

    A bf16 weight is read widened when a step's operator reads it faster as
    float32 (``Operator.reads_float32``); a weight some reader takes decoded
    (:func:`_decoders`) is kept decoded for those readers; else every read
    is of the stored bytes.
    """
    wide = {
        h.name
        for step in spec.recording.steps
        for index, h in enumerate(step.inputs)
        if h is not None and step.op.reads_float32(index)
    }
    decoders = _decoders(spec)
    places: dict[str, _Place] = {}
    for name, place in spec.placement.items():
        buffer = spec.recording.buffers.get(name)
        if buffer is None:
            continue
        dtype = np.dtype(buffer.dtype)
        arena = place.where == "arena"
        weight = arena and buffer.role == "weight"
        copy: Callable[[np.ndarray], np.ndarray] | None = None
        if weight and dtype == np.dtype(bfloat16) and name in wide:
            copy = as_float32
        elif weight and name in decoders:
            copy = decoders[name]
        places[name] = (
            "arena" if arena else f"{place.where}:{name}",
            place.offset,
            buffer.nbytes,
            dtype,
            tuple(buffer.shape),
            copy,
        )
    return places


def scratchpad_evaluator(spec: ImageSpec, scratchpad: np.ndarray):
    """A function reading each per-call expression from its scratchpad word."""

    def value(expr: Affine) -> int:
        slot = spec.slot_of_key.get(expr.key())
        if slot is None:
            raise RunError(
                f"{spec.name}: no scratchpad word holds {expr}; the plan's words "
                f"miss a use (a planning bug)"
            )
        return int(scratchpad[slot])

    return value


def _poison(memory: Mapping[str, np.ndarray], offset: int, nbytes: int) -> None:
    region = memory["arena"][offset : offset + nbytes]
    whole, rest = divmod(nbytes, 4)
    region[: whole * 4].reshape(-1, 4)[:] = POISON_BYTES
    region[whole * 4 :] = POISON_BYTES[:rest]


def _zero_rows(step: Any, ev: Any) -> bool:
    for h in (*step.inputs, *step.outputs):
        if h is not None and any(evaluate(b, ev) <= 0 for b in h.valid.values()):
            return True
    return False


class RunProgram:
    """What a run of one image does besides its kernels, prepared once at load.

    Which scratchpad word each step's bounds are read from (a step has zero
    rows when one of them is zero or less), and which transients become
    live and die at each step (for poisoning). A run then reads each bound's
    word once instead of walking every step's handles. A step one of whose
    bounds no word holds (a planning bug) is judged the slow way when the
    run reaches it, so its error is raised where it always was.
    """

    def __init__(self, spec: ImageSpec) -> None:
        program = IdleProgram.of(spec.steps)
        unread: set[int] = set()
        words: dict[int, set[int]] = {}
        for expr, steps in program.bounds:
            slot = spec.slot_of_key.get(expr.key())
            if slot is None:
                unread |= steps
            else:
                words.setdefault(slot, set()).update(steps)
        #: Steps whose bounds are judged step by step (a bound in no word).
        self.unread = frozenset(unread)
        #: Steps with a fixed bound of zero rows: never run.
        self.always = program.always - self.unread
        #: Each scratchpad slot read, with the steps idle when it is <= 0.
        self.words = tuple(
            (slot, frozenset(steps - self.unread))
            for slot, steps in sorted(words.items())
            if steps - self.unread
        )
        self.born: dict[int, list[Any]] = {}
        self.dead: dict[int, list[Any]] = {}
        for placed in spec.transients:
            self.born.setdefault(placed.first, []).append(placed)
            self.dead.setdefault(placed.last, []).append(placed)
        self._locate(spec)

    def _locate(self, spec: ImageSpec) -> None:
        #: The placement the operands below were located in.
        self.placement = dict(spec.placement)
        #: Where each buffer is placed, worked out once.
        self.places = _places(spec)
        #: Each step's operands and operator as far as they are fixed at load.
        self.fixed = {
            step.index: FixedStep(step, spec, self.places) for step in spec.steps
        }

    def refresh(self, spec: ImageSpec) -> None:
        """Locate the operands again if ``spec``'s placement changed since.

        A dict comparison that finds the same placement objects (a few
        microseconds); a test may move a buffer after load.
        """
        if spec.placement != self.placement:
            self._locate(spec)

    def zero_rows(self, scratchpad: np.ndarray) -> frozenset[int]:
        """The steps (outside :attr:`unread`) with zero rows for ``scratchpad``."""
        zero = self.always
        for slot, steps in self.words:
            if int(scratchpad[slot]) <= 0:
                zero = zero | steps
        return zero


class _PerCall(Exception):
    """Raised by :func:`_no_values`: the operator reads a per-call value."""


def _no_values(expr: Affine) -> int:
    raise _PerCall(expr)


#: Where the lean loop finds an operand's elements, worked out at load:
#:
#: - ``("arena", dtype, first, end, shape)``: a contiguous run at a fixed
#:   offset of a buffer in the arena (not a weight read widened), in elements
#:   of the whole arena seen as ``dtype``;
#: - ``("kept", name)``: the whole of weight ``name`` as the device views
#:   give it: its decoded copy when kept, else its stored values;
#: - ``("span", name, first, end, shape)``: a contiguous run at a fixed offset
#:   of buffer ``name`` (a weight, an input or output buffer);
#: - ``("run", name, slot, elements, shape)``: a contiguous run of ``name``
#:   starting at the element a scratchpad word holds this call;
#: - ``("walk", name, slot, offset, strides, shape)``: one strided walk over
#:   ``name`` that visits each element once, starting at ``offset`` plus the
#:   scratchpad word ``slot`` (when not None), ``strides`` in elements;
#: - ``("cut", whole, slot, size)``: an operand bounded on its first axis
#:   alone (a prompt chunk's valid rows): the first ``n`` of the ``size``
#:   rows of ``whole`` (one of the kinds above but "kept"), ``n`` the
#:   scratchpad word ``slot`` this call.
#:
#: An operand with other bounds, or any other layout, has none: it is read
#: and written through ``read``/``write`` each call.
_Operand = tuple[Any, ...]


def _injective(sizes: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether a walk visits no element twice (each stride clears the inner dims)."""
    reach = 0
    for stride, size in sorted((st, n) for n, st in zip(sizes, strides) if n > 1):
        if stride <= reach:
            return False
        reach += (size - 1) * stride
    return True


def _operand(
    h: Handle | None,
    spec: ImageSpec | None,
    places: Mapping[str, _Place],
    decodes: bool = False,
) -> _Operand | None:
    """How the lean loop finds ``h``'s elements (``_Operand``), or None.

    ``decodes``: the reader takes ``h`` decoded (``Operator.decoded``).
    """
    if h is None:
        return None
    if h.valid:  # bounded: its first axis alone, by a scratchpad word
        if decodes or set(h.valid) != {0}:
            return None
        whole = _operand(dataclasses.replace(h, valid={}), spec, places)
        slot = _slot(spec, h.valid[0])
        if whole is None or slot is None:
            return None
        return ("cut", whole, slot, h.shape[0])
    place = places.get(h.name)
    if (
        decodes
        and spec is not None
        and place is not None
        and place[5] not in (None, as_float32)
        and _whole(h, spec)
    ):
        return ("kept", h.name)
    shape = tuple(h.shape)
    layout = h.layout
    if layout.contiguous:
        start = layout.static_offset
        if start is not None or h.elements == 0:
            start = 0 if h.elements == 0 else start  # an empty run reads nothing
            assert start is not None
            if place is not None and place[0] == "arena" and place[5] is not as_float32:
                offset, itemsize = place[1], place[3].itemsize
                inside = start + h.elements <= place[2] // itemsize
                if offset % itemsize == 0 and inside:
                    first = offset // itemsize + start
                    return ("arena", place[3], first, first + h.elements, shape)
            return ("span", h.name, start, start + h.elements, shape)
        slot = _slot(spec, layout.start)
        if slot is None:
            return None
        return ("run", h.name, slot, h.elements, shape)
    # one walk over the buffer, moved per call by its start alone (no
    # per-call size, no walk of its own per id), asked of the layout's DMA
    # walks as every consumer asks a layout
    walks = layout.dma_walks(h.elements)
    if len(walks.walks) != 1 or walks.sized_per_call or walks.per_walk:
        return None
    offset, sizes, strides = walks.walks[0]
    if tuple(sizes) != shape or not _injective(sizes, strides):
        return None
    start = layout.start
    slot = None
    if not isinstance(start, int):
        slot = _slot(spec, start)
        if slot is None:
            return None
        offset -= offset_parts(start)[0]  # the word holds the whole start
    return ("walk", h.name, slot, offset, tuple(strides), shape)


def _slot(spec: ImageSpec | None, expr: Any) -> int | None:
    """The scratchpad word holding ``expr`` (a per-call expression), or None."""
    if spec is None or not isinstance(expr, Affine):
        return None
    return spec.slot_of_key.get(expr.key())


class FixedStep:
    """What a step reads, writes and runs as, where no call can change it.

    The operator, when it has no per-call field (``bind`` gives it back
    unchanged whatever the values), and where each operand's elements are
    (``_Operand``): a contiguous run at a fixed offset, or at the offset
    a scratchpad word holds, or one strided walk visiting each element once.
    The lean loop takes these instead of binding and locating them again
    each run; anything else is bound and read per call, as
    ``Recording.run_step`` does.
    """

    __slots__ = ("op", "inputs", "outputs")

    def __init__(
        self,
        step: Step,
        spec: ImageSpec | None = None,
        places: Mapping[str, _Place] | None = None,
    ) -> None:
        try:
            # bind takes a mapping or, as here, a device's evaluator
            no_values: Any = _no_values
            fixed = step.op.bind(no_values) is step.op
        except Exception:  # any error is raised again by the run, in its place
            fixed = False
        self.op = step.op if fixed else None
        if places is None:
            places = {} if spec is None else _places(spec)
        self.inputs = tuple(
            _operand(h, spec, places, step.op.decoded(index) is not None)
            for index, h in enumerate(step.inputs)
        )
        self.outputs = tuple(_operand(h, spec, places) for h in step.outputs)

    def run(self, step: Step, ev: Any, flats: _Flats) -> None:
        """Run ``step`` as ``Recording.run_step`` does: reads, kernel, writes.

        The same values, bytes and errors; an operand outside its buffer is
        left to ``read``/``write``, which say which elements.
        """
        op = self.op if self.op is not None else step.op.bind(ev)
        args: list[np.ndarray | None] = []
        for h, where in zip(step.inputs, self.inputs):
            if h is None:
                args.append(None)
                continue
            if where is not None:
                if where[0] == "kept":  # the whole weight, decoded if kept
                    args.append(flats.views.decoded(where[1]))
                    continue
                found = _view(where, flats)
                if found is not None:
                    # a walk is gathered into a contiguous copy, as read() does
                    args.append(found.copy() if _walks(where) else found)
                    continue
            args.append(read(h, ev, flats.views))  # else read() says which elements
        result = op.reference(*args)  # type: ignore[arg-type]
        results = result if isinstance(result, tuple) else (result,)
        if len(results) != len(step.outputs):
            raise TypeError(
                f"{type(op).__name__}.reference returned {len(results)} arrays "
                f"for {len(step.outputs)} outputs"
            )
        for h, where, r in zip(step.outputs, self.outputs, results):
            r = np.asarray(r)
            target = None if where is None else _view(where, flats)
            if target is not None and where is not None and where[0] == "cut":
                if r.shape == tuple(h.shape):  # the whole shape: this call's rows
                    r = r[: target.shape[0]]
            if target is None:
                cut = bounded(h, ev)
                if r.shape == tuple(h.shape) and any(c != slice(None) for c in cut):
                    r = r[cut]
                write(h, ev, flats.views, r)
                continue
            if r.shape != target.shape:
                raise ValueError(
                    f"{h!r} takes shape {list(target.shape)} this call, got "
                    f"{list(r.shape)}"
                )
            target[...] = r.astype(target.dtype, copy=False)


def _view(where: _Operand, flats: _Flats) -> np.ndarray | None:
    """An operand's elements this call (a view; a walk's strided), or None
    when outside its buffer or its bound (``read``/``write`` then say what)."""
    kind = where[0]
    if kind == "cut":
        _, whole, slot, size = where
        n = int(flats.words[slot])
        found = _view(whole, flats)
        return found[:n] if found is not None and 0 <= n <= size else None
    if kind == "arena" or kind == "span":
        elements = flats.typed(where[1]) if kind == "arena" else flats[where[1]]
        if where[3] > elements.size:
            return None
        return elements[where[2] : where[3]].reshape(where[4])
    return _located(where, flats)


def _walks(where: _Operand) -> bool:
    """Whether the operand is a strided walk (read as a contiguous copy)."""
    return where[0] == "walk" or (where[0] == "cut" and _walks(where[1]))


def _located(where: _Operand, flats: _Flats) -> np.ndarray | None:
    """A per-call operand's elements this call (a view), or None when outside
    its buffer (``read``/``write`` then say which elements)."""
    if where[0] == "run":
        _, name, slot, count, shape = where
        elements = flats[name]
        first = int(flats.words[slot])
        if first < 0 or first + count > elements.size:
            return None
        return elements[first : first + count].reshape(shape)
    _, name, slot, offset, strides, shape = where
    elements = flats[name]
    if slot is not None:
        offset += int(flats.words[slot])
    last = offset + sum((n - 1) * st for n, st in zip(shape, strides))
    if offset < 0 or last >= elements.size:
        return None
    size = elements.itemsize
    return np.ndarray(
        shape,
        elements.dtype,
        buffer=elements,
        offset=offset * size,
        strides=tuple(st * size for st in strides),
    )


class _Flats(dict[str, np.ndarray]):
    """Each buffer's device view, flat, made once a run on first use.

    Also the run's scratchpad words, and the arena seen as each dtype.
    """

    def __init__(self, views: DeviceViews, words: np.ndarray | None = None) -> None:
        super().__init__()
        self.views = views
        self.words = words if words is not None else np.zeros(0, np.int32)
        self._typed: dict[np.dtype, np.ndarray] = {}

    def __missing__(self, name: str) -> np.ndarray:
        flat = self[name] = self.views[name].reshape(-1)
        return flat

    def typed(self, dtype: np.dtype) -> np.ndarray:
        """The whole arena as ``dtype`` elements (a trailing partial one left out)."""
        found = self._typed.get(dtype)
        if found is None:
            arena = self.views.memory["arena"]
            whole = arena.size - arena.size % dtype.itemsize
            found = self._typed[dtype] = arena[:whole].view(dtype)
        return found


def execute(
    spec: ImageSpec,
    memory: Mapping[str, np.ndarray],
    scratchpad: np.ndarray,
    *,
    idle: frozenset[int] = frozenset(),
    poison: bool = False,
    feedback: np.ndarray | None = None,
    widen: Callable[..., np.ndarray] | None = None,
    program: RunProgram | None = None,
) -> None:
    """Run ``spec``'s steps on ``memory`` (device bytes by buffer key).

    ``memory`` maps ``"arena"``, ``"input:<name>"`` and ``"output:<name>"`` to
    ``uint8`` arrays. ``feedback`` is the scratchpad the Emit step writes.
    ``program`` is ``RunProgram(spec)``, prepared once per image by a caller
    running it often (made here when not given).

    Raises:
        RunError: A step failed; the message names the image and the step.
        StepCheckError: With ``check``, a step is outside its tolerance.
    """
    if program is None:
        program = RunProgram(spec)
    program.refresh(spec)
    views = DeviceViews(spec, memory, widen, program.places)
    ev = scratchpad_evaluator(spec, scratchpad)
    # the steps that do nothing this run: the host's idle ones, and those
    # the scratchpad's words give zero rows (read once, as the bounds are
    # the same words for every step)
    skip = idle | program.zero_rows(scratchpad)
    unread = program.unread
    if not poison and not spec.check and not unread:
        steps = [s for s in spec.steps if s.index not in skip]
        _run_steps(spec, steps, ev, _Flats(views, scratchpad), program.fixed)
        if spec.emit is not None and feedback is not None:
            _emit(spec, memory, views, scratchpad, feedback)
        return
    born, dead = program.born, program.dead
    for step in spec.steps:
        if poison:
            for placed in born.get(step.index, ()):
                _poison(memory, placed.offset, placed.nbytes)
        if step.index not in skip and (
            step.index not in unread or not _zero_rows(step, ev)
        ):
            inputs = None
            if spec.check:
                inputs = [
                    None if h is None else read(h, ev, views) for h in step.inputs
                ]
            try:
                Recording.run_step(step, ev, views)
            except RunError:
                raise
            except Exception as error:  # the device reports where it failed
                raise RunError(
                    f"{spec.name}: step {step.index} {type(step.op).__name__} "
                    f"failed: {error}"
                ) from error
            if spec.check:
                assert inputs is not None  # read above when checking
                _check(spec, step, ev, views, inputs)
        if poison:
            for placed in dead.get(step.index, ()):
                _poison(memory, placed.offset, placed.nbytes)
    if spec.emit is not None and feedback is not None:
        _emit(spec, memory, views, scratchpad, feedback)


def _run_steps(
    spec: ImageSpec,
    steps: list[Any],
    ev: Any,
    flats: _Flats,
    fixed: Mapping[int, FixedStep],
) -> None:
    """Run ``steps`` (none idle; no poison, no check): the loop above, lean.

    Each step by :meth:`FixedStep.run`: as ``Recording.run_step`` runs it,
    with what was fixed at load taken from there.
    """
    step = None
    try:
        for step in steps:
            fixed[step.index].run(step, ev, flats)
    except RunError:
        raise
    except Exception as error:  # the device reports where it failed
        assert step is not None
        raise RunError(
            f"{spec.name}: step {step.index} {type(step.op).__name__} failed: {error}"
        ) from error


def _check(
    spec: ImageSpec, step: Any, ev: Any, views: DeviceViews, inputs: list
) -> None:
    op = step.op.bind(ev)
    expected = op.reference(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    tolerance = op.tolerance(*[i for i in inputs if i is not None])
    for h, want in zip(step.outputs, expected):
        got = read(h, ev, views)
        want = np.asarray(want)
        if want.shape != got.shape:
            want = want[tuple(slice(0, n) for n in got.shape)]
        verdict = compare(got, want, tolerance)
        if not verdict:
            raise StepCheckError(
                f"{spec.name}: step {step.index} {type(step.op).__name__} wrote "
                f"{h!r} outside its tolerance: {verdict}"
            )


def _emit(
    spec: ImageSpec,
    memory: Mapping[str, np.ndarray],
    views: DeviceViews,
    scratchpad: np.ndarray,
    feedback: np.ndarray,
) -> None:
    """Run the Emit on the run's ``program`` argument, writing ``feedback``."""
    site = spec.emit
    assert site is not None
    raw = memory.get("program")
    if raw is None or raw.size == 0:
        raise RunError(
            f"{spec.name}: its Emit has no program; call emit_to(target) first"
        )
    ev = scratchpad_evaluator(spec, scratchpad)
    slots = []
    for name in slots_of(site):
        if name in site.carried:
            slots.append(int(scratchpad[spec.carried_slot(name)]))
        else:
            carried_name = name.rsplit(".", 1)[0]
            handle = spec.recording.carry[carried_name]
            assert isinstance(handle, Handle)
            slots.append(int(np.asarray(read(handle, ev, views)).reshape(-1)[0]))
    words, carried = run_emit(stored(raw), slots)
    feedback[: len(words)] = words
    feedback[len(words) : len(words) + len(carried)] = carried
