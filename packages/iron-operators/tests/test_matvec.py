"""The compiled matrix-vector product: the HIGHEST model's bound, bits that
depend on nothing but the row, and BLAS's path where it is off."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ml_dtypes import bfloat16

from iron.core.precision import Precision
from iron.core.tolerance import compare
from iron.operators import matvec
from iron.operators.matmul import GEMM, GEMV, error_bound, model_product
from iron.operators.qmatmul import QGEMM, QGEMV
from iron.operators.quantized import FORMATS, dequantize, quantize

pytest.importorskip("numba", reason="the jit extra (numba) is not installed")


def _bf16(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape, dtype=np.float32) * scale).astype(bfloat16)


def test_available_with_numba() -> None:
    assert matvec.available()


@pytest.mark.parametrize(
    "shape", [(1, 2), (3, 18), (64, 2048), (4099, 2050), (300, 8192)]
)
def test_within_the_highest_bound(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(sum(shape))
    a, x = _bf16(rng, *shape), _bf16(rng, shape[1])
    got = matvec.matvec(a, x.astype(np.float32))
    exact = a.astype(np.float64) @ x.astype(np.float64)
    bound = error_bound(a, x[:, None], Precision.HIGHEST, None)[:, 0]
    # matvec is the float32 sum before the bf16 rounding: the bound less it
    assert np.all(np.abs(got - exact) <= bound)
    # and a sum, not a copy of BLAS's: it is near the exact product
    assert np.abs(got - exact).max() <= 1e-4 * np.abs(a.astype(np.float64)).sum(1).max()


def test_rows_bits_depend_on_nothing_but_the_row() -> None:
    rng = np.random.default_rng(0)
    # large enough to be split among threads; its slices run on the caller
    a, x = _bf16(rng, 5000, 1002), _bf16(rng, 1002).astype(np.float32)
    assert a.nbytes >= matvec._SPLIT_BYTES
    whole = matvec.matvec(a, x)
    for first, last in [(0, 1), (3, 70), (2499, 2503), (4990, 5000)]:
        part = matvec.matvec(a[first:last], x)
        assert part.tobytes() == whole[first:last].tobytes()
    # the float32 copy and a column-major copy give the same bits
    assert matvec.matvec(a.astype(np.float32), x).tobytes() == whole.tobytes()
    assert matvec.matvec(np.asfortranarray(a), x).tobytes() == whole.tobytes()


def test_ieee_specials_propagate() -> None:
    a = np.ones((4, 40), bfloat16)
    a[1, 5] = np.inf
    a[2, 7] = np.nan
    a[3, 0], a[3, 1] = np.inf, -np.inf
    x = np.ones(40, np.float32)
    got = matvec.matvec(a, x)
    assert got[0] == 40 and got[1] == np.inf
    assert np.isnan(got[2]) and np.isnan(got[3])
    x[5] = 0  # inf * 0
    assert np.isnan(matvec.matvec(a, x)[1])


def test_refuses_shapes_that_do_not_fit() -> None:
    with pytest.raises(ValueError, match=r"a \[4, 8\] and x \[7\] do not fit"):
        matvec.matvec(np.zeros((4, 8), bfloat16), np.zeros(7, np.float32))
    with pytest.raises(ValueError, match=r"a \[4, 7\] and x \[7\] .* K even"):
        matvec.matvec(np.zeros((4, 7), bfloat16), np.zeros(7, np.float32))


def test_without_the_kernels_it_says_how_to_get_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(matvec._state, "kernels", {})
    assert not matvec.available()
    with pytest.raises(RuntimeError, match=r"install iron-operators\[jit\]"):
        matvec.matvec(np.zeros((4, 8), bfloat16), np.zeros(8, np.float32))


def test_model_product_runs_it_and_blas_agrees_within_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(1)
    a, x = _bf16(rng, 700, 3000), _bf16(rng, 3000, 1)
    odd = _bf16(rng, 9, 31), _bf16(rng, 31, 1)  # odd K: BLAS's path
    assert model_product(*odd, Precision.HIGHEST, None).shape == (9, 1)
    got = model_product(a, x, Precision.HIGHEST, None)
    assert got.dtype == bfloat16 and got.shape == (700, 1)
    want = matvec.matvec(a, x[:, 0].astype(np.float32)).astype(bfloat16)
    assert got[:, 0].tobytes() == want.tobytes()
    assert model_product(
        a.astype(np.float32), x, Precision.HIGHEST, None
    ).tobytes() == (got.tobytes())
    monkeypatch.setitem(matvec._state, "kernels", {})  # BLAS's path
    blas = model_product(a, x, Precision.HIGHEST, None)
    exact = a.astype(np.float64) @ x.astype(np.float64)
    bound = error_bound(a, x, Precision.HIGHEST, None)
    for result in (got, blas):
        assert np.all(np.abs(result.astype(np.float64) - exact) <= bound)


def test_matmuls_read_their_weight_as_bf16_only_where_matvec_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gemv = GEMV(M=64, K=32)
    assert not gemv.reads_float32(0) and gemv.reads_float32(1)
    assert GEMV(M=64, K=32, precision="high").reads_float32(0)
    gemm = GEMM(M=16, K=32, N=64)
    assert gemm.reads_float32(0) and not gemm.reads_float32(1)
    assert GEMM(M=16, K=32, N=64, precision="high").reads_float32(1)
    monkeypatch.setitem(matvec._state, "kernels", {})
    assert gemv.reads_float32(0) and gemm.reads_float32(1)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_gets_its_own_threads() -> None:
    rng = np.random.default_rng(2)
    a, x = _bf16(rng, 3000, 1024), _bf16(rng, 1024).astype(np.float32)
    assert a.nbytes >= matvec._SPLIT_BYTES
    want = matvec.matvec(a, x)  # the parent's pool is running now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child, where the parent's pool threads do not exist
        try:
            os.write(write, matvec.matvec(a, x).tobytes())
        finally:
            os._exit(0)
    os.close(write)
    # a child whose work never runs would hang: wait a bounded time
    ready, _, _ = select.select([read], [], [], 120)
    if not ready:
        os.kill(pid, signal.SIGKILL)
    got = os.read(read, want.nbytes + 1) if ready else b""
    while ready and len(got) < want.nbytes:
        more = os.read(read, want.nbytes)
        if not more:
            break
        got += more
    os.close(read)
    os.waitpid(pid, 0)
    assert got == want.tobytes(), "the forked child's product never ran"


def test_iron_jit_0_turns_it_off() -> None:
    code = (
        "from iron.operators import matvec, matmul\n"
        "import numpy as np\n"
        "from ml_dtypes import bfloat16\n"
        "from iron.core.precision import Precision\n"
        "assert not matvec.available()\n"
        "a = np.ones((8, 4), bfloat16); x = np.ones((4, 1), bfloat16)\n"
        "r = matmul.model_product(a, x, Precision.HIGHEST, None)\n"
        "assert (r.astype(np.float32) == 4).all()\n"
    )
    env = {**os.environ, "IRON_JIT": "0"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()


# -- packed rows --------------------------------------------------------------------


def _packed(rng: np.random.Generator, fmt, rows: int, k: int, case: str) -> np.ndarray:
    if case == "quantized":
        return quantize(rng.standard_normal((rows, k)) * 0.05, fmt)
    # any bytes: scales and minimums of every float16 (NaN, infinities,
    # subnormals, signed zeros) and every code
    return rng.integers(0, 256, (rows, fmt.row_bytes(k)), dtype=np.uint8)


def _as_dequantized(w: np.ndarray, x: np.ndarray, fmt) -> np.ndarray:
    """Where qmatvec's sums have the bits of matvec over the bf16 dequantized rows."""
    got = matvec.qmatvec(w, x, fmt.bits, fmt.group)
    with np.errstate(all="ignore"):
        want = matvec.matvec(dequantize(w, fmt).astype(bfloat16), x)
    return (got.view(np.uint32) == want.view(np.uint32)) | (
        np.isnan(got) & np.isnan(want)
    )


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize("case", ["quantized", "bytes"])
def test_packed_rows_sum_as_their_dequantized_bf16_rows(name: str, case: str) -> None:
    fmt = FORMATS[name]
    rng = np.random.default_rng(len(name) + len(case))
    for rows, k in [(3, 64), (300, 2048), (2100, 1024)]:  # the last one split
        w = _packed(rng, fmt, rows, k, case)
        x = rng.standard_normal(k).astype(bfloat16).astype(np.float32)
        same = _as_dequantized(w, x, fmt)
        assert same.all(), f"{name} {case} {rows}x{k}: {np.flatnonzero(~same)[:5]}"


#: Every float16 bit pattern, one a row.
_PATTERNS = np.arange(1 << 16, dtype=np.uint16)


def _every_float16(fmt, code: int) -> np.ndarray:
    """Rows of two groups, row ``i``'s scale ``_PATTERNS[i]`` (its minimum the
    patterns reversed, for 4-bit) in both groups, every code byte ``code``."""
    w = np.zeros((_PATTERNS.size, fmt.row_bytes(2 * fmt.group)), np.uint8)
    for g in range(2):
        at = g * fmt.group_bytes
        w[:, at : at + 2] = _PATTERNS.view(np.uint8).reshape(-1, 2)
        if fmt.bits == 4:
            w[:, at + 2 : at + 4] = _PATTERNS[::-1].copy().view(np.uint8).reshape(-1, 2)
        w[:, at + fmt.header_bytes : at + fmt.group_bytes] = code
    return w


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_float16_scale_and_minimum_is_read_exactly(name: str) -> None:
    # every code 1 (0x11: both 4-bit codes); x picks element 0 (and 1), so
    # each sum is one dequantized value
    fmt = FORMATS[name]
    k = 2 * fmt.group
    patterns = _PATTERNS
    w = _every_float16(fmt, 0x11 if fmt.bits == 4 else 1)
    for x in (np.eye(k, dtype=np.float32)[0], np.eye(k, dtype=np.float32)[1]):
        same = _as_dequantized(w, x, fmt)
        assert same.all(), f"{name}: float16 patterns {patterns[~same][:5]}"


def _same_bf16(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Elementwise: the same bits, or both NaN (ml_dtypes' NaN for any NaN)."""
    return (got.view(np.uint16) == want.view(np.uint16)) | (
        np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))
    )


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize("case", ["quantized", "bytes"])
def test_qdecode_is_the_dequantized_bf16_rows(name: str, case: str) -> None:
    fmt = FORMATS[name]
    rng = np.random.default_rng(3 + len(name) + len(case))
    for rows, k in [(3, 64), (300, 2048)]:
        w = _packed(rng, fmt, rows, k, case)
        got = matvec.qdecode(w, fmt.bits, fmt.group)
        with np.errstate(all="ignore"):
            want = dequantize(w, fmt).astype(bfloat16)
        assert got.dtype == bfloat16 and got.shape == (rows, k)
        same = _same_bf16(got, want)
        assert same.all(), f"{name} {case} {rows}x{k}: {np.flatnonzero(~same)[:5]}"


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_qdecode_reads_every_float16_scale_and_minimum_exactly(name: str) -> None:
    fmt = FORMATS[name]
    w = _every_float16(fmt, 0x31)
    got = matvec.qdecode(w, fmt.bits, fmt.group)
    with np.errstate(all="ignore"):
        want = dequantize(w, fmt).astype(bfloat16)
    same = _same_bf16(got, want)
    assert same.all(), f"{name}: float16 patterns {_PATTERNS[~same.all(axis=1)][:5]}"


def test_qdecode_refuses_rows_of_another_format() -> None:
    w = np.zeros((4, 21), np.uint8)
    with pytest.raises(
        ValueError, match=r"qdecode: packed \[4, 21\] uint8 is not rows of 4-bit"
    ):
        matvec.qdecode(w, 4, 32)


def test_packed_rows_refuse_a_format_that_does_not_fit() -> None:
    q4 = FORMATS["q4"]
    w = np.zeros((4, q4.row_bytes(64)), np.uint8)
    with pytest.raises(
        ValueError,
        match=r"not rows of 8-bit groups of 32 for K=64; give \(M, K / group \* 34\)",
    ):
        matvec.qmatvec(w, np.zeros(64, np.float32), 8, 32)
    with pytest.raises(ValueError, match=r"K=48"):
        matvec.qmatvec(w, np.zeros(48, np.float32), 4, 32)


def test_qgemv_reference_is_the_packed_product(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    for name, fmt in sorted(FORMATS.items()):
        op = QGEMV(M=96, K=256, bits=fmt.bits, group=fmt.group)
        w = _packed(rng, fmt, 96, 256, "quantized")
        x = rng.standard_normal(256).astype(bfloat16)
        got = op.reference(w, x)
        want = matvec.qmatvec(w, x.astype(np.float32), fmt.bits, fmt.group)
        assert got.tobytes() == want.astype(bfloat16).tobytes(), name
        with monkeypatch.context() as m:  # numpy's path: within the tolerance
            m.setitem(matvec._state, "kernels", {})
            blas = op.reference(w, x)
        assert compare(got, blas, op.tolerance(w, x)), name


# -- batch invariance: a prompt row sums as a decode step's vector --------------------


def _same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    return got.shape == want.shape and got.tobytes() == want.tobytes()


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 40),
    pairs=st.integers(1, 300),
    out=st.integers(1, 70),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_rows_bits_are_its_matvec_whatever_the_other_rows(
    rows: int, pairs: int, out: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    k = 2 * pairs
    w = _bf16(rng, out, k)
    xs = _bf16(rng, rows, k).astype(np.float32)
    got = matvec.matvecs(w, xs)
    for b in range(rows):
        assert _same_bits(got[b], matvec.matvec(w, xs[b])), b
    assert _same_bits(matvec.matvecs(w.astype(np.float32), xs), got)


def test_vectors_in_blocks_and_threads_keep_each_rows_bits() -> None:
    # more vectors than one cached block, a weight the threads split
    rng = np.random.default_rng(8)
    w = _bf16(rng, 2100, 1024)
    xs = _bf16(rng, 70, 1024).astype(np.float32)
    assert 8 * 512 * 70 > matvec._VECTOR_BYTES and w.nbytes >= matvec._SPLIT_BYTES
    got = matvec.matvecs(w, xs)
    for b in (0, 33, 69):
        assert _same_bits(got[b], matvec.matvec(w, xs[b])), b


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_packed_rows_bits_are_their_qmatvec_whatever_the_other_rows(name: str) -> None:
    fmt = FORMATS[name]
    rng = np.random.default_rng(len(name))
    for rows, n, k in [(1, 5, 64), (7, 40, 256), (16, 300, 1024)]:
        w = _packed(rng, fmt, n, k, "bytes")
        xs = _bf16(rng, rows, k).astype(np.float32)
        with np.errstate(all="ignore"):
            got = matvec.qmatvecs(w, xs, fmt.bits, fmt.group)
            for b in range(rows):
                want = matvec.qmatvec(w, xs[b], fmt.bits, fmt.group)
                assert _same_bits(got[b], want), (name, rows, b)


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(1, 24), seed=st.integers(0, 2**32 - 1))
def test_gemm_rows_are_gemv_results(rows: int, seed: int) -> None:
    """GEMM's row i equals GEMV on row i, bit for bit, at every row count."""
    rng = np.random.default_rng(seed)
    k, n = 96, 48
    w, a = _bf16(rng, n, k), _bf16(rng, rows, k, scale=4.0)
    gemm = GEMM(M=rows, K=k, N=n, b_transposed=True).reference(a, w)
    plain = GEMM(M=rows, K=k, N=n).reference(a, np.ascontiguousarray(w.T))
    gemv = GEMV(M=n, K=k)
    for i in range(rows):
        assert _same_bits(gemm[i], gemv.reference(w, a[i])), i
    assert _same_bits(plain, gemm)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_qgemm_rows_are_qgemv_results(name: str) -> None:
    fmt = FORMATS[name]
    rng = np.random.default_rng(3 + len(name))
    k, n = 256, 64
    w = _packed(rng, fmt, n, k, "quantized")
    qgemv = QGEMV(M=n, K=k, bits=fmt.bits, group=fmt.group)
    for rows in (1, 5, 16):
        a = _bf16(rng, rows, k)
        got = QGEMM(M=16, K=k, N=n, bits=fmt.bits, group=fmt.group).reference(a, w)
        for i in range(rows):
            assert _same_bits(got[i], qgemv.reference(w, a[i])), (rows, i)
