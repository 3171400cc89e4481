"""Recordings: a graph's steps, buffers and values, printed and run on the host.

A :class:`Recording` is the small IR that ``Graph.record`` produces: the
steps in order (each an operator instance with the handles it reads and
writes), host steps between them, the graph's inputs, outputs, per-call
values and carried values, and the weights and states it holds. Printing one
shows a stable table; :meth:`Recording.reference` evaluates it on the host,
each step through its operator's ``reference()``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from iron.core.access import bounded, read, write
from iron.core.handle import Buffer, Handle, dtype_name
from iron.core.percall import Affine, Kind, PerCall

if TYPE_CHECKING:
    from iron.core.device import Device
    from iron.core.held import State
    from iron.core.operator import Operator

__all__ = ["HostStep", "Limit", "Recording", "Signature", "Step"]


@dataclasses.dataclass(frozen=True)
class Signature:
    """What a graph's ``body`` takes: its inputs and its per-call values.

    Attributes:
        inputs: Every input's name, in ``body``'s order, optional ones included.
        optional: The inputs that may be left out (default None).
        values: Each per-call value's kind and dtype, by name, in order.
        defaults: The per-call values' defaults, by name (those that have one).
    """

    inputs: tuple[str, ...]
    optional: frozenset[str] = frozenset()
    values: Mapping[str, tuple[Kind, Any]] = dataclasses.field(default_factory=dict)
    defaults: Mapping[str, int] = dataclasses.field(default_factory=dict)

    @property
    def declared(self) -> dict[str, int | None]:
        """Every per-call value by name, with its default (None: it has none)."""
        return {name: self.defaults.get(name) for name in self.values}


@dataclasses.dataclass(frozen=True, eq=False)
class Step:
    """One recorded operator step: the instance and the handles it reads and writes."""

    index: int
    op: Operator
    inputs: tuple[Handle | None, ...]
    outputs: tuple[Handle, ...]

    def __repr__(self) -> str:
        return f"Step({self.index}, {self.op!r})"


@dataclasses.dataclass(frozen=True, eq=False)
class HostStep:
    """``fn(*reads, *writes)`` run on the host after the first ``after`` steps."""

    fn: Callable[..., None]
    reads: tuple[Handle, ...]
    writes: tuple[Handle, ...]
    after: int


@dataclasses.dataclass(frozen=True)
class Limit:
    """A per-call expression that must lie in ``[lo, hi)`` for a view to stay inside."""

    expr: Affine
    lo: int
    hi: int
    where: str


@dataclasses.dataclass(eq=False)
class Recording:
    """A graph's ``body`` recorded on handles of one set of input shapes.

    Attributes:
        name: The graph's name.
        steps: The operator steps, in order.
        inputs: The input handles, in ``body``'s order.
        outputs: The handles ``body`` returned.
        values: The graph's per-call values.
        carry: Each carried value's next value (a handle or an expression).
        weights: Each weight held, by path: ``(tensor, handle)``.
        states: Each state held, by path: ``(state, handle)``.
        host: Host steps, each after a number of steps.
        limits: The range each per-call expression must keep.
        addresses: Gathers by ids the device makes, by ids buffer.
        defaults: Per-call values' defaults.
        device: The device it was recorded for.
        signature: What the graph's ``body`` takes (every input, optional
            ones included; every per-call value, its kind and default); by
            default what this recording's inputs and values say.
    """

    name: str
    steps: list[Step]
    inputs: list[Handle]
    outputs: list[Handle]
    values: list[PerCall]
    carry: dict[str, Handle | Affine | int]
    weights: dict[str, tuple[Any, Handle]]
    states: dict[str, tuple[State, Handle]]
    host: list[HostStep]
    limits: list[Limit]
    addresses: dict[str, tuple[str, str, int]]
    defaults: dict[str, int]
    device: Device | None = None
    signature: Signature | None = None

    def __post_init__(self) -> None:
        if self.signature is None:
            self.signature = Signature(
                tuple(h.name for h in self.inputs),
                frozenset(),
                {v.name: (v.kind, v.dtype) for v in self.values},
                dict(self.defaults),
            )

    # -- what it holds ---------------------------------------------------------

    @functools.cached_property
    def buffers(self) -> dict[str, Buffer]:
        """Every buffer by name: inputs, residents, then step outputs in order.

        Computed once: a recording does not change after ``finish``.
        """
        found: dict[str, Buffer] = {}
        for h in self.inputs:
            found[h.name] = h.buffer
        for _, h in (*self.weights.values(), *self.states.values()):
            found[h.name] = h.buffer
        for step in self.steps:
            for h in (*step.inputs, *step.outputs):
                if h is not None:
                    found.setdefault(h.name, h.buffer)
        return found

    @property
    def residents(self) -> dict[str, Handle]:
        """Weights and states by path: held across calls, uploaded once."""
        return {
            path: h for path, (_, h) in (*self.weights.items(), *self.states.items())
        }

    @property
    def reads(self) -> list[PerCall]:
        """The per-call values this version reads (others go unused)."""
        used: set[str] = set()

        def note(x: Any) -> None:
            if isinstance(x, (Affine, PerCall)):
                used.update(x.affine().names())

        for h in self._handles():
            for b in h.valid.values():
                note(b)
            for _, part in h.layout.per_call_parts():
                note(part)
        for step in self.steps:
            for v in step.op.fields().values():
                note(v)
        for limit in self.limits:
            note(limit.expr)
        for nxt in self.carry.values():
            note(nxt)
        return [v for v in self.values if v.name in used or v.name in self.carry]

    def _handles(self) -> list[Handle]:
        found = [*self.inputs, *self.outputs]
        for step in self.steps:
            found.extend(h for h in (*step.inputs, *step.outputs) if h is not None)
        for host in self.host:
            found.extend((*host.reads, *host.writes))
        return found

    # -- running on the host -----------------------------------------------------

    def check_values(self, values: Mapping[str, int]) -> None:
        """Raise IndexError if ``values`` index or bound a view outside it."""
        for limit in self.limits:
            v = limit.expr.evaluate(values)
            if not limit.lo <= v < limit.hi:
                raise IndexError(
                    f"{self.name}: {limit.expr} is {v} this call, outside "
                    f"[{limit.lo}, {limit.hi}) for {limit.where}"
                )

    def reference(
        self, given: Mapping[str, np.ndarray], values: Mapping[str, int]
    ) -> tuple[list[np.ndarray], dict[str, int]]:
        """Evaluate the recording on the host: each step through ``reference()``.

        States are read and written in their host copies, so consecutive
        calls see each other's writes as on the device.

        Returns:
            The outputs (numpy, cut to their bounds) and each carried value's
            next value.
        """
        from iron.core.carry import evaluate_carry

        self.check_values(values)
        buffers: dict[str, np.ndarray] = {}
        for h in self.inputs:
            buffers[h.name] = np.ascontiguousarray(given[h.name], dtype=h.dtype)
        for tensor, h in self.weights.values():
            buffers[h.name] = np.ascontiguousarray(np.asarray(tensor), dtype=h.dtype)
        for state, h in self.states.values():
            buffers[h.name] = state.host
        for name, buffer in self.buffers.items():
            if name not in buffers:
                buffers[name] = np.zeros(buffer.shape, buffer.dtype)
        host = sorted(self.host, key=lambda s: s.after)
        for step in self.steps:
            while host and host[0].after <= step.index:
                self.run_host(host.pop(0), values, buffers)
            self.run_step(step, values, buffers)
        for rest in host:
            self.run_host(rest, values, buffers)
        # copies: a later call (or the caller) must not see through them
        outputs = [read(h, values, buffers).copy() for h in self.outputs]
        carry = evaluate_carry(self.carry, values, lambda h: read(h, values, buffers))
        return outputs, carry

    @staticmethod
    def run_step(step: Step, values: Any, buffers: Mapping[str, np.ndarray]) -> None:
        """Run one step through its operator's reference, on ``buffers``.

        ``values`` maps per-call values to ints, or evaluates an expression
        (as a device reading scratchpad words does); the emulated NPU runs
        its steps through this same function on device memory.
        """
        op = step.op.bind(values)
        args = [None if h is None else read(h, values, buffers) for h in step.inputs]
        # An optional input given none is None, which the signature of
        # Operator.reference (the spec's) leaves out.
        result = op.reference(*args)  # type: ignore[arg-type]
        results = result if isinstance(result, tuple) else (result,)
        if len(results) != len(step.outputs):
            raise TypeError(
                f"{type(op).__name__}.reference returned {len(results)} arrays for "
                f"{len(step.outputs)} outputs"
            )
        for h, r in zip(step.outputs, results):
            r = np.asarray(r)
            cut = bounded(h, values)
            if r.shape == tuple(h.shape) and any(s != slice(None) for s in cut):
                r = r[cut]
            write(h, values, buffers, r)

    @staticmethod
    def run_host(
        host: HostStep, values: Any, buffers: Mapping[str, np.ndarray]
    ) -> None:
        """Run one host step: ``fn(*reads, *writes)``, then store what it wrote."""
        # copies: the host function may keep what it is given
        reads = [read(h, values, buffers).copy() for h in host.reads]
        writes = [read(h, values, buffers).copy() for h in host.writes]
        host.fn(*reads, *writes)
        for h, w in zip(host.writes, writes):
            write(h, values, buffers, w)

    # -- printing ------------------------------------------------------------------

    def __str__(self) -> str:
        def names(hs: Any) -> str:
            return ", ".join("-" if h is None else _short(h) for h in hs) or "-"

        lines = [f"Recording {self.name}: {len(self.steps)} steps"]
        lines.append(f"  inputs   {', '.join(map(repr, self.inputs)) or '-'}")
        if self.values:
            shown = [
                f"{v.name} ({v.kind.value}"
                + (
                    f", default {self.defaults[v.name]}"
                    if v.name in self.defaults
                    else ""
                )
                + ")"
                for v in self.values
            ]
            lines.append(f"  values   {', '.join(shown)}")
        for path, (_, h) in self.weights.items():
            lines.append(
                f"  weight   {h!r}" + (f" <- {path}" if path != h.name else "")
            )
        for path, (_, h) in self.states.items():
            lines.append(
                f"  state    {h!r}" + (f" <- {path}" if path != h.name else "")
            )
        rows = [("#", "operator", "reads", "writes")]
        host = sorted(self.host, key=lambda s: s.after)
        for step in self.steps:
            while host and host[0].after <= step.index:
                h = host.pop(0)
                rows.append(("host", _fn_name(h.fn), names(h.reads), names(h.writes)))
            rows.append(
                (
                    str(step.index),
                    repr(step.op),
                    names(step.inputs),
                    names(step.outputs),
                )
            )
        for h in host:
            rows.append(("host", _fn_name(h.fn), names(h.reads), names(h.writes)))
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        for r in rows:
            cells = [r[i].ljust(widths[i]) for i in range(3)] + [r[3]]
            lines.append("  " + "  ".join(cells).rstrip())
        lines.append(f"  outputs  {', '.join(map(repr, self.outputs)) or '-'}")
        if self.carry:
            shown = [
                f"{k} = {_short(v) if isinstance(v, Handle) else v}"
                for k, v in self.carry.items()
            ]
            lines.append(f"  carry    {', '.join(shown)}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"<Recording {self.name}: {len(self.steps)} steps, "
            f"{len(self.inputs)} inputs, {len(self.outputs)} outputs>"
        )


def _short(h: Handle) -> str:
    text = repr(h)
    if h.is_whole:
        return h.name
    return text.replace(f" {dtype_name(h.dtype)}", "", 1)


def _fn_name(fn: Callable[..., Any]) -> str:
    return f"on_host {getattr(fn, '__qualname__', repr(fn))}"
