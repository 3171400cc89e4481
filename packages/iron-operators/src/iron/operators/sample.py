"""``Sample``: one token id from a logits vector, greedy or a seeded top-k draw.

The draw is a pure function of its inputs, written in integer and float32
operations only (each rounded as IEEE single precision, no fused
multiply-add), so a kernel that performs the same operations in the same
order returns the same token bit for bit:

1. **Order.** Logits (bf16 or float32) are ranked by value, largest first,
   ties by lower index; a NaN ranks as ``-inf``.
2. **Greedy.** ``temperature == 0``: the first-ranked index (argmax, ties to
   the lowest index).
3. **Scale.** Otherwise ``temperature`` is rounded to float32 ``T`` and the
   host passes ``inv = fp32(1 / T)`` (IEEE division) to the kernel. The
   first ``k = min(top_k, vocab)`` ranked logits become ``z_j = fp32(l_j) *
   inv``. If ``z_0`` is not finite the result is the first-ranked index.
4. **Weights.** ``w_j = exp2(fp32(fp32(z_j - z_0) * LOG2E))`` with
   :func:`exp2_f32` (range reduction and a fixed degree-7 polynomial; 0 below
   ``2**-126``); ``w_0 = 1`` exactly.
5. **Uniform.** ``u = (hash32(seed) >> 8) * 2**-24`` (exact in float32, in
   ``[0, 1)``), with :func:`hash32` a counter-based integer hash on uint32.
6. **Select.** ``c_j`` the float32 running sums ``w_0 + ... + w_j`` in rank
   order, ``t = fp32(u * c_{k-1})``; the token is the rank ``j`` = the number
   of ``c_j <= t`` (at most ``k - 1``), mapped back to its vocabulary index.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from ml_dtypes import bfloat16

from iron.core.declare import Divisors, Input, Output, param, tunable
from iron.core.device import Device
from iron.core.handle import Handle, is_expr
from iron.core.operator import Cost, Operator, RefusedShapeError
from iron.core.tolerance import Tolerance

__all__ = ["MAX_TOP_K", "Sample", "draw", "exp2_f32", "hash32"]

#: The most candidates the kernel's running top-k list holds.
MAX_TOP_K = 256
_MASK = 0xFFFFFFFF
_STACK_BYTES = 1024
_TILE_MAX = 4096

#: log2(e), rounded to float32.
LOG2E = np.float32(float.fromhex("0x1.715476p+0"))
#: ``ln(2)**k / k!`` rounded to float32, k = 0..7: 2**f on [0, 1) within 1e-6.
EXP2_COEFFS = tuple(
    np.float32(float.fromhex(h))
    for h in (
        "0x1.000000p+0",
        "0x1.62e430p-1",
        "0x1.ebfbe0p-3",
        "0x1.c6b08ep-5",
        "0x1.3b2ab6p-7",
        "0x1.5d87fep-10",
        "0x1.430912p-13",
        "0x1.ffcbfcp-17",
    )
)


def hash32(seed: int) -> int:
    """A counter-based 32-bit hash: ``lowbias32(seed * 0x9E3779B9 + 0x7F4A7C15)``.

    Every operation wraps modulo ``2**32`` (uint32 arithmetic).
    """
    x = (int(seed) * 0x9E3779B9 + 0x7F4A7C15) & _MASK
    x ^= x >> 16
    x = (x * 0x7FEB352D) & _MASK
    x ^= x >> 15
    x = (x * 0x846CA68B) & _MASK
    x ^= x >> 16
    return x


def uniform(seed: int) -> np.float32:
    """``(hash32(seed) >> 8) * 2**-24``: a float32 in ``[0, 1)``, exact."""
    return np.float32(hash32(seed) >> 8) * np.float32(2.0**-24)


def exp2_f32(y: np.ndarray) -> np.ndarray:
    """``2**y`` for float32 ``y <= 0``, in float32 operations only.

    ``n = floor(y)``, ``f = y - n`` (exact), ``p = c0 + f (c1 + f (c2 + ...))``
    by Horner's rule with :data:`EXP2_COEFFS` (one float32 multiply and one
    add a step), then ``p * 2**n`` (exact). Below ``-126`` the result is 0.
    """
    y = np.asarray(y, dtype=np.float32)
    out = np.zeros(y.shape, np.float32)
    keep = y >= np.float32(-126)
    whole = np.floor(y[keep])
    f = y[keep] - whole
    p = np.full(f.shape, EXP2_COEFFS[-1], np.float32)
    for c in reversed(EXP2_COEFFS[:-1]):
        p = p * f + c
    out[keep] = np.ldexp(p, whole.astype(np.int32))
    return out


def ranked(logits: np.ndarray) -> np.ndarray:
    """Indices by logit, largest first, ties by lower index, NaN as -inf."""
    key = np.asarray(logits).astype(np.float32)
    key = np.where(np.isnan(key), np.float32(-np.inf), key)
    return np.argsort(-key, kind="stable")


def draw(logits: np.ndarray, temperature: float, top_k: int, seed: int) -> int:
    """The token :class:`Sample` returns (module docstring, steps 1-6)."""
    logits = np.asarray(logits).reshape(-1)
    if logits.size == 0:
        raise ValueError("Sample: no logits to sample from")
    order = ranked(logits)
    if temperature == 0:
        return int(order[0])
    k = min(int(top_k), logits.size)
    with np.errstate(all="ignore"):
        inv = np.float32(1) / np.float32(temperature)
        z = logits[order[:k]].astype(np.float32) * inv
        if not np.isfinite(z[0]):
            return int(order[0])
        weights = exp2_f32((z - z[0]) * LOG2E)
    running = np.add.accumulate(weights, dtype=np.float32)
    target = uniform(seed) * running[-1]
    rank = min(int(np.count_nonzero(running <= target)), k - 1)
    return int(order[rank])


class Sample(Operator):
    """One token id: greedy, or a seeded top-k draw; ``(1,)`` int32.

    ``step(logits, temperature=, top_k=, seed=)``: ``logits`` is ``(vocab,)``
    bf16 (float32 is accepted too, drawn from as its float32 values).
    ``temperature=0`` is argmax (ties to the lowest index); otherwise the
    draw of the module docstring from the ``top_k`` largest, with
    ``temperature`` rounded to float32. ``seed`` may be a per-call value
    (a position, a carried counter); the same inputs and seed give the same
    token. Exact (an integer result).

    Device rules: one core streams the logits in ``tile_size`` chunks
    (double-buffered, any vocab whose bytes are whole 4-byte DMA words),
    keeping a running top-k list of (value, index) pairs, so ``top_k`` is at
    most 256 and at most ``vocab``; ``temperature`` is finite and not
    negative.
    """

    vocab: int = param(doc="logits to sample from")
    temperature: float = param(0.0, doc="softmax temperature; 0 is greedy")
    top_k: int = param(1, doc="candidates a draw is from (largest logits)")
    seed: int = param(0, per_call=True, doc="the draw's counter (per call)")
    itemsize: int = param(2, doc="bytes per logit: 2 for bf16, 4 for float32")
    tile_size: int = tunable(
        domain=Divisors("vocab", multiple_of=2, at_most=_TILE_MAX),
        doc="logits streamed to the core per chunk",
    )
    #: Tiles of each streamed operand a core holds: the depth of the NPU
    #: design's object FIFOs, and what :meth:`core_bytes` counts.
    fifo_depth: ClassVar[int] = 2
    inputs = (Input("logits", "vocab", dtype=None),)
    outputs = (Output("token", 1, dtype=np.int32),)

    @classmethod
    def infer(cls, operands: Mapping[str, Handle | None]) -> dict[str, tuple[Any, str]]:
        found = super().infer(operands)
        logits = operands["logits"]
        assert logits is not None
        dtype = np.dtype(logits.dtype)
        if dtype not in (np.dtype(bfloat16), np.dtype(np.float32)):
            raise TypeError(f"Sample.logits takes bfloat16 or float32, got {logits!r}")
        found["itemsize"] = (dtype.itemsize, "logits.dtype")
        return found

    def output_valid(self, inputs: list[Handle | None]) -> list[dict[int, Any]]:
        """One token, never bounded."""
        return [{}]

    def resolve(self, dev: Device) -> dict[str, int]:
        options = Divisors("vocab", multiple_of=2, at_most=_TILE_MAX).values(
            self.fields()
        )
        if not options:
            self._rules(dev)  # names the rule vocab breaks
        return {"tile_size": max(options)}

    def core_bytes(self, tile: int) -> int:
        """Double-buffered chunks, two (value, index) top-k lists, a stack."""
        return self.fifo_depth * tile * self.itemsize + 2 * 8 * MAX_TOP_K + _STACK_BYTES

    def _refuse(self, dev: Device, rule: str) -> RefusedShapeError:
        return RefusedShapeError(f"Sample on {dev}: {rule}")

    def _rules(self, dev: Device) -> None:
        granule = dev.dma_granule_bytes
        if self.vocab < 1:
            raise self._refuse(dev, f"vocab={self.vocab} is not positive")
        if (self.vocab * self.itemsize) % granule or self.vocab % 2:
            raise self._refuse(
                dev,
                f"vocab={self.vocab} logits are {self.vocab * self.itemsize} bytes, "
                f"not whole chunks of {granule}-byte DMA words; pad the vocabulary "
                f"to an even size",
            )
        t = self.temperature
        if not math.isfinite(t) or t < 0:
            raise self._refuse(
                dev,
                f"temperature={t!r} is not a finite number >= 0 (0 is greedy)",
            )
        if not 1 <= self.top_k <= min(MAX_TOP_K, self.vocab):
            raise self._refuse(
                dev,
                f"top_k={self.top_k} is outside [1, {min(MAX_TOP_K, self.vocab)}] "
                f"(the kernel's running list holds at most {MAX_TOP_K}, and "
                f"vocab={self.vocab})",
            )

    def check(self, dev: Device) -> None:
        # Every tile in the domain fits a core: at most 4096 float32 logits
        # double-buffered (32 KiB), two 256-entry lists (4 KiB) and a stack.
        self._rules(dev)

    def reference(self, logits: np.ndarray) -> np.ndarray:
        if is_expr(self.seed):
            raise ValueError(
                f"Sample: seed={self.seed} is a per-call value; bind it first "
                f"(op.bind(values)) to run one call"
            )
        t = self.temperature
        if not math.isfinite(t) or t < 0:
            raise ValueError(
                f"Sample: temperature={t!r} is not a finite number >= 0 (0 is greedy)"
            )
        if self.top_k < 1:
            raise ValueError(f"Sample: top_k={self.top_k} is below 1")
        token = draw(logits, t, self.top_k, int(self.seed))
        return np.array([token], dtype=np.int32)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        return Tolerance.exact(
            note="an integer token id from a draw specified in integer and "
            "float32 operations in a fixed order, so a kernel reproduces it bit "
            "for bit"
        )

    def cost(self, dev: Device) -> Cost:
        """One comparison per logit (element operations); logits in, one int32
        out; one core, a kernel call per chunk of ``tile_size`` logits."""
        op = self._settled(dev)
        return Cost(
            macs=self.vocab,
            bytes=self.vocab * self.itemsize + 4,
            calls=-(-self.vocab // op.tile_size),
        )
