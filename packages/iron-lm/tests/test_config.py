"""LlamaConfig: real configs parse, unsupported ones are refused by name."""

from __future__ import annotations

import dataclasses
import json

import pytest

from iron.lm.config import (
    LIMITS,
    ConfigError,
    LlamaConfig,
    RopeScaling,
    UnsupportedModelError,
)

# The config.json of meta-llama/Llama-3.2-1B-Instruct (values as published).
LLAMA_32_1B_INSTRUCT = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009],
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 8192,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 16,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 32.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0",
    "use_cache": True,
    "vocab_size": 128256,
}

# A Llama 2 style config: no head_dim, no num_key_value_heads, no rope_scaling.
LLAMA_2_STYLE = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "rms_norm_eps": 1e-05,
    "vocab_size": 32000,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "max_position_embeddings": 4096,
    "rope_scaling": None,
    "pretraining_tp": 1,
}


def with_(base: dict, **changes) -> dict:
    d = json.loads(json.dumps(base))
    d.update(changes)
    return d


def test_llama_32_1b_instruct_parses() -> None:
    c = LlamaConfig.from_dict(LLAMA_32_1B_INSTRUCT)
    assert (c.hidden_size, c.intermediate_size) == (2048, 8192)
    assert (c.num_attention_heads, c.num_key_value_heads, c.head_dim) == (32, 8, 64)
    assert c.num_key_value_groups == 4
    assert c.num_hidden_layers == 16
    assert c.rms_norm_eps == 1e-5
    assert c.rope_theta == 500000.0
    assert c.rope_scaling == RopeScaling(
        factor=32.0,
        low_freq_factor=1.0,
        high_freq_factor=4.0,
        original_max_position_embeddings=8192,
    )
    assert c.vocab_size == 128256
    assert c.tie_word_embeddings is True
    assert c.max_position_embeddings == 131072
    assert c.bos_token_id == 128000
    assert c.eos_token_id == (128001, 128008, 128009)
    assert c.eos_token_ids == (128001, 128008, 128009)
    assert c.dtype == "bfloat16"


def test_defaults_follow_hugging_face() -> None:
    c = LlamaConfig.from_dict(LLAMA_2_STYLE)
    assert c.head_dim == 4096 // 32
    assert c.num_key_value_heads == 32
    assert c.rope_scaling is None
    assert c.rope_theta == 10000.0
    assert c.tie_word_embeddings is False
    assert c.eos_token_id == 2 and c.eos_token_ids == (2,)


def test_explicit_head_dim_need_not_multiply_to_hidden() -> None:
    c = LlamaConfig.from_dict(with_(LLAMA_2_STYLE, head_dim=64, num_attention_heads=16))
    assert c.head_dim == 64 and c.num_attention_heads * c.head_dim != c.hidden_size


def test_model_type_alone_is_enough() -> None:
    d = with_(LLAMA_2_STYLE)
    del d["architectures"]
    assert LlamaConfig.from_dict(d).hidden_size == 4096


@pytest.mark.parametrize("rope", [None, {"rope_type": "default"}, {"type": "default"}])
def test_default_rope_is_no_scaling(rope) -> None:
    c = LlamaConfig.from_dict(with_(LLAMA_2_STYLE, rope_scaling=rope))
    assert c.rope_scaling is None


def test_legacy_type_key_for_llama3_scaling() -> None:
    scaling = dict(LLAMA_32_1B_INSTRUCT["rope_scaling"])
    scaling["type"] = scaling.pop("rope_type")
    c = LlamaConfig.from_dict(with_(LLAMA_32_1B_INSTRUCT, rope_scaling=scaling))
    assert c.rope_scaling is not None and c.rope_scaling.factor == 32.0


def test_rope_parameters_form() -> None:
    # Newer transformers write rope_theta and the scaling as one dict.
    d = with_(LLAMA_32_1B_INSTRUCT)
    params = dict(d.pop("rope_scaling"), rope_theta=d.pop("rope_theta"))
    d["rope_parameters"] = params
    c = LlamaConfig.from_dict(d)
    assert c == LlamaConfig.from_dict(LLAMA_32_1B_INSTRUCT)


def test_pretraining_tp_is_ignored() -> None:
    c = LlamaConfig.from_dict(with_(LLAMA_2_STYLE, pretraining_tp=2))
    assert c == LlamaConfig.from_dict(LLAMA_2_STYLE)


@pytest.mark.parametrize("source", [LLAMA_32_1B_INSTRUCT, LLAMA_2_STYLE])
def test_to_dict_round_trips(source) -> None:
    c = LlamaConfig.from_dict(source)
    again = LlamaConfig.from_dict(json.loads(json.dumps(c.to_dict())))
    assert again == c


def test_from_json_file_and_directory(tmp_path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_32_1B_INSTRUCT))
    expected = LlamaConfig.from_dict(LLAMA_32_1B_INSTRUCT)
    assert LlamaConfig.from_json(tmp_path) == expected
    assert LlamaConfig.from_json(tmp_path / "config.json") == expected
    LlamaConfig.tiny().to_json(tmp_path / "config.json")
    assert LlamaConfig.from_json(tmp_path) == LlamaConfig.tiny()


def test_from_json_errors(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="config.json"):
        LlamaConfig.from_json(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        LlamaConfig.from_json(tmp_path)


def test_frozen_and_hashable() -> None:
    c = LlamaConfig.from_dict(LLAMA_32_1B_INSTRUCT)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.hidden_size = 1  # type: ignore[misc]
    assert hash(c) == hash(LlamaConfig.from_dict(LLAMA_32_1B_INSTRUCT))


@pytest.mark.parametrize(
    "changes, field, value",
    [
        ({"architectures": ["MistralForCausalLM"]}, "architectures", "Mistral"),
        (
            {"architectures": ["LlamaForCausalLM"], "model_type": "gemma"},
            "model_type",
            "gemma",
        ),
        ({"hidden_act": "gelu"}, "hidden_act", "gelu"),
        ({"attention_bias": True}, "attention_bias", "True"),
        ({"mlp_bias": True}, "mlp_bias", "True"),
        ({"sliding_window": 4096}, "sliding_window", "4096"),
        (
            {"quantization_config": {"quant_method": "awq"}},
            "quantization_config",
            "awq",
        ),
        ({"partial_rotary_factor": 0.5}, "partial_rotary_factor", "0.5"),
        (
            {"rope_scaling": {"rope_type": "linear", "factor": 2.0}},
            "rope_scaling",
            "linear",
        ),
        (
            {"rope_scaling": {"type": "dynamic", "factor": 2.0}},
            "rope_scaling",
            "dynamic",
        ),
        (
            {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
            "rope_scaling",
            "yarn",
        ),
    ],
)
def test_unsupported_is_refused_by_name(changes, field, value) -> None:
    with pytest.raises(UnsupportedModelError) as info:
        LlamaConfig.from_dict(with_(LLAMA_32_1B_INSTRUCT, **changes))
    assert field in str(info.value) and value in str(info.value)
    assert isinstance(info.value, ValueError)


def test_no_architecture_at_all_is_refused() -> None:
    d = with_(LLAMA_2_STYLE)
    del d["architectures"], d["model_type"]
    with pytest.raises(UnsupportedModelError, match="architectures"):
        LlamaConfig.from_dict(d)


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"hidden_size": None}, ["hidden_size", "missing"]),
        ({"num_key_value_heads": 5}, ["num_key_value_heads", "5", "32"]),
        ({"num_hidden_layers": 0}, ["num_hidden_layers", "0"]),
        ({"vocab_size": "big"}, ["vocab_size", "big"]),
        ({"rms_norm_eps": "small"}, ["rms_norm_eps", "small"]),
        ({"head_dim": 63}, ["head_dim", "even"]),
        (
            {"rope_scaling": {"rope_type": "llama3", "factor": 8.0}},
            ["rope_scaling.low_freq_factor"],
        ),
        (
            {
                "rope_scaling": {
                    "rope_type": "llama3",
                    "factor": 8.0,
                    "low_freq_factor": 4.0,
                    "high_freq_factor": 1.0,
                    "original_max_position_embeddings": 8192,
                }
            },
            ["low_freq_factor", "high_freq_factor"],
        ),
    ],
)
def test_invalid_values_name_the_field(changes, words) -> None:
    with pytest.raises(ConfigError) as info:
        LlamaConfig.from_dict(with_(LLAMA_32_1B_INSTRUCT, **changes))
    for word in words:
        assert word in str(info.value)


def test_head_dim_default_needs_divisible_hidden() -> None:
    d = with_(LLAMA_2_STYLE, hidden_size=4000, num_attention_heads=48)
    with pytest.raises(ConfigError, match="head_dim"):
        LlamaConfig.from_dict(d)


def test_tiny_preset() -> None:
    c = LlamaConfig.tiny()
    assert c.vocab_size == 512
    assert (c.hidden_size, c.intermediate_size, c.head_dim) == (128, 384, 32)
    assert (c.num_attention_heads, c.num_key_value_heads) == (4, 2)
    assert c.num_hidden_layers == 2 and c.tie_word_embeddings
    for size in (
        c.hidden_size,
        c.intermediate_size,
        c.head_dim,
        c.vocab_size,
        c.num_attention_heads * c.head_dim,
        c.num_key_value_heads * c.head_dim,
    ):
        assert size % 16 == 0
    assert LlamaConfig.tiny(num_hidden_layers=4).num_hidden_layers == 4
    with pytest.raises(ConfigError):
        LlamaConfig.tiny(num_key_value_heads=3)


# -- issue 14: numbers and booleans a careless config gives ------------------


def _llama3(**rope) -> dict:
    scaling = dict(LLAMA_32_1B_INSTRUCT["rope_scaling"], **rope)
    return with_(LLAMA_32_1B_INSTRUCT, rope_scaling=scaling)


@pytest.mark.parametrize(
    "key, value",
    [
        ("factor", float("nan")),
        ("factor", float("inf")),
        ("factor", 0.0),
        ("low_freq_factor", 0),  # a ZeroDivisionError in the table before
        ("low_freq_factor", -1.0),
        ("high_freq_factor", float("nan")),
        ("original_max_position_embeddings", 0),
    ],
)
def test_rope_scaling_numbers_are_finite_and_positive(key, value) -> None:
    with pytest.raises(ConfigError, match=f"rope_scaling.{key}.*finite positive"):
        LlamaConfig.from_dict(_llama3(**{key: value}))


def test_rope_parameters_form_is_checked_alike() -> None:
    params = dict(LLAMA_32_1B_INSTRUCT["rope_scaling"], factor=float("nan"))
    d = with_(LLAMA_32_1B_INSTRUCT, rope_scaling=None, rope_parameters=params)
    with pytest.raises(ConfigError, match="rope_parameters.factor"):
        LlamaConfig.from_dict(d)


def test_rope_scaling_made_directly_is_checked() -> None:
    with pytest.raises(ConfigError, match="rope_scaling.factor"):
        RopeScaling(float("nan"), 1.0, 4.0, 8192)


def test_a_nan_rope_theta_is_refused() -> None:
    with pytest.raises(ConfigError, match="rope_theta"):
        LlamaConfig.from_dict(with_(LLAMA_32_1B_INSTRUCT, rope_theta=float("nan")))


@pytest.mark.parametrize("field", ["tie_word_embeddings", "attention_bias", "mlp_bias"])
@pytest.mark.parametrize("value", ["false", "true", 0, 1])
def test_booleans_are_json_booleans(field, value) -> None:
    # bool("false") is True: a string would tie (or refuse) silently.
    with pytest.raises(ConfigError, match=f"'{field}' must be true or false") as info:
        LlamaConfig.from_dict(with_(LLAMA_32_1B_INSTRUCT, **{field: value}))
    assert repr(value) in str(info.value)
    assert not isinstance(info.value, UnsupportedModelError)


def test_a_boolean_given_directly_is_checked() -> None:
    with pytest.raises(ConfigError, match="tie_word_embeddings"):
        LlamaConfig.tiny(tie_word_embeddings="false")


@pytest.mark.parametrize("field", sorted(LIMITS))
@pytest.mark.parametrize("over", [1, 10**9])
def test_an_absurd_count_is_refused_before_anything_is_sized(field, over) -> None:
    import time

    value = LIMITS[field] + 1 if over == 1 else max(over, LIMITS[field] + 1)
    changes = {field: value}
    start = time.monotonic()
    with pytest.raises(ConfigError, match=f"'{field}' is {value}, over the"):
        LlamaConfig.from_dict(with_(LLAMA_32_1B_INSTRUCT, **changes))
    assert time.monotonic() - start < 0.1
    at_limit = {k: LIMITS[field] for k in changes}
    if field in ("num_attention_heads", "num_key_value_heads", "head_dim"):
        return  # their limits need the others to match; the refusal is the point
    LlamaConfig.from_dict(with_(LLAMA_32_1B_INSTRUCT, **at_limit))
