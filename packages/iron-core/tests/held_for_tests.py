"""Arrays and small graphs shared by the ``test_held_*`` files.

``f32`` and ``bf16`` make reproducible random arrays; ``Leaf`` holds one
param and ``Norm`` is a plain dataclass holding one, so a graph can hold
params below a list, a dict, a dataclass or another graph.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from ml_dtypes import bfloat16
from operators_for_tests import Mul

import iron


def f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def bf16(*shape: int, seed: int = 0) -> np.ndarray:
    return f32(*shape, seed=seed).astype(bfloat16)


@dataclasses.dataclass
class Norm:
    scale: np.ndarray


class Leaf(iron.Graph):
    def __init__(self):
        self.w = iron.param(bf16(8))

    def body(self, x):
        return Mul.step(x, self.w)
