"""``--check``: a profile directory against the application's versions.

Owns :func:`check_profiles`: entries that match no step of the versions,
fields an operator no longer declares or opens, values outside their
domains and files that do not load are problems (``--check`` exits 1);
shapes no entry covers are notes.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any

from iron.core import plugins
from iron.core.device import DEVICES, as_device
from iron.core.operator import Operator
from iron.core.profile import Profile
from iron.lm.tune.shapes import call_dims, collect_shapes

__all__ = ["check_profiles"]


def _entry_lines(text: str, count: int) -> list[int | None]:
    """Each entry's line in a file :meth:`Profile.save` wrote (one entry a line)."""
    lines: list[int | None] = [
        number
        for number, line in enumerate(text.splitlines(), start=1)
        if line.lstrip().startswith('{"operator"')
    ]
    return lines if len(lines) == count else [None] * count


def _from_json(cls: type[Operator], fields: Mapping[str, Any]) -> dict[str, Any]:
    """Turn an entry's JSON values into what the class takes (Enum members)."""
    out = dict(fields)
    for name, value in fields.items():
        spec = cls.declaration.params[name]
        if not spec.tunable and isinstance(spec.default, Enum) and value is not None:
            out[name] = type(spec.default)(value)
    return out


def check_profiles(
    application: Any,
    config: Any,
    directory: str | os.PathLike[str],
    devices: Sequence[str] | None = None,
    *,
    config_label: str = "",
) -> tuple[list[str], list[str]]:
    """Check a profile directory against the application's versions.

    Args:
        application: An application (:mod:`iron.lm.applications`).
        config: The configuration the profiles are for.
        directory: The profiles' directory.
        devices: Check these devices' files (each must exist); None: every
            ``<device>.json`` there whose name is a device.
        config_label: How problems name the configuration.

    Returns:
        ``(problems, notes)``: problems fail a check (an entry that matches
        no step, a field the operator no longer declares or no longer opens,
        a value outside its domain, a file that does not load); notes do not
        (operator shapes no entry covers: they fall back to ``resolve()``).
    """
    directory = Path(directory)
    problems: list[str] = []
    notes: list[str] = []
    if devices is None:
        devices = sorted(p.stem for p in directory.glob("*.json") if p.stem in DEVICES)
        if not devices:
            return [
                f"{directory}: no <device>.json profiles ({', '.join(DEVICES)})"
            ], []
    catalog = plugins.catalog()
    about = f"{application.name}" + (f" ({config_label})" if config_label else "")
    for name in devices:
        path = directory / f"{name}.json"
        if not path.is_file():
            problems.append(f"{path}: no profile for {name}")
            continue
        text = path.read_text(encoding="utf-8")
        try:
            data = json.loads(text)
            entries = data["entries"]
            if not isinstance(entries, list):
                raise TypeError("entries is not a list")
        except (ValueError, KeyError, TypeError) as error:
            problems.append(f"{path}: not a profile ({error})")
            continue
        tuned_for = (data.get("meta") or {}).get("config")
        if config_label and tuned_for and tuned_for != config_label:
            notes.append(
                f"{path}: tuned for {tuned_for}, checked against {config_label}"
            )
        device = as_device(name)
        recordings = application.versions(config, device)
        steps = [s.op for r in recordings.values() for s in r.steps]
        lines = _entry_lines(text, len(entries))
        before = len(problems)
        where_versions = ", ".join(recordings)
        for index, entry in enumerate(entries):
            line = lines[index]
            where = f"{path}: entry {index + 1}" + (f" (line {line})" if line else "")
            if not isinstance(entry, dict) or not isinstance(
                entry.get("operator"), str
            ):
                problems.append(f'{where}: not an object with an "operator" name')
                continue
            fields = dict(entry)
            op_name = fields.pop("operator")
            cls = catalog.get(op_name)
            if cls is None:
                close = difflib.get_close_matches(op_name, list(catalog), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                problems.append(
                    f"{where}: operator {op_name!r} is not in the operator "
                    f"catalog{hint}; delete the entry or rename it"
                )
                continue
            params = cls.declaration.params
            open_ = cls.declaration.tunables
            unknown = [f for f in fields if f not in params]
            closed = [
                f
                for f in fields
                if f in params and params[f].tunable and f not in open_
            ]
            for field in unknown:
                problems.append(
                    f"{where}: {op_name} no longer declares {field!r} "
                    f"(={fields[field]!r}); its open tunables are {list(open_)}; "
                    f"delete the field or retune"
                )
            for field in closed:
                problems.append(
                    f"{where}: {op_name}.{field} is no longer an open tunable "
                    f"(the class fixes it); delete the field or retune"
                )
            fields = {
                k: v for k, v in fields.items() if k not in unknown and k not in closed
            }
            tunables = {k: v for k, v in fields.items() if params[k].tunable}
            if not tunables:
                if not unknown and not closed:
                    problems.append(f"{where}: the {op_name} entry gives no tunable")
                continue
            try:
                converted = _from_json(cls, fields)
                Profile().add(cls, **converted)
            except (TypeError, ValueError) as error:
                problems.append(f"{where}: {error}")
                continue
            dims = {k: v for k, v in converted.items() if not params[k].tunable}
            live = any(
                issubclass(type(op), cls)
                and Profile.matches(dims, call_dims(op))
                and any(t not in op.pinned for t in tunables)
                for op in steps
            )
            if not live:
                shown = ", ".join(f"{k}={v!r}" for k, v in dims.items())
                problems.append(
                    f"{where}: {op_name}({shown}) matches no step of {about}'s "
                    f"versions ({where_versions}) on {name}: stale; retune or "
                    f"delete the entry"
                )
        if len(problems) > before:
            continue  # the file does not load: the entries above say why
        try:
            profile = Profile.load(path)
        except ValueError as error:
            problems.append(f"{path}: does not load: {error}")
            continue
        for shape in collect_shapes(recordings.values(), device, with_settings=False):
            try:
                given = profile.tunables_for(shape.cls, call_dims(shape.members[0].op))
            except ValueError as error:
                problems.append(f"{path}: {error}")
                continue
            lacking = [t for t in shape.tunables if t not in given]
            if lacking:
                notes.append(
                    f"{path}: no entry gives {lacking} for {shape} "
                    f"({shape.steps} steps): resolve() picks them"
                )
    return problems, notes
