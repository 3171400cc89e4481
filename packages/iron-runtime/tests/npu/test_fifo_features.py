"""Legality's object-FIFO feature rule (issue 15, "likely failures").

An object FIFO's features (its role in a link, join or distribute, element
sizes that differ across a link or an asymmetric consumer type,
``dimensionsToStream`` / ``dimensionsFromStream``, ``repeat_count``) must
together be a combination a test of mlir-aie v1.4.1 gives one FIFO
(``legality.TESTED_FIFO_FEATURES``); the rule refuses any other by name.
The case the issue names is replayed: the attention design's memory-tile FIFO
that combined four of them. ``emitted_fifo_features`` reads the features
back from a design's text, and every golden design keeps to tested
combinations.
"""

from __future__ import annotations

import dataclasses

import pytest

from iron.core.device import as_device
from iron.core.percall import PerCall
from iron.operators import CausalAttention
from iron.runtime.npu import LegalityError, legality
from iron.runtime.npu.designs import build_design

from .support import GOLDEN

#: ``kv_in_0`` and ``kv_0`` of golden/causal_attention_16x32x8x64x512_npu1.mlir
#: as the design emitted them before the change: an asymmetric consumer type,
#: ``dimensionsToStream``, ``repeat_count`` and a link on one FIFO.
FOUR_FEATURES = """\
    aie.objectfifo @kv_in_0(%shim_noc_tile_0_0, {%mem_tile_0_1}, 2 : i32) : !aie.objectfifo<memref<65536xbf16>>
    aie.objectfifo @kv_0(%mem_tile_0_1 dimensionsToStream [<size = 8, stride = 4096>, <size = 2, stride = 32768>, <size = 64, stride = 64>, <size = 64, stride = 1>], {%tile_0_2}, 2 : i32) {repeat_count = 4 : i32} : !aie.objectfifo<memref<65536xbf16>> -> !aie.objectfifo<memref<8192xbf16>>
    aie.objectfifo.link [@kv_in_0] -> [@kv_0]([] [])
"""

CAUSAL = CausalAttention(
    rows=16, heads=32, kv_heads=8, head_dim=64, max_len=512, start=PerCall("position")
)


def test_the_attention_fifo_of_four_features_is_refused_by_name():
    found = legality.emitted_fifo_features(FOUR_FEATURES)
    assert found == {
        "kv_in_0": {"link_in"},
        "kv_0": {"link_out", "asymmetric", "dims_to_stream", "repeat"},
    }
    layout = build_design(CAUSAL, "npu1").layout
    old = [
        dataclasses.replace(f, features=found["kv_0"]) if f.name == "kv_0" else f
        for f in layout.fifos
    ]
    with pytest.raises(
        LegalityError,
        match=r"on npu1: memory tile \(0, 1\): object FIFO @kv_0 combines "
        r"\{asymmetric, dims_to_stream, link_out, repeat\}, which no test of "
        r"mlir-aie v1\.4\.1 gives one FIFO; the largest tested combinations "
        r"within it: \{dims_to_stream, link_out\}, \{link_out, repeat\}, "
        r"\{asymmetric\}; move a feature onto another FIFO of its link",
    ):
        legality.check(dataclasses.replace(layout, fifos=tuple(old)), as_device("npu1"))


def test_the_design_that_replaced_it_passes_and_declares_what_it_emits():
    d = build_design(CAUSAL, "npu1")
    legality.check_fifo_features(d.layout, as_device("npu1"))
    declared = {f.name: f.features for f in d.layout.fifos}
    assert declared == legality.emitted_fifo_features(d.text)
    assert declared["kv_in_0"] == {"link_in", "resize", "dims_from_stream"}
    assert declared["kv_0"] == {"link_out", "resize", "repeat"}


@pytest.mark.parametrize(
    "features",
    [
        {"link_out", "dims_to_stream", "repeat"},  # repeat with dimensions
        {"link_out", "asymmetric"},  # an asymmetric type on a link
        {"asymmetric", "dims_to_stream"},
    ],
    ids=str,
)
def test_other_untested_combinations_are_refused(features):
    fifo = legality.Fifo(
        "x",
        legality.Tile(0, 1),
        (legality.Tile(0, 2),),
        2,
        64,
        features=frozenset(features),
    )
    layout = legality.Layout("Op()", (legality.Tile(0, 2),), (fifo,), ())
    with pytest.raises(LegalityError, match=r"object FIFO @x combines \{"):
        legality.check(layout, as_device("npu2"))


def test_an_unknown_feature_is_named():
    fifo = legality.Fifo(
        "x",
        legality.Tile(0, 1),
        (legality.Tile(0, 2),),
        2,
        64,
        features=frozenset({"link_out", "packet"}),
    )
    layout = legality.Layout("Op()", (), (fifo,), ())
    with pytest.raises(LegalityError, match=r"@x names features \['packet'\]"):
        legality.check_fifo_features(layout, as_device("npu1"))


def test_every_tested_combination_passes_and_names_its_test():
    for features, source in legality.TESTED_FIFO_FEATURES.items():
        assert features <= set(legality.FIFO_FEATURES), features
        assert source.startswith(("hardware: ", "lowering: ")), source
        assert "Xilinx/mlir-aie v1.4.1 " in source, source
        fifo = legality.Fifo(
            "x", legality.Tile(0, 1), (legality.Tile(0, 2),), 1, 64, features=features
        )
        legality.check_fifo_features(
            legality.Layout("Op()", (), (fifo,), ()), as_device("npu2")
        )


def test_emitted_features_read_links_joins_distributes_and_sizes():
    text = """\
    aie.objectfifo @a(%shim, {%mem}, 2 : i32) : !aie.objectfifo<memref<1024xbf16>>
    aie.objectfifo @b(%mem dimensionsToStream [<size = 2, stride = 4>], {%c0}, 2 : i32) : !aie.objectfifo<memref<512xbf16>>
    aie.objectfifo @c(%mem, {%c1 dimensionsFromStream [<size = 2, stride = 4>]}, 2 : i32) : !aie.objectfifo<memref<512xbf16>>
    aie.objectfifo.link [@a] -> [@b, @c]([] [0, 512])
    aie.objectfifo @d(%c0, {%mem}, 2 : i32) : !aie.objectfifo<memref<64xi32>>
    aie.objectfifo @e(%c1, {%mem}, 1 : i32) : !aie.objectfifo<memref<1xi32>>
    aie.objectfifo @f(%mem, {%shim}, 2 : i32) {repeat_count = 1 : i32} : !aie.objectfifo<memref<65xi32>>
    aie.objectfifo.link [@d, @e] -> [@f]([0, 64] [])
    aie.objectfifo @g(%shim, {%mem}, 2 : i32) : !aie.objectfifo<memref<16xi32>>
    aie.objectfifo @h(%mem, {%c0}, 2 : i32) {repeat_count = 3 : i32} : !aie.objectfifo<memref<8xi32>>
    aie.objectfifo.link [@g] -> [@h]([] [])
    aie.objectfifo @i(%c0, {%c1}, 2 : i32) : !aie.objectfifo<memref<40xi32>> -> !aie.objectfifo<memref<10xi32>>
"""
    assert legality.emitted_fifo_features(text) == {
        "a": {"distribute_in"},
        "b": {"distribute_out", "dims_to_stream"},
        "c": {"distribute_out", "dims_from_stream"},
        "d": {"join_in"},
        "e": {"join_in"},
        "f": {"join_out"},  # a repeat of 1 is none
        "g": {"link_in", "resize"},
        "h": {"link_out", "resize", "repeat"},
        "i": {"asymmetric"},
    }


@pytest.mark.parametrize(
    "golden", sorted(p.name for p in GOLDEN.glob("*.mlir")), ids=str
)
def test_every_golden_design_keeps_to_tested_combinations(golden):
    """Every design's text, not only attention's: each FIFO's features are
    a combination v1.4.1 tests (read from the text, whatever the design
    declares)."""
    found = legality.emitted_fifo_features((GOLDEN / golden).read_text("utf-8"))
    assert found, golden
    untested = {
        name: sorted(f)
        for name, f in found.items()
        if f and f not in legality.TESTED_FIFO_FEATURES
    }
    assert not untested, untested
