"""The device's Emit interpreter (kernels/emit.cc) against iron.core.emit.run.

emit.cc is plain scalar C++, so it compiles for the host (host_emit.cc
includes it); these tests run it on random programs (every operation, wraps
past int32, shifts past 31, stores in any order) and on programs composed
for real carried values, and compare the next scratchpad with the
reference interpreter's (``check=False``: the device wraps).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from iron.core.emit import HEADER, MAGIC, VERSION, EmitSite, Op, compose, run
from iron.core.percall import PerCall, clamp
from iron.core.words import Word
from iron.runtime.npu import kernels

from .support import HERE, compile_host


@pytest.fixture(scope="module")
def host_emit(tmp_path_factory) -> Path:
    return compile_host(
        tmp_path_factory.mktemp("emit"),
        [HERE / "host_emit.cc"],
        "host_emit",
        flags=("-Wall", "-Werror"),
    )


def _device(exe: Path, program: np.ndarray, slots, n_next: int, capacity=None):
    capacity = program.size if capacity is None else capacity
    padded = np.zeros(capacity, np.int32)
    padded[: min(capacity, program.size)] = program[:capacity]
    head = np.array([capacity, len(slots), n_next], np.int32)
    data = head.tobytes() + padded.tobytes() + np.asarray(slots, np.int32).tobytes()
    done = subprocess.run([str(exe)], input=data, capture_output=True, check=True)
    return np.frombuffer(done.stdout, np.int32)


def _random_program(rng: np.random.Generator):
    n_slots = int(rng.integers(1, 4))
    n_words, n_carried = int(rng.integers(0, 4)), int(rng.integers(0, 3))
    body: list[list[int]] = []
    regs = 0
    for _ in range(int(rng.integers(1, 25))):
        op = Op(int(rng.integers(1, 10))) if regs else Op.LOAD
        imm = int(rng.integers(-(2**31), 2**31))
        if op == Op.SHR:
            imm = int(rng.integers(0, 40))
        a, b = (int(rng.integers(0, regs)) if regs else 0 for _ in range(2))
        if op == Op.LOAD:
            a = int(rng.integers(0, n_slots))
        body.append([int(op), regs, a, b, imm])
        regs += 1
    for dst in rng.permutation(n_words):
        body.append([int(Op.STORE_WORD), int(dst), int(rng.integers(0, regs)), 0, 0])
    for dst in rng.permutation(n_carried):
        body.append([int(Op.STORE_CARRY), int(dst), int(rng.integers(0, regs)), 0, 0])
    header = [MAGIC, VERSION, n_slots, n_words, n_carried, regs, len(body), 0]
    program = np.array(header + [v for ins in body for v in ins], np.int64)
    return program.astype(np.int32), n_slots, n_words + n_carried


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_match_the_reference_with_wrapping(host_emit, seed):
    rng = np.random.default_rng(seed)
    program, n_slots, n_next = _random_program(rng)
    slots = rng.integers(-(2**31), 2**31, n_slots).astype(np.int32)
    words, carried = run(program, slots, check=False)
    got = _device(host_emit, program, slots, n_next)
    assert got.tolist() == words.tolist() + carried.tolist()


def test_a_composed_decode_step_program(host_emit):
    pos, token = PerCall("position"), PerCall("token")
    site = EmitSite(
        ("position", "token"),
        ("token",),
        ranges=(("position", 0, 4096), ("token", 0, 32000), ("token.made", 0, 32000)),
    )
    nxt = {"position": pos + 1, "token": object()}  # the token is device-made
    words = [
        Word("w0", 128 * token, ("embedding row",)),
        Word("w1", 32 * (pos + 1), ("rope row",)),
        Word("w2", clamp(pos + 2, 0, 4095), ("attended length",)),
    ]
    program = compose(site, nxt, words)
    # words are taken over the next values: position + 1, the made token
    for slots in ([0, 5, 17], [4000, 2, 31999], [7, 0, 0]):
        want_words, want_carried = run(program, slots)
        got = _device(host_emit, program, slots, len(words) + 2)
        assert got.tolist() == want_words.tolist() + want_carried.tolist()
        assert got[0] == 128 * slots[2] and got[2] == min(slots[0] + 3, 4095)


def test_a_program_it_cannot_hold_writes_nothing(host_emit):
    rng = np.random.default_rng(7)
    program, n_slots, n_next = _random_program(rng)
    slots = np.ones(n_slots, np.int32)
    short = _device(host_emit, program, slots, n_next, capacity=program.size - 1)
    assert not short.any()
    bad = program.copy()
    bad[0] = 0
    assert not _device(host_emit, bad, slots, n_next).any()
    assert HEADER == 8


def test_the_kernel_states_its_contract():
    c = kernels.contract("emit")
    assert "iron_emit" in c.arguments and "exact" in c.rounding
