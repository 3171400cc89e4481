"""The attention kernel model and the bound its tolerance is derived from.

Shared arithmetic of ``iron.operators.attention`` (``DecodeAttention`` and
``CausalAttention``), which re-exports the public names:

- ``attend``: the kernel model, fp32 grouped-query attention (scores ``q . k``
  times ``1/sqrt(head_dim)``, max-subtracted fp32 softmax, the weighted sum of
  ``v`` divided by the sum of weights) rounded once to bf16; compiled where
  numba is (the ``jit`` extra), one row at a time in one order, so a row's
  bits depend only on its query, the cache and its limit (batch-invariant);
- ``fp32_error_bound``: the largest error of an fp32 evaluation of ``attend``
  in any order (chunked, with an online running max), from the inputs;
- ``unit_bound``: the same bound for any inputs in ``[-1, 1]``;
- ``bound_tolerance``: the ``Tolerance`` such a bound gives.
"""

from __future__ import annotations

import math
import sys
import threading
from typing import Any

import numpy as np
from ml_dtypes import bfloat16

from iron.core.tolerance import Tolerance
from iron.operators import matvec

#: Query rows the host reference takes at a time (bounds its memory).
ROW_BLOCK = 32

#: fp32 unit roundoff.
U = 2.0**-24
#: The kernel's fp32 exp is within 4 fp32 ulps (relative 8u) of exp.
EXP_ERROR = 8 * U
#: Floor for results a kernel flushes to zero (the smallest normal bf16).
FLUSH_FLOOR = 2.0**-126


def attend(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, limits: np.ndarray
) -> np.ndarray:
    """The kernel model: fp32 grouped-query attention, rounded once to bf16.

    With numba (:func:`iron.operators.matvec.available`) each row and head
    is computed alone, in one order: its scores ``q . k_j`` (head_dim
    products summed in the compiler's vector lanes, then the lanes), times
    the scale; their running max in position order; each weight
    ``exp(s_j - max)`` and the sums of weights and of weighted values in
    position order (each value element its own sum); one division. So a
    row's bits depend on its query, the cache's first ``limit`` positions
    and ``limit`` alone: a prompt chunk's row i (limit ``start + i + 1``) has
    the bits of the decode step at that position, whatever the chunk's size
    (batch-invariant). Without numba, numpy computes every head at once
    (:func:`attend_numpy`): within the same tolerance, not bit-invariant.

    Args:
        q: ``(rows, heads, head_dim)`` queries.
        k: ``(kv_heads, positions, head_dim)`` keys (only the first
            ``max(limits)`` positions are read).
        v: Values, as ``k``.
        limits: ``(rows,)`` how many leading positions each row attends to.

    Returns:
        ``(rows, heads, head_dim)`` bf16.
    """
    kernel = _compiled()
    if kernel is None:
        return attend_numpy(q, k, v, limits)
    rows, heads, head_dim = q.shape
    kv_heads = k.shape[0]
    end = int(limits.max()) if rows else 0
    out = np.empty((rows, heads, head_dim), np.float32)
    if rows and end:
        kernel(
            np.ascontiguousarray(q, dtype=np.float32),
            np.ascontiguousarray(k[:, :end], dtype=np.float32),
            np.ascontiguousarray(v[:, :end], dtype=np.float32),
            np.ascontiguousarray(limits, dtype=np.int64),
            out,
            heads // kv_heads,
            np.float32(1.0 / math.sqrt(head_dim)),
        )
    return out.astype(bfloat16)


_lock = threading.Lock()
_state: dict[str, Any] = {}


def _compiled() -> Any:
    """The compiled row kernel, or None without numba (or with IRON_JIT=0)."""
    if "kernel" not in _state:
        with _lock:
            if "kernel" not in _state:
                _state["kernel"] = _compile() if matvec.available() else None
    return _state["kernel"]


def _compile() -> Any:
    import numba

    # As matvec's kernels: reassoc lets a dot product sum in vector lanes
    # (an order fixed by head_dim alone); not nnan or ninf.
    flags = {"reassoc", "nsz", "contract"}

    @numba.njit(nogil=True, cache=True, fastmath=flags, boundscheck=False)
    def dot(a, b):  # pragma: no cover - compiled
        total = np.float32(0.0)
        for i in range(a.shape[0]):
            total += a[i] * b[i]
        return total

    @numba.njit(nogil=True, cache=True, boundscheck=False)
    def attend_rows(q, k, v, limits, out, group, scale):  # pragma: no cover
        # No fastmath here: the max, the weights and the sums over positions
        # are in position order, exactly as written.
        rows, heads, head_dim = q.shape
        scores = np.empty(k.shape[1], np.float32)
        acc = np.empty(head_dim, np.float32)
        for r in range(rows):
            length = limits[r]
            for h in range(heads):
                g = h // group
                top = np.float32(-np.inf)
                for j in range(length):
                    s = dot(q[r, h], k[g, j]) * scale
                    scores[j] = s
                    if s > top or s != s:  # once NaN, the max stays NaN (np.max)
                        top = s
                total = np.float32(0.0)
                acc[:] = 0.0
                for j in range(length):
                    w = np.exp(scores[j] - top)
                    total += w
                    for d in range(head_dim):
                        acc[d] += w * v[g, j, d]
                for d in range(head_dim):
                    out[r, h, d] = acc[d] / total

    return attend_rows


def attend_numpy(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, limits: np.ndarray
) -> np.ndarray:
    """:func:`attend` in numpy, every key-value head at once.

    Per row and head, the same matrix products (one BLAS call each, of the
    same shapes and strides), the same elementwise operations and the same
    reductions along contiguous rows as a loop over the heads would make,
    so the same bits. Masking selects nothing away when every row attends
    to every position read. A row's bits may depend on the rows beside it
    (BLAS picks kernels by shape).
    """
    rows, heads, head_dim = q.shape
    kv_heads = k.shape[0]
    group = heads // kv_heads
    end = int(limits.max()) if rows else 0
    scale = np.float32(1.0 / math.sqrt(head_dim))
    qf = q.astype(np.float32).reshape(rows, kv_heads, group, head_dim)
    kf = k[:, :end].astype(np.float32)
    vf = v[:, :end].astype(np.float32)
    keys = kf.transpose(0, 2, 1)  # (kv_heads, head_dim, end): each head's k.T
    out = np.empty((rows, kv_heads, group, head_dim), np.float32)
    attended = np.arange(end)[None, :] < limits[:, None]  # (rows, end)
    # as many rows at a time as a head at a time took ROW_BLOCK rows
    block = max(1, ROW_BLOCK // max(kv_heads, 1))
    with np.errstate(all="ignore"):
        for r in range(0, rows, block):
            mask = attended[r : r + block]
            every = bool(mask.all())
            scores = np.matmul(qf[r : r + block], keys)  # (b, kv, group, end)
            scores *= scale
            if not every:
                scores = np.where(mask[:, None, None, :], scores, np.float32(-np.inf))
            top = scores.max(axis=-1, keepdims=True)
            weights = np.exp(scores - top)
            if not every:
                weights = np.where(mask[:, None, None, :], weights, np.float32(0))
            total = weights.sum(axis=-1, keepdims=True, dtype=np.float32)
            # Positions not attended are selected away: a NaN there is unread.
            values = np.where(mask[:, None, :, None], vf[None], np.float32(0))
            acc = np.matmul(weights, values)  # (b, kv, group, head_dim) fp32
            np.divide(acc, total, out=out[r : r + block])
    return out.reshape(rows, heads, head_dim).astype(bfloat16)


def fp32_error_bound(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, limits: np.ndarray, chunks: int
) -> float:
    """The largest error of an fp32 evaluation of ``attend``, before its rounding.

    For each output, a first-order bound (then made safe for large exponent
    errors) on ``|o32 - o|``, ``o32`` an fp32 evaluation in any order and ``o``
    the exact attention. With ``u = 2**-24``, ``D = head_dim``,
    ``a_j = scale * sum_i |q_i k_ji|`` and ``m`` the largest score:

    - a score's error is ``(D + 2) u a_j`` (a dot product of ``D`` exact
      products, the scale), so the exponent ``s_j - m`` is off by
      ``d_j = (D + 2) u (a_j + a_m) + u |s_j - m|``;
    - a weight's relative error is ``eta_j = expm1(d_j)(1 + e) + e + c``, with
      ``e`` the fp32 exp's error (4 ulps) and ``c = chunks * (e + 4u)`` the
      running-max rescales at chunk boundaries;
    - the sums of ``L`` terms add ``g = (L + 1) u``;
    - so ``|o32 - o| <= (sum_j p_j (eta_j + g) |v_j| + |o| sum_j p_j (eta_j + g))
      / (P * low) + u |o|``, with ``P = sum_j p_j`` and ``low`` the least
      ratio of the computed sum of weights to ``P``.

    Non-finite inputs count as 0 here (NaN and infinities are judged apart).

    Returns:
        The bound's largest value over every output element (a finite float).
    """
    rows, heads, head_dim = q.shape
    kv_heads = k.shape[0]
    group = heads // kv_heads
    end = int(limits.max()) if rows else 0
    if end == 0:
        return 0.0

    def finite(x: np.ndarray) -> np.ndarray:
        x = x.astype(np.float64)
        return np.where(np.isfinite(x), x, 0.0)

    scale = 1.0 / math.sqrt(head_dim)
    qd = finite(q).reshape(rows, kv_heads, group, head_dim)
    kd, vd = finite(k[:, :end]), finite(v[:, :end])
    attended = (np.arange(end)[None, :] < limits[:, None])[:, None, :]
    worst = 0.0
    with np.errstate(all="ignore"):
        for g in range(kv_heads):
            s = np.matmul(qd[:, g], kd[g].T) * scale  # (rows, group, end)
            a = np.matmul(np.abs(qd[:, g]), np.abs(kd[g]).T) * scale
            s = np.where(attended, s, -np.inf)
            top = np.argmax(s, axis=-1)[..., None]
            m = np.take_along_axis(s, top, axis=-1)
            a_m = np.take_along_axis(a, top, axis=-1)
            gap = np.where(attended, np.abs(s - m), 0.0)
            d = (head_dim + 2) * U * (a + a_m) + U * gap
            d = np.where(attended, d, 0.0)
            eta = np.expm1(d) * (1 + EXP_ERROR) + EXP_ERROR
            eta += chunks * (EXP_ERROR + 4 * U)
            gamma = ((limits + 1) * U)[:, None, None]
            p = np.where(attended, np.exp(s - m), 0.0)
            P = p.sum(axis=-1, keepdims=True)
            weighted = p * (eta + gamma)
            o = np.matmul(p, vd[g]) / P
            dn = np.matmul(weighted, np.abs(vd[g]))
            dp = weighted.sum(axis=-1, keepdims=True)
            low = np.min(np.where(attended, np.exp(-d), 1.0), axis=-1, keepdims=True)
            low = low * (1 - EXP_ERROR) * (1 - gamma)
            low = np.maximum(low, sys.float_info.min)
            bound = (dn + np.abs(o) * dp) / (P * low) + U * np.abs(o)
            bound = np.where(np.isfinite(bound), bound, sys.float_info.max)
            worst = max(worst, float(bound.max()))
    return min(worst, sys.float_info.max)


def unit_bound(head_dim: int, length: int, chunks: int) -> float:
    """``fp32_error_bound`` for any inputs with every element in ``[-1, 1]``."""
    root = math.sqrt(head_dim)  # a_j <= scale * head_dim
    d = (head_dim + 2) * U * 2 * root + U * 2 * root
    eta = math.expm1(d) * (1 + EXP_ERROR) + EXP_ERROR + chunks * (EXP_ERROR + 4 * U)
    gamma = (length + 1) * U
    low = math.exp(-d) * (1 - EXP_ERROR) * (1 - gamma)
    # |v| <= 1 and |o| <= 1: both sums are at most P * (eta + gamma).
    return 2 * (eta + gamma) / low + U


def bound_tolerance(bound: float, where: str) -> Tolerance:
    """One bf16 ulp, or an absolute ``4 * bound`` (plus the flush floor)."""
    # Device and reference are each within E of the exact result, so within
    # 2E of each other; a rounding to bf16 each adds at most half an ulp,
    # which is at most E where the 1-ulp rule does not already hold: 4E.
    atol = min(4 * bound + FLUSH_FLOOR, sys.float_info.max)
    return Tolerance.bf16_ulps(
        1,
        atol=atol,
        note=(
            "fp32 scores, softmax and weighted sum, one rounding to bf16: within "
            "1 bf16 ulp, or within atol = 4E + 2**-126 where E bounds an fp32 "
            f"evaluation's error in any order ({where}; dot products of head_dim "
            "exact products, exp within 4 fp32 ulps, sums of length terms, chunk "
            "rescales; see attention.fp32_error_bound); 4E covers two fp32 "
            "evaluations and their roundings, 2**-126 flushed subnormals"
        ),
    )
