"""Per-call values and the integer expressions built from them.

A graph's keyword-only ``body`` parameters annotated ``iron.Scratchpad[int]``
or ``iron.Carried[int]`` are *per-call values*: integers the host writes into
the image's scratchpad each call (or a previous run computes, for carried
ones). While ``body`` is recorded they have no value, so arithmetic on them
builds an :class:`Affine` expression: a sum of integer multiples of values,
clamps and floor divisions by powers of two, plus a constant. Using one where
Python needs a concrete ``bool`` or ``int`` raises :class:`PerCallValueError`,
so data-dependent control flow fails at record time instead of freezing one
call's value into the graph. Carried values (what a graph computes for its
own next call, ``iron.Carried`` and ``iron.carry``) are in
:mod:`iron.core.carry`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from numbers import Number
from typing import Annotated, Any, TypeVar

import numpy as np

__all__ = [
    "VALUE_BITS",
    "Affine",
    "Clamp",
    "FloorDiv",
    "Kind",
    "PerCall",
    "PerCallValueError",
    "Scratchpad",
    "clamp",
    "evaluate",
]

#: Per-call values are int32 scratchpad words of which 30 bits are used:
#: every value lies in ``[0, 2**VALUE_BITS)``.
VALUE_BITS = 30
VALUE_MAX = (1 << VALUE_BITS) - 1


class Kind(Enum):
    """Where a per-call value comes from each call."""

    SCRATCHPAD = "scratchpad"
    CARRIED = "carried"


T = TypeVar("T")

Scratchpad = Annotated[T, Kind.SCRATCHPAD.value]
"""A per-call value the host writes into the image's scratchpad each call.

Free per call, works under a full ELF, but cannot change a DMA size or
stride; 30 bits at most.
"""


class PerCallValueError(TypeError):
    """A per-call value was used where Python needs a concrete value."""


def _refuse(expr: object, use: str) -> PerCallValueError:
    return PerCallValueError(
        f"{expr} is computed per call and has no value while body is recorded, "
        f"so it cannot be used as {use}; use it in a view (x[:n], x[i]) or pass "
        f"it to a step, or make it a constructor argument if it is fixed"
    )


class _Expr:
    """Arithmetic shared by per-call values and their expressions."""

    __slots__ = ()

    def affine(self) -> Affine:  # pragma: no cover - overridden
        """Return this value or expression as an :class:`Affine` expression."""
        raise NotImplementedError

    def __add__(self, other: object) -> Affine | int:
        return self.affine()._add(other, 1)

    def __radd__(self, other: object) -> Affine | int:
        return self.affine()._add(other, 1)

    def __sub__(self, other: object) -> Affine | int:
        return self.affine()._add(other, -1)

    def __rsub__(self, other: object) -> Affine | int:
        a = self.affine()
        return Affine(tuple((t, -c) for t, c in a.terms), -a.const)._add(other, 1)

    def __neg__(self) -> Affine | int:
        return self.affine()._scale(-1)

    def __mul__(self, other: object) -> Affine | int:
        return self.affine()._scale(_int_operand(self, other, "*"))

    __rmul__ = __mul__

    def __floordiv__(self, other: object) -> Affine | int:
        k = _int_operand(self, other, "//")
        if k <= 0 or k & (k - 1):
            raise TypeError(
                f"{self} // {k}: a per-call value divides only by a positive "
                f"power of two on the device (a shift); got {k}: divide by a "
                f"power of two, or pass the quotient as a per-call value of its own"
            )
        if k == 1:
            return self.affine()._simplified()
        return Affine.atom(FloorDiv(self.affine(), k.bit_length() - 1))

    def __rshift__(self, other: object) -> Affine | int:
        return self // (1 << _int_operand(self, other, ">>"))

    def __bool__(self) -> bool:
        raise _refuse(self, "a bool (an if, while, and/or)")

    def __int__(self) -> int:
        raise _refuse(self, "an int")

    def __index__(self) -> int:
        raise _refuse(self, "an index")

    def __float__(self) -> float:
        raise _refuse(self, "a float")

    def __lt__(self, other: object) -> bool:
        raise _refuse(self, "one side of a comparison")

    __le__ = __gt__ = __ge__ = __lt__

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Expr):
            return self.affine().key() == other.affine().key()
        if isinstance(other, Number):
            raise _refuse(self, "one side of a comparison")
        # Not a number (None, Ellipsis, a string): never equal, and no value is
        # needed to know it, so ``x in (None, ...)`` and ``x == None`` work.
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash(self.affine().key())


def _int_operand(expr: object, other: object, op: str) -> int:
    if isinstance(other, bool) or not isinstance(other, int):
        what = "another per-call value" if isinstance(other, _Expr) else repr(other)
        raise TypeError(
            f"{expr} {op} {what}: a per-call value combines with Python ints only "
            f"(the device evaluates affine expressions, not products of values)"
        )
    return other


@dataclasses.dataclass(frozen=True, eq=False)
class PerCall(_Expr):
    """One per-call value of a graph, as ``body`` sees it while recorded."""

    name: str
    kind: Kind = Kind.SCRATCHPAD
    dtype: Any = "int32"

    def affine(self) -> Affine:
        return Affine(((self.name, 1),), 0)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"PerCall({self.name!r}, {self.kind.value})"


@dataclasses.dataclass(frozen=True)
class Clamp:
    """``inner`` held to ``[lo, hi]``; a bound of None is none."""

    inner: Affine
    lo: int | None
    hi: int | None

    def __str__(self) -> str:
        return f"clamp({self.inner}, {self.lo}, {self.hi})"


@dataclasses.dataclass(frozen=True)
class FloorDiv:
    """``inner // 2**shift``."""

    inner: Affine
    shift: int

    def __str__(self) -> str:
        inner = str(self.inner)
        if self.inner.terms and (len(self.inner.terms) > 1 or self.inner.const):
            inner = f"({inner})"
        return f"{inner} // {1 << self.shift}"


Atom = str | Clamp | FloorDiv


def _atom_key(atom: Atom) -> tuple[Any, ...]:
    if isinstance(atom, str):
        return (0, atom)
    if isinstance(atom, Clamp):
        # A bound of None keys as (), an int as (int,): keys stay sortable.
        lo = () if atom.lo is None else (atom.lo,)
        hi = () if atom.hi is None else (atom.hi,)
        return (1, atom.inner.key(), lo, hi)
    return (2, atom.inner.key(), atom.shift)


@dataclasses.dataclass(frozen=True, eq=False)
class Affine(_Expr):
    """An integer expression of per-call values: ``sum(coeff * atom) + const``.

    An atom is a per-call value's name, a :class:`Clamp` or a
    :class:`FloorDiv` of another expression. Terms are kept in a canonical
    order, so two expressions that are the same sum compare equal and share
    one scratchpad word.
    """

    terms: tuple[tuple[Atom, int], ...]
    const: int = 0

    @classmethod
    def atom(cls, atom: Atom) -> Affine:
        """Return the expression that is ``atom`` alone."""
        return cls(((atom, 1),), 0)

    def affine(self) -> Affine:
        return self

    def key(self) -> tuple[Any, ...]:
        """A hashable canonical form: equal keys are the same expression."""
        return (tuple((_atom_key(a), c) for a, c in self.terms), self.const)

    def _simplified(self) -> Affine | int:
        merged: dict[tuple[Any, ...], tuple[Atom, int]] = {}
        for atom, coeff in self.terms:
            k = _atom_key(atom)
            prev = merged.get(k, (atom, 0))[1]
            merged[k] = (atom, prev + coeff)
        terms = tuple(
            (atom, coeff)
            for k, (atom, coeff) in sorted(merged.items(), key=lambda kv: kv[0])
            if coeff
        )
        if not terms:
            return self.const
        return Affine(terms, self.const)

    def _add(self, other: object, sign: int) -> Affine | int:
        if isinstance(other, _Expr):
            o = other.affine()
            terms = self.terms + tuple((a, sign * c) for a, c in o.terms)
            return Affine(terms, self.const + sign * o.const)._simplified()
        k = _int_operand(self, other, "+" if sign > 0 else "-")
        return Affine(self.terms, self.const + sign * k)._simplified()

    def _scale(self, k: int) -> Affine | int:
        return Affine(
            tuple((a, c * k) for a, c in self.terms), self.const * k
        )._simplified()

    def names(self) -> frozenset[str]:
        """Every per-call value this expression reads, nested ones included."""
        out: set[str] = set()
        for atom, _ in self.terms:
            if isinstance(atom, str):
                out.add(atom)
            else:
                out |= atom.inner.names()
        return frozenset(out)

    def is_linear(self) -> bool:
        """Whether every atom is a plain value (no clamp, no division)."""
        return all(isinstance(a, str) for a, _ in self.terms)

    def range(self) -> tuple[int, int]:
        """The least and greatest value over every value in ``[0, 2**30)``."""
        lo = hi = self.const
        for atom, coeff in self.terms:
            a_lo, a_hi = _atom_range(atom)
            lo += min(coeff * a_lo, coeff * a_hi)
            hi += max(coeff * a_lo, coeff * a_hi)
        return lo, hi

    def clamp(self, lo: int | None = None, hi: int | None = None) -> Affine | int:
        """Hold this expression to ``[lo, hi]`` (see :func:`clamp`)."""
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"clamp({self}, {lo}, {hi}): lo is above hi")
        least, most = self.range()
        if lo is not None and most <= lo:
            return lo
        if hi is not None and least >= hi:
            return hi
        if (lo is None or least >= lo) and (hi is None or most <= hi):
            return self
        return Affine.atom(Clamp(self, lo, hi))

    def evaluate(self, values: Mapping[str, int]) -> int:
        """The expression's value for one call's ``values``.

        Raises:
            KeyError: A value the expression reads is not given.
        """
        total = self.const
        for atom, coeff in self.terms:
            total += coeff * _evaluate_atom(atom, values)
        return total

    def __str__(self) -> str:
        parts: list[str] = []
        for atom, coeff in self.terms:
            text = str(atom)
            # -(n // 4) leading would print as -n // 4, which is (-n) // 4.
            if isinstance(atom, FloorDiv) and (
                abs(coeff) != 1 or (coeff == -1 and not parts)
            ):
                text = f"({text})"
            if coeff == 1:
                parts.append(f"+ {text}")
            elif coeff == -1:
                parts.append(f"- {text}")
            else:
                parts.append(f"{'+' if coeff > 0 else '-'} {abs(coeff)} * {text}")
        if self.const:
            parts.append(f"{'+' if self.const > 0 else '-'} {abs(self.const)}")
        text = " ".join(parts)
        return text[2:] if text.startswith("+ ") else "-" + text[2:]

    def __repr__(self) -> str:
        return f"Affine({self})"


def _atom_range(atom: Atom) -> tuple[int, int]:
    if isinstance(atom, str):
        return 0, VALUE_MAX
    lo, hi = atom.inner.range()
    if isinstance(atom, FloorDiv):
        return lo >> atom.shift, hi >> atom.shift
    if atom.lo is not None:
        lo, hi = max(lo, atom.lo), max(hi, atom.lo)
    if atom.hi is not None:
        lo, hi = min(lo, atom.hi), min(hi, atom.hi)
    return lo, hi


def _evaluate_atom(atom: Atom, values: Mapping[str, int]) -> int:
    if isinstance(atom, str):
        return int(values[atom])
    inner = atom.inner.evaluate(values)
    if isinstance(atom, FloorDiv):
        return inner >> atom.shift
    if atom.lo is not None:
        inner = max(inner, atom.lo)
    if atom.hi is not None:
        inner = min(inner, atom.hi)
    return inner


def evaluate(
    expr: _Expr | int,
    values: Mapping[str, int] | Callable[[Affine], int],
) -> int:
    """Evaluate ``expr`` (or pass an int through) for one call.

    ``values`` maps each per-call value to its int; or it is a function from
    a whole expression to its value, as a device that reads each expression
    from a scratchpad word evaluates it.
    """
    if isinstance(expr, _Expr):
        if callable(values) and not isinstance(values, Mapping):
            return int(values(expr.affine()))
        return expr.affine().evaluate(values)
    return int(expr)


def check_values(
    who: str,
    declared: Iterable[str],
    values: Mapping[str, Any],
    *,
    needed: Iterable[str] | None = None,
) -> dict[str, int]:
    """Check one call's per-call ``values`` and return them as ints.

    Args:
        who: What takes them (a graph or a version), for messages.
        declared: Every per-call value the graph's body declares.
        values: The values given (defaults already merged in).
        needed: The values this call must have; by default all declared.

    Raises:
        TypeError: A value is unknown, missing, or not an int.
        ValueError: A value is outside ``[0, 2**30)``.
    """
    declared = set(declared)
    unknown = sorted(set(values) - declared)
    if unknown:
        raise TypeError(
            f"{who}: {unknown} are not per-call values; body takes {sorted(declared)}"
        )
    missing = sorted(set(declared if needed is None else needed) - set(values))
    if missing:
        raise TypeError(f"{who}: per-call values {missing} missing")
    checked = {}
    for name, v in values.items():
        if isinstance(v, (bool, float)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{who}: per-call {name}={v!r} is not an int")
        if not 0 <= int(v) <= VALUE_MAX:
            raise ValueError(
                f"{who}: per-call {name}={v} is outside [0, 2**30): a scratchpad "
                f"word holds 30 bits"
            )
        checked[name] = int(v)
    return checked


def clamp(
    x: PerCall | Affine, lo: int | None = None, hi: int | None = None
) -> Affine | int:
    """Return a per-call value's expression ``x`` held to ``[lo, hi]``.

    A bound of None is no bound. Where ``x`` can never reach the range (every
    per-call value lies in ``[0, 2**30)``) the nearer bound itself is
    returned, and where it never leaves it, ``x`` is.

    Raises:
        TypeError: ``x`` is not a per-call value or an expression of them.
        ValueError: ``lo`` is above ``hi``.
    """
    if not isinstance(x, _Expr):
        raise TypeError(
            f"clamp takes a per-call value or an expression of them, got {x!r}; "
            f"for a plain int use min/max"
        )
    return x.affine().clamp(lo, hi)
