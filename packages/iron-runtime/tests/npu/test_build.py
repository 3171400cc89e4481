"""The build: exact command lines (never run), the cache, the missing tools.

A fake runner records each command and writes what aiecc would, so builds
go through the cache logic without Peano or aiecc installed.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from iron.core.device import NPU1, NPU2
from iron.operators import AXPY, ReLU, SiLU
from iron.runtime.npu import build, kernels
from iron.runtime.npu.designs import build_design


@pytest.fixture
def tc(tmp_path) -> build.Toolchain:
    return build.Toolchain(
        aiecc="/opt/mlir_aie/bin/aiecc",
        peano=Path("/opt/llvm-aie"),
        aie_include=Path("/opt/mlir_aie/include"),
        versions={"aiecc": "aiecc 1.4.1", "peano": "clang version 21.0.0"},
    )


class FakeRunner:
    """Records commands; writes the outputs the command names.

    For a Peano line with ``-fstack-usage`` it writes the ``.su`` file clang
    would (next to the object, one ``static`` frame of ``frame`` bytes per
    entry in ``frames``, clang's ``<file>:<function>`` form without debug
    information), or ``su`` verbatim when given.
    """

    def __init__(self, frame: int = 64, su: str | None = None) -> None:
        self.commands: list[tuple[list[str], Path]] = []
        self.lock = threading.Lock()
        self.frame = frame
        self.su = su

    def __call__(self, argv, cwd: Path) -> None:
        with self.lock:
            self.commands.append((list(argv), cwd))
        if "-o" in argv:
            obj = Path(argv[argv.index("-o") + 1])
            obj.write_bytes(b"obj")
            if "-fstack-usage" in argv:
                src = argv[argv.index("-c") + 1]
                text = self.su
                if text is None:
                    text = f"{src}:{obj.stem}\t{self.frame}\tstatic\n"
                obj.with_suffix(".su").write_text(text, encoding="utf-8")
        for a in argv:
            for flag in ("--xclbin-name=", "--npu-insts-name=", "--full-elf-name="):
                if a.startswith(flag):
                    (cwd / a[len(flag) :]).write_bytes(b"\0\0\0\0")


def test_peano_command_is_the_pinned_flags(tc, tmp_path):
    """mlir-aie v1.4.1's own Peano flags (makefile-common PEANOWRAP2_FLAGS):
    the five warning flags and NO_ADF_FLAGS, without which every aie_api
    kernel fails on ``'adf.h' file not found`` (issue 15, failure 1)."""
    src, out = Path("/k/relu_bf16.cc"), Path("/b/relu_bf16.o")
    assert build.peano_command(tc, NPU1, src, out) == [
        "/opt/llvm-aie/bin/clang++",
        "-O2",
        "-std=c++20",
        "--target=aie2-none-unknown-elf",
        "-Wno-parentheses",
        "-Wno-attributes",
        "-Wno-macro-redefined",
        "-Wno-empty-body",
        "-Wno-missing-template-arg-list-after-template-kw",
        "-D__AIE_API_AIE_ADF_HPP__",
        "-DNDEBUG",
        "-fstack-usage",
        "-I",
        "/opt/mlir_aie/include",
        "-I",
        str(kernels.KERNEL_DIR),
        "-c",
        "/k/relu_bf16.cc",
        "-o",
        "/b/relu_bf16.o",
    ]
    assert "--target=aie2p-none-unknown-elf" in build.peano_command(tc, NPU2, src, out)


def test_aiecc_commands_in_the_pinned_spelling(tc):
    d, t = Path("/b/design.mlir"), Path("/b/aiecc.prj")
    assert build.aiecc_command(tc, NPU1, d, t) == [
        "/opt/mlir_aie/bin/aiecc",
        "--peano=/opt/llvm-aie",
        "--tmpdir=/b/aiecc.prj",
        "--get-xclbin",
        "--xclbin-name=final.xclbin",
        "--get-npu-insts",
        "--npu-insts-name=insts.bin",
        "/b/design.mlir",
    ]
    assert build.aiecc_command(tc, NPU2, d, t) == [
        "/opt/mlir_aie/bin/aiecc",
        "--peano=/opt/llvm-aie",
        "--tmpdir=/b/aiecc.prj",
        "--get-full-elf",
        "--full-elf-name=aie.elf",
        "/b/design.mlir",
    ]


def test_aiecc_commands_in_the_older_spelling(tc):
    old = build.Toolchain(tc.aiecc, tc.peano, tc.aie_include, tc.versions, "generate")
    d, t = Path("/b/design.mlir"), Path("/b/aiecc.prj")
    assert build.aiecc_command(old, NPU1, d, t) == [
        "/opt/mlir_aie/bin/aiecc",
        "--no-xchesscc",
        "--no-xbridge",
        "--no-compile-host",
        "--peano=/opt/llvm-aie",
        "--tmpdir=/b/aiecc.prj",
        "--aie-generate-xclbin",
        "--xclbin-name=final.xclbin",
        "--aie-generate-npu-insts",
        "--npu-insts-name=insts.bin",
        "/b/design.mlir",
    ]
    assert "--generate-full-elf" in build.aiecc_command(old, NPU2, d, t)


def test_cache_key_changes_with_each_input():
    base = dict(
        text="module {}",
        sources={"a.cc": b"int x;"},
        versions={"aiecc": "1", "peano": "2"},
        device="npu1",
        style="get",
    )
    key = build.cache_key(**base)
    assert key == build.cache_key(**base)
    for change in (
        {"text": "module { }"},
        {"sources": {"a.cc": b"int y;"}},
        {"sources": {"b.cc": b"int x;"}},
        {"versions": {"aiecc": "1", "peano": "3"}},
        {"device": "npu2"},
        {"style": "generate"},
    ):
        assert build.cache_key(**{**base, **change}) != key, change


def test_cache_dir(tmp_path):
    assert build.cache_dir({"IRON_CACHE": str(tmp_path)}) == tmp_path
    assert build.cache_dir({}) == Path.home() / ".cache" / "iron"


def test_build_runs_peano_then_aiecc_and_caches(tc, tmp_path):
    runner = FakeRunner()
    design = build_design(AXPY(size=2048, scalar_factor=2.0), NPU1)
    built = build.build(design, tc, runner=runner, cache=tmp_path)
    (peano, _), (aiecc, cwd) = runner.commands
    assert peano[0].endswith("clang++") and peano[-1].endswith("axpy_bf16.o")
    assert aiecc[0] == tc.aiecc and aiecc[-1].endswith("design.mlir")
    assert built.directory == tmp_path / "npu" / built.key
    assert built.xclbin.is_file() and built.insts.is_file() and built.elf is None
    assert built.kernel == "MLIR_AIE"
    assert (built.directory / "design.mlir").read_text() == design.text
    again = build.build(design, tc, runner=runner, cache=tmp_path)
    assert again.key == built.key and len(runner.commands) == 2  # a cache hit


def test_npu2_builds_a_full_elf(tc, tmp_path):
    built = build.build(
        build_design(ReLU(size=2048), NPU2), tc, runner=FakeRunner(), cache=tmp_path
    )
    assert (
        built.elf.is_file() and built.xclbin is None and built.kernel == "main:sequence"
    )


def test_a_build_that_writes_nothing_fails_and_leaves_no_entry(tc, tmp_path):
    def lazy(argv, cwd):
        if "-o" in argv:
            obj = Path(argv[argv.index("-o") + 1])
            obj.write_bytes(b"obj")
            obj.with_suffix(".su").write_text("relu.cc:relu_bf16\t8\tstatic\n")

    with pytest.raises(build.BuildError, match="did not write final.xclbin, insts.bin"):
        build.build(
            build_design(ReLU(size=2048), NPU1), tc, runner=lazy, cache=tmp_path
        )
    assert list((tmp_path / "npu").iterdir()) == []


def test_build_all_in_parallel_keeps_order(tc, tmp_path):
    runner = FakeRunner()
    designs = [
        build_design(op, NPU1)
        for op in (ReLU(size=2048), SiLU(size=4096), AXPY(size=1024, scalar_factor=3.0))
    ]
    built = build.build_all(
        designs, tc, runner=runner, cache=tmp_path, jobs=3, progress=False
    )
    assert [b.design for b in built] == designs
    assert len(runner.commands) == 6


def test_missing_aiecc_is_named():
    with pytest.raises(build.ToolMissingError) as info:
        build.find_toolchain(env={}, which=lambda name: None)
    text = str(info.value)
    assert (
        "aiecc" in text
        and "v1.4.1" in text
        and "AIECC" in text
        and "not on PyPI" in text
    )


def test_missing_peano_is_named(tmp_path):
    with pytest.raises(build.ToolMissingError, match="Peano .* PEANO_INSTALL_DIR"):
        build.find_toolchain(
            env={"PEANO_INSTALL_DIR": str(tmp_path)},
            which=lambda name: "/usr/bin/aiecc",
        )


def test_found_toolchain(tmp_path):
    peano = tmp_path / "llvm-aie"
    (peano / "bin").mkdir(parents=True)
    (peano / "bin" / "clang++").write_text("")
    include = tmp_path / "include"
    env = {
        "AIECC": "/x/aiecc",
        "PEANO_INSTALL_DIR": str(peano),
        "MLIR_AIE_INCLUDE_DIR": str(include),
    }
    seen = []
    tc = build.find_toolchain(
        env=env, which=lambda n: None, version=lambda argv: seen.append(argv) or "v"
    )
    assert tc.aiecc == "/x/aiecc" and tc.clang == peano / "bin" / "clang++"
    assert tc.style == "get" and seen == [
        ["/x/aiecc", "--version"],
        [str(peano / "bin" / "clang++"), "--version"],
    ]
    with pytest.raises(ValueError, match="IRON_AIECC_FLAGS='new'"):
        build.find_toolchain(
            env={**env, "IRON_AIECC_FLAGS": "new"},
            which=lambda n: None,
            version=lambda a: "v",
        )


def test_an_unsupported_tool_version_is_named_before_building(tmp_path, caplog):
    """Issue 15: a different mlir-aie or Peano is named when the toolchain is
    found, not met later as a parser error."""
    peano = tmp_path / "llvm-aie"
    (peano / "bin").mkdir(parents=True)
    (peano / "bin" / "clang++").write_text("")
    env = {
        "AIECC": "/x/aiecc",
        "PEANO_INSTALL_DIR": str(peano),
        "MLIR_AIE_INCLUDE_DIR": str(tmp_path),
    }
    lines = {
        "/x/aiecc": "aiecc 1.4.4",
        str(peano / "bin" / "clang++"): "clang version 19.1.0",
    }
    with caplog.at_level("WARNING", logger="iron.runtime.npu.build"):
        build.find_toolchain(
            env=env, which=lambda n: None, version=lambda a: lines[a[0]]
        )
    text = caplog.text
    assert "aiecc reports 'aiecc 1.4.4'; IRON supports mlir-aie 1.4.1" in text
    assert "llvm-aie 21.0.0.2026080301+c9c5ecb7" in text
    caplog.clear()
    lines["/x/aiecc"] = "aiecc version 1.4.1"
    lines[str(peano / "bin" / "clang++")] = "clang version 21.0.0 (llvm-aie c9c5ecb7)"
    with caplog.at_level("WARNING", logger="iron.runtime.npu.build"):
        build.find_toolchain(
            env=env, which=lambda n: None, version=lambda a: lines[a[0]]
        )
    assert "unsupported" not in caplog.text


# -- the stack check (-fstack-usage) ----------------------------------------------

#: A .su file as clang writes it for an AIE object (AsmPrinter::emitStackUsage:
#: ``<file>:<line>:<function>`` with debug information, else
#: ``<module>:<function>``; mangled C++ names; static or dynamic).
CLANG_SU = (
    "/k/rms_norm_bf16.cc:15:rms_norm_bf16\t224\tstatic\n"
    "/k/rms_norm_bf16.cc:_ZN4iron5rsqrtEf\t96\tstatic\n"
)


def test_stack_usage_reads_clangs_and_gccs_formats(tmp_path):
    su = tmp_path / "k.su"
    su.write_text(
        CLANG_SU
        + "/k/x.cc:12:5:iron::vf32 iron::rsqrt(float)\t784\tstatic\n"
        + "/k/x.cc:31:17:void f(int)\t1392\tdynamic,bounded\n"
        + "C:/k/y.cc:g\t16\tdynamic\n",
        encoding="utf-8",
    )
    frames = build.stack_usage(su)
    assert [(f.where, f.function, f.bytes, f.dynamic) for f in frames] == [
        ("/k/rms_norm_bf16.cc:15", "rms_norm_bf16", 224, False),
        ("/k/rms_norm_bf16.cc", "_ZN4iron5rsqrtEf", 96, False),
        ("/k/x.cc:12:5", "iron::vf32 iron::rsqrt(float)", 784, False),
        ("/k/x.cc:31:17", "void f(int)", 1392, True),
        ("C:/k/y.cc", "g", 16, True),
    ]


@pytest.mark.parametrize(
    "line",
    [
        "f\t12\tstatic",  # no location
        "/k/a.cc:f\t12",  # no qualifier
        "/k/a.cc:f\ttwelve\tstatic",
        "/k/a.cc:f\t12\tstatic\textra",
        "/k/a.cc:f\t12\tunknown",
    ],
)
def test_stack_usage_refuses_a_line_out_of_format(tmp_path, line):
    su = tmp_path / "k.su"
    su.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"k\.su:1: .* is not a stack-usage line"):
        build.stack_usage(su)


def test_a_kernel_within_its_declared_stack_passes(tmp_path):
    su = tmp_path / "rms_norm_bf16.su"
    su.write_text(CLANG_SU, encoding="utf-8")
    assert kernels.contract("rms_norm_bf16").stack_bytes >= 320
    assert build.check_stack("rms_norm_bf16", su) == 224 + 96


def test_a_kernel_over_its_declared_stack_is_refused_by_name(tmp_path):
    """Issue 15 (core stack): the frames Peano measures are held to the
    contract's figure, the sum over the object (no kernel recurses)."""
    declared = kernels.contract("rms_norm_bf16").stack_bytes
    su = tmp_path / "rms_norm_bf16.su"
    su.write_text(
        f"/k/rms_norm_bf16.cc:rms_norm_bf16\t{declared - 64}\tstatic\n"
        "/k/rms_norm_bf16.cc:_ZN4iron5rsqrtEf\t96\tstatic\n",
        encoding="utf-8",
    )
    with pytest.raises(build.StackError) as info:
        build.check_stack("rms_norm_bf16", su)
    text = str(info.value)
    assert f"kernel rms_norm_bf16: Peano measures {declared + 32} bytes" in text
    assert f"its contract declares {declared}" in text
    assert "raise the figure on the 'stack:' line of" in text
    assert f"rms_norm_bf16.cc to at least {declared + 32} bytes" in text
    assert isinstance(info.value, RuntimeError)


def test_a_dynamic_frame_is_refused_whatever_its_size(tmp_path):
    su = tmp_path / "emit.su"
    su.write_text("/k/emit.cc:iron_emit\t8\tdynamic\n", encoding="utf-8")
    with pytest.raises(
        build.StackError, match=r"kernel emit .*dynamic frame.*iron_emit"
    ):
        build.check_stack("emit", su)


def test_no_su_file_is_a_build_error_naming_the_flag(tmp_path):
    with pytest.raises(build.BuildError, match=r"no stack-usage file .*-fstack-usage"):
        build.check_stack("emit", tmp_path / "emit.su")


def test_the_build_checks_each_kernels_frames_after_compiling(tc, tmp_path):
    """Through build(): Peano's line carries -fstack-usage, and a kernel whose
    .su exceeds its contract stops the build before aiecc, leaving no entry."""
    design = build_design(AXPY(size=2048, scalar_factor=2.0), NPU1)
    declared = kernels.contract("axpy_bf16").stack_bytes
    over = FakeRunner(frame=declared + 4)
    with pytest.raises(build.StackError, match=f"kernel axpy_bf16: .*{declared + 4}"):
        build.build(design, tc, runner=over, cache=tmp_path)
    assert len(over.commands) == 1 and "-fstack-usage" in over.commands[0][0]
    assert list((tmp_path / "npu").iterdir()) == []
    fine = FakeRunner(frame=declared)
    assert build.build(design, tc, runner=fine, cache=tmp_path).xclbin.is_file()
