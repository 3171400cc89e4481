"""``--check``: a profile directory against the application's versions.

Owns :func:`check_profiles` and :func:`compare_profiles` (what ``--shipped``
says of a fresh tune against the shipped files). :func:`check_profiles`: entries that match no step of the versions,
fields an operator no longer declares or opens, values outside their
domains and files that do not load are problems (``--check`` exits 1);
shapes no entry covers are notes. A file is read by iron-core's own reader
(:class:`~iron.core.profile.ProfileFile`, what ``Profile.load`` reads with),
so the check and a graph applying the profile never disagree about what a
file says; the check goes on past a bad entry to report every one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iron.core import plugins
from iron.core.device import DEVICES, as_device
from iron.core.profile import Profile, ProfileFile
from iron.lm.tune.shapes import call_dims, collect_shapes

__all__ = ["check_profiles", "compare_profiles"]


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
        try:
            read = ProfileFile.read(path)
        except ValueError as error:
            problems.append(str(error))
            continue
        tuned_for = read.meta.get("config")
        if config_label and tuned_for and tuned_for != config_label:
            notes.append(
                f"{path}: tuned for {tuned_for}, checked against {config_label}"
            )
        device = as_device(name)
        recordings = application.versions(config, device)
        steps = [s.op for r in recordings.values() for s in r.steps]
        before = len(problems)
        where_versions = ", ".join(recordings)
        for entry in read.entries:
            where = entry.where
            try:
                op_name, cls, fields = entry.parse(catalog)
            except ValueError as error:
                problems.append(str(error))
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
                Profile().add(cls, **fields)
            except (TypeError, ValueError) as error:
                problems.append(f"{where}: {error}")
                continue
            dims = {k: v for k, v in fields.items() if not params[k].tunable}
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
            profile = read.profile()
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


def compare_profiles(
    fresh: str | os.PathLike[str], shipped: str | os.PathLike[str], device: str
) -> list[str]:
    """Where a freshly tuned profile differs from a shipped one, entry by entry.

    Entries are matched by operator and dimensions. Only the operators the
    fresh file has entries for are compared (a tune with ``--ops`` or of
    other weights leaves the rest alone, so their absence is no difference).

    Args:
        fresh: The directory the tune wrote.
        shipped: The shipped profiles' directory.
        device: The device whose ``<device>.json`` to compare.

    Returns:
        One line per difference (a tunable that moved, an entry only one
        side has); empty when the fresh file reproduces the shipped one.
    """
    catalog = plugins.catalog()

    def entries(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for entry in ProfileFile.read(path).entries:
            name, cls, fields = entry.parse(catalog)
            params = cls.declaration.params
            dims = {
                k: v for k, v in fields.items() if k in params and not params[k].tunable
            }
            tunables = {k: v for k, v in fields.items() if k not in dims}
            key = ", ".join(f"{k}={v!r}" for k, v in dims.items())
            found[(name, key)] = tunables
        return found

    new_path = Path(fresh) / f"{device}.json"
    old_path = Path(shipped) / f"{device}.json"
    new, old = entries(new_path), entries(old_path)
    tuned = {name for name, _ in new}
    lines = []
    for key in sorted(set(new) | {k for k in old if k[0] in tuned}):
        shape = f"{key[0]}({key[1]})"
        if key not in old:
            lines.append(f"{shape}: tuned now, not in the shipped {old_path.name}")
        elif key not in new:
            lines.append(f"{shape}: in the shipped {old_path.name}, not tuned now")
        elif new[key] != old[key]:
            moved = ", ".join(
                f"{t} {old[key].get(t)!r} -> {new[key].get(t)!r}"
                for t in sorted(set(new[key]) | set(old[key]))
                if new[key].get(t) != old[key].get(t)
            )
            lines.append(f"{shape}: shipped -> tuned now: {moved}")
    return lines
