"""Differential property test: the emulated NPU equals ``graph.reference``.

Hypothesis draws a small program of catalog operators (AXPY, ReLU) and data
movers (``Take``, ``Take2``) over a pool of values: chains, fan-out (a value
used again), fan-in (AXPY of two values), contiguous slices, strided views,
transposes, gathers, reshapes, rows picked per call, bounds per call, a
weight and a state written and read back. The graph is compiled for several
input sizes (versions sharing one arena) before the first call, then called
in a random order with random per-call values, on the emulator with dead
memory poisoned, in both packagings: one full ELF, and an image per step.
Every output must equal the host reference: bit for bit where the step that
wrote it is exact, within its tolerance otherwise.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ml_dtypes import bfloat16
from ops import Take, Take2

import iron
from iron.core.tolerance import compare
from iron.operators import AXPY, ReLU

WMAX = 512  # the weight's and the state's elements: the largest input
SIZES = (64, 128, 256, 512)
FACTORS = (2.0, -0.5, 1.0)
KINDS = (
    "relu",
    "axpy",
    "slice",
    "strided",
    "transpose",
    "gather",
    "row",
    "bound",
    "weight",
    "stash",
    "load",
)


@dataclasses.dataclass(frozen=True)
class Instr:
    """One drawn instruction: what to do, on which pool values, with what knob."""

    kind: str
    a: int
    b: int
    k: int


instructions = st.builds(
    Instr,
    st.sampled_from(KINDS),
    st.integers(0, 31),
    st.integers(0, 31),
    st.integers(0, 1 << 16),
)


@dataclasses.dataclass
class Entry:
    """A pool value: a handle and whether it is bounded per call by ``n``."""

    h: object
    bounded: bool


class Random(iron.Graph):
    """The drawn program, recorded per input size; ``n`` bounds, ``p`` picks rows."""

    def __init__(self, program: list[Instr], outs: list[int], seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.w = iron.weight(rng.standard_normal(WMAX).astype(bfloat16))
        self.s = iron.state((WMAX,), bfloat16)
        self._program = program
        self._outs = outs

    def body(self, x, y, *, n: iron.Scratchpad[int], p: iron.Scratchpad[int]):
        pool = [Entry(x, False), Entry(y, False)]
        for ins in self._program:
            made = self._apply(ins, pool, n, p)
            if made is not None:
                pool.append(made)
        if len(pool) == 2:
            pool.append(Entry(ReLU.step(x), False))
        chosen = [len(pool) - 1] + [2 + o % (len(pool) - 2) for o in self._outs]
        return tuple(pool[i].h for i in dict.fromkeys(chosen))

    def _apply(self, ins: Instr, pool: list[Entry], n, p) -> Entry | None:
        a = pool[ins.a % len(pool)]
        size, k = a.h.shape[0], ins.k
        if ins.kind == "relu":
            return Entry(ReLU.step(a.h), a.bounded)
        if ins.kind in ("axpy", "weight"):
            b = pool[ins.b % len(pool)] if ins.kind == "axpy" else Entry(self.w, False)
            h = b.h if ins.kind == "axpy" else self.w[:]
            pair = _fit(a, Entry(h, b.bounded), size, k, n)
            if pair is None:
                return None
            (ha, hb), bounded = pair
            factor = FACTORS[k % len(FACTORS)]
            return Entry(AXPY.step(ha, hb, scalar_factor=factor), bounded)
        if ins.kind == "load":
            m = 16 * (1 + k % (WMAX // 16))
            return Entry(ReLU.step(self.s[:m]), False)
        if a.bounded:
            return None  # only a whole ':' keeps a bounded axis
        if ins.kind == "slice":
            length = 16 * (1 + k % (size // 16))
            start = (k // 7) % (size - length + 1)
            return Entry(a.h[start : start + length], False)
        if ins.kind == "strided":
            step = (2, 4)[k % 2]
            offset = (k // 2) % step
            count = len(range(offset, size, step))
            if count % 16:
                return None
            return Entry(Take.step(a.h[offset::step]), False)
        if ins.kind == "transpose":
            rows = (2, 4, 8, 16)[k % 4]
            if size % rows:
                return None
            view = a.h.reshape(rows, size // rows).T
            return Entry(Take2.step(view).reshape(-1), False)
        if ins.kind == "gather":
            rows = (2, 4, 8, 16)[k % 4]
            if size % rows:
                return None
            cols = size // rows
            m = 16 // math.gcd(cols, 16) * (1 + (k // 4) % 3)
            ids = [(k * 31 + i * 17) % rows for i in range(m)]
            taken = Take2.step(a.h.reshape(rows, cols)[ids])
            return Entry(taken.reshape(-1), False)
        if ins.kind == "row":
            rows = (2, 4, 8)[k % 3]
            if size % rows or (size // rows) % 16:
                return None
            return Entry(Take.step(a.h.reshape(rows, size // rows)[p]), False)
        if ins.kind == "bound":
            return Entry(a.h[:n], True)
        if ins.kind == "stash":
            if size > WMAX:
                return None
            return Entry(Take.step(a.h, out=self.s[:size]), False)
        raise AssertionError(ins.kind)


def _fit(a: Entry, b: Entry, size: int, k: int, n):
    """``a`` and ``b`` made the same size and bound, else None."""
    hb = b.h
    if hb.shape[0] != size:
        if b.bounded or hb.shape[0] < size:
            return None
        start = k % (hb.shape[0] - size + 1)
        hb = hb[start : start + size]
    ha = a.h
    if a.bounded and not b.bounded:
        hb = hb[:n]
    elif b.bounded and not a.bounded:
        ha = ha[:n]
    return (ha, hb), a.bounded or b.bounded


def _limit(version, name: str) -> int:
    """The greatest value ``name`` may take in this version (its limits)."""
    most = 1 << 20
    for limit in version.recording.limits:
        if limit.expr.names() == {name}:
            most = min(most, limit.hi - 1)
    return min(most, 600)


def _writer_tolerance(version, output):
    """The tolerance of the last step writing ``output``'s buffer (exact if none)."""
    tolerance = None
    for step in version.recording.steps:
        if any(h.name == output.name for h in step.outputs):
            tolerance = step.op.tolerance()
    return tolerance


def _same(got: np.ndarray, want: np.ndarray, tolerance, where: str) -> None:
    assert got.shape == want.shape, where
    assert got.dtype == want.dtype, where
    if tolerance is None or tolerance.kind == "exact":
        np.testing.assert_array_equal(
            got.view(np.uint16), want.view(np.uint16), err_msg=where
        )
    else:
        verdict = compare(got, want, tolerance)
        assert verdict, f"{where}: {verdict}"


PACKAGINGS = [
    pytest.param("npu2", None, id="npu2-full-elf"),
    pytest.param("npu2", False, id="npu2-per-step"),
    pytest.param("npu1", None, id="npu1-per-step"),
]


@pytest.mark.parametrize(("device", "full_elf"), PACKAGINGS)
@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    program=st.lists(instructions, min_size=1, max_size=10),
    outs=st.lists(st.integers(0, 31), max_size=2),
    sizes=st.lists(st.sampled_from(SIZES), min_size=1, max_size=3, unique=True),
    data=st.data(),
)
def test_random_graphs_equal_their_reference(
    device, full_elf, program, outs, sizes, data
):
    graph = Random(program, outs, seed=len(program))
    with iron.use_device(device):
        versions = {
            size: graph.compile(x=(size,), y=(size,), full_elf=full_elf)
            for size in sizes
        }
        arenas = {id(v.arena) for v in versions.values()}
        assert len(arenas) == 1, "versions share one arena"
        for v in versions.values():
            assert v.plan.full_elf == (device == "npu2" and full_elf is None)
        calls = data.draw(
            st.lists(st.sampled_from(sizes), min_size=len(sizes), max_size=5),
            label="calls",
        )
        for call, size in enumerate(calls):
            version = versions[size]
            n = data.draw(st.integers(0, _limit(version, "n")), label="n")
            p = data.draw(st.integers(0, _limit(version, "p")), label="p")
            rng = np.random.default_rng(call)
            x = rng.standard_normal(size).astype(bfloat16)
            y = rng.standard_normal(size).astype(bfloat16)
            got = graph(x, y, n=n, p=p)
            want = graph.reference(x, y, n=n, p=p)
            got = got if isinstance(got, tuple) else (got,)
            want = want if isinstance(want, tuple) else (want,)
            assert len(got) == len(want) == len(version.recording.outputs)
            for i, (g, w, h) in enumerate(zip(got, want, version.recording.outputs)):
                where = f"call {call} (size {size}, n={n}, p={p}) output {i} {h!r}"
                _same(g, w, _writer_tolerance(version, h), where)
            if version.recording.states:
                np.testing.assert_array_equal(
                    version.read(graph.s).view(np.uint16),
                    graph.s.host.view(np.uint16),
                    err_msg="the state after the call",
                )
