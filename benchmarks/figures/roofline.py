"""Figure 5: modelled npu2 decode of Llama-3.2-1B bf16, against the DDR bound.

The decode version of a Llama-3.2-1B-shaped graph (16 layers, bf16,
shape-only weights, a KV cache of 2048 positions) is recorded for npu2 and
modelled with ``iron.roofline``: each step's time is the larger of its MACs
at the device's peak bf16 rate and its bytes at the DDR bandwidth, plus one
dispatch for the whole full ELF. The cost model charges a per-call
attention length at the cache's length, so this is a decode step at position
2047 (mid-context for a 4k window). Its peer is the DDR-bandwidth bound: the
bytes a token must read (every weight once, the LM head through the tied
embedding, and the K and V of 2048 positions in 16 layers) over npu2's
bandwidth in ``iron.NPU2``. Published tokens/s of other NPU runtimes for the
same model are listed with their sources (no number here is measured on an
NPU; this machine has none).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import iron
from iron.lm.model import Llama

from .common import (
    DEVICE,
    Context,
    bind_placeholders,
    command,
    describe,
    llama_1b,
    parameter_count,
    result,
    table,
)

NUMBER = 5
CONTEXT = 2048
#: Modelled time may exceed the bandwidth bound by this factor.
WITHIN = 1.15

#: Published decode figures for Llama-3.2-1B on AMD NPUs, as their sources
#: state them (looked up 2026-11-29; the pages carry no date of their own).
PUBLISHED = [
    {
        "runtime": "mlir-air llama32_1b example (bf16, NPU2 Strix, seq_len 2048)",
        "tokens_per_s": 10.8,
        "weights": "bf16",
        "source": "https://raw.githack.com/tonyjie/mlir-air/llama32_1b-verify-pr/programming_examples/llama32_1b/docs/profile.md",
        "note": "92 ms/token steady-state decode (TPOT)",
    },
    {
        "runtime": "AMD IRON Llama reference at commit 2b62dc7 (bf16, NPU2 Strix, seq_len 2048), as measured by the same page",
        "tokens_per_s": 2.7,
        "weights": "bf16",
        "source": "https://raw.githack.com/tonyjie/mlir-air/llama32_1b-verify-pr/programming_examples/llama32_1b/docs/profile.md",
        "note": "370 ms/token",
    },
    {
        "runtime": "AMD IRON Llama 3.2 1B demo on Ryzen AI Max+ 395 (Strix Halo, XDNA2), 2048-token prompt",
        "tokens_per_s": 4.34,
        "weights": "bf16 (official Meta weights, IRON demo)",
        "source": "https://ellie.geekministry.org/posts/npu-on-linux-part-3",
        "note": "blog post; 179 dispatches per token found to dominate",
    },
    {
        "runtime": "FastFlowLM, NPU, at 2k context",
        "tokens_per_s": 35.8,
        "weights": "quantized (precision not stated in the table)",
        "source": "https://docs.fastflowlm.com/benchmarks/llama3_results.html",
        "note": "FastFlowLM runs its own quantized models, so fewer weight bytes per token than bf16; not held against the bf16 bound",
    },
    {
        "runtime": "Ryzen AI Software 1.4, NPU-only, at 2k context (reported by FastFlowLM)",
        "tokens_per_s": 14.9,
        "weights": "quantized Ryzen AI models (precision not stated in the table)",
        "source": "https://docs.fastflowlm.com/benchmarks/llama3_results.html",
        "note": "same table; limited to a 2,048-token context",
    },
]


def run(ctx: Context) -> dict[str, Any]:
    """Compute figure 5 (the model is cheap: full size in --quick too)."""
    quick = ctx.quick
    config = llama_1b()
    graph = Llama(config, context=CONTEXT, rows=16)
    bind_placeholders(graph, config)
    with iron.use_device(DEVICE):
        recording = graph.record()
    model = iron.roofline(recording, DEVICE)
    device = model.device

    weight_bytes = parameter_count(config) * 2
    kv_bytes = (
        config.num_hidden_layers
        * 2
        * config.num_key_value_heads
        * config.head_dim
        * 2
        * CONTEXT
    )
    bound_s = (weight_bytes + kv_bytes) / device.ddr_bytes_per_s
    ratio = model.seconds / bound_s
    tokens = 1.0 / model.seconds
    bound_tokens = 1.0 / bound_s
    met = ratio <= WITHIN

    per_op: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0])
    for s in model.steps:
        per_op[s.name][0] += 1
        per_op[s.name][1] += s.seconds
        per_op[s.name][2] += s.bytes
    bf16 = [p for p in PUBLISHED if p["weights"].startswith("bf16")]
    best_bf16 = max(bf16, key=lambda p: p["tokens_per_s"])
    notes = [
        f"Model: {describe(config)}; {parameter_count(config) / 1e9:.3f} B "
        f"parameters; decode version of {len(model.steps)} steps, full ELF on "
        f"{device.name} (one dispatch of {device.dispatch_seconds * 1e6:.0f} us).",
        f"Cost model: {model.seconds * 1e3:.2f} ms per token = {tokens:.1f} tokens/s; "
        f"{model.bytes / 1e9:.3f} GB moved per token, {model.macs / 1e9:.2f} G MACs.",
        f"Bandwidth bound: ({weight_bytes / 1e9:.3f} GB of weights + "
        f"{kv_bytes / 1e6:.1f} MB of K/V at {CONTEXT} positions) / "
        f"{device.ddr_bytes_per_s / 1e9:.0f} GB/s (npu2's theoretical LPDDR5X-7500 "
        f"x 128-bit) = {bound_s * 1e3:.2f} ms = {bound_tokens:.1f} tokens/s. "
        f"Modelled / bound = {ratio:.3f}.",
        "What the model leaves out: overlap between steps, placement and "
        "routing, DMA efficiency, sustained (not theoretical) bandwidth. It is "
        "a model of the schedule, not a measurement; the published bf16 figures "
        f"below reach {best_bf16['tokens_per_s'] / bound_tokens:.0%} of this bound.",
        "Published decode figures of other runtimes for Llama-3.2-1B on AMD NPUs "
        "are in the table below, as their sources state them (looked up "
        "2026-11-29; the pages carry no date). None is measured here.",
    ]
    # Where the modelled time goes beyond the bytes at the DDR bandwidth.
    ddr = device.ddr_bytes_per_s
    beyond = {
        "kernel-call overhead": sum(getattr(s, "calls_s", 0.0) for s in model.steps),
        "dispatch": sum(s.dispatch_s for s in model.steps),
        "rereads, shim-rate limits and compute-bound steps": sum(
            max(s.compute_s, s.memory_s) - s.bytes / ddr for s in model.steps
        ),
        "bytes beyond weights and K/V (activations, tables)": (
            model.bytes - weight_bytes - kv_bytes
        )
        / ddr,
    }
    notes.append(
        f"Modelled time beyond the bound, {(model.seconds - bound_s) * 1e3:.2f} ms: "
        + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in beyond.items())
        + "."
    )
    if not met:
        slow = model.slowest(1)[0]
        largest = max(beyond, key=beyond.get)
        notes.append(
            f"Missed: the modelled time is {ratio:.2f}x the bound; the largest "
            f"excess is {largest} ({beyond[largest] * 1e3:.2f} ms per token); the "
            f"slowest step is #{slow.index} {slow.name} ({slow.bound}-bound, "
            f"{slow.seconds * 1e6:.0f} us)."
        )
    step_rows = [
        [
            s.index,
            s.name,
            s.macs,
            s.bytes,
            f"{s.compute_s * 1e6:.2f}",
            f"{s.memory_s * 1e6:.2f}",
            f"{getattr(s, 'calls_s', 0.0) * 1e6:.2f}",
            f"{s.dispatch_s * 1e6:.1f}",
            f"{s.seconds * 1e6:.2f}",
            s.bound,
        ]
        for s in model.steps
    ]
    columns = [
        "#",
        "operator",
        "MACs",
        "bytes",
        "compute us",
        "memory us",
        "calls us",
        "dispatch us",
        "total us",
        "bound",
    ]
    slowest = [step_rows[s.index] for s in model.slowest(10)]
    return result(
        figure="Modelled npu2 decode, Llama-3.2-1B bf16 (cost model)",
        value=tokens,
        target=f"modelled time within {WITHIN - 1:.0%} of the DDR-bandwidth bound (>= {bound_tokens / WITHIN:.1f} tokens/s)",
        met=met,
        peer=f"DDR-bandwidth bound at {device.ddr_bytes_per_s / 1e9:.0f} GB/s (published bf16 NPU runtimes: {min(p['tokens_per_s'] for p in bf16)}-{best_bf16['tokens_per_s']} tokens/s, see details)",
        peer_value=bound_tokens,
        unit="tokens/s (modelled)",
        peer_unit="tokens/s",
        command=command(NUMBER, quick),
        notes=notes,
        tables=[
            table(
                "Published decode figures for Llama-3.2-1B on AMD NPUs (not measured here)",
                ["runtime", "tokens/s", "weights", "source"],
                [
                    [p["runtime"], p["tokens_per_s"], p["weights"], p["source"]]
                    for p in PUBLISHED
                ],
            ),
            table(
                "Modelled time by operator",
                ["operator", "steps", "total us", "share", "bytes"],
                [
                    [
                        name,
                        v[0],
                        f"{v[1] * 1e6:.1f}",
                        f"{v[1] / model.seconds:.1%}",
                        v[2],
                    ]
                    for name, v in sorted(per_op.items(), key=lambda kv: -kv[1][1])
                ],
            ),
            table("The 10 slowest steps", columns, slowest),
            table(
                f"Every step's modelled time ({len(step_rows)} steps)",
                columns,
                step_rows,
                collapsed=True,
            ),
        ],
        data={
            "modelled_s": model.seconds,
            "modelled_tokens_per_s": tokens,
            "bound_s": bound_s,
            "bound_tokens_per_s": bound_tokens,
            "ratio": ratio,
            "beyond_bound_s": beyond,
            "weight_bytes": weight_bytes,
            "kv_bytes": kv_bytes,
            "roofline_bytes": model.bytes,
            "roofline_bandwidth_bound_s": model.bandwidth_bound_s,
            "published": PUBLISHED,
            "steps": [
                {
                    "index": s.index,
                    "name": s.name,
                    "macs": s.macs,
                    "bytes": s.bytes,
                    "calls_s": getattr(s, "calls_s", 0.0),
                    "seconds": s.seconds,
                    "bound": s.bound,
                }
                for s in model.steps
            ],
        },
    )
