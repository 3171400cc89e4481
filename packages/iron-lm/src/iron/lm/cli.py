"""``iron-lm`` / ``python -m iron.lm``: generate text from a Llama checkpoint.

``iron-lm generate --checkpoint DIR --prompt "..."`` streams the generated
text to the terminal, then a summary: prompt tokens, time to first token,
decode tokens/s, backend and device. With no ``--checkpoint`` it runs the
embedded tiny Llama (random weights, a small packaged tokenizer) and says so.
Bad input is an error message and exit code 2 (usage) or 1 (the model or
prompt), never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from iron.lm import chat
from iron.lm.serve import command as serve

__all__ = ["main"]

EXIT_USAGE = 2
EXIT_INPUT = 1
EXIT_INTERRUPTED = 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="iron-lm",
        description="Llama decoders on AMD Ryzen AI NPUs (or the emulated NPU).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("generate", help="stream text generated from a prompt")
    gen.add_argument("--checkpoint", type=Path, help="a Hugging Face Llama directory")
    gen.add_argument("--prompt", default="The NPU", help="the text to continue")
    gen.add_argument("--chat", action="store_true", help="apply the chat template")
    gen.add_argument("--max-new-tokens", type=int, default=32)
    gen.add_argument("--temperature", type=float, default=0.0, help="0 is greedy")
    gen.add_argument("--top-k", type=int, default=1)
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument(
        "--device",
        choices=("npu1", "npu2"),
        default=None,
        help="the device (default: IRON_DEVICE, else npu2)",
    )
    gen.add_argument(
        "--context",
        type=int,
        default=None,
        help="positions the KV cache holds (default: min(model's, 2048))",
    )
    gen.add_argument("--rows", type=int, default=16, help="tokens per prompt chunk")
    gen.add_argument(
        "--host-loop",
        action="store_true",
        help="loop the decode step from the host even where the device could",
    )
    gen.add_argument("-v", "--verbose", action="store_true", help="log what IRON does")
    chat.add_parser(commands)
    serve.add_parser(commands)
    return parser


def _fail(message: str, code: int = EXIT_INPUT) -> int:
    print(f"iron-lm: error: {message}", file=sys.stderr)
    return code


def _device(arg: str | None) -> str:
    import iron

    current = iron.get_current_device()
    return arg or (current.name if current else "npu2")


def generate(args: argparse.Namespace) -> int:
    """Run ``iron-lm generate``."""
    from iron.lm import tiny
    from iron.lm.checkpoint import CheckpointError
    from iron.lm.config import ConfigError
    from iron.lm.generate import Decoder
    from iron.lm.tokenizer import Tokenizer, TokenizerError

    if args.max_new_tokens < 1:
        return _fail(
            f"--max-new-tokens is at least 1, got {args.max_new_tokens}", EXIT_USAGE
        )
    if args.rows < 1:
        return _fail(f"--rows is at least 1, got {args.rows}", EXIT_USAGE)
    if args.context is not None and args.context < 1:
        return _fail(f"--context is at least 1, got {args.context}", EXIT_USAGE)
    if args.top_k < 1:
        return _fail(f"--top-k is at least 1, got {args.top_k}", EXIT_USAGE)
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        return _fail(
            f"--temperature is a number >= 0 (0 is greedy), got {args.temperature}",
            EXIT_USAGE,
        )
    try:
        device = _device(args.device)
    except ValueError as error:  # IRON_DEVICE names no device
        return _fail(str(error), EXIT_USAGE)
    directory = args.checkpoint
    scratch = None
    if directory is None:
        print(tiny.NOTICE, file=sys.stderr)
        scratch = tempfile.TemporaryDirectory(prefix="iron-tiny-")
        directory = tiny.write_checkpoint(Path(scratch.name), seed=args.seed)
    try:
        try:
            # The checkpoint first: its errors name the directory and config.
            decoder = Decoder.from_pretrained(
                directory,
                device=device,
                context=args.context or 2048,
                rows=args.rows,
                temperature=args.temperature,
                top_k=args.top_k,
                progress=sys.stderr.isatty(),
            )
            tokenizer = Tokenizer.from_directory(directory)
            # Compiled before any text is shown: a setting the device
            # refuses is an error, not a prompt echoed and then one.
            decoder.compile()
        except (
            CheckpointError,
            ConfigError,
            TokenizerError,
            FileNotFoundError,
            ValueError,
        ) as error:
            return _fail(str(error))
        text = args.prompt
        if args.chat:
            try:
                text = tokenizer.apply_chat_template(
                    [{"role": "user", "content": text}]
                )
            except ValueError as error:
                return _fail(str(error))
        ids = tokenizer.encode(text)
        try:
            stream = decoder.generate(
                ids,
                max_new_tokens=args.max_new_tokens,
                seed=args.seed,
                stop=tokenizer.eos_ids,
                device_loop=False if args.host_loop else None,
            )
            detok = tokenizer.detokenizer(skip_special_tokens=True)
            print(args.prompt if not args.chat else "", end="", flush=True)
            for token in stream:
                print(detok.push(token), end="", flush=True)
            print(detok.flush(), flush=True)
        except ValueError as error:
            return _fail(str(error))
        except KeyboardInterrupt:
            print(flush=True)
            return _fail("interrupted", EXIT_INTERRUPTED)
        print(decoder.stats.summary(), file=sys.stderr)
        return 0
    finally:
        if scratch is not None:
            scratch.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    """The command line's entry point; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(name)s: %(message)s",
    )
    if args.command == "generate":
        return generate(args)
    if args.command == "chat":
        return chat.run(args)
    if args.command == "serve":
        return serve.run(args)
    return _fail(f"unknown command {args.command}", EXIT_USAGE)  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
