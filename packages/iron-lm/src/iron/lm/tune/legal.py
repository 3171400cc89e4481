"""The tuner's legality filter: a profile only names settings the NPU can lay out.

An operator's ``check(dev)`` refuses what its own rules forbid (the tuner
skips those as it measures). The NPU design of a setting can still break a
device limit the operator does not model (buffer descriptors, memory-tile
bytes, shim streams): :func:`design_refusal` builds the setting's design
(:func:`iron.runtime.npu.designs.build_design`, which checks legality as it
lays the design out) and says why it is refused, and :func:`first_legal`
takes the fastest setting whose every step's design is legal, so the tuner
never writes a setting ``Llama(config)`` cannot build.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from iron.core.device import Device

__all__ = ["design_refusal", "first_legal"]

logger = logging.getLogger("iron.lm.tune")


def _arena_placement(op: Any) -> dict[str, Any]:
    """Every port of ``op`` in one ``arena`` argument, in port order (64-byte
    aligned), as a model's plan places a step's buffers (a layer's
    ``k_cache`` then ``v_cache``, say); empty when a port's shape is not a
    plain product of the operator's fields."""
    import numpy as np
    from ml_dtypes import bfloat16

    from iron.runtime.image import Placement

    found, offset = {}, 65536
    ports = [*op.declaration.inputs, *op.declaration.outputs]
    for port in ports:
        dims = getattr(port, "dims", None)
        if not dims:
            return {}
        n = 1
        for d in dims:
            value = getattr(op, d, None) if isinstance(d, str) else d
            if not isinstance(value, int) or value < 1:
                return {}
            n *= value
        dtype = getattr(port, "dtype", None)
        nbytes = n * np.dtype(dtype if dtype is not None else bfloat16).itemsize
        found[port.name] = Placement("arena", offset, nbytes)
        offset += -(-nbytes // 64) * 64
    return found


def _words(op: Any, dev: Device) -> Any:
    """An image's scratchpad as a model's has it: ``dev.scratchpad_words``
    words, the operator's per-call values in the first slots."""
    from iron.core.handle import is_expr
    from iron.core.percall import Affine
    from iron.runtime.npu.designs import Words

    slots: dict[tuple[Any, ...], int] = {}
    for value in op.fields().values():
        if is_expr(value):
            key = (value if isinstance(value, Affine) else value.affine()).key()
            slots.setdefault(key, len(slots))
    return Words(slots, dev.scratchpad_words)


def design_refusal(op: Any, dev: Device) -> str | None:
    """Why ``op``'s NPU design on ``dev`` is refused, or None when it is legal.

    The design is laid out as in a model: its ports in the arena one after
    another and an image's whole scratchpad; a
    design that does not take that placement is laid out on its own. An
    operator with no NPU design is not refused here (the operator's own
    check already ran).
    """
    from iron.core.operator import RefusedShapeError
    from iron.runtime.npu.designs import build_design
    from iron.runtime.npu.legality import LegalityError

    for placement in (_arena_placement(op), None):
        try:
            build_design(op, dev, placement or None, words=_words(op, dev))
        except NotImplementedError:
            return None
        except (LegalityError, RefusedShapeError) as error:
            return str(error)
        except ValueError:  # the placement, not the setting: lay it out alone
            continue
        return None
    return None


def first_legal(
    ranked: Iterable[tuple[Any, dict[str, Any]]],
    ops_of: Callable[[dict[str, Any]], list[Any]],
    dev: Device,
    what: str,
) -> tuple[Any, dict[str, Any]] | None:
    """The first ``(rank, setting)`` whose every op has a legal design.

    Args:
        ranked: Candidates, best first.
        ops_of: The operators a setting makes (one per step it governs).
        dev: The device.
        what: The shape, for the log.

    Returns:
        The first legal candidate, or None when none is.
    """
    for rank, setting in ranked:
        reasons = [r for r in (design_refusal(op, dev) for op in ops_of(setting)) if r]
        if not reasons:
            return rank, setting
        logger.info(
            "%s on %s: %s refused by its design: %s",
            what,
            dev.name,
            setting,
            reasons[0],
        )
    return None
