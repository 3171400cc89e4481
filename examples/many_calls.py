"""Section 3, "One Compile, Many Calls": versions by shape, and when a call compiles.

A graph keeps one compiled version per set of input shapes. The example
shows the three ways a call finds its version: compiled ahead for every
shape (the recommended way: the versions share one arena, allocated once),
compiled on the spot by the first call of a graph with no version yet, and
refused with ValueError once a version is loaded and the shape is new. It
runs on npu2 unless IRON_DEVICE names another (the emulated NPU where no NPU
is present), checks every result against numpy, and prints PASS! when all
of it holds.
"""

from __future__ import annotations

import os

import numpy as np
from ml_dtypes import bfloat16

import iron
from iron.operators import AXPY, ReLU

SHAPES = (1024, 4096)


class ReluThenAxpy(iron.Graph):
    """``2 * relu(x) + y``: the graph of Section 2."""

    def body(self, x, y):
        return AXPY.step(ReLU.step(x), y, scalar_factor=2.0)


def _inputs(size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal(size).astype(bfloat16),
        rng.standard_normal(size).astype(bfloat16),
    )


def _check(graph: iron.Graph, x: np.ndarray, y: np.ndarray, tolerance) -> bool:
    """Call ``graph`` on ``x`` and ``y`` and judge the result against numpy."""
    result = graph(x, y)
    expected = 2.0 * np.maximum(x.astype(np.float64), 0) + y.astype(np.float64)
    return bool(iron.compare(result, expected, tolerance))


def main(seed: int = 0) -> bool:
    """Compile every shape, call each many times, show the other two paths."""
    iron.set_current_device(os.environ.get("IRON_DEVICE") or "npu2")
    ok = True

    # 1. Compile every shape first: one version each, one shared arena.
    graph = ReluThenAxpy()
    versions = [graph.compile(x=(n,), y=(n,)) for n in SHAPES]
    for version in versions:
        print(version)
    arena = versions[0].arena
    ok &= all(v.arena is arena for v in versions)
    # AXPY is the one step that rounds: its tolerance is the chain's (Section 2).
    tolerance = versions[0].recording.steps[-1].op.tolerance()
    for call in range(3):
        for n in SHAPES:  # each call finds its version by the inputs' shapes
            ok &= _check(graph, *_inputs(n, seed + call), tolerance)
    print(f"{len(graph.versions)} versions, arena {arena.nbytes} bytes, allocated once")
    ok &= arena.generation == 1

    # 2. A graph with no version yet compiles the first call's shape on the spot.
    lazy = ReluThenAxpy()
    ok &= _check(lazy, *_inputs(2048, seed), tolerance)
    print(f"first call compiled {len(lazy.versions)} version")

    # 3. Once a version is loaded, a shape never compiled is refused.
    try:
        lazy(*_inputs(512, seed))
    except ValueError as error:
        print(f"ValueError: {error}")
    else:
        ok = False

    print("PASS!" if ok else "FAIL!")
    return bool(ok)


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
