"""The iron-core implementation modules; public names are re-exported lazily by ``iron``."""
