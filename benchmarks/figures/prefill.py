"""Figure 7: modelled npu2 prefill of Llama-3.2-1B bf16, beside FastFlowLM's.

Prompt processing (prefill) of Llama-3.2-1B's shapes at 1,024 and 4,096
prompt tokens on npu2, from the cost model (``iron.core.cost``), labelled
modelled: no number here is measured on an NPU (this machine has none).

Two designs are modelled, both of IRON's operators and tiles as they
resolve on npu2:

- *IRON's prompt version*: ``Llama``'s own prompt graph, recorded at its
  widest chunk, 16 rows (its embedding gather is one shim copy, and a shim
  tile has 16 descriptors), and run once per chunk;
- *wide chunks*: the same layers (RMSNorm, the Q/K/V/O and MLP GEMMs,
  RoPE, the cache copies, causal attention, SiLU-mul, residual adds) over
  chunks of :data:`CHUNK` rows, with the chunk's embedding rows given as an
  input (a host gather of ``rows x 2048`` bf16; the device gather takes 16
  rows per copy) and the LM head only over the last row (a prompt needs the
  next token's logits alone).

Each chunk's steps are modelled at the chunk's own cache position (causal
attention's ``start``), the chunks summed. Beside it: FastFlowLM's published
prefill rates (v0.9.30, Ryzen AI 7 350), and the compute roof: every MAC at
npu2's peak bf16 rate (``iron.NPU2.peak_bf16_macs_per_s``, about 25 bf16
TFLOPS).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

import iron
from iron.core.cost import step_time
from iron.core.device import as_device
from iron.core.operator import RefusedShapeError
from iron.lm.model import Llama
from iron.operators import (
    GEMM,
    GEMV,
    CausalAttention,
    RMSNorm,
)
from iron.operators.matmul import STACK_BYTES

from . import assumptions
from .common import (
    DEVICE,
    Context,
    bind_placeholders,
    command,
    describe,
    llama_1b,
    result,
    table,
)

NUMBER = 7
PROMPTS = (1024, 4096)
#: A GEMM tiling's fields as the notes list them.
_TILE_KEYS = ("tile_m", "tile_k", "tile_n", "num_aie_columns", "out_depth")
#: Rows per chunk of the wide-chunk design.
CHUNK = 512
#: IRON's own prompt version: its widest chunk (one shim copy gathers the
#: embedding rows; a shim tile has 16 buffer descriptors).
IRON_ROWS = 16

#: FastFlowLM's published prefill of Llama-3.2-1B on a Ryzen AI 7 350
#: (XDNA2), v0.9.30, tokens/s by prompt length.
FASTFLOWLM = {
    "version": "v0.9.30",
    "machine": "Ryzen AI 7 350 (XDNA2)",
    "tokens_per_s": {1024: 1686.0, 4096: 2339.0},
    "source": "https://docs.fastflowlm.com/benchmarks/llama3_results.html",
}


class WideChunk(Llama):
    """Llama's prompt layers over a chunk whose embedding rows are an input.

    ``x`` is the chunk's ``(rows, hidden)`` embedding rows; ``position`` the
    cache position of its first row. With ``head`` (the prompt's last chunk)
    returns the last row's logits; without it (every earlier chunk: only the
    caches it fills are used) the last layer's output rows.
    """

    def __init__(self, *args: Any, head: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.with_head = head

    def body(self, x, *, position: iron.Carried[int] = 0):
        c = self.config
        rows = x.shape[0]
        cos_sin = self.rope[position : position + rows]
        for layer in self.model.layers:
            x = self.prompt_layer(layer, x, cos_sin, position, rows)
        if not self.with_head:
            return x, iron.carry(position=position + rows)
        h = RMSNorm.step(x, weight=self.model.norm.weight, eps=c.rms_norm_eps)
        logits = GEMV.step(self.head, h[rows - 1])  # the last row's, (vocab,)
        return logits, iron.carry(position=position + rows)


def _record(
    design: str, config: Any, rows: int, context: int, head: bool = True
) -> Any:
    if design == "iron":
        graph = Llama(config, context=context, rows=rows)
        shapes = {"tokens": ((rows,), np.int32)}
    else:
        graph = WideChunk(config, context=context, rows=rows, head=head)
        shapes = {"x": ((rows, config.hidden_size), "bfloat16")}
    bind_placeholders(graph, config)
    with iron.use_device(DEVICE):
        return graph.record(**shapes)


_GRID = (8, 16, 32, 64, 128, 256, 512)


#: _candidates' results by operator and device: the prompts share their GEMMs.
_FOUND: dict[tuple, list[Any]] = {}


def _candidates(op: Any, device: Any) -> list[Any]:
    """Every tiling of a GEMM or causal attention on a small grid that check() accepts."""
    key = (type(op).__name__, tuple(sorted(op.fields().items())), device.name)
    if key not in _FOUND:
        _FOUND[key] = _search(op, device)
    return _FOUND[key]


def _search(op: Any, device: Any) -> list[Any]:
    if isinstance(op, GEMM):
        grid = [
            {
                "tile_m": m,
                "tile_n": n,
                "tile_k": k,
                "num_aie_columns": c,
                "out_depth": depth,
            }
            for m in _GRID
            for n in _GRID
            for k in _GRID
            for c in (8, 4)
            for depth in (2, 1)
        ]
    elif isinstance(op, CausalAttention):
        grid = [
            {"q_tile": q, "kv_tile": kv, "num_aie_columns": c}
            for q in (1, 2, 4, 8, 16, 32, 64)
            for kv in (16, 32, 64, 128, 256, 512)
            for c in (8, 4)
        ]
    else:
        return [op]
    found = [op]
    for tiles in grid:
        try:
            tried = op.replace(**tiles)
            tried.check(device)
        except (RefusedShapeError, ValueError):
            continue
        found.append(tried)
    return found


def _chunk_ops(op: Any, positions: range) -> list[Any]:
    if isinstance(op, CausalAttention):
        return [op.replace(start=p) for p in positions]
    return [op] * len(positions)


def model_prompt(
    prompt: int, design: str = "wide", rows: int = CHUNK, tuned: bool = True
) -> dict:
    """Model a ``prompt``-token prefill in chunks of ``rows`` on npu2.

    Each chunk is the recorded version with causal attention's ``start`` set
    to the chunk's position; the version's one dispatch (full ELF) is
    charged per chunk. In the wide design only the last chunk runs the LM
    head (a prompt needs the next token's logits alone; the earlier chunks
    fill the caches); IRON's own prompt version runs it every chunk, as it
    does. With ``tuned``, each GEMM and causal attention takes the tiling
    (on a grid, among those its ``check`` accepts) with the least modelled
    time over the prompt's chunks, as ``iron-lm tune`` on the emulated NPU
    picks by this model; else the tiles its ``resolve`` picks.
    """
    config = llama_1b()
    rows = min(rows, prompt)
    last = _record(design, config, rows, prompt)
    body = last if design == "iron" else _record("wide", config, rows, prompt, False)
    device = as_device(DEVICE)
    positions = range(0, prompt, rows)
    per_op: dict[str, dict[str, float]] = defaultdict(
        lambda: {
            "steps": 0,
            "seconds": 0.0,
            "compute": 0.0,
            "memory": 0.0,
            "calls": 0.0,
            "stall": 0.0,
            "reread": 0.0,
            "once": 0.0,
        }
    )
    chosen: dict[tuple, Any] = {}
    total = macs = 0.0

    def pick(op: Any) -> Any:
        key = (type(op).__name__, tuple(sorted(op.fields().items())))
        if key not in chosen:
            options = _candidates(op, device) if tuned else [op]
            chosen[key] = min(
                options,
                key=lambda o: sum(
                    step_time(c, device).seconds for c in _chunk_ops(o, positions)
                ),
            )
        return chosen[key]

    gemm_tiles = []
    times: dict[tuple[int, Any, int], Any] = {}
    for position in positions:
        recording = last if position == positions[-1] else body
        for step in recording.steps:
            op = pick(step.op)
            if isinstance(op, GEMM) and position == 0:
                fields = op.resolved(device).fields()
                gemm_tiles.append({k: fields[k] for k in ("M", "K", "N", *_TILE_KEYS)})
            dispatches = 1 if step.index == 0 else 0
            # Only attention's time depends on the chunk's position: every
            # other step's is the same in each chunk, modelled once.
            at = position if isinstance(op, CausalAttention) else None
            memo = (id(op), at, dispatches)
            if memo not in times:
                timed = op if at is None else op.replace(start=at)
                times[memo] = step_time(timed, device, dispatches=dispatches)
            t = times[memo]
            row = per_op[t.name]
            row["steps"] += 1
            row["seconds"] += t.seconds
            row["compute"] += t.compute_s
            row["memory"] += t.memory_s
            row["calls"] += t.calls_s
            row["stall"] += t.stall_s
            # The memory time of the rereads, and the step's time had its
            # tiling read every byte once (what memory-tile reuse could reach).
            per_byte = t.memory_s / (t.bytes + t.reread_bytes) if t.memory_s else 0.0
            row["reread"] += t.reread_bytes * per_byte
            row["once"] += (
                max(t.compute_s, t.bytes * per_byte)
                + t.calls_s
                + t.stall_s
                + t.dispatch_s
            )
            total += t.seconds
            macs += t.macs
    return {
        "prompt": prompt,
        "rows": rows,
        "chunks": len(positions),
        "seconds": total,
        "tokens_per_s": prompt / total,
        "macs": macs,
        "roof_s": macs / device.peak_bf16_macs_per_s,
        "per_op": dict(per_op),
        "steps_per_chunk": len(body.steps),
        "gemm_tiles": gemm_tiles,
    }


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f} ms"


def _limits(p: int, r: dict, flm: float, device: Any) -> str:
    """Where a prompt's modelled time goes: compute, memory (rereads), calls."""
    ops = r["per_op"].values()
    memory = sum(v["memory"] for v in ops)
    compute = sum(v["compute"] for v in ops)
    calls = sum(v["calls"] for v in ops)
    reread = sum(v["reread"] for v in ops)
    return (
        f"What limits {p} tokens: of {_ms(r['seconds'])} (FastFlowLM's rate is "
        f"{_ms(p / flm)}), the steps' memory time sums to {_ms(memory)} at the "
        f"{device.dma_bytes_per_s / 1e9:.0f} GB/s DMA roof, {_ms(reread)} of it "
        f"bytes a tiling reads again; their compute to {_ms(compute)} and their "
        f"kernel calls to {_ms(calls)}."
    )


def _gemm_tiles_note(r: dict, device: Any) -> str:
    """The GEMMs' tuned tiles, and why no larger kernel call fits a core."""
    tiles = sorted({tuple(t[k] for k in _TILE_KEYS) for t in r["gemm_tiles"]})
    budget = device.core_memory_bytes - STACK_BYTES
    tm, tk, tn, columns, depth = max(tiles, key=lambda t: t[0] * t[1] * t[2])
    most_k = (budget - (4 + 2 * depth) * tm * tn) // (4 * (tm + tn))
    stall = sum(v["stall"] for v in r["per_op"].values())
    return (
        "The GEMMs' tuned tiles (tile_m, tile_k, tile_n, columns, out_depth): "
        + ", ".join(str(t) for t in tiles)
        + f". A core holds a and b double-buffered in bf16, one fp32 "
        f"accumulator and out_depth bf16 output tiles (4 x (tm x tk + tk x tn) "
        f"+ 4 x tm x tn + 2 x out_depth x tm x tn bytes) within {budget:,} "
        f"bytes (its {device.core_memory_bytes // 1024} KiB less the stack): at "
        f"tm = {tm}, tn = {tn}, out_depth = {depth} that leaves tk <= "
        f"{most_k}, so {tm} x {tk} x {tn} (tk a divisor of K, a multiple of 8) "
        f"is the largest kernel call, and {device.core_rows} x {tm} rows by "
        f"{columns} x {tn} columns the largest output block an array pass "
        f"covers: a GEMM re-streams a once per {columns * tn} columns of N and "
        f"b once per {device.core_rows * tm} rows of M. A single output tile "
        f"(out_depth = 1) makes the core wait for the previous tile's drain "
        f"before it stores the next (a {tm} x {tn} bf16 tile at one DMA "
        f"channel's 4 bytes a cycle against the next tile's K loop): "
        f"{_ms(stall)} of the prompt's time."
    )


def _remains(p: int, r: dict, flm: float, device: Any) -> str:
    """Step by step, what the prompt's time is above FastFlowLM's and why."""
    ops = r["per_op"]
    mem_kib = device.mem_tile_bytes // 1024
    need = p / flm
    gemm, att = ops.get("GEMM", {}), ops.get("CausalAttention", {})
    gemm_cut = gemm.get("seconds", 0.0) - gemm.get("once", 0.0)
    att_cut = att.get("seconds", 0.0) - att.get("once", 0.0)
    after_gemm = r["seconds"] - gemm_cut
    return (
        f"Missed at {p} tokens: {p / r['seconds']:,.0f} against {flm:,.0f} "
        f"tokens/s ({_ms(r['seconds'])} against {_ms(need)}), step by step. "
        f"(1) The tiles are already those of least modelled time among every "
        f"tiling check() accepts on the grid (GEMM tiles of 8-512, attention "
        f"q_tile 1-64 and kv_tile 16-512, 4 or 8 columns), and a core's memory "
        f"allows no larger GEMM kernel call (above). (2) GEMM takes {_ms(gemm.get('seconds', 0.0))}, of which "
        f"{_ms(gemm.get('reread', 0.0))} of memory time is a and b re-streamed per "
        f"pass; read once (the most memory-tile reuse could reach: a column's "
        f"memory tile keeping its K x tile_n panel of b across the M passes; at "
        f"tile_n = 64 that panel is 256 KiB at K = 2048 but 1 MiB at K = 8192, "
        f"over the memory tile's {mem_kib} KiB, so the MLP's down projection "
        f"would need a narrower panel), the GEMMs would take {_ms(gemm.get('once', 0.0))} and the prompt "
        f"{_ms(after_gemm)} ({p / after_gemm:,.0f} tokens/s, "
        f"{'above' if after_gemm < need else 'still below'} FastFlowLM). Not built: "
        f"the memory tile must replay a sequence of K tiles once per pass, while "
        f"mlir-aie's object FIFO repeat_count replays each object in turn "
        f"(Xilinx/mlir-aie test/objectFifo-stateful-transform/repeat_count/), so "
        f"it needs a hand-written memory-tile buffer-descriptor chain, which "
        f"cannot be checked without mlir-aie (none here); the model does not "
        f"credit a reuse the design does not do. (3) Causal attention takes "
        f"{_ms(att.get('seconds', 0.0))}: one core per column (8 of the 32) "
        f"runs a kv head's query group, and every query tile re-streams the K/V "
        f"cache up to its own end ({_ms(att.get('reread', 0.0))} of memory time); "
        f"read once it would take {_ms(att.get('once', 0.0))} (a further "
        f"{_ms(att_cut)}). Sharing one K/V stream among a column's 4 cores is a "
        f"change of the attention design's FIFOs, not of its tiles. (4) Fewer "
        f"kernel calls: the GEMMs already take the single output tile "
        f"(out_depth) where it pays, its drain's wait charged; a longer K tile "
        f"than the tiles above does not fit a core's memory."
    )


def run(ctx: Context) -> dict[str, Any]:
    """Compute figure 7 (the model is cheap: full size in --quick too)."""
    quick = ctx.quick
    device = as_device(DEVICE)
    wide = {p: model_prompt(p) for p in PROMPTS}
    plain = {p: model_prompt(p, tuned=False) for p in PROMPTS}
    ours = {p: model_prompt(p, "iron", IRON_ROWS, tuned=False) for p in PROMPTS}
    flm = FASTFLOWLM["tokens_per_s"]
    met = all(wide[p]["tokens_per_s"] > flm[p] for p in PROMPTS)
    tflops = 2 * device.peak_bf16_macs_per_s / 1e12
    value = min(wide[p]["tokens_per_s"] / flm[p] for p in PROMPTS)

    def share(r: dict) -> str:
        return f"{r['roof_s'] / r['seconds']:.0%}"

    notes = [
        f"Model: {describe(llama_1b())}; bf16 weights (shape-only placeholders); "
        f"npu2, one full-ELF dispatch per chunk. Modelled with the cost model, "
        f"not measured: no NPU here.",
        f"Wide chunks of {CHUNK} rows ({wide[PROMPTS[0]]['steps_per_chunk']} steps a "
        f"chunk; the embedding rows gathered on the host, the LM head over the "
        f"chunk's last row only), each GEMM and causal attention at the tiling "
        f"with the least modelled time that its check() accepts (what iron-lm "
        f"tune picks on the emulated NPU, whose measure is this model): "
        + "; ".join(
            f"{p} tokens {wide[p]['tokens_per_s']:,.0f} tokens/s "
            f"({wide[p]['seconds'] * 1e3:.1f} ms, {share(wide[p])} of the compute "
            f"roof's rate)"
            for p in PROMPTS
        )
        + ".",
        "The same chunks with the tiles the operators' resolve() picks: "
        + "; ".join(
            f"{p} tokens {plain[p]['tokens_per_s']:,.0f} tokens/s" for p in PROMPTS
        )
        + ".",
        f"IRON's own prompt version ({IRON_ROWS}-row chunks, the most its "
        f"embedding gather takes in one shim copy; every chunk reads every "
        f"weight again): "
        + "; ".join(
            f"{p} tokens {ours[p]['tokens_per_s']:,.0f} tokens/s" for p in PROMPTS
        )
        + ".",
        f"Compute roof: npu2's peak of {device.peak_bf16_macs_per_s / 1e12:.2f} T "
        f"bf16 MACs/s ({tflops:.1f} TFLOPS; see iron.NPU2's source) over the "
        f"prompt's MACs: "
        + "; ".join(
            f"{p} tokens {p / wide[p]['roof_s']:,.0f} tokens/s" for p in PROMPTS
        )
        + ". FastFlowLM's published figures reach "
        + ", ".join(f"{flm[p] / (p / wide[p]['roof_s']):.0%} (at {p})" for p in PROMPTS)
        + " of it.",
        f"FastFlowLM {FASTFLOWLM['version']} on a {FASTFLOWLM['machine']}: "
        + ", ".join(f"{flm[p]:,.0f} tokens/s at {p}" for p in PROMPTS)
        + f" ({FASTFLOWLM['source']}); it runs its own quantized weights, so "
        "its GEMMs move fewer weight bytes than bf16.",
    ]
    for p in PROMPTS:
        notes.append(_limits(p, wide[p], flm[p], device))
    notes.append(_gemm_tiles_note(wide[PROMPTS[-1]], device))
    if not met:
        worst = min(PROMPTS, key=lambda p: wide[p]["tokens_per_s"] / flm[p])
        notes.append(_remains(worst, wide[worst], flm[worst], device))

    def op_rows(r: dict) -> list[list[Any]]:
        return [
            [
                name,
                int(v["steps"]),
                f"{v['seconds'] * 1e3:.2f}",
                f"{v['seconds'] / r['seconds']:.1%}",
                f"{v['compute'] * 1e3:.2f}",
                f"{v['memory'] * 1e3:.2f}",
                f"{v['calls'] * 1e3:.2f}",
                f"{v['stall'] * 1e3:.2f}",
            ]
            for name, v in sorted(r["per_op"].items(), key=lambda kv: -kv[1]["seconds"])
        ]

    columns = [
        "operator",
        "steps",
        "total ms",
        "share",
        "compute ms",
        "memory ms",
        "calls ms",
        "stall ms",
    ]
    summary = [
        [
            p,
            f"{wide[p]['tokens_per_s']:,.0f}",
            f"{plain[p]['tokens_per_s']:,.0f}",
            f"{ours[p]['tokens_per_s']:,.0f}",
            f"{flm[p]:,.0f}",
            f"{p / wide[p]['roof_s']:,.0f}",
        ]
        for p in PROMPTS
    ]
    return result(
        figure="Modelled npu2 prefill, Llama-3.2-1B bf16 (cost model)",
        value=value,
        target="above FastFlowLM's published prefill at 1k and 4k tokens",
        met=met,
        peer=f"FastFlowLM {FASTFLOWLM['version']}, {FASTFLOWLM['machine']}: "
        + ", ".join(f"{flm[p]:,.0f} tokens/s at {p}" for p in PROMPTS),
        peer_value=1.0,
        unit="x FastFlowLM's tokens/s at the worse length (modelled, "
        + ", ".join(f"{wide[p]['tokens_per_s']:,.0f} at {p}" for p in PROMPTS)
        + ")",
        peer_unit="x (its own tokens/s)",
        command=command(NUMBER, quick),
        notes=notes,
        tables=[
            table(
                "Prefill tokens/s (modelled but FastFlowLM's)",
                [
                    "prompt tokens",
                    f"chunks of {CHUNK}, tuned tiles",
                    f"chunks of {CHUNK}, resolve()'s tiles",
                    f"IRON prompt version, {IRON_ROWS}-row chunks",
                    "FastFlowLM (published)",
                    "compute roof",
                ],
                summary,
            ),
            *[
                table(
                    f"Modelled time by operator, {p}-token prompt, chunks of {CHUNK}",
                    columns,
                    op_rows(wide[p]),
                )
                for p in PROMPTS
            ],
            table(
                "Every assumption of the cost model, with its source",
                assumptions.COLUMNS,
                assumptions.rows(),
            ),
        ],
        data={
            "wide": wide,
            "wide_resolved_tiles": plain,
            "iron_prompt_version": ours,
            "fastflowlm": FASTFLOWLM,
            "chunk": CHUNK,
        },
    )
