"""``iron-lm chat``: a conversation with the model in the terminal.

Each line typed is a user turn; the reply streams back with the model's
chat template applied to the whole conversation. The KV cache keeps the
conversation so far (``reuse_cache``), so a turn prefills only what is new
since the last one. ``/reset`` starts over, ``/exit`` (or end of input)
leaves. After each reply a line on stderr says how many prompt tokens were
reused, the time to first token and the decode speed.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "run"]

EXIT_USAGE = 2
EXIT_INPUT = 1
EXIT_INTERRUPTED = 130
HELP = "/reset starts over, /exit leaves (or end of input: Ctrl-D)"


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add ``chat`` to ``commands`` (an ``add_subparsers()`` result)."""
    chat = commands.add_parser("chat", help="talk with the model in the terminal")
    chat.add_argument("--checkpoint", type=Path, help="a Hugging Face Llama directory")
    chat.add_argument("--system", default=None, help="a system message to start with")
    chat.add_argument("--max-new-tokens", type=int, default=256, help="per reply")
    chat.add_argument("--temperature", type=float, default=0.0, help="0 is greedy")
    chat.add_argument("--top-k", type=int, default=1)
    chat.add_argument("--seed", type=int, default=0)
    chat.add_argument(
        "--device", choices=("npu1", "npu2"), default=None, help="default: IRON_DEVICE"
    )
    chat.add_argument("--context", type=int, default=None, help="default 2048")
    chat.add_argument("--rows", type=int, default=16, help="tokens per prompt chunk")
    chat.add_argument("-v", "--verbose", action="store_true", help="log what IRON does")
    return chat


def _fail(message: str, code: int = EXIT_INPUT) -> int:
    print(f"iron-lm: error: {message}", file=sys.stderr)
    return code


def _usage_error(args: argparse.Namespace) -> str | None:
    for name in ("max_new_tokens", "rows", "top_k"):
        if getattr(args, name) < 1:
            return (
                f"--{name.replace('_', '-')} is at least 1, got {getattr(args, name)}"
            )
    if args.context is not None and args.context < 1:
        return f"--context is at least 1, got {args.context}"
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        return f"--temperature is a number >= 0 (0 is greedy), got {args.temperature}"
    return None


def run(args: argparse.Namespace) -> int:
    """Run ``iron-lm chat``; returns the exit code."""
    problem = _usage_error(args)
    if problem:
        return _fail(problem, EXIT_USAGE)
    import iron
    from iron.lm import tiny
    from iron.lm.checkpoint import CheckpointError
    from iron.lm.config import ConfigError
    from iron.lm.generate import Decoder
    from iron.lm.tokenizer import TokenizerError

    try:
        current = iron.get_current_device()
    except ValueError as error:  # IRON_DEVICE names no device
        return _fail(str(error), EXIT_USAGE)
    directory = args.checkpoint
    scratch = None
    if directory is None:
        print(tiny.NOTICE, file=sys.stderr)
        scratch = tempfile.TemporaryDirectory(prefix="iron-tiny-")
        directory = tiny.write_checkpoint(Path(scratch.name))
    try:
        try:
            decoder = Decoder.from_pretrained(
                directory,
                device=args.device or (current.name if current else "npu2"),
                context=args.context or 2048,
                rows=args.rows,
                temperature=args.temperature,
                top_k=args.top_k,
                progress=sys.stderr.isatty(),
            )
            tokenizer = decoder.tokenizer
            if tokenizer is None or tokenizer.chat_template is None:
                return _fail(
                    f"{str(directory)!r} has no chat template (tokenizer.json and "
                    "tokenizer_config.json's 'chat_template'): chat needs an instruct "
                    "model; use 'iron-lm generate' for a base model"
                )
            decoder.compile()
        except (
            CheckpointError,
            ConfigError,
            TokenizerError,
            FileNotFoundError,
            ValueError,
        ) as error:
            return _fail(str(error))
        return _converse(decoder, args)
    finally:
        if scratch is not None:
            scratch.cleanup()


def _converse(decoder: Any, args: argparse.Namespace) -> int:
    start = [{"role": "system", "content": args.system}] if args.system else []
    messages = list(start)
    print(HELP, file=sys.stderr)
    while True:
        try:
            print("> ", end="", flush=True)
            line = sys.stdin.readline()
        except KeyboardInterrupt:
            print(flush=True)
            return EXIT_INTERRUPTED
        if not line:  # end of input
            print(flush=True)
            return 0
        text = line.strip()
        if text in ("/exit", "/quit"):
            return 0
        if text == "/reset":
            messages = list(start)
            print("(a new conversation)", file=sys.stderr)
            continue
        if not text:
            continue
        messages.append({"role": "user", "content": text})
        try:
            stream = decoder.stream(
                decoder.tokenizer.apply_chat_template(messages),
                max_new_tokens=args.max_new_tokens,
                seed=args.seed,
                reuse_cache=True,
            )
        except ValueError as error:  # over the context, or the template refused
            messages.pop()
            print(f"iron-lm: {error}; /reset starts over", file=sys.stderr)
            continue
        try:
            for piece in stream:
                print(piece, end="", flush=True)
        except KeyboardInterrupt:  # stop this reply, keep the conversation
            stream.close()
        print(flush=True)
        messages.append({"role": "assistant", "content": stream.text})
        print(decoder.stats.summary(), file=sys.stderr)
