"""The iron-operators distribution's version; hatch reads it when building."""

__version__ = "0.1.0"
