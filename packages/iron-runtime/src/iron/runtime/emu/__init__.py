"""The emulated NPU: a functional model of the device the runtime drives.

Device memory laid out exactly as planned, steps run through each operator's
kernel model, runs in flight on a worker thread, poison on dead memory.
"""

from iron.runtime.emu.device import EmuBuffer, EmuDevice, EmuImage, EmuRun

__all__ = ["EmuBuffer", "EmuDevice", "EmuImage", "EmuRun"]
