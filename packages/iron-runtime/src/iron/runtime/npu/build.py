"""Building designs: Peano for the kernels, aiecc for the design, in a cache.

:func:`build` compiles one :class:`~iron.runtime.npu.designs.Design`; its
kernels with Peano (``clang++ --target=aie2-none-unknown-elf`` on NPU1,
``aie2p`` on NPU2), then the design with aiecc into an xclbin plus an
instruction stream (NPU1) or one full ELF (NPU2). :func:`build_all` builds
many in parallel threads with a progress bar. Results live in a cache keyed
by the hash of the design text, the kernel sources (and shared headers), the
tool versions, the flag spelling and the pinned release: ``~/.cache/iron``,
or ``$IRON_CACHE``. A missing aiecc or Peano raises :class:`ToolMissingError`
naming the tool and where it comes from.

Flags (the pinned release, :data:`~iron.runtime.npu.mlir.MLIR_AIE_RELEASE`):

* Peano, as mlir-aie v1.4.1 compiles its own kernels
  (``programming_examples/makefile-common`` ``PEANOWRAP2_FLAGS`` /
  ``PEANOWRAP2P_FLAGS``, and ``python/utils/compile/utils.py``):
  ``-O2 -std=c++20 --target=<arch>-none-unknown-elf`` then its
  ``WARNING_FLAGS`` (``-Wno-parentheses -Wno-attributes -Wno-macro-redefined
  -Wno-empty-body -Wno-missing-template-arg-list-after-template-kw``), its
  ``NO_ADF_FLAGS`` (``-D__AIE_API_AIE_ADF_HPP__``), ``-DNDEBUG -I <mlir-aie
  include>`` (its aie_api). The define matters: v1.4.1 ships the stock
  ``Xilinx/aie_api``, whose ``aie.hpp`` includes ``aie_adf.hpp`` (and so
  ``<adf.h>``, which Peano lacks) when ``__AIENGINE__`` is defined, and
  Peano defines it (``Xilinx/llvm-aie`` ``clang/lib/Basic/Targets/AIE.cpp``);
  mlir-aie commit ``210e8db`` added the guard define for this reason.
  Then IRON's own ``-fstack-usage``: clang writes each function's frame to
  ``<object>.su`` (:func:`stack_usage` reads it), and the build refuses a
  kernel whose frames exceed the stack its contract declares
  (:func:`check_stack`), the figure its core's ``stack_size`` is made of
  (:func:`iron.runtime.npu.legality.core_stack`).
* aiecc, ``"get"`` spelling (aiecc from 2026-07-21, PR #3364, so v1.4.x):
  ``--get-xclbin --xclbin-name=F --get-npu-insts --npu-insts-name=F`` or
  ``--get-full-elf --full-elf-name=F``, ``--peano=DIR``, ``--tmpdir=DIR``
  (tools/aiecc/CommandLineOptions.h; docs 1.4.0 ``aiecc/``). Peano is the
  default core compiler from v1.4.1, so no ``--no-xchesscc``.
* aiecc, ``"generate"`` spelling (older releases, for reference and for
  ``IRON_AIECC_FLAGS=generate``): ``--aie-generate-xclbin``,
  ``--aie-generate-npu-insts``, ``--generate-full-elf``, plus
  ``--no-xchesscc --no-xbridge --no-compile-host`` (Chess was the default).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from iron.core.device import Device, as_device
from iron.runtime.npu import kernels
from iron.runtime.npu.designs import Design
from iron.runtime.npu.mlir import MLIR_AIE_RELEASE

__all__ = [
    "STYLES",
    "SUPPORTED",
    "BuildError",
    "Built",
    "Frame",
    "Runner",
    "StackError",
    "ToolMissingError",
    "Toolchain",
    "aiecc_command",
    "build",
    "build_all",
    "cache_dir",
    "cache_key",
    "check_stack",
    "find_toolchain",
    "peano_command",
    "stack_usage",
    "supported_problems",
]

#: Every command a build runs, and its output, at INFO (the bring-up ladder
#: reports them).
logger = logging.getLogger("iron.runtime.npu.build")

#: aiecc flag spellings: "get" (the pinned release) and "generate" (before 2026-07-21).
STYLES = ("get", "generate")

#: Runs one command in a directory; raises BuildError when it fails.
Runner = Callable[[Sequence[str], Path], None]

#: mlir-aie v1.4.1 ``programming_examples/makefile-common`` ``WARNING_FLAGS``.
_WARNINGS = (
    "-Wno-parentheses",
    "-Wno-attributes",
    "-Wno-macro-redefined",
    "-Wno-empty-body",
    "-Wno-missing-template-arg-list-after-template-kw",
)
#: mlir-aie v1.4.1 ``makefile-common`` ``NO_ADF_FLAGS``: keeps the stock
#: aie_api from including ``<adf.h>`` under Peano (module docstring).
_NO_ADF = ("-D__AIE_API_AIE_ADF_HPP__",)
#: IRON's own: each function's frame in ``<object>.su`` (clang's driver names
#: the file after ``-o`` with the extension ``.su``), for :func:`check_stack`.
_STACK_USAGE = ("-fstack-usage",)
_XCLBIN, _INSTS, _ELF = "final.xclbin", "insts.bin", "aie.elf"


#: The versions IRON's NPU path is written against, by name. mlir-aie: the
#: pinned release (:data:`iron.runtime.npu.mlir.MLIR_AIE_RELEASE`); Peano:
#: what that release's ``utils/peano-requirements.txt`` pins; XRT: the
#: first release with pyxrt's full-ELF binding (``pyxrt.elf``,
#: ``hw_context(device, elf)``, ``ext.kernel``; ``Xilinx/XRT`` commit
#: ``2a6ffe7``, in tag ``2.21.75``).
SUPPORTED: dict[str, str] = {
    "mlir-aie": "1.4.1",
    "peano": "21.0.0.2026080301+c9c5ecb7",
    "xrt": "2.21 or later",
}

#: What identifies the supported Peano in ``clang++ --version``.
_PEANO_MARKS = ("c9c5ecb7", "2026080301")


def supported_problems(versions: dict[str, str]) -> list[str]:
    """Each tool whose version line is not the supported one, in words.

    Args:
        versions: ``aiecc`` and ``peano`` version lines (as
            :class:`~iron.runtime.npu.build.Toolchain` records them).

    Returns:
        One sentence per mismatch, naming the tool, what it reported and the
        supported version; empty when both match.
    """
    found = []
    aiecc = versions.get("aiecc", "")
    if SUPPORTED["mlir-aie"] not in aiecc:
        found.append(
            f"aiecc reports {aiecc!r}; IRON supports mlir-aie "
            f"{SUPPORTED['mlir-aie']} (its MLIR spelling and aiecc flags are that "
            f"release's; another release rejects them)"
        )
    peano = versions.get("peano", "")
    if not any(mark in peano for mark in _PEANO_MARKS):
        found.append(
            f"Peano's clang++ reports {peano!r}; IRON supports llvm-aie "
            f"{SUPPORTED['peano']} (mlir-aie {SUPPORTED['mlir-aie']}'s "
            f"utils/peano-requirements.txt)"
        )
    return found


class ToolMissingError(RuntimeError):
    """aiecc or Peano is not installed; the message names which and how to get it."""


class BuildError(RuntimeError):
    """A build command failed; the message names the command and its output."""


class StackError(BuildError):
    """A kernel's measured frames exceed the stack its contract declares.

    The message names the kernel, the measured and declared bytes, and the
    fix (raise the ``stack:`` figure in its contract block).
    """


@dataclasses.dataclass(frozen=True)
class Frame:
    """One line of a ``.su`` stack-usage file: a function's own frame.

    Attributes:
        where: The location the compiler wrote (``file:line`` with debug
            information, ``file:line:col`` from GCC, else the module name).
        function: The function's name as written (clang: the symbol, mangled
            for C++; GCC: the declaration).
        bytes: The frame's bytes.
        qualifier: ``static``, or ``dynamic`` (a variable-sized frame; GCC
            also writes ``dynamic,bounded``).
    """

    where: str
    function: str
    bytes: int
    qualifier: str

    @property
    def dynamic(self) -> bool:
        """Whether the frame's size is not known at compile time."""
        return "dynamic" in self.qualifier.split(",")


# ``where`` then ``:function``: a drive letter, the path up to the first
# ':', then optional ':line' and ':col' (all digits); the rest is the name
# (GCC's C++ names hold '::').
_SU_WHERE = re.compile(
    r"^(?P<where>(?:[A-Za-z]:)?[^:]*(?::\d+)?(?::\d+)?):(?P<function>.+)$"
)
_SU_QUALIFIERS = ("static", "dynamic", "dynamic,bounded")


def stack_usage(path: Path) -> list[Frame]:
    """Read a ``.su`` stack-usage file, one :class:`Frame` a line.

    The format is clang's (``AsmPrinter::emitStackUsage`` in
    llvm/lib/CodeGen/AsmPrinter/AsmPrinter.cpp, which Peano's llvm-aie
    inherits): ``<file>:<line>:<function>`` (or ``<module>:<function>``
    without debug information), a tab, the frame's bytes, a tab, then
    ``static`` or ``dynamic``. GCC's (``<file>:<line>:<col>:<function>``,
    qualifiers ``static``, ``dynamic``, ``dynamic,bounded``) reads the same.

    Raises:
        ValueError: A line is not in that format; the message names the file,
            the line number and the line.
    """
    frames = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        head = _SU_WHERE.match(fields[0]) if len(fields) == 3 else None
        if head is None or not fields[1].isdigit() or fields[2] not in _SU_QUALIFIERS:
            raise ValueError(
                f"{path}:{number}: {line!r} is not a stack-usage line "
                f"(<file>:<line>:<function>, a tab, the frame's bytes, a tab, "
                f"static or dynamic)"
            )
        frames.append(Frame(head["where"], head["function"], int(fields[1]), fields[2]))
    return frames


def check_stack(symbol: str, su: Path) -> int:
    """Hold kernel ``symbol``'s measured frames to its contract's stack.

    The measured figure is the sum of every frame in the object's ``.su``
    file: no IRON kernel recurses, so that bounds the deepest chain of calls
    from any entry point (``.su`` files carry no call graph, so a tighter
    figure would be a guess). A ``dynamic`` frame (its size known only at
    run time) is refused outright.

    Returns:
        The measured bytes (at most the declared).

    Raises:
        StackError: A frame is dynamic, or the measured bytes exceed the
            declared (:attr:`iron.runtime.npu.kernels.KernelContract.stack_bytes`);
            the message names the kernel, both figures and the fix.
        BuildError: The compiler wrote no ``.su`` file (a compiler without
            ``-fstack-usage``), or one not in the format.
    """
    c = kernels.contract(symbol)
    if not su.is_file():
        raise BuildError(
            f"Peano wrote no stack-usage file {su} for kernel {symbol}: IRON checks "
            f"each kernel's frames against its contract's stack ({c.stack_bytes} "
            f"bytes) and needs a clang that supports -fstack-usage (the supported "
            f"Peano, {SUPPORTED['peano']}, does)"
        )
    try:
        frames = stack_usage(su)
    except ValueError as e:
        raise BuildError(f"kernel {symbol}: {e}") from e
    dynamic = [f.function for f in frames if f.dynamic]
    if dynamic:
        raise StackError(
            f"kernel {symbol} ({c.path.name}): Peano reports a dynamic frame "
            f"(sized at run time) in {', '.join(dynamic)}; a core's stack is fixed "
            f"(stack_size on aie.core), so no declared figure can be checked: "
            f"give every local array a compile-time size"
        )
    measured = sum(f.bytes for f in frames)
    if measured > c.stack_bytes:
        largest = sorted(frames, key=lambda f: -f.bytes)[:3]
        parts = ", ".join(f"{f.function} {f.bytes}" for f in largest)
        raise StackError(
            f"kernel {symbol}: Peano measures {measured} bytes of frames "
            f"(-fstack-usage, {su.name}: {parts}) but its contract declares "
            f"{c.stack_bytes}; the core's stack_size is made of that figure, so "
            f"the frames would overwrite the core's buffers: raise the figure on "
            f"the 'stack:' line of {c.path} to at least {measured} bytes (and say "
            f"it was measured)"
        )
    return measured


@dataclasses.dataclass(frozen=True)
class Toolchain:
    """Where the tools are and what they report as their versions.

    Attributes:
        aiecc: The aiecc executable.
        peano: Peano's install directory (``bin/clang++`` inside).
        aie_include: mlir-aie's include directory (aie_api's headers).
        versions: Each tool's version line, for the cache key.
        style: The aiecc flag spelling, one of :data:`STYLES`.
    """

    aiecc: str
    peano: Path
    aie_include: Path
    versions: Mapping[str, str]
    style: str = "get"

    @property
    def clang(self) -> Path:
        """Peano's C++ compiler."""
        return self.peano / "bin" / "clang++"


@dataclasses.dataclass(frozen=True)
class Built:
    """A built design in the cache.

    Attributes:
        key: The cache key.
        directory: Where its files are.
        design: The design built.
        xclbin: The xclbin (NPU1), else None.
        insts: The instruction stream (NPU1), else None.
        elf: The full ELF (NPU2), else None.
        kernel: The kernel name to open: ``MLIR_AIE`` in the xclbin, or
            ``main:sequence`` in the full ELF.
    """

    key: str
    directory: Path
    design: Design
    xclbin: Path | None
    insts: Path | None
    elf: Path | None
    kernel: str


def _run(argv: Sequence[str], cwd: Path) -> None:
    logger.info("$ (cd %s) %s", cwd, " ".join(argv))
    done = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True)
    output = (done.stdout + done.stderr).strip()
    if output:
        logger.info("%s", output)
    if done.returncode:
        tail = (done.stderr or done.stdout).strip().splitlines()[-20:]
        raise BuildError(
            f"{Path(argv[0]).name} failed (exit {done.returncode}) in {cwd}: "
            f"{' '.join(argv)}\n" + "\n".join(tail)
        )


def _version(argv: Sequence[str]) -> str:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=60)
    except OSError as e:
        return f"unknown ({e})"
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0] if lines else "unknown"


def _peano_in_site_packages() -> Path | None:
    for entry in sys.path:
        candidate = Path(entry) / "llvm-aie"
        if (candidate / "bin" / "clang++").is_file():
            return candidate
    return None


def _aie_include(aiecc: str) -> Path | None:
    for entry in sys.path:
        candidate = Path(entry) / "mlir_aie" / "include"
        if (candidate / "aie_api").is_dir():
            return candidate
    candidate = Path(aiecc).resolve().parent.parent / "include"
    return candidate if (candidate / "aie_api").is_dir() else None


def find_toolchain(
    env: Mapping[str, str] | None = None,
    which: Callable[[str], str | None] = shutil.which,
    version: Callable[[Sequence[str]], str] = _version,
) -> Toolchain:
    """Find aiecc, Peano and mlir-aie's headers.

    ``AIECC`` (else ``aiecc`` on PATH), ``PEANO_INSTALL_DIR`` (else the
    ``llvm-aie`` wheel's directory), ``MLIR_AIE_INCLUDE_DIR`` (else the
    ``mlir_aie`` wheel's), ``IRON_AIECC_FLAGS`` (``get`` or ``generate``).

    Raises:
        ToolMissingError: A tool or the headers are absent; the message names
            what and how to install it.
        ValueError: ``IRON_AIECC_FLAGS`` is not a known spelling.
    """
    env = os.environ if env is None else env
    wheels = (
        f"pip install mlir_aie -f https://github.com/Xilinx/mlir-aie/releases/"
        f"expanded_assets/{MLIR_AIE_RELEASE} (GitHub release assets; not on PyPI)"
    )
    aiecc = env.get("AIECC") or which("aiecc")
    if not aiecc:
        raise ToolMissingError(
            f"aiecc (mlir-aie {MLIR_AIE_RELEASE}) is not on PATH and AIECC is "
            f"unset; install it with {wheels}, or set AIECC=/path/to/aiecc"
        )
    peano_dir = env.get("PEANO_INSTALL_DIR")
    peano = Path(peano_dir) if peano_dir else _peano_in_site_packages()
    if peano is None or not (peano / "bin" / "clang++").is_file():
        raise ToolMissingError(
            "Peano (llvm-aie's clang++) is not found"
            + (f" in PEANO_INSTALL_DIR={peano_dir}" if peano_dir else "")
            + "; install it with pip install -r utils/peano-requirements.txt of "
            f"mlir-aie {MLIR_AIE_RELEASE} (llvm-aie nightly wheels, GitHub release "
            f"assets), then set PEANO_INSTALL_DIR to its llvm-aie directory"
        )
    include = env.get("MLIR_AIE_INCLUDE_DIR")
    inc = Path(include) if include else _aie_include(aiecc)
    if inc is None:
        raise ToolMissingError(
            "mlir-aie's include directory (aie_api headers) is not found; set "
            "MLIR_AIE_INCLUDE_DIR to <mlir_aie>/include"
        )
    style = env.get("IRON_AIECC_FLAGS", "get")
    if style not in STYLES:
        raise ValueError(f"IRON_AIECC_FLAGS={style!r} is not one of {STYLES}")
    versions = {
        "aiecc": version([aiecc, "--version"]),
        "peano": version([str(peano / "bin" / "clang++"), "--version"]),
    }
    for problem in supported_problems(versions):
        # Named before anything builds (a refusal would block a supported
        # tool whose version line reads differently than assumed here).
        logger.warning("unsupported NPU toolchain: %s", problem)
    return Toolchain(aiecc, peano, inc, versions, style)


def peano_command(tc: Toolchain, dev: Device, source: Path, output: Path) -> list[str]:
    """The Peano command compiling one kernel source for ``dev``."""
    return [
        str(tc.clang),
        "-O2",
        "-std=c++20",
        f"--target={dev.arch}-none-unknown-elf",
        *_WARNINGS,
        *_NO_ADF,
        "-DNDEBUG",
        *_STACK_USAGE,
        "-I",
        str(tc.aie_include),
        "-I",
        str(kernels.KERNEL_DIR),
        "-c",
        str(source),
        "-o",
        str(output),
    ]


def aiecc_command(tc: Toolchain, dev: Device, design: Path, tmpdir: Path) -> list[str]:
    """The aiecc command building ``design`` for ``dev`` in the toolchain's spelling."""
    if tc.style == "get":
        outputs = (
            ["--get-full-elf", f"--full-elf-name={_ELF}"]
            if dev.full_elf
            else [
                "--get-xclbin",
                f"--xclbin-name={_XCLBIN}",
                "--get-npu-insts",
                f"--npu-insts-name={_INSTS}",
            ]
        )
        return [
            tc.aiecc,
            f"--peano={tc.peano}",
            f"--tmpdir={tmpdir}",
            *outputs,
            str(design),
        ]
    outputs = (
        ["--generate-full-elf", f"--full-elf-name={_ELF}"]
        if dev.full_elf
        else [
            "--aie-generate-xclbin",
            f"--xclbin-name={_XCLBIN}",
            "--aie-generate-npu-insts",
            f"--npu-insts-name={_INSTS}",
        ]
    )
    return [
        tc.aiecc,
        "--no-xchesscc",
        "--no-xbridge",
        "--no-compile-host",
        f"--peano={tc.peano}",
        f"--tmpdir={tmpdir}",
        *outputs,
        str(design),
    ]


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$IRON_CACHE``, else ``~/.cache/iron``."""
    env = os.environ if env is None else env
    root = env.get("IRON_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "iron"


def cache_key(
    text: str,
    sources: Mapping[str, bytes],
    versions: Mapping[str, str],
    device: str,
    style: str,
) -> str:
    """The hash of everything a build depends on (sha256, hex)."""
    h = hashlib.sha256()
    parts = {
        "release": MLIR_AIE_RELEASE,
        "device": device,
        "style": style,
        "versions": dict(sorted(versions.items())),
        "design": text,
    }
    h.update(json.dumps(parts, sort_keys=True).encode())
    for name in sorted(sources):
        h.update(f"\0{name}\0".encode() + sources[name])
    return h.hexdigest()


def _sources(design: Design) -> dict[str, bytes]:
    found = {f"{s}.cc": kernels.source(s).read_bytes() for s in design.kernels}
    for header in kernels.HEADERS:
        found[header] = (kernels.KERNEL_DIR / header).read_bytes()
    return found


def _built(design: Design, key: str, where: Path) -> Built:
    if as_device(design.device).full_elf:
        return Built(key, where, design, None, None, where / _ELF, "main:sequence")
    return Built(key, where, design, where / _XCLBIN, where / _INSTS, None, "MLIR_AIE")


def build(
    design: Design,
    toolchain: Toolchain | None = None,
    *,
    runner: Runner = _run,
    cache: Path | None = None,
) -> Built:
    """Build ``design`` (or find it in the cache).

    Raises:
        ToolMissingError: aiecc or Peano is absent (when no toolchain is given).
        BuildError: A command failed, or did not write what it should.
    """
    tc = toolchain or find_toolchain()
    dev = as_device(design.device)
    key = cache_key(design.text, _sources(design), tc.versions, dev.name, tc.style)
    root = (cache or cache_dir()) / "npu"
    final = root / key
    if (final / "manifest.json").is_file():
        return _built(design, key, final)
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{key[:12]}.", dir=root))
    try:
        for symbol in design.kernels:
            runner(
                peano_command(tc, dev, kernels.source(symbol), work / f"{symbol}.o"),
                work,
            )
            check_stack(symbol, work / f"{symbol}.su")
        (work / "design.mlir").write_text(design.text, encoding="utf-8")
        runner(aiecc_command(tc, dev, work / "design.mlir", work / "aiecc.prj"), work)
        made = _built(design, key, work)
        lacking = [
            p.name for p in (made.xclbin, made.insts, made.elf) if p and not p.is_file()
        ]
        if lacking:
            raise BuildError(
                f"aiecc finished for {design.operator} on {dev} but did not write "
                f"{', '.join(lacking)} in {work}"
            )
        manifest = {
            "operator": design.operator,
            "device": dev.name,
            "args": list(design.args),
        }
        (work / "manifest.json").write_text(
            json.dumps(manifest, indent=1), encoding="utf-8"
        )
        try:
            work.rename(final)
        except OSError:  # another thread or process finished the same key first
            shutil.rmtree(work, ignore_errors=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return _built(design, key, final)


def _bar(total: int, enabled: bool):
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    if not enabled:
        return None
    return tqdm(total=total, desc="aiecc", unit="design")


def build_all(
    designs: Iterable[Design],
    toolchain: Toolchain | None = None,
    *,
    runner: Runner = _run,
    cache: Path | None = None,
    jobs: int | None = None,
    progress: bool = True,
) -> list[Built]:
    """Build many designs in parallel threads, in order, with a progress bar.

    The bar is tqdm's when tqdm is installed (and ``progress``); the first
    failure is raised after the others finish.
    """
    todo = list(designs)
    tc = toolchain or find_toolchain()
    bar = _bar(len(todo), progress)

    def one(d: Design) -> Built:
        try:
            return build(d, tc, runner=runner, cache=cache)
        finally:
            if bar is not None:
                bar.update(1)

    try:
        with ThreadPoolExecutor(
            max_workers=jobs or min(8, os.cpu_count() or 1)
        ) as pool:
            futures = [pool.submit(one, d) for d in todo]
            return [f.result() for f in futures]
    finally:
        if bar is not None:
            bar.close()
