"""Binary elementwise arithmetic: ``ElementwiseAdd`` and ``ElementwiseMul``.

Each is an ``Elementwise`` operator (``size`` elements in ``tile_size`` tiles
over ``num_aie_columns`` columns; see :mod:`iron.operators.elementwise`) that
computes in fp32 and rounds once to bf16, under AMD IRON's eltwise kernel
contract ``bf16_ulps(1, atol=2**-126)``.
"""

from __future__ import annotations

import numpy as np
from ml_dtypes import bfloat16

from iron.core.declare import Input, Output
from iron.core.tolerance import Tolerance
from iron.operators.elementwise import ONE_ROUNDING, Elementwise

__all__ = ["ElementwiseAdd", "ElementwiseMul"]


class _Binary(Elementwise):
    """``out = a (op) b`` elementwise, ``size`` elements each."""

    inputs = (Input("a", "size"), Input("b", "size"))
    outputs = (Output("out", "size"),)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        return ONE_ROUNDING


class ElementwiseAdd(_Binary):
    """``a + b`` elementwise, in bf16.

    The sum is computed in fp32 and rounded once to bf16. It is not always
    exact in fp32 (``2**100 + 1``), but fp32's 24 bits are more than twice
    bf16's 8 plus 2, so rounding through fp32 still gives the correctly
    rounded sum (Figueroa, "When is double rounding innocuous?", 1995); one
    ulp is AMD IRON's eltwise contract and also covers a kernel that rounds
    toward zero.
    """

    kernel = "add_bf16"

    def reference(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):
            return (a.astype(np.float32) + b.astype(np.float32)).astype(bfloat16)


class ElementwiseMul(_Binary):
    """``a * b`` elementwise, in bf16.

    The product of two bf16 values (8-bit significands) is exact in fp32
    unless it leaves fp32's normal range, so the one rounding to bf16 is the
    only error (AMD IRON's eltwise contract; one ulp also covers a kernel
    that rounds toward zero).
    """

    kernel = "mul_bf16"

    def reference(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):
            return (a.astype(np.float32) * b.astype(np.float32)).astype(bfloat16)
