"""Helpers the NPU design and kernel tests share.

This module owns:

- the golden files: ``GOLDEN`` (the reviewed design text under ``golden/``),
  ``UPDATE`` (``IRON_UPDATE_GOLDEN`` set, other than to ``0``) and
  :func:`check_golden`, which writes a design's text when regenerating and
  otherwise compares it with its golden file;
- :func:`filecheck`, which runs FileCheck patterns (the ``filecheck``
  package, a Python FileCheck clone) over a design's text, skipping where the
  package is not installed;
- the host C++ harnesses: ``CXX`` (g++ or clang++, or None) and
  :func:`compile_host`, which builds a harness against the kernel sources,
  skipping where there is no compiler; :func:`empty_aie_api`, the include
  directory whose ``aie_api/aie.hpp`` is empty (the harnesses include
  ``host_aie_api.h``, a scalar model of aie_api, instead), and
  ``AIE2_FLAGS``, which build a harness as Peano builds for aie2 against the
  model's AIE2 form (no fp32-vector operations);
- :func:`shim_moved`, the element indices a shim transfer moves, decoded with
  ``legality.encode`` / ``shim_elements``.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from iron.core.device import as_device
from iron.runtime.npu import kernels, legality, verify

HERE = Path(__file__).parent
GOLDEN = HERE / "golden"
UPDATE = os.environ.get("IRON_UPDATE_GOLDEN", "") not in ("", "0")
CXX = shutil.which("g++") or shutil.which("clang++")

#: A host build of the kernels for aie2: Peano's __AIE_ARCH__ for aie2 (which
#: selects iron::Aie2Backend), and host_aie_api.h's AIE2 form of the model.
AIE2_FLAGS = ("-DIRON_HOST_AIE2", "-D__AIE_ARCH__=20")


#: Goldens that break a rule of ``iron.runtime.npu.verify`` today, with why.
#: test_verify.py expects each to fail the checker (strict xfail), so a fix
#: shows up as a test to update, and no other golden may join them silently.
KNOWN_VIOLATIONS: dict[str, str] = {}


def _known_violation(name: str) -> bool:
    return name in KNOWN_VIOLATIONS


def check_golden(case: str, dev: str, text: str, *, subject: str = "") -> None:
    """``text`` equals ``golden/<case>_<dev>.mlir``; with ``UPDATE``, write it first.

    ``subject`` names the design in the failure message (by default "the
    design of <case> on <dev>").
    """
    path = GOLDEN / f"{case}_{dev}.mlir"
    if UPDATE and not _known_violation(path.name):
        # a golden is (re)written only when upstream's rules pass it (issue 28)
        verify.verify_text(text, dev, subject=subject or f"{case} on {dev}")
        path.write_text(text, encoding="utf-8")
    elif UPDATE:
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} is missing: run with IRON_UPDATE_GOLDEN=1"
    subject = subject or f"the design of {case} on {dev}"
    assert text == path.read_text(encoding="utf-8"), (
        f"{subject} changed; review and regenerate with IRON_UPDATE_GOLDEN=1"
    )


def filecheck(tmp_path: Path, checks: str, text: str) -> None:
    """``text`` matches the FileCheck patterns ``checks`` (AssertionError if not)."""
    pytest.importorskip("filecheck", reason="the filecheck package is not installed")
    spec = tmp_path / "checks.txt"
    spec.write_text(checks, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "filecheck", str(spec)],
        input=text,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def compile_host(
    directory: Path,
    sources: Sequence[Path],
    name: str,
    *,
    flags: Sequence[str] = (),
    includes: Sequence[Path] = (),
    optimize: str = "-O2",
    purpose: str = "",
) -> Path:
    """Compile ``sources`` for the host into ``directory / name``; return its path.

    The command is ``CXX -std=c++20 <optimize> <flags> -I <includes>... -I
    KERNEL_DIR <sources> -o <exe>`` (the extra include directories come ahead
    of the kernel sources'). Without a compiler the test is skipped, saying
    what the build was for (``purpose``; by default "to build <first
    source>").
    """
    if CXX is None:
        purpose = purpose or f"to build {Path(sources[0]).name}"
        pytest.skip(f"no host C++ compiler (g++ or clang++) {purpose}")
    exe = Path(directory) / name
    dirs = [*includes, kernels.KERNEL_DIR]
    subprocess.run(
        [CXX, "-std=c++20", optimize, *flags]
        + [arg for d in dirs for arg in ("-I", str(d))]
        + [str(s) for s in sources]
        + ["-o", str(exe)],
        check=True,
    )
    return exe


def empty_aie_api(directory: Path) -> Path:
    """``directory`` with an empty ``aie_api/aie.hpp`` in it, for a host build.

    The kernels include ``<aie_api/aie.hpp>``; a host harness includes the
    model ``host_aie_api.h`` ahead of them and this empty header stands in.
    """
    (Path(directory) / "aie_api").mkdir(parents=True, exist_ok=True)
    (Path(directory) / "aie_api" / "aie.hpp").write_text(
        "// host build: the harness includes host_aie_api.h, the aie_api model\n",
        encoding="utf-8",
    )
    return Path(directory)


#: The host aie_api model's assumptions that touch a matmul kernel, in
#: host_aie_api.h's four letters: the sum order (tree or sequential, in the
#: mmul or the lane reduction) and subnormal results (flushed or kept).
MATMUL_MODELS = ["".join(m) for m in itertools.product("i", "tq", "8", "zk")]


def kernel_harness(directory: Path, name: str, *, aie2: bool) -> Path:
    """Compile the host harness ``<name>.cc`` here, warnings as errors.

    With ``aie2``, for npu1's AIE2 (its mmul, and no fp32-vector arithmetic
    in the aie_api model); else for npu2's AIE2P.
    """
    flags = ("-ffp-contract=off", "-Wall", "-Werror", *(AIE2_FLAGS if aie2 else ()))
    return compile_host(
        directory,
        [HERE / f"{name}.cc"],
        name,
        flags=flags,
        includes=(empty_aie_api(directory),),
    )


def shim_moved(t: legality.Transfer, dev: str | None = None) -> np.ndarray:
    """The element indices a transfer moves, decoded as the shim walks them.

    With ``dev``, first asserts the pattern breaks none of that device's shim
    descriptor limits.
    """
    if dev is not None:
        assert not legality.shim_transfer_problems(
            as_device(dev), t.sizes, t.strides, t.offset, t.itemsize
        )
    return legality.shim_elements(
        legality.encode(t.sizes, t.strides, t.offset, t.itemsize, t.repeat)
    )
