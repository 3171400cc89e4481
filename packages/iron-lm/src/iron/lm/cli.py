"""``iron-lm`` / ``python -m iron.lm``: generate text from a Llama checkpoint.

``iron-lm generate --checkpoint DIR --prompt "..."`` streams the generated
text to the terminal, then a summary: prompt tokens, time to first token,
decode tokens/s, backend and device, whether that speed is an NPU's or the
emulator's on this CPU, and what the cost model says an NPU would do. With
no ``--checkpoint`` it runs the embedded tiny Llama (random weights, a small
packaged tokenizer) and says so. ``--check`` replays the tokens through the
host reference. ``iron-lm`` alone prints the help.

Bad input is an error message and exit code 2 (usage) or 1 (the model, the
prompt or the machine), never a traceback: Ctrl-C exits 130 and a closed
output pipe 141, whatever phase they interrupt. An error IRON did not
foresee is one line too (``-v`` shows its traceback).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import shutil
import sys
import tempfile
import textwrap
import traceback
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]

EXIT_USAGE = 2
EXIT_INPUT = 1
EXIT_INTERRUPTED = 130
#: A closed stdout (``iron-lm generate | head``), as a process SIGPIPE ends.
EXIT_PIPE = 141
#: An error IRON did not foresee (sysexits' EX_SOFTWARE).
EXIT_INTERNAL = 70

#: Seeds the CLI takes: a device word holds 30 bits and the draw at position
#: ``p`` uses ``seed + p``, so half of that range is left for positions.
SEED_LIMIT = 2**29
#: Prompt rows come in multiples of this: twice the 4 rows of the bf16
#: matrix unit (mmul) on both devices, as GEMM requires.
ROW_MULTIPLE = 8
#: The context when --context is not given (at most the model's own).
DEFAULT_CONTEXT = 2048


class UsageError(ValueError):
    """A command-line value is refused before anything is loaded."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="iron-lm",
        description="Llama decoders on AMD Ryzen AI NPUs (or the emulated NPU).",
        epilog="Run 'iron-lm generate --help' for the options of a command.",
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
        "--checkpoint",
        type=Path,
        metavar="DIR",
        help="a Hugging Face Llama directory (default: the embedded tiny Llama, "
        "random weights)",
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
    gen.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        metavar="T",
        help="sampling temperature; 0 is greedy, any T > 0 samples "
        "(default: %(default)s)",
    )
    gen.add_argument(
        "--top-k",
        type=int,
        default=0,
        metavar="K",
        help="sample from the K largest logits; 0 is off, which on the device "
        "means its sampler's limit of the 256 largest (default: %(default)s)",
    )
    gen.add_argument(
        "--seed",
        type=int,
        default=0,
        help=f"the sampling seed, 0..{SEED_LIMIT} (the embedded model's weights "
        "do not depend on it) (default: %(default)s)",
    )
    gen.add_argument(
        "--device",
        choices=("npu1", "npu2"),
        default=None,
        help="npu1 (XDNA: Phoenix, Hawk Point) or npu2 (XDNA2: Strix, Krackan) "
        "(default: IRON_DEVICE, else npu2)",
    )
    gen.add_argument(
        "--context",
        type=int,
        default=None,
        metavar="N",
        help="positions the KV cache holds: a multiple of 16 above --rows "
        f"(default: the model's own, at most {DEFAULT_CONTEXT})",
    )
    gen.add_argument(
        "--rows",
        type=int,
        default=16,
        metavar="N",
        help="prompt tokens run at once: 8 or 16 (default: %(default)s)",
    )
    gen.add_argument(
        "--host-loop",
        action="store_true",
        help="loop the decode step from the host even where the device could "
        "(default: off)",
    )
    gen.add_argument(
        "--check",
        action="store_true",
        help="afterwards, replay the tokens through the host reference (each "
        "operator's numpy reference) and fail if any differs (default: off)",
    )
    gen.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log what IRON does (default: off)",
    )
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


def _fail(message: str, code: int = EXIT_INPUT) -> int:
    print(f"iron-lm: error: {message}", file=sys.stderr)
    return code


def _wrapped(text: str, indent: str = "") -> str:
    """``text`` filled to the terminal's width (80 columns when not a terminal),
    its first line indented by ``indent`` and the rest by two more spaces."""
    width = min(shutil.get_terminal_size((80, 24)).columns, 100)
    return textwrap.fill(
        text,
        width=max(width, 40),
        initial_indent=indent,
        subsequent_indent=indent + "  " if indent else "",
    )


def _check_args(args: argparse.Namespace) -> None:
    """Refuse values no device takes, in the flags' own terms."""
    if args.max_new_tokens < 1:
        raise UsageError(f"--max-new-tokens is at least 1, got {args.max_new_tokens}")
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise UsageError(
            f"--temperature is a number >= 0 (0 is greedy), got {args.temperature}"
        )
    if not 0 <= args.seed <= SEED_LIMIT:
        raise UsageError(
            f"--seed is an integer in 0..{SEED_LIMIT}, got {args.seed} (the device "
            f"adds the position to it in a 30-bit word)"
        )
    try:
        args.prompt.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = args.prompt[error.start].encode("utf-8", "surrogateescape")
        raise UsageError(
            f"--prompt is not valid UTF-8 text (byte {bad.hex()} at character "
            f"{error.start}); pass the prompt in UTF-8"
        ) from None


def _check_limits(args: argparse.Namespace, device: str) -> None:
    """The settings a device's designs limit, checked before any loading."""
    from iron.core.device import as_device
    from iron.operators.attention import LANES
    from iron.operators.sample import MAX_TOP_K

    dev = as_device(device)
    # The prompt version gathers its rows of the embedding with one shim
    # buffer descriptor each, from one shim tile, and its GEMMs take rows in
    # whole pairs of the bf16 matrix unit's 4 rows (both devices).
    allowed = list(range(ROW_MULTIPLE, dev.shim_bds + 1, ROW_MULTIPLE))
    if args.rows not in allowed:
        raise UsageError(
            f"--rows is {' or '.join(map(str, allowed))} on {device}, got "
            f"{args.rows} (the prompt's matmuls take rows in multiples of "
            f"{ROW_MULTIPLE}, and its embedding gather at most {dev.shim_bds}, one "
            f"per shim buffer descriptor); longer prompts run in several chunks"
        )
    if args.context is not None and (args.context % LANES or args.context <= args.rows):
        smallest = (args.rows // LANES + 1) * LANES
        raise UsageError(
            f"--context is a multiple of {LANES} above --rows ({args.rows}), e.g. "
            f"{smallest}, {smallest + LANES}, ...; got {args.context} (attention "
            f"streams the KV cache in {LANES}-position vectors, and a prompt chunk "
            f"needs --rows positions)"
        )
    if not 0 <= args.top_k <= MAX_TOP_K:
        raise UsageError(
            f"--top-k is 0 (off) or 1..{MAX_TOP_K}, got {args.top_k} (the "
            f"device's sampler keeps at most the {MAX_TOP_K} largest logits)"
        )


def _device(arg: str | None) -> str:
    import iron

    current = iron.get_current_device()
    return arg or (current.name if current else "npu2")


def generate(args: argparse.Namespace) -> int:
    """Run ``iron-lm generate``."""
    try:
        _check_args(args)
        device = _device(args.device)  # ValueError: IRON_DEVICE names no device
        _check_limits(args, device)
    except ValueError as error:
        return _fail(str(error), EXIT_USAGE)
    scratch = None
    if args.checkpoint is None:
        from iron.lm import tiny

        print(_wrapped(tiny.NOTICE), file=sys.stderr)
        scratch = tempfile.TemporaryDirectory(prefix="iron-tiny-")
        # The weights' seed is fixed: --seed changes sampling, never the model.
        directory = tiny.write_checkpoint(Path(scratch.name))
    else:
        directory = args.checkpoint
    try:
        return _generate(args, directory, device)
    finally:
        if scratch is not None:
            scratch.cleanup()


def _generate(args: argparse.Namespace, directory: Path, device: str) -> int:
    from iron.core.operator import RefusedShapeError
    from iron.lm.generate import Decoder
    from iron.lm.tokenizer import Tokenizer

    try:
        # The checkpoint first: its errors name the directory and config.
        decoder = Decoder.from_pretrained(
            directory,
            device=device,
            context=args.context or DEFAULT_CONTEXT,
            rows=args.rows,
            temperature=args.temperature,
            top_k=args.top_k or None,
            progress=sys.stderr.isatty(),
        )
        tokenizer = Tokenizer.from_directory(directory)
        text = args.prompt
        if args.chat:
            text = tokenizer.apply_chat_template([{"role": "user", "content": text}])
        ids = tokenizer.encode(text)
        # Compiled before any text is shown: a setting the device refuses
        # is an error, not a prompt echoed and then one.
        decoder.compile()
        stream = decoder.generate(
            ids,
            max_new_tokens=args.max_new_tokens,
            seed=args.seed,
            stop=tokenizer.eos_ids,
            device_loop=False if args.host_loop else None,
        )
    except RefusedShapeError as error:
        return _fail(
            f"{device} cannot run these settings (--context, --rows, --top-k, or "
            f"the model's shapes): {error}"
        )
    detok = tokenizer.detokenizer(skip_special_tokens=True)
    tokens = []
    print("" if args.chat else args.prompt, end="", flush=True)
    for token in stream:
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
            return _fail(
                f"--check: token {first} is {tokens[first]}, the host reference's "
                f"is {expected[first]} (tokens {tokens}, reference {expected})"
            )
        print(
            _wrapped(
                f"checked: the {len(tokens)} tokens equal the host reference's "
                f"(each operator's numpy reference, no device)",
                "  ",
            ),
            file=sys.stderr,
        )
    if args.checkpoint is None:
        print(
            _wrapped(
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
    lines.append(
        f"speed: {speed}; an {stats.device.upper()} would decode about "
        f"{1 / modelled:,.0f} tokens/s (modelled by IRON's cost model, not measured)"
    )
    return [_wrapped(line, "  ") for line in lines]


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
    try:
        return generate(args)
    except KeyboardInterrupt:
        print(flush=True, file=sys.stderr)
        return _fail("interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (``| head``): nothing more can be shown. Point
        # stdout at devnull so the interpreter's final flush is silent.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE
    except (ValueError, OSError, RuntimeError) as error:
        # IRON's own errors (checkpoint, config, tokenizer, prompt, backend,
        # files) subclass these builtins and name the thing and the fix.
        if args.verbose:
            traceback.print_exc()
        return _fail(str(error))
    except Exception as error:  # noqa: BLE001 - the promise: never a traceback
        if args.verbose:
            traceback.print_exc()
        return _fail(
            f"unexpected {type(error).__name__}: {error} (run with -v for the "
            f"traceback, and please report it)",
            EXIT_INTERNAL,
        )


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
