"""The kernel sources: contracts read from each file, and the fp32 algorithms.

The activation algorithms of ``iron_vecmath.h`` are compiled for the host
(``host_vecmath.cc``, a scalar backend) and judged against each operator's
reference and tolerance over every non-NaN bf16 input. The row and GEMV
kernels are compiled whole, with ``iron_kernel.h``'s aie_api mapping, against
a host model of aie_api in ``test_row_kernels.py`` (``host_rows.cc``); no
kernel is compiled for an AIE here (no Peano on this machine).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from ml_dtypes import bfloat16

from iron.core.tolerance import compare
from iron.operators import GELU, Sigmoid, SiLU, SiLUMul, Tanh
from iron.runtime.npu import kernels
from iron.runtime.npu.designs import elementwise, rows

from .support import HERE, compile_host


def test_every_kernel_states_its_contract():
    # 12 elementwise kernels; the other families' kernels ship beside them.
    assert len(kernels.symbols()) >= 12
    for symbol in kernels.symbols():
        c = kernels.contract(symbol)
        assert c.symbol == symbol and c.path.name == f"{symbol}.cc"
        assert "bf16" in c.rounding or "exact" in c.rounding
        assert c.tile and c.arguments and c.computes


def test_every_family_operator_has_a_kernel():
    named = {kernels.contract(s).operator.split()[0] for s in kernels.symbols()}
    families = (*elementwise.FAMILY, *rows.FAMILY)
    assert named >= {cls.__name__ for cls in families} | {"GEMV"}


def test_contract_counts_match_what_the_operators_declare():
    for cls in elementwise.FAMILY:
        syms = (
            [f"gelu_{f}_bf16" for f in ("tanh", "erf")] if cls is GELU else [cls.kernel]
        )
        for s in syms:
            c = kernels.contract(s)
            assert c.scalar_count == len(cls.kernel_scalars), s
            assert c.buffer_count in (2, 3), s


def test_unknown_kernel_is_named():
    with pytest.raises(KeyError, match="no IRON kernel 'nope_bf16'"):
        kernels.source("nope_bf16")


def test_kernel_sources_ship_under_the_package():
    assert kernels.KERNEL_DIR.parts[-3:] == ("runtime", "npu", "kernels")
    for header in kernels.HEADERS:
        assert (kernels.KERNEL_DIR / header).is_file()


@pytest.fixture(scope="module")
def host_math(tmp_path_factory) -> Path:
    return compile_host(
        tmp_path_factory.mktemp("vecmath"), [HERE / "host_vecmath.cc"], "host_vecmath"
    )


def _run(exe: Path, fn: str, values: np.ndarray) -> np.ndarray:
    done = subprocess.run(
        [str(exe), fn],
        input=values.astype(np.float32).tobytes(),
        capture_output=True,
        check=True,
    )
    # One rounding to bf16, to nearest even: what conv_even does on the core.
    return np.frombuffer(done.stdout, np.float32).astype(bfloat16)


def _every_bf16() -> np.ndarray:
    x = np.arange(1 << 16, dtype=np.uint16).view(bfloat16)
    return x[~np.isnan(x.astype(np.float32))]


@pytest.mark.parametrize(
    ("fn", "op"),
    [
        ("silu", SiLU(size=16)),
        ("sigmoid", Sigmoid(size=16)),
        ("tanh", Tanh(size=16)),
        ("gelu_tanh", GELU(size=16)),
        ("gelu_erf", GELU(size=16, form="erf")),
    ],
)
def test_activation_algorithm_meets_its_contract_on_every_bf16(host_math, fn, op):
    x = _every_bf16()
    verdict = compare(_run(host_math, fn, x), op.reference(x), op.tolerance(x))
    assert verdict, str(verdict)


def test_silu_mul_algorithm_meets_its_contract(host_math):
    rng = np.random.default_rng(7)
    gate = (rng.standard_normal(20000) * 8).astype(bfloat16)
    up = (rng.standard_normal(20000) * 4).astype(bfloat16)
    pairs = np.stack([gate, up], axis=1).astype(np.float32).ravel()
    op = SiLUMul(size=16)
    verdict = compare(
        _run(host_math, "silu_mul", pairs),
        op.reference(gate, up),
        op.tolerance(gate, up),
    )
    assert verdict, str(verdict)
