"""The matmul device geometry: mmul shapes, core memory, and the tile choice.

Shared by ``iron.operators.matmul`` (``GEMV`` and ``GEMM``), which re-exports
``mmul_shape`` and ``STACK_BYTES``; the operators' ``resolve`` methods search
here and their ``check`` methods name the rule a given tunable breaks:

- ``mmul_shape``: the bf16 mmul shape per architecture and precision level;
- ``STACK_BYTES`` and ``core_budget``: the core data memory tiles may use;
- ``gemv_need``, ``gemm_need``: the bytes of a tiling's double-buffered tiles;
- ``gemv_tiles``, ``gemm_tiles``: the tiles ``resolve`` picks;
- ``mmul_units``, ``check_fits``, ``check_columns``, ``check_dma_rows``: the
  device rules ``check`` refuses a shape or tiling by.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from iron.core.device import Device
from iron.core.operator import RefusedShapeError
from iron.core.precision import Precision

BF16 = 2  # bytes
F32 = 4
#: Bytes of core data memory a kernel's stack takes (what tiles may not use).
STACK_BYTES = 1024
COLUMNS = (1, 2, 4, 8)
# bf16 mmul shapes (m, k, n) per architecture: AIE2 (4, 8, 4); AIE2P (4, 8, 8),
# or (8, 8, 8) when bf16 runs as bfp16 (mlir-aie aie_kernels/aie2p/mm.cc:
# "this shape is only possible for bf16 when using bfp16 emulation").
MMUL = {"aie2": (4, 8, 4), "aie2p": (4, 8, 8)}
MMUL_BFP16 = (8, 8, 8)
# The GEMV kernel's vector widths, widest first (AMD IRON gemv: mv.cc is built
# at 64, 32 or 16 lanes and needs its K to be a multiple of, and at least
# twice, the width).
VECTOR_WIDTHS = (64, 32, 16)


def mmul_shape(dev: Device, level: Precision) -> tuple[int, int, int]:
    """The bf16 mmul shape ``(m, k, n)`` a matmul at ``level`` uses on ``dev``."""
    if level is Precision.MEDIUM and dev.bfp16:
        return MMUL_BFP16
    return MMUL.get(dev.arch, MMUL["aie2p"])


def mmul_units(
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


def core_budget(dev: Device) -> int:
    """Bytes of a core's data memory the double-buffered tiles may take."""
    return dev.core_memory_bytes - STACK_BYTES


def largest(candidates: Iterable[int], ok: Callable[[int], bool]) -> int | None:
    """The largest candidate ``ok`` accepts, or None."""
    return next((c for c in sorted(candidates, reverse=True) if ok(c)), None)


def k_tiles(k: int, width: int) -> list[int]:
    """GEMV's K tiles for a vector width: multiples of it, at least twice it, dividing K."""
    return [t for t in range(2 * width, k + 1, width) if k % t == 0]


def gemv_need(tile_m: int, tile_k: int) -> int:
    """GEMV's bytes: w and x tiles in bf16, the partial sums in fp32, double-buffered."""
    return 2 * (tile_m * tile_k * BF16 + tile_k * BF16 + tile_m * F32)


def gemm_need(tile_m: int, tile_k: int, tile_n: int) -> int:
    """GEMM's bytes: a and b tiles in bf16, the c tile in fp32, double-buffered."""
    return 2 * (tile_m * tile_k * BF16 + tile_k * tile_n * BF16 + tile_m * tile_n * F32)


def gemv_tiles(
    M: int,
    K: int,
    columns: int,
    widths: list[int],
    tile_m: int | None,
    tile_k: int | None,
    budget: int,
) -> dict[str, int] | None:
    """GEMV's ``tile_m``, ``tile_k`` and ``vector_width``, or None if none fit.

    Widest vector first, then the most rows, then the longest K tile; a
    given ``tile_m`` or ``tile_k`` is the only candidate (a given K tile
    picks the widths it is a legal tile of).
    """
    for width in widths:
        if tile_k and (tile_k % width or tile_k < 2 * width):
            continue
        ks = [tile_k] if tile_k else k_tiles(K, width)
        for rows in [tile_m] if tile_m else [4, 2, 1]:
            if M % (columns * rows):
                continue

            def fits(t: int, m: int = rows) -> bool:
                return gemv_need(m, t) <= budget

            k = largest(ks, fits)
            if k is not None:
                return {"tile_m": rows, "tile_k": k, "vector_width": width}
    return None


def gemm_tiles(
    M: int,
    K: int,
    N: int,
    units: tuple[int, int, int],
    columns: int,
    given: tuple[int | None, int | None, int | None],
    budget: int,
) -> dict[str, int]:
    """GEMM's ``tile_m``, ``tile_k`` and ``tile_n``: multiples of ``units``.

    The largest output tile whose K tile is at least 64 (or all of a shorter
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
                    return gemm_need(m, t, n) <= budget

                tile_k = largest([t for t in ks if t >= least], fits)
                if tile_k is not None:
                    return {"tile_m": tile_m, "tile_k": tile_k, "tile_n": tile_n}
    return {
        "tile_m": ms[-1] if ms else units[0],
        "tile_k": ks[-1] if ks else units[1],
        "tile_n": ns[-1] if ns else units[2],
    }


def check_fits(name: str, need: int, dev: Device, what: str) -> None:
    """Refuses tiles (``what``) whose ``need`` bytes exceed the core's budget."""
    budget = core_budget(dev)
    if need > budget:
        raise RefusedShapeError(
            f"{name}: {what} need {need} bytes of "
            f"double-buffered tiles, over the core's {budget} bytes "
            f"({dev.core_memory_bytes // 1024} KiB less a "
            f"{STACK_BYTES // 1024} KiB stack)"
        )


def check_columns(name: str, columns: int, dev: Device) -> None:
    """Refuses more columns than the device has."""
    if columns > dev.columns:
        raise RefusedShapeError(
            f"{name}: num_aie_columns="
            f"{columns} exceeds the device's {dev.columns} columns"
        )


def check_dma_rows(name: str, dev: Device, rows: dict[str, int]) -> None:
    """Refuses an operand whose bf16 row is longer than the shim DMA's stride."""
    stride_max = (1 << dev.dma_stride_bits) - 1
    for operand, length in rows.items():
        words = length * BF16 // dev.dma_granule_bytes
        if words > stride_max:
            raise RefusedShapeError(
                f"{name}: a row of {operand} is {words} {dev.dma_granule_bytes}-"
                f"byte words, over the shim DMA's {dev.dma_stride_bits}-bit "
                f"stride ({stride_max})"
            )
