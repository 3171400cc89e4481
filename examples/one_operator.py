"""Section 1, "One Operator on Its Own": construct, resolve, call and check one AXPY.

Constructs ``AXPY(size=2048, scalar_factor=2.0)``, lets the device (npu2
unless IRON_DEVICE names another) fill its open tunables, reads its
tolerance, calls it on the device (the emulated NPU where no NPU is
present), and compares the result with plain numpy under that tolerance.
Prints PASS! when it holds.
"""

from __future__ import annotations

import os

import numpy as np
from ml_dtypes import bfloat16

import iron
from iron.operators import AXPY


def main(size: int = 2048, seed: int = 0) -> bool:
    """Run one AXPY on the device and check it against numpy; True on PASS."""
    iron.set_current_device(os.environ.get("IRON_DEVICE") or "npu2")

    # Construct: the params say what it computes; the tunables stay open.
    op = AXPY(size=size, scalar_factor=2.0)
    print(op, "open:", op.open_tunables())

    # Resolve: the device's defaults fill every open tunable.
    resolved = op.resolved()
    print(resolved)

    # Tolerance: how far the device may be from the reference, and why.
    tolerance = resolved.tolerance()
    print(f"tolerance: {tolerance} ({tolerance.note})")

    # Call: a one-step graph compiled once for this device, then run.
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(size).astype(bfloat16)
    y = rng.standard_normal(size).astype(bfloat16)
    result = op(x, y)

    # Compare: against the operator's own reference (the kernel's contract),
    # and against what AXPY means, computed in float64.
    against_reference = iron.compare(result, op.reference(x, y), tolerance)
    print("against reference():", against_reference)
    expected = 2.0 * x.astype(np.float64) + y.astype(np.float64)
    verdict = iron.compare(result, expected, tolerance)
    print("against float64 numpy:", verdict)

    ok = bool(against_reference) and bool(verdict)
    print("PASS!" if ok else "FAIL!")
    return ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
