"""Measuring one setting: the cost model or device timing.

Owns step 4 of :mod:`iron.lm.tune`: a :class:`Measure` says how a setting's
time is obtained (on the emulated NPU the device cost model's
:func:`modelled_seconds`; on the xrt backend :func:`time_on_device`, the
median wall time of device calls after warm-ups), :func:`measure_for_backend`
picks it for the active backend, and ``_evaluate`` constructs, checks and
measures one setting (a setting the operator refuses is a result too).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from ml_dtypes import bfloat16

from iron.core.cost import step_time
from iron.core.device import Device, as_device, use_device
from iron.core.operator import Operator

__all__ = [
    "MODELLED",
    "ROUNDS",
    "WARMUP",
    "Measure",
    "TuneError",
    "measure_for_backend",
    "modelled_seconds",
    "time_on_device",
]

#: Device calls before timing starts, and timed calls per setting (xrt).
WARMUP = 3
ROUNDS = 10


class TuneError(RuntimeError):
    """The tune cannot run as asked (the message names what and the fix)."""


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
        TuneError: The backend is xrt and it cannot run here (the machine
            lacks an NPU, pyxrt or the driver); the message says what is
            missing and how to tune on the emulated NPU instead.
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
