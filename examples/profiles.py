"""Section 7, "Profiles and Tunables": a graph whose AXPY takes its tunables from a profile.

Records the graph on npu2 (unless IRON_DEVICE names another), prints the
tunables the profile chose, then compiles and calls it (the emulated NPU where
no NPU is present; the host reference without iron-runtime) and checks it
against numpy. Prints PASS! when it holds.
"""

from __future__ import annotations

import os

import numpy as np
from ml_dtypes import bfloat16

import iron
from iron.operators import AXPY


class Scaled(iron.Graph):
    """``1.5 * x + y``: one ``AXPY`` step, its tunables left to the profile."""

    def body(self, x, y):
        return AXPY.step(x, y, scalar_factor=1.5)


def main(size: int = 2048, seed: int = 0) -> bool:
    """Apply a profile, show what it chose, check the reference; True on PASS."""
    iron.set_current_device(os.environ.get("IRON_DEVICE") or "npu2")
    profile = iron.Profile()
    profile.add(AXPY, size=2048, tile_size=1024, num_aie_columns=2)

    graph = Scaled()
    graph.profile = profile

    (step,) = graph.record(x=(size,), y=(size,)).steps
    op = step.op
    print(
        f"AXPY size={op.size}: tile_size={op.tile_size}, "
        f"num_aie_columns={op.num_aie_columns}"
    )

    rng = np.random.default_rng(seed)
    x = rng.standard_normal(size).astype(bfloat16)
    y = rng.standard_normal(size).astype(bfloat16)
    expected = 1.5 * x.astype(np.float64) + y.astype(np.float64)
    try:
        graph.compile(x=(size,), y=(size,))
    except ImportError as missing:  # iron-runtime is not installed
        print(f"no device call ({missing}); checking the host reference")
        result = graph.reference(x, y)
    else:
        result = graph(x, y)
    verdict = iron.compare(result, expected, op.tolerance())
    print(verdict)
    print("PASS!" if verdict else "FAIL!")
    return bool(verdict)


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
