"""An exact search for a placement of buffers under a given top, within a work budget.

Private to :mod:`iron.core.arena`. The question it answers: can these
buffers (aligned sizes, live step ranges, conflicts), stepping around fixed
walls, all sit below ``capacity``? It is a depth-first branch and bound over
*compacted* placements, after the approach of MiniMalloc (Moffitt, "MiniMalloc:
A Lightweight Memory Allocator for Hardware-Accelerated Machine Learning",
ASPLOS 2023, https://doi.org/10.1145/3623278.3624752; reference solver at
https://github.com/google/minimalloc, src/solver.cc):

- Any placement can be compacted: move a buffer down while it can move, until
  none can. In a compacted placement each buffer sits at its *lowest offset*
  given the buffers it conflicts with below it: the top of the highest of
  them (or 0), stepped over walls. So the search places buffers one by one in
  rising offset order, each at its lowest offset given those placed before;
  ties in offset go in a fixed order of the buffers (a *preorder*), so each
  compacted placement is reached along one path only.
- A buffer is never placed at or above the top another unplaced buffer could
  reach from its own lowest offset: that one would then sit below it with
  room to spare, so the placement would not be compacted.
- After each placement, at every step the bytes still to place that are live
  there must fit between the highest placed top there (or the offset just
  placed, as offsets only rise) and ``capacity``; a branch where they do not
  is cut.

The search is complete: given work enough, it finds a placement under
``capacity`` or shows none exists. Which preorder finds one fastest varies
by graph, so several are tried in turn, each up to a number of nodes that
doubles each round (as MiniMalloc's solver does). Work is counted in buffers
looked at (each node looks at every buffer not yet placed), so the search's
cost is bounded whatever the number of buffers, and the same for the same
buffers: the result never depends on the clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

FOUND = "found"
"""A placement under the capacity was found."""

NONE = "none"
"""No placement under the capacity exists (the search covered them all)."""

OUT = "out"
"""The work budget ran out first."""


def _align_up(x: int, align: int) -> int:
    return -(-x // align) * align


class _Out(Exception):
    """The work budget of one attempt ran out."""


class Packing:
    """Buffers to place below a capacity: sizes, lives, conflicts and walls.

    Args:
        sizes: Each buffer's aligned footprint in bytes (a positive multiple
            of ``align``).
        firsts: Each buffer's first live step.
        lasts: Each buffer's last live step (inclusive).
        conflicts: For each buffer, the indices of the buffers live at a step
            with it.
        walls: Merged, sorted byte ranges ``(start, end)`` no buffer may meet
            (the residents, live at every step).
        align: The alignment of every offset.
    """

    def __init__(
        self,
        sizes: Sequence[int],
        firsts: Sequence[int],
        lasts: Sequence[int],
        conflicts: Sequence[Sequence[int]],
        walls: Sequence[tuple[int, int]],
        align: int,
    ) -> None:
        self.sizes = list(sizes)
        self.conflicts = [list(c) for c in conflicts]
        self.walls = [(lo, _align_up(hi, align)) for lo, hi in walls]
        self.align = align
        # the steps where the set of live buffers changes: the sections
        edges = sorted({*firsts, *(last + 1 for last in lasts)})
        where = {e: i for i, e in enumerate(edges)}
        self.spans = [
            (where[f], where[last + 1]) for f, last in zip(firsts, lasts, strict=True)
        ]
        self.sections = max(len(edges) - 1, 0)
        load = np.zeros(self.sections + 1, dtype=np.int64)
        for (lo, hi), size in zip(self.spans, self.sizes, strict=True):
            load[lo] += size
            load[hi] -= size
        self.load = np.cumsum(load)[: self.sections]

    def clear(self, offset: int, size: int) -> int:
        """The lowest aligned offset from ``offset`` where ``size`` bytes meet no wall."""
        offset = _align_up(offset, self.align)
        for lo, hi in self.walls:
            if offset + size <= lo:
                break
            if offset < hi:
                offset = hi
        return offset

    def preorders(self) -> list[list[int]]:
        """Tie-break orders to try, each a rank per buffer (lower goes first).

        By the most bytes live at any step of the buffer's life (the
        tightest section it crosses), its life's length and its area (bytes
        times steps), in the four mixes MiniMalloc's solver tries; the
        buffer's index breaks ties.
        """
        tight = [int(self.load[lo:hi].max()) if hi > lo else 0 for lo, hi in self.spans]
        length = [hi - lo for lo, hi in self.spans]
        area = [s * w for s, w in zip(self.sizes, length, strict=True)]
        keys: list[Callable[[int], tuple[int, ...]]] = [
            lambda i: (-tight[i], -length[i], -area[i], i),
            lambda i: (-tight[i], -area[i], -length[i], i),
            lambda i: (-length[i], -area[i], -tight[i], i),
            lambda i: (-area[i], -length[i], -tight[i], i),
        ]
        ranks = []
        for key in keys:
            rank = [0] * len(self.sizes)
            for r, i in enumerate(sorted(range(len(self.sizes)), key=key)):
                rank[i] = r
            ranks.append(rank)
        return ranks

    def solve(self, capacity: int, work: int) -> tuple[str, list[int] | None, int]:
        """Search for offsets of every buffer with every top at most ``capacity``.

        Tries each preorder up to a number of nodes (twice the buffers,
        doubling each round) until one finds a placement, one covers the
        whole search (none exists), or ``work`` (buffers looked at) is spent.
        The same buffers, capacity and work give the same answer.

        Returns:
            ``(FOUND, offsets, work spent)``, ``(NONE, None, work spent)`` or
            ``(OUT, None, work spent)``.
        """
        n = len(self.sizes)
        if n == 0:
            return FOUND, [], 0
        if self.sections and int(self.load.max()) > capacity:
            return NONE, None, 0
        spent = 0
        limit = 2 * n
        ranks = self.preorders()
        while spent + n <= work:  # room for one node at least: each try moves on
            for rank in ranks:
                if spent + n > work:
                    break
                outcome, offsets, used = self._attempt(
                    capacity, rank, limit, work - spent
                )
                spent += used
                if outcome != OUT:
                    return outcome, offsets, spent
            limit *= 2
        return OUT, None, spent

    def _attempt(
        self, capacity: int, rank: Sequence[int], nodes: int, work: int
    ) -> tuple[str, list[int] | None, int]:
        """One depth-first search with one preorder, up to ``nodes`` and ``work``."""
        n = len(self.sizes)
        sizes, spans, conflicts = self.sizes, self.spans, self.conflicts
        lowest = [self.clear(0, s) for s in sizes]
        offsets: list[int | None] = [None] * n
        floor = np.zeros(self.sections, dtype=np.int64)
        load = self.load.copy()
        remaining = set(range(n))
        spent = visited = 0

        def choices(lo: int, after: int) -> list[int]:
            # the buffers that may go next, in rising offset then preorder
            nonlocal spent, visited
            if visited == nodes or spent + len(remaining) > work:
                raise _Out
            visited += 1
            spent += len(remaining)
            reach = min(lowest[i] + sizes[i] for i in remaining)
            if max(lowest[i] + sizes[i] for i in remaining) > capacity:
                return []  # one can no longer fit under the capacity
            found = [
                i
                for i in remaining
                if lowest[i] < reach
                and (lowest[i] > lo or (lowest[i] == lo and rank[i] > after))
            ]
            found.sort(key=lambda i: (lowest[i], rank[i]))
            return found

        def place(i: int) -> tuple[int, list[tuple[int, int]], np.ndarray]:
            at = lowest[i]
            top = at + sizes[i]
            lo, hi = spans[i]
            saved = floor[lo:hi].copy()
            floor[lo:hi] = top
            load[lo:hi] -= sizes[i]
            raised = []
            for j in conflicts[i]:
                if offsets[j] is None and lowest[j] < top:
                    raised.append((j, lowest[j]))
                    lowest[j] = self.clear(top, sizes[j])
            offsets[i] = at
            remaining.discard(i)
            return i, raised, saved

        def unplace(record: tuple[int, list[tuple[int, int]], np.ndarray]) -> None:
            i, raised, saved = record
            lo, hi = spans[i]
            floor[lo:hi] = saved
            load[lo:hi] += sizes[i]
            for j, before in raised:
                lowest[j] = before
            offsets[i] = None
            remaining.add(i)

        # each frame: a node's choices and the index of the next to try; each
        # frame that placed a buffer has its undo record in ``placed``
        stack: list[tuple[list[int], list[int]]] = []
        placed: list[tuple[int, list[tuple[int, int]], np.ndarray]] = []
        try:
            stack.append((choices(0, -1), [0]))
            while stack:
                options, cursor = stack[-1]
                if len(placed) == len(stack):
                    unplace(placed.pop())
                if cursor[0] == len(options):
                    stack.pop()
                    continue
                i = options[cursor[0]]
                cursor[0] += 1
                at = lowest[i]
                placed.append(place(i))
                if not remaining:
                    return FOUND, [int(o) for o in offsets if o is not None], spent
                if int((np.maximum(floor, at) + load).max()) > capacity:
                    continue  # cut; undone at the top of the loop
                stack.append((choices(at, rank[i]), [0]))
        except _Out:
            return OUT, None, spent
        return NONE, None, spent
