"""The XRT driver's logic against a fake pyxrt injected into sys.modules.

The fake records every call, so the tests check what the driver asks of
XRT: group ids, BO flags, sync directions and sizes, the set_arg order of
the NPU calling convention, the full-ELF path. Nothing here needs XRT.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest

from iron.core.device import NPU1, NPU2
from iron.operators import AXPY, ReLU
from iron.runtime import xrt
from iron.runtime.driver import RunError, RunState
from iron.runtime.npu import build
from iron.runtime.npu.designs import build_design

from .test_build import FakeRunner

#: Hardware contexts the amdxdna driver allows at once, by the name XRT reports
#: (``amd/xdna-driver`` ``src/driver/amdxdna/npu1_regs.c`` ``hwctx_limit`` = 6
#: on Phoenix; mlir-aie ``python/utils/hostruntime/xrtruntime/hostruntime.py``
#: sizes its context cache 6 on npu1 and 32 on npu2 for the same reason).
FAKE_CONTEXT_LIMITS = {"NPU Phoenix": 6, "NPU Strix": 32}


def make_fake(
    log: list,
    *,
    full_elf: bool = True,
    end_state: str = "COMPLETED",
    name: str = "NPU Phoenix",
):
    """A pyxrt that behaves like XRT where IRON's use of it could go wrong.

    As XRT does (``Xilinx/XRT`` ``src/runtime_src/core/common/api/``):

    * ``kernel.group_id`` of an ELF-backed ``ext.kernel`` raises: XRT's
      ``kernel_impl::group_id`` reads ``ipctxs.front()``, which only the xclbin
      constructor fills (``xrt_kernel.cpp``), so on a real device it is
      undefined behaviour; the fake makes it an error;
    * a device holds at most :data:`FAKE_CONTEXT_LIMITS` hardware contexts at
      once (the driver refuses the next ``DRM_IOCTL_AMDXDNA_CREATE_HWCTX``);
      a context is released when the last object holding it goes;
    * BO sizes are positive bytes; a sub-buffer's ``offset + size`` must lie
      within its parent (``xrt_bo.cpp`` ``buffer_sub``); write, read and sync
      spans must lie within the BO, in bytes;
    * an xclbin kernel's argument 2 (the instruction count) must equal the
      instruction BO's size in 32-bit words, the unit mlir-aie's C++ host code
      passes (``runtime_lib/test_lib/xrt_test_wrapper.h``: ``instr_v.size()``
      of a ``std::vector<uint32_t>``).
    """
    m = types.ModuleType("pyxrt")
    contexts = {"open": 0, "limit": FAKE_CONTEXT_LIMITS[name]}

    class Sync:
        XCL_BO_SYNC_BO_TO_DEVICE = "to_device"
        XCL_BO_SYNC_BO_FROM_DEVICE = "from_device"

    class States:
        pass

    for s in ("NEW", "QUEUED", "COMPLETED", "ERROR", "ABORT", "SUBMITTED", "TIMEOUT"):
        setattr(States, f"ERT_CMD_STATE_{s}", s)

    class Flags:
        normal, cacheable, device_only, host_only = (
            "normal",
            "cacheable",
            "device_only",
            "host_only",
        )

    def _within(what, bo_size, size, offset):
        if size < 0 or offset < 0 or offset + size > bo_size:
            raise RuntimeError(
                f"{what}: bytes [{offset}, {offset + size}) outside the BO's {bo_size}"
            )

    class bo:
        flags = Flags
        cacheable, host_only = Flags.cacheable, Flags.host_only

        def __init__(self, device, size, flags, group=None):
            if group is None:  # bo(parent, size, offset): a sub-buffer
                parent, offset = device, flags
                if not isinstance(parent, bo):
                    raise TypeError("incompatible function arguments")
                if size <= 0 or offset < 0 or offset + size > parent.size:
                    raise RuntimeError(
                        "Sub buffer size and offset exceeds parent size "
                        f"({offset} + {size} > {parent.size})"
                    )
                self.size, self.flags, self.group = size, parent.flags, parent.group
                self.host = parent.host[offset : offset + size]
                self.dev = parent.dev[offset : offset + size]
                log.append(("sub_bo", parent, size, offset))
                return
            if not isinstance(group, int) or isinstance(group, bool):
                raise TypeError(f"incompatible function arguments (group {group!r})")
            if size <= 0:
                raise RuntimeError(f"bo size {size}: must be positive bytes")
            self.size, self.flags, self.group = size, flags, group
            self.host = np.zeros(size, np.uint8)
            self.dev = np.zeros(size, np.uint8)
            log.append(("bo", size, flags, group))

        def write(self, buf, seek):
            data = np.asarray(buf).view(np.uint8).reshape(-1)
            _within("bo.write", self.size, data.size, seek)
            self.host[seek : seek + data.size] = data
            log.append(("write", self, data.size, seek))

        def read(self, size, skip):
            _within("bo.read", self.size, size, skip)
            return self.host[skip : skip + size].copy()

        def sync(self, direction, size, offset):
            _within("bo.sync", self.size, size, offset)
            span = slice(offset, offset + size)
            if direction == Sync.XCL_BO_SYNC_BO_TO_DEVICE:
                self.dev[span] = self.host[span]
            else:
                self.host[span] = self.dev[span]
            log.append(("sync", self, direction, size, offset))

    class ext_bo(bo):
        def __init__(self, device, size, *access):
            if size <= 0:
                raise RuntimeError(f"ext.bo size {size}: must be positive bytes")
            self.size, self.flags, self.group = size, "ext", None
            self.host = np.zeros(size, np.uint8)
            self.dev = np.zeros(size, np.uint8)
            log.append(("ext_bo", size))

    class device:
        def __init__(self, index):
            log.append(("device", index))

        def get_info(self, key):
            return {"name": name}[key]

        def register_xclbin(self, xclbin):
            log.append(("register_xclbin", xclbin.path))

    class xclbin:
        def __init__(self, path):
            self.path = path

        def get_uuid(self):
            return "uuid-" + Path(self.path).name

    class hw_context:
        def __init__(self, device, what):
            if contexts["open"] >= contexts["limit"]:
                raise RuntimeError(
                    f"DRM_IOCTL_AMDXDNA_CREATE_HWCTX failed: {contexts['limit']} "
                    f"hardware contexts are open on {name}"
                )
            contexts["open"] += 1
            self.open = True
            self.elf = not isinstance(what, str)
            log.append(
                ("hw_context", what if isinstance(what, str) else type(what).__name__)
            )

        def __del__(self):
            if getattr(self, "open", False):
                contexts["open"] -= 1
                log.append(("hw_context_released",))

    class kernel:
        def __init__(self, ctx, kname):
            self.name, self.ctx = kname, ctx  # XRT's kernel holds its context
            log.append(("kernel", kname))

        def group_id(self, arg):
            if self.ctx.elf:
                raise RuntimeError(
                    f"group_id({arg}) on an ELF-backed kernel: XRT indexes the "
                    f"empty ipctxs (xrt_kernel.cpp kernel_impl::group_id)"
                )
            return 100 + arg

    class run:
        def __init__(self, kernel):
            self.args = {}
            self.kernel = kernel
            log.append(("run", kernel.name))

        def set_arg(self, index, value):
            self.args[index] = value
            log.append(("set_arg", index, value))

        def start(self):
            if not self.kernel.ctx.elf:
                instr, count = self.args.get(1), self.args.get(2)
                if self.args.get(0) != 3 or not isinstance(instr, bo):
                    raise RuntimeError("an NPU kernel takes opcode 3, then the insts")
                if count * 4 != instr.size:
                    raise RuntimeError(
                        f"instruction count {count} is not the instruction BO's "
                        f"{instr.size} bytes in 32-bit words"
                    )
            log.append(("start",))
            last = self.args[max(self.args)]  # the device writes the output
            last.dev[:] = 7

        def wait(self, *timeout):
            log.append(("wait", *timeout))

        def state(self):
            return getattr(States, f"ERT_CMD_STATE_{end_state}")

    m.xclBOSyncDirection, m.ert_cmd_state = Sync, States
    m.xrt_info_device = types.SimpleNamespace(name="name", bdf="bdf")
    m.bo, m.device, m.xclbin, m.hw_context, m.kernel, m.run = (
        bo,
        device,
        xclbin,
        hw_context,
        kernel,
        run,
    )
    m.contexts = contexts  # for tests: how many are open
    if full_elf:

        class elf:
            def __init__(self, path):
                self.path = path

        m.elf = elf
        m.ext = types.SimpleNamespace(kernel=kernel, bo=ext_bo)
    return m


@pytest.fixture
def log(monkeypatch):
    calls: list = []
    monkeypatch.setitem(sys.modules, "pyxrt", make_fake(calls))
    return calls


def _built(tmp_path, op, dev):
    tc = build.Toolchain("aiecc", Path("/p"), Path("/i"), {"aiecc": "1", "peano": "1"})
    built = build.build(build_design(op, dev), tc, runner=FakeRunner(), cache=tmp_path)
    if built.insts is not None:
        built.insts.write_bytes(np.arange(10, 16, dtype=np.uint32).tobytes())
    return built


def _ops(log, name):
    return [c for c in log if c[0] == name]


def test_xclbin_load_and_instruction_bo(log, tmp_path):
    built = _built(tmp_path, AXPY(size=2048, scalar_factor=2.0), NPU1)
    device = xrt.XrtDevice(NPU1)  # imports the fake from sys.modules
    image = device.load(built)
    assert ("device", 0) in log
    assert ("register_xclbin", str(built.xclbin)) in log
    assert ("hw_context", "uuid-final.xclbin") in log and ("kernel", "MLIR_AIE") in log
    assert ("bo", 24, "cacheable", 101) in log  # 6 words, group_id(1)
    write = _ops(log, "write")[-1]
    assert write[2:] == (24, 0)
    assert np.array_equal(write[1].host.view(np.uint32), np.arange(10, 16))
    sync = _ops(log, "sync")[-1]
    assert sync[2:] == ("to_device", 24, 0)
    assert image.instruction_words == 6


def test_run_follows_the_npu_calling_convention(log, tmp_path):
    built = _built(tmp_path, AXPY(size=2048, scalar_factor=2.0), NPU1)
    device = xrt.XrtDevice(NPU1)
    image = device.load(built)
    bufs = {n: device.alloc(4096, n) for n in ("x", "y", "out")}
    bufs["x"].host()[:] = 1
    bufs["x"].to_device()  # staged: no BO yet
    assert not [c for c in log if c[0] == "bo" and c[2] == "host_only"]
    run = image.new_run()
    run.set_args(bufs)
    run.start()
    sets = [(c[1], c[2]) for c in _ops(log, "set_arg")]
    assert (
        sets[0] == (0, 3) and sets[1] == (1, image.instructions) and sets[2] == (2, 6)
    )
    assert [i for i, _ in sets[3:]] == [3, 4, 5]
    assert [v for _, v in sets[3:]] == [bufs[n].bo for n in ("x", "y", "out")]
    # Data BOs: host_only, each with its argument's group id, staged bytes sent.
    assert [c[1:] for c in log if c[0] == "bo" and c[2] == "host_only"] == [
        (4096, "host_only", 103),
        (4096, "host_only", 104),
        (4096, "host_only", 105),
    ]
    assert bufs["x"].bo.dev.min() == 1
    run.wait()
    assert run.state() is RunState.COMPLETED
    bufs["out"].from_device(16, 32)
    sync = _ops(log, "sync")[-1]
    assert sync[1] is bufs["out"].bo and sync[2:] == ("from_device", 32, 16)
    out = bufs["out"].host()
    assert (out[16:48] == 7).all() and (out[:16] == 0).all()
    bufs["y"].host()[8:12] = 5
    bufs["y"].to_device(8, 4)
    assert _ops(log, "sync")[-1][2:] == ("to_device", 4, 8)


def test_a_bo_is_made_once_and_shared_by_later_runs(log, tmp_path):
    built = _built(tmp_path, ReLU(size=2048), NPU1)
    device = xrt.XrtDevice(NPU1)
    image = device.load(built)
    bufs = {n: device.alloc(4096, n) for n in ("x", "out")}
    for _ in range(2):
        run = image.new_run()
        run.set_args(bufs)
        run.start()
        run.wait(timeout=1.5)
    assert len([c for c in log if c[0] == "bo" and c[2] == "host_only"]) == 2
    assert ("wait", 1500) in log


def test_full_elf_on_npu2(log, tmp_path):
    """Issue 15, failure 2: an ELF kernel's data BOs are ext.bo's, no group_id."""
    built = _built(tmp_path, ReLU(size=2048), NPU2)
    device = xrt.XrtDevice(NPU2)
    image = device.load(built)
    assert ("hw_context", "elf") in log and ("kernel", "main:sequence") in log
    assert image.instructions is None
    bufs = {n: device.alloc(4096, n) for n in ("x", "out")}
    run = image.new_run()
    run.set_args(bufs)
    run.start()
    assert [c[1] for c in _ops(log, "set_arg")] == [0, 1]  # data from argument 0
    assert _ops(log, "bo") == []  # no group_id asked of the ELF's kernel
    assert _ops(log, "ext_bo") == [("ext_bo", 4096), ("ext_bo", 4096)]
    run.wait()
    bufs["out"].from_device()
    assert (bufs["out"].host() == 7).all()


def test_full_elf_needs_xrt_2_21(monkeypatch, tmp_path):
    calls: list = []
    monkeypatch.setitem(sys.modules, "pyxrt", make_fake(calls, full_elf=False))
    built = _built(tmp_path, ReLU(size=2048), NPU2)
    with pytest.raises(xrt.BackendUnavailableError, match="XRT >= 2.21"):
        xrt.XrtDevice(NPU2).load(built)


@pytest.mark.parametrize(
    ("state", "error"), [("ERROR", RunError), ("TIMEOUT", RunError)]
)
def test_failed_runs_raise(monkeypatch, tmp_path, state, error):
    monkeypatch.setitem(sys.modules, "pyxrt", make_fake([], end_state=state))
    built = _built(tmp_path, ReLU(size=2048), NPU1)
    device = xrt.XrtDevice(NPU1)
    run = device.load(built).new_run()
    run.set_args({n: device.alloc(4096, n) for n in ("x", "out")})
    run.start()
    with pytest.raises(error, match=f"ended in state {state}"):
        run.wait()
    assert run.state() is RunState.ERROR


def test_a_run_still_in_flight_times_out(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pyxrt", make_fake([], end_state="SUBMITTED"))
    built = _built(tmp_path, ReLU(size=2048), NPU1)
    device = xrt.XrtDevice(NPU1)
    run = device.load(built).new_run()
    run.set_args({n: device.alloc(4096, n) for n in ("x", "out")})
    run.start()
    with pytest.raises(TimeoutError, match="did not finish in 0.5 s"):
        run.wait(timeout=0.5)


def test_unbound_arguments_are_named(log, tmp_path):
    device = xrt.XrtDevice(NPU1)
    run = device.load(_built(tmp_path, ReLU(size=2048), NPU1)).new_run()
    run.set_args({"x": device.alloc(4096, "x")})
    with pytest.raises(RunError, match="no buffer bound for argument\\(s\\) out"):
        run.start()


def test_idle_runs_do_not_start(log, tmp_path):
    device = xrt.XrtDevice(NPU1)
    run = device.load(_built(tmp_path, ReLU(size=2048), NPU1)).new_run()
    run.start(idle=frozenset({0}))
    run.wait()
    assert run.state() is RunState.COMPLETED and not _ops(log, "start")


def test_feedback_needs_an_emit_and_planned_images_a_builder(log, tmp_path):
    device = xrt.XrtDevice(NPU1)
    image = device.load(_built(tmp_path, ReLU(size=2048), NPU1))
    run = image.new_run()
    run.bind_feedback(None)
    with pytest.raises(
        RunError, match="feedback .* full-ELF image ending in an Emit step"
    ):
        run.bind_feedback(image.new_run())
    spec = types.SimpleNamespace(name="g v0 step 0")
    with pytest.raises(NotImplementedError, match="loads built designs"):
        device.load(spec)
    built = _built(tmp_path, ReLU(size=2048), NPU1)
    hooked = xrt.XrtDevice(NPU1, image_builder=lambda s: built)
    assert hooked.load(spec).args == ("x", "out")


def test_host_words_replace_what_a_feeder_was_to_write(log, tmp_path):
    """After a loop (a feeder's Emit bound to this run), a host call's words
    are the ones the next start uploads: never the device's stale copy."""
    device = xrt.XrtDevice(NPU1)
    image = device.load(_built(tmp_path, ReLU(size=2048), NPU1))
    run, feeder = image.new_run(), image.new_run()
    run._fed, run._feeder = True, feeder  # what feeder's bind of "feedback" does
    run.write_scratchpad(np.array([7, 8, 9]))
    assert run.scratchpad.tolist() == [7, 8, 9]  # sized by the words written
    assert (run._fed, run._feeder) == (False, None)


def test_buffer_ranges_and_free(log):
    device = xrt.XrtDevice(NPU1)
    b = device.alloc(64, "b")
    with pytest.raises(ValueError, match=r"bytes \[60, 68\) are outside its 64"):
        b.to_device(60, 8)
    b.free()
    with pytest.raises(RunError, match="buffer b was freed"):
        b.host()


def test_without_pyxrt_the_error_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyxrt", None)
    with pytest.raises(xrt.BackendUnavailableError, match="ships with XRT >= 2.20"):
        xrt.XrtDevice(NPU1)


def test_selection_still_refuses_with_reasons(monkeypatch):
    monkeypatch.setattr(xrt, "missing", lambda: ["the pyxrt module"])
    with pytest.raises(xrt.BackendUnavailableError, match="lacks the pyxrt module"):
        xrt.open_device(NPU2)


def test_detect_maps_xrt_names_to_devices(log, monkeypatch):
    assert xrt.detect() == "npu1"
    fake = sys.modules["pyxrt"]
    monkeypatch.setattr(fake.device, "get_info", lambda self, key: "NPU Strix")
    assert xrt.detect() == "npu2"
    monkeypatch.setattr(fake.device, "get_info", lambda self, key: "something else")
    assert xrt.detect() is None


def test_a_pyxrt_without_elf_contexts_is_named(log, monkeypatch, tmp_path):
    fake = sys.modules["pyxrt"]

    def old_context(device, what):
        if not isinstance(what, str):
            raise TypeError("incompatible function arguments")

    monkeypatch.setattr(fake, "hw_context", old_context)
    device = xrt.XrtDevice(NPU2)
    with pytest.raises(xrt.BackendUnavailableError, match="XRT >= 2.21"):
        device.load(_built(tmp_path, ReLU(size=2048), NPU2))


def test_the_fake_refuses_what_xrt_refuses(log, tmp_path):
    """The fake pyxrt holds IRON to XRT's rules (not to what IRON expects)."""
    x = sys.modules["pyxrt"]
    dev = x.device(0)
    parent = x.bo(dev, 64, x.bo.host_only, 3)
    assert x.bo(parent, 32, 32).size == 32
    with pytest.raises(RuntimeError, match="exceeds parent size"):
        x.bo(parent, 32, 40)
    with pytest.raises(RuntimeError, match="must be positive"):
        x.bo(dev, 0, x.bo.host_only, 3)
    with pytest.raises(RuntimeError, match=r"bytes \[60, 68\) outside"):
        parent.sync(x.xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE, 8, 60)
    elf_kernel = x.ext.kernel(x.hw_context(dev, x.elf("a.elf")), "main:sequence")
    with pytest.raises(RuntimeError, match="ELF-backed kernel"):
        elf_kernel.group_id(0)
    kept = [x.hw_context(dev, f"uuid{i}") for i in range(5)]  # 6 with the ELF's
    with pytest.raises(RuntimeError, match="6 hardware contexts are open"):
        x.hw_context(dev, "uuid6")
    del kept[0]  # released with its last holder
    kept.append(x.hw_context(dev, "uuid6"))
    run = x.run(x.kernel(kept[-1], "MLIR_AIE"))
    instr = x.bo(dev, 24, x.bo.cacheable, 1)
    run.set_arg(0, 3)
    run.set_arg(1, instr)
    run.set_arg(2, 24)  # bytes, not words
    run.set_arg(3, parent)
    with pytest.raises(RuntimeError, match="not the instruction BO's 24 bytes"):
        run.start()
    run.set_arg(2, 6)
    run.start()


def test_npu1_loads_more_images_than_it_has_hardware_contexts(log, tmp_path):
    """Issue 15, failure 3: a Llama version on NPU1 has dozens of step images;
    the driver allows 6 contexts. The pool reopens them as runs need them."""
    device = xrt.XrtDevice(NPU1)
    images = [
        device.load(_built(tmp_path, AXPY(size=2048, scalar_factor=float(k)), NPU1))
        for k in range(1, 11)
    ]
    bufs = {n: device.alloc(4096, n) for n in ("x", "y", "out")}
    for _ in range(2):
        for image in images:
            run = image.new_run()
            run.set_args(bufs)
            run.start()
            run.wait()
            assert run.state() is RunState.COMPLETED
    assert sys.modules["pyxrt"].contexts["open"] == 6
    assert len(_ops(log, "register_xclbin")) == 10  # each xclbin registered once
    # each load opens one; cycling 10 images through 6 contexts reopens each
    assert len(_ops(log, "hw_context")) == 10 + 2 * 10
    assert len([c for c in log if c[0] == "bo" and c[2] == "cacheable"]) == 10


def test_a_context_refused_by_xrt_is_named_when_none_can_be_freed(
    log, monkeypatch, tmp_path
):
    fake = sys.modules["pyxrt"]
    fake.contexts["limit"] = 0  # another process holds them all
    with pytest.raises(RunError, match="another process holds the NPU's contexts"):
        xrt.XrtDevice(NPU1).load(_built(tmp_path, ReLU(size=2048), NPU1))


def test_a_failed_run_keeps_its_error_when_its_context_is_taken(monkeypatch, tmp_path):
    calls: list = []
    monkeypatch.setitem(sys.modules, "pyxrt", make_fake(calls, end_state="ERROR"))
    device = xrt.XrtDevice(NPU1, context_limit=1)
    a = device.load(_built(tmp_path, ReLU(size=2048), NPU1))
    bufs = {n: device.alloc(4096, n) for n in ("x", "out")}
    run = a.new_run()
    run.set_args(bufs)
    run.start()
    device.load(_built(tmp_path, ReLU(size=4096), NPU1))  # takes a's context
    assert a.context is None
    with pytest.raises(RunError, match="ended in state ERROR"):
        run.wait()
