"""ArenaPlan.check() on broken plans, and the plan's report and SVG.

check() catches overlapping, misaligned and moved buffers and a transient over
another version's resident; report() and arena_svg() describe every buffer.
"""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET

import pytest
from arena_for_tests import Chain, Held, record

from iron.core.arena import Allocation, ArenaInvariantError, ArenaPlan, arena_svg


def test_check_catches_an_overlap():
    recording = record(Chain([256, 512, 256, 128]), x=(64,))
    plan = ArenaPlan()
    placed = plan.add(recording)
    a, b = placed["resize0"], placed["resize1"]
    assert a.last >= b.first
    placed["resize0"] = dataclasses.replace(a, offset=b.offset)
    with pytest.raises(ArenaInvariantError, match=r"resize0.*resize1.*share bytes"):
        plan.check()


def test_check_catches_a_misaligned_offset():
    plan = ArenaPlan()
    placed = plan.add(record(Chain([256, 512, 256]), x=(64,)))
    placed["resize1"] = dataclasses.replace(placed["resize1"], offset=8)
    with pytest.raises(ArenaInvariantError, match="offset 8, not a multiple of 64"):
        plan.check()


def test_check_catches_a_moved_resident():
    graph = Held([64], [32], [128, 64])
    plan = ArenaPlan()
    plan.add(record(graph, x=(16,)))
    placed = plan.add(record(graph, x=(32,)))
    name = next(n for n, p in placed.items() if p.kind == "resident")
    placed[name] = dataclasses.replace(placed[name], offset=placed[name].offset + 64)
    with pytest.raises(ArenaInvariantError, match=f"resident {name!r}"):
        plan.check()
    assert issubclass(ArenaInvariantError, ValueError)


def test_check_catches_a_transient_over_a_resident_of_another_version():
    graph = Held([1024], [], [64, 64])
    plan = ArenaPlan()
    plan.add(record(graph, x=(16,)), version="a")
    placed = plan.add(record(Chain([64, 64, 64]), x=(16,)), version="b")
    resident = plan.residents["w.0"]
    placed["resize0"] = dataclasses.replace(placed["resize0"], offset=resident.offset)
    with pytest.raises(ArenaInvariantError, match="w.0"):
        plan.check()


def test_placed_and_report():
    p = Allocation("t", 128, 100, 2, 5, "transient")
    assert p.end == 228 and p.in_arena and p.live_at(5) and not p.live_at(6)
    assert not Allocation("x", 0, 4, 0, 1, "input").in_arena
    plan = ArenaPlan()
    plan.add(record(Held([64], [32], [128, 256, 64]), x=(16,)))
    text = plan.report()
    assert text.startswith("Arena of Held(x=16 bf16)")
    for word in ("resident", "transient", "input", "output", "lower bound", "ratio"):
        assert word in text
    with pytest.raises(KeyError, match="add"):
        plan.report("nope")
    with pytest.raises(ValueError, match="add"):
        ArenaPlan().report()
    with pytest.raises(ValueError, match="power of two"):
        ArenaPlan(align=48)
    assert ArenaPlan().buffers == {} and ArenaPlan().size == 0


def test_svg_is_valid_xml_with_one_rect_per_arena_buffer():
    plan = ArenaPlan()
    plan.add(record(Held([64, 128], [32], [128, 256, 64, 512]), x=(16,)))
    svg = arena_svg(plan)
    assert svg == arena_svg(plan)
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    rects = [r for r in root.iter(f"{ns}rect") if r.find(f"{ns}title") is not None]
    arena = [p for p in plan.buffers.values() if p.in_arena]
    assert len(rects) == len(arena)
    tips = {r.find(f"{ns}title").text.split(" ")[0] for r in rects}
    assert tips == {p.name for p in arena}
    assert "lower bound" in root.find(f"{ns}title").text


def _visible(svg: str) -> list[str]:
    """The text a reader sees: every <text> element, not the tooltips."""
    ns = "{http://www.w3.org/2000/svg}"
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{ns}text")]


def _panel_tips(svg: str, panel: str) -> set[str]:
    ns = "{http://www.w3.org/2000/svg}"
    (group,) = [g for g in ET.fromstring(svg).iter(f"{ns}g") if g.get("class") == panel]
    return {
        r.find(f"{ns}title").text.split(" ")[0]
        for r in group.iter(f"{ns}rect")
        if r.find(f"{ns}title") is not None
    }


def test_svg_sizes_read_in_binary_units_not_raw_bytes():
    plan = ArenaPlan()
    plan.add(record(Held([4096], [], [2048, 1024, 2048]), x=(2048,)))
    svg = arena_svg(plan)
    shown = " ".join(_visible(svg))
    assert "KiB" in shown
    # no count of bytes a reader must divide by 1024 (the tooltips keep them)
    assert not re.search(r"\b\d{4,} B\b", shown), shown
    assert "bytes [" in svg  # exact figures in the tooltips


def test_svg_zooms_on_transients_too_thin_to_see():
    # a 1 MiB weight against 128-byte transients: one panel would show a hairline
    plan = ArenaPlan()
    plan.add(record(Held([512 * 1024], [], [64, 128, 64]), x=(64,)))
    svg = arena_svg(plan)
    transients = {p.name for p in plan.buffers.values() if p.kind == "transient"}
    assert transients and _panel_tips(svg, "transients") == transients
    assert transients < _panel_tips(svg, "arena")  # drawn in the whole arena too
    assert 'class="zoomed"' in svg  # the zoomed bytes outlined in the arena
    shown = _visible(svg)
    assert any(t.startswith("transients: ") for t in shown)
    assert "+0 B" in shown  # the zoomed axis counts from its bottom


def test_svg_draws_one_panel_where_transients_show():
    plan = ArenaPlan()
    plan.add(record(Held([64], [], [256, 512, 256]), x=(256,)))
    svg = arena_svg(plan)
    assert "transients" not in {g for g in re.findall(r'<g class="(\w+)"', svg)}
    assert 'class="zoomed"' not in svg
