"""Elementwise activations over one flat bf16 vector.

This module owns ``SiLU``, ``GELU``, ``Sigmoid``, ``Tanh``, ``LeakyReLU``,
``Clamp`` and ``SiLUMul`` (the SwiGLU product ``silu(gate) * up``). Each is an
``Elementwise`` operator: ``size`` elements in ``tile_size`` tiles over
``num_aie_columns`` columns, with the tiling rules, defaults and cost of
:mod:`iron.operators.elementwise`.

The kernel contract for the transcendental ones (SiLU, GELU, Sigmoid, Tanh,
SiLUMul) is *fp32 evaluation, one rounding*: the kernel evaluates the
function in fp32 to within ``2**-10`` relative of the exact value (wherever
that value is at least ``2**-126``, the smallest normal), and rounds once to
bf16. Any two such values are within ``2**-9`` relative of each other, which
is under half a bf16 spacing, so their bf16 roundings are at most one ulp
apart: hence ``bf16_ulps(1, atol=2**-126)``, the atol for results a kernel
flushes to zero. This is deliberately not AMD IRON's contract for its LUT
activations (``relative(0.128)``): those kernels (mlir-aie ``silu.cc``,
``gelu.cc``, ``sigmoid.cc``) round to bf16 between steps and take
``sigmoid(x)`` as ``0.5 * (1 + tanh(x / 2))`` with a bf16 tanh, which is
20% off at ``x = -6`` and 0 below about -6.9; such a kernel does not meet
this contract and would need its own.

References model that contract with numerically robust fp32 forms (a sigmoid
that never overflows an intermediate, no ``1 + tanh`` cancellation) and give
the functions' limits at the infinities.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ml_dtypes import bfloat16

from iron.core.declare import Input, Output, param
from iron.core.tolerance import Tolerance
from iron.operators.elementwise import ONE_ROUNDING, Elementwise

__all__ = ["GELU", "Clamp", "LeakyReLU", "SiLU", "SiLUMul", "Sigmoid", "Tanh"]

_F32 = np.float32
_SMALLEST_NORMAL = 2.0**-126

#: The GELU forms a kernel may compute; "tanh" is the default.
GELU_FORMS = ("tanh", "erf")
# GELU's tanh approximation: 0.5 x (1 + tanh(c (x + beta x**3))), c = sqrt(2/pi).
_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_BETA = 0.044715
# Numerical Recipes' erfcc (Press et al., 2nd ed., section 6.2): a Chebyshev
# fit with fractional error below 1.2e-7 everywhere, far inside 2**-10.
_ERFC_COEFFS = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)


def _fp32_contract(formula: str) -> Tolerance:
    """The fp32-evaluation contract for ``formula`` (see the module docstring)."""
    return Tolerance.bf16_ulps(
        1,
        atol=_SMALLEST_NORMAL,
        note=(
            f"{formula} evaluated in fp32 to within 2**-10 relative, rounded "
            "once to bf16: device and reference then differ by under half a bf16 "
            "spacing, so <= 1 ulp; atol 2**-126 for results flushed to zero. Not "
            "AMD IRON's LUT-activation figure (relative 0.128), which covers bf16 "
            "intermediates this kernel does not round through"
        ),
    )


def _sigmoid32(z: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-z))`` in fp32 without overflow: ``exp`` only of ``-|z|``."""
    with np.errstate(invalid="ignore"):  # a NaN in: NaN out, quietly
        e = np.exp(-np.abs(z))
    return np.where(z >= 0, _F32(1), e) / (_F32(1) + e)


def _at_minus_inf_zero(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``y`` with ``-0`` where ``x`` is ``-inf``: the limit of ``x * (->0)``."""
    # x == -inf is isneginf's mask (NaN compares unequal) in one ufunc call
    return np.where(x == _F32(-np.inf), _F32(-0.0), y)


def _silu32(x: np.ndarray) -> np.ndarray:
    """``x * sigmoid(x)`` in fp32, with ``silu(-inf) = -0``."""
    with np.errstate(invalid="ignore"):
        return _at_minus_inf_zero(x, x * _sigmoid32(x))


def _erfc32(t: np.ndarray) -> np.ndarray:
    """``erfc(t)`` in fp32 by Numerical Recipes' erfcc (fractional error < 1.2e-7)."""
    a = np.abs(t)
    k = _F32(1) / (_F32(1) + _F32(0.5) * a)
    poly = np.zeros_like(a)
    for c in reversed(_ERFC_COEFFS[1:]):
        poly = k * (_F32(c) + poly)
    with np.errstate(invalid="ignore"):
        y = k * np.exp(-a * a + _F32(_ERFC_COEFFS[0]) + poly)
    return np.where(t >= 0, y, _F32(2) - y)


class _Activation(Elementwise):
    """A one-input activation: ``out = f(x)``, ``size`` elements."""

    inputs = (Input("x", "size"),)
    outputs = (Output("out", "size"),)


class SiLU(_Activation):
    """``silu(x) = x * sigmoid(x)`` elementwise, in bf16.

    The reference evaluates ``x * sigmoid(x)`` in fp32, the sigmoid from
    ``exp(-|x|)`` so that no intermediate overflows (a plain
    ``x / (1 + exp(-x))`` returns 0 below x = -88.7, where the exact value is
    still a normal bf16), and rounds once; ``silu(-inf) = -0``.
    """

    kernel = "silu_bf16"

    def reference(self, x: np.ndarray) -> np.ndarray:
        return _silu32(x.astype(_F32)).astype(bfloat16)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        return _fp32_contract("x * sigmoid(x)")


class Sigmoid(_Activation):
    """``sigmoid(x) = 1 / (1 + exp(-x))`` elementwise, in bf16.

    Evaluated in fp32 from ``exp(-|x|)`` (no overflow) and rounded once.
    """

    kernel = "sigmoid_bf16"

    def reference(self, x: np.ndarray) -> np.ndarray:
        return _sigmoid32(x.astype(_F32)).astype(bfloat16)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        return _fp32_contract("1 / (1 + exp(-x))")


class Tanh(_Activation):
    """``tanh(x)`` elementwise, in bf16.

    Evaluated in fp32 (accurate near 0, where ``1 - 2 / (1 + exp(2x))``
    would cancel) and rounded once.
    """

    kernel = "tanh_bf16"

    def reference(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.tanh(x.astype(_F32)).astype(bfloat16)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        return _fp32_contract("tanh(x)")


class GELU(_Activation):
    """GELU elementwise, in bf16; by default its tanh approximation.

    ``form="tanh"`` (the default; the form AMD's aie_api GELU kernels
    compute): ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))``.
    ``form="erf"``: the exact GELU ``0.5 * x * erfc(-x / sqrt(2))``. The two
    differ by up to 4.7e-4 absolute (near x = -2.7), and relatively by far
    more than a bf16 ulp for negative x, so the form is part of the operator:
    the tolerance compares a kernel with the reference of the same form.

    The tanh form is evaluated in fp32 as ``x * sigmoid(2u)`` (the identity
    ``0.5 * (1 + tanh(u)) = sigmoid(2u)``), which avoids the cancellation in
    ``1 + tanh(u)`` for negative x; the erf form uses Numerical Recipes'
    erfcc in fp32 (a fit with fractional error below 1.2e-7). Both round once; ``gelu(-inf) = -0``.

    Raises:
        ValueError: ``form`` is not ``"tanh"`` or ``"erf"``.
    """

    form: str = param(default="tanh", doc='"tanh" (approximation) or "erf" (exact)')

    def kernel_symbol(self) -> str:
        """``gelu_<form>_bf16``: one kernel per form."""
        return f"gelu_{self.form}_bf16"

    def __init__(self, **fields: Any) -> None:
        super().__init__(**fields)
        if self.form not in GELU_FORMS:
            raise ValueError(
                f"GELU.form={self.form!r} is not a GELU form; give form='tanh' "
                f"(the tanh approximation, the default) or form='erf'"
            )

    def reference(self, x: np.ndarray) -> np.ndarray:
        x = x.astype(_F32)
        with np.errstate(over="ignore", invalid="ignore"):
            if self.form == "tanh":
                z = _F32(2 * _GELU_C) * x * (_F32(1) + _F32(_GELU_BETA) * x * x)
                y = x * _sigmoid32(z)
            else:
                y = _F32(0.5) * x * _erfc32(x * _F32(-1 / math.sqrt(2.0)))
        return _at_minus_inf_zero(x, y).astype(bfloat16)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        if self.form == "tanh":
            return _fp32_contract("GELU, tanh form, as x * sigmoid(2u),")
        return _fp32_contract("GELU, erf form, as 0.5 x erfc(-x / sqrt 2),")


class LeakyReLU(_Activation):
    """``x if x >= 0 else alpha * x`` elementwise, in bf16.

    ``alpha`` is rounded to bf16 first, as the kernel receives it. The product
    of two bf16 values is exact in fp32, so the one rounding to bf16 is the
    only error (AMD IRON's eltwise contract; one ulp also covers a kernel
    rounding toward zero). It selects by sign, so it is right for any
    ``alpha``, unlike ``max(x, alpha * x)``, which is only for ``alpha <= 1``.

    Raises:
        ValueError: ``alpha`` is not finite once rounded to bf16.
    """

    alpha: float = param(doc="the slope negative inputs are multiplied by")
    kernel = "leaky_relu_bf16"
    kernel_scalars = ("alpha",)

    def __init__(self, **fields: Any) -> None:
        super().__init__(**fields)
        if not np.isfinite(_F32(bfloat16(self.alpha))):
            raise ValueError(
                f"LeakyReLU.alpha={self.alpha!r} is {float(bfloat16(self.alpha))} "
                f"in bf16, not finite; give a finite slope (0.01 is usual)"
            )

    def reference(self, x: np.ndarray) -> np.ndarray:
        a = _F32(bfloat16(self.alpha))
        x = x.astype(_F32)
        with np.errstate(over="ignore", invalid="ignore"):
            return np.where(x >= 0, x, a * x).astype(bfloat16)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        return ONE_ROUNDING


class Clamp(_Activation):
    """``min(max(x, low), high)`` elementwise, in bf16; exact.

    ``low`` and ``high`` are rounded to bf16 first, as the kernel receives
    them; each output is then ``x``, ``low`` or ``high``, so nothing rounds.
    Infinite bounds clamp on one side only; a NaN input stays NaN.

    Raises:
        ValueError: A bound is NaN, or ``low > high`` once rounded to bf16.
    """

    low: float = param(doc="the smallest output (rounded to bf16)")
    high: float = param(doc="the largest output (rounded to bf16)")
    kernel = "clamp_bf16"
    kernel_scalars = ("low", "high")

    def __init__(self, **fields: Any) -> None:
        super().__init__(**fields)
        low, high = _F32(bfloat16(self.low)), _F32(bfloat16(self.high))
        if np.isnan(low) or np.isnan(high):
            raise ValueError(
                f"Clamp bounds low={self.low!r}, high={self.high!r}: a bound is "
                f"NaN; give numbers (an infinity clamps on one side only)"
            )
        if low > high:
            raise ValueError(
                f"Clamp low={self.low!r} > high={self.high!r} (as bf16: {low} > "
                f"{high}); give low <= high"
            )

    def reference(self, x: np.ndarray) -> np.ndarray:
        low, high = _F32(bfloat16(self.low)), _F32(bfloat16(self.high))
        with np.errstate(invalid="ignore"):  # a signalling NaN stays NaN
            y = np.minimum(np.maximum(x.astype(_F32), low), high)
            return y.astype(bfloat16)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        return Tolerance.exact(
            note="selects x, low or high (bounds rounded to bf16 first); no rounding"
        )


class SiLUMul(Elementwise):
    """``silu(gate) * up`` elementwise, in bf16: the SwiGLU product.

    ``silu(gate)`` (as :class:`SiLU`) and its product with ``up`` are
    evaluated in fp32 and rounded once. Outside the contract: a ``gate`` whose
    ``silu`` is below fp32's normal range (``gate`` below about -92), times an
    ``up`` large enough to lift the product back above ``2**-126``; fp32
    holds such an intermediate with too few digits (or flushes it).
    """

    inputs = (Input("gate", "size"), Input("up", "size"))
    outputs = (Output("out", "size"),)
    kernel = "silu_mul_bf16"

    def reference(self, gate: np.ndarray, up: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):
            y = _silu32(gate.astype(_F32)) * up.astype(_F32)
        return y.astype(bfloat16)

    def tolerance(self, *inputs: np.ndarray) -> Tolerance:
        return _fp32_contract("silu(gate) * up")
