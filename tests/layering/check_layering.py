"""Check that the distributions depend on each other one way only.

Dependencies point core <- operators <- lm and core <- runtime <- lm; iron-core
reaches the others only through entry points. This script proves three things
and exits non-zero with a readable report if any fails:

(a) ``import iron`` (and ``dir(iron)``), in a fresh interpreter, loads none of
    ``iron.operators``, ``iron.runtime``, ``iron.lm`` or ``pyxrt`` (nor any of
    their submodules).
(b) ``iron.Graph`` resolves, in a fresh interpreter, without loading
    ``iron.runtime``, ``iron.lm`` or ``pyxrt``.
(c) No source file of iron-core imports another IRON distribution, at any
    level (module, function, ``TYPE_CHECKING`` block, relative imports that
    climb out of ``iron.core``, ``importlib.import_module("...")`` with a
    literal name), nor a third-party module iron-core does not declare as a
    dependency. iron-core's ``src/iron`` holds no other distribution's
    subpackage directory.
(d) No distribution imports another's underscore names: no
    ``from iron.<other>... import _name``, no ``iron.<other>._module`` and no
    ``import iron.<other>._module``, at any level. What siblings share has a
    public name in its module's ``__all__``.

Fresh subprocesses matter: ``sys.modules`` in a long test run lies.

Run it as ``python tests/layering/check_layering.py`` with iron-core (and
ideally iron-operators) installed; ``tests/layering/test_layering.py`` imports
it and runs the same checks under pytest.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE_DIR = ROOT / "packages" / "iron-core"
CORE_SRC = CORE_DIR / "src"

#: The other distributions' subpackages, by the distribution that ships each.
OTHER_DISTRIBUTIONS = {
    "iron.operators": "iron-operators",
    "iron.runtime": "iron-runtime",
    "iron.lm": "iron-lm",
}
#: What ``import iron`` must not load.
IMPORT_IRON_FORBIDDEN = (*OTHER_DISTRIBUTIONS, "pyxrt")
#: What resolving ``iron.Graph`` must not load.
GRAPH_FORBIDDEN = ("iron.runtime", "iron.lm", "pyxrt")

_MARKER = "@@IRON-LAYERING@@"
_PROBE = f"""
import json, sys, traceback
result = {{"error": None}}
try:
    import iron
    dir(iron)
    for name in sys.argv[1:]:
        getattr(iron, name)
except BaseException:
    result["error"] = traceback.format_exc()
result["modules"] = sorted(sys.modules)
print({_MARKER!r} + json.dumps(result))
"""


# -- (a) and (b): what a fresh interpreter loads ------------------------------


def _probe(*names: str) -> tuple[str | None, list[str]]:
    """Import iron in a fresh interpreter, get ``names`` off it.

    Returns:
        The traceback if something raised (else None), and the sorted keys of
        ``sys.modules`` at the end.
    """
    env = dict(os.environ)
    if env.get("PYTHONPATH"):  # keep relative entries working from ROOT
        env["PYTHONPATH"] = os.pathsep.join(
            str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep) if p
        )
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *names],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    for line in done.stdout.splitlines():
        if line.startswith(_MARKER):
            result = json.loads(line[len(_MARKER) :])
            return result["error"], result["modules"]
    raise RuntimeError(
        f"the probe interpreter failed (exit {done.returncode}):\n"
        f"{done.stdout}{done.stderr}"
    )


def _matching(modules: Iterable[str], prefixes: Iterable[str]) -> list[str]:
    """The modules that are one of ``prefixes`` or a submodule of one."""
    prefixes = tuple(prefixes)
    return sorted(
        m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)
    )


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else text


def check_import_iron() -> list[str]:
    """(a) ``import iron`` loads no other distribution and no pyxrt.

    Returns:
        One line per problem; empty if the check passes.
    """
    error, modules = _probe()
    if error is not None:
        return [f"`import iron` failed in a fresh interpreter:\n{error}"]
    loaded = _matching(modules, IMPORT_IRON_FORBIDDEN)
    return [
        f"`import iron` loaded {name}; the public names of iron must load on "
        "first use (PEP 562 __getattr__), never at import"
        for name in loaded
    ]


def check_graph_is_lazy() -> list[str]:
    """(b) ``iron.Graph`` resolves without loading the runtime or pyxrt.

    Returns:
        One line per problem; empty if the check passes.
    """
    error, modules = _probe("Graph")
    if error is not None:
        return [
            "`iron.Graph` did not resolve in a fresh interpreter "
            f"({_last_line(error)}); iron/__init__.py must expose Graph lazily "
            "from iron.core, and the module must exist:\n" + error
        ]
    return [
        f"resolving `iron.Graph` loaded {name}; Graph must reach backends "
        "through the 'iron.backends' entry point group, only when compiling"
        for name in _matching(modules, GRAPH_FORBIDDEN)
    ]


# -- (c): what iron-core's source imports -------------------------------------


def declared_imports(pyproject: Path) -> set[str]:
    """Import names of the dependencies a pyproject.toml declares.

    A distribution name maps to its import name by lowercasing and turning
    ``-`` into ``_`` (numpy -> numpy, ml_dtypes -> ml_dtypes).
    """
    text = pyproject.read_text(encoding="utf-8")
    requirements = tomllib.loads(text).get("project", {}).get("dependencies", [])
    names = set()
    for requirement in requirements:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        if match:
            names.add(match.group(1).lower().replace("-", "_").replace(".", "_"))
    return names


def _module_of(path: Path, src: Path) -> tuple[str, bool]:
    """The dotted module name of a source file, and whether it is a package."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    """Resolve a relative import the way the import system would."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(package):
        return "." * level + (target or "")  # climbs out of the tree: keep as is
    base = package[: len(package) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _imported_names(
    tree: ast.AST, module: str, is_package: bool
) -> Iterator[tuple[int, str]]:
    """Every module name a file may import, with its line, at any level."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = (
                _absolute(module, is_package, node.level, node.module)
                if node.level
                else node.module or ""
            )
            yield node.lineno, base
            for alias in node.names:
                if alias.name != "*":
                    yield node.lineno, f"{base}.{alias.name}"
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else None
            )
            first = node.args[0]
            if (
                called in ("import_module", "__import__")
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
            ):
                name = first.value
                if name.startswith("."):
                    level = len(name) - len(name.lstrip("."))
                    name = _absolute(
                        module, is_package, level, name.lstrip(".") or None
                    )
                yield node.lineno, name


def _problem(name: str, allowed_third_party: set[str]) -> str | None:
    """Why importing ``name`` from iron-core is wrong, or None if it is fine."""
    for prefix, distribution in OTHER_DISTRIBUTIONS.items():
        if name == prefix or name.startswith(prefix + "."):
            return (
                f"imports {name} from {distribution}; iron-core must not depend "
                "on it: find it through an importlib.metadata entry point "
                "('iron.operators' or 'iron.backends') instead"
            )
    top = name.split(".")[0]
    if not top or top == "iron" or top == "__future__":
        return None  # iron itself and iron.core.*; relative names inside core
    if top in sys.stdlib_module_names or top in allowed_third_party:
        return None
    return (
        f"imports {name}, which iron-core does not declare as a dependency "
        f"(it declares: {', '.join(sorted(allowed_third_party)) or 'nothing'})"
    )


def scan_sources(src: Path, allowed_third_party: set[str]) -> list[str]:
    """Problems in the imports of every ``.py`` file under ``src``.

    Args:
        src: A ``src/`` directory (the root of the ``iron`` package tree).
        allowed_third_party: Import names of the declared dependencies.

    Returns:
        One ``path:line: message`` per problem; empty if there is none.
    """
    problems = []
    for path in sorted(src.rglob("*.py")):
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except SyntaxError as exc:
            problems.append(f"{shown}:{exc.lineno}: cannot be parsed: {exc.msg}")
            continue
        module, is_package = _module_of(path, src)
        seen = set()
        for line, name in _imported_names(tree, module, is_package):
            why = _problem(name, allowed_third_party)
            if why and (line, why) not in seen:
                seen.add((line, why))
                problems.append(f"{shown}:{line}: {why}")
    for subpackage, distribution in OTHER_DISTRIBUTIONS.items():
        stray = src.joinpath(*subpackage.split("."))
        if stray.exists():
            shown = stray.relative_to(ROOT) if stray.is_relative_to(ROOT) else stray
            problems.append(
                f"{shown}: iron-core's tree holds {subpackage}, which belongs "
                f"to {distribution} (it would ship in iron-core's wheel)"
            )
    return problems


def check_core_sources() -> list[str]:
    """(c) iron-core's source imports no other distribution, at any level.

    Returns:
        One line per problem; empty if the check passes.
    """
    if not CORE_SRC.is_dir():
        return [f"{CORE_SRC} does not exist"]
    return scan_sources(CORE_SRC, declared_imports(CORE_DIR / "pyproject.toml"))


# -- (d): no distribution imports another's underscore names --------------------

#: Each distribution's subpackage of ``iron``, by the distribution's directory.
SUBPACKAGES = {
    "iron-core": "iron.core",
    "iron-operators": "iron.operators",
    "iron-runtime": "iron.runtime",
    "iron-lm": "iron.lm",
}


def _private_part(name: str) -> str | None:
    """The first underscore-named part of a dotted name, or None."""
    for part in name.split(".")[1:]:
        if part.startswith("_") and not part.startswith("__"):
            return part
    return None


def scan_private_imports(src: Path, own: str) -> list[str]:
    """Imports in ``src`` of another distribution's underscore names.

    Args:
        src: A distribution's ``src/`` directory.
        own: That distribution's subpackage (``iron.runtime``); its own
            underscore names are its business.

    Returns:
        One ``path:line: message`` per import of ``iron.<other>`` that names
        a module or an attribute starting with one underscore.
    """
    others = tuple(p for p in SUBPACKAGES.values() if p != own)
    problems = []
    for path in sorted(src.rglob("*.py")):
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except SyntaxError as exc:
            problems.append(f"{shown}:{exc.lineno}: cannot be parsed: {exc.msg}")
            continue
        module, is_package = _module_of(path, src)
        for line, name in _imported_names(tree, module, is_package):
            owner = next(
                (p for p in others if name == p or name.startswith(p + ".")), None
            )
            private = _private_part(name[len(owner) :]) if owner else None
            if private is not None:
                problems.append(
                    f"{shown}:{line}: imports {name}, an underscore name of "
                    f"{owner}; a distribution uses only another's public names: "
                    f"give {private} a public name in its module's __all__"
                )
    return sorted(set(problems))


def check_private_imports() -> list[str]:
    """(d) No distribution imports another's underscore names.

    Returns:
        One line per problem; empty if the check passes.
    """
    problems = []
    for directory, subpackage in SUBPACKAGES.items():
        src = ROOT / "packages" / directory / "src"
        if src.is_dir():
            problems.extend(scan_private_imports(src, subpackage))
    return problems


CHECKS = {
    "(a) import iron is light": check_import_iron,
    "(b) iron.Graph loads no runtime": check_graph_is_lazy,
    "(c) iron-core imports no other distribution": check_core_sources,
    "(d) no distribution imports another's underscore names": check_private_imports,
}


def main() -> int:
    """Run every check, print a report, and return the exit status."""
    failed = 0
    for title, check in CHECKS.items():
        problems = check()
        print(f"{'FAIL' if problems else 'ok  '} {title}")
        for problem in problems:
            print("     - " + problem.replace("\n", "\n       "))
        failed += bool(problems)
    print(f"{len(CHECKS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
