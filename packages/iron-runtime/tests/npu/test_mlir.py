"""The MLIR text builder: names, regions, formatting, and the pinned release."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from iron.runtime.npu import mlir
from iron.runtime.npu.mlir import MLIR_AIE_RELEASE, Builder, attr_dict, memref


def test_release_is_named_in_one_place():
    assert re.fullmatch(r"v1\.4\.\d+", MLIR_AIE_RELEASE)
    src = Path(mlir.__file__).parent
    hits = [p for p in src.rglob("*.py") if '"v1.4.' in p.read_text(encoding="utf-8")]
    assert hits == [Path(mlir.__file__)]


def test_fresh_names_are_unique():
    b = Builder()
    assert [b.fresh("x"), b.fresh("x"), b.fresh("x")] == ["%x", "%x_1", "%x_2"]
    with pytest.raises(ValueError, match="not an MLIR identifier"):
        b.fresh("1x")


def test_constants_are_shared_within_a_region_and_scoped_to_it():
    b = Builder()
    with b.region("outer"):
        a = b.constant(4, "index")
        assert b.constant(4, "index") == a
        with b.region("inner"):
            assert b.constant(4, "index") == a  # visible from the enclosing region
            c = b.constant(5, "i32")
        assert b.constant(5, "i32") != c  # the inner one is out of scope
    assert b.text().count("arith.constant 4 : index") == 1


def test_attributes_sort_and_format():
    assert attr_dict({"metadata": "@of", "id": "1 : i64", "issue_token": True}) == (
        "{id = 1 : i64, issue_token = true, metadata = @of}"
    )
    with pytest.raises(TypeError, match="give a bool or a formatted string"):
        attr_dict({"id": 3})


def test_types():
    assert memref(1024) == "memref<1024xbf16>"
    assert memref((4, 8), "float32") == "memref<4x8xf32>"
    assert mlir.objectfifo_type("memref<8xi32>") == "!aie.objectfifo<memref<8xi32>>"


def test_a_small_design_prints_the_pinned_syntax():
    b = Builder()
    with b.region("module"), b.device("npu2", "main"):
        shim, core = b.tile(0, 0, "shim_noc_tile"), b.tile(0, 2)
        b.objectfifo("in", shim, [core], 2, "memref<64xbf16>")
        b.func_decl("k", ["memref<64xbf16>", "i32"], "k.o")
        with b.core(core, stack_size=1536):
            buf = b.acquire("in", "Consume", "memref<64xbf16>", "x")
            b.call("k", [buf, b.constant(64, "i32")], ["memref<64xbf16>", "i32"])
            b.release("in", "Consume")
            b.end()
        with b.runtime_sequence([("a", "memref<128xbf16>")], "sequence") as (a,):
            b.dma_memcpy_nd(
                a,
                "memref<128xbf16>",
                (0, 0, 0, 64),
                (1, 1, 1, 64),
                (0, 0, 0, 1),
                metadata="in",
                bd_id=0,
                issue_token=True,
            )
            b.dma_wait("in")
    text = b.text()
    assert "aie.device(npu2) @main {" in text
    assert (
        "aie.objectfifo @in(%shim_noc_tile_0_0, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<64xbf16>>"
        in text
    )
    assert (
        'func.func private @k(memref<64xbf16>, i32) attributes {link_with = "k.o"}'
        in text
    )
    assert "%core_0_2 = aie.core(%tile_0_2) {" in text
    # The attribute dictionary follows the body: AIEOps.td's CoreOp assembly
    # format at v1.4.1, as test/dialect/AIE/bad_stack_size.mlir writes it.
    assert "      aie.end\n    } {stack_size = 1536 : i32}\n" in text
    assert (
        "%x = aie.objectfifo.subview.access %x_view[0] : !aie.objectfifosubview<memref<64xbf16>> -> memref<64xbf16>"
        in text
    )
    assert (
        "aiex.npu.dma_memcpy_nd(%a[0, 0, 0, 64][1, 1, 1, 64][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @in} : memref<128xbf16>"
        in text
    )
    assert "aiex.npu.dma_wait {symbol = @in}" in text
    assert text.count("{") == text.count("}")


@pytest.mark.parametrize("bad", [None, 0, -1, 1024.0, True])
def test_a_core_states_a_positive_stack(bad):
    b = Builder()
    with pytest.raises(ValueError, match=r"aie\.core stack_size=.* on %tile_0_2"):
        b.core("%tile_0_2", stack_size=bad)


def test_errors_name_the_mistake():
    b = Builder()
    with pytest.raises(ValueError, match="Consume or Produce"):
        b.acquire("f", "Take", "memref<4xbf16>")
    with pytest.raises(ValueError, match=r"sizes=\[1, 4\] for @f: give four"):
        b.dma_memcpy_nd(
            "%a",
            "memref<4xbf16>",
            (0, 0, 0, 0),
            (1, 4),
            (0, 0, 0, 1),
            metadata="f",
            bd_id=0,
        )
