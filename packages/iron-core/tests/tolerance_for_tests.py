"""bf16 arrays by value or by bit pattern, for the ``test_tolerance_*`` files.

``BF16_MAX`` is the largest finite bf16; ``bf16`` rounds the values given,
``bf16_bits`` reinterprets uint16 patterns (subnormals, NaN payloads).
"""

from __future__ import annotations

import numpy as np
from ml_dtypes import bfloat16

BF16_MAX = float(np.array(0x7F7F, np.uint16).view(bfloat16))


def bf16(*values: float) -> np.ndarray:
    return np.array(values, dtype=bfloat16)


def bf16_bits(*bits: int) -> np.ndarray:
    return np.array(bits, dtype=np.uint16).view(bfloat16)
