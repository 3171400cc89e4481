"""Every assumption of the cost model (``iron.core.cost``), with its source.

One row per figure the model takes from ``iron.NPU1`` / ``iron.NPU2`` or
builds into its formula, with its value on each device, how it was obtained
(measured, derived, assumed) and where it comes from. Figures 5, 7 and 9 print
this table beside what they model; ``iron/core/device.py`` carries the same
sources beside each value.
"""

from __future__ import annotations

from typing import Any

import iron

IRON_AGENTS = "https://github.com/amd/IRON/blob/main/AGENTS.md"
IRON_PR_195 = "https://github.com/amd/IRON/pull/195"
AM020 = "AMD AM020, Versal AI Engine ML architecture manual (AIE-ML vector unit; interface tile DMA)"
MLIR_AIE = "https://github.com/Xilinx/mlir-aie (AIETargetModel.h: shim DMA channels per column)"
IREE_380 = "https://github.com/nod-ai/iree-amd-aie/issues/380"
IREE_1187 = "https://github.com/nod-ai/iree-amd-aie/issues/1187"


def _g(x: float) -> str:
    return f"{x / 1e9:g} G"


def rows() -> list[list[Any]]:
    """The table's rows: assumption, npu1, npu2, kind, source."""
    n1, n2 = iron.NPU1, iron.NPU2
    return [
        [
            "bytes per second a step's DMA moves (dma_bytes_per_s)",
            f"{_g(n1.dma_bytes_per_s)}B/s",
            f"{_g(n2.dma_bytes_per_s)}B/s",
            "npu2 measured (63-70 GB/s, low end taken); npu1 assumed: no "
            "measurement found, the theoretical DDR figure is kept (its 4 "
            "columns' shim rate, 64 GB/s, bounds it)",
            f"amd/IRON pull request #195 ({IRON_PR_195}), as cited in issue 20",
        ],
        [
            "theoretical DDR bandwidth (ddr_bytes_per_s; no longer used by the model)",
            f"{_g(n1.ddr_bytes_per_s)}B/s",
            f"{_g(n2.ddr_bytes_per_s)}B/s",
            "derived: LPDDR5-6400 / LPDDR5X-7500 x 128-bit bus",
            "memory type of the platforms (Phoenix / Strix)",
        ],
        [
            "shim DMA rate per column (shim_bytes_per_s_per_column)",
            f"{_g(n1.shim_bytes_per_s_per_column)}B/s",
            f"{_g(n2.shim_bytes_per_s_per_column)}B/s",
            "derived: 2 MM2S + 2 S2MM channels x 4 bytes/cycle x the array clock",
            f"{AM020}; {MLIR_AIE}",
        ],
        [
            "array clock",
            "1.0 GHz",
            "1.5 GHz",
            "derived from AMD's TOPS headlines (10 TOPS Phoenix, 50 TOPS "
            "XDNA2) over tiles and int8 MACs per cycle",
            "AMD product pages; iron/core/device.py",
        ],
        [
            "peak bf16 MACs per second (peak_bf16_macs_per_s)",
            f"{n1.peak_bf16_macs_per_s / 1e12:g} T",
            f"{n2.peak_bf16_macs_per_s / 1e12:g} T",
            "derived: compute tiles x bf16 MACs/cycle (128 AIE-ML, 256 "
            "AIE-ML v2) x clock",
            f"{AM020}; {IRON_AGENTS} (gemm mmul shapes)",
        ],
        [
            "overhead of one kernel call on a core (kernel_call_seconds)",
            f"{n1.kernel_call_seconds * 1e6:g} us",
            f"{n2.kernel_call_seconds * 1e6:g} us",
            "ASSUMED: 300 cycles (call and return, loop prologue and epilogue, "
            "one lock acquire and release per operand); no measurement yet",
            "none: replace with an NPU measurement",
        ],
        [
            "host cost of one dispatch (dispatch_seconds)",
            f"{n1.dispatch_seconds * 1e6:g} us",
            f"{n2.dispatch_seconds * 1e6:g} us",
            "measured by AMD (about 160 us)",
            f"{IRON_AGENTS} (Dispatch cost)",
        ],
        [
            "load of one array configuration (reconfigure_seconds)",
            f"{n1.reconfigure_seconds * 1e3:g} ms a step",
            f"{n2.reconfigure_seconds * 1e3:g} ms (not charged)",
            "ASSUMED on both. npu1: each step is its own xclbin and ~277 a "
            "token cycle through 6 hardware contexts, so every step creates "
            "one; no Phoenix PDI-load figure was found, and the nearest "
            "measurement, 19.8-21.7 ms to load three xclbins and open their "
            "kernels (device not named), gives about 6.6 ms a load. npu2: a "
            "full ELF's aiex.configure blocks each load_pdi (about 229 a 1B "
            "token, consecutive steps of one operator sharing one); assumed "
            "free until measured: at the 0.08-0.19 ms a whole-array "
            "reconfiguration measured on Strix they would add 18-44 ms a token",
            f"nod-ai/iree-amd-aie issue #380 ({IREE_380}); issue #1187 "
            f"({IREE_1187}); mlir-aie AIEMaterializeRuntimeSequences.cpp",
        ],
        [
            "dispatches per call of a version",
            "one per step (xclbin each)",
            "one (full ELF)",
            "fact of the packaging",
            f"{IRON_AGENTS} (packaging)",
        ],
        [
            "compute and memory overlap within a step",
            "yes",
            "yes",
            "ASSUMED: double-buffered tiles (object FIFOs of depth 2) keep "
            "the DMA moving while a core computes: time = max(compute, memory) "
            "(a GEMM's output at out_depth=1 is single-buffered: see its wait)",
            "the model's formula (iron/core/cost.py)",
        ],
        [
            "a GEMM core's single output tile (out_depth=1) waits on its drain",
            "yes",
            "yes",
            "derived: before storing a tile the core waits what the previous "
            "tile's drain (tile_m x tile_n bf16 at one DMA channel's 4 bytes a "
            "cycle, a quarter of a column's shim rate) outlasts this tile's K "
            "loop (its MACs at the core's peak plus its kernel calls: the "
            "loop's shortest, so the wait's upper bound), charged on top",
            f"{AM020}; GEMM.cost (iron/operators/matmul.py)",
        ],
        [
            "kernel-call and dispatch overhead overlap nothing",
            "yes",
            "yes",
            "ASSUMED (pessimistic): charged on top of max(compute, memory)",
            "the model's formula (iron/core/cost.py)",
        ],
        [
            "steps do not overlap; placement, routing and memory-tile reuse "
            "are not modelled",
            "yes",
            "yes",
            "ASSUMED: a step's time is its own; each operator's cost() "
            "counts what its tiling reads more than once (reread_bytes)",
            "the model's formula; each operator's cost() docstring",
        ],
    ]


COLUMNS = ["assumption", "npu1", "npu2", "kind", "source"]
