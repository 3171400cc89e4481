"""Liveness: every buffer of a recording, its kind and the steps it is live over.

This module owns :func:`liveness` (what :class:`~iron.core.arena.ArenaPlan`
places: each buffer's size, kind and first and last live step) and
:func:`version_key` (a version's default key: the graph's name and its input
shapes). :mod:`iron.core.arena` re-exports both.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from iron.core.handle import Handle, dtype_name

if TYPE_CHECKING:
    from iron.core.recording import Recording

__all__ = ["liveness", "version_key"]


@dataclasses.dataclass(frozen=True)
class _Live:
    """A buffer of one recording before placement."""

    name: str
    nbytes: int
    first: int
    last: int
    kind: str


def version_key(recording: Recording) -> str:
    """A version's default key: the graph's name and its input shapes.

    ``Chain(x=64 bf16)``; a 2-D input reads ``x=8x64 bf16``.
    """
    shapes = ", ".join(
        f"{h.name}={'x'.join(str(s) for s in h.shape) or '()'} {dtype_name(h.dtype)}"
        for h in recording.inputs
    )
    return f"{recording.name}({shapes})"


def _buffers_of(h: Handle) -> list[Handle]:
    """``h`` and the ids handle a gather by device-made ids reads with it."""
    found = [h]
    for read in h.layout.reads():
        found.extend(_buffers_of(read))
    return found


def liveness(recording: Recording) -> list[_Live]:
    """Every buffer of a recording with its kind and the steps it is live over.

    A buffer is live from the first step that reads or writes any handle of
    it to the last (a gather's ids count as read with it). A host step run
    after ``after`` device steps sits between steps ``after - 1`` and
    ``after``; the buffers it touches are taken as touched at both (clamped
    to the recording), so neither neighbour reuses their bytes. Inputs are
    live from step 0; outputs (transients returned or carried) to the last
    step; residents at every step; a buffer no step touches, over the whole
    recording.
    """
    n = len(recording.steps)
    end = max(n - 1, 0)
    touched: dict[str, list[int]] = {}
    buffers = dict(recording.buffers)

    def touch(h: Handle | None, *steps: int) -> None:
        if h is None:
            return
        for one in _buffers_of(h):
            buffers.setdefault(one.name, one.buffer)
            span = touched.setdefault(one.name, [steps[0], steps[0]])
            span[0] = min(span[0], *steps)
            span[1] = max(span[1], *steps)

    for step in recording.steps:
        for h in (*step.inputs, *step.outputs):
            touch(h, step.index)
    for host in recording.host:
        around = sorted({min(max(s, 0), end) for s in (host.after - 1, host.after)})
        for h in (*host.reads, *host.writes):
            touch(h, *around)
    returned: set[str] = set()
    for h in (*recording.outputs, *recording.carry.values()):
        if isinstance(h, Handle):
            for one in _buffers_of(h):
                buffers.setdefault(one.name, one.buffer)
                returned.add(one.name)
    found = []
    for name, buffer in buffers.items():
        first, last = touched.get(name, (0, end))
        role = buffer.role
        if role in ("weight", "state"):
            kind, first, last = "resident", 0, end
        elif role == "input":
            kind, first = "input", 0
        elif role == "output" or name in returned:
            kind, last = "output", end
        else:
            kind = "transient"
        found.append(_Live(name, buffer.nbytes, first, last, kind))
    return found
