"""Llama 3 rotary scaling against transformers', for the shipped configs (issue 34).

For Llama-3.2-1B and -3B (factor 32) and Llama-3.1-8B (factor 8), each with
``original_max_position_embeddings`` 8192 and 131072 positions, IRON's
frequencies (:func:`iron.operators.rope.rope_inv_freq`, fed by
:class:`iron.lm.config.RopeScaling` as ``Llama`` feeds it) equal
transformers' ``ROPE_INIT_FUNCTIONS["llama3"]``
(src/transformers/modeling_rope_utils.py, ``_compute_llama3_parameters``)
in float32, and the cos/sin table rows at positions across the whole 128k
context equal ``LlamaRotaryEmbedding``'s cos and sin cast to bf16, as
transformers computes them (float32 angles). torch and transformers are
installed only in the oracle session.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ml_dtypes import bfloat16

torch = pytest.importorskip(
    "torch", reason="the oracle needs torch (nox -s oracle installs it)"
)
transformers = pytest.importorskip(
    "transformers", reason="the oracle needs transformers (nox -s oracle installs it)"
)

import iron.lm.applications.llama as llama_app  # noqa: E402
from iron.lm.config import LlamaConfig  # noqa: E402
from iron.operators.rope import rope_inv_freq, rope_table  # noqa: E402

CONFIGS = Path(llama_app.__file__).parent / "configs"
NAMES = ["llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b"]
#: Positions compared: the first, around the pre-training context, and the last.
POSITIONS = [0, 1, 2, 1023, 8191, 8192, 8193, 32767, 65536, 131071]


def _theirs(name: str):
    import json

    from transformers import LlamaConfig as HFConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    hf = HFConfig(**json.loads((CONFIGS / f"{name}.json").read_text()))
    inv, scale = ROPE_INIT_FUNCTIONS["llama3"](hf, "cpu")
    return hf, inv.numpy(), scale, LlamaRotaryEmbedding(hf)


@pytest.mark.parametrize("name", NAMES)
def test_llama3_frequencies_equal_transformers(name):
    config = LlamaConfig.from_json(CONFIGS / f"{name}.json")
    assert config.rope_scaling is not None
    _, inv, scale, _ = _theirs(name)
    assert scale == 1.0  # llama3 scaling leaves the attention scale alone
    ours = rope_inv_freq(
        config.head_dim, config.rope_theta, config.rope_scaling.to_dict()
    )
    np.testing.assert_array_equal(ours.astype(np.float32), inv.astype(np.float32))
    # All three bands are present: kept, blended and divided by factor.
    plain = rope_inv_freq(config.head_dim, config.rope_theta, None)
    ratio = plain / ours
    factor = config.rope_scaling.factor
    assert np.isclose(ratio, 1).any() and np.isclose(ratio, factor).any()
    assert ((ratio > 1.001) & (ratio < factor * 0.999)).any()


@pytest.mark.parametrize("name", NAMES)
def test_the_table_equals_transformers_cos_and_sin_across_128k(name):
    config = LlamaConfig.from_json(CONFIGS / f"{name}.json")
    _, _, _, rotary = _theirs(name)
    table = rope_table(
        config.max_position_embeddings,
        config.head_dim,
        config.rope_theta,
        config.rope_scaling.to_dict(),
    )
    x = torch.zeros(1, len(POSITIONS), config.head_dim, dtype=torch.bfloat16)
    ids = torch.tensor([POSITIONS])
    cos, sin = rotary(x, ids)  # bf16, (1, n, head_dim), halves repeated
    half = config.head_dim // 2
    want = np.concatenate(
        [cos[0, :, :half].float().numpy(), sin[0, :, :half].float().numpy()], axis=1
    ).astype(bfloat16)
    got = table[POSITIONS]
    # cos/sin of equal float32 angles, rounded to bf16: at most one bf16 ulp
    # apart where float32 cos/sin implementations differ in their last bit
    # and that bit decides the rounding.
    diff = np.abs(got.astype(np.float32) - want.astype(np.float32))
    ulp = np.spacing(
        np.abs(want.astype(np.float32)).astype(bfloat16).astype(np.float32)
    )
    assert (diff <= np.maximum(ulp, 2.0**-133)).all(), np.argwhere(diff > ulp)[:5]
    assert (got == want).mean() > 0.99
