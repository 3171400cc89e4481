"""The flat per-call program gives what the general evaluation gives (issue 20).

A call's checks, limits, words, carried slots and idle steps, each distinct
expression evaluated once, against ``check_values``, ``Recording.check_values``,
``evaluate_words`` and ``IdleProgram`` run one after another as a call ran them
before: the same values, the same scratchpad, the same idle steps, and the
same error (type and message) wherever they refuse, on randomized programs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iron.core.callprogram import CallProgram
from iron.core.percall import Affine, PerCall, check_values, clamp
from iron.core.plan import IdleProgram
from iron.core.recording import Limit, Recording
from iron.core.words import Word, evaluate_words

NAMES = ("position", "n", "seed", "token")


def _recording(
    values: list[str], defaults: dict[str, int], limits: list[Limit], carry: dict
) -> Recording:
    return Recording(
        name="g",
        steps=[],
        inputs=[],
        outputs=[],
        values=[PerCall(v) for v in values],
        carry=carry,
        weights={},
        states={},
        host=[],
        limits=limits,
        addresses={},
        defaults=defaults,
    )


def _general(
    recording: Recording,
    words: list[Word],
    carried: tuple[str, ...],
    idle: list[IdleProgram],
    values: dict[str, Any],
) -> tuple[dict[str, int], np.ndarray, tuple[frozenset[int], ...]]:
    """A call's per-call work as CompiledGraph did it before the program."""
    assert recording.signature is not None
    declared = recording.signature.declared
    full = {n: d for n, d in declared.items() if d is not None}
    full.update(values)
    needed = [p.name for p in recording.reads]
    checked = check_values("v", declared, full, needed=needed)
    recording.check_values(checked)
    pad = np.zeros(len(words) + len(carried), np.int32)
    pad[: len(words)] = evaluate_words(words, checked)
    for k, name in enumerate(carried):
        pad[len(words) + k] = checked.get(name, 0)
    return checked, pad, tuple(program(checked) for program in idle)


def _outcome(fn: Any) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except (TypeError, ValueError, IndexError, KeyError, OverflowError) as error:
        return type(error).__name__, str(error)


@st.composite
def expressions(draw: st.DrawFn, names: tuple[str, ...]) -> Affine:
    while True:
        expr: Any = draw(st.integers(-20, 20))
        for name in draw(st.lists(st.sampled_from(names), min_size=1, max_size=3)):
            expr = expr + draw(st.sampled_from([1, -1, 2, 3, 32, 128])) * PerCall(name)
        shape = draw(st.sampled_from(["plain", "clamp", "div", "both"]))
        if shape in ("clamp", "both") and isinstance(expr, Affine):
            lo = draw(st.one_of(st.none(), st.integers(-5, 50)))
            hi = draw(st.one_of(st.none(), st.integers(51, 300)))
            expr = clamp(expr, lo, hi) + draw(st.integers(-3, 3))
        if shape in ("div", "both") and isinstance(expr, Affine):
            expr = expr // draw(st.sampled_from([2, 4, 64])) - draw(st.integers(0, 3))
        if isinstance(expr, Affine):
            return expr


@st.composite
def bounds(draw: st.DrawFn, names: tuple[str, ...]) -> Affine:
    """A bound ``x[:n - k]``: often exactly zero rows for the values drawn."""
    if draw(st.booleans()):
        return draw(expressions(names))
    return (PerCall(draw(st.sampled_from(names))) - draw(st.integers(0, 6))).affine()


@st.composite
def programs(draw: st.DrawFn) -> tuple[Any, ...]:
    names = tuple(draw(st.lists(st.sampled_from(NAMES), min_size=1, unique=True)))
    defaults = {
        n: d
        for n in names
        if (d := draw(st.one_of(st.none(), st.integers(0, 40)))) is not None
    }
    limits = [
        Limit(
            draw(expressions(names)),
            lo,
            lo + draw(st.integers(1, 400) | st.just(1 << 20)),
            f"view {i}",
        )
        for i, lo in enumerate(draw(st.lists(st.integers(-10, 10), max_size=6)))
    ]
    # a limit repeated, as 32 layers' caches repeat position's
    limits += limits[: draw(st.integers(0, len(limits)))]
    words = [
        Word(f"w{i}", draw(expressions(names)), ())
        for i in range(draw(st.integers(0, 5)))
    ]
    carried = tuple(draw(st.lists(st.sampled_from(names), unique=True)))
    # every value the words read is read by the version (as a recording's
    # words come from its own uses), through a carry of it
    carry: dict = {n: PerCall(n) + 1 for n in names if draw(st.booleans())}
    for w in words:
        for n in w.expr.names():
            carry.setdefault(n, PerCall(n))
    idle = [
        IdleProgram(
            frozenset(draw(st.lists(st.integers(0, 9), max_size=2))),
            tuple(
                (draw(bounds(names)), frozenset(draw(st.lists(st.integers(0, 9)))))
                for _ in range(draw(st.integers(0, 3)))
            ),
        )
        for _ in range(draw(st.integers(1, 2)))
    ]
    recording = _recording(list(names), defaults, limits, carry)
    # most calls give good values (some left to their defaults); some give
    # one bad one: unknown, out of range, not an int, a numpy integer
    values: dict[str, Any] = {
        n: draw(st.integers(0, 40) | st.integers(0, 6))
        for n in names
        if n not in defaults or draw(st.booleans())
    }
    if draw(st.integers(0, 3)) == 0:
        bad = draw(
            st.sampled_from([1 << 30, (1 << 30) - 1, -1, True, 1.0, np.int64(7), "3"])
        )
        values[draw(st.sampled_from((*names, "other")))] = bad
    if draw(st.integers(0, 7)) == 0 and values:
        del values[draw(st.sampled_from(sorted(values)))]
    return recording, words, carried, idle, values


@settings(max_examples=400, deadline=None)
@given(programs())
def test_the_program_gives_what_the_general_evaluation_gives(case) -> None:
    recording, words, carried, idle, values = case
    program = CallProgram("v", recording, words, carried=carried, idle=idle)
    want = _outcome(lambda: _general(recording, words, carried, idle, values))
    got = _outcome(lambda: program(values))
    assert got[0] == want[0], (got, want)
    if want[0] != "ok":
        assert got[1] == want[1]
        return
    checked, pad, idled = want[1]
    call = got[1]
    assert call.values == checked
    assert list(call.values) == list(checked)
    assert all(type(v) is int for v in call.values.values())
    assert call.scratchpad.dtype == np.int32
    np.testing.assert_array_equal(call.scratchpad, pad)
    assert call.idle == idled


def _decode_like() -> tuple[Recording, list[Word]]:
    """The decode step's shape: 32 caches' limits on position, one on token."""
    position, token = PerCall("position"), PerCall("token")
    limits = [Limit(token.affine(), 0, 512, "the embedding's row")]
    limits += [Limit(position.affine(), 0, 256, f"cache {i}") for i in range(32)]
    limits.append(Limit((position + 1).affine(), 0, 257, "the attended rows"))
    recording = _recording(["token", "position"], {"token": 0}, limits, {})
    words = [Word("w0", (128 * token).affine(), ()), Word("w1", position + 1, ())]
    return recording, words


def test_a_decode_steps_limits_merge_to_one_range_per_expression() -> None:
    recording, words = _decode_like()
    program = CallProgram("decode", recording, words, carried=("position",))
    # 34 limits, three expressions: each checked once a call
    assert len(program._ranges) == 3
    call = program({"position": 20, "token": 3})
    assert call.scratchpad.tolist() == [384, 21, 20]


def test_the_first_limit_broken_in_order_is_the_one_named() -> None:
    recording, words = _decode_like()
    program = CallProgram("decode", recording, words)
    with pytest.raises(IndexError, match=r"position is 256 this call, .* for cache 0$"):
        program({"position": 256})
    with pytest.raises(IndexError, match="token is 600 this call"):
        program({"position": 256, "token": 600})
