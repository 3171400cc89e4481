"""Designs for the data movers: ``Copy``, ``Repeat`` and ``Transpose``.

This module owns the family's entry points (:data:`FAMILY`, :func:`handles`,
:func:`build`) and the rule for per-call views; the designs live in
:mod:`.movers_copy` (Copy and what the movers share),
:mod:`.movers_repeat` and :mod:`.movers_transpose`.

Copy and Repeat: the array only forwards. Column 0's shim tile reads the
input into object FIFO ``view_0`` (Copy) or ``x_0`` (Repeat), shim to the
column's memory tile, depth 2, whose chunk is the largest divisor of every
transfer's elements within 32 KiB; ``aie.objectfifo.link`` forwards it as
``out_0`` (memory tile to a shim, depth 2), whose S2MM transfers write the
output. No core, no kernel. Copy's shim reads walk the view as
:class:`iron.operators.movers.Access` names them, one or more descriptors a
walk as ``Copy.check`` counts them; the output drains through column 0's
shim, or column 1's when the view's descriptors and the output's would
overflow one shim's buffer descriptors. Repeat's read is one descriptor
whose iteration re-reads ``x`` (stride 0) ``repeat`` times, and its write
walks ``(repeat, rows, row)`` so copy ``r`` of row ``i`` lands at ``i *
repeat + r``: the walks ``Repeat.check`` checked.

Transpose: blocks of ``tile_rows x tile_cols`` spread over
``num_aie_columns`` columns, one core per column at row 2, FIFOs ``x_<c>``
and ``out_<c>`` (shim to core and back, depth 2); the core calls
``transpose_bf16`` per block (see :mod:`.movers_transpose`).

The runtime sequence issues the output transfers first (the last one issues
the token the final ``dma_wait`` takes), then the inputs; a channel queues
at most :data:`~.movers_copy.TASK_QUEUE` tasks, so longer runs of transfers
go in rounds, each ending with a token and a wait.

Per-call offsets. A static shim descriptor cannot depend on a per-call
value. A view whose start moves per call (``Access.per_call`` non-empty, or
rows gathered by ids a handle holds) is read through runtime-sequence
arguments the host driver binds per run as sub-buffers at the evaluated
offsets (:class:`~.movers_copy.Window`, :func:`windows`): the design reads
such a port from its own argument, named after the port (``view``; for a
gather by ids from a handle one argument per row, ``view_0``, ``view_1``,
...), with walks relative to that argument's start, which is the view's
least walk offset plus the per-call part. An XRT kernel run binds at most
16 host buffers, so a design needing more is refused with
:class:`~.movers_copy.HostBufferLimitError`. A placement whose ``where`` is
``"window"`` means exactly that: its own argument, at offset 0; placing a
per-call port in the arena is refused. Dense views and static strided or
gathered views are walked at their planned offsets in the arena (the view
port's placement locates the start of the view's buffer) or in their own
host buffer, like every other design. Copy's output is written as a
contiguous run unless the caller passes ``out_access`` (``Access.of`` the
step's ``out=`` view), which is then walked, and bound as a window if it
moves per call (a key-value cache row ``cache[:, position]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from iron.core.device import Device
from iron.operators.movers import Access, Copy, Repeat, Transpose
from iron.runtime.image import Placement
from iron.runtime.npu.designs import Design, Words
from iron.runtime.npu.designs.movers_copy import (
    HostBufferLimitError,
    Window,
    build_copy,
    copy_windows,
)
from iron.runtime.npu.designs.movers_repeat import build_repeat
from iron.runtime.npu.designs.movers_transpose import build_transpose

__all__ = ["FAMILY", "HostBufferLimitError", "Window", "build", "handles", "windows"]

#: The operators this module designs.
FAMILY: tuple[type, ...] = (Copy, Transpose, Repeat)


def handles(op: Any) -> bool:
    """Whether ``op`` is a data mover."""
    return isinstance(op, FAMILY)


def windows(op: Any, out_access: Access | None = None) -> tuple[Window, ...]:
    """The arguments the host binds per run inside a buffer (none but Copy's)."""
    if not isinstance(op, Copy):
        return ()
    return copy_windows(op, out_access)


def build(
    op: Any,
    dev: Device,
    placement: Mapping[str, Placement] | None = None,
    *,
    arena_bytes: int | None = None,
    words: Words | None = None,
    out_access: Access | None = None,
) -> Design:
    """The design of mover ``op`` on ``dev`` (see the module docstring).

    Movers read no per-call words (a per-call offset is a window the host
    binds), so ``words`` adds nothing. ``out_access`` (Copy only) is how an
    ``out=`` view is written.

    Raises:
        NotImplementedError: A case with no design (the message names it).
        HostBufferLimitError: More host buffers than an XRT run binds.
        iron.core.operator.RefusedShapeError: The operator refuses ``dev``.
        iron.runtime.npu.legality.LegalityError: A device limit is broken.
        ValueError: A placement is too small, misplaced, or names no port.
    """
    name = type(op).__name__
    if isinstance(op, Copy):
        return build_copy(
            op, dev, placement, arena_bytes=arena_bytes, out_access=out_access
        )
    if out_access is not None:
        raise TypeError(f"{op!r}: out_access is Copy's; {name} writes contiguously")
    if isinstance(op, Repeat):
        return build_repeat(op, dev, placement, arena_bytes=arena_bytes)
    if isinstance(op, Transpose):
        return build_transpose(op, dev, placement, arena_bytes=arena_bytes)
    movers = ", ".join(cls.__name__ for cls in FAMILY)
    raise KeyError(f"{name} is not a data mover ({movers})")
