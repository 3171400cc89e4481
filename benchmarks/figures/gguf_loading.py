"""Figure 11: peak resident memory while loading a GGUF file, in figure 6's units.

A GGUF file of 4 layers at Llama-3.2-1B's widths (the embedded tiny Llama
in ``--quick``) is written with the ``gguf`` package: seeded random weights,
every matrix Q4_0 (quantized by the package, a few MB at a time), the norms
F32, llama.cpp's names and ``llama.*`` metadata (no rotary scaling and no
q/k permutation: the weights are random, and what is measured is memory).
It is loaded in a fresh subprocess exactly as figure 6 loads a safetensors
checkpoint (``figures.loading``'s child: ``Decoder.from_pretrained`` on the
file, then ``compile``, the Q4_0 blocks repacked to ``q4`` and uploaded piece
by piece), and the same two numbers are reported: the raw peak above the
baseline, and the peak of what is resident beyond the emulated device's
buffers (sampled at every uploaded piece).

Figure 6 divides by the checkpoint's largest shard, a safetensors file; a
GGUF file is one file, so it is its own largest shard and the value is the
peak beyond the device buffers over the file's size, judged by figure 6's
target. The same peak over the file's largest tensor (what a shard of one
tensor would hold) is reported beside it. Without the ``gguf`` package
(``pip install iron-lm[gguf]``; ``nox -s bench`` installs it) the figure is
not measured.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from iron.lm import tiny
from iron.lm.config import LlamaConfig

from . import loading
from .common import (
    Context,
    command,
    describe,
    have,
    llama_1b,
    parameter_count,
    result,
    table,
    tiny_config,
)

NUMBER = 11
TARGET = loading.TARGET
KIND = "Q4_0"
#: Rows quantized at a time (float32 bytes: rows x width x 4).
CHUNK_ELEMENTS = 4 << 20

_GLOBAL = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
_LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def gguf_name(hf: str) -> str:
    """llama.cpp's tensor name for Hugging Face name ``hf``
    (llama.cpp's convert_hf_to_gguf.py / gguf-py's tensor mapping)."""
    if hf in _GLOBAL:
        return _GLOBAL[hf]
    _, _, layer, rest = hf.split(".", 3)
    return f"blk.{layer}.{_LAYER[rest]}"


def write_gguf(path: Path, config: LlamaConfig, seed: int = 0) -> dict[str, int]:
    """Write ``config`` with seeded random weights as a llama GGUF file.

    Matrices are Q4_0, quantized ``CHUNK_ELEMENTS`` at a time; norms F32.
    Returns each tensor's stored bytes by llama.cpp name.
    """
    import gguf

    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("iron-bench")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_key_length(config.head_dim)
    writer.add_value_length(config.head_dim)
    writer.add_rope_dimension_count(config.head_dim)
    writer.add_rope_freq_base(config.rope_theta)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    if config.bos_token_id is not None:
        writer.add_bos_token_id(config.bos_token_id)
    sizes: dict[str, int] = {}
    kind = gguf.GGMLQuantizationType[KIND]
    for hf, shape in tiny.state_dict_shapes(config).items():
        name = gguf_name(hf)
        if len(shape) == 1:
            data = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
            writer.add_tensor(name, data)
        else:
            rows, width = shape
            step = max(1, CHUNK_ELEMENTS // width)
            pieces = []
            for start in range(0, rows, step):
                n = min(step, rows - start)
                w = rng.standard_normal((n, width), dtype=np.float32) * 0.02
                pieces.append(gguf.quants.quantize(w, kind))
            data = np.concatenate(pieces)
            del pieces
            writer.add_tensor(name, data, raw_dtype=kind)
        sizes[name] = int(data.nbytes)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return sizes


def measure(path: Path) -> dict[str, Any]:
    """Figure 6's child (``figures.loading``) on ``path`` in a fresh process."""
    here = Path(__file__).resolve()
    env = {**os.environ, "PYTHONPATH": str(here.parents[1])}
    out = subprocess.run(
        [sys.executable, "-m", "figures.loading", str(path)],
        cwd=here.parents[1],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(ctx: Context) -> dict[str, Any]:
    """Measure figure 11."""
    quick = ctx.quick
    if quick:
        config, name = tiny_config(2), "tiny-2"
    else:
        config, name = llama_1b(4), "llama1b-widths-4"
    if not have("gguf"):
        return result(
            figure="Loading a GGUF file: peak resident memory beyond the device "
            "copy / the file",
            value=None,
            target=f"<= {TARGET} (host memory beyond the device copy)",
            met=False,
            judged=False,
            peer="raw peak above baseline (device copy included), same units",
            peer_value=None,
            unit="x largest shard (the file)",
            command=command(NUMBER, quick),
            notes=[
                "not measured: the gguf package is not installed (pip install "
                "iron-lm[gguf]; nox -s bench installs it)"
            ],
        )
    path = ctx.scratch / f"{name}-{KIND}.gguf"
    sizes = write_gguf(path, config)
    file_bytes = path.stat().st_size
    largest_name = max(sizes, key=lambda k: sizes[k])
    largest = sizes[largest_name]
    m = measure(path)
    beyond = m["beyond_device"] / file_bytes
    raw = m["peak"] / file_bytes
    per_tensor = m["beyond_device"] / largest
    met = beyond <= TARGET
    # figure 6's unit for the same model: the largest shard of its bf16
    # safetensors checkpoint (at least its largest tensor in bf16)
    bf16_largest = 2 * max(
        math.prod(s) for s in tiny.state_dict_shapes(config).values()
    )
    mb = 1 / 1e6
    notes = [
        f"File: {describe(config)}; {parameter_count(config) / 1e6:.0f} M "
        f"parameters, matrices {KIND}, norms F32: {file_bytes * mb:.1f} MB, the "
        f"largest tensor {largest_name} {largest * mb:.1f} MB.",
        f"Loading (Decoder.from_pretrained on the file + compile: the {KIND} "
        f"blocks repacked to q4 and uploaded piece by piece, each piece's pages "
        f"released) in a fresh process: baseline after imports "
        f"{m['baseline'] * mb:.0f} MB; after opening the file "
        f"+{m['after_open'] * mb:.1f} MB; peak +{m['peak'] * mb:.0f} MB"
        + ("" if m["peak_reset"] else " (VmHWM could not be reset: includes imports)")
        + f"; at the end +{m['end'] * mb:.0f} MB.",
        f"The emulated device's buffers: {m['weights'] * mb:.0f} MB of weights "
        f"uploaded into an arena of {m['arena'] * mb:.0f} MB, resident "
        f"{m['device_end'] * mb:.0f} MB at the end (the device copy's "
        f"pages, and the host view's still held: an uploaded weight's are "
        f"given back).",
        f"Beyond the device buffers, at most {m['beyond_device'] * mb:.1f} MB = "
        f"{beyond:.3f}x the file, its one shard (sampled at each of "
        f"{m['samples']} uploaded pieces; the target applies to this); raw "
        f"peak {raw:.2f}x. The same peak is {per_tensor:.3f}x the file's "
        f"largest tensor, and {m['beyond_device'] / bf16_largest:.3f}x the "
        f"largest shard of this model's bf16 safetensors checkpoint (its "
        f"{bf16_largest * mb:.1f} MB embedding, figure 6's unit).",
        f"Opening the file leaves +{m['after_open'] * mb:.0f} MB resident, "
        f"{m['after_open'] / file_bytes:.2f}x the file: Decoder.from_pretrained "
        f"lays every tensor out (repacked) into its scratch file at open, "
        f"reading the GGUF file through a mapping whose pages under each piece "
        f"are let go once it is laid out; the scratch file's pages go as each "
        f"piece uploads.",
    ]
    if not met:
        notes.append(
            f"Missed: {beyond:.2f}x the file stays resident beyond the device "
            f"buffers while loading."
        )
    return result(
        figure="Loading a GGUF file: peak resident memory beyond the device copy "
        "/ the file" + (" (quick: tiny)" if quick else ""),
        value=beyond,
        target=f"<= {TARGET} (host memory beyond the device copy, as figure 6)",
        met=met,
        peer="raw peak above baseline (device copy included), same units",
        peer_value=raw,
        unit="x largest shard (the file)",
        peer_unit="x largest shard (the file)",
        command=command(NUMBER, quick),
        notes=notes,
        tables=[
            table(
                "Resident memory while loading the GGUF file (MB above the baseline)",
                ["measure", "MB", "x the file", "x largest tensor"],
                [
                    [
                        what,
                        f"{v * mb:.1f}",
                        f"{v / file_bytes:.3f}",
                        f"{v / largest:.3f}",
                    ]
                    for what, v in (
                        ("after opening the file", m["after_open"]),
                        ("raw peak (VmHWM)", m["peak"]),
                        ("device buffers resident at the end", m["device_end"]),
                        ("peak beyond the device buffers", m["beyond_device"]),
                    )
                ],
            )
        ],
        data={
            **m,
            "file_bytes": file_bytes,
            "largest_tensor": largest,
            "largest_tensor_name": largest_name,
            "bf16_largest_tensor": bf16_largest,
            "raw_multiple": raw,
            "beyond_multiple": beyond,
            "beyond_per_tensor": per_tensor,
            "kind": KIND,
        },
    )
