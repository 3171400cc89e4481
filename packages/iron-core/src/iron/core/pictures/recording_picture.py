"""A recording drawn as a graph of steps and buffers, as SVG text.

This module owns :func:`recording_svg`, which draws a
:class:`~iron.core.recording.Recording` as a graph: each step (and host step) a
node, labelled with its operator and key dimensions; each use of a buffer an
edge from the node that wrote it to the node that reads it, labelled with the
buffer's name and shape; the graph's inputs, outputs and carried values as
terminal nodes; weights and states as nodes of their own (weights as
folded-corner notes in orange, states as rounded boxes in red), with a legend.
It builds those nodes and edges here and lays them out with the one engine,
:func:`~iron.core.pictures.layered.layered_svg` (pure Python, so a picture is
the same on every machine). It is deterministic: the same recording gives the
same text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from iron.core.handle import Handle, dtype_name
from iron.core.pictures.layered import Edge, Node, layered_svg

if TYPE_CHECKING:
    from iron.core.recording import HostStep, Recording

__all__ = ["ENGINES", "recording_svg"]

ENGINES = ("auto", "python")
"""The values ``recording_svg``'s ``engine`` takes: both name the one engine."""


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
        engine: The layout engine. There is one, a layered layout in pure
            Python (longest-path layers, barycentre order within them,
            polyline edges), so a picture is the same on every machine;
            ``"auto"`` and ``"python"`` both name it.

    Returns:
        A standalone SVG document.

    Raises:
        ValueError: Another engine (``"dot"`` included: Graphviz is not
            used, since a picture would then depend on whether it is
            installed).
    """
    if engine not in ENGINES:
        why = (
            "Graphviz's dot is not used: a picture would then depend on "
            "whether it is installed"
            if engine == "dot"
            else "pictures have one layout engine"
        )
        raise ValueError(
            f"engine={engine!r} is not one of {ENGINES}: {why}; every picture "
            f"is laid out by the pure-Python layered engine, the same on every "
            f"machine; pass engine='auto' (the default) or 'python'"
        )
    nodes, edges = _graph(recording)
    title = _default_title(recording) if title is None else title
    return layered_svg(nodes, edges, title)


# -- the graph of a recording ----------------------------------------------------


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


def _graph(recording: Recording) -> tuple[dict[str, Node], list[Edge]]:
    """The nodes and edges of a recording (see :func:`recording_svg`)."""
    nodes: dict[str, Node] = {}
    own: dict[str, str] = {}  # buffer name -> its own node (input or resident)

    def add(
        kind: str, lines: Sequence[str], tip: str, order: float, name: str = ""
    ) -> str:
        node_id = f"n{len(nodes)}"
        name = name or lines[0]
        nodes[node_id] = Node(node_id, kind, tuple(lines), tip, order, name)
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
    for k, host in waiting:
        host_step(k, host)

    # a resident first written (not read) this call sits after that writer
    touched: set[str] = set()
    for position, (_, reads, writes) in enumerate(events):
        for used in reads:
            if used is not None and used.name in residents:
                touched.add(used.name)
        for h in writes:
            if h.name in residents and h.name not in touched:
                touched.add(h.name)
                nodes[own[h.name]].order = position + 0.5

    edges: dict[tuple[str, str, str], Edge] = {}

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
        edges[key] = Edge(src, dst, label, tip, back)

    writer: dict[str, str] = {}

    def source(h: Handle) -> str | None:
        if h.name in residents:
            return own[h.name]
        return writer.get(h.name, own.get(h.name))

    for node_id, reads, writes in events:
        for used in reads:
            if used is not None and (src := source(used)) is not None:
                link(src, node_id, used)
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
