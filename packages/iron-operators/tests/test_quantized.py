"""The device's quantized weight formats against the gguf package's own quantizers.

Every repacking and quantizing function is checked value for value against
``gguf.quants`` (llama.cpp's Python port): the exact types equal it bit for
bit, Q4_K and Q6_K within the bound the module docstring states.
"""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16

from iron.operators.quantized import (
    FORMATS,
    GGUF_FORMATS,
    Q4,
    Q8,
    Q8_16,
    dequantize,
    format_of,
    quantize,
    repack,
)

gguf = pytest.importorskip("gguf")
from gguf.quants import dequantize as gguf_dequantize  # noqa: E402
from gguf.quants import quantize as gguf_quantize  # noqa: E402

T = gguf.GGMLQuantizationType
#: Block bytes of each GGUF type (gguf.GGML_QUANT_SIZES).
SIZES = {name: gguf.GGML_QUANT_SIZES[T[name]] for name in GGUF_FORMATS}


def _weights(rng: np.random.Generator, rows: int, k: int) -> np.ndarray:
    """bf16-valued weights at a few scales, with constant and zero groups."""
    x = rng.standard_normal((rows, k)).astype(np.float32)
    x *= np.float32(10.0) ** rng.integers(-4, 2, size=(rows, 1))
    x[0, :32] = 0  # a zero group: scale 0
    x[1, :32] = 0.25  # a constant group
    x[2, 32:64] = -3.0
    return x.astype(bfloat16).astype(np.float32)


def _random_blocks(
    rng: np.random.Generator, name: str, rows: int, blocks: int
) -> np.ndarray:
    """Random stored blocks of type ``name`` with sane float16 scales."""
    _, size = SIZES[name]
    raw = rng.integers(0, 256, size=(rows, blocks, size), dtype=np.uint8)
    scales = (rng.standard_normal((rows, blocks, 2)) * 0.01).astype(np.float16)
    where = {"Q4_0": [0], "Q4_1": [0, 2], "Q8_0": [0], "Q4_K": [0, 2], "Q6_K": [208]}
    for k, at in enumerate(where[name]):
        raw[..., at : at + 2] = scales[..., k : k + 1].view(np.uint8)
    return raw.reshape(rows, blocks * size)


def _gguf_values(raw: np.ndarray, name: str) -> np.ndarray:
    return np.asarray(gguf_dequantize(raw, T[name]), np.float32)


@pytest.mark.parametrize("name", ["Q8_0", "Q4_0", "Q4_1"])
def test_exact_types_repack_value_for_value(name):
    rng = np.random.default_rng(1)
    raw = _random_blocks(rng, name, 6, 8)
    fmt, packed = repack(raw, name)
    assert fmt is GGUF_FORMATS[name]
    assert packed.shape == (6, fmt.row_bytes(8 * 32))
    want = _gguf_values(raw, name)
    got = dequantize(packed, fmt)
    # equal values (a zero's sign may differ: Q4_0's d * 0 is -0 for a negative d)
    np.testing.assert_array_equal(got, want)


def test_q4_0_from_its_own_quantizer_is_exact():
    """Blocks the gguf quantizer writes (negative d, codes at both ends)."""
    x = _weights(np.random.default_rng(2), 8, 256)
    raw = gguf_quantize(x, T.Q4_0)
    _, packed = repack(raw, "Q4_0")
    np.testing.assert_array_equal(dequantize(packed, Q4), _gguf_values(raw, "Q4_0"))


def _bound(a: np.ndarray, q: np.ndarray) -> np.ndarray:
    return (2.0**-11 + 2.0**-22) * a + 2.0**-24 * (np.abs(q) + 1)


def _q4k_parts(raw: np.ndarray):
    """(|d sc q| + |dmin m|, q) per element, from gguf's own unpacking."""
    n = raw.shape[0] * raw.shape[1] // 144
    blocks = raw.reshape(n, 144)
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float64)
    dmin = blocks[:, 2:4].copy().view(np.float16).astype(np.float64)
    sc, m = gguf.quants.Q4_K.get_scale_min(blocks[:, 4:16].copy())
    qs = blocks[:, 16:].reshape(n, 4, 1, 32) >> np.array([0, 4], np.uint8).reshape(
        1, 1, 2, 1
    )
    q = (qs & 0x0F).reshape(n, 8, 32).astype(np.float64)
    a = np.abs(d[:, :, None] * sc[:, :, None] * q) + np.abs(
        dmin[:, :, None] * m[:, :, None]
    )
    return a.reshape(raw.shape[0], -1), q.reshape(raw.shape[0], -1)


def _q6k_parts(raw: np.ndarray):
    n = raw.shape[0] * raw.shape[1] // 210
    blocks = raw.reshape(n, 210)
    d = blocks[:, 208:210].copy().view(np.float16).astype(np.float64)
    sc = blocks[:, 192:208].copy().view(np.int8).astype(np.float64)
    values = _gguf_values(blocks, "Q6_K").astype(np.float64).reshape(n, 16, 16)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(
            d[:, :, None] * sc[:, :, None] == 0, 32, values / (d * sc)[:, :, None]
        )
    q = np.round(q)
    a = np.abs(d[:, :, None] * sc[:, :, None] * q)
    return a.reshape(raw.shape[0], -1), q.reshape(raw.shape[0], -1)


@pytest.mark.parametrize("name", ["Q4_K", "Q6_K"])
@pytest.mark.parametrize("case", ["random", "adversarial"])
def test_k_types_repack_within_the_stated_bound(name, case):
    rng = np.random.default_rng(3)
    raw = _random_blocks(rng, name, 4, 3)
    if case == "adversarial":
        # super-scales at float16's edges: the largest whose products stay in
        # range, the smallest normal, a subnormal; sub-scales all ones.
        b = raw.reshape(-1, SIZES[name][1])
        at = 208 if name == "Q6_K" else 0
        edges = np.array([400.0, 6.1e-5, 3e-7, -(2.0**-14), 0.5, 1.0 / 3], np.float16)
        b[:, at : at + 2] = edges[np.arange(len(b)) % len(edges), None].view(np.uint8)
        if name == "Q4_K":
            b[:, 2:4] = edges[(np.arange(len(b)) + 1) % len(edges), None].view(np.uint8)
            b[:, 4:16] = 0xFF  # every 6-bit scale and min 63
        else:
            b[:, 192:208] = np.array([127, -128, 1, -1] * 4, np.int8).view(np.uint8)
    fmt, packed = repack(raw, name)
    assert fmt is GGUF_FORMATS[name]
    got = dequantize(packed, fmt).astype(np.float64)
    want = _gguf_values(raw, name).astype(np.float64)
    a, q = (_q4k_parts if name == "Q4_K" else _q6k_parts)(raw)
    assert (np.abs(got - want) <= _bound(a, q)).all()
    if case == "random":
        # once rounded to bf16, as the kernel does, nearly all are the same
        g16 = got.astype(np.float32).astype(bfloat16)
        w16 = want.astype(np.float32).astype(bfloat16)
        assert np.mean(g16 == w16) > 0.95


def test_the_bound_is_not_vacuous():
    """Q4_K's scales are rounded: some values differ, and the bound is tight."""
    rng = np.random.default_rng(4)
    raw = _random_blocks(rng, "Q4_K", 8, 4)
    _, packed = repack(raw, "Q4_K")
    got = dequantize(packed, Q4).astype(np.float64)
    want = _gguf_values(raw, "Q4_K").astype(np.float64)
    a, q = _q4k_parts(raw)
    assert (got != want).any()
    assert (np.abs(got - want) / _bound(a, q)).max() > 0.05


@pytest.mark.parametrize(("fmt", "name"), [(Q8, "Q8_0"), (Q4, "Q4_1")])
def test_quantizing_bf16_equals_the_gguf_scheme(fmt, name):
    x = _weights(np.random.default_rng(5), 16, 512)
    packed = quantize(x.astype(bfloat16), fmt)
    assert packed.dtype == np.uint8 and packed.shape == (16, fmt.row_bytes(512))
    want = _gguf_values(gguf_quantize(x, T[name]), name)
    got = dequantize(packed, fmt)
    np.testing.assert_array_equal(got, want)


def test_quantizing_rounds_half_away_from_zero_exactly():
    """A code at exactly .5 rounds away (llama.cpp roundf), one just below it
    does not (``x + 0.5`` would round it up in float32)."""
    x = np.zeros((1, 32), np.float32)
    x[0, 0] = 127.0  # scale 1
    x[0, 1] = 2.5
    x[0, 2] = -2.5
    x[0, 3] = np.nextafter(np.float32(0.5), np.float32(0))
    got = dequantize(quantize(x, Q8), Q8)[0, :4]
    np.testing.assert_array_equal(got, [127.0, 3.0, -3.0, 0.0])
    np.testing.assert_array_equal(
        got, _gguf_values(gguf_quantize(x, T.Q8_0), "Q8_0")[0, :4]
    )


def test_q8_16_quantizes_and_reads_groups_of_16():
    x = _weights(np.random.default_rng(6), 3, 64)
    packed = quantize(x, Q8_16)
    assert packed.shape == (3, 4 * 18)
    err = np.abs(dequantize(packed, Q8_16) - x)
    scale = np.abs(x.reshape(3, 4, 16)).max(-1, keepdims=True) / 127
    # half a step, and the float16 scale's rounding times up to 127 steps
    assert (err.reshape(3, 4, 16) <= scale * (0.5 + 127 * 2**-11) + 2**-17).all()


def test_sizes_and_format_of():
    assert (Q4.group_bytes, Q8.group_bytes, Q8_16.group_bytes) == (20, 34, 18)
    assert Q4.row_bytes(2048) * 8 / 2048 == 5.0  # bits a weight
    assert Q4.nbytes((3, 64)) == 3 * 40
    for fmt in FORMATS.values():
        assert format_of(256, fmt.row_bytes(256)) is fmt
    with pytest.raises(ValueError, match=r"row of 100 bytes holds 256 elements"):
        format_of(256, 100)
    with pytest.raises(ValueError, match=r"q4: a row of 48 elements"):
        Q4.row_bytes(48)


def test_refusals_name_the_value():
    with pytest.raises(ValueError, match=r"element 3 is nan"):
        quantize(np.array([[0, 0, 0, np.nan] + [0] * 28], np.float32), Q4)
    with pytest.raises(ValueError, match=r"q4 scale of group 0 .* float16's range"):
        quantize(np.array([[-1e6] + [1e6] * 31], np.float32), Q4)
    big = np.zeros((1, 18), np.uint8)
    big[0, :2] = np.array([9000.0], np.float16).view(np.uint8)  # -8 d overflows
    with pytest.raises(ValueError, match=r"Q4_0 block's min of group 0 is -72000"):
        repack(big, "Q4_0")
    nan = np.zeros((1, 34), np.uint8)
    nan[0, :2] = np.array([np.nan], np.float16).view(np.uint8)
    with pytest.raises(ValueError, match=r"Q8_0 block's scale of group 0 is nan"):
        repack(nan, "Q8_0")
    with pytest.raises(ValueError, match=r"GGUF type 'Q5_K' has no device format"):
        repack(big, "Q5_K")
    with pytest.raises(ValueError, match=r"not whole 18-byte blocks"):
        repack(np.zeros((1, 20), np.uint8), "Q4_0")
