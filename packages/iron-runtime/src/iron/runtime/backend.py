"""The runtime as iron-core finds it: compile a recording, call an operator.

``Graph.compile`` records and then asks the object this module registers
under the ``iron.backends`` entry point to build the version: check
``feeds=``, plan it on a snapshot of the graph's shared arena, build its
images for the backend in use (the emulated NPU or XRT) and wrap them in a
:class:`CompiledGraph`, whose arena then takes the plan's layout. It needs
the recording alone, and the graph's public state: its name, and the slot of
its :class:`~iron.core.graph_state.GraphState` where the runtime keeps the
graph's scratch arenas (which ``Graph.release`` releases). A standalone
operator call (``AXPY(size=2048, scalar_factor=2.0)(x, y)``) compiles a
one-step graph the same way.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from iron.core.arena import ArenaPlan
from iron.core.device import require_device
from iron.core.emit import program_for
from iron.core.graph import Graph
from iron.core.graph_state import state_of
from iron.core.operator import Operator
from iron.core.plan import packaging, plan
from iron.core.recording import Recording
from iron.runtime.arena import ScratchArena
from iron.runtime.compiled import CompiledGraph
from iron.runtime.select import default_device, open_device
from iron.runtime.use import GraphUse

__all__ = ["Runtime"]

logger = logging.getLogger("iron.runtime")


def _arena(graph: Graph, recording: Recording, device: Any) -> ScratchArena:
    """The graph's scratch arena for this backend and device, made once."""
    arenas = state_of(graph).backend
    assert recording.device is not None  # a graph records for a device
    key = (device.backend, recording.device.name)
    arena = arenas.get(key)
    if not isinstance(arena, ScratchArena):
        arena = arenas[key] = ScratchArena(device, ArenaPlan(), graph.name)
    return arena


#: The one-step graphs of standalone operator calls, by operator and device.
#: Module-level: iron-core makes a new ``Runtime`` for every call it forwards.
_standalone: dict[tuple, Graph] = {}


class Runtime:
    """Builds recordings into versions on the backend in use."""

    def default_device(self) -> str:
        """The device to build for when none is named: :func:`iron.runtime.default_device`.

        iron-core's ``require_device`` finds it here (through the
        ``iron.backends`` entry point), so the Python API and ``iron-lm``
        take one default.
        """
        return default_device()

    def compile(
        self,
        graph: Graph,
        recording: Recording,
        *,
        full_elf: bool | None = None,
        check: bool = False,
        feeds: CompiledGraph | None = None,
    ) -> CompiledGraph:
        """Plan and build one version of ``graph`` from its ``recording``.

        Runs under the graph's lock (``CompiledGraph.use``): a compile waits
        for the graph's calls in flight, and they for it.

        Raises:
            ValueError: ``feeds`` is given for a version that cannot loop,
                or the version does not fit the graph's arena.
            InUseError: A loop over the graph has not finished: a new
                version could grow the arena under its runs in flight.
        """
        description = recording.device
        assert description is not None  # a graph records for a device
        device = open_device(description)
        arena = _arena(graph, recording, device)
        use = GraphUse.of(arena)
        with use.lock:
            use.check(f"compiling a version of {graph.name}")
            return self._compile(
                graph, recording, device, arena, full_elf, check, feeds
            )

    def _compile(
        self,
        graph: Graph,
        recording: Recording,
        device: Any,
        arena: ScratchArena,
        full_elf: bool | None,
        check: bool,
        feeds: CompiledGraph | None,
    ) -> CompiledGraph:
        description = recording.device
        assert description is not None  # a graph records for a device
        packed = packaging(description, recording, full_elf, check)
        loops = packed.loops and bool(recording.carry)
        if feeds is not None:
            if not isinstance(feeds, CompiledGraph):
                raise TypeError(
                    f"{graph.name}: feeds= is the version (a CompiledGraph) this "
                    f"version's Emit starts, got {feeds!r}"
                )
            if not loops:
                why = (
                    "it carries no values"
                    if not recording.carry
                    else "it is not one full ELF: "
                    + "; ".join(packed.reasons or ("host steps",))
                )
                raise ValueError(
                    f"{graph.name}: feeds= needs a version that loops on the "
                    f"device, but {why}"
                )
            if feeds.arena is not arena:
                raise ValueError(
                    f"{graph.name}: feeds= is {feeds.name}, a version of another "
                    f"graph or device; an Emit starts a version of its own graph"
                )
        emit = loops and (feeds is not None or not recording.inputs)
        planned = plan(
            description, recording, full_elf, check, arena=arena.plan, emit=emit
        )
        # -v (INFO) a summary; -vv (DEBUG) every choice of the plan.
        logger.info("%s", planned.summary(graph.name))
        logger.debug("%s", planned.report(graph.name))
        if planned.emit is not None:
            # Composed before the build, so a version whose Emit cannot start
            # its target fails before the arena takes its layout.
            target = feeds.recording if feeds is not None else recording
            words = feeds.words if feeds is not None else planned.words
            reads = feeds.parameters if feeds is not None else recording.reads
            program_for(planned.emit, recording, target, words, [p.name for p in reads])
        version = CompiledGraph(recording, planned, check=check, arena=arena)
        if planned.emit is not None:
            version.emit_to(feeds if feeds is not None else version)
        return version

    def call_operator(self, op: Operator, arrays: tuple[Any, ...]) -> Any:
        """Run ``op`` alone on the current device: a one-step graph, compiled once."""
        cls = type(op)
        names = [spec.name for spec in cls.declaration.inputs]
        fields = {
            name: value
            for name, value in op.fields().items()
            if value is not None and not cls.declaration.params[name].derived
        }
        # A graph's versions are keyed by shapes alone: one graph per device.
        key = (cls, repr(op), require_device().name)
        graph = _standalone.get(key)
        if graph is None:
            graph = _standalone[key] = _OneStep(cls, names, fields)
        return graph(*arrays)


class _OneStep(Graph):
    """A graph of one step: how a standalone operator call runs."""

    def __init__(self, cls: type[Operator], names: list[str], fields: dict) -> None:
        self._cls, self._names, self._fields = cls, names, fields

    @property
    def name(self) -> str:
        return self._cls.__name__

    def signature(self) -> inspect.Signature:
        optional = {s.name for s in self._cls.declaration.inputs if s.optional}
        return inspect.Signature(
            [
                inspect.Parameter(
                    n,
                    inspect.Parameter.POSITIONAL_OR_KEYWORD,
                    default=None if n in optional else inspect.Parameter.empty,
                )
                for n in self._names
            ]
        )

    def body(self, *handles: Any) -> Any:
        return self._cls.step(*handles, **self._fields)
