"""The model options every ``iron-lm`` command that loads a model shares.

``generate``, ``chat`` and ``serve`` take the same flags for the checkpoint,
the device, the KV cache's context, the prompt chunk's rows and the
sampling settings: :func:`add_model_options` adds them (each with its
default in its help), :func:`check_model_options` refuses the values no
device takes in the flags' own terms before anything is loaded, and
:func:`open_decoder` loads the checkpoint (the embedded tiny Llama, saying
its weights are random, when no ``--checkpoint`` is given).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import struct
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from iron.lm.generate import Decoder
    from iron.lm.penalties import Penalties

__all__ = [
    "DEFAULT_CONTEXT",
    "EXIT_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "MAX_TEMPERATURE",
    "ROW_MULTIPLE",
    "SEED_LIMIT",
    "TINY_PREFIX",
    "UsageError",
    "add_model_options",
    "check_model_options",
    "clean_stale_scratch",
    "fail",
    "float32_of",
    "open_decoder",
    "penalties_of",
    "wrapped",
]

#: Exit code of a refused input (the model, the prompt, the machine).
EXIT_INPUT = 1
#: Exit code of a usage error (a flag's value out of its range).
EXIT_USAGE = 2
#: Exit code after Ctrl-C.
EXIT_INTERRUPTED = 130

#: Seeds the commands take: a device word holds 30 bits and the draw at
#: position ``p`` uses ``seed + p``, so half of that range is left for positions.
SEED_LIMIT = 2**29


def float32_of(value: float) -> float:
    """``value`` as the device's float32 holds it (a tiny top_p is 0 there)."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


#: The highest sampling temperature the CLI and the server take (OpenAI's
#: bound); past it the draw is near uniform over the top-k.
MAX_TEMPERATURE = 2.0
#: Prompt rows come in multiples of this: twice the 4 rows of the bf16
#: matrix unit (mmul) on both devices, as GEMM requires (the graph's
#: iron.lm.sizes.chunk_rows rounds --rows to it).
ROW_MULTIPLE = 8
#: The context when --context is not given (at most the model's own).
DEFAULT_CONTEXT = 2048


class UsageError(ValueError):
    """A command-line value is refused before anything is loaded."""


def add_model_options(parser: argparse.ArgumentParser, *, seed: bool = True) -> None:
    """Add the checkpoint, device, context, rows and sampling flags to ``parser``.

    ``seed=False`` leaves out ``--seed`` (the server takes one per request).
    """
    parser.add_argument(
        "--checkpoint",
        type=Path,
        metavar="DIR",
        help="a Hugging Face Llama directory, or a GGUF file (or a directory "
        "holding one) (default: the embedded tiny Llama, random weights)",
    )
    parser.add_argument(
        "--weights",
        choices=("bf16", "q8", "q4"),
        default=None,
        help="how the device holds the weights: bf16, or a bf16 checkpoint "
        "quantized while loading to 8 or 4 bits (groups of 32); a GGUF file's "
        "quantized types are kept as they are, bf16 dequantizes them "
        "(default: the checkpoint's own)",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        metavar="T",
        help=f"sampling temperature in [0, {MAX_TEMPERATURE:g}]; 0 is greedy, "
        "any T > 0 samples (default: %(default)s)",
    )
    parser.add_argument(
        "--top-k",
        type=int,
        default=0,
        metavar="K",
        help="sample from the K largest logits; 0 is off, which on the device "
        "means its sampler's limit of the 256 largest (default: %(default)s)",
    )
    parser.add_argument(
        "--top-p",
        type=float,
        default=1.0,
        metavar="P",
        help="nucleus sampling: draw from the fewest largest logits whose "
        "probability reaches P, in (0, 1]; 1 is off (default: %(default)s)",
    )
    parser.add_argument(
        "--min-p",
        type=float,
        default=0.0,
        metavar="P",
        help="keep only tokens at least P times as likely as the likeliest, "
        "in [0, 1]; 0 is off (llama.cpp's min-p) (default: %(default)s)",
    )
    parser.add_argument(
        "--repeat-penalty",
        type=float,
        default=1.0,
        metavar="R",
        help="divide the logit of a token among the last --repeat-last-n "
        "(multiply it if negative) by R > 0; 1 is off (default: %(default)s)",
    )
    parser.add_argument(
        "--repeat-last-n",
        type=int,
        default=64,
        metavar="N",
        help="the penalties' window: the last N tokens, prompt included; 0 is "
        "off, -1 the whole context (default: %(default)s)",
    )
    parser.add_argument(
        "--presence-penalty",
        type=float,
        default=0.0,
        metavar="A",
        help="subtract A in [-2, 2] from the logit of each token in the window "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--frequency-penalty",
        type=float,
        default=0.0,
        metavar="A",
        help="subtract A in [-2, 2] times a token's count in the window "
        "(default: %(default)s); min-p and the penalties run on the host, "
        "before the device's draw (llama.cpp's order)",
    )
    if seed:
        parser.add_argument(
            "--seed",
            type=int,
            default=0,
            help=f"the sampling seed, 0..{SEED_LIMIT} (the embedded model's "
            "weights do not depend on it) (default: %(default)s)",
        )
    parser.add_argument(
        "--device",
        choices=("npu1", "npu2"),
        default=None,
        help="npu1 (XDNA: Phoenix, Hawk Point) or npu2 (XDNA2: Strix, Krackan) "
        "(default: IRON_DEVICE, else the NPU present, else npu2)",
    )
    parser.add_argument(
        "--context",
        type=int,
        default=None,
        metavar="N",
        help="positions the KV cache holds: a multiple of 16 above --rows "
        f"(default: the model's own, at most {DEFAULT_CONTEXT})",
    )
    parser.add_argument(
        "--rows",
        type=int,
        default=16,
        metavar="N",
        help="prompt tokens run at once, a tuning knob: rounded to a multiple of "
        "8, at most 16 (default: %(default)s); longer prompts run in chunks",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log what IRON does: -v a summary (a few lines per compiled "
        "version), -vv every choice of each plan (default: off)",
    )


def fail(message: str, code: int = EXIT_INPUT) -> int:
    """Print ``iron-lm: error: message`` on stderr; return ``code``."""
    print(f"iron-lm: error: {message}", file=sys.stderr)
    return code


def check_model_options(args: argparse.Namespace) -> str:
    """Refuse values no device takes, in the flags' own terms; returns the
    device's name (``--device``, else ``IRON_DEVICE``, else the NPU XRT
    reports, else npu2: :func:`iron.runtime.default_device`).

    Raises:
        UsageError: A flag's value is out of its range (named, with the
            allowed values and the device fact behind them).
        ValueError: ``IRON_DEVICE`` names no device.
    """
    from iron.core.device import as_device
    from iron.operators.attention import LANES
    from iron.operators.sample import MAX_TOP_K, TEMPERATURE_RANGE
    from iron.runtime import default_device

    if not (math.isfinite(args.temperature) and 0 <= args.temperature):
        raise UsageError(
            f"--temperature is a number >= 0 (0 is greedy), got {args.temperature}"
        )
    if args.temperature > MAX_TEMPERATURE:
        raise UsageError(
            f"--temperature is at most {MAX_TEMPERATURE:g} (the server's bound too), "
            f"got {args.temperature}"
        )
    if 0 < args.temperature < TEMPERATURE_RANGE[0]:
        raise UsageError(
            f"--temperature is 0 (greedy) or at least 2**-63 (the device's "
            f"sampler holds no less), got {args.temperature}"
        )
    if not 0 < args.top_p <= 1 or float32_of(args.top_p) == 0:
        raise UsageError(f"--top-p is a number in (0, 1] (1 is off), got {args.top_p}")
    penalties_of(args)
    seed = getattr(args, "seed", 0)
    if not 0 <= seed <= SEED_LIMIT:
        raise UsageError(
            f"--seed is an integer in 0..{SEED_LIMIT}, got {seed} (the device adds "
            f"the position to it in a 30-bit word)"
        )
    if not 0 <= args.top_k <= MAX_TOP_K:
        raise UsageError(
            f"--top-k is 0 (off) or 1..{MAX_TOP_K}, got {args.top_k} (the "
            f"device's sampler keeps at most the {MAX_TOP_K} largest logits)"
        )
    from iron.lm.sizes import chunk_rows

    device = args.device or default_device()
    as_device(device)  # a device name IRON does not know is refused here
    # --rows is a tuning knob: the graph runs it as the nearest chunk every
    # device takes (iron.lm.sizes.chunk_rows); longer prompts run in chunks.
    if args.rows < 1:
        raise UsageError(
            f"--rows is a positive number of prompt tokens per chunk, got {args.rows}"
        )
    rows = chunk_rows(args.rows, DEFAULT_CONTEXT)
    if args.context is not None and (args.context % LANES or args.context <= rows):
        smallest = (rows // LANES + 1) * LANES
        raise UsageError(
            f"--context is a multiple of {LANES} above --rows ({rows}), e.g. "
            f"{smallest}, {smallest + LANES}, ...; got {args.context} (attention "
            f"streams the KV cache in {LANES}-position vectors, and a prompt chunk "
            f"needs --rows positions)"
        )
    return device


def penalties_of(args: argparse.Namespace) -> Penalties:
    """The ``--min-p`` and penalty flags as a :class:`~iron.lm.penalties.Penalties`.

    Raises:
        UsageError: A flag is out of the range the server takes too (named,
            with the range).
    """
    from iron.lm.penalties import LIMITS, Penalties, check_field, describe

    values = {name: getattr(args, name) for name in LIMITS}
    for name, value in values.items():
        try:
            check_field(name, value)
        except (TypeError, ValueError):
            flag = "--" + name.replace("_", "-")
            raise UsageError(
                f"{flag} is {describe(name)} (the server's bound too), got {value}"
            ) from None
    return Penalties(**values)


def wrapped(text: str, indent: str = "") -> str:
    """``text`` filled to the terminal's width (80 columns when not a terminal),
    its first line indented by ``indent`` and the rest by two more spaces."""
    width = min(shutil.get_terminal_size((80, 24)).columns, 100)
    return textwrap.fill(
        text,
        width=max(width, 40),
        initial_indent=indent,
        subsequent_indent=indent + "  " if indent else "",
    )


#: The embedded model's temporary folder: ``iron-tiny-<pid>-<random>``.
TINY_PREFIX = "iron-tiny-"


def clean_stale_scratch(where: str | Path | None = None) -> list[Path]:
    """Remove the embedded model's temporary folders whose process is gone.

    A process killed outright (``kill -9``) leaves its folder behind; each
    folder names its process, so only the dead ones' are removed.

    Returns:
        The folders removed.
    """
    removed = []
    for folder in Path(where or tempfile.gettempdir()).glob(f"{TINY_PREFIX}*-*"):
        pid = folder.name[len(TINY_PREFIX) :].partition("-")[0]
        if not pid.isdigit() or not folder.is_dir() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # alive (or not ours to signal: then alive too)
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


@contextmanager
def open_decoder(args: argparse.Namespace, device: str) -> Iterator[Decoder]:
    """The decoder of ``--checkpoint`` (or of the embedded tiny Llama, written
    to a temporary folder that lives as long as the context, after a notice
    that its weights are random), with the flags' settings; not compiled."""
    from iron.lm import tiny
    from iron.lm.generate import Decoder

    clean_stale_scratch()
    prefix = f"{TINY_PREFIX}{os.getpid()}-"
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch:
        directory = args.checkpoint
        if directory is None:
            print(wrapped(tiny.NOTICE), file=sys.stderr)
            # The weights' seed is fixed: --seed changes sampling, not the model.
            directory = tiny.write_checkpoint(Path(scratch))
        context = args.context or DEFAULT_CONTEXT
        yield Decoder.from_pretrained(
            directory,
            device=device,
            context=context,
            slots=_slots(args, directory, context),
            rows=args.rows,
            temperature=args.temperature,
            top_k=args.top_k or None,
            top_p=args.top_p,
            progress=sys.stderr.isatty(),
            weights=args.weights,
        )


def _slots(
    args: argparse.Namespace, directory: str | os.PathLike[str], context: int
) -> int:
    """The slots ``--slots`` asks (1 for commands without it), at most what
    ``--kv-budget`` holds at ``context`` positions.

    Raises:
        UsageError: The budget holds no slot (naming a slot's bytes).
    """
    slots = int(getattr(args, "slots", 1) or 1)
    budget = getattr(args, "kv_budget", None)
    if budget is None:
        return slots
    from iron.lm.config import LlamaConfig
    from iron.lm.engine import slots_for
    from iron.lm.gguf import find_gguf, open_gguf

    gguf = find_gguf(directory)
    if gguf is None:
        config = LlamaConfig.from_json(Path(directory) / "config.json")
    else:
        opened = open_gguf(gguf)
        try:
            config = opened.config
        finally:
            opened.close()
    try:
        return min(
            slots,
            slots_for(config, min(context, config.max_position_embeddings), budget),
        )
    except ValueError as error:
        raise UsageError(f"--kv-budget: {error}") from None


def byte_size(text: str) -> int:
    """``"512M"``, ``"2G"``, ``"65536"``: bytes (K, M, G are powers of 1024).

    Raises:
        argparse.ArgumentTypeError: Not a positive size.
    """
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    given = text.strip().upper().removesuffix("IB").removesuffix("B")
    scale = units.get(given[-1:], 1)
    number = given[:-1] if given[-1:] in units else given
    try:
        value = int(float(number) * scale)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size in bytes (such as 65536, 512M or 2G)"
        )
    return value
