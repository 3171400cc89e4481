"""Figure 13 (speculative decoding), checked in-process.

The figure's measuring loop runs on the embedded tiny model here (the real
checkpoint and transformers are the bench session's): each answer with and
without speculation must be the same tokens, and the counts must add up. The
modelled rate is arithmetic on those counts and the cost model's times.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from iron.lm import tiny
from iron.lm.generate import Decoder
from iron.lm.tokenizer import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from figures import speculative  # noqa: E402


def test_the_rate_counts_passes_and_single_steps():
    counts = {"tokens": 30, "passes": 5, "kept": 15, "steps": 10}
    times = {"decode_s": 0.010, "verify_s": 0.015}
    # 5 passes of 15 ms and 10 steps of 10 ms for 30 tokens
    assert speculative.rate(counts, times) == pytest.approx(30 / 0.175)


def test_the_measuring_loop_checks_the_tokens_and_adds_up(tmp_path):
    directory = tiny.write_checkpoint(tmp_path / "tiny")
    decoder = Decoder.from_pretrained(
        directory, device="npu2", context=256, rows=16, progress=False
    ).compile()
    tokenizer = Tokenizer.from_directory(directory)
    messages = ["one two three one two three one two three one two"] * 2
    counts = speculative.measure(decoder, tokenizer, messages, 12)
    assert counts["identical"] is True
    assert counts["answers"] == 2
    assert counts["kept"] <= counts["drafted"]
    assert counts["tokens"] == counts["kept"] + counts["passes"] + counts["steps"]
    assert counts["steps"] >= 0


def test_the_prompt_sets_are_real_text_and_code():
    sets = speculative.prompt_sets()
    assert set(sets) == {"free text", "summaries", "code edits"}
    assert all(len(m) > 300 for m in sets["summaries"])
    assert all("def " in m for m in sets["code edits"])
