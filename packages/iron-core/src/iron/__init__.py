"""IRON: operators for the NPU, and graphs over them.

Its public names are imported on first use, so ``import iron`` stays light:
it loads neither the runtime nor any device driver. ``CompiledGraph`` and
``CarriedLoop`` are iron-runtime's: without it, using them raises an
ImportError naming it.
"""

from __future__ import annotations

from pkgutil import extend_path
from typing import TYPE_CHECKING

# The other distributions (iron-operators, iron-runtime, iron-lm) ship their
# own ``iron/<name>`` subpackages; extend_path lets this package find them.
__path__ = extend_path(__path__, __name__)

from iron.core.__about__ import __version__  # noqa: E402
from iron.core.lazy import lazy_names  # noqa: E402

# name -> (module, attribute); the module is imported on first use. Modules
# of other distributions are named as strings only: core never imports them.
_LAZY: dict[str, tuple[str, str]] = {
    "Graph": ("iron.core.graph", "Graph"),
    "Profile": ("iron.core.profile", "Profile"),
    "Operator": ("iron.core.operator", "Operator"),
    "Handle": ("iron.core.handle", "Handle"),
    "Recording": ("iron.core.recording", "Recording"),
    "Carry": ("iron.core.carry", "Carry"),
    "carry": ("iron.core.carry", "carry"),
    "clamp": ("iron.core.percall", "clamp"),
    "on_host": ("iron.core.recorder", "on_host"),
    "param": ("iron.core.held", "param"),
    "state": ("iron.core.held", "state"),
    "weight": ("iron.core.held", "weight"),
    "Carried": ("iron.core.carry", "Carried"),
    "Scratchpad": ("iron.core.percall", "Scratchpad"),
    "Precision": ("iron.core.precision", "Precision"),
    "Tolerance": ("iron.core.tolerance", "Tolerance"),
    "Verdict": ("iron.core.tolerance", "Verdict"),
    "compare": ("iron.core.tolerance", "compare"),
    "Device": ("iron.core.device", "Device"),
    "NPU1": ("iron.core.device", "NPU1"),
    "NPU2": ("iron.core.device", "NPU2"),
    "set_current_device": ("iron.core.device", "set_current_device"),
    "get_current_device": ("iron.core.device", "get_current_device"),
    "use_device": ("iron.core.device", "use_device"),
    "TensorAccessPattern": ("iron.core.tap", "TensorAccessPattern"),
    "plan": ("iron.core.plan", "plan"),
    "Plan": ("iron.core.plan", "Plan"),
    "ArenaPlan": ("iron.core.arena", "ArenaPlan"),
    "arena_svg": ("iron.core.pictures", "arena_svg"),
    "roofline": ("iron.core.cost", "roofline"),
    "recording_svg": ("iron.core.pictures", "recording_svg"),
    "roofline_svg": ("iron.core.pictures", "roofline_svg"),
    "CompiledGraph": ("iron.runtime.compiled", "CompiledGraph"),
    "CarriedLoop": ("iron.runtime.carried", "CarriedLoop"),
}

__all__ = sorted([*_LAZY, "__version__"])


__getattr__, __dir__ = lazy_names(__name__, _LAZY)


if TYPE_CHECKING:
    from iron.core.arena import ArenaPlan
    from iron.core.carry import Carried, Carry, carry
    from iron.core.cost import roofline
    from iron.core.device import (
        NPU1,
        NPU2,
        Device,
        get_current_device,
        set_current_device,
        use_device,
    )
    from iron.core.graph import Graph
    from iron.core.handle import Handle
    from iron.core.held import param, state, weight
    from iron.core.operator import Operator
    from iron.core.percall import Scratchpad, clamp
    from iron.core.pictures import arena_svg, recording_svg, roofline_svg
    from iron.core.plan import Plan, plan
    from iron.core.precision import Precision
    from iron.core.profile import Profile
    from iron.core.recorder import on_host
    from iron.core.recording import Recording
    from iron.core.tap import TensorAccessPattern
    from iron.core.tolerance import Tolerance, Verdict, compare
