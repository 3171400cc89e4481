"""Sizes the devices run: vocabularies and MLP widths padded, prompt chunks.

A Llama whose vocabulary or MLP width the devices' tiles do not divide (a
32001-token vocabulary, an MLP of 200) is held padded inside the graph to a
multiple of :data:`PAD_MULTIPLE` with zero weights, which changes no result
(:func:`padded_size`, :func:`padded_tree`). A prompt runs in chunks of the
rows every device takes (:func:`chunk_rows`), so the rows asked for only
tune speed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
from ml_dtypes import bfloat16

from iron.core.device import DEVICES
from iron.lm.config import LlamaConfig
from iron.lm.options import ROW_MULTIPLE

__all__ = ["PAD_MULTIPLE", "chunk_rows", "padded_size", "padded_tree"]

logger = logging.getLogger("iron.lm")

#: An MLP width or a vocabulary the devices' tiles do not divide is padded
#: inside the graph to a multiple of this (zero weights; see padded_size).
PAD_MULTIPLE = 64


def chunk_rows(rows: int, context: int) -> int:
    """The rows of a prompt chunk asked for as ``rows``, as every device runs it.

    A multiple of ``ROW_MULTIPLE`` (8, the GEMMs' rows; iron.lm.options),
    at most the rows the embedding gather takes in one call (one shim buffer
    descriptor per row, ``Device.shim_bds``, the least of the known
    devices') and at most ``context``: ``rows`` rounded down to that (at least one multiple). A
    prompt longer than a chunk runs in several, so ``rows`` only tunes the
    prompt's speed; it changes no result.

    Raises:
        ValueError: ``context`` holds fewer than ``ROW_MULTIPLE``
            positions (named).
    """
    gather = min(d.shim_bds for d in DEVICES.values())
    limit = min(gather, context) // ROW_MULTIPLE * ROW_MULTIPLE
    if limit < ROW_MULTIPLE:
        raise ValueError(
            f"a context of {context} positions cannot hold a prompt chunk of "
            f"{ROW_MULTIPLE} rows (the prompt's matmuls take rows in multiples of "
            f"{ROW_MULTIPLE}); load with a context of at least {ROW_MULTIPLE * 2}"
        )
    chunk = min(max(rows // ROW_MULTIPLE, 1) * ROW_MULTIPLE, limit)
    if chunk != rows:
        logger.info(
            "a prompt chunk of rows=%d runs as %d rows (multiples of %d, at most "
            "%d); longer prompts run in several chunks",
            rows,
            chunk,
            ROW_MULTIPLE,
            limit,
        )
    return chunk


def padded_size(size: int) -> int:
    """``size`` rounded up to a multiple of :data:`PAD_MULTIPLE`.

    The width the graph gives an MLP or a vocabulary: what the devices'
    tiles divide. The padding holds zero weights, so it changes no result:
    padded MLP columns are zero through SiLU and the down projection, and
    padded logits are neither sampled nor returned.
    """
    return -(-size // PAD_MULTIPLE) * PAD_MULTIPLE


#: The tensors padding widens: name suffix -> (config field, axis padded).
_PADDED = {
    "model.embed_tokens.weight": ("vocab_size", 0),
    "lm_head.weight": ("vocab_size", 0),
    "mlp.gate_proj.weight": ("intermediate_size", 0),
    "mlp.up_proj.weight": ("intermediate_size", 0),
    "mlp.down_proj.weight": ("intermediate_size", 1),
}


def padded_tree(config: LlamaConfig, tree: Any, path: str) -> Any:
    """``tree`` with the tensors padding widens copied into zeroed padded arrays.

    Only a flat mapping of dotted names is padded (what checkpoints give);
    a tensor of another shape is left for ``load_state_dict`` to name.
    """
    if not isinstance(tree, Mapping):
        return tree
    out = dict(tree)
    for name, tensor in tree.items():
        if not isinstance(name, str) or not isinstance(tensor, np.ndarray):
            continue
        rest = name[len(path) :] if name.startswith(path) else None
        for suffix, (field, axis) in _PADDED.items():
            if rest is None or not (rest == suffix or rest.endswith("." + suffix)):
                continue
            size = getattr(config, field)
            if tensor.ndim != 2 or tensor.shape[axis] != size:
                continue
            if padded_size(size) == size:
                continue
            shape = list(tensor.shape)
            shape[axis] = padded_size(size)
            # packed rows (q4/q8) pad with zero bytes: a zero scale and
            # minimum, so zero weights (a packed row's columns never pad: its
            # K is a multiple of 64 or it stays bf16)
            packed = tensor.dtype == np.uint8
            wide = np.zeros(shape, tensor.dtype if packed else bfloat16)
            wide[(slice(None),) * axis + (slice(0, size),)] = tensor
            out[name] = wide
    return out
