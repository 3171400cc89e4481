"""Copy reads any layout kind through iron.core.layout.HandleLayout.

A test-only kind (every other element from an offset) is read by
``Copy.step`` and judged by ``Copy.check`` without the operator knowing it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from math import prod
from typing import Any, ClassVar

import numpy as np
import pytest

import iron
from iron.core.device import as_device
from iron.core.handle import Handle
from iron.core.layout import ViewWalks, offset_parts
from iron.core.operator import RefusedShapeError
from iron.core.percall import Affine, evaluate
from iron.operators import Copy
from iron.operators.movers import Access


@dataclasses.dataclass(frozen=True)
class EveryOther:
    """Test-only: elements ``offset, offset + 2, ...``."""

    offset: int | Affine = 0
    kind: ClassVar[str] = "every-other"
    contiguous: ClassVar[bool] = False

    @property
    def start(self) -> int | Affine:
        return self.offset

    @property
    def static_offset(self) -> int | None:
        return None

    def per_call_parts(self) -> tuple[tuple[str, Any], ...]:
        return (("offset", self.offset),)

    def reads(self) -> tuple[Handle, ...]:
        return ()

    def indices(
        self,
        shape: tuple[int, ...],
        values: Mapping[str, int],
        read: Callable[[Handle], np.ndarray],
    ) -> np.ndarray:
        first = evaluate(self.offset, values)
        return (first + 2 * np.arange(prod(shape), dtype=np.int64)).reshape(shape)

    def dma_walks(self, elements: int) -> ViewWalks:
        const, per_call = offset_parts(self.offset)
        return ViewWalks(((const, (elements,), (2,)),), per_call)


class Odd(iron.Graph):
    """x[1::2] of a (16,) float32 x, as the test kind, copied."""

    def body(self, x):
        return Copy.step(Handle(x.buffer, (8,), x.dtype, {}, EveryOther(1)))


def test_copy_reads_a_new_layout_kind_through_the_protocol():
    x = np.arange(16, dtype=np.float32)
    with iron.use_device("npu2"):
        np.testing.assert_array_equal(Odd().reference(x), x[1::2])
        rec = Odd().record(x=((16,), np.float32))
    access = rec.steps[0].op.access
    assert access == Access("every-other", ((1, (8,), (2,)),))
    rec.steps[0].op.check(as_device("npu2"))  # 4-byte elements, 8-byte steps


def test_copy_check_judges_the_new_kind_s_walks():
    op = Copy(shape=(8,), itemsize=2, access=Access("every-other", ((0, (8,), (2,)),)))
    with pytest.raises(RefusedShapeError, match="contiguous innermost"):
        op.check(as_device("npu2"))
