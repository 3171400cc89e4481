"""How closely a device result must match its reference, and the check itself.

This module owns `Tolerance` (the contract an operator or kernel states for its
output), `Verdict` (the outcome of one comparison) and `compare` (which checks
its arguments, then judges a result against a reference under a tolerance).
The judgement is here too (which elements pass under each kind, how NaNs and
infinities are judged apart, the worst element, the detail line); the bf16
arithmetic it measures with (one correct rounding to bf16, the bf16 lattice)
is the private ``iron.core._bf16``, which also defines `bf16_ulp_distance`
(the bf16 lattice distance that the ulps kind is measured in), exported here.
"""

from __future__ import annotations

import hashlib
import math
import operator
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from ml_dtypes import bfloat16
from numpy.typing import ArrayLike

from iron.core._bf16 import bf16_ulp_distance, is_float, is_int, to_bf16

__all__ = ["Tolerance", "Verdict", "bf16_ulp_distance", "compare"]


def _fmt(x: float) -> str:
    """Format a tolerance figure or an error compactly (three significant digits)."""
    return f"{x:.3g}"


def _check_bound(name: str, value: float | None) -> float | None:
    """Return ``value`` as a float, or raise if it is not a finite non-negative number."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise TypeError(
            f"Tolerance {name}={value!r} is not a number; give a non-negative float"
        )
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(
            f"Tolerance {name}={value!r} is invalid; give a finite number >= 0"
        )
    return value


@dataclass(frozen=True)
class Tolerance:
    """How closely a result must match its reference, elementwise.

    The kind follows from which fields are set:

    * **exact** (none of ``rtol``, ``atol``, ``ulps``): each element must equal
      the reference after the reference is cast to the result's dtype. For
      floats this is bit equality, except that any NaN matches any NaN and
      ``-0`` equals ``+0``.
    * **ulps** (``ulps`` set): the reference is first rounded correctly (to
      nearest, ties to even) to bf16, and the result is rounded likewise; an
      element passes when the two are at most ``ulps`` steps apart in the
      ordered bf16 lattice (see `bf16_ulp_distance`), or when
      ``|result - reference| <= atol`` if ``atol`` is set. The ``atol`` floor is
      meant for subnormals a kernel flushes to zero; ``2**-126``, the smallest
      normal bf16, is the usual figure.
    * **relative** (``rtol`` and/or ``atol`` set, ``ulps`` not): an element
      passes when ``|a - b| <= max(atol, rtol * (|a| + |b|))``, the C++
      testbench's formula, with ``a`` the result, ``b`` the reference and an
      unset figure taken as 0.
    * **bounded** (``bound`` set, nothing else): an element passes when
      ``|a - b| <= bound``, a per-element absolute bound broadcast to the
      result's shape, usually computed from the step's inputs (a matmul's
      error grows with ``|A| @ |B|``, which no single relative figure
      follows under cancellation). ``+inf`` in the bound accepts any finite
      value there.

    Under every kind a NaN must match a NaN (the payload and sign do not
    matter), and an infinity must match an infinity of the same sign. Such
    mismatches are never excused by ``max_mismatch_frac``, which lets up to that
    fraction of the elements fall outside the tolerance otherwise (rounding
    outliers), and is 0 by default.

    Attributes:
        rtol: Relative figure of the relative kind, or None.
        atol: Absolute figure: the floor of the relative kind, or the
            alternative bound of the ulps kind; None when unused.
        ulps: Largest bf16 ULP distance allowed (ulps kind), or None.
        bound: Per-element absolute bound (bounded kind), a read-only float64
            array broadcast to the result's shape, or None.
        max_mismatch_frac: Fraction of elements, in ``[0, 1]``, allowed to fall
            outside the tolerance.
        note: Where the figures came from (a measurement, an error analysis, a
            kernel's contract), so a reviewer can tell evidence from a guess.

    Raises:
        ValueError: A figure is negative or not finite, ``ulps`` is negative,
            ``max_mismatch_frac`` is outside ``[0, 1]``, ``rtol`` is set
            together with ``ulps``, ``bound`` is set together with another
            figure, or ``bound`` has a negative or NaN element.
        TypeError: A figure is not a number, ``ulps`` is not an integer, or
            ``note`` is not a string.

    Example:
        >>> str(Tolerance.bf16_ulps(1))
        '<= 1 bf16 ulp'
        >>> Tolerance.relative(0.04, 1e-3).kind
        'relative'
    """

    rtol: float | None = None
    atol: float | None = None
    ulps: int | None = None
    max_mismatch_frac: float = 0.0
    note: str = ""
    bound: np.ndarray | None = field(default=None, compare=False)
    # The bound's shape and a digest of its bytes: what equality and hashing
    # compare in place of the array itself.
    _bound_key: tuple[Any, ...] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rtol", _check_bound("rtol", self.rtol))
        object.__setattr__(self, "atol", _check_bound("atol", self.atol))
        if self.ulps is not None:
            if isinstance(self.ulps, bool):
                raise TypeError(
                    f"Tolerance ulps={self.ulps!r} is not an integer; "
                    f"give a count of bf16 ULPs >= 0"
                )
            try:
                ulps = operator.index(self.ulps)
            except TypeError:
                raise TypeError(
                    f"Tolerance ulps={self.ulps!r} is not an integer; "
                    f"give a count of bf16 ULPs >= 0"
                ) from None
            if ulps < 0:
                raise ValueError(
                    f"Tolerance ulps={ulps} is negative; give a count of bf16 ULPs >= 0"
                )
            object.__setattr__(self, "ulps", int(ulps))
            if self.rtol is not None:
                raise ValueError(
                    f"Tolerance rtol={self.rtol} is set together with "
                    f"ulps={self.ulps}; an ulps tolerance takes only atol as a "
                    f"floor, so drop rtol or ulps"
                )
        frac = _check_bound("max_mismatch_frac", self.max_mismatch_frac)
        if frac is None:
            raise TypeError(
                "Tolerance max_mismatch_frac=None is not a number; give a "
                "fraction of the elements in [0, 1] (0.0 for none)"
            )
        if frac > 1:
            raise ValueError(
                f"Tolerance max_mismatch_frac={frac!r} is above 1; "
                f"give a fraction of the elements in [0, 1]"
            )
        object.__setattr__(self, "max_mismatch_frac", frac)
        if not isinstance(self.note, str):
            raise TypeError(
                f"Tolerance note={self.note!r} is not a string; give a str "
                f"saying where the figures came from"
            )
        if self.bound is not None:
            self._set_bound()

    def _set_bound(self) -> None:
        """Check ``bound`` and store it as a read-only float64 array with its key."""
        others = [
            f"{name}={getattr(self, name)}"
            for name in ("rtol", "atol", "ulps")
            if getattr(self, name) is not None
        ]
        if others:
            raise ValueError(
                f"Tolerance bound is set together with {', '.join(others)}; a "
                f"bounded tolerance is the bound alone, so drop the other figures"
            )
        try:
            bound = np.array(self.bound, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(
                f"Tolerance bound={self.bound!r} is not an array of numbers; give "
                f"a float array of per-element bounds >= 0"
            ) from None
        bad = np.isnan(bound) | (bound < 0)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"Tolerance bound has {float(bound[where])!r} at {where}; every element "
                f"must be >= 0 (use +inf where no finite bound holds)"
            )
        bound.setflags(write=False)
        digest = hashlib.blake2b(
            np.ascontiguousarray(bound).tobytes(), digest_size=16
        ).hexdigest()
        object.__setattr__(self, "bound", bound)
        object.__setattr__(self, "_bound_key", (bound.shape, digest))

    @classmethod
    def exact(cls, note: str = "") -> Tolerance:
        """Return the exact tolerance: equal after casting the reference.

        Args:
            note: Why exactness holds (for example, the operator only selects
                or moves values).

        Returns:
            A tolerance of kind ``"exact"``.
        """
        return cls(note=note)

    @classmethod
    def bf16_ulps(cls, n: int, atol: float | None = None, note: str = "") -> Tolerance:
        """Return a tolerance of at most ``n`` bf16 ULPs from the rounded reference.

        Args:
            n: Largest allowed distance in the bf16 lattice, ``>= 0``.
            atol: Optional absolute floor; an element also passes when
                ``|result - reference| <= atol`` (for subnormals flushed to
                zero, typically ``2**-126``).
            note: Where ``n`` came from.

        Returns:
            A tolerance of kind ``"ulps"``.

        Raises:
            ValueError: ``n`` or ``atol`` is negative.
        """
        return cls(atol=atol, ulps=n, note=note)

    @classmethod
    def relative(
        cls,
        rtol: float,
        atol: float = 0.0,
        max_mismatch_frac: float = 0.0,
        note: str = "",
    ) -> Tolerance:
        """Return the testbench tolerance ``|a - b| <= max(atol, rtol * (|a| + |b|))``.

        Args:
            rtol: Relative figure, ``>= 0``.
            atol: Absolute floor, ``>= 0``.
            max_mismatch_frac: Fraction of elements allowed outside, in ``[0, 1]``.
            note: Where the figures came from.

        Returns:
            A tolerance of kind ``"relative"``.

        Raises:
            ValueError: A figure is negative, or the fraction is outside ``[0, 1]``.
        """
        return cls(rtol=rtol, atol=atol, max_mismatch_frac=max_mismatch_frac, note=note)

    @classmethod
    def bounded(cls, bound: np.ndarray, note: str = "") -> Tolerance:
        """Return the tolerance ``|a - b| <= bound``, elementwise.

        Args:
            bound: Per-element absolute bounds, ``>= 0`` (``+inf`` allowed),
                broadcast to the result's shape when compared; typically
                derived from the step's inputs.
            note: The derivation the bound comes from.

        Returns:
            A tolerance of kind ``"bounded"``; the array is copied and made
            read-only.

        Raises:
            ValueError: An element is negative or NaN.
            TypeError: ``bound`` is not numeric.
        """
        return cls(bound=bound, note=note)

    @property
    def kind(self) -> Literal["exact", "ulps", "relative", "bounded"]:
        """Which rule applies: ``"exact"``, ``"ulps"``, ``"relative"`` or ``"bounded"``."""
        if self.bound is not None:
            return "bounded"
        if self.ulps is not None:
            return "ulps"
        if self.rtol is None and self.atol is None:
            return "exact"
        return "relative"

    def __str__(self) -> str:
        if self.kind == "exact":
            text = "exact"
        elif self.kind == "bounded":
            assert self.bound is not None
            text = "<= bound"
            if self.bound.size:
                text += f" (max {_fmt(float(self.bound.max()))})"
        elif self.kind == "ulps":
            unit = "ulp" if self.ulps == 1 else "ulps"
            text = f"<= {self.ulps} bf16 {unit}"
            if self.atol is not None:
                text += f" (atol {_fmt(self.atol)})"
        else:
            rtol = self.rtol or 0.0
            atol = self.atol or 0.0
            parts = []
            if rtol or not atol:
                parts.append(f"rel {_fmt(rtol)}")
            if atol or not rtol:
                parts.append(f"abs {_fmt(atol)}")
            text = ", ".join(parts)
        if self.max_mismatch_frac:
            text += f", {_fmt(100 * self.max_mismatch_frac)}% may mismatch"
        return text


@dataclass(frozen=True)
class Verdict:
    """The outcome of one `compare`: whether it passed, and how far off it was.

    Truthy exactly when it passed, so ``assert compare(...)`` works; ``str``
    gives ``detail`` prefixed with ``PASS:`` or ``FAIL:``.

    Attributes:
        passed: Whether the result is within the tolerance (all elements, or
            all but the allowed fraction, and no NaN or infinity mismatched).
        n: Number of elements compared.
        n_mismatch: Number of elements outside the tolerance.
        max_abs_err: Largest ``|result - reference|`` (inf when a NaN or an
            infinity mismatched; 0.0 when nothing was compared).
        max_ulp_err: Largest bf16 lattice distance between result and
            reference over elements where neither is NaN, for floating
            results; 0 for integer results.
        worst_index: Index of the worst element: the worst mismatch if any,
            else the element with the largest error; None when nothing was
            compared or every element matches exactly.
        tolerance: The tolerance judged against.
        detail: One readable line saying what was found.
    """

    passed: bool
    n: int
    n_mismatch: int
    max_abs_err: float
    max_ulp_err: int
    worst_index: tuple | None  # type: ignore[type-arg]  # the API snapshot spells it
    tolerance: Tolerance
    detail: str

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'}: {self.detail}"


def compare(
    result: ArrayLike,
    reference: ArrayLike,
    tolerance: Tolerance,
) -> Verdict:
    """Judge ``result`` against ``reference`` under ``tolerance``, elementwise.

    Errors are computed in float64. For a floating result, the exact kind casts
    the reference to the result's dtype first; the ulps kind rounds it to bf16;
    the relative and bounded kinds use it as given. For an integer (or bool) result, exact
    compares the cast reference for equality, and ulps and relative treat the
    values as numbers, with a ULP of 1 (the ulp distance is the absolute
    difference).

    Args:
        result: What the device produced: a numpy array of a real floating
            dtype (ml_dtypes bf16 included) or an integer dtype.
        reference: The expected values, of the same shape.
        tolerance: The contract to judge against.

    Returns:
        A `Verdict`; truthy when the result passed.

    Raises:
        ValueError: The shapes differ, or a bounded tolerance's bound does not
            broadcast to them.
        TypeError: ``tolerance`` is not a `Tolerance`, or a dtype is neither
            real floating nor integer.
    """
    if not isinstance(tolerance, Tolerance):
        raise TypeError(
            f"compare got tolerance={tolerance!r}; give a Tolerance, such as "
            f"Tolerance.exact() or Tolerance.bf16_ulps(1)"
        )
    res = np.asarray(result)
    ref = np.asarray(reference)
    if res.shape != ref.shape:
        raise ValueError(
            f"compare got a result of shape {res.shape} and a reference of "
            f"shape {ref.shape}; give a reference of the result's shape"
        )
    for name, arr in (("result", res), ("reference", ref)):
        if not (is_float(arr.dtype) or is_int(arr.dtype)):
            raise TypeError(
                f"compare got a {name} of dtype {arr.dtype}; give real floating "
                f"or integer values"
            )
    bound = None
    if tolerance.kind == "bounded":
        assert tolerance.bound is not None
        try:
            bound = np.broadcast_to(tolerance.bound, res.shape)
        except ValueError:
            raise ValueError(
                f"compare got a bounded tolerance of shape "
                f"{tolerance.bound.shape}, which does not broadcast to the "
                f"result's shape {res.shape}; give a bound of the result's shape"
            ) from None
    return _judge(res, ref, tolerance, bound)


def _num(x: float | int, integer: bool) -> str:
    """Format one element value for a verdict's detail."""
    return str(int(x)) if integer else repr(float(x))


def _judge(
    res: np.ndarray,
    ref: np.ndarray,
    tolerance: Tolerance,
    bound: np.ndarray | None,
) -> Verdict:
    """Judge checked arrays elementwise (see :func:`compare`).

    ``res`` and ``ref`` have one shape and real floating or integer dtypes;
    ``bound`` is the bounded kind's bound broadcast to that shape, else None.
    """
    integer = is_int(res.dtype)
    kind = tolerance.kind
    with np.errstate(all="ignore"):
        a = res.astype(np.float64)
        if kind != "exact":
            e = ref.astype(np.float64)
        elif res.dtype == bfloat16:
            e = to_bf16(ref).astype(np.float64)  # one correct rounding
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
            got = to_bf16(res).astype(np.float64)
            want = to_bf16(ref).astype(np.float64)
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
            assert tolerance.ulps is not None  # the ulps kind has ulps set
            dist = diff if integer else ulp.astype(np.float64)
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
        detail += f"; worst at {i}: got {_num(a[i].item(), integer)}, expected {_num(e[i].item(), integer)}"
        if nan_a[i] or nan_e[i]:
            detail += " (NaN must match NaN)"
        elif inf_a[i] or inf_e[i]:
            detail += " (an infinity must match an infinity of its sign)"
        elif integer:
            detail += f" (abs {_fmt(diff[i].item())})"
        else:
            unit = "ulp" if ulp[i] == 1 else "ulps"
            detail += f" (abs {_fmt(diff[i].item())}, {int(ulp[i])} {unit})"
    return Verdict(
        passed=bool(passed),
        n=n,
        n_mismatch=n_mismatch,
        max_abs_err=max_abs_err,
        max_ulp_err=max_ulp_err,
        worst_index=worst_index,
        tolerance=tolerance,
        detail=detail,
    )
