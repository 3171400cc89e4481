"""Handles: the recorded tensors a graph's ``body`` reads and writes.

A :class:`Handle` is a place in a graph :class:`Buffer` (its *layout*, one
of the kinds in :mod:`iron.core.layout`), a shape, a dtype and, per axis, how
many leading entries are valid this call (``x[:n]`` with ``n`` a per-call
value). Indexing makes a :class:`~iron.core.layout.Dense` run, a
:class:`~iron.core.layout.Strided` walk or
:class:`~iron.core.layout.Gather`-ed rows; everything else asks the layout
through :class:`~iron.core.layout.HandleLayout`.

Views follow numpy's basic indexing. Anything but a contiguous static slice
is a view that only a copy consumes on the device; the host reads every
layout through :mod:`iron.core.access`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from math import prod
from typing import Any

import numpy as np

from iron.core import context
from iron.core._indexing import (
    _as_affine,
    _expand_ellipsis,
    _is_window,
    _rescale_bounds,
    _slice,
)
from iron.core.dma import shim_descriptor_fits, walk_reach
from iron.core.layout import Dense, Gather, HandleLayout, Strided
from iron.core.percall import Affine, PerCall, _Expr
from iron.core.tap import TensorAccessPattern

__all__ = [
    "Buffer",
    "BufferRef",
    "Handle",
    "dtype_name",
]

ROLES = ("input", "output", "transient", "weight", "state")


def dtype_name(dtype: Any) -> str:
    """A short dtype name for printing (``bf16``, ``f32``, ``i32``)."""
    name = str(np.dtype(dtype).name)
    return {"bfloat16": "bf16", "float32": "f32", "int32": "i32"}.get(name, name)


@dataclasses.dataclass(frozen=True, eq=False)
class Buffer:
    """A graph buffer: what device memory holds one tensor.

    Attributes:
        name: Unique in its recording (an input's name, a weight's path, a
            step's output like ``relu0``).
        role: ``input``, ``output``, ``transient``, ``weight`` or ``state``.
        shape: Its shape.
        dtype: Its element type.
    """

    name: str
    role: str
    shape: tuple[int, ...]
    dtype: Any

    @property
    def elements(self) -> int:
        """How many elements it holds."""
        return int(prod(self.shape))

    @property
    def nbytes(self) -> int:
        """How many bytes it holds."""
        return self.elements * int(np.dtype(self.dtype).itemsize)


@dataclasses.dataclass(frozen=True)
class BufferRef:
    """Where a step finds a handle: a byte range of a buffer (None = all of it)."""

    name: str
    offset: int | None = None
    nbytes: int | None = None


def _row_major(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


@dataclasses.dataclass(frozen=True, eq=False)
class Handle:
    """A recorded tensor: its place in a graph buffer, shape, dtype, per-axis bound.

    ``layout`` is where it is in the buffer; ``valid`` holds, per axis, the
    leading entries valid this call (``x[:n]``).

    ``h[key]`` takes numpy's basic indexing, a per-call value on one axis
    (``keys[:, pos]``), and leading-axis rows, fixed (``table[ids]``) or a 1-D
    integer handle's per call; any view but a contiguous static slice is a
    copy's. A view walks its buffer forward: a negative step over more than
    one element raises ValueError.
    """

    buffer: Buffer
    shape: tuple[int, ...]
    dtype: Any
    valid: Mapping[int, int | Affine] = dataclasses.field(default_factory=dict)
    layout: HandleLayout = Dense()

    @classmethod
    def whole(cls, shape: Sequence[int], dtype: Any, name: str, role: str) -> Handle:
        """Make a new buffer ``name`` of ``shape``, whole."""
        if role not in ROLES:
            raise ValueError(f"buffer role {role!r} is not one of {ROLES}")
        shape = tuple(int(s) for s in shape)
        return cls(Buffer(name, role, shape, np.dtype(dtype)), shape, np.dtype(dtype))

    # -- properties -----------------------------------------------------------

    @property
    def name(self) -> str:
        """Its buffer's name."""
        return self.buffer.name

    @property
    def ndim(self) -> int:
        """How many axes it has."""
        return len(self.shape)

    @property
    def elements(self) -> int:
        """How many elements its shape holds."""
        return int(prod(self.shape))

    @property
    def nbytes(self) -> int:
        """How many bytes its shape holds."""
        return self.elements * int(np.dtype(self.dtype).itemsize)

    @property
    def is_whole(self) -> bool:
        """Whether it is its whole buffer, unbounded."""
        return (
            self.layout.static_offset == 0
            and self.elements == self.buffer.elements
            and not self.valid
        )

    @property
    def is_view(self) -> bool:
        """Whether only a copy can consume it (anything but a contiguous slice)."""
        return self.layout.static_offset is None

    @property
    def T(self) -> Handle:
        """``transpose(1, 0)``, as numpy's ``.T`` of a matrix."""
        if self.ndim != 2:
            raise ValueError(f".T transposes a matrix; {self!r} is {self.ndim}-D")
        return self.transpose(1, 0)

    def __repr__(self) -> str:
        dims = ", ".join(
            f"{s} (valid {self.valid[a]})" if a in self.valid else str(s)
            for a, s in enumerate(self.shape)
        )
        where = "" if self.is_whole else f" {self.layout.kind}"
        return f"{self.name}[{dims}] {dtype_name(self.dtype)}{where}"

    def __bool__(self) -> bool:
        raise TypeError(
            f"{self!r} is a recorded tensor with no value while body is recorded; "
            f"it cannot decide an if or while"
        )

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError(
            f"{self!r} is a recorded tensor; numpy cannot compute on it while body "
            f"is recorded: pass it to an operator's .step(...)"
        )

    # -- where a step finds it --------------------------------------------------

    def ref(self) -> BufferRef:
        """Return where a step finds this handle.

        A part of its buffer for a contiguous run, else all of it.
        """
        offset = self.layout.static_offset
        if offset is not None:
            itemsize = np.dtype(self.dtype).itemsize
            return BufferRef(self.name, offset * itemsize, self.nbytes)
        return BufferRef(self.name)

    # -- views ------------------------------------------------------------------

    def _strides(self) -> tuple[int, ...]:
        return _row_major(self.shape)

    def _need_dense(self, what: str) -> Dense:
        if not isinstance(self.layout, Dense):
            raise ValueError(f"cannot {what} a view {self!r}; {what} what it views")
        return self.layout

    def reshape(self, *shape: Any) -> Handle:
        """Return the same buffer seen with another shape (no data moves)."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = tuple(int(s) for s in shape)
        if -1 in shape:
            known = prod(s for s in shape if s != -1)
            shape = tuple(self.elements // known if s == -1 else s for s in shape)
        if prod(shape) != self.elements:
            raise ValueError(f"cannot reshape {self!r} to {list(shape)}")
        self._need_dense("reshape")
        return dataclasses.replace(
            self, shape=shape, valid=_rescale_bounds(self, shape)
        )

    def transpose(self, *axes: Any) -> Handle:
        """Return the same buffer walked with its axes permuted (no data moves).

        No axes reverse them, as numpy's; a negative axis counts from the end.
        """
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        if not axes:
            axes = tuple(reversed(range(self.ndim)))
        axes = tuple(a + self.ndim if isinstance(a, int) and a < 0 else a for a in axes)
        layout = self._need_dense("transpose")
        if sorted(axes) != list(range(self.ndim)):
            raise ValueError(f"axes {axes} do not permute a shape of rank {self.ndim}")
        offset = layout.offset
        shape = tuple(self.shape[a] for a in axes)
        strides = tuple(self._strides()[a] for a in axes)
        valid = {axes.index(axis): b for axis, b in self.valid.items()}
        return self._strided(offset, shape, strides, valid)

    def _strided(
        self,
        offset: int | Affine,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        valid: Mapping[int, int | Affine],
    ) -> Handle:
        """A view of ``shape`` at ``offset`` with element ``strides``."""
        dense = prod(shape) == 0 or all(
            size == 1 or stride == want
            for size, stride, want in zip(shape, strides, _row_major(shape))
        )
        # A size-1 axis never steps: its stride (negative for x[3:2:-1]) is 0.
        strides = tuple(0 if size == 1 else st for size, st in zip(shape, strides))
        if dense:
            layout: Dense | Strided = Dense(offset)
        else:
            base = _const(offset)
            shift = offset - base if isinstance(offset, Affine) else 0
            tap = TensorAccessPattern(
                (self.buffer.elements,), base, shape or (1,), strides or (1,)
            )
            layout = Strided(tap, shift)
        return Handle(self.buffer, shape, self.dtype, dict(valid), layout)

    def __getitem__(self, key: Any) -> Handle:
        if not isinstance(key, tuple):
            key = (key,)
        first = key[0] if key else None
        if _is_rows(first):
            if len(key) > 1:
                raise IndexError(
                    f"{self!r}[ids, ...]: a gather picks whole leading-axis rows; "
                    f"index the gathered handle afterwards"
                )
            return self._gather(first)
        layout = self._need_dense("index")
        key = _expand_ellipsis(key, self.ndim)
        offset: int | Affine = layout.offset
        shape: list[int] = []
        strides: list[int] = []
        valid: dict[int, int | Affine] = {}
        axis = 0
        recorder = context.graph_recorder.get()
        for k in key:
            if k is None:
                shape.append(1)
                strides.append(0)
                continue
            if axis >= self.ndim:
                raise IndexError(f"too many indices for {self!r}")
            size, stride = self.shape[axis], self._strides()[axis]
            bound = self.valid.get(axis)
            if isinstance(k, (PerCall, Affine)):
                index = _as_affine(k)
                if recorder is not None:
                    recorder.limit(index, 0, size, self)
                offset = offset + index * stride
            elif isinstance(k, slice) and _is_window(k):
                # x[p : p + 8]: a per-call start, a fixed length
                first = _as_affine(k.start)
                length = (_as_affine(k.stop) - first) if k.stop is not None else None
                if not isinstance(length, int) or not 0 < length <= size:
                    raise ValueError(
                        f"{self!r}[{k.start}:{k.stop}]: a window with a per-call "
                        f"start has a fixed length in [1, {size}] (x[p : p + n] "
                        f"with n an int); use x[:n] for a per-call length"
                    )
                if k.step not in (None, 1):
                    raise ValueError(f"{self!r}: a per-call window takes no step")
                if bound is not None:
                    raise ValueError(
                        f"{self!r}: axis {axis} is bounded per call ({bound}); "
                        f"only a whole slice ':' keeps it"
                    )
                if recorder is not None:
                    recorder.limit(first, 0, size - length + 1, self)
                offset = offset + first * stride
                shape.append(length)
                strides.append(stride)
            elif isinstance(k, slice):
                start, stop, step, per_call = _slice(k, size, self)
                n = len(range(start, stop, step))
                if step < 0 and n > 1:
                    raise ValueError(
                        f"{self!r}[{k.start}:{k.stop}:{k.step}]: a view walks its "
                        f"buffer forward (a DMA stride cannot be negative); "
                        f"reverse the elements in a step instead"
                    )
                if bound is not None and (
                    per_call is not None or (start, stop, step) != (0, size, 1)
                ):
                    raise ValueError(
                        f"{self!r}: axis {axis} is bounded per call ({bound}); "
                        f"only a whole slice ':' keeps it"
                    )
                offset = offset + start * stride
                shape.append(n)
                strides.append(stride * step)
                if per_call is not None:
                    valid[len(shape) - 1] = per_call
                    if recorder is not None:
                        recorder.limit(per_call, 0, n + 1, self)
                elif bound is not None:
                    valid[len(shape) - 1] = bound
            elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
                i = int(k)
                if not -size <= i < size:
                    raise IndexError(
                        f"index {i} is out of bounds for axis {axis} of {self!r}"
                    )
                offset = offset + (i % size) * stride
            else:
                raise IndexError(
                    f"{self!r}[{k!r}]: a handle takes ints, slices, per-call values, "
                    f"... and None, or leading-axis row ids"
                )
            axis += 1
        for rest in range(axis, self.ndim):
            shape.append(self.shape[rest])
            strides.append(self._strides()[rest])
            if rest in self.valid:
                valid[len(shape) - 1] = self.valid[rest]
        if isinstance(offset, Affine):
            offset = offset._simplified()
        return self._strided(offset, tuple(shape), tuple(strides), valid)

    def _gather(self, ids: Any) -> Handle:
        layout = self._need_dense("gather rows of")
        if not isinstance(layout.offset, int):
            raise ValueError(f"cannot gather rows of a per-call view {self!r}")
        if self.valid:
            raise ValueError(f"cannot gather rows of a bounded view {self!r}")
        if self.ndim < 1:
            raise IndexError(f"cannot gather rows of a scalar {self!r}")
        rows = self.shape[0]
        row_elements = prod(self.shape[1:])
        if isinstance(ids, Handle):
            if ids.ndim != 1 or np.dtype(ids.dtype).kind not in "iu":
                raise TypeError(
                    f"rows are gathered by a 1-D integer handle; {ids!r} is not one"
                )
            recorder = context.graph_recorder.get()
            if recorder is not None:
                recorder.address(self, ids)
            fixed: tuple[int, ...] | Handle = ids
            count = ids.shape[0]
        else:
            array = np.asarray(ids)
            if array.ndim != 1 or array.dtype.kind not in "iu":
                raise IndexError(f"row ids must be 1-D integers, got {ids!r}")
            if array.size and not (0 <= array.min() and array.max() < rows):
                raise IndexError(f"row ids {array.tolist()} outside {rows} rows")
            fixed = tuple(int(i) for i in array)
            count = len(fixed)
        shape = (count, *self.shape[1:])
        gather = Gather(fixed, row_elements, layout.offset)
        # Rows of ids[:n] are bounded as the ids are.
        valid = {0: ids.valid[0]} if isinstance(ids, Handle) and ids.valid else {}
        return Handle(self.buffer, shape, self.dtype, valid, gather)

    def at(
        self,
        tap: TensorAccessPattern | tuple[TensorAccessPattern, ...],
        shape: Sequence[int],
        *,
        bounds: Mapping[int, int | Affine | PerCall] | None = None,
        repeat: Any = None,
        length: Any = None,
    ) -> Handle:
        """Return what ``tap`` walks, as ``shape``: a slice if contiguous, else a view.

        Patterns are over this handle's elements. Per call, ``repeat`` runs
        each pattern's first dimension (a tuple, one per pattern of a tuple
        ``tap``) and ``length`` takes entries of its second; ``bounds`` then
        gives the rows the view moves a call.

        Raises:
            ValueError: With ``repeat`` or ``length``: a pattern is not one
                shim descriptor, repeats don't match patterns, or no
                ``bounds``. Also: a pattern reaches past this handle, the
                patterns walk other than ``shape``'s count, or a bound names
                no axis of ``shape``.
        """
        from iron.core.device import get_current_device

        layout = self._need_dense("walk")
        shape = tuple(int(s) for s in shape)
        walks = tap if isinstance(tap, tuple) else (tap,)
        each = repeat if isinstance(repeat, tuple) else (repeat,)
        if isinstance(repeat, tuple) != isinstance(tap, tuple) or len(each) != len(
            walks
        ):
            if repeat is not None:
                raise ValueError(
                    f"{len(walks)} pattern(s) take a repeat each, not {repeat}"
                )
        for w in walks:
            last = w.offset + walk_reach(w.sizes, w.strides) - 1
            if last >= self.elements:
                raise ValueError(
                    f"{w} reaches element {last} of {self!r}, which has "
                    f"{self.elements}; patterns are over this handle's elements"
                )
        count = sum(w.count for w in walks)
        if count != prod(shape):
            raise ValueError(
                f"the pattern(s) walk {count} elements, but shape {list(shape)} "
                f"holds {prod(shape)}"
            )
        limits = {a: _as_affine(b) for a, b in (bounds or {}).items()}
        recorder = context.graph_recorder.get()
        for a, b in limits.items():
            if not 0 <= a < len(shape):
                raise ValueError(f"bounds name axis {a} of shape {list(shape)}")
            if recorder is not None:
                recorder.limit(b, 0, shape[a] + 1, self)
        base = layout.offset
        moved = tuple(_shifted(w, base, self.buffer.elements) for w in walks)
        if repeat is None and length is None and len(moved) == 1:
            if moved[0].is_contiguous():
                # The per-call part of a view's offset (cache[position]) stays.
                offset = moved[0].offset + (base - _const(base))
                return Handle(self.buffer, shape, self.dtype, limits, Dense(offset))
        if isinstance(base, Affine):
            raise ValueError(f"cannot walk a per-call view {self!r}")
        if repeat is None and length is None:
            return Handle(self.buffer, shape, self.dtype, limits, Strided(_one(moved)))
        dev = get_current_device()
        for walk in walks:
            if (
                walk.rank != 4
                or dev is None
                or not shim_descriptor_fits(dev, walk, self.dtype)
            ):
                raise ValueError(
                    f"{walk} takes a per-call repeat or length as one shim "
                    f"descriptor: four dimensions, the repeated first, within a "
                    f"descriptor's limits"
                )
        if not limits:
            raise ValueError(
                f"a walk of {tap} by a per-call repeat or length bounds the rows "
                f"it moves a call: give bounds"
            )
        repeats = None
        if repeat is not None:
            repeats = tuple(_as_affine(r) for r in each)
            if recorder is not None:
                for walk, r in zip(walks, repeats):
                    recorder.limit(r, 1, walk.sizes[0] + 1, self)
        per_length = None if length is None else _as_affine(length)
        if per_length is not None and recorder is not None:
            recorder.limit(per_length, 1, min(w.sizes[1] for w in walks) + 1, self)
        layout_ = Strided(_one(moved), 0, repeats, per_length)
        return Handle(self.buffer, shape, self.dtype, limits, layout_)


def _one(walks: tuple[TensorAccessPattern, ...]) -> Any:
    return walks[0] if len(walks) == 1 else walks


def _const(x: int | Affine) -> int:
    """An offset's static part: a pattern's start (never below 0; x[n - 1])."""
    return x if isinstance(x, int) else max(x.const, 0)


def _shifted(
    walk: TensorAccessPattern, base: int | Affine, elements: int
) -> TensorAccessPattern:
    """``walk`` (over a view starting at ``base``) as a pattern over the buffer."""
    shift = _const(base)
    return TensorAccessPattern(
        (elements,), walk.offset + shift, walk.sizes, walk.strides
    )


def _is_rows(key: Any) -> bool:
    if isinstance(key, Handle):
        return True
    if isinstance(key, (list, np.ndarray)):
        return True
    return False


def is_expr(x: Any) -> bool:
    """Whether ``x`` is a per-call value or an expression of them."""
    return isinstance(x, _Expr)
