"""Sampling per call: temperature, top_k, top_p and seed never recompile.

The settings are per-call values of the compiled prompt and decode
versions (``Llama.body``'s ``temperature``, ``top_k``, ``top_p``), carried
through the device loop like the seed. Changing them between calls builds
no version; the device loop (npu2's CarriedLoop) and the host loop give the
same tokens for the same seed and settings, as ``graph.reference`` does;
a setting out of range is refused by name before anything runs.
"""

from __future__ import annotations

import numpy as np
import pytest
from lm_support import CONTEXT, ROWS, prompt_ids, reference_graph

import iron
from iron.core.graph import Graph
from iron.lm.model import Llama
from iron.operators.sample import MAX_TOP_K, temperature_code, top_p_code
from iron.runtime.backend import Runtime

#: (device, device_loop) of each way to loop the decode step
LOOPS = [("npu2", True), ("npu2", False), ("npu1", None)]
NUCLEUS = {"temperature": 0.9, "top_k": 40, "top_p": 0.8}


@pytest.fixture
def builds(monkeypatch) -> list[str]:
    """Every recording and version built from here on, by graph name."""
    made: list[str] = []
    record, compile_ = Graph.record, Runtime.compile

    def counted_record(self, **shapes):
        made.append(f"record {self.name}")
        return record(self, **shapes)

    def counted_compile(self, graph, recording, **options):
        made.append(f"compile {graph.name}")
        return compile_(self, graph, recording, **options)

    monkeypatch.setattr(Graph, "record", counted_record)
    monkeypatch.setattr(Runtime, "compile", counted_compile)
    return made


@pytest.mark.parametrize(("device", "loop"), LOOPS)
def test_changing_the_sampling_between_calls_compiles_nothing(
    decoders, builds, device, loop
) -> None:
    decoder = decoders("tied", device)  # compiled greedy
    builds.clear()  # what making it built
    with iron.use_device(device):
        versions = len(decoder.graph.versions)
    ids = prompt_ids(9, seed=1)
    runs = []
    for settings in (
        {},
        {"temperature": 0.7, "top_k": 8, "seed": 3},
        {"temperature": 1.3, "top_p": 0.5, "seed": 3},
        {"temperature": 1.3, "top_p": 0.5, "top_k": 1, "seed": 4},
        {"temperature": 0.7, "top_k": MAX_TOP_K, "top_p": 0.9, "seed": 5},
        {},
    ):
        runs.append(
            list(
                decoder.generate(
                    ids, max_new_tokens=8, stop=[], device_loop=loop, **settings
                )
            )
        )
    assert builds == []
    with iron.use_device(device):
        assert len(decoder.graph.versions) == versions
    assert runs[0] == runs[-1]  # greedy, as before the sampled calls
    assert runs[3] == runs[0]  # top_k=1 is greedy whatever the temperature
    assert len({tuple(r) for r in runs}) >= 4  # the settings were read


def test_per_call_settings_give_the_tokens_of_a_graph_built_with_them(
    decoders,
) -> None:
    ids = prompt_ids(21, seed=3)
    built = decoders("tied", "npu2", temperature=0.8, top_k=8)
    want = list(built.generate(ids, max_new_tokens=10, seed=7, stop=[]))
    greedy = decoders("tied", "npu2")
    got = list(
        greedy.generate(
            ids, max_new_tokens=10, seed=7, stop=[], temperature=0.8, top_k=8
        )
    )
    assert got == want
    # and the built-in setting is only a default: a call may go greedy
    assert list(built.generate(ids, max_new_tokens=10, stop=[], temperature=0)) == list(
        greedy.generate(ids, max_new_tokens=10, stop=[])
    )


@pytest.mark.parametrize("seed", [0, 11])
def test_the_same_seed_gives_the_same_nucleus_tokens_on_every_loop(
    decoders, checkpoints, seed
) -> None:
    ids = prompt_ids(21, seed=5)  # two chunks
    runs = {
        (device, loop): list(
            decoders("tied", device).generate(
                ids, max_new_tokens=12, seed=seed, stop=[], device_loop=loop, **NUCLEUS
            )
        )
        for device, loop in LOOPS
    }
    first = runs["npu2", True]
    assert all(tokens == first for tokens in runs.values()), runs
    decoder = decoders("tied", "npu2")
    assert first == decoder.reference_tokens(ids, 12, seed=seed, **NUCLEUS)
    # the graph's reference, built with the settings, agrees
    graph = reference_graph(checkpoints(), **NUCLEUS)
    with iron.use_device("npu2"):
        _, carry = graph.reference(
            np.asarray(ids[:ROWS], np.int32), token=0, position=0, n=ROWS, seed=seed
        )
    # top_p is read: without it some tokens differ
    wide = {**NUCLEUS, "top_p": 1.0}
    assert first != decoder.reference_tokens(ids, 12, seed=seed, **wide)
    assert int(carry["temperature"]) == temperature_code(0.9)
    assert int(carry["top_p"]) == top_p_code(0.8) and int(carry["top_k"]) == 40


@pytest.mark.parametrize(
    ("setting", "error", "match"),
    [
        ({"temperature": -0.5}, ValueError, r"temperature takes .*got -0\.5"),
        ({"temperature": float("nan")}, ValueError, "temperature takes"),
        ({"temperature": "hot"}, TypeError, "temperature takes"),
        ({"top_p": 0.0}, ValueError, r"top_p takes a number in \(0, 1\].*got 0\.0"),
        ({"top_p": 1.5}, ValueError, r"top_p takes .*got 1\.5"),
        ({"top_k": 0}, ValueError, r"top_k takes an int in \[1, 256\].*got 0"),
        ({"top_k": 257}, ValueError, r"top_k takes .*at most 256.*got 257"),
        ({"top_k": 2.5}, TypeError, "top_k takes"),
    ],
)
def test_a_setting_out_of_range_is_refused_by_name_before_anything_runs(
    decoders, builds, setting, error, match
) -> None:
    decoder = decoders("tied", "npu2")
    builds.clear()  # what making it built
    before = decoder.stats
    with pytest.raises(error, match=match):
        decoder.generate(prompt_ids(5, seed=1), max_new_tokens=4, **setting)
    assert decoder.stats is before and builds == []
    with pytest.raises(error, match=match):
        decoder.reference_tokens(prompt_ids(5, seed=1), 2, **setting)
    # the decoder is free for the next call
    assert len(list(decoder.generate(prompt_ids(5, seed=1), max_new_tokens=2))) == 2


def test_the_graph_refuses_a_setting_by_name_when_made(checkpoints) -> None:
    from iron.lm.config import LlamaConfig

    config = LlamaConfig.tiny()
    with pytest.raises(ValueError, match="top_p takes"):
        Llama(config, context=CONTEXT, rows=ROWS, temperature=1.0, top_p=2.0)
    limit = min(MAX_TOP_K, config.vocab_size)
    with pytest.raises(ValueError, match=rf"top_k takes an int in \[1, {limit}\]"):
        Llama(config, context=CONTEXT, rows=ROWS, top_k=limit + 1)
    graph = Llama(config, context=CONTEXT, rows=ROWS, temperature=0.5, top_k=None)
    assert graph.sampling() == {
        "temperature": temperature_code(0.5),
        "top_k": limit,
        "top_p": top_p_code(1.0),
    }
    assert graph.sampling(temperature=0, top_p=0.3) == {
        "temperature": 0,
        "top_k": 1,
        "top_p": top_p_code(1.0),
    }
