"""Graph.compile and __call__: a version per shape, compiled on the first call.

A fake backend stands in for iron-runtime: a call finds its version by shape
(or compiles and logs the first), passes per-call values on, refuses shapes
not compiled once one is, and release() releases every version.
"""

from __future__ import annotations

import logging
from importlib.metadata import entry_points

import numpy as np
import pytest
from graphs_for_tests import Calls, Head, ScaleThenMul, bf16, mul, scale

import iron
from iron.core import plugins
from iron.core.plugins import MissingDistributionError

# -- versions: compile and __call__ --------------------------------------------------


def test_compile_without_the_runtime_names_iron_runtime():
    if list(entry_points(group="iron.backends")):
        pytest.skip("a backend is installed here")
    with pytest.raises(ImportError) as info:
        ScaleThenMul().compile(x=(16,), y=(16,))
    assert isinstance(info.value, MissingDistributionError)
    assert "iron-runtime" in str(info.value)
    # IRON is not on PyPI (a PyPI project iron-core is another one): the hint
    # installs from the repository.
    assert "pip install ./packages/iron-runtime" in str(info.value)
    with pytest.raises(ImportError, match="iron-runtime"):
        ScaleThenMul()(bf16(16), bf16(16))


class FakeVersion:
    """What a backend's compile returns: called with the graph's tensors."""

    def __init__(self, graph, recording, device, options):
        self.graph, self.recording = graph, recording
        self.device, self.options = device, options
        self.calls: list[tuple] = []

    def __call__(self, *tensors, **values):
        self.calls.append((tensors, values))
        return self.graph.reference(*tensors, dev=self.device, **values)


class FakeBackend:
    def __init__(self):
        self.compiled: list[FakeVersion] = []

    def compile(self, graph, recording, *, full_elf, check, feeds):
        options = dict(full_elf=full_elf, check=check, feeds=feeds)
        version = FakeVersion(graph, recording, iron.get_current_device(), options)
        self.compiled.append(version)
        return version


@pytest.fixture
def backend(monkeypatch):
    fake = FakeBackend()
    monkeypatch.setattr(plugins, "backend", lambda: fake)
    return fake


def test_compile_returns_the_version_and_keeps_it_by_shape(backend):
    graph = ScaleThenMul()
    version = graph.compile(x=(16,), y=(16,), full_elf=True, check=True)
    assert version is backend.compiled[0]
    assert version.options == dict(full_elf=True, check=True, feeds=None)
    assert [h.shape for h in version.recording.inputs] == [(16,), (16,)]
    assert list(graph.versions.values()) == [version]


def test_compile_dev_is_for_that_compile_alone(backend):
    version = ScaleThenMul().compile(dev="npu1", x=(16,), y=(16,))
    assert version.device == iron.NPU1
    assert version.recording.device == iron.NPU1
    assert iron.get_current_device() == iron.NPU2


def test_a_call_compiles_on_first_use_and_logs_it(backend, caplog):
    graph = ScaleThenMul()
    x, y = bf16(16), bf16(16, seed=1)
    with caplog.at_level(logging.INFO, logger="iron.graph"):
        out = graph(x, y)
    np.testing.assert_array_equal(out, mul(scale(x, 2.0), y))
    assert len(backend.compiled) == 1
    (record,) = [r for r in caplog.records if r.name == "iron.graph"]
    assert "ScaleThenMul" in record.getMessage()
    assert "on first call" in record.getMessage()
    caplog.clear()
    graph(x, y)
    assert len(backend.compiled) == 1
    assert len(backend.compiled[0].calls) == 2
    assert not [r for r in caplog.records if r.name == "iron.graph"]


def test_a_call_finds_the_version_by_shape(backend):
    graph = ScaleThenMul()
    small = graph.compile(x=(16,), y=(16,))
    large = graph.compile(x=(32,), y=(32,))
    graph(bf16(32), bf16(32))
    graph(bf16(16), bf16(16))
    graph(bf16(32), bf16(32))
    assert (len(small.calls), len(large.calls)) == (1, 2)
    assert len(backend.compiled) == 2


def test_a_call_passes_per_call_values_to_the_version(backend):
    graph = Head()
    version = graph.compile(x=(8,))
    x = bf16(8)
    np.testing.assert_array_equal(graph(x, n=3), scale(x[:3], 3.0))
    assert version.calls[0][1] == {"n": 3}


def test_once_a_version_exists_an_uncompiled_shape_raises(backend):
    graph = ScaleThenMul()
    graph.compile(x=(16,), y=(16,))
    with pytest.raises(ValueError) as info:
        graph(bf16(32), bf16(32))
    assert str(info.value).startswith(
        "ScaleThenMul: no version for shapes {x: [32] bfloat16, y: [32] bfloat16}; "
        "compiled: {x: [16] bfloat16, y: [16] bfloat16}. Compile every shape "
        "before the first call"
    )
    assert len(backend.compiled) == 1


def test_an_uncompiled_dtype_names_the_dtypes(backend):
    graph = ScaleThenMul()
    graph.compile(x=(16,), y=(16,))
    graph.compile(x=(8,), y=(8,))
    with pytest.raises(ValueError) as info:
        graph(np.zeros(16, np.float32), np.zeros(16, np.float32))
    assert (
        "no version for shapes {x: [16] float32, y: [16] float32}; compiled: "
        "{x: [16] bfloat16, y: [16] bfloat16}; {x: [8] bfloat16, y: [8] bfloat16}."
    ) in str(info.value)


def test_a_call_checks_its_inputs_first(backend):
    with pytest.raises(TypeError, match=r"inputs \['y'\] missing"):
        ScaleThenMul()(bf16(16))
    assert backend.compiled == []


def test_a_call_in_a_body_records_there_rather_than_compiling(backend):
    recording = Calls().record(x=(16,))
    assert len(recording.steps) == 3
    assert backend.compiled == []


def test_release_releases_every_version(backend):
    released = []
    graph = ScaleThenMul()
    for n in (16, 32):
        version = graph.compile(x=(n,), y=(n,))
        version.release = lambda n=n: released.append(n)
    graph.release()
    assert released == [16, 32]


class ScaleThenMulByDev(ScaleThenMul):
    """``ScaleThenMul`` whose second input has the name of compile's ``dev``."""

    def body(self, x, dev):
        return super().body(x, dev)


class ScaleThenMulByCheck(ScaleThenMul):
    """``ScaleThenMul`` whose second input has the name of compile's ``check``."""

    def body(self, x, check):
        return super().body(x, check)


@pytest.mark.parametrize("graph_class", [ScaleThenMulByDev, ScaleThenMulByCheck])
def test_a_call_compiles_an_input_named_like_a_compile_option(backend, graph_class):
    # The first call compiles every input's shape, an input named dev or check
    # included, rather than passing that shape as compile's own keyword.
    graph = graph_class()
    x, y = bf16(16), bf16(16, seed=1)
    np.testing.assert_array_equal(graph(x, y), mul(scale(x, 2.0), y))
    (version,) = backend.compiled
    assert version.options == dict(full_elf=None, check=False, feeds=None)
    assert version.device == iron.get_current_device()
    assert [h.shape for h in version.recording.inputs] == [(16,), (16,)]
