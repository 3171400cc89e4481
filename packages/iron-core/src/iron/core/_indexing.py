"""Numpy-style indexing of handles: slices, windows, ellipses, reshaped bounds.

The pieces of ``Handle.__getitem__`` and ``Handle.reshape`` that read a key
or a bound: a per-call value made an expression, an ellipsis expanded, a
slice's start, stop and step (its stop, or its start with a fixed length,
may be per call), and a leading-axis bound carried through a reshape.
"""

from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING, Any

from iron.core.percall import Affine, PerCall

if TYPE_CHECKING:
    from iron.core.handle import Handle

__all__: list[str] = []


def _as_affine(x: int | PerCall | Affine) -> int | Affine:
    return x.affine() if isinstance(x, PerCall) else x


def _expand_ellipsis(key: tuple[Any, ...], ndim: int) -> tuple[Any, ...]:
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if not any(k is Ellipsis for k in key):
        return key
    i = next(i for i, k in enumerate(key) if k is Ellipsis)
    taken = sum(k is not None for k in key) - 1
    return key[:i] + (slice(None),) * (ndim - taken) + key[i + 1 :]


def _is_window(k: slice) -> bool:
    """Whether a slice starts at a per-call value (``x[p : p + 8]``)."""
    return isinstance(k.start, (PerCall, Affine))


def _slice(k: slice, size: int, h: Handle) -> tuple[int, int, int, Affine | None]:
    """A slice's static start, stop, step, and its per-call stop if any."""
    stop = k.stop
    if isinstance(stop, (PerCall, Affine)):
        if k.step not in (None, 1):
            raise ValueError(f"{h!r}: a per-call bound takes no step")
        start = 0 if k.start is None else k.start
        if not isinstance(start, int):
            raise ValueError(f"{h!r}: a bound x[a:n] takes a fixed start a")
        start = start % size if start < 0 else start
        bound = _as_affine(stop) - start
        return start, size, 1, bound if isinstance(bound, Affine) else None
    if any(isinstance(v, (PerCall, Affine)) for v in (k.start, k.step)):
        raise ValueError(f"{h!r}: only a slice's stop may be per call (x[:n])")
    start, stop, step = k.indices(size)
    return start, stop, step, None


def _rescale_bounds(h: Handle, shape: tuple[int, ...]) -> dict[int, int | Affine]:
    if not h.valid:
        return {}
    if set(h.valid) != {0} or not shape:
        raise ValueError(
            f"cannot reshape {h!r} to {list(shape)}: only a bound on the leading "
            f"axis survives a reshape"
        )
    old_row = prod(h.shape[1:])
    new_row = prod(shape[1:])
    bound = h.valid[0]
    if new_row and old_row % new_row == 0:
        return {0: bound * (old_row // new_row)}
    if old_row and new_row % old_row == 0:
        # rows merge: the bound must be a whole number of new rows
        exact = _exact_quotient(bound, new_row // old_row)
        if exact is not None:
            return {0: exact}
    raise ValueError(
        f"cannot reshape {h!r} to {list(shape)}: its bound {bound} is not a whole "
        f"number of rows of the new shape"
    )


def _exact_quotient(expr: int | Affine, k: int) -> int | Affine | None:
    """``expr / k`` when every coefficient and the constant divide by ``k``."""
    if isinstance(expr, int):
        return expr // k if expr % k == 0 else None
    if expr.const % k or any(c % k for _, c in expr.terms):
        return None
    return Affine(tuple((a, c // k) for a, c in expr.terms), expr.const // k)
