"""The version of the iron-lm distribution (read by hatch at build time)."""

__version__ = "0.1.0"
