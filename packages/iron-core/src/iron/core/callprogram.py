"""A version's per-call work as one flat program, prepared at load.

Each call of a compiled version checks its per-call values, checks the
ranges its views need (``Recording.limits``), evaluates the scratchpad words
and the carried slots, and finds the steps its bounds idle. Done the general
way, every one of those walks its own expressions: 35 limits and 7 words for
a 16-layer Llama decode step, most of them the same few expressions. A
:class:`CallProgram` holds every distinct expression once (each a list of
``(atom, coefficient)`` rows over the distinct atoms, the atoms evaluated
once a call), the limits of one expression merged to the range all of them
allow, and which steps each bound idles, so a call evaluates each atom and
each row once.

It gives what the general functions give, value for value and error for
error: where a value, a limit or a word is out of line, the general function
(:func:`~iron.core.percall.check_values`, the limits' checks in their order,
:func:`~iron.core.words.evaluate_words`) is run to raise its own error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import numpy as np

from iron.core.percall import VALUE_MAX, Affine, Atom, check_values
from iron.core.plan import IdleProgram
from iron.core.recording import Recording
from iron.core.words import INT32_MAX, INT32_MIN, Word, evaluate_words

__all__ = ["Call", "CallProgram"]

#: One expression as a flat row: ``(atom index, coefficient)`` pairs, constant.
_Row = tuple[tuple[tuple[int, int], ...], int]


@dataclasses.dataclass(frozen=True)
class Call:
    """What one call's values give.

    Attributes:
        values: The per-call values as ints, defaults merged in.
        scratchpad: The run's scratchpad: each word, then each carried slot.
        idle: For each image, the steps idle this call.
    """

    values: dict[str, int]
    scratchpad: np.ndarray
    idle: tuple[frozenset[int], ...]


class CallProgram:
    """A version's per-call work, prepared once and evaluated once per call.

    Args:
        who: The version's name, for messages.
        recording: The version's recording: the values it declares, those a
            call needs (``reads``), the ranges its views need (``limits``).
        words: The scratchpad words, in slot order.
        carried: The carried values whose slots follow the words, in order.
        idle: Each image's idle program.
    """

    def __init__(
        self,
        who: str,
        recording: Recording,
        words: Sequence[Word],
        carried: Sequence[str] = (),
        idle: Sequence[IdleProgram] = (),
    ) -> None:
        assert recording.signature is not None  # a Recording fills it in
        self.who = who
        self.recording = recording
        self.declared = recording.signature.declared
        self.defaults = {n: d for n, d in self.declared.items() if d is not None}
        self.names = frozenset(self.declared)
        self.needed = tuple(p.name for p in recording.reads)
        self._needed = frozenset(self.needed)
        self.limits = tuple(recording.limits)
        self.words = tuple(words)
        self.carried = tuple(carried)
        self.idle_programs = tuple(idle)
        atoms: dict[Any, int] = {}
        #: Each distinct atom: a value's name, or a clamp or division as the
        #: expression that is that atom alone.
        self.atoms: list[str | Affine] = []

        def row(expr: Affine) -> _Row:
            terms = []
            for atom, coeff in expr.terms:
                key = Affine.atom(atom).key()
                index = atoms.get(key)
                if index is None:
                    index = atoms[key] = len(self.atoms)
                    self.atoms.append(_atom(atom))
                terms.append((index, coeff))
            return tuple(terms), expr.const

        # the limits of one expression: the range every one of them allows
        ranges: dict[Any, tuple[_Row, int, int]] = {}
        for limit in self.limits:
            key = limit.expr.key()
            kept = ranges.get(key)
            if kept is None:
                ranges[key] = (row(limit.expr), limit.lo, limit.hi)
            else:
                ranges[key] = (kept[0], max(kept[1], limit.lo), min(kept[2], limit.hi))
        self._ranges = tuple(ranges.values())
        self._words = tuple(row(w.expr) for w in self.words)
        self._bounds = tuple(
            (program.always, tuple((row(e), steps) for e, steps in program.bounds))
            for program in self.idle_programs
        )
        self.size = len(self.words) + len(self.carried)

    def __call__(self, values: Mapping[str, Any]) -> Call:
        """Check one call's ``values`` and evaluate everything the call needs.

        Raises:
            TypeError: A value is unknown, missing, or not an int.
            ValueError: A value is outside ``[0, 2**30)``.
            IndexError: The values index or bound a view outside it.
            OverflowError: A word's value does not fit int32.
        """
        full = dict(self.defaults)
        full.update(values)
        if (
            full.keys() <= self.names
            and self._needed <= full.keys()
            and all(type(v) is int and 0 <= v <= VALUE_MAX for v in full.values())
        ):
            checked = full
        else:  # the general check raises, or converts numpy integers
            checked = check_values(self.who, self.declared, full, needed=self.needed)
        try:
            atoms = [
                checked[a] if isinstance(a, str) else a.evaluate(checked)
                for a in self.atoms
            ]
        except KeyError:  # a value none gives: the general path says where
            self._general(checked)
        for (terms, const), lo, hi in self._ranges:
            v = const
            for i, c in terms:
                v += c * atoms[i]
            if not lo <= v < hi:
                self._general(checked)
        pad = [0] * self.size
        for slot, (terms, const) in enumerate(self._words):
            v = const
            for i, c in terms:
                v += c * atoms[i]
            if not INT32_MIN <= v <= INT32_MAX:
                self._general(checked)
            pad[slot] = v
        first = len(self.words)
        for k, name in enumerate(self.carried):
            pad[first + k] = checked.get(name, 0)
        idle = []
        for always, bounds in self._bounds:
            steps = always
            for (terms, const), idled in bounds:
                v = const
                for i, c in terms:
                    v += c * atoms[i]
                if v <= 0:
                    steps = steps | idled
            idle.append(steps)
        return Call(checked, np.array(pad, np.int32), tuple(idle))

    def _general(self, values: dict[str, int]) -> NoReturn:
        """Raise what the general path raises for ``values``, in its order."""
        self.recording.check_values(values)
        evaluate_words(self.words, values)
        for program in self.idle_programs:
            program(values)
        raise AssertionError(  # pragma: no cover - the program and they agree
            f"{self.who}: the call program refused {values}, the general path did not"
        )


def _atom(atom: Atom) -> str | Affine:
    return atom if isinstance(atom, str) else Affine.atom(atom)
