"""Tuning one device: measure every setting of every shape, write the profile.

Owns step 5 of :mod:`iron.lm.tune` and the run around it: :func:`tune`
collects the shapes (:mod:`iron.lm.tune.shapes`), reads what the cache
(:mod:`iron.lm.tune.cache`) already holds, measures the rest (in ``--jobs``
processes when the measure allows), keeps the fastest setting per shape,
and rewrites ``<out>/<device>.json``; :class:`TuneReport` says what it did.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import logging
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from iron.core.device import Device, as_device
from iron.core.profile import Profile
from iron.lm.tune.cache import Cache, _code, _Writer, default_cache
from iron.lm.tune.legal import first_legal
from iron.lm.tune.measure import (
    MODELLED,
    Measure,
    TuneError,
    _evaluate,
    _evaluate_batch,
)
from iron.lm.tune.shapes import (
    MAX_SETTINGS,
    Member,
    Shape,
    _canon,
    _catalog_names,
    _dims_key,
    _plain,
    collect_shapes,
)

__all__ = ["TuneReport", "tune"]

logger = logging.getLogger("iron.lm.tune")


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
        kept: Per operator the run did not tune, how many of the profile's
            entries were kept as they were (``"QGEMV: 8"``).
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
    kept: list[str] = dataclasses.field(default_factory=list)

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
        if self.kept:
            lines.append(
                f"  kept the entries of operators this run did not tune "
                f"({', '.join(self.kept)}); --weights tunes the packed ones, "
                f"--check lists any that are stale"
            )
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


def _kept(
    path: Path, replaced: set[str], ops: list[str] | None
) -> list[tuple[type, dict, dict]]:
    """The entries of the profile at ``path`` this run keeps: those of every
    operator not in ``replaced`` (catalog names).

    ``replaced`` is ``--ops`` when given; else the operators this run tunes,
    so a whole rewrite replaces their entries (stale shapes go) and keeps the
    others: tuning one weights format never drops another's (QGEMV's when
    only bf16 is tuned). A profile that does not load is a ``TuneError``
    with ``--ops``; else it is rewritten whole, with a warning.
    """
    if not path.is_file():
        return []
    try:
        existing = Profile.load(path)
    except ValueError as error:
        if ops is None:
            logger.warning("%s does not load (%s): rewriting it whole", path, error)
            return []
        raise TuneError(
            f"--ops {','.join(ops)} keeps the other entries of {path}, "
            f"but it does not load: {error}. Rerun without --ops to "
            f"rewrite it whole"
        ) from error
    names = _catalog_names()
    return [e for e in existing if names.get(e[0]) not in replaced]


def _task_key(
    dev: Device, measure: Measure, shape: Shape, member: Member, setting: Mapping
) -> tuple:
    # As a plain class: mypy takes type[Operator] for unhashable, as Operator
    # defines __hash__ for its instances.
    cls: type = shape.cls
    return (
        dev.name,
        measure.key,
        _code(cls, measure.key),
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
    recordings = application.versions(config, device)
    shapes = collect_shapes(
        recordings.values(), device, ops=wanted, max_settings=max_settings
    )
    report = TuneReport(device.name, path, Profile(), measure.label)
    names = _catalog_names()
    tuned = {names.get(s.cls, s.cls.__name__) for s in shapes}
    replaced = set(wanted) if wanted is not None else tuned
    kept = _kept(path, replaced, wanted)
    if wanted is None:
        counts = collections.Counter(names.get(e[0], e[0].__name__) for e in kept)
        report.kept = [f"{name}: {count}" for name, count in sorted(counts.items())]
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
        ranked: list[tuple[tuple, dict[str, Any]]] = []
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
            ranked.append(((total, not is_default, index), setting))

        # the fastest setting whose NPU designs are legal (iron.lm.tune.legal)
        def ops_of(setting: dict[str, Any], shape: Shape = shape) -> list[Any]:
            return [m.op.replace(**_effective(m, setting)) for m in shape.members]

        best = first_legal(
            sorted(ranked, key=lambda r: r[0]),
            ops_of,
            device,
            str(shape),
        )
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
