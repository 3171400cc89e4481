"""Tests for Dequant: int4 (low nibble first, two's complement) times a bf16 scale.

The oracle decodes each nibble with Python integers and multiplies in
float64, which is exact; ``compare`` under the exact tolerance rounds it
once, correctly, to bf16, so the reference must be the correctly rounded
product. Wrong packings (high nibble first, unsigned or offset-binary
nibbles, a group of 16) and a truncating conversion are caught.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ml_dtypes import bfloat16

import iron
from iron.core import context
from iron.core.cost import step_time
from iron.core.device import NPU1, NPU2
from iron.core.operator import Cost, DimensionConflictError
from iron.core.tolerance import compare
from iron.operators.dequant import GROUP, Dequant, unpack_int4

DEVICES = (NPU1, NPU2)


def oracle(packed, scales) -> np.ndarray:
    """Exact values in float64, decoded one byte at a time."""
    out = []
    for byte in (int(b) for b in packed):
        for nibble in (byte & 0xF, byte >> 4):  # low nibble first
            value = nibble - 16 if nibble >= 8 else nibble  # two's complement
            scale = float(scales[len(out) // GROUP])  # this element's group
            out.append(value * scale)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.array(out, dtype=np.float64)


def bf16(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint16).view(bfloat16)


scale_bits = st.one_of(
    st.integers(0, 0xFFFF),  # everything, NaN and infinities included
    st.integers(0x3000, 0x4000),  # ordinary scales
    st.integers(0x0001, 0x007F),  # subnormal scales
    st.integers(0x7F00, 0x7F7F),  # near the largest finite value
    st.sampled_from([0x0000, 0x8000, 0x3F80, 0x3F81, 0x7F7F, 0x0080]),
)


@st.composite
def packed_cases(draw):
    groups = draw(st.integers(1, 8))
    packed = np.array(
        draw(st.lists(st.integers(0, 255), min_size=16 * groups, max_size=16 * groups)),
        np.uint8,
    )
    scales = bf16(draw(st.lists(scale_bits, min_size=groups, max_size=groups)))
    return packed, scales


# -- the packing --------------------------------------------------------------------------


def test_low_nibble_first_and_twos_complement():
    packed = np.array([0x21, 0xF8, 0x7F, 0x80], np.uint8)
    assert unpack_int4(packed).tolist() == [1, 2, -8, -1, -1, 7, 0, -8]


def test_every_byte_decodes():
    packed = np.arange(256, dtype=np.uint8)
    values = unpack_int4(packed)
    assert values.min() == -8 and values.max() == 7
    lows, highs = values[0::2], values[1::2]
    assert np.array_equal(lows, [(b & 15) - 16 * ((b & 15) >= 8) for b in range(256)])
    assert np.array_equal(highs, [(b >> 4) - 16 * ((b >> 4) >= 8) for b in range(256)])


def test_declaration():
    d = Dequant.declaration
    assert d.tunables == ("tile_size", "num_aie_columns")
    assert [(i.name, np.dtype(i.dtype)) for i in d.inputs] == [
        ("packed", np.dtype(np.uint8)),
        ("scales", np.dtype(bfloat16)),
    ]
    op = Dequant(N=128)
    assert (op.packed_bytes, op.groups) == (64, 4)
    assert op.output_dtypes([np.dtype(np.uint8), np.dtype(bfloat16)]) == [
        np.dtype(bfloat16)
    ]


# -- reference against the oracle ---------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(packed_cases())
def test_reference_is_the_correctly_rounded_product(case):
    packed, scales = case
    op = Dequant(N=2 * packed.size)
    got = op.reference(packed, scales)
    assert got.dtype == bfloat16 and got.shape == (op.N,)
    verdict = compare(got, oracle(packed, scales), op.tolerance())
    assert verdict, f"{verdict} for scales {scales!r}"


def test_products_that_need_rounding():
    # 7 * 1.0078125 = 7.0546875 needs 11 bits; bf16 rounds it to 7.0625.
    packed = np.full(16, 0x77, np.uint8)
    scales = np.array([1.0078125], bfloat16)
    got = Dequant(N=32).reference(packed, scales)
    assert np.all(got == 7.0625)


def test_overflow_subnormal_and_special_scales():
    packed = np.tile(np.array([0x87], np.uint8), 16 * 4)  # 7 and -8
    scales = bf16([0x7F7F, 0x0001, 0x7FC0, 0x7F80])  # max, tiniest, NaN, inf
    got = Dequant(N=256).reference(packed, scales).astype(np.float32)
    assert np.isinf(got[:32:2]).all() and np.isinf(got[1:32:2]).all()  # +-8 * max
    assert got[32] == 7 * 2.0**-133 and got[33] == -8 * 2.0**-133
    assert np.isnan(got[64:96]).all()
    assert np.isposinf(got[96]) and np.isneginf(got[97])
    assert compare(
        got.astype(bfloat16), oracle(packed, scales), Dequant(N=256).tolerance()
    )


# -- wrong kernel models are caught ----------------------------------------------------------


def wrong(packed, scales, *, order="low", signed="twos", group=GROUP, truncate=False):
    b = packed.astype(np.int64)
    lo, hi = b & 15, b >> 4
    pairs = (lo, hi) if order == "low" else (hi, lo)
    q = np.stack(pairs, axis=-1).reshape(-1)
    if signed == "twos":
        q = np.where(q >= 8, q - 16, q)
    elif signed == "offset":
        q = q - 8
    s = np.resize(np.repeat(scales.astype(np.float32), group), q.size)
    product = q.astype(np.float32) * s
    if truncate:
        return (product.view(np.uint32) & 0xFFFF0000).view(np.float32).astype(bfloat16)
    return product.astype(bfloat16)


@pytest.mark.parametrize(
    "model",
    [
        {"order": "high"},
        {"signed": "unsigned"},
        {"signed": "offset"},
        {"group": 16},
        {"truncate": True},
    ],
    ids=str,
)
def test_wrong_models_are_caught(model):
    rng = np.random.default_rng(0)
    packed = rng.integers(0, 256, 64, dtype=np.uint8)
    scales = np.array([1.0078125, 0.0029296875, -3.015625, 0.5], bfloat16)
    want = oracle(packed, scales)
    tolerance = Dequant(N=128).tolerance()
    assert tolerance.kind == "exact" and "correctly" in tolerance.note
    assert compare(Dequant(N=128).reference(packed, scales), want, tolerance)
    assert not compare(wrong(packed, scales, **model), want, tolerance)


# -- resolve and check ----------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 4096).map(lambda k: 64 * k), dev=st.sampled_from(DEVICES))
def test_resolve_gives_legal_tunables(n, dev):
    op = Dequant(N=n).resolved(dev)
    assert op.num_aie_columns <= dev.columns
    assert op.tile_size % 64 == 0 and n % (op.tile_size * op.num_aie_columns) == 0
    assert op.core_bytes(op.tile_size) <= dev.core_memory_bytes


@pytest.mark.parametrize(
    "n, dev, tunables",
    [
        (2048 * 8192, NPU2, {"num_aie_columns": 8, "tile_size": 4096}),
        (2048, NPU1, {"num_aie_columns": 4, "tile_size": 512}),
        (64, NPU2, {"num_aie_columns": 1, "tile_size": 64}),
        (192, NPU2, {"num_aie_columns": 1, "tile_size": 64}),
    ],
    ids=str,
)
def test_resolve_picks(n, dev, tunables):
    assert Dequant(N=n).resolve(dev) == tunables


def test_a_pinned_shape_the_device_refuses_still_runs_on_the_host():
    token = context.device_fit.set(False)
    try:
        op = Dequant(N=16384, tile_size=16384, num_aie_columns=1).resolved("npu2")
    finally:
        context.device_fit.reset(token)
    packed = np.full(8192, 0x11, np.uint8)
    scales = np.ones(512, bfloat16)
    assert np.all(op.reference(packed, scales) == 1)


# -- cost ----------------------------------------------------------------------------------------


def _tiling(cost: Cost) -> tuple[int, int, int, int]:
    """How a cost is spread: columns, cores, calls per core, bytes re-read."""
    return cost.columns, cost.cores, cost.calls, cost.reread_bytes


@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_cost_follows_the_tiling(dev):
    op = Dequant(N=1 << 16, tile_size=1024, num_aie_columns=2)
    assert _tiling(op.cost(dev)) == (2, 2, 32, 0)
    assert (
        step_time(op.replace(tile_size=4096), dev).seconds < step_time(op, dev).seconds
    )
    assert (
        step_time(op.replace(num_aie_columns=4), dev).seconds
        < step_time(op, dev).seconds
    )


# -- in a graph ------------------------------------------------------------------------------------


class Weights(iron.Graph):
    def body(self, packed, scales):
        return Dequant.step(packed, scales)


def test_in_a_graph_the_size_is_read_off_the_bytes():
    rng = np.random.default_rng(1)
    packed = rng.integers(0, 256, 512, dtype=np.uint8)
    scales = rng.standard_normal(32).astype(bfloat16)
    graph = Weights()
    with iron.use_device("npu2"):
        recording = graph.record(packed=((512,), np.uint8), scales=(32,))
        got = graph.reference(packed, scales)
    op = recording.steps[0].op
    assert (op.N, op.packed_bytes, op.groups) == (1024, 512, 32)
    assert recording.steps[0].outputs[0].dtype == bfloat16
    assert np.array_equal(
        got.view(np.uint16), op.reference(packed, scales).view(np.uint16)
    )
    assert compare(got, oracle(packed, scales), op.tolerance())


def test_dimension_conflicts_name_both_sources():
    with iron.use_device("npu2"):
        with pytest.raises(DimensionConflictError) as info:
            Weights().record(packed=((512,), np.uint8), scales=(31,))
        assert str(info.value) == (
            "Dequant: groups is 32 from packed.shape[0] * 2 / 32 but 31 from "
            "scales.shape[0]"
        )
        with pytest.raises(TypeError, match="Dequant.packed takes uint8"):
            Weights().record(packed=((512,), np.int8), scales=(32,))
        with pytest.raises(ValueError, match=r"packed has shape \[16, 32\]"):
            Weights().record(packed=((16, 32), np.uint8), scales=(32,))
