"""Shim DMA walks: the arithmetic of moving a tensor's elements by descriptor.

A *walk* is an element offset plus sizes and strides in elements, the
outermost dimension first (what :class:`~iron.core.tap.TensorAccessPattern`
holds without its tensor). The shim tile's DMA moves 4-byte words along at
most four dimensions (the outermost an iteration count), each size within its
wrap field and each stride within its step field, counted in words, at a byte
offset into its argument below :data:`ARG_OFFSET_LIMIT`. This module is the
one home of that arithmetic, for every distribution:

- limits: :func:`wrap_limit`, :data:`ARG_OFFSET_LIMIT`,
  :func:`shim_descriptor_fits` (the check views and operators make while
  recording) and :func:`shim_transfer_problems` (the full check a design's
  transfers pass, each broken limit in words);
- walks: :func:`walk_reach`, :func:`simplify_walk`, :func:`split_long_dims`,
  :func:`linear_walk` and :func:`shim_pieces` (a walk as four-dimensional
  descriptors);
- the shim's address generation, modelled independently of
  :class:`~iron.core.tap.TensorAccessPattern`: :func:`encode` a walk into a
  :class:`ShimDescriptor`, then :func:`shim_elements` lists the elements it
  moves, so a test can check that a transfer moves what its walk names.

Sources: mlir-aie's ``include/aie/Dialect/AIE/IR/AIETargetModel.h`` (field
widths) and the ``dma_memcpy_nd`` verifier in
``lib/Dialect/AIEX/IR/AIEXDialect.cpp`` (https://github.com/Xilinx/mlir-aie);
iron-core's :class:`~iron.core.device.Device` ``dma_*`` fields carry the
numbers with the same citations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from iron.core.device import Device
    from iron.core.tap import TensorAccessPattern

__all__ = [
    "ARG_OFFSET_LIMIT",
    "ShimDescriptor",
    "Walk",
    "encode",
    "linear_walk",
    "shim_descriptor_fits",
    "shim_elements",
    "shim_pieces",
    "shim_transfer_problems",
    "simplify_walk",
    "split_long_dims",
    "walk_reach",
    "wrap_limit",
]

#: A shim transfer's byte offset into its runtime-sequence argument must be
#: below this: aiecc folds the offset into the ``aiex.npu.address_patch``
#: ``arg_plus`` operand, an ``I32`` (mlir-aie v1.4.1 ``include/aie/Dialect/
#: AIEX/IR/AIEX.td`` ``NpuAddressPatchOp``; ``lib/Dialect/AIEX/Utils/
#: BdLowering.cpp`` builds it with ``IntegerAttr::get(i32ty, bytes)``).
ARG_OFFSET_LIMIT = 2**31

#: A walk: ``(offset, sizes, strides)`` in elements, outermost first.
Walk = tuple[int, tuple[int, ...], tuple[int, ...]]


def wrap_limit(dev: Device) -> int:
    """The largest size a descriptor's wrap (size) field holds on ``dev``."""
    return (1 << dev.dma_size_bits) - 1


# -- walks ------------------------------------------------------------------------


def walk_reach(sizes: Sequence[int], strides: Sequence[int]) -> int:
    """How many elements from its start a walk spans (its last index plus one).

    Example:
        >>> walk_reach((2, 3), (10, 1))
        13
    """
    return 1 + sum((s - 1) * t for s, t in zip(sizes, strides))


def simplify_walk(
    sizes: Sequence[int], strides: Sequence[int]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The same walk in as few dimensions as possible.

    Size-1 dimensions are dropped, and an outer dimension merges into the
    next inner one when its stride is the inner's size times the inner's
    stride. The result visits the same indices in the same order; a walk of
    one element is ``((1,), (1,))``.

    Example:
        >>> simplify_walk((1, 4, 8), (0, 8, 1))
        ((32,), (1,))
    """
    merged: list[tuple[int, int]] = []
    for size, stride in reversed([(s, t) for s, t in zip(sizes, strides) if s != 1]):
        if merged and stride == merged[-1][0] * merged[-1][1]:
            merged[-1] = (size * merged[-1][0], merged[-1][1])
        else:
            merged.append((size, stride))
    merged.reverse()
    if not merged:
        return (1,), (1,)
    return tuple(s for s, _ in merged), tuple(t for _, t in merged)


def split_long_dims(
    dev: Device, sizes: Sequence[int], strides: Sequence[int], itemsize: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Split dimensions too long for the wrap field in two, where a divisor allows.

    A contiguous innermost run is split into ``(a, b)`` with ``b`` at most the
    wrap in words; an outer dimension into ``(a, b)`` with ``b`` at most the
    wrap. A dimension with no such divisor is kept (a descriptor check then
    refuses it).
    """
    wrap = wrap_limit(dev)
    granule = dev.dma_granule_bytes
    out_sizes, out_strides = list(sizes), list(strides)
    inner = sizes[-1]
    if strides[-1] == 1 and inner * itemsize > wrap * granule:
        for b in range(wrap * granule // itemsize, 0, -1):
            if inner % b == 0 and (b * itemsize) % granule == 0:
                if inner // b > 1:
                    out_sizes[-1:] = [inner // b, b]
                    out_strides[-1:] = [b, 1]
                break
    for axis in range(len(out_sizes) - 2, -1, -1):
        size, stride = out_sizes[axis], out_strides[axis]
        if size <= wrap:
            continue
        b = next((d for d in range(wrap, 1, -1) if size % d == 0), None)
        if b is not None:
            out_sizes[axis : axis + 1] = [size // b, b]
            out_strides[axis : axis + 1] = [b * stride, stride]
    return tuple(out_sizes), tuple(out_strides)


def linear_walk(
    count: int, itemsize: int, dev: Device
) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]]:
    """Sizes and strides that stream ``count`` contiguous items in one descriptor.

    The innermost dimension is the largest divisor of ``count`` whose bytes
    are whole words within the wrap field; the rest splits over d1 and d2,
    then the iteration. A run that cannot be split so is returned as one
    dimension (a descriptor check then names the limit).
    """
    wrap = wrap_limit(dev)
    inner_max = wrap * dev.dma_granule_bytes // itemsize
    inner = next(
        (
            d
            for d in range(min(count, inner_max), 0, -1)
            if count % d == 0 and (d * itemsize) % dev.dma_granule_bytes == 0
        ),
        count,
    )
    rest = count // inner
    for it in range(1, dev.dma_iteration_max + 1):
        if rest % it:
            continue
        per = rest // it
        d2 = next(
            (a for a in range(1, wrap + 1) if per % a == 0 and per // a <= wrap), None
        )
        if d2 is not None:
            d1 = per // d2
            sizes = (it, d2, d1, inner)
            strides = (
                per * inner if it > 1 else 0,
                d1 * inner if d2 > 1 else 0,
                inner if d1 > 1 else 0,
                1,
            )
            return sizes, strides
    return (1, 1, 1, count), (0, 0, 0, 1)


def shim_pieces(dev: Device, walk: Walk, itemsize: int) -> list[Walk]:
    """A walk as four-dimensional shim transfers.

    Contiguous dimensions merge; a contiguous run is one transfer when
    :func:`linear_walk` splits it, else a bulk of whole wrap-long rows and a
    rest; any other walk splits its long dimensions (:func:`split_long_dims`)
    and pads to four.
    """
    offset, sizes, strides = walk
    sizes, strides = simplify_walk(sizes, strides)
    wrap = wrap_limit(dev)
    if len(sizes) == 1 and strides[0] == 1:
        count = sizes[0]
        s4, t4 = linear_walk(count, itemsize, dev)
        if s4[3] * itemsize <= wrap * dev.dma_granule_bytes:
            return [(offset, s4, t4)]
        inner = wrap * dev.dma_granule_bytes // itemsize
        bulk = count // inner * inner
        out: list[Walk] = [(offset, *linear_walk(bulk, itemsize, dev))]
        if count > bulk:
            out.append((offset + bulk, *linear_walk(count - bulk, itemsize, dev)))
        return out
    sizes, strides = split_long_dims(dev, sizes, strides, itemsize)
    pad = 4 - len(sizes)
    return [(offset, (1,) * pad + sizes, (0,) * pad + strides)]


# -- limits -----------------------------------------------------------------------


def shim_descriptor_fits(dev: Device, tap: TensorAccessPattern, dtype: Any) -> bool:
    """Whether ``tap`` is one shim DMA descriptor on ``dev``.

    Four dimensions, the first the iteration (at most ``dma_iteration_max``),
    the other sizes within the wrap field once counted in 4-byte words,
    strides within the step field in words, 4-byte aligned. Views with
    per-call repeats and lengths, and the data movers' walks, must each be
    one such descriptor; a design's transfers pass the fuller
    :func:`shim_transfer_problems`.
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
    wrap = wrap_limit(dev)
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


def shim_transfer_problems(
    dev: Device,
    sizes: Sequence[int],
    strides: Sequence[int],
    offset: int,
    itemsize: int,
    repeat: int = 0,
) -> list[str]:
    """Every shim-descriptor limit a walk (in elements) breaks; empty if none.

    Limits (mlir-aie's ``AIEXDialect.cpp`` dma_memcpy_nd verifier and
    ``AIETargetModel.h`` field widths; iron-core's Device ``dma_*`` fields):
    four dimensions; items at most 32 bits; the offset below
    :data:`ARG_OFFSET_LIMIT` bytes; the offset, the innermost size and every
    stride in whole 4-byte units; a sub-word innermost dimension contiguous
    (stride 1); d0 wrap (in words), d1 and d2 sizes within the
    ``dma_size_bits`` field; steps within ``dma_stride_bits`` words (a step
    is encoded minus one, so ``2**bits`` itself fits); the iteration at most
    ``dma_iteration_max``; the repeat at most ``dma_repeat_max``. A stride of
    0 on a dimension of more than one is refused except on the iteration
    (IRON does not model repeated inner dimensions).
    """
    g = dev.dma_granule_bytes
    found = []
    if len(sizes) != 4 or len(strides) != 4:
        return [
            f"{len(sizes)} sizes and {len(strides)} strides: a shim descriptor has 4"
        ]
    if itemsize not in (1, 2, 4):
        return [f"{itemsize}-byte items: a shim moves 1-, 2- or 4-byte items"]
    if min(sizes) < 1 or min(strides) < 0 or offset < 0:
        return [f"sizes {list(sizes)} must be >= 1, strides and offset >= 0"]
    if offset * itemsize >= ARG_OFFSET_LIMIT:
        found.append(
            f"offset {offset} elements = {offset * itemsize} bytes is at or past "
            f"2^31 = {ARG_OFFSET_LIMIT} bytes: aiecc patches a descriptor's "
            f"offset into its argument as a signed 32-bit value, so it would "
            f"wrap; lay the buffer out in an argument of its own"
        )
    if (offset * itemsize) % dev.dma_alignment_bytes:
        found.append(
            f"offset {offset} elements = {offset * itemsize} bytes is not a multiple "
            f"of the {dev.dma_alignment_bytes}-byte alignment"
        )
    if (sizes[3] * itemsize) % g:
        found.append(
            f"innermost size {sizes[3]} x {itemsize} bytes is not a whole number "
            f"of {g}-byte words"
        )
    if itemsize < g and sizes[3] > 1 and strides[3] != 1:
        found.append(
            f"innermost stride {strides[3]}: {itemsize}-byte items move in whole "
            f"words, so the innermost dimension must be contiguous (stride 1)"
        )
    for axis in range(3):
        if (strides[axis] * itemsize) % g:
            found.append(
                f"stride {strides[axis]} (dimension {axis}) x {itemsize} bytes is "
                f"not a multiple of {g} bytes"
            )
    for axis in (1, 2, 3):
        if strides[axis] == 0 and sizes[axis] > 1:
            found.append(
                f"stride 0 on dimension {axis} of size {sizes[axis]}: only the "
                f"iteration may repeat"
            )
    wrap = wrap_limit(dev)
    inner_words = sizes[3] * itemsize // g
    for name, value in (
        ("d0 wrap (words)", inner_words),
        ("d1 size", sizes[2]),
        ("d2 size", sizes[1]),
    ):
        if value > wrap:
            found.append(
                f"{name} {value} exceeds the {dev.dma_size_bits}-bit field (<= {wrap})"
            )
    step_max = 1 << dev.dma_stride_bits
    for axis in range(4):
        words = strides[axis] * itemsize // g
        if words > step_max:
            found.append(
                f"stride {strides[axis]} (dimension {axis}) = {words} words exceeds "
                f"the {dev.dma_stride_bits}-bit step (<= {step_max} words)"
            )
    if sizes[0] > dev.dma_iteration_max:
        found.append(
            f"iteration size {sizes[0]} exceeds the iteration limit "
            f"(<= {dev.dma_iteration_max})"
        )
    if not 0 <= repeat <= dev.dma_repeat_max:
        found.append(f"repeat {repeat} is outside 0..{dev.dma_repeat_max}")
    return found


# -- the shim's address generation --------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ShimDescriptor:
    """A shim buffer descriptor's fields, in 32-bit words.

    ``wraps``/``steps`` are d0 (innermost), d1, d2; the iteration wraps and
    steps around all three.

    Attributes:
        base: The first word's address in its argument.
        wraps: How many steps d0, d1 and d2 take before wrapping.
        steps: How many words d0, d1 and d2 advance per step.
        iteration_wrap: How many passes the iteration makes.
        iteration_step: How many words the iteration advances per pass.
        items_per_word: Elements per 32-bit word (a sub-word innermost
            dimension travels whole words).
        repeat: The task's extra repetitions of the whole pattern.
    """

    base: int
    wraps: tuple[int, int, int]
    steps: tuple[int, int, int]
    iteration_wrap: int
    iteration_step: int
    items_per_word: int
    repeat: int = 0


def encode(
    sizes: Sequence[int],
    strides: Sequence[int],
    offset: int,
    itemsize: int,
    repeat: int = 0,
) -> ShimDescriptor:
    """The descriptor of a walk in elements: sizes and strides converted to words.

    The innermost size and every stride count words; items smaller than a
    word travel whole words (so a sub-word innermost dimension is
    contiguous). Check :func:`shim_transfer_problems` first: this only
    converts.
    """
    per_word = max(1, 4 // itemsize)

    def words(n: int) -> int:
        return n * itemsize // 4

    inner_step = 1 if itemsize < 4 else strides[3]
    return ShimDescriptor(
        base=words(offset),
        wraps=(sizes[3] * itemsize // 4, sizes[2], sizes[1]),
        steps=(inner_step, words(strides[2]), words(strides[1])),
        iteration_wrap=sizes[0],
        iteration_step=words(strides[0]),
        items_per_word=per_word,
        repeat=repeat,
    )


def _word_addresses(d: ShimDescriptor) -> Iterator[int]:
    """Word addresses in the order the shim DMA issues them.

    Three counters step and wrap like the hardware's: d0 counts up to its
    wrap, then clears and carries into d1, which carries into d2; the
    iteration counter advances once per full pass, and the whole repeats.
    """
    per_pass = d.wraps[0] * d.wraps[1] * d.wraps[2]
    for _ in range(d.repeat + 1):
        for it in range(d.iteration_wrap):
            counters = [0, 0, 0]
            for _ in range(per_pass):
                yield (
                    d.base
                    + it * d.iteration_step
                    + sum(c * s for c, s in zip(counters, d.steps))
                )
                for k in range(3):
                    counters[k] += 1
                    if counters[k] < d.wraps[k]:
                        break
                    counters[k] = 0


def shim_elements(d: ShimDescriptor) -> np.ndarray:
    """The element indices a descriptor moves, in order (little-endian words)."""
    k = d.items_per_word
    out = [a * k + j for a in _word_addresses(d) for j in range(k)]
    return np.asarray(out, dtype=np.int64)
