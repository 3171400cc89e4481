"""Each core's stack (issue 15, "core stack"): declared by its kernels'
contracts, stated on every ``aie.core``, counted by legality, and the
declarations checked against a compiler's measured frames where one runs.

Peano is not here, so the build's own check (``build.check_stack`` on the
``.su`` file ``-fstack-usage`` writes) is tested with fake files in
test_build.py; here the host compiler measures the kernels whose host build
is the very scalar code Peano compiles, and every design is read for the
``stack_size`` of its cores.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from iron.core.device import as_device
from iron.operators import attention, matmul, norms
from iron.runtime.npu import bringup, build, kernels, legality
from iron.runtime.npu.designs import build_design

from .support import CXX, HERE
from .test_designs import _catalog, _example

_CORE = re.compile(r"^\s*(%core_\d+_\d+) = aie\.core\(%tile_\d+_\d+\) \{$")
_STACK = re.compile(r"^\s*\} \{stack_size = (\d+) : i32\}$")

#: Kernels whose host harness compiles the same scalar source Peano does (no
#: model of aie_api stands in for the vector unit), so the host's frames are
#: a measurement of that code: its harness and the flags its tests build with.
HOST_MEASURED = {
    "emit": ("host_emit.cc", ("-Wall", "-Werror")),
    "sample": ("host_sample.cc", ("-ffp-contract=off", "-Wall", "-Werror")),
}


def _core_stacks(text: str) -> list[int | None]:
    """Each ``aie.core``'s ``stack_size`` in ``text``, in order (None: absent)."""
    lines = text.splitlines()
    found: list[int | None] = []
    for i, line in enumerate(lines):
        if not _CORE.match(line):
            continue
        indent = len(line) - len(line.lstrip())
        close = next(
            j
            for j in range(i + 1, len(lines))
            if lines[j].startswith(" " * indent + "}")
            and len(lines[j]) - len(lines[j].lstrip()) == indent
        )
        m = _STACK.match(lines[close])
        found.append(int(m.group(1)) if m else None)
    return found


def _designs() -> list[tuple[str, object]]:
    """A design of every catalog operator on both devices, and every bring-up
    rung's (the Emit loop among them) on npu2."""
    found = []
    for dev in ("npu1", "npu2"):
        for cls in _catalog():
            found.append((f"{cls.__name__}-{dev}", build_design(_example(cls), dev)))
    for rung in bringup.RUNGS:
        if rung.designs:
            for k, d in enumerate(rung.designs(as_device("npu2"))):
                found.append((f"{rung.name}{k}-npu2", d))
    return found


@pytest.fixture(scope="module")
def every_design():
    return _designs()


def test_every_kernel_declares_its_stack_and_how_it_was_found():
    for symbol in kernels.symbols():
        c = kernels.contract(symbol)
        assert c.stack_bytes > 0 and c.stack_bytes % legality.STACK_ALIGN == 0, symbol
        basis = c.stack.split(";", 1)[1] if ";" in c.stack else ""
        assert "measure" in basis or "assumed" in basis, (symbol, c.stack)
        assert "-fstack-usage" in basis, (symbol, c.stack)


def test_a_contract_without_a_stack_is_refused(tmp_path, monkeypatch):
    source = kernels.source("relu_bf16").read_text(encoding="utf-8")
    stripped = "\n".join(
        line for line in source.splitlines() if not line.startswith("//   stack: ")
    )
    (tmp_path / "relu_bf16.cc").write_text(stripped, encoding="utf-8")
    monkeypatch.setattr(kernels, "KERNEL_DIR", tmp_path)
    kernels.contract.cache_clear()
    try:
        with pytest.raises(ValueError, match="its contract block lacks stack"):
            kernels.contract("relu_bf16")
        (tmp_path / "relu_bf16.cc").write_text(
            source.replace("//   stack: 896 bytes;", "//   stack: about 1 KiB;"),
            encoding="utf-8",
        )
        kernels.contract.cache_clear()
        with pytest.raises(ValueError, match="positive '<bytes> bytes' figure"):
            kernels.contract("relu_bf16")
    finally:
        kernels.contract.cache_clear()


def test_every_core_of_every_design_states_the_stack_legality_counts(every_design):
    """No aie.core falls back to aiecc's 0x400 default: each states
    core_stack(dev, kernels), the figure its layout gives legality."""
    merged = 0
    for name, d in every_design:
        stacks = _core_stacks(d.text)
        dev = as_device(d.device)
        if d.layout.cores or not stacks:
            assert len(stacks) == len(d.layout.cores), name
            want = legality.core_stack(dev, d.kernels) if stacks else None
            assert stacks == [want] * len(stacks), name
            assert d.layout.stack_bytes == want, name
        else:  # a full ELF of several steps: each device's cores, its own figure
            merged += 1
            each = {legality.core_stack(dev, (k,)) for k in d.kernels}
            assert None not in stacks and set(stacks) <= each, name
    assert merged  # the graph rungs' full ELFs were read too


def test_the_stack_is_within_what_the_operators_checks_reserve(every_design):
    """An operator's check() and its design's legality are one account of
    core memory: the stack a design states is no more than what the
    operators' own memory sums reserve for it."""
    reserved = min(norms.STACK_BYTES, matmul.STACK_BYTES, attention.STACK_BYTES)
    for name, d in every_design:
        if d.layout.cores:
            assert d.layout.stack_bytes <= reserved, (
                f"{name}: its cores state a {d.layout.stack_bytes}-byte stack (kernels "
                f"{d.kernels}), more than the {reserved} the operators' check() "
                f"counts; raise the operators' STACK_BYTES with it"
            )


def _host_frames(tmp_path: Path, symbol: str) -> int:
    """The host compiler's frames, summed over the functions of ``symbol``'s
    source, compiling its harness as its tests do plus -fstack-usage."""
    if CXX is None:
        pytest.skip("no host C++ compiler (g++ or clang++) to measure frames")
    harness, flags = HOST_MEASURED[symbol]
    obj = tmp_path / f"{symbol}.o"
    subprocess.run(
        [CXX, "-std=c++20", "-O2", *flags, "-fstack-usage"]
        + ["-I", str(kernels.KERNEL_DIR), "-c", str(HERE / harness), "-o", str(obj)],
        check=True,
    )
    frames = build.stack_usage(obj.with_suffix(".su"))
    source = kernels.source(symbol)
    mine = [
        f
        for f in frames
        if Path(f.where.split(":")[0]).resolve() == source.resolve()
        or Path(f.where.split(":")[0]).name == source.name
    ]
    assert mine, f"no frame of {source.name} in the host build's .su"
    assert not any(f.dynamic for f in mine), mine
    return sum(f.bytes for f in mine)


@pytest.mark.parametrize("symbol", sorted(HOST_MEASURED))
def test_a_declaration_from_the_host_build_covers_its_rule(tmp_path, symbol):
    """The contract says: twice the host frames plus 64, rounded up to 32.
    Recomputed here; a declaration below it (or below the host figure
    itself) fails, naming both."""
    host = _host_frames(tmp_path, symbol)
    declared = kernels.contract(symbol).stack_bytes
    rule = -(-(2 * host + 64) // 32) * 32
    assert declared >= rule >= host, (
        f"{symbol}: the host build measures {host} bytes of frames, so its contract "
        f"must declare at least {rule} (twice that plus 64, rounded up to 32); it "
        f"declares {declared}"
    )


def test_the_host_figure_stated_in_a_contract_is_the_recomputed_one(tmp_path):
    """The figure each host-measured contract quotes is what the host compiler
    here reports (g++ is the reference; another compiler may differ)."""
    if CXX is None or "g++" not in Path(CXX).name:
        pytest.skip("the contracts quote g++'s figures")
    for symbol in sorted(HOST_MEASURED):
        stated = re.search(r"measures (\d+) bytes", kernels.contract(symbol).stack)
        assert stated, symbol
        assert int(stated.group(1)) == _host_frames(tmp_path, symbol), symbol
