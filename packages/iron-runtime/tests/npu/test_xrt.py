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


def make_fake(log: list, *, full_elf: bool = True, end_state: str = "COMPLETED"):
    m = types.ModuleType("pyxrt")

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

    class bo:
        flags = Flags
        cacheable, host_only = Flags.cacheable, Flags.host_only

        def __init__(self, device, size, flags, group=None):
            if group is None:  # bo(parent, size, offset): a sub-buffer
                parent, offset = device, flags
                self.size, self.flags, self.group = size, parent.flags, parent.group
                self.host = parent.host[offset : offset + size]
                self.dev = parent.dev[offset : offset + size]
                log.append(("sub_bo", parent, size, offset))
                return
            self.size, self.flags, self.group = size, flags, group
            self.host = np.zeros(size, np.uint8)
            self.dev = np.zeros(size, np.uint8)
            log.append(("bo", size, flags, group))

        def write(self, buf, seek):
            data = np.asarray(buf).view(np.uint8).reshape(-1)
            self.host[seek : seek + data.size] = data
            log.append(("write", self, data.size, seek))

        def read(self, size, skip):
            return self.host[skip : skip + size].copy()

        def sync(self, direction, size, offset):
            span = slice(offset, offset + size)
            if direction == Sync.XCL_BO_SYNC_BO_TO_DEVICE:
                self.dev[span] = self.host[span]
            else:
                self.host[span] = self.dev[span]
            log.append(("sync", self, direction, size, offset))

    class device:
        def __init__(self, index):
            log.append(("device", index))

        def get_info(self, key):
            return {"name": "NPU Strix"}[key]

        def register_xclbin(self, xclbin):
            log.append(("register_xclbin", xclbin.path))

    class xclbin:
        def __init__(self, path):
            self.path = path

        def get_uuid(self):
            return "uuid-" + Path(self.path).name

    class hw_context:
        def __init__(self, device, what):
            log.append(
                ("hw_context", what if isinstance(what, str) else type(what).__name__)
            )

    class kernel:
        def __init__(self, ctx, name):
            self.name = name
            log.append(("kernel", name))

        def group_id(self, arg):
            return 100 + arg

    class run:
        def __init__(self, kernel):
            self.args = {}
            log.append(("run", kernel.name))

        def set_arg(self, index, value):
            self.args[index] = value
            log.append(("set_arg", index, value))

        def start(self):
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
    if full_elf:

        class elf:
            def __init__(self, path):
                self.path = path

        m.elf = elf
        m.ext = types.SimpleNamespace(kernel=kernel)
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
    assert [c[3] for c in log if c[0] == "bo"] == [100, 101]


def test_full_elf_needs_xrt_2_23(monkeypatch, tmp_path):
    calls: list = []
    monkeypatch.setitem(sys.modules, "pyxrt", make_fake(calls, full_elf=False))
    built = _built(tmp_path, ReLU(size=2048), NPU2)
    with pytest.raises(xrt.BackendUnavailableError, match="XRT >= 2.23"):
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
    assert xrt.detect() == "npu2"
    fake = sys.modules["pyxrt"]
    monkeypatch.setattr(fake.device, "get_info", lambda self, key: "NPU Phoenix")
    assert xrt.detect() == "npu1"
    monkeypatch.setattr(fake.device, "get_info", lambda self, key: "something else")
    assert xrt.detect() is None


def test_a_pyxrt_without_elf_contexts_is_named(log, monkeypatch, tmp_path):
    fake = sys.modules["pyxrt"]

    def old_context(device, what):
        if not isinstance(what, str):
            raise TypeError("incompatible function arguments")

    monkeypatch.setattr(fake, "hw_context", old_context)
    device = xrt.XrtDevice(NPU2)
    with pytest.raises(xrt.BackendUnavailableError, match="XRT >= 2.23"):
        device.load(_built(tmp_path, ReLU(size=2048), NPU2))
