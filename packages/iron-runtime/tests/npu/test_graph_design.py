"""Planned images as NPU designs (iron.runtime.npu.graph) and the XRT binding of them.

A small graph (RMSNorm, GEMV, an add of a per-call row of a held table,
SiLU) is planned for npu1 (one design per step) and npu2 (one full ELF);
the tests check where each step's design reads and writes (the plan's
offsets), the per-call window, the full ELF's devices and main sequence,
and what the XRT driver binds per run (the window's sub-buffer at the
scratchpad's offset, the scratchpad's own BO) against a fake pyxrt.
"""

from __future__ import annotations

import re
import sys
import types
from math import prod
from pathlib import Path

import numpy as np
import pytest
from ml_dtypes import bfloat16

import iron
from iron.core import dma
from iron.core.device import NPU1, NPU2
from iron.core.plan import plan
from iron.operators import GEMV, ElementwiseAdd, RMSNorm, SiLU
from iron.runtime import xrt
from iron.runtime.driver import RunError
from iron.runtime.image import build_images
from iron.runtime.npu import build, legality
from iron.runtime.npu import graph as graph_mod
from iron.runtime.npu.graph import EMIT, WindowShift, graph_design

from .support import filecheck
from .test_build import FakeRunner
from .test_xrt import make_fake

WIDTH, TABLE = 256, 16


class Small(iron.Graph):
    """Four steps; the add reads row ``position`` of a held table."""

    def __init__(self) -> None:
        self.w = iron.weight(np.zeros((WIDTH, WIDTH), bfloat16))
        self.table = iron.weight(np.zeros((TABLE, WIDTH), bfloat16))

    def body(self, x, *, position: iron.Scratchpad[int]):
        h = RMSNorm.step(x)
        y = GEMV.step(self.w, h.reshape(-1))
        z = ElementwiseAdd.step(y, self.table[position].reshape(-1))
        return SiLU.step(z)


def _images(dev: str):
    graph = Small()
    with iron.use_device(dev):
        rec = graph.record(x=(1, WIDTH))
        p = plan(dev, rec)
    return p, rec, build_images(p, rec)


def _extent(p) -> int:
    return max(b.offset + b.nbytes for b in p.buffers.values() if b.in_arena)


def test_npu1_has_one_design_per_step_at_the_planned_offsets():
    p, rec, images = _images("npu1")
    assert not p.full_elf and len(images) == 4
    arena = -(-_extent(p) // 4) * 4
    designs = [graph_design(im, NPU1, arena_bytes=arena) for im in images]
    assert designs[0].args == ("input:x", "arena")
    assert designs[3].args == ("arena", "output:silu3")
    # GEMV reads w where the plan put the weight, and writes y where y lives
    gemv = designs[1].design
    w_at = p.buffers["w"].offset // 2
    w_reads = [t for t in gemv.layout.transfers if t.fifo.startswith("w_")]
    assert min(t.offset for t in w_reads) == w_at
    y_at = p.buffers[rec.steps[1].outputs[0].buffer.name].offset // 2
    out = [t for t in gemv.layout.transfers if t.fifo.startswith("out_")]
    assert min(t.offset for t in out) == y_at
    assert all(t.buffer == "arena" for t in gemv.layout.transfers)
    assert dict(zip(gemv.args, gemv.arg_bytes))["arena"] == arena


def test_a_per_call_row_is_read_through_a_window():
    p, rec, images = _images("npu1")
    add = graph_design(images[2], NPU1, arena_bytes=-(-_extent(p) // 4) * 4)
    (window,) = add.windows
    assert add.args == ("arena", "arena@0")
    slot = images[2].slot_of_key[rec.steps[2].inputs[1].layout.offset.key()]
    assert window == WindowShift("arena@0", slot, 0, 2)
    # y's reads start at the table's own offset in the shifted arena
    y_reads = [t for t in add.design.layout.transfers if t.buffer == "arena@0"]
    assert min(t.offset for t in y_reads) == p.buffers["table"].offset // 2
    pad = np.zeros(images[2].scratchpad_words, np.int32)
    pad[slot] = 5 * WIDTH  # row 5: its start in elements
    assert window.shift(pad) == 5 * WIDTH * 2


def test_npu2_is_one_full_elf_configuring_each_step(tmp_path):
    p, rec, images = _images("npu2")
    assert p.full_elf and len(images) == 1
    g = graph_design(images[0], NPU2, arena_bytes=-(-_extent(p) // 4) * 4)
    assert g.args == ("arena", "arena@0", "input:x", "output:silu3")
    assert [s.index for s in g.steps] == [0, 1, 2, 3]
    n = g.arg_bytes[0] // 2
    filecheck(
        tmp_path,
        "\n".join(
            [
                "CHECK: aie.device(npu2) @config0 {",
                "CHECK: aie.runtime_sequence @step0_sequence(",
                "CHECK: aie.device(npu2) @config1 {",
                "CHECK: aie.device(npu2) @config2 {",
                "CHECK: aie.device(npu2) @config3 {",
                "CHECK: aie.device(npu2) @main {",
                f"CHECK-NEXT: aie.runtime_sequence @sequence(%arena: memref<{n}xbf16>,"
                f" %arena_at_0: memref<{n}xbf16>, %input_x: memref<256xbf16>,"
                " %output_silu3: memref<256xbf16>) {",
                "CHECK-NEXT: aiex.configure @config0 {",
                "CHECK-NEXT: aiex.run @step0_sequence(%input_x, %arena) : "
                f"(memref<256xbf16>, memref<{n}xbf16>)",
                "CHECK: aiex.configure @config2 {",
                "CHECK-NEXT: aiex.run @step2_sequence(%arena, %arena_at_0)",
                "CHECK: aiex.configure @config3 {",
                "CHECK-NOT: aie.device",
                "",
            ]
        ),
        g.design.text,
    )
    assert g.design.text.count("@main") == 1
    assert g.design.kernels == ("rms_norm_bf16", "gemv", "add_bf16", "silu_bf16")


class Repeats(iron.Graph):
    """SiLU, SiLU, an add, SiLU: three steps of one array configuration."""

    def body(self, x):
        a = SiLU.step(SiLU.step(x))
        return SiLU.step(ElementwiseAdd.step(a, x))


def test_steps_of_one_array_configuration_share_one_device():
    """Issue 28: a full ELF holds each distinct array configuration once, with
    a sequence per step; consecutive steps of one configuration run in one
    ``aiex.configure`` (one PDI load), and the text passes the checker."""
    from iron.runtime.npu.verify import check_text

    with iron.use_device("npu2"):
        rec = Repeats().record(x=(WIDTH,))
        (image,) = build_images(plan("npu2", rec), rec)
    g = graph_design(image, NPU2, arena_bytes=1 << 16)
    assert [c.name for c in g.configurations] == ["config0", "config1"]
    assert [c.steps for c in g.configurations] == [(0, 1, 3), (2,)]
    text = g.design.text
    assert re.findall(r"aie\.device\(npu2\) @(\w+)", text) == [
        "config0",
        "config1",
        "main",
    ]
    assert text.count("aie.core(") == sum(
        s.design.text.count("aie.core(") for s in g.steps[1:3]
    )
    main = text[text.index("@main") :]
    blocks: list[tuple[str, list[str]]] = []
    for line in main.splitlines():
        if m := re.search(r"aiex\.configure @(\w+)", line):
            blocks.append((m.group(1), []))
        elif m := re.search(r"aiex\.run @(\w+)", line):
            blocks[-1][1].append(m.group(1))
    assert blocks == [
        ("config0", ["step0_sequence", "step1_sequence"]),
        ("config1", ["step2_sequence"]),
        ("config0", ["step3_sequence"]),
    ]
    assert g.loads == 3
    # each step's own sequence is in its configuration's device, renamed
    for k, s in enumerate(g.steps):
        seq = s.design.text[s.design.text.index("aie.runtime_sequence") :]
        seq = seq[: seq.index("\n    }\n")]
        assert seq.replace("@sequence(", f"@step{k}_sequence(") in text
    assert check_text(text, "npu2") == []


def test_every_step_of_the_full_elf_passed_legality():
    p, rec, images = _images("npu2")
    g = graph_design(images[0], NPU2, arena_bytes=-(-_extent(p) // 4) * 4)
    for s in g.steps:
        legality.check(s.design.layout, NPU2)


class Embed(iron.Graph):
    """A prompt's embedding: rows of a held table picked by the ids input."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = iron.weight(table)

    def body(self, ids, *, n: iron.Scratchpad[int]):
        from iron.operators import Copy

        rows = Copy.step(self.table[ids[:n]])
        return SiLU.step(rows.reshape(-1))


class _Bytes:
    """A driver buffer's host view, for HostGather.run."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data.view(np.uint8).reshape(-1).copy()
        self.sent: list[tuple[int, int]] = []

    def host(self) -> np.ndarray:
        return self.data

    def to_device(self, offset: int = 0, nbytes: int | None = None) -> None:
        self.sent.append((offset, nbytes))


def test_a_gather_by_input_ids_is_the_hosts_before_the_run():
    table = np.arange(TABLE * WIDTH, dtype=np.float32).reshape(TABLE, WIDTH)
    table = table.astype(bfloat16)
    with iron.use_device("npu1"):
        rec = Embed(table).record(ids=((4,), np.int32))
        p = plan("npu1", rec)
        images = build_images(p, rec)
    first = graph_design(images[0], NPU1, arena_bytes=-(-_extent(p) // 4) * 4)
    assert first.design is None and first.args == ()
    (gather,) = first.host_gathers
    assert (gather.ids, gather.count, gather.rows) == ("input:ids", 4, TABLE)
    assert gather.row_bytes == WIDTH * 2
    arena = _Bytes(np.zeros(_extent(p), np.uint8))
    start = p.buffers["table"].offset
    arena.data[start : start + table.nbytes] = table.view(np.uint8).reshape(-1)
    ids = _Bytes(np.array([5, 0, 15, 9], np.int32))
    pad = np.zeros(images[0].scratchpad_words, np.int32)
    pad[gather.bound_slot] = 3  # n = 3: the first three rows
    gather.run({"arena": arena, "input:ids": ids}, pad)
    out = arena.data[gather.dest_offset : gather.dest_offset + 3 * WIDTH * 2]
    assert np.array_equal(out.view(bfloat16).reshape(3, WIDTH), table[[5, 0, 15]])
    assert arena.sent == [(gather.dest_offset, 3 * WIDTH * 2)]
    ids.data[:16] = np.array([16, 0, 0, 0], np.int32).view(np.uint8)
    with pytest.raises(IndexError, match="id 16 is outside the table's 16 rows"):
        gather.run({"arena": arena, "input:ids": ids}, pad)
    # on npu2 the full ELF holds every step but the gather, which comes first
    with iron.use_device("npu2"):
        rec = Embed(table).record(ids=((4,), np.int32))
        p2 = plan("npu2", rec)
        (image,) = build_images(p2, rec)
    g = graph_design(image, NPU2, arena_bytes=-(-_extent(p2) // 4) * 4)
    assert [s.index for s in g.steps] == [1] and len(g.host_gathers) == 1


def test_a_gather_by_ids_the_device_made_is_refused_by_name():
    class Follows(iron.Graph):
        def __init__(self) -> None:
            self.table = iron.weight(np.zeros((TABLE, WIDTH), bfloat16))

        def body(self, logits):
            from iron.operators import Copy, Sample

            token = Sample.step(logits)
            return Copy.step(self.table[token])

    with iron.use_device("npu2"):
        rec = Follows().record(logits=(TABLE,))
        (image,) = build_images(plan("npu2", rec), rec)
    with pytest.raises(NotImplementedError, match="gather by ids a device buffer"):
        graph_design(image, NPU2)


def _fake_built(design):
    tc = build.Toolchain("aiecc", Path("/p"), Path("/i"), {"aiecc": "1", "peano": "1"})
    return build.build(design, tc, runner=FakeRunner(), cache=_fake_built.cache)


def test_the_driver_binds_the_window_and_the_scratchpad_per_run(monkeypatch, tmp_path):
    log: list = []
    monkeypatch.setitem(sys.modules, "pyxrt", make_fake(log))
    p, rec, images = _images("npu1")
    arena_bytes = -(-_extent(p) // 4) * 4
    _fake_built.cache = tmp_path

    def builder(spec):
        g = graph_design(spec, NPU1, arena_bytes=arena_bytes)
        built = _fake_built(g.design)
        built.insts.write_bytes(np.arange(4, dtype=np.uint32).tobytes())
        return built, g

    device = xrt.XrtDevice(NPU1, image_builder=builder)
    image = device.load(images[2])
    assert image.args == ("arena", "arena@0")
    arena = device.alloc(arena_bytes, "arena")
    arena.host()[:] = np.arange(arena_bytes) % 251
    run = image.new_run()
    run.set_args({"arena": arena})
    run.scratchpad = np.zeros(images[2].scratchpad_words, np.int32)
    slot = image.windows[0].slot
    run.scratchpad[slot] = 3 * WIDTH
    run.start()
    (sub,) = [c for c in log if c[0] == "sub_bo"]
    shift = 3 * WIDTH * 2
    assert sub[1] is arena.bo and sub[2:] == (arena_bytes - shift, shift)
    # the window argument is the arena from the shift on
    bound = {i: v for (op, i, v) in (c for c in log if c[0] == "set_arg")}
    assert np.array_equal(bound[4].host, arena.host()[shift:])
    run.wait()
    # a shift outside the arena is refused before the run starts
    run.scratchpad[slot] = arena_bytes
    with pytest.raises(Exception, match="outside its"):
        run.start()


def test_a_scratchpad_reaches_the_words_argument(monkeypatch, tmp_path):
    from iron.core.percall import PerCall
    from iron.operators import Softmax

    log: list = []
    monkeypatch.setitem(sys.modules, "pyxrt", make_fake(log))
    design = types.SimpleNamespace()  # a design whose last argument is words
    _fake_built.cache = tmp_path
    try:
        from iron.runtime.npu.designs import build_design

        d = build_design(Softmax(rows=32, cols=1024, length=PerCall("n")), NPU1)
    except NotImplementedError:
        pytest.skip("per-call Softmax length has no design here")
    assert d.args[-1] == "words"
    built = _fake_built(d)
    built.insts.write_bytes(np.arange(4, dtype=np.uint32).tobytes())
    device = xrt.XrtDevice(NPU1, image_builder=lambda spec: built)
    image = device.load(design)
    run = image.new_run()
    run.set_args(
        {a: device.alloc(n, a) for a, n in zip(d.args, d.arg_bytes) if a != "words"}
    )
    run.scratchpad = np.array([700], np.int32)
    run.start()
    words = [c for c in log if c[0] == "write" and c[1].size == 4]
    assert words and np.array_equal(words[-1][1].host.view(np.int32), [700])


def test_selection_opens_the_npu_when_nothing_is_missing(monkeypatch):
    log: list = []
    monkeypatch.setitem(sys.modules, "pyxrt", make_fake(log, name="NPU Strix"))
    monkeypatch.setattr(xrt, "missing", lambda: [])
    device = xrt.open_device(NPU2)
    assert isinstance(device, xrt.XrtDevice) and device.name == "npu2"


def test_an_npu1_machine_does_not_open_as_npu2(monkeypatch):
    """Issue 15: an NPU1 user who forgot IRON_DEVICE must not load npu2 binaries."""
    monkeypatch.setitem(sys.modules, "pyxrt", make_fake([], name="NPU Phoenix"))
    monkeypatch.setattr(xrt, "missing", lambda: [])
    with pytest.raises(
        xrt.BackendUnavailableError,
        match=r"asked for npu2, but XRT reports this machine's NPU as npu1; "
        r"set IRON_DEVICE=npu1",
    ):
        xrt.open_device(NPU2)
    assert xrt.open_device(NPU1).name == "npu1"


class Walk(iron.Graph):
    """A loop on one carried value: each run rewrites a state from a table row."""

    def __init__(self) -> None:
        self.table = iron.weight(np.zeros((TABLE, WIDTH), bfloat16))
        self.out = iron.state((WIDTH,), bfloat16)

    def body(self, *, position: iron.Carried[int]):
        SiLU.step(self.table[position].reshape(-1), out=self.out)
        return iron.carry(position=position + 1)


def _looping_version():
    from iron.runtime import CarriedLoop

    with iron.use_device("npu2"):
        version = Walk().compile()
        CarriedLoop(version, version, depth=2)  # composes the Emit program
    return version


def _looping_image():
    return _looping_version().images[-1]


def test_a_looping_version_ends_in_an_emit_device(tmp_path):
    spec = _looping_image()
    g = graph_design(spec, NPU2, arena_bytes=1 << 16)
    assert [s.index for s in g.steps] == [0, EMIT]
    assert g.args == ("arena", "arena@0", "words", "program", "feedback")
    capacity = NPU2.scratchpad_words + 1
    assert dict(zip(g.args, g.arg_bytes))["feedback"] == capacity * 4
    emit_design = g.steps[1].design
    legality.check(emit_design.layout, NPU2)
    # the one slot, the carried position, comes from the scratchpad's carried slot
    (slot,) = [t for t in emit_design.layout.transfers if t.fifo == "emit_slots"]
    assert (slot.buffer, slot.offset) == ("words", spec.carried_slot("position"))
    filecheck(
        tmp_path,
        "\n".join(
            [
                "CHECK: aie.device(npu2) @emit {",
                "CHECK: func.call @iron_emit(",
                "CHECK: aie.runtime_sequence @emit_sequence(",
                "CHECK: aie.device(npu2) @main {",
                "CHECK: aiex.configure @config0 {",
                "CHECK: aiex.configure @emit {",
                "CHECK-NEXT: aiex.run @emit_sequence(%words, %program, %feedback)",
                "",
            ]
        ),
        g.design.text,
    )


def test_emit_feeds_the_next_run_on_the_device(monkeypatch, tmp_path):
    log: list = []
    monkeypatch.setitem(sys.modules, "pyxrt", make_fake(log))
    version = _looping_version()
    spec, program = version.images[-1], version.program
    assert program is not None
    _fake_built.cache = tmp_path

    def builder(s):
        g = graph_design(s, NPU2, arena_bytes=1 << 16)
        return _fake_built(g.design), g

    device = xrt.XrtDevice(NPU2, image_builder=builder)
    image = device.load(spec)
    a, b = image.new_run(), image.new_run()
    a.bind_feedback(b)
    b.bind_feedback(a)
    arena = device.alloc(1 << 16, "arena")
    # the composed program is an input of each run, as CompiledGraph gives it
    given = device.alloc(program.nbytes, "program")
    given.host()[:] = program.view(np.uint8)
    for run in (a, b):
        run.set_args({"arena": arena, "program": given})
        run.scratchpad = np.zeros(spec.scratchpad_words, np.int32)
    a.scratchpad[:] = [3 * WIDTH, 3]
    a.start()
    bound = {i: v for (op, i, v) in (c for c in log if c[0] == "set_arg")}
    args = {name: bound[k] for k, name in enumerate(image.args)}
    assert args["feedback"] is b._words and args["words"] is a._words
    assert np.array_equal(args["program"].dev[: program.nbytes], program.view(np.uint8))
    assert args["words"].dev[:8].view(np.int32).tolist() == [3 * WIDTH, 3]
    # what a's Emit writes on the device: the next position's words
    b._words.dev[:8] = np.array([4 * WIDTH, 4], np.int32).view(np.uint8)
    a.wait()  # ... which the host reads back into b's scratchpad
    assert b.scratchpad.tolist() == [4 * WIDTH, 4]
    writes_before = len([c for c in log if c[0] == "write" and c[1] is b._words])
    b.start()  # b runs on what a's Emit wrote: the host writes nothing into it
    assert (
        len([c for c in log if c[0] == "write" and c[1] is b._words]) == writes_before
    )
    with pytest.raises(RunError, match="bind_feedback"):
        c = image.new_run()
        c.set_args({"arena": arena, "program": given})
        c.scratchpad = np.zeros(spec.scratchpad_words, np.int32)
        c.start()


def test_an_arena_past_the_offset_limit_is_cut_into_arguments(monkeypatch, tmp_path):
    """Issue 15, failure 4, at a scale that runs here: the limit lowered to
    136 KiB, the arena (140 KiB: w, then the table and activations) becomes
    ``arena`` (w) and ``arena#1`` (the rest), each below the limit, and the
    driver binds ``arena#1`` as a sub-buffer from its first byte."""
    limit = (1 << 17) + (1 << 13)
    monkeypatch.setattr(dma, "ARG_OFFSET_LIMIT", limit)
    p, rec, (image,) = _images("npu2")
    extent = -(-_extent(p) // 4) * 4
    assert extent >= limit
    g = graph_design(image, NPU2, arena_bytes=extent)
    assert [s.arg for s in g.segments] == ["arena#1"]
    (seg,) = g.segments
    assert seg.start == p.buffers["table"].offset
    assert "arena#1" in g.args and all(n < limit for n in g.arg_bytes)
    for step in g.steps:
        for t in step.design.layout.transfers:
            assert t.offset * t.itemsize < limit
    (window,) = g.windows
    assert (window.base, window.start) == ("arena", seg.start)
    # the add reads row `position` of the table from the window, at the
    # table's offset in its stretch (0)
    add = g.steps[2].design.layout.transfers
    assert min(t.offset for t in add if t.buffer == window.arg) == 0

    log: list = []
    monkeypatch.setitem(sys.modules, "pyxrt", make_fake(log, name="NPU Strix"))
    _fake_built.cache = tmp_path
    device = xrt.XrtDevice(NPU2, image_builder=lambda s: (_fake_built(g.design), g))
    loaded = device.load(image)
    arena = device.alloc(extent, "arena")
    run = loaded.new_run()
    bufs = {a: device.alloc(n, a) for a, n in zip(g.args, g.arg_bytes)}
    run.set_args(
        {"arena": arena, "input:x": bufs["input:x"]}
        | {"output:silu3": bufs["output:silu3"]}
    )
    run.scratchpad = np.zeros(image.scratchpad_words, np.int32)
    run.scratchpad[window.slot] = 3 * WIDTH
    run.start()
    subs = [c[2:] for c in log if c[0] == "sub_bo" and c[1] is arena.bo]
    assert (extent - seg.start, seg.start) in subs  # arena#1
    shift = seg.start + 3 * WIDTH * 2
    assert (extent - shift, shift) in subs  # arena#1@0 at the row


def test_a_buffer_past_the_offset_limit_alone_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(dma, "ARG_OFFSET_LIMIT", 1 << 16)
    p, rec, (image,) = _images("npu2")
    with pytest.raises(
        legality.LegalityError, match=r"buffer w takes 131072 bytes .* below 2\^31"
    ):
        graph_design(image, NPU2, arena_bytes=_extent(p))


def test_npu2_falls_back_to_one_elf_per_step(monkeypatch, tmp_path):
    """Issue 15: the full ELF at Llama scale is untested upstream, so a user
    can plan per step on npu2 too (``full_elf=False``): each step is an ELF
    of its own, loaded in its own hardware context, data in ext.bo's."""
    graph = Small()
    with iron.use_device("npu2"):
        rec = graph.record(x=(1, WIDTH))
        p = plan("npu2", rec, full_elf=False)
        version = graph.compile(x=(1, WIDTH), full_elf=False)
    assert not p.full_elf and len(version.images) == 4
    images = build_images(p, rec)
    extent = -(-_extent(p) // 4) * 4
    designs = [graph_design(im, NPU2, arena_bytes=extent) for im in images]
    assert all(len(g.steps) == 1 and "@main" in g.design.text for g in designs)
    log: list = []
    monkeypatch.setitem(sys.modules, "pyxrt", make_fake(log, name="NPU Strix"))
    _fake_built.cache = tmp_path
    by_name = {im.name: g for im, g in zip(images, designs)}
    device = xrt.XrtDevice(
        NPU2,
        image_builder=lambda s: (_fake_built(by_name[s.name].design), by_name[s.name]),
    )
    loaded = [device.load(im) for im in images]
    arena = device.alloc(extent, "arena")
    x = device.alloc(WIDTH * 2, "input:x")
    out = device.alloc(WIDTH * 2, "output:silu3")
    for im, image in zip(images, loaded):
        run = image.new_run()
        run.set_args({"arena": arena, "input:x": x, "output:silu3": out})
        run.scratchpad = np.zeros(max(1, im.scratchpad_words), np.int32)
        run.start()
        run.wait()
    assert len([c for c in log if c[0] == "hw_context"]) == 4
    assert [c for c in log if c[0] == "bo"] == []  # no group_id on ELF kernels
    assert all(c[0] != "run" or c[1] == "main:sequence" for c in log)


class Samples(iron.Graph):
    """A Sample whose int32 token a Copy moves on (as a Llama version's last steps)."""

    def body(self, logits):
        from iron.operators import Copy, Sample

        return Copy.step(Sample.step(logits))


def _runs(text: str) -> dict[str, str]:
    """Each ``aiex.run``'s callee and its operand types, from ``@main``."""
    found = re.findall(r"aiex\.run @(\w+)_sequence\(.*\) : \((.*)\)", text)
    return dict(found)


def test_every_run_passes_its_steps_own_argument_types(tmp_path):
    with iron.use_device("npu2"):
        rec = Samples().record(logits=(TABLE * 64,))
        (image,) = build_images(plan("npu2", rec), rec)
    g = graph_design(image, NPU2, arena_bytes=1 << 16)
    runs = _runs(g.design.text)
    assert len(runs) == len(g.steps) == 2
    for k, s in enumerate(g.steps):
        (line,) = [x for x in s.design.text.splitlines() if "runtime_sequence" in x]
        assert runs[f"step{k}"] == ", ".join(re.findall(r"memref<[^>]*>", line))
    # The token is one int32, moved as 4 bytes (upstream's 4-byte rule).
    (sample,) = [s.design for s in g.steps if "Sample" in s.design.operator]
    token = [t for t in sample.layout.transfers if t.fifo.startswith("token")]
    assert [prod(t.sizes) * t.itemsize for t in token] == [4]


def test_a_samples_token_output_is_one_int32():
    class Last(iron.Graph):
        def body(self, logits):
            from iron.operators import Sample

            return Sample.step(logits)

    with iron.use_device("npu2"):
        rec = Last().record(logits=(TABLE * 64,))
        (image,) = build_images(plan("npu2", rec), rec)
    (step,) = graph_design(image, NPU2, arena_bytes=1 << 16).steps
    assert "%output_sample0_buf: memref<1xi32>" in step.design.text
    (token,) = [t for t in step.design.layout.transfers if t.fifo.startswith("token")]
    assert (token.buffer, token.itemsize, prod(token.sizes)) == ("output:sample0", 4, 1)


def test_two_steps_typing_one_argument_apart_are_refused(monkeypatch):
    with iron.use_device("npu2"):
        rec = Samples().record(logits=(TABLE * 64,))
        (image,) = build_images(plan("npu2", rec), rec)
    real = graph_mod._sequence_types

    def retyped(design):
        types = real(design)
        return (
            [t.replace("bf16", "i32") for t in types]
            if "Copy" in design.operator
            else types
        )

    monkeypatch.setattr(graph_mod, "_sequence_types", retyped)
    with pytest.raises(
        graph_mod.ArgumentTypeError, match="one argument has one type"
    ) as info:
        graph_design(image, NPU2, arena_bytes=1 << 16)
    assert isinstance(info.value, TypeError) and "Sample" in str(info.value)


def test_a_transfer_planned_in_other_items_than_its_argument_is_refused():
    from iron.runtime.npu.designs.sequence import ItemSizeError, check_items

    t = legality.Transfer(
        "token_0", legality.Tile(0, 0), "out", 0, (1, 1, 1, 1), (0, 0, 0, 1), 4
    )
    check_items([t], {"out": "memref<1xi32>"})
    with pytest.raises(ItemSizeError, match="4-byte items of argument out"):
        check_items([t], {"out": "memref<2xbf16>"})


class RowsOfAState(iron.Graph):
    """Copies of a state's rows at static offsets (a batched step's keys)."""

    def __init__(self) -> None:
        self.rows = iron.state((8, 2, 32), bfloat16)
        self.cache = iron.state((8, 2, 4, 32), bfloat16)

    def body(self, x, *, position: iron.Scratchpad[int]):
        from iron.operators.movers import Copy

        Copy.step(x, out=self.rows[:])
        for i in range(8):
            view = self.rows[i : i + 1].transpose(1, 0, 2)
            Copy.step(view, out=self.cache[i][:, position : position + 1])
        return SiLU.step(x.reshape(-1))


@pytest.mark.parametrize("dev", ["npu1", "npu2"])
def test_a_copy_of_a_states_row_is_placed_at_the_state_once(dev):
    """A contiguous row of a state at a static offset (row 4 of 8) is walked
    by the Copy's own access from the state's start: placing the port at the
    row as well counted the offset twice, and the design refused a port of
    640 bytes placed in 512 (rows 4 to 7)."""
    graph = RowsOfAState()
    with iron.use_device(dev):
        rec = graph.record(x=((8, 2, 32), bfloat16))
        p = plan(dev, rec)
    images = build_images(p, rec)
    arena = -(-_extent(p) // 4) * 4
    designs = [graph_design(im, dev, arena_bytes=arena) for im in images]
    assert designs
    rows_at = p.buffers["rows"].offset // 2
    steps = {s.index: s for d in designs for s in d.steps}
    for row in range(8):  # each row's copy reads the state's own bytes
        transfers = steps[1 + row].design.layout.transfers
        reads = [t.offset for t in transfers if t.fifo.startswith("view")]
        assert reads and min(reads) == rows_at + row * 64, row
