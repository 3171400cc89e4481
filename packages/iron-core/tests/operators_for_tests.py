"""Declared operators and a handle maker shared by the ``test_operator_*`` files.

``Scale`` has a Divisors, a tuple and an Enum tunable and a device check;
``MatVec`` reads M and K off two operands; ``Rows`` has a per-call length, a
derived field and an optional operand; ``NoResolve`` keeps the base hooks.
"""

from __future__ import annotations

from enum import Enum

import numpy as np

from iron.core.declare import Divisors, Input, Output, param, tunable
from iron.core.device import Device
from iron.core.handle import Handle
from iron.core.operator import Operator, RefusedShapeError


class Mode(Enum):
    FAST = "fast"
    EXACT = "exact"


class Scale(Operator):
    """``factor * x``: a flat op with one Divisors, one tuple and one Enum tunable."""

    size: int = param()
    factor: float = param(1.0)
    tile: int = tunable(domain=Divisors("size", multiple_of=16))
    columns: int = tunable(domain=(1, 2, 4, 8))
    mode: Mode = tunable(domain=Mode)
    inputs = (Input("x", "size"),)
    outputs = (Output("out", "size"),)

    def resolve(self, dev: Device) -> dict:
        return {"tile": 16, "columns": min(dev.columns, 8), "mode": Mode.FAST}

    def check(self, dev: Device) -> None:
        if self.columns > dev.columns:
            raise RefusedShapeError(
                f"Scale on {dev}: columns={self.columns} exceeds {dev.columns}"
            )

    def reference(self, x: np.ndarray) -> np.ndarray:
        return (np.float32(self.factor) * x.astype(np.float32)).astype(x.dtype)


class MatVec(Operator):
    """``w @ x``: M and K read off two operands."""

    M: int = param()
    K: int = param()
    tile: int = tunable(domain=Divisors("K"))
    inputs = (Input("w", "M", "K"), Input("x", "K"))
    outputs = (Output("y", "M"),)

    def resolve(self, dev: Device) -> dict:
        return {"tile": self.K}

    def reference(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        return (w.astype(np.float32) @ x.astype(np.float32)).astype(w.dtype)


class Rows(Operator):
    """Per-row op over a ``(rows, 16)`` input, ``rows`` optionally per call."""

    rows: int = param()
    length: int = param(0, per_call=True)
    half: int = param(derive=lambda self: self.length // 2)
    inputs = (Input("x", "rows", 16), Input("bias", 16, optional=True))
    outputs = (Output("out", "rows", 16), Output("sums", 16))

    def reference(self, x, bias=None):
        return x, x.sum(axis=0)


class NoResolve(Operator):
    size: int = param()
    tile: int = tunable()


def handle(name: str, *shape: int, valid=None, dtype="bfloat16") -> Handle:
    h = Handle.whole(shape, dtype, name, "input")
    if valid:
        h = Handle(h.buffer, h.shape, h.dtype, dict(valid), h.layout)
    return h
