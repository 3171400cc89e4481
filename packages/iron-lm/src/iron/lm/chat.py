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
import dataclasses
import sys
from typing import Any

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
)

__all__ = ["add_parser", "run"]

HELP = "/reset starts over, /exit leaves (or end of input: Ctrl-D)"


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add ``chat`` to ``commands`` (an ``add_subparsers()`` result)."""
    chat = commands.add_parser("chat", help="talk with the model in the terminal")
    chat.add_argument(
        "--system", default=None, help="a system message to start with (default: none)"
    )
    chat.add_argument(
        "--max-new-tokens",
        type=int,
        default=256,
        metavar="N",
        help="at most N tokens a reply (default: %(default)s)",
    )
    add_model_options(chat)
    return chat


def run(args: argparse.Namespace) -> int:
    """Run ``iron-lm chat``; returns the exit code."""
    try:
        if args.max_new_tokens < 1:
            raise UsageError(
                f"--max-new-tokens is at least 1, got {args.max_new_tokens}"
            )
        device = check_model_options(args)
    except ValueError as error:  # UsageError, or IRON_DEVICE names no device
        return fail(str(error), EXIT_USAGE)
    with open_decoder(args, device) as decoder:
        tokenizer = decoder.tokenizer
        if tokenizer is None or tokenizer.chat_template is None:
            return fail(
                f"{str(args.checkpoint)!r} has no chat template (tokenizer.json and "
                "tokenizer_config.json's 'chat_template'): chat needs an instruct "
                "model; use 'iron-lm generate' for a base model"
            )
        decoder.compile()
        return _converse(decoder, args)


def _converse(decoder: Any, args: argparse.Namespace) -> int:
    start = [{"role": "system", "content": args.system}] if args.system else []
    messages = list(start)
    CTRL_C.check()  # loading may have swallowed a Ctrl-C: exit as asked
    print(HELP, file=sys.stderr)
    while True:
        try:
            print("> ", end="", flush=True)
            line = sys.stdin.readline()
        except KeyboardInterrupt:
            CTRL_C.handled()
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
                **dataclasses.asdict(penalties_of(args)),
            )
        except ValueError as error:  # over the context, or the template refused
            messages.pop()
            print(f"iron-lm: {error}; /reset starts over", file=sys.stderr)
            continue
        try:
            for piece in stream:
                CTRL_C.check()
                print(piece, end="", flush=True)
        except KeyboardInterrupt:  # stop this reply, keep the conversation
            CTRL_C.handled()
            stream.close()
        print(flush=True)
        messages.append({"role": "assistant", "content": stream.text})
        print(decoder.stats.summary(), file=sys.stderr)
