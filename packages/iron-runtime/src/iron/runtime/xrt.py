"""The XRT backend: the driver interface over pyxrt, for a Ryzen AI NPU.

:class:`XrtDevice` implements :mod:`iron.runtime.driver` with pyxrt, imported
lazily (it ships with XRT, not on PyPI). It uses only names present in XRT
2.20 and later, plus the full-ELF names of 2.21 on NPU2 (shared notes
section 8, read from XRT's ``src/python/pybind11/src/pyxrt.cpp``):

* ``device(index)``; ``xclbin(path)``, ``device.register_xclbin``,
  ``hw_context(device, uuid)``, ``kernel(hw_context, name)`` for an xclbin
  (NPU1); ``elf(path)``, ``hw_context(device, elf)``,
  ``ext.kernel(hw_context, "main:sequence")`` for a full ELF (NPU2, >= 2.21:
  the binding landed in ``Xilinx/XRT`` commit ``2a6ffe7``, 2026-01-23, which
  tag ``2.21.75`` holds);
* ``bo(device, size, flags, group)`` with ``bo.flags.cacheable`` /
  ``host_only`` and ``kernel.group_id(i)`` for an xclbin kernel;
  ``ext.bo(device, size)`` for a full ELF's kernel; ``bo.write``, ``bo.read``,
  ``bo.sync(xclBOSyncDirection.*, size, offset)``;
* ``run(kernel)``, ``run.set_arg(i, bo | int)``, ``start``, ``wait``, ``state``.

Calling convention of an aiecc xclbin (mlir-aie ``runtime_lib/test_lib/
xrt_test_wrapper.h``; notes section 8): argument 0 the opcode 3, 1 the
instruction BO (cacheable, ``group_id(1)``, the words synced to the device),
2 the instruction count in 32-bit words (``xrt_test_wrapper.h`` line 295 at
v1.4.1 passes ``instr_v.size()`` of a ``std::vector<uint32_t>``, as every
``test/npu-xrt/*/test.cpp`` does; mlir-aie's Python host runtime passes bytes,
``python/utils/hostruntime/xrtruntime/hostruntime.py`` lines 338 and 350, an
unresolved difference upstream), then the data BOs (host_only) from
argument 3 in runtime-sequence order. A full ELF's data BOs start at 0, and
are made with ``ext.bo(device, size)``, as mlir-aie's own ELF host code does
(``test/npu-xrt/reconfigure_loadpdi/test.cpp``: ``xrt::ext::bo{device,
size}``): ``group_id`` on an ELF-backed kernel reads an empty list inside XRT
(``src/runtime_src/core/common/api/xrt_kernel.cpp`` ``kernel_impl::group_id``
takes ``ipctxs.front()``, which only the xclbin constructor fills), so it is
never called there.

Buffer objects keep their own host array (as the emulator's do) and move
bytes only on ``to_device``/``from_device``; the XRT BO behind one is made
when a run first binds it, with the group id of the kernel argument it binds
to (aiecc's NPU kernels put every data argument in the host bank; no group
for a full ELF's kernel), and the bytes staged before then are written at
that moment.

:func:`open_device` (what backend selection calls) opens the NPU where
nothing is missing, with :func:`build_image` as its image builder: a planned
image (an :class:`~iron.runtime.image.ImageSpec`) becomes a
:class:`~iron.runtime.npu.graph.GraphDesign` and is built by aiecc.
Arguments a graph image takes besides the runtime's buffers are made per
run: ``arena@<i>`` windows and ``arena#<k>`` stretches as sub-buffers of the arena's BO
(``bo(parent, size, offset)``) at the offset the run's scratchpad gives, and
``words`` as a BO holding the scratchpad. A full ELF ending in an Emit step
takes ``program`` (the composed Emit program, the run's ``program`` argument,
copied into a BO of the design's size) and ``feedback`` (the words
BO of the run :meth:`XrtRun.bind_feedback` named, which the Emit writes on
the device; that run then starts on it without the host writing it). Runs
on one hardware context are taken to execute in the order started, so a
fed run reads its words after its feeder wrote them. A fed run with
``arena@<i>`` windows waits for its feeder before it starts: the host binds
a window from the words the Emit wrote (so such loops run one run at a time).

Hardware contexts are a bounded pool per device (:data:`HW_CONTEXT_LIMITS`):
the amdxdna driver allows 6 at once on NPU1 (``amd/xdna-driver``
``src/driver/amdxdna/npu1_regs.c``, ``hwctx_limit``), and mlir-aie sizes its
own context cache 6 (npu1) and 32 (npu2) because "if you exceed these sizes,
you will fail to be able to create a new context"
(``python/utils/hostruntime/xrtruntime/hostruntime.py``). An NPU1 version has
one image per step (dozens for a Llama), so an image opens its context when
it is loaded or started and the least recently used image whose runs have
finished gives its context back when the pool is full. A bounded pool rather
than one xclbin holding every step's kernel: per-step builds and their cache
stay as they are, and it needs no aiecc feature (appending kernels to one
xclbin) that no upstream test runs at this scale; the price is reopening
contexts when a version cycles through more images than the pool holds.
"""

from __future__ import annotations

import collections
import importlib
import importlib.util
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from iron.core.device import Device
from iron.runtime.driver import (
    BufferObject,
    DriverDevice,
    LoadedImage,
    Run,
    RunError,
    RunState,
)

__all__ = [
    "HW_CONTEXT_LIMITS",
    "NPU_OPCODE",
    "BackendUnavailableError",
    "XrtBuffer",
    "XrtDevice",
    "XrtImage",
    "XrtRun",
    "NPU_MODELS",
    "build_image",
    "detect",
    "missing",
    "open_device",
]

#: The opcode argument of an aiecc NPU kernel (a DPU instruction sequence).
NPU_OPCODE = 3
#: Kernel argument of the instruction BO, and of the first data BO (xclbin flow).
INSTR_ARG, FIRST_DATA_ARG = 1, 3
#: Hardware contexts IRON keeps open per device (module docstring): the
#: driver's NPU1 limit, and mlir-aie's context cache size on NPU2.
HW_CONTEXT_LIMITS: dict[str, int] = {"npu1": 6, "npu2": 32}


class BackendUnavailableError(RuntimeError):
    """The chosen backend cannot run on this machine."""


def missing() -> list[str]:
    """What this machine lacks for the XRT backend, in words (empty if nothing)."""
    lacks = []
    if importlib.util.find_spec("pyxrt") is None:
        lacks.append(
            "the pyxrt module (it ships with XRT >= 2.20 under /opt/xilinx/xrt/python; "
            "it is not on PyPI)"
        )
    accel = Path("/dev/accel")
    if not (accel.is_dir() and any(accel.iterdir())):
        lacks.append("an NPU device node (/dev/accel/accel*)")
    if not Path("/sys/module/amdxdna").exists() and os.name == "posix":
        lacks.append("the amdxdna kernel driver (mainline Linux >= 6.14)")
    return lacks


#: The names XRT reports per IRON device (mlir-aie's ``xrtruntime/
#: hostruntime.py`` ``NPU_MODELS``; shared notes section 3).
NPU_MODELS: dict[str, tuple[str, ...]] = {
    "npu1": ("npu1", "Phoenix"),
    "npu2": ("npu4", "Strix", "npu5", "Strix Halo", "npu6", "Krackan"),
}


def detect(index: int = 0, pyxrt: ModuleType | None = None) -> str | None:
    """Which IRON device the NPU at ``index`` is (``npu1``/``npu2``), or None.

    Reads the name XRT reports (``device.get_info(xrt_info_device.name)``)
    and matches it against :data:`NPU_MODELS`.

    Raises:
        BackendUnavailableError: pyxrt cannot be imported.
    """
    x = pyxrt if pyxrt is not None else _import_pyxrt()
    name = str(x.device(index).get_info(x.xrt_info_device.name))
    for device, names in NPU_MODELS.items():
        if any(n.lower() in name.lower() for n in names):
            return device
    return None


def open_device(description: Device) -> XrtDevice:
    """Open the NPU for backend selection, building planned images with aiecc.

    The device asked for must be the one XRT reports (:func:`detect`): an
    npu2 design does not run on an NPU1.

    Raises:
        BackendUnavailableError: This machine lacks pyxrt, an NPU or the
            driver, or its NPU is not ``description`` (the message names
            them and the way out).
    """
    lacks = missing()
    if lacks:
        raise BackendUnavailableError(
            f"the xrt backend cannot run {description.name}: this machine lacks "
            f"{'; '.join(lacks)}. Use the emulated NPU: IRON_BACKEND=emu (or "
            f"iron.runtime.set_backend('emu'))"
        )
    present = detect()
    if present is not None and present != description.name:
        # An NPU1 user who forgot IRON_DEVICE must not load npu2 binaries.
        raise BackendUnavailableError(
            f"the xrt backend was asked for {description.name}, but XRT reports "
            f"this machine's NPU as {present}; set IRON_DEVICE={present} (or "
            f"iron.use_device({present!r}))"
        )
    return XrtDevice(
        description, image_builder=lambda spec: build_image(spec, description)
    )


def build_image(spec: Any, description: Device, **build_options: Any) -> tuple:
    """Build a planned image: its designs, then aiecc (cached).

    Returns:
        ``(built, graph)``: the :class:`~iron.runtime.npu.build.Built` and the
        :class:`~iron.runtime.npu.graph.GraphDesign` it came from (its
        windows, and the spec whose Emit program the ``program`` argument
        holds).

    Raises:
        NotImplementedError: A step has no NPU design (named).
        iron.runtime.npu.build.ToolMissingError: aiecc or Peano is absent.
    """
    from iron.runtime.npu.build import build
    from iron.runtime.npu.graph import graph_design

    extent = max(
        (p.offset + p.nbytes for p in spec.placement.values() if p.where == "arena"),
        default=0,
    )
    graph = graph_design(spec, description, arena_bytes=-(-extent // 4) * 4)
    if graph.design is None:  # the host does its one step
        return None, graph
    return build(graph.design, **build_options), graph


def _import_pyxrt() -> ModuleType:
    try:
        return importlib.import_module("pyxrt")
    except ImportError as e:
        raise BackendUnavailableError(
            f"cannot import pyxrt ({e}); it ships with XRT >= 2.20 (source "
            f"/opt/xilinx/xrt/setup.sh, or the amd-team/xrt PPA's python3 "
            f"package); it is not on PyPI, and `pip install xrt` is another project"
        ) from e


class XrtBuffer(BufferObject):
    """A buffer object: its own host array, and an XRT BO once a run binds it."""

    def __init__(self, device: XrtDevice, nbytes: int, name: str) -> None:
        self.device = device
        self.nbytes = int(nbytes)
        self.name = name
        self._host = np.zeros(self.nbytes, np.uint8)
        self.bo: Any = None
        self.group: int | None = None
        self.freed = False

    def _span(self, offset: int, nbytes: int | None) -> tuple[int, int]:
        if self.freed:
            raise RunError(f"buffer {self.name} was freed")
        size = self.nbytes - offset if nbytes is None else nbytes
        if offset < 0 or size < 0 or offset + size > self.nbytes:
            raise ValueError(
                f"buffer {self.name}: bytes [{offset}, {offset + size}) are outside "
                f"its {self.nbytes}"
            )
        return offset, size

    def host(self) -> np.ndarray:
        if self.freed:
            raise RunError(f"buffer {self.name} was freed")
        return self._host

    def bind(self, group: int | None) -> Any:
        """The XRT BO, made now in ``group`` (with the staged bytes) if new.

        ``group`` None: for a full ELF's kernel (``ext.bo``, no group id).
        """
        if self.bo is None:
            x = self.device.pyxrt
            self.bo = self.device.data_bo(self.nbytes, group)
            self.group = group
            self.bo.write(self._host, 0)
            self.bo.sync(x.xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE, self.nbytes, 0)
        return self.bo

    def to_device(self, offset: int = 0, nbytes: int | None = None) -> None:
        offset, size = self._span(offset, nbytes)
        if self.bo is None or size == 0:
            return  # staged: bind() writes the whole host array
        x = self.device.pyxrt
        self.bo.write(self._host[offset : offset + size], offset)
        self.bo.sync(x.xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE, size, offset)

    def from_device(self, offset: int = 0, nbytes: int | None = None) -> None:
        offset, size = self._span(offset, nbytes)
        if self.bo is None or size == 0:
            return  # never bound: the device holds what was staged
        x = self.device.pyxrt
        self.bo.sync(x.xclBOSyncDirection.XCL_BO_SYNC_BO_FROM_DEVICE, size, offset)
        raw = np.asarray(self.bo.read(size, offset))
        self._host[offset : offset + size] = raw.view(np.uint8).reshape(-1)[:size]

    def free(self) -> None:
        self.freed = True
        self.bo = None
        self._host = np.zeros(0, np.uint8)


class XrtRun(Run):
    """One run of a loaded design: its arguments bound by name, start and wait."""

    def __init__(self, image: XrtImage) -> None:
        self.image = image
        self.scratchpad = np.zeros(0, np.int32)
        self._args: dict[str, XrtBuffer] = {}
        self._run: Any = None
        self._state = RunState.NEW
        self._words: Any = None  # the scratchpad's BO, made on first use
        self._windows: list[Any] = []  # this start's arena sub-buffers
        self._feedback: XrtRun | None = None  # the run this run's Emit feeds
        self._fed = False  # a feeder's Emit writes this run's words BO
        self._feeder: XrtRun | None = None
        self._error: RunError | None = None  # how the run ended, if it failed

    def write_scratchpad(self, words: np.ndarray) -> None:
        # The host's words replace what a feeder's Emit wrote or was to write
        # into this run's words BO: the next start uploads these, and neither
        # waits on the feeder nor trusts the device's copy (as the emulator).
        self.scratchpad = np.array(words, np.int32).reshape(-1)
        self._fed, self._feeder = False, None

    def set_args(self, buffers: Mapping[str, BufferObject]) -> None:
        for key, bo in buffers.items():
            if not isinstance(bo, XrtBuffer):
                raise TypeError(f"argument {key} is not an XRT buffer: {bo!r}")
        self._args = dict(buffers)  # type: ignore[arg-type]  # each checked above

    def start(self, idle: frozenset[int] = frozenset()) -> None:
        image = self.image
        if image.released:
            raise RunError(f"{image.name}: the image was released")
        if idle:  # a one-step image whose step is idle this call
            self._state = RunState.COMPLETED
            self._run = None
            return
        made = {w.arg for w in image.windows} | {s.arg for s in image.segments}
        made |= {"words", "program", "feedback"}
        lacking = [a for a in image.args if a not in self._args and a not in made]
        if lacking:
            raise RunError(
                f"{image.name}: no buffer bound for argument(s) {', '.join(lacking)}; "
                f"set_args with every one of {', '.join(image.args)}"
            )
        x = image.device.pyxrt
        kernel = image.device.activate(image, self)
        run = x.run(kernel) if kernel is not None else None
        first = 0
        if run is not None and image.instructions is not None:
            run.set_arg(0, NPU_OPCODE)
            run.set_arg(INSTR_ARG, image.instructions)
            run.set_arg(2, image.instruction_words)
            first = FIRST_DATA_ARG
        for gather in image.gathers:  # the host's steps, before the run
            gather.run(self._args, self.scratchpad)
        if run is None:  # the host did the image's one step
            image.finished(self)
            self._state = RunState.COMPLETED
            self._run = None
            return
        feeder = self._feeder
        if self._fed and image.windows and feeder is not None:
            # A window's offset comes from the words the feeder's Emit writes:
            # the host needs them before it can bind this run's sub-buffers.
            feeder.wait()
        self._windows = []
        for k, name in enumerate(image.args):
            arg = first + k
            run.set_arg(arg, self._bo(name, image.group(arg)))
        run.start()
        self._run = run
        self._state = RunState.QUEUED

    def _words_bo(self, group: int | None) -> Any:
        """This run's scratchpad BO (made on first use)."""
        if self._words is None:
            self._words = self.image.device.data_bo(self.image.words_bytes, group)
        return self._words

    def _bo(self, name: str, group: int | None) -> Any:
        """The XRT BO argument ``name`` takes this start."""
        image, x = self.image, self.image.device.pyxrt
        if name == "program":  # the version's Emit program, padded to the design's
            return image.program_bo(group, self._args.get("program"))
        if name in self._args:
            return self._args[name].bind(group)
        if name == "words":
            bo = self._words_bo(group)
            if self._fed:  # the feeder's Emit wrote it on the device
                self._fed = False
                return bo
            pad = np.ascontiguousarray(self.scratchpad, np.int32).view(np.uint8)
            data = np.zeros(image.words_bytes, np.uint8)
            data[: min(pad.size, data.size)] = pad[: data.size]
            bo.write(data, 0)
            bo.sync(x.xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE, data.size, 0)
            return bo
        if name == "feedback":
            target = self._feedback
            if target is None:
                raise RunError(
                    f"{image.name}: its Emit writes the next run's scratchpad; "
                    f"bind_feedback(run) first (CarriedLoop does)"
                )
            target._fed, target._feeder = True, self
            return target._words_bo(group)
        seg = next((s for s in image.segments if s.arg == name), None)
        if seg is not None:  # a static stretch of the arena (below 2^31 bytes)
            parent = self._args["arena"]
            size = min(seg.nbytes, parent.nbytes - seg.start)
            sub = x.bo(parent.bind(group), size, seg.start)
            self._windows.append(sub)
            return sub
        window = next(w for w in image.windows if w.arg == name)
        parent = self._args[window.base]
        shift = window.shift(self.scratchpad)
        if not 0 <= shift < parent.nbytes or shift % 4:
            raise RunError(
                f"{image.name}: {name} starts at byte {shift} of {window.base} this "
                f"call, outside its {parent.nbytes} bytes or off a 4-byte boundary"
            )
        sub = x.bo(parent.bind(group), parent.nbytes - shift, shift)
        self._windows.append(sub)  # kept alive while the run is in flight
        return sub

    def wait(self, timeout: float | None = None) -> None:
        if self._run is None:
            if self._error is not None:
                raise self._error
            return
        x = self.image.device.pyxrt
        if timeout is None:
            self._run.wait()
        else:
            self._run.wait(int(timeout * 1000))
        state = self._run.state()
        states = x.ert_cmd_state
        in_flight = (states.ERT_CMD_STATE_QUEUED, states.ERT_CMD_STATE_SUBMITTED)
        if timeout is not None and state in in_flight:
            raise TimeoutError(
                f"{self.image.name}: the run did not finish in {timeout} s"
            )
        # Finished: drop the XRT run (it holds the kernel, and so the context).
        self._run = None
        self.image.finished(self)
        if state == states.ERT_CMD_STATE_COMPLETED:
            self._state = RunState.COMPLETED
            target = self._feedback
            if target is not None and target._words is not None:
                # what this run's Emit wrote, for the host to read
                n = self.image.words_bytes
                target._words.sync(
                    x.xclBOSyncDirection.XCL_BO_SYNC_BO_FROM_DEVICE, n, 0
                )
                raw = np.asarray(target._words.read(n, 0)).view(np.uint8)
                words = raw.reshape(-1)[: target.scratchpad.size * 4].view(np.int32)
                target.scratchpad[: words.size] = words
            return
        self._state = RunState.ERROR
        self._error = RunError(f"{self.image.name}: the NPU run ended in state {state}")
        raise self._error

    def state(self) -> RunState:
        return self._state

    def bind_feedback(self, target: Run | None) -> None:
        if target is not None and "feedback" not in self.image.args:
            raise RunError(
                f"{self.image.name}: run-to-run feedback (Emit) on the NPU needs a "
                f"full-ELF image ending in an Emit step; this image has none"
            )
        if target is not None and not isinstance(target, XrtRun):
            raise TypeError(f"feedback target is not an XRT run: {target!r}")
        self._feedback = target


class XrtImage(LoadedImage):
    """A built design loaded on the NPU: its hardware context and kernel."""

    def __init__(self, device: XrtDevice, built: Any, graph: Any = None) -> None:
        x = device.pyxrt
        self.device = device
        self.graph = graph
        self.windows = tuple(graph.windows) if graph is not None else ()
        self.segments = tuple(getattr(graph, "segments", ())) if graph else ()
        self.gathers = tuple(graph.host_gathers) if graph is not None else ()
        self.released = False
        self.instructions: Any = None
        self.instruction_words = 0
        self._program: Any = None
        self._in_flight: set[XrtRun] = set()
        self.elf = built is not None and built.elf is not None
        if built is None:  # an image whose one step the host does
            self.name = graph.name
            self.args: tuple[str, ...] = ()
            self.words_bytes = 4
            self.kernel: Any = None
            self.context: Any = None
            self._built = None
            return
        sizes = dict(zip(built.design.args, built.design.arg_bytes))
        words = sizes.get("words", sizes.get("feedback"))
        self.words_bytes = 4 if words is None else int(words)
        self.name = f"{built.design.operator} ({built.key[:12]})"
        self.args = tuple(built.design.args)
        self.kernel = self.context = None
        self._built = built
        self._uuid: Any = None  # the registered xclbin's (NPU1)
        if self.elf and (not hasattr(x, "elf") or not hasattr(x, "ext")):
            raise BackendUnavailableError(
                f"{self.name} is a full ELF (NPU2); loading it needs XRT >= 2.21 "
                f"(pyxrt.elf, pyxrt.ext.kernel), which this pyxrt lacks"
            )
        device.activate(self)

    def open(self) -> Any:
        """Make this image's hardware context and kernel (the pool's call)."""
        x, device, built = self.device.pyxrt, self.device, self._built
        assert built is not None  # an image the host runs opens no context
        if self.elf:
            try:
                self.context = x.hw_context(device.handle, x.elf(str(built.elf)))
            except TypeError as e:  # XRT before 2.21: no hw_context(device, elf)
                raise BackendUnavailableError(
                    f"{self.name} is a full ELF (NPU2); this pyxrt cannot make a "
                    f"hardware context from an ELF ({e}); it needs XRT >= 2.21"
                ) from e
            self.kernel = x.ext.kernel(self.context, built.kernel)
            return self.kernel
        if self._uuid is None:
            xclbin = x.xclbin(str(built.xclbin))
            device.handle.register_xclbin(xclbin)
            self._uuid = xclbin.get_uuid()
        self.context = x.hw_context(device.handle, self._uuid)
        self.kernel = x.kernel(self.context, built.kernel)
        if self.instructions is None:  # a device BO: it outlives the context
            words = np.fromfile(built.insts, dtype=np.uint32)
            self.instruction_words = int(words.size)
            self.instructions = x.bo(
                device.handle,
                words.nbytes,
                x.bo.cacheable,
                self.kernel.group_id(INSTR_ARG),
            )
            self.instructions.write(words.view(np.uint8), 0)
            self.instructions.sync(
                x.xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE, words.nbytes, 0
            )
        return self.kernel

    def close(self) -> None:
        """Give the hardware context back, once this image's runs finish."""
        for run in list(self._in_flight):
            try:
                run.wait()
            except RunError:
                pass  # kept in the run: its owner's wait raises it
        self.kernel = self.context = None

    def finished(self, run: XrtRun) -> None:
        """``run`` no longer holds this image's context."""
        self._in_flight.discard(run)

    def group(self, arg: int) -> int | None:
        """The memory group of kernel argument ``arg``: None for a full ELF.

        XRT's ``group_id`` on an ELF-backed kernel is undefined (module
        docstring); the ELF's data BOs are ``ext.bo`` s with no group.
        """
        if self.elf:
            return None
        return self.kernel.group_id(arg)

    def program_bo(self, group: int | None, given: BufferObject | None) -> Any:
        """The Emit program's BO, holding the run's ``program`` argument.

        ``given`` holds the program ``emit_to`` composed (a buffer of the
        program's size); it is copied into a BO of the design's size.
        """
        from iron.core.emit import stored
        from iron.runtime.npu.designs.emit import PROGRAM_WORDS

        x = self.device.pyxrt
        program = None if given is None else stored(given.host())
        if program is None or program.size == 0:
            raise RunError(
                f"{self.name}: its Emit has no program; call emit_to(target) first"
            )
        if program.size > PROGRAM_WORDS:
            raise RunError(
                f"{self.name}: its Emit program has {program.size} words; the "
                f"device's program buffer holds {PROGRAM_WORDS}"
            )
        data = np.zeros(PROGRAM_WORDS, np.int32)
        data[: program.size] = program
        if self._program is None:
            self._program = self.device.data_bo(data.nbytes, group)
        self._program.write(data.view(np.uint8), 0)
        self._program.sync(
            x.xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE, data.nbytes, 0
        )
        return self._program

    def new_run(self) -> XrtRun:
        return XrtRun(self)

    def release(self) -> None:
        self.device.deactivate(self)
        self.released = True
        self.instructions = self.kernel = self.context = None


class XrtDevice(DriverDevice):
    """An NPU opened through pyxrt.

    Args:
        description: The device it is (npu1 or npu2).
        index: The XRT device index.
        pyxrt: The pyxrt module (imported when None; tests pass a fake).
        image_builder: Builds what :meth:`load` is given into a
            :class:`~iron.runtime.npu.build.Built`, or ``(built, graph)`` as
            :func:`build_image` does; the default takes Built designs only.
        context_limit: Hardware contexts open at once (default
            :data:`HW_CONTEXT_LIMITS` of the device).

    Raises:
        BackendUnavailableError: pyxrt cannot be imported.
    """

    backend = "xrt"

    def __init__(
        self,
        description: Device,
        index: int = 0,
        pyxrt: ModuleType | None = None,
        image_builder: Callable[[Any], Any] | None = None,
        context_limit: int | None = None,
    ) -> None:
        self.description = description
        self.name = description.name
        self.pyxrt = pyxrt if pyxrt is not None else _import_pyxrt()
        self.handle = self.pyxrt.device(index)
        self._build = image_builder
        self._lock = threading.RLock()
        self.context_limit = (
            HW_CONTEXT_LIMITS.get(description.name, HW_CONTEXT_LIMITS["npu1"])
            if context_limit is None
            else int(context_limit)
        )
        if self.context_limit < 1:
            raise ValueError(
                f"context_limit={context_limit}: an NPU needs at least one "
                f"hardware context"
            )
        self._open: collections.OrderedDict[int, XrtImage] = (
            collections.OrderedDict()
        )  # images holding a context, least recently used first

    def alloc(self, nbytes: int, name: str) -> XrtBuffer:
        return XrtBuffer(self, nbytes, name)

    def activate(self, image: XrtImage, run: XrtRun | None = None) -> Any:
        """``image``'s kernel, its context opened in the pool if need be.

        The least recently used images whose runs finished give their
        contexts back while the pool is full, or while XRT refuses a new one
        (another process may hold some). ``run``, if given, is counted as in
        flight on ``image`` from now on.

        Raises:
            RunError: XRT refuses a context and no IRON image holds one.
        """
        if image._built is None:
            return None
        with self._lock:
            key = id(image)
            if image.context is None:
                while True:
                    while len(self._open) >= self.context_limit:
                        self._evict()
                    try:
                        image.open()
                        break
                    except BackendUnavailableError:
                        raise
                    except Exception as e:
                        if not self._open:
                            raise RunError(
                                f"{image.name}: XRT refused a hardware context "
                                f"({e}) and this process holds none; another "
                                f"process holds the NPU's contexts (NPU1 allows "
                                f"{HW_CONTEXT_LIMITS['npu1']}): close it and retry"
                            ) from e
                        self._evict()
                self._open[key] = image
            self._open.move_to_end(key)
            if run is not None:
                image._in_flight.add(run)
            return image.kernel

    def _evict(self) -> None:
        _, image = self._open.popitem(last=False)
        image.close()

    def deactivate(self, image: XrtImage) -> None:
        """Close ``image``'s context (on release)."""
        with self._lock:
            if self._open.pop(id(image), None) is not None:
                image.close()

    def data_bo(self, nbytes: int, group: int | None) -> Any:
        """A data BO: host-only in ``group`` (xclbin kernels), else ``ext.bo``."""
        x = self.pyxrt
        if group is None:
            return x.ext.bo(self.handle, nbytes)
        return x.bo(self.handle, nbytes, x.bo.host_only, group)

    def load(self, image: Any) -> XrtImage:
        """Load a built design (or what the image builder turns into one).

        Raises:
            NotImplementedError: ``image`` is not a built design and no image
                builder was given (:func:`open_device` gives :func:`build_image`).
        """
        from iron.runtime.npu.build import Built

        if not isinstance(image, Built):
            if self._build is None:
                raise NotImplementedError(
                    f"{type(image).__name__} {getattr(image, 'name', '')!s}: the XRT "
                    f"driver loads built designs (iron.runtime.npu.build.Built); "
                    f"open the device with iron.runtime.xrt.open_device (or pass "
                    f"image_builder=) to build planned images"
                )
            image = self._build(image)
        graph = None
        if isinstance(image, tuple):  # (built, graph) from build_image
            image, graph = image
        with self._lock:
            return XrtImage(self, image, graph)
