"""Issue 34: a model or context that does not fit says so before it loads."""

from __future__ import annotations

from pathlib import Path

import pytest

import iron.lm.applications.llama as llama_app
from iron.core.dma import ARG_OFFSET_LIMIT
from iron.lm.config import LlamaConfig
from iron.lm.fit import ModelTooLargeError, check_fits, footprint
from iron.lm.model import Llama

CONFIGS = Path(llama_app.__file__).parent / "configs"


def _config(name: str) -> LlamaConfig:
    return LlamaConfig.from_json(CONFIGS / f"llama-{name}.json")


def test_the_footprint_counts_weights_caches_and_the_rotary_table():
    c = _config("3.1-8b")
    fp = footprint(c, 32768, "q4")
    # 32 layers x K and V x 8 kv heads x 32768 positions x 128 x 2 bytes
    assert fp.kv_cache == 32 * 2 * 8 * 32768 * 128 * 2
    assert fp.rope == 32768 * 128 * 2
    assert fp.per_position * 32768 == fp.kv_cache + fp.rope
    # q4 rows: 20 bytes a group of 32 (5/8 byte an element); bf16 norms
    bf16 = footprint(c, 32768, "bf16").weights
    assert 0.30 < fp.weights / bf16 < 0.33
    assert bf16 > 16e9  # about 8.0e9 parameters, two bytes each


def test_a_model_over_the_memory_names_the_sizes_and_the_longest_context_that_fits():
    c = _config("3.1-8b")
    with pytest.raises(
        ModelTooLargeError, match=r"needs 34\.\d\d GB of host memory"
    ) as e:
        check_fits(c, 131072, "bf16", memory=24 * 10**9)
    message = str(e.value)
    assert "16.06 GB of weights, 17.18 GB of KV cache" in message
    assert "this machine has 24.00 GB" in message
    longest = int(message.split("at most ")[1].split(" ")[0])
    check_fits(c, longest, "bf16", memory=24 * 10**9)  # the fix named works
    with pytest.raises(ModelTooLargeError):
        check_fits(c, longest + 16, "bf16", memory=24 * 10**9)
    assert "weights='q4'" in message
    check_fits(c, 32768, "q4", memory=24 * 10**9)  # 9.8 GB


def test_a_buffer_of_2_to_the_31_bytes_is_refused_by_name():
    c = _config("3.2-1b").__class__.tiny(
        hidden_size=8192,
        num_attention_heads=64,
        num_key_value_heads=64,
        head_dim=128,
        max_position_embeddings=1 << 20,
    )
    positions = ARG_OFFSET_LIMIT // (64 * 128 * 2)
    check_fits(c, positions - 16, memory=1 << 50)
    with pytest.raises(
        ModelTooLargeError, match=r"a layer's k_cache alone takes .* below 2\^31"
    ):
        check_fits(c, positions, memory=1 << 50)


def test_from_pretrained_refuses_before_reading_a_tensor(tmp_path, monkeypatch):
    from lm_support import write_tiny

    directory = write_tiny(tmp_path, "tied")
    import iron.lm.fit as fit

    monkeypatch.setattr(fit, "physical_memory", lambda: 100_000)
    read = []
    import iron.lm.checkpoint as checkpoint

    original = checkpoint.Checkpoint.tree
    monkeypatch.setattr(
        checkpoint.Checkpoint, "tree", lambda self: read.append(1) or original(self)
    )
    with pytest.raises(ModelTooLargeError, match="this machine has 0.00 GB"):
        Llama.from_pretrained(directory, context=64)
    assert not read
    monkeypatch.setattr(fit, "physical_memory", lambda: 1 << 40)
    Llama.from_pretrained(directory, context=64)
    assert read
