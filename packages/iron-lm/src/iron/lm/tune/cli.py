"""The command line: ``python -m iron.lm.tune``'s arguments, output and exit codes.

Owns :func:`main`: parsing the arguments, finding the application and its
config, then either checking the profiles (:mod:`iron.lm.tune.check`) or
tuning each device (:mod:`iron.lm.tune.run`) and printing what was done.
Exit codes: 0 done or clean, :data:`EXIT_CHECK` ``--check`` found problems,
:data:`EXIT_ERROR` bad arguments or the tune cannot run,
:data:`EXIT_INTERRUPTED` interrupted.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from iron.core import plugins
from iron.core.device import DEVICES, as_device
from iron.lm.tune.cache import default_cache
from iron.lm.tune.check import check_profiles, compare_profiles
from iron.lm.tune.measure import TuneError, measure_for_backend
from iron.lm.tune.run import tune
from iron.lm.tune.shapes import MAX_SETTINGS

__all__ = ["EXIT_CHECK", "EXIT_ERROR", "EXIT_INTERRUPTED", "main"]

logger = logging.getLogger("iron.lm.tune")

EXIT_CHECK = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130

#: Where profiles are written when neither --out nor --shipped is given,
#: relative to the working directory: never into the installed package.
DEFAULT_OUT = "profiles"


def _parser() -> argparse.ArgumentParser:
    from iron.lm.applications import APPLICATIONS

    parser = argparse.ArgumentParser(
        prog="python -m iron.lm.tune",
        description=(
            "Tune every operator shape an application builds for a config, per "
            "device, and rewrite its profiles (one <device>.json each). On the "
            "emulated NPU settings are timed by the device cost model (the "
            "profile's meta says so); on xrt by device calls."
        ),
    )
    parser.add_argument(
        "application", help=f"the application: {', '.join(sorted(APPLICATIONS))}"
    )
    parser.add_argument(
        "--checkpoint",
        type=Path,
        help="a Hugging Face checkpoint directory or its config.json (no weight "
        "is read); default: the config the application's profiles ship for",
    )
    parser.add_argument(
        "--device",
        choices=sorted(DEVICES),
        action="append",
        help="the device (repeatable; default: every device)",
    )
    parser.add_argument(
        "--ops",
        help="only these operators, comma-separated (GEMV,GEMM); the profile's "
        "other entries are kept",
    )
    parser.add_argument(
        "--weights",
        help="the weights the versions hold, comma-separated: bf16, q8, q4 (the "
        "matrices packed as --weights of iron-lm generate holds them, so QGEMV "
        "and QGEMM are tuned; e.g. --weights q4,q8 --ops QGEMV); default bf16, "
        "and for --check all three (the profiles serve every weights)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help=f"the profile directory to write (default: ./{DEFAULT_OUT} in the "
        "working directory; the shipped profiles are rewritten only when given "
        "here by their path); --check reads it (default: the shipped profiles)",
    )
    parser.add_argument(
        "--shipped",
        action="store_true",
        help="after tuning, compare each profile written with the one shipped "
        "inside the package, entry by entry, and exit 1 if they differ (the "
        "shipped files are never written unless --out names their directory)",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="processes measuring settings (default 1)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the profiles instead, without tuning: list entries matching "
        "no step, fields the operators no longer declare and values outside "
        "their domains (exit 1 if any); it does not retune, so it cannot say "
        "whether a tune would choose the same values (--shipped does)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        help="the measurements cache, JSON lines (default: "
        "$IRON_CACHE/tune/<application>.jsonl, else ~/.cache/iron/tune/)",
    )
    parser.add_argument(
        "--max-settings",
        type=int,
        default=MAX_SETTINGS,
        help=f"settings per operator shape at most (default {MAX_SETTINGS}); "
        f"past it, the longest domains keep every other value",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("-v", "--verbose", action="store_true", help="log more")
    return parser


def _fail(message: str, code: int = EXIT_ERROR) -> int:
    print(f"python -m iron.lm.tune: error: {message}", file=sys.stderr)
    return code


def _unwritable(path: Path, *, directory: bool) -> str | None:
    """Why ``path`` cannot be written (as a directory or a file), or None.

    Checked before any measuring, creating nothing: the nearest existing
    ancestor must be a writable directory.
    """
    kind, other = ("directory", "file") if directory else ("file", "directory")
    if path.exists():
        if path.is_dir() != directory:
            return f"is a {other}; give a {kind}" + (
                " (the profiles are <device>.json files in it)" if directory else ""
            )
        target = path if directory else path.parent
        if not os.access(path, os.W_OK) or not os.access(target, os.W_OK | os.X_OK):
            return f"is not writable; give a {kind} you can write"
        return None
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"cannot be created: {parent} is a file; give a {kind} elsewhere"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot be created in {parent} (not writable); give a {kind} elsewhere"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``python -m iron.lm.tune``; returns the exit code.

    Exit codes: 0 done (or ``--check`` clean), 1 ``--check`` found
    problems, 2 bad arguments or the tune cannot run, 130 interrupted
    (rerun the same command to continue from the cache).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    if args.verbose and not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    if args.verbose:
        logger.setLevel(logging.INFO)
    from iron.lm.applications import application as find
    from iron.lm.config import ConfigError
    from iron.lm.quantize import WEIGHTS

    given = args.weights or (",".join(WEIGHTS) if args.check else "bf16")
    weights = tuple(w.strip() for w in given.split(",") if w.strip())

    if not weights or any(w not in WEIGHTS for w in weights):
        return _fail(
            f"--weights takes one or more of {', '.join(WEIGHTS)}, comma-separated; "
            f"got {args.weights!r}"
        )
    try:
        app = find(
            args.application, **({} if weights == ("bf16",) else {"weights": weights})
        )
    except KeyError as error:
        return _fail(error.args[0])
    source = args.checkpoint or app.default_config()
    try:
        config = app.load_config(source)
    except (FileNotFoundError, ConfigError) as error:
        return _fail(f"--checkpoint {source}: {error}")
    label = f"{app.config_name(source)} (sha256 {app.config_digest(config)})"
    if args.check:
        out = args.out or app.profiles_dir()
    else:
        # Never the package's own files unless --out names them.
        out = args.out or Path(DEFAULT_OUT)
        problem = _unwritable(out, directory=True)
        if problem:
            return _fail(f"--out {out}: {problem}")
        cache_path = args.cache or default_cache(app.name)
        problem = _unwritable(cache_path, directory=False)
        if problem:
            return _fail(f"--cache {cache_path}: {problem}")
    devices = args.device or sorted(DEVICES)
    if args.jobs < 1:
        return _fail(f"--jobs is at least 1, got {args.jobs}")
    if args.max_settings < 1:
        return _fail(f"--max-settings is at least 1, got {args.max_settings}")

    if args.check:
        problems, notes = check_profiles(
            app, config, out, args.device, config_label=label
        )
        for note in notes:
            print(f"note: {note}")
        for problem in problems:
            print(problem)
        if problems:
            print(
                f"{len(problems)} problem(s) in {out}; regenerate with "
                f"python -m iron.lm.tune {app.name} --checkpoint {source} "
                f"--out {out}",
                file=sys.stderr,
            )
            return EXIT_CHECK
        print(
            f"{out}: clean for {app.name} {label} on {', '.join(devices)}: every "
            f"entry matches a step and gives open tunables within their domains "
            f"(the values are not retuned; --shipped compares a fresh tune)"
        )
        return 0

    ops = None
    if args.ops:
        ops = [o.strip() for o in args.ops.split(",") if o.strip()]
        catalog = plugins.catalog()
        unknown = [o for o in ops if o not in catalog]
        if unknown:
            return _fail(
                f"--ops {unknown} are not operators; the catalog has "
                f"{', '.join(sorted(catalog))}"
            )
    from iron.runtime.select import backend_name

    try:
        backend = backend_name()
    except ValueError as error:
        return _fail(str(error))
    meta = {
        "config": label,
        "versions": app.labels(config) if hasattr(app, "labels") else [],
        "command": "python -m iron.lm.tune " + shlex.join(argv),
    }
    cache = cache_path
    differs = False
    for name in devices:
        device = as_device(name)
        try:
            measure = measure_for_backend(backend, device)
        except TuneError as error:
            return _fail(str(error))
        print(
            f"tuning {app.name} {label} on {device.name}, measured by "
            f"{measure.label}"
            + (
                ": modelled times from iron.core.cost.step_time, not a "
                "measurement on an NPU"
                if measure.modelled
                else ""
            ),
            flush=True,
        )
        try:
            report = tune(
                app,
                config,
                device,
                out=out,
                measure=measure,
                ops=ops,
                jobs=args.jobs,
                cache=cache,
                max_settings=args.max_settings,
                meta=meta,
                progress=False if args.no_progress else None,
            )
        except KeyboardInterrupt:
            print(
                f"\ninterrupted: what was measured is kept in {cache}; rerun the "
                f"same command to continue from there",
                file=sys.stderr,
            )
            return EXIT_INTERRUPTED
        except TuneError as error:
            return _fail(str(error))
        print(report.summary(), flush=True)
        if args.shipped:
            differ = compare_profiles(out, app.profiles_dir(), device.name)
            shipped = app.profiles_dir() / f"{device.name}.json"
            if differ:
                differs = True
                print(f"{device.name}: differs from the shipped {shipped}:")
                for line in differ:
                    print(f"  {line}")
            else:
                print(f"{device.name}: reproduces the shipped {shipped}")
    return EXIT_CHECK if differs else 0
