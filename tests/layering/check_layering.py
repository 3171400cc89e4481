"""Check that the distributions depend on each other one way only.

Dependencies point core <- operators <- lm and core <- runtime <- lm; iron-core
reaches the others only through entry points. This script proves five things
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
(d) A private module (``_x.py``) is imported only by modules of its own
    package and imports neither its package nor a module that imports it.
(e) No distribution imports another distribution's underscore names: no
    private module of it, no private name from it (``from m import _x``, or
    ``m._x`` on a module it imported).

How often a distribution's modules import each other's underscore names is
counted and printed (:func:`underscore_imports`), not failed.

Fresh subprocesses matter: ``sys.modules`` in a long test run lies.

Run it as ``python tests/layering/check_layering.py`` with iron-core (and
ideally iron-operators) installed; ``tests/layering/test_layering.py`` imports
it and runs the same checks under pytest.
"""

from __future__ import annotations

import ast
import dataclasses
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


# -- (d) and (e): private modules and names ------------------------------------

#: Each distribution's source tree (the root of its ``iron`` package tree).
SOURCES = {
    "iron-core": ROOT / "packages" / "iron-core" / "src",
    "iron-operators": ROOT / "packages" / "iron-operators" / "src",
    "iron-runtime": ROOT / "packages" / "iron-runtime" / "src",
    "iron-lm": ROOT / "packages" / "iron-lm" / "src",
}


def _private(part: str) -> bool:
    """Whether a name part is private: one leading underscore, not a dunder."""
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


@dataclasses.dataclass(frozen=True)
class _Import:
    """One name a module imports: ``module`` (dotted), or ``name`` from it."""

    line: int
    module: str
    name: str | None  # None for ``import module``
    typing_only: bool = False  # under ``if TYPE_CHECKING:``


@dataclasses.dataclass
class _Source:
    """One source file: where it is, its module name, what it imports."""

    path: Path
    module: str
    is_package: bool
    distribution: str
    imports: list[_Import]
    tree: ast.AST


def _imports_of(tree: ast.AST, module: str, is_package: bool) -> list[_Import]:
    """Every ``import`` and ``from ... import`` in a file, at any level."""
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If)
        and (
            (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
            or (
                isinstance(node.test, ast.Attribute)
                and node.test.attr == "TYPE_CHECKING"
            )
        )
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    found = []
    for node in ast.walk(tree):
        typed = id(node) in typing_only
        if isinstance(node, ast.Import):
            found += [_Import(node.lineno, a.name, None, typed) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (
                _absolute(module, is_package, node.level, node.module)
                if node.level
                else node.module or ""
            )
            found += [_Import(node.lineno, base, a.name, typed) for a in node.names]
    return found


def load_sources(sources: dict[str, Path]) -> dict[str, _Source]:
    """Parse every ``.py`` file of each distribution's tree, by module name.

    Raises:
        SyntaxError: A file cannot be parsed (the layering check (c) names it).
    """
    found = {}
    for distribution, src in sources.items():
        for path in sorted(src.rglob("*.py")):
            module, is_package = _module_of(path, src)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            found[module] = _Source(
                path,
                module,
                is_package,
                distribution,
                _imports_of(tree, module, is_package),
                tree,
            )
    return found


def _targets(imp: _Import, known: dict[str, _Source]) -> list[str]:
    """The modules of ``known`` an import loads (a package and its submodule)."""
    names = [imp.module]
    if imp.name is not None and imp.name != "*":
        names.append(f"{imp.module}.{imp.name}")
    return [n for n in names if n in known]


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def check_private_modules_in(known: dict[str, _Source]) -> list[str]:
    """(d) over parsed sources: who imports each ``_x.py``, and what it imports.

    Returns:
        One ``path:line: message`` per problem; empty if there is none.
    """
    importers: dict[str, set[str]] = {}
    for source in known.values():
        for imp in source.imports:
            for target in _targets(imp, known):
                importers.setdefault(target, set()).add(source.module)
    problems: list[str] = []
    for source in known.values():
        last = source.module.rsplit(".", 1)[-1]
        if source.is_package or not _private(last):
            continue
        parent = source.module.rsplit(".", 1)[0]
        # A type-only import runs nothing: no cycle at run time (the type
        # checker sees those).
        runtime_imports = [imp for imp in source.imports if not imp.typing_only]
        for imp in runtime_imports:
            for target in _targets(imp, known):
                if target == parent and (
                    imp.name is None or f"{parent}.{imp.name}" not in known
                ):
                    problems.append(
                        f"{_shown(source.path)}:{imp.line}: the private module "
                        f"{source.module} imports its package {parent}; a _x.py "
                        f"never imports its parent back: import the sibling "
                        f"module that defines the name, or move the name down"
                    )
                elif (
                    target != parent
                    and source.module in importers.get(target, set())
                    and target in importers.get(source.module, set())
                ):
                    problems.append(
                        f"{_shown(source.path)}:{imp.line}: the private module "
                        f"{source.module} imports {target}, which imports it: "
                        f"a _x.py never imports its parent back; move what both "
                        f"need into the private module or a third one"
                    )
        for importer in sorted(importers.get(source.module, ())):
            if importer.rsplit(".", 1)[0] != parent and importer != parent:
                problems.append(
                    f"{_shown(known[importer].path)}: {importer} imports the "
                    f"private module {source.module} from outside {parent}; "
                    f"give what it needs a public name in a public module"
                )
    return list(dict.fromkeys(problems))


def _distribution_of(module: str, known: dict[str, _Source]) -> str | None:
    """The distribution shipping ``module`` (or the package it lies in)."""
    parts = module.split(".")
    while parts:
        source = known.get(".".join(parts))
        if source is not None:
            return source.distribution
        parts.pop()
    return None


def check_private_names_in(known: dict[str, _Source]) -> list[str]:
    """(e) over parsed sources: no import of another distribution's private names.

    Returns:
        One ``path:line: message`` per problem; empty if there is none.
    """
    problems = []
    for source in known.values():
        aliases: dict[str, str] = {}  # local name -> other distribution's module
        for imp in source.imports:
            owner = _distribution_of(imp.module, known)
            if owner is None or owner == source.distribution:
                continue
            full = imp.module if imp.name is None else f"{imp.module}.{imp.name}"
            if any(_private(part) for part in full.split(".")):
                problems.append(
                    f"{_shown(source.path)}:{imp.line}: {source.distribution} "
                    f"imports {full}, a private name of {owner}; give it a "
                    f"public name there (in __all__) or keep it in {owner}"
                )
        for node in ast.walk(source.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        aliases[a.asname] = a.name
            elif isinstance(node, ast.ImportFrom) and node.module:
                base = (
                    _absolute(source.module, source.is_package, node.level, node.module)
                    if node.level
                    else node.module
                )
                for a in node.names:
                    if f"{base}.{a.name}" in known:
                        aliases[a.asname or a.name] = f"{base}.{a.name}"
        for node in ast.walk(source.tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and _private(node.attr)
            ):
                module = aliases[node.value.id]
                owner = _distribution_of(module, known)
                if owner is not None and owner != source.distribution:
                    problems.append(
                        f"{_shown(source.path)}:{node.lineno}: "
                        f"{source.distribution} reads {module}.{node.attr}, a "
                        f"private name of {owner}; give it a public name there"
                    )
    return problems


def underscore_imports(known: dict[str, _Source]) -> list[str]:
    """Imports of an underscore name (module or attribute) across modules.

    Within a distribution; what (e) refuses across them is counted too. A
    package's ``__init__`` importing its own private module counts as well.
    """
    found = []
    for source in known.values():
        for imp in source.imports:
            full = imp.module if imp.name is None else f"{imp.module}.{imp.name}"
            if full.startswith("iron") and any(
                _private(part) for part in full.split(".")
            ):
                found.append(f"{_shown(source.path)}:{imp.line}: {full}")
    return found


#: Violations of (d) and (e) that another part of issue 19 removes, each as
#: the text that names it in a problem: the emit cycle (its "state" part) and
#: the walk helpers the movers' designs take from iron.operators.movers (its
#: "layout" part). An entry that matches no problem fails the check: delete
#: it once its violation is gone, so the list only shrinks.
def shared_class_names(known: dict[str, _Source]) -> dict[str, list[str]]:
    """Public class names defined at the top of more than one module.

    One meaning per name: two classes called ``Plan`` read as one concept.
    """
    where: dict[str, list[str]] = {}
    for source in known.values():
        for node in getattr(source.tree, "body", []):
            if isinstance(node, ast.ClassDef) and not _private(node.name):
                where.setdefault(node.name, []).append(source.module)
    return {name: mods for name, mods in sorted(where.items()) if len(mods) > 1}


def check_private_modules() -> list[str]:
    """(d) on the repository's sources."""
    return check_private_modules_in(load_sources(SOURCES))


def check_private_names() -> list[str]:
    """(e) on the repository's sources."""
    return check_private_names_in(load_sources(SOURCES))


CHECKS = {
    "(a) import iron is light": check_import_iron,
    "(b) iron.Graph loads no runtime": check_graph_is_lazy,
    "(c) iron-core imports no other distribution": check_core_sources,
    "(d) a _x.py is imported only by its package, never imports it back": (
        check_private_modules
    ),
    "(e) no distribution imports another's private names": check_private_names,
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
    count = len(underscore_imports(load_sources(SOURCES)))
    print(f"info: {count} imports of underscore names across modules")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
