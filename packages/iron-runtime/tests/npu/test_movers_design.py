"""Mover designs (Copy, Repeat, Transpose): golden text, decoded transfers, refusals.

Golden files ``golden/{copy,repeat,transpose}_*_<dev>.mlir`` are Llama-like
shapes: a key-value cache write of one ``kv_heads * head_dim`` row at a
per-call position, an embedding gather of 16 rows of 2048, the grouped-query
Repeat of 8 kv heads to 32, and a Transpose of 64 x 2048; regenerate them
with ``IRON_UPDATE_GOLDEN=1``. Every transfer is decoded with
``legality.encode`` / ``shim_elements`` and checked to move exactly the
elements the operator's reference moves.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from ml_dtypes import bfloat16

from iron.core.access import indices
from iron.core.device import as_device
from iron.core.handle import Handle
from iron.core.operator import RefusedShapeError
from iron.core.percall import PerCall, evaluate
from iron.operators.movers import Access, Copy, Repeat, Transpose
from iron.runtime.image import Placement
from iron.runtime.npu import legality
from iron.runtime.npu.designs import Words, build_design, design, movers
from iron.runtime.npu.designs.movers_copy import TASK_QUEUE, HostBufferLimitError
from iron.runtime.npu.designs.movers_transpose import blocks_of_column
from iron.runtime.npu.kernels import KERNEL_DIR, contract

from .support import check_golden, compile_host, filecheck, shim_moved

DEVICES = ("npu1", "npu2")

# Llama 3.2 1B: 8 kv heads of 64, 32 heads, hidden 2048, vocabulary 128256.
KV_CACHE = Handle.whole((8, 2048, 64), bfloat16, "k_cache", "state")
TABLE = Handle.whole((128256, 2048), bfloat16, "embed", "input")
TOKENS = [128000, 9906, 11, 1917, 374, 264, 1296, 315]
TOKENS += [279, 6500, 1646, 13, 578, 4062, 14198, 39935]


def _kv_write():
    out = KV_CACHE[:, PerCall("position")]  # (8, 64) at a per-call column
    return Copy(shape=(8, 64)), Access.of(out)


def _gather():
    view = TABLE[TOKENS]
    return Copy(shape=view.shape, access=Access.of(view)), None


CASES = {
    "copy_kv_write_512": _kv_write,
    "copy_gather_16x2048": _gather,
    "repeat_gqa_8x1024x64_r4": lambda: (
        Repeat(rows=8, row_shape=(1024, 64), repeat=4),
        None,
    ),
    "transpose_64x2048": lambda: (Transpose(rows=64, cols=2048), None),
}


def _build(op, dev, placement=None, out_access=None, **kw):
    return movers.build(op, as_device(dev), placement, out_access=out_access, **kw)


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case, dev):
    op, out_access = CASES[case]()
    text = _build(op, dev, out_access=out_access).text
    check_golden(case, dev, text)


CHECK_KV_WRITE = """\
// CHECK: mlir-aie v1.4.1
// CHECK-LABEL: aie.device(npu1) @main {
// CHECK-NOT: aie.core
// CHECK-DAG: %[[SHIM:.*]] = aie.tile(0, 0)
// CHECK-DAG: %[[MEM:.*]] = aie.tile(0, 1)
// CHECK: aie.objectfifo @view_0(%[[SHIM]], {%[[MEM]]}, 2 : i32) : !aie.objectfifo<memref<512xbf16>>
// CHECK: aie.objectfifo @out_0(%[[MEM]], {%[[SHIM]]}, 2 : i32) : !aie.objectfifo<memref<512xbf16>>
// CHECK: aie.objectfifo.link [@view_0] -> [@out_0]([] [])
// CHECK-NOT: func.func
// CHECK: aie.runtime_sequence @sequence(%[[V:.*]]: memref<512xbf16>, %[[O:.*]]: memref<917568xbf16>) {
// CHECK-NEXT: aiex.npu.dma_memcpy_nd(%[[O]][0, 0, 0, 0][1, 1, 8, 64][0, 0, 131072, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0}
// CHECK-NEXT: aiex.npu.dma_memcpy_nd(%[[V]][0, 0, 0, 0][1, 1, 1, 512][0, 0, 0, 1]) {id = 1 : i64, metadata = @view_0}
// CHECK-NEXT: aiex.npu.dma_wait {symbol = @out_0}
// CHECK-NEXT: }
"""

CHECK_TRANSPOSE_NPU2 = """\
// CHECK-LABEL: aie.device(npu2) @main {
// CHECK: func.func private @transpose_bf16(memref<64x64xbf16>, memref<64x64xbf16>, i32, i32) attributes {link_with = "transpose_bf16.o"}
// CHECK-NOT: aie.tile({{.*}}, 1)
// CHECK: aie.objectfifo @x_7(%{{.*}}, {%[[CORE7:.*]]}, 2 : i32) : !aie.objectfifo<memref<64x64xbf16>>
// CHECK: aie.core(%tile_0_2) {
// CHECK: %[[N:.*]] = arith.constant 4 : index
// CHECK: %[[T:.*]] = arith.constant 64 : i32
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[N]] step
// CHECK: %[[X:.*]] = aie.objectfifo.subview.access {{.*}} -> memref<64x64xbf16>
// CHECK: aie.objectfifo.acquire @out_0(Produce, 1)
// CHECK: %[[OUT:.*]] = aie.objectfifo.subview.access
// CHECK: func.call @transpose_bf16(%[[X]], %[[OUT]], %[[T]], %[[T]])
// CHECK: aie.objectfifo.release @x_0(Consume, 1)
// CHECK: aie.objectfifo.release @out_0(Produce, 1)
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 0][1, 4, 64, 64][0, 64, 2048, 1]) {id = 1 : i64, metadata = @x_0}
// CHECK-NEXT: dma_memcpy_nd(%{{.*}}[0, 0, 0, 0][1, 4, 64, 64][0, 4096, 64, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0}
// CHECK: dma_wait {symbol = @out_7}
"""

CHECK_REPEAT = """\
// CHECK-NOT: aie.core
// CHECK: aie.objectfifo.link [@x_0] -> [@out_0]([] [])
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 0][4, 8, 64, 1024][65536, 262144, 1024, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0}
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 0][4, 8, 64, 1024][0, 65536, 1024, 1]) {id = 1 : i64, metadata = @x_0}
"""


def test_filecheck_kv_write(tmp_path):
    op, out_access = _kv_write()
    filecheck(tmp_path, CHECK_KV_WRITE, _build(op, "npu1", out_access=out_access).text)


def test_filecheck_transpose_npu2(tmp_path):
    filecheck(
        tmp_path, CHECK_TRANSPOSE_NPU2, design(Transpose(rows=64, cols=2048), "npu2")
    )


def test_filecheck_repeat_rereads_with_a_zero_iteration_stride(tmp_path):
    op = Repeat(rows=8, row_shape=(1024, 64), repeat=4)
    filecheck(tmp_path, CHECK_REPEAT, design(op, "npu2"))


def test_filecheck_catches_a_core_in_a_forward(tmp_path):
    text = design(Transpose(rows=64, cols=2048), "npu1")
    with pytest.raises(AssertionError):
        filecheck(tmp_path, CHECK_REPEAT, text)


# -- decoding transfers --------------------------------------------------------------


def _fifo(d, fifo: str) -> list[legality.Transfer]:
    return [t for t in d.layout.transfers if t.fifo == fifo]


def _walked(access: Access) -> np.ndarray:
    """The elements ``access``'s walks name, in order (constant offsets)."""
    parts = []
    for offset, sizes, strides in access.walks:
        grid = np.indices(sizes).reshape(len(sizes), -1)
        parts.append(offset + np.asarray(strides) @ grid)
    return np.concatenate(parts)


X = Handle.whole((64, 128), bfloat16, "x", "input")
U8 = Handle.whole((4, 64), np.uint8, "u", "input")
F32 = Handle.whole((8, 8), np.float32, "f", "input")
ROWS = Handle.whole((128, 512), bfloat16, "cache", "state")
STATIC_VIEWS = {
    "dense": X[8:24],
    "strided": X[:, 16:48],
    "every-other-row": X[::2, 64:],
    "u8-rows": U8[1:3],
    "f32-transposed": F32.T,
    "gather-fixed": TABLE[[5, 900, 901, 3, 3]],
}


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("name", sorted(STATIC_VIEWS))
def test_copy_reads_exactly_the_views_elements(name, dev):
    view = STATIC_VIEWS[name]
    access = Access.of(view)
    op = Copy(shape=view.shape, itemsize=np.dtype(view.dtype).itemsize, access=access)
    d = _build(op, dev)
    got = np.concatenate([shim_moved(t) for t in _fifo(d, "view_0")])
    np.testing.assert_array_equal(got, _walked(access))
    np.testing.assert_array_equal(got, indices(view, {}, {}).reshape(-1))
    out = np.concatenate([shim_moved(t) for t in _fifo(d, "out_0")])
    np.testing.assert_array_equal(out, np.arange(view.elements))
    assert "aie.core" not in d.text and d.kernels == ()


def test_a_run_no_descriptor_splits_becomes_a_bulk_and_a_rest():
    # 2062 bf16 = 1031 words, a prime over the 1023-word wrap.
    op = Copy(shape=(2062,))
    d = _build(op, "npu1")
    (bulk, rest) = _fifo(d, "view_0")
    assert prod_(bulk.sizes) + prod_(rest.sizes) == 2062
    got = np.concatenate([shim_moved(bulk), shim_moved(rest)])
    np.testing.assert_array_equal(got, np.arange(2062))


def prod_(xs):
    return int(np.prod(xs))


@pytest.mark.parametrize("position", [0, 5, 2047])
def test_per_call_view_is_a_window_walked_from_its_start(position):
    view = KV_CACHE[:, PerCall("position")]
    access = Access.of(view)
    op = Copy(shape=view.shape, access=access)
    d = _build(op, "npu2")
    (win,) = movers.windows(op)
    assert (win.arg, win.start, win.per_call) == ("view", 0, (64,))
    assert d.args == ("view", "out")
    assert d.arg_bytes[0] == win.elements * 2 == (7 * 2048 * 64 + 64) * 2
    start = win.start + win.per_call[0] * position
    got = np.concatenate([shim_moved(t) for t in _fifo(d, "view_0")]) + start
    want = indices(view, {"position": position}, {}).reshape(-1)
    np.testing.assert_array_equal(got, want)


def test_a_per_call_row_is_one_contiguous_window():
    view = ROWS[PerCall("position") + 3]
    op = Copy(shape=view.shape, access=Access.of(view))
    (win,) = movers.windows(op)
    assert (win.start, win.per_call, win.elements) == (3 * 512, (512,), 512)
    (t,) = _fifo(_build(op, "npu1"), "view_0")
    np.testing.assert_array_equal(shim_moved(t), np.arange(512))


def test_rows_gathered_by_a_handle_are_one_window_each():
    ids_h = Handle.whole((4,), np.int32, "ids", "input")
    view = TABLE[ids_h]
    op = Copy(shape=view.shape, access=Access.of(view))
    d = _build(op, "npu1", {"view": Placement("window", 0, 2048 * 2)})
    assert d.args == ("view_0", "view_1", "view_2", "view_3", "out")
    assert d.arg_bytes == (4096,) * 4 + (4 * 4096,)
    wins = movers.windows(op)
    assert [w.arg for w in wins] == list(d.args[:4])
    ids = np.array([7, 128255, 7, 0])
    moved = []
    for t, w, i in zip(_fifo(d, "view_0"), wins, ids):
        assert t.buffer == w.arg and t.offset == 0
        moved.append(shim_moved(t) + w.start + w.per_call[0] * i)
    want = indices(view, {}, {"ids": ids}).reshape(-1)
    np.testing.assert_array_equal(np.concatenate(moved), want)


def test_a_per_call_out_view_is_written_through_its_window():
    op, out_access = _kv_write()
    d = _build(op, "npu1", {"out": Placement("window", 0, 917568 * 2)}, out_access)
    (win,) = movers.windows(op, out_access)
    assert win.arg == "out" and win.per_call == (64,)
    (t,) = _fifo(d, "out_0")
    got = shim_moved(t) + win.start + 64 * 9
    view = KV_CACHE[:, PerCall("position")]
    np.testing.assert_array_equal(got, indices(view, {"position": 9}, {}).reshape(-1))


def test_sixteen_rows_fill_the_shim_so_the_output_drains_through_column_one():
    op, _ = _gather()
    dev = as_device("npu1")
    d = _build(op, dev)
    ins, outs = _fifo(d, "view_0"), _fifo(d, "out_0")
    assert len(ins) == 16 and {t.shim for t in ins} == {legality.Tile(0, 0)}
    assert {t.shim for t in outs} == {legality.Tile(1, 0)}
    got = np.concatenate([shim_moved(t) for t in ins])
    want = indices(TABLE[TOKENS], {}, {}).reshape(-1)
    np.testing.assert_array_equal(got, want)
    # Fifteen rows share column 0's shim with the output.
    view = TABLE[TOKENS[:15]]
    d15 = _build(Copy(shape=view.shape, access=Access.of(view)), dev)
    assert {t.shim for t in d15.layout.transfers} == {legality.Tile(0, 0)}


def _sequence_lines(text: str) -> list[str]:
    body = text.split("aie.runtime_sequence", 1)[1]
    return [ln.strip() for ln in body.splitlines() if "aiex.npu." in ln]


def _check_queues(text: str) -> None:
    """No channel queues more than TASK_QUEUE tasks; every wait takes a token.

    A wait on ``out_<c>`` also drains the inputs of column ``c``: the
    output's data came through them, so their tasks have completed.
    """
    pending: dict[str, int] = {}
    tokens: dict[str, int] = {}
    for ln in _sequence_lines(text):
        fifo = re.search(r"@(\w+)", ln).group(1)
        if "dma_wait" in ln:
            assert tokens.get(fifo, 0) >= 1, f"wait on @{fifo} with no token: {ln}"
            tokens[fifo] -= 1
            col = fifo.rsplit("_", 1)[1]
            drained = [
                f for f in pending if fifo.startswith("out_") and f.endswith(f"_{col}")
            ]
            for f in [fifo, *drained]:
                pending[f] = 0
            continue
        pending[fifo] = pending.get(fifo, 0) + 1
        assert pending[fifo] <= TASK_QUEUE, f"@{fifo} queues {pending[fifo]} tasks"
        if "issue_token = true" in ln:
            tokens[fifo] = tokens.get(fifo, 0) + 1
    assert all(n == 0 for n in tokens.values()), tokens


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_wait_takes_one_token_and_no_queue_overflows(case, dev):
    op, out_access = CASES[case]()
    _check_queues(_build(op, dev, out_access=out_access).text)


# -- Repeat ------------------------------------------------------------------------------


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize(
    "fields",
    [
        dict(rows=8, row_shape=(1024, 64), repeat=4),
        dict(rows=3, row_shape=(16,), repeat=2),
        dict(rows=5, row_shape=(4096,), repeat=3),  # a row split in two
        dict(rows=4, row_shape=(8,), repeat=64, itemsize=4),
        dict(rows=2, row_shape=(12,), repeat=5, itemsize=1),
    ],
    ids=str,
)
def test_repeat_writes_copy_r_of_row_i_at_i_repeat_plus_r(fields, dev):
    op = Repeat(**fields)
    d = _build(op, dev)
    (read,) = _fifo(d, "x_0")
    (write,) = _fifo(d, "out_0")
    row = int(np.prod(op.row_shape))
    x = np.arange(op.rows * row)
    stream = x[shim_moved(read)]
    out = np.full(op.rows * op.repeat * row, -1)
    out[shim_moved(write)] = stream
    want = op.reference(x.reshape(op.rows, *op.row_shape)).reshape(-1)
    np.testing.assert_array_equal(out, want)
    assert read.strides[0] == 0 and read.sizes[0] == op.repeat


# -- Transpose ---------------------------------------------------------------------------

TRANSPOSES = [
    dict(rows=64, cols=2048),
    dict(batch=4, rows=16, cols=24, tile_rows=8, tile_cols=8),  # runs cross rows
    dict(rows=8, cols=40, tile_rows=8, tile_cols=8),  # 5 blocks on 4 columns
    dict(batch=32, rows=64, cols=64),  # whole batches merge
    dict(rows=1024, cols=8, tile_rows=8, tile_cols=8, num_aie_columns=1),  # > 64
    dict(batch=8, rows=16, cols=16, tile_rows=8, tile_cols=8, num_aie_columns=1),
    dict(batch=3, rows=16, cols=32, tile_rows=8, tile_cols=16, num_aie_columns=2),
]


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("fields", TRANSPOSES, ids=str)
def test_transpose_moves_every_block_to_its_transposed_place(fields, dev):
    op = Transpose(**fields).resolved(dev)
    d = _build(op, dev)
    shape = ((op.batch,) if op.batch else ()) + (op.rows, op.cols)
    x = np.arange(int(np.prod(shape)))
    out = np.full(x.size, -1)
    tr, tc = op.tile_rows, op.tile_cols
    total = x.size // (tr * tc)
    calls = []
    for c in range(op.num_aie_columns):
        read = np.concatenate([shim_moved(t) for t in _fifo(d, f"x_{c}")])
        write = np.concatenate([shim_moved(t) for t in _fifo(d, f"out_{c}")])
        lo, hi = blocks_of_column(total, op.num_aie_columns, c)
        assert read.size == write.size == (hi - lo) * tr * tc
        blocks = x[read].reshape(-1, tr, tc).transpose(0, 2, 1).reshape(-1)
        out[write] = blocks
        calls.append(hi - lo)
        assert f"arith.constant {hi - lo} : index" in d.text
    np.testing.assert_array_equal(out, op.reference(x.reshape(shape)).reshape(-1))
    assert max(calls) == op.cost(as_device(dev)).calls
    _check_queues(d.text)


def test_transpose_placed_in_the_arena_reads_and_writes_at_the_offsets():
    placement = {
        "x": Placement("arena", 1024, 64 * 64 * 2),
        "out": Placement("arena", 65536, 64 * 64 * 2),
    }
    d = _build(Transpose(rows=64, cols=64), "npu1", placement)
    assert d.args == ("arena",)
    (r,), (w,) = _fifo(d, "x_0"), _fifo(d, "out_0")
    assert (r.offset, w.offset) == (512, 32768)
    np.testing.assert_array_equal(shim_moved(r) - 512, np.arange(4096))


# -- placement, arguments, refusals -------------------------------------------------------


def test_a_static_view_in_the_arena_is_walked_at_its_buffers_offset():
    view = X[:, 16:48]
    op = Copy(shape=view.shape, access=Access.of(view))
    placement = {
        "view": Placement("arena", 4096, 64 * 128 * 2),
        "out": Placement("arena", 0, 64 * 32 * 2),
    }
    d = _build(op, "npu2", placement, arena_bytes=1 << 16)
    assert d.args == ("arena",) and d.arg_bytes == (1 << 16,)
    got = np.concatenate([shim_moved(t) for t in _fifo(d, "view_0")])
    np.testing.assert_array_equal(got - 2048, _walked(op.access))
    assert "%arena[0, 0, 0, 2064]" in d.text  # byte 4096 + element 16


def test_repeat_of_int32_in_the_arena_counts_in_bf16_elements():
    # The arena is bf16 in every design (one type per full-ELF argument), so
    # an int32 Repeat walks it in bf16 elements: bytes 64 and 256 are 32, 128.
    placement = {"x": Placement("arena", 64, 128), "out": Placement("arena", 256, 512)}
    d = _build(Repeat(rows=4, row_shape=(8,), repeat=4, itemsize=4), "npu1", placement)
    assert "memref<384xbf16>" in d.text and "xi32>" in d.text  # FIFO elements
    assert "%arena[0, 0, 0, 32]" in d.text and "%arena[0, 0, 0, 128]" in d.text
    assert all(t.itemsize == 2 for t in d.layout.transfers)


def test_a_copy_of_bytes_in_the_arena_walks_bf16_elements():
    placement = {
        "view": Placement("arena", 64, 256),
        "out": Placement("arena", 512, 256),
    }
    d = _build(Copy(shape=(256,), itemsize=1), "npu2", placement)
    assert "memref<384xbf16>" in d.text
    assert "%arena[0, 0, 0, 32]" in d.text and "%arena[0, 0, 0, 256]" in d.text


def test_movers_read_no_words():
    d = build_design(Copy(shape=(512,)), "npu2", words=Words({}, 3))
    assert "words" not in d.args
    d = build_design(Transpose(rows=64, cols=64), "npu2", words=Words({}, 3))
    assert "words" not in d.args


def test_a_per_call_view_placed_in_the_arena_is_refused():
    view = KV_CACHE[:, PerCall("position")]
    op = Copy(shape=view.shape, access=Access.of(view))
    with pytest.raises(ValueError, match="place it as a 'window'"):
        _build(op, "npu1", {"view": Placement("arena", 0, 1 << 24)})


def test_sixteen_rows_by_a_handle_exceed_the_host_buffers():
    ids_h = Handle.whole((16,), np.int32, "ids", "input")
    view = TABLE[ids_h]
    op = Copy(shape=view.shape, access=Access.of(view))
    with pytest.raises(HostBufferLimitError, match="17 host buffers") as info:
        _build(op, "npu2")
    assert isinstance(info.value, NotImplementedError)
    assert "gather at most 15 rows" in str(info.value)
    ids_h = Handle.whole((15,), np.int32, "ids", "input")
    view = TABLE[ids_h]
    d = _build(Copy(shape=view.shape, access=Access.of(view)), "npu2")
    assert len(d.args) == 16


def test_a_per_call_size_has_no_design():
    sized = Access("strided", ((0, (4, 8, 2, 16), (256, 32, 16, 1)),), (), True)
    op = Copy(shape=(4, 8, 2, 16), access=sized)
    with pytest.raises(NotImplementedError, match="per-call repeat or length"):
        _build(op, "npu2")


def test_eight_byte_elements_have_no_design():
    with pytest.raises(NotImplementedError, match="8-byte elements"):
        _build(Copy(shape=(4,), itemsize=8), "npu1")


def test_operator_refusals_come_first():
    odd = Copy(shape=(4,), access=Access("dense", ((1, (4,), (1,)),)))
    with pytest.raises(RefusedShapeError, match="not 4-byte aligned"):
        _build(odd, "npu1")
    with pytest.raises(RefusedShapeError, match="iteration count 64"):
        _build(Repeat(rows=2, row_shape=(8,), repeat=65), "npu2")
    with pytest.raises(RefusedShapeError, match="multiple of 8"):
        build_design(Transpose(rows=12, cols=16), "npu1")


def test_an_out_view_is_checked_as_walks():
    op = Copy(shape=(8, 64))
    wrong = Access.of(KV_CACHE[:4, PerCall("position")])
    with pytest.raises(ValueError, match="walks 256 elements; the copy has 512"):
        _build(op, "npu1", out_access=wrong)
    rows5 = Access("gather", tuple((k * 128, (128,), (1,)) for k in (1, 3, 5, 7, 9)))
    with pytest.raises(NotImplementedError, match="more than the 4"):
        _build(Copy(shape=(640,)), "npu1", out_access=rows5)
    with pytest.raises(TypeError, match="out_access is Copy's"):
        _build(Transpose(rows=8, cols=8), "npu1", out_access=rows5)


def test_family_and_registry():
    assert movers.FAMILY == (Copy, Transpose, Repeat)
    assert movers.handles(Repeat(rows=1, repeat=1)) and not movers.handles(object())
    assert movers.windows(Transpose(rows=8, cols=8)) == ()


# -- the kernel ---------------------------------------------------------------------------


def test_the_transpose_contract_names_the_design_symbol():
    c = contract("transpose_bf16")
    assert c.operator.startswith("Transpose") and "multiples of 8" in c.tile
    assert "exact" in c.rounding
    assert "void transpose_bf16(" in c.path.read_text(encoding="utf-8")
    d = build_design(Transpose(rows=64, cols=2048), "npu2")
    assert d.kernels == ("transpose_bf16",)
    assert re.findall(r"func\.func private @(\w+)\(", d.text) == ["transpose_bf16"]


# A host stand-in for the few aie_api names the kernel uses, with aie_api's
# documented semantics (transpose: the row x col row-major matrix, transposed).
_FAKE_AIE = """\
#include <array>
#include <cstdint>
using bfloat16 = uint16_t;
namespace aie {
template <class T, unsigned N> struct vector {
  std::array<T, N> v{};
  template <unsigned M> vector<T, M> extract(unsigned i) const {
    vector<T, M> o;
    for (unsigned k = 0; k < M; ++k) o.v[k] = v[i * M + k];
    return o;
  }
};
template <unsigned N, class T> vector<T, N> load_v(const T *p) {
  vector<T, N> o;
  for (unsigned k = 0; k < N; ++k) o.v[k] = p[k];
  return o;
}
template <class T, unsigned N> void store_v(T *p, const vector<T, N> &x) {
  for (unsigned k = 0; k < N; ++k) p[k] = x.v[k];
}
template <class T, unsigned N, class... R>
vector<T, N *(1 + sizeof...(R))> concat(const vector<T, N> &a, const R &...rest) {
  vector<T, N *(1 + sizeof...(R))> o;
  unsigned at = 0;
  auto put = [&](const vector<T, N> &x) {
    for (unsigned k = 0; k < N; ++k) o.v[at++] = x.v[k];
  };
  put(a);
  (put(rest), ...);
  return o;
}
template <class T, unsigned N>
vector<T, N> transpose(const vector<T, N> &x, unsigned row, unsigned col) {
  vector<T, N> o;
  unsigned k = 0;
  for (unsigned c = 0; c < col; ++c)
    for (unsigned r = 0; r < row; ++r) o.v[k++] = x.v[r * col + c];
  return o;
}
} // namespace aie
"""

_MAIN = """\
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
extern "C" void transpose_bf16(uint16_t *, uint16_t *, int32_t, int32_t);
int main(int argc, char **argv) {
  const int rows = atoi(argv[1]), cols = atoi(argv[2]);
  std::vector<uint16_t> x(rows * cols), out(rows * cols);
  if (fread(x.data(), 2, x.size(), stdin) != x.size()) return 1;
  transpose_bf16(x.data(), out.data(), rows, cols);
  fwrite(out.data(), 2, out.size(), stdout);
}
"""


@pytest.fixture(scope="module")
def host_transpose(tmp_path_factory) -> Path:
    # The kernel is copied beside the stub iron_kernel.h: its quoted include
    # finds the stub there ahead of the real header in KERNEL_DIR.
    tmp = tmp_path_factory.mktemp("transpose")
    shutil.copy(KERNEL_DIR / "transpose_bf16.cc", tmp / "transpose_bf16.cc")
    (tmp / "iron_kernel.h").write_text(_FAKE_AIE, encoding="utf-8")
    (tmp / "main.cc").write_text(_MAIN, encoding="utf-8")
    return compile_host(
        tmp,
        [tmp / "main.cc", tmp / "transpose_bf16.cc"],
        "transpose",
        optimize="-O1",
        purpose="for the kernel's indexing",
    )


@pytest.mark.parametrize("shape", [(8, 8), (16, 24), (64, 64), (8, 64), (40, 16)])
def test_the_kernel_swaps_every_bit_pattern_into_place(host_transpose, shape):
    bits = np.random.default_rng(0).integers(0, 1 << 16, shape, dtype=np.uint16)
    done = subprocess.run(
        [str(host_transpose), str(shape[0]), str(shape[1])],
        input=bits.tobytes(),
        capture_output=True,
        check=True,
    )
    got = np.frombuffer(done.stdout, np.uint16).reshape(shape[1], shape[0])
    want = Transpose(rows=shape[0], cols=shape[1]).reference(bits.view(bfloat16))
    np.testing.assert_array_equal(got, want.view(np.uint16))


def test_per_call_evaluate_matches_the_window_rule():
    # The window starts where Access.per_call says: lo + coefficient * value.
    view = KV_CACHE[:, PerCall("position")]
    (win,) = movers.windows(Copy(shape=view.shape, access=Access.of(view)))
    assert win.start + win.per_call[0] * 11 == evaluate(
        view.layout.shift, {"position": 11}
    )
