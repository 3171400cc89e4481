"""model_product widens a large bf16 weight in blocks: the same bits as whole.

The emulator hands a weight it keeps no float32 copy of to the kernel model
as bf16 (issue 20, target 6); the model then widens a GEMV's rows, or a
large GEMM weight's columns, a cache's worth at a time. Every result must be
the bits of the float32 copy's.
"""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16

from iron.core.precision import Precision
from iron.core.tolerance import compare
from iron.operators import GEMM, GEMV
from iron.operators import _matmul_math as mm


def _bf16(shape, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 0.1).astype(bfloat16)


def _bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).view(np.uint16)


@pytest.mark.parametrize("level", [Precision.HIGHEST, Precision.HIGH, Precision.MEDIUM])
@pytest.mark.parametrize("rows", [1000, 49152 // 8, 4099])
def test_a_gemv_of_a_bf16_weight_in_row_blocks_is_the_float32_copy_bits(level, rows):
    w, x = _bf16((rows, 576), seed=rows), _bf16((576,), seed=1)
    a, b = w, x[:, None]
    assert mm._row_block(a, b)  # the weight is split
    assert not mm._row_block(a.astype(np.float32), b)  # its copy is not
    blocked = mm.model_product(a, b, level, 64)
    whole = mm.model_product(a.astype(np.float32), b, level, 64)
    np.testing.assert_array_equal(_bits(blocked), _bits(whole))


def test_a_batched_gemv_is_split_too():
    w, x = _bf16((2, 1024, 576), seed=2), _bf16((2, 576), seed=3)
    op = GEMV(M=1024, K=576, batch=2)
    assert mm._row_block(w, x[..., None])
    np.testing.assert_array_equal(
        _bits(op.reference(w, x)), _bits(op.reference(w.astype(np.float32), x))
    )


@pytest.mark.parametrize("level", [Precision.HIGHEST, Precision.HIGH])
def test_a_large_gemm_weight_is_split_by_columns_in_either_dtype(level):
    """A head's (N, K) weight over 16 MB as float32: the same calls either way."""
    head, h = _bf16((8192, 576), seed=4), _bf16((16, 576), seed=5)
    b = head.T
    assert mm._column_block(b) and mm._column_block(head.astype(np.float32).T)
    narrow = mm.model_product(h, b, level, 64)
    wide = mm.model_product(h, head.astype(np.float32).T, level, 64)
    np.testing.assert_array_equal(_bits(narrow), _bits(wide))
    if level is Precision.HIGHEST:  # still the product, within its tolerance
        op = GEMM(M=16, K=576, N=8192, b_transposed=True)
        exact = h.astype(np.float64) @ head.astype(np.float64).T
        assert compare(narrow, exact, op.tolerance(h, head))


def test_small_operands_are_made_whole():
    w = _bf16((64, 576), seed=6)
    assert not mm._row_block(w, _bf16((576, 1), seed=7))
    assert not mm._column_block(w.T)
