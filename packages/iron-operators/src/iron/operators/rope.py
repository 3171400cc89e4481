"""Rotary position embedding: the ``RoPE`` operator and the ``rope_table`` it reads.

``x`` is ``(rows, heads, head_dim)`` bf16 (rows are the token positions of a
call; decode has one); ``table`` is ``(rows, head_dim)`` bf16, one row per
position: the cosines of the position's angles in its first half and their
sines in its second. :func:`rope_table` builds such a table for positions
``0 .. positions - 1`` the way Hugging Face computes the angles (inverse
frequencies, ``rope_scaling`` of type ``"llama3"`` or ``"linear"``); a Llama
holds the whole table as a weight and passes the rows of a call's positions.

The work is tiled by head rows: ``heads_per_tile`` heads of one position per
kernel call, spread over ``num_aie_columns`` columns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from ml_dtypes import bfloat16

from iron.core.declare import Divisors, Input, Output, param, tunable
from iron.core.device import Device
from iron.core.operator import Cost, Operator, RefusedShapeError
from iron.core.tolerance import Tolerance
from iron.operators.norms import STACK_BYTES, VECTOR_WIDTH

__all__ = ["METHODS", "RoPE", "rope_inv_freq", "rope_table"]

#: The pairings RoPE rotates: Hugging Face's rotate_half, or adjacent pairs.
METHODS = ("half", "interleaved")
_COLUMNS = (1, 2, 4, 8)
_BF16 = np.dtype(bfloat16).itemsize
_BANK_BYTES = 8192
#: head_dim is a multiple of this: each half of a table row is whole vectors.
HEAD_DIM_MULTIPLE = 2 * VECTOR_WIDTH


# -- the table --------------------------------------------------------------------------


def _scaling_field(scaling: Mapping[str, Any], key: str, kind: str) -> float:
    try:
        return float(scaling[key])
    except KeyError:
        raise ValueError(
            f"rope scaling of type {kind!r} needs {key!r}; the dict gives "
            f"{sorted(scaling)}"
        ) from None


def rope_inv_freq(
    head_dim: int, theta: float = 10000.0, scaling: Mapping[str, Any] | None = None
) -> np.ndarray:
    """The ``head_dim // 2`` inverse frequencies, in float32 as Hugging Face computes them.

    ``1 / theta ** (2i / head_dim)``; with ``scaling`` (a ``rope_scaling``
    dict, its type under ``"rope_type"`` or ``"type"``):

    * ``"default"``: unchanged.
    * ``"linear"``: divided by ``factor``.
    * ``"llama3"``: with ``factor``, ``low_freq_factor``, ``high_freq_factor``
      and ``original_max_position_embeddings`` (``L``): a frequency whose
      wavelength ``2 pi / f`` is above ``L / low_freq_factor`` is divided by
      ``factor``; one below ``L / high_freq_factor`` is kept; in between it is
      ``(1 - s) f / factor + s f`` with
      ``s = (L / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)``.

    Raises:
        ValueError: ``head_dim`` is not a positive even number, the scaling
            type is unknown, or a field it needs is missing.
    """
    if head_dim <= 0 or head_dim % 2:
        raise ValueError(f"rope head_dim={head_dim} is not a positive even number")
    f32 = np.float32
    exps = np.arange(0, head_dim, 2, dtype=np.int64).astype(f32) / f32(head_dim)
    # The power rounded once to float32, as torch's float32 pow gives it
    # (numpy's float32 power is a last bit off for 7 of Llama-3.2-1B's 32
    # frequencies; the oracle's test_rope_scaling compares with transformers).
    inv = f32(1.0) / np.power(np.float64(f32(theta)), exps.astype(np.float64)).astype(
        f32
    )
    if scaling is None:
        return inv
    kind = str(scaling.get("rope_type", scaling.get("type", "default")))
    if kind == "default":
        return inv
    factor = _scaling_field(scaling, "factor", kind)
    if kind == "linear":
        return inv / f32(factor)
    if kind != "llama3":
        raise ValueError(
            f"rope scaling type {kind!r} is not supported; give 'default', "
            f"'linear' or 'llama3'"
        )
    low = _scaling_field(scaling, "low_freq_factor", kind)
    high = _scaling_field(scaling, "high_freq_factor", kind)
    old = _scaling_field(scaling, "original_max_position_embeddings", kind)
    low_wavelength = f32(old / low)
    high_wavelength = f32(old / high)
    wavelength = f32(2 * math.pi) / inv
    scaled = np.where(wavelength > low_wavelength, inv / f32(factor), inv)
    smooth = (f32(old) / wavelength - f32(low)) / f32(high - low)
    smoothed = (f32(1) - smooth) * scaled / f32(factor) + smooth * scaled
    medium = ~(wavelength < high_wavelength) & ~(wavelength > low_wavelength)
    return np.where(medium, smoothed, scaled).astype(f32)


def rope_table(
    positions: int,
    head_dim: int,
    theta: float = 10000.0,
    scaling: dict | None = None,
) -> np.ndarray:
    """The bf16 ``(positions, head_dim)`` cos/sin table :class:`RoPE` reads.

    Row ``p`` holds ``cos(p * f_i)`` for ``i < head_dim // 2`` in its first
    half and ``sin(p * f_i)`` in its second, ``f`` from :func:`rope_inv_freq`.
    As in Hugging Face, the angle ``p * f_i`` is a float32 product; its cosine
    and sine are rounded to float32 and then to bf16 (Hugging Face casts its
    float32 cos and sin to the model's dtype).

    Raises:
        ValueError: ``positions`` is negative, or as :func:`rope_inv_freq`.
    """
    if positions < 0:
        raise ValueError(f"rope_table positions={positions} is negative")
    inv = rope_inv_freq(head_dim, theta, scaling)
    angles = np.arange(positions, dtype=np.float32)[:, None] * inv[None, :]
    angles = angles.astype(np.float64)
    table = np.concatenate([np.cos(angles), np.sin(angles)], axis=1)
    return table.astype(np.float32).astype(bfloat16)


# -- the operator ----------------------------------------------------------------------


class RoPE(Operator):
    """Rotate each head row of ``x`` by its position's angles from ``table``.

    ``RoPE.step(x, table, method="half")``: ``x`` is ``(rows, heads,
    head_dim)`` bf16 and ``table`` ``(rows, head_dim)`` bf16 (see
    :func:`rope_table`), row ``r`` of the table serving every head of row
    ``r`` of ``x``. With ``c``, ``s`` the table row's halves:

    * ``"half"`` (Hugging Face's rotate_half): ``x1, x2 = x[..., :d/2],
      x[..., d/2:]``; out is ``[x1 c - x2 s, x2 c + x1 s]``.
    * ``"interleaved"``: pairs ``(x[2i], x[2i+1])`` rotate by angle ``i``:
      ``out[2i] = x[2i] c_i - x[2i+1] s_i``, ``out[2i+1] = x[2i+1] c_i + x[2i] s_i``.

    The kernel model: each bf16 product is exact in the fp32 accumulator,
    the sum or difference of two rounds once in fp32, and the result once to
    bf16. Rows may be bounded per call (``x[:n]``, ``table[:n]``); a table
    with more rows than ``x`` serves its first rows.

    Attributes:
        method: ``"half"`` or ``"interleaved"``.
        heads_per_tile: Heads of one position a kernel call rotates.
        num_aie_columns: Columns the tiles spread over.
    """

    rows: int = param(doc="token positions in the call (1 in decode)")
    heads: int = param(doc="heads per position")
    head_dim: int = param(doc="elements of a head row, rotated in pairs")
    method: str = param("half", doc="'half' (rotate_half) or 'interleaved' pairs")
    heads_per_tile: int = tunable(
        domain=Divisors("heads"), doc="heads of one position a kernel call rotates"
    )
    num_aie_columns: int = tunable(domain=_COLUMNS, doc="columns the tiles spread over")
    #: Tiles of each streamed operand a core holds: the depth of the NPU
    #: design's object FIFOs, and what :meth:`core_bytes` counts.
    fifo_depth: ClassVar[int] = 2
    inputs = (
        Input("x", "rows", "heads", "head_dim"),
        Input("table", "rows", "head_dim"),
    )
    outputs = (Output("out", "rows", "heads", "head_dim"),)

    def __init__(self, **fields: Any) -> None:
        super().__init__(**fields)
        if self.method not in METHODS:
            raise ValueError(
                f"RoPE.method={self.method!r} is not one of {', '.join(map(repr, METHODS))}"
            )

    # -- tiling -----------------------------------------------------------------------

    def core_bytes(self, heads_per_tile: int | None = None) -> int:
        """Core data memory one tiling needs: x and out tiles and a table row,
        each double-buffered."""
        hpt = self.heads_per_tile if heads_per_tile is None else heads_per_tile
        tile = hpt * self.head_dim * _BF16
        return self.fifo_depth * (2 * tile + self.head_dim * _BF16)

    def resolve(self, dev: Device) -> dict[str, int]:
        """Spread head rows over as many columns as divide them, then group heads.

        A tile is the most heads (a divisor of ``heads``) whose x tile stays in
        one 8 KiB bank and whose buffers fit the core memory, keeping the
        tiles a multiple of the columns; 1 when nothing fits (:meth:`check`
        refuses the shape).
        """
        head_rows = max(self.rows * self.heads, 1)
        hpt = self.heads_per_tile
        if self.num_aie_columns is not None:
            columns = self.num_aie_columns
        else:
            per = hpt or 1
            fits = [
                c for c in _COLUMNS if c <= dev.columns and head_rows % (c * per) == 0
            ]
            columns = max(fits, default=1)
        if hpt is None:
            budget = dev.core_memory_bytes - STACK_BYTES
            hpt = 1
            for d in range(max(self.heads, 1), 0, -1):
                if self.heads % d or (head_rows // d) % columns:
                    continue
                tile = d * self.head_dim * _BF16
                if tile <= _BANK_BYTES and self.core_bytes(d) <= budget:
                    hpt = d
                    break
        return {"num_aie_columns": columns, "heads_per_tile": hpt}

    def check(self, dev: Device) -> None:
        """Refuse shapes a core cannot run.

        Raises:
            RefusedShapeError: ``head_dim`` is not a positive multiple of 32;
                more columns than the device has; the tiles do not spread
                evenly over the columns; or the buffers exceed a core's memory
                less its stack.
        """
        name = f"RoPE on {dev}"
        if self.head_dim <= 0 or self.head_dim % HEAD_DIM_MULTIPLE:
            raise RefusedShapeError(
                f"{name}: head_dim={self.head_dim} is not a positive multiple of "
                f"{HEAD_DIM_MULTIPLE} (even, with each half of a table row whole "
                f"{VECTOR_WIDTH}-lane vectors)"
            )
        if self.num_aie_columns > dev.columns:
            raise RefusedShapeError(
                f"{name}: num_aie_columns={self.num_aie_columns} exceeds the "
                f"device's {dev.columns} columns"
            )
        tiles = self.rows * self.heads // self.heads_per_tile
        if tiles % self.num_aie_columns:
            raise RefusedShapeError(
                f"{name}: rows * heads / heads_per_tile = {tiles} tiles do not "
                f"spread evenly over num_aie_columns={self.num_aie_columns}"
            )
        budget = dev.core_memory_bytes - STACK_BYTES
        need = self.core_bytes()
        if need > budget:
            raise RefusedShapeError(
                f"{name}: core memory: heads_per_tile={self.heads_per_tile} head "
                f"rows of head_dim={self.head_dim} need {need} bytes (x and out "
                f"tiles and a table row, double-buffered), over the {budget} bytes "
                f"of a core's {dev.core_memory_bytes} left after its "
                f"{STACK_BYTES}-byte stack"
            )

    # -- math -------------------------------------------------------------------------

    def reference(self, x: np.ndarray, table: np.ndarray) -> np.ndarray:
        """Rotate in fp32 (exact products, one rounding per sum), round once to bf16."""
        x = np.asarray(x)
        table = np.asarray(table)
        if x.ndim != 3 or x.shape[2] % 2:
            raise ValueError(
                f"RoPE.reference takes x of shape (rows, heads, head_dim) with an "
                f"even head_dim, got {x.shape}"
            )
        n, _, d = x.shape
        if table.ndim != 2 or table.shape[1] != d or table.shape[0] < n:
            raise ValueError(
                f"RoPE.reference: table has shape {table.shape}; x {x.shape} needs "
                f"at least {n} rows of {d}"
            )
        t = table[:n].astype(np.float32)[:, None, :]
        cos, sin = t[..., : d // 2], t[..., d // 2 :]
        xf = x.astype(np.float32)
        if self.method == "half":
            x1, x2 = xf[..., : d // 2], xf[..., d // 2 :]
        else:
            x1, x2 = xf[..., 0::2], xf[..., 1::2]
        with np.errstate(over="ignore", invalid="ignore"):
            first = x1 * cos - x2 * sin
            second = x2 * cos + x1 * sin
        out = np.empty_like(xf)
        if self.method == "half":
            out[..., : d // 2], out[..., d // 2 :] = first, second
        else:
            out[..., 0::2], out[..., 1::2] = first, second
        return out.astype(bfloat16)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        return Tolerance.bf16_ulps(
            1,
            atol=2.0**-126,
            note="derived: a product of two bf16 values (8 significant bits each) "
            "is exact in fp32, the sum of two rounds once (2**-24 relative), and "
            "the result once to bf16: within 1 ulp of the exact rotation of the "
            "bf16 x and table (AMD IRON's relative 0.05 also covered a float "
            "table's rounding, which here is the caller's input); atol 2**-126 "
            "for flushed subnormals",
        )

    def cost(self, dev: Device) -> Cost:
        """Two multiply-accumulates per output element; bytes: x in, out back,
        one table row per position, streamed again with each further tile of
        that position's heads; a kernel call per tile of ``heads_per_tile``
        head rows, the tiles spread over the columns' cores."""
        op = self._settled(dev)
        elements = self.rows * self.heads * self.head_dim
        columns = op.num_aie_columns
        per_position = -(-self.heads // op.heads_per_tile)
        return Cost(
            macs=2 * elements,
            bytes=(2 * elements + self.rows * self.head_dim) * _BF16,
            columns=columns,
            calls=-(-self.rows * per_position // columns),
            reread_bytes=self.rows * (per_position - 1) * self.head_dim * _BF16,
        )
