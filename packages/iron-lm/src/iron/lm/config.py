"""The Llama configuration: what a Hugging Face ``config.json`` says, checked.

``LlamaConfig`` holds the numbers the decoder is built from (sizes, heads,
layers, norm epsilon, rotary settings, vocabulary, special ids). It is read
from a checkpoint's ``config.json`` (``from_json``) or a dict (``from_dict``)
and refuses, naming the field and its value, what IRON's Llama does not run:
another architecture, an activation other than SiLU, biased projections,
rotary scalings other than Llama 3's, sliding windows, quantized weights.
Fields it does not know are ignored (Hugging Face configs carry many that do
not change the computation: ``initializer_range``, ``use_cache``, ...);
``pretraining_tp`` is one of them: it only split the projections during
pre-training and the stored weights are whole.

``LlamaConfig.tiny()`` is the embedded default: a two-layer model sized for
the tokenizer shipped in this package, with every dimension a multiple of 16
so the NPU operators accept it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "LIMITS",
    "ConfigError",
    "LlamaConfig",
    "RopeScaling",
    "UnsupportedModelError",
]

#: The vocabulary size of the tokenizer in ``iron/lm/data/tiny`` (checked by
#: the package's tests against the shipped tokenizer.json).
TINY_VOCAB_SIZE = 512

_ARCHITECTURE = "LlamaForCausalLM"
_MODEL_TYPE = "llama"


class ConfigError(ValueError):
    """A config.json that is malformed or inconsistent (a field missing, a
    value of the wrong type, heads that do not divide)."""


class UnsupportedModelError(ConfigError):
    """A valid Hugging Face config of a model or setting IRON's Llama does not
    run (another architecture, a rotary scaling type, biased projections...)."""


#: The largest count each field may hold: several times the largest Llama
#: published (405B: 126 layers, width 16384, 53248, 128 heads; a 256k
#: vocabulary; 1M positions), and small enough that a hostile config is
#: refused here, before anything is sized from it.
LIMITS = {
    "hidden_size": 1 << 16,
    "intermediate_size": 1 << 18,
    "num_attention_heads": 1 << 10,
    "num_key_value_heads": 1 << 10,
    "head_dim": 1 << 10,
    "num_hidden_layers": 1 << 10,
    "vocab_size": 1 << 22,
    "max_position_embeddings": 1 << 24,
}


@dataclass(frozen=True)
class RopeScaling:
    """Llama 3's rotary frequency scaling (``rope_scaling`` with type "llama3").

    Attributes:
        factor: How much longer the context is than in pre-training.
        low_freq_factor: Wavelengths above ``original / low_freq_factor``
            are divided by ``factor``.
        high_freq_factor: Wavelengths below ``original / high_freq_factor``
            are kept; those between are blended smoothly.
        original_max_position_embeddings: The pre-training context length.
        rope_type: Always "llama3" (kept so ``to_dict`` round-trips).
    """

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int
    rope_type: str = "llama3"

    def __post_init__(self) -> None:
        _check_rope("rope_scaling", self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """The ``rope_scaling`` entry of ``config.json`` this describes."""
        return {
            "factor": self.factor,
            "low_freq_factor": self.low_freq_factor,
            "high_freq_factor": self.high_freq_factor,
            "original_max_position_embeddings": self.original_max_position_embeddings,
            "rope_type": self.rope_type,
        }


@dataclass(frozen=True)
class LlamaConfig:
    """The shape and settings of a Llama decoder (Hugging Face field names).

    Attributes:
        hidden_size: Width of the residual stream.
        intermediate_size: Width of the SwiGLU MLP.
        num_attention_heads: Query heads.
        num_key_value_heads: Key/value heads (grouped-query attention);
            divides ``num_attention_heads``.
        head_dim: Width of one head. Defaults to ``hidden_size //
            num_attention_heads``; may be given explicitly, and then
            ``heads * head_dim`` need not equal ``hidden_size``.
        num_hidden_layers: Decoder layers.
        rms_norm_eps: Epsilon of every RMSNorm.
        rope_theta: Rotary base frequency.
        rope_scaling: Llama 3 frequency scaling, or None for plain RoPE.
        vocab_size: Rows of the embedding and of the LM head.
        tie_word_embeddings: The LM head reuses the embedding matrix
            (the checkpoint then has no ``lm_head.weight``).
        max_position_embeddings: The longest context the model was made for.
        bos_token_id: Beginning-of-sequence id, or None.
        eos_token_id: End-of-sequence id, a tuple of them (Llama 3 instruct
            models list several), or None.
        dtype: The checkpoint's stored dtype as the config names it
            ("bfloat16"), for information only.
    """

    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    num_hidden_layers: int
    vocab_size: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling | None = None
    tie_word_embeddings: bool = False
    max_position_embeddings: int = 2048
    bos_token_id: int | None = None
    eos_token_id: int | tuple[int, ...] | None = None
    dtype: str | None = None

    def __post_init__(self) -> None:
        for name in (
            "hidden_size",
            "intermediate_size",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "num_hidden_layers",
            "vocab_size",
            "max_position_embeddings",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(
                    f"config field {name!r} must be a positive integer, got {value!r}"
                )
            if value > LIMITS[name]:
                raise ConfigError(
                    f"config field {name!r} is {value}, over the {LIMITS[name]} this "
                    "library takes (iron.lm.config.LIMITS): the config is damaged, or "
                    "the model is far beyond any Llama IRON runs"
                )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ConfigError(
                f"config field 'num_key_value_heads' ({self.num_key_value_heads}) "
                f"must divide 'num_attention_heads' ({self.num_attention_heads})"
            )
        for name in ("rms_norm_eps", "rope_theta"):
            value = getattr(self, name)
            if not _finite_positive(value):
                raise ConfigError(
                    f"config field {name!r} must be a positive number, got {value!r}"
                )
        if self.head_dim % 2:
            raise ConfigError(
                f"config field 'head_dim' must be even for rotary embeddings, "
                f"got {self.head_dim}"
            )
        if not isinstance(self.tie_word_embeddings, bool):
            raise ConfigError(
                "config field 'tie_word_embeddings' must be true or false, got "
                f"{self.tie_word_embeddings!r}"
            )
        if isinstance(self.eos_token_id, list):
            object.__setattr__(self, "eos_token_id", tuple(self.eos_token_id))
        for i in _ids(self.eos_token_id) + _ids(self.bos_token_id):
            if isinstance(i, bool) or not isinstance(i, int) or i < 0:
                raise ConfigError(f"config token ids must be integers >= 0, got {i!r}")

    # -- derived ---------------------------------------------------------------

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        """Every end-of-sequence id, as a tuple (empty when none is set)."""
        return _ids(self.eos_token_id)

    @property
    def num_key_value_groups(self) -> int:
        """Query heads per key/value head."""
        return self.num_attention_heads // self.num_key_value_heads

    # -- construction ----------------------------------------------------------

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> LlamaConfig:
        """Read a ``config.json`` (the file, or the directory holding it)."""
        p = Path(path)
        if p.is_dir():
            p = p / "config.json"
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise FileNotFoundError(
                f"no config.json at {str(p)!r}: a Hugging Face checkpoint "
                "directory holds config.json beside its *.safetensors"
            ) from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{str(p)!r} is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{str(p)!r} must hold a JSON object")
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LlamaConfig:
        """Build from a Hugging Face config dict, refusing what is unsupported.

        Raises:
            UnsupportedModelError: Another architecture or an unsupported
                setting; the message names the field and value.
            ConfigError: A required field missing or a value invalid.
        """
        _check_architecture(d)
        _check_unsupported(d)

        def required(name: str) -> Any:
            if d.get(name) is None:
                raise ConfigError(f"config field {name!r} is missing")
            return d[name]

        hidden = required("hidden_size")
        heads = required("num_attention_heads")
        kv_heads = d.get("num_key_value_heads")
        if kv_heads is None:
            kv_heads = heads
        head_dim = d.get("head_dim")
        if head_dim is None:
            if not isinstance(hidden, int) or not isinstance(heads, int) or heads <= 0:
                raise ConfigError(
                    "config fields 'hidden_size' and 'num_attention_heads' must be "
                    f"positive integers, got {hidden!r} and {heads!r}"
                )
            if hidden % heads:
                raise ConfigError(
                    f"config has no 'head_dim' and 'hidden_size' ({hidden}) is not "
                    f"divisible by 'num_attention_heads' ({heads})"
                )
            head_dim = hidden // heads
        rope_theta, rope_scaling = _rope(d)
        eos = d.get("eos_token_id")
        if isinstance(eos, list):
            eos = tuple(eos)
        return cls(
            hidden_size=hidden,
            intermediate_size=required("intermediate_size"),
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            head_dim=head_dim,
            num_hidden_layers=required("num_hidden_layers"),
            vocab_size=required("vocab_size"),
            rms_norm_eps=_number(d, "rms_norm_eps", 1e-6),
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            tie_word_embeddings=_flag(d, "tie_word_embeddings", False),
            max_position_embeddings=d.get("max_position_embeddings", 2048),
            bos_token_id=d.get("bos_token_id"),
            eos_token_id=eos,
            dtype=d.get("torch_dtype", d.get("dtype")),
        )

    def to_dict(self) -> dict[str, Any]:
        """A Hugging Face style config dict (``from_dict(to_dict())`` is equal)."""
        eos = self.eos_token_id
        return {
            "architectures": [_ARCHITECTURE],
            "model_type": _MODEL_TYPE,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "num_hidden_layers": self.num_hidden_layers,
            "hidden_act": "silu",
            "attention_bias": False,
            "mlp_bias": False,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": None
            if self.rope_scaling is None
            else self.rope_scaling.to_dict(),
            "vocab_size": self.vocab_size,
            "tie_word_embeddings": self.tie_word_embeddings,
            "max_position_embeddings": self.max_position_embeddings,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": list(eos) if isinstance(eos, tuple) else eos,
            "torch_dtype": self.dtype,
        }

    def to_json(self, path: str | os.PathLike[str]) -> None:
        """Write ``to_dict()`` as a config.json (indented, keys in order)."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", "utf-8")

    @classmethod
    def tiny(cls, **overrides: Any) -> LlamaConfig:
        """The embedded default: a tiny Llama for the packaged tokenizer.

        Vocabulary 512 (the shipped tokenizer's), hidden 128, MLP 384 (3x,
        near Llama's 8/3), 4 query heads and 2 key/value heads of 32 (the
        least head_dim RoPE's 16-lane halves take), 2 layers, tied
        embeddings, 256 positions, bf16: every dimension one the NPU
        operators accept on both devices. Its weights
        come from ``iron.lm.tiny.random_state_dict`` (seeded, random). Any
        field can be overridden by keyword.
        """
        base = cls(
            hidden_size=128,
            intermediate_size=384,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=32,
            num_hidden_layers=2,
            vocab_size=TINY_VOCAB_SIZE,
            rms_norm_eps=1e-5,
            rope_theta=10000.0,
            rope_scaling=None,
            tie_word_embeddings=True,
            max_position_embeddings=256,
            bos_token_id=0,
            eos_token_id=(1, 2),
            dtype="bfloat16",
        )
        return dataclasses.replace(base, **overrides) if overrides else base


# -- helpers -------------------------------------------------------------------


def _ids(value: int | tuple[int, ...] | None) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, (tuple, list)):
        return tuple(value)
    return (value,)


def _number(d: Mapping[str, Any], name: str, default: float) -> float:
    value = d.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"config field {name!r} must be a number, got {value!r}")
    return float(value)


def _flag(d: Mapping[str, Any], name: str, default: bool) -> bool:
    """A boolean field: JSON true/false only (``bool("false")`` is True)."""
    value = d.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(
            f"config field {name!r} must be true or false (a JSON boolean), got "
            f"{value!r}"
        )
    return value


def _check_architecture(d: Mapping[str, Any]) -> None:
    archs = d.get("architectures")
    model_type = d.get("model_type")
    if archs is not None:
        if not isinstance(archs, list) or archs != [_ARCHITECTURE]:
            raise UnsupportedModelError(
                f"config field 'architectures' is {archs!r}; IRON runs "
                f"[{_ARCHITECTURE!r}] only"
            )
    elif model_type is None:
        raise UnsupportedModelError(
            "config has neither 'architectures' nor 'model_type'; IRON runs "
            f"Llama checkpoints (architectures [{_ARCHITECTURE!r}], model_type "
            f"{_MODEL_TYPE!r})"
        )
    if model_type is not None and model_type != _MODEL_TYPE:
        raise UnsupportedModelError(
            f"config field 'model_type' is {model_type!r}; IRON runs "
            f"{_MODEL_TYPE!r} only"
        )


def _check_unsupported(d: Mapping[str, Any]) -> None:
    def refuse(name: str, what: str) -> None:
        raise UnsupportedModelError(
            f"config field {name!r} is {d[name]!r}: IRON's Llama supports {what}"
        )

    if d.get("hidden_act", "silu") != "silu":
        refuse("hidden_act", "the 'silu' (SwiGLU) MLP only")
    for name in ("attention_bias", "mlp_bias"):
        if _flag(d, name, False):
            refuse(name, "projections without biases only")
    if d.get("sliding_window") is not None:
        refuse("sliding_window", "full causal attention only (no sliding window)")
    if d.get("quantization_config") is not None:
        refuse("quantization_config", "unquantized (bf16/f16/f32) weights only")
    if d.get("partial_rotary_factor", 1.0) not in (1, 1.0):
        refuse("partial_rotary_factor", "rotary embeddings over the whole head only")


_ROPE_KEYS = (
    "factor",
    "low_freq_factor",
    "high_freq_factor",
    "original_max_position_embeddings",
)


def _check_rope(field: str, values: Mapping[str, Any]) -> None:
    """Llama 3 scaling's numbers: finite and positive, low below high.

    The table divides by ``factor`` and by ``low_freq_factor`` (see
    transformers' ``_compute_llama3_parameters`` in
    src/transformers/modeling_rope_utils.py), so a zero, NaN or infinite
    value would give a table of NaN and a model that says nothing.
    """
    for key in _ROPE_KEYS:
        value = values[key]
        if not _finite_positive(value):
            raise ConfigError(
                f"config field '{field}.{key}' must be a finite positive number "
                f"for 'llama3' scaling, got {value!r}"
            )
    if values["low_freq_factor"] >= values["high_freq_factor"]:
        raise ConfigError(
            f"config field '{field}': 'low_freq_factor' "
            f"({values['low_freq_factor']}) must be below 'high_freq_factor' "
            f"({values['high_freq_factor']})"
        )


def _rope(d: Mapping[str, Any]) -> tuple[float, RopeScaling | None]:
    """rope_theta and the scaling, from ``rope_theta``/``rope_scaling`` or from
    ``rope_parameters`` (the single dict newer transformers write)."""
    field = "rope_scaling"
    spec = d.get("rope_scaling")
    theta = _number(d, "rope_theta", 10000.0)
    params = d.get("rope_parameters")
    if params is not None:
        if not isinstance(params, Mapping):
            raise ConfigError(
                f"config field 'rope_parameters' must be an object, got {params!r}"
            )
        if params.get("rope_theta") is not None:
            theta = _number(params, "rope_theta", theta)
        if params.get("partial_rotary_factor", 1.0) not in (1, 1.0):
            raise UnsupportedModelError(
                "config field 'rope_parameters.partial_rotary_factor' is "
                f"{params['partial_rotary_factor']!r}: IRON's Llama supports "
                "rotary embeddings over the whole head only"
            )
        if spec is None:
            field, spec = "rope_parameters", params
    if spec is None:
        return theta, None
    if not isinstance(spec, Mapping):
        raise ConfigError(f"config field {field!r} must be an object, got {spec!r}")
    kind = spec.get("rope_type", spec.get("type", "default"))
    if kind in (None, "default"):
        return theta, None
    if kind != "llama3":
        raise UnsupportedModelError(
            f"config field '{field}.rope_type' is {kind!r}: IRON's Llama supports "
            "rotary scaling 'llama3' and 'default' only"
        )
    values = {}
    for key in _ROPE_KEYS:
        value = spec.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(
                f"config field '{field}.{key}' must be a number for 'llama3' "
                f"scaling, got {value!r}"
            )
        values[key] = value
    _check_rope(field, values)
    return theta, RopeScaling(
        factor=float(values["factor"]),
        low_freq_factor=float(values["low_freq_factor"]),
        high_freq_factor=float(values["high_freq_factor"]),
        original_max_position_embeddings=int(
            values["original_max_position_embeddings"]
        ),
    )


def _finite_positive(value: object) -> bool:
    """A JSON number (not a bool) that is finite and above 0."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )
