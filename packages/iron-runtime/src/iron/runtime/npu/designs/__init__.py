"""NPU designs: for each catalog operator and device, the MLIR text aiecc builds.

:func:`design` returns the text; :func:`build_design` the whole
:class:`Design` (text, the runtime sequence's arguments in host order, the
kernels to compile, and the :class:`~iron.runtime.npu.legality.Layout` that
legality checked). A family of operators shares one module
(:mod:`.elementwise` so far); an operator of a family without designs yet
raises :class:`NotImplementedError` naming it.

Placement: ``placement`` maps an operator's ports (``x``, ``y``, ``out``, ...)
to :class:`iron.runtime.image.Placement` records. A port placed in the arena
is read or written at its planned byte offset in the one ``arena`` argument;
any other port (and every port when ``placement`` is None) is its own host
buffer argument. The caller adds a handle's own byte offset within its graph
buffer before passing the placement.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from iron.core.device import Device, as_device
from iron.runtime.image import Placement
from iron.runtime.npu.legality import Layout

__all__ = ["Design", "build_design", "design", "linear_walk"]


@dataclasses.dataclass(frozen=True)
class Design:
    """One design: what aiecc compiles and what the driver binds.

    Attributes:
        operator: The operator's repr.
        device: The device name (``npu1``, ``npu2``).
        text: The MLIR text.
        args: The runtime sequence's buffer arguments in order: port names,
            or ``arena``; the driver passes one buffer object per entry.
        arg_bytes: Each argument's size in bytes.
        kernels: The kernel symbols to compile and link.
        layout: What legality checked.
    """

    operator: str
    device: str
    text: str
    args: tuple[str, ...]
    arg_bytes: tuple[int, ...]
    kernels: tuple[str, ...]
    layout: Layout


def linear_walk(
    count: int, itemsize: int, dev: Device
) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]]:
    """Sizes and strides that stream ``count`` contiguous items in one descriptor.

    The innermost dimension is the largest divisor of ``count`` whose bytes
    are whole words within the wrap field; the rest splits over d1 and d2,
    then the iteration. A run that cannot be split so is returned as one
    dimension (legality then names the limit).
    """
    wrap = (1 << dev.dma_size_bits) - 1
    inner_max = wrap * dev.dma_granule_bytes // itemsize
    inner = next(
        (
            d
            for d in range(min(count, inner_max), 0, -1)
            if count % d == 0 and (d * itemsize) % dev.dma_granule_bytes == 0
        ),
        count,
    )
    rest = count // inner
    for it in range(1, dev.dma_iteration_max + 1):
        if rest % it:
            continue
        per = rest // it
        d2 = next(
            (a for a in range(1, wrap + 1) if per % a == 0 and per // a <= wrap), None
        )
        if d2 is not None:
            d1 = per // d2
            sizes = (it, d2, d1, inner)
            strides = (
                per * inner if it > 1 else 0,
                d1 * inner if d2 > 1 else 0,
                inner if d1 > 1 else 0,
                1,
            )
            return sizes, strides
    return (1, 1, 1, count), (0, 0, 0, 1)


def build_design(
    op: object,
    dev: Device | str,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
) -> Design:
    """The design of ``op`` on ``dev``, legality checked.

    Raises:
        NotImplementedError: ``op``'s family has no NPU design yet.
        iron.runtime.npu.legality.LegalityError: The design breaks a device
            limit (the message names the operator, the tile and the limit).
        iron.core.operator.RefusedShapeError: The operator refuses the device.
        ValueError: A placement is too small or names no port.
    """
    from iron.runtime.npu.designs import elementwise, rows

    device = as_device(dev)
    if elementwise.handles(op):
        return elementwise.build(op, device, placement, arena_bytes=arena_bytes)
    if rows.handles(op):
        return rows.build(op, device, placement, arena_bytes=arena_bytes)
    if type(op).__name__ == "GEMV":  # iron.runtime.npu.designs.matmul
        from iron.runtime.npu.designs import matmul

        return matmul.build(op, device, placement, arena_bytes=arena_bytes)
    raise NotImplementedError(
        f"{type(op).__name__} has no NPU design yet (designs exist for the "
        f"elementwise family: {', '.join(elementwise.FAMILY)}; and the row "
        f"family: {', '.join(rows.FAMILY)}); run it on the emulated NPU "
        f"(IRON_BACKEND=emu)"
    )


def design(
    op: object,
    dev: Device | str,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
) -> str:
    """The MLIR text of ``op``'s design on ``dev`` (see :func:`build_design`)."""
    return build_design(op, dev, placement, arena_bytes=arena_bytes).text
