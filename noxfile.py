"""Sessions for the IRON monorepo: one per package, cross-package, layering, wheels, lint.

``nox`` runs the default list below (the same as ``.ci/run``); ``nox -s NAME``
runs one session. Every session makes a fresh virtualenv with Python 3.11 and
installs from PyPI with pip; the packages go in editable (hatchling's
``.pth`` mode, so ``pkgutil.extend_path`` finds every distribution's
subpackage of ``iron``).

Sessions:
    core         iron-core's own tests.
    operators    iron-operators' tests, with iron-core installed.
    runtime      iron-runtime's tests on the emulated NPU (poison on).
    integration  cross-package tests and examples in tests/.
    layering     import iron is light; iron-core imports no other distribution.
    wheels       build every package's wheel and sdist and check their contents.
    lint         ruff check and ruff format --check over the whole tree.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
PYTHON = "3.11"
CORE = "packages/iron-core"
OPERATORS = "packages/iron-operators"
RUNTIME = "packages/iron-runtime"

nox.options.default_venv_backend = "venv"
nox.options.sessions = [
    "core",
    "operators",
    "runtime",
    "integration",
    "layering",
    "wheels",
    "lint",
]


@nox.session(python=PYTHON)
def core(session: nox.Session) -> None:
    """Run iron-core's tests."""
    session.install("-e", f"{CORE}[test]")
    session.run("pytest", f"{CORE}/tests", *session.posargs)


@nox.session(python=PYTHON)
def operators(session: nox.Session) -> None:
    """Run iron-operators' tests against an editable iron-core."""
    session.install("-e", CORE, "-e", f"{OPERATORS}[test]")
    session.run("pytest", f"{OPERATORS}/tests", *session.posargs)


@nox.session(python=PYTHON)
def runtime(session: nox.Session) -> None:
    """Run iron-runtime's tests on the emulated NPU, dead memory poisoned."""
    session.install("-e", CORE, "-e", OPERATORS, "-e", f"{RUNTIME}[test]")
    session.run(
        "pytest",
        f"{RUNTIME}/tests",
        *session.posargs,
        env={"IRON_BACKEND": "emu", "IRON_EMU_POISON": "1"},
    )


@nox.session(python=PYTHON)
def integration(session: nox.Session) -> None:
    """Run the cross-package tests and examples in tests/ (emulated NPU)."""
    session.install("-e", CORE, "-e", OPERATORS, "-e", RUNTIME, "pytest", "hypothesis")
    session.run(
        "pytest",
        "tests",
        *session.posargs,
        env={"IRON_BACKEND": "emu", "IRON_EMU_POISON": "1"},
    )


@nox.session(python=PYTHON)
def layering(session: nox.Session) -> None:
    """Check what ``import iron`` loads and what iron-core's source imports."""
    # The runtime is installed too, so "import iron loads no runtime" is tested
    # where it could.
    session.install("-e", CORE, "-e", OPERATORS, "-e", RUNTIME)
    session.run("python", "tests/layering/check_layering.py")


@nox.session(python=PYTHON)
def wheels(session: nox.Session) -> None:
    """Build a wheel and an sdist of every package and check what they hold."""
    session.install("build")
    dist = Path(session.create_tmp()) / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    for package in sorted((ROOT / "packages").iterdir()):
        if (package / "pyproject.toml").is_file():
            # python -m build makes the sdist, then the wheel from that sdist,
            # so a file the sdist drops is missing from the wheel too.
            session.run("python", "-m", "build", "--outdir", str(dist), str(package))
    session.run("python", "tests/layering/check_wheels.py", str(dist))


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Run ruff's linter and formatter check (settings in ruff.toml)."""
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
