"""The command line, as a user runs it: ``python -m iron.lm generate ...``.

Each case is a fresh interpreter on the emulated NPU with poison on. Text
goes to stdout as it streams; the notice, the summary and errors to stderr,
never with a traceback.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from lm_support import write_tiny

from iron.lm import tiny
from iron.lm.cli import main

SUMMARY = re.compile(
    r"(\d+) prompt tokens, first token in \d+ ms, (\d+) new tokens at "
    r"[\d.]+ tokens/s \((device|host) loop\) on emu (npu1|npu2)"
)


def run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "IRON_BACKEND": "emu", "IRON_EMU_POISON": "1"}
    env.pop("IRON_DEVICE", None)
    done = subprocess.run(
        [sys.executable, "-m", "iron.lm", "generate", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_the_embedded_default_streams_and_summarizes() -> None:
    done = run("--prompt", "The NPU runs", "--max-new-tokens", "8")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("The NPU runs")
    assert len(done.stdout) > len("The NPU runs\n")  # the generated text
    lines = done.stderr.strip().splitlines()
    assert tiny.NOTICE in lines[0] and "RANDOM" in lines[0]
    summary = SUMMARY.search(lines[-1])
    assert summary, lines[-1]
    assert int(summary[1]) >= 3 and int(summary[2]) <= 8
    assert summary.group(3, 4) == ("device", "npu2")


def test_sampling_is_seeded_and_the_host_loop_agrees() -> None:
    args = ("--max-new-tokens", "8", "--temperature", "0.8", "--top-k", "8")
    device = run(*args, "--seed", "3")
    host = run(*args, "--seed", "3", "--host-loop")
    npu1 = run(*args, "--seed", "3", "--device", "npu1")
    for done in (device, host, npu1):
        assert done.returncode == 0, done.stderr
    assert device.stdout == host.stdout == npu1.stdout
    assert "(host loop) on emu npu2" in host.stderr
    assert "(host loop) on emu npu1" in npu1.stderr


def test_chat_uses_the_template() -> None:
    plain = run("--prompt", "hello there", "--max-new-tokens", "4")
    chat = run("--prompt", "hello there", "--max-new-tokens", "4", "--chat")
    assert chat.returncode == 0, chat.stderr
    assert not chat.stdout.startswith("hello there")  # the template is not echoed
    prompt_tokens = [int(SUMMARY.search(d.stderr)[1]) for d in (plain, chat)]
    assert prompt_tokens[1] > prompt_tokens[0] + 4  # headers, eot, assistant turn


def test_a_checkpoint_directory(tmp_path) -> None:
    directory = write_tiny(tmp_path / "ck", "untied", seed=2)
    done = run("--checkpoint", str(directory), "--max-new-tokens", "3")
    assert done.returncode == 0, done.stderr
    assert tiny.NOTICE not in done.stderr
    assert SUMMARY.search(done.stderr)


def bad_checkpoints(tmp_path):
    no_config = write_tiny(tmp_path / "no-config")
    (no_config / "config.json").unlink()
    no_tokenizer = write_tiny(tmp_path / "no-tokenizer")
    (no_tokenizer / "tokenizer.json").unlink()
    mistral = write_tiny(tmp_path / "mistral")
    config = json.loads((mistral / "config.json").read_text())
    config["architectures"] = ["MistralForCausalLM"]
    (mistral / "config.json").write_text(json.dumps(config))
    return {
        "missing": (tmp_path / "nowhere", "does not exist"),
        "no config": (no_config, "no config.json"),
        "no tokenizer": (no_tokenizer, "no tokenizer.json"),
        "architecture": (mistral, "MistralForCausalLM"),
    }


def test_bad_checkpoints_exit_1_with_a_message(tmp_path) -> None:
    for case, (directory, message) in bad_checkpoints(tmp_path).items():
        done = run("--checkpoint", str(directory), "--max-new-tokens", "2")
        assert done.returncode == 1, (case, done.stderr)
        assert done.stdout == "", case
        assert done.stderr.startswith("iron-lm: error: "), case
        assert message in done.stderr, (case, done.stderr)


def test_a_prompt_longer_than_the_context_exits_1() -> None:
    done = run("--context", "32", "--rows", "16", "--prompt", "word " * 40)
    assert done.returncode == 1
    assert done.stdout == ""  # refused before any text
    assert "iron-lm: error: the prompt is" in done.stderr
    assert "context of 32 positions" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-new-tokens", "0"], "--max-new-tokens is at least 1"),
        (["--max-new-tokens", "many"], "invalid int value"),
        (["--rows", "0"], "--rows is at least 1"),
        (["--context", "0"], "--context is at least 1"),
        (["--top-k", "0"], "--top-k is at least 1"),
        (["--temperature", "-1"], "--temperature is a number >= 0"),
        (["--device", "npu9"], "invalid choice"),
    ],
)
def test_usage_errors_exit_2(args, message, capsys) -> None:
    """In process (no model is loaded before these are refused)."""
    try:
        code = main(["generate", *args])
    except SystemExit as exit:  # argparse's own refusals
        code = exit.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_bad_max_new_tokens_exits_2_from_the_shell() -> None:
    done = run("--max-new-tokens", "-3")
    assert done.returncode == 2
    assert "iron-lm: error: --max-new-tokens is at least 1" in done.stderr


def test_the_iron_lm_command_is_this_main() -> None:
    from importlib.metadata import entry_points

    (script,) = entry_points(group="console_scripts", name="iron-lm")
    assert script.load() is main
