"""The bf16 arithmetic `compare` measures with: dtypes, rounding, ulp distance.

Private to :mod:`iron.core.tolerance`, which exports
:func:`~iron.core.tolerance.bf16_ulp_distance` from here. This module owns
telling real floating and integer dtypes apart (ml_dtypes' included), one
correct rounding to bf16, and the ordered bf16 lattice the ulps kind counts
steps on.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from ml_dtypes import bfloat16
from numpy.typing import ArrayLike

__all__ = ["bf16_ulp_distance", "is_float", "is_int", "to_bf16"]

# The distance bf16_ulp_distance reports between a NaN and anything not NaN.
_NAN_DISTANCE = int(np.iinfo(np.int64).max)


def is_float(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is a real floating type (numpy's or ml_dtypes')."""
    if dtype.kind == "f":
        return True
    if dtype.kind != "V":
        return False
    try:
        ml_dtypes.finfo(dtype)
    except (TypeError, ValueError):
        return False
    return True


def is_int(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is an integer or bool type (numpy's or ml_dtypes')."""
    if dtype.kind in "iub":
        return True
    if dtype.kind != "V":
        return False
    try:
        ml_dtypes.iinfo(dtype)
    except (TypeError, ValueError):
        return False
    return True


def to_bf16(x: np.ndarray) -> np.ndarray:
    """Round ``x`` to bf16, to nearest with ties to even, in one correct rounding.

    ml_dtypes converts float64 through float32, which can round twice; float64
    (and wider) input is therefore first narrowed to float32 rounding to odd,
    after which float32 -> bf16 rounding to nearest even is correct.
    """
    x = np.asarray(x)
    if x.dtype == bfloat16:
        return x
    if not (is_float(x.dtype) or is_int(x.dtype)):
        raise TypeError(
            f"cannot round dtype {x.dtype} to bf16; give real floating or "
            f"integer values"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        if (x.dtype.kind == "f" and x.dtype.itemsize <= 4) or x.dtype.kind == "V":
            return x.astype(np.float32).astype(bfloat16)
        wide = x.astype(np.float64)
        narrow = wide.astype(np.float32)
        # Step values rounded away from zero back toward zero: truncation.
        away = np.abs(narrow.astype(np.float64)) > np.abs(wide)
        narrow = np.where(away, np.nextafter(narrow, np.float32(0)), narrow)
        inexact = (narrow.astype(np.float64) != wide) & ~np.isnan(wide)
        bits = narrow.view(np.uint32) | inexact.astype(np.uint32)  # sticky bit
        rounded: np.ndarray = bits.view(np.float32).astype(bfloat16)
        return rounded


def _lattice(x: np.ndarray) -> np.ndarray:
    """Map bf16 values to int64 positions, monotonic in value, with -0 == +0."""
    bits = x.view(np.uint16).astype(np.int64)
    return np.where(bits & 0x8000, -(bits & 0x7FFF), bits)


def bf16_ulp_distance(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Return how many bf16 steps apart ``a`` and ``b`` are, elementwise.

    Each input is first rounded to bf16 (to nearest, ties to even, as one
    correct rounding even from float64). The bf16 bit patterns are then
    placed on one ordered integer lattice (a negative value at
    ``-(bits & 0x7fff)``, a positive one at ``bits``), so ``-0`` and ``+0``
    coincide, adjacent bf16 values are 1 apart, the smallest subnormals are 1
    from zero, and the largest finite value is 1 from infinity. Two NaNs are
    0 apart; a NaN and anything else are ``np.iinfo(np.int64).max`` apart.

    Args:
        a: Values of any real floating or integer dtype (bf16 included).
        b: Values of the same or a broadcast-compatible shape.

    Returns:
        An int64 array of the broadcast shape.

    Raises:
        ValueError: The shapes do not broadcast together.
        TypeError: An input is not real floating or integer.

    Example:
        >>> int(bf16_ulp_distance(1.0, 1.0078125))
        1
    """
    ra, rb = to_bf16(np.asarray(a)), to_bf16(np.asarray(b))
    try:
        ra, rb = np.broadcast_arrays(ra, rb)
    except ValueError:
        raise ValueError(
            f"bf16_ulp_distance got shapes {ra.shape} and {rb.shape}, which do "
            f"not broadcast; give arrays of one shape"
        ) from None
    dist = np.abs(_lattice(ra) - _lattice(rb))
    nan_a, nan_b = np.isnan(ra), np.isnan(rb)
    nan_dist = np.where(nan_a & nan_b, 0, _NAN_DISTANCE)
    return np.where(nan_a | nan_b, nan_dist, dist).astype(np.int64, copy=False)
