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

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
from ml_dtypes import bfloat16

from iron.core.access import bounded, read, write
from iron.core.emit import run as run_emit
from iron.core.emit import slots_of, stored
from iron.core.handle import Handle
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
        widen: Callable[[int, int, tuple[int, ...]], np.ndarray] | None = None,
    ) -> None:
        self.spec = spec
        self.memory = memory
        self.widen = widen
        self.buffers = spec.recording.buffers
        self._cache: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        view = self._cache.get(name)
        if view is not None:
            return view
        buffer = self.buffers[name]
        place = self.spec.placement.get(name)
        if place is None:
            raise RunError(f"{self.spec.name}: buffer {name} has no placement")
        key = "arena" if place.where == "arena" else f"{place.where}:{name}"
        if (
            self.widen is not None
            and buffer.role == "weight"
            and place.where == "arena"
            and np.dtype(buffer.dtype) == np.dtype(bfloat16)
        ):
            # weights never change during a run: their float32 values, kept
            view = self.widen(place.offset, buffer.nbytes, buffer.shape)
            self._cache[name] = view
            return view
        raw = self.memory[key][place.offset : place.offset + buffer.nbytes]
        view = raw.view(buffer.dtype).reshape(buffer.shape)
        self._cache[name] = view
        return view

    def __iter__(self) -> Iterator[str]:
        return iter(self.spec.placement)

    def __len__(self) -> int:
        return len(self.spec.placement)


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
        #: Each step's operands and operator as far as they are fixed at load.
        self.fixed = {step.index: FixedStep(step) for step in spec.steps}

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


#: A handle fixed at load: its buffer, first and end element, shape.
_Span = tuple[str, int, int, tuple[int, ...]]


def _span(h: Handle | None) -> _Span | None:
    """Where ``h``'s elements are, when no call can move or bound them."""
    if h is None or not h.layout.contiguous or h.valid:
        return None
    start = h.layout.static_offset
    if start is None:
        return None
    if h.elements == 0:
        start = 0  # an empty handle reads nothing, wherever it starts
    return (h.name, start, start + h.elements, tuple(h.shape))


class FixedStep:
    """What a step reads, writes and runs as, where no call can change it.

    The operator, when it has no per-call field (``bind`` gives it back
    unchanged whatever the values), and each operand that is a contiguous
    run at a fixed offset without bounds, as its element span. The lean
    loop takes these instead of binding and locating them again each run;
    anything else is bound and read per call, as ``Recording.run_step`` does.
    """

    __slots__ = ("op", "inputs", "outputs")

    def __init__(self, step: Step) -> None:
        try:
            # bind takes a mapping or, as here, a device's evaluator
            no_values: Any = _no_values
            fixed = step.op.bind(no_values) is step.op
        except Exception:  # any error is raised again by the run, in its place
            fixed = False
        self.op = step.op if fixed else None
        self.inputs = tuple(_span(h) for h in step.inputs)
        self.outputs = tuple(_span(h) for h in step.outputs)

    def run(self, step: Step, ev: Any, flats: _Flats) -> None:
        """Run ``step`` as ``Recording.run_step`` does: reads, kernel, writes.

        The same values, bytes and errors; an operand outside its buffer is
        left to ``read``/``write``, which say which elements.
        """
        views = flats.views
        op = self.op if self.op is not None else step.op.bind(ev)
        args: list[np.ndarray | None] = []
        for h, span in zip(step.inputs, self.inputs):
            if h is None:
                args.append(None)
                continue
            if span is not None:
                name, first, end, shape = span
                elements = flats[name]
                if end <= elements.size:  # else read() says which elements
                    args.append(elements[first:end].reshape(shape))
                    continue
            args.append(read(h, ev, views))
        result = op.reference(*args)  # type: ignore[arg-type]
        results = result if isinstance(result, tuple) else (result,)
        if len(results) != len(step.outputs):
            raise TypeError(
                f"{type(op).__name__}.reference returned {len(results)} arrays "
                f"for {len(step.outputs)} outputs"
            )
        for h, span, r in zip(step.outputs, self.outputs, results):
            r = np.asarray(r)
            if span is None:
                cut = bounded(h, ev)
                if r.shape == tuple(h.shape) and any(c != slice(None) for c in cut):
                    r = r[cut]
                write(h, ev, views, r)
                continue
            name, first, end, shape = span
            elements = flats[name]
            if end > elements.size:
                write(h, ev, views, r)
                continue
            target = elements[first:end].reshape(shape)
            if r.shape != target.shape:
                raise ValueError(
                    f"{h!r} takes shape {list(target.shape)} this call, got "
                    f"{list(r.shape)}"
                )
            target[...] = r.astype(elements.dtype, copy=False)


class _Flats(dict[str, np.ndarray]):
    """Each buffer's device view, flat, made once a run on first use."""

    def __init__(self, views: DeviceViews) -> None:
        super().__init__()
        self.views = views

    def __missing__(self, name: str) -> np.ndarray:
        flat = self[name] = self.views[name].reshape(-1)
        return flat


def execute(
    spec: ImageSpec,
    memory: Mapping[str, np.ndarray],
    scratchpad: np.ndarray,
    *,
    idle: frozenset[int] = frozenset(),
    poison: bool = False,
    feedback: np.ndarray | None = None,
    widen: Callable[[int, int, tuple[int, ...]], np.ndarray] | None = None,
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
    views = DeviceViews(spec, memory, widen)
    ev = scratchpad_evaluator(spec, scratchpad)
    # the steps that do nothing this run: the host's idle ones, and those
    # the scratchpad's words give zero rows (read once, as the bounds are
    # the same words for every step)
    skip = idle | program.zero_rows(scratchpad)
    unread = program.unread
    if not poison and not spec.check and not unread:
        steps = [s for s in spec.steps if s.index not in skip]
        _run_steps(spec, steps, ev, views, program.fixed)
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
    views: DeviceViews,
    fixed: Mapping[int, FixedStep],
) -> None:
    """Run ``steps`` (none idle; no poison, no check): the loop above, lean.

    Each step by :meth:`FixedStep.run`: as ``Recording.run_step`` runs it,
    with what was fixed at load taken from there.
    """
    flats = _Flats(views)
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
