"""Tests for DecodeAttention and CausalAttention.

References are judged against a float64 oracle written here (a loop over rows
and heads) under the operator's own ``tolerance(q, k, v)``. A second fp32
evaluation in the kernel's own order (chunks, running max, sequential sums)
stands in for the device: it must also be within the tolerance of the
reference, which is what the tolerance promises. Wrong kernel models (the
weights rounded to bf16 before ``P @ V``, a missing scale, the wrong kv head,
one position too many) are caught on concrete inputs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ml_dtypes import bfloat16

import iron
from iron.core.cost import step_time
from iron.core.device import NPU1, NPU2
from iron.core.operator import Cost, DimensionConflictError
from iron.core.percall import PerCall
from iron.core.tolerance import compare
from iron.operators import matvec
from iron.operators._attention_math import attend_numpy
from iron.operators.attention import (
    FLUSH_FLOOR,
    CausalAttention,
    DecodeAttention,
    attend,
)

DEVICES = (NPU1, NPU2)

# -- oracle and stand-ins ------------------------------------------------------------


def oracle(q, k, v, limits) -> np.ndarray:
    """Exact grouped-query attention in float64: row r attends limits[r] positions."""
    rows, heads, head_dim = q.shape
    group = heads // k.shape[0]
    out = np.zeros((rows, heads, head_dim))
    for r in range(rows):
        n = int(limits[r])
        for h in range(heads):
            kv = h // group
            keys = k[kv, :n].astype(np.float64)
            s = keys @ q[r, h].astype(np.float64) / math.sqrt(head_dim)
            p = np.exp(s - s.max())
            out[r, h] = p @ v[kv, :n].astype(np.float64) / p.sum()
    return out


def chunked_fp32(q, k, v, limits, kv_tile) -> np.ndarray:
    """The kernel's order in fp32: chunks, a running max, sequential sums."""
    rows, heads, head_dim = q.shape
    group = heads // k.shape[0]
    scale = np.float32(1 / math.sqrt(head_dim))
    out = np.zeros((rows, heads, head_dim), np.float32)
    for r in range(rows):
        n = int(limits[r])
        for h in range(heads):
            kv = h // group
            qf = q[r, h].astype(np.float32)
            m, total = np.float32(-np.inf), np.float32(0)
            acc = np.zeros(head_dim, np.float32)
            for c in range(0, n, kv_tile):
                keys = k[kv, c : min(c + kv_tile, n)].astype(np.float32)
                vals = v[kv, c : min(c + kv_tile, n)].astype(np.float32)
                s = np.array([np.float32(0)] * len(keys))
                for j, key in enumerate(keys):
                    dot = np.float32(0)
                    for i in range(head_dim):
                        dot = np.float32(dot + qf[i] * key[i])
                    s[j] = np.float32(dot * scale)
                new = max(m, s.max())
                alpha = np.exp(np.float32(m - new))
                p = np.exp((s - new).astype(np.float32))
                total = np.float32(total * alpha)
                acc = (acc * alpha).astype(np.float32)
                for j in range(len(p)):
                    total = np.float32(total + p[j])
                    acc = (acc + p[j] * vals[j]).astype(np.float32)
                m = new
            out[r, h] = acc / total
    return out.astype(bfloat16)


def weights_in_bf16(q, k, v, limits) -> np.ndarray:
    """A wrong model: softmax weights rounded to bf16 before the sum and P @ V."""
    rows, heads, head_dim = q.shape
    group = heads // k.shape[0]
    out = np.zeros((rows, heads, head_dim), np.float32)
    for r in range(rows):
        n = int(limits[r])
        for h in range(heads):
            kv = h // group
            s = k[kv, :n].astype(np.float32) @ q[r, h].astype(np.float32)
            s = s * np.float32(1 / math.sqrt(head_dim))
            p = np.exp(s - s.max()).astype(bfloat16).astype(np.float32)
            out[r, h] = p @ v[kv, :n].astype(np.float32) / p.sum()
    return out.astype(bfloat16)


def decode(heads, kv_heads, head_dim, max_len, length, **tunables):
    return DecodeAttention(
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        max_len=max_len,
        length=length,
        **tunables,
    )


def causal(rows, heads, kv_heads, head_dim, max_len, start=0, **tunables):
    return CausalAttention(
        rows=rows,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        max_len=max_len,
        start=start,
        **tunables,
    )


# -- inputs -----------------------------------------------------------------------------

STYLES = ("normal", "wide", "peaked", "cancel", "subnormal", "zeros", "ties")


def make(rng, style, shape_q, shape_kv):
    """q, k, v of a style: bf16 arrays whose scores stay within fp32's range."""

    def normal(shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(bfloat16)

    def wide(shape, lo, hi):
        mag = np.exp2(rng.uniform(lo, hi, shape))
        return (mag * rng.choice([-1.0, 1.0], shape)).astype(bfloat16)

    if style == "normal":
        scale = 10.0 ** rng.uniform(-3, 1)
        return normal(shape_q, scale), normal(shape_kv), normal(shape_kv)
    if style == "wide":
        return wide(shape_q, -30, 12), wide(shape_kv, -30, 12), wide(shape_kv, -40, 20)
    if style == "peaked":
        return normal(shape_q, 30.0), normal(shape_kv, 3.0), normal(shape_kv)
    if style == "cancel":
        # Near-uniform weights over values of one magnitude and mixed signs.
        c = rng.uniform(0.5, 2.0)
        v = (c * rng.choice([-1.0, 1.0], shape_kv)).astype(bfloat16)
        return normal(shape_q, 1e-3), normal(shape_kv), v
    if style == "subnormal":
        return normal(shape_q), normal(shape_kv), wide(shape_kv, -133, -126)
    if style == "zeros":
        q = normal(shape_q) * (rng.random(shape_q) < 0.5)
        k = normal(shape_kv) * (rng.random(shape_kv) < 0.5)
        v = np.where(rng.random(shape_kv) < 0.5, -0.0, 0.0) + normal(shape_kv) * (
            rng.random(shape_kv) < 0.3
        )
        return q.astype(bfloat16), k.astype(bfloat16), v.astype(bfloat16)
    assert style == "ties"
    k = np.broadcast_to(normal(shape_kv[:1] + (1,) + shape_kv[2:]), shape_kv)
    return normal(shape_q, 4.0), np.ascontiguousarray(k), normal(shape_kv)


@st.composite
def decode_cases(draw, head_dims=(16, 32, 64), max_lens=(16, 32, 48, 128, 512)):
    kv_heads = draw(st.sampled_from([1, 2, 4]))
    group = draw(st.sampled_from([1, 2, 4]))
    head_dim = draw(st.sampled_from(head_dims))
    max_len = draw(st.sampled_from(max_lens))
    length = draw(st.integers(1, max_len))
    style = draw(st.sampled_from(STYLES))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    heads = kv_heads * group
    q, k, v = make(rng, style, (heads, head_dim), (kv_heads, max_len, head_dim))
    return decode(heads, kv_heads, head_dim, max_len, length), q, k, v


@st.composite
def causal_cases(draw):
    kv_heads = draw(st.sampled_from([1, 2]))
    group = draw(st.sampled_from([1, 2, 4]))
    head_dim = draw(st.sampled_from([16, 32]))
    max_len = draw(st.sampled_from([16, 32, 64]))
    rows = draw(st.integers(1, min(max_len, 12)))
    start = draw(st.integers(0, max_len - rows))
    style = draw(st.sampled_from(STYLES))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    heads = kv_heads * group
    q, k, v = make(rng, style, (rows, heads, head_dim), (kv_heads, max_len, head_dim))
    return causal(rows, heads, kv_heads, head_dim, max_len, start), q, k, v


# -- declarations -------------------------------------------------------------------------


def test_decode_declaration():
    d = DecodeAttention.declaration
    assert list(d.params) == [
        "heads",
        "kv_heads",
        "head_dim",
        "max_len",
        "kv_tile",
        "num_aie_columns",
        "length",
    ]
    assert d.tunables == ("kv_tile", "num_aie_columns")
    assert d.params["length"].per_call
    assert [i.name for i in d.inputs] == ["q", "k_cache", "v_cache"]
    assert d.inputs[1].dims == ("kv_heads", "max_len", "head_dim")
    assert d.outputs[0].dims == ("heads", "head_dim")


def test_causal_declaration():
    d = CausalAttention.declaration
    assert d.tunables == ("kv_tile", "num_aie_columns", "q_tile")
    assert d.params["start"].per_call and d.params["start"].default == 0
    assert d.inputs[0].dims == ("rows", "heads", "head_dim")
    assert d.outputs[0].dims == ("rows", "heads", "head_dim")


def test_decode_needs_its_length():
    with pytest.raises(TypeError, match=r"DecodeAttention needs \['length'\]"):
        DecodeAttention(heads=4, kv_heads=2, head_dim=16, max_len=64)


# -- references against the oracle ------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(decode_cases())
def test_decode_reference_holds_its_tolerance(case):
    op, q, k, v = case
    got = op.reference(q, k, v)
    assert got.shape == q.shape and got.dtype == bfloat16
    want = oracle(q[None], k, v, [op.length])[0]
    verdict = compare(got, want, op.tolerance(q, k, v))
    assert verdict, f"{verdict} for {op}"


@settings(max_examples=100, deadline=None)
@given(causal_cases())
def test_causal_reference_holds_its_tolerance(case):
    op, q, k, v = case
    got = op.reference(q, k, v)
    assert got.shape == q.shape and got.dtype == bfloat16
    limits = op.start + 1 + np.arange(op.rows)
    verdict = compare(got, oracle(q, k, v, limits), op.tolerance(q, k, v))
    assert verdict, f"{verdict} for {op}"


@settings(max_examples=40, deadline=None)
@given(decode_cases(head_dims=(16,), max_lens=(16, 32, 48)), st.sampled_from([16, 48]))
def test_kernel_order_is_within_the_tolerance_of_the_reference(case, kv_tile):
    # The device sums in its own order, in chunks with running-max rescales;
    # the tolerance promises that evaluation stays within it of the reference.
    op, q, k, v = case
    op = op.replace(kv_tile=16 if op.max_len % kv_tile else kv_tile)
    device = chunked_fp32(q[None], k, v, [op.length], op.kv_tile)[0]
    verdict = compare(device, op.reference(q, k, v), op.tolerance(q, k, v))
    assert verdict, f"{verdict} for {op}"


@pytest.mark.parametrize("style", STYLES)
def test_long_rows_hold_the_tolerance(style):
    rng = np.random.default_rng(11)
    q, k, v = make(rng, style, (8, 64), (2, 2048, 64))
    op = decode(8, 2, 64, 2048, 2000)
    want = oracle(q[None], k, v, [2000])[0]
    assert compare(op.reference(q, k, v), want, op.tolerance(q, k, v))


def test_signed_zero_values_give_zero():
    q = np.ones((2, 16), bfloat16)
    k = np.ones((1, 16, 16), bfloat16)
    v = np.full((1, 16, 16), -0.0, bfloat16)
    out = decode(2, 1, 16, 16, 5).reference(q, k, v)
    assert np.all(out == 0)


def test_positions_not_attended_are_never_read():
    rng = np.random.default_rng(3)
    q, k, v = make(rng, "normal", (4, 16), (2, 32, 16))
    k[:, 7:], v[:, 7:] = np.nan, np.inf  # stale or poisoned positions
    out = decode(4, 2, 16, 32, 7).reference(q, k, v)
    assert np.all(np.isfinite(out.astype(np.float32)))
    q2, _, _ = make(rng, "normal", (3, 4, 16), (2, 32, 16))
    out = causal(3, 4, 2, 16, 32, start=4).reference(q2, k, v)
    assert np.all(np.isfinite(out.astype(np.float32)))


def test_a_nan_in_an_attended_value_propagates():
    q = np.ones((2, 16), bfloat16)
    k = np.zeros((1, 16, 16), bfloat16)
    v = np.ones((1, 16, 16), bfloat16)
    v[0, 2, 3] = np.nan
    out = decode(2, 1, 16, 16, 4).reference(q, k, v).astype(np.float32)
    assert np.isnan(out[:, 3]).all() and np.isfinite(np.delete(out, 3, 1)).all()
    assert compare(
        out.astype(bfloat16),
        oracle(q[None], k, v, [4])[0],
        decode(2, 1, 16, 16, 4).tolerance(q, k, v),
    )


def test_grouped_query_heads_use_kv_head_h_over_group():
    # kv head 0 holds values 1, kv head 1 values 2: heads 0..2 read 1, 3..5 read 2.
    q = np.ones((6, 16), bfloat16)
    k = np.zeros((2, 16, 16), bfloat16)
    v = np.stack([np.ones((16, 16)), 2 * np.ones((16, 16))]).astype(bfloat16)
    out = decode(6, 2, 16, 16, 16).reference(q, k, v).astype(np.float32)
    assert np.all(out[:3] == 1) and np.all(out[3:] == 2)


def test_causal_rows_attend_up_to_their_own_position():
    # Values equal their position: with equal scores row i averages 0..start+i.
    q = np.zeros((4, 1, 16), bfloat16)
    k = np.zeros((1, 32, 16), bfloat16)
    v = np.broadcast_to(np.arange(32.0)[None, :, None], (1, 32, 16)).astype(bfloat16)
    out = causal(4, 1, 1, 16, 32, start=10).reference(q, k, v).astype(np.float32)
    for i in range(4):
        assert out[i, 0, 0] == pytest.approx((10 + i) / 2, rel=2**-8)


def test_decode_equals_a_causal_row():
    rng = np.random.default_rng(5)
    q, k, v = make(rng, "normal", (3, 8, 32), (4, 64, 32))
    rows = causal(3, 8, 4, 32, 64, start=20).reference(q, k, v)
    for i in range(3):
        one = decode(8, 4, 32, 64, 21 + i).reference(q[i], k, v)
        assert np.array_equal(one.view(np.uint16), rows[i].view(np.uint16))


# -- tolerances ------------------------------------------------------------------------------


def test_tolerance_is_one_ulp_or_a_derived_floor():
    rng = np.random.default_rng(0)
    q, k, v = make(rng, "normal", (32, 64), (8, 2048, 64))
    op = decode(32, 8, 64, 2048, 100)
    tol = op.tolerance(q, k, v)
    assert tol.kind == "ulps" and tol.ulps == 1 and tol.max_mismatch_frac == 0
    assert FLUSH_FLOOR < tol.atol < 2.0**-9
    assert "4E" in tol.note and "fp32_error_bound" in tol.note
    # Without inputs: the bound for elements in [-1, 1], still a derivation.
    plain = op.tolerance()
    assert plain.kind == "ulps" and "|q|, |k|, |v| <= 1" in plain.note
    assert plain.atol < 2.0**-7


def test_tolerance_grows_with_the_scores_it_cannot_resolve():
    rng = np.random.default_rng(1)
    q, k, v = make(rng, "normal", (4, 16), (1, 64, 16))
    op = decode(4, 1, 16, 64, 64)
    small = op.tolerance(q, k, v).atol
    big = op.tolerance((q.astype(np.float32) * 2**10).astype(bfloat16), k, v).atol
    assert big > 100 * small


def test_tolerance_of_a_per_call_length_needs_binding():
    op = decode(4, 2, 16, 64, PerCall("n"))
    q = np.zeros((4, 16), bfloat16)
    k = np.zeros((2, 64, 16), bfloat16)
    with pytest.raises(ValueError, match="bind it first"):
        op.tolerance(q, k, k)
    assert op.bind({"n": 3}).tolerance(q, k, k).kind == "ulps"


# -- a wrong kernel model is caught -------------------------------------------------------------


def two_position_case():
    """Scores (0, -0.3); values (0.7421875, -1): the result cancels to ~7.9e-4."""
    q = np.zeros((1, 16), bfloat16)
    q[0, 0] = 1.0
    k = np.zeros((1, 16, 16), bfloat16)
    k[0, 1, 0] = -1.203125  # s1 = -1.203125 / 4 = -0.30078125
    v = np.zeros((1, 16, 16), bfloat16)
    v[0, 0, :], v[0, 1, :] = 0.7421875, -1.0
    return q, k, v


def test_weights_rounded_to_bf16_are_caught():
    q, k, v = two_position_case()
    op = decode(1, 1, 16, 16, 2)
    want = oracle(q[None], k, v, [2])[0]
    tol = op.tolerance(q, k, v)
    assert compare(op.reference(q, k, v), want, tol)
    wrong = weights_in_bf16(q[None], k, v, [2])[0]
    verdict = compare(wrong, want, tol)
    assert not verdict
    assert verdict.n_mismatch == 16 and verdict.max_ulp_err > 8


def test_a_missing_scale_is_caught():
    rng = np.random.default_rng(2)
    q, k, v = make(rng, "normal", (4, 16), (2, 32, 16))
    op = decode(4, 2, 16, 32, 32)
    want = oracle(q[None], k, v, [32])[0]
    unscaled = oracle((q.astype(np.float64) * 4)[None], k, v, [32])[0]
    assert not compare(unscaled.astype(bfloat16), want, op.tolerance(q, k, v))


def test_the_wrong_kv_head_is_caught():
    rng = np.random.default_rng(3)
    q, k, v = make(rng, "normal", (4, 16), (2, 32, 16))
    op = decode(4, 2, 16, 32, 32)
    want = oracle(q[None], k, v, [32])[0]
    # h % kv_heads instead of h // group: heads 1 and 2 swap kv heads.
    swapped = attend(q[None][:, [0, 2, 1, 3]], k, v, np.array([32]))[0][[0, 2, 1, 3]]
    assert not compare(swapped, want, op.tolerance(q, k, v))


def test_one_position_too_many_is_caught():
    rng = np.random.default_rng(4)
    q, k, v = make(rng, "normal", (4, 16), (2, 32, 16))
    op = decode(4, 2, 16, 32, 9)
    want = oracle(q[None], k, v, [9])[0]
    assert not compare(
        op.replace(length=10).reference(q, k, v), want, op.tolerance(q, k, v)
    )


# -- resolve and check ---------------------------------------------------------------------------

SHAPES = [
    # heads, kv_heads, head_dim, max_len
    (32, 8, 64, 2048),  # Llama 3.2 1B
    (24, 8, 128, 4096),  # Llama 3.2 3B
    (32, 8, 128, 8160),
    (12, 12, 64, 1024),  # multi-head
    (4, 2, 16, 64),
    (8, 1, 32, 16),
    (16, 4, 256, 512),
    (40, 8, 128, 16 * 255),
    # issue 34: long contexts, more chunks than a DMA repeat count (255)
    (32, 8, 64, 32768),  # Llama 3.2 1B at 32k
    (32, 8, 128, 32768),  # Llama 3.1 8B at 32k
    (24, 8, 128, 131072),  # Llama 3.2 3B at 128k
]


def assert_legal(op, dev):
    assert op.open_tunables() == ()
    assert op.num_aie_columns <= dev.columns and op.kv_heads % op.num_aie_columns == 0
    assert op.max_len % op.kv_tile == 0 and op.kv_tile % 16 == 0
    q_tile = getattr(op, "q_tile", 1)
    assert op.core_bytes(q_tile, op.kv_tile) <= dev.core_memory_bytes
    op.check(dev)


@pytest.mark.parametrize("dev", DEVICES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_resolve_gives_legal_tunables(shape, dev):
    heads, kv_heads, head_dim, max_len = shape
    assert_legal(decode(*shape, length=1).resolved(dev), dev)
    for rows in {min(r, max_len) for r in (1, 7, 64, 256)}:
        op = causal(rows, heads, kv_heads, head_dim, max_len).resolved(dev)
        assert_legal(op, dev)
        assert rows % op.q_tile == 0


@settings(max_examples=200, deadline=None)
@given(
    kv_heads=st.sampled_from([1, 2, 3, 4, 8]),
    group=st.integers(1, 8),
    head_dim=st.sampled_from([16, 32, 48, 64, 80, 128]),
    chunks=st.integers(1, 255),
    rows=st.integers(1, 300),
    dev=st.sampled_from(DEVICES),
)
def test_resolve_is_legal_across_shapes(kv_heads, group, head_dim, chunks, rows, dev):
    max_len = 16 * chunks
    heads = kv_heads * group
    assert_legal(decode(heads, kv_heads, head_dim, max_len, 1).resolved(dev), dev)
    op = causal(min(rows, max_len), heads, kv_heads, head_dim, max_len)
    assert_legal(op.resolved(dev), dev)


@pytest.mark.parametrize(
    "shape, dev, tunables",
    [
        ((32, 8, 64, 2048), NPU1, {"num_aie_columns": 4, "kv_tile": 64}),
        ((32, 8, 64, 2048), NPU2, {"num_aie_columns": 8, "kv_tile": 64}),
        ((24, 8, 128, 4096), NPU2, {"num_aie_columns": 8, "kv_tile": 32}),
        # kv_tile 128 at head_dim 64: K and V chunks alone are 4 * 128 * 64 * 2
        # = 64 KiB, a whole core.
        ((12, 12, 64, 1024), NPU1, {"num_aie_columns": 4, "kv_tile": 64}),
        ((8, 1, 32, 16), NPU2, {"num_aie_columns": 1, "kv_tile": 16}),
    ],
    ids=str,
)
def test_resolve_picks(shape, dev, tunables):
    assert decode(*shape, length=1).resolve(dev) == tunables


def test_resolve_keeps_pinned_tunables():
    op = causal(64, 32, 8, 64, 2048, kv_tile=32).resolved(NPU2)
    assert op.kv_tile == 32 and op.pinned == frozenset({"kv_tile"})
    assert op.core_bytes(op.q_tile, 32) <= NPU2.core_memory_bytes


def test_reference_refuses_a_length_outside_the_cache():
    q = np.zeros((4, 16), bfloat16)
    k = np.zeros((2, 32, 16), bfloat16)
    with pytest.raises(
        ValueError, match=r"length=0 this call is outside \[1, max_len=32\]"
    ):
        decode(4, 2, 16, 32, 0).reference(q, k, k)
    with pytest.raises(ValueError, match="reaches position 32, outside"):
        causal(4, 4, 2, 16, 32, start=29).reference(
            np.zeros((4, 4, 16), bfloat16), k, k
        )


# -- cost --------------------------------------------------------------------------------------


def _work(cost: Cost) -> tuple[int, int]:
    """A cost's MACs and bytes: what the shape alone fixes."""
    return cost.macs, cost.bytes


def test_decode_cost_by_hand():
    op = decode(32, 8, 64, 2048, 100, kv_tile=64)
    # q . k and p . v over 100 positions for 32 heads of 64: 2 * 32 * 100 * 64.
    # K and V stream 2 chunks of 64 positions for each of 8 kv heads, bf16;
    # q in and the result out: 2 * 32 * 64 bf16.
    assert _work(op.cost(NPU2)) == (409600, 2 * 8 * 128 * 64 * 2 + 2 * 32 * 64 * 2)
    # A per-call length is costed at max_len.
    per_call = decode(32, 8, 64, 2048, PerCall("n"), kv_tile=64)
    assert _work(per_call.cost(NPU1)) == (
        2 * 32 * 2048 * 64,
        2 * 8 * 2048 * 64 * 2 + 8192,
    )


def test_causal_cost_by_hand():
    op = causal(4, 8, 2, 16, 64, start=10, kv_tile=16, q_tile=4)
    # Rows attend 11, 12, 13, 14 positions: 50; 2 * 8 heads * 50 * 16.
    # Positions 0..13 stream as one chunk of 16; q and out are 4 * 8 * 16 bf16.
    assert _work(op.cost(NPU2)) == (
        2 * 8 * 50 * 16,
        2 * 2 * 16 * 16 * 2 + 2 * 4 * 8 * 16 * 2,
    )


def _tiling(cost: Cost) -> tuple[int, int, int, int]:
    """How a cost is spread: columns, cores, calls per core, bytes re-read."""
    return cost.columns, cost.cores, cost.calls, cost.reread_bytes


@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_decode_cost_follows_the_chunking(dev):
    op = decode(32, 8, 64, 2048, PerCall("n"), kv_tile=32, num_aie_columns=4)
    # Two kv heads a column's core, 2048 / 32 = 64 chunks each.
    assert _tiling(op.cost(dev)) == (4, 4, 128, 0)

    def seconds(**tunables):
        return step_time(decode(32, 8, 64, 2048, PerCall("n"), **tunables), dev).seconds

    base = seconds(kv_tile=32, num_aie_columns=2)
    assert seconds(kv_tile=64, num_aie_columns=2) < base  # fewer chunks
    assert seconds(kv_tile=32, num_aie_columns=4) < base  # more columns


@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_causal_cost_rereads_the_cache_for_each_query_tile(dev):
    # 16 rows from start 112 in query tiles of 4: the tiles end at 116, 120,
    # 124 and 128, streaming 128 positions each in chunks of 64 (2 chunks).
    op = causal(16, 8, 2, 64, 256, start=112, kv_tile=64, q_tile=4, num_aie_columns=2)
    per_position = 2 * 2 * 64 * 2
    assert _tiling(op.cost(dev)) == (2, 2, 4 * 2, 3 * 128 * per_position)
    whole = causal(
        16, 8, 2, 64, 256, start=112, kv_tile=64, q_tile=16, num_aie_columns=2
    )
    assert _tiling(whole.cost(dev)) == (2, 2, 2, 0)
    assert _work(whole.cost(dev)) == _work(op.cost(dev))
    assert step_time(whole, dev).seconds < step_time(op, dev).seconds


# -- in a graph ------------------------------------------------------------------------------------


class Decode(iron.Graph):
    def body(self, q, k, v, *, length: iron.Scratchpad[int]):
        return DecodeAttention.step(q, k, v, length=length)


class Prefill(iron.Graph):
    def body(self, q, k, v, *, n: iron.Scratchpad[int], start: iron.Scratchpad[int]):
        return CausalAttention.step(q[:n], k, v, start=start)


def test_decode_in_a_graph():
    rng = np.random.default_rng(8)
    q, k, v = make(rng, "normal", (8, 32), (2, 64, 32))
    graph = Decode()
    with iron.use_device("npu2"):
        recording = graph.record(q=(8, 32), k=(2, 64, 32), v=(2, 64, 32))
        (step,) = recording.steps
        op = step.op
        assert (op.heads, op.kv_heads, op.head_dim, op.max_len) == (8, 2, 32, 64)
        assert_legal(op, NPU2)
        for length in (1, 17, 64):
            got = graph.reference(q, k, v, length=length)
            want = op.bind({"length": length}).reference(q, k, v)
            assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
            assert compare(
                got,
                oracle(q[None], k, v, [length])[0],
                op.bind({"length": length}).tolerance(q, k, v),
            )
        with pytest.raises(ValueError, match="length=0 this call"):
            graph.reference(q, k, v, length=0)


def test_causal_in_a_graph_with_bounded_rows():
    rng = np.random.default_rng(9)
    q, k, v = make(rng, "normal", (16, 4, 16), (2, 64, 16))
    graph = Prefill()
    with iron.use_device("npu2"):
        recording = graph.record(q=(16, 4, 16), k=(2, 64, 16), v=(2, 64, 16))
        (step,) = recording.steps
        (out,) = step.outputs
        assert out.shape == (16, 4, 16) and set(out.valid) == {0}
        assert step.op.rows == 16
        got = graph.reference(q, k, v, n=5, start=30)
    assert got.shape == (5, 4, 16)
    want = step.op.bind({"start": 30}).reference(q[:5], k, v)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
    assert compare(
        got,
        oracle(q[:5], k, v, 31 + np.arange(5)),
        step.op.bind({"start": 30}).tolerance(q[:5], k, v),
    )


def test_dimension_conflicts_name_both_sources():
    with iron.use_device("npu2"):
        with pytest.raises(DimensionConflictError) as info:
            Decode().record(q=(8, 32), k=(2, 64, 16), v=(2, 64, 16))
        assert "head_dim is 32 from q.shape[1] but 16 from k_cache.shape[2]" in str(
            info.value
        )
        with pytest.raises(DimensionConflictError, match="max_len is 64 from k_cache"):
            Decode().record(q=(8, 16), k=(2, 64, 16), v=(2, 32, 16))


def _attend_head_by_head(q, k, v, limits):
    """The kernel model as it was written first: one key-value head and 32
    rows at a time, every mask applied (attend must give these bits)."""
    rows, heads, head_dim = q.shape
    kv_heads = k.shape[0]
    group = heads // kv_heads
    end = int(limits.max()) if rows else 0
    scale = np.float32(1.0 / math.sqrt(head_dim))
    qf = q.astype(np.float32).reshape(rows, kv_heads, group, head_dim)
    kf = k[:, :end].astype(np.float32)
    vf = v[:, :end].astype(np.float32)
    out = np.empty((rows, kv_heads, group, head_dim), np.float32)
    attended = np.arange(end)[None, :] < limits[:, None]
    with np.errstate(all="ignore"):
        for g in range(kv_heads):
            for r in range(0, rows, 32):
                mask = attended[r : r + 32]
                scores = np.matmul(qf[r : r + 32, g], kf[g].T) * scale
                scores = np.where(mask[:, None, :], scores, np.float32(-np.inf))
                top = scores.max(axis=-1, keepdims=True)
                weights = np.exp(scores - top)
                weights = np.where(mask[:, None, :], weights, np.float32(0))
                total = weights.sum(axis=-1, keepdims=True, dtype=np.float32)
                values = np.where(mask[:, :, None], vf[g][None], np.float32(0))
                acc = np.matmul(weights, values)
                out[r : r + 32, g] = acc / total
    return out.reshape(rows, heads, head_dim).astype(bfloat16)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([(1, 1), (4, 1), (9, 3), (32, 8), (4, 4)]),
    st.sampled_from([1, 2, 5, 33, 70]),
    st.sampled_from([8, 64]),
    st.integers(1, 300),
    st.booleans(),
    st.integers(0, 2**32 - 1),
)
def test_all_heads_at_once_give_the_bits_of_one_head_at_a_time(
    heads, rows, head_dim, positions, causal, seed
):
    """Figure 4's decode (one row, 9/3 and 32/8 heads) and prompt chunks:
    the heads batched into one call per product are the same bits as the
    head-by-head loop, masks skipped or not, NaNs past the limits unread."""
    n_heads, kv_heads = heads
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((rows, n_heads, head_dim)) * 3).astype(bfloat16)
    k = (rng.standard_normal((kv_heads, positions + 4, head_dim)) * 3).astype(bfloat16)
    v = rng.standard_normal((kv_heads, positions + 4, head_dim)).astype(bfloat16)
    if causal:
        limits = np.minimum(positions - rows + 1 + np.arange(rows), positions)
        limits = np.maximum(limits, 1)
    else:
        limits = np.full(rows, positions)
    k[:, int(limits.max()) :] = np.nan  # past every limit: never read
    v[:, int(limits.max()) :] = np.nan
    got = attend_numpy(q, k, v, limits)
    want = _attend_head_by_head(q, k, v, limits)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


# -- batch invariance: a prompt row is the decode step at its position ----------------


@pytest.mark.skipif(
    not matvec.available(), reason="the jit extra (numba) is not installed"
)
@settings(max_examples=30, deadline=None)
@given(
    heads=st.sampled_from([(1, 1), (4, 2), (6, 2), (8, 1)]),
    head_dim=st.sampled_from([16, 32, 64]),
    start=st.integers(0, 40),
    rows=st.integers(1, 17),
    scale=st.sampled_from([0.1, 1.0, 8.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_chunk_row_has_the_bits_of_the_decode_step_at_its_position(
    heads, head_dim, start, rows, scale, seed
):
    """CausalAttention's row i, in a chunk of any size from any start, equals
    DecodeAttention at length start + i + 1, bit for bit; and within the
    tolerance of the numpy evaluation."""
    n_heads, kv_heads = heads
    rng = np.random.default_rng(seed)
    max_len = start + rows + 3
    q = (rng.standard_normal((rows, n_heads, head_dim)) * scale).astype(bfloat16)
    k = (rng.standard_normal((kv_heads, max_len, head_dim)) * scale).astype(bfloat16)
    v = rng.standard_normal((kv_heads, max_len, head_dim)).astype(bfloat16)
    k[:, start + rows :] = np.nan  # past every row's positions: never read
    causal = CausalAttention(
        heads=n_heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        max_len=max_len,
        rows=rows,
        start=start,
    )
    chunk = causal.reference(q, k, v)
    for i in range(rows):
        step = DecodeAttention(
            heads=n_heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            max_len=max_len,
            length=start + i + 1,
        )
        alone = step.reference(q[i], k, v)
        np.testing.assert_array_equal(chunk[i].view(np.uint16), alone.view(np.uint16))
    assert compare(
        chunk,
        attend_numpy(q, k, v, start + 1 + np.arange(rows)),
        causal.tolerance(q, k, v),
    )


@pytest.mark.parametrize("dev", [NPU1, NPU2], ids=["npu1", "npu2"])
def test_resolve_keeps_a_columns_cache_streams_within_the_shim_task_queue(dev):
    """Issue 28 (review 2, C3): a column streams each of its kv heads once a
    query tile, one push each onto a 4-deep shim queue. Llama-1B's prompt on
    npu1 (2 kv heads a column, 16 rows) resolved kv_tile=64, q_tile=4: 8
    streams, and the hardware drops pushes past the queue. Of the equally large
    kernel calls, resolve now takes one whose streams fit."""
    r = causal(16, 32, 8, 64, 2048, start=PerCall("position")).resolved(dev)
    streams = (r.kv_heads // r.num_aie_columns) * (r.rows // r.q_tile)
    assert streams <= 4, (r.kv_tile, r.q_tile, r.num_aie_columns)
    assert r.q_tile * r.kv_tile == 256  # no smaller a kernel call than before
