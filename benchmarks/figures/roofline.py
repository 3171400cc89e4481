"""Figure 5: modelled npu2 decode of Llama-3.2-1B bf16, against the DMA roof.

The decode version of a Llama-3.2-1B-shaped graph (16 layers, bf16,
shape-only weights, a KV cache of 2048 positions) is recorded for npu2 and
modelled with ``iron.roofline``: each step's time is the larger of its MACs
at the device's peak bf16 rate and its bytes at the NPU's DMA roof, plus its
kernel calls' overhead, plus one dispatch for the whole full ELF. The cost
model charges a per-call attention length at the cache's length, so this is
a decode step at position 2047 (mid-context for a 4k window). Its peer is
the bandwidth bound: the bytes a token must read (every weight once, the LM
head through the tied embedding, and the K and V of 2048 positions in 16
layers) at npu2's measured DMA roof (``iron.NPU2.dma_bytes_per_s``, 63 GB/s;
the LPDDR5X's theoretical 120 GB/s is not what the NPU reaches). Published
tokens/s of other NPU runtimes for the same model are listed with their
sources (no number here is measured on an NPU; this machine has none), and
every assumption of the model with its source (``assumptions.py``).

The kernel-call overhead is most of the excess over the bound; a table shows,
for each GEMV shape, the kernel calls per core its resolved tiles make and
the fewest any tiling ``check()`` accepts makes (each call takes one
``tile_m x tile_k`` block of ``w``, which core memory caps).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import iron
from iron.core.operator import RefusedShapeError
from iron.lm.model import Llama
from iron.operators import GEMV

from . import assumptions
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


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def gemv_calls(recording: Any, device: Any) -> list[dict[str, Any]]:
    """Each GEMV shape's kernel calls per core: its resolved tiles' and the fewest.

    The fewest is over every tiling (columns, tile_m, tile_k, vector width)
    that GEMV's ``check`` accepts on ``device``.
    """
    shapes: dict[tuple[int, int], list[Any]] = {}
    for step in recording.steps:
        if isinstance(step.op, GEMV):
            shapes.setdefault((step.op.M, step.op.K), []).append(step.op)
    found = []
    for (M, K), ops in shapes.items():
        op = ops[0]
        best: tuple[int, str] | None = None
        for columns in (1, 2, 4, 8):
            if columns > device.columns:
                continue
            for width in (64, 32, 16):
                for tile_k in _divisors(K):
                    if tile_k % width or tile_k < 2 * width:
                        continue
                    for tile_m in _divisors(M // columns) if M % columns == 0 else []:
                        try:
                            tried = GEMV(
                                M=M,
                                K=K,
                                num_aie_columns=columns,
                                tile_m=tile_m,
                                tile_k=tile_k,
                                vector_width=width,
                            ).resolved(device)
                        except RefusedShapeError:
                            continue
                        n = tried.cost(device).calls
                        label = f"{columns}, {tile_m} x {tile_k}"
                        if best is None or n < best[0]:
                            best = (n, label)
        assert best is not None
        found.append(
            {
                "M": M,
                "K": K,
                "steps": len(ops),
                "tiles": f"{op.num_aie_columns}, {op.tile_m} x {op.tile_k}",
                "now": op.cost(device).calls,
                "fewest": best[0],
                "fewest_tiles": best[1],
            }
        )
    return found


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
    roof = device.dma_bytes_per_s
    bound_s = (weight_bytes + kv_bytes) / roof
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
        f"{roof / 1e9:.0f} GB/s (npu2's measured DMA roof: a memcpy through the "
        f"NPU sustains 63-70 GB/s, amd/IRON pull request #195; the low end is "
        f"taken) = {bound_s * 1e3:.2f} ms = {bound_tokens:.1f} tokens/s. At the "
        f"roof's high end, 70 GB/s: {70e9 / (weight_bytes + kv_bytes):.1f} "
        f"tokens/s. Modelled / bound = {ratio:.3f}.",
        f"Before the DMA roof the model used the LPDDR5X-7500's theoretical "
        f"{device.ddr_bytes_per_s / 1e9:.0f} GB/s (bound "
        f"{device.ddr_bytes_per_s / (weight_bytes + kv_bytes):.1f} tokens/s), "
        f"which the NPU's DMA path does not reach.",
        "What the model leaves out: overlap between steps, placement and "
        "routing, memory-tile reuse; every assumption it makes is in the last "
        "table, with its source. It is a model of the schedule, not a "
        "measurement; the published bf16 figures below reach "
        f"{best_bf16['tokens_per_s'] / bound_tokens:.0%} of this bound.",
        "Published decode figures of other runtimes for Llama-3.2-1B on AMD NPUs "
        "are in the table below, as their sources state them (looked up "
        "2026-11-29; the pages carry no date). None is measured here.",
    ]
    # Where the modelled time goes beyond the bytes at the DMA roof.
    ddr = roof
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
    calls = gemv_calls(recording, device)
    calls_s = sum(r["steps"] * r["now"] for r in calls) * device.kernel_call_seconds
    fewest_s = sum(r["steps"] * r["fewest"] for r in calls) * device.kernel_call_seconds
    notes.append(
        f"Kernel calls: the GEMVs make {calls_s * 1e3:.2f} ms of the call overhead "
        f"a token; the fewest calls any tiling check() accepts would make "
        f"{fewest_s * 1e3:.2f} ms (table below). Each call takes one tile_m x "
        f"tile_k block of w, double-buffered in a core's "
        f"{device.core_memory_bytes // 1024} KiB with x's tile and fp32 partial "
        f"sums: at most 8192 bf16 elements of w where M and K are powers of two, "
        f"so a GEMV makes about (its bytes / 16 KiB / columns) calls per core "
        f"whatever its tiles. Fusing GEMVs that share x (Q/K/V, gate/up) keeps "
        f"the bytes per call and so the calls. What would remove the overhead is "
        f"outside the model's assumptions: a measured call cost below "
        f"{device.kernel_call_seconds * 1e6:.1f} us, or overlap of the call "
        f"overhead with the DMA (the model charges it on top, as no source says "
        f"otherwise), or a kernel that takes several blocks per call."
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
        target=f"modelled time within {WITHIN - 1:.0%} of the bandwidth bound at the NPU's DMA roof (>= {bound_tokens / WITHIN:.1f} tokens/s)",
        met=met,
        peer=f"bandwidth bound at npu2's measured DMA roof, {roof / 1e9:.0f} GB/s (published bf16 NPU runtimes: {min(p['tokens_per_s'] for p in bf16)}-{best_bf16['tokens_per_s']} tokens/s, see details)",
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
            table(
                "Kernel calls per core of each GEMV shape: its tiles' and the fewest any legal tiling makes",
                [
                    "GEMV M x K",
                    "steps",
                    "tiles now (columns, tile_m x tile_k)",
                    "calls now",
                    "fewest calls",
                    "with (columns, tile_m x tile_k)",
                ],
                [
                    [
                        f"{r['M']} x {r['K']}",
                        r["steps"],
                        r["tiles"],
                        r["now"],
                        r["fewest"],
                        r["fewest_tiles"],
                    ]
                    for r in calls
                ],
            ),
            table("The 10 slowest steps", columns, slowest),
            table(
                f"Every step's modelled time ({len(step_rows)} steps)",
                columns,
                step_rows,
                collapsed=True,
            ),
            table(
                "Every assumption of the cost model, with its source",
                assumptions.COLUMNS,
                assumptions.rows(),
            ),
        ],
        data={
            "modelled_s": model.seconds,
            "modelled_tokens_per_s": tokens,
            "bound_s": bound_s,
            "bound_tokens_per_s": bound_tokens,
            "ratio": ratio,
            "beyond_bound_s": beyond,
            "dma_bytes_per_s": roof,
            "gemv_calls": calls,
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
