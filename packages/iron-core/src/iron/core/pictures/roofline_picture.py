"""A picture of a roofline, as SVG text.

This module owns :func:`roofline_svg`: a :class:`~iron.core.cost.Roofline`
drawn as one bar per step, as the cost model composes a step's time, with
each step's share of the memory-bandwidth bound marked and the slowest steps
named. It is deterministic: the same argument gives the same text.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape

from iron.core.pictures.svg import number, text_width

if TYPE_CHECKING:
    from iron.core.cost import Roofline, StepTime

__all__ = ["roofline_svg"]

_PART_COLOURS = {
    "memory": "#4c78a8",
    "compute": "#f58518",
    "calls": "#54a24b",
    "dispatch": "#b279a2",
    "reconfigure": "#e45756",
}


def _us(seconds: float) -> str:
    us = seconds * 1e6
    if us >= 100:
        return f"{us:.0f}"
    if us >= 10:
        return f"{us:.1f}"
    return f"{us:.2f}"


def _nice(top: float) -> tuple[float, list[float]]:
    """A rounded axis top at or above ``top`` and its ticks (1, 2 or 5 steps)."""
    if top <= 0:
        return 1.0, [0.0, 1.0]
    raw = top / 5
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    count = math.ceil(top / step - 1e-9)
    return count * step, [i * step for i in range(count + 1)]


_DECADES = 5  # a log axis spans at most this many decades


def _log_ticks(low: float, high: float) -> tuple[float, float, list[float]]:
    """Decades around ``[low, high]`` (seconds): the axis bottom, top and ticks.

    At most ``_DECADES`` of them: below that, a step's time is too small to
    matter next to the top one's, and its bar is cut at the bottom.
    """
    top = 10 ** math.ceil(math.log10(high))
    bottom = max(10 ** math.floor(math.log10(low)), top / 10**_DECADES)
    if top <= bottom:
        top = bottom * 10
    count = round(math.log10(top / bottom))
    return bottom, top, [bottom * 10**i for i in range(count + 1)]


def _tick_us(seconds: float) -> str:
    """A decade's tick label in microseconds: ``0.1``, ``1``, ``10``, ``1000000``."""
    us = seconds * 1e6
    if us >= 1:
        return f"{us:.0f}"
    return f"{us:.9f}".rstrip("0")


def roofline_svg(
    roofline: Roofline,
    *,
    title: str | None = None,
    width: int = 720,
    height: int = 360,
    label: int = 5,
    scale: str = "linear",
) -> str:
    """Draw a roofline as one bar per step of modelled time, as SVG text.

    Each bar stacks what the cost model adds (see :mod:`iron.core.cost`):
    the work, ``max(compute, memory)`` (compute and memory overlap), in the
    colour of whichever is larger; then the kernel-call overhead; then the
    dispatch overhead; then the load of the step's array configuration,
    where the model charges one (npu1's per-step xclbins). A black dash across each bar marks the step's share
    of the memory-bandwidth bound (its bytes alone at the NPU's DMA roof),
    so the gap between bar top and dash is the time the model spends above
    the bound. The slowest steps are named above their bars; steps alike
    (one operator at one time as shown) share one label, with their count,
    over the first of them. A bar's ``<title>`` tooltip holds all of its
    numbers. Above the plot, a horizontal bar sets the whole version's
    bandwidth bound against its modelled time.

    Args:
        roofline: What :func:`iron.roofline` returned.
        title: The picture's title; by default the version's name, device
            and dispatch mode.
        width: The picture's width in pixels.
        height: The picture's height in pixels.
        label: How many labels to place over the slowest steps.
        scale: The time axis: ``"linear"``, or ``"log"`` (decades) where
            one step dwarfs the rest, as a model's LM head does. A log
            axis spans at most five decades below its top; a bar rises from
            its bottom (a step shorter than that shows no bar) and its parts
            stack in time, so a part's height no longer scales with it.

    Returns:
        A standalone SVG document.

    Raises:
        ValueError: ``scale`` is neither ``"linear"`` nor ``"log"``.
    """
    if scale not in ("linear", "log"):
        raise ValueError(
            f"roofline_svg: scale={scale!r} is not one of 'linear' or 'log'"
        )
    steps = list(roofline.steps)
    ddr = roofline.device.dma_bytes_per_s  # the NPU's DMA roof
    mode = "full ELF" if roofline.full_elf else "xclbin per step"
    if title is None:
        title = (
            f"{roofline.name} on {roofline.device.name} ({mode}): {len(steps)} steps"
        )
    left, right, top, bottom = 64.0, 16.0, 84.0, 36.0
    plot_w = max(width - left - right, 1.0)
    plot_h = max(height - top - bottom, 1.0)
    times = [s.seconds for s in steps] + [s.bytes / ddr for s in steps]
    highest = max(times + [0.0])
    positive = [s.seconds for s in steps if s.seconds > 0]  # a dash may sit lower
    log = scale == "log" and bool(positive)
    if log:
        y_bottom, y_top, ticks = _log_ticks(min(positive), highest * 1.15)
    else:
        y_bottom = 0.0
        y_top, ticks = _nice(highest * 1.15)
    slot = plot_w / max(len(steps), 1)
    bar_w = slot * 0.8 if slot >= 4 else slot

    def y_of(seconds: float) -> float:
        if log:
            where = math.log10(max(seconds, y_bottom) / y_bottom)
            return top + plot_h - where / math.log10(y_top / y_bottom) * plot_h
        return top + plot_h - seconds / y_top * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" '
        f'font-family="sans-serif" font-size="10">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
        f'<text x="{number(width / 2)}" y="16" text-anchor="middle" '
        f'font-size="12">{escape(title)}</text>',
    ]

    # the version's bandwidth bound against its modelled time
    total = roofline.seconds
    bound = roofline.bandwidth_bound_s
    share = bound / total if total > 0 else 0.0
    summary = (
        f"modelled {_us(total)} us per call; bandwidth bound {_us(bound)} us "
        f"({share:.0%} of it)"
    )
    out.append('<g class="summary">')
    out.append(f"<title>{escape(summary)}</title>")
    out.append(
        f'<rect x="{number(left)}" y="26" width="{number(plot_w)}" height="12" '
        'fill="#dddddd"/>'
    )
    out.append(
        f'<rect x="{number(left)}" y="26" width="{number(plot_w * min(share, 1.0))}" '
        'height="12" fill="#555555"/>'
    )
    out.append(
        f'<text x="{number(left + 4)}" y="35.5" fill="white">{escape(summary)}</text>'
    )
    out.append("</g>")

    # legend
    x = left
    out.append('<g class="legend">')
    reloads = any(s.reconfigure_s > 0 for s in roofline.steps)
    for part, colour in _PART_COLOURS.items():
        if part == "reconfigure" and not reloads:
            continue
        out.append(
            f'<rect x="{number(x)}" y="48" width="12" height="10" fill="{colour}"/>'
        )
        out.append(f'<text x="{number(x + 16)}" y="57">{part}</text>')
        x += 16 + text_width(part) + 16
    out.append(
        f'<line x1="{number(x)}" y1="53" x2="{number(x + 14)}" y2="53" '
        'stroke="black" stroke-width="2"/>'
    )
    legend = "bandwidth-bound share (bytes at the DMA roof)"
    out.append(f'<text x="{number(x + 18)}" y="57">{escape(legend)}</text>')
    out.append("</g>")

    # axes and grid
    for t in ticks:
        y = y_of(t)
        out.append(
            f'<line x1="{number(left)}" y1="{number(y)}" x2="{number(left + plot_w)}" '
            f'y2="{number(y)}" stroke="#e4e4e4"/>'
        )
        out.append(
            f'<text x="{number(left - 4)}" y="{number(y + 3.5)}" '
            f'text-anchor="end">{_tick_us(t) if log else _us(t) if t else "0"}</text>'
        )
    out.append(
        f'<rect x="{number(left)}" y="{number(top)}" width="{number(plot_w)}" '
        f'height="{number(plot_h)}" fill="none" stroke="#888"/>'
    )

    # bars
    for i, s in enumerate(steps):
        x0 = left + i * slot + (slot - bar_w) / 2
        work_part = "compute" if s.compute_s >= s.memory_s else "memory"
        parts = (
            (work_part, max(s.compute_s, s.memory_s)),
            ("calls", s.calls_s),
            ("dispatch", s.dispatch_s),
            ("reconfigure", s.reconfigure_s),
        )
        tip = (
            f"#{s.index} {s.name}: {_us(s.seconds)} us = max(compute {_us(s.compute_s)}, "
            f"memory {_us(s.memory_s)}) + calls {_us(s.calls_s)} + dispatch "
            f"{_us(s.dispatch_s)}"
            + (f" + reconfigure {_us(s.reconfigure_s)}" if s.reconfigure_s else "")
            + f"; bandwidth share {_us(s.bytes / ddr)} us; "
            f"bound by {s.bound}"
        )
        out.append(f'<g class="bar"><title>{escape(tip)}</title>')
        base = 0.0
        for part, seconds in parts:
            if seconds <= 0:
                continue
            y_hi, y_lo = y_of(base + seconds), y_of(base)
            out.append(
                f'<rect x="{number(x0)}" y="{number(y_hi)}" width="{number(bar_w)}" '
                f'height="{number(max(y_lo - y_hi, 0.0))}" '
                f'fill="{_PART_COLOURS[part]}"/>'
            )
            base += seconds
        y = y_of(s.bytes / ddr)
        out.append(
            f'<line x1="{number(left + i * slot)}" y1="{number(y)}" '
            f'x2="{number(left + (i + 1) * slot)}" y2="{number(y)}" '
            'stroke="black" stroke-width="1.5"/>'
        )
        out.append("</g>")

    # the slowest steps, named; steps alike (one operator, one time shown)
    # share a label, counted; a label moves up until it overlaps none
    named: dict[tuple[str, str], list[StepTime]] = {}
    for s in sorted(steps, key=lambda s: (-s.seconds, s.index)):
        key = (s.name, _us(s.seconds))
        if key in named:
            named[key].append(s)
        elif len(named) < label:
            named[key] = [s]
    placed: list[tuple[float, float, float]] = []  # x0, x1, baseline
    for (name, shown_us), alike in named.items():
        s = alike[0]
        i = steps.index(s)
        text = f"#{s.index} {name} {shown_us} us"
        if len(alike) > 1:
            text += f" (x{len(alike)})"
        tw = text_width(text)
        cx = left + (i + 0.5) * slot
        cx = min(max(cx, left + tw / 2 + 2), left + plot_w - tw / 2 - 2)
        # above every bar (and dash) under it
        first = max(int((cx - tw / 2 - left) / slot), 0)
        last = min(int((cx + tw / 2 - left) / slot), len(steps) - 1)
        under = steps[first : last + 1]
        y = y_of(max(max(t.seconds, t.bytes / ddr) for t in under)) - 4
        while any(
            a < cx + tw / 2 and cx - tw / 2 < b and abs(yb - y) < 11
            for a, b, yb in placed
        ):
            y -= 11
        placed.append((cx - tw / 2, cx + tw / 2, y))
        out.append(
            f'<text class="slowest" x="{number(cx)}" y="{number(y)}" '
            f'text-anchor="middle">{escape(text)}</text>'
        )

    # axis ticks and names
    every = max(1, -(-len(steps) // 10))
    shown = list(range(0, len(steps), every))
    if steps and len(steps) - 1 not in shown:
        if shown and (len(steps) - 1 - shown[-1]) < every / 2:
            shown.pop()
        shown.append(len(steps) - 1)
    for i in shown:
        out.append(
            f'<text x="{number(left + (i + 0.5) * slot)}" '
            f'y="{number(top + plot_h + 14)}" text-anchor="middle">'
            f"{steps[i].index}</text>"
        )
    out.append(
        f'<text x="{number(left + plot_w / 2)}" y="{number(height - 6)}" '
        'text-anchor="middle">step</text>'
    )
    mid = top + plot_h / 2
    out.append(
        f'<text x="14" y="{number(mid)}" text-anchor="middle" '
        f'transform="rotate(-90 14 {number(mid)})">'
        f"modelled time (us{', log scale' if log else ''})</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"
