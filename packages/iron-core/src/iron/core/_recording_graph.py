"""The graph of a recording, as :func:`~iron.core.draw.recording_svg` draws it.

This private module owns the nodes and edges a recording becomes (one node
per step, host step, terminal, weight and state; one edge per producer,
consumer and buffer), their labels and tooltips, and the style of each kind
of node. Both layout engines (Graphviz's ``dot`` in :mod:`iron.core.draw`,
the pure-Python one in :mod:`iron.core._layout`) draw what it builds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from iron.core.handle import Handle, dtype_name

if TYPE_CHECKING:
    from iron.core.recording import HostStep, Recording

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
