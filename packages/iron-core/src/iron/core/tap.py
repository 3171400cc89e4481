"""Tensor access patterns: which elements of a tensor a walk visits, in order.

This module owns `TensorAccessPattern`, a strided walk (an offset plus sizes
and strides, in elements) over a row-major tensor, such as a DMA descriptor
performs. It checks that a walk stays inside its tensor, lists the element
indices it visits, simplifies it, and gathers or scatters values along it.
The walk arithmetic it shares with the DMA descriptors is :mod:`iron.core.dma`'s.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from iron.core.dma import simplify_walk, walk_reach

__all__ = ["TensorAccessPattern"]


def _ints(name: str, values: Sequence[int]) -> tuple[int, ...]:
    """Return ``values`` as a tuple of Python ints, or raise naming ``name``."""
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        raise TypeError(
            f"TensorAccessPattern {name}={values!r} is not a sequence of "
            f"integers; give a tuple of ints"
        ) from None


def _show(
    tensor_dims: Sequence[int],
    offset: int,
    sizes: Sequence[int],
    strides: Sequence[int],
) -> str:
    return (
        f"tap(dims={list(tensor_dims)}, offset={offset}, "
        f"sizes={list(sizes)}, strides={list(strides)})"
    )


@dataclass(frozen=True)
class TensorAccessPattern:
    """A strided walk over a row-major tensor, in elements.

    The walk visits ``offset + sum(i[k] * strides[k])`` for every index ``i``
    in ``sizes``, the last dimension varying fastest, much as ``numpy``'s
    ``as_strided`` would with strides in elements. A stride may be 0 (the
    same elements again), so a walk may visit an element more than once.

    Attributes:
        tensor_dims: Shape of the tensor walked (row-major), outermost first.
        offset: Flat index of the first element visited.
        sizes: Extent of each walk dimension, outermost first; each ``>= 1``.
        strides: Step of each walk dimension in elements; each ``>= 0``.

    Raises:
        ValueError: ``sizes`` and ``strides`` differ in length or are empty, a
            size is below 1, a stride is negative, a tensor dimension is below
            1, the offset is outside the tensor, or the walk reaches past its
            end.
        TypeError: A field is not made of integers.

    Example:
        >>> tap = TensorAccessPattern((2, 3), 0, (3, 2), (1, 3))
        >>> tap.indices().tolist()
        [[0, 3], [1, 4], [2, 5]]
    """

    tensor_dims: tuple[int, ...]
    offset: int
    sizes: tuple[int, ...]
    strides: tuple[int, ...]

    def __post_init__(self) -> None:
        dims = _ints("tensor_dims", self.tensor_dims)
        sizes = _ints("sizes", self.sizes)
        strides = _ints("strides", self.strides)
        try:
            offset = operator.index(self.offset)
        except TypeError:
            raise TypeError(
                f"TensorAccessPattern offset={self.offset!r} is not an integer; "
                f"give a flat element index"
            ) from None
        for name, value in (
            ("tensor_dims", dims),
            ("offset", offset),
            ("sizes", sizes),
            ("strides", strides),
        ):
            object.__setattr__(self, name, value)
        shown = _show(dims, offset, sizes, strides)
        if not dims or min(dims) < 1:
            raise ValueError(
                f"{shown} has tensor dims {list(dims)}; give at least one "
                f"dimension, each >= 1"
            )
        if len(sizes) != len(strides):
            raise ValueError(
                f"{shown} has {len(sizes)} sizes but {len(strides)} strides; "
                f"give one stride per size"
            )
        if not sizes:
            raise ValueError(
                f"{shown} has no dimensions; give at least one size and stride "
                f"(sizes=[1], strides=[1] for a single element)"
            )
        if min(sizes) < 1:
            raise ValueError(
                f"{shown} has a size below 1; every size must be >= 1 (drop "
                f"the dimension instead of giving it size 0)"
            )
        if min(strides) < 0:
            raise ValueError(
                f"{shown} has a negative stride; strides must be >= 0 (walk "
                f"from the lowest address instead)"
            )
        elements = math.prod(dims)
        if not 0 <= offset < elements:
            raise ValueError(
                f"{shown} starts at offset {offset}, outside the "
                f"{elements}-element tensor; give an offset in [0, {elements})"
            )
        last = offset + walk_reach(sizes, strides) - 1
        if last >= elements:
            raise ValueError(
                f"{shown} reaches element {last}, past the end of the "
                f"{elements}-element tensor; shrink the sizes, strides or "
                f"offset so the walk ends below {elements}"
            )

    @classmethod
    def full(cls, tensor_dims: Sequence[int]) -> TensorAccessPattern:
        """Return the walk of a whole tensor in row-major order.

        Args:
            tensor_dims: Shape of the tensor, outermost first.

        Returns:
            A pattern with offset 0, sizes ``tensor_dims`` and row-major
            strides.
        """
        dims = _ints("tensor_dims", tensor_dims)
        strides = []
        step = 1
        for d in reversed(dims):
            strides.append(step)
            step *= d
        return cls(dims, 0, dims, tuple(reversed(strides)))

    @property
    def rank(self) -> int:
        """Number of walk dimensions (``len(sizes)``)."""
        return len(self.sizes)

    @property
    def count(self) -> int:
        """Number of element accesses the walk makes (``prod(sizes)``)."""
        return math.prod(self.sizes)

    def indices(self) -> np.ndarray:
        """Return the flat element index of every access, in access order.

        Returns:
            An int64 array of shape ``sizes``; entry ``i`` is the flat index
            (into the row-major tensor) the walk visits at walk index ``i``.
        """
        flat = np.full((1,) * self.rank, self.offset, dtype=np.int64)
        for axis, (size, stride) in enumerate(zip(self.sizes, self.strides)):
            shape = [1] * self.rank
            shape[axis] = size
            flat = flat + (np.arange(size, dtype=np.int64) * stride).reshape(shape)
        return flat

    def is_contiguous(self) -> bool:
        """Whether the walk visits ``offset, offset + 1, ..., offset + count - 1`` in order."""
        simple = self.simplify()
        return simple.rank == 1 and (simple.sizes[0] == 1 or simple.strides[0] == 1)

    def permute(self, axes: Sequence[int]) -> TensorAccessPattern:
        """Return the walk with its dimensions reordered, like ``numpy.transpose``.

        Walk dimension ``k`` of the result is dimension ``axes[k]`` of this
        one, so ``full(shape).permute(axes).indices()`` equals
        ``np.arange(prod(shape)).reshape(shape).transpose(axes)``.

        Args:
            axes: A permutation of ``range(rank)``; negative entries count from
                the end.

        Returns:
            The permuted pattern over the same tensor.

        Raises:
            ValueError: ``axes`` is not a permutation of the walk's dimensions.
        """
        picked = _ints("axes", axes)
        normal = tuple(a + self.rank if a < 0 else a for a in picked)
        if sorted(normal) != list(range(self.rank)):
            raise ValueError(
                f"axes {list(picked)} do not permute the {self.rank} dimensions "
                f"of {self}; give each of 0..{self.rank - 1} once"
            )
        return TensorAccessPattern(
            self.tensor_dims,
            self.offset,
            tuple(self.sizes[a] for a in normal),
            tuple(self.strides[a] for a in normal),
        )

    def simplify(self) -> TensorAccessPattern:
        """Return an equivalent walk with as few dimensions as possible.

        Size-1 dimensions are dropped, and an outer dimension is merged into
        the next inner one when its stride equals the inner's size times the
        inner's stride. The result visits the same indices in the same order
        and keeps at least one dimension.

        Returns:
            The simplified pattern over the same tensor.
        """
        sizes, strides = simplify_walk(self.sizes, self.strides)
        return TensorAccessPattern(self.tensor_dims, self.offset, sizes, strides)

    def _flat(self, array: np.ndarray, verb: str) -> np.ndarray:
        """Return ``array`` seen as one flat dimension, or raise if it cannot be."""
        elements = math.prod(self.tensor_dims)
        if array.size != elements:
            raise ValueError(
                f"cannot {verb} {self} on an array of {array.size} elements "
                f"(shape {array.shape}); give one of {elements} elements"
            )
        if array.ndim == 1:
            return array
        if verb == "scatter" and not array.flags.c_contiguous:
            raise ValueError(
                f"cannot scatter {self} into a non-contiguous array of shape "
                f"{array.shape}; give a flat or C-contiguous array"
            )
        return array.reshape(-1)

    def gather(self, array_flat: np.ndarray) -> np.ndarray:
        """Return the values the walk visits, in walk order.

        Args:
            array_flat: The tensor's elements, flat (or C-ordered of any shape
                with ``prod(tensor_dims)`` elements).

        Returns:
            A new array of shape ``sizes``: ``array_flat[self.indices()]``.

        Raises:
            ValueError: The array has the wrong number of elements.
        """
        flat = self._flat(np.asarray(array_flat), "gather")
        gathered: np.ndarray = flat[self.indices()]
        return gathered

    def scatter(self, array_flat: np.ndarray, values: ArrayLike) -> None:
        """Write ``values`` into ``array_flat`` at the elements the walk visits.

        The write is in place. Where the walk visits an element more than once
        (a stride of 0), which of the values lands there is not specified.

        Args:
            array_flat: The tensor's elements, a writable flat (or C-contiguous)
                array of ``prod(tensor_dims)`` elements.
            values: Values of shape ``sizes``, or broadcastable to it.

        Raises:
            TypeError: ``array_flat`` is not a numpy array.
            ValueError: The array has the wrong number of elements or is not
                contiguous, or ``values`` does not broadcast to ``sizes``.
        """
        if not isinstance(array_flat, np.ndarray):
            raise TypeError(
                f"cannot scatter {self} into a {type(array_flat).__name__}; "
                f"give a writable numpy array"
            )
        flat = self._flat(array_flat, "scatter")
        values = np.asarray(values)
        try:
            values = np.broadcast_to(values, self.sizes)
        except ValueError:
            raise ValueError(
                f"cannot scatter values of shape {values.shape} along {self}; "
                f"give values of shape {self.sizes}"
            ) from None
        flat[self.indices()] = values

    def __str__(self) -> str:
        return _show(self.tensor_dims, self.offset, self.sizes, self.strides)
