"""Regenerate the pictures in docs/images (tests check they are current).

Run: ``python docs/gen_pictures.py``. The pictures of Section 4 draw the
arena of ``examples/device_memory.py``'s graph, so they change with it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
from ml_dtypes import bfloat16

import iron
from iron.operators import AXPY, ReLU

IMAGES = Path(__file__).resolve().parent / "images"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


class Chain(iron.Graph):
    """Four steps of growing and shrinking vectors around a held weight."""

    def __init__(self):
        self.bias = iron.param(np.ones(4096, bfloat16))

    def body(self, x):
        a = ReLU.step(x)
        b = AXPY.step(a, self.bias, scalar_factor=0.5)
        c = ReLU.step(b)
        return AXPY.step(c, a, scalar_factor=-1.0)


def _example(name: str):
    """Import ``examples/<name>.py`` as a module."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pictures() -> dict[str, str]:
    """Each picture's file name and its SVG text."""
    with iron.use_device("npu2"):
        arena = iron.ArenaPlan()
        iron.plan("npu2", Chain().record(x=(4096,)), arena=arena)
        drawn = {"arena-chain.svg": iron.arena_svg(arena)}
        # Section 4: both versions of one graph planned into one arena.
        memory = _example("device_memory")
        graph = memory.Clipped()
        shared = iron.ArenaPlan()
        versions = {}
        for rows, label in ((memory.SMALL, "small"), (memory.BIG, "big")):
            recording = graph.record(x=(rows, memory.COLS))
            versions[label] = iron.plan("npu2", recording, arena=shared).version
        for label, version in versions.items():
            drawn[f"arena-versions-{label}.svg"] = iron.arena_svg(shared, version)
    return drawn


if __name__ == "__main__":
    IMAGES.mkdir(exist_ok=True)
    for name, text in pictures().items():
        (IMAGES / name).write_text(text)
        print(f"wrote {IMAGES / name}")
