"""Figure 16 (issue 34): modelled decode and prefill of 1B, 3B and 8B q4 to 128k.

The cost model is deterministic, so its arithmetic and orderings are
asserted here in-process: each point never beats its bandwidth bound and
the bound is the bytes a token reads at npu2's DMA roof; decode slows as
the cache grows and as the model grows; prefill's attention share grows with
the context; each model runs with its own shipped profile.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import iron

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from figures import long_context  # noqa: E402
from figures.common import Context  # noqa: E402


@pytest.fixture(scope="module")
def figure16(tmp_path_factory):
    return long_context.run(Context(quick=True, scratch=tmp_path_factory.mktemp("b")))


def test_every_decode_point_is_at_most_its_bound(figure16):
    roof = iron.NPU2.dma_bytes_per_s
    points = figure16["details"]["data"]["decode"]
    assert len(points) == len(long_context.MODELS) * len(long_context.DECODE)
    for p in points:
        bound = roof / (p["weights_bytes"] + p["kv_bytes"])
        assert p["bound_tokens_per_s"] == pytest.approx(bound)
        assert 1.0 <= p["ratio"] <= long_context.WITHIN, p
        assert p["tokens_per_s"] <= p["bound_tokens_per_s"]
    assert figure16["met"] is True


def test_decode_slows_with_the_cache_and_the_model(figure16):
    at = {(p["model"], p["context"]): p for p in figure16["details"]["data"]["decode"]}
    for m in long_context.MODELS:
        speeds = [at[(m, c)]["tokens_per_s"] for c in long_context.DECODE]
        assert speeds == sorted(speeds, reverse=True), m
        assert at[(m, 131072)]["bound_by"].startswith("KV cache"), m
        assert at[(m, 1024)]["bound_by"].startswith("weights"), m
    for c in long_context.DECODE:
        speeds = [at[(m, c)]["tokens_per_s"] for m in long_context.MODELS]
        assert speeds == sorted(speeds, reverse=True), c


def test_prefill_attention_share_grows_with_the_context(figure16):
    points = figure16["details"]["data"]["prefill"]
    for m in long_context.MODELS:
        shares = [p["attention_share"] for p in points if p["model"] == m]
        assert shares == sorted(shares), m
        assert shares[-1] > 0.5, m  # 32k: the cache streamed per chunk dominates
