"""The embedded default: a tiny Llama with seeded random weights.

With no checkpoint, IRON still runs the whole path (tokenize, load, build,
generate, detokenize) on ``LlamaConfig.tiny()``, the small tokenizer shipped
in ``iron/lm/data/tiny`` (made by ``scripts/make_tiny_tokenizer.py``), and
weights from ``random_state_dict``: Hugging Face names and layouts, bf16,
drawn from a seeded generator. The weights are random, so the text is
nonsense; ``NOTICE`` says so in words a user sees.
"""

from __future__ import annotations

import os
import shutil
from importlib import resources
from pathlib import Path

import ml_dtypes
import numpy as np

from iron.lm.checkpoint import save_checkpoint
from iron.lm.config import LlamaConfig

__all__ = [
    "NOTICE",
    "random_state_dict",
    "state_dict_shapes",
    "tokenizer_dir",
    "write_checkpoint",
]

NOTICE = (
    "no --checkpoint given: running the embedded tiny Llama, whose weights are "
    "RANDOM (seeded), with a small built-in tokenizer; its output is "
    "meaningless text. Pass --checkpoint DIR with a Hugging Face Llama "
    "checkpoint for real answers."
)

#: Standard deviation of the random matrices (transformers' default
#: ``initializer_range`` for Llama).
INIT_STD = 0.02


def tokenizer_dir() -> Path:
    """The packaged tiny tokenizer's folder (tokenizer.json and
    tokenizer_config.json), as a filesystem path."""
    return Path(str(resources.files("iron.lm") / "data" / "tiny"))


def state_dict_shapes(config: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """Every Hugging Face Llama parameter name and its shape.

    Linear weights are (out_features, in_features), as torch stores them;
    norms are (hidden_size,). ``lm_head.weight`` is absent when the
    embeddings are tied (a tied checkpoint does not store it).
    """
    h, i = config.hidden_size, config.intermediate_size
    q = config.num_attention_heads * config.head_dim
    kv = config.num_key_value_heads * config.head_dim
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (config.vocab_size, h)
    }
    for n in range(config.num_hidden_layers):
        p = f"model.layers.{n}."
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "self_attn.q_proj.weight"] = (q, h)
        shapes[p + "self_attn.k_proj.weight"] = (kv, h)
        shapes[p + "self_attn.v_proj.weight"] = (kv, h)
        shapes[p + "self_attn.o_proj.weight"] = (h, q)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
        shapes[p + "mlp.gate_proj.weight"] = (i, h)
        shapes[p + "mlp.up_proj.weight"] = (i, h)
        shapes[p + "mlp.down_proj.weight"] = (h, i)
    shapes["model.norm.weight"] = (h,)
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (config.vocab_size, h)
    return shapes


def random_state_dict(
    config: LlamaConfig | None = None,
    seed: int = 0,
    *,
    dtype: np.dtype | type = ml_dtypes.bfloat16,
) -> dict[str, np.ndarray]:
    """Seeded random weights for ``config`` (default ``LlamaConfig.tiny()``).

    Matrices are normal with standard deviation 0.02 (as transformers
    initializes Llama), norm weights are ones; all in ``dtype`` (bf16), drawn
    in ``state_dict_shapes`` order from ``numpy.random.default_rng(seed)``, so
    a seed gives
    the same weights on every machine.
    """
    config = config or LlamaConfig.tiny()
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for name, shape in state_dict_shapes(config).items():
        if name.endswith("norm.weight"):
            out[name] = np.ones(shape, dtype=dtype)
        else:
            values = rng.standard_normal(shape, dtype=np.float32) * INIT_STD
            out[name] = values.astype(dtype)
    return out


def write_checkpoint(
    directory: str | os.PathLike[str],
    *,
    config: LlamaConfig | None = None,
    seed: int = 0,
    max_shard_bytes: int | None = None,
) -> Path:
    """Write the tiny model as a Hugging Face checkpoint folder.

    config.json, random weights as safetensors (sharded with an index when
    ``max_shard_bytes`` asks), and the packaged tokenizer files: a folder
    ``open_checkpoint`` and ``Tokenizer.from_directory`` read like a real
    one. Returns the folder.
    """
    config = config or LlamaConfig.tiny()
    root = Path(directory)
    save_checkpoint(
        root,
        config,
        random_state_dict(config, seed),
        max_shard_bytes=max_shard_bytes,
    )
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(tokenizer_dir() / name, root / name)
    return root
