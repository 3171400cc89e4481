"""What a graph holds across calls: weights (``param``, ``weight``) and states.

A graph holds tensors as attributes, at any depth (``self.layers[3].q`` is the
path ``layers.3.q``). ``iron.param`` marks an array as a weight (or declares
one by shape, for ``Graph.load_state_dict`` to bind); ``iron.weight`` marks a
table ``body`` indexes per call; ``iron.state`` declares device-resident
memory a graph reads and writes (a KV cache). :func:`walk` visits them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
from ml_dtypes import bfloat16

from iron.core import context

__all__ = [
    "State",
    "Weight",
    "held_dtype",
    "narrowed",
    "param",
    "state",
    "walk",
    "weight",
]


class _Param(np.ndarray):
    """An array a graph holds as a weight (see :func:`param`).

    While a graph that holds it is recorded, indexing it gives a view of its
    resident handle (``self.embed[token]``), as a state's does; elsewhere it
    indexes as the array it is.
    """

    #: The dtype it is resident as, when :func:`narrowed` (else unset).
    held_dtype: np.dtype

    def __getitem__(self, key: Any) -> Any:
        recorder = context.graph_recorder.get()
        if recorder is not None and id(self) in recorder.held:
            return recorder.handle_of(self)[key]
        return super().__getitem__(key)


def narrowed(array: np.ndarray, dtype: Any) -> np.ndarray:
    """Hold ``array`` as a weight of the narrower ``dtype``, converted when read.

    The array is held as it is (a memory-mapped float32 checkpoint tensor
    stays mapped); its resident handle is ``dtype`` (bf16), and whatever
    reads it converts: an upload a piece at a time, the host reference per
    tensor. Rounding is numpy's cast (to nearest even, as torch's ``.to``).
    """
    held = array.view(_Param)
    held.held_dtype = np.dtype(dtype)
    return held


def held_dtype(x: Any) -> np.dtype:
    """The dtype a held array is resident as: its own, unless :func:`narrowed`."""
    dtype: np.dtype = getattr(x, "held_dtype", None) or np.dtype(x.dtype)
    return dtype


class _Unbound(np.ndarray):
    """A weight declared by shape that ``load_state_dict`` has not bound yet."""


def param(*shape: Any, dtype: Any = bfloat16) -> np.ndarray:
    """Declare a weight a graph holds, as torch's ``nn.Parameter``.

    Declared by shape for ``Graph.load_state_dict`` to bind, or
    ``param(array)`` holding ``array``. A graph refuses to hold a bare array.

    Not to be confused with :func:`iron.core.declare.param`, which declares a
    dimension or constant of an operator class (what a profile matches).
    """
    if len(shape) == 1 and isinstance(shape[0], np.ndarray):
        a = shape[0]
        return a if isinstance(a, _Param) else a.view(_Param)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    dims = tuple(int(s) for s in shape)
    return np.broadcast_to(np.zeros((), dtype), dims).view(_Unbound)


def _resident_handle(x: Any) -> Any:
    recorder = context.graph_recorder.get()
    if recorder is None:
        raise TypeError(
            f"{x!r} is indexed into a handle only while a graph's body is recorded"
        )
    return recorder.handle_of(x)


class State:
    """Device-resident memory a graph holds, read and written across calls.

    Zeros until a step writes it (``Copy.step(k, out=self.cache[position])``).
    On the host, :attr:`host` holds its contents for ``graph.reference``.
    """

    def __init__(self, shape: Any, dtype: Any = bfloat16, name: str | None = None):
        if isinstance(shape, (int, np.integer)):
            shape = (shape,)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.name = name
        self._host: np.ndarray | None = None

    @property
    def host(self) -> np.ndarray:
        """The host copy the reference reads and writes (zeros at first)."""
        if self._host is None:
            self._host = np.zeros(self.shape, self.dtype)
        return self._host

    def reset(self) -> None:
        """Zero the host copy."""
        self._host = None

    def __getitem__(self, key: Any) -> Any:
        return _resident_handle(self)[key]

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return f"State{label}({list(self.shape)}, {self.dtype.name})"


def state(shape: Any, dtype: Any = bfloat16, name: str | None = None) -> State:
    """Declare device-resident state a graph holds."""
    return State(shape, dtype, name)


class Weight:
    """A tensor a graph holds and its body indexes per call (``weight(table)[ids]``)."""

    def __init__(self, array: Any) -> None:
        self.array = np.asarray(array)

    @property
    def shape(self) -> tuple[int, ...]:
        """The table's shape."""
        return self.array.shape

    @property
    def dtype(self) -> np.dtype:
        """The table's dtype."""
        return self.array.dtype

    def __getitem__(self, key: Any) -> Any:
        return _resident_handle(self)[key]

    def __repr__(self) -> str:
        return f"Weight({list(self.shape)}, {self.dtype.name})"


def weight(array: Any) -> Weight:
    """Return a tensor a graph's body indexes per call (``iron.weight(table)[ids]``)."""
    return Weight(array)


def _is_graph(x: Any) -> bool:
    from iron.core.graph import Graph

    return isinstance(x, Graph)


def _children(x: Any) -> Iterator[tuple[str, Any, Any]]:
    """(key as a path part, child, key to set it by) of a container."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield str(k), v, k
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield str(i), v, i
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            yield f.name, getattr(x, f.name), f.name
    else:  # a graph: its public attributes
        for k, v in vars(x).items():
            if not k.startswith("_"):
                yield k, v, k


def _container(x: Any) -> bool:
    return (
        isinstance(x, (dict, list, tuple))
        or (dataclasses.is_dataclass(x) and not isinstance(x, type))
        or _is_graph(x)
    )


def walk(
    tree: Any,
    *,
    shared: list[str] | None = None,
    graphs: bool = True,
) -> Iterator[tuple[str, Any, Any, Any]]:
    """Visit every tensor held under ``tree``: ``(path, tensor, parent, key)``.

    Tensors are numpy arrays (params among them), :class:`Weight` and
    :class:`State`; containers are graphs (their public attributes), lists,
    tuples, dicts and dataclasses. A container met again at a second path is
    not visited twice; its path is appended to ``shared``. With
    ``graphs=False`` a nested graph is yielded as a leaf rather than entered.
    """
    seen: set[int] = set()

    def visit(x: Any, path: str) -> Iterator[tuple[str, Any, Any, Any]]:
        for part, child, key in _children(x):
            name = f"{path}{part}"
            if isinstance(child, (np.ndarray, Weight, State)) or (
                not graphs and _is_graph(child)
            ):
                yield name, child, x, key
            elif _container(child):
                if id(child) in seen:
                    if shared is not None:
                        shared.append(name)
                    continue
                seen.add(id(child))
                yield from visit(child, f"{name}.")
            elif hasattr(child, "__array__") and hasattr(child, "shape"):
                yield name, child, x, key  # a tensor of another library

    seen.add(id(tree))
    yield from visit(tree, "")
