"""docs/guide/models.md's table of sizes is what IRON plans for each model.

Each row is recomputed from the model's Hugging Face config (the numbers
below are those of each repository's ``config.json``): its parameters, its
weights in bf16, its KV cache and the whole arena at the CLI's default
context (2048), planned for both devices, and the decode step's modelled
time on each (the cost model, not a measurement). Weights are placeholders
that cost no memory.
"""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16

import iron
from iron.lm import tiny
from iron.lm.config import LlamaConfig
from iron.lm.model import Llama

CONTEXT = 2048  # iron-lm generate's default: min(the model's, 2048)

# (name on the page, repository, config.json fields that set the sizes)
MODELS = [
    (
        "SmolLM2-135M",
        "HuggingFaceTB/SmolLM2-135M",
        dict(hidden_size=576, intermediate_size=1536, num_attention_heads=9,
             num_key_value_heads=3, head_dim=64, num_hidden_layers=30,
             vocab_size=49152, tie_word_embeddings=True),
    ),
    (
        "TinyLlama-1.1B-Chat-v1.0",
        "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        dict(hidden_size=2048, intermediate_size=5632, num_attention_heads=32,
             num_key_value_heads=4, head_dim=64, num_hidden_layers=22,
             vocab_size=32000, tie_word_embeddings=False),
    ),
    (
        "Llama-3.2-1B",
        "meta-llama/Llama-3.2-1B",
        dict(hidden_size=2048, intermediate_size=8192, num_attention_heads=32,
             num_key_value_heads=8, head_dim=64, num_hidden_layers=16,
             vocab_size=128256, tie_word_embeddings=True),
    ),
    (
        "Llama-3.2-3B",
        "meta-llama/Llama-3.2-3B",
        dict(hidden_size=3072, intermediate_size=8192, num_attention_heads=24,
             num_key_value_heads=8, head_dim=128, num_hidden_layers=28,
             vocab_size=128256, tie_word_embeddings=True),
    ),
    (
        "Llama-2-7b-hf",
        "meta-llama/Llama-2-7b-hf",
        dict(hidden_size=4096, intermediate_size=11008, num_attention_heads=32,
             num_key_value_heads=32, head_dim=128, num_hidden_layers=32,
             vocab_size=32000, tie_word_embeddings=False),
    ),
    (
        "Llama-3.1-8B",
        "meta-llama/Llama-3.1-8B",
        dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
             num_key_value_heads=8, head_dim=128, num_hidden_layers=32,
             vocab_size=128256, tie_word_embeddings=False),
    ),
]  # fmt: skip


def size(nbytes: int) -> str:
    """``nbytes`` in MiB below 1 GiB, else GiB, three significant digits."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if nbytes >= scale or unit == "MiB":
            value = nbytes / scale
            return f"{value:.3g} {unit}"
    raise AssertionError("unreachable")


def count(params: int) -> str:
    """A parameter count as the model cards say it: ``135 M``, ``1.24 B``."""
    if params >= 1e9:
        return f"{params / 1e9:.3g} B"
    return f"{params / 1e6:.3g} M"


def rate(tokens_per_s: float) -> str:
    """Modelled tokens/s: whole from 10 up, two significant digits below."""
    return f"{tokens_per_s:.0f}" if tokens_per_s >= 10 else f"{tokens_per_s:.2g}"


def row(name: str, repo: str, fields: dict) -> str:
    """The page's table row for one model."""
    config = LlamaConfig(**fields, max_position_embeddings=CONTEXT)
    shapes = tiny.state_dict_shapes(config)
    params = sum(int(np.prod(shape)) for shape in shapes.values())
    kv = 2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim
    zero = np.zeros((), bfloat16)
    arenas, rates = set(), []
    for device in ("npu1", "npu2"):
        with iron.use_device(device):
            model = Llama(config, context=CONTEXT, rows=16, profile=None)
            model.load_state_dict(
                {n: iron.param(np.broadcast_to(zero, s)) for n, s in shapes.items()}
            )
            prompt = iron.plan(device, model.record(tokens=((16,), np.int32)))
            decode = model.record()
            arena = iron.plan(device, decode, arena=prompt.arena).arena
            arenas.add(arena.size)
            rates.append(rate(1 / iron.roofline(decode).seconds))
    assert len(arenas) == 1, f"{name}: the arena differs between devices"
    return (
        f"| [{name}](https://huggingface.co/{repo}) | {count(params)} | "
        f"{size(2 * params)} | {size(kv * 2 * CONTEXT)} | {size(arenas.pop())} | "
        f"{' / '.join(rates)} |"
    )


@pytest.mark.parametrize("model", MODELS, ids=[m[0] for m in MODELS])
def test_the_models_page_shows_what_iron_plans(root, model):
    page = (root / "docs" / "guide" / "models.md").read_text()
    expected = row(*model)
    assert expected in page, f"docs/guide/models.md: the row should read\n{expected}"


def test_the_sizes_read_as_the_model_cards_say():
    assert count(134_515_008) == "135 M" and count(1_235_814_400) == "1.24 B"
    assert size(316_652_224) == "302 MiB" and size(2_539_860_032) == "2.37 GiB"


def test_the_packaged_llama_3_2_config_is_the_pages():
    """The one config the repository ships agrees with the page's numbers."""
    from pathlib import Path

    import iron.lm

    shipped = LlamaConfig.from_json(
        Path(iron.lm.__file__).parent / "applications/llama/configs/llama-3.2-1b.json"
    )
    (fields,) = [f for name, _, f in MODELS if name == "Llama-3.2-1B"]
    for key, value in fields.items():
        assert getattr(shipped, key) == value, key


def test_the_larger_models_table_is_what_footprint_counts():
    """Issue 34: the page's table of q4/q8/bf16 sizes at 2k, 32k and 128k
    positions is iron.lm.fit.footprint's, recomputed from the shipped
    configs (the numbers as printed: GB, two decimals or three figures)."""
    from pathlib import Path

    from iron.lm.applications.llama import CONFIGS
    from iron.lm.fit import footprint

    page = (Path(__file__).resolve().parent.parent / "docs/guide/models.md").read_text()
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in page.splitlines()
        if line.startswith("| Llama-3.") and line.count("|") == 7
    }
    names = {
        "Llama-3.2-1B": "llama-3.2-1b",
        "Llama-3.2-3B": "llama-3.2-3b",
        "Llama-3.1-8B": "llama-3.1-8b",
    }
    assert set(rows) == set(names)

    def gb(n: int) -> str:
        v = n / 1e9
        return f"{v:.2f}" if v < 10 else f"{v:.3g}" if v < 100 else f"{v:.0f}"

    for label, name in names.items():
        config = LlamaConfig.from_json(CONFIGS / f"{name}.json")
        want = []
        for w, spans in (("q4", True), ("q8", False), ("bf16", True)):
            want.append(gb(footprint(config, 2048, w).weights))
            if spans:
                want.append(
                    " / ".join(
                        gb(footprint(config, n, w).device)
                        for n in (2048, 32768, 131072)
                    )
                )
        assert rows[label] == want, label
