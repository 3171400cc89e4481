"""Composing the Emit program: a site's intervals, and instructions proven in int32.

Private to :mod:`iron.core.emit`, whose :func:`~iron.core.emit.emit_site` and
:func:`~iron.core.emit.compose` call in here and whose encoding (``Op``, the
header) this module writes. It owns the interval each carried value's slot
starts from (narrowed by the recording's limits), the builder that emits one
SSA register per instruction, shares identical ones and proves with interval
arithmetic that none leaves int32, and the composer that walks each target
word and each next carried value through it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from iron.core.emit import (
    MAGIC,
    VERSION,
    EmitSite,
    NotCarriedError,
    NotLoopableError,
    Op,
    _fits,
    made,
    slots_of,
)
from iron.core.percall import VALUE_MAX, Affine, Clamp, FloorDiv, Kind, PerCall
from iron.core.words import INT32_MAX, INT32_MIN, Word

if TYPE_CHECKING:
    from iron.core.recording import Recording

_SHIFT_MAX = 31  # an int32 shifted right by 31 or more is its sign


# -- the site ------------------------------------------------------------------


def _emit_site(recording: Recording, *, program_symbol: str) -> EmitSite:
    """The site of ``recording``'s Emit (see ``iron.core.emit.emit_site``)."""
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


# -- the builder ---------------------------------------------------------------


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


# -- composing -----------------------------------------------------------------


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


def _compose(
    site: EmitSite,
    carry: Mapping[str, Any],
    target_words: Sequence[Word],
    target_parameters: Sequence[Any],
) -> np.ndarray:
    """The Emit program over ``site`` (see ``iron.core.emit.compose``)."""
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


def _with(carry: Mapping[str, Any], env: Mapping[str, _Node]) -> str:
    return ", ".join(
        f"{n} = {carry[n] if not _device_made(carry[n]) else made(n)}" for n in env
    )
