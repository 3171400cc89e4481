"""The Emit program: composed on the host, checked against host evaluation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from operators_for_tests import CopyTo, Double, Pick

import iron
from iron.core.carry import evaluate_carry
from iron.core.emit import (
    EmitSite,
    NotCarriedError,
    NotLoopableError,
    Op,
    compose,
    disassemble,
    emit_site,
    made,
    program_for,
    run,
    slots_of,
    stored,
)
from iron.core.percall import Affine, Clamp, FloorDiv, PerCall, _Expr, clamp
from iron.core.words import Word, evaluate_words, words_of


class Decode(iron.Graph):
    """A decode step: embed the token, write the cache at position, sample."""

    def __init__(self) -> None:
        self.table = iron.state((32, 8), np.float32)
        self.cache = iron.state((16, 8), np.float32)

    def body(self, *, position: iron.Carried[int], token: iron.Carried[int]):
        y = Double.step(self.table[token])
        CopyTo.step(y, out=self.cache[position])
        sampled = Pick.step(y)
        return iron.carry(position=position + 1, token=sampled)


class Prefill(iron.Graph):
    """Reads a host-written value n besides the carried position."""

    def __init__(self) -> None:
        self.cache = iron.state((16, 8), np.float32)

    def body(self, x, *, n: iron.Scratchpad[int], position: iron.Carried[int]):
        y = Double.step(x[:n])
        CopyTo.step(y, out=self.cache[position])
        return y, iron.carry(position=position + 1)


def _record(graph: iron.Graph, **shapes):
    with iron.use_device("npu2"):
        return graph.record(**shapes)


# -- random affine expressions ---------------------------------------------------

NAMES = ("a", "b", "c")
LIMIT = 2**20  # slot values lie in [0, LIMIT)
DEVICE = object()  # a next value the device makes (a handle's element)


def _clamp(args):
    x, lo, hi = args
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    if isinstance(x, _Expr):
        return clamp(x, lo, hi)
    x = x if lo is None else max(x, lo)
    return x if hi is None else min(x, hi)


def _affine(x):
    return x.affine() if isinstance(x, PerCall) else x


def exprs(names):
    """Random expressions of ``names``: nested +, -, * int, // 2**k, clamp."""
    leaves = st.one_of(
        st.sampled_from(names).map(lambda n: PerCall(n).affine()),
        st.integers(-1000, 1000),
    )

    def extend(children):
        bound = st.one_of(st.none(), st.integers(-2000, 2**21))
        return st.one_of(
            st.tuples(children, children).map(lambda t: t[0] + t[1]),
            st.tuples(children, children).map(lambda t: t[0] - t[1]),
            st.tuples(children, st.integers(-3, 3)).map(lambda t: t[0] * t[1]),
            st.tuples(children, st.integers(1, 5)).map(lambda t: t[0] // (1 << t[1])),
            st.tuples(children, bound, bound).map(_clamp),
        )

    return st.recursive(leaves, extend, max_leaves=6).map(_affine)


def substitute(expr, mapping):
    """``expr`` with each value replaced by ``mapping[value]``: the oracle."""
    if isinstance(expr, int):
        return expr
    total = expr.const
    for atom, coeff in expr.terms:
        if isinstance(atom, str):
            part = mapping[atom]
        elif isinstance(atom, FloorDiv):
            part = substitute(atom.inner, mapping) // (1 << atom.shift)
        else:
            assert isinstance(atom, Clamp)
            part = _clamp((substitute(atom.inner, mapping), atom.lo, atom.hi))
        total = total + coeff * part
    return total


def _value(expr, values):
    return expr if isinstance(expr, int) else expr.evaluate(values)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(data=st.data())
def test_compose_then_run_is_host_evaluation(data):
    carried = data.draw(st.lists(st.sampled_from(NAMES), min_size=1, unique=True))
    handles = data.draw(st.lists(st.sampled_from(carried), max_size=1, unique=True))
    carry = {
        c: DEVICE if c in handles else data.draw(exprs(carried), label=f"next {c}")
        for c in carried
    }
    affine = st.tuples(exprs(carried), st.sampled_from(carried)).map(
        lambda t: t[0] if isinstance(t[0], Affine) else PerCall(t[1]) + t[0]
    )
    targets = data.draw(st.lists(affine, max_size=4), label="target words")
    words = [Word(f"w{i}", e, (f"use {i}",)) for i, e in enumerate(targets)]
    site = EmitSite(tuple(carried), tuple(handles))
    site = EmitSite(
        site.carried, site.handles, ranges=tuple((s, 0, LIMIT - 1) for s in site.slots)
    )
    try:
        program = compose(site, carry, words, carried)
    except OverflowError as e:
        assert "int32" in str(e)
        event("refused: may overflow int32")
        assume(False)
    assert program.dtype == np.int32

    # Random slots, and the corners (where a bound is reached).
    n = len(site.slots)
    batch = data.draw(
        st.lists(
            st.lists(st.integers(0, LIMIT - 1), min_size=n, max_size=n),
            min_size=1,
            max_size=4,
        ),
        label="slots",
    )
    batch += [[0] * n, [LIMIT - 1] * n]
    got_words, got_carried = run(program, np.asarray(batch, dtype=np.int64).T)
    for k, values in enumerate(batch):
        slots = dict(zip(site.slots, values))
        current = {c: slots[c] for c in carried}
        device = {made(h): slots[made(h)] for h in handles}
        inputs = {**current, **device}
        # Each next value over the source's slots.
        nexts = {
            c: PerCall(made(c)).affine() if c in handles else carry[c] for c in carried
        }
        next_values = {c: _value(nexts[c], inputs) for c in carried}
        assert got_carried[:, k].tolist() == [next_values[c] for c in carried]
        for i, w in enumerate(words):
            composed = substitute(w.expr, nexts)
            assert _value(composed, inputs) == w.expr.evaluate(next_values)
            assert int(got_words[i, k]) == w.expr.evaluate(next_values)
        # By name, one call at a time, the same.
        one_words, one_carried = run(program, slots, site=site)
        assert one_words.tolist() == got_words[:, k].tolist()
        assert one_carried.tolist() == got_carried[:, k].tolist()


def wide(names):
    """Expressions with large multiples, so intervals come near int32's ends."""
    leaves = st.sampled_from(names).map(lambda n: PerCall(n).affine())

    def extend(children):
        return st.one_of(
            st.tuples(children, children).map(lambda t: t[0] + t[1]),
            st.tuples(children, children).map(lambda t: t[0] - t[1]),
            st.tuples(children, st.integers(-64, 64)).map(lambda t: t[0] * t[1]),
            st.tuples(children, st.integers(-(2**30), 2**30)).map(
                lambda t: t[0] + t[1]
            ),
            st.tuples(children, st.integers(1, 40)).map(lambda t: t[0] // (1 << t[1])),
        )

    return st.recursive(leaves, extend, max_leaves=5).map(_affine)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_composed_program_never_overflows_within_its_ranges(data):
    carried = data.draw(st.lists(st.sampled_from(NAMES), min_size=1, unique=True))
    ranges = []
    for c in carried:
        lo = data.draw(st.integers(0, 2**29), label=f"{c} lo")
        hi = data.draw(st.integers(lo, 2**30 - 1), label=f"{c} hi")
        ranges.append((c, lo, hi))
    site = EmitSite(tuple(carried), ranges=tuple(ranges))
    carry = {c: data.draw(wide(carried), label=f"next {c}") for c in carried}
    affine = wide(carried).filter(lambda e: isinstance(e, Affine))
    words = [
        Word(f"w{i}", e, ("u",))
        for i, e in enumerate(data.draw(st.lists(affine, max_size=3)))
    ]
    try:
        program = compose(site, carry, words)
    except OverflowError:
        event("refused: may overflow int32")
        return
    # Every slot at either end of its range, or anywhere inside it.
    picks = [
        st.one_of(st.just(lo), st.just(hi), st.integers(lo, hi)) for _, lo, hi in ranges
    ]
    batch = data.draw(st.lists(st.tuples(*picks), min_size=1, max_size=8))
    got_words, got_carried = run(program, np.asarray(batch, dtype=np.int64).T)
    for k, values in enumerate(batch):
        current = dict(zip(carried, values))
        nexts = {c: _value(carry[c], current) for c in carried}
        assert got_carried[:, k].tolist() == [nexts[c] for c in carried]
        assert got_words[:, k].tolist() == [w.expr.evaluate(nexts) for w in words]


# -- the encoding ---------------------------------------------------------------------


def test_slots_are_carried_values_then_device_made_ones():
    site = EmitSite(("position", "token"), ("token",))
    assert slots_of(site) == site.slots == ["position", "token", "token.made"]
    assert site.range_of("position") == (0, 2**30 - 1)


def test_program_encoding_is_documented_layout():
    pos = PerCall("position")
    site = EmitSite(("position",), ranges=(("position", 0, 100),))
    program = compose(site, {"position": pos + 1}, [Word("w0", 8 * pos, ("u",))])
    header, body = program[:8].tolist(), program[8:].reshape(-1, 5).tolist()
    assert header == [0x49524F4E, 1, 1, 1, 1, 3, 5, 0]
    assert body == [
        [Op.LOAD, 0, 0, 0, 0],
        [Op.ADDI, 1, 0, 0, 1],
        [Op.MULI, 2, 1, 0, 8],
        [Op.STORE_WORD, 0, 2, 0, 0],
        [Op.STORE_CARRY, 0, 1, 0, 0],
    ]
    assert disassemble(program)[1:3] == [
        "LOAD        r0 = slot[0]",
        "ADDI        r1 = r0 + 1",
    ]


def test_identical_subexpressions_are_computed_once():
    pos = PerCall("position")
    site = EmitSite(("position",), ranges=(("position", 0, 100),))
    words = [Word("w0", 8 * pos, ("u",)), Word("w1", 8 * pos, ("v",))]
    program = compose(site, {"position": pos + 1}, words)
    ops = program[8:].reshape(-1, 5)[:, 0].tolist()
    assert ops.count(Op.MULI) == 1 and ops.count(Op.STORE_WORD) == 2


def test_run_checks_its_program_and_slots():
    site = EmitSite(("position",))
    program = compose(site, {"position": PerCall("position") + 1}, [])
    with pytest.raises(ValueError, match="not an Emit program"):
        run(np.zeros(8, np.int32), [0])
    with pytest.raises(ValueError, match="reads 1 slots"):
        run(program, [1, 2])
    with pytest.raises(TypeError, match="site="):
        run(program, {"position": 1})
    with pytest.raises(KeyError, match="position"):
        run(program, {}, site=site)
    with pytest.raises(OverflowError, match="int32"):
        run(program, [2**31])


# -- refusals -------------------------------------------------------------------------


def test_target_word_reading_a_non_carried_value_cannot_be_known():
    pos, n = PerCall("position"), PerCall("n")
    site = EmitSite(("position",))
    with pytest.raises(NotCarriedError) as info:
        compose(site, {"position": pos + 1}, [Word("w3", n + pos, ("u",))])
    assert isinstance(info.value, ValueError)
    assert str(info.value) == (
        "w3 = n + position reads n, which no carried value holds: the device "
        "cannot know it; make n iron.Carried or write it from the host"
    )


def test_target_parameter_not_carried_cannot_be_known():
    site = EmitSite(("position",))
    with pytest.raises(NotCarriedError, match="the device cannot know it"):
        compose(site, {"position": PerCall("position") + 1}, [], ["position", "n"])


def test_next_value_reading_a_non_carried_value_cannot_be_known():
    site = EmitSite(("position",))
    with pytest.raises(
        NotCarriedError, match="carried position = n \\+ position reads n"
    ):
        compose(site, {"position": PerCall("position") + PerCall("n")}, [])


def test_word_the_device_cannot_compute_is_refused():
    pos = PerCall("position")
    word = Word("w0", pos.affine(), ("u",), loopable=False, why_not="a comparison")
    site = EmitSite(("position",))
    with pytest.raises(NotLoopableError, match="w0 = position cannot be computed"):
        compose(site, {"position": pos + 1}, [word])


def test_carry_must_match_the_site():
    site = EmitSite(("position", "token"), ("token",))
    pos = PerCall("position")
    with pytest.raises(ValueError, match="carry gives"):
        compose(site, {"position": pos + 1}, [])
    with pytest.raises(ValueError, match="as a handle's element"):
        compose(site, {"position": pos + 1, "token": 3}, [])
    with pytest.raises(ValueError, match="not carried values"):
        EmitSite(("position",), ("token",))


# -- overflow -------------------------------------------------------------------------


def test_constant_too_big_raises_at_compose():
    pos = PerCall("position")
    site = EmitSite(("position",), ranges=(("position", 0, 10),))
    with pytest.raises(OverflowError, match=r"constant 1099511627776"):
        compose(site, {"position": pos + 2**40}, [])
    with pytest.raises(OverflowError, match=r"multiple 8589934592 does not fit"):
        compose(site, {"position": pos + 1}, [Word("w0", 2**33 * pos, ("u",))])
    with pytest.raises(OverflowError, match="clamp bound"):
        compose(site, {"position": clamp(16 * pos, 2**33)}, [])
    # An upper bound beyond int32 never binds: no instruction, no error.
    program = compose(site, {"position": clamp(16 * pos, None, 2**33)}, [])
    assert Op.MINI not in program[8:].reshape(-1, 5)[:, 0].tolist()
    assert run(program, [10])[1].tolist() == [160]


def test_possible_intermediate_overflow_raises_at_compose():
    pos = PerCall("position")
    site = EmitSite(("position",))  # 30-bit: 4 * position may reach 2**32
    with pytest.raises(OverflowError) as info:
        compose(site, {"position": pos + 1}, [Word("w0", 4 * pos, ("u",))])
    text = str(info.value)
    assert "word w0 = 4 * position (with position = position + 1)" in text
    assert "4 * (position + 1) may reach [4, 4294967296]" in text


def test_overflow_outside_the_composed_ranges_raises_at_run():
    pos = PerCall("position")
    site = EmitSite(("position",), ranges=(("position", 0, 15),))
    program = compose(site, {"position": pos + 1}, [Word("w0", 2**20 * pos, ("u",))])
    assert run(program, [15])[0].tolist() == [16 * 2**20]
    with pytest.raises(OverflowError, match="instruction 2 .*MULI.* gives 4294967296"):
        run(program, [2**12 - 1])
    words, carried = run(program, [2**12 - 1], check=False)
    assert words.tolist() == [0] and carried.tolist() == [2**12]


# -- from real recordings ---------------------------------------------------------


def test_emit_reproduces_the_host_evaluation_of_a_decode_loop():
    rec = _record(Decode())
    site = emit_site(rec)
    assert site.carried == ("position", "token")
    assert site.handles == ("token",)
    assert site.range_of("position") == (0, 15)
    assert site.range_of("token") == site.range_of("token.made") == (0, 31)
    words = words_of(rec, iron.NPU2, reserved=len(site.carried))
    assert [str(w) for w in words] == ["w0 = 8 * token", "w1 = 8 * position"]
    program = compose(site, rec.carry, words, [v.name for v in rec.reads])
    for position, token, sampled in [(0, 0, 5), (7, 3, 31), (14, 31, 0)]:
        values = {"position": position, "token": token}
        token_buffer = np.asarray([sampled], dtype=np.int32)
        nxt = evaluate_carry(rec.carry, values, lambda h, b=token_buffer: b)
        got_words, got_carried = run(
            program,
            {"position": position, "token": token, "token.made": sampled},
            site=site,
        )
        assert got_carried.tolist() == [nxt["position"], nxt["token"]]
        assert got_words.tolist() == evaluate_words(words, nxt).tolist()


def test_a_version_reading_a_host_value_cannot_be_looped():
    rec = _record(Prefill(), x=((8,), np.float32))
    site = emit_site(rec)
    assert site.range_of("position") == (0, 15)
    words = words_of(rec, iron.NPU2)
    with pytest.raises(NotCarriedError, match="w0 = n reads n"):
        compose(site, rec.carry, words, [v.name for v in rec.reads])


# -- what a runtime needs: one program per target, read back from a buffer ---------


def test_program_for_composes_over_the_targets_ranges():
    rec = _record(Decode())
    site = emit_site(rec)
    words = words_of(rec, iron.NPU2, reserved=len(site.carried))
    reads = [v.name for v in rec.reads]
    program = program_for(site, rec, rec, words, reads)
    assert program.tobytes() == compose(site, rec.carry, words, reads).tobytes()


def test_program_for_refuses_a_target_of_another_graph():
    rec = _record(Decode())
    other = _record(Prefill(), x=((8,), np.float32))
    site = emit_site(rec)
    words = words_of(rec, iron.NPU2, reserved=len(site.carried))
    with pytest.raises(ValueError, match="not versions of one graph"):
        program_for(site, rec, other, words, [], "Prefill(x=8)")


def test_a_stored_program_is_read_back_cut_to_its_length():
    rec = _record(Decode())
    site = emit_site(rec)
    words = words_of(rec, iron.NPU2, reserved=len(site.carried))
    program = compose(site, rec.carry, words, [v.name for v in rec.reads])
    padded = np.zeros(program.size + 40, np.int32)
    padded[: program.size] = program
    for buffer in (padded, padded.view(np.uint8), program):
        assert stored(buffer).tolist() == program.tolist()
    with pytest.raises(ValueError, match="at least 8 int32 words"):
        stored(np.zeros(3, np.int32))
    with pytest.raises(ValueError, match="not an Emit program"):
        stored(np.zeros(16, np.int32))
