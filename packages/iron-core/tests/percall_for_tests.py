"""Per-call values and a host clamp shared by the ``test_percall_*`` files.

``pos``, ``n`` and ``m`` are scratchpad per-call values; ``py_clamp`` is
clamp on plain ints, what an expression's clamp must agree with.
"""

from __future__ import annotations

from iron.core.percall import PerCall

pos = PerCall("position")
n = PerCall("n")
m = PerCall("m")


def py_clamp(x: int, lo: int | None, hi: int | None) -> int:
    if lo is not None:
        x = max(x, lo)
    if hi is not None:
        x = min(x, hi)
    return x
