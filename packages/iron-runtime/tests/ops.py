"""Small operators for iron-runtime's tests (not part of any catalog).

Each declares its operands as a real operator does, with a numpy reference
and an exact tolerance: the emulated NPU runs the reference as the kernel
model, so a result that differs from ``graph.reference`` is a layout,
placement, per-call word or poison bug, never rounding. ``Take`` and
``Take2`` are data movers (``consumes_views``): they copy any view, strided,
gathered or offset per call, into a buffer of their own.
"""

from __future__ import annotations

import numpy as np

from iron.core.declare import Input, Output, param
from iron.core.operator import Operator
from iron.core.tolerance import Tolerance

__all__ = ["Add1", "Add32", "Scale32", "Take", "Take2"]

_EXACT = Tolerance.exact(note="a test operator; the emulator runs its reference")


class _Exact(Operator):
    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        return _EXACT


class Take(_Exact):
    """A vector of any dtype, copied: what consumes a 1-D view."""

    size: int = param()
    inputs = (Input("x", "size", dtype=None),)
    outputs = (Output("out", "size"),)
    consumes_views = True

    def reference(self, x: np.ndarray) -> np.ndarray:
        return np.array(x, copy=True)


class Take2(_Exact):
    """A matrix of any dtype, copied: what consumes a 2-D view (a gather, a .T)."""

    rows: int = param()
    cols: int = param()
    inputs = (Input("x", "rows", "cols", dtype=None),)
    outputs = (Output("out", "rows", "cols"),)
    consumes_views = True

    def reference(self, x: np.ndarray) -> np.ndarray:
        return np.array(x, copy=True)


class Add1(_Exact):
    """``x + 1`` over an int32 vector."""

    size: int = param()
    inputs = (Input("x", "size", dtype=np.int32),)
    outputs = (Output("out", "size"),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return (x + np.int32(1)).astype(np.int32)


class Scale32(_Exact):
    """``factor * x`` over a float32 vector."""

    size: int = param()
    factor: float = param(2.0)
    inputs = (Input("x", "size", dtype=np.float32),)
    outputs = (Output("out", "size"),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return (np.float32(self.factor) * x).astype(np.float32)


class Add32(_Exact):
    """``x + y`` over float32 vectors."""

    size: int = param()
    inputs = (
        Input("x", "size", dtype=np.float32),
        Input("y", "size", dtype=np.float32),
    )
    outputs = (Output("out", "size"),)

    def reference(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (x + y).astype(np.float32)
