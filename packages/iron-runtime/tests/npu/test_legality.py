"""Legality: the shim descriptor model against access patterns, and layouts.

The property tests draw (sizes, strides, offset) patterns: one that passes
the shim-transfer legality must move exactly the elements
``TensorAccessPattern(...).indices()`` lists, by the independent model of
the shim's address generation (4-D counters in words, the iteration
outermost); one that breaks a limit must be refused, naming the limit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from iron.core.device import NPU1, NPU2
from iron.core.dma import linear_walk, shim_descriptor_fits
from iron.core.tap import TensorAccessPattern
from iron.runtime.npu.legality import (
    STACK_ALIGN,
    TILE_LIMITS,
    Fifo,
    Layout,
    LegalityError,
    Tile,
    Transfer,
    check,
    core_stack,
    encode,
    shim_elements,
    shim_transfer_problems,
)

DEVICES = st.sampled_from([NPU1, NPU2])
ITEMS = st.sampled_from([1, 2, 4])


@st.composite
def patterns(draw):
    """A 4-D pattern in elements, mostly legal: word-sized inner runs, aligned strides."""
    itemsize = draw(ITEMS)
    per_word = 4 // itemsize
    inner_words = draw(st.integers(1, 12))
    sizes = (
        draw(st.integers(1, 5)),
        draw(st.integers(1, 4)),
        draw(st.integers(1, 6)),
        inner_words * per_word,
    )
    inner_stride = 1 if itemsize < 4 else draw(st.integers(1, 3))
    outer = [draw(st.integers(0, 40)) * per_word for _ in range(3)]
    strides = (*outer, inner_stride)
    offset = draw(st.integers(0, 30)) * per_word
    return sizes, strides, offset, itemsize


def _tap(sizes, strides, offset):
    last = offset + sum((s - 1) * t for s, t in zip(sizes, strides))
    return TensorAccessPattern((last + 1,), offset, sizes, strides)


@settings(max_examples=400, deadline=None)
@given(patterns(), DEVICES)
def test_a_legal_pattern_moves_exactly_the_taps_elements(pattern, dev):
    sizes, strides, offset, itemsize = pattern
    problems = shim_transfer_problems(dev, sizes, strides, offset, itemsize)
    assume(not problems)
    moved = shim_elements(encode(sizes, strides, offset, itemsize))
    assert np.array_equal(moved, _tap(sizes, strides, offset).indices().ravel())


@settings(max_examples=200, deadline=None)
@given(patterns(), DEVICES, st.integers(1, 3))
def test_repeat_moves_the_pattern_again(pattern, dev, repeat):
    sizes, strides, offset, itemsize = pattern
    assume(not shim_transfer_problems(dev, sizes, strides, offset, itemsize, repeat))
    moved = shim_elements(encode(sizes, strides, offset, itemsize, repeat))
    once = _tap(sizes, strides, offset).indices().ravel()
    assert np.array_equal(moved, np.tile(once, repeat + 1))


@settings(max_examples=300, deadline=None)
@given(patterns(), DEVICES)
def test_legal_here_is_legal_for_iron_core(pattern, dev):
    """Ours is at least as strict as iron-core's ``shim_descriptor_fits``."""
    sizes, strides, offset, itemsize = pattern
    assume(not shim_transfer_problems(dev, sizes, strides, offset, itemsize))
    dtype = {1: np.int8, 2: np.float16, 4: np.float32}[itemsize]
    assert shim_descriptor_fits(dev, _tap(sizes, strides, offset), dtype)


def _break(which, sizes, strides, offset, itemsize, dev):
    """``which`` limit broken in a legal pattern, and a word its refusal names."""
    per_word = 4 // itemsize
    sizes, strides = list(sizes), list(strides)
    if which == "iteration":
        sizes[0] = dev.dma_iteration_max + 1
    elif which == "d1 size":
        sizes[2] = 1 << dev.dma_size_bits
    elif which == "d2 size":
        sizes[1] = 1 << dev.dma_size_bits
    elif which == "d0 wrap":
        sizes[3] = (1 << dev.dma_size_bits) * per_word
    elif which == "step":
        strides[0] = ((1 << dev.dma_stride_bits) + 1) * per_word
    elif which == "alignment":
        offset += 1
    return tuple(sizes), tuple(strides), offset


@settings(max_examples=300, deadline=None)
@given(
    patterns(),
    DEVICES,
    st.sampled_from(
        ["iteration", "d1 size", "d2 size", "d0 wrap", "step", "alignment"]
    ),
)
def test_a_pattern_breaking_a_limit_is_refused(pattern, dev, which):
    sizes, strides, offset, itemsize = pattern
    assume(not shim_transfer_problems(dev, sizes, strides, offset, itemsize))
    assume(not (which == "alignment" and itemsize == 4))  # every 4-byte item aligns
    broken = _break(which, sizes, strides, offset, itemsize, dev)
    problems = shim_transfer_problems(dev, *broken, itemsize)
    assert any(which in p for p in problems), problems


@pytest.mark.parametrize(
    ("sizes", "strides", "offset", "itemsize", "word"),
    [
        ((1, 1, 4, 8), (0, 0, 8, 2), 0, 2, "contiguous"),
        ((1, 1, 4, 3), (0, 0, 8, 1), 0, 2, "whole number"),
        ((1, 1, 4, 8), (0, 0, 3, 1), 0, 2, "multiple of 4 bytes"),
        ((1, 4, 1, 8), (0, 0, 0, 1), 0, 2, "stride 0 on dimension 1"),
        ((1, 1, 1, 8), (0, 0, 0, 1), 0, 8, "1-, 2- or 4-byte"),
        ((1, 1, 1, 8), (0, 0, 0, 1), 0, 2, None),
    ],
)
def test_named_refusals(sizes, strides, offset, itemsize, word):
    problems = shim_transfer_problems(NPU2, sizes, strides, offset, itemsize)
    if word is None:
        assert problems == []
    else:
        assert any(word in p for p in problems), problems


def test_repeat_limit():
    assert any(
        "repeat 256" in p
        for p in shim_transfer_problems(NPU1, (1, 1, 1, 2), (0, 0, 0, 1), 0, 2, 256)
    )


def test_a_sub_word_innermost_stride_is_refused_by_both_checks():
    """The DMA moves 4-byte words: a bf16 element strided innermost cannot move alone."""
    tap = TensorAccessPattern((64,), 0, (1, 1, 2, 8), (0, 0, 16, 2))
    assert not shim_descriptor_fits(NPU2, tap, np.float16)
    assert shim_transfer_problems(NPU2, tap.sizes, tap.strides, 0, 2)


# -- layouts ---------------------------------------------------------------------


def _layout(depth=2, elements=1024, cores=1, extra=(), transfers=None, stack=1024):
    shim, core = Tile(0, 0), Tile(0, 2)
    fifos = (
        Fifo("in", shim, (core,), depth, elements),
        Fifo("out", core, (shim,), depth, elements),
        *extra,
    )
    if transfers is None:
        sizes, strides = linear_walk(elements, 2, NPU2)
        transfers = (Transfer("in", shim, "x", 0, sizes, strides),)
    return Layout("Test(size=1)", (core,), fifos, tuple(transfers), stack)


def test_a_fitting_layout_passes():
    check(_layout(), NPU1)


def test_core_memory_names_operator_tile_and_limit():
    with pytest.raises(LegalityError) as info:
        check(_layout(elements=8192), NPU2)  # 2 FIFOs x 2 x 16 KiB + stack > 64 KiB
    text = str(info.value)
    assert "Test(size=1) on npu2" in text and "compute tile (0, 2)" in text
    assert "65536" in text and "stack" in text


def test_stack_counts():
    # 2 x 2 x 16000 x 2 bytes = 64000: fits alone, not with an 8 KiB stack.
    check(_layout(elements=16000 // 2, stack=0), NPU1)
    with pytest.raises(LegalityError, match="8192-byte stack"):
        check(_layout(elements=16000 // 2, stack=8192), NPU1)


def test_a_layout_with_cores_states_their_stack():
    """The toolchain's 0x400 default is never assumed (issue 15, core stack)."""
    with pytest.raises(LegalityError, match="states no core stack.*core_stack"):
        check(_layout(stack=None), NPU2)
    check(Layout("Copy", (), (), ()), NPU2)  # no core, no stack


def test_core_stack_is_the_largest_kernel_plus_the_core_body_aligned(monkeypatch):
    from iron.runtime.npu import kernels

    declared = {"a": 900, "b": 1000, "c": 100}

    class Fake:
        def __init__(self, n):
            self.stack_bytes = n

    monkeypatch.setattr(kernels, "contract", lambda s: Fake(declared[s]))
    # 1000 + 128 = 1128, up to a multiple of 32: 1152.
    assert core_stack(NPU2, ["a", "b", "c"]) == 1152 == 36 * STACK_ALIGN
    assert core_stack(NPU1, ["a"]) == 1056  # 900 + 128 = 1028 -> 1056
    # Never below the toolchain's default, which upstream's kernels run with.
    assert core_stack(NPU2, ["c"]) == TILE_LIMITS["aie2p"].stack_bytes == 0x400
    with pytest.raises(ValueError, match="needs the kernels the core links"):
        core_stack(NPU2, [])


def test_a_core_over_its_memory_with_its_stated_stack_is_refused_naming_it():
    """Data that fits alone, refused once the stack the kernels' contracts
    give (stated on aie.core as stack_size) is counted, the message naming it."""
    stack = core_stack(NPU2, ["gemm"])
    data = NPU2.core_memory_bytes - stack + 32  # 32 bytes too many
    elements = data // 2 // 2 // 2  # two FIFOs, depth 2, bf16
    check(_layout(elements=elements, transfers=(), stack=0), NPU2)
    with pytest.raises(
        LegalityError,
        match=rf"need {data + stack} bytes with its {stack}-byte stack \(the aie\.core's "
        rf"stack_size, from its kernels' contracts\); it has 65536",
    ):
        check(_layout(elements=elements, transfers=(), stack=stack), NPU2)


def test_channels_per_tile():
    core, shim = Tile(0, 2), Tile(0, 0)
    extra = (Fifo("in2", shim, (core,), 1, 16), Fifo("in3", Tile(1, 0), (core,), 1, 16))
    with pytest.raises(
        LegalityError, match=r"3 S2MM DMA channels; a core tile has 2 \+ 2"
    ):
        check(_layout(extra=extra), NPU2)


def test_depth_and_buffer_descriptors():
    with pytest.raises(LegalityError, match="depth 64 is outside 1..63"):
        check(_layout(depth=64, elements=16), NPU2)
    with pytest.raises(LegalityError, match="needs 18 buffer descriptors; it has 16"):
        check(_layout(depth=9, elements=16), NPU2)


def test_tiles_outside_the_array():
    bad = (Fifo("far", Tile(4, 0), (Tile(4, 2),), 2, 16),)
    check(_layout(extra=bad), NPU2)
    with pytest.raises(
        LegalityError, match="shim tile \\(4, 0\\): outside the 4-column"
    ):
        check(_layout(extra=bad), NPU1)


def test_transfers_are_checked_with_names():
    shim = Tile(0, 0)
    t = Transfer("in", shim, "x", 1, (1, 1, 1, 16), (0, 0, 0, 1))
    with pytest.raises(LegalityError) as info:
        check(_layout(transfers=[t]), NPU1)
    text = str(info.value)
    assert "Test(size=1) on npu1" in text and "shim tile (0, 0)" in text
    assert "@in" in text and "alignment" in text


def test_bd_ids_are_unique_per_shim():
    shim = Tile(0, 0)
    t = Transfer("in", shim, "x", 0, (1, 1, 1, 16), (0, 0, 0, 1))
    with pytest.raises(LegalityError, match="id 0 for @in is reused"):
        check(_layout(transfers=[t, t]), NPU1)


def test_word_count_of_a_tap():
    # The model moves prod(sizes) elements, as the tap does.
    sizes, strides = (2, 3, 4, 8), (96, 32, 8, 1)
    d = encode(sizes, strides, 4, 2)
    assert shim_elements(d).size == math.prod(sizes)


# -- sequences with waits: buffer-descriptor reuse -------------------------------


def _t(fifo, bd, token=False, shim=None):
    shim = shim or Tile(0, 0)
    return Transfer(fifo, shim, "x", 0, (1, 1, 1, 16), (0, 0, 0, 1), 2, bd, 0, token)


def _waited(transfers, waits, extra=()):
    lay = _layout(transfers=transfers, extra=extra)
    return Layout(
        lay.operator, lay.cores, lay.fifos, lay.transfers, lay.stack_bytes, waits=waits
    )


def test_a_reused_id_needs_a_wait_in_between():
    seq = [_t("in", 0), _t("out", 1, True), _t("in", 0), _t("out", 1, True)]
    # The same ids, each block's out awaited after it: legal.
    check(_waited(seq, ((2, "out"), (4, "out"))), NPU1)
    # Both tokens awaited only at the end: id 0 is reused while in use.
    with pytest.raises(
        LegalityError, match=r"shim tile \(0, 0\): buffer descriptor id 0 for @in "
    ) as info:
        check(_waited(seq, ((4, "out"), (4, "out"))), NPU1)
    assert "transfer 2" in str(info.value) and "needs a wait" in str(info.value)


def test_a_wait_retires_only_what_was_issued_up_to_its_token():
    # out's token is issued before in's first use: waiting for it does not
    # prove in's transfer done, so its id is not free.
    seq = [_t("out", 1, True), _t("in", 0), _t("in", 0), _t("out", 2, True)]
    with pytest.raises(LegalityError, match="id 0 for @in"):
        check(_waited(seq, ((2, "out"), (4, "out"))), NPU2)


def test_a_wait_retires_only_its_own_shims_ids():
    far = Tile(1, 0)
    extra = (Fifo("far", Tile(1, 2), (far,), 2, 16),)
    seq = [
        _t("in", 0),
        _t("far", 0, True, far),
        _t("in", 0),
        _t("far", 1, True, far),
    ]
    with pytest.raises(LegalityError, match=r"shim tile \(0, 0\).*id 0 for @in"):
        check(_waited(seq, ((2, "far"), (4, "far")), extra), NPU1)


def test_waits_and_tokens_must_pair():
    with pytest.raises(LegalityError, match="wait on @out after 1 transfers has no"):
        check(_waited([_t("in", 0)], ((1, "out"),)), NPU1)
    with pytest.raises(LegalityError, match="token of @out's transfer 2 is never"):
        seq = [_t("in", 0), _t("out", 1, True), _t("out", 2, True)]
        check(_waited(seq, ((2, "out"),)), NPU1)
    with pytest.raises(LegalityError, match="position 9, outside"):
        check(_waited([_t("out", 1, True)], ((9, "out"),)), NPU1)


def test_a_fifo_stays_within_its_task_queue():
    fine = [_t("in", i) for i in range(4)] + [_t("out", 5, True)]
    check(_waited(fine, ((5, "out"),)), NPU2)
    over = [_t("in", i) for i in range(5)] + [_t("out", 5, True)]
    with pytest.raises(LegalityError, match="5 transfers outstanding.*holds 4"):
        check(_waited(over, ((6, "out"),)), NPU2)


def test_a_wait_free_sequence_keeps_each_fifo_within_its_task_queue():
    """Issue 28 (C3): without waits every transfer of a FIFO is in its
    channel's queue until the end: four fit, a fifth is refused by name."""
    fine = [_t("in", i) for i in range(4)] + [_t("out", 5)]
    check(_layout(transfers=fine), NPU2)
    over = [_t("in", i) for i in range(5)] + [_t("out", 5)]
    with pytest.raises(
        LegalityError,
        match=r"Test\(size=1\) on npu2: .*@in pushes 5 transfers .* holds 4",
    ):
        check(_layout(transfers=over), NPU2)


def test_with_waits_ids_stay_in_range():
    with pytest.raises(LegalityError, match="id 16 for @in is outside 0..15"):
        check(_waited([_t("in", 16), _t("out", 1, True)], ((2, "out"),)), NPU1)


def test_an_offset_at_2_to_the_31_bytes_is_refused_by_name():
    """Issue 15, failure 4: aiecc patches a transfer's byte offset as an i32."""
    from iron.runtime.npu.legality import ARG_OFFSET_LIMIT

    assert ARG_OFFSET_LIMIT == 2**31
    below = (2**31 - 64) // 2  # bf16 elements
    assert not shim_transfer_problems(NPU2, (1, 1, 1, 32), (0, 0, 0, 1), below, 2)
    (problem,) = shim_transfer_problems(NPU2, (1, 1, 1, 32), (0, 0, 0, 1), 2**30, 2)
    assert "2147483648 bytes is at or past 2^31" in problem
    assert "argument of its own" in problem
