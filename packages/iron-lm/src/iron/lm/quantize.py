"""Quantizing a bf16 checkpoint while loading: ``weights="q8"`` or ``"q4"``.

:func:`quantize_checkpoint` takes an opened safetensors checkpoint and writes
its projections, embedding and LM head in a device format
(``iron.operators.quantized``: ``q8`` is llama.cpp's Q8_0 scheme, ``q4`` its
Q4_1, groups of 32, rounding to nearest) into an unlinked scratch file, a
bounded number of rows at a time, releasing each piece's checkpoint pages
once read: host memory holds one piece in flight, never the model twice.
The packed weights are views of the scratch file's mapping, whose pages the
upload releases as it goes, as a checkpoint's.

Norms stay bf16, and so does a matrix whose rows are not a multiple of
:data:`iron.operators.qmatmul.K_MULTIPLE` (64) elements (logged).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from iron.lm._scratch import ScratchWeights, ScratchWriter
from iron.lm.checkpoint import Checkpoint, CheckpointError
from iron.operators.qmatmul import K_MULTIPLE
from iron.operators.quantized import FORMATS, QuantFormat, quantize

__all__ = ["WEIGHTS", "QuantizedCheckpoint", "check_weights", "quantize_checkpoint"]

logger = logging.getLogger("iron.lm")

#: What ``weights=`` takes (None: the checkpoint's own, bf16 for safetensors).
WEIGHTS = ("bf16", "q8", "q4")
#: Float32 bytes of the source quantized per piece.
_PIECE = 8 << 20


def check_weights(weights: Any, *, gguf: Path | None = None) -> None:
    """Refuse a ``weights=`` value by name.

    Raises:
        TypeError: Not a string or None.
        ValueError: None of :data:`WEIGHTS`, or ``"q8"``/``"q4"`` for a GGUF
            file (its own types are used as they are).
    """
    takes = "'bf16', 'q8' or 'q4' (or None: the checkpoint's own)"
    if weights is not None and not isinstance(weights, str):
        raise TypeError(f"weights takes {takes}, got {weights!r}")
    if weights is not None and weights not in WEIGHTS:
        raise ValueError(f"weights takes {takes}, got {weights!r}")
    if gguf is not None and weights in ("q8", "q4"):
        raise ValueError(
            f"weights={weights!r} quantizes a bf16 safetensors checkpoint; GGUF file "
            f"{str(gguf)!r} is used with its own types: give weights=None (its "
            "quantized types kept) or 'bf16' (dequantized)"
        )


def _quantizable(name: str, tensor: np.ndarray) -> bool:
    return tensor.ndim == 2 and name.endswith(".weight") and "norm" not in name


class QuantizedCheckpoint:
    """A checkpoint whose matrices are quantized into a scratch file.

    Serves as the checkpoint it wraps (``config``, ``directory``, ``files``,
    ``verify``, ``close``); ``release`` drops pages of either mapping.

    Attributes:
        source: The wrapped :class:`~iron.lm.checkpoint.Checkpoint`.
        format: The device format of the quantized weights.
    """

    def __init__(self, source: Checkpoint, fmt: QuantFormat) -> None:
        self.source = source
        self.format = fmt
        self.config = source.config
        self.directory = source.directory
        self.files = source.files
        self._scratch: ScratchWeights | None = None
        self._views: dict[str, np.ndarray] = {}
        self._formats: dict[str, QuantFormat | None] = {}

    def formats(self) -> dict[str, QuantFormat | None]:
        """Each weight's device format by name (None: kept bf16)."""
        return dict(self._formats)

    def packed(self) -> dict[str, np.ndarray]:
        """The quantized weights by name: ``(rows, row_bytes)`` uint8 views."""
        return dict(self._views)

    def _write(self, tensors: Mapping[str, np.ndarray]) -> None:
        chosen = {}
        for name, t in tensors.items():
            if not _quantizable(name, t):
                continue
            if t.shape[1] % K_MULTIPLE:
                logger.info(
                    "%s: %s has rows of %d elements, not a multiple of %d: kept bf16",
                    self.directory,
                    name,
                    t.shape[1],
                    K_MULTIPLE,
                )
                self._formats[name] = None
                continue
            chosen[name] = t
        total = sum(self.format.nbytes(t.shape) for t in chosen.values())
        writer = ScratchWriter(
            self.directory,
            total,
            prefix=".iron-quant-",
            what=str(self.directory),
            error=CheckpointError,
        )
        try:
            for name, t in chosen.items():
                writer.tensor(
                    name, (t.shape[0], self.format.row_bytes(t.shape[1])), np.uint8
                )
                for piece in self._pieces(name, t):
                    writer.write(piece)
                self._formats[name] = self.format
        except BaseException:
            writer.abandon()
            raise
        self._scratch = writer.finish()
        self._views = dict(self._scratch.views)

    def _pieces(self, name: str, tensor: np.ndarray) -> Iterator[np.ndarray]:
        rows, cols = tensor.shape
        step = max(1, _PIECE // (4 * cols))
        for start in range(0, rows, step):
            source = tensor[start : start + step]
            try:
                yield quantize(source, self.format)
            except ValueError as e:
                raise CheckpointError(
                    f"{self.directory}: {name} (rows from {start}) cannot be "
                    f"quantized to {self.format.name}: {e}"
                ) from None
            self.source.release(source)

    def verify(self) -> None:
        """The wrapped checkpoint's check that its shards are unchanged."""
        self.source.verify()

    def release(self, piece: np.ndarray | str) -> int:
        """Drop the pages behind ``piece`` (a quantized view or a checkpoint's)."""
        if isinstance(piece, str):
            if piece not in self._views:
                return self.source.release(piece)
            piece = self._views[piece]
        dropped = self._scratch.release(piece) if self._scratch is not None else 0
        return dropped or self.source.release(piece)

    def close(self) -> None:
        """Close the wrapped checkpoint and unmap the scratch weights."""
        self._views.clear()
        if self._scratch is not None:
            self._scratch.close()
            self._scratch = None
        self.source.close()

    def __repr__(self) -> str:
        n = sum(f is not None for f in self._formats.values())
        return f"QuantizedCheckpoint({self.source!r}, {n} weights {self.format.name})"


def quantize_checkpoint(
    checkpoint: Checkpoint, tensors: Mapping[str, np.ndarray], weights: str
) -> QuantizedCheckpoint:
    """Quantize ``tensors``' matrices (views of ``checkpoint``) to ``weights``.

    Args:
        checkpoint: The opened checkpoint ``tensors`` come from.
        tensors: The tensors to bind, by name (checked finite).
        weights: ``"q8"`` or ``"q4"``.

    Returns:
        The wrapping checkpoint: :meth:`QuantizedCheckpoint.packed` holds the
        quantized weights, the other tensors are bound as they are.
    """
    check_weights(weights)
    fmt = FORMATS[weights]
    out = QuantizedCheckpoint(checkpoint, fmt)
    out._write(tensors)
    return out
