"""Profiles: tunable values by operator shape, and their JSON files.

This module owns :class:`Profile`, the table a graph (or :meth:`Profile.make`)
consults for the tunables a call leaves open, and its file format. A tunable
comes first from the call's own keyword, then from the most specific matching
profile entry, then from ``Operator.resolve(dev)``.

A profile file is JSON, one entry to a line, so a regenerated profile reviews
well with ``git diff``::

    {"meta": {"tuned_by": "iron.lm.tune"},
     "entries": [
      {"operator": "AXPY", "size": 2048, "tile_size": 1024, "num_aie_columns": 2},
      {"operator": "AXPY", "tile_size": 256, "num_aie_columns": 1}
    ]}

Entries name operators by their catalog name (entry-point group
``iron.operators``, see :func:`iron.core.plugins.catalog`); iron-core never
imports iron-operators itself. A directory of profiles holds one
``<device>.json`` per device (:meth:`Profile.for_device`).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import numbers
import re
import types
import typing
from collections.abc import Iterator, Mapping
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from iron.core import plugins
from iron.core.declare import MISSING, Divisors, domain_text, domain_values
from iron.core.operator import Operator
from iron.core.percall import _Expr

if TYPE_CHECKING:
    from iron.core.device import Device

__all__ = ["FileEntry", "Profile", "ProfileFile"]

_Op = TypeVar("_Op", bound="Operator")
_Entry = tuple[type[Operator], dict[str, Any], dict[str, Any]]

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_TOP_LEVEL = ("entries", "meta")


class Profile:
    """Tunable values by operator shape, as ``(cls, dims, tunables)`` entries.

    An open tunable comes from the most specific matching entry: an entry
    matches when every ``param()`` it names agrees with the call (one it
    leaves out matches any value), an entry for a base class matches its
    subclasses, and naming more params is more specific. Equally specific
    matches that disagree raise.

    Attributes:
        meta: Free-form notes saved with the profile (how it was measured,
            by what, when); a JSON object. Empty unless set or loaded. Its
            ``"device"`` (``"npu2"``), when set, is the device the profile
            is for: :meth:`for_device` refuses it for another.

    Example:
        Give ``AXPY`` at size 2048 its tunables, then build one::

            profile = Profile()
            profile.add(AXPY, size=2048, tile_size=1024, num_aie_columns=2)
            op = profile.make(AXPY, size=2048, scalar_factor=1.5)
            assert op.tile_size == 1024 and op.pinned == frozenset()
    """

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __init__(self) -> None:
        """Create an empty profile (no entries, empty ``meta``)."""
        self._entries: list[_Entry] = []
        self.meta: dict[str, Any] = {}

    # -- building and applying ---------------------------------------------

    def make(self, cls: type[_Op], **kwargs: Any) -> _Op:
        """Build ``cls(**kwargs)`` with its open tunables filled from this profile.

        This is, standalone, what a graph's recorder does for every step it
        constructs. A keyword given here (not None) wins over the profile and
        is pinned (``op.pinned``); a tunable the profile fills is not pinned,
        and one neither gives stays open for ``Operator.resolve(dev)``.

        Args:
            cls: The operator class.
            **kwargs: Its construction keywords; a None value counts as not
                given.

        Returns:
            The constructed operator.

        Raises:
            ValueError: Matching entries of equal specificity disagree.
            TypeError: ``cls`` rejects the keywords.
        """
        given = {name: value for name, value in kwargs.items() if value is not None}
        pinned = frozenset(given.keys() & set(cls.declaration.tunables))
        return cls(**{**self.tunables_for(cls, given), **given}, pinned=pinned)

    def add(self, cls: type, **fields: Any) -> None:
        """Add an entry for ``cls``.

        Args:
            cls: The operator class the entry is for (it also applies to
                the class's subclasses).
            **fields: ``param()`` values to match (one left out matches any
                value) and open ``tunable()`` values to give. An Enum-domain
                tunable may be given as its member or the member's value.

        Raises:
            TypeError: A field is not declared by ``cls``; a field is a
                tunable the class fixes (or derives), so no profile gives
                it; the entry gives no tunable; or a value is not of its
                field's type (``"2048"`` or ``true`` for an ``int``: an entry
                that would never match, or a column count of True).
            ValueError: A tunable's value is outside its domain.
        """
        cls = _operator_class(cls)
        params = cls.declaration.params
        open_ = cls.declaration.tunables
        dims: dict[str, Any] = {}
        tunables: dict[str, Any] = {}
        unknown: list[str] = []
        fixed: list[str] = []
        for name, value in fields.items():
            spec = params.get(name)
            if name in open_:
                tunables[name] = value
            elif spec is not None and spec.tunable:
                fixed.append(name)
            elif spec is not None:
                dims[name] = value
            else:
                unknown.append(name)
        if unknown:
            raise TypeError(
                f"{cls.__name__} declares no field {unknown}; its fields are "
                f"{list(params)}"
            )
        if fixed:
            raise TypeError(
                f"{cls.__name__}.{fixed} are derived or fixed by the class, not "
                f"tunables a profile gives; its open tunables are {list(open_)}"
            )
        if not tunables:
            raise TypeError(
                f"an entry for {cls.__name__} must give a tunable (one of "
                f"{list(open_)}); the params it names only select where it applies"
            )
        for name, value in tunables.items():
            _check_type(cls, name, value)
        for name, value in dims.items():
            if value is not None:  # None matches a per-call or derived value
                _check_type(cls, name, value)
        for name, value in tunables.items():
            tunables[name] = _in_domain(cls, name, value, dims)
        self._entries.append((cls, dims, tunables))

    def tunables_for(self, cls: type, given: Mapping[str, Any]) -> dict[str, Any]:
        """Resolve the tunables for the ``cls`` a call with ``given`` keywords makes.

        Each open tunable of ``cls`` that ``given`` leaves out comes from the
        most specific entry naming it; one no entry names is left out.

        Args:
            cls: The operator class being constructed.
            given: The call's keywords (params and any tunables it gives).

        Returns:
            Tunable name -> value, for the tunables the profile gives.

        Raises:
            ValueError: Two matching entries of equal specificity give one
                tunable different values.
        """
        cls = _operator_class(cls)
        dims = self.dims(cls, given)
        wanted = set(cls.declaration.tunables) - set(given)
        # name -> (rank, value, a disagreeing value of the same rank, if any);
        # a disagreement only matters if no more specific entry overrides it,
        # so it is raised once every entry is seen (the order added is moot).
        chosen: dict[str, tuple[int, Any, tuple[Any, ...]]] = {}
        for base, matched, tunables in self._entries:
            if not issubclass(cls, base) or not self.matches(matched, dims):
                continue
            rank = len(matched)
            for name, value in tunables.items():
                if name not in wanted:
                    continue
                if name not in chosen or rank > chosen[name][0]:
                    chosen[name] = (rank, value, ())
                elif rank == chosen[name][0] and chosen[name][1] != value:
                    if not chosen[name][2]:
                        chosen[name] = (rank, chosen[name][1], (value,))
        for name, (_, value, other) in chosen.items():
            if other:
                raise ValueError(
                    f"profile is ambiguous for {cls.__name__} {dims}: "
                    f"{name}={value} and {name}={other[0]} from "
                    f"entries of equal specificity; remove one, or add an "
                    f"entry naming more params for this shape"
                )
        return {name: value for name, (_, value, _) in chosen.items()}

    @staticmethod
    def dims(kind: type, given: Mapping[str, Any]) -> dict[str, Any]:
        """Collect every dimension (``param()``) a ``kind`` call with ``given`` makes.

        This is what an entry is matched against. A param the call leaves
        out is its default; one computed by a function (derived) is None, as
        is a per-call value, so an entry naming it matches only a call
        giving it a value: entries key on what a call constructs with.

        Args:
            kind: The operator class.
            given: The call's keywords.

        Returns:
            Param name -> value, for every non-tunable param with a value.
        """
        dims: dict[str, Any] = {}
        for name, spec in _operator_class(kind).declaration.params.items():
            if spec.tunable:
                continue
            if name in given:
                value = given[name]
                dims[name] = None if isinstance(value, _Expr) else value
            elif spec.derived:
                dims[name] = None
            elif spec.default is not MISSING:
                dims[name] = spec.default
        return dims

    @staticmethod
    def matches(matched: Mapping[str, Any], dims: Mapping[str, Any]) -> bool:
        """Whether an entry's ``matched`` dimensions cover ``dims``.

        Args:
            matched: The params an entry names, with their values.
            dims: A call's dimensions, from :meth:`dims`.

        Returns:
            True if every param the entry names has the entry's value.
        """
        return all(name in dims and dims[name] == v for name, v in matched.items())

    # -- the container ------------------------------------------------------

    def __len__(self) -> int:
        """The number of entries."""
        return len(self._entries)

    def __iter__(self) -> Iterator[tuple[type, dict[str, Any], dict[str, Any]]]:
        """Iterate over ``(cls, dims, tunables)`` entries in the order added.

        The dicts are copies; changing them does not change the profile.
        """
        for cls, dims, tunables in self._entries:
            yield cls, dict(dims), dict(tunables)

    def __eq__(self, other: object) -> bool:
        """Whether ``other`` is a profile with the same entries (in order) and meta."""
        if not isinstance(other, Profile):
            return NotImplemented
        return self._entries == other._entries and self.meta == other.meta

    def __repr__(self) -> str:
        """A summary: each entry as ``Cls(dims) -> tunables``, the first few."""
        shown = []
        for cls, dims, tunables in self._entries[:4]:
            where = ", ".join(f"{k}={v!r}" for k, v in dims.items())
            what = ", ".join(f"{k}={v!r}" for k, v in tunables.items())
            shown.append(f"{cls.__name__}({where}) -> {what}")
        more = len(self._entries) - len(shown)
        if more:
            shown.append(f"... {more} more")
        count = f"{len(self._entries)} entr{'y' if len(self._entries) == 1 else 'ies'}"
        return f"Profile({count}{': ' if shown else ''}{'; '.join(shown)})"

    # -- files --------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path) -> Profile:
        """Load the profile :meth:`save` wrote to ``path``.

        Args:
            path: The JSON file.

        Returns:
            The profile, its entries in file order and ``meta`` as saved.

        Raises:
            FileNotFoundError: ``path`` does not exist.
            ValueError: The file is not valid JSON (naming the line and
                column), not ``{"entries": [...]}`` (with an optional
                ``"meta"`` object), or an entry is invalid: errors about an
                entry name it as ``entry N (line L)``, counting entries from
                1 and naming the line it starts on.
            ImportError: No operator catalog (iron-operators) is installed.
        """
        return ProfileFile.read(path).profile(cls)

    def save(self, path: str | Path) -> None:
        """Write the profile as JSON, one entry to a line.

        Entries are written in the order added, each as
        ``{"operator": NAME, **dims, **tunables}`` with an Enum as its
        member's value; ``"meta"`` comes first when set. The file is written
        only once every entry has been converted.

        Args:
            path: The file to write (replaced if it exists).

        Raises:
            ValueError: An entry's operator is not in the operator catalog
                (iron.operators), or a value cannot be written as JSON.
            ImportError: No operator catalog (iron-operators) is installed.
        """
        names: dict[type, str] = {}
        for name, op_cls in plugins.catalog().items():
            names.setdefault(op_cls, name)
        lines = []
        for op_cls, dims, tunables in self._entries:
            if op_cls not in names:
                raise ValueError(
                    f"{op_cls.__qualname__} is not in iron.operators' catalog, so "
                    f"a profile file cannot name it; register it in the "
                    f"'iron.operators' entry-point catalog, or keep this profile "
                    f"in memory"
                )
            entry = {"operator": names[op_cls], **dims, **tunables}
            try:
                lines.append(json.dumps(entry, default=_to_json))
            except (TypeError, ValueError) as e:
                raise ValueError(
                    f"{op_cls.__name__} entry {entry}: {e}; a profile holds "
                    f"JSON values (numbers, strings, Enums)"
                ) from None
        head = "{"
        if self.meta:
            try:
                meta = json.dumps(self.meta, default=_to_json)
            except (TypeError, ValueError) as e:
                raise ValueError(
                    f"profile meta {self.meta!r}: {e}; meta must be JSON"
                ) from None
            head += f'"meta": {meta},\n '
        if lines:
            body = '"entries": [\n  ' + ",\n  ".join(lines) + "\n]}\n"
        else:
            body = '"entries": []}\n'
        Path(path).write_text(head + body, encoding="utf-8")

    @classmethod
    def for_device(cls, directory: str | Path, dev: Device | str) -> Profile:
        """Load the profile for ``dev`` from a directory of them.

        Args:
            directory: A profile directory: one ``<device>.json`` per device.
            dev: The device, or its name (``"npu2"``).

        Returns:
            The profile in ``<directory>/<dev.name>.json``.

        Raises:
            FileNotFoundError: That file does not exist.
            ValueError: It is not a valid profile (see :meth:`load`), or it
                records another device in its meta's ``"device"`` (the
                message names the file and both devices).
        """
        name = dev if isinstance(dev, str) else dev.name
        path = Path(directory) / f"{name}.json"
        if not path.is_file():
            if Path(directory).is_dir():
                found = sorted(p.name for p in Path(directory).glob("*.json"))
                has = f"it has {found}" if found else "it has no .json files"
            else:
                has = "the directory does not exist"
            raise FileNotFoundError(
                f"no profile for device {name!r}: {path} does not exist ({has}); "
                f"a profile directory holds one <device>.json per device, so "
                f"write {name}.json there (Profile.save) or pass a Profile"
            )
        profile = cls.load(path)
        recorded = profile.meta.get("device")
        if recorded is not None and recorded != name:
            raise ValueError(
                f"{path} is a profile for device {recorded!r} (its meta "
                f"'device'), loaded for device {name!r}: its tunables were "
                f"chosen for {recorded!r}'s columns and memory; tune {name!r} "
                f"(python -m iron.lm.tune ... --device {name}) or copy "
                f"{name}.json from a profile made for it"
            )
        return profile


_SHAPE = (
    'a profile is {"entries": [...]}, optionally with a "meta" object, '
    'each entry {"operator": NAME, <params>, <tunables>}'
)


@dataclasses.dataclass(frozen=True)
class FileEntry:
    """One entry of a profile file, as written, and where it is.

    Attributes:
        where: How errors name it: ``"<path>: entry N (line L)"``, counting
            entries from 1 and naming the line it starts on.
        value: The entry as JSON decoded it.
    """

    where: str
    value: Any

    def parse(
        self, catalog: Mapping[str, type[Operator]]
    ) -> tuple[str, type[Operator], dict[str, Any]]:
        """Read the entry's operator and fields, as :meth:`Profile.load` does.

        Args:
            catalog: The operator catalog (:func:`iron.core.plugins.catalog`).

        Returns:
            The operator's catalog name, its class and the entry's other
            fields, JSON values turned into what the class takes (an Enum
            member for an Enum param). The fields are not checked against
            the class (:meth:`Profile.add` does that).

        Raises:
            ValueError: The entry is not an object, has no ``"operator"``
                string, names an operator not in ``catalog``, or gives an
                Enum param a value not of the Enum; the message starts with
                :attr:`where`.
        """
        if not isinstance(self.value, dict):
            raise ValueError(
                f"{self.where}: is a JSON {_json_type(self.value)}, not an "
                f"object; {_SHAPE}"
            )
        fields = dict(self.value)
        name = fields.pop("operator", None)
        if not isinstance(name, str):
            raise ValueError(
                f'{self.where}: needs an "operator" naming an operator of '
                f"iron.operators (a string), got {name!r}"
            )
        if name not in catalog:
            close = difflib.get_close_matches(name, list(catalog), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(
                f"{self.where}: operator {name!r} is not in iron.operators (the "
                f"installed operator catalog); {hint}fix the name, or install "
                f"the distribution that registers it"
            )
        cls = catalog[name]
        try:
            return name, cls, _from_json(cls, fields)
        except ValueError as e:
            raise ValueError(f"{self.where}: {e}") from e


@dataclasses.dataclass(frozen=True)
class ProfileFile:
    """A profile file read: its ``meta`` and its entries, not yet applied.

    The one reader of the file format (:meth:`Profile.load` is
    ``ProfileFile.read(path).profile()``); a tool that checks a profile
    reads it here too and goes through its entries one by one.

    Attributes:
        path: The file.
        meta: Its ``"meta"`` object (empty if it has none).
        entries: Its entries, in file order.
    """

    path: Path
    meta: dict[str, Any]
    entries: tuple[FileEntry, ...]

    @classmethod
    def read(cls, path: str | Path) -> ProfileFile:
        """Read and parse the profile file at ``path``.

        Args:
            path: The JSON file.

        Returns:
            The file's meta and entries (each entry as written).

        Raises:
            FileNotFoundError: ``path`` does not exist.
            ValueError: The file is not valid JSON (naming the line and
                column), or not ``{"entries": [...]}`` with an optional
                ``"meta"`` object.
        """
        text = Path(path).read_text(encoding="utf-8")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(
                f"{path}: line {e.lineno} column {e.colno}: not valid JSON "
                f'({e.msg}); a profile is {{"entries": [...]}}, one entry '
                f"object per line"
            ) from None
        if not isinstance(data, dict):
            raise ValueError(
                f"{path}: the top level is a JSON {_json_type(data)}; {_SHAPE}"
            )
        extra = [key for key in data if key not in _TOP_LEVEL]
        if extra:
            raise ValueError(f"{path}: unknown top-level key(s) {extra}; {_SHAPE}")
        if "entries" not in data:
            raise ValueError(f'{path}: no "entries" list; {_SHAPE}')
        entries = data["entries"]
        if not isinstance(entries, list):
            raise ValueError(
                f'{path}: "entries" is a JSON {_json_type(entries)}, not a list; '
                f"{_SHAPE}"
            )
        meta = data.get("meta", {})
        if not isinstance(meta, dict):
            raise ValueError(
                f'{path}: "meta" is a JSON {_json_type(meta)}, not an object; {_SHAPE}'
            )
        lines = _entry_lines(text)
        read = []
        for index, entry in enumerate(entries):
            line = lines[index] if index < len(lines) else None
            where = f"{path}: entry {index + 1}" + (
                f" (line {line})" if line is not None else ""
            )
            read.append(FileEntry(where, entry))
        return cls(Path(path), meta, tuple(read))

    def profile(self, kind: type[Profile] = Profile) -> Profile:
        """The profile this file holds: every entry added, ``meta`` as read.

        Args:
            kind: The class of profile to make (:class:`Profile` or a
                subclass).

        Returns:
            The profile, its entries in file order.

        Raises:
            ValueError: An entry is invalid (see :meth:`FileEntry.parse` and
                :meth:`Profile.add`); the message names it as
                :attr:`FileEntry.where` does.
            ImportError: No operator catalog (iron-operators) is installed.
        """
        catalog = plugins.catalog()
        profile = kind()
        profile.meta = dict(self.meta)
        for entry in self.entries:
            _, cls, fields = entry.parse(catalog)
            try:
                profile.add(cls, **fields)
            except (TypeError, ValueError) as e:
                raise ValueError(f"{entry.where}: {e}") from e
        return profile


@functools.cache
def _operator_class(cls: type) -> type[Operator]:
    """``cls`` itself, known to be an operator class (an entry is for one)."""
    if isinstance(cls, type) and issubclass(cls, Operator):
        return cls
    raise TypeError(
        f"{cls!r} is not an operator class: a profile's entries are for "
        f"subclasses of iron.Operator; give the operator's class (AXPY, not AXPY(...))"
    )


@functools.cache  # a class's hints do not change; recording asks per step
def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # an annotation that does not resolve: nothing to check
        return {}


def _plain_types(hint: Any) -> tuple[type, ...] | None:
    """The plain types a field annotated ``hint`` takes, or None if not plain."""
    plain = (int, float, bool, str, type(None))
    if hint in plain:
        return (hint,)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if all(a in plain for a in args):
            return args
    return None


def _check_type(cls: type, name: str, value: Any) -> None:
    """Refuse a field value of another type than the field's annotation.

    A dimension of the wrong type (``"2048"`` for an int) would never equal
    the call's value, so the entry would silently never match; a boolean
    for an int (``true`` as a column count) equals 1 and would pass a
    domain check. Enum and container fields are checked elsewhere (or not).
    """
    allowed = _plain_types(_hints(cls).get(name))
    if allowed is None:
        return
    # numpy scalars count as the Python numbers they are (np.int64 is an int).
    kinds = {int: numbers.Integral, float: numbers.Real}
    ok = any(
        isinstance(value, kinds.get(t, t))
        and not (isinstance(value, (bool, np.bool_)) and t is not bool)
        for t in allowed
    )
    if not ok:
        takes = " or ".join("null" if t is type(None) else t.__name__ for t in allowed)
        raise TypeError(
            f"{cls.__name__}.{name}={value!r} is a {type(value).__name__}, but "
            f"{name} takes {takes}; give it as {takes} (an entry whose "
            f"dimension has another type never matches a call)"
        )


def _in_domain(
    cls: type[Operator], name: str, value: Any, dims: Mapping[str, Any]
) -> Any:
    """Check a tunable's value against its domain; an Enum value becomes its member."""
    domain = cls.declaration.params[name].domain
    if isinstance(domain, type) and issubclass(domain, Enum):
        try:
            return domain(value)
        except ValueError:
            pass
    elif isinstance(domain, Divisors) and dims.get(domain.of) is None:
        return value  # the dimension it divides is not named: checked when made
    else:
        try:
            allowed = domain_values(domain, dims)
        except (TypeError, ValueError):
            return value  # the dimension is not a number: checked when made
        if allowed is None or value in allowed:
            return value
    raise ValueError(
        f"{cls.__name__}.{name}={value!r} is outside its domain "
        f"({domain_text(domain)}); give one of those values"
    )


def _from_json(cls: type[Operator], fields: Mapping[str, Any]) -> dict[str, Any]:
    """Turn an entry's JSON values back into Enum members where declared."""
    params = cls.declaration.params
    out = dict(fields)
    for name, value in fields.items():
        spec = params.get(name)
        if spec is None:
            continue
        # None is what add() takes for a param any value matches.
        if not spec.tunable and isinstance(spec.default, Enum) and value is not None:
            kind = type(spec.default)
            try:
                out[name] = kind(value)
            except ValueError:
                raise ValueError(
                    f"{cls.__name__}.{name}={value!r} is not one of "
                    f"{[m.value for m in kind]}"
                ) from None
        # An Enum-domain tunable is converted (and checked) by Profile.add.
    return out


def _to_json(value: Any) -> Any:
    """``json.dumps`` fallback: an Enum is its value, a numpy scalar its item."""
    if isinstance(value, Enum):
        return value.value
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():
        return item()
    raise TypeError(f"{value!r} ({type(value).__name__}) is not JSON")


def _json_type(value: Any) -> str:
    """The JSON name of a decoded value's type, for errors."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


def _entry_lines(text: str) -> list[int]:
    """The line each element of the top-level ``"entries"`` array starts on.

    ``text`` is valid JSON (already parsed); this walks the top-level object
    with ``raw_decode`` to find offsets. Lines count from 1, as
    :class:`json.JSONDecodeError` counts them.
    """
    decoder = json.JSONDecoder()

    def skip(pos: int) -> int:
        blank = _WHITESPACE.match(text, pos)
        assert blank is not None  # the pattern matches the empty string
        return blank.end()

    def line(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    pos = skip(0)
    if not text.startswith("{", pos):
        return []
    lines: list[int] = []
    pos = skip(pos + 1)
    while pos < len(text) and text[pos] != "}":
        key, pos = decoder.raw_decode(text, pos)
        pos = skip(skip(pos) + 1)  # past ':'
        if key == "entries" and text.startswith("[", pos):
            lines = []
            pos = skip(pos + 1)
            while text[pos] != "]":
                lines.append(line(pos))
                _, pos = decoder.raw_decode(text, pos)
                pos = skip(pos)
                if text[pos] == ",":
                    pos = skip(pos + 1)
            pos += 1
        else:
            _, pos = decoder.raw_decode(text, pos)
        pos = skip(pos)
        if text.startswith(",", pos):
            pos = skip(pos + 1)
    return lines
