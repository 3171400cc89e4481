"""Check the built wheels and sdists of every distribution under packages/.

Usage: ``python tests/layering/check_wheels.py DIR`` where DIR holds one wheel
and one sdist per directory under ``packages/`` (``nox -s wheels`` builds them).

It fails (exit 1, with a report) if:

* a package has no wheel or no sdist in DIR, or more than one of either;
* any wheel other than iron-core's contains ``iron/__init__.py`` (only
  iron-core owns the namespace), or a package other than iron-core has one in
  its source tree;
* iron-core's wheel lacks ``iron/__init__.py`` or ``iron/py.typed``;
* a wheel lacks a file of its package's ``src/`` tree (package data included:
  every file but ``__pycache__`` and ``*.pyc``), or holds one that is not there.

It prints what each wheel and sdist holds (counts and entry point groups).
"""

from __future__ import annotations

import configparser
import re
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ROOT / "packages"
NAMESPACE_OWNER = "iron-core"
NAMESPACE_INIT = "iron/__init__.py"
TYPED_MARKER = "iron/py.typed"


def normalize(name: str) -> str:
    """A distribution name in PEP 503 normal form (``iron_core`` -> ``iron-core``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def project_name(package_dir: Path) -> str:
    """The ``[project] name`` of a package directory's pyproject.toml."""
    text = (package_dir / "pyproject.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)["project"]["name"]


def source_files(src: Path) -> set[str]:
    """Every file under ``src`` a wheel must ship, as wheel paths."""
    return {
        path.relative_to(src).as_posix()
        for path in src.rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and path.suffix not in (".pyc", ".pyo")
    }


def _dist_of(filename: str) -> str:
    """The normalized distribution name in a wheel or sdist file name."""
    stem = filename[: -len(".tar.gz")] if filename.endswith(".tar.gz") else filename
    return normalize(stem.split("-")[0])


def check_wheel(name: str, wheel: Path, src: Path) -> tuple[list[str], str]:
    """Check one wheel against its package's source tree.

    Args:
        name: The distribution name (``iron-core``, ``iron-operators``, ...).
        wheel: The wheel file.
        src: The package's ``src/`` directory.

    Returns:
        The problems found (empty if none) and a one-line summary of contents.
    """
    with zipfile.ZipFile(wheel) as archive:
        entries = [n for n in archive.namelist() if not n.endswith("/")]
        entry_points = ""
        for entry in entries:
            if entry.endswith(".dist-info/entry_points.txt"):
                entry_points = archive.read(entry).decode("utf-8")
    metadata = [n for n in entries if n.split("/")[0].endswith((".dist-info", ".data"))]
    payload = set(entries) - set(metadata)
    problems = []
    owner = normalize(name) == NAMESPACE_OWNER
    if owner:
        for required in (NAMESPACE_INIT, TYPED_MARKER):
            if required not in payload:
                problems.append(f"{wheel.name} lacks {required}")
    else:
        if NAMESPACE_INIT in payload:
            problems.append(
                f"{wheel.name} contains {NAMESPACE_INIT}; only {NAMESPACE_OWNER} "
                "may ship it (it would shadow pkgutil.extend_path)"
            )
        if (src / NAMESPACE_INIT).exists():
            problems.append(
                f"{src / NAMESPACE_INIT} exists; only {NAMESPACE_OWNER} owns the "
                "iron namespace"
            )
    expected = source_files(src)
    problems += [
        f"{wheel.name} lacks {path} (in {src.relative_to(ROOT) if src.is_relative_to(ROOT) else src})"
        for path in sorted(expected - payload)
    ]
    problems += [
        f"{wheel.name} holds {path}, which is not in its package's src/"
        for path in sorted(payload - expected)
    ]
    python = sum(p.endswith(".py") for p in payload)
    groups = []
    if entry_points:
        parser = configparser.ConfigParser(delimiters=("=",))
        parser.optionxform = str  # keep names as written
        parser.read_string(entry_points)
        groups = [f"{group}: {', '.join(parser[group])}" for group in parser.sections()]
    summary = (
        f"{wheel.name}: {len(payload)} files ({python} .py, "
        f"{len(payload) - python} data), {len(metadata)} metadata files; "
        f"entry points: {'; '.join(groups) or 'none'}"
    )
    return problems, summary


def check_sdist(sdist: Path, src: Path) -> tuple[list[str], str]:
    """Check that an sdist holds its package's ``src/`` tree.

    Returns:
        The problems found (empty if none) and a one-line summary.
    """
    with tarfile.open(sdist) as archive:
        members = [m.name for m in archive.getmembers() if m.isfile()]
    # sdist members are "<name>-<version>/<path in the package directory>".
    inside = {m.split("/", 1)[1] for m in members if "/" in m}
    missing = sorted(f"src/{p}" for p in source_files(src) if f"src/{p}" not in inside)
    problems = [f"{sdist.name} lacks {path}" for path in missing]
    return problems, f"{sdist.name}: {len(members)} files"


def check_dir(dist_dir: Path, packages: Path = PACKAGES) -> tuple[list[str], list[str]]:
    """Check the wheels and sdists in ``dist_dir`` for every package.

    Returns:
        The problems (empty if none) and the summary lines.
    """
    problems: list[str] = []
    summaries: list[str] = []
    wheels = sorted(dist_dir.glob("*.whl"))
    sdists = sorted(dist_dir.glob("*.tar.gz"))
    package_dirs = sorted(
        p for p in packages.iterdir() if (p / "pyproject.toml").is_file()
    )
    if not package_dirs:
        problems.append(f"no package (directory with pyproject.toml) under {packages}")
    for package_dir in package_dirs:
        name = project_name(package_dir)
        src = package_dir / "src"
        for kind, files in (("wheel", wheels), ("sdist", sdists)):
            mine = [f for f in files if _dist_of(f.name) == normalize(name)]
            if len(mine) != 1:
                found = ", ".join(f.name for f in mine) or "none"
                problems.append(
                    f"{name}: expected one {kind} in {dist_dir}, found {found}"
                )
                continue
            if kind == "wheel":
                found_problems, summary = check_wheel(name, mine[0], src)
            else:
                found_problems, summary = check_sdist(mine[0], src)
            problems += found_problems
            summaries.append(f"{name}: {summary}")
    return problems, summaries


def main(argv: list[str]) -> int:
    """Check the directory named on the command line; return the exit status."""
    if len(argv) != 2:
        print(__doc__)
        return 2
    dist_dir = Path(argv[1])
    if not dist_dir.is_dir():
        print(f"{dist_dir} is not a directory")
        return 2
    problems, summaries = check_dir(dist_dir)
    for line in summaries:
        print(line)
    if problems:
        print(f"\n{len(problems)} problem(s) in the built distributions:")
        for problem in problems:
            print(f"  - {problem}")
        return 1
    print("\nall wheels and sdists check out")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
