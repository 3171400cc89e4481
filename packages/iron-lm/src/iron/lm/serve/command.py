"""``iron-lm serve``: its arguments and its run.

:func:`add_parser` adds the ``serve`` subcommand to the ``iron-lm`` parser;
:func:`run` loads and compiles the model, then serves it with uvicorn until
SIGTERM or Ctrl-C (in-flight requests finish, waiting ones are cancelled).
Starlette and uvicorn come with the ``serve`` extra and are imported only
here, when the command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import logging
import os
import signal
import sys
from typing import Any

from iron.lm.options import (
    EXIT_INPUT,
    EXIT_USAGE,
    UsageError,
    add_model_options,
    byte_size,
    check_model_options,
    fail,
    open_decoder,
    penalties_of,
)

#: The most slots ``--slots`` takes (``iron.lm.model.MAX_SLOTS``; the model
#: module is heavy, and parsing arguments imports nothing of it).
MAX_SLOTS = 8

__all__ = ["add_parser", "run"]

logger = logging.getLogger("iron.lm.serve")

#: The environment variable --api-key defaults to (kept out of the process list).
API_KEY_VARIABLE = "IRON_LM_API_KEY"
#: Seconds in-flight requests get to finish after SIGTERM.
GRACE_S = 30
#: Seconds a connection may stay idle between requests.
KEEP_ALIVE_S = 5
#: The most bytes a request's line and headers may take (else 400).
MAX_HEAD_BYTES = 16 * 1024


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add ``serve`` to ``commands`` (an ``add_subparsers()`` result)."""
    serve = commands.add_parser(
        "serve", help="serve the model over OpenAI's HTTP API (needs iron-lm[serve])"
    )
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default: %(default)s, the loopback only)",
    )
    serve.add_argument(
        "--port", type=int, default=8000, help="the port (default: %(default)s)"
    )
    serve.add_argument(
        "--api-key",
        default=os.environ.get(API_KEY_VARIABLE),
        help=f"require 'Authorization: Bearer KEY' (default: ${API_KEY_VARIABLE}, "
        "else none)",
    )
    serve.add_argument(
        "--model-name", default=None, help="the model id (default: the folder's name)"
    )
    add_model_options(serve, seed=False)  # a request brings its own seed
    serve.add_argument(
        "--max-queue",
        type=int,
        default=64,
        metavar="N",
        help="requests that may wait; more get 503 (default: %(default)s)",
    )
    serve.add_argument(
        "--max-body-bytes",
        type=int,
        default=1 << 20,
        metavar="N",
        help="the largest request body; larger gets 413 (default: %(default)s)",
    )
    serve.add_argument(
        "--allowed-hosts",
        nargs="+",
        default=None,
        metavar="HOST",
        help="the Host header names answered, with any port; '*' is any (default: "
        "the loopback's names on a loopback --host, else any)",
    )
    serve.add_argument(
        "--speculate",
        type=int,
        default=0,
        metavar="K",
        help="speculative decoding by prompt lookup for requests that do not "
        "say ('speculate' in the body): up to K drafted tokens verified per "
        "pass, the same text, faster where answers repeat their prompt; at most "
        "--rows - 1 (default: 0, off)",
    )
    serve.add_argument(
        "--slots",
        type=int,
        default=4,
        metavar="N",
        help="requests decoded together, each with its own KV cache in device "
        "memory, 1 to 8 (default: %(default)s)",
    )
    serve.add_argument(
        "--kv-budget",
        type=byte_size,
        default=None,
        metavar="SIZE",
        help="device memory the slots' KV caches may take, such as 512M: fewer "
        "slots than --slots if they do not fit (default: no limit but --slots)",
    )
    serve.add_argument(
        "--cors-origins",
        nargs="+",
        default=[],
        metavar="ORIGIN",
        help="origins whose web pages may call the server, e.g. "
        "http://localhost:3000 (default: none)",
    )
    return serve


def _check_server_options(args: argparse.Namespace) -> None:
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port is in [0, 65535], got {args.port}")
    if args.max_body_bytes < 1:
        raise UsageError(f"--max-body-bytes is at least 1, got {args.max_body_bytes}")
    if args.max_queue < 0:
        raise UsageError(f"--max-queue is at least 0, got {args.max_queue}")
    if not 1 <= args.slots <= MAX_SLOTS:
        raise UsageError(f"--slots is in [1, {MAX_SLOTS}], got {args.slots}")
    if args.rows >= 1 and not 0 <= args.speculate < args.rows:
        raise UsageError(
            f"--speculate is in [0, {args.rows - 1}] with --rows {args.rows} (a "
            f"chunk verifies the drafts and the token before them), got "
            f"{args.speculate}"
        )
    if args.api_key is not None and not args.api_key:
        raise UsageError("--api-key must not be empty")
    if args.api_key is not None and not all(" " < c <= "~" for c in args.api_key):
        bad = next(c for c in args.api_key if not " " < c <= "~")
        raise UsageError(
            f"--api-key holds {bad!r}, which an HTTP header cannot carry as "
            "itself: no client could ever send the key; use printable ASCII "
            "without spaces"
        )


def allowed_hosts(host: str, given: list[str] | None) -> tuple[str, ...]:
    """The Host names answered: ``given``, else the loopback's on a loopback
    bind (with ``host`` itself), else any (``"*"``)."""
    from iron.lm.serve.app import LOOPBACK_HOSTS

    if given:
        return tuple(given)
    if _loopback(host):
        bracketed = f"[{host}]" if ":" in host else host
        return tuple(dict.fromkeys((*LOOPBACK_HOSTS, bracketed)))
    return ("*",)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    """Run ``iron-lm serve``; returns the exit code."""
    try:
        _check_server_options(args)
        device = check_model_options(args)
    except ValueError as error:  # UsageError, or IRON_DEVICE names no device
        return fail(str(error), EXIT_USAGE)
    try:
        import uvicorn

        from iron.lm.serve._http import HeaderTimeoutProtocol
        from iron.lm.serve.app import create_app
    except ImportError as e:
        return fail(
            f"iron-lm serve needs Starlette, uvicorn and prometheus-client ({e}): "
            "pip install './packages/iron-lm[serve]'"
        )
    try:
        opened = open_decoder(args, device)
        decoder = opened.__enter__()
    except UsageError as error:  # a budget that holds no slot
        return fail(str(error), EXIT_USAGE)
    with contextlib.ExitStack() as stack:
        stack.push(opened)
        if decoder.tokenizer is None:
            return fail(
                f"{str(args.checkpoint)!r} has no tokenizer.json; the server needs "
                "the checkpoint's tokenizer"
            )
        decoder.compile()
        from iron.lm.engine import slot_bytes

        one = slot_bytes(decoder.config, decoder.graph.context)
        logger.info(
            "%d slots of %d positions: %d bytes of KV caches (%d a slot) beside "
            "%d bytes of weights",
            decoder.graph.slots,
            decoder.graph.context,
            one * decoder.graph.slots,
            one,
            decoder.weight_bytes,
        )
        name = args.model_name or (
            "iron-tiny" if args.checkpoint is None else args.checkpoint.resolve().name
        )
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
            top_k=args.top_k or None,
            top_p=args.top_p,
            api_key=args.api_key,
            max_queue=args.max_queue,
            max_body_bytes=args.max_body_bytes,
            allowed_hosts=allowed_hosts(args.host, args.allowed_hosts),
            cors_origins=args.cors_origins,
            speculate=args.speculate,
            penalties=penalties_of(args),
        )
        config = uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            log_level="info" if args.verbose else "warning",
            access_log=args.verbose,
            timeout_graceful_shutdown=GRACE_S,
            # bounds on a connection: idle between requests, a request's
            # head (HeaderTimeoutProtocol) and its size (h11's limit)
            http=HeaderTimeoutProtocol,
            timeout_keep_alive=KEEP_ALIVE_S,
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        )
        server = uvicorn.Server(config)
        print(
            f"iron-lm: serving {name!r} on http://{args.host}:{args.port}/v1 "
            f"({decoder.device.name}, context {decoder.graph.context}); "
            f"its chat page: http://{args.host}:{args.port}/",
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
