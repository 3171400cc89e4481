"""Tests for RoPE and rope_table: references, tolerance, the table's formula, tiling, graphs.

The operator's reference is judged against a float64 oracle of the rotation
of the given bf16 ``x`` and table. ``rope_table`` is judged against an
independent float64 computation of Hugging Face's formula (default, linear
and llama3 scaling) within a bound derived from its float32 steps.
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
from iron.core.declare import Divisors, Input, Output
from iron.core.device import NPU1, NPU2
from iron.core.operator import Cost, DimensionConflictError
from iron.core.tolerance import compare
from iron.operators.norms import STACK_BYTES
from iron.operators.rope import RoPE, rope_inv_freq, rope_table

DEVICES = (NPU1, NPU2)
SIGN = 0x8000
U = 2.0**-24
LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


def bf16(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).astype(np.float32).astype(bfloat16)


def from_bits(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint16).view(bfloat16)


def signed(magnitude):
    return st.tuples(st.booleans(), magnitude).map(lambda t: t[1] | (SIGN * t[0]))


x_elements = st.one_of(
    st.integers(0, 0xFFFF),  # NaNs and infinities included
    signed(st.sampled_from((0x0000, 0x0001, 0x0080, 0x3F80, 0x7F7F, 0x7F80))),
    signed(st.integers(0x0000, 0x06FF)),  # subnormals
    signed(st.integers(0x7A00, 0x7F7F)),  # huge
    signed(st.integers(0x3000, 0x4FFF)),  # moderate
)
# cos and sin values: |v| <= 1, subnormals and zeros included.
table_elements = st.one_of(
    signed(st.integers(0x0000, 0x3F80)),
    signed(st.sampled_from((0x0000, 0x0001, 0x3F80, 0x3F7F, 0x3F00))),
)


@st.composite
def rope_cases(draw):
    rows = draw(st.integers(1, 3))
    heads = draw(st.integers(1, 3))
    head_dim = draw(st.sampled_from((2, 4, 8, 32, 64)))
    n = rows * heads * head_dim
    x = from_bits(draw(st.lists(x_elements, min_size=n, max_size=n)))
    if draw(st.booleans()):
        table = from_bits(
            draw(
                st.lists(
                    table_elements, min_size=rows * head_dim, max_size=rows * head_dim
                )
            )
        ).reshape(rows, head_dim)
    else:
        start = draw(st.integers(0, 100_000))
        table = rope_table(start + rows, head_dim)[start:]
    method = draw(st.sampled_from(("half", "interleaved")))
    return x.reshape(rows, heads, head_dim), table, method


# -- oracles --------------------------------------------------------------------------


def rotate_oracle(x, table, method="half"):
    """The exact rotation of bf16 ``x`` by the bf16 table's rows, in float64."""
    with np.errstate(invalid="ignore"):
        x = x.astype(np.float64)
    n, _, d = x.shape
    t = table[:n].astype(np.float64)[:, None, :]
    cos, sin = t[..., : d // 2], t[..., d // 2 :]
    out = np.empty_like(x)
    with np.errstate(all="ignore"):
        if method == "half":
            a, b = x[..., : d // 2], x[..., d // 2 :]
            out[..., : d // 2] = a * cos - b * sin
            out[..., d // 2 :] = b * cos + a * sin
        else:
            a, b = x[..., 0::2], x[..., 1::2]
            out[..., 0::2] = a * cos - b * sin
            out[..., 1::2] = b * cos + a * sin
    return out


def scaling_type(scaling):
    scaling = scaling or {}
    return scaling.get("rope_type", scaling.get("type", "default"))


def inv_freq_oracle(head_dim, theta, scaling=None):
    """Hugging Face's inverse frequencies, element by element in float64."""
    inv = [theta ** (-(2 * i) / head_dim) for i in range(head_dim // 2)]
    kind = scaling_type(scaling)
    if kind == "default":
        return np.array(inv)
    if kind == "linear":
        return np.array(inv) / scaling["factor"]
    factor = scaling["factor"]
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    out = []
    for f in inv:
        wavelength = 2 * math.pi / f
        if wavelength < old / high:
            out.append(f)
        elif wavelength > old / low:
            out.append(f / factor)
        else:
            s = (old / wavelength - low) / (high - low)
            out.append((1 - s) * f / factor + s * f)
    return np.array(out)


def inv_freq_error_units(head_dim, theta, scaling=None):
    """A bound, per frequency, on rope_inv_freq's relative error in units of 2**-24.

    Default: the exponent 2i/d rounds (relative 1 unit, scaled by ln theta
    through the power), the float32 power (2 units) and reciprocal (1), plus
    1 unit of slack: ln(theta) + 4. Linear adds one division. Llama3's middle
    band: the wavelength (+2), the smoothing factor ``s`` off by at most
    ``high / (high - low) (k + 3) + 3`` units, which the blend
    ``(1 - s) / factor + s`` (at least ``1 / factor``) magnifies by at most
    ``factor - 1``, plus 4 roundings.
    """
    k = math.log(theta) + 4
    units = np.full(head_dim // 2, k)
    kind = scaling_type(scaling)
    if kind == "linear":
        return units + 1
    if kind == "llama3":
        factor = scaling["factor"]
        low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        ds = high / (high - low) * (k + 3) + 3
        middle = k + 4 + (factor - 1) * ds
        inv = inv_freq_oracle(head_dim, theta)
        wavelength = 2 * math.pi / inv
        near = (wavelength >= old / high * (1 - 1e-5)) & (
            wavelength <= old / low * (1 + 1e-5)
        )
        units = np.where(near, middle, k + 1)
    return units


# -- declaration --------------------------------------------------------------------------


def test_declaration():
    d = RoPE.declaration
    assert d.dimensions == ("rows", "heads", "head_dim", "method")
    assert d.tunables == ("heads_per_tile", "num_aie_columns")
    assert d.params["heads_per_tile"].domain == Divisors("heads")
    assert d.params["method"].default == "half"
    assert d.inputs == (
        Input("x", "rows", "heads", "head_dim"),
        Input("table", "rows", "head_dim"),
    )
    assert d.outputs == (Output("out", "rows", "heads", "head_dim"),)


def test_an_unknown_method_is_refused_on_construction():
    with pytest.raises(
        ValueError, match=r"RoPE.method='neox' is not one of 'half', 'interleaved'"
    ):
        RoPE(rows=1, heads=1, head_dim=64, method="neox")


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_tolerance_is_one_ulp_derived(dev):
    tolerance = RoPE(rows=1, heads=8, head_dim=128).resolved(dev).tolerance()
    assert (tolerance.kind, tolerance.ulps, tolerance.atol) == ("ulps", 1, 2.0**-126)
    assert "exact in fp32" in tolerance.note and "0.05" in tolerance.note


# -- the reference against the oracle -----------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(rope_cases())
def test_reference_holds_its_tolerance(case):
    x, table, method = case
    op = RoPE(rows=x.shape[0], heads=x.shape[1], head_dim=x.shape[2], method=method)
    got = op.reference(x, table)
    assert got.dtype == bfloat16 and got.shape == x.shape
    verdict = compare(got, rotate_oracle(x, table, method), op.tolerance())
    assert verdict, f"{verdict} for x={x!r}, table={table!r}, method={method}"


@pytest.mark.parametrize("method", ["half", "interleaved"])
def test_reference_rotates_by_hand(method):
    # One pair, rotated by 90 degrees: (a, b) -> (-b, a).
    x = bf16([[[1.5, -2.0]]])
    table = bf16([[0.0, 1.0]])  # cos 0, sin 1
    got = RoPE(rows=1, heads=1, head_dim=2, method=method).reference(x, table)
    assert got.astype(np.float32).tolist() == [[[2.0, 1.5]]]


def test_the_two_methods_pair_different_elements():
    x = bf16(np.arange(8, dtype=np.float64).reshape(1, 1, 8))
    table = bf16([[0.0] * 4 + [1.0] * 4])  # every angle 90 degrees
    half = RoPE(rows=1, heads=1, head_dim=8).reference(x, table)
    inter = RoPE(rows=1, heads=1, head_dim=8, method="interleaved").reference(x, table)
    assert half.astype(np.float32).ravel().tolist() == [-4, -5, -6, -7, 0, 1, 2, 3]
    assert inter.astype(np.float32).ravel().tolist() == [-1, 0, -3, 2, -5, 4, -7, 6]


def test_a_longer_table_serves_its_first_rows():
    rng = np.random.default_rng(0)
    x = bf16(rng.standard_normal((2, 4, 64)))
    table = rope_table(10, 64)
    op = RoPE(rows=2, heads=4, head_dim=64)
    np.testing.assert_array_equal(
        op.reference(x, table).view(np.uint16),
        op.reference(x, table[:2]).view(np.uint16),
    )
    with pytest.raises(ValueError, match="needs at least 2 rows of 64"):
        op.reference(x, table[:1])


def test_position_zero_is_the_identity():
    rng = np.random.default_rng(1)
    x = bf16(rng.standard_normal((1, 8, 128)) * 100)
    got = RoPE(rows=1, heads=8, head_dim=128).reference(x, rope_table(1, 128))
    np.testing.assert_array_equal(got.view(np.uint16), x.view(np.uint16))


# -- a wrong kernel model is caught --------------------------------------------------------


def products_rounded(x, table):
    """A wrong RoPE: each product rounded to bf16 before the sum (one rounding more)."""
    xf = x.astype(np.float32)
    d = x.shape[2]
    t = table.astype(np.float32)[:, None, :]
    cos, sin = t[..., : d // 2], t[..., d // 2 :]
    a, b = xf[..., : d // 2], xf[..., d // 2 :]

    def r(v):
        return v.astype(bfloat16).astype(np.float32)

    return np.concatenate(
        [r(a * cos) - r(b * sin), r(b * cos) + r(a * sin)], -1
    ).astype(bfloat16)


def test_tolerance_catches_rounded_products():
    # (1 - 2**-8)**2 - (1 - 2**-7) * 1 = 2**-16 exactly; the product rounded
    # to bf16 first is 1 - 2**-7, and the difference vanishes.
    x = bf16([[[1 - 2.0**-8, 1 - 2.0**-7]]])
    table = bf16([[1 - 2.0**-8, 1.0]])
    op = RoPE(rows=1, heads=1, head_dim=2)
    want = rotate_oracle(x, table)
    assert want[0, 0, 0] == 2.0**-16
    assert compare(op.reference(x, table), want, op.tolerance())
    verdict = compare(products_rounded(x, table), want, op.tolerance())
    assert not verdict and verdict.worst_index == (0, 0, 0)


def test_tolerance_catches_the_other_method_and_a_flipped_sign():
    rng = np.random.default_rng(2)
    x = bf16(rng.standard_normal((4, 2, 64)))
    table = rope_table(4 + 17, 64)[17:]
    half = RoPE(rows=4, heads=2, head_dim=64)
    want = rotate_oracle(x, table)
    inter = RoPE(rows=4, heads=2, head_dim=64, method="interleaved").reference(x, table)
    assert not compare(inter, want, half.tolerance())
    flipped = rotate_oracle(x, np.concatenate([table[:, :32], -table[:, 32:]], 1))
    assert not compare(flipped, want, half.tolerance())


# -- rope_table against float64 ---------------------------------------------------------


SETTINGS = [
    (64, 10000.0, None),
    (128, 500000.0, None),
    (96, 10000.0, None),
    (128, 500000.0, LLAMA3),
    (64, 500000.0, LLAMA3),
    (128, 10000.0, {"rope_type": "linear", "factor": 4.0}),
    (
        128,
        500000.0,
        {"type": "llama3", **{k: v for k, v in LLAMA3.items() if k != "rope_type"}},
    ),
]


@pytest.mark.parametrize("head_dim, theta, scaling", SETTINGS)
def test_inv_freq_matches_the_float64_formula(head_dim, theta, scaling):
    got = rope_inv_freq(head_dim, theta, scaling)
    assert got.dtype == np.float32 and got.shape == (head_dim // 2,)
    want = inv_freq_oracle(head_dim, theta, scaling)
    units = inv_freq_error_units(head_dim, theta, scaling)
    assert np.all(np.abs(got - want) <= units * U * want)


def table_error_over_bound(table, head_dim, theta, scaling):
    """How far ``table`` is past the bound around the float64 formula (<= 0 holds).

    The float32 angle is off by its inverse frequency's error and one rounding
    of the product; cos and sin are 1-Lipschitz; then a float32 and a bf16
    rounding of a value at most 1.
    """
    inv = inv_freq_oracle(head_dim, theta, scaling)
    angles = np.arange(table.shape[0])[:, None] * inv[None, :]
    exact = np.concatenate([np.cos(angles), np.sin(angles)], axis=1)
    units = inv_freq_error_units(head_dim, theta, scaling) + 1.01
    slack = np.tile(angles * units * U, 2) + 2.0**-9 + 2.0**-25
    return float((np.abs(table.astype(np.float64) - exact) - slack).max())


@pytest.mark.parametrize("head_dim, theta, scaling", SETTINGS)
def test_table_matches_the_float64_formula(head_dim, theta, scaling):
    table = rope_table(4096, head_dim, theta, scaling)
    assert table.dtype == bfloat16 and table.shape == (4096, head_dim)
    assert table_error_over_bound(table, head_dim, theta, scaling) <= 0


def test_the_table_bound_catches_a_missing_scaling_and_swapped_halves():
    scaled = rope_table(4096, 128, 500000.0, LLAMA3)
    unscaled = rope_table(4096, 128, 500000.0)
    assert table_error_over_bound(unscaled, 128, 500000.0, LLAMA3) > 0
    swapped = np.concatenate([scaled[:, 64:], scaled[:, :64]], axis=1)
    assert table_error_over_bound(swapped, 128, 500000.0, LLAMA3) > 0


def test_table_rows_by_hand():
    table = rope_table(3, 4, theta=100.0)
    # Frequencies 1 and 1/10: row p is cos(p), cos(p/10), sin(p), sin(p/10).
    assert table[0].astype(np.float32).tolist() == [1.0, 1.0, 0.0, 0.0]
    want = [math.cos(2), math.cos(0.2), math.sin(2), math.sin(0.2)]
    assert (
        table[2].astype(np.float32).tolist() == bf16(want).astype(np.float32).tolist()
    )


def test_llama3_scaling_bands():
    inv = rope_inv_freq(128, 500000.0, LLAMA3).astype(np.float64)
    plain = inv_freq_oracle(128, 500000.0)
    wavelength = 2 * math.pi / plain
    high = wavelength < 8192 / 4
    low = wavelength > 8192 / 1
    assert high.any() and low.any() and (~high & ~low).any()
    np.testing.assert_allclose(inv[high], plain[high], rtol=1e-6)
    np.testing.assert_allclose(inv[low], plain[low] / 8, rtol=1e-6)
    middle = ~high & ~low
    assert np.all(inv[middle] < plain[middle]) and np.all(
        inv[middle] > plain[middle] / 8
    )


@pytest.mark.parametrize(
    "args, message",
    [
        ((4, 63), "rope head_dim=63 is not a positive even number"),
        ((4, 0), "rope head_dim=0 is not a positive even number"),
        ((-1, 64), "rope_table positions=-1 is negative"),
        ((4, 64, 1e4, {"rope_type": "yarn", "factor": 2.0}), "'yarn' is not supported"),
        (
            (4, 64, 1e4, {"rope_type": "llama3", "factor": 8.0}),
            "needs 'low_freq_factor'",
        ),
        ((4, 64, 1e4, {"rope_type": "linear"}), "needs 'factor'"),
    ],
)
def test_rope_table_refuses(args, message):
    with pytest.raises(ValueError, match=message):
        rope_table(*args)


# -- resolve and check -------------------------------------------------------------------


def assert_legal(op, dev):
    assert op.open_tunables() == ()
    assert op.num_aie_columns <= dev.columns
    assert op.heads % op.heads_per_tile == 0
    assert (op.rows * op.heads // op.heads_per_tile) % op.num_aie_columns == 0
    assert op.core_bytes() <= dev.core_memory_bytes - STACK_BYTES
    op.check(dev)


@settings(max_examples=300, deadline=None)
@given(
    rows=st.integers(1, 2048),
    heads=st.integers(1, 64),
    k=st.integers(1, 168),
    dev=st.sampled_from(DEVICES),
    method=st.sampled_from(("half", "interleaved")),
)
def test_resolve_gives_legal_tunables(rows, heads, k, dev, method):
    op = RoPE(rows=rows, heads=heads, head_dim=32 * k, method=method).resolved(dev)
    assert_legal(op, dev)


@pytest.mark.parametrize(
    "rows, heads, head_dim, dev, tunables",
    [
        (1, 32, 128, NPU2, {"num_aie_columns": 8, "heads_per_tile": 4}),
        (1, 8, 64, NPU1, {"num_aie_columns": 4, "heads_per_tile": 2}),
        (1, 1, 128, NPU2, {"num_aie_columns": 1, "heads_per_tile": 1}),
        (2048, 32, 128, NPU2, {"num_aie_columns": 8, "heads_per_tile": 32}),
        (3, 5, 64, NPU1, {"num_aie_columns": 1, "heads_per_tile": 5}),
    ],
    ids=str,
)
def test_resolve_picks(rows, heads, head_dim, dev, tunables):
    assert RoPE(rows=rows, heads=heads, head_dim=head_dim).resolve(dev) == tunables


# -- cost --------------------------------------------------------------------------------


def _tiling(cost: Cost) -> tuple[int, int, int, int]:
    """How a cost is spread: columns, cores, calls per core, bytes re-read."""
    return cost.columns, cost.cores, cost.calls, cost.reread_bytes


@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_cost_follows_the_tiling(dev):
    op = RoPE(rows=16, heads=32, head_dim=64, heads_per_tile=4, num_aie_columns=4)
    # 16 * 32 / 4 = 128 tiles over 4 columns; each position's table row is
    # streamed with each of its 8 tiles, 7 times more than once.
    assert _tiling(op.cost(dev)) == (4, 4, 32, 16 * 7 * 64 * 2)
    assert (
        step_time(op.replace(heads_per_tile=8), dev).seconds
        < step_time(op, dev).seconds
    )
    assert (
        step_time(op.replace(num_aie_columns=2), dev).seconds
        > step_time(op, dev).seconds
    )


# -- in a graph --------------------------------------------------------------------------


class Rotate(iron.Graph):
    def body(self, x, table):
        return RoPE.step(x, table, method="interleaved")


class Decode(iron.Graph):
    """One position: the table row of ``position`` from a held table."""

    def __init__(self, table):
        self.table = iron.weight(table)

    def body(self, x, *, position: iron.Scratchpad[int]):
        return RoPE.step(x, self.table[None, position])


class Chunk(iron.Graph):
    """The first n positions of a chunk, from the table's first rows."""

    def __init__(self, table):
        self.table = iron.weight(table)

    def body(self, x, *, n: iron.Scratchpad[int]):
        return RoPE.step(x[:n], self.table[:n])


def test_rope_in_a_graph():
    rng = np.random.default_rng(3)
    x = bf16(rng.standard_normal((4, 8, 64)))
    table = rope_table(4, 64, 500000.0)
    with iron.use_device("npu2"):
        (step,) = Rotate().record(x=(4, 8, 64), table=(4, 64)).steps
        got = Rotate().reference(x, table)
    op = step.op
    assert (op.rows, op.heads, op.head_dim, op.method) == (4, 8, 64, "interleaved")
    assert op.open_tunables() == ()
    want = RoPE(rows=4, heads=8, head_dim=64, method="interleaved").reference(x, table)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_decode_reads_its_positions_row():
    rng = np.random.default_rng(4)
    table = rope_table(32, 128, 500000.0, LLAMA3)
    x = bf16(rng.standard_normal((1, 8, 128)))
    graph = Decode(table)
    with iron.use_device("npu1"):
        (step,) = graph.record(x=(1, 8, 128)).steps
        got = graph.reference(x, position=21)
    assert (step.op.rows, step.op.heads) == (1, 8)
    want = RoPE(rows=1, heads=8, head_dim=128).reference(x, table[21:22])
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    assert compare(got, rotate_oracle(x, table[21:22]), step.op.tolerance())


def test_bounded_rows_reach_the_reference_cut():
    rng = np.random.default_rng(5)
    table = rope_table(16, 64)
    x = bf16(rng.standard_normal((16, 2, 64)))
    with iron.use_device("npu2"):
        got = Chunk(table).reference(x, n=5)
    assert got.shape == (5, 2, 64)
    want = RoPE(rows=16, heads=2, head_dim=64).reference(x[:5], table[:5])
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize(
    "shapes, message",
    [
        (
            {"x": (4, 8, 64), "table": (4, 32)},
            "RoPE: head_dim is 64 from x.shape[2] but 32 from table.shape[1]",
        ),
        (
            {"x": (4, 8, 64), "table": (3, 64)},
            "RoPE: rows is 4 from x.shape[0] but 3 from table.shape[0]",
        ),
    ],
)
def test_a_dimension_conflict_names_both_sources(shapes, message):
    with iron.use_device("npu2"):
        with pytest.raises(DimensionConflictError) as info:
            Rotate().record(**shapes)
    assert str(info.value) == message
