"""Device weights laid out in an unlinked, memory-mapped scratch file.

A GGUF file's tensors (repacked or dequantized) and a checkpoint quantized
while loading are written here piece by piece, in the layout the device
takes, so host memory never holds a model's weights twice: the file is
opened beside the checkpoint (else in the system's temporary directory)
already unlinked, so nothing is left behind even by a crash, and its
mapping keeps the pages. Each tensor is a view of the mapping;
:meth:`ScratchWeights.release` drops a view's pages once it is uploaded.
"""

from __future__ import annotations

import math
import mmap
import os
import tempfile
from pathlib import Path
from typing import IO, Any

import numpy as np


class ScratchWeights:
    """The mapped scratch file and each tensor's view of it, by name."""

    def __init__(self, mapped: mmap.mmap | None, views: dict[str, np.ndarray]) -> None:
        self._mapped = mapped
        self.views = views

    def release(self, piece: np.ndarray) -> int:
        """``madvise(DONTNEED)`` the pages under ``piece``, a view of the file.

        Returns:
            The bytes advised away: 0 when ``piece`` is not a contiguous view
            of this file or the platform has no madvise.
        """
        return drop_pages(self._mapped, piece)

    def close(self) -> None:
        """Forget the views and unmap the file (live views keep their pages)."""
        self.views = {}
        if self._mapped is not None:
            try:
                self._mapped.close()
            except BufferError:
                pass  # views are alive; the mapping goes with them
            self._mapped = None


class ScratchWriter:
    """Writes named tensors, piece by piece, into a new scratch file.

    Args:
        directory: Where to try first (the checkpoint's folder).
        nbytes: The bytes every tensor takes together.
        prefix: The unlinked file's name prefix (``.iron-gguf-``).
        what: Names the source in errors (``GGUF file 'x.gguf'``).
        error: The error to raise (a ``ValueError`` subclass of the caller's).

    Raises:
        error: Neither place has ``nbytes`` of free disk.
    """

    def __init__(
        self, directory: Path, nbytes: int, *, prefix: str, what: str, error: type
    ) -> None:
        self.nbytes = nbytes
        self.what = what
        self.error = error
        self._file = _unlinked(directory, nbytes, prefix, what, error)
        self._at = 0
        self._layout: dict[str, tuple[int, tuple[int, ...], Any]] = {}

    def tensor(self, name: str, shape: tuple[int, ...], dtype: Any) -> None:
        """The pieces written next are ``name``'s, of ``shape`` and ``dtype``."""
        self._layout[name] = (self._at, tuple(shape), np.dtype(dtype))

    def write(self, piece: np.ndarray) -> None:
        """Append ``piece``'s bytes (C order) to the current tensor."""
        data = np.ascontiguousarray(piece)
        try:
            self._file.write(data.view(np.uint8).data)
        except OSError as e:
            self._failed(e)
        self._at += data.nbytes

    def finish(self) -> ScratchWeights:
        """Map the file and return each tensor's view; the file is closed."""
        try:
            self._file.flush()
            mapped = (
                mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
                if self._at
                else None
            )
        except OSError as e:
            self._failed(e)
        finally:
            self._file.close()  # unlinked: the mapping keeps its pages alive
        views = {}
        for name, (begin, shape, dtype) in self._layout.items():
            count = math.prod(shape)
            if mapped is None:
                views[name] = np.zeros(shape, dtype)
                continue
            views[name] = np.frombuffer(mapped, dtype, count, begin).reshape(shape)
        return ScratchWeights(mapped, views)

    def abandon(self) -> None:
        """Close the file without mapping it (writing failed)."""
        self._file.close()

    def _failed(self, e: OSError) -> None:
        self._file.close()
        raise self.error(
            f"{self.what}: writing its device weights to the scratch file failed "
            f"({e}); free {self.nbytes / 2**20:.0f} MiB of disk beside it or in "
            "the temporary directory"
        ) from None


def drop_pages(mapped: mmap.mmap | None, piece: np.ndarray) -> int:
    """``madvise(DONTNEED)`` the pages of ``mapped`` under ``piece``, a view of it.

    For a read-only file mapping (the scratch file, or the checkpoint file
    itself) this only lets the pages go: a later read maps them again.

    Returns:
        The bytes advised away: 0 when ``piece`` is not a contiguous view
        of ``mapped`` or the platform has no madvise.
    """
    advise = getattr(mapped, "madvise", None)
    flag = getattr(mmap, "MADV_DONTNEED", None)
    if mapped is None or advise is None or flag is None:
        return 0
    if not isinstance(piece, np.ndarray) or piece.size == 0:
        return 0
    if not piece.flags.c_contiguous:
        return 0
    base = np.frombuffer(mapped, np.uint8).ctypes.data
    lo = piece.ctypes.data - base
    hi = lo + piece.nbytes
    if lo < 0 or hi > len(mapped):
        return 0
    page = mmap.PAGESIZE
    start, stop = lo // page * page, min(-(-hi // page) * page, len(mapped))
    if stop <= start:
        return 0
    advise(flag, start, stop - start)
    return stop - start


def _unlinked(
    directory: Path, nbytes: int, prefix: str, what: str, error: type
) -> IO[bytes]:
    """An unlinked file with ``nbytes`` free: beside the checkpoint, else in
    the system's temporary directory."""
    for where in (directory, None):
        try:
            f = tempfile.TemporaryFile(dir=where, prefix=prefix)
        except OSError:
            continue
        try:
            st = os.statvfs(f.fileno())
            free = st.f_bavail * st.f_frsize
        except (OSError, AttributeError):
            free = nbytes
        if free >= nbytes:
            return f
        f.close()
    raise error(
        f"{what}: laying out its weights for the device needs "
        f"{nbytes / 2**20:.0f} MiB of scratch disk beside it or in the temporary "
        "directory, and neither has that much free"
    )
