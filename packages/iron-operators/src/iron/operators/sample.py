"""``Sample``: one token id from a logits vector, greedy or a seeded top-k/top-p draw.

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
6. **Nucleus.** ``c_j`` the float32 running sums ``w_0 + ... + w_j`` in
   rank order. With ``top_p`` rounded to float32 ``p``: ``p == 1`` keeps all
   ``m = k``; ``p < 1`` keeps the first ``m = 1 +`` (the number of ``c_j <
   fp32(p * c_{k-1})``) ranks, at most ``k``: the fewest whose mass reaches
   ``p`` of the total.
7. **Select.** ``t = fp32(u * c_{m-1})``; the token is the rank ``j`` = the
   number of ``c_j <= t`` among the first ``m`` (at most ``m - 1``), mapped
   back to its vocabulary index.

Per call: ``temperature``, ``top_k``, ``top_p`` and ``seed`` may each be a
per-call value (an int the host writes each call), so a graph changes its
sampling without being recompiled. ``top_k`` and ``seed`` are their own
integers; a temperature travels as :func:`temperature_code` and a ``top_p``
as :func:`top_p_code`, integer codes that give back the float32 value
exactly.
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

__all__ = [
    "MAX_TOP_K",
    "TEMPERATURE_RANGE",
    "Sample",
    "draw",
    "exp2_f32",
    "hash32",
    "temperature_code",
    "temperature_of",
    "top_p_code",
    "top_p_of",
]

#: The most candidates the kernel's running top-k list holds.
MAX_TOP_K = 256
#: A per-call temperature's code is its float32 bits less this (exponent 63),
#: so a code below ``2**30`` holds every float32 in ``[2**-63, 2**64)``.
_TEMPERATURE_BIAS = 63 << 23
#: The nonzero temperatures a per-call code holds: ``[2**-63, 2**64)``.
TEMPERATURE_RANGE = (2.0**-63, 2.0**64)
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


def _keys(logits: np.ndarray) -> np.ndarray:
    """The logits as float32 ranking keys, a NaN as ``-inf``."""
    key = np.asarray(logits).reshape(-1).astype(np.float32)
    if key.size and np.isnan(key[int(np.argmax(key))]):  # argmax stops at a NaN
        key = np.where(np.isnan(key), np.float32(-np.inf), key)
    return key


def ranked(logits: np.ndarray, k: int | None = None) -> np.ndarray:
    """Indices by logit, largest first, ties by lower index, NaN as -inf.

    With ``k``, only the first ``k`` of them (the same indices in the same
    order): the ``k``-th largest key is found by a partition, every index
    with a larger key and the lowest-indexed ties at it are kept, and only
    those are sorted (stably, by index within a value). ``-0.0`` and ``0.0``
    rank as equal, as in a sort.
    """
    key = _keys(logits)
    if k is None or k >= key.size:
        return np.argsort(-key, kind="stable")
    if k < 1:
        raise ValueError(f"ranked: k={k} is below 1; give k >= 1 or None for all")
    if k == 1:
        return np.array([np.argmax(key)], np.intp)  # the first of the largest
    kth = key[np.argpartition(-key, k - 1)[k - 1]]  # the k-th largest value
    above = np.flatnonzero(key > kth)
    ties = np.flatnonzero(key == kth)[: k - above.size]
    kept = np.sort(np.concatenate([above, ties]))  # in index order
    return kept[np.argsort(-key[kept], kind="stable")]


def _bits(value: float) -> int:
    return int(np.array(value, dtype=np.float32).view(np.int32))


def _float(bits: int) -> float:
    return float(np.array(bits, dtype=np.int32).view(np.float32))


def temperature_code(temperature: float) -> int:
    """A temperature as the per-call int :class:`Sample` reads.

    ``0`` (greedy) is 0; otherwise the float32 bits of ``fp32(temperature)``
    less ``63 << 23``, which is in ``[1, 2**30)`` exactly when the float32
    lies in :data:`TEMPERATURE_RANGE`. :func:`temperature_of` inverts it.

    Raises:
        ValueError: The temperature is negative, not finite, or (rounded to
            float32) outside ``{0} | [2**-63, 2**64)``.
    """
    t = float(temperature)
    if not math.isfinite(t) or t < 0:
        raise ValueError(
            f"temperature={temperature!r} is not a finite number >= 0 (0 is greedy)"
        )
    if t == 0:
        return 0
    t32 = float(np.float32(t))
    lo, hi = TEMPERATURE_RANGE
    if not lo <= t32 < hi:
        raise ValueError(
            f"temperature={temperature!r} is outside what a per-call temperature "
            f"holds, 0 or [2**-63, 2**64); give 0 for greedy or a temperature in "
            f"that range"
        )
    return _bits(t32) - _TEMPERATURE_BIAS


def temperature_of(code: int) -> float:
    """The float32 temperature of a :func:`temperature_code` (0 is greedy)."""
    return 0.0 if code == 0 else _float(int(code) + _TEMPERATURE_BIAS)


def top_p_code(top_p: float) -> int:
    """A ``top_p`` as the per-call int :class:`Sample` reads: its float32 bits.

    Raises:
        ValueError: ``top_p`` is not in ``(0, 1]``.
    """
    p = float(top_p)
    if not 0 < p <= 1:
        raise ValueError(
            f"top_p={top_p!r} is not in (0, 1] (the share of probability mass the "
            f"draw keeps; 1 keeps every candidate)"
        )
    return _bits(p)


def top_p_of(code: int) -> float:
    """The float32 ``top_p`` of a :func:`top_p_code`."""
    return _float(int(code))


def draw(
    logits: np.ndarray,
    temperature: float,
    top_k: int,
    seed: int,
    top_p: float = 1.0,
) -> int:
    """The token :class:`Sample` returns (module docstring, steps 1-7)."""
    logits = np.asarray(logits).reshape(-1)
    if logits.size == 0:
        raise ValueError("Sample: no logits to sample from")
    if temperature == 0:
        return int(ranked(logits, 1)[0])
    k = min(int(top_k), logits.size)
    order = ranked(logits, k if k >= 1 else None)
    with np.errstate(all="ignore"):
        inv = np.float32(1) / np.float32(temperature)
        z = logits[order[:k]].astype(np.float32) * inv
        if not np.isfinite(z[0]):
            return int(order[0])
        weights = exp2_f32((z - z[0]) * LOG2E)
    running = np.add.accumulate(weights, dtype=np.float32)
    p = np.float32(top_p)
    m = k
    if p < 1:
        threshold = p * running[-1]
        m = min(int(np.count_nonzero(running < threshold)) + 1, k)
    target = uniform(seed) * running[m - 1]
    rank = min(int(np.count_nonzero(running[:m] <= target)), m - 1)
    return int(order[rank])


class Sample(Operator):
    """One token id: greedy, or a seeded top-k/top-p draw; ``(1,)`` int32.

    ``step(logits, temperature=, top_k=, top_p=, seed=)``: ``logits`` is
    ``(vocab,)`` bf16 (float32 is accepted too, drawn from as its float32
    values). ``temperature=0`` is argmax (ties to the lowest index);
    otherwise the draw of the module docstring from the ``top_k`` largest,
    cut to the nucleus of mass ``top_p``, with ``temperature`` and ``top_p``
    rounded to float32. Each of ``temperature``, ``top_k``, ``top_p`` and
    ``seed`` may be a per-call value (a position, a carried counter, a
    request's setting): ``temperature`` then holds :func:`temperature_code`
    and ``top_p`` :func:`top_p_code`. The same inputs and seed give the same
    token. Exact (an integer result).

    Device rules: one core streams the logits in ``tile_size`` chunks
    (double-buffered, any vocab whose bytes are whole 4-byte DMA words),
    keeping a running top-k list of (value, index) pairs, so ``top_k`` is at
    most 256 and at most ``vocab`` (a per-call ``top_k`` too: the list is
    kept for that many); ``temperature`` is finite and not negative;
    ``top_p`` is in ``(0, 1]``.
    """

    vocab: int = param(doc="logits to sample from")
    temperature: float = param(
        0.0,
        per_call=True,
        doc="softmax temperature; 0 is greedy (per call: temperature_code)",
    )
    top_k: int = param(
        1, per_call=True, doc="candidates a draw is from (largest logits)"
    )
    top_p: float = param(
        1.0,
        per_call=True,
        doc="probability mass the draw keeps; 1 keeps all (per call: top_p_code)",
    )
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

    @property
    def max_top_k(self) -> int:
        """The most candidates this Sample draws from: ``min(256, vocab)``."""
        return min(MAX_TOP_K, self.vocab)

    def bind(self, values: Any) -> Sample:
        """Return a copy for one call: per-call fields evaluated and decoded.

        A per-call ``temperature`` or ``top_p`` becomes the float32 value its
        code holds (:func:`temperature_of`, :func:`top_p_of`).

        Raises:
            ValueError: A per-call ``top_k`` is outside ``[1, min(256,
                vocab)]`` or a ``top_p`` outside ``(0, 1]`` this call (the
                device's list holds no more; refused rather than cut).
        """
        bound = super().bind(values)
        if bound is self:
            return self
        assert isinstance(bound, Sample)  # a copy of this Sample
        decoded: dict[str, Any] = {}
        if is_expr(self.temperature):
            decoded["temperature"] = temperature_of(int(bound.temperature))
        if is_expr(self.top_p):
            decoded["top_p"] = top_p_of(int(bound.top_p))
            if not 0 < decoded["top_p"] <= 1:
                raise ValueError(
                    f"Sample: per-call top_p={self.top_p} holds "
                    f"{decoded['top_p']!r} this call, not in (0, 1]; write "
                    f"top_p_code(p) for a p in (0, 1]"
                )
        if is_expr(self.top_k) and not 1 <= bound.top_k <= self.max_top_k:
            raise ValueError(
                f"Sample: per-call top_k={self.top_k} is {bound.top_k} this call, "
                f"outside [1, {self.max_top_k}] (the device's list holds at most "
                f"{MAX_TOP_K}, and vocab={self.vocab})"
            )
        vars(bound).update(decoded)
        return bound

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
        # A per-call field is checked each call (bind), not here.
        t = self.temperature
        if not is_expr(t) and (not math.isfinite(t) or t < 0):
            raise self._refuse(
                dev,
                f"temperature={t!r} is not a finite number >= 0 (0 is greedy)",
            )
        if not is_expr(self.top_k) and not 1 <= self.top_k <= self.max_top_k:
            raise self._refuse(
                dev,
                f"top_k={self.top_k} is outside [1, {self.max_top_k}] "
                f"(the kernel's running list holds at most {MAX_TOP_K}, and "
                f"vocab={self.vocab})",
            )
        if not is_expr(self.top_p) and not 0 < self.top_p <= 1:
            raise self._refuse(
                dev,
                f"top_p={self.top_p!r} is not in (0, 1] (1 keeps every candidate)",
            )

    def check(self, dev: Device) -> None:
        # Every tile in the domain fits a core: at most 4096 float32 logits
        # double-buffered (32 KiB), two 256-entry lists (4 KiB) and a stack.
        self._rules(dev)

    def reference(self, logits: np.ndarray) -> np.ndarray:
        for name in ("temperature", "top_k", "top_p", "seed"):
            value = getattr(self, name)
            if is_expr(value):
                raise ValueError(
                    f"Sample: {name}={value} is a per-call value; bind it first "
                    f"(op.bind(values)) to run one call"
                )
        t = self.temperature
        if not math.isfinite(t) or t < 0:
            raise ValueError(
                f"Sample: temperature={t!r} is not a finite number >= 0 (0 is greedy)"
            )
        if self.top_k < 1:
            raise ValueError(f"Sample: top_k={self.top_k} is below 1")
        if not 0 < self.top_p <= 1:
            raise ValueError(
                f"Sample: top_p={self.top_p!r} is not in (0, 1] (1 keeps every "
                f"candidate)"
            )
        token = draw(logits, t, self.top_k, int(self.seed), self.top_p)
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
