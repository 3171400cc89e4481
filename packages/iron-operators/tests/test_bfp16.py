"""Tests for the bfp16ebs8 block format model (iron.operators.bfp16).

The oracle below works on integers and exact fractions, one block at a time,
from the format's definition (shared exponent = the block's largest float32
exponent field; an int8 two's complement mantissa counting units of
2**(shared - 133); round to nearest, ties to even; saturate at 127), not
from the module's numpy.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ml_dtypes import bfloat16

from iron.operators import bfp16

SIGN = 0x8000
BF16_MAX = float(np.array(0x7F7F, np.uint16).view(bfloat16))


def bf16(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint16).view(bfloat16)


def _round_half_even(q: Fraction) -> int:
    floor = q.numerator // q.denominator
    rest = q - floor
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and floor % 2):
        return floor + 1
    return floor


def oracle_block(values: list[float]) -> tuple[int, list[int]]:
    """(shared exponent, int8 mantissas) of one block of 8 finite values."""
    fields = [int(np.float32(v).view(np.uint32) >> 23) & 0xFF for v in values]
    shared = max(max(fields), 1)
    unit = Fraction(2) ** (shared - 133)
    mantissas = [
        min(127, max(-128, _round_half_even(Fraction(float(v)) / unit))) for v in values
    ]
    return shared, mantissas


def oracle_quantize(x: np.ndarray) -> np.ndarray:
    """Blocks of 8 along the last axis of a 1-D array, decoded back to floats."""
    out = []
    for start in range(0, x.size, 8):
        block = [float(v) for v in x[start : start + 8]]
        shared, mantissas = oracle_block(block)
        unit = Fraction(2) ** (shared - 133)
        out += [float(m * unit) for m in mantissas]
    # In float32, as the multiplier sees them: -128 units of the top block
    # exponent (254) is -2**128, which overflows to -inf.
    with np.errstate(over="ignore"):
        return np.array(out).astype(np.float32)


finite_bits = st.integers(0, 0x7F7F).flatmap(lambda m: st.sampled_from([m, m | SIGN]))
moderate_bits = st.integers(0x3000, 0x4FFF).flatmap(
    lambda m: st.sampled_from([m, m | SIGN])
)
tiny_bits = st.integers(0x0000, 0x01FF).flatmap(
    lambda m: st.sampled_from([m, m | SIGN])
)
element_bits = st.one_of(finite_bits, moderate_bits, tiny_bits)


def bf16_vectors(elements=element_bits):
    return (
        st.integers(1, 6)
        .flatmap(
            lambda blocks: st.lists(elements, min_size=8 * blocks, max_size=8 * blocks)
        )
        .map(bf16)
    )


# -- the format -------------------------------------------------------------------


@settings(max_examples=300)
@given(bf16_vectors())
def test_quantize_matches_the_integer_oracle(x):
    got = bfp16.quantize(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_array_equal(got, oracle_quantize(x))


@settings(max_examples=200)
@given(bf16_vectors())
def test_encode_matches_the_oracle_bytes(x):
    data = bfp16.encode(x)
    assert data.dtype == np.uint8 and data.size == x.size // 8 * 9
    for i, start in enumerate(range(0, x.size, 8)):
        shared, mantissas = oracle_block([float(v) for v in x[start : start + 8]])
        row = data[9 * i : 9 * i + 9]
        assert row[0] == shared
        assert row[1:].view(np.int8).tolist() == mantissas


@settings(max_examples=200)
@given(bf16_vectors())
def test_decode_inverts_encode_to_the_quantized_values(x):
    np.testing.assert_array_equal(bfp16.decode(bfp16.encode(x)), bfp16.quantize(x))


def test_a_block_by_hand():
    x = np.array([1.0, -1.0, 0.5, 3.015625, 0, 0, 0, 0], np.float32)
    data = bfp16.encode(x)
    # 3.015625 has the largest exponent field, 128: units of 2**(128-133) =
    # 1/32. 1.0 is 32 units, -1.0 is -32 (0xe0), 0.5 is 16, and 3.015625 is
    # 96.5 units, a tie rounded to the even 96.
    assert data.tolist() == [128, 32, 0xE0, 16, 96, 0, 0, 0, 0]
    assert bfp16.quantize(x).tolist() == [1.0, -1.0, 0.5, 3.0, 0, 0, 0, 0]
    assert bfp16.shared_exponents(x).tolist() == [128]
    assert bfp16.block_unit(x).tolist() == [2.0**-5] * 8


@pytest.mark.parametrize(
    "value, units",
    [
        (1.0, 64),  # the largest element keeps its implicit bit ...
        (1.0078125, 64),  # ... and 6 fraction bits: 64.5 ties to even 64
        (1.0234375, 66),  # 65.5 ties to even 66
        (1.9921875, 127),  # 127.5 rounds to 128, which saturates at 127
        (-1.9921875, -128),  # -127.5 ties to -128, which an int8 holds
        (-1.984375, -127),
    ],
)
def test_the_largest_element_rounds_to_nearest_even_and_saturates(value, units):
    x = np.array([value] + [0.0] * 7, np.float32)
    assert bfp16.encode(x)[1:2].view(np.int8)[0] == units
    assert bfp16.quantize(x)[0] == units * 2.0**-6


def test_smaller_elements_lose_one_bit_per_binade():
    # With 1.0 in the block, 2**-6 is one unit, 2**-7 half a unit (a tie, to
    # the even 0), 3 * 2**-8 three quarters (rounds up to one unit).
    x = np.array([1.0, 2**-6, 2**-7, 3 * 2**-8, 2**-7 + 2**-14, 0, 0, 0], np.float32)
    assert bfp16.quantize(x).tolist() == [1.0, 2**-6, 0.0, 2**-6, 2**-6, 0, 0, 0]


def test_signed_zero_and_zero_blocks():
    x = np.array([-0.0, 0.0] * 4, np.float32)
    q = bfp16.quantize(x)
    assert (q == 0).all()
    assert bfp16.shared_exponents(x).tolist() == [1]
    assert bfp16.block_unit(x)[0] == 2.0**-132


def test_subnormal_blocks_use_the_smallest_normal_exponent():
    x = bf16([0x0001, 0x007F, 0x8040, 0, 0, 0, 0, 0]).astype(np.float32)
    # bf16 subnormals are multiples of 2**-133; units of 2**-132 halve them.
    q = bfp16.quantize(x)
    assert q.astype(np.float64).tolist()[:3] == [0.0, 64 * 2.0**-132, -32 * 2.0**-132]


def test_nan_and_infinity_are_kept_and_do_not_set_the_exponent():
    x = np.array([np.nan, np.inf, -np.inf, 1.0, 2**-6, 0, 0, 0], np.float32)
    q = bfp16.quantize(x)
    assert np.isnan(q[0]) and q[1] == np.inf and q[2] == -np.inf
    assert q[3:5].tolist() == [1.0, 2**-6]  # blocked against 1.0, not 255
    assert bfp16.shared_exponents(x).tolist() == [127]
    with pytest.raises(ValueError, match="finite values"):
        bfp16.encode(x)


# -- properties the matmul bounds rely on ----------------------------------------------


@settings(max_examples=300)
@given(bf16_vectors())
def test_error_is_within_half_a_block_unit(x):
    q = bfp16.quantize(x).astype(np.float64)
    unit = bfp16.block_unit(x)
    err = np.abs(q - x.astype(np.float64))
    # Round to nearest: half a unit, also where the largest element saturates
    # (127.5 units -> 127). Only -128 units of the top exponent leaves float32.
    top = np.isinf(q)
    assert (err[~top] <= unit[~top] / 2).all()
    assert (x[top] == -BF16_MAX).all()


def test_the_top_binade_can_round_past_float32():
    # -bf16max is -127.5 units of 2**121: ties to -128 units, -2**128, which
    # float32 (and the helper's float decode) cannot hold.
    x = np.array([-BF16_MAX] + [0.0] * 7, np.float32)
    with np.errstate(over="ignore"):
        assert bfp16.quantize(x)[0] == -np.inf
    assert bfp16.encode(x)[1:2].view(np.int8)[0] == -128
    assert bfp16.quantize(-x)[0] == 127 * 2.0**121  # saturates, finite


@settings(max_examples=200)
@given(bf16_vectors())
def test_quantized_values_are_bf16_values(x):
    q = bfp16.quantize(x)
    np.testing.assert_array_equal(q.astype(bfloat16).astype(np.float32), q)


def test_quantizing_twice_can_change_a_block():
    # -127.5 units ties to -128, one binade up: quantized again, the block's
    # exponent is one higher and its smallest element falls to a tie at 0.
    x = bf16([0, 0, 0, 0, 0, 0, 0x0005, 0x81FF]).astype(np.float32)
    q = bfp16.quantize(x)
    assert q[6] == 2.0**-130 and q[7] == -(2.0**-123)
    assert bfp16.quantize(q)[6] == 0.0


def test_blocks_run_along_the_given_axis():
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((16, 24)) * 2.0 ** rng.integers(-8, 8, (16, 24))).astype(
        bfloat16
    )
    along_rows = bfp16.quantize(a, axis=-1)
    along_columns = bfp16.quantize(a, axis=0)
    np.testing.assert_array_equal(along_columns, bfp16.quantize(a.T, axis=-1).T)
    for i in range(16):
        np.testing.assert_array_equal(along_rows[i], oracle_quantize(a[i]))
    assert not np.array_equal(along_rows, along_columns)
    assert bfp16.shared_exponents(a, axis=0).shape == (2, 24)
    assert bfp16.block_unit(a, axis=0).shape == (16, 24)


@pytest.mark.parametrize("n", [1, 7, 12, 100])
def test_a_partial_block_is_refused(n):
    with pytest.raises(ValueError, match=f"has {n}; pad it to a multiple of 8"):
        bfp16.quantize(np.ones(n, np.float32))


def test_scalars_and_bad_byte_counts_are_refused():
    with pytest.raises(ValueError, match="scalar"):
        bfp16.quantize(np.float32(1.0))
    with pytest.raises(ValueError, match="9 bytes a block; got 10"):
        bfp16.decode(np.zeros(10, np.uint8))
