"""``Dequant``: packed int4 weights with a bf16 scale per group of 32, to bf16.

The packing: ``N`` int4 values in ``N / 2`` uint8 bytes, two per byte, the
**low nibble first** (element ``2i`` is ``byte[i] & 0xF``, element ``2i + 1``
is ``byte[i] >> 4``); each nibble is a **signed int4 in two's complement**
(``0x0..0x7`` are 0..7, ``0x8..0xF`` are -8..-1). Group ``g`` (elements
``32g .. 32g + 31``) has scale ``scales[g]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from ml_dtypes import bfloat16

from iron.core.declare import Divisors, Input, Output, param, tunable
from iron.core.device import Device
from iron.core.handle import Handle
from iron.core.operator import Cost, DimensionConflictError, Operator, RefusedShapeError
from iron.core.tolerance import Tolerance

__all__ = ["GROUP", "Dequant"]

#: Elements that share one scale.
GROUP = 32
#: A tile holds whole groups whose scales are whole 4-byte DMA words: two
#: groups' bf16 scales are one word.
_TILE_MULTIPLE = 2 * GROUP
_COLUMNS = (1, 2, 4, 8)
_STACK_BYTES = 1024


def unpack_int4(packed: np.ndarray) -> np.ndarray:
    """The signed int4 values of ``packed`` (low nibble first), as int8."""
    b = np.asarray(packed, dtype=np.uint8)
    nibbles = np.stack([b & 0x0F, b >> 4], axis=-1).reshape(-1).astype(np.int8)
    return np.where(nibbles >= 8, nibbles - 16, nibbles).astype(np.int8)


class Dequant(Operator):
    """``int4 * scale`` to bf16: ``step(packed, scales)`` -> ``(N,)`` bf16.

    ``packed`` is ``(N / 2,)`` uint8 (two int4 a byte, low nibble first,
    signed two's complement; module docstring), ``scales`` ``(N / 32,)`` bf16,
    one per group of 32. Each value is ``int4 * scale`` computed in fp32 and
    rounded once to bf16.

    Exact: an int4 has at most 3 significant bits and a bf16 scale 8, so the
    fp32 product is the exact product (at most 11 significant bits, none
    below fp32's smallest subnormal 2**-149; a product past fp32's range is
    past bf16's too, inf either way), and the one rounding to bf16 (to
    nearest even, as the kernel converts) is the correctly rounded result.

    Device rules: ``N`` a multiple of 32 (whole groups) and of 64 (two groups'
    scales are one 4-byte DMA word); tiles of ``tile_size`` elements (a
    multiple of 64 dividing ``N``) over ``num_aie_columns`` columns, each
    tile's packed bytes, scales and result double-buffered in a core.
    """

    N: int = param(doc="elements (int4 values) to dequantize")
    packed_bytes: int = param(derive=lambda self: self.N // 2, doc="bytes of packed")
    groups: int = param(derive=lambda self: self.N // GROUP, doc="scales (groups)")
    tile_size: int = tunable(
        domain=Divisors("N", multiple_of=_TILE_MULTIPLE),
        doc="elements a core dequantizes per kernel call",
    )
    num_aie_columns: int = tunable(domain=_COLUMNS, doc="columns the work spreads over")
    #: Tiles of each streamed operand a core holds: the depth of the NPU
    #: design's object FIFOs, and what :meth:`core_bytes` counts.
    fifo_depth: ClassVar[int] = 2
    inputs = (
        Input("packed", "packed_bytes", dtype=np.uint8),
        Input("scales", "groups"),
    )
    outputs = (Output("out", "N", dtype=bfloat16),)

    @classmethod
    def infer(cls, operands: Mapping[str, Handle | None]) -> dict[str, tuple[Any, str]]:
        """``N`` is twice ``packed``'s bytes; ``scales`` must hold ``N / 32``."""
        packed, scales = operands["packed"], operands["scales"]
        assert packed is not None and scales is not None
        for name, h in (("packed", packed), ("scales", scales)):
            if h.ndim != 1:
                raise ValueError(
                    f"Dequant: {name} has shape {list(h.shape)}, but its operand is "
                    f"1-D; reshape it to ({h.elements},)"
                )
        n = 2 * packed.shape[0]
        if n % GROUP == 0 and scales.shape[0] != n // GROUP:
            raise DimensionConflictError(
                f"Dequant: groups is {n // GROUP} from packed.shape[0] * 2 / {GROUP} "
                f"but {scales.shape[0]} from scales.shape[0]"
            )
        return {"N": (n, "packed.shape[0] * 2")}

    def resolve(self, dev: Device) -> dict[str, int]:
        if self.N <= 0 or self.N % _TILE_MULTIPLE:
            self._rules(dev)  # names the rule N breaks
        columns = self.num_aie_columns or max(
            c
            for c in _COLUMNS
            if c <= dev.columns and self.N % (c * _TILE_MULTIPLE) == 0
        )
        per_column = self.N // columns
        tile = self.tile_size or 4096
        while tile > _TILE_MULTIPLE and per_column % tile:
            tile //= 2
        return {"num_aie_columns": columns, "tile_size": tile}

    def _refuse(self, dev: Device, rule: str) -> RefusedShapeError:
        return RefusedShapeError(f"Dequant on {dev}: {rule}")

    def _rules(self, dev: Device) -> None:
        if self.N <= 0 or self.N % GROUP:
            raise self._refuse(
                dev,
                f"N={self.N} is not a positive multiple of the group {GROUP} (one "
                f"scale per {GROUP} values)",
            )
        if self.N % _TILE_MULTIPLE:
            raise self._refuse(
                dev,
                f"N={self.N} is not a multiple of {_TILE_MULTIPLE}: its "
                f"{self.N // GROUP} bf16 scales are not whole 4-byte DMA words",
            )

    def core_bytes(self, tile: int) -> int:
        """Core memory for one tile: packed, scales and result, double-buffered."""
        return (
            self.fifo_depth * (tile // 2 + (tile // GROUP) * 2 + tile * 2)
            + _STACK_BYTES
        )

    def check(self, dev: Device) -> None:
        self._rules(dev)
        if self.num_aie_columns > dev.columns:
            raise self._refuse(
                dev,
                f"num_aie_columns={self.num_aie_columns} exceeds the device's "
                f"{dev.columns} columns",
            )
        if self.N % (self.tile_size * self.num_aie_columns):
            raise self._refuse(
                dev,
                f"N={self.N} is not a multiple of tile_size * num_aie_columns = "
                f"{self.tile_size * self.num_aie_columns}",
            )
        need = self.core_bytes(self.tile_size)
        if need > dev.core_memory_bytes:
            raise self._refuse(
                dev,
                f"tile_size={self.tile_size} needs {need} bytes (packed, scales and "
                f"result, double-buffered, and a stack), over a core's "
                f"{dev.core_memory_bytes} bytes",
            )

    def reference(self, packed: np.ndarray, scales: np.ndarray) -> np.ndarray:
        values = unpack_int4(packed)
        if values.size != scales.size * GROUP:
            raise ValueError(
                f"Dequant: {values.size} values need {values.size // GROUP} scales "
                f"(one per {GROUP}), got {scales.size}"
            )
        s = np.repeat(scales.astype(np.float32), GROUP)
        with np.errstate(over="ignore", invalid="ignore"):
            return (values.astype(np.float32) * s).astype(bfloat16)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        return Tolerance.exact(
            note="int4 (3 significant bits) times a bf16 scale (8) is exact in "
            "fp32; the one rounding to bf16, to nearest even, is the correctly "
            "rounded exact product"
        )

    def cost(self, dev: Device) -> Cost:
        """One multiply per element; packed bytes and scales read, bf16 written;
        a kernel call per tile on each column's core: ``N / (tile_size *
        num_aie_columns)``."""
        op = self._settled(dev)
        columns = op.num_aie_columns
        return Cost(
            macs=self.N,
            bytes=self.N // 2 + (self.N // GROUP) * 2 + self.N * 2,
            columns=columns,
            calls=-(-self.N // (op.tile_size * columns)),
        )
