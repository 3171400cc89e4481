"""Small helpers shared by the SVG pictures: number formatting, text widths.

Private to the picture modules (:mod:`iron.core._layout`,
:mod:`iron.core.roofline_picture`); their text depends on these byte for byte.
"""

from __future__ import annotations


def _num(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _text_width(text: str, size: float = 10.0) -> float:
    """A generous estimate of ``text``'s width in sans-serif at ``size`` px."""
    return 0.62 * size * len(text)
