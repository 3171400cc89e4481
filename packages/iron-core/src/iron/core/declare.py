"""Field specifiers that declare an operator: its params, tunables and operands.

An operator class names its fields in its body, as a dataclass does::

    class AXPY(Operator):
        size: int = param()
        scalar_factor: float = param()
        tile_size: int = tunable(domain=Divisors("size"))
        num_aie_columns: int = tunable(domain=(1, 2, 4, 8))
        inputs = (Input("x", "size"), Input("y", "size"))
        outputs = (Output("out", "size"),)

``param()`` declares a dimension or constant a profile matches on;
``derive=`` (or a function default) makes it derived from the others.
``tunable()`` declares a knob filled by the call's keyword, then the profile,
then ``Operator.resolve(dev)``. A subclass that assigns a plain value to an
inherited tunable fixes it: it is then no longer open. The class collects
these into ``cls.declaration`` (a :class:`Declaration`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from typing import Any

from ml_dtypes import bfloat16

__all__ = [
    "MISSING",
    "Declaration",
    "Divisors",
    "Input",
    "Output",
    "ParamSpec",
    "param",
    "tunable",
]


class _Missing:
    """The default of a field that has none (a required param)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclasses.dataclass(frozen=True)
class Divisors:
    """A tunable's domain: the divisors of another param's value.

    Args:
        of: The param whose divisors are allowed (``"size"``).
        multiple_of: Only divisors that are multiples of this.
        at_most: Only divisors up to this.
    """

    of: str
    multiple_of: int = 1
    at_most: int | None = None

    def values(self, fields: Mapping[str, Any]) -> list[int]:
        """Every allowed value, given the operator's other fields, ascending."""
        n = int(fields[self.of])
        return [
            d
            for d in _divisors(n)
            if d % self.multiple_of == 0 and (self.at_most is None or d <= self.at_most)
        ]

    def __str__(self) -> str:
        extra = f", multiples of {self.multiple_of}" if self.multiple_of > 1 else ""
        cap = f", at most {self.at_most}" if self.at_most is not None else ""
        return f"divisors of {self.of}{extra}{cap}"


@functools.lru_cache(maxsize=4096)
def _divisors(n: int) -> tuple[int, ...]:
    """The positive divisors of ``n``, ascending (none for ``n < 1``); O(sqrt n)."""
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return (*small, *reversed(large))


Domain = type[Enum] | tuple[Any, ...] | Divisors | None


def domain_values(domain: Domain, fields: Mapping[str, Any]) -> list[Any] | None:
    """Every value ``domain`` allows for an operator with ``fields``; None if open."""
    if domain is None:
        return None
    if isinstance(domain, type) and issubclass(domain, Enum):
        return list(domain)
    if isinstance(domain, Divisors):
        return domain.values(fields)
    return list(domain)


def domain_text(domain: Domain) -> str:
    """A short description of a domain for errors and docs."""
    if domain is None:
        return "any value"
    if isinstance(domain, type) and issubclass(domain, Enum):
        return "one of " + ", ".join(repr(m.value) for m in domain)
    if isinstance(domain, Divisors):
        return str(domain)
    return "one of " + ", ".join(repr(v) for v in domain)


@dataclasses.dataclass(frozen=True)
class ParamSpec:
    """One declared field of an operator.

    Attributes:
        name: The field's name.
        default: Its default; a function default is computed from the
            instance (the field is then derived). ``MISSING`` if required.
        derive: A function of the instance computing a derived field.
        tunable: Whether the field is a tunable (open or fixed by a class).
        domain: A tunable's allowed values: an Enum, a tuple of choices,
            :class:`Divisors`, or None for any.
        per_call: Whether a call may give it as a per-call value.
        doc: One line on what the field means.
    """

    name: str = ""
    default: Any = MISSING
    derive: Callable[[Any], Any] | None = None
    tunable: bool = False
    domain: Domain = None
    per_call: bool = False
    doc: str = ""

    @property
    def derived(self) -> bool:
        """Whether the field is computed from the others."""
        return self.derive is not None or callable_default(self.default)


def callable_default(default: Any) -> bool:
    """Whether a default is a function computing the field (a derived field)."""
    import types

    return isinstance(default, (types.FunctionType, types.LambdaType))


def param(
    default: Any = MISSING,
    *,
    derive: Callable[[Any], Any] | None = None,
    per_call: bool = False,
    doc: str = "",
) -> Any:
    """Declare a dimension or constant of an operator (what a profile matches).

    Not to be confused with :func:`iron.core.held.param` (``iron.param``), which
    declares a weight a graph holds: this one is a field of an operator class.

    Args:
        default: The value when a call gives none; a function of the
            instance makes the field derived.
        derive: A function of the instance that computes the field.
        per_call: A call may give a per-call value (``length=n``).
        doc: One line on what the field means.
    """
    return ParamSpec(default=default, derive=derive, per_call=per_call, doc=doc)


def tunable(*, domain: Domain = None, doc: str = "") -> Any:
    """Declare a knob: the call's keyword, else the profile, else ``resolve(dev)``.

    Args:
        domain: The allowed values: an Enum, a tuple of choices,
            :class:`Divisors`, or None for any.
        doc: One line on what the knob changes.
    """
    return ParamSpec(tunable=True, domain=domain, doc=doc)


@dataclasses.dataclass(frozen=True)
class Input:
    """An input operand: its name and shape in terms of params.

    Each dimension is a param's name (inferred from the handle a step is
    given) or an int. ``dtype`` is the required dtype, None for any.
    """

    name: str
    dims: tuple[str | int, ...]
    dtype: Any = bfloat16
    optional: bool = False

    def __init__(
        self,
        name: str,
        *dims: str | int,
        dtype: Any = bfloat16,
        optional: bool = False,
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "dims", tuple(dims))
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "optional", optional)


@dataclasses.dataclass(frozen=True)
class Output:
    """An output operand: its name, shape in terms of params, and dtype.

    A dtype of None is the first input's dtype.
    """

    name: str
    dims: tuple[str | int, ...]
    dtype: Any = None

    def __init__(self, name: str, *dims: str | int, dtype: Any = None) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "dims", tuple(dims))
        object.__setattr__(self, "dtype", dtype)


@dataclasses.dataclass(frozen=True)
class Declaration:
    """What an operator class declares.

    Attributes:
        params: Every field by name, in declaration order (base class first).
        tunables: The open tunables: those a call or profile may give.
        inputs: The input operands, in ``step``'s positional order.
        outputs: The output operands.
    """

    params: Mapping[str, ParamSpec]
    tunables: tuple[str, ...]
    inputs: tuple[Input, ...]
    outputs: tuple[Output, ...]

    @property
    def dimensions(self) -> tuple[str, ...]:
        """The params that are not tunables (what a profile entry matches)."""
        return tuple(n for n, p in self.params.items() if not p.tunable)


def collect(
    name: str, bases: Sequence[type], namespace: Mapping[str, Any]
) -> Declaration:
    """Build a class's :class:`Declaration` from its bases' and its own body."""
    params: dict[str, ParamSpec] = {}
    inputs: tuple[Input, ...] = ()
    outputs: tuple[Output, ...] = ()
    for base in reversed(bases):
        declaration = getattr(base, "declaration", None)
        if isinstance(declaration, Declaration):
            params.update(declaration.params)
            inputs = declaration.inputs or inputs
            outputs = declaration.outputs or outputs
    fixed: set[str] = set()
    for key, value in namespace.items():
        if isinstance(value, ParamSpec):
            params[key] = dataclasses.replace(value, name=key)
        elif key in params and params[key].tunable and not callable(value):
            # A subclass fixing an inherited tunable: it is no longer open.
            params[key] = dataclasses.replace(params[key], default=value)
            fixed.add(key)
    inputs = tuple(namespace.get("inputs", inputs))
    outputs = tuple(namespace.get("outputs", outputs))
    _check_operands(name, params, inputs, outputs)
    tunables = tuple(
        n
        for n, p in params.items()
        if p.tunable and n not in fixed and p.default is MISSING
    )
    return Declaration(params, tunables, inputs, outputs)


def _check_operands(
    name: str,
    params: Mapping[str, ParamSpec],
    inputs: Iterable[Input],
    outputs: Iterable[Output],
) -> None:
    operands: list[Input | Output] = [*inputs, *outputs]
    for operand in operands:
        for dim in operand.dims:
            if isinstance(dim, str) and dim not in params:
                raise TypeError(
                    f"{name}: operand {operand.name!r} has dimension {dim!r}, "
                    f"which is not a declared param()"
                )
