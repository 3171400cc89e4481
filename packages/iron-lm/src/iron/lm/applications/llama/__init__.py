"""The Llama application: its versions for the tuner, its configs and profiles.

The Llama decoder (:class:`iron.lm.model.Llama`) builds two versions from one
body: the *prompt* version (a chunk of ``rows`` token ids) and the *decode*
version (one carried token). :class:`LlamaApplication` records both, per
device, from a configuration alone: every weight is bound to a zero-cost
placeholder (a read-only broadcast of one bf16 zero, of the weight's shape),
so no checkpoint tensor is read and a 1B or 8B config records in a fraction
of a second.

This directory also ships:

* ``profiles/npu1.json`` and ``profiles/npu2.json``: the tunables
  ``python -m iron.lm.tune llama`` chose for the Llama-3.2-1B config, which
  ``Llama`` applies by default (``Llama(...).profile`` is :data:`PROFILES`;
  the bound device picks the file);
* ``configs/llama-3.2-1b.json``: that config (Hugging Face's
  ``config.json`` values), so the tune and its check run with no download;
* ``configs/llama-3.2-3b.json`` and ``configs/llama-3.1-8b.json`` and their
  profiles ``profiles/llama-3.2-3b/<device>.json`` and
  ``profiles/llama-3.1-8b/<device>.json`` (npu1 and npu2; bf16, q4 and q8
  versions at 2048 positions), which
  ``Llama`` picks for a config of those shapes (:func:`profiles_for`);
* ``README.md``: the tuning workflow.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from ml_dtypes import bfloat16

from iron.core.device import Device, use_device
from iron.core.recording import Recording
from iron.lm.config import LlamaConfig

__all__ = [
    "CONFIGS",
    "CONTEXT",
    "DEFAULT_CONFIG",
    "PROFILES",
    "ROWS",
    "LlamaApplication",
    "packed_shapes",
    "placeholder_state_dict",
    "profiles_for",
]

#: The directory of the shipped per-device profiles (``<device>.json``).
PROFILES = Path(__file__).resolve().parent / "profiles"

#: The directory of the shipped configs.
CONFIGS = Path(__file__).resolve().parent / "configs"

#: The config the shipped profiles were tuned for.
DEFAULT_CONFIG = CONFIGS / "llama-3.2-1b.json"

#: The fields that decide a Llama's operator shapes (what profile entries match).
_SHAPE_FIELDS = (
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
)


def profiles_for(config: LlamaConfig) -> Path:
    """The shipped profiles directory for ``config``'s operator shapes.

    ``profiles/<name>/`` when a shipped config ``configs/<name>.json`` has
    the same shapes (hidden, MLP, heads, kv heads, head_dim, vocabulary;
    its layers, ids and dtype may differ) and that directory exists
    (Llama-3.2-3B and Llama-3.1-8B, issue 34); else :data:`PROFILES`,
    Llama-3.2-1B's, which shapes no entry matches fall back from to each
    operator's ``resolve()``.
    """
    want = tuple(getattr(config, f) for f in _SHAPE_FIELDS)
    for path in sorted(CONFIGS.glob("*.json")):
        own = PROFILES / path.stem
        if not own.is_dir():
            continue
        shipped = LlamaConfig.from_json(path)
        if tuple(getattr(shipped, f) for f in _SHAPE_FIELDS) == want:
            return own
    return PROFILES


#: Positions the tuned versions' KV caches hold, at most (``iron-lm generate``'s
#: default ``--context``); a model with fewer positions uses all of them.
CONTEXT = 2048

#: Tokens in one prompt chunk of the tuned prompt version (``Llama``'s and
#: ``iron-lm generate``'s default ``rows``).
ROWS = 16


def placeholder_state_dict(
    config: LlamaConfig, weights: str = "bf16"
) -> dict[str, np.ndarray]:
    """Zero-cost stand-ins for every weight of ``config``, at Hugging Face's names.

    Each is ``np.broadcast_to`` of a single zero: the right shape and dtype
    for ``Graph.load_state_dict``, no memory of its own (an 8B config's
    weights take a few kilobytes). Recording only reads shapes, so a graph
    bound to these records exactly as one bound to the checkpoint; it must
    not be run.

    Args:
        config: The model's configuration.
        weights: ``"bf16"`` (every weight bf16), or ``"q8"``/``"q4"``: the
            matrices ``Llama.from_pretrained(..., weights=...)`` quantizes
            (:func:`packed_shapes`) as their packed rows, ``uint8``.

    Returns:
        Parameter name -> read-only zero array of that parameter's shape.
    """
    from iron.lm.tiny import state_dict_shapes

    packed = packed_shapes(config, weights)
    zero, zero8 = np.zeros((), bfloat16), np.zeros((), np.uint8)
    return {
        name: np.broadcast_to(zero8, packed[name])
        if name in packed
        else np.broadcast_to(zero, shape)
        for name, shape in state_dict_shapes(config).items()
    }


def packed_shapes(config: LlamaConfig, weights: str) -> dict[str, tuple[int, int]]:
    """The packed ``(rows, row_bytes)`` of each matrix ``weights`` quantizes.

    As ``iron.lm.quantize`` decides: a 2-D ``.weight`` that is not a norm,
    whose rows are a multiple of ``iron.operators.qmatmul.K_MULTIPLE``
    elements; none for ``"bf16"``.

    Raises:
        ValueError: ``weights`` is not ``"bf16"``, ``"q8"`` or ``"q4"``.
    """
    from iron.lm.quantize import WEIGHTS
    from iron.lm.tiny import state_dict_shapes
    from iron.operators.qmatmul import K_MULTIPLE
    from iron.operators.quantized import FORMATS

    if weights not in WEIGHTS:
        raise ValueError(
            f"weights takes one of {list(WEIGHTS)}, got {weights!r}; the tuner's "
            f"--weights names the same"
        )
    if weights == "bf16":
        return {}
    fmt = FORMATS[weights]
    return {
        name: (shape[0], fmt.row_bytes(shape[1]))
        for name, shape in state_dict_shapes(config).items()
        if len(shape) == 2
        and name.endswith(".weight")
        and "norm" not in name
        and shape[1] % K_MULTIPLE == 0
    }


class LlamaApplication:
    """The Llama decoder as an application the tuner can name (``"llama"``).

    Args:
        context: Positions the KV caches hold, at most (default
            :data:`CONTEXT`; a model with fewer uses all of its own).
        rows: Tokens per prompt chunk (default :data:`ROWS`).

        weights: The weights its versions hold: ``"bf16"`` (the default),
            ``"q8"`` or ``"q4"`` (the matrices packed, as
            ``Llama.from_pretrained(..., weights=...)`` holds them), or
            several: a pair of versions for each.

    Attributes:
        name: ``"llama"``.
        weights: The weights its versions hold, in order.

    Raises:
        ValueError: ``weights`` names none or something else.
    """

    name = "llama"

    def __init__(
        self,
        *,
        context: int = CONTEXT,
        rows: int = ROWS,
        weights: str | tuple[str, ...] = "bf16",
    ) -> None:
        self.context = context
        self.rows = rows
        from iron.lm.quantize import WEIGHTS

        self.weights = (weights,) if isinstance(weights, str) else tuple(weights)
        bad = [w for w in self.weights if w not in WEIGHTS]
        if bad or not self.weights:
            raise ValueError(
                f"LlamaApplication: weights takes one or more of {list(WEIGHTS)}, "
                f"got {list(self.weights)}"
            )

    def profiles_dir(self) -> Path:
        """The shipped profiles' directory (:data:`PROFILES`)."""
        return PROFILES

    def default_config(self) -> Path:
        """The config.json the shipped profiles were tuned for (Llama-3.2-1B)."""
        return DEFAULT_CONFIG

    def load_config(self, path: str | os.PathLike[str]) -> LlamaConfig:
        """Read a Llama configuration.

        Args:
            path: A Hugging Face checkpoint directory (its ``config.json`` is
                read; no weight is opened) or a config.json file.

        Returns:
            The configuration.

        Raises:
            FileNotFoundError: No such file, or the directory has no
                config.json.
            iron.lm.config.ConfigError: The file is not a Llama config IRON
                runs (the message names the field).
        """
        return LlamaConfig.from_json(path)

    def config_name(self, path: str | os.PathLike[str]) -> str:
        """The config's name: the checkpoint directory's name or the file's stem."""
        p = Path(path)
        if p.is_dir() or p.name == "config.json":
            return (p if p.is_dir() else p.parent).resolve().name
        return p.stem

    def config_digest(self, config: LlamaConfig) -> str:
        """The first 16 hex digits of the SHA-256 of the config's values (sorted JSON)."""
        text = json.dumps(config.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def graph(self, config: LlamaConfig, weights: str | None = None) -> Any:
        """A ``Llama`` for ``config`` bound to placeholders, with no profile.

        The profile is None so the recorded steps carry each operator's own
        ``resolve()`` defaults (what tuning starts from), whatever the
        shipped profiles say. With ``weights`` ``"q8"`` or ``"q4"`` (default:
        the first of the application's ``weights``) the matrices are held
        packed, as ``Llama.from_pretrained(..., weights=...)`` holds them, so
        the projections record ``QGEMV`` and ``QGEMM``.
        """
        import iron
        from iron.lm.model import Llama

        weights = weights or self.weights[0]
        context = min(config.max_position_embeddings, self.context)
        graph = Llama(config, context=context, rows=self.rows, profile=None)
        for name, packed in packed_shapes(config, weights).items():
            *path, leaf = name.split(".")
            node: Any = graph
            for part in path:
                node = node[int(part)] if part.isdigit() else getattr(node, part)
            setattr(node, leaf, iron.param(*packed, dtype=np.uint8))
        graph.load_state_dict(placeholder_state_dict(config, weights))
        return graph

    def labels(self, config: LlamaConfig) -> list[str]:
        """What each version is, in words (for a profile's ``meta``)."""
        context = min(config.max_position_embeddings, self.context)
        return [
            f"{label}: {detail}{'' if w == 'bf16' else f', weights={w}'}"
            for w in self.weights
            for label, detail in (
                ("prompt", f"rows={self.rows}, context={context}"),
                ("decode", f"context={context}"),
            )
        ]

    def versions(self, config: LlamaConfig, dev: Device | str) -> dict[str, Recording]:
        """Record the prompt and decode versions for ``config`` on ``dev``.

        Args:
            config: The model's configuration.
            dev: The device (or its name) to record for.

        Returns:
            ``{"prompt": ..., "decode": ...}``: the two recordings, shapes
            only (placeholder weights, no profile); for weights other than
            bf16 labelled ``"prompt q4"``, ``"decode q4"``, one pair per
            weights the application names.
        """
        found = {}
        for w in self.weights:
            graph = self.graph(config, w)
            tail = "" if w == "bf16" else f" {w}"
            with use_device(dev):
                found[f"prompt{tail}"] = graph.record(tokens=((self.rows,), np.int32))
                found[f"decode{tail}"] = graph.record()
        return found
