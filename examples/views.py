"""Section 5, "Views and Per-Call Values": slices, strided views, gathers, bounds.

``Views`` reads its inputs and a held table through every kind of view: a
row bound per call (``x[:n]``), a static slice, strided views, a gather of
rows by ids, and a window whose start is a clamped per-call value. One
compiled version serves every value of ``n`` and ``start``. Every step is
exact (ReLU selects, Copy moves), so the device must match numpy's own
indexing exactly. Values outside a view's bounds are refused before
anything runs. Runs on npu2 unless IRON_DEVICE names another (the emulated
NPU where no NPU is present); prints PASS! when it holds.
"""

from __future__ import annotations

import os

import numpy as np
from ml_dtypes import bfloat16

import iron
from iron.operators import Copy, ReLU

ROWS, COLS = 8, 16
TABLE_ROWS, WIDTH, IDS = 16, 8, 3


class Views(iron.Graph):
    """Six steps, each reading one kind of view."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = iron.weight(table)  # a held tensor the body indexes

    def body(
        self,
        x,
        ids,
        *,
        n: iron.Scratchpad[int],
        start: iron.Scratchpad[int],
    ):
        first = ReLU.step(x[:n].reshape(-1))  # the first n rows valid per call
        middle = Copy.step(x[2:6])  # a static slice: a contiguous run
        every_other = Copy.step(x[::2])  # strided: every other row
        block = Copy.step(x[:, 4:12])  # strided: a column block of each row
        rows = Copy.step(self.table[ids])  # a gather by the ids tensor
        at = iron.clamp(start - 2, 0, TABLE_ROWS - 4)  # a per-call expression
        window = Copy.step(self.table[at : at + 4])  # 4 rows from a per-call row
        return first, middle, every_other, block, rows, window


def expected(table, x, ids, n, start) -> tuple[np.ndarray, ...]:
    """What each output means, in numpy."""
    at = min(max(start - 2, 0), TABLE_ROWS - 4)
    return (
        np.maximum(x[:n].reshape(-1), 0),
        x[2:6],
        x[::2],
        x[:, 4:12],
        table[ids],
        table[at : at + 4],
    )


def main(seed: int = 0) -> bool:
    """Call one version with several per-call values; True on PASS."""
    iron.set_current_device(os.environ.get("IRON_DEVICE") or "npu2")
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((TABLE_ROWS, WIDTH)).astype(bfloat16)
    graph = Views(table)
    version = graph.compile(x=(ROWS, COLS), ids=((IDS,), np.int32))
    print(version.recording)
    print(version.plan.report(graph.name).split("  arena")[0])
    ok = True

    exact = iron.Tolerance.exact()
    for n, start in ((3, 7), (8, 0), (1, 40)):
        x = rng.standard_normal((ROWS, COLS)).astype(bfloat16)
        ids = rng.integers(0, TABLE_ROWS, IDS).astype(np.int32)
        results = graph(x, ids, n=n, start=start)
        for got, want in zip(results, expected(table, x, ids, n, start)):
            ok &= got.shape == want.shape and bool(iron.compare(got, want, exact))
        print(f"n={n}, start={start}: outputs {[r.shape for r in results]}")

    # A value outside a view's bounds is refused before anything runs.
    try:
        graph(x, ids, n=ROWS + 1, start=0)
    except IndexError as error:
        print(f"IndexError: {error}")
    else:
        ok = False

    print("PASS!" if ok else "FAIL!")
    return bool(ok)


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
