"""The arena's exact search (``iron.core._arena_search.Packing``) against brute force.

On small sets of buffers (sizes, live steps, residents' walls) the lowest top
any placement reaches is found independently: every order of the buffers,
each placed at the lowest aligned offset clear of the walls and of the
buffers placed before it that it is live with (a compacted placement, read
by rising offset, is such an order). The search must find a placement at
that top, show none exists one alignment below it, never let two buffers
live together share a byte, and give the same answer every time.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iron.core._arena_search import FOUND, NONE, OUT, Packing

ALIGN = 64


@st.composite
def cases(draw):
    n = draw(st.integers(1, 6))
    sizes = [ALIGN * draw(st.integers(1, 8)) for _ in range(n)]
    firsts = [draw(st.integers(0, 6)) for _ in range(n)]
    lasts = [f + draw(st.integers(0, 4)) for f in firsts]
    walls = []
    at = 0
    for _ in range(draw(st.integers(0, 2))):
        lo = at + ALIGN * draw(st.integers(0, 6))
        hi = lo + draw(st.integers(1, 300))  # a resident's end need not be aligned
        walls.append((lo, hi))
        at = -(-hi // ALIGN) * ALIGN + ALIGN
    return sizes, firsts, lasts, walls


def _conflicts(firsts, lasts):
    n = len(firsts)
    return [
        [
            j
            for j in range(n)
            if j != i and firsts[j] <= lasts[i] and firsts[i] <= lasts[j]
        ]
        for i in range(n)
    ]


def _packing(case):
    sizes, firsts, lasts, walls = case
    return Packing(sizes, firsts, lasts, _conflicts(firsts, lasts), walls, ALIGN)


def _lowest_top(case):
    """The lowest top over every order placed first fit (brute force)."""
    sizes, firsts, lasts, walls = case
    conflicts = _conflicts(firsts, lasts)
    best = None
    for order in itertools.permutations(range(len(sizes))):
        offsets = {}
        for i in order:
            taken = sorted(
                [(lo, hi) for lo, hi in walls]
                + [
                    (offsets[j], offsets[j] + sizes[j])
                    for j in conflicts[i]
                    if j in offsets
                ]
            )
            at = 0
            for lo, hi in taken:
                if at + sizes[i] <= lo:
                    break
                at = max(at, -(-hi // ALIGN) * ALIGN)
            offsets[i] = at
        top = max(offsets[i] + sizes[i] for i in offsets)
        best = top if best is None else min(best, top)
    return best


def _assert_valid(case, offsets, capacity):
    sizes, firsts, lasts, walls = case
    conflicts = _conflicts(firsts, lasts)
    assert len(offsets) == len(sizes)
    for i, (o, s) in enumerate(zip(offsets, sizes, strict=True)):
        assert o % ALIGN == 0 and o >= 0
        assert o + s <= capacity
        for lo, hi in walls:
            assert o + s <= lo or hi <= o, (i, o, s, lo, hi)
        for j in conflicts[i]:
            assert o + s <= offsets[j] or offsets[j] + sizes[j] <= o, (i, j, offsets)


SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@SETTINGS
@given(cases())
def test_the_search_reaches_the_lowest_top_and_shows_nothing_lower_fits(case):
    best = _lowest_top(case)
    packing = _packing(case)
    outcome, offsets, _ = packing.solve(best, 10**6)
    assert outcome == FOUND
    _assert_valid(case, offsets, best)
    outcome, offsets, _ = packing.solve(best - ALIGN, 10**6)
    assert (outcome, offsets) == (NONE, None)


@SETTINGS
@given(cases(), st.integers(0, 40))
def test_a_placement_found_under_any_capacity_is_sound_and_the_same_each_time(
    case, units
):
    capacity = ALIGN * units
    first = _packing(case).solve(capacity, 10**6)
    again = _packing(case).solve(capacity, 10**6)
    assert first == again
    outcome, offsets, _ = first
    if outcome == FOUND:
        _assert_valid(case, offsets, capacity)
    else:
        assert outcome == NONE
        assert _lowest_top(case) > capacity


def test_more_bytes_live_at_a_step_than_the_capacity_are_refused_without_search():
    case = ([128, 128, 64], [0, 1, 5], [3, 2, 6], [])
    assert _packing(case).solve(192, 10**6) == (NONE, None, 0)
    outcome, offsets, _ = _packing(case).solve(256, 10**6)
    assert outcome == FOUND
    _assert_valid(case, offsets, 256)


# 24 buffers (sizes in units of ALIGN) whose placement at their lower bound
# takes the search 1131 buffers looked at: its first dives fail and it
# backtracks, then tries another preorder
UNITS = (4, 4, 7, 9, 1, 3, 8, 1, 9, 3, 7, 4, 7, 4, 1, 4, 3, 3, 4, 8, 7, 6, 4, 1)
FIRSTS = (0, 4, 8, 8, 1, 8, 0, 10, 0, 7, 9, 10, 8, 5, 5, 10, 6, 6, 3, 0, 4, 3, 9, 6)
LASTS = (
    6,
    7,
    12,
    12,
    2,
    8,
    0,
    10,
    1,
    11,
    13,
    15,
    14,
    5,
    5,
    13,
    7,
    8,
    7,
    6,
    4,
    9,
    13,
    8,
)


def test_the_search_stops_when_its_work_is_spent_the_same_way_every_time():
    case = ([ALIGN * u for u in UNITS], list(FIRSTS), list(LASTS), [])
    bound = int(_packing(case).load.max())
    outcome, offsets, spent = _packing(case).solve(bound, 10**5)
    assert (outcome, spent) == (FOUND, 1131)
    _assert_valid(case, offsets, bound)
    for work in (1, 24, 300, 1130):
        first = _packing(case).solve(bound, work)
        assert first[:2] == (OUT, None)
        assert first[2] <= work
        assert _packing(case).solve(bound, work) == first
    assert _packing(case).solve(bound, 1131) == (outcome, offsets, spent)
