"""Reading and writing a handle's elements on the host, layout by layout.

The host reference and the emulated NPU evaluate a recording on numpy
buffers: a :class:`~iron.core.handle.Handle`'s elements are found through its
layout (a contiguous run, a strided access pattern, gathered rows), with
every per-call offset, bound, repeat and length evaluated for the call. A
contiguous run is read and written as a view of its buffer; any other layout
through the flat indices :func:`indices` gives.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from iron.core.handle import Handle
from iron.core.percall import evaluate

__all__ = ["bounded", "indices", "read", "write"]


def indices(
    h: Handle, values: Mapping[str, int], buffers: Mapping[str, np.ndarray]
) -> np.ndarray:
    """The flat element indices of ``h`` in its buffer for one call, shape ``h.shape``.

    Per-call offsets, repeats and lengths are evaluated from ``values``;
    a gather by a handle reads its ids from ``buffers``. Elements a per-call
    repeat or length leaves out are -1. The layout computes them
    (:meth:`~iron.core.layout.HandleLayout.indices`).
    """

    def every(ids: Handle) -> np.ndarray:
        # every element, bounded or not, so gathered rows keep their shape
        return read(dataclasses.replace(ids, valid={}), values, buffers)

    return h.layout.indices(h.shape, values, every)


def bounded(h: Handle, values: Mapping[str, int]) -> tuple[slice, ...]:
    """The index that cuts an array of ``h.shape`` to this call's bounds.

    Raises:
        IndexError: A bound is outside ``[0, size]`` of its axis this call.
    """
    cut = []
    for a, size in enumerate(h.shape):
        if a not in h.valid:
            cut.append(slice(None))
            continue
        n = evaluate(h.valid[a], values)
        if not 0 <= n <= size:
            raise IndexError(
                f"{h!r}: axis {a} is bounded by {h.valid[a]} = {n} this call, "
                f"outside [0, {size}]"
            )
        cut.append(slice(0, n))
    return tuple(cut)


def _dense_view(
    h: Handle, values: Mapping[str, int], flat: np.ndarray, verb: str
) -> np.ndarray | None:
    """``h``'s elements as a view of ``flat`` when its layout is a contiguous run."""
    if not h.layout.contiguous:
        return None
    start = evaluate(h.layout.start, values)
    if h.elements == 0:
        return flat[:0].reshape(h.shape)
    if start < 0 or start + h.elements > flat.size:
        raise IndexError(
            f"{h!r} {verb} elements {start}..{start + h.elements - 1} of "
            f"{h.name}'s {flat.size} this call"
        )
    return flat[start : start + h.elements].reshape(h.shape)


def read(
    h: Handle, values: Mapping[str, int], buffers: Mapping[str, np.ndarray]
) -> np.ndarray:
    """``h``'s elements for one call, cut to its bounds.

    A contiguous run is a view of the buffer (steps never write their
    inputs); any other layout is gathered into a copy.
    """
    flat = buffers[h.name].reshape(-1)
    dense = _dense_view(h, values, flat, "reads")
    if dense is not None:
        cut = bounded(h, values)
        return dense[cut] if cut else dense
    idx = indices(h, values, buffers)[bounded(h, values)]
    if idx.size and (idx.min() < 0 or idx.max() >= flat.size):
        raise IndexError(
            f"{h!r} reads elements {int(idx.min())}..{int(idx.max())} of "
            f"{h.name}'s {flat.size} this call"
        )
    elements: np.ndarray = flat[idx]
    return elements


def write(
    h: Handle,
    values: Mapping[str, int],
    buffers: Mapping[str, np.ndarray],
    array: np.ndarray,
) -> None:
    """Store ``array`` (cut to ``h``'s bounds) at ``h``'s elements for one call."""
    flat = buffers[h.name].reshape(-1)
    array = np.asarray(array)
    dense = _dense_view(h, values, flat, "writes")
    if dense is not None:
        cut = bounded(h, values)
        target = dense[cut] if cut else dense
        if array.shape != target.shape:
            raise ValueError(
                f"{h!r} takes shape {list(target.shape)} this call, got "
                f"{list(array.shape)}"
            )
        target[...] = array.astype(flat.dtype, copy=False)
        return
    idx = indices(h, values, buffers)[bounded(h, values)]
    if array.shape != idx.shape:
        raise ValueError(
            f"{h!r} takes shape {list(idx.shape)} this call, got {list(array.shape)}"
        )
    if idx.size and (idx.min() < 0 or idx.max() >= flat.size):
        raise IndexError(
            f"{h!r} writes elements {int(idx.min())}..{int(idx.max())} of "
            f"{h.name}'s {flat.size} this call"
        )
    flat[idx] = array.astype(flat.dtype, copy=False)
