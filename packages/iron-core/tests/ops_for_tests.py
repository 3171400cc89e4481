"""Tiny operators for iron-core's tests (iron-core never imports iron.operators).

Each declares its operands and fields as a real operator does, with a numpy
reference; none has a tolerance or a cost.
"""

from __future__ import annotations

import math

import numpy as np

from iron.core.declare import Divisors, Input, Output, param, tunable
from iron.core.device import Device
from iron.core.operator import Operator, RefusedShapeError

__all__ = ["ArgMax", "Copy", "Copy2D", "MatVec", "Mul", "Scale"]


class Scale(Operator):
    """``factor * x`` elementwise, in fp32 rounded once to x's dtype."""

    size: int = param()
    factor: float = param(1.0)
    tile_size: int = tunable(domain=Divisors("size"))
    num_columns: int = tunable(domain=(1, 2, 4, 8))
    inputs = (Input("x", "size"),)
    outputs = (Output("out", "size"),)

    def resolve(self, dev: Device) -> dict[str, int]:
        return {"tile_size": math.gcd(self.size, 16), "num_columns": dev.columns}

    def check(self, dev: Device) -> None:
        if self.size % self.num_columns:
            raise RefusedShapeError(
                f"Scale: size={self.size} is not a multiple of "
                f"num_columns={self.num_columns}"
            )

    def reference(self, x: np.ndarray) -> np.ndarray:
        return (np.float32(self.factor) * x.astype(np.float32)).astype(x.dtype)


class Mul(Operator):
    """``x * y`` elementwise."""

    size: int = param()
    inputs = (Input("x", "size"), Input("y", "size"))
    outputs = (Output("out", "size"),)

    def reference(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (x.astype(np.float32) * y.astype(np.float32)).astype(x.dtype)


class MatVec(Operator):
    """``w @ x``: w is (M, K), x is (K,), the result (M,)."""

    M: int = param()
    K: int = param()
    inputs = (Input("w", "M", "K"), Input("x", "K"))
    outputs = (Output("out", "M"),)

    def reference(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        return (w.astype(np.float32) @ x.astype(np.float32)).astype(w.dtype)


class Copy(Operator):
    """``x`` unchanged: what writes a state through ``out=``."""

    consumes_views = True
    size: int = param()
    inputs = (Input("x", "size"),)
    outputs = (Output("out", "size"),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return x.copy()


class Copy2D(Operator):
    """A matrix unchanged: what consumes a gather's rows."""

    consumes_views = True
    rows: int = param()
    cols: int = param()
    inputs = (Input("x", "rows", "cols"),)
    outputs = (Output("out", "rows", "cols"),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return x.copy()


class ArgMax(Operator):
    """The index of x's greatest element, as one int32 (a sampled token)."""

    size: int = param()
    inputs = (Input("x", "size"),)
    outputs = (Output("out", 1, dtype=np.int32),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return np.array([np.argmax(x.astype(np.float32))], np.int32)
