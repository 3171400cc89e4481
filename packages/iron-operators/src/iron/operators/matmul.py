"""Matrix products with a `Precision`: ``GEMV`` and ``GEMM``, and their rounding models.

This module owns the two bf16 matmul operators: their declarations, device
rules (``resolve``, ``check``) and costs. What they share is re-exported
here: each precision level's kernel model (`model_product`) and the bound it
is held to (`error_bound`, whose docstring derives it) live in
``iron.operators._matmul_math``. The device geometry is here: the mmul shape
per architecture and level (`mmul_shape`), the core memory tiles may use
(`STACK_BYTES`), the tile search ``resolve`` makes and the device rules
``check`` refuses a shape or tiling by. The bfp16 block format lives in
:mod:`iron.operators.bfp16`.

The levels:

* ``HIGHEST``: bf16 products are exact in float32 and summed in float32 over
  all of K, then rounded once to bf16.
* ``HIGH``: the partial sum is rounded to bf16 after each K tile of
  ``tile_k`` (the kernel keeps a bf16 C tile between K tiles, as AMD's
  ``aie_kernels/aie2p/mm.cc`` does with a bf16 C) and the next tile adds
  onto it in float32; the last rounding is the output's.
* ``MEDIUM``: A and B are first converted to bfp16 blocks of 8 along K, then
  accumulated as at ``HIGH``. NPU1 has no bfp16 multiplies: there `resolve`
  sets ``effective_precision`` to ``HIGH``.

A step's ``tolerance(*inputs)`` is twice the level's `error_bound`, as it
judges a device result against ``reference()``, itself such a kernel;
without inputs it is AMD IRON's GEMV figure ``relative(0.04, 1e-3)``, which
holds only for unit-scale data without cancellation. The bounds assume
round-to-nearest-even conversions (AMD IRON builds its matmul kernels with
``ROUND_CONV_EVEN``); bfp16's whole block unit also covers a truncating
conversion.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

import numpy as np

from iron.core.declare import Divisors, Input, Output, param, tunable
from iron.core.device import Device
from iron.core.operator import Cost, DimensionConflictError, Operator, RefusedShapeError
from iron.core.precision import Precision
from iron.core.tolerance import Tolerance
from iron.operators import matvec
from iron.operators._matmul_math import AMD_GEMV, bound_tolerance
from iron.operators._matmul_math import error_bound as error_bound
from iron.operators._matmul_math import model_product as model_product

__all__ = ["GEMM", "GEMV", "STACK_BYTES", "error_bound", "mmul_shape", "model_product"]

_LOG = logging.getLogger("iron.operators.matmul")

# -- the device geometry: mmul shapes, core memory, the tile choice -------------

_BF16 = 2  # bytes
_F32 = 4
#: Bytes of core data memory a kernel's stack takes (what tiles may not use).
STACK_BYTES = 1024
_COLUMNS = (1, 2, 4, 8)
#: GEMM's output tiles per core when ``out_depth`` is not given: double-
#: buffered, as every other streamed tile.
_OUT_DEPTH = 2
# bf16 mmul shapes (m, k, n) per architecture: AIE2 (4, 8, 4); AIE2P (4, 8, 8),
# or (8, 8, 8) when bf16 runs as bfp16 (mlir-aie aie_kernels/aie2p/mm.cc:
# "this shape is only possible for bf16 when using bfp16 emulation").
_MMUL = {"aie2": (4, 8, 4), "aie2p": (4, 8, 8)}
_MMUL_BFP16 = (8, 8, 8)
# The GEMV kernel's vector widths, widest first (AMD IRON gemv: mv.cc is built
# at 64, 32 or 16 lanes and needs its K to be a multiple of, and at least
# twice, the width).
_VECTOR_WIDTHS = (64, 32, 16)


def mmul_shape(dev: Device, level: Precision) -> tuple[int, int, int]:
    """The bf16 mmul shape ``(m, k, n)`` a matmul at ``level`` uses on ``dev``."""
    if level is Precision.MEDIUM and dev.bfp16:
        return _MMUL_BFP16
    return _MMUL.get(dev.arch, _MMUL["aie2p"])


def _mmul_units(
    dev: Device, level: Precision, fields: dict[str, int]
) -> tuple[int, int, int]:
    """GEMM's ``(2m, k, 2n)`` of the mmul; refuses a field (m, k, n) off them."""
    shape = mmul_shape(dev, level)
    units = (2 * shape[0], shape[1], 2 * shape[2])
    whys = ("twice the mmul's m", "the mmul's k", "twice the mmul's n")
    for (name, value), unit, why, part in zip(fields.items(), units, whys, shape):
        if value % unit:
            raise RefusedShapeError(
                f"GEMM on {dev}: {name}={value} is not a multiple "
                f"of {unit} ({why}={part}; {dev.arch} bf16 mmul {shape} at "
                f"{level.value})"
            )
    return units


def _core_budget(dev: Device) -> int:
    """Bytes of a core's data memory the double-buffered tiles may take."""
    return dev.core_memory_bytes - STACK_BYTES


def _largest(candidates: Iterable[int], ok: Callable[[int], bool]) -> int | None:
    """The _largest candidate ``ok`` accepts, or None."""
    return next((c for c in sorted(candidates, reverse=True) if ok(c)), None)


def _k_tiles(k: int, width: int) -> list[int]:
    """GEMV's K tiles for a vector width: multiples of it, at least twice it, dividing K."""
    return [t for t in range(2 * width, k + 1, width) if k % t == 0]


def _gemv_need(tile_m: int, tile_k: int, depth: int) -> int:
    """GEMV's bytes: w and x tiles in bf16, the partial sums in fp32, ``depth`` of each."""
    return depth * (tile_m * tile_k * _BF16 + tile_k * _BF16 + tile_m * _F32)


def _gemm_need(
    tile_m: int, tile_k: int, tile_n: int, depth: int, out_depth: int = 2
) -> int:
    """GEMM's core bytes: a and b tiles, an fp32 accumulator, the bf16 output tiles.

    ``depth`` a and b tiles in bf16, ``out_depth`` output tiles. At ``out_depth=2`` the accumulator and the two output tiles are two fp32
    tiles' bytes: ``depth * (a + b + c in fp32)``, the design's count.
    """
    tile_c = tile_m * tile_n
    return (
        depth * (tile_m * tile_k * _BF16 + tile_k * tile_n * _BF16)
        + tile_c * _F32
        + out_depth * tile_c * _BF16
    )


# One DMA channel's stream moves a 32-bit word a cycle [AM020: "each channel
# can sustain 4 bytes per cycle"; AMD AM020, Versal AIE-ML Architecture
# Manual]; a column's shim rate (Device.shim_bytes_per_s_per_column) is four
# such channels (2 MM2S + 2 S2MM), so one channel is a quarter of it. A
# compute tile's MM2S channel, which drains its output tile to the memory
# tile, is such a channel.
_SHIM_CHANNELS = 4


def _drain_stall(
    dev: Device, tile_m: int, tile_n: int, tile_seconds: float, tiles: int
) -> float:
    """Seconds a core waits on its single output buffer over ``tiles`` tiles.

    With one bf16 output tile, the core stores tile ``i + 1`` only once the
    DMA has drained tile ``i`` (``tile_m * tile_n`` bf16 at one channel's
    rate); meanwhile it runs tile ``i + 1``'s K loop (``tile_seconds``). Each
    of the ``tiles - 1`` stores after the first waits what the drain
    outlasts the loop.
    """
    drain = tile_m * tile_n * _BF16 / (dev.shim_bytes_per_s_per_column / _SHIM_CHANNELS)
    return max(tiles - 1, 0) * max(drain - tile_seconds, 0.0)


def _gemv_tiles(
    M: int,
    K: int,
    columns: int,
    widths: list[int],
    tile_m: int | None,
    tile_k: int | None,
    budget: int,
    depth: int,
) -> dict[str, int] | None:
    """GEMV's ``tile_m``, ``tile_k`` and ``vector_width``, or None if none fit.

    Widest vector first, then the most rows, then the longest K tile; a
    given ``tile_m`` or ``tile_k`` is the only candidate (a given K tile
    picks the widths it is a legal tile of).
    """
    for width in widths:
        if tile_k and (tile_k % width or tile_k < 2 * width):
            continue
        ks = [tile_k] if tile_k else _k_tiles(K, width)
        for rows in [tile_m] if tile_m else [4, 2, 1]:
            if M % (columns * rows):
                continue

            def fits(t: int, m: int = rows) -> bool:
                return _gemv_need(m, t, depth) <= budget

            k = _largest(ks, fits)
            if k is not None:
                return {"tile_m": rows, "tile_k": k, "vector_width": width}
    return None


def _gemm_tiles(
    M: int,
    K: int,
    N: int,
    units: tuple[int, int, int],
    columns: int,
    given: tuple[int | None, int | None, int | None],
    budget: int,
    depth: int,
    out_depth: int = 2,
) -> dict[str, int]:
    """GEMM's ``tile_m``, ``tile_k`` and ``tile_n``: multiples of ``units``.

    The _largest output tile whose K tile is at least 64 (or all of a shorter
    K): fewer HIGH roundings and longer DMA runs; then any. The tunables in
    ``given`` are the only candidates; when they do not fit, they are
    returned for ``check`` to name the rule they break (the mmul's own tiles
    always fit).
    """

    def sizes(dim: int, unit: int, fixed: int | None, top: int) -> list[int]:
        if fixed:
            return [fixed]
        return [t for t in range(top, 0, -unit) if t % unit == 0 and dim % t == 0]

    ms = sizes(M, units[0], given[0], 64)
    ns = sizes(N // columns, units[2], given[2], 64)
    ks = sizes(K, units[1], given[1], 256)
    floor = min(64, max(ks, default=0))
    for least in (floor, 0):
        for tile_m in ms:
            for tile_n in ns:

                def fits(t: int, m: int = tile_m, n: int = tile_n) -> bool:
                    return _gemm_need(m, t, n, depth, out_depth) <= budget

                tile_k = _largest([t for t in ks if t >= least], fits)
                if tile_k is not None:
                    return {"tile_m": tile_m, "tile_k": tile_k, "tile_n": tile_n}
    return {
        "tile_m": ms[-1] if ms else units[0],
        "tile_k": ks[-1] if ks else units[1],
        "tile_n": ns[-1] if ns else units[2],
    }


def _check_fits(name: str, need: int, dev: Device, what: str) -> None:
    """Refuses tiles (``what``) whose ``need`` bytes exceed the core's budget."""
    budget = _core_budget(dev)
    if need > budget:
        raise RefusedShapeError(
            f"{name}: {what} need {need} bytes of "
            f"double-buffered tiles, over the core's {budget} bytes "
            f"({dev.core_memory_bytes // 1024} KiB less a "
            f"{STACK_BYTES // 1024} KiB stack)"
        )


def _check_columns(name: str, columns: int, dev: Device) -> None:
    """Refuses more columns than the device has."""
    if columns > dev.columns:
        raise RefusedShapeError(
            f"{name}: num_aie_columns="
            f"{columns} exceeds the device's {dev.columns} columns"
        )


def _check_dma_rows(name: str, dev: Device, rows: dict[str, int]) -> None:
    """Refuses an operand whose bf16 row is longer than the shim DMA's stride."""
    stride_max = (1 << dev.dma_stride_bits) - 1
    for operand, length in rows.items():
        words = length * _BF16 // dev.dma_granule_bytes
        if words > stride_max:
            raise RefusedShapeError(
                f"{name}: a row of {operand} is {words} {dev.dma_granule_bytes}-"
                f"byte words, over the shim DMA's {dev.dma_stride_bits}-bit "
                f"stride ({stride_max})"
            )


# -- the operators -------------------------------------------------------------

_PRECISION = param(
    Precision.HIGHEST, doc="the roundings the product may make beyond its reference's"
)
_EFFECTIVE = tunable(
    domain=Precision,
    doc="the level the kernel runs at: precision, or a more precise level it "
    "allows (MEDIUM falls back to HIGH where the device has no bfp16)",
)


class _MatMul(Operator):
    """What GEMV and GEMM share: the precision, the levels' models, the tolerance."""

    # Fields each subclass declares (param() and tunable()), read here.
    precision: Precision
    effective_precision: Precision | None
    tile_k: int | None

    #: Tiles of each streamed operand a core holds: the depth of the NPU
    #: design's object FIFOs, and what ``check()`` counts (GEMM's output
    #: tiles are its ``out_depth`` tunable's).
    fifo_depth: ClassVar[int] = 2

    def __init__(self, *, pinned: frozenset[str] | None = None, **fields: Any):
        if fields.get("precision") is not None:
            fields["precision"] = Precision(fields["precision"])
        super().__init__(pinned=pinned, **fields)

    # -- subclasses give the operands as (..., M, K) @ (..., K, N) --------------

    def _matrices(self, *inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _result(self, product: np.ndarray) -> np.ndarray:
        return product

    # -- precision ---------------------------------------------------------------

    def _effective_default(self, dev: Device) -> Precision:
        if self.precision is Precision.MEDIUM and not dev.bfp16:
            _LOG.debug(
                "%s on %s: precision MEDIUM runs as HIGH (no bfp16 multiplies)",
                type(self).__name__,
                dev,
            )
            return Precision.HIGH
        return self.precision

    def _check_precision(self, dev: Device) -> None:
        name, level = type(self).__name__, self.effective_precision
        if level is None:
            return
        if not self.precision.allows(level):
            raise RefusedShapeError(
                f"{name} on {dev}: effective_precision={level.value!r} rounds "
                f"more than precision={self.precision.value!r} allows; give "
                f"{self.precision.value!r} or a more precise level"
            )
        if level is Precision.MEDIUM and not dev.bfp16:
            raise RefusedShapeError(
                f"{name} on {dev}: effective_precision='medium' needs bfp16 "
                f"multiplies, which {dev} lacks; use 'high' (what resolve picks "
                f"there)"
            )

    def level(self) -> Precision:
        """The level ``reference`` and ``tolerance`` model.

        Raises:
            ValueError: The level or its K tile depends on a device and the
                operator is not resolved.
        """
        level = self.effective_precision
        if level is None and self.precision is Precision.HIGHEST:
            level = Precision.HIGHEST  # the only level HIGHEST allows
        if level is None or (level is not Precision.HIGHEST and self.tile_k is None):
            raise ValueError(
                f"{type(self).__name__} at precision={self.precision.value!r} "
                f"rounds per K tile, as the device runs it: resolve it first "
                f"(op.resolved('npu2')) so effective_precision and tile_k are set"
            )
        return level

    # -- numerics ------------------------------------------------------------------

    def reference(self, *inputs: np.ndarray) -> np.ndarray:
        a, b = self._matrices(*inputs)
        return self._result(model_product(a, b, self.level(), self.tile_k))

    def error_bound(self, *inputs: np.ndarray) -> np.ndarray:
        """The derived bound on ``|kernel result - exact product|``, per element."""
        a, b = self._matrices(*inputs)
        return self._result(error_bound(a, b, self.level(), self.tile_k))

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        if not inputs:
            return AMD_GEMV
        return bound_tolerance(self.error_bound(*inputs), self.level(), self.tile_k)


class GEMV(_MatMul):
    """``w @ x`` in bf16: a ``(M, K)`` matrix times a ``(K,)`` vector, or a batch.

    Batched, ``w`` is ``(batch, M, K)`` and ``x`` is ``(batch, K)``; the
    result is ``(batch, M)``. ``batch`` is read off ``w`` in a graph (None
    when unbatched). Each column's cores take ``tile_m`` rows of ``w`` at a
    time and walk K in tiles of ``tile_k``.

    ``precision`` defaults to ``HIGHEST``: the only level whose result depends
    on neither the device nor the tunables, so a graph's reference is the
    same on NPU1 and NPU2 and under any profile; the faster levels are an
    opt-in (as ``torch.set_float32_matmul_precision`` defaults to
    ``"highest"``). See the module docstring for each level's model and
    bound; ``reference`` models the resolved ``effective_precision``.
    """

    M: int = param(doc="rows of w (outputs)")
    K: int = param(doc="columns of w, elements of x (the reduction)")
    batch: int | None = param(None, doc="independent products, or None for one")
    precision: Precision = _PRECISION
    effective_precision: Precision = _EFFECTIVE
    num_aie_columns: int = tunable(domain=_COLUMNS, doc="columns the rows spread over")
    tile_m: int = tunable(domain=Divisors("M"), doc="rows of w per kernel call")
    tile_k: int = tunable(
        domain=Divisors("K", multiple_of=16),
        doc="elements of K per kernel call; HIGH and MEDIUM round after each",
    )
    vector_width: int = tunable(
        domain=_VECTOR_WIDTHS, doc="bf16 lanes of the kernel's multiply-add"
    )
    inputs = (Input("w", "M", "K"), Input("x", "K"))
    outputs = (Output("out", "M"),)

    def reads_float32(self, index: int) -> bool:
        """False for ``w`` where :func:`~iron.operators.matvec.matvec` reads it as bf16.

        That is at ``HIGHEST`` with numba installed; the other levels sum
        float32 K tiles with numpy's BLAS, which wants the float32 copy.
        """
        level = self.effective_precision or self.precision
        return not (index == 0 and level is Precision.HIGHEST and matvec.available())

    @classmethod
    def infer(cls, operands: Mapping[str, Any]) -> dict[str, tuple[int, str]]:
        w, x = operands.get("w"), operands.get("x")
        if w is None or len(w.shape) != 3:
            if x is not None and len(x.shape) != 1:
                raise ValueError(
                    f"GEMV: x has shape {list(x.shape)}; it is (K,), or (batch, K) "
                    f"with w (batch, M, K)"
                )
            return super().infer(operands)
        found = {
            "batch": (int(w.shape[0]), "w.shape[0]"),
            "M": (int(w.shape[1]), "w.shape[1]"),
            "K": (int(w.shape[2]), "w.shape[2]"),
        }
        if x is not None:
            if len(x.shape) != 2:
                raise ValueError(
                    f"GEMV: w is batched {list(w.shape)}, so x is (batch, K); "
                    f"got {list(x.shape)}"
                )
            for axis, dim in enumerate(("batch", "K")):
                value, source = found[dim]
                if int(x.shape[axis]) != value:
                    raise DimensionConflictError(
                        f"GEMV: {dim} is {value} from {source} but "
                        f"{int(x.shape[axis])} from x.shape[{axis}]"
                    )
        return found

    def output_shapes(self) -> list[tuple[int, ...]]:
        if self.batch is None:
            return [(self.M,)]
        return [(self.batch, self.M)]

    def _matrices(self, w: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w, x = np.asarray(w), np.asarray(x)
        lead = () if self.batch is None else (self.batch,)
        if w.shape != (*lead, self.M, self.K) or x.shape != (*lead, self.K):
            raise ValueError(
                f"GEMV(M={self.M}, K={self.K}, batch={self.batch}) takes w "
                f"{[*lead, self.M, self.K]} and x {[*lead, self.K]}; got w "
                f"{list(w.shape)} and x {list(x.shape)}"
            )
        return w, x[..., None]

    def _result(self, product: np.ndarray) -> np.ndarray:
        return product[..., 0]

    def reference(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``w @ x`` at the effective precision (module docstring), rounded to bf16."""
        return super().reference(w, x)

    def _need(self, tile_m: int, tile_k: int) -> int:
        return _gemv_need(tile_m, tile_k, self.fifo_depth)

    def resolve(self, dev: Device) -> dict[str, Any]:
        M, K, name = self.M, self.K, f"GEMV on {dev}"
        given = [self.vector_width] if self.vector_width else _VECTOR_WIDTHS
        widths = [w for w in given if K % w == 0 and K >= 2 * w]
        if not widths:
            w = self.vector_width
            raise RefusedShapeError(
                f"{name}: K={K} is not a multiple of the vector width {w} of at "
                f"least {2 * w}"
                if w
                else f"{name}: K={K} is not a multiple of a vector width (64, 32 "
                f"or 16) of at least twice it; pad K to a multiple of 16, >= 32"
            )
        columns = self.num_aie_columns or _largest(
            [c for c in _COLUMNS if c <= dev.columns], lambda c: M % c == 0
        )
        assert columns is not None  # one column divides any M
        budget = _core_budget(dev)
        chosen = {
            "effective_precision": self._effective_default(dev),
            "num_aie_columns": columns,
        }
        tiles = _gemv_tiles(
            M, K, columns, widths, self.tile_m, self.tile_k, budget, self.fifo_depth
        )
        if tiles is not None:
            return {**chosen, **tiles}
        if self.tile_k or self.tile_m or M % columns:
            # A given tunable is what fails: check() names the rule it breaks.
            width = widths[0]
            return {
                **chosen,
                "tile_m": self.tile_m or 1,
                "tile_k": self.tile_k or _k_tiles(K, width)[0],
                "vector_width": width,
            }
        most = (budget - 2 * _F32) // (2 * 2 * _BF16)  # tile_m = 1
        raise RefusedShapeError(
            f"{name}: no tile_k fits a core for K={K}: it must divide K, be a "
            f"multiple of the vector width ({', '.join(map(str, widths))}) of at "
            f"least twice it, and be at most {most} to fit {budget} bytes; pad K"
        )

    def check(self, dev: Device) -> None:
        name, w = f"GEMV on {dev}", self.vector_width
        self._check_precision(dev)
        _check_columns(name, self.num_aie_columns, dev)
        if self.K % w:
            raise RefusedShapeError(
                f"{name}: K={self.K} is not a multiple of the vector width {w}"
            )
        if self.tile_k % w or self.tile_k < 2 * w:
            raise RefusedShapeError(
                f"{name}: tile_k={self.tile_k} is not a multiple of the vector "
                f"width {w} of at least {2 * w} (the kernel's loop runs twice or more)"
            )
        if self.M % (self.tile_m * self.num_aie_columns):
            raise RefusedShapeError(
                f"{name}: M={self.M} is not a multiple of tile_m * num_aie_columns "
                f"= {self.tile_m * self.num_aie_columns}"
            )
        _check_fits(
            name,
            self._need(self.tile_m, self.tile_k),
            dev,
            f"tile_m={self.tile_m}, tile_k={self.tile_k} (w and x in bf16, the "
            f"output in fp32)",
        )

    def cost(self, dev: Device) -> Cost:
        """``w``, ``x`` and the result once, and ``x`` again for each row tile.

        One core per column takes ``tile_m`` rows of ``w`` at a time and
        walks K in ``tile_k`` steps, a kernel call each: ``ceil(M / (tile_m *
        num_aie_columns)) * K / tile_k`` calls per product. ``x`` streams in
        with every row tile, so it is read ``M / tile_m`` times.
        """
        op = self._settled(dev)
        b = self.batch or 1
        columns = op.num_aie_columns
        row_tiles = -(-self.M // op.tile_m)
        k_tiles = -(-self.K // op.tile_k)
        return Cost(
            macs=b * self.M * self.K,
            bytes=b * (self.M * self.K + self.K + self.M) * _BF16,
            columns=columns,
            calls=b * -(-row_tiles // columns) * k_tiles,
            reread_bytes=b * (row_tiles - 1) * self.K * _BF16,
        )


class GEMM(_MatMul):
    """``a @ b`` in bf16: ``(M, K) @ (K, N) -> (M, N)``.

    With ``b_transposed=True`` ``b`` is given as ``(N, K)`` (its rows are the
    columns of the product's right operand); in a graph the layout is read
    off ``b``'s shape where it is unambiguous (a square ``b`` takes the
    keyword). The output is split in ``tile_m x tile_n`` tiles over
    ``num_aie_columns`` columns, and K runs in tiles of ``tile_k``: ``HIGH``
    and ``MEDIUM`` round the partial sum to bf16 after each. Tiles are
    multiples of twice the device's mmul shape in m and n (the kernel's 2 x 2
    expansion) and of its k.

    ``precision`` defaults to ``HIGHEST`` for the reason `GEMV` gives.
    """

    M: int = param(doc="rows of a and of the result")
    K: int = param(doc="columns of a, rows of b (the reduction)")
    N: int = param(doc="columns of b and of the result")
    b_transposed: bool = param(False, doc="b is given as (N, K)")
    precision: Precision = _PRECISION
    effective_precision: Precision = _EFFECTIVE
    num_aie_columns: int = tunable(domain=_COLUMNS, doc="columns N spreads over")
    tile_m: int = tunable(domain=Divisors("M", multiple_of=8), doc="rows per tile")
    tile_k: int = tunable(
        domain=Divisors("K", multiple_of=8),
        doc="K per kernel call; HIGH and MEDIUM round after each",
    )
    tile_n: int = tunable(domain=Divisors("N", multiple_of=8), doc="columns per tile")
    # 2 first: where both depths model the same time (no stall), the tuner
    # keeps the first setting it enumerated, the double-buffered one.
    out_depth: int = tunable(
        domain=(2, 1),
        doc="bf16 output tiles a core holds: 2 drains one while the next is "
        "computed; 1 frees a tile's bytes (a longer K tile fits), the core "
        "waiting on the drain before it stores the next",
    )
    inputs = (Input("a", "M", "K"), Input("b", "K", "N"))
    outputs = (Output("out", "M", "N"),)

    @classmethod
    def infer(cls, operands: Mapping[str, Any]) -> dict[str, tuple[int, str]]:
        a, b = operands.get("a"), operands.get("b")
        if a is None or b is None or len(a.shape) != 2 or len(b.shape) != 2:
            return super().infer(operands)
        M, K = int(a.shape[0]), int(a.shape[1])
        rows, cols = int(b.shape[0]), int(b.shape[1])
        found = {"M": (M, "a.shape[0]"), "K": (K, "a.shape[1]")}
        shape = f"b.shape={[rows, cols]}"
        if rows == K and cols == K:
            found["N"] = (cols, "b.shape[1]")  # square: the keyword says which
        elif rows == K:
            found["N"] = (cols, "b.shape[1]")
            found["b_transposed"] = (False, f"{shape} (K rows: b is (K, N))")
        elif cols == K:
            found["N"] = (rows, "b.shape[0]")
            found["b_transposed"] = (True, f"{shape} (K columns: b is (N, K))")
        else:
            raise DimensionConflictError(
                f"GEMM: K is {K} from a.shape[1] but {rows} from b.shape[0] and "
                f"{cols} from b.shape[1]; b is (K, N), or (N, K) with "
                f"b_transposed=True"
            )
        return found

    def _matrices(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a, b = np.asarray(a), np.asarray(b)
        want_b = (self.N, self.K) if self.b_transposed else (self.K, self.N)
        # a's rows may be bounded per call (a[:n]): the first n <= M rows.
        rows_ok = a.ndim == 2 and a.shape[0] <= self.M and a.shape[1] == self.K
        if not rows_ok or b.shape != want_b:
            raise ValueError(
                f"GEMM(M={self.M}, K={self.K}, N={self.N}, b_transposed="
                f"{self.b_transposed}) takes a {[self.M, self.K]} (or its first "
                f"rows, bounded per call) and b "
                f"{list(want_b)}; got a {list(a.shape)} and b {list(b.shape)}"
            )
        return a, (b.T if self.b_transposed else b)

    def reference(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``a @ b`` at the effective precision (module docstring), rounded to bf16.

        At ``HIGHEST`` with numba each row of ``a`` is summed as
        :class:`GEMV` sums its vector (``model_product``): a row's bits are
        the same whatever the other rows, and equal GEMV's on that row.
        """
        return super().reference(a, b)

    def reads_float32(self, index: int) -> bool:
        """False for ``b`` where :func:`~iron.operators.matvec.matvecs` reads it as bf16.

        That is at ``HIGHEST`` with numba installed, as for :class:`GEMV`'s ``w``.
        """
        level = self.effective_precision or self.precision
        return not (index == 1 and level is Precision.HIGHEST and matvec.available())

    def _need(self, tile_m: int, tile_k: int, tile_n: int) -> int:
        return _gemm_need(
            tile_m, tile_k, tile_n, self.fifo_depth, self.out_depth or _OUT_DEPTH
        )

    def resolve(self, dev: Device) -> dict[str, Any]:
        level = self.effective_precision or self._effective_default(dev)
        units = _mmul_units(dev, level, {"M": self.M, "K": self.K, "N": self.N})
        columns = self.num_aie_columns or _largest(
            [c for c in _COLUMNS if c <= dev.columns],
            lambda c: self.N % (c * units[2]) == 0,
        )
        assert columns is not None  # mmul_units refused an N one column cannot take
        given = (self.tile_m, self.tile_k, self.tile_n)
        out_depth = self.out_depth or _OUT_DEPTH
        tiles = _gemm_tiles(
            self.M,
            self.K,
            self.N,
            units,
            columns,
            given,
            _core_budget(dev),
            self.fifo_depth,
            out_depth,
        )
        return {
            "effective_precision": level,
            "num_aie_columns": columns,
            **tiles,
            "out_depth": out_depth,
        }

    def check(self, dev: Device) -> None:
        name = f"GEMM on {dev}"
        self._check_precision(dev)
        _check_columns(name, self.num_aie_columns, dev)
        level = self.effective_precision or self.precision
        tiles = {"tile_m": self.tile_m, "tile_k": self.tile_k, "tile_n": self.tile_n}
        _mmul_units(dev, level, tiles)
        if self.N % (self.tile_n * self.num_aie_columns):
            raise RefusedShapeError(
                f"{name}: N={self.N} is not a multiple of tile_n * num_aie_columns "
                f"= {self.tile_n * self.num_aie_columns}"
            )
        _check_fits(
            name,
            self._need(self.tile_m, self.tile_k, self.tile_n),
            dev,
            f"tile_m={self.tile_m}, tile_k={self.tile_k}, tile_n={self.tile_n}, "
            f"out_depth={self.out_depth} (a and b in bf16, an fp32 accumulator, "
            f"{self.out_depth} bf16 output tile{'s' if self.out_depth > 1 else ''}"
            f"{'; out_depth=1 holds one' if self.out_depth > 1 else ''})",
        )
        rows = {"a": self.K, "b": self.K if self.b_transposed else self.N, "c": self.N}
        _check_dma_rows(name, dev, rows)

    def cost(self, dev: Device) -> Cost:
        """``a``, ``b`` and the result once, plus what the tiling reads again.

        The model of the array (the whole-array GEMM of AMD's IRON and
        mlir-aie): each column takes ``tile_n`` columns of N per pass, its
        ``core_rows`` cores each a ``tile_m``-row tile of M (fewer when M has
        fewer tiles); an ``a`` tile is broadcast along the columns and a
        ``b`` tile down a column's cores. So ``a`` is read once per pass over
        N (each group of ``tile_n * num_aie_columns`` columns) and ``b`` once
        per group of M tiles the rows take together. Each core makes a
        kernel call per K tile of each output tile it owns. At
        ``out_depth=1`` a core stores an output tile only once the previous
        one has drained: ``stall_seconds`` is what each drain (one DMA
        channel's rate) outlasts the next tile's K loop, that loop taken at
        the core's peak rate plus its kernel calls (its shortest: an upper
        bound on the wait).
        """
        op = self._settled(dev)
        M, K, N = self.M, self.K, self.N
        columns = op.num_aie_columns
        m_tiles = -(-M // op.tile_m)
        rows = min(dev.core_rows, m_tiles)
        m_passes = -(-m_tiles // rows)
        n_passes = -(-N // (op.tile_n * columns))
        k_tiles = -(-K // op.tile_k)
        stall = 0.0
        if op.out_depth == 1:
            loop = (
                op.tile_m * K * op.tile_n / dev.core_peak_macs_per_s
                + k_tiles * dev.kernel_call_seconds
            )
            tiles = m_passes * n_passes
            stall = _drain_stall(dev, op.tile_m, op.tile_n, loop, tiles)
        return Cost(
            macs=M * K * N,
            bytes=(M * K + K * N + M * N) * _BF16,
            columns=columns,
            cores=columns * rows,
            calls=m_passes * n_passes * k_tiles,
            reread_bytes=((n_passes - 1) * M * K + (m_passes - 1) * K * N) * _BF16,
            stall_seconds=stall,
        )
