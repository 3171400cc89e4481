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

from iron.core.handle import Dense, Gather, Handle
from iron.core.percall import evaluate
from iron.core.tap import TensorAccessPattern

__all__ = ["bounded", "indices", "read", "write"]


def indices(
    h: Handle, values: Mapping[str, int], buffers: Mapping[str, np.ndarray]
) -> np.ndarray:
    """The flat element indices of ``h`` in its buffer for one call, shape ``h.shape``.

    Per-call offsets, repeats and lengths are evaluated from ``values``;
    a gather by a handle reads its ids from ``buffers``. Elements a per-call
    repeat or length leaves out are -1.
    """
    layout = h.layout
    if isinstance(layout, Dense):
        start = evaluate(layout.offset, values)
        return np.arange(start, start + h.elements, dtype=np.int64).reshape(h.shape)
    if isinstance(layout, Gather):
        if isinstance(layout.ids, Handle):
            # Every id, bounded or not, so the rows keep the handle's shape.
            whole = dataclasses.replace(layout.ids, valid={})
            ids = read(whole, values, buffers).astype(np.int64)
        else:
            ids = np.asarray(layout.ids, dtype=np.int64)
        row = np.arange(layout.row_elements, dtype=np.int64)
        flat = layout.offset + ids[:, None] * layout.row_elements + row[None, :]
        return flat.reshape(h.shape)
    walks = layout.tap if isinstance(layout.tap, tuple) else (layout.tap,)
    repeats = layout.repeat or (None,) * len(walks)
    parts = []
    for walk, r in zip(walks, repeats):
        sizes = list(walk.sizes)
        if r is not None:
            sizes[0] = evaluate(r, values)
        if layout.length is not None:
            sizes[1] = evaluate(layout.length, values)
        if sizes != list(walk.sizes):
            walk = TensorAccessPattern(
                walk.tensor_dims, walk.offset, tuple(sizes), walk.strides
            )
        parts.append(walk.indices().reshape(-1))
    flat = np.concatenate(parts) + evaluate(layout.shift, values)
    if flat.size < h.elements:
        flat = np.concatenate([flat, np.full(h.elements - flat.size, -1, np.int64)])
    return flat.reshape(h.shape)


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
    if not isinstance(h.layout, Dense):
        return None
    start = evaluate(h.layout.offset, values)
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
