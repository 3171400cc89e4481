"""Pictures of a recording's graph, as SVG text (and the roofline's, re-exported).

This module owns :func:`recording_svg`, which draws a
:class:`~iron.core.recording.Recording` as a graph: each step (and host step) a
node, labelled with its operator and key dimensions; each use of a buffer an
edge from the node that wrote it to the node that reads it, labelled with the
buffer's name and shape; the graph's inputs, outputs and carried values as
terminal nodes; weights and states as nodes of their own (weights as
folded-corner notes in orange, states as rounded boxes in red), with a legend.
It lays the graph out with Graphviz's ``dot`` where that is on ``PATH`` (the
engine here), else in pure Python (``iron.core._layout``); the graph itself
is built by ``iron.core._recording_graph``.

:func:`roofline_svg` (defined in :mod:`iron.core.roofline_picture`, re-exported
here) draws a :class:`~iron.core.cost.Roofline` as one bar per step.

Both are deterministic: the same argument gives the same text.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING

from iron.core._layout import _python_svg
from iron.core._recording_graph import _EDGE, _STYLE, _Edge, _graph, _Node
from iron.core.roofline_picture import roofline_svg

if TYPE_CHECKING:
    from iron.core.recording import Recording

__all__ = ["recording_svg", "roofline_svg"]

ENGINES = ("auto", "dot", "python")

DOT_TIMEOUT_S = 60.0
"""How long ``dot`` may take to lay a graph out, in seconds."""


def _default_title(recording: Recording) -> str:
    where = f" on {recording.device.name}" if recording.device is not None else ""
    counts = [
        (len(recording.steps), "step"),
        (len(recording.inputs), "input"),
        (len(recording.outputs), "output"),
        (len(recording.weights), "weight"),
        (len(recording.states), "state"),
    ]
    shown = ", ".join(f"{n} {word}{'' if n == 1 else 's'}" for n, word in counts if n)
    return f"{recording.name}{where}: {shown or 'empty'}"


def recording_svg(
    recording: Recording, *, title: str | None = None, engine: str = "auto"
) -> str:
    """Draw a recording as a graph of steps and buffers, as SVG text.

    Nodes: each step (a box: its index, operator and key dimensions, the
    int params that are not tunables), each host step (a dashed box), each
    input and output and each carried handle (terminal ovals), each weight
    (an orange folded-corner note) and each state (a red rounded box). A
    node's ``<title>`` tooltip holds the full operator or handle. A legend
    names the kinds drawn.

    Edges: one per (producer, consumer, buffer): from the step that last
    wrote the buffer (or its input node) to each step that reads it, and to
    the output or carried value it is. A weight or state is a node of its
    own: reads of it come from it and writes into it (``out=``) go to it; a
    write into a state read earlier in the same call feeds the next call,
    and is drawn dashed (it is not used to lay the graph out). An edge is
    labelled with its buffer's name and shape, except at the buffer's own
    node (an input, weight or state), which names it: there only a view's
    shape is shown.

    Args:
        recording: The recording.
        title: The picture's title; by default the recording's name and
            counts.
        engine: ``"dot"`` lays the graph out with Graphviz's ``dot``
            (subprocess, with a timeout), ``"python"`` with a layered
            layout (longest-path layers, barycentre order within them,
            polyline edges), ``"auto"`` with ``dot`` if it is on ``PATH``
            else Python. Each is deterministic; pictures committed to a
            repository should name ``"python"``, so they do not depend on
            Graphviz being installed.

    Returns:
        A standalone SVG document.

    Raises:
        ValueError: An unknown engine.
        RuntimeError: ``engine="dot"`` with no ``dot`` on ``PATH``, or
            ``dot`` failed.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r} is not one of {ENGINES}")
    nodes, edges = _graph(recording)
    title = _default_title(recording) if title is None else title
    dot = shutil.which("dot")
    if engine == "dot" and dot is None:
        raise RuntimeError("engine='dot' needs Graphviz's dot on PATH; none found")
    if engine == "python" or dot is None:
        return _python_svg(nodes, edges, title)
    return _dot_svg(dot, nodes, edges, title)


# -- the Graphviz engine -----------------------------------------------------------


def _dot_quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped + '"'


def _dot_source(nodes: dict[str, _Node], edges: list[_Edge], title: str) -> str:
    shapes = {
        "step": ("box", "filled"),
        "host": ("box", "filled,dashed"),
        "input": ("ellipse", "filled"),
        "output": ("ellipse", "filled"),
        "carry": ("ellipse", "filled,dashed"),
        "weight": ("note", "filled"),
        "state": ("box", "filled,rounded"),
    }
    out = [
        f"digraph {_dot_quote(title)} {{",
        f"  graph [rankdir=TB, label={_dot_quote(title)}, labelloc=t, "
        'fontname="sans-serif", fontsize=12, nodesep=0.3, ranksep=0.35];',
        '  node [fontname="sans-serif", fontsize=10, margin="0.12,0.04"];',
        f'  edge [fontname="sans-serif", fontsize=9, color="{_EDGE}", arrowsize=0.6];',
    ]

    def node(node_id: str, kind: str, label: str, tip: str, css: str) -> str:
        shape, style = shapes[kind]
        _, fill, stroke = _STYLE[kind]
        return (
            f"  {_dot_quote(node_id)} [label={_dot_quote(label)}, shape={shape}, "
            f'style="{style}", fillcolor="{fill}", color="{stroke}", '
            f'tooltip={_dot_quote(tip)}, class="{css}"];'
        )

    for n in nodes.values():
        out.append(node(n.id, n.kind, "\n".join(n.lines), n.tip, n.kind))
    for e in edges:
        extra = ', style=dashed, constraint=false, class="back"' if e.back else ""
        out.append(
            f"  {_dot_quote(e.src)} -> {_dot_quote(e.dst)} "
            f"[label={_dot_quote(e.label)}, tooltip={_dot_quote(e.tip)}{extra}];"
        )
    out.append('  subgraph cluster_legend {\n    label="legend"; color="#bbbbbb";')
    kinds = [k for k in _STYLE if any(n.kind == k for n in nodes.values())]
    for kind in kinds:
        label = _STYLE[kind][0]
        out.append("  " + node(f"legend_{kind}", kind, label, label, "legend"))
    if len(kinds) > 1:  # one row, in the legend's order
        row = " -> ".join(_dot_quote(f"legend_{kind}") for kind in kinds)
        out.append(f'    {{ rank=same; {row} [style=invis, class="legend"]; }}')
    out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"


def _dot_svg(dot: str, nodes: dict[str, _Node], edges: list[_Edge], title: str) -> str:
    source = _dot_source(nodes, edges, title)
    try:
        done = subprocess.run(
            [dot, "-Tsvg"],
            input=source,
            capture_output=True,
            text=True,
            timeout=DOT_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise RuntimeError(f"dot took more than {DOT_TIMEOUT_S} s") from error
    if done.returncode != 0:
        raise RuntimeError(f"dot failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout
