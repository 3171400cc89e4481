"""The ``Operator`` base: construction, resolution, shape inference and ``step``.

An operator is a class that declares its fields (see :mod:`iron.core.declare`)
and implements ``reference`` (numpy), ``tolerance`` and ``resolve(dev)``.
``Op(**fields)`` constructs one standalone; ``Op.step(*handles, **fields)``
inside a graph's ``body`` records a step instead, inferring its dimensions
from the handles it is given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numpy as np

from iron.core import context
from iron.core.declare import (
    MISSING,
    Declaration,
    Divisors,
    Input,
    Output,
    collect,
    domain_text,
    domain_values,
)
from iron.core.device import Device, require_device
from iron.core.percall import PerCall, _Expr, evaluate

if TYPE_CHECKING:
    from iron.core.handle import Handle
    from iron.core.tolerance import Tolerance

__all__ = [
    "Cost",
    "DimensionConflictError",
    "Operator",
    "RefusedShapeError",
    "StepOutsideBodyError",
]


class StepOutsideBodyError(TypeError):
    """``Op.step`` was called outside a graph's ``body``."""


class DimensionConflictError(ValueError):
    """Two sources give one of a step's dimensions different values."""


class RefusedShapeError(ValueError):
    """An operator cannot run this shape on this device."""


@dataclasses.dataclass(frozen=True)
class Cost:
    """What one call of an operator does, for the cost model.

    ``macs`` and ``bytes`` depend on the shape only; the other fields say how
    the operator's tunables spread and cut that work, so the cost model
    (:func:`iron.core.cost.step_time`) can tell one setting from another.
    Their defaults describe one kernel call on one core of one column with
    nothing read twice.

    Attributes:
        macs: Multiply-accumulates (or element operations for elementwise
            work), each counted once.
        bytes: Bytes moved between DDR and the array (inputs read plus
            outputs written), each counted once.
        columns: Array columns the work and its DDR traffic are spread over
            (each column has its own shim DMA); at least 1.
        cores: Compute cores the MACs are spread over, running in parallel;
            by default one per column. 0 for pure data movement (no MACs).
        calls: Kernel invocations per core per call of the operator (the
            busiest core's, when they differ): each pays the device's
            ``kernel_call_seconds``. 0 for pure data movement.
        reread_bytes: Bytes moved between DDR and the array more than once
            because of the tiling (a GEMM's ``a`` re-read for each group of
            N tiles), on top of ``bytes``.
        stall_seconds: Seconds per call of the operator the busiest core
            waits on its own DMA beyond its work and its kernel calls (a
            single-buffered output tile whose drain outlasts the next tile's
            compute); 0 where every streamed tile is double-buffered.
    """

    macs: int
    bytes: int
    columns: int = 1
    cores: int | None = None
    calls: int = 1
    reread_bytes: int = 0
    stall_seconds: float = 0.0

    def __post_init__(self) -> None:
        cores = self.columns if self.cores is None else self.cores
        object.__setattr__(self, "cores", cores)
        if self.columns < 1:
            raise ValueError(f"Cost.columns={self.columns} is below 1")
        if (
            cores < 0
            or self.calls < 0
            or self.reread_bytes < 0
            or self.stall_seconds < 0
        ):
            raise ValueError(
                f"Cost.cores={self.cores}, calls={self.calls}, reread_bytes="
                f"{self.reread_bytes} and stall_seconds={self.stall_seconds} "
                f"cannot be negative"
            )
        if self.macs and not self.cores:
            raise ValueError(f"Cost.macs={self.macs} needs at least one core")


class Operator:
    """The base of every operator: declared fields, resolution and recording.

    Subclasses declare ``param()`` and ``tunable()`` fields, ``inputs`` and
    ``outputs``, and implement :meth:`reference`, :meth:`tolerance`,
    :meth:`resolve` and :meth:`cost`; :meth:`check` refuses shapes a device
    cannot run.

    Attributes:
        declaration: What the class declares (params, open tunables,
            operands); set for each subclass.
        pinned: The tunables the caller gave, which a profile never changes.
    """

    declaration: ClassVar[Declaration] = Declaration({}, (), (), ())
    inputs: ClassVar[tuple[Input, ...]] = ()
    outputs: ClassVar[tuple[Output, ...]] = ()
    #: Whether the operator reads strided or gathered views (only data movers
    #: such as Copy do; every other operator reads contiguous runs).
    consumes_views: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.declaration = collect(cls.__name__, cls.__bases__, vars(cls))

    def __init__(self, *, pinned: frozenset[str] | None = None, **fields: Any):
        cls = type(self)
        params = cls.declaration.params
        unknown = sorted(set(fields) - set(params))
        if unknown:
            raise TypeError(
                f"{cls.__name__} declares no field {unknown}; its fields are "
                f"{list(params)}"
            )
        missing = [
            name
            for name, p in params.items()
            if name not in fields
            and not p.tunable
            and not p.derived
            and p.default is MISSING
        ]
        if missing:
            raise TypeError(
                f"{cls.__name__} needs {missing}: give them as keywords "
                f"({', '.join(f'{m}=...' for m in missing)})"
            )
        for name, p in params.items():
            if name in fields:
                value = fields[name]
            elif p.derived:
                continue
            elif p.default is not MISSING:
                value = p.default
            else:
                value = None  # an open tunable, filled by resolved()
            if isinstance(value, PerCall | _Expr) and not p.per_call:
                raise TypeError(
                    f"{cls.__name__}.{name} is fixed when the graph is recorded; "
                    f"it cannot be the per-call value {value}"
                )
            if p.tunable and value is not None:
                value = self._in_domain(name, value, fields)
            object.__setattr__(self, name, value)
        for name, p in params.items():
            if name not in fields and p.derived:
                derive = p.derive or p.default
                object.__setattr__(self, name, derive(self))
        for name, p in params.items():
            # Divisors of a derived field: checked once that field is computed.
            of = p.domain.of if isinstance(p.domain, Divisors) else None
            if (
                of is not None
                and of in params
                and params[of].derived
                and of not in fields
            ):
                if getattr(self, name) is not None:
                    self._in_domain(name, getattr(self, name), fields)
        given = frozenset(
            n
            for n, v in fields.items()
            if n in cls.declaration.tunables and v is not None
        )
        self.pinned = given if pinned is None else frozenset(pinned)

    def _in_domain(self, name: str, value: Any, fields: Mapping[str, Any]) -> Any:
        domain = type(self).declaration.params[name].domain
        if isinstance(domain, type) and issubclass(domain, Enum):
            try:
                return domain(value)
            except ValueError:
                pass
        else:
            known = {**self.fields(), **fields}
            if isinstance(domain, Divisors) and known.get(domain.of) is None:
                return value  # its dimension is not known yet
            allowed = domain_values(domain, known)
            if allowed is None or value in allowed:
                return value
        raise ValueError(
            f"{type(self).__name__}.{name}={value!r} is outside its domain "
            f"({domain_text(domain)})"
        )

    # -- fields -------------------------------------------------------------

    def fields(self) -> dict[str, Any]:
        """Every declared field's current value, by name (None if open)."""
        return {
            name: getattr(self, name)
            for name in type(self).declaration.params
            if name in vars(self)
        }

    def __setattr__(self, name: str, value: Any) -> None:
        if name in type(self).declaration.params:
            raise AttributeError(
                f"{type(self).__name__}.{name} is fixed once constructed; make "
                f"another operator, or use resolved()"
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if name in type(self).declaration.params:
            raise AttributeError(
                f"{type(self).__name__}.{name} is fixed once constructed; make "
                f"another operator, or use resolved()"
            )
        object.__delattr__(self, name)

    def replace(self, **fields: Any) -> Operator:
        """Return a copy with ``fields`` changed (derived fields recomputed)."""
        return self._replaced(**fields)

    def _replaced(self, **fields: Any) -> Self:
        """:meth:`replace`, typed as the subclass it returns."""
        cls = type(self)
        own = {
            n: v
            for n, v in self.fields().items()
            if not cls.declaration.params[n].derived
        }
        tunables = set(cls.declaration.tunables)
        given = {n for n, v in fields.items() if n in tunables and v is not None}
        reopened = {n for n, v in fields.items() if v is None}
        pinned = (self.pinned - reopened) | given
        return cls(**{**own, **fields}, pinned=frozenset(pinned))

    def open_tunables(self) -> tuple[str, ...]:
        """The tunables still without a value."""
        return tuple(
            n for n in type(self).declaration.tunables if getattr(self, n) is None
        )

    def resolved(self, dev: Device | str | None = None) -> Operator:
        """Return a copy with every open tunable filled by :meth:`resolve`.

        Args:
            dev: The device; else the current one.

        Raises:
            RuntimeError: No device is given or bound.
            RefusedShapeError: The device cannot run this shape.
        """
        device = require_device(dev)
        filled = self
        open_ = self.open_tunables()
        if open_:
            defaults = self.resolve(device)
            lacking = [n for n in open_ if defaults.get(n) is None]
            if lacking:
                raise NotImplementedError(
                    f"{type(self).__name__}.resolve({device}) gives no value for "
                    f"{lacking}"
                )
            chosen = {n: defaults[n] for n in open_}
            filled = self.replace(**chosen)
            object.__setattr__(filled, "pinned", self.pinned)
        if context.device_fit.get():
            filled.check(device)
        return filled

    def bind(self, values: Mapping[str, int]) -> Operator:
        """Return a copy whose per-call fields are evaluated for one call.

        Derived fields computed from per-call ones are evaluated too.
        """
        cls = type(self)
        params = cls.declaration.params
        per_call = {
            n: evaluate(v, values)
            for n, v in self.fields().items()
            if (params[n].per_call or params[n].derived)
            and isinstance(v, PerCall | _Expr)
        }
        if not per_call:
            return self
        copy = object.__new__(cls)
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(per_call)
        return copy

    def __repr__(self) -> str:
        params = type(self).declaration.params
        fields = self.fields()
        ordered = [n for n in fields if not params[n].tunable]
        ordered += [n for n in fields if params[n].tunable]
        inner = ", ".join(f"{n}={fields[n]!r}" for n in ordered)
        return f"{type(self).__name__}({inner})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))

    # -- what subclasses implement -----------------------------------------

    def resolve(self, dev: Device) -> dict[str, Any]:
        """Return the default of each open tunable for ``dev``."""
        return {}

    def check(self, dev: Device) -> None:
        """Raise :class:`RefusedShapeError` if ``dev`` cannot run this shape."""

    def reference(self, *arrays: np.ndarray) -> Any:
        """Compute the outputs on the host in numpy, modelling the kernel's rounding."""
        raise NotImplementedError(f"{type(self).__name__} has no reference()")

    def reads_float32(self, index: int) -> bool:
        """Whether :meth:`reference` is faster on a float32 copy of input ``index``.

        For a bf16 input: a host that keeps float32 copies of bf16 weights
        (the emulated NPU, within its memory budget) hands a copy only to
        inputs that say so; the values are the same either way, as every
        bf16 is exactly a float32. True by default: numpy computes in float32 and converts a
        bf16 array on every call. An operator whose reference reads bf16 at
        its own two bytes (a compiled matrix-vector product) says False.
        """
        return True

    def decoded(self, index: int) -> Callable[[np.ndarray], np.ndarray] | None:
        """How input ``index`` may be kept decoded for :meth:`reference`, or None.

        For a weight stored packed (4- or 8-bit codes in groups, say): a
        function from the packed array to the values the kernel computes
        with (the dequantized bf16 matrix). A host that keeps such copies
        (the emulated NPU, within its memory budget, made again after each
        upload of the weight) passes :meth:`reference` the copy in place of
        the packed bytes, and :meth:`reference` must give the same bits from
        either. None by default: the input is read as it is stored.
        """
        return None

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        """How far a device result may be from :meth:`reference`'s, and why.

        Operators whose bound depends on the data (a matmul's grows with
        ``|A| @ |B|``) take the step's inputs; without them they give the bound
        that holds for any input they document.
        """
        raise NotImplementedError(f"{type(self).__name__} has no tolerance()")

    def cost(self, dev: Device) -> Cost:
        """What one call does on ``dev``: MACs, bytes moved, and how it is tiled."""
        raise NotImplementedError(f"{type(self).__name__} has no cost()")

    def _settled(self, dev: Device) -> Self:
        """``self``, or with its open tunables at ``resolve(dev)``'s defaults.

        For :meth:`cost` of an operator constructed without its tunables; it
        does not :meth:`check` the result.
        """
        open_ = self.open_tunables()
        if not open_:
            return self
        defaults = self.resolve(dev)
        return self._replaced(**{n: defaults.get(n) for n in open_})

    # -- shapes ---------------------------------------------------------------

    def output_shapes(self) -> list[tuple[int, ...]]:
        """Each output's shape, from the declared dimensions."""
        return [
            tuple(d if isinstance(d, int) else int(getattr(self, d)) for d in o.dims)
            for o in type(self).declaration.outputs
        ]

    def output_dtypes(self, input_dtypes: list[Any]) -> list[Any]:
        """Each output's dtype: declared, else the first input's."""
        first = input_dtypes[0] if input_dtypes else None
        return [
            np.dtype(o.dtype) if o.dtype is not None else first
            for o in type(self).declaration.outputs
        ]

    def output_valid(self, inputs: list[Handle | None]) -> list[dict[int, Any]]:
        """Each output's per-call bounds, from the inputs'.

        By default an output whose leading dimension is an input's takes that
        input's leading-axis bound (rows in, rows out); operators that bound
        otherwise override this.
        """
        result: list[dict[int, Any]] = []
        for shape in self.output_shapes():
            bound: dict[int, Any] = {}
            for h in inputs:
                if h is not None and 0 in h.valid and shape and h.shape[0] == shape[0]:
                    bound = {0: h.valid[0]}
                    break
            result.append(bound)
        return result

    @classmethod
    def infer(cls, operands: Mapping[str, Handle | None]) -> dict[str, tuple[int, str]]:
        """Read each dimension off the handles: name -> (value, where from).

        Raises:
            DimensionConflictError: Two handles disagree on a dimension,
                naming both sources.
            ValueError: A handle's rank is not its operand's.
        """
        found: dict[str, tuple[int, str]] = {}
        for spec in cls.declaration.inputs:
            handle = operands.get(spec.name)
            if handle is None:
                continue
            if len(handle.shape) != len(spec.dims):
                fix = ""
                if len(handle.shape) + 1 == len(spec.dims):
                    ones = ", ".join(["1", *map(str, handle.shape)][:-1] + ["-1"])
                    fix = f"; for a single row write {spec.name}.reshape({ones})"
                raise ValueError(
                    f"{cls.__name__}: {spec.name} has shape {list(handle.shape)}, "
                    f"but its operand is {len(spec.dims)}-D "
                    f"({', '.join(map(str, spec.dims))}){fix}"
                )
            for axis, dim in enumerate(spec.dims):
                size = int(handle.shape[axis])
                source = f"{spec.name}.shape[{axis}]"
                if isinstance(dim, int):
                    if size != dim:
                        raise DimensionConflictError(
                            f"{cls.__name__}: {source} is {size}, but the operand "
                            f"needs {dim}"
                        )
                    continue
                if dim in found and found[dim][0] != size:
                    raise DimensionConflictError(
                        f"{cls.__name__}: {dim} is {found[dim][0]} from "
                        f"{found[dim][1]} but {size} from {source}"
                    )
                found.setdefault(dim, (size, source))
        return found

    # -- recording and calling ------------------------------------------------

    @classmethod
    def step(cls, *operands: Any, out: Any = None, **fields: Any) -> Any:
        """Record one step of this operator into the graph being recorded.

        Operands are given in the math order (positionally or by name);
        dimensions are read off them; ``fields`` are the construction
        keywords (a tunable given here wins over the profile). ``out=`` names
        a handle to write (a state or a view of one) instead of a new buffer.

        Returns:
            The output handle, or a tuple of them for several outputs.

        Raises:
            TypeError: Called outside a graph's ``body``.
        """
        recorder = context.graph_recorder.get()
        if recorder is None:
            raise StepOutsideBodyError(
                f"{cls.__name__}.step records a step into a Graph.body and is "
                f"only valid while a graph is recorded; to run it on its own, "
                f"construct it: {cls.__name__}(...)(arrays...), or "
                f"{cls.__name__}(...).reference(arrays...) on the host"
            )
        return recorder.step(cls, operands, fields, out)

    def __call__(self, *arrays: Any) -> Any:
        """Run this operator alone on the current device (needs iron-runtime)."""
        from iron.core.plugins import backend

        return backend().call_operator(self, arrays)
