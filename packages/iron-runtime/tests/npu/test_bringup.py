"""The bring-up ladder (iron.runtime.npu.bringup): its dry run, and a real run
where nothing is present (this machine), which stops at the first rung."""

from __future__ import annotations

import io
import re
import subprocess
import sys

import pytest

from iron.runtime.npu import bringup

#: mlir-aie v1.4.1's own Peano flags (programming_examples/makefile-common
#: PEANOWRAP2_FLAGS: WARNING_FLAGS, NO_ADF_FLAGS, -DNDEBUG), then IRON's own
#: -fstack-usage (the frames the build holds to each kernel's contract).
PINNED = (
    "-O2 -std=c++20 --target={arch}-none-unknown-elf -Wno-parentheses "
    "-Wno-attributes -Wno-macro-redefined -Wno-empty-body "
    "-Wno-missing-template-arg-list-after-template-kw -D__AIE_API_AIE_ADF_HPP__ "
    "-DNDEBUG -fstack-usage -I $MLIR_AIE_INCLUDE_DIR"
)


def _dry(tmp_path, monkeypatch, *argv):
    for env in ("AIECC", "PEANO_INSTALL_DIR", "MLIR_AIE_INCLUDE_DIR"):
        monkeypatch.delenv(env, raising=False)
    out = io.StringIO()
    report = tmp_path / "report.txt"
    code = bringup.main(["--dry-run", "--report", str(report), *argv], stdout=out)
    return code, out.getvalue(), report.read_text(encoding="utf-8")


def test_the_dry_run_prints_every_rungs_commands_with_the_pinned_flags(
    tmp_path, monkeypatch
):
    code, text, report = _dry(tmp_path, monkeypatch, "--device", "npu2")
    assert code == 0 and report == text
    heads = re.findall(r"^\[(\d+)/10\] ([\w-]+):", text, re.M)
    assert [name for _, name in heads] == [r.name for r in bringup.RUNGS]
    assert "  $ xrt-smi examine" in text
    assert "  $ aiecc --version" in text
    peano = [line for line in text.splitlines() if "clang++ -O2" in line]
    aiecc = [line for line in text.splitlines() if " aiecc --peano=" in line]
    assert peano and aiecc
    for line in peano:
        assert PINNED.format(arch="aie2p") in line
    for line in aiecc:
        assert "--get-full-elf --full-elf-name=aie.elf" in line
    # every rung that builds shows its kernels and its aiecc line
    for name in ("axpy", "rmsnorm", "gemv", "graph", "per-call", "emit"):
        block = text.split(f"] {name}:")[1].split("\n[")[0]
        assert "clang++" in block and "aiecc --peano" in block, name
    assert "axpy_bf16.cc" in text and "rms_norm_bf16.cc" in text


def test_the_dry_run_on_npu1_builds_xclbins_and_skips_the_emit_loop(
    tmp_path, monkeypatch
):
    code, text, _ = _dry(
        tmp_path, monkeypatch, "--device", "npu1", "--only", "axpy", "emit"
    )
    assert code == 0
    assert "emit: an Emit loop" in text and "SKIP (not on npu1)" in text
    (peano,) = [line for line in text.splitlines() if "clang++ -O2" in line]
    assert PINNED.format(arch="aie2") in peano
    assert "--get-xclbin --xclbin-name=final.xclbin --get-npu-insts" in text


def test_without_an_npu_the_ladder_stops_at_the_first_rung(tmp_path, monkeypatch):
    from iron.runtime import xrt

    monkeypatch.setattr(xrt, "missing", lambda: ["the pyxrt module (test)"])
    out = io.StringIO()
    report = tmp_path / "r.txt"
    code = bringup.main(["--device", "npu2", "--report", str(report)], stdout=out)
    text = out.getvalue()
    assert code == 1
    assert re.search(
        r"\[1/10\] driver: .*: FAIL \(\d+\.\d+ s\): RuntimeError: "
        r"this machine lacks the pyxrt module \(test\)",
        text,
    )
    assert "versions:" in text and "mlir-aie 1.4.1" in text
    assert "[2/10]" not in text  # stopped there
    assert report.read_text(encoding="utf-8") == text


def test_versions_are_checked_by_name():
    good = {
        "aiecc": "aiecc (mlir-aie 1.4.1, 601fc859532f)",
        "peano": "clang version 21.0.0 (https://github.com/Xilinx/llvm-aie c9c5ecb7)",
    }
    assert bringup.supported_problems(good) == []
    bad = {"aiecc": "aiecc 1.4.4", "peano": "clang version 19.0.0"}
    problems = bringup.supported_problems(bad)
    assert len(problems) == 2
    assert "aiecc reports 'aiecc 1.4.4'; IRON supports mlir-aie 1.4.1" in problems[0]
    assert "llvm-aie 21.0.0.2026080301+c9c5ecb7" in problems[1]


def test_the_module_runs_as_a_script(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "iron.runtime.npu.bringup",
            "--dry-run",
            "--device",
            "npu2",
            "--only",
            "driver",
            "axpy",
            "--report",
            str(tmp_path / "r.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "-D__AIE_API_AIE_ADF_HPP__" in done.stdout


def test_the_dry_run_shows_each_kernels_stack_check_and_its_cores_stack(
    tmp_path, monkeypatch
):
    """Issue 15 (core stack): every Peano line carries -fstack-usage and is
    followed by what the build checks of its .su file against the kernel's
    contract, and the stack_size the design's cores state."""
    from iron.runtime.npu import kernels

    code, text, _ = _dry(tmp_path, monkeypatch, "--device", "npu2")
    assert code == 0
    lines = text.splitlines()
    peano = [i for i, line in enumerate(lines) if "clang++ -O2" in line]
    assert peano
    for i in peano:
        assert " -fstack-usage " in lines[i]
        symbol = re.search(r"/(\w+)\.o$", lines[i]).group(1)
        declared = kernels.contract(symbol).stack_bytes
        assert re.fullmatch(
            rf"  # then \S+/{symbol}\.su: every frame static, their sum at most "
            rf"{declared} bytes \(the stack: line of {symbol}\.cc\); the design's "
            rf"aie\.core stack_size is \d+",
            lines[i + 1],
        ), lines[i + 1]


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_the_dry_run_says_which_upstream_rules_each_rungs_designs_passed(
    tmp_path, monkeypatch, dev
):
    """Issue 28 item 4: under every rung that builds, the rules of
    iron.runtime.npu.verify its designs' text was checked against, and zero
    violations."""
    from iron.runtime.npu import verify

    code, text, _ = _dry(tmp_path, monkeypatch, "--device", dev)
    assert code == 0
    names = ", ".join(verify.rule_names())
    for name in ("axpy", "rmsnorm", "gemv", "graph", "per-call"):
        block = text.split(f"] {name}:")[1].split("\n[")[0]
        assert f"{names}: 0 violation(s)" in block, (name, block[-400:])
    assert "VIOLATION" not in text


def test_the_dry_run_fails_and_names_a_design_that_breaks_a_rule(tmp_path, monkeypatch):
    from iron.runtime.npu import verify

    def broken(text, dev, **kw):  # a seeded violation in every design
        return [
            verify.Violation(
                "task-queue", "main", "aiex.npu.dma_memcpy_nd #5", "5 transfers"
            )
        ]

    monkeypatch.setattr(verify, "check_text", broken)
    code, text, _ = _dry(tmp_path, monkeypatch, "--device", "npu2", "--only", "axpy")
    assert code == 1
    assert (
        "# VIOLATION [task-queue] @main: aiex.npu.dma_memcpy_nd #5: 5 transfers" in text
    )
