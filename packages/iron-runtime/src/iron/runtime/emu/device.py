"""The emulated NPU's driver: buffers, images and runs on a worker thread.

A functional model of the device at the level the runtime sees. Device
memory is real host memory: every buffer object has a host view and a
separate device copy, moved only by ``to_device``/``from_device`` (so a
missing sync is a wrong answer here too); a range of a host view released
once on the device (``release_host``: an uploaded weight) gives its pages
back, and float32 copies of bf16 weights are kept within the memory budget
(:mod:`iron.runtime.emu.memory`). Runs execute in order on one
worker thread, so ``start`` returns at once, ``wait`` blocks, and several
runs can be in flight; a run's Emit writes the scratchpad of the run its
feedback is bound to. The emulator is named as one wherever it is used; it
models no timing, placement or routing.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import logging
import math
import mmap
import queue
import signal
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from ml_dtypes import bfloat16

from iron.core.device import Device
from iron.runtime.driver import (
    BufferObject,
    DriverDevice,
    LoadedImage,
    Run,
    RunError,
    RunState,
)
from iron.runtime.emu.execute import RunProgram, as_float32, execute
from iron.runtime.emu.memory import emu_memory
from iron.runtime.image import ImageSpec

__all__ = ["EmuBuffer", "EmuDevice", "EmuImage", "EmuRun", "Widenings"]

logger = logging.getLogger("iron.runtime.emu")


class Widenings:
    """The float32 copies of bf16 weights one device keeps, within its budget.

    The budget (:func:`iron.runtime.emu.memory.emu_memory`) is read on every
    request, so a changed budget applies from the next weight read: a copy
    is made while the copies fit in ``(budget - 1)`` times the device's
    memory (its live buffers' bytes), first come first kept, and a kept
    copy is dropped when it no longer fits. The device's bytes are counted
    as buffers come and go, so a request costs no walk over the buffers.
    """

    def __init__(self) -> None:
        #: The bytes of every copy kept now.
        self.kept = 0
        self._live = 0

    def add(self, buffer: EmuBuffer) -> None:
        """Count ``buffer``'s bytes until it is freed or dropped."""
        self._live += buffer.nbytes
        weakref.finalize(buffer, self._gone, buffer.nbytes, buffer.gone)

    def _gone(self, nbytes: int, gone: list[bool]) -> None:
        if not gone:  # dropped without free(): its bytes leave the device
            gone.append(True)
            self._live -= nbytes

    def remove(self, buffer: EmuBuffer) -> None:
        """Stop counting ``buffer`` (freed)."""
        self._gone(buffer.nbytes, buffer.gone)

    def device_bytes(self) -> int:
        """The device memory: every live buffer's bytes."""
        return self._live

    def fits(self, nbytes: int) -> bool:
        """Whether the copies kept and ``nbytes`` more fit in the budget."""
        budget = emu_memory()
        if math.isinf(budget):
            return True
        return self.kept + nbytes <= (budget - 1) * self._live


class EmuBuffer(BufferObject):
    """A buffer object: a host view and the device's own copy of its bytes.

    Args:
        nbytes: Its size.
        name: Named in errors.
        widenings: The device's float32 copies and their budget (a buffer
            made alone has its own).
    """

    def __init__(
        self, nbytes: int, name: str, widenings: Widenings | None = None
    ) -> None:
        self.nbytes = int(nbytes)
        self.name = name
        self._mapped, self._host = _host_memory(self.nbytes)
        # [start, end) byte ranges the host released (sorted, disjoint)
        self._released: list[tuple[int, int]] = []
        self.device = np.zeros(self.nbytes, np.uint8)
        self.freed = False
        # copies of weights (float32, or decoded) by (offset, nbytes);
        # to_device drops those of the bytes it sends
        self._widened: dict[tuple[int, int], np.ndarray] = {}
        # set once its bytes leave the device's count (freed or dropped)
        self.gone: list[bool] = []
        self._widenings = Widenings() if widenings is None else widenings
        self._widenings.add(self)

    def _range(self, offset: int, nbytes: int | None) -> slice:
        if self.freed:
            raise RunError(f"buffer {self.name} was freed")
        end = self.nbytes if nbytes is None else offset + nbytes
        if not 0 <= offset <= end <= self.nbytes:
            raise ValueError(
                f"buffer {self.name}: bytes [{offset}, {end}) are outside its "
                f"{self.nbytes}"
            )
        return slice(offset, end)

    def host(self) -> np.ndarray:
        if self.freed:
            raise RunError(f"buffer {self.name} was freed")
        return self._host

    def to_device(self, offset: int = 0, nbytes: int | None = None) -> None:
        span = self._range(offset, nbytes)
        if (
            self._released
            and span.start < span.stop
            and _overlaps(self._released, span.start, span.stop)
        ):
            start, end = next(
                (max(s, span.start), min(e, span.stop))
                for s, e in self._released
                if s < span.stop and span.start < e
            )
            raise RunError(
                f"buffer {self.name}: bytes [{start}, {end}) of the host view were "
                f"released once on the device (release_host), so the host holds "
                f"nothing to send there; read them back with from_device before "
                f"changing and sending them"
            )
        self.device[span] = self._host[span]
        # the copies of bytes sent are stale now: their memory is given back
        # at once (a run's inputs sent to the arena leave its weights' kept)
        stale = [
            key
            for key in self._widened
            if key[0] < span.stop and span.start < key[0] + key[1]
        ]
        for key in stale:
            self._widenings.kept -= self._widened.pop(key).nbytes

    def release_host(self, offset: int = 0, nbytes: int | None = None) -> None:
        """Drop the host view's pages under ``[offset, offset + nbytes)``.

        The device copy keeps the bytes; the host view reads zeros there
        (the pages are given back with ``madvise(MADV_DONTNEED)``; a page
        shared with bytes not released keeps them) until ``from_device``
        brings the range back, and ``to_device`` refuses to send a released
        byte: a stale host view is never sent unnoticed.
        """
        span = self._range(offset, nbytes)
        if span.start == span.stop:
            return
        self._released, start, end = _merged(self._released, span.start, span.stop)
        if self._mapped is None:
            return
        # the whole pages inside the released run this range joined
        first = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE
        last = end // mmap.PAGESIZE * mmap.PAGESIZE
        if first < last:
            self._mapped.madvise(mmap.MADV_DONTNEED, first, last - first)

    def copies_fit(self) -> bool:
        """Whether every copy the device keeps fits its budget now."""
        return self._widenings.fits(0)

    def widened(self, offset: int, nbytes: int, shape: tuple[int, ...]) -> np.ndarray:
        """The bf16 values at ``[offset, offset + nbytes)``, as float32 if kept.

        A weight's kernel model computes in float32 on every call; a copy
        widened once per upload (every ``to_device`` makes it stale) keeps
        the emulator from converting the weight on every step. Copies are
        kept within the device's memory budget
        (:func:`iron.runtime.set_emu_memory`); beyond it the bf16 values are
        given as they are, which every kernel model widens itself (a GEMV
        in cache-sized blocks). The values are the same either way: every
        bf16 is exactly a float32.
        """
        return self.kept(offset, nbytes, bfloat16, shape, as_float32)

    def kept(
        self,
        offset: int,
        nbytes: int,
        dtype: Any,
        shape: tuple[int, ...],
        make: Callable[[np.ndarray], np.ndarray],
        fits: bool | None = None,
    ) -> np.ndarray:
        """``make``'s copy of the ``dtype`` values at ``[offset, offset + nbytes)``, if kept.

        A copy is made once per upload (every ``to_device`` makes it stale)
        and kept while it fits the device's memory budget
        (:func:`iron.runtime.set_emu_memory`); beyond it the values are
        given as they are stored. ``make`` is a weight's float32 widening
        (:meth:`widened`) or an operator's decoding
        (``Operator.decoded``: a packed weight as the bf16 its kernel
        computes with); a reader takes either form to the same bits.
        ``fits``: whether every copy kept fits the budget, when the caller
        has just asked (a run asks once for all its weights).
        """
        key = (offset, nbytes)
        pool = self._widenings
        kept = self._widened.get(key)
        if kept is not None and (pool.fits(0) if fits is None else fits):
            return kept  # every copy kept still fits
        kept = self._widened.pop(key, None)
        if kept is not None:
            pool.kept -= kept.nbytes
            if pool.fits(kept.nbytes):
                self._widened[key] = kept
                pool.kept += kept.nbytes
                return kept
        raw = self.device[offset : offset + nbytes].view(dtype).reshape(shape)
        # a copy's bytes, from its first row's (every row is made alike)
        rows = shape[0] if shape else 1
        size = make(raw[:1]).nbytes * rows if shape and rows else 2 * nbytes
        if not pool.fits(size):
            return raw
        copy = make(raw)
        self._widened[key] = copy
        pool.kept += copy.nbytes
        return copy

    def from_device(self, offset: int = 0, nbytes: int | None = None) -> None:
        span = self._range(offset, nbytes)
        self._host[span] = self.device[span]
        if self._released:
            self._released = _without(self._released, span.start, span.stop)

    def free(self) -> None:
        self.freed = True
        self._widenings.remove(self)
        self._widenings.kept -= sum(w.nbytes for w in self._widened.values())
        self._widened.clear()
        self._host = self.device = np.zeros(0, np.uint8)
        self._mapped = None
        self._released = []


def _host_memory(nbytes: int) -> tuple[mmap.mmap | None, np.ndarray]:
    """A zeroed host view of ``nbytes``, in private anonymous pages where it can.

    Private anonymous pages are what ``release_host`` can give back
    (``madvise(MADV_DONTNEED)``: https://man7.org/linux/man-pages/man2/madvise.2.html);
    elsewhere the view is a numpy array and releasing only marks the bytes.
    """
    flags = getattr(mmap, "MAP_PRIVATE", None)
    anonymous = getattr(mmap, "MAP_ANONYMOUS", None)
    if nbytes < mmap.PAGESIZE or None in (
        flags,
        anonymous,
        getattr(mmap, "MADV_DONTNEED", None),
    ):
        return None, np.zeros(nbytes, np.uint8)
    mapped = mmap.mmap(-1, nbytes, flags=flags | anonymous)  # type: ignore[operator]
    return mapped, np.frombuffer(mapped, np.uint8)


def _overlaps(runs: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether ``[start, end)`` overlaps one of the sorted, disjoint ``runs``."""
    i = bisect.bisect_right(runs, (start, math.inf)) - 1
    if i >= 0 and runs[i][1] > start:
        return True
    return i + 1 < len(runs) and runs[i + 1][0] < end


def _merged(
    runs: list[tuple[int, int]], start: int, end: int
) -> tuple[list[tuple[int, int]], int, int]:
    """``runs`` with ``[start, end)`` added, and the run it now lies in."""
    kept = []
    for s, e in runs:
        if e < start or s > end:
            kept.append((s, e))
        else:
            start, end = min(s, start), max(e, end)
    kept.append((start, end))
    kept.sort()
    return kept, start, end


def _without(
    runs: list[tuple[int, int]], start: int, end: int
) -> list[tuple[int, int]]:
    """``runs`` less ``[start, end)``."""
    kept = []
    for s, e in runs:
        if s < start:
            kept.append((s, min(e, start)))
        if e > end:
            kept.append((max(s, end), e))
    return kept


class EmuRun(Run):
    """A run of an emulated image: queued to the device's worker thread."""

    def __init__(self, image: EmuImage) -> None:
        self.image = image
        self.scratchpad = np.zeros(image.spec.scratchpad_words, np.int32)
        self._args: dict[str, EmuBuffer] = {}
        self._feedback: EmuRun | None = None
        self._state = RunState.NEW
        self._done = threading.Event()
        self._done.set()
        self._error: BaseException | None = None
        self._idle: frozenset[int] = frozenset()
        self._upstream: BaseException | None = None

    def set_args(self, buffers: Mapping[str, BufferObject]) -> None:
        for key, bo in buffers.items():
            if not isinstance(bo, EmuBuffer):
                raise TypeError(f"argument {key} is not an emulator buffer: {bo!r}")
        self._args = dict(buffers)  # type: ignore[arg-type]  # each checked above

    def write_scratchpad(self, words: np.ndarray) -> None:
        super().write_scratchpad(words)
        # the host's words are fresh: a feeder's earlier failure no longer
        # stands between this run and its next start
        self._upstream = None

    def _mark_queued(self, idle: frozenset[int]) -> None:
        """Check the run can start and mark it queued (not yet submitted)."""
        if self._state in (RunState.QUEUED, RunState.RUNNING):
            raise RunError(f"{self.image.spec.name}: this run is already in flight")
        if self.image.released:
            raise RunError(f"{self.image.spec.name}: the image was released")
        self._idle = idle
        self._error = None
        self._done.clear()
        self._state = RunState.QUEUED

    def start(self, idle: frozenset[int] = frozenset()) -> None:
        self._mark_queued(idle)
        self.image.device.submit(self)

    def call(self, idle: frozenset[int] = frozenset()) -> None:
        """Start the run and wait for it: here, when the device is idle.

        With no run queued or running on the device, the run executes in
        the calling thread, in the order it would have on the worker, and
        without the worker's two wake-ups. A Ctrl-C landing meanwhile is
        held until the run has ended, as an interrupted ``wait`` waits out
        its run; otherwise the run is queued and waited for.

        Raises:
            RunError: The run failed; the message says where.
        """
        device = self.image.device
        hold = _SigintHold.make()
        self._mark_queued(idle)
        if hold is None or not device.begin_here():
            device.submit(self)
            self.wait()
            return
        try:
            with hold:
                self.execute()
        finally:
            device.end_here()
            self._done.set()
        self.wait()

    def wait(self, timeout: float | None = None) -> None:
        if not self._done.wait(timeout):
            raise TimeoutError(
                f"{self.image.spec.name}: the run did not finish in {timeout} s"
            )
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def state(self) -> RunState:
        return self._state

    def bind_feedback(self, target: Run | None) -> None:
        if target is not None and not isinstance(target, EmuRun):
            raise TypeError(f"feedback target is not an emulator run: {target!r}")
        self._feedback = target

    def execute(self) -> None:
        """Run on the worker thread (the device's command processor).

        The worker marks the run done once it has let go of it.
        """
        self._state = RunState.RUNNING
        upstream, self._upstream = self._upstream, None
        try:
            if upstream is not None:
                # its scratchpad was to come from a run that failed: running
                # on a stale one could write states with wrong positions
                raise RunError(
                    f"{self.image.spec.name}: not run, because the run whose Emit "
                    f"feeds it failed: {upstream}"
                ) from upstream
            memory = {key: bo.device for key, bo in self._args.items()}
            arena = self._args.get("arena")
            feedback = self._feedback.scratchpad if self._feedback else None
            execute(
                self.image.spec,
                memory,
                self.scratchpad,
                idle=self._idle,
                poison=self.image.device.poison,
                feedback=feedback,
                widen=None
                if arena is None
                else functools.partial(arena.kept, fits=arena.copies_fit()),
                program=self.image.program,
            )
            if self._feedback is not None and self.image.spec.emit is not None:
                # its Emit wrote the next run's words afresh
                self._feedback._upstream = None
            self._state = RunState.COMPLETED
        except BaseException as error:  # reported to whoever waits
            self._error = error
            self._state = RunState.ERROR
            if self._feedback is not None and self._feedback is not self:
                self._feedback._upstream = error


class EmuImage(LoadedImage):
    """An image loaded on the emulated device."""

    def __init__(self, device: EmuDevice, spec: ImageSpec) -> None:
        self.device = device
        self.spec = spec
        self.released = False
        #: What each run does besides its kernels, prepared at load.
        self.program = RunProgram(spec)

    def new_run(self) -> EmuRun:
        return EmuRun(self)

    def release(self) -> None:
        self.released = True


class EmuDevice(DriverDevice):
    """The emulated NPU for one device description.

    Args:
        description: The device it emulates (npu1 or npu2).
        poison: Fill dead transients with a NaN pattern.
    """

    backend = "emu"

    def __init__(self, description: Device, poison: bool = False) -> None:
        self.description = description
        self.name = description.name
        self.poison = poison
        #: The float32 copies of bf16 weights its buffers keep.
        self.widenings = Widenings()
        self._queue: queue.Queue[EmuRun | None] = queue.Queue()
        # runs submitted and not yet finished, and whether the device closed
        self._pending = 0
        self._closed = False
        self._count = threading.Lock()
        # held while a run executes, on the worker or in a caller's thread
        self._executing = threading.Lock()
        self._worker = threading.Thread(
            target=self._serve, name=f"iron-emu-{self.name}", daemon=True
        )
        self._worker.start()

    def _serve(self) -> None:
        while True:
            run = self._queue.get()
            if run is None:
                return
            done = run._done
            try:
                with self._executing:
                    run.execute()
            finally:
                # Drop the run before whoever waits on it wakes: waiting for
                # the next run must not keep this one (its buffers, its image,
                # the weights its recording holds) alive after its owner
                # drops the last reference.
                del run
                with self._count:
                    self._pending -= 1
                done.set()

    def submit(self, run: EmuRun) -> None:
        """Queue ``run`` behind the runs already in flight."""
        with self._count:
            self._pending += 1
        self._queue.put(run)

    def begin_here(self) -> bool:
        """Claim the device for a run in the caller's thread, if it is idle.

        True when no run is queued or executing (and the device is open):
        the caller runs its run, then calls :meth:`end_here`; a run submitted
        meanwhile waits for it. False: submit instead.
        """
        with self._count:
            if self._pending or self._closed:
                return False
            return self._executing.acquire(blocking=False)

    def end_here(self) -> None:
        """End the claim :meth:`begin_here` made."""
        self._executing.release()

    def alloc(self, nbytes: int, name: str) -> EmuBuffer:
        return EmuBuffer(nbytes, name, self.widenings)

    def load(self, image: ImageSpec) -> EmuImage:
        return EmuImage(self, image)

    def close(self) -> None:
        with self._count:
            self._closed = True
        self._queue.put(None)


class _SigintHold:
    """Holds a SIGINT (Ctrl-C) that lands while a run executes, then delivers it.

    Only the main thread receives signals: elsewhere there is nothing to hold.
    """

    def __init__(self, previous: Any) -> None:
        self.previous = previous
        self.caught = False

    @classmethod
    def make(cls) -> _SigintHold | contextlib.nullcontext[None] | None:
        """A hold for this thread, or None where SIGINT's handler is not Python's."""
        if threading.current_thread() is not threading.main_thread():
            return contextlib.nullcontext()
        previous = signal.getsignal(signal.SIGINT)
        return None if previous is None else cls(previous)

    def _catch(self, signum: int, frame: Any) -> None:
        self.caught = True

    def __enter__(self) -> None:
        signal.signal(signal.SIGINT, self._catch)

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self.previous)
        if self.caught:
            signal.raise_signal(signal.SIGINT)  # its own handler, now the run ended
