"""Figure 17: a Llama-3.2-3B-shaped q4 model end to end on the emulated NPU.

The Llama-3.2-3B config shipped in ``iron/lm/applications/llama/configs``
(28 layers, hidden 3072, 24 heads over 8 kv heads of 128, vocabulary
128256; two layers in ``--quick``) gets seeded random weights, each matrix
quantized as ``weights="q4"`` holds it (llama.cpp's Q4_1 scheme: the
projections, the embedding and the tied head packed and read by ``QGEMV``
and ``QGEMM``) and bound with its own shipped npu2 profile; a ``Decoder``
on the emulated npu2 then runs a 16-token prompt and decodes 4 tokens
greedily, on this CPU. The value is the wall time of that run (prompt and
decode, after the weights are made and bound); the peer is the same
prompt's logits from the graph's host reference (``Llama.reference``, the
recording evaluated in numpy, no device), which the emulated NPU's must
equal bit for bit, as they must for every model. Nothing here is measured
on an NPU.
"""

from __future__ import annotations

import dataclasses
import resource
import time
from pathlib import Path
from typing import Any

import numpy as np
from ml_dtypes import bfloat16

import iron
import iron.lm.applications.llama as llama_app
from iron.lm import tiny
from iron.lm.config import LlamaConfig
from iron.lm.generate import Decoder
from iron.lm.model import Llama
from iron.operators.quantized import FORMATS, quantize

from .common import DEVICE, Context, command, describe, result, table
from .quantized_decode import _declare, quantizable

NUMBER = 15
CONTEXT = 256
PROMPT = 16
NEW = 4


def random_q4(config: LlamaConfig, seed: int = 0) -> Llama:
    """A Llama of ``config`` with seeded random weights, its matrices q4."""
    fmt = FORMATS["q4"]
    graph = Llama(config, context=CONTEXT, rows=PROMPT)
    rng = np.random.default_rng(seed)
    state: dict[str, Any] = {}
    for name, shape in tiny.state_dict_shapes(config).items():
        if quantizable(name, shape):
            packed = np.empty((shape[0], fmt.row_bytes(shape[1])), np.uint8)
            for i in range(0, shape[0], 4096):
                rows = min(4096, shape[0] - i)
                block = rng.standard_normal((rows, shape[1]), np.float32) * 0.02
                packed[i : i + rows] = quantize(block, fmt)
            _declare(graph, name, iron.param(*packed.shape, dtype=np.uint8))
            state[name] = packed
        else:
            state[name] = (1 + 0.1 * rng.standard_normal(shape)).astype(bfloat16)
    graph.load_state_dict(state)
    return graph


def run(ctx: Context) -> dict[str, Any]:
    """Compute figure 17 (two layers in --quick)."""
    config = LlamaConfig.from_json(Path(llama_app.CONFIGS) / "llama-3.2-3b.json")
    if ctx.quick:
        config = dataclasses.replace(config, num_hidden_layers=2)
    start = time.perf_counter()
    graph = random_q4(config)
    made = time.perf_counter() - start
    ids = np.arange(1000, 1000 + PROMPT, dtype=np.int32)
    decoder = Decoder(graph, device=DEVICE, progress=False)
    start = time.perf_counter()
    tokens = list(decoder.generate(ids.tolist(), max_new_tokens=NEW, stop=()))
    seconds = time.perf_counter() - start
    ours = np.asarray(decoder.logits(ids.tolist()), np.float32)
    start = time.perf_counter()
    with iron.use_device(DEVICE):
        theirs, _ = graph.reference(ids, position=0, n=PROMPT)
    reference_s = time.perf_counter() - start
    theirs = np.asarray(theirs, np.float32)
    equal = bool(np.array_equal(ours, theirs))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    notes = [
        f"Model: {describe(config)}; q4 weights, its shipped npu2 profile "
        f"({Path(graph.profile).name}).",
        f"Weights drawn, quantized and bound in {made:.0f} s; the prompt of "
        f"{PROMPT} tokens and {NEW} greedy tokens ({tokens}) on the emulated "
        f"{DEVICE} in {seconds:.1f} s; the host reference's prompt in "
        f"{reference_s:.1f} s.",
        f"The emulated NPU's prompt logits {'equal' if equal else 'differ from'} "
        f"the host reference's bit for bit ({ours.shape[0]} x {ours.shape[1]}).",
        f"Peak resident memory of the benchmark process so far: {peak / 1e9:.2f} GB "
        f"(the packed weights held twice: the bound copy and the emulated "
        f"device's arena).",
    ]
    return result(
        figure="A Llama-3.2-3B-shaped q4 model end to end on the emulated NPU",
        value=seconds,
        target="the emulated NPU's prompt logits equal the host reference's bit for bit",
        met=equal,
        peer="the host reference's prompt (numpy, no device)",
        peer_value=reference_s,
        unit=f"s (prompt of {PROMPT} + {NEW} tokens, emulated {DEVICE})",
        peer_unit="s",
        command=command(NUMBER, ctx.quick),
        notes=notes,
        tables=[
            table(
                "The run",
                [
                    "layers",
                    "weights made s",
                    "emulated run s",
                    "reference prompt s",
                    "tokens",
                ],
                [
                    [
                        config.num_hidden_layers,
                        f"{made:.1f}",
                        f"{seconds:.1f}",
                        f"{reference_s:.1f}",
                        str(tokens),
                    ]
                ],
            )
        ],
        data={
            "seconds": seconds,
            "made_s": made,
            "reference_s": reference_s,
            "equal": equal,
            "tokens": tokens,
            "peak_rss_bytes": peak,
            "layers": config.num_hidden_layers,
        },
    )
