"""Row-family designs (RMSNorm, LayerNorm, Softmax): golden text, refusals, kernels.

Golden files under ``golden/`` are the reviewed text of weighted RMSNorm and
Softmax (a fixed length, and a per-call one read from the scratchpad) at 32
rows of 1024 on npu1 and npu2; regenerate them with
``IRON_UPDATE_GOLDEN=1 pytest packages/iron-runtime/tests/npu`` and review
the diff. The FileCheck test uses the ``filecheck`` package.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import iron
from iron.core.operator import RefusedShapeError
from iron.core.percall import PerCall
from iron.core.plan import plan
from iron.operators import LayerNorm, RMSNorm, Softmax
from iron.runtime.image import Placement, build_images
from iron.runtime.npu import LegalityError, legality
from iron.runtime.npu.designs import Words, build_design, design, rows
from iron.runtime.npu.kernels import contract

from .support import check_golden, filecheck

CASES = {
    "rms_norm_weighted_32x1024": RMSNorm(rows=32, cols=1024, weighted=True),
    "softmax_32x1024": Softmax(rows=32, cols=1024),
    "softmax_percall_32x1024": Softmax(
        rows=32, cols=1024, length=PerCall("position") + 1
    ),
}


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case, dev):
    check_golden(case, dev, design(CASES[case], dev))


VARIANTS = [
    RMSNorm(rows=64, cols=2048),
    RMSNorm(rows=64, cols=2048, weighted=True, eps=1e-6),
    LayerNorm(rows=64, cols=768),
    LayerNorm(rows=64, cols=768, weighted=True, biased=True),
    Softmax(rows=64, cols=1024),
    Softmax(rows=64, cols=1024, length=100),
]


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("op", VARIANTS, ids=repr)
def test_every_variant_designs_legally_and_matches_its_kernel(op, dev):
    d = build_design(op, dev)
    resolved = op.resolved(dev)
    assert d.text.startswith(f"// IRON design: {type(op).__name__}(")
    (symbol,) = d.kernels
    c = contract(symbol)
    assert c.operator.split()[0] == type(op).__name__
    decl = next(line for line in d.text.splitlines() if "func.func private" in line)
    assert decl.count("xbf16>") == c.buffer_count
    assert decl.count("i32") == 1 + c.scalar_count
    assert decl.count("xf32>") == ("scratch" in c.arguments)
    assert d.text.count("aie.core(") == resolved.num_aie_columns
    assert d.text.count("func.call @") == resolved.num_aie_columns
    tile = resolved.rows_per_tile * resolved.cols
    assert f"memref<{tile}xbf16>, " in decl
    ports = [i.name for i in type(op).declaration.inputs]
    flags = {"x": True, "weight": getattr(op, "weighted", False)}
    flags["bias"] = getattr(op, "biased", False)
    present = [p for p in ports if flags[p]]
    assert d.args == (*present, "out")


def test_parameters_arrive_once_per_core_on_a_depth_one_fifo():
    d = build_design(RMSNorm(rows=32, cols=1024, weighted=True), "npu2")
    params = [f for f in d.layout.fifos if f.name.startswith("weight_")]
    assert len(params) == 8 and {f.depth for f in params} == {1}
    assert {f.elements for f in params} == {1024}
    body = d.text.split("%core_0_2 = aie.core")[1].split("aie.end")[0]
    # Acquired before the tile loop, released after it.
    assert body.index("acquire @weight_0") < body.index("scf.for %t")
    assert body.rindex("release @weight_0") > body.rindex("release @out_0")
    # Every column's shim sends the whole weight from offset 0.
    assert d.text.count("%weight_buf[0, 0, 0, 0][1, 1, 1, 1024]") == 8


def test_layer_norm_weight_and_bias_share_one_fifo_in_order():
    d = build_design(LayerNorm(rows=64, cols=768, weighted=True, biased=True), "npu1")
    assert d.args == ("x", "weight", "bias", "out")
    (f,) = [f for f in d.layout.fifos if f.name == "params_0"]
    assert f.elements == 2 * 768 and f.depth == 1
    sends = [t.buffer for t in d.layout.transfers if t.fifo == "params_0"]
    assert sends == ["weight", "bias"]


def test_scalars_are_fp32_eps_bits_and_the_clamped_length():
    assert rows.kernel_of(RMSNorm(rows=16, cols=64, eps=1e-5)) == (
        "rms_norm_bf16",
        (0x3727C5AC,),
    )
    assert rows.kernel_of(Softmax(rows=16, cols=64))[1] == (64,)
    assert rows.kernel_of(Softmax(rows=16, cols=64, length=500))[1] == (64,)
    assert rows.kernel_of(Softmax(rows=16, cols=64, length=3))[1] == (3,)


def test_softmax_scratch_is_a_core_buffer_legality_counts():
    d = build_design(Softmax(rows=32, cols=1024), "npu1")
    assert 'aie.buffer(%tile_0_2) {sym_name = "scratch_0"} : memref<1024xf32>' in d.text
    assert all(n == 1024 * 4 for _, n in d.layout.buffers)
    huge = dataclasses.replace(d.layout, buffers=((legality.Tile(0, 2), 64 * 1024),))
    with pytest.raises(LegalityError, match=r"compute tile \(0, 2\).*bytes"):
        legality.check(huge, legality_device("npu1"))


def legality_device(name):
    from iron.core.device import as_device

    return as_device(name)


# -- a per-call Softmax length, read from the scratchpad -------------------------------

PER_CALL = Softmax(rows=32, cols=1024, length=PerCall("position") + 1)
_LOAD = re.compile(r"memref\.load %words(?:_\d+)?\[(%\w+)\] : memref<(\d+)xi32>")


def _core(text: str, col: int) -> str:
    return text.split(f"%core_{col}_2 = aie.core")[1].split("aie.end")[0]


def _loaded(text: str, col: int) -> tuple[int, int]:
    """The slot column ``col``'s core loads and the scratchpad's size there."""
    body = _core(text, col)
    ((ssa, words),) = _LOAD.findall(body)
    (value,) = re.findall(rf"{re.escape(ssa)} = arith\.constant (\d+) : index", text)
    return int(value), int(words)


def test_per_call_length_is_the_kernel_argument_named_length():
    assert rows.kernel_of(PER_CALL) == ("softmax_bf16", ("length",))
    assert rows.kernel_of(Softmax(rows=4, cols=64, length=PerCall("n"))) == (
        "softmax_bf16",
        ("length",),
    )


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_standalone_per_call_length_reads_slot_zero_once_per_call(dev):
    d = build_design(PER_CALL, dev)
    ncol = PER_CALL.resolved(dev).num_aie_columns
    assert d.args == ("x", "out", "words") and d.arg_bytes[-1] == 4
    assert "%words_buf: memref<1xi32>" in d.text
    for c in range(ncol):
        assert _loaded(d.text, c) == (0, 1)
        (f,) = [f for f in d.layout.fifos if f.name == f"words_{c}"]
        assert (f.depth, f.elements, f.itemsize) == (1, 1, 4)
        assert f.producer == legality.Tile(c, 0)
        assert f.consumers == (legality.Tile(c, 2),)
        body = _core(d.text, c)
        # Acquired once per call before the tile loop, released after it.
        assert body.count(f"acquire @words_{c}(Consume, 1)") == 1
        assert body.index(f"acquire @words_{c}") < body.index("scf.for %t")
        assert body.rindex(f"release @words_{c}") > body.rindex(f"release @out_{c}")
        # The loaded word is the kernel's last (length) argument, unclamped.
        (call,) = [ln for ln in body.splitlines() if "func.call" in ln]
        length = re.search(r"(%length(?:_\d+)?) = memref\.load", body).group(1)
        assert call.split("(")[1].split(")")[0].endswith(f", {length}")
    # No arith clamp: the kernel clamps (its contract says so).
    assert "arith.min" not in d.text and "arith.max" not in d.text
    assert "clamped here to 0..cols" in contract("softmax_bf16").arguments


def test_the_word_transfer_moves_the_whole_scratchpad_to_every_column():
    key = PER_CALL.length.key()
    d = build_design(PER_CALL, "npu2", words=Words({key: 3, ("other",): 0}, 5))
    assert d.args[-1] == "words" and d.arg_bytes[-1] == 5 * 4
    assert "%words_buf: memref<5xi32>" in d.text
    sends = [t for t in d.layout.transfers if t.fifo.startswith("words_")]
    assert [t.fifo for t in sends] == [f"words_{c}" for c in range(8)]
    for t in sends:
        assert (t.buffer, t.offset, t.itemsize) == ("words", 0, 4)
        moved = legality.shim_elements(
            legality.encode(t.sizes, t.strides, t.offset, t.itemsize)
        )
        np.testing.assert_array_equal(moved, np.arange(5))
        # The column's other transfers keep their ids; the words take the next.
        col = [u for u in d.layout.transfers if u.shim == t.shim]
        assert col[0] == t and t.bd_id == len(col) - 1
    assert all(_loaded(d.text, c) == (3, 5) for c in range(8))


class TwoLengths(iron.Graph):
    """Two softmaxes whose per-call lengths take two scratchpad words."""

    def body(self, x, *, position: iron.Scratchpad[int]):
        y = Softmax.step(x, length=position + 1)
        return Softmax.step(y, length=position + 3)


def test_slots_come_from_a_recorded_graphs_plan():
    with iron.use_device("npu2"):
        recording = TwoLengths().record(x=(32, 1024))
    (spec,) = build_images(plan("npu2", recording), recording)
    words = Words(spec.slot_of_key, spec.scratchpad_words)
    assert words.count == 2
    found = []
    for step in recording.steps:
        d = build_design(step.op, "npu2", words=words)
        slot = spec.slot_of_key[step.op.length.key()]
        assert {_loaded(d.text, c) for c in range(8)} == {(slot, 2)}
        found.append(slot)
    assert sorted(found) == [0, 1]


def test_a_length_without_a_slot_is_named():
    other = (Softmax(rows=4, cols=64, length=PerCall("n")).length.affine().key(),)
    with pytest.raises(
        ValueError, match=r"length=position \+ 1 has no scratchpad slot"
    ):
        build_design(PER_CALL, "npu1", words=Words(dict.fromkeys(other, 0), 1))


def test_words_without_a_per_call_parameter_add_nothing():
    op = Softmax(rows=32, cols=1024, length=100)
    key = PER_CALL.length.key()
    d = build_design(op, "npu2", words=Words({key: 0}, 1))
    assert d.args == ("x", "out") and "words" not in d.text
    assert d.text == design(op, "npu2")


def test_the_words_fifo_is_the_second_input_channel_and_legality_counts_it():
    d = build_design(PER_CALL, "npu1")
    core, shim = legality.Tile(0, 2), legality.Tile(0, 0)
    ins = [f.name for f in d.layout.fifos if core in f.consumers]
    outs = [f.name for f in d.layout.fifos if f.producer == shim]
    assert sorted(ins) == sorted(outs) == ["words_0", "x_0"]
    # One more input would exceed the core's (and the shim's) two channels.
    extra = legality.Fifo("extra_0", shim, (core,), 1, 16)
    crowded = dataclasses.replace(d.layout, fifos=(*d.layout.fifos, extra))
    with pytest.raises(LegalityError, match=r"shim tile \(0, 0\).*3 MM2S"):
        legality.check(crowded, legality_device("npu1"))


def test_per_call_length_with_arena_placement_keeps_words_last():
    placement = {
        "x": Placement("arena", 0, 32 * 1024 * 2),
        "out": Placement("arena", 65536, 32 * 1024 * 2),
    }
    d = build_design(PER_CALL, "npu2", placement)
    assert d.args == ("arena", "words")
    assert "%arena[0, 0, 0, 32768][1, 1, 4, 1024]" in d.text  # out, column 0


CHECK_PER_CALL_NPU2 = """\
CHECK: func.func private @softmax_bf16(memref<4096xbf16>, memref<4096xbf16>, \
memref<1024xf32>, i32, i32, i32)
CHECK: aie.objectfifo @words_0(%shim_noc_tile_0_0, {%tile_0_2}, 1 : i32) : \
!aie.objectfifo<memref<1xi32>>
CHECK: aie.objectfifo @x_0(%shim_noc_tile_0_0, {%tile_0_2}, 2 : i32)
CHECK: %core_0_2 = aie.core(%tile_0_2)
CHECK: scf.for %run = %c0 to %c9223372036854775807 step %c1 {
CHECK-NEXT: %words_view = aie.objectfifo.acquire @words_0(Consume, 1)
CHECK-NEXT: %words = aie.objectfifo.subview.access %words_view[0]
CHECK-NEXT: %length = memref.load %words[%c0] : memref<1xi32>
CHECK-NEXT: scf.for %t = %c0 to %c1 step %c1 {
CHECK: func.call @softmax_bf16(%x, %out, %scratch_0, %c4096_i32, %c1024_i32, %length)
CHECK: aie.objectfifo.release @out_0(Produce, 1)
CHECK-NEXT: }
CHECK-NEXT: aie.objectfifo.release @words_0(Consume, 1)
CHECK-NEXT: }
CHECK: aie.runtime_sequence @sequence(%x_buf: memref<32768xbf16>, \
%out_buf: memref<32768xbf16>, %words_buf: memref<1xi32>)
CHECK-NEXT: aiex.npu.dma_memcpy_nd(%words_buf[0, 0, 0, 0][1, 1, 1, 1][0, 0, 0, 1]) \
{id = 2 : i64, metadata = @words_0} : memref<1xi32>
CHECK-NEXT: aiex.npu.dma_memcpy_nd(%out_buf[0, 0, 0, 0]
"""


def test_filecheck_per_call_softmax_npu2(tmp_path):
    filecheck(tmp_path, CHECK_PER_CALL_NPU2, design(PER_CALL, "npu2"))


def test_filecheck_catches_a_word_released_too_early(tmp_path):
    text = design(PER_CALL, "npu2")
    moved = text.replace(
        "      aie.objectfifo.release @words_0(Consume, 1)\n", "", 1
    ).replace(
        "%length = memref.load %words[%c0] : memref<1xi32>\n",
        "%length = memref.load %words[%c0] : memref<1xi32>\n"
        "        aie.objectfifo.release @words_0(Consume, 1)\n",
        1,
    )
    assert moved != text
    with pytest.raises(AssertionError):
        filecheck(tmp_path, CHECK_PER_CALL_NPU2, moved)


def test_layer_norm_with_only_a_weight_is_refused_by_name():
    with pytest.raises(NotImplementedError, match="one without the other"):
        design(LayerNorm(rows=64, cols=768, weighted=True), "npu2")


def test_rows_too_long_for_a_core_are_refused():
    # 8192 bf16 per row: in + out double-buffered is 64 KiB alone.
    with pytest.raises(RefusedShapeError, match="core memory"):
        design(RMSNorm(rows=8, cols=8192), "npu1")
    # Softmax counts its fp32 scratch row: 5632 cols fit RMSNorm, not Softmax.
    design(RMSNorm(rows=8, cols=5632, rows_per_tile=1), "npu1")
    with pytest.raises(RefusedShapeError, match="fp32 scratch"):
        design(Softmax(rows=8, cols=5632, rows_per_tile=1), "npu1")


def test_arena_placement_offsets_rows_per_column():
    placement = {
        "x": Placement("arena", 4096, 32 * 1024 * 2),
        "weight": Placement("arena", 0, 2048),
    }
    d = build_design(
        RMSNorm(rows=32, cols=1024, weighted=True, num_aie_columns=4),
        "npu1",
        placement,
    )
    assert d.args == ("arena", "out")
    # x at byte 4096 = element 2048; column 1 starts 8 rows of 1024 further.
    assert "%arena[0, 0, 0, 10240]" in d.text
    assert d.text.count("%arena[0, 0, 0, 0][1, 1, 1, 1024]") == 4


def test_row_kernel_contracts_parse():
    expect = {
        "rms_norm_bf16": (2, 2, "RMSNorm"),
        "rms_norm_weighted_bf16": (3, 2, "RMSNorm"),
        "layer_norm_bf16": (2, 2, "LayerNorm"),
        "layer_norm_affine_bf16": (3, 2, "LayerNorm"),
        "softmax_bf16": (2, 2, "Softmax"),
    }
    for symbol, (buffers, scalars, operator) in expect.items():
        c = contract(symbol)
        assert c.symbol == symbol and c.path.name == f"{symbol}.cc"
        assert (c.buffer_count, c.scalar_count) == (buffers, scalars), symbol
        assert c.operator.split()[0] == operator
        assert "multiple of 16" in c.tile and "bf16" in c.rounding
        assert "fp32 bits of eps" in c.arguments or "length" in c.arguments
    assert "rounded to bf16" in contract("rms_norm_weighted_bf16").rounding
    assert contract("softmax_bf16").arguments.startswith(
        "x, out: bfloat16[n]; scratch: float[cols]; n: int32; cols: int32; length"
    )
