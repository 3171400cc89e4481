"""IRON's operator catalog: declarations, numpy references, tolerances and costs.

``CATALOG`` maps each operator's name to its class; iron-core finds it through
the ``iron.operators`` entry point (``Profile.load`` and ``save`` use it).
"""

from __future__ import annotations

from iron.operators.__about__ import __version__
from iron.operators.elementwise import AXPY, ReLU

__all__ = ["AXPY", "CATALOG", "ReLU", "__version__"]

#: Every operator by name, as profiles name them.
CATALOG: dict[str, type] = {cls.__name__: cls for cls in (AXPY, ReLU)}
