"""The public API is frozen by a checked-in snapshot of names and signatures.

``public_api.txt`` lists every lazy name ``iron`` exports, with the signature
of each function and of each public method and property of each class. A
change to it is deliberate: rerun with ``IRON_UPDATE_API=1`` and review the
diff of the snapshot like any other API change.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import iron

SNAPSHOT = Path(__file__).with_name("public_api.txt")


def _signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(...)"


def describe() -> str:
    """The current public API as text, one name or member a line."""
    lines: list[str] = []
    for name in sorted(iron._LAZY):
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
    current = describe()
    if os.environ.get("IRON_UPDATE_API"):
        SNAPSHOT.write_text(current)
    assert SNAPSHOT.read_text() == current, (
        "the public API changed; if deliberate, rerun with IRON_UPDATE_API=1 and "
        "commit public_api.txt"
    )
