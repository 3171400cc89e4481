"""The quick start works wherever a supported Python does.

The sessions run on the interpreter that runs nox (no pinned version a
machine may lack); an interpreter asked for and missing fails the run; the
packages' metadata names the Pythons the sessions support; and the README's
first command installs and runs the demo on a Python that refuses
``pip install`` outside a virtual environment (PEP 668).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from test_readme import quick_start

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = sorted(p for p in (ROOT / "packages").iterdir() if p.is_dir())


def nox(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess:
    # Outside CI nox would skip a missing interpreter unless told not to; the
    # noxfile must tell it, so CI's variable is not what makes this pass.
    environ = {k: v for k, v in os.environ.items() if k != "CI"} | env
    return subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(cwd / "noxfile.py"), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environ,
        timeout=600,
    )


def supported() -> tuple[str, ...]:
    """``SUPPORTED`` of the noxfile, read without running it."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    (value,) = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["SUPPORTED"]
    ]
    return ast.literal_eval(value)


def test_the_default_sessions_run_on_the_interpreter_that_runs_nox():
    listed = nox("--list", "--json")
    sessions = {s["name"]: s for s in json.loads(listed.stdout)}
    defaults = [name for name, s in sessions.items() if s["python"] is None]
    assert {"core", "operators", "runtime", "lm", "integration", "lint"} <= set(
        defaults
    )
    pinned = {
        name: s["python"]
        for name, s in sessions.items()
        if s["python"] is not None and s["session"] != "pythons"
    }
    assert pinned == {}, f"sessions pinned to one Python: {pinned}"


def test_the_default_sessions_type_check_the_packages():
    # .ci/run runs nox's defaults: mypy's session is among them ("*" marks
    # the selected sessions in nox's listing).
    listed = nox("--list")
    selected = {
        line[2:].split(" -> ")[0]
        for line in listed.stdout.splitlines()
        if line.startswith("* ")
    }
    assert "typecheck" in selected, listed.stdout
    assert {"core", "layering", "lint"} <= selected


def test_a_missing_interpreter_fails_the_run():
    done = nox("--force-python", "3.99", "-s", "layering")
    assert done.returncode != 0, done.stderr
    assert "3.99" in done.stderr and "not found" in done.stderr


def test_an_unsupported_python_running_nox_is_refused(tmp_path):
    """The noxfile names the versions when nox runs on another one."""
    source = (ROOT / "noxfile.py").read_text()
    assert 'RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"' in source
    (tmp_path / "noxfile.py").write_text(
        source.replace(
            'RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"',
            'RUNNING = "3.10"',
        )
    )
    done = nox("--list", cwd=tmp_path)
    assert done.returncode != 0
    assert "nox runs on Python 3.10, and IRON supports 3.11, 3.12, 3.13" in (
        done.stdout + done.stderr
    )


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_the_metadata_names_the_pythons_the_sessions_run_on(package):
    versions = supported()
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in versions
    project = tomllib.loads((package / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == f">={versions[0]}"
    claimed = tuple(
        c.rsplit(" :: ", 1)[1]
        for c in project["classifiers"]
        if c.startswith("Programming Language :: Python :: 3.")
    )
    assert claimed == versions


def distribution_python(where: Path) -> Path:
    """A copy of this interpreter's installation marked externally managed.

    The binary is copied and the standard library linked file by file, plus
    PEP 668's ``EXTERNALLY-MANAGED`` marker in the copy's stdlib directory:
    what Debian's and Ubuntu's Pythons look like to pip. Returns its bin/.
    """
    prefix = Path(sys.base_prefix)
    name = f"python{sys.version_info.major}.{sys.version_info.minor}"
    real = prefix / "bin" / name
    if not real.is_file() or not (prefix / "lib" / name / "os.py").is_file():
        pytest.skip(f"this Python's layout is not prefix/bin/{name}, prefix/lib/{name}")
    bin_dir, lib = where / "bin", where / "lib"
    bin_dir.mkdir(parents=True)
    lib.mkdir()
    shutil.copy2(real, bin_dir / name)
    (bin_dir / "python3").symlink_to(name)
    for item in (prefix / "lib").iterdir():  # libpython, pkgconfig, ...
        if item.name != name:
            (lib / item.name).symlink_to(item)
    stdlib = lib / name
    stdlib.mkdir()
    for item in (prefix / "lib" / name).iterdir():
        (stdlib / item.name).symlink_to(item)
    (stdlib / "EXTERNALLY-MANAGED").write_text(
        "[externally-managed]\nError=This Python is the distribution's (a test copy).\n"
    )
    return bin_dir


def test_the_readme_first_command_runs_on_an_externally_managed_python(tmp_path):
    bin_dir = distribution_python(tmp_path / "python")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "CI")
    }
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env.pop("IRON_BACKEND", None)
    env.pop("IRON_DEVICE", None)

    # The copy is what PEP 668 describes: pip refuses to install into it.
    refused = subprocess.run(
        ["python3", "-m", "pip", "install", "--quiet", "nox"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert refused.returncode != 0
    assert "externally-managed-environment" in refused.stderr

    # A checkout of the repository's files, where the README's command runs.
    checkout = tmp_path / "iron"
    files = subprocess.run(
        ["git", "ls-files", "-z"], capture_output=True, cwd=ROOT, check=True
    ).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        source = ROOT / name
        if source.is_file():
            target = checkout / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    first = quick_start((ROOT / "README.md").read_text())[0]
    done = subprocess.run(
        ["bash", "-c", first],
        capture_output=True,
        text=True,
        cwd=checkout,
        env=env,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    shown = " ".join((done.stdout + done.stderr).split())
    assert "emulated on this CPU (numpy), not NPU speed" in shown
    assert "checked: the 24 tokens equal the host reference's" in shown
