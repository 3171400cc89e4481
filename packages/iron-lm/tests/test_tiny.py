"""The embedded default: packaged tokenizer, seeded random weights, writer."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from iron.lm import tiny
from iron.lm.checkpoint import open_checkpoint
from iron.lm.config import LlamaConfig, RopeScaling
from iron.lm.tokenizer import Tokenizer

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "make_tiny_tokenizer.py"

LAYER_PARAMS = [
    "input_layernorm.weight",
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "post_attention_layernorm.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
]


def load_script():
    spec = importlib.util.spec_from_file_location("make_tiny_tokenizer", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_packaged_tokenizer_files() -> None:
    root = tiny.tokenizer_dir()
    assert (root / "tokenizer.json").is_file()
    assert (root / "tokenizer_config.json").is_file()
    assert (root / "tokenizer.json").stat().st_size < 100_000


def test_packaged_tokenizer_is_what_the_script_declares() -> None:
    script = load_script()
    tok = Tokenizer.from_directory(tiny.tokenizer_dir())
    assert tok.vocab_size == script.VOCAB_SIZE == LlamaConfig.tiny().vocab_size
    for i, token in enumerate(script.SPECIAL_TOKENS):
        assert tok.token_to_id(token) == i
    assert tok.chat_template == script.CHAT_TEMPLATE
    config = LlamaConfig.tiny()
    assert tok.bos_id == config.bos_token_id
    assert tok.token_to_id("<|end_of_text|>") in config.eos_token_ids
    assert tok.token_to_id("<|eot_id|>") in config.eos_token_ids


def test_script_is_deterministic(tmp_path) -> None:
    script = load_script()
    script.main(["--out", str(tmp_path / "a")])
    script.main(["--out", str(tmp_path / "b")])
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / "a" / name).read_bytes() == (
            tmp_path / "b" / name
        ).read_bytes()
    assert len(script.CORPUS.encode()) > 2000


def test_names_and_shapes_are_hugging_face_llama() -> None:
    config = LlamaConfig.tiny()
    sd = tiny.random_state_dict(config)
    expected = {"model.embed_tokens.weight", "model.norm.weight"} | {
        f"model.layers.{i}.{p}"
        for i in range(config.num_hidden_layers)
        for p in LAYER_PARAMS
    }
    assert set(sd) == expected  # tied: no lm_head.weight
    assert sd["model.embed_tokens.weight"].shape == (512, 128)
    layer = "model.layers.1."
    assert sd[layer + "self_attn.q_proj.weight"].shape == (4 * 32, 128)
    assert sd[layer + "self_attn.k_proj.weight"].shape == (2 * 32, 128)
    assert sd[layer + "self_attn.v_proj.weight"].shape == (2 * 32, 128)
    assert sd[layer + "self_attn.o_proj.weight"].shape == (128, 4 * 32)
    assert sd[layer + "mlp.gate_proj.weight"].shape == (384, 128)
    assert sd[layer + "mlp.up_proj.weight"].shape == (384, 128)
    assert sd[layer + "mlp.down_proj.weight"].shape == (128, 384)
    assert sd[layer + "input_layernorm.weight"].shape == (128,)
    for name, value in sd.items():
        assert value.dtype == np.dtype(ml_dtypes.bfloat16), name
        if name.endswith("norm.weight"):
            assert np.all(value.astype(np.float32) == 1.0)
    untied = tiny.random_state_dict(LlamaConfig.tiny(tie_word_embeddings=False))
    assert untied["lm_head.weight"].shape == (512, 128)


def test_weights_are_seeded() -> None:
    a, b = tiny.random_state_dict(seed=3), tiny.random_state_dict(seed=3)
    c = tiny.random_state_dict(seed=4)
    for name in a:
        assert np.array_equal(a[name].view(np.uint16), b[name].view(np.uint16))
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not np.array_equal(a[q].view(np.uint16), c[q].view(np.uint16))
    # The first values pin the generator and draw order across machines.
    first = a["model.embed_tokens.weight"].astype(np.float32).ravel()[:4]
    again = np.random.default_rng(3).standard_normal(4, dtype=np.float32) * 0.02
    np.testing.assert_array_equal(
        first, again.astype(ml_dtypes.bfloat16).astype(np.float32)
    )
    std = float(a[q].astype(np.float32).std())
    assert 0.015 < std < 0.025


def test_shapes_of_llama_32_1b() -> None:
    config = LlamaConfig(  # meta-llama/Llama-3.2-1B
        hidden_size=2048,
        intermediate_size=8192,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=64,
        num_hidden_layers=16,
        vocab_size=128256,
        rope_theta=500000.0,
        rope_scaling=RopeScaling(32.0, 1.0, 4.0, 8192),
        tie_word_embeddings=True,
    )
    shapes = tiny.state_dict_shapes(config)
    assert len(shapes) == 2 + 16 * 9
    assert shapes["model.layers.0.self_attn.k_proj.weight"] == (512, 2048)
    assert sum(math.prod(s) for s in shapes.values()) == 1_235_814_400


@pytest.mark.parametrize("max_shard_bytes", [None, 60_000])
def test_write_checkpoint_reads_back(tmp_path, max_shard_bytes) -> None:
    root = tiny.write_checkpoint(
        tmp_path / "tiny", seed=1, max_shard_bytes=max_shard_bytes
    )
    sd = tiny.random_state_dict(seed=1)
    with open_checkpoint(root) as ck:
        assert ck.config == LlamaConfig.tiny()
        assert set(ck.names()) == set(sd)
        assert (len(ck.files) > 1) is (max_shard_bytes is not None)
        for name, value in sd.items():
            assert np.array_equal(
                ck.tensor(name).view(np.uint16), value.view(np.uint16)
            )
    tok = Tokenizer.from_directory(root)
    assert tok.eos_ids == (2, 1)  # eot from tokenizer_config, then config.json's
    assert tok.vocab_size == ck.config.vocab_size


def test_notice_says_random() -> None:
    assert "RANDOM" in tiny.NOTICE and "--checkpoint" in tiny.NOTICE
