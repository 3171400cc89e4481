"""The emulator keeps packed 4-/8-bit weights decoded (issue 35, item 6).

A quantized product's kernel model dequantizes every weight on every call:
several times the bf16 product's work, so a 4-bit model decoded at about
half bf16's speed on the emulator. The emulator now keeps each packed
weight decoded to the bf16 values its kernel computes with
(``Operator.decoded``), once per upload and within its memory budget, and
the quantized products read the copy. These tests hold it to the same bits
as reading the packed rows, at every budget, and to dropping a copy exactly
when its bytes are sent again.
"""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16

import iron
from iron.operators import QGEMM, QGEMV, DequantRows
from iron.operators.quantized import FORMATS, Q4, quantize
from iron.runtime import set_emu_memory, set_poison


@pytest.fixture(autouse=True)
def _lean():
    """Poison off: the copies are read by the lean loop a user's runs take
    (a poisoned run reads every operand as stored, step by step)."""
    set_poison(False)
    yield
    set_poison(True)  # as the session's conftest has it
    set_emu_memory(None)


def _packed(shape, fmt=Q4, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return quantize((rng.standard_normal(shape) * 0.1).astype(np.float32), fmt)


def _x(shape, seed=9) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape)).astype(bfloat16)


class Products(iron.Graph):
    """A decode step's quantized reads: a GEMV, a GEMM and an embedding lookup.

    The table is read twice, as a tied model's is: whole by the head's
    QGEMV (which takes it decoded) and a few rows at a time by DequantRows
    (which reads the packed bytes).
    """

    def __init__(self, fmt):
        self.fmt = fmt
        self.w = iron.param(_packed((96, 128), fmt, seed=1))
        self.up = iron.param(_packed((64, 128), fmt, seed=2))
        self.table = iron.param(_packed((48, 128), fmt, seed=3))

    def body(self, x, rows):
        fmt = self.fmt
        y = QGEMV.step(self.w, x)
        z = QGEMM.step(rows, self.up)
        head = QGEMV.step(self.table, x)
        looked = DequantRows.step(
            self.table[2:6], K=128, bits=fmt.bits, group=fmt.group
        )
        return y, z, head, looked


def _run(
    fmt, budget: float, poison: bool = False
) -> tuple[list[np.ndarray], int, list[np.ndarray]]:
    set_emu_memory(budget)
    set_poison(poison)
    graph = Products(fmt)
    version = graph.compile(x=(128,), rows=(8, 128))
    x, rows = _x((128,)), _x((8, 128), seed=4)
    before = version.device.widenings.kept
    out = [np.asarray(o).copy() for o in version(x, rows)]
    kept = version.device.widenings.kept - before
    again = [np.asarray(o).copy() for o in version(x, rows)]
    want = [np.asarray(w) for w in graph.reference(x, rows)]
    version.release()
    assert all(
        np.array_equal(a.view(np.uint16), b.view(np.uint16)) for a, b in zip(out, again)
    )
    return out, kept, want


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_decoded_copies_give_the_packed_rows_bits_at_every_budget(name):
    fmt = FORMATS[name]
    none, kept_none, want = _run(fmt, 1)
    every, kept_every, _ = _run(fmt, float("inf"))
    poisoned, kept_poisoned, _ = _run(fmt, float("inf"), poison=True)
    assert (
        kept_none <= 0 and kept_poisoned <= 0
    )  # no copy: every product read the packed rows
    # the three product weights decoded, two bf16 bytes an element; the
    # table too (its QGEMV reads it whole), though DequantRows reads rows
    assert kept_every == 2 * 128 * (96 + 64 + 48)
    for a, b, c, ref in zip(none, every, poisoned, want):
        assert a.dtype == b.dtype == bfloat16
        np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))
        np.testing.assert_array_equal(a.view(np.uint16), c.view(np.uint16))
        np.testing.assert_array_equal(a.view(np.uint16), ref.view(np.uint16))


def test_a_copy_is_dropped_exactly_when_its_bytes_are_sent_again():
    set_emu_memory(float("inf"))
    graph = Products(Q4)
    version = graph.compile(x=(128,), rows=(8, 128))
    x, rows = _x((128,)), _x((8, 128), seed=4)
    device = version.device
    before = device.widenings.kept
    first = [np.asarray(o).copy() for o in version(x, rows)]
    kept = device.widenings.kept - before
    assert kept > 0
    # a run's inputs sent again leave the weights' copies kept
    version(x, rows)
    assert device.widenings.kept - before == kept
    # one weight sent again drops its own copy, and only its own
    version.read(graph.up)  # its bytes back on the host, to send again
    version.push(graph.up)
    assert device.widenings.kept - before == kept - 2 * 64 * 128
    version(x, rows)
    assert device.widenings.kept - before == kept
    # new values for one weight: its copy goes, the next run decodes anew
    fresh = _packed((96, 128), Q4, seed=11)
    version.read(graph.w)[...] = fresh
    version.push(graph.w)
    out = [np.asarray(o).copy() for o in version(x, rows)]
    want = QGEMV(M=96, K=128, bits=4, group=32).reference(fresh, x)
    np.testing.assert_array_equal(out[0].view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(out[1].view(np.uint16), first[1].view(np.uint16))
    version.release()
