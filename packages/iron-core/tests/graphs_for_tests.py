"""Small graphs and host arithmetic shared by the ``test_graph_*`` files.

The operators are the tiny ones in ``operators_for_tests`` (iron-core's tests never
import iron.operators); ``scale`` and ``mul`` round as Scale and Mul do, so a
test compares a graph's reference with numpy.
"""

from __future__ import annotations

import numpy as np
from ml_dtypes import bfloat16
from operators_for_tests import Mul, Scale

import iron


def bf16(*shape: int, seed: int = 0) -> np.ndarray:
    """Random bf16 values, reproducible."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(np.float32).astype(bfloat16)


def scale(x: np.ndarray, factor: float) -> np.ndarray:
    """Scale's rounding: fp32 product rounded once to bf16."""
    return (np.float32(factor) * x.astype(np.float32)).astype(bfloat16)


def mul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (x.astype(np.float32) * y.astype(np.float32)).astype(bfloat16)


class ScaleThenMul(iron.Graph):
    """``factor * x * y``: two steps, like the spec's ReluThenAxpy."""

    def __init__(self, factor: float = 2.0):
        self.factor = factor

    def body(self, x, y):
        return Mul.step(Scale.step(x, factor=self.factor), y)


class Head(iron.Graph):
    """``factor * x[:n]``: a per-call bound with a default."""

    def body(self, x, *, n: iron.Scratchpad[int] = 4):
        return Scale.step(x[:n], factor=3.0)


class Row(iron.Graph):
    """Row ``position`` of a matrix, scaled."""

    def body(self, x, *, position: iron.Scratchpad[int]):
        return Scale.step(x[position], factor=2.0)


def scale_profile(**tunables) -> iron.Profile:
    profile = iron.Profile()
    profile.add(Scale, size=16, **tunables)
    return profile


class Inner(iron.Graph):
    """Holds a weight; its steps take tunables from its own profile."""

    def __init__(self, value: float = 2.0):
        self.w = iron.param(np.full(16, value, bfloat16))
        self.profile = scale_profile(tile_size=2)

    def block(self, x):
        return Scale.step(x, factor=0.5)

    def body(self, x):
        return Mul.step(self.block(x), self.w)


class Calls(iron.Graph):
    def __init__(self):
        self.inner = Inner(3.0)

    def body(self, x):
        return Scale.step(self.inner(x), factor=2.0)
