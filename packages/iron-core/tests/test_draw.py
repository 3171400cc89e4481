"""Pictures: a recording drawn as a graph (one engine), a roofline as bars."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from ml_dtypes import bfloat16
from operators_for_tests import ArgMax, Copy, Crunch, MatVec, Mul, Scale, Stream

import iron
from iron.core.pictures import layered

SVG = "{http://www.w3.org/2000/svg}"

ENGINES = ["auto", "python"]  # two names of the one engine


class Layered(iron.Graph):
    """Every kind of node: inputs, a weight, a state, an output, a carry."""

    def __init__(self):
        self.w = iron.param(np.ones((8, 16), bfloat16))
        self.cache = iron.state(8)

    def body(self, x, y, *, token: iron.Carried[int] = 0):
        a = Scale.step(x, factor=2.0)  # x -> #0
        m = MatVec.step(self.w, a)  # w, #0 -> #1
        Copy.step(m, out=self.cache)  # #1 -> #2 -> cache
        b = Mul.step(self.cache, y)  # cache, y -> #3
        c = Mul.step(b, b)  # #3 -> #4, once though read twice
        t = ArgMax.step(c)  # #4 -> #5
        return c, iron.carry(token=t)  # #4 -> output, #5 -> carry token


# (producer, consumer) of each buffer use in Layered, by node name
LAYERED_EDGES = {
    ("x", "#0 Scale"),
    ("#0 Scale", "#1 MatVec"),
    ("w", "#1 MatVec"),
    ("#1 MatVec", "#2 Copy"),
    ("#2 Copy", "cache"),
    ("cache", "#3 Mul"),
    ("y", "#3 Mul"),
    ("#3 Mul", "#4 Mul"),
    ("#4 Mul", "#5 ArgMax"),
    ("#4 Mul", "output"),
    ("#5 ArgMax", "carry token"),
}


class Accumulate(iron.Graph):
    """A state read, then written: the write feeds the next call."""

    def __init__(self):
        self.total = iron.state(8)

    def body(self, x):
        s = Mul.step(self.total, x)
        Copy.step(s, out=self.total)
        return s


def show(*args) -> None:
    """A host step (named, so pictures are stable)."""


class WithHost(iron.Graph):
    """A host step between two steps, writing a state the second reads."""

    def __init__(self):
        self.st = iron.state(8)

    def body(self, x):
        a = Scale.step(x)
        iron.on_host(show, a, writes=self.st)
        return Mul.step(a, self.st)


def groups(svg: str, kind: str) -> list[ET.Element]:
    """The ``<g>`` elements whose class starts with ``kind`` (legend excluded)."""
    root = ET.fromstring(svg)
    found = []
    for g in root.iter(f"{SVG}g"):
        classes = g.get("class", "").split()
        if classes[:1] == [kind] and "legend" not in classes:
            found.append(g)
    return found


def kinds(svg: str) -> list[str]:
    """Each node's kind (its second class), in document order."""
    return sorted(g.get("class", "").split()[1] for g in groups(svg, "node"))


def title(g: ET.Element) -> str:
    element = g.find(f"{SVG}title")
    assert element is not None
    return element.text or ""


@pytest.mark.parametrize("engine", ENGINES)
def test_one_node_per_step_input_output_weight_and_state(engine):
    recording = Layered().record(x=(16,), y=(8,))
    svg = iron.recording_svg(recording, engine=engine)
    assert kinds(svg) == sorted(
        ["step"] * 6 + ["input"] * 2 + ["output", "carry", "weight", "state"]
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_one_edge_per_producer_consumer_buffer_use(engine):
    recording = Layered().record(x=(16,), y=(8,))
    svg = iron.recording_svg(recording, engine=engine)
    assert len(groups(svg, "edge")) == len(LAYERED_EDGES)


def test_python_edges_join_each_buffers_producer_to_its_consumers():
    recording = Layered().record(x=(16,), y=(8,))
    svg = iron.recording_svg(recording, engine="python")
    found = set()
    for g in groups(svg, "edge"):
        ends = title(g).split(": ", 1)[1]
        producer, consumer = ends.split(" -> ")
        found.add((producer, consumer))
    assert found == LAYERED_EDGES
    # a step's output edge is labelled with its buffer's name and shape
    labels = {t.text for t in ET.fromstring(svg).iter(f"{SVG}text")}
    assert "scale0 [16]" in labels and "matvec1 [8]" in labels


@pytest.mark.parametrize("engine", ENGINES)
def test_weights_and_states_are_marked_and_drawn_apart(engine):
    recording = Layered().record(x=(16,), y=(8,))
    svg = iron.recording_svg(recording, engine=engine)
    (weight,) = [g for g in groups(svg, "node") if "weight" in g.get("class", "")]
    (state,) = [g for g in groups(svg, "node") if "state" in g.get("class", "")]
    _, weight_fill, _ = layered.STYLE["weight"]
    _, state_fill, _ = layered.STYLE["state"]
    assert weight_fill != state_fill
    assert weight_fill in ET.tostring(weight, encoding="unicode")
    assert state_fill in ET.tostring(state, encoding="unicode")
    assert "weight" in title(weight)
    # the legend names each kind drawn
    for text in ("weight", "state", "input", "output", "step"):
        assert f">{text}<" in svg


@pytest.mark.parametrize("engine", ENGINES)
def test_drawing_is_deterministic_and_titled(engine):
    recording = Layered().record(x=(16,), y=(8,))
    first = iron.recording_svg(recording, engine=engine, title="Layered & co")
    assert first == iron.recording_svg(
        Layered().record(x=(16,), y=(8,)), engine=engine, title="Layered & co"
    )
    root = ET.fromstring(first)
    assert "Layered & co" in [t.text for t in root.iter(f"{SVG}title")]


def test_the_default_title_counts_what_the_recording_holds():
    recording = Layered().record(x=(16,), y=(8,))
    svg = iron.recording_svg(recording, engine="python")
    assert title(ET.fromstring(svg)) == (
        "Layered on npu2: 6 steps, 2 inputs, 1 output, 1 weight, 1 state"
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_a_write_into_a_state_read_earlier_is_a_dashed_next_call_edge(engine):
    recording = Accumulate().record(x=(8,))
    svg = iron.recording_svg(recording, engine=engine)
    # total -> #0, x -> #0, #0 -> #1, #0 -> output, and #1 -> total (back)
    assert len(groups(svg, "edge")) == 5
    back = [g for g in groups(svg, "edge") if "back" in g.get("class", "")]
    assert len(back) == 1
    assert 'stroke-dasharray="' in ET.tostring(back[0], encoding="unicode")


@pytest.mark.parametrize("engine", ENGINES)
def test_host_steps_are_nodes(engine):
    recording = WithHost().record(x=(8,))
    svg = iron.recording_svg(recording, engine=engine)
    assert kinds(svg) == ["host", "input", "output", "state", "step", "step"]
    # x -> #0, #0 -> host, host -> st, st -> #1, #0 -> #1, #1 -> output
    assert len(groups(svg, "edge")) == 6


def test_a_picture_does_not_depend_on_graphviz(tmp_path, monkeypatch):
    """A ``dot`` on PATH changes nothing: the one engine is pure Python."""
    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\necho '<svg>laid out by dot</svg>'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    recording = Layered().record(x=(16,), y=(8,))
    svg = iron.recording_svg(recording)
    assert "laid out by dot" not in svg
    assert svg == iron.recording_svg(recording, engine="python")


def test_engine_dot_is_refused_naming_the_one_engine():
    recording = Layered().record(x=(16,), y=(8,))
    with pytest.raises(ValueError, match="engine='dot'") as info:
        iron.recording_svg(recording, engine="dot")
    message = str(info.value)
    assert "Graphviz" in message and "pure-Python layered engine" in message
    assert "engine='auto'" in message


def test_an_unknown_engine_is_refused():
    recording = Layered().record(x=(16,), y=(8,))
    with pytest.raises(ValueError, match="engine='neato' is not one of"):
        iron.recording_svg(recording, engine="neato")


def test_a_long_chain_lays_out_in_order_top_to_bottom():
    class Chain(iron.Graph):
        def body(self, x):
            for _ in range(6):
                x = Scale.step(x)
            return x

    svg = iron.recording_svg(Chain().record(x=(16,)), engine="python")
    tops = []
    for g in groups(svg, "node"):
        rect = g.find(f"{SVG}rect")
        assert rect is not None
        tops.append(float(rect.get("y", "0")))
    assert tops == sorted(tops) and len(set(tops)) == len(tops)


# -- the roofline ---------------------------------------------------------------


class Costed(iron.Graph):
    def body(self, x):
        for _ in range(3):
            x = Crunch.step(Stream.step(x))
        return x


def test_roofline_svg_has_one_bar_per_step():
    roofline = iron.roofline(Costed().record(x=(4096,)))
    svg = iron.roofline_svg(roofline)
    bars = groups(svg, "bar")
    assert len(bars) == len(roofline.steps) == 6
    assert title(bars[0]).startswith("#0 Stream")
    assert svg == iron.roofline_svg(roofline)  # deterministic
    root = ET.fromstring(svg)
    assert title(root).startswith("Costed on npu2")
    # the version's bandwidth bound against its modelled time
    (summary,) = groups(svg, "summary")
    assert f"{roofline.bandwidth_bound_s / roofline.seconds:.0%}" in title(summary)


def test_roofline_svg_stacks_npu1s_configuration_loads():
    """Issue 28: npu1 loads a configuration every step; its bars stack the
    load, its legend names it, and npu2 (loads assumed free) shows none."""
    recording = Costed().record(x=(4096,))
    npu1 = iron.roofline_svg(iron.roofline(recording, "npu1"))
    assert ">reconfigure</text>" in npu1
    assert "+ reconfigure 6600" in title(groups(npu1, "bar")[0])
    npu2 = iron.roofline_svg(iron.roofline(recording, "npu2"))
    assert "reconfigure" not in npu2


def test_roofline_svg_names_the_slowest_steps_alike_once():
    roofline = iron.roofline(Costed().record(x=(4096,)))
    svg = iron.roofline_svg(roofline, label=1, title="t")
    named = [
        t.text
        for t in ET.fromstring(svg).iter(f"{SVG}text")
        if t.get("class") == "slowest"
    ]
    slowest = roofline.slowest(1)[0]
    assert len(named) == 1
    assert named[0].startswith(f"#{slowest.index} {slowest.name} ")
    assert named[0].endswith("(x3)")  # three Crunch steps alike


class Lopsided(iron.Graph):
    """Three short memory-bound steps, then one a thousand times longer."""

    def body(self, x):
        for _ in range(3):
            x = Stream.step(x)
        return Crunch.step(x)


def _ticks(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    return [t.text for t in root.iter(f"{SVG}text") if t.get("text-anchor") == "end"]


def _bar_heights(svg: str) -> list[float]:
    """Each bar's height in pixels (its parts together)."""
    root = ET.fromstring(svg)
    bars = [g for g in root.iter(f"{SVG}g") if g.get("class") == "bar"]
    return [sum(float(r.get("height")) for r in g.iter(f"{SVG}rect")) for g in bars]


def test_roofline_svg_log_scale_shows_the_bars_a_long_step_dwarfs():
    roofline = iron.roofline(Lopsided().record(x=(512,)))
    linear = iron.roofline_svg(roofline)
    log = iron.roofline_svg(roofline, scale="log")
    # linear: the short steps' bars (1 and 2; step 0 pays the dispatch) are
    # lost under the long one's
    assert max(_bar_heights(linear)[1:3]) < 2.0
    # log: decades on the axis, and each small bar plainly visible
    ticks = [float(t) for t in _ticks(log)]
    assert len(ticks) >= 2
    assert all(b == pytest.approx(10 * a) for a, b in zip(ticks, ticks[1:])), ticks
    assert min(_bar_heights(log)[1:3]) > 20.0
    assert "log scale" in log
    assert log == iron.roofline_svg(roofline, scale="log")  # deterministic


def test_roofline_svg_log_axis_spans_at_most_five_decades():
    roofline = iron.roofline(Lopsided().record(x=(512,)))
    ticks = [float(t) for t in _ticks(iron.roofline_svg(roofline, scale="log"))]
    assert 2 <= len(ticks) <= 6
    assert ticks[-1] / ticks[0] <= 1e5


def test_roofline_svg_refuses_an_unknown_scale():
    roofline = iron.roofline(Costed().record(x=(4096,)))
    with pytest.raises(
        ValueError, match=r"scale='symlog' is not one of 'linear' or 'log'"
    ):
        iron.roofline_svg(roofline, scale="symlog")


@pytest.mark.parametrize(
    ("nbytes", "shown"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (2560, "2.5 KiB"),
        (98816, "96.5 KiB"),
        (2026816, "1.93 MiB"),
        (2539860032, "2.37 GiB"),
    ],
)
def test_pictures_say_sizes_in_binary_units(nbytes, shown):
    from iron.core.pictures.svg import byte_size

    assert byte_size(nbytes) == shown
