"""Carried values: what a graph computes for its own next call.

A keyword-only ``body`` parameter annotated :data:`Carried` is a per-call
value (:mod:`iron.core.percall`) that the graph itself computes for its next
call: ``body`` returns its next value last, with :func:`carry`, and a call
returns the integers the next call starts from as a :class:`Carry`.
:func:`evaluate_carry` turns the recorded next values into those integers for
one call (the host reference and the runtime share it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any, TypeVar

import numpy as np

from iron.core.handle import Handle
from iron.core.percall import Affine, Kind, PerCall, evaluate

__all__ = ["Carried", "Carry", "carry", "evaluate_carry"]

T = TypeVar("T")

Carried = Annotated[T, Kind.CARRIED.value]
"""A scratchpad value a graph computes for its next call.

``body`` returns it last with ``iron.carry(name=...)``: an expression of its
values (``position + 1``) or a one-element handle (a sampled token); the host
seeds only the first call.
"""


class Carry(Mapping[str, Any]):
    """The next value of each carried value, returned last by ``body``.

    In a body it maps each ``iron.Carried`` name to an expression or a
    one-element handle; from a call or a reference it maps each name to the
    integer the next call starts from. Names read as attributes too
    (``carry.position``).
    """

    def __init__(self, **values: Any) -> None:
        self._values = dict(values)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_values"][name]
        except KeyError:
            raise AttributeError(
                f"Carry has no value {name!r}; it carries "
                f"{sorted(self.__dict__.get('_values', {}))}"
            ) from None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Carry):
            return self._values == other._values
        if isinstance(other, Mapping):
            return self._values == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in self._values.items())
        return f"Carry({inner})"


def carry(**next_values: Handle | Affine | PerCall | int) -> Carry:
    """Return with a graph's outputs the next value of each carried value.

    ``return logits, iron.carry(token=sampled, position=position + 1)``.
    """
    return Carry(**next_values)


def evaluate_carry(
    carry: Mapping[str, Any], values: Mapping[str, int], read: Callable[[Handle], Any]
) -> dict[str, int]:
    """Each carried value's next value for one call.

    Args:
        carry: The recorded next values (``Recording.carry``): expressions of
            the per-call values, or one-element handles.
        values: This call's per-call values.
        read: Reads a handle's buffer after the call.

    Returns:
        Carried name -> the integer the next call starts from.
    """
    out = {}
    for name, nxt in carry.items():
        if isinstance(nxt, Handle):
            out[name] = int(np.asarray(read(nxt)).reshape(-1)[0])
        else:
            out[name] = evaluate(nxt, values)
    return out
