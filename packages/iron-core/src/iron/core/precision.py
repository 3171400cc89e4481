"""The precision levels a matmul may be asked for.

This module owns `Precision`, which says which roundings, beyond its
reference's, a matmul may make in exchange for speed.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Precision"]


class Precision(StrEnum):
    """The roundings a matmul may make beyond its reference's.

    Named as ``torch.set_float32_matmul_precision`` names them. Each level
    allows the roundings of the one above it and more, and a matmul takes the
    fastest kernel its level allows. A string such as ``"high"`` (in any case)
    converts: ``Precision("HIGH") is Precision.HIGH``.

    Attributes:
        HIGHEST: Partial sums are kept in f32 and rounded once to the output's
            type.
        HIGH: Partial sums are rounded to the output's type after each K tile.
        MEDIUM: A and B are also rounded to bfp16 blocks for the multiplies,
            where the device has bfp16 MACs.

    Example:
        >>> Precision.MEDIUM.allows(Precision.HIGH)
        True
        >>> Precision.HIGHEST.allows("medium")
        False
    """

    HIGHEST = "highest"
    HIGH = "high"
    MEDIUM = "medium"

    @classmethod
    def _missing_(cls, value: object) -> Precision:
        if isinstance(value, str):
            for member in cls:
                if member.value == value.lower():
                    return member
        names = ", ".join(repr(m.value) for m in cls)
        raise ValueError(
            f"{value!r} is not a Precision; give one of {names} "
            f"(or Precision.HIGHEST, Precision.HIGH, Precision.MEDIUM)"
        )

    @property
    def _rank(self) -> int:
        """How many roundings this level allows, HIGHEST being 0."""
        return list(type(self)).index(self)

    def allows(self, other: Precision | str) -> bool:
        """Whether this level permits every rounding ``other`` permits.

        A level allows itself and every level above it: MEDIUM allows HIGH
        and HIGHEST, HIGH allows HIGHEST, and HIGHEST allows only itself.

        Args:
            other: A `Precision`, or its value as a string.

        Returns:
            True when a kernel written for ``other`` is acceptable here.

        Raises:
            ValueError: ``other`` names no precision.
        """
        return self._rank >= type(self)(other)._rank
