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

This module is the Emit's one home in iron-core: the site (:func:`emit_site`,
the ranges a recording's limits prove), the composer (:func:`compose`, with a
builder that emits one SSA register per instruction, shares identical ones and
proves each within int32), the encoding and the interpreter (:func:`run`,
:func:`disassemble`). The NPU design that runs a program is the runtime's
(``iron.runtime.npu.designs.emit``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from enum import IntEnum
from typing import TYPE_CHECKING, Any

import numpy as np

from iron.core.percall import VALUE_MAX, Affine, Clamp, FloorDiv, Kind, PerCall
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
    "for_target",
    "made",
    "program_for",
    "run",
    "slots_of",
    "stored",
]

#: The first header word of every Emit program (``"IRON"`` in ASCII).
MAGIC = 0x49524F4E
#: The encoding's version, the second header word.
VERSION = 1
#: Header words before the first instruction.
HEADER = 8
#: Words per instruction: ``[op, dst, a, b, imm]``.
WIDTH = 5

_SHIFT_MAX = 31  # an int32 shifted right by 31 or more is its sign


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
    carried = tuple(v.name for v in recording.values if v.kind is Kind.CARRIED)
    handles = tuple(n for n in carried if _device_made(recording.carry.get(n)))
    ranges = {n: (0, VALUE_MAX) for n in carried}
    for limit in recording.limits:
        expr = limit.expr
        if len(expr.terms) != 1 or not isinstance(expr.terms[0][0], str):
            continue
        (name, coeff), const = expr.terms[0], expr.const
        if name not in ranges or coeff == 0:
            continue
        # limit.lo <= coeff * name + const <= limit.hi - 1
        a, b = limit.lo - const, limit.hi - 1 - const
        if coeff < 0:
            a, b, coeff = -b, -a, -coeff
        lo, hi = ranges[name]
        lo, hi = max(lo, -(-a // coeff)), min(hi, b // coeff)
        if lo <= hi:
            ranges[name] = (lo, hi)
    narrowed = [
        (n, lo, hi) for n, (lo, hi) in ranges.items() if (lo, hi) != (0, VALUE_MAX)
    ]
    narrowed += [(made(n), lo, hi) for n, lo, hi in narrowed if n in handles]
    return EmitSite(carried, handles, program_symbol, tuple(narrowed))


def for_target(site: EmitSite, target: Recording) -> EmitSite:
    """``site`` with each device-made value limited as ``target``'s views limit it.

    A sampled token the source never indexes by is still bounded where the
    target reads it (``embed[token]``), so a program composed over the
    returned site is proven not to overflow over the values the target can
    take; :func:`run` checks them too.

    Args:
        site: The source version's Emit site.
        target: The recording of the version the Emit starts.
    """
    ranges = {name: (lo, hi) for name, lo, hi in site.ranges}
    for name, lo, hi in emit_site(target).ranges:
        if name in site.handles:
            key = made(name)
            old_lo, old_hi = ranges.get(key, (lo, hi))
            ranges[key] = (max(lo, old_lo), min(hi, old_hi))
    return dataclasses.replace(
        site, ranges=tuple((n, lo, hi) for n, (lo, hi) in ranges.items())
    )


# -- composing ---------------------------------------------------------------


def program_for(
    site: EmitSite,
    source: Recording,
    target: Recording,
    target_words: Sequence[Word],
    target_parameters: Sequence[str],
    target_name: str | None = None,
) -> np.ndarray:
    """The program that ends a run of ``source`` and starts one of ``target``.

    Composed (:func:`compose`) over ``site`` with each device-made value
    limited as ``target``'s views limit it (:func:`for_target`).

    Args:
        site: The source version's Emit site.
        source: The source version's recording.
        target: The recording of the version the Emit starts.
        target_words: The target version's words, in its scratchpad order.
        target_parameters: The names of the per-call values the target reads.
        target_name: The target version's name, for messages.

    Raises:
        ValueError: ``target`` gathers by ids the device made, whose
            addresses no carried value holds, or the two carry other values.
        NotCarriedError: ``target`` reads a value no carried value holds.
        NotLoopableError: A target word cannot be computed on the device.
    """
    if target.addresses:
        tables = sorted({table for table, _, _ in target.addresses.values()})
        raise ValueError(
            f"{target.name}: an Emit cannot start it: its gather by ids "
            f"the device made reads the address of {tables}, which the host "
            f"writes each call and no carried value holds"
        )
    if tuple(target.carry) != tuple(source.carry):
        raise ValueError(
            f"{target_name or target.name} carries {list(target.carry)}, not "
            f"{list(source.carry)}: they are not versions of one graph"
        )
    return compose(
        for_target(site, target), source.carry, target_words, target_parameters
    )


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
    missing = [c for c in site.carried if c not in carry]
    extra = [c for c in carry if c not in site.carried]
    if missing or extra:
        raise ValueError(
            f"the Emit carries {list(site.carried)}, but carry gives "
            f"{list(carry)}: compose with the carry of the version the site "
            f"was made for"
        )
    for c in site.carried:
        if _device_made(carry[c]) != (c in site.handles):
            kind = "a handle's element" if c in site.handles else "an expression"
            raise ValueError(
                f"the Emit site takes carried {c}'s next value as {kind}, but "
                f"carry gives {_show(carry[c])}: make the site from the same "
                f"recording"
            )
    b = _Builder(site)
    nexts: dict[str, _Node] = {}

    def current(name: str) -> _Node:
        return b.load(name)

    def next_of(name: str) -> _Node:
        if name not in nexts:
            nxt = carry[name]
            b.what = f"carried {name}"
            if isinstance(nxt, PerCall):
                nxt = nxt.affine()
            if isinstance(nxt, Affine):
                b.what = f"carried {name} = {nxt}"
                for n in sorted(nxt.names()):
                    if n not in site.carried:
                        raise _refuse(f"carried {name} = {nxt}", n)
                nexts[name] = b.affine(nxt, current)
            elif isinstance(nxt, (int, np.integer)):
                nexts[name] = b.const(int(nxt))
            else:
                nexts[name] = b.load(made(name))
        return nexts[name]

    for i, w in enumerate(target_words):
        if not w.loopable:
            raise NotLoopableError(
                f"{w.symbol} = {w.expr} cannot be computed on the device: "
                f"{w.why_not}; a loop needs every word from its Emit, so write "
                f"this version's values from the host (call it, not a CarriedLoop)"
            )
        for n in sorted(w.expr.names()):
            if n not in carry:
                raise _refuse(f"{w.symbol} = {w.expr}", n)
        env: dict[str, _Node] = {n: next_of(n) for n in sorted(w.expr.names())}
        b.what = f"word {w.symbol} = {w.expr} (with {_with(carry, env)})"
        b.store(Op.STORE_WORD, i, b.affine(w.expr, env.__getitem__))
    for p in target_parameters:
        name = p if isinstance(p, str) else p.name
        if name not in carry:
            raise _refuse("the target version", name)
    for j, c in enumerate(site.carried):
        b.store(Op.STORE_CARRY, j, next_of(c))
    header = [
        MAGIC,
        VERSION,
        len(slots_of(site)),
        len(target_words),
        len(site.carried),
        b.registers,
        len(b.code),
        0,
    ]
    flat = header + [v for instr in b.code for v in instr]
    return np.asarray(flat, dtype=np.int32)


# -- the builder: one register per instruction, each proven within int32 ---


@dataclasses.dataclass(frozen=True)
class _Node:
    """A register, the values it may hold, and what it computes (for errors)."""

    reg: int
    lo: int
    hi: int
    text: str


def _paren(node: _Node) -> str:
    return node.text if " " not in node.text else f"({node.text})"


class _Builder:
    """Emits instructions, one register each, sharing identical ones."""

    def __init__(self, site: EmitSite) -> None:
        self.site = site
        self.slot_index = {s: i for i, s in enumerate(slots_of(site))}
        self.code: list[tuple[int, int, int, int, int]] = []
        self.memo: dict[tuple[int, int, int, int], _Node] = {}
        self.registers = 0
        self.what = ""

    def _constant(self, k: int, role: str) -> int:
        if not _fits(k):
            raise OverflowError(
                f"the Emit's {self.what}: {role} {k} does not fit int32 "
                f"[{INT32_MIN}, {INT32_MAX}]; use a smaller constant"
            )
        return k

    def _new(
        self, op: Op, a: int, b: int, imm: int, lo: int, hi: int, text: str
    ) -> _Node:
        key = (int(op), a, b, imm)
        if key in self.memo:
            return self.memo[key]
        if not (_fits(lo) and _fits(hi)):
            raise OverflowError(
                f"the Emit's {self.what}: {text} may reach [{lo}, {hi}], outside "
                f"int32 [{INT32_MIN}, {INT32_MAX}], for slots in their ranges; "
                f"bound the carried values (a view they index limits them) or use "
                f"smaller multiples"
            )
        node = _Node(self.registers, lo, hi, text)
        self.code.append((int(op), node.reg, a, b, imm))
        self.registers += 1
        self.memo[key] = node
        return node

    def store(self, op: Op, index: int, node: _Node) -> None:
        self.code.append((int(op), index, node.reg, 0, 0))

    # -- nodes ------------------------------------------------------------------

    def load(self, slot: str) -> _Node:
        lo, hi = self.site.range_of(slot)
        return self._new(Op.LOAD, self.slot_index[slot], 0, 0, lo, hi, slot)

    def const(self, k: int) -> _Node:
        k = self._constant(k, "constant")
        return self._new(Op.CONST, 0, 0, k, k, k, str(k))

    def add(self, x: _Node, y: _Node, sign: int) -> _Node:
        if sign > 0:
            lo, hi, text = x.lo + y.lo, x.hi + y.hi, f"{x.text} + {y.text}"
            return self._new(Op.ADD, x.reg, y.reg, 0, lo, hi, text)
        lo, hi, text = x.lo - y.hi, x.hi - y.lo, f"{x.text} - {_paren(y)}"
        return self._new(Op.SUB, x.reg, y.reg, 0, lo, hi, text)

    def addi(self, x: _Node, k: int) -> _Node:
        k = self._constant(k, "constant")
        text = f"{x.text} {'+' if k >= 0 else '-'} {abs(k)}"
        return self._new(Op.ADDI, x.reg, 0, k, x.lo + k, x.hi + k, text)

    def muli(self, x: _Node, k: int) -> _Node:
        k = self._constant(k, "multiple")
        ends = (x.lo * k, x.hi * k)
        return self._new(
            Op.MULI, x.reg, 0, k, min(ends), max(ends), f"{k} * {_paren(x)}"
        )

    def shr(self, x: _Node, shift: int) -> _Node:
        imm = min(shift, _SHIFT_MAX)
        text = f"{_paren(x)} // {1 << shift}"
        return self._new(Op.SHR, x.reg, 0, imm, x.lo >> shift, x.hi >> shift, text)

    def clamp(self, x: _Node, lo: int | None, hi: int | None) -> _Node:
        # A bound below int32 never binds an int32, nor one above it an
        # upper bound; one that always binds is the result and must fit.
        node = x
        if lo is not None and lo >= INT32_MIN:
            lo = self._constant(lo, "clamp bound")
            text = f"max({node.text}, {lo})"
            node = self._new(
                Op.MAXI, node.reg, 0, lo, max(node.lo, lo), max(node.hi, lo), text
            )
        if hi is not None and hi <= INT32_MAX:
            hi = self._constant(hi, "clamp bound")
            text = f"min({node.text}, {hi})"
            node = self._new(
                Op.MINI, node.reg, 0, hi, min(node.lo, hi), min(node.hi, hi), text
            )
        return node

    # -- expressions ----------------------------------------------------------------

    def affine(self, expr: Affine, env: Callable[[str], _Node]) -> _Node:
        acc: _Node | None = None
        for atom, coeff in expr.terms:
            term = self.atom(atom, env)
            if acc is not None and coeff in (1, -1):
                acc = self.add(acc, term, coeff)
                continue
            if coeff != 1:
                term = self.muli(term, coeff)
            acc = term if acc is None else self.add(acc, term, 1)
        if acc is None:
            return self.const(expr.const)
        return self.addi(acc, expr.const) if expr.const else acc

    def atom(self, atom: Any, env: Callable[[str], _Node]) -> _Node:
        if isinstance(atom, str):
            return env(atom)
        inner = self.affine(atom.inner, env)
        if isinstance(atom, FloorDiv):
            return self.shr(inner, atom.shift)
        if isinstance(atom, Clamp):
            return self.clamp(inner, atom.lo, atom.hi)
        raise NotLoopableError(
            f"the Emit's {self.what}: {atom!r} is no sum, multiple, shift or "
            f"clamp, so the device cannot compute it; write it from the host"
        )


def _show(x: Any) -> str:
    if isinstance(x, (Affine, PerCall, int, np.integer)):
        return str(x)
    name = getattr(x, "name", None)
    return f"a handle of {name}" if name else f"a {type(x).__name__}"


def _device_made(nxt: Any) -> bool:
    return not isinstance(nxt, (Affine, PerCall, int, np.integer))


def _refuse(who: str, name: str) -> NotCarriedError:
    return NotCarriedError(
        f"{who} reads {name}, which no carried value holds: the device cannot "
        f"know it; make {name} iron.Carried or write it from the host"
    )


def _with(carry: Mapping[str, Any], env: Mapping[str, _Node]) -> str:
    return ", ".join(
        f"{n} = {carry[n] if not _device_made(carry[n]) else made(n)}" for n in env
    )


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


def stored(buffer: Any) -> np.ndarray:
    """The program at the start of ``buffer``, cut to the length its header gives.

    ``buffer`` holds a program as a device buffer does: int32 words or their
    bytes, possibly padded past the program's end.

    Raises:
        ValueError: ``buffer`` holds no Emit program.
    """
    raw = np.asarray(buffer)
    words = raw.view(np.int32) if raw.dtype == np.uint8 else raw.astype(np.int32)
    if words.ndim != 1 or words.size < HEADER:
        raise ValueError(
            f"a buffer holding an Emit program has at least {HEADER} int32 words; "
            f"got {words.size}"
        )
    program = words[: HEADER + WIDTH * max(int(words[6]), 0)]
    _header(program)  # raises unless it is one
    return program


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
