"""Pictures, as SVG text: a recording's graph, an arena plan, a roofline.

Each is deterministic and depends on nothing installed beyond iron-core: the
same argument gives the same text on every machine. A recording's graph is
laid out by one engine, the pure-Python layered layout of
:mod:`iron.core.pictures.layered`; the text helpers the pictures share are
in :mod:`iron.core.pictures.svg`.

- :func:`recording_svg`: a recording as a graph of steps and buffers
  (:mod:`iron.core.pictures.recording_picture`).
- :func:`arena_svg`: one version of an arena plan as buffers over (step,
  byte offset) (:mod:`iron.core.pictures.arena_picture`).
- :func:`roofline_svg`: a roofline as one bar per step
  (:mod:`iron.core.pictures.roofline_picture`).

``iron.recording_svg``, ``iron.arena_svg`` and ``iron.roofline_svg`` are
these.
"""

from __future__ import annotations

from iron.core.pictures.arena_picture import arena_svg
from iron.core.pictures.recording_picture import recording_svg
from iron.core.pictures.roofline_picture import roofline_svg

__all__ = ["arena_svg", "recording_svg", "roofline_svg"]
