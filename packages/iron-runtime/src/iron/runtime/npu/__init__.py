"""The NPU path: designs in MLIR text, their legality, kernels, the build.

Nothing here imports mlir-aie, Peano or pyxrt: :mod:`.mlir` writes the aie
dialect text of one pinned mlir-aie release (:data:`MLIR_AIE_RELEASE`),
:mod:`.legality` checks a design against the device's limits before any tool
runs, :mod:`.designs` holds the per-operator designs, :mod:`.kernels` the AIE
C++ kernel sources (package data), and :mod:`.build` runs Peano and aiecc
when they are installed, in a cache.
"""

from iron.runtime.npu.legality import LegalityError
from iron.runtime.npu.mlir import MLIR_AIE_RELEASE

__all__ = ["MLIR_AIE_RELEASE", "LegalityError"]
