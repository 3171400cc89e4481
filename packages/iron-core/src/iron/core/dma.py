"""What one shim DMA descriptor can move: the device's transfer limits as a check.

The shim tile's DMA moves 4-byte words along at most four dimensions (the
outermost an iteration count), each size within its wrap field and each
stride within its step field, counted in words
(mlir-aie's ``include/aie/Dialect/AIE/IR/AIETargetModel.h`` and the
``dma_memcpy_nd`` verifier in ``lib/Dialect/AIEX/IR/AIEXDialect.cpp``,
https://github.com/Xilinx/mlir-aie). Views with per-call
repeats and lengths, and the data movers' walks, must each be one such
descriptor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from iron.core.tap import TensorAccessPattern

if TYPE_CHECKING:
    from iron.core.device import Device

__all__ = ["shim_descriptor_fits"]


def shim_descriptor_fits(dev: Device, tap: TensorAccessPattern, dtype: Any) -> bool:
    """Whether ``tap`` is one shim DMA descriptor on ``dev``.

    Four dimensions, the first the iteration (at most ``dma_iteration_max``),
    the other sizes within the wrap field once counted in 4-byte words,
    strides within the step field in words, 4-byte aligned.
    """
    itemsize = np.dtype(dtype).itemsize
    granule = dev.dma_granule_bytes
    if tap.rank != 4:
        return False
    if tap.sizes[0] > dev.dma_iteration_max:
        return False
    if (tap.offset * itemsize) % dev.dma_alignment_bytes:
        return False
    if (tap.sizes[3] * itemsize) % granule:
        return False
    if itemsize < granule and tap.sizes[3] > 1 and tap.strides[3] != 1:
        # the DMA moves 4-byte words: a sub-word element strided innermost
        # would move its neighbours too
        return False
    wrap = (1 << dev.dma_size_bits) - 1
    inner = tap.sizes[3] * itemsize // granule
    if inner > wrap or tap.sizes[2] > wrap or tap.sizes[1] > wrap:
        return False
    for stride in tap.strides:
        nbytes = stride * itemsize
        if stride > 1 and nbytes % granule:
            return False
        if nbytes // granule > (1 << dev.dma_stride_bits):
            return False
    return True
