"""Section 2, "Your First Graph": ``scalar_factor * relu(x) + y`` as one graph.

The graph is recorded for a device (npu2 unless IRON_DEVICE names another),
compiled and called on it (the emulated NPU where no NPU is present), and
checked against plain numpy with the tolerance of the one step that rounds.
Without iron-runtime installed it checks the host reference instead.
Prints PASS! when it holds.
"""

from __future__ import annotations

import os

import numpy as np
from ml_dtypes import bfloat16

import iron
from iron.operators import AXPY, ReLU


class ReluThenAxpy(iron.Graph):
    """``scalar_factor * relu(x) + y``, two operators as one compiled image."""

    def __init__(self, scalar_factor: float = 2.0) -> None:
        self.scalar_factor = scalar_factor

    def body(self, x, y):
        activated = ReLU.step(x)
        return AXPY.step(activated, y, scalar_factor=self.scalar_factor)


def main(size: int = 2048, seed: int = 0) -> bool:
    """Record the graph, print it, check its host reference; True on PASS."""
    iron.set_current_device(os.environ.get("IRON_DEVICE") or "npu2")
    graph = ReluThenAxpy(scalar_factor=2.0)
    recording = graph.record(x=(size,), y=(size,))
    print(recording)

    rng = np.random.default_rng(seed)
    x = rng.standard_normal(size).astype(bfloat16)
    y = rng.standard_normal(size).astype(bfloat16)
    try:
        graph.compile(x=(size,), y=(size,))
    except ImportError as missing:  # iron-runtime is not installed
        print(f"no device call ({missing}); checking the host reference")
        result = graph.reference(x, y)
    else:
        result = graph(x, y)

    # plain numpy, in float64: what the chain means
    expected = 2.0 * np.maximum(x.astype(np.float64), 0) + y.astype(np.float64)
    # ReLU is exact; AXPY is the one step that rounds, so its tolerance is the
    # chain's: read it off the recording, not off an AXPY built by hand.
    (axpy,) = [s.op for s in recording.steps if isinstance(s.op, AXPY)]
    verdict = iron.compare(result, expected, axpy.tolerance())
    print(verdict)
    print("PASS!" if verdict else "FAIL!")
    return bool(verdict)


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
