"""Hugging Face safetensors checkpoints, memory-mapped: open, read, release.

``open_checkpoint(directory)`` finds ``config.json`` and every
``*.safetensors`` shard (through ``model.safetensors.index.json`` when there
is one), validates each shard with the safetensors library, and maps each file
read-only. ``Checkpoint.tensor(name)`` is a zero-copy numpy view of the mapped
bytes (bf16 as ``ml_dtypes.bfloat16``), so nothing is read until it is used,
and ``Checkpoint.release(piece)`` drops the pages of a piece once it has been
uploaded: loading a model keeps host memory near what is in flight, not the
model twice.

Why not ``safe_open(..., framework="numpy").get_tensor``: it copies every
tensor into a fresh heap buffer (no mapping to release), and safetensors
before 0.6 cannot build bf16 numpy arrays at all. So safetensors checks the
files (``safe_open`` parses and validates the header: offsets in bounds,
contiguous, no overlap) and names the tensors; the data offsets come from the
header as the format documents it (https://github.com/huggingface/safetensors
README, "Format": an 8-byte little-endian header size N, N bytes of JSON
mapping each name to {"dtype", "shape", "data_offsets": [begin, end]} with
offsets relative to the byte after the header, an optional "__metadata__"
string map, then the data), and numpy views slices of an ``mmap.mmap``.

``write_safetensors`` and ``save_checkpoint`` write the same format (with
bf16, whatever safetensors version is installed): the tiny model and the
tests use them.
"""

from __future__ import annotations

import json
import logging
import math
import mmap
import os
import struct
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

from iron.lm.config import LlamaConfig

__all__ = [
    "GGUFError",
    "Checkpoint",
    "CheckpointChangedError",
    "CheckpointError",
    "CheckpointNotFoundError",
    "NonFiniteWeightError",
    "TensorInfo",
    "open_checkpoint",
    "read_header",
    "save_checkpoint",
    "write_safetensors",
]

logger = logging.getLogger("iron.lm")

INDEX_NAME = "model.safetensors.index.json"
CONFIG_NAME = "config.json"
#: safetensors refuses headers above 100 MB; so does this reader.
_MAX_HEADER = 100_000_000

# The safetensors dtype names and the numpy dtypes they view as.
_DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"),
    "U32": np.dtype("<u4"),
    "U16": np.dtype("<u2"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_NAMES = {dt: name for name, dt in _DTYPES.items()}
_FLOATS = {_DTYPES[n] for n in ("F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2")}


class CheckpointError(ValueError):
    """A checkpoint directory whose files are malformed or inconsistent."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """A checkpoint directory, or a file it must hold, that does not exist."""


class GGUFError(CheckpointError):
    """A GGUF file that is malformed, lies about its contents, or holds what
    IRON does not run; the message names the file and the key or tensor."""


class NonFiniteWeightError(CheckpointError):
    """A weight holding NaN or infinity, as stored or once narrowed to bf16.

    Such a model computes NaN logits, and every sampled token would be id 0.
    """


class CheckpointChangedError(CheckpointError, RuntimeError):
    """A shard file changed (rewritten, truncated, replaced) while it is mapped.

    Reading its pages again would read other bytes, or kill the process with
    SIGBUS where the file got shorter.
    """


#: Elements checked for non-finite values at a time (bounds the scratch).
_SCAN_ELEMENTS = 1 << 22
#: The bit pattern of bf16's exponent: all ones is infinity or NaN.
_BF16_EXPONENT = 0x7F80


@dataclass(frozen=True)
class TensorInfo:
    """Where one tensor lives: its shard and its byte range in that file."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    path: Path
    begin: int  # absolute byte offset in the file
    end: int


class _Shard:
    """One mapped safetensors file."""

    def __init__(self, path: Path, infos: dict[str, TensorInfo]) -> None:
        self.path = path
        self.infos = infos
        with open(path, "rb") as f:
            self.stat = _identity(os.fstat(f.fileno()))
            self.mmap = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        # A byte view of the whole mapping: tensors are slices of it, and its
        # address tells release() which pages a piece covers.
        self.bytes = np.frombuffer(self.mmap, dtype=np.uint8)
        self.address = self.bytes.ctypes.data

    def check_unchanged(self) -> None:
        """Raise if the file is not the one mapped (size, mtime, inode)."""
        try:
            now = _identity(os.stat(self.path))
        except OSError as e:
            raise CheckpointChangedError(
                f"shard {str(self.path)!r} was removed or cannot be read while "
                f"loaded ({e.strerror}); reopen the checkpoint once it is whole"
            ) from None
        if now != self.stat:
            was = dict(zip(("size", "mtime_ns", "inode", "device"), self.stat))
            is_ = dict(zip(("size", "mtime_ns", "inode", "device"), now))
            what = ", ".join(
                f"{k} {was[k]} -> {is_[k]}" for k in was if was[k] != is_[k]
            )
            raise CheckpointChangedError(
                f"shard {str(self.path)!r} changed on disk while loaded ({what}); "
                "its mapped bytes are no longer the checkpoint that was opened. "
                "Load the checkpoint again (a new Decoder/Llama.from_pretrained) "
                "once it is written, and do not write a checkpoint in place "
                "while it is in use"
            )

    def close(self) -> None:
        self.bytes = None  # type: ignore[assignment]  # closed: nothing mapped
        try:
            self.mmap.close()
        except BufferError:
            # Views of it are still alive; the mapping goes when they do.
            pass


class Checkpoint:
    """An opened checkpoint directory: the config and the mapped tensors.

    Attributes:
        directory: The checkpoint directory.
        config: Its parsed ``config.json``.
        files: The shard files, in name order.
    """

    def __init__(
        self, directory: Path, config: LlamaConfig, shards: list[_Shard]
    ) -> None:
        self.directory = directory
        self.config = config
        self._shards = shards
        self.files: tuple[Path, ...] = tuple(s.path for s in shards)
        self._where: dict[str, _Shard] = {}
        for shard in shards:
            for name in shard.infos:
                self._where[name] = shard

    # -- what is there ---------------------------------------------------------

    def names(self) -> list[str]:
        """Every tensor name, shard by shard in file order."""
        return list(self._where)

    def __contains__(self, name: object) -> bool:
        return name in self._where

    def __len__(self) -> int:
        return len(self._where)

    def info(self, name: str) -> TensorInfo:
        """Where ``name`` is stored (shard, byte range, dtype, shape)."""
        shard = self._where.get(name)
        if shard is None:
            raise KeyError(
                f"checkpoint {str(self.directory)!r} has no tensor {name!r}"
            ) from None
        return shard.infos[name]

    def shape(self, name: str) -> tuple[int, ...]:
        """The shape of tensor ``name`` (KeyError naming it if absent)."""
        return self.info(name).shape

    def dtype(self, name: str) -> np.dtype:
        """The dtype of tensor ``name`` (KeyError naming it if absent)."""
        return self.info(name).dtype

    @property
    def nbytes(self) -> int:
        """The tensor bytes of the whole checkpoint."""
        return sum(i.end - i.begin for s in self._shards for i in s.infos.values())

    # -- reading ---------------------------------------------------------------

    def tensor(self, name: str) -> np.ndarray:
        """A read-only, zero-copy view of ``name`` in its mapped shard.

        Nothing is read from disk until the view is touched. The view stays
        valid after ``release``: reading it again reads the file again.
        """
        info = self.info(name)
        shard = self._where[name]
        if shard.bytes is None:
            raise ValueError(f"checkpoint {str(self.directory)!r} is closed")
        count = math.prod(info.shape)
        view = np.frombuffer(shard.mmap, info.dtype, count, info.begin)
        return view.reshape(info.shape)

    def verify(self) -> None:
        """Check that every shard is still the file that was mapped.

        Compares each file's size, modification time and inode with those
        seen when it was opened. Call it before touching mapped pages again
        (an upload after ``graph.release()``): a file rewritten in place
        would give other bytes, and one truncated would kill the process
        with SIGBUS.

        Raises:
            CheckpointChangedError: A shard changed, naming it and what changed.
        """
        for shard in self._shards:
            if shard.bytes is not None:
                shard.check_unchanged()

    def check_finite(self, names: Iterable[str] | None = None) -> None:
        """Check that every floating tensor is finite once narrowed to bf16.

        NaN or infinity as stored, and float32 values beyond bf16's range
        (about 3.39e38, which narrow to infinity), are refused. The tensors
        are read a piece at a time and their pages released as they go.

        Args:
            names: The tensors to check (default: every one).

        Raises:
            NonFiniteWeightError: Naming the first such tensor, the index of
                its first such element and its value.
            CheckpointChangedError: A shard changed since it was opened.
        """
        self.verify()
        for name in self.names() if names is None else names:
            view = self.tensor(name)
            if view.dtype not in _FLOATS:
                continue
            flat = view.reshape(-1)
            for start in range(0, flat.size, _SCAN_ELEMENTS):
                piece = flat[start : start + _SCAN_ELEMENTS]
                narrowed = piece.astype(ml_dtypes.bfloat16, copy=False)
                bad = np.flatnonzero(
                    (narrowed.view(np.uint16) & _BF16_EXPONENT) == _BF16_EXPONENT
                )
                self._drop_pages(piece)
                if bad.size:
                    self._non_finite(name, view, start + int(bad[0]))

    def _non_finite(self, name: str, view: np.ndarray, flat_index: int) -> None:
        index = tuple(int(i) for i in np.unravel_index(flat_index, view.shape))
        value = view.reshape(-1)[flat_index]
        stored = str(value)
        if math.isfinite(float(value)):
            stored = (
                f"{stored}, beyond bfloat16's range: it narrows to infinity "
                f"({view.dtype} to bfloat16)"
            )
        raise NonFiniteWeightError(
            f"tensor {name!r} in {str(self.info(name).path)!r} holds a non-finite "
            f"value at index {index}: {stored}. A model with it computes NaN and "
            "generates nothing but token 0; the checkpoint is damaged or was "
            "saved wrongly (re-download or re-export it)"
        )

    def tree(self) -> Mapping[str, np.ndarray]:
        """Every tensor by name, as a Mapping that maps each on access."""
        return _Tree(self)

    def release(self, piece: np.ndarray | str) -> int:
        """Drop the host pages behind ``piece`` once it has been uploaded.

        ``piece`` is a view from ``tensor`` (or any slice of one), or a
        tensor name for all of it. The pages it touches are given back with
        ``madvise(MADV_DONTNEED)``; the mapping is read-only and backed by the
        file, so nothing is lost: touching them again reads them again.
        Pages are rounded outward, so a neighbour sharing an edge page may be
        re-read. An array that is not a view of this checkpoint (a converted
        copy), or a platform without madvise, makes it a no-op.

        Returns:
            The number of mapped bytes advised away (0 for a no-op).
        """
        if isinstance(piece, str):
            piece = self.tensor(piece)
        return self._drop_pages(piece)

    def _drop_pages(self, piece: np.ndarray) -> int:
        if not isinstance(piece, np.ndarray) or piece.size == 0:
            return 0
        lo, hi = _byte_bounds(piece)
        for shard in self._shards:
            if shard.bytes is None:
                continue
            base, size = shard.address, len(shard.bytes)
            if base <= lo and hi <= base + size:
                return _dont_need(shard.mmap, lo - base, hi - base, size)
        return 0

    # -- lifetime ---------------------------------------------------------------

    def close(self) -> None:
        """Unmap the shards (those with views still alive go with the views)."""
        for shard in self._shards:
            shard.close()

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Checkpoint({str(self.directory)!r}, {len(self)} tensors in "
            f"{len(self._shards)} shard(s), {self.nbytes / 2**20:.1f} MiB)"
        )


class _Tree(Mapping):
    def __init__(self, checkpoint: Checkpoint) -> None:
        self._checkpoint = checkpoint

    def __getitem__(self, name: str) -> np.ndarray:
        return self._checkpoint.tensor(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._checkpoint.names())

    def __len__(self) -> int:
        return len(self._checkpoint)

    def __contains__(self, name: object) -> bool:
        return name in self._checkpoint


# -- opening -------------------------------------------------------------------


def open_checkpoint(directory: str | os.PathLike[str]) -> Checkpoint:
    """Open a Hugging Face checkpoint directory, memory-mapped.

    Reads ``config.json`` (as a ``LlamaConfig``: unsupported models are
    refused here) and maps every shard: the ones
    ``model.safetensors.index.json`` names, or else every ``*.safetensors``
    in the directory.

    Raises:
        CheckpointNotFoundError: No such directory, no config.json, no
            shards, or a shard the index names is missing.
        CheckpointError: A shard that is not valid safetensors, a name in two
            shards, an index naming a tensor its shard lacks.
        UnsupportedModelError: config.json describes a model IRON does not
            run (see ``LlamaConfig.from_dict``).
    """
    root = Path(directory)
    if not root.is_dir():
        what = "is not a directory" if root.exists() else "does not exist"
        raise CheckpointNotFoundError(
            f"checkpoint directory {str(root)!r} {what}; pass the folder that "
            "holds config.json and the *.safetensors files"
        )
    if not (root / CONFIG_NAME).is_file():
        raise CheckpointNotFoundError(
            f"checkpoint directory {str(root)!r} has no {CONFIG_NAME}; a Hugging "
            "Face checkpoint keeps it beside the *.safetensors files"
        )
    config = LlamaConfig.from_json(root / CONFIG_NAME)

    index = root / INDEX_NAME
    if index.is_file():
        wanted = _read_index(index)
        files = sorted(set(wanted.values()))
    else:
        wanted = None
        files = sorted(p.name for p in root.glob("*.safetensors") if p.is_file())
        if not files:
            raise CheckpointNotFoundError(
                f"checkpoint directory {str(root)!r} has no *.safetensors files "
                "(IRON reads safetensors weights only, not *.bin or *.pth)"
            )

    shards: list[_Shard] = []
    seen: dict[str, Path] = {}
    try:
        for file in files:
            path = root / file
            if not path.is_file():
                raise CheckpointNotFoundError(
                    f"shard {file!r} named by {str(index)!r} is missing"
                )
            infos = read_header(path)
            if wanted is not None:
                infos = {n: i for n, i in infos.items() if wanted.get(n) == file}
            for name in infos:
                if name in seen:
                    raise CheckpointError(
                        f"tensor {name!r} is in both {str(seen[name])!r} and "
                        f"{str(path)!r}"
                    )
                seen[name] = path
            shards.append(_Shard(path, infos))
        if wanted is not None:
            lost = [n for n in wanted if n not in seen]
            if lost:
                raise CheckpointError(
                    f"{str(index)!r} maps {len(lost)} tensor(s) to shards that do "
                    f"not hold them: {', '.join(repr(n) for n in lost[:8])}"
                    + (" ..." if len(lost) > 8 else "")
                )
    except BaseException:
        for shard in shards:
            shard.close()
        raise
    checkpoint = Checkpoint(root, config, shards)
    logger.info("opened %r", checkpoint)
    return checkpoint


def _read_index(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        weight_map = data["weight_map"]
        if not isinstance(weight_map, dict) or not all(
            isinstance(v, str) for v in weight_map.values()
        ):
            raise TypeError("'weight_map' must map names to file names")
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(
            f"{str(path)!r} is not a safetensors index (a JSON object with a "
            f"'weight_map'): {e}"
        ) from None
    for file in set(weight_map.values()):
        if Path(file).name != file:
            raise CheckpointError(
                f"{str(path)!r} names shard {file!r} outside its directory"
            )
    return weight_map


def read_header(path: str | os.PathLike[str]) -> dict[str, TensorInfo]:
    """The tensors of one safetensors file, in file order, validated.

    safetensors' ``safe_open`` validates the file; the offsets are read from
    the header as the format documents it (see the module docstring).
    """
    from safetensors import safe_open

    path = Path(path)
    try:
        with safe_open(str(path), framework="numpy") as f:
            names = set(f.keys())
    except Exception as e:  # safetensors raises its own SafetensorError
        raise CheckpointError(
            f"{str(path)!r} is not a valid safetensors file: {e}"
        ) from None
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        if size > _MAX_HEADER:
            raise CheckpointError(f"{str(path)!r} has a {size}-byte header")
        header = json.loads(f.read(size))
    start = 8 + size
    infos: list[TensorInfo] = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(entry["dtype"])
        if dtype is None:
            raise CheckpointError(
                f"tensor {name!r} in {str(path)!r} has dtype {entry['dtype']!r}, "
                f"which IRON does not read (supported: {', '.join(_DTYPES)})"
            )
        begin, end = entry["data_offsets"]
        infos.append(
            TensorInfo(
                name, dtype, tuple(entry["shape"]), path, start + begin, start + end
            )
        )
    if {i.name for i in infos} != names:
        raise CheckpointError(f"{str(path)!r}: header disagrees with safetensors")
    infos.sort(key=lambda i: i.begin)
    return {i.name: i for i in infos}


# -- releasing pages -----------------------------------------------------------


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    """What says a file is the one mapped: size, mtime, inode and device."""
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)


def _byte_bounds(a: np.ndarray) -> tuple[int, int]:
    """[lo, hi) addresses of every byte ``a`` can touch (any strides)."""
    lo = hi = a.ctypes.data
    for n, stride in zip(a.shape, a.strides):
        if stride < 0:
            lo += stride * (n - 1)
        else:
            hi += stride * (n - 1)
    return lo, hi + a.itemsize


def _dont_need(mm: mmap.mmap, begin: int, end: int, size: int) -> int:
    advise = getattr(mm, "madvise", None)
    flag = getattr(mmap, "MADV_DONTNEED", None)
    if advise is None or flag is None:
        return 0
    page = mmap.PAGESIZE
    start = begin // page * page
    stop = min(-(-end // page) * page, size)
    if stop <= start:
        return 0
    advise(flag, start, stop - start)
    return stop - start


# -- writing -------------------------------------------------------------------


def write_safetensors(
    path: str | os.PathLike[str],
    tensors: Mapping[str, np.ndarray],
    *,
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Write ``tensors`` as one safetensors file (bf16 and fp8 included).

    Tensors are laid out largest item size first, then by name, so each
    starts aligned to its item size; the header is padded with spaces to a
    multiple of 8 bytes, as safetensors' own writer does.
    """
    order = sorted(tensors, key=lambda n: (-np.asarray(tensors[n]).itemsize, n))
    header: dict[str, object] = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    arrays = []
    offset = 0
    for name in order:
        a = np.asarray(tensors[name])
        dtype = _NAMES.get(
            a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        )
        if dtype is None:
            raise TypeError(f"tensor {name!r} has dtype {a.dtype}, not storable")
        a = np.asarray(a, dtype=_DTYPES[dtype], order="C")
        header[name] = {
            "dtype": dtype,
            "shape": list(a.shape),
            "data_offsets": [offset, offset + a.nbytes],
        }
        arrays.append(a)
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for a in arrays:
            f.write(a.reshape(-1).view(np.uint8).data)


def save_checkpoint(
    directory: str | os.PathLike[str],
    config: LlamaConfig,
    state_dict: Mapping[str, np.ndarray],
    *,
    max_shard_bytes: int | None = None,
) -> list[Path]:
    """Write a Hugging Face style checkpoint: config.json and safetensors.

    One ``model.safetensors``, or, when the tensors exceed
    ``max_shard_bytes``, ``model-0000i-of-0000n.safetensors`` shards (tensors
    in name order, a new shard when the next would overflow) and a
    ``model.safetensors.index.json`` mapping each name to its shard.

    Returns:
        The shard paths written.
    """
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    config.to_json(root / CONFIG_NAME)
    groups: list[dict[str, np.ndarray]] = [{}]
    used = 0
    for name in sorted(state_dict):
        a = np.asarray(state_dict[name])
        if (
            max_shard_bytes is not None
            and groups[-1]
            and used + a.nbytes > max_shard_bytes
        ):
            groups.append({})
            used = 0
        groups[-1][name] = a
        used += a.nbytes
    meta = {"format": "pt"}  # what transformers expects of a safetensors file
    if len(groups) == 1:
        path = root / "model.safetensors"
        write_safetensors(path, groups[0], metadata=meta)
        return [path]
    paths, weight_map = [], {}
    for i, group in enumerate(groups, 1):
        path = root / f"model-{i:05d}-of-{len(groups):05d}.safetensors"
        write_safetensors(path, group, metadata=meta)
        paths.append(path)
        weight_map.update(dict.fromkeys(group, path.name))
    total = sum(np.asarray(a).nbytes for a in state_dict.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (root / INDEX_NAME).write_text(json.dumps(index, indent=2) + "\n", "utf-8")
    return paths


if sys.byteorder != "little":  # pragma: no cover - every Ryzen AI host is x86
    logger.warning("safetensors views assume a little-endian host")
