"""The XRT backend: the NPU through pyxrt (not yet built).

Until the NPU-path work fills it, opening it raises an error naming what is
missing on this machine: the pyxrt module (it ships with XRT, not on PyPI),
an NPU device node, the amdxdna driver.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from iron.core.device import Device

__all__ = ["BackendUnavailableError", "missing", "open_device"]


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


def open_device(description: Device) -> None:
    """Open the NPU through pyxrt.

    Raises:
        BackendUnavailableError: Always for now: the XRT driver is not built
            yet, and the message also names what this machine lacks.
    """
    lacks = missing()
    why = (
        "this machine lacks " + "; ".join(lacks)
        if lacks
        else "its driver is not built yet"
    )
    raise BackendUnavailableError(
        f"the xrt backend cannot run {description.name}: {why}. Use the emulated "
        f"NPU: IRON_BACKEND=emu (or iron.runtime.set_backend('emu'))"
    )
