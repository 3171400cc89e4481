"""IRON's runtime: backends, scratch arenas, compiled graphs and carried loops.

``Graph.compile`` finds it through the ``iron.backends`` entry point. The
backend is the emulated NPU unless an NPU with XRT is present
(``IRON_BACKEND=emu|xrt|auto``, or :func:`set_backend`); the emulated NPU's
host memory is budgeted by ``IRON_EMU_MEMORY`` or :func:`set_emu_memory`.
"""

from iron.runtime.__about__ import __version__
from iron.runtime.arena import ScratchArena
from iron.runtime.carried import CarriedLoop
from iron.runtime.compiled import UPLOAD_PIECE, CompiledGraph
from iron.runtime.driver import RunError
from iron.runtime.emu.execute import StepCheckError
from iron.runtime.emu.memory import set_emu_memory
from iron.runtime.select import backend_name, default_device, set_backend, set_poison
from iron.runtime.use import InUseError
from iron.runtime.xrt import BackendUnavailableError

__all__ = [
    "UPLOAD_PIECE",
    "BackendUnavailableError",
    "CarriedLoop",
    "CompiledGraph",
    "InUseError",
    "RunError",
    "ScratchArena",
    "StepCheckError",
    "__version__",
    "backend_name",
    "default_device",
    "set_backend",
    "set_emu_memory",
    "set_poison",
]
