"""The runtime keeps its per-graph state where iron-core says (issue 19, section 1).

A graph's state is one object iron-core owns (``GraphState``); the runtime
fills its backend slot with its scratch arenas, ``Graph.release`` releases
them, and the runtime compiles from the recording alone. No module of
iron-runtime or iron-lm reads or writes a graph's private attributes or its
``__dict__``: the source scan below enforces it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
from ops import Scale32

import iron
from iron.core.graph import Graph
from iron.core.graph_state import GraphState, Releasable, state_of
from iron.runtime import CompiledGraph, ScratchArena

PACKAGES = Path(__file__).resolve().parents[2]
SOURCES = [PACKAGES / "iron-runtime" / "src", PACKAGES / "iron-lm" / "src"]

#: Graph's private attributes (methods, properties) and its state's key.
PRIVATE = {
    name
    for name in vars(Graph)
    if name.startswith("_") and not (name.startswith("__") and name.endswith("__"))
} | {"_iron_graph_state", "_arenas", "_versions", "_references", "_bound"}


def _reaches_into_a_graph(tree: ast.AST) -> list[tuple[int, str]]:
    """Lines reading a Graph's private attribute, or another object's ``__dict__``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner = node.value
            own = isinstance(owner, ast.Name) and owner.id in ("self", "cls")
            if node.attr in PRIVATE and not own:
                found.append((node.lineno, f".{node.attr}"))
            if node.attr == "__dict__" and not own:
                found.append((node.lineno, ".__dict__"))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "vars"
            and node.args
            and not (isinstance(node.args[0], ast.Name) and node.args[0].id == "self")
        ):
            found.append((node.lineno, "vars(...)"))
    return found


def test_no_runtime_or_lm_module_reaches_into_a_graph():
    problems = []
    for src in SOURCES:
        for path in sorted(src.rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for line, what in _reaches_into_a_graph(tree):
                problems.append(f"{path.relative_to(PACKAGES)}:{line}: {what}")
    assert not problems, "\n".join(problems)


def test_the_scan_sees_what_the_runtime_used_to_do():
    before = ast.parse(
        "arenas = graph.__dict__.setdefault('_arenas', {})\n"
        "params = graph._parameters\n"
        "vars(graph)['_arenas'] = {}\n"
        "own = self._parameters\n"
    )
    assert sorted(line for line, _ in _reaches_into_a_graph(before)) == [1, 2, 3]


class Twice(iron.Graph):
    def body(self, x, y=None, *, n: iron.Scratchpad[int] = 3, k: iron.Scratchpad[int]):
        return Scale32.step(x, factor=2.0)


def test_the_recording_carries_the_whole_signature():
    with iron.use_device("npu2"):
        recording = Twice().record(x=((64,), np.float32))
    signature = recording.signature
    assert signature is not None
    assert signature.inputs == ("x", "y") and signature.optional == {"y"}
    assert signature.declared == {"n": 3, "k": None}
    assert [h.name for h in recording.inputs] == ["x"]


def test_a_version_is_built_from_its_recording_and_plan_alone():
    """The spec's constructor: ``CompiledGraph(recording, plan)``, no graph."""
    with iron.use_device("npu2"):
        recording = Twice().record(x=((64,), np.float32))
    version = CompiledGraph(recording, iron.plan("npu2", recording))
    assert version.input_names == ["x", "y"]
    assert version.declared == {"n": 3, "k": None}
    assert isinstance(version.arena, ScratchArena)
    assert version.device is version.arena.device
    assert version.arena.plan.versions.keys() == {version.plan.version}
    x = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(version(x, k=1), 2 * x)
    assert iron.CompiledGraph is CompiledGraph


def test_the_arenas_live_in_the_graphs_state_and_release_frees_them():
    graph = Twice()
    version = graph.compile(x=((64,), np.float32))
    state = state_of(graph)
    assert isinstance(state, GraphState)
    (arena,) = state.backend.values()
    assert arena is version.arena and isinstance(arena, Releasable)
    version(np.ones(64, np.float32), k=0)
    assert arena.nbytes > 0
    graph.release()
    assert arena.nbytes == 0
    x = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(graph(x, k=0), 2 * x)  # loads again
