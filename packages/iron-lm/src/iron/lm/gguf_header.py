"""The GGUF header, walked and checked before anything trusts it.

The ``gguf`` package's reader trusts the file it reads (a string array of
2**60 items is a loop of 2**60 steps). :func:`walk_header` reads the header
first with every count and length checked against the bytes left in the
file, and every tensor's type, shape and byte range against its block size,
the file's end and the other tensors. Any disagreement is a
:class:`~iron.lm.checkpoint.GGUFError` naming the file and the key or
tensor; nothing is allocated from a count the file has not proved it holds.
The format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iron.lm.checkpoint import GGUFError

__all__ = [
    "INTEGER_TYPES",
    "NUMBER_TYPES",
    "SUPPORTED_TYPES",
    "GGUFTensor",
    "walk_header",
]

#: The tensor types IRON reads: the floats held as bf16; Q8_0, Q4_0, Q4_1,
#: Q4_K and Q6_K kept quantized on the device; Q5_K (Q5_K_M files) dequantized
#: to bf16 as it loads (no device format holds its five-bit codes and minimums).
SUPPORTED_TYPES = (
    "F32",
    "F16",
    "BF16",
    "Q8_0",
    "Q4_0",
    "Q4_1",
    "Q4_K",
    "Q5_K",
    "Q6_K",
)
#: What to do with a file holding another type.
CONVERT_HINT = (
    "convert the model to one of them, e.g. with llama.cpp's llama-quantize to "
    "Q4_K_M, Q5_K_M or Q8_0, or export it as F16 or BF16"
)

_MAGIC = b"GGUF"
_VERSIONS = (2, 3)
#: ggml's GGML_MAX_DIMS.
_MAX_DIMS = 4
#: Sane limits, far above any published Llama's (a 405B Llama has about 1,150
#: tensors, 50 keys and arrays of at most a few hundred thousand items): a
#: count past them is refused before it is walked.
MAX_TENSORS = 1 << 16
MAX_KEYS = 1 << 16
MAX_ARRAY_ITEMS = 1 << 24

# Metadata value types (the format's gguf_type enum): name, fixed size.
_VALUE_TYPES: dict[int, tuple[str, int]] = {
    0: ("UINT8", 1),
    1: ("INT8", 1),
    2: ("UINT16", 2),
    3: ("INT16", 2),
    4: ("UINT32", 4),
    5: ("INT32", 4),
    6: ("FLOAT32", 4),
    7: ("BOOL", 1),
    8: ("STRING", 0),
    9: ("ARRAY", 0),
    10: ("UINT64", 8),
    11: ("INT64", 8),
    12: ("FLOAT64", 8),
}
_STRING, _ARRAY = 8, 9
#: The metadata value types that hold integers, and numbers.
INTEGER_TYPES = {
    "UINT8",
    "INT8",
    "UINT16",
    "INT16",
    "UINT32",
    "INT32",
    "UINT64",
    "INT64",
}
NUMBER_TYPES = INTEGER_TYPES | {"FLOAT32", "FLOAT64"}


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor as the GGUF header describes it.

    Attributes:
        name: Its llama.cpp name (``blk.0.attn_q.weight``).
        type_name: Its ggml type (``Q4_K``).
        shape: numpy order, rows first (the reverse of the file's dims).
        begin: Absolute byte offset of its data in the file.
        end: One past its last byte.
    """

    name: str
    type_name: str
    shape: tuple[int, ...]
    begin: int
    end: int


class _Walker:
    """Reads the header from bytes, refusing any length the file cannot hold."""

    def __init__(self, path: Path, data: Any, size: int) -> None:
        self.path, self.data, self.size, self.at = path, data, size, 0

    def fail(self, what: str) -> GGUFError:
        return GGUFError(f"GGUF file {str(self.path)!r}: {what}")

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.at + n > self.size:
            raise self.fail(
                f"{what} needs {n} bytes at offset {self.at}, past the file's end "
                f"({self.size} bytes): the file is truncated or its header lies"
            )
        out = self.data[self.at : self.at + n]
        self.at += n
        return bytes(out)

    def u32(self, what: str) -> int:
        return struct.unpack("<I", self.take(4, what))[0]

    def u64(self, what: str) -> int:
        return struct.unpack("<Q", self.take(8, what))[0]

    def string(self, what: str) -> str:
        n = self.u64(f"the length of {what}")
        raw = self.take(n, f"{what} ({n} bytes)")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not UTF-8 text") from None

    def skip_value(self, kind: int, key: str) -> None:
        if kind == _STRING:
            n = self.u64(f"the length of the value of {key!r}")
            self.take(n, f"the value of {key!r} ({n} bytes)")
        elif kind == _ARRAY:
            inner = self.u32(f"the item type of {key!r}")
            count = self.u64(f"the item count of {key!r}")
            if inner == _ARRAY:
                raise self.fail(
                    f"key {key!r} is an array of arrays, which no Llama key is and "
                    "IRON does not read"
                )
            if inner not in _VALUE_TYPES:
                raise self.fail(f"key {key!r} is an array of unknown type {inner}")
            if count > MAX_ARRAY_ITEMS:
                raise self.fail(
                    f"key {key!r} claims {count} items, more than the "
                    f"{MAX_ARRAY_ITEMS} IRON reads: the header is damaged or lies"
                )
            width = _VALUE_TYPES[inner][1]
            if inner == _STRING:
                # Each string is at least its 8-byte length: a count the file
                # cannot hold is refused before the loop, never walked.
                if count * 8 > self.size - self.at:
                    raise self.fail(
                        f"key {key!r} claims {count} strings, more than the "
                        f"{self.size - self.at} bytes left can hold"
                    )
                for _ in range(count):
                    self.skip_value(_STRING, key)
            else:
                self.take(count * width, f"the {count} items of {key!r}")
        elif kind in _VALUE_TYPES:
            self.take(_VALUE_TYPES[kind][1], f"the value of {key!r}")
        else:
            raise self.fail(f"key {key!r} has unknown value type {kind}")


def walk_header(path: Path, data: Any, size: int) -> list[GGUFTensor]:
    """Check the header of ``data`` (the mapped file) and return its tensors.

    Args:
        path: The file, for messages.
        data: Its bytes (a mapping or ``bytes``).
        size: How many bytes ``data`` holds.

    Raises:
        GGUFError: A count, length, type, shape or byte range the file cannot
            hold or IRON does not read, naming the key or tensor.
    """
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    w = _Walker(path, data, size)
    if w.take(4, "the magic") != _MAGIC:
        raise w.fail("it does not start with the GGUF magic 'GGUF': not a GGUF file")
    version = w.u32("the version")
    if version not in _VERSIONS:
        raise w.fail(
            f"format version {version} (IRON reads versions "
            f"{', '.join(map(str, _VERSIONS))}; a big-endian file reads as a huge "
            "version)"
        )
    n_tensors = w.u64("the tensor count")
    n_kv = w.u64("the metadata count")
    if n_tensors > MAX_TENSORS or n_kv > MAX_KEYS:
        raise w.fail(
            f"the header claims {n_kv} metadata keys and {n_tensors} tensors; IRON "
            f"reads at most {MAX_KEYS} and {MAX_TENSORS}: the header is damaged or "
            "lies"
        )
    # A key is at least 8 + 0 + 4 + 1 bytes, a tensor 8 + 4 + 8 + 4 + 8.
    if n_kv * 13 + n_tensors * 32 > size - w.at:
        raise w.fail(
            f"the header claims {n_kv} metadata keys and {n_tensors} tensors, more "
            f"than its {size} bytes can hold"
        )
    alignment = 32
    for i in range(n_kv):
        key = w.string(f"the name of metadata key {i}")
        kind = w.u32(f"the type of {key!r}")
        if key == "general.alignment":
            if kind != 4:
                raise w.fail(
                    f"key 'general.alignment' has type "
                    f"{_VALUE_TYPES.get(kind, (kind,))[0]}, not UINT32"
                )
            alignment = w.u32("the value of 'general.alignment'")
            if alignment == 0 or alignment & (alignment - 1):
                raise w.fail(
                    f"key 'general.alignment' is {alignment}, not a power of two"
                )
            continue
        w.skip_value(kind, key)
    tensors: list[tuple[str, int, tuple[int, ...], int]] = []
    names: set[str] = set()
    for i in range(n_tensors):
        name = w.string(f"the name of tensor {i}")
        if name in names:
            raise w.fail(f"tensor {name!r} is named twice")
        names.add(name)
        n_dims = w.u32(f"the dimension count of tensor {name!r}")
        if not 1 <= n_dims <= _MAX_DIMS:
            raise w.fail(
                f"tensor {name!r} has {n_dims} dimensions (ggml allows 1 to {_MAX_DIMS})"
            )
        dims = tuple(w.u64(f"the dimensions of tensor {name!r}") for _ in range(n_dims))
        kind = w.u32(f"the type of tensor {name!r}")
        offset = w.u64(f"the data offset of tensor {name!r}")
        tensors.append((name, kind, dims, offset))
    start = -(-w.at // alignment) * alignment
    out: list[GGUFTensor] = []
    for name, kind, dims, offset in tensors:
        try:
            qtype = GGMLQuantizationType(kind)
        except ValueError:
            raise w.fail(
                f"tensor {name!r} has unknown ggml type {kind}; IRON reads "
                f"{', '.join(SUPPORTED_TYPES)}: {CONVERT_HINT}"
            ) from None
        if qtype.name not in SUPPORTED_TYPES:
            raise w.fail(
                f"tensor {name!r} has type {qtype.name}, which IRON does not read; "
                f"supported: {', '.join(SUPPORTED_TYPES)}: {CONVERT_HINT}"
            )
        block, block_bytes = GGML_QUANT_SIZES[qtype]
        if any(d == 0 for d in dims):
            raise w.fail(f"tensor {name!r} has an empty dimension: {list(dims)}")
        if dims[0] % block:
            raise w.fail(
                f"tensor {name!r} is {qtype.name} (blocks of {block}) but its rows "
                f"have {dims[0]} elements, not a multiple of {block}"
            )
        nbytes = math.prod(dims) // block * block_bytes
        begin = start + offset
        if begin + nbytes > size:
            raise w.fail(
                f"tensor {name!r} ({qtype.name} {list(dims)}, {nbytes} bytes at "
                f"offset {begin}) ends past the file's end ({size} bytes): the file is "
                "truncated or its header lies"
            )
        out.append(
            GGUFTensor(name, qtype.name, tuple(reversed(dims)), begin, begin + nbytes)
        )
    ordered = sorted(out, key=lambda t: t.begin)
    for a, b in zip(ordered, ordered[1:]):
        if b.begin < a.end:
            raise w.fail(
                f"tensors {a.name!r} (bytes {a.begin}-{a.end}) and {b.name!r} "
                f"(bytes {b.begin}-{b.end}) overlap"
            )
    return out
