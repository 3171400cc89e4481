"""The docs' pictures and printed plans are current: regenerated, they match."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

import iron
from iron.operators import AXPY, ReLU


def test_committed_pictures_are_current(root):
    sys.path.insert(0, str(root / "docs"))
    try:
        import gen_pictures
    finally:
        sys.path.remove(str(root / "docs"))
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
