"""The emulator's memory: its budget for copies of weights, host views released.

Issue 20, target 6: decoding a 135M-parameter checkpoint held the weights
four times over (host view, device copy, float32 copy, mapped file). The
float32 copies now fit a budget (``IRON_EMU_MEMORY``/``set_emu_memory``),
the weights beyond it are widened per call to the same results, and the
host view of an uploaded weight is given back.
"""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest
from ml_dtypes import bfloat16

import iron
from iron.core.device import NPU2
from iron.operators import GEMM, GEMV
from iron.runtime import RunError, set_emu_memory
from iron.runtime.emu import EmuBuffer, EmuDevice
from iron.runtime.emu.memory import DEFAULT_EMU_MEMORY, emu_memory


@pytest.fixture(autouse=True)
def _budget_reset():
    yield
    set_emu_memory(None)


def _bf16(shape, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 0.1).astype(bfloat16)


# -- the knob --------------------------------------------------------------------------


def test_the_default_budget_and_the_environment(monkeypatch):
    monkeypatch.delenv("IRON_EMU_MEMORY", raising=False)
    assert emu_memory() == DEFAULT_EMU_MEMORY == 4
    monkeypatch.setenv("IRON_EMU_MEMORY", "inf")
    assert math.isinf(emu_memory())
    monkeypatch.setenv("IRON_EMU_MEMORY", " 1.5 ")
    assert emu_memory() == 1.5
    set_emu_memory(1)  # the call wins over the environment
    assert emu_memory() == 1.0
    set_emu_memory(None)
    assert emu_memory() == 1.5


@pytest.mark.parametrize("bad", [0.5, 0, -1, float("nan"), "lots", None])
def test_a_bad_budget_is_refused_naming_it(bad):
    if bad is None:
        set_emu_memory(None)  # None is the reset, not a bad value
        return
    with pytest.raises(ValueError, match=r"budget=.*number >= 1.*inf keeps all"):
        set_emu_memory(bad)


def test_a_bool_budget_is_a_type_error():
    with pytest.raises(TypeError, match="is a bool"):
        set_emu_memory(True)


def test_a_bad_environment_budget_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("IRON_EMU_MEMORY", "0.9")
    with pytest.raises(ValueError, match=r"IRON_EMU_MEMORY='0.9' is below 1"):
        emu_memory()
    with pytest.raises(ValueError, match="is below 1"):  # every read, not once
        emu_memory()
    monkeypatch.setenv("IRON_EMU_MEMORY", "2")  # a changed value is read anew
    assert emu_memory() == 2.0


def test_the_device_memory_counts_buffers_as_they_come_and_go():
    device = EmuDevice(NPU2)
    try:
        base = device.widenings.device_bytes()
        kept = device.alloc(4096, "kept")
        freed = device.alloc(1000, "freed")
        dropped = device.alloc(300, "dropped")
        assert device.widenings.device_bytes() == base + 5396
        freed.free()
        freed.free()  # a second free counts nothing again
        assert device.widenings.device_bytes() == base + 4396
        del dropped
        gc.collect()
        assert device.widenings.device_bytes() == base + 4096
        kept.free()
        del kept
        gc.collect()  # freed, then dropped: counted out once
        assert device.widenings.device_bytes() == base
    finally:
        device.close()


# -- the budget ------------------------------------------------------------------------


def _weights_buffer(device: EmuDevice, *shapes) -> tuple[EmuBuffer, list]:
    """A buffer holding bf16 weights of ``shapes`` back to back, on the device."""
    arrays = [_bf16(s, seed=i) for i, s in enumerate(shapes)]
    bo = device.alloc(sum(a.nbytes for a in arrays), "arena")
    places, offset = [], 0
    for a in arrays:
        bo.host()[offset : offset + a.nbytes] = a.view(np.uint8).reshape(-1)
        places.append((offset, a.nbytes, a.shape, a))
        offset += a.nbytes
    bo.to_device()
    return bo, places


def test_copies_are_kept_first_come_within_the_budget():
    device = EmuDevice(NPU2)
    try:
        # four weights of 1/4 of the device memory each: a float32 copy of
        # one is half the device memory
        bo, places = _weights_buffer(device, (64, 64), (64, 64), (64, 64), (64, 64))
        set_emu_memory(1.5)  # room for one copy
        first = bo.widened(*places[0][:3])
        second = bo.widened(*places[1][:3])
        assert first.dtype == np.float32 and second.dtype == bfloat16
        assert device.widenings.kept == first.nbytes
        assert bo.widened(*places[0][:3]) is first  # kept
        # the values are the same either way
        for (_, _, _, values), got in zip(places, (first, second)):
            np.testing.assert_array_equal(
                got.astype(np.float32), values.astype(np.float32)
            )
        # a lowered budget drops the copy when its weight is next read
        set_emu_memory(1)
        assert bo.widened(*places[0][:3]).dtype == bfloat16
        assert device.widenings.kept == 0
        set_emu_memory(float("inf"))
        kept = [bo.widened(*p[:3]) for p in places]
        assert all(k.dtype == np.float32 for k in kept)
        assert device.widenings.kept == 2 * bo.nbytes
        bo.free()
        assert device.widenings.kept == 0
    finally:
        device.close()


def test_a_stale_copy_gives_its_room_back():
    device = EmuDevice(NPU2)
    try:
        bo, places = _weights_buffer(device, (64, 64), (64, 64), (64, 64), (64, 64))
        set_emu_memory(1.5)
        first = bo.widened(*places[0][:3])
        bo.to_device(0, 16)  # stales the copy
        # the second weight now takes the room the stale copy held
        assert bo.widened(*places[1][:3]).dtype == np.float32
        assert bo.widened(*places[0][:3]).dtype == bfloat16
        assert device.widenings.kept == first.nbytes
    finally:
        device.close()


class TwoProducts(iron.Graph):
    """A decode step's products: a GEMV and a GEMM over large held bf16 weights."""

    def __init__(self):
        # a GEMV weight of 2.3 MB in float32 (widened in row blocks when not
        # kept) and a GEMM weight of 18.9 MB (made in column blocks either way)
        self.w = iron.param(_bf16((1000, 576), seed=1))
        self.head = iron.param(_bf16((8192, 576), seed=2))

    def body(self, x, rows):
        y = GEMV.step(self.w, x)
        return y, GEMM.step(rows, self.head, b_transposed=True)


def _run_products(budget: float) -> tuple[list[np.ndarray], int]:
    set_emu_memory(budget)
    graph = TwoProducts()
    version = graph.compile(x=(576,), rows=(8, 576))
    x, rows = _bf16((576,), seed=3), _bf16((8, 576), seed=4)
    # the session's device is shared: count the copies this call made
    before = version.device.widenings.kept
    out = [np.asarray(o).copy() for o in version(x, rows)]
    kept = version.device.widenings.kept - before
    want = graph.reference(x, rows)
    version.release()
    return out + [np.asarray(w) for w in want], kept


def test_results_are_the_same_bits_with_no_copies_and_with_every_copy():
    """Per-call widening (budget 1) and kept float32 copies (inf): same bits."""
    without, kept_none = _run_products(1)
    with_all, kept_all = _run_products(float("inf"))
    assert kept_none <= 0  # every weight was widened per call (none kept)
    # each weight is kept in float32 only where its kernel model reads
    # float32 (without the compiled matvec: GEMV's and GEMM's read bf16)
    gemv_copy = 4 * 1000 * 576 if GEMV(M=1000, K=576).reads_float32(0) else 0
    gemm = GEMM(M=8, K=576, N=8192, b_transposed=True)
    gemm_copy = 4 * 8192 * 576 if gemm.reads_float32(1) else 0
    assert kept_all == gemm_copy + gemv_copy
    for a, b in zip(without, with_all):
        assert a.dtype == b.dtype == bfloat16
        np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))
    # and both are the host's reference, bit for bit
    for got, want in zip(without[:2], without[2:]):
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


# -- host views released after upload ----------------------------------------------


def test_a_released_range_gives_back_its_pages_and_keeps_its_neighbours():
    page = 4096
    bo = EmuBuffer(4 * page, "arena")
    values = np.arange(4 * page, dtype=np.uint32).astype(np.uint8)
    bo.host()[:] = values
    bo.to_device()
    bo.release_host(100, 2 * page + 100)  # [100, 2 pages + 200)
    host = bo.host()
    if bo._mapped is not None:  # pages given back: they read zero now
        assert not host[page : 2 * page].any()
    # bytes outside the range, on shared pages, are intact
    np.testing.assert_array_equal(host[:100], values[:100])
    np.testing.assert_array_equal(host[2 * page + 200 :], values[2 * page + 200 :])
    np.testing.assert_array_equal(bo.device, values)  # the device keeps them


def test_a_released_host_view_is_never_sent_stale():
    page = 4096
    bo = EmuBuffer(4 * page, "weights")
    bo.host()[:] = 7
    bo.to_device()
    bo.release_host(page, 2 * page)
    with pytest.raises(RunError, match=r"weights: bytes \[4096, 12288\) of the host"):
        bo.to_device()
    bo.to_device(0, page)  # bytes never released are sent as before
    bo.from_device(page, page)  # brought back: the host holds them again
    bo.host()[page : 2 * page] = 9
    bo.to_device(page, page)
    assert (bo.device[page : 2 * page] == 9).all()
    with pytest.raises(RunError, match=r"bytes \[8192, 12288\)"):
        bo.to_device(page, 2 * page)  # the rest is still released


_HELD = _bf16((256, 64), seed=5)


class Held(iron.Graph):
    """``w @ x`` with ``w`` a held weight of several pages."""

    def __init__(self):
        self.w = iron.param(_HELD)

    def body(self, x):
        return GEMV.step(self.w, x)


def test_an_uploaded_weight_is_read_back_and_pushed_again_correctly():
    graph = Held()
    version = graph.compile(x=(64,))
    x = _bf16((64,), seed=6)
    first = np.asarray(version(x)).copy()
    arena = version.arena.buffer()
    assert arena._released  # the weight's host view was given back
    # pushing it unread would send what the host no longer holds: refused
    with pytest.raises(RunError, match="released once on the device"):
        version.push(graph.w)
    # read() brings it back from the device: the uploaded values, not zeros
    view = version.read(graph.w)
    np.testing.assert_array_equal(view.view(np.uint16), _HELD.view(np.uint16))
    np.testing.assert_array_equal(
        np.asarray(version(x)).view(np.uint16), first.view(np.uint16)
    )
    view[:] = 0
    version.push(graph.w)
    assert not np.asarray(version(x)).astype(np.float32).any()
