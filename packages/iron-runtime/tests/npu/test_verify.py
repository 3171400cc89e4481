"""The emitted-text checker (issue 28): every golden passes it, and each rule
catches a seeded violation in a golden's text, with a message naming the op,
the value and the limit."""

from __future__ import annotations

import re

import pytest

from iron.runtime.npu import verify

from .support import GOLDEN, KNOWN_VIOLATIONS

RELU = (GOLDEN / "relu_2048_npu2.mlir").read_text(encoding="utf-8")
GEMM = (GOLDEN / "gemm_16x2048x2048_npu2.mlir").read_text(encoding="utf-8")
X0 = (
    "aiex.npu.dma_memcpy_nd(%x_buf[0, 0, 0, 0][1, 1, 1, 256][0, 0, 0, 1]) "
    "{id = 1 : i64, metadata = @x_0} : memref<2048xbf16>"
)


def _goldens() -> list:
    for path in sorted(GOLDEN.glob("*.mlir")):
        marks = ()
        if path.name in KNOWN_VIOLATIONS:
            marks = pytest.mark.xfail(reason=KNOWN_VIOLATIONS[path.name], strict=True)
        yield pytest.param(path, id=path.stem, marks=marks)


@pytest.mark.parametrize("path", list(_goldens()))
def test_every_golden_passes_the_checker(path):
    dev = "npu2" if path.stem.endswith("npu2") else "npu1"
    verify.verify_text(path.read_text(encoding="utf-8"), dev, subject=path.name)


def _one(text: str, rule: str, *needles: str, dev: str = "npu2", warnings=False):
    """``text`` breaks ``rule`` (and only it); its message holds ``needles``."""
    found = verify.check_text(text, dev, warnings=warnings)
    assert {v.rule for v in found} == {rule}, [str(v) for v in found]
    message = str(found[0])
    for needle in needles:
        assert needle in message, message
    return found


def _replace(text: str, old: str, new: str, count: int = 1) -> str:
    assert old in text, old
    return text.replace(old, new, count)


def test_the_seeds_come_from_passing_goldens():
    assert verify.check_text(RELU, "npu2", warnings=True) == []
    assert verify.check_text(GEMM, "npu2") == []


def test_a_run_operand_typed_unlike_its_sequence_argument():
    main = (
        "  aie.device(npu2) @main {\n"
        "    aie.runtime_sequence @sequence(%x: memref<2048xbf16>, %o: memref<1024xi32>) {\n"
        "      aiex.configure @step0 {\n"
        "        aiex.run @step0_sequence(%x, %o) : "
        "(memref<2048xbf16>, memref<1024xi32>)\n"
        "      }\n    }\n  }\n"
    )
    step = _replace(RELU, "aie.device(npu2) @main", "aie.device(npu2) @step0")
    step = _replace(step, "@sequence(", "@step0_sequence(")
    text = step.rstrip().removesuffix("}") + main + "}\n"
    _one(
        text,
        "run-operand-types",
        "aiex.run @step0_sequence",
        "argument 1 type mismatch: expected memref<2048xbf16> but got memref<1024xi32>",
    )
    fixed = text.replace("memref<1024xi32>", "memref<2048xbf16>")
    assert verify.check_text(fixed, "npu2") == []


def _full_elf(main_body: str, *sequences: str) -> str:
    """RELU as device ``@config0`` holding ``sequences``, and a ``@main``."""
    step = _replace(RELU, "aie.device(npu2) @main", "aie.device(npu2) @config0")
    (line,) = [x for x in step.splitlines() if "runtime_sequence @sequence(" in x]
    start = step.index(line)
    end = step.index("\n    }\n", start) + len("\n    }\n")
    block = step[start:end]
    seqs = "".join(block.replace("@sequence(", f"@{s}(") for s in sequences)
    step = step[:start] + seqs + step[end:]
    main = (
        "  aie.device(npu2) @main {\n"
        "    aie.runtime_sequence @sequence(%x: memref<2048xbf16>, "
        "%o: memref<2048xbf16>) {\n" + main_body + "    }\n  }\n"
    )
    return step.rstrip().removesuffix("}") + main + "}\n"


RUN = "        aiex.run @{}(%x, %o) : (memref<2048xbf16>, memref<2048xbf16>)\n"


def test_steps_sharing_one_device_run_their_own_sequences():
    body = "      aiex.configure @config0 {\n" + RUN.format("step0_sequence")
    body += RUN.format("step1_sequence") + "      }\n"
    assert (
        verify.check_text(_full_elf(body, "step0_sequence", "step1_sequence"), "npu2")
        == []
    )


def test_a_run_of_a_sequence_its_configured_device_lacks():
    """Upstream looks the callee up in the configured device only."""
    body = "      aiex.configure @config0 {\n" + RUN.format("step1_sequence")
    body += "      }\n"
    _one(
        _full_elf(body, "step0_sequence"),
        "run-operand-types",
        "aiex.run @step1_sequence",
        "@config0 has no sequence of that name",
    )


def test_two_sequences_of_one_name_in_one_device():
    body = "      aiex.configure @config0 {\n" + RUN.format("step0_sequence")
    body += "      }\n"
    _one(
        _full_elf(body, "step0_sequence", "step0_sequence"),
        "run-operand-types",
        "aie.runtime_sequence @step0_sequence",
        "a second sequence of that name",
    )


def test_a_transfer_of_2_bytes():
    text = _replace(RELU, X0, X0.replace("[1, 1, 1, 256]", "[1, 1, 1, 1]"))
    _one(text, "transfer-4-bytes", "@x_0", "1 x 2 bytes = 2 bytes", "multiple of 4")


def test_an_offset_not_4_byte_aligned():
    text = _replace(RELU, X0, X0.replace("[0, 0, 0, 0]", "[0, 0, 0, 1]"))
    _one(text, "transfer-4-bytes", "@x_0", "offset 2 bytes")


@pytest.mark.parametrize(
    "sizes, strides, needle",
    [
        ("[1, 1, 1024, 2]", "[0, 0, 2, 1]", "size 1 = 1024 exceeds 1023"),
        ("[1, 1, 2, 2048]", "[0, 0, 2048, 2]", "size 0 = 1024 words exceeds 1023"),
        ("[66, 1, 1, 2]", "[2, 0, 0, 1]", "size 3 (repeat) = 66 exceeds 64"),
        ("[1, 1, 2, 2]", "[0, 0, 2099000, 1]", "stride 1 = 2099000 elements"),
    ],
)
def test_shim_bd_dimensions_past_upstream_limits(sizes, strides, needle):
    op = X0.replace("[1, 1, 1, 256]", sizes).replace("[0, 0, 0, 1]", strides, 1)
    text = _replace(RELU, X0, op).replace("memref<2048xbf16>", "memref<9000000xbf16>")
    _one(text, "shim-bd-dims", "@x_0", needle)


def test_five_pushes_on_one_channel_between_waits():
    more = "\n".join("      " + X0.replace("id = 1", f"id = {k}") for k in range(2, 6))
    text = _replace(RELU, X0, X0 + "\n" + more)
    _one(
        text,
        "task-queue",
        "dma_memcpy_nd #5 on @x_0",
        "5 transfers outstanding",
        "holds 4",
        "PR #3734",
    )
    # four pushes are legal
    four = "\n".join(line for line in text.splitlines() if "id = 5 :" not in line)
    assert verify.check_text(four + "\n", "npu2") == []


def test_a_bd_id_past_16_and_a_reused_one():
    _one(
        _replace(RELU, X0, X0.replace("id = 1", "id = 16")),
        "shim-bd-ids",
        "16",
        "0..15",
    )
    reused = _replace(RELU, X0, X0.replace("id = 1", "id = 0"))
    _one(reused, "shim-bd-ids", "BD id 0", "reused while transfer #0")


def test_a_token_never_awaited():
    text = _replace(RELU, "      aiex.npu.dma_wait {symbol = @out_7}\n", "")
    _one(text, "shim-bd-ids", "@out_7", "never awaited")


def test_a_fifo_dimension_of_513():
    old = "dimensionsToStream [<size = 4, stride = 512>"
    text = _replace(GEMM, old, old.replace("size = 4", "size = 513"))
    _one(text, "fifo-dims", "@a_row0", "size 513 exceeds the upstream limit 512")


def test_fifo_ends_depth_and_producer():
    old = "aie.objectfifo @x_0(%shim_noc_tile_0_0, {%tile_0_2}, 2 : i32)"
    _one(
        _replace(RELU, old, old.replace("2 : i32", "0 : i32")),
        "fifo-ends",
        "@x_0",
        "depth 0",
        "1..16",
    )
    same = old.replace("{%tile_0_2}", "{%shim_noc_tile_0_0}")
    _one(_replace(RELU, old, same), "fifo-ends", "@x_0", "also a consumer")


def test_more_buffer_descriptors_than_a_core_has():
    text = RELU
    for f in ("x_0", "out_0"):
        text = re.sub(rf"(aie\.objectfifo @{f}\(.*?), 2 : i32\)", r"\1, 9 : i32)", text)
    _one(text, "tile-bds", "%tile_0_2", "18 buffer descriptors", "has 16")


def test_more_memory_than_a_core_has():
    buf = '    %big = aie.buffer(%tile_0_2) {sym_name = "big"} : memref<16000xf32>\n'
    more = buf + buf.replace("big", "big2")
    text = _replace(RELU, "    %core_0_2 = ", more + "    %core_0_2 = ")
    # 2 x 64,000 + 4 x 512 (FIFO elements) + 1,024 (stack)
    _one(text, "tile-memory", "%tile_0_2", "131072 bytes", "has 65536")


def test_a_buffer_bigger_than_an_allocator_bank_is_a_warning():
    buf = '    %big = aie.buffer(%tile_0_2) {sym_name = "big"} : memref<4097xf32>\n'
    text = _replace(RELU, "    %core_0_2 = ", buf + "    %core_0_2 = ")
    assert verify.check_text(text, "npu2") == []
    _one(
        text,
        "core-bank",
        "%big = aie.buffer",
        "16388 bytes",
        "16384-byte bank",
        warnings=True,
    )


def test_a_kernel_symbol_missing_or_with_another_arity():
    decl = "func.func private @relu_bf16(memref<256xbf16>, memref<256xbf16>, i32)"
    wider = decl.replace("i32)", "i32, i32)")
    _one(
        _replace(RELU, decl, wider),
        "kernel-symbols",
        "@relu_bf16",
        "4 arguments but relu_bf16.cc",
        "with 3",
    )
    missing = decl.replace("@relu_bf16", "@relu_bf16_fast")
    _one(
        _replace(RELU, decl, missing),
        "kernel-symbols",
        "defines no function relu_bf16_fast",
    )
    other = _replace(RELU, '"relu_bf16.o"', '"relu_fast.o"')
    _one(other, "kernel-symbols", "no kernel source relu_fast.cc")


def test_verify_text_raises_a_value_error_listing_each_violation():
    text = _replace(RELU, X0, X0.replace("id = 1", "id = 16"))
    with pytest.raises(
        verify.DesignRuleError, match=r"(?s)relu on npu2 breaks 1 .*shim-bd-ids"
    ) as e:
        verify.verify_text(text, "npu2", subject="relu")
    assert isinstance(e.value, ValueError)
    with pytest.raises(verify.DesignRuleError, match="no aie.device"):
        verify.check_text("module {}", "npu2")


def test_every_rule_cites_its_upstream_source_and_has_a_test():
    here = (GOLDEN.parent / "test_verify.py").read_text(encoding="utf-8")
    for rule in verify.RULES:
        assert rule.source and rule.summary
        assert f'"{rule.name}"' in here, rule.name
