"""Tests for AXPY and ReLU: declarations, tolerances, references, resolve and check.

References are judged against a float64 oracle of the exact math with
``iron.compare`` under the operator's own ``tolerance()``. AXPY's oracle uses
the scalar rounded to bf16, as the kernel receives it: that rounding is part
of the operator's definition, not an error the tolerance covers.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ml_dtypes import bfloat16

import iron
from iron.core.cost import step_time
from iron.core.declare import Divisors, Input, Output
from iron.core.device import NPU1, NPU2, as_device
from iron.core.operator import Cost, RefusedShapeError
from iron.core.tolerance import Tolerance, compare
from iron.operators import AXPY, ReLU

DEVICES = (NPU1, NPU2)

# -- bf16 inputs ----------------------------------------------------------------------

SIGN = 0x8000
# Zeros, the smallest and largest subnormals, the smallest normal, one and its
# neighbour, the largest finite value, infinities.
SPECIAL_BITS = (
    0x0000,
    0x0001,
    0x007F,
    0x0080,
    0x0081,
    0x3F80,
    0x3F81,
    0x3F7F,
    0x7F7F,
    0x7F7E,
    0x7F80,
)


def bf16(bits) -> np.ndarray:
    """bf16 values from their bit patterns."""
    return np.asarray(bits, dtype=np.uint16).view(bfloat16)


def signed(magnitude: st.SearchStrategy[int]) -> st.SearchStrategy[int]:
    return st.tuples(st.booleans(), magnitude).map(lambda t: t[1] | (SIGN * t[0]))


any_bits = st.integers(0, 0xFFFF)  # NaNs and infinities included
special_bits = signed(st.sampled_from(SPECIAL_BITS))
tiny_bits = signed(st.integers(0x0000, 0x06FF))  # subnormals up to ~2**-113
huge_bits = signed(st.integers(0x7A00, 0x7F7F))  # finite, from ~2**117
moderate_bits = signed(st.integers(0x3000, 0x4FFF))  # ~2**-31 to ~2**32
element_bits = st.one_of(any_bits, special_bits, tiny_bits, huge_bits, moderate_bits)


def bf16_arrays(elements=element_bits, size=None):
    sizes = {"min_size": 1, "max_size": 48} if size is None else {"min_size": size}
    if size is not None:
        sizes["max_size"] = size
    return st.lists(elements, **sizes).map(bf16)


scalars = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(-4.0, 4.0),
    special_bits.map(lambda b: float(bf16(b))),
    moderate_bits.map(lambda b: float(bf16(b))),
).filter(lambda s: not np.isnan(float(bfloat16(s))))


@st.composite
def cancelling(draw):
    """``(scalar, x, y)`` with ``y`` within a few bf16 steps of ``-scalar * x``."""
    scalar = draw(moderate_bits.map(lambda b: float(bf16(b))))
    x = draw(bf16_arrays(moderate_bits))
    product = np.float64(bfloat16(scalar)) * x.astype(np.float64)
    y = (-product).astype(np.float32).astype(bfloat16)
    nudge = np.array(
        draw(st.lists(st.integers(-3, 3), min_size=x.size, max_size=x.size))
    )
    bits = y.view(np.uint16).astype(np.int64) + nudge
    y = bf16(np.clip(bits, 0, 0xFFFF))
    return scalar, x, y


@st.composite
def axpy_inputs(draw):
    x = draw(bf16_arrays())
    y = draw(bf16_arrays(size=x.size))
    return draw(scalars), x, y


# -- oracles --------------------------------------------------------------------------


def axpy_oracle(scalar: float, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The exact ``bf16(scalar) * x + y``, in float64 (the product is exact)."""
    a = np.float64(bfloat16(scalar))
    with np.errstate(all="ignore"):
        return a * x.astype(np.float64) + y.astype(np.float64)


def fp32_product_overflows(scalar: float, x: np.ndarray) -> np.ndarray:
    """Where ``scalar * x`` is finite but beyond float32 (the kernel's fp32 product)."""
    with np.errstate(all="ignore"):
        product = np.float64(bfloat16(scalar)) * x.astype(np.float64)
        return np.isfinite(product) & np.isinf(product.astype(np.float32))


def relu_oracle(x: np.ndarray) -> np.ndarray:
    return np.maximum(x.astype(np.float64), 0.0)


def axpy(scalar: float, n: int) -> AXPY:
    return AXPY(size=n, scalar_factor=scalar)


# -- declarations ---------------------------------------------------------------------


def test_axpy_declaration():
    d = AXPY.declaration
    assert list(d.params) == ["size", "tile_size", "num_aie_columns", "scalar_factor"]
    assert d.dimensions == ("size", "scalar_factor")
    assert d.tunables == ("tile_size", "num_aie_columns")
    assert d.params["tile_size"].domain == Divisors("size", multiple_of=16)
    assert d.params["num_aie_columns"].domain == (1, 2, 4, 8)
    assert d.inputs == (Input("x", "size"), Input("y", "size"))
    assert d.outputs == (Output("out", "size"),)


def test_relu_declaration():
    d = ReLU.declaration
    assert list(d.params) == ["size", "tile_size", "num_aie_columns"]
    assert d.tunables == ("tile_size", "num_aie_columns")
    assert d.inputs == (Input("x", "size"),)
    assert d.outputs == (Output("out", "size"),)


def test_axpy_needs_its_scalar():
    with pytest.raises(TypeError, match=r"AXPY needs \['scalar_factor'\]"):
        AXPY(size=2048)


# -- tolerances -----------------------------------------------------------------------


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_relu_tolerance_is_exact(dev):
    # Spec section 2, exercise 4.
    tolerance = ReLU(size=2048).resolved(dev).tolerance()
    assert tolerance.kind == "exact"
    assert (tolerance.rtol, tolerance.atol, tolerance.ulps) == (None, None, None)
    assert tolerance.max_mismatch_frac == 0.0
    assert str(tolerance) == "exact"
    assert tolerance.note  # says why exactness holds


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_axpy_tolerance_is_one_bf16_rounding(dev):
    tolerance = AXPY(size=2048, scalar_factor=2.0).resolved(dev).tolerance()
    assert tolerance.kind == "ulps"
    assert tolerance.ulps == 1
    assert tolerance.rtol is None
    assert tolerance.max_mismatch_frac == 0.0
    # The floor for subnormals a kernel flushes: the smallest normal bf16.
    assert tolerance.atol == 2.0**-126
    assert "one rounding" in tolerance.note
    assert str(tolerance).startswith("<= 1 bf16 ulp")


# -- references against the oracle -------------------------------------------------------


def test_axpy_reference_shape_and_dtype():
    x = np.arange(32, dtype=np.float32).astype(bfloat16)
    out = axpy(2.0, 32).reference(x, x)
    assert out.dtype == bfloat16 and out.shape == (32,)
    np.testing.assert_array_equal(out.astype(np.float32), 3 * np.arange(32))


def test_relu_reference_shape_and_dtype():
    x = np.linspace(-4, 4, 32).astype(bfloat16)
    out = ReLU(size=32).reference(x)
    assert out.dtype == bfloat16 and out.shape == (32,)
    np.testing.assert_array_equal(out.astype(np.float32), np.maximum(x, 0))


def check_axpy(scalar, x, y):
    op = axpy(scalar, x.size)
    with np.errstate(all="ignore"):
        got = op.reference(x, y)
    want = axpy_oracle(scalar, x, y)
    # The kernel's product is fp32: one beyond fp32's range is inf even where
    # the exact sum is finite (see test_axpy_fp32_product_overflow_is_outside_the_contract).
    keep = ~fp32_product_overflows(scalar, x)
    verdict = compare(got[keep], want[keep], op.tolerance())
    assert verdict, f"{verdict} for scalar={scalar!r}, x={x[keep]!r}, y={y[keep]!r}"


@settings(max_examples=400)
@given(axpy_inputs())
def test_axpy_reference_holds_its_tolerance(inputs):
    check_axpy(*inputs)


@settings(max_examples=300)
@given(cancelling())
def test_axpy_reference_holds_its_tolerance_under_cancellation(inputs):
    check_axpy(*inputs)


@pytest.mark.parametrize(
    "scalar, x, y",
    [
        # Cancellation to the last bit: 1.0078125**2 - 1.015625 = 2**-14.
        (1.0078125, [1.0078125], [-1.015625]),
        # Signed zeros.
        (1.0, [-0.0, 0.0, -0.0], [-0.0, -0.0, 0.0]),
        (-1.0, [0.0], [0.0]),
        # Subnormal products and sums.
        (2.0**-10, [2.0**-120], [2.0**-130]),
        (0.5, [2.0**-133], [-(2.0**-133)]),
        # The largest finite values, and overflow to infinity.
        (1.0, [3.3895313892515355e38], [3.3895313892515355e38]),
        (-1.0, [3.3895313892515355e38], [-3.3895313892515355e38]),
        # Infinities and NaN propagate.
        (1.0, [np.inf, -np.inf, np.inf, np.nan], [1.0, 1.0, -np.inf, 0.0]),
        (0.0, [np.inf], [1.0]),
        # A scalar that is not a bf16 value is rounded first.
        (0.1, [1024.0], [-102.5]),
    ],
)
def test_axpy_reference_on_adversarial_inputs(scalar, x, y):
    x, y = np.array(x).astype(bfloat16), np.array(y).astype(bfloat16)
    check_axpy(scalar, x, y)


def test_axpy_reference_rounds_the_scalar_to_bf16_first():
    x = np.array([1024.0], dtype=bfloat16)
    y = np.array([-102.5], dtype=bfloat16)
    # bf16(0.1) * 1024 is exactly 102.5.
    assert float(axpy(0.1, 1).reference(x, y)[0]) == 0.0


def test_axpy_fp32_product_overflow_is_outside_the_contract():
    # 2 * bf16max overflows the kernel's fp32 product; the exact sum with
    # -bf16max is bf16max, finite. The reference models the kernel (inf), so
    # compare against the exact math refuses it: the tolerance covers rounding,
    # not an intermediate overflow.
    big = np.array([3.3895313892515355e38], dtype=bfloat16)
    op = axpy(2.0, 1)
    with np.errstate(all="ignore"):
        got = op.reference(big, -big)
    want = axpy_oracle(2.0, big, -big)
    assert np.isinf(got[0]) and np.isfinite(want[0])
    assert fp32_product_overflows(2.0, big)[0]
    assert not compare(got, want, op.tolerance())


@settings(max_examples=300)
@given(bf16_arrays())
def test_relu_reference_holds_its_tolerance(x):
    op = ReLU(size=x.size)
    got = op.reference(x)
    verdict = compare(got, relu_oracle(x), op.tolerance())
    assert verdict, f"{verdict} for x={x!r}"
    # Exact means bit-equal for everything but zero's sign and NaN's payload.
    want = relu_oracle(x).astype(bfloat16)
    same = (got.view(np.uint16) == want.view(np.uint16)) | (got == 0) & (want == 0)
    assert np.all(same | np.isnan(got) & np.isnan(want))


def test_relu_reference_on_adversarial_inputs():
    x = bf16([b | s for b in SPECIAL_BITS for s in (0, SIGN)] + [0x7FC0, 0xFFC0])
    op = ReLU(size=x.size)
    assert compare(op.reference(x), relu_oracle(x), op.tolerance())


# -- a wrong kernel model is caught ----------------------------------------------------------


def product_rounded_to_bf16(scalar, x, y):
    """A wrong AXPY: the product rounded to bf16 before the add (one rounding too many)."""
    a = np.float32(bfloat16(scalar))
    product = (a * x.astype(np.float32)).astype(bfloat16).astype(np.float32)
    return (product + y.astype(np.float32)).astype(bfloat16)


def scalar_not_rounded(scalar, x, y):
    """A wrong AXPY: the scalar used at fp32 rather than rounded to bf16."""
    a = np.float32(scalar)
    return (a * x.astype(np.float32) + y.astype(np.float32)).astype(bfloat16)


def test_axpy_tolerance_catches_an_extra_rounding():
    scalar = 1.0078125  # 1 + 2**-7
    x = np.array([1.0078125], dtype=bfloat16)
    y = np.array([-1.015625], dtype=bfloat16)  # -(1 + 2**-6)
    want = axpy_oracle(scalar, x, y)
    assert want[0] == 2.0**-14  # the product's last bit, 2**-14, survives
    tolerance = axpy(scalar, 1).tolerance()
    assert compare(axpy(scalar, 1).reference(x, y), want, tolerance)
    wrong = product_rounded_to_bf16(scalar, x, y)
    assert wrong[0] == 0.0
    verdict = compare(wrong, want, tolerance)
    assert not verdict
    assert verdict.max_abs_err == 2.0**-14 and verdict.max_ulp_err > 1


def test_axpy_tolerance_catches_an_unrounded_scalar():
    x = np.array([1024.0], dtype=bfloat16)
    y = np.array([-102.5], dtype=bfloat16)
    want = axpy_oracle(0.1, x, y)
    assert want[0] == 0.0
    assert not compare(scalar_not_rounded(0.1, x, y), want, axpy(0.1, 1).tolerance())


def test_extra_rounding_is_caught_on_random_cancellations():
    # y is -bf16(scalar * x): the exact result is the product's rounding
    # residue, which the wrong model loses entirely.
    rng = np.random.default_rng(7)
    x = rng.uniform(1, 2, 512).astype(bfloat16)
    scalar = float(bfloat16(1.2890625))  # 1 + 2**-2 + 2**-5 + 2**-7
    y = -(np.float32(scalar) * x.astype(np.float32)).astype(bfloat16)
    want = axpy_oracle(scalar, x, y)
    op = axpy(scalar, x.size)
    assert compare(op.reference(x, y), want, op.tolerance())
    verdict = compare(product_rounded_to_bf16(scalar, x, y), want, op.tolerance())
    assert not verdict
    assert verdict.n_mismatch == np.count_nonzero(want)
    assert verdict.n_mismatch > x.size // 4


def test_relu_tolerance_catches_a_flushed_subnormal():
    x = bf16([0x0001, 0x3F80])  # the smallest subnormal, and one
    flushed = np.where(np.abs(x.astype(np.float32)) < 2.0**-126, 0, x).astype(bfloat16)
    assert not compare(flushed, relu_oracle(x), ReLU(size=2).tolerance())
    # AXPY's floor would excuse exactly this; ReLU's exact contract does not.
    assert compare(flushed, relu_oracle(x), Tolerance.bf16_ulps(1, atol=2.0**-126))


# -- resolve and check -------------------------------------------------------------------


def assert_legal(op, dev):
    tile, columns = op.tile_size, op.num_aie_columns
    assert columns in (1, 2, 4, 8) and columns <= dev.columns
    assert tile in Divisors("size", multiple_of=16).values({"size": op.size})
    assert op.size % (tile * columns) == 0
    buffers = len(op.declaration.inputs) + len(op.declaration.outputs)
    assert tile * 2 * buffers * 2 <= dev.core_memory_bytes // 2
    op.check(dev)  # raises if refused


@settings(max_examples=300)
@given(
    size=st.integers(1, 2**16).map(lambda k: 16 * k),
    dev=st.sampled_from(DEVICES),
    cls=st.sampled_from((AXPY, ReLU)),
)
def test_resolve_gives_legal_tunables(size, dev, cls):
    fields = {"scalar_factor": 1.0} if cls is AXPY else {}
    op = cls(size=size, **fields).resolved(dev)
    assert op.open_tunables() == ()
    assert_legal(op, dev)


@pytest.mark.parametrize("dev", DEVICES, ids=str)
@pytest.mark.parametrize(
    "size",
    [16, 32, 48, 16 * 3 * 5 * 7, 1000 * 16, 2048, 16 * 4099, 2**19 + 16, 2**20],
)
def test_resolve_gives_legal_tunables_at_edges(size, dev):
    for op in (AXPY(size=size, scalar_factor=1.0), ReLU(size=size)):
        assert_legal(op.resolved(dev), dev)


@pytest.mark.parametrize(
    "size, dev, tunables",
    [
        (2048, NPU1, {"num_aie_columns": 4, "tile_size": 512}),
        (2048, NPU2, {"num_aie_columns": 8, "tile_size": 256}),
        (16, NPU2, {"num_aie_columns": 1, "tile_size": 16}),
        (48, NPU1, {"num_aie_columns": 1, "tile_size": 16}),
        (2**20, NPU2, {"num_aie_columns": 8, "tile_size": 1024}),
        (2**20, NPU1, {"num_aie_columns": 4, "tile_size": 1024}),
    ],
    ids=str,
)
def test_resolve_picks_the_widest_spread(size, dev, tunables):
    assert AXPY(size=size, scalar_factor=1.0).resolve(dev) == tunables


def test_resolve_keeps_pinned_tunables():
    op = AXPY(size=2048, scalar_factor=1.0, num_aie_columns=2).resolved("npu2")
    assert (op.num_aie_columns, op.tile_size) == (2, 256)
    assert op.pinned == frozenset({"num_aie_columns"})


def test_largest_tiles_that_fit():
    # AXPY holds three double-buffered bf16 tiles, ReLU two, in half of 64 KiB.
    AXPY(size=2048, scalar_factor=1.0, tile_size=2048, num_aie_columns=1).check(NPU1)
    ReLU(size=4096, tile_size=4096, num_aie_columns=1).check(NPU1)
    with pytest.raises(RefusedShapeError, match="tile_size=4096 needs 49152 bytes"):
        AXPY(size=4096, scalar_factor=1.0, tile_size=4096, num_aie_columns=1).check(
            NPU1
        )


def test_tunables_outside_their_domains_are_refused_on_construction():
    with pytest.raises(ValueError, match="divisors of size, multiples of 16"):
        AXPY(size=2048, scalar_factor=1.0, tile_size=24)
    with pytest.raises(ValueError, match="one of 1, 2, 4, 8"):
        ReLU(size=2048, num_aie_columns=3)


@pytest.mark.parametrize("size", [8, 40, 2047, 0])
@pytest.mark.parametrize("cls", [AXPY, ReLU])
def test_sizes_without_a_legal_tile_are_refused(cls, size):
    # No tile_size is a multiple of 16 dividing size: resolve refuses the
    # shape, naming the rule, rather than picking a tile outside its domain.
    fields = {"scalar_factor": 1.0} if cls is AXPY else {}
    with pytest.raises(RefusedShapeError) as info:
        cls(size=size, **fields).resolved("npu2")
    assert str(info.value) == (
        f"{cls.__name__} on npu2: size={size} is not a positive multiple of 16 "
        f"(a tile is a multiple of 16 elements)"
    )


# -- cost --------------------------------------------------------------------------------


@given(size=st.integers(1, 2**16).map(lambda k: 16 * k))
def test_cost_scales_with_size(size):
    cost = AXPY(size=size, scalar_factor=1.0).cost(NPU2)
    assert (cost.macs, cost.bytes) == (size, 6 * size)


def _tiling(cost: Cost) -> tuple[int, int, int, int]:
    """How a cost is spread: columns, cores, calls per core, bytes re-read."""
    return cost.columns, cost.cores, cost.calls, cost.reread_bytes


def _axpy_seconds(dev, **tunables) -> float:
    return step_time(AXPY(size=8192, scalar_factor=2.0, **tunables), dev).seconds


@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_cost_follows_the_tiling(dev):
    # 8192 elements in tiles of 256 over 2 columns: 16 kernel calls a core.
    op = AXPY(size=8192, scalar_factor=2.0, tile_size=256, num_aie_columns=2)
    assert _tiling(op.resolved(dev).cost(dev)) == (2, 2, 16, 0)
    # Unresolved, the cost is resolve()'s tiling's.
    plain = AXPY(size=8192, scalar_factor=2.0)
    assert plain.cost(dev) == plain.resolved(dev).cost(dev)
    # More columns, and bigger tiles (fewer calls), model faster.
    base = _axpy_seconds(dev, tile_size=256, num_aie_columns=2)
    assert _axpy_seconds(dev, tile_size=256, num_aie_columns=4) < base
    assert _axpy_seconds(dev, tile_size=1024, num_aie_columns=2) < base


# -- in a graph --------------------------------------------------------------------------


class ReluThenAxpy(iron.Graph):
    def __init__(self, scalar_factor=2.0):
        self.scalar_factor = scalar_factor

    def body(self, x, y):
        activated = ReLU.step(x)
        return AXPY.step(activated, y, scalar_factor=self.scalar_factor)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_relu_then_axpy_reference_holds_axpys_tolerance(dev):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(2048).astype(bfloat16)
    y = rng.standard_normal(2048).astype(bfloat16)
    graph = ReluThenAxpy(scalar_factor=2.0)
    with iron.use_device(dev):
        recording = graph.record(x=(2048,), y=(2048,))
        result = graph.reference(x, y)
    relu, ax = (step.op for step in recording.steps)
    assert type(relu) is ReLU and type(ax) is AXPY
    assert ax.size == 2048 and ax.scalar_factor == 2.0
    assert_legal(relu, as_device(dev))
    assert_legal(ax, as_device(dev))
    want = 2.0 * np.maximum(x.astype(np.float64), 0) + y.astype(np.float64)
    assert compare(result, want, ax.tolerance())
