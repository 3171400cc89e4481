"""Quantized weight formats as the device holds them: 4-bit and 8-bit groups.

A quantized ``(rows, K)`` weight is one ``uint8`` array of ``(rows,
row_bytes)``: each row is its groups in order, each group self-contained, so
a row tile is one contiguous run of bytes a DMA moves and a core dequantizes
in place. Every scale and minimum is an IEEE **float16**, little-endian.

``q4`` (:data:`Q4`): groups of 32 elements in 20 bytes (5 bits a weight)::

    bytes 0-1   scale  (float16)
    bytes 2-3   min    (float16)
    bytes 4-19  32 unsigned 4-bit codes q in 0..15, element 2i in the low
                nibble of byte 4 + i, element 2i + 1 in its high nibble

``q8`` (:data:`Q8`): groups of 32 in 34 bytes (8.5 bits); ``q8_16``
(:data:`Q8_16`): groups of 16 in 18 bytes, for a format whose own scales
are per 16 (Q6_K)::

    bytes 0-1   scale  (float16)
    bytes 2-    the group's signed 8-bit codes q (two's complement)

An element's value is ``scale * q + min`` (``scale * q`` for 8-bit)
computed in float32: ``scale * q`` is exact there (11 significant bits
times at most 8), so the one rounding is the sum's. The device kernel
dequantizes a tile so, rounds it to bf16 and multiplies as a bf16 matmul
(``iron.operators.qmatmul``).

Where values come from:

* :func:`quantize` quantizes float weights (a bf16 checkpoint) per group,
  rounding to nearest: ``q8`` as llama.cpp's Q8_0 (``scale = max|x| / 127``,
  codes rounded half away from zero), ``q4`` as its Q4_1 (``scale = (max -
  min) / 15``, ``min`` the group's minimum). The dequantized values equal
  those of the ``gguf`` package's own ``quantize`` then ``dequantize`` of
  that type, value for value (tested).
* :func:`repack` takes a GGUF tensor's stored blocks (one row of blocks per
  weight row) and writes the device format, without a float copy:

  ============ ======== ===================================================
  GGUF type    format   values
  ============ ======== ===================================================
  ``Q8_0``     ``q8``   the same bytes: every value unchanged
  ``Q4_0``     ``q4``   ``scale = d``, ``min = -8 d``: every value unchanged
  ``Q4_1``     ``q4``   ``scale = d``, ``min = m``: every value unchanged
  ``Q4_K``     ``q4``   ``scale = fp16(d sc)``, ``min = fp16(-dmin m)``
  ``Q6_K``     ``q8_16`` ``scale = fp16(d sc)``, codes ``q - 32``
  ============ ======== ===================================================

  Q4_K's and Q6_K's effective scales are an fp16 super-scale times a 6- or
  8-bit sub-scale: up to 18 significant bits, which a 16-bit scale cannot
  hold, so they are rounded to float16 (to nearest even). The bound, per
  element, against the value the ``gguf`` package dequantizes (float32):
  with ``a = |d sc q| + |dmin m|`` (``|d sc q|`` for Q6_K),
  ``|repacked - gguf| <= (2**-11 + 2**-22) a + 2**-24 (|q| + 1)``:
  2**-11 for each rounding to a normal float16, 2**-25 for one to a
  subnormal, and float32's own roundings of the two sums. Both are then
  rounded to bf16 (2**-8), which makes most equal (tested).

A scale or minimum past float16's range (a Q4_0 ``d`` above 8188, whose
``-8 d`` overflows; a quantized group whose spread is above 65504 * 15) is
refused with a ValueError, never stored as infinity.
"""

from __future__ import annotations

import dataclasses
from typing import Final

import numpy as np

__all__ = [
    "FORMATS",
    "GGUF_FORMATS",
    "Q4",
    "Q8",
    "Q8_16",
    "QuantFormat",
    "dequantize",
    "format_of",
    "quantize",
    "repack",
]


@dataclasses.dataclass(frozen=True)
class QuantFormat:
    """A device weight format: codes of ``bits`` bits in groups of ``group``.

    Attributes:
        name: ``"q4"``, ``"q8"`` or ``"q8_16"``.
        bits: 4 (a scale and a minimum per group) or 8 (a scale per group).
        group: Elements sharing one scale: 32, or 16 for ``q8_16``.
    """

    name: str
    bits: int
    group: int

    @property
    def header_bytes(self) -> int:
        """Bytes of a group's float16 scale (and minimum, for 4-bit)."""
        return 4 if self.bits == 4 else 2

    @property
    def group_bytes(self) -> int:
        """Bytes one group takes: its header and its codes."""
        return self.header_bytes + self.group * self.bits // 8

    def row_bytes(self, k: int) -> int:
        """Bytes a row of ``k`` elements takes (``k`` a multiple of the group).

        Raises:
            ValueError: ``k`` is not a positive multiple of the group.
        """
        if k <= 0 or k % self.group:
            raise ValueError(
                f"{self.name}: a row of {k} elements is not a positive multiple of "
                f"its group of {self.group}; pad the row to a multiple of "
                f"{self.group}"
            )
        return k // self.group * self.group_bytes

    def nbytes(self, shape: tuple[int, ...]) -> int:
        """Bytes a weight of ``shape`` (rows last dimension ``K``) takes."""
        rows = int(np.prod(shape[:-1], dtype=np.int64))
        return rows * self.row_bytes(int(shape[-1]))


#: 4-bit codes, a float16 scale and minimum per group of 32.
Q4: Final = QuantFormat("q4", 4, 32)
#: 8-bit codes, a float16 scale per group of 32.
Q8: Final = QuantFormat("q8", 8, 32)
#: 8-bit codes, a float16 scale per group of 16 (Q6_K's sub-blocks).
Q8_16: Final = QuantFormat("q8_16", 8, 16)
#: Every format by name.
FORMATS: Final[dict[str, QuantFormat]] = {f.name: f for f in (Q4, Q8, Q8_16)}
#: The format each GGUF type repacks into.
GGUF_FORMATS: Final[dict[str, QuantFormat]] = {
    "Q8_0": Q8,
    "Q4_0": Q4,
    "Q4_1": Q4,
    "Q4_K": Q4,
    "Q6_K": Q8_16,
}
# GGUF blocks: (elements, bytes); llama.cpp's ggml-common.h block_q* structs.
_GGUF_BLOCKS = {
    "Q8_0": (32, 34),
    "Q4_0": (32, 18),
    "Q4_1": (32, 20),
    "Q4_K": (256, 144),
    "Q6_K": (256, 210),
}


def format_of(k: int, row_bytes: int) -> QuantFormat:
    """The format whose rows of ``k`` elements take ``row_bytes`` bytes.

    The three formats take 5, 8.5 and 9 bits an element, so the two numbers
    name one.

    Raises:
        ValueError: No format has rows of that size (named with each's).
    """
    for f in FORMATS.values():
        if k > 0 and k % f.group == 0 and f.row_bytes(k) == row_bytes:
            return f
    sizes = ", ".join(
        f"{f.name} {f.row_bytes(k)}"
        for f in FORMATS.values()
        if k > 0 and k % f.group == 0
    )
    raise ValueError(
        f"a packed row of {row_bytes} bytes holds {k} elements in no quantized "
        f"format (rows of {k} take: {sizes or 'none: K is not a multiple of 16'})"
    )


# -- writing and reading groups ---------------------------------------------------------


def _finite16(values: np.ndarray, what: str) -> np.ndarray:
    """``values`` as float16, refusing any that leaves float16's range."""
    with np.errstate(over="ignore", invalid="ignore"):
        half = values.astype(np.float16)
    bad = ~np.isfinite(half)
    if bad.any():
        first = int(np.flatnonzero(bad.reshape(-1))[0])
        raise ValueError(
            f"{what} of group {first} is {float(values.reshape(-1)[first])!r}, "
            f"outside float16's range (+-65504) that the device format holds it "
            f"in; such a weight cannot be held quantized: keep it bf16"
        )
    return half


def _pack(
    fmt: QuantFormat,
    scale: np.ndarray,
    codes: np.ndarray,
    minimum: np.ndarray | None = None,
) -> np.ndarray:
    """Groups ``(..., G)`` of float16 scales (and minimums) and ``(..., G, group)``
    codes into ``(..., G * group_bytes)`` bytes."""
    lead = codes.shape[:-1]
    parts = [np.ascontiguousarray(scale, np.float16)[..., None].view(np.uint8)]
    if fmt.bits == 4:
        assert minimum is not None
        parts.append(
            np.ascontiguousarray(minimum, np.float16)[..., None].view(np.uint8)
        )
        q = codes.astype(np.uint8)
        parts.append(q[..., 0::2] | (q[..., 1::2] << np.uint8(4)))
    else:
        parts.append(codes.astype(np.int8).view(np.uint8))
    out = np.concatenate(parts, axis=-1)
    assert out.shape == (*lead, fmt.group_bytes)
    return out.reshape(*lead[:-1], lead[-1] * fmt.group_bytes)


def _groups(packed: np.ndarray, fmt: QuantFormat) -> np.ndarray:
    """``(..., row_bytes)`` bytes as ``(..., G, group_bytes)``."""
    p = np.ascontiguousarray(packed, np.uint8)
    if p.shape[-1] % fmt.group_bytes:
        raise ValueError(
            f"{fmt.name}: a packed row of {p.shape[-1]} bytes is not whole groups of "
            f"{fmt.group_bytes} bytes"
        )
    return p.reshape(*p.shape[:-1], p.shape[-1] // fmt.group_bytes, fmt.group_bytes)


def dequantize(packed: np.ndarray, fmt: QuantFormat) -> np.ndarray:
    """The float32 values of packed rows, as the kernel computes them.

    ``scale * q + min`` (``scale * q`` for 8-bit) in float32: the product is
    exact, the sum rounded once (module docstring). The kernel then rounds
    to bf16 (``.astype(bfloat16)``, to nearest even).

    Args:
        packed: ``(..., row_bytes)`` uint8 rows of ``fmt``.
        fmt: Their format.

    Returns:
        ``(..., K)`` float32.
    """
    g = _groups(packed, fmt)
    scale = g[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)[..., None]
    if fmt.bits == 4:
        minimum = g[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
        b = g[..., 4:]
        q = np.stack([b & np.uint8(0x0F), b >> np.uint8(4)], axis=-1)
        q = q.reshape(*b.shape[:-1], fmt.group).astype(np.float32)
        values = scale * q + minimum[..., None]
    else:
        q = g[..., 2:].copy().view(np.int8).astype(np.float32)
        values = scale * q
    return values.reshape(*g.shape[:-2], g.shape[-2] * fmt.group)


# -- quantizing float weights ---------------------------------------------------------------


def _round_away(n: np.ndarray) -> np.ndarray:
    """Round half away from zero, as llama.cpp's ``roundf``: the fraction is
    compared with a half exactly (``n + 0.5`` would round first)."""
    a = np.abs(n)
    whole = np.floor(a)
    return np.sign(n) * (whole + np.floor(2 * (a - whole)))


def quantize(x: np.ndarray, fmt: QuantFormat) -> np.ndarray:
    """Quantize float weights per group, rounding to nearest.

    ``q8``/``q8_16``: llama.cpp's Q8_0 scheme (``scale = max|x| / 127``,
    ``q = round(x / scale)`` half away from zero). ``q4``: its Q4_1 scheme
    (``scale = (max - min) / 15``, ``q = trunc((x - min) / scale + 0.5)``
    clipped to 0..15, ``min`` the group's minimum). Scales computed in
    float32 and stored as float16, as llama.cpp does.

    Args:
        x: ``(..., K)`` finite float weights (bf16, float16 or float32);
            ``K`` a multiple of the group.
        fmt: The format to write.

    Returns:
        ``(..., row_bytes)`` uint8.

    Raises:
        ValueError: ``K`` is not whole groups, a value is not finite, or a
            group's scale or minimum is past float16's range.
    """
    blocks = np.asarray(x).astype(np.float32)
    k = blocks.shape[-1]
    fmt.row_bytes(k)  # refuses a K of partial groups
    if not np.isfinite(blocks).all():
        first = int(np.flatnonzero(~np.isfinite(blocks).reshape(-1))[0])
        raise ValueError(
            f"quantize to {fmt.name}: element {first} is "
            f"{float(blocks.reshape(-1)[first])!r}; only finite weights quantize"
        )
    blocks = blocks.reshape(*blocks.shape[:-1], k // fmt.group, fmt.group)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if fmt.bits == 8:
            d = np.abs(blocks).max(axis=-1, keepdims=True) / np.float32(127)
            inv = np.where(d == 0, np.float32(0), np.float32(1) / d)
            codes = _round_away(blocks * inv)
            return _pack(fmt, _finite16(d[..., 0], f"{fmt.name} scale"), codes)
        hi = blocks.max(axis=-1, keepdims=True)
        lo = blocks.min(axis=-1, keepdims=True)
        d = (hi - lo) / np.float32(15)
        inv = np.where(d == 0, np.float32(0), np.float32(1) / d)
        codes = np.trunc((blocks - lo) * inv + np.float32(0.5)).astype(np.uint8)
    codes = codes.clip(0, 15)
    scale = _finite16(d[..., 0], "q4 scale")
    minimum = _finite16(lo[..., 0], "q4 min")
    return _pack(fmt, scale, codes, minimum)


# -- repacking GGUF blocks --------------------------------------------------------------------


def _f16(b: np.ndarray) -> np.ndarray:
    """Two-byte little-endian float16 fields ``(..., 2)`` as float32 ``(...)``."""
    return np.ascontiguousarray(b).view("<f2")[..., 0].astype(np.float32)


def repack(raw: np.ndarray, ggml_type: str) -> tuple[QuantFormat, np.ndarray]:
    """A GGUF tensor's stored blocks in the device format (module docstring's table).

    Args:
        raw: ``(rows, bytes)`` uint8: each row one weight row's blocks, as
            the file stores them.
        ggml_type: ``"Q8_0"``, ``"Q4_0"``, ``"Q4_1"``, ``"Q4_K"`` or ``"Q6_K"``.

    Returns:
        ``(format, (rows, row_bytes) uint8)``.

    Raises:
        ValueError: Another type, rows that are not whole blocks, or a scale
            past float16's range (named with the group).
    """
    if ggml_type not in _GGUF_BLOCKS:
        raise ValueError(
            f"repack: GGUF type {ggml_type!r} has no device format; it takes "
            f"{', '.join(_GGUF_BLOCKS)} (F32, F16 and BF16 stay bf16)"
        )
    elems, size = _GGUF_BLOCKS[ggml_type]
    data = np.ascontiguousarray(raw, np.uint8)
    if data.ndim != 2 or data.shape[1] % size:
        raise ValueError(
            f"repack: {ggml_type} rows of {list(data.shape)} bytes are not whole "
            f"{size}-byte blocks of {elems} elements"
        )
    rows, nblocks = data.shape[0], data.shape[1] // size
    b = data.reshape(rows, nblocks, size)
    fmt = GGUF_FORMATS[ggml_type]
    where = f"{ggml_type} block's"
    if ggml_type == "Q8_0":
        _finite16(_f16(b[..., 0:2]), f"{where} scale")  # a NaN or inf d is refused
        return fmt, data.copy()  # the same bytes: d (fp16) and 32 int8 codes
    if ggml_type in ("Q4_0", "Q4_1"):
        head = 2 if ggml_type == "Q4_0" else 4
        d = _f16(b[..., 0:2])
        if ggml_type == "Q4_0":
            lo = -8 * d  # exact: a power-of-two multiple of a float16
        else:
            lo = _f16(b[..., 2:4])
        qs = b[..., head:]  # element i low nibble of byte i, i + 16 high
        codes = np.concatenate([qs & np.uint8(0x0F), qs >> np.uint8(4)], axis=-1)
        scale = _finite16(d, f"{where} scale")
        minimum = _finite16(lo, f"{where} min")
        return fmt, _pack(fmt, scale, codes, minimum)
    if ggml_type == "Q4_K":
        d = _f16(b[..., 0:2])[..., None]
        dmin = _f16(b[..., 2:4])[..., None]
        sc, m = _q4k_scales(b[..., 4:16])
        qs = b[..., 16:].reshape(rows, nblocks, 4, 32)  # 4 chunks of 32 bytes
        # chunk j: sub-block 2j in the low nibbles, 2j + 1 in the high
        codes = np.stack([qs & np.uint8(0x0F), qs >> np.uint8(4)], axis=-2)
        codes = codes.reshape(rows, nblocks, 8, 32)
        scale = _finite16(d * sc, f"{where} d * sc")
        minimum = _finite16(-(dmin * m), f"{where} -dmin * m")
        return fmt, _pack(fmt, scale, codes, minimum).reshape(rows, -1)
    # Q6_K: ql (128 bytes), qh (64), 16 int8 sub-scales, d (fp16)
    ql = b[..., 0:128].reshape(rows, nblocks, 2, 1, 64)
    qh = b[..., 128:192].reshape(rows, nblocks, 2, 1, 32)
    sc = b[..., 192:208].copy().view(np.int8).astype(np.float32)
    d = _f16(b[..., 208:210])[..., None]
    low = (ql >> np.array([0, 4], np.uint8).reshape(2, 1)) & np.uint8(0x0F)
    high = (qh >> np.array([0, 2, 4, 6], np.uint8).reshape(4, 1)) & np.uint8(0x03)
    low = low.reshape(rows, nblocks, 8, 32)
    high = high.reshape(rows, nblocks, 8, 32)
    codes = (low | (high << np.uint8(4))).astype(np.int8) - np.int8(32)
    codes = codes.reshape(rows, nblocks, 16, 16)
    scale = _finite16(d * sc, f"{where} d * scale")
    return fmt, _pack(fmt, scale, codes).reshape(rows, -1)


def _q4k_scales(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K's twelve scale bytes as eight 6-bit scales and eight 6-bit mins.

    Bytes 0-3 hold scales 0-3 in their low 6 bits and the top 2 bits of
    scales 4-7; bytes 4-7 the mins 0-3 likewise and the top bits of mins
    4-7; bytes 8-11 the low 4 bits of scales 4-7 (low nibble) and mins 4-7
    (high nibble) (llama.cpp ``get_scale_min_k4``, ggml-quants.c).
    """
    a, b, c = s[..., 0:4], s[..., 4:8], s[..., 8:12]
    sc = np.concatenate([a & 0x3F, (c & 0x0F) | ((a >> 2) & 0x30)], axis=-1)
    m = np.concatenate([b & 0x3F, (c >> 4) | ((b >> 2) & 0x30)], axis=-1)
    return sc.astype(np.float32), m.astype(np.float32)
