"""A compiled matrix-vector product for the kernel models of bf16 weights.

A decode step is a chain of matrix-vector products over its weights, so the
emulated NPU's speed is the speed of reading them. numpy's BLAS has only a
float32 ``sgemv``: a bf16 weight must first be widened to float32, so it
reads twice the weight's bytes (and holds a float32 copy, or widens on
every call). :func:`matvec` reads the bf16 weight itself: each row is
widened in registers (a bf16 is the upper half of a float32's bits) and
its float32 products summed there, rows split across the machine's
cores. :func:`qmatvec` does the same for packed q4/q8 rows
(``iron.operators.quantized``), dequantizing each row as it sums it. Both
are compiled with numba, the ``jit`` extra of iron-operators (iron-lm
installs it); without numba, :func:`available` is false and the kernel
models keep numpy's path (``model_product``'s BLAS, ``QGEMV``'s
dequantized copy).

The arithmetic is the ``HIGHEST`` level's model (``iron.operators.matmul``):
float32 products summed in float32 in some order, rounded once to bf16 by
the caller. The order is the compiler's (vector lanes, then a lane sum) and
fixed for a given K on a given machine: a row's bits never depend on the
other rows, on how rows are split among threads, or on whether the weight
came as bf16 or as its float32 copy (tested), as BLAS's rows do not (see
``_matmul_math._row_block``).

``IRON_JIT=0`` in the environment turns the compiled path off (read at the
first product), for comparing the two or where numba misbehaves.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from ml_dtypes import bfloat16

__all__ = ["available", "matvec", "matvecs", "qdecode", "qmatvec", "qmatvecs"]

#: A weight below this many bytes runs on the calling thread alone: waking a
#: pool thread costs more than it saves. Measured on the project's 2-core
#: development machine, a token's GEMVs in a loop: a 135M Llama's layer
#: weights (0.2-1.8 MB each) took 13 ms inline against 19 ms split from
#: 512 KB; Llama-3.2-1B's (2-32 MB) took the same either way within noise.
_SPLIT_BYTES = 1 << 22
#: The most float32 bytes of vectors one pass over a weight's rows meets
#: (:func:`matvecs`): more vectors take more passes, each block still cached
#: when the next weight row comes.
_VECTOR_BYTES = 1 << 18

_lock = threading.Lock()
_state: dict[str, Any] = {}


def _compile() -> dict[str, Any]:
    """The compiled row kernels and the core count, or ``{}`` without numba."""
    if os.environ.get("IRON_JIT", "1").strip() == "0" or sys.byteorder != "little":
        return {}
    try:
        import numba
    except ImportError:
        return {}
    # reassoc lets the compiler sum in vector lanes; nsz lets it start a
    # sum at +0 and contract use fused multiply-adds (a bf16 product is
    # exact in float32, so they change no bits there). Not nnan or ninf:
    # NaN and infinities propagate as IEEE sums do.
    flags = {"reassoc", "nsz", "contract"}

    # Every kernel sums one output element with dot_pairs' loop (or its
    # copy over packed bf16 words, rows_bf16's): K/2 pairs in order, the
    # compiler's vector lanes, then their sum. A kernel takes the vectors as
    # rows of ``even``/``odd`` (R, K/2) and writes ``out`` (R, M), element
    # (b, r) the weight row r's sum with vector b: the loop over b runs
    # outside the sum, so an element's bits never depend on R, on the other
    # rows or vectors, or on the thread that made it (tested).
    @numba.njit(nogil=True, cache=True, fastmath=flags, boundscheck=False)
    def dot_words(row, even, odd):  # pragma: no cover - compiled
        # a row's bf16 pairs as one uint32 each: the first element's bits
        # are the low half, the second's the high half (little-endian)
        low, high = np.uint32(16), np.uint32(0xFFFF0000)
        total = np.float32(0.0)
        for j in range(row.shape[0]):
            w = row[j]
            total += np.uint32(w << low).view(np.float32) * even[j]
            total += np.uint32(w & high).view(np.float32) * odd[j]
        return total

    @numba.njit(nogil=True, cache=True, fastmath=flags, boundscheck=False)
    def rows_bf16(pairs, even, odd, out, first, last):  # pragma: no cover - compiled
        for r in range(first, last):
            row = pairs[r]
            for b in range(even.shape[0]):
                out[b, r] = dot_words(row, even[b], odd[b])

    @numba.njit(nogil=True, cache=True, fastmath=flags, boundscheck=False)
    def dot_pairs(row, even, odd):  # pragma: no cover - compiled
        # dot_words' loop over float32 values: the same sums, the same bits
        total = np.float32(0.0)
        for j in range(even.shape[0]):
            total += row[2 * j] * even[j]
            total += row[2 * j + 1] * odd[j]
        return total

    @numba.njit(nogil=True, cache=True, fastmath=flags, boundscheck=False)
    def rows_f32(a, even, odd, out, first, last):  # pragma: no cover - compiled
        for r in range(first, last):
            row = a[r]
            for b in range(even.shape[0]):
                out[b, r] = dot_pairs(row, even[b], odd[b])

    # Dequantizing is exact IEEE arithmetic: each weight is
    # quantized.dequantize's float32, rounded to bf16 as ml_dtypes rounds.
    # The product scale * q is exact in float32 (11 + 8 bits at most), so
    # a fused multiply-add ("contract") rounds scale * q + min once, as
    # numpy's multiply then add does: the same bits.
    @numba.njit(nogil=True, cache=True, boundscheck=False)
    def f16_value(lo, hi):  # pragma: no cover - compiled
        # a little-endian float16's value, exact in float32, without a
        # branch: its magnitude bits shifted into float32's, times 2**112,
        # rebias exponents and makes subnormals normal exactly; infinities
        # and NaNs (exponent 31) keep their payload under an all-ones one
        h = np.uint32(lo) | (np.uint32(hi) << np.uint32(8))
        shifted = np.uint32((h & np.uint32(0x7FFF)) << np.uint32(13))
        value = np.uint32(shifted).view(np.float32) * np.float32(2.0**112)
        special = np.uint32(shifted | np.uint32(0x7F800000))
        wide = (h & np.uint32(0x7C00)) == np.uint32(0x7C00)
        bits = np.uint32(special if wide else np.float32(value).view(np.uint32))
        sign = np.uint32((h & np.uint32(0x8000)) << np.uint32(16))
        return np.uint32(bits | sign).view(np.float32)

    @numba.njit(nogil=True, cache=True, boundscheck=False)
    def bf16_any(value):  # pragma: no cover - compiled
        # a float32 rounded to the nearest bf16 (ties to even), as float32;
        # NaN as ml_dtypes makes it (quiet, the same sign)
        bits = np.float32(value).view(np.uint32)
        up = np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
        rounded = np.uint32((bits + up) & np.uint32(0xFFFF0000))
        quiet = np.uint32((bits & np.uint32(0x80000000)) | np.uint32(0x7FC00000))
        nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
        return np.uint32(quiet if nan else rounded).view(np.float32)

    @numba.njit(nogil=True, cache=True, boundscheck=False)
    def bf16_finite(value):  # pragma: no cover - compiled
        # bf16_any for a finite float32: no NaN test, so the loops vectorize
        bits = np.float32(value).view(np.uint32)
        up = np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
        return np.uint32((bits + up) & np.uint32(0xFFFF0000)).view(np.float32)

    @numba.njit(nogil=True, cache=True, boundscheck=False)
    def headers(row, scales, mins, bits, size):  # pragma: no cover - compiled
        # each group's float16 scale (and minimum): whether all are finite
        for g in range(scales.shape[0]):
            at = g * size
            scales[g] = f16_value(row[at], row[at + 1])
            mins[g] = f16_value(row[at + 2], row[at + 3]) if bits == 4 else 0.0
        finite = True
        for g in range(scales.shape[0]):
            finite = finite & np.isfinite(scales[g]) & np.isfinite(mins[g])
        return finite

    # A packed row's bf16 values (as float32) split as the vectors are:
    # element 2j to even[j], 2j + 1 to odd[j]. A row whose scales and
    # minimums are all finite (every row a quantizer writes) rounds without
    # a NaN test, so its loop vectorizes: its values cannot be NaN (at most
    # 65504 * 255 in magnitude). Each format has its own loops.
    @numba.njit(nogil=True, cache=True, boundscheck=False, fastmath={"contract"})
    def dequant4(row, even, odd, scales, mins, group):  # pragma: no cover
        half = group // 2
        size = 4 + half
        finite = headers(row, scales, mins, 4, size)
        for g in range(scales.shape[0]):
            scale = scales[g]
            low = mins[g]
            codes = g * size + 4
            first = g * half
            if finite:
                for i in range(half):
                    code = row[codes + i]
                    e = np.float32(np.int32(code & np.uint8(15)))
                    o = np.float32(np.int32(code >> np.uint8(4)))
                    even[first + i] = bf16_finite(scale * e + low)
                    odd[first + i] = bf16_finite(scale * o + low)
            else:
                for i in range(half):
                    code = row[codes + i]
                    e = np.float32(np.int32(code & np.uint8(15)))
                    o = np.float32(np.int32(code >> np.uint8(4)))
                    even[first + i] = bf16_any(scale * e + low)
                    odd[first + i] = bf16_any(scale * o + low)

    @numba.njit(nogil=True, cache=True, boundscheck=False, fastmath={"contract"})
    def dequant8(row, wide, scales, mins, group):  # pragma: no cover
        # the code bytes as two's complement, in order (wide holds a row;
        # dot_pairs reads it as pairs)
        size = 2 + group
        finite = headers(row, scales, mins, 8, size)
        for g in range(scales.shape[0]):
            scale = scales[g]
            codes = g * size + 2
            first = g * group
            if finite:
                for i in range(group):
                    q = np.float32(np.int32(np.int8(row[codes + i])))
                    wide[first + i] = bf16_finite(scale * q)
            else:
                for i in range(group):
                    q = np.float32(np.int32(np.int8(row[codes + i])))
                    wide[first + i] = bf16_any(scale * q)

    @numba.njit(nogil=True, cache=True, fastmath=flags, boundscheck=False)
    def dot_split(row_even, row_odd, even, odd):  # pragma: no cover - compiled
        # dot_pairs' loop over a row already split in two: the same sums
        total = np.float32(0.0)
        for j in range(even.shape[0]):
            total += row_even[j] * even[j]
            total += row_odd[j] * odd[j]
        return total

    @numba.njit(nogil=True, cache=True, fastmath=flags, boundscheck=False)
    def rows_packed(
        packed, even, odd, out, first, last, bits, group
    ):  # pragma: no cover
        half = even.shape[1]
        row_even = np.empty(half, np.float32)
        row_odd = np.empty(half, np.float32)
        wide = np.empty(2 * half if bits == 8 else 0, np.float32)
        scales = np.empty(2 * half // group, np.float32)
        mins = np.empty(2 * half // group, np.float32)
        for r in range(first, last):
            if bits == 4:  # split as the vectors are
                dequant4(packed[r], row_even, row_odd, scales, mins, group)
                for b in range(even.shape[0]):
                    out[b, r] = dot_split(row_even, row_odd, even[b], odd[b])
            else:  # in order
                dequant8(packed[r], wide, scales, mins, group)
                for b in range(even.shape[0]):
                    out[b, r] = dot_pairs(wide, even[b], odd[b])

    @numba.njit(nogil=True, cache=True, boundscheck=False)
    def rows_decoded(packed, out, first, last, bits, group):  # pragma: no cover
        # each packed row's bf16 values (their float32's upper halves: the
        # values are bf16 already), in order, into out's uint16 rows
        k = out.shape[1]
        row_even = np.empty(k // 2, np.float32)
        row_odd = np.empty(k // 2, np.float32)
        wide = np.empty(k if bits == 8 else 0, np.float32)
        scales = np.empty(k // group, np.float32)
        mins = np.empty(k // group, np.float32)
        high = np.uint32(16)
        for r in range(first, last):
            row = out[r]
            if bits == 4:
                dequant4(packed[r], row_even, row_odd, scales, mins, group)
                for j in range(k // 2):
                    row[2 * j] = np.uint16(
                        np.float32(row_even[j]).view(np.uint32) >> high
                    )
                    row[2 * j + 1] = np.uint16(
                        np.float32(row_odd[j]).view(np.uint32) >> high
                    )
            else:
                dequant8(packed[r], wide, scales, mins, group)
                for j in range(k):
                    row[j] = np.uint16(np.float32(wide[j]).view(np.uint32) >> high)

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    cores = max(1, cores or os.cpu_count() or 1)
    return {
        "bf16": rows_bf16,
        "f32": rows_f32,
        "packed": rows_packed,
        "decoded": rows_decoded,
        "cores": cores,
    }


def _pool(cores: int) -> ThreadPoolExecutor:
    """This process's pool of ``cores - 1`` threads (the caller is the last).

    Made again in a forked child: the parent's threads do not exist there,
    and a pool that counts them as idle would never run the child's work.
    """
    pid = os.getpid()
    made = _state.get("pool")
    if made is None or made[0] != pid:
        with _lock:
            made = _state.get("pool")
            if made is None or made[0] != pid:
                pool = ThreadPoolExecutor(cores - 1, thread_name_prefix="iron-matvec")
                made = _state["pool"] = (pid, pool)
    return made[1]


def _kernels() -> dict[str, Any]:
    state = _state.get("kernels")
    if state is None:
        with _lock:
            state = _state.get("kernels")
            if state is None:
                state = _state["kernels"] = _compile()
    return state


def available() -> bool:
    """Whether :func:`matvec` and :func:`qmatvec` run compiled.

    True with numba installed and ``IRON_JIT`` not ``0``.
    """
    return bool(_kernels())


def matvec(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``a @ x`` in float32, reading a bf16 ``a`` at its own two bytes an element.

    Each row is read as pairs of bf16 (one 32-bit word each), widened by a
    shift and a mask; so K is even (a device's K always is: GEMV's tiles
    are multiples of 16). :func:`matvecs` with ``x`` as its one row: the
    same bits.

    Args:
        a: ``(M, K)`` bf16 or float32 values (a weight, row-major or not),
            K even.
        x: ``(K,)`` values, used as float32.

    Returns:
        The ``(M,)`` float32 sums, each row's the same bits whether ``a`` is
        bf16 or its float32 copy.

    Raises:
        RuntimeError: The compiled kernels are not available (check
            :func:`available` first).
        ValueError: The shapes do not fit, or K is odd.
    """
    _needed("matvec")
    if a.ndim != 2 or x.shape != (a.shape[1],) or a.shape[1] % 2:
        raise ValueError(
            f"matvec: a {list(a.shape)} and x {list(x.shape)} do not fit; "
            f"give a (M, K) matrix and a (K,) vector, K even"
        )
    return matvecs(a, x[None])[0]


def matvecs(a: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """``a @ x`` for every row ``x`` of ``xs``: ``xs @ a.T`` in float32.

    The matrix product of a prompt chunk's rows with a weight, summed
    element by element as :func:`matvec` sums one: element ``(b, r)`` has
    the bits of ``matvec(a, xs[b])[r]``, whatever the other rows (the
    batch-invariant order a decode step and a prompt chunk share). The
    weight is read once; each of its rows meets every vector while cached.

    Args:
        a: ``(M, K)`` bf16 or float32 values, K even.
        xs: ``(R, K)`` values, used as float32.

    Returns:
        The ``(R, M)`` float32 sums.

    Raises:
        RuntimeError: The compiled kernels are not available.
        ValueError: The shapes do not fit, or K is odd.
    """
    kernels = _needed("matvecs")
    if a.ndim != 2 or xs.ndim != 2 or xs.shape[1] != a.shape[1] or a.shape[1] % 2:
        raise ValueError(
            f"matvecs: a {list(a.shape)} and x {list(xs.shape)} do not fit; "
            f"give a (M, K) matrix and (R, K) vectors (one (K,) vector to "
            f"matvec), K even"
        )
    even, odd = _halves(xs)
    if a.dtype == bfloat16:
        rows: Callable[..., None] = kernels["bf16"]
        a = np.ascontiguousarray(a).view(np.uint32)
    else:
        rows = kernels["f32"]
        a = np.ascontiguousarray(a, dtype=np.float32)
    return _split(rows, a, even, odd, kernels["cores"])


def qmatvec(packed: np.ndarray, x: np.ndarray, bits: int, group: int) -> np.ndarray:
    """``bf16(dequantize(packed)) @ x`` in float32, reading the packed rows.

    Each row is dequantized in a core's cache, exactly as
    ``iron.operators.quantized.dequantize`` and a rounding to bf16 make it,
    then summed as :func:`matvec` sums a bf16 row: the same bits as
    ``matvec(dequantize(packed, fmt).astype(bfloat16), x)`` (tested), from
    about a quarter (q4) or half (q8) of the bf16 weight's bytes.
    :func:`qmatvecs` with ``x`` as its one row: the same bits.

    Args:
        packed: ``(M, row_bytes)`` uint8 rows of a ``bits``/``group`` format
            (``iron.operators.quantized``).
        x: ``(K,)`` values, used as float32; K even, whole groups.
        bits: 4 or 8.
        group: Elements per group.

    Returns:
        The ``(M,)`` float32 sums.

    Raises:
        RuntimeError: The compiled kernels are not available.
        ValueError: The shapes or the format do not fit.
    """
    if x.ndim != 1:
        raise ValueError(
            f"qmatvec: x has shape {list(x.shape)}; give a (K,) vector "
            f"(qmatvecs takes several as rows)"
        )
    _needed("qmatvec")
    return qmatvecs(packed, x[None], bits, group)[0]


def qmatvecs(packed: np.ndarray, xs: np.ndarray, bits: int, group: int) -> np.ndarray:
    """``bf16(dequantize(packed)) @ x`` for every row ``x`` of ``xs``.

    Each packed row is dequantized once and summed with every vector as
    :func:`qmatvec` sums one: element ``(b, r)`` has the bits of
    ``qmatvec(packed, xs[b], bits, group)[r]``.

    Args:
        packed: ``(M, row_bytes)`` uint8 rows of a ``bits``/``group`` format.
        xs: ``(R, K)`` values, used as float32; K even, whole groups.
        bits: 4 or 8.
        group: Elements per group.

    Returns:
        The ``(R, M)`` float32 sums.

    Raises:
        RuntimeError: The compiled kernels are not available.
        ValueError: The shapes or the format do not fit.
    """
    kernels = _needed("qmatvecs")
    k = xs.shape[1] if xs.ndim == 2 else -1
    size = (4 if bits == 4 else 2) + group * bits // 8
    if (
        bits not in (4, 8)
        or group <= 0
        or group % 2
        or k <= 0
        or k % group
        or packed.ndim != 2
        or packed.dtype != np.uint8
        or packed.shape[1] != k // group * size
    ):
        raise ValueError(
            f"qmatvecs: packed {list(packed.shape)} {packed.dtype} and x "
            f"{list(xs.shape)} are not rows of {bits}-bit groups of {group} for "
            f"K={k}; give (M, K / group * {size}) uint8 rows and (R, K) vectors"
        )
    even, odd = _halves(xs)
    packed = np.ascontiguousarray(packed)
    return _split(kernels["packed"], packed, even, odd, kernels["cores"], bits, group)


def qdecode(packed: np.ndarray, bits: int, group: int) -> np.ndarray:
    """The packed rows' values as the kernels compute with them: bf16 ``(M, K)``.

    ``bf16(dequantize(packed))`` (``iron.operators.quantized``), the same
    bits (tested, also for non-finite scales), made by :func:`qmatvec`'s
    compiled dequantizing loops: what a host keeping a packed weight
    decoded (``QGEMV.decoded``) makes once per upload.

    Args:
        packed: ``(M, row_bytes)`` uint8 rows of a ``bits``/``group`` format.
        bits: 4 or 8.
        group: Elements per group.

    Raises:
        RuntimeError: The compiled kernels are not available.
        ValueError: The rows are not of that format.
    """
    kernels = _needed("qdecode")
    size = (4 if bits == 4 else 2) + group * bits // 8
    if (
        bits not in (4, 8)
        or group <= 0
        or group % 2
        or packed.ndim != 2
        or packed.dtype != np.uint8
        or packed.shape[1] % size
    ):
        raise ValueError(
            f"qdecode: packed {list(packed.shape)} {packed.dtype} is not rows of "
            f"{bits}-bit groups of {group}; give (M, K / group * {size}) uint8 rows"
        )
    k = packed.shape[1] // size * group
    out = np.empty((packed.shape[0], k), np.uint16)
    if k:
        kernels["decoded"](np.ascontiguousarray(packed), out, 0, len(out), bits, group)
    return out.view(bfloat16)


def _needed(name: str) -> dict[str, Any]:
    kernels = _kernels()
    if not kernels:
        raise RuntimeError(
            f"{name}: numba is not installed or IRON_JIT=0; install "
            "iron-operators[jit], or check matvec.available() first"
        )
    return kernels


def _halves(xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The vectors' even and odd elements, float32 rows the kernels read."""
    xs = np.asarray(xs, dtype=np.float32)
    return np.ascontiguousarray(xs[:, 0::2]), np.ascontiguousarray(xs[:, 1::2])


def _split(
    rows: Callable[..., None],
    a: np.ndarray,
    even: np.ndarray,
    odd: np.ndarray,
    parts: int,
    *extra: int,
) -> np.ndarray:
    """``rows`` over every row of ``a`` and every vector, the vectors in
    cached blocks; each block on the caller, or split among the pool's
    threads and the caller when the work (weight bytes times vectors) is
    large."""
    m, count = a.shape[0], even.shape[0]
    out = np.empty((count, m), np.float32)
    # vectors in blocks that stay cached while a weight row meets each
    block = max(1, _VECTOR_BYTES // max(8 * even.shape[1], 1))
    for start in range(0, count, block):
        part = slice(start, start + block)
        _rows(rows, a, even[part], odd[part], out[part], parts, extra)
    return out


def _rows(
    rows: Callable[..., None],
    a: np.ndarray,
    even: np.ndarray,
    odd: np.ndarray,
    out: np.ndarray,
    parts: int,
    extra: tuple[int, ...],
) -> None:
    m = a.shape[0]
    if parts < 2 or a.nbytes * even.shape[0] < _SPLIT_BYTES or m < 2:
        rows(a, even, odd, out, 0, m, *extra)
        return
    pool = _pool(parts)
    step = -(-m // parts)
    futures = [
        pool.submit(rows, a, even, odd, out, first, min(m, first + step), *extra)
        for first in range(step, m, step)
    ]
    rows(a, even, odd, out, 0, min(m, step), *extra)  # the caller's share
    for future in futures:
        future.result()
