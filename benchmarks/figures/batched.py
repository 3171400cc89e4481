"""Figure 14: many sequences at once, modelled npu2 aggregate decode.

Llama-3.2-1B with 4-bit weights (``q4``) at a 1k cache, a graph of 8 slots:
the batched decode version of B = 1, 2, 4 and 8 rows (one weight stream, each
projection an 8-row QGEMM, attention per row on its own slot's cache) timed
by the cost model (``iron.roofline``, every assumption in ``assumptions.py``,
no tuning of the QGEMM tiles), so that the aggregate rate is ``B / t_step``.
What bounds each point is read off the same model's terms: the steps' memory
time (bytes at the DMA roof) against their compute time (MACs at the peak
rate). Beside them, the one-sequence decode step (QGEMV, figure 13's
baseline). Nothing here is measured on an NPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import iron
from iron.lm.config import LlamaConfig

from .common import DEVICE, Context, command, llama_1b, result, table
from .quantized_decode import model_decode, packed_graph

NUMBER = 14
#: Cache positions each slot holds (figure 13's 1k cache).
CONTEXT = 1024
SLOTS = 8
BATCHES = (1, 2, 4, 8)
#: The issue's target: B = 4 at least this many times B = 1's aggregate rate.
SPEEDUP = 3.5


def model_batches(config: LlamaConfig) -> dict[int, dict[str, float]]:
    """Each batch's modelled step: seconds, aggregate tokens/s, and its terms."""
    graph = packed_graph(config, CONTEXT, "q4", slots=SLOTS)
    out = {}
    for batch in BATCHES:
        with iron.use_device(DEVICE):
            recording = graph.record(tokens=((batch, 1), np.int32))
        steps = iron.roofline(recording, DEVICE).steps
        seconds = sum(s.seconds for s in steps)
        memory = sum(s.memory_s for s in steps)
        compute = sum(s.compute_s for s in steps)
        out[batch] = {
            "seconds": seconds,
            "tokens_s": batch / seconds,
            "memory_s": memory,
            "compute_s": compute,
            "bound": bound(memory, compute),
        }
    return out


def bound(memory_s: float, compute_s: float) -> str:
    """What bounds a step: the larger of its memory and compute terms."""
    return "bandwidth" if memory_s >= compute_s else "compute"


def run(ctx: Context) -> dict[str, Any]:
    """Measure figure 14."""
    config = llama_1b()
    batches = model_batches(config)
    single = model_decode(config, "q4", CONTEXT, tuned=False)["seconds"]
    one, four = batches[1]["tokens_s"], batches[4]["tokens_s"]
    rows = [
        [
            f"batched B={b}",
            f"{m['seconds'] * 1e3:.2f}",
            f"{m['tokens_s']:.1f}",
            f"{m['tokens_s'] / one:.2f}x",
            f"{m['memory_s'] * 1e3:.2f}",
            f"{m['compute_s'] * 1e3:.2f}",
            m["bound"],
        ]
        for b, m in batches.items()
    ]
    rows.append(
        ["decode step (QGEMV, one sequence)", f"{single * 1e3:.2f}"]
        + [f"{1 / single:.1f}", f"{1 / single / one:.2f}x", "", "", ""]
    )
    return result(
        figure="Many sequences at once: modelled npu2 aggregate q4 decode, "
        "Llama-3.2-1B, 1k cache",
        value=round(four, 1),
        target=f"B=4 at least {SPEEDUP}x B=1's aggregate tokens/s",
        met=four >= SPEEDUP * one,
        peer="B=1 (the batched version, one row)",
        peer_value=round(one, 1),
        unit="tokens/s",
        command=command(NUMBER, ctx.quick),
        notes=[
            f"B=4 is {four / one:.2f}x B=1 of the batched version and "
            f"{four * single:.2f}x the one-sequence QGEMV decode step "
            f"({1 / single:.1f} tokens/s): an 8-row QGEMM (untuned tiles) streams "
            "the weights slower than the tuned QGEMV, so one sequence alone is "
            "best served by the decode step",
            "every point is bound by bandwidth: the weight stream (memory term) "
            "outweighs the 8-row products' MACs at every B; what grows with B is "
            "attention, one row per sequence over its own cache",
        ],
        tables=[
            table(
                "Modelled npu2 step per batch (Llama-3.2-1B q4, 1k cache)",
                [
                    "version",
                    "step ms",
                    "aggregate tokens/s",
                    "vs B=1",
                    "memory ms",
                    "compute ms",
                    "bound",
                ],
                rows,
            )
        ],
        data={
            "batches": {str(b): m for b, m in batches.items()},
            "decode_s": single,
        },
    )
