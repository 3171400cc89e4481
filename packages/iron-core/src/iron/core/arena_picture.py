"""A picture of an arena plan, as SVG text.

This module owns :func:`arena_svg`: one version of an
:class:`~iron.core.arena.ArenaPlan` drawn as buffers over (step, byte offset),
transients in blues and residents in oranges. It is deterministic: the same
plan gives the same text. :mod:`iron.core.arena` re-exports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from xml.sax.saxutils import escape

if TYPE_CHECKING:
    from iron.core.arena import ArenaPlan

__all__ = ["arena_svg"]

_TRANSIENT_COLOURS = ("#4c78a8", "#72b7b2", "#5fa2ce", "#3a6d9a", "#9ecae9", "#2f8fa8")
_RESIDENT_COLOURS = ("#f58518", "#e45756", "#ff9d76", "#d6604d")


def arena_svg(
    arena: ArenaPlan,
    version: str | None = None,
    *,
    width: int = 720,
    height: int = 360,
) -> str:
    """Draw one version's arena as buffers over (step, byte offset), as SVG text.

    Each arena buffer is a rectangle over steps ``[first, last + 1)`` and
    bytes ``[offset, end)`` (offset 0 at the bottom); transients in blues,
    residents in oranges, each named in a ``<title>`` tooltip and, where it
    fits, a label. The output is deterministic.

    Args:
        arena: The plan.
        version: The version; by default the last added.
        width: The picture's width in pixels.
        height: The picture's height in pixels.

    Returns:
        A standalone SVG document.
    """
    key = arena._version(version)
    placed = [p for p in arena.versions[key].values() if p.in_arena]
    placed.sort(key=lambda p: (p.kind != "resident", p.offset, p.first, p.name))
    steps = max((p.last + 1 for p in placed), default=1)
    size = max(arena.size, 1)
    left, right, top, bottom = 72.0, 16.0, 40.0, 40.0
    plot_w = max(width - left - right, 1.0)
    plot_h = max(height - top - bottom, 1.0)
    xs, ys = plot_w / steps, plot_h / size

    def num(x: float) -> str:
        return f"{x:.2f}".rstrip("0").rstrip(".")

    title = (
        f"{key}: arena {arena.size} B, lower bound {arena.lower_bound_of(key)} B, "
        f"transients {arena.transient_bytes(key)} B"
    )
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" '
        f'font-family="sans-serif" font-size="10">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
        f'<text x="{num(width / 2)}" y="16" text-anchor="middle" '
        f'font-size="12">{escape(title)}</text>',
        f'<rect x="{num(left)}" y="{num(top)}" width="{num(plot_w)}" '
        f'height="{num(plot_h)}" fill="none" stroke="#888"/>',
    ]
    colours = {"transient": 0, "resident": 0}
    for p in placed:
        family = _RESIDENT_COLOURS if p.kind == "resident" else _TRANSIENT_COLOURS
        fill = family[colours[p.kind] % len(family)]
        colours[p.kind] += 1
        x = left + p.first * xs
        w = (p.last + 1 - p.first) * xs
        y = top + plot_h - p.end * ys
        h = max(p.nbytes * ys, 0.5)
        tip = (
            f"{p.name} ({p.kind}): bytes [{p.offset}, {p.end}), "
            f"steps {p.first}..{p.last}"
        )
        out.append(
            f'<rect x="{num(x)}" y="{num(y)}" width="{num(w)}" height="{num(h)}" '
            f'fill="{fill}" stroke="white" stroke-width="0.5">'
            f"<title>{escape(tip)}</title></rect>"
        )
        if w >= 6.5 * len(p.name) + 4 and h >= 12:
            out.append(
                f'<text x="{num(x + w / 2)}" y="{num(y + h / 2 + 3.5)}" '
                f'text-anchor="middle" fill="white">{escape(p.name)}</text>'
            )
    for s in _ticks(steps):
        x = left + (s + 0.5) * xs
        out.append(
            f'<text x="{num(x)}" y="{num(top + plot_h + 14)}" '
            f'text-anchor="middle">{s}</text>'
        )
    for b in (0, arena.size):
        y = top + plot_h - b * ys
        out.append(
            f'<text x="{num(left - 4)}" y="{num(y + 3.5)}" text-anchor="end">{b}</text>'
        )
    out.append(
        f'<text x="{num(left + plot_w / 2)}" y="{num(height - 6)}" '
        f'text-anchor="middle">step</text>'
    )
    out.append(
        f'<text x="14" y="{num(top + plot_h / 2)}" text-anchor="middle" '
        f'transform="rotate(-90 14 {num(top + plot_h / 2)})">byte offset</text>'
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _ticks(steps: int) -> list[int]:
    """At most about ten evenly spaced step numbers, 0 and the last included."""
    every = max(1, -(-steps // 10))
    ticks = list(range(0, steps, every))
    if steps - 1 not in ticks:
        ticks.append(steps - 1)
    return ticks
