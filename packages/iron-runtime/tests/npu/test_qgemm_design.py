"""The QGEMM design and its kernel.

Golden files ``golden/qgemm_<fmt>_<M>x<K>x<N>_<dev>.mlir`` are Llama-3.2-1B
prompt projections of a 16-row chunk with packed weights: the q/o
projection (K = N = 2048) in q4 and the down projection (K = 8192, N =
2048) in q8, at the default resolved tunables; regenerate with
``IRON_UPDATE_GOLDEN=1``. The kernel source ``qgemm.cc`` is compiled for the
host against the aie_api model (``host_qgemm.cc``, npu1's and npu2's mmul)
and judged against ``QGEMM.reference`` on random and adversarial inputs, in
every format.
"""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from ml_dtypes import bfloat16

from iron.core.device import as_device
from iron.core.operator import RefusedShapeError
from iron.core.tolerance import compare
from iron.operators.qmatmul import QGEMM
from iron.operators.quantized import FORMATS, QuantFormat, quantize
from iron.runtime.image import Placement
from iron.runtime.npu import LegalityError, kernels, legality
from iron.runtime.npu.designs import (
    build_design,
    design,
    family_of,
    gemm_schedule,
    qgemm,
)

from .support import (
    MATMUL_MODELS,
    check_golden,
    kernel_harness,
    shim_moved,
)

Q4, Q8, Q8_16 = FORMATS["q4"], FORMATS["q8"], FORMATS["q8_16"]


def _qgemm(fmt: QuantFormat, **fields: int) -> QGEMM:
    return QGEMM(bits=fmt.bits, group=fmt.group, **fields)


# -- golden text ----------------------------------------------------------------------

GOLDEN = [
    ("q4_16x2048x2048", Q4, dict(M=16, K=2048, N=2048)),
    ("q8_16x8192x2048", Q8, dict(M=16, K=8192, N=2048)),
]


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("case, fmt, fields", GOLDEN, ids=[g[0] for g in GOLDEN])
def test_golden(case, fmt, fields, dev):
    text = design(_qgemm(fmt, **fields), dev)
    check_golden(f"qgemm_{case}", dev, text, subject=f"the QGEMM design on {dev}")


def test_the_family_designs_qgemm():
    assert family_of(_qgemm(Q4, M=16, K=64, N=16)) is qgemm


# -- what the design moves ------------------------------------------------------------


def _moved(transfers: list[legality.Transfer], dev: str) -> np.ndarray:
    """The byte offsets a FIFO's transfers move, in order."""
    parts = []
    for t in transfers:
        idx = shim_moved(t, dev).astype(np.int64)
        parts.append((idx[:, None] * t.itemsize + np.arange(t.itemsize)).reshape(-1))
    return np.concatenate(parts)


CASES = [
    ("npu2", Q4, dict(M=64, K=512, N=256)),
    ("npu1", Q8, dict(M=32, K=256, N=128, tile_m=8, tile_k=64, tile_n=16)),
    ("npu2", Q8_16, dict(M=16, K=2048, N=2048)),
    ("npu1", Q4, dict(M=128, K=1024, N=512, tile_m=16, tile_k=256, tile_n=32)),
]


@pytest.mark.parametrize("dev, fmt, fields", CASES)
def test_each_core_gets_its_packed_tiles_in_its_order(dev, fmt, fields):
    """Per column, the shim moves every packed w tile the column's cores
    consume, in their order (each a tile_n rows' K tile, back to back), once
    per M pass; the cost's packed bytes are what moves."""
    d = as_device(dev)
    op = _qgemm(fmt, **fields).resolved(d)
    lay = qgemm.layout(op, d)
    p = gemm_schedule.tiling(op, d)
    rb, rbk = op.row_bytes, fmt.row_bytes(op.tile_k)
    where = {"a": ("a", 0), "w": ("w", 0), "out": ("out", 0)}
    gwhere = {"a": ("a", 0), "b": ("w", 0), "out": ("out", 0)}
    order = gemm_schedule.schedule(op, d, gwhere, qgemm.packed_rows(op, where)).order
    total = 0
    for c in range(p.columns):
        tiles = []
        for _m, n in (
            itertools.product(range(p.m_passes), range(p.n_passes))
            if order == "mn"
            else ((m, n) for n in range(p.n_passes) for m in range(p.m_passes))
        ):
            n0 = (n * p.columns + c) * op.tile_n
            for k in range(p.k_tiles):
                tiles += [
                    np.arange(rbk) + (n0 + r) * rb + k * rbk for r in range(op.tile_n)
                ]
        got = _moved([t for t in lay.transfers if t.fifo == f"w_{c}"], dev)
        np.testing.assert_array_equal(got, np.concatenate(tiles))
        total += got.size
    cost = op.cost(d)
    assert total == op.N * rb * p.m_passes
    # What every shim moves is what the cost counts: the packed w once per M
    # pass, a once per N pass, out once.
    moved = sum(int(np.prod(t.sizes)) * t.itemsize for t in lay.transfers)
    assert moved == cost.bytes + cost.reread_bytes
    w_fifo = next(f for f in lay.fifos if f.name == "w_0")
    assert (w_fifo.itemsize, w_fifo.element_bytes) == (1, op.tile_n * rbk)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_the_cost_counts_the_packed_bytes_and_the_design_calls(dev):
    op = _qgemm(Q4, M=64, K=2048, N=2048).resolved(as_device(dev))
    d = build_design(op, dev)
    cost = op.cost(as_device(dev))
    assert cost.bytes == 64 * 2048 * 2 + 2048 * Q4.row_bytes(2048) + 64 * 2048 * 2
    moved = sum(
        int(np.prod(t.sizes)) * t.itemsize
        for t in d.layout.transfers
        if t.fifo.startswith("w_")
    )
    p = gemm_schedule.tiling(op, as_device(dev))
    assert moved == 2048 * op.row_bytes * p.m_passes
    assert cost.calls == p.m_passes * p.n_passes * p.k_tiles
    assert f"arith.constant {p.tiles} : index" in d.text
    assert d.arg_bytes == (64 * 2048 * 2, 2048 * op.row_bytes, 64 * 2048 * 2)


def test_the_kernel_call_and_its_declaration_match_the_contract():
    c = kernels.contract("qgemm")
    assert c.operator.startswith("QGEMM")
    assert "bit for bit" in c.rounding and "QGEMM.reference" in c.rounding
    assert "-fstack-usage" in c.stack
    op = _qgemm(Q8_16, M=16, K=1024, N=256, tile_m=16, tile_k=128, tile_n=32)
    d = build_design(op, "npu1")
    assert d.kernels == ("qgemm",)
    decl = re.search(r"func\.func private @qgemm_acc\((.*)\) attributes", d.text)
    assert decl is not None
    # 32 rows of 128 q8_16 elements: 32 * 8 groups * 18 bytes.
    assert decl.group(1) == (
        "memref<16x128xbf16>, memref<4608xi8>, memref<16x32xf32>, "
        "memref<32x128xbf16>, i32, i32, i32, i32, i32"
    )
    call = re.search(r"func\.call @qgemm_acc\((.*)\) :", d.text)
    assert call is not None
    consts = dict(re.findall(r"(%\S+) = arith\.constant (\d+) : i32", d.text))
    args = [a.strip() for a in call.group(1).split(",")]
    assert [consts[a] for a in args[4:]] == ["16", "128", "32", "8", "16"]
    assert f"%w_buf: memref<{256 * Q8_16.row_bytes(1024)}xi8>" in d.text
    source = c.path.read_text(encoding="utf-8")
    for symbol in (qgemm.ZERO, qgemm.ACCUMULATE, qgemm.STORE):
        assert f"void {symbol}(" in source


# -- legality -----------------------------------------------------------------------


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_every_core_reserves_the_stated_stack_and_counts_its_tiles(dev):
    d_ = as_device(dev)
    op = _qgemm(Q4, M=64, K=2048, N=2048).resolved(d_)
    d = build_design(op, dev)
    stack = legality.core_stack(d_, ("qgemm",))
    assert d.layout.stack_bytes == stack == 1024
    assert d.text.count(f"stack_size = {stack} : i32") == len(d.layout.cores)
    # legality's count of one core's bytes is the operator's own.
    core = d.layout.cores[0]
    held = sum(
        f.depth * f.element_bytes
        for f in d.layout.fifos
        if core in f.consumers or f.producer == core
    )
    held += sum(n for t, n in d.layout.buffers if t == core)
    assert held + stack == op.core_bytes(op.tile_m, op.tile_k, op.tile_n)
    assert held + stack <= d_.core_memory_bytes


def test_legality_refuses_tiles_past_a_core_and_names_the_fix():
    op = _qgemm(
        Q8, M=64, K=2048, N=2048, tile_m=32, tile_k=256, tile_n=32, num_aie_columns=4
    )
    with pytest.raises(RefusedShapeError, match="over a core's 65536; give smaller"):
        build_design(op, "npu1")
    # The design's own count refuses the same tiles (the operator's rule is
    # the same sum: test_every_core_reserves_the_stated_stack_...).
    lay = qgemm.layout(op, as_device("npu1"))
    with pytest.raises(LegalityError, match=r"compute tile \(0, 2\).*bytes"):
        legality.check(lay, as_device("npu1"))


def test_refusals_are_named():
    with pytest.raises(RefusedShapeError, match="K=96 is not a positive multiple"):
        build_design(_qgemm(Q4, M=16, K=96, N=16), "npu1")
    with pytest.raises(
        RefusedShapeError, match="M=12 is not a positive multiple of 8.*pad M"
    ):
        build_design(_qgemm(Q4, M=12, K=64, N=16), "npu1")
    with pytest.raises(
        RefusedShapeError, match="N=24 is not a positive multiple of 16.*pad N"
    ):
        build_design(_qgemm(Q4, M=16, K=64, N=24), "npu2")
    with pytest.raises(
        RefusedShapeError, match="tile_n=8 is not a positive multiple of 16"
    ):
        build_design(_qgemm(Q4, M=16, K=64, N=32, tile_n=8), "npu2")
    with pytest.raises(RefusedShapeError, match="exceeds the device's 4 columns"):
        build_design(_qgemm(Q4, M=16, K=64, N=64, num_aie_columns=8), "npu1")


def test_long_sequences_run_in_blocks_within_the_shims_descriptors():
    # Llama-3.2-1B's LM head over a 64-row chunk: more w walks than a shim's
    # descriptors at once, so the sequence runs in blocks with waits.
    dev = as_device("npu1")
    op = _qgemm(Q4, M=256, K=2048, N=128256 // 16 * 16).resolved(dev)
    d = build_design(op, dev)
    assert d.layout.waits
    per_shim: dict = {}
    for t in d.layout.transfers:
        per_shim.setdefault(t.shim, set()).add(t.bd_id)
    assert all(max(ids) < dev.shim_bds for ids in per_shim.values())


def test_the_arena_holds_packed_rows_at_word_offsets_only():
    op = _qgemm(Q4, M=16, K=256, N=64, num_aie_columns=2, tile_n=32)
    nbytes = 64 * Q4.row_bytes(256)
    placement = {
        "w": Placement("arena", 8192, nbytes),
        "a": Placement("arena", 0, 16 * 256 * 2),
        "out": Placement("output", 0, 16 * 64 * 2),
    }
    d = build_design(op, "npu2", placement)
    assert d.args == ("arena", "out")
    (w1,) = [t for t in d.layout.transfers if t.fifo == "w_1"]
    assert (w1.buffer, w1.itemsize) == ("arena", 2)
    got = _moved([w1], "npu2")
    np.testing.assert_array_equal(got, 8192 + nbytes // 2 + np.arange(nbytes // 2))
    bad = {**placement, "w": Placement("arena", 8194, nbytes)}
    with pytest.raises(LegalityError, match=r"shim tile \(0, 0\).*4-byte alignment"):
        build_design(op, "npu2", bad)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_every_fifo_keeps_to_a_tested_feature_combination(dev):
    d = build_design(_qgemm(Q4, M=64, K=2048, N=2048), dev)
    for name, features in legality.emitted_fifo_features(d.text).items():
        assert not features or features in legality.TESTED_FIFO_FEATURES, (
            name,
            sorted(features),
        )
    assert legality.emitted_fifo_features(d.text)["w_col0"] == frozenset({"link_out"})


# -- the kernel, compiled for the host --------------------------------------------------


@pytest.fixture(scope="module", params=["npu2", "npu1"])
def host_qgemm(request, tmp_path_factory) -> Path:
    build = tmp_path_factory.mktemp(f"qgemm_{request.param}")
    return kernel_harness(build, "host_qgemm", aie2=request.param == "npu1")


def _run(exe: Path, args: list, a: np.ndarray, w: np.ndarray) -> np.ndarray:
    done = subprocess.run(
        [str(exe), *map(str, args)],
        input=a.view(np.uint16).tobytes() + w.tobytes(),
        capture_output=True,
        check=True,
    )
    return np.frombuffer(done.stdout, np.uint16).view(bfloat16)


def _f16_fields(
    w: np.ndarray, fmt: QuantFormat, offset: int, values: np.ndarray
) -> None:
    """Write float16 ``values`` (cycled) into every group's field at ``offset``."""
    groups = w.reshape(w.shape[0], -1, fmt.group_bytes)
    n = groups.shape[0] * groups.shape[1]
    cycled = np.resize(np.asarray(values, np.float16), n).reshape(groups.shape[:2])
    groups[..., offset : offset + 2] = cycled[..., None].view(np.uint8)


#: fp16 extremes: the largest, the smallest normal and subnormal, signed
#: zeros, values with all 11 significant bits set.
EDGE_F16 = np.array(
    [65504.0, -65504.0, 2.0**-14, 2.0**-24, -(2.0**-24), 0.0, -0.0,
     2047 * 2.0**-24, 1.0 + 1023 / 1024, -(2.0 - 2.0**-10) * 2.0**15,
     1023 * 2.0**-24],
    np.float16,
)  # fmt: skip


def _weights(fmt: QuantFormat, rows: int, k: int, case: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if case == "quantized":
        return quantize(rng.standard_normal((rows, k)) * 0.05, fmt)
    w = rng.integers(0, 256, (rows, fmt.row_bytes(k)), dtype=np.uint8)
    if case == "random":  # random codes, finite random fields
        fields = rng.standard_normal(rows * k // fmt.group) * 3
    elif case == "zero":  # zero scales (and minimums): every weight zero
        fields = np.zeros(1)
    else:  # fp16 extremes in the scale and the minimum
        fields = EDGE_F16
    _f16_fields(w, fmt, 0, fields)
    if fmt.bits == 4:
        _f16_fields(w, fmt, 2, fields[::-1] if case != "zero" else fields)
    return w


WEIGHTS = ["quantized", "random", "zero", "edge"]


def _units(exe: Path) -> tuple[int, int]:
    """The harness build's (2r, 2t): npu1's mmul is 4 x 8 x 4, npu2's 4 x 8 x 8."""
    return (8, 8) if "npu1" in exe.parent.name else (8, 16)


@pytest.mark.parametrize("fmt", [Q4, Q8, Q8_16], ids=lambda f: f.name)
def test_the_kernel_product_meets_qgemm_reference(host_qgemm, fmt):
    rng = np.random.default_rng(7)
    um, un = _units(host_qgemm)
    tilings = [
        (16, 256, 2 * un, 8, 128, un),
        (8, 512, un, 8, 512, un),
        (2 * um, 128, 2 * un, 2 * um, 64, 2 * un),
    ]
    for (m, k, n, tm, tk, tn), case in itertools.product(tilings, WEIGHTS):
        op = _qgemm(fmt, M=m, K=k, N=n)
        w = _weights(fmt, n, k, case, seed=m + k + n)
        a = rng.standard_normal((m, k)).astype(bfloat16)
        if case == "edge":  # large and tiny activations too
            a[:, ::3] = np.float32(3e4)
            a[:, 1::3] = np.float32(1e-30)
        with np.errstate(all="ignore"):
            want = op.reference(a, w)
            tol = op.tolerance(a, w)
        for model in MATMUL_MODELS:
            args = [fmt.bits, fmt.group, m, k, n, tm, tk, tn, model]
            got = _run(host_qgemm, args, a, w).reshape(m, n)
            verdict = compare(got, want, tol)
            assert verdict, (
                f"{case} {m}x{k}x{n} tiles {tm}x{tk}x{tn} {model}: {verdict}"
            )
            # The dequantized weights are the reference's bit for bit; summed
            # in another order than numpy's, the fp32 sums round to the same
            # bf16 all but rarely.
            same = (got.view(np.uint16) == want.view(np.uint16)).mean()
            assert same >= 0.9, f"{case} {m}x{k}x{n} {model}: {same:.2f} bit-equal"


@pytest.mark.parametrize("fmt", [Q4, Q8, Q8_16], ids=lambda f: f.name)
def test_the_kernel_dequantizes_bit_for_bit(host_qgemm, fmt):
    """Row i of a picks one k (a 1 there, zeros elsewhere): each result is
    then one exact product, the dequantized weight itself, so the kernel's
    dequantization, through the tile layout and the mmul, equals
    DequantRows.reference's value for value."""
    from iron.operators.qmatmul import DequantRows

    um, un = _units(host_qgemm)
    m, k, n = 4 * um, 256, 2 * un
    picks = np.random.default_rng(11).permutation(k)[:m]
    a = np.zeros((m, k), bfloat16)
    a[np.arange(m), picks] = 1
    for case in WEIGHTS:
        w = _weights(fmt, n, k, case, seed=5)
        want = DequantRows(rows=n, K=k, bits=fmt.bits, group=fmt.group).reference(w)
        for model in ("itez", "iqek"):
            args = [fmt.bits, fmt.group, m, k, n, um, 128, un, model]
            got = _run(host_qgemm, args, a, w).reshape(m, n)
            np.testing.assert_array_equal(
                got.astype(np.float32),
                want[:, picks].T.astype(np.float32),
                err_msg=f"{case} {model}",
            )


def test_nonfinite_fields_give_the_references_nonfinite_results(host_qgemm):
    # Scales that are infinities or NaNs (the formats refuse them; the kernel
    # still propagates them where the reference does).
    um, un = _units(host_qgemm)
    m, k, n = um, 64, un
    for fmt in (Q4, Q8):
        w = _weights(fmt, n, k, "random", seed=9)
        scales = np.full(n * k // fmt.group, 1.5, np.float16)
        scales[[2, 5, 7]] = [np.inf, -np.inf, np.nan]  # rows 1, 2 and 3
        _f16_fields(w, fmt, 0, scales)
        a = np.random.default_rng(4).standard_normal((m, k)).astype(bfloat16)
        op = _qgemm(fmt, M=m, K=k, N=n)
        with np.errstate(all="ignore"):
            want = op.reference(a, w).astype(np.float32)
        got = _run(host_qgemm, [fmt.bits, fmt.group, m, k, n, m, k, n, "itez"], a, w)
        got = got.reshape(m, n).astype(np.float32)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        inf = np.isinf(want)
        np.testing.assert_array_equal(got[inf], want[inf])
        # The columns of finite weights, judged on their own reference.
        cols = np.isfinite(want).all(axis=0)
        assert 0 < cols.sum() < n
        sub = _qgemm(fmt, M=m, K=k, N=int(cols.sum()))
        want_sub = sub.reference(a, w[cols])
        assert compare(got[:, cols], want_sub, sub.tolerance(a, w[cols]))


def test_a_wrong_tile_layout_fails_the_check(host_qgemm):
    # The packed rows of one K tile swapped with the next's: the kernel then
    # multiplies the wrong weights, and the check says so.
    um, un = _units(host_qgemm)
    m, k, n = um, 256, un
    fmt = Q8
    w = _weights(fmt, n, k, "quantized", seed=1)
    a = np.random.default_rng(2).standard_normal((m, k)).astype(bfloat16)
    op = _qgemm(fmt, M=m, K=k, N=n)
    args = [fmt.bits, fmt.group, m, k, n, m, 128, n, "itez"]
    assert compare(
        _run(host_qgemm, args, a, w).reshape(m, n),
        op.reference(a, w),
        op.tolerance(a, w),
    )
    half = fmt.row_bytes(128)
    swapped = np.concatenate([w[:, half:], w[:, :half]], axis=1)
    got = _run(host_qgemm, args, a, swapped).reshape(m, n)
    assert not compare(got, op.reference(a, w), op.tolerance(a, w))


def test_the_harness_refuses_bad_arguments(host_qgemm):
    done = subprocess.run([str(host_qgemm), "4"], capture_output=True)
    assert done.returncode == 2 and b"usage" in done.stderr


@pytest.mark.parametrize("bits", [4, 8])
def test_the_lm_head_qgemm_keeps_each_channels_task_queue(bits):
    # Issue 28, C3: npu2's profile has no LM-head QGEMM entry, and at the
    # defaults (8 columns, tile_n=48) it pushed 6 transfers per channel with
    # no wait; a channel queues 4, so the schedule blocks instead.
    from .test_gemm_design import _most_between_waits

    d = as_device("npu2")
    op = QGEMM(M=16, K=2048, N=128256, bits=bits, group=32).resolved(d)
    lay = qgemm.layout(op, d)
    legality.check(lay, d)
    assert lay.waits
    assert _most_between_waits(lay) <= legality.TILE_LIMITS[d.arch].task_queue
