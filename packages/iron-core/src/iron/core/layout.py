"""Layouts: where a handle's elements are in its buffer, one class per kind.

Every kind implements :class:`HandleLayout`, which is all that its consumers
(the host's reads and writes in :mod:`iron.core.access`, the recorder,
per-call words, liveness, the data movers, the NPU backend) ask of a layout,
so a new kind is one class here. The kinds:

- :class:`Dense`: a contiguous run of the buffer at an element offset (an
  int, or an expression of per-call values for ``cache[position]``);
- :class:`Strided`: the elements a
  :class:`~iron.core.tap.TensorAccessPattern` walks, plus a per-call shift,
  and optionally a per-call repeat or length;
- :class:`Gather`: leading-axis rows picked by fixed ids or by a 1-D integer
  handle the device fills (``table[ids]``).

:class:`~iron.core.handle.Handle` makes them from numpy-style indexing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from math import prod
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from iron.core.dma import Walk
from iron.core.percall import Affine, evaluate
from iron.core.tap import TensorAccessPattern

if TYPE_CHECKING:
    from iron.core.handle import Handle

__all__ = [
    "Dense",
    "Gather",
    "HandleLayout",
    "Strided",
    "ViewWalks",
    "offset_parts",
]


@dataclasses.dataclass(frozen=True)
class ViewWalks:
    """How a DMA reads a view: its walks and what moves them per call.

    Attributes:
        walks: One ``(offset, sizes, strides)`` per walk, over the buffer's
            elements (the offset's constant part; see :mod:`iron.core.dma`).
        per_call: The multiples per-call values add to the start (a per-call
            offset's coefficients, or a gathered row's length for ids the
            device makes).
        sized_per_call: Whether a per-call repeat or length sets the walks'
            first sizes (then each walk is one four-dimensional descriptor).
        per_walk: Whether each walk moves by a per-call value of its own (a
            row per id a handle holds) rather than the view as one.
    """

    walks: tuple[Walk, ...]
    per_call: tuple[int, ...] = ()
    sized_per_call: bool = False
    per_walk: bool = False


class HandleLayout(Protocol):
    """What every layout kind answers; consumers ask this, never the kind.

    A layout is where a :class:`~iron.core.handle.Handle`'s elements are in
    its buffer. The host reference, the recorder, per-call words, liveness,
    the data movers and the NPU backend read a layout only through these
    members, so a new kind is one class that implements them.

    Attributes:
        kind: Its name in a handle's repr and in errors (``dense``...).
        contiguous: Whether the elements are one contiguous run (its start
            may move per call); any other layout only a data mover reads.
    """

    kind: ClassVar[str]
    contiguous: ClassVar[bool]

    @property
    def start(self) -> int | Affine:
        """The element its walks are relative to, per call (a run's first)."""
        ...

    @property
    def static_offset(self) -> int | None:
        """A contiguous run's first element when fixed at record time, else None."""
        ...

    def per_call_parts(self) -> tuple[tuple[str, Any], ...]:
        """Each part that may vary per call, as ``(use, value)``: ``("shift", p)``."""
        ...

    def reads(self) -> tuple[Handle, ...]:
        """Handles read to find the elements (a gather's ids), besides the buffer."""
        ...

    def indices(
        self,
        shape: tuple[int, ...],
        values: Mapping[str, int],
        read: Callable[[Handle], np.ndarray],
    ) -> np.ndarray:
        """The flat element indices for one call, shape ``shape``.

        ``read`` gives every element of a handle :meth:`reads` names this
        call. Elements a per-call repeat or length leaves out are -1.
        """
        ...

    def dma_walks(self, elements: int) -> ViewWalks:
        """How a DMA reads the ``elements`` elements of a view of this layout."""
        ...


def offset_parts(offset: int | Affine) -> tuple[int, tuple[int, ...]]:
    """An offset's constant and the multiples per-call values add to it."""
    if isinstance(offset, Affine):
        return offset.const, tuple(c for _, c in offset.terms)
    return int(offset), ()


@dataclasses.dataclass(frozen=True)
class Dense:
    """A contiguous run of the buffer starting at element ``offset``."""

    offset: int | Affine = 0
    kind: ClassVar[str] = "dense"
    contiguous: ClassVar[bool] = True

    @property
    def start(self) -> int | Affine:
        """The run's first element (per call for ``cache[position]``)."""
        return self.offset

    @property
    def static_offset(self) -> int | None:
        """The run's first element if it is fixed at record time, else None."""
        return self.offset if isinstance(self.offset, int) else None

    def per_call_parts(self) -> tuple[tuple[str, Any], ...]:
        """Its offset."""
        return (("offset", self.offset),)

    def reads(self) -> tuple[Handle, ...]:
        """None: a run is found by its offset alone."""
        return ()

    def indices(
        self,
        shape: tuple[int, ...],
        values: Mapping[str, int],
        read: Callable[[Handle], np.ndarray],
    ) -> np.ndarray:
        """``offset, offset + 1, ...`` this call, shaped ``shape``."""
        first = evaluate(self.offset, values)
        return np.arange(first, first + prod(shape), dtype=np.int64).reshape(shape)

    def dma_walks(self, elements: int) -> ViewWalks:
        """One contiguous walk from the offset's constant part."""
        const, per_call = offset_parts(self.offset)
        return ViewWalks(((const, (elements,), (1,)),), per_call)


@dataclasses.dataclass(frozen=True)
class Strided:
    """The elements ``tap`` walks over the flat buffer, shifted per call.

    ``repeat`` (one per pattern of a tuple ``tap``) replaces each pattern's
    first size per call; ``length`` replaces its second.
    """

    tap: TensorAccessPattern | tuple[TensorAccessPattern, ...]
    shift: int | Affine = 0
    repeat: tuple[int | Affine, ...] | None = None
    length: int | Affine | None = None
    kind: ClassVar[str] = "strided"
    contiguous: ClassVar[bool] = False

    @property
    def taps(self) -> tuple[TensorAccessPattern, ...]:
        """Its patterns, one or more."""
        return self.tap if isinstance(self.tap, tuple) else (self.tap,)

    @property
    def start(self) -> int | Affine:
        """The shift its patterns' offsets are relative to."""
        return self.shift

    @property
    def static_offset(self) -> int | None:
        """None: a strided walk is no contiguous run."""
        return None

    def per_call_parts(self) -> tuple[tuple[str, Any], ...]:
        """Its shift, each repeat and its length."""
        repeats = self.repeat or ()
        return (
            ("shift", self.shift),
            *(
                ("repeat" if len(repeats) == 1 else f"repeat {i}", r)
                for i, r in enumerate(repeats)
            ),
            ("length", self.length),
        )

    def reads(self) -> tuple[Handle, ...]:
        """None: a walk is found by its patterns alone."""
        return ()

    def indices(
        self,
        shape: tuple[int, ...],
        values: Mapping[str, int],
        read: Callable[[Handle], np.ndarray],
    ) -> np.ndarray:
        """The patterns' indices this call, shifted; -1 past a per-call size."""
        walks = self.taps
        repeats = self.repeat or (None,) * len(walks)
        parts = []
        for walk, r in zip(walks, repeats):
            sizes = list(walk.sizes)
            if r is not None:
                sizes[0] = evaluate(r, values)
            if self.length is not None:
                sizes[1] = evaluate(self.length, values)
            if sizes != list(walk.sizes):
                walk = TensorAccessPattern(
                    walk.tensor_dims, walk.offset, tuple(sizes), walk.strides
                )
            parts.append(walk.indices().reshape(-1))
        flat = np.concatenate(parts) + evaluate(self.shift, values)
        elements = prod(shape)
        if flat.size < elements:
            flat = np.concatenate([flat, np.full(elements - flat.size, -1, np.int64)])
        return flat.reshape(shape)

    def dma_walks(self, elements: int) -> ViewWalks:
        """One walk per pattern, at the shift's constant part."""
        shift, per_call = offset_parts(self.shift)
        walks = tuple((t.offset + shift, t.sizes, t.strides) for t in self.taps)
        sized = self.repeat is not None or self.length is not None
        return ViewWalks(walks, per_call, sized)


@dataclasses.dataclass(frozen=True, eq=False)
class Gather:
    """Leading-axis rows of the buffer, by fixed ids or by a 1-D int handle."""

    ids: tuple[int, ...] | Handle
    row_elements: int
    offset: int = 0
    kind: ClassVar[str] = "gather"
    contiguous: ClassVar[bool] = False

    @property
    def start(self) -> int | Affine:
        """The first row's offset, which the ids count rows from."""
        return self.offset

    @property
    def static_offset(self) -> int | None:
        """None: gathered rows are no contiguous run."""
        return None

    def per_call_parts(self) -> tuple[tuple[str, Any], ...]:
        """None of its own (ids a handle holds are :meth:`reads`')."""
        return ()

    def reads(self) -> tuple[Handle, ...]:
        """The ids handle, for ids the device makes."""
        return () if isinstance(self.ids, tuple) else (self.ids,)

    def indices(
        self,
        shape: tuple[int, ...],
        values: Mapping[str, int],
        read: Callable[[Handle], np.ndarray],
    ) -> np.ndarray:
        """Each row's elements, by the ids (every one, so rows keep ``shape``)."""
        if not isinstance(self.ids, tuple):
            ids = read(self.ids).astype(np.int64)
        else:
            ids = np.asarray(self.ids, dtype=np.int64)
        row = np.arange(self.row_elements, dtype=np.int64)
        flat = self.offset + ids[:, None] * self.row_elements + row[None, :]
        return flat.reshape(shape)

    def dma_walks(self, elements: int) -> ViewWalks:
        """A walk per row, or per run of consecutive fixed ids."""
        row = self.row_elements
        if not isinstance(self.ids, tuple):
            rows = self.ids.shape[0]
            walk = (self.offset, (row,), (1,))
            return ViewWalks((walk,) * rows, (row,), per_walk=True)
        runs: list[list[int]] = []
        for i in self.ids:
            if runs and i == runs[-1][0] + runs[-1][1]:
                runs[-1][1] += 1
            else:
                runs.append([i, 1])
        return ViewWalks(
            tuple(
                (self.offset + first * row, (count * row,), (1,))
                for first, count in runs
            )
        )
