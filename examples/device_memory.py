"""Section 4, "Device Memory": the scratch arena, residents, and growth.

``Clipped`` holds a weight and a state (residents, placed once) and makes
transients between its steps. Compiled for two shapes, both versions share
one arena: the residents keep one offset in both, and the small version's
transients reuse bytes of the big one's. Every shape compiled first, the
arena is allocated once; a compile after the first call grows it (a copy,
logged as a warning) and the state written before survives. Runs on npu2
unless IRON_DEVICE names another (the emulated NPU where no NPU is present),
checks results against the host reference, and prints PASS! when it holds.
"""

from __future__ import annotations

import logging
import os

import numpy as np
from ml_dtypes import bfloat16

import iron
from iron.operators import AXPY, Clamp, Copy, ReLU

COLS = 256
SMALL, BIG = 4, 64  # rows of the two versions


class Clipped(iron.Graph):
    """``0.5 * clamp(relu(x), 0.25, 2) + bias[:rows]``; keeps its first row.

    ReLU and Clamp are exact, so AXPY, the one step that rounds, gives the
    whole graph's tolerance (Section 2).
    """

    def __init__(self, cols: int = COLS, max_rows: int = BIG) -> None:
        rng = np.random.default_rng(1)
        self.bias = iron.param(rng.standard_normal((max_rows, cols)).astype(bfloat16))
        self.first_row = iron.state((cols,), bfloat16)

    def body(self, x):
        rows = x.shape[0]  # an int: body is recorded once per shape
        a = ReLU.step(x.reshape(-1))  # a transient
        c = Clamp.step(a, low=0.25, high=2.0)  # another
        bias = self.bias[:rows].reshape(-1)  # a slice of a resident weight
        out = AXPY.step(c, bias, scalar_factor=0.5).reshape(x.shape)
        Copy.step(out[0], out=self.first_row)  # the state, written each call
        return out


def _inputs(rows: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, COLS)).astype(bfloat16)


def main(seed: int = 0) -> bool:
    """Plan and call two versions, then grow an arena after a call; True on PASS."""
    iron.set_current_device(os.environ.get("IRON_DEVICE") or "npu2")
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    ok = True

    # Every shape compiled before the first call: one arena, allocated once.
    graph = Clipped()
    small = graph.compile(x=(SMALL, COLS))
    big = graph.compile(x=(BIG, COLS))
    plan = big.plan.arena  # the graph's ArenaPlan, shared by its versions
    print(plan.report(small.plan.version))
    print(plan.report(big.plan.version))
    ok &= small.arena is big.arena and plan.residents.keys() == {"bias", "first_row"}
    for name in plan.residents:  # one offset in every version
        ok &= small.plan.buffers[name].offset == big.plan.buffers[name].offset
    tolerance = small.recording.steps[2].op.tolerance()  # AXPY's
    for rows, seed_ in ((SMALL, seed), (BIG, seed + 1), (SMALL, seed + 2)):
        x = _inputs(rows, seed_)
        ok &= bool(iron.compare(graph(x), graph.reference(x), tolerance))
    print(f"arena: {big.arena.nbytes} bytes, generation {big.arena.generation}")
    ok &= big.arena.generation == 1

    # A compile after the first call grows the arena: a copy, and a warning.
    late = Clipped()
    first = late.compile(x=(SMALL, COLS))
    x = _inputs(SMALL, seed)
    late(x)  # allocates the arena at the small version's size
    written = first.read(late.first_row).copy()
    grown = late.compile(x=(BIG, COLS))
    # The next use of the arena grows it; here a read, which shows the state
    # written before survived the copy.
    kept = grown.read(late.first_row)
    print(
        f"grown arena: {grown.arena.nbytes} bytes, generation {grown.arena.generation}"
    )
    ok &= grown.arena.generation == 2 and np.array_equal(kept, written)
    ok &= bool(iron.compare(written, late.reference(x)[0], tolerance))
    x = _inputs(BIG, seed + 1)
    ok &= bool(iron.compare(late(x), late.reference(x), tolerance))

    print("PASS!" if ok else "FAIL!")
    return bool(ok)


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
