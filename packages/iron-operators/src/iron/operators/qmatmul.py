"""Products with quantized weights: ``QGEMV``, ``QGEMM`` and ``DequantRows``.

The weight is packed in one of :mod:`iron.operators.quantized`'s formats
(``q4``, ``q8``, ``q8_16``): a ``(rows, row_bytes)`` uint8 array, never a
bf16 copy. The kernel these operators model streams a tile of packed rows
into a core, dequantizes it there to bf16 (``scale * q + min`` in float32,
rounded once to nearest even) and multiplies it as the bf16 matmuls do at
``Precision.HIGHEST``: exact bf16 products summed in float32 over all of K,
rounded once to bf16. So ``reference`` is :func:`~iron.operators.matmul.model_product`
at ``HIGHEST`` over the dequantized bf16 weights (for ``QGEMV`` with numba,
:func:`~iron.operators.matvec.qmatvec`: the same bits, each row dequantized
as it is summed), and the tolerance is that
level's derived bound (:func:`~iron.operators.matmul.error_bound`), doubled,
on the same operands: the bf16 rounding of the weights is part of what the
operator computes (as a bf16 checkpoint's weights were rounded on loading),
and what it is judged on is the product.

They are operators of their own rather than a weight-format parameter on
``GEMV`` and ``GEMM``: the packed operand has another dtype and shape
(``uint8`` ``(rows, row_bytes)`` for a bf16 ``(rows, K)``), its tiles cost
other core bytes and DMA runs, and only ``HIGHEST`` is modelled; the bf16
operators, their profiles and their NPU designs stay as they are.

``DequantRows`` reads whole packed rows to bf16: the embedding lookup of a
quantized embedding table (``table[ids]`` gathers the packed rows).

Device rules: ``K`` a multiple of 64 (whole groups whose packed rows are
whole 4-byte DMA words in every format); tiles of ``tile_m`` (GEMV) or
``tile_n`` (GEMM) packed rows by ``tile_k`` elements, ``tile_k`` a multiple
of 64 dividing K, fitting a core with what its kernel holds. ``QGEMV`` and
``DequantRows`` have NPU designs (``iron.runtime.npu.designs.qmatmul``, whose
kernel dequantizes a group at a time as it multiplies: no dequantized tile);
``QGEMM``'s (``iron.runtime.npu.designs.qgemm``) is GEMM's whole-array design
with the packed ``w`` tile dequantized into the core's bf16 tile and
multiplied by GEMM's mmul, so its M and N tiles are GEMM's mmul multiples.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np
from ml_dtypes import bfloat16

from iron.core.declare import Divisors, Input, Output, param, tunable
from iron.core.device import Device
from iron.core.operator import Cost, DimensionConflictError, Operator, RefusedShapeError
from iron.core.precision import Precision
from iron.core.tolerance import Tolerance
from iron.operators import matvec
from iron.operators.matmul import STACK_BYTES, error_bound, mmul_shape, model_product
from iron.operators.quantized import FORMATS, QuantFormat, dequantize, format_of

__all__ = ["K_MULTIPLE", "QGEMM", "QGEMV", "DequantRows"]

#: K is a multiple of this: whole groups in whole 4-byte words in every format.
K_MULTIPLE = 64
_COLUMNS = (1, 2, 4, 8)
_BF16, _F32 = 2, 4


def _row_bytes(op: Any) -> int:
    return op.quant_format.row_bytes(op.K) if op.K % op.group == 0 else 0


def _quant_fields(K: int, row_bytes: int, source: str, name: str) -> dict[str, Any]:
    """``bits`` and ``group`` read off a packed row's bytes and K."""
    try:
        fmt = format_of(K, row_bytes)
    except ValueError as e:
        raise DimensionConflictError(f"{name}: {e}") from None
    return {
        "K": (K, "x's last dimension"),
        "bits": (fmt.bits, f"{source} ({row_bytes} bytes for K={K}: {fmt.name})"),
        "group": (fmt.group, f"{source} ({fmt.name})"),
    }


class _Quantized(Operator):
    """What the three share: the format fields and the dequantized weight."""

    K: int
    bits: int
    group: int
    #: The packed weight's input index (None: no input is kept decoded).
    _weight: ClassVar[int | None] = None

    @property
    def quant_format(self) -> QuantFormat:
        """The weight's :class:`~iron.operators.quantized.QuantFormat`."""
        for fmt in FORMATS.values():
            if (fmt.bits, fmt.group) == (self.bits, self.group):
                return fmt
        raise ValueError(
            f"{type(self).__name__}: bits={self.bits}, group={self.group} is no "
            f"quantized format (q4: 4, 32; q8: 8, 32; q8_16: 8, 16)"
        )

    def _packed(self, w: np.ndarray, rows: int) -> np.ndarray:
        """``w``, checked to be at most ``rows`` packed rows of this format."""
        w = np.asarray(w)
        want = (rows, self.quant_format.row_bytes(self.K))
        if w.dtype != np.uint8 or w.shape[-1] != want[1] or w.shape[0] > rows:
            raise ValueError(
                f"{type(self).__name__}: w is packed {self.quant_format.name} rows "
                f"{list(want)} uint8; got {list(w.shape)} {w.dtype}"
            )
        return w

    def _weights(self, w: np.ndarray, rows: int) -> np.ndarray:
        """The packed ``w`` dequantized as the kernel does: bf16 ``(rows, K)``.

        :meth:`decoded`'s copy is that already, and is given back as it is.
        """
        w = np.asarray(w)
        if w.dtype == bfloat16 and w.ndim == 2 and w.shape[1] == self.K:
            return w
        w = self._packed(w, rows)
        with np.errstate(over="ignore", invalid="ignore"):
            return dequantize(w, self.quant_format).astype(bfloat16)

    def decoded(self, index: int) -> Callable[[np.ndarray], np.ndarray] | None:
        """For the packed ``w``: its rows dequantized to bf16, as the kernel does.

        :meth:`reference` reads that copy at bf16's two bytes an element,
        as :class:`~iron.operators.matmul.GEMV` reads a bf16 weight, with
        the same bits as from the packed rows (tested): a host keeping it
        (the emulated NPU) runs a 4- or 8-bit model as fast as a bf16 one.
        """
        if index != self._weight:
            return None
        return self._decode

    def _decode(self, w: np.ndarray) -> np.ndarray:
        w = np.asarray(w)
        if matvec.available() and w.ndim == 2 and w.dtype == np.uint8:
            return matvec.qdecode(w, self.bits, self.group)
        return self._weights(w, w.shape[0] if w.ndim else 0)

    def _is_decoded(self, w: np.ndarray, rows: int) -> bool:
        """Whether ``w`` is :meth:`decoded`'s copy: bf16 ``(rows, K)``, checked."""
        if w.dtype != bfloat16:
            return False
        if w.shape != (rows, self.K):
            raise ValueError(
                f"{type(self).__name__}: a decoded w is bf16 {[rows, self.K]}; "
                f"got {list(w.shape)}"
            )
        return True

    def _format_rules(self, dev: Device) -> None:
        name = f"{type(self).__name__} on {dev}"
        self.quant_format  # noqa: B018  (names a bits/group pair of no format)
        if self.K <= 0 or self.K % K_MULTIPLE:
            raise RefusedShapeError(
                f"{name}: K={self.K} is not a positive multiple of {K_MULTIPLE} "
                f"(whole groups of {self.group} in whole 4-byte DMA words); pad K"
            )


def _divisors(n: int) -> list[int]:
    """Every positive divisor of ``n``, ascending."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def _largest_divisor(n: int, unit: int, ok: Any) -> int | None:
    return next(
        (t for t in range(n - n % unit, 0, -unit) if n % t == 0 and ok(t)), None
    )


class QGEMV(_Quantized):
    """``w @ x`` with ``w`` packed: ``(M, row_bytes)`` uint8 times ``(K,)`` bf16.

    ``bits`` and ``group`` (the format) are read off ``w``'s row bytes and
    ``x``'s length in a graph. Each column's core takes ``tile_m`` packed rows
    at a time and walks K in tiles of ``tile_k``, dequantizing one group at
    a time as it multiplies. The result is ``(M,)`` bf16 (module docstring).
    """

    M: int = param(doc="rows of w (outputs)")
    K: int = param(doc="elements of x and of w's rows (the reduction)")
    bits: int = param(doc="bits of a weight code: 4 or 8")
    group: int = param(doc="elements sharing a scale: 32, or 16 (q8_16)")
    row_bytes: int = param(derive=_row_bytes, doc="bytes of a packed row of w")
    num_aie_columns: int = tunable(domain=_COLUMNS, doc="columns the rows spread over")
    tile_m: int = tunable(domain=Divisors("M"), doc="packed rows per kernel call")
    tile_k: int = tunable(
        domain=Divisors("K", multiple_of=K_MULTIPLE), doc="elements of K per call"
    )
    #: Tiles of each streamed operand a core holds.
    fifo_depth: ClassVar[int] = 2
    inputs = (Input("w", "M", "row_bytes", dtype=np.uint8), Input("x", "K"))
    _weight = 0
    outputs = (Output("out", "M", dtype=bfloat16),)

    @classmethod
    def infer(cls, operands: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
        w, x = operands.get("w"), operands.get("x")
        assert w is not None and x is not None
        if len(w.shape) != 2 or len(x.shape) != 1:
            raise ValueError(
                f"QGEMV: w is packed rows (M, row_bytes) and x (K,); got w "
                f"{list(w.shape)} and x {list(x.shape)}"
            )
        return {
            "M": (int(w.shape[0]), "w.shape[0]"),
            **_quant_fields(int(x.shape[0]), int(w.shape[1]), "w.shape[1]", "QGEMV"),
        }

    def core_bytes(self, tile_m: int, tile_k: int) -> int:
        """Core memory: what the kernel holds (``qmatmul.cc``).

        The packed ``w`` tile, the ``x`` tile and the bf16 results
        double-buffered, the fp32 sums once, and a stack. No dequantized tile:
        the kernel dequantizes one group at a time on its stack (64 bytes,
        within the stack its contract declares) and multiplies it at once.
        """
        packed = tile_m * self.quant_format.row_bytes(tile_k)
        streamed = packed + tile_k * _BF16 + tile_m * _BF16
        return self.fifo_depth * streamed + tile_m * _F32 + STACK_BYTES

    def resolve(self, dev: Device) -> dict[str, Any]:
        """The tile that fits a core with the least call and reread time.

        What the tiling changes in :meth:`cost`: a core's kernel calls (one
        per tile, at ``dev.kernel_call_seconds``) and ``x`` sent again per
        row tile (at ``dev.dma_bytes_per_s``); of equal times the most rows.
        ``tile_m`` divides the rows of a column, ``tile_k`` is a multiple of
        64 dividing K, and the pair fits a core (:meth:`core_bytes`); a given
        tunable stays as given.
        """
        self._format_rules(dev)
        columns = self.num_aie_columns or max(
            c for c in _COLUMNS if c <= dev.columns and self.M % c == 0
        )
        rows = self.M // columns if self.M % columns == 0 else self.M
        ms = [self.tile_m] if self.tile_m else _divisors(rows)
        ks = (
            [self.tile_k]
            if self.tile_k
            else list(range(K_MULTIPLE, self.K + 1, K_MULTIPLE))
        )
        fits = [
            (self._tiling_seconds(dev, rows, m, k), -m, k)
            for m in ms
            for k in ks
            if self.K % k == 0
            and rows % m == 0
            and self.core_bytes(m, k) <= dev.core_memory_bytes
        ]
        if fits:
            _, m, k = min(fits)
            return {"num_aie_columns": columns, "tile_m": -m, "tile_k": k}
        return {
            "num_aie_columns": columns,
            "tile_m": self.tile_m or 1,
            "tile_k": self.tile_k or K_MULTIPLE,
        }

    def _tiling_seconds(
        self, dev: Device, rows: int, tile_m: int, tile_k: int
    ) -> float:
        """A column's kernel calls and the ``x`` rereads of ``M // rows``
        columns, in seconds (:meth:`cost`'s ``calls`` and ``reread_bytes``)."""
        calls = rows // tile_m * (self.K // tile_k)
        reread = (self.M // tile_m - 1) * self.K * _BF16
        return calls * dev.kernel_call_seconds + reread / dev.dma_bytes_per_s

    def check(self, dev: Device) -> None:
        name = f"QGEMV on {dev}"
        self._format_rules(dev)
        if self.num_aie_columns > dev.columns:
            raise RefusedShapeError(
                f"{name}: num_aie_columns={self.num_aie_columns} exceeds the "
                f"device's {dev.columns} columns"
            )
        if self.M % (self.tile_m * self.num_aie_columns):
            raise RefusedShapeError(
                f"{name}: M={self.M} is not a multiple of tile_m * num_aie_columns "
                f"= {self.tile_m * self.num_aie_columns}"
            )
        if self.tile_k % K_MULTIPLE or self.K % self.tile_k:
            raise RefusedShapeError(
                f"{name}: tile_k={self.tile_k} is not a multiple of {K_MULTIPLE} "
                f"dividing K={self.K}"
            )
        need = self.core_bytes(self.tile_m, self.tile_k)
        if need > dev.core_memory_bytes:
            raise RefusedShapeError(
                f"{name}: tile_m={self.tile_m}, tile_k={self.tile_k} need {need} "
                f"bytes (packed w, x and bf16 out double-buffered, the fp32 sums, "
                f"a stack), over a core's {dev.core_memory_bytes}; take a smaller "
                f"tile_m or tile_k"
            )

    def reference(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``bf16(dequantize(w)) @ x`` at ``HIGHEST`` (module docstring), bf16.

        With numba, :func:`~iron.operators.matvec.qmatvec` dequantizes each
        row as it sums it (the same bits as the dequantized matrix's
        :func:`~iron.operators.matvec.matvec`); else the packed rows are
        dequantized whole and multiplied with numpy's BLAS.
        """
        x, w = np.asarray(x), np.asarray(w)
        decoded = self._is_decoded(w, self.M)  # decoded(0)'s copy: same bits
        if not decoded:
            w = self._packed(w, self.M)
        if w.shape[0] != self.M or x.shape != (self.K,):
            raise ValueError(
                f"QGEMV(M={self.M}, K={self.K}) takes x ({self.K},) and w of "
                f"{self.M} rows; got x {list(x.shape)}, w of {w.shape[0]}"
            )
        if matvec.available() and decoded:
            return matvec.matvec(w, x).astype(bfloat16)
        if matvec.available() and w.ndim == 2:
            with np.errstate(over="ignore", invalid="ignore"):
                sums = matvec.qmatvec(w, x, self.bits, self.group)
                return sums.astype(bfloat16)
        wb = self._weights(w, self.M)
        return model_product(wb, x[:, None], Precision.HIGHEST, None)[:, 0]

    def error_bound(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        """The bound on ``|result - bf16(dequantize(w)) @ x|`` (exact), per element."""
        wb = self._weights(w, self.M)
        return error_bound(wb, np.asarray(x)[:, None], Precision.HIGHEST, None)[:, 0]

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        if not inputs:
            return _NO_INPUTS
        return _bounded(self.error_bound(*inputs))

    def cost(self, dev: Device) -> Cost:
        """The packed ``w``, ``x`` once per row tile, the result; a call per tile.

        ``w`` moves as its packed bytes (``M * row_bytes``): for q4 5 bits a
        weight, against bf16's 16.
        """
        op = self._settled(dev)
        row_tiles = -(-self.M // op.tile_m)
        return Cost(
            macs=self.M * self.K,
            bytes=self.M * self.row_bytes + self.K * _BF16 + self.M * _BF16,
            columns=op.num_aie_columns,
            calls=-(-row_tiles // op.num_aie_columns) * (self.K // op.tile_k),
            reread_bytes=(row_tiles - 1) * self.K * _BF16,
        )


class QGEMM(_Quantized):
    """``a @ w.T`` with ``w`` packed: ``(M, K)`` bf16 by ``(N, row_bytes)`` uint8.

    ``w`` holds the product's N columns as packed rows (a Hugging Face
    ``nn.Linear`` weight's (out, in) layout); the result is ``(M, N)`` bf16
    (module docstring). ``a``'s rows may be bounded per call (``a[:n]``).
    Output tiles of ``tile_m x tile_n`` over ``num_aie_columns`` columns,
    K in tiles of ``tile_k``, each packed ``w`` tile dequantized in the core.

    On the device the product is GEMM's mmul at ``HIGHEST`` over the
    dequantized tile: ``tile_m`` a multiple of twice the mmul's m (8),
    ``tile_n`` of twice its n (8 on npu1, 16 on npu2), so M and N are
    multiples of those (a Llama prompt chunk's rows and widths are).
    """

    M: int = param(doc="rows of a and of the result")
    K: int = param(doc="columns of a, elements of w's rows (the reduction)")
    N: int = param(doc="rows of w, columns of the result")
    bits: int = param(doc="bits of a weight code: 4 or 8")
    group: int = param(doc="elements sharing a scale: 32, or 16 (q8_16)")
    row_bytes: int = param(derive=_row_bytes, doc="bytes of a packed row of w")
    num_aie_columns: int = tunable(domain=_COLUMNS, doc="columns N spreads over")
    tile_m: int = tunable(domain=Divisors("M"), doc="rows of a per tile")
    tile_n: int = tunable(domain=Divisors("N"), doc="packed rows of w per tile")
    tile_k: int = tunable(
        domain=Divisors("K", multiple_of=K_MULTIPLE), doc="elements of K per call"
    )
    fifo_depth: ClassVar[int] = 2
    #: The one level modelled: exact products, fp32 sums, one rounding.
    effective_precision: ClassVar[Precision] = Precision.HIGHEST
    inputs = (Input("a", "M", "K"), Input("w", "N", "row_bytes", dtype=np.uint8))
    _weight = 1
    outputs = (Output("out", "M", "N", dtype=bfloat16),)

    @classmethod
    def infer(cls, operands: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
        a, w = operands.get("a"), operands.get("w")
        assert a is not None and w is not None
        if len(a.shape) != 2 or len(w.shape) != 2:
            raise ValueError(
                f"QGEMM: a is (M, K) and w packed rows (N, row_bytes); got a "
                f"{list(a.shape)} and w {list(w.shape)}"
            )
        found = _quant_fields(int(a.shape[1]), int(w.shape[1]), "w.shape[1]", "QGEMM")
        return {
            "M": (int(a.shape[0]), "a.shape[0]"),
            "N": (int(w.shape[0]), "w.shape[0]"),
            **found,
            "K": (int(a.shape[1]), "a.shape[1]"),
        }

    def core_bytes(self, tile_m: int, tile_k: int, tile_n: int) -> int:
        """Core memory: ``fifo_depth`` a, packed w and bf16 output tiles, the
        fp32 accumulator and the dequantized bf16 w tile once, and a stack."""
        packed = tile_n * self.quant_format.row_bytes(tile_k)
        streamed = tile_m * tile_k * _BF16 + packed + tile_m * tile_n * _BF16
        once = tile_m * tile_n * _F32 + tile_n * tile_k * _BF16
        return self.fifo_depth * streamed + once + STACK_BYTES

    def _fits(self, dev: Device, m: int, k: int, n: int) -> bool:
        return self.core_bytes(m, k, n) <= dev.core_memory_bytes

    def _units(self, dev: Device) -> tuple[int, int]:
        """The M and N tile units: twice the mmul's m and n on ``dev``."""
        r, _, t = mmul_shape(dev, Precision.HIGHEST)
        return 2 * r, 2 * t

    def _unit_rules(self, dev: Device, fields: Mapping[str, int]) -> None:
        """Refuses an M or N field (a dimension or a tile) off the mmul units."""
        units = dict(zip(("m", "n"), self._units(dev)))
        for name, value in fields.items():
            unit = units[name[-1].lower()]
            if value <= 0 or value % unit:
                raise RefusedShapeError(
                    f"QGEMM on {dev}: {name}={value} is not a positive multiple of "
                    f"{unit} (twice the {dev.arch} bf16 mmul's "
                    f"{name[-1].lower()}; the core multiplies the dequantized "
                    f"tile as GEMM does); pad {name[-1].upper()} to a multiple "
                    f"of {unit}"
                )

    def resolve(self, dev: Device) -> dict[str, Any]:
        self._format_rules(dev)
        # M and N off the mmul units are check()'s to refuse (the host runs
        # any); the tiles are then whatever divides.
        unit_m, unit_n = self._units(dev)
        if self.M % unit_m or self.N % unit_n:
            unit_m, unit_n = 1, 1
        columns = self.num_aie_columns or max(
            c for c in _COLUMNS if c <= dev.columns and self.N % (c * unit_n) == 0
        )
        per_column = self.N // columns if self.N % columns == 0 else self.N

        def sizes(dim: int, unit: int, given: int | None) -> list[int]:
            if given:
                return [given]
            return [t for t in range(64, 0, -unit) if dim % t == 0] or [1]

        ms = sizes(self.M, unit_m, self.tile_m)
        ns = sizes(per_column, unit_n, self.tile_n)
        for m in ms:
            for n in ns:
                k = self.tile_k or _largest_divisor(
                    self.K, K_MULTIPLE, lambda t, m=m, n=n: self._fits(dev, m, t, n)
                )
                if k is not None:
                    return {
                        "num_aie_columns": columns,
                        "tile_m": m,
                        "tile_n": n,
                        "tile_k": k,
                    }
        return {
            "num_aie_columns": columns,
            "tile_m": ms[-1],
            "tile_n": ns[-1],
            "tile_k": self.tile_k or K_MULTIPLE,
        }

    def check(self, dev: Device) -> None:
        name = f"QGEMM on {dev}"
        self._format_rules(dev)
        self._unit_rules(
            dev,
            {"M": self.M, "N": self.N, "tile_m": self.tile_m, "tile_n": self.tile_n},
        )
        if self.num_aie_columns > dev.columns:
            raise RefusedShapeError(
                f"{name}: num_aie_columns={self.num_aie_columns} exceeds the "
                f"device's {dev.columns} columns"
            )
        if self.M % self.tile_m:
            raise RefusedShapeError(
                f"{name}: M={self.M} is not a multiple of tile_m={self.tile_m}; "
                f"give a tile_m dividing M"
            )
        if self.N % (self.tile_n * self.num_aie_columns):
            raise RefusedShapeError(
                f"{name}: N={self.N} is not a multiple of tile_n * num_aie_columns "
                f"= {self.tile_n * self.num_aie_columns}"
            )
        if self.tile_k % K_MULTIPLE or self.K % self.tile_k:
            raise RefusedShapeError(
                f"{name}: tile_k={self.tile_k} is not a multiple of {K_MULTIPLE} "
                f"dividing K={self.K}"
            )
        if not self._fits(dev, self.tile_m, self.tile_k, self.tile_n):
            raise RefusedShapeError(
                f"{name}: tile_m={self.tile_m}, tile_k={self.tile_k}, tile_n="
                f"{self.tile_n} need {self.core_bytes(self.tile_m, self.tile_k, self.tile_n)} "
                f"bytes (a, packed w and bf16 c double-buffered, the fp32 "
                f"accumulator and the dequantized bf16 tile, a stack), over a core's {dev.core_memory_bytes}; "
                f"give smaller tiles"
            )

    def _checked(self, a: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``a`` and the packed ``w``, their shapes checked."""
        a = np.asarray(a)
        if a.ndim != 2 or a.shape[0] > self.M or a.shape[1] != self.K:
            raise ValueError(
                f"QGEMM(M={self.M}, K={self.K}, N={self.N}) takes a {[self.M, self.K]} "
                f"(or its first rows, bounded per call); got a {list(a.shape)}"
            )
        w = np.asarray(w)
        if self._is_decoded(w, self.N):  # decoded(1)'s copy: the same bits
            return a, w
        w = self._packed(w, self.N)
        if w.shape[0] != self.N:
            raise ValueError(
                f"QGEMM(N={self.N}) takes w of {self.N} packed rows; got {w.shape[0]}"
            )
        return a, w

    def _operands(self, a: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``a`` and the dequantized bf16 ``w.T``, the product's operands."""
        a, w = self._checked(a, w)
        return a, self._weights(w, self.N).T  # a decoded w given back as it is

    def reference(self, a: np.ndarray, w: np.ndarray) -> np.ndarray:
        """``a @ bf16(dequantize(w)).T`` at ``HIGHEST`` (module docstring), bf16.

        With numba, :func:`~iron.operators.matvec.qmatvecs` dequantizes each
        packed row once and sums it with every row of ``a`` as
        :class:`QGEMV` sums its vector: a row's bits equal QGEMV's on that
        row, whatever the other rows. Else the packed rows are dequantized
        whole and multiplied as :class:`~iron.operators.matmul.GEMM` does.
        """
        a, w = self._checked(a, w)
        if matvec.available() and w.dtype == bfloat16:  # decoded(1)'s copy
            return matvec.matvecs(w, a).astype(bfloat16)
        if matvec.available() and w.ndim == 2:
            with np.errstate(over="ignore", invalid="ignore"):
                return matvec.qmatvecs(w, a, self.bits, self.group).astype(bfloat16)
        a, b = self._operands(a, w)
        return model_product(a, b, Precision.HIGHEST, None)

    def error_bound(self, a: np.ndarray, w: np.ndarray) -> np.ndarray:
        """The bound on ``|result - a @ bf16(dequantize(w)).T|`` (exact), per element."""
        a, b = self._operands(a, w)
        return error_bound(a, b, Precision.HIGHEST, None)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        if not inputs:
            return _NO_INPUTS
        return _bounded(self.error_bound(*inputs))

    def cost(self, dev: Device) -> Cost:
        """``a`` once per pass over N, the packed ``w`` once per pass over M's
        row tiles, the result once; a call per K tile of each output tile."""
        op = self._settled(dev)
        columns = op.num_aie_columns
        m_tiles = -(-self.M // op.tile_m)
        rows = min(dev.core_rows, m_tiles)
        m_passes = -(-m_tiles // rows)
        n_passes = -(-self.N // (op.tile_n * columns))
        packed = self.N * self.row_bytes
        return Cost(
            macs=self.M * self.K * self.N,
            bytes=self.M * self.K * _BF16 + packed + self.M * self.N * _BF16,
            columns=columns,
            cores=columns * rows,
            calls=m_passes * n_passes * (self.K // op.tile_k),
            reread_bytes=(n_passes - 1) * self.M * self.K * _BF16
            + (m_passes - 1) * packed,
        )


class DequantRows(_Quantized):
    """Packed rows to bf16: ``(rows, row_bytes)`` uint8 -> ``(rows, K)`` bf16.

    The lookup of a quantized embedding table: ``DequantRows.step(table[ids],
    K=hidden, bits=4, group=32)`` (the row's length and format given: the
    packed row's bytes alone do not tell them). Each value is
    the format's ``scale * q + min`` in float32 rounded once to bf16, as the
    product kernels dequantize: exact against that definition.
    """

    rows: int = param(doc="packed rows")
    K: int = param(doc="elements of a row")
    bits: int = param(doc="bits of a weight code: 4 or 8")
    group: int = param(doc="elements sharing a scale: 32, or 16 (q8_16)")
    row_bytes: int = param(derive=_row_bytes, doc="bytes of a packed row")
    inputs = (Input("w", "rows", "row_bytes", dtype=np.uint8),)
    outputs = (Output("out", "rows", "K", dtype=bfloat16),)

    @classmethod
    def infer(cls, operands: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
        """``rows`` from ``w``; ``K``, ``bits`` and ``group`` are given."""
        w = operands.get("w")
        assert w is not None
        if len(w.shape) != 2:
            raise ValueError(
                f"DequantRows: w is packed rows (rows, row_bytes); got {list(w.shape)}"
            )
        return {"rows": (int(w.shape[0]), "w.shape[0]")}

    def resolve(self, dev: Device) -> dict[str, Any]:
        self._format_rules(dev)
        return {}

    def check(self, dev: Device) -> None:
        self._format_rules(dev)

    def reference(self, w: np.ndarray) -> np.ndarray:
        """Each packed row dequantized and rounded to bf16 (class docstring)."""
        return self._weights(w, self.rows)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        return Tolerance.exact(
            note="scale * q is exact in float32, the sum rounded once, then once "
            "to bf16 (to nearest even), as the product kernels dequantize"
        )

    def cost(self, dev: Device) -> Cost:
        """The packed rows read, the bf16 rows written; one operation an element."""
        return Cost(
            macs=self.rows * self.K,
            bytes=self.rows * self.row_bytes + self.rows * self.K * _BF16,
            columns=1,
            calls=1,
        )


_NO_INPUTS = Tolerance.relative(
    0.04,
    1e-3,
    note="AMD IRON's GEMV figure (f32 accumulation, one rounding to bf16); give "
    "the inputs, tolerance(w, x), for the derived bound",
)


def _bounded(bound: np.ndarray) -> Tolerance:
    return Tolerance.bounded(
        2 * bound,
        note="derived (highest) over the dequantized bf16 weights: f32 "
        "accumulation gamma(n)*|A|@|B|, one bf16 rounding of the f32 sum, "
        "2**-125 per flushed subnormal; doubled, as the reference is itself "
        "such a kernel (iron/operators/qmatmul.py)",
    )
