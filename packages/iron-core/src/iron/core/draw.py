"""Pictures of a recording's graph and of a roofline, as SVG text.

:func:`recording_svg` draws a :class:`~iron.core.recording.Recording` as a
graph: each step (and host step) a node, labelled with its operator and key
dimensions; each use of a buffer an edge from the node that wrote it to the
node that reads it, labelled with the buffer's name and shape; the graph's
inputs, outputs and carried values as terminal nodes; weights and states as
nodes of their own (weights as folded-corner notes in orange, states as
rounded boxes in red), with a legend. It lays the graph out with Graphviz's
``dot`` where that is on ``PATH``, else in pure Python (a layered layout).

:func:`roofline_svg` draws a :class:`~iron.core.cost.Roofline` as one bar per
step, as the cost model composes a step's time, with each step's share of
the memory-bandwidth bound marked and the slowest steps named.

Both are deterministic: the same argument gives the same text.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import subprocess
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape

from iron.core.handle import Handle, dtype_name

if TYPE_CHECKING:
    from iron.core.cost import Roofline, StepTime
    from iron.core.recording import HostStep, Recording

__all__ = ["recording_svg", "roofline_svg"]

ENGINES = ("auto", "dot", "python")

DOT_TIMEOUT_S = 60.0
"""How long ``dot`` may take to lay a graph out, in seconds."""

# kind -> (legend text, fill, stroke)
_STYLE = {
    "step": ("step", "#e3edf7", "#4c78a8"),
    "host": ("host step", "#f2f2f2", "#888888"),
    "input": ("input", "#e2f2df", "#54a24b"),
    "output": ("output", "#ece3f3", "#8e6bb8"),
    "carry": ("carried value", "#ece3f3", "#8e6bb8"),
    "weight": ("weight", "#fde6cf", "#f58518"),
    "state": ("state", "#fadad8", "#e45756"),
}
_EDGE = "#666666"


def _num(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _text_width(text: str, size: float = 10.0) -> float:
    """A generous estimate of ``text``'s width in sans-serif at ``size`` px."""
    return 0.62 * size * len(text)


# -- the graph of a recording ----------------------------------------------------


@dataclasses.dataclass
class _Node:
    id: str
    kind: str
    lines: tuple[str, ...]
    tip: str
    order: float
    name: str


@dataclasses.dataclass
class _Edge:
    src: str
    dst: str
    label: str
    tip: str
    back: bool = False


def _dims(shape: Sequence[int]) -> str:
    return ", ".join(str(s) for s in shape)


def _key_dims(op: Any) -> str:
    """An operator's dimensions: its int (or int tuple) params, not tunables."""
    params = type(op).declaration.params
    parts = []
    for name, value in op.fields().items():
        spec = params[name]
        if spec.tunable or spec.derived or isinstance(value, bool):
            continue
        if isinstance(value, int):
            parts.append(f"{name}={value}")
        elif (
            isinstance(value, tuple)
            and value
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        ):
            parts.append(f"{name}={'x'.join(str(v) for v in value)}")
    text = " ".join(parts)
    return text if len(text) <= 44 else text[:41] + "..."


def _wrap(name: str, width: int = 26) -> list[str]:
    """``name`` in lines of at most about ``width`` characters, broken after dots."""
    lines: list[str] = []
    current = ""
    for part in name.split("."):
        piece = part if not current else "." + part
        if current and len(current) + len(piece) > width:
            lines.append(current + ".")
            current = part
        else:
            current += piece
    lines.append(current)
    return lines


def _fn_name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or repr(fn))


def _graph(recording: Recording) -> tuple[dict[str, _Node], list[_Edge]]:
    """The nodes and edges of a recording (see :func:`recording_svg`)."""
    nodes: dict[str, _Node] = {}
    own: dict[str, str] = {}  # buffer name -> its own node (input or resident)

    def add(
        kind: str, lines: Sequence[str], tip: str, order: float, name: str = ""
    ) -> str:
        node_id = f"n{len(nodes)}"
        name = name or lines[0]
        nodes[node_id] = _Node(node_id, kind, tuple(lines), tip, order, name)
        return node_id

    for h in recording.inputs:
        own[h.name] = add(
            "input",
            [h.name, f"[{_dims(h.shape)}] {dtype_name(h.dtype)}"],
            f"input {h!r}",
            -1.0,
        )
    for kind, held in (("weight", recording.weights), ("state", recording.states)):
        for path, (_, h) in held.items():
            where = "" if path == h.buffer.name else f" <- {path}"
            own[h.name] = add(
                kind,
                [
                    *_wrap(h.buffer.name),
                    f"[{_dims(h.buffer.shape)}] {dtype_name(h.dtype)}",
                ],
                f"{kind} {h!r}{where}",
                -1.0,
                h.buffer.name,
            )
    residents = {
        h.name for _, h in (*recording.weights.values(), *recording.states.values())
    }

    # steps and host steps in the order they run
    events: list[tuple[str, Sequence[Handle | None], Sequence[Handle]]] = []

    def host_step(k: int, h: HostStep) -> None:
        name = f"on_host {_fn_name(h.fn)}"
        node_id = add(
            "host",
            ["on_host", _fn_name(h.fn)],
            f"host step {k}: {name}",
            len(events),
            name,
        )
        events.append((node_id, h.reads, h.writes))

    waiting = sorted(enumerate(recording.host), key=lambda p: (p[1].after, p[0]))
    for step in recording.steps:
        while waiting and waiting[0][1].after <= step.index:
            host_step(*waiting.pop(0))
        op = step.op
        dims = _key_dims(op)
        lines = [f"#{step.index} {type(op).__name__}"] + ([dims] if dims else [])
        node_id = add("step", lines, f"step {step.index}: {op!r}", len(events))
        events.append((node_id, step.inputs, step.outputs))
    for k, h in waiting:
        host_step(k, h)

    # a resident first written (not read) this call sits after that writer
    touched: set[str] = set()
    for position, (_, reads, writes) in enumerate(events):
        for h in reads:
            if h is not None and h.name in residents:
                touched.add(h.name)
        for h in writes:
            if h.name in residents and h.name not in touched:
                touched.add(h.name)
                nodes[own[h.name]].order = position + 0.5

    edges: dict[tuple[str, str, str], _Edge] = {}

    def link(src: str, dst: str, h: Handle) -> None:
        key = (src, dst, h.name)
        if key in edges:
            return
        if own.get(h.name) in (src, dst):
            label = "" if h.is_whole else f"[{_dims(h.shape)}]"
        else:
            label = f"{h.name} [{_dims(h.shape)}]"
        back = nodes[src].order >= nodes[dst].order
        tip = f"{h!r}: {nodes[src].name} -> {nodes[dst].name}"
        edges[key] = _Edge(src, dst, label, tip, back)

    writer: dict[str, str] = {}

    def source(h: Handle) -> str | None:
        if h.name in residents:
            return own[h.name]
        return writer.get(h.name, own.get(h.name))

    for node_id, reads, writes in events:
        for h in reads:
            if h is not None and (src := source(h)) is not None:
                link(src, node_id, h)
        for h in writes:
            if h.name in residents:
                link(node_id, own[h.name], h)
            writer[h.name] = node_id
    last = float(len(events))
    terminals: list[tuple[str, str, Handle]] = [
        ("output", "output" if len(recording.outputs) == 1 else f"output {i}", h)
        for i, h in enumerate(recording.outputs)
    ]
    terminals += [
        ("carry", f"carry {name}", h)
        for name, h in recording.carry.items()
        if isinstance(h, Handle)
    ]
    for i, (kind, label, h) in enumerate(terminals):
        node_id = add(
            kind,
            [label, f"[{_dims(h.shape)}] {dtype_name(h.dtype)}"],
            f"{label}: {h!r}",
            last + i,
        )
        if (src := source(h)) is not None:
            link(src, node_id, h)
    return nodes, list(edges.values())


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


# -- the pure-Python engine ----------------------------------------------------------

_LINE = 13.0  # px between label lines
_NODE_GAP = 16.0  # px between neighbouring nodes in a rank
_DUMMY_GAP = 4.0  # px between neighbouring edge points in a rank
_RANK_GAP = 12.0  # px between ranks
_MARGIN = 16.0


@dataclasses.dataclass
class _Item:
    """One thing in a rank: a node, or a point an edge passes through."""

    key: Any
    rank: int
    left: float  # extent left of x
    right: float  # extent right of x
    height: float
    node: _Node | None = None
    label: str = ""
    x: float = 0.0
    up: list[_Item] = dataclasses.field(default_factory=list)
    down: list[_Item] = dataclasses.field(default_factory=list)


def _node_size(n: _Node) -> tuple[float, float]:
    widths = [
        _text_width(line, 10.5 if i == 0 and n.kind == "step" else 10.0)
        for i, line in enumerate(n.lines)
    ]
    width = max([40.0, *widths]) + 16.0
    if n.kind in ("input", "output", "carry"):
        width += 14.0
    if n.kind == "weight":
        width += 8.0
    return width, _LINE * len(n.lines) + 10.0


def _layers(nodes: dict[str, _Node], edges: list[_Edge]) -> dict[str, int]:
    """Longest-path layers over the forward edges; sources pulled to their users."""
    ids = list(nodes)
    preds: dict[str, list[str]] = {n: [] for n in ids}
    succs: dict[str, list[str]] = {n: [] for n in ids}
    for e in edges:
        if not e.back:
            preds[e.dst].append(e.src)
            succs[e.src].append(e.dst)
    # forward edges go from a lower order to a higher one: order is topological
    topo = sorted(ids, key=lambda n: (nodes[n].order, ids.index(n)))
    layer: dict[str, int] = {}
    for n in topo:
        layer[n] = max((layer[p] + 1 for p in preds[n]), default=0)
    for n in topo:
        if not preds[n] and succs[n]:
            layer[n] = min(layer[s] for s in succs[n]) - 1
    used = sorted(set(layer.values()))
    compact = {v: i for i, v in enumerate(used)}
    return {n: compact[layer[n]] for n in ids}


def _crossings(ranks: list[list[_Item]]) -> int:
    total = 0
    for upper, lower in zip(ranks, ranks[1:]):
        pos = {id(it): i for i, it in enumerate(lower)}
        pairs = sorted((i, pos[id(d)]) for i, it in enumerate(upper) for d in it.down)
        for a in range(len(pairs)):
            for b in range(a + 1, len(pairs)):
                if pairs[a][0] < pairs[b][0] and pairs[a][1] > pairs[b][1]:
                    total += 1
    return total


def _order(ranks: list[list[_Item]], sweeps: int = 16) -> list[list[_Item]]:
    """Barycentre ordering within ranks; the order with fewest crossings wins."""
    best = [list(r) for r in ranks]
    best_crossings = _crossings(best)
    for sweep in range(sweeps):
        downward = sweep % 2 == 0
        indices = range(1, len(ranks)) if downward else range(len(ranks) - 2, -1, -1)
        for r in indices:
            ref = ranks[r - 1] if downward else ranks[r + 1]
            pos = {id(it): i for i, it in enumerate(ref)}
            scale = len(ref) / max(len(ranks[r]), 1)
            keyed = []
            for i, it in enumerate(ranks[r]):
                near = it.up if downward else it.down
                bc = sum(pos[id(p)] for p in near) / len(near) if near else i * scale
                keyed.append((bc, i, it))
            keyed.sort(key=lambda t: (t[0], t[1]))
            ranks[r] = [t[2] for t in keyed]
        _transpose(ranks)
        crossings = _crossings(ranks)
        if crossings < best_crossings:
            best, best_crossings = [list(r) for r in ranks], crossings
    return best


def _transpose(ranks: list[list[_Item]], passes: int = 8) -> None:
    """Swap neighbours in a rank while that removes crossings."""

    def cost(u: _Item, v: _Item, pos: dict[int, int]) -> int:
        # crossings between u's edges and v's, u left of v
        return sum(
            1
            for near_u, near_v in ((u.up, v.up), (u.down, v.down))
            for a in near_u
            for b in near_v
            if pos[id(a)] > pos[id(b)]
        )

    for _ in range(passes):
        improved = False
        pos = {id(it): i for rank in ranks for i, it in enumerate(rank)}
        for rank in ranks:
            for i in range(len(rank) - 1):
                u, v = rank[i], rank[i + 1]
                if cost(v, u, pos) < cost(u, v, pos):
                    rank[i], rank[i + 1] = v, u
                    pos[id(u)], pos[id(v)] = i + 1, i
                    improved = True
        if not improved:
            return


def _gap(a: _Item, b: _Item) -> float:
    return _DUMMY_GAP if a.node is None and b.node is None else _NODE_GAP


def _place(rank: list[_Item], desired: list[float], weights: list[float]) -> None:
    """Set each x nearest ``desired`` (least squares) keeping order and spacing."""
    offsets = [0.0]
    for a, b in zip(rank, rank[1:]):
        offsets.append(offsets[-1] + a.right + _gap(a, b) + b.left)
    blocks: list[list[float]] = []  # [weighted sum, weight, count]
    for d, c, w in zip(desired, offsets, weights):
        blocks.append([(d - c) * w, w, 1])
        while len(blocks) > 1 and (
            blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]
        ):
            s, w2, k = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += w2
            blocks[-1][2] += k
    i = 0
    for s, w, k in blocks:
        for _ in range(int(k)):
            rank[i].x = s / w + offsets[i]
            i += 1


def _positions(ranks: list[list[_Item]], rounds: int = 24) -> None:
    """Place items left to right, then pull each toward its neighbours.

    Nodes move toward the items above (downward rounds) or below (upward
    rounds); the points of a long edge toward both, as a string pulled
    straight. Last, each long edge is made one vertical line where its
    rank neighbours leave room.
    """
    for rank in ranks:
        x = 0.0
        for i, it in enumerate(rank):
            if i:
                x += rank[i - 1].right + _gap(rank[i - 1], it) + it.left
            it.x = x
    for k in range(rounds):
        downward = k % 2 == 0
        indices = range(1, len(ranks)) if downward else range(len(ranks) - 2, -1, -1)
        for r in indices:
            rank = ranks[r]
            desired, weights = [], []
            for it in rank:
                if it.node is None:
                    near = it.up + it.down
                else:
                    near = it.up if downward else it.down
                desired.append(sum(p.x for p in near) / len(near) if near else it.x)
                weights.append(1.0 if it.node is not None else 4.0)
            _place(rank, desired, weights)
    _straighten(ranks)


def _straighten(ranks: list[list[_Item]]) -> None:
    """Put each long edge's points on one vertical line where there is room."""
    where = {
        id(it): (r, i) for r, rank in enumerate(ranks) for i, it in enumerate(rank)
    }

    def room(d: _Item) -> tuple[float, float]:
        """The x range ``d`` may take between its rank neighbours."""
        r, i = where[id(d)]
        row = ranks[r]
        lo, hi = -math.inf, math.inf
        if i > 0:
            a = row[i - 1]
            lo = a.x + a.right + _gap(a, d) + d.left
        if i + 1 < len(row):
            b = row[i + 1]
            hi = b.x - b.left - _gap(d, b) - d.right
        return lo, hi

    seen: set[int] = set()
    for rank in ranks:
        for it in rank:
            if it.node is not None or id(it) in seen:
                continue
            chain = [it]
            while chain[-1].down and chain[-1].down[0].node is None:
                chain.append(chain[-1].down[0])
            seen.update(id(d) for d in chain)
            if len(chain) < 2:
                continue
            # runs of points that one x suits, each put at its median clamped
            run: list[_Item] = []
            lo, hi = -math.inf, math.inf
            for d in [*chain, None]:
                if d is not None:
                    a, b = room(d)
                    if max(lo, a) <= min(hi, b):
                        run.append(d)
                        lo, hi = max(lo, a), min(hi, b)
                        continue
                if len(run) > 1:
                    xs = sorted(p.x for p in run)
                    x = min(max(xs[len(xs) // 2], lo), hi)
                    for p in run:
                        p.x = x
                if d is not None:
                    run = [d]
                    lo, hi = room(d)


def _python_svg(nodes: dict[str, _Node], edges: list[_Edge], title: str) -> str:
    layer = _layers(nodes, edges)
    count = 2 * max(layer.values(), default=0) + 1
    ranks: list[list[_Item]] = [[] for _ in range(count)]
    items: dict[str, _Item] = {}
    for n in sorted(nodes.values(), key=lambda n: (n.order, int(n.id[1:]))):
        w, h = _node_size(n)
        it = _Item(n.id, 2 * layer[n.id], w / 2, w / 2, h, node=n)
        items[n.id] = it
        ranks[it.rank].append(it)
    chains: list[tuple[_Edge, list[_Item]]] = []
    forward = [e for e in edges if not e.back]
    forward.sort(key=lambda e: (nodes[e.src].order, int(e.src[1:]), int(e.dst[1:])))
    for k, e in enumerate(forward):
        a, b = items[e.src], items[e.dst]
        chain = [a]
        for r in range(a.rank + 1, b.rank):
            label = e.label if r == a.rank + 1 else ""
            right = _text_width(label, 9.0) + 8.0 if label else 3.0
            d = _Item((k, r), r, 3.0, right, 12.0 if label else 4.0, label=label)
            ranks[r].append(d)
            chain.append(d)
        chain.append(b)
        for u, v in zip(chain, chain[1:]):
            u.down.append(v)
            v.up.append(u)
        chains.append((e, chain))
    ranks = _order(ranks)
    _positions(ranks)

    # vertical positions: each rank's top and height
    tops, heights = [], []
    y = 0.0
    for r, rank in enumerate(ranks):
        h = max((it.height for it in rank), default=0.0)
        if r % 2 and h == 0.0:
            h = 4.0
        tops.append(y)
        heights.append(h)
        y += h + _RANK_GAP
    graph_h = y - _RANK_GAP

    all_items = [it for rank in ranks for it in rank]
    lo = min((it.x - it.left for it in all_items), default=0.0)
    hi = max((it.x + it.right for it in all_items), default=0.0)
    kinds = [k for k in _STYLE if any(n.kind == k for n in nodes.values())]
    legend_w = sum(34.0 + _text_width(_STYLE[k][0], 9.0) + 14.0 for k in kinds)
    width = max(
        hi - lo + 2 * _MARGIN,
        legend_w + 2 * _MARGIN,
        _text_width(title, 12) + 2 * _MARGIN,
        200.0,
    )
    graph_top = 64.0
    height = graph_top + graph_h + _MARGIN
    shift = (width - (hi - lo)) / 2 - lo

    def cy(it: _Item) -> float:
        return graph_top + tops[it.rank] + heights[it.rank] / 2

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_num(width)}" '
        f'height="{_num(height)}" viewBox="0 0 {_num(width)} {_num(height)}" '
        f'font-family="sans-serif" font-size="10">',
        f"<title>{escape(title)}</title>",
        "<defs>",
        '<marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto">'
        f'<path d="M0,0 L10,5 L0,10 z" fill="{_EDGE}"/></marker>',
        "</defs>",
        f'<rect x="0" y="0" width="{_num(width)}" height="{_num(height)}" '
        'fill="white"/>',
        f'<text x="{_num(width / 2)}" y="18" text-anchor="middle" '
        f'font-size="12">{escape(title)}</text>',
    ]

    # the legend: one sample of each kind drawn
    x = (width - legend_w) / 2
    out.append('<g class="legend">')
    for kind in kinds:
        out.append(_shape(kind, x + 14.0, 40.0, 28.0, 16.0))
        out.append(
            f'<text x="{_num(x + 32.0)}" y="{_num(43.5)}">'
            f"{escape(_STYLE[kind][0])}</text>"
        )
        x += 34.0 + _text_width(_STYLE[kind][0], 9.0) + 14.0
    out.append("</g>")

    # ports: where each edge leaves its source and enters its target
    leaving: dict[str, list[tuple[float, int]]] = {n: [] for n in nodes}
    entering: dict[str, list[tuple[float, int]]] = {n: [] for n in nodes}
    for k, (_, chain) in enumerate(chains):
        leaving[chain[0].key].append((chain[1].x, k))
        entering[chain[-1].key].append((chain[-2].x, k))
    port_out: dict[int, float] = {}
    port_in: dict[int, float] = {}
    for table, ports in ((leaving, port_out), (entering, port_in)):
        for key, uses in table.items():
            it = items[key]
            uses.sort()
            spread = min((it.left + it.right) * 0.6, 12.0 * (len(uses) - 1))
            for i, (_, k) in enumerate(uses):
                ports[k] = it.x + (
                    -spread / 2 + i * spread / (len(uses) - 1) if len(uses) > 1 else 0.0
                )

    for k, (e, chain) in enumerate(chains):
        a, b = chain[0], chain[-1]
        pts = [(port_out[k] + shift, cy(a) + a.height / 2)]
        for d in chain[1:-1]:
            top = graph_top + tops[d.rank]
            pts.append((d.x + shift, top))
            pts.append((d.x + shift, top + heights[d.rank]))
        pts.append((port_in[k] + shift, cy(b) - b.height / 2))
        path = f"M{_num(pts[0][0])},{_num(pts[0][1])}"
        for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
            if x0 == x1:  # down through a rank
                path += f" L{_num(x1)},{_num(y1)}"
            else:  # across a gap: a curve leaving and arriving vertically
                m = (y0 + y1) / 2
                path += (
                    f" C{_num(x0)},{_num(m)} {_num(x1)},{_num(m)} {_num(x1)},{_num(y1)}"
                )
        out.append(f'<g class="edge"><title>{escape(e.tip)}</title>')
        out.append(
            f'<path d="{path}" fill="none" stroke="{_EDGE}" '
            'stroke-width="1" marker-end="url(#arrow)"/>'
        )
        if e.label:
            d = chain[1]
            out.append(
                f'<text x="{_num(d.x + shift + 5.0)}" y="{_num(cy(d) + 3.5)}" '
                f'font-size="9" fill="#333333">{escape(e.label)}</text>'
            )
        out.append("</g>")
    for e in edges:
        if not e.back:
            continue
        a, b = items[e.src], items[e.dst]
        x0, y0 = a.x + a.right + shift, cy(a)
        x1, y1 = b.x + b.right + shift, cy(b)
        bend = max(x0, x1) + 40.0
        out.append(f'<g class="edge back"><title>{escape(e.tip)} (next call)</title>')
        out.append(
            f'<path d="M{_num(x0)},{_num(y0)} C{_num(bend)},{_num(y0)} '
            f'{_num(bend)},{_num(y1)} {_num(x1)},{_num(y1)}" fill="none" '
            f'stroke="{_EDGE}" stroke-dasharray="4 3" marker-end="url(#arrow)"/>'
        )
        out.append("</g>")

    for it in all_items:
        n = it.node
        if n is None:
            continue
        x, yc = it.x + shift, cy(it)
        w = it.left + it.right
        out.append(f'<g class="node {n.kind}"><title>{escape(n.tip)}</title>')
        out.append(_shape(n.kind, x, yc, w, it.height))
        first = yc - _LINE * len(n.lines) / 2 + 9.5
        for i, line in enumerate(n.lines):
            bold = ' font-weight="bold"' if i == 0 and n.kind == "step" else ""
            out.append(
                f'<text x="{_num(x)}" y="{_num(first + i * _LINE)}" '
                f'text-anchor="middle"{bold}>{escape(line)}</text>'
            )
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _shape(kind: str, x: float, y: float, w: float, h: float) -> str:
    """The outline of a node of ``kind`` centred at (x, y), ``w`` by ``h``."""
    _, fill, stroke = _STYLE[kind]
    x0, y0, x1, y1 = x - w / 2, y - h / 2, x + w / 2, y + h / 2
    paint = f'fill="{fill}" stroke="{stroke}"'
    if kind == "weight":
        f = min(8.0, h / 3)
        return (
            f'<path d="M{_num(x0)},{_num(y0)} H{_num(x1 - f)} L{_num(x1)},'
            f'{_num(y0 + f)} V{_num(y1)} H{_num(x0)} Z" {paint}/>'
            f'<path d="M{_num(x1 - f)},{_num(y0)} V{_num(y0 + f)} H{_num(x1)}" '
            f'fill="none" stroke="{stroke}"/>'
        )
    if kind in ("input", "output", "carry"):
        radius = h / 2
    elif kind == "state":
        radius = min(8.0, h / 3)
    else:
        radius = 0.0
    dash = ' stroke-dasharray="4 2"' if kind in ("host", "carry") else ""
    return (
        f'<rect x="{_num(x0)}" y="{_num(y0)}" width="{_num(w)}" height="{_num(h)}" '
        f'rx="{_num(radius)}" {paint}{dash}/>'
    )


# -- the roofline --------------------------------------------------------------------

_PART_COLOURS = {
    "memory": "#4c78a8",
    "compute": "#f58518",
    "calls": "#54a24b",
    "dispatch": "#b279a2",
}


def _us(seconds: float) -> str:
    us = seconds * 1e6
    if us >= 100:
        return f"{us:.0f}"
    if us >= 10:
        return f"{us:.1f}"
    return f"{us:.2f}"


def _nice(top: float) -> tuple[float, list[float]]:
    """A rounded axis top at or above ``top`` and its ticks (1, 2 or 5 steps)."""
    if top <= 0:
        return 1.0, [0.0, 1.0]
    raw = top / 5
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    count = math.ceil(top / step - 1e-9)
    return count * step, [i * step for i in range(count + 1)]


def roofline_svg(
    roofline: Roofline,
    *,
    title: str | None = None,
    width: int = 720,
    height: int = 360,
    label: int = 5,
) -> str:
    """Draw a roofline as one bar per step of modelled time, as SVG text.

    Each bar stacks what the cost model adds (see :mod:`iron.core.cost`):
    the work, ``max(compute, memory)`` (compute and memory overlap), in the
    colour of whichever is larger; then the kernel-call overhead; then the
    dispatch overhead. A black dash across each bar marks the step's share
    of the memory-bandwidth bound (its bytes alone at the DDR bandwidth),
    so the gap between bar top and dash is the time the model spends above
    the bound. The slowest steps are named above their bars; steps alike
    (one operator at one time as shown) share one label, with their count,
    over the first of them. A bar's ``<title>`` tooltip holds all of its
    numbers. Above the plot, a horizontal bar sets the whole version's
    bandwidth bound against its modelled time.

    Args:
        roofline: What :func:`iron.roofline` returned.
        title: The picture's title; by default the version's name, device
            and dispatch mode.
        width: The picture's width in pixels.
        height: The picture's height in pixels.
        label: How many labels to place over the slowest steps.

    Returns:
        A standalone SVG document.
    """
    steps = list(roofline.steps)
    ddr = roofline.device.ddr_bytes_per_s
    mode = "full ELF" if roofline.full_elf else "xclbin per step"
    if title is None:
        title = (
            f"{roofline.name} on {roofline.device.name} ({mode}): {len(steps)} steps"
        )
    left, right, top, bottom = 64.0, 16.0, 84.0, 36.0
    plot_w = max(width - left - right, 1.0)
    plot_h = max(height - top - bottom, 1.0)
    highest = max([s.seconds for s in steps] + [s.bytes / ddr for s in steps] + [0.0])
    y_top, ticks = _nice(highest * 1.15)
    slot = plot_w / max(len(steps), 1)
    bar_w = slot * 0.8 if slot >= 4 else slot

    def y_of(seconds: float) -> float:
        return top + plot_h - seconds / y_top * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" '
        f'font-family="sans-serif" font-size="10">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
        f'<text x="{_num(width / 2)}" y="16" text-anchor="middle" '
        f'font-size="12">{escape(title)}</text>',
    ]

    # the version's bandwidth bound against its modelled time
    total = roofline.seconds
    bound = roofline.bandwidth_bound_s
    share = bound / total if total > 0 else 0.0
    summary = (
        f"modelled {_us(total)} us per call; bandwidth bound {_us(bound)} us "
        f"({share:.0%} of it)"
    )
    out.append('<g class="summary">')
    out.append(f"<title>{escape(summary)}</title>")
    out.append(
        f'<rect x="{_num(left)}" y="26" width="{_num(plot_w)}" height="12" '
        'fill="#dddddd"/>'
    )
    out.append(
        f'<rect x="{_num(left)}" y="26" width="{_num(plot_w * min(share, 1.0))}" '
        'height="12" fill="#555555"/>'
    )
    out.append(
        f'<text x="{_num(left + 4)}" y="35.5" fill="white">{escape(summary)}</text>'
    )
    out.append("</g>")

    # legend
    x = left
    out.append('<g class="legend">')
    for part, colour in _PART_COLOURS.items():
        out.append(
            f'<rect x="{_num(x)}" y="48" width="12" height="10" fill="{colour}"/>'
        )
        out.append(f'<text x="{_num(x + 16)}" y="57">{part}</text>')
        x += 16 + _text_width(part) + 16
    out.append(
        f'<line x1="{_num(x)}" y1="53" x2="{_num(x + 14)}" y2="53" '
        'stroke="black" stroke-width="2"/>'
    )
    legend = "bandwidth-bound share (bytes at DDR bandwidth)"
    out.append(f'<text x="{_num(x + 18)}" y="57">{escape(legend)}</text>')
    out.append("</g>")

    # axes and grid
    for t in ticks:
        y = y_of(t)
        out.append(
            f'<line x1="{_num(left)}" y1="{_num(y)}" x2="{_num(left + plot_w)}" '
            f'y2="{_num(y)}" stroke="#e4e4e4"/>'
        )
        out.append(
            f'<text x="{_num(left - 4)}" y="{_num(y + 3.5)}" '
            f'text-anchor="end">{_us(t) if t else "0"}</text>'
        )
    out.append(
        f'<rect x="{_num(left)}" y="{_num(top)}" width="{_num(plot_w)}" '
        f'height="{_num(plot_h)}" fill="none" stroke="#888"/>'
    )

    # bars
    for i, s in enumerate(steps):
        x0 = left + i * slot + (slot - bar_w) / 2
        work_part = "compute" if s.compute_s >= s.memory_s else "memory"
        parts = (
            (work_part, max(s.compute_s, s.memory_s)),
            ("calls", s.calls_s),
            ("dispatch", s.dispatch_s),
        )
        tip = (
            f"#{s.index} {s.name}: {_us(s.seconds)} us = max(compute {_us(s.compute_s)}, "
            f"memory {_us(s.memory_s)}) + calls {_us(s.calls_s)} + dispatch "
            f"{_us(s.dispatch_s)}; bandwidth share {_us(s.bytes / ddr)} us; "
            f"bound by {s.bound}"
        )
        out.append(f'<g class="bar"><title>{escape(tip)}</title>')
        base = 0.0
        for part, seconds in parts:
            if seconds <= 0:
                continue
            y_hi, y_lo = y_of(base + seconds), y_of(base)
            out.append(
                f'<rect x="{_num(x0)}" y="{_num(y_hi)}" width="{_num(bar_w)}" '
                f'height="{_num(max(y_lo - y_hi, 0.0))}" '
                f'fill="{_PART_COLOURS[part]}"/>'
            )
            base += seconds
        y = y_of(s.bytes / ddr)
        out.append(
            f'<line x1="{_num(left + i * slot)}" y1="{_num(y)}" '
            f'x2="{_num(left + (i + 1) * slot)}" y2="{_num(y)}" '
            'stroke="black" stroke-width="1.5"/>'
        )
        out.append("</g>")

    # the slowest steps, named; steps alike (one operator, one time shown)
    # share a label, counted; a label moves up until it overlaps none
    named: dict[tuple[str, str], list[StepTime]] = {}
    for s in sorted(steps, key=lambda s: (-s.seconds, s.index)):
        key = (s.name, _us(s.seconds))
        if key in named:
            named[key].append(s)
        elif len(named) < label:
            named[key] = [s]
    placed: list[tuple[float, float, float]] = []  # x0, x1, baseline
    for (name, shown_us), alike in named.items():
        s = alike[0]
        i = steps.index(s)
        text = f"#{s.index} {name} {shown_us} us"
        if len(alike) > 1:
            text += f" (x{len(alike)})"
        tw = _text_width(text)
        cx = left + (i + 0.5) * slot
        cx = min(max(cx, left + tw / 2 + 2), left + plot_w - tw / 2 - 2)
        # above every bar (and dash) under it
        first = max(int((cx - tw / 2 - left) / slot), 0)
        last = min(int((cx + tw / 2 - left) / slot), len(steps) - 1)
        under = steps[first : last + 1]
        y = y_of(max(max(t.seconds, t.bytes / ddr) for t in under)) - 4
        while any(
            a < cx + tw / 2 and cx - tw / 2 < b and abs(yb - y) < 11
            for a, b, yb in placed
        ):
            y -= 11
        placed.append((cx - tw / 2, cx + tw / 2, y))
        out.append(
            f'<text class="slowest" x="{_num(cx)}" y="{_num(y)}" '
            f'text-anchor="middle">{escape(text)}</text>'
        )

    # axis ticks and names
    every = max(1, -(-len(steps) // 10))
    shown = list(range(0, len(steps), every))
    if steps and len(steps) - 1 not in shown:
        if shown and (len(steps) - 1 - shown[-1]) < every / 2:
            shown.pop()
        shown.append(len(steps) - 1)
    for i in shown:
        out.append(
            f'<text x="{_num(left + (i + 0.5) * slot)}" '
            f'y="{_num(top + plot_h + 14)}" text-anchor="middle">'
            f"{steps[i].index}</text>"
        )
    out.append(
        f'<text x="{_num(left + plot_w / 2)}" y="{_num(height - 6)}" '
        'text-anchor="middle">step</text>'
    )
    mid = top + plot_h / 2
    out.append(
        f'<text x="14" y="{_num(mid)}" text-anchor="middle" '
        f'transform="rotate(-90 14 {_num(mid)})">modelled time (us)</text>'
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"
