"""Small helpers shared by the SVG pictures: number formatting, text widths, sizes.

Private to the picture modules (:mod:`iron.core._layout`,
:mod:`iron.core.arena_picture`, :mod:`iron.core.roofline_picture`); their
text depends on these byte for byte.
"""

from __future__ import annotations


def _num(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _text_width(text: str, size: float = 10.0) -> float:
    """A generous estimate of ``text``'s width in sans-serif at ``size`` px."""
    return 0.62 * size * len(text)


_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def _unit(nbytes: int) -> tuple[str, int]:
    """The binary unit a size of ``nbytes`` reads best in, and its bytes."""
    power = 0
    while power < len(_UNITS) - 1 and nbytes >= 1024 ** (power + 1):
        power += 1
    return _UNITS[power], 1024**power


def _size(nbytes: int) -> str:
    """``nbytes`` as a reader says it: ``512 B``, ``2.5 KiB``, ``1.93 MiB``.

    Three significant digits at most, trailing zeros dropped.
    """
    unit, scale = _unit(nbytes)
    if scale == 1:
        return f"{nbytes} B"
    value = nbytes / scale
    digits = 0 if value >= 100 else 1 if value >= 10 else 2
    text = f"{value:.{digits}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text} {unit}"
