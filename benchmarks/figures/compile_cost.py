"""Figure 1: compile cost — record + plan of a Llama-3.2-1B-shaped decoder.

IRON's side: build the ``Llama`` graph (16 layers at Llama-3.2-1B's shapes,
context 2048, prompt chunks of 16 rows), bind shape-only placeholder weights,
record both versions (decode step and prompt chunk) and plan both into one
arena, as ``Decoder.compile`` does before any image is built. Its peer, in the
same run: transformers' ``LlamaForCausalLM`` of the same config built on the
meta device and captured with ``torch.export.export`` (use_cache=False,
strict=False) on a 16-token input. The issue names ``torch.fx.symbolic_trace``;
it cannot trace this model (the error is recorded), so export is the capture
measured. Both are timed as medians; the ratio is IRON / torch. The growth
with depth is fitted over 2, 4, 8 and 16 layers (least squares, R^2).
"""

from __future__ import annotations

import contextlib
import cProfile
import io
import logging
import pstats
import time
import warnings
from typing import Any

import numpy as np

import iron
from iron.lm.model import Llama

from .common import (
    DEVICE,
    Context,
    bind_placeholders,
    command,
    describe,
    hf_config,
    linear_fit,
    llama_1b,
    median,
    missing_peer,
    result,
    table,
    tiny_config,
)

NUMBER = 1
CONTEXT = 2048
ROWS = 16
#: R^2 a linear fit of time against layers must reach to count as linear.
LINEAR_R2 = 0.99
#: The cost of a layer added in the last doubling may exceed that of one
#: added in the first by at most this factor to count as linear.
MARGINAL = 1.25


def iron_compile(config: Any, context: int, rows: int) -> dict[str, Any]:
    """Build, bind, record both versions and plan them; seconds per phase."""
    t0 = time.perf_counter()
    graph = Llama(config, context=context, rows=rows)
    bind_placeholders(graph, config)
    t1 = time.perf_counter()
    with iron.use_device(DEVICE):
        decode = graph.record()
        t2 = time.perf_counter()
        prompt = graph.record(tokens=((rows,), np.int32))
        t3 = time.perf_counter()
        first = iron.plan(DEVICE, decode, arena=iron.ArenaPlan())
        t4 = time.perf_counter()
        iron.plan(DEVICE, prompt, arena=first.arena)
        t5 = time.perf_counter()
    return {
        "total": t5 - t0,
        "build+bind": t1 - t0,
        "record decode": t2 - t1,
        "record prompt": t3 - t2,
        "plan decode": t4 - t3,
        "plan prompt": t5 - t4,
        "steps": (len(decode.steps), len(prompt.steps)),
    }


def _quiet():
    """Silence transformers' and torch's warnings while tracing."""
    stack = contextlib.ExitStack()
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
    for name in ("transformers", "torch"):
        logger = logging.getLogger(name)
        old = logger.level
        logger.setLevel(logging.ERROR)
        stack.callback(logger.setLevel, old)
    return stack


def torch_export(config: Any, rows: int) -> dict[str, Any]:
    """Build LlamaForCausalLM on the meta device and torch.export it; seconds."""
    import torch
    from transformers import LlamaForCausalLM

    with _quiet():
        t0 = time.perf_counter()
        with torch.device("meta"):
            model = LlamaForCausalLM(hf_config(config, use_cache=False))
        model.eval()
        ids = torch.zeros((1, rows), dtype=torch.long, device="meta")
        exported = torch.export.export(
            model, (), {"input_ids": ids, "use_cache": False}, strict=False
        )
        total = time.perf_counter() - t0
    return {"total": total, "nodes": len(exported.graph.nodes)}


def fx_attempt(config: Any) -> str:
    """What ``torch.fx.symbolic_trace`` says of LlamaForCausalLM (it fails)."""
    import torch
    from transformers import LlamaForCausalLM

    with _quiet():
        with torch.device("meta"):
            model = LlamaForCausalLM(hf_config(config, use_cache=False))
        try:
            torch.fx.symbolic_trace(model)
        except Exception as error:  # the point: it cannot trace this model
            return f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
    return "traced (unexpectedly)"


def plan_hot_spots(config: Any, context: int, limit: int = 4) -> list[list[Any]]:
    """cProfile planning the decode version of ``config``; the costliest functions."""
    graph = Llama(config, context=context, rows=ROWS)
    bind_placeholders(graph, config)
    with iron.use_device(DEVICE):
        recording = graph.record()
    profile = cProfile.Profile()
    profile.runcall(iron.plan, DEVICE, recording, arena=iron.ArenaPlan())
    stats = pstats.Stats(profile)
    total = max(stats.total_tt, 1e-12)
    rows = []
    for (file, line, name), (_, calls, tottime, _, _) in sorted(
        stats.stats.items(), key=lambda kv: -kv[1][2]
    )[:limit]:
        where = file.split("/src/")[-1] if "/src/" in file else file.rsplit("/", 1)[-1]
        rows.append(
            [
                f"{where}:{line}({name})",
                calls,
                f"{tottime * 1e3:.1f}",
                f"{tottime / total:.0%}",
            ]
        )
    return rows


def run(ctx: Context) -> dict[str, Any]:
    """Measure figure 1."""
    quick = ctx.quick
    make = tiny_config if quick else llama_1b
    depth = 4 if quick else 16
    layer_counts = (1, 2, 3, 4) if quick else (2, 4, 8, 16)
    reps = 2 if quick else 5
    config = make(depth)

    iron_compile(make(2), CONTEXT if not quick else 64, ROWS)  # warm up imports
    context = 64 if quick else CONTEXT
    runs = [iron_compile(config, context, ROWS) for _ in range(reps)]
    iron_s = median([r["total"] for r in runs])
    phases = {k: median([r[k] for r in runs]) for k in runs[0] if k != "steps"}
    steps = runs[0]["steps"]

    # The fit takes the best of several runs at each depth: the least
    # disturbed by other work on the machine, so noise does not pass for
    # non-linear growth.
    best: dict[int, dict[str, float]] = {}
    for n in layer_counts:
        tries = [iron_compile(make(n), context, ROWS) for _ in range(3 if quick else 7)]
        best[n] = {k: min(t[k] for t in tries) for k in tries[0] if k != "steps"}
    scaling = {n: b["total"] for n, b in best.items()}
    fit = linear_fit(list(scaling), list(scaling.values()))
    # How each phase grows: the exponent of a power law through the points.
    exponents = {
        phase: float(
            np.polyfit(np.log(list(best)), np.log([best[n][phase] for n in best]), 1)[0]
        )
        for phase in ("record decode", "record prompt", "plan decode", "plan prompt")
    }
    spots = plan_hot_spots(make(layer_counts[-1]), context)

    lacking = missing_peer("torch", "transformers")
    torch_s = None
    torch_scaling: dict[int, float] = {}
    torch_fit = None
    fx_note = "not tried: torch not installed"
    nodes = None
    if lacking is None:
        torch_export(make(1), ROWS)  # warm up torch.export's own imports
        exports = [torch_export(config, ROWS) for _ in range(2 if quick else 3)]
        torch_s = median([e["total"] for e in exports])
        nodes = exports[0]["nodes"]
        for n in layer_counts:
            if n == depth:
                torch_scaling[n] = min(e["total"] for e in exports)
            else:
                torch_scaling[n] = min(
                    torch_export(make(n), ROWS)["total"]
                    for _ in range(1 if quick else 3)
                )
        torch_fit = linear_fit(list(torch_scaling), list(torch_scaling.values()))
        fx_note = fx_attempt(tiny_config(1))

    ratio = iron_s / torch_s if torch_s else None
    # Linear growth adds the same time per layer at any depth: compare a layer
    # added in the last doubling (8 -> 16) with one added in the first (2 -> 4).
    a, b, c, d = layer_counts
    first = (scaling[b] - scaling[a]) / (b - a)
    last = (scaling[d] - scaling[c]) / (d - c)
    marginal = last / first if first > 0 else float("inf")
    linear = fit["r2"] >= LINEAR_R2 and marginal <= MARGINAL
    met = ratio is not None and ratio < 1 and linear
    notes = [
        f"Model: {describe(config)}; context {context}, prompt chunks of {ROWS} rows; "
        f"weights are shape-only placeholders.",
        f"IRON: build the graph, bind placeholders, record the decode version "
        f"({steps[0]} steps) and the prompt version ({steps[1]} steps), plan both "
        f"into one arena on {DEVICE}: median {iron_s:.3f} s of {reps}.",
    ]
    if torch_s is not None:
        notes.append(
            f"Peer: LlamaForCausalLM built on the meta device, torch.export.export "
            f"(use_cache=False, strict=False, input_ids 1x{ROWS}; {nodes} graph "
            f"nodes): median {torch_s:.3f} s. Ratio IRON / torch = {ratio:.3f}."
        )
        notes.append(
            f"torch.fx.symbolic_trace, which the issue names, cannot trace "
            f"LlamaForCausalLM on this transformers version ({fx_note}); "
            f"torch.export is the capture measured instead. The peer captures one "
            f"input shape; IRON records and plans two versions."
        )
    else:
        notes.append(lacking)
    notes.append(
        f"Growth with depth: {fit['slope'] * 1e3:.2f} ms per layer, intercept "
        f"{fit['intercept'] * 1e3:.1f} ms, R^2 = {fit['r2']:.4f} over "
        f"{', '.join(map(str, layer_counts))} layers (best of several runs at each "
        f"depth). A layer added from {c} to {d} layers costs "
        f"{last * 1e3:.2f} ms, one added from {a} to {b} {first * 1e3:.2f} ms: "
        f"{marginal:.2f}x. Linear counts as R^2 >= {LINEAR_R2} and at most "
        f"{MARGINAL}x."
        + (
            f" torch.export: {torch_fit['slope'] * 1e3:.1f} ms per layer, R^2 = "
            f"{torch_fit['r2']:.4f}."
            if torch_fit
            else ""
        )
    )
    notes.append(
        "Growth of each phase (power-law exponent in the layer count, 1 is "
        "linear): " + ", ".join(f"{k} n^{v:.2f}" for k, v in exponents.items()) + "."
    )
    if not met:
        causes = []
        if ratio is None:
            causes.append("no peer was measured")
        elif ratio >= 1:
            causes.append(f"IRON took {ratio:.2f}x the peer's time")
        if not linear:
            worst = max(exponents, key=exponents.get)
            causes.append(
                f"growth is not linear (R^2 {fit['r2']:.4f}, a late layer costs "
                f"{marginal:.2f}x an early one): {worst} grows as "
                f"n^{exponents[worst]:.2f}. Placing the arena is the superlinear "
                f"part (hot spots below): each transient is fitted against every "
                f"resident and every buffer placed before it, in each of the "
                f"planner's tries"
            )
        notes.append("Missed: " + "; ".join(causes) + ".")
    rows = [
        [
            n,
            f"{scaling[n] * 1e3:.1f}",
            f"{torch_scaling[n] * 1e3:.0f}" if n in torch_scaling else "-",
        ]
        for n in layer_counts
    ]
    return result(
        figure="Compile cost: record + plan of a Llama-3.2-1B-shaped decoder"
        + (" (quick: tiny shapes)" if quick else ""),
        value=ratio,
        target=f"ratio < 1 (faster than the peer) and linear in layers (R^2 >= {LINEAR_R2}, late/early layer cost <= {MARGINAL})",
        met=met,
        peer="torch.export of transformers' LlamaForCausalLM on the meta device",
        peer_value=torch_s,
        peer_unit="s",
        unit=f"IRON s / peer s (IRON {iron_s:.3f} s; R^2 {fit['r2']:.4f}, late/early layer {marginal:.2f}x)",
        command=command(NUMBER, quick),
        judged=torch_s is not None,
        notes=notes,
        tables=[
            table(
                "IRON phases (median seconds)",
                ["phase", "ms"],
                [[k, f"{v * 1e3:.1f}"] for k, v in phases.items()],
            ),
            table(
                f"Where planning {layer_counts[-1]} layers' decode version goes (cProfile)",
                ["function", "calls", "own ms", "share"],
                spots,
            ),
            table(
                "Time against depth (best of several runs)",
                ["layers", "IRON ms", "torch.export ms"],
                rows,
            ),
        ],
        data={
            "iron_s": iron_s,
            "torch_export_s": torch_s,
            "ratio": ratio,
            "phases_s": phases,
            "steps": {"decode": steps[0], "prompt": steps[1]},
            "iron_scaling_s": scaling,
            "iron_fit": fit,
            "iron_phases_by_depth_s": best,
            "growth_exponents": exponents,
            "marginal_layer_cost_ratio": marginal,
            "torch_scaling_s": torch_scaling,
            "torch_fit": torch_fit,
            "fx_symbolic_trace": fx_note,
        },
    )
