"""Elementwise operators over one flat bf16 vector: ``AXPY`` and ``ReLU``.

Each splits its ``size`` elements into ``tile_size`` tiles spread over
``num_aie_columns`` columns; a tile must fit a core's data memory with its
double-buffered inputs and output.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from ml_dtypes import bfloat16

from iron.core.declare import Divisors, Input, Output, param, tunable
from iron.core.device import Device
from iron.core.operator import Cost, Operator, RefusedShapeError
from iron.core.tolerance import Tolerance

__all__ = ["AXPY", "ONE_ROUNDING", "Elementwise", "ReLU"]

#: fp32 compute rounded once to bf16 is within one bf16 ulp of the exact
#: result; 2**-126 (the smallest normal bf16) is the floor for results the
#: kernel flushes to zero. AMD IRON's eltwise kernel contracts state the same
#: bf16_ulps(1, atol=2**-126) (https://github.com/amd/IRON, its eltwise
#: operators' tests).
ONE_ROUNDING = Tolerance.bf16_ulps(
    1,
    atol=2.0**-126,
    note="fp32 compute, one rounding to bf16 (AMD IRON eltwise contract); "
    "atol 2**-126 for flushed subnormals",
)

_COLUMNS = (1, 2, 4, 8)
_BF16 = np.dtype(bfloat16).itemsize


class Elementwise(Operator):
    """A flat elementwise operator: ``size`` elements in tiles over columns.

    The base of AXPY, ReLU, the binary operators and the activations. Besides
    its fields, each declares what its NPU design reads from it (so the design
    and :meth:`check` share one value): :attr:`fifo_depth`, :attr:`kernel`
    and :attr:`kernel_scalars`.
    """

    #: Tiles of each operand (inputs and output) a core holds: the object
    #: FIFOs' depth in the NPU design, and what :meth:`check` counts.
    fifo_depth: ClassVar[int] = 2
    #: The NPU kernel computing one tile, ``<kernel>(in..., out, n, ...)``
    #: (see :meth:`kernel_symbol`).
    kernel: ClassVar[str]
    #: The fields passed to the kernel after ``n``, as bf16 bits, in order.
    kernel_scalars: ClassVar[tuple[str, ...]] = ()

    def kernel_symbol(self) -> str:
        """The NPU kernel symbol this operator's tiles run: :attr:`kernel`,
        unless a field picks among several (GELU's ``form``)."""
        return type(self).kernel

    size: int = param(doc="elements in the vector")
    tile_size: int = tunable(
        domain=Divisors("size", multiple_of=16),
        doc="elements a core handles per kernel call",
    )
    num_aie_columns: int = tunable(domain=_COLUMNS, doc="columns the work spreads over")

    def resolve(self, dev: Device) -> dict[str, int]:
        if self.size <= 0 or self.size % 16:
            # No tile_size is in the domain (divisors of size, multiples of 16).
            raise RefusedShapeError(
                f"{type(self).__name__} on {dev}: size={self.size} is not a "
                f"positive multiple of 16 (a tile is a multiple of 16 elements)"
            )
        columns = max(c for c in _COLUMNS if c <= dev.columns)
        while columns > 1 and self.size % (columns * 16):
            columns //= 2
        per_column = self.size // columns
        tile = 1024
        while tile > 16 and per_column % tile:
            tile //= 2
        return {"num_aie_columns": columns, "tile_size": tile}

    def check(self, dev: Device) -> None:
        buffers = len(type(self).declaration.inputs) + len(
            type(self).declaration.outputs
        )
        need = self.tile_size * _BF16 * buffers * self.fifo_depth
        if self.num_aie_columns > dev.columns:
            raise RefusedShapeError(
                f"{type(self).__name__} on {dev}: num_aie_columns="
                f"{self.num_aie_columns} exceeds the device's {dev.columns} columns"
            )
        if self.size % (self.tile_size * self.num_aie_columns):
            raise RefusedShapeError(
                f"{type(self).__name__} on {dev}: size={self.size} is not a multiple "
                f"of tile_size * num_aie_columns = "
                f"{self.tile_size * self.num_aie_columns}"
            )
        if need > dev.core_memory_bytes // 2:
            raise RefusedShapeError(
                f"{type(self).__name__} on {dev}: tile_size={self.tile_size} needs "
                f"{need} bytes of double-buffered tiles, over half a core's "
                f"{dev.core_memory_bytes} bytes"
            )

    def cost(self, dev: Device) -> Cost:
        """One operation per element; every operand once. Each of the
        ``num_aie_columns`` columns' cores makes one kernel call per tile of
        ``tile_size`` elements: ``size / (tile_size * num_aie_columns)``."""
        op = self._settled(dev)
        operands = len(type(self).declaration.inputs) + len(
            type(self).declaration.outputs
        )
        columns = op.num_aie_columns
        return Cost(
            macs=self.size,
            bytes=self.size * _BF16 * operands,
            columns=columns,
            calls=-(-self.size // (op.tile_size * columns)),
        )


class AXPY(Elementwise):
    """``scalar_factor * x + y`` elementwise, in bf16.

    The scalar is rounded to bf16 first, as the kernel receives it; the
    product and sum are computed in fp32 and rounded once.
    """

    scalar_factor: float = param(doc="the scalar a multiplies x by")
    kernel = "axpy_bf16"
    kernel_scalars = ("scalar_factor",)
    inputs = (Input("x", "size"), Input("y", "size"))
    outputs = (Output("out", "size"),)

    def reference(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        a = np.float32(bfloat16(self.scalar_factor))
        return (a * x.astype(np.float32) + y.astype(np.float32)).astype(bfloat16)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        return ONE_ROUNDING


class ReLU(Elementwise):
    """``max(x, 0)`` elementwise; exact in bf16 (it only selects)."""

    kernel = "relu_bf16"

    inputs = (Input("x", "size"),)
    outputs = (Output("out", "size"),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return np.maximum(x, np.zeros((), x.dtype)).astype(x.dtype)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        return Tolerance.exact(note="max(x, 0) selects an input; no rounding")
