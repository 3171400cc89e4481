"""Row-family designs (RMSNorm, LayerNorm, Softmax): golden text, refusals, kernels.

Golden files under ``golden/`` are the reviewed text of weighted RMSNorm and
Softmax at 32 rows of 1024 on npu1 and npu2; regenerate them with
``IRON_UPDATE_GOLDEN=1 pytest packages/iron-runtime/tests/npu`` and review
the diff.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from iron.core.operator import RefusedShapeError
from iron.core.percall import PerCall
from iron.operators import LayerNorm, RMSNorm, Softmax
from iron.runtime.image import Placement
from iron.runtime.npu import LegalityError, legality
from iron.runtime.npu.designs import build_design, design, rows
from iron.runtime.npu.kernels import contract

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("IRON_UPDATE_GOLDEN", "") not in ("", "0")

CASES = {
    "rms_norm_weighted_32x1024": RMSNorm(rows=32, cols=1024, weighted=True),
    "softmax_32x1024": Softmax(rows=32, cols=1024),
}


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case, dev):
    text = design(CASES[case], dev)
    path = GOLDEN / f"{case}_{dev}.mlir"
    if UPDATE:
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} is missing: run with IRON_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), (
        f"the design of {case} on {dev} changed; review and regenerate with "
        f"IRON_UPDATE_GOLDEN=1"
    )


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


def test_per_call_length_is_refused_by_name():
    op = Softmax(rows=32, cols=1024, length=PerCall("position"))
    with pytest.raises(NotImplementedError, match="Softmax.length is the per-call"):
        design(op, "npu2")


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
