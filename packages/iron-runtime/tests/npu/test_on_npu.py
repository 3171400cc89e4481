"""On a real NPU: the catalog, a planned graph and a Llama decode through aiecc and pyxrt.

Each test runs on a backend fixture: ``emu`` (here, so the harness itself is
tested) and ``xrt``, marked ``npu`` and skipped with the reason where the
machine lacks an NPU, pyxrt, aiecc or Peano (here: all of them). ``nox -s
npu`` runs the ``npu``-marked ones with ``IRON_BACKEND=xrt``.
"""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16

import iron
from iron.core.device import NPU1, NPU2
from iron.core.tolerance import compare
from iron.operators import AXPY, CATALOG
from iron.runtime import set_backend, xrt
from iron.runtime.npu import build
from iron.runtime.npu.designs import build_design

#: One shape per catalog operator that runs on both devices (small, so the
#: emulated run of the harness stays quick).
EXAMPLES = {
    "ElementwiseAdd": {"size": 2048},
    "ElementwiseMul": {"size": 2048},
    "AXPY": {"size": 2048, "scalar_factor": 1.5},
    "ReLU": {"size": 2048},
    "SiLU": {"size": 2048},
    "GELU": {"size": 2048},
    "Sigmoid": {"size": 2048},
    "Tanh": {"size": 2048},
    "LeakyReLU": {"size": 2048, "alpha": 0.01},
    "Clamp": {"size": 2048, "low": -1.0, "high": 1.0},
    "SiLUMul": {"size": 2048},
    "RMSNorm": {"rows": 8, "cols": 2048},
    "LayerNorm": {"rows": 8, "cols": 2048},
    "Softmax": {"rows": 8, "cols": 256},
    "RoPE": {"rows": 8, "heads": 8, "head_dim": 64},
    "GEMV": {"M": 512, "K": 512},
    "GEMM": {"M": 16, "K": 256, "N": 256},
    "DecodeAttention": {
        "heads": 8,
        "kv_heads": 2,
        "head_dim": 64,
        "max_len": 128,
        "length": 100,
    },
    "CausalAttention": {
        "heads": 8,
        "kv_heads": 2,
        "head_dim": 64,
        "max_len": 128,
        "rows": 16,
    },
    "Copy": {"shape": (64, 64)},
    "Transpose": {"rows": 64, "cols": 64},
    "Repeat": {"rows": 8, "repeat": 4, "row_shape": (64,)},
    "Dequant": {"N": 4096},
    "Sample": {"vocab": 4096},
}


def _toolchain_or_skip() -> build.Toolchain:
    lacks = xrt.missing()
    if lacks:
        pytest.skip("no NPU here: this machine lacks " + "; ".join(lacks))
    try:
        return build.find_toolchain()
    except build.ToolMissingError as e:
        pytest.skip(f"no NPU toolchain: {e}")


@pytest.fixture(params=["emu", pytest.param("xrt", marks=pytest.mark.npu)])
def backend(request):
    """The backend a test runs on; xrt skips with the reason where it cannot run."""
    if request.param == "xrt":
        _toolchain_or_skip()
        dev = request.node.callspec.params.get("dev")
        present = xrt.detect()
        if dev is not None and present != dev:
            pytest.skip(f"this machine's NPU is {present or 'not one IRON knows'}")
    set_backend(request.param)
    yield request.param
    set_backend(None)


def _shape(op, dims) -> tuple[int, ...]:
    return tuple(getattr(op, d) if isinstance(d, str) else d for d in dims)


def _inputs(op, rng: np.random.Generator) -> list[np.ndarray]:
    """Random inputs of ``op``'s declared shapes and dtypes."""
    name = type(op).__name__
    arrays = []
    for spec in op.declaration.inputs:
        if spec.optional:  # an unweighted norm's weight and bias
            continue
        if name == "Copy":
            shape = tuple(op.shape)
        elif name == "Repeat":
            shape = (op.rows, *op.row_shape)
        elif name == "Transpose":
            shape = (op.rows, op.cols)
        else:
            shape = _shape(op, spec.dims)
        dtype = np.dtype(spec.dtype if spec.dtype is not None else bfloat16)
        if dtype == np.uint8:
            arrays.append(rng.integers(0, 256, shape).astype(np.uint8))
        elif dtype.kind in "iu":
            arrays.append(rng.integers(0, 100, shape).astype(dtype))
        else:
            arrays.append(rng.standard_normal(shape).astype(dtype))
    return arrays


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_catalog_operator_within_its_tolerance(backend, name, dev):
    op = CATALOG[name](**EXAMPLES[name])
    rng = np.random.default_rng(sorted(EXAMPLES).index(name))
    inputs = _inputs(op, rng)
    with iron.use_device(dev):
        got = op(*inputs)
    want = op.reference(*inputs)
    verdict = compare(np.asarray(got), want, op.tolerance(*inputs))
    assert verdict, f"{name} on {dev} ({backend}): {verdict}"


class _Small(iron.Graph):
    """Four steps; the add reads a per-call row of a held table (a window)."""

    def __init__(self, w: np.ndarray, table: np.ndarray) -> None:
        self.w = iron.weight(w)
        self.table = iron.weight(table)

    def body(self, x, *, position: iron.Scratchpad[int]):
        from iron.operators import GEMV, ElementwiseAdd, RMSNorm, SiLU

        h = RMSNorm.step(x)
        y = GEMV.step(self.w, h.reshape(-1))
        z = ElementwiseAdd.step(y, self.table[position].reshape(-1))
        return SiLU.step(z)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_a_planned_graph_matches_its_reference(backend, dev):
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((256, 256)) / 16).astype(bfloat16)
    table = rng.standard_normal((16, 256)).astype(bfloat16)
    graph = _Small(w, table)
    with iron.use_device(dev):
        for position in (0, 7, 15):
            x = rng.standard_normal((1, 256)).astype(bfloat16)
            got = np.asarray(graph(x, position=position))
            want = graph.reference(x, position=position)
            verdict = compare(got, want, iron.Tolerance.bf16_ulps(8, atol=1e-2))
            assert verdict, f"{dev} position {position}: {verdict}"


@pytest.mark.npu
@pytest.mark.parametrize("description", [NPU1, NPU2], ids=["npu1", "npu2"])
def test_axpy_built_and_run_by_hand(description):
    """The driver alone: one built design, buffers bound by name, one run."""
    tc = _toolchain_or_skip()
    if xrt.detect() != description.name:
        pytest.skip(f"this machine's NPU is not {description.name}")
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
