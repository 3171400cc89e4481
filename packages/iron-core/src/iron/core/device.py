"""NPU device descriptions, and which one the current thread or task is bound to.

This module owns two things:

* :class:`Device`, a frozen record of the facts the planner, the operators and
  the cost model read about one NPU generation (array size, memories, buffer
  descriptors, shim DMA pattern limits, image packaging, peak compute, DDR
  bandwidth, shim DMA rate and kernel-call overhead), and its two instances
  :data:`NPU1` (XDNA, AIE2) and :data:`NPU2` (XDNA2, AIE2P). Each number says
  where it comes from.
* The *binding*: the device that calls which take no ``dev`` argument use. It
  lives in a :class:`contextvars.ContextVar`, so it is per thread and per asyncio
  task, never a process global. :func:`set_current_device` and
  :func:`use_device` bind one; without a binding the environment variable
  ``IRON_DEVICE`` is read; when neither gives one, :func:`require_device`
  takes the default the command line takes too
  (:func:`iron.runtime.default_device`: the NPU present, else npu2, which the
  emulated NPU runs) and logs once which it took. Only without iron-runtime
  installed does it raise :class:`NoDeviceError`.

Nothing here touches hardware: a :class:`Device` describes a device, it does not
open one.
"""

from __future__ import annotations

import contextvars
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = [
    "DEVICES",
    "ENV_VAR",
    "NPU1",
    "NPU2",
    "Device",
    "NoDeviceError",
    "as_device",
    "get_current_device",
    "require_device",
    "set_current_device",
    "use_device",
]

#: The environment variable read when no device is bound in the current context.
ENV_VAR = "IRON_DEVICE"

# Sources cited below, by label:
#   [facts]  AMD's IRON library (https://github.com/amd/IRON): AGENTS.md
#            ("Hardware Constraints"), conftest.py (n_cols), tiling.py,
#            dma.py, gemm.py.
#   [mlir]   mlir-aie (https://github.com/Xilinx/mlir-aie, the era of the
#            pinned v1.4.1): include/aie/Dialect/AIE/IR/AIETargetModel.h and
#            lib/Dialect/AIEX/IR/AIEXDialect.cpp (the dma_memcpy_nd verifier).
#   [UG1603] AMD UG1603, "AI Engine Data Memory": AIE-ML / AIE-ML v2 tiles have
#            64 KB of data memory in eight single-port banks.
#   [AM020]  AMD AM020, Versal AIE-ML Architecture Manual (vector unit widths;
#            "Array Interface DMA Memory-Mapped AXI4 Master Interface": the
#            interface (shim) tile DMA has two MM2S channels reading external
#            memory and two S2MM channels writing it, a 32-bit stream each, "each
#            channel can sustain 4 bytes per cycle").

# The array clocks the peak figures below assume (see peak_bf16_macs_per_s);
# the shim DMA rate and the kernel-call overhead are counted in the same cycles.
_NPU1_CLOCK_HZ = 1.0e9
_NPU2_CLOCK_HZ = 1.5e9
# Shim DMA channels per column, both directions: 2 MM2S + 2 S2MM [mlir: the
# getNum*ShimMuxConnections of the DMA bundle], [AM020]; each moves a 32-bit
# stream word, 4 bytes, per cycle [AM020]. 16 bytes per cycle per column.
_SHIM_BYTES_PER_CYCLE = (2 + 2) * 4
# ASSUMPTION, not a measurement: cycles one kernel invocation on a core costs
# besides its arithmetic: the call and return, the software-pipelined loop's
# prologue and epilogue, and one object-FIFO lock acquire and release per
# operand with the DMA handshake they wait on. A few hundred cycles is the
# order those add up to; 300 is the figure the model uses until an NPU
# measurement replaces it.
_KERNEL_CALL_CYCLES = 300
# ASSUMPTION, from the nearest public measurement (no public figure of a PDI
# load or a hardware-context switch on Phoenix was found): seconds to load one
# array configuration before a step runs. On NPU1 every step is an xclbin of
# its own, and ~277 of them a token cycle through the driver's 6 hardware
# contexts (iron/runtime/xrt.py), so each step creates a context: the driver
# registers its xclbin and the firmware loads its PDI. nod-ai/iree-amd-aie
# issue #380 (https://github.com/nod-ai/iree-amd-aie/issues/380, 2024-06)
# measured 19.82-21.66 ms to load three xclbins and open a kernel of each:
# about 6.6 ms a load (the thread does not name the device; the one-xclbin
# setup took as long, so part of it may be fixed cost, and the figure is an
# upper estimate). For scale, a whole-array reconfiguration inside one
# context (control packets, no context created) measured 0.08-0.19 ms on a
# Strix board (nod-ai/iree-amd-aie issue #1187,
# https://github.com/nod-ai/iree-amd-aie/issues/1187).
_NPU1_RECONFIGURE_SECONDS = 6.6e-3


@dataclass(frozen=True)
class Device:
    """The facts IRON uses about one NPU generation.

    Instances are immutable and compared by value; use :data:`NPU1` and
    :data:`NPU2` (or :func:`as_device` with a name) rather than building one.
    ``str(device)`` is its name.

    Attributes:
        name: The device name, ``"npu1"`` or ``"npu2"`` (mlir-aie's names).
        arch: The AIE architecture and kernel directory, ``"aie2"`` or ``"aie2p"``.
        columns: Usable array columns.
        core_rows: Compute-tile rows per column (rows 2-5; row 0 is the shim,
            row 1 the memory tile).
        core_memory_bytes: Data memory of one compute tile (L1).
        core_memory_banks: Banks that memory is split into, as mlir-aie's
            bank-aware allocator counts them (4 of 16 KiB; see the source).
        mem_tile_bytes: Memory of one memory tile (L2); one per column.
        shim_bds: Buffer descriptors per shim tile.
        core_bds: Buffer descriptors per compute tile.
        mem_tile_bds: Buffer descriptors per memory tile.
        dma_size_bits: Width of a shim DMA size (wrap) field.
        dma_stride_bits: Width of a shim DMA stride (step) field, counted in
            ``dma_granule_bytes`` units.
        dma_granule_bytes: The unit DMA lengths and strides count in.
        dma_iteration_max: Largest shim iteration (outermost) count.
        dma_repeat_max: Largest task repeat count.
        dma_alignment_bytes: Alignment of DMA offsets, strides and innermost
            transfer sizes.
        full_elf: Whether a whole graph packages as one full ELF (else one
            xclbin per step).
        bfp16: Whether the device multiplies in bfp16 (``Precision.MEDIUM``).
        scratchpad_words: Per-call 32-bit words one image can read.
        peak_bf16_macs_per_s: Peak bf16 multiply-accumulates per second over
            all compute tiles (for the cost model; derived, see the source).
        ddr_bytes_per_s: Theoretical DDR bandwidth of the platform (derived,
            see the source): a fact about the memory, not what the NPU reaches.
        dispatch_seconds: Host cost of one dispatch (one run of one image).
        shim_bytes_per_s_per_column: Bytes per second one column's shim DMA
            moves between DDR and the array, reads and writes together (for
            the cost model; derived, see the source).
        kernel_call_seconds: Overhead of one kernel invocation on a core, on
            top of its arithmetic (for the cost model; an assumption, see the
            source).
        dma_bytes_per_s: Bytes per second the NPU's DMA path sustains between
            DDR and the array with every column moving (for the cost model:
            the roof a step's bytes meet, and the decode bandwidth bound):
            measured on npu2, the theoretical DDR figure on npu1 (see the
            source).
        reconfigure_seconds: Seconds to load one array configuration (a
            step's xclbin into a hardware context on npu1; a full ELF's
            ``load_pdi`` on npu2) before the steps that use it run (for the
            cost model; an assumption on both devices, see the source).
    """

    name: str
    arch: str
    columns: int
    core_rows: int
    core_memory_bytes: int
    core_memory_banks: int
    mem_tile_bytes: int
    shim_bds: int
    core_bds: int
    mem_tile_bds: int
    dma_size_bits: int
    dma_stride_bits: int
    dma_granule_bytes: int
    dma_iteration_max: int
    dma_repeat_max: int
    dma_alignment_bytes: int
    full_elf: bool
    bfp16: bool
    scratchpad_words: int
    peak_bf16_macs_per_s: float
    ddr_bytes_per_s: float
    dispatch_seconds: float
    shim_bytes_per_s_per_column: float
    kernel_call_seconds: float
    dma_bytes_per_s: float
    reconfigure_seconds: float

    @property
    def compute_tiles(self) -> int:
        """Usable compute tiles: ``columns * core_rows``."""
        return self.columns * self.core_rows

    @property
    def core_peak_macs_per_s(self) -> float:
        """Peak bf16 MACs per second of one compute tile: the peak over all tiles."""
        return self.peak_bf16_macs_per_s / self.compute_tiles

    @property
    def core_memory_bank_bytes(self) -> int:
        """Bytes in one compute-tile memory bank (16 KiB on both devices)."""
        return self.core_memory_bytes // self.core_memory_banks

    def __str__(self) -> str:
        return self.name


NPU1 = Device(
    name="npu1",
    # Phoenix / Hawk Point, XDNA; kernel directory "aie2" [facts].
    arch="aie2",
    # 4 usable columns (5 physical, column 0 not accessible) [facts: AGENTS.md,
    # conftest n_cols=4]; mlir-aie's npu1 is 4 columns [mlir].
    columns=4,
    # Rows 2-5 are compute tiles: 4 x 4 = 16 [facts], [mlir].
    core_rows=4,
    # 64 KiB per compute tile (getLocalMemorySize 0x10000) [mlir], [facts].
    core_memory_bytes=65536,
    # 4 banks of 16 KiB, as mlir-aie's bank-aware buffer allocator keeps a
    # buffer within one (AIETargetModel.h: AIE2TargetModel::getNumBanks returns
    # 4 for a compute tile, 8 for a memory tile, and npu1/npu2 derive from
    # AIE2TargetModel; lib/Dialect/AIE/Transforms/AIEAssignBuffers.cpp:
    # bankSize = getLocalMemorySize() / getNumBanks) [mlir]. aiecc places
    # IRON's buffers, so this is the bank that decides where they land. The
    # hardware manual's eight single-port banks of 8 KiB [UG1603] (and AMD
    # IRON's tiling.py L1_BANK_BYTES = 8192 [facts]) are the physical ones: a
    # buffer inside one allocator bank may still span two of them.
    core_memory_banks=4,
    # 512 KiB per memory tile (getMemTileSize 0x80000) [mlir], [facts].
    mem_tile_bytes=524288,
    # 16 BDs per shim and compute tile, 48 per memory tile (24 per channel
    # parity) [mlir: getNumBDs], [facts: get_num_bds].
    shim_bds=16,
    core_bds=16,
    mem_tile_bds=48,
    # Shim wrap 10 bits (<= 1023), step 20 bits, both in 32-bit words [mlir
    # field widths table], [facts: tiling.DMA_BD_MAX_WRAP].
    dma_size_bits=10,
    dma_stride_bits=20,
    dma_granule_bytes=4,
    # Iteration dimension is 6 bits (<= 64); repeat_count <= 255 [mlir], [facts].
    dma_iteration_max=64,
    dma_repeat_max=255,
    # Offsets, non-unit strides and innermost sizes in multiples of 4 bytes
    # [mlir: dma_memcpy_nd verifier].
    dma_alignment_bytes=4,
    # Always xclbin; a fused multi-step sequence is refused [facts: AGENTS.md].
    full_elf=False,
    # No hardware bfp16; Peano's __AIE_HAS_BFP16__ is AIE2P-only [facts], [mlir].
    bfp16=False,
    # Per-call words one image reads; the same budget on both devices.
    scratchpad_words=32,
    # Derived: 16 compute tiles x 128 bf16 MACs/cycle (AIE-ML vector unit
    # [AM020]; one bf16 mmul is 4x8x4 = 128 MACs [facts: gemm.py geometry])
    # x ~1.0 GHz (Phoenix's 10 TOPS int8 headline = 20 physical tiles x 256
    # int8 MACs x 2 ops x 1.0 GHz) = 2.048e12 MAC/s.
    peak_bf16_macs_per_s=16 * 128 * _NPU1_CLOCK_HZ,
    # Derived: LPDDR5-6400 on a 128-bit bus = 6400e6 transfers/s x 16 bytes
    # = 102.4e9 B/s theoretical (sustained is lower).
    ddr_bytes_per_s=6400e6 * 16,
    # About 160 us per dispatch [facts: AGENTS.md "Dispatch cost"].
    dispatch_seconds=160e-6,
    # Derived: 4 shim channels (2 MM2S + 2 S2MM) x 4 bytes/cycle x 1.0 GHz =
    # 16e9 B/s per column [AM020], [mlir]; 4 columns = 64e9 B/s, under the DDR
    # figure. Reads alone have half of it (two MM2S channels): the sum is
    # optimistic for traffic that is mostly one way.
    shim_bytes_per_s_per_column=_SHIM_BYTES_PER_CYCLE * _NPU1_CLOCK_HZ,
    # Assumed: 300 cycles at 1.0 GHz = 0.3 us per kernel call (see
    # _KERNEL_CALL_CYCLES).
    kernel_call_seconds=_KERNEL_CALL_CYCLES / _NPU1_CLOCK_HZ,
    # ASSUMPTION: no measured DMA roof for npu1 (Phoenix / Hawk Point) was
    # found, so the model keeps the theoretical DDR figure above; the four
    # columns' shim rate (64e9 B/s, see shim_bytes_per_s_per_column) is what
    # bounds a call there. If npu1 keeps npu2's measured fraction of its
    # theoretical bandwidth (63 of 120 GB/s, below), it reaches about 54e9
    # B/s: an estimate, not a measurement, so it is not used.
    dma_bytes_per_s=6400e6 * 16,
    # ASSUMED: about 6.6 ms a step's configuration (see
    # _NPU1_RECONFIGURE_SECONDS); charged once a step, every step being an
    # xclbin of its own.
    reconfigure_seconds=_NPU1_RECONFIGURE_SECONDS,
)

NPU2 = Device(
    name="npu2",
    # Strix / Strix Halo / Krackan, XDNA2; kernel directory "aie2p" [facts], [mlir].
    arch="aie2p",
    # 8 columns, same row layout as npu1 [facts: conftest n_cols=8], [mlir].
    columns=8,
    core_rows=4,
    # Memories, BDs and shim DMA limits are the same as on npu1 [facts], [mlir].
    core_memory_bytes=65536,
    core_memory_banks=4,
    mem_tile_bytes=524288,
    shim_bds=16,
    core_bds=16,
    mem_tile_bds=48,
    dma_size_bits=10,
    dma_stride_bits=20,
    dma_granule_bytes=4,
    dma_iteration_max=64,
    dma_repeat_max=255,
    dma_alignment_bytes=4,
    # One full ELF per graph version [facts: AGENTS.md].
    full_elf=True,
    # bfp16 block formats are NPU2-only (isSupportedBlockFormat) [mlir]; GEMM
    # and MHA emulate bf16 mmul with bfp16 by default [facts].
    bfp16=True,
    scratchpad_words=32,
    # Derived: 32 compute tiles x 256 bf16 MACs/cycle x ~1.5 GHz = 1.2288e13
    # MAC/s. AMD's 50 TOPS int8 headline over 32 tiles at ~1.5 GHz implies 512
    # int8 MACs/cycle/tile (50e12 / 2 / 32 / 1.5e9 ~ 520); bf16 runs at half.
    peak_bf16_macs_per_s=32 * 256 * _NPU2_CLOCK_HZ,
    # Derived: LPDDR5X-7500 on a 128-bit bus = 7500e6 x 16 bytes = 120e9 B/s
    # theoretical.
    ddr_bytes_per_s=7500e6 * 16,
    # About 160 us per dispatch, same on both [facts: AGENTS.md].
    dispatch_seconds=160e-6,
    # Derived: the same 4 shim channels x 4 bytes/cycle at ~1.5 GHz = 24e9 B/s
    # per column [AM020], [mlir]; 8 columns = 192e9 B/s, over the DDR figure,
    # so DDR bounds a call that uses every column. The 32-bit channel is
    # AIE-ML's [AM020]; AMD's AIE-ML v2 manual (AM027) widens memory-tile DMA
    # streams to 64 bits, and no interface-tile figure for AIE2P was found, so
    # this may be low by up to 2x.
    shim_bytes_per_s_per_column=_SHIM_BYTES_PER_CYCLE * _NPU2_CLOCK_HZ,
    # Assumed: 300 cycles at 1.5 GHz = 0.2 us per kernel call.
    kernel_call_seconds=_KERNEL_CALL_CYCLES / _NPU2_CLOCK_HZ,
    # Measured: a memcpy through the NPU (DDR -> array -> DDR over every
    # column) sustains 63-70 GB/s on XDNA2: the roof of AMD's IRON
    # repository, pull request #195 (https://github.com/amd/IRON/pull/195),
    # as this project's issue 20 quotes it (the pull request's own text was
    # not retrievable here to check). The model takes the low end, 63e9 B/s,
    # about half the theoretical DDR figure above. The same issue puts a
    # tuned bf16 GEMM at about 47 GB/s there and FastFlowLM's 4-bit
    # Llama-3.2-1B decode at about 87% of a 60 GB/s roof: no design
    # reported runs above this roof.
    dma_bytes_per_s=63e9,
    # ASSUMED FREE, not measured: a full ELF's aiex.configure blocks each
    # lower to a load_pdi (mlir-aie AIEMaterializeRuntimeSequences.cpp,
    # InsertLoadPdiForConfigurePattern): about 229 a Llama-3.2-1B token
    # (iron.runtime.npu.graph.GraphDesign.loads). No public figure of a
    # load_pdi inside a running full ELF was found; at the 0.08-0.19 ms a
    # whole-array reconfiguration measured on Strix (nod-ai/iree-amd-aie issue
    # #1187) they would add 18-44 ms a token. Not charged until measured.
    reconfigure_seconds=0.0,
)

#: The known devices by name.
DEVICES: dict[str, Device] = {"npu1": NPU1, "npu2": NPU2}


def as_device(dev: Device | str) -> Device:
    """Return the device ``dev`` names, or ``dev`` itself if it is a Device.

    Args:
        dev: A :class:`Device`, or a device name (``"npu1"``, ``"npu2"``),
            matched case-insensitively, surrounding spaces ignored.

    Returns:
        The :class:`Device`.

    Raises:
        ValueError: ``dev`` is a string that names no known device.
        TypeError: ``dev`` is neither a Device nor a string.
    """
    if isinstance(dev, Device):
        return dev
    if isinstance(dev, str):
        try:
            return DEVICES[dev.strip().lower()]
        except KeyError:
            known = ", ".join(repr(n) for n in DEVICES)
            raise ValueError(
                f"unknown device {dev!r}; known devices are {known}"
            ) from None
    raise TypeError(
        f"expected a Device or a device name such as 'npu2', "
        f"got {type(dev).__name__} {dev!r}"
    )


class NoDeviceError(RuntimeError):
    """Raised by :func:`require_device` when no device is bound or named and
    iron-runtime, which finds the default device, is not installed."""


logger = logging.getLogger("iron")
# The default devices already announced (the notice is logged once each).
_announced: set[str] = set()


def _default_device() -> Device:
    """The device the command line takes too when none is named, announced once.

    :func:`iron.runtime.default_device` decides (the NPU XRT reports, else
    npu2, which the emulated NPU runs): one function for the Python API and the
    CLI. The core does not depend on iron-runtime: it asks the backend the
    ``iron.backends`` entry point names (:func:`iron.core.plugins.backend`).

    Raises:
        NoDeviceError: iron-runtime is not installed.
    """
    from iron.core import plugins

    try:
        runtime = plugins.backend()
    except plugins.MissingDistributionError:
        known = ", ".join(DEVICES)
        raise NoDeviceError(
            "no NPU device is bound, and iron-runtime (which picks the NPU "
            "present, else the emulated npu2) is not installed; install it "
            "(pip install iron-runtime), or bind one with "
            'iron.set_current_device("npu2"), or for a block with '
            '`with iron.use_device("npu2"):`, or set the environment variable '
            f"IRON_DEVICE=npu2 (known devices: {known})"
        ) from None
    device = as_device(runtime.default_device())
    if device.name not in _announced:
        _announced.add(device.name)
        logger.warning(
            "no device named: using %s (the NPU present, else npu2, which the "
            "emulated NPU runs; the iron-lm command line takes the same); name "
            'one with iron.use_device("npu1") or IRON_DEVICE=npu1 to choose',
            device.name,
        )
    return device


# The explicit binding of the current context; None means "not bound here".
_current: contextvars.ContextVar[Device | None] = contextvars.ContextVar(
    "iron_current_device", default=None
)


def set_current_device(dev: Device | str | None) -> None:
    """Bind ``dev`` as the current device of this thread or task.

    The binding lives in a :class:`contextvars.ContextVar`: other threads (and
    asyncio tasks created before the call) do not see it. Prefer
    :func:`use_device` to bind for one block.

    Args:
        dev: A :class:`Device` or device name; ``None`` clears the binding, so
            :func:`get_current_device` falls back to ``IRON_DEVICE``.

    Raises:
        ValueError: ``dev`` names no known device (nothing is changed).
    """
    _current.set(None if dev is None else as_device(dev))


def get_current_device() -> Device | None:
    """Return the device bound in this context, else ``IRON_DEVICE``'s, else None.

    Returns:
        The device bound by :func:`set_current_device` or :func:`use_device`;
        otherwise the one the environment variable ``IRON_DEVICE`` names (read
        on every call; empty counts as unset); otherwise ``None``.

    Raises:
        ValueError: ``IRON_DEVICE`` is set to a name that is not a known device.
    """
    bound = _current.get()
    if bound is not None:
        return bound
    named = os.environ.get(ENV_VAR, "").strip()
    if not named:
        return None
    try:
        return as_device(named)
    except ValueError:
        known = ", ".join(DEVICES)
        raise ValueError(
            f"environment variable {ENV_VAR}={named!r} names no known device; "
            f"set it to one of: {known}"
        ) from None


@contextmanager
def use_device(dev: Device | str | None) -> Iterator[Device | None]:
    """Bind ``dev`` for the ``with`` block, then restore the previous binding.

    The previous binding is restored when the block exits, also when it
    raises. Nested blocks restore in order.

    Example:
        >>> with use_device("npu2") as dev:
        ...     str(dev)
        'npu2'

    Args:
        dev: A :class:`Device` or device name; ``None`` clears the binding for
            the block (``IRON_DEVICE`` then applies).

    Yields:
        The device bound (``None`` if ``dev`` is ``None``).

    Raises:
        ValueError: ``dev`` names no known device (nothing is bound).
    """
    device = None if dev is None else as_device(dev)
    token = _current.set(device)
    try:
        yield device
    finally:
        _current.reset(token)


def require_device(dev: Device | str | None = None) -> Device:
    """Return ``dev`` if given, else the current device, else the default one.

    The default is the one ``iron-lm`` takes without ``--device``
    (:func:`iron.runtime.default_device`: the NPU present, else npu2, which
    the emulated NPU runs); a warning on the ``iron`` logger says once which
    it took.

    Args:
        dev: A :class:`Device` or device name that overrides the binding.

    Returns:
        ``as_device(dev)`` if ``dev`` is given, else :func:`get_current_device`,
        else the default device.

    Raises:
        NoDeviceError: ``dev`` is None, no device is bound or named by
            ``IRON_DEVICE``, and iron-runtime is not installed; the message
            names the three ways to bind one.
        ValueError: ``dev`` or ``IRON_DEVICE`` names no known device.
    """
    if dev is not None:
        return as_device(dev)
    current = get_current_device()
    if current is None:
        return _default_device()
    return current
