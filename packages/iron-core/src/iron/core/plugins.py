"""Finding the other distributions through entry points.

iron-core never imports iron-operators or iron-runtime. What it needs from
them it finds here: the operator catalog (entry-point group
``iron.operators``, used by ``Profile.load``/``save``) and the backends
(group ``iron.backends``, used by ``Graph.compile`` and standalone operator
calls). A missing distribution is an ImportError naming what to install.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from iron.core.operator import Operator

__all__ = ["MissingDistributionError", "backend", "catalog"]


class MissingDistributionError(ImportError):
    """A sibling distribution that a call needs is not installed."""


@functools.cache
def catalog() -> Mapping[str, type[Operator]]:
    """Every registered operator class by name (``iron.operators.CATALOG``).

    Raises:
        MissingDistributionError: No distribution registers an operator catalog.
    """
    found: dict[str, type] = {}
    for ep in entry_points(group="iron.operators"):
        found.update(ep.load())
    if not found:
        raise MissingDistributionError(
            "no operator catalog is installed (entry-point group "
            "'iron.operators'); install it from a checkout of IRON's repository: "
            "pip install ./packages/iron-operators (IRON is not on PyPI yet)"
        )
    return found


def backend() -> Any:
    """The runtime that compiles and calls graphs on a device.

    Raises:
        MissingDistributionError: iron-runtime is not installed.
    """
    eps = list(entry_points(group="iron.backends"))
    if not eps:
        raise MissingDistributionError(
            "running on a device needs the runtime, which is not installed "
            "(entry-point group 'iron.backends'); install it from a checkout of "
            "IRON's repository: pip install ./packages/iron-runtime (IRON is not "
            "on PyPI yet). Without it, graph.reference(...) runs on the host."
        )
    return eps[0].load()()
