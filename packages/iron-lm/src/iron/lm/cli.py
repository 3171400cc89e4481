"""``iron-lm`` / ``python -m iron.lm``: generate, chat and serve from a Llama checkpoint.

``iron-lm generate --checkpoint DIR --prompt "..."`` streams the generated
text to the terminal, then a summary: prompt tokens, time to first token,
decode tokens/s, backend and device, whether that speed is an NPU's or the
emulator's on this CPU, and what the cost model says an NPU would do. With
no ``--checkpoint`` it runs the embedded tiny Llama (random weights, a small
packaged tokenizer) and says so. ``--check`` replays the tokens through the
host reference. ``iron-lm chat`` talks in the terminal and ``iron-lm serve``
serves OpenAI's HTTP API (:mod:`iron.lm.chat`, :mod:`iron.lm.serve`); the
three share their model options (:mod:`iron.lm.options`). ``iron-lm`` alone
prints the help.

Bad input is an error message and exit code 2 (usage) or 1 (the model, the
prompt or the machine), never a traceback: Ctrl-C exits 130 and a closed
output pipe 141, whatever phase they interrupt. An error IRON did not
foresee is one line too (``-v`` shows its traceback).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import traceback
from collections.abc import Sequence

from iron.lm import chat
from iron.lm._ctrl_c import CTRL_C
from iron.lm.options import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    UsageError,
    add_model_options,
    check_model_options,
    fail,
    open_decoder,
    penalties_of,
    wrapped,
)
from iron.lm.serve import command as serve

__all__ = ["main"]

#: A closed stdout (``iron-lm generate | head``), as a process SIGPIPE ends.
EXIT_PIPE = 141
#: An error IRON did not foresee (sysexits' EX_SOFTWARE).
EXIT_INTERNAL = 70


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="iron-lm",
        description="Llama decoders on AMD Ryzen AI NPUs (or the emulated NPU).",
        epilog="Run 'iron-lm COMMAND --help' for the options of a command.",
    )
    parser.add_argument(
        "--version", action="version", version=_versions(), help="print versions"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    gen = commands.add_parser(
        "generate",
        help="stream text generated from a prompt",
        description=(
            "Stream text generated from a prompt, then a summary. Without "
            "--checkpoint: the embedded tiny Llama (random weights, "
            "meaningless text) on the emulated NPU where no NPU is present."
        ),
    )
    gen.add_argument(
        "--prompt",
        default="The NPU",
        help="the text to continue (default: %(default)r)",
    )
    gen.add_argument(
        "--chat",
        action="store_true",
        help="wrap the prompt in the model's chat template as a user turn "
        "(default: off)",
    )
    gen.add_argument(
        "--max-new-tokens",
        type=int,
        default=32,
        metavar="N",
        help="generate at most N tokens (default: %(default)s)",
    )
    add_model_options(gen)
    gen.add_argument(
        "--host-loop",
        action="store_true",
        help="loop the decode step from the host even where the device could "
        "(default: off)",
    )
    gen.add_argument(
        "--speculate",
        type=int,
        default=0,
        metavar="K",
        help="speculative decoding by prompt lookup: draft up to K tokens from "
        "the text so far and verify them in one prompt chunk (at most the "
        "chunk's rows - 1); the text is the same as without, faster where it "
        "repeats itself; runs the loop from the host (default: 0, off)",
    )
    gen.add_argument(
        "--check",
        action="store_true",
        help="afterwards, replay the tokens through the host reference (each "
        "operator's numpy reference) and fail if any differs (default: off)",
    )
    chat.add_parser(commands)
    serve.add_parser(commands)
    return parser


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("iron-lm", "iron-core", "iron-operators", "iron-runtime"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return f"{found[0]} ({', '.join(found[1:])})"


def _check_prompt(args: argparse.Namespace) -> None:
    if args.max_new_tokens < 1:
        raise UsageError(f"--max-new-tokens is at least 1, got {args.max_new_tokens}")
    if args.speculate < 0:
        raise UsageError(f"--speculate is 0 (off) or more, got {args.speculate}")
    try:
        args.prompt.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = args.prompt[error.start].encode("utf-8", "surrogateescape")
        raise UsageError(
            f"--prompt is not valid UTF-8 text (byte {bad.hex()} at character "
            f"{error.start}); pass the prompt in UTF-8"
        ) from None


def generate(args: argparse.Namespace) -> int:
    """Run ``iron-lm generate``."""
    try:
        _check_prompt(args)
        device = check_model_options(args)
        if not penalties_of(args).neutral and (args.speculate or args.check):
            raise UsageError(
                "--min-p and the repetition penalties change the logits on the "
                "host before each draw, which neither --speculate nor --check "
                "(the host reference) does; leave them out, or those"
            )
    except ValueError as error:  # UsageError, or IRON_DEVICE names no device
        return fail(str(error), EXIT_USAGE)
    with open_decoder(args, device) as decoder:
        return _generate(args, decoder, device)


def _generate(args: argparse.Namespace, decoder, device: str) -> int:
    from iron.core.operator import RefusedShapeError
    from iron.lm.tokenizer import Tokenizer

    try:
        # No tokenizer.json: from_directory's error names what is missing.
        tokenizer = decoder.tokenizer or Tokenizer.from_directory(args.checkpoint)
        text = args.prompt
        if args.chat:
            text = tokenizer.apply_chat_template([{"role": "user", "content": text}])
        ids = tokenizer.encode(text)
        # Compiled before any text is shown: a setting the device refuses
        # is an error, not a prompt echoed and then one.
        decoder.compile()
        CTRL_C.check()  # loading may have swallowed a Ctrl-C: nothing shown yet
        if args.speculate > decoder.graph.rows - 1:
            return fail(
                f"--speculate is at most {decoder.graph.rows - 1} with --rows "
                f"{decoder.graph.rows} (a chunk verifies the drafts and the token "
                f"before them), got {args.speculate}",
                EXIT_USAGE,
            )
        stream = decoder.generate(
            ids,
            max_new_tokens=args.max_new_tokens,
            seed=args.seed,
            stop=tokenizer.eos_ids,
            device_loop=False if args.host_loop or args.speculate else None,
            speculate=args.speculate,
            **dataclasses.asdict(penalties_of(args)),
        )
    except RefusedShapeError as error:
        return fail(
            f"{device} cannot run these settings (--context, --rows, --top-k, or "
            f"the model's shapes): {error}"
        )
    detok = tokenizer.detokenizer(skip_special_tokens=True)
    tokens = []
    print("" if args.chat else args.prompt, end="", flush=True)
    for token in stream:
        CTRL_C.check()
        tokens.append(token)
        print(detok.push(token), end="", flush=True)
    print(detok.flush(), flush=True)
    print(decoder.stats.summary(), file=sys.stderr)
    for line in _explain(decoder, args):
        print(line, file=sys.stderr)
    if args.check:
        expected = decoder.reference_tokens(ids, len(tokens), seed=args.seed)
        if expected != tokens:
            first = next(i for i, (a, b) in enumerate(zip(tokens, expected)) if a != b)
            return fail(
                f"--check: token {first} is {tokens[first]}, the host reference's "
                f"is {expected[first]} (tokens {tokens}, reference {expected})"
            )
        print(
            wrapped(
                f"checked: the {len(tokens)} tokens equal the host reference's "
                f"(each operator's numpy reference, no device)",
                "  ",
            ),
            file=sys.stderr,
        )
    if args.checkpoint is None:
        print(
            wrapped(
                "next: a real model with --checkpoint DIR (a Hugging Face Llama "
                "folder; the guide's Models page lists some); every option with "
                "'iron-lm generate --help'; the guide in docs/ ('python3 -m nox "
                "-s docs' builds it into site/)"
            ),
            file=sys.stderr,
        )
    return 0


def _explain(decoder, args: argparse.Namespace) -> list[str]:
    """What the summary's speed is, and what the cost model says of an NPU."""
    from iron.core.cost import roofline

    stats = decoder.stats
    lines = []
    if stats.loop == "host" and not args.host_loop:
        lines.append(
            f"the decode step loops from the host: {stats.device} runs one xclbin "
            f"per step, and a device loop needs the whole version in one full ELF"
        )
    modelled = roofline(decoder.decode.recording, decoder.device).seconds
    speed = (
        "emulated on this CPU (numpy), not NPU speed"
        if stats.backend == "emu"
        else f"measured on this {stats.device}"
    )
    rate = 1 / modelled  # npu1 models below one token/s (a load per step)
    lines.append(
        f"speed: {speed}; an {stats.device.upper()} would decode about "
        f"{f'{rate:,.0f}' if rate >= 10 else f'{rate:.2g}'} tokens/s "
        f"(modelled by IRON's cost model, not measured)"
    )
    return [wrapped(line, "  ") for line in lines]


def main(argv: Sequence[str] | None = None) -> int:
    """The command line's entry point; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(name)s: %(message)s",
    )
    if args.verbose >= 2:  # -vv: IRON's full plans, not every library's debug
        logging.getLogger("iron").setLevel(logging.DEBUG)
    run = {"generate": generate, "chat": chat.run, "serve": serve.run}[args.command]
    try:
        with CTRL_C:
            code = run(args)
            CTRL_C.check()  # a press some library swallowed after the last check
            return code
    except KeyboardInterrupt:
        CTRL_C.handled()
        print(flush=True, file=sys.stderr)
        return fail("interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (``| head``): nothing more can be shown. Point
        # stdout at devnull so the interpreter's final flush is silent.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE
    except (ValueError, OSError, RuntimeError, ImportError) as error:
        # IRON's own errors (checkpoint, config, tokenizer, prompt, backend,
        # files, a missing optional package) subclass these builtins and name
        # the thing and the fix.
        if args.verbose:
            traceback.print_exc()
        return fail(str(error))
    except Exception as error:  # noqa: BLE001 - the promise: never a traceback
        if args.verbose:
            traceback.print_exc()
        return fail(
            f"unexpected {type(error).__name__}: {error} (run with -v for the "
            f"traceback, and please report it)",
            EXIT_INTERNAL,
        )


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
