"""The matmul rounding models and the bounds their tolerances are derived from.

Shared arithmetic of ``iron.operators.matmul`` (``GEMV`` and ``GEMM``), which
re-exports the public names; that module's docstring describes the levels,
and ``error_bound``'s derives their bounds:

- ``model_product``: a precision level's kernel model, ``a @ b`` as the bf16
  kernel computes it (float32 sums, bf16 roundings per K tile, bfp16 blocks);
- ``error_bound``: how far such a kernel may be from the exact product, per
  element, from the inputs;
- ``bound_tolerance``: the ``Tolerance`` such a bound gives (twice it);
- ``AMD_GEMV``: the tolerance without inputs, AMD IRON's GEMV figure.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from ml_dtypes import bfloat16
from numpy.lib.stride_tricks import as_strided

from iron.core.precision import Precision
from iron.core.tolerance import Tolerance
from iron.operators import bfp16, matvec

#: bf16 unit roundoff: 8 significant bits, round to nearest.
U_BF16 = 2.0**-8
#: float32 unit roundoff.
U_F32 = 2.0**-24
#: The smallest normal: what flushing a subnormal loses at most.
FLUSH = 2.0**-126
#: The most bytes of K-tile products ``model_product`` makes in one call: an
#: L2's worth, so the products are still cached when they are summed.
_PARTS_BYTES = 1 << 20
#: The most float32 bytes of a narrow (bf16) matrix ``model_product`` widens
#: at a time for a matrix-vector product: an L2's worth, multiplied while
#: cached, instead of a float32 copy of the whole weight.
_WIDEN_BYTES = 1 << 20
#: Row and column blocks start at multiples of this (see ``_row_block``).
_ROW_MULTIPLE = 64
#: A matrix product's ``b`` up to this many float32 bytes is multiplied
#: whole (see ``_column_block``); a larger one in ``_WIDEN_BYTES`` blocks.
_WHOLE_BYTES = 16 << 20

#: The ``a`` dtypes :func:`iron.operators.matvec.matvec` reads.
_MATVEC_TYPES = (np.dtype(bfloat16), np.dtype(np.float32))

AMD_GEMV = Tolerance.relative(
    0.04,
    1e-3,
    note="AMD IRON's GEMV figure (f32 accumulation, one rounding to bf16); it "
    "holds only for unit-scale data without cancellation: give the inputs, "
    "tolerance(a, b), for the derived bound",
)


def gamma(n: int) -> float:
    """The float32 summation factor ``n 2**-24 / (1 - n 2**-24)`` of n terms."""
    return n * U_F32 / (1 - n * U_F32)


def model_product(
    a: np.ndarray, b: np.ndarray, level: Precision, tile_k: int | None
) -> np.ndarray:
    """``a @ b`` as a bf16 kernel at ``level`` computes it, rounded to bf16.

    A ``HIGHEST`` matrix-vector product (``N == 1``) of one ``(M, K)``
    bf16 or float32 ``a``, K even, runs :func:`iron.operators.matvec.matvec`
    where it is compiled: the bf16 weight read as it is, the same bits for a
    bf16 ``a`` and its float32 copy. A ``HIGHEST`` matrix product of one
    ``(M, K)`` ``a`` and a bf16 or float32 ``(K, N)`` ``b``, K even, runs
    :func:`iron.operators.matvec.matvecs` there: each row of ``a`` summed
    against ``b``'s columns as that matrix-vector product sums, so row
    ``i``'s bits are those of ``b.T @ a[i]`` alone, whatever the other rows
    (a prompt chunk's row equals the decode step's, batch-invariant). Otherwise a matrix-vector product whose
    ``a`` is not float32 (a bf16 weight) is widened and multiplied
    ``_WIDEN_BYTES`` of float32 rows at a time rather than whole: the same
    float32 values, each row's product its own (the rows' bits are those of
    the whole call), and no float32 copy of the weight held beside it. A
    matrix product (``N > 1``) whose ``b`` is over ``_WHOLE_BYTES`` in
    float32 is made ``_WIDEN_BYTES`` of ``b``'s columns at a time, whatever
    ``b``'s dtype: the same calls on the same values, so a bf16 ``b`` and its
    float32 copy give the same bits.

    Args:
        a: ``(..., M, K)`` values (bf16 or float32).
        b: ``(..., K, N)`` values.
        level: The precision level the kernel runs at.
        tile_k: The K tile after which ``HIGH`` and ``MEDIUM`` round the
            partial sum to bf16 (unused at ``HIGHEST``).

    Returns:
        The ``(..., M, N)`` bf16 result.
    """
    a, b = np.asarray(a), np.asarray(b)
    if (
        level is Precision.HIGHEST
        and a.ndim == 2
        and b.ndim == 2
        and a.shape[1] % 2 == 0
        and matvec.available()
    ):
        with np.errstate(over="ignore", invalid="ignore"):
            if b.shape[1] == 1 and a.dtype in _MATVEC_TYPES:
                return matvec.matvec(a, b[:, 0])[:, None].astype(bfloat16)
            if b.dtype in _MATVEC_TYPES:
                # each row of a against b's columns, summed as a matrix-
                # vector product sums: a prompt row's bits are a decode's
                return matvec.matvecs(b.T, a).astype(bfloat16)
    rows = _row_block(a, b)
    if rows:
        m = a.shape[-2]
        parts = [
            _product(a[..., first : first + rows, :], b, level, tile_k)
            for first in range(0, m, rows)
        ]
        return np.concatenate(parts, axis=-2)
    cols = _column_block(b)
    if cols:
        n = b.shape[-1]
        parts = [
            _product(a, b[..., first : first + cols], level, tile_k)
            for first in range(0, n, cols)
        ]
        return np.concatenate(parts, axis=-1)
    return _product(a, b, level, tile_k)


def _block(size: int, other: int, count: int) -> int:
    """How many of ``count`` rows (or columns) of ``other`` elements to widen at once.

    ``size`` is how many matrices (the lead dimensions); 0 when the whole
    fits in ``_WIDEN_BYTES``.
    """
    if 4 * count * other * size <= _WIDEN_BYTES:
        return 0
    block = _WIDEN_BYTES // (4 * other * size) // _ROW_MULTIPLE * _ROW_MULTIPLE
    block = max(block, _ROW_MULTIPLE)
    return block if block < count else 0


def _row_block(a: np.ndarray, b: np.ndarray) -> int:
    """Rows of ``a`` widened at a time for ``a @ b``, or 0 for the whole call.

    Only a matrix-vector product (``b`` one column) of a narrow ``a`` larger
    than ``_WIDEN_BYTES`` in float32 is split, by a multiple of
    ``_ROW_MULTIPLE`` rows: OpenBLAS's sgemv walks a row-major matrix's rows
    four at a time (``sgemv_kernel_4x4``) and only the last one to three
    with other kernels, each row's sum in the same K blocks
    (https://github.com/OpenMathLib/OpenBLAS, kernel/x86_64/sgemv_t_4.c),
    so blocks starting at multiples of four give every row the bits of the
    whole call (tested).
    """
    if a.dtype == np.float32 or a.ndim < 2 or b.shape[-1] != 1:
        return 0
    lead = int(np.prod(a.shape[:-2], dtype=np.int64))
    return _block(lead, a.shape[-1], a.shape[-2])


def _column_block(b: np.ndarray) -> int:
    """Columns of ``b`` multiplied at a time for ``a @ b``, or 0 for the whole.

    A matrix product's columns are split only when ``b`` (a weight, as a
    GEMM reads it) is over ``_WHOLE_BYTES`` in float32, in any dtype: a
    GEMM's bits depend on how its columns are split (BLAS picks kernels and
    threads by shape), so a bf16 ``b`` and its float32 copy are split alike.
    """
    if b.ndim < 2 or b.shape[-1] == 1:
        return 0
    lead = int(np.prod(b.shape[:-2], dtype=np.int64))
    if 4 * b.shape[-1] * b.shape[-2] * lead <= _WHOLE_BYTES:
        return 0
    return _block(lead, b.shape[-2], b.shape[-1])


def _product(
    a: np.ndarray, b: np.ndarray, level: Precision, tile_k: int | None
) -> np.ndarray:
    """:func:`model_product` on one block of rows."""
    a = np.asarray(a, dtype=np.float32)  # no copy when already float32
    b = np.asarray(b, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        if level is Precision.MEDIUM:
            a, b = bfp16.quantize(a, axis=-1), bfp16.quantize(b, axis=-2)
        if level is Precision.HIGHEST:
            return np.matmul(a, b).astype(bfloat16)
        assert tile_k is not None
        lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        acc = np.zeros((*lead, a.shape[-2], b.shape[-1]), np.float32)
        for part in _tile_products(a, b, tile_k):
            acc = (acc + part).astype(bfloat16).astype(np.float32)
        return acc.astype(bfloat16)


def _tile_products(a: np.ndarray, b: np.ndarray, tile_k: int) -> Iterator[np.ndarray]:
    """Each K tile's float32 product ``a[..., tile] @ b[..., tile, :]``, in order.

    The tiles are strided views of ``a`` and ``b`` stacked on a new axis, so
    one ``np.matmul`` makes a group of them: numpy runs the same BLAS call on
    each stacked matrix as on that tile alone (the same shape and strides),
    so every product has the bits of the tile-by-tile call. Groups hold at
    most ``_PARTS_BYTES`` of products; a last, shorter tile is made alone.
    """
    k, rows, cols = a.shape[-1], a.shape[-2], b.shape[-1]
    whole = k // tile_k
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    per_tile = 4 * rows * cols * int(np.prod(lead, dtype=np.int64))
    group = max(1, min(whole, _PARTS_BYTES // max(per_tile, 1)))
    for first in range(0, whole, group):
        count = min(group, whole - first)
        start = first * tile_k
        a_tiles = as_strided(
            a[..., start:],
            shape=(*a.shape[:-2], count, rows, tile_k),
            strides=(*a.strides[:-2], a.strides[-1] * tile_k, *a.strides[-2:]),
            writeable=False,
        )
        b_tiles = as_strided(
            b[..., start:, :],
            shape=(*b.shape[:-2], count, tile_k, cols),
            strides=(*b.strides[:-2], b.strides[-2] * tile_k, *b.strides[-2:]),
            writeable=False,
        )
        # lead dims stay ahead of the tile axis: (..., count, rows, cols)
        parts = np.matmul(a_tiles, b_tiles)
        for j in range(count):
            yield parts[..., j, :, :]
    if whole * tile_k < k:
        start = whole * tile_k
        yield np.matmul(a[..., start:], b[..., start:, :])


def error_bound(
    a: np.ndarray, b: np.ndarray, level: Precision, tile_k: int | None
) -> np.ndarray:
    """How far a bf16 kernel at ``level`` may be from the exact ``a @ b``.

    ``+inf`` where the inputs give no finite bound (an infinity or NaN among
    them). With ``u = 2**-8``, bf16's unit roundoff; ``gamma(n) = n 2**-24 /
    (1 - n 2**-24)``, float32 summation of n terms in any order; ``S =
    |A|@|B|``:

    * ``HIGHEST``: ``|err| <= gamma(K) S + u (|C| + gamma(K) S)``.
    * ``HIGH``: per K tile, ``E' = E + gamma(tile_k + 1) (|P_{j-1}| + E +
      S_j)``, then ``E = E' + u (|P_j| + E')``, ``P_j`` the exact partial sum
      and ``S_j`` the tile's share of ``S``; the last rounding is the
      output's.
    * ``MEDIUM``: with ``d`` one unit of an element's bfp16 block (its
      conversion error is at most ``d``) it adds ``Q = |A|@dB + dA@|B| +
      dA@dB`` and runs the ``HIGH`` recursion on ``|P| + Q`` and ``S + Q``.

    Every level adds ``2**-125 (sum_k |a| + sum_k |b| + 2K + 1)`` for
    subnormal inputs, products, partials and outputs a device may flush, and
    ``K 2**-52 S`` for evaluating the bound in float64.

    Args:
        a: ``(..., M, K)`` values.
        b: ``(..., K, N)`` values.
        level: The precision level the kernel runs at.
        tile_k: The K tile ``HIGH`` and ``MEDIUM`` round after.

    Returns:
        float64 bounds of the result's shape ``(..., M, N)``.
    """
    a = np.asarray(a, dtype=np.float32)  # no copy when already float32
    b = np.asarray(b, dtype=np.float32)
    k = a.shape[-1]
    tile = k if level is Precision.HIGHEST or tile_k is None else tile_k
    with np.errstate(all="ignore"):
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        abs_a, abs_b = np.abs(a64), np.abs(b64)
        if level is Precision.MEDIUM:
            da = bfp16.block_unit(a, axis=-1)
            db = bfp16.block_unit(b, axis=-2)
        err = partial = quant = total = 0.0
        for j, start in enumerate(range(0, k, tile)):
            s = slice(start, start + tile)
            carried = np.abs(partial) + quant  # bounds |the carried partial sum|
            share = abs_a[..., s] @ abs_b[..., s, :]
            partial = partial + a64[..., s] @ b64[..., s, :]
            if level is Precision.MEDIUM:
                q = abs_a[..., s] @ db[..., s, :] + da[..., s] @ abs_b[..., s, :]
                q = q + da[..., s] @ db[..., s, :]
                quant = quant + q
                share = share + q
            total = total + share
            terms = min(tile, k - start) + (j > 0)
            summed = err + gamma(terms) * (carried + err + share)
            err = summed + U_BF16 * (np.abs(partial) + quant + summed)
        sums = abs_a.sum(-1)[..., None] + abs_b.sum(-2)[..., None, :]
        flush = 2 * FLUSH * (sums + 2 * k + 1)
        bound = (err + quant + flush + k * 2.0**-52 * total) * (1 + 2.0**-40)
    return np.where(np.isfinite(bound), bound, np.inf)


def bound_tolerance(
    bound: np.ndarray, level: Precision, tile_k: int | None
) -> Tolerance:
    """The tolerance of a result at ``level``: twice ``bound``, with its note.

    Doubled, as a device result is judged against the reference, itself such
    a kernel.
    """
    rounding = (
        "one bf16 rounding of the f32 sum"
        if level is Precision.HIGHEST
        else f"a bf16 rounding of the f32 partial sum every tile_k={tile_k}"
    )
    blocks = (
        ", bfp16 blocks of 8 along K for A and B (one block unit each)"
        if level is Precision.MEDIUM
        else ""
    )
    return Tolerance.bounded(
        2 * bound,
        note=f"derived ({level.value}): f32 accumulation gamma(n)*|A|@|B|, "
        f"{rounding}{blocks}, 2**-125 per flushed subnormal; doubled, as "
        f"the reference is itself such a kernel (iron/operators/matmul.py)",
    )
