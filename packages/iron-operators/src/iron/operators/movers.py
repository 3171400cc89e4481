"""Data movers: ``Copy`` (any view to a contiguous tensor), ``Transpose``, ``Repeat``.

Movers change where elements are, never their values, so each is exact.
``Copy`` is the one operator that reads views (strided access patterns,
per-call offsets, gathered rows): the shim DMA walks the view as it reads,
so a view is refused where its walk is not shim buffer descriptors on the
device. ``Repeat`` is a DMA too (re-reading its input with the descriptor's
iteration count); ``Transpose`` moves blocks through cores, which swap them
with vector shuffles (a DMA moves 4-byte words, so it cannot swap bf16
elements on its own).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from math import prod
from typing import Any

import numpy as np

from iron.core.declare import Divisors, Input, Output, param, tunable
from iron.core.device import Device
from iron.core.dma import (
    shim_descriptor_fits,
    simplify_walk,
    split_long_dims,
    walk_reach,
    wrap_limit,
)
from iron.core.handle import Handle
from iron.core.operator import (
    Cost,
    DimensionConflictError,
    Operator,
    RefusedShapeError,
)
from iron.core.tap import TensorAccessPattern
from iron.core.tolerance import Tolerance

__all__ = ["Access", "Copy", "Repeat", "Transpose"]

_EXACT = Tolerance.exact(
    note="a mover only moves elements; any tolerance would also accept a wrong "
    "permutation (AMD IRON's Copy, Repeat and Transpose are exact)"
)
_COLUMNS = (1, 2, 4, 8)
_STACK_BYTES = 1024


class _Mover(Operator):
    """A data mover's shared answer: it moves values, it computes nothing."""

    def reads_float32(self, index: int) -> bool:
        """False: a mover copies a bf16 input's values as they are, so a
        float32 copy of a weight would only be converted back."""
        return False


@dataclasses.dataclass(frozen=True)
class Access:
    """How ``Copy`` reads its view: the shim DMA walks, in elements.

    ``Copy.step`` reads it off the view's layout; a Copy made standalone has
    none (a contiguous run).

    Attributes:
        kind: The view's layout kind (``"dense"``, ``"strided"``,
            ``"gather"``: ``HandleLayout.kind``).
        walks: One ``(offset, sizes, strides)`` per descriptor, over the
            buffer's elements (the offset's constant part).
        per_call: The multiples per-call values add to the start address (a
            per-call offset's coefficients, or a gathered row's length for
            ids the device makes).
        sized_per_call: Whether a per-call repeat or length sets the walks'
            first sizes (then each walk is one four-dimensional descriptor).
        per_walk: Whether each walk moves by a per-call value of its own
            (rows gathered by ids the device makes) rather than the view
            as one.
    """

    kind: str
    walks: tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...]
    per_call: tuple[int, ...] = ()
    sized_per_call: bool = False
    per_walk: bool = False

    @classmethod
    def of(cls, h: Handle) -> Access:
        """The walks a DMA makes to read handle ``h``."""
        w = h.layout.dma_walks(h.elements)
        return cls(h.layout.kind, w.walks, w.per_call, w.sized_per_call, w.per_walk)

    def __repr__(self) -> str:
        shown = "; ".join(
            f"@{o} {list(s)}/{list(t)}" if len(s) > 1 or t != (1,) else f"@{o} {s[0]}"
            for o, s, t in self.walks[:3]
        )
        more = f"; +{len(self.walks) - 3}" if len(self.walks) > 3 else ""
        per_call = f" +{list(self.per_call)}*per-call" if self.per_call else ""
        return f"{self.kind}({shown}{more}){per_call}"


class Copy(_Mover):
    """A contiguous copy of any view: ``step(view)``, shaped as the view.

    The view may be a strided walk, a slice at a per-call offset
    (``cache[position]``) or gathered rows (``table[ids]``); its dtype is any.
    With ``out=`` it writes a state or a view of one:
    ``Copy.step(k, out=self.cache[:, position])``. A view bounded per call
    gives a result with the same bounds. ``shape``, ``itemsize`` and
    ``access`` are read off the view.

    Device rules: the DMA reads the view as shim buffer descriptors, so each
    walk must be one (after merging contiguous dimensions: at most four, the
    outermost an iteration of at most 64, sizes within the wrap field,
    strides within the step field, 4-byte aligned starts and runs, per-call
    offsets too); a walk of elements narrower than 4 bytes must be contiguous
    innermost (a DMA moves whole words); at most ``shim_bds`` descriptors.
    """

    consumes_views = True
    shape: tuple[int, ...] = param(doc="the view's shape, which the copy has")
    itemsize: int = param(2, doc="bytes per element (the view's dtype)")
    access: Access | None = param(
        None, doc="how the view is read (inferred); None is a contiguous run"
    )
    inputs = (Input("view", dtype=None),)
    outputs = (Output("out"),)

    def __init__(self, **fields: Any) -> None:
        if fields.get("shape") is not None:
            fields["shape"] = tuple(int(s) for s in fields["shape"])
        super().__init__(**fields)

    @classmethod
    def infer(cls, operands: Mapping[str, Handle | None]) -> dict[str, tuple[Any, str]]:
        view = operands["view"]
        assert view is not None
        return {
            "shape": (tuple(view.shape), "view.shape"),
            "itemsize": (np.dtype(view.dtype).itemsize, "view.dtype"),
            "access": (Access.of(view), "view's layout"),
        }

    def output_shapes(self) -> list[tuple[int, ...]]:
        return [tuple(self.shape)]

    def output_valid(self, inputs: list[Handle | None]) -> list[dict[int, Any]]:
        """The copy is bounded on every axis the view is."""
        view = inputs[0]
        return [dict(view.valid) if view is not None else {}]

    def resolve(self, dev: Device) -> dict[str, Any]:
        return {}

    def _refuse(self, dev: Device, rule: str) -> RefusedShapeError:
        return RefusedShapeError(f"Copy on {dev}: {rule}")

    def check(self, dev: Device) -> None:
        access = self.access or Access("dense", ((0, (prod(self.shape),), (1,)),))
        size = self.itemsize
        align = dev.dma_alignment_bytes
        if len(access.walks) > dev.shim_bds:
            raise self._refuse(
                dev,
                f"the view is {len(access.walks)} shim descriptors ({access.kind}), "
                f"over the shim tile's {dev.shim_bds}; copy it in parts",
            )
        for c in access.per_call:
            if (c * size) % align:
                raise self._refuse(
                    dev,
                    f"a per-call offset moves the view by {c} elements ({c * size} "
                    f"bytes) per unit, not a multiple of the DMA's {align}-byte "
                    f"alignment",
                )
        for offset, sizes, strides in access.walks:
            self._check_walk(dev, offset, sizes, strides, access.sized_per_call)

    def _check_walk(
        self,
        dev: Device,
        offset: int,
        sizes: tuple[int, ...],
        strides: tuple[int, ...],
        sized_per_call: bool,
    ) -> None:
        size, align, granule = (
            self.itemsize,
            dev.dma_alignment_bytes,
            dev.dma_granule_bytes,
        )
        shown = f"a walk of sizes {list(sizes)}, strides {list(strides)}"
        if (offset * size) % align:
            raise self._refuse(
                dev,
                f"{shown} starts at element {offset} (byte {offset * size}), not "
                f"{align}-byte aligned",
            )
        if sized_per_call:
            # A per-call repeat or length: one four-dimensional descriptor as is.
            tap = TensorAccessPattern((walk_reach(sizes, strides),), 0, sizes, strides)
            if not shim_descriptor_fits(dev, tap, np.dtype(f"V{size}")):
                raise self._refuse(dev, f"{shown} is not one shim descriptor")
            return
        sizes, strides = simplify_walk(sizes, strides)
        if len(sizes) == 1 and strides[0] == 1:
            if (sizes[0] * size) % granule:
                raise self._refuse(
                    dev,
                    f"a contiguous run of {sizes[0]} elements ({sizes[0] * size} "
                    f"bytes) is not a whole number of {granule}-byte DMA words",
                )
            return
        if strides[-1] != 1 and size < granule:
            raise self._refuse(
                dev,
                f"{shown} steps {strides[-1]} elements innermost: the DMA moves "
                f"whole {granule}-byte words, so {size}-byte elements must be "
                f"contiguous innermost (use Transpose, or copy a contiguous slice)",
            )
        if (sizes[-1] * size) % granule:
            raise self._refuse(
                dev,
                f"{shown} moves runs of {sizes[-1]} elements ({sizes[-1] * size} "
                f"bytes), not whole {granule}-byte DMA words",
            )
        for stride in strides[:-1]:
            if (stride * size) % granule:
                raise self._refuse(
                    dev,
                    f"{shown} steps {stride} elements ({stride * size} bytes), not "
                    f"whole {granule}-byte DMA words",
                )
        sizes, strides = split_long_dims(dev, sizes, strides, size)
        if len(sizes) > 4:
            raise self._refuse(
                dev,
                f"{shown} needs {len(sizes)} DMA dimensions, more than a shim "
                f"descriptor's four; copy it in parts",
            )
        pad = 4 - len(sizes)
        sizes, strides = (1,) * pad + sizes, (0,) * pad + strides
        tap = TensorAccessPattern((walk_reach(sizes, strides),), 0, sizes, strides)
        if not shim_descriptor_fits(dev, tap, np.dtype(f"V{size}")):
            raise self._refuse(
                dev,
                f"{shown} is not one shim descriptor (iteration <= "
                f"{dev.dma_iteration_max} outermost, sizes <= {wrap_limit(dev)} words, "
                f"strides < 2**{dev.dma_stride_bits} words, {granule}-byte runs)",
            )

    def reference(self, view: np.ndarray) -> np.ndarray:
        return np.array(view, copy=True)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        return _EXACT

    def cost(self, dev: Device) -> Cost:
        """No arithmetic; the view read and the copy written, by one column's
        shim DMA (no core, no kernel call)."""
        return Cost(
            macs=0, bytes=2 * prod(self.shape) * self.itemsize, cores=0, calls=0
        )


class Transpose(_Mover):
    """Swap the last two axes: ``(R, C) -> (C, R)``, or ``(B, R, C) -> (B, C, R)``.

    ``step(x)`` on a bf16 ``x``; exact. Cores take ``tile_rows x tile_cols``
    blocks (multiples of 8: the kernel swaps 8x8 blocks with vector
    shuffles), double-buffered in and out; blocks spread over
    ``num_aie_columns`` columns. A bound on an axis of ``x`` bounds the
    result's matching axis.
    """

    batch: int | None = param(None, doc="leading batch of a 3-D x; None for 2-D")
    rows: int = param(doc="R, rows of x")
    cols: int = param(doc="C, columns of x")
    tile_rows: int = tunable(
        domain=Divisors("rows", multiple_of=8), doc="rows of x in one block"
    )
    tile_cols: int = tunable(
        domain=Divisors("cols", multiple_of=8), doc="columns of x in one block"
    )
    num_aie_columns: int = tunable(domain=_COLUMNS, doc="columns blocks spread over")
    inputs = (Input("x"),)
    outputs = (Output("out"),)

    @classmethod
    def infer(cls, operands: Mapping[str, Handle | None]) -> dict[str, tuple[Any, str]]:
        x = operands["x"]
        assert x is not None
        if x.ndim not in (2, 3):
            raise ValueError(
                f"Transpose: x has shape {list(x.shape)}; it takes a 2-D (R, C) or "
                f"a 3-D (B, R, C) x"
            )
        found: dict[str, tuple[Any, str]] = {}
        if x.ndim == 3:
            found["batch"] = (x.shape[0], "x.shape[0]")
        found["rows"] = (x.shape[-2], f"x.shape[{x.ndim - 2}]")
        found["cols"] = (x.shape[-1], f"x.shape[{x.ndim - 1}]")
        return found

    def output_shapes(self) -> list[tuple[int, ...]]:
        lead = () if self.batch is None else (self.batch,)
        return [(*lead, self.cols, self.rows)]

    def output_valid(self, inputs: list[Handle | None]) -> list[dict[int, Any]]:
        """A bound on x's rows bounds the result's columns, and so on."""
        x = inputs[0]
        if x is None:
            return [{}]
        last = x.ndim - 1
        swap = {last: last - 1, last - 1: last}
        return [{swap.get(axis, axis): b for axis, b in x.valid.items()}]

    def _blocks(self) -> int:
        per = (self.rows // self.tile_rows) * (self.cols // self.tile_cols)
        return per * (self.batch or 1)

    def resolve(self, dev: Device) -> dict[str, int]:
        fields = self.fields()
        picks = {}
        for name, of in (("tile_rows", "rows"), ("tile_cols", "cols")):
            options = Divisors(of, multiple_of=8, at_most=64).values(fields)
            if not options:
                raise self._refuse(dev, self._multiple_rule(of))
            picks[name] = getattr(self, name) or max(options)
        blocks = (
            (self.batch or 1)
            * (self.rows // picks["tile_rows"])
            * (self.cols // picks["tile_cols"])
        )
        columns = max(c for c in _COLUMNS if c <= dev.columns and c <= max(blocks, 1))
        return {**picks, "num_aie_columns": columns}

    def _refuse(self, dev: Device, rule: str) -> RefusedShapeError:
        return RefusedShapeError(f"Transpose on {dev}: {rule}")

    def _multiple_rule(self, of: str) -> str:
        return (
            f"{of}={getattr(self, of)} is not a multiple of 8 (the kernel swaps 8x8 "
            f"blocks with vector shuffles)"
        )

    def check(self, dev: Device) -> None:
        for of in ("rows", "cols"):
            if getattr(self, of) < 8 or getattr(self, of) % 8:
                raise self._refuse(dev, self._multiple_rule(of))
        if self.num_aie_columns > dev.columns:
            raise self._refuse(
                dev,
                f"num_aie_columns={self.num_aie_columns} exceeds the device's "
                f"{dev.columns} columns",
            )
        block = self.tile_rows * self.tile_cols * 2
        need = 2 * 2 * block + _STACK_BYTES
        if need > dev.core_memory_bytes:
            raise self._refuse(
                dev,
                f"a {self.tile_rows}x{self.tile_cols} block needs {need} bytes "
                f"(in and out, double-buffered, and a stack), over a core's "
                f"{dev.core_memory_bytes} bytes",
            )
        total = (self.batch or 1) * self.rows * self.cols
        reads = TensorAccessPattern(
            (total,), 0, (1, 1, self.tile_rows, self.tile_cols), (0, 0, self.cols, 1)
        )
        writes = TensorAccessPattern(
            (total,), 0, (1, 1, self.tile_cols, self.tile_rows), (0, 0, self.rows, 1)
        )
        for what, tap in (("read", reads), ("write", writes)):
            if not shim_descriptor_fits(dev, tap, np.dtype("V2")):
                raise self._refuse(
                    dev,
                    f"a block's {what} (sizes {list(tap.sizes[2:])}, row stride "
                    f"{tap.strides[2]} elements) is not one shim descriptor",
                )

    def reference(self, x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.swapaxes(x, -1, -2))

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        return _EXACT

    def cost(self, dev: Device) -> Cost:
        """One shuffle per element (counted as an element operation); x and out;
        a kernel call per block, the blocks spread over the columns' cores."""
        op = self._settled(dev)
        elements = (self.batch or 1) * self.rows * self.cols
        columns = op.num_aie_columns
        return Cost(
            macs=elements,
            bytes=2 * elements * 2,
            columns=columns,
            calls=-(-op._blocks() // columns),
        )


class Repeat(_Mover):
    """Repeat each row ``repeat`` times along axis 0: ``np.repeat(x, repeat, axis=0)``.

    ``step(x, repeat=...)`` on ``x`` of any rank (at least 1) and dtype; the
    result is ``(rows * repeat, *row_shape)``; exact. Grouped-query expansion
    of kv heads is ``Repeat.step(k, repeat=heads // kv_heads)``.

    On the device one shim descriptor re-reads ``x`` ``repeat`` times (its
    iteration count, at most 64) and the write walks ``(repeat, rows, row)``
    so copy ``r`` of row ``i`` lands at ``i * repeat + r``; a row is split into
    two dimensions of at most 1023 words. A leading bound ``x[:n]`` bounds
    the result to ``n * repeat`` rows.
    """

    rows: int = param(doc="rows of x (axis 0)")
    row_shape: tuple[int, ...] = param((), doc="the shape of one row")
    repeat: int = param(doc="copies of each row")
    itemsize: int = param(2, doc="bytes per element (x's dtype)")
    inputs = (Input("x", dtype=None),)
    outputs = (Output("out"),)

    def __init__(self, **fields: Any) -> None:
        if fields.get("row_shape") is not None:
            fields["row_shape"] = tuple(int(s) for s in fields["row_shape"])
        super().__init__(**fields)

    @classmethod
    def infer(cls, operands: Mapping[str, Handle | None]) -> dict[str, tuple[Any, str]]:
        x = operands["x"]
        assert x is not None
        if x.ndim < 1:
            raise DimensionConflictError("Repeat: x is a scalar; it repeats rows")
        return {
            "rows": (x.shape[0], "x.shape[0]"),
            "row_shape": (tuple(x.shape[1:]), "x.shape[1:]"),
            "itemsize": (np.dtype(x.dtype).itemsize, "x.dtype"),
        }

    def output_shapes(self) -> list[tuple[int, ...]]:
        return [(self.rows * self.repeat, *self.row_shape)]

    def output_valid(self, inputs: list[Handle | None]) -> list[dict[int, Any]]:
        """``x[:n]`` gives ``n * repeat`` rows; other axes keep their bounds."""
        x = inputs[0]
        if x is None:
            return [{}]
        return [{a: (b * self.repeat if a == 0 else b) for a, b in x.valid.items()}]

    def resolve(self, dev: Device) -> dict[str, Any]:
        return {}

    def _refuse(self, dev: Device, rule: str) -> RefusedShapeError:
        return RefusedShapeError(f"Repeat on {dev}: {rule}")

    def check(self, dev: Device) -> None:
        row = prod(self.row_shape)
        row_bytes = row * self.itemsize
        granule, wrap = dev.dma_granule_bytes, wrap_limit(dev)
        if self.repeat < 1:
            raise self._refuse(dev, f"repeat={self.repeat} is not positive")
        if self.repeat > dev.dma_iteration_max:
            raise self._refuse(
                dev,
                f"repeat={self.repeat} exceeds the shim iteration count "
                f"{dev.dma_iteration_max} (x is re-read once per repeat)",
            )
        if row_bytes % granule:
            raise self._refuse(
                dev,
                f"a row of {row} elements ({row_bytes} bytes) is not a whole "
                f"number of {granule}-byte DMA words",
            )
        if self.rows > wrap:
            raise self._refuse(
                dev,
                f"rows={self.rows} exceeds the DMA size field's {wrap} (the write "
                f"walks rows in one dimension)",
            )
        sizes, strides = split_long_dims(dev, (row,), (1,), self.itemsize)
        words = sizes[-1] * self.itemsize // granule
        if len(sizes) > 2 or words > wrap or (len(sizes) == 2 and sizes[0] > wrap):
            raise self._refuse(
                dev,
                f"a row of {row_bytes} bytes does not split into two DMA dimensions "
                f"of at most {wrap} words",
            )
        inner = sizes if len(sizes) == 2 else (1, row)
        inner_strides = strides if len(strides) == 2 else (row, 1)
        tap = TensorAccessPattern(
            (self.rows * self.repeat * row,),
            0,
            (self.repeat, self.rows, *inner),
            (row, self.repeat * row, *inner_strides),
        )
        if not shim_descriptor_fits(dev, tap, np.dtype(f"V{self.itemsize}")):
            raise self._refuse(
                dev,
                f"the write walk (sizes {list(tap.sizes)}, strides "
                f"{list(tap.strides)} elements) exceeds a shim descriptor's "
                f"{dev.dma_stride_bits}-bit strides",
            )

    def reference(self, x: np.ndarray) -> np.ndarray:
        return np.repeat(x, self.repeat, axis=0)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        return _EXACT

    def cost(self, dev: Device) -> Cost:
        """No arithmetic; x read ``repeat`` times and the result written, by
        one column's shim DMA (no core, no kernel call)."""
        out = self.rows * self.repeat * prod(self.row_shape) * self.itemsize
        return Cost(macs=0, bytes=2 * out, cores=0, calls=0)
