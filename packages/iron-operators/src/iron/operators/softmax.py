"""``Softmax`` over each row of a ``(rows, cols)`` bf16 tensor, with a per-call length.

Tiled by rows like the norms (see :class:`iron.operators.norms.RowOperator`):
``rows_per_tile`` rows per kernel call over ``num_aie_columns`` columns. A
core also holds one row of fp32 exponentials, so the division uses the very
values that were summed.
"""

from __future__ import annotations

import numpy as np
from ml_dtypes import bfloat16

from iron.core.declare import Input, Output, param
from iron.core.device import Device
from iron.core.operator import Cost, RefusedShapeError
from iron.core.percall import Affine, PerCall
from iron.core.tolerance import Tolerance
from iron.operators.norms import RowOperator

__all__ = ["Softmax"]

_F32 = np.dtype(np.float32).itemsize
_BF16 = np.dtype(bfloat16).itemsize


class Softmax(RowOperator):
    """``exp(x - max) / sum(exp(x - max))`` over each row's first ``length`` columns.

    ``Softmax.step(x)`` or ``Softmax.step(x, length=n)``: ``x`` is
    ``(rows, cols)`` bf16, or a ``(cols,)`` vector: one row, with a ``(cols,)``
    result. ``length`` (None for all ``cols``) may be a per-call
    value (``length=position + 1`` in decode attention): the row normalizes
    over its first ``length`` columns, and the columns at and past it come out
    exactly 0. A length of 0 gives a row of zeros; a length past ``cols`` is
    all of them (the kernel clamps it). One length serves every row.

    The kernel model: the row's max (exact), ``exp(x - max)`` in fp32 kept in
    an fp32 scratch row, their fp32 sum, each exponential divided by it in
    fp32, and one rounding to bf16. A row holding NaN, ``+inf`` or only
    ``-inf`` comes out NaN, as the exact math does.

    Attributes:
        length: Columns each row normalizes over (None for all); per call.
    """

    length: int | None = param(
        None, per_call=True, doc="columns each row normalizes over (None for all)"
    )
    inputs = (Input("x", "rows", "cols"),)
    outputs = (Output("out", "rows", "cols"),)

    def scratch_bytes(self) -> int:
        return self.cols * _F32

    def check(self, dev: Device) -> None:
        """Refuse a negative length, then the row tiling rules (see RowOperator).

        Raises:
            RefusedShapeError: ``length`` is a negative int, or a tiling rule.
        """
        length = self.length
        if isinstance(length, int) and length < 0:
            raise RefusedShapeError(
                f"Softmax on {dev}: length={length} is negative; give 0 to {self.cols} "
                f"(or None for the whole row)"
            )
        super().check(dev)

    def _valid(self, cols: int) -> int:
        if self.length is None:
            return cols
        if isinstance(self.length, PerCall | Affine):
            raise TypeError(
                f"Softmax.length is the per-call value {self.length}; bind it "
                f"(op.bind({{...}})) before running the reference"
            )
        return min(max(int(self.length), 0), cols)

    def reference(self, x: np.ndarray) -> np.ndarray:
        """fp32 max, exp, sum and divide over the first ``length`` columns; one rounding."""
        x = np.asarray(x)
        if x.ndim != 2:
            raise ValueError(
                f"Softmax.reference takes x of shape (rows, cols), got {x.shape}"
            )
        xf = x.astype(np.float32)
        n = self._valid(xf.shape[1])
        out = np.zeros(xf.shape, np.float32)
        if n and xf.shape[0]:
            v = xf[:, :n]
            with np.errstate(over="ignore", invalid="ignore", under="ignore"):
                e = np.exp(v - v.max(axis=1, keepdims=True))
                total = np.sum(e, axis=1, keepdims=True, dtype=np.float32)
                out[:, :n] = e / total
        return out.astype(bfloat16)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        return Tolerance.bf16_ulps(
            1,
            atol=2.0**-126,
            note="derived: x - max is exact or off by 2**-24 relative (so exp is "
            "off by < 2**-17 where it is above 2**-126), fp32 exp within 4 fp32 "
            "ulps, an fp32 sum of positive terms over cols <= 5376 (the core "
            "memory rule) within cols * 2**-24 < 2**-11, one fp32 division: the "
            "fp32 quotient is within 2**-10 relative of the exact softmax, under "
            "1/4 bf16 ulp, so its one rounding is within 1 ulp; atol 2**-126 for "
            "results under bf16's normal range (exp underflow, flushed)",
        )

    def cost(self, dev: Device) -> Cost:
        """Element operations: a max, an exp, a sum and a divide per element;
        bytes: x in and out back (whole rows, whatever the length); the row
        tiling's kernel calls (see RowOperator)."""
        return self._row_cost(dev, 4 * self.rows * self.cols, 0)
