"""Regenerate the pictures in docs/images (tests check they are current).

Run: ``python docs/gen_pictures.py``. The pictures of Section 4 draw the
arena of ``examples/device_memory.py``'s graph, so they change with it; those
of Sections 2 and 9 draw recordings (laid out by the one pure-Python engine,
so they are the same on every machine), an arena and a roofline of Llama.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
from ml_dtypes import bfloat16

import iron
from iron.lm import tiny
from iron.lm.config import LlamaConfig
from iron.lm.model import Llama
from iron.operators import AXPY, ReLU

IMAGES = Path(__file__).resolve().parent / "images"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
LLAMA_1B = (
    Path(__file__).resolve().parent.parent
    / "packages/iron-lm/src/iron/lm/applications/llama/configs/llama-3.2-1b.json"
)


class Chain(iron.Graph):
    """Four steps of growing and shrinking vectors around a held weight."""

    def __init__(self):
        self.bias = iron.param(np.ones(4096, bfloat16))

    def body(self, x):
        a = ReLU.step(x)
        b = AXPY.step(a, self.bias, scalar_factor=0.5)
        c = ReLU.step(b)
        return AXPY.step(c, a, scalar_factor=-1.0)


class ReluThenAxpy(iron.Graph):
    """Section 2's first graph: ``scalar_factor * relu(x) + y``."""

    def __init__(self, scalar_factor=2.0):
        self.scalar_factor = scalar_factor

    def body(self, x, y):
        activated = ReLU.step(x)
        return AXPY.step(activated, y, scalar_factor=self.scalar_factor)


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
        arena = iron.plan("npu2", Chain().record(x=(4096,))).arena
        drawn = {"arena-chain.svg": iron.arena_svg(arena)}
        # Section 4: both versions of one graph planned into one arena.
        memory = _example("device_memory")
        graph = memory.Clipped()
        shared = iron.ArenaPlan()
        versions = {}
        for rows, label in ((memory.SMALL, "small"), (memory.BIG, "big")):
            recording = graph.record(x=(rows, memory.COLS))
            planned = iron.plan("npu2", recording, arena=shared)
            shared, versions[label] = planned.arena, planned.version
        for label, version in versions.items():
            drawn[f"arena-versions-{label}.svg"] = iron.arena_svg(shared, version)
        drawn.update(_llama_pictures())
    return drawn


def _llama_pictures() -> dict[str, str]:
    """Section 2's graph, and Section 9's Llama: a layer, an arena, a roofline."""
    first = ReluThenAxpy(scalar_factor=2.0).record(x=(2048,), y=(2048,))
    drawn = {"recording-first-graph.svg": iron.recording_svg(first)}

    # one decoder layer: the decode version of a one-layer tiny Llama
    config = LlamaConfig.tiny(num_hidden_layers=1)
    layer = Llama(config, context=64, rows=16, profile=None)
    layer.load_state_dict(tiny.random_state_dict(config))
    drawn["recording-llama-layer.svg"] = iron.recording_svg(
        layer.record(),
        title="One Llama layer: the decode version of a 1-layer tiny Llama",
    )

    # the prompt and decode versions of a 4-layer tiny Llama in one arena
    config = LlamaConfig.tiny(num_hidden_layers=4)
    model = Llama(config, context=256, rows=16, profile=None)
    model.load_state_dict(tiny.random_state_dict(config))
    prompt = iron.plan("npu2", model.record(tokens=((16,), np.int32)))
    planned = iron.plan("npu2", model.record(), arena=prompt.arena)
    arena, decode = planned.arena, planned.version
    drawn["arena-llama-decode.svg"] = iron.arena_svg(arena, decode)

    # Llama-3.2-1B's decode version, modelled: placeholder weights cost nothing
    config = LlamaConfig.from_json(LLAMA_1B)
    model = Llama(config, context=2048)
    zero = np.zeros((), bfloat16)
    model.load_state_dict(
        {
            name: iron.param(np.broadcast_to(zero, shape))
            for name, shape in tiny.state_dict_shapes(config).items()
        }
    )
    drawn["roofline-llama-decode.svg"] = iron.roofline_svg(
        iron.roofline(model.record()),
        title="Llama-3.2-1B decode on npu2, modelled per step",
        scale="log",  # the LM head's bar is ten times the next tallest
    )
    return drawn


if __name__ == "__main__":
    IMAGES.mkdir(exist_ok=True)
    for name, text in pictures().items():
        (IMAGES / name).write_text(text)
        print(f"wrote {IMAGES / name}")
