"""The RoPE design: golden text, FileCheck patterns, an emulation of the whole
design against RoPE.reference, the buffers and traffic check()/cost() count,
refusals, placement and the kernel contract.

Golden files ``golden/rope_half_1x32x64_<dev>.mlir`` (Llama decode: one
position, 32 heads of 64) and ``golden/rope_half_16x32x64_<dev>.mlir`` (a
16-position prompt) are the designs at the resolved tunables; regenerate them
with ``IRON_UPDATE_GOLDEN=1`` and review the diff.

The emulation reads the emitted MLIR text: the object FIFOs, each core's
loops, acquires, releases and kernel calls, and the runtime sequence's shim
transfers (decoded with :func:`legality.encode` / :func:`legality.shim_elements`).
It runs the cores over the element streams the transfers move, with a numpy
model of ``rope_bf16.cc`` that follows its loops and lanes (16-lane vectors,
``interleave_unzip``/``interleave_zip`` with step 1, ``mul`` then ``msc`` /
``mac`` in fp32, one rounding to bf16), and compares the output bit for bit
with ``RoPE.reference``. ``rope_bf16.cc`` itself is compiled for the host
(g++ or clang++) against a scalar model of the aie_api names it uses and
judged bit for bit against the reference too; Peano never runs here.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from ml_dtypes import bfloat16

from iron.core.device import as_device
from iron.core.operator import RefusedShapeError
from iron.operators import RoPE
from iron.runtime.image import Placement
from iron.runtime.npu import LegalityError, legality
from iron.runtime.npu.designs import Words, build_design, design, rope
from iron.runtime.npu.kernels import contract
from iron.runtime.npu.mlir import INDEX_MAX

from .support import check_golden, compile_host, filecheck

LANES = 16

CASES = {
    "rope_half_1x32x64": RoPE(rows=1, heads=32, head_dim=64),
    "rope_half_16x32x64": RoPE(rows=16, heads=32, head_dim=64),
}


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case, dev):
    text = design(CASES[case], dev)
    check_golden(case, dev, text, subject=f"the RoPE design {case} on {dev}")


# -- FileCheck -----------------------------------------------------------------------

CHECK_DECODE_NPU1 = """\
// CHECK: mlir-aie v1.4.1
// CHECK-LABEL: aie.device(npu1) @main {
// CHECK: func.func private @rope_bf16(memref<512xbf16>, memref<64xbf16>, memref<512xbf16>, i32, i32, i32) attributes {link_with = "rope_bf16.o"}
// CHECK-DAG: %[[SHIM0:.*]] = aie.tile(0, 0)
// CHECK-DAG: %[[CORE0:.*]] = aie.tile(0, 2)
// CHECK-DAG: %[[CORE3:.*]] = aie.tile(3, 2)
// CHECK-NOT: aie.tile(4,
// CHECK: aie.objectfifo @x_0(%[[SHIM0]], {%[[CORE0]]}, 2 : i32) : !aie.objectfifo<memref<512xbf16>>
// CHECK: aie.objectfifo @table_0(%[[SHIM0]], {%[[CORE0]]}, 2 : i32) : !aie.objectfifo<memref<64xbf16>>
// CHECK: aie.objectfifo @out_0(%[[CORE0]], {%[[SHIM0]]}, 2 : i32) : !aie.objectfifo<memref<512xbf16>>
// CHECK: aie.core(%[[CORE0]]) {
// CHECK: %[[N:.*]] = arith.constant 512 : i32
// CHECK: %[[D:.*]] = arith.constant 64 : i32
// CHECK: %[[HALF:.*]] = arith.constant 0 : i32
// CHECK: scf.for
// CHECK: aie.objectfifo.acquire @table_0(Consume, 1)
// CHECK: %[[T:.*]] = aie.objectfifo.subview.access
// CHECK: aie.objectfifo.acquire @x_0(Consume, 1)
// CHECK: aie.objectfifo.acquire @out_0(Produce, 1)
// CHECK: func.call @rope_bf16(%{{.*}}, %[[T]], %{{.*}}, %[[N]], %[[D]], %[[HALF]])
// CHECK: aie.objectfifo.release @out_0(Produce, 1)
// CHECK: aie.objectfifo.release @table_0(Consume, 1)
// CHECK: aie.end
// CHECK: aie.core(%[[CORE3]]) {
// CHECK: aie.runtime_sequence @sequence(%[[X:.*]]: memref<2048xbf16>, %[[TB:.*]]: memref<64xbf16>, %[[O:.*]]: memref<2048xbf16>) {
// CHECK: aiex.npu.dma_memcpy_nd(%[[O]][0, 0, 0, 0][1, 1, 1, 512][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[X]][0, 0, 0, 0][1, 1, 1, 512][0, 0, 0, 1]) {id = 1 : i64, metadata = @x_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[TB]][0, 0, 0, 0][1, 1, 1, 64][0, 0, 0, 1]) {id = 2 : i64, metadata = @table_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[X]][0, 0, 0, 1536][1, 1, 1, 512][0, 0, 0, 1]) {id = 1 : i64, metadata = @x_3}
// CHECK: aiex.npu.dma_memcpy_nd(%[[TB]][0, 0, 0, 0][1, 1, 1, 64][0, 0, 0, 1]) {id = 2 : i64, metadata = @table_3}
// CHECK: aiex.npu.dma_wait {symbol = @out_0}
// CHECK: aiex.npu.dma_wait {symbol = @out_3}
"""

CHECK_PROMPT_INTERLEAVED_NPU2 = """\
// CHECK-LABEL: aie.device(npu2) @main {
// CHECK: func.func private @rope_bf16(memref<2048xbf16>, memref<64xbf16>, memref<2048xbf16>, i32, i32, i32)
// CHECK: aie.objectfifo @table_7(
// CHECK: aie.core(
// CHECK: %[[TWO:.*]] = arith.constant 2 : index
// CHECK: %[[FLAG:.*]] = arith.constant 1 : i32
// CHECK: scf.for %[[P:.*]] = %{{.*}} to %[[TWO]] step
// CHECK-NEXT: aie.objectfifo.acquire @table_0(Consume, 1)
// CHECK: func.call @rope_bf16({{.*}}, %[[FLAG]])
// CHECK: aie.objectfifo.release @table_0(Consume, 1)
// CHECK: aie.runtime_sequence @sequence(
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 0][1, 1, 1, 128][0, 0, 0, 1]) {id = 2 : i64, metadata = @table_0}
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 896][1, 1, 1, 128][0, 0, 0, 1]) {id = 2 : i64, metadata = @table_7}
"""


def test_filecheck_decode_npu1(tmp_path):
    filecheck(tmp_path, CHECK_DECODE_NPU1, design(CASES["rope_half_1x32x64"], "npu1"))


def test_filecheck_prompt_interleaved_npu2(tmp_path):
    op = RoPE(rows=16, heads=32, head_dim=64, method="interleaved")
    filecheck(tmp_path, CHECK_PROMPT_INTERLEAVED_NPU2, design(op, "npu2"))


def test_filecheck_catches_a_changed_design(tmp_path):
    text = design(CASES["rope_half_1x32x64"], "npu1")
    with pytest.raises(AssertionError):
        filecheck(tmp_path, CHECK_DECODE_NPU1, text.replace("2 : i32)", "1 : i32)"))
    with pytest.raises(AssertionError):
        filecheck(
            tmp_path,
            CHECK_DECODE_NPU1,
            text.replace("constant 0 : i32", "constant 1 : i32"),
        )


# -- a model of rope_bf16.cc ---------------------------------------------------------


def _lanes(buf: np.ndarray, at: int) -> np.ndarray:
    """``aie::load_v<16>``: 16 bf16 lanes, widened exactly to fp32."""
    return buf[at : at + LANES].astype(np.float32)


def _rotate(a, b, c, s) -> tuple[np.ndarray, np.ndarray]:
    """``mul`` (exact fp32 products), ``msc`` / ``mac`` (one fp32 rounding), bf16."""
    with np.errstate(over="ignore", invalid="ignore"):
        lo = a * c
        lo = lo - b * s
        hi = b * c
        hi = hi + a * s
    return lo.astype(bfloat16), hi.astype(bfloat16)


def kernel_model(x, table, out, n: int, d: int, interleaved: int) -> None:
    """``rope_bf16(x, table, out, n, head_dim, interleaved)`` in the C++ loop order."""
    assert n % d == 0 and d % (2 * LANES) == 0, "outside the kernel's contract"
    half = d // 2
    for r in range(0, n, d):
        if not interleaved:
            for i in range(0, half, LANES):
                c, s = _lanes(table, i), _lanes(table, half + i)
                first, second = _rotate(_lanes(x, r + i), _lanes(x, r + half + i), c, s)
                out[r + i : r + i + LANES] = first
                out[r + half + i : r + half + i + LANES] = second
            continue
        for j in range(0, d, 2 * LANES):
            c, s = _lanes(table, j // 2), _lanes(table, half + j // 2)
            both = np.concatenate([_lanes(x, r + j), _lanes(x, r + j + LANES)])
            even, odd = both[0::2], both[1::2]  # interleave_unzip(v0, v1, 1)
            first, second = _rotate(even, odd, c, s)
            zipped = np.empty(2 * LANES, bfloat16)  # interleave_zip(f, s, 1)
            zipped[0::2], zipped[1::2] = first, second
            out[r + j : r + j + 2 * LANES] = zipped


# -- running the emitted text ----------------------------------------------------------

_FIFO = re.compile(
    r"aie\.objectfifo @(\w+)\((%\w+), \{(%\w+)\}, (\d+) : i32\) : "
    r"!aie\.objectfifo<memref<(\d+)xbf16>>"
)
_DMA = re.compile(
    r"aiex\.npu\.dma_memcpy_nd\((%\w+)\[([\d, ]+)\]\[([\d, ]+)\]\[([\d, ]+)\]\) "
    r"\{id = (\d+) : i64,(?: issue_token = true,)? metadata = @(\w+)\}"
)
_SEQ = re.compile(r"aie\.runtime_sequence @sequence\((.*)\) \{")


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(","))


def _parse_block(lines: list[str], at: int) -> tuple[list, int]:
    """Statements from ``lines[at]`` up to the closing ``}``; (tree, next index)."""
    body = []
    while at < len(lines):
        line = lines[at].strip()
        at += 1
        if re.fullmatch(r"\}(?: \{stack_size = \d+ : i32\})?", line):
            return body, at
        m = re.fullmatch(r"scf\.for (%\w+) = (%\w+) to (%\w+) step (%\w+) \{", line)
        if m:
            inner, at = _parse_block(lines, at)
            body.append(("for", m.group(2), m.group(3), m.group(4), inner))
            continue
        m = re.fullmatch(r"(%\w+) = arith\.constant (-?\d+) : \w+", line)
        if m:
            body.append(("const", m.group(1), int(m.group(2))))
            continue
        m = re.fullmatch(
            r"(%\w+) = aie\.objectfifo\.acquire @(\w+)\((Consume|Produce), 1\).*", line
        )
        if m:
            body.append(("acquire", m.group(1), m.group(2), m.group(3)))
            continue
        m = re.fullmatch(
            r"(%\w+) = aie\.objectfifo\.subview\.access (%\w+)\[0\].*", line
        )
        if m:
            body.append(("access", m.group(1), m.group(2)))
            continue
        m = re.fullmatch(
            r"aie\.objectfifo\.release @(\w+)\((Consume|Produce), 1\)", line
        )
        if m:
            body.append(("release", m.group(1), m.group(2)))
            continue
        m = re.fullmatch(r"func\.call @(\w+)\(([^)]*)\) : .*", line)
        if m:
            body.append(
                ("call", m.group(1), [a.strip() for a in m.group(2).split(",")])
            )
            continue
        if line == "aie.end":
            continue
        raise AssertionError(f"the emulation does not know the core line {line!r}")
    return body, at


class _Core:
    """One core's program run once over its FIFOs' element streams."""

    def __init__(self, fifos: dict, streams: dict, produced: dict) -> None:
        self.fifos, self.streams, self.produced = fifos, streams, produced
        self.env: dict[str, object] = {}
        self.held: dict[str, int] = {}
        self.calls = 0

    def run(self, tree: list) -> None:
        for stmt in tree:
            kind = stmt[0]
            if kind == "const":
                self.env[stmt[1]] = stmt[2]
            elif kind == "for":
                lo, hi, step = (self.env[v] for v in stmt[1:4])
                trips = 1 if hi == INDEX_MAX else len(range(lo, hi, step))
                for _ in range(trips):
                    self.run(stmt[4])
            elif kind == "acquire":
                _, view, fifo, port = stmt
                depth, elements = self.fifos[fifo]
                self.held[fifo] = self.held.get(fifo, 0) + 1
                assert self.held[fifo] <= depth, f"@{fifo} acquired past its depth"
                if port == "Consume":
                    self.env[view] = self.streams[fifo].pop(0)
                else:
                    buf = np.zeros(elements, bfloat16)
                    self.produced.setdefault(fifo, []).append(buf)
                    self.env[view] = buf
            elif kind == "access":
                self.env[stmt[1]] = self.env[stmt[2]]
            elif kind == "release":
                self.held[stmt[1]] -= 1
                assert self.held[stmt[1]] >= 0, f"@{stmt[1]} released unheld"
            elif kind == "call":
                assert stmt[1] == rope.KERNEL
                x, table, out, n, d, flag = (self.env[a] for a in stmt[2])
                assert len(x) == n == len(out) and len(table) == d
                kernel_model(x, table, out, n, d, flag)
                self.calls += 1


def run_design(text: str, buffers: dict[str, np.ndarray]) -> dict:
    """Run a design's text over flat bf16 ``buffers`` (by argument name), in place.

    Returns each core's kernel-call count and the elements each FIFO moved.
    """
    fifos, ends = {}, {}
    for m in _FIFO.finditer(text):
        fifos[m.group(1)] = (int(m.group(4)), int(m.group(5)))
        ends[m.group(1)] = m.group(2).startswith("%shim")
    header = _SEQ.search(text).group(1)
    ssa = [a.split(":")[0].strip() for a in header.split(", %")]
    ssa = [a if a.startswith("%") else "%" + a for a in ssa]
    arg_of = dict(zip(ssa, buffers))
    streams: dict[str, list] = {}
    sinks: dict[str, list] = {}
    moved: dict[str, int] = {}
    for m in _DMA.finditer(text):
        buf, offs, sizes, strides, _, fifo = m.groups()
        offset = _ints(offs)[3]
        idx = legality.shim_elements(
            legality.encode(_ints(sizes), _ints(strides), offset, 2)
        )
        moved[fifo] = moved.get(fifo, 0) + len(idx)
        data = buffers[arg_of[buf]]
        if ends[fifo]:  # shim -> core
            elements = fifos[fifo][1]
            assert len(idx) % elements == 0, f"@{fifo} moves a partial element"
            chunks = data[idx].reshape(-1, elements)
            streams.setdefault(fifo, []).extend(c.copy() for c in chunks)
        else:
            sinks.setdefault(fifo, []).append((buf, idx))
    produced: dict[str, list] = {}
    calls = {}
    for m in re.finditer(r"aie\.core\((%tile_(\d+)_2)\) \{\n", text):
        lines = text[m.end() :].splitlines()
        tree, _ = _parse_block(lines, 0)
        core = _Core(fifos, streams, produced)
        core.run(tree)
        assert not any(core.held.values()), f"core {m.group(2)} ends holding buffers"
        calls[int(m.group(2))] = core.calls
    for fifo, left in streams.items():
        assert not left, f"@{fifo}: {len(left)} elements never consumed"
    for fifo, targets in sinks.items():
        data = np.concatenate(produced.pop(fifo))
        idx = np.concatenate([i for _, i in targets])
        assert len(data) == len(idx), (
            f"@{fifo} produced {len(data)}, drained {len(idx)}"
        )
        (buf,) = {b for b, _ in targets}
        buffers[arg_of[buf]][idx] = data
    assert not produced, f"outputs no transfer drains: {sorted(produced)}"
    return {"calls": calls, "moved": moved}


def _inputs(op: RoPE, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((op.rows, op.heads, op.head_dim)) * 4).astype(bfloat16)
    angles = rng.uniform(-np.pi, np.pi, (op.rows, op.head_dim // 2))
    table = np.concatenate([np.cos(angles), np.sin(angles)], axis=1).astype(bfloat16)
    return x, table


SHAPES = [
    dict(rows=1, heads=32, head_dim=64),  # Llama 3.2 1B decode, q heads
    dict(rows=1, heads=8, head_dim=64),  # ... its kv heads
    dict(rows=16, heads=32, head_dim=64),  # a prompt
    dict(rows=1, heads=8, head_dim=128),  # Llama 3 8B kv heads
    dict(rows=4, heads=8, head_dim=128, heads_per_tile=2, num_aie_columns=2),
    dict(rows=3, heads=4, head_dim=32, heads_per_tile=1, num_aie_columns=4),
    dict(rows=5, heads=8, head_dim=32, heads_per_tile=2, num_aie_columns=2),
    dict(rows=2, heads=6, head_dim=64, heads_per_tile=1, num_aie_columns=4),
]


@pytest.mark.parametrize("method", ["half", "interleaved"])
@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("fields", SHAPES, ids=lambda f: "-".join(map(str, f.values())))
def test_the_design_computes_the_reference_bit_for_bit(fields, dev, method):
    op = RoPE(**fields, method=method)
    x, table = _inputs(op)
    d = build_design(op, dev)
    assert d.args == ("x", "table", "out")
    out = np.zeros(x.size, bfloat16)
    run_design(d.text, {"x": x.ravel(), "table": table.ravel(), "out": out})
    want = op.reference(x, table).ravel()
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))


def test_the_emulation_notices_a_wrong_table_row():
    op = RoPE(rows=5, heads=8, head_dim=32, heads_per_tile=2, num_aie_columns=2)
    x, table = _inputs(op)
    text = design(op, "npu2")
    # Column 1 reads from position 2 on; make it start at position 1.
    bad = text.replace(
        "[0, 0, 0, 64][1, 1, 1, 96][0, 0, 0, 1]) {id = 2 : i64, metadata = @table_1}",
        "[0, 0, 0, 32][1, 1, 1, 96][0, 0, 0, 1]) {id = 2 : i64, metadata = @table_1}",
    )
    assert bad != text
    out = np.zeros(x.size, bfloat16)
    with pytest.raises(AssertionError):
        run_design(bad, {"x": x.ravel(), "table": table.ravel(), "out": out})
        np.testing.assert_array_equal(out, op.reference(x, table).ravel())


def test_the_kernel_model_agrees_with_the_reference_on_edge_values():
    # Both methods on a row of 256 with wide exponents, cancelling pairs and zeros.
    rng = np.random.default_rng(3)
    d = 256
    x = rng.standard_normal((1, 4, d)) * 2.0 ** rng.integers(-60, 60, (1, 4, d))
    x[0, 0, ::3] = 0.0
    x = x.astype(bfloat16)
    table = rng.uniform(-1, 1, (1, d)).astype(bfloat16)
    x[0, 1, : d // 2] = x[0, 1, d // 2 :]  # pairs that cancel where c == s
    for method, flag in rope.METHOD_FLAG.items():
        out = np.zeros(x.size, bfloat16)
        kernel_model(x.ravel(), table.ravel(), out, x.size, d, flag)
        want = RoPE(rows=1, heads=4, head_dim=d, method=method).reference(x, table)
        np.testing.assert_array_equal(out.view(np.uint16), want.ravel().view(np.uint16))


# -- the C++ source itself, on the host --------------------------------------------------

# rope_bf16.cc compiled for the host against a scalar model of the few
# aie_api names it uses (iron_kernel.h is skipped through its include guard
# and its four names restated): lane-wise bf16 -> fp32 widening (exact), fp32
# products of two bf16 (exact), fp32 add / subtract to nearest even, fp32 ->
# bf16 to nearest even, interleave_unzip / interleave_zip with step 1 as
# aie_api documents them (the evens and odds of the concatenation; its inverse).
HOST_HARNESS = r"""
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <utility>
#include <vector>

#define IRON_KERNEL_H

struct bfloat16 {
  uint16_t bits;
  bfloat16() = default;
  bfloat16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    bits = static_cast<uint16_t>(u >> 16);
  }
  operator float() const {
    const uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};
struct accfloat {};

namespace aie {
enum class rounding_mode { floor, conv_even };
inline rounding_mode mode = rounding_mode::floor;
inline void set_rounding(rounding_mode m) { mode = m; }
template <class T, unsigned N> struct vector { T v[N]; };
template <class A, unsigned N> struct accum {
  float v[N];
  template <class T> vector<T, N> to_vector() const {
    if (mode != rounding_mode::conv_even) std::abort();
    vector<T, N> r;
    for (unsigned i = 0; i < N; ++i) r.v[i] = T(v[i]);
    return r;
  }
};
template <unsigned N, class T> vector<T, N> load_v(const T *p) {
  vector<T, N> r;
  for (unsigned i = 0; i < N; ++i) r.v[i] = p[i];
  return r;
}
template <class T, unsigned N> void store_v(T *p, const vector<T, N> &v) {
  for (unsigned i = 0; i < N; ++i) p[i] = v.v[i];
}
template <unsigned N>
accum<accfloat, N> mul(const vector<bfloat16, N> &a, const vector<bfloat16, N> &b) {
  accum<accfloat, N> r;
  for (unsigned i = 0; i < N; ++i) r.v[i] = float(a.v[i]) * float(b.v[i]);
  return r;
}
template <unsigned N>
accum<accfloat, N> msc(accum<accfloat, N> acc, const vector<bfloat16, N> &a,
                       const vector<bfloat16, N> &b) {
  for (unsigned i = 0; i < N; ++i) acc.v[i] = acc.v[i] - float(a.v[i]) * float(b.v[i]);
  return acc;
}
template <unsigned N>
accum<accfloat, N> mac(accum<accfloat, N> acc, const vector<bfloat16, N> &a,
                       const vector<bfloat16, N> &b) {
  for (unsigned i = 0; i < N; ++i) acc.v[i] = acc.v[i] + float(a.v[i]) * float(b.v[i]);
  return acc;
}
template <class T, unsigned N>
std::pair<vector<T, N>, vector<T, N>> interleave_unzip(const vector<T, N> &a,
                                                       const vector<T, N> &b,
                                                       unsigned step) {
  if (step != 1) std::abort();
  T all[2 * N];
  for (unsigned i = 0; i < N; ++i) all[i] = a.v[i], all[N + i] = b.v[i];
  std::pair<vector<T, N>, vector<T, N>> r;
  for (unsigned i = 0; i < N; ++i) r.first.v[i] = all[2 * i], r.second.v[i] = all[2 * i + 1];
  return r;
}
template <class T, unsigned N>
std::pair<vector<T, N>, vector<T, N>> interleave_zip(const vector<T, N> &a,
                                                     const vector<T, N> &b,
                                                     unsigned step) {
  if (step != 1) std::abort();
  T all[2 * N];
  for (unsigned i = 0; i < N; ++i) all[2 * i] = a.v[i], all[2 * i + 1] = b.v[i];
  std::pair<vector<T, N>, vector<T, N>> r;
  for (unsigned i = 0; i < N; ++i) r.first.v[i] = all[i], r.second.v[i] = all[N + i];
  return r;
}
}  // namespace aie

namespace iron {
constexpr int kLanes = 16;
using vbf16 = aie::vector<bfloat16, kLanes>;
using accf = aie::accum<accfloat, kLanes>;
inline void round_nearest_even() { aie::set_rounding(aie::rounding_mode::conv_even); }
}  // namespace iron

#include "rope_bf16.cc"

// argv: n head_dim interleaved; stdin: x (n), table (head_dim) as uint16 bf16
// bits; stdout: out (n) as uint16 bits.
int main(int argc, char **argv) {
  if (argc != 4) return 2;
  const int32_t n = std::atoi(argv[1]), d = std::atoi(argv[2]), il = std::atoi(argv[3]);
  std::vector<bfloat16> x(n), table(d), out(n);
  if (std::fread(x.data(), 2, n, stdin) != size_t(n)) return 3;
  if (std::fread(table.data(), 2, d, stdin) != size_t(d)) return 3;
  rope_bf16(x.data(), table.data(), out.data(), n, d, il);
  std::fwrite(out.data(), 2, n, stdout);
  return 0;
}
"""


@pytest.fixture(scope="module")
def host_rope(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("rope")
    (work / "harness.cc").write_text(HOST_HARNESS, encoding="utf-8")
    return compile_host(
        work,
        [work / "harness.cc"],
        "host_rope",
        optimize="-O1",
        flags=("-ffp-contract=off",),
        purpose="for the rope_bf16.cc check",
    )


@pytest.mark.parametrize("method", ["half", "interleaved"])
@pytest.mark.parametrize("head_dim", [32, 64, 128])
def test_the_kernel_source_computes_the_reference_on_the_host(
    host_rope, method, head_dim
):
    rng = np.random.default_rng(head_dim)
    heads = 4
    x = rng.standard_normal((1, heads, head_dim)) * 2.0 ** rng.integers(
        -40, 40, (1, heads, head_dim)
    )
    x[0, 0, ::5] = 0.0
    x = x.astype(bfloat16)
    angles = rng.uniform(-np.pi, np.pi, (1, head_dim // 2))
    table = np.concatenate([np.cos(angles), np.sin(angles)], axis=1).astype(bfloat16)
    done = subprocess.run(
        [str(host_rope), str(x.size), str(head_dim), str(rope.METHOD_FLAG[method])],
        input=x.tobytes() + table.tobytes(),
        capture_output=True,
        check=True,
    )
    got = np.frombuffer(done.stdout, np.uint16)
    want = RoPE(rows=1, heads=heads, head_dim=head_dim, method=method).reference(
        x, table
    )
    np.testing.assert_array_equal(got, want.ravel().view(np.uint16))


# -- what check() and cost() count ----------------------------------------------------

LLAMA = [
    dict(rows=1, heads=32, head_dim=64),
    dict(rows=1, heads=8, head_dim=64),
    dict(rows=16, heads=32, head_dim=64),
    dict(rows=1, heads=32, head_dim=128),
    dict(rows=1, heads=8, head_dim=128),
    dict(rows=128, heads=32, head_dim=64),
]


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("fields", LLAMA, ids=lambda f: "x".join(map(str, f.values())))
def test_buffers_calls_and_traffic_are_what_check_and_cost_count(fields, dev):
    op = RoPE(**fields).resolved(dev)
    cost = op.cost(as_device(dev))
    d = build_design(op, dev)
    for core in d.layout.cores:
        held = sum(
            f.depth * f.element_bytes
            for f in d.layout.fifos
            if core in (f.producer, *f.consumers)
        )
        assert held == op.core_bytes()
    x, table = _inputs(op)
    out = np.zeros(x.size, bfloat16)
    ran = run_design(d.text, {"x": x.ravel(), "table": table.ravel(), "out": out})
    assert len(ran["calls"]) == op.num_aie_columns == cost.columns
    assert set(ran["calls"].values()) == {cost.calls}
    moved = {
        p: 2 * sum(n for f, n in ran["moved"].items() if f.rsplit("_", 1)[0] == p)
        for p in ("x", "table", "out")
    }
    assert moved["x"] == moved["out"] == x.nbytes
    assert sum(moved.values()) == cost.bytes + cost.reread_bytes


def test_smaller_pinned_tiles_stream_each_row_once_per_column():
    # cost() counts a table row per tile; the design sends it once per
    # position and column, which is less when a column has several tiles of
    # one position.
    op = RoPE(rows=4, heads=8, head_dim=128, heads_per_tile=2, num_aie_columns=2)
    cost = op.cost(as_device("npu2"))
    x, table = _inputs(op)
    ran = run_design(
        design(op, "npu2"),
        {"x": x.ravel(), "table": table.ravel(), "out": np.zeros(x.size, bfloat16)},
    )
    sent = 2 * sum(n for f, n in ran["moved"].items() if f.startswith("table_"))
    assert sent == table.nbytes < table.nbytes + cost.reread_bytes


def test_segments_cover_each_columns_tiles_in_order():
    op = RoPE(rows=5, heads=8, head_dim=32, heads_per_tile=2, num_aie_columns=2)
    assert rope.tile_runs(op, 0) == (rope.TileRun(0, 2, 4), rope.TileRun(2, 1, 2))
    assert rope.tile_runs(op, 1) == (rope.TileRun(2, 1, 2), rope.TileRun(3, 2, 4))
    odd = RoPE(rows=3, heads=4, head_dim=32, heads_per_tile=1, num_aie_columns=4)
    assert [rope.tile_runs(odd, c) for c in range(4)] == [
        (rope.TileRun(0, 1, 3),),
        (rope.TileRun(0, 1, 1), rope.TileRun(1, 1, 2)),
        (rope.TileRun(1, 1, 2), rope.TileRun(2, 1, 1)),
        (rope.TileRun(2, 1, 3),),
    ]
    for fields in SHAPES:
        o = RoPE(**fields).resolved("npu2")
        tiles = [
            (s.position + p, s.tiles)
            for c in range(o.num_aie_columns)
            for s in rope.tile_runs(o, c)
            for p in range(s.positions)
        ]
        per_position = o.heads // o.heads_per_tile
        assert sum(n for _, n in tiles) == o.rows * per_position


def test_the_table_row_is_held_across_the_positions_tiles():
    d = build_design(RoPE(rows=16, heads=32, head_dim=64, heads_per_tile=8), "npu1")
    body = d.text.split("%core_0_2 = aie.core")[1].split("aie.end")[0]
    assert body.index("acquire @table_0") < body.index("scf.for %h")
    assert body.index("acquire @table_0") < body.index("acquire @x_0")
    assert body.rindex("release @table_0") > body.rindex("release @out_0")
    assert body.count("func.call @rope_bf16") == 1


# -- refusals ---------------------------------------------------------------------------


def test_refused_shapes_name_the_limit():
    with pytest.raises(
        RefusedShapeError, match="head_dim=48 is not a positive multiple"
    ):
        build_design(RoPE(rows=1, heads=8, head_dim=48), "npu1")
    with pytest.raises(RefusedShapeError, match="exceeds the device's 4 columns"):
        build_design(RoPE(rows=1, heads=32, head_dim=64, num_aie_columns=8), "npu1")
    with pytest.raises(RefusedShapeError, match="do not spread evenly"):
        build_design(
            RoPE(rows=1, heads=6, head_dim=64, heads_per_tile=3, num_aie_columns=4),
            "npu2",
        )
    with pytest.raises(RefusedShapeError, match="core memory"):
        build_design(
            RoPE(rows=1, heads=64, head_dim=256, heads_per_tile=64, num_aie_columns=1),
            "npu2",
        )


def test_legality_refuses_tiles_past_a_core_on_its_own():
    # The same oversized tile without the operator's check: legality names
    # the compute tile and its bytes.
    dev = as_device("npu1")
    op = RoPE(rows=1, heads=64, head_dim=256, heads_per_tile=64, num_aie_columns=1)
    with pytest.raises(LegalityError, match=r"compute tile \(0, 2\).*133120 bytes"):
        legality.check(
            rope.layout(SimpleNamespace(**op.fields(), fifo_depth=op.fifo_depth), dev),
            dev,
        )


def test_every_transfer_is_within_the_shim_limits_for_a_long_prompt():
    dev = as_device("npu2")
    op = RoPE(rows=256, heads=32, head_dim=128).resolved(dev)
    lay = rope.layout(op, dev)
    legality.check(lay, dev)
    assert any(t.sizes[2] > 1 for t in lay.transfers)  # past one d0 wrap
    for t in lay.transfers:
        idx = legality.shim_elements(legality.encode(t.sizes, t.strides, t.offset, 2))
        assert np.array_equal(idx, np.arange(t.offset, t.offset + len(idx)))


# -- placement, words, dispatch -----------------------------------------------------


def test_arena_placement_reads_and_writes_at_the_planned_offsets():
    op = RoPE(rows=2, heads=8, head_dim=64, num_aie_columns=2)
    placement = {
        "table": Placement("arena", 256, 2 * 64 * 2),
        "x": Placement("arena", 1024, 2 * 8 * 64 * 2),
        "out": Placement("arena", 4096, 2 * 8 * 64 * 2),
    }
    d = build_design(op, "npu1", placement, arena_bytes=8192)
    assert d.args == ("arena",) and d.arg_bytes == (8192,)
    # table at byte 256 = element 128, column 1 from its position 1 (64 on).
    assert "%arena[0, 0, 0, 192][1, 1, 1, 64]" in d.text
    x, table = _inputs(op)
    arena = np.zeros(4096, bfloat16)
    arena[128 : 128 + table.size] = table.ravel()
    arena[512 : 512 + x.size] = x.ravel()
    run_design(d.text, {"arena": arena})
    got = arena[2048 : 2048 + x.size]
    np.testing.assert_array_equal(
        got.view(np.uint16), op.reference(x, table).ravel().view(np.uint16)
    )
    with pytest.raises(ValueError, match="not on a bf16 boundary"):
        build_design(op, "npu1", {"x": Placement("arena", 1025, 2048)})


def test_no_words_are_read_even_inside_an_image():
    d = build_design(
        RoPE(rows=1, heads=32, head_dim=64), "npu2", words=Words(slots={}, count=4)
    )
    assert "words" not in d.args and "words_" not in d.text


def test_build_design_dispatches_to_this_module():
    assert rope.handles(RoPE(rows=1, heads=8, head_dim=64))
    assert not rope.handles(object())
    assert rope.FAMILY == (RoPE,)
    d = build_design(RoPE(rows=1, heads=8, head_dim=64), "npu1")
    assert d.kernels == (rope.KERNEL,) and d.device == "npu1"
    assert dataclasses.asdict(d)["layout"]["operator"].startswith("RoPE(")


# -- the kernel contract ----------------------------------------------------------------


def test_the_contract_matches_the_declaration_and_the_source():
    c = contract(rope.KERNEL)
    assert c.operator == "RoPE"
    assert (c.buffer_count, c.scalar_count) == (3, 2)
    assert "multiple of 32" in c.tile and "multiple of head_dim" in c.tile
    assert "exact" in c.rounding and "one rounding to bf16" in c.rounding
    assert "'half'" in c.computes and "'interleaved'" in c.computes
    source = c.path.read_text(encoding="utf-8")
    assert 'extern "C" void rope_bf16(' in source
    assert '#include "iron_kernel.h"' in source
    for dev in ("npu1", "npu2"):
        for method, flag in rope.METHOD_FLAG.items():
            text = design(RoPE(rows=1, heads=8, head_dim=64, method=method), dev)
            decl = next(
                line for line in text.splitlines() if "func.func private" in line
            )
            assert decl.count("xbf16>") == c.buffer_count
            assert decl.count("i32") == 1 + c.scalar_count
            call = next(line for line in text.splitlines() if "func.call" in line)
            last = call.split("(")[1].split(")")[0].split(", ")[-1]
            assert re.search(rf"{re.escape(last)} = arith\.constant {flag} : i32", text)
