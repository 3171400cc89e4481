"""Names a package gives on first use: one mechanism for ``iron`` and ``iron.lm``.

A package lists its public names in a table (name to the module and the
attribute that hold it) and sets its module ``__getattr__`` and ``__dir__``
to what :func:`lazy_names` returns; a name's module is imported on first
use, so importing the package stays light. A table may name a module of
another distribution as a string (``iron`` names ``iron.runtime.compiled``),
so the package imports nothing of it until the name is used; if that
distribution is not installed, the use raises an ImportError naming it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def _distribution(module: str) -> str:
    """The distribution shipping ``module``: ``iron.runtime.x`` is iron-runtime's."""
    parts = module.split(".")
    return f"iron-{parts[1]}" if len(parts) > 1 and parts[0] == "iron" else parts[0]


def _missing(error: ModuleNotFoundError, module: str) -> bool:
    """Whether ``error`` says ``module`` itself (or a package above it) is absent."""
    name = error.name or ""
    return bool(name) and (module == name or module.startswith(name + "."))


def lazy_names(
    package: str, table: Mapping[str, tuple[str, str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose names load on first use.

    Args:
        package: The package's name (``"iron"``), for messages and its globals.
        table: Each public name's module and attribute.

    Returns:
        ``(__getattr__, __dir__)``: the first imports a name's module on first
        use and keeps the value in the package's globals, so later lookups
        skip it; it raises AttributeError for a name not in ``table``, and
        ImportError naming the distribution when the module's is not
        installed. The second lists the package's globals and ``table``.
    """

    def __getattr__(name: str) -> Any:
        try:
            module, attribute = table[name]
        except KeyError:
            raise AttributeError(
                f"module {package!r} has no attribute {name!r}"
            ) from None
        try:
            found = importlib.import_module(module)
        except ModuleNotFoundError as error:
            if not _missing(error, module):
                raise
            dist = _distribution(module)
            raise ImportError(
                f"{package}.{name} is {dist}'s ({module}), which is not "
                f"installed; install it from a checkout of IRON's repository: "
                f"pip install ./packages/{dist} (IRON is not on PyPI yet)",
                name=module,
            ) from error
        value = getattr(found, attribute)
        vars(importlib.import_module(package))[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(importlib.import_module(package)), *table})

    return __getattr__, __dir__
