"""The recorder: what ``Op.step``, handle views and ``on_host`` record into.

A :class:`Recorder` is active while a graph's ``body`` runs on handles. It
turns held tensors into resident handles, records each step (inferring its
dimensions, filling its tunables call > profile > ``resolve(dev)``, making its
output buffers), notes the range each per-call value must keep, and finishes
into a :class:`~iron.core.recording.Recording`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from iron.core import context
from iron.core.device import require_device
from iron.core.handle import Handle
from iron.core.held import State, Weight, _Unbound, held_dtype
from iron.core.operator import DimensionConflictError, Operator
from iron.core.percall import Affine, PerCall
from iron.core.recording import HostStep, Limit, Recording, Step

if TYPE_CHECKING:
    from iron.core.profile import Profile

__all__ = ["Recorder", "ViewOperandError", "on_host"]


class ViewOperandError(ValueError):
    """A strided or gathered view was given to an operator that reads contiguous runs."""


class Recorder:
    """Collects one recording of a graph's ``body``.

    Args:
        name: The graph's name.
        profile: The profile steps are made under, or None.
        held: What the graph holds, by ``id``: ``(path, tensor)``.
        input_names: The graph's input names (buffer names taken).
    """

    def __init__(
        self,
        name: str,
        profile: Profile | None,
        held: Mapping[int, tuple[str, Any]],
        input_names: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.profile = profile
        self.held = dict(held)
        self.device = require_device()
        self.steps: list[Step] = []
        self.host: list[HostStep] = []
        self.limits: list[Limit] = []
        self.addresses: dict[str, tuple[str, str, int]] = {}
        self.weights: dict[str, tuple[Any, Handle]] = {}
        self.states: dict[str, tuple[State, Handle]] = {}
        self._residents: dict[int, Handle] = {}
        self._names: set[str] = set(input_names)
        self._token: Any = None

    def __enter__(self) -> Recorder:
        self._token = context.graph_recorder.set(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        context.graph_recorder.reset(self._token)

    # -- handles ---------------------------------------------------------------

    def _fresh(self, base: str) -> str:
        name, n = base, 1
        while name in self._names:
            name, n = f"{base}.{n}", n + 1
        self._names.add(name)
        return name

    def handle_of(self, x: Any, operand: str = "operand") -> Handle:
        """The handle for ``x``: itself, or the resident a held tensor is.

        Raises:
            TypeError: ``x`` is an array the graph does not hold, or a
                weight declared by shape that was never loaded.
        """
        if isinstance(x, Handle):
            return x
        if isinstance(x, _Unbound):
            raise TypeError(
                f"{self.name}: {operand} is a param declared by shape that was "
                f"never loaded: bind it with load_state_dict first"
            )
        resident = self._residents.get(id(x))
        if resident is not None:
            return resident
        path_and_x = self.held.get(id(x))
        if path_and_x is None:
            if isinstance(x, (np.ndarray, Weight, State)):
                raise TypeError(
                    f"{self.name}: {operand} is a {type(x).__name__} the graph does "
                    f"not hold; hold it as an attribute (self.w = iron.param(array), "
                    f"iron.weight(table) or iron.state(shape)) so it is uploaded once"
                )
            raise TypeError(
                f"{self.name}: {operand} is {x!r}, not a handle: steps take the "
                f"handles body is given or returns, or tensors the graph holds"
            )
        path, tensor = path_and_x
        name = self._fresh(path)
        if path in self.weights or path in self.states:
            # Another tensor took this path (two graphs of one class inlined
            # from outside the graph): key this one by its own buffer name.
            path = name
        if isinstance(tensor, State):
            handle = Handle.whole(tensor.shape, tensor.dtype, name, "state")
            self.states[path] = (tensor, handle)
        else:
            array = tensor.array if isinstance(tensor, Weight) else tensor
            handle = Handle.whole(array.shape, held_dtype(array), name, "weight")
            self.weights[path] = (array, handle)
        self._residents[id(x)] = handle
        return handle

    def limit(self, expr: Any, lo: int, hi: int, handle: Handle) -> None:
        """Note that ``expr`` must lie in ``[lo, hi)`` each call, for ``handle``.

        Raises:
            IndexError: ``expr`` is an int outside the range.
        """
        if isinstance(expr, PerCall):
            expr = expr.affine()
        if isinstance(expr, Affine):
            self.limits.append(Limit(expr, lo, hi, repr(handle)))
        elif not lo <= int(expr) < hi:
            raise IndexError(f"{expr} is outside [{lo}, {hi}) for {handle!r}")

    def address(self, table: Handle, ids: Handle) -> None:
        """Note a gather of ``table`` rows by ids the device makes (``ids``)."""
        self.addresses[ids.name] = (table.name, ids.name, table.shape[0])

    # -- steps -----------------------------------------------------------------

    def _operands(
        self, cls: type[Operator], operands: Sequence[Any], fields: dict[str, Any]
    ) -> dict[str, Handle | None]:
        specs = cls.declaration.inputs
        if len(operands) > len(specs):
            raise TypeError(
                f"{cls.__name__}.step takes {len(specs)} operands "
                f"({', '.join(s.name for s in specs)}), got {len(operands)}"
            )
        given: dict[str, Any] = {}
        for spec, x in zip(specs, operands):
            given[spec.name] = x
        for spec in specs[len(operands) :]:
            if spec.name in fields:
                given[spec.name] = fields.pop(spec.name)
        handles: dict[str, Handle | None] = {}
        for spec in specs:
            x = given.get(spec.name)
            if x is None:
                if not spec.optional:
                    raise TypeError(f"{cls.__name__}.step needs operand {spec.name}")
                handles[spec.name] = None
                continue
            h = self.handle_of(x, f"{cls.__name__}.{spec.name}")
            if spec.dtype is not None and np.dtype(h.dtype) != np.dtype(spec.dtype):
                raise TypeError(
                    f"{cls.__name__}.{spec.name} takes {np.dtype(spec.dtype).name}, "
                    f"got {h!r}"
                )
            if not h.layout.contiguous and not cls.consumes_views:
                raise ViewOperandError(
                    f"{cls.__name__}.{spec.name} is {h!r}, a "
                    f"{h.layout.kind} view: only a data mover "
                    f"(Copy) reads one; copy it first, e.g. Copy.step(view)"
                )
            handles[spec.name] = h
        return handles

    def step(
        self,
        cls: type[Operator],
        operands: Sequence[Any],
        fields: Mapping[str, Any],
        out: Any = None,
    ) -> Handle | tuple[Handle, ...]:
        """Record one step of ``cls`` and return its output handle(s)."""
        fields = dict(fields)
        handles = self._operands(cls, operands, fields)
        merged = dict(fields)
        for dim, (value, source) in cls.infer(handles).items():
            if dim in fields and fields[dim] != value:
                raise DimensionConflictError(
                    f"{cls.__name__}: {dim} is {fields[dim]} from the call's "
                    f"keyword but {value} from {source}"
                )
            merged[dim] = value
        if self.profile is not None:
            op = self.profile.make(cls, **merged)
        else:
            op = cls(**merged)
        op = op.resolved(self.device)
        index = len(self.steps)
        outputs = self._outputs(op, index, list(handles.values()), out)
        self.steps.append(Step(index, op, tuple(handles.values()), outputs))
        return outputs[0] if len(outputs) == 1 else outputs

    def _outputs(
        self, op: Operator, index: int, inputs: list[Handle | None], out: Any
    ) -> tuple[Handle, ...]:
        cls = type(op)
        specs = cls.declaration.outputs
        shapes = op.output_shapes()
        dtypes = op.output_dtypes([h.dtype for h in inputs if h is not None])
        valid = op.output_valid(inputs)
        if out is not None:
            outs = out if isinstance(out, tuple) else (out,)
            if len(outs) != len(specs):
                raise TypeError(
                    f"{cls.__name__}.step writes {len(specs)} outputs; out= gives "
                    f"{len(outs)}"
                )
            result = []
            for spec, shape, dtype, o, bounds in zip(
                specs, shapes, dtypes, outs, valid
            ):
                h = self.handle_of(o, f"{cls.__name__} out=")
                if h.buffer.role != "state":
                    raise ValueError(
                        f"{cls.__name__}.step(out={h!r}): a step writes into a state "
                        f"or a view of one; other buffers are written by the step "
                        f"that makes them"
                    )
                if tuple(h.shape) != shape or np.dtype(h.dtype) != np.dtype(dtype):
                    raise ValueError(
                        f"{cls.__name__}.step(out={h!r}): its {spec.name} is "
                        f"{list(shape)} {np.dtype(dtype).name}"
                    )
                if bounds:
                    # the step writes only the rows its inputs bound this call
                    h = Handle(
                        h.buffer, h.shape, h.dtype, {**h.valid, **bounds}, h.layout
                    )
                result.append(h)
            return tuple(result)
        base = f"{cls.__name__.lower()}{index}"
        result = []
        for spec, shape, dtype, bounds in zip(specs, shapes, dtypes, valid):
            name = self._fresh(base if len(specs) == 1 else f"{base}.{spec.name}")
            h = Handle.whole(shape, dtype, name, "transient")
            if bounds:
                h = Handle(h.buffer, h.shape, h.dtype, dict(bounds), h.layout)
            result.append(h)
        return tuple(result)

    # -- host steps --------------------------------------------------------------

    def on_host(
        self, fn: Callable[..., None], reads: Sequence[Any], writes: Sequence[Any]
    ) -> None:
        """Record ``fn(*reads, *writes)`` to run on the host after the steps so far."""
        if not callable(fn):
            raise TypeError(f"on_host runs a function; got {fn!r}")
        read_handles = tuple(self.handle_of(x, "on_host read") for x in reads)
        if isinstance(writes, (Handle, State)):
            writes = (writes,)
        write_handles = tuple(self.handle_of(x, "on_host write") for x in writes)
        for h in (*read_handles, *write_handles):
            if not h.layout.contiguous:
                raise ValueError(
                    f"on_host moves contiguous tensors; {h!r} is a view: copy it "
                    f"into a buffer of its own first"
                )
        for h in write_handles:
            if h.buffer.role != "state":
                raise ValueError(
                    f"on_host writes parts of states; {h!r} is a {h.buffer.role}"
                )
        self.host.append(HostStep(fn, read_handles, write_handles, len(self.steps)))

    # -- finishing -----------------------------------------------------------------

    def finish(
        self,
        inputs: Sequence[Handle],
        outputs: Sequence[Handle],
        values: Sequence[PerCall],
        carry: Mapping[str, Handle | Affine | int],
        defaults: Mapping[str, int] | None = None,
    ) -> Recording:
        """Close the recording.

        Raises:
            ValueError: A host step writes a state that a device step writes.
        """
        written = {h.name for s in self.steps for h in s.outputs}
        for host in self.host:
            for h in host.writes:
                if h.name in written:
                    raise ValueError(
                        f"{self.name}: on_host writes {h.name}, which a step writes "
                        f"too; a host step writes parts of states no step writes"
                    )
        return Recording(
            name=self.name,
            steps=list(self.steps),
            inputs=list(inputs),
            outputs=list(outputs),
            values=list(values),
            carry=dict(carry),
            weights=dict(self.weights),
            states=dict(self.states),
            host=list(self.host),
            limits=list(self.limits),
            addresses=dict(self.addresses),
            defaults=dict(defaults or {}),
            device=self.device,
        )


def on_host(fn: Callable[..., None], *reads: Any, writes: Any = ()) -> None:
    """Run ``fn(*reads, *writes)`` on the host between the steps around it.

    A full ELF ends a command there, so the graph has no device loop. Each is
    contiguous: reads cut to their bounds, writes parts of states no step
    writes.

    Raises:
        TypeError: No graph's body is being recorded.
    """
    recorder = context.graph_recorder.get()
    if recorder is None:
        raise TypeError(
            "on_host records into a graph's body; call fn directly outside one"
        )
    recorder.on_host(fn, reads, writes)
