"""What the SVG pictures share: number formatting, text widths, byte sizes.

The picture modules of :mod:`iron.core.pictures` write their text with
these; each picture depends on them byte for byte.
"""

from __future__ import annotations

__all__ = ["byte_size", "byte_unit", "number", "text_width"]


def number(x: float) -> str:
    """``x`` to two decimals at most, trailing zeros (and point) dropped."""
    return f"{x:.2f}".rstrip("0").rstrip(".")


def text_width(text: str, size: float = 10.0) -> float:
    """A generous estimate of ``text``'s width in sans-serif at ``size`` px."""
    return 0.62 * size * len(text)


_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def byte_unit(nbytes: int) -> tuple[str, int]:
    """The binary unit a size of ``nbytes`` reads best in, and its bytes."""
    power = 0
    while power < len(_UNITS) - 1 and nbytes >= 1024 ** (power + 1):
        power += 1
    return _UNITS[power], 1024**power


def byte_size(nbytes: int) -> str:
    """``nbytes`` as a reader says it: ``512 B``, ``2.5 KiB``, ``1.93 MiB``.

    Three significant digits at most, trailing zeros dropped.
    """
    unit, scale = byte_unit(nbytes)
    if scale == 1:
        return f"{nbytes} B"
    value = nbytes / scale
    digits = 0 if value >= 100 else 1 if value >= 10 else 2
    text = f"{value:.{digits}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text} {unit}"
