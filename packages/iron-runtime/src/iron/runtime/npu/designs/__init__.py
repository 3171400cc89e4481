"""NPU designs: for each catalog operator and device, the MLIR text aiecc builds.

:func:`design` returns the text; :func:`build_design` the whole
:class:`Design` (text, the runtime sequence's arguments in host order, the
kernels to compile, and the :class:`~iron.runtime.npu.legality.Layout` that
legality checked). A family of operators shares one module (one of
:data:`FAMILIES`); each module has ``FAMILY`` (the operator classes it
designs), ``handles(op)`` and ``build(op, dev, placement, *, arena_bytes,
words)``. :func:`registry` maps each operator class to its module.

Placement: ``placement`` maps an operator's ports (``x``, ``y``, ``out``, ...)
to :class:`iron.runtime.image.Placement` records. A port placed in the arena
is read or written at its planned byte offset in the one ``arena`` argument;
any other port (and every port when ``placement`` is None) is its own host
buffer argument. The caller adds a handle's own byte offset within its graph
buffer before passing the placement.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Mapping
from types import MappingProxyType, ModuleType
from typing import Any, TypeVar

from iron.core.device import Device, as_device
from iron.runtime.image import Placement
from iron.runtime.npu.legality import Layout

__all__ = [
    "FAMILIES",
    "Design",
    "Words",
    "build_design",
    "design",
    "family_of",
    "registered",
    "registry",
]

T = TypeVar("T")


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


#: The family modules under this package. Each names the operator classes it
#: designs in ``FAMILY``; :func:`registry` keys them by class.
FAMILIES: tuple[str, ...] = (
    "elementwise",
    "rows",
    "gemv",
    "gemm",
    "rope",
    "attention",
    "movers",
    "dequant",
    "qmatmul",
    "qgemm",
    "sample",
)


@functools.cache
def registry() -> Mapping[type, ModuleType]:
    """Each operator class with an NPU design, and the family module designing it.

    Built on first use from every module in :data:`FAMILIES` (they import the
    operator classes from iron-operators). Keyed by class, so a renamed
    operator is an import error here rather than a design that stops being
    found, and a subclass finds its base's design (:func:`family_of`).

    Raises:
        RuntimeError: Two family modules claim one operator class.
    """
    found: dict[type, ModuleType] = {}
    for name in FAMILIES:
        module = importlib.import_module(f"{__name__}.{name}")
        for cls in module.FAMILY:
            if cls in found:
                raise RuntimeError(
                    f"{cls.__name__} is claimed by two design families, "
                    f"{found[cls].__name__} and {module.__name__}: keep it in "
                    f"one module's FAMILY"
                )
            found[cls] = module
    return MappingProxyType(found)


def registered(op: object, table: Mapping[type, T]) -> T | None:
    """``table``'s entry for ``op``'s class or its nearest registered base."""
    for cls in type(op).__mro__:
        if cls in table:
            return table[cls]
    return None


def family_of(op: object) -> ModuleType:
    """The family module designing ``op`` (its class's, or its nearest base's).

    Raises:
        NotImplementedError: No family designs ``op``'s class nor a base of
            it (the message names the class and the way out).
    """
    name = type(op).__name__
    try:
        families = registry()
    except ModuleNotFoundError as e:
        if not (e.name or "").startswith("iron.operators"):
            raise
        raise NotImplementedError(
            f"{name} is not a catalog operator (iron-operators is not "
            f"installed), so it has no NPU design; run it on the emulated NPU "
            f"(IRON_BACKEND=emu)"
        ) from None
    family = registered(op, families)
    if family is None:
        from iron.operators import CATALOG

        if any(CATALOG.get(cls.__name__) is cls for cls in type(op).__mro__):
            raise NotImplementedError(
                f"{name} is a catalog operator but no family in "
                f"iron.runtime.npu.designs registers it or a base class of it: "
                f"add it to its family module's FAMILY (families: "
                f"{', '.join(FAMILIES)}); meanwhile run it on the emulated NPU "
                f"(IRON_BACKEND=emu)"
            )
        known = ", ".join(sorted(cls.__name__ for cls in families))
        raise NotImplementedError(
            f"{name} is not a catalog operator, so it has no NPU design (no "
            f"family in iron.runtime.npu.designs registers {name} or a base "
            f"class of it; designs exist for {known}); run it on the emulated "
            f"NPU (IRON_BACKEND=emu)"
        )
    return family


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
    (see :mod:`.sequence`); a standalone operator's take slots 0, 1, ...

    Raises:
        NotImplementedError: ``op`` is not a catalog operator, or a case of
            it has no NPU design (the message names it).
        iron.runtime.npu.legality.LegalityError: The design breaks a device
            limit (the message names the operator, the tile and the limit).
        iron.core.operator.RefusedShapeError: The operator refuses the device.
        ValueError: A placement is too small or names no port.
    """
    family = family_of(op)
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
