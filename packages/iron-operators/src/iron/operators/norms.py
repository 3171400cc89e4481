"""Row normalizations of a ``(rows, cols)`` bf16 tensor: ``RMSNorm`` and ``LayerNorm``.

Both reduce over the last axis, one row at a time. The work is tiled by rows:
``rows_per_tile`` rows per kernel call, the tiles spread over
``num_aie_columns`` columns. A tile's input and output rows are double-buffered
in a core's data memory next to the row-long parameters (weight, bias) the
kernel keeps resident; that must fit the core's 64 KiB less its stack (the
*core memory* rule). Rows are the leading dimension and may be bounded per
call (``x[:n]``): the references work on whatever rows they are given.

This module also owns :class:`RowOperator`, the tiling, resolution and
refusal rules every row-wise operator shares (``Softmax`` uses it too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from ml_dtypes import bfloat16

from iron.core.declare import Divisors, Input, Output, param, tunable
from iron.core.device import Device
from iron.core.operator import Cost, Operator, RefusedShapeError
from iron.core.tolerance import Tolerance

__all__ = ["LayerNorm", "RMSNorm", "RowOperator"]

#: Lanes of the kernels' bf16 vectors: a row is a whole number of them.
VECTOR_WIDTH = 16
#: Bytes of a core's data memory its stack takes.
STACK_BYTES = 1024
#: A preferred tile fills at most one 8 KiB bank per buffer.
_BANK_BYTES = 8192
_COLUMNS = (1, 2, 4, 8)
_BF16 = np.dtype(bfloat16).itemsize
_U = 2.0**-24  # unit roundoff of float32
_FLUSH = 2.0**-126  # the smallest normal bf16: results below it may be flushed


class RowOperator(Operator):
    """The base of operators that work row by row on a ``(rows, cols)`` tensor.

    Subclasses declare their operands and say what else a core holds
    (:meth:`resident_bytes`, :meth:`scratch_bytes`); this class resolves and
    checks the row tiling.

    Attributes:
        rows: Rows of ``x``, its leading dimension (may be bounded per call).
        cols: Elements in a row, the axis reduced over; a multiple of
            :data:`VECTOR_WIDTH`.
        rows_per_tile: Rows one kernel call handles (a divisor of ``rows``).
        num_aie_columns: Columns the tiles are spread over.
    """

    rows: int = param(doc="rows of x, its leading dimension (may be bounded per call)")
    cols: int = param(doc="elements in a row, the axis reduced over")
    rows_per_tile: int = tunable(
        domain=Divisors("rows"), doc="rows one kernel call handles"
    )
    num_aie_columns: int = tunable(domain=_COLUMNS, doc="columns the tiles spread over")

    @classmethod
    def step(cls, *operands: Any, out: Any = None, **fields: Any) -> Any:
        """Record one step; a 1-D ``x`` of shape ``(cols,)`` is one row.

        A vector is what a reader naturally passes where a single row is
        meant (a decoder's hidden state), and it is unambiguous: it is
        recorded as ``x.reshape(1, -1)`` (a view, no data moves) and the
        result comes back as a ``(cols,)`` view too (so does a 1-D ``out=``).
        Anything else is :meth:`Operator.step`'s.
        """
        x: Any = operands[0] if operands else fields.get("x")
        if getattr(x, "ndim", None) != 1:
            return super().step(*operands, out=out, **fields)
        if operands:
            operands = (x.reshape(1, -1), *operands[1:])
        else:
            fields = {**fields, "x": x.reshape(1, -1)}
        if getattr(out, "ndim", None) == 1:
            out = out.reshape(1, -1)
        return super().step(*operands, out=out, **fields).reshape(-1)

    #: Tiles of each streamed operand a core holds: the depth of the NPU
    #: design's object FIFOs, and what :meth:`core_bytes` counts.
    fifo_depth: ClassVar[int] = 2

    # -- what a core holds ----------------------------------------------------

    def resident_bytes(self) -> int:
        """Bytes of row-long parameters a core keeps (weight, bias)."""
        return 0

    def scratch_bytes(self) -> int:
        """Bytes of working memory a core needs besides its tiles."""
        return 0

    def core_bytes(self, rows_per_tile: int | None = None) -> int:
        """Core data memory one tiling needs (without the stack)."""
        rows = self.rows_per_tile if rows_per_tile is None else rows_per_tile
        tiles = rows * self.cols * _BF16 * 2 * self.fifo_depth  # in and out
        return tiles + self.resident_bytes() + self.scratch_bytes()

    def _holds(self) -> str:
        extra = []
        if self.resident_bytes():
            extra.append(f"{self.resident_bytes()} resident parameter bytes")
        if self.scratch_bytes():
            extra.append(f"{self.scratch_bytes()} bytes of fp32 scratch")
        return "input and output tiles, double-buffered" + "".join(
            f", {e}" for e in extra
        )

    # -- resolve and check ----------------------------------------------------

    def resolve(self, dev: Device) -> dict[str, int]:
        """Spread rows over as many columns as divide them, then tile each column.

        Tiles are the largest divisor of a column's rows whose buffers stay
        within one 8 KiB bank and the core memory; 1 when nothing fits
        (:meth:`check` then refuses the shape, naming the rule).
        """
        rows = max(int(self.rows), 1)
        if self.num_aie_columns is not None:
            columns = self.num_aie_columns
        else:
            least = self.rows_per_tile or 1
            fits = [c for c in _COLUMNS if c <= dev.columns and rows % (c * least) == 0]
            columns = max(fits, default=1)
        if self.rows_per_tile is not None:
            return {"num_aie_columns": columns, "rows_per_tile": self.rows_per_tile}
        per_column = max(rows // columns, 1)
        budget = dev.core_memory_bytes - STACK_BYTES
        tile = 1
        widest = max(_BANK_BYTES // max(self.cols * _BF16, 1), 1)
        for d in range(min(per_column, widest), 0, -1):
            if per_column % d or rows % (d * columns):
                continue
            if d * self.cols * _BF16 <= _BANK_BYTES and self.core_bytes(d) <= budget:
                tile = d
                break
        return {"num_aie_columns": columns, "rows_per_tile": tile}

    def check(self, dev: Device) -> None:
        """Refuse shapes a core cannot run.

        Raises:
            RefusedShapeError: ``cols`` is not a positive multiple of the
                vector width; more columns than the device has; ``rows`` not
                a multiple of ``rows_per_tile * num_aie_columns``; or the
                tiles and parameters exceed a core's memory less its stack.
        """
        name = f"{type(self).__name__} on {dev}"
        if self.cols <= 0 or self.cols % VECTOR_WIDTH:
            raise RefusedShapeError(
                f"{name}: cols={self.cols} is not a positive multiple of the "
                f"vector width {VECTOR_WIDTH} (the kernel reads whole "
                f"{VECTOR_WIDTH}-lane vectors of a row)"
            )
        if self.num_aie_columns > dev.columns:
            raise RefusedShapeError(
                f"{name}: num_aie_columns={self.num_aie_columns} exceeds the "
                f"device's {dev.columns} columns"
            )
        if self.rows % (self.rows_per_tile * self.num_aie_columns):
            raise RefusedShapeError(
                f"{name}: rows={self.rows} is not a multiple of rows_per_tile * "
                f"num_aie_columns = {self.rows_per_tile * self.num_aie_columns}"
            )
        budget = dev.core_memory_bytes - STACK_BYTES
        need = self.core_bytes()
        if need > budget:
            fix = (
                "use fewer rows_per_tile"
                if self.rows_per_tile > 1 and self.core_bytes(1) <= budget
                else "a row this long does not fit one core"
            )
            raise RefusedShapeError(
                f"{name}: core memory: rows_per_tile={self.rows_per_tile} rows of "
                f"cols={self.cols} need {need} bytes ({self._holds()}), over the "
                f"{budget} bytes of a core's {dev.core_memory_bytes} left after its "
                f"{STACK_BYTES}-byte stack; {fix}"
            )

    def _bytes_moved(self, parameters: int) -> int:
        return 2 * self.rows * self.cols * _BF16 + parameters * self.cols * _BF16

    def _row_cost(self, dev: Device, macs: int, parameters: int) -> Cost:
        """``macs`` and the bytes moved, spread as the row tiling spreads them.

        Each of the ``num_aie_columns`` columns' cores makes one kernel call
        per tile of ``rows_per_tile`` rows: ``rows / (rows_per_tile *
        num_aie_columns)`` calls.
        """
        op = self._settled(dev)
        columns = op.num_aie_columns
        return Cost(
            macs=macs,
            bytes=self._bytes_moved(parameters),
            columns=columns,
            calls=-(-max(int(self.rows), 1) // (op.rows_per_tile * columns)),
        )


def _rows(x: np.ndarray, cls: str) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(
            f"{cls}.reference takes x of shape (rows, cols), got {x.shape}"
        )
    return x.astype(np.float32)


def _vector(v: np.ndarray | None, cols: int, what: str, cls: str) -> np.ndarray | None:
    if v is None:
        return None
    v = np.asarray(v)
    if v.shape != (cols,):
        raise ValueError(
            f"{cls}.reference: {what} has shape {v.shape}, but a row has {cols} "
            f"elements; give a ({cols},) {what}"
        )
    return v.astype(np.float32, copy=False)  # a float32 weight is only read


def _given(operand: str, value: Any) -> tuple[bool, str]:
    """An optional operand's presence, as ``infer`` reports a dimension."""
    present = value is not None
    return present, f"{operand} operand" if present else f"no {operand} operand"


# -- RMSNorm ------------------------------------------------------------------------


class RMSNorm(RowOperator):
    """``x * rsqrt(mean(x**2) + eps) [* weight]`` for each row of ``x``.

    ``RMSNorm.step(x, weight=w, eps=1e-5)``: ``x`` is ``(rows, cols)`` bf16,
    the optional ``weight`` ``(cols,)`` bf16, given by keyword. Whether a weight
    is given is the ``weighted`` param, read off the operands. A ``(cols,)``
    vector ``x`` (a decoder's hidden state) is one row: ``RMSNorm.step``
    records it as ``x.reshape(1, -1)`` and returns a ``(cols,)`` result, so
    ``GEMV.step(w, RMSNorm.step(x))`` needs no reshape.

    The kernel model, as AMD's IRON builds it (and as Hugging Face's
    ``LlamaRMSNorm`` computes it): the mean of squares is an fp32 sum of
    exact fp32 squares, ``eps`` is an fp32 constant, and ``x * rsqrt(...)`` is
    computed in fp32 and rounded once to bf16. A weight is a second kernel:
    it multiplies that *bf16* normalized row by the weight in fp32 and rounds
    again, so the reference rounds the normalized value to bf16 before the
    weight too. A row whose sum of squares exceeds fp32's range (``|x|``
    around ``1.8e19 / sqrt(cols)``) overflows the kernel's accumulator and
    comes out 0: outside the contract.

    Attributes:
        eps: Added to the mean of squares (as fp32).
        weighted: Whether a weight is given (read off the step's operands).
    """

    eps: float = param(1e-5, doc="added to the mean of squares, as fp32")
    weighted: bool = param(False, doc="whether a (cols,) weight multiplies the result")
    inputs = (Input("x", "rows", "cols"), Input("weight", "cols", optional=True))
    outputs = (Output("out", "rows", "cols"),)

    @classmethod
    def infer(cls, operands: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
        found = super().infer(operands)
        found["weighted"] = _given("weight", operands.get("weight"))
        return found

    def resident_bytes(self) -> int:
        return self.cols * _BF16 if self.weighted else 0

    def reference(self, x: np.ndarray, weight: np.ndarray | None = None) -> np.ndarray:
        """Normalize each row in fp32, round to bf16; times the weight, round again."""
        name = type(self).__name__
        xf = _rows(x, name)
        w = _vector(weight, xf.shape[1], "weight", name)
        if (w is not None) != bool(self.weighted):
            raise TypeError(
                f"{name}(weighted={self.weighted}).reference got "
                f"{'a' if w is not None else 'no'} weight; construct it with "
                f"weighted={w is not None}"
            )
        with np.errstate(over="ignore", invalid="ignore"):
            mean = np.sum(xf * xf, axis=1, keepdims=True, dtype=np.float32)
            mean = mean / np.float32(xf.shape[1])
            scale = np.float32(1) / np.sqrt(mean + np.float32(self.eps))
            out = (xf * scale).astype(bfloat16)
            if w is None:
                return out
            return (out.astype(np.float32) * w).astype(bfloat16)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        if self.weighted:
            return Tolerance.bf16_ulps(
                2,
                atol=_FLUSH,
                note="two kernels, one rounding each (AMD IRON's weighted rms_norm "
                "contract): the bf16 normalized row is within 1/2 ulp, which the "
                "weight turns into at most 1 ulp of the product, and the product "
                "rounds once more; atol 2**-126 for flushed subnormals",
            )
        return Tolerance.bf16_ulps(
            1,
            atol=_FLUSH,
            note="fp32 sum of exact squares over cols <= 8064 (relative error "
            "<= cols * 2**-24 < 2**-11), rsqrt and product in fp32, one rounding: "
            "under 1/8 bf16 ulp before it, so within 1 ulp (AMD IRON's rms_norm "
            "contract); atol 2**-126 for flushed subnormals",
        )

    def cost(self, dev: Device) -> Cost:
        """Element operations: a square-accumulate and a scale per element, and a
        multiply more with a weight; bytes: x in, out back, the weight once."""
        per_element = 3 if self.weighted else 2
        return self._row_cost(
            dev, per_element * self.rows * self.cols, 1 if self.weighted else 0
        )


# -- LayerNorm ------------------------------------------------------------------------


class LayerNorm(RowOperator):
    """``(x - mean) * rsqrt(var + eps) [* weight] [+ bias]`` for each row of ``x``.

    ``LayerNorm.step(x, weight=w, bias=b, eps=1e-5)``: ``x`` is ``(rows, cols)``
    bf16; ``weight`` and ``bias`` are optional ``(cols,)`` bf16, given by
    keyword (``weighted`` and ``biased`` are read off the operands). A
    ``(cols,)`` vector ``x`` is one row, with a ``(cols,)`` result.

    The kernel model: one fused kernel, three passes over a row in fp32 (the
    mean; the variance as the mean of squared deviations from it; then
    normalize, scale and shift) and one rounding to bf16. ``eps`` is an fp32
    constant. A row whose sum of squared deviations exceeds fp32's range
    overflows the kernel's accumulator: outside the contract.

    Attributes:
        eps: Added to the variance (as fp32).
        weighted: Whether a weight is given.
        biased: Whether a bias is given.
    """

    eps: float = param(1e-5, doc="added to the variance, as fp32")
    weighted: bool = param(False, doc="whether a (cols,) weight scales the result")
    biased: bool = param(False, doc="whether a (cols,) bias is added to the result")
    inputs = (
        Input("x", "rows", "cols"),
        Input("weight", "cols", optional=True),
        Input("bias", "cols", optional=True),
    )
    outputs = (Output("out", "rows", "cols"),)

    @classmethod
    def infer(cls, operands: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
        found = super().infer(operands)
        found["weighted"] = _given("weight", operands.get("weight"))
        found["biased"] = _given("bias", operands.get("bias"))
        return found

    def resident_bytes(self) -> int:
        return (int(bool(self.weighted)) + int(bool(self.biased))) * self.cols * _BF16

    def _operands(self, x, weight, bias):
        name = type(self).__name__
        xf = _rows(x, name)
        w = _vector(weight, xf.shape[1], "weight", name)
        b = _vector(bias, xf.shape[1], "bias", name)
        for what, flag, v in (("weight", "weighted", w), ("bias", "biased", b)):
            if (v is not None) != bool(getattr(self, flag)):
                raise TypeError(
                    f"{name}({flag}={getattr(self, flag)}).reference got "
                    f"{'a' if v is not None else 'no'} {what}; construct it with "
                    f"{flag}={v is not None}"
                )
        return xf, w, b

    def reference(
        self,
        x: np.ndarray,
        weight: np.ndarray | None = None,
        bias: np.ndarray | None = None,
    ) -> np.ndarray:
        """Mean, variance, normalize, scale and shift in fp32; one rounding."""
        xf, w, b = self._operands(x, weight, bias)
        n = np.float32(xf.shape[1])
        with np.errstate(over="ignore", invalid="ignore"):
            mean = np.sum(xf, axis=1, keepdims=True, dtype=np.float32) / n
            dev = xf - mean
            var = np.sum(dev * dev, axis=1, keepdims=True, dtype=np.float32) / n
            out = dev * (np.float32(1) / np.sqrt(var + np.float32(self.eps)))
            if w is not None:
                out = out * w
            if b is not None:
                out = out + b
        return out.astype(bfloat16)

    def error_bounds(
        self,
        x: np.ndarray,
        weight: np.ndarray | None = None,
        bias: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each element's exact value and a bound on the kernel's fp32 error from it.

        With ``u = 2**-24`` and ``n = cols``, for each row: the fp32 mean is
        off by at most ``E = (n + 1) u mean|x|`` (a sum in any order, one
        division); each fp32 deviation by ``H = max_i E + u (|x_i - m| + E)``;
        the RMS of the deviations, and so ``sigma = sqrt(var + eps)``, by at
        most ``H`` (the RMS is 1-Lipschitz); the fp32 ``rsqrt`` adds a relative
        ``rho = (n + 8) u``. With ``s`` a lower bound of the computed sigma
        (``max(sqrt(eps), sigma - H) (1 - rho)``), an element is off by
        ``|w| [H (1 + rho) + |d| (rho + H / sigma)] / s + 4 u (|w d| / s + |b|)``.

        Returns:
            ``(exact, bound)``, float64 arrays of ``x``'s shape; where no
            finite bound holds (a NaN or an infinity in the row, or fp32
            overflow) the bound is ``inf``.
        """
        xf, w, b = self._operands(x, weight, bias)
        x64 = xf.astype(np.float64)
        n = max(x64.shape[1], 1)
        w64 = np.ones(n) if w is None else w.astype(np.float64)
        b64 = np.zeros(n) if b is None else b.astype(np.float64)
        with np.errstate(all="ignore"):
            mean = x64.mean(axis=1, keepdims=True)
            d = x64 - mean
            sigma = np.sqrt(np.mean(d * d, axis=1, keepdims=True) + self.eps)
            exact = d / sigma * w64 + b64
            e_mean = (n + 1) * _U * np.mean(np.abs(x64), axis=1, keepdims=True)
            h = np.max(e_mean + _U * (np.abs(d) + e_mean), axis=1, keepdims=True)
            rho = (n + 8) * _U
            s = np.maximum(np.sqrt(self.eps), sigma - h) * (1 - rho)
            ad, aw = np.abs(d), np.abs(w64)
            bound = aw * (h * (1 + rho) + ad * (rho + h / sigma)) / s
            bound += 4 * _U * (aw * ad / s + np.abs(b64))
        bound = np.where(np.isfinite(bound), bound, np.inf)
        return exact, bound

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        if not inputs:
            return Tolerance.bf16_ulps(
                1,
                atol=_FLUSH,
                note="AMD IRON's layer_norm contract (fp32 compute, one rounding); "
                "derived for rows whose fp32 mean is exact enough "
                "(cols * 2**-24 * mean|x| << std) and no bias cancelling the "
                "scaled row; tolerance(x, weight, bias) gives the bound derived "
                "for any input",
            )
        exact, fp32 = self.error_bounds(*inputs)
        with np.errstate(all="ignore"):
            reach = np.abs(exact) + fp32
            rounding = np.exp2(np.floor(np.log2(np.maximum(reach, _FLUSH))) - 7)
            bound = 2 * fp32 + rounding + _FLUSH
        bound = np.where(np.isfinite(bound), bound, np.inf)
        return Tolerance.bounded(
            bound,
            note="derived: the fp32 error bound of LayerNorm.error_bounds (the fp32 "
            "mean's error carried through the deviations, the std and the rsqrt, "
            "then the weight and bias) plus half a bf16 ulp for the one rounding, "
            "doubled, as the reference is itself such a kernel; 2**-126 for a "
            "flushed subnormal",
        )

    def cost(self, dev: Device) -> Cost:
        """Element operations: a sum, a squared deviation and a normalize per
        element, one more each for a weight and a bias; bytes: x in, out back,
        the weight and bias once."""
        params = int(bool(self.weighted)) + int(bool(self.biased))
        return self._row_cost(dev, (3 + params) * self.rows * self.cols, params)
