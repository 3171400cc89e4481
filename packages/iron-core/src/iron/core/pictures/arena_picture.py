"""A picture of an arena plan, as SVG text.

This module owns :func:`arena_svg`: one version of an
:class:`~iron.core.arena.ArenaPlan` drawn as buffers over (step, byte offset),
transients in blues and residents in oranges, sizes in KiB and MiB. Where the
transients are too thin to see against the residents (a model's weights),
a second panel draws them alone, zoomed. It is deterministic: the same plan
gives the same text. :mod:`iron.core.arena` re-exports it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape

from iron.core.pictures.svg import byte_size, byte_unit, number, text_width

if TYPE_CHECKING:
    from iron.core.arena import Allocation, ArenaPlan

__all__ = ["arena_svg"]

_TRANSIENT_COLOURS = ("#4c78a8", "#72b7b2", "#5fa2ce", "#3a6d9a", "#9ecae9", "#2f8fa8")
_RESIDENT_COLOURS = ("#f58518", "#e45756", "#ff9d76", "#d6604d")
# Transients drawn thinner than this (pixels) get a zoomed panel of their own.
_THIN_PX = 24.0
_GAP = 56.0  # between the two panels


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
    residents in oranges, each named in a ``<title>`` tooltip (with its exact
    bytes) and, where it fits, a label. Sizes read in B, KiB, MiB or GiB.
    Where the version's transients would be drawn less than 24 pixels tall
    (a model whose weights dwarf them), the arena is drawn in the left half
    with the transients' byte range outlined, and the right half draws that
    range alone. The output is deterministic.

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
    left, right, top, bottom = 72.0, 16.0, 56.0, 40.0
    plot_w = max(width - left - right, 1.0)
    plot_h = max(height - top - bottom, 1.0)

    transients = [p for p in placed if p.kind == "transient"]
    span = (
        (min(p.offset for p in transients), max(p.end for p in transients))
        if transients
        else None
    )
    zoom = span is not None and (span[1] - span[0]) / size * plot_h < _THIN_PX

    title = (
        f"{key}: arena {byte_size(arena.size)}, transients "
        f"{byte_size(arena.transient_bytes(key))} (lower bound "
        f"{byte_size(arena.lower_bound_of(key))})"
    )
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" '
        f'font-family="sans-serif" font-size="10">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
        f'<text x="{number(width / 2)}" y="16" text-anchor="middle" '
        f'font-size="12">{escape(title)}</text>',
    ]
    if not zoom:
        box = (left, top, plot_w, plot_h)
        _panel(out, "arena", placed, steps, box, (0, size), None)
    else:
        assert span is not None
        half = (plot_w - _GAP) / 2
        _panel(out, "arena", placed, steps, (left, top, half, plot_h), (0, size), span)
        lo, hi = span
        zoomed = [p for p in placed if p.offset < hi and p.end > lo]
        box = (left + half + _GAP, top, half, plot_h)
        _panel(out, "transients", zoomed, steps, box, span, None)
    out.append(
        f'<text x="14" y="{number(top + plot_h / 2)}" text-anchor="middle" '
        f'transform="rotate(-90 14 {number(top + plot_h / 2)})">byte offset</text>'
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _panel(
    out: list[str],
    name: str,
    placed: list[Allocation],
    steps: int,
    box: tuple[float, float, float, float],
    window: tuple[int, int],
    outline: tuple[int, int] | None,
) -> None:
    """Draw the bytes ``window`` of ``placed`` over steps into ``box``.

    ``name`` is the panel's class and heading ("arena" or "transients");
    ``outline``, a byte range to outline dashed (the zoomed one).
    """
    x0, y0, w, h = box
    lo, hi = window
    xs, ys = w / steps, h / max(hi - lo, 1)

    def y_of(offset: int) -> float:
        return y0 + h - (offset - lo) * ys

    heading = (
        f"whole arena, {byte_size(hi)}"
        if name == "arena"
        else f"transients: {byte_size(hi - lo)} from offset {byte_size(lo)}"
    )
    out.append(f'<g class="{name}">')
    out.append(
        f'<text x="{number(x0 + w / 2)}" y="{number(y0 - 8)}" '
        f'text-anchor="middle">{escape(heading)}</text>'
    )
    out.append(
        f'<rect x="{number(x0)}" y="{number(y0)}" width="{number(w)}" '
        f'height="{number(h)}" fill="none" stroke="#888"/>'
    )
    colours = {"transient": 0, "resident": 0}
    for p in placed:
        family = _RESIDENT_COLOURS if p.kind == "resident" else _TRANSIENT_COLOURS
        fill = family[colours[p.kind] % len(family)]
        colours[p.kind] += 1
        x = x0 + p.first * xs
        bw = (p.last + 1 - p.first) * xs
        y_hi, y_lo = y_of(min(p.end, hi)), y_of(max(p.offset, lo))
        bh = max(y_lo - y_hi, 0.5)
        tip = (
            f"{p.name} ({p.kind}): {byte_size(p.nbytes)} at {byte_size(p.offset)}, "
            f"bytes [{p.offset}, {p.end}), steps {p.first}..{p.last}"
        )
        out.append(
            f'<rect x="{number(x)}" y="{number(y_hi)}" width="{number(bw)}" '
            f'height="{number(bh)}" fill="{fill}" stroke="white" stroke-width="0.5">'
            f"<title>{escape(tip)}</title></rect>"
        )
        if bw >= text_width(p.name) + 4 and bh >= 12:
            out.append(
                f'<text x="{number(x + bw / 2)}" y="{number(y_hi + bh / 2 + 3.5)}" '
                f'text-anchor="middle" fill="white">{escape(p.name)}</text>'
            )
    if outline is not None:
        y_hi, y_lo = y_of(outline[1]), y_of(outline[0])
        pad = max((6.0 - (y_lo - y_hi)) / 2, 0.0)  # a thin range stays visible
        out.append(
            f'<rect class="zoomed" x="{number(x0 - 2)}" y="{number(y_hi - pad)}" '
            f'width="{number(w + 4)}" height="{number(y_lo - y_hi + 2 * pad)}" '
            'fill="none" stroke="black" stroke-dasharray="4 2"/>'
        )
    for s in _ticks(steps):
        out.append(
            f'<text x="{number(x0 + (s + 0.5) * xs)}" y="{number(y0 + h + 14)}" '
            f'text-anchor="middle">{s}</text>'
        )
    out.append(
        f'<text x="{number(x0 + w / 2)}" y="{number(y0 + h + 32)}" '
        'text-anchor="middle">step</text>'
    )
    for b in _byte_ticks(lo, hi, h):  # a zoomed panel counts from its bottom
        shown = byte_size(b) if lo == 0 else f"+{byte_size(b - lo)}"
        out.append(
            f'<text x="{number(x0 - 4)}" y="{number(y_of(b) + 3.5)}" '
            f'text-anchor="end">{shown}</text>'
        )
    out.append("</g>")


def _byte_ticks(lo: int, hi: int, pixels: float) -> list[int]:
    """``lo``, ``hi`` and round sizes between, at least 18 pixels apart."""
    _, scale = byte_unit(max(hi - lo, 1))
    raw = (hi - lo) / scale / 4
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw) * scale
    step = max(int(step), 1)
    ticks = [lo] + [lo + t for t in range(step, hi - lo, step)] + [hi]
    per_byte = pixels / max(hi - lo, 1)
    kept = [lo]
    for t in ticks[1:-1]:
        if (t - kept[-1]) * per_byte >= 18 and (hi - t) * per_byte >= 18:
            kept.append(t)
    return kept + [hi] if hi != lo else kept


def _ticks(steps: int) -> list[int]:
    """At most about ten evenly spaced step numbers, 0 and the last included."""
    every = max(1, -(-steps // 10))
    ticks = list(range(0, steps, every))
    if steps - 1 not in ticks:
        ticks.append(steps - 1)
    return ticks
