"""The Emit program: how a run computes the next run's scratchpad on the device.

A full-ELF version with carried values that loops ends in an Emit step. At
the end of a run it computes, from the carried values, the scratchpad of the
next run: each of the target version's words, and each carried value's next
value. Its program is integer data, composed on the host by :func:`compose`
once both versions' word tables exist, and :func:`run` is its pure-numpy
interpreter: the reference the device (or the emulator) must match.

Slots (the program's inputs), in :func:`slots_of` order:

1. one per carried value, in ``EmitSite.carried`` order, named by the value:
   its current value. A version with carried values reserves these
   scratchpad slots besides its words, so the device always knows them;
2. one per carried value whose next value is a handle's element (a sampled
   token), in ``EmitSite.handles`` order, named ``"<name>.made"``: the
   int32 the device made this run, which it reads from the handle's buffer.

Outputs: ``words[i]`` is the target's ``target_words[i]``; ``carried[j]`` is
the next value of ``EmitSite.carried[j]`` (the next run's carried slot).

Encoding (all int32). A header of :data:`HEADER` words::

    [MAGIC, VERSION, n_slots, n_words, n_carried, n_registers, n_instructions, 0]

then ``n_instructions`` instructions of :data:`WIDTH` words ``[op, dst, a, b,
imm]``. Registers ``r`` are int32, written once each (SSA)::

    LOAD        r[dst] = slot[a]
    CONST       r[dst] = imm
    ADD         r[dst] = r[a] + r[b]
    SUB         r[dst] = r[a] - r[b]
    ADDI        r[dst] = r[a] + imm
    MULI        r[dst] = r[a] * imm
    SHR         r[dst] = r[a] >> imm        (arithmetic: floor division by 2**imm)
    MAXI        r[dst] = max(r[a], imm)     (a clamp's lower bound)
    MINI        r[dst] = min(r[a], imm)     (a clamp's upper bound)
    STORE_WORD  words[dst] = r[a]
    STORE_CARRY carried[dst] = r[a]

Unused fields are 0. :func:`compose` proves with interval arithmetic that no
register leaves int32 for slots within the site's ranges (30-bit values
unless :attr:`EmitSite.ranges` narrows them), and :func:`run` checks every
result again at run time.

This module owns the public surface, the encoding and the interpreter
(:func:`run`, :func:`disassemble`). The composer behind :func:`emit_site` and
:func:`compose` (the ranges a recording's limits prove, and the builder that
proves each register within int32) is the private ``iron.core._emit_compose``,
which reads this module's encoding and so is imported when first called.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from enum import IntEnum
from typing import TYPE_CHECKING, Any

import numpy as np

from iron.core.percall import VALUE_MAX
from iron.core.words import INT32_MAX, INT32_MIN, Word

if TYPE_CHECKING:
    from iron.core.recording import Recording

__all__ = [
    "HEADER",
    "MAGIC",
    "VERSION",
    "WIDTH",
    "EmitSite",
    "NotCarriedError",
    "NotLoopableError",
    "Op",
    "compose",
    "disassemble",
    "emit_site",
    "made",
    "run",
    "slots_of",
]

#: The first header word of every Emit program (``"IRON"`` in ASCII).
MAGIC = 0x49524F4E
#: The encoding's version, the second header word.
VERSION = 1
#: Header words before the first instruction.
HEADER = 8
#: Words per instruction: ``[op, dst, a, b, imm]``.
WIDTH = 5


class Op(IntEnum):
    """An Emit instruction's operation (see the module docstring)."""

    LOAD = 1
    CONST = 2
    ADD = 3
    SUB = 4
    ADDI = 5
    MULI = 6
    SHR = 7
    MAXI = 8
    MINI = 9
    STORE_WORD = 10
    STORE_CARRY = 11


class NotCarriedError(ValueError):
    """The Emit needs a per-call value no carried value holds."""


class NotLoopableError(ValueError):
    """A target word is a derivation the device cannot compute."""


def made(name: str) -> str:
    """The slot holding the int32 the device made for carried value ``name``."""
    return f"{name}.made"


@dataclasses.dataclass(frozen=True)
class EmitSite:
    """What the runtime needs to place and feed a version's Emit program.

    Attributes:
        carried: The source version's carried value names, in slot order.
        handles: The carried values whose next value is a handle's element
            (read by the device from the handle's buffer), in slot order.
        program_symbol: The device symbol the program is written to.
        ranges: ``(slot, lo, hi)``: a slot's values lie in ``[lo, hi]``
            (from the recording's limits); any other slot lies in
            ``[0, 2**30)``. Used only to prove the program cannot overflow.

    Raises:
        ValueError: A handle or a range names no carried value, or a name
            repeats.
    """

    carried: tuple[str, ...]
    handles: tuple[str, ...] = ()
    program_symbol: str = "emit"
    ranges: tuple[tuple[str, int, int], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "carried", tuple(self.carried))
        object.__setattr__(self, "handles", tuple(self.handles))
        object.__setattr__(self, "ranges", tuple(tuple(r) for r in self.ranges))
        for what, names in (("carried", self.carried), ("handles", self.handles)):
            if len(set(names)) != len(names):
                raise ValueError(f"EmitSite.{what} repeats a name: {list(names)}")
        stray = [h for h in self.handles if h not in self.carried]
        if stray:
            raise ValueError(
                f"EmitSite.handles {stray} are not carried values "
                f"{list(self.carried)}; a handle feeds a carried value"
            )
        slots = set(slots_of(self))
        for slot, lo, hi in self.ranges:
            if slot not in slots:
                raise ValueError(
                    f"EmitSite.ranges names {slot!r}, which is no slot of "
                    f"{sorted(slots)}"
                )
            if lo > hi:
                raise ValueError(f"EmitSite.ranges: {slot} in [{lo}, {hi}] is empty")

    @property
    def slots(self) -> list[str]:
        """The program's input slots, in order (see :func:`slots_of`)."""
        return slots_of(self)

    def range_of(self, slot: str) -> tuple[int, int]:
        """The least and greatest value ``slot`` holds, both included."""
        for name, lo, hi in self.ranges:
            if name == slot:
                return lo, hi
        return 0, VALUE_MAX


def slots_of(site: EmitSite) -> list[str]:
    """The Emit program's input slots, in the order :func:`run` takes them.

    Each carried value's current value (named by the value), then each
    device-made value (``made(name)``, ``"token.made"``).
    """
    return [*site.carried, *(made(h) for h in site.handles)]


def emit_site(recording: Recording, *, program_symbol: str = "emit") -> EmitSite:
    """Describe ``recording``'s Emit: its carried values, handles and ranges.

    A carried value's range is narrowed by every limit on it alone (the
    views it indexes or bounds), so a program over ``8 * position`` with
    ``cache[position]`` is proven not to overflow. A value the device makes
    (a sampled token) is taken to keep the same limits, as the next run
    reads it through the same views; :func:`run` still checks it.

    Args:
        recording: The source version's recording.
        program_symbol: The device symbol the program is written to.

    Returns:
        The site: carried values in the recording's order, the ones a
        handle feeds, and the ranges its limits prove.
    """
    from iron.core._emit_compose import _emit_site

    return _emit_site(recording, program_symbol=program_symbol)


# -- composing ---------------------------------------------------------------


def compose(
    site: EmitSite,
    carry: Mapping[str, Any],
    target_words: Sequence[Word],
    target_parameters: Sequence[Any] = (),
) -> np.ndarray:
    """Compose the Emit program that starts a run of the target version.

    Each target word's expression is taken over the next values of the
    carried values (``carry``), which are expressions of the source's
    current carried values and of device-made values; so are the next
    carried values themselves.

    Args:
        site: The source version's Emit site.
        carry: Each carried value's next value: an expression of the
            source's per-call values, an int, or a handle (any object that
            is neither) whose element the device made (slot
            ``made(name)``).
        target_words: The target version's words, in its scratchpad order.
        target_parameters: The per-call values the target reads (names, or
            :class:`~iron.core.percall.PerCall` values); each must be carried.

    Returns:
        The program, a 1-D int32 array (encoding in the module docstring).

    Raises:
        NotCarriedError: A target word or parameter, or a next value, reads
            a per-call value no carried value holds.
        NotLoopableError: A target word is a derivation the device cannot
            compute.
        OverflowError: A constant, or a value some register may hold for
            slots within their ranges, does not fit int32.
        ValueError: ``carry`` does not match the site's carried values.
    """
    from iron.core._emit_compose import _compose

    return _compose(site, carry, target_words, target_parameters)


# -- running -------------------------------------------------------------------


def _fits(v: int) -> bool:
    return INT32_MIN <= v <= INT32_MAX


def _header(program: Any) -> tuple[np.ndarray, int, int, int, int, int]:
    code = np.asarray(program)
    if code.ndim != 1 or code.dtype.kind not in "iu" or code.size < HEADER:
        raise ValueError(
            f"an Emit program is a 1-D int32 array of at least {HEADER} words; "
            f"got {code.dtype} of shape {list(code.shape)}"
        )
    magic, version, n_slots, n_words, n_carried, n_regs, n_instr, _ = (
        int(v) for v in code[:HEADER]
    )
    if magic != MAGIC or version != VERSION:
        raise ValueError(
            f"not an Emit program of version {VERSION}: header starts "
            f"{magic:#x}, {version}; compose one with iron.core.emit.compose"
        )
    if code.size != HEADER + WIDTH * n_instr:
        raise ValueError(
            f"an Emit program of {n_instr} instructions has "
            f"{HEADER + WIDTH * n_instr} words; got {code.size}"
        )
    body = code[HEADER:].astype(np.int64).reshape(n_instr, WIDTH)
    return body, n_slots, n_words, n_carried, n_regs, n_instr


def disassemble(program: Any) -> list[str]:
    """The program's instructions as text, one a line (for reports and tests).

    Raises:
        ValueError: ``program`` is not an Emit program.
    """
    body, n_slots, n_words, n_carried, n_regs, _ = _header(program)
    lines = [f"; {n_slots} slots, {n_words} words, {n_carried} carried, {n_regs} regs"]
    for op, dst, a, b, imm in body.tolist():
        name = Op(op).name
        text = {
            Op.LOAD: f"r{dst} = slot[{a}]",
            Op.CONST: f"r{dst} = {imm}",
            Op.ADD: f"r{dst} = r{a} + r{b}",
            Op.SUB: f"r{dst} = r{a} - r{b}",
            Op.ADDI: f"r{dst} = r{a} + {imm}",
            Op.MULI: f"r{dst} = r{a} * {imm}",
            Op.SHR: f"r{dst} = r{a} >> {imm}",
            Op.MAXI: f"r{dst} = max(r{a}, {imm})",
            Op.MINI: f"r{dst} = min(r{a}, {imm})",
            Op.STORE_WORD: f"words[{dst}] = r{a}",
            Op.STORE_CARRY: f"carried[{dst}] = r{a}",
        }[Op(op)]
        lines.append(f"{name:<11} {text}")
    return lines


def _slot_values(
    slots: Mapping[str, int] | Sequence[int] | np.ndarray,
    site: EmitSite | None,
    n_slots: int,
) -> np.ndarray:
    if isinstance(slots, Mapping):
        if site is None:
            raise TypeError(
                "run() takes slots by name only with site= (which orders them); "
                "pass site=, or a sequence in slots_of(site) order"
            )
        names = slots_of(site)
        lacking = [n for n in names if n not in slots]
        if lacking:
            raise KeyError(
                f"the Emit reads slots {names}; no value is given for {lacking}"
            )
        given: Any = [slots[n] for n in names]
    else:
        given = slots
    values = np.asarray(given)
    if values.size == 0:
        values = values.astype(np.int64)
    if values.dtype == object:
        if not all(isinstance(v, (int, np.integer)) for v in values.flat):
            raise TypeError(f"Emit slots are integers; got {values.tolist()}")
        lo = min((int(v) for v in values.flat), default=0)
        hi = max((int(v) for v in values.flat), default=0)
    elif values.dtype.kind in "iu":
        lo = int(values.min()) if values.size else 0
        hi = int(values.max()) if values.size else 0
    else:
        raise TypeError(f"Emit slots are integers; got {values.dtype} values")
    if values.ndim == 0 or values.shape[0] != n_slots:
        raise ValueError(
            f"the Emit program reads {n_slots} slots; got values of shape "
            f"{list(values.shape)}"
        )
    if not (_fits(lo) and _fits(hi)):
        raise OverflowError(
            f"Emit slots are int32; got values in [{lo}, {hi}], outside "
            f"[{INT32_MIN}, {INT32_MAX}]"
        )
    return values.astype(np.int64)


def run(
    program: Any,
    slots: Mapping[str, int] | Sequence[int] | np.ndarray,
    *,
    site: EmitSite | None = None,
    check: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Run an Emit program as the device does: the reference interpreter.

    Args:
        program: A program from :func:`compose`.
        slots: The slots' values: by name (with ``site``), or in
            :func:`slots_of` order; an array of shape ``(n_slots, ...)``
            runs the program once per trailing index.
        site: The Emit site, to order slots given by name.
        check: Raise on an int32 overflow; else wrap as the device's int32
            arithmetic does.

    Returns:
        ``(words, carried)``: the next run's words and carried values, int32,
        of shapes ``(n_words, ...)`` and ``(n_carried, ...)``.

    Raises:
        OverflowError: A slot, or (with ``check``) a register, leaves int32.
        ValueError: ``program`` is not an Emit program, or the slots do not
            match it.
        TypeError: Slots are given by name without ``site``.
        KeyError: A slot given by name lacks a value.
    """
    body, n_slots, n_words, n_carried, n_regs, _ = _header(program)
    values = _slot_values(slots, site, n_slots)
    batch = values.shape[1:]
    regs = np.zeros((n_regs, *batch), dtype=np.int64)
    words = np.zeros((n_words, *batch), dtype=np.int64)
    carried = np.zeros((n_carried, *batch), dtype=np.int64)
    for k, (op, dst, a, b, imm) in enumerate(body.tolist()):
        if op == Op.STORE_WORD:
            words[dst] = regs[a]
            continue
        if op == Op.STORE_CARRY:
            carried[dst] = regs[a]
            continue
        if op == Op.LOAD:
            result = values[a]
        elif op == Op.CONST:
            result = np.full(batch, imm, dtype=np.int64)
        elif op == Op.ADD:
            result = regs[a] + regs[b]
        elif op == Op.SUB:
            result = regs[a] - regs[b]
        elif op == Op.ADDI:
            result = regs[a] + imm
        elif op == Op.MULI:
            result = regs[a] * imm
        elif op == Op.SHR:
            result = regs[a] >> imm
        elif op == Op.MAXI:
            result = np.maximum(regs[a], imm)
        elif op == Op.MINI:
            result = np.minimum(regs[a], imm)
        else:
            raise ValueError(f"Emit instruction {k} has no operation {op}")
        bad = (result < INT32_MIN) | (result > INT32_MAX)
        if np.any(bad):
            if check:
                value = int(np.asarray(result)[bad].flat[0])
                raise OverflowError(
                    f"Emit instruction {k} ({disassemble(program)[k + 1]}) gives "
                    f"{value}, outside int32; the device would wrap it: keep the "
                    f"carried values within the ranges the program was composed "
                    f"for"
                )
            result = (result - INT32_MIN) % (1 << 32) + INT32_MIN
        regs[dst] = result
    return words.astype(np.int32), carried.astype(np.int32)
