"""The row kernels and the GEMV kernels, compiled for the host, judged against
their operators' references.

``host_rows.cc`` compiles the shipped kernel sources (``rms_norm_bf16.cc``,
``rms_norm_weighted_bf16.cc``, ``layer_norm_bf16.cc``,
``layer_norm_affine_bf16.cc``, ``softmax_bf16.cc``, ``gemv.cc``) with
``iron_kernel.h`` and ``iron_vecmath.h`` against a scalar model of the
aie_api calls they make, so what is checked is the kernels' own algorithm
and order of operations: fp32 sums over ``iron::kLanes`` lanes then
``aie::reduce_add``, the ``invsqrt`` / ``inv`` estimates and their Newton
steps, the bf16 roundings. Where the AIE's behaviour is not known here the
model has a switch (its docstring in ``host_rows.cc``): fp32 multiply IEEE or
AIE2's bf16-piece emulation (safe or fast), a halving-tree or sequential lane
reduction, an 8-bit or exact estimate, subnormals flushed or kept; every
test runs under every combination. Each result is compared with
``<Operator>.reference`` under ``<Operator>.tolerance`` by
:func:`iron.core.tolerance.compare`, on random rows and on adversarial ones
(large and small magnitudes, a row of equal values, an outlier, ``-inf`` in
a softmax row, lengths past either end of the row).
"""

from __future__ import annotations

import dataclasses
import itertools
import subprocess
from pathlib import Path

import numpy as np
import pytest
from ml_dtypes import bfloat16

from iron.core.device import as_device
from iron.core.precision import Precision
from iron.core.tolerance import compare
from iron.operators import GEMV, LayerNorm, RMSNorm, Softmax
from iron.runtime.npu.designs import rows as row_designs

from .support import AIE2_FLAGS, HERE, compile_host, empty_aie_api

#: Every combination of the model's assumptions (see host_aie_api.h).
MODELS = ["".join(m) for m in itertools.product("isf", "tq", "8e", "zk")]

#: The AIE2 backend multiplies in bf16 pieces and has no estimate of its own
#: to model: only the lane reduction and subnormal flushing vary.
MODELS_AIE2 = ["".join(m) for m in itertools.product("i", "tq", "8", "zk")]


@dataclasses.dataclass(frozen=True)
class Harness:
    """A build of host_rows.cc: the kernels with one backend, and its models."""

    exe: Path
    backend: str
    models: list[str]


@pytest.fixture(scope="module", params=["fp32", "aie2"])
def host_rows(request, tmp_path_factory) -> Harness:
    """host_rows.cc built with the fp32 backend (AIE2P's) or AIE2's, whose
    model of aie_api has no fp32-vector operation."""
    build = tmp_path_factory.mktemp(f"rows_{request.param}")
    aie2 = request.param == "aie2"
    exe = compile_host(
        build,
        [HERE / "host_rows.cc"],
        "host_rows",
        flags=("-ffp-contract=off", *(AIE2_FLAGS if aie2 else ())),
        includes=(empty_aie_api(build),),
    )
    return Harness(exe, request.param, MODELS_AIE2 if aie2 else MODELS)


def _run(host: Harness, args: list, model: str, *arrays: np.ndarray) -> np.ndarray:
    data = b"".join(np.asarray(a, np.float32).ravel().tobytes() for a in arrays)
    done = subprocess.run(
        [str(host.exe), *map(str, args), model],
        input=data,
        capture_output=True,
        check=True,
    )
    # Every output is a bf16 value written as fp32: the cast is exact.
    return np.frombuffer(done.stdout, np.float32).astype(bfloat16)


def _run_all(host: Harness, args: list, *arrays: np.ndarray) -> dict[str, np.ndarray]:
    """The kernel's output under every model of its build, by model (one run)."""
    out = _run(host, args, ",".join(host.models), *arrays)
    return dict(zip(host.models, np.split(out, len(host.models)), strict=True))


def _bf16(values) -> np.ndarray:
    return np.asarray(values, np.float32).astype(bfloat16)


def _rows(kind: str, shape: tuple[int, int], seed: int) -> np.ndarray:
    """An adversarial or random ``(rows, cols)`` bf16 block, by name."""
    rng = np.random.default_rng(seed)
    r, c = shape
    normal = rng.standard_normal(shape)
    if kind == "random":
        return _bf16(normal)
    if kind == "large":
        return _bf16(normal * 1e17)
    if kind == "small":
        return _bf16(normal * 1e-3)
    if kind == "tiny":
        return _bf16(normal * 1e-20)
    if kind == "equal":
        return _bf16(np.full(shape, 3.5) * (1 + np.arange(r))[:, None])
    if kind == "offset":
        return _bf16(1000 + normal)
    if kind == "outlier":
        x = normal.copy()
        x[:, rng.integers(0, c, r)] = 1e10
        return _bf16(x)
    if kind == "zeros":
        return _bf16(np.zeros(shape))
    raise KeyError(kind)


KINDS = ["random", "large", "small", "tiny", "equal", "offset", "outlier", "zeros"]
SHAPES = [(8, 1024, 2), (4, 768, 4), (6, 16, 3)]  # rows, cols, rows_per_tile


def _verdict(got, op, *inputs):
    want = op.reference(*inputs)
    return compare(got.reshape(want.shape), want, op.tolerance(*inputs))


def _norm_inputs(op, x, seed):
    rng = np.random.default_rng(seed + 100)
    cols = x.shape[1]
    extra = []
    if getattr(op, "weighted", False):
        extra.append(_bf16(rng.standard_normal(cols) * 2))
    if getattr(op, "biased", False):
        extra.append(_bf16(rng.standard_normal(cols)))
    return [x, *extra]


def _norm_ops(rows: int, cols: int, rpt: int) -> list:
    shape = {"rows": rows, "cols": cols, "rows_per_tile": rpt, "num_aie_columns": 1}
    return [
        RMSNorm(**shape),
        RMSNorm(**shape, weighted=True, eps=1e-6),
        LayerNorm(**shape),
        LayerNorm(**shape, weighted=True, biased=True, eps=1e-6),
    ]


@pytest.mark.parametrize("which", range(4), ids=["rms", "rms_w", "ln", "ln_affine"])
@pytest.mark.parametrize("kind", KINDS)
def test_norm_kernels_meet_their_references(host_rows, kind, which):
    failures = []
    for rows, cols, rpt in SHAPES:
        op = _norm_ops(rows, cols, rpt)[which]
        symbol, (eps_bits,) = row_designs.kernel_of(op)
        x = _rows(kind, (rows, cols), seed=rows * cols + which)
        inputs = _norm_inputs(op, x, rows + which)
        outs = _run_all(host_rows, [symbol, rows, cols, rpt, eps_bits], *inputs)
        for model, got in outs.items():
            verdict = _verdict(got, op, *inputs)
            if not verdict:
                failures.append(
                    f"{host_rows.backend} {symbol} {rows}x{cols} model {model}: "
                    f"{verdict}"
                )
    assert not failures, "\n".join(failures)


SOFTMAX_KINDS = ["random", "large", "small", "equal", "offset", "outlier"]


def _softmax_rows(kind: str, shape: tuple[int, int], seed: int) -> np.ndarray:
    if kind == "scaled":
        rng = np.random.default_rng(seed)
        return _bf16(rng.standard_normal(shape) * 8)
    if kind == "neg_inf":
        # -inf in some lanes of every row, a whole row of -inf but its first.
        x = _rows("random", shape, seed).astype(np.float32)
        x[:, 1::3] = -np.inf
        x[0, 1:] = -np.inf
        return _bf16(x)
    if kind == "all_neg_inf":
        x = _rows("random", shape, seed).astype(np.float32)
        x[-1, :] = -np.inf  # the last row: NaN, as the exact math
        return _bf16(x)
    return _rows(kind, shape, seed)


@pytest.mark.parametrize("kind", [*SOFTMAX_KINDS, "scaled", "neg_inf", "all_neg_inf"])
def test_softmax_kernel_meets_its_reference(host_rows, kind):
    failures = []
    for rows, cols, rpt in SHAPES:
        for length in (None, 0, 1, 17, cols - 1, cols + 100, -5):
            x = _softmax_rows(kind, (rows, cols), seed=rows + cols)
            op = Softmax(
                rows=rows,
                cols=cols,
                length=length,
                rows_per_tile=rpt,
                num_aie_columns=1,
            )
            # A per-call length reaches the kernel unclamped: pass it so.
            passed = cols if length is None else length
            args = ["softmax_bf16", rows, cols, rpt, passed]
            for model, got in _run_all(host_rows, args, x).items():
                verdict = _verdict(got, op, x)
                if not verdict:
                    failures.append(
                        f"softmax {rows}x{cols} length={length} model {model}: "
                        f"{verdict}"
                    )
    assert not failures, "\n".join(failures)


def test_softmax_past_the_length_is_exactly_zero_even_in_a_row_of_neg_inf(host_rows):
    # The last row is all -inf: NaN over its length (as the exact math and the
    # reference), and exactly 0 past it, like every row.
    x = _softmax_rows("all_neg_inf", (4, 64), seed=3)
    got = _run(host_rows, ["softmax_bf16", 4, 64, 2, 20], "st8z", x)
    got = got.astype(np.float32).reshape(4, 64)
    assert np.all(got[:, 20:] == 0) and not np.signbit(got[:, 20:]).any()
    assert np.all(np.isnan(got[3, :20])) and not np.isnan(got[:3]).any()
    np.testing.assert_allclose(got[:3, :20].sum(axis=1), 1, rtol=2**-6)


def test_gemv_kernels_meet_their_references(host_rows):
    rng = np.random.default_rng(11)
    cases = [
        (GEMV(M=128, K=512, tile_m=16, tile_k=128), "npu1", "gemv_bf16_acc"),
        (
            GEMV(M=128, K=512, precision=Precision.HIGH, tile_m=16, tile_k=128),
            "npu2",
            "gemv_bf16_acc_round",
        ),
    ]
    for op, dev, symbol in cases:
        op = op.resolved(as_device(dev))
        for scale in (1.0, 1e-20, 1e15):
            w = _bf16(rng.standard_normal((op.M, op.K)) * scale)
            x = _bf16(rng.standard_normal(op.K))
            args = [symbol, op.M, op.K, op.tile_m, op.tile_k]
            for model, got in _run_all(host_rows, args, w, x).items():
                verdict = _verdict(got, op, w, x)
                assert verdict, f"{symbol} scale {scale} model {model}: {verdict}"


# -- the checks can fail ----------------------------------------------------------


def test_a_length_off_by_one_fails(host_rows):
    x = _rows("random", (4, 64), seed=5)
    got = _run(host_rows, ["softmax_bf16", 4, 64, 1, 21], "st8z", x)
    assert _verdict(got, Softmax(rows=4, cols=64, length=21), x)
    assert not _verdict(got, Softmax(rows=4, cols=64, length=20), x)


def test_the_weighted_kernel_rounds_twice_as_its_reference(host_rows):
    rng = np.random.default_rng(9)
    x = _rows("random", (8, 1024), seed=9)
    w = _bf16(rng.standard_normal(1024) * 3)
    op = RMSNorm(rows=8, cols=1024, weighted=True)
    _, (bits,) = row_designs.kernel_of(op)
    got = _run(host_rows, ["rms_norm_weighted_bf16", 8, 1024, 8, bits], "st8z", x, w)
    got = got.reshape(8, 1024).view(np.uint16)
    xf = x.astype(np.float32)
    scale = 1 / np.sqrt((xf * xf).sum(axis=1, keepdims=True) / 1024 + np.float32(1e-5))
    once = (xf * scale * w.astype(np.float32)).astype(bfloat16).view(np.uint16)
    twice = op.reference(x, w).view(np.uint16)
    assert (got == twice).mean() > 0.99 and (got != once).sum() > 10


def test_a_wrong_eps_fails(host_rows):
    x = _rows("tiny", (4, 256), seed=2)
    op = RMSNorm(rows=4, cols=256, eps=1e-5)
    wrong = row_designs.kernel_of(RMSNorm(rows=4, cols=256, eps=1e-3))[1][0]
    got = _run(host_rows, ["rms_norm_bf16", 4, 256, 1, wrong], "st8z", x)
    assert not _verdict(got, op, x)


def test_the_harness_refuses_a_bad_model(host_rows):
    done = subprocess.run(
        [str(host_rows.exe), "softmax_bf16", "1", "16", "1", "16", "xx"],
        input=b"",
        capture_output=True,
    )
    assert done.returncode == 2 and b"usage" in done.stderr
