"""Tests for Softmax: the masked-length reference, its derived tolerance, tiling, cost, graphs.

The reference is judged against a float64 oracle (the first ``length``
columns' ``exp(x - max) / sum``, zeros past them) with ``iron.compare`` under
the operator's own tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ml_dtypes import bfloat16

import iron
from iron.core.cost import step_time
from iron.core.declare import Input, Output
from iron.core.device import NPU1, NPU2
from iron.core.operator import DimensionConflictError
from iron.core.percall import Affine, PerCall
from iron.core.tolerance import bf16_ulp_distance, compare
from iron.operators.norms import STACK_BYTES
from iron.operators.softmax import Softmax

DEVICES = (NPU1, NPU2)
SIGN = 0x8000


def bf16(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).astype(np.float32).astype(bfloat16)


def from_bits(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint16).view(bfloat16)


def signed(magnitude):
    return st.tuples(st.booleans(), magnitude).map(lambda t: t[1] | (SIGN * t[0]))


special = signed(st.sampled_from((0x0000, 0x0001, 0x0080, 0x3F80, 0x7F7F, 0x7F80)))
tiny = signed(st.integers(0x0000, 0x06FF))
huge = signed(st.integers(0x7A00, 0x7F7F))
logits = signed(st.integers(0x3C00, 0x4300))  # ~2**-7 to 128: where exps differ
moderate = signed(st.integers(0x3000, 0x4FFF))
elements = st.one_of(special, tiny, huge, logits, moderate, st.integers(0, 0xFFFF))


@st.composite
def rows_and_length(draw, element=elements):
    rows = draw(st.integers(1, 3))
    cols = draw(st.sampled_from((16, 32, 48, 64, 2048, 5376)))
    if cols > 64:
        base = draw(st.lists(element, min_size=64, max_size=64))
        bits = np.tile(np.array(base, np.uint16), (rows, cols // 64 + 1))[:, :cols]
        bits = bits.copy()
        extra = draw(st.lists(element, min_size=rows, max_size=rows))
        bits[:, -1] = extra  # the last column differs
    else:
        flat = draw(st.lists(element, min_size=rows * cols, max_size=rows * cols))
        bits = np.array(flat, np.uint16).reshape(rows, cols)
    length = draw(st.none() | st.integers(0, cols + 3))
    return from_bits(bits), length


def oracle(x, length=None):
    """The exact softmax of each row's first ``length`` columns, zeros after."""
    x = x.astype(np.float64)
    n = x.shape[1] if length is None else min(length, x.shape[1])
    out = np.zeros(x.shape)
    if n:
        v = x[:, :n]
        with np.errstate(all="ignore"):
            e = np.exp(v - v.max(axis=1, keepdims=True))
            out[:, :n] = e / e.sum(axis=1, keepdims=True)
    return out


def softmax(x, length=None):
    return Softmax(rows=x.shape[0], cols=x.shape[1], length=length)


def check(x, length=None):
    op = softmax(x, length)
    got = op.reference(x)
    assert got.dtype == bfloat16 and got.shape == x.shape
    verdict = compare(got, oracle(x, length), op.tolerance())
    assert verdict, f"{verdict} for x={x!r}, length={length}"
    return got


# -- declaration and tolerance ---------------------------------------------------------------


def test_declaration():
    d = Softmax.declaration
    assert list(d.params) == [
        "rows",
        "cols",
        "rows_per_tile",
        "num_aie_columns",
        "length",
    ]
    assert d.tunables == ("rows_per_tile", "num_aie_columns")
    assert d.params["length"].per_call and d.params["length"].default is None
    assert d.inputs == (Input("x", "rows", "cols"),)
    assert d.outputs == (Output("out", "rows", "cols"),)


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_tolerance_is_derived_one_ulp(dev):
    tolerance = Softmax(rows=4, cols=64).resolved(dev).tolerance()
    assert (tolerance.kind, tolerance.ulps, tolerance.atol) == ("ulps", 1, 2.0**-126)
    assert "derived" in tolerance.note and "5376" in tolerance.note


def test_the_derivation_holds_at_the_longest_row():
    # The bound's terms: the fp32 sum's relative error over the longest row
    # the core memory rule allows, plus exp and the division, stays under a
    # quarter of bf16's smallest relative ulp (2**-8).
    cols = (NPU2.core_memory_bytes - STACK_BYTES) // 12 // 16 * 16
    assert cols == 5376
    assert cols * 2.0**-24 + 2.0**-17 + 6 * 2.0**-24 < 2.0**-10


# -- the reference against the oracle -----------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(rows_and_length())
def test_reference_holds_its_tolerance(case):
    check(*case)


@settings(max_examples=200, deadline=None)
@given(rows_and_length(logits))
def test_reference_holds_its_tolerance_on_ordinary_logits(case):
    got = check(*case)
    x, length = case
    n = x.shape[1] if length is None else min(length, x.shape[1])
    assert not np.any(got[:, n:].astype(np.float32))  # exactly 0 past the length
    if n:
        sums = got[:, :n].astype(np.float64).sum(axis=1)
        assert np.all(np.abs(sums - 1) <= n * 2.0**-8)


@pytest.mark.parametrize(
    "row",
    [
        [0.0] * 16,  # uniform: 1/16 each
        [-0.0, 0.0] * 8,
        [1e30] + [0.0] * 15,  # one-hot after the max shift
        [3.3895313892515355e38, -3.3895313892515355e38]
        * 8,  # x - max overflows to -inf
        [-np.inf] + [1.0] * 15,  # -inf contributes 0
        [np.inf] + [1.0] * 15,  # NaN, as inf - inf is
        [-np.inf] * 16,  # NaN: nothing to normalize over
        [np.nan] + [1.0] * 15,
        [2.0**-133] * 16,
        [88.0, 0.0] + [-88.0] * 14,  # exps under fp32's normal range
        [0.0, -104.0] + [-200.0] * 14,  # an exp that underflows to a subnormal
    ],
)
@pytest.mark.parametrize("length", [None, 1, 2, 7])
def test_reference_on_adversarial_rows(row, length):
    check(bf16([row]), length)


@pytest.mark.parametrize(
    "length, valid", [(None, 16), (0, 0), (5, 5), (16, 16), (40, 16)]
)
def test_length_masks_the_tail(length, valid):
    x = bf16(np.linspace(-3, 3, 32).reshape(2, 16))
    got = check(x, length)
    assert not np.any(got[:, valid:].astype(np.float32))
    if valid:
        same = softmax(x[:, :valid]).reference(x[:, :valid])
        np.testing.assert_array_equal(
            got[:, :valid].view(np.uint16), same.view(np.uint16)
        )


def test_one_column_is_one():
    x = bf16([[5.0, -2.0, 7.0] + [0.0] * 13])
    assert float(check(x, 1)[0, 0]) == 1.0


def test_an_unbound_length_is_an_error():
    op = Softmax(rows=1, cols=16, length=PerCall("n") + 1)
    with pytest.raises(TypeError, match="bind it"):
        op.reference(bf16(np.zeros((1, 16))))
    assert op.bind({"n": 2}).length == 3


# -- a wrong kernel model is caught --------------------------------------------------------


def exp_rounded(x, length=None):
    """A wrong Softmax: each exp rounded to bf16 before the sum (one rounding more)."""
    xf = x.astype(np.float32)
    n = xf.shape[1] if length is None else length
    v = xf[:, :n]
    e = np.exp(v - v.max(axis=1, keepdims=True)).astype(bfloat16).astype(np.float32)
    out = np.zeros_like(xf)
    out[:, :n] = e / np.sum(e, axis=1, keepdims=True, dtype=np.float32)
    return out.astype(bfloat16)


def bf16_sum(x):
    """A wrong Softmax: the exps summed in a bf16 accumulator."""
    xf = x.astype(np.float32)
    e = np.exp(xf - xf.max(axis=1, keepdims=True))
    total = np.zeros((x.shape[0], 1), np.float32)
    for j in range(x.shape[1]):
        total = (total + e[:, j : j + 1]).astype(bfloat16).astype(np.float32)
    return (e / total).astype(bfloat16)


def no_max_shift(x):
    """A wrong Softmax: exp(x) without subtracting the row's max first."""
    xf = x.astype(np.float32)
    with np.errstate(all="ignore"):
        e = np.exp(xf)
        return (e / e.sum(axis=1, keepdims=True, dtype=np.float32)).astype(bfloat16)


def test_tolerance_catches_an_extra_rounding_of_the_exps():
    # Found by search: exp(-6.21875) rounds up to bf16 by nearly half an ulp
    # and exp(-1.359375) down, five times over; element 1 ends 2 ulps off.
    x = bf16([[0.0, -6.21875] + [-1.359375] * 5 + [9.0] * 9])
    op = softmax(x, 7)
    want = oracle(x, 7)
    assert compare(op.reference(x), want, op.tolerance())
    verdict = compare(exp_rounded(x, 7), want, op.tolerance())
    assert not verdict
    assert verdict.worst_index == (0, 1) and verdict.max_ulp_err == 2


def test_tolerance_catches_a_bf16_accumulator():
    x = bf16(np.zeros((1, 1024)))  # 1024 exps of 1: a bf16 sum stalls at 256
    op = softmax(x)
    assert compare(op.reference(x), oracle(x), op.tolerance())
    assert not compare(bf16_sum(x), oracle(x), op.tolerance())


def test_tolerance_catches_a_missing_max_shift():
    x = bf16([[100.0, 99.0] + [0.0] * 14])  # exp(100) overflows fp32
    op = softmax(x)
    assert compare(op.reference(x), oracle(x), op.tolerance())
    assert not compare(no_max_shift(x), oracle(x), op.tolerance())


def test_tolerance_catches_an_ignored_length():
    x = bf16(np.linspace(-1, 1, 16)[None])
    op = softmax(x, 8)
    assert not compare(softmax(x).reference(x), oracle(x, 8), op.tolerance())
    # Normalizing over the first 8 but leaving the tail unmasked is caught too.
    tail = op.reference(x).copy()
    tail[:, 8:] = x[:, 8:]
    assert not compare(tail, oracle(x, 8), op.tolerance())


# -- resolve and check -------------------------------------------------------------------


def assert_legal(op, dev):
    assert op.open_tunables() == ()
    assert op.num_aie_columns <= dev.columns
    assert op.rows % (op.rows_per_tile * op.num_aie_columns) == 0
    assert op.core_bytes() <= dev.core_memory_bytes - STACK_BYTES
    op.check(dev)


@settings(max_examples=300, deadline=None)
@given(
    rows=st.integers(1, 4096),
    k=st.integers(1, 336),
    dev=st.sampled_from(DEVICES),
    length=st.none() | st.integers(0, 10_000),
)
def test_resolve_gives_legal_tunables(rows, k, dev, length):
    assert_legal(Softmax(rows=rows, cols=16 * k, length=length).resolved(dev), dev)


@pytest.mark.parametrize(
    "rows, cols, dev, tunables",
    [
        (1, 2048, NPU2, {"num_aie_columns": 1, "rows_per_tile": 1}),
        (32, 1024, NPU2, {"num_aie_columns": 8, "rows_per_tile": 4}),
        (32, 1024, NPU1, {"num_aie_columns": 4, "rows_per_tile": 4}),
        (3, 5376, NPU1, {"num_aie_columns": 1, "rows_per_tile": 1}),
    ],
    ids=str,
)
def test_resolve_picks(rows, cols, dev, tunables):
    assert Softmax(rows=rows, cols=cols).resolve(dev) == tunables


# -- cost --------------------------------------------------------------------------------


@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_cost_follows_the_row_tiling(dev):
    op = Softmax(rows=32, cols=1024, rows_per_tile=2, num_aie_columns=4)
    cost = op.cost(dev)
    assert (cost.columns, cost.cores, cost.calls, cost.reread_bytes) == (4, 4, 4, 0)
    fewer = op.replace(rows_per_tile=4)
    assert step_time(fewer, dev).seconds < step_time(op, dev).seconds


# -- in a graph --------------------------------------------------------------------------


class Scores(iron.Graph):
    """Decode attention's scores: softmax over the positions so far."""

    def body(self, x, *, position: iron.Scratchpad[int]):
        return Softmax.step(x, length=position + 1)


class Whole(iron.Graph):
    def body(self, x):
        return Softmax.step(x)


class FirstRows(iron.Graph):
    def body(self, x, *, n: iron.Scratchpad[int]):
        return Softmax.step(x[:n])


def test_per_call_length_in_a_graph():
    rng = np.random.default_rng(0)
    x = bf16(rng.standard_normal((4, 64)) * 4)
    graph = Scores()
    with iron.use_device("npu2"):
        (step,) = graph.record(x=(4, 64)).steps
        outs = {p: graph.reference(x, position=p) for p in (0, 9, 63, 100)}
    assert (step.op.rows, step.op.cols) == (4, 64)
    assert isinstance(step.op.length, Affine) and str(step.op.length) == "position + 1"
    for p, out in outs.items():
        want = Softmax(rows=4, cols=64, length=p + 1).reference(x)
        np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))
        assert compare(out, oracle(x, p + 1), step.op.tolerance())


def test_whole_rows_and_bounded_rows_in_a_graph():
    rng = np.random.default_rng(1)
    x = bf16(rng.standard_normal((8, 32)))
    with iron.use_device("npu1"):
        (step,) = Whole().record(x=(8, 32)).steps
        whole = Whole().reference(x)
        first = FirstRows().reference(x, n=3)
    assert step.op.length is None and step.op.num_aie_columns == 4
    np.testing.assert_array_equal(
        whole.view(np.uint16), softmax(x).reference(x).view(np.uint16)
    )
    assert first.shape == (3, 32)
    np.testing.assert_array_equal(first.view(np.uint16), whole[:3].view(np.uint16))


def test_a_dimension_conflict_names_both_sources():
    with iron.use_device("npu2"):
        with pytest.raises(DimensionConflictError) as info:

            class Pinned(iron.Graph):
                def body(self, x):
                    return Softmax.step(x, cols=32)

            Pinned().record(x=(4, 64))
    assert str(info.value) == (
        "Softmax: cols is 32 from the call's keyword but 64 from x.shape[1]"
    )


def test_ulp_distance_of_the_reference_on_random_rows_is_at_most_one():
    rng = np.random.default_rng(2)
    x = bf16(rng.standard_normal((16, 512)) * 5)
    got = softmax(x).reference(x)
    assert bf16_ulp_distance(got, oracle(x)).max() <= 1
