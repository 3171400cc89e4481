"""Choosing the backend: ``IRON_BACKEND=emu|xrt|auto`` or :func:`set_backend`.

``auto`` (the default) takes xrt where an NPU and pyxrt are present, else the
emulated NPU, and logs once which it chose and why. Devices are opened once
per backend and device description. ``IRON_EMU_POISON=1`` (or
:func:`set_poison`) makes the emulator poison dead memory.
"""

from __future__ import annotations

import logging
import os
import threading

from iron.core.device import Device
from iron.runtime import xrt
from iron.runtime.driver import DriverDevice
from iron.runtime.emu import EmuDevice

__all__ = [
    "BACKENDS",
    "FALLBACK_DEVICE",
    "backend_name",
    "default_device",
    "open_device",
    "set_backend",
    "set_poison",
]

logger = logging.getLogger("iron.runtime")

BACKENDS = ("emu", "xrt", "auto")
#: The device built for when none is named and no NPU says which it is.
FALLBACK_DEVICE = "npu2"

_chosen: str | None = None
_poison: bool | None = None
_logged: set[str] = set()
_devices: dict[tuple[str, str, bool], DriverDevice] = {}
_lock = threading.Lock()


def set_backend(name: str | None) -> None:
    """Choose the backend for this process (None: back to ``IRON_BACKEND``).

    Raises:
        ValueError: ``name`` is not emu, xrt or auto.
    """
    global _chosen
    if name is not None and name not in BACKENDS:
        raise ValueError(f"backend {name!r} is not one of {', '.join(BACKENDS)}")
    _chosen = name


def set_poison(on: bool | None) -> None:
    """Make the emulator poison dead memory (None: back to ``IRON_EMU_POISON``)."""
    global _poison
    _poison = on


def _poisoning() -> bool:
    if _poison is not None:
        return _poison
    return os.environ.get("IRON_EMU_POISON", "") not in ("", "0")


def backend_name() -> str:
    """The backend in use: ``emu`` or ``xrt`` (``auto`` resolved).

    Raises:
        ValueError: ``IRON_BACKEND`` names no backend.
    """
    name = _chosen or os.environ.get("IRON_BACKEND") or "auto"
    if name not in BACKENDS:
        raise ValueError(f"IRON_BACKEND={name!r} is not one of {', '.join(BACKENDS)}")
    if name != "auto":
        return name
    lacks = xrt.missing()
    chosen = "emu" if lacks else "xrt"
    if chosen not in _logged:
        _logged.add(chosen)
        if lacks:
            logger.info(
                "backend auto: the emulated NPU, because this machine lacks %s",
                "; ".join(lacks),
            )
        else:
            logger.info("backend auto: xrt (an NPU and pyxrt are present)")
    return chosen


def default_device() -> str:
    """The device to build for when the caller names none.

    The bound device or ``IRON_DEVICE`` when there is one; else, where the
    xrt backend runs, the NPU XRT reports (:func:`iron.runtime.xrt.detect`:
    an NPU1 owner who forgets ``IRON_DEVICE`` must not get npu2 binaries);
    else :data:`FALLBACK_DEVICE`, which the emulated NPU emulates.

    Raises:
        ValueError: ``IRON_DEVICE`` or ``IRON_BACKEND`` names nothing known.
    """
    from iron.core.device import get_current_device

    current = get_current_device()
    if current is not None:
        return current.name
    # Only where XRT can answer: otherwise opening the device later names
    # everything this machine lacks, and the way out.
    if backend_name() == "xrt" and not xrt.missing():
        try:
            found = xrt.detect()
        except xrt.BackendUnavailableError:
            found = None
        if found is not None:
            logger.info("device: %s, as XRT reports (IRON_DEVICE is unset)", found)
            return found
    return FALLBACK_DEVICE


def open_device(description: Device) -> DriverDevice:
    """The opened device for ``description`` on the backend in use."""
    name = backend_name()
    poison = _poisoning() if name == "emu" else False
    key = (name, description.name, poison)
    with _lock:
        device = _devices.get(key)
        if device is None:
            if name == "xrt":
                device = xrt.open_device(description)
            else:
                device = EmuDevice(description, poison=poison)
            _devices[key] = device
    return device
