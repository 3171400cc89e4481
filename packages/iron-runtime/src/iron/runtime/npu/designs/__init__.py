"""NPU designs: for each catalog operator and device, the MLIR text aiecc builds.

:func:`design` returns the text; :func:`build_design` the whole
:class:`Design` (text, the runtime sequence's arguments in host order, the
kernels to compile, and the :class:`~iron.runtime.npu.legality.Layout` that
legality checked). A family of operators shares one module (:data:`MODULES`
maps each catalog operator to its module); each module has ``FAMILY``,
``handles(op)`` and ``build(op, dev, placement, *, arena_bytes, words)``.

Placement: ``placement`` maps an operator's ports (``x``, ``y``, ``out``, ...)
to :class:`iron.runtime.image.Placement` records. A port placed in the arena
is read or written at its planned byte offset in the one ``arena`` argument;
any other port (and every port when ``placement`` is None) is its own host
buffer argument. The caller adds a handle's own byte offset within its graph
buffer before passing the placement.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from typing import Any

from iron.core.device import Device, as_device
from iron.runtime.image import Placement
from iron.runtime.npu.legality import Layout

__all__ = ["MODULES", "Design", "Words", "build_design", "design", "linear_walk"]


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


@dataclasses.dataclass(frozen=True)
class Words:
    """Where a run's per-call expressions sit in its scratchpad.

    Attributes:
        slots: Slot of each expression, by ``Affine.key()`` (what
            ``ImageSpec.slot_of_key`` holds).
        count: Words in the scratchpad (``ImageSpec.scratchpad_words``).
    """

    slots: Mapping[tuple, int]
    count: int


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


#: The family module (under this package) designing each catalog operator.
MODULES: dict[str, str] = {
    **dict.fromkeys(
        (
            "ElementwiseAdd",
            "ElementwiseMul",
            "AXPY",
            "ReLU",
            "SiLU",
            "GELU",
            "Sigmoid",
            "Tanh",
            "LeakyReLU",
            "Clamp",
            "SiLUMul",
        ),
        "elementwise",
    ),
    **dict.fromkeys(("RMSNorm", "LayerNorm", "Softmax"), "rows"),
    "GEMV": "matmul",
    "GEMM": "gemm",
    "RoPE": "rope",
    "DecodeAttention": "attention",
    "CausalAttention": "attention",
    **dict.fromkeys(("Copy", "Transpose", "Repeat"), "movers"),
    "Dequant": "dequant",
    "Sample": "sample",
}


def build_design(
    op: Any,
    dev: Device | str,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
    words: Words | None = None,
) -> Design:
    """The design of ``op`` on ``dev``, legality checked.

    ``words`` places ``op``'s per-call parameters in the run's scratchpad
    (see :mod:`._common`); a standalone operator's take slots 0, 1, ...

    Raises:
        NotImplementedError: ``op`` is not a catalog operator, or a case of
            it has no NPU design (the message names it).
        iron.runtime.npu.legality.LegalityError: The design breaks a device
            limit (the message names the operator, the tile and the limit).
        iron.core.operator.RefusedShapeError: The operator refuses the device.
        ValueError: A placement is too small or names no port.
    """
    name = type(op).__name__
    module = MODULES.get(name)
    if module is None:
        raise NotImplementedError(
            f"{name} is not a catalog operator, so it has no NPU design (designs "
            f"exist for {', '.join(sorted(MODULES))}); run it on the emulated NPU "
            f"(IRON_BACKEND=emu)"
        )
    try:
        family = importlib.import_module(f"{__name__}.{module}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{module}":
            raise
        raise NotImplementedError(
            f"{name} has no NPU design yet (its family module {module} is not "
            f"written); run it on the emulated NPU (IRON_BACKEND=emu)"
        ) from None
    return family.build(
        op, as_device(dev), placement, arena_bytes=arena_bytes, words=words
    )


def design(
    op: Any,
    dev: Device | str,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
    words: Words | None = None,
) -> str:
    """The MLIR text of ``op``'s design on ``dev`` (see :func:`build_design`)."""
    return build_design(op, dev, placement, arena_bytes=arena_bytes, words=words).text
