"""iron.lm's public names: imported lazily, and frozen by a snapshot.

``import iron.lm`` must stay light (a fresh interpreter proves it: a long
test run's ``sys.modules`` lies); ``from iron.lm import Decoder, ...``
resolves each name on first use. ``public_api.txt`` lists every name with
the signatures of its public members; a change is deliberate: rerun with
``IRON_UPDATE_API=1`` and review the diff like any other API change.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import iron.lm

SNAPSHOT = Path(__file__).with_name("public_api.txt")
#: What ``import iron.lm`` must not load.
HEAVY = (
    "iron.runtime",
    "iron.operators",
    "iron.lm.generate",
    "iron.lm.model",
    "iron.lm.tokenizer",
    "iron.lm.serve",
    "tokenizers",
    "jinja2",
    "starlette",
    "uvicorn",
)


def _loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def _heavy(modules: list[str], heavy: tuple[str, ...] = HEAVY) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in heavy)]


def test_import_iron_lm_is_light():
    assert _heavy(_loaded_after("import iron.lm; dir(iron.lm)")) == []


def test_the_cli_module_is_light_too():
    # `iron-lm --help` loads serve's arguments, not its stack or the runtime
    heavy = (*(h for h in HEAVY if h != "iron.lm.serve"), "iron.lm.serve.app")
    assert _heavy(_loaded_after("import iron.lm.cli"), heavy) == []


def test_the_public_names_resolve_on_first_use():
    from iron.lm import Decoder, Llama, LlamaConfig, Tokenizer
    from iron.lm.config import LlamaConfig as config_class
    from iron.lm.generate import Decoder as decoder_class
    from iron.lm.model import Llama as llama_class
    from iron.lm.tokenizer import Tokenizer as tokenizer_class

    assert (Decoder, Llama, LlamaConfig, Tokenizer) == (
        decoder_class,
        llama_class,
        config_class,
        tokenizer_class,
    )
    assert {"Decoder", "Llama", "LlamaConfig", "Tokenizer"} <= set(dir(iron.lm))
    assert set(iron.lm.__all__) == {*iron.lm._LAZY, "__version__"}


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="'iron.lm' has no attribute 'Decodr'"):
        iron.lm.Decodr  # noqa: B018


def test_iron_lm_and_iron_load_their_names_by_one_mechanism():
    """Issue 19, section 7: iron.lm shares iron's lazy loader (iron.core.lazy)."""
    for package in (iron, iron.lm):
        assert package.__getattr__.__module__ == "iron.core.lazy"
        assert package.__dir__.__module__ == "iron.core.lazy"


def _signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(...)"


def describe() -> str:
    """iron.lm's public API as text, one name or member a line."""
    lines: list[str] = []
    for name in sorted(iron.lm._LAZY):
        obj = getattr(iron.lm, name)
        bases = ", ".join(b.__name__ for b in obj.__bases__)
        lines.append(f"class {name}({bases})")
        for member, value in sorted(vars(obj).items()):
            if member.startswith("_") and member != "__init__":
                continue
            if isinstance(value, property):
                lines.append(f"    {member}: property")
            elif isinstance(value, (staticmethod, classmethod)):
                kind = type(value).__name__
                lines.append(f"    {member}{_signature(value.__func__)}  [{kind}]")
            elif inspect.isfunction(value):
                lines.append(f"    {member}{_signature(value)}")
    # a default that is a path into the package: the same on every machine
    return (
        "\n".join(lines).replace(str(Path(iron.lm.__file__).parent), "<iron.lm>") + "\n"
    )


def test_public_api_matches_the_snapshot():
    current = describe()
    if os.environ.get("IRON_UPDATE_API"):
        SNAPSHOT.write_text(current)
    assert SNAPSHOT.read_text() == current, (
        "iron.lm's public API changed; if deliberate, rerun with IRON_UPDATE_API=1 "
        "and commit packages/iron-lm/tests/public_api.txt"
    )
