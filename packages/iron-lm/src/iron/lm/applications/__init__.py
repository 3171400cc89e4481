"""Applications: the models ``python -m iron.lm.tune`` can name, and their profiles.

An application is what a user runs at model scale (the Llama decoder first).
For the tuner it answers four questions:

* which configuration it is built from (``load_config``: a checkpoint
  directory or its ``config.json``; ``default_config``: the one its shipped
  profiles were tuned for),
* every graph version it builds for that configuration on a device
  (``versions``: recorded from shapes alone, with zero-cost placeholder
  weights, so an 8B config enumerates without reading 16 GB),
* where its per-device profiles live (``profiles_dir``: one
  ``<device>.json`` per device, applied by the application's graph by
  default),
* how to name a configuration in a profile's ``meta`` (``config_name``,
  ``config_digest``).

:data:`APPLICATIONS` maps a name to its class; :func:`application` returns an
instance, naming the known ones when a name is not among them.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Protocol

from iron.core.device import Device
from iron.core.recording import Recording
from iron.lm.applications.llama import LlamaApplication

__all__ = ["APPLICATIONS", "Application", "application"]


class Application(Protocol):
    """What the tuner needs of an application (see the module docstring).

    Attributes:
        name: The name ``python -m iron.lm.tune`` takes (``"llama"``).
    """

    name: str

    def profiles_dir(self) -> Path:
        """The directory of its shipped ``<device>.json`` profiles."""
        ...

    def default_config(self) -> Path:
        """The config.json its shipped profiles were tuned for."""
        ...

    def load_config(self, path: str | os.PathLike[str]) -> Any:
        """Read a configuration from a checkpoint directory or a config.json."""
        ...

    def config_name(self, path: str | os.PathLike[str]) -> str:
        """A short name for the configuration at ``path`` (for ``meta``)."""
        ...

    def config_digest(self, config: Any) -> str:
        """A short hash of ``config``'s values (for ``meta``)."""
        ...

    def versions(self, config: Any, dev: Device | str) -> dict[str, Recording]:
        """Every graph version it builds for ``config`` on ``dev``, by label."""
        ...


#: Every application the tuner can name, by name.
APPLICATIONS: dict[str, type] = {"llama": LlamaApplication}


def application(name: str, **options: Any) -> Application:
    """The application registered as ``name``, constructed.

    Args:
        name: A key of :data:`APPLICATIONS` (``"llama"``).
        **options: Passed to its constructor (``weights=("q4", "q8")``).

    Returns:
        An instance of that application.

    Raises:
        KeyError: No application has that name; the message lists the known
            ones (and the closest match).
    """
    cls = APPLICATIONS.get(name)
    if cls is None:
        close = difflib.get_close_matches(name, list(APPLICATIONS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise KeyError(
            f"no application {name!r}{hint}; the known applications are "
            f"{sorted(APPLICATIONS)} (iron.lm.applications.APPLICATIONS)"
        )
    return cls(**options)
