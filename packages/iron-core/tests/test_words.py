"""Per-call words: collection from real recordings, sharing, limits, evaluation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from operators_for_tests import CopyTo, CopyView, Double, ZeroFrom

import iron
from iron.core.percall import Affine, PerCall
from iron.core.words import TooManyWordsError, Word, evaluate_words, words_of


class Decode(iron.Graph):
    """A bound, a cache write at ``position`` and a carried position."""

    def __init__(self) -> None:
        self.cache = iron.state((16, 8), np.float32)

    def body(self, x, *, n: iron.Scratchpad[int], position: iron.Carried[int]):
        y = Double.step(x[:n])
        CopyTo.step(y, out=self.cache[position])
        z = Double.step(x[:n])
        return z, iron.carry(position=position + 1)


class Busy(iron.Graph):
    """Three distinct expressions: n, 8 * position and n + 1 (a per-call field)."""

    def __init__(self) -> None:
        self.cache = iron.state((16, 8), np.float32)

    def body(self, x, *, n: iron.Scratchpad[int], position: iron.Carried[int]):
        y = Double.step(x[:n])
        CopyTo.step(y, out=self.cache[position])
        w = ZeroFrom.step(x, length=n + 1)
        return w, iron.carry(position=position + 1)


class Walk(iron.Graph):
    """A transposed view of a cache row: a strided view shifted per call."""

    def __init__(self) -> None:
        self.cache = iron.state((16, 4, 2), np.float32)

    def body(self, *, position: iron.Carried[int]):
        y = CopyView.step(self.cache[position].T)
        return y, iron.carry(position=position + 1)


def _record(graph: iron.Graph, **shapes):
    with iron.use_device("npu2"):
        return graph.record(**shapes)


def test_uses_of_one_expression_share_a_word():
    rec = _record(Decode(), x=((8,), np.float32))
    words = words_of(rec, iron.NPU2)
    assert [w.symbol for w in words] == ["w0", "w1"]
    assert [str(w.expr) for w in words] == ["n", "8 * position"]
    n, offset = words
    assert n.uses == (
        "x[:n] bound of axis 0 (step 0 Double reads)",
        "double0[:n] bound of axis 0 (step 0 Double writes)",
        "double0[:n] bound of axis 0 (step 1 CopyTo reads)",
        # out= takes the rows its input bounds: the write is bounded too
        "cache[:n] bound of axis 0 (step 1 CopyTo writes)",
        "x[:n] bound of axis 0 (step 2 Double reads)",
        "double2[:n] bound of axis 0 (step 2 Double writes)",
    )
    assert offset.uses == ("offset of cache view (step 1 CopyTo writes)",)
    assert all(w.loopable and w.why_not == "" for w in words)
    assert n.names == frozenset({"n"})


def test_carry_next_values_are_not_words():
    rec = _record(Decode(), x=((8,), np.float32))
    keys = {w.expr.key() for w in words_of(rec, iron.NPU2)}
    assert (PerCall("position") + 1).key() not in keys


def test_share_false_gives_a_word_per_use():
    rec = _record(Decode(), x=((8,), np.float32))
    shared = words_of(rec, iron.NPU2)
    each = words_of(rec, iron.NPU2, share=False)
    assert len(each) == sum(len(w.uses) for w in shared) == 7
    assert [w.symbol for w in each] == [f"w{i}" for i in range(7)]
    assert all(len(w.uses) == 1 for w in each)
    assert [str(w.expr) for w in each].count("n") == 6


def test_per_call_operator_field_is_a_word():
    rec = _record(Busy(), x=((8,), np.float32))
    words = words_of(rec, iron.NPU2)
    assert [str(w.expr) for w in words] == ["n", "8 * position", "n + 1"]
    assert words[2].uses == ("ZeroFrom.length (step 2)",)


def test_strided_view_shift_is_a_word():
    rec = _record(Walk())
    (word,) = words_of(rec, iron.NPU2)
    assert str(word.expr) == "8 * position"
    assert word.uses == ("shift of cache view (step 0 CopyView reads)",)


def test_host_step_bound_is_a_word():
    class Host(iron.Graph):
        def body(self, x, *, n: iron.Scratchpad[int]):
            iron.on_host(print, x[:n])
            return Double.step(x)

    rec = _record(Host(), x=((8,), np.float32))
    (word,) = words_of(rec, iron.NPU2)
    assert word.uses == ("x[:n] bound of axis 0 (on_host print after 0 steps reads)",)


def test_no_per_call_value_no_words():
    class Plain(iron.Graph):
        def body(self, x):
            return Double.step(x)

    assert words_of(_record(Plain(), x=((8,), np.float32)), iron.NPU2) == []


def test_too_many_words_names_count_limit_and_values():
    rec = _record(Busy(), x=((8,), np.float32))
    small = dataclasses.replace(iron.NPU2, scratchpad_words=2)
    with pytest.raises(TooManyWordsError) as info:
        words_of(rec, small)
    text = str(info.value)
    assert isinstance(info.value, ValueError)
    assert "needs 3 scratchpad words" in text
    assert "npu2 has 2" in text
    assert "['n', 'position']" in text
    assert "ZeroFrom.length (step 2)" in text
    assert "Share expressions" in text and "fewer per-call views" in text


def test_reserved_slots_count_against_the_limit():
    rec = _record(Decode(), x=((8,), np.float32))
    small = dataclasses.replace(iron.NPU2, scratchpad_words=2)
    assert len(words_of(rec, small)) == 2
    with pytest.raises(TooManyWordsError, match="plus 1 carried-value slots"):
        words_of(rec, small, reserved=1)


def test_evaluate_words():
    rec = _record(Busy(), x=((8,), np.float32))
    words = words_of(rec, iron.NPU2)
    got = evaluate_words(words, {"n": 3, "position": 2})
    assert got.dtype == np.int32
    assert got.tolist() == [3, 16, 4]


def test_evaluate_words_range_checks_int32():
    n = PerCall("n")
    words = [Word("w0", n + 1, ("a",)), Word("w7", 4096 * n, ("b",))]
    assert isinstance(words[1].expr, Affine)
    assert evaluate_words(words, {"n": 2**18}).tolist() == [2**18 + 1, 2**30]
    with pytest.raises(OverflowError, match=r"w7 = 4096 \* n is 4294967296"):
        evaluate_words(words, {"n": 2**20})


def test_evaluate_words_names_a_missing_value():
    words = [Word("w0", PerCall("n").affine(), ("a",))]
    with pytest.raises(
        KeyError, match="w0 = n reads n, which this call gives no value for"
    ):
        evaluate_words(words, {})


def test_per_step_images_count_the_limit_per_image():
    """An xclbin per step reads its own scratchpad: the limit is per step.

    Forty steps each reading the same bound need forty words in all (one per
    use), but each image reads only its own, so the version fits 32.
    """

    class Many(iron.Graph):
        def body(self, x, *, n: iron.Scratchpad[int]):
            y = x[:n]
            for _ in range(40):
                y = Double.step(y)
            return y

    rec = _record(Many(), x=((8,), np.float32))
    each = words_of(rec, iron.NPU1, share=False)
    assert len(each) > iron.NPU1.scratchpad_words
    shared = words_of(rec, iron.NPU2, share=True)
    assert [str(w.expr) for w in shared] == ["n"]
