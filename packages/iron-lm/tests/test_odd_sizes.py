"""Odd sizes (issue 17): padded vocabularies and MLP widths, prompt rows as a knob.

A vocabulary or MLP width the devices' tiles do not divide is padded inside
the graph with zero weights; the padded logits are floored before sampling
and never returned. ``rows`` is rounded to a chunk every device runs; a
longer prompt runs in several chunks. Each case runs its prompt and decode
versions on the emulated NPU against ``graph.reference`` bit for bit.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from lm_support import CONTEXT, bits, prompt_ids
from ml_dtypes import bfloat16

import iron
from iron.lm import tiny
from iron.lm.checkpoint import open_checkpoint
from iron.lm.config import LlamaConfig
from iron.lm.generate import Decoder
from iron.lm.model import Llama
from iron.lm.sizes import PAD_MULTIPLE, chunk_rows, padded_size

#: name -> the tiny preset's overrides: the sizes issue 17 names.
ODD: dict[str, dict] = {
    "vocab-32001": {"vocab_size": 32001, "tie_word_embeddings": False},
    "vocab-300": {"vocab_size": 300},
    "mlp-200": {"intermediate_size": 200},
}


@pytest.fixture(scope="module")
def odd_checkpoints(tmp_path_factory):
    written: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in written:
            config = LlamaConfig.tiny(**ODD[name])
            written[name] = tiny.write_checkpoint(
                tmp_path_factory.mktemp(name), config=config, seed=3
            )
        return written[name]

    return get


def _reference(directory: Path, rows: int) -> Llama:
    checkpoint = open_checkpoint(directory)
    graph = Llama(checkpoint.config, context=CONTEXT, rows=rows)
    graph.load_state_dict(dict(checkpoint.tree()))
    return graph


def test_padded_size() -> None:
    assert padded_size(32001) == 32064
    assert padded_size(300) == 320
    assert padded_size(200) == 256
    assert padded_size(512) == 512  # a multiple stays as it is
    assert padded_size(1) == PAD_MULTIPLE


@pytest.mark.parametrize(
    ("name", "device"),
    [("vocab-32001", "npu2"), ("vocab-300", "npu2"), ("mlp-200", "npu2")]
    + [("vocab-300", "npu1"), ("mlp-200", "npu1")],
)
def test_odd_sizes_run_and_equal_the_reference(odd_checkpoints, name, device) -> None:
    """Prompt chunks and decode steps, bit for bit with the host reference;
    the logits are the vocabulary's own, the tokens inside it."""
    directory = odd_checkpoints(name)
    decoder = Decoder.from_pretrained(
        directory, device=device, context=CONTEXT, rows=16, progress=False
    ).compile()
    graph = _reference(directory, 16)
    vocab = graph.config.vocab_size
    ids = prompt_ids(21, seed=4) % vocab
    with iron.use_device(device):
        for start, n in ((0, 16), (16, 5)):
            chunk = np.zeros(16, np.int32)
            chunk[:n] = ids[start : start + n]
            values = dict(token=0, position=start, n=n, seed=7)
            out_d, carry_d = decoder.prompt(chunk, **values)
            out_r, carry_r = graph.reference(chunk, **values)
            assert out_d.shape == (n, vocab)
            np.testing.assert_array_equal(bits(out_d), bits(out_r))
            assert dict(carry_d) == dict(carry_r)
        for _ in range(3):
            values = dict(
                token=int(carry_d["token"]), position=int(carry_d["position"])
            )
            out_d, carry_d = decoder.decode(n=1, seed=7, **values)
            out_r, carry_r = graph.reference(n=1, seed=7, **values)
            assert out_d.shape == (vocab,)
            np.testing.assert_array_equal(bits(out_d), bits(out_r))
            assert dict(carry_d) == dict(carry_r)
            assert 0 <= int(carry_d["token"]) < vocab
    tokens = list(decoder.generate(ids[:5], max_new_tokens=6, temperature=1.0, seed=2))
    assert all(0 <= t < vocab for t in tokens)


def test_padded_logits_are_floored_before_sampling(odd_checkpoints) -> None:
    """The padded logits Sample reads hold bf16's lowest value, never 0, in
    both versions; the logits returned are the vocabulary's."""
    decoder = Decoder.from_pretrained(
        odd_checkpoints("vocab-300"), device="npu2", context=CONTEXT, progress=False
    )
    graph = decoder.graph
    assert graph.head.shape == (320, graph.config.hidden_size)
    lowest = np.finfo(bfloat16).min
    got = decoder.logits(prompt_ids(3) % 300)
    assert got.shape == (3, 300)
    wide = decoder.prompt.read(graph.prompt_logits)
    np.testing.assert_array_equal(np.asarray(wide[:3, :300], np.float32), got)
    sampled = decoder.prompt.read(graph.decode_logits)  # row 2, floored
    assert (np.asarray(sampled[300:], np.float32) == lowest).all()
    np.testing.assert_array_equal(np.asarray(sampled[:300], np.float32), got[2])
    logits, _ = decoder.decode(token=5, position=3, n=1, seed=0)
    wide = decoder.decode.read(graph.decode_logits)
    assert (np.asarray(wide[300:], np.float32) == lowest).all()
    np.testing.assert_array_equal(bits(wide[:300]), bits(logits))


def test_padding_keeps_zero_weights_and_the_checkpoint_values(odd_checkpoints) -> None:
    checkpoint = open_checkpoint(odd_checkpoints("mlp-200"))
    graph = Llama(checkpoint.config, context=CONTEXT)
    tensors = dict(checkpoint.tree())
    graph.load_state_dict(tensors)
    mlp = graph.model.layers[0].mlp
    for proj, axis in (("gate_proj", 0), ("up_proj", 0), ("down_proj", 1)):
        weight = np.asarray(getattr(mlp, proj).weight)
        assert weight.shape[axis] == 256
        stored = tensors[f"model.layers.0.mlp.{proj}.weight"]
        kept = weight[:200] if axis == 0 else weight[:, :200]
        pad = weight[200:] if axis == 0 else weight[:, 200:]
        np.testing.assert_array_equal(bits(kept), bits(stored))
        assert not np.asarray(pad, np.float32).any()


@pytest.mark.parametrize(
    ("rows", "context", "chunk"),
    [(10, 64, 8), (16, 64, 16), (32, 64, 16), (100, 64, 16), (1, 64, 8), (65, 64, 16)]
    + [(16, 8, 8), (16, 12, 8)],
)
def test_rows_is_a_knob(rows, context, chunk) -> None:
    assert chunk_rows(rows, context) == chunk


def test_rows_too_few_positions_named() -> None:
    with pytest.raises(ValueError, match="context of 7 positions"):
        chunk_rows(16, 7)


@pytest.mark.parametrize("rows", [10, 32])
def test_rows_the_device_refused_now_run(checkpoints, rows, caplog) -> None:
    """``rows`` 10 and 32 (refused before) run in chunks of 8 and 16, the same
    tokens as the default chunks."""
    with caplog.at_level(logging.INFO, logger="iron.lm"):
        decoder = Decoder.from_pretrained(
            checkpoints("tied"),
            device="npu2",
            context=CONTEXT,
            rows=rows,
            progress=False,
        )
    assert decoder.graph.rows == chunk_rows(rows, CONTEXT)
    assert f"rows={rows} runs as {decoder.graph.rows} rows" in caplog.text
    default = Decoder.from_pretrained(
        checkpoints("tied"), device="npu2", context=CONTEXT, progress=False
    )
    ids = prompt_ids(37, seed=9)
    got, want = decoder.logits(ids), default.logits(ids)
    assert got.shape == want.shape == (37, 512)
    # another chunking sums in another order: equal to a bf16 rounding
    np.testing.assert_allclose(got, want, rtol=0, atol=2**-6)
    assert list(decoder.generate(ids[:20], max_new_tokens=5)) == list(
        default.generate(ids[:20], max_new_tokens=5)
    )


@pytest.mark.parametrize("weights", ["q8", "q4"])
@pytest.mark.parametrize("name", ["vocab-300", "mlp-200"])
def test_odd_sizes_with_quantized_weights(odd_checkpoints, name, weights) -> None:
    """Packed rows pad with zero bytes (zero weights): the padded model runs
    quantized, its tokens the host reference's, inside the vocabulary."""
    directory = odd_checkpoints(name)
    decoder = Decoder.from_pretrained(
        directory,
        weights=weights,
        device="npu2",
        context=CONTEXT,
        rows=16,
        progress=False,
    )
    vocab = LlamaConfig.tiny(**ODD[name]).vocab_size
    ids = prompt_ids(21, seed=4) % vocab
    assert decoder.logits(ids).shape == (21, vocab)
    settings = dict(seed=2, temperature=1.0)
    tokens = list(decoder.generate(ids[:5], max_new_tokens=6, **settings))
    assert tokens == decoder.reference_tokens(ids[:5], 6, **settings)
    assert all(0 <= t < vocab for t in tokens)
