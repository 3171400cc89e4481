"""Section 8, "Carried Values and Device Loops": a bigram walk that feeds itself.

``Bigram`` holds a table of next-token logits. Each run reads the row of
the carried ``token``, samples the next token on the device (greedy: the
largest logit), writes it into a ``history`` state, and returns
``iron.carry(token=<that token>, position=position + 1)``: the values the
next run starts from.

Where the device runs a full ELF (npu2) the version ends in an Emit step
that writes the next run's scratchpad itself, so ``CarriedLoop`` keeps
``depth`` runs in flight and the host only waits. Where it does not (npu1)
the host loops, passing each call's ``Carry`` back in. Either way the walk
must match the one numpy takes. Runs on npu2 unless IRON_DEVICE names
another (the emulated NPU where no NPU is present); prints PASS! when it
holds.
"""

from __future__ import annotations

import os

import numpy as np
from ml_dtypes import bfloat16

import iron
from iron.operators import Copy, Sample
from iron.runtime import CarriedLoop

VOCAB, STEPS, START = 64, 48, 7


class Bigram(iron.Graph):
    """One greedy step of a bigram model per run, on carried values."""

    def __init__(self, logits: np.ndarray, steps: int = STEPS) -> None:
        self.logits = iron.weight(logits)  # (vocab, vocab): row = current token
        self.history = iron.state((steps + 1, 1), np.int32)

    def body(self, *, token: iron.Carried[int], position: iron.Carried[int]):
        nxt = Sample.step(self.logits[token])  # a (1,) int32 the device makes
        Copy.step(nxt, out=self.history[position + 1])
        return iron.carry(token=nxt, position=position + 1)


def table(seed: int) -> np.ndarray:
    """Logits whose greedy walk is one cycle through every token.

    Each row is a permutation of distinct values (no ties, exact in bf16)
    with its largest at the token that follows in a random cycle.
    """
    rng = np.random.default_rng(seed)
    order = rng.permutation(VOCAB)
    following = np.empty(VOCAB, int)
    following[order] = np.roll(order, -1)
    rows = np.stack([rng.permutation(VOCAB) for _ in range(VOCAB)])
    for token, row in enumerate(rows):
        top = int(np.argmax(row))
        row[top], row[following[token]] = row[following[token]], row[top]
    return (rows * 0.125).astype(bfloat16)


def walk(logits: np.ndarray, start: int, steps: int) -> list[int]:
    """The greedy walk in numpy: each next token the argmax of its row."""
    tokens = [start]
    for _ in range(steps):
        tokens.append(int(np.argmax(logits[tokens[-1]].astype(np.float32))))
    return tokens


def main(seed: int = 0, depth: int = 3) -> bool:
    """Walk STEPS tokens on the device (or from the host); True on PASS."""
    iron.set_current_device(os.environ.get("IRON_DEVICE") or "npu2")
    logits = table(seed)
    want = walk(logits, START, STEPS)
    graph = Bigram(logits)
    version = graph.compile()  # no tensor inputs: the version that loops
    print(version.recording)

    if version.emit is not None:
        # Full ELF: the first run from the host, then STEPS - 1 runs each
        # started by the one before, depth of them in flight at once.
        loop = CarriedLoop(version, version, depth=depth)
        done = []
        for k in loop.run(STEPS - 1, token=START, position=0):
            done.append(k)  # step k is complete: history[k + 2] is written
        ok = done == list(range(STEPS - 1))
        how = f"on the device (CarriedLoop, depth={depth})"
    else:
        # No Emit here: the host passes each call's Carry back in.
        carry = graph(token=START, position=0)
        for _ in range(STEPS - 1):
            carry = graph(token=carry.token, position=carry.position)
        ok = carry.position == STEPS
        how = "from the host (each Carry passed back in)"
    history = version.read(graph.history).reshape(-1)
    print(f"looped {how}: {history[1:].tolist()}")

    ok &= history[1:].tolist() == want[1:]
    # One host call, and the host reference, give the same next values.
    carry = graph(token=START, position=0)
    print(carry, graph.reference(token=START, position=0))
    ok &= carry == {"token": want[1], "position": 1}
    ok &= graph.reference(token=START, position=0) == carry
    print("PASS!" if ok else "FAIL!")
    return bool(ok)


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
