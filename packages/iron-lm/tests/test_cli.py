"""The command line, as a user runs it: ``python -m iron.lm generate ...``.

Each case is a fresh interpreter on the emulated NPU with poison on. Text
goes to stdout as it streams; the notice, the summary and errors to stderr,
never with a traceback.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from lm_support import write_tiny

from iron.lm import tiny
from iron.lm.cli import main

SUMMARY = re.compile(
    r"(\d+) prompt tokens, first token in \d+ ms, (\d+) new tokens at "
    r"[\d.]+ tokens/s \((device|host) loop\) on emu (npu1|npu2)"
)


def environment(**extra: str) -> dict[str, str]:
    env = {**os.environ, "IRON_BACKEND": "emu", "IRON_EMU_POISON": "1", **extra}
    env.pop("IRON_DEVICE", None)
    return env


def run(
    *args: str, command: str = "generate", **env: str
) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "iron.lm", *([command] if command else []), *args],
        capture_output=True,
        text=True,
        env=environment(**env),
        timeout=120,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def words(text: str) -> str:
    """``text`` with every run of whitespace one space (undoes the wrapping)."""
    return " ".join(text.split())


def test_the_embedded_default_streams_and_summarizes() -> None:
    done = run("--prompt", "The NPU runs", "--max-new-tokens", "8")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("The NPU runs")
    assert len(done.stdout) > len("The NPU runs\n")  # the generated text
    assert words(done.stderr).startswith(tiny.NOTICE)
    summary = SUMMARY.search(done.stderr)
    assert summary, done.stderr
    assert int(summary[1]) >= 3 and int(summary[2]) <= 8
    assert summary.group(3, 4) == ("device", "npu2")


def test_weights_q4_quantizes_the_embedded_model_while_loading() -> None:
    """The issue's case: `--weights q4` runs through `iron-lm generate`."""
    done = run("--prompt", "The NPU runs", "--max-new-tokens", "8", "--weights", "q4")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("The NPU runs")
    summary = SUMMARY.search(done.stderr)
    assert summary, done.stderr
    assert summary.group(3, 4) == ("device", "npu2")


def test_the_demo_explains_its_speed_its_check_and_what_next() -> None:
    """What ``nox -s demo`` runs: the speed is the emulator's, an NPU's is
    modelled, the tokens are checked against the host reference, and the
    last lines say what to do next. Every line fits 80 columns."""
    done = run("--max-new-tokens", "6", "--check")
    assert done.returncode == 0, done.stderr
    said = words(done.stderr)
    assert "emulated on this CPU (numpy), not NPU speed" in said
    modelled = re.search(
        r"an NPU2 would decode about ([\d,]+) tokens/s \(modelled", said
    )
    assert modelled and int(modelled[1].replace(",", "")) > 0, said
    assert "checked: the 6 tokens equal the host reference's" in said
    assert said.split("next: ")[1].count("--checkpoint DIR") == 1
    assert "--help" in said.split("next: ")[1]
    lines = done.stderr.splitlines()
    summary = next(i for i, line in enumerate(lines) if SUMMARY.search(line))
    others = lines[:summary] + lines[summary + 1 :]  # the summary is one record
    assert all(len(line) <= 80 for line in others), others


def test_check_fails_when_the_tokens_differ(monkeypatch, capsys) -> None:
    """``--check`` is a real comparison: a reference that disagrees fails it."""
    from iron.lm.generate import Decoder

    def wrong(self, ids, count, *, seed=0):
        return [0] * count

    monkeypatch.setattr(Decoder, "reference_tokens", wrong)
    code = main(["generate", "--max-new-tokens", "4", "--check", "--temperature", "2"])
    assert code == 1
    assert "--check: token" in capsys.readouterr().err


def test_temperature_alone_samples_and_top_k_zero_is_off() -> None:
    greedy = run("--max-new-tokens", "12")
    hot = run("--max-new-tokens", "12", "--temperature", "2")
    off = run("--max-new-tokens", "12", "--temperature", "2", "--top-k", "0")
    for done in (greedy, hot, off):
        assert done.returncode == 0, done.stderr
    assert hot.stdout != greedy.stdout  # it sampled (top-k 1 would not)
    assert off.stdout == hot.stdout  # 0 is the default: off


def test_the_seed_changes_sampling_not_the_embedded_weights() -> None:
    first, second = (run("--max-new-tokens", "8", "--seed", s) for s in ("0", "5"))
    assert first.returncode == second.returncode == 0
    assert first.stdout == second.stdout  # greedy: the same model either way
    hot = [
        run("--max-new-tokens", "8", "--temperature", "2", "--seed", s) for s in "05"
    ]
    assert hot[0].stdout != hot[1].stdout


def test_top_p_samples_from_the_nucleus_alike_on_every_loop() -> None:
    args = ("--max-new-tokens", "8", "--temperature", "1.5", "--seed", "3")
    wide = run(*args)
    device = run(*args, "--top-p", "0.3")
    host = run(*args, "--top-p", "0.3", "--host-loop")
    npu1 = run(*args, "--top-p", "0.3", "--device", "npu1", "--check")
    for done in (wide, device, host, npu1):
        assert done.returncode == 0, done.stderr
    assert device.stdout == host.stdout == npu1.stdout
    assert device.stdout != wide.stdout  # the nucleus was read


def test_npu1_says_why_it_loops_from_the_host() -> None:
    done = run("--max-new-tokens", "3", "--device", "npu1")
    assert done.returncode == 0, done.stderr
    assert "the decode step loops from the host: npu1 runs one xclbin per step" in (
        words(done.stderr)
    )
    assert "loops from the host" not in run("--max-new-tokens", "3").stderr


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


def test_speculate_gives_the_same_text_and_counts_the_drafts() -> None:
    args = ("--prompt", "one two three one two three one two", "--max-new-tokens", "16")
    plain = run(*args, "--host-loop")
    fast = run(*args, "--speculate", "6")
    assert plain.returncode == fast.returncode == 0, fast.stderr
    assert fast.stdout == plain.stdout
    assert re.search(r"\(host loop, \d+ of \d+ drafted tokens kept\)", fast.stderr)
    over = run("--speculate", "16", "--rows", "16")
    assert over.returncode == 2
    assert "--speculate is at most 15 with --rows 16" in over.stderr


def test_min_p_and_the_penalty_flags_apply_on_the_host() -> None:
    args = ("--prompt", "The NPU", "--max-new-tokens", "16")
    plain = run(*args)
    neutral = run(*args, "--repeat-penalty", "1", "--min-p", "0", "--check")
    penalized = run(*args, "--repeat-penalty", "50", "--repeat-last-n", "8")
    mixed = run(*args, "--presence-penalty", "1.5", "--frequency-penalty", "0.5")
    for done in (plain, neutral, penalized, mixed):
        assert done.returncode == 0, done.stderr
    assert neutral.stdout == plain.stdout  # and the device loop, checked
    assert "(host loop)" not in neutral.stderr and "checked:" in neutral.stderr
    for done in (penalized, mixed):
        assert done.stdout != plain.stdout
        assert "(host loop) on emu npu2" in done.stderr


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
        (["--rows", "0"], "--rows is a positive number of prompt tokens per chunk"),
        (["--rows", "-3"], "--rows is a positive number of prompt tokens per chunk"),
        (["--context", "0"], "--context is a multiple of 16 above --rows (16)"),
        (["--context", "24"], "e.g. 32, 48, ...; got 24"),
        (["--context", "16"], "--context is a multiple of 16 above --rows (16)"),
        (
            ["--context", "8", "--rows", "8"],
            "--context is a multiple of 16 above --rows (8), e.g. 16",
        ),
        (["--top-k", "-1"], "--top-k is 0 (off) or 1..256, got -1"),
        (["--top-k", "300"], "--top-k is 0 (off) or 1..256, got 300"),
        (["--top-p", "0"], "--top-p is a number in (0, 1] (1 is off), got 0.0"),
        (["--top-p", "1.5"], "--top-p is a number in (0, 1] (1 is off), got 1.5"),
        (["--temperature", "-1"], "--temperature is a number >= 0"),
        (["--temperature", "2.5"], "--temperature is at most 2 (the server's bound"),
        (["--temperature", "nan"], "--temperature is a number >= 0"),
        (["--temperature", "1e-300"], "--temperature is 0 (greedy) or at least"),
        (["--top-p", "1e-300"], "--top-p is a number in (0, 1] (1 is off), got 1e-300"),
        (["--seed", "-1"], "--seed is an integer in 0..536870912, got -1"),
        (["--seed", "3000000000"], "--seed is an integer in 0..536870912"),
        (["--prompt", "caf\udce9"], "--prompt is not valid UTF-8 text (byte e9"),
        (["--device", "npu9"], "invalid choice"),
        (["--weights", "q5"], "argument --weights: invalid choice: 'q5'"),
        (["--speculate", "-2"], "--speculate is 0 (off) or more, got -2"),
        (["--min-p", "1.5"], "--min-p is a number in [0, 1] (the server's bound"),
        (
            ["--repeat-penalty", "0"],
            "--repeat-penalty is a number > 0 (the server's bound too), got 0.0",
        ),
        (["--repeat-last-n", "-2"], "--repeat-last-n is an integer >= -1"),
        (["--presence-penalty", "3"], "--presence-penalty is a number in [-2, 2]"),
        (["--frequency-penalty", "-2.5"], "--frequency-penalty is a number in [-2"),
        (["--min-p", "0.1", "--check"], "neither --speculate nor --check"),
        (["--repeat-penalty", "1.2", "--speculate", "2"], "neither --speculate"),
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


def test_a_context_the_rule_allows_runs() -> None:
    """The smallest context above --rows 8 (16) holds a prompt and a token."""
    done = run(
        "--context", "16", "--rows", "8", "--max-new-tokens", "2", "--prompt", "a"
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("args", "chunk"),
    [(["--rows", "12"], 8), (["--rows", "40", "--device", "npu1"], 16)],
)
def test_rows_is_a_knob_not_a_refusal(args, chunk) -> None:
    """--rows 12 and 40 (refused before issue 17) run, as chunks of 8 and 16."""
    done = run(*args, "--max-new-tokens", "2", "--prompt", "word " * 20, "-v")
    assert done.returncode == 0, done.stderr
    assert f"runs as {chunk} rows" in done.stderr


def test_usage_errors_come_before_anything_is_echoed() -> None:
    """Out-of-range values are refused before the prompt is shown or a model
    loads (``--seed -1`` used to reseed the embedded weights and crash)."""
    for args in (["--seed", "-1"], ["--seed", "2147483647"], ["--rows", "0"]):
        done = run(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stdout == "", args
        assert tiny.NOTICE not in words(done.stderr)


@pytest.mark.parametrize("command", ["generate", "chat", "serve"])
def test_every_option_shows_its_default_and_a_help_line(command) -> None:
    from iron.lm.cli import _parser

    parser = _parser()
    (commands,) = [a for a in parser._actions if a.dest == "command"]
    for action in commands.choices[command]._actions:
        if action.dest == "help":
            continue
        assert action.help, action.dest
        assert "(default: " in action.help, (command, action.dest)


def test_generate_help_shows_them() -> None:
    from iron.lm.cli import _parser

    (commands,) = [a for a in _parser()._actions if a.dest == "command"]
    generate = commands.choices["generate"]
    shown = run("--help")
    assert shown.returncode == 0
    assert words(shown.stdout).count("(default: ") == len(generate._actions) - 1


def test_version_and_the_bare_command() -> None:
    version = run("--version", command="")
    assert version.returncode == 0
    assert re.fullmatch(
        r"iron-lm \S+ \(iron-core \S+, iron-operators \S+, iron-runtime \S+\)\n",
        version.stdout,
    ), version.stdout
    bare = run(command="")
    assert bare.returncode == 0
    assert bare.stdout.startswith("usage: iron-lm") and "generate" in bare.stdout


def test_examples_llama_takes_the_checkpoint_option_its_notice_names() -> None:
    """The notice says "no --checkpoint given"; examples/llama.py takes one."""
    assert "no --checkpoint given" in tiny.NOTICE
    example = Path(__file__).parents[3] / "examples" / "llama.py"
    if not example.is_file():
        pytest.skip("examples/ is not beside this package (an sdist)")
    done = subprocess.run(
        [sys.executable, str(example), "--help"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "--checkpoint DIR" in done.stdout


# -- never a traceback (issue: careless use) ------------------------------------


def test_a_chat_template_that_raises_is_an_error_message(tmp_path) -> None:
    directory = write_tiny(tmp_path / "ck")
    config = directory / "tokenizer_config.json"
    settings = json.loads(config.read_text())
    settings["chat_template"] = "{{ messages[0]['content'] | int / 0 }}"
    config.write_text(json.dumps(settings))
    done = run("--checkpoint", str(directory), "--chat", "--prompt", "hi")
    assert done.returncode == 1, done.stderr
    assert "the chat template failed while rendering: ZeroDivisionError" in done.stderr
    assert done.stdout == ""


def test_a_missing_xrt_is_an_error_message() -> None:
    done = run("--max-new-tokens", "2", IRON_BACKEND="xrt")
    assert done.returncode == 1, done.stderr
    assert "iron-lm: error: the xrt backend cannot run npu2" in done.stderr
    assert "IRON_BACKEND=emu" in done.stderr


def test_output_piped_into_head_ends_quietly() -> None:
    env = environment()
    done = subprocess.run(
        [
            "bash",
            "-c",
            f"{sys.executable} -m iron.lm generate --max-new-tokens 48 | head -c 3; "
            "status=${PIPESTATUS[0]}; echo; echo status=$status",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
    assert done.stdout.startswith("The\n")
    assert "status=141" in done.stdout, done.stdout


@pytest.mark.parametrize("phase", ["import", "load", "compile", "generate"])
def test_ctrl_c_in_any_phase_exits_130_quietly(phase, monkeypatch, capsys) -> None:
    """Ctrl-C (KeyboardInterrupt) while importing, loading, compiling or
    generating: one line and exit code 130."""
    from iron.lm.generate import Decoder

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    if phase == "import":

        class Interrupting:
            def find_spec(self, name, path=None, target=None):
                if name == "iron.lm.generate":
                    raise KeyboardInterrupt
                return None

        monkeypatch.delitem(sys.modules, "iron.lm.generate")
        monkeypatch.setattr(sys, "meta_path", [Interrupting(), *sys.meta_path])
    elif phase == "load":
        monkeypatch.setattr(Decoder, "from_pretrained", interrupt)
    elif phase == "compile":
        monkeypatch.setattr(Decoder, "compile", interrupt)
    else:
        monkeypatch.setattr(Decoder, "_record", interrupt)
    assert main(["generate", "--max-new-tokens", "3"]) == 130
    assert "iron-lm: error: interrupted" in capsys.readouterr().err


def _swallowing(real):
    """``real`` after a Ctrl-C that a library swallows (numpy.random's init can)."""

    def swallowing(*args, **kwargs):
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass
        return real(*args, **kwargs)

    return swallowing


def test_a_ctrl_c_a_library_swallows_while_loading_still_exits_130(
    monkeypatch, capsys
) -> None:
    from iron.lm.generate import Decoder

    monkeypatch.setattr(Decoder, "compile", _swallowing(Decoder.compile))
    monkeypatch.setattr(Decoder, "generate", lambda *a, **k: pytest.fail("generated"))
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert main(["generate", "--max-new-tokens", "3"]) == 130
    out, err = capsys.readouterr()
    assert "iron-lm: error: interrupted" in err and "Traceback" not in err
    # the command gives SIGINT back as it found it
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_a_library_swallows_mid_stream_stops_the_stream(
    monkeypatch, capsys
) -> None:
    from iron.lm.generate import Decoder

    seen = []
    record = Decoder._record

    def second_swallows(self, *args, **kwargs):
        seen.append(1)
        if len(seen) == 2:
            return _swallowing(record)(self, *args, **kwargs)
        return record(self, *args, **kwargs)

    monkeypatch.setattr(Decoder, "_record", second_swallows)
    assert main(["generate", "--max-new-tokens", "50"]) == 130
    assert "iron-lm: error: interrupted" in capsys.readouterr().err
    assert len(seen) < 50


def test_chat_exits_130_for_a_ctrl_c_swallowed_while_loading(
    monkeypatch, capsys
) -> None:
    from iron.lm.generate import Decoder

    monkeypatch.setattr(Decoder, "compile", _swallowing(Decoder.compile))
    monkeypatch.setattr(sys, "stdin", io.StringIO("hello\n"))
    assert main(["chat", "--max-new-tokens", "3"]) == 130
    assert "iron-lm: error: interrupted" in capsys.readouterr().err


def test_a_real_sigint_while_loading_exits_130_quietly() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "iron.lm", "generate", "--max-new-tokens", "200"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
    )
    process.stderr.readline()  # the notice: the model is being written and loaded
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "iron-lm: error: interrupted" in err


def test_an_unforeseen_error_is_one_line(monkeypatch, capsys) -> None:
    from iron.lm.generate import Decoder

    def broken(*args, **kwargs):
        raise KeyError("surprise")

    monkeypatch.setattr(Decoder, "compile", broken)
    assert main(["generate", "--max-new-tokens", "2"]) == 70
    err = capsys.readouterr().err
    assert "iron-lm: error: unexpected KeyError: 'surprise'" in err
    assert "Traceback" not in err


def test_a_missing_optional_package_is_an_error_message(monkeypatch, capsys) -> None:
    """A GGUF file without the ``gguf`` package: the ImportError's message, exit 1."""
    from iron.lm.generate import Decoder

    def missing(*args, **kwargs):
        raise ImportError("reading GGUF files needs gguf: pip install 'iron-lm[gguf]'")

    monkeypatch.setattr(Decoder, "from_pretrained", missing)
    assert main(["generate", "--checkpoint", "model.gguf"]) == 1
    err = capsys.readouterr().err
    assert "iron-lm: error: reading GGUF files needs gguf" in err
    assert "Traceback" not in err


def test_a_killed_runs_temporary_model_is_removed_at_the_next_start(tmp_path):
    import os
    import subprocess
    import sys

    from iron.lm.options import TINY_PREFIX, clean_stale_scratch

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale = tmp_path / f"{TINY_PREFIX}{gone.pid}-abc"
    (stale / "tiny").mkdir(parents=True)
    live = tmp_path / f"{TINY_PREFIX}{os.getppid()}-def"  # a process still running
    live.mkdir()
    mine = tmp_path / f"{TINY_PREFIX}{os.getpid()}-ghi"
    mine.mkdir()
    other = tmp_path / "iron-tinyish"
    other.mkdir()
    assert clean_stale_scratch(tmp_path) == [stale]
    assert not stale.exists() and live.exists() and mine.exists() and other.exists()


def test_verbose_is_a_summary_and_vv_the_full_plans() -> None:
    """-v printed about 250 lines with "per-call words: 97 of 32 scratchpad
    words" (issue 35): now two lines per compiled version; -vv every choice."""
    args = ("--max-new-tokens", "2", "--device", "npu1")
    one = run(*args, "-v")
    assert one.returncode == 0, one.stderr
    versions = [
        line for line in one.stderr.splitlines() if " on npu1, version " in line
    ]
    assert len(versions) == 2, one.stderr  # decode and prompt
    assert len(one.stderr.splitlines()) < 30, one.stderr
    assert "an image can read" in one.stderr
    assert "scratchpad words" not in one.stderr and "packaging:" not in one.stderr
    two = run(*args, "-vv")
    assert two.returncode == 0, two.stderr
    assert two.stderr.count("packaging: one xclbin per step") == 2
    assert len(two.stderr.splitlines()) > 100
