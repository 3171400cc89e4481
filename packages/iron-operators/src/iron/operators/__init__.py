"""IRON's operator catalog: declarations, numpy references, tolerances and costs.

``CATALOG`` maps each operator's name to its class; iron-core finds it through
the ``iron.operators`` entry point (``Profile.load`` and ``save`` use it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from iron.operators.__about__ import __version__
from iron.operators.activations import (
    GELU,
    Clamp,
    LeakyReLU,
    Sigmoid,
    SiLU,
    SiLUMul,
    Tanh,
)
from iron.operators.attention import CausalAttention, DecodeAttention
from iron.operators.binary import ElementwiseAdd, ElementwiseMul
from iron.operators.dequant import Dequant
from iron.operators.elementwise import AXPY, ReLU
from iron.operators.matmul import GEMM, GEMV
from iron.operators.movers import Copy, Repeat, Transpose
from iron.operators.norms import LayerNorm, RMSNorm
from iron.operators.qmatmul import QGEMM, QGEMV, DequantRows
from iron.operators.rope import RoPE
from iron.operators.sample import Sample
from iron.operators.softmax import Softmax

if TYPE_CHECKING:
    from iron.core.operator import Operator

_ALL = (
    ElementwiseAdd,
    ElementwiseMul,
    AXPY,
    ReLU,
    SiLU,
    GELU,
    Sigmoid,
    Tanh,
    LeakyReLU,
    Clamp,
    SiLUMul,
    RMSNorm,
    LayerNorm,
    Softmax,
    RoPE,
    GEMV,
    GEMM,
    DecodeAttention,
    CausalAttention,
    Copy,
    Transpose,
    Repeat,
    Dequant,
    QGEMV,
    QGEMM,
    DequantRows,
    Sample,
)

#: Every operator by name, as profiles name them.
CATALOG: dict[str, type[Operator]] = {cls.__name__: cls for cls in _ALL}

__all__ = ["CATALOG", "__version__", *sorted(CATALOG)]
