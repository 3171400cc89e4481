"""The measurements cache: results kept as JSON lines, read back by a rerun.

Owns where the cache lives (:func:`default_cache`), what a result is keyed
by (device, measure, a fingerprint of the operator's code and the cost
model, the operator, the setting), and appending each result as it is made
(:class:`Cache`), so an interrupted tune continues where it stopped.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from iron.core.cost import step_time
from iron.core.device import Device
from iron.core.operator import Operator

__all__ = ["Cache", "default_cache"]


def default_cache(application: str) -> Path:
    """The cache file used when ``--cache`` is not given.

    ``$IRON_CACHE/tune/<application>.jsonl``, else
    ``~/.cache/iron/tune/<application>.jsonl``: never inside the package
    whose profiles are rewritten.
    """
    root = os.environ.get("IRON_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "iron"
    return base / "tune" / f"{application}.jsonl"


@functools.cache
def _code(cls: type, measure_key: str) -> str:
    """A fingerprint of what a result depends on: the operator's modules and the model.

    The modules of the class and of every base it inherits from (a cost may
    be inherited: ``SiLUMul``'s is ``_Elementwise``'s), the cost model's, and
    the device facts and ``Cost`` it reads.
    """
    modules = {sys.modules[c.__module__] for c in cls.__mro__ if c is not object}
    modules |= {
        sys.modules[step_time.__module__],
        sys.modules[Device.__module__],
        sys.modules[Operator.__module__],
    }
    parts = []
    for module in sorted(modules, key=lambda m: m.__name__):
        try:
            parts.append(inspect.getsource(module))
        except (OSError, TypeError):
            parts.append(getattr(module, "__name__", ""))
    text = "\n".join(sorted(parts)) + measure_key
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Cache:
    """Measurements kept as JSON lines, read back by a rerun.

    Each line is one result: ``{"device", "by", "code", "shape",
    "setting", "seconds" | "refused"}``. ``code`` fingerprints the
    operator's modules and the cost model, so a changed operator is
    measured again. A line cut short by an interruption is skipped.

    Args:
        path: The file (created with its directory when first written).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._results: dict[tuple, dict[str, Any]] = {}
        if self.path.is_file():
            with self.path.open(encoding="utf-8") as f:
                for line in f:
                    try:
                        record = json.loads(line)
                        key = self._key_of(record)
                    except (ValueError, KeyError, TypeError):
                        continue
                    result = {
                        k: record[k] for k in ("seconds", "refused") if k in record
                    }
                    if len(result) == 1:
                        self._results[key] = result

    @staticmethod
    def _key_of(record: Mapping[str, Any]) -> tuple:
        return (
            record["device"],
            record["by"],
            record["code"],
            record["shape"],
            json.dumps(record["setting"], sort_keys=True),
        )

    def __len__(self) -> int:
        return len(self._results)

    def get(self, key: tuple) -> dict[str, Any] | None:
        """The result cached under ``key``, or None."""
        return self._results.get(key)

    def writer(self) -> _Writer:
        """A context manager appending results (flushed one by one)."""
        return _Writer(self)


class _Writer:
    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.file: Any = None

    def __enter__(self) -> _Writer:
        return self

    def put(self, key: tuple, result: Mapping[str, Any]) -> None:
        if self.file is None:
            path = self.cache.path
            path.parent.mkdir(parents=True, exist_ok=True)
            cut = path.is_file() and not path.read_bytes().endswith(b"\n")
            self.file = path.open("a", encoding="utf-8")
            if cut and path.stat().st_size:
                self.file.write("\n")  # end a line an interruption cut short
        device, by, code, shape, setting = key
        record = {
            "device": device,
            "by": by,
            "code": code,
            "shape": shape,
            "setting": json.loads(setting),
            **result,
        }
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()
        self.cache._results[key] = dict(result)

    def __exit__(self, *exc: Any) -> None:
        if self.file is not None:
            self.file.close()
