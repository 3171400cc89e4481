"""The public API is frozen by a checked-in snapshot of names and signatures.

``public_api.txt`` lists every lazy name ``iron`` exports, with the signature
of each function and of each public method and property of each class. A
change to it is deliberate: rerun with ``IRON_UPDATE_API=1`` and review the
diff of the snapshot like any other API change.

Some of those names are iron-runtime's (``CompiledGraph``, ``CarriedLoop``).
Where it is not installed (the core session), their entries are checked to
be in the snapshot and to raise an ImportError naming iron-runtime; the rest
is compared as usual. Where every distribution is installed, everything is
compared (and ``IRON_UPDATE_API=1`` rewrites the snapshot).
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
from pathlib import Path

import pytest

import iron

SNAPSHOT = Path(__file__).with_name("public_api.txt")


def _signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(...)"


def _available(name: str) -> bool:
    """Whether the distribution holding ``iron.<name>`` is installed."""
    module = iron._LAZY[name][0]
    return importlib.util.find_spec(module.rsplit(".", 1)[0]) is not None


def _blocks(text: str) -> dict[str, str]:
    """The snapshot's entries by name: each top line with its member lines."""
    blocks: dict[str, str] = {}
    name = ""
    for line in text.splitlines(keepends=True):
        if not line.startswith(" "):
            name = re.match(r"(?:class |def )?(\w+)", line).group(1)  # type: ignore[union-attr]
            blocks[name] = ""
        blocks[name] += line
    return blocks


def describe(names: list[str] | None = None) -> str:
    """The current public API as text, one name or member a line."""
    lines: list[str] = []
    for name in sorted(iron._LAZY) if names is None else names:
        obj = getattr(iron, name)
        if inspect.isclass(obj):
            bases = ", ".join(b.__name__ for b in obj.__bases__)
            lines.append(f"class {name}({bases})")
            for member, value in sorted(vars(obj).items()):
                if member.startswith("_") and member != "__init__":
                    continue
                if isinstance(value, property):
                    lines.append(f"    {member}: property")
                elif isinstance(value, (staticmethod, classmethod)):
                    kind = type(value).__name__
                    sig = _signature(value.__func__)
                    lines.append(f"    {member}{sig}  [{kind}]")
                elif inspect.isfunction(value):
                    lines.append(f"    {member}{_signature(value)}")
        elif inspect.isfunction(obj):
            lines.append(f"def {name}{_signature(obj)}")
        else:
            lines.append(f"{name}: {type(obj).__name__}")
    return "\n".join(lines) + "\n"


def test_public_api_matches_the_snapshot():
    missing = [n for n in sorted(iron._LAZY) if not _available(n)]
    if not missing:
        current = describe()
        if os.environ.get("IRON_UPDATE_API"):
            SNAPSHOT.write_text(current)
        assert SNAPSHOT.read_text() == current, (
            "the public API changed; if deliberate, rerun with IRON_UPDATE_API=1 "
            "(with every distribution installed) and commit public_api.txt"
        )
        return
    blocks = _blocks(SNAPSHOT.read_text())
    assert set(blocks) == set(iron._LAZY), "the snapshot names every lazy name"
    present = [n for n in sorted(iron._LAZY) if n not in missing]
    assert "".join(blocks[n] for n in present) == describe(present), (
        "the public API changed; if deliberate, rerun with IRON_UPDATE_API=1 "
        "(with every distribution installed) and commit public_api.txt"
    )


def test_a_name_of_a_distribution_not_installed_names_it():
    missing = [n for n in sorted(iron._LAZY) if not _available(n)]
    if not missing:
        pytest.skip("every distribution iron names is installed")
    for name in missing:
        with pytest.raises(ImportError, match="iron-runtime's .* not installed"):
            getattr(iron, name)


def test_the_runtime_names_are_lazy_and_the_specs():
    assert iron._LAZY["CompiledGraph"] == ("iron.runtime.compiled", "CompiledGraph")
    assert iron._LAZY["CarriedLoop"] == ("iron.runtime.carried", "CarriedLoop")
    assert {"CompiledGraph", "CarriedLoop"} <= set(dir(iron))
    blocks = _blocks(SNAPSHOT.read_text())
    assert (
        "    __init__(self, recording: 'Recording', plan: 'Plan', check: 'bool' = "
        "False, arena: 'ScratchArena | None' = None, emit: 'EmitSite | None' = "
        "None) -> 'None'\n"
    ) in blocks["CompiledGraph"]
