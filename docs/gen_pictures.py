"""Regenerate the pictures in docs/images (tests check they are current).

Run: ``python docs/gen_pictures.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from ml_dtypes import bfloat16

import iron
from iron.operators import AXPY, ReLU

IMAGES = Path(__file__).resolve().parent / "images"


class Chain(iron.Graph):
    """Four steps of growing and shrinking vectors around a held weight."""

    def __init__(self):
        self.bias = iron.param(np.ones(4096, bfloat16))

    def body(self, x):
        a = ReLU.step(x)
        b = AXPY.step(a, self.bias, scalar_factor=0.5)
        c = ReLU.step(b)
        return AXPY.step(c, a, scalar_factor=-1.0)


def pictures() -> dict[str, str]:
    """Each picture's file name and its SVG text."""
    with iron.use_device("npu2"):
        arena = iron.ArenaPlan()
        iron.plan("npu2", Chain().record(x=(4096,)), arena=arena)
    return {"arena-chain.svg": iron.arena_svg(arena)}


if __name__ == "__main__":
    IMAGES.mkdir(exist_ok=True)
    for name, text in pictures().items():
        (IMAGES / name).write_text(text)
        print(f"wrote {IMAGES / name}")
