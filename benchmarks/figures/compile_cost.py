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
import gc
import io
import logging
import pstats
import time
import warnings
from collections.abc import Callable, Sequence
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
#: The cost of a layer added at depth (8 -> 16) may exceed that of one
#: added early (2 -> 4) by at most this factor to count as linear
#: (:func:`slopes`).
MARGINAL = 1.25
#: The clock of every figure-1 time: this process's CPU time (all its
#: threads). On a shared machine, wall time also counts the time other
#: processes hold the cores, which varies from run to run and depth to depth;
#: CPU time counts the compile's own work. Wall times are reported beside.
CLOCK = time.process_time
#: Rounds of the depth sweep: each round compiles every depth once, in turn.
ROUNDS = 15
#: The depths IRON is compiled at: the fit (:func:`slopes`) takes them all.
DEPTHS = (2, 3, 4, 6, 8, 12, 16)
#: The depths torch.export is timed at (each takes up to seconds).
TORCH_DEPTHS = (2, 4, 8, 16)
#: Resamples of the rounds behind the late/early ratio's spread.
BOOTSTRAP = 200


def _bootstrap(
    rounds: list[dict[int, dict[str, float]]], depths: Sequence[int]
) -> tuple[float, float, float, float]:
    """5th and 95th percentiles of the late/early ratio and of R^2, rounds resampled.

    Seeded, so a run's spread is reproducible from its rounds.
    """
    rng = np.random.default_rng(0)
    ratios, r2s = [], []
    for _ in range(BOOTSTRAP):
        pick = [rounds[i] for i in rng.integers(0, len(rounds), len(rounds))]
        times = {n: median([r[n]["total"] for r in pick]) for n in depths}
        ratios.append(marginal_ratio(times))
        r2s.append(linear_fit(list(times), list(times.values()))["r2"])
    low, high = np.percentile(ratios, [5, 95])
    r2_low, r2_high = np.percentile(r2s, [5, 95])
    return float(low), float(high), float(r2_low), float(r2_high)


def _clean(measure: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """``measure(*args)`` from a collected heap.

    The garbage an earlier compile left (a whole graph of cycles) would be
    collected inside the next one and charged to it, more the larger that
    earlier graph was; collecting it first leaves each run paying for the
    collections of its own allocations only.
    """
    gc.collect()
    return measure(*args)


def depth_rounds(
    make: Callable[[int], Any], context: int, layer_counts: Sequence[int], rounds: int
) -> list[dict[int, dict[str, float]]]:
    """Compile every depth once per round, in turn; each run's seconds per phase.

    The depths alternate within a round (reversed every other round), so a
    slow spell of the shared machine lands on every depth alike instead of
    on the depth measured during it; the median over rounds then drops the
    runs it slowed. Best-of-n, used before, took each depth's luckiest run,
    so one depth's luck could bend the fit either way.
    """
    found = []
    for i in range(rounds):
        order = list(layer_counts) if i % 2 == 0 else list(reversed(layer_counts))
        one = {}
        for n in order:
            run = _clean(iron_compile, make(n), context, ROWS)
            one[n] = {k: v for k, v in run.items() if k != "steps"}
        found.append(one)
    return found


def marginal_ratio(times: dict[int, float]) -> float:
    """A layer added at depth over one added early: :func:`slopes`' ratio."""
    early, late = slopes(times)
    return late / early if early > 0 else float("inf")


def slopes(times: dict[int, float]) -> tuple[float, float]:
    """Seconds per layer early and late, from a quadratic fitted to every depth.

    ``t = c0 + c1 n + c2 n^2`` by least squares through all the depths'
    medians; a layer's cost between depths ``p`` and ``q`` is then ``c1 +
    c2 (p + q)``. Early: from the shallowest depth to twice it (2 -> 4);
    late: from half the deepest to it (8 -> 16). For quadratic growth these
    are exactly the two differences compared before, so the claim is the
    same, but each rests on every depth's median instead of two points: the
    early difference was about 7 ms, which 1 ms of noise moved by 15%.
    Linear growth reads 1; a planner superlinear in the layers more, which
    R^2 over a few points can miss.
    """
    depths = sorted(times)
    if len(depths) < 4:
        raise ValueError(f"slopes: need at least 4 depths, got {depths}")
    c2, c1, _ = np.polyfit(depths, [times[n] for n in depths], 2)
    low, high = depths[0], depths[-1]
    early = c1 + c2 * (low + 2 * low)
    late = c1 + c2 * (high / 2 + high)
    return float(early), float(late)


def iron_compile(config: Any, context: int, rows: int) -> dict[str, Any]:
    """Build, bind, record both versions and plan them; CPU seconds per phase.

    Phases are timed in this process's CPU time (:data:`CLOCK`); ``wall`` is
    the whole run's wall time.
    """
    w0 = time.perf_counter()
    t0 = CLOCK()
    graph = Llama(config, context=context, rows=rows)
    bind_placeholders(graph, config)
    t1 = CLOCK()
    with iron.use_device(DEVICE):
        decode = graph.record()
        t2 = CLOCK()
        prompt = graph.record(tokens=((rows,), np.int32))
        t3 = CLOCK()
        first = iron.plan(DEVICE, decode, arena=iron.ArenaPlan())
        t4 = CLOCK()
        iron.plan(DEVICE, prompt, arena=first.arena)
        t5 = CLOCK()
    return {
        "total": t5 - t0,
        "build+bind": t1 - t0,
        "record decode": t2 - t1,
        "record prompt": t3 - t2,
        "plan decode": t4 - t3,
        "plan prompt": t5 - t4,
        "wall": time.perf_counter() - w0,
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
        w0 = time.perf_counter()
        t0 = CLOCK()
        with torch.device("meta"):
            model = LlamaForCausalLM(hf_config(config, use_cache=False))
        model.eval()
        ids = torch.zeros((1, rows), dtype=torch.long, device="meta")
        exported = torch.export.export(
            model, (), {"input_ids": ids, "use_cache": False}, strict=False
        )
        total = CLOCK() - t0
        wall = time.perf_counter() - w0
    return {"total": total, "wall": wall, "nodes": len(exported.graph.nodes)}


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
    layer_counts = (1, 2, 3, 4, 6, 8) if quick else DEPTHS
    torch_counts = (1, 2, 4) if quick else TORCH_DEPTHS
    reps = 2 if quick else 5
    config = make(depth)

    iron_compile(make(2), CONTEXT if not quick else 64, ROWS)  # warm up imports
    context = 64 if quick else CONTEXT
    runs = [_clean(iron_compile, config, context, ROWS) for _ in range(reps)]
    iron_s = median([r["total"] for r in runs])
    phases = {k: median([r[k] for r in runs]) for k in runs[0] if k != "steps"}
    steps = runs[0]["steps"]

    rounds = depth_rounds(make, context, layer_counts, 3 if quick else ROUNDS)
    by_depth = {
        n: {k: median([r[n][k] for r in rounds]) for k in rounds[0][n]}
        for n in layer_counts
    }
    scaling = {n: b["total"] for n, b in by_depth.items()}
    fit = linear_fit(list(scaling), list(scaling.values()))
    # How each phase grows: the exponent of a power law through the points.
    exponents = {
        phase: float(
            np.polyfit(
                np.log(list(by_depth)),
                np.log([by_depth[n][phase] for n in by_depth]),
                1,
            )[0]
        )
        for phase in ("record decode", "record prompt", "plan decode", "plan prompt")
    }
    spots = plan_hot_spots(make(layer_counts[-1]), context)

    lacking = missing_peer("torch", "transformers")
    torch_s = torch_wall = None
    torch_scaling: dict[int, float] = {}
    torch_fit = None
    fx_note = "not tried: torch not installed"
    nodes = None
    if lacking is None:
        torch_export(make(1), ROWS)  # warm up torch.export's own imports
        exports = [_clean(torch_export, config, ROWS) for _ in range(2 if quick else 3)]
        torch_s = median([e["total"] for e in exports])
        torch_wall = median([e["wall"] for e in exports])
        nodes = exports[0]["nodes"]
        for n in torch_counts:
            if n == depth:
                torch_scaling[n] = torch_s
            else:
                torch_scaling[n] = median(
                    [
                        _clean(torch_export, make(n), ROWS)["total"]
                        for _ in range(1 if quick else 3)
                    ]
                )
        torch_fit = linear_fit(list(torch_scaling), list(torch_scaling.values()))
        fx_note = fx_attempt(tiny_config(1))

    ratio = iron_s / torch_s if torch_s else None
    first, last = slopes(scaling)
    marginal = marginal_ratio(scaling)
    spread = _bootstrap(rounds, layer_counts)
    linear = fit["r2"] >= LINEAR_R2 and marginal <= MARGINAL
    met = ratio is not None and ratio < 1 and linear
    notes = [
        f"Model: {describe(config)}; context {context}, prompt chunks of {ROWS} rows; "
        f"weights are shape-only placeholders.",
        f"IRON: build the graph, bind placeholders, record the decode version "
        f"({steps[0]} steps) and the prompt version ({steps[1]} steps), plan both "
        f"into one arena on {DEVICE}: median {iron_s:.3f} s of CPU time of {reps} "
        f"(wall {phases['wall']:.3f} s). Every time here is the process's CPU "
        f"time (time.process_time), the peer's too: on this shared machine wall "
        f"time also counts other processes' turns on the cores.",
    ]
    if torch_s is not None:
        notes.append(
            f"Peer: LlamaForCausalLM built on the meta device, torch.export.export "
            f"(use_cache=False, strict=False, input_ids 1x{ROWS}; {nodes} graph "
            f"nodes): median {torch_s:.3f} s of CPU time (wall {torch_wall:.3f} s). "
            f"Ratio IRON / torch = {ratio:.3f} (in wall time "
            f"{phases['wall'] / torch_wall:.3f})."
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
        f"{', '.join(map(str, layer_counts))} layers. From a quadratic fitted "
        f"to the same medians, a layer added from {layer_counts[-1] // 2} to "
        f"{layer_counts[-1]} layers costs {last * 1e3:.2f} ms, one added from "
        f"{layer_counts[0]} to {2 * layer_counts[0]} {first * 1e3:.2f} ms: "
        f"{marginal:.2f}x; resampling the rounds (bootstrap, {BOOTSTRAP} draws) "
        f"puts it within {spread[0]:.2f}-{spread[1]:.2f}x and R^2 within "
        f"{spread[2]:.4f}-{spread[3]:.4f} nine times in ten: a verdict is stable "
        f"when those ranges lie on one side of {MARGINAL}x and {LINEAR_R2}."
        + (
            f" torch.export: {torch_fit['slope'] * 1e3:.1f} ms per layer, R^2 = "
            f"{torch_fit['r2']:.4f}."
            if torch_fit
            else ""
        )
    )
    notes.append(
        f"How growth is measured: CPU time, {len(rounds)} rounds, each compiling every depth "
        f"once in turn (reversed every other round), each run from a collected "
        f"heap (the garbage of the run before is not charged to it; a run's own "
        f"collections are); each depth's time is its median over the rounds, "
        f"and a line and a quadratic are fitted to the medians by least squares. Medians, not "
        f"the best run: the machine is shared, and the median of runs taken in "
        f"turn drops the ones a slow spell hit at any depth, where the best run "
        f"picks each depth's luck. Linear counts as R^2 >= {LINEAR_R2} and a "
        f"late layer costing at most {MARGINAL}x an early one: R^2 alone over "
        f"four depths passes a curve that bends at the end, and the ratio alone "
        f"a line with an outlier in the middle."
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
            why = (
                "placing the arena is the superlinear part (hot spots below): each "
                "transient is fitted against every resident and every buffer placed "
                "before it, in each of the planner's tries"
                if exponents[worst] > 1.05
                else "no phase grows faster than linearly, so the miss is the "
                "measurement's spread (above), not a superlinear phase"
            )
            causes.append(
                f"growth is not linear (R^2 {fit['r2']:.4f}, a late layer costs "
                f"{marginal:.2f}x an early one; {spread[0]:.2f}-{spread[1]:.2f}x "
                f"resampled): {worst} grows as n^{exponents[worst]:.2f}; {why}"
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
                "IRON phases (median CPU time; wall: the whole run's wall time)",
                ["phase", "ms"],
                [[k, f"{v * 1e3:.1f}"] for k, v in phases.items()],
            ),
            table(
                f"Where planning {layer_counts[-1]} layers' decode version goes (cProfile)",
                ["function", "calls", "own ms", "share"],
                spots,
            ),
            table(
                f"CPU time against depth (IRON: median of {len(rounds)} rounds; torch.export: "
                f"median of its runs)",
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
            "iron_phases_by_depth_s": by_depth,
            "iron_rounds_total_s": [
                {n: r[n]["total"] for n in layer_counts} for r in rounds
            ],
            "marginal_ratio_spread": spread,
            "growth_exponents": exponents,
            "marginal_layer_cost_ratio": marginal,
            "torch_scaling_s": torch_scaling,
            "torch_fit": torch_fit,
            "fx_symbolic_trace": fx_note,
        },
    )
