"""The scratch arena: where a graph's buffers live in device memory, per version.

This module owns :class:`ArenaPlan` (liveness and placement of every buffer
of every version of one graph), :class:`Allocation` (one buffer's placement),
:class:`ArenaInvariantError` (what :meth:`ArenaPlan.check` raises). It
re-exports :func:`~iron.core.liveness.liveness` and
:func:`~iron.core.liveness.version_key` (what it places, and a version's
default key) and :func:`~iron.core.pictures.arena_svg` (the plan drawn as
buffers over step and byte offset); the byte-range arithmetic lives in
``iron.core._arena_ranges`` and the exact search in ``iron.core._arena_search``.

Buffers come in four kinds:

- ``input`` and ``output``: the graph's inputs, and the transients it returns
  or carries; each lives in a device buffer of its own, outside the arena
  (offset 0 within it).
- ``transient``: written and read inside one run. Each is live from the first
  step that touches it to the last (inclusive), and is placed at an offset
  aligned to :data:`ALIGN` (the tightest of several best-fit tries; short
  of the lower bound, a bounded exact search for a placement at it, then a
  bounded local search over placement orders),
  so two transients live at one step (in particular a step's inputs and
  outputs) never share bytes. A slice or view is a layout inside its buffer, so it keeps its
  parent's offset plus its start.
- ``resident``: weights and states, held across calls. Each is placed once,
  above everything placed so far, and keeps that offset in every version.

One plan serves every version of a graph (one per set of input shapes).
Versions never run at once, so one version's transients reuse another's
bytes; residents are live throughout every version. The arena only grows:
each image bakes its offsets in.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from iron.core._arena_ranges import (
    _FOREVER,
    _align_up,
    _limit,
    _lower_bound,
    _merged,
    _union,
)
from iron.core._arena_search import FOUND, Packing
from iron.core.liveness import _Live, liveness, version_key
from iron.core.pictures import arena_svg

if TYPE_CHECKING:
    from iron.core.recording import Recording

__all__ = [
    "ALIGN",
    "ArenaInvariantError",
    "ArenaPlan",
    "Allocation",
    "arena_svg",
    "liveness",
    "version_key",
]

ALIGN = 64
"""The default alignment of every arena offset, in bytes."""

KINDS = ("input", "output", "transient", "resident")

EXACT_WORK = 200_000
"""Most buffers the placement's exact search looks at per version (about 0.1 s)."""

SEARCH_WORK = 10_000
"""Most buffer placements the placement's local search makes per version."""

SEARCH_MEMORY = 50
"""Moves back the local search compares a new order with (late acceptance)."""


class ArenaInvariantError(ValueError):
    """An arena plan breaks an invariant: an overlap, a misalignment, a moved resident."""


@dataclasses.dataclass(frozen=True)
class Allocation:
    """One buffer's place: its byte range and the steps it is live over.

    Attributes:
        name: The buffer's name in its recording.
        offset: Its first byte in the arena; for ``input`` and ``output``
            buffers, which have device buffers of their own, 0 (within it).
        nbytes: Its size in bytes (not padded).
        first: The first step it is live at (inclusive).
        last: The last step it is live at (inclusive). Residents span the
            whole version: ``0`` to ``len(steps) - 1`` (0 for no steps).
        kind: ``input``, ``output``, ``transient`` or ``resident``.
    """

    name: str
    offset: int
    nbytes: int
    first: int
    last: int
    kind: str

    @property
    def in_arena(self) -> bool:
        """Whether it lives in the arena (a transient or a resident)."""
        return self.kind in ("transient", "resident")

    @property
    def end(self) -> int:
        """One past its last byte: ``offset + nbytes``."""
        return self.offset + self.nbytes

    def live_at(self, step: int) -> bool:
        """Whether it is live at ``step``."""
        return self.first <= step <= self.last


class ArenaPlan:
    """The arena of one graph: every buffer of every version, placed.

    ``add(recording)`` places one version: its new residents at the top of
    the arena, then its transients below, around and above the residents
    (several best-fit orderings are tried and the tightest kept; short of
    the lower bound, a bounded exact search looks for a placement at it, and
    failing that a seeded local search over orderings improves on the best
    try; every budget counts work, not time, so the plan is deterministic). Earlier versions keep their offsets: the arena
    only grows. Methods taking a ``version`` default to the last added; an
    unknown one raises KeyError, and none planned yet ValueError.

    Args:
        align: The alignment of every arena offset, in bytes (at least 64).

    Attributes:
        align: The alignment of every arena offset, in bytes.
        versions: Each version's buffers by name, in the order added.
        residents: Each resident (weight or state) by buffer name, with the
            offset and size it keeps in every version (its ``first`` and
            ``last`` are 0 here; each version's copy spans that version).

    Raises:
        ValueError: ``align`` is not a power of two of at least 64.
    """

    def __init__(self, align: int = ALIGN) -> None:
        if (
            isinstance(align, bool)
            or not isinstance(align, int)
            or align < ALIGN
            or align & (align - 1)
        ):
            raise ValueError(
                f"ArenaPlan align={align!r} must be a power of two of at least "
                f"{ALIGN} bytes; give align={ALIGN} or a larger power of two"
            )
        self.align = align
        self.versions: dict[str, dict[str, Allocation]] = {}
        self.residents: dict[str, Allocation] = {}
        self._size = 0
        self._latest: str | None = None

    # -- planning ----------------------------------------------------------------

    def copy(self) -> ArenaPlan:
        """A snapshot: adding to it leaves this plan as it is.

        Placements are immutable, so the copy shares them; only the tables
        of versions and residents are new.
        """
        other = ArenaPlan(self.align)
        other.versions = dict(self.versions)
        other.residents = dict(self.residents)
        other._size = self._size
        other._latest = self._latest
        return other

    def commit(self, snapshot: ArenaPlan) -> None:
        """Take ``snapshot``'s layout: a copy of this plan with versions added.

        What a runtime calls once a version planned on ``snapshot`` is built,
        so a compile that fails leaves this plan (its size, versions and
        residents) as it was.

        Raises:
            ValueError: ``snapshot`` does not extend this plan: another
                alignment, or a version or resident of this plan missing or
                placed elsewhere in it (this plan changed since the snapshot
                was taken); nothing changes. Plan the version again.
        """
        if snapshot is self:
            return
        lost = [
            f"version {k!r}"
            for k, placed in self.versions.items()
            if snapshot.versions.get(k) is not placed
        ] + [
            f"resident {k!r}"
            for k, r in self.residents.items()
            if snapshot.residents.get(k) != r
        ]
        if snapshot.align != self.align or lost or snapshot._size < self._size:
            raise ValueError(
                f"ArenaPlan.commit: the snapshot does not extend this plan "
                f"(align {snapshot.align} vs {self.align}; "
                f"{', '.join(lost) or 'nothing'} missing or moved; size "
                f"{snapshot._size} vs {self._size}); this plan changed since the "
                f"snapshot was taken: plan the version again from this plan"
            )
        self.versions = dict(snapshot.versions)
        self.residents = dict(snapshot.residents)
        self._size = snapshot._size
        self._latest = snapshot._latest

    def add(
        self, recording: Recording, version: str | None = None
    ) -> dict[str, Allocation]:
        """Place one version's buffers and return them by name.

        Planning a version key already planned returns its placement
        unchanged (the recording is not looked at again).

        Args:
            recording: The version's recording.
            version: Its key; by default the recording's name and its input
                shapes (see :func:`version_key`).

        Returns:
            Every buffer of the version by name: inputs, outputs, transients
            and the residents it names, each a :class:`Allocation`.

        Raises:
            ValueError: The recording names a resident already placed at
                another size (nothing is placed then).
        """
        key = version if version is not None else version_key(recording)
        if key in self.versions:
            self._latest = key
            return self.versions[key]
        live = liveness(recording)
        top = self._size
        new_residents: dict[str, Allocation] = {}
        placed: dict[str, Allocation] = {}
        for b in live:
            if b.kind != "resident":
                continue
            known = self.residents.get(b.name)
            if known is not None and known.nbytes != b.nbytes:
                raise ValueError(
                    f"ArenaPlan: version {key!r} names resident {b.name!r} at "
                    f"{b.nbytes} bytes, but an earlier version placed it at "
                    f"{known.nbytes} bytes; a weight or state keeps one size in "
                    f"every version of a graph: hold tensors of another size "
                    f"under another name, or plan that graph with its own ArenaPlan"
                )
            if known is None:
                offset = _align_up(top, self.align)
                known = Allocation(b.name, offset, b.nbytes, 0, 0, "resident")
                new_residents[b.name] = known
                top = known.end
            placed[b.name] = dataclasses.replace(known, first=b.first, last=b.last)
        blocked = [
            (r.offset, r.end)
            for r in (*self.residents.values(), *new_residents.values())
        ]
        transients = [b for b in live if b.kind == "transient"]
        offsets = self._place(transients, blocked, top)
        for b in live:
            if b.kind == "transient":
                placed[b.name] = Allocation(
                    b.name, offsets[b.name], b.nbytes, b.first, b.last, b.kind
                )
            elif b.kind != "resident":
                placed[b.name] = Allocation(
                    b.name, 0, b.nbytes, b.first, b.last, b.kind
                )
        self.residents.update(new_residents)
        self.versions[key] = placed
        self._latest = key
        ends = [p.end for p in placed.values() if p.in_arena]
        self._size = max([self._size, top, *ends])
        return placed

    def _place(
        self,
        transients: Sequence[_Live],
        blocked: Sequence[tuple[int, int]],
        floor: int,
    ) -> dict[str, int]:
        """Offsets for one version's transients: the tightest of a few tries.

        ``blocked`` are byte ranges live at every step (the residents);
        ``floor`` is the arena's size with this version's residents. Each try
        places the buffers one by one in some order (largest first; by first
        step; by bytes times steps; longest lived; last to die), each in the
        smallest gap left by the buffers it is live with. One kind of try puts
        a buffer at the low end of its gap; the other keeps to a limit (the lowest top that holds
        the lower bound) and puts it against the side whose neighbour lives
        longer (the limit and residents live forever), so free bytes stay in
        one piece as buffers die: on a chain that alternates buffers between
        the bottom and the limit, which meets the lower bound. The try that
        grows the arena least, then covers the fewest bytes, wins; ties go to
        the earlier try, so planning is deterministic. The tries stop at the
        first that meets the bounds (the lowest top that holds the lower
        bound, and the lower bound covered); if none does, an exact search
        (:meth:`_pack`) looks for a placement under that top, and if it finds
        none within its budget, a local search over orders (:meth:`_improve`)
        starts from the best.
        """
        if not transients:
            return {}
        need = _lower_bound(transients, self.align)
        limit = _limit(blocked, need, self.align)
        orders: list[Callable[[_Live], tuple[Any, ...]]] = [
            lambda b: (-b.nbytes, b.first, b.name),
            lambda b: (b.first, -b.nbytes, b.name),
            lambda b: (-(b.last - b.first + 1) * b.nbytes, b.first, b.name),
            lambda b: (-(b.last - b.first), -b.nbytes, b.first, b.name),
            lambda b: (-b.last, -b.nbytes, b.name),
            lambda b: (b.first, -b.last, -b.nbytes, b.name),
        ]
        goal = (max(limit, floor), need)
        walls = [(lo, hi, _FOREVER) for lo, hi in _merged(blocked)]
        conflicts = _conflicts(transients)
        best: tuple[tuple[int, int], dict[str, int]] | None = None
        for order in orders:
            ranked = sorted(transients, key=order)
            for bound in (None, limit):
                offsets = self._fill(ranked, walls, conflicts, bound)
                score = self._score(transients, offsets, floor)
                if best is None or score < best[0]:
                    best = (score, offsets)
                if _meets(best[0], goal):
                    return best[1]
        assert best is not None
        packed = self._pack(transients, blocked, conflicts, limit)
        if packed is not None:
            score = self._score(transients, packed, floor)
            if score < best[0]:
                best = (score, packed)
            if _meets(best[0], goal):
                return best[1]
        return self._improve(transients, walls, conflicts, floor, goal, *best)

    def _pack(
        self,
        transients: Sequence[_Live],
        blocked: Sequence[tuple[int, int]],
        conflicts: dict[str, list[_Live]],
        limit: int,
    ) -> dict[str, int] | None:
        """Offsets with every transient's top at most ``limit``, or None.

        The exact search of :class:`~iron.core._arena_search.Packing` (at
        most :data:`EXACT_WORK` buffers looked at): buffers of no bytes take no room and
        sit at offset 0; the others step around the residents (``blocked``).
        None when it shows no such placement exists or runs out of nodes.
        """
        sized = [b for b in transients if b.nbytes]
        index = {b.name: i for i, b in enumerate(sized)}
        packing = Packing(
            [_align_up(b.nbytes, self.align) for b in sized],
            [b.first for b in sized],
            [b.last for b in sized],
            [[index[p.name] for p in conflicts[b.name]] for b in sized],
            _merged(blocked),
            self.align,
        )
        outcome, offsets, _ = packing.solve(limit, EXACT_WORK)
        if outcome != FOUND:
            return None
        assert offsets is not None
        placed = {b.name: 0 for b in transients}
        placed.update({b.name: o for b, o in zip(sized, offsets, strict=True)})
        return placed

    def _score(
        self, transients: Sequence[_Live], offsets: dict[str, int], floor: int
    ) -> tuple[int, int]:
        """A placement's rank: the arena's top, then the bytes its footprints cover."""
        spans = [
            (offsets[b.name], offsets[b.name] + _align_up(b.nbytes, self.align))
            for b in transients
        ]
        top = max(offsets[b.name] + b.nbytes for b in transients)
        return (max(top, floor), _union(spans))

    def _improve(
        self,
        transients: Sequence[_Live],
        walls: Sequence[tuple[int, int, int]],
        conflicts: dict[str, list[_Live]],
        floor: int,
        goal: tuple[int, int],
        score: tuple[int, int],
        offsets: dict[str, int],
    ) -> dict[str, int]:
        """Search placement orders for a tighter placement than ``offsets``.

        A local search over the order buffers are placed in, each at the
        lowest offset that holds it (first fit), starting from the order of
        ``offsets``. Each move takes a buffer that reaches above the lower
        bound (or, one move in four, any buffer) and moves it to an earlier
        place in the order, then places again from that place on. A move is
        kept when its placement is no worse than the current one or than the
        one :data:`SEARCH_MEMORY` moves back (late acceptance, so the search
        walks across plateaus and out of shallow pits); placements compare
        by the arena's top, the bytes covered, then the bytes above the lower
        bound. The best placement seen is returned (never worse than
        ``offsets``, whose ``score`` is given). It stops at the lower bound
        (``goal``) or after :data:`SEARCH_WORK` buffer placements, so it
        costs a bounded multiple of one try; its moves come from a generator
        seeded by the buffers, so planning stays deterministic.
        """
        n = len(transients)
        if n < 2:
            return offsets
        rng = random.Random(n * 1_000_003 + sum(b.nbytes for b in transients))
        target = goal[0]

        def key(placed: dict[str, int]) -> tuple[tuple[int, int], int]:
            # the score, then the bytes above the bound: a gradient where
            # most moves leave the top where it is
            over = sum(max(0, placed[b.name] + b.nbytes - target) for b in transients)
            return self._score(transients, placed, floor), over

        best_score, best_offsets = score, offsets
        # First fit in the order of a placement's offsets puts each buffer no
        # higher than that placement did (by induction: what sits below it
        # there sits no higher here), so first fit over all orders reaches
        # every packing's height; the search walks orders under first fit,
        # from the best try's offsets.
        ranked = sorted(transients, key=lambda b: (offsets[b.name], b.first, b.name))
        current_offsets = self._fill(ranked, walls, conflicts, None, lowest=True)
        current, current_key = ranked, key(current_offsets)
        if current_key[0] < best_score:
            best_score, best_offsets = current_key[0], current_offsets
        history = [current_key] * SEARCH_MEMORY
        work = step = 0
        while work < SEARCH_WORK:
            critical = [
                i
                for i, b in enumerate(current)
                if i and current_offsets[b.name] + b.nbytes > target
            ]
            if critical and rng.random() < 0.75:
                i = critical[rng.randrange(len(critical))]
            else:
                i = rng.randrange(1, n)
            j = rng.randrange(i)
            trial = list(current)
            trial.insert(j, trial.pop(i))
            trial_offsets = self._fill(
                trial,
                walls,
                conflicts,
                None,
                start=j,
                offsets=current_offsets,
                lowest=True,
            )
            work += n - j
            trial_key = key(trial_offsets)
            slot = step % SEARCH_MEMORY
            step += 1
            if trial_key <= current_key or trial_key <= history[slot]:
                current, current_key, current_offsets = (
                    trial,
                    trial_key,
                    trial_offsets,
                )
                if trial_key[0] < best_score:
                    best_score, best_offsets = trial_key[0], trial_offsets
                    if _meets(best_score, goal):
                        break
            history[slot] = current_key
        return best_offsets

    def _fill(
        self,
        ranked: Sequence[_Live],
        walls: Sequence[tuple[int, int, int]],
        conflicts: dict[str, list[_Live]],
        limit: int | None,
        start: int = 0,
        offsets: dict[str, int] | None = None,
        lowest: bool = False,
    ) -> dict[str, int]:
        """Place ``ranked`` in order, each in the smallest gap that holds it.

        ``walls`` are the residents' merged byte ranges; ``conflicts`` maps
        each buffer to the others it shares a step with (so a buffer meets
        only those, not every buffer placed so far). With ``start`` and
        ``offsets``, the buffers before ``start`` keep the offsets given (a
        try that shares that prefix with an earlier one places only the rest).
        With ``lowest``, each goes to the lowest offset that holds it instead
        (first fit; ``limit`` is not used).
        """
        placed: dict[str, int] = {}
        if start:
            assert offsets is not None
            for b in ranked[:start]:
                placed[b.name] = offsets[b.name]
        for b in ranked[start:]:
            taken = list(walls)
            for p in conflicts[b.name]:
                o = placed.get(p.name)
                if o is not None:
                    taken.append((o, o + p.nbytes, p.last))
            if lowest:
                placed[b.name] = self._lowest(b.nbytes, taken)
                continue
            offset = None
            if limit is not None:
                offset = self._fit(b.nbytes, taken, limit)
            if offset is None:
                offset = self._fit(b.nbytes, taken, None)
            assert offset is not None
            placed[b.name] = offset
        return placed

    def _lowest(self, nbytes: int, taken: list[tuple[int, int, int]]) -> int:
        """The lowest aligned offset where ``nbytes`` meet none of ``taken``."""
        at = 0
        for start, end, _ in sorted(taken):
            if start - at >= nbytes:
                break
            if end > at:
                at = _align_up(end, self.align)
        return at

    def _fit(
        self, nbytes: int, taken: list[tuple[int, int, int]], limit: int | None
    ) -> int | None:
        """The aligned offset for ``nbytes`` in the smallest gap of ``taken``.

        ``taken`` holds ``(start, end, last step)`` of each conflicting range.
        With no ``limit``: the low end of the smallest gap, else the lowest
        aligned offset above them all. With a ``limit``: only gaps below it,
        against the side whose neighbour lives longer; None if none holds it.
        """
        gaps: list[tuple[int, int, int, int]] = []  # lo, hi, life below, above
        cursor, below = 0, _FOREVER
        for start, end, last in sorted(taken):
            if start > cursor:
                gaps.append((cursor, start, below, last))
            if end > cursor:
                cursor, below = end, last
            elif end == cursor:
                below = max(below, last)
        if limit is not None:
            gaps = [
                (lo, min(hi, limit), b, a if hi <= limit else _FOREVER)
                for lo, hi, b, a in gaps
                if lo < limit
            ]
            if cursor < limit:
                gaps.append((cursor, limit, below, _FOREVER))
        best: tuple[int, int, int, int, int] | None = None
        for lo, hi, life_below, life_above in gaps:
            at = _align_up(lo, self.align)
            room = hi - at
            if room >= nbytes and (best is None or room < best[0]):
                best = (room, at, hi, life_below, life_above)
        if best is None:
            return None if limit is not None else _align_up(cursor, self.align)
        _, at, hi, life_below, life_above = best
        if limit is not None and life_above > life_below:
            return (hi - nbytes) // self.align * self.align
        return at

    # -- what it holds -------------------------------------------------------------

    @property
    def buffers(self) -> dict[str, Allocation]:
        """The buffers of the version added (or re-added) last; empty if none."""
        if self._latest is None:
            return {}
        return self.versions[self._latest]

    @property
    def size(self) -> int:
        """The arena's bytes: the highest end of any arena buffer of any version.

        It never shrinks as versions are added.
        """
        return self._size

    @property
    def resident_bytes(self) -> int:
        """The bytes every resident holds, summed."""
        return sum(r.nbytes for r in self.residents.values())

    def _version(self, version: str | None) -> str:
        if version is None:
            if self._latest is None:
                raise ValueError(
                    "ArenaPlan holds no version yet; plan one with add(recording)"
                )
            return self._latest
        if version not in self.versions:
            raise KeyError(
                f"ArenaPlan has no version {version!r}; it has "
                f"{sorted(self.versions)}: plan it with add(recording)"
            )
        return version

    def _transients(self, version: str | None) -> list[Allocation]:
        return [
            p
            for p in self.versions[self._version(version)].values()
            if p.kind == "transient"
        ]

    def transient_bytes(self, version: str | None = None) -> int:
        """The bytes a version's transients cover in the arena.

        Each transient covers its aligned footprint ``[offset, offset +
        nbytes rounded up to align)``; this is the measure of the union of
        those ranges (the bytes of the maximal covered intervals), so gaps
        left for residents are not counted. Counting footprints rather than
        bare ``nbytes`` makes it at least :meth:`lower_bound_of` for any
        valid placement.

        Args:
            version: The version; by default the last added.
        """
        return _union(
            (p.offset, p.offset + _align_up(p.nbytes, self.align))
            for p in self._transients(version)
        )

    def no_reuse_bytes(self, version: str | None = None) -> int:
        """The bytes a version's transients would take with no reuse.

        Each transient's ``nbytes`` rounded up to the alignment, summed:
        compare with :meth:`transient_bytes` to see what planning saves.

        Args:
            version: The version; by default the last added.
        """
        return sum(_align_up(p.nbytes, self.align) for p in self._transients(version))

    def lower_bound_of(self, version: str | None = None) -> int:
        """The most transient bytes live at any step of one version.

        Each transient counts its ``nbytes`` rounded up to the alignment:
        no placement of the version's transients covers fewer bytes.

        Args:
            version: The version; by default the last added.
        """
        return _lower_bound(self._transients(version), self.align)

    @property
    def lower_bound(self) -> int:
        """The most transient bytes live at any step of any version."""
        return max((self.lower_bound_of(v) for v in self.versions), default=0)

    # -- checking --------------------------------------------------------------------

    def check(self) -> None:
        """Raise if any invariant of the plan is broken.

        Invariants: every arena offset is aligned and every buffer has a
        non-negative size and a step range with ``first <= last``; inputs
        and outputs sit at offset 0 of their own buffers; each version names
        each resident at the offset and size it was placed at; no two arena
        buffers live at one step of one version share a byte (residents are
        live at every step of every version); the size covers every buffer.

        Raises:
            ArenaInvariantError: Naming the broken invariant, the buffers,
                their steps and byte ranges.
        """
        fix = "plan with ArenaPlan.add rather than editing offsets"
        everywhere: list[tuple[str | None, Allocation]] = [
            (None, r) for r in self.residents.values()
        ]
        for version, placed in self.versions.items():
            for name, p in placed.items():
                where = f"version {version!r}: {p.kind} {name!r}"
                if p.kind not in KINDS:
                    raise ArenaInvariantError(
                        f"ArenaPlan {where} has kind {p.kind!r}, not one of {KINDS}"
                    )
                if p.name != name:
                    raise ArenaInvariantError(
                        f"ArenaPlan {where} is filed under {name!r} but named "
                        f"{p.name!r}; {fix}"
                    )
                if p.nbytes < 0 or p.first > p.last or p.first < 0:
                    raise ArenaInvariantError(
                        f"ArenaPlan {where} has {p.nbytes} bytes over steps "
                        f"{p.first}..{p.last}; {fix}"
                    )
                if p.in_arena and p.offset % self.align:
                    raise ArenaInvariantError(
                        f"ArenaPlan {where} sits at offset {p.offset}, not a "
                        f"multiple of {self.align}; {fix}"
                    )
                if not p.in_arena and p.offset != 0:
                    raise ArenaInvariantError(
                        f"ArenaPlan {where} has a device buffer of its own but "
                        f"offset {p.offset}, not 0; {fix}"
                    )
                if p.in_arena and p.end > self._size:
                    raise ArenaInvariantError(
                        f"ArenaPlan {where} ends at byte {p.end}, past the arena's "
                        f"{self._size}; {fix}"
                    )
                if p.kind == "resident":
                    r = self.residents.get(name)
                    if r is None:
                        raise ArenaInvariantError(
                            f"ArenaPlan {where} is not among the plan's residents; "
                            f"{fix}"
                        )
                    if (r.offset, r.nbytes) != (p.offset, p.nbytes):
                        raise ArenaInvariantError(
                            f"ArenaPlan resident {name!r} is at bytes "
                            f"[{p.offset}, {p.end}) in version {version!r} but "
                            f"[{r.offset}, {r.end}) where it was placed; a "
                            f"resident keeps one offset and size in every "
                            f"version: {fix}"
                        )
        for name, r in self.residents.items():
            if r.offset % self.align or r.end > self._size or r.nbytes < 0:
                raise ArenaInvariantError(
                    f"ArenaPlan resident {name!r} at bytes [{r.offset}, {r.end}) "
                    f"is misaligned (align {self.align}) or past the arena's "
                    f"{self._size}; {fix}"
                )
        _disjoint(everywhere, None)
        for version, placed in self.versions.items():
            own = [(version, p) for p in placed.values() if p.kind == "transient"]
            _disjoint([*everywhere, *own], version)

    # -- explaining --------------------------------------------------------------------

    def report(self, version: str | None = None) -> str:
        """A table of one version's buffers, then the arena's size and bounds.

        Args:
            version: The version; by default the last added.
        """
        key = self._version(version)
        placed = self.versions[key]
        order = {k: i for i, k in enumerate(KINDS)}
        rows = [("name", "kind", "offset", "nbytes", "steps")]
        for p in sorted(
            placed.values(), key=lambda p: (order[p.kind], p.offset, p.first, p.name)
        ):
            offset = str(p.offset) if p.in_arena else "own"
            rows.append((p.name, p.kind, offset, str(p.nbytes), f"{p.first}..{p.last}"))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        lines = [f"Arena of {key}"]
        for r in rows:
            cells = [
                r[i].rjust(widths[i]) if i in (2, 3) else r[i].ljust(widths[i])
                for i in range(5)
            ]
            lines.append("  " + "  ".join(cells).rstrip())
        used = self.transient_bytes(key)
        bound = self.lower_bound_of(key)
        ratio = f"{used / bound:.3f}" if bound else "-"
        lines.append(
            f"  arena {self.size} bytes: residents {self.resident_bytes}, "
            f"transients {used} (lower bound {bound}, ratio {ratio}; "
            f"{self.no_reuse_bytes(key)} with no reuse)"
        )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"<ArenaPlan {len(self.versions)} versions, {len(self.residents)} "
            f"residents, {self.size} bytes>"
        )


def _conflicts(transients: Sequence[_Live]) -> dict[str, list[_Live]]:
    """Each transient's conflicting others: those of nonzero size live at a step with it.

    A buffer of no bytes takes no room, so it conflicts with none; it is
    still placed clear of the others (its own list names them).
    """
    found: dict[str, list[_Live]] = {b.name: [] for b in transients}
    by_first = sorted(transients, key=lambda b: (b.first, b.name))
    open_: list[_Live] = []
    for b in by_first:
        open_ = [p for p in open_ if p.last >= b.first]
        for p in open_:
            if p.nbytes:
                found[b.name].append(p)
            if b.nbytes:
                found[p.name].append(b)
        open_.append(b)
    return found


def _meets(score: tuple[int, int], goal: tuple[int, int]) -> bool:
    """Whether a placement's (top, covered bytes) reach the bounds ``goal``."""
    return score[0] <= goal[0] and score[1] <= goal[1]


def _disjoint(
    items: Sequence[tuple[str | None, Allocation]], version: str | None
) -> None:
    """Raise if two of ``items`` (version, buffer) are live together and overlap.

    A version of None marks a resident, live at every step of every version.
    """
    ordered = sorted(items, key=lambda vp: (vp[1].offset, vp[1].end, vp[1].name))
    for i, (va, a) in enumerate(ordered):
        if a.nbytes == 0:
            continue
        for vb, b in ordered[i + 1 :]:
            if b.offset >= a.end:
                break
            if b.nbytes == 0:
                continue
            if va is None and vb is None:
                steps = "at every step"
            elif va is None or vb is None:
                t = b if va is None else a
                steps = f"at steps {t.first}..{t.last}"
            elif va != vb:
                continue
            else:
                lo, hi = max(a.first, b.first), min(a.last, b.last)
                if lo > hi:
                    continue
                steps = f"at steps {lo}..{hi}"
            where = f"of version {version!r} " if version is not None else ""
            raise ArenaInvariantError(
                f"ArenaPlan: {a.kind} {a.name!r} (bytes [{a.offset}, {a.end}), "
                f"steps {a.first}..{a.last}) and {b.kind} {b.name!r} (bytes "
                f"[{b.offset}, {b.end}), steps {b.first}..{b.last}) {where}are "
                f"live together {steps} and share bytes "
                f"[{max(a.offset, b.offset)}, {min(a.end, b.end)}); plan with "
                f"ArenaPlan.add rather than editing offsets"
            )
