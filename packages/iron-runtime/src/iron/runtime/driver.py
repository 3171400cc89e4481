"""The driver boundary: a device, buffer objects, loaded images and runs.

Shaped like XRT's: a device allocates buffer objects (a host view, synced to
and from the device) and loads images; a loaded image makes runs; a run has
its arguments (the buffers it reads and writes), a scratchpad of per-call
words the host writes before ``start``, and may have its feedback bound to
another run's scratchpad, which its Emit step writes at the end. The runtime
above (arenas, compiled graphs, carried loops) is written once against these
classes; ``iron.runtime.emu`` and ``iron.runtime.xrt`` implement them.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "BufferObject",
    "DriverDevice",
    "LoadedImage",
    "Run",
    "RunError",
    "RunState",
]


class RunError(RuntimeError):
    """A run failed on the device; the message names the image and the step."""


class RunState(enum.Enum):
    """Where a run is in its life, as XRT's ``ert_cmd_state`` names them."""

    NEW = "new"
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    ERROR = "error"


class BufferObject(abc.ABC):
    """Device memory with a host view; ``sync`` moves bytes between them."""

    nbytes: int
    name: str

    @abc.abstractmethod
    def host(self) -> np.ndarray:
        """The host view: a writable ``uint8`` array of ``nbytes``."""

    @abc.abstractmethod
    def to_device(self, offset: int = 0, nbytes: int | None = None) -> None:
        """Send ``[offset, offset + nbytes)`` of the host view to the device."""

    @abc.abstractmethod
    def from_device(self, offset: int = 0, nbytes: int | None = None) -> None:
        """Bring ``[offset, offset + nbytes)`` of device memory to the host view."""

    def release_host(self, offset: int = 0, nbytes: int | None = None) -> None:
        """The host no longer needs ``[offset, offset + nbytes)`` of its view.

        Said once the device holds the bytes (weights after upload), so a
        driver whose host view is memory of its own may give the pages back
        (the emulator does); ``from_device`` brings the range back. Here, a
        host view the device reads from (XRT's): nothing to do.
        """
        return  # the default keeps the host view

    @abc.abstractmethod
    def free(self) -> None:
        """Release the device memory; the object is unusable after."""


class Run(abc.ABC):
    """One execution of a loaded image: arguments, scratchpad, start and wait."""

    scratchpad: np.ndarray

    @abc.abstractmethod
    def set_args(self, buffers: Mapping[str, BufferObject]) -> None:
        """Bind the image's buffer arguments by name (arena, inputs, outputs)."""

    def write_scratchpad(self, words: np.ndarray) -> None:
        """Write this run's per-call words from the host, for its next start.

        They replace what a feeding run's Emit wrote or was to write: the
        run no longer waits on a feeder (nor on one that failed).
        """
        self.scratchpad[:] = words

    @abc.abstractmethod
    def start(self, idle: frozenset[int] = frozenset()) -> None:
        """Queue the run; it returns at once. ``idle`` steps are skipped."""

    @abc.abstractmethod
    def wait(self, timeout: float | None = None) -> None:
        """Block until the run completes.

        Raises:
            RunError: The run failed; the message says where.
            TimeoutError: ``timeout`` seconds passed first.
        """

    def call(self, idle: frozenset[int] = frozenset()) -> None:
        """Start the run and wait for it: a synchronous call's dispatch.

        A driver may run it in the calling thread when nothing else is in
        flight on the device (the same order, without a hand-off).

        Raises:
            RunError: The run failed; the message says where.
        """
        self.start(idle)
        self.wait()

    @abc.abstractmethod
    def state(self) -> RunState:
        """The run's state now."""

    @abc.abstractmethod
    def bind_feedback(self, target: Run | None) -> None:
        """Make this run's Emit write ``target``'s scratchpad (None: no one's)."""


class LoadedImage(abc.ABC):
    """An image on the device, ready to make runs."""

    @abc.abstractmethod
    def new_run(self) -> Run:
        """A new run of this image."""

    @abc.abstractmethod
    def release(self) -> None:
        """Unload the image; its runs are unusable after."""


class DriverDevice(abc.ABC):
    """An opened device: allocates buffers and loads images."""

    name: str
    backend: str

    @abc.abstractmethod
    def alloc(self, nbytes: int, name: str) -> BufferObject:
        """Allocate a buffer object of ``nbytes`` (zeroed)."""

    @abc.abstractmethod
    def load(self, image: Any) -> LoadedImage:
        """Load an image the backend built."""

    def close(self) -> None:  # noqa: B027 - optional for backends
        """Release the device (optional)."""
