"""Byte-range arithmetic for the arena planner: alignment, unions, bounds, gaps.

Private to :mod:`iron.core.arena`: rounding up to an alignment, merging and
measuring half-open byte ranges, the lower bound of a set of transients (the
most aligned bytes live at any one step), and the lowest free stretch between
blocked ranges.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from iron.core.arena import Allocation
    from iron.core.liveness import _Live


def _align_up(x: int, align: int) -> int:
    return -(-x // align) * align


def _merged(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Non-empty byte ranges merged where they touch or overlap, in order.

    Residents sit side by side, so a model's hundreds of weights are a few
    walls for the placement to step around, not hundreds.
    """
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(r for r in ranges if r[1] > r[0]):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


_FOREVER = 1 << 62  # the last step of what never dies: residents, the limit


def _lower_bound(transients: Iterable[_Live | Allocation], align: int) -> int:
    """The most aligned bytes of ``transients`` live at any one step."""
    events: dict[int, int] = {}
    for b in transients:
        size = _align_up(b.nbytes, align)
        events[b.first] = events.get(b.first, 0) + size
        events[b.last + 1] = events.get(b.last + 1, 0) - size
    best = running = 0
    for step in sorted(events):
        running += events[step]
        best = max(best, running)
    return best


def _limit(blocked: Iterable[tuple[int, int]], need: int, align: int) -> int:
    """The top of the lowest aligned free stretch of ``need`` bytes between ``blocked``."""
    cursor = 0
    for start, end in sorted(blocked):
        if end <= start:
            continue
        at = _align_up(cursor, align)
        if start - at >= need:
            return at + need
        if end > cursor:
            cursor = end
    return _align_up(cursor, align) + need


def _union(ranges: Iterable[tuple[int, int]]) -> int:
    """The measure of a union of half-open byte ranges."""
    total = 0
    cursor = None
    for start, end in sorted(ranges):
        if end <= start:
            continue
        if cursor is None or start > cursor:
            total += end - start
            cursor = end
        elif end > cursor:
            total += end - cursor
            cursor = end
    return total
