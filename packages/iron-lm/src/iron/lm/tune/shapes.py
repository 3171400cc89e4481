"""Operator shapes: what a tune enumerates, and what a profile entry names.

Owns steps 2 and 3 of :mod:`iron.lm.tune`: grouping the recorded steps of an
application's versions into distinct operator shapes (:class:`Shape`: an
operator class and the dims a profile entry names, with the exact operators
(:class:`Member`) of that shape and the open tunables none of their call
sites pins), and enumerating every setting of those tunables from their
domains, capped at :data:`MAX_SETTINGS` per shape (past it, the longest
domain keeps every other value, the ``resolve()`` default always among
them). Also the dims a call has (:func:`call_dims`) and an entry names
(:func:`entry_dims`), and the canonical JSON forms the cache and the
profile writer key values by.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from typing import Any

import numpy as np

from iron.core import plugins
from iron.core.declare import domain_values
from iron.core.device import Device, as_device
from iron.core.operator import Operator
from iron.core.profile import Profile
from iron.core.recording import Recording

__all__ = [
    "MAX_SETTINGS",
    "Member",
    "Shape",
    "call_dims",
    "collect_shapes",
    "entry_dims",
]

logger = logging.getLogger("iron.lm.tune")

#: Settings measured per operator shape at most, unless ``--max-settings``
#: says otherwise. The Llama-3.2-1B config's largest shape (the LM head's
#: GEMV, M=128256) has 10,368; an 8B config's stay under it too.
MAX_SETTINGS = 20_000


@functools.cache
def _catalog_names() -> dict[type, str]:
    names: dict[type, str] = {}
    for name, cls in plugins.catalog().items():
        names.setdefault(cls, name)
    return names


def _plain(value: Any) -> Any:
    """A value as JSON holds it: an Enum as its value, a numpy scalar as its item."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, np.generic):
        return value.item()
    return value


def _json_value(value: Any) -> bool:
    plain = _plain(value)
    return plain is None or isinstance(plain, (bool, int, float, str))


def _canon(setting: Mapping[str, Any]) -> str:
    return json.dumps({k: _plain(v) for k, v in setting.items()}, sort_keys=True)


def call_dims(op: Operator) -> dict[str, Any]:
    """The dims a call that constructed ``op`` has, as a profile matches them.

    Every non-tunable param: its value, None for a per-call one, and None
    for a derived one (a call does not give those).
    """
    params = type(op).declaration.params
    given = {
        n: v
        for n, v in op.fields().items()
        if not params[n].tunable and not params[n].derived
    }
    return Profile.dims(type(op), given)


def entry_dims(op: Operator) -> dict[str, Any]:
    """The dims a profile entry for ``op``'s shape names.

    :func:`call_dims` without derived params (a call never gives them) and
    without values a JSON file cannot hold as they compare (tuples,
    patterns); None stays (it names a per-call or absent dimension).
    """
    params = type(op).declaration.params
    dims = {}
    for name, value in call_dims(op).items():
        if params[name].derived:
            continue
        if not _json_value(value):
            logger.debug(
                "%s: dim %s=%r is not a JSON value; entries leave it out",
                type(op).__name__,
                name,
                value,
            )
            continue
        dims[name] = value
    return dims


def _value_key(value: Any) -> tuple:
    plain = _plain(value)
    if plain is None:
        return (0, 0, "")
    if isinstance(plain, (bool, int, float)):
        return (1, float(plain), "")
    return (2, 0, str(plain))


def _dims_key(cls: type[Operator], dims: Mapping[str, Any]) -> tuple:
    order = list(cls.declaration.params)
    return tuple(
        (order.index(n), n, _value_key(v))
        for n, v in sorted(dims.items(), key=lambda kv: order.index(kv[0]))
    )


@dataclasses.dataclass
class Member:
    """The steps of one exact operator within a :class:`Shape`.

    Attributes:
        op: The recorded operator with its unpinned tunables reopened.
        pinned: The tunables its call site gave (never tuned).
        count: Steps it stands for.
        identity: ``repr(op)``: what the cache keys it by.
    """

    op: Operator
    pinned: frozenset[str]
    count: int
    identity: str


@dataclasses.dataclass
class Shape:
    """One operator shape: what one profile entry governs.

    Attributes:
        cls: The operator class.
        name: Its name in the operator catalog.
        dims: The dims the entry names (:func:`entry_dims`).
        members: The distinct recorded operators of this shape.
        tunables: The open tunables tuned (not pinned at every step).
        default: ``resolve(dev)``'s value of each tuned tunable.
        settings: Every setting measured, in enumeration order.
        total: Settings before ``--max-settings`` trimmed them.
        trimmed: What trimming dropped, in words (empty if nothing).
    """

    cls: type[Operator]
    name: str
    dims: dict[str, Any]
    members: list[Member]
    tunables: tuple[str, ...] = ()
    default: dict[str, Any] = dataclasses.field(default_factory=dict)
    settings: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    total: int = 0
    trimmed: str = ""

    @property
    def steps(self) -> int:
        """Steps of the application's versions this shape's entry governs."""
        return sum(m.count for m in self.members)

    def __str__(self) -> str:
        inner = ", ".join(f"{k}={_plain(v)!r}" for k, v in self.dims.items())
        return f"{self.name}({inner})"

    def sort_key(self) -> tuple:
        """Operator name, then dims in declaration order (numbers numerically)."""
        return (self.name, _dims_key(self.cls, self.dims))


def collect_shapes(
    recordings: Iterable[Recording],
    dev: Device | str,
    *,
    ops: Iterable[str] | None = None,
    max_settings: int = MAX_SETTINGS,
    with_settings: bool = True,
) -> list[Shape]:
    """Every distinct operator shape of ``recordings`` with open tunables, enumerated.

    Args:
        recordings: The versions' recordings (made with no profile).
        dev: The device they were recorded for.
        ops: Only these catalog names (None: every operator).
        max_settings: Settings per shape at most (see the module docstring).
        with_settings: Enumerate each shape's settings (False: only find the
            shapes and their tuned tunables).

    Returns:
        The shapes, sorted by operator name then dims, each with its
        settings enumerated (when asked).
    """
    device = as_device(dev)
    wanted = set(ops) if ops is not None else None
    names = _catalog_names()
    groups: dict[tuple, Shape] = {}
    members: dict[tuple, Member] = {}
    for recording in recordings:
        for step in recording.steps:
            op = step.op
            cls = type(op)
            name = names.get(cls)
            if name is None:
                logger.debug("%s is not in the operator catalog: not tuned", cls)
                continue
            if wanted is not None and name not in wanted:
                continue
            unpinned = [t for t in cls.declaration.tunables if t not in op.pinned]
            if not unpinned:
                continue
            dims = entry_dims(op)
            key = (cls, _canon(dims))
            shape = groups.get(key)
            if shape is None:
                shape = groups[key] = Shape(cls, name, dims, [])
            reopened = op.replace(**dict.fromkeys(unpinned))
            identity = repr(reopened)
            member = members.get((key, identity))
            if member is None:
                member = Member(reopened, frozenset(op.pinned), 0, identity)
                members[(key, identity)] = member
                shape.members.append(member)
            member.count += 1
    shapes = sorted(groups.values(), key=Shape.sort_key)
    for shape in shapes:
        if with_settings:
            _enumerate(shape, device, max_settings)
        else:
            shape.tunables = _tuned(shape)
    return shapes


def _tuned(shape: Shape) -> tuple[str, ...]:
    """The open tunables some step of ``shape`` leaves to the profile."""
    return tuple(
        t
        for t in shape.cls.declaration.tunables
        if any(t not in m.pinned for m in shape.members)
    )


def _enumerate(shape: Shape, dev: Device, cap: int) -> None:
    cls = shape.cls
    params = cls.declaration.params
    shape.tunables = _tuned(shape)
    default: dict[str, Any] = {}
    for member in shape.members:
        try:
            resolved = member.op.resolve(dev)
        except ValueError as error:
            logger.debug("%s: resolve(%s) refuses: %s", shape, dev, error)
            continue
        for t in shape.tunables:
            if t not in member.pinned and t not in default and t in resolved:
                default[t] = _member_of(params[t].domain, resolved[t])
    shape.default = default
    fields = shape.members[0].op.fields()
    lists: list[list[Any]] = []
    for t in shape.tunables:
        domain = params[t].domain
        try:
            values = domain_values(domain, fields)
        except (TypeError, ValueError, KeyError):
            values = None  # a Divisors of a per-call or absent dimension
        if values is None:
            values = [default[t]] if t in default else []
            logger.warning(
                "%s: %s's domain cannot be enumerated for this shape; only "
                "its resolve() default %s is measured",
                shape,
                t,
                values,
            )
        elif t in default and default[t] not in values:
            values = [default[t], *values]
        lists.append(list(values))
    shape.total = _product(lists)
    notes = []
    fixed: set[int] = set()  # lists that cannot shrink further
    while _product(lists) > cap:
        open_ = [i for i in range(len(lists)) if i not in fixed]
        if not open_:
            break
        longest = max(open_, key=lambda i: (len(lists[i]), -i))
        values = lists[longest]
        name = shape.tunables[longest]
        kept = values[::2]
        if name in default and default[name] not in kept:
            kept = [v for v in values if v in kept or v == default[name]]
        if len(kept) >= len(values):
            fixed.add(longest)
            continue
        notes.append(f"{name} {len(values)} -> {len(kept)} values")
        lists[longest] = kept
    if notes:
        shape.trimmed = (
            f"{shape.total} settings exceed --max-settings {cap}: kept every "
            f"other value ({'; '.join(notes)}), the resolve() default always "
            f"among them"
        )
        logger.warning("%s: %s", shape, shape.trimmed)
    shape.settings = [
        dict(zip(shape.tunables, combo)) for combo in itertools.product(*lists)
    ]


def _member_of(domain: Any, value: Any) -> Any:
    if isinstance(domain, type) and issubclass(domain, Enum):
        try:
            return domain(value)
        except ValueError:
            return value
    return value


def _product(lists: Sequence[Sequence[Any]]) -> int:
    total = 1
    for values in lists:
        total *= len(values)
    return total
