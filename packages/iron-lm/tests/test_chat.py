"""``iron-lm chat``: turns from stdin, replies streamed, the cache reused.

A fresh interpreter runs the command with the turns on its stdin; the
replies must be what ``Decoder.chat`` gives for the same conversation, and
the second turn's summary must show the first turn's prompt reused.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from lm_support import write_tiny

from iron.lm.generate import Decoder

CACHED = re.compile(r"(\d+) prompt tokens(?: \((\d+) cached\))?, first token in")


def chat(*args: str, turns: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "IRON_BACKEND": "emu", "IRON_EMU_POISON": "1"}
    env.pop("IRON_DEVICE", None)
    done = subprocess.run(
        [sys.executable, "-m", "iron.lm", "chat", "--context", "128", *args],
        input=turns,
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_a_conversation_reuses_the_cache_and_replies_as_decoder_chat(tmp_path):
    directory = write_tiny(tmp_path / "tiny")
    done = chat(
        "--checkpoint",
        str(directory),
        "--max-new-tokens",
        "6",
        "--system",
        "Be brief.",
        turns="Hello\nAnd then?\n",
    )
    assert done.returncode == 0, done.stderr
    summaries = [CACHED.search(line) for line in done.stderr.splitlines()]
    summaries = [m for m in summaries if m]
    assert len(summaries) == 2
    first_prompt = int(summaries[0][1])
    assert summaries[0][2] is None  # nothing to reuse yet
    assert int(summaries[1][2]) >= first_prompt  # the first turn not prefilled again
    # the replies are those of a fresh decoder, turn by turn
    decoder = Decoder.from_pretrained(directory, device="npu2", context=128)
    messages = [{"role": "system", "content": "Be brief."}]
    expected = []
    for text in ("Hello", "And then?"):
        messages.append({"role": "user", "content": text})
        reply = decoder.chat(messages, max_new_tokens=6)
        messages.append({"role": "assistant", "content": reply})
        expected.append(reply)
    replies = done.stdout.split("> ")[1:3]
    assert [r.removesuffix("\n") for r in replies] == expected


def test_reset_starts_over_and_exit_leaves():
    done = chat("--max-new-tokens", "3", turns="Hi\n/reset\nHi\n/exit\nnever read\n")
    assert done.returncode == 0, done.stderr
    assert "(a new conversation)" in done.stderr
    summaries = [m for m in map(CACHED.search, done.stderr.splitlines()) if m]
    assert len(summaries) == 2
    assert summaries[0][1] == summaries[1][1]  # the same prompt after the reset


def test_a_turn_over_the_context_is_refused_and_the_chat_goes_on():
    long = "the NPU " * 200
    done = chat("--max-new-tokens", "3", turns=f"{long}\nHi\n")
    assert done.returncode == 0, done.stderr
    assert "longer than this model's context" in done.stderr
    assert "/reset starts over" in done.stderr
    assert len([m for m in map(CACHED.search, done.stderr.splitlines()) if m]) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--max-new-tokens", "0"), "--max-new-tokens is at least 1"),
        (("--temperature", "-1"), "--temperature is a number >= 0"),
    ],
)
def test_bad_settings_are_usage_errors(args, message):
    done = chat(*args, turns="")
    assert done.returncode == 2
    assert message in done.stderr


def test_a_base_model_without_a_template_is_refused(tmp_path):
    directory = write_tiny(tmp_path / "tiny")
    config = directory / "tokenizer_config.json"
    config.write_text(config.read_text().replace('"chat_template"', '"unused"'))
    done = chat("--checkpoint", str(directory), turns="Hi\n")
    assert done.returncode == 1
    assert "has no chat template" in done.stderr
