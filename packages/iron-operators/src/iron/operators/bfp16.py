"""The AIE2P ``bfp16ebs8`` block format, modelled in numpy.

This module owns the numerics of the block floating-point format NPU2 (AIE2P)
multiplies in when a bf16 matmul runs at ``Precision.MEDIUM``: `quantize`
(values as the multiplier sees them after the bf16 -> bfp16 conversion),
`shared_exponents` and `block_unit` (one step of a block's mantissa, which the
matmul tolerances are measured in), and `encode` / `decode` (the bytes).

The format, from AMD's public sources (facts carried over, no code copied):

* A block is 8 values and 9 bytes: one shared 8-bit exponent, then 8 one-byte
  mantissas ("8 mantissas per block, 8 mantissa bits and 8 shared exponent
  bits"; 1.125 bytes a value). mlir-aie
  ``programming_examples/basic/block_datatypes/bfp_conversion/README.md`` and
  ``helper.h`` in that folder (``floatToBfp16``, ``bfp16ebs8ToFloat``).
* The shared exponent is the largest biased float32 exponent field in the
  block (``helper.h``: "the shared exponent (max exponent of the block)").
* Each mantissa is an int8 in two's complement (sign included), and a value
  decodes as ``mantissa * 2**(shared - 127) / 64``: the block's largest
  element keeps its implicit bit and 6 fraction bits, smaller ones lose one
  more bit per binade below it (``helper.h``, ``bfp16ebs8ToFloat``).
* For a matmul the blocks run along the reduction axis K: 8 consecutive
  values of a row of A, and of a column of B (B is transposed before its
  conversion "to align dot products between blocks"). mlir-aie
  ``bfp_conversion/kernel.cc`` and ``aie_kernels/aie2p/mm_bfp.cc``
  (``mac_8x8_8x8T``).

What the sources leave open, and what this model picks:

* Rounding. The host helper ``floatToBfp16`` always truncates (its comment:
  "the rounding mode for the mantissa in AIE2p is always truncation"). In a
  kernel the bf16 -> bfp16 conversion (``accum<accfloat>::to_vector
  <bfp16ebs8>``) runs under the core's rounding register, which powers up as
  ``floor``; AMD IRON's ``mm.cc`` sets ``conv_even`` when built with
  ``ROUND_CONV_EVEN``, which AMD IRON's GEMM passes by default
  (``round_conv_even=True``). No source states the conversion's rounding
  outright, so this model takes round-to-nearest-even; the matmul tolerances
  allow a full block unit, which covers ``floor`` too.
* A largest element that rounds up to 128 units does not fit an int8. An
  earlier ``helper.h`` keeps the block's scale and rounds that element down;
  this model does the same (saturates at 127).
* The top binade. ``-bf16max`` is -127.5 units of ``2**121`` and ties to
  -128 units, ``-2**128``, beyond float32: the helper's float decode gives
  ``-inf`` there, and so does this model.
* Zeros and subnormals. A block whose largest exponent field is 0 (all zeros
  or float32 subnormals) is given the smallest normal exponent (1): the
  helper's decode uses 2**-133 units there while its encode uses 2**-132,
  and the device is expected to flush such values anyway.
* NaN and infinity. The helper leaves them untouched and lets them raise the
  shared exponent to 255; this model keeps them as they are and forms the
  shared exponent from the block's finite values, so they propagate through
  a matmul as they would in bf16.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "BLOCK",
    "MANTISSA_MAX",
    "MANTISSA_MIN",
    "block_unit",
    "decode",
    "encode",
    "quantize",
    "shared_exponents",
]

#: Values per block (``bfp16ebs8``: "block size 8").
BLOCK = 8
#: The int8 mantissa's range (two's complement).
MANTISSA_MIN, MANTISSA_MAX = -128, 127
# A mantissa counts units of 2**(shared - 127 - 6): 127 for the exponent bias,
# 6 for the fraction bits the block's largest element keeps.
_UNIT_OFFSET = 127 + 6


def _blocks(x: np.ndarray, axis: int) -> np.ndarray:
    """``x`` as float32 with ``axis`` moved last and split into blocks of 8."""
    x = np.asarray(x)
    if x.ndim == 0:
        raise ValueError("bfp16 blocks a vector or matrix; got a scalar")
    x = np.moveaxis(x.astype(np.float32), axis, -1)
    n = x.shape[-1]
    if n % BLOCK:
        raise ValueError(
            f"bfp16 blocks {BLOCK} values along the blocked axis, which has "
            f"{n}; pad it to a multiple of {BLOCK}"
        )
    return x.reshape(*x.shape[:-1], n // BLOCK, BLOCK)


def _unblock(blocks: np.ndarray, axis: int) -> np.ndarray:
    flat = blocks.reshape(*blocks.shape[:-2], blocks.shape[-2] * BLOCK)
    return np.moveaxis(flat, -1, axis)


def _shared(blocks: np.ndarray) -> np.ndarray:
    """Each block's shared exponent (biased, 1..254) from its finite values."""
    field = (blocks.view(np.uint32) >> 23) & 0xFF
    field = np.where(np.isfinite(blocks), field, 0)
    return np.maximum(field.max(axis=-1), 1).astype(np.int32)


def shared_exponents(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Each block's shared exponent: the largest biased float32 exponent in it.

    Args:
        x: Values (bf16 or float32), ``x.shape[axis]`` a multiple of 8.
        axis: The axis the blocks run along (K for a matmul operand).

    Returns:
        int32 biased exponents, 1..254, of ``x``'s shape with ``axis`` divided
        by 8 (a block of zeros or subnormals gets 1; see the module notes).

    Raises:
        ValueError: ``x.shape[axis]`` is not a multiple of 8.
    """
    return np.moveaxis(_shared(_blocks(x, axis)), -1, axis)


def block_unit(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """One mantissa step of the block each element of ``x`` falls in.

    Args:
        x: Values (bf16 or float32), ``x.shape[axis]`` a multiple of 8.
        axis: The axis the blocks run along.

    Returns:
        float64 ``2**(shared - 133)`` per element, of ``x``'s shape: what a
        round-to-nearest conversion is within half of, and a truncating one
        within one of.
    """
    blocks = _blocks(x, axis)
    unit = np.ldexp(1.0, _shared(blocks) - _UNIT_OFFSET)
    return _unblock(np.broadcast_to(unit[..., None], blocks.shape), axis)


def _mantissas(blocks: np.ndarray, shared: np.ndarray) -> np.ndarray:
    """Round to nearest even in block units and saturate to int8 (float64 out)."""
    unit = np.ldexp(1.0, shared - _UNIT_OFFSET)[..., None]
    with np.errstate(invalid="ignore"):
        scaled = blocks.astype(np.float64) / unit  # exact: a power-of-two scale
    return np.clip(np.rint(scaled), MANTISSA_MIN, MANTISSA_MAX)


def quantize(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """The values a bfp16 multiplier sees for ``x``: bf16 -> bfp16ebs8 -> value.

    Each block of 8 along ``axis`` shares its largest exponent; each value is
    rounded to nearest (ties to even) in units of ``2**(shared - 133)`` and
    saturated to the int8 range. NaN and infinities are kept.

    Args:
        x: Values (bf16 or float32), ``x.shape[axis]`` a multiple of 8.
        axis: The axis the blocks run along.

    Returns:
        float32 values of ``x``'s shape; each is exactly a bf16 value (at most
        8 significant bits), so the products of two are exact in float32.

    Raises:
        ValueError: ``x.shape[axis]`` is not a multiple of 8.

    Example:
        >>> x = np.array([1.0, 2**-7, 3.015625, 0, 0, 0, 0, 0], np.float32)
        >>> quantize(x)[:3]  # units of 2**-5: 32, 0.25 -> 0, 96.5 -> 96
        array([1., 0., 3.], dtype=float32)
    """
    blocks = _blocks(x, axis)
    shared = _shared(blocks)
    unit = np.ldexp(1.0, shared - _UNIT_OFFSET)[..., None]
    q = _mantissas(blocks, shared) * unit
    with np.errstate(over="ignore"):  # -128 units of exponent 254 is -2**128
        q = np.where(np.isfinite(blocks), q, blocks).astype(np.float32)
    return _unblock(q, axis)


def encode(x: np.ndarray) -> np.ndarray:
    """The ``bfp16ebs8`` bytes of a flat vector: per block, exponent then 8 int8s.

    Args:
        x: Finite values, a multiple of 8 of them.

    Returns:
        uint8 bytes, 9 per block (the layout ``helper.h`` documents).

    Raises:
        ValueError: The length is not a multiple of 8, or a value is not finite.
    """
    blocks = _blocks(np.ravel(x), -1)
    if not np.isfinite(blocks).all():
        raise ValueError(
            "bfp16 encodes finite values; NaN and infinity have no documented "
            "bfp16ebs8 encoding"
        )
    shared = _shared(blocks)
    mantissas = _mantissas(blocks, shared).astype(np.int8).view(np.uint8)
    out = np.empty((blocks.shape[0], BLOCK + 1), np.uint8)
    out[:, 0] = shared.astype(np.uint8)
    out[:, 1:] = mantissas
    return out.reshape(-1)


def decode(data: np.ndarray) -> np.ndarray:
    """The float32 values of ``bfp16ebs8`` bytes (9 per block of 8).

    Raises:
        ValueError: The byte count is not a multiple of 9.
    """
    data = np.asarray(data, np.uint8).reshape(-1)
    if data.size % (BLOCK + 1):
        raise ValueError(
            f"bfp16ebs8 data is {BLOCK + 1} bytes a block; got {data.size} bytes"
        )
    rows = data.reshape(-1, BLOCK + 1)
    unit = np.ldexp(1.0, rows[:, 0].astype(np.int32) - _UNIT_OFFSET)
    mantissas = rows[:, 1:].view(np.int8).astype(np.float64)
    with np.errstate(over="ignore"):  # -128 units of exponent 254 is -2**128
        return (mantissas * unit[:, None]).astype(np.float32).reshape(-1)
