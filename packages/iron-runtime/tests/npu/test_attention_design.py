"""Attention designs (DecodeAttention, CausalAttention): golden text, FileCheck,
the scratchpad word, the shim transfers, legality and the kernel.

Golden files ``golden/decode_attention_32x8x64x512_<dev>.mlir`` and
``golden/causal_attention_16x32x8x64x512_<dev>.mlir`` are Llama-3.2-1B
attention shapes (32 heads, 8 kv heads, head_dim 64, a 512-position cache,
16-row prompt chunks) with a per-call ``length`` / ``start``, standalone (K
and V separate arguments: whole kv heads resident in the memory tile); the
``..._2048_arena_<dev>.mlir`` files are the same at a 2048-position context
with both caches in the arena as a model's plan places them (K and V
streamed chunk by chunk, one shim descriptor alternating them); regenerate
with ``IRON_UPDATE_GOLDEN=1`` and review the diff.

The kernel's fp32 exp is compiled for the host (``IRON_ATTENTION_HOST``, a
scalar backend) and checked within 4 fp32 ulps of numpy's; the kernel's
evaluation order (chunks, running max, rescales, reciprocal) is modelled in
numpy and judged against the operator's reference and tolerance.
"""

from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from ml_dtypes import bfloat16

from iron.core.device import as_device
from iron.core.operator import RefusedShapeError
from iron.core.percall import PerCall
from iron.core.tolerance import compare
from iron.operators import CausalAttention, DecodeAttention
from iron.operators.attention import STACK_BYTES
from iron.runtime.image import Placement
from iron.runtime.npu import LegalityError, legality
from iron.runtime.npu.designs import (
    Words,
    attention,
    attention_schedule,
    build_design,
    design,
)
from iron.runtime.npu.kernels import contract

from .support import GOLDEN, check_golden, compile_host, filecheck, shim_moved

LLAMA = dict(heads=32, kv_heads=8, head_dim=64, max_len=512)
DECODE = DecodeAttention(**LLAMA, length=PerCall("position") + 1)
CAUSAL = CausalAttention(rows=16, **LLAMA, start=PerCall("position"))
LLAMA_2048 = dict(LLAMA, max_len=2048)


def _llama_arena(max_len: int, gap: int = 0, swap: bool = False) -> dict:
    """Both caches in the arena one after the other (``gap`` bytes between),
    as a Llama plan places a layer's ``k_cache`` and ``v_cache``."""
    cache = 8 * max_len * 64 * 2
    first, second = 65536, 65536 + cache + gap
    if swap:
        first, second = second, first
    return {
        "k_cache": Placement("arena", first, cache),
        "v_cache": Placement("arena", second, cache),
    }


CASES = {
    "decode_attention_32x8x64x512": (DECODE, None),
    "causal_attention_16x32x8x64x512": (CAUSAL, None),
    "decode_attention_32x8x64x2048_arena": (
        DecodeAttention(**LLAMA_2048, length=PerCall("position") + 1),
        _llama_arena(2048),
    ),
    "causal_attention_16x32x8x64x2048_arena": (
        CausalAttention(rows=16, **LLAMA_2048, start=PerCall("position")),
        _llama_arena(2048),
    ),
}


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case, dev):
    op, placement = CASES[case]
    text = design(op, dev, placement)
    check_golden(case, dev, text)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_each_golden_fifo_keeps_to_a_combination_mlir_aie_tests(case, dev):
    """Issue 15: no FIFO combines object-FIFO features that no test of
    mlir-aie v1.4.1 gives one FIFO (the resident ``kv`` once had four: an
    asymmetric type, dimensions, a repeat and a link); what the golden text
    emits is what the design's layout declares to legality."""
    op, placement = CASES[case]
    emitted = legality.emitted_fifo_features(
        (GOLDEN / f"{case}_{dev}.mlir").read_text("utf-8")
    )
    declared = {
        f.name: f.features for f in build_design(op, dev, placement).layout.fifos
    }
    assert emitted == declared
    for name, features in emitted.items():
        assert not features or features in legality.TESTED_FIFO_FEATURES, name
        assert "asymmetric" not in features and "dims_to_stream" not in features
    kv = {f for n, f in emitted.items() if n.startswith("kv_") and "_in_" not in n}
    if "512" in case and case.startswith("causal"):  # resident heads, 4 query tiles
        assert kv == {frozenset({"link_out", "resize", "repeat"})}
    elif "512" in case:
        assert kv == {frozenset({"link_out", "resize"})}
    else:  # one chunk a span
        assert kv == {frozenset({"link_out"})}


CHECK_DECODE_NPU1 = """\
// CHECK: mlir-aie v1.4.1
// CHECK: streams all max_len=512 cache positions per call
// CHECK: K and V stream in spans of 8 chunks of 64 positions; two descriptors a span (k_cache, then v_cache); whole kv heads resident in the memory tile
// CHECK-LABEL: aie.device(npu1) @main {
// CHECK: func.func private @attention_bf16_init(memref<256xf32>, memref<8xf32>, i32, i32) attributes {link_with = "attention_bf16.o"}
// CHECK: func.func private @attention_bf16_chunk(memref<257xi32>, memref<8192xbf16>, memref<256xf32>, memref<256xf32>, memref<8xf32>, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32)
// CHECK: func.func private @attention_bf16_store(memref<256xf32>, memref<8xf32>, memref<256xbf16>, i32, i32)
// CHECK-DAG: %[[SHIM0:.*]] = aie.tile(0, 0)
// CHECK-DAG: %[[SHIM1:.*]] = aie.tile(1, 0)
// CHECK-DAG: %[[MEM0:.*]] = aie.tile(0, 1)
// CHECK-DAG: %[[CORE0:.*]] = aie.tile(0, 2)
// CHECK-DAG: %[[CORE1:.*]] = aie.tile(1, 2)
// CHECK-NOT: aie.tile(4,
// CHECK: aie.objectfifo @kv_in_0(%[[SHIM0]], {%[[MEM0]] dimensionsFromStream [<size = 2, stride = 4096>, <size = 8, stride = 8192>, <size = 64, stride = 64>, <size = 64, stride = 1>]}, 2 : i32) : !aie.objectfifo<memref<65536xbf16>>
// CHECK-NEXT: aie.objectfifo @kv_0(%[[MEM0]], {%[[CORE0]]}, 2 : i32) : !aie.objectfifo<memref<8192xbf16>>
// CHECK-NEXT: aie.objectfifo.link [@kv_in_0] -> [@kv_0]([] [])
// CHECK: aie.objectfifo @q_in_0(%[[SHIM0]], {%[[MEM0]]}, 2 : i32) : !aie.objectfifo<memref<256xi32>>
// CHECK: aie.objectfifo @words_0(%[[SHIM1]], {%[[MEM0]]}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
// CHECK: aie.objectfifo @qw_0(%[[MEM0]], {%[[CORE0]], %[[CORE1]]}, 2 : i32) : !aie.objectfifo<memref<257xi32>>
// CHECK: aie.objectfifo.link [@q_in_0, @words_0] -> [@qw_0]([0, 256] [])
// CHECK: %[[ACC:.*]] = aie.buffer(%[[CORE0]]) {sym_name = "acc_0"} : memref<256xf32>
// CHECK: aie.core(%[[CORE0]]) {
// CHECK: %[[SLOT:.*]] = arith.constant 256 : index
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step
// CHECK: %[[Q:.*]] = aie.objectfifo.subview.access
// CHECK: %[[LEN:.*]] = memref.load %[[Q]][%[[SLOT]]] : memref<257xi32>
// CHECK: func.call @attention_bf16_init(%[[ACC]],
// CHECK: aie.objectfifo.acquire @kv_0(Consume, 1)
// CHECK: func.call @attention_bf16_chunk(%[[Q]], %{{.*}}, %{{.*}}, %[[ACC]], {{.*}}, %[[LEN]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: aie.objectfifo.release @kv_0(Consume, 1)
// CHECK: aie.objectfifo.acquire @out_0(Produce, 1)
// CHECK: func.call @attention_bf16_store(%[[ACC]],
// CHECK: aie.objectfifo.release @qw_0(Consume, 1)
// CHECK: aie.end
// CHECK: aie.runtime_sequence @sequence(%[[QB:.*]]: memref<2048xbf16>, %[[KB:.*]]: memref<262144xbf16>, %[[VB:.*]]: memref<262144xbf16>, %[[OB:.*]]: memref<2048xbf16>, %[[WB:.*]]: memref<1xi32>) {
// CHECK: aiex.npu.dma_memcpy_nd(%[[OB]][0, 0, 0, 0]{{.*}} {id = 0 : i64, issue_token = true, metadata = @out_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[KB]][0, 0, 0, 0]{{.*}} {id = 1 : i64, metadata = @kv_in_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[VB]][0, 0, 0, 0]{{.*}} {id = 2 : i64, metadata = @kv_in_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[KB]][0, 0, 0, 32768]{{.*}} {id = 3 : i64, metadata = @kv_in_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[QB]][0, 0, 0, 0][2, 2, 1, 256][256, 512, 0, 1]) {id = 5 : i64, metadata = @q_in_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[WB]][0, 0, 0, 0][2, 1, 1, 1][0, 0, 0, 1]) {id = 5 : i64, metadata = @words_0}
// CHECK: aiex.npu.dma_wait {symbol = @out_0}
// CHECK: aiex.npu.dma_wait {symbol = @out_3}
"""

CHECK_CAUSAL_NPU2 = """\
// CHECK-LABEL: aie.device(npu2) @main {
// CHECK-NOT: -> !aie.objectfifo
// CHECK-NOT: dimensionsToStream
// CHECK: aie.objectfifo @kv_in_7(%{{.*}}, {%mem_tile_7_1 dimensionsFromStream [<size = 2, stride = 4096>, <size = 8, stride = 8192>, <size = 64, stride = 64>, <size = 64, stride = 1>]}, 2 : i32) : !aie.objectfifo<memref<65536xbf16>>
// CHECK-NEXT: aie.objectfifo @kv_7(%mem_tile_7_1, {%tile_7_2}, 2 : i32) {repeat_count = 4 : i32} : !aie.objectfifo<memref<8192xbf16>>
// CHECK-NEXT: aie.objectfifo.link [@kv_in_7] -> [@kv_7]([] [])
// CHECK: aie.objectfifo @qw_3(%{{.*}}, {%tile_6_2, %tile_7_2}, 2 : i32) : !aie.objectfifo<memref<1025xi32>>
// CHECK: %core_7_2 = aie.core(%tile_7_2) {
// CHECK: %[[OFF:.*]] = arith.constant 1024 : i32
// CHECK: %[[CAUSAL:.*]] = arith.constant 1 : i32
// CHECK: scf.for %[[QT:qt[_0-9]*]] = %{{.*}} to %{{.*}} step
// CHECK: aie.objectfifo.acquire @qw_3(Consume, 1)
// CHECK: %[[START:.*]] = memref.load
// CHECK: %[[QI:.*]] = arith.index_cast %[[QT]] : index to i32
// CHECK: func.call @attention_bf16_chunk(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[OFF]], {{.*}}, %[[START]], %[[QI]], %[[CAUSAL]], %{{.*}})
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 0][1, 4, 4, 256][0, 8192, 2048, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0}
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 0][4, 2, 4, 256][8192, 256, 2048, 1]) {id = 3 : i64, metadata = @q_in_0}
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 0][4, 1, 1, 1][0, 0, 0, 1]) {id = 3 : i64, metadata = @words_0}
"""


CHECK_CAUSAL_ARENA_NPU1 = """\
// CHECK: kv_tile=32, num_aie_columns=4, q_tile=8) on npu1
// CHECK: K and V stream in spans of 1 chunk of 32 positions; one descriptor alternates k_cache and v_cache (1048576 elements apart); the shim sends each kv head 2 times (once a query tile)
// CHECK-LABEL: aie.device(npu1) @main {
// CHECK: aie.objectfifo @kv_in_0(%{{.*}}, {%{{.*}}}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
// CHECK-NEXT: aie.objectfifo @kv_0(%mem_tile_0_1, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<4096xbf16>>
// CHECK-NEXT: aie.objectfifo.link [@kv_in_0] -> [@kv_0]([] [])
// CHECK-NOT: dimensionsFromStream
// CHECK-NOT: repeat_count
// CHECK: aie.runtime_sequence @sequence(%[[AR:.*]]: memref<{{.*}}xbf16>, %{{.*}}: memref<32768xbf16>, %{{.*}}: memref<32768xbf16>, %{{.*}}: memref<1xi32>)
// CHECK: aiex.npu.dma_memcpy_nd(%[[AR]][0, 0, 0, 32768][64, 2, 2, 1024][2048, 1048576, 1024, 1]) {id = 1 : i64, metadata = @kv_in_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[AR]][0, 0, 0, 32768][64, 2, 2, 1024][2048, 1048576, 1024, 1]) {id = 2 : i64, metadata = @kv_in_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[AR]][0, 0, 0, 163840][64, 2, 2, 1024][2048, 1048576, 1024, 1]) {id = 3 : i64, metadata = @kv_in_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[AR]][0, 0, 0, 163840][64, 2, 2, 1024][2048, 1048576, 1024, 1]) {id = 4 : i64, metadata = @kv_in_0}
// CHECK-NOT: metadata = @kv_in_0
// CHECK: metadata = @words_0
"""


def test_filecheck_decode_npu1(tmp_path):
    filecheck(tmp_path, CHECK_DECODE_NPU1, design(DECODE, "npu1"))


def test_filecheck_causal_npu2(tmp_path):
    filecheck(tmp_path, CHECK_CAUSAL_NPU2, design(CAUSAL, "npu2"))


def test_filecheck_causal_arena_npu1(tmp_path):
    op, placement = CASES["causal_attention_16x32x8x64x2048_arena"]
    filecheck(tmp_path, CHECK_CAUSAL_ARENA_NPU1, design(op, "npu1", placement))


# -- the per-call word --------------------------------------------------------------


def _core(text: str, col: int) -> str:
    return text.split(f"%core_{col}_2 = aie.core")[1].split("aie.end")[0]


def _loaded(text: str, col: int, name: str) -> tuple[int, int]:
    """The i32 index column ``col``'s core loads its word at, and the element size."""
    body = _core(text, col)
    ((var, ssa, size),) = re.findall(
        rf"(%{name}(?:_\d+)?) = memref\.load %q(?:_\d+)?\[(%\w+)\] : memref<(\d+)xi32>",
        body,
    )
    (value,) = re.findall(rf"{re.escape(ssa)} = arith\.constant (\d+) : index", body)
    # The loaded word is the chunk call's word argument (the 12th).
    (call,) = [ln for ln in body.splitlines() if "@attention_bf16_chunk" in ln]
    assert call.split("(")[1].split(")")[0].split(", ")[11] == var
    return int(value), int(size)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("op", [DECODE, CAUSAL], ids=["decode", "causal"])
def test_standalone_word_is_slot_zero_after_the_queries(op, dev):
    d = build_design(op, dev)
    r = op.resolved(dev)
    plan = attention.layout(r, as_device(dev))[1]
    assert plan.slot == 0 and plan.count == 1 and plan.group == 2
    assert d.args[-1] == "words" and d.arg_bytes[-1] == 4
    q_words = plan.group * plan.q_elems // 2
    name = "length" if op is DECODE else "start"
    for c in range(r.num_aie_columns):
        assert _loaded(d.text, c, name) == (q_words + 0, q_words + 1)


@pytest.mark.parametrize("op", [DECODE, CAUSAL], ids=["decode", "causal"])
def test_an_explicit_words_mapping_moves_the_slot_and_the_scratchpad(op):
    expr = op.length if op is DECODE else op.start.affine()
    words = Words({expr.key(): 3, ("other",): 0}, 5)
    d = build_design(op, "npu2", words=words)
    plan = attention.layout(op.resolved("npu2"), as_device("npu2"), words=words)[1]
    assert (plan.slot, plan.count) == (3, 5)
    assert d.arg_bytes[-1] == 5 * 4 and "%words_buf: memref<5xi32>" in d.text
    q_words = plan.group * plan.q_elems // 2
    name = "length" if op is DECODE else "start"
    for c in range(8):
        assert _loaded(d.text, c, name) == (q_words + 3, q_words + 5)
    # Each words transfer moves the whole scratchpad once per query element.
    elements = plan.hpc * plan.q_tiles
    for t in d.layout.transfers:
        if t.fifo.startswith("words_"):
            assert (t.buffer, t.itemsize) == ("words", 4)
            moved = legality.shim_elements(
                legality.encode(t.sizes, t.strides, t.offset, t.itemsize)
            )
            np.testing.assert_array_equal(moved, np.tile(np.arange(5), elements))


def test_a_per_call_value_without_a_slot_is_named():
    with pytest.raises(ValueError, match=r"length=position \+ 1 has no scratchpad"):
        build_design(DECODE, "npu1", words=Words({("other",): 0}, 1))


def test_a_fixed_length_reads_no_words_and_joins_nothing():
    op = DecodeAttention(**LLAMA, length=100)
    d = build_design(op, "npu1", words=Words({DECODE.length.key(): 0}, 1))
    assert d.args == ("q", "k_cache", "v_cache", "out")
    assert "words" not in d.text and "qw_" not in d.text and "memref.load" not in d.text
    assert "aie.objectfifo @q_0(%shim_noc_tile_0_0, {%tile_0_2}, 2 : i32)" in d.text
    body = _core(d.text, 0)
    (call,) = [ln for ln in body.splitlines() if "@attention_bf16_chunk" in ln]
    word = call.split("(")[1].split(")")[0].split(", ")[11]
    assert re.search(rf"{re.escape(word)} = arith\.constant 100 : i32", body)


def test_the_scale_is_the_references_fp32_bits():
    assert attention.scale_bits(64) == 0x3E000000  # 1/8 exactly
    bits = np.asarray(attention.scale_bits(32), np.int32).view(np.float32)
    assert bits == np.float32(1 / math.sqrt(32))
    assert f"arith.constant {0x3E000000} : i32" in design(DECODE, "npu2")


# -- what the shim moves --------------------------------------------------------------


def _walk(dims) -> np.ndarray:
    """Element indices a ``dimensionsFromStream`` list visits, outermost first."""
    idx = np.zeros(1, np.int64)
    for size, stride in dims:
        idx = (idx[:, None] + np.arange(size)[None, :] * stride).ravel()
    return idx


def _core_kv(d, op, col: int) -> np.ndarray:
    """What column ``col``'s core receives from ``kv_<col>``, one row an element.

    Cache elements are coded ``i`` for ``k_cache`` element ``i`` and ``N + i``
    for ``v_cache`` element ``i`` (``N`` elements a cache). The shim's
    transfers are decoded (legality's address model), cut into the memory
    tile's ``kv_in`` elements, each written at the addresses of the emitted
    ``dimensionsFromStream`` of ``kv_in_<col>``, then read in order by
    ``kv_<col>`` its ``repeat_count`` times.
    """
    N = op.kv_heads * op.max_len * op.head_dim
    base = {}  # argument -> {port: element offset}
    for t in d.layout.transfers:
        if t.fifo.startswith("kv_in_") and t.buffer in ("k_cache", "v_cache"):
            base[t.buffer] = {t.buffer: 0}
    if "arena" in d.args:
        k0, v0 = (_ARENA_AT[port] for port in ("k_cache", "v_cache"))
        base["arena"] = {"k_cache": k0, "v_cache": v0}
    stream = []
    for t in d.layout.transfers:
        if t.fifo != f"kv_in_{col}":
            continue
        assert t.shim == legality.Tile(col, 0)
        e = shim_moved(t, "npu2")
        code = np.full(e.shape, -1)
        for port, off in base[t.buffer].items():
            inside = (e >= off) & (e < off + N)
            code[inside] = e[inside] - off + (N if port == "v_cache" else 0)
        assert (code >= 0).all(), "a K/V transfer reads outside both caches"
        stream.append(code)
    (fifo,) = [f for f in d.layout.fifos if f.name == f"kv_in_{col}"]
    elems = np.concatenate(stream).reshape(-1, fifo.elements)
    lines = [ln for ln in d.text.splitlines() if "aie.objectfifo @kv_" in ln]
    (write,) = [ln for ln in lines if f"@kv_in_{col}(" in ln]
    (read,) = [ln for ln in lines if f"@kv_{col}(" in ln]
    assert "dimensionsToStream" not in read and "->" not in read.split(" : ")[-1]
    dims = [
        (int(a), int(b))
        for a, b in re.findall(r"<size = (\d+), stride = (\d+)>", write)
    ]
    at = _walk(dims) if dims else np.arange(fifo.elements)
    np.testing.assert_array_equal(np.sort(at), np.arange(fifo.elements))  # a bijection
    held = np.empty_like(elems)
    held[:, at] = elems  # the n-th element arriving is written at at[n]
    found = re.search(r"repeat_count = (\d+)", read)
    repeat = int(found.group(1)) if found else 1
    out = np.concatenate([np.tile(e, repeat) for e in held])
    return out.reshape(-1, 2 * op.kv_tile * op.head_dim)


def _consumed(op, plan, col: int) -> np.ndarray:
    """What the core's loop consumes: per kv head, query tile, chunk ``[K_t | V_t]``."""
    N = op.kv_heads * op.max_len * op.head_dim
    L, D, T = op.max_len, op.head_dim, op.kv_tile
    rows = []
    for j in range(plan.hpc):
        h = col * plan.hpc + j
        for _ in range(plan.q_tiles):
            for t in range(plan.chunks):
                k = h * L * D + t * T * D + np.arange(T * D)
                rows.append(np.concatenate([k, N + k]))
    return np.stack(rows)


_ARENA_AT: dict[str, int] = {}


def _kv_case(op, dev, placement):
    d = build_design(op, dev, placement)
    r = op.resolved(dev)
    _ARENA_AT.clear()
    for port, pl in (placement or {}).items():
        _ARENA_AT[port] = pl.offset // 2
    where = {x: (x, 0) for x in ("q", "k_cache", "v_cache", "out")}
    for port, pl in (placement or {}).items():
        where[port] = ("arena", pl.offset // 2)
    plan = attention.layout(r, as_device(dev), where)[1]
    return d, r, plan


KV_CASES = [
    (DECODE, None),
    (CAUSAL, None),
    *CASES.values(),
    (DecodeAttention(**LLAMA_2048, length=9), None),
    (
        DecodeAttention(**dict(LLAMA, max_len=4096), length=PerCall("n")),
        _llama_arena(4096),
    ),
    (DECODE, _llama_arena(512, swap=True)),  # v_cache first: two descriptors
    (
        DecodeAttention(**LLAMA_2048, length=PerCall("n")),
        _llama_arena(2048, gap=(2 << 20) + 64),  # v_cache past the 20-bit step
    ),
    # Issue 34: an 8192-position cache, v_cache 2**21 words after k_cache (past
    # the step), spans of two descriptors each issued in groups with waits.
    (
        DecodeAttention(**dict(LLAMA, max_len=8192), length=PerCall("position") + 1),
        _llama_arena(8192),
    ),
    (
        CausalAttention(rows=16, **LLAMA_2048, start=PerCall("p")),
        _llama_arena(2048, gap=(2 << 20) + 64),
    ),
]


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("case", range(len(KV_CASES)))
def test_kv_reaches_each_core_chunk_by_chunk_in_the_order_it_consumes(case, dev):
    op, placement = KV_CASES[case]
    d, r, plan = _kv_case(op, dev, placement)
    N = r.kv_heads * r.max_len * r.head_dim
    for c in range(r.num_aie_columns):
        got = _core_kv(d, r, c)
        want = _consumed(r, plan, c)
        # All max_len positions, whatever the call's length or start; K and V
        # of each chunk in one element, in the core's loop order.
        np.testing.assert_array_equal(got, want)
    # Every cache element reaches the cores once per query tile of its head.
    every = np.concatenate([_core_kv(d, r, c) for c in range(plan.columns)]).ravel()
    np.testing.assert_array_equal(
        np.bincount(every, minlength=2 * N), np.full(2 * N, plan.q_tiles)
    )


def _tile_order(op, plan, col: int) -> np.ndarray:
    """Element indices of column ``col``'s query tiles in (kv head, tile, row) order."""
    rows = plan.rows
    idx = np.arange(rows * op.heads * op.head_dim).reshape(
        rows, op.kv_heads, plan.g * op.head_dim
    )
    out = []
    for j in range(plan.hpc):
        h = col * plan.hpc + j
        for qt in range(plan.q_tiles):
            out.append(idx[qt * plan.q_tile : (qt + 1) * plan.q_tile, h].ravel())
    return np.stack(out)  # (elements, q_elems)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("op", [DECODE, CAUSAL], ids=["decode", "causal"])
def test_query_and_result_transfers_follow_the_core_loop(op, dev):
    r = op.resolved(dev)
    lay, plan = attention.layout(r, as_device(dev))
    written = []
    for c in range(plan.columns):
        (out,) = [t for t in lay.transfers if t.fifo == f"out_{c}"]
        assert out.bd_id == 0 and out.shim == legality.Tile(c, 0)
        np.testing.assert_array_equal(
            shim_moved(out, "npu2"), _tile_order(r, plan, c).ravel()
        )
        written.append(shim_moved(out, "npu2"))
    total = plan.rows * r.heads * r.head_dim
    np.testing.assert_array_equal(np.sort(np.concatenate(written)), np.arange(total))
    # Pairs of columns share a query element: [column 2p tile | column 2p+1 tile].
    for grp in range(plan.columns // plan.group):
        sends = [t for t in lay.transfers if t.fifo == f"q_in_{grp}"]
        moved = np.concatenate([shim_moved(t, "npu2") for t in sends])
        cols = [_tile_order(r, plan, grp * plan.group + k) for k in range(plan.group)]
        if len(sends) == 1:  # (kv head, tile) in one walk
            expect = np.concatenate(cols, axis=1).ravel()
        else:  # one walk per kv head
            per = plan.q_tiles
            expect = np.concatenate(
                [
                    np.concatenate([c_[j * per : (j + 1) * per] for c_ in cols], axis=1)
                    for j in range(plan.hpc)
                ]
            ).ravel()
        np.testing.assert_array_equal(moved, expect)


def test_arena_placement_reads_at_the_planned_offsets():
    op = DecodeAttention(**LLAMA, length=PerCall("position") + 1)
    cache = 8 * 512 * 64 * 2
    placement = {
        "k_cache": Placement("arena", 0, cache),
        "v_cache": Placement("arena", cache, cache),
        "q": Placement("arena", 2 * cache, 4096),
    }
    d = build_design(op, "npu1", placement)
    assert d.args == ("arena", "out", "words")
    kv = [t for t in d.layout.transfers if t.fifo.startswith("kv_in_")]
    # One descriptor a column: K of its heads at their offsets, V one cache on.
    assert [t.offset for t in kv] == [c * 2 * 512 * 64 for c in range(4)]
    assert {t.buffer for t in kv} == {"arena"}
    assert {t.strides[1] for t in kv} == {cache // 2}  # v_cache at byte 524288
    assert "%arena[0, 0, 0, 524288]" in d.text  # q at byte 1048576


# -- legality -------------------------------------------------------------------------


def _core_bytes(lay: legality.Layout, tile: legality.Tile) -> int:
    total = legality.TILE_LIMITS["aie2"].stack_bytes
    for f in lay.fifos:
        if tile in (f.producer, *f.consumers):
            total += f.depth * f.element_bytes
    return total + sum(n for t, n in lay.buffers if t == tile)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize(
    "op",
    [DECODE, CAUSAL, DecodeAttention(**LLAMA, length=7)],
    ids=["decode", "causal", "fixed"],
)
def test_core_memory_is_what_check_counts_plus_the_words(op, dev):
    r = op.resolved(dev)
    lay, plan = attention.layout(r, as_device(dev))
    q_tile = plan.q_tile
    counted = r.core_bytes(q_tile, r.kv_tile) - STACK_BYTES
    extra = _DEPTH * (plan.count * 4 + (plan.group - 1) * plan.q_elems * 2)
    for c in range(plan.columns):
        assert _core_bytes(lay, legality.Tile(c, 2)) - 1024 == counted + extra


_DEPTH = 2


def test_channels_fit_every_tile_at_full_width():
    for op, dev in [(DECODE, "npu1"), (CAUSAL, "npu2")]:
        lay = build_design(op, dev).layout
        out_ch: dict = {}
        in_ch: dict = {}
        for f in lay.fifos:
            out_ch[f.producer] = out_ch.get(f.producer, 0) + 1
            for c in f.consumers:
                in_ch[c] = in_ch.get(c, 0) + 1
        cols = as_device(dev).columns
        assert sum(v for t, v in out_ch.items() if t.kind == "shim") == 2 * cols
        assert all(in_ch[legality.Tile(c, 2)] == 2 for c in range(cols))


def test_a_narrow_design_gives_each_column_its_own_query_element():
    op = DecodeAttention(**LLAMA, length=PerCall("n"), num_aie_columns=2)
    d = build_design(op, "npu2")
    plan = attention.layout(op.resolved("npu2"), as_device("npu2"))[1]
    assert plan.group == 1
    assert "aie.objectfifo @qw_1(%mem_tile_1_1, {%tile_1_2}, 2" in d.text
    # The words come from the spare shims' channels.
    (w,) = [f for f in d.layout.fifos if f.name == "words_1"]
    assert w.producer == legality.Tile(2, 0)


def _llama(kind: str, max_len: int):
    shape = dict(LLAMA, max_len=max_len)
    if kind == "decode":
        return DecodeAttention(**shape, length=PerCall("position") + 1)
    return CausalAttention(rows=16, **shape, start=PerCall("position"))


@pytest.mark.parametrize("max_len", [2048, 4096])
@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("kind", ["decode", "causal"])
def test_llama_contexts_stream_chunks_through_the_memory_tile_in_the_arena(
    kind, dev, max_len
):
    op = _llama(kind, max_len)
    d = build_design(op, dev, _llama_arena(max_len))  # legality passes
    r = op.resolved(dev)
    where = {"q": ("q", 0), "out": ("out", 0)}
    where |= {p: ("arena", pl.offset // 2) for p, pl in _llama_arena(max_len).items()}
    plan = attention.layout(r, as_device(dev), where)[1]
    cache = r.kv_heads * max_len * r.head_dim
    # one chunk an element, or two where the tiles are small (npu1's causal
    # kv_tile 32 at 4096 positions)
    assert plan.span in (1, 2) and (plan.dist, plan.kv_depth) == (cache, 2)
    chunk = 2 * r.kv_tile * r.head_dim  # [K_t | V_t]
    for f in d.layout.fifos:
        if f.name.startswith("kv_in_"):
            assert f.elements == plan.span * chunk
        elif f.name.startswith("kv_"):
            assert f.elements == chunk
    # The memory tiles hold the same bytes whatever max_len, while one
    # descriptor pairs the caches (a short cache that a memory tile holds
    # whole may be resident instead; a longer one streams unpaired spans in
    # groups with waits, issue 34).
    other = attention.layout(r.replace(max_len=6144 - max_len), as_device(dev), where)[
        1
    ]
    memtile = attention_schedule.memtile_bytes
    # (at the same span: npu1's causal tiles, kv_tile 32 since issue 28's
    # task-queue bound, let a 4096 cache put two chunks in an element)
    if other.span == plan.span:
        assert memtile(plan, as_device(dev)) == memtile(other, as_device(dev))
    per_shim: dict = {}
    for t in d.layout.transfers:
        per_shim[t.shim] = per_shim.get(t.shim, 0) + 1
        if t.fifo.startswith("kv_in_"):
            assert t.buffer == "arena" and t.strides[1] == cache
    assert max(per_shim.values()) <= as_device(dev).shim_bds


def _kv_rounds(d) -> tuple[int, int]:
    """The waits on K/V FIFOs in a design's sequence and its most K/V
    transfers of one FIFO between two of them."""
    waits, most, since = 0, 0, {}
    for line in d.text.splitlines():
        found = re.search(r"metadata = @(kv_in_\d+)", line)
        if found:
            since[found.group(1)] = since.get(found.group(1), 0) + 1
            most = max(most, since[found.group(1)])
        found = re.search(r"dma_wait \{symbol = @(kv_in_\d+)\}", line)
        if found:
            waits += 1
            since[found.group(1)] -= kv_group()
    return waits, most


def kv_group() -> int:
    return attention_schedule.kv_group(as_device("npu2"))


#: Standalone (K and V separate host buffers: two descriptors a span) at
#: Llama contexts: issued at once where the shim's descriptors and a
#: channel's task queue hold them, else in groups with waits (issue 34;
#: these were refused for the shim's 16 descriptors before).
STANDALONE = {
    ("decode", "npu1", 2048): 1,  # two kv heads a column: 8 pushes at once before
    ("decode", "npu2", 2048): 0,
    ("decode", "npu1", 4096): 1,
    ("decode", "npu2", 4096): 1,
    ("causal", "npu1", 2048): 1,
    ("causal", "npu2", 2048): 1,
    ("causal", "npu1", 4096): 1,
    ("causal", "npu2", 4096): 1,
}


@pytest.mark.parametrize("case", sorted(STANDALONE))
def test_standalone_llama_contexts_build_within_the_shims_queues(case):
    kind, dev, max_len = case
    d = build_design(_llama(kind, max_len), dev)  # legality passes
    assert "two descriptors a span (k_cache, then v_cache)" in d.text
    for f in d.layout.fifos:
        if f.name.startswith("kv_in_"):  # a span fits, not a whole head
            assert f.depth * f.element_bytes < 2 * max_len * 64 * 2
    waits, most = _kv_rounds(d)
    assert bool(waits) == bool(STANDALONE[case]), waits
    queue = legality.TILE_LIMITS[as_device(dev).arch].task_queue
    assert most <= queue
    assert all(t.bd_id < as_device(dev).shim_bds for t in d.layout.transfers)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("kind", ["decode", "causal"])
@pytest.mark.parametrize("max_len", [32768, 131072])
def test_long_contexts_build_in_groups_with_waits(kind, dev, max_len):
    """Issue 34: 32k and 128k positions (1B's shape) build in the arena: as
    many descriptors as the cache takes, at most a task queue's K/V
    transfers outstanding on a channel, every buffer descriptor id below 16,
    every token awaited (legality.check replays the sequence), and the K/V
    walks cover each chunk once per pass."""
    op = _llama(kind, max_len)
    d = build_design(op, dev, _llama_arena(max_len))
    r = op.resolved(dev)
    waits, most = _kv_rounds(d)
    assert waits > 0 and most <= 2 * kv_group()
    assert all(t.bd_id < as_device(dev).shim_bds for t in d.layout.transfers)
    assert r.max_len // r.kv_tile > as_device(dev).dma_repeat_max
    where = {"q": ("q", 0), "out": ("out", 0)}
    where |= {p: ("arena", pl.offset // 2) for p, pl in _llama_arena(max_len).items()}
    plan = attention.layout(r, as_device(dev), where)[1]
    for c in range(plan.columns):
        moved = sum(
            int(np.prod(t.sizes)) for t in d.layout.transfers if t.fifo == f"kv_in_{c}"
        )
        assert moved == 2 * plan.hpc * plan.passes * max_len * r.head_dim


def test_a_wait_free_design_is_kept_where_the_queue_holds_it():
    """The golden decode designs issue every transfer at once, as before."""
    d = build_design(
        *CASES["decode_attention_32x8x64x2048_arena"][:1],
        "npu2",
        CASES["decode_attention_32x8x64x2048_arena"][1],
    )
    assert _kv_rounds(d)[0] == 0 and not d.layout.waits


def test_v_cache_too_far_or_before_k_cache_falls_back_to_two_descriptors():
    far = _llama_arena(2048, gap=(2 << 20) + 64)
    d = build_design(_llama("decode", 2048), "npu2", far)
    assert "two descriptors a span (k_cache, then v_cache)" in d.text
    # Issue 34: refused for the shim's descriptors before; now in groups.
    d = build_design(_llama("causal", 2048), "npu2", far)
    assert "two descriptors a span (k_cache, then v_cache)" in d.text
    assert _kv_rounds(d)[0] > 0
    swapped = _llama_arena(2048, swap=True)
    d = build_design(_llama("causal", 2048), "npu2", swapped)
    assert "two descriptors a span (k_cache, then v_cache)" in d.text
    # Exactly 2**20 words apart still pairs (a step is encoded minus one).
    d = build_design(_llama("causal", 4096), "npu2", _llama_arena(4096))
    assert "(2097152 elements apart)" in d.text


def test_check_and_the_design_count_core_memory_alike():
    """Issue 15, failure 5: one account of core memory. The words and the
    partner column's query tile the design adds are the operator's terms too,
    so check() refuses what the design would (before: check passed, the
    design refused with 79368 of 65536 bytes)."""
    op = CausalAttention(
        rows=16,
        heads=64,
        kv_heads=8,
        head_dim=64,
        max_len=1536,
        start=PerCall("position"),
        kv_tile=16,
        q_tile=8,
    )
    assert op.core_bytes(8, 16, words=1, pair=2) == 79368
    with pytest.raises(RefusedShapeError, match=r"needs 79616 bytes of core memory"):
        op.resolved("npu1")  # 4 columns, paired; 32 scratchpad words counted
    with pytest.raises(RefusedShapeError, match="core memory"):
        build_design(op, "npu1")
    narrow = op.replace(num_aie_columns=2)  # each column its own query element
    narrow.resolved("npu1").check(as_device("npu1"))
    build_design(narrow, "npu1")


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("kv_tile", [16, 32, 64])
@pytest.mark.parametrize("q_tile", [1, 4, 8, 16])
@pytest.mark.parametrize("columns", [2, 4, 8])
def test_what_check_accepts_the_design_lays_out_in_core_memory(
    dev, kv_tile, q_tile, columns
):
    """Over a grid of Llama-3.2-1B prompt settings: check() passing means the
    design (reading an image's whole scratchpad) fits its cores, and a design
    refused for core memory was refused by check() first."""
    from iron.runtime.npu.designs import Words

    device = as_device(dev)
    if columns > device.columns:
        pytest.skip("more columns than the device has")
    op = CausalAttention(
        rows=16,
        heads=32,
        kv_heads=8,
        head_dim=64,
        max_len=2048,
        start=PerCall("position"),
        kv_tile=kv_tile,
        q_tile=q_tile,
        num_aie_columns=columns,
    )
    words = Words({PerCall("position").affine().key(): 0}, device.scratchpad_words)
    try:
        op.check(device)
    except RefusedShapeError:
        return  # refused first: nothing to lay out
    try:
        build_design(op, dev, words=words)
    except LegalityError as e:
        assert "core memory" not in str(e) and "buffers need" not in str(e), e


def test_many_kv_heads_on_one_column_go_in_groups_with_waits():
    """Eight kv heads through one shim: refused for its 16 descriptors
    before issue 34, now issued in groups a channel's queue holds."""
    op = DecodeAttention(**LLAMA, length=9, num_aie_columns=1)
    d = build_design(op, "npu1")
    waits, most = _kv_rounds(d)
    assert waits > 0 and most <= 2 * kv_group()
    assert all(t.bd_id < 16 for t in d.layout.transfers)


def test_the_operators_own_refusals_come_first():
    op = DecodeAttention(heads=32, kv_heads=8, head_dim=512, max_len=512, length=9)
    with pytest.raises(RefusedShapeError, match="core memory"):
        build_design(op, "npu1")
    with pytest.raises(RefusedShapeError, match="length=0"):
        build_design(DecodeAttention(**LLAMA, length=0), "npu1")


# -- the kernel -----------------------------------------------------------------------


def test_the_contract_parses_and_names_the_design_symbols():
    c = contract("attention_bf16")
    assert c.operator.startswith("DecodeAttention, CausalAttention")
    assert set(re.findall(r"(attention_bf16_\w+)\(", c.arguments)) == set(
        attention.SYMBOLS
    )
    assert "multiples of 16" in c.tile and "bf16" in c.rounding
    source = c.path.read_text(encoding="utf-8")
    for symbol in attention.SYMBOLS:
        assert f"void {symbol}(" in source
    text = design(CAUSAL, "npu1")
    assert set(re.findall(r"func\.func private @(\w+)\(", text)) == set(
        attention.SYMBOLS
    )
    # The chunk's C arity is the declared one: 5 buffers + the scalars.
    chunk = source.split("void attention_bf16_chunk(")[1].split(")")[0]
    (decl,) = re.findall(r"func\.func private @attention_bf16_chunk\(([^)]*)\)", text)
    assert chunk.count(",") == decl.count(",")


HOST_EXP = r"""
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#define IRON_ATTENTION_HOST 1
#include "attention_bf16.cc"
struct H {
  using F = float; using I = int32_t; using M = bool;
  static F splat(float v) { return v; }
  static F add(F a, F b) { return a + b; }
  static F sub(F a, F b) { return a - b; }
  static F mul(F a, F b) { return a * b; }
  static F maxf(F a, F b) { return a > b ? a : b; }
  static I nearest(F a) { return static_cast<I>(std::nearbyint(a)); }
  static F to_f(I i) { return static_cast<F>(i); }
  static F pow2(I n) {
    const uint32_t bits = static_cast<uint32_t>(n + 127) << 23;
    F f; std::memcpy(&f, &bits, sizeof f); return f;
  }
  static M less(F a, F b) { return a < b; }
  static F select(M m, F t, F f) { return m ? t : f; }
};
int main() {
  float v;
  while (std::fread(&v, sizeof v, 1, stdin) == 1) {
    const float e = iron_attention::exp_nonpos<H>(v);
    std::fwrite(&e, sizeof e, 1, stdout);
  }
}
"""


@pytest.fixture(scope="module")
def host_exp(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("attention_exp")
    (d / "host_exp.cc").write_text(HOST_EXP, encoding="utf-8")
    return compile_host(
        d,
        [d / "host_exp.cc"],
        "host_exp",
        flags=("-ffp-contract=off",),
        purpose="to build the exp harness",
    )


def _host_exp(exe: Path, x: np.ndarray) -> np.ndarray:
    done = subprocess.run(
        [str(exe)],
        input=x.astype(np.float32).tobytes(),
        capture_output=True,
        check=True,
    )
    return np.frombuffer(done.stdout, np.float32)


def test_the_kernels_exp_is_within_4_fp32_ulps(host_exp):
    rng = np.random.default_rng(3)
    x = np.concatenate(
        [
            -np.abs(rng.standard_normal(100000)).astype(np.float32) * 4,
            -rng.uniform(0, 87.3, 100000).astype(np.float32),
            np.float32([0.0, -0.0, -1e-30, -np.inf, -87.3, -88.0, -200.0]),
        ]
    ).astype(np.float32)
    got = _host_exp(host_exp, x).astype(np.float64)
    want = np.exp(x.astype(np.float64))
    normal = want >= 2.0**-126
    ulp = np.spacing(want[normal].astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(got[normal] - want[normal]) / ulp) <= 4.0
    # Below the smallest normal: 0 or within the flush floor.
    assert np.all(np.abs(got[~normal] - want[~normal]) <= 2.0**-126)
    assert got[x == -np.inf][0] == 0.0


def _kernel_order(q, k, v, limits, kv_tile, exp=np.exp) -> np.ndarray:
    """The kernel's arithmetic in numpy fp32: chunks, running max, rescale, 1/sum."""
    rows, heads, D = q.shape
    g = heads // k.shape[0]
    f = np.float32
    scale = np.asarray(attention.scale_bits(D), np.int32).view(np.float32)
    out = np.zeros((rows, heads, D), np.float32)
    for r in range(rows):
        for h in range(heads):
            kv = h // g
            qf = q[r, h].astype(f)
            m, total, acc = f(-np.inf), f(0), np.zeros(D, f)
            for first in range(0, k.shape[1], kv_tile):
                valid = min(int(limits[r]) - first, kv_tile)
                if valid <= 0:
                    continue
                keys = k[kv, first : first + valid].astype(f)
                vals = v[kv, first : first + valid].astype(f)
                s = (keys @ qf).astype(f) * scale
                top = max(m, f(s.max()))
                alpha = f(0) if m == -np.inf else f(exp(f(m - top)))
                acc = (acc * alpha).astype(f)
                total = f(total * alpha)
                w = exp((s - top).astype(f)).astype(f)
                for j in range(valid):
                    total = f(total + w[j])
                    acc = (acc + (vals[j] * w[j]).astype(f)).astype(f)
                m = top
            out[r, h] = acc * f(f(1) / total)
    return out.astype(bfloat16)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_kernels_order_meets_the_operators_tolerance(seed):
    rng = np.random.default_rng(seed)
    L, D = 128, 64
    k = rng.standard_normal((2, L, D)).astype(bfloat16)
    v = rng.standard_normal((2, L, D)).astype(bfloat16)
    k[:, 100:] = np.nan  # stale positions past every limit: never read
    op = CausalAttention(rows=6, heads=8, kv_heads=2, head_dim=D, max_len=L, start=40)
    q = (rng.standard_normal((6, 8, D)) * 2).astype(bfloat16)
    limits = 40 + 1 + np.arange(6)
    got = _kernel_order(q, k, v, limits, kv_tile=32)
    verdict = compare(got, op.reference(q, k, v), op.tolerance(q, k, v))
    assert verdict, str(verdict)
    dec = DecodeAttention(heads=8, kv_heads=2, head_dim=D, max_len=L, length=77)
    got = _kernel_order(q[:1], k, v, np.array([77]), kv_tile=16)[0]
    verdict = compare(got, dec.reference(q[0], k, v), dec.tolerance(q[0], k, v))
    assert verdict, str(verdict)
