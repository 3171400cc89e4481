"""The NPU bring-up ladder: ``python -m iron.runtime.npu.bringup``.

Run this first on a machine with a Ryzen AI NPU. It climbs rungs in order
and stops at the first that fails:

1. ``driver``: the amdxdna driver, an NPU device node and pyxrt are present,
   and XRT names an NPU IRON knows (:func:`iron.runtime.xrt.detect`);
2. ``toolchain``: aiecc, Peano and mlir-aie's headers are found
   (:func:`iron.runtime.npu.build.find_toolchain`) and their versions are the
   supported ones (:data:`SUPPORTED`), checked by name before anything builds;
3. ``axpy``: one AXPY design built and run by hand through the driver;
4. ``rmsnorm``: RMSNorm through the operator call;
5. ``gemv``: GEMV through the operator call;
6. ``graph``: a two-step graph (RMSNorm then GEMV);
7. ``per-call``: a four-step graph reading a per-call row of a held table
   (the scratchpad's words; one full ELF on npu2);
8. ``emit``: a carried loop whose Emit step feeds the next run on the device
   (npu2; npu1 has no full ELF and is skipped);
9. ``tiny-llama``: the embedded tiny Llama's decode step, judged by
   :func:`judge_decode` (every step within its operator's tolerance, the
   full version equal to the per-step one, the greedy token the host
   reference's where its margin is clear; needs iron-lm);
10. ``llama-1b``: one Llama-3.2-1B decode step, judged the same way (needs
    ``--checkpoint``).

Each rung prints PASS or FAIL with its time; a failure prints the exact
commands the rung ran, their output and the versions found. The whole run
goes to one report file (``--report``, default ``iron-bringup-report.txt``)
to attach to a bug report.

``--dry-run`` runs nothing on a device or tool: it prints every command the
rungs would run (each design's Peano and aiecc lines, from
:func:`~iron.runtime.npu.build.peano_command` and
:func:`~iron.runtime.npu.build.aiecc_command`), with the toolchain taken
from ``AIECC``, ``PEANO_INSTALL_DIR`` and ``MLIR_AIE_INCLUDE_DIR`` where set
and placeholders otherwise. Under each rung it prints which upstream rules
(:data:`iron.runtime.npu.verify.RULES`) its designs' emitted text was checked
against and how many violations it found, each named; it exits 0 when there
are none, else 1.

What the ladder cannot tell: timing (nothing here is a benchmark), and
which of several failing kernels is at fault beyond the first rung that
stops it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import io
import logging
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np

import iron  # the rungs' graphs annotate with iron.Scratchpad / iron.Carried
from iron.core.device import Device, as_device
from iron.runtime.npu.build import SUPPORTED, supported_problems

__all__ = [
    "RUNGS",
    "SUPPORTED",
    "TOKEN_MARGIN",
    "Rung",
    "judge_decode",
    "main",
    "supported_problems",
]


@dataclasses.dataclass(frozen=True)
class Rung:
    """One rung of the ladder.

    Attributes:
        name: Its short name (``axpy``).
        title: What it checks, in words.
        designs: The designs it builds on a device (for the dry run's
            commands); None for a rung that builds nothing.
        run: Runs it on a device; raises on failure.
        devices: The devices it applies to.
    """

    name: str
    title: str
    designs: Callable[[Device], list[Any]] | None
    run: Callable[[Device, argparse.Namespace], None]
    devices: tuple[str, ...] = ("npu1", "npu2")


# -- what each rung builds and runs ---------------------------------------------


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _bf16(a: np.ndarray) -> np.ndarray:
    from ml_dtypes import bfloat16

    return np.asarray(a).astype(bfloat16)


def _axpy():
    from iron.operators import AXPY

    return AXPY(size=4096, scalar_factor=1.5)


def _rmsnorm():
    from iron.operators import RMSNorm

    return RMSNorm(rows=8, cols=2048)


def _gemv():
    from iron.operators import GEMV

    return GEMV(M=512, K=512)


def _op_designs(make: Callable[[], Any]) -> Callable[[Device], list[Any]]:
    def designs(dev: Device) -> list[Any]:
        from iron.runtime.npu.designs import build_design

        return [build_design(make(), dev)]

    return designs


def _check(got: np.ndarray, op: Any, *inputs: np.ndarray) -> None:
    from iron.core.tolerance import compare

    verdict = compare(np.asarray(got), op.reference(*inputs), op.tolerance(*inputs))
    if not verdict:
        raise AssertionError(f"{type(op).__name__} is off its reference: {verdict}")


def _run_axpy(dev: Device, args: argparse.Namespace) -> None:
    """The driver alone: one built design, buffers bound by name, one run."""
    from iron.runtime import xrt
    from iron.runtime.npu import build
    from iron.runtime.npu.designs import build_design

    op = _axpy()
    built = build.build(build_design(op, dev))
    device = xrt.XrtDevice(dev)
    x = _bf16(_rng(0).standard_normal(op.size))
    y = _bf16(_rng(1).standard_normal(op.size))
    bufs = {n: device.alloc(op.size * 2, n) for n in ("x", "y", "out")}
    bufs["x"].host()[:] = x.view(np.uint8)
    bufs["y"].host()[:] = y.view(np.uint8)
    for b in bufs.values():
        b.to_device()
    run = device.load(built).new_run()
    run.set_args(bufs)
    run.start()
    run.wait(timeout=args.timeout)
    bufs["out"].from_device()
    _check(bufs["out"].host().view(x.dtype), op, x, y)


def _run_op(make: Callable[[], Any]) -> Callable[[Device, argparse.Namespace], None]:
    def run(dev: Device, args: argparse.Namespace) -> None:
        import iron

        op = make()
        name = type(op).__name__
        if name == "RMSNorm":
            inputs = [_bf16(_rng(2).standard_normal((op.rows, op.cols)))]
        else:
            inputs = [
                _bf16(_rng(3).standard_normal((op.M, op.K)) / 16),
                _bf16(_rng(4).standard_normal(op.K)),
            ]
        with iron.use_device(dev.name):
            got = op(*inputs)
        _check(got, op, *inputs)

    return run


def _two_steps():
    import iron

    class TwoSteps(iron.Graph):
        """RMSNorm, then GEMV on its output."""

        def __init__(self) -> None:
            self.w = iron.weight(_bf16(_rng(5).standard_normal((256, 256)) / 16))

        def body(self, x):
            from iron.operators import GEMV, RMSNorm

            return GEMV.step(self.w, RMSNorm.step(x).reshape(-1))

    return TwoSteps()


def _per_call():
    import iron

    class PerCall(iron.Graph):
        """Four steps; the add reads row ``position`` of a held table."""

        def __init__(self) -> None:
            self.w = iron.weight(_bf16(_rng(6).standard_normal((256, 256)) / 16))
            self.table = iron.weight(_bf16(_rng(7).standard_normal((16, 256))))

        def body(self, x, *, position: iron.Scratchpad[int]):
            from iron.operators import GEMV, ElementwiseAdd, RMSNorm, SiLU

            h = RMSNorm.step(x)
            y = GEMV.step(self.w, h.reshape(-1))
            return SiLU.step(ElementwiseAdd.step(y, self.table[position].reshape(-1)))

    return PerCall()


def _walk():
    import iron

    class Walk(iron.Graph):
        """A loop on one carried value: each run rewrites a state from a table row."""

        def __init__(self) -> None:
            self.table = iron.weight(_bf16(_rng(8).standard_normal((16, 256))))
            self.out = iron.state((256,), self.table.dtype)

        def body(self, *, position: iron.Carried[int]):
            from iron.operators import SiLU

            SiLU.step(self.table[position].reshape(-1), out=self.out)
            return iron.carry(position=position + 1)

    return Walk()


def _graph_designs(recording: Any, dev: Device, *, check: bool = False) -> list[Any]:
    """The designs ``recording``'s planned images build on ``dev``.

    ``check``: as ``compile(check=True)`` plans them, one image per step.
    """
    import iron
    from iron.core.plan import plan
    from iron.runtime.image import build_images
    from iron.runtime.npu.graph import graph_design

    with iron.use_device(dev.name):
        p = plan(dev.name, recording, check=check)
    images = build_images(p, recording)
    extent = max(
        (b.offset + b.nbytes for b in p.buffers.values() if b.in_arena), default=0
    )
    found = [graph_design(im, dev, arena_bytes=-(-extent // 4) * 4) for im in images]
    return [g.design for g in found if g.design is not None]


def _record(make: Callable[[], Any], **shapes: Any) -> Callable[[Device], list[Any]]:
    def designs(dev: Device) -> list[Any]:
        import iron

        with iron.use_device(dev.name):
            recording = make().record(**shapes)
        return _graph_designs(recording, dev)

    return designs


def _run_graph(
    make: Callable[[], Any], positions: Sequence[int | None]
) -> Callable[[Device, argparse.Namespace], None]:
    def run(dev: Device, args: argparse.Namespace) -> None:
        import iron
        from iron.core.tolerance import compare

        graph = make()
        with iron.use_device(dev.name):
            for k, position in enumerate(positions):
                x = _bf16(_rng(10 + k).standard_normal((1, 256)))
                extra = {} if position is None else {"position": position}
                got = np.asarray(graph(x, **extra))
                want = graph.reference(x, **extra)
                verdict = compare(got, want, iron.Tolerance.bf16_ulps(8, atol=1e-2))
                if not verdict:
                    raise AssertionError(f"call {k} ({extra}): {verdict}")

    return run


def _emit_designs(dev: Device) -> list[Any]:
    import iron
    from iron.runtime import CarriedLoop
    from iron.runtime.npu.graph import graph_design

    with iron.use_device(dev.name):
        version = _walk().compile()
        CarriedLoop(version, version, depth=2)  # composes the Emit program
    extent = max(
        (b.offset + b.nbytes for b in version.plan.buffers.values() if b.in_arena),
        default=0,
    )
    return [
        graph_design(im, dev, arena_bytes=-(-extent // 4) * 4).design
        for im in version.images
    ]


def _run_emit(dev: Device, args: argparse.Namespace) -> None:
    import iron
    from iron.core.tolerance import compare
    from iron.operators import SiLU
    from iron.runtime import CarriedLoop

    graph = _walk()
    with iron.use_device(dev.name):
        version = graph.compile()
        loop = CarriedLoop(version, version, depth=2)
        loop.start(position=0)  # row 0, then the device carries 1, 2, 3
        for _ in loop.steps(3):
            pass
        got = np.asarray(version.read(graph.out))
    op = SiLU(size=256)
    row = np.asarray(graph.table.host)[3]
    verdict = compare(got, op.reference(row), op.tolerance(row))
    if not verdict:
        raise AssertionError(f"after 3 looped steps the state is off row 3: {verdict}")


def _tiny_model():
    from iron.lm.config import LlamaConfig
    from iron.lm.model import Llama
    from iron.lm.tiny import random_state_dict

    config = LlamaConfig.tiny()
    model = Llama(config)
    model.load_state_dict(random_state_dict(config))
    return model


def _tiny_designs(dev: Device) -> list[Any]:
    import iron

    with iron.use_device(dev.name):
        recording = _tiny_model().record()
    return _decode_designs(recording, dev)


def _decode_designs(recording: Any, dev: Device) -> list[Any]:
    """What :func:`judge_decode` builds: the version as users run it, then
    the per-step version ``compile(check=True)`` runs."""
    return [
        *_graph_designs(recording, dev),
        *_graph_designs(recording, dev, check=True),
    ]


#: The reference's top-2 logit margin above which the greedy token must be
#: the reference's; a nearer tie may fall either way within the steps'
#: tolerances (the oracle tests use the same margin).
TOKEN_MARGIN = 0.25


def judge_decode(model: Any, dev: Device) -> None:
    """One decode step on the device, judged by the operators' own contracts.

    1. Compiled with ``check=True``: each step runs on its own and is judged
       on the inputs the device gave it under its operator's ``tolerance()``;
       the first step outside raises ``StepCheckError`` naming it.
    2. Compiled as users run it (one full ELF on npu2): its logits must equal
       the checked version's bit for bit, as the same kernels run on the same
       inputs and only the packaging differs.
    3. The greedy token must be the host reference's where the reference's
       top-2 margin exceeds :data:`TOKEN_MARGIN`.

    Args:
        model: A Llama graph (``iron.lm.model.Llama``) with its weights bound.
        dev: The device to run on.

    Raises:
        StepCheckError: A step is outside its operator's tolerance (a
            ``ValueError`` naming the step).
        AssertionError: The packagings disagree, or the token is off where
            the margin is clear.
    """
    import iron

    values = {"token": 1, "position": 0, "n": 1, "seed": 0}
    with iron.use_device(dev.name):
        checked = model.compile(check=True)
        got_c, _ = checked(**values)
        got, carry = model.compile()(**values)
        want, carry_r = model.reference(**values)
    got_c = np.asarray(got_c, np.float32)  # bf16 -> float32 is exact
    got = np.asarray(got, np.float32)
    differ = (got != got_c) & ~(np.isnan(got) & np.isnan(got_c))
    if differ.any():
        at = np.flatnonzero(differ)
        raise AssertionError(
            f"the full version's logits differ from the per-step version's at "
            f"{at.size} of {got.size} positions (first at {int(at[0])}: "
            f"{float(got.flat[at[0]])!r} against {float(got_c.flat[at[0]])!r}): "
            f"the packaging changed a result"
        )
    top = np.sort(np.asarray(want, np.float32).ravel())[-2:]
    margin = float(top[1] - top[0])
    token, token_r = int(carry["token"]), int(carry_r["token"])
    if margin > TOKEN_MARGIN and token != token_r:
        raise AssertionError(
            f"greedy token {token}, the host reference's {token_r}, though the "
            f"reference's top-2 margin is {margin:.3g} (> {TOKEN_MARGIN})"
        )


def _run_tiny(dev: Device, args: argparse.Namespace) -> None:
    judge_decode(_tiny_model(), dev)


def _llama_1b_designs(dev: Device) -> list[Any]:
    from iron.lm.applications import application
    from iron.lm.applications.llama import DEFAULT_CONFIG
    from iron.lm.config import LlamaConfig

    config = LlamaConfig.from_json(DEFAULT_CONFIG)
    recording = application("llama").versions(config, dev)["decode"]
    return _decode_designs(recording, dev)


def _run_llama_1b(dev: Device, args: argparse.Namespace) -> None:
    if not args.checkpoint:
        raise _Skip("pass --checkpoint DIR (a Llama-3.2-1B Hugging Face directory)")
    from iron.lm.model import Llama

    judge_decode(Llama.from_pretrained(args.checkpoint), dev)


def _driver_designs(dev: Device) -> list[Any]:
    return []


def _run_driver(dev: Device, args: argparse.Namespace) -> None:
    from iron.runtime import xrt

    lacks = xrt.missing()
    if lacks:
        raise RuntimeError("this machine lacks " + "; ".join(lacks))
    found = xrt.detect()
    if found is None:
        raise RuntimeError(
            f"XRT reports an NPU IRON does not know; known names: {xrt.NPU_MODELS}"
        )
    if found != dev.name:
        raise RuntimeError(
            f"XRT reports an {found} NPU; the ladder was asked for {dev.name} "
            f"(drop --device, or pass --device {found})"
        )
    if dev.full_elf:
        x = importlib.import_module("pyxrt")
        if not (hasattr(x, "elf") and hasattr(x, "ext")):
            raise RuntimeError(
                f"this pyxrt lacks the full-ELF names (pyxrt.elf, pyxrt.ext) that "
                f"{dev.name} needs: XRT {SUPPORTED['xrt']}"
            )


def _run_toolchain(dev: Device, args: argparse.Namespace) -> None:
    from iron.runtime.npu import build

    tc = build.find_toolchain()
    _log.info("versions: %s", dict(tc.versions))
    problems = supported_problems(dict(tc.versions))
    if problems:
        raise RuntimeError("; ".join(problems))


class _Skip(Exception):
    """A rung that does not apply here (the reason is the message)."""


def _needs_lm(designs, run):
    def d(dev: Device) -> list[Any]:
        try:
            import iron.lm  # noqa: F401
        except ImportError:
            return []
        return designs(dev)

    def r(dev: Device, args: argparse.Namespace) -> None:
        try:
            import iron.lm  # noqa: F401
        except ImportError as e:
            raise _Skip(f"iron-lm is not installed ({e})") from e
        run(dev, args)

    return d, r


_tiny = _needs_lm(_tiny_designs, _run_tiny)
_big = _needs_lm(_llama_1b_designs, _run_llama_1b)

#: The ladder, bottom first.
RUNGS: tuple[Rung, ...] = (
    Rung("driver", "driver and XRT present, device detected", None, _run_driver),
    Rung(
        "toolchain",
        "aiecc, Peano and mlir-aie found, versions as supported",
        None,
        _run_toolchain,
    ),
    Rung("axpy", "AXPY alone, built and run by hand", _op_designs(_axpy), _run_axpy),
    Rung("rmsnorm", "RMSNorm", _op_designs(_rmsnorm), _run_op(_rmsnorm)),
    Rung("gemv", "GEMV", _op_designs(_gemv), _run_op(_gemv)),
    Rung(
        "graph",
        "a two-step graph (RMSNorm, GEMV)",
        _record(_two_steps, x=(1, 256)),
        _run_graph(_two_steps, [None, None]),
    ),
    Rung(
        "per-call",
        "per-call words: a table row chosen per call (one full ELF on npu2)",
        _record(_per_call, x=(1, 256)),
        _run_graph(_per_call, [0, 7, 15]),
    ),
    Rung(
        "emit",
        "an Emit loop: the device writes the next run's words",
        _emit_designs,
        _run_emit,
        devices=("npu2",),
    ),
    Rung("tiny-llama", "the tiny Llama decode against its reference", *_tiny),
    Rung("llama-1b", "one Llama-3.2-1B decode step", *_big),
)


# -- running ----------------------------------------------------------------------

_log = logging.getLogger("iron.runtime.npu.bringup")


class _Out:
    """Writes to the terminal and to the report."""

    def __init__(self, *streams: TextIO) -> None:
        self.streams = streams

    def __call__(self, text: str = "") -> None:
        for s in self.streams:
            s.write(text + "\n")
            s.flush()


@contextlib.contextmanager
def _captured() -> Iterator[io.StringIO]:
    """What the build and the ladder log while a rung runs (commands, output)."""
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(logging.Formatter("  %(message)s"))
    loggers = [logging.getLogger(n) for n in ("iron.runtime", _log.name)]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
    try:
        yield buf
    finally:
        for lg, level in zip(loggers, levels):
            lg.removeHandler(handler)
            lg.setLevel(level)


def _dry_toolchain(env: dict[str, str]) -> Any:
    from iron.runtime.npu import build

    return build.Toolchain(
        aiecc=env.get("AIECC") or shutil.which("aiecc") or "aiecc",
        peano=Path(env.get("PEANO_INSTALL_DIR", "$PEANO_INSTALL_DIR")),
        aie_include=Path(env.get("MLIR_AIE_INCLUDE_DIR", "$MLIR_AIE_INCLUDE_DIR")),
        versions={},
        style=env.get("IRON_AIECC_FLAGS", "get"),
    )


def _commands(designs: Sequence[Any], dev: Device, tc: Any) -> list[str]:
    """Every Peano and aiecc line building ``designs`` (each design once).

    After each Peano line, a ``#`` line says what the build then checks of
    its ``.su`` file (:func:`iron.runtime.npu.build.check_stack`) and the
    ``stack_size`` the design's cores state.
    """
    from iron.runtime.npu import build, kernels, legality

    lines, seen = [], set()
    for d in designs:
        if d.text in seen:
            continue
        seen.add(d.text)
        label = d.operator.split("(", 1)[0]
        work = Path("<cache>") / "npu" / f"<{len(seen)}:{label}>"
        for symbol in d.kernels:
            argv = build.peano_command(
                tc, dev, kernels.source(symbol), work / f"{symbol}.o"
            )
            lines.append(f"(cd {work}) " + " ".join(argv))
            declared = kernels.contract(symbol).stack_bytes
            # A full ELF of several steps has no one layout: each step's cores
            # state their own kernel's figure.
            stack = d.layout.stack_bytes or legality.core_stack(dev, (symbol,))
            lines.append(
                f"# then {work / f'{symbol}.su'}: every frame static, their sum at "
                f"most {declared} bytes (the stack: line of {symbol}.cc); the "
                f"design's aie.core stack_size is {stack}"
            )
        argv = build.aiecc_command(tc, dev, work / "design.mlir", work / "aiecc.prj")
        lines.append(f"(cd {work}) " + " ".join(argv))
    return lines


def _rules(designs: Sequence[Any], dev: Device, out: _Out) -> bool:
    """Print which upstream rules ``designs``' text was checked against; True
    if any design breaks one (:mod:`iron.runtime.npu.verify`)."""
    from iron.runtime.npu import verify

    if not designs:
        return False
    texts = list(dict.fromkeys(d.text for d in designs))
    found = [v for t in texts for v in verify.check_text(t, dev)]
    names = ", ".join(verify.rule_names())
    out(
        f"  # upstream rules checked on the text of {len(texts)} design(s): "
        f"{names}: {len(found)} violation(s)"
    )
    for v in found:
        out(f"  # VIOLATION {v}")
    return bool(found)


def _versions() -> list[str]:
    from iron.runtime.npu.mlir import MLIR_AIE_RELEASE

    found = [
        f"python {platform.python_version()} on {platform.platform()}",
        f"IRON pins mlir-aie {MLIR_AIE_RELEASE}; supported: "
        + ", ".join(f"{k} {v}" for k, v in SUPPORTED.items()),
    ]
    for env in ("IRON_DEVICE", "IRON_BACKEND", "AIECC", "PEANO_INSTALL_DIR"):
        found.append(f"{env}={os.environ.get(env, '(unset)')}")
    return found


def _device(args: argparse.Namespace, out: _Out) -> Device:
    if args.device:
        return as_device(args.device)
    from iron.runtime import xrt

    if not xrt.missing():
        try:
            found = xrt.detect()
        except Exception as e:  # noqa: BLE001 - reported, then the fallback
            out(f"device: XRT could not name the NPU ({e})")
            found = None
        if found:
            out(f"device: {found} (detected by XRT)")
            return as_device(found)
    name = os.environ.get("IRON_DEVICE") or "npu2"
    out(f"device: {name} (no NPU detected: IRON_DEVICE or npu2; pass --device)")
    return as_device(name)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m iron.runtime.npu.bringup",
        description="Climb the NPU bring-up ladder; stop at the first failing rung.",
    )
    p.add_argument("--dry-run", action="store_true", help="print commands only")
    p.add_argument("--device", choices=("npu1", "npu2"), help="default: detected")
    p.add_argument(
        "--report", default="iron-bringup-report.txt", help="the report file"
    )
    p.add_argument("--checkpoint", help="a Llama-3.2-1B directory (last rung)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds a run may take")
    p.add_argument(
        "--only", nargs="*", choices=[r.name for r in RUNGS], help="these rungs"
    )
    return p


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None) -> int:
    """Run the ladder (or print it, with ``--dry-run``).

    Args:
        argv: The command line's arguments (default ``sys.argv[1:]``).
        stdout: Where to print (default ``sys.stdout``).

    Returns:
        0 when every rung passed or was skipped (or a dry run whose designs
        break no upstream rule), else 1.
    """
    args = _parser().parse_args(argv)
    report = Path(args.report)
    with report.open("w", encoding="utf-8") as rep:
        out = _Out(stdout or sys.stdout, rep)
        out(f"IRON NPU bring-up {'(dry run) ' if args.dry_run else ''}")
        for line in _versions():
            out(f"  {line}")
        dev = _device(args, out)
        rungs = [r for r in RUNGS if not args.only or r.name in args.only]
        tc: Any = _dry_toolchain(dict(os.environ)) if args.dry_run else None
        failed = False
        for k, rung in enumerate(rungs, 1):
            head = f"[{k}/{len(rungs)}] {rung.name}: {rung.title}"
            if dev.name not in rung.devices:
                out(f"{head}: SKIP (not on {dev.name})")
                continue
            if args.dry_run:
                out(head)
                if rung.name == "driver":
                    out("  $ xrt-smi examine")
                if rung.name == "toolchain":
                    out(f"  $ {tc.aiecc} --version")
                    out(f"  $ {tc.clang} --version")
                designs = rung.designs(dev) if rung.designs else []
                for line in _commands(designs, dev, tc):
                    out(f"  {line}" if line.startswith("#") else f"  $ {line}")
                found = _rules(designs, dev, out)
                failed = failed or found
                continue
            start = time.perf_counter()
            with _captured() as log:
                try:
                    rung.run(dev, args)
                except _Skip as e:
                    out(f"{head}: SKIP ({e})")
                    continue
                except Exception as e:  # noqa: BLE001 - the report names it
                    took = time.perf_counter() - start
                    out(f"{head}: FAIL ({took:.2f} s): {type(e).__name__}: {e}")
                    out("  commands and output:")
                    out(log.getvalue().rstrip() or "  (none)")
                    out("  traceback:")
                    out(traceback.format_exc().rstrip())
                    out("  versions:")
                    for line in _versions():
                        out(f"  {line}")
                    if shutil.which("xrt-smi"):
                        done = subprocess.run(
                            ["xrt-smi", "examine"], capture_output=True, text=True
                        )
                        out("  $ xrt-smi examine")
                        out(done.stdout.rstrip())
                    failed = True
                    break
            took = time.perf_counter() - start
            out(f"{head}: PASS ({took:.2f} s)")
        out(f"report: {report.resolve()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
