"""Every test operator iron-core's tests share, each declared once.

iron-core's tests never import iron.operators: these tiny operators declare
operands and fields as a real one does, each with a numpy reference. They are
grouped by what a test needs of them:

- graphs (bf16 in, rounded once to the input's dtype): ``Scale`` (with a
  Divisors and a tuple tunable and a device check), ``Mul``, ``MatVec``,
  ``Copy``, ``Copy2D``, ``ArgMax``;
- declarations (the ``test_operator_*`` files): ``DomainScale`` (one tunable of
  each domain kind), ``TiledMatVec``, ``PerCallRows``, ``NoResolve``,
  ``TunableFirst``, ``DerivedTile``;
- profiles (stand-ins for iron-operators' catalog): ``AX``, ``AX1``, ``MM``,
  ``NotCataloged``;
- arena placement (no tunables, any sizes): ``Resize``, ``Mix``, ``Add``,
  ``Add2D``, ``Tanh``, ``Linear``, ``Attend``;
- the cost model (a cost and no work): ``Stream``, ``Crunch``, ``Spread``;
- per-call words and the Emit program (float32 operands, exact arithmetic):
  ``Double``, ``CopyTo``, ``Pick``, ``CopyView``, ``ZeroFrom``.
"""

from __future__ import annotations

import math
from enum import Enum

import numpy as np
from ml_dtypes import bfloat16

from iron.core.declare import Divisors, Input, Output, param, tunable
from iron.core.device import Device
from iron.core.operator import Cost, Operator, RefusedShapeError

__all__ = [
    "AX",
    "AX1",
    "MM",
    "NotCataloged",
    "Add",
    "Add2D",
    "ArgMax",
    "Attend",
    "Copy",
    "Copy2D",
    "CopyTo",
    "CopyView",
    "Crunch",
    "DerivedTile",
    "DomainScale",
    "Double",
    "Linear",
    "MatVec",
    "Mix",
    "Mode",
    "Mul",
    "NoResolve",
    "PerCallRows",
    "Pick",
    "Resize",
    "Scale",
    "Spread",
    "Stream",
    "Tanh",
    "TiledMatVec",
    "TunableFirst",
    "ZeroFrom",
]


def _f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


# -- graphs ------------------------------------------------------------------------------


class Scale(Operator):
    """``factor * x`` elementwise, in fp32 rounded once to x's dtype."""

    size: int = param()
    factor: float = param(1.0)
    tile_size: int = tunable(domain=Divisors("size"))
    num_columns: int = tunable(domain=(1, 2, 4, 8))
    inputs = (Input("x", "size"),)
    outputs = (Output("out", "size"),)

    def resolve(self, dev: Device) -> dict[str, int]:
        return {"tile_size": math.gcd(self.size, 16), "num_columns": dev.columns}

    def check(self, dev: Device) -> None:
        if self.size % self.num_columns:
            raise RefusedShapeError(
                f"Scale: size={self.size} is not a multiple of "
                f"num_columns={self.num_columns}"
            )

    def reference(self, x: np.ndarray) -> np.ndarray:
        return (np.float32(self.factor) * x.astype(np.float32)).astype(x.dtype)


class Mul(Operator):
    """``x * y`` elementwise."""

    size: int = param()
    inputs = (Input("x", "size"), Input("y", "size"))
    outputs = (Output("out", "size"),)

    def reference(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (x.astype(np.float32) * y.astype(np.float32)).astype(x.dtype)


class MatVec(Operator):
    """``w @ x``: w is (M, K), x is (K,), the result (M,)."""

    M: int = param()
    K: int = param()
    inputs = (Input("w", "M", "K"), Input("x", "K"))
    outputs = (Output("out", "M"),)

    def reference(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        return (w.astype(np.float32) @ x.astype(np.float32)).astype(w.dtype)


class Copy(Operator):
    """``x`` unchanged: what writes a state through ``out=``."""

    consumes_views = True
    size: int = param()
    inputs = (Input("x", "size"),)
    outputs = (Output("out", "size"),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return x.copy()


class Copy2D(Operator):
    """A matrix unchanged: what consumes a gather's rows."""

    consumes_views = True
    rows: int = param()
    cols: int = param()
    inputs = (Input("x", "rows", "cols"),)
    outputs = (Output("out", "rows", "cols"),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return x.copy()


class ArgMax(Operator):
    """The index of x's greatest element, as one int32 (a sampled token)."""

    size: int = param()
    inputs = (Input("x", "size"),)
    outputs = (Output("out", 1, dtype=np.int32),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return np.array([np.argmax(x.astype(np.float32))], np.int32)


# -- declarations ------------------------------------------------------------------------


class Mode(Enum):
    """An Enum tunable's domain."""

    FAST = "fast"
    EXACT = "exact"


class DomainScale(Operator):
    """``factor * x`` with one tunable of each domain kind: Divisors, tuple, Enum."""

    size: int = param()
    factor: float = param(1.0)
    tile: int = tunable(domain=Divisors("size", multiple_of=16))
    columns: int = tunable(domain=(1, 2, 4, 8))
    mode: Mode = tunable(domain=Mode)
    inputs = (Input("x", "size"),)
    outputs = (Output("out", "size"),)

    def resolve(self, dev: Device) -> dict[str, object]:
        return {"tile": 16, "columns": min(dev.columns, 8), "mode": Mode.FAST}

    def check(self, dev: Device) -> None:
        if self.columns > dev.columns:
            raise RefusedShapeError(
                f"DomainScale on {dev}: columns={self.columns} exceeds {dev.columns}"
            )

    def reference(self, x: np.ndarray) -> np.ndarray:
        return (np.float32(self.factor) * x.astype(np.float32)).astype(x.dtype)


class TiledMatVec(Operator):
    """``w @ x``: M and K read off two operands, a tunable tile of K."""

    M: int = param()
    K: int = param()
    tile: int = tunable(domain=Divisors("K"))
    inputs = (Input("w", "M", "K"), Input("x", "K"))
    outputs = (Output("y", "M"),)

    def resolve(self, dev: Device) -> dict[str, int]:
        return {"tile": self.K}

    def reference(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        return (w.astype(np.float32) @ x.astype(np.float32)).astype(w.dtype)


class PerCallRows(Operator):
    """Per-row op over a ``(rows, 16)`` input: a per-call length, a derived field
    and an optional operand."""

    rows: int = param()
    length: int = param(0, per_call=True)
    half: int = param(derive=lambda self: self.length // 2)
    inputs = (Input("x", "rows", 16), Input("bias", 16, optional=True))
    outputs = (Output("out", "rows", 16), Output("sums", 16))

    def reference(
        self, x: np.ndarray, bias: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        return x, x.sum(axis=0)


class NoResolve(Operator):
    """An open tunable and the base class's resolve() and check()."""

    size: int = param()
    tile: int = tunable()


class TunableFirst(Operator):
    """Declares a tunable before its dimensions."""

    tile: int = tunable()
    size: int = param()
    scale: float = param(2.0)
    columns: int = tunable()


class DerivedTile(Operator):
    """A tunable whose domain is the divisors of a derived field."""

    rows: int = param()
    cols: int = param()
    n: int = param(derive=lambda self: self.rows * self.cols)
    tile: int = tunable(domain=Divisors("n"))


# -- profiles: stand-ins for iron-operators' catalog, keyed by these names ---------------


class AX(Operator):
    """``scalar_factor * x + y``'s declaration, tunables named as IRON's AXPY names them."""

    size: int = param()
    scalar_factor: float = param()
    tile_size: int = tunable(domain=Divisors("size"))
    num_aie_columns: int = tunable(domain=(1, 2, 4, 8))
    inputs = (Input("x", "size"), Input("y", "size"))
    outputs = (Output("out", "size"),)


class AX1(AX):
    """AX with its column count fixed by the class."""

    num_aie_columns = 1


def _half(self: MM) -> int:
    return self.m // 2


class MM(Operator):
    """A matmul's declaration: a flag, a callable default, a derived field, an Enum."""

    m: int = param()
    k: int = param()
    bias: bool = param(False)
    half: int = param(_half)
    blocks: int = param(derive=lambda self: self.m // 64)
    mode: Mode = tunable(domain=Mode)
    tile_m: int = tunable(domain=(32, 64))
    inputs = (Input("a", "m", "k"),)
    outputs = (Output("c", "m", "k"),)


class NotCataloged(AX):
    """AX under a name the stand-in catalog does not hold."""


# -- arena placement ---------------------------------------------------------------------


class _Untuned(Operator):
    """No tunables: resolve() has nothing to fill."""

    def resolve(self, dev: Device) -> dict[str, object]:
        return {}


class Resize(_Untuned):
    """A vector of one length to another (numpy.resize)."""

    size_in: int = param()
    size_out: int = param()
    inputs = (Input("x", "size_in"),)
    outputs = (Output("out", "size_out"),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return np.resize(_f32(x), self.size_out).astype(bfloat16)


class Mix(_Untuned):
    """Two vectors of any lengths to a third (resize both, add)."""

    size_a: int = param()
    size_b: int = param()
    size_out: int = param()
    inputs = (Input("a", "size_a"), Input("b", "size_b"))
    outputs = (Output("out", "size_out"),)

    def reference(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        n = self.size_out
        return (np.resize(_f32(a), n) + np.resize(_f32(b), n)).astype(bfloat16)


class Add(_Untuned):
    """out = x + y, one length."""

    size: int = param()
    inputs = (Input("x", "size"), Input("y", "size"))
    outputs = (Output("out", "size"),)

    def reference(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (_f32(x) + _f32(y)).astype(bfloat16)


class Add2D(_Untuned):
    """out = x + y over 2-D tensors."""

    m: int = param()
    n: int = param()
    inputs = (Input("x", "m", "n"), Input("y", "m", "n"))
    outputs = (Output("out", "m", "n"),)

    def reference(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (_f32(x) + _f32(y)).astype(bfloat16)


class Tanh(_Untuned):
    """An elementwise map over a 2-D tensor (a norm, a rotary, an activation)."""

    m: int = param()
    n: int = param()
    inputs = (Input("x", "m", "n"),)
    outputs = (Output("out", "m", "n"),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return np.tanh(_f32(x)).astype(bfloat16)


class Linear(_Untuned):
    """out = x @ w.T, w held as a weight (n, k)."""

    m: int = param()
    k: int = param()
    n: int = param()
    inputs = (Input("x", "m", "k"), Input("w", "n", "k"))
    outputs = (Output("out", "m", "n"),)

    def reference(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return (_f32(x) @ _f32(w).T).astype(bfloat16)


class Attend(_Untuned):
    """A stand-in for attention: q (m, d), k and v (m, kv) to (m, d)."""

    m: int = param()
    d: int = param()
    kv: int = param()
    inputs = (Input("q", "m", "d"), Input("k", "m", "kv"), Input("v", "m", "kv"))
    outputs = (Output("out", "m", "d"),)

    def reference(self, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        s = _f32(k).sum(axis=1, keepdims=True) * _f32(v).mean(axis=1, keepdims=True)
        return (_f32(q) + s).astype(bfloat16)


# -- the cost model ----------------------------------------------------------------------


class Stream(Operator):
    """Moves ``size`` bf16 elements in and out, one op each (memory-bound)."""

    size: int = param()
    inputs = (Input("x", "size"),)
    outputs = (Output("out", "size"),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return x

    def cost(self, dev: Device) -> Cost:
        return Cost(macs=self.size, bytes=4 * self.size)


class Crunch(Operator):
    """A cube of MACs on a vector (compute-bound)."""

    size: int = param()
    inputs = (Input("x", "size"),)
    outputs = (Output("out", "size"),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return x

    def cost(self, dev: Device) -> Cost:
        return Cost(macs=self.size**3, bytes=4 * self.size)


class Spread(Operator):
    """Work whose spread over the array (columns, cores, calls, rereads) a test sets."""

    size: int = param()
    columns: int = param(1)
    cores: int | None = param(None)
    calls: int = param(1)
    reread: int = param(0)
    stall: float = param(0.0)
    inputs = (Input("x", "size"),)
    outputs = (Output("out", "size"),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return x

    def cost(self, dev: Device) -> Cost:
        return Cost(
            macs=self.size**2,
            bytes=4 * self.size,
            columns=self.columns,
            cores=self.cores,
            calls=self.calls,
            reread_bytes=self.reread,
            stall_seconds=self.stall,
        )


# -- per-call words and the Emit program -------------------------------------------------


class _Float32(Operator):
    """float32 operands and no tunables, so host and Emit agree exactly."""

    def resolve(self, dev: Device) -> dict[str, object]:
        return {}


class Double(_Float32):
    """``2 * x`` elementwise, in float32."""

    size: int = param()
    inputs = (Input("x", "size", dtype=np.float32),)
    outputs = (Output("out", "size"),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return (np.float32(2) * x.astype(np.float32)).astype(np.float32)


class CopyTo(_Float32):
    """``x`` unchanged, float32: with ``out=`` it writes a state."""

    size: int = param()
    inputs = (Input("x", "size", dtype=np.float32),)
    outputs = (Output("out", "size"),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return x.astype(np.float32)


class Pick(_Float32):
    """The index of float32 ``x``'s largest entry, one int32 (a sampled token)."""

    size: int = param()
    inputs = (Input("x", "size", dtype=np.float32),)
    outputs = (Output("out", 1, dtype=np.int32),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return np.asarray([np.argmax(x)], dtype=np.int32)


class CopyView(_Float32):
    """A float32 matrix unchanged: what consumes a strided view."""

    consumes_views = True
    rows: int = param()
    cols: int = param()
    inputs = (Input("x", "rows", "cols", dtype=np.float32),)
    outputs = (Output("out", "rows", "cols"),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        return x.astype(np.float32)


class ZeroFrom(_Float32):
    """``x`` with entries from ``length`` on zeroed; ``length`` is per call."""

    size: int = param()
    length: int = param(0, per_call=True)
    inputs = (Input("x", "size", dtype=np.float32),)
    outputs = (Output("out", "size"),)

    def reference(self, x: np.ndarray) -> np.ndarray:
        out = x.astype(np.float32)
        out[int(self.length) :] = 0
        return out
