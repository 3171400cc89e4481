"""The one layout engine of the pictures: a layered graph drawing, as SVG text.

This module owns the nodes and edges a picture of a graph is drawn from
(:class:`Node`, :class:`Edge`, the style of each kind of node) and the
layered layout :func:`~iron.core.pictures.recording_svg` draws them with, in
pure Python so a picture is the same on every machine: longest-path
layers over the forward edges, a point per rank an edge passes through,
barycentre ordering within ranks with transposition, x positions relaxed
towards neighbours and straightened edges, then the SVG itself (nodes,
polyline edges, labels and a legend). It is deterministic.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any
from xml.sax.saxutils import escape

from iron.core.pictures.svg import number, text_width

__all__ = ["EDGE_COLOR", "STYLE", "Edge", "Node", "layered_svg"]

STYLE = {
    "step": ("step", "#e3edf7", "#4c78a8"),
    "host": ("host step", "#f2f2f2", "#888888"),
    "input": ("input", "#e2f2df", "#54a24b"),
    "output": ("output", "#ece3f3", "#8e6bb8"),
    "carry": ("carried value", "#ece3f3", "#8e6bb8"),
    "weight": ("weight", "#fde6cf", "#f58518"),
    "state": ("state", "#fadad8", "#e45756"),
}
"""Each kind of node -> (its legend text, fill colour, stroke colour)."""

EDGE_COLOR = "#666666"
"""The colour of every edge and arrowhead."""


@dataclasses.dataclass
class Node:
    """One node of a picture.

    Attributes:
        id: Its unique id.
        kind: Its kind, a key of :data:`STYLE`.
        lines: Its label, a line each.
        tip: Its tooltip.
        order: Where it runs (steps in order, inputs first); edges from a
            higher order to a lower one are drawn as back edges.
        name: How edge tooltips name it.
    """

    id: str
    kind: str
    lines: tuple[str, ...]
    tip: str
    order: float
    name: str


@dataclasses.dataclass
class Edge:
    """One edge of a picture, from node ``src`` to node ``dst``.

    Attributes:
        src: The id of the node it leaves.
        dst: The id of the node it enters.
        label: Its label (empty for none).
        tip: Its tooltip.
        back: Whether it feeds the next call: drawn dashed, not laid out.
    """

    src: str
    dst: str
    label: str
    tip: str
    back: bool = False


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
    node: Node | None = None
    label: str = ""
    x: float = 0.0
    up: list[_Item] = dataclasses.field(default_factory=list)
    down: list[_Item] = dataclasses.field(default_factory=list)


def _node_size(n: Node) -> tuple[float, float]:
    widths = [
        text_width(line, 10.5 if i == 0 and n.kind == "step" else 10.0)
        for i, line in enumerate(n.lines)
    ]
    width = max([40.0, *widths]) + 16.0
    if n.kind in ("input", "output", "carry"):
        width += 14.0
    if n.kind == "weight":
        width += 8.0
    return width, _LINE * len(n.lines) + 10.0


def _layers(nodes: dict[str, Node], edges: list[Edge]) -> dict[str, int]:
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


def layered_svg(nodes: dict[str, Node], edges: list[Edge], title: str) -> str:
    """Lay ``nodes`` and ``edges`` out in layers, top to bottom, as SVG text.

    Args:
        nodes: The nodes by id; ids are ``n<number>``, numbered in the order
            made (ties in ``order`` keep it).
        edges: The edges between them.
        title: The picture's title, drawn at its top.

    Returns:
        A standalone SVG document, the same text for the same arguments.
    """
    layer = _layers(nodes, edges)
    count = 2 * max(layer.values(), default=0) + 1
    ranks: list[list[_Item]] = [[] for _ in range(count)]
    items: dict[str, _Item] = {}
    for n in sorted(nodes.values(), key=lambda n: (n.order, int(n.id[1:]))):
        w, h = _node_size(n)
        it = _Item(n.id, 2 * layer[n.id], w / 2, w / 2, h, node=n)
        items[n.id] = it
        ranks[it.rank].append(it)
    chains: list[tuple[Edge, list[_Item]]] = []
    forward = [e for e in edges if not e.back]
    forward.sort(key=lambda e: (nodes[e.src].order, int(e.src[1:]), int(e.dst[1:])))
    for k, e in enumerate(forward):
        a, b = items[e.src], items[e.dst]
        chain = [a]
        for r in range(a.rank + 1, b.rank):
            label = e.label if r == a.rank + 1 else ""
            right = text_width(label, 9.0) + 8.0 if label else 3.0
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
    kinds = [k for k in STYLE if any(n.kind == k for n in nodes.values())]
    legend_w = sum(34.0 + text_width(STYLE[k][0], 9.0) + 14.0 for k in kinds)
    width = max(
        hi - lo + 2 * _MARGIN,
        legend_w + 2 * _MARGIN,
        text_width(title, 12) + 2 * _MARGIN,
        200.0,
    )
    graph_top = 64.0
    height = graph_top + graph_h + _MARGIN
    shift = (width - (hi - lo)) / 2 - lo

    def cy(it: _Item) -> float:
        return graph_top + tops[it.rank] + heights[it.rank] / 2

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{number(width)}" '
        f'height="{number(height)}" viewBox="0 0 {number(width)} {number(height)}" '
        f'font-family="sans-serif" font-size="10">',
        f"<title>{escape(title)}</title>",
        "<defs>",
        '<marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto">'
        f'<path d="M0,0 L10,5 L0,10 z" fill="{EDGE_COLOR}"/></marker>',
        "</defs>",
        f'<rect x="0" y="0" width="{number(width)}" height="{number(height)}" '
        'fill="white"/>',
        f'<text x="{number(width / 2)}" y="18" text-anchor="middle" '
        f'font-size="12">{escape(title)}</text>',
    ]

    # the legend: one sample of each kind drawn
    x = (width - legend_w) / 2
    out.append('<g class="legend">')
    for kind in kinds:
        out.append(_shape(kind, x + 14.0, 40.0, 28.0, 16.0))
        out.append(
            f'<text x="{number(x + 32.0)}" y="{number(43.5)}">'
            f"{escape(STYLE[kind][0])}</text>"
        )
        x += 34.0 + text_width(STYLE[kind][0], 9.0) + 14.0
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
        path = f"M{number(pts[0][0])},{number(pts[0][1])}"
        for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
            if x0 == x1:  # down through a rank
                path += f" L{number(x1)},{number(y1)}"
            else:  # across a gap: a curve leaving and arriving vertically
                m = (y0 + y1) / 2
                path += f" C{number(x0)},{number(m)} {number(x1)},{number(m)} {number(x1)},{number(y1)}"
        out.append(f'<g class="edge"><title>{escape(e.tip)}</title>')
        out.append(
            f'<path d="{path}" fill="none" stroke="{EDGE_COLOR}" '
            'stroke-width="1" marker-end="url(#arrow)"/>'
        )
        if e.label:
            d = chain[1]
            out.append(
                f'<text x="{number(d.x + shift + 5.0)}" y="{number(cy(d) + 3.5)}" '
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
            f'<path d="M{number(x0)},{number(y0)} C{number(bend)},{number(y0)} '
            f'{number(bend)},{number(y1)} {number(x1)},{number(y1)}" fill="none" '
            f'stroke="{EDGE_COLOR}" stroke-dasharray="4 3" marker-end="url(#arrow)"/>'
        )
        out.append("</g>")

    for it in all_items:
        node = it.node
        if node is None:
            continue
        x, yc = it.x + shift, cy(it)
        w = it.left + it.right
        out.append(f'<g class="node {node.kind}"><title>{escape(node.tip)}</title>')
        out.append(_shape(node.kind, x, yc, w, it.height))
        first = yc - _LINE * len(node.lines) / 2 + 9.5
        for i, line in enumerate(node.lines):
            bold = ' font-weight="bold"' if i == 0 and node.kind == "step" else ""
            out.append(
                f'<text x="{number(x)}" y="{number(first + i * _LINE)}" '
                f'text-anchor="middle"{bold}>{escape(line)}</text>'
            )
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _shape(kind: str, x: float, y: float, w: float, h: float) -> str:
    """The outline of a node of ``kind`` centred at (x, y), ``w`` by ``h``."""
    _, fill, stroke = STYLE[kind]
    x0, y0, x1, y1 = x - w / 2, y - h / 2, x + w / 2, y + h / 2
    paint = f'fill="{fill}" stroke="{stroke}"'
    if kind == "weight":
        f = min(8.0, h / 3)
        return (
            f'<path d="M{number(x0)},{number(y0)} H{number(x1 - f)} L{number(x1)},'
            f'{number(y0 + f)} V{number(y1)} H{number(x0)} Z" {paint}/>'
            f'<path d="M{number(x1 - f)},{number(y0)} V{number(y0 + f)} H{number(x1)}" '
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
        f'<rect x="{number(x0)}" y="{number(y0)}" width="{number(w)}" height="{number(h)}" '
        f'rx="{number(radius)}" {paint}{dash}/>'
    )
