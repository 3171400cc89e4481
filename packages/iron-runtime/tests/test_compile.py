"""Graph.compile on the emulated NPU: versions by shape, packaging, the first call."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from ml_dtypes import bfloat16

import iron
from iron.core.operator import RefusedShapeError
from iron.operators import AXPY, ReLU
from iron.runtime import CompiledGraph, ScratchArena


class Chain(iron.Graph):
    """``relu(2 x + y)``: the spec's first graph."""

    def body(self, x, y):
        return ReLU.step(AXPY.step(x, y, scalar_factor=2.0))


def _xy(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal(n).astype(bfloat16),
        rng.standard_normal(n).astype(bfloat16),
    )


def test_compile_returns_a_version_stored_by_signature():
    graph = Chain()
    version = graph.compile(x=(2048,), y=(2048,))
    assert isinstance(version, CompiledGraph)
    assert list(graph.versions.values()) == [version]
    (key,) = graph.versions
    assert key == (("x", (2048,), "bfloat16"), ("y", (2048,), "bfloat16"))
    assert isinstance(version.arena, ScratchArena)
    assert [type(s.op) for s in version.recording.steps] == [AXPY, ReLU]
    assert version.plan.full_elf and len(version.images) == 1
    assert version.emit is None
    assert "emu" in repr(version) and "full ELF" in repr(version)


def test_compile_then_call_equals_reference():
    graph = Chain()
    graph.compile(x=(2048,), y=(2048,))
    x, y = _xy(2048)
    out = graph(x, y)
    assert isinstance(out, np.ndarray) and out.dtype == bfloat16
    assert out.shape == (2048,)
    np.testing.assert_array_equal(out, graph.reference(x, y))


def test_the_image_loads_lazily():
    graph = Chain()
    version = graph.compile(x=(256,), y=(256,))
    assert version._callable is None, "compiling loads nothing on the device"
    assert version.arena.nbytes == 0
    assert version.load() is version
    assert version._callable is not None
    assert version.callable is version.callable


def test_versions_by_shape_share_one_arena():
    graph = Chain()
    small = graph.compile(x=(256,), y=(256,))
    big = graph.compile(x=(2048,), y=(2048,))
    assert small is not big and small.arena is big.arena
    assert len(graph.versions) == 2
    for n in (2048, 256, 2048):
        x, y = _xy(n, seed=n)
        out = graph(x, y)
        assert out.shape == (n,)
        np.testing.assert_array_equal(out, graph.reference(x, y))
    # Each call found its own version: both were loaded.
    assert small._callable is not None and big._callable is not None


def test_first_call_compiles_on_the_spot_and_logs_it(caplog):
    graph = Chain()
    x, y = _xy(512)
    with caplog.at_level(logging.INFO, logger="iron.graph"):
        out = graph(x, y)
    assert "compiling shapes" in caplog.text and "[512]" in caplog.text
    assert len(graph.versions) == 1
    np.testing.assert_array_equal(out, graph.reference(x, y))


def test_an_uncompiled_shape_after_a_version_raises_naming_both():
    graph = Chain()
    graph.compile(x=(2048,), y=(2048,))
    x, y = _xy(1024)
    with pytest.raises(ValueError) as info:
        graph(x, y)
    text = str(info.value)
    assert "[1024]" in text and "[2048]" in text
    assert "Compile every shape before the first call" in text
    assert len(graph.versions) == 1


def test_an_uncompiled_dtype_raises_too():
    graph = Chain()
    graph.compile(x=(256,), y=(256,))
    x, y = _xy(256)
    with pytest.raises(ValueError, match="float32"):
        graph(x.astype(np.float32), y.astype(np.float32))


@pytest.mark.device("npu1")
def test_npu1_dispatches_per_step():
    graph = Chain()
    version = graph.compile(x=(2048,), y=(2048,))
    assert not version.plan.full_elf
    assert len(version.images) == 2
    assert "npu1 has no full ELF" in version.plan.reasons
    x, y = _xy(2048)
    np.testing.assert_array_equal(graph(x, y), graph.reference(x, y))


def test_full_elf_false_dispatches_per_step():
    graph = Chain()
    version = graph.compile(x=(256,), y=(256,), full_elf=False)
    assert not version.plan.full_elf and len(version.images) == 2
    assert "xclbin per step" in repr(version)
    x, y = _xy(256)
    np.testing.assert_array_equal(graph(x, y), graph.reference(x, y))


def test_full_elf_true_on_npu1_raises_with_the_reason():
    with pytest.raises(ValueError, match="npu1 has no full ELF"):
        Chain().compile(x=(256,), y=(256,), dev="npu1", full_elf=True)


def test_dev_applies_to_one_compile():
    graph = Chain()
    version = graph.compile(x=(256,), y=(256,), dev="npu1")
    assert version.plan.device.name == "npu1"
    assert iron.get_current_device().name == "npu2"


def test_feeds_needs_a_version_that_loops():
    graph = Chain()
    first = graph.compile(x=(256,), y=(256,))
    with pytest.raises(ValueError, match="feeds= needs a version that loops"):
        graph.compile(x=(512,), y=(512,), feeds=first)


def test_a_failed_compile_leaves_earlier_versions_usable():
    graph = Chain()
    graph.compile(x=(256,), y=(256,))
    with pytest.raises(RefusedShapeError):
        graph.compile(x=(100,), y=(100,))
    assert len(graph.versions) == 1
    x, y = _xy(256)
    np.testing.assert_array_equal(graph(x, y), graph.reference(x, y))


def test_shapes_given_as_shape_and_dtype():
    class Twice(iron.Graph):
        def body(self, x):
            from ops import Scale32

            return Scale32.step(x, factor=2.0)

    graph = Twice()
    version = graph.compile(x=((64,), np.float32))
    assert version.recording.inputs[0].dtype == np.float32
    x = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(graph(x), 2 * x)


class Window(iron.Graph):
    """No device step at all: the output is a slice of the input."""

    def body(self, x):
        return x[16:48]


@pytest.mark.parametrize("full_elf", [None, False])
def test_a_version_of_no_steps_has_one_empty_image(full_elf):
    graph = Window()
    version = graph.compile(x=(64,), full_elf=full_elf)
    assert len(version.images) == 1 and not version.images[0].steps
    x = np.arange(64).astype(bfloat16)
    np.testing.assert_array_equal(graph(x), x[16:48])


def test_each_device_keeps_its_own_versions():
    """Compiling the same shapes for npu1 and npu2 keeps both; a call takes the bound one's."""
    graph = Chain()
    on_npu1 = graph.compile(dev="npu1", x=(2048,), y=(2048,))
    on_npu2 = graph.compile(dev="npu2", x=(2048,), y=(2048,))
    assert not on_npu1.plan.full_elf and on_npu2.plan.full_elf
    with iron.use_device("npu1"):
        assert list(graph.versions.values()) == [on_npu1]
    with iron.use_device("npu2"):
        assert list(graph.versions.values()) == [on_npu2]
    x, y = _xy(2048)
    for device in ("npu1", "npu2"):
        with iron.use_device(device):
            np.testing.assert_array_equal(graph(x, y), graph.reference(x, y))
