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
application's versions, fields a newer operator no longer declares and
values outside their domains (exit 1 with the list; 0 when clean); it does
not tune, so "clean" does not say a tune would choose the same values:
``--shipped`` compares each freshly tuned file with the shipped one, entry
by entry (exit 1 where a tunable moved).

Usage::

    python -m iron.lm.tune llama --checkpoint DIR_OR_CONFIG_JSON \\
        [--device npu1|npu2] [--ops GEMV,GEMM] [--weights bf16|q8|q4[,...]] \\
        [--out DIR] [--shipped] [--jobs N]
    python -m iron.lm.tune --check llama [--checkpoint ...] [--weights ...] [--out DIR]

``--out`` defaults to ``./profiles`` in the working directory; the profiles
inside the package are rewritten only when ``--out`` names their directory. ``--weights``
(default ``bf16``) names the weights the versions hold, comma-separated:
``q8`` or ``q4`` records them with the matrices packed, as ``iron-lm
generate --weights q4`` holds them, so ``QGEMV`` and ``QGEMM`` shapes are
tuned (``--weights q4,q8 --ops QGEMV`` tunes both formats' ``QGEMV``);
``--check`` records all three unless told otherwise.

The package, one job a module: :mod:`~iron.lm.tune.shapes` (operator shapes
and their settings), :mod:`~iron.lm.tune.measure` (the cost model and device
timing), :mod:`~iron.lm.tune.cache` (the measurements cache),
:mod:`~iron.lm.tune.run` (tuning a device and writing its profile),
:mod:`~iron.lm.tune.check` (``--check``) and :mod:`~iron.lm.tune.cli` (the
command line). Every name below is importable from ``iron.lm.tune``.
"""

from __future__ import annotations

# Names outside __all__ that iron.lm.tune has always had (tests reach some of
# them: tune._evaluate, tune._canon, tune.call_dims, tune.EXIT_CHECK) stay
# importable from here (the F401 waivers below mark them as re-exports).
from iron.lm.tune.cache import (
    Cache,  # noqa: F401
    default_cache,
)
from iron.lm.tune.check import check_profiles
from iron.lm.tune.cli import (
    EXIT_CHECK,  # noqa: F401
    EXIT_ERROR,  # noqa: F401
    EXIT_INTERRUPTED,  # noqa: F401
    main,
)
from iron.lm.tune.measure import (
    MODELLED,
    ROUNDS,  # noqa: F401
    WARMUP,  # noqa: F401
    Measure,
    TuneError,
    _evaluate,  # noqa: F401
    _evaluate_batch,  # noqa: F401
    measure_for_backend,
    modelled_seconds,
    time_on_device,
)
from iron.lm.tune.run import TuneReport, tune
from iron.lm.tune.shapes import (
    MAX_SETTINGS,
    Member,  # noqa: F401
    Shape,
    _canon,  # noqa: F401
    call_dims,  # noqa: F401
    collect_shapes,
    entry_dims,  # noqa: F401
)

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
