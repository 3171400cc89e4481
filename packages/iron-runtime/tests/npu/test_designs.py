"""Designs: golden text, FileCheck patterns, legality and placement.

Golden files under ``golden/`` are the reviewed text of AXPY and ReLU at size
2048 on npu1 and npu2; a change to a design shows as a diff here. Regenerate
them with ``IRON_UPDATE_GOLDEN=1 pytest packages/iron-runtime/tests/npu`` and
review the diff. The FileCheck tests use the ``filecheck`` package (a Python
FileCheck clone) when it is installed.
"""

from __future__ import annotations

import importlib

import pytest

from iron.core.dma import linear_walk
from iron.core.operator import RefusedShapeError
from iron.operators import (
    AXPY,
    GELU,
    Clamp,
    ElementwiseAdd,
    ElementwiseMul,
    LeakyReLU,
    ReLU,
    Sigmoid,
    SiLU,
    SiLUMul,
    Tanh,
)
from iron.runtime.image import Placement
from iron.runtime.npu import MLIR_AIE_RELEASE, LegalityError, designs
from iron.runtime.npu.designs import build_design, design, elementwise
from iron.runtime.npu.kernels import contract

from .support import check_golden, filecheck

CASES = {
    "axpy_2048": AXPY(size=2048, scalar_factor=2.0),
    "relu_2048": ReLU(size=2048),
}


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case, dev):
    check_golden(case, dev, design(CASES[case], dev))


CHECK_AXPY_NPU1 = """\
// CHECK: mlir-aie v1.4.1
// CHECK-LABEL: aie.device(npu1) @main {
// CHECK: func.func private @axpy_bf16(memref<512xbf16>, memref<512xbf16>, memref<512xbf16>, i32, i32) attributes {link_with = "axpy_bf16.o"}
// CHECK-DAG: %[[SHIM0:.*]] = aie.tile(0, 0)
// CHECK-DAG: %[[SHIM3:.*]] = aie.tile(3, 0)
// CHECK-DAG: %[[CORE0:.*]] = aie.tile(0, 2)
// CHECK-DAG: %[[CORE3:.*]] = aie.tile(3, 2)
// CHECK-NOT: aie.tile(4,
// CHECK: aie.objectfifo @x_0(%[[SHIM0]], {%[[CORE0]]}, 2 : i32) : !aie.objectfifo<memref<512xbf16>>
// CHECK: aie.objectfifo @out_0(%[[CORE0]], {%[[SHIM0]]}, 2 : i32)
// CHECK: aie.objectfifo @out_3(%[[CORE3]], {%[[SHIM3]]}, 2 : i32)
// CHECK: aie.core(%[[CORE0]]) {
// CHECK: %[[N:.*]] = arith.constant 512 : i32
// CHECK: %[[A:.*]] = arith.constant 16384 : i32
// CHECK: scf.for
// CHECK: %[[X:.*]] = aie.objectfifo.subview.access
// CHECK: aie.objectfifo.acquire @out_0(Produce, 1)
// CHECK: func.call @axpy_bf16(%[[X]], %{{.*}}, %{{.*}}, %[[N]], %[[A]])
// CHECK: aie.objectfifo.release @x_0(Consume, 1)
// CHECK: aie.objectfifo.release @out_0(Produce, 1)
// CHECK: aie.end
// CHECK: aie.runtime_sequence @sequence(%[[XB:.*]]: memref<2048xbf16>, %[[YB:.*]]: memref<2048xbf16>, %[[OB:.*]]: memref<2048xbf16>) {
// CHECK: aiex.npu.dma_memcpy_nd(%[[OB]][0, 0, 0, 0][1, 1, 1, 512][0, 0, 0, 1]) {id = 0 : i64, issue_token = true, metadata = @out_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[XB]][0, 0, 0, 0][1, 1, 1, 512][0, 0, 0, 1]) {id = 1 : i64, metadata = @x_0}
// CHECK: aiex.npu.dma_memcpy_nd(%[[YB]][0, 0, 0, 1536][1, 1, 1, 512][0, 0, 0, 1]) {id = 2 : i64, metadata = @y_3}
// CHECK: aiex.npu.dma_wait {symbol = @out_0}
// CHECK: aiex.npu.dma_wait {symbol = @out_3}
"""

CHECK_RELU_NPU2 = """\
// CHECK-LABEL: aie.device(npu2) @main {
// CHECK: func.func private @relu_bf16(memref<256xbf16>, memref<256xbf16>, i32) attributes {link_with = "relu_bf16.o"}
// CHECK: aie.tile(7, 0)
// CHECK: aie.tile(7, 2)
// CHECK-NOT: aie.objectfifo @y_
// CHECK: aie.objectfifo @x_7(
// CHECK: aie.core(
// CHECK-NOT: i32 = arith.constant 16384
// CHECK: func.call @relu_bf16(
// CHECK: aie.runtime_sequence @sequence(%{{.*}}: memref<2048xbf16>, %{{.*}}: memref<2048xbf16>)
// CHECK: dma_memcpy_nd(%{{.*}}[0, 0, 0, 1792][1, 1, 1, 256][0, 0, 0, 1]) {id = 1 : i64, metadata = @x_7}
// CHECK: aiex.npu.dma_wait {symbol = @out_7}
"""


def test_filecheck_axpy_npu1(tmp_path):
    filecheck(tmp_path, CHECK_AXPY_NPU1, design(CASES["axpy_2048"], "npu1"))


def test_filecheck_relu_npu2(tmp_path):
    filecheck(tmp_path, CHECK_RELU_NPU2, design(CASES["relu_2048"], "npu2"))


def test_filecheck_catches_a_changed_design(tmp_path):
    text = design(CASES["axpy_2048"], "npu1").replace("2 : i32)", "3 : i32)")
    with pytest.raises(AssertionError):
        filecheck(tmp_path, CHECK_AXPY_NPU1, text)


FAMILY = [
    AXPY(size=4096, scalar_factor=-0.5),
    ReLU(size=4096),
    ElementwiseAdd(size=4096),
    ElementwiseMul(size=4096),
    SiLU(size=4096),
    GELU(size=4096),
    GELU(size=4096, form="erf"),
    Sigmoid(size=4096),
    Tanh(size=4096),
    LeakyReLU(size=4096, alpha=0.01),
    Clamp(size=4096, low=-6.0, high=6.0),
    SiLUMul(size=4096),
]


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
@pytest.mark.parametrize("op", FAMILY, ids=lambda op: type(op).__name__)
def test_every_family_operator_designs_legally(op, dev):
    d = build_design(op, dev)
    assert d.text.startswith(f"// IRON design: {type(op).__name__}(")
    assert f"mlir-aie {MLIR_AIE_RELEASE}" in d.text
    (symbol,) = d.kernels
    c = contract(symbol)
    assert c.operator.split()[0] == type(op).__name__
    decl = next(line for line in d.text.splitlines() if "func.func private" in line)
    assert decl.count("memref<") == c.buffer_count
    assert decl.count("i32") == 1 + c.scalar_count
    ports = [i.name for i in type(op).declaration.inputs] + ["out"]
    assert d.args == tuple(ports)
    assert d.text.count("aie.core(") == op.resolved(dev).num_aie_columns


def test_scalars_pass_as_bf16_bits():
    assert elementwise.kernel_of(AXPY(size=16, scalar_factor=2.0)) == (
        "axpy_bf16",
        (0x4000,),
    )
    # 0.1 rounds to bf16 0x3DCD before the kernel sees it.
    assert elementwise.kernel_of(LeakyReLU(size=16, alpha=0.1))[1] == (0x3DCD,)
    assert elementwise.kernel_of(Clamp(size=16, low=-1, high=1))[1] == (0xBF80, 0x3F80)
    assert elementwise.kernel_of(GELU(size=16, form="erf"))[0] == "gelu_erf_bf16"


def test_pinned_tunables_are_honoured():
    d = build_design(ReLU(size=4096, tile_size=256, num_aie_columns=2), "npu2")
    assert d.text.count("aie.core(") == 2
    assert "arith.constant 8 : index" in d.text  # 2048 per column / 256 per tile


def test_arena_placement_reads_at_the_planned_offsets():
    placement = {
        "x": Placement("arena", 4096, 4096),
        "y": Placement("arena", 12288, 4096),
        "out": Placement("output", 0, 4096),
    }
    d = build_design(
        AXPY(size=2048, scalar_factor=1.0), "npu1", placement, arena_bytes=65536
    )
    assert d.args == ("arena", "out") and d.arg_bytes == (65536, 4096)
    assert (
        "aie.runtime_sequence @sequence(%arena: memref<32768xbf16>, %out_buf: memref<2048xbf16>)"
        in d.text
    )
    # x at byte 4096 = element 2048; column 1 starts 512 further.
    assert "%arena[0, 0, 0, 2560][1, 1, 1, 512]" in d.text
    assert (
        "%arena[0, 0, 0, 6144][1, 1, 1, 512][0, 0, 0, 1]) {id = 2 : i64, metadata = @y_0}"
        in d.text
    )


def test_a_misaligned_arena_offset_is_refused_by_legality():
    placement = {"x": Placement("arena", 2, 4096)}
    with pytest.raises(LegalityError) as info:
        design(ReLU(size=2048), "npu1", placement)
    text = str(info.value)
    assert (
        "ReLU(size=2048" in text and "shim tile (0, 0)" in text and "alignment" in text
    )


def test_bad_placements_are_named():
    with pytest.raises(ValueError, match="port x is placed in 16 bytes"):
        design(ReLU(size=2048), "npu1", {"x": Placement("arena", 0, 16)})
    with pytest.raises(ValueError, match=r"names \['z'\], not ports of ReLU"):
        design(ReLU(size=2048), "npu1", {"z": Placement("arena", 0, 4096)})


def test_an_operator_outside_the_catalog_says_so():
    class Mine:
        pass

    with pytest.raises(NotImplementedError, match="Mine is not a catalog operator"):
        design(Mine(), "npu2")


#: One small instance of every catalog operator, by name.
_EXAMPLES = {
    "ElementwiseAdd": {"size": 2048},
    "ElementwiseMul": {"size": 2048},
    "AXPY": {"size": 2048, "scalar_factor": 1.0},
    "ReLU": {"size": 2048},
    "SiLU": {"size": 2048},
    "GELU": {"size": 2048},
    "Sigmoid": {"size": 2048},
    "Tanh": {"size": 2048},
    "LeakyReLU": {"size": 2048, "alpha": 0.01},
    "Clamp": {"size": 2048, "low": -1.0, "high": 1.0},
    "SiLUMul": {"size": 2048},
    "RMSNorm": {"rows": 8, "cols": 256},
    "LayerNorm": {"rows": 8, "cols": 256},
    "Softmax": {"rows": 8, "cols": 256},
    "RoPE": {"rows": 8, "heads": 8, "head_dim": 64},
    "GEMV": {"M": 256, "K": 256},
    "GEMM": {"M": 64, "K": 256, "N": 256},
    "DecodeAttention": {
        "heads": 8,
        "kv_heads": 2,
        "head_dim": 64,
        "max_len": 256,
        "length": 100,
    },
    "CausalAttention": {
        "heads": 8,
        "kv_heads": 2,
        "head_dim": 64,
        "max_len": 256,
        "rows": 16,
    },
    "Copy": {"shape": (64, 64)},
    "Transpose": {"rows": 64, "cols": 64},
    "Repeat": {"rows": 8, "repeat": 4, "row_shape": (64,)},
    "Dequant": {"N": 4096},
    "QGEMV": {"M": 256, "K": 256, "bits": 4, "group": 32},
    "QGEMM": {"M": 64, "K": 256, "N": 256, "bits": 4, "group": 32},
    "DequantRows": {"rows": 8, "K": 256, "bits": 8, "group": 16},
    "Sample": {"vocab": 4096},
}


def _example(cls: type) -> object:
    return cls(**_EXAMPLES[cls.__name__])


def _catalog() -> list[type]:
    from iron.operators import CATALOG

    return [CATALOG[name] for name in sorted(CATALOG)]


#: The operators whose designs take their FIFOs' depth from ``fifo_depth``
#: (the data movers keep their own).
_FIFO_FAMILIES = [cls for cls in _catalog() if hasattr(cls, "fifo_depth")]


def test_every_catalog_operator_has_a_registered_design():
    from iron.operators import CATALOG

    assert set(designs.registry()) == set(CATALOG.values())


def test_the_registry_holds_what_each_family_claims_and_nothing_else():
    modules = {
        name: importlib.import_module(f"iron.runtime.npu.designs.{name}")
        for name in designs.FAMILIES
    }
    claimed = {cls: m for m in modules.values() for cls in m.FAMILY}
    assert dict(designs.registry()) == claimed
    for module in modules.values():
        for cls in module.FAMILY:
            assert designs.family_of(_example(cls)) is module
            assert module.handles(_example(cls))


def test_a_catalog_operator_without_a_registered_design_is_named(monkeypatch):
    from iron.operators import GEMV

    families = {k: v for k, v in designs.registry().items() if k is not GEMV}
    monkeypatch.setattr(designs, "registry", lambda: families)
    with pytest.raises(
        NotImplementedError, match=r"GEMV is a catalog operator.*FAMILY"
    ):
        design(GEMV(M=128, K=128), "npu2")


def test_two_families_claiming_one_class_is_an_error(monkeypatch):
    from iron.runtime.npu.designs import rows

    monkeypatch.setattr(rows, "FAMILY", (*rows.FAMILY, ReLU))
    designs.registry.cache_clear()
    try:
        with pytest.raises(
            RuntimeError, match="ReLU is claimed by two design families"
        ):
            designs.registry()
    finally:
        monkeypatch.undo()
        designs.registry.cache_clear()


def test_a_subclass_of_a_catalog_operator_finds_its_base_design():
    class MyReLU(ReLU):
        pass

    mine, base = (
        build_design(MyReLU(size=4096), "npu1"),
        build_design(ReLU(size=4096), "npu1"),
    )
    assert mine.kernels == base.kernels == ("relu_bf16",)
    assert mine.text.replace("MyReLU(", "ReLU(") == base.text


def test_the_fifo_depth_an_operator_declares_is_what_check_and_design_use(
    monkeypatch,
):
    # A 4096-element tile of ReLU's x and out: 2 * 2 * 8192 bytes fit half of
    # npu1's 64 KiB core memory at depth 2; at depth 3 they do not.
    op = ReLU(size=4096, tile_size=4096, num_aie_columns=1)
    assert "2 : i32) : !aie.objectfifo" in design(op, "npu1")
    monkeypatch.setattr(ReLU, "fifo_depth", 3)
    with pytest.raises(RefusedShapeError, match="49152 bytes"):
        design(op, "npu1")
    small = ReLU(size=4096, tile_size=1024, num_aie_columns=1)
    text = design(small, "npu1")
    assert "3 : i32) : !aie.objectfifo" in text
    assert "2 : i32) : !aie.objectfifo" not in text


@pytest.mark.parametrize("cls", _FIFO_FAMILIES, ids=lambda cls: cls.__name__)
def test_every_tiled_design_makes_its_fifos_as_deep_as_the_operator_says(
    cls, monkeypatch
):
    op = _example(cls)
    before = design(op, "npu2")
    monkeypatch.setattr(cls, "fifo_depth", 1)
    after = design(op, "npu2")
    assert after != before
    assert after.count(", 1 : i32)") > before.count(", 1 : i32)")


def test_an_elementwise_kernel_is_the_one_the_operator_declares(monkeypatch):
    monkeypatch.setattr(ReLU, "kernel", "silu_bf16")  # same signature, shipped
    d = build_design(ReLU(size=4096), "npu1")
    assert d.kernels == ("silu_bf16",) and "@silu_bf16(" in d.text
    # A kernel that does not ship has no contract to size the core's stack.
    monkeypatch.setattr(ReLU, "kernel", "relu2_bf16")
    with pytest.raises(KeyError, match="no IRON kernel 'relu2_bf16' ships"):
        build_design(ReLU(size=4096), "npu1")
    assert elementwise.kernel_of(LeakyReLU(size=16, alpha=0.5)) == (
        "leaky_relu_bf16",
        (0x3F00,),
    )


def test_linear_walk_splits_long_runs_within_the_fields():
    from iron.core.device import NPU2

    sizes, strides = linear_walk(1 << 20, 2, NPU2)
    assert sizes[3] * 2 // 4 <= 1023 and sizes[1] <= 1023 and sizes[2] <= 1023
    assert sizes[0] * sizes[1] * sizes[2] * sizes[3] == 1 << 20
    assert linear_walk(512, 2, NPU2) == ((1, 1, 1, 512), (0, 0, 0, 1))


def test_a_design_is_deterministic():
    assert design(SiLUMul(size=8192), "npu2") == design(SiLUMul(size=8192), "npu2")
