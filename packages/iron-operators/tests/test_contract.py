"""The operator contract, checked once for every operator in ``CATALOG``.

Every operator, at a few legal shapes and on each device: ``resolve`` gives
tunables inside their declared domains that ``check`` accepts; ``check``
refuses what the declaration and the device rule out, with a ValueError that
names the operator and the device (and, unless the rule is about the shape
alone, the host still runs it with device fit off); ``cost`` is a ``Cost``
whose MACs and bytes are what the shape fixes (the bytes are what the
declared operands move, unless the design moves more or less) and grow with
the shape; ``reference`` returns the declared outputs in their declared
shapes and dtypes. The family files keep what is particular to each family:
numerics, tolerances and designs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from ml_dtypes import bfloat16

from iron.core import context
from iron.core.declare import Declaration, domain_values
from iron.core.device import NPU1, NPU2, Device
from iron.core.operator import Cost, Operator, RefusedShapeError
from iron.core.tolerance import Tolerance
from iron.operators import (
    AXPY,
    CATALOG,
    GEMM,
    GEMV,
    QGEMM,
    QGEMV,
    CausalAttention,
    DecodeAttention,
    Dequant,
    DequantRows,
    ElementwiseAdd,
    ElementwiseMul,
    LayerNorm,
    LeakyReLU,
    ReLU,
    Repeat,
    RMSNorm,
    RoPE,
    Sample,
    Sigmoid,
    SiLU,
    SiLUMul,
    Softmax,
    Tanh,
    Transpose,
)

DEVICES = (NPU1, NPU2)


@dataclasses.dataclass(frozen=True)
class Example:
    """A shape an operator runs on both devices, and its cost worked by hand."""

    fields: dict[str, Any]
    #: (MACs, bytes), worked out from the shape in the comment beside it.
    by_hand: tuple[int, int] | None = None


def example(by_hand: tuple[int, int] | None = None, **fields: Any) -> Example:
    return Example(fields, by_hand)


#: Every operator's legal shapes; the first is the issue's catalog table.
EXAMPLES: dict[str, tuple[Example, ...]] = {
    # One element operation per output; bf16 in and out (2 bytes each).
    "ElementwiseAdd": (example((2048, 3 * 2048 * 2), size=2048),),
    "ElementwiseMul": (example((2048, 3 * 2048 * 2), size=2048),),
    "AXPY": (
        example((2048, 3 * 2048 * 2), size=2048, scalar_factor=1.0),
        example((2048, 3 * 2048 * 2), size=2048, scalar_factor=2.0),
    ),
    "ReLU": (example((2048, 2 * 2048 * 2), size=2048),),
    "SiLU": (example((2048, 2048 * 2 + 2048 * 2), size=2048),),
    "GELU": (
        example((2048, 2 * 2048 * 2), size=2048),
        example((4096, 16384), size=4096, form="erf"),
    ),
    "Sigmoid": (example((2048, 2 * 2048 * 2), size=2048),),
    "Tanh": (example((2048, 2 * 2048 * 2), size=2048),),
    "LeakyReLU": (example((2048, 2 * 2048 * 2), size=2048, alpha=0.01),),
    "Clamp": (
        example((2048, 2 * 2048 * 2), size=2048, low=-1.0, high=1.0),
        example((32, 128), size=32, low=0, high=1),
    ),
    "SiLUMul": (example((2048, 3 * 2048 * 2), size=2048),),
    # 8 rows of 2048: 16384 elements, 32768 bytes each way; a vector is 4096
    # bytes. RMSNorm: 2 operations an element, 3 with its weight; LayerNorm:
    # 3, 5 with a weight and a bias.
    "RMSNorm": (
        example((32768, 65536), rows=8, cols=2048),
        example((49152, 69632), rows=8, cols=2048, weighted=True),
    ),
    "LayerNorm": (
        example((49152, 65536), rows=8, cols=2048),
        example((81920, 73728), rows=8, cols=2048, weighted=True, biased=True),
    ),
    # 4 rows of 1024: 4096 elements, 4 operations each, 8192 bytes each way;
    # a length leaves whole rows to move.
    "Softmax": (
        example(rows=8, cols=256),
        example((16384, 16384), rows=4, cols=1024),
        example((16384, 16384), rows=4, cols=1024, length=10),
    ),
    # 4 positions x 8 heads x 128: 4096 elements, 2 MACs each; x and out are
    # 8192 bytes each, 4 table rows 1024 bytes.
    "RoPE": (
        example(rows=8, heads=8, head_dim=64),
        example((8192, 17408), rows=4, heads=8, head_dim=128),
    ),
    # 2048 x 8192 weights dominate: 16 MiB of 16.01 MiB moved.
    "GEMV": (
        example(M=2048, K=2048),
        example((16_777_216, (16_777_216 + 8192 + 2048) * 2), M=2048, K=8192),
    ),
    "GEMM": (
        example(M=64, K=2048, N=2048),
        example((134_217_728, (524_288 + 262_144 + 131_072) * 2), M=512, K=1024, N=256),
    ),
    "DecodeAttention": (
        example(heads=32, kv_heads=8, head_dim=64, max_len=1024, length=100),
    ),
    "CausalAttention": (
        example(heads=32, kv_heads=8, head_dim=64, max_len=1024, rows=16),
    ),
    # Read the view and write the copy: 2 * 4 * 8 elements of 2 bytes.
    "Copy": (
        example(shape=(64, 64)),
        example((0, 128), shape=(4, 8)),
        example((0, 120), shape=(3, 5), itemsize=4),
    ),
    # One shuffle per element; x read and the result written, bf16.
    "Transpose": (
        example(rows=64, cols=64),
        example((3 * 16 * 8, 2 * 3 * 16 * 8 * 2), batch=3, rows=16, cols=8),
    ),
    "Repeat": (
        example(rows=8, repeat=4, row_shape=(64,)),
        example(rows=8, row_shape=(2048, 64), repeat=4),
        example(rows=2, row_shape=(128,), repeat=64),
        example(rows=1023, row_shape=(2,), repeat=1),
        example(rows=4, row_shape=(1000, 1000), repeat=2),
    ),
    # 4096 multiplies; 2048 packed bytes + 128 scales * 2 bytes in, 4096 bf16 out.
    "Dequant": (example((4096, 2048 + 256 + 8192), N=4096),),
    # Packed weights: a q4 row of 2048 is 64 groups of 20 bytes (1280), a q8
    # row 64 of 34 (2176), a q8_16 row 128 of 18 (2304); x and out bf16.
    "QGEMV": (
        example(
            (2048 * 2048, 2048 * 1280 + 2048 * 2 + 2048 * 2),
            M=2048,
            K=2048,
            bits=4,
            group=32,
        ),
        example(
            (512 * 2048, 512 * 2176 + 2048 * 2 + 512 * 2),
            M=512,
            K=2048,
            bits=8,
            group=32,
        ),
        example((64 * 256, 64 * 288 + 256 * 2 + 64 * 2), M=64, K=256, bits=8, group=16),
    ),
    # a (M, K) bf16 once, the packed w rows once (N * row_bytes), out bf16.
    "QGEMM": (
        example(
            (16 * 2048 * 2048, 16 * 2048 * 2 + 2048 * 1280 + 16 * 2048 * 2),
            M=16,
            K=2048,
            N=2048,
            bits=4,
            group=32,
        ),
        example(
            (64 * 2048 * 512, 64 * 2048 * 2 + 512 * 2176 + 64 * 512 * 2),
            M=64,
            K=2048,
            N=512,
            bits=8,
            group=32,
        ),
        example(
            (16 * 256 * 64, 16 * 256 * 2 + 64 * 288 + 16 * 64 * 2),
            M=16,
            K=256,
            N=64,
            bits=8,
            group=16,
        ),
    ),
    # 16 packed q4 rows of 2048 read, 16 bf16 rows written.
    "DequantRows": (
        example(
            (16 * 2048, 16 * 1280 + 16 * 2048 * 2), rows=16, K=2048, bits=4, group=32
        ),
        example((1 * 64, 1 * 72 + 64 * 2), rows=1, K=64, bits=8, group=16),
    ),
    # One comparison per logit; the logits read and one int32 written.
    "Sample": (
        example(vocab=4096),
        example((128256, 128256 * 2 + 4), vocab=128256, temperature=0.7, top_k=40),
        example((1000, 4004), vocab=1000, itemsize=4),
    ),
}

#: Movers that only program DMAs: no MACs and no compute core.
DMA_ONLY = {"Copy", "Repeat"}

#: Operators whose design moves other than each declared operand once: the
#: attentions stream the cache in chunks up to the attended length, Repeat
#: reads x once per copy. Their family files work their bytes out by hand.
OTHER_TRAFFIC = {"DecodeAttention", "CausalAttention", "Repeat"}

#: One way to grow each operator's work, keeping the shape legal.
GROW: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    **{
        name: (lambda f: {**f, "size": 2 * f["size"]})
        for name, cls in CATALOG.items()
        if "size" in cls.declaration.params
    },
    "RMSNorm": lambda f: {**f, "rows": 2 * f["rows"]},
    "LayerNorm": lambda f: {**f, "rows": 2 * f["rows"]},
    "Softmax": lambda f: {**f, "rows": 2 * f["rows"]},
    "RoPE": lambda f: {**f, "heads": 2 * f["heads"]},
    "GEMV": lambda f: {**f, "M": 2 * f["M"]},
    "GEMM": lambda f: {**f, "N": 2 * f["N"]},
    "DecodeAttention": lambda f: {**f, "heads": 2 * f["heads"]},
    "CausalAttention": lambda f: {**f, "rows": 2 * f["rows"]},
    "Copy": lambda f: {**f, "shape": (2 * f["shape"][0], *f["shape"][1:])},
    "Transpose": lambda f: {**f, "rows": 2 * f["rows"]},
    "Repeat": lambda f: {**f, "repeat": 2 * f["repeat"]},
    "Dequant": lambda f: {**f, "N": 2 * f["N"]},
    "Sample": lambda f: {**f, "vocab": 2 * f["vocab"]},
    "QGEMV": lambda f: {**f, "M": 2 * f["M"]},
    "QGEMM": lambda f: {**f, "N": 2 * f["N"]},
    "DequantRows": lambda f: {**f, "rows": 2 * f["rows"]},
}

#: An optional operand is present when its operator's flag says so.
PRESENT_WHEN = {"weight": "weighted", "bias": "biased"}

#: The dtype of an operand declared with any dtype, by the operator's itemsize.
BY_ITEMSIZE = {2: np.dtype(bfloat16), 4: np.dtype(np.float32)}


def input_shapes(op: Operator) -> list[tuple[tuple[int, ...], np.dtype]]:
    """Each operand ``op`` takes, its shape and dtype, from its declaration."""
    name = type(op).__name__
    if name == "Copy":
        return [(tuple(op.shape), BY_ITEMSIZE[op.itemsize])]
    if name == "Transpose":
        lead = () if op.batch is None else (op.batch,)
        return [((*lead, op.rows, op.cols), np.dtype(bfloat16))]
    if name == "Repeat":
        return [((op.rows, *op.row_shape), BY_ITEMSIZE[op.itemsize])]
    shapes = []
    for spec in type(op).declaration.inputs:
        if spec.optional and not getattr(op, PRESENT_WHEN[spec.name]):
            continue
        shape = tuple(
            d if isinstance(d, int) else int(getattr(op, d)) for d in spec.dims
        )
        itemsize = getattr(op, "itemsize", 2)
        dtype = BY_ITEMSIZE[itemsize] if spec.dtype is None else np.dtype(spec.dtype)
        shapes.append((shape, dtype))
    return shapes


def operands(op: Operator, seed: int = 0) -> list[np.ndarray]:
    """Random arrays for ``op``'s operands (bytes for uint8 ones)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for shape, dtype in input_shapes(op):
        if dtype == np.uint8:
            arrays.append(rng.integers(0, 256, shape, dtype=np.uint8))
        else:
            arrays.append(rng.standard_normal(shape).astype(np.float32).astype(dtype))
    return arrays


def operand_bytes(op: Operator) -> int:
    """What reading each declared input and writing each output moves."""
    dtypes = [dtype for _, dtype in input_shapes(op)]
    read = sum(math.prod(shape) * dtype.itemsize for shape, dtype in input_shapes(op))
    written = sum(
        math.prod(shape) * np.dtype(dtype).itemsize
        for shape, dtype in zip(op.output_shapes(), op.output_dtypes(dtypes))
    )
    return read + written


def each_example() -> list[Any]:
    return [
        pytest.param(name, case, id=f"{name}-{i}")
        for name in sorted(CATALOG)
        for i, case in enumerate(EXAMPLES[name])
    ]


def test_every_operator_has_examples() -> None:
    assert sorted(EXAMPLES) == sorted(CATALOG)
    assert sorted(GROW) == sorted(CATALOG)


# -- what every operator is ---------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_catalog_entries_are_complete_operators(name: str) -> None:
    cls = CATALOG[name]
    assert cls.__name__ == name
    assert issubclass(cls, Operator)
    assert isinstance(cls.declaration, Declaration)
    for hook in ("reference", "tolerance", "cost", "resolve", "check"):
        assert getattr(cls, hook) is not getattr(Operator, hook), hook
    for dev in DEVICES:
        op = cls(**EXAMPLES[name][0].fields).resolved(dev)
        assert op.open_tunables() == ()
        assert isinstance(op.tolerance(), Tolerance)
        assert op.tolerance().note
        assert isinstance(op.cost(dev), Cost)


# -- resolve gives legal tunables ---------------------------------------------------------


@pytest.mark.parametrize("dev", DEVICES, ids=str)
@pytest.mark.parametrize("name, case", each_example())
def test_resolve_gives_legal_tunables(name: str, case: Example, dev: Device) -> None:
    cls = CATALOG[name]
    declaration = cls.declaration
    op = cls(**case.fields).resolved(dev)
    assert op.open_tunables() == ()
    assert op.pinned == frozenset()
    fields = op.fields()
    for tunable in declaration.tunables:
        allowed = domain_values(declaration.params[tunable].domain, fields)
        if allowed is not None:
            assert fields[tunable] in allowed, (tunable, fields[tunable], allowed)
    if "num_aie_columns" in declaration.tunables:
        assert op.num_aie_columns <= dev.columns
    op.check(dev)  # raises if refused
    # The same tunables each time, and pinning them all gives the same operator.
    assert cls(**case.fields).resolved(dev) == op
    given = {tunable: fields[tunable] for tunable in declaration.tunables}
    pinned = cls(**case.fields, **given).resolved(dev)
    assert pinned.fields() == fields
    assert pinned.pinned == frozenset(declaration.tunables)


# -- check refuses what the declaration and the device rule out ----------------------------


@dataclasses.dataclass(frozen=True)
class Refused:
    """A shape ``check`` refuses, and how its message reads.

    ``message`` is the whole message, ``starts`` its beginning (either without
    the ``"<Operator> on <device>: "`` prefix every refusal starts with, which
    is then added), ``words`` a part of it. ``host`` is False where the rule
    is about the shape alone, so device fit off does not lift it.
    """

    op: Operator
    devices: tuple[Device, ...]
    message: str | None = None
    starts: str | None = None
    words: str | None = None
    host: bool = True
    id: str | None = None


def refused(
    op: Operator, devices: Device | tuple[Device, ...], **expect: Any
) -> Refused:
    if isinstance(devices, Device):
        devices = (devices,)
    return Refused(op, devices, **expect)


REFUSED = [
    # activations
    refused(
        SiLU(size=3072, tile_size=1024, num_aie_columns=2),
        NPU1,
        message="SiLU on npu1: size=3072 is not a multiple of tile_size * num_aie_columns = 2048",
        id="silu-size-not-a-multiple",
    ),
    refused(
        SiLUMul(size=16384, tile_size=4096, num_aie_columns=1),
        NPU2,
        message="SiLUMul on npu2: tile_size=4096 needs 49152 bytes of double-buffered tiles, over half a core's 65536 bytes",
        id="silumul-tile-too-big",
    ),
    refused(
        Tanh(size=16384, tile_size=8192, num_aie_columns=1),
        NPU2,
        message="Tanh on npu2: tile_size=8192 needs 65536 bytes of double-buffered tiles, over half a core's 65536 bytes",
        id="tanh-tile-too-big",
    ),
    refused(
        Sigmoid(size=40),
        NPU2,
        message="Sigmoid on npu2: size=40 is not a positive multiple of 16 (a tile is a multiple of 16 elements)",
        id="sigmoid-size-not-16s",
        host=False,
    ),
    refused(
        LeakyReLU(size=8, alpha=0.01),
        NPU1,
        message="LeakyReLU on npu1: size=8 is not a positive multiple of 16 (a tile is a multiple of 16 elements)",
        id="leaky-size-not-16s",
        host=False,
    ),
    # binary
    refused(
        ElementwiseAdd(size=2048, tile_size=1024, num_aie_columns=4),
        NPU2,
        message="ElementwiseAdd on npu2: size=2048 is not a multiple of tile_size * num_aie_columns = 4096",
        id="add-size-not-a-multiple",
    ),
    refused(
        ElementwiseAdd(size=4096, tile_size=4096, num_aie_columns=1),
        NPU1,
        message="ElementwiseAdd on npu1: tile_size=4096 needs 49152 bytes of double-buffered tiles, over half a core's 65536 bytes",
        id="add-tile-too-big",
    ),
    refused(
        ElementwiseMul(size=1000),
        NPU2,
        message="ElementwiseMul on npu2: size=1000 is not a positive multiple of 16 (a tile is a multiple of 16 elements)",
        id="mul-size-not-16s",
        host=False,
    ),
    # elementwise
    refused(
        AXPY(size=2048, tile_size=1024, num_aie_columns=8, scalar_factor=1.0),
        NPU2,
        message="AXPY on npu2: size=2048 is not a multiple of tile_size * num_aie_columns = 8192",
        id="axpy-size-not-a-multiple",
    ),
    refused(
        ReLU(size=3072, tile_size=1024, num_aie_columns=2),
        NPU1,
        message="ReLU on npu1: size=3072 is not a multiple of tile_size * num_aie_columns = 2048",
        id="relu-size-not-a-multiple",
    ),
    refused(
        AXPY(size=16384, tile_size=4096, num_aie_columns=1, scalar_factor=1.0),
        NPU2,
        message="AXPY on npu2: tile_size=4096 needs 49152 bytes of double-buffered tiles, over half a core's 65536 bytes",
        id="axpy-tile-too-big",
    ),
    refused(
        ReLU(size=16384, tile_size=8192, num_aie_columns=2),
        NPU1,
        message="ReLU on npu1: tile_size=8192 needs 65536 bytes of double-buffered tiles, over half a core's 65536 bytes",
        id="relu-tile-too-big",
    ),
    # norms
    refused(
        RMSNorm(rows=4, cols=1000),
        NPU1,
        starts="RMSNorm on npu1: cols=1000 is not a positive multiple of the vector width 16",
        id="rms-cols-not-a-vector-multiple",
    ),
    refused(
        LayerNorm(rows=4, cols=8),
        NPU2,
        starts="LayerNorm on npu2: cols=8 is not a positive multiple of the vector width 16",
        id="layer-cols-under-a-vector",
    ),
    refused(
        RMSNorm(rows=1, cols=8192),
        NPU2,
        starts="RMSNorm on npu2: core memory: rows_per_tile=1 rows of cols=8192 need 65536 bytes (input and output tiles, double-buffered), over the 64512 bytes of a core's 65536 left after its 1024-byte stack; a row this long does not fit one core",
        id="rms-row-too-long",
    ),
    refused(
        RMSNorm(rows=1, cols=6464, weighted=True),
        NPU1,
        starts="RMSNorm on npu1: core memory: rows_per_tile=1 rows of cols=6464 need 64640 bytes (input and output tiles, double-buffered, 12928 resident parameter bytes)",
        id="rms-weighted-row-too-long",
    ),
    refused(
        LayerNorm(rows=1, cols=5392, weighted=True, biased=True),
        NPU2,
        starts="LayerNorm on npu2: core memory: rows_per_tile=1 rows of cols=5392 need 64704 bytes",
        id="layer-affine-row-too-long",
    ),
    refused(
        LayerNorm(rows=8, cols=2048, rows_per_tile=4, num_aie_columns=1),
        NPU2,
        starts="LayerNorm on npu2: core memory: rows_per_tile=4 rows of cols=2048 need 65536 bytes (input and output tiles, double-buffered), over the 64512 bytes of a core's 65536 left after its 1024-byte stack; use fewer rows_per_tile",
        id="layer-tile-too-big",
    ),
    refused(
        RMSNorm(rows=12, cols=64, rows_per_tile=2, num_aie_columns=8),
        NPU2,
        starts="RMSNorm on npu2: rows=12 is not a multiple of rows_per_tile * num_aie_columns = 16",
        id="rms-rows-uneven-over-columns",
    ),
    # softmax
    refused(
        Softmax(rows=1, cols=100),
        NPU2,
        starts="Softmax on npu2: cols=100 is not a positive multiple of the vector width 16",
        id="cols-not-a-vector-multiple",
    ),
    refused(
        Softmax(rows=1, cols=5392),
        NPU1,
        starts="Softmax on npu1: core memory: rows_per_tile=1 rows of cols=5392 need 64704 bytes (input and output tiles, double-buffered, 21568 bytes of fp32 scratch), over the 64512 bytes of a core's 65536 left after its 1024-byte stack; a row this long does not fit one core",
        id="row-too-long",
    ),
    refused(
        Softmax(rows=8, cols=1024, rows_per_tile=8, num_aie_columns=1),
        NPU2,
        starts="Softmax on npu2: core memory: rows_per_tile=8 rows of cols=1024 need 69632",
        id="tile-too-big",
    ),
    refused(
        Softmax(rows=6, cols=64, num_aie_columns=4),
        NPU2,
        starts="Softmax on npu2: rows=6 is not a multiple of rows_per_tile * num_aie_columns = 4",
        id="rows-uneven",
    ),
    refused(
        Softmax(rows=2, cols=64, length=-1),
        NPU2,
        starts="Softmax on npu2: length=-1 is negative; give 0 to 64 (or None for the whole row)",
        id="negative-length",
    ),
    # rope
    refused(
        RoPE(rows=1, heads=8, head_dim=48),
        NPU2,
        starts="RoPE on npu2: head_dim=48 is not a positive multiple of 32 (even, with each half of a table row whole 16-lane vectors)",
        id="head-dim-not-two-vectors",
    ),
    refused(
        RoPE(rows=1, heads=8, head_dim=31, method="interleaved"),
        NPU1,
        starts="RoPE on npu1: head_dim=31 is not a positive multiple of 32",
        id="head-dim-odd",
    ),
    refused(
        RoPE(rows=1, heads=6, head_dim=64, heads_per_tile=2, num_aie_columns=2),
        NPU2,
        starts="RoPE on npu2: rows * heads / heads_per_tile = 3 tiles do not spread evenly over num_aie_columns=2",
        id="tiles-uneven",
    ),
    refused(
        RoPE(rows=1, heads=8, head_dim=2048, heads_per_tile=4),
        NPU2,
        starts="RoPE on npu2: core memory: heads_per_tile=4 head rows of head_dim=2048 need 73728 bytes (x and out tiles and a table row, double-buffered), over the 64512 bytes of a core's 65536 left after its 1024-byte stack",
        id="tile-too-big",
    ),
    refused(
        RoPE(rows=1, heads=1, head_dim=5408),
        NPU1,
        starts="RoPE on npu1: core memory: heads_per_tile=1 head rows of head_dim=5408 need 64896 bytes",
        id="head-row-too-long",
    ),
    # dequant
    refused(
        Dequant(N=80),
        NPU2,
        message="Dequant on npu2: N=80 is not a positive multiple of the group 32 (one scale per 32 values)",
        host=False,
    ),
    refused(
        Dequant(N=96),
        NPU1,
        message="Dequant on npu1: N=96 is not a multiple of 64: its 3 bf16 scales are not whole 4-byte DMA words",
        host=False,
    ),
    refused(
        Dequant(N=4096, tile_size=1024, num_aie_columns=8),
        NPU2,
        message="Dequant on npu2: N=4096 is not a multiple of tile_size * num_aie_columns = 8192",
    ),
    refused(
        Dequant(N=16384, tile_size=16384, num_aie_columns=1),
        NPU2,
        message="Dequant on npu2: tile_size=16384 needs 84992 bytes (packed, scales and result, double-buffered, and a stack), over a core's 65536 bytes",
    ),
    # attention
    refused(
        DecodeAttention(heads=12, kv_heads=8, head_dim=64, max_len=1024, length=1),
        NPU2,
        words="heads=12 is not a multiple of kv_heads=8",
    ),
    refused(
        DecodeAttention(heads=8, kv_heads=16, head_dim=64, max_len=1024, length=1),
        NPU1,
        words="heads=8 is not a multiple of kv_heads=16",
    ),
    refused(
        DecodeAttention(heads=8, kv_heads=2, head_dim=72, max_len=1024, length=1),
        NPU2,
        words="head_dim=72 is not a multiple of the vector width 16",
    ),
    refused(
        DecodeAttention(heads=8, kv_heads=2, head_dim=64, max_len=1000, length=1),
        NPU2,
        words="max_len=1000 is not a positive multiple of 16",
        host=False,
    ),
    refused(
        DecodeAttention(heads=8, kv_heads=2, head_dim=64, max_len=1024, length=1025),
        NPU1,
        words="length=1025 is outside [1, max_len=1024]",
    ),
    refused(
        DecodeAttention(heads=8, kv_heads=2, head_dim=64, max_len=1024, length=0),
        NPU1,
        words="length=0 is outside [1, max_len=1024]",
    ),
    refused(
        DecodeAttention(
            heads=8, kv_heads=2, head_dim=64, max_len=1024, num_aie_columns=4, length=1
        ),
        NPU2,
        words="kv_heads=2 is not a multiple of num_aie_columns=4",
    ),
    # More than 255 chunks (8192 positions at kv_tile=16, or 8B's shape at
    # 8192) is no refusal since issue 34: the design streams any number in
    # groups of descriptors with waits (test_attention's SHAPES take 32k and
    # 128k).
    refused(
        DecodeAttention(
            heads=8, kv_heads=2, head_dim=64, max_len=1024, kv_tile=256, length=1
        ),
        NPU1,
        words="kv_tile=256 with head_dim=64 and 4 query rows needs",
    ),
    refused(
        DecodeAttention(heads=8, kv_heads=2, head_dim=1024, max_len=1024, length=1),
        NPU2,
        words="head_dim=1024 with 4 query rows needs 181536 bytes of core memory even at kv_tile=16",
    ),
    refused(
        CausalAttention(
            heads=32,
            kv_heads=8,
            head_dim=64,
            max_len=2048,
            kv_tile=64,
            rows=64,
            q_tile=64,
        ),
        NPU2,
        words="and 256 query rows needs",
    ),
    refused(
        CausalAttention(
            heads=8, kv_heads=2, head_dim=64, max_len=128, rows=64, start=100
        ),
        NPU1,
        words="start=100 + rows=64 = 164 is past max_len=128",
    ),
    # matmul
    refused(
        GEMV(M=64, K=3000),
        NPU1,
        words="GEMV on npu1: K=3000 is not a multiple of a vector width",
        host=False,
    ),
    refused(
        GEMV(M=64, K=16336),
        NPU2,
        words="GEMV on npu2: no tile_k fits a core for K=16336: it must divide K, be a multiple of the vector width (16) of at least twice it, and be at most 8063 to fit 64512 bytes; pad K",
        host=False,
    ),
    refused(
        GEMV(M=64, K=3000, vector_width=64),
        NPU1,
        words="GEMV on npu1: K=3000 is not a multiple of the vector width 64",
        host=False,
    ),
    refused(
        GEMV(M=64, K=2080, vector_width=64),
        NPU2,
        words="K=2080 is not a multiple of the vector width 64",
        host=False,
    ),
    refused(
        GEMV(M=64, K=4096, tile_k=64, vector_width=64),
        NPU2,
        words="tile_k=64 is not a multiple of the vector width 64 of at least 128",
    ),
    refused(
        GEMV(M=100, K=256, num_aie_columns=8, tile_m=1),
        NPU2,
        words="M=100 is not a multiple of tile_m * num_aie_columns = 8",
    ),
    refused(
        GEMV(M=64, K=8192, tile_m=4, tile_k=8192),
        NPU2,
        words="tile_m=4, tile_k=8192 (w and x in bf16, the output in fp32) need 163872 bytes of double-buffered tiles, over the core's 64512 bytes",
    ),
    refused(
        GEMV(M=64, K=256, precision="medium", effective_precision="medium"),
        NPU1,
        words="GEMV on npu1: effective_precision='medium' needs bfp16 multiplies",
    ),
    refused(
        GEMV(M=64, K=256, precision="high", effective_precision="medium"),
        NPU2,
        words="effective_precision='medium' rounds more than precision='high' allows",
    ),
    refused(
        GEMM(M=20, K=64, N=64),
        NPU2,
        words="GEMM on npu2: M=20 is not a multiple of 8",
        host=False,
    ),
    refused(
        GEMM(M=16, K=20, N=64),
        NPU1,
        words="GEMM on npu1: K=20 is not a multiple of 8",
        host=False,
    ),
    refused(
        GEMM(M=16, K=64, N=24),
        NPU2,
        words="N=24 is not a multiple of 16 (twice the mmul's n=8",
        host=False,
    ),
    refused(
        GEMM(M=64, K=64, N=64, precision="medium", tile_m=8),
        NPU2,
        words="tile_m=8 is not a multiple of 16 (twice the mmul's m=8; aie2p bf16 mmul (8, 8, 8) at medium)",
    ),
    refused(
        GEMM(M=64, K=64, N=64, num_aie_columns=1, tile_m=64, tile_k=64, tile_n=64),
        NPU2,
        words="tile_m=64, tile_k=64, tile_n=64, out_depth=2 (a and b in bf16, an fp32 accumulator, 2 bf16 output tiles; out_depth=1 holds one) need 65536 bytes of double-buffered tiles, over the core's 64512 bytes (64 KiB less a 1 KiB stack)",
    ),
    refused(
        GEMM(M=64, K=64, N=64, num_aie_columns=4, tile_n=32),
        NPU2,
        words="N=64 is not a multiple of tile_n * num_aie_columns = 128",
    ),
    refused(
        GEMM(M=16, K=2097152, N=16, num_aie_columns=1, tile_m=16, tile_k=64, tile_n=16),
        NPU2,
        words="a row of a is 1048576 4-byte words, over the shim DMA's 20-bit stride",
    ),
    # movers
    refused(
        Transpose(rows=12, cols=16),
        NPU2,
        message="Transpose on npu2: rows=12 is not a multiple of 8 (the kernel swaps 8x8 blocks with vector shuffles)",
        host=False,
    ),
    refused(
        Transpose(rows=16, cols=4),
        NPU1,
        message="Transpose on npu1: cols=4 is not a multiple of 8 (the kernel swaps 8x8 blocks with vector shuffles)",
        host=False,
    ),
    refused(
        Transpose(rows=128, cols=128, tile_rows=128, tile_cols=128),
        NPU2,
        message="Transpose on npu2: a 128x128 block needs 132096 bytes (in and out, double-buffered, and a stack), over a core's 65536 bytes",
    ),
    refused(
        Transpose(rows=8, cols=2097216, tile_rows=8, tile_cols=64),
        NPU2,
        message="Transpose on npu2: a block's read (sizes [8, 64], row stride 2097216 elements) is not one shim descriptor",
    ),
    refused(
        Repeat(rows=8, row_shape=(64,), repeat=65),
        DEVICES,
        message="repeat=65 exceeds the shim iteration count 64 (x is re-read once per repeat)",
    ),
    refused(
        Repeat(rows=8, row_shape=(64,), repeat=0),
        DEVICES,
        message="repeat=0 is not positive",
    ),
    refused(
        Repeat(rows=8, repeat=2),
        DEVICES,
        message="a row of 1 elements (2 bytes) is not a whole number of 4-byte DMA words",
    ),
    refused(
        Repeat(rows=1024, row_shape=(2,), repeat=2),
        DEVICES,
        message="rows=1024 exceeds the DMA size field's 1023 (the write walks rows in one dimension)",
    ),
    refused(
        Repeat(rows=2, row_shape=(2062,), repeat=2),
        DEVICES,
        message="a row of 4124 bytes does not split into two DMA dimensions of at most 1023 words",
    ),
    refused(
        Repeat(rows=2, row_shape=(2000, 1000), repeat=2),
        DEVICES,
        message="the write walk (sizes [2, 2, 1000, 2000], strides [2000000, 4000000, 2000, 1] elements) exceeds a shim descriptor's 20-bit strides",
    ),
    # quantized
    refused(
        QGEMV(M=4, K=96, bits=4, group=32),
        DEVICES,
        message="K=96 is not a positive multiple of 64 (whole groups of 32 in whole 4-byte DMA words); pad K",
        host=False,
    ),
    refused(
        QGEMV(M=64, K=8192, bits=8, group=32, tile_m=8, tile_k=4096, num_aie_columns=1),
        NPU1,
        words="over a core's 65536",
    ),
    refused(
        QGEMV(M=8, K=64, bits=4, group=32, tile_m=4, num_aie_columns=4),
        NPU2,
        message="M=8 is not a multiple of tile_m * num_aie_columns = 16",
    ),
    refused(
        QGEMM(M=12, K=64, N=16, bits=4, group=32),
        DEVICES,
        words="M=12 is not a positive multiple of 8",
    ),
    refused(
        QGEMM(M=16, K=64, N=24, bits=8, group=32),
        NPU2,
        message="N=24 is not a positive multiple of 16 (twice the aie2p bf16 mmul's n; the core multiplies the dequantized tile as GEMM does); pad N to a multiple of 16",
    ),
    refused(
        QGEMM(
            M=64,
            K=2048,
            N=2048,
            bits=8,
            group=32,
            tile_m=32,
            tile_k=256,
            tile_n=32,
            num_aie_columns=4,
        ),
        NPU1,
        words="over a core's 65536",
    ),
    refused(
        DequantRows(rows=2, K=32, bits=4, group=32),
        DEVICES,
        message="K=32 is not a positive multiple of 64 (whole groups of 32 in whole 4-byte DMA words); pad K",
        host=False,
    ),
    # sample
    refused(
        Sample(vocab=50257),
        DEVICES,
        starts="vocab=50257 logits are 100514 bytes, not whole chunks of 4-byte DMA words; pad the vocabulary to an even size",
        host=False,
    ),
    refused(
        Sample(vocab=1000, temperature=1.0, top_k=300),
        DEVICES,
        starts="top_k=300 is outside [1, 256] (the kernel's running list holds at most 256, and vocab=1000)",
    ),
    refused(
        Sample(vocab=100, temperature=1.0, top_k=200),
        DEVICES,
        starts="top_k=200 is outside [1, 100] (the kernel's running list holds at most 256, and vocab=100)",
    ),
    refused(
        Sample(vocab=100, temperature=1.0, top_k=0),
        DEVICES,
        starts="top_k=0 is outside [1, 100]",
    ),
    refused(
        Sample(vocab=100, temperature=-1.0),
        DEVICES,
        starts="temperature=-1.0 is not a finite number >= 0 (0 is greedy)",
    ),
    refused(
        Sample(vocab=100, temperature=math.inf),
        DEVICES,
        starts="temperature=inf is not a finite number >= 0 (0 is greedy)",
    ),
]


def _prefix(op: Operator, dev: Device) -> str:
    return f"{type(op).__name__} on {dev}: "


def each_refusal(cases: list[Refused]) -> list[Any]:
    return [
        pytest.param(
            case,
            dev,
            id=f"{type(case.op).__name__}-{case.id or i}-{dev}",
        )
        for i, case in enumerate(cases)
        for dev in case.devices
    ]


@pytest.mark.parametrize("case, dev", each_refusal(REFUSED))
def test_check_refuses_what_the_declaration_rules_out(
    case: Refused, dev: Device
) -> None:
    with pytest.raises(RefusedShapeError) as info:
        case.op.resolved(dev)
    assert isinstance(info.value, ValueError)
    message, prefix = str(info.value), _prefix(case.op, dev)
    assert message.startswith(prefix)
    if case.message is not None:
        whole = case.message
        assert message == (whole if whole.startswith(prefix) else prefix + whole)
    if case.starts is not None:
        start = case.starts
        assert message.startswith(start if start.startswith(prefix) else prefix + start)
    if case.words is not None:
        assert case.words in message


@pytest.mark.parametrize(
    "case, dev", each_refusal([case for case in REFUSED if case.host])
)
def test_a_refused_shape_still_runs_on_the_host(case: Refused, dev: Device) -> None:
    token = context.device_fit.set(False)
    try:
        op = case.op.resolved(dev)
    finally:
        context.device_fit.reset(token)
    assert op.open_tunables() == ()


#: The operators with a column count: each refuses more columns than npu1 has.
COLUMNED = sorted(
    name
    for name, cls in CATALOG.items()
    if "num_aie_columns" in cls.declaration.tunables
)


def test_every_operator_refuses_something() -> None:
    # Copy's refusals are of the views it is given (test_movers).
    refusing = {type(case.op).__name__ for case in REFUSED} | set(COLUMNED)
    assert refusing == set(CATALOG) - {"Copy"}


@pytest.mark.parametrize("name", COLUMNED)
def test_more_columns_than_the_device_has_are_refused(name: str) -> None:
    op = CATALOG[name](**EXAMPLES[name][0].fields, num_aie_columns=8)
    with pytest.raises(RefusedShapeError) as info:
        op.resolved(NPU1)
    assert isinstance(info.value, ValueError)
    assert str(info.value) == (
        f"{name} on npu1: num_aie_columns=8 exceeds the device's 4 columns"
    )
    assert op.resolved(NPU2).num_aie_columns == 8
    token = context.device_fit.set(False)
    try:
        assert op.resolved(NPU1).open_tunables() == ()
    finally:
        context.device_fit.reset(token)


# -- cost ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dev", DEVICES, ids=str)
@pytest.mark.parametrize("name, case", each_example())
def test_cost_is_what_the_shape_fixes(name: str, case: Example, dev: Device) -> None:
    op = CATALOG[name](**case.fields)
    cost = op.cost(dev)
    assert isinstance(cost, Cost)
    # Open tunables are costed at resolve()'s choice.
    assert cost == op.resolved(dev).cost(dev)
    if name in DMA_ONLY:
        assert (cost.macs, cost.cores) == (0, 0)
    else:
        assert cost.macs > 0 and cost.cores >= 1
    if name in OTHER_TRAFFIC:
        assert cost.bytes > 0
    else:
        assert cost.bytes == operand_bytes(op)
    if case.by_hand is not None:
        assert (cost.macs, cost.bytes) == case.by_hand


@pytest.mark.parametrize("dev", DEVICES, ids=str)
@pytest.mark.parametrize("name", sorted(CATALOG))
def test_cost_grows_with_the_shape(name: str, dev: Device) -> None:
    fields = EXAMPLES[name][0].fields
    cost = CATALOG[name](**fields).cost(dev)
    more = CATALOG[name](**GROW[name](fields)).cost(dev)
    assert more.bytes > cost.bytes
    if name in DMA_ONLY:
        assert more.macs == 0
    else:
        assert more.macs > cost.macs


# -- reference -----------------------------------------------------------------------------


@pytest.mark.parametrize("name, case", each_example())
def test_reference_gives_the_declared_outputs(name: str, case: Example) -> None:
    op = CATALOG[name](**case.fields).resolved(NPU2)
    arrays = operands(op)
    result = op.reference(*arrays)
    outputs = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    assert len(outputs) == len(type(op).declaration.outputs)
    assert [np.shape(out) for out in outputs] == op.output_shapes()
    dtypes = op.output_dtypes([a.dtype for a in arrays])
    assert [np.asarray(out).dtype for out in outputs] == [np.dtype(d) for d in dtypes]
