"""The Sample design: golden text, FileCheck, the per-call seed, transfers, kernel.

Golden files are Llama's vocabulary (128256 bf16 logits) greedy
(``golden/sample_greedy_128256_<dev>.mlir``) and a top-40 draw at
temperature 0.8 with a per-call seed (``sample_top40_128256_<dev>.mlir``);
regenerate with ``IRON_UPDATE_GOLDEN=1``.

The kernel source ``sample.cc`` is compiled for the host
(``host_sample.cc``) and driven chunk by chunk as the design's core drives
it; its tokens must equal ``Sample.reference`` bit for bit.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from ml_dtypes import bfloat16

from iron.core.device import as_device
from iron.core.operator import RefusedShapeError
from iron.core.percall import PerCall
from iron.operators import Sample
from iron.operators.sample import draw, temperature_code, top_p_code
from iron.runtime.image import Placement
from iron.runtime.npu import LegalityError, kernels, legality
from iron.runtime.npu.designs import Words, build_design, design, sample

from .support import HERE, check_golden, compile_host, filecheck, shim_moved

VOCAB = 128256

CASES = {
    f"sample_greedy_{VOCAB}": Sample(vocab=VOCAB),
    f"sample_top40_{VOCAB}": Sample(
        vocab=VOCAB, temperature=0.8, top_k=40, seed=PerCall("seed")
    ),
}


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case, dev):
    check_golden(case, dev, design(CASES[case], dev))


CHECK_TOP40_NPU2 = """\
// CHECK: mlir-aie v1.4.1
// CHECK-LABEL: aie.device(npu2) @main {
// CHECK: func.func private @sample_reset(memref<82xi32>, i32) attributes {link_with = "sample.o"}
// CHECK: func.func private @sample_scan_bf16(memref<4008xbf16>, memref<82xi32>, i32, i32) attributes {link_with = "sample.o"}
// CHECK: func.func private @sample_pick(memref<82xi32>, memref<1xi32>, i32, i32, i32, i32) attributes {link_with = "sample.o"}
// CHECK-DAG: %[[SHIM:.*]] = aie.tile(0, 0)
// CHECK-DAG: %[[CORE:.*]] = aie.tile(0, 2)
// CHECK-NOT: aie.tile(1,
// CHECK: aie.objectfifo @logits_0(%[[SHIM]], {%[[CORE]]}, 2 : i32) : !aie.objectfifo<memref<4008xbf16>>
// CHECK: aie.objectfifo @token_0(%[[CORE]], {%[[SHIM]]}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
// CHECK: aie.objectfifo @words_0(%[[SHIM]], {%[[CORE]]}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
// CHECK: %[[LIST:.*]] = aie.buffer(%[[CORE]]) {sym_name = "topk_0"} : memref<82xi32>
// CHECK: aie.core(%[[CORE]]) {
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[CHUNKS:.*]] = arith.constant 32 : index
// CHECK: %[[N:.*]] = arith.constant 4008 : i32
// CHECK: %[[K:.*]] = arith.constant 40 : i32
// CHECK: %[[GREEDY:.*]] = arith.constant 0 : i32
// CHECK: %[[INV:.*]] = arith.constant 1067450368 : i32
// CHECK: scf.for %[[RUN:.*]] = %[[C0]] to
// CHECK: %[[W:.*]] = aie.objectfifo.subview.access %{{.*}} -> memref<1xi32>
// CHECK: %[[SEED:.*]] = memref.load %[[W]][%[[C0]]] : memref<1xi32>
// CHECK: func.call @sample_reset(%[[LIST]], %[[K]])
// CHECK: scf.for %{{.*}} = %[[C0]] to %[[CHUNKS]]
// CHECK: aie.objectfifo.acquire @logits_0(Consume, 1)
// CHECK: func.call @sample_scan_bf16(%{{.*}}, %[[LIST]], %[[N]], %[[K]])
// CHECK: aie.objectfifo.release @logits_0(Consume, 1)
// CHECK: }
// CHECK: %[[TOK:.*]] = aie.objectfifo.subview.access %{{.*}} -> memref<1xi32>
// CHECK: func.call @sample_pick(%[[LIST]], %[[TOK]], %[[K]], %[[GREEDY]], %[[INV]], %[[SEED]])
// CHECK: aie.objectfifo.release @token_0(Produce, 1)
// CHECK: aie.objectfifo.release @words_0(Consume, 1)
// CHECK: aie.end
// CHECK: aie.runtime_sequence @sequence(%[[LB:.*]]: memref<128256xbf16>, %[[TB:.*]]: memref<1xi32>, %[[WB:.*]]: memref<1xi32>) {
// CHECK: aiex.npu.dma_memcpy_nd(%[[TB]][0, 0, 0, 0][1, 1, 1, 1][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @token_0} : memref<1xi32>
// CHECK: aiex.npu.dma_memcpy_nd(%[[LB]][0, 0, 0, 0][1, 1, 64, 2004][0, 0, 2004, 1]) {id = 1 : i64, metadata = @logits_0} : memref<128256xbf16>
// CHECK: aiex.npu.dma_memcpy_nd(%[[WB]][0, 0, 0, 0][1, 1, 1, 1][0, 0, 0, 1]) {id = 2 : i64, metadata = @words_0} : memref<1xi32>
// CHECK: aiex.npu.dma_wait {symbol = @token_0}
"""

CHECK_GREEDY_NPU1 = """\
// CHECK-LABEL: aie.device(npu1) @main {
// CHECK: func.func private @sample_pick(memref<4xi32>,
// CHECK-NOT: words
// CHECK: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK: func.call @sample_scan_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %[[ONE]])
// CHECK: func.call @sample_pick(%{{.*}}, %{{.*}}, %[[ONE]], %[[ONE]], %[[ZERO]], %[[ZERO]])
// CHECK: aie.runtime_sequence @sequence(%{{.*}}: memref<128256xbf16>, %{{.*}}: memref<1xi32>) {
"""


def test_filecheck_top40_npu2(tmp_path):
    filecheck(
        tmp_path, CHECK_TOP40_NPU2, design(CASES[f"sample_top40_{VOCAB}"], "npu2")
    )


def test_filecheck_greedy_npu1(tmp_path):
    filecheck(
        tmp_path, CHECK_GREEDY_NPU1, design(CASES[f"sample_greedy_{VOCAB}"], "npu1")
    )


def test_filecheck_catches_a_seed_read_from_another_slot(tmp_path):
    op = CASES[f"sample_top40_{VOCAB}"]
    text = design(op, "npu2", words=Words({PerCall("seed").affine().key(): 3}, 4))
    with pytest.raises(AssertionError):
        filecheck(tmp_path, CHECK_TOP40_NPU2, text)


# -- the per-call seed ------------------------------------------------------------------


def _seed_load(text: str) -> tuple[str, int]:
    """The slot ``memref.load`` reads the seed from, and the words memref size."""
    m = re.search(r"%seed = memref\.load %words\[(%\w+)\] : memref<(\d+)xi32>", text)
    assert m is not None, "no seed load"
    (slot,) = re.findall(rf"{m.group(1)} = arith\.constant (\d+) : index", text)
    return slot, int(m.group(2))


def test_a_per_call_seed_is_read_from_its_scratchpad_slot():
    seed = PerCall("seed") + PerCall("position") + 1  # as the Llama decode step
    op = Sample(vocab=1024, temperature=0.7, top_k=8, seed=seed)
    words = Words({PerCall("position").affine().key(): 0, seed.key(): 5}, 8)
    d = build_design(op, "npu2", words=words)
    assert _seed_load(d.text) == ("5", 8)
    assert d.args == ("logits", "token", "words")
    assert d.arg_bytes == (1024 * 2, 4, 8 * 4)
    (t,) = [t for t in d.layout.transfers if t.fifo == "words_0"]
    assert (t.buffer, t.sizes, t.itemsize) == ("words", (1, 1, 1, 8), 4)
    # Standalone, the only per-call parameter takes slot 0 of a 1-word pad.
    alone = build_design(op, "npu2")
    assert _seed_load(alone.text) == ("0", 1)
    # The pick receives the loaded seed, not a constant.
    assert re.search(r"func\.call @sample_pick\(.*, %seed\)", d.text)


def test_a_seed_without_a_slot_is_named():
    op = Sample(vocab=1024, temperature=0.7, top_k=8, seed=PerCall("seed"))
    with pytest.raises(ValueError, match="per-call seed=seed has no scratchpad slot"):
        build_design(op, "npu1", words=Words({}, 4))


def test_greedy_ignores_top_k_and_the_seed():
    op = Sample(vocab=1024, top_k=50, seed=PerCall("seed"))
    d = build_design(op, "npu1")
    assert d.args == ("logits", "token") and "words" not in d.text
    assert 'sym_name = "topk_0"} : memref<4xi32>' in d.text  # k = 1
    assert d.layout.buffers == ((legality.Tile(0, 2), 4 * 4),)


def test_a_fixed_seed_is_a_constant_of_its_low_32_bits():
    assert sample.seed_bits(5) == 5
    assert sample.seed_bits(2**32 + 5) == 5
    assert sample.seed_bits(2**31) == -(2**31)
    d = build_design(
        Sample(vocab=64, temperature=1.0, top_k=4, seed=2**32 + 77), "npu2"
    )
    assert "words" not in d.args
    assert re.search(
        r"%(\w+) = arith\.constant 77 : i32.*func\.call @sample_pick\(.*, %\1\)",
        d.text,
        re.S,
    )


def test_inv_bits_are_the_reference_reciprocal():
    for t in (0.8, 0.3, 1.0, 2.5, 1e-30):
        want = np.float32(1) / np.float32(t)
        assert sample.inv_bits(t) == int(np.asarray(want).view(np.int32))
    assert sample.inv_bits(0.8) == 0x3FA00000  # 1 / fp32(0.8) = 1.25
    assert sample.inv_bits(0.0) == 0


# -- transfers, placement, refusals -----------------------------------------------------


@pytest.mark.parametrize("itemsize", [2, 4])
@pytest.mark.parametrize("vocab", [VOCAB, 32000, 50, 4096 * 3])
def test_the_logits_move_once_in_order_and_the_token_back(vocab, itemsize):
    op = Sample(vocab=vocab, itemsize=itemsize, temperature=1.0, top_k=4)
    d = build_design(op, "npu1")
    (t,) = [t for t in d.layout.transfers if t.fifo == "logits_0"]
    assert (t.buffer, t.itemsize) == ("logits", itemsize)
    np.testing.assert_array_equal(shim_moved(t, "npu1"), np.arange(vocab))
    (tok,) = [t for t in d.layout.transfers if t.fifo == "token_0"]
    np.testing.assert_array_equal(shim_moved(tok, "npu1"), [0])
    r = op.resolved("npu1")
    (f,) = [f for f in d.layout.fifos if f.name == "logits_0"]
    assert (f.elements, f.itemsize, f.depth) == (r.tile_size, itemsize, 2)
    assert f"arith.constant {vocab // r.tile_size} : index" in d.text
    kind = {2: "bf16", 4: "f32"}[itemsize]
    assert f"@sample_scan_{kind}(memref<{r.tile_size}x{kind}>" in d.text
    assert f"%logits_buf: memref<{vocab}x{kind}>" in d.text


def test_arena_placement_reads_and_writes_at_the_planned_offsets():
    vocab = 1024
    placement = {
        "logits": Placement("arena", 8192, vocab * 4),
        "token": Placement("arena", 4, 4),
    }
    op = Sample(vocab=vocab, itemsize=4, temperature=0.5, top_k=3, seed=1)
    d = build_design(op, "npu2", placement, arena_bytes=1 << 16)
    assert d.args == ("arena",) and d.arg_bytes == (1 << 16,)
    (lg,) = [t for t in d.layout.transfers if t.fifo == "logits_0"]
    assert (lg.offset, lg.itemsize) == (4096, 2)  # byte 8192 in bf16 elements
    moved = shim_moved(lg, "npu1")
    np.testing.assert_array_equal(moved, 4096 + np.arange(vocab * 2))
    (tok,) = [t for t in d.layout.transfers if t.fifo == "token_0"]
    np.testing.assert_array_equal(shim_moved(tok, "npu1"), [2, 3])  # bytes 4..7
    assert "aiex.npu.dma_memcpy_nd(%arena[0, 0, 0, 2][1, 1, 1, 2]" in d.text


def test_an_arena_token_off_a_word_boundary_is_refused_by_legality():
    placement = {"token": Placement("arena", 2, 4)}
    with pytest.raises(LegalityError, match=r"@token_0.*4-byte alignment"):
        build_design(Sample(vocab=64), "npu1", placement)


def test_refusals_are_named():
    with pytest.raises(RefusedShapeError, match="top_k=300"):
        build_design(Sample(vocab=1024, temperature=1.0, top_k=300), "npu2")
    with pytest.raises(RefusedShapeError, match="temperature"):
        build_design(Sample(vocab=1024, temperature=-1.0), "npu2")
    with pytest.raises(RefusedShapeError, match="even size"):
        build_design(Sample(vocab=1023), "npu1")


def test_the_list_counts_against_core_memory():
    op = Sample(vocab=8192, itemsize=4, temperature=1.0, top_k=256).resolved("npu1")
    lay = sample.layout(op, as_device("npu1"))
    assert lay.buffers == ((legality.Tile(0, 2), (2 + 2 * 256) * 4),)
    legality.check(lay, as_device("npu1"))
    # 4096 f32 double-buffered is 32 KiB; a list of 5000 entries would not fit.
    huge = dataclasses.replace(lay, buffers=((legality.Tile(0, 2), 40000),))
    with pytest.raises(LegalityError, match=r"compute tile \(0, 2\).*bytes"):
        legality.check(huge, as_device("npu1"))


def test_the_contract_parses_and_names_the_design_symbols():
    c = kernels.contract("sample")
    assert c.operator == "Sample"
    named = set(re.findall(r"(sample_\w+)\(", c.arguments))
    assert named == {
        "sample_reset",
        "sample_scan_bf16",
        "sample_scan_f32",
        "sample_pick",
        "sample_pick_call",
    }
    assert "exact" in c.rounding and "draw" in c.rounding
    source = c.path.read_text(encoding="utf-8")
    for symbol in named:
        assert f"void {symbol}(" in source
    for itemsize in (2, 4):
        d = build_design(Sample(vocab=64, itemsize=itemsize), "npu2")
        declared = set(re.findall(r"func\.func private @(\w+)\(", d.text))
        assert declared <= named and len(declared) == 3
        assert d.kernels == ("sample",)


# -- the kernel's algorithm on the host ---------------------------------------------------


@pytest.fixture(scope="module")
def host_sample(tmp_path_factory) -> Path:
    return compile_host(
        tmp_path_factory.mktemp("sample"),
        [HERE / "host_sample.cc"],
        "host_sample",
        flags=("-ffp-contract=off", "-Wall", "-Werror"),
    )


def _case(op: Sample, logits: np.ndarray, seed: int) -> bytes:
    """One host_sample case, with exactly the constants the design passes."""
    r = op.resolved("npu2")
    greedy = r.temperature == 0
    head = [
        r.itemsize,
        r.vocab,
        r.tile_size,
        1 if greedy else r.top_k,
        0,  # sample_pick
        int(greedy),
        sample.inv_bits(r.temperature),
        sample.seed_bits(seed),
    ]
    return np.asarray(head, np.int32).tobytes() + logits.tobytes()


def _call_case(
    op: Sample, logits: np.ndarray, temperature: float, k: int, top_p: float, seed: int
) -> bytes:
    """One host_sample case of ``sample_pick_call`` with one call's words."""
    r = op.resolved("npu2")
    head = [
        r.itemsize,
        r.vocab,
        r.tile_size,
        k,
        1,  # sample_pick_call
        temperature_code(temperature),
        top_p_code(top_p),
        sample.seed_bits(seed),
    ]
    return np.asarray(head, np.int32).tobytes() + logits.tobytes()


def _tokens(exe: Path, cases: list[bytes]) -> list[int]:
    done = subprocess.run([str(exe)], input=b"".join(cases), capture_output=True)
    assert done.returncode == 0, done.stderr
    return np.frombuffer(done.stdout, np.int32).tolist()


def _logits(rng, vocab: int, dtype, style: int) -> np.ndarray:
    scale = (0.05, 1.0, 4.0, 30.0)[style % 4]
    x = (rng.standard_normal(vocab) * scale).astype(np.float32)
    if style % 3 == 0:  # many exact ties
        x = np.round(x)
    x = x.astype(dtype)
    if style % 5 == 0:
        x[rng.integers(0, vocab, 3)] = np.nan
    if style % 7 == 0:
        x[rng.integers(0, vocab, 2)] = -np.inf
    if style % 11 == 0:
        x[rng.integers(0, vocab, 1)] = np.float32(-0.0)
    return x


SETTINGS = [
    (0.0, 1),
    (0.0, 40),
    (0.8, 40),
    (1.0, 1),
    (0.3, 256),
    (2.5, 7),
    (1e-38, 5),  # inv = 1e38: z_0 often overflows, the first ranked wins
    (1e30, 16),  # inv ~ 1e-30: nearly uniform weights
]


@pytest.mark.parametrize("dtype", [bfloat16, np.float32], ids=["bf16", "f32"])
def test_the_kernel_algorithm_reproduces_the_reference(host_sample, dtype):
    rng = np.random.default_rng(2024)
    cases, want = [], []
    for style in range(60):
        vocab = int(rng.choice([2, 40, 256, 1000, 8192, 10002]))
        temperature, top_k = SETTINGS[style % len(SETTINGS)]
        top_k = min(top_k, vocab)
        seed = int(rng.integers(0, 2**30))
        op = Sample(
            vocab=vocab,
            temperature=temperature,
            top_k=top_k,
            seed=seed,
            itemsize=np.dtype(dtype).itemsize,
        )
        x = _logits(rng, vocab, dtype, style)
        cases.append(_case(op, x, seed))
        want.append(int(op.reference(x)[0]))
    assert _tokens(host_sample, cases) == want


def test_llama_vocabulary_draws_match_over_seeds(host_sample):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(VOCAB) * 3).astype(bfloat16)
    cases, want = [], []
    for seed in range(40):
        op = Sample(vocab=VOCAB, temperature=0.8, top_k=40, seed=seed)
        cases.append(_case(op, x, seed))
        want.append(int(op.reference(x)[0]))
    greedy = Sample(vocab=VOCAB)
    cases.append(_case(greedy, x, 0))
    want.append(int(greedy.reference(x)[0]))
    got = _tokens(host_sample, cases)
    assert got == want
    assert len(set(got[:40])) > 3  # the seeds do draw different tokens


def test_the_host_check_can_fail(host_sample):
    # A different seed, or a temperature the design did not round as draw()
    # does, changes some tokens: the comparison above is not vacuous.
    rng = np.random.default_rng(5)
    x = rng.standard_normal(1000).astype(bfloat16)
    op = Sample(vocab=1000, temperature=1.0, top_k=64, seed=0)
    base = [_case(op, x, s) for s in range(30)]
    shifted = [_case(op, x, s + 1) for s in range(30)]
    assert _tokens(host_sample, base) != _tokens(host_sample, shifted)
    # Ties go to the lower index, chunk boundaries included.
    tied = np.zeros(1000, bfloat16)
    tied[[999, 500, 501]] = 3.0
    assert _tokens(host_sample, [_case(Sample(vocab=1000), tied, 0)]) == [500]


# -- per-call settings and the nucleus ---------------------------------------------------


def _per_call_op(vocab: int, itemsize: int = 2) -> Sample:
    return Sample(
        vocab=vocab,
        itemsize=itemsize,
        temperature=PerCall("temperature"),
        top_k=PerCall("top_k"),
        top_p=PerCall("top_p"),
        seed=PerCall("seed"),
    )


CALLS = [
    (0.0, 1, 1.0),
    (0.0, 40, 0.5),
    (0.8, 40, 1.0),
    (0.8, 40, 0.9),
    (1.0, 256, 0.95),
    (0.3, 7, 0.2),
    (2.0, 100, 1e-6),
    (1e-18, 5, 0.9),  # inv = 1e18: z_0 often overflows, the first ranked wins
    (1e15, 16, 0.5),  # nearly uniform weights: the cut is by rank
]


@pytest.mark.parametrize("dtype", [bfloat16, np.float32], ids=["bf16", "f32"])
def test_the_per_call_kernel_reproduces_the_bound_reference(host_sample, dtype):
    rng = np.random.default_rng(77)
    cases, want = [], []
    for style in range(72):
        vocab = int(rng.choice([2, 40, 256, 1000, 8192]))
        temperature, k, top_p = CALLS[style % len(CALLS)]
        k = min(k, vocab)
        seed = int(rng.integers(0, 2**30))
        op = _per_call_op(vocab, np.dtype(dtype).itemsize)
        x = _logits(rng, vocab, dtype, style)
        bound = op.bind(
            {
                "temperature": temperature_code(temperature),
                "top_k": k,
                "top_p": top_p_code(top_p),
                "seed": seed,
            }
        )
        cases.append(_call_case(op, x, temperature, k, top_p, seed))
        want.append(int(bound.reference(x)[0]))
    assert _tokens(host_sample, cases) == want


def test_the_nucleus_on_the_kernel_matters_and_matches(host_sample):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(1000) * 2).astype(bfloat16)
    op = _per_call_op(1000)
    full = [_call_case(op, x, 1.0, 256, 1.0, s) for s in range(60)]
    cut = [_call_case(op, x, 1.0, 256, 0.3, s) for s in range(60)]
    got_full, got_cut = _tokens(host_sample, full), _tokens(host_sample, cut)
    assert got_full != got_cut  # top_p is read
    assert got_cut == [draw(x, 1.0, 256, s, 0.3) for s in range(60)] and got_full == [
        draw(x, 1.0, 256, s) for s in range(60)
    ]
    # sample_pick_call with top_p 1 is sample_pick
    fixed = Sample(vocab=1000, temperature=1.0, top_k=256)
    assert _tokens(host_sample, [_case(fixed, x, s) for s in range(60)]) == got_full


def test_per_call_settings_are_loaded_from_their_slots():
    op = _per_call_op(1024)
    d = build_design(op, "npu2")
    assert d.args == ("logits", "token", "words")
    loads = dict(re.findall(r"%(\w+) = memref\.load %words\[(%\w+)\]", d.text))
    assert set(loads) == {"seed", "temperature", "top_k", "top_p"}
    # the list holds min(256, vocab) entries; reset, scan and pick get the word
    assert 'sym_name = "topk_0"} : memref<514xi32>' in d.text
    assert re.search(r"func\.call @sample_reset\(%\w+, %top_k\)", d.text)
    assert re.search(r"func\.call @sample_scan_bf16\(.*, %top_k\)", d.text)
    assert re.search(
        r"func\.call @sample_pick_call\(%\w+, %\w+, %top_k, %temperature, "
        r"%top_p, %seed\)",
        d.text,
    )
    assert "@sample_pick(" not in d.text
    words = Words(
        {
            PerCall(n).affine().key(): 3 - i
            for i, n in enumerate(("seed", "temperature", "top_k", "top_p"))
        },
        4,
    )
    placed = build_design(op, "npu1", words=words)
    assert "%top_p = memref.load" in placed.text


def test_a_fixed_nucleus_passes_constants_to_the_per_call_pick():
    op = Sample(vocab=64, temperature=0.5, top_k=8, top_p=0.75, seed=9)
    d = build_design(op, "npu2")
    assert "words" not in d.args
    codes = {temperature_code(0.5), top_p_code(0.75), 9, 8}
    found = {int(c) for c in re.findall(r"arith\.constant (-?\d+) : i32", d.text)}
    assert codes <= found
    assert "@sample_pick_call(" in d.text
    # greedy stays sample_pick with k = 1, whatever top_p says
    g = build_design(Sample(vocab=64, top_k=8, top_p=0.5), "npu2")
    assert "@sample_pick(" in g.text and "pick_call" not in g.text
    assert 'sym_name = "topk_0"} : memref<4xi32>' in g.text


def test_a_bad_fixed_top_p_is_refused_by_name():
    with pytest.raises(RefusedShapeError, match=r"top_p=1.5 is not in \(0, 1\]"):
        build_design(Sample(vocab=64, temperature=1.0, top_k=4, top_p=1.5), "npu2")
