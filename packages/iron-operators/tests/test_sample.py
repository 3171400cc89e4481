"""Tests for Sample: greedy and seeded top-k draws, bit for bit reproducible.

The reference is checked against an independent scalar implementation of the
specification in the module docstring (each float32 operation written out),
so a kernel following the same steps agrees exactly; against the float64
softmax distribution over many seeds (a loose chi-square); and wrong models
(ties to the highest index, the temperature or top-k ignored) are caught.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ml_dtypes import bfloat16

import iron
from iron.core.cost import step_time
from iron.core.device import NPU1, NPU2
from iron.core.operator import Cost
from iron.core.tolerance import compare
from iron.operators.sample import (
    EXP2_COEFFS,
    LOG2E,
    MAX_TOP_K,
    Sample,
    draw,
    exp2_f32,
    hash32,
    ranked,
    temperature_code,
    temperature_of,
    top_p_code,
    top_p_of,
    uniform,
)

DEVICES = (NPU1, NPU2)
f32 = np.float32

# -- an independent scalar implementation of the specification ---------------------------


def spec_hash(seed: int) -> int:
    x = (seed * 2654435769 + 2135587861) % 2**32
    x ^= x >> 16
    x = (x * 2146121005) % 2**32
    x ^= x >> 15
    x = (x * 2221713035) % 2**32
    return x ^ (x >> 16)


def spec_exp2(y: np.float32) -> np.float32:
    if not y >= -126:
        return f32(0)
    n = math.floor(float(y))
    f = f32(y - f32(n))
    p = EXP2_COEFFS[7]
    for c in EXP2_COEFFS[6::-1]:
        p = f32(f32(p * f) + c)
    return f32(math.ldexp(float(p), n))


def spec_draw(logits, temperature, top_k, seed) -> int:
    values = [f32(x) for x in np.asarray(logits).astype(np.float32)]
    keys = [-math.inf if math.isnan(v) else float(v) for v in values]
    order = sorted(range(len(values)), key=lambda i: (-keys[i], i))
    if temperature == 0:
        return order[0]
    inv = f32(f32(1) / f32(temperature))
    z = [f32(values[i] * inv) for i in order[: min(top_k, len(values))]]
    if not math.isfinite(z[0]):
        return order[0]
    running, total = [], f32(0)
    for zj in z:
        total = f32(total + spec_exp2(f32(f32(zj - z[0]) * LOG2E)))
        running.append(total)
    u = f32(f32(spec_hash(seed) >> 8) * f32(2.0**-24))
    target = f32(u * running[-1])
    rank = sum(1 for c in running if c <= target)
    return order[min(rank, len(z) - 1)]


def sample(vocab, **fields):
    return Sample(vocab=vocab, **fields)


# -- the pieces -----------------------------------------------------------------------------


def test_hash_is_the_specified_integer_function():
    for seed in [0, 1, 2, 12345, 2**30 - 1, 2**31, 2**32 - 1, *range(100, 400)]:
        assert hash32(seed) == spec_hash(seed)
    # Pinned, so a change to the draw is deliberate.
    assert [hash32(s) for s in (0, 1, 2, 12345)] == [
        0xFF3E17D3,
        0xF90D2DBA,
        0xC9C258E6,
        0xC72B13D4,
    ]


def test_uniform_is_exact_in_float32():
    for seed in range(1000):
        u = uniform(seed)
        assert isinstance(u, np.float32) and 0 <= u < 1
        assert float(u) == (hash32(seed) >> 8) / 2**24


@settings(max_examples=300, deadline=None)
@given(st.floats(-126, 0, width=32))
def test_exp2_is_close_to_two_to_the_y_and_specified(y):
    y = f32(y)
    got = exp2_f32(np.array([y]))[0]
    assert got.dtype == np.float32
    assert abs(float(got) / 2.0 ** float(y) - 1) < 2e-6
    assert got == spec_exp2(y)


def test_exp2_edges():
    assert exp2_f32(np.array([0.0, -1.0, -126.0], np.float32)).tolist() == [
        1.0,
        0.5,
        2.0**-126,
    ]
    assert exp2_f32(np.array([-126.5, -np.inf, np.nan], np.float32)).tolist() == [
        0,
        0,
        0,
    ]


# -- greedy ----------------------------------------------------------------------------------------


def test_greedy_is_argmax_with_ties_to_the_lowest_index():
    logits = np.array([1.0, 3.0, -2.0, 3.0], bfloat16)
    got = sample(4).reference(logits)
    assert got.dtype == np.int32 and got.shape == (1,) and got[0] == 1
    assert sample(4, top_k=3, seed=99).reference(logits)[0] == 1


def test_nan_ranks_last():
    logits = np.array([np.nan, -1.0, np.nan, -0.5], bfloat16)
    assert sample(4).reference(logits)[0] == 3
    assert sample(2).reference(np.array([np.nan, np.nan], bfloat16))[0] == 0
    assert sample(2).reference(np.array([-np.inf, -np.inf], bfloat16))[0] == 0


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 3000),
    st.sampled_from(["ties", "special", "normal"]),
    st.integers(0, 2**32 - 1),
    st.data(),
)
def test_the_first_k_ranked_are_those_of_the_full_stable_sort(vocab, style, seed, data):
    """A partition finds the top k (greedy: an argmax) with the sort's order
    and tie-breaking: the same indices as the first k of a stable argsort."""
    rng = np.random.default_rng(seed)
    if style == "ties":
        logits = rng.integers(-3, 3, vocab).astype(bfloat16)
    elif style == "special":
        choices = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 3e38])
        logits = rng.choice(choices, vocab).astype(bfloat16)
    else:
        logits = rng.standard_normal(vocab).astype(np.float32)
    k = data.draw(st.integers(1, vocab))
    key = logits.astype(np.float32)
    key = np.where(np.isnan(key), np.float32(-np.inf), key)
    full = np.argsort(-key, kind="stable")
    np.testing.assert_array_equal(ranked(logits, k), full[:k])
    np.testing.assert_array_equal(ranked(logits), full)


def test_greedy_over_a_large_vocabulary_ties_to_the_lowest_index():
    """Figure 4's case: 128256 logits, greedy, the largest value tied (and
    -0.0 tied with 0.0 as the largest, NaNs ranking last)."""
    logits = np.full(128256, -5.0, bfloat16)
    logits[[70000, 5, 128255]] = 7.0
    assert sample(128256).reference(logits)[0] == 5
    logits = np.full(128256, -1.0, bfloat16)
    logits[[9, 100]] = np.nan
    logits[[40, 30]] = [0.0, -0.0]
    assert sample(128256).reference(logits)[0] == 30
    np.testing.assert_array_equal(ranked(logits, 4), [30, 40, 0, 1])
    with pytest.raises(ValueError, match="k=0 is below 1"):
        ranked(logits, 0)


def test_ties_to_the_highest_index_are_caught():
    logits = np.array([1.0, 3.0, 3.0, 0.0], bfloat16)
    got = sample(4).reference(logits)
    wrong = np.array([len(logits) - 1 - int(np.argmax(logits[::-1]))], np.int32)
    tolerance = sample(4).tolerance()
    assert tolerance.kind == "exact" and "bit for bit" in tolerance.note
    assert compare(got, np.array([1]), tolerance)
    assert not compare(wrong, np.array([1]), tolerance)


# -- draws ------------------------------------------------------------------------------------


@st.composite
def draws(draw_):
    vocab = draw_(st.integers(1, 40))
    style = draw_(st.sampled_from(["normal", "ties", "wide", "special", "float32"]))
    rng = np.random.default_rng(draw_(st.integers(0, 2**32 - 1)))
    if style == "ties":
        logits = rng.integers(-2, 3, vocab).astype(bfloat16)
    elif style == "wide":
        logits = (rng.standard_normal(vocab) * 10.0 ** rng.uniform(-3, 3)).astype(
            bfloat16
        )
    elif style == "special":
        choices = np.array(
            [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, 3e38, -3e38, 1e-40]
        )
        logits = rng.choice(choices, vocab).astype(bfloat16)
    elif style == "float32":
        logits = rng.standard_normal(vocab).astype(np.float32)
    else:
        logits = rng.standard_normal(vocab).astype(bfloat16)
    temperature = draw_(
        st.sampled_from([0.0, 1e-30, 0.1, 0.7, 1.0, 1.3, 10.0, 1e30])
        | st.floats(1e-3, 100)
    )
    top_k = draw_(st.integers(1, 50))
    seed = draw_(st.integers(0, 2**30 - 1))
    return logits, temperature, top_k, seed


@settings(max_examples=500, deadline=None)
@given(draws())
def test_reference_follows_the_specification_bit_for_bit(case):
    logits, temperature, top_k, seed = case
    op = sample(logits.size, temperature=temperature, top_k=top_k, seed=seed)
    got = op.reference(logits)
    want = spec_draw(logits, temperature, top_k, seed)
    assert compare(got, np.array([want]), op.tolerance()), (got, want)
    # Always among the top_k by value (ties broken by index).
    order = sorted(
        range(logits.size),
        key=lambda i: (-np.nan_to_num(float(logits[i]), nan=-np.inf), i),
    )
    assert int(got[0]) in order[: max(1, min(top_k, logits.size))]


def test_same_seed_same_token_and_bf16_equals_float32():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal(1000).astype(bfloat16)
    for seed in range(50):
        op = sample(1000, temperature=0.9, top_k=40, seed=seed)
        a, b = op.reference(logits), op.reference(logits)
        c = op.replace(itemsize=4).reference(logits.astype(np.float32))
        assert a[0] == b[0] == c[0]
    tokens = {
        int(sample(1000, temperature=0.9, top_k=40, seed=s).reference(logits)[0])
        for s in range(200)
    }
    assert len(tokens) > 10  # the seed matters


def chi_square(logits, temperature, top_k, seeds):
    counts = np.zeros(logits.size)
    for seed in range(seeds):
        counts[draw(logits, temperature, top_k, seed)] += 1
    z = logits.astype(np.float64) / temperature
    top = np.argsort(-z, kind="stable")[:top_k]
    p = np.zeros(logits.size)
    p[top] = np.exp(z[top] - z[top].max())
    p /= p.sum()
    assert counts[p == 0].sum() == 0  # never outside the top k
    keep = p > 0
    return float((((counts - seeds * p) ** 2)[keep] / (seeds * p[keep])).sum()), counts


def test_distribution_matches_the_softmax_of_the_top_k():
    logits = np.array([2.0, 1.5, 1.0, 0.5, 0.0, -1.0, 2.25, -3.0], bfloat16)
    stat, _ = chi_square(logits, 0.8, 5, 20000)
    assert stat < 35  # 4 degrees of freedom: p ~ 1e-6 at 35


def test_temperature_sharpens_and_flattens():
    logits = np.array([2.0, 1.0, 0.0, -1.0], bfloat16)
    _, cold = chi_square(logits, 0.05, 4, 2000)
    assert cold[0] == 2000
    stat, hot = chi_square(logits, 1000.0, 4, 8000)
    assert stat < 30 and hot.min() > 1800  # near uniform


def test_ignoring_the_temperature_or_top_k_is_caught():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal(64).astype(bfloat16)
    tolerance = sample(64).tolerance()
    ignored_t = [
        s for s in range(300) if draw(logits, 0.3, 8, s) != draw(logits, 1.0, 8, s)
    ]
    ignored_k = [
        s for s in range(300) if draw(logits, 1.0, 8, s) != draw(logits, 1.0, 64, s)
    ]
    assert ignored_t and ignored_k
    s = ignored_t[0]
    want = np.array([draw(logits, 0.3, 8, s)])
    assert not compare(np.array([draw(logits, 1.0, 8, s)], np.int32), want, tolerance)


# -- in a graph ----------------------------------------------------------------------------------


class Loop(iron.Graph):
    def body(self, logits, *, seed: iron.Carried[int], last: iron.Carried[int]):
        token = Sample.step(logits, temperature=0.8, top_k=4, seed=seed)
        return token, iron.carry(seed=seed + 1, last=token)


def test_in_a_decode_loop_the_seed_is_per_call_and_the_token_carried():
    rng = np.random.default_rng(2)
    logits = rng.standard_normal(256).astype(bfloat16)
    graph = Loop()
    with iron.use_device("npu2"):
        recording = graph.record(logits=(256,))
        op = recording.steps[0].op
        assert (op.vocab, op.itemsize, op.top_k) == (256, 2, 4)
        assert str(op.seed) == "seed"
        for seed in (0, 7, 1000):
            token, carry = graph.reference(logits, seed=seed, last=0)
            assert token.dtype == np.int32 and token.shape == (1,)
            assert token[0] == draw(logits, 0.8, 4, seed)
            assert carry.seed == seed + 1 and carry.last == token[0]


def test_float32_logits_are_accepted_and_others_refused():
    class Greedy(iron.Graph):
        def body(self, logits):
            return Sample.step(logits)

    logits = np.array([0.5, 2.5, 2.5, 1.0], np.float32)
    with iron.use_device("npu1"):
        assert Greedy().record(logits=((4,), np.float32)).steps[0].op.itemsize == 4
        assert Greedy().reference(logits)[0] == 1
        with pytest.raises(TypeError, match="Sample.logits takes bfloat16 or float32"):
            Greedy().record(logits=((4,), np.float16))


# -- resolve, check and cost ------------------------------------------------------------------


@pytest.mark.parametrize("dev", DEVICES, ids=str)
@pytest.mark.parametrize(
    "vocab, tile", [(128256, 4008), (32000, 4000), (151936, 2374), (10, 10), (2, 2)]
)
def test_resolve_picks_the_largest_chunk(vocab, tile, dev):
    op = sample(vocab, temperature=0.7, top_k=min(40, vocab)).resolved(dev)
    assert op.tile_size == tile and vocab % tile == 0
    assert op.core_bytes(tile) <= dev.core_memory_bytes


def test_reference_refuses_a_bad_temperature_and_an_unbound_seed():
    with pytest.raises(ValueError, match="temperature=-0.5 is not a finite number"):
        sample(4, temperature=-0.5).reference(np.zeros(4, bfloat16))
    with pytest.raises(ValueError, match="bind it first"):
        sample(4, seed=iron.core.percall.PerCall("s")).reference(np.zeros(4, bfloat16))


def _tiling(cost: Cost) -> tuple[int, int, int, int]:
    """How a cost is spread: columns, cores, calls per core, bytes re-read."""
    return cost.columns, cost.cores, cost.calls, cost.reread_bytes


@pytest.mark.parametrize("dev", DEVICES, ids=str)
def test_cost_follows_the_chunking(dev):
    # One core streams 128256 logits in chunks of 1002: 128 kernel calls.
    op = sample(128256, tile_size=1002)
    assert _tiling(op.cost(dev)) == (1, 1, 128, 0)
    bigger = sample(128256, tile_size=4008)
    assert step_time(bigger, dev).seconds < step_time(op, dev).seconds


def test_max_top_k_fits_a_core_at_the_largest_chunk():
    assert sample(8192, itemsize=4).core_bytes(4096) <= NPU1.core_memory_bytes
    assert MAX_TOP_K == 256


# -- nucleus (top_p) -------------------------------------------------------------------------


def spec_nucleus(logits, temperature, top_k, seed, top_p) -> int:
    """The specification's steps 6-7 written out, each float32 operation apart."""
    values = [f32(x) for x in np.asarray(logits).astype(np.float32)]
    keys = [-math.inf if math.isnan(v) else float(v) for v in values]
    order = sorted(range(len(values)), key=lambda i: (-keys[i], i))
    if temperature == 0:
        return order[0]
    inv = f32(f32(1) / f32(temperature))
    k = min(top_k, len(values))
    z = [f32(values[i] * inv) for i in order[:k]]
    if not math.isfinite(z[0]):
        return order[0]
    running, total = [], f32(0)
    for zj in z:
        total = f32(total + spec_exp2(f32(f32(zj - z[0]) * LOG2E)))
        running.append(total)
    p = f32(top_p)
    m = k
    if p < 1:
        threshold = f32(p * running[-1])
        m = min(1 + sum(1 for c in running if c < threshold), k)
    u = f32(f32(spec_hash(seed) >> 8) * f32(2.0**-24))
    target = f32(u * running[m - 1])
    rank = sum(1 for c in running[:m] if c <= target)
    return order[min(rank, m - 1)]


def oracle_nucleus(logits, temperature, top_k, top_p):
    """Float64: the nucleus (sure members, members within rounding) and its probabilities."""
    x = np.asarray(logits).astype(np.float64)
    order = np.argsort(-x, kind="stable")[: min(top_k, x.size)]
    z = x[order] / temperature
    w = np.exp(z - z[0])
    prob = w / w.sum()
    before = np.concatenate([[0.0], np.cumsum(prob)[:-1]])
    # rank j is in the nucleus when the mass before it is below top_p; near the
    # boundary float32 rounding may decide either way
    sure = order[before < top_p - 1e-5]
    maybe = order[before < top_p + 1e-5]
    return sure, maybe, dict(zip(order.tolist(), prob.tolist()))


NUCLEUS = [
    (np.random.default_rng(s).standard_normal(512) * 3, t, k, p)
    for s, t, k, p in [(0, 1.0, 256, 0.9), (1, 0.7, 40, 0.5), (2, 1.5, 100, 0.95)]
]


@pytest.mark.parametrize("logits, t, k, p", NUCLEUS)
def test_top_p_follows_the_specification_and_the_float64_nucleus(logits, t, k, p):
    logits = logits.astype(bfloat16)
    sure, maybe, prob = oracle_nucleus(logits, t, k, p)
    seen = {}
    for seed in range(3000):
        token = int(
            sample(512, temperature=t, top_k=k, top_p=p, seed=seed).reference(logits)[0]
        )
        assert (
            token == spec_nucleus(logits, t, k, seed, p) == draw(logits, t, k, seed, p)
        )
        assert token in maybe, f"token {token} outside the float64 nucleus"
        seen[token] = seen.get(token, 0) + 1
    # every sure member is drawn at its renormalized probability (loosely)
    mass = sum(prob[i] for i in sure)
    for i in sure[:5]:
        want = prob[i] / mass * 3000
        assert abs(seen.get(int(i), 0) - want) < 5 * math.sqrt(want) + 5


def test_top_p_one_is_exactly_the_top_k_draw_and_small_p_is_greedy():
    rng = np.random.default_rng(5)
    logits = (rng.standard_normal(300) * 2).astype(bfloat16)
    for seed in range(200):
        assert draw(logits, 0.9, 50, seed, 1.0) == draw(logits, 0.9, 50, seed)
        # a p below the first candidate's share keeps only it
        assert draw(logits, 0.9, 50, seed, 1e-6) == draw(logits, 0, 1, 0)


def test_ignoring_top_p_is_caught():
    rng = np.random.default_rng(6)
    logits = (rng.standard_normal(256) * 2).astype(bfloat16)
    differ = [
        s
        for s in range(300)
        if draw(logits, 1.0, 64, s, 0.5) != draw(logits, 1.0, 64, s)
    ]
    assert differ


@pytest.mark.parametrize("p", [0.0, -0.1, 1.5, float("nan")])
def test_a_bad_top_p_is_refused_by_name(p):
    with pytest.raises(ValueError, match=r"top_p=.* is not in \(0, 1\]"):
        sample(4, temperature=1.0, top_k=2, top_p=p).reference(np.zeros(4, bfloat16))
    with pytest.raises(iron.core.operator.RefusedShapeError, match=r"top_p=.*\(0, 1\]"):
        sample(4, temperature=1.0, top_k=2, top_p=p).check(NPU2)
    with pytest.raises(ValueError, match=r"top_p="):
        top_p_code(p)


# -- per-call settings -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "t", [0.0, 2.0**-63, 0.1, 0.7, 1.0, 2.0, 3.5, 1e10, 2.0**64 * 0.99]
)
def test_a_temperature_code_gives_back_its_float32_exactly(t):
    code = temperature_code(t)
    assert 0 <= code < 2**30
    assert temperature_of(code) == float(np.float32(t))
    assert (code == 0) == (t == 0)


@pytest.mark.parametrize("t", [-1.0, float("inf"), float("nan"), 2.0**-70, 2.0**64])
def test_a_temperature_no_code_holds_is_refused_by_name(t):
    with pytest.raises(ValueError, match="temperature="):
        temperature_code(t)


@pytest.mark.parametrize("p", [1.0, 0.9, 0.5, 1e-7])
def test_a_top_p_code_gives_back_its_float32_exactly(p):
    code = top_p_code(p)
    assert 0 < code < 2**30 and top_p_of(code) == float(np.float32(p))


class PerCallSample(iron.Graph):
    def body(
        self,
        logits,
        *,
        temperature: iron.Scratchpad[int] = 0,
        top_k: iron.Scratchpad[int] = 1,
        top_p: iron.Scratchpad[int] = 0,
        seed: iron.Scratchpad[int] = 0,
    ):
        return Sample.step(
            logits, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed
        )


def test_per_call_settings_give_the_fixed_draw_each_call():
    rng = np.random.default_rng(7)
    logits = (rng.standard_normal(512) * 2).astype(bfloat16)
    graph = PerCallSample()
    with iron.use_device("npu2"):
        op = graph.record(logits=(512,)).steps[0].op
        assert [
            str(getattr(op, n)) for n in ("temperature", "top_k", "top_p", "seed")
        ] == [
            "temperature",
            "top_k",
            "top_p",
            "seed",
        ]
        op.resolved("npu2")  # per-call fields are checked per call, not here
        for t, k, p, seed in [(0.0, 1, 1.0, 0), (0.8, 40, 1.0, 3), (1.2, 256, 0.9, 9)]:
            got = graph.reference(
                logits,
                temperature=temperature_code(t),
                top_k=k,
                top_p=top_p_code(p),
                seed=seed,
            )
            want = sample(512, temperature=t, top_k=k, top_p=p, seed=seed)
            assert got[0] == want.reference(logits)[0] == draw(logits, t, k, seed, p)


@pytest.mark.parametrize("k", [0, 257])
def test_a_per_call_top_k_beyond_the_list_is_refused_by_name(k):
    s = iron.core.percall.PerCall
    op = sample(512, temperature=s("t"), top_k=s("k"), top_p=s("p"))
    with pytest.raises(
        ValueError, match=rf"per-call top_k=k is {k} this call, outside \[1, 256\]"
    ):
        op.bind({"t": temperature_code(1.0), "k": k, "p": top_p_code(1.0)})
    with pytest.raises(ValueError, match=r"per-call top_p=p holds 0.0 this call"):
        op.bind({"t": 0, "k": 4, "p": 0})
    with pytest.raises(
        ValueError, match="temperature=t is a per-call value; bind it first"
    ):
        op.reference(np.zeros(512, bfloat16))
