"""Figure 2: arena efficiency — planned transient bytes against the lower bound.

For each version (the decode step and a 16-row prompt chunk) of Llama graphs
at Llama-3.2-1B's and Llama-3.1-8B's shapes (shape-only placeholders, context
2048, both versions planned into one arena as ``Decoder.compile`` does), and
for seeded random graphs of the catalog's elementwise operators over vectors
of mixed sizes, the arena plan's ``transient_bytes`` is divided by
``lower_bound_of`` (the most aligned transient bytes live at any one step: no
placement covers fewer). ``no_reuse_bytes`` (every transient its own bytes)
over the planned bytes shows what planning saves. The figure's value is the
worst ratio of all graphs.

Random graphs come in two kinds: *chains*, whose steps mostly read recent
results (short lifetimes, as in a network's layers), and *DAGs*, whose steps
read any earlier value (long, overlapping lifetimes of mixed sizes, the hard
case for any placement). Each starts from four inputs of random sizes
(multiples of 16 elements); a step is a unary activation, a binary operator
on two values of one size, or a copy of a prefix (a new, smaller size).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

import iron
from iron.core.arena import SEARCH_WORK
from iron.lm.model import Llama
from iron.operators import (
    GELU,
    Copy,
    ElementwiseAdd,
    ElementwiseMul,
    ReLU,
    Sigmoid,
    SiLU,
    SiLUMul,
    Tanh,
)

from .common import (
    DEVICE,
    Context,
    bind_placeholders,
    command,
    describe,
    llama_1b,
    llama_8b,
    median,
    result,
    table,
    tiny_config,
)

NUMBER = 2
TARGET = 1.02
CONTEXT = 2048
ROWS = 16

_UNARY = (ReLU, SiLU, Sigmoid, Tanh, GELU)
_BINARY = (ElementwiseAdd, ElementwiseMul, SiLUMul)


class RandomGraph(iron.Graph):
    """A seeded random graph of elementwise steps over four inputs.

    Args:
        seed: The generator's seed (the graph is the same for a seed).
        steps: Steps to record.
        chain: Read mostly the latest values (else any earlier value).
    """

    def __init__(self, seed: int, steps: int, chain: bool) -> None:
        self.seed = seed
        self.steps = steps
        self.chain = chain

    def body(self, x0, x1, x2, x3):
        rng = np.random.default_rng(self.seed)
        pool = [x0, x1, x2, x3]
        for _ in range(self.steps):
            if self.chain:
                back = min(int(rng.exponential(3.0)), len(pool) - 1)
                a = pool[len(pool) - 1 - back]
            else:
                a = pool[int(rng.integers(len(pool)))]
            roll = rng.random()
            if roll < 0.45:
                same = [h for h in pool if h.shape == a.shape and h is not a]
                if same:
                    b = same[int(rng.integers(len(same)))]
                    op = _BINARY[int(rng.integers(len(_BINARY)))]
                    pool.append(op.step(a, b))
                    continue
            if roll > 0.85 and a.shape[0] >= 64:
                keep = 16 * int(rng.integers(1, a.shape[0] // 16))
                pool.append(Copy.step(a[:keep]))
                continue
            pool.append(_UNARY[int(rng.integers(len(_UNARY)))].step(a))
        return pool[-1], pool[-2]


def _row(name: str, arena: iron.ArenaPlan, version: str, steps: int) -> dict:
    planned = arena.transient_bytes(version)
    bound = arena.lower_bound_of(version)
    none = arena.no_reuse_bytes(version)
    return {
        "graph": name,
        "steps": steps,
        "transient_bytes": planned,
        "lower_bound": bound,
        "ratio": planned / bound if bound else 1.0,
        "no_reuse_bytes": none,
        "saving": none / planned if planned else 1.0,
    }


def llama_rows(name: str, config: Any, context: int) -> list[dict]:
    """Plan the decode and prompt versions of one Llama into one arena."""
    graph = Llama(config, context=context, rows=ROWS)
    bind_placeholders(graph, config)
    arena = iron.ArenaPlan()
    rows = []
    with iron.use_device(DEVICE):
        for version, shapes in (
            ("decode", {}),
            ("prompt", {"tokens": ((ROWS,), np.int32)}),
        ):
            recording = graph.record(**shapes)
            plan = iron.plan(DEVICE, recording, arena=arena)
            arena = plan.arena  # the snapshot with this version placed
            rows.append(
                _row(f"{name} {version}", arena, plan.version, len(recording.steps))
            )
    arena.check()
    return rows


def random_rows(count: int, steps: int) -> list[dict]:
    """Plan ``count`` chains and ``count`` DAGs, each in its own arena."""
    rows = []
    for chain in (True, False):
        for seed in range(count):
            rng = np.random.default_rng(1000 + seed)
            sizes = 16 * rng.integers(1, 4096, 4)
            graph = RandomGraph(seed, steps, chain)
            with iron.use_device(DEVICE):
                recording = graph.record(
                    **{f"x{i}": (int(s),) for i, s in enumerate(sizes)}
                )
                plan = iron.plan(DEVICE, recording)
            plan.arena.check()
            kind = "chain" if chain else "DAG"
            rows.append(
                _row(
                    f"random {kind} #{seed}",
                    plan.arena,
                    plan.version,
                    len(recording.steps),
                )
            )
    return rows


def run(ctx: Context) -> dict[str, Any]:
    """Measure figure 2."""
    quick = ctx.quick
    if quick:
        untied = dataclasses.replace(tiny_config(4), tie_word_embeddings=False)
        models = [("tiny 2-layer", tiny_config(2), 64), ("tiny untied", untied, 64)]
        count, steps = 4, 40
    else:
        models = [
            ("Llama-3.2-1B", llama_1b(), CONTEXT),
            ("Llama-3.1-8B", llama_8b(), CONTEXT),
        ]
        count, steps = 20, 80
    llama = [
        r for name, config, context in models for r in llama_rows(name, config, context)
    ]
    randoms = random_rows(count, steps)
    chains = [r for r in randoms if "chain" in r["graph"]]
    dags = [r for r in randoms if "DAG" in r["graph"]]
    everything = llama + randoms
    worst = max(everything, key=lambda r: r["ratio"])
    met = worst["ratio"] <= TARGET
    llama_worst = max(r["ratio"] for r in llama)

    def summary(rows: list[dict]) -> str:
        ratios = [r["ratio"] for r in rows]
        within = sum(x <= TARGET for x in ratios)
        return (
            f"median {median(ratios):.4f}, worst {max(ratios):.4f}, {within} of "
            f"{len(ratios)} within {TARGET}; planning saves a median "
            f"{median([r['saving'] for r in rows]):.1f}x over no reuse"
        )

    notes = [
        "Models: "
        + "; ".join(f"{n}: {describe(c)}, context {ctx_}" for n, c, ctx_ in models)
        + f"; prompt chunks of {ROWS} rows; shape-only weights.",
        f"Llama versions: worst ratio {llama_worst:.4f}.",
        f"Random chains ({steps} steps each): {summary(chains)}.",
        f"Random DAGs ({steps} steps each): {summary(dags)}.",
        "The lower bound (most bytes live at one step) is not always reachable: "
        "placing buffers of mixed sizes with overlapping lifetimes at fixed "
        "offsets is NP-hard in general, and the optimum of a given graph can lie "
        "above it.",
    ]
    if not met:
        notes.append(
            f"Missed: the worst graph, {worst['graph']}, needs {worst['ratio']:.4f}x "
            f"its lower bound ({worst['transient_bytes']} bytes against "
            f"{worst['lower_bound']}). The planner's best-fit tries, then its "
            f"local search over placement orders (first fit, at most "
            f"{SEARCH_WORK} placements a version), leave gaps between long-lived "
            f"buffers of mixed sizes in random DAGs; "
            f"{'the Llama versions meet the target' if llama_worst <= TARGET else 'the Llama versions miss too'}."
        )

    def cells(r: dict) -> list:
        return [
            r["graph"],
            r["steps"],
            r["transient_bytes"],
            r["lower_bound"],
            f"{r['ratio']:.4f}",
            r["no_reuse_bytes"],
            f"{r['saving']:.2f}x",
        ]

    columns = [
        "graph",
        "steps",
        "planned B",
        "lower bound B",
        "ratio",
        "no reuse B",
        "saved",
    ]
    return result(
        figure="Arena efficiency: planned transient bytes / lower bound"
        + (" (quick: tiny shapes)" if quick else ""),
        value=worst["ratio"],
        target=f"<= {TARGET} for every graph",
        met=met,
        peer="no reuse at all (every transient its own bytes)",
        peer_value=median(
            [
                r["no_reuse_bytes"] / r["lower_bound"]
                for r in everything
                if r["lower_bound"]
            ]
        ),
        unit="worst planned / lower bound",
        peer_unit="median no-reuse / lower bound",
        command=command(NUMBER, quick),
        notes=notes,
        tables=[
            table("Llama versions", columns, [cells(r) for r in llama]),
            table(
                "Random graphs", columns, [cells(r) for r in randoms], collapsed=True
            ),
        ],
        data={"llama": llama, "random": randoms, "worst": worst},
    )
