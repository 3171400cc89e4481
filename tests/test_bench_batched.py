"""Figure 14 (many sequences at once), checked in-process.

The bound of a point is the larger of the cost model's terms, and the
aggregate rate is B over the step's modelled time; the batched versions are
the ones the graph builds (the tiny model's shapes, quickly).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from iron.lm.config import LlamaConfig

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from figures import batched  # noqa: E402


def test_the_bound_is_the_larger_term():
    assert batched.bound(2.0, 1.0) == "bandwidth"
    assert batched.bound(1.0, 2.0) == "compute"


def test_each_batch_is_modelled_from_its_own_version(monkeypatch):
    monkeypatch.setattr(batched, "CONTEXT", 64)
    out = batched.model_batches(LlamaConfig.tiny())
    assert sorted(out) == [1, 2, 4, 8]
    for b, m in out.items():
        assert m["tokens_s"] == pytest.approx(b / m["seconds"])
    # more rows, more attention: a step never gets cheaper with B
    times = [out[b]["seconds"] for b in (1, 2, 4, 8)]
    assert times == sorted(times) and times[0] < times[-1]
