"""The cost model: a recording's modelled time per step, and its roofline.

Each operator reports ``cost(dev)`` (:class:`~iron.core.operator.Cost`): the
multiply-accumulates it does, the bytes it moves between DDR and the array,
and how its tunables spread and cut that work: the columns and cores it
uses, the kernel calls each core makes, and the bytes its tiling reads more
than once. A step's modelled time is::

    compute  = macs / (core_peak_macs_per_s * cores)
    memory   = (bytes + reread_bytes)
               / min(dma_bytes_per_s, shim_bytes_per_s_per_column * columns)
    calls_s  = calls * kernel_call_seconds        (cores call in parallel)
    stall_s  = stall_seconds                      (a core waiting on its DMA)
    reconf_s = loads * reconfigure_seconds     (array configurations loaded)
    seconds  = max(compute, memory) + calls_s + stall_s
               + dispatches * dispatch_seconds + reconf_s

Compute and memory overlap (double-buffered tiles); the per-call overhead
is charged on top, as if no DMA hid it, and so is the time a core waits on
its own DMA where a design single-buffers a tile (the operator's
``Cost.stall_seconds``: a GEMM's output tile at ``out_depth=1``). The dispatch overhead is one per step
when each step is its own xclbin, one for the whole version under a full ELF.
A step loads its array configuration first (``loads`` = 1) when each step is
its own xclbin (npu1's hardware contexts cycle through every step's image);
under a full ELF a step loads one when its operator differs from the previous
step's (consecutive steps of one operator share one configuration and one
``aiex.configure``, as :mod:`iron.runtime.npu.graph` emits them).
The model ignores placement, routing, memory-tile reuse and overlap between
steps; it drives tuning where no NPU is present (so it must see what the
tunables change) and the benchmark that sets a decode step against the
memory bandwidth bound (:attr:`Roofline.bandwidth_bound_s`, the bytes alone
at the NPU's DMA roof, without rereads). The DMA roof (``dma_bytes_per_s``)
is what the NPU's DMA path sustains, measured on npu2; the DDR's theoretical
bandwidth (``ddr_bytes_per_s``) is above what the NPU reaches and is not used.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from iron.core.device import Device, require_device
from iron.core.operator import Operator
from iron.core.recording import Recording

__all__ = ["Roofline", "StepTime", "roofline", "step_time"]


@dataclasses.dataclass(frozen=True)
class StepTime:
    """One step's modelled time and what bounds it.

    Attributes:
        index: The step's index in its recording.
        name: The operator's class name.
        macs: Multiply-accumulates (or element operations).
        bytes: Bytes moved between DDR and the array, each counted once.
        compute_s: ``macs`` at the peak bf16 MAC rate of the cores used.
        memory_s: ``bytes + reread_bytes`` at the lesser of the device's DMA
            roof and the shim DMA rate of the columns used.
        dispatch_s: The dispatch overhead charged to this step.
        seconds: ``max(compute_s, memory_s) + calls_s + stall_s + dispatch_s
            + reconfigure_s``.
        columns: Array columns the step uses.
        cores: Compute cores the step uses.
        calls: Kernel calls per core.
        reread_bytes: Bytes the tiling moves more than once.
        calls_s: ``calls`` times the device's ``kernel_call_seconds``.
        stall_s: Seconds the busiest core waits on its own DMA (the
            operator's ``Cost.stall_seconds``).
        loads: Array configurations the step loads before it runs (0 or 1).
        reconfigure_s: Seconds loading them (``loads`` times the device's
            ``reconfigure_seconds``).
    """

    index: int
    name: str
    macs: int
    bytes: int
    compute_s: float
    memory_s: float
    dispatch_s: float
    seconds: float
    columns: int = 1
    cores: int = 1
    calls: int = 0
    reread_bytes: int = 0
    calls_s: float = 0.0
    stall_s: float = 0.0
    loads: int = 0
    reconfigure_s: float = 0.0

    @property
    def bound(self) -> str:
        """What limits the step: ``compute``, ``memory``, ``calls``,
        ``dispatch`` or ``reconfigure``.

        The largest of the work (compute or memory, whichever is larger), the
        kernel-call overhead, the dispatch overhead and the configuration load.
        """
        work = max(self.compute_s, self.memory_s)
        if self.reconfigure_s > max(work, self.calls_s, self.dispatch_s):
            return "reconfigure"
        if self.dispatch_s > max(work, self.calls_s):
            return "dispatch"
        if self.calls_s > work:
            return "calls"
        return "compute" if self.compute_s >= self.memory_s else "memory"


def step_time(
    op: Operator, dev: Device, *, dispatches: int = 1, index: int = 0, loads: int = 0
) -> StepTime:
    """Model one operator call on ``dev`` with ``dispatches`` dispatches and
    ``loads`` array-configuration loads charged.

    See the module docstring for the formula.
    """
    cost = op.cost(dev)
    cores = cost.columns if cost.cores is None else cost.cores
    compute = cost.macs / (dev.core_peak_macs_per_s * cores) if cost.macs else 0.0
    rate = min(dev.dma_bytes_per_s, dev.shim_bytes_per_s_per_column * cost.columns)
    memory = (cost.bytes + cost.reread_bytes) / rate
    calls = cost.calls * dev.kernel_call_seconds
    dispatch = dispatches * dev.dispatch_seconds
    reconfigure = loads * dev.reconfigure_seconds
    return StepTime(
        index=index,
        name=type(op).__name__,
        macs=int(cost.macs),
        bytes=int(cost.bytes),
        compute_s=compute,
        memory_s=memory,
        dispatch_s=dispatch,
        seconds=max(compute, memory)
        + calls
        + cost.stall_seconds
        + dispatch
        + reconfigure,
        columns=int(cost.columns),
        cores=cores,
        calls=int(cost.calls),
        reread_bytes=int(cost.reread_bytes),
        calls_s=calls,
        stall_s=float(cost.stall_seconds),
        loads=loads,
        reconfigure_s=reconfigure,
    )


@dataclasses.dataclass(frozen=True)
class Roofline:
    """A recording's modelled time, step by step, against the device's limits.

    Attributes:
        device: The device modelled.
        name: The recording's name.
        full_elf: Whether the version is one dispatch (full ELF).
        steps: Each step's modelled time.
    """

    device: Device
    name: str
    full_elf: bool
    steps: Sequence[StepTime]

    @property
    def seconds(self) -> float:
        """The version's modelled time per call."""
        return sum(s.seconds for s in self.steps)

    @property
    def bytes(self) -> int:
        """Bytes moved between DDR and the array per call."""
        return sum(s.bytes for s in self.steps)

    @property
    def macs(self) -> int:
        """Multiply-accumulates per call."""
        return sum(s.macs for s in self.steps)

    @property
    def loads(self) -> int:
        """Array configurations loaded per call (see ``reconfigure_seconds``)."""
        return sum(s.loads for s in self.steps)

    @property
    def bandwidth_bound_s(self) -> float:
        """The time the bytes alone take at the DMA roof: no call is faster."""
        return self.bytes / self.device.dma_bytes_per_s

    def slowest(self, n: int = 5) -> list[StepTime]:
        """The ``n`` steps with the most modelled time, slowest first."""
        return sorted(self.steps, key=lambda s: (-s.seconds, s.index))[:n]

    def table(self) -> str:
        """A readable table of every step's modelled time."""
        lines = [
            f"{self.name} on {self.device.name} "
            f"({'full ELF' if self.full_elf else 'xclbin per step'}): "
            f"{self.seconds * 1e6:.1f} us modelled, bandwidth bound "
            f"{self.bandwidth_bound_s * 1e6:.1f} us",
            f"  {'#':>4}  {'operator':<18} {'MACs':>12} {'bytes':>12} "
            f"{'compute us':>11} {'memory us':>10} {'calls us':>9} "
            f"{'total us':>9}  bound",
        ]
        for s in self.steps:
            lines.append(
                f"  {s.index:>4}  {s.name:<18} {s.macs:>12} {s.bytes:>12} "
                f"{s.compute_s * 1e6:>11.2f} {s.memory_s * 1e6:>10.2f} "
                f"{s.calls_s * 1e6:>9.2f} {s.seconds * 1e6:>9.2f}  {s.bound}"
            )
        return "\n".join(lines)


def roofline(
    recording: Recording,
    dev: Device | str | None = None,
    *,
    full_elf: bool | None = None,
) -> Roofline:
    """Model ``recording`` on ``dev`` (else its own device, else the current one).

    Args:
        recording: The version to model.
        dev: The device; by default the one it was recorded for.
        full_elf: One dispatch for the whole version (True) or one per step
            (False); by default whether the device runs a full ELF.

    Raises:
        NotImplementedError: A step's operator reports no cost.
    """
    device = require_device(dev if dev is not None else recording.device)
    whole = device.full_elf if full_elf is None else full_elf
    steps = []
    previous = None
    for step in recording.steps:
        first = step.index == 0
        dispatches = (1 if first else 0) if whole else 1
        loads = 1 if not whole or step.op != previous else 0
        previous = step.op
        steps.append(
            step_time(
                step.op, device, dispatches=dispatches, index=step.index, loads=loads
            )
        )
    return Roofline(device, recording.name, whole, steps)
