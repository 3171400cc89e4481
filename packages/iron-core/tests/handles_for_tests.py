"""Helpers and hypothesis strategies shared by the ``test_handle_*`` files.

``whole`` makes an input handle, ``flat`` the numpy array of element indices
it is checked against; ``handle`` makes a bf16 input handle with bounded axes
(for the ``test_operator_*`` files); the strategies draw shapes and numpy
basic indices.
"""

from __future__ import annotations

from math import prod

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from iron.core.handle import Handle
from iron.core.percall import PerCall

pos = PerCall("pos")
n = PerCall("n")
m = PerCall("m")


def whole(shape, dtype=np.float32, name="x", role="input") -> Handle:
    return Handle.whole(shape, dtype, name, role)


def handle(
    name: str,
    *shape: int,
    valid: dict[int, int | PerCall] | None = None,
    dtype: str = "bfloat16",
) -> Handle:
    """An input handle, its axes bounded per ``valid`` (axis: bound)."""
    h = Handle.whole(shape, dtype, name, "input")
    if valid:
        h = Handle(h.buffer, h.shape, h.dtype, dict(valid), h.layout)
    return h


def flat(shape) -> np.ndarray:
    return np.arange(prod(shape), dtype=np.int64).reshape(shape)


def consecutive(a: np.ndarray) -> bool:
    r = a.reshape(-1)
    return r.size <= 1 or bool(np.all(np.diff(r) == 1))


# ------------------------------------------------------------ strategies

shapes = st.lists(st.integers(1, 5), min_size=1, max_size=4).map(tuple)


@st.composite
def basic_keys(draw, shape):
    """A numpy basic index for ``shape``, and the (axis, part) of each part.

    Ints (negative too), slices with any step, at most one Ellipsis (standing
    for a run of axes) and None anywhere; maybe not a tuple when one part.
    """
    parts = []
    for axis, size in enumerate(shape):
        kinds = ["int", "slice", "slice", "full"] if size else ["slice", "full"]
        kind = draw(st.sampled_from(kinds))
        if kind == "int":
            part = draw(st.integers(-size, size - 1))
        elif kind == "full":
            part = slice(None)
        else:
            end = st.none() | st.integers(-size - 2, size + 2)
            step = draw(st.none() | st.sampled_from([1, 2, 3, -1, -2, -3]))
            part = slice(draw(end), draw(end), step)
        parts.append((axis, part))
    items: list = list(parts)
    if draw(st.booleans()):
        # ... stands for a run of axes; the parts after it align to the end
        i = draw(st.integers(0, len(items)))
        j = draw(st.integers(i, len(items)))
        items[i:j] = [(None, Ellipsis)]
    else:
        # trailing axes left out are whole
        items = items[: draw(st.integers(0, len(items)))]
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), (None, None))
    key = tuple(part for _, part in items)
    kept = [(axis, part) for axis, part in items if axis is not None]
    if len(key) == 1 and draw(st.booleans()):
        key = key[0]
    return key, kept


def walks_backwards(shape, kept) -> bool:
    """Whether a kept slice steps back over more than one element."""
    for axis, part in kept:
        if isinstance(part, slice) and (part.step or 1) < 0:
            if len(range(*part.indices(shape[axis]))) > 1:
                return True
    return False


@st.composite
def shapes_and_keys(draw):
    shape = draw(shapes)
    key, kept = draw(basic_keys(shape))
    return shape, key, kept


@st.composite
def forward_views(draw):
    """A shape and a basic index numpy and handles both take."""
    shape, key, kept = draw(shapes_and_keys())
    assume(not walks_backwards(shape, kept))
    return shape, key
