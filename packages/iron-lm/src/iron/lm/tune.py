"""``python -m iron.lm.tune``: tune an application's operators, write its profiles.

For one application (``llama``) and one configuration, per device:

1. record every version the application builds (shapes only: weights are
   zero-cost placeholders, so an 8B config tunes without reading 16 GB);
2. collect each distinct operator shape: an operator class and its dims
   (its ``param()`` fields as a call constructs it: what a profile entry
   matches), the steps of that shape, and the open tunables none of those
   steps pins at its call site;
3. enumerate every setting of those tunables from their domains (Enum,
   tuple of choices, ``Divisors``), capped at ``--max-settings`` per shape
   (past it, the longest domain keeps every other value, the default always
   among them, and the output says so);
4. measure each setting: a setting the operator refuses (construction or
   ``check(dev)`` raising ``ValueError``, ``RefusedShapeError`` included) is
   skipped and counted; on the emulated NPU the time is the device cost
   model's (:func:`iron.core.cost.step_time`), on the xrt backend the
   median wall time of device calls after warm-ups;
5. keep the fastest setting per shape (its time summed over the steps it
   governs; ties go to the operator's own ``resolve()`` default, then to
   the first in enumeration order), and rewrite ``<out>/<device>.json``: one
   entry a line, sorted by operator name then dims, with ``meta`` saying how
   the times were obtained, so a modelled profile is never mistaken for a
   measured one.

Every measurement is appended to a cache (JSON lines, keyed by device,
measure, operator code, shape and setting) as it is made, so an interrupted
tune continues where it stopped when rerun. ``--jobs N`` measures in N
processes. ``--check`` reports profile entries that match no step of the
application's versions, and fields a newer operator no longer declares
(exit 1 with the list; 0 when clean).

Usage::

    python -m iron.lm.tune llama --checkpoint DIR_OR_CONFIG_JSON \\
        [--device npu1|npu2] [--ops GEMV,GEMM] [--out DIR] [--jobs N]
    python -m iron.lm.tune --check llama [--checkpoint ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import difflib
import functools
import hashlib
import inspect
import itertools
import json
import logging
import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
from ml_dtypes import bfloat16

from iron.core import plugins
from iron.core.cost import step_time
from iron.core.declare import domain_values
from iron.core.device import DEVICES, Device, as_device, use_device
from iron.core.operator import Operator
from iron.core.profile import Profile
from iron.core.recording import Recording

__all__ = [
    "MAX_SETTINGS",
    "MODELLED",
    "Measure",
    "Shape",
    "TuneError",
    "TuneReport",
    "check_profiles",
    "collect_shapes",
    "default_cache",
    "main",
    "measure_for_backend",
    "modelled_seconds",
    "time_on_device",
    "tune",
]

logger = logging.getLogger("iron.lm.tune")

#: Settings measured per operator shape at most, unless ``--max-settings``
#: says otherwise. The Llama-3.2-1B config's largest shape (the LM head's
#: GEMV, M=128256) has 10,368; an 8B config's stay under it too.
MAX_SETTINGS = 20_000

#: Device calls before timing starts, and timed calls per setting (xrt).
WARMUP = 3
ROUNDS = 10

EXIT_CHECK = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


class TuneError(RuntimeError):
    """The tune cannot run as asked (the message names what and the fix)."""


# -- measuring -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Measure:
    """How a setting's time is obtained.

    Attributes:
        key: A short name the cache keys results by (``"model"``, ``"xrt"``):
            a modelled time is never read back as a measured one.
        label: What the output and the profile's ``meta["measured_by"]`` say.
        fn: ``fn(op, dev) -> seconds`` for a constructed, checked operator;
            a module-level function (``--jobs`` sends it to other processes).
        modelled: Whether the times come from a model, not a device.
        parallel: Whether settings may be measured in several processes at
            once (a model: yes; timing one NPU: no).
    """

    key: str
    label: str
    fn: Callable[[Operator, Device], float]
    modelled: bool = False
    parallel: bool = True


def modelled_seconds(op: Operator, dev: Device) -> float:
    """The device cost model's time for one call of ``op`` on ``dev``.

    :func:`iron.core.cost.step_time` with one dispatch charged: the larger
    of the compute time (MACs at the peak rate of the cores the tiling uses)
    and the memory time (bytes, and what the tiling re-reads, at the lesser
    of the DDR bandwidth and the shim DMA rate of the columns used), plus the
    kernel-call overhead of each core's calls, plus one dispatch.
    """
    return step_time(op, dev, dispatches=1).seconds


def time_on_device(
    op: Operator, dev: Device, *, warmup: int = WARMUP, rounds: int = ROUNDS
) -> float:
    """The median wall time of ``rounds`` calls of ``op`` on the active backend.

    Inputs are zeros of each operand's shape (bf16 unless the operand
    declares another dtype); ``warmup`` calls run first, untimed, so the
    first call's compile and upload are not counted.

    Args:
        op: A constructed, checked operator.
        dev: The device to call it on.
        warmup: Untimed calls first.
        rounds: Timed calls; their median is returned.

    Returns:
        Seconds per call (the median).
    """
    arrays = []
    for spec in type(op).declaration.inputs:
        shape = tuple(
            d if isinstance(d, int) else int(getattr(op, d)) for d in spec.dims
        )
        arrays.append(
            np.zeros(shape, spec.dtype if spec.dtype is not None else bfloat16)
        )
    with use_device(dev):
        for _ in range(warmup):
            op(*arrays)
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            op(*arrays)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


#: The emulated NPU's measure: the cost model.
MODELLED = Measure(
    key="model",
    label="cost model (emulated NPU)",
    fn=modelled_seconds,
    modelled=True,
)


def measure_for_backend(backend: str, dev: Device) -> Measure:
    """The measure the active backend gives: the cost model, or device timing.

    Args:
        backend: ``"emu"`` or ``"xrt"`` (``iron.runtime.select.backend_name()``).
        dev: The device to tune for.

    Returns:
        :data:`MODELLED` on the emulated NPU; on xrt, the median wall time
        of device calls.

    Raises:
        TuneError: The backend is xrt and it cannot run here (it is not
            built yet, or the machine lacks an NPU, pyxrt or the driver);
            the message says what is missing and how to tune on the
            emulated NPU instead.
    """
    if backend == "emu":
        return MODELLED
    if backend != "xrt":
        raise TuneError(f"backend {backend!r} is neither 'emu' nor 'xrt'")
    from iron.runtime import select, xrt

    try:
        select.open_device(dev)
    except xrt.BackendUnavailableError as error:
        raise TuneError(
            f"tuning on the xrt backend times real device calls (median of "
            f"{ROUNDS} after {WARMUP} warm-ups), but {error} (a profile "
            f"tuned there is timed by the cost model, and its meta says so)"
        ) from error
    return Measure(
        key="xrt",
        label=f"wall time on the NPU (xrt backend: median of {ROUNDS} calls "
        f"after {WARMUP} warm-ups)",
        fn=time_on_device,
        parallel=False,
    )


def _evaluate(task: tuple[Operator, dict[str, Any], str, Measure]) -> dict[str, Any]:
    """Construct one setting, check it, and measure it (one cache record's result).

    Returns ``{"seconds": s}``, or ``{"refused": message}`` when the
    operator refuses the setting (a ValueError: RefusedShapeError, or a
    value outside its domain).
    """
    op, setting, device_name, measure = task
    dev = as_device(device_name)
    try:
        candidate = op.replace(**setting)
        candidate.check(dev)
    except ValueError as error:
        return {"refused": str(error)}
    return {"seconds": float(measure.fn(candidate, dev))}


def _evaluate_batch(
    work: tuple[Operator, list[dict[str, Any]], str, Measure],
) -> list[dict[str, Any]]:
    """:func:`_evaluate` for several settings of one operator (a ``--jobs`` task)."""
    op, settings, device_name, measure = work
    return [_evaluate((op, setting, device_name, measure)) for setting in settings]


# -- operator shapes ---------------------------------------------------------------


@functools.cache
def _catalog_names() -> dict[type, str]:
    names: dict[type, str] = {}
    for name, cls in plugins.catalog().items():
        names.setdefault(cls, name)
    return names


def _plain(value: Any) -> Any:
    """A value as JSON holds it: an Enum as its value, a numpy scalar as its item."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, np.generic):
        return value.item()
    return value


def _json_value(value: Any) -> bool:
    plain = _plain(value)
    return plain is None or isinstance(plain, (bool, int, float, str))


def _canon(setting: Mapping[str, Any]) -> str:
    return json.dumps({k: _plain(v) for k, v in setting.items()}, sort_keys=True)


def call_dims(op: Operator) -> dict[str, Any]:
    """The dims a call that constructed ``op`` has, as a profile matches them.

    Every non-tunable param: its value, None for a per-call one, and None
    for a derived one (a call does not give those).
    """
    params = type(op).declaration.params
    given = {
        n: v
        for n, v in op.fields().items()
        if not params[n].tunable and not params[n].derived
    }
    return Profile.dims(type(op), given)


def entry_dims(op: Operator) -> dict[str, Any]:
    """The dims a profile entry for ``op``'s shape names.

    :func:`call_dims` without derived params (a call never gives them) and
    without values a JSON file cannot hold as they compare (tuples,
    patterns); None stays (it names a per-call or absent dimension).
    """
    params = type(op).declaration.params
    dims = {}
    for name, value in call_dims(op).items():
        if params[name].derived:
            continue
        if not _json_value(value):
            logger.debug(
                "%s: dim %s=%r is not a JSON value; entries leave it out",
                type(op).__name__,
                name,
                value,
            )
            continue
        dims[name] = value
    return dims


def _value_key(value: Any) -> tuple:
    plain = _plain(value)
    if plain is None:
        return (0, 0, "")
    if isinstance(plain, (bool, int, float)):
        return (1, float(plain), "")
    return (2, 0, str(plain))


def _dims_key(cls: type, dims: Mapping[str, Any]) -> tuple:
    order = list(cls.declaration.params)
    return tuple(
        (order.index(n), n, _value_key(v))
        for n, v in sorted(dims.items(), key=lambda kv: order.index(kv[0]))
    )


@dataclasses.dataclass
class Member:
    """The steps of one exact operator within a :class:`Shape`.

    Attributes:
        op: The recorded operator with its unpinned tunables reopened.
        pinned: The tunables its call site gave (never tuned).
        count: Steps it stands for.
        identity: ``repr(op)``: what the cache keys it by.
    """

    op: Operator
    pinned: frozenset[str]
    count: int
    identity: str


@dataclasses.dataclass
class Shape:
    """One operator shape: what one profile entry governs.

    Attributes:
        cls: The operator class.
        name: Its name in the operator catalog.
        dims: The dims the entry names (:func:`entry_dims`).
        members: The distinct recorded operators of this shape.
        tunables: The open tunables tuned (not pinned at every step).
        default: ``resolve(dev)``'s value of each tuned tunable.
        settings: Every setting measured, in enumeration order.
        total: Settings before ``--max-settings`` trimmed them.
        trimmed: What trimming dropped, in words (empty if nothing).
    """

    cls: type
    name: str
    dims: dict[str, Any]
    members: list[Member]
    tunables: tuple[str, ...] = ()
    default: dict[str, Any] = dataclasses.field(default_factory=dict)
    settings: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    total: int = 0
    trimmed: str = ""

    @property
    def steps(self) -> int:
        """Steps of the application's versions this shape's entry governs."""
        return sum(m.count for m in self.members)

    def __str__(self) -> str:
        inner = ", ".join(f"{k}={_plain(v)!r}" for k, v in self.dims.items())
        return f"{self.name}({inner})"

    def sort_key(self) -> tuple:
        """Operator name, then dims in declaration order (numbers numerically)."""
        return (self.name, _dims_key(self.cls, self.dims))


def collect_shapes(
    recordings: Iterable[Recording],
    dev: Device | str,
    *,
    ops: Iterable[str] | None = None,
    max_settings: int = MAX_SETTINGS,
    with_settings: bool = True,
) -> list[Shape]:
    """Every distinct operator shape of ``recordings`` with open tunables, enumerated.

    Args:
        recordings: The versions' recordings (made with no profile).
        dev: The device they were recorded for.
        ops: Only these catalog names (None: every operator).
        max_settings: Settings per shape at most (see the module docstring).
        with_settings: Enumerate each shape's settings (False: only find the
            shapes and their tuned tunables).

    Returns:
        The shapes, sorted by operator name then dims, each with its
        settings enumerated (when asked).
    """
    device = as_device(dev)
    wanted = set(ops) if ops is not None else None
    names = _catalog_names()
    groups: dict[tuple, Shape] = {}
    members: dict[tuple, Member] = {}
    for recording in recordings:
        for step in recording.steps:
            op = step.op
            cls = type(op)
            name = names.get(cls)
            if name is None:
                logger.debug("%s is not in the operator catalog: not tuned", cls)
                continue
            if wanted is not None and name not in wanted:
                continue
            unpinned = [t for t in cls.declaration.tunables if t not in op.pinned]
            if not unpinned:
                continue
            dims = entry_dims(op)
            key = (cls, _canon(dims))
            shape = groups.get(key)
            if shape is None:
                shape = groups[key] = Shape(cls, name, dims, [])
            reopened = op.replace(**dict.fromkeys(unpinned))
            identity = repr(reopened)
            member = members.get((key, identity))
            if member is None:
                member = Member(reopened, frozenset(op.pinned), 0, identity)
                members[(key, identity)] = member
                shape.members.append(member)
            member.count += 1
    shapes = sorted(groups.values(), key=Shape.sort_key)
    for shape in shapes:
        if with_settings:
            _enumerate(shape, device, max_settings)
        else:
            shape.tunables = _tuned(shape)
    return shapes


def _tuned(shape: Shape) -> tuple[str, ...]:
    """The open tunables some step of ``shape`` leaves to the profile."""
    return tuple(
        t
        for t in shape.cls.declaration.tunables
        if any(t not in m.pinned for m in shape.members)
    )


def _enumerate(shape: Shape, dev: Device, cap: int) -> None:
    cls = shape.cls
    params = cls.declaration.params
    shape.tunables = _tuned(shape)
    default: dict[str, Any] = {}
    for member in shape.members:
        try:
            resolved = member.op.resolve(dev)
        except ValueError as error:
            logger.debug("%s: resolve(%s) refuses: %s", shape, dev, error)
            continue
        for t in shape.tunables:
            if t not in member.pinned and t not in default and t in resolved:
                default[t] = _member_of(params[t].domain, resolved[t])
    shape.default = default
    fields = shape.members[0].op.fields()
    lists: list[list[Any]] = []
    for t in shape.tunables:
        domain = params[t].domain
        try:
            values = domain_values(domain, fields)
        except (TypeError, ValueError, KeyError):
            values = None  # a Divisors of a per-call or absent dimension
        if values is None:
            values = [default[t]] if t in default else []
            logger.warning(
                "%s: %s's domain cannot be enumerated for this shape; only "
                "its resolve() default %s is measured",
                shape,
                t,
                values,
            )
        elif t in default and default[t] not in values:
            values = [default[t], *values]
        lists.append(list(values))
    shape.total = _product(lists)
    notes = []
    fixed: set[int] = set()  # lists that cannot shrink further
    while _product(lists) > cap:
        open_ = [i for i in range(len(lists)) if i not in fixed]
        if not open_:
            break
        longest = max(open_, key=lambda i: (len(lists[i]), -i))
        values = lists[longest]
        name = shape.tunables[longest]
        kept = values[::2]
        if name in default and default[name] not in kept:
            kept = [v for v in values if v in kept or v == default[name]]
        if len(kept) >= len(values):
            fixed.add(longest)
            continue
        notes.append(f"{name} {len(values)} -> {len(kept)} values")
        lists[longest] = kept
    if notes:
        shape.trimmed = (
            f"{shape.total} settings exceed --max-settings {cap}: kept every "
            f"other value ({'; '.join(notes)}), the resolve() default always "
            f"among them"
        )
        logger.warning("%s: %s", shape, shape.trimmed)
    shape.settings = [
        dict(zip(shape.tunables, combo)) for combo in itertools.product(*lists)
    ]


def _member_of(domain: Any, value: Any) -> Any:
    if isinstance(domain, type) and issubclass(domain, Enum):
        try:
            return domain(value)
        except ValueError:
            return value
    return value


def _product(lists: Sequence[Sequence[Any]]) -> int:
    total = 1
    for values in lists:
        total *= len(values)
    return total


# -- the cache ---------------------------------------------------------------------


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


# -- tuning ------------------------------------------------------------------------


@dataclasses.dataclass
class TuneReport:
    """What one device's tune did.

    Attributes:
        device: The device name.
        path: The profile written.
        profile: The profile written.
        measured_by: How times were obtained (the measure's label).
        shapes: Operator shapes tuned.
        settings: Settings enumerated over all shapes.
        refused: Of those, settings the operator refused (skipped).
        evaluations: Distinct (operator, setting) results needed.
        measured: Results measured in this run.
        cached: Results read back from the cache.
        seconds: Wall time of this run.
        moved: One line per shape whose tuned setting is not the
            ``resolve()`` default: what moved, and the time saved.
        trimmed: One line per shape ``--max-settings`` trimmed.
        tied: Shapes whose accepted settings all took the same time (the
            measure does not tell them apart; the entry is the default).
    """

    device: str
    path: Path
    profile: Profile
    measured_by: str
    shapes: int = 0
    settings: int = 0
    refused: int = 0
    evaluations: int = 0
    measured: int = 0
    cached: int = 0
    seconds: float = 0.0
    moved: list[str] = dataclasses.field(default_factory=list)
    trimmed: list[str] = dataclasses.field(default_factory=list)
    tied: int = 0

    def summary(self) -> str:
        """A few lines for the terminal."""
        lines = [
            f"{self.device}: {self.shapes} operator shapes, {self.settings} "
            f"settings ({self.refused} refused by the operators, skipped); "
            f"{self.measured} evaluated now, {self.cached} read from the cache, in "
            f"{self.seconds:.1f} s; measured by {self.measured_by}",
            f"{self.device}: wrote {self.path} ({len(self.profile)} entries)",
        ]
        lines += [f"  trimmed {line}" for line in self.trimmed]
        if self.tied:
            lines.append(
                f"  {self.tied} of {self.shapes} shapes: every setting they "
                f"accept took the same time ({self.measured_by} does not tell "
                f"them apart), so their entries keep resolve()'s default"
            )
        if self.moved:
            lines.append(f"  {len(self.moved)} entries differ from resolve():")
            lines += [f"    {line}" for line in self.moved]
        else:
            lines.append("  every entry equals the operators' own resolve() default")
        return "\n".join(lines)


def _task_key(
    dev: Device, measure: Measure, shape: Shape, member: Member, setting: Mapping
) -> tuple:
    return (
        dev.name,
        measure.key,
        _code(shape.cls, measure.key),
        member.identity,
        _canon(setting),
    )


def _effective(member: Member, setting: Mapping[str, Any]) -> dict[str, Any]:
    return {t: v for t, v in setting.items() if t not in member.pinned}


def _run(
    tasks: list[tuple[tuple, tuple]],
    results: dict[tuple, dict[str, Any]],
    writer: _Writer,
    *,
    jobs: int,
    bar: Any,
) -> int:
    """Evaluate ``tasks`` (key, task), recording each result as it comes."""
    done = 0
    if jobs <= 1 or len(tasks) < 2:
        for key, task in tasks:
            result = _evaluate(task)
            results[key] = result
            writer.put(key, result)
            bar.update()
            done += 1
        return done
    # Batches of consecutive tasks of one operator: the operator is pickled
    # once per batch, not once per setting.
    size = max(1, min(256, len(tasks) // (jobs * 8)))
    batches: list[list[tuple[tuple, tuple]]] = []
    for item in tasks:
        last = batches[-1] if batches else None
        if last and len(last) < size and last[0][1][0] is item[1][0]:
            last.append(item)
        else:
            batches.append([item])
    work = [
        (batch[0][1][0], [t[1] for _, t in batch], batch[0][1][2], batch[0][1][3])
        for batch in batches
    ]
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        try:
            for batch, outcome in zip(batches, pool.map(_evaluate_batch, work)):
                for (key, _), result in zip(batch, outcome):
                    results[key] = result
                    writer.put(key, result)
                bar.update(len(batch))
                done += len(batch)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return done


def tune(
    application: Any,
    config: Any,
    dev: Device | str,
    *,
    out: str | os.PathLike[str],
    measure: Measure = MODELLED,
    ops: Iterable[str] | None = None,
    jobs: int = 1,
    cache: str | os.PathLike[str] | None = None,
    max_settings: int = MAX_SETTINGS,
    meta: Mapping[str, Any] | None = None,
    progress: bool | None = None,
) -> TuneReport:
    """Tune ``application``'s operators for ``config`` on ``dev``; write the profile.

    Args:
        application: An application (:mod:`iron.lm.applications`).
        config: Its configuration (``application.load_config(...)``).
        dev: The device.
        out: The profile directory; ``<out>/<device>.json`` is rewritten.
        measure: How settings are timed (:func:`measure_for_backend`).
        ops: Only these operators (catalog names); the file's other entries
            are kept.
        jobs: Processes measuring settings in parallel.
        cache: The measurements cache (default :func:`default_cache`).
        max_settings: Settings per operator shape at most.
        meta: Extra ``meta`` for the profile (the command line, the config's
            name).
        progress: Show a progress bar (None: when stderr is a terminal).

    Returns:
        What was done, and the profile written.

    Raises:
        TuneError: ``--ops`` is given and the existing profile does not load.
        KeyboardInterrupt: Interrupted; what was measured is in the cache.
    """
    from tqdm import tqdm

    started = time.perf_counter()
    device = as_device(dev)
    jobs = max(1, int(jobs))
    if jobs > 1 and not measure.parallel:
        logger.warning(
            "%s measures one setting at a time: --jobs %d is ignored",
            measure.label,
            jobs,
        )
        jobs = 1
    path = Path(out) / f"{device.name}.json"
    wanted = sorted(set(ops)) if ops is not None else None
    kept: list[tuple[type, dict, dict]] = []
    if wanted is not None and path.is_file():
        try:
            existing = Profile.load(path)
        except ValueError as error:
            raise TuneError(
                f"--ops {','.join(wanted)} keeps the other entries of {path}, "
                f"but it does not load: {error}. Rerun without --ops to "
                f"rewrite it whole"
            ) from error
        names = _catalog_names()
        kept = [e for e in existing if names.get(e[0]) not in wanted]
    recordings = application.versions(config, device)
    shapes = collect_shapes(
        recordings.values(), device, ops=wanted, max_settings=max_settings
    )
    report = TuneReport(device.name, path, Profile(), measure.label)
    report.shapes = len(shapes)
    report.trimmed = [f"{s}: {s.trimmed}" for s in shapes if s.trimmed]

    store = Cache(Path(cache) if cache is not None else default_cache(application.name))
    results: dict[tuple, dict[str, Any]] = {}
    pending: list[tuple[tuple, tuple]] = []
    for shape in shapes:
        for member in shape.members:
            for setting in shape.settings:
                effective = _effective(member, setting)
                key = _task_key(device, measure, shape, member, effective)
                if key in results:
                    continue
                hit = store.get(key)
                if hit is not None:
                    results[key] = hit
                    report.cached += 1
                else:
                    results[key] = {}  # reserved: measured below
                    pending.append((key, (member.op, effective, device.name, measure)))
    report.evaluations = len(results)
    logger.info(
        "%s on %s: %d shapes, %d results needed, %d in the cache (%s)",
        application.name,
        device.name,
        len(shapes),
        report.evaluations,
        report.cached,
        store.path,
    )
    bar = tqdm(
        total=report.evaluations,
        initial=report.cached,
        unit="setting",
        desc=f"tune {application.name} {device.name}",
        disable=(None if progress is None else not progress),
        dynamic_ncols=True,
        smoothing=0.05,
    )
    try:
        with store.writer() as writer:
            report.measured = _run(pending, results, writer, jobs=jobs, bar=bar)
    finally:
        bar.close()

    chosen: list[tuple[Shape, dict[str, Any]]] = []
    for shape in shapes:
        best: tuple | None = None
        default_time = None
        times: set[float] = set()
        for index, setting in enumerate(shape.settings):
            report.settings += 1
            total = 0.0
            refused = False
            for member in shape.members:
                effective = _effective(member, setting)
                result = results[_task_key(device, measure, shape, member, effective)]
                if "refused" in result:
                    refused = True
                    break
                total += member.count * result["seconds"]
            if refused:
                report.refused += 1
                continue
            times.add(total)
            is_default = setting == shape.default
            if is_default:
                default_time = total
            rank = (total, not is_default, index)
            if best is None or rank < best[0]:
                best = (rank, setting)
        if best is None:
            logger.warning(
                "%s on %s: every setting is refused; no entry (it falls back "
                "to resolve())",
                shape,
                device.name,
            )
            continue
        (total, _, _), setting = best
        chosen.append((shape, setting))
        if len(times) == 1:
            report.tied += 1
        if setting != shape.default:
            moved = ", ".join(
                f"{t} {_plain(shape.default.get(t))!r} -> {_plain(v)!r}"
                for t, v in setting.items()
                if shape.default.get(t) != v
            )
            if default_time is None:
                saving = " (resolve()'s default is refused or was not measured)"
            elif default_time > 0:
                saving = f" ({(1 - total / default_time) * 100:.1f}% less time)"
            else:
                saving = ""
            report.moved.append(f"{shape}: {moved}{saving}")

    entries: list[tuple[tuple, type, dict, dict]] = []
    names = _catalog_names()
    for cls, dims, tunables in kept:
        entries.append(((names[cls], _dims_key(cls, dims)), cls, dims, tunables))
    for shape, setting in chosen:
        entries.append((shape.sort_key(), shape.cls, shape.dims, setting))
    entries.sort(key=lambda e: e[0])
    profile = Profile()
    for _, cls, dims, tunables in entries:
        profile.add(cls, **dims, **tunables)
    profile.meta = {
        "tool": "iron.lm.tune",
        "application": application.name,
        "device": device.name,
        "measured_by": measure.label,
        "modelled": measure.modelled,
        **dict(meta or {}),
        "shapes": report.shapes,
        "settings": report.settings,
        "refused": report.refused,
        "all_settings_tied": report.tied,
    }
    if wanted is not None:
        profile.meta["ops"] = wanted
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.tmp")
    profile.save(scratch)
    os.replace(scratch, path)
    report.profile = profile
    report.seconds = time.perf_counter() - started
    return report


# -- checking ----------------------------------------------------------------------


def _entry_lines(text: str, count: int) -> list[int | None]:
    """Each entry's line in a file :meth:`Profile.save` wrote (one entry a line)."""
    lines = [
        number
        for number, line in enumerate(text.splitlines(), start=1)
        if line.lstrip().startswith('{"operator"')
    ]
    return lines if len(lines) == count else [None] * count


def _from_json(cls: type, fields: Mapping[str, Any]) -> dict[str, Any]:
    """Turn an entry's JSON values into what the class takes (Enum members)."""
    out = dict(fields)
    for name, value in fields.items():
        spec = cls.declaration.params[name]
        if not spec.tunable and isinstance(spec.default, Enum) and value is not None:
            out[name] = type(spec.default)(value)
    return out


def check_profiles(
    application: Any,
    config: Any,
    directory: str | os.PathLike[str],
    devices: Sequence[str] | None = None,
    *,
    config_label: str = "",
) -> tuple[list[str], list[str]]:
    """Check a profile directory against the application's versions.

    Args:
        application: An application (:mod:`iron.lm.applications`).
        config: The configuration the profiles are for.
        directory: The profiles' directory.
        devices: Check these devices' files (each must exist); None: every
            ``<device>.json`` there whose name is a device.
        config_label: How problems name the configuration.

    Returns:
        ``(problems, notes)``: problems fail a check (an entry that matches
        no step, a field the operator no longer declares or no longer opens,
        a value outside its domain, a file that does not load); notes do not
        (operator shapes no entry covers: they fall back to ``resolve()``).
    """
    directory = Path(directory)
    problems: list[str] = []
    notes: list[str] = []
    if devices is None:
        devices = sorted(p.stem for p in directory.glob("*.json") if p.stem in DEVICES)
        if not devices:
            return [
                f"{directory}: no <device>.json profiles ({', '.join(DEVICES)})"
            ], []
    catalog = plugins.catalog()
    about = f"{application.name}" + (f" ({config_label})" if config_label else "")
    for name in devices:
        path = directory / f"{name}.json"
        if not path.is_file():
            problems.append(f"{path}: no profile for {name}")
            continue
        text = path.read_text(encoding="utf-8")
        try:
            data = json.loads(text)
            entries = data["entries"]
            if not isinstance(entries, list):
                raise TypeError("entries is not a list")
        except (ValueError, KeyError, TypeError) as error:
            problems.append(f"{path}: not a profile ({error})")
            continue
        tuned_for = (data.get("meta") or {}).get("config")
        if config_label and tuned_for and tuned_for != config_label:
            notes.append(
                f"{path}: tuned for {tuned_for}, checked against {config_label}"
            )
        device = as_device(name)
        recordings = application.versions(config, device)
        steps = [s.op for r in recordings.values() for s in r.steps]
        lines = _entry_lines(text, len(entries))
        before = len(problems)
        where_versions = ", ".join(recordings)
        for index, entry in enumerate(entries):
            line = lines[index]
            where = f"{path}: entry {index + 1}" + (f" (line {line})" if line else "")
            if not isinstance(entry, dict) or not isinstance(
                entry.get("operator"), str
            ):
                problems.append(f'{where}: not an object with an "operator" name')
                continue
            fields = dict(entry)
            op_name = fields.pop("operator")
            cls = catalog.get(op_name)
            if cls is None:
                close = difflib.get_close_matches(op_name, list(catalog), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                problems.append(
                    f"{where}: operator {op_name!r} is not in the operator "
                    f"catalog{hint}; delete the entry or rename it"
                )
                continue
            params = cls.declaration.params
            open_ = cls.declaration.tunables
            unknown = [f for f in fields if f not in params]
            closed = [
                f
                for f in fields
                if f in params and params[f].tunable and f not in open_
            ]
            for field in unknown:
                problems.append(
                    f"{where}: {op_name} no longer declares {field!r} "
                    f"(={fields[field]!r}); its open tunables are {list(open_)}; "
                    f"delete the field or retune"
                )
            for field in closed:
                problems.append(
                    f"{where}: {op_name}.{field} is no longer an open tunable "
                    f"(the class fixes it); delete the field or retune"
                )
            fields = {
                k: v for k, v in fields.items() if k not in unknown and k not in closed
            }
            tunables = {k: v for k, v in fields.items() if params[k].tunable}
            if not tunables:
                if not unknown and not closed:
                    problems.append(f"{where}: the {op_name} entry gives no tunable")
                continue
            try:
                converted = _from_json(cls, fields)
                Profile().add(cls, **converted)
            except (TypeError, ValueError) as error:
                problems.append(f"{where}: {error}")
                continue
            dims = {k: v for k, v in converted.items() if not params[k].tunable}
            live = any(
                issubclass(type(op), cls)
                and Profile.matches(dims, call_dims(op))
                and any(t not in op.pinned for t in tunables)
                for op in steps
            )
            if not live:
                shown = ", ".join(f"{k}={v!r}" for k, v in dims.items())
                problems.append(
                    f"{where}: {op_name}({shown}) matches no step of {about}'s "
                    f"versions ({where_versions}) on {name}: stale; retune or "
                    f"delete the entry"
                )
        if len(problems) > before:
            continue  # the file does not load: the entries above say why
        try:
            profile = Profile.load(path)
        except ValueError as error:
            problems.append(f"{path}: does not load: {error}")
            continue
        for shape in collect_shapes(recordings.values(), device, with_settings=False):
            try:
                given = profile.tunables_for(shape.cls, call_dims(shape.members[0].op))
            except ValueError as error:
                problems.append(f"{path}: {error}")
                continue
            lacking = [t for t in shape.tunables if t not in given]
            if lacking:
                notes.append(
                    f"{path}: no entry gives {lacking} for {shape} "
                    f"({shape.steps} steps): resolve() picks them"
                )
    return problems, notes


# -- the command line -------------------------------------------------------------


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
        "--out",
        type=Path,
        help="the profile directory to write (default: the application's own, "
        "shipped in the package)",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="processes measuring settings (default 1)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the profiles instead: list entries matching no step and "
        "fields the operators no longer declare (exit 1 if any)",
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

    try:
        app = find(args.application)
    except KeyError as error:
        return _fail(error.args[0])
    source = args.checkpoint or app.default_config()
    try:
        config = app.load_config(source)
    except (FileNotFoundError, ConfigError) as error:
        return _fail(f"--checkpoint {source}: {error}")
    label = f"{app.config_name(source)} (sha256 {app.config_digest(config)})"
    out = args.out or app.profiles_dir()
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
                f"python -m iron.lm.tune {app.name} --checkpoint {source}",
                file=sys.stderr,
            )
            return EXIT_CHECK
        print(f"{out}: clean for {app.name} {label} on {', '.join(devices)}")
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
    cache = args.cache or default_cache(app.name)
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
    return 0


if __name__ == "__main__":
    # Run the importable module's main, so --jobs workers find the same
    # functions by name whatever way processes start.
    from iron.lm.tune import main as _main

    raise SystemExit(_main())
