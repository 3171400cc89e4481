"""Whether a model and context fit the machine, decided before anything loads.

An NPU reads its weights and KV caches from host memory: the graph's arena
is one buffer object that the amdxdna driver allocates from system memory
(unified memory; amd/xdna-driver ``src/driver/amdxdna/amdxdna_gem.c`` sets
no size limit of its own, so the machine's physical memory is the bound;
the emulated NPU holds the same arena in host memory too). Two limits are
checked from the config, the context and the weights' formats alone:

* **one buffer below 2^31 bytes** (:data:`iron.core.dma.ARG_OFFSET_LIMIT`):
  aiecc patches an argument's offsets as 32-bit values (Xilinx/mlir-aie
  ``AIEX.td``, ``NpuAddressPatchOp``'s ``arg_plus`` is I32), so the plan
  cuts the arena into arguments below it between buffers and no single
  buffer (a layer's KV cache, the embedding) may reach it
  (``iron.runtime.npu.graph.arena_segments``);
* **the device copy plus loading's peak within physical memory**: the
  arena (weights in their device format, both KV caches of every layer,
  the rotary table) and, while loading, at most 1.5 times the largest
  tensor's bytes beyond it (what benchmark figure 6 bounds in units of the
  largest shard; ``BENCHMARKS.md``).

:func:`check_fits` raises :class:`ModelTooLargeError` naming the size, the
limit and the fix (packed weights, a shorter context: the longest that
fits is computed) before any tensor is read.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from iron.core.dma import ARG_OFFSET_LIMIT
from iron.lm.config import LlamaConfig
from iron.lm.sizes import padded_size
from iron.operators.quantized import QuantFormat

__all__ = [
    "LOAD_PEAK_FACTOR",
    "Footprint",
    "ModelTooLargeError",
    "check_fits",
    "footprint",
    "physical_memory",
]

#: Host memory loading may take beyond the device copy, in units of the
#: largest tensor: benchmark figure 6's bound (<= 1.5 x the largest shard;
#: a shard holds at least its largest tensor, so this is the tighter use).
LOAD_PEAK_FACTOR = 1.5

_BF16 = 2


class ModelTooLargeError(ValueError):
    """A model, context or weights format that does not fit (named, with the fix)."""


@dataclasses.dataclass(frozen=True)
class Footprint:
    """The bytes a Llama graph holds on the device, by what holds them.

    Attributes:
        weights: Every weight in its device format (packed rows or bf16),
            at the padded widths the graph holds.
        kv_cache: Both caches of every layer (bf16).
        per_position: KV cache and rotary-table bytes one position adds.
        largest: The largest single buffer's bytes and its name.
        largest_tensor: The largest weight's bytes (loading's unit).
    """

    weights: int
    kv_cache: int
    rope: int
    per_position: int
    largest: tuple[int, str]
    largest_tensor: int

    @property
    def device(self) -> int:
        """Bytes of the device copy (weights, caches, rotary table)."""
        return self.weights + self.kv_cache + self.rope

    @property
    def peak(self) -> int:
        """Host bytes while loading: the device copy plus loading's bound."""
        return self.device + int(LOAD_PEAK_FACTOR * self.largest_tensor)


def footprint(
    config: LlamaConfig,
    context: int,
    formats: Mapping[str, QuantFormat | None] | str = "bf16",
) -> Footprint:
    """What ``config`` with ``context`` cache positions holds on the device.

    Args:
        config: The model's configuration.
        context: Positions each KV cache holds.
        formats: ``"bf16"``, ``"q8"`` or ``"q4"`` (the matrices
            ``Llama.from_pretrained(..., weights=...)`` packs), or each
            weight's format by Hugging Face name (a GGUF file's,
            ``GGUFCheckpoint.formats``), None for bf16.
    """
    from iron.lm.applications.llama import packed_shapes
    from iron.lm.tiny import state_dict_shapes

    shapes = state_dict_shapes(config)
    if isinstance(formats, str):
        packed = packed_shapes(config, formats)
    else:
        packed = {
            name: (shapes[name][0], fmt.row_bytes(shapes[name][1]))
            for name, fmt in formats.items()
            if fmt is not None and name in shapes and len(shapes[name]) == 2
        }
    sizes: dict[str, int] = {}
    for name, shape in shapes.items():
        rows = shape[0]
        if name.endswith(("embed_tokens.weight", "lm_head.weight")):
            rows = padded_size(config.vocab_size)
        elif name.endswith(("gate_proj.weight", "up_proj.weight")):
            rows = padded_size(config.intermediate_size)
        if name in packed:
            sizes[name] = rows * packed[name][1]
        elif len(shape) == 2:
            cols = shape[1]
            if name.endswith("down_proj.weight"):
                cols = padded_size(config.intermediate_size)
            sizes[name] = rows * cols * _BF16
        else:
            sizes[name] = rows * _BF16
    cache = config.num_key_value_heads * context * config.head_dim * _BF16
    rope_row = config.head_dim * _BF16  # a row of cos and sin halves (rope_table)
    biggest = max(sizes, key=sizes.__getitem__)
    largest = max((sizes[biggest], biggest), (cache, "a layer's k_cache"))
    return Footprint(
        weights=sum(sizes.values()),
        kv_cache=2 * config.num_hidden_layers * cache,
        rope=context * rope_row,
        per_position=2 * config.num_hidden_layers * cache // context + rope_row,
        largest=largest,
        largest_tensor=sizes[biggest],
    )


def physical_memory() -> int:
    """This machine's physical memory in bytes (``sysconf``)."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_fits(
    config: LlamaConfig,
    context: int,
    formats: Mapping[str, QuantFormat | None] | str = "bf16",
    *,
    memory: int | None = None,
) -> Footprint:
    """Refuse, before loading, a model that the machine cannot hold.

    Args:
        config: The model's configuration.
        context: Positions each KV cache holds.
        formats: As :func:`footprint`.
        memory: The host memory to fit (default: :func:`physical_memory`).

    Returns:
        The footprint, when it fits.

    Raises:
        ModelTooLargeError: One buffer reaches 2^31 bytes, or the device
            copy plus loading's peak is over ``memory``; the message names
            the sizes, the limit and the fix (the longest context that
            fits, packed weights).
    """
    fp = footprint(config, context, formats)
    what = _describe(config, context, formats)
    size, name = fp.largest
    if size >= ARG_OFFSET_LIMIT:
        raise ModelTooLargeError(
            f"{what}: {name} alone takes {_gb(size)} ({size} bytes); one NPU "
            f"buffer must be below 2^31 = {ARG_OFFSET_LIMIT} bytes (aiecc "
            f"patches an argument's offsets as 32-bit values); use a shorter "
            f"context or packed weights (weights='q4')"
        )
    memory = physical_memory() if memory is None else memory
    if fp.peak <= memory:
        return fp
    room = memory - (fp.peak - fp.kv_cache - fp.rope)
    longest = max(room // fp.per_position // 16 * 16, 0)
    fix = (
        f"use a context of at most {longest} positions"
        if longest >= 16
        else "no context fits with these weights"
    )
    if formats != "q4":
        fix += ", or packed weights (weights='q4' holds a matrix in 5/8 byte "
        fix += "an element)"
    raise ModelTooLargeError(
        f"{what} needs {_gb(fp.peak)} of host memory to load: {_gb(fp.weights)} "
        f"of weights, {_gb(fp.kv_cache)} of KV cache, {_gb(fp.rope)} of rotary "
        f"table, and up to {_gb(fp.peak - fp.device)} more while loading "
        f"({LOAD_PEAK_FACTOR} x its largest tensor); this machine has "
        f"{_gb(memory)} (the NPU holds its arena in host memory); {fix}"
    )


def _describe(
    config: LlamaConfig,
    context: int,
    formats: Mapping[str, QuantFormat | None] | str,
) -> str:
    weights = formats if isinstance(formats, str) else "the file's own types"
    return (
        f"a Llama of {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
        f"with {weights} weights and a {context}-position context"
    )


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"
