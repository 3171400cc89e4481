"""Per-call words: the scratchpad slots an image reads each call.

Every use of a per-call value in a recording (a bound ``x[:n]``, the offset
of a view ``cache[position]``, a strided view's shift, repeat or length, a
per-call operator field like ``Softmax.length``) becomes a scratchpad
*word*: a device symbol (``w0``, ``w1``, ... in first-use order) plus the
:class:`~iron.core.percall.Affine` expression the host evaluates for it each
call. Uses of the same expression share one word, and a device has a
limited count of them (``Device.scratchpad_words``); :func:`words_of`
raises :class:`TooManyWordsError` naming the values when a graph needs more.
:func:`evaluate_words` computes one call's words, range-checked to int32.

A carried value's next value is not a word of the version that computes it:
the Emit program (:mod:`iron.core.emit`) writes it into the next run's
scratchpad.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from iron.core.handle import Handle
from iron.core.percall import Affine, Clamp, FloorDiv, PerCall

if TYPE_CHECKING:
    from iron.core.device import Device
    from iron.core.recording import Recording

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "TooManyWordsError",
    "Word",
    "evaluate_words",
    "loopable",
    "words_of",
]

#: The least value a scratchpad word (an int32) holds.
INT32_MIN = -(1 << 31)
#: The greatest value a scratchpad word (an int32) holds.
INT32_MAX = (1 << 31) - 1


class TooManyWordsError(ValueError):
    """A recording needs more scratchpad words than its device has."""


@dataclasses.dataclass(frozen=True)
class Word:
    """One scratchpad word an image reads each call.

    Attributes:
        symbol: The device symbol (``"w0"``, ``"w1"``, ... in first-use order).
        expr: The expression of the graph's per-call values the host
            evaluates into the word each call.
        uses: Where the recording uses it, in words (``"x[:n] bound of axis
            0 (step 0 ReLU reads)"``, ``"Softmax.length (step 5)"``).
        loopable: Whether the device can compute it itself (an Emit program
            composes it from carried values); a derivation it cannot express
            (a comparison, a division by a non-power of two) can still be
            written from the host.
        why_not: Why it is not loopable; empty when it is.
        step: The step whose own image reads it, where each step is an image
            (an xclbin per step); None where one image reads every word (a
            full ELF) or it is an input's or a host step's.
    """

    symbol: str
    expr: Affine
    uses: tuple[str, ...]
    loopable: bool = True
    why_not: str = ""
    step: int | None = None

    @property
    def names(self) -> frozenset[str]:
        """The per-call values the word reads."""
        return self.expr.names()

    def __str__(self) -> str:
        return f"{self.symbol} = {self.expr}"


def loopable(expr: Any) -> tuple[bool, str]:
    """Whether the device can compute ``expr``, and why not if it cannot.

    The device evaluates sums, multiples by an int, floor divisions by a
    power of two (shifts) and clamps: exactly what an :class:`Affine` holds.

    Args:
        expr: An expression of per-call values.

    Returns:
        ``(True, "")``, or ``(False, reason)`` naming the part the device
        cannot compute.
    """
    if isinstance(expr, PerCall):
        return True, ""
    if not isinstance(expr, Affine):
        return False, f"{expr!r} is not an affine expression of per-call values"
    for atom, coeff in expr.terms:
        if isinstance(coeff, bool) or not isinstance(coeff, int):
            return False, f"{expr} multiplies by {coeff!r}, not an int"
        if isinstance(atom, str):
            continue
        if isinstance(atom, FloorDiv):
            if not isinstance(atom.shift, int) or atom.shift < 0:
                return False, f"{atom} divides by no power of two"
        elif isinstance(atom, Clamp):
            for bound in (atom.lo, atom.hi):
                if bound is not None and not isinstance(bound, int):
                    return False, f"{atom} clamps to {bound!r}, not an int"
        else:
            return False, f"{expr} holds {atom!r}, which the device cannot compute"
        ok, why = loopable(atom.inner)
        if not ok:
            return ok, why
    return True, ""


# -- finding every use ---------------------------------------------------------


def _per_call(x: Any) -> Affine | None:
    """``x`` as an expression if it varies per call, else None."""
    if isinstance(x, PerCall):
        return x.affine()
    if isinstance(x, Affine) and x.terms:
        return x
    return None


def _bound_text(name: str, axis: int, expr: Affine) -> str:
    index = [":"] * axis + [f":{expr}"]
    return f"{name}[{', '.join(index)}] bound of axis {axis}"


def _handle_uses(h: Handle, where: str) -> Iterator[tuple[Affine, str]]:
    """Every per-call expression ``h`` carries, with its use in words."""
    for axis in sorted(h.valid):
        expr = _per_call(h.valid[axis])
        if expr is not None:
            yield expr, f"{_bound_text(h.name, axis, expr)} ({where})"
    for use, value in h.layout.per_call_parts():
        expr = _per_call(value)
        if expr is not None:
            yield expr, f"{use} of {h.name} view ({where})"
    for read in h.layout.reads():
        yield from _handle_uses(read, f"ids of {h.name} {h.layout.kind}, {where}")


def _fn_name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def _at(
    uses: Iterator[tuple[Affine, str]], step: int
) -> Iterator[tuple[Affine, str, int]]:
    for expr, use in uses:
        yield expr, use, step


def _uses(recording: Recording) -> Iterator[tuple[Affine, str, int]]:
    """Every per-call expression ``recording`` uses, in first-use order.

    Each comes with the step whose image reads it (-1 for the host's own
    transfers). Steps come in order with host steps between them; the
    recording's own inputs and outputs count only where no step moves the
    same handle (a step's transfer is then the use).
    """
    moved: set[int] = set()
    for step in recording.steps:
        moved.update(id(h) for h in (*step.inputs, *step.outputs) if h is not None)
    for host in recording.host:
        moved.update(id(h) for h in (*host.reads, *host.writes))
    for i, h in enumerate(recording.inputs):
        if id(h) not in moved:
            yield from _at(_handle_uses(h, f"input {i}"), -1)
    host = sorted(recording.host, key=lambda s: s.after)

    def host_uses(hs: Any) -> Iterator[tuple[Affine, str, int]]:
        where = f"on_host {_fn_name(hs.fn)} after {hs.after} steps"
        for h in hs.reads:
            yield from _at(_handle_uses(h, f"{where} reads"), -1)
        for h in hs.writes:
            yield from _at(_handle_uses(h, f"{where} writes"), -1)

    for step in recording.steps:
        while host and host[0].after <= step.index:
            yield from host_uses(host.pop(0))
        op = type(step.op).__name__
        for h in step.inputs:
            if h is not None:
                yield from _at(
                    _handle_uses(h, f"step {step.index} {op} reads"), step.index
                )
        for name, value in step.op.fields().items():
            expr = _per_call(value)
            if expr is not None:
                yield expr, f"{op}.{name} (step {step.index})", step.index
        for h in step.outputs:
            yield from _at(
                _handle_uses(h, f"step {step.index} {op} writes"), step.index
            )
    for rest in host:
        yield from host_uses(rest)
    for i, h in enumerate(recording.outputs):
        if id(h) not in moved:
            yield from _at(_handle_uses(h, f"output {i}"), -1)
    for name, nxt in recording.carry.items():
        if isinstance(nxt, Handle):
            yield from _at(_handle_uses(nxt, f"carry {name}"), -1)


def words_of(
    recording: Recording, dev: Device, *, share: bool = True, reserved: int = 0
) -> list[Word]:
    """Return the scratchpad words ``recording`` reads each call on ``dev``.

    Args:
        recording: The recorded graph.
        dev: The device; ``dev.scratchpad_words`` is the most one image reads.
        share: Give uses of the same expression one word (a full ELF's
            image reads one scratchpad); else one word per use (an image per
            step).
        reserved: Scratchpad slots the version needs besides its words (one
            per carried value under an Emit step), counted against the limit.

    Returns:
        The words in first-use order, symbols ``w0``, ``w1``, ...

    Raises:
        TooManyWordsError: More than ``dev.scratchpad_words`` are needed.
    """
    found: dict[Any, tuple[Affine, list[str], int | None]] = {}
    per_image: dict[int, set[Any]] = {}
    for n, (expr, use, step) in enumerate(_uses(recording)):
        key = expr.key() if share else n
        # the image that reads it: the one full ELF, or this use's step's own
        per_image.setdefault(-1 if share else step, set()).add(
            key if share else expr.key()
        )
        if key in found:
            if use not in found[key][1]:
                found[key][1].append(use)
        else:
            found[key] = (expr, [use], None if share or step < 0 else step)
    words = []
    for i, (expr, uses, at) in enumerate(found.values()):
        ok, why = loopable(expr)
        words.append(Word(f"w{i}", expr, tuple(uses), ok, why, at))
    # Each image reads its own scratchpad: a full ELF all the words, a step's
    # xclbin the expressions its own transfers use.
    needed = max((len(keys) for keys in per_image.values()), default=0) + reserved
    if needed > dev.scratchpad_words:
        raise TooManyWordsError(_too_many(recording.name, dev, words, reserved))
    return words


def _too_many(name: str, dev: Device, words: Sequence[Word], reserved: int) -> str:
    values = sorted(set().union(*(w.names for w in words)))
    listed = "; ".join(f"{w} ({w.uses[0]})" for w in words[:8])
    more = f"; and {len(words) - 8} more" if len(words) > 8 else ""
    extra = f" plus {reserved} carried-value slots" if reserved else ""
    return (
        f"{name}: needs {len(words)} scratchpad words{extra}, but "
        f"{dev.name} has {dev.scratchpad_words}; they read the per-call values "
        f"{values}: {listed}{more}. Share expressions (views that move together "
        f"can use one expression, e.g. one offset) or use fewer per-call views"
    )


def evaluate_words(words: Sequence[Word], values: Mapping[str, int]) -> np.ndarray:
    """Return each word's value for one call, in order, as int32.

    Args:
        words: The words, as :func:`words_of` returns them.
        values: Each per-call value's integer for this call.

    Raises:
        KeyError: A word reads a value ``values`` does not give.
        OverflowError: A word's value does not fit int32.
    """
    out = np.zeros(len(words), dtype=np.int32)
    for i, w in enumerate(words):
        try:
            v = w.expr.evaluate(values)
        except KeyError as e:
            raise KeyError(
                f"{w} reads {e.args[0]}, which this call gives no value for; "
                f"give every per-call value the version reads"
            ) from None
        if not INT32_MIN <= v <= INT32_MAX:
            raise OverflowError(
                f"{w} is {v} this call (values {dict(values)}), outside int32 "
                f"[{INT32_MIN}, {INT32_MAX}]: a scratchpad word holds 32 bits; "
                f"give smaller values or hold the expression with iron.clamp"
            )
        out[i] = v
    return out
