"""On a real NPU: build and run AXPY through aiecc, Peano and pyxrt.

Marked ``npu``; skipped with a reason where the machine lacks an NPU, pyxrt,
aiecc or Peano (here: all of them). ``nox -s npu`` is meant to run these.
"""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16

from iron.core.device import NPU1, NPU2
from iron.core.tolerance import compare
from iron.operators import AXPY
from iron.runtime import xrt
from iron.runtime.npu import build
from iron.runtime.npu.designs import build_design

pytestmark = pytest.mark.npu


def _toolchain_or_skip() -> build.Toolchain:
    lacks = xrt.missing()
    if lacks:
        pytest.skip("no NPU here: this machine lacks " + "; ".join(lacks))
    try:
        return build.find_toolchain()
    except build.ToolMissingError as e:
        pytest.skip(f"no NPU toolchain: {e}")


@pytest.mark.parametrize("description", [NPU1, NPU2], ids=["npu1", "npu2"])
def test_axpy_on_the_npu(description):
    tc = _toolchain_or_skip()
    device = xrt.XrtDevice(description)
    op = AXPY(size=4096, scalar_factor=1.5)
    built = build.build(build_design(op, description), tc)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(4096).astype(bfloat16)
    y = rng.standard_normal(4096).astype(bfloat16)
    bufs = {name: device.alloc(4096 * 2, name) for name in ("x", "y", "out")}
    bufs["x"].host()[:] = x.view(np.uint8)
    bufs["y"].host()[:] = y.view(np.uint8)
    for b in bufs.values():
        b.to_device()
    image = device.load(built)
    run = image.new_run()
    run.set_args(bufs)
    run.start()
    run.wait(timeout=10)
    bufs["out"].from_device()
    out = bufs["out"].host().view(bfloat16)
    verdict = compare(out, op.reference(x, y), op.tolerance(x, y))
    assert verdict, str(verdict)
