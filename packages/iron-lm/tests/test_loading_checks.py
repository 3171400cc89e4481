"""What loading checks (issue 14): weights finite once narrowed, dtypes reported,
names transformers ignores ignored, shards that change under the mapping refused.

Each test replays a case that used to end silently: every token id 0, a
process killed by SIGBUS, a checkpoint refused that transformers loads.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest
from lm_support import CONTEXT, ROWS, bits

from iron.core.held import held_dtype
from iron.lm import tiny
from iron.lm.checkpoint import (
    CheckpointChangedError,
    NonFiniteWeightError,
    open_checkpoint,
    save_checkpoint,
)
from iron.lm.config import LlamaConfig
from iron.lm.generate import Decoder
from iron.lm.model import Llama

BF16 = ml_dtypes.bfloat16
UP = "model.layers.1.mlp.up_proj.weight"


def _write(directory, *, config=None, dtype=BF16, change=None, **save):
    config = config or LlamaConfig.tiny()
    weights = tiny.random_state_dict(config, seed=5, dtype=dtype)
    if change:
        change(weights)
    save_checkpoint(directory, config, weights, **save)
    return directory


def _poke(name, index, value):
    def change(weights):
        a = np.array(weights[name])
        a[index] = value
        weights[name] = a

    return change


# -- non-finite weights -------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype, value, words",
    [
        (BF16, np.nan, ["nan"]),
        (np.float16, np.inf, ["inf"]),
        (np.float32, -np.inf, ["-inf"]),
        # finite in float32, infinity once narrowed to bf16
        (np.float32, 3.4e38, ["3.4", "beyond bfloat16's range", "float32 to bfloat16"]),
    ],
)
def test_a_non_finite_weight_is_named_with_its_index(tmp_path, dtype, value, words):
    _write(tmp_path, dtype=dtype, change=_poke(UP, (5, 7), value))
    with pytest.raises(NonFiniteWeightError) as info:
        Llama.from_pretrained(tmp_path, context=CONTEXT, rows=ROWS)
    message = str(info.value)
    assert UP in message and "index (5, 7)" in message, message
    for word in words:
        assert word in message, message
    assert isinstance(info.value, ValueError)


def test_the_decoder_refuses_a_nan_weight_before_compiling(tmp_path):
    _write(tmp_path, change=_poke("model.norm.weight", 3, np.nan))
    with pytest.raises(NonFiniteWeightError, match=r"model.norm.weight.*index \(3,\)"):
        Decoder.from_pretrained(tmp_path, device="npu2", progress=False)


def test_the_largest_bf16_value_is_finite(tmp_path):
    largest = float(ml_dtypes.finfo(BF16).max)
    _write(tmp_path, dtype=np.float32, change=_poke(UP, (0, 0), largest))
    graph = Llama.from_pretrained(tmp_path, context=CONTEXT, rows=ROWS)
    assert float(graph.model.layers[1].mlp.up_proj.weight[0, 0]) == largest


def test_check_finite_scans_in_pieces(tmp_path, monkeypatch):
    from iron.lm import checkpoint

    monkeypatch.setattr(checkpoint, "_SCAN_ELEMENTS", 1000)
    _write(tmp_path, change=_poke(UP, (300, 100), np.nan))  # past the first pieces
    with open_checkpoint(tmp_path) as ck:
        with pytest.raises(NonFiniteWeightError, match=r"index \(300, 100\)"):
            ck.check_finite()
        ck.check_finite(["model.norm.weight"])  # only the names given


# -- dtypes: narrowing logged, torch_dtype disagreeing reported ----------------------


@pytest.mark.parametrize(
    "dtype, label", [(np.float32, "float32"), (np.float16, "float16")]
)
def test_narrowing_is_logged(tmp_path, caplog, dtype, label):
    config = LlamaConfig.tiny(dtype=label)
    _write(tmp_path, config=config, dtype=dtype)
    with caplog.at_level(logging.INFO, logger="iron.lm"):
        graph = Llama.from_pretrained(tmp_path, context=CONTEXT, rows=ROWS)
    assert f"narrowing 20 {label} weights to bfloat16" in caplog.text
    assert "torch_dtype" not in caplog.text  # config and headers agree
    # held as the mapped tensor, resident as bf16: narrowed when uploaded
    weight = graph.model.norm.weight
    assert np.shares_memory(weight, graph.checkpoint.tensor("model.norm.weight"))
    assert held_dtype(weight) == np.dtype(BF16)


def test_bf16_is_not_narrowed(tmp_path, caplog):
    _write(tmp_path)
    with caplog.at_level(logging.INFO, logger="iron.lm"):
        Llama.from_pretrained(tmp_path, context=CONTEXT, rows=ROWS)
    assert "narrowing" not in caplog.text and "torch_dtype" not in caplog.text


def test_a_torch_dtype_the_headers_disagree_with_is_reported(tmp_path, caplog):
    _write(tmp_path, config=LlamaConfig.tiny(dtype="bfloat16"), dtype=np.float32)
    with caplog.at_level(logging.WARNING, logger="iron.lm"):
        Llama.from_pretrained(tmp_path, context=CONTEXT, rows=ROWS)
    (record,) = [r for r in caplog.records if "torch_dtype" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert "'bfloat16'" in record.getMessage() and "20 float32" in record.getMessage()


# -- names transformers loads: a tied head stored anyway, old inv_freq buffers ---------


def test_a_tied_config_that_stores_lm_head_loads_as_transformers(tmp_path):
    """transformers ties lm_head to the embedding after loading
    (PreTrainedModel.tie_weights), so a stored lm_head.weight is unused."""
    config = LlamaConfig.tiny()  # tied

    def add_head(weights):
        weights["lm_head.weight"] = np.zeros((config.vocab_size, 128), BF16)

    _write(tmp_path, config=config, change=add_head)
    graph = Llama.from_pretrained(tmp_path, context=CONTEXT, rows=ROWS)
    embed = graph.checkpoint.tensor("model.embed_tokens.weight")
    assert np.shares_memory(graph.head, embed)
    assert not hasattr(graph, "lm_head")


def test_old_rotary_inv_freq_buffers_are_ignored(tmp_path):
    def add_inv_freq(weights):
        for n in range(2):
            name = f"model.layers.{n}.self_attn.rotary_emb.inv_freq"
            weights[name] = np.ones(16, np.float32)

    _write(tmp_path, change=add_inv_freq)
    graph = Llama.from_pretrained(tmp_path, context=CONTEXT, rows=ROWS)
    reference = Llama.from_pretrained(_write(tmp_path / "plain"), context=CONTEXT)
    assert np.array_equal(bits(graph.rope), bits(reference.rope))


def test_other_extra_names_are_still_refused(tmp_path):
    def add(weights):
        weights["model.layers.0.self_attn.rotary_emb.scale"] = np.ones(4, BF16)

    _write(tmp_path, change=add)
    with pytest.raises(ValueError, match=r"extra .*rotary_emb\.scale"):
        Llama.from_pretrained(tmp_path, context=CONTEXT, rows=ROWS)


# -- shards changed while mapped -------------------------------------------------------


@pytest.mark.parametrize("how", ["truncated", "rewritten", "replaced"])
def test_verify_names_a_changed_shard(tmp_path, how):
    _write(tmp_path, max_shard_bytes=300_000)
    with open_checkpoint(tmp_path) as ck:
        ck.verify()
        shard = ck.files[1]
        data = shard.read_bytes()
        if how == "truncated":
            with open(shard, "r+b") as f:
                f.truncate(len(data) // 2)
        elif how == "rewritten":
            shard.write_bytes(data[:-8] + b"\0" * 8)
        else:
            scratch = shard.with_suffix(".new")
            scratch.write_bytes(data)
            scratch.replace(shard)
        with pytest.raises(CheckpointChangedError) as info:
            ck.verify()
    assert str(shard) in str(info.value)
    assert isinstance(info.value, RuntimeError)


# Runs in a child: on the code before the check, touching the truncated
# mapping kills the process with SIGBUS, which the test reports as such.
CHANGED_PROBE = textwrap.dedent(
    """
    import sys
    import iron.runtime
    from iron.lm.checkpoint import CheckpointChangedError
    from iron.lm.generate import Decoder

    iron.runtime.set_backend("emu")
    directory, when = sys.argv[1], sys.argv[2]
    decoder = Decoder.from_pretrained(
        directory, device="npu2", context=64, rows=16, progress=False
    )
    shard = decoder.checkpoint.files[0]

    def truncate():
        with open(shard, "r+b") as f:
            f.truncate(4096)

    try:
        if when == "before compile":
            truncate()
            decoder.compile()
        elif when == "graph call after graph.release()":
            import numpy as np
            import iron

            graph = decoder.graph
            chunk = np.zeros(16, np.int32)
            with iron.use_device("npu2"):
                graph(chunk, token=0, position=0, n=3)
                graph.release()
                truncate()
                graph(chunk, token=0, position=0, n=3)
        else:
            decoder.compile()
            decoder.graph.release()
            truncate()
            list(decoder.generate([5, 6, 7], max_new_tokens=2))
    except CheckpointChangedError as error:
        print("refused:", error)
        sys.exit(3)
    print("no error")
    """
)


@pytest.mark.parametrize(
    "when",
    ["before compile", "after graph.release()", "graph call after graph.release()"],
)
def test_a_shard_truncated_while_loaded_is_refused_not_sigbus(tmp_path, when):
    _write(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", CHANGED_PROBE, str(tmp_path), when],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != -7, "killed by SIGBUS"
    assert done.returncode == 3, done.stdout + done.stderr
    assert "model.safetensors" in done.stdout and "changed on disk" in done.stdout


# -- float32 and float16 checkpoints: narrowed as uploaded -----------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_wider_checkpoint_computes_as_its_bf16_narrowing(tmp_path, dtype) -> None:
    """Narrowed piece by piece during the upload, the model is the one whose
    weights were narrowed first: the same logits, bit for bit."""
    config = LlamaConfig.tiny()
    wide = tiny.random_state_dict(config, seed=6, dtype=dtype)
    save_checkpoint(tmp_path / "wide", config, wide, max_shard_bytes=300_000)
    narrowed = {n: t.astype(BF16) for n, t in wide.items()}
    save_checkpoint(tmp_path / "bf16", config, narrowed)
    ids = [5, 9, 200, 7, 3]
    got, want = (
        Decoder.from_pretrained(tmp_path / name, device="npu2", progress=False)
        .compile()
        .logits(ids)
        for name in ("wide", "bf16")
    )
    np.testing.assert_array_equal(got, want)
