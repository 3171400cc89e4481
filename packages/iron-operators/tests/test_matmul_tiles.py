"""model_product at HIGH and MEDIUM makes its K tiles' products in one call.

The kernel model stacks the K tiles as strided views and makes their float32
products with one ``np.matmul``; the results must keep the bits of the
formulation it replaced, one ``np.matmul`` per tile in a Python loop, on
random and adversarial inputs (bf16 extremes, zeros, subnormals, a long K),
for several tile shapes, GEMV and GEMM, batched and transposed operands.
"""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16, finfo

from iron.core.precision import Precision
from iron.operators import bfp16
from iron.operators.matmul import model_product

HIGH, MEDIUM = Precision.HIGH, Precision.MEDIUM
BF16 = finfo(bfloat16)


def tile_by_tile(
    a: np.ndarray, b: np.ndarray, level: Precision, tile_k: int
) -> np.ndarray:
    """The formulation the batched tiles replaced: one matmul per K tile."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        if level is MEDIUM:
            a, b = bfp16.quantize(a, axis=-1), bfp16.quantize(b, axis=-2)
        lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        acc = np.zeros((*lead, a.shape[-2], b.shape[-1]), np.float32)
        for start in range(0, a.shape[-1], tile_k):
            part = np.matmul(
                a[..., start : start + tile_k], b[..., start : start + tile_k, :]
            )
            acc = (acc + part).astype(bfloat16).astype(np.float32)
        return acc.astype(bfloat16)


def bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).view(np.uint16)


def assert_same_bits(a, b, level, tile_k) -> None:
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        got = model_product(a, b, level, tile_k)
    want = tile_by_tile(a, b, level, tile_k)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(bits(got), bits(want))


def random_bf16(rng, shape, scale=1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(bfloat16)


def adversarial(rng, shape) -> np.ndarray:
    """bf16 extremes, zeros of both signs, subnormals and ordinary values."""
    pool = np.array(
        [
            0.0,
            -0.0,
            float(BF16.max),
            -float(BF16.max),
            float(BF16.smallest_normal),
            -float(BF16.smallest_normal),
            float(BF16.smallest_subnormal),
            -float(BF16.smallest_subnormal),
            float(BF16.smallest_subnormal) * 37,
            1.0,
            -1.0,
            1.0 + float(BF16.eps),
            2.0**60,
            -(2.0**-60),
        ],
        np.float32,
    )
    picks = pool[rng.integers(0, len(pool), shape)]
    mixed = np.where(
        rng.random(shape) < 0.5, picks, rng.standard_normal(shape).astype(np.float32)
    )
    return mixed.astype(bfloat16)


CASES = [
    # (a shape, b shape, tile_k): GEMV as (M, K) @ (K, 1), GEMM, batched GEMV
    ((8, 64), (64, 1), 16),
    ((96, 256), (256, 1), 32),
    ((256, 2048), (2048, 1), 128),
    ((33, 512), (512, 1), 64),
    ((16, 128), (128, 48), 32),
    ((5, 256), (256, 96), 16),
    ((4, 24, 128), (4, 128, 1), 32),
    ((3, 7, 96), (3, 96, 5), 16),
]


@pytest.mark.parametrize("level", [HIGH, MEDIUM])
@pytest.mark.parametrize(("a_shape", "b_shape", "tile_k"), CASES)
def test_random_inputs_keep_their_bits(level, a_shape, b_shape, tile_k):
    rng = np.random.default_rng(sum(a_shape) * 31 + tile_k)
    a, b = random_bf16(rng, a_shape), random_bf16(rng, b_shape, scale=3.0)
    assert_same_bits(a, b, level, tile_k)


@pytest.mark.parametrize("level", [HIGH, MEDIUM])
@pytest.mark.parametrize(("a_shape", "b_shape", "tile_k"), CASES)
def test_adversarial_inputs_keep_their_bits(level, a_shape, b_shape, tile_k):
    rng = np.random.default_rng(sum(b_shape) * 17 + tile_k)
    a, b = adversarial(rng, a_shape), adversarial(rng, b_shape)
    assert_same_bits(a, b, level, tile_k)


def test_all_zero_and_subnormal_operands_keep_their_bits():
    tiny = float(BF16.smallest_subnormal)
    a = np.full((64, 256), tiny, bfloat16)
    a[::2] = -0.0
    b = np.full((256, 3), -tiny, bfloat16)
    for tile_k in (16, 64, 256):
        assert_same_bits(a, b, HIGH, tile_k)
        assert_same_bits(np.zeros_like(a), b, MEDIUM, tile_k)


def test_a_long_k_keeps_its_bits():
    rng = np.random.default_rng(3)
    a, b = random_bf16(rng, (64, 16384)), random_bf16(rng, (16384, 1))
    for tile_k in (16, 256, 8192):
        assert_same_bits(a, b, HIGH, tile_k)


def test_a_transposed_b_and_a_strided_a_keep_their_bits():
    """GEMM's b_transposed hands model_product ``b.T``: views, not copies."""
    rng = np.random.default_rng(4)
    bt = random_bf16(rng, (80, 512)).astype(np.float32)
    a = random_bf16(rng, (12, 1024)).astype(np.float32)[:, ::2]  # strided rows
    assert not a.flags.c_contiguous
    for tile_k in (16, 128):
        assert_same_bits(a, bt.T, HIGH, tile_k)
        assert_same_bits(a, bt.T, MEDIUM, tile_k)


def test_a_last_short_tile_keeps_its_bits():
    rng = np.random.default_rng(5)
    a, b = random_bf16(rng, (40, 200)), random_bf16(rng, (200, 2))
    for tile_k in (16, 48, 64, 300):  # K = 200 is no multiple of these
        assert_same_bits(a, b, HIGH, tile_k)


def test_products_too_large_for_one_call_are_made_in_groups():
    """16 tiles of 16 x 4096 float32 products (4 MB) exceed one call's 1 MB."""
    rng = np.random.default_rng(6)
    a, b = random_bf16(rng, (16, 256)), random_bf16(rng, (256, 4096))
    assert_same_bits(a, b, HIGH, 16)
    assert_same_bits(a, b, MEDIUM, 16)
