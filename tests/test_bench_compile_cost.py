"""Figure 1's growth measurement: how the linearity verdict is reached (issue 20).

The verdict flipped between runs (R^2 0.9885 in one, met in the one before)
because each depth took its best of a few wall-clock runs and the early
per-layer cost was one difference of about 7 ms. Now: CPU time, rounds that
compile every depth in turn from a collected heap, medians per depth, and
the early and late per-layer costs from a quadratic fitted to every
depth's median.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from figures import compile_cost  # noqa: E402


def test_slopes_compare_two_to_four_with_eight_to_sixteen_for_quadratic_growth():
    # t = a n + b n^2: the fitted quadratic's 2 -> 4 per-layer cost is a + 6b,
    # its 8 -> 16 one a + 24b: the two differences compared before.
    a, b = 5e-3, 1e-4
    times = {n: a * n + b * n * n for n in compile_cost.DEPTHS}
    early, late = compile_cost.slopes(times)
    assert early == pytest.approx((times[4] - times[2]) / 2)
    assert late == pytest.approx((times[16] - times[8]) / 8)
    assert compile_cost.marginal_ratio(times) == pytest.approx(
        (a + 24 * b) / (a + 6 * b)
    )


def test_linear_growth_reads_one_and_fewer_than_four_depths_are_refused():
    times = {n: 0.008 + 0.005 * n for n in compile_cost.DEPTHS}
    assert compile_cost.marginal_ratio(times) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="at least 4 depths"):
        compile_cost.slopes({2: 1.0, 4: 2.0, 8: 4.0})


def test_rounds_compile_every_depth_in_turn_from_a_collected_heap(monkeypatch):
    order, collected = [], []
    monkeypatch.setattr(compile_cost.gc, "collect", lambda: collected.append(1))

    def fake(config, context, rows):
        order.append(config)
        return {"total": float(config), "wall": 2.0 * config, "steps": (1, 1)}

    monkeypatch.setattr(compile_cost, "iron_compile", fake)
    rounds = compile_cost.depth_rounds(lambda n: n, 64, (2, 4, 8), 2)
    assert order == [2, 4, 8, 8, 4, 2]  # reversed every other round
    assert len(collected) == 6
    assert rounds[1][4] == {"total": 4.0, "wall": 8.0}  # no "steps"


def test_the_spread_is_reproducible_and_brackets_a_noiseless_ratio():
    rounds = [{n: {"total": 0.01 + 0.005 * n} for n in compile_cost.DEPTHS}] * 5
    low, high, r2_low, r2_high = compile_cost._bootstrap(rounds, compile_cost.DEPTHS)
    assert low == pytest.approx(1.0) and high == pytest.approx(1.0)
    assert r2_low == pytest.approx(1.0) and r2_high == pytest.approx(1.0)
    rng = random.Random(1)
    noisy = [
        {n: {"total": 0.005 * n * rng.uniform(0.8, 1.2)} for n in compile_cost.DEPTHS}
        for _ in range(9)
    ]
    first = compile_cost._bootstrap(noisy, compile_cost.DEPTHS)
    assert first == compile_cost._bootstrap(noisy, compile_cost.DEPTHS)
    assert first[0] < first[1] and first[2] < first[3] <= 1.0


def test_every_time_is_cpu_time():
    import time

    assert compile_cost.CLOCK is time.process_time
