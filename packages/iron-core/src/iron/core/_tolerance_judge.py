"""The arithmetic behind `compare`: bf16 rounding, ulp distance, the judgement.

Private to :mod:`iron.core.tolerance`, which exports
:func:`~iron.core.tolerance.bf16_ulp_distance` from here. This module owns
telling real floating and integer dtypes apart (ml_dtypes' included), one
correct rounding to bf16, the ordered bf16 lattice the ulps kind counts
steps on, and the elementwise judgement ``compare`` delegates to once its
arguments are checked: which elements pass under each kind, how NaNs and
infinities are judged apart, the worst element, and the one-line detail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import ml_dtypes
import numpy as np
from ml_dtypes import bfloat16
from numpy.typing import ArrayLike

if TYPE_CHECKING:
    from iron.core.tolerance import Tolerance

# The distance bf16_ulp_distance reports between a NaN and anything not NaN.
_NAN_DISTANCE = int(np.iinfo(np.int64).max)


def _fmt(x: float) -> str:
    """Format a tolerance figure or an error compactly (three significant digits)."""
    return f"{x:.3g}"


def _is_float(dtype: np.dtype) -> bool:
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


def _is_int(dtype: np.dtype) -> bool:
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


def _to_bf16(x: np.ndarray) -> np.ndarray:
    """Round ``x`` to bf16, to nearest with ties to even, in one correct rounding.

    ml_dtypes converts float64 through float32, which can round twice; float64
    (and wider) input is therefore first narrowed to float32 rounding to odd,
    after which float32 -> bf16 rounding to nearest even is correct.
    """
    x = np.asarray(x)
    if x.dtype == bfloat16:
        return x
    if not (_is_float(x.dtype) or _is_int(x.dtype)):
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
    ra, rb = _to_bf16(np.asarray(a)), _to_bf16(np.asarray(b))
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


def _num(x: float | int, integer: bool) -> str:
    """Format one element value for a verdict's detail."""
    return str(int(x)) if integer else repr(float(x))


class _Judgement(NamedTuple):
    """What `_judge` found: every field of a ``Verdict`` but the tolerance."""

    passed: bool
    n: int
    n_mismatch: int
    max_abs_err: float
    max_ulp_err: int
    worst_index: tuple[int, ...] | None
    detail: str


def _judge(
    res: np.ndarray,
    ref: np.ndarray,
    tolerance: Tolerance,
    bound: np.ndarray | None,
) -> _Judgement:
    """Judge checked arrays elementwise (see ``iron.core.tolerance.compare``).

    ``res`` and ``ref`` have one shape and real floating or integer dtypes;
    ``bound`` is the bounded kind's bound broadcast to that shape, else None.
    """
    integer = _is_int(res.dtype)
    kind = tolerance.kind
    with np.errstate(all="ignore"):
        a = res.astype(np.float64)
        if kind != "exact":
            e = ref.astype(np.float64)
        elif res.dtype == bfloat16:
            e = _to_bf16(ref).astype(np.float64)  # one correct rounding
        else:
            e = ref.astype(res.dtype).astype(np.float64)
        if integer:
            ulp = np.zeros(res.shape, np.int64)
        else:
            ulp = bf16_ulp_distance(res, ref)
        diff = np.abs(a - e)

        # NaNs and infinities are judged apart from any figure; under the ulps
        # kind, on the bf16-rounded values the lattice distance is taken on.
        if kind == "ulps" and not integer:
            got = _to_bf16(res).astype(np.float64)
            want = _to_bf16(ref).astype(np.float64)
        else:
            got, want = a, e
        nan_a, nan_e = np.isnan(got), np.isnan(want)
        inf_a, inf_e = np.isinf(got), np.isinf(want)
        special = nan_a | nan_e | inf_a | inf_e
        special_ok = (nan_a & nan_e) | (~nan_a & ~nan_e & (got == want))
        special_bad = special & ~special_ok
        finite = ~special

        if kind == "exact":
            ok = a == e
            score = diff
        elif kind == "ulps":
            dist = diff if integer else ulp.astype(np.float64)
            assert tolerance.ulps is not None  # the ulps kind has ulps set
            ok = dist <= tolerance.ulps
            if tolerance.atol is not None:
                ok |= diff <= tolerance.atol
            score = dist
        elif kind == "bounded":
            assert bound is not None  # the bounded kind has its bound
            ok = diff <= bound
            score = np.where(diff == 0, 0.0, np.where(bound > 0, diff / bound, np.inf))
        else:
            rtol = tolerance.rtol or 0.0
            atol = tolerance.atol or 0.0
            allowed = np.maximum(atol, rtol * (np.abs(a) + np.abs(e)))
            ok = diff <= allowed
            score = np.where(
                diff == 0, 0.0, np.where(allowed > 0, diff / allowed, np.inf)
            )
        ok = np.where(special, special_ok, ok)
        score = np.where(special_bad, np.inf, np.where(special, 0.0, score))

    n = int(res.size)
    n_mismatch = int(np.count_nonzero(~ok))
    n_special_bad = int(np.count_nonzero(special_bad))
    allowed_mismatches = tolerance.max_mismatch_frac * n
    passed = n_special_bad == 0 and n_mismatch <= allowed_mismatches

    err = np.where(special_bad, np.inf, np.where(finite, diff, 0.0))
    max_abs_err = float(err.max()) if n else 0.0
    if integer or not n:
        max_ulp_err = 0
    else:
        no_nan = ~(np.isnan(a) | np.isnan(e))
        max_ulp_err = int(ulp[no_nan].max()) if no_nan.any() else 0

    worst_index: tuple[int, ...] | None = None
    if n_mismatch:
        flat = np.where(~ok.reshape(-1), score.reshape(-1), -1.0)
        worst_index = tuple(int(i) for i in np.unravel_index(flat.argmax(), res.shape))
    elif n and (score.max() > 0 or err.max() > 0):
        flat = score.reshape(-1) if score.max() > 0 else err.reshape(-1)
        worst_index = tuple(int(i) for i in np.unravel_index(flat.argmax(), res.shape))

    if n_mismatch == 0:
        detail = f"{n} elements within {tolerance}"
        if max_abs_err > 0:
            detail += f" (max abs {_fmt(max_abs_err)}"
            if not integer:
                unit = "ulp" if max_ulp_err == 1 else "ulps"
                detail += f", {max_ulp_err} {unit}"
            detail += ")"
    else:
        detail = f"{n_mismatch} of {n} elements outside {tolerance}"
        if passed:
            detail += " (within the allowed fraction)"
        elif n_special_bad and n_mismatch <= allowed_mismatches:
            detail += " (NaN or infinity mismatches are never allowed)"
        i = worst_index
        detail += (
            f"; worst at {i}: got {_num(float(a[i]), integer)}, "
            f"expected {_num(float(e[i]), integer)}"
        )
        if nan_a[i] or nan_e[i]:
            detail += " (NaN must match NaN)"
        elif inf_a[i] or inf_e[i]:
            detail += " (an infinity must match an infinity of its sign)"
        elif integer:
            detail += f" (abs {_fmt(float(diff[i]))})"
        else:
            unit = "ulp" if ulp[i] == 1 else "ulps"
            detail += f" (abs {_fmt(float(diff[i]))}, {int(ulp[i])} {unit})"
    return _Judgement(
        passed=bool(passed),
        n=n,
        n_mismatch=n_mismatch,
        max_abs_err=max_abs_err,
        max_ulp_err=max_ulp_err,
        worst_index=worst_index,
        detail=detail,
    )
