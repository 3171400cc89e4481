"""The docs' pictures and printed plans are current: regenerated, they match."""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET

import numpy as np

import iron
from iron.operators import AXPY, ReLU

SVG = "{http://www.w3.org/2000/svg}"


def _gen_pictures(root):
    sys.path.insert(0, str(root / "docs"))
    try:
        import gen_pictures
    finally:
        sys.path.remove(str(root / "docs"))
    return gen_pictures


def _visible(text: str) -> list[str]:
    """What a reader sees of a picture: its text elements, not its tooltips."""
    return [t.text or "" for t in ET.fromstring(text).iter(f"{SVG}text")]


def test_committed_pictures_are_current(root):
    gen_pictures = _gen_pictures(root)
    for name, text in gen_pictures.pictures().items():
        ET.fromstring(text)  # valid XML
        committed = (root / "docs" / "images" / name).read_text()
        assert committed == text, (
            f"docs/images/{name} is stale: run docs/gen_pictures.py"
        )


class ReluThenAxpy(iron.Graph):
    def __init__(self, scalar_factor=2.0):
        self.scalar_factor = scalar_factor

    def body(self, x, y):
        return AXPY.step(ReLU.step(x), y, scalar_factor=self.scalar_factor)


def test_the_planning_page_shows_the_reports_as_printed(root):
    page = (root / "docs" / "guide" / "planning.md").read_text()
    for device in ("npu1", "npu2"):
        with iron.use_device(device):
            recording = ReluThenAxpy().record(x=(2048,), y=(2048,))
            report = iron.plan(device, recording).report("ReluThenAxpy")
        assert report in page, f"docs/guide/planning.md shows a stale {device} report"


def test_the_pictures_say_sizes_in_kib_and_mib(root):
    for name in ("arena-chain.svg", "arena-llama-decode.svg", "arena-versions-big.svg"):
        shown = " ".join(_visible((root / "docs" / "images" / name).read_text()))
        assert re.search(r"\d (KiB|MiB)\b", shown), name
        assert not re.search(r"\b\d{4,} B\b", shown), f"{name} shows raw bytes"


def test_the_llama_arena_picture_shows_its_transients(root):
    """Section 9's arena: the transients, a few KiB under MiB of weights, drawn."""
    text = (root / "docs" / "images" / "arena-llama-decode.svg").read_text()
    groups = {g.get("class"): g for g in ET.fromstring(text).iter(f"{SVG}g")}
    drawn = {
        r.find(f"{SVG}title").text.split(" ")[0]
        for r in groups["transients"].iter(f"{SVG}rect")
        if r.find(f"{SVG}title") is not None
    }
    # the same plan gen_pictures draws: every transient of the decode version
    from iron.lm import tiny
    from iron.lm.config import LlamaConfig
    from iron.lm.model import Llama

    config = LlamaConfig.tiny(num_hidden_layers=4)
    model = Llama(config, context=256, rows=16, profile=None)
    model.load_state_dict(tiny.random_state_dict(config))
    prompt = iron.plan("npu2", model.record(tokens=((16,), np.int32)))
    planned = iron.plan("npu2", model.record(), arena=prompt.arena)
    arena, decode = planned.arena, planned.version
    transients = {
        p.name for p in arena.versions[decode].values() if p.kind == "transient"
    }
    assert transients and drawn == transients
    # too thin to see in one panel: why the second exists
    assert arena.transient_bytes(decode) < arena.size / 100


def test_the_roofline_picture_fits_the_page_on_a_log_axis(root):
    """Drawn at the page's width (its 10 px text shows at 10 px) on a log axis."""
    text = (root / "docs" / "images" / "roofline-llama-decode.svg").read_text()
    svg = ET.fromstring(text)
    assert float(svg.get("width")) <= 720
    assert any("log scale" in t for t in _visible(text))
