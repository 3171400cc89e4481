"""``iron-lm serve``: its arguments and its run.

:func:`add_parser` adds the ``serve`` subcommand to the ``iron-lm`` parser;
:func:`run` loads and compiles the model, then serves it with uvicorn until
SIGTERM or Ctrl-C (in-flight requests finish, waiting ones are cancelled).
Starlette and uvicorn come with the ``serve`` extra and are imported only
here, when the command runs.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import math
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "run"]

logger = logging.getLogger("iron.lm.serve")

EXIT_USAGE = 2
EXIT_INPUT = 1
#: The environment variable --api-key defaults to (kept out of the process list).
API_KEY_VARIABLE = "IRON_LM_API_KEY"
#: Seconds in-flight requests get to finish after SIGTERM.
GRACE_S = 30


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add ``serve`` to ``commands`` (an ``add_subparsers()`` result)."""
    serve = commands.add_parser(
        "serve", help="serve the model over OpenAI's HTTP API (needs iron-lm[serve])"
    )
    serve.add_argument("--checkpoint", type=Path, help="a Hugging Face Llama directory")
    serve.add_argument("--host", default="127.0.0.1", help="default: the loopback only")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--api-key",
        default=os.environ.get(API_KEY_VARIABLE),
        help=f"require 'Authorization: Bearer KEY' (default: ${API_KEY_VARIABLE})",
    )
    serve.add_argument(
        "--model-name", default=None, help="the model id (default: the folder's name)"
    )
    serve.add_argument("--temperature", type=float, default=0.0, help="0 is greedy")
    serve.add_argument("--top-k", type=int, default=1)
    serve.add_argument(
        "--device", choices=("npu1", "npu2"), default=None, help="default: IRON_DEVICE"
    )
    serve.add_argument("--context", type=int, default=None, help="default 2048")
    serve.add_argument("--rows", type=int, default=16, help="tokens per prompt chunk")
    serve.add_argument(
        "--max-queue", type=int, default=64, help="requests that may wait; then 503"
    )
    serve.add_argument(
        "--max-body-bytes", type=int, default=1 << 20, help="largest body; then 413"
    )
    serve.add_argument("-v", "--verbose", action="store_true", help="log each request")
    return serve


def _fail(message: str, code: int = EXIT_INPUT) -> int:
    print(f"iron-lm: error: {message}", file=sys.stderr)
    return code


def _usage_error(args: argparse.Namespace) -> str | None:
    if not 0 <= args.port <= 65535:
        return f"--port is in [0, 65535], got {args.port}"
    for name in ("rows", "top_k", "max_body_bytes"):
        if getattr(args, name) < 1:
            return (
                f"--{name.replace('_', '-')} is at least 1, got {getattr(args, name)}"
            )
    if args.max_queue < 0:
        return f"--max-queue is at least 0, got {args.max_queue}"
    if args.context is not None and args.context < 1:
        return f"--context is at least 1, got {args.context}"
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        return f"--temperature is a number >= 0 (0 is greedy), got {args.temperature}"
    if args.api_key is not None and not args.api_key:
        return "--api-key must not be empty"
    return None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    """Run ``iron-lm serve``; returns the exit code."""
    problem = _usage_error(args)
    if problem:
        return _fail(problem, EXIT_USAGE)
    try:
        import uvicorn

        from iron.lm.serve.app import create_app
    except ImportError as e:
        return _fail(
            f"iron-lm serve needs Starlette and uvicorn ({e}): "
            "pip install './packages/iron-lm[serve]'"
        )
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
    device = args.device or (current.name if current else "npu2")
    directory = args.checkpoint
    scratch = None
    if directory is None:
        print(tiny.NOTICE, file=sys.stderr)
        scratch = tempfile.TemporaryDirectory(prefix="iron-tiny-")
        directory = tiny.write_checkpoint(Path(scratch.name))
    name = args.model_name or (
        "iron-tiny" if args.checkpoint is None else Path(directory).resolve().name
    )
    try:
        try:
            decoder = Decoder.from_pretrained(
                directory,
                device=device,
                context=args.context or 2048,
                rows=args.rows,
                temperature=args.temperature,
                top_k=args.top_k,
                progress=sys.stderr.isatty(),
            )
            if decoder.tokenizer is None:
                return _fail(
                    f"{str(directory)!r} has no tokenizer.json; the server needs the "
                    "checkpoint's tokenizer"
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
        if not _loopback(args.host):
            logger.warning(
                "listening on %s, beyond this machine%s",
                args.host,
                ""
                if args.api_key
                else "; with no --api-key anyone who reaches it can use it",
            )
        app = create_app(
            decoder,
            model=name,
            temperature=args.temperature,
            top_k=args.top_k,
            api_key=args.api_key,
            max_queue=args.max_queue,
            max_body_bytes=args.max_body_bytes,
        )
        config = uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            log_level="info" if args.verbose else "warning",
            access_log=args.verbose,
            timeout_graceful_shutdown=GRACE_S,
        )
        server = uvicorn.Server(config)
        print(
            f"iron-lm: serving {name!r} on http://{args.host}:{args.port}/v1 "
            f"({decoder.device.name}, context {decoder.graph.context})",
            file=sys.stderr,
            flush=True,
        )
        # uvicorn shuts down gracefully on SIGINT/SIGTERM, then raises the
        # signal again for the handlers it found: these record it, so the
        # command returns (cleaning up) with 0 instead of dying by it.
        stopped_by: list[int] = []
        previous = {
            sig: signal.signal(sig, lambda number, frame: stopped_by.append(number))
            for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            server.run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if stopped_by:
            print("iron-lm: stopped", file=sys.stderr)
        return 0 if server.started else EXIT_INPUT
    finally:
        if scratch is not None:
            scratch.cleanup()
